//! The established channel: an encrypted, authenticated byte stream made of
//! records, and the halves a connection's driver splits it into.
//!
//! Reads decrypt in place and hand out the plaintext without another copy
//! through [`Channel::recv`], or copy it out through [`AsyncRead`].

use std::{
    future::poll_fn,
    io,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{
    halves::{OpenSide, SealSide},
    open::Opener,
    seal::Sealer,
    split::{ChannelReader, ChannelWriter},
    RecordConfig, RecordKey, RecordSizer, UpdatePolicy,
};
use crate::{
    clock::now,
    error::{Error, Repr},
    frame::Frame,
    terms::{Agreement, EarlyData, PeerId},
};

/// How long a failing handshake waits to deliver its close record.
pub(crate) const ABORT_FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// Counters of what a channel has carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelStats {
    /// Records sealed and queued (all kinds).
    pub records_sent: u64,
    /// Records received and opened (all kinds).
    pub records_received: u64,
    /// Application bytes written.
    pub bytes_sent: u64,
    /// Application bytes received.
    pub bytes_received: u64,
    /// Key updates we sent (protocol version 2).
    pub key_updates_sent: u64,
    /// Key updates the peer sent.
    pub key_updates_received: u64,
}

/// A transport with the record layer's two halves: what the handshake
/// layers exchange frames over, before there is an agreement.
#[derive(Debug)]
pub(crate) struct RecordIo<IO> {
    io: IO,
    read: OpenSide,
    write: SealSide,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> RecordIo<IO> {
    /// Frames over `io`, accepting at most `max_payload` bytes each until
    /// the agreement says more.
    pub(crate) fn new(io: IO, max_payload: usize) -> Self {
        Self {
            io,
            read: OpenSide::new(Opener::new(BytesMut::new(), max_payload)),
            write: SealSide::new(Sealer::new(RecordSizer::fixed(max_payload))),
        }
    }

    /// Queues a frame exactly as given (a Setup, or a record the handshake
    /// sealed itself).
    pub(crate) fn queue_frame(&mut self, frame: &[u8]) {
        self.write.sealer.queue_frame(frame);
    }

    /// Writes everything queued.
    pub(crate) async fn flush(&mut self) -> Result<(), Error> {
        poll_fn(|cx| self.write.poll_flush(&mut self.io, cx, now())).await
    }

    /// The peer's next frame, unopened: `Truncated` if the transport ends.
    pub(crate) async fn read_frame(&mut self) -> Result<Frame, Error> {
        poll_fn(|cx| self.read.poll_frame(&mut self.io, cx))
            .await?
            .ok_or_else(|| Repr::Truncated.into())
    }

    /// Sends `frame` (a close record, typically) as the last thing this
    /// side says, waiting at most [`ABORT_FLUSH_TIMEOUT`]; errors are
    /// ignored, since the handshake is failing anyway.
    pub(crate) async fn abort_with(&mut self, frame: &[u8]) {
        self.write.sealer.drop_open_record();
        self.queue_frame(frame);
        let _ = tokio::time::timeout(ABORT_FLUSH_TIMEOUT, self.flush()).await;
        self.write.shut();
    }

    /// Both sides agreed: frames up to the agreed record size (and the
    /// suite's tag) from now on, and if `proofs_follow` (an encrypted
    /// suite), records of at most 512 bytes until the channel is made,
    /// which is once the peer proved who it is.
    pub(crate) fn agreed(&mut self, agreement: &Agreement, proofs_follow: bool) {
        self.read
            .opener
            .set_limits(agreement.recv_record_size(), agreement.suite().tag_len());
        if proofs_follow {
            self.read.opener.hold_until_authenticated();
        }
    }

    /// The channel the handshake established over this transport, with
    /// what it established.
    pub(crate) fn into_channel(mut self, established: Secured) -> Channel<IO> {
        let Secured {
            agreement,
            peer,
            keys,
            key_update,
            records,
            first,
            early,
            handshake_time,
        } = established;
        if let Some((seal, open)) = keys {
            self.write.sealer.set_key(seal);
            self.read.opener.set_key(open);
        }
        if let Some(policy) = key_update {
            self.write.sealer.enable_key_update(policy);
            self.read.opener.enable_key_update();
        }
        let sizer = match records {
            // We send no larger records than we accept, nor than the peer does.
            Some(config) => {
                self.read.opener.set_read_chunk_limit(config.max_read_buffer);
                let max = agreement.send_record_size().min(config.max);
                RecordSizer::new(config.policy, max, config.idle_reset)
            }
            None => RecordSizer::fixed(agreement.send_record_size()),
        };
        self.write.sealer.set_sizer(sizer);
        self.read.opener.authenticated();
        Channel {
            io: self,
            unread: first,
            agreement,
            peer,
            handshake_time,
            early,
        }
    }
}

/// What a handshake established, for the channel it makes: what was
/// agreed, who the peer proved to be, the record keys (at the next record
/// of each direction) and how they update, how records are sized, and
/// early data's outcome.
#[derive(Debug)]
pub(crate) struct Secured {
    pub(crate) agreement: Agreement,
    pub(crate) peer: Option<PeerId>,
    pub(crate) keys: Option<(RecordKey, RecordKey)>,
    pub(crate) key_update: Option<UpdatePolicy>,
    pub(crate) records: Option<RecordConfig>,
    /// Plaintext delivered before anything read from the transport: the
    /// early data an acceptor accepted, in effect the plaintext of the
    /// dialer's first Data record.
    pub(crate) first: Bytes,
    /// What became of early data: ours (dialing), or the peer's
    /// (accepting).
    pub(crate) early: EarlyData,
    pub(crate) handshake_time: Duration,
}

/// An established channel over a transport `IO`.
///
/// Implements [`AsyncRead`] and [`AsyncWrite`]. As with TLS streams, written
/// bytes are buffered into records until the record is full or the writer
/// calls `flush`; `shutdown` sends the authenticated close record, so the
/// reader can tell a clean end ([`Ok(0)`](AsyncRead)) from a truncated one
/// (an error of [`ErrorKind::Truncated`](crate::ErrorKind::Truncated)).
pub struct Channel<IO> {
    io: RecordIo<IO>,
    /// Data received but not yet read through [`AsyncRead`].
    unread: Bytes,
    agreement: Agreement,
    /// The peer's identity, once the encryption layer verified it.
    peer: Option<PeerId>,
    handshake_time: Duration,
    /// Version 3: what became of our first stream's early data (dialing),
    /// or of the peer's (accepting).
    early: EarlyData,
}

impl<IO> std::fmt::Debug for Channel<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("agreement", &self.agreement)
            .field("peer", &self.peer)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<IO> Channel<IO> {
    /// What the two sides agreed: version, suite, record sizes, limits and
    /// application protocol.
    pub fn agreement(&self) -> &Agreement {
        &self.agreement
    }

    /// The peer's verified identity, when the encryption layer ran.
    pub fn peer(&self) -> Option<&PeerId> {
        self.peer.as_ref()
    }

    /// Time from transport-ready to the end of the handshake, as this side
    /// saw it.
    pub fn handshake_time(&self) -> Duration {
        self.handshake_time
    }

    /// Counters of records and bytes carried so far.
    pub fn stats(&self) -> ChannelStats {
        stats(&self.io.read, &self.io.write)
    }

    /// Bytes of read and write buffer the channel holds now (the
    /// allocations, spares included, not their contents): the part of a
    /// connection's memory that scales with throughput rather than with
    /// state.
    pub fn buffer_capacity(&self) -> usize {
        self.io.read.opener.capacity() + self.io.write.sealer.capacity()
    }

    /// The transport underneath.
    pub fn get_ref(&self) -> &IO {
        &self.io.io
    }

    /// The transport underneath, mutably. Reading or writing it directly
    /// corrupts the channel.
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io.io
    }

