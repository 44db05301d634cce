//! Admission control for acceptors ([`AdmissionLayer`]).

mod core;
mod refuse;
mod service;
mod sources;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub(crate) use self::core::source;
pub(crate) use refuse::{refuse_in_turn, MAX_REFUSING};
pub use service::Admission;

use crate::Refusal;

/// Handshakes an acceptor may have pending at once, by default.
pub(crate) const DEFAULT_MAX_PENDING: usize = 256;
/// Handshakes one source address may have pending at once, by default.
pub(crate) const DEFAULT_MAX_PENDING_PER_ADDRESS: usize = 16;
/// Handshakes one source address may start per second (and in a burst),
/// by default: at about 100 µs of key agreement and signing each, a
/// hundredth of a core per attacking address at most.
pub(crate) const DEFAULT_HANDSHAKES_PER_SECOND_PER_ADDRESS: u64 = 100;
/// Handshakes the acceptor may start per second in all, by default, per
/// core ([`std::thread::available_parallelism`]): at about 100 µs of key
/// agreement and signing each, a tenth of the machine at most.
pub(crate) const DEFAULT_HANDSHAKES_PER_SECOND_PER_CORE: u64 = 1_000;
/// How long a handshake is pending before it gives way to a new one when
/// the acceptor is full, by default: several round trips of a slow link.
pub(crate) const DEFAULT_EVICT_AFTER: Duration = Duration::from_millis(500);
/// Handshakes one source may have waiting for a place past its pending
/// limit, by default: seventeen or more pods behind one NAT address
/// reconnecting at once, or one busy client dialing a burst.
pub(crate) const DEFAULT_MAX_WAITING_PER_ADDRESS: usize = 64;
/// How long a handshake waits for its source's place, by default: past
/// it, it is turned away (as a listen backlog holds a connection for a
/// while, not for ever).
pub(crate) const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(5);

/// Admission control for an acceptor stack: a
/// tower layer whose service counts each handshake as pending until the
/// stack beneath it yields, and turns away those past the limits with
/// [`ErrorKind::NotAdmitted`](crate::ErrorKind::NotAdmitted).
///
/// Every server puts one on the acceptor it is given, with the settings
/// of its `admission` (`Server::builder().admission(..)`,
/// `http::serve(..).admission(..)`, `server::serve(..).admission(..)`);
/// an accept loop of your own puts one outermost on its stack, as below.
/// Every admission layer keeps its own table: clone the *service* (as
/// servers do) to share one, rather than build a layer per connection.
///
/// It bounds how many handshakes may be pending at once, in all and per
/// source address, and how fast one address may start them. A handshake
/// costs the acceptor before the peer has proven anything: a
/// task, a few KiB of buffers, and, once the peer's Setup arrives, an
/// X25519 agreement and a signature. Slowloris peers stall mid-handshake
/// to hold those; a handshake flood sends canned Setups (no crypto on the
/// attacker's side) to spend them. The layer goes on the outside of an
/// acceptor stack, so that a handshake counts as pending until the stack
/// yields its [`Connection`](crate::mux::Connection):
///
/// - a source address (an IPv4 address, an IPv6 /64) may have
///   [`max_pending_per_address`](AdmissionLayer::max_pending_per_address)
///   handshakes pending; past that, a new one waits for a place (up to
///   [`max_waiting_per_address`](AdmissionLayer::max_waiting_per_address)
///   of them, at most [`max_wait`](AdmissionLayer::max_wait) each, and no
///   more waiting in all than `max_pending`), as a listen backlog holds a
///   connection, so that a burst of dials from one address (pods behind
///   one NAT, a client dialing many connections) is served in turn
///   rather than dropped. A source may start
///   [`handshakes_per_second_per_address`](AdmissionLayer::handshakes_per_second_per_address)
///   (in bursts of as many): one attacking address cannot crowd out the
///   others, nor make us run more than that many key agreements a second;
/// - the acceptor may start
///   [`handshakes_per_second`](AdmissionLayer::handshakes_per_second) in
///   all, shared by the sources asking: a source that has had its share
///   lately takes only from the upper half of the budget, so many
///   attacking addresses get what their number entitles them to, and an
///   honest one still gets its share;
/// - the acceptor may have [`max_pending`](AdmissionLayer::max_pending)
///   handshakes pending in all. When it is full, a new one evicts the
///   oldest of the source with the most pending, if that has two more than
///   its own source; otherwise the oldest of all, if its source is within
///   its share of the rate or the oldest has been pending for
///   [`evict_after`](AdmissionLayer::evict_after): an honest handshake takes
///   a round trip, a stalled one never ends, so under a slowloris attack from
///   many addresses it is the stalled ones that go, and new peers still get
///   in;
/// - the handshake deadline (`NegotiateLayer::handshake_timeout`) bounds
///   every handshake in any case.
///
/// A handshake turned away fails with an error of
/// [`ErrorKind::NotAdmitted`] (its [`refusal`](crate::Error::refusal) says
/// why) before any of the stack runs (so before any crypto). A peer over
/// TCP is told why, in a close frame in the clear that its handshake
/// reports as an unauthenticated close with `EXCESSIVE_LOAD` and the
/// reason (at most 256 at once, for half a second each; past that, and
/// over other transports, the transport is dropped). `weft::http::serve` and the RPC server
/// hand every handshake its peer's address; a handshake over a
/// [`TcpStream`](tokio::net::TcpStream) finds it by itself, and one over
/// another transport can be given it with
/// [`Handshake::with_peer_address`](crate::handshake::Handshake::with_peer_address)
/// (without one, only the acceptor-wide limit applies).
///
/// ```
/// use tower::ServiceBuilder;
/// use weft::{
///     handshake::Versions, mux, transport::TcpAcceptor, AdmissionLayer, EncryptLayer,
///     Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer
/// };
///
/// let acceptor = ServiceBuilder::new()
///     .layer(AdmissionLayer::new().max_pending(512))
///     .layer(MultiplexLayer::new(mux::Builder::new()))
///     .layer(StreamLimitLayer::new(100))
///     .layer(RecordSizeLayer::dynamic())
///     .layer(EncryptLayer::new(Identity::generate()))
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(TcpAcceptor::new());
/// # let _ = acceptor;
/// ```
///
/// [`ErrorKind::NotAdmitted`]: crate::ErrorKind::NotAdmitted
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionLayer {
    pub(crate) max_pending: usize,
    pub(crate) max_pending_per_address: usize,
    pub(crate) per_address_rate: u64,
    pub(crate) rate: u64,
    pub(crate) evict_after: Duration,
    pub(crate) max_waiting_per_address: usize,
    pub(crate) max_wait: Duration,
}

