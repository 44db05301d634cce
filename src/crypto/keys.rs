//! The key schedule: one X25519 shared secret and the transcript hash in,
//! one record key per direction out.
//!
//! ```text
//! prk          = HKDF-Extract(salt = transcript hash, ikm = X25519 shared secret)
//! key(dir)     = HKDF-Expand(prk, "weft v1 " || dir || " key" || suite id, 32)
//! iv(dir)      = HKDF-Expand(prk, "weft v1 " || dir || " iv"  || suite id, 24)
//! ```
//!
//! `dir` is `dialer` for what the dialer sends and `acceptor` for what the
//! acceptor sends, so the two directions never share a key. With version 2,
//! each direction's traffic secret is the source of its later keys (key
//! update, `record::rekey`):
//!
//! ```text
//! secret(dir)  = HKDF-Expand(prk, "weft v1 " || dir || " secret" || suite id, 32)
//! ```

use aws_lc_rs::hkdf;
use zeroize::Zeroizing;

use crate::{
    handshake::{CipherSuite, Role},
    record::{hkdf_expand, KeySchedule, RecordKey},
};

fn expand(prk: &hkdf::Prk, dir: Role, what: &str, suite: CipherSuite, out: &mut [u8]) {
    let dir: &[u8] = match dir {
        Role::Dialer => b"dialer",
        Role::Acceptor => b"acceptor",
    };
    let suite = [suite.id() as u8];
    hkdf_expand(prk, &[b"weft v1 ".as_slice(), dir, what.as_bytes(), &suite], out);
}

fn direction_key(prk: &hkdf::Prk, dir: Role, suite: CipherSuite) -> RecordKey {
    let mut key = Zeroizing::new([0u8; 32]);
    let mut iv = [0u8; 24];
    let mut secret = Zeroizing::new([0u8; 32]);
    expand(prk, dir, " key", suite, &mut key[..]);
    expand(prk, dir, " iv", suite, &mut iv);
    expand(prk, dir, " secret", suite, &mut secret[..]);
    RecordKey::new(suite, &key, iv).with_schedule(KeySchedule::new(suite, secret))
}

/// Derives `(sealing key, opening key)` for `role`.
pub(crate) fn derive_record_keys(
    suite: CipherSuite,
    shared_secret: &[u8; 32],
    transcript: &[u8; 32],
    role: Role,
) -> (RecordKey, RecordKey) {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, transcript).extract(shared_secret);
    (
        direction_key(&prk, role, suite),
        direction_key(&prk, role.peer(), suite),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_opens_what_the_other_seals() {
        for suite in [
            CipherSuite::Aes256Gcm,
            CipherSuite::ChaCha20Poly1305,
            CipherSuite::XSalsa20Poly1305,
            CipherSuite::XChaCha20Poly1305,
        ] {
            let (mut d_seal, mut d_open) = derive_record_keys(suite, &[1; 32], &[2; 32], Role::Dialer);
            let (mut a_seal, mut a_open) = derive_record_keys(suite, &[1; 32], &[2; 32], Role::Acceptor);
            let header = [3, 0, 0, 21];
            let mut buf = b"hello".to_vec();
            let tag = d_seal.seal(&header, &mut buf).unwrap();
            buf.extend_from_slice(&tag);
            assert_eq!(a_open.open(&header, &mut buf).unwrap(), b"hello");

            // The reverse direction uses another key: a record sealed by the
            // acceptor does not open with the acceptor's own opening key.
            let mut buf = b"back".to_vec();
            let tag = a_seal.seal(&header, &mut buf).unwrap();
            buf.extend_from_slice(&tag);
            let mut copy = buf.clone();
            assert!(d_open.open(&header, &mut buf).is_ok());
            let (_, mut wrong) = derive_record_keys(suite, &[1; 32], &[2; 32], Role::Acceptor);
            assert!(wrong.open(&header, &mut copy).is_err());
        }
    }

    #[test]
    fn a_different_transcript_gives_different_keys() {
        let suite = CipherSuite::Aes256Gcm;
        let (mut seal, _) = derive_record_keys(suite, &[1; 32], &[2; 32], Role::Dialer);
        let (_, mut open) = derive_record_keys(suite, &[1; 32], &[9; 32], Role::Acceptor);
        let header = [3, 0, 0, 20];
        let mut buf = b"data".to_vec();
        let tag = seal.seal(&header, &mut buf).unwrap();
        buf.extend_from_slice(&tag);
        assert!(open.open(&header, &mut buf).is_err());
    }
}
