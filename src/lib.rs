//! weft: encrypted, multiplexed connections built from tokio and tower
//! layers.
//!
//! A weft channel is a stack of tower layers around a connector. Each layer
//! handles one concern, and every layer adds its offer to a single Setup
//! message that both sides send the moment the transport is up. That makes
//! setup one round trip where TLS 1.2 needs two. A [`Connection`] then
//! carries many [`Stream`]s over the channel, with flow control, stream
//! limits the peer is told about, fair scheduling, keepalive and graceful
//! shutdown.
//!
//! ```text
//!   Connection, Stream  streams, flow control, keepalive, go-away   mux/
//!   ─────────────────────────────────────────────────────────────
//!   StreamLimitLayer   max concurrent streams, initial windows      mux/
//!   RecordSizeLayer    fixed or dynamic (Go-style) record sizes     record/
//!   EncryptLayer       X25519 keys, identity proof, sealed records  crypto/
//!   NegotiateLayer     the single Setup exchange (versions + offers) setup/
//!   ─────────────────────────────────────────────────────────────
//!   FrameCodec over TcpStream / tokio::io::duplex / any AsyncRead+Write
//!                                                     frame/, transport/
//! ```
//!
//! A request ([`Handshake`]) travels down the stack collecting offers and
//! the established [`Channel`] travels back up, each layer applying what
//! was agreed. The dialer and the acceptor run the same layers; only the
//! base service differs ([`TcpConnector`] dials, [`ExistingTransport`] passes an
//! accepted transport through).
//!
//! # Example
//!
//! ```
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tower::ServiceBuilder;
//! use weft::{handshake::Versions, ExistingTransport, EncryptLayer, Handshake, HandshakeExt, Identity, NegotiateLayer, RecordSizeLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weft::Error> {
//! let server_identity = Identity::generate();
//! let server_id = server_identity.peer_id();
//! let stack = |identity| {
//!     ServiceBuilder::new()
//!         .layer(RecordSizeLayer::dynamic())
//!         .layer(EncryptLayer::new(identity))
//!         .layer(NegotiateLayer::new(Versions::new(1, 1)))
//!         .service(ExistingTransport::new())
//! };
//! let mut dialer = stack(Identity::generate());
//! let mut acceptor = stack(server_identity);
//!
//! let (a, b) = tokio::io::duplex(64 * 1024);
//! let server = tokio::spawn(async move {
//!     let mut channel = acceptor.accept(b).await?;
//!     channel.write_all(b"hello").await?;
//!     channel.shutdown().await?;
//!     Ok::<_, weft::Error>(())
//! });
//! let mut channel = dialer.handshake(Handshake::dial(a).expect_peer(server_id)).await?;
//! let mut text = String::new();
//! channel.read_to_string(&mut text).await?;
//! assert_eq!(text, "hello");
//! assert_eq!(channel.peer(), Some(&server_id));
//! server.await.unwrap()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Security
//!
//! - Each connection uses fresh ephemeral X25519 keys, zeroized on drop.
//!   Keys come from HKDF over the shared secret, salted with the hash of
//!   both Setup messages. Editing either Setup in flight (a version or suite
//!   downgrade) makes the first sealed record fail, before any application
//!   byte is delivered.
//! - Each side proves its Ed25519 [`Identity`] by signing the transcript in
//!   its first sealed record. That gives mutual authentication with no extra
//!   round trip, and resistance to key-compromise impersonation.
//! - Nonces are implicit per-direction counters. A sending key refuses to
//!   seal before its counter could wrap ([`Error::KeyExhausted`]).
//! - A clean end is an authenticated close record. A transport that simply
//!   ends reads as [`Error::Truncated`].
//!
//! # Limits
//!
//! Nothing a peer sends can make weft allocate without bound. Frame headers
//! are checked against the receiver's maximum before anything is reserved.
//! Setup messages are capped at [`setup::DEFAULT_MAX_SETUP_SIZE`], and
//! records at the agreed record size (at most 64 KiB). A silent peer hits
//! the handshake deadline ([`setup::DEFAULT_HANDSHAKE_TIMEOUT`]), and after
//! the handshake the idle timeout ([`mux::DEFAULT_IDLE_TIMEOUT`]). Received
//! stream data is bounded by the flow-control windows, streams by the
//! declared stream limit, and control frames by a fixed size; see
//! [`mux::Builder`] for the worst-case memory of a connection.
//!
//! # Streams
//!
//! [`Connection::new`] spawns one driver task per connection on the current
//! tokio runtime; [`Connection`] handles are cheap to clone. See the
//! [`Connection`] example for a complete stack with streams.
//!
//! The wire format is specified byte by byte in `docs/PROTOCOL.md`.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod crypto;
mod error;
pub mod frame;
pub mod handshake;
pub mod mux;
pub mod proto;
pub mod record;
pub mod setup;
pub mod sim;
pub mod transport;

pub use crypto::{EncryptLayer, Identity};
pub use error::{BoxError, CloseCode, Error, Side, Violation};
pub use frame::FrameError;
pub use handshake::{Agreement, CipherSuite, Handshake, HandshakeExt, PeerId, Role};
pub use mux::{
    Connection, ConnectionStats, MultiplexLayer, RecvStream, SendStream, Stream, StreamLimitLayer,
    WeakConnection,
};
pub use record::{Channel, ChannelStats, RecordPolicy, RecordSizeLayer};
pub use setup::NegotiateLayer;
pub use transport::{ExistingTransport, TcpAcceptor, TcpConnector};
