//! The connections a server holds, sans-IO: a place for each, handshakes
//! included, counted in all, per source (an IPv4 address, an IPv6 /64),
//! per subnet (an IPv6 /56; an IPv4 source's subnet is its network), per
//! network (an IPv4 /24, an IPv6 /48) and, once its handshake has
//! verified it, per peer (a client identity, from wherever it connects).
//! A full cap makes room rather than locking newcomers out: a newcomer
//! whose network holds fewer than the heaviest network or peer closes
//! one of that group's idle connections (no open stream) or handshakes
//! pending past [`HANDSHAKE_GIVES_WAY_AFTER`]: in a network, the heaviest
//! subnet's heaviest source's oldest, else the network's oldest; one at
//! its own source's cap closes one of its own that way. Time comes in as `now`;
//! what an occupant is, and whether it is idle, is the shell's
//! ([`Occupant`]).

use std::{
    cmp::Reverse,
    collections::{BTreeMap, BTreeSet, HashMap},
    hash::Hash,
    net::IpAddr,
    time::{Duration, Instant},
};

use super::settings::ConnectionLimits;
use crate::{admission, handshake::PeerId, Refusal};

/// How long a handshake must have been pending before it gives way to a
/// newcomer at a full cap: an honest one takes a round trip or two.
pub(crate) const HANDSHAKE_GIVES_WAY_AFTER: Duration = Duration::from_millis(500);

/// What holds a place: a handshake under way, or a connection.
pub(crate) trait Occupant {
    /// A connection with no open stream (a handshake is never idle: it
    /// gives way by age).
    fn is_idle(&self) -> bool;
    /// Whether it is still a handshake.
    fn is_handshake(&self) -> bool;
}

/// The network a source belongs to, as caps group sources: an IPv4 /24,
/// an IPv6 /48 (what one site is given).
pub(crate) fn network(source: IpAddr) -> IpAddr {
    prefix(source, 48)
}

/// The subnet a source belongs to, within its network: an IPv6 /56 (what
/// one home or small site is given); an IPv4 source's network.
pub(crate) fn subnet(source: IpAddr) -> IpAddr {
    prefix(source, 56)
}

/// `addr` cut to its first `v6_bits` bits (a multiple of 8) if IPv6, to
/// its /24 if IPv4.
fn prefix(addr: IpAddr, v6_bits: usize) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[v6_bits / 8..].fill(0);
            IpAddr::from(octets)
        }
    }
}

#[derive(Debug)]
struct Entry<O> {
    source: Option<IpAddr>,
    /// The verified peer, once its handshake is done.
    peer: Option<PeerId>,
    since: Instant,
    occupant: O,
}

/// Places grouped by a key (a source, a subnet, a network, a peer) within
/// a parent group (a source's subnet, a subnet's network; networks and
/// peers have one parent, `()`): the ids of each group (oldest first),
/// and each parent's groups by weight.
#[derive(Debug)]
struct Groups<P, K> {
    members: HashMap<K, BTreeSet<u64>>,
    /// Per parent, the groups by weight (places held, then the oldest
    /// place first): the heaviest last.
    weights: HashMap<P, BTreeSet<(Weight, K)>>,
}

/// A group's weight: the places it holds, and of equals, the one holding
/// the oldest place (the smallest id) is heavier.
type Weight = (usize, Reverse<u64>);

fn weight(ids: &BTreeSet<u64>) -> Option<Weight> {
    Some((ids.len(), Reverse(*ids.first()?)))
}

impl<P: Copy + Eq + Hash, K: Copy + Ord + Hash> Groups<P, K> {
    fn new() -> Self {
        Self {
            members: HashMap::new(),
            weights: HashMap::new(),
        }
    }

    /// Whether no group holds a place (no key kept for nothing).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.members.is_empty() && self.weights.is_empty()
    }

    fn of(&self, key: &K) -> Option<&BTreeSet<u64>> {
        self.members.get(key)
    }

    fn count(&self, key: &K) -> usize {
        self.of(key).map_or(0, BTreeSet::len)
    }

    /// The heaviest group within `parent` (of equals, the one holding the
    /// oldest place): its places held, key and places.
    fn heaviest_in(&self, parent: &P) -> Option<(usize, K, &BTreeSet<u64>)> {
        let &((held, _), key) = self.weights.get(parent)?.last()?;
        Some((held, key, self.of(&key)?))
    }

    fn insert(&mut self, parent: P, key: K, id: u64) {
        let ids = self.members.entry(key).or_default();
        let weights = self.weights.entry(parent).or_default();
        if let Some(was) = weight(ids) {
            weights.remove(&(was, key));
        }
        ids.insert(id);
        weights.extend(weight(ids).map(|now| (now, key)));
    }

    fn remove(&mut self, parent: P, key: K, id: u64) {
        let Some(ids) = self.members.get_mut(&key) else {
            return;
        };
        let was = weight(ids);
        ids.remove(&id);
        if let Some(weights) = self.weights.get_mut(&parent) {
            if let Some(was) = was {
                weights.remove(&(was, key));
            }
            weights.extend(weight(ids).map(|now| (now, key)));
            if weights.is_empty() {
                self.weights.remove(&parent);
            }
        }
        if ids.is_empty() {
            self.members.remove(&key);
        }
    }
}

/// The places held: by id (oldest first), with counts per source, per
/// network and per verified peer, and the networks and peers by weight.
#[derive(Debug)]
pub(crate) struct Places<O> {
    limits: ConnectionLimits,
    next_id: u64,
    entries: BTreeMap<u64, Entry<O>>,
    /// Sources within their subnets.
    by_source: Groups<IpAddr, IpAddr>,
    /// Subnets within their networks.
    by_subnet: Groups<IpAddr, IpAddr>,
    by_network: Groups<(), IpAddr>,
    by_peer: Groups<(), PeerId>,
}

