//! Hostile peers before authentication: oversized headers, Setups that
//! are oversized, truncated, repeated or random, random bytes at every
//! stage, low-order keys. Each must end in a typed error (or an
//! agreement): no panic, no large allocation, no hang.

use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    Error, ErrorKind,
};

use crate::support::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

/// Sends `bytes` as the whole of a peer's side, then keeps the transport
/// open; returns how the acceptor's handshake ended. Meanwhile an honest
/// peer handshakes with the same acceptor stack and exchanges a record,
/// and neither makes an allocation of 32 KiB or more.
async fn acceptor_against(bytes: Vec<u8>) -> Result<weft::Channel<tokio::io::DuplexStream>, Error> {
    let mut acceptor = stack(ident(2), &[CipherSuite::Aes256Gcm]);
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (mut their_read, mut their_write) = tokio::io::split(theirs);
    reset_largest();
    tokio::spawn(async move {
        let _ = their_write.write_all(&bytes).await;
        // Drain what the acceptor sends, and hold the transport open.
        let mut sink = [0u8; 1024];
        while let Ok(n) = their_read.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
        drop(their_write);
    });
    let honest = {
        let mut acceptor = acceptor.clone();
        async move {
            let (a, b) = tokio::io::duplex(1 << 16);
            let mut dialer = stack(ident(1), &[CipherSuite::Aes256Gcm]);
            let (d, acc) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
            let (mut d, mut acc) = (
                d.expect("the honest peer connects"),
                acc.expect("and is accepted"),
            );
            d.write_all(b"honest").await.unwrap();
            d.flush().await.unwrap();
            let mut got = [0u8; 6];
            acc.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"honest");
        }
    };
    let (outcome, ()) = tokio::join!(acceptor.accept_transport(ours), honest);
    let peak = largest();
    assert!(peak < 32 * 1024, "largest allocation {peak} bytes");
    outcome
}

#[test]
fn a_header_declaring_the_largest_length_is_an_error_with_no_large_allocation() {
    // 24 bits can declare at most 16 MiB (there is no way to say 4 GiB);
    // this is the worst a header can ask for.
    runtime().block_on(async {
        reset_largest();
        let err = acceptor_against(vec![FrameKind::Setup as u8, 0xff, 0xff, 0xff])
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Record, "{err:?}");
        assert_eq!(
            err.to_string(),
            "peer sent a malformed frame: frame of 16777215 bytes exceeds the maximum of 4096"
        );
        let peak = largest();
        assert!(peak < 32 * 1024, "largest allocation {peak} bytes");

        // After the handshake, a data header over the record limit fails
        // the same way.
        let (mut d, mut acc) = duplex_pair(CipherSuite::Aes256Gcm).await;
        reset_largest();
        d.get_mut()
            .write_all(&[FrameKind::Data as u8, 0xff, 0xff, 0xff])
            .await
            .unwrap();
        let err = acc.recv().await.unwrap_err();
        assert!(
            is_error(&err, ErrorKind::Record, "peer sent a malformed frame: frame of "),
            "{err:?}"
        );
        let peak = largest();
        assert!(peak < 512 * 1024, "largest allocation {peak} bytes");
    });
}

/// The record limit after the handshake (64 KiB of plaintext and the
/// 16-byte tag) at its value and one byte past: a record of 65,552 bytes
/// is read whole (and, being garbage, fails authentication), one of 65,553
/// is refused on its header.
#[test]
fn a_record_of_64_kib_and_its_tag_is_read_and_one_byte_more_is_refused_on_its_header() {
    const MOST: usize = 64 * 1024 + 16;
    runtime().block_on(async {
        let (mut d, mut acc) = duplex_pair(CipherSuite::Aes256Gcm).await;
        let mut record = raw_frame(FrameKind::Data, &vec![0; MOST]);
        reset_largest();
        let (_, err) = tokio::join!(d.get_mut().write_all(&record), acc.recv());
        let err = err.unwrap_err();
        assert!(
            is_error(&err, ErrorKind::Record, "failed authentication"),
            "{err:?}"
        );
        // Read into one buffer (which grows past the record: 96 KiB seen;
        // a partial record's cost is the server front's issue).
        let peak = largest();
        assert!(peak < 2 * MOST, "largest allocation {peak} bytes");

        let (mut d, mut acc) = duplex_pair(CipherSuite::Aes256Gcm).await;
        record[1..4].copy_from_slice(&(MOST as u32 + 1).to_be_bytes()[1..]);
        reset_largest();
        // Its header alone: the rest would never be read.
        d.get_mut().write_all(&record[..4]).await.unwrap();
        let err = acc.recv().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "peer sent a malformed frame: frame of {} bytes exceeds the maximum of {MOST}",
                MOST + 1
            )
        );
        // Nothing was reserved for it.
        let peak = largest();
        assert!(peak < MOST, "largest allocation {peak} bytes");
    });
}

