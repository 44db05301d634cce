//! The acceptor's box keys (docs/PROTOCOL.md, section 17.1): a new one
//! every `rotate_every`, each valid for twice that, the newest announced,
//! expired ones dropped and so wiped. Each is random, or derived from the
//! identity and its rotation period ([`BoxKey::derived`]) so that every
//! replica of one identity holds the same.

use std::sync::Arc;

use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use super::{announcement_message, key_id, sha256, BoxCipher, TicketKey, ANNOUNCEMENT_LEN, KEY_ID_LEN};
use crate::crypto::{
    ephemeral::{private_key, public_key},
    Identity,
};

/// How far ahead of this acceptor's clock a replica's may run: a key
/// derived ahead is taken that long before it is made (the early data
/// window's width, which bounds a dialer's clock the same way).
pub(crate) const AHEAD_S: u64 = super::EARLY_WINDOW_MS / 1000;

/// What a replica's box key and ticket key are derived under.
const DERIVED_BOX_KEY_LABEL: &[u8] = b"weft v3 derived box key";
const DERIVED_TICKET_KEY_LABEL: &[u8] = b"weft v3 derived ticket key";

#[cfg(test)]
std::thread_local! {
    /// Box keys this thread derived (each a curve operation and a
    /// signature), for the tests that count them.
    pub(crate) static DERIVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One of the acceptor's box keys. Its secret lives inside aws-lc, which
/// wipes it when the key is dropped; so is its ticket key wiped.
pub(crate) struct BoxKey {
    secret: aws_lc_rs::agreement::PrivateKey,
    pub(crate) public: [u8; 32],
    made: u64,
    pub(crate) not_after: u64,
    pub(crate) announcement: [u8; ANNOUNCEMENT_LEN],
    /// SHA-256 of the announcement: what early data to this key is bound
    /// to.
    pub(crate) announcement_hash: [u8; 32],
    /// What its tickets are sealed with, made and wiped with it.
    pub(crate) tickets: TicketKey,
}

impl std::fmt::Debug for BoxKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxKey")
            .field("id", &key_id(&self.public))
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl BoxKey {
    /// A new random box key made at `now_s`, good until `not_after`, and
    /// its announcement signed by `identity`: a curve operation and a
    /// signature, made outside any lock.
    pub(crate) fn generate(identity: &Identity, now_s: u64, not_after: u64) -> Self {
        let mut secret = Box::new(Zeroizing::new([0u8; 32]));
        OsRng.fill_bytes(&mut secret[..]);
        Self::from_secret(secret, identity, now_s, not_after)
    }

    /// The box key of `rotate_every_s`'s period number `period` (from the
    /// Unix epoch), derived from `identity` ([`Identity::replica_secret`]):
    /// every process holding the identity derives the same key, ticket
    /// key and announcement (Ed25519 signatures are deterministic), so a
    /// dialer that learned it from one replica goes early to another. It
    /// is made at the period's start and expires two periods later.
    pub(crate) fn derived(identity: &Identity, rotate_every_s: u64, period: u64) -> Self {
        #[cfg(test)]
        DERIVED.with(|derived| derived.set(derived.get() + 1));
        let rotate_every_s = rotate_every_s.max(1);
        let made = period.saturating_mul(rotate_every_s);
        let not_after = made.saturating_add(rotate_every_s.saturating_mul(2));
        let (secret, ticket_secret) = Self::derived_secrets(identity, rotate_every_s, period);
        let tickets = TicketKey::from_secret(&ticket_secret);
        Self::with_tickets(Box::new(secret), tickets, identity, made, not_after)
    }

    /// The box key's secret and the ticket key of a period, as
    /// [`derived`](Self::derived) derives them.
    pub(crate) fn derived_secrets(
        identity: &Identity,
        rotate_every_s: u64,
        period: u64,
    ) -> (Zeroizing<[u8; 32]>, Zeroizing<[u8; 32]>) {
        let mut context = [0u8; 16];
        context[..8].copy_from_slice(&rotate_every_s.to_be_bytes());
        context[8..].copy_from_slice(&period.to_be_bytes());
        (
            identity.replica_secret(DERIVED_BOX_KEY_LABEL, &context),
            identity.replica_secret(DERIVED_TICKET_KEY_LABEL, &context),
        )
    }

    /// The box key of `secret` (wiped when dropped here).
    pub(crate) fn from_secret(
        secret: Box<Zeroizing<[u8; 32]>>,
        identity: &Identity,
        made: u64,
        not_after: u64,
    ) -> Self {
        Self::with_tickets(secret, TicketKey::random(), identity, made, not_after)
    }

    fn with_tickets(
        secret: Box<Zeroizing<[u8; 32]>>,
        tickets: TicketKey,
        identity: &Identity,
        made: u64,
        not_after: u64,
    ) -> Self {
        let secret = private_key(&secret);
        let public = public_key(&secret);
        let mut announcement = [0u8; ANNOUNCEMENT_LEN];
        announcement[..32].copy_from_slice(&public);
        announcement[32..40].copy_from_slice(&not_after.to_be_bytes());
        announcement[40..].copy_from_slice(&identity.sign(&announcement_message(&public, not_after)));
        Self {
            secret,
            public,
            made,
            not_after,
            announcement,
            announcement_hash: sha256(&announcement),
            tickets,
        }
    }

    /// The box from a dialer's `ephemeral` key to this one: an X25519
    /// agreement (`None` for a key of small order).
    pub(crate) fn open_box(&self, ephemeral: &[u8; 32]) -> Option<BoxCipher> {
        BoxCipher::between(&self.secret, ephemeral)
    }
}

/// The acceptor's box keys, newest last.
pub(crate) struct BoxKeyring {
    keys: Vec<Arc<BoxKey>>,
    rotate_every: u64,
}

impl std::fmt::Debug for BoxKeyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxKeyring")
            .field("keys", &self.keys.len())
            .field("rotate_every", &self.rotate_every)
            .finish()
    }
}

