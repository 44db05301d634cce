//! The acceptor's side of early data's cryptography (docs/PROTOCOL.md,
//! section 17.3): opening the box, reading what it holds, and checking the
//! credential against the binding the acceptor computes for itself.

use bytes::Bytes;

use super::{
    early_message, early_nonce, Binding, BoxKey, ProofKey, KEY_ID_LEN, MAC_LEN, SIGNED, TAG_LEN, TICKETED,
};
use crate::terms::PeerId;

/// The shortest early data there can be: the key id, the box's tag, the
/// stamp, the shortest credential (a ticket of one byte and its MAC), the
/// proof key and one byte of payload.
pub(crate) const MIN_EARLY_LEN: usize = KEY_ID_LEN + TAG_LEN + 8 + 1 + (1 + 1 + MAC_LEN) + 32 + 1;

/// The credential an early data showed, before it is checked.
#[derive(Debug)]
enum Shown {
    Signed(PeerId, [u8; 64]),
    Ticket(Vec<u8>, [u8; MAC_LEN]),
}

/// Early data whose box opened: what it says, not yet believed.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) sent_at_ms: u64,
    shown: Shown,
    /// What the acceptor proves with, should it accept (section 17.3).
    pub(crate) proof_key: ProofKey,
    pub(crate) payload: Bytes,
}

/// Opens early data (field 10 as decoded) with `key`, the box key its id
/// names: one X25519 agreement with the dialer's `ephemeral` key, the box
/// under the nonce of `d0`, and the plaintext's layout. The error says
/// why it was refused.
pub(crate) fn open_box(
    key: &BoxKey,
    early: &[u8],
    d0: &[u8],
    ephemeral: &[u8; 32],
) -> Result<Opened, &'static str> {
    if early.len() < MIN_EARLY_LEN {
        return Err("early data too short");
    }
    let cipher = key
        .open_box(ephemeral)
        .ok_or("the dialer's ephemeral key is of small order")?;
    let plaintext = cipher
        .open(&early_nonce(d0), &early[KEY_ID_LEN..])
        .ok_or("the box did not open")?;
    let too_short = "the box's plaintext is too short";
    let (sent_at, rest) = plaintext.split_first_chunk::<8>().ok_or(too_short)?;
    let (kind, rest) = rest.split_first().ok_or(too_short)?;
    let (shown, rest) = match *kind {
        SIGNED => {
            let (id, rest) = rest.split_first_chunk::<32>().ok_or(too_short)?;
            let (signature, rest) = rest.split_first_chunk::<64>().ok_or(too_short)?;
            (Shown::Signed(PeerId::from_bytes(*id), *signature), rest)
        }
        TICKETED => {
            let (len, rest) = rest.split_first().ok_or(too_short)?;
            let ticket = rest.get(..*len as usize).ok_or(too_short)?;
            let (mac, rest) = rest[ticket.len()..]
                .split_first_chunk::<MAC_LEN>()
                .ok_or(too_short)?;
            (Shown::Ticket(ticket.to_vec(), *mac), rest)
        }
        _ => return Err("an unknown kind of credential"),
    };
    let (proof_key, payload) = rest.split_first_chunk::<32>().ok_or(too_short)?;
    Ok(Opened {
        sent_at_ms: u64::from_be_bytes(*sent_at),
        shown,
        proof_key: ProofKey::from_bytes(proof_key),
        payload: Bytes::copy_from_slice(payload),
    })
}

impl Opened {
    /// Who sent it, if its credential verifies over the message bound to
    /// `acceptor` (our own identity), `key`'s announcement and `protocol`
    /// (the one agreed): a signature, strictly verified, or a ticket we
    /// made under `key` and a MAC under its PSK. Early data a dialer meant
    /// for another acceptor, or for another protocol, fails here.
    pub(crate) fn verify(
        &self,
        key: &BoxKey,
        acceptor: &PeerId,
        protocol: &[u8],
        ephemeral: &[u8; 32],
    ) -> Result<PeerId, &'static str> {
        let binding = Binding {
            acceptor,
            announcement: &key.announcement_hash,
            protocol,
        };
        let message = early_message(binding, ephemeral, self.sent_at_ms, &self.payload);
        match &self.shown {
            Shown::Signed(dialer, signature) => {
                if !crate::crypto::verify_signature(dialer, &message, signature) {
                    return Err(
                        "the dialer's signature did not verify (or it was meant for another acceptor)",
                    );
                }
                Ok(*dialer)
            }
            Shown::Ticket(ticket, mac) => {
                let (dialer, psk) = key.tickets.open(ticket).ok_or("a ticket we did not make")?;
                if !psk.verify(&message, mac) {
                    return Err("the MAC under the ticket's key did not verify (or it was meant for another acceptor)");
                }
                Ok(dialer)
            }
        }
    }
}
