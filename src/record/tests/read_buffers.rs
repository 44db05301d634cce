//! The opener's read buffers: how much each read has room for, and what
//! is kept between reads, through bursts and idle.

use super::*;
use crate::frame::HEADER_LEN;

#[test]
fn messages_read_one_after_another_share_a_chunk() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    let mut held = None;
    let mut origins = Vec::new();
    for i in 0..100u8 {
        let buf = opener.read_buf();
        let space = buf.capacity() - buf.len();
        buf.extend_from_slice(&FrameKind::Data.header(90));
        buf.extend_from_slice(&[i; 90]);
        opener.filled(94, space);
        let frame = opener.next_frame().unwrap().unwrap();
        origins.push(opener.origin().buffer);
        // The multiplexer still holds the last record at the next read.
        held = Some(opener.open(frame).unwrap().1.freeze());
        opener.caught_up();
    }
    assert_eq!(held.unwrap()[..], [99; 90]);
    origins.dedup();
    assert_eq!(origins.len(), 1, "a fresh allocation per read: {origins:?}");
}

/// Reads `n` bytes (at most the room there is; `usize::MAX` fills
/// it), takes them (and drops them), and waits for more.
fn read_burst(opener: &mut Opener, n: usize) {
    let buf = opener.read_buf();
    let space = buf.capacity() - buf.len();
    let n = n.min(space);
    buf.extend_from_slice(&vec![0; n]);
    opener.filled(n, space);
    drop(opener.chunks.buf().split());
    opener.caught_up();
}

#[test]
fn a_bulk_read_buffer_stays_through_small_bursts_and_goes_once_messages_follow() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    for _ in 0..10 {
        read_burst(&mut opener, usize::MAX);
    }
    let grown = opener.capacity();
    assert!(grown >= READ_CHUNK_MAX, "grown for bulk: {grown}");
    // A bulk reader on loopback catches up every 50-300 KiB, and now
    // and then after a few KiB: the same buffer serves throughout.
    let at = opener.origin().buffer;
    for burst in [usize::MAX, 20_000, 130_000, 10_000, 3_000, 200_000, 60_000].repeat(20) {
        read_burst(&mut opener, burst);
        assert_eq!(opener.origin().buffer, at, "kept, not allocated afresh");
    }
    // Messages: after a dozen, the grown buffer goes (a message
    // connection holds no more than before); and one bulk read among
    // them does not keep a buffer alive.
    for bulk_read_first in [false, true] {
        if bulk_read_first {
            read_burst(&mut opener, usize::MAX);
        }
        for _ in 0..12 {
            read_burst(&mut opener, 100);
        }
        assert!(
            opener.capacity() <= KEEP_IDLE_BUFFER,
            "{} held",
            opener.capacity()
        );
    }
}

#[test]
fn bursts_of_32_kib_are_bulk_and_smaller_ones_messages() {
    for (burst, bulk) in [(32 * 1024, true), (32 * 1024 - 1, false)] {
        let mut opener = Opener::new(BytesMut::new(), 1 << 16);
        opener.authenticated();
        for _ in 0..10 {
            read_burst(&mut opener, usize::MAX);
        }
        let unit = opener.read_chunk;
        for _ in 0..8 {
            read_burst(&mut opener, burst);
        }
        assert_eq!(
            opener.read_chunk == unit,
            bulk,
            "bursts of {burst}: unit {unit} -> {}",
            opener.read_chunk
        );
    }
}

#[test]
fn a_record_cut_by_the_buffers_end_is_moved_by_the_opener_not_grown_by_the_decoder() {
    // The decoder reserving room for the rest of a record would grow
    // the buffer past the opener's set of allocations: a fresh
    // allocation for every record cut by a buffer's end.
    let mut opener = Opener::new(BytesMut::new(), 1 << 17);
    opener.authenticated();
    let buf = opener.read_buf();
    let space = buf.capacity() - buf.len();
    buf.extend_from_slice(&FrameKind::Data.header(60_000));
    buf.extend_from_slice(&[1; 100]);
    opener.filled(HEADER_LEN + 100, space);
    let capacity = opener.chunks.get().capacity();
    assert!(opener.next_frame().unwrap().is_none());
    assert_eq!(opener.chunks.get().capacity(), capacity, "nothing reserved");
    // The next read has room for the whole record.
    let buf = opener.read_buf();
    assert!(buf.capacity() - buf.len() >= 60_000 - 100);
    assert_eq!(buf.len(), HEADER_LEN + 100, "what was read moved along");
}

