//! RecordKey: seal and open, nonces, limits, and what it shows.

use super::*;

#[test]
fn a_sealed_record_opens_once_and_its_replay_fails() {
    let mut sender = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]);
    let mut receiver = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]);
    let header = [3, 0, 0, 21];
    let mut record = b"hello".to_vec();
    let tag = sender.seal(&header, &mut record).unwrap();
    record.extend_from_slice(&tag);
    assert_eq!(receiver.open(&header, &mut record).unwrap(), b"hello");
    // The same record again is a replay.
    assert!(receiver.open(&header, &mut record).is_err());
}

fn pair(suite: CipherSuite) -> (RecordKey, RecordKey) {
    (
        RecordKey::new(suite, &[7; 32], [1; 24]),
        RecordKey::new(suite, &[7; 32], [1; 24]),
    )
}

fn sealed(key: &mut RecordKey, text: &[u8]) -> Vec<u8> {
    let mut buf = text.to_vec();
    let tag = key.seal(b"hdr\x00", &mut buf).unwrap();
    buf.extend_from_slice(&tag);
    buf
}

#[test]
fn an_xsalsa20_record_is_crypto_secretbox_under_the_counter_nonce_with_the_header_xored_in() {
    use crypto_secretbox::{aead::AeadInPlace, KeyInit, XSalsa20Poly1305};

    let iv: [u8; 24] = std::array::from_fn(|i| 0x40 + i as u8);
    let mut key = RecordKey::new(CipherSuite::XSalsa20Poly1305, &[7; 32], iv);
    sealed(&mut key, b"the first record");
    let header = [0x81, 0x02, 0x00, 0x15];
    let mut record = *b"the second record";
    let tag = key.seal(&header, &mut record).unwrap();
    // PROTOCOL.md: the IV, XOR the record's number (big-endian) in its last
    // 8 bytes, XOR the frame header in its first 4.
    let mut nonce = iv;
    nonce[23] ^= 1;
    for (n, h) in nonce.iter_mut().zip(header) {
        *n ^= h;
    }
    let mut expected = *b"the second record";
    let expected_tag = XSalsa20Poly1305::new(&[7; 32].into())
        .encrypt_in_place_detached(&nonce.into(), b"", &mut expected)
        .unwrap();
    assert_eq!(record, expected);
    assert_eq!(tag[..], expected_tag[..]);
}

#[test]
fn a_key_s_debug_shows_its_counter_and_no_key_material() {
    let (mut key, _) = pair(CipherSuite::XSalsa20Poly1305);
    sealed(&mut key, b"one");
    let shown = format!("{key:?}");
    assert!(shown.starts_with("RecordKey { sequence: 1, limit: "), "{shown}");
    assert!(!shown.contains("[7, 7") && !shown.contains("[1, 1"), "{shown}");
}

#[test]
fn xchacha20_poly1305_matches_the_drafts_test_vector() {
    // draft-irtf-cfrg-xchacha-03, appendix A.3.1: the first record
    // (sequence 0) uses the IV as its nonce.
    let key: [u8; 32] = std::array::from_fn(|i| 0x80 + i as u8);
    let iv: [u8; 24] = std::array::from_fn(|i| 0x40 + i as u8);
    let aad = [
        0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
    ];
    let plaintext = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let mut key = RecordKey::new(CipherSuite::XChaCha20Poly1305, &key, iv);
    let mut buf = plaintext.to_vec();
    let tag = key.seal(&aad, &mut buf).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(hex(&buf[..16]), "bd6d179d3e83d43b9576579493c0e939");
    assert_eq!(hex(&tag), "c0875924c1c7987947deafd8780acf49");
}

#[test]
fn replayed_reordered_dropped_and_flipped_records_fail() {
    for suite in [
        CipherSuite::Aes256Gcm,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::XChaCha20Poly1305,
    ] {
        let (mut seal, mut open) = pair(suite);
        let r0 = sealed(&mut seal, b"zero");
        let r1 = sealed(&mut seal, b"one");
        let r2 = sealed(&mut seal, b"two");

        // In order: fine.
        assert_eq!(open.open(b"hdr\x00", &mut r0.clone()).unwrap(), b"zero");
        // Replay of record 0 as record 1: refused.
        assert!(matches!(
            open.clone_state()
                .open(b"hdr\x00", &mut r0.clone())
                .as_ref()
                .map_err(Error::repr),
            Err(Repr::BadRecord { sequence: 1 })
        ));
        // Record 2 before record 1 (reordered, or 1 dropped): refused.
        assert!(open.clone_state().open(b"hdr\x00", &mut r2.clone()).is_err());
        // A flipped bit anywhere, or another header: refused.
        for i in 0..r1.len() {
            let mut bad = r1.clone();
            bad[i] ^= 0x40;
            assert!(
                open.clone_state().open(b"hdr\x00", &mut bad).is_err(),
                "{suite} byte {i}"
            );
        }
        assert!(open.clone_state().open(b"HDR\x00", &mut r1.clone()).is_err());
        assert!(open
            .clone_state()
            .open(b"hdr\x00", &mut r1[..10].to_vec())
            .is_err());
        assert_eq!(open.open(b"hdr\x00", &mut r1.clone()).unwrap(), b"one");
        assert_eq!(open.open(b"hdr\x00", &mut r2.clone()).unwrap(), b"two");
    }
}

