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

use super::{authority, PeerInfo};
use crate::{
    error::BoxError,
    pool::{Dialer, Endpoint, Pool, PoolError, PooledStream},
    transport::Target,
};

/// A `tower::Service<Uri>` for hyper-util's legacy client (or tonic's
/// `Endpoint::connect_with_connector`): each call opens a stream on a
/// pooled weft connection.
///
/// URIs go where [`route`](Self::route) sends their authority (which is
/// how a host gets its pinned key or a required protocol), whatever the
/// scheme; an authority is compared in one spelling (case, a trailing
/// dot and the forms of an IPv4 address do not matter), so a route cannot
/// be bypassed by spelling its host otherwise. Any other authority is
/// refused ([`ConnectError::Unrouted`]), unless the connector was told to
/// [`allow_unpinned`](Self::allow_unpinned) hosts: then `weft://host:port`
/// goes to that host and port (names resolved as hyper-util's
/// `HttpConnector` resolves them) with no pinned key.
///
/// Each stream speaks HTTP/1.1 by default, whatever protocol its
/// connection agreed: weft multiplexes the streams, so one request at a
/// time per stream (hyper-util opens a stream per request in flight, and
/// keeps the idle ones for the next) is the fastest way to carry HTTP on
/// weft, 1.3x and more hyper's h2 over TLS where h2 inside a weft stream
/// is about 0.9x (BENCHMARKS.md). Ask for h2 with
/// [`http2`](Self::http2), or per endpoint with
/// `Endpoint::protocol("h2")`; a client that speaks h2 by prior knowledge
/// (tonic's `Channel`, hyper-util's `http2_only`) does so in any case.
pub struct Connector<S> {
    pool: Pool<S>,
    routes: Arc<HashMap<String, Endpoint>>,
    unrouted: Unrouted,
    http2: bool,
}

/// What happens to a URI whose authority has no route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unrouted {
    Refused,
    /// `weft://host:port` dialed as it is, unpinned.
    Dialed,
}

impl<S> Clone for Connector<S> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            routes: self.routes.clone(),
            unrouted: self.unrouted,
            http2: self.http2,
        }
    }
}

impl<S> fmt::Debug for Connector<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("routes", &self.routes)
            .field("unrouted", &self.unrouted)
            .field("http2", &self.http2)
            .finish()
    }
}

impl<S> Connector<S> {
    /// A connector over `pool`.
    pub fn new(pool: Pool<S>) -> Self {
        Self {
            pool,
            routes: Arc::default(),
            unrouted: Unrouted::Refused,
            http2: false,
        }
    }

    /// Streams of connections that agreed `h2` speak h2 (hyper-util's
    /// client then puts all of a host's requests on one stream), rather
    /// than HTTP/1.1 on a stream per request in flight.
    pub fn http2(mut self) -> Self {
        self.http2 = true;
        self
    }

    /// `weft://host:port` URIs with no route go to that host and port with
    /// no pinned key: whoever answers there is accepted, unless the pool's
    /// stack authorizes peers itself (`EncryptLayer::authorize`). Like
    /// reqwest's `danger_accept_invalid_certs`, a choice to make on
    /// purpose: on a network where anyone may answer for an address, an
    /// unpinned peer can be anyone.
    pub fn allow_unpinned(mut self) -> Self {
        self.unrouted = Unrouted::Dialed;
        self
    }

    /// Requests for `authority` (`host` or `host:port`, whatever the
    /// scheme, in any spelling of the host) go to `endpoint`.
    ///
    /// ```
    /// # fn f<S>(connector: weft::http::Connector<S>, key: weft::handshake::PeerId) {
    /// use weft::pool::Endpoint;
    ///
    /// let connector = connector
    ///     .route("api.internal", Endpoint::host("10.0.0.7", 7000).expect_peer(key));
    /// # }
    /// ```
    pub fn route(mut self, authority: impl Into<String>, endpoint: Endpoint) -> Self {
        Arc::make_mut(&mut self.routes).insert(authority::normalize(&authority.into()), endpoint);
        self
    }

    /// The pool it opens streams from.
    pub fn pool(&self) -> &Pool<S> {
        &self.pool
    }

    /// Where `uri` goes.
    pub fn endpoint_for(&self, uri: &Uri) -> Result<Endpoint, ConnectError> {
        endpoint_for(&self.routes, self.unrouted, uri)
    }
}

fn endpoint_for(
    routes: &HashMap<String, Endpoint>,
    unrouted: Unrouted,
    uri: &Uri,
) -> Result<Endpoint, ConnectError> {
    let authority = uri
        .authority()
        .ok_or_else(|| ConnectError::NoAuthority(uri.clone()))?;
    if let Some(endpoint) = routes
        .get(&authority::normalize(authority.as_str()))
        .or_else(|| routes.get(&authority::normalize_host(authority.host())))
    {
        return Ok(endpoint.clone());
    }
    // A host that has a route, at a port that has none, is not dialed
    // unpinned: its routes' pins would be bypassed by naming another port.
    let host = authority::normalize_host(authority.host());
    if routes.keys().any(|routed| authority::host_of(routed) == host) {
        return Err(ConnectError::Unrouted(uri.clone()));
    }
    match (unrouted, uri.scheme_str(), authority.port_u16()) {
        (Unrouted::Dialed, Some("weft"), Some(port)) => Ok(Endpoint::host(authority.host(), port)),
        (Unrouted::Dialed, Some("weft"), None) => Err(ConnectError::NoPort(uri.clone())),
        _ => Err(ConnectError::Unrouted(uri.clone())),
    }
}

