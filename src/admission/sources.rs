//! What the sources of handshakes have used: each address's pending
//! handshakes and rate, and the acceptor's rate in all, shared fairly
//! among the sources that ask for it.

use std::{
    collections::HashMap,
    net::IpAddr,
    time::{Duration, Instant},
};

use crate::{bucket::TokenBucket, Refusal};

/// Addresses tracked at once, at least (the floor of the cap, which is
/// larger when `max_pending` is: every source with a pending handshake
/// stays tracked).
const MIN_TRACKED_ADDRESSES: usize = 65_536;

/// The acceptor's handshakes per second, shared by the sources that ask
/// for them in the same second: a source that has had its fair share
/// lately (the rate over the sources asking) takes from the upper half of
/// the bucket only, and the lower half is kept for those that have not.
/// Many addresses flooding at once so get what their number entitles them
/// to, and a source asking at no more than its share is let in while they
/// do.
#[derive(Debug)]
struct SharedRate {
    bucket: TokenBucket,
    /// The whole seconds since `origin` count the windows in which askers
    /// are counted.
    origin: Instant,
    window: u64,
    askers_now: usize,
    askers_before: usize,
}

impl SharedRate {
    fn new(rate: u64, now: Instant) -> Self {
        Self {
            bucket: TokenBucket::full(rate, rate, now),
            origin: now,
            window: 0,
            askers_now: 0,
            askers_before: 0,
        }
    }

    /// Counts a source among this second's askers (`seen_in` is its mark:
    /// the window it last asked in, plus one).
    fn ask(&mut self, seen_in: &mut u64, now: Instant) {
        let window = now.saturating_duration_since(self.origin).as_secs();
        if window != self.window {
            self.askers_before = if window == self.window + 1 {
                self.askers_now
            } else {
                0
            };
            self.askers_now = 0;
            self.window = window;
        }
        if *seen_in != window + 1 {
            *seen_in = window + 1;
            self.askers_now += 1;
        }
    }

    /// The time between two handshakes of a source that asks for no more
    /// than its share: the sources asking, over the rate.
    fn fair_interval(&self) -> Duration {
        let askers = self.askers_now.max(self.askers_before).max(1) as f64;
        Duration::from_secs_f64(askers / self.bucket.rate() as f64)
    }

    /// Whether a handshake's token is left for a source within its share
    /// (any token) or past it (one above half the bucket).
    fn has_room(&mut self, share: Share, now: Instant) -> bool {
        self.bucket.refill(now, 0);
        match share {
            Share::Within => self.bucket.has(1),
            Share::Past => self.bucket.has(self.bucket.rate() / 2 + 1),
        }
    }
}

/// Whether a source has had its fair share of the acceptor's rate lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Share {
    /// Its last handshake was longer ago than the rate's fair interval
    /// (or it has had none).
    Within,
    /// Its last handshake was sooner, or its address is unknown.
    Past,
}

#[derive(Debug)]
struct Source {
    pending: usize,
    rate: TokenBucket,
    last_admitted: Option<Instant>,
    seen_in: u64,
}

/// The sources tracked, their limits, and the acceptor's shared rate.
#[derive(Debug)]
pub(super) struct Sources {
    map: HashMap<IpAddr, Source>,
    /// Past this many tracked sources, the idle ones are let go.
    prune_at: usize,
    /// The least `prune_at` is set to.
    prune_floor: usize,
    /// Never more than this many: at `cap / 2` after letting the idle go,
    /// those that only spent their rate lately go too.
    cap: usize,
    per_address_rate: u64,
    max_pending_per_address: usize,
    shared: SharedRate,
}

impl Sources {
    pub(super) fn new(
        per_address_rate: u64,
        max_pending_per_address: usize,
        max_pending: usize,
        rate: u64,
        now: Instant,
    ) -> Self {
        let cap = MIN_TRACKED_ADDRESSES.max(2 * max_pending);
        let prune_floor = (4 * max_pending).clamp(1024, cap / 2);
        Self {
            map: HashMap::new(),
            prune_at: prune_floor,
            prune_floor,
            cap,
            per_address_rate,
            max_pending_per_address,
            shared: SharedRate::new(rate, now),
        }
    }

    /// Sources tracked now.
    #[cfg(test)]
    pub(super) fn tracked(&self) -> usize {
        self.map.len()
    }

