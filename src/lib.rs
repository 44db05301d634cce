//! weft: encrypted, multiplexed connections built from tokio and tower
//! layers.
//!
//! # A tour: three jobs
//!
//! 1. **A connection.** [`dialer`] and [`acceptor`] build the standard
//!    stack for an [`Identity`]; dial with it (a
//!    [`Handshake`] with the peer's key pinned) or accept with it
//!    ([`HandshakeExt`](handshake::HandshakeExt)), and a [`Connection`] opens and
//!    accepts [`Stream`]s (`AsyncRead + AsyncWrite`) with no round trip
//!    each. [`server::serve`] accepts for you, a handler per stream. The
//!    layers of the stack, one concern each, are below.
//! 2. **HTTP over weft.** A [`pool::Pool`] of connections keyed by
//!    [`pool::Endpoint`]; [`http::Connector`] puts hyper-util's client,
//!    or tonic's `Channel`, on it; [`http::serve`] runs an axum `Router`,
//!    tonic services or any hyper service on accepted connections, with
//!    the caller's verified key in each request ([`http::PeerInfo`]).
//! 3. **RPC.** Services from `.proto` files (the `weft-build` crate in
//!    `build.rs`, [`include_proto!`]): [`rpc::server::Server`] serves them
//!    with tower middleware around a router, and
//!    [`rpc::client::Client`] calls them over a pool, one stream per
//!    call: deadlines, cancellation, metadata, gRPC's codes, a
//!    [health service](rpc::health) and [trace context](rpc::trace).
//!
//! For a fleet: `discover` (feature `dns`) and `rpc::client::Balanced`
//! spread calls over a name's servers, [`metrics`] and `admin` observe,
//! and `sim` simulates links in tests. README has each job's code;
//! `examples/` runs it.
//!
//! # The stack
//!
//! A weft stack is tower layers around a connector, one layer per concern,
//! and its product is a [`Connection`]: many [`Stream`]s over one encrypted
//! channel, with flow control, stream limits the peer is told about, fair
//! scheduling, keepalive and graceful shutdown. Every layer adds its typed
//! part of the offer to a single Setup message that
//! both sides send the moment the transport is up, so setup is one round
//! trip where TLS 1.2 needs two.
//!
//! ```text
//!   MultiplexLayer     the channel becomes a Connection: streams,
//!                      flow control, keepalive, go-away              mux/
//!   StreamLimitLayer   the stream limit (and windows) the peer is
//!                      told, for the Connection above to enforce     mux/
//!   RecordSizeLayer    fixed or dynamic (Go-style) record sizes      record/
//!   EncryptLayer       X25519 keys, identity proofs, sealed records  crypto/
//!   NegotiateLayer     the single Setup exchange (versions, offers)  setup/
//!   ─────────────────────────────────────────────────────────────
//!   TcpConnector / TcpAcceptor / ExistingTransport: any AsyncRead+Write
//!                                              transport/, frame/
//! ```
//!
//! A request ([`Handshake`]) travels down the stack collecting each layer's
//! offer; the established [`Channel`] travels back up, each layer doing its
//! part of the handshake with what was agreed, until the multiplexer on top
//! turns it into a [`Connection`]. A whole dialer is one service,
//! `Service<Handshake<T>, Response = Connection>`, that a pool can clone and
//! call. The dialer and the acceptor run the same layers; only the base
//! service differs.
//!
//! # Example
//!
//! ```
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tower::ServiceBuilder;
//! use weft::{
//!     handshake::{Handshake, HandshakeExt, Versions}, mux, transport::ExistingTransport, EncryptLayer,
//!     Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), weft::Error> {
//! let server_identity = Identity::generate();
//! let server_id = server_identity.peer_id();
//! let stack = |identity| {
//!     ServiceBuilder::new()
//!         .layer(MultiplexLayer::new(mux::Builder::new()))
//!         .layer(StreamLimitLayer::new(100))      // at most 100 streams from the peer, and it is told
//!         .layer(RecordSizeLayer::dynamic())
//!         .layer(EncryptLayer::new(identity))
//!         .layer(NegotiateLayer::new(Versions::CURRENT))
//!         .service(ExistingTransport::new())      // TcpConnector / TcpAcceptor over TCP
//! };
//! let mut dialer = stack(Identity::generate());
//! let mut acceptor = stack(server_identity);
//!
//! let (a, b) = tokio::io::duplex(64 * 1024);
//! let server = tokio::spawn(async move {
//!     let connection = acceptor.accept_transport(b).await?;
//!     while let Some(mut stream) = connection.accept().await? {
//!         let mut request = String::new();
//!         stream.read_to_string(&mut request).await?;
//!         stream.write_all(format!("hello, {request}").as_bytes()).await?;
//!         stream.shutdown().await?;
//!     }
//!     Ok::<_, weft::Error>(())
//! });
//!
//! let connection = dialer.handshake(Handshake::dial(a).expect_peer(server_id)).await?;
//! assert_eq!(connection.peer(), Some(&server_id));
//! let mut stream = connection.open().await?;      // no round trip to open
//! stream.write_all(b"weft").await?;
//! stream.shutdown().await?;
//! let mut reply = String::new();
//! stream.read_to_string(&mut reply).await?;
//! assert_eq!(reply, "hello, weft");
//! drop((stream, connection));                     // the last handle closes it
//! server.await.unwrap()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Connections, and how they end
//!
//! A [`Connection`] answers without awaiting what a pool asks on every
//! checkout: [`is_closed`](mux::Connection::is_closed),
//! [`is_going_away`](mux::Connection::is_going_away),
//! [`available_streams`](mux::Connection::available_streams);
//! [`try_open`](mux::Connection::try_open) and
//! [`poll_open`](mux::Connection::poll_open) open without waiting, or reserve a
//! stream in a `poll_ready`. Its [`Error`]s are of an [`ErrorKind`] to
//! match on, tell a graceful end ([`Error::is_closed`]: a drained go-away,
//! a clean close) from a failure, say which [`Side`] caused it and with
//! which [`CloseCode`], and mark the streams the peer provably never
//! processed ([`Error::is_retryable`]).
//!
//! # Security
//!
//! - Each connection uses fresh ephemeral X25519 keys. Record keys come
//!   from HKDF over the shared secret, salted with the hash of both Setup
//!   messages: editing either Setup in flight (a version or suite
//!   downgrade) makes the first sealed record fail, before any application
//!   byte is delivered.
//! - Each side proves its Ed25519 [`Identity`] by signing the transcript in
//!   its first sealed record: mutual authentication with no extra round
//!   trip, and resistance to key-compromise impersonation. The steps are
//!   typestate (proof sent → proof verified → authenticated): the keys and the peer's identity exist
//!   only once the proof verified and the pin and authorizer accepted it.
//!   A pin ([`Handshake::expect_peer`](handshake::Handshake::expect_peer)) in a stack with no
//!   [`EncryptLayer`] to check it fails the handshake.
//! - A close that arrives in the clear during the handshake is an
//!   [`ErrorKind::Closed`] error that [`Error::is_peer_close`] does not
//!   vouch for: anyone on the path could have sent it, so never fall back
//!   to weaker settings because of one.
//! - Nonces are implicit per-direction counters. A sending key refuses to
//!   seal before its counter could wrap, and an AES-256-GCM key after the
//!   usage RFC 8446 allows (an [`ErrorKind::Record`] error: the key is
//!   exhausted, reconnect).
//! - A clean end is an authenticated close record. A transport that simply
//!   ends reads as [`ErrorKind::Truncated`].
//! - Wiped when dropped: the X25519 ephemeral secrets and shared secret,
//!   the Ed25519 signing key, the derived key bytes and IVs, the
//!   XSalsa20-Poly1305 and XChaCha20-Poly1305 keys, and (by aws-lc) the
//!   AES-256-GCM and ChaCha20-Poly1305 key schedules and the HKDF
//!   pseudorandom key (docs/PROTOCOL.md, section 14).
//!
//! # Limits
//!
//! Nothing a peer sends can make weft allocate without bound, panic, or
//! hang a task. Frame headers are checked against the receiver's maximum
//! before anything is reserved. Setup messages are capped at
//! 4 KiB, and records at the agreed record size
//! (at most 64 KiB). A silent peer hits the handshake deadline
//! (10 s by default), and after the handshake the idle
//! timeout (30 s by default). Received stream data is bounded
//! by the flow-control windows, and so is the memory it keeps alive;
//! streams are bounded by the declared stream limit, control frames by a
//! fixed size, unanswered pings by a budget. [`mux::Builder`] gives the
//! worst-case memory of a connection.
//!
//! # Streams
//!
//! [`MultiplexLayer`] (or, for a channel built without it,
//! [`Connection::new`](mux::Connection::new)) spawns one driver task per connection on the
//! current tokio runtime, which reads the channel; streams write to it
//! themselves when nothing waits ahead of them. [`Connection`] handles are
//! cheap to clone, and the last one dropped closes the connection after
//! what is queued.
//!
//! # Pools, and HTTP over weft
//!
//! [`pool::Pool`] keeps one connection per endpoint over a dialer stack
//! like the one above (more when the peer's stream limit is reached), and
//! is a `tower::Service<Endpoint>` yielding streams.
//! [`http::Connector`] puts hyper-util's client, and tonic's `Channel`, on
//! a pool; [`http::serve`] runs hyper or tower HTTP services (an axum
//! `Router`, tonic services) on accepted streams. The `http` module is the
//! default feature `http`.
//!
//! [`rpc`] runs calls over streams, one stream per call: typed clients and
//! servers generated from `.proto` files (by the `weft-build` crate),
//! tower middleware around a router on the server, deadlines,
//! cancellation and gRPC's status codes.
//!
//! Servers ([`http::serve`], the RPC server, [`server::serve`] for streams
//! of your own protocol) are one [`server`] with a handler each: they take
//! any [`transport::Listener`] (TCP, a Unix socket, or any stream of
//! transports), and share their connection caps, idle limit and graceful
//! shutdown, set with the same names on each.
//!
//! # Running on a cluster
//!
//! With the feature `dns`, `weft::discover` finds a fleet's endpoints by
//! DNS (A/AAAA and SRV records, re-resolved at their TTL), and
//! `rpc::client::Balanced` and `http::BalancedConnector` spread calls
//! over them by load. With `metrics` (on by default), [`metrics`] lists
//! what weft reports through the `metrics` facade. With `admin`,
//! `weft::admin` is a live view of connections, pools and RPC methods, as
//! JSON and as a page. Both are observers: each stack, pool, server and
//! client reports to the one it is handed (`.observer(..)`), and to
//! nothing otherwise.
//!
//! # Features
//!
//! `http` (default): hyper and tower HTTP over weft. `metrics` (default):
//! the `metrics` facade. `dns`: discovery with hickory-resolver. `admin`:
//! the live view (serde, hdrhistogram). `sim`: simulated links and
//! faults for tests. `fuzzing`: entry points for the fuzz targets, not an
//! API.
//!
//! The wire format is specified byte by byte in `docs/PROTOCOL.md`.
//!
//! [`Connection`]: mux::Connection
//! [`Stream`]: mux::Stream
//! [`Handshake`]: handshake::Handshake

