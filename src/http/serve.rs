//! The server loop: a listener's connections through the acceptor stack,
//! then HTTP/1.1 or h2 (hyper-util's auto builder) on every stream.

use std::{
    fmt,
    future::{Future, IntoFuture},
    io,
    pin::Pin,
    time::Duration,
};

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use tower::Service;

use super::{on_stream::HttpOnStreams, PeerInfo};
use crate::{
    error::BoxError,
    mux::serve::{serve_streams, ConnectionLimits, Stopping},
    stack::Acceptor,
    transport::Listener,
};

/// What [`serve`] runs on every stream: a tower HTTP service (an axum
/// `Router`, a `service_fn`, a tonic service) answering with a `B` body.
pub trait HttpService<B>:
    Service<Request<Incoming>, Response = Response<B>, Error: Into<BoxError>, Future: Send + 'static>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S, B> HttpService<B> for S where
    S: Service<Request<Incoming>, Response = Response<B>, Error: Into<BoxError>, Future: Send + 'static>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// A response body [`serve`] can send.
pub trait ResponseBody: Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

impl<B> ResponseBody for B where B: Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

/// How long an HTTP/1.1 request's head may take to arrive, by default
/// (hyper's own default): a peer that sends part of it and then waits
/// has its stream closed.
pub(crate) const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `service` over weft: every connection `listener` accepts (a
/// tokio `TcpListener` or `UnixListener`, or any stream of transports as
/// [`Incoming`](crate::transport::Incoming)) goes through `acceptor` (a
/// stack over the listener's transports whose product is a
/// [`Connection`](crate::mux::Connection)),
/// and every stream the peer opens is one HTTP/1.1 or h2 connection
/// (detected from the first bytes). Each request carries the
/// [`PeerInfo`] in its extensions.
///
/// Await the returned [`Serve`] to run until the listener fails, or run
/// it [`with_graceful_shutdown`](Serve::with_graceful_shutdown). An
/// HTTP/1.1 request's head must arrive within
/// [`header_read_timeout`](Serve::header_read_timeout).
///
/// ```no_run
/// use std::convert::Infallible;
/// use http_body_util::Full;
/// use tokio::net::TcpListener;
/// use tower::{service_fn, ServiceBuilder};
/// use weft::{handshake::Versions, http::PeerInfo, mux, transport::TcpAcceptor, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer};
///
/// # async fn example() -> std::io::Result<()> {
/// let acceptor = ServiceBuilder::new()
///     .layer(MultiplexLayer::new(mux::Builder::new()))
///     .layer(EncryptLayer::new(Identity::generate()))
///     .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["h2", "http/1.1"]))
///     .service(TcpAcceptor::new());
/// let hello = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
///     let peer = req.extensions().get::<PeerInfo>().and_then(|p| p.id);
///     Ok::<_, Infallible>(http::Response::new(Full::new(bytes::Bytes::from(format!("hello, {peer:?}")))))
/// });
/// weft::http::serve(TcpListener::bind("127.0.0.1:7000").await?, acceptor, hello).await
/// # }
/// ```
pub fn serve<L, A, S, B>(listener: L, acceptor: A, service: S) -> Serve<L, A, S>
where
    L: Listener,
    A: Acceptor<L::Io>,
    S: HttpService<B>,
    B: ResponseBody,
{
    Serve {
        listener,
        acceptor,
        service,
        header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
        limits: ConnectionLimits::default(),
    }
}

/// A server [`serve`] set up: await it, or add a shutdown signal.
pub struct Serve<L, A, S> {
    listener: L,
    acceptor: A,
    service: S,
    header_read_timeout: Option<Duration>,
    limits: ConnectionLimits,
}

impl<L, A, S> Serve<L, A, S> {
    /// Connections held at once, handshakes included (at least 1; default
    /// 10,000). At the cap a newcomer is not simply refused: if its
    /// network (an IPv4 /24, an IPv6 /48) holds at least two fewer than
    /// the network holding the most, that network's oldest idle connection
    /// (no open stream) is closed for it; otherwise the oldest handshake
    /// pending half a second or more gives way. Only when nothing may give
    /// way is it refused before its handshake: the peer's handshake fails
    /// with an unauthenticated close, `EXCESSIVE_LOAD`, saying why.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.limits.set_max(n);
        self
    }

    /// Connections held at once from one source address, an IPv4 address
    /// or an IPv6 /64 (at least 1; default 256): at it, the source's own
    /// oldest idle connection (or a handshake of its pending half a
    /// second) is closed for its newcomer, and otherwise the newcomer is
    /// refused as past [`max_connections`](Self::max_connections).
    pub fn max_connections_per_address(mut self, n: usize) -> Self {
        self.limits.set_per_address(n);
        self
    }

    /// Closes a connection that has had no stream for `idle` (default
    /// `None`: never), gracefully: a go-away (a stream the peer opens
    /// meanwhile is refused unprocessed, so it opens it again
    /// elsewhere), then the close. gRPC's `MaxConnectionIdle`; the peer's
    /// pings do not count as use.
    pub fn close_idle_after(mut self, idle: Option<Duration>) -> Self {
        self.limits.set_close_idle_after(idle);
        self
    }

    /// How long an HTTP/1.1 request's head may take to arrive, from the
    /// first byte of it (hyper's `header_read_timeout`); `None` for no
    /// limit. Past it, the stream is closed. Default 30 s (hyper's).
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.header_read_timeout = timeout.into();
        self
    }
}

impl<L, A, S> fmt::Debug for Serve<L, A, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("header_read_timeout", &self.header_read_timeout)
            .finish_non_exhaustive()
    }
}

impl<L, A, S, B> Serve<L, A, S>
where
    L: Listener,
    A: Acceptor<L::Io>,
    // (The body type is the service's response's.)
    S: HttpService<B> + Service<Request<Incoming>, Response = Response<B>>,
    B: ResponseBody,
{
    /// Runs until `signal` completes, then shuts down gracefully: no new
    /// connections, a go-away on every weft connection (so the peer's
    /// pool sends new requests elsewhere), hyper's graceful shutdown on
    /// every HTTP connection; requests in flight finish, and the future
    /// completes when the last connection has.
    pub fn with_graceful_shutdown<F>(self, signal: F) -> impl Future<Output = io::Result<()>> + Send
    where
        F: Future<Output = ()> + Send + 'static,
    {
        run(self, signal)
    }
}

impl<L, A, S, B> IntoFuture for Serve<L, A, S>
where
    L: Listener,
    A: Acceptor<L::Io>,
    // (The body type is the service's response's.)
    S: HttpService<B> + Service<Request<Incoming>, Response = Response<B>>,
    B: ResponseBody,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(run(self, std::future::pending()))
    }
}

async fn run<L, A, S, B, F>(serve: Serve<L, A, S>, signal: F) -> io::Result<()>
where
    L: Listener,
    A: Acceptor<L::Io>,
    S: HttpService<B>,
    B: ResponseBody,
    F: Future<Output = ()> + Send,
{
    let Serve {
        listener,
        acceptor,
        service,
        header_read_timeout,
        limits,
    } = serve;
    let http = HttpOnStreams::new(service, header_read_timeout);
    let handler = move |stream, conn: &crate::mux::Connection, addr, stopping: Stopping| {
        let info = PeerInfo::of_stream(conn, &stream, addr);
        http.serve(stream, info, stopping)
    };
    serve_streams("http::serve", listener, acceptor, signal, (None, limits), handler).await
}
