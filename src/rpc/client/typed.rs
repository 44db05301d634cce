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

/// The call of a method with one request message.
fn one_request<Req: Message>(method: &'static str, request: Request<Req>, idempotent: bool) -> RawCall {
    let call = RawCall::unary(method, request.metadata, request.message.encode_to_vec().into())
        .with_timeout(request.timeout);
    if idempotent {
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
    method: &'static str,
    request: Request<Req>,
) -> Result<Response<Resp>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    unary_as(transport, method, request, false).await
}

/// A unary call, marked [`idempotent`](RawCall::idempotent) if it is.
pub(crate) async fn unary_as<T, Req, Resp>(
    transport: &mut T,
    method: &'static str,
    request: Request<Req>,
    idempotent: bool,
) -> Result<Response<Resp>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    let mut reply = raw(
        transport,
        one_request(method, request, idempotent).with_one_reply(),
    )
    .await?
    .into_streaming::<Resp>();
    let timer = reply.message.take_timer();
    let message = finished(only_reply(&mut reply.message).await, timer)?;
    Ok(reply.map(|_| message))
}

/// A server-streaming call: one request, a stream of replies.
pub async fn server_streaming<T, Req, Resp>(
    transport: &mut T,
    method: &'static str,
    request: Request<Req>,
) -> Result<Response<Streaming<Resp>>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    server_streaming_as(transport, method, request, false).await
}

/// A server-streaming call, marked [`idempotent`](RawCall::idempotent) if
/// it is.
pub(crate) async fn server_streaming_as<T, Req, Resp>(
    transport: &mut T,
    method: &'static str,
    request: Request<Req>,
    idempotent: bool,
) -> Result<Response<Streaming<Resp>>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    Req: Message,
    Resp: Message + Default,
{
    Ok(raw(transport, one_request(method, request, idempotent))
        .await?
        .into_streaming())
}

/// A client-streaming call: a stream of requests, one reply.
pub async fn client_streaming<T, Req, Resp, St>(
    transport: &mut T,
    method: &'static str,
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
    let call = streaming_call(method, request).with_one_reply();
    let mut reply = raw(transport, call).await?.into_streaming::<Resp>();
    let timer = reply.message.take_timer();
    let message = finished(within(timeout, only_reply(&mut reply.message)).await, timer)?;
    Ok(reply.map(|_| message))
}

/// A bidirectional-streaming call: a stream of requests, a stream of
/// replies, at once.
pub async fn streaming<T, Req, Resp, St>(
    transport: &mut T,
    method: &'static str,
    request: Request<St>,
) -> Result<Response<Streaming<Resp>>, Status>
where
    T: Service<RawCall, Response = RawReply>,
    T::Error: Into<BoxError>,
    St: Stream<Item = Req> + Send + 'static,
    Req: Message + 'static,
    Resp: Message + Default,
{
    Ok(raw(transport, streaming_call(method, request))
        .await?
        .into_streaming())
}

/// The call of a method with a stream of request messages.
fn streaming_call<Req, St>(method: &'static str, request: Request<St>) -> RawCall
where
    St: Stream<Item = Req> + Send + 'static,
    Req: Message + 'static,
{
    let messages = request.message.map(|m| Bytes::from(m.encode_to_vec())).boxed();
    RawCall::streaming(method, request.metadata, messages).with_timeout(request.timeout)
}
