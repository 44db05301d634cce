//! The established channel: an encrypted, authenticated byte stream made of
//! records.
//!
//! Writes are copied once into the send buffer, where the open record
//! collects them until it reaches the size the record policy asks for (or
//! the writer flushes); then it is sealed in place. Reads decrypt in place
//! and hand out the plaintext without another copy through
//! [`Channel::recv`], or copy it out through [`AsyncRead`].

use std::{
    collections::VecDeque,
    future::poll_fn,
    io::{self, IoSlice},
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Instant,
};
use tokio_util::{codec::Decoder, io::poll_read_buf};

use super::{encode_close, handshake_close, parse_close, RecordKey, RecordSizer, MAX_TAG_LEN};
use crate::{
    error::{CloseCode, Error},
    frame::{Frame, FrameCodec, FrameError, FrameKind, HEADER_LEN},
    handshake::{Agreement, PeerId},
};

/// Sealed bytes buffered before a write waits for the transport: enough for
/// several maximum records per write system call, and the bound on what a
/// slow peer can make us hold.
const WRITE_HIGH_WATER: usize = 256 * 1024;
/// Allocation unit of the send buffer while sealed bytes wait to be
/// written (bulk): several records per chunk.
const WRITE_CHUNK: usize = 128 * 1024;
/// Allocation unit of the send buffer when nothing waits (a message, a
/// reply): small enough to come from the allocator's free lists. A 128 KiB
/// chunk made and freed per message made glibc grow and trim the heap with
/// a `brk` system call each time (measured: one per round trip).
const SMALL_WRITE_CHUNK: usize = 16 * 1024;
/// Sealed segments handed to one vectored write.
const MAX_WRITE_SLICES: usize = 16;
/// Free space below which the read buffer grows before the next read.
const READ_MIN_SPACE: usize = 16 * 1024;
/// The read buffer's allocation unit adapts: it starts here, doubles each
/// time a read fills it (bulk data is waiting), and halves when reads come
/// back small.
const READ_CHUNK_MIN: usize = 16 * 1024;
/// The largest read allocation: several records per read system call. A
/// record cut by the end of a chunk is copied into the next one, so larger
/// chunks copy less (measured: 128 KiB chunks spent 12% of a bulk
/// transfer's instructions on those copies).
const READ_CHUNK_MAX: usize = 512 * 1024;
/// A buffer at least this large is let go when the channel goes idle with
/// nothing buffered, so idle connections hold no read buffer (a smaller
/// one is the tail of an allocation, which records handed out share).
const KEEP_IDLE_BUFFER: usize = READ_CHUNK_MIN / 2;
/// How long a failing handshake waits to deliver its close record.
pub(crate) const ABORT_FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// What the handshake layers leave on the channel until it is established.
#[derive(Debug)]
pub(crate) struct HandshakeState {
    pub(crate) transcript: [u8; 32],
    pub(crate) peer_ephemeral: Option<[u8; 32]>,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
}

#[derive(Debug)]
enum ReadState {
    Open,
    Eof,
    Failed(Error),
}

#[derive(Debug, PartialEq, Eq)]
enum WriteState {
    Open,
    Closing,
    Closed,
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
}

/// An established channel over a transport `IO`.
///
/// Implements [`AsyncRead`] and [`AsyncWrite`]. As with TLS streams, written
/// bytes are buffered into records until the record is full or the writer
/// calls `flush`; `shutdown` sends the authenticated close record, so the
/// reader can tell a clean end ([`Ok(0)`](AsyncRead)) from a truncated one
/// ([`Error::Truncated`]).
pub struct Channel<IO> {
    io: IO,
    codec: FrameCodec,
    rbuf: BytesMut,
    /// Read allocations used before `rbuf`'s, reused once every record
    /// handed out from them is gone ([`make_room`]).
    rspares: VecDeque<BytesMut>,
    /// Records being built: sealed ones, then possibly the open one.
    wbuf: BytesMut,
    /// Send allocations used before `wbuf`'s, reused once written.
    wspares: VecDeque<BytesMut>,
    /// Sealed bytes handed over for writing, oldest first. Moving sealed
    /// bytes here (rather than writing `wbuf` and compacting it) means no
    /// byte is ever moved after it is sealed, whatever the transport takes.
    queued: VecDeque<Bytes>,
    queued_len: usize,
    /// Start (header offset in `wbuf`) of the data record being filled.
    open_record: Option<usize>,
    open_target: usize,
    seal: Option<RecordKey>,
    open: Option<RecordKey>,
    sizer: RecordSizer,
    agreement: Agreement,
    /// The peer's identity, once the encryption layer verified it.
    peer: Option<PeerId>,
    handshake_time: Duration,
    pub(crate) handshake: Option<HandshakeState>,
    unread: Bytes,
    /// The current read allocation unit (see [`READ_CHUNK_MAX`]).
    read_chunk: usize,
    read_state: ReadState,
    write_state: WriteState,
    /// The error that ended this channel, if any: its code goes into our
    /// close record instead of a clean close.
    failure: Option<Error>,
    /// A close the owner chose (the multiplexer's go-away code), sent
    /// instead of a clean one.
    close_with: Option<(CloseCode, String)>,
    stats: ChannelStats,
}

