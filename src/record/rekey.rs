//! Key update (protocol version 2, docs/PROTOCOL.md section 8.1): each
//! direction's traffic secret, and the keys that follow from it one
//! generation after another.
//!
//! ```text
//! secret(n+1) = HKDF-Expand(secret(n), "weft v2 next secret",  32)
//! key(n+1)    = HKDF-Expand(secret(n+1), "weft v2 key" || suite id, 32)
//! iv(n+1)     = HKDF-Expand(secret(n+1), "weft v2 iv"  || suite id, 24)
//! ```
//!
//! A sender seals a KeyUpdate record (empty) under its current key and
//! seals everything after it under the next; the receiver, having opened
//! it, opens everything after it under the next. The previous secret is
//! erased as soon as the next is derived: a key found later reveals no
//! record sealed before it.

use aws_lc_rs::hkdf;
use zeroize::Zeroizing;

/// Key updates a receiver opens in a row, with no data record between
/// them, before it ends the connection with `EXCESSIVE_LOAD`
/// ([`Repr::KeyUpdateFlood`](crate::error::Repr::KeyUpdateFlood); BoringSSL's
/// cap, docs/PROTOCOL.md section 8.1). A sender updates at most once per
/// record it seals, and only every few billion records unless told to.
pub(crate) const MAX_KEY_UPDATES_IN_A_ROW: u32 = 32;

use super::RecordKey;
use crate::terms::CipherSuite;

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand of `prk` with `info` (its pieces concatenated) into `out`
/// (at most 32 bytes here): the one expansion the key schedule uses.
pub(crate) fn hkdf_expand(prk: &hkdf::Prk, info: &[&[u8]], out: &mut [u8]) {
    prk.expand(info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF-SHA256 can expand 32 bytes");
}

fn expand(secret: &[u8; 32], label: &[u8], suite: Option<CipherSuite>, out: &mut [u8]) {
    let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
    let suite = suite.map(|s| [s.id() as u8]);
    hkdf_expand(&prk, &[label, suite.as_ref().map_or(&[][..], |s| &s[..])], out);
}

/// One direction's traffic secret: the source of its next key.
pub(crate) struct KeySchedule {
    suite: CipherSuite,
    secret: Zeroizing<[u8; 32]>,
    generation: u64,
}

impl std::fmt::Debug for KeySchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySchedule")
            .field("suite", &self.suite)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl KeySchedule {
    /// The schedule of a direction whose first key came from the handshake,
    /// with `secret` (derived alongside that key) as its traffic secret.
    pub(crate) fn new(suite: CipherSuite, secret: Zeroizing<[u8; 32]>) -> Self {
        Self {
            suite,
            secret,
            generation: 0,
        }
    }

    /// How many updates so far.
    #[cfg(test)]
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Moves to the next secret, erasing this one, and returns its key.
    pub(crate) fn next_key(&mut self) -> RecordKey {
        let (key, iv) = self.advance();
        RecordKey::new(self.suite, &key, iv)
    }

    /// Moves to the next secret, erasing this one: the next key and IV.
    fn advance(&mut self) -> (Zeroizing<[u8; 32]>, [u8; 24]) {
        let mut next = Zeroizing::new([0u8; 32]);
        expand(&self.secret, b"weft v2 next secret", None, &mut next[..]);
        // The old secret is wiped as it is replaced (Zeroizing).
        self.secret = next;
        self.generation += 1;
        let mut key = Zeroizing::new([0u8; 32]);
        let mut iv = [0u8; 24];
        expand(&self.secret, b"weft v2 key", Some(self.suite), &mut key[..]);
        expand(&self.secret, b"weft v2 iv", Some(self.suite), &mut iv);
        (key, iv)
    }
}

/// The first `n` steps of a direction's chain from `secret_0`: (secret,
/// key, IV) of each (for the protocol's test vectors).
#[cfg(test)]
pub(crate) fn key_chain_for_tests(
    suite: CipherSuite,
    secret_0: [u8; 32],
    n: usize,
) -> Vec<([u8; 32], [u8; 32], [u8; 24])> {
    let mut schedule = KeySchedule::new(suite, Zeroizing::new(secret_0));
    (0..n)
        .map(|_| {
            let (key, iv) = schedule.advance();
            (*schedule.secret, *key, iv)
        })
        .collect()
}

/// When a sender updates its key: every `every` records if set, and in any
/// case once half of either of the key's limits is used (records, or
/// AES-GCM's usage: RFC 8446 section 5.5, draft-irtf-cfrg-aead-limits), so
/// that no connection ever reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct UpdatePolicy {
    pub(crate) every: Option<u64>,
}

