//! The dialer's side of early data (docs/PROTOCOL.md, section 17.2): a
//! box to the acceptor's box key, made ahead of time, and the early data
//! sealed in it for one Setup.

use crypto_box::{
    aead::{generic_array::GenericArray, Aead},
    PublicKey, SalsaBox, SecretKey,
};
use zeroize::Zeroizing;

use super::{
    early_message, early_nonce, key_id, Announced, ProofKey, Ticket, KEY_ID_LEN, MAX_EARLY_PAYLOAD,
    PLAINTEXT_HEADER, SIGNED, TICKETED,
};
use crate::crypto::{Ephemeral, Identity};

/// A dialer's box to one box key, made ahead of time: the handshake's
/// ephemeral key and the X25519 agreement `crypto_box` makes from it, the
/// costly half of sealing early data, done while the dialer waited on an
/// earlier handshake. Used once.
pub(crate) struct PreparedBox {
    pub(super) ephemeral: Ephemeral,
    cipher: SalsaBox,
    box_public: [u8; 32],
}

impl std::fmt::Debug for PreparedBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedBox")
            .field("box_public", &self.box_public)
            .finish_non_exhaustive()
    }
}

impl PreparedBox {
    /// A box from `ephemeral` to `announced`.
    pub(crate) fn new(announced: &Announced, ephemeral: Ephemeral) -> Self {
        let secret = SecretKey::from(*ephemeral.secret_bytes());
        Self {
            cipher: SalsaBox::new(&PublicKey::from(announced.public), &secret),
            ephemeral,
            box_public: announced.public,
        }
    }

    /// Whether it is a box to `announced`.
    pub(crate) fn is_for(&self, announced: &Announced) -> bool {
        self.box_public == announced.public
    }

    /// Early data of `payload` with `credential`, stamped `sent_at_ms`,
    /// and the ephemeral key whose Setup it goes in. No seal if the payload
    /// is larger than early data may be.
    pub(crate) fn seal(
        self,
        credential: Credential<'_>,
        sent_at_ms: u64,
        payload: &[u8],
    ) -> (Ephemeral, Option<EarlySeal>) {
        if payload.is_empty() || payload.len() > MAX_EARLY_PAYLOAD {
            return (self.ephemeral, None);
        }
        let message = early_message(
            &self.ephemeral.public_key(),
            &self.box_public,
            sent_at_ms,
            payload,
        );
        let proof_key = ProofKey::random();
        let mut plaintext = Zeroizing::new(Vec::with_capacity(PLAINTEXT_HEADER + 128 + payload.len()));
        plaintext.extend_from_slice(&sent_at_ms.to_be_bytes());
        match credential {
            Credential::Signed(identity) => {
                plaintext.push(SIGNED);
                plaintext.extend_from_slice(identity.peer_id().as_bytes());
                plaintext.extend_from_slice(&identity.sign(&message));
            }
            Credential::Ticket(ticket) => {
                plaintext.push(TICKETED);
                plaintext.push(ticket.ticket.len() as u8);
                plaintext.extend_from_slice(&ticket.ticket);
                plaintext.extend_from_slice(&ticket.psk.mac(&message));
            }
        }
        plaintext.extend_from_slice(&proof_key.0[..]);
        plaintext.extend_from_slice(payload);
        let seal = EarlySeal {
            cipher: self.cipher,
            key_id: key_id(&self.box_public),
            plaintext,
            proof_key,
        };
        (self.ephemeral, Some(seal))
    }
}

/// How early data shows who sent it (docs/PROTOCOL.md, section 17.2).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Credential<'a> {
    /// The dialer's signature.
    Signed(&'a Identity),
    /// A ticket the acceptor gave, and a MAC under its PSK.
    Ticket(&'a Ticket),
}

/// The dialer's early data, ready but for the nonce, which hashes the rest
/// of the Setup it goes in.
pub(crate) struct EarlySeal {
    pub(super) cipher: SalsaBox,
    pub(super) key_id: [u8; KEY_ID_LEN],
    pub(super) plaintext: Zeroizing<Vec<u8>>,
    pub(super) proof_key: ProofKey,
}

impl std::fmt::Debug for EarlySeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlySeal")
            .field("key_id", &self.key_id)
            .field("len", &self.plaintext.len())
            .finish_non_exhaustive()
    }
}

impl EarlySeal {
    /// The key with which an acceptor that accepts this early data proves
    /// it.
    pub(crate) fn proof_key(&self) -> &ProofKey {
        &self.proof_key
    }

    /// Field 10's value for a Setup whose fields 1 to 9 encode as `d0`:
    /// the key id and the box (empty, so that no early data goes, in the
    /// case, impossible in practice, that the box fails to seal).
    pub(crate) fn seal(&self, d0: &[u8]) -> Vec<u8> {
        // (It cannot fail to seal; if it did, no early data would go.)
        let Ok(sealed) = self
            .cipher
            .encrypt(GenericArray::from_slice(&early_nonce(d0)), &self.plaintext[..])
        else {
            return Vec::new();
        };
        let mut field = Vec::with_capacity(KEY_ID_LEN + sealed.len());
        field.extend_from_slice(&self.key_id);
        field.extend_from_slice(&sealed);
        field
    }
}

impl crate::handshake::EarlySealer for EarlySeal {
    fn seal(&self, d0: &[u8]) -> Vec<u8> {
        EarlySeal::seal(self, d0)
    }
}
