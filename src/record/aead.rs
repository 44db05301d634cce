//! Record keys: one AEAD key and a nonce counter per direction.
//!
//! The nonce for record `n` is the direction's IV XOR `n` (big-endian, in
//! the last 8 bytes), so nonces are implicit, never sent, and never repeat
//! under one key. A key refuses to seal once its counter reaches the suite's
//! limit, long before it could wrap.
//!
//! The frame header is authenticated with each record: as associated data
//! for the ring suites and XChaCha20-Poly1305, and for XSalsa20-Poly1305,
//! whose NaCl secretbox construction takes no associated data, by XOR-ing it
//! into the first bytes of the 24-byte nonce (bytes the counter never
//! touches), so a changed header opens under another nonce and fails.

use chacha20poly1305::XChaCha20Poly1305;
use crypto_secretbox::{aead::AeadInPlace, KeyInit, XSalsa20Poly1305};
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

use super::MAX_CLOSE_REASON;
use crate::{error::Error, handshake::CipherSuite};

/// Header bytes bound into the XSalsa20 nonce (a whole frame header).
const HEADER_BINDING: usize = crate::frame::HEADER_LEN;

/// Bytes of a key's volume kept back for its final (close) record.
const FINAL_RECORD_RESERVE: u64 = 4 + MAX_CLOSE_REASON as u64;

/// The tag every encrypting suite appends to a record.
pub const MAX_TAG_LEN: usize = 16;

/// Records per key for every suite: the nonce counter is 64 bits; stop
/// well before it could wrap.
const RECORD_LIMIT: u64 = 1 << 62;
/// Bytes AES-GCM may seal under one key. AES-GCM's confidentiality bound
/// depends on the data volume: TLS 1.3 (RFC 8446 §5.5) allows 2^24.5 records
/// of 2^14 bytes, 2^38.5 bytes; weft stops at 2^38 (256 GiB). ChaCha20,
/// XSalsa20 and XChaCha20 have no practical volume limit short of the
/// counter.
const AES_GCM_BYTE_LIMIT: u64 = 1 << 38;

// Two keys per connection: inline beats a pointer chase on every record.
#[allow(clippy::large_enum_variant)]
enum Cipher {
    Ring(LessSafeKey),
    Salsa(XSalsa20Poly1305),
    XChaCha(XChaCha20Poly1305),
}

/// A key for one direction with its record counter: the sans-IO record
/// protection a channel uses. Each sealed record consumes one sequence
/// number; the opener must see records in the same order.
///
/// ```
/// use weft::{record::RecordKey, CipherSuite};
///
/// let mut sender = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]);
/// let mut receiver = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]);
/// let header = [3, 0, 0, 21];
/// let mut record = b"hello".to_vec();
/// let tag = sender.seal(&header, &mut record).unwrap();
/// record.extend_from_slice(&tag);
/// assert_eq!(receiver.open(&header, &mut record).unwrap(), b"hello");
/// // The same record again is a replay.
/// assert!(receiver.open(&header, &mut record).is_err());
/// ```
pub struct RecordKey {
    cipher: Cipher,
    iv: [u8; 24],
    sequence: u64,
    limit: u64,
    sealed_bytes: u64,
    byte_limit: u64,
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordKey")
            .field("sequence", &self.sequence)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl RecordKey {
    /// A key for `suite`.
    ///
    /// # Panics
    ///
    /// For [`CipherSuite::Plaintext`], which has no key.
    pub fn new(suite: CipherSuite, key: &[u8; 32], iv: [u8; 24]) -> Self {
        let (cipher, byte_limit) = match suite {
            CipherSuite::Aes256Gcm => (ring_key(&aead::AES_256_GCM, key), AES_GCM_BYTE_LIMIT),
            CipherSuite::ChaCha20Poly1305 => (ring_key(&aead::CHACHA20_POLY1305, key), u64::MAX),
            CipherSuite::XSalsa20Poly1305 => (Cipher::Salsa(XSalsa20Poly1305::new(key.into())), u64::MAX),
            CipherSuite::XChaCha20Poly1305 => (Cipher::XChaCha(XChaCha20Poly1305::new(key.into())), u64::MAX),
            CipherSuite::Plaintext => panic!("plaintext has no record key"),
        };
        Self {
            cipher,
            iv,
            sequence: 0,
            limit: RECORD_LIMIT,
            sealed_bytes: 0,
            byte_limit,
        }
    }

    /// Lowers the record and byte limits (tests exercise exhaustion with it).
    #[cfg(test)]
    pub(crate) fn with_limits(mut self, records: u64, bytes: u64) -> Self {
        self.limit = records;
        self.byte_limit = bytes;
        self
    }

    fn nonce(&self) -> [u8; 24] {
        let mut nonce = self.iv;
        for (n, s) in nonce[16..].iter_mut().zip(self.sequence.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }

    /// The XSalsa20 nonce: the counter nonce with the header in bytes 0..4.
    fn salsa_nonce(&self, header: &[u8]) -> [u8; 24] {
        let mut nonce = self.nonce();
        for (n, h) in nonce[..HEADER_BINDING].iter_mut().zip(header) {
            *n ^= h;
        }
        nonce
    }

    /// Encrypts `in_out` in place, authenticating `header` too, and returns
    /// the tag to append. Keeps back one record of the key's limits, so
    /// that a used-up key can still seal the close record that says so.
    pub fn seal(&mut self, header: &[u8], in_out: &mut [u8]) -> Result<[u8; MAX_TAG_LEN], Error> {
        let sealed_bytes = self.sealed_bytes.saturating_add(in_out.len() as u64);
        if self.sequence.saturating_add(1) >= self.limit
            || sealed_bytes > self.byte_limit.saturating_sub(FINAL_RECORD_RESERVE)
        {
            return Err(Error::KeyExhausted(self.sequence));
        }
        self.seal_final(header, in_out)
    }

    /// Seals the last record this key will seal (a close record), using
    /// the reserve [`seal`](Self::seal) keeps back.
    pub(crate) fn seal_final(
        &mut self,
        header: &[u8],
        in_out: &mut [u8],
    ) -> Result<[u8; MAX_TAG_LEN], Error> {
        let sealed_bytes = self.sealed_bytes.saturating_add(in_out.len() as u64);
        if self.sequence >= self.limit || sealed_bytes > self.byte_limit {
            return Err(Error::KeyExhausted(self.sequence));
        }
        let nonce = self.nonce();
        let mut tag = [0u8; MAX_TAG_LEN];
        match &self.cipher {
            Cipher::Ring(key) => {
                let t = key
                    .seal_in_place_separate_tag(ring_nonce(&nonce), Aad::from(header), in_out)
                    .map_err(|_| Error::KeyExhausted(self.sequence))?;
                tag.copy_from_slice(t.as_ref());
            }
            Cipher::Salsa(key) => {
                let t = key
                    .encrypt_in_place_detached(&self.salsa_nonce(header).into(), &[], in_out)
                    .map_err(|_| Error::KeyExhausted(self.sequence))?;
                tag.copy_from_slice(&t);
            }
            Cipher::XChaCha(key) => {
                let t = key
                    .encrypt_in_place_detached(&nonce.into(), header, in_out)
                    .map_err(|_| Error::KeyExhausted(self.sequence))?;
                tag.copy_from_slice(&t);
            }
        }
        self.sequence += 1;
        self.sealed_bytes = sealed_bytes;
        Ok(tag)
    }

    /// Decrypts `in_out` (ciphertext then tag) in place and returns the
    /// plaintext part. Fails if the record was modified, replayed,
    /// reordered, or one before it was dropped.
    pub fn open<'a>(&mut self, header: &[u8], in_out: &'a mut [u8]) -> Result<&'a mut [u8], Error> {
        let sequence = self.sequence;
        let bad = || Error::BadRecord { sequence };
        if sequence >= self.limit || in_out.len() < MAX_TAG_LEN {
            return Err(bad());
        }
        let nonce = self.nonce();
        let plaintext = match &self.cipher {
            Cipher::Ring(key) => key
                .open_in_place(ring_nonce(&nonce), Aad::from(header), in_out)
                .map_err(|_| bad())?,
            Cipher::Salsa(key) => {
                let (text, tag) = in_out.split_at_mut(in_out.len() - MAX_TAG_LEN);
                key.decrypt_in_place_detached(&self.salsa_nonce(header).into(), &[], text, (&*tag).into())
                    .map_err(|_| bad())?;
                text
            }
            Cipher::XChaCha(key) => {
                let (text, tag) = in_out.split_at_mut(in_out.len() - MAX_TAG_LEN);
                key.decrypt_in_place_detached(&nonce.into(), header, text, (&*tag).into())
                    .map_err(|_| bad())?;
                text
            }
        };
        self.sequence += 1;
        Ok(plaintext)
    }
}