impl<IO> std::fmt::Debug for Channel<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("agreement", &self.agreement)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<IO> Channel<IO> {
    pub(crate) fn from_parts(
        io: IO,
        rbuf: BytesMut,
        wbuf: BytesMut,
        agreement: Agreement,
        handshake: HandshakeState,
    ) -> Self {
        let codec = FrameCodec::new(agreement.recv_record_size() + agreement.suite().tag_len());
        Self {
            io,
            codec,
            rbuf,
            rspares: VecDeque::new(),
            wbuf,
            wspares: VecDeque::new(),
            queued: VecDeque::new(),
            queued_len: 0,
            open_record: None,
            open_target: 0,
            seal: None,
            open: None,
            sizer: RecordSizer::fixed(agreement.send_record_size()),
            agreement,
            peer: None,
            handshake_time: Duration::ZERO,
            handshake: Some(handshake),
            unread: Bytes::new(),
            read_chunk: READ_CHUNK_MIN,
            read_state: ReadState::Open,
            write_state: WriteState::Open,
            failure: None,
            close_with: None,
            stats: ChannelStats::default(),
        }
    }

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

    pub(crate) fn set_peer(&mut self, peer: PeerId) {
        self.peer = Some(peer);
    }

    /// Counters of records and bytes carried so far.
    pub fn stats(&self) -> ChannelStats {
        self.stats
    }

    /// Bytes of read and write buffer the channel holds now (capacity, not
    /// contents): the part of a connection's memory that scales with
    /// throughput rather than with state.
    pub fn buffer_capacity(&self) -> usize {
        let spares: usize = self
            .rspares
            .iter()
            .chain(&self.wspares)
            .map(BytesMut::capacity)
            .sum();
        self.rbuf.capacity() + self.wbuf.capacity() + self.queued_len + spares
    }

    /// The transport underneath.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The transport underneath, mutably. Reading or writing it directly
    /// corrupts the channel.
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    pub(crate) fn install_keys(&mut self, seal: RecordKey, open: RecordKey) {
        self.seal = Some(seal);
        self.open = Some(open);
    }

    pub(crate) fn set_sizer(&mut self, sizer: RecordSizer) {
        self.sizer = sizer;
    }