    /// What became of early data on this channel.
    pub(crate) fn early_data(&self) -> EarlyData {
        self.early
    }

    /// What is delivered before anything read from the transport.
    pub(crate) fn unread(&self) -> &Bytes {
        &self.unread
    }
}

fn stats(read: &OpenSide, write: &SealSide) -> ChannelStats {
    ChannelStats {
        records_sent: write.sealer.records,
        records_received: read.opener.records,
        bytes_sent: write.sealer.bytes,
        bytes_received: read.opener.bytes,
        key_updates_sent: write.sealer.key_updates,
        key_updates_received: read.opener.key_updates,
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Channel<IO> {
    /// The next chunk of application data, without copying it: `None` once
    /// the peer has closed cleanly.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        if !self.unread.is_empty() {
            return Poll::Ready(Ok(Some(std::mem::take(&mut self.unread))));
        }
        let io = &mut self.io;
        match ready!(io.read.poll_data(&mut io.io, cx)) {
            Ok(data) => Poll::Ready(Ok(data.map(|(bytes, _)| bytes))),
            Err(err) => {
                io.write.fail(&err);
                Poll::Ready(Err(err))
            }
        }
    }

    /// The next chunk of application data: `None` once the peer has closed
    /// cleanly.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, Error> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin + Send + 'static> Channel<IO> {
    /// Splits the established channel into the halves a connection's
    /// driver uses: reading on one side, writing (from any task) on the
    /// other, the transport's type erased.
    pub(crate) fn split(self) -> (ChannelReader, ChannelWriter) {
        let RecordIo { io, read, write } = self.io;
        let (r, w) = tokio::io::split(io);
        (
            ChannelReader {
                io: Box::new(r),
                read,
                unread: self.unread,
            },
            ChannelWriter {
                io: Box::new(w),
                write,
            },
        )
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Channel<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut copied = false;
        while buf.remaining() > 0 {
            if this.unread.is_empty() {
                match this.poll_recv(cx) {
                    Poll::Ready(Ok(Some(chunk))) => this.unread = chunk,
                    Poll::Ready(Ok(None)) => break,
                    Poll::Ready(Err(err)) if !copied => return Poll::Ready(Err(err.into())),
                    // Deliver what we have; the error comes on the next read.
                    Poll::Ready(Err(_)) | Poll::Pending if copied => break,
                    Poll::Ready(Err(_)) | Poll::Pending => return Poll::Pending,
                }
            }
            let n = buf.remaining().min(this.unread.len());
            buf.put_slice(&this.unread[..n]);
            this.unread.advance(n);
            copied = true;
        }
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Channel<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let io = &mut self.get_mut().io;
        io.write
            .poll_write_data(&mut io.io, cx, buf, now())
            .map_err(Into::into)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let io = &mut self.get_mut().io;
        io.write.poll_flush(&mut io.io, cx, now()).map_err(Into::into)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let io = &mut self.get_mut().io;
        io.write.poll_close(&mut io.io, cx).map_err(Into::into)
    }
}
