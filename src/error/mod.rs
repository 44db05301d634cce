//! Errors: what happened, and which side caused it.

use std::{fmt, io, sync::Arc};

mod close_code;
mod conversions;
mod kinds;
mod parse;
mod refusal;
mod repr;
mod rounded;
mod violation;

pub use close_code::CloseCode;
pub use kinds::ErrorKind;
pub use parse::ParseError;
pub use refusal::Refusal;
pub use violation::Violation;

pub(crate) use repr::Repr;
pub(crate) use rounded::Rounded;

/// `err`'s text followed by each cause's that it does not already hold,
/// for errors shown where their sources will not be (hyper-util's
/// `client error (Connect)`, a status sent to the caller).
pub(crate) fn text_with_causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        // (An error whose text already holds its cause's says it once.)
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A boxed error from an inner service (a connector, say): tower's.
pub(crate) use tower::BoxError;

/// Which side of a connection an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// This endpoint: a local decision (a policy, a timeout, a close we
    /// asked for), or our own transport failing.
    Local,
    /// The peer: it sent something wrong, told us it gave up, or its end of
    /// the transport stopped.
    Remote,
}

/// Everything that can go wrong while establishing or using a channel, a
/// connection or a stream, and how they end.
///
/// An error is opaque: its [`kind`](Error::kind) is the category to match
/// on, and its text says exactly what happened. Errors are cheap to clone,
/// so a failed connection hands the same error to every later call. Each
/// says which [`side`](Error::side) caused it and the
/// [`close_code`](Error::close_code) that goes (or came) with it, and
/// answers what a pool or a retry policy asks:
///
/// - [`is_closed`](Error::is_closed): the connection ended gracefully (a
///   drained go-away, or a clean close by either side). Not a failure:
///   redial without backing off.
/// - [`is_retryable`](Error::is_retryable): the peer provably did not process
///   the stream (it was refused, or never opened), so it may be sent again
///   on another connection.
/// - [`is_timeout`](Error::is_timeout): a deadline passed.
/// - [`is_peer_close`](Error::is_peer_close): the peer closed the
///   connection with a given code.
///
/// The details one can act on have accessors: how the peer broke the
/// multiplexing protocol ([`violation`](Error::violation)), why admission
/// control turned a handshake away ([`refusal`](Error::refusal)), the
/// reason a close gave ([`reason`](Error::reason)), and the transport's
/// own error ([`io_error`](Error::io_error)).
///
/// Errors convert into [`io::Error`] with an [`io::ErrorKind`] that keeps
/// these distinctions, the weft error riding inside as its source, and
/// back: a weft error that travelled through an `io::Error` comes back as
/// itself.
///
/// ```
/// use std::io;
/// use weft::{Error, ErrorKind};
///
/// /// What a client does about a failed call.
/// fn next_step(err: &Error) -> &'static str {
///     if err.is_closed() {
///         "redial at once: the connection ended gracefully"
///     } else if err.is_retryable() {
///         "send it again on another connection"
///     } else {
///         match err.kind() {
///             ErrorKind::Io | ErrorKind::Connect | ErrorKind::Timeout => "back off, then redial",
///             ErrorKind::Negotiation | ErrorKind::Authentication => "give up: fix the configuration",
///             _ => "report it",
///         }
///     }
/// }
///
/// // The transport timed out.
/// let err = Error::from(io::Error::from(io::ErrorKind::TimedOut));
/// assert_eq!(err.kind(), ErrorKind::Io);
/// assert!(err.is_timeout() && !err.is_retryable());
/// assert_eq!(next_step(&err), "back off, then redial");
///
/// // Into an io::Error and back, it stays itself.
/// let io = io::Error::from(err);
/// assert_eq!(io.kind(), io::ErrorKind::TimedOut);
/// assert_eq!(Error::from(io).kind(), ErrorKind::Io);
/// ```
#[derive(Clone)]
pub struct Error {
    repr: Arc<Repr>,
    /// The handshake this ended carried early data that the peer may have
    /// acted on.
    early_in_doubt: bool,
}

impl Error {
    /// The error's category.
    pub fn kind(&self) -> ErrorKind {
        self.repr.kind()
    }

    /// Which side caused the error (for a close: who closed; for a reset:
    /// who reset).
    pub fn side(&self) -> Side {
        self.repr.side()
    }

    /// The close code that goes with the error: the one we send the peer
    /// when it ends a connection, or the one that came with a close or reset
    /// we received.
    pub fn close_code(&self) -> CloseCode {
        self.repr.close_code()
    }

    /// The connection ended gracefully: a go-away that drained, or a clean
    /// close by either side (an [`ErrorKind::Closed`] error with
    /// [`CloseCode::NO_ERROR`]). Nothing failed; a new connection may be
    /// dialed at once.
    pub fn is_closed(&self) -> bool {
        matches!(*self.repr, Repr::Closed { code, .. } if code == CloseCode::NO_ERROR)
    }

