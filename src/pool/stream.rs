//! A stream from the pool: a [`Stream`] that, if the peer provably never
//! processed it, opens again on another connection once and replays what
//! was written, so the caller never sees the refusal.

use std::{
    fmt,
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Endpoint, PoolError};
use crate::{
    error::Error,
    handshake::PeerId,
    mux::{Connection, Stream},
};

/// What a stream written this far can be replayed from: a stream that has
/// written more than this before learning its fate is not retried. A
/// request fits; an upload is not worth holding a copy of (every stream
/// waiting for its first reply byte may hold this much).
const REPLAY_LIMIT: usize = 16 * 1024;

pub(crate) type Opening = Pin<Box<dyn Future<Output = Result<(Stream, Connection), PoolError>> + Send>>;

/// Opens a stream to the endpoint given again, on a connection that is
/// not going away, other than the one given (the one that refused) while
/// the pool has or may dial another: one per pool, shared by its streams.
pub(crate) type Reopen = Arc<dyn Fn(&Connection, &Endpoint) -> Opening + Send + Sync>;

/// A stream on a pooled connection, as [`Pool`](super::Pool) gives it:
/// `AsyncRead + AsyncWrite` like the [`Stream`] it wraps.
///
/// If the peer refuses the stream in a way that proves it never processed
/// it ([`Error::is_retryable`]: above a go-away's last stream id, or
/// refused before it was accepted), the stream is opened again once, on
/// another connection that is not going away (dialed if need be; the same
/// one only at `max_connections_per_endpoint`), and what was written so far is
/// written again; the caller sees no error. That holds while nothing has
/// been read from the peer and at most 16 KiB were written (the replay
/// buffer), and only to a connection whose peer has the same verified
/// identity; past that, the error reaches the caller as it is. (A stream
/// the peer sent anything on is never refused: the connection reports
/// its reset as a reset.)
pub struct PooledStream {
    stream: Stream,
    conn: Connection,
    endpoint: Endpoint,
    /// What was written, while a retry is still possible.
    replay: Option<BytesMut>,
    /// Whether the write side was shut down (to be redone on a retry).
    shut_down: bool,
    /// The one retry, until used.
    reopen: Option<Reopen>,
    recovering: Option<Recovery>,
}

enum Recovery {
    /// The new stream opening; the refusal, for the caller if the new
    /// stream's peer is not the refused one's.
    Opening(Opening, Error),
    /// Writing the replay (this much done), then the shutdown if any.
    Replaying(usize),
    ShuttingDown,
}

impl PooledStream {
    pub(crate) fn new(stream: Stream, conn: Connection, endpoint: Endpoint, reopen: Reopen) -> Self {
        Self {
            stream,
            conn,
            endpoint,
            replay: Some(BytesMut::new()),
            shut_down: false,
            reopen: Some(reopen),
            recovering: None,
        }
    }

    /// The same, for a stream on which `sent` went, and its end, when it
    /// opened (in the dial's first flight): the replay, if the peer
    /// refuses it unprocessed, is `sent` and the end.
    pub(crate) fn sent(mut self, sent: Bytes) -> Self {
        if let Some(replay) = &mut self.replay {
            if sent.len() <= REPLAY_LIMIT {
                replay.extend_from_slice(&sent);
            } else {
                self.replay = None;
            }
        }
        self.shut_down = true;
        self
    }

    /// The endpoint it goes to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The connection it runs on (after a retry, the new one).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The peer's verified identity (`None` without encryption).
    pub fn peer(&self) -> Option<&PeerId> {
        self.conn.peer()
    }

    /// The application protocol the connection agreed, if any.
    pub fn protocol(&self) -> Option<&str> {
        self.conn.agreement().protocol()
    }

    /// The stream itself (after a retry, the new one).
    pub fn get_ref(&self) -> &Stream {
        &self.stream
    }

    /// The stream itself, giving up the retry.
    pub fn into_inner(self) -> Stream {
        self.stream
    }