fn ring_key(alg: &'static aead::Algorithm, key: &[u8; 32]) -> Cipher {
    Cipher::Ring(LessSafeKey::new(UnboundKey::new(alg, key).expect("32-byte key")))
}

fn ring_nonce(nonce: &[u8; 24]) -> Nonce {
    Nonce::assume_unique_for_key(nonce[12..].try_into().expect("12 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
                open.clone_state().open(b"hdr\x00", &mut r0.clone()),
                Err(Error::BadRecord { sequence: 1 })
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
            key.seal(b"hdr\x00", &mut [0u8; 4]),
            Err(Error::KeyExhausted(2))
        ));
        key.seal_final(b"hdr\x00", &mut [0u8; 4]).unwrap();
        assert!(matches!(
            key.seal_final(b"hdr\x00", &mut [0u8; 4]),
            Err(Error::KeyExhausted(3))
        ));
    }

    #[test]
    fn sealing_stops_at_the_byte_limit() {
        let reserve = FINAL_RECORD_RESERVE;
        let mut key =
            RecordKey::new(CipherSuite::Aes256Gcm, &[7; 32], [1; 24]).with_limits(u64::MAX, 10 + reserve);
        sealed(&mut key, b"12345");
        sealed(&mut key, b"12345");
        assert!(matches!(
            key.seal(b"hdr\x00", &mut [0u8; 1]),
            Err(Error::KeyExhausted(2))
        ));
        key.seal_final(b"hdr\x00", &mut [0u8; 100]).unwrap();
        // The default limits: only AES-GCM has a volume limit.
        assert_eq!(
            RecordKey::new(CipherSuite::Aes256Gcm, &[7; 32], [1; 24]).byte_limit,
            1 << 38
        );
        assert_eq!(
            RecordKey::new(CipherSuite::ChaCha20Poly1305, &[7; 32], [1; 24]).byte_limit,
            u64::MAX
        );
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
                Cipher::Ring(key) => ring_key(key.algorithm(), &[7; 32]),
                Cipher::Salsa(_) => Cipher::Salsa(XSalsa20Poly1305::new((&[7u8; 32]).into())),
                Cipher::XChaCha(_) => Cipher::XChaCha(XChaCha20Poly1305::new((&[7u8; 32]).into())),
            };
            RecordKey {
                cipher,
                iv: self.iv,
                sequence: self.sequence,
                limit: self.limit,
                sealed_bytes: self.sealed_bytes,
                byte_limit: self.byte_limit,
            }
        }
    }
}
