//! The thin async shell around the sans-IO halves: each side polls the
//! transport it is given, so the same code serves a whole [`Channel`] and
//! the split halves a connection's driver uses.
//!
//! [`Channel`]: super::Channel

use std::{
    io::{self, IoSlice},
    pin::Pin,
    task::{ready, Context, Poll},
};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::io::poll_read_buf;

use super::{buffers::Origin, encode_close, open::Opener, parse_close, seal::Sealer};
use crate::{
    clock::now,
    error::{CloseCode, Error, Repr},
    frame::{Frame, FrameKind},
};

/// Sealed segments handed to one vectored write.
const MAX_WRITE_SLICES: usize = 16;

#[derive(Debug)]
enum ReadState {
    Open,
    Eof,
    Failed(Error),
}

/// The receiving side: an [`Opener`] and how reading ended.
#[derive(Debug)]
pub(super) struct OpenSide {
    pub(super) opener: Opener,
    state: ReadState,
}

impl OpenSide {
    pub(super) fn new(opener: Opener) -> Self {
        Self {
            opener,
            state: ReadState::Open,
        }
    }

    /// The next frame, unopened; `None` at a clean end of the transport.
    pub(super) fn poll_frame<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Frame>, Error>> {
        loop {
            if let Some(frame) = self.opener.next_frame()? {
                return Poll::Ready(Ok(Some(frame)));
            }
            let buf = self.opener.read_buf();
            let space = buf.capacity() - buf.len();
            let n = match poll_read_buf(Pin::new(&mut *io), cx, buf) {
                Poll::Ready(result) => result?,
                Poll::Pending => {
                    self.opener.caught_up();
                    return Poll::Pending;
                }
            };
            if n == 0 {
                self.opener.end()?;
                return Poll::Ready(Ok(None));
            }
            self.opener.filled(n, space);
        }
    }

    /// The next application data after the handshake, and the allocation
    /// it lives in; `None` once the peer has closed cleanly.
    pub(super) fn poll_data<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<(Bytes, Origin)>, Error>> {
        match &self.state {
            ReadState::Open => {}
            ReadState::Eof => return Poll::Ready(Ok(None)),
            ReadState::Failed(err) => return Poll::Ready(Err(err.clone())),
        }
        let err = loop {
            let record = ready!(self.poll_record(io, cx));
            break match record {
                // The opener has moved to the peer's next key.
                Ok((FrameKind::KeyUpdate, ..)) => continue,
                Ok((FrameKind::Data, payload, _)) if payload.is_empty() => Repr::EmptyRecord.into(),
                Ok((FrameKind::Data, payload, origin)) => {
                    self.opener.bytes += payload.len() as u64;
                    return Poll::Ready(Ok(Some((payload.freeze(), origin))));
                }
                Ok((FrameKind::Close, payload, _)) => match parse_close(&payload) {
                    Ok(None) => {
                        self.state = ReadState::Eof;
                        return Poll::Ready(Ok(None));
                    }
                    Ok(Some((code, reason))) => Error::closed_by_peer(code, reason),
                    Err(err) => err,
                },
                Ok((got, ..)) => Repr::UnexpectedFrame {
                    expected: "a data or close record",
                    got,
                }
                .into(),
                Err(err) => err,
            };
        };
        self.state = ReadState::Failed(err.clone());
        Poll::Ready(Err(err))
    }

