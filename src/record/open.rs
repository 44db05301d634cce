//! The receiving half of the record layer, sans-IO: bytes from the
//! transport in, opened records out.
//!
//! The transport reads straight into [`Opener::read_buf`]; records are
//! decoded from it, checked against the current maximum before anything is
//! reserved for them, and decrypted in place. Their plaintext leaves as a
//! slice of the read buffer, without another copy.

use bytes::BytesMut;

use super::{
    buffers::{Chunks, Origin},
    RecordKey, MAX_KEY_UPDATES_IN_A_ROW,
};
use crate::{
    error::{Error, Repr},
    frame::{Frame, FrameCodec, FrameError, FrameKind, Split},
};

/// Free space below which the read buffer grows before the next read: a
/// quarter of the allocation unit, at most 16 KiB (a bulk read's worth).
/// For messages (16 KiB units) that is 4 KiB, well below a chunk, so that
/// messages read one after the other share a chunk: when it must grow, the
/// last record read is often still held (the multiplexer's reader has not
/// taken it yet), so the chunk cannot be reclaimed (measured: at 16 KiB, a
/// fresh 16 KiB allocation for every read of a ping-pong).
const READ_MIN_SPACE_MAX: usize = 16 * 1024;
/// The read buffer's allocation unit adapts: it starts here, doubles each
/// time a read fills it (bulk data is waiting), and halves when the bursts
/// of reads are small ([`Opener::caught_up`]).
const READ_CHUNK_MIN: usize = 16 * 1024;
/// The largest read allocation: several records per read system call, and
/// the most one received piece of data can keep alive (see
/// [`mux::Builder`](crate::mux::Builder) on memory). The default of
/// [`RecordSizeLayer::max_read_buffer`](crate::RecordSizeLayer::max_read_buffer).
///
/// A record cut by the end of a buffer is copied into the next one, so
/// larger buffers copy less; but once the buffers were reused rather than
/// allocated afresh, 512 KiB ones ran eight streams of bulk data at 0.88×
/// the speed of 128 KiB ones, and one stream no faster (loopback,
/// interleaved rounds, BENCHMARKS.md): a reader taking 512 KiB per system
/// call drained the socket and slept about a thousand times per 512 MiB,
/// and the sender's thread paid for the wake-ups.
pub(crate) const READ_CHUNK_MAX: usize = 128 * 1024;
/// The most [`RecordSizeLayer::max_read_buffer`](crate::RecordSizeLayer::max_read_buffer)
/// may be set to.
pub(super) const READ_CHUNK_LIMIT: usize = 8 * 1024 * 1024;
/// A read buffer larger than this (one grown for bulk data) is let go when
/// the channel has read everything there is: an idle connection keeps at
/// most this much, and one that exchanges messages reuses it rather than
/// allocating afresh for each (measured: a 16 KiB allocation and its free
/// per message, each way).
const KEEP_IDLE_BUFFER: usize = READ_CHUNK_MIN;
/// Bursts of reads (what is read between two catch-ups) below this are a
/// connection exchanging messages rather than bulk data.
const SMALL_BURST: usize = 32 * 1024;

/// The read buffer an idle connection waits in, once its buffer was let
/// go ([`Opener::release_idle`]): enough for a small message's record
/// whole; the first bytes that arrive bring the usual allocation unit back
/// (a larger record takes one read more). Allocating the unit again just
/// to wait kept 16 KiB per idle connection, half of what one cost a server.
const IDLE_READ_BUFFER: usize = 1024;

/// Until the peer has proven its identity, the largest record payload
/// accepted: its identity proof (96 bytes and a tag) or a close with its
/// reason (at most 260 bytes and a tag), with room to spare. A header
/// declaring more is refused before anything is reserved for it, so that
/// four bytes from an unauthenticated peer cannot make us reserve the
/// 64 KiB the record size allows.
pub(super) const PRE_AUTH_RECORD_MAX: usize = 512;
/// Until then, too, read allocations are at most this large (a Setup of
/// the default maximum size fits in one): a pending handshake holds a few
/// KiB of buffer, and a peer that fills every read cannot grow it.
pub(super) const PRE_AUTH_READ_CHUNK: usize = 4 * 1024;