    /// Marks the handshake done and records how long it took.
    pub(crate) fn finish_handshake_step(&mut self) {
        if let Some(hs) = &self.handshake {
            self.handshake_time = hs.started.elapsed();
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.handshake
            .as_ref()
            .map_or_else(Instant::now, |hs| hs.deadline)
    }

    /// The code and reason our close record will carry (unless a failure
    /// already decided it).
    pub(crate) fn set_close(&mut self, code: CloseCode, reason: String) {
        if self.failure.is_none() {
            self.close_with = Some((code, reason));
        }
    }

    /// Remembers the first error that ended the channel, for our close.
    fn fail(&mut self, err: &Error) {
        if self.failure.is_none() && err.warrants_close() {
            self.failure = Some(err.clone());
        }
    }

    /// Makes room in `wbuf` for a record of `needed` bytes (no record may be
    /// open). Sealed bytes move to the write queue rather than being copied
    /// into a grown buffer, and a fresh chunk is allocated.
    fn make_room(&mut self, needed: usize) {
        debug_assert!(self.open_record.is_none());
        if self.wbuf.capacity() - self.wbuf.len() >= needed {
            return;
        }
        let chunk = if self.wbuf.is_empty() && self.queued.is_empty() {
            SMALL_WRITE_CHUNK
        } else {
            WRITE_CHUNK
        };
        if !self.wbuf.is_empty() {
            let sealed = self.wbuf.split().freeze();
            self.queued_len += sealed.len();
            self.queued.push_back(sealed);
        }
        make_room(&mut self.wbuf, &mut self.wspares, needed.max(chunk));
    }

    /// Seals the open data record, if it holds anything.
    fn seal_open_record(&mut self) -> Result<(), Error> {
        let Some(start) = self.open_record.take() else {
            return Ok(());
        };
        let len = self.wbuf.len() - start - HEADER_LEN;
        if len == 0 {
            self.wbuf.truncate(start);
            return Ok(());
        }
        if let Err(err) = self.seal_in_place(start, FrameKind::Data, len) {
            self.fail(&err);
            return Err(err);
        }
        self.sizer.record_sent(len, Instant::now().into_std());
        Ok(())
    }

    /// Writes the header for the record whose plaintext is
    /// `wbuf[start + HEADER_LEN..]` and seals it in place.
    fn seal_in_place(&mut self, start: usize, kind: FrameKind, len: usize) -> Result<(), Error> {
        let tag_len = if self.seal.is_some() { MAX_TAG_LEN } else { 0 };
        let header = kind.header(len + tag_len);
        self.wbuf[start..start + HEADER_LEN].copy_from_slice(&header);
        if let Some(key) = &mut self.seal {
            // The close record may use the key's reserve, so a key that is
            // used up can still say so.
            let sealed = match kind {
                FrameKind::Close => key.seal_final(&header, &mut self.wbuf[start + HEADER_LEN..]),
                _ => key.seal(&header, &mut self.wbuf[start + HEADER_LEN..]),
            };
            match sealed {
                Ok(tag) => self.wbuf.put_slice(&tag),
                Err(err) => {
                    self.wbuf.truncate(start);
                    return Err(err);
                }
            }
        }
        self.stats.records_sent += 1;
        Ok(())
    }

    /// Queues one whole record of `kind` (sealing any open data record
    /// first, so order is kept).
    pub(crate) fn queue_record(&mut self, kind: FrameKind, payload: &[u8]) -> Result<(), Error> {
        self.seal_open_record()?;
        self.make_room(HEADER_LEN + payload.len() + MAX_TAG_LEN);
        let start = self.wbuf.len();
        self.wbuf.put_slice(&[0; HEADER_LEN]);
        self.wbuf.put_slice(payload);
        self.seal_in_place(start, kind, payload.len())
    }

    /// Opens a raw frame into its plaintext.
    fn open_frame(&mut self, frame: Frame) -> Result<(FrameKind, BytesMut), Error> {
        let Frame {
            kind,
            header,
            mut payload,
        } = frame;
        if kind == FrameKind::Setup {
            return Err(Error::UnexpectedFrame {
                expected: "record",
                got: kind,
            });
        }
        if let Some(key) = &mut self.open {
            let len = key.open(&header, &mut payload)?.len();
            payload.truncate(len);
        }
        let max = self.agreement.recv_record_size();
        if payload.len() > max {
            return Err(FrameError::TooLarge {
                len: payload.len(),
                max,
            }
            .into());
        }
        self.stats.records_received += 1;
        Ok((kind, payload))
    }
}

/// Earlier allocations a buffer keeps for reuse ([`make_room`]).
const SPARES: usize = 3;

/// Makes room for `additional` more bytes in `buf`, without allocating
/// when it can: by reclaiming `buf`'s own allocation, or else one of the
/// `spares` (allocations it used before), once every piece handed out from
/// it is gone. Only when all are still in use does it allocate; the current
/// allocation then joins the spares.
///
/// Records received and records sealed leave as slices of these buffers,
/// so the current allocation is usually still shared when it fills up.
/// Allocating afresh each time made glibc hand the freed blocks back to the
/// kernel and fault them in again: 250,000 page faults per 2 GiB received
/// (measured), against 300 for tokio-rustls.
fn make_room(buf: &mut BytesMut, spares: &mut VecDeque<BytesMut>, additional: usize) {
    if buf.try_reclaim(additional) {
        return;
    }
    let needed = buf.len() + additional;
    let next = match spares.iter_mut().position(|spare| spare.try_reclaim(needed)) {
        Some(i) => spares.remove(i).unwrap_or_default(),
        None => BytesMut::with_capacity(needed),
    };
    let mut old = std::mem::replace(buf, next);
    buf.extend_from_slice(&old);
    old.clear();
    if old.capacity() > 0 {
        // (A buffer that never allocated has nothing to offer.)
        spares.push_back(old);
    }
    if spares.len() > SPARES {
        spares.pop_front();
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Channel<IO> {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Frame>, Error>> {
        loop {
            if let Some(frame) = self.codec.decode(&mut self.rbuf)? {
                return Poll::Ready(Ok(Some(frame)));
            }
            if self.rbuf.capacity() - self.rbuf.len() < READ_MIN_SPACE {
                make_room(&mut self.rbuf, &mut self.rspares, self.read_chunk);
            }
            let space = self.rbuf.capacity() - self.rbuf.len();
            let n = match poll_read_buf(Pin::new(&mut self.io), cx, &mut self.rbuf) {
                Poll::Ready(result) => result?,
                Poll::Pending => {
                    if self.rbuf.is_empty() {
                        // Caught up, perhaps idle: the spares only help
                        // while reads follow each other, and the records
                        // handed out keep their own memory alive; the next
                        // read allocates afresh.
                        self.rspares.clear();
                        if self.rbuf.capacity() >= KEEP_IDLE_BUFFER {
                            self.rbuf = BytesMut::new();
                        }
                    }
                    return Poll::Pending;
                }
            };
            if n == 0 {
                return Poll::Ready(match self.rbuf.len() {
                    0 => Ok(None),
                    n => Err(FrameError::Incomplete(n).into()),
                });
            }
            if n == space {
                self.read_chunk = (self.read_chunk * 2).min(READ_CHUNK_MAX);
            } else if n < space / 4 {
                self.read_chunk = (self.read_chunk / 2).max(READ_CHUNK_MIN);
            }
        }
    }

    /// The next record, opened. The end of the transport is `Truncated`:
    /// a clean end always comes as a close record first.
    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Result<(FrameKind, BytesMut), Error>> {
        match ready!(self.poll_frame(cx))? {
            Some(frame) => Poll::Ready(self.open_frame(frame)),
            None => Poll::Ready(Err(Error::Truncated)),
        }
    }

    /// Reads the next record during the handshake; a close record is the
    /// peer's refusal.
    pub(crate) async fn read_handshake_record(&mut self) -> Result<(FrameKind, BytesMut), Error> {
        let frame = poll_fn(|cx| self.poll_frame(cx)).await?.ok_or(Error::Truncated)?;
        // A peer that failed before it had keys explains in the clear.
        let clear_close = (frame.kind == FrameKind::Close).then(|| frame.payload.clone());
        match self.open_frame(frame) {
            Ok((FrameKind::Close, payload)) => Err(handshake_close(&payload)),
            Ok(record) => Ok(record),
            Err(Error::BadRecord { .. }) if clear_close.is_some() => {
                Err(handshake_close(&clear_close.expect("checked")))
            }
            Err(err) => Err(err),
        }
    }

    /// Sealed bytes not yet taken by the transport.
    fn unsent(&self) -> usize {
        self.queued_len + self.wbuf.len()
    }

    /// Writes every sealed byte, several records per system call.
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        debug_assert!(self.open_record.is_none(), "the open record is not sealed");
        if !self.wbuf.is_empty() {
            let sealed = self.wbuf.split().freeze();
            self.queued_len += sealed.len();
            self.queued.push_back(sealed);
        }
        while self.queued_len > 0 {
            let n = if self.io.is_write_vectored() {
                let mut slices = [IoSlice::new(&[]); MAX_WRITE_SLICES];
                let count = self.queued.len().min(MAX_WRITE_SLICES);
                for (slice, bytes) in slices.iter_mut().zip(&self.queued) {
                    *slice = IoSlice::new(bytes);
                }
                ready!(Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..count]))?
            } else {
                let front = self.queued.front().expect("queued_len > 0");
                ready!(Pin::new(&mut self.io).poll_write(cx, front))?
            };
            if n == 0 {
                return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()));
            }
            self.queued_len -= n;
            let mut left = n;
            while left > 0 {
                let front = self.queued.front_mut().expect("written bytes were queued");
                if front.len() <= left {
                    left -= front.len();
                    self.queued.pop_front();
                } else {
                    front.advance(left);
                    left = 0;
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    pub(crate) fn poll_flush_records(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.seal_open_record()?;
        ready!(self.poll_write_out(cx))?;
        if self.wbuf.is_empty() && self.wbuf.capacity() > 0 {
            // Everything is written: an idle channel holds no send buffer.
            self.wbuf = BytesMut::new();
            self.wspares.clear();
        }
        Pin::new(&mut self.io).poll_flush(cx).map_err(Error::from)
    }

    /// Sends everything queued.
    pub(crate) async fn flush_records(&mut self) -> Result<(), Error> {
        poll_fn(|cx| self.poll_flush_records(cx)).await
    }

    /// Tells the peer why we give up, as well as we can within a short
    /// time; errors are ignored since we are failing anyway.
    pub(crate) async fn abort(&mut self, error: &Error) {
        // Unsealed plaintext must never reach the wire.
        if let Some(start) = self.open_record.take() {
            self.wbuf.truncate(start);
        }
        let close = encode_close(error.close_code(), &error.to_string());
        if error.warrants_close() && self.queue_record(FrameKind::Close, &close).is_ok() {
            let _ = tokio::time::timeout(ABORT_FLUSH_TIMEOUT, self.flush_records()).await;
        }
        self.write_state = WriteState::Closed;
    }

    /// The next chunk of application data, without copying it: `None` once
    /// the peer has closed cleanly.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        if !self.unread.is_empty() {
            return Poll::Ready(Ok(Some(std::mem::take(&mut self.unread))));
        }
        match &self.read_state {
            ReadState::Open => {}
            ReadState::Eof => return Poll::Ready(Ok(None)),
            ReadState::Failed(err) => return Poll::Ready(Err(err.clone())),
        }
        let err = match ready!(self.poll_record(cx)) {
            Ok((FrameKind::Data, payload)) if payload.is_empty() => Error::EmptyRecord,
            Ok((FrameKind::Data, payload)) => {
                self.stats.bytes_received += payload.len() as u64;
                return Poll::Ready(Ok(Some(payload.freeze())));
            }
            Ok((FrameKind::Close, payload)) => match parse_close(&payload) {
                Ok(None) => {
                    self.read_state = ReadState::Eof;
                    return Poll::Ready(Ok(None));
                }
                Ok(Some(err)) | Err(err) => err,
            },
            Ok((got, _)) => Error::UnexpectedFrame {
                expected: "data or close record",
                got,
            },
            Err(err) => err,
        };
        self.fail(&err);
        self.read_state = ReadState::Failed(err.clone());
        Poll::Ready(Err(err))
    }

