//! What a dialer keeps for early data: the box keys it learned, per
//! acceptor identity, and for each a box made ahead of time.

use std::collections::{HashMap, VecDeque};

use super::{Announced, PreparedBox, Ticket};
use crate::terms::PeerId;

/// Box keys a dialer learned, per acceptor identity, at most
/// [`CACHE_CAPACITY`]: the oldest learned goes first.
#[derive(Debug, Default)]
pub(crate) struct BoxKeyCache {
    known: HashMap<PeerId, Known>,
    order: VecDeque<PeerId>,
}

/// One acceptor's box key, its announcement as it came, perhaps a box to
/// it made ahead of time (an X25519 agreement off the dial's path), and
/// perhaps a ticket for early data to it (no signature on the dial's path).
#[derive(Debug)]
struct Known {
    key: Announced,
    announcement: Vec<u8>,
    prepared: Option<PreparedBox>,
    ticket: Option<Ticket>,
    /// The latest expiry of any key learned for this acceptor: a key
    /// that expires no later is not news to hand on (replicas whose
    /// clocks straddle a rotation announce the old key and the new in
    /// turn for a while).
    latest: u64,
}

/// Acceptors whose box keys a dialer remembers.
pub(crate) const CACHE_CAPACITY: usize = 1024;

impl BoxKeyCache {
    /// The box key of `peer`, if one is known and valid at `now_s`.
    pub(crate) fn get(&self, peer: &PeerId, now_s: u64) -> Option<Announced> {
        self.known
            .get(peer)
            .map(|known| known.key)
            .filter(|key| key.valid_at(now_s))
    }

    /// Whether `bytes` is the announcement we hold for `peer` (an acceptor
    /// repeats it on every handshake until it rotates): a comparison, where
    /// a new one costs a signature's verification (made outside the lock).
    pub(crate) fn holds(&self, peer: &PeerId, bytes: &[u8]) -> bool {
        self.known
            .get(peer)
            .is_some_and(|known| known.announcement[..] == *bytes)
    }

    /// Remembers `key`, which `bytes` announced and whose signature the
    /// caller verified: whether it is news, a key expiring later than any
    /// learned for `peer` before (what is worth keeping across restarts).
    pub(crate) fn learn_verified(&mut self, peer: PeerId, key: Announced, bytes: &[u8]) -> bool {
        let latest = self.known.get(&peer).map_or(0, |known| known.latest);
        self.insert(peer, key, bytes.to_vec(), latest.max(key.not_after));
        key.not_after > latest
    }

    /// The ticket `peer` gave us with its current key, if any.
    pub(crate) fn ticket(&self, peer: &PeerId) -> Option<Ticket> {
        self.known.get(peer)?.ticket.clone()
    }

    /// Keeps `ticket`, which `peer` gave with `announcement` (as it came):
    /// only if that is the key we hold (a ticket lives no longer than the
    /// box key it came with).
    pub(crate) fn keep_ticket(&mut self, peer: &PeerId, announcement: &[u8], ticket: Ticket) {
        if let Some(known) = self.known.get_mut(peer) {
            if known.announcement[..] == *announcement {
                known.ticket = Some(ticket);
            }
        }
    }

    /// The box made ahead of time to `key`, `peer`'s, if there is one
    /// (each is used once).
    pub(crate) fn take_prepared(&mut self, peer: &PeerId, key: &Announced) -> Option<PreparedBox> {
        let known = self.known.get_mut(peer)?;
        known.prepared.take().filter(|prepared| prepared.is_for(key))
    }

    /// Whether `peer`'s box key, valid at `now_s`, has no box made ahead of
    /// time: the key, if so.
    pub(crate) fn wants_prepared(&self, peer: &PeerId, now_s: u64) -> Option<Announced> {
        let known = self.known.get(peer)?;
        (known.prepared.is_none() && known.key.valid_at(now_s)).then_some(known.key)
    }

    /// Keeps `prepared` for `peer`, if it is for the key we still hold.
    pub(crate) fn keep_prepared(&mut self, peer: &PeerId, prepared: PreparedBox) {
        if let Some(known) = self.known.get_mut(peer) {
            if prepared.is_for(&known.key) {
                known.prepared = Some(prepared);
            }
        }
    }

    fn insert(&mut self, peer: PeerId, key: Announced, announcement: Vec<u8>, latest: u64) {
        let known = Known {
            key,
            announcement,
            prepared: None,
            ticket: None,
            latest,
        };
        if self.known.insert(peer, known).is_none() {
            self.order.push_back(peer);
            if self.order.len() > CACHE_CAPACITY {
                if let Some(oldest) = self.order.pop_front() {
                    self.known.remove(&oldest);
                }
            }
        }
    }
}
