//! Errors: what happened, and which side caused it.

use std::{fmt, io, sync::Arc, time::Duration};

use crate::{
    frame::{FrameError, FrameKind},
    handshake::{CipherSuite, PeerId, Versions},
};

/// A boxed error from an inner service (a connector, say).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Which side of a connection an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This endpoint decided (a local policy, a local I/O failure).
    Local,
    /// The peer sent something wrong, or told us it gave up.
    Remote,
}

/// Everything that can go wrong while establishing or using a channel.
///
/// Errors are cheap to clone, so a failed channel can hand the same error to
/// every later call. They convert into [`io::Error`] with a meaningful
/// [`io::ErrorKind`], the weft error riding inside as its source.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The underlying transport failed.
    #[error("transport I/O failed: {0}")]
    Io(#[source] Arc<io::Error>),

    /// The inner connector could not produce a transport.
    #[error("could not connect: {0}")]
    Connect(#[source] Arc<dyn std::error::Error + Send + Sync>),

    /// The peer sent bytes that are not a valid frame.
    #[error("peer sent a malformed frame: {0}")]
    Frame(#[source] FrameError),

    /// The peer's Setup message could not be decoded.
    #[error("peer sent an undecodable Setup message: {0}")]
    SetupDecode(#[source] prost::DecodeError),

    /// A Setup field the peer sent is invalid (a key of the wrong length...).
    #[error("peer sent an invalid Setup: {0}")]
    InvalidSetup(&'static str),

    /// The version ranges of the two sides do not overlap.
    #[error("no common protocol version: we speak {local}, the peer speaks {peer}")]
    VersionMismatch {
        /// Our range.
        local: Versions,
        /// The peer's range.
        peer: Versions,
    },

    /// No cipher suite is acceptable to both sides.
    #[error("no common cipher suite: we offered {local:?}, the peer offered {peer:?}")]
    NoCommonSuite {
        /// What we offered, in preference order.
        local: Vec<CipherSuite>,
        /// What the peer offered, as wire ids (unknown ids included).
        peer: Vec<u32>,
    },

    /// Both sides named application protocols, but none in common.
    #[error("no common application protocol: we offered {local:?}, the peer offered {peer:?}")]
    NoCommonProtocol {
        /// What we offered.
        local: Vec<String>,
        /// What the peer offered.
        peer: Vec<String>,
    },

    /// The handshake did not finish within its deadline.
    #[error("handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),

    /// A frame arrived that is not allowed at this point of the protocol.
    #[error("peer sent a {got:?} frame where a {expected} was expected")]
    UnexpectedFrame {
        /// What the protocol allows here.
        expected: &'static str,
        /// What arrived.
        got: FrameKind,
    },

    /// The peer's ephemeral key gives an all-zero X25519 shared secret.
    #[error("peer's ephemeral key is a low-order point (all-zero shared secret)")]
    WeakKey,

    /// The peer's identity proof does not verify against the transcript.
    #[error("peer's identity proof for {peer} does not verify")]
    BadIdentityProof {
        /// The identity the peer claimed.
        peer: PeerId,
    },

    /// We pinned a peer key ([`Handshake::expect_peer`]), and the peer proved
    /// a different one.
    ///
    /// [`Handshake::expect_peer`]: crate::Handshake::expect_peer
    #[error("peer key mismatch: expected {expected}, the peer proved {seen}")]
    PeerKeyMismatch {
        /// The pinned key.
        expected: PeerId,
        /// The key the peer proved it holds.
        seen: PeerId,
    },

    /// Our authorizer refused the peer.
    #[error("peer {0} is not authorized")]
    Unauthorized(PeerId),

    /// A record failed authentication: it was modified, replayed, reordered,
    /// or a record before it was dropped.
    #[error("record {sequence} failed authentication (modified, replayed, reordered or dropped)")]
    BadRecord {
        /// The sequence number the record was opened under.
        sequence: u64,
    },

    /// The peer sent an empty data record, which weft never sends.
    #[error("peer sent an empty data record")]
    EmptyRecord,

    /// A close record's payload is malformed.
    #[error("peer sent a malformed close record")]
    BadClose,

    /// The transport ended without the peer's close record: the connection
    /// was truncated (by an attacker, a crash or a reset).
    #[error("connection truncated: the transport ended without a close record")]
    Truncated,

    /// The peer closed the connection with an error code.
    #[error("peer closed the connection: {code} ({reason})")]
    PeerClosed {
        /// The peer's code.
        code: CloseCode,
        /// The peer's reason text (at most [`MAX_CLOSE_REASON`] bytes).
        ///
        /// [`MAX_CLOSE_REASON`]: crate::record::MAX_CLOSE_REASON
        reason: String,
    },

    /// The sending key has sealed as much as it may (records before the
    /// nonce counter could wrap, or AES-GCM's data volume): the connection
    /// must be re-established.
    #[error("sending key exhausted after {0} records; reconnect")]
    KeyExhausted(u64),

    /// The layers are assembled in a way that cannot work (an encryption
    /// layer with no negotiation beneath it, or two encryption layers).
    #[error("misassembled stack: {0}")]
    Stack(&'static str),

    /// The channel was closed (by us) and cannot carry more data.
    #[error("channel is closed")]
    Closed,

    /// The peer broke the multiplexing protocol.
    #[error("peer violated the multiplexing protocol: {0}")]
    Protocol(#[from] Violation),

    /// A stream was reset, by `side`, with `code`.
    #[error("stream reset by the {side:?} side: {code}")]
    StreamReset {
        /// The code the resetting side gave.
        code: CloseCode,
        /// Who reset it.
        side: Side,
    },

    /// We already finished (half-closed) this stream: no more writes.
    #[error("stream already finished by us: no more writes")]
    Finished,

    /// The stream was opened after the peer's go-away and never processed;
    /// it is safe to retry on another connection.
    #[error("stream refused: the peer is going away")]
    Refused,

    /// No new streams: this connection is going away (`side` said so).
    #[error("connection is going away ({side:?} side: {code})")]
    GoingAway {
        /// The code of the go-away.
        code: CloseCode,
        /// Who sent it.
        side: Side,
    },

    /// `open()` waited longer than its timeout for the peer's stream credit.
    #[error("no stream credit from the peer within {0:?}")]
    OpenTimeout(Duration),

    /// Nothing arrived from the peer for the idle timeout, pings included.
    #[error("peer silent for {0:?}: connection presumed dead")]
    IdleTimeout(Duration),
}

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
        }
    }
}

impl Error {
    /// Which side caused the error.
    pub fn side(&self) -> Side {
        match self {
            Error::Io(_)
            | Error::Connect(_)
            | Error::HandshakeTimeout(_)
            | Error::PeerKeyMismatch { .. }
            | Error::Unauthorized(_)
            | Error::KeyExhausted(_)
            | Error::Stack(_)
            | Error::Closed
            | Error::VersionMismatch { .. }
            | Error::NoCommonSuite { .. }
            | Error::NoCommonProtocol { .. }
            | Error::OpenTimeout(_)
            | Error::IdleTimeout(_)
            | Error::Finished => Side::Local,
            Error::StreamReset { side, .. } | Error::GoingAway { side, .. } => *side,
            _ => Side::Remote,
        }
    }

    /// The code we send the peer when this error ends a connection.
    pub fn close_code(&self) -> CloseCode {
        match self {
            Error::VersionMismatch { .. } => CloseCode::VERSION_MISMATCH,
            Error::NoCommonSuite { .. } => CloseCode::NO_COMMON_SUITE,
            Error::NoCommonProtocol { .. } => CloseCode::NO_COMMON_PROTOCOL,
            Error::HandshakeTimeout(_) => CloseCode::HANDSHAKE_TIMEOUT,
            Error::PeerKeyMismatch { .. } | Error::Unauthorized(_) => CloseCode::UNAUTHORIZED,
            Error::BadIdentityProof { .. } | Error::BadRecord { .. } | Error::WeakKey => {
                CloseCode::AUTHENTICATION_FAILED
            }
            Error::Frame(_)
            | Error::SetupDecode(_)
            | Error::InvalidSetup(_)
            | Error::UnexpectedFrame { .. }
            | Error::EmptyRecord
            | Error::BadClose => CloseCode::PROTOCOL_ERROR,
            Error::KeyExhausted(_) => CloseCode::KEY_EXHAUSTED,
            Error::Protocol(violation) => violation.code(),
            Error::IdleTimeout(_) => CloseCode::IDLE_TIMEOUT,
            Error::StreamReset { code, .. } | Error::GoingAway { code, .. } => *code,
            Error::Refused => CloseCode::REFUSED_STREAM,
            _ => CloseCode::INTERNAL_ERROR,
        }
    }

    /// Whether ending the connection over this error deserves a close record
    /// to the peer: not when the peer closed, or the transport is gone.
    pub(crate) fn warrants_close(&self) -> bool {
        !matches!(
            self,
            Error::Io(_)
                | Error::Connect(_)
                | Error::Truncated
                | Error::PeerClosed { .. }
                | Error::Closed
                | Error::StreamReset { .. }
                | Error::Refused
                | Error::GoingAway { .. }
                | Error::OpenTimeout(_)
                | Error::Finished
        )
    }

    /// True when the error says the peer refused us with `code`.
    pub fn is_peer_close(&self, code: CloseCode) -> bool {
        matches!(self, Error::PeerClosed { code: c, .. } if *c == code)
    }
}

impl From<FrameError> for Error {
    fn from(err: FrameError) -> Self {
        match err {
            FrameError::Io(io) => Error::Io(io),
            other => Error::Frame(other),
        }
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Self {
        // A weft error that travelled through an io::Error comes back as itself.
        if err.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            let inner = err.into_inner().expect("checked above");
            return *inner.downcast::<Error>().expect("checked above");
        }
        Error::Io(Arc::new(err))
    }
}

impl From<Error> for io::Error {
    fn from(err: Error) -> Self {
        let kind = match &err {
            Error::Io(io) => io.kind(),
            Error::HandshakeTimeout(_) | Error::OpenTimeout(_) | Error::IdleTimeout(_) => {
                io::ErrorKind::TimedOut
            }
            Error::StreamReset { .. } => io::ErrorKind::ConnectionReset,
            Error::Refused => io::ErrorKind::ConnectionRefused,
            Error::GoingAway { .. } => io::ErrorKind::NotConnected,
            Error::Truncated => io::ErrorKind::UnexpectedEof,
            Error::PeerClosed { .. } => io::ErrorKind::ConnectionReset,
            Error::Closed | Error::Finished => io::ErrorKind::BrokenPipe,
            Error::Connect(_) => io::ErrorKind::ConnectionRefused,
            Error::PeerKeyMismatch { .. } | Error::Unauthorized(_) => io::ErrorKind::PermissionDenied,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

/// A close code on the wire: why a side ended the connection.
///
/// Codes are a `u32`; the named constants are the ones weft sends, and any
/// other value from a peer is kept as-is.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u32);

macro_rules! close_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $text:literal;)*) => {
        impl CloseCode {
            $($(#[$doc])* pub const $name: CloseCode = CloseCode($value);)*

            /// A short description of the code, or `None` for a code weft
            /// does not define.
            pub fn description(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($text),)*
                    _ => None,
                }
            }

            fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

close_codes! {
    /// A clean close: the sender is done and nothing went wrong.
    NO_ERROR = 0x0, "the sender closed the connection normally";
    /// The peer violated the protocol.
    PROTOCOL_ERROR = 0x1, "the peer sent something the protocol does not allow";
    /// The version ranges did not overlap.
    VERSION_MISMATCH = 0x2, "no protocol version is in both sides' ranges";
    /// No cipher suite in common.
    NO_COMMON_SUITE = 0x3, "no cipher suite is acceptable to both sides";
    /// No application protocol in common.
    NO_COMMON_PROTOCOL = 0x4, "no application protocol is acceptable to both sides";
    /// The handshake took too long.
    HANDSHAKE_TIMEOUT = 0x5, "the handshake did not finish in time";
    /// The peer's identity was refused.
    UNAUTHORIZED = 0x6, "the sender does not accept the peer's identity";
    /// A handshake proof or a record failed authentication.
    AUTHENTICATION_FAILED = 0x7, "a record or identity proof failed authentication";
    /// The sending key is used up.
    KEY_EXHAUSTED = 0x8, "the sender's key has sealed its maximum number of records";
    /// The sender failed for a reason of its own.
    INTERNAL_ERROR = 0x9, "the sender failed internally";
    /// The peer sent more data than its flow-control credit allowed, or
    /// malformed credit.
    FLOW_CONTROL_ERROR = 0xa, "the peer sent more than its flow-control credit allowed";
    /// The peer opened more streams than it was allowed.
    STREAM_LIMIT_ERROR = 0xb, "the peer opened more streams than its limit allowed";
    /// The peer sent a frame its stream's state does not allow.
    STREAM_STATE_ERROR = 0xc, "the peer sent a frame for a stream in the wrong state";
    /// The peer sent a malformed multiplexing frame.
    FRAME_ENCODING_ERROR = 0xd, "the peer sent a malformed multiplexing frame";
    /// Nothing arrived for the idle timeout.
    IDLE_TIMEOUT = 0xe, "the peer was silent for longer than the idle timeout";
    /// A stream's application gave up on it (dropped it unfinished).
    CANCEL = 0xf, "the application no longer wants the stream";
    /// A stream opened after go-away, never processed: safe to retry.
    REFUSED_STREAM = 0x10, "the stream was not processed; it may be retried";
}

impl fmt::Debug for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "CloseCode({:#x})", self.0),
        }
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.description() {
            Some(text) => write!(f, "{text} ({:?})", self),
            None => write!(f, "unknown code {:#x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weft_errors_survive_a_trip_through_io_error() {
        let err = Error::PeerClosed {
            code: CloseCode::UNAUTHORIZED,
            reason: "no".into(),
        };
        let io: io::Error = err.into();
        assert_eq!(io.kind(), io::ErrorKind::ConnectionReset);
        let back = Error::from(io);
        assert!(back.is_peer_close(CloseCode::UNAUTHORIZED));
    }

    #[test]
    fn close_codes_describe_themselves() {
        assert_eq!(format!("{:?}", CloseCode::UNAUTHORIZED), "UNAUTHORIZED");
        assert_eq!(format!("{:?}", CloseCode(0x77)), "CloseCode(0x77)");
        assert!(CloseCode::PROTOCOL_ERROR.description().is_some());
        assert!(CloseCode(0x77).description().is_none());
    }
}
