//! Version 3's early data, sans-IO (docs/PROTOCOL.md, section 17): the
//! acceptor's box keys and their signed announcements, the dialer's
//! sealing of its first stream's bytes to a box key with `crypto_box`,
//! the acceptor's opening and checks, and its anti-replay record. Time is
//! passed in (Unix seconds or milliseconds), so every step is testable
//! without a clock.

use aws_lc_rs::{digest, hmac};
use bytes::Bytes;
use crypto_box::{
    aead::{generic_array::GenericArray, Aead},
    PublicKey, SalsaBox, SecretKey,
};
use ed25519_dalek::{Signature, VerifyingKey};
use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use super::Identity;
use crate::handshake::PeerId;

/// A box key announcement's length: key, expiry, signature.
pub(crate) const ANNOUNCEMENT_LEN: usize = 32 + 8 + 64;
/// The most application bytes a dialer sends early: its whole Setup stays
/// under the 4 KiB a peer accepts by default.
pub(crate) const MAX_EARLY_PAYLOAD: usize = 3072;
/// How far an early data's clock may be from the acceptor's, either way,
/// and so how long the acceptor must remember it.
pub(crate) const EARLY_WINDOW_MS: u64 = 10_000;
/// Ephemeral keys the acceptor remembers at once (about 5 MiB).
pub(crate) const REPLAY_CAPACITY: usize = 65_536;

const BOX_KEY_LABEL: &[u8] = b"weft v3 box key";
const EARLY_LABEL: &[u8] = b"weft v3 early data";
const NONCE_LABEL: &[u8] = b"weft v3 early nonce";
const KEY_ID_LEN: usize = 8;
const ACCEPTED_LABEL: &[u8] = b"weft v3 early accepted";
/// `sent_at_ms`, the credential (a signed one: kind, id, signature) and
/// the proof key, before the payload.
const PLAINTEXT_HEADER: usize = 8 + 1 + 32 + 64 + 32;
/// The kinds of credential early data carries: the dialer's signature, or
/// a ticket and a MAC under its PSK.
const SIGNED: u8 = 0;
const TICKETED: u8 = 1;
const TAG_LEN: usize = 16;

/// A box key announcement whose signature verified: the acceptor's box
/// public key and when it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Announced {
    public: [u8; 32],
    not_after: u64,
}

impl Announced {
    /// Verifies `bytes` as an announcement signed by `identity`.
    pub(crate) fn verify(bytes: &[u8], identity: &PeerId) -> Option<Self> {
        let bytes: &[u8; ANNOUNCEMENT_LEN] = bytes.try_into().ok()?;
        let public: [u8; 32] = bytes[..32].try_into().ok()?;
        let not_after = u64::from_be_bytes(bytes[32..40].try_into().ok()?);
        let key = VerifyingKey::from_bytes(identity.as_bytes()).ok()?;
        let signature = Signature::from_bytes(bytes[40..].try_into().ok()?);
        key.verify_strict(&announcement_message(&public, not_after), &signature)
            .ok()?;
        Some(Self { public, not_after })
    }

    /// Whether the key may still be used at `now` (Unix seconds).
    pub(crate) fn valid_at(&self, now_s: u64) -> bool {
        now_s < self.not_after
    }
}