impl UpdatePolicy {
    pub(crate) fn due(&self, key: &RecordKey) -> bool {
        self.every.is_some_and(|every| key.sequence() >= every) || key.half_used()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedules(suite: CipherSuite) -> (KeySchedule, KeySchedule) {
        let secret = || Zeroizing::new([5u8; 32]);
        (
            KeySchedule::new(suite, secret()),
            KeySchedule::new(suite, secret()),
        )
    }

    #[test]
    fn both_ends_of_a_direction_derive_the_same_keys_one_generation_after_another() {
        let (mut sender, mut receiver) = schedules(CipherSuite::Aes256Gcm);
        for generation in 1..=3 {
            let mut seal = sender.next_key();
            let mut open = receiver.next_key();
            assert_eq!(sender.generation(), generation);
            let header = [3, 0, 0, 21];
            let mut record = b"hello".to_vec();
            let tag = seal.seal(&header, &mut record).unwrap();
            record.extend_from_slice(&tag);
            assert_eq!(open.open(&header, &mut record).unwrap(), b"hello");
        }
    }

    #[test]
    fn a_schedule_shows_its_suite_and_generation_and_not_its_secret() {
        let (mut schedule, _) = schedules(CipherSuite::Aes256Gcm);
        schedule.next_key();
        assert_eq!(
            format!("{schedule:?}"),
            "KeySchedule { suite: Aes256Gcm, generation: 1, .. }"
        );
    }

    #[test]
    fn each_generation_has_another_key() {
        let (mut sender, _) = schedules(CipherSuite::ChaCha20Poly1305);
        let mut first = sender.next_key();
        let mut second = sender.next_key();
        let header = [3, 0, 0, 21];
        let mut record = b"hello".to_vec();
        let tag = first.seal(&header, &mut record).unwrap();
        record.extend_from_slice(&tag);
        assert!(second.open(&header, &mut record).is_err());
    }

    #[test]
    fn the_policy_updates_every_n_records_or_at_half_the_key_s_limit() {
        let policy = UpdatePolicy { every: Some(3) };
        let mut key = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]);
        let header = [3, 0, 0, 17];
        for _ in 0..3 {
            assert!(!policy.due(&key));
            key.seal(&header, &mut [0u8]).unwrap();
        }
        assert!(policy.due(&key));
        let key = RecordKey::new(CipherSuite::Aes256Gcm, &[1; 32], [2; 24]).with_limits(u64::MAX, 100);
        let mut key = key;
        let default = UpdatePolicy::default();
        while !default.due(&key) {
            key.seal(&header, &mut [0u8; 16]).unwrap();
        }
        assert!(
            key.sequence() < 30,
            "half of 100 units at 2 a record: {}",
            key.sequence()
        );
    }

    /// For each run, that many key updates from a sender and then a data
    /// record: what an opener makes of them, in order, up to the first
    /// error; and the key updates it counted for a read budget.
    fn open_updates(runs: &[u32]) -> (Vec<Result<crate::frame::FrameKind, crate::Error>>, u32) {
        use bytes::BytesMut;

        use crate::{
            frame::FrameKind,
            record::{open::Opener, seal_frame, RecordKey},
            terms::CipherSuite,
        };
        let suite = CipherSuite::Aes256Gcm;
        let key = || {
            RecordKey::new(suite, &[1; 32], [2; 24])
                .with_schedule(KeySchedule::new(suite, zeroize::Zeroizing::new([3; 32])))
        };
        let mut sender = key();
        let mut wire = Vec::new();
        for &run in runs {
            for _ in 0..run {
                wire.extend(seal_frame(Some(&mut sender), FrameKind::KeyUpdate, &[]).unwrap());
                sender = sender.next().unwrap();
            }
            wire.extend(seal_frame(Some(&mut sender), FrameKind::Data, b"between").unwrap());
        }
        let mut opener = Opener::new(BytesMut::new(), 1 << 20);
        opener.set_limits(16 * 1024, 16);
        opener.authenticated();
        opener.set_key(key());
        opener.enable_key_update();
        opener.read_buf().extend_from_slice(&wire);
        let mut opened = Vec::new();
        while let Some(frame) = opener.next_frame().unwrap() {
            let result = opener.open(frame).map(|(kind, _)| kind);
            let failed = result.is_err();
            opened.push(result);
            if failed {
                break;
            }
        }
        (opened, opener.take_key_updates())
    }

    #[test]
    fn thirty_two_key_updates_in_a_row_are_opened_and_the_thirty_third_ends_the_connection() {
        use crate::{error::Repr, frame::FrameKind, CloseCode};
        // Runs of 32 with data between: all opened.
        let (opened, counted) = open_updates(&[32, 32, 1]);
        assert_eq!(opened.len(), 32 + 1 + 32 + 1 + 1 + 1);
        // What the driver's read budget counts them by.
        assert_eq!(counted, 65);
        assert!(opened.iter().all(Result::is_ok));
        assert_eq!(
            opened.iter().filter(|k| matches!(k, Ok(FrameKind::Data))).count(),
            3
        );
        // 33 in a row: the 33rd is a flood.
        let (opened, _) = open_updates(&[33]);
        assert_eq!(opened.len(), 33);
        let err = opened.last().unwrap().as_ref().unwrap_err();
        assert!(matches!(err.repr(), Repr::KeyUpdateFlood(32)), "{err}");
        assert_eq!(err.close_code(), CloseCode::EXCESSIVE_LOAD);
    }
}
