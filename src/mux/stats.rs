//! A connection's counters, as [`Connection::stats`](super::Connection::stats)
//! takes them.

use std::time::Duration;

/// Counters of one connection, cheap to take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Streams open in either direction: finished both ways, a stream is
    /// not, even while a handle to it lingers.
    pub open_streams: usize,
    /// Our streams the peer's stream limit counts now: those we opened,
    /// less the slots its stream credit gave back (what
    /// [`Connection::available_streams`](super::Connection::available_streams) leaves of its limit).
    pub streams_counted: u32,
    /// The most of our streams the peer's limit counted at once.
    pub max_streams_counted: u32,
    /// The peer's streams our stream limit counts now (each until its
    /// handler is done with it, PROTOCOL.md 15.4).
    pub peer_streams_counted: u32,
    /// The most of the peer's streams our limit counted at once.
    pub max_peer_streams_counted: u32,
    /// Streams we opened so far.
    pub streams_opened: u64,
    /// Streams we accepted so far.
    pub streams_accepted: u64,
    /// Stream payload bytes sent.
    pub bytes_sent: u64,
    /// Stream payload bytes received.
    pub bytes_received: u64,
    /// Mux frames sent.
    pub frames_sent: u64,
    /// Mux frames received.
    pub frames_received: u64,
    /// Records sealed.
    pub records_sent: u64,
    /// Records opened (as of the last read).
    pub records_received: u64,
    /// Of those, the records a stream's own task read, rather than the
    /// connection's driver: while one task alone waits on the connection,
    /// it reads for itself, and each such record saves a hand-off between
    /// tasks (the driver reading, then waking the stream's task).
    pub records_read_by_streams: u64,
    /// Key updates we sent (protocol version 2).
    pub key_updates_sent: u64,
    /// Key updates the peer sent (as of the last read).
    pub key_updates_received: u64,
    /// Received bytes the application has not read yet.
    pub buffered: u64,
    /// Bytes the streams have queued that are not sent yet (at most
    /// [`send_buffer`](super::Builder::send_buffer) per stream, and
    /// [`connection_send_buffer`](super::Builder::connection_send_buffer)
    /// in all).
    pub queued: u64,
    /// The connection's receive window now: what the peer may have in
    /// flight to us (it grows toward the bandwidth-delay product, up to
    /// [`StreamLimitLayer::max_receive_windows`](crate::StreamLimitLayer::max_receive_windows)).
    pub recv_window: u64,
    /// Bytes the peer's connection window lets us send now, before it
    /// returns credit.
    pub send_credit: u64,
    /// Bytes of read-buffer allocations that unread stream data keeps alive
    /// without copying (at most the connection window).
    pub pinned: usize,
    /// Smoothed round-trip time from pings, once measured.
    pub rtt: Option<Duration>,
    /// The channel's read and write buffer capacity (the read side as of
    /// the last read): see [`Channel::buffer_capacity`](crate::Channel::buffer_capacity).
    pub io_buffers: usize,
}
