//! How a call ended: gRPC's status codes, so users know them.

use std::{fmt, time::Duration};

use bytes::Bytes;

use super::Metadata;
use crate::{
    error::{Error, Repr},
    pool::PoolError,
};

/// A call's status code: gRPC's set, with gRPC's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled, typically by the caller.
    Cancelled = 1,
    /// An error that fits no other code.
    Unknown = 2,
    /// The client sent an invalid argument.
    InvalidArgument = 3,
    /// The deadline passed before the call ended.
    DeadlineExceeded = 4,
    /// Something requested was not found.
    NotFound = 5,
    /// Something the client tried to create exists already.
    AlreadyExists = 6,
    /// The caller may not do this.
    PermissionDenied = 7,
    /// A resource ran out: a message over the size limit, a quota.
    ResourceExhausted = 8,
    /// The system is not in the state the operation needs.
    FailedPrecondition = 9,
    /// The operation was aborted (a concurrency conflict).
    Aborted = 10,
    /// Past the valid range.
    OutOfRange = 11,
    /// The method is not implemented (or not known) here.
    Unimplemented = 12,
    /// An invariant broke on the server (a handler panicked).
    Internal = 13,
    /// The service is unavailable now; retrying may help.
    Unavailable = 14,
    /// Unrecoverable data loss.
    DataLoss = 15,
    /// The caller has no valid credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The code for a number off the wire (unknown numbers are `Unknown`).
    pub fn from_u32(n: u32) -> Code {
        use Code::*;
        const ALL: [Code; 17] = [
            Ok,
            Cancelled,
            Unknown,
            InvalidArgument,
            DeadlineExceeded,
            NotFound,
            AlreadyExists,
            PermissionDenied,
            ResourceExhausted,
            FailedPrecondition,
            Aborted,
            OutOfRange,
            Unimplemented,
            Internal,
            Unavailable,
            DataLoss,
            Unauthenticated,
        ];
        ALL.get(n as usize).copied().unwrap_or(Unknown)
    }

    /// Its number on the wire.
    pub fn as_u32(self) -> u32 {
        self as u32
    }
}

impl Code {
    /// gRPC's name for the code: `OK`, `NOT_FOUND`, ...
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a call ended when it did not succeed: a code, a message, optional
/// binary details and trailing metadata. Also what handlers return to
/// fail a call.
#[derive(Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: String,
    details: Bytes,
    trailers: Metadata,
    processing: Processing,
}

/// Whether the server may have run a call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Processing {
    /// It may have: the outcome is unknown (or the server said how it
    /// ended).
    Unknown,
    /// It provably never reached the server's handler: no stream was
    /// found, or the peer refused the stream unprocessed.
    Never,
    /// This server did not run it, and says so to the caller (where it
    /// reads as `Never`).
    NotRunHere,
    /// It never left: the endpoint could not be reached (its dial failed,
    /// or the pool is waiting to dial it again). A `Never`.
    Unreached,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Bytes::new(),
            trailers: Metadata::new(),
            processing: Processing::Unknown,
        }
    }

    /// Whether the call provably never reached the server's handler (it
    /// found no stream, or the peer refused its stream unprocessed): then
    /// sending it again is safe whatever the method does, as gRPC's
    /// transparent retry assumes. An `UNAVAILABLE` without it (a
    /// connection lost mid-call, say) may have run: retry only what is
    /// idempotent.
    pub fn is_never_processed(&self) -> bool {
        matches!(
            self.processing,
            Processing::Never | Processing::NotRunHere | Processing::Unreached
        )
    }

    /// Whether the call failed because its endpoint could not be reached
    /// at all (a balancer takes the endpoint out at once).
    #[cfg(feature = "dns")]
    pub(crate) fn is_unreached(&self) -> bool {
        self.processing == Processing::Unreached
    }

    /// A status a server answers for a call it did not run (no handler,
    /// no middleware saw it): the caller reads it as never processed.
    pub(crate) fn not_run_here(mut self) -> Self {
        self.processing = Processing::NotRunHere;
        self
    }

    fn never_processed(mut self) -> Self {
        self.processing = Processing::Never;
        self
    }

    /// The code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message, for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Binary details, for programs.
    pub fn details(&self) -> &Bytes {
        &self.details
    }

    /// With binary details.
    pub fn with_details(mut self, details: Bytes) -> Self {
        self.details = details;
        self
    }

    /// Trailing metadata.
    pub fn trailers(&self) -> &Metadata {
        &self.trailers
    }

    /// Trailing metadata, to add to.
    pub fn trailers_mut(&mut self) -> &mut Metadata {
        &mut self.trailers
    }

    /// `CANCELLED`.
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(Code::Cancelled, message)
    }
    /// `INVALID_ARGUMENT`.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }
    /// `DEADLINE_EXCEEDED`.
    pub fn deadline_exceeded(timeout: Duration) -> Self {
        Self::new(
            Code::DeadlineExceeded,
            format!("no answer within {}", crate::error::Rounded(timeout)),
        )
    }
    /// `NOT_FOUND`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }
    /// `PERMISSION_DENIED`.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }
    /// `RESOURCE_EXHAUSTED`.
    pub fn resource_exhausted(message: impl Into<String>) -> Self {
        Self::new(Code::ResourceExhausted, message)
    }
    /// `UNIMPLEMENTED`.
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(Code::Unimplemented, message)
    }
    /// `INTERNAL`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }
    /// `UNAVAILABLE`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Code::Unavailable, message)
    }

    /// The status for an error that is not one (a middleware's
    /// `BoxError`): a [`Status`] inside is kept, tower's timeout is
    /// `DEADLINE_EXCEEDED`, its load shedding `UNAVAILABLE`, anything else
    /// `UNKNOWN`.
    pub fn from_error(err: Box<dyn std::error::Error + Send + Sync>) -> Self {
        if let Some(status) = err.downcast_ref::<Status>() {
            return status.clone();
        }
        let code = if err.is::<tower::timeout::error::Elapsed>() {
            Code::DeadlineExceeded
        } else if err.is::<tower::load_shed::error::Overloaded>() {
            Code::Unavailable
        } else {
            Code::Unknown
        };
        Self::new(code, err.to_string())
    }

    /// The status of a call whose stream failed with `err`: a stream the
    /// peer never processed is `UNAVAILABLE` and
    /// [`is_never_processed`](Self::is_never_processed) (safe to retry), a
    /// reset is `CANCELLED`, a timeout `DEADLINE_EXCEEDED`, anything else
    /// (a connection lost mid-call: the call may have run) `UNAVAILABLE`,
    /// with the error's text.
    pub fn from_stream_error(err: &Error) -> Self {
        let code = if err.is_timeout() {
            Code::DeadlineExceeded
        } else if matches!(err.repr(), Repr::StreamReset { .. }) {
            Code::Cancelled
        } else {
            Code::Unavailable
        };
        let status = Self::new(code, err.to_string());
        if err.is_retryable() {
            status.never_processed()
        } else {
            status
        }
    }

    pub(crate) fn to_proto(&self) -> crate::proto::Status {
        crate::proto::Status {
            code: self.code.as_u32(),
            message: self.message.clone(),
            details: self.details.to_vec(),
            trailers: self.trailers.clone().into_entries(),
            not_run: self.processing == Processing::NotRunHere,
        }
    }

    pub(crate) fn from_proto(status: crate::proto::Status) -> Self {
        Self {
            code: Code::from_u32(status.code),
            message: status.message,
            details: Bytes::from(status.details),
            trailers: Metadata::from_entries(status.trailers),
            processing: if status.not_run {
                Processing::Never
            } else {
                Processing::Unknown
            },
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Status");
        s.field("code", &self.code).field("message", &self.message);
        if !self.details.is_empty() {
            s.field("details", &self.details);
        }
        if !self.trailers.is_empty() {
            s.field("trailers", &self.trailers);
        }
        s.finish()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.code)
        } else {
            write!(f, "{}: {}", self.code, self.message)
        }
    }
}

