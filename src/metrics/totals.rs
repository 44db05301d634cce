//! What a connection's driver reports to the metrics.

/// A connection's counts so far, as its driver knows them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    pub(crate) records_sent: u64,
    pub(crate) records_received: u64,
    pub(crate) key_updates_sent: u64,
    pub(crate) key_updates_received: u64,
    pub(crate) open_streams: usize,
}