#[test]
fn a_read_buffer_limit_holds_however_full_the_reads() {
    for set_before in [true, false] {
        let mut opener = Opener::new(BytesMut::new(), 4096);
        opener.set_limits(64 * 1024, 16);
        if set_before {
            opener.set_read_chunk_limit(32 * 1024);
            opener.authenticated();
        } else {
            opener.authenticated();
            opener.set_read_chunk_limit(32 * 1024);
        }
        for _ in 0..10 {
            let buf = opener.read_buf();
            let space = buf.capacity() - buf.len();
            buf.extend_from_slice(&vec![0; space]);
            opener.filled(space, space);
            opener.chunks.buf().clear();
        }
        assert_eq!(opener.read_chunk, 32 * 1024);
        assert!(opener.capacity() <= 4 * 32 * 1024, "{}", opener.capacity());
    }
    // Clamped both ways, to what `RecordSizeLayer::max_read_buffer` says:
    // 16 KiB..=8 MiB.
    let mut opener = Opener::new(BytesMut::new(), 4096);
    opener.set_read_chunk_limit(1);
    assert_eq!(opener.read_chunk_limit, 16 * 1024);
    opener.set_read_chunk_limit(usize::MAX);
    assert_eq!(opener.read_chunk_limit, 8 * 1024 * 1024);
}

#[test]
fn a_large_read_buffer_takes_another_read_until_16_kib_are_left() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    opener.read_chunk = 128 * 1024;
    let capacity = opener.read_buf().capacity();
    assert!(capacity >= 128 * 1024, "{capacity}");
    // 16 KiB of room: read into it.
    let buf = opener.read_buf();
    buf.resize(capacity - 16 * 1024, 0);
    assert_eq!(opener.read_buf().capacity(), capacity);
    // A byte less: a fresh chunk for the next read.
    let buf = opener.read_buf();
    buf.resize(capacity - 16 * 1024 + 1, 0);
    let next = opener.read_buf();
    assert!(
        next.capacity() - next.len() >= 128 * 1024 - 16 * 1024,
        "{}",
        next.capacity()
    );
}

#[test]
fn a_record_read_in_part_moves_into_one_allocation_unit_or_a_whole_unit_more() {
    // (16 KiB units: a buffer grows when under 4 KiB of room is left.)
    let grown = |consumed: usize, part: usize| {
        let mut opener = Opener::new(BytesMut::new(), 1 << 16);
        opener.authenticated();
        assert_eq!(opener.read_chunk, 16 * 1024);
        let buf = opener.read_buf();
        assert_eq!(buf.capacity(), 16 * 1024);
        buf.extend_from_slice(&vec![0; consumed]);
        drop(buf.split());
        buf.extend_from_slice(&vec![0; part]);
        let buf = opener.read_buf();
        assert_eq!(buf.len(), part);
        buf.capacity()
    };
    // A part of at most half a unit: one unit in all (here the same
    // allocation, its records gone).
    assert_eq!(grown(12_800, 2_048), 16 * 1024);
    // More than half: a whole unit more than the part.
    assert_eq!(grown(4_600, 10_240), 10_240 + 16 * 1024);
}

#[test]
fn the_largest_recent_burst_halves_at_each_burst_after_it() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    for _ in 0..10 {
        read_burst(&mut opener, usize::MAX);
    }
    let (unit, peak) = (opener.read_chunk, opener.burst_peak);
    assert!(peak >= 4 * SMALL_BURST, "{peak}");
    // Two small bursts: the peak, a quarter of what it was, is still a
    // bulk reader's, and the allocation unit stays.
    read_burst(&mut opener, 3_000);
    read_burst(&mut opener, 3_000);
    assert_eq!(opener.burst_peak, peak / 4);
    assert_eq!(opener.read_chunk, unit);
    // A catch-up with nothing read changes nothing.
    opener.caught_up();
    assert_eq!(opener.burst_peak, peak / 4);
}

#[test]
fn an_idle_connection_lets_its_read_buffer_go_unless_a_record_is_partly_read() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    opener.read_buf().extend_from_slice(&FrameKind::Data.header(10));
    opener.release_idle();
    assert!(opener.capacity() > 0, "a record begun keeps its buffer");
    opener.read_buf().extend_from_slice(&[5; 10]);
    opener.next_frame().unwrap().unwrap();
    opener.release_idle();
    assert_eq!(opener.capacity(), 0);
}

#[test]
fn an_idle_connection_waits_for_its_next_record_in_a_small_buffer() {
    // Let go while idle, the buffer is not allocated whole again just to
    // wait for the next record: the read that waits gets a small one (an
    // idle connection's read buffer was most of what it cost a server),
    // and the first bytes that arrive bring the usual unit back.
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    let record = [&FrameKind::Data.header(10)[..], &[5; 10]].concat();
    opener.read_buf().extend_from_slice(&record);
    opener.filled(record.len(), 1 << 14);
    opener.next_frame().unwrap().unwrap();
    opener.caught_up();
    opener.release_idle();
    assert_eq!(opener.capacity(), 0);
    let waiting = opener.read_buf().capacity();
    assert!(waiting > 0 && waiting <= 1024, "waits in {waiting} bytes");
    // A large record arrives: its first read fills the small buffer, and
    // the next read has the usual room.
    let large = [&FrameKind::Data.header(20_000)[..], &[7; 20_000]].concat();
    let first = waiting.min(large.len());
    opener.read_buf().extend_from_slice(&large[..first]);
    opener.filled(first, waiting);
    assert!(opener.next_frame().unwrap().is_none());
    let buf = opener.read_buf();
    assert!(
        buf.capacity() - buf.len() >= large.len() - first,
        "room for the rest"
    );
    buf.extend_from_slice(&large[first..]);
    let frame = opener.next_frame().unwrap().unwrap();
    assert_eq!(opener.open(frame).unwrap().1.len(), 20_000);
}