/// Why a URI could not be connected: before any dial, or the pool's
/// failure to open a stream.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URI has no authority to go to.
    #[error("{0}: no host to connect to")]
    NoAuthority(Uri),
    /// A `weft://` URI without a port (weft has no default port).
    #[error("{0}: weft:// URIs need a port")]
    NoPort(Uri),
    /// No route for its authority ([`Connector::route`]), and either the
    /// connector does not [`allow_unpinned`](Connector::allow_unpinned)
    /// hosts or the URI is not `weft://`.
    #[error(
        "{0}: no route for its authority (unpinned hosts are not allowed unless Connector::allow_unpinned)"
    )]
    Unrouted(Uri),
    /// The pool found no stream: its error, with its causes in this one's
    /// text (hyper-util's own error says only `client error (Connect)`,
    /// with this one as its source), and so no source of its own.
    #[error("{}", crate::error::text_with_causes(.0))]
    Pool(PoolError),
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
        let http2 = self.http2;
        Box::pin(async move {
            let stream = opening.await.map_err(ConnectError::Pool)?;
            Ok(HttpStream::new(stream, http2))
        })
    }
}

/// A pooled weft stream as a hyper connection: hyper's `Read`/`Write`,
/// and hyper-util's `Connection`, which carries the [`PeerInfo`] and
/// reports HTTP/2 when the stream speaks it (its connection agreed `h2`,
/// and the connector was asked for [`http2`](Connector::http2) or the
/// endpoint requires `h2`).
#[derive(Debug)]
pub struct HttpStream {
    io: TokioIo<PooledStream>,
    info: PeerInfo,
    /// Whether it speaks h2 rather than HTTP/1.1.
    h2: bool,
    /// Counts the connection toward its endpoint's load while it is open
    /// ([`BalancedConnector`](super::BalancedConnector)).
    #[cfg(feature = "dns")]
    pub(super) held: Option<tower::load::pending_requests::Handle>,
}

impl HttpStream {
    /// `stream`, speaking h2 if its connection agreed it and `http2`
    /// asks for it (or its endpoint requires h2).
    pub(super) fn new(stream: PooledStream, http2: bool) -> Self {
        let agreed_h2 = stream.protocol() == Some("h2");
        let h2 = agreed_h2 && (http2 || stream.endpoint().expected_protocol() == Some("h2"));
        let info = PeerInfo {
            id: stream.peer().copied(),
            suite: stream.connection().agreement().suite(),
            addr: match stream.endpoint().target() {
                Target::Addr(addr) => Some(*addr),
                _ => None,
            },
            protocol: stream.protocol().map(str::to_owned),
            early: false,
        };
        Self {
            io: TokioIo::new(stream),
            info,
            h2,
            #[cfg(feature = "dns")]
            held: None,
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
        if self.h2 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> HashMap<String, Endpoint> {
        let mut routes = HashMap::new();
        let pinned = |port| {
            Endpoint::host("10.0.0.7", port).expect_peer(crate::Identity::from_seed(&[2; 32]).peer_id())
        };
        routes.insert(authority::normalize("api.internal"), pinned(7000));
        routes.insert(authority::normalize("10.0.0.7:7001"), pinned(7001));
        routes
    }

    #[test]
    fn a_route_is_found_however_its_host_is_spelled_and_nothing_unrouted_goes_unpinned() {
        let routes = routes();
        for uri in [
            "weft://API.internal:9/x",
            "weft://api.internal.:9/x",
            "http://Api.Internal/x",
            "weft://10.7:7001/x",
            "weft://0x0a000007:7001/x",
            "weft://012.0.0.7:7001/x",
            "weft://10.0.0.7:07001/x",
            "weft://user@10.0.0.7:7001/x",
            "weft://[::ffff:10.0.0.7]:7001/x",
        ] {
            let endpoint = endpoint_for(&routes, Unrouted::Refused, &uri.parse().unwrap()).unwrap();
            assert!(
                endpoint.expected_peer().is_some(),
                "{uri} reached its route, pinned"
            );
        }
        // No route: refused, weft:// or not, unless unpinned hosts are
        // allowed (and then only weft:// with a port).
        for uri in ["weft://other:7000/x", "weft://10.0.0.8:7000/x", "http://other/x"] {
            let err = endpoint_for(&routes, Unrouted::Refused, &uri.parse().unwrap()).unwrap_err();
            assert!(matches!(err, ConnectError::Unrouted(_)), "{uri}: {err}");
        }
        let endpoint =
            endpoint_for(&routes, Unrouted::Dialed, &"weft://other:7000/x".parse().unwrap()).unwrap();
        assert!(endpoint.expected_peer().is_none());
        assert!(matches!(
            endpoint_for(&routes, Unrouted::Dialed, &"http://other/x".parse().unwrap()),
            Err(ConnectError::Unrouted(_))
        ));
        // A routed host at another port, however spelled, is not dialed
        // unpinned even when unpinned hosts are allowed.
        for uri in [
            "weft://10.0.0.7:7002/x",
            "weft://user@10.0.0.7:7002/x",
            "weft://[::ffff:10.0.0.7]:7002/x",
            "weft://0x0a000007:7002/x",
        ] {
            let err = endpoint_for(&routes, Unrouted::Dialed, &uri.parse().unwrap()).unwrap_err();
            assert!(matches!(err, ConnectError::Unrouted(_)), "{uri}: {err}");
        }
    }
}
