//! The facts of each error, in one list: its [`ErrorKind`], which [`Side`]
//! caused it, its [`CloseCode`], whether ending a connection over it
//! warrants a close record to the peer, and the [`io::ErrorKind`] it
//! converts to. [`Repr`]'s `kind`, `side`, `close_code`, `warrants_close`
//! and `io_kind` are generated from the list, as quinn generates its
//! transport errors' codes and texts with its `errors!` macro.

use std::io::{self, ErrorKind as IoKind};

use super::{CloseCode, Repr, Side};

/// What kind of error an [`Error`](super::Error) is: a coarse category, to
/// match on where the error's [`Display`](std::fmt::Display) text is too
/// fine (as [`io::ErrorKind`] is to [`io::Error`]).
///
/// More kinds may be added: a `match` needs a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Our transport failed (a read or write of the underlying connection);
    /// [`Error::io_error`](super::Error::io_error) gives its error. A
    /// transport's own timeout is this kind too, and
    /// [`is_timeout`](super::Error::is_timeout).
    Io,
    /// The inner connector could not produce a transport (a refused or
    /// unreachable TCP connection, a failed name lookup); its error is the
    /// [`source`](std::error::Error::source).
    Connect,
    /// The two sides could not agree: no common protocol version, cipher
    /// suite or application protocol, or the peer's Setup could not be
    /// decoded or was invalid.
    Negotiation,
    /// The peer's identity was not accepted: its ephemeral key was weak,
    /// its identity proof did not verify, it proved a key other than the
    /// one pinned, or the authorizer refused it.
    Authentication,
    /// The peer's records or frames were wrong: a record failed
    /// authentication (modified, replayed, reordered or dropped), an empty
    /// data record, a malformed close record, a malformed frame or one the
    /// protocol does not allow there, or a flood of key updates; or our
    /// sending key was exhausted and the connection must be re-established.
    Record,
    /// The transport ended without the peer's close record: the connection
    /// was truncated (by an attacker, a crash or a reset).
    Truncated,
    /// A deadline passed: the handshake's, `open()`'s for stream credit,
    /// the idle timeout, or the one for a record the peer began to arrive
    /// whole. [`is_timeout`](super::Error::is_timeout) tells which count as
    /// a timeout of ours.
    Timeout,
    /// The connection (or channel) was closed, by either side: gracefully
    /// ([`is_closed`](super::Error::is_closed)) or with an error code
    /// ([`close_code`](super::Error::close_code)), its reason in
    /// [`reason`](super::Error::reason).
    ///
    /// A close that arrived in the clear during the handshake is this kind
    /// too, though anyone on the path could have sent it, code and reason
    /// included: [`is_peer_close`](super::Error::is_peer_close) is false for
    /// it, and it is no reason to fall back to weaker settings (an older
    /// version, another suite).
    Closed,
    /// The peer broke the multiplexing protocol;
    /// [`violation`](super::Error::violation) says how.
    Protocol,
    /// The peer did not process this stream (it was refused before being
    /// accepted, or lay above the last stream id of the peer's go-away): it
    /// may be sent again on another connection.
    Refused,
    /// The stream was reset, by the [`side`](super::Error::side) that gave
    /// up on it, with its [`close_code`](super::Error::close_code).
    Reset,
    /// No new streams on this connection: a side sent a go-away (or we used
    /// up our stream ids). Open the stream on another connection.
    GoingAway,
    /// We already finished (half-closed) this stream or channel: no more
    /// writes.
    Finished,
    /// Admission control turned the handshake away before it finished;
    /// [`refusal`](super::Error::refusal) says why.
    NotAdmitted,
    /// The connection's driver task stopped (its tokio runtime shut down,
    /// or the task was aborted): the connection is gone.
    Stopped,
    /// What the stack was asked cannot work (a pinned peer key with no
    /// encryption layer to verify it, a Setup too large for any peer to
    /// accept).
    Stack,
}

/// One of the table's cells: a name (of a `Side`, a `CloseCode` constant or
/// an `io::ErrorKind`), or an expression in braces over the fields the row
/// binds.
macro_rules! cell {
    ($type:ident, { $($expr:tt)* }) => { $($expr)* };
    ($type:ident, $name:ident) => { $type::$name };
}

