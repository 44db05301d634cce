//! Why admission control turned a handshake away.

use std::time::Duration;

/// Why admission control turned a handshake away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// As many handshakes are pending as the acceptor allows, none old
    /// enough to give way.
    #[error("{pending} handshakes pending, the acceptor's limit")]
    Busy {
        /// Handshakes pending.
        pending: usize,
    },
    /// As many handshakes from this source are pending as it may have.
    #[error("{pending} handshakes from {address} pending, its limit")]
    AddressBusy {
        /// The source (an IPv6 address as its /64).
        address: std::net::IpAddr,
        /// Its handshakes pending.
        pending: usize,
    },
    /// This source started handshakes faster than its rate.
    #[error("{address} started more than {per_second} handshakes a second")]
    AddressRate {
        /// The source (an IPv6 address as its /64).
        address: std::net::IpAddr,
        /// Its budget per second.
        per_second: u64,
    },
    /// The acceptor started as many handshakes as its rate allows, and
    /// this source has had its share of them lately.
    #[error(
        "the acceptor started {per_second} handshakes a second, its limit, and this source had its share"
    )]
    Rate {
        /// The acceptor's budget per second.
        per_second: u64,
    },
    /// The server has as many connections as it allows
    /// (`max_connections`), handshakes included.
    #[error("{open} connections open, the server's limit")]
    Connections {
        /// Connections the server had.
        open: usize,
    },
    /// The server has as many connections from this source as it allows
    /// (`max_connections_per_address`).
    #[error("{open} connections from {address} open, its limit")]
    AddressConnections {
        /// The source (an IPv6 address as its /64).
        address: std::net::IpAddr,
        /// Its connections.
        open: usize,
    },
    /// The handshake was the oldest pending when the acceptor was full,
    /// and gave way to a new one.
    #[error("evicted after {} pending, to make room", crate::error::Rounded(*.0))]
    Evicted(Duration),
}
