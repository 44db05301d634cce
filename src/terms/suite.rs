use std::{fmt, str::FromStr};

use crate::ParseError;

/// A way to protect records, identified on the wire by a number.
///
/// | suite | id | implementation |
/// |---|---|---|
/// | [`Plaintext`](CipherSuite::Plaintext) | 0 | none: only when both sides allow it |
/// | [`XSalsa20Poly1305`](CipherSuite::XSalsa20Poly1305) | 1 | NaCl's secretbox cipher (the one inside crypto_box's `SalsaBox`): weft's wide Salsa20 with RustCrypto's HSalsa20 and Poly1305, checked against the `crypto_secretbox` crate |
/// | [`ChaCha20Poly1305`](CipherSuite::ChaCha20Poly1305) | 2 | aws-lc (aws-lc-rs) |
/// | [`Aes256Gcm`](CipherSuite::Aes256Gcm) | 3 | aws-lc (aws-lc-rs) |
/// | [`XChaCha20Poly1305`](CipherSuite::XChaCha20Poly1305) | 4 | the `chacha20poly1305` crate (RustCrypto) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CipherSuite {
    /// No encryption and no integrity. Agreed only when both sides list it.
    Plaintext,
    /// XSalsa20-Poly1305, the cipher of the NaCl box (its secretbox part),
    /// which every build speaks.
    XSalsa20Poly1305,
    /// ChaCha20-Poly1305 (RFC 8439): fast without AES instructions.
    ChaCha20Poly1305,
    /// AES-256-GCM: fastest where the CPU has AES and carry-less multiply.
    Aes256Gcm,
    /// XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha): ChaCha20-Poly1305 with
    /// a 192-bit nonce, libsodium's `crypto_aead_xchacha20poly1305_ietf`.
    XChaCha20Poly1305,
}

impl CipherSuite {
    /// Every suite, in id order.
    pub(crate) const ALL: [CipherSuite; 5] = [
        CipherSuite::Plaintext,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::Aes256Gcm,
        CipherSuite::XChaCha20Poly1305,
    ];

    /// The wire id.
    pub(crate) fn id(self) -> u32 {
        match self {
            CipherSuite::Plaintext => 0,
            CipherSuite::XSalsa20Poly1305 => 1,
            CipherSuite::ChaCha20Poly1305 => 2,
            CipherSuite::Aes256Gcm => 3,
            CipherSuite::XChaCha20Poly1305 => 4,
        }
    }

    /// The suite for a wire id, if weft knows it.
    pub(crate) fn from_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The short name used on command lines: `plaintext`,
    /// `xsalsa20poly1305`, `chacha20poly1305`, `aes256gcm`,
    /// `xchacha20poly1305`.
    pub fn name(self) -> &'static str {
        match self {
            CipherSuite::Plaintext => "plaintext",
            CipherSuite::XSalsa20Poly1305 => "xsalsa20poly1305",
            CipherSuite::ChaCha20Poly1305 => "chacha20poly1305",
            CipherSuite::Aes256Gcm => "aes256gcm",
            CipherSuite::XChaCha20Poly1305 => "xchacha20poly1305",
        }
    }

    /// Bytes of authentication tag each record carries.
    pub(crate) fn tag_len(self) -> usize {
        match self {
            CipherSuite::Plaintext => 0,
            _ => 16,
        }
    }

    /// The default preference: AES-256-GCM first where this CPU has AES and
    /// carry-less multiply instructions, then ChaCha20-Poly1305,
    /// XChaCha20-Poly1305 and the NaCl box's XSalsa20-Poly1305, fastest
    /// first (then AES-256-GCM, without those instructions). Plaintext is
    /// never in the default.
    pub fn default_order() -> Vec<CipherSuite> {
        let mut order = vec![
            CipherSuite::ChaCha20Poly1305,
            CipherSuite::XChaCha20Poly1305,
            CipherSuite::XSalsa20Poly1305,
        ];
        if has_aes_instructions() {
            order.insert(0, CipherSuite::Aes256Gcm);
        } else {
            order.push(CipherSuite::Aes256Gcm);
        }
        order
    }
}

fn has_aes_instructions() -> bool {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86", target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

impl fmt::Display for CipherSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CipherSuite {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.to_ascii_lowercase().replace(['-', '_'], "");
        Self::ALL
            .into_iter()
            .find(|suite| suite.name() == wanted)
            .ok_or_else(|| {
                ParseError::new(
                    "a cipher suite (plaintext, xsalsa20poly1305, chacha20poly1305, aes256gcm or xchacha20poly1305)",
                    s,
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for suite in CipherSuite::ALL {
            assert_eq!(CipherSuite::from_id(suite.id()), Some(suite));
            assert_eq!(suite.name().parse::<CipherSuite>(), Ok(suite));
        }
        assert_eq!("AES-256-GCM".parse::<CipherSuite>(), Ok(CipherSuite::Aes256Gcm));
        assert!("rot13".parse::<CipherSuite>().is_err());
        assert_eq!(CipherSuite::from_id(99), None);
    }

    #[test]
    fn default_order_has_every_encrypting_suite_and_no_plaintext() {
        let order = CipherSuite::default_order();
        assert_eq!(order.len(), 4);
        assert!(!order.contains(&CipherSuite::Plaintext));
        if has_aes_instructions() {
            assert_eq!(order[0], CipherSuite::Aes256Gcm);
        } else {
            assert_eq!(order[0], CipherSuite::ChaCha20Poly1305);
        }
    }
}
