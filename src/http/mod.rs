//! weft under hyper: [`Connector`] lets hyper-util's client (and tonic's
//! `Channel`) reach servers through a [`Pool`](crate::pool::Pool), and
//! [`serve`] runs any hyper or tower HTTP service (an axum `Router`, a
//! tonic service) on the streams of accepted weft connections.
//!
//! Each hyper connection is one weft stream. Over HTTP/1.1 that makes weft,
//! not hyper, the multiplexer: many requests at once are many streams of
//! one connection (the pool adds connections only at the peer's stream
//! limit). When the Setup agrees `h2` ([`NegotiateLayer::protocols`]),
//! hyper speaks HTTP/2 on the stream and the [`Connector`] says so
//! ([`Connected::negotiated_h2`]), so hyper-util shares one stream among
//! its requests.
//!
//! **hyper-util's idle pool holds streams.** Over HTTP/1.1, each idle
//! connection in hyper-util's own pool is an open weft stream, and so one
//! of the peer's stream slots, until hyper-util's idle timeout (90 s by
//! default) closes it. Requests never wait on that: hyper-util hands a
//! waiting request the next connection that goes idle, and a connect that
//! waits for a slot meanwhile finishes in the background (tested with a
//! limit of 10 and 200 requests at once). But other users of the same
//! [`Pool`](crate::pool::Pool) see fewer free streams while hyper-util
//! keeps them: bound them with hyper-util's `pool_max_idle_per_host` (at
//! or below the peer's stream limit), or speak h2, which needs one stream.
//!
//! ```no_run
//! use http_body_util::Empty;
//! use hyper_util::{client::legacy::Client, rt::TokioExecutor};
//! use tower::ServiceBuilder;
//! use weft::{
//!     handshake::Versions, http::Connector, mux, pool::{Endpoint, Pool}, transport::TcpConnector,
//!     EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer
//! };
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let dialer = ServiceBuilder::new()
//!     .layer(MultiplexLayer::new(mux::Builder::new()))
//!     .layer(RecordSizeLayer::dynamic())
//!     .layer(EncryptLayer::new(Identity::generate()))
//!     .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["h2", "http/1.1"]))
//!     .service(TcpConnector::new());
//! let pool = Pool::builder().max_connections_per_endpoint(4).build(dialer);
//! // The server's key, pinned for its authority (any spelling of it).
//! let server_key: weft::handshake::PeerId = "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394".parse()?;
//! let connector = Connector::new(pool)
//!     .route("127.0.0.1:7000", Endpoint::new("127.0.0.1:7000".parse()?).expect_peer(server_key));
//! let client = Client::builder(TokioExecutor::new()).build::<_, Empty<bytes::Bytes>>(connector);
//! let res = client.get("weft://127.0.0.1:7000/hello".parse()?).await?;
//! println!("{}", res.status());
//! # Ok(())
//! # }
//! ```
//!
//! [`NegotiateLayer::protocols`]: crate::NegotiateLayer::protocols
//! [`Connected::negotiated_h2`]: hyper_util::client::legacy::connect::Connected::negotiated_h2

mod authority;
#[cfg(feature = "dns")]
mod balanced;
mod connector;
pub(crate) mod on_stream;
mod serve;

#[cfg(feature = "dns")]
pub use balanced::BalancedConnector;
pub use connector::{ConnectError, Connector, HttpStream};
pub(crate) use serve::DEFAULT_HEADER_READ_TIMEOUT;
pub use serve::{serve, HttpService, ResponseBody, Serve};

use std::net::SocketAddr;

use crate::handshake::PeerId;

/// Who is at the other end of a weft HTTP exchange: in each request's
/// extensions on the server ([`serve`]), and in each response's
/// extensions on the client ([`Connector`], through hyper-util's
/// `Connected::extra`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerInfo {
    /// The peer's verified identity (`None` without encryption, the
    /// Plaintext suite included: its records are not authenticated).
    pub id: Option<PeerId>,
    /// The cipher suite the connection agreed.
    pub suite: crate::handshake::CipherSuite,
    /// The peer's transport address, where there is one.
    pub addr: Option<SocketAddr>,
    /// The application protocol the connection agreed, if any.
    pub protocol: Option<String>,
    /// The stream's first bytes came in the peer's early data (0-RTT,
    /// protocol version 3), which can be replayed: the server answers any
    /// request on it but a safe one (GET, HEAD, OPTIONS) `425 Too Early`
    /// without running the service (RFC 8470).
    pub early: bool,
}

impl PeerInfo {
    /// The peer of `conn`, at `addr`.
    pub(crate) fn of(conn: &crate::mux::Connection, addr: Option<SocketAddr>) -> Self {
        Self {
            id: conn.peer().copied(),
            suite: conn.agreement().suite(),
            addr,
            protocol: conn.agreement().protocol().map(str::to_owned),
            early: false,
        }
    }

    /// The peer of `stream`, on `conn`, at `addr`.
    pub(crate) fn of_stream(
        conn: &crate::mux::Connection,
        stream: &crate::mux::Stream,
        addr: Option<SocketAddr>,
    ) -> Self {
        Self {
            early: stream.is_early(),
            ..Self::of(conn, addr)
        }
    }
}
