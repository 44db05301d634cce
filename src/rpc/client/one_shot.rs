//! Calls each on a connection of its own, dialed for it: for a process
//! that makes a call or two to a pinned server and exits, and where the
//! first call should cost one round trip (early data, protocol version 3).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Service, ServiceExt};

use super::{first_bytes, reply_header, write_requests, RawCall, RawReply};
use crate::{
    handshake::Handshake,
    metrics::RpcMetrics,
    pool::{Dialer, Endpoint},
    rpc::{
        streaming::{AbortOnDrop, FrameReader},
        wire::Limits,
        Status,
    },
};

/// Calls to one endpoint, each on a new connection its dialer makes for
/// it and closes after it: no pool. A call marked
/// [`idempotent`](RawCall::idempotent) with one request message goes in
/// the first flight as early data (0-RTT) when it can: the endpoint is
/// pinned ([`Endpoint::expect_peer`]), the server accepts early data
/// ([`EncryptLayer::accept_early_data`](crate::EncryptLayer::accept_early_data)),
/// and this dialer (or a clone: they share what they learn) has connected
/// to it before and so knows its box key. Any other call goes right after
/// the handshake, on the same connection; which way a call went is not
/// the caller's concern.
///
/// For many calls to one server, a pooled [`Client`](super::Client)
/// costs a handshake once.
///
/// ```no_run
/// # async fn f(server_key: weft::handshake::PeerId) -> Result<(), weft::rpc::Status> {
/// use weft::{pool::Endpoint, rpc::{client::{self, OneShot}, Request}, Identity};
///
/// let endpoint = Endpoint::new("127.0.0.1:7000".parse().unwrap()).expect_peer(server_key);
/// let mut echo = OneShot::new(weft::dialer(Identity::generate()), endpoint);
/// let reply: weft::rpc::Response<String> =
///     client::unary(&mut echo, "echo.Echo/Say", Request::new(String::from("hi"))).await?;
/// # Ok(()) }
/// ```
pub struct OneShot<D> {
    dialer: D,
    endpoint: Endpoint,
    limits: Limits,
    timeout: Option<Duration>,
    metrics: Arc<RpcMetrics>,
}

impl<D: Clone> Clone for OneShot<D> {
    fn clone(&self) -> Self {
        Self {
            dialer: self.dialer.clone(),
            endpoint: self.endpoint.clone(),
            limits: self.limits,
            timeout: self.timeout,
            metrics: self.metrics.clone(),
        }
    }
}

impl<D> fmt::Debug for OneShot<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OneShot")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<D: Dialer> OneShot<D> {
    /// Calls to `endpoint`, each over a connection `dialer` makes.
    pub fn new(dialer: D, endpoint: Endpoint) -> Self {
        Self {
            dialer,
            endpoint,
            limits: Limits::default(),
            timeout: None,
            metrics: RpcMetrics::client(),
        }
    }

    /// A deadline for calls that do not set their own: the dial and
    /// handshake included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<D: Dialer> Service<RawCall> for OneShot<D> {
    type Response = RawReply;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<RawReply, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: RawCall) -> Self::Future {
        let dialer = self.dialer.clone();
        let endpoint = self.endpoint.clone();
        let limits = self.limits;
        let timeout = call.timeout.or(self.timeout);
        let timer = self.metrics.start(&call.method);
        let work = call_once(dialer, endpoint, limits, timeout, call);
        Box::pin(async move {
            let reply = match timeout {
                Some(limit) => tokio::time::timeout(limit, work)
                    .await
                    .unwrap_or_else(|_| Err(Status::deadline_exceeded(limit))),
                None => work.await,
            };
            timer.finish(
                reply
                    .as_ref()
                    .map_or_else(Status::code, |_| super::super::Code::Ok),
            );
            reply
        })
    }
}

/// Dials, sends the call (early when it may), and waits for the reply's
/// header.
async fn call_once<D: Dialer>(
    dialer: D,
    endpoint: Endpoint,
    limits: Limits,
    timeout: Option<Duration>,
    call: RawCall,
) -> Result<RawReply, Status> {
    let idempotent = call.idempotent;
    let (first, requests) = first_bytes(call, timeout);
    let mut handshake = Handshake::dial(endpoint.target().clone());
    if let Some(peer) = endpoint.expected_peer() {
        handshake = handshake.expect_peer(*peer);
    }
    let early = idempotent && requests.is_none();
    if early {
        handshake = handshake.early_stream_finished(first.clone());
    }
    let connection = dialer.oneshot(handshake).await?;
    if let Some(expected) = endpoint.expected_protocol() {
        if connection.agreement().protocol() != Some(expected) {
            return Err(Status::unavailable(format!(
                "{endpoint} agreed on protocol {:?}, not {expected:?}",
                connection.agreement().protocol()
            )));
        }
    }
    // The stream holds the connection: it closes when the reply is done.
    let stream = match connection.take_early_stream() {
        Some(stream) => stream,
        None => {
            let mut stream = connection.open().await?;
            stream.send(first).await?;
            if requests.is_none() {
                stream.finish()?;
            }
            stream
        }
    };
    connection.go_away();
    let (recv, mut send) = stream.into_split();
    let writer = requests.map(|messages| {
        AbortOnDrop(tokio::spawn(async move {
            let _ = write_requests(&mut send, messages).await;
        }))
    });
    reply_header(FrameReader::new(recv, limits), writer).await
}
