//! The close codes on the wire, named, with what each means.

use std::fmt;

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
    /// The peer sent more control frames than the receiver's budget allows
    /// (a ping flood).
    EXCESSIVE_LOAD = 0x11, "the peer sent more control frames than the receiver's budget allows";
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