#[test]
fn an_oversized_setup_is_refused() {
    runtime().block_on(async {
        let setup = wire::Setup {
            min_version: 1,
            max_version: 1,
            protocols: vec!["x".repeat(5000)],
            ..Default::default()
        };
        let raw = raw_frame(FrameKind::Setup, &prost::Message::encode_to_vec(&setup));
        let err = acceptor_against(raw).await.unwrap_err();
        assert!(
            is_error(&err, ErrorKind::Record, "peer sent a malformed frame: frame of ")
                && err.to_string().ends_with("exceeds the maximum of 4096"),
            "{err:?}"
        );
    });
}

/// A version 1 Setup for AES-256-GCM whose payload is exactly `len`
/// bytes, padded with application protocol names (at most 255 bytes each).
fn setup_of(len: usize) -> Vec<u8> {
    let mut setup = wire::Setup {
        min_version: 1,
        max_version: 1,
        ephemeral_key: weft_public_key(),
        suites: vec![AES_256_GCM_ID],
        ..Default::default()
    };
    // Names of 250 bytes (253 on the wire) while more than one fits, then
    // one that makes up the rest (a name's length prefix grows from 1 byte
    // to 2 at 128, so one size is out of reach: the name before gives a
    // byte then).
    while len - prost::Message::encoded_len(&setup) > 253 {
        setup.protocols.push("x".repeat(250));
    }
    setup.protocols.push(String::new());
    while prost::Message::encoded_len(&setup) < len {
        setup.protocols.last_mut().unwrap().push('y');
    }
    if prost::Message::encoded_len(&setup) > len {
        let n = setup.protocols.len();
        setup.protocols[n - 2].pop();
    }
    assert_eq!(prost::Message::encoded_len(&setup), len);
    raw_frame(FrameKind::Setup, &prost::Message::encode_to_vec(&setup))
}

/// A valid X25519 public key (of a key pair no one keeps).
fn weft_public_key() -> Vec<u8> {
    let mut key = [9u8; 32];
    key[31] &= 0x7f;
    key.to_vec()
}

/// The Setup limit (4096 bytes before the peer is authenticated) at its
/// value and one byte past: the first is read and answered (the handshake
/// then waits for a proof that never comes), the second is refused on its
/// header, before its payload is read.
#[test]
fn a_setup_of_4096_bytes_is_read_and_one_of_4097_is_refused_on_its_header() {
    runtime().block_on(async {
        let err = acceptor_against(setup_of(4096)).await.unwrap_err();
        assert!(
            is_error(&err, ErrorKind::Timeout, "handshake did not finish within 10 s"),
            "{err:?}"
        );
        let err = acceptor_against(setup_of(4097)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "peer sent a malformed frame: frame of 4097 bytes exceeds the maximum of 4096"
        );
    });
}

#[test]
fn a_peer_speaking_another_protocol_is_refused() {
    runtime().block_on(async {
        let err = acceptor_against(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Record, "{err:?}");
        assert_eq!(
            err.to_string(),
            "peer sent a malformed frame: unknown frame kind 0x47"
        );
    });
}

#[test]
fn a_data_record_before_the_identity_proof_is_refused() {
    runtime().block_on(async {
        let mut raw = aes_setup_frame(&x25519_public());
        raw.extend(raw_frame(FrameKind::Data, &[0; 40]));
        let err = acceptor_against(raw).await.unwrap_err();
        // Sealed under keys the attacker cannot have: authentication fails.
        assert!(
            is_error(&err, ErrorKind::Record, "record 0 failed authentication"),
            "{err:?}"
        );
    });
}

