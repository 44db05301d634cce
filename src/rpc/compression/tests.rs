use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::{decompress, ClientCompression, Compression, Encoding, Encodings};
use crate::rpc::{
    wire::{put_frame, Decoder, Kind, Limits},
    Code,
};

/// Every encoding this build has (none without the features).
fn encodings() -> &'static [Encoding] {
    Encoding::ALL
}

/// A compressible message: text, repeated.
fn compressible(len: usize) -> Vec<u8> {
    b"weft compresses what repeats; "
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

fn settings(send: Encoding) -> Compression {
    Compression {
        send: Some(send),
        accept: Encodings::default().with(send),
        ..Compression::default()
    }
}

/// The one frame `bytes` hold.
fn only_frame(bytes: Bytes) -> (Kind, Bytes) {
    let mut decoder = Decoder::new(Limits::default());
    decoder.push(bytes);
    let frame = decoder.next_frame().unwrap().expect("a whole frame");
    assert!(!decoder.has_partial(), "one frame, nothing after it");
    (frame.kind, frame.payload)
}

#[test]
fn names_are_grpcs_and_unknown_names_are_ignored() {
    for &encoding in encodings() {
        assert_eq!(Encoding::from_name(encoding.name()), Some(encoding));
    }
    assert_eq!(Encoding::from_name("br"), None);
    assert_eq!(Encoding::from_name("identity"), None);
    let all = encodings()
        .iter()
        .fold(Encodings::default(), |set, e| set.with(*e));
    let names = all.names();
    assert_eq!(names.len(), encodings().len());
    let mut with_unknown = names.clone();
    with_unknown.push("br".into());
    assert_eq!(Encodings::from_names(&with_unknown), all);
    assert_eq!(Encodings::from_names(&[]), Encodings::default());
}

#[test]
fn a_message_past_the_threshold_is_compressed_and_comes_back_whole() {
    for &encoding in encodings() {
        let compressor = settings(encoding)
            .compressor(Encodings::default().with(encoding))
            .unwrap();
        let message = compressible(64 * 1024);
        let mut frames = BytesMut::new();
        compressor.put_frame(&mut frames, &message);
        let (kind, payload) = only_frame(frames.freeze());
        assert_eq!(kind, Kind::Compressed, "{encoding:?}");
        assert!(
            payload.len() < message.len() / 10,
            "{encoding:?}: {} bytes",
            payload.len()
        );
        assert_eq!(decompress(encoding, &payload, message.len()).unwrap(), message);
    }
}

#[test]
fn small_and_incompressible_messages_go_as_they_are() {
    for &encoding in encodings() {
        let compressor = settings(encoding)
            .compressor(Encodings::default().with(encoding))
            .unwrap();
        // Below the threshold (1 KiB by default).
        let small = compressible(1023);
        let mut frames = BytesMut::new();
        compressor.put_frame(&mut frames, &small);
        assert_eq!(only_frame(frames.freeze()), (Kind::Message, Bytes::from(small)));
        // Random bytes grow when compressed: they go as a MESSAGE.
        let random: Vec<u8> = (0..8192u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut frames = BytesMut::new();
        compressor.put_frame(&mut frames, &random);
        let (kind, payload) = only_frame(frames.freeze());
        if kind == Kind::Compressed {
            assert!(payload.len() < random.len());
        } else {
            assert_eq!(payload, random);
        }
    }
}

#[test]
fn a_framed_reply_and_a_batch_tail_compress_alike() {
    for &encoding in encodings() {
        let compressor = settings(encoding)
            .compressor(Encodings::default().with(encoding))
            .unwrap();
        let message = compressible(20_000);
        let mut plain = BytesMut::new();
        put_frame(&mut plain, Kind::Message, &message);
        let framed = compressor.frame(plain.clone().freeze());
        // In a batch, after a frame already there.
        let mut batch = BytesMut::new();
        put_frame(&mut batch, Kind::Header, b"h");
        let start = batch.len();
        batch.extend_from_slice(&plain);
        compressor.compress_tail(&mut batch, start);
        assert_eq!(&batch[start..], &framed[..]);
        assert_eq!(only_frame(framed).0, Kind::Compressed);
    }
}

#[test]
fn nothing_is_compressed_for_a_peer_that_does_not_read_it() {
    for &encoding in encodings() {
        assert_eq!(settings(encoding).compressor(Encodings::default()), None);
        assert_eq!(
            Compression::default().compressor(Encodings::default().with(encoding)),
            None
        );
    }
}

#[test]
fn a_header_naming_an_encoding_this_side_does_not_read_is_refused_with_both_named() {
    let none = Compression::default();
    assert_eq!(none.incoming(""), Ok(None));
    let why = none.incoming("br").unwrap_err();
    assert!(why.contains("`br`") && why.contains("reads: none"), "{why}");
    for &encoding in encodings() {
        let why = none.incoming(encoding.name()).unwrap_err();
        assert!(why.contains(encoding.name()), "{why}");
        assert_eq!(settings(encoding).incoming(encoding.name()), Ok(Some(encoding)));
    }
}

#[test]
fn a_client_compresses_only_what_its_server_last_said_it_reads() {
    for &encoding in encodings() {
        let client = ClientCompression {
            config: settings(encoding),
            ..ClientCompression::default()
        };
        let clone = client.clone();
        // Nothing heard yet: the first call goes uncompressed.
        assert_eq!(client.compressor(), None);
        assert_eq!(client.reply_header("", &[encoding.name().to_owned()]), Ok(None));
        assert_eq!(
            clone.compressor().map(|c| c.encoding),
            Some(encoding),
            "clones share it"
        );
        // The server stops reading it (a new replica behind the address).
        assert_eq!(client.reply_header("", &[]), Ok(None));
        assert_eq!(clone.compressor(), None);
        // Replies in an encoding the client reads, and in one it never offered.
        assert_eq!(client.reply_header(encoding.name(), &[]), Ok(Some(encoding)));
        let refused = client.reply_header("br", &[]).unwrap_err();
        assert_eq!(refused.code(), Code::Internal);
        assert!(
            refused.message().contains("the server sent"),
            "{}",
            refused.message()
        );
    }
}

#[test]
fn decompression_stops_at_the_limit() {
    for &encoding in encodings() {
        let message = compressible(100_000);
        let compressed = super::compress(encoding, &message).unwrap();
        assert_eq!(decompress(encoding, &compressed, message.len()).unwrap(), message);
        let over = decompress(encoding, &compressed, message.len() - 1).unwrap_err();
        assert_eq!(over.code(), Code::ResourceExhausted, "{encoding:?}");
        assert!(
            over.message().contains("past the limit of 99999 bytes"),
            "{}",
            over.message()
        );
        let garbage = decompress(encoding, b"not compressed at all", 1 << 20).unwrap_err();
        assert_eq!(garbage.code(), Code::Internal, "{encoding:?}");
        assert!(
            garbage.message().contains(encoding.name()),
            "{}",
            garbage.message()
        );
    }
}

/// A zstd frame that does not say how long its content is, with a
/// window of 64 KiB.
#[cfg(feature = "zstd")]
fn unsized_zstd(message: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    encoder.window_log(16).unwrap();
    encoder.include_contentsize(false).unwrap();
    encoder.write_all(message).unwrap();
    encoder.finish().unwrap()
}

#[cfg(feature = "zstd")]
#[test]
fn a_zstd_frame_that_asks_for_a_window_past_the_limit_is_refused_before_it_is_allocated() {
    use std::io::Write;
    // A 128 MiB window (log 27), with no content size to shrink it: the
    // decoder would allocate it. The limit here is 1 MiB.
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    encoder.window_log(27).unwrap();
    encoder.include_contentsize(false).unwrap();
    encoder.write_all(&compressible(4096)).unwrap();
    let frame = encoder.finish().unwrap();
    let refused = decompress(Encoding::Zstd, &frame, 1 << 20).unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("a window of 134217728"),
        "{}",
        refused.message()
    );
    // Without a size in its header, a frame is cut off as it
    // decompresses, as gzip's are.
    let message = compressible(100_000);
    let over = decompress(Encoding::Zstd, &unsized_zstd(&message), message.len() - 1).unwrap_err();
    assert_eq!(over.code(), Code::ResourceExhausted);
    assert!(
        over.message().contains("decompresses past the limit"),
        "{}",
        over.message()
    );
    // Under a limit past the window, the same frame reads.
    assert_eq!(decompress(Encoding::Zstd, &frame, 1 << 28).unwrap().len(), 4096);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes, in any encoding: an error or a message within the limit,
    /// never a panic.
    #[test]
    fn any_bytes_decompress_to_an_error_or_at_most_the_limit(
        data in proptest::collection::vec(any::<u8>(), 0..512),
        limit in 0usize..4096,
    ) {
        for &encoding in encodings() {
            if let Ok(message) = decompress(encoding, &data, limit) {
                prop_assert!(message.len() <= limit);
            }
        }
    }

    /// What one side compresses, the other reads back, whatever it is.
    #[test]
    fn compressed_messages_round_trip(message in proptest::collection::vec(0u8..4, 0..20_000)) {
        for &encoding in encodings() {
            let compressor = Compression { threshold: 0, ..settings(encoding) }
                .compressor(Encodings::default().with(encoding))
                .unwrap();
            let mut frames = BytesMut::new();
            compressor.put_frame(&mut frames, &message);
            let (kind, payload) = only_frame(frames.freeze());
            let back = match kind {
                Kind::Compressed => decompress(encoding, &payload, message.len()).unwrap(),
                _ => payload,
            };
            prop_assert_eq!(&back[..], &message[..]);
        }
    }
}

/// A limit of "no limit" (`usize::MAX`, or anything past 2^63) rounds up
/// to zstd's largest window, not past `usize`.
#[cfg(feature = "zstd")]
#[test]
fn a_zstd_message_under_the_largest_limits_reads() {
    let frame = super::compress(Encoding::Zstd, b"hello").unwrap();
    for limit in [usize::MAX, (1 << 63) + 1, 1 << 63, 0, 1] {
        let read = decompress(Encoding::Zstd, &frame, limit);
        if limit >= 5 {
            assert_eq!(&read.unwrap()[..], b"hello", "limit {limit}");
        } else {
            assert_eq!(read.unwrap_err().code(), Code::ResourceExhausted, "limit {limit}");
        }
    }
}

/// A gzip message is one member: a second member, or any bytes after the
/// first, would be read differently by a decoder of many members (or
/// dropped unseen), so they are refused.
#[cfg(feature = "gzip")]
#[test]
fn a_gzip_message_is_one_member_and_nothing_after_it() {
    let one = super::compress(Encoding::Gzip, b"first member, ").unwrap();
    let two = super::compress(Encoding::Gzip, b"second member").unwrap();
    assert_eq!(
        &decompress(Encoding::Gzip, &one, 1 << 20).unwrap()[..],
        b"first member, "
    );
    for after in [two, b"bytes after the member".to_vec()] {
        let refused = decompress(Encoding::Gzip, &[one.clone(), after].concat(), 1 << 20).unwrap_err();
        assert_eq!(refused.code(), Code::Internal);
        assert!(
            refused.message().contains("is one member"),
            "{}",
            refused.message()
        );
    }
}

/// A zstd message is one frame: a second frame (which could ask for a
/// window of its own, or be one of thousands of empty frames that cost
/// time and yield nothing), a skippable frame, or bytes after the frame
/// are refused before anything is decoded.
#[cfg(feature = "zstd")]
#[test]
fn a_zstd_message_is_one_frame_and_nothing_after_it() {
    use std::io::Write;
    let first = super::compress(Encoding::Zstd, b"tiny").unwrap();
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    encoder.window_log(27).unwrap();
    encoder.include_contentsize(false).unwrap();
    encoder.write_all(&compressible(4096)).unwrap();
    let big_window = encoder.finish().unwrap();
    let empty = super::compress(Encoding::Zstd, b"").unwrap();
    // A skippable frame: its magic (0x184D2A50), a length, that many bytes.
    let skippable = [&0x184D_2A50u32.to_le_bytes()[..], &4u32.to_le_bytes(), b"skip"].concat();
    for (what, data) in [
        (
            "a second frame with a 128 MiB window",
            [first.clone(), big_window].concat(),
        ),
        (
            "a thousand empty frames",
            [first.clone(), empty.repeat(1000)].concat(),
        ),
        (
            "bytes after the frame",
            [first.clone(), b"junk".to_vec()].concat(),
        ),
        (
            "a skippable frame first",
            [skippable.clone(), first.clone()].concat(),
        ),
    ] {
        let refused = decompress(Encoding::Zstd, &data, 1 << 20).unwrap_err();
        assert_eq!(refused.code(), Code::Internal, "{what}: {}", refused.message());
    }
    let refused = decompress(Encoding::Zstd, &skippable, 1 << 20).unwrap_err();
    assert!(refused.message().contains("skippable"), "{}", refused.message());
    assert_eq!(&decompress(Encoding::Zstd, &first, 1 << 20).unwrap()[..], b"tiny");
}
