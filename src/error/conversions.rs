//! Errors to and from `io::Error` (a weft error survives the trip, and
//! keeps a kind that says what happened), and from the frame codec's.

use std::{io, sync::Arc};

use super::{Error, Repr};
use crate::frame::FrameError;

impl From<FrameError> for Error {
    fn from(err: FrameError) -> Self {
        match err {
            FrameError::Io(io) => Repr::Io(io),
            other => Repr::Frame(other),
        }
        .into()
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Self {
        // A weft error that travelled through an io::Error comes back as itself.
        if err.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            let inner = err.into_inner().expect("checked above");
            return *inner.downcast::<Error>().expect("checked above");
        }
        Repr::Io(Arc::new(err)).into()
    }
}

/// The error rides inside, as the `io::Error`'s source, with the
/// [`io::ErrorKind`] the table in `kinds.rs` gives it.
impl From<Error> for io::Error {
    fn from(err: Error) -> Self {
        io::Error::new(err.repr().io_kind(), err)
    }
}
