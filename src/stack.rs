//! The standard stacks in one call, their types named, and boxed stacks
//! for when the layers vary at run time.
//!
//! [`dialer`](crate::dialer) and [`acceptor`](crate::acceptor) build the stack README shows, with each
//! layer's defaults: [`MultiplexLayer`], [`StreamLimitLayer`] (at most
//! 100 streams from the peer), dynamic records
//! ([`RecordSizeLayer::dynamic`]), [`EncryptLayer`] with the given
//! identity and [`NegotiateLayer`] at [`Versions::CURRENT`], over TCP.
//! The servers put an [`AdmissionLayer`] on the acceptor they are given,
//! which bounds the handshakes strangers can start (their `admission`
//! setting); an accept loop of your own puts one on top itself. Compose
//! the layers yourself for anything else.
//!
//! A stack whose layers depend on configuration (encryption on or off, a
//! layer of your own) has a different type per choice: box it into a
//! [`BoxDialer`](crate::BoxDialer) or a [`BoxAcceptor`](crate::BoxAcceptor), which pools and servers take like
//! any other stack.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tokio::{io::{AsyncReadExt, AsyncWriteExt}, net::TcpListener};
//! use tower::ServiceBuilder;
//! use weft::{
//!     handshake::{HandshakeExt, Versions}, mux, transport::TcpAcceptor, BoxAcceptor, Identity, MultiplexLayer,
//!     NegotiateLayer,
//! };
//!
//! // Encryption on or off, chosen at run time: two types, one box.
//! fn acceptor(identity: Option<Identity>) -> BoxAcceptor {
//!     match identity {
//!         Some(identity) => BoxAcceptor::new(weft::acceptor(identity)),
//!         None => BoxAcceptor::new(
//!             ServiceBuilder::new()
//!                 .layer(MultiplexLayer::new(mux::Builder::new()))
//!                 .layer(NegotiateLayer::new(Versions::CURRENT))
//!                 .service(TcpAcceptor::new()),
//!         ),
//!     }
//! }
//!
//! let server_identity = Identity::generate();
//! let server_key = server_identity.peer_id();
//! let listener = TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let mut server = acceptor(Some(server_identity));
//! tokio::spawn(async move {
//!     let (tcp, _) = listener.accept().await?;
//!     let connection = server.accept_transport(tcp).await?;
//!     let mut stream = connection.accept().await?.expect("a stream");
//!     stream.write_all(b"hello").await?;
//!     stream.shutdown().await?;
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
//! });
//!
//! let mut dialer = weft::dialer(Identity::generate());
//! let connection = dialer.handshake(weft::handshake::Handshake::dial(addr).expect_peer(server_key)).await?;
//! let mut stream = connection.open().await?;
//! stream.shutdown().await?;
//! let mut reply = String::new();
//! stream.read_to_string(&mut reply).await?;
//! assert_eq!(reply, "hello");
//! # Ok(())
//! # }
//! ```
//!
//! # The order is checked by the compiler
//!
//! Each layer takes what the layer below makes ([`Negotiated`] from
//! [`NegotiateLayer`], an encrypted [`Channel`](crate::Channel) from
//! [`EncryptLayer`], [`StreamLimited`] from
//! [`StreamLimitLayer`]), so a stack in the wrong order does not compile.
//! A layer over the wrong layer is an error that names the layer and where
//! it goes; a layer straight over the connector, where `NegotiateLayer`
//! belongs, is tower's error that the connector is not a
//! `Service<Handshake<_>>` (tests/stack_order.rs checks both kinds of
//! message, which the examples below cannot). Top to bottom:
//! `MultiplexLayer`, `StreamLimitLayer`, `RecordSizeLayer`,
//! `EncryptLayer`, `NegotiateLayer`, the connector; only
//! `NegotiateLayer` and `MultiplexLayer` are required. A stream limit
//! below the record sizes:
//!
//! ```compile_fail,E0277
//! # use tower::ServiceBuilder;
//! # use weft::{handshake::Versions, mux, transport::TcpAcceptor, MultiplexLayer, NegotiateLayer,
//! #            RecordSizeLayer, StreamLimitLayer};
//! fn serve_with(acceptor: impl weft::stack::Acceptor) {}
//! serve_with(
//!     ServiceBuilder::new()
//!         .layer(MultiplexLayer::new(mux::Builder::new()))
//!         .layer(RecordSizeLayer::dynamic())
//!         .layer(StreamLimitLayer::new(8)) // error: `RecordSizeLayer` cannot size the records of `StreamLimited<..>`
//!         .layer(NegotiateLayer::new(Versions::CURRENT))
//!         .service(TcpAcceptor::new()),
//! );
//! ```
//!
//! Encrypting twice:
//!
//! ```compile_fail,E0277
//! # use tower::ServiceBuilder;
//! # use weft::{handshake::Versions, mux, transport::TcpAcceptor, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer};
//! fn serve_with(acceptor: impl weft::stack::Acceptor) {}
//! serve_with(
//!     ServiceBuilder::new()
//!         .layer(MultiplexLayer::new(mux::Builder::new()))
//!         .layer(EncryptLayer::new(Identity::generate())) // error: `EncryptLayer` cannot encrypt `Channel<..>`
//!         .layer(EncryptLayer::new(Identity::generate()))
//!         .layer(NegotiateLayer::new(Versions::CURRENT))
//!         .service(TcpAcceptor::new()),
//! );
//! ```
//!
//! [`AdmissionLayer`]: crate::AdmissionLayer
//! [`EncryptLayer`]: crate::EncryptLayer
//! [`MultiplexLayer`]: crate::MultiplexLayer
//! [`NegotiateLayer`]: crate::NegotiateLayer
//! [`RecordSizeLayer::dynamic`]: crate::RecordSizeLayer::dynamic
//! [`StreamLimitLayer`]: crate::StreamLimitLayer
//! [`Versions::CURRENT`]: crate::handshake::Versions::CURRENT

use crate::transport::{Connector, TcpAcceptor};

pub use crate::{
    admission::Admission,
    handshake::{
        encrypt::{Encrypt, Encryptable},
        negotiate::{Negotiate, Negotiated},
        record_size::{RecordSize, Sizable},
    },
    mux::{
        layer::{Acceptor, Multiplex, Multiplexable},
        limit::{Limitable, StreamLimit, StreamLimited},
    },
};

/// The type of [`dialer`](crate::dialer)'s stack.
pub type StandardDialer = Multiplex<StreamLimit<RecordSize<Encrypt<Negotiate<Connector>>>>>;

/// The type of [`acceptor`](crate::acceptor)'s stack.
pub type StandardAcceptor = Multiplex<StreamLimit<RecordSize<Encrypt<Negotiate<TcpAcceptor>>>>>;
