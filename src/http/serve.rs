//! The server loop: TCP connections through the acceptor stack, then
//! HTTP/1.1 or h2 (hyper-util's auto builder) on every stream.

use std::{
    fmt,
    future::{Future, IntoFuture},
    io,
    net::SocketAddr,
    pin::Pin,
    time::Duration,
};

use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use tower::{Service, ServiceExt};

use super::PeerInfo;
pub use crate::mux::Acceptor;
use crate::{error::BoxError, handshake::Handshake};

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

/// Serves `service` over weft: every TCP connection `listener` accepts
/// goes through `acceptor` (a stack whose product is a
/// [`Connection`](crate::Connection)),
/// and every stream the peer opens is one HTTP/1.1 or h2 connection
/// (detected from the first bytes). Each request carries the
/// [`PeerInfo`] in its extensions.
///
/// Await the returned [`Serve`] to run until the listener fails, or run
/// it [`with_graceful_shutdown`](Serve::with_graceful_shutdown).
///
/// ```no_run
/// use std::convert::Infallible;
/// use http_body_util::Full;
/// use tokio::net::TcpListener;
/// use tower::{service_fn, ServiceBuilder};
/// use weft::{handshake::Versions, http::PeerInfo, mux, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, TcpAcceptor};
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
pub fn serve<A, S, B>(listener: TcpListener, acceptor: A, service: S) -> Serve<A, S>
where
    A: Acceptor,
    S: HttpService<B>,
    B: ResponseBody,
{
    Serve {
        listener,
        acceptor,
        service,
    }
}

/// A server [`serve`] set up: await it, or add a shutdown signal.
pub struct Serve<A, S> {
    listener: TcpListener,
    acceptor: A,
    service: S,
}

impl<A, S> fmt::Debug for Serve<A, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve").field("listener", &self.listener).finish()
    }
}

impl<A, S, B> Serve<A, S>
where
    A: Acceptor,
    // (The body type is the service's response's.)
    S: HttpService<B> + Service<Request<Incoming>, Response = Response<B>>,
    B: ResponseBody,
{
    /// Runs until `signal` completes, then shuts down gracefully: no new
    /// TCP connections, a go-away on every weft connection (so the peer's
    /// pool sends new requests elsewhere), hyper's graceful shutdown on
    /// every HTTP connection; requests in flight finish, and the future
    /// completes when the last connection has.
    pub fn with_graceful_shutdown<F>(self, signal: F) -> impl Future<Output = io::Result<()>> + Send
    where
        F: Future<Output = ()> + Send + 'static,
    {
        run(self.listener, self.acceptor, self.service, signal)
    }
}

impl<A, S, B> IntoFuture for Serve<A, S>
where
    A: Acceptor,
    // (The body type is the service's response's.)
    S: HttpService<B> + Service<Request<Incoming>, Response = Response<B>>,
    B: ResponseBody,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(run(
            self.listener,
            self.acceptor,
            self.service,
            std::future::pending(),
        ))
    }
}

async fn run<A, S, B, F>(listener: TcpListener, acceptor: A, service: S, signal: F) -> io::Result<()>
where
    A: Acceptor,
    S: HttpService<B>,
    B: ResponseBody,
    F: Future<Output = ()> + Send,
{
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: the listener
                // itself is fine, so wait a moment rather than spin.
                Err(err) if is_transient(&err) => {
                    tracing::debug!(error = %err, "http::serve: accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Err(err) => return Err(err),
            },
            () = &mut signal => break,
        };
        connections.spawn(serve_connection(
            acceptor.clone(),
            tcp,
            addr,
            service.clone(),
            stopping.clone(),
        ));
        // Reap what has finished, so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    // Every weft connection goes away and every HTTP connection shuts
    // down gracefully; each task ends once its requests have.
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// One TCP connection: the handshake, then an HTTP connection per stream.
async fn serve_connection<A, S, B>(
    acceptor: A,
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    service: S,
    mut stopping: watch::Receiver<bool>,
) where
    A: Acceptor,
    S: HttpService<B>,
    B: ResponseBody,
{
    let conn = tokio::select! {
        conn = acceptor.oneshot(Handshake::accept(tcp)) => match conn {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(%addr, error = %err, "http::serve: handshake failed");
                return;
            }
        },
        _ = stopping.wait_for(|stop| *stop) => return,
    };
    let info = PeerInfo {
        id: conn.peer().copied(),
        addr: Some(addr),
        protocol: conn.agreement().protocol().map(str::to_owned),
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let stop_streams = stopping.clone();
    let mut streams = JoinSet::new();
    let mut going_away = false;
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Ok(Some(stream)) => {
                    let service = WithPeer { inner: service.clone(), info: info.clone() };
                    let http = builder
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                        .into_owned();
                    let mut stopping = stop_streams.clone();
                    streams.spawn(async move {
                        let mut http = std::pin::pin!(http);
                        let stopped = tokio::select! {
                            ended = http.as_mut() => Some(ended),
                            _ = stopping.wait_for(|stop| *stop) => None,
                        };
                        let ended = match stopped {
                            Some(ended) => ended,
                            None => {
                                http.as_mut().graceful_shutdown();
                                http.await
                            }
                        };
                        if let Err(err) = ended {
                            tracing::debug!(error = %err, "http::serve: HTTP connection ended with an error");
                        }
                    });
                }
                Ok(None) => break,
                Err(err) => {
                    if !err.is_closed() {
                        tracing::debug!(%addr, error = %err, "http::serve: connection failed");
                    }
                    break;
                }
            },
            _ = stopping.wait_for(|stop| *stop), if !going_away => {
                // No new streams; those in flight finish, and accept
                // returns None once all were taken.
                conn.go_away();
                going_away = true;
            }
        }
        while streams.try_join_next().is_some() {}
    }
    while streams.join_next().await.is_some() {}
}

/// Puts the [`PeerInfo`] in each request's extensions.
#[derive(Clone)]
struct WithPeer<S> {
    inner: S,
    info: PeerInfo,
}

impl<S, B> Service<Request<Incoming>> for WithPeer<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Incoming>) -> S::Future {
        request.extensions_mut().insert(self.info.clone());
        self.inner.call(request)
    }
}

fn is_transient(err: &io::Error) -> bool {
    !matches!(
        err.kind(),
        io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected
    )
}