    /// The peer provably did not process this stream, so it may be sent
    /// again on another connection: it was refused before being accepted
    /// or lay above the last id of the peer's go-away
    /// ([`ErrorKind::Refused`], as HTTP/2's GOAWAY and REFUSED_STREAM
    /// promise), or it was never opened because the connection is going
    /// away ([`ErrorKind::GoingAway`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind(), ErrorKind::Refused | ErrorKind::GoingAway)
    }

    /// A deadline passed: the handshake's, `open()`'s, the idle timeout, or
    /// the transport's own (an [`ErrorKind::Io`] error of
    /// [`io::ErrorKind::TimedOut`]). A record the peer began and did not
    /// finish in time is of [`ErrorKind::Timeout`] too, but it is the
    /// peer's stalling, not a deadline of ours: not `is_timeout`.
    pub fn is_timeout(&self) -> bool {
        match &*self.repr {
            Repr::Io(err) => err.kind() == io::ErrorKind::TimedOut,
            Repr::RecordTimeout(_) => false,
            other => other.kind() == ErrorKind::Timeout,
        }
    }

    /// True when the peer closed (or refused) us with `code`, in a close
    /// record. Not for a close that arrived in the clear during the
    /// handshake, which anyone on the path could have sent (see
    /// [`ErrorKind::Closed`]).
    pub fn is_peer_close(&self, code: CloseCode) -> bool {
        matches!(*self.repr, Repr::Closed { side: Side::Remote, code: c, .. } if c == code)
    }

    /// How the peer broke the multiplexing protocol, for an
    /// [`ErrorKind::Protocol`] error.
    pub fn violation(&self) -> Option<&Violation> {
        match &*self.repr {
            Repr::Protocol(violation) => Some(violation),
            _ => None,
        }
    }

    /// Why admission control turned the handshake away, for an
    /// [`ErrorKind::NotAdmitted`] error.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &*self.repr {
            Repr::NotAdmitted(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// The reason text a close carried (at most 256 bytes; empty when it
    /// gave none, as a graceful close does), for an [`ErrorKind::Closed`]
    /// error: a close record, or a close in the clear during the handshake.
    /// The peer chose it: the error's [`Display`](fmt::Display) escapes it,
    /// this does not.
    pub fn reason(&self) -> Option<&str> {
        match &*self.repr {
            Repr::Closed { reason, .. } | Repr::UnauthenticatedClose { reason, .. } => Some(reason.as_str()),
            _ => None,
        }
    }

    /// The transport's error, for an [`ErrorKind::Io`] error. (A
    /// connector's error is the [`source`](std::error::Error::source) of an
    /// [`ErrorKind::Connect`] one.)
    pub fn io_error(&self) -> Option<&io::Error> {
        match &*self.repr {
            Repr::Io(err) => Some(&**err),
            _ => None,
        }
    }

    /// The handshake failed after its first flight carried early data
    /// (0-RTT, protocol version 3): the acceptor may have acted on the
    /// request that went early (even one that says it refused it: a copy
    /// may have reached it first, and a refused one can be replayed within
    /// its window), so a caller must not treat it as never processed (an
    /// RPC call's status is not
    /// [`is_never_processed`](crate::rpc::Status::is_never_processed)).
    /// Only requests safe to repeat go early, so sending it again is safe,
    /// but not free.
    pub fn early_data_in_doubt(&self) -> bool {
        self.early_in_doubt
    }

    /// The same error, for a handshake whose early data may have been
    /// acted on.
    pub(crate) fn with_early_data_in_doubt(mut self) -> Self {
        self.early_in_doubt = true;
        self
    }

    /// The same error, for a caller whose request did not go with the
    /// handshake's early data.
    pub(crate) fn settled(mut self) -> Self {
        self.early_in_doubt = false;
        self
    }

    /// What went wrong, in detail, for crate code to match on.
    pub(crate) fn repr(&self) -> &Repr {
        &self.repr
    }

    /// A close the peer sent with `code` (a clean close when it is
    /// [`CloseCode::NO_ERROR`]).
    pub(crate) fn closed_by_peer(code: CloseCode, reason: String) -> Error {
        Repr::Closed {
            side: Side::Remote,
            code,
            reason,
        }
        .into()
    }

    /// A graceful end that `side` started.
    pub(crate) fn graceful(side: Side) -> Error {
        Repr::Closed {
            side,
            code: CloseCode::NO_ERROR,
            reason: String::new(),
        }
        .into()
    }

    /// Whether ending the connection over this error deserves a close record
    /// to the peer: not when the peer closed, the transport is gone, or the
    /// error concerns one stream or one call only.
    pub(crate) fn warrants_close(&self) -> bool {
        self.repr.warrants_close()
    }

    /// The reason our close record gives the peer for this error: its text,
    /// but for a pinned key or an authorizer that refused the peer, which
    /// the peer is told in general terms (an active attacker must not learn
    /// whom we expected).
    pub(crate) fn reason_for_peer(&self) -> String {
        self.repr.reason_for_peer()
    }
}

impl From<Repr> for Error {
    fn from(repr: Repr) -> Self {
        Error {
            repr: Arc::new(repr),
            early_in_doubt: false,
        }
    }
}

/// As the detail it wraps: `BadRecord { sequence: 0 }`, say.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.repr, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.repr, f)?;
        if self.early_in_doubt {
            f.write_str(" (early data went with the handshake: the peer may have acted on it)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.repr)
    }
}

#[cfg(test)]
mod tests;