impl BoxKeyring {
    /// No keys yet; the first is made when first announced.
    pub(crate) fn new(rotate_every_s: u64) -> Self {
        Self {
            keys: Vec::new(),
            rotate_every: rotate_every_s.max(1),
        }
    }

    /// The key to announce at `now_s`, if the newest made by then is
    /// still current (younger than `rotate_every` and unexpired). (A
    /// replica's derived keys include the next period's, made ahead.)
    pub(crate) fn current(&self, now_s: u64) -> Option<&Arc<BoxKey>> {
        self.keys
            .iter()
            .rev()
            .find(|key| key.made <= now_s)
            .filter(|newest| {
                now_s < newest.made.saturating_add(self.rotate_every) && now_s < newest.not_after
            })
    }

    /// Whether the key made at `made` is held.
    pub(crate) fn holds_made(&self, made: u64) -> bool {
        self.keys.iter().any(|key| key.made == made)
    }

    /// The key made at `made`, if held.
    pub(crate) fn made_at(&self, made: u64) -> Option<Arc<BoxKey>> {
        self.keys.iter().find(|key| key.made == made).cloned()
    }

    /// Adds derived `keys` (made outside the lock) that are not held yet,
    /// in the order they were made; drops (and so wipes) the expired.
    /// (Each comes in its `Arc`: a key moved out of a `Vec` would leave
    /// its ticket key's bytes in the `Vec`'s freed buffer.)
    pub(crate) fn insert_derived(&mut self, keys: Vec<Arc<BoxKey>>, now_s: u64) {
        self.keys.retain(|key| now_s < key.not_after);
        for key in keys {
            if !self.holds_made(key.made) && now_s < key.not_after {
                self.keys.push(key);
            }
        }
        self.keys.sort_by_key(|key| key.made);
    }

    /// The rotation period, in seconds.
    pub(crate) fn rotate_every(&self) -> u64 {
        self.rotate_every
    }

    /// When a key made at `now_s` expires: twice the rotation later
    /// (saturating: a rotation of centuries never wraps).
    pub(crate) fn not_after(&self, now_s: u64) -> u64 {
        now_s.saturating_add(self.rotate_every.saturating_mul(2))
    }

    /// Adds `key` (made outside the lock) as the newest, unless another
    /// handshake added a current one meanwhile; drops (and so wipes) the
    /// expired. The newest key, either way.
    pub(crate) fn insert(&mut self, key: BoxKey, now_s: u64) -> Arc<BoxKey> {
        self.keys.retain(|key| now_s < key.not_after);
        if let Some(current) = self.current(now_s) {
            return current.clone();
        }
        let key = Arc::new(key);
        self.keys.push(key.clone());
        key
    }

    /// The unexpired key whose id is `id`: made already, or (a replica's
    /// next, derived ahead) to be made within [`AHEAD_S`], as a replica
    /// whose clock runs that far ahead would announce it.
    pub(crate) fn find(&self, id: &[u8], now_s: u64) -> Option<Arc<BoxKey>> {
        self.keys
            .iter()
            .find(|key| {
                now_s < key.not_after
                    && key.made <= now_s.saturating_add(AHEAD_S)
                    && key.public[..KEY_ID_LEN] == *id
            })
            .cloned()
    }

    /// Keys held (expired ones included until the next rotation).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}
