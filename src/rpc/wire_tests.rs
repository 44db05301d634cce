//! The RPC frame decoder's tests: limits, lengths, splits, and what is
//! copied.

use super::*;
use proptest::prelude::*;

fn frames(kinds_and_payloads: &[(Kind, Vec<u8>)]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for (kind, payload) in kinds_and_payloads {
        put_frame(&mut out, *kind, payload);
    }
    out.to_vec()
}

#[test]
fn the_default_limits_are_4_mib_per_message_and_64_kib_per_envelope() {
    let limits = Limits::default();
    assert_eq!((limits.message, limits.envelope), (4 << 20, 64 << 10));
    assert_eq!(limits.message_read_timeout, Some(Duration::from_secs(30)));
    let custom = Limits {
        message: 7,
        envelope: 9,
        message_read_timeout: None,
    };
    assert_eq!(Decoder::new(custom).limits(), custom);
}

#[test]
fn a_frames_length_is_its_kind_its_varint_and_its_payload() {
    for (len, expected) in [(0, 2), (127, 129), (128, 131), (16_383, 16_386), (16_384, 16_388)] {
        assert_eq!(frame_len(len), expected, "{len}");
        let mut out = BytesMut::new();
        put_frame(&mut out, Kind::Message, &vec![0; len]);
        assert_eq!(out.len(), expected, "{len}");
    }
}

#[test]
fn a_message_framed_decodes_to_itself() {
    let status = crate::proto::Status {
        code: 5,
        message: "not found".into(),
        ..Default::default()
    };
    let mut out = BytesMut::new();
    put_message_frame(&mut out, Kind::Status, &status);
    assert_eq!(out.len(), frame_len(status.encoded_len()));
    let whole = message_frame(&status);
    assert_eq!(&whole[1..], &out[1..], "the same bytes, under MESSAGE's kind");
    assert_eq!(whole[0], Kind::Message as u8);
    let mut decoder = Decoder::new(Limits::default());
    decoder.push(out.freeze());
    let frame = decoder.next_frame().unwrap().unwrap();
    assert_eq!(frame.kind, Kind::Status);
    assert_eq!(crate::proto::Status::decode(frame.payload).unwrap(), status);
}

#[test]
fn metadata_entries_are_counted_in_their_field_alone_and_256_is_the_most() {
    let header = |entries: usize| crate::proto::CallHeader {
        method: "a.B/C".into(),
        timeout_micros: 7,
        metadata: (0..entries)
            .map(|i| (i.to_string(), String::new()))
            .collect::<crate::rpc::Metadata>()
            .into_entries(),
        ..Default::default()
    };
    let at_most = header(MAX_METADATA_ENTRIES).encode_to_vec();
    assert!(check_metadata_entries(&at_most, CALL_HEADER_METADATA).is_ok());
    let past = header(MAX_METADATA_ENTRIES + 1).encode_to_vec();
    let err = check_metadata_entries(&past, CALL_HEADER_METADATA).unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(
        err.message().contains("more than 256 metadata entries"),
        "{err:?}"
    );
    // Only the field named counts: the same bytes read as another
    // envelope (whose map is another field) have no entries.
    assert!(check_metadata_entries(&past, REPLY_HEADER_METADATA).is_ok());
    // Malformed bytes are the decoder's to report.
    assert!(check_metadata_entries(&[0xff; 3], CALL_HEADER_METADATA).is_ok());
}

#[test]
fn a_length_of_ten_continuation_bytes_is_invalid_and_nine_are_incomplete() {
    let mut decoder = Decoder::new(Limits::default());
    decoder.push(Bytes::from([&[Kind::Message as u8][..], &[0x80; 9]].concat()));
    assert_eq!(decoder.next_frame().unwrap(), None, "nine: more may come");
    decoder.push(Bytes::from_static(&[0x80]));
    let err = decoder.next_frame().unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(err.message().contains("invalid RPC frame length"), "{err:?}");
}

proptest! {
    #[test]
    fn frames_survive_any_split(
        items in proptest::collection::vec((0u8..3, proptest::collection::vec(any::<u8>(), 0..300)), 0..10),
        cut in 1usize..64,
        drain_every in 1usize..4,
    ) {
        let items: Vec<(Kind, Vec<u8>)> = items.into_iter().map(|(k, p)| (Kind::from_u8(k).unwrap(), p)).collect();
        let wire = frames(&items);
        let mut decoder = Decoder::new(Limits { message: 1 << 20, envelope: 1 << 20, ..Limits::default() });
        let mut got = Vec::new();
        let pieces: Vec<&[u8]> = wire.chunks(cut).collect();
        // Frames taken after every piece, or after every few (a chunk
        // pushed onto one not yet taken from).
        for (i, piece) in pieces.iter().enumerate() {
            decoder.push(Bytes::copy_from_slice(piece));
            if (i + 1) % drain_every == 0 || i + 1 == pieces.len() {
                while let Some(frame) = decoder.next_frame().unwrap() {
                    got.push((frame.kind, frame.payload.to_vec()));
                }
            }
        }
        prop_assert_eq!(got, items);
        prop_assert!(!decoder.has_partial());
    }

    #[test]
    fn any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut decoder = Decoder::new(Limits { message: 64, envelope: 128, ..Limits::default() });
        decoder.push(Bytes::from(bytes.clone()));
        for _ in 0..bytes.len() + 1 {
            match decoder.next_frame() {
                Ok(Some(frame)) => prop_assert!(frame.payload.len() <= 128),
                Ok(None) | Err(_) => break,
            }
        }
    }
}

