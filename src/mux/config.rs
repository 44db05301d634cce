//! Connection settings: the defaults, why they are what they are, and what
//! they cost.

use std::time::Duration;

use super::{
    frame::HEADER_LEN,
    params::{id_space, Params, MAX_WINDOW},
    Budgets,
};
use crate::handshake::Agreement;

/// Concurrent streams a peer may open when nobody said otherwise
/// ([`StreamLimitLayer`](crate::StreamLimitLayer) says otherwise).
pub(crate) const DEFAULT_MAX_STREAMS: u32 = 100;

/// Initial per-stream receive window: what a peer may send on a new stream
/// before hearing from us (so the first data needs no round trip).
///
/// Generous (as quinn's 1.25 MB), because memory is bounded by the
/// connection window, not by this: a stream window only stops one stream
/// from taking all of the connection's. Small stream windows made streams
/// wait for credit at different times, which is unfair to the ones that
/// wait.
pub(crate) const DEFAULT_STREAM_WINDOW: u32 = 1024 * 1024;

/// Initial per-connection receive window, shared by all streams: the
/// received data a connection buffers before auto-tuning grows it.
pub(crate) const DEFAULT_CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;

/// How far auto-tuning may grow one stream's receive window.
pub(crate) const DEFAULT_MAX_STREAM_WINDOW: u32 = 16 * 1024 * 1024;

/// How far auto-tuning may grow the connection's receive window. This
/// bounds all data buffered for the application on one connection.
pub(crate) const DEFAULT_MAX_CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;

/// Bytes a stream's writer may queue ahead of the wire before it waits.
pub(crate) const DEFAULT_SEND_BUFFER: usize = 256 * 1024;

/// Bytes all of a connection's streams together may queue ahead of the
/// wire before their writers wait: a peer that stops reading holds at
/// most this much of our memory in queued replies, however many streams it
/// opens (rather than its stream limit × the send buffer).
///
/// Half the largest connection window, so that what streams queue covers
/// the credit a fast peer gives (data leaves only with credit), and 64
/// streams can each fill their own send buffer at once.
pub(crate) const DEFAULT_CONNECTION_SEND_BUFFER: usize = 16 * 1024 * 1024;

/// Ping interval: a ping goes out this long after the last pong.
pub(crate) const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(10);

