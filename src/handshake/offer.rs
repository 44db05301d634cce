//! The stream limit layer's part of the Setup: how many streams the peer
//! may open, and the windows we grant it.

/// The stream-limit layer's part of the offer: how many streams the peer may
/// open at once (the initial stream credit), and optionally the initial
/// flow-control windows we grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamOffer {
    max_streams: u32,
    stream_window: Option<u32>,
    connection_window: Option<u32>,
}

impl StreamOffer {
    /// At most `max_streams` concurrent streams from the peer (at least 1).
    pub(crate) fn new(max_streams: u32) -> Self {
        Self {
            max_streams: max_streams.max(1),
            stream_window: None,
            connection_window: None,
        }
    }

    /// Declares the initial receive windows too (each at least 1 byte).
    pub(crate) fn with_windows(mut self, stream: u32, connection: u32) -> Self {
        self.stream_window = Some(stream.max(1));
        self.connection_window = Some(connection.max(1));
        self
    }

    /// The stream limit.
    pub(crate) fn max_streams(&self) -> u32 {
        self.max_streams
    }

    /// The initial per-stream window, if declared.
    pub(crate) fn stream_window(&self) -> Option<u32> {
        self.stream_window
    }

    /// The initial per-connection window, if declared.
    pub(crate) fn connection_window(&self) -> Option<u32> {
        self.connection_window
    }
}