fn key_id(public: &[u8; 32]) -> [u8; KEY_ID_LEN] {
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

/// One of the acceptor's box keys: its secret is wiped when dropped.
struct BoxKey {
    secret: SecretKey,
    public: [u8; 32],
    made: u64,
    not_after: u64,
    announcement: [u8; ANNOUNCEMENT_LEN],
    /// What its tickets are sealed with, made and wiped with it.
    tickets: TicketKey,
}

/// The acceptor's box keys: a new one every `rotate_every`, each valid for
/// twice that, the newest announced, expired ones dropped (and so wiped).
pub(crate) struct BoxKeyring {
    keys: Vec<BoxKey>,
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

    /// The announcement of the current key at `now` (Unix seconds): makes
    /// a new key, signed by `identity`, when the newest is `rotate_every`
    /// old, and wipes the expired.
    pub(crate) fn announcement(&mut self, identity: &Identity, now_s: u64) -> [u8; ANNOUNCEMENT_LEN] {
        self.keys.retain(|key| now_s < key.not_after);
        let current = self
            .keys
            .last()
            .filter(|newest| now_s < newest.made.saturating_add(self.rotate_every));
        if let Some(newest) = current {
            return newest.announcement;
        }
        let announcement = {
            let mut seed = Zeroizing::new([0u8; 32]);
            OsRng.fill_bytes(&mut seed[..]);
            let secret = SecretKey::from(*seed);
            let public = *secret.public_key().as_bytes();
            let not_after = now_s.saturating_add(2 * self.rotate_every);
            let mut announcement = [0u8; ANNOUNCEMENT_LEN];
            announcement[..32].copy_from_slice(&public);
            announcement[32..40].copy_from_slice(&not_after.to_be_bytes());
            announcement[40..].copy_from_slice(&identity.sign(&announcement_message(&public, not_after)));
            self.keys.push(BoxKey {
                secret,
                public,
                made: now_s,
                not_after,
                announcement,
                tickets: TicketKey::random(),
            });
            announcement
        };
        announcement
    }

    /// A ticket for `dialer` under the newest key, the one announced, and
    /// its PSK: `psk || ticket`, as the Auth carries them. `None` before
    /// any key is announced.
    pub(crate) fn issue_ticket(&self, dialer: &PeerId) -> Option<Vec<u8>> {
        let (ticket, psk) = self.keys.last()?.tickets.issue(dialer);
        let mut bytes = psk.as_bytes().to_vec();
        bytes.extend_from_slice(&ticket);
        Some(bytes)
    }

    /// The unexpired key whose id is `id`.
    fn find(&self, id: &[u8], now_s: u64) -> Option<&BoxKey> {
        self.keys
            .iter()
            .find(|key| now_s < key.not_after && key.public[..KEY_ID_LEN] == *id)
    }

    /// Keys held (expired ones included until the next announcement).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.len()
    }
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

fn early_message(ephemeral: &[u8; 32], box_public: &[u8; 32], sent_at_ms: u64, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(EARLY_LABEL.len() + 32 + 32 + 8 + 32);
    message.extend_from_slice(EARLY_LABEL);
    message.extend_from_slice(ephemeral);
    message.extend_from_slice(box_public);
    message.extend_from_slice(&sent_at_ms.to_be_bytes());
    message.extend_from_slice(digest::digest(&digest::SHA256, payload).as_ref());
    message
}

fn early_nonce(d0: &[u8]) -> [u8; 24] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(NONCE_LABEL);
    ctx.update(d0);
    let mut nonce = [0; 24];
    nonce.copy_from_slice(&ctx.finish().as_ref()[..24]);
    nonce
}

/// Early data the acceptor accepted: who sent it, and its payload.
#[derive(Debug, Clone)]
pub(crate) struct EarlyAccepted {
    pub(crate) dialer: PeerId,
    pub(crate) payload: Bytes,
    pub(crate) sent_at_ms: u64,
    /// What the acceptor proves with (in its Auth, section 17.3).
    pub(crate) proof_key: ProofKey,
}