#[test]
fn a_bulk_reader_keeps_its_spare_buffers_and_a_message_reader_lets_them_go() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    // Reads that fill the buffer while the reader still holds what it
    // read: each next read needs a fresh buffer, and the held ones become
    // spares once let go.
    let mut held = Vec::new();
    for _ in 0..10 {
        let buf = opener.read_buf();
        let space = buf.capacity() - buf.len();
        buf.extend_from_slice(&vec![0; space]);
        opener.filled(space, space);
        held.push(opener.chunks.buf().split().freeze());
        opener.caught_up();
    }
    drop(held);
    opener.caught_up();
    assert!(opener.capacity() > opener.chunks.size(), "bulk: the spares stay");
    for _ in 0..20 {
        read_burst(&mut opener, 100);
    }
    assert_eq!(opener.capacity(), opener.chunks.size(), "messages: no spares");
}

#[test]
fn a_large_record_begun_with_room_for_its_rest_is_not_moved_for_later_reads() {
    // A peer that sends all of a record but its last byte must not make
    // the buffer move the record into a larger allocation (holding twice
    // what it sent): room for the rest is enough.
    let mut opener = Opener::new(BytesMut::new(), 1 << 17);
    opener.authenticated();
    let record = 60_000;
    let buf = opener.read_buf();
    let space = buf.capacity() - buf.len();
    buf.extend_from_slice(&FrameKind::Data.header(record));
    buf.extend_from_slice(&vec![1; space - HEADER_LEN]);
    opener.filled(space, space);
    assert!(opener.next_frame().unwrap().is_none());
    // Room for the rest of it, exactly.
    let buf = opener.read_buf();
    let room = buf.capacity() - buf.len();
    assert_eq!(buf.capacity(), HEADER_LEN + record);
    let rest = room - 1;
    buf.extend_from_slice(&vec![1; rest]);
    opener.filled(rest, room);
    assert!(opener.next_frame().unwrap().is_none(), "a byte is missing");
    let (origin, capacity) = (opener.origin(), opener.chunks.get().capacity());
    let spares = opener.capacity() - capacity;
    // The next read goes into the byte of room left.
    let buf = opener.read_buf();
    assert_eq!(buf.capacity() - buf.len(), 1);
    assert_eq!(
        (opener.origin(), opener.chunks.get().capacity()),
        (origin, capacity)
    );
    assert_eq!(spares, 0, "the 16 KiB it outgrew is not kept");
}

/// An opener with a fresh 16 KiB buffer, `consumed` bytes of it taken,
/// then `part` bytes (header included) of a record of `record` bytes: the
/// room its next read has, and the room it had.
fn room_for_next_read(consumed: usize, record: usize, part: usize) -> (usize, usize) {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    let buf = opener.read_buf();
    assert_eq!(buf.capacity(), 16 * 1024);
    buf.extend_from_slice(&vec![0; consumed]);
    drop(buf.split());
    buf.extend_from_slice(&FrameKind::Data.header(record));
    buf.extend_from_slice(&vec![1; part - HEADER_LEN]);
    let had = buf.capacity() - buf.len();
    assert!(opener.next_frame().unwrap().is_none());
    let buf = opener.read_buf();
    (buf.capacity() - buf.len(), had)
}

#[test]
fn a_record_begun_makes_room_for_the_next_read_as_its_size_and_the_room_left_say() {
    // Up to half a unit (8 KiB) begun, under 4 KiB of room: room made, so
    // that the next read is a large one (bulk data), even with room for
    // the rest of the record.
    let (room, had) = room_for_next_read(4_600, 8_188 + 100, 8_192);
    assert!(had < 4096 && room > had, "half a unit: {room} after {had}");
    let (room, had) = room_for_next_read(12_800, 2_044 + 100, 2_048);
    assert!(had < 4096 && room > had, "a small record: {room} after {had}");
    // More than half a unit begun: room made only if the rest does not
    // fit (and then room for all of it).
    let (room, had) = room_for_next_read(0, 9_000 + 50, 9_004);
    assert_eq!(room, had, "room for the rest, and more");
    let (room, had) = room_for_next_read(0, 20_000, 9_004);
    assert!(
        had < 20_000 - 9_000 && room >= 20_000 - 9_000,
        "{room} after {had}"
    );
}
