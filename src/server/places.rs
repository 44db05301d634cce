//! The connections a server holds, sans-IO: a place for each, handshakes
//! included, counted in all, per source (an IPv4 address, an IPv6 /64)
//! and per network (an IPv4 /24, an IPv6 /48). A full cap makes room
//! rather than locking newcomers out: a newcomer whose network holds
//! fewer than the heaviest one's closes that network's oldest idle
//! connection (no open stream) or its oldest handshake pending past
//! `evict_after`; one at its own source's cap closes one of its own that
//! way. Time comes in as `now`; what an occupant is, and whether it is
//! idle, is the shell's ([`Occupant`]).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
    time::{Duration, Instant},
};

use super::settings::ConnectionLimits;
use crate::{admission, Refusal};

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
    match source {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            IpAddr::from([a, b, c, 0])
        }
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[3..].fill(0);
            IpAddr::from(segments)
        }
    }
}

#[derive(Debug)]
struct Entry<O> {
    source: Option<IpAddr>,
    since: Instant,
    occupant: O,
}

/// The places held: by id (oldest first), with counts per source and per
/// network, and the networks by weight.
#[derive(Debug)]
pub(crate) struct Places<O> {
    limits: ConnectionLimits,
    next_id: u64,
    entries: BTreeMap<u64, Entry<O>>,
    by_source: HashMap<IpAddr, BTreeSet<u64>>,
    by_network: HashMap<IpAddr, BTreeSet<u64>>,
    /// (places held, network): the heaviest last.
    weights: BTreeSet<(usize, IpAddr)>,
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
            by_source: HashMap::new(),
            by_network: HashMap::new(),
            weights: BTreeSet::new(),
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
            let held = self.by_source.get(&source).map_or(0, BTreeSet::len);
            if held >= self.limits.per_address {
                // Its own cap: only one of its own may make room.
                victim = Some(self.evictable(self.by_source.get(&source), now).ok_or(
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
                since: now,
                occupant,
            },
        );
        if let Some(source) = source {
            self.by_source.entry(source).or_default().insert(id);
            let net = network(source);
            let ids = self.by_network.entry(net).or_default();
            self.weights.remove(&(ids.len(), net));
            ids.insert(id);
            self.weights.insert((ids.len(), net));
        }
        Ok(Taken { id, evicted })
    }

    /// The place `id` is held by `occupant` from now on (its handshake
    /// done).
    pub(crate) fn occupy(&mut self, id: u64, occupant: O) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.occupant = occupant;
        }
    }

    /// The place `id` is free (again is a no-op).
    pub(crate) fn release(&mut self, id: u64) {
        self.remove(id);
    }

    /// Which place gives way to a newcomer from `source` at a full total
    /// cap: one of the heaviest network's, if the newcomer's holds at
    /// least two fewer (the places even out across networks); else any
    /// handshake pending past [`HANDSHAKE_GIVES_WAY_AFTER`], the oldest.
    fn victim_for(&self, source: Option<IpAddr>, now: Instant) -> Option<u64> {
        let mine = source
            .map(network)
            .and_then(|net| self.by_network.get(&net))
            .map_or(0, BTreeSet::len);
        if let Some(&(heaviest, net)) = self.weights.last() {
            if mine + 1 < heaviest {
                if let Some(id) = self.evictable(self.by_network.get(&net), now) {
                    return Some(id);
                }
            }
        }
        self.entries
            .iter()
            .find(|(_, entry)| entry.occupant.is_handshake() && gives_way(entry, now))
            .map(|(&id, _)| id)
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
            if let Some(ids) = self.by_source.get_mut(&source) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.by_source.remove(&source);
                }
            }
            let net = network(source);
            if let Some(ids) = self.by_network.get_mut(&net) {
                self.weights.remove(&(ids.len(), net));
                ids.remove(&id);
                if ids.is_empty() {
                    self.by_network.remove(&net);
                } else {
                    self.weights.insert((ids.len(), net));
                }
            }
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