// Safe code throughout, with one measured exception: the wide Salsa20 of
// the NaCl-box suite (record/secretbox.rs) is compiled for AVX2 and
// AVX-512 and called only once the CPU is found to have them.
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The code weft-build generates names `weft::rpc::codegen`, as a user's
// crate does; weft's own generated code (the health service) too.
extern crate self as weft;

#[cfg(feature = "admin")]
pub mod admin;
mod admission;
mod bucket;
mod clock;
mod crypto;
#[cfg(feature = "dns")]
pub mod discover;
mod error;
mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
#[cfg(feature = "http")]
pub mod http;
#[cfg(debug_assertions)]
mod instances;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod mux;
pub mod pool;
mod proto;
mod record;
pub mod rpc;
pub mod server;
#[cfg(feature = "sim")]
pub mod sim;
pub mod stack;
mod standard;
mod sync;
mod terms;
pub mod transport;

pub use admission::AdmissionLayer;
pub use crypto::Identity;
pub use handshake::{encrypt::EncryptLayer, negotiate::NegotiateLayer, record_size::RecordSizeLayer};
/// README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use error::{CloseCode, Error, ErrorKind, ParseError, Refusal, Side, Violation};
pub use mux::{layer::MultiplexLayer, limit::StreamLimitLayer};
pub use record::{Channel, ChannelStats};
pub use standard::{
    acceptor, acceptor_with, acceptor_with_early_data, dialer, dialer_with, BoxAcceptor, BoxDialer,
};
// The standard stacks compiled once in weft for debug builds of programs
// on it (src/instances.rs): not an API.
#[cfg(debug_assertions)]
#[doc(hidden)]
pub use instances::standard_instances as __standard_instances;
