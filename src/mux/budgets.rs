//! What a peer may make a connection do without doing useful work itself:
//! the budgets that turn the floods of HTTP/2's history (pings, resets,
//! credit and other control frames) into a go-away with `EXCESSIVE_LOAD`.

/// Pings that may await their pongs at once. Every ping is answered, but
/// only as fast as we can send: a peer that pings faster than that, or
/// pings and never reads, floods us (CVE-2019-9512).
pub(crate) const DEFAULT_PENDING_PONGS: usize = 16;

/// Streams reset by the peer before we accepted them that may wait in the
/// accept queue at once (h2's `max_pending_accept_reset_streams`, Rapid
/// Reset, CVE-2023-44487). Such streams never reach the application.
pub(crate) const DEFAULT_PENDING_ACCEPT_RESETS: usize = 20;

/// Resets of its own unfinished streams a peer may send per second, per
/// stream its limit lets it open (Rapid Reset against accepted streams).
pub(crate) const DEFAULT_RESETS_PER_SECOND_PER_STREAM: u64 = 10;

/// The smallest reset budget per second, whatever the stream limit.
pub(crate) const DEFAULT_MIN_RESETS_PER_SECOND: u64 = 1000;

/// Control frames (pings, credit entries, stream credit, go-aways) a peer
/// may send in a burst, beyond what its traffic earns.
pub(crate) const DEFAULT_CONTROL_FRAME_BURST: u64 = 10_000;

/// Control frames a peer earns per second, whatever it sends.
pub(crate) const DEFAULT_CONTROL_FRAMES_PER_SECOND: u64 = 1000;

/// Bytes of stream data, either way, that earn the peer one control frame:
/// credit is returned once per half window, so honest traffic earns far
/// more than it spends.
pub(crate) const DEFAULT_DATA_BYTES_PER_CONTROL_FRAME: u64 = 1024;

/// Control frames a peer earns per stream opened by either side (its credit
/// and the stream credit that gives its slot back).
pub(crate) const DEFAULT_CONTROL_FRAMES_PER_STREAM: u64 = 4;

/// Budgets of what a peer may send that costs us work but carries no
/// stream data, each answered with a go-away (`EXCESSIVE_LOAD`) and a
/// [`Violation`](crate::error::Violation) naming it when exceeded.
///
/// Control frames are budgeted per data byte (rustls's `TemperCounters`
/// idea, nginx's flood check): a token bucket holding
/// [`control_frame_burst`](Self::control_frame_burst) tokens, refilled by
/// time, by stream data moved in either direction and by streams opened,
/// from which every ping, credit entry, stream credit and go-away takes
/// one. Honest peers send credit per half window and a ping per round trip
/// at most, and stay far inside it; a credit, ping or stream-credit flood
/// runs out within the burst. Data frames are not charged: every byte of
/// them spends flow-control credit that only the application's reads give
/// back, and empty data frames without FIN are malformed.
///
/// ```
/// use weft::mux::{Budgets, Builder};
///
/// let mut budgets = Budgets::default();
/// budgets.pending_pongs = 64;
/// budgets.control_frames_per_second = 5_000;
/// let builder = Builder::new().budgets(budgets);
/// # let _ = builder;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budgets {
    /// Pings that may await their pongs at once (default 16): a peer that
    /// pings faster than we can answer, or never reads, floods us
    /// (CVE-2019-9512).
    pub pending_pongs: usize,
    /// Streams reset before we accepted them that may wait in the accept
    /// queue at once (default 20; h2's `max_pending_accept_reset_streams`,
    /// Rapid Reset, CVE-2023-44487).
    pub pending_accept_resets: usize,
    /// Resets of its own unfinished streams a peer may send per second,
    /// per stream its limit lets it open (default 10).
    pub resets_per_second_per_stream: u64,
    /// The smallest reset budget per second, whatever the stream limit
    /// (default 1,000).
    pub min_resets_per_second: u64,
    /// Control frames (pings, credit entries, stream credit, go-aways) a
    /// peer may send in a burst beyond what its traffic earns (default
    /// 10,000).
    pub control_frame_burst: u64,
    /// Control frames a peer earns per second, whatever it sends (default
    /// 1,000).
    pub control_frames_per_second: u64,
    /// Bytes of stream data, either way, that earn the peer one control
    /// frame (default 1,024; at least 1): credit goes back once per half
    /// window, so honest traffic earns far more than it spends.
    pub data_bytes_per_control_frame: u64,
    /// Control frames a peer earns per stream opened by either side
    /// (default 4: its credit and the stream credit that gives its slot
    /// back).
    pub control_frames_per_stream: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            pending_pongs: DEFAULT_PENDING_PONGS,
            pending_accept_resets: DEFAULT_PENDING_ACCEPT_RESETS,
            resets_per_second_per_stream: DEFAULT_RESETS_PER_SECOND_PER_STREAM,
            min_resets_per_second: DEFAULT_MIN_RESETS_PER_SECOND,
            control_frame_burst: DEFAULT_CONTROL_FRAME_BURST,
            control_frames_per_second: DEFAULT_CONTROL_FRAMES_PER_SECOND,
            data_bytes_per_control_frame: DEFAULT_DATA_BYTES_PER_CONTROL_FRAME,
            control_frames_per_stream: DEFAULT_CONTROL_FRAMES_PER_STREAM,
        }
    }
}