/// Opens early data (field 10 as decoded) with the acceptor's keys: steps
/// 1 to 5 of docs/PROTOCOL.md section 17.3, less the authorizer (the
/// caller's); the replay record is [`ReplayGuard`]. The error says why it
/// was refused.
pub(crate) fn open_early(
    keys: &BoxKeyring,
    early: &[u8],
    d0: &[u8],
    dialer_ephemeral: &[u8; 32],
    now_ms: u64,
) -> Result<EarlyAccepted, &'static str> {
    // The shortest credential is a ticket of one byte and its MAC.
    const SHORTEST: usize = 8 + 1 + (1 + 1 + MAC_LEN) + 32 + 1;
    if early.len() < KEY_ID_LEN + TAG_LEN + SHORTEST {
        return Err("early data too short");
    }
    let key = keys
        .find(&early[..KEY_ID_LEN], now_ms / 1000)
        .ok_or("no such box key, or it expired")?;
    let cipher = SalsaBox::new(&PublicKey::from(*dialer_ephemeral), &key.secret);
    let plaintext = Zeroizing::new(
        cipher
            .decrypt(GenericArray::from_slice(&early_nonce(d0)), &early[KEY_ID_LEN..])
            .map_err(|_| "the box did not open")?,
    );
    let too_short = "the box's plaintext is too short";
    let (sent_at, rest) = plaintext.split_first_chunk::<8>().ok_or(too_short)?;
    let sent_at_ms = u64::from_be_bytes(*sent_at);
    if sent_at_ms.abs_diff(now_ms) > EARLY_WINDOW_MS {
        return Err("sent more than 10 s from our clock");
    }
    let (kind, rest) = rest.split_first().ok_or(too_short)?;
    let (credential, rest) = match *kind {
        SIGNED => {
            let (id, rest) = rest.split_first_chunk::<32>().ok_or(too_short)?;
            let (signature, rest) = rest.split_first_chunk::<64>().ok_or(too_short)?;
            (
                Shown::Signed(PeerId::from_bytes(*id), Signature::from_bytes(signature)),
                rest,
            )
        }
        TICKETED => {
            let (len, rest) = rest.split_first().ok_or(too_short)?;
            let (ticket, rest) = (
                rest.get(..*len as usize).ok_or(too_short)?,
                &rest[*len as usize..],
            );
            let (mac, rest) = rest.split_first_chunk::<MAC_LEN>().ok_or(too_short)?;
            (Shown::Ticket(ticket, mac), rest)
        }
        _ => return Err("an unknown kind of credential"),
    };
    let (proof_key, payload) = rest.split_first_chunk::<32>().ok_or(too_short)?;
    let message = early_message(dialer_ephemeral, &key.public, sent_at_ms, payload);
    let dialer = match credential {
        Shown::Signed(dialer, signature) => {
            VerifyingKey::from_bytes(dialer.as_bytes())
                .and_then(|verifying| verifying.verify_strict(&message, &signature))
                .map_err(|_| "the dialer's signature did not verify")?;
            dialer
        }
        Shown::Ticket(ticket, mac) => {
            let (dialer, psk) = key.tickets.open(ticket).ok_or("a ticket we did not make")?;
            if !psk.verify(&message, mac) {
                return Err("the MAC under the ticket's key did not verify");
            }
            dialer
        }
    };
    Ok(EarlyAccepted {
        dialer,
        payload: Bytes::copy_from_slice(payload),
        sent_at_ms,
        proof_key: ProofKey(Zeroizing::new(*proof_key)),
    })
}

/// The credential early data showed, before it is checked.
enum Shown<'a> {
    Signed(PeerId, Signature),
    Ticket(&'a [u8], &'a [u8; MAC_LEN]),
}

/// An acceptor's early data state: its box keys and its replay record,
/// shared by every handshake of the layer (and its clones).
#[derive(Debug)]
pub(crate) struct Acceptance {
    pub(crate) keys: std::sync::Mutex<BoxKeyring>,
    pub(crate) replay: std::sync::Mutex<ReplayGuard>,
}

impl Acceptance {
    pub(crate) fn new(rotate_every_s: u64) -> Self {
        Self {
            keys: std::sync::Mutex::new(BoxKeyring::new(rotate_every_s)),
            replay: std::sync::Mutex::new(ReplayGuard::new(REPLAY_CAPACITY)),
        }
    }
}

/// Milliseconds since the Unix epoch, by the system clock.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

mod cache;
mod replay;
mod seal;
#[cfg(test)]
mod tests;
mod ticket;

pub(crate) use cache::BoxKeyCache;
pub(crate) use replay::ReplayGuard;
#[cfg(test)]
use seal::EarlySeal;
pub(crate) use seal::{Credential, PreparedBox};
pub(crate) use ticket::Ticket;
use ticket::{TicketKey, MAC_LEN};