impl std::error::Error for Status {}

impl From<PoolError> for Status {
    /// A call that found no stream: `UNAVAILABLE` (the pool's error,
    /// endpoint and cause, is the message), never processed unless the
    /// dial that failed carried the call as early data, which the peer may
    /// have acted on.
    fn from(err: PoolError) -> Self {
        let text = crate::error::text_with_causes(&err);
        let mut status = Self::new(Code::Unavailable, text);
        if err.never_processed() {
            status.processing = match err {
                PoolError::Dial { .. } | PoolError::Backoff { .. } => Processing::Unreached,
                _ => Processing::Never,
            };
        }
        status
    }
}

impl From<std::io::Error> for Status {
    fn from(err: std::io::Error) -> Self {
        match err.get_ref().and_then(|e| e.downcast_ref::<Error>()) {
            Some(inner) => Self::from_stream_error(inner),
            None => Self::new(Code::Unavailable, err.to_string()),
        }
    }
}

impl From<Error> for Status {
    fn from(err: Error) -> Self {
        Self::from_stream_error(&err)
    }
}

/// What a caught panic said, for the `INTERNAL` status it becomes.
pub(super) fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(no message)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CloseCode, Side};

    #[test]
    fn only_a_call_that_provably_never_ran_is_never_processed() {
        // Refused unprocessed, or no stream found: safe to send again.
        let refused = Status::from_stream_error(&Repr::Refused.into());
        assert_eq!(refused.code(), Code::Unavailable);
        assert!(refused.is_never_processed());
        let no_stream = Status::from(PoolError::Dial {
            endpoint: "127.0.0.1:1".parse().unwrap(),
            source: Repr::Truncated.into(),
        });
        assert_eq!(no_stream.code(), Code::Unavailable);
        assert!(no_stream.is_never_processed());
        // The connection lost mid-call: also UNAVAILABLE, but it may have
        // run.
        let lost = Status::from_stream_error(
            &Repr::Closed {
                side: Side::Remote,
                code: CloseCode::INTERNAL_ERROR,
                reason: String::new(),
            }
            .into(),
        );
        assert_eq!(lost.code(), Code::Unavailable);
        assert!(!lost.is_never_processed());
        assert!(!Status::from_stream_error(&Repr::Truncated.into()).is_never_processed());
        // A status the server sent says how the call ended, not whether it
        // ran.
        assert!(!Status::from_proto(Status::unavailable("shed").to_proto()).is_never_processed());
        // A server's own "not run" reaches the caller; a status a handler
        // returns about a call of its own that never ran does not pass
        // for this call's.
        let not_run = Status::unavailable("not run").not_run_here();
        assert!(Status::from_proto(not_run.to_proto()).is_never_processed());
        let upstream = Status::unavailable("an upstream call found no stream").never_processed();
        assert!(!Status::from_proto(upstream.to_proto()).is_never_processed());
    }
}