    /// Whether a handshake from `source` (`None`: no address known) may
    /// start at `now`, by its own limits and its share of the acceptor's
    /// rate: if so, whether it is within its share. Charges nothing
    /// ([`Self::charge`] does, once the handshake is let in).
    pub(super) fn check(&mut self, source: Option<IpAddr>, now: Instant) -> Result<Share, Refusal> {
        let Some(source) = source else {
            // No address: it cannot be told apart from others like it, so
            // it never counts as within a share.
            return self.shared_room(Share::Past, now);
        };
        if !self.map.contains_key(&source) {
            self.make_room(now);
            let rate = self.per_address_rate;
            self.map.insert(
                source,
                Source {
                    pending: 0,
                    rate: TokenBucket::full(rate, rate, now),
                    last_admitted: None,
                    seen_in: 0,
                },
            );
        }
        let entry = self.map.get_mut(&source).expect("inserted above");
        self.shared.ask(&mut entry.seen_in, now);
        if entry.pending >= self.max_pending_per_address {
            return Err(Refusal::AddressBusy {
                address: source,
                pending: entry.pending,
            });
        }
        entry.rate.refill(now, 0);
        if !entry.rate.has(1) {
            return Err(Refusal::AddressRate {
                address: source,
                per_second: self.per_address_rate,
            });
        }
        let interval = self.shared.fair_interval();
        let share = match entry.last_admitted {
            Some(at) if now.saturating_duration_since(at) < interval => Share::Past,
            _ => Share::Within,
        };
        self.shared_room(share, now)
    }

    fn shared_room(&mut self, share: Share, now: Instant) -> Result<Share, Refusal> {
        if self.shared.has_room(share, now) {
            Ok(share)
        } else {
            Err(Refusal::Rate {
                per_second: self.shared.bucket.rate(),
            })
        }
    }

    /// A handshake [`Self::check`] allowed starts.
    pub(super) fn charge(&mut self, source: Option<IpAddr>, now: Instant) {
        self.shared.bucket.take(1);
        if let Some(entry) = source.and_then(|s| self.map.get_mut(&s)) {
            entry.rate.take(1);
            entry.pending += 1;
            entry.last_admitted = Some(now);
        }
    }

    /// A handshake of `source` ended.
    pub(super) fn done(&mut self, source: IpAddr) {
        if let Some(entry) = self.map.get_mut(&source) {
            entry.pending -= 1;
        }
    }

    /// Room for one more source, amortized: past `prune_at`, the idle
    /// sources go (nothing pending, their rate spent on nothing for a
    /// second); if that leaves half the cap or more, every source with
    /// nothing pending goes (forgetting what rate they spent lately, so
    /// that a table crowded by many addresses never turns new ones away).
    /// Only sources with a handshake pending are left then, at most
    /// `max_pending` of them, so the table stays under its cap.
    fn make_room(&mut self, now: Instant) {
        if self.map.len() < self.prune_at {
            return;
        }
        self.map.retain(|_, s| s.pending > 0 || !s.rate.is_full(now));
        if self.map.len() >= self.cap / 2 {
            self.map.retain(|_, s| s.pending > 0);
            tracing::debug!(
                tracked = self.map.len(),
                "admission: too many sources to track; those with nothing pending let go"
            );
        }
        self.prune_at = (2 * self.map.len()).clamp(self.prune_floor, self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sources_that_asked_last_second_still_share_the_rate_at_the_start_of_this_one() {
        let t0 = Instant::now();
        let mut rate = SharedRate::new(100, t0);
        let (mut a, mut b) = (0, 0);
        rate.ask(&mut a, t0);
        rate.ask(&mut b, t0);
        rate.ask(&mut a, t0);
        assert_eq!(rate.fair_interval(), Duration::from_millis(20), "two askers");
        // The next second: only one has asked yet, but both did just now.
        rate.ask(&mut a, t0 + Duration::from_secs(1));
        assert_eq!(rate.fair_interval(), Duration::from_millis(20));
        // After a quiet second, only this second's askers count.
        rate.ask(&mut a, t0 + Duration::from_secs(3));
        assert_eq!(rate.fair_interval(), Duration::from_millis(10));
    }

    #[test]
    fn a_source_past_its_share_needs_a_token_above_half_the_bucket() {
        let t0 = Instant::now();
        let mut rate = SharedRate::new(100, t0);
        rate.bucket.take(49);
        assert!(rate.has_room(Share::Past, t0), "51 tokens");
        rate.bucket.take(1);
        assert!(!rate.has_room(Share::Past, t0), "50 tokens");
        assert!(rate.has_room(Share::Within, t0));
    }

    #[test]
    fn a_source_is_past_its_share_until_a_fair_interval_has_gone_by() {
        let t0 = Instant::now();
        let mut sources = Sources::new(100, 16, 100, 1_000, t0);
        let source = Some(IpAddr::from([127, 0, 0, 2]));
        assert_eq!(sources.check(source, t0), Ok(Share::Within));
        sources.charge(source, t0);
        // One source asking: a share is a thousandth of a second.
        let interval = Duration::from_millis(1);
        assert_eq!(sources.check(source, t0 + interval / 2), Ok(Share::Past));
        assert_eq!(sources.check(source, t0 + interval), Ok(Share::Within));
    }
}
