//! The standard stacks in one call, and the boxed stacks (see
//! [`weft::stack`](crate::stack) for the layers and an example).

use tokio::net::TcpStream;
use tower::{util::BoxCloneSyncService, ServiceBuilder};

use crate::{
    handshake::{Handshake, Versions},
    mux::{self, Connection},
    stack::{StandardAcceptor, StandardDialer},
    transport::{Connector, Target, TcpAcceptor},
    EncryptLayer, Error, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// Any dialer stack of [`Target`]s, boxed: `BoxDialer::new(stack)`. A
/// [`Pool`](crate::pool::Pool) takes it like the stack itself (it is
/// `Clone + Send + Sync`); each handshake costs one more allocation. Dial
/// an address with `dial(addr.into())`.
pub type BoxDialer = BoxCloneSyncService<Handshake<Target>, Connection, Error>;

/// Any acceptor stack over TCP, boxed: `BoxAcceptor::new(stack)`, for
/// [`http::serve`](crate::http::serve) and the RPC server.
pub type BoxAcceptor = BoxCloneSyncService<Handshake<TcpStream>, Connection, Error>;

/// The standard dialer as `identity` (see [`weft::stack`](crate::stack)):
/// `weft::dialer(identity).dial(addr)`, or give it to a
/// [`Pool`](crate::pool::Pool).
pub fn dialer(identity: Identity) -> StandardDialer {
    dialer_with(EncryptLayer::new(identity))
}

/// The standard dialer around `encrypt`, an [`EncryptLayer`] configured
/// beyond its identity: box keys known ahead
/// ([`with_box_key`](EncryptLayer::with_box_key)) and kept as they are
/// learned ([`on_box_key_learned`](EncryptLayer::on_box_key_learned)),
/// so that a restarted client's first call goes early; suites; who may
/// answer.
pub fn dialer_with(encrypt: EncryptLayer) -> StandardDialer {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(mux::DEFAULT_MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(encrypt)
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(Connector::new())
}

/// The standard acceptor as `identity` (see [`weft::stack`](crate::stack)), for
/// [`http::serve`](crate::http::serve), the RPC server or
/// [`server::serve`](crate::server::serve), which admit its handshakes
/// (their `admission` setting); in an accept loop of your own, put an
/// [`AdmissionLayer`](crate::AdmissionLayer) on top:
/// `AdmissionLayer::new().layer(weft::acceptor(identity))`.
pub fn acceptor(identity: Identity) -> StandardAcceptor {
    acceptor_with(EncryptLayer::new(identity))
}

/// The standard acceptor that also accepts early data (0-RTT, protocol
/// version 3; [`EncryptLayer::accept_early_data`], with its defaults):
/// a dialer that learned this acceptor's box key on an earlier connection
/// sends its first stream in its first flight. Serve only what is safe to
/// repeat from early data (the RPC server runs only methods marked
/// idempotent from it, the HTTP server only safe methods); docs/SECURITY.md
/// says what early data does not protect.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:7000").await?;
/// let acceptor = weft::acceptor_with_early_data(weft::Identity::generate());
/// // weft::rpc::server::Server::builder().add_service(...).serve(listener, acceptor)
/// # let _ = (listener, acceptor);
/// # Ok(()) }
/// ```
pub fn acceptor_with_early_data(identity: Identity) -> StandardAcceptor {
    acceptor_with(EncryptLayer::new(identity).accept_early_data())
}

/// The standard acceptor around `encrypt`, an [`EncryptLayer`] configured
/// beyond its identity: early data with box keys every replica of the
/// identity shares
/// ([`box_keys_from_identity`](EncryptLayer::box_keys_from_identity)),
/// who may connect, suites.
///
/// ```no_run
/// # async fn f(seed: [u8; 32]) -> std::io::Result<()> {
/// use weft::{EncryptLayer, Identity};
///
/// // Each replica of the fleet, with the fleet's identity: a dialer that
/// // learned the box key from one goes early to any.
/// let identity = Identity::from_seed(&seed);
/// let acceptor = weft::acceptor_with(EncryptLayer::new(identity).box_keys_from_identity());
/// let listener = tokio::net::TcpListener::bind("0.0.0.0:7000").await?;
/// // weft::rpc::server::Server::builder().add_service(...).serve(listener, acceptor)
/// # let _ = (listener, acceptor);
/// # Ok(()) }
/// ```
pub fn acceptor_with(encrypt: EncryptLayer) -> StandardAcceptor {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(mux::DEFAULT_MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(encrypt)
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new())
}