/// How the room for the next read is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// The allocation unit, as reads say ([`Opener::read_buf`]).
    Unit,
    /// Idle, the buffer let go: a small one to wait in.
    Idle,
}

/// Opens records: the receiving half of a channel.
#[derive(Debug)]
pub(crate) struct Opener {
    codec: FrameCodec,
    chunks: Chunks,
    /// The current read allocation unit (see [`READ_CHUNK_MAX`]).
    read_chunk: usize,
    /// How far it may grow: [`PRE_AUTH_READ_CHUNK`] until the peer is
    /// authenticated, `read_chunk_limit` after.
    read_chunk_max: usize,
    /// The largest read allocation once the peer is authenticated
    /// ([`READ_CHUNK_MAX`] unless set).
    read_chunk_limit: usize,
    authenticated: bool,
    /// The largest frame payload once the peer is authenticated.
    max_payload: usize,
    /// Bytes the frame begun in the buffer still needs (its declared
    /// length was checked).
    missing: usize,
    /// Bytes read since the reader last caught up.
    burst: usize,
    /// How the next read's room is sized.
    room: Room,
    /// The largest recent burst, halving with each burst after it.
    burst_peak: usize,
    key: Option<RecordKey>,
    /// Whether the peer may update its key (version 2).
    updates: bool,
    pub(super) key_updates: u64,
    /// Key updates since the last data record, and since the reader last
    /// counted them against its budget ([`Opener::take_key_updates`]).
    updates_in_a_row: u32,
    updates_uncounted: u32,
    /// The largest record plaintext accepted.
    max_plaintext: usize,
    pub(super) records: u64,
    pub(super) bytes: u64,
}

impl Opener {
    /// An opener over `buf` (bytes already read), accepting frames of at
    /// most `max_payload` bytes until [`Opener::set_limits`].
    pub(super) fn new(buf: BytesMut, max_payload: usize) -> Self {
        Self {
            codec: FrameCodec::new(max_payload),
            chunks: Chunks::with(buf),
            read_chunk: PRE_AUTH_READ_CHUNK,
            read_chunk_max: PRE_AUTH_READ_CHUNK,
            read_chunk_limit: READ_CHUNK_MAX,
            authenticated: false,
            max_payload,
            missing: 0,
            burst: 0,
            room: Room::Unit,
            burst_peak: 0,
            key: None,
            updates: false,
            key_updates: 0,
            updates_in_a_row: 0,
            updates_uncounted: 0,
            max_plaintext: max_payload,
            records: 0,
            bytes: 0,
        }
    }

    /// From now on, records of at most `max_plaintext` bytes, plus the
    /// suite's `tag_len`.
    pub(super) fn set_limits(&mut self, max_plaintext: usize, tag_len: usize) {
        self.max_payload = max_plaintext + tag_len;
        self.codec.set_max_payload(self.max_payload);
        self.max_plaintext = max_plaintext;
    }

    /// Until [`Opener::authenticated`]: records of at most
    /// [`PRE_AUTH_RECORD_MAX`] bytes (and the small read allocations).
    pub(super) fn hold_until_authenticated(&mut self) {
        self.codec
            .set_max_payload(self.max_payload.min(PRE_AUTH_RECORD_MAX));
    }

    /// The peer is authenticated (or nobody will be): records up to the
    /// limits, and read allocations that grow with the traffic.
    pub(super) fn authenticated(&mut self) {
        self.codec.set_max_payload(self.max_payload);
        self.authenticated = true;
        self.read_chunk_max = self.read_chunk_limit;
        self.read_chunk = self.read_chunk.max(READ_CHUNK_MIN).min(self.read_chunk_max);
    }

