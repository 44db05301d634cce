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

use aws_lc_rs::{hkdf, hmac};
use zeroize::Zeroizing;

use crate::{
    record::{hkdf_expand, KeySchedule, RecordKey},
    terms::{CipherSuite, Role},
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

/// HKDF-Extract (RFC 5869 section 2.2): HMAC-SHA-256 keyed with the
/// salt, of the input key material, taken once. (aws-lc-rs's
/// `Salt::extract` keeps the salt and the secret and extracts again at
/// every expansion: six extractions a side, a tenth of the handshake's
/// hashing.)
fn extract(salt: &[u8; 32], ikm: &[u8; 32]) -> hkdf::Prk {
    let mut prk = Zeroizing::new([0u8; 32]);
    prk.copy_from_slice(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, salt), ikm).as_ref());
    hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &prk[..])
}

/// Derives `(sealing key, opening key)` for `role`.
pub(crate) fn derive_record_keys(
    suite: CipherSuite,
    shared_secret: &[u8; 32],
    transcript: &[u8; 32],
    role: Role,
) -> (RecordKey, RecordKey) {
    let prk = extract(transcript, shared_secret);
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

    fn hex<const N: usize>(text: &str) -> [u8; N] {
        std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
    }

    /// The test vectors of docs/PROTOCOL.md section 7.1, through the code
    /// that derives the keys (computed independently, with Python's hmac,
    /// when they were written).
    #[test]
    fn the_key_schedule_matches_the_protocols_test_vectors() {
        let shared: [u8; 32] = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        let transcript: [u8; 32] = std::array::from_fn(|i| i as u8);
        let prk = extract(&transcript, &shared);
        let vectors = [
            (
                CipherSuite::XSalsa20Poly1305,
                "c3f65bd7db4389d6a936a1d3888044e3f9b2a39833dec91f5a9e0912b82bd4af",
                "5668d1934c84241ce7904c36bff2ab5ab97f2ef94839a3e13ca8263296662675",
                "3b0751ce3083e4f350ddb9bbc6a14576052caff02a97f89eb59df29057bc7bea",
                "80c6f3eafaa7c7d89e81e07e17d1491c16d60e0b2d09a1df",
            ),
            (
                CipherSuite::ChaCha20Poly1305,
                "01bd754b8cac3fa909bc6ff631be429a0cc7aa2cedd4cf83c740132b9b35b91b",
                "b5b58f37f5f6542d44aea265eb85c08bc7e37f7fa04980e61d72253e41cdbe11",
                "2bd773262049d318d0cf74fc1d6418817063a1e00e0920a5a6d8475dc818e17c",
                "dba17944de152e35d5d777c5266fcb24445d1e2247f2bb50",
            ),
            (
                CipherSuite::Aes256Gcm,
                "9097d0bcde388d3c46bca3625d994f6890142f9691866525543c58ffc2a66bdc",
                "391c85c3596b44f89fd01c966c3f84cb4f0d02039339a779c7f7a0dd3f2f6aea",
                "6b94155de28efbf7e5c726ee59206130a22e48445bdcc6c055d73404addd34d9",
                "24a75435bb1f240bb1650d0340be0cb1c8ffd7e99d59873f",
            ),
            (
                CipherSuite::XChaCha20Poly1305,
                "23a4f38ae6c520960ca774a6a67b3814ec39e1518ac8e0a68aad4038acd068f0",
                "908b369743732a7ece53f60a33d069abd5e59e684f39951551664b234e893b7e",
                "64e0f53c74b78e5fc62ae41b5a0b667c1aca8e0607a4574d1c2e9d3baa096433",
                "177f4aecc5954a0e6ec0dd8e16d0eeafc90a9ecabbd4d2ce",
            ),
        ];
        for (suite, dialer_secret, acceptor_secret, dialer_key, dialer_iv) in vectors {
            let mut out = [0u8; 32];
            expand(&prk, Role::Dialer, " secret", suite, &mut out);
            assert_eq!(out, hex::<32>(dialer_secret), "{suite:?} dialer secret_0");
            expand(&prk, Role::Acceptor, " secret", suite, &mut out);
            assert_eq!(out, hex::<32>(acceptor_secret), "{suite:?} acceptor secret_0");
            expand(&prk, Role::Dialer, " key", suite, &mut out);
            assert_eq!(out, hex::<32>(dialer_key), "{suite:?} dialer key_0");
            let mut iv = [0u8; 24];
            expand(&prk, Role::Dialer, " iv", suite, &mut iv);
            assert_eq!(iv, hex::<24>(dialer_iv), "{suite:?} dialer iv_0");
        }
        // Version 2's chain, from AES-256-GCM's dialer secret_0.
        let secret_0: [u8; 32] = hex("9097d0bcde388d3c46bca3625d994f6890142f9691866525543c58ffc2a66bdc");
        let chain = crate::record::key_chain_for_tests(CipherSuite::Aes256Gcm, secret_0, 2);
        assert_eq!(
            chain,
            [
                (
                    hex("5dbdda663dd982b4fd39f2cf936caa1ad7c18c269a16f6a6cff945a801bf817c"),
                    hex("df7f19ca212dab01380d6b2d7350d2f25159d47658cce57788c47f01214d7c60"),
                    hex("14a103465fc2786c7d5c4b6829b2d1b1306d55a9bbad36ae"),
                ),
                (
                    hex("5185d766d9f99ad4cc2aeccf1e0a31093613eed2a717163ba56e544c2eae0e46"),
                    hex("46f1455ba01a816fc99fa2a48999fd85402653c1726edd6245ad059ac92c2e79"),
                    hex("11dce38d47d429675e1dfdef3b026b8534e9ede2cba2ce96"),
                ),
            ]
        );
    }
}
