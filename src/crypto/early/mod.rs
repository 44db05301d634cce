//! Version 3's early data, sans-IO: the cryptography of docs/PROTOCOL.md
//! section 17. The acceptor's box keys and their signed announcements
//! ([`keyring`]), the box itself ([`boxes`], NaCl's `crypto_box`), the
//! dialer's sealing ([`seal`]) and the acceptor's opening ([`open`]) of a
//! first flight bound to the acceptor it was meant for, tickets, the
//! acceptor's record of the ephemeral keys it has opened boxes from
//! ([`replay`]) and what it shares between handshakes ([`acceptance`]),
//! and what a dialer keeps ([`cache`]). Time is passed in, so every step is
//! testable without a clock; the steps of the handshake that use these
//! are in `handshake::early`.

use aws_lc_rs::{digest, hmac};
use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use crate::terms::PeerId;

mod acceptance;
mod boxes;
mod cache;
pub(crate) mod keyring;
mod open;
mod replay;
#[cfg(test)]
mod replica_tests;
mod seal;
#[cfg(test)]
mod tests;
mod ticket;
#[cfg(test)]
mod vectors;

pub use acceptance::EarlyDataStats;
pub(crate) use acceptance::{Acceptance, Counted, EarlyBudget, KeySource, LoadSignal};
pub(crate) use boxes::BoxCipher;
pub(crate) use cache::BoxKeyCache;
pub(crate) use keyring::{BoxKey, BoxKeyring};
pub(crate) use open::{open_box, MIN_EARLY_LEN};
pub(crate) use replay::{ReplayRecord, ACCEPTED_CAPACITY};
pub(crate) use seal::{Credential, EarlySeal, PreparedBox};
pub(crate) use ticket::{Ticket, TicketKey, MAC_LEN};

/// A box key announcement's length: key, expiry, signature.
pub(crate) const ANNOUNCEMENT_LEN: usize = 32 + 8 + 64;
/// The most application bytes a dialer sends early: its whole Setup stays
/// under the 4 KiB a peer accepts by default.
pub(crate) const MAX_EARLY_PAYLOAD: usize = 3072;
/// How far an early data's clock may be from the acceptor's, either way,
/// and so how long the acceptor must remember it.
pub(crate) const EARLY_WINDOW_MS: u64 = 10_000;

const BOX_KEY_LABEL: &[u8] = b"weft v3 box key";
/// What the dialer signs (or MACs) names the acceptor it meant: a new
/// label, so that no signature over the unbound message of an earlier
/// draft passes for one over this.
const EARLY_LABEL: &[u8] = b"weft v3 bound early data";
const NONCE_LABEL: &[u8] = b"weft v3 early nonce";
const ACCEPTED_LABEL: &[u8] = b"weft v3 early accepted";
pub(crate) const KEY_ID_LEN: usize = 8;
const TAG_LEN: usize = 16;
/// The kinds of credential early data carries: the dialer's signature, or
/// a ticket and a MAC under its PSK.
const SIGNED: u8 = 0;
const TICKETED: u8 = 1;

/// A box key announcement whose signature verified, and whose key is not
/// of small order: the acceptor's box public key, when it expires, and
/// the hash of the announcement as it came (what early data to it is
/// bound to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Announced {
    pub(crate) public: [u8; 32],
    pub(crate) not_after: u64,
    pub(crate) hash: [u8; 32],
}

impl Announced {
    /// Verifies `bytes` as an announcement signed by `identity`, of a key
    /// that is not of small order (a box to one would have a key anyone
    /// can compute).
    pub(crate) fn verify(bytes: &[u8], identity: &PeerId) -> Option<Self> {
        let bytes: &[u8; ANNOUNCEMENT_LEN] = bytes.try_into().ok()?;
        let public: [u8; 32] = bytes[..32].try_into().ok()?;
        if is_low_order(&public) {
            return None;
        }
        let not_after = u64::from_be_bytes(bytes[32..40].try_into().ok()?);
        let signature: &[u8; 64] = bytes[40..].try_into().ok()?;
        if !super::verify_signature(identity, &announcement_message(&public, not_after), signature) {
            return None;
        }
        Some(Self {
            public,
            not_after,
            hash: sha256(bytes),
        })
    }

    /// Whether the key may still be used at `now` (Unix seconds).
    pub(crate) fn valid_at(&self, now_s: u64) -> bool {
        now_s < self.not_after
    }
}

/// The first 8 bytes of a box public key: how early data names it.
pub(crate) fn key_id(public: &[u8; 32]) -> [u8; KEY_ID_LEN] {
    let mut id = [0; KEY_ID_LEN];
    id.copy_from_slice(&public[..KEY_ID_LEN]);
    id
}

