//! The sans-IO admission table: which handshakes are pending, from where,
//! and whether the next one may start. Time comes in as `now`; what to tell
//! an evicted handshake is the caller's (`W`).

use std::{
    cmp::Reverse,
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    net::IpAddr,
    time::Instant,
};

use super::{
    sources::{Share, Sources},
    AdmissionLayer, Refusal,
};

/// Where a handshake comes from, as limits count it: an IPv4 address, or
/// an IPv6 /64 (what one subscriber is given), IPv4-mapped IPv6 as IPv4.
pub(crate) fn source(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

#[derive(Debug)]
struct Pending<W> {
    source: Option<IpAddr>,
    started: Instant,
    evict: W,
}

/// A source's pending handshakes in the order of the sources to evict
/// from first: the most pending, then the oldest handshake.
type Weight = (usize, Reverse<u64>, Option<IpAddr>);

/// Pending handshakes, oldest first, by source, and what each source has
/// used.
#[derive(Debug)]
pub(super) struct Admissions<W> {
    limits: AdmissionLayer,
    next_id: u64,
    pending: BTreeMap<u64, Pending<W>>,
    /// Each source's pending handshakes, oldest first (handshakes without
    /// an address as one source).
    by_source: HashMap<Option<IpAddr>, VecDeque<u64>>,
    /// The sources with handshakes pending, heaviest last.
    weights: BTreeSet<Weight>,
    sources: Sources,
    /// Handshakes waiting for their source's place, by source.
    waiting: HashMap<IpAddr, usize>,
    waiting_total: usize,
}

/// A handshake let in: its id (for [`Admissions::done`]), and what to tell
/// the handshake it evicted to make room, if any.
#[derive(Debug)]
pub(super) struct Admitted<W> {
    pub(super) id: u64,
    pub(super) evicted: Option<W>,
}

impl<W> Admissions<W> {
    pub(super) fn new(limits: AdmissionLayer, now: Instant) -> Self {
        Self {
            sources: Sources::new(
                limits.per_address_rate,
                limits.max_pending_per_address,
                limits.max_pending,
                limits.rate,
                now,
            ),
            limits,
            next_id: 0,
            pending: BTreeMap::new(),
            by_source: HashMap::new(),
            weights: BTreeSet::new(),
            waiting: HashMap::new(),
            waiting_total: 0,
        }
    }

    /// Whether a handshake from `source`, turned away for its source's
    /// pending limit, may wait for a place: within the source's waiting
    /// room and the acceptor's (as many as may be pending). It waits until
    /// [`stop_waiting`](Self::stop_waiting).
    pub(super) fn wait(&mut self, source: IpAddr) -> bool {
        let source = self::source(source);
        let waiting = self.waiting.entry(source).or_default();
        if *waiting >= self.limits.max_waiting_per_address || self.waiting_total >= self.limits.max_pending {
            if *waiting == 0 {
                self.waiting.remove(&source);
            }
            return false;
        }
        *waiting += 1;
        self.waiting_total += 1;
        true
    }

    /// A handshake from `source` stopped waiting (admitted, turned away or
    /// dropped): how many from it still wait.
    pub(super) fn stop_waiting(&mut self, source: IpAddr) -> usize {
        let source = self::source(source);
        let Some(waiting) = self.waiting.get_mut(&source) else {
            return 0;
        };
        *waiting -= 1;
        self.waiting_total -= 1;
        let left = *waiting;
        if left == 0 {
            self.waiting.remove(&source);
        }
        left
    }

    /// Handshakes of `source` pending now.
    pub(super) fn pending_from(&self, source: IpAddr) -> usize {
        self.by_source
            .get(&Some(self::source(source)))
            .map_or(0, VecDeque::len)
    }

    /// Handshakes waiting for a place now.
    pub(super) fn waiting(&self) -> usize {
        self.waiting_total
    }

    /// What the sources have used.
    #[cfg(test)]
    pub(super) fn sources(&self) -> &Sources {
        &self.sources
    }

    /// Handshakes pending now.
    pub(super) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether a handshake from `addr` may start at `now`: its source's
    /// pending count, its rate and its share of the acceptor's, then the
    /// table's room (made, if it is full, by evicting the oldest handshake
    /// of the source with the most pending when this one's source has
    /// fewer, or else the oldest of all once it is older than
    /// [`AdmissionLayer::evict_after`]).
    pub(super) fn admit(
        &mut self,
        addr: Option<IpAddr>,
        now: Instant,
        evict: W,
    ) -> Result<Admitted<W>, Refusal> {
        let source = addr.map(source);
        let share = self.sources.check(source, now)?;
        let victim = if self.pending.len() >= self.limits.max_pending {
            Some(self.victim(source, share, now).ok_or(Refusal::Busy {
                pending: self.pending.len(),
            })?)
        } else {
            None
        };
        self.sources.charge(source, now);
        let evicted = victim.and_then(|id| self.remove(id)).map(|p| p.evict);
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(
            id,
            Pending {
                source,
                started: now,
                evict,
            },
        );
        let queue = self.by_source.entry(source).or_default();
        if let Some(&oldest) = queue.front() {
            self.weights.remove(&(queue.len(), Reverse(oldest), source));
        }
        queue.push_back(id);
        self.weights.insert((queue.len(), Reverse(queue[0]), source));
        Ok(Admitted { id, evicted })
    }

    /// Which handshake gives way to one from `source` in a full table, if
    /// any: the oldest of the source with the most pending, if that is two
    /// more than `source` has (the pending handshakes even out across
    /// sources); else the oldest of all, if `source` is within its share of
    /// the acceptor's rate (the table turns over at most at that rate, so a
    /// handshake that takes less than `max_pending` of its turns completes)
    /// or if the oldest has waited [`AdmissionLayer::evict_after`].
    fn victim(&self, source: Option<IpAddr>, share: Share, now: Instant) -> Option<u64> {
        let mine = self.by_source.get(&source).map_or(0, VecDeque::len);
        let &(heaviest, Reverse(oldest), _) = self.weights.last()?;
        if mine + 1 < heaviest {
            return Some(oldest);
        }
        let (&id, p) = self.pending.first_key_value()?;
        let waited = now.saturating_duration_since(p.started) >= self.limits.evict_after;
        (share == Share::Within || waited).then_some(id)
    }

    /// The handshake `id` ended (done, failed or evicted; again is a
    /// no-op): its source, if one of its handshakes waits for the place.
    pub(super) fn done(&mut self, id: u64) -> Option<IpAddr> {
        let source = self.remove(id)?.source?;
        self.waiting.contains_key(&source).then_some(source)
    }

    fn remove(&mut self, id: u64) -> Option<Pending<W>> {
        let pending = self.pending.remove(&id)?;
        let source = pending.source;
        if let Some(source) = source {
            self.sources.done(source);
        }
        let queue = self.by_source.get_mut(&source).expect("listed when admitted");
        self.weights.remove(&(queue.len(), Reverse(queue[0]), source));
        queue.retain(|&other| other != id);
        match queue.front() {
            Some(&oldest) => {
                self.weights.insert((queue.len(), Reverse(oldest), source));
            }
            None => {
                self.by_source.remove(&source);
            }
        }
        Some(pending)
    }
}