    /// The next record, opened. The end of the transport is `Truncated`: a
    /// clean end always comes as a close record first.
    fn poll_record<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(FrameKind, BytesMut, Origin), Error>> {
        match ready!(self.poll_frame(io, cx))? {
            Some(frame) => {
                let origin = self.opener.origin();
                let (kind, payload) = self.opener.open(frame)?;
                Poll::Ready(Ok((kind, payload, origin)))
            }
            None => Poll::Ready(Err(Repr::Truncated.into())),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum WriteState {
    Open,
    Closing,
    Closed,
}

/// The sending side: a [`Sealer`], and how its close record will read.
#[derive(Debug)]
pub(super) struct SealSide {
    pub(super) sealer: Sealer,
    state: WriteState,
    /// The error that ended the channel, if any: its code goes into our
    /// close record instead of a clean close.
    failure: Option<Error>,
    /// A close the owner chose (the multiplexer's go-away code), sent
    /// instead of a clean one.
    close_with: Option<(CloseCode, String)>,
}

impl SealSide {
    pub(super) fn new(sealer: Sealer) -> Self {
        Self {
            sealer,
            state: WriteState::Open,
            failure: None,
            close_with: None,
        }
    }

    /// Remembers the first error that ended the channel, for our close.
    pub(super) fn fail(&mut self, err: &Error) {
        if self.failure.is_none() && err.warrants_close() {
            self.failure = Some(err.clone());
        }
    }

    /// The code and reason our close record will carry (unless a failure
    /// already decided it).
    pub(super) fn set_close(&mut self, code: CloseCode, reason: String) {
        if self.failure.is_none() {
            self.close_with = Some((code, reason));
        }
    }

    /// No more records: a failed handshake sent what it had to say.
    pub(super) fn shut(&mut self) {
        self.sealer.drop_open_record();
        self.state = WriteState::Closed;
    }

    /// Writes every sealed byte, several records per system call.
    pub(super) fn poll_write_out<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Error>> {
        loop {
            let segments = self.sealer.segments();
            if segments.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let n = if io.is_write_vectored() {
                let mut slices = [IoSlice::new(&[]); MAX_WRITE_SLICES];
                let count = segments.len().min(MAX_WRITE_SLICES);
                for (slice, bytes) in slices.iter_mut().zip(segments) {
                    *slice = IoSlice::new(bytes);
                }
                ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices[..count]))?
            } else {
                let front = segments.front().expect("not empty");
                ready!(Pin::new(&mut *io).poll_write(cx, front))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
            }
            self.sealer.advance(n);
        }
    }

    /// Copies `data` into records; waits first while sealed bytes are
    /// past the high-water mark.
    pub(super) fn poll_write_data<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
        data: &[u8],
        now: std::time::Instant,
    ) -> Poll<Result<usize, Error>> {
        if self.state != WriteState::Open {
            return Poll::Ready(Err(Repr::Finished.into()));
        }
        if self.sealer.is_full() {
            ready!(self.poll_write_out(io, cx))?;
        }
        match self.sealer.write(data, now) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(err) => {
                self.fail(&err);
                Poll::Ready(Err(err))
            }
        }
    }

    /// The next writes bring `len` bytes: see [`Sealer::reserve`].
    pub(super) fn reserve(&mut self, len: usize, now: std::time::Instant) {
        if self.state == WriteState::Open {
            self.sealer.reserve(len, now);
        }
    }

    /// Seals the open record and writes everything out.
    pub(super) fn poll_flush<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
        now: std::time::Instant,
    ) -> Poll<Result<(), Error>> {
        if let Err(err) = self.sealer.seal_open_record(now) {
            self.fail(&err);
            return Poll::Ready(Err(err));
        }
        ready!(self.poll_write_out(io, cx))?;
        self.sealer.release_if_idle();
        Pin::new(&mut *io).poll_flush(cx).map_err(Error::from)
    }

    /// Sends our close record (clean, or carrying the failure or the
    /// owner's code) and shuts down the transport's write side.
    pub(super) fn poll_close<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Error>> {
        if self.state == WriteState::Open {
            // Whatever is still open is sealed first, if the key allows;
            // if not, the failure goes into the close record.
            if let Err(err) = self.sealer.seal_open_record(now()) {
                self.fail(&err);
                self.sealer.drop_open_record();
            }
            let close = match (&self.close_with, &self.failure) {
                (Some((code, reason)), _) => encode_close(*code, reason),
                (None, None) => encode_close(CloseCode::NO_ERROR, ""),
                (None, Some(err)) => encode_close(err.close_code(), &err.reason_for_peer()),
            };
            self.sealer.queue_record(FrameKind::Close, &close, now())?;
            self.state = WriteState::Closing;
        }
        if self.state == WriteState::Closing {
            ready!(self.poll_write_out(io, cx))?;
            ready!(Pin::new(&mut *io).poll_shutdown(cx))?;
            self.state = WriteState::Closed;
        }
        Poll::Ready(Ok(()))
    }
}
