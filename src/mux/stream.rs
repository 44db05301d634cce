//! [`Stream`] and its halves: the application's side of one stream.

use std::{
    future::poll_fn,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{
    core::ReadOutcome,
    shared::{Handle, Shared},
};
use crate::{
    error::{CloseCode, Error},
    handshake::PeerId,
};

/// One bidirectional stream of a [`Connection`](super::Connection).
///
/// [`AsyncRead`] + [`AsyncWrite`], plus a zero-copy chunk API
/// ([`send`](Self::send), [`recv`](Self::recv)). `shutdown` (or
/// [`finish`](Self::finish)) half-closes our direction; the peer reads the
/// end. Dropping a stream that was not finished resets it with
/// [`CloseCode::CANCEL`], so the peer never mistakes it for complete.
///
/// [`into_split`](Self::into_split) gives halves for two tasks. Dropping the
/// [`SendStream`] unfinished while the [`RecvStream`] still reads finishes
/// our direction, as dropping tokio's `OwnedWriteHalf` shuts down its
/// write side, and the receiving half goes on; call
/// [`SendStream::reset`] to abort instead.
#[derive(Debug)]
pub struct Stream {
    recv: RecvStream,
    send: SendStream,
}

/// The receiving half of a [`Stream`].
#[derive(Debug)]
pub struct RecvStream {
    id: u32,
    conn: Arc<Handle>,
    finished: bool,
    span: tracing::Span,
}

/// The sending half of a [`Stream`].
#[derive(Debug)]
pub struct SendStream {
    id: u32,
    conn: Arc<Handle>,
    span: tracing::Span,
    /// A [`send`](Self::send) left its data for the driver to flush.
    unflushed: bool,
}

impl Stream {
    pub(crate) fn new(id: u32, conn: Arc<Handle>) -> Self {
        let span = tracing::debug_span!(parent: &conn.inner.span, "stream", id);
        // (Events name their span as parent rather than entering it: no
        // enter and exit per event, which with tracing's `log` feature on
        // cost a log record each.)
        tracing::trace!(parent: &span, "stream handle created");
        Stream {
            recv: RecvStream {
                id,
                conn: conn.clone(),
                finished: false,
                span: span.clone(),
            },
            send: SendStream {
                id,
                conn,
                span,
                unflushed: false,
            },
        }
    }

    /// The stream id: odd when the dialer opened it, even for the acceptor.
    pub fn id(&self) -> u32 {
        self.send.id
    }

    /// The peer's verified identity (`None` without encryption, the
    /// Plaintext suite included: see [`Connection::peer`](crate::mux::Connection::peer)).
    pub fn peer(&self) -> Option<&PeerId> {
        self.send.conn.inner.peer.as_ref()
    }

    /// Whether this stream's first bytes came (or went) as early data, in
    /// the dialer's first flight (protocol version 3, docs/PROTOCOL.md
    /// section 17): an acceptor that sees `true` must not act on the
    /// stream in a way that is unsafe to repeat, since whoever saw the
    /// early data could have replayed it. Until the dialer's identity proof
    /// arrives, the connection's [`peer`](Self::peer) is the identity its
    /// early data was signed with.
    pub fn is_early(&self) -> bool {
        self.send.conn.inner.early_stream == Some((self.id(), true))
    }

    /// The cipher suite the connection agreed
    /// ([`CipherSuite::Plaintext`](crate::handshake::CipherSuite::Plaintext) when its
    /// records are not protected).
    pub fn suite(&self) -> crate::handshake::CipherSuite {
        self.send.conn.inner.agreement.suite()
    }

    /// Queues `data` without copying it; waits while the send buffer is
    /// full.
    pub async fn send(&mut self, data: Bytes) -> Result<(), Error> {
        self.send.send(data).await
    }

    /// The next chunk of data, without copying it; `None` at the end.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, Error> {
        self.recv.recv().await
    }

    /// Polls for [`recv`](Self::recv).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        self.recv.poll_recv(cx)
    }

    /// Half-closes: the peer reads the end after the queued data.
    pub fn finish(&mut self) -> Result<(), Error> {
        self.send.finish()
    }

    /// Aborts both directions with `code`: queued data is dropped and the
    /// peer's reads and writes fail with an error of
    /// [`ErrorKind::Reset`](crate::ErrorKind::Reset).
    pub fn reset(&mut self, code: CloseCode) {
        self.send.reset(code);
    }

    /// Splits into halves that can move to different tasks.
    pub fn into_split(self) -> (RecvStream, SendStream) {
        (self.recv, self.send)
    }
}

