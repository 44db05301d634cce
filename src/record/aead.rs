//! Record keys: one AEAD key and a nonce counter per direction.
//!
//! The nonce for record `n` is the direction's IV XOR `n` (big-endian, in
//! the last 8 bytes), so nonces are implicit, never sent, and never repeat
//! under one key. A key refuses to seal once its counter reaches the suite's
//! limit, long before it could wrap.
//!
//! The frame header is authenticated with each record: as associated data
//! for the aws-lc suites (AES-256-GCM, ChaCha20-Poly1305) and
//! XChaCha20-Poly1305, and for XSalsa20-Poly1305,
//! whose NaCl secretbox construction takes no associated data, by XOR-ing it
//! into the first bytes of the 24-byte nonce (bytes the counter never
//! touches), so a changed header opens under another nonce and fails.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

use zeroize::Zeroize;

use super::{rekey::KeySchedule, secretbox::SecretBox, xchacha::XChaCha, MAX_CLOSE_REASON};
use crate::{
    error::{Error, Repr},
    frame::{Frame, FrameKind, HEADER_LEN},
    terms::CipherSuite,
};

/// Header bytes bound into the XSalsa20 nonce (a whole frame header).
const HEADER_BINDING: usize = HEADER_LEN;

/// The tag every encrypting suite appends to a record.
pub(crate) const MAX_TAG_LEN: usize = 16;

/// Records per key for every suite: the nonce counter is 64 bits; stop
/// well before it could wrap.
const RECORD_LIMIT: u64 = 1 << 62;

/// What AES-GCM may protect under one key, in *units*: each record costs
/// one unit per 16-byte block of plaintext, plus one for the record itself.
///
/// AES-GCM's confidentiality advantage grows with the square of the
/// blocks and records protected under one key (draft-irtf-cfrg-aead-limits,
/// section 5.1: about `((s + q + 1)^2) / 2^129` for `s` blocks in `q`
/// records). RFC 8446 section 5.5 stops TLS 1.3 at 2^24.5 full-size
/// records of 2^14 bytes: 1,024 blocks and one record each. weft allows
/// exactly that usage, however it is cut into records, so tiny records
/// cannot take a key past TLS's margin (counting bytes alone allowed about
/// 2^38 one-byte records) and 64 KiB records do not get four times TLS's
/// volume.
const AES_GCM_UNIT_LIMIT: u64 = 23_726_566 * (1024 + 1);

/// The units a record of `len` plaintext bytes costs.
fn units(len: usize) -> u64 {
    len.div_ceil(16) as u64 + 1
}

/// Units of a key's usage kept back for its final (close) record.
const FINAL_RECORD_RESERVE: u64 = (4 + MAX_CLOSE_REASON as u64).div_ceil(16) + 1;

// Two keys per connection: inline beats a pointer chase on every record.
#[allow(clippy::large_enum_variant)]
enum Cipher {
    /// AES-256-GCM and ChaCha20-Poly1305, from aws-lc-rs.
    AwsLc(LessSafeKey),
    Salsa(SecretBox),
    XChaCha(XChaCha),
}

/// A key for one direction with its record counter: the sans-IO record
/// protection a channel uses. Each sealed record consumes one sequence
/// number; the opener must see records in the same order.
///
/// A key wipes its IV when dropped. The 32-byte key it is made from is the
/// caller's to wipe (weft's key schedule does); every cipher wipes its own
/// key material on drop: weft's XSalsa20-Poly1305 and XChaCha20-Poly1305
/// their copies, aws-lc the expanded AES-256-GCM and ChaCha20-Poly1305 keys
/// it holds (its allocator cleanses what it frees; docs/PROTOCOL.md,
/// section 14).
pub(crate) struct RecordKey {
    cipher: Cipher,
    iv: [u8; 24],
    sequence: u64,
    limit: u64,
    /// Usage so far, in the units of [`AES_GCM_UNIT_LIMIT`].
    used: u64,
    usage_limit: u64,
    /// Where the next key of this direction comes from (key update).
    schedule: Option<Box<KeySchedule>>,
}

impl Drop for RecordKey {
    fn drop(&mut self) {
        self.iv.zeroize();
    }
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
    pub(crate) fn new(suite: CipherSuite, key: &[u8; 32], iv: [u8; 24]) -> Self {
        let (cipher, usage_limit) = match suite {
            CipherSuite::Aes256Gcm => (aws_lc_key(&aead::AES_256_GCM, key), AES_GCM_UNIT_LIMIT),
            CipherSuite::ChaCha20Poly1305 => (aws_lc_key(&aead::CHACHA20_POLY1305, key), u64::MAX),
            CipherSuite::XSalsa20Poly1305 => (Cipher::Salsa(SecretBox::new(key)), u64::MAX),
            CipherSuite::XChaCha20Poly1305 => (Cipher::XChaCha(XChaCha::new(key)), u64::MAX),
            CipherSuite::Plaintext => panic!("plaintext has no record key"),
        };
        Self {
            cipher,
            iv,
            sequence: 0,
            limit: RECORD_LIMIT,
            used: 0,
            usage_limit,
            schedule: None,
        }
    }

    /// This key, with `schedule` to derive the keys that follow it.
    pub(crate) fn with_schedule(mut self, schedule: KeySchedule) -> Self {
        self.schedule = Some(Box::new(schedule));
        self
    }