    /// Read allocations of at most `max` bytes (clamped to
    /// [`READ_CHUNK_MIN`]..=[`READ_CHUNK_LIMIT`]) once the peer is
    /// authenticated.
    pub(super) fn set_read_chunk_limit(&mut self, max: usize) {
        self.read_chunk_limit = max.clamp(READ_CHUNK_MIN, READ_CHUNK_LIMIT);
        if self.authenticated {
            self.read_chunk_max = self.read_chunk_limit;
            self.read_chunk = self.read_chunk.min(self.read_chunk_max);
        }
    }

    pub(super) fn set_key(&mut self, key: RecordKey) {
        self.key = Some(key);
    }

    /// From now on, the peer may update its key (key update agreed).
    pub(super) fn enable_key_update(&mut self) {
        self.updates = true;
    }

    /// A KeyUpdate record opened: what follows opens under the next key.
    fn update_key(&mut self, payload: &[u8]) -> Result<(), Error> {
        let unexpected = |expected| Repr::UnexpectedFrame {
            expected,
            got: FrameKind::KeyUpdate,
        };
        if !payload.is_empty() {
            return Err(unexpected("an empty key update").into());
        }
        let next = match (self.updates, self.key.as_mut()) {
            (true, Some(key)) => key.next(),
            _ => None,
        };
        let next = next.ok_or(unexpected("a data or close record (key update was not agreed)"))?;
        self.updates_in_a_row += 1;
        if self.updates_in_a_row > MAX_KEY_UPDATES_IN_A_ROW {
            return Err(Repr::KeyUpdateFlood(MAX_KEY_UPDATES_IN_A_ROW).into());
        }
        self.key = Some(next);
        self.key_updates += 1;
        self.updates_uncounted += 1;
        Ok(())
    }

    /// Key updates opened since the last call: each costs a key
    /// derivation, which a reader's budget counts as it counts bytes.
    pub(super) fn take_key_updates(&mut self) -> u32 {
        std::mem::take(&mut self.updates_uncounted)
    }