/// With nothing from the peer (not even a pong) for this long, the
/// connection is declared dead and every stream fails.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a record may take to arrive whole once its first byte has, by
/// default ([`Builder::record_read_timeout`]).
pub(crate) const DEFAULT_RECORD_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// After a go-away, how long open streams have to finish.
pub(crate) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How a [`Connection`](super::Connection) behaves beyond what Setup agreed.
///
/// The stream limit and the receive windows (declared to the peer in
/// Setup, and how far they may grow) are set in one place, on the stack,
/// with [`StreamLimitLayer`](crate::StreamLimitLayer); this builder holds
/// the rest of what only this side needs to know.
///
/// # Memory
///
/// What a peer can make a connection hold, whatever it sends:
///
/// - **Received data** waiting for the application is bounded by the
///   connection window `W`, which auto-tuning grows up to its maximum
///   (default 32 MiB), and per stream up to the stream window's (default
///   16 MiB): both set with
///   [`StreamLimitLayer::max_receive_windows`](crate::StreamLimitLayer::max_receive_windows).
///   Small pieces are copied into the stream's buffer (which may hold up to
///   twice its contents in capacity, as a growing buffer does: `2 × W`).
///   Pieces of 16 KiB and more stay slices of the read buffer they arrived
///   in, and a slice keeps its whole read buffer alive (up to the read
///   buffer maximum, whatever else the buffer held: frames that cost no
///   credit, say). The read
///   buffers kept alive that way are counted, and once they reach `W`,
///   further pieces are copied instead: another `W` at most. So received
///   data retains at most `3 × W`.
/// - **Read buffers** of the channel: the current one and up to three
///   spares kept for reuse, each at most the read buffer maximum
///   ([`RecordSizeLayer::max_read_buffer`](crate::RecordSizeLayer::max_read_buffer),
///   default 128 KiB)
///   and the record it completes: 768 KiB by default. A reader of bulk
///   data keeps them when it catches up (the connection's driver reads up
///   to 512 KiB before the streams take it); once what it reads between
///   catch-ups is small (messages), it keeps one of 16 KiB. The send
///   buffer, likewise, shrinks to 16 KiB once everything is written,
///   after a few small bursts: a sender of bulk keeps the buffers a burst
///   fills (at most four of 128 KiB, or of a record if that is larger)
///   between bursts. After a second without a record either way, the
///   connection lets both go: an idle connection holds its state alone
///   (about 5 KiB per end).
/// - **Streams**: a table entry of under 1 KiB per stream until it
///   finishes, at most `max_streams` from the peer.
/// - **Sending**: each stream (ours or the peer's) queues at most
///   [`send_buffer`](Self::send_buffer) bytes, and all of them together at
///   most [`connection_send_buffer`](Self::connection_send_buffer) (16
///   MiB), however many streams a peer that never reads opens; the channel
///   holds at most 256 KiB of sealed records plus the record being filled,
///   in at most four send buffers (512 KiB).
///
/// Worst case per connection:
///
/// (`max_receive_window` is the connection's, from `StreamLimitLayer::max_receive_windows`)
///
/// `3 × max_receive_window + 4 × (max_read_buffer + 64 KiB) + (max_streams + our streams) × 1 KiB + connection_send_buffer + 512 KiB`
///
/// The pieces [`Stream::recv`](super::Stream::recv) hands out are the
/// application's: each keeps its read buffer alive until it is dropped (copy
/// it with `Bytes::copy_from_slice` to keep a small piece long). Reading
/// through `AsyncRead` copies.
///
/// ```
/// use std::time::Duration;
/// use weft::mux::Builder;
///
/// let builder = Builder::new()
///     .keepalive(Some(Duration::from_secs(5)))
///     .idle_timeout(Some(Duration::from_secs(15)))
///     .open_timeout(Some(Duration::from_secs(2)));
/// # let _ = builder;
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    pub(crate) send_buffer: usize,
    pub(crate) connection_send_buffer: usize,
    pub(crate) keepalive: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) drain_timeout: Duration,
    pub(crate) open_timeout: Option<Duration>,
    pub(crate) record_read_timeout: Option<Duration>,
    pub(crate) budgets: Budgets,
    pub(crate) observer: super::Observing,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// The defaults, each given with its setting (no open timeout).
    pub fn new() -> Self {
        Self {
            send_buffer: DEFAULT_SEND_BUFFER,
            connection_send_buffer: DEFAULT_CONNECTION_SEND_BUFFER,
            keepalive: Some(DEFAULT_KEEPALIVE),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            open_timeout: None,
            record_read_timeout: Some(DEFAULT_RECORD_READ_TIMEOUT),
            budgets: Budgets::default(),
            observer: super::Observing::default(),
        }
    }

    /// Bytes a stream's writer may queue before it waits (default 256 KiB,
    /// at least 1).
    pub fn send_buffer(mut self, bytes: usize) -> Self {
        self.send_buffer = bytes.max(1);
        self
    }

    /// Bytes all streams together may queue before their writers wait
    /// (at least 1; default 16 MiB). Each stream queues
    /// at most its share: this divided by the streams the connection holds
    /// (idle ones included), at least 4 KiB, and at most
    /// [`send_buffer`](Self::send_buffer). A writer that finds the whole
    /// buffer full waits until a quarter of it is free.
    pub fn connection_send_buffer(mut self, bytes: usize) -> Self {
        self.connection_send_buffer = bytes.max(1);
        self
    }

    /// Ping interval (default 10 s), or `None` for no pings after the first
    /// (which measures the round trip).
    pub fn keepalive(mut self, interval: Option<Duration>) -> Self {
        self.keepalive = interval;
        self
    }

    /// How long the peer may be silent before the connection is dead
    /// (default 30 s), or `None` to wait forever. Keep it above the keepalive interval.
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long a record may take to arrive whole once its first byte has
    /// (default 10 s), or `None` for as long as the idle
    /// timeout allows. Past it the connection ends with an error of
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
    /// (`IDLE_TIMEOUT`): a peer that sends all but the last byte of a
    /// 64 KiB record holds about that much of our read buffers, for this
    /// long at most, like h2's and hyper's header read timeouts. Keep it
    /// above a full record's time on the slowest link served (64 KiB at
    /// 64 kbit/s: 8 s).
    pub fn record_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.record_read_timeout = timeout;
        self
    }

    /// After a go-away, how long open streams have to finish (default
    /// 30 s).
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// How long `open()` waits for stream credit before it fails with an
    /// error of [`ErrorKind::Timeout`](crate::ErrorKind::Timeout); `None`
    /// (the default) waits as long as the connection lives.
    pub fn open_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.open_timeout = timeout;
        self
    }

    /// What the peer may send that costs us work without carrying stream
    /// data, before it gets a go-away ([`Budgets`], whose fields give their
    /// defaults).
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Tells `observer` of the handshakes this builder's
    /// [`MultiplexLayer`](crate::MultiplexLayer) runs and of the
    /// connections it builds (none by default): `weft::metrics::Metrics`
    /// reports them to the `metrics` facade, `weft::admin::Admin` shows
    /// them in the live view, and a pair `(A, B)` does both.
    pub fn observer(mut self, observer: impl super::Observer) -> Self {
        self.observer = super::Observing::new(observer);
        self
    }
}

