//! Early data's steps in the handshake (docs/PROTOCOL.md, section 17): the
//! dialer sealing its first stream's bytes for its Setup, bound to the
//! acceptor it pins, and the acceptor's checks, in the order that makes a
//! refusal cheap: the load and the budget before any work, the replay
//! record before any curve operation, the box opened under no lock.

use std::time::Instant;

use bytes::Bytes;
use tracing::debug;

use super::{auth::EarlyStatus, encrypt::EncryptConfig};
use crate::{
    crypto::{
        early::{self, open_box, Counted, Credential, EarlySeal, PreparedBox, ProofKey, EARLY_WINDOW_MS},
        Ephemeral,
    },
    sync::lock,
    terms::{Agreement, CipherSuite, PeerId},
};

/// The time a step of the handshake is taken at: the wall clock (which
/// early data's stamp is checked against) and the monotonic one (which
/// the acceptor's bookkeeping runs on).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) unix_ms: u64,
    pub(crate) now: Instant,
}

impl Clock {
    /// The clocks, read now.
    pub(crate) fn read() -> Self {
        Self {
            unix_ms: early::unix_ms(),
            now: Instant::now(),
        }
    }

    pub(crate) fn unix_s(&self) -> u64 {
        self.unix_ms / 1000
    }
}

/// The dialer's ephemeral key for its Setup, and its early data sealed for
/// that Setup when it can send some (section 17.2): it pins `pin`, holds an
/// unexpired box key of that identity, and has `data` to send, for
/// `protocol` (the application protocol it expects). With a box made ahead
/// of time and a ticket, sealing costs a MAC; without the ticket, a
/// signature; without the box, an X25519 agreement too; each outside the
/// cache's lock.
pub(crate) fn seal(
    config: &EncryptConfig,
    pin: Option<PeerId>,
    protocol: &[u8],
    data: Option<&Bytes>,
    clock: Clock,
) -> (Ephemeral, Option<EarlySeal>) {
    let (Some(data), Some(pin)) = (data, pin) else {
        return (config.ephemerals.take(), None);
    };
    let known = {
        let mut cache = lock(&config.box_keys);
        cache
            .get(&pin, clock.unix_s())
            .map(|key| (key, cache.take_prepared(&pin, &key), cache.ticket(&pin)))
    };
    // (A key made, if the pool has none, outside the lock.)
    let Some((key, prepared, ticket)) = known else {
        return (config.ephemerals.take(), None);
    };
    let prepared = match prepared {
        Some(prepared) => prepared,
        None => match PreparedBox::new(&key, config.ephemerals.take()) {
            Ok(prepared) => prepared,
            Err(ephemeral) => return (ephemeral, None),
        },
    };
    let credential = match &ticket {
        Some(ticket) => Credential::Ticket(ticket),
        None => Credential::Signed(&config.identity),
    };
    prepared.seal(credential, &pin, protocol, clock.unix_ms, data)
}

/// Work for a dialer's wait: a box made ahead of time to `pin`'s box key,
/// if we hold one and have none made. Whether there was work.
pub(crate) fn prepare(config: &EncryptConfig, pin: Option<PeerId>) -> bool {
    let Some(pin) = pin else {
        return false;
    };
    let Some(key) = lock(&config.box_keys).wants_prepared(&pin, early::unix_ms() / 1000) else {
        return false;
    };
    // Made outside the lock; kept if the key is still the one we hold.
    if let Ok(prepared) = PreparedBox::new(&key, config.ephemerals.take()) {
        lock(&config.box_keys).keep_prepared(&pin, prepared);
    }
    true
}

/// The dialer's early data as its Setup carried it: the sealed field, and
/// the Setup before it (D0), which the box's nonce hashes, if the field
/// came last, where it must.
#[derive(Debug, Clone)]
pub(crate) struct PeerEarly {
    pub(crate) sealed: Vec<u8>,
    pub(crate) d0: Option<Vec<u8>>,
}

/// Early data the acceptor accepted: who sent it, its payload, and what
/// the acceptor proves with.
#[derive(Debug)]
pub(crate) struct EarlyAccepted {
    pub(crate) dialer: PeerId,
    pub(crate) payload: Bytes,
    pub(crate) proof_key: ProofKey,
}

