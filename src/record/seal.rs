//! The sending half of the record layer, sans-IO: plaintext and `now` in,
//! sealed records out, ready for the transport.
//!
//! Writes are copied once into the send buffer, where the open record
//! collects them until it reaches the size the record policy asks for (or
//! the writer flushes); then it is sealed in place. Sealed bytes move to a
//! queue of segments for vectored writes, so no byte is moved after it is
//! sealed, whatever the transport takes.

use std::{collections::VecDeque, time::Instant};

use bytes::{Buf, BufMut, Bytes};

use super::{buffers::Chunks, RecordKey, RecordSizer, UpdatePolicy, MAX_TAG_LEN};
use crate::{
    error::Error,
    frame::{FrameKind, HEADER_LEN},
};

/// Sealed bytes buffered before a write waits for the transport: enough for
/// several maximum records per write system call, and the bound on what a
/// slow peer can make us hold.
pub(super) const WRITE_HIGH_WATER: usize = 256 * 1024;
/// Allocation unit of the send buffer while sealed bytes wait to be
/// written (bulk): several records per chunk.
const WRITE_CHUNK: usize = 128 * 1024;
/// Allocation unit of the send buffer when nothing waits (a message, a
/// reply): small enough to come from the allocator's free lists. A 128 KiB
/// chunk made and freed per message made glibc grow and trim the heap with
/// a `brk` system call each time (measured: one per round trip).
const SMALL_WRITE_CHUNK: usize = 16 * 1024;
/// Room reserved for a new record beyond the data at hand (up to the record
/// size the policy asks for): small writes that follow before a flush join
/// the same record while the buffer has room. Reserving a whole maximum
/// record for each message cost an allocation of 64 KiB per message
/// (measured, with dynamic records grown to their maximum).
const RECORD_RESERVE: usize = 4 * 1024;

/// Seals records: the sending half of a channel.
#[derive(Debug)]
pub(crate) struct Sealer {
    /// Records being built: sealed ones, then possibly the open one.
    chunks: Chunks,
    /// Sealed bytes handed over for writing, oldest first.
    queued: VecDeque<Bytes>,
    queued_len: usize,
    /// Start (header offset in the buffer) of the data record being filled.
    open_record: Option<usize>,
    open_target: usize,
    key: Option<RecordKey>,
    /// When to update the key, once key update was agreed (version 2).
    updates: Option<UpdatePolicy>,
    pub(super) key_updates: u64,
    sizer: RecordSizer,
    pub(super) records: u64,
    pub(super) bytes: u64,
}

impl Sealer {
    /// A sealer that sends records of `sizer`'s sizes, in the clear until a
    /// key is installed.
    pub(super) fn new(sizer: RecordSizer) -> Self {
        Self {
            chunks: Chunks::default(),
            queued: VecDeque::new(),
            queued_len: 0,
            open_record: None,
            open_target: 0,
            key: None,
            updates: None,
            key_updates: 0,
            sizer,
            records: 0,
            bytes: 0,
        }
    }

    pub(super) fn set_key(&mut self, key: RecordKey) {
        self.key = Some(key);
    }

    /// From now on, update the key as `policy` says (key update agreed).
    pub(super) fn enable_key_update(&mut self, policy: UpdatePolicy) {
        self.updates = Some(policy);
    }

    /// After a data record: if the key is due for an update, a KeyUpdate
    /// record (sealed under it, so at the end of what it sealed), and the
    /// next key for what follows.
    fn update_key_if_due(&mut self) -> Result<(), Error> {
        let (Some(policy), Some(key)) = (self.updates, self.key.as_mut()) else {
            return Ok(());
        };
        if !policy.due(key) {
            return Ok(());
        }
        let Some(next) = key.next() else {
            return Ok(());
        };
        let header = FrameKind::KeyUpdate.header(MAX_TAG_LEN);
        let tag = key.seal(&header, &mut [])?;
        let buf = self.chunks.buf();
        buf.put_slice(&header);
        buf.put_slice(&tag);
        // The old key goes (its IV wiped), the schedule's old secret went.
        self.key = Some(next);
        self.records += 1;
        self.key_updates += 1;
        Ok(())
    }

