//! The opener's limits, record boundaries and key updates.

use super::*;

#[test]
fn until_the_peer_is_authenticated_records_and_reads_stay_small() {
    let mut opener = Opener::new(BytesMut::new(), 4096);
    opener.set_limits(64 * 1024, 16);
    opener.hold_until_authenticated();
    // The first read has room for a whole Setup of the default maximum
    // size (4 KiB), and no more than that.
    let first = opener.read_buf().capacity();
    assert!((4096..8192).contains(&first), "{first}");
    // A peer filling every read cannot grow the allocations.
    for _ in 0..10 {
        let buf = opener.read_buf();
        let space = buf.capacity() - buf.len();
        buf.extend_from_slice(&vec![0; space]);
        opener.filled(space, space);
        assert!(
            opener.capacity() <= 4 * PRE_AUTH_READ_CHUNK,
            "{}",
            opener.capacity()
        );
        opener.chunks.buf().clear();
    }
    let buf = opener.read_buf();
    buf.extend_from_slice(&FrameKind::Data.header(PRE_AUTH_RECORD_MAX + 1));
    assert!(matches!(
        opener.next_frame(),
        Err(FrameError::TooLarge {
            max: PRE_AUTH_RECORD_MAX,
            ..
        })
    ));
    // Authenticated: the agreed size, and growing reads.
    let mut opener = Opener::new(BytesMut::new(), 4096);
    opener.set_limits(64 * 1024, 16);
    opener.hold_until_authenticated();
    opener.authenticated();
    let buf = opener.read_buf();
    buf.extend_from_slice(&FrameKind::Data.header(64 * 1024 + 16));
    assert!(opener.next_frame().unwrap().is_none(), "waits for the rest");
    assert_eq!(opener.read_chunk_max, READ_CHUNK_MAX);
}

#[test]
fn a_key_update_moves_to_the_next_key_only_when_agreed_and_only_empty() {
    use crate::{
        record::{seal_frame, KeySchedule},
        terms::CipherSuite,
    };
    let suite = CipherSuite::Aes256Gcm;
    let key = || {
        RecordKey::new(suite, &[1; 32], [2; 24])
            .with_schedule(KeySchedule::new(suite, zeroize::Zeroizing::new([3; 32])))
    };
    let mut sender = key();
    let mut wire = seal_frame(Some(&mut sender), FrameKind::KeyUpdate, &[]).unwrap();
    let mut next = sender.next().unwrap();
    wire.extend(seal_frame(Some(&mut next), FrameKind::Data, b"after").unwrap());
    let opener = |agreed: bool| {
        let mut opener = Opener::new(BytesMut::new(), 1 << 16);
        opener.set_limits(16 * 1024, 16);
        opener.authenticated();
        opener.set_key(key());
        if agreed {
            opener.enable_key_update();
        }
        opener.read_buf().extend_from_slice(&wire);
        opener
    };
    let mut agreed = opener(true);
    let frame = agreed.next_frame().unwrap().unwrap();
    assert_eq!(agreed.open(frame).unwrap().0, FrameKind::KeyUpdate);
    let frame = agreed.next_frame().unwrap().unwrap();
    let (kind, payload) = agreed.open(frame).unwrap();
    assert_eq!((kind, &payload[..]), (FrameKind::Data, &b"after"[..]));
    assert_eq!(agreed.key_updates, 1);

    let mut version_1 = opener(false);
    let frame = version_1.next_frame().unwrap().unwrap();
    assert!(matches!(
        version_1.open(frame).as_ref().map_err(Error::repr),
        Err(Repr::UnexpectedFrame {
            got: FrameKind::KeyUpdate,
            ..
        })
    ));

    let mut sender = key();
    let stuffed = seal_frame(Some(&mut sender), FrameKind::KeyUpdate, b"x").unwrap();
    let mut o = Opener::new(BytesMut::new(), 1 << 16);
    o.set_limits(16 * 1024, 16);
    o.authenticated();
    o.set_key(key());
    o.enable_key_update();
    o.read_buf().extend_from_slice(&stuffed);
    let frame = o.next_frame().unwrap().unwrap();
    assert!(matches!(
        o.open(frame).as_ref().map_err(Error::repr),
        Err(Repr::UnexpectedFrame {
            expected: "an empty key update",
            ..
        })
    ));
}

#[test]
fn a_record_of_the_largest_plaintext_opens_and_a_byte_more_does_not_and_each_is_counted() {
    // Without a key (the plaintext suite) a record is its plaintext: the
    // reader allows a tag's room more than the plaintext limit, the opener
    // does not.
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.set_limits(100, 16);
    opener.authenticated();
    for len in [100, 0, 100] {
        let buf = opener.read_buf();
        buf.extend_from_slice(&FrameKind::Data.header(len));
        buf.extend_from_slice(&vec![1; len]);
        let frame = opener.next_frame().unwrap().unwrap();
        assert_eq!(opener.open(frame).unwrap().1.len(), len);
    }
    assert_eq!(opener.records, 3);
    let buf = opener.read_buf();
    buf.extend_from_slice(&FrameKind::Data.header(101));
    buf.extend_from_slice(&[1; 101]);
    let frame = opener.next_frame().unwrap().unwrap();
    let refused = opener.open(frame).unwrap_err();
    assert!(refused.to_string().contains("101"), "{refused}");
    assert_eq!(opener.records, 3);
}

#[test]
fn a_record_is_partly_read_from_its_first_byte_to_its_last() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    assert!(!opener.partial_record(), "nothing read");
    let record = [&FrameKind::Data.header(10)[..], &[5; 10]].concat();
    opener.read_buf().extend_from_slice(&record[..1]);
    assert!(opener.next_frame().unwrap().is_none());
    assert!(opener.partial_record(), "one byte of it");
    opener.read_buf().extend_from_slice(&record[1..]);
    let frame = opener.next_frame().unwrap().unwrap();
    assert!(!opener.partial_record(), "all of it, taken");
    opener.open(frame).unwrap();
}

#[test]
fn the_transport_ends_cleanly_between_records_and_not_inside_one() {
    let mut opener = Opener::new(BytesMut::new(), 1 << 16);
    opener.authenticated();
    assert!(opener.end().is_ok(), "nothing read");
    let record = [&FrameKind::Data.header(10)[..], &[5; 10]].concat();
    opener.read_buf().extend_from_slice(&record[..7]);
    assert!(opener.next_frame().unwrap().is_none());
    assert!(matches!(opener.end(), Err(FrameError::Incomplete(7))));
    opener.read_buf().extend_from_slice(&record[7..]);
    opener.next_frame().unwrap().unwrap();
    assert!(opener.end().is_ok(), "the record whole, and taken");
}
