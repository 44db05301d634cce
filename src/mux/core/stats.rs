//! The connection's counters, and the snapshot of them the driver reads.

/// A snapshot of counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CoreStats {
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    pub(crate) streams_opened: u64,
    pub(crate) streams_accepted: u64,
    pub(crate) frames_sent: u64,
    pub(crate) frames_received: u64,
}

/// The counters the core keeps (frames received are the decoder's):
/// counted through these methods, read as a [`CoreStats`] snapshot.
#[derive(Debug, Default)]
pub(super) struct Counters {
    bytes_sent: u64,
    bytes_received: u64,
    streams_opened: u64,
    streams_accepted: u64,
    frames_sent: u64,
}

impl Counters {
    /// `n` frames were written out.
    #[inline]
    pub(super) fn frames_sent(&mut self, n: u64) {
        self.frames_sent += n;
    }

    /// One frame was written out.
    #[inline]
    pub(super) fn frame_sent(&mut self) {
        self.frames_sent += 1;
    }

    /// `n` bytes of stream data were sent.
    #[inline]
    pub(super) fn data_sent(&mut self, n: usize) {
        self.bytes_sent += n as u64;
    }

    /// `n` bytes of stream data arrived.
    #[inline]
    pub(super) fn data_received(&mut self, n: usize) {
        self.bytes_received += n as u64;
    }

    pub(super) fn stream_opened(&mut self) {
        self.streams_opened += 1;
    }

    pub(super) fn stream_accepted(&mut self) {
        self.streams_accepted += 1;
    }

    /// Bytes of stream data received so far.
    #[inline]
    pub(super) fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// Bytes of stream data moved so far, both ways.
    pub(super) fn data_bytes(&self) -> u64 {
        self.bytes_sent.saturating_add(self.bytes_received)
    }

    /// The counters, with `frames_received` (the decoder's count).
    pub(super) fn snapshot(&self, frames_received: u64) -> CoreStats {
        CoreStats {
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            streams_opened: self.streams_opened,
            streams_accepted: self.streams_accepted,
            frames_sent: self.frames_sent,
            frames_received,
        }
    }
}