impl RecvStream {
    /// The stream id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The next chunk of data, without copying it; `None` at the end.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, Error> {
        poll_fn(|cx| self.poll_recv_max(cx, usize::MAX)).await
    }

    /// Polls for the next chunk, at most `max` bytes of it. When this
    /// task is the only one waiting on the connection, it reads the
    /// channel itself rather than waiting for the driver to
    /// ([`super::reading`]).
    fn poll_recv_max(&mut self, cx: &mut Context<'_>, max: usize) -> Poll<Result<Option<Bytes>, Error>> {
        if self.finished {
            return Poll::Ready(Ok(None));
        }
        let Self {
            id,
            conn,
            finished,
            span,
        } = self;
        let mut next = |shared: &mut Shared| next_chunk(*id, finished, span, shared, cx, max);
        match conn.inner.with(&mut next) {
            Next::Ready(polled) => Poll::Ready(polled),
            Next::Pending => Poll::Pending,
            Next::ReadLent => conn.inner.read_lent(cx, *id, |shared| match next(shared) {
                Next::Ready(polled) => Poll::Ready(polled),
                Next::Pending | Next::ReadLent => Poll::Pending,
            }),
        }
    }

    /// Polls for the next chunk of data; `None` at the end.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        self.poll_recv_max(cx, usize::MAX)
    }
}

impl SendStream {
    /// The stream id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Queues `data` without copying it, a send buffer's worth at a time:
    /// waits while the buffer is full, so no more than
    /// [`send_buffer`](super::Builder::send_buffer) bytes wait at once. It
    /// leaves once this task yields (what the task sends or finishes before
    /// that joins the same record: a request and its end are one record),
    /// or at once with [`finish`](Self::finish) or a flush.
    pub async fn send(&mut self, mut data: Bytes) -> Result<(), Error> {
        let id = self.id;
        self.unflushed = true;
        poll_fn(|cx| {
            self.conn.inner.with_output_unflushed(|shared| loop {
                if data.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                match shared.core.write(id, &mut data) {
                    Ok(0) => {
                        shared.wait_write(id, cx.waker());
                        return Poll::Pending;
                    }
                    Ok(_) => {}
                    Err(err) => return Poll::Ready(Err(err)),
                }
            })
        })
        .await
    }

    /// Half-closes: the peer reads the end after the queued data.
    pub fn finish(&mut self) -> Result<(), Error> {
        let id = self.id;
        self.conn.inner.with_output(|shared| shared.core.finish(id))
    }

    /// Waits until the stream can no longer be written: the peer reset it
    /// (it gave up on the stream: a cancelled call), or the connection
    /// ended. Returns why. A server uses it to drop work nobody waits for.
    pub async fn stopped(&mut self) -> Error {
        poll_fn(|cx| self.poll_stopped(cx)).await
    }

    /// Polls for [`stopped`](Self::stopped). Shares its waker slot with
    /// writes: poll both from one task.
    pub fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Error> {
        let id = self.id;
        self.conn.inner.with(|shared| match shared.core.stopped(id) {
            Some(err) => Poll::Ready(err),
            None => {
                shared.wait_write(id, cx.waker());
                Poll::Pending
            }
        })
    }

