//! Errors: what happened, and which side caused it.

use std::{fmt, io, sync::Arc, time::Duration};

use crate::{
    crypto::{CipherSuite, PeerId},
    frame::FrameKind,
    setup::Versions,
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
    Frame(#[from] FrameError),

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
        /// [`MAX_CLOSE_REASON`]: crate::channel::MAX_CLOSE_REASON
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
            | Error::NoCommonProtocol { .. } => Side::Local,
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
            _ => CloseCode::INTERNAL_ERROR,
        }
    }

    /// Whether ending the connection over this error deserves a close record
    /// to the peer: not when the peer closed, or the transport is gone.
    pub(crate) fn warrants_close(&self) -> bool {
        !matches!(
            self,
            Error::Io(_) | Error::Connect(_) | Error::Truncated | Error::PeerClosed { .. } | Error::Closed
        )
    }

    /// True when the error says the peer refused us with `code`.
    pub fn is_peer_close(&self, code: CloseCode) -> bool {
        matches!(self, Error::PeerClosed { code: c, .. } if *c == code)
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
            Error::HandshakeTimeout(_) => io::ErrorKind::TimedOut,
            Error::Truncated => io::ErrorKind::UnexpectedEof,
            Error::PeerClosed { .. } => io::ErrorKind::ConnectionReset,
            Error::Closed => io::ErrorKind::BrokenPipe,
            Error::Connect(_) => io::ErrorKind::ConnectionRefused,
            Error::PeerKeyMismatch { .. } | Error::Unauthorized(_) => io::ErrorKind::PermissionDenied,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

/// Errors in the frame layer: the bytes are not a well-formed frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The header declares a payload longer than the receiver accepts.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The declared payload length.
        len: usize,
        /// The largest payload the receiver accepts now.
        max: usize,
    },
    /// The header names a frame kind this version does not know.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// The transport ended in the middle of a frame.
    #[error("transport ended inside a frame ({0} bytes of it arrived)")]
    Incomplete(usize),
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
