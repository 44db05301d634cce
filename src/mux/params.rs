//! What the core needs of the settings, resolved once per connection
//! (from the agreement and the [`Builder`](super::Builder), in
//! `config.rs`).

use std::time::Duration;

use super::Budgets;
use crate::handshake::Role;

/// No window may exceed this (1 GiB): credit past it is a protocol error.
pub(crate) const MAX_WINDOW: u64 = 1 << 30;

/// How many stream ids a side has: the dialer's are the odd numbers from 1
/// to 2^32 - 1, the acceptor's the even numbers from 2 to 2^32 - 2.
pub(crate) fn id_space(role: Role) -> u32 {
    match role {
        Role::Dialer => 1 << 31,
        Role::Acceptor => (1 << 31) - 1,
    }
}

/// Everything the core needs, resolved from the agreement and the builder.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub(crate) role: Role,
    pub(crate) local_max_streams: u32,
    pub(crate) local_stream_window: u32,
    pub(crate) local_connection_window: u32,
    pub(crate) peer_max_streams: u32,
    pub(crate) peer_stream_window: u32,
    pub(crate) peer_connection_window: u32,
    pub(crate) max_stream_window: u64,
    pub(crate) max_connection_window: u64,
    pub(crate) send_buffer: usize,
    pub(crate) connection_send_buffer: usize,
    pub(crate) quantum: usize,
    pub(crate) keepalive: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) drain_timeout: Duration,
    pub(crate) budgets: Budgets,
}

impl Params {
    /// Small, fixed parameters for the deterministic core tests and the fuzz
    /// harness: `max_streams` each way, 64 KiB stream windows (a connection
    /// window of four), growing to 16 and 64 times that.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn small(role: Role, max_streams: u32) -> Self {
        const WINDOW: u32 = 64 * 1024;
        Self {
            role,
            local_max_streams: max_streams,
            local_stream_window: WINDOW,
            local_connection_window: 4 * WINDOW,
            peer_max_streams: max_streams,
            peer_stream_window: WINDOW,
            peer_connection_window: 4 * WINDOW,
            max_stream_window: 16 * u64::from(WINDOW),
            max_connection_window: 64 * u64::from(WINDOW),
            send_buffer: 256 * 1024,
            connection_send_buffer: usize::MAX,
            quantum: 16 * 1024,
            keepalive: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(30)),
            drain_timeout: Duration::from_secs(5),
            budgets: Budgets::default(),
        }
    }
}
