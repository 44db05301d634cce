//! How a peer broke the multiplexing protocol, and the close code of each.

use super::CloseCode;

/// How a peer broke the multiplexing protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// A mux frame kind this version does not know.
    #[error("unknown frame kind {0:#04x}")]
    UnknownFrame(u8),
    /// A frame whose layout is wrong (what is wrong in the text).
    #[error("malformed {kind} frame: {what}")]
    Malformed {
        /// The frame kind.
        kind: &'static str,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A control frame longer than the receiver accepts.
    #[error("{kind} frame of {len} bytes exceeds the maximum of {max}")]
    FrameTooLarge {
        /// The frame kind.
        kind: &'static str,
        /// The declared length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A frame for a stream that was never opened.
    #[error("frame for stream {0}, which was never opened")]
    UnknownStream(u32),
    /// A data-carrying frame for a stream that is finished.
    #[error("data for stream {0} after it finished")]
    ClosedStream(u32),
    /// The peer opened a stream with one of our ids (wrong parity), or 0.
    #[error("peer opened stream {0}, an id of the wrong parity")]
    WrongParity(u32),
    /// The peer opened an id it had already used.
    #[error("peer reopened stream {0}")]
    StreamReused(u32),
    /// The peer skipped stream ids (they must be consecutive).
    #[error("peer opened stream {got}, expected {expected}")]
    StreamGap {
        /// The next id we expected.
        expected: u32,
        /// What arrived.
        got: u32,
    },
    /// The peer opened more concurrent streams than we allowed.
    #[error("peer opened stream {id} beyond its limit of {allowed} streams so far")]
    StreamLimit {
        /// The stream it opened.
        id: u32,
        /// How many streams we had allowed in total.
        allowed: u32,
    },
    /// The peer sent more than its credit.
    #[error("stream {stream} received data up to offset {offset}, beyond the credit of {limit}")]
    FlowControl {
        /// The stream, or 0 for the connection.
        stream: u32,
        /// How far the data reached.
        offset: u64,
        /// The credit we had granted.
        limit: u64,
    },
    /// A credit frame granted zero bytes.
    #[error("zero credit for stream {0}")]
    ZeroCredit(u32),
    /// Credit that takes a window past the maximum.
    #[error("credit for stream {0} takes its window past the maximum")]
    CreditOverflow(u32),
    /// Stream credit that went backwards or past the id space.
    #[error("stream credit {got} is below the {had} already granted, or past the id space")]
    BadStreamCredit {
        /// The credit we had.
        had: u32,
        /// What arrived.
        got: u32,
    },
    /// A pong that answers no ping of ours.
    #[error("unsolicited pong")]
    UnsolicitedPong,
    /// More pings awaiting their pongs than the receiver's budget: a flood.
    #[error("more than {0} pings awaiting their pongs")]
    PingFlood(usize),
    /// More of its streams reset by the peer before they were accepted than
    /// may wait at once (HTTP/2's Rapid Reset, CVE-2023-44487).
    #[error("more than {0} streams reset by the peer before they were accepted")]
    PendingResetFlood(usize),
    /// More resets of its own streams from the peer than its budget per
    /// second (Rapid Reset).
    #[error("more than {0} stream resets from the peer in a second")]
    ResetFlood(u64),
    /// More control frames (pings, credit, stream credit, go-aways) than the
    /// peer's traffic earned: a flood of frames that carry no stream data
    /// (the 2019 HTTP/2 floods, CVE-2019-9512/9515/9518).
    #[error(
        "{frames} control frames from the peer against {data_bytes} bytes of stream data and {streams} streams: past its budget"
    )]
    ControlFlood {
        /// Control frames the peer sent, this one included.
        frames: u64,
        /// Stream data moved on the connection, both ways.
        data_bytes: u64,
        /// Streams opened on the connection, by either side.
        streams: u64,
    },
}

impl Violation {
    /// The wire code this violation closes the connection with.
    pub fn code(&self) -> CloseCode {
        match self {
            Violation::FlowControl { .. } | Violation::ZeroCredit(_) | Violation::CreditOverflow(_) => {
                CloseCode::FLOW_CONTROL_ERROR
            }
            Violation::StreamLimit { .. } | Violation::BadStreamCredit { .. } => {
                CloseCode::STREAM_LIMIT_ERROR
            }
            Violation::UnknownStream(_)
            | Violation::ClosedStream(_)
            | Violation::WrongParity(_)
            | Violation::StreamReused(_)
            | Violation::StreamGap { .. } => CloseCode::STREAM_STATE_ERROR,
            Violation::UnknownFrame(_) | Violation::Malformed { .. } | Violation::FrameTooLarge { .. } => {
                CloseCode::FRAME_ENCODING_ERROR
            }
            Violation::UnsolicitedPong => CloseCode::PROTOCOL_ERROR,
            Violation::PingFlood(_)
            | Violation::PendingResetFlood(_)
            | Violation::ResetFlood(_)
            | Violation::ControlFlood { .. } => CloseCode::EXCESSIVE_LOAD,
        }
    }
}
