//! The standard stacks in one call, and the boxed stacks (see
//! [`weft::stack`](crate::stack) for the layers and an example).

use tokio::net::TcpStream;
use tower::{util::BoxCloneSyncService, ServiceBuilder};

use crate::{
    admission::AdmissionLayer,
    handshake::{Handshake, Versions},
    mux::{self, Connection},
    stack::{StandardAcceptor, StandardDialer},
    transport::{Target, TcpAcceptor, TcpConnector},
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
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(mux::DEFAULT_MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(identity))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new())
}

/// The standard acceptor as `identity` (see [`weft::stack`](crate::stack)), for
/// [`http::serve`](crate::http::serve), the RPC server, or
/// `weft::acceptor(identity).accept(tcp)`.
pub fn acceptor(identity: Identity) -> StandardAcceptor {
    ServiceBuilder::new()
        .layer(AdmissionLayer::new())
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(mux::DEFAULT_MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(identity))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new())
}