/// How far auto-tuning may grow the receive windows
/// ([`StreamLimitLayer::max_receive_windows`](crate::StreamLimitLayer::max_receive_windows)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MaxWindows {
    pub(crate) stream: u32,
    pub(crate) connection: u32,
}

impl Default for MaxWindows {
    fn default() -> Self {
        Self {
            stream: DEFAULT_MAX_STREAM_WINDOW,
            connection: DEFAULT_MAX_CONNECTION_WINDOW,
        }
    }
}

impl MaxWindows {
    /// At most [`MAX_WINDOW`] each.
    pub(crate) fn new(stream: u32, connection: u32) -> Self {
        let cap = |bytes: u32| bytes.min(MAX_WINDOW as u32);
        Self {
            stream: cap(stream),
            connection: cap(connection),
        }
    }
}

impl Params {
    pub(crate) fn new(agreement: &Agreement, builder: &Builder, max: MaxWindows) -> Self {
        let window = |w: Option<u32>, default: u32| u64::from(w.unwrap_or(default)).min(MAX_WINDOW) as u32;
        let role = agreement.role();
        // A limit past the ids a side has means all of them.
        let streams = |n: Option<u32>, opener| n.unwrap_or(DEFAULT_MAX_STREAMS).min(id_space(opener));
        Self {
            role,
            local_max_streams: streams(agreement.local_max_streams, role.peer()),
            local_stream_window: window(agreement.local_stream_window, DEFAULT_STREAM_WINDOW),
            local_connection_window: window(agreement.local_connection_window, DEFAULT_CONNECTION_WINDOW),
            peer_max_streams: streams(agreement.peer_max_streams(), role),
            peer_stream_window: window(agreement.peer_stream_window(), DEFAULT_STREAM_WINDOW),
            peer_connection_window: window(agreement.peer_connection_window(), DEFAULT_CONNECTION_WINDOW),
            max_stream_window: u64::from(max.stream),
            max_connection_window: u64::from(max.connection),
            send_buffer: builder.send_buffer,
            connection_send_buffer: builder.connection_send_buffer,
            // One data frame per full record.
            quantum: agreement.send_record_size().saturating_sub(HEADER_LEN).max(1),
            keepalive: builder.keepalive,
            idle_timeout: builder.idle_timeout,
            drain_timeout: builder.drain_timeout,
            budgets: builder.budgets.clone(),
        }
    }
}
