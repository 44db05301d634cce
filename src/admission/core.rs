//! The sans-IO admission table: which handshakes are pending, from where,
//! and whether the next one may start. Time comes in as `now`; what to tell
//! an evicted handshake is the caller's (`W`).

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
    time::Instant,
};

use super::{AdmissionLayer, Refusal};
use crate::bucket::TokenBucket;

/// Addresses tracked at once, at most: past it (after letting go of the
/// idle ones), handshakes from new addresses are refused as `Busy`.
const MAX_TRACKED_ADDRESSES: usize = 65_536;

/// Where a handshake comes from, as limits count it: an IPv4 address, or
/// an IPv6 /64 (what one subscriber is given), IPv4-mapped IPv6 as IPv4.
pub(super) fn source(addr: IpAddr) -> IpAddr {
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

#[derive(Debug)]
struct Source {
    pending: usize,
    rate: TokenBucket,
}

/// Pending handshakes, oldest first, and what each source has used.
#[derive(Debug)]
pub(super) struct Admissions<W> {
    limits: AdmissionLayer,
    next_id: u64,
    pending: BTreeMap<u64, Pending<W>>,
    sources: HashMap<IpAddr, Source>,
    /// Past this many tracked sources, the idle ones are let go.
    prune_at: usize,
}

/// A handshake let in: its id (for [`Admissions::done`]), and what to tell
/// the handshake it evicted to make room, if any.
#[derive(Debug)]
pub(super) struct Admitted<W> {
    pub(super) id: u64,
    pub(super) evicted: Option<W>,
}

impl<W> Admissions<W> {
    pub(super) fn new(limits: AdmissionLayer) -> Self {
        Self {
            prune_at: (4 * limits.max_pending).max(1024),
            limits,
            next_id: 0,
            pending: BTreeMap::new(),
            sources: HashMap::new(),
        }
    }

    /// Handshakes pending now.
    pub(super) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether a handshake from `addr` may start at `now`: its source's
    /// rate and pending count, then the table's room (made, if it is full,
    /// by evicting the oldest handshake once it is older than
    /// [`AdmissionLayer::evict_after`]).
    pub(super) fn admit(
        &mut self,
        addr: Option<IpAddr>,
        now: Instant,
        evict: W,
    ) -> Result<Admitted<W>, Refusal> {
        let source = addr.map(source);
        if let Some(source) = source {
            self.check_source(source, now)?;
        }
        let mut evicted = None;
        if self.pending.len() >= self.limits.max_pending {
            let oldest = self.pending.first_key_value().map(|(&id, p)| (id, p.started));
            match oldest {
                Some((id, started)) if now.saturating_duration_since(started) >= self.limits.evict_after => {
                    evicted = self.remove(id).map(|p| p.evict);
                }
                _ => {
                    return Err(Refusal::Busy {
                        pending: self.pending.len(),
                    })
                }
            }
        }
        if let Some(source) = source {
            let entry = self.sources.get_mut(&source).expect("checked above");
            entry.rate.take(1);
            entry.pending += 1;
        }
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
        Ok(Admitted { id, evicted })
    }

    /// The source's limits, creating its entry (and letting idle ones go
    /// when there are many).
    fn check_source(&mut self, source: IpAddr, now: Instant) -> Result<(), Refusal> {
        if !self.sources.contains_key(&source) {
            if self.sources.len() >= self.prune_at {
                self.sources.retain(|_, s| s.pending > 0 || !s.rate.is_full(now));
                self.prune_at = (2 * self.sources.len()).max(self.prune_at);
            }
            if self.sources.len() >= MAX_TRACKED_ADDRESSES {
                return Err(Refusal::Busy {
                    pending: self.pending.len(),
                });
            }
            let rate = self.limits.per_address_rate;
            self.sources.insert(
                source,
                Source {
                    pending: 0,
                    rate: TokenBucket::full(rate, rate, now),
                },
            );
        }
        let entry = self.sources.get_mut(&source).expect("inserted above");
        if entry.pending >= self.limits.max_pending_per_address {
            return Err(Refusal::AddressBusy {
                address: source,
                pending: entry.pending,
            });
        }
        entry.rate.refill(now, 0);
        if !entry.rate.has(1) {
            return Err(Refusal::AddressRate {
                address: source,
                per_second: self.limits.per_address_rate,
            });
        }
        Ok(())
    }

    /// The handshake `id` ended (done, failed or evicted; again is a no-op).
    pub(super) fn done(&mut self, id: u64) {
        self.remove(id);
    }

    fn remove(&mut self, id: u64) -> Option<Pending<W>> {
        let pending = self.pending.remove(&id)?;
        if let Some(source) = pending.source {
            if let Some(entry) = self.sources.get_mut(&source) {
                entry.pending -= 1;
            }
        }
        Some(pending)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, last]))
    }

    fn limits() -> AdmissionLayer {
        AdmissionLayer::new()
            .max_pending(4)
            .max_pending_per_address(2)
            .handshakes_per_second_per_address(10)
            .evict_after(Duration::from_millis(500))
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_others_still_get_in() {
        let now = Instant::now();
        let mut table = Admissions::new(limits());
        let a = table.admit(ip(2), now, ()).unwrap();
        table.admit(ip(2), now, ()).unwrap();
        assert_eq!(
            table.admit(ip(2), now, ()).unwrap_err(),
            Refusal::AddressBusy {
                address: ip(2).unwrap(),
                pending: 2
            }
        );
        table.admit(ip(3), now, ()).unwrap();
        // One from .2 finishes: .2 may start another.
        table.done(a.id);
        table.admit(ip(2), now, ()).unwrap();
        assert_eq!(table.pending(), 3);
    }

    #[test]
    fn an_address_gets_its_rate_of_handshakes_per_second_and_no_more() {
        let start = Instant::now();
        let mut table = Admissions::new(limits());
        for _ in 0..10 {
            let admitted = table.admit(ip(2), start, ()).unwrap();
            table.done(admitted.id);
        }
        assert!(matches!(
            table.admit(ip(2), start, ()),
            Err(Refusal::AddressRate { per_second: 10, .. })
        ));
        assert!(
            table.admit(ip(3), start, ()).is_ok(),
            "another address is not charged"
        );
        let later = start + Duration::from_millis(100);
        let admitted = table.admit(ip(2), later, ()).unwrap();
        table.done(admitted.id);
        assert!(
            table.admit(ip(2), later, ()).is_err(),
            "a tenth of a second earns one"
        );
    }

    #[test]
    fn a_full_table_evicts_its_oldest_handshake_once_it_is_old_enough() {
        let start = Instant::now();
        let mut table = Admissions::new(limits());
        let first = table.admit(ip(1), start, "first").unwrap();
        for n in 2..=4 {
            table
                .admit(ip(n), start + Duration::from_millis(10), "later")
                .unwrap();
        }
        // Full, and nobody is old enough: refused.
        assert_eq!(
            table
                .admit(ip(9), start + Duration::from_millis(100), "new")
                .unwrap_err(),
            Refusal::Busy { pending: 4 }
        );
        // The first has waited 500 ms: it makes room.
        let admitted = table
            .admit(ip(9), start + Duration::from_millis(500), "new")
            .unwrap();
        assert_eq!(admitted.evicted, Some("first"));
        assert_eq!(table.pending(), 4);
        // Its end, reported later, changes nothing.
        table.done(first.id);
        assert_eq!(table.pending(), 4);
    }

    #[test]
    fn handshakes_without_an_address_count_only_against_the_table() {
        let now = Instant::now();
        let mut table = Admissions::new(limits());
        for _ in 0..4 {
            table.admit(None, now, ()).unwrap();
        }
        assert_eq!(
            table.admit(None, now, ()).unwrap_err(),
            Refusal::Busy { pending: 4 }
        );
    }

    #[test]
    fn ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(source(a), source(b));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(source(mapped), IpAddr::from([192, 0, 2, 7]));
    }

    #[test]
    fn idle_addresses_are_let_go() {
        let start = Instant::now();
        let mut table = Admissions::new(AdmissionLayer::new());
        for n in 0..5000u32 {
            let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
            let admitted = table.admit(addr, start, ()).unwrap();
            table.done(admitted.id);
        }
        assert!(table.sources.len() <= 5000);
        // A second later every bucket is full again: the next new address
        // past the threshold lets them all go.
        let later = start + Duration::from_secs(2);
        for n in 5000..10_000u32 {
            let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
            let admitted = table.admit(addr, later, ()).unwrap();
            table.done(admitted.id);
        }
        assert!(table.sources.len() < 8000, "{}", table.sources.len());
    }
}
