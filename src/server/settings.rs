//! What every server front takes (the RPC server's builder, `http::Serve`,
//! `server::Serve`), kept and documented once: handshake admission, the
//! connection caps, the idle limit and the shutdown deadline.

use std::time::Duration;

use crate::AdmissionLayer;

/// Connections a server holds at once, handshakes included, by default.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Connections a server holds at once from one source address (an IPv4
/// address, or an IPv6 /64), by default.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;
/// How long calls and streams in flight may take to finish once a
/// graceful shutdown starts, by default.
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections a server takes: in all, and per source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    pub(crate) max: usize,
    pub(crate) per_address: usize,
}

/// A server's settings: how it admits handshakes, its connection caps,
/// how long an idle connection is kept, and how long a graceful shutdown
/// waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Handshake rates, pending handshakes and their waiting room.
    pub(crate) admission: AdmissionLayer,
    pub(crate) connections: ConnectionLimits,
    /// A connection with no stream for this long is closed (gracefully:
    /// a go-away, then the close once nothing is in flight).
    pub(crate) close_idle_after: Option<Duration>,
    /// How long what is in flight may take to finish once a graceful
    /// shutdown starts (`None`: as long as it takes).
    pub(crate) shutdown_timeout: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            admission: AdmissionLayer::new(),
            connections: ConnectionLimits {
                max: DEFAULT_MAX_CONNECTIONS,
                per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            },
            close_idle_after: None,
            shutdown_timeout: Some(DEFAULT_SHUTDOWN_TIMEOUT),
        }
    }
}

/// The builder methods of a server's [`Settings`], for a front whose
/// field `$field` holds them: written, and documented, once.
macro_rules! settings_methods {
    ($field:ident) => {
        /// How the server admits handshakes (default
        /// [`AdmissionLayer::new()`](crate::AdmissionLayer::new)): how
        /// many may be pending, in all and per source address, how fast
        /// they may start, in all and per address, and the waiting room
        /// of a source past its pending limit. A handshake costs the
        /// server before its peer has proven anything; these bound what
        /// strangers can make it spend, beside the connection caps.
        /// The settings are [`AdmissionLayer`](crate::AdmissionLayer)'s,
        /// which a hand-written accept loop puts on its acceptor stack
        /// instead; one on a stack a server runs applies as well, so that
        /// the stricter of the two limits a handshake.
        ///
        /// ```
        /// use weft::{rpc::server::Server, AdmissionLayer};
        ///
        /// // A server its own clients dial often: more handshakes per address.
        /// let builder = Server::builder()
        ///     .admission(AdmissionLayer::new().handshakes_per_second_per_address(1_000));
        /// # let _ = builder;
        /// ```
        pub fn admission(mut self, admission: crate::AdmissionLayer) -> Self {
            self.$field.admission = admission;
            self
        }

        /// Connections held at once, handshakes included (at least 1;
        /// default 10,000). At the cap a newcomer is not simply refused: if
        /// its network (an IPv4 /24, an IPv6 /48) holds at least two fewer
        /// than the network holding the most, an idle connection (no open
        /// stream) of that network is closed for it, the oldest of its
        /// heaviest source (of its heaviest /56, for IPv6); otherwise the
        /// oldest handshake pending half a second or more gives way. Only
        /// when nothing may give way is it refused before its handshake:
        /// the peer's handshake fails with an unauthenticated close,
        /// `EXCESSIVE_LOAD`, saying why.
        pub fn max_connections(mut self, n: usize) -> Self {
            self.$field.connections.max = n.max(1);
            self
        }

        /// Connections held at once from one source address, an IPv4
        /// address or an IPv6 /64 (at least 1; default 256): at it, the
        /// source's own oldest idle connection (or a handshake of its
        /// pending half a second) is closed for its newcomer, and otherwise
        /// the newcomer is refused as past
        /// [`max_connections`](Self::max_connections).
        pub fn max_connections_per_address(mut self, n: usize) -> Self {
            self.$field.connections.per_address = n.max(1);
            self
        }

        /// Closes a connection that has had no stream for `idle` (default
        /// `None`: never), gracefully: a go-away (a stream the peer opens
        /// meanwhile is refused unprocessed, so it opens it again
        /// elsewhere), then the close. gRPC's `MaxConnectionIdle`; the
        /// peer's pings do not count as use.
        pub fn close_idle_after(mut self, idle: Option<std::time::Duration>) -> Self {
            self.$field.close_idle_after = idle;
            self
        }

        /// How long what is in flight (calls, requests, streams) may take
        /// to finish once a graceful shutdown starts (default 30 s), or
        /// `None` to wait however long it takes; past it, the connections
        /// still open are closed.
        pub fn shutdown_timeout(mut self, timeout: impl Into<Option<std::time::Duration>>) -> Self {
            self.$field.shutdown_timeout = timeout.into();
            self
        }
    };
}

pub(crate) use settings_methods;
