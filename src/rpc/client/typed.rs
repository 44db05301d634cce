//! The typed calls over any service of raw calls: what generated clients
//! call.

use std::future::poll_fn;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use prost::Message;
use tower::Service;

use super::{deadline::within, RawCall, RawReply};
use crate::{
    error::BoxError,
    rpc::{CallTimer, Code, Request, Response, Status, Streaming},
};

/// Waits for `transport` and calls it, as a `Status`.
async fn raw<T>(transport: &mut T, call: RawCall) -> Result<RawReply, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
{
    poll_fn(|cx| transport.poll_ready(cx))
        .await
        .map_err(|e| Status::from_error(e.into()))?;
    transport
        .call(call)
        .await
        .map_err(|e| Status::from_error(e.into()))
}

/// The method a typed call calls: its path (`package.Service/Method`),
/// and whether it is safe to repeat. A path alone (`"echo.Echo/Say"`) is
/// a method that is not; the generated clients name the methods the
/// .proto marks `idempotency_level = IDEMPOTENT` or `NO_SIDE_EFFECTS`
/// with [`Method::idempotent`], and their calls with one request may go
/// as early data ([`RawCall::idempotent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    path: &'static str,
    idempotent: bool,
}

impl Method {
    /// A method that is not safe to repeat.
    pub const fn new(path: &'static str) -> Self {
        Self {
            path,
            idempotent: false,
        }
    }

    /// A method safe to repeat: its calls with one request may go as
    /// early data.
    pub const fn idempotent(path: &'static str) -> Self {
        Self {
            path,
            idempotent: true,
        }
    }

    /// `package.Service/Method`.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// Whether it is safe to repeat.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }
}

impl From<&'static str> for Method {
    fn from(path: &'static str) -> Self {
        Self::new(path)
    }
}

/// The call of a method with one request message.
fn one_request<Req: Message>(method: Method, request: Request<Req>) -> RawCall {
    let call = RawCall::unary(
        method.path,
        request.metadata,
        request.message.encode_to_vec().into(),
    )
    .with_timeout(request.timeout);
    if method.idempotent {
        call.idempotent()
    } else {
        call
    }
}

/// The one reply of a unary or client-streaming call, and its end.
async fn only_reply<Resp: Message + Default>(replies: &mut Streaming<Resp>) -> Result<Resp, Status> {
    let message = replies
        .message()
        .await?
        .ok_or_else(|| Status::internal("the call succeeded without a reply message"))?;
    if replies.message().await?.is_some() {
        return Err(Status::internal("a call with one reply got more than one"));
    }
    Ok(message)
}

/// A call with one reply ends with what its caller gets.
fn finished<Resp>(result: Result<Resp, Status>, timer: Option<CallTimer>) -> Result<Resp, Status> {
    if let Some(timer) = timer {
        timer.finish(result.as_ref().map_or_else(Status::code, |_| Code::Ok));
    }
    result
}

/// A unary call: one request, one reply.
pub async fn unary<T, Req, Resp>(
    transport: &mut T,
    method: impl Into<Method>,
    request: Request<Req>,
) -> Result<Response<Resp>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    let mut reply = raw(transport, one_request(method.into(), request).with_one_reply())
        .await?
        .into_streaming::<Resp>();
    let timer = reply.message.take_timer();
    let message = finished(only_reply(&mut reply.message).await, timer)?;
    Ok(reply.map(|_| message))
}

/// A server-streaming call: one request, a stream of replies.
pub async fn server_streaming<T, Req, Resp>(
    transport: &mut T,
    method: impl Into<Method>,
    request: Request<Req>,
) -> Result<Response<Streaming<Resp>>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    Ok(raw(transport, one_request(method.into(), request))
        .await?
        .into_streaming())
}

/// A client-streaming call: a stream of requests, one reply.
pub async fn client_streaming<T, Req, Resp, St>(
    transport: &mut T,
    method: impl Into<Method>,
    request: Request<St>,
) -> Result<Response<Resp>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    St: Stream<Item = Req> + Send + 'static,
    Req: Message + 'static,
    Resp: Message + Default,
{
    let timeout = request.timeout;
    let call = streaming_call(method.into(), request).with_one_reply();
    let mut reply = raw(transport, call).await?.into_streaming::<Resp>();
    let timer = reply.message.take_timer();
    let message = finished(within(timeout, only_reply(&mut reply.message)).await, timer)?;
    Ok(reply.map(|_| message))
}

/// A bidirectional-streaming call: a stream of requests, a stream of
/// replies, at once.
pub async fn streaming<T, Req, Resp, St>(
    transport: &mut T,
    method: impl Into<Method>,
    request: Request<St>,
) -> Result<Response<Streaming<Resp>>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    St: Stream<Item = Req> + Send + 'static,
    Req: Message + 'static,
    Resp: Message + Default,
{
    Ok(raw(transport, streaming_call(method.into(), request))
        .await?
        .into_streaming())
}

/// The call of a method with a stream of request messages.
/// (A stream of requests may not go as early data, idempotent or not: it
/// is not whole in the first flight.)
fn streaming_call<Req, St>(method: Method, request: Request<St>) -> RawCall
where
    St: Stream<Item = Req> + Send + 'static,
    Req: Message + 'static,
{
    let messages = request.message.map(|m| Bytes::from(m.encode_to_vec())).boxed();
    RawCall::streaming(method.path, request.metadata, messages).with_timeout(request.timeout)
}
