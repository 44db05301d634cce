//! The sealer's records, buffers and key limits.

use super::*;
use crate::error::Repr;

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
    sealer.set_key(RecordKey::new(
        crate::terms::CipherSuite::Aes256Gcm,
        &[3; 32],
        [0; 24],
    ));
    let data = vec![5; 1024 * 1024];
    let mut origins = Vec::new();
    for _ in 0..100 {
        let taken = sealer.write(&data, t).unwrap();
        assert!(taken >= WRITE_HIGH_WATER - 64 * 1024, "{taken}");
        sealer.seal_open_record(t).unwrap();
        origins.push(sealer.chunks.origin().buffer);
        // Bulk: 128 KiB units, a record or two of 64 KiB each.
        assert!(
            sealer.chunks.origin().size >= 128 * 1024,
            "{:?}",
            sealer.chunks.origin()
        );
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
    use crate::{record::KeySchedule, terms::CipherSuite};
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
    assert!(matches!(
        send_1000(&mut without).as_ref().map_err(Error::repr),
        Err(Repr::KeyExhausted(_))
    ));
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

#[test]
fn an_idle_sender_lets_its_buffer_go_only_once_everything_is_written() {
    let t = Instant::now();
    let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
    // A record still open: kept, by either release.
    sealer.write(&[1; 64], t).unwrap();
    sealer.release_idle();
    sealer.release_if_idle();
    assert!(sealer.capacity() > 0, "a record open");
    // Sealed but not written: kept.
    sealer.seal_open_record(t).unwrap();
    sealer.release_idle();
    let held = sealer.capacity();
    assert!(held >= HEADER_LEN + 64, "{held}: waiting to be written");
    // Written: gone.
    drain(&mut sealer);
    sealer.release_idle();
    assert_eq!(sealer.capacity(), 0);
    // A frame queued whole (a close record, say) counts, and is kept.
    sealer.queue_frame(&[9; 100]);
    assert_eq!(sealer.capacity(), 100);
    sealer.release_idle();
    assert_eq!(sealer.capacity(), 100);
}

#[test]
fn a_used_up_key_still_seals_the_close_and_key_updates_count_as_records() {
    let t = Instant::now();
    let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
    sealer.set_key(
        RecordKey::new(crate::terms::CipherSuite::Aes256Gcm, &[3; 32], [0; 24]).with_limits(2, u64::MAX),
    );
    sealer.queue_record(FrameKind::Data, b"one", t).unwrap();
    assert!(
        sealer.queue_record(FrameKind::Data, b"two", t).is_err(),
        "used up"
    );
    sealer.queue_record(FrameKind::Close, b"\0\0\0\x07", t).unwrap();
    assert_eq!(sealer.records, 2);

    // A key update every two records: each update is a record too.
    let suite = crate::terms::CipherSuite::Aes256Gcm;
    let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
    sealer.set_key(
        RecordKey::new(suite, &[1; 32], [2; 24]).with_schedule(crate::record::KeySchedule::new(
            suite,
            zeroize::Zeroizing::new([3; 32]),
        )),
    );
    sealer.enable_key_update(crate::record::rekey::UpdatePolicy { every: Some(2) });
    for _ in 0..4 {
        sealer.write(b"data", t).unwrap();
        sealer.seal_open_record(t).unwrap();
    }
    assert!(sealer.key_updates >= 1, "{}", sealer.key_updates);
    assert_eq!(sealer.records, 4 + sealer.key_updates);
}

#[test]
fn a_record_dropped_unsealed_never_reaches_the_wire() {
    let t = Instant::now();
    let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
    sealer.set_key(RecordKey::new(
        crate::terms::CipherSuite::Aes256Gcm,
        &[3; 32],
        [0; 24],
    ));
    sealer.write(b"plaintext that must not leave", t).unwrap();
    sealer.drop_open_record();
    sealer.queue_record(FrameKind::Close, b"\0\0\0\x07", t).unwrap();
    let wire = drain(&mut sealer);
    assert_eq!(wire.len(), HEADER_LEN + 4 + MAX_TAG_LEN, "the close alone");
    assert!(!wire.windows(9).any(|w| w == b"plaintext"));
}

#[test]
fn a_sender_is_full_at_its_high_water_mark_and_not_before() {
    let t = Instant::now();
    let mut sealer = Sealer::new(RecordSizer::fixed(64 * 1024));
    sealer.write(&[1; 100], t).unwrap();
    assert!(!sealer.is_full(), "a record open, little waiting");
    sealer.seal_open_record(t).unwrap();
    assert!(!sealer.is_full());
    let taken = sealer.write(&vec![2; 1024 * 1024], t).unwrap();
    assert!(taken < 1024 * 1024, "it stops at the mark: {taken}");
    sealer.seal_open_record(t).unwrap();
    assert!(sealer.is_full(), "{} waiting", sealer.unsent());
    drain(&mut sealer);
    assert!(!sealer.is_full());
}
