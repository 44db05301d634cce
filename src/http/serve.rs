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
    server::{serve_front, settings_methods, Front, Opened, Settings},
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
        settings: Settings::default(),
    }
}

/// A server [`serve`] set up: await it, or add a shutdown signal.
pub struct Serve<L, A, S> {
    listener: L,
    acceptor: A,
    service: S,
    header_read_timeout: Option<Duration>,
    settings: Settings,
}

impl<L, A, S> Serve<L, A, S> {
    settings_methods!(settings);

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
    /// every HTTP connection; requests in flight finish (within the
    /// [`shutdown_timeout`](Self::shutdown_timeout), 30 s by default), and
    /// the future completes when the last connection has.
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
        settings,
    } = serve;
    let http = HttpOnStreams::new(service, header_read_timeout);
    let handler = move |opened: Opened| {
        let info = PeerInfo::of_stream(&opened.connection, &opened.stream, opened.addr);
        http.serve(opened.stream, info, opened.stopping)
    };
    let front = Front {
        name: "http::serve",
        listener,
        acceptor,
        settings,
        handler,
    };
    serve_front(front, signal).await
}
