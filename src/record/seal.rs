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
            self.chunks.buf().put_slice(&data[written..written + n]);
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
mod tests {
    use super::*;

    /// Writes everything sealed so far, as the transport would.
    fn drain(sealer: &mut Sealer) -> Vec<u8> {
        let wire: Vec<u8> = sealer.segments().iter().flat_map(|s| s.to_vec()).collect();
        sealer.advance(wire.len());
        wire
    }

    /// The payloads of the plaintext records in `wire`.
    fn records(mut wire: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while !wire.is_empty() {
            let len = u32::from_be_bytes([0, wire[1], wire[2], wire[3]]) as usize;
            out.push(wire[HEADER_LEN..HEADER_LEN + len].to_vec());
            wire = &wire[HEADER_LEN + len..];
        }
        out
    }

    #[test]
    fn messages_share_one_small_allocation_under_large_records() {
        let t = Instant::now();
        let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
        sealer.write(&[1; 64], t).unwrap();
        let first = sealer.chunks.origin();
        assert_eq!(
            first.size, SMALL_WRITE_CHUNK,
            "a message does not reserve a 64 KiB record"
        );
        for i in 0..1000 {
            sealer.write(&[i as u8; 64], t).unwrap();
            sealer.seal_open_record(t).unwrap();
            // (The first joins the record the write before it opened.)
            assert_eq!(records(&drain(&mut sealer)).len(), 1);
            sealer.release_if_idle();
            assert_eq!(sealer.chunks.origin(), first, "message {i} allocated");
        }
    }

    #[test]
    fn a_writer_of_bursts_reuses_its_buffers_and_shrinks_once_they_are_small() {
        // Batches of streamed replies: about 16 KiB written and flushed at a
        // time, everything written out in between.
        let t = Instant::now();
        let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
        let batch = vec![7; 16 * 1024 + 500];
        let mut origins = Vec::new();
        for _ in 0..200 {
            sealer.write(&batch, t).unwrap();
            sealer.seal_open_record(t).unwrap();
            origins.push(sealer.chunks.origin().buffer);
            assert_eq!(records(&drain(&mut sealer)).concat(), batch);
            sealer.release_if_idle();
        }
        origins.dedup();
        assert!(
            origins.len() <= 4,
            "{} allocations for 200 batches",
            origins.len()
        );
        // Messages after that: after a few, the buffer is a small one again.
        for i in 0..8u8 {
            sealer.write(&[i; 64], t).unwrap();
            sealer.seal_open_record(t).unwrap();
            drain(&mut sealer);
            sealer.release_if_idle();
        }
        assert_eq!(sealer.capacity(), SMALL_WRITE_CHUNK);
    }

    #[test]
    fn a_bulk_writer_reuses_the_buffers_each_burst_fills() {
        // A connection's driver seals up to the high-water mark, writes it
        // all out, and seals more: each burst fills two or three send
        // buffers, and every one of them is reused. (Keeping one spare
        // allocated afresh for every burst: 3,500 allocations per GiB
        // sent, measured.)
        let t = Instant::now();
        let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
        sealer.set_key(RecordKey::new(crate::CipherSuite::Aes256Gcm, &[3; 32], [0; 24]));
        let data = vec![5; 1024 * 1024];
        let mut origins = Vec::new();
        for _ in 0..100 {
            let taken = sealer.write(&data, t).unwrap();
            assert!(taken >= WRITE_HIGH_WATER - 64 * 1024, "{taken}");
            sealer.seal_open_record(t).unwrap();
            origins.push(sealer.chunks.origin().buffer);
            drain(&mut sealer);
            sealer.release_if_idle();
        }
        // Allocations are numbered in order: the first burst's first (a
        // record's worth), then the four buffers a burst fills.
        let allocations = origins.iter().max().unwrap();
        assert!(*allocations <= 5, "{allocations} allocations for 100 bursts");
    }

    #[test]
    fn small_writes_join_one_record_and_a_record_ends_where_the_buffer_does() {
        let t = Instant::now();
        let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
        let mut sent = Vec::new();
        for i in 0..10u8 {
            sealer.write(&[i; 100], t).unwrap();
            sent.extend_from_slice(&[i; 100]);
        }
        // 40 KiB more before the flush: past the small buffer's end.
        let big: Vec<u8> = (0..40 * 1024).map(|i| i as u8).collect();
        assert_eq!(sealer.write(&big, t).unwrap(), big.len());
        sent.extend_from_slice(&big);
        sealer.seal_open_record(t).unwrap();
        let records = records(&drain(&mut sealer));
        assert!(records.len() >= 2, "{}", records.len());
        assert!(records[0].len() > 1000, "the small writes share a record");
        assert!(records.iter().all(|r| r.len() <= 64 * 1024));
        assert_eq!(records.concat(), sent);
    }

    #[test]
    fn a_frame_written_in_pieces_after_a_flush_fills_whole_records() {
        let t = Instant::now();
        let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
        let data: Vec<u8> = (0..8 * 120 * 1024).map(|i| i as u8).collect();
        let mut sent = Vec::new();
        // Frames as a stream writes them through: a small header, then
        // its data, then a flush that writes everything out (so the next
        // frame starts in an empty buffer).
        for frame in data.chunks(120 * 1024) {
            sealer.reserve(8 + frame.len(), t);
            sealer.write(&[0xAA; 8], t).unwrap();
            let mut taken = 0;
            while taken < frame.len() {
                taken += sealer.write(&frame[taken..], t).unwrap();
                if sealer.is_full() {
                    sent.push(drain(&mut sealer));
                }
            }
            sealer.seal_open_record(t).unwrap();
            sent.push(drain(&mut sealer));
            sealer.release_if_idle();
        }
        let sizes: Vec<usize> = records(&sent.concat()).iter().map(Vec::len).collect();
        // Two records per frame: 64 KiB, then the rest of it.
        assert_eq!(sizes.len(), 16, "{sizes:?}");
        assert!(sizes.iter().step_by(2).all(|&n| n == 64 * 1024), "{sizes:?}");
    }

    /// A key of 100 records: without key update it runs out; with it,
    /// a thousand records go, under ten keys and more.
    #[test]
    fn with_key_update_a_key_never_runs_out() {
        use crate::{handshake::CipherSuite, record::KeySchedule};
        let suite = CipherSuite::ChaCha20Poly1305;
        let key = || {
            RecordKey::new(suite, &[1; 32], [2; 24])
                .with_limits(100, u64::MAX)
                .with_schedule(KeySchedule::new(suite, zeroize::Zeroizing::new([3; 32])))
        };
        let now = Instant::now();
        let send_1000 = |sealer: &mut Sealer| {
            for n in 0..1000u32 {
                sealer.write(&n.to_be_bytes(), now)?;
                sealer.seal_open_record(now)?;
                drain(sealer);
            }
            Ok::<_, Error>(())
        };
        let mut without = Sealer::new(RecordSizer::fixed(1024));
        without.set_key(key());
        assert!(matches!(send_1000(&mut without), Err(Error::KeyExhausted(_))));
        let mut with = Sealer::new(RecordSizer::fixed(1024));
        with.set_key(key());
        with.enable_key_update(UpdatePolicy::default());
        send_1000(&mut with).unwrap();
        assert!(
            with.key_updates >= 19,
            "one update per 50 records: {}",
            with.key_updates
        );
    }
}