#[test]
fn a_low_order_ephemeral_key_is_refused() {
    runtime().block_on(async {
        for key in [[0u8; 32], {
            let mut one = [0u8; 32];
            one[0] = 1;
            one
        }] {
            let err = acceptor_against(aes_setup_frame(&key)).await.unwrap_err();
            assert!(
                is_error(&err, ErrorKind::Authentication, "low-order point"),
                "{err:?}"
            );
        }
    });
}

fn x25519_public() -> Vec<u8> {
    // Any valid point will do: the base point u = 9.
    let mut key = vec![0u8; 32];
    key[0] = 9;
    key
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn random_bytes_as_a_peer_end_in_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let result = runtime().block_on(async {
            tokio::time::timeout(Duration::from_secs(60), acceptor_against(bytes)).await
        });
        // Never a panic, never a hang (paused time: the 10 s deadline fires
        // at once when nothing else can happen), never a channel.
        let outcome = result.expect("handshake deadline bounds the handshake");
        prop_assert!(outcome.is_err());
    }

    #[test]
    fn random_bytes_after_the_handshake_end_in_an_error(bytes in proptest::collection::vec(any::<u8>(), 1..600)) {
        let outcome = runtime().block_on(async {
            let (mut d, mut acc) = duplex_pair(CipherSuite::ChaCha20Poly1305).await;
            d.get_mut().write_all(&bytes).await.unwrap();
            d.get_mut().shutdown().await.unwrap();
            let mut sink = Vec::new();
            acc.read_to_end(&mut sink).await.map(|_| sink)
        });
        // Nothing forged gets through, whatever the bytes.
        prop_assert!(outcome.is_err());
    }
}

/// A Setup that gets past negotiation leaves the acceptor waiting for the
/// peer's proof, which never comes: the handshake deadline ends it (the
/// runtime's clock is paused, so the 10 s pass at once).
fn agreed_then_timed_out(result: Result<weft::Channel<tokio::io::DuplexStream>, Error>) {
    let err = result.unwrap_err();
    assert!(
        is_error(&err, ErrorKind::Timeout, "handshake did not finish within"),
        "{err:?}"
    );
}

#[test]
fn a_setup_offering_every_version_and_unknown_suites_agrees_on_what_both_speak() {
    runtime().block_on(async {
        // 15 suites nobody knows, then one we do (16, the most a Setup may
        // list: thousands are refused before decoding, in
        // `a_setup_with_thousands_of_repeated_entries_is_refused_before_it_is_decoded`),
        // and every version there is.
        let mut suites: Vec<u32> = (1000..1015).collect();
        suites.push(AES_256_GCM_ID);
        let setup = wire::Setup {
            min_version: 1,
            max_version: u32::MAX,
            ephemeral_key: x25519_public(),
            suites,
            ..Default::default()
        };
        let encoded = prost::Message::encode_to_vec(&setup);
        assert!(encoded.len() < 4096, "{} bytes", encoded.len());
        let started = std::time::Instant::now();
        agreed_then_timed_out(acceptor_against(raw_frame(FrameKind::Setup, &encoded)).await);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "negotiation took {:?}",
            started.elapsed()
        );
    });
}

#[test]
fn a_setup_repeating_its_fields_a_hundred_times_is_one_setup() {
    runtime().block_on(async {
        // Protobuf merges a message sent again after itself: scalars take
        // the last value, lists grow (so the suite is listed once, within
        // the 16 a Setup may list). About a hundred copies fit the 4 KiB
        // limit.
        let first = wire::Setup {
            min_version: 1,
            max_version: 1,
            ephemeral_key: x25519_public(),
            suites: vec![AES_256_GCM_ID],
            ..Default::default()
        };
        let again = wire::Setup {
            suites: Vec::new(),
            ..first.clone()
        };
        let again = prost::Message::encode_to_vec(&again);
        let copies = 4000 / again.len();
        assert!(copies >= 90, "{copies} copies");
        let mut repeated = prost::Message::encode_to_vec(&first);
        repeated.extend(again.repeat(copies - 1));
        agreed_then_timed_out(acceptor_against(raw_frame(FrameKind::Setup, &repeated)).await);
    });
}