    /// The next chunk of application data: `None` once the peer has closed
    /// cleanly.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, Error> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    pub(crate) fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<Result<usize, Error>> {
        if self.write_state != WriteState::Open {
            return Poll::Ready(Err(Error::Closed));
        }
        if self.open_record.is_none() && self.unsent() >= WRITE_HIGH_WATER {
            ready!(self.poll_write_out(cx))?;
        }
        let mut written = 0;
        while written < data.len() {
            let start = match self.open_record {
                Some(start) => start,
                None => {
                    self.open_target = self.sizer.next_size(Instant::now().into_std());
                    self.make_room(HEADER_LEN + self.open_target + MAX_TAG_LEN);
                    let start = self.wbuf.len();
                    self.wbuf.put_slice(&[0; HEADER_LEN]);
                    self.open_record = Some(start);
                    start
                }
            };
            let room = self.open_target - (self.wbuf.len() - start - HEADER_LEN);
            let n = room.min(data.len() - written);
            self.wbuf.put_slice(&data[written..written + n]);
            written += n;
            if n == room {
                self.seal_open_record()?;
                if self.unsent() >= WRITE_HIGH_WATER {
                    break;
                }
            }
        }
        self.stats.bytes_sent += written as u64;
        Poll::Ready(Ok(written))
    }

    pub(crate) fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        if self.write_state == WriteState::Open {
            // Whatever is still open is sealed first, if the key allows;
            // if not, the failure goes into the close record.
            let _ = self.seal_open_record();
            let close = match (&self.close_with, &self.failure) {
                (Some((code, reason)), _) => encode_close(*code, reason),
                (None, None) => encode_close(CloseCode::NO_ERROR, ""),
                (None, Some(err)) => encode_close(err.close_code(), &err.to_string()),
            };
            self.queue_record(FrameKind::Close, &close)?;
            self.write_state = WriteState::Closing;
        }
        if self.write_state == WriteState::Closing {
            ready!(self.poll_write_out(cx))?;
            ready!(Pin::new(&mut self.io).poll_shutdown(cx))?;
            self.write_state = WriteState::Closed;
        }
        Poll::Ready(Ok(()))
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
        self.get_mut().poll_write_data(cx, buf).map_err(Into::into)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_records(cx).map_err(Into::into)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close(cx).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::handshake::{CipherSuite, Role};

    /// What an AES-256-GCM channel with 16 KiB records agreed, as `role`.
    fn agreement(role: Role) -> Agreement {
        Agreement {
            role,
            version: 1,
            suite: CipherSuite::Aes256Gcm,
            send_record_size: 16 * 1024,
            recv_record_size: 16 * 1024,
            peer_max_streams: None,
            peer_stream_window: None,
            peer_connection_window: None,
            local_max_streams: None,
            local_stream_window: None,
            local_connection_window: None,
            protocol: None,
        }
    }

    /// Two channels with AES-256-GCM keys; the dialer's sealing key allows
    /// `limit` records.
    fn pair(limit: u64) -> (Channel<DuplexStream>, Channel<DuplexStream>) {
        let (a, b) = tokio::io::duplex(1 << 16);
        let channel = |io, role| {
            let handshake = HandshakeState {
                transcript: [0; 32],
                peer_ephemeral: None,
                started: Instant::now(),
                deadline: Instant::now(),
            };
            let mut channel =
                Channel::from_parts(io, BytesMut::new(), BytesMut::new(), agreement(role), handshake);
            let key =
                |dir: Role| RecordKey::new(CipherSuite::Aes256Gcm, &[dir.wire() + 1; 32], [dir.wire(); 24]);
            let (seal, open) = (key(role), key(role.peer()));
            let seal = if role == Role::Dialer {
                seal.with_limits(limit, u64::MAX)
            } else {
                seal
            };
            channel.install_keys(seal, open);
            channel
        };
        (channel(a, Role::Dialer), channel(b, Role::Acceptor))
    }

    #[tokio::test]
    async fn a_used_up_key_still_says_so_in_its_close_record() {
        let (mut d, mut a) = pair(3);
        for _ in 0..2 {
            d.write_all(b"0123456789").await.unwrap();
            d.flush().await.unwrap();
        }
        d.write_all(b"more").await.unwrap();
        let err = Error::from(d.flush().await.unwrap_err());
        assert!(matches!(err, Error::KeyExhausted(2)), "{err:?}");
        d.shutdown().await.unwrap();

        let mut got = Vec::new();
        let err = Error::from(a.read_to_end(&mut got).await.unwrap_err());
        assert_eq!(got, b"01234567890123456789");
        assert!(err.is_peer_close(CloseCode::KEY_EXHAUSTED), "{err:?}");
    }

    #[tokio::test]
    async fn after_a_read_failure_our_close_carries_its_code() {
        let (mut d, mut a) = pair(u64::MAX);
        // A forged record: authentication fails.
        d.get_mut().write_all(&[3, 0, 0, 20]).await.unwrap();
        d.get_mut().write_all(&[0; 20]).await.unwrap();
        assert!(matches!(a.recv().await, Err(Error::BadRecord { sequence: 0 })));
        a.shutdown().await.unwrap();
        let err = d.recv().await.unwrap_err();
        assert!(err.is_peer_close(CloseCode::AUTHENTICATION_FAILED), "{err:?}");
    }

    #[tokio::test]
    async fn a_clean_shutdown_reads_as_the_end() {
        let (mut d, mut a) = pair(u64::MAX);
        d.write_all(b"bye").await.unwrap();
        d.shutdown().await.unwrap();
        assert_eq!(&a.recv().await.unwrap().unwrap()[..], b"bye");
        assert_eq!(a.recv().await.unwrap(), None);
        assert_eq!(a.recv().await.unwrap(), None);
        // Writing after our own shutdown is refused.
        assert!(d.write_all(b"late").await.is_err());
    }

    /// A transport that takes at most 7 bytes per write, vectored or not.
    struct Trickle {
        inner: DuplexStream,
        vectored: bool,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let n = buf.len().min(7);
            Pin::new(&mut self.inner).poll_write(cx, &buf[..n])
        }
        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            // A prefix of at most 7 bytes of all the slices, so that short
            // slices make it cross a boundary. (Taking a little from each
            // slice would not be a prefix: vectored writes write one.)
            let joined: Vec<u8> = bufs
                .iter()
                .flat_map(|slice| slice.iter().copied())
                .take(7)
                .collect();
            self.poll_write(cx, &joined)
        }
        fn is_write_vectored(&self) -> bool {
            self.vectored
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    #[tokio::test]
    async fn partial_writes_lose_and_reorder_nothing() {
        for vectored in [false, true] {
            let (d, mut a) = pair(u64::MAX);
            let Channel {
                io,
                rbuf,
                wbuf,
                agreement,
                seal,
                open,
                ..
            } = d;
            let handshake = HandshakeState {
                transcript: [0; 32],
                peer_ephemeral: None,
                started: Instant::now(),
                deadline: Instant::now(),
            };
            let mut d =
                Channel::from_parts(Trickle { inner: io, vectored }, rbuf, wbuf, agreement, handshake);
            d.install_keys(seal.unwrap(), open.unwrap());
            let message: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let expected = message.clone();
            let writer = tokio::spawn(async move {
                // Uneven writes and flushes, so records and chunks straddle.
                for piece in message.chunks(7_777) {
                    d.write_all(piece).await.unwrap();
                    if piece[0] % 3 == 0 {
                        d.flush().await.unwrap();
                    }
                }
                d.shutdown().await.unwrap();
            });
            let mut got = Vec::new();
            a.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            assert!(got == expected, "vectored: {vectored}");
        }
    }

    #[test]
    fn make_room_reuses_an_allocation_once_its_pieces_are_gone() {
        let (mut buf, mut spares) = (BytesMut::new(), VecDeque::new());
        make_room(&mut buf, &mut spares, 1024);
        buf.extend_from_slice(&[1; 1024]);
        // A record leaves as a slice; 24 bytes of the next stay behind.
        let first = buf.split_to(1000).freeze();
        let first_allocation = first.as_ptr();
        make_room(&mut buf, &mut spares, 1024);
        assert_ne!(buf.as_ptr(), first_allocation, "the first record still uses it");
        assert_eq!(&buf[..], &[1; 24]);
        assert_eq!(spares.len(), 1);

        buf.extend_from_slice(&[2; 1000]);
        let second = buf.split_to(1000).freeze();
        drop(first);
        make_room(&mut buf, &mut spares, 1000);
        assert_eq!(buf.as_ptr(), first_allocation, "free again, so reused");
        assert_eq!(&buf[..], &[2; 24]);
        assert!(buf.capacity() >= 1024);
        drop(second);
        // Unshared, the buffer's own allocation is reclaimed in place.
        let own = buf.as_ptr();
        make_room(&mut buf, &mut spares, 1000);
        assert_eq!(buf.as_ptr(), own);
    }

    proptest::proptest! {
        #[test]
        fn any_close_payload_parses_or_is_refused(payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            match parse_close(&payload) {
                Ok(None) => proptest::prop_assert!(payload.len() >= 4 && payload[..4] == [0; 4]),
                Ok(Some(Error::PeerClosed { .. })) | Err(Error::BadClose) => {}
                Ok(Some(other)) | Err(other) => proptest::prop_assert!(false, "{other:?}"),
            }
        }
    }
}
