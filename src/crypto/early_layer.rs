//! The encryption layer's part of early data (docs/PROTOCOL.md, section
//! 17): a dialer sealing its first stream's bytes for its Setup, and an
//! acceptor judging a dialer's. The crypto is in [`early`](super::early).

use std::sync::{Arc, Mutex, PoisonError};

use tracing::debug;

use super::{
    early::{self, Credential, EarlyAccepted, PreparedBox, ProofKey},
    EncryptLayer, Ephemeral, EARLY_ACCEPTED, EARLY_REFUSED,
};
use crate::{
    handshake::{CipherSuite, Handshake, PeerId},
    record::HandshakeState,
};

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // What the lock guards stays consistent whatever panicked.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A dialer's ephemeral key for its Setup, and its early data sealed for
/// that Setup when it can send some: a pinned peer whose box key we hold
/// (docs/PROTOCOL.md, section 17.2). With a box made ahead of time to that
/// key and a ticket, sealing costs a MAC; without the ticket, a signature;
/// without the box, an X25519 agreement too. The proof key, if early data
/// goes.
pub(super) fn seal_early<T>(
    req: &mut Handshake<T>,
    config: &EncryptLayer,
    pin: Option<PeerId>,
) -> (Ephemeral, Option<ProofKey>) {
    let now_ms = early::unix_ms();
    let (Some(data), Some(pin)) = (req.early_data(), pin) else {
        return (config.ephemerals.take(), None);
    };
    let (key, prepared, ticket) = {
        let mut cache = lock(&config.box_keys);
        let Some(key) = cache.get(&pin, now_ms / 1000) else {
            return (config.ephemerals.take(), None);
        };
        (key, cache.take_prepared(&pin, &key), cache.ticket(&pin))
    };
    let prepared = prepared.unwrap_or_else(|| PreparedBox::new(&key, config.ephemerals.take()));
    let credential = match &ticket {
        Some(ticket) => Credential::Ticket(ticket),
        None => Credential::Signed(&config.identity),
    };
    let (ephemeral, seal) = prepared.seal(credential, now_ms, data);
    let Some(seal) = seal else {
        return (ephemeral, None);
    };
    let proof_key = seal.proof_key().clone();
    req.set_early_sealer(Arc::new(seal));
    (ephemeral, Some(proof_key))
}

/// Work for a dialer's wait: a box made ahead of time to `pin`'s box key,
/// if we hold one and have none made. Whether there was work.
pub(super) fn prepare_early(config: &EncryptLayer, pin: Option<PeerId>) -> bool {
    let Some(pin) = pin else {
        return false;
    };
    let Some(key) = lock(&config.box_keys).wants_prepared(&pin, early::unix_ms() / 1000) else {
        return false;
    };
    // Made outside the lock; kept if the key is still the one we hold.
    let prepared = PreparedBox::new(&key, config.ephemerals.take());
    lock(&config.box_keys).keep_prepared(&pin, prepared);
    true
}

/// The acceptor's verdict on the dialer's early data (docs/PROTOCOL.md,
/// section 17.3): its status byte, and what it accepted.
pub(super) fn judge_early(
    hs: &HandshakeState,
    config: &EncryptLayer,
    pin: Option<PeerId>,
    suite: CipherSuite,
) -> (u8, Option<EarlyAccepted>) {
    let (Some(peer_early), Some(peer_ephemeral)) = (&hs.early.peer, &hs.peer_ephemeral) else {
        return (0, None);
    };
    let verdict = (|| {
        let acceptance = config.early.as_ref().ok_or("we do not accept early data")?;
        if suite == CipherSuite::Plaintext {
            return Err("no early data over the plaintext suite");
        }
        if lock(&acceptance.replay).seen(peer_ephemeral) {
            return Err("replayed: this ephemeral key's early data was accepted before");
        }
        let now_ms = early::unix_ms();
        let accepted = early::open_early(
            &lock(&acceptance.keys),
            &peer_early.sealed,
            &peer_early.d0,
            peer_ephemeral,
            now_ms,
        )?;
        if pin.is_some_and(|pin| pin != accepted.dialer) {
            return Err("from a dialer other than the one pinned");
        }
        if config
            .authorizer
            .as_ref()
            .is_some_and(|authorize| !authorize(&accepted.dialer))
        {
            return Err("from a dialer the authorizer refuses");
        }
        // Its OPEN frame's data must fit the windows we declared.
        if accepted.payload.len() > hs.early.local_window as usize {
            return Err("more than our windows allow");
        }
        lock(&acceptance.replay).admit(*peer_ephemeral, accepted.sent_at_ms, now_ms)?;
        Ok(accepted)
    })();
    match verdict {
        Ok(accepted) => (EARLY_ACCEPTED, Some(accepted)),
        Err(why) => {
            debug!(why, "early data refused");
            (EARLY_REFUSED, None)
        }
    }
}
