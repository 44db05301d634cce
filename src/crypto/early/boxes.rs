//! The box of early data: NaCl's `crypto_box` with its key precomputed
//! (`crypto_box_beforenm`): XSalsa20-Poly1305 keyed with HSalsa20 of the
//! X25519 agreement (docs/PROTOCOL.md, section 17.2).
//!
//! Built from weft's X25519 (aws-lc's, whose secret and output are wiped)
//! and crypto_secretbox's cipher (which wipes its key), so that no copy of
//! either side's secret is left behind: the `crypto_box` crate's
//! `SecretKey` wipes its scalar when dropped but not the bytes it was made
//! from, and handing it the dialer's connection ephemeral (which also
//! keys the session) or an acceptor's box secret would leave them in
//! memory nobody wipes. The bytes are `crypto_box`'s (checked against the
//! `crypto_box` crate in the tests).

use crypto_secretbox::{
    aead::{generic_array::GenericArray, Aead, KeyInit},
    Kdf, XSalsa20Poly1305,
};
use zeroize::Zeroizing;

use crate::crypto::ephemeral::x25519;

/// A box between one secret and one public X25519 key, its key derived:
/// seals and opens any number of messages (each under its own nonce).
pub(crate) struct BoxCipher(XSalsa20Poly1305);

impl std::fmt::Debug for BoxCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxCipher(..)")
    }
}

impl BoxCipher {
    /// The box between `key` and `public`: one X25519 agreement. `None`
    /// if `public` is of small order (the agreement would be all zero, a
    /// key anyone can compute).
    pub(crate) fn between(key: &aws_lc_rs::agreement::PrivateKey, public: &[u8; 32]) -> Option<Self> {
        x25519(key, public).map(|shared| Self::from_shared(&shared))
    }

    /// The box keyed by HSalsa20 of the agreement `shared`
    /// (`crypto_box_beforenm`).
    pub(crate) fn from_shared(shared: &[u8; 32]) -> Self {
        let key = Zeroizing::new(<XSalsa20Poly1305 as Kdf>::kdf(
            GenericArray::from_slice(&shared[..]),
            &GenericArray::default(),
        ));
        Self(XSalsa20Poly1305::new(&key))
    }

    /// `plaintext` sealed under `nonce`: the tag, then the ciphertext (as
    /// `crypto_box` lays them out).
    pub(crate) fn seal(&self, nonce: &[u8; 24], plaintext: &[u8]) -> Vec<u8> {
        // Sealing in memory does not fail; an empty box opens nowhere.
        self.0
            .encrypt(GenericArray::from_slice(nonce), plaintext)
            .unwrap_or_default()
    }

    /// The plaintext of `sealed`, if it opens under `nonce`.
    pub(crate) fn open(&self, nonce: &[u8; 24], sealed: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
        self.0
            .decrypt(GenericArray::from_slice(nonce), sealed)
            .ok()
            .map(Zeroizing::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_box_is_crypto_boxs_both_ways() {
        use crypto_box::{aead::Aead as _, PublicKey, SalsaBox, SecretKey};
        let (a, b) = ([0x11; 32], [0x22; 32]);
        let public = |secret: [u8; 32]| *SecretKey::from(secret).public_key().as_bytes();
        let ours = BoxCipher::between(&crate::crypto::ephemeral::private_key(&a), &public(b)).unwrap();
        let theirs = SalsaBox::new(&PublicKey::from(public(a)), &SecretKey::from(b));
        let nonce = [7; 24];
        let sealed = ours.seal(&nonce, b"early");
        assert_eq!(sealed.len(), 16 + 5);
        assert_eq!(
            theirs
                .decrypt(GenericArray::from_slice(&nonce), &sealed[..])
                .unwrap(),
            b"early"
        );
        let back = theirs
            .encrypt(GenericArray::from_slice(&nonce), &b"reply"[..])
            .unwrap();
        assert_eq!(&ours.open(&nonce, &back).unwrap()[..], b"reply");
        assert!(ours.open(&[8; 24], &back).is_none());
    }

    #[test]
    fn no_box_to_a_key_of_small_order() {
        let key = crate::crypto::ephemeral::private_key(&[0x11; 32]);
        assert!(BoxCipher::between(&key, &[0; 32]).is_none());
        let mut one = [0; 32];
        one[0] = 1;
        assert!(BoxCipher::between(&key, &one).is_none());
        assert!(super::super::is_low_order(&one));
    }
}