#[test]
fn a_truncated_setup_ends_at_the_handshake_deadline() {
    runtime().block_on(async {
        let whole = aes_setup_frame(&x25519_public());
        for cut in [1, 3, 4, whole.len() / 2, whole.len() - 1] {
            let err = acceptor_against(whole[..cut].to_vec()).await.unwrap_err();
            assert!(
                is_error(&err, ErrorKind::Timeout, "handshake did not finish within"),
                "cut at {cut}: {err:?}"
            );
        }
    });
}

/// Four bytes of a record header from a peer that has proven nothing:
/// before the identity proof, only records of the proof's size (and a
/// close's) are accepted, so the 64 KiB the record size allows is refused
/// at the header, before anything is reserved for it.
#[test]
fn before_the_identity_proof_a_header_declaring_64_kib_is_refused_at_once() {
    runtime().block_on(async {
        let mut raw = aes_setup_frame(&x25519_public());
        raw.extend([FrameKind::Data as u8, 0x01, 0x00, 0x10]); // 65,552 bytes
        reset_largest();
        let err = acceptor_against(raw).await.unwrap_err();
        let peak = largest();
        assert!(peak < 32 * 1024, "largest allocation {peak} bytes");
        assert_eq!(err.kind(), ErrorKind::Record, "{err:?}");
        assert_eq!(
            err.to_string(),
            // At most 512 bytes before the proof (docs/SECURITY.md).
            "peer sent a malformed frame: frame of 65552 bytes exceeds the maximum of 512"
        );
    });
}

/// A peer that sends an ephemeral key but offers no suites gets a
/// plaintext channel with no proofs (the key is ignored), so nothing holds
/// its records to the pre-authentication size.
#[test]
fn a_key_without_suites_is_ignored_and_records_are_not_held_small() {
    use tower::ServiceBuilder;
    use weft::{handshake::Versions, transport::ExistingTransport, NegotiateLayer, RecordSizeLayer};
    runtime().block_on(async {
        let (ours, mut theirs) = tokio::io::duplex(1 << 16);
        let setup = wire::Setup {
            min_version: 1,
            max_version: 2,
            ephemeral_key: x25519_public(),
            ..Default::default()
        };
        let mut wire = raw_frame(FrameKind::Setup, &prost::Message::encode_to_vec(&setup));
        wire.extend(raw_frame(FrameKind::Data, &[7u8; 4000]));
        theirs.write_all(&wire).await.unwrap();
        let mut acceptor = ServiceBuilder::new()
            .layer(RecordSizeLayer::dynamic())
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(ExistingTransport::new());
        let mut channel = acceptor.accept_transport(ours).await.unwrap().into_plaintext();
        let mut got = vec![0u8; 4000];
        channel.read_exact(&mut got).await.unwrap();
        assert_eq!(got, vec![7u8; 4000]);
    });
}

/// 2,000 empty protocol names (or 4,000 suite ids) fit in a 4 KiB Setup
/// and would decode to 48 KiB: counted before the decoding, they are an
/// invalid Setup, with no large allocation.
#[test]
fn a_setup_with_thousands_of_repeated_entries_is_refused_before_it_is_decoded() {
    runtime().block_on(async {
        let many_protocols = wire::Setup {
            min_version: 1,
            max_version: 2,
            ephemeral_key: x25519_public(),
            suites: vec![AES_256_GCM_ID],
            protocols: vec![String::new(); 2000],
            ..Default::default()
        };
        let many_suites = wire::Setup {
            suites: vec![AES_256_GCM_ID; 3500],
            protocols: Vec::new(),
            ..many_protocols.clone()
        };
        for setup in [many_protocols, many_suites] {
            let frame = raw_frame(FrameKind::Setup, &prost::Message::encode_to_vec(&setup));
            assert!(frame.len() <= 4096, "{} bytes", frame.len());
            let err = acceptor_against(frame).await.unwrap_err();
            assert!(
                is_error(&err, ErrorKind::Negotiation, "peer sent an invalid Setup"),
                "{err:?}"
            );
        }
    });
}