/// A place taken: its id, and the occupant closed to make room for it.
#[derive(Debug)]
pub(crate) struct Taken<O> {
    pub(crate) id: u64,
    pub(crate) evicted: Option<O>,
}

impl<O: Occupant> Places<O> {
    pub(crate) fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            next_id: 0,
            entries: BTreeMap::new(),
            by_source: Groups::new(),
            by_subnet: Groups::new(),
            by_network: Groups::new(),
            by_peer: Groups::new(),
        }
    }

    /// Places held now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// A place for a connection from `addr` (if it has one) at `now`,
    /// held by `occupant`; making room by closing another if a cap is
    /// full and the newcomer is entitled to it; or why there is none.
    pub(crate) fn take(
        &mut self,
        addr: Option<IpAddr>,
        now: Instant,
        occupant: O,
    ) -> Result<Taken<O>, Refusal> {
        let source = addr.map(admission::source);
        let mut victim = None;
        if let Some(source) = source {
            let held = self.by_source.count(&source);
            if held >= self.limits.per_address {
                // Its own cap: only one of its own may make room.
                victim = Some(self.evictable(self.by_source.of(&source), now).ok_or(
                    Refusal::AddressConnections {
                        address: source,
                        open: held,
                    },
                )?);
            }
        }
        if victim.is_none() && self.entries.len() >= self.limits.max {
            victim = Some(self.victim_for(source, now).ok_or(Refusal::Connections {
                open: self.entries.len(),
            })?);
        }
        let evicted = victim.and_then(|id| self.remove(id)).map(|entry| entry.occupant);
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(
            id,
            Entry {
                source,
                peer: None,
                since: now,
                occupant,
            },
        );
        if let Some(source) = source {
            self.by_source.insert(subnet(source), source, id);
            self.by_subnet.insert(network(source), subnet(source), id);
            self.by_network.insert((), network(source), id);
        }
        Ok(Taken { id, evicted })
    }

    /// The place `id` is held by `occupant` from now on (its handshake
    /// done), which verified `peer` if the server authenticates.
    pub(crate) fn occupy(&mut self, id: u64, occupant: O, peer: Option<PeerId>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        entry.occupant = occupant;
        if let (None, Some(peer)) = (entry.peer, peer) {
            entry.peer = Some(peer);
            self.by_peer.insert((), peer, id);
        }
    }

    /// The place `id` is free (again is a no-op).
    pub(crate) fn release(&mut self, id: u64) {
        self.remove(id);
    }

    /// Which place gives way to a newcomer from `source` at a full total
    /// cap: one of the heaviest group's (a network, or a verified peer
    /// wherever it connects from; the heavier first), if the newcomer's
    /// network holds at least two fewer (the places even out across
    /// networks and peers); else any handshake pending past
    /// [`HANDSHAKE_GIVES_WAY_AFTER`], the oldest.
    fn victim_for(&self, source: Option<IpAddr>, now: Instant) -> Option<u64> {
        let mine = source.map_or(0, |source| self.by_network.count(&network(source)));
        let network = self
            .by_network
            .heaviest_in(&())
            .map(|(weight, network, ids)| (weight, Some(network), ids));
        let peer = self
            .by_peer
            .heaviest_in(&())
            .map(|(weight, _, ids)| (weight, None, ids));
        let mut heaviest = [network, peer];
        heaviest.sort_by_key(|group| std::cmp::Reverse(group.map_or(0, |(weight, ..)| weight)));
        for (weight, network, ids) in heaviest.into_iter().flatten() {
            if mine + 1 < weight {
                let heaviest_source = network.and_then(|network| self.heaviest_source_in(network, now));
                if let Some(id) = heaviest_source.or_else(|| self.evictable(Some(ids), now)) {
                    return Some(id);
                }
            }
        }
        self.entries
            .iter()
            .find(|(_, entry)| entry.occupant.is_handshake() && gives_way(entry, now))
            .map(|(&id, _)| id)
    }

    /// In `network`, the oldest place that may be closed of its heaviest
    /// subnet's heaviest source: within a network too, the heaviest gives
    /// way first.
    fn heaviest_source_in(&self, network: IpAddr, now: Instant) -> Option<u64> {
        let (_, subnet, _) = self.by_subnet.heaviest_in(&network)?;
        let (_, _, ids) = self.by_source.heaviest_in(&subnet)?;
        self.evictable(Some(ids), now)
    }

    /// Of `ids` (oldest first), the first that may be closed: a handshake
    /// pending past [`HANDSHAKE_GIVES_WAY_AFTER`], or an idle connection.
    fn evictable(&self, ids: Option<&BTreeSet<u64>>, now: Instant) -> Option<u64> {
        ids?.iter().copied().find(|id| {
            self.entries.get(id).is_some_and(|entry| {
                if entry.occupant.is_handshake() {
                    gives_way(entry, now)
                } else {
                    entry.occupant.is_idle()
                }
            })
        })
    }

    fn remove(&mut self, id: u64) -> Option<Entry<O>> {
        let entry = self.entries.remove(&id)?;
        if let Some(source) = entry.source {
            self.by_source.remove(subnet(source), source, id);
            self.by_subnet.remove(network(source), subnet(source), id);
            self.by_network.remove((), network(source), id);
        }
        if let Some(peer) = entry.peer {
            self.by_peer.remove((), peer, id);
        }
        Some(entry)
    }
}

fn gives_way<O>(entry: &Entry<O>, now: Instant) -> bool {
    now.saturating_duration_since(entry.since) >= HANDSHAKE_GIVES_WAY_AFTER
}

#[cfg(test)]
#[path = "places_tests.rs"]
mod tests;
