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
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf},
    time::{Instant, Sleep},
};

use super::{
    halves::{now, ReadSide, WriteSide},
    open::Opener,
    seal::Sealer,
    split::{ChannelReader, ChannelWriter},
    RecordKey, RecordSizer, UpdatePolicy,
};
use crate::{
    error::{Error, Repr},
    frame::Frame,
    handshake::{Agreement, PeerId},
};

/// How long a failing handshake waits to deliver its close record.
pub(crate) const ABORT_FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// What the Setup exchange leaves for the encryption layer above, until
/// the handshake is over (a [`Negotiated`](crate::setup::Negotiated)
/// channel holds it).
#[derive(Debug)]
pub(crate) struct HandshakeState {
    pub(crate) transcript: [u8; 32],
    pub(crate) peer_ephemeral: Option<[u8; 32]>,
    /// Version 3's early data, each way.
    pub(crate) early: EarlyFacts,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    /// The deadline's timer, set when the handshake began and taken by the
    /// step that waits next: one timer for the whole handshake (each timer
    /// registered can cost the runtime a wake-up of its I/O driver).
    pub(crate) timer: Option<Pin<Box<Sleep>>>,
}

/// What the Setup exchange learned of early data (docs/PROTOCOL.md,
/// section 17).
#[derive(Debug, Default)]
pub(crate) struct EarlyFacts {
    /// Our Setup carried early data, and version 3 was agreed.
    pub(crate) sent: bool,
    /// The peer's early data, with version 3 agreed.
    pub(crate) peer: Option<PeerEarly>,
    /// The smaller of the stream and connection windows our Setup
    /// declared: the most early data the peer may send on its stream.
    pub(crate) local_window: u32,
}

/// The dialer's early data as its Setup carried it: the sealed field, and
/// the Setup before it (D0), which the box's nonce hashes.
#[derive(Debug, Clone)]
pub(crate) struct PeerEarly {
    pub(crate) sealed: Vec<u8>,
    pub(crate) d0: Vec<u8>,
}

impl HandshakeState {
    /// The handshake's timer (a new one if a step took it already).
    pub(crate) fn take_timer(&mut self) -> Pin<Box<Sleep>> {
        self.timer
            .take()
            .unwrap_or_else(|| Box::pin(tokio::time::sleep_until(self.deadline)))
    }
}

/// `work`'s output, or `None` if `timer` fires first.
pub(crate) async fn before<F: std::future::Future>(timer: Pin<&mut Sleep>, work: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = work => Some(out),
        () = timer => None,
    }
}

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
    read: ReadSide,
    write: WriteSide,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> RecordIo<IO> {
    /// Frames over `io`, accepting at most `max_payload` bytes each until
    /// the agreement says more.
    pub(crate) fn new(io: IO, max_payload: usize) -> Self {
        Self {
            io,
            read: ReadSide::new(Opener::new(BytesMut::new(), max_payload)),
            write: WriteSide::new(Sealer::new(RecordSizer::fixed(max_payload))),
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

    /// The channel, now that both sides agreed: records up to the agreed
    /// sizes, in the clear until a layer installs keys. If `proofs_follow`
    /// (an encrypted suite), records stay small until the peer proved its
    /// identity.
    pub(crate) fn into_channel(
        mut self,
        agreement: Agreement,
        proofs_follow: bool,
        started: Instant,
    ) -> Channel<IO> {
        self.read
            .opener
            .set_limits(agreement.recv_record_size(), agreement.suite().tag_len());
        if proofs_follow {
            self.read.opener.hold_until_authenticated();
        } else {
            self.read.opener.authenticated();
        }
        self.write
            .sealer
            .set_sizer(RecordSizer::fixed(agreement.send_record_size()));
        Channel {
            io: self,
            unread: Bytes::new(),
            agreement,
            peer: None,
            handshake_time: started.elapsed(),
            early_accepted: false,
        }
    }
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
    /// Version 3: our first stream's early data was accepted (dialing), or
    /// we accepted the peer's (accepting).
    early_accepted: bool,
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

    /// The frame-level transport, for the handshake layers.
    pub(crate) fn record_io(&mut self) -> &mut RecordIo<IO> {
        &mut self.io
    }

    pub(crate) fn install_keys(&mut self, seal: RecordKey, open: RecordKey) {
        self.io.write.sealer.set_key(seal);
        self.io.read.opener.set_key(open);
    }

    /// Key update is agreed (version 2): we update ours as `policy` says,
    /// and the peer may update its own.
    pub(crate) fn enable_key_update(&mut self, policy: UpdatePolicy) {
        self.io.write.sealer.enable_key_update(policy);
        self.io.read.opener.enable_key_update();
    }

    pub(crate) fn set_sizer(&mut self, sizer: RecordSizer) {
        self.io.write.sealer.set_sizer(sizer);
    }

    /// Read allocations of at most `max` bytes once the peer is
    /// authenticated ([`RecordSizeLayer::max_read_buffer`](super::RecordSizeLayer::max_read_buffer)).
    pub(crate) fn set_max_read_buffer(&mut self, max: usize) {
        self.io.read.opener.set_read_chunk_limit(max);
    }

    /// The peer proved it is `peer`: from now on, records up to the agreed
    /// size.
    pub(crate) fn authenticated(&mut self, peer: PeerId) {
        self.peer = Some(peer);
        self.io.read.opener.authenticated();
    }

    /// Early data was accepted, by the peer or by us (docs/PROTOCOL.md,
    /// section 17).
    pub(crate) fn set_early_accepted(&mut self, accepted: bool) {
        self.early_accepted = accepted;
    }

    /// Whether early data was accepted on this channel.
    pub(crate) fn early_accepted(&self) -> bool {
        self.early_accepted
    }

    /// What is delivered before anything read from the transport.
    pub(crate) fn unread(&self) -> &Bytes {
        &self.unread
    }

    /// Bytes to deliver before anything read from the transport: the
    /// early data we accepted, the plaintext of the peer's first Data
    /// record in effect.
    pub(crate) fn set_unread(&mut self, data: Bytes) {
        self.unread = data;
    }

    /// Records how long the handshake took, now that a step finished it.
    pub(crate) fn set_handshake_time(&mut self, took: Duration) {
        self.handshake_time = took;
    }
}

fn stats(read: &ReadSide, write: &WriteSide) -> ChannelStats {
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

    /// Splits the established channel into the halves a connection's
    /// driver uses: reading on one side, writing (from any task) on the
    /// other.
    pub(crate) fn split(self) -> (ChannelReader<ReadHalf<IO>>, ChannelWriter<WriteHalf<IO>>) {
        let RecordIo { io, read, write } = self.io;
        let (r, w) = tokio::io::split(io);
        (
            ChannelReader {
                io: r,
                read,
                unread: self.unread,
            },
            ChannelWriter { io: w, write },
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