impl Default for AdmissionLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl AdmissionLayer {
    /// The defaults, each given with its setting.
    pub fn new() -> Self {
        Self {
            max_pending: DEFAULT_MAX_PENDING,
            max_pending_per_address: DEFAULT_MAX_PENDING_PER_ADDRESS,
            per_address_rate: DEFAULT_HANDSHAKES_PER_SECOND_PER_ADDRESS,
            rate: DEFAULT_HANDSHAKES_PER_SECOND_PER_CORE
                * std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            evict_after: DEFAULT_EVICT_AFTER,
            max_waiting_per_address: DEFAULT_MAX_WAITING_PER_ADDRESS,
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// Handshakes pending at once, in all (default 256, at least 1). Each holds a task,
    /// a few KiB of buffers and a socket until it ends or its deadline
    /// passes.
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n.max(1);
        self
    }

    /// Handshakes pending at once from one source address (default 16, at
    /// least 1).
    pub fn max_pending_per_address(mut self, n: usize) -> Self {
        self.max_pending_per_address = n.max(1);
        self
    }

    /// Handshakes one source address may start per second, in bursts of as
    /// many (default 100, at least 1).
    pub fn handshakes_per_second_per_address(mut self, n: u64) -> Self {
        self.per_address_rate = n.max(1);
        self
    }

    /// Handshakes the acceptor may start per second in all, in bursts of as
    /// many (default 1,000 per core, at least 1): the CPU that key
    /// agreements may take. When
    /// sources ask for more, they share it: one that has had its share
    /// lately (this rate over the sources asking in the last second)
    /// takes only from the upper half of the budget, and the lower half
    /// is kept for those that have not, so that an attacker with many
    /// addresses gets what their number entitles it to and no more.
    pub fn handshakes_per_second(mut self, n: u64) -> Self {
        self.rate = n.max(1);
        self
    }

    /// Handshakes from one source that may wait for a place once it has
    /// [`max_pending_per_address`](Self::max_pending_per_address) pending
    /// (default 64; 0 turns them away at once). Each holds its socket
    /// and a small future while it waits; waiting handshakes in all are
    /// bounded by [`max_pending`](Self::max_pending) too.
    pub fn max_waiting_per_address(mut self, n: usize) -> Self {
        self.max_waiting_per_address = n;
        self
    }

    /// How long a handshake waits for its source's place before it is
    /// turned away (default 5 s).
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait;
        self
    }

    /// How long the oldest pending handshake must have waited before it
    /// gives way to a new one when the acceptor is full (default 500 ms).
    pub fn evict_after(mut self, after: Duration) -> Self {
        self.evict_after = after;
        self
    }
}

impl<S> tower::Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Admission<S> {
        Admission::new(inner, self.clone())
    }
}
