//! The dialer's side of early data (docs/PROTOCOL.md, section 17.2): a
//! box to the acceptor's box key, made ahead of time, and the early data
//! sealed in it for one Setup, bound to the acceptor it is meant for.

use zeroize::Zeroizing;

use super::{
    early_message, early_nonce, key_id, Announced, Binding, BoxCipher, ProofKey, Ticket, KEY_ID_LEN,
    MAX_EARLY_PAYLOAD, SIGNED, TICKETED,
};
use crate::{
    crypto::{Ephemeral, Identity},
    terms::PeerId,
};

/// `sent_at_ms`, the longest credential (a ticket: kind, length, 255
/// bytes, MAC) and the proof key, before the payload.
const PLAINTEXT_HEADER: usize = 8 + 1 + 1 + 255 + 32 + 32;

/// A dialer's box to one box key, made ahead of time: the handshake's
/// ephemeral key and the box made from it, the costly half of sealing
/// early data (an X25519 agreement), done while the dialer waited on an
/// earlier handshake. Used once.
pub(crate) struct PreparedBox {
    ephemeral: Ephemeral,
    cipher: BoxCipher,
    announced: Announced,
}

impl std::fmt::Debug for PreparedBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedBox")
            .field("box_public", &self.announced.public)
            .finish_non_exhaustive()
    }
}

impl PreparedBox {
    /// A box from `ephemeral` to `announced` (`None` only for a box key of
    /// small order, which no verified announcement has).
    pub(crate) fn new(announced: &Announced, ephemeral: Ephemeral) -> Result<Self, Ephemeral> {
        match ephemeral.box_to(&announced.public) {
            Some(cipher) => Ok(Self {
                ephemeral,
                cipher,
                announced: *announced,
            }),
            None => Err(ephemeral),
        }
    }

    /// Whether it is a box to `announced`.
    pub(crate) fn is_for(&self, announced: &Announced) -> bool {
        self.announced == *announced
    }

    /// Early data of `payload` with `credential`, for `acceptor` (the
    /// identity pinned) to read in `protocol`, stamped `sent_at_ms`; and
    /// the ephemeral key whose Setup it goes in. No seal if the payload is
    /// empty or larger than early data may be.
    pub(crate) fn seal(
        self,
        credential: Credential<'_>,
        acceptor: &PeerId,
        protocol: &[u8],
        sent_at_ms: u64,
        payload: &[u8],
    ) -> (Ephemeral, Option<EarlySeal>) {
        self.seal_with(
            credential,
            acceptor,
            protocol,
            sent_at_ms,
            payload,
            ProofKey::random(),
        )
    }

    /// As [`seal`](Self::seal), with `proof_key` (random, outside tests).
    pub(super) fn seal_with(
        self,
        credential: Credential<'_>,
        acceptor: &PeerId,
        protocol: &[u8],
        sent_at_ms: u64,
        payload: &[u8],
        proof_key: ProofKey,
    ) -> (Ephemeral, Option<EarlySeal>) {
        if payload.is_empty() || payload.len() > MAX_EARLY_PAYLOAD {
            return (self.ephemeral, None);
        }
        let binding = Binding {
            acceptor,
            announcement: &self.announced.hash,
            protocol,
        };
        let message = early_message(binding, &self.ephemeral.public_key(), sent_at_ms, payload);
        let mut plaintext = Zeroizing::new(Vec::with_capacity(PLAINTEXT_HEADER + payload.len()));
        let capacity = plaintext.capacity();
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
        plaintext.extend_from_slice(proof_key.as_bytes());
        plaintext.extend_from_slice(payload);
        // Never grown: a buffer moved would be freed with the proof key in
        // it, unwiped.
        debug_assert_eq!(plaintext.capacity(), capacity, "the early plaintext moved");
        let seal = EarlySeal {
            cipher: self.cipher,
            key_id: key_id(&self.announced.public),
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
    cipher: BoxCipher,
    key_id: [u8; KEY_ID_LEN],
    plaintext: Zeroizing<Vec<u8>>,
    proof_key: ProofKey,
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
    /// the key id and the box.
    pub(crate) fn seal(&self, d0: &[u8]) -> Vec<u8> {
        let sealed = self.cipher.seal(&early_nonce(d0), &self.plaintext);
        let mut field = Vec::with_capacity(KEY_ID_LEN + sealed.len());
        field.extend_from_slice(&self.key_id);
        field.extend_from_slice(&sealed);
        field
    }
}
