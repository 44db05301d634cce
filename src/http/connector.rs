//! hyper-util's client over a pool: URIs to endpoints, pooled streams to
//! hyper connections.

use std::{
    collections::HashMap,
    fmt,
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::{
    client::legacy::connect::{Connected, Connection},
    rt::TokioIo,
};
use tower::Service;

use super::PeerInfo;
use crate::{
    error::BoxError,
    pool::{Dialer, Endpoint, Pool, PooledStream, Target},
};

/// A `tower::Service<Uri>` for hyper-util's legacy client (or tonic's
/// `Endpoint::connect_with_connector`): each call opens a stream on a
/// pooled weft connection.
///
/// URIs: `weft://host:port` goes to that host and port (names resolved as
/// hyper-util's `HttpConnector` resolves them). Any other authority,
/// `http://` ones included, must be mapped to an endpoint with
/// [`route`](Self::route) (which is also how a host gets a pinned key or
/// a required protocol).
pub struct Connector<S> {
    pool: Pool<S>,
    routes: Arc<HashMap<String, Endpoint>>,
}

impl<S> Clone for Connector<S> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            routes: self.routes.clone(),
        }
    }
}

impl<S> fmt::Debug for Connector<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector").field("routes", &self.routes).finish()
    }
}

impl<S> Connector<S> {
    /// A connector over `pool`.
    pub fn new(pool: Pool<S>) -> Self {
        Self {
            pool,
            routes: Arc::default(),
        }
    }

    /// Requests for `authority` (`host` or `host:port`, whatever the
    /// scheme) go to `endpoint`.
    ///
    /// ```
    /// # fn f<S>(connector: weft::http::Connector<S>, key: weft::PeerId) {
    /// use weft::pool::Endpoint;
    ///
    /// let connector = connector
    ///     .route("api.internal", Endpoint::host("10.0.0.7", 7000).expect_peer(key));
    /// # }
    /// ```
    pub fn route(mut self, authority: impl Into<String>, endpoint: Endpoint) -> Self {
        Arc::make_mut(&mut self.routes).insert(authority.into(), endpoint);
        self
    }

    /// The pool it opens streams from.
    pub fn pool(&self) -> &Pool<S> {
        &self.pool
    }

    /// Where `uri` goes.
    pub fn endpoint_for(&self, uri: &Uri) -> Result<Endpoint, ConnectError> {
        let authority = uri
            .authority()
            .ok_or_else(|| ConnectError::NoAuthority(uri.clone()))?;
        if let Some(endpoint) = self
            .routes
            .get(authority.as_str())
            .or_else(|| self.routes.get(authority.host()))
        {
            return Ok(endpoint.clone());
        }
        match (uri.scheme_str(), authority.port_u16()) {
            (Some("weft"), Some(port)) => Ok(Endpoint::host(authority.host(), port)),
            (Some("weft"), None) => Err(ConnectError::NoPort(uri.clone())),
            _ => Err(ConnectError::Unrouted(uri.clone())),
        }
    }
}

/// Why a URI could not be connected before any dial.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URI has no authority to go to.
    #[error("{0}: no host to connect to")]
    NoAuthority(Uri),
    /// A `weft://` URI without a port (weft has no default port).
    #[error("{0}: weft:// URIs need a port")]
    NoPort(Uri),
    /// Neither `weft://` nor a routed authority
    /// ([`Connector::route`]).
    #[error("{0}: not a weft:// URI and no route for its authority")]
    Unrouted(Uri),
}

impl<S: Dialer> Service<Uri> for Connector<S> {
    type Response = HttpStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpStream, BoxError>> + Send>>;

    /// Waits for a turn in the pool ([`Pool`]'s backpressure).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.pool.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let endpoint = match self.endpoint_for(&uri) {
            Ok(endpoint) => endpoint,
            Err(err) => {
                self.pool.release_turn();
                return Box::pin(std::future::ready(Err(err.into())));
            }
        };
        let opening = self.pool.call(endpoint);
        Box::pin(async move { Ok(HttpStream::new(opening.await?)) })
    }
}

/// A pooled weft stream as a hyper connection: hyper's `Read`/`Write`,
/// and hyper-util's `Connection`, which reports HTTP/2 when the
/// connection agreed `h2` and carries the [`PeerInfo`].
#[derive(Debug)]
pub struct HttpStream {
    io: TokioIo<PooledStream>,
    info: PeerInfo,
}

impl HttpStream {
    fn new(stream: PooledStream) -> Self {
        let info = PeerInfo {
            id: stream.peer().copied(),
            addr: match stream.endpoint().target() {
                Target::Addr(addr) => Some(*addr),
                _ => None,
            },
            protocol: stream.protocol().map(str::to_owned),
        };
        Self {
            io: TokioIo::new(stream),
            info,
        }
    }

    /// Who is at the other end.
    pub fn peer_info(&self) -> &PeerInfo {
        &self.info
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &PooledStream {
        self.io.inner()
    }

    /// The stream underneath.
    pub fn into_inner(self) -> PooledStream {
        self.io.into_inner()
    }
}

impl Connection for HttpStream {
    fn connected(&self) -> Connected {
        let connected = Connected::new().extra(self.info.clone());
        if self.info.protocol.as_deref() == Some("h2") {
            connected.negotiated_h2()
        } else {
            connected
        }
    }
}

impl Read for HttpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl Write for HttpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
