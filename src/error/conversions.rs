//! Errors to and from `io::Error` (a weft error survives the trip, and
//! keeps a kind that says what happened), and from the frame codec's.

use std::{io, sync::Arc};

use super::{CloseCode, Error};
use crate::frame::FrameError;

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
        use io::ErrorKind as Kind;
        let kind = match &err {
            Error::Io(io) => io.kind(),
            // A connector's own I/O error keeps its kind (a refused TCP
            // connection is `ConnectionRefused`, an unreachable host is not).
            Error::Connect(inner) => inner
                .downcast_ref::<io::Error>()
                .map_or(Kind::Other, io::Error::kind),
            Error::HandshakeTimeout(_)
            | Error::OpenTimeout(_)
            | Error::IdleTimeout(_)
            | Error::RecordTimeout(_) => Kind::TimedOut,
            Error::VersionMismatch { .. } | Error::NoCommonSuite { .. } | Error::NoCommonProtocol { .. } => {
                Kind::Unsupported
            }
            Error::PeerKeyMismatch { .. } | Error::Unauthorized(_) => Kind::PermissionDenied,
            Error::Frame(_)
            | Error::SetupDecode(_)
            | Error::InvalidSetup(_)
            | Error::UnexpectedFrame { .. }
            | Error::WeakKey
            | Error::BadIdentityProof { .. }
            | Error::BadRecord { .. }
            | Error::EmptyRecord
            | Error::BadClose
            | Error::KeyUpdateFlood(_)
            | Error::Protocol(_) => Kind::InvalidData,
            Error::Truncated => Kind::UnexpectedEof,
            // Gracefully gone, or going: not connected any more, nothing
            // failed.
            Error::Closed { code, .. } if *code == CloseCode::NO_ERROR => Kind::NotConnected,
            Error::GoingAway { .. } => Kind::NotConnected,
            Error::Closed { .. } | Error::UnauthenticatedClose { .. } => Kind::ConnectionAborted,
            // A stream reset, refusals included: the stream, not the
            // connection, and not a refused connection.
            Error::StreamReset { .. } | Error::Refused => Kind::ConnectionReset,
            Error::Finished => Kind::BrokenPipe,
            Error::Stack(_) => Kind::InvalidInput,
            Error::NotAdmitted(_) => Kind::ConnectionRefused,
            Error::KeyExhausted(_) | Error::DriverStopped => Kind::Other,
        };
        io::Error::new(kind, err)
    }
}
