//! The server every front runs: [`http::serve`](crate::http::serve), the
//! RPC [`Server`](crate::rpc::server::Server), and [`serve`] here for
//! streams of a protocol of your own. Each is this one server with a
//! handler for the streams a peer opens; they share its settings, set on
//! each front's builder with the same names:
//!
//! - **The accept loop** over any [`Listener`](crate::transport::Listener)
//!   (a tokio `TcpListener` or `UnixListener`, or a stream of transports as
//!   [`Incoming`](crate::transport::Incoming)): each connection through the
//!   acceptor stack in a task of its own, inside a `connection` tracing span
//!   with the server's name and the peer's address.
//! - **Connection caps that make room** (`max_connections`, 10,000, and
//!   `max_connections_per_address`, 256): at a cap a newcomer from a
//!   network that holds less than the heaviest closes an idle connection
//!   of that network's heaviest source, or a handshake pending half a
//!   second; only when nothing may give way is it refused, with a close
//!   its dialer reads as `EXCESSIVE_LOAD` and the reason.
//! - **Idle connections closed** (`close_idle_after`, off by default), with
//!   a go-away first so that no stream is lost.
//! - **A graceful shutdown** (`with_graceful_shutdown`, or the RPC
//!   server's `serve_with_shutdown`): no new connections, a go-away on
//!   every connection, what is in flight finishes within
//!   `shutdown_timeout` (30 s).
//!
//! - **Streams to a handler**: each front is the server with a handler
//!   for the streams a peer opens (HTTP, calls, or yours), and layers wrap
//!   handlers as they wrap tower services: the RPC server with HTTP
//!   beside it tells the two apart by a stream's first bytes with a
//!   detect layer over its calls.
//!
//! - **Handshake admission** (`admission`, an
//!   [`AdmissionLayer`](crate::AdmissionLayer)'s settings: handshake
//!   rates, pending handshakes in all and per address, their waiting
//!   room), put on the acceptor the server is given; its refusals and
//!   those of the caps take turns from one budget of connections being
//!   told why.
//!
//! The handshake's deadline is the acceptor stack's `NegotiateLayer`'s.

mod accept;
mod caps;
mod connection;
#[cfg(feature = "http")]
mod detect;
mod handler;
mod places;
pub(crate) mod settings;
mod streams;

pub(crate) use accept::{serve as serve_front, Front};
pub(crate) use connection::Opened;
#[cfg(feature = "http")]
pub(crate) use connection::Stopping;
#[cfg(feature = "http")]
pub(crate) use detect::DetectLayer;
#[cfg(feature = "http")]
pub(crate) use handler::Handler;
pub(crate) use settings::{settings_methods, Settings};
pub use streams::{serve, Serve};