    pub(super) fn set_sizer(&mut self, sizer: RecordSizer) {
        self.sizer = sizer;
    }

    /// Makes room for a record of `needed` bytes (no record may be open).
    /// Sealed bytes move to the write queue rather than being copied into a
    /// grown buffer.
    fn make_room(&mut self, needed: usize) {
        debug_assert!(self.open_record.is_none());
        let buf = self.chunks.get();
        if buf.capacity() - buf.len() >= needed {
            return;
        }
        let chunk = if buf.is_empty() && self.queued.is_empty() {
            SMALL_WRITE_CHUNK
        } else {
            WRITE_CHUNK
        };
        self.take_sealed();
        self.chunks.make_room(needed.max(chunk));
    }

    /// Moves what the buffer holds (all sealed) to the write queue.
    fn take_sealed(&mut self) {
        let buf = self.chunks.buf();
        if !buf.is_empty() {
            let sealed = buf.split().freeze();
            self.queued_len += sealed.len();
            self.queued.push_back(sealed);
        }
    }

    /// Writes the header for the record whose plaintext is
    /// `buf[start + HEADER_LEN..]` and seals it in place.
    fn seal_in_place(&mut self, start: usize, kind: FrameKind, len: usize) -> Result<(), Error> {
        let tag_len = if self.key.is_some() { MAX_TAG_LEN } else { 0 };
        let header = kind.header(len + tag_len);
        let buf = self.chunks.buf();
        buf[start..start + HEADER_LEN].copy_from_slice(&header);
        if let Some(key) = &mut self.key {
            // The close record may use the key's reserve, so a key that is
            // used up can still say so.
            let sealed = match kind {
                FrameKind::Close => key.seal_final(&header, &mut buf[start + HEADER_LEN..]),
                _ => key.seal(&header, &mut buf[start + HEADER_LEN..]),
            };
            match sealed {
                Ok(tag) => buf.put_slice(&tag),
                Err(err) => {
                    buf.truncate(start);
                    return Err(err);
                }
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Seals the open data record, if it holds anything.
    pub(super) fn seal_open_record(&mut self, now: Instant) -> Result<(), Error> {
        let Some(start) = self.open_record.take() else {
            return Ok(());
        };
        let len = self.chunks.get().len() - start - HEADER_LEN;
        if len == 0 {
            self.chunks.buf().truncate(start);
            return Ok(());
        }
        self.seal_in_place(start, FrameKind::Data, len)?;
        self.sizer.record_sent(len, now);
        self.update_key_if_due()
    }

    /// Drops the open record unsealed: unsealed plaintext must never reach
    /// the wire.
    pub(super) fn drop_open_record(&mut self) {
        if let Some(start) = self.open_record.take() {
            self.chunks.buf().truncate(start);
        }
    }

    /// Queues one whole record of `kind` (sealing any open data record
    /// first, so order is kept).
    pub(super) fn queue_record(
        &mut self,
        kind: FrameKind,
        payload: &[u8],
        now: Instant,
    ) -> Result<(), Error> {
        self.seal_open_record(now)?;
        self.make_room(HEADER_LEN + payload.len() + MAX_TAG_LEN);
        let start = self.chunks.get().len();
        let buf = self.chunks.buf();
        buf.put_slice(&[0; HEADER_LEN]);
        buf.put_slice(payload);
        self.seal_in_place(start, kind, payload.len())
    }

    /// Queues a frame that is ready for the wire as it is (a Setup, or a
    /// handshake record sealed by the handshake itself).
    pub(super) fn queue_frame(&mut self, frame: &[u8]) {
        debug_assert!(self.open_record.is_none());
        self.take_sealed();
        self.queued_len += frame.len();
        self.queued.push_back(Bytes::copy_from_slice(frame));
    }

    /// Whether sealed bytes are waiting past the high-water mark: write
    /// them out before taking more.
    pub(super) fn is_full(&self) -> bool {
        self.open_record.is_none() && self.unsent() >= WRITE_HIGH_WATER
    }

    /// The next writes bring `len` bytes (a frame's header, then its
    /// data): the record they open has room for all of them, up to its
    /// target size, so that a small first piece does not end the record
    /// at the buffer's end.
    pub(super) fn reserve(&mut self, len: usize, now: Instant) {
        if self.open_record.is_none() {
            self.open_record_for(len, now);
        }
    }

    /// Opens a data record with room for `len` bytes (at least
    /// [`RECORD_RESERVE`], at most the record's target size); returns
    /// where it starts.
    fn open_record_for(&mut self, len: usize, now: Instant) -> usize {
        self.open_target = self.sizer.next_size(now);
        let wanted = len.max(RECORD_RESERVE);
        self.make_room(HEADER_LEN + self.open_target.min(wanted) + MAX_TAG_LEN);
        let start = self.chunks.get().len();
        self.chunks.buf().put_slice(&[0; HEADER_LEN]);
        self.open_record = Some(start);
        start
    }

    /// Copies `data` into records, sealing each one that fills up. Stops
    /// early at the high-water mark; returns how much it took.
    pub(super) fn write(&mut self, data: &[u8], now: Instant) -> Result<usize, Error> {
        let mut written = 0;
        while written < data.len() {
            let start = match self.open_record {
                Some(start) => start,
                None => self.open_record_for(data.len() - written, now),
            };
            // The record ends at its target size, or where the buffer ends
            // (then it is sealed smaller): a sealed record never moves.
            let buf = self.chunks.get();
            let in_record = self.open_target - (buf.len() - start - HEADER_LEN);
            let in_buffer = (buf.capacity() - buf.len()).saturating_sub(MAX_TAG_LEN);
            let room = in_record.min(in_buffer);
            let n = room.min(data.len() - written);
            let capacity = buf.capacity();
            self.chunks.buf().put_slice(&data[written..written + n]);
            // Within the room the buffer has: it never grows (which would
            // copy it) under a record being filled.
            debug_assert_eq!(
                self.chunks.get().capacity(),
                capacity,
                "the buffer grew under a record"
            );
            written += n;
            if n == room {
                self.seal_open_record(now)?;
                if self.unsent() >= WRITE_HIGH_WATER {
                    break;
                }
            }
        }
        self.bytes += written as u64;
        Ok(written)
    }

    /// Sealed bytes not yet taken by the transport (and the open record).
    pub(super) fn unsent(&self) -> usize {
        self.queued_len + self.chunks.get().len()
    }

    /// The sealed segments to write, oldest first (the open record must be
    /// sealed or dropped first).
    pub(super) fn segments(&mut self) -> &VecDeque<Bytes> {
        debug_assert!(self.open_record.is_none(), "the open record is not sealed");
        self.take_sealed();
        &self.queued
    }

    /// The transport took `n` bytes of the segments.
    pub(super) fn advance(&mut self, mut n: usize) {
        self.queued_len -= n;
        while n > 0 {
            let front = self.queued.front_mut().expect("written bytes were queued");
            if front.len() <= n {
                n -= front.len();
                self.queued.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }

    /// Everything was written: a channel sending messages keeps no send
    /// buffer larger than a small one, which the next message reuses; one
    /// sending bulk keeps its buffers for the next burst
    /// ([`Chunks::settle`]).
    pub(super) fn release_if_idle(&mut self) {
        if self.open_record.is_none() && self.unsent() == 0 {
            self.chunks.settle(self.bytes, SMALL_WRITE_CHUNK);
        }
    }

    /// The connection went idle: lets the send buffer go, unless something
    /// waits to be written.
    pub(super) fn release_idle(&mut self) {
        if self.open_record.is_none() && self.unsent() == 0 {
            self.chunks.release();
        }
    }

    /// Bytes of buffer held (capacity, queued segments included).
    pub(super) fn capacity(&self) -> usize {
        self.chunks.capacity() + self.queued_len
    }
}

#[cfg(test)]
#[path = "tests/seal.rs"]
mod tests;