    /// Queues `data` without copying it, as [`Stream::send`] does (it
    /// leaves with the next flush, [`finish`](Self::finish), or when the
    /// task yields: a request and its end are one record), keeping a copy
    /// for a replay while one is possible.
    pub async fn send(&mut self, data: bytes::Bytes) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_recover(cx)).await?;
        self.keep_for_replay(&data);
        match self.stream.send(data).await {
            Ok(()) => Ok(()),
            Err(err) => self.recover_or(io::Error::from(err)).await,
        }
    }

    /// The next chunk of data, without copying it, as [`Stream::recv`]
    /// reads it; `None` at the end. Data from the peer means it processed
    /// the stream: no replay after that.
    pub async fn recv(&mut self) -> io::Result<Option<Bytes>> {
        let data = std::future::poll_fn(|cx| {
            self.poll_op(cx, |s, cx| s.get_mut().poll_recv(cx).map_err(io::Error::from))
        })
        .await?;
        if data.as_ref().is_some_and(|d| !d.is_empty()) {
            self.replay = None;
        }
        Ok(data)
    }

    /// Ends the writing side, as [`Stream::finish`] does (at once).
    pub async fn finish(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_recover(cx)).await?;
        self.shut_down = true;
        match self.stream.finish() {
            Ok(()) => Ok(()),
            Err(err) => self.recover_or(io::Error::from(err)).await,
        }
    }

    /// Recovers from `err` if it is a refusal that still can be, else
    /// returns it.
    async fn recover_or(&mut self, err: io::Error) -> io::Result<()> {
        let Some(refusal) = self.retryable(&err) else {
            return Err(err);
        };
        self.start_recovery(refusal);
        std::future::poll_fn(|cx| self.poll_recover(cx)).await
    }

    fn keep_for_replay(&mut self, data: &[u8]) {
        if let Some(replay) = &mut self.replay {
            if replay.len() + data.len() <= REPLAY_LIMIT {
                replay.extend_from_slice(data);
            } else {
                self.replay = None;
            }
        }
    }

    /// The refusal this stream may still recover from, if `err` is one.
    fn retryable(&self, err: &io::Error) -> Option<Error> {
        if self.reopen.is_none() || self.replay.is_none() {
            return None;
        }
        err.get_ref()
            .and_then(|e| e.downcast_ref::<Error>())
            .filter(|e| e.is_retryable())
            .cloned()
    }

    fn start_recovery(&mut self, refusal: Error) {
        let reopen = self.reopen.take().expect("checked by retryable");
        tracing::debug!(endpoint = %self.endpoint, stream = self.stream.id(), "stream refused unprocessed; opening again");
        self.recovering = Some(Recovery::Opening(reopen(&self.conn, &self.endpoint), refusal));
    }

    /// Drives a retry in progress to its end: the new stream open, the
    /// replay written, the shutdown redone.
    fn poll_recover(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.recovering.as_mut() {
                None => return Poll::Ready(Ok(())),
                Some(Recovery::Opening(opening, refusal)) => {
                    let result = ready!(opening.as_mut().poll(cx));
                    let refusal = refusal.clone();
                    self.recovering = None;
                    let (stream, conn) = result?;
                    if conn.peer() != self.conn.peer() {
                        // Another identity (an unpinned endpoint's address
                        // now answered by someone else): what was meant for
                        // the first never goes to it; the caller learns of
                        // the refusal.
                        tracing::debug!(endpoint = %self.endpoint, "the retry reached another peer; not replayed");
                        return Poll::Ready(Err(io::Error::from(refusal)));
                    }
                    self.stream = stream;
                    self.conn = conn;
                    self.recovering = Some(Recovery::Replaying(0));
                }
                Some(Recovery::Replaying(done)) => {
                    let replay = self.replay.as_ref().expect("kept for the retry");
                    if *done < replay.len() {
                        let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &replay[*done..]))?;
                        *done += n;
                        continue;
                    }
                    self.recovering = self.shut_down.then_some(Recovery::ShuttingDown);
                }
                Some(Recovery::ShuttingDown) => {
                    ready!(Pin::new(&mut self.stream).poll_shutdown(cx))?;
                    self.recovering = None;
                }
            }
        }
    }

    /// Runs `op` on the stream, recovering once from a refusal.
    fn poll_op<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(Pin<&mut Stream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        loop {
            ready!(self.poll_recover(cx))?;
            match ready!(op(Pin::new(&mut self.stream), cx)) {
                Err(err) => match self.retryable(&err) {
                    Some(refusal) => self.start_recovery(refusal),
                    None => return Poll::Ready(Err(err)),
                },
                other => return Poll::Ready(other),
            }
        }
    }
}

impl AsyncRead for PooledStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(this.poll_op(cx, |s, cx| s.poll_read(cx, buf)))?;
        if buf.filled().len() > before {
            // The peer answered: it processed the stream.
            this.replay = None;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for PooledStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(this.poll_op(cx, |s, cx| s.poll_write(cx, data)))?;
        this.keep_for_replay(&data[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_op(cx, |s, cx| s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.shut_down = true;
        this.poll_op(cx, |s, cx| s.poll_shutdown(cx))
    }
}

impl fmt::Debug for PooledStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledStream")
            .field("endpoint", &self.endpoint)
            .field("stream", &self.stream.id())
            .field(
                "retry_possible",
                &(self.reopen.is_some() && self.replay.is_some()),
            )
            .finish()
    }
}
