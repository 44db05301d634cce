//! Tickets (docs/PROTOCOL.md, section 17.3): an acceptor that accepted a
//! dialer's early data gives it a ticket and a fresh secret (the PSK) in
//! its Auth; the dialer's next early data shows the ticket and a MAC under
//! the PSK in place of a signature, which the acceptor checks for the cost
//! of a hash where a signature costs a curve verification. The ticket is
//! the dialer's id and the PSK, sealed (NaCl `crypto_secretbox`) under a
//! key the acceptor makes and wipes with each box key: only its maker can
//! read it, and it lives no longer than its box key.

use aws_lc_rs::hmac;
use crypto_secretbox::{
    aead::{generic_array::GenericArray, Aead, KeyInit},
    XSalsa20Poly1305,
};
use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use crate::terms::PeerId;

/// The longest ticket the wire carries (its length is a byte).
pub(crate) const MAX_TICKET_LEN: usize = 255;
/// The PSK's length, and the MAC's.
pub(crate) const PSK_LEN: usize = 32;
pub(crate) const MAC_LEN: usize = 32;

/// The acceptor's ticket key, one per box key: wiped when dropped.
pub(crate) struct TicketKey(XSalsa20Poly1305);

impl TicketKey {
    pub(crate) fn random() -> Self {
        let mut key = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut key[..]);
        Self::from_secret(&key)
    }

    /// The ticket key of `secret` (which the caller wipes).
    pub(crate) fn from_secret(secret: &[u8; 32]) -> Self {
        Self(XSalsa20Poly1305::new(GenericArray::from_slice(&secret[..])))
    }

    /// A ticket for `dialer`, and the PSK it holds.
    pub(crate) fn issue(&self, dialer: &PeerId) -> Ticket {
        let psk = Psk::random();
        let mut nonce = [0u8; 24];
        OsRng.fill_bytes(&mut nonce);
        let mut plaintext = Zeroizing::new([0u8; 64]);
        plaintext[..32].copy_from_slice(dialer.as_bytes());
        plaintext[32..].copy_from_slice(&psk.0[..]);
        let mut ticket = nonce.to_vec();
        // Sealing in memory does not fail; an empty ticket is never used.
        match self.0.encrypt(GenericArray::from_slice(&nonce), &plaintext[..]) {
            Ok(sealed) => ticket.extend_from_slice(&sealed),
            Err(_) => ticket.clear(),
        }
        Ticket { ticket, psk }
    }

    /// The dialer and the PSK in `ticket`, if we made it.
    pub(crate) fn open(&self, ticket: &[u8]) -> Option<(PeerId, Psk)> {
        let (nonce, sealed) = ticket.split_first_chunk::<24>()?;
        let plaintext = Zeroizing::new(self.0.decrypt(GenericArray::from_slice(nonce), sealed).ok()?);
        let (dialer, psk) = plaintext.split_first_chunk::<32>()?;
        let psk: &[u8; PSK_LEN] = psk.try_into().ok()?;
        Some((PeerId::from_bytes(*dialer), Psk::from_bytes(psk)))
    }
}

/// A ticket's secret: what the dialer's MAC is keyed with. Wiped when
/// dropped; its `Debug` shows nothing of it.
#[derive(Clone)]
pub(crate) struct Psk(Zeroizing<[u8; PSK_LEN]>);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(..)")
    }
}

impl Psk {
    fn random() -> Self {
        let mut psk = Zeroizing::new([0u8; PSK_LEN]);
        OsRng.fill_bytes(&mut psk[..]);
        Self(psk)
    }

    pub(crate) fn as_bytes(&self) -> &[u8; PSK_LEN] {
        &self.0
    }

    /// The PSK of these bytes.
    pub(crate) fn from_bytes(bytes: &[u8; PSK_LEN]) -> Self {
        Self(Zeroizing::new(*bytes))
    }

    /// HMAC-SHA-256 of `message` under the PSK.
    pub(crate) fn mac(&self, message: &[u8]) -> [u8; MAC_LEN] {
        let mut tag = [0; MAC_LEN];
        tag.copy_from_slice(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &self.0[..]), message).as_ref());
        tag
    }

    /// Whether `tag` is [`mac`](Self::mac)'s of `message` (in constant
    /// time).
    pub(crate) fn verify(&self, message: &[u8], tag: &[u8]) -> bool {
        hmac::verify(&hmac::Key::new(hmac::HMAC_SHA256, &self.0[..]), message, tag).is_ok()
    }
}

/// A dialer's ticket for one acceptor, with its PSK, as the acceptor's
/// Auth gave them.
#[derive(Clone)]
pub(crate) struct Ticket {
    pub(crate) ticket: Vec<u8>,
    pub(crate) psk: Psk,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("len", &self.ticket.len())
            .finish_non_exhaustive()
    }
}

/// Equal tickets and PSKs (the PSK compared in constant time).
impl PartialEq for Ticket {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.ticket == other.ticket && bool::from(self.psk.as_bytes().ct_eq(other.psk.as_bytes()))
    }
}

impl Eq for Ticket {}

impl Ticket {
    /// From the Auth's `psk || ticket`, if the lengths are right.
    pub(crate) fn from_auth(bytes: &[u8]) -> Option<Self> {
        let (psk, ticket) = bytes.split_first_chunk::<PSK_LEN>()?;
        (1..=MAX_TICKET_LEN).contains(&ticket.len()).then(|| Self {
            ticket: ticket.to_vec(),
            psk: Psk::from_bytes(psk),
        })
    }

    /// `psk || ticket`, as the Auth carries them: wiped when dropped.
    pub(crate) fn to_auth(&self) -> Zeroizing<Vec<u8>> {
        let mut bytes = Zeroizing::new(Vec::with_capacity(PSK_LEN + self.ticket.len()));
        bytes.extend_from_slice(self.psk.as_bytes());
        bytes.extend_from_slice(&self.ticket);
        bytes
    }
}