    /// Aborts both directions with `code`.
    pub fn reset(&mut self, code: CloseCode) {
        tracing::debug!(parent: &self.span, ?code, "reset by the application");
        let id = self.id;
        self.conn.inner.with_output(|shared| shared.core.reset(id, code));
    }

    fn poll_write_bytes(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize, Error>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = self.id;
        // One lock for the room, the copy and the write: the copy is of what
        // fits, and no other handle adds to this stream's buffer.
        self.conn.inner.with_output(|shared| {
            // Straight into the record when nothing waits ahead (one copy);
            // otherwise into the stream's queue, for its turn.
            if let Some(taken) = shared.write_through(id, buf) {
                return Poll::Ready(taken);
            }
            match shared.core.write_room(id) {
                Ok(0) => {
                    shared.wait_write(id, cx.waker());
                    Poll::Pending
                }
                Ok(room) => {
                    let mut data = Bytes::copy_from_slice(&buf[..room.min(buf.len())]);
                    Poll::Ready(shared.core.write(id, &mut data))
                }
                Err(err) => Poll::Ready(Err(err)),
            }
        })
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        tracing::trace!(parent: &self.span, "sending half dropped");
        let id = self.id;
        self.conn.inner.with(|shared| {
            shared.write_wakers.remove(&id);
            shared.core.drop_send(id);
        });
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        tracing::trace!(parent: &self.span, "receiving half dropped");
        let id = self.id;
        self.conn.inner.with(|shared| {
            shared.stop_reading(id);
            shared.core.drop_recv(id);
        });
    }
}

impl AsyncRead for RecvStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        match std::task::ready!(this.poll_recv_max(cx, buf.remaining())) {
            Ok(Some(bytes)) => buf.put_slice(&bytes),
            Ok(None) => {}
            Err(err) => return Poll::Ready(Err(err.into())),
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for SendStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_bytes(cx, buf).map_err(Into::into)
    }

    /// Writes go to the transport as they are written (as a `TcpStream`'s
    /// do); this writes whatever [`send`](Self::send) left for the driver
    /// now, from this task, as far as the transport takes it. While other
    /// streams' readers were woken and have yet to run, the bytes are
    /// sealed at once but the write to the transport waits for them (at
    /// most one pass of the runtime's task queue), so replies written
    /// together leave in one write.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.unflushed) {
            this.conn.inner.with_output(|_| ());
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().finish().map_err(Into::into))
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().recv).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().send).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().send).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().send).poll_shutdown(cx)
    }
}

/// What a stream's read found.
enum Next {
    Ready(Result<Option<Bytes>, Error>),
    /// Registered; the driver (or the task reading) wakes it.
    Pending,
    /// Registered, and the read is lent to this task: it reads itself.
    ReadLent,
}

/// What the core has for stream `id` now, at most `max` bytes; if
/// nothing, registers `cx` (and says whether the read is lent to it).
fn next_chunk(
    id: u32,
    finished: &mut bool,
    span: &tracing::Span,
    shared: &mut Shared,
    cx: &Context<'_>,
    max: usize,
) -> Next {
    match shared.core.read(id, max) {
        Ok(ReadOutcome::Data(bytes)) => {
            // Lent only while it waits: the driver reads ahead while the
            // task is busy with what it got.
            shared.stop_waiting(id);
            Next::Ready(Ok(Some(bytes)))
        }
        Ok(ReadOutcome::Fin) => {
            *finished = true;
            shared.stop_reading(id);
            Next::Ready(Ok(None))
        }
        Ok(ReadOutcome::Blocked) if shared.wait_read(id, cx.waker()) => Next::ReadLent,
        Ok(ReadOutcome::Blocked) => Next::Pending,
        Err(err) => {
            tracing::debug!(parent: span, error = %err, "read failed");
            shared.stop_reading(id);
            Next::Ready(Err(err))
        }
    }
}