    /// The next key of this direction (key update), if it has a schedule;
    /// this one should be dropped for it.
    pub(crate) fn next(&mut self) -> Option<RecordKey> {
        let mut schedule = self.schedule.take()?;
        let mut next = schedule.next_key();
        next.schedule = Some(schedule);
        // Limits lowered for tests carry over.
        next.limit = self.limit;
        next.usage_limit = self.usage_limit;
        Some(next)
    }

    /// Records sealed or opened with this key so far.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Whether half of either limit (records, AES-GCM usage) is spent: time
    /// for a key update.
    pub(crate) fn half_used(&self) -> bool {
        self.sequence >= self.limit / 2 || self.used >= self.usage_limit / 2
    }

    /// Lowers the record limit and the usage limit (in units of one per
    /// 16-byte block plus one per record), so tests can exercise
    /// exhaustion at an exact record.
    #[cfg(test)]
    pub(crate) fn with_limits(mut self, records: u64, units: u64) -> Self {
        self.limit = records;
        self.usage_limit = units;
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
    pub(crate) fn seal(&mut self, header: &[u8], in_out: &mut [u8]) -> Result<[u8; MAX_TAG_LEN], Error> {
        let used = self.used.saturating_add(units(in_out.len()));
        if self.sequence.saturating_add(1) >= self.limit
            || used > self.usage_limit.saturating_sub(FINAL_RECORD_RESERVE)
        {
            return Err(Repr::KeyExhausted(self.sequence).into());
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
        let used = self.used.saturating_add(units(in_out.len()));
        if self.sequence >= self.limit || used > self.usage_limit {
            return Err(Repr::KeyExhausted(self.sequence).into());
        }
        let nonce = self.nonce();
        let mut tag = [0u8; MAX_TAG_LEN];
        match &self.cipher {
            Cipher::AwsLc(key) => {
                let t = key
                    .seal_in_place_separate_tag(aws_lc_nonce(&nonce), Aad::from(header), in_out)
                    .map_err(|_| Repr::KeyExhausted(self.sequence))?;
                tag.copy_from_slice(t.as_ref());
            }
            Cipher::Salsa(key) => tag = key.seal(&self.salsa_nonce(header), in_out),
            Cipher::XChaCha(key) => {
                tag = key
                    .seal(&nonce, header, in_out)
                    .ok_or(Repr::KeyExhausted(self.sequence))?;
            }
        }
        self.sequence += 1;
        self.used = used;
        Ok(tag)
    }

    /// Decrypts `in_out` (ciphertext then tag) in place and returns the
    /// plaintext part. Fails if the record was modified, replayed,
    /// reordered, or one before it was dropped.
    pub(crate) fn open<'a>(&mut self, header: &[u8], in_out: &'a mut [u8]) -> Result<&'a mut [u8], Error> {
        let sequence = self.sequence;
        let bad = || Repr::BadRecord { sequence };
        if sequence >= self.limit || in_out.len() < MAX_TAG_LEN {
            return Err(bad().into());
        }
        let nonce = self.nonce();
        let plaintext = match &self.cipher {
            Cipher::AwsLc(key) => key
                .open_in_place(aws_lc_nonce(&nonce), Aad::from(header), in_out)
                .map_err(|_| bad())?,
            Cipher::Salsa(key) => {
                let (text, tag) = in_out.split_at_mut(in_out.len() - MAX_TAG_LEN);
                key.open(&self.salsa_nonce(header), text, tag)
                    .map_err(|_| bad())?;
                text
            }
            Cipher::XChaCha(key) => {
                let (text, tag) = in_out.split_at_mut(in_out.len() - MAX_TAG_LEN);
                key.open(&nonce, header, text, tag).map_err(|_| bad())?;
                text
            }
        };
        self.sequence += 1;
        Ok(plaintext)
    }
}

/// A whole record: the header, then `payload` sealed under `key` (a close
/// record may use the key's reserve), or in the clear without a key.
pub(crate) fn seal_frame(
    key: Option<&mut RecordKey>,
    kind: FrameKind,
    payload: &[u8],
) -> Result<Vec<u8>, Error> {
    let tag_len = if key.is_some() { MAX_TAG_LEN } else { 0 };
    let header = kind.header(payload.len() + tag_len);
    let mut frame = Vec::with_capacity(HEADER_LEN + payload.len() + tag_len);
    frame.extend_from_slice(&header);
    frame.extend_from_slice(payload);
    if let Some(key) = key {
        let tag = match kind {
            FrameKind::Close => key.seal_final(&header, &mut frame[HEADER_LEN..])?,
            _ => key.seal(&header, &mut frame[HEADER_LEN..])?,
        };
        frame.extend_from_slice(&tag);
    }
    Ok(frame)
}

/// A record's plaintext, opened in place under `key` (or as it came,
/// without a key).
pub(crate) fn open_frame<'a>(key: Option<&mut RecordKey>, frame: &'a mut Frame) -> Result<&'a [u8], Error> {
    match key {
        Some(key) => Ok(key.open(&frame.header, &mut frame.payload)?),
        None => Ok(&frame.payload),
    }
}

fn aws_lc_key(alg: &'static aead::Algorithm, key: &[u8; 32]) -> Cipher {
    Cipher::AwsLc(LessSafeKey::new(UnboundKey::new(alg, key).expect("32-byte key")))
}

fn aws_lc_nonce(nonce: &[u8; 24]) -> Nonce {
    Nonce::assume_unique_for_key(nonce[12..].try_into().expect("12 bytes"))
}

#[cfg(test)]
#[path = "tests/aead.rs"]
mod tests;