/// What the acceptor's judgement needs of the handshake so far.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judged<'a> {
    pub(crate) agreement: &'a Agreement,
    /// The dialer's ephemeral key, from its Setup.
    pub(crate) ephemeral: &'a [u8; 32],
    /// The dialer we pinned, if any.
    pub(crate) pin: Option<PeerId>,
    /// The most early data our Setup's windows let the dialer send.
    pub(crate) window: u32,
}

/// The acceptor's verdict on the dialer's early data (section 17.3): its
/// status, and what it accepted. Each step is taken only if the ones
/// before passed, the cheapest first.
pub(crate) fn judge(
    config: &EncryptConfig,
    early: &PeerEarly,
    at: Judged<'_>,
    clock: Clock,
) -> (EarlyStatus, Option<EarlyAccepted>) {
    let Some(acceptance) = config.early.as_deref() else {
        debug!("early data refused: we do not accept early data");
        return (EarlyStatus::Refused, None);
    };
    acceptance.count(Counted::Offered);
    // Judged by the acceptor's wall clock, which never steps back.
    let clock = Clock {
        unix_ms: acceptance.wall_clock(clock.unix_ms, clock.now),
        now: clock.now,
    };
    let verdict = (|| {
        if at.agreement.suite() == CipherSuite::Plaintext {
            return Err("no early data over the plaintext suite");
        }
        let d0 = early
            .d0
            .as_deref()
            .ok_or("early data not the last field of the Setup")?;
        if early::is_low_order(at.ephemeral) {
            return Err("the dialer's ephemeral key is of small order");
        }
        // A lookup, where opening is an X25519 agreement: a replay, or a
        // canned Setup sent again.
        if acceptance.seen(at.ephemeral, clock.now) {
            acceptance.count(Counted::RefusedAsSeen);
            return Err("a box from this ephemeral key was opened before");
        }
        // Under load, no work at all.
        if acceptance.loaded() {
            acceptance.count(Counted::RefusedUnderLoad);
            return Err("the acceptor is loaded");
        }
        if early.sealed.len() < early::MIN_EARLY_LEN {
            return Err("early data too short");
        }
        let key = acceptance
            .find(
                &config.identity,
                &early.sealed[..early::KEY_ID_LEN],
                clock.unix_s(),
            )
            .ok_or("no such box key, or it expired")?;
        // Past the budget of boxes, no curve operation.
        if !acceptance.take_budget(clock.now) {
            acceptance.count(Counted::RefusedUnderLoad);
            return Err("the budget of early data boxes is spent");
        }
        acceptance.count(Counted::BoxOpened);
        let opened = match open_box(&key, &early.sealed, d0, at.ephemeral) {
            Ok(opened) => opened,
            Err(why) => {
                acceptance.refused(*at.ephemeral, None, clock.unix_ms, clock.now);
                return Err(why);
            }
        };
        let checked = (|| {
            if opened.sent_at_ms.abs_diff(clock.unix_ms) > EARLY_WINDOW_MS {
                return Err("sent more than 10 s from our clock");
            }
            let protocol = at.agreement.protocol().unwrap_or_default().as_bytes();
            let dialer = opened.verify(&key, &config.identity.peer_id(), protocol, at.ephemeral)?;
            if at.pin.is_some_and(|pin| pin != dialer) {
                return Err("from a dialer other than the one pinned");
            }
            if config
                .authorizer
                .as_ref()
                .is_some_and(|authorize| !authorize(&dialer))
            {
                return Err("from a dialer the authorizer refuses");
            }
            // Its OPEN frame's data must fit the windows we declared.
            if opened.payload.len() > at.window as usize {
                return Err("more than our windows allow");
            }
            acceptance.accept(*at.ephemeral, dialer, opened.sent_at_ms, clock.unix_ms, clock.now)?;
            Ok(dialer)
        })();
        match checked {
            Ok(dialer) => Ok(EarlyAccepted {
                dialer,
                payload: opened.payload,
                proof_key: opened.proof_key,
            }),
            Err(why) => {
                acceptance.refused(*at.ephemeral, Some(opened.sent_at_ms), clock.unix_ms, clock.now);
                Err(why)
            }
        }
    })();
    match verdict {
        Ok(accepted) => {
            acceptance.count(Counted::Accepted);
            (EarlyStatus::Accepted, Some(accepted))
        }
        Err(why) => {
            acceptance.count(Counted::Refused);
            debug!(why, "early data refused");
            (EarlyStatus::Refused, None)
        }
    }
}