/// Generates [`Repr`]'s `kind`, `side`, `close_code`, `warrants_close` and
/// `io_kind` from the table below, one row per variant. A variant missing
/// from the table does not compile (the matches are exhaustive), nor does
/// one listed twice (an unreachable pattern).
macro_rules! facts {
    ($(
        $variant:ident $({ $($field:tt)* })?
            => $kind:ident, $side:tt, $code:tt, $close_record:literal, $io:tt;
    )*) => {
        #[deny(unreachable_patterns)]
        #[allow(unused_variables)] // a row binds the fields any of its cells reads
        impl Repr {
            /// The error's category.
            pub(super) fn kind(&self) -> ErrorKind {
                match self {
                    $(Repr::$variant { .. } => ErrorKind::$kind,)*
                }
            }

            /// Which side caused the error (for a close: who closed).
            pub(super) fn side(&self) -> Side {
                match self {
                    $(Repr::$variant { $($($field)*,)? .. } => cell!(Side, $side),)*
                }
            }

            /// The close code that goes with the error: the one we send the
            /// peer when it ends a connection, or the one that came with a
            /// close or reset we received.
            pub(super) fn close_code(&self) -> CloseCode {
                match self {
                    $(Repr::$variant { $($($field)*,)? .. } => cell!(CloseCode, $code),)*
                }
            }

            /// Whether ending the connection over this error deserves a
            /// close record to the peer: not when the peer closed, the
            /// transport is gone, or the error concerns one stream or one
            /// call only.
            pub(super) fn warrants_close(&self) -> bool {
                match self {
                    $(Repr::$variant { .. } => $close_record,)*
                }
            }

            /// The [`io::ErrorKind`] the error converts to.
            pub(super) fn io_kind(&self) -> IoKind {
                match self {
                    $(Repr::$variant { $($($field)*,)? .. } => cell!(IoKind, $io),)*
                }
            }

            /// The variant's name, for tests that go through every variant.
            #[cfg(test)]
            pub(super) fn variant_name(&self) -> &'static str {
                match self {
                    $(Repr::$variant { .. } => stringify!($variant),)*
                }
            }

            /// Every variant's name, in the table's order.
            #[cfg(test)]
            pub(super) const VARIANTS: &'static [&'static str] = &[$(stringify!($variant)),*];
        }
    };
}

// A connection ending over an error with a close record (`true`) sends
// its close code and text to the peer (`Repr::reason_for_peer`). Fields in
// braces are the ones the row's cells in braces read.
facts! {
    // variant { fields read }      kind             side       close code              record  io::ErrorKind
    Io { 0: err }                => Io,             Local,     INTERNAL_ERROR,         false,  { err.kind() };
    // A connector's own I/O error keeps its kind (a refused TCP connection
    // is `ConnectionRefused`, an unreachable host is not).
    Connect { 0: inner }         => Connect,        Local,     INTERNAL_ERROR,         false,
                                    { inner.downcast_ref::<io::Error>().map_or(IoKind::Other, io::Error::kind) };
    Frame                        => Record,         Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    SetupDecode                  => Negotiation,    Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    InvalidSetup                 => Negotiation,    Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    VersionMismatch              => Negotiation,    Local,     VERSION_MISMATCH,       true,   Unsupported;
    NoCommonSuite                => Negotiation,    Local,     NO_COMMON_SUITE,        true,   Unsupported;
    NoCommonProtocol             => Negotiation,    Local,     NO_COMMON_PROTOCOL,     true,   Unsupported;
    UnexpectedProtocol           => Negotiation,    Local,     NO_COMMON_PROTOCOL,     true,   Unsupported;
    HandshakeTimeout             => Timeout,        Local,     HANDSHAKE_TIMEOUT,      true,   TimedOut;
    UnexpectedFrame              => Record,         Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    WeakKey                      => Authentication, Remote,    AUTHENTICATION_FAILED,  true,   InvalidData;
    BadIdentityProof             => Authentication, Remote,    AUTHENTICATION_FAILED,  true,   InvalidData;
    PeerKeyMismatch              => Authentication, Local,     UNAUTHORIZED,           true,   PermissionDenied;
    Unauthorized                 => Authentication, Local,     UNAUTHORIZED,           true,   PermissionDenied;
    BadRecord                    => Record,         Remote,    AUTHENTICATION_FAILED,  true,   InvalidData;
    EmptyRecord                  => Record,         Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    BadClose                     => Record,         Remote,    PROTOCOL_ERROR,         true,   InvalidData;
    Truncated                    => Truncated,      Remote,    PROTOCOL_ERROR,         false,  UnexpectedEof;
    // Gone gracefully: not connected any more, nothing failed; else aborted.
    Closed { side, code }        => Closed,         { *side }, { *code },              false,
                                    { if *code == CloseCode::NO_ERROR { IoKind::NotConnected } else { IoKind::ConnectionAborted } };
    UnauthenticatedClose { code } => Closed,        Remote,    { *code },              false,  ConnectionAborted;
    KeyExhausted                 => Record,         Local,     KEY_EXHAUSTED,          true,   Other;
    RecordTimeout                => Timeout,        Remote,    IDLE_TIMEOUT,           true,   TimedOut;
    KeyUpdateFlood               => Record,         Remote,    EXCESSIVE_LOAD,         true,   InvalidData;
    Stack                        => Stack,          Local,     INTERNAL_ERROR,         true,   InvalidInput;
    Protocol { 0: violation }    => Protocol,       Remote,    { violation.code() },   true,   InvalidData;
    // A stream reset, refusals included: the stream, not the connection,
    // and not a refused connection.
    StreamReset { code, side }   => Reset,          { *side }, { *code },              false,  ConnectionReset;
    Finished                     => Finished,       Local,     INTERNAL_ERROR,         false,  BrokenPipe;
    Refused                      => Refused,        Remote,    REFUSED_STREAM,         false,  ConnectionReset;
    // Going: not connected for new streams, nothing failed.
    GoingAway { side }           => GoingAway,      { *side }, NO_ERROR,               false,  NotConnected;
    OpenTimeout                  => Timeout,        Local,     INTERNAL_ERROR,         false,  TimedOut;
    IdleTimeout                  => Timeout,        Local,     IDLE_TIMEOUT,           true,   TimedOut;
    NotAdmitted                  => NotAdmitted,    Local,     EXCESSIVE_LOAD,         false,  ConnectionRefused;
    DriverStopped                => Stopped,        Local,     INTERNAL_ERROR,         false,  Other;
}