    /// The next whole frame that has arrived, unopened.
    pub(super) fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        match self.codec.split_frame(self.chunks.buf())? {
            Split::Frame(frame) => {
                self.missing = 0;
                Ok(Some(frame))
            }
            Split::Missing { bytes, .. } => {
                self.missing = bytes;
                Ok(None)
            }
        }
    }

    /// The allocation the frames decoded now live in.
    pub(super) fn origin(&self) -> Origin {
        self.chunks.origin()
    }

    /// Opens a frame into its kind and plaintext.
    pub(super) fn open(&mut self, frame: Frame) -> Result<(FrameKind, BytesMut), Error> {
        let Frame {
            kind,
            header,
            mut payload,
        } = frame;
        if kind == FrameKind::Setup {
            return Err(Repr::UnexpectedFrame {
                expected: "a record",
                got: kind,
            }
            .into());
        }
        if let Some(key) = &mut self.key {
            let len = key.open(&header, &mut payload)?.len();
            payload.truncate(len);
        }
        if payload.len() > self.max_plaintext {
            return Err(FrameError::TooLarge {
                len: payload.len(),
                max: self.max_plaintext,
            }
            .into());
        }
        self.records += 1;
        if kind == FrameKind::KeyUpdate {
            self.update_key(&payload)?;
        } else {
            self.updates_in_a_row = 0;
        }
        Ok((kind, payload))
    }

    /// The buffer to read into, with room for at least one more read.
    pub(super) fn read_buf(&mut self) -> &mut BytesMut {
        if self.room == Room::Idle && self.chunks.size() == 0 {
            self.chunks.make_room(IDLE_READ_BUFFER);
            return self.chunks.buf();
        }
        let buf = self.chunks.get();
        let space = buf.capacity() - buf.len();
        // Room for the rest of a large record begun (more than half an
        // allocation unit) is enough: growing for the reads after it would
        // copy the record into a larger allocation, and a peer that sends
        // all of a record but its last byte would make us hold twice what
        // it sent. (Once the record is out, the next read finds the room;
        // a smaller record is cheap to move, and bulk data keeps its
        // large reads.)
        let wants_room = if self.missing > 0 && buf.len() > self.read_chunk / 2 {
            space < self.missing
        } else {
            space < (self.read_chunk / 4).min(READ_MIN_SPACE_MAX) || space < self.missing
        };
        if wants_room {
            // One allocation unit in all, the part of a record read so far
            // included (unless that is more than half of it), and room for
            // the rest of that record.
            let additional = if buf.len() <= self.read_chunk / 2 {
                self.read_chunk - buf.len()
            } else {
                self.read_chunk
            };
            self.chunks.make_room(additional.max(self.missing));
        }
        self.chunks.buf()
    }

    /// A read of `n` bytes into `space` bytes of room: a read that fills
    /// its room doubles the next allocations (bulk data is waiting).
    pub(super) fn filled(&mut self, n: usize, space: usize) {
        // (Filling the small buffer an idle connection waits in says
        // nothing of bulk data.)
        let waited_idle = self.room == Room::Idle;
        if n > 0 {
            self.room = Room::Unit;
        }
        self.burst += n;
        if n == space && !waited_idle {
            self.read_chunk = (self.read_chunk * 2).min(self.read_chunk_max);
            // The buffer, not the data, ended this read: not a small burst.
            self.burst = self.burst.max(SMALL_BURST);
        }
    }

    /// Whether part of a record has arrived and the rest has not.
    pub(super) fn partial_record(&self) -> bool {
        !self.chunks.get().is_empty()
    }

    /// Nothing more to read for now: the reader caught up, perhaps idle.
    ///
    /// What was read since it last caught up is a burst. While bursts are
    /// large, the buffer and its spares stay: a bulk reader catches up
    /// between the sender's writes, every 50–300 KiB on loopback
    /// (measured), and each fresh allocation is memory the kernel must
    /// fault in again (a page fault per 4 KiB received). Once the largest
    /// recent burst, halved at each burst after it, is under
    /// [`SMALL_BURST`] (a connection exchanging messages), the allocation
    /// unit halves at each catch-up; the spares go once it is back at its
    /// minimum, and a buffer larger than four units (or than
    /// [`KEEP_IDLE_BUFFER`] at the minimum) goes, so that the next read
    /// allocates afresh.
    pub(super) fn caught_up(&mut self) {
        if self.burst > 0 {
            self.burst_peak = self.burst.max(self.burst_peak / 2);
            self.burst = 0;
            if self.burst_peak < SMALL_BURST {
                self.read_chunk = (self.read_chunk / 2).max(READ_CHUNK_MIN.min(self.read_chunk_max));
            }
        }
        if self.chunks.get().is_empty() {
            let wanted = if self.read_chunk <= KEEP_IDLE_BUFFER {
                KEEP_IDLE_BUFFER
            } else {
                4 * self.read_chunk
            };
            if self.chunks.size() > wanted {
                self.chunks.release();
            } else if self.read_chunk <= KEEP_IDLE_BUFFER {
                self.chunks.drop_spares();
            }
        }
    }

    /// The connection went idle: lets the read buffer go, unless part of a
    /// record waits in it.
    pub(super) fn release_idle(&mut self) {
        if self.chunks.get().is_empty() {
            self.chunks.release();
            self.room = Room::Idle;
        }
    }

    /// The transport ended: cleanly between frames, or inside one.
    pub(super) fn end(&self) -> Result<(), FrameError> {
        match self.chunks.get().len() {
            0 => Ok(()),
            n => Err(FrameError::Incomplete(n)),
        }
    }

    /// Bytes of buffer held (capacity, spares included).
    pub(super) fn capacity(&self) -> usize {
        self.chunks.capacity()
    }
}

#[cfg(test)]
#[path = "tests/open.rs"]
mod tests;

#[cfg(test)]
#[path = "tests/read_buffers.rs"]
mod read_buffer_tests;
