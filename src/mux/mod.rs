//! Multiplexing: many [`Stream`]s over one [`Channel`](crate::Channel),
//! at the top of the stack ([`MultiplexLayer`](crate::MultiplexLayer)).
//!
//! A private `Multiplexer` is the sans-IO state machine (frames and `now` in;
//! frames, deadlines and events out); [`Connection`] is the tokio shell, one
//! driver task per connection around it. The frame layout is in
//! `docs/PROTOCOL.md`.
//!
//! - **Streams** are opened by either side without a round trip: the open
//!   frame carries the first data (and FIN, so open-write-close is one
//!   frame). Dialer streams have odd ids, acceptor streams even ones.
//! - **Flow control** is credit-based, per stream and per connection.
//!   Credit goes back as the application reads, batched (when half a window
//!   is consumed, many streams per frame); windows grow toward the
//!   bandwidth-delay product when one is used up within two round trips.
//!   Buffered data never exceeds the windows; see [`Builder`] for the
//!   worst-case memory.
//! - **Stream limits** are declared with [`StreamLimitLayer`](crate::StreamLimitLayer) and enforced
//!   with QUIC's semantics.
//! - **Scheduling**: control frames first, then round robin over the
//!   streams with data, one record-sized quantum per turn, a stream that
//!   starts sending served before the busy ones (fq_codel's new list);
//!   each stream queues at most its share of the connection's send buffer.
//!   Several records per write, flushed as soon as the queue drains; one
//!   module owns the socket's writing half and decides who writes it.
//! - **Keepalive**: pings measure the round trip and detect a dead peer.
//! - **Shutdown**: [`Connection::go_away`] drains; [`Connection::close`]
//!   ends at once. Either way, and on any failure, every pending read and
//!   write gets a typed error.

mod arbiter;
mod budgets;
mod build;
mod config;
mod connection;
mod core;
mod driver;
mod frame;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
mod id_map;
pub(crate) mod layer;
mod lending;
pub(crate) mod limit;
mod observe;
mod params;
mod reading;
mod shared;
mod stats;
mod stream;
mod waiting;
mod wake_list;
mod wire;

pub use budgets::Budgets;
pub use config::Builder;
pub(crate) use config::DEFAULT_MAX_STREAMS;
pub use connection::{Connection, WeakConnection};
pub use observe::Observer;
pub(crate) use observe::Observing;
pub use stats::ConnectionStats;
pub use stream::{RecvStream, SendStream, Stream};
pub use waiting::IncomingStreams;