fn announcement_message(public: &[u8; 32], not_after: u64) -> Vec<u8> {
    let mut message = Vec::with_capacity(BOX_KEY_LABEL.len() + 40);
    message.extend_from_slice(BOX_KEY_LABEL);
    message.extend_from_slice(public);
    message.extend_from_slice(&not_after.to_be_bytes());
    message
}

/// Whether an X25519 public key is one of the points of small order (or
/// their non-canonical encodings), for which the agreement is the same
/// whatever the secret: libsodium's list, compared with the top bit
/// ignored, as X25519 ignores it.
pub(crate) fn is_low_order(public: &[u8; 32]) -> bool {
    const LOW_ORDER: [[u8; 32]; 7] = [
        [0; 32],
        {
            let mut one = [0; 32];
            one[0] = 1;
            one
        },
        [
            0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a,
            0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00,
        ],
        [
            0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b,
            0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57,
        ],
        // p - 1, p and p + 1.
        [
            0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
        [
            0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
        [
            0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
    ];
    let mut key = *public;
    key[31] &= 0x7f;
    LOW_ORDER.contains(&key)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut hash = [0; 32];
    hash.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    hash
}

/// What early data is bound to: the acceptor the dialer meant (its pinned
/// identity), the announcement of the box key it came to, as the dialer
/// holds it, and the application protocol its payload is in. The acceptor
/// checks it with its own identity, its own announcement and the protocol
/// agreed, so early data relayed to another acceptor, or to one that
/// would read it as another protocol, does not verify there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Binding<'a> {
    pub(crate) acceptor: &'a PeerId,
    pub(crate) announcement: &'a [u8; 32],
    pub(crate) protocol: &'a [u8],
}

/// The message the dialer signs or MACs (docs/PROTOCOL.md, section 17.2).
pub(crate) fn early_message(
    binding: Binding<'_>,
    ephemeral: &[u8; 32],
    sent_at_ms: u64,
    payload: &[u8],
) -> Vec<u8> {
    let protocol = &binding.protocol[..binding.protocol.len().min(255)];
    let mut message = Vec::with_capacity(EARLY_LABEL.len() + 32 * 4 + 8 + 1 + protocol.len());
    message.extend_from_slice(EARLY_LABEL);
    message.extend_from_slice(binding.acceptor.as_bytes());
    message.extend_from_slice(binding.announcement);
    message.extend_from_slice(ephemeral);
    message.extend_from_slice(&sent_at_ms.to_be_bytes());
    message.push(protocol.len() as u8);
    message.extend_from_slice(protocol);
    message.extend_from_slice(&sha256(payload));
    message
}

/// The box's nonce: a hash of the Setup it rides in, before its field 10.
pub(crate) fn early_nonce(d0: &[u8]) -> [u8; 24] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(NONCE_LABEL);
    ctx.update(d0);
    let mut nonce = [0; 24];
    nonce.copy_from_slice(&ctx.finish().as_ref()[..24]);
    nonce
}

/// The secret a dialer puts in its early data: an acceptor that accepts it
/// proves with it, in place of a signature, that it opened the box
/// (docs/PROTOCOL.md, section 17.3). Wiped when dropped.
#[derive(Clone)]
pub(crate) struct ProofKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for ProofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProofKey(..)")
    }
}

impl ProofKey {
    pub(crate) fn random() -> Self {
        let mut key = Zeroizing::new([0; 32]);
        OsRng.fill_bytes(&mut key[..]);
        Self(key)
    }

    pub(crate) fn from_bytes(bytes: &[u8; 32]) -> Self {
        Self(Zeroizing::new(*bytes))
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    fn key(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA512, &self.0[..])
    }

    /// The acceptor's proof over the session's `transcript`: 64 bytes, the
    /// length of the signature it replaces.
    pub(crate) fn prove(&self, transcript: &[u8; 32]) -> [u8; 64] {
        let mut ctx = hmac::Context::with_key(&self.key());
        ctx.update(ACCEPTED_LABEL);
        ctx.update(transcript);
        let mut tag = [0; 64];
        tag.copy_from_slice(ctx.sign().as_ref());
        tag
    }

    /// Whether `tag` is [`prove`](Self::prove)'s for `transcript` (in
    /// constant time).
    pub(crate) fn verify(&self, transcript: &[u8; 32], tag: &[u8]) -> bool {
        let mut message = Vec::with_capacity(ACCEPTED_LABEL.len() + 32);
        message.extend_from_slice(ACCEPTED_LABEL);
        message.extend_from_slice(transcript);
        hmac::verify(&self.key(), &message, tag).is_ok()
    }
}

/// Milliseconds since the Unix epoch, by the system clock.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}