#[test]
fn a_header_split_after_its_kind_takes_no_more_than_its_own_bytes() {
    // A short frame whose header is cut after its kind, then a whole
    // frame in the same chunk as the first one's rest: the first is
    // gathered, the second sliced.
    let mut decoder = Decoder::new(Limits::default());
    decoder.push(Bytes::from_static(&[Kind::Message as u8]));
    assert!(decoder.next_frame().unwrap().is_none());
    let rest = Bytes::from([&[1u8, b'x'][..], &frames(&[(Kind::Message, vec![5; 64])])].concat());
    let range = rest.as_ptr() as usize..rest.as_ptr() as usize + rest.len();
    decoder.push(rest);
    assert_eq!(decoder.next_frame().unwrap().unwrap().payload, &b"x"[..]);
    let second = decoder.next_frame().unwrap().unwrap();
    assert_eq!(second.payload, vec![5; 64]);
    assert!(
        range.contains(&(second.payload.as_ptr() as usize)),
        "sliced, not copied"
    );
}

#[test]
fn only_a_frame_split_across_chunks_is_copied() {
    let wire = frames(&[
        (Kind::Header, vec![1; 100]),
        (Kind::Message, vec![2; 1000]),
        (Kind::Message, vec![3; 8000]),
    ]);
    // The second frame is cut in its header's varint, and again in its
    // payload.
    let (a, rest) = wire.split_at(100 + 2 + 2);
    let (b, c) = rest.split_at(500);
    let c = Bytes::copy_from_slice(c);
    let c_range = c.as_ptr() as usize..c.as_ptr() as usize + c.len();
    let mut decoder = Decoder::new(Limits {
        message: 1 << 20,
        envelope: 1 << 20,
        ..Limits::default()
    });
    decoder.push(Bytes::copy_from_slice(a));
    assert_eq!(decoder.next_frame().unwrap().unwrap().payload, vec![1; 100]);
    assert!(decoder.next_frame().unwrap().is_none());
    decoder.push(Bytes::copy_from_slice(b));
    assert!(decoder.next_frame().unwrap().is_none());
    decoder.push(c);
    assert_eq!(decoder.next_frame().unwrap().unwrap().payload, vec![2; 1000]);
    assert!(decoder.buf.capacity() < 4000, "the next frame was not copied");
    let third = decoder.next_frame().unwrap().unwrap();
    assert_eq!(third.payload, vec![3; 8000]);
    assert!(
        c_range.contains(&(third.payload.as_ptr() as usize)),
        "sliced, not copied"
    );
    assert!(decoder.next_frame().unwrap().is_none());
    assert!(!decoder.has_partial());
}

#[test]
fn an_oversized_message_fails_on_its_length_before_its_bytes() {
    let mut decoder = Decoder::new(Limits {
        message: 1024,
        envelope: 64,
        ..Limits::default()
    });
    let mut wire = BytesMut::new();
    wire.put_u8(Kind::Message as u8);
    prost::encoding::encode_varint(1 << 30, &mut wire);
    decoder.push(wire.freeze());
    let err = decoder.next_frame().unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(decoder.buf.capacity() < 4096, "nothing reserved for it");
}

#[test]
fn a_frame_left_incomplete_keeps_none_of_the_read_buffer_its_start_came_in() {
    // A read buffer of 128 KiB: a whole frame, then the start of one
    // declared as 100 KiB.
    let mut wire = BytesMut::with_capacity(128 * 1024);
    put_frame(&mut wire, Kind::Message, &[1; 100]);
    wire.put_u8(Kind::Message as u8);
    prost::encoding::encode_varint(100 * 1024, &mut wire);
    wire.extend_from_slice(&[2; 1000]);
    let buffer = wire.freeze();
    let mut decoder = Decoder::new(Limits::default());
    decoder.push(buffer.clone());
    let whole = decoder.next_frame().unwrap().unwrap();
    assert_eq!(whole.payload, vec![1; 100]);
    drop(whole);
    assert!(decoder.next_frame().unwrap().is_none());
    assert!(decoder.has_partial());
    assert!(
        buffer.is_unique(),
        "the stalled frame's start was copied out; the read buffer can go"
    );
    // The frame still completes from what follows.
    decoder.push(Bytes::from(vec![2; 100 * 1024 - 1000]));
    assert_eq!(decoder.next_frame().unwrap().unwrap().payload.len(), 100 * 1024);
}

#[test]
fn envelopes_have_their_own_limit() {
    let limits = Limits {
        message: 1024,
        envelope: 64,
        ..Limits::default()
    };
    for kind in [Kind::Header, Kind::Status] {
        let mut decoder = Decoder::new(limits);
        let mut wire = BytesMut::new();
        put_frame(&mut wire, kind, &[0; 64]);
        put_frame(&mut wire, Kind::Message, &[0; 1024]);
        put_frame(&mut wire, kind, &[0; 65]);
        decoder.push(wire.freeze());
        assert_eq!(decoder.next_frame().unwrap().unwrap().payload.len(), 64);
        assert_eq!(decoder.next_frame().unwrap().unwrap().payload.len(), 1024);
        let err = decoder.next_frame().unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert!(err.message().contains("65 bytes"), "{}", err.message());
    }
}