#[test]
fn sealing_stops_at_the_record_limit_keeping_one_for_the_close() {
    let mut key = RecordKey::new(CipherSuite::Aes256Gcm, &[7; 32], [1; 24]).with_limits(3, u64::MAX);
    for _ in 0..2 {
        sealed(&mut key, b"x");
    }
    assert!(matches!(
        key.seal(b"hdr\x00", &mut [0u8; 4]).as_ref().map_err(Error::repr),
        Err(Repr::KeyExhausted(2))
    ));
    key.seal_final(b"hdr\x00", &mut [0u8; 4]).unwrap();
    assert!(matches!(
        key.seal_final(b"hdr\x00", &mut [0u8; 4])
            .as_ref()
            .map_err(Error::repr),
        Err(Repr::KeyExhausted(3))
    ));
}

#[test]
fn a_close_frame_is_sealed_from_the_reserve_a_data_frame_may_not_use() {
    let mut key = RecordKey::new(CipherSuite::ChaCha20Poly1305, &[7; 32], [1; 24]).with_limits(2, u64::MAX);
    seal_frame(Some(&mut key), FrameKind::Data, b"one").unwrap();
    let exhausted = seal_frame(Some(&mut key), FrameKind::Data, b"two").unwrap_err();
    assert!(matches!(exhausted.repr(), Repr::KeyExhausted(1)), "{exhausted}");
    let close = seal_frame(Some(&mut key), FrameKind::Close, b"\0\0\0\x08").unwrap();
    assert_eq!(close.len(), HEADER_LEN + 4 + MAX_TAG_LEN);
    assert_eq!(key.sequence(), 2);
}

#[test]
fn aes_gcm_usage_counts_blocks_and_records_keeping_the_close_in_reserve() {
    // Two 5-byte records cost one block and one record each.
    let reserve = FINAL_RECORD_RESERVE;
    let mut key =
        RecordKey::new(CipherSuite::Aes256Gcm, &[7; 32], [1; 24]).with_limits(u64::MAX, 4 + reserve);
    sealed(&mut key, b"12345");
    sealed(&mut key, b"12345");
    assert!(matches!(
        key.seal(b"hdr\x00", &mut [0u8; 1]).as_ref().map_err(Error::repr),
        Err(Repr::KeyExhausted(2))
    ));
    // The close record may use the reserve: the largest one fits.
    key.seal_final(b"hdr\x00", &mut [0u8; 260]).unwrap();
    assert!(key.seal_final(b"hdr\x00", &mut [0u8; 1]).is_err());
}

#[test]
fn aes_gcm_keys_stop_at_tls_13s_margin_however_records_are_cut() {
    // RFC 8446 section 5.5: 2^24.5 full-size (16 KiB) records.
    let full_tls_records = AES_GCM_UNIT_LIMIT / units(16 * 1024);
    assert_eq!(full_tls_records, 23_726_566);
    assert_eq!(full_tls_records, (2f64.powf(24.5)) as u64);
    // One-byte records: each costs a block and a record, so a key seals
    // at most about 2^33.5 of them, not the 2^38 a byte count allowed.
    let tiny = AES_GCM_UNIT_LIMIT / units(1);
    assert!(tiny < 1 << 34, "{tiny}");
    // 64 KiB records get no more volume than TLS's 16 KiB ones (a
    // hair more, for fewer records: 0.07%), not four times as much.
    let volume = |size: usize| AES_GCM_UNIT_LIMIT / units(size) * size as u64;
    assert!(volume(64 * 1024) * 1000 <= volume(16 * 1024) * 1001);
    // The other suites' only limit is the nonce counter.
    let chacha = RecordKey::new(CipherSuite::ChaCha20Poly1305, &[7; 32], [1; 24]);
    assert_eq!(chacha.usage_limit, u64::MAX);
    assert_eq!(chacha.limit, RECORD_LIMIT);
}

#[test]
fn nonces_differ_for_every_record() {
    let mut key = RecordKey::new(CipherSuite::Aes256Gcm, &[7; 32], [0xaa; 24]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..1000 {
        assert!(seen.insert(key.nonce()));
        key.sequence += 1;
    }
}

impl RecordKey {
    /// A copy at the same position (the tests' key is always [7; 32]),
    /// to try a record without consuming the original's counter.
    fn clone_state(&self) -> RecordKey {
        let cipher = match &self.cipher {
            Cipher::AwsLc(key) => aws_lc_key(key.algorithm(), &[7; 32]),
            Cipher::Salsa(_) => Cipher::Salsa(SecretBox::new(&[7; 32])),
            Cipher::XChaCha(_) => Cipher::XChaCha(XChaCha::new(&[7; 32])),
        };
        RecordKey {
            cipher,
            iv: self.iv,
            sequence: self.sequence,
            limit: self.limit,
            used: self.used,
            usage_limit: self.usage_limit,
            schedule: None,
        }
    }
}
