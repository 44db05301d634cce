//! When a name is resolved again, and what changed: sans-IO, with time
//! passed in.

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    time::{Duration, Instant},
};

/// How often a name is resolved again: at its records' TTL, kept within
/// `[floor, ceiling]`; after a failure, the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refresh {
    pub(crate) floor: Duration,
    pub(crate) ceiling: Duration,
}

impl Refresh {
    /// When to resolve again after an answer valid until `valid_until`,
    /// received at `now`.
    pub(crate) fn after_answer(&self, now: Instant, valid_until: Instant) -> Instant {
        let ttl = valid_until.saturating_duration_since(now);
        now + ttl.clamp(self.floor, self.ceiling)
    }

    /// When to try again after a failed lookup at `now`.
    pub(crate) fn after_failure(&self, now: Instant) -> Instant {
        now + self.floor
    }
}

/// The addresses a name resolves to, as last known.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Known {
    addrs: BTreeSet<SocketAddr>,
}

/// What an answer changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    pub(crate) added: Vec<SocketAddr>,
    pub(crate) removed: Vec<SocketAddr>,
}

impl Diff {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

impl Known {
    /// Takes `answer` as the new set; returns what changed.
    pub(crate) fn update(&mut self, answer: impl IntoIterator<Item = SocketAddr>) -> Diff {
        let new: BTreeSet<SocketAddr> = answer.into_iter().collect();
        let diff = Diff {
            added: new.difference(&self.addrs).copied().collect(),
            removed: self.addrs.difference(&new).copied().collect(),
        };
        self.addrs = new;
        diff
    }

    pub(crate) fn addrs(&self) -> &BTreeSet<SocketAddr> {
        &self.addrs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, last], 7000))
    }

    #[test]
    fn the_ttl_sets_the_next_lookup_within_the_floor_and_the_ceiling() {
        let refresh = Refresh {
            floor: Duration::from_secs(1),
            ceiling: Duration::from_secs(30),
        };
        let now = Instant::now();
        let at = |ttl| refresh.after_answer(now, now + Duration::from_secs(ttl)) - now;
        assert_eq!(at(10), Duration::from_secs(10));
        assert_eq!(at(0), Duration::from_secs(1), "a TTL of 0 is not a busy loop");
        assert_eq!(
            at(86_400),
            Duration::from_secs(30),
            "a day's TTL is not trusted that long"
        );
        // An answer already past its validity (a slow lookup) still waits the floor.
        assert_eq!(
            refresh.after_answer(now, now - Duration::from_secs(5)) - now,
            Duration::from_secs(1)
        );
        assert_eq!(refresh.after_failure(now) - now, Duration::from_secs(1));
    }

    #[test]
    fn answers_become_inserts_and_removes_of_what_changed() {
        let mut known = Known::default();
        let diff = known.update([addr(2), addr(3), addr(4)]);
        assert_eq!(diff.added, [addr(2), addr(3), addr(4)]);
        assert!(diff.removed.is_empty());
        // The same set in another order changes nothing.
        assert!(known.update([addr(4), addr(2), addr(3)]).is_empty());
        // One removed, one added.
        let diff = known.update([addr(2), addr(4), addr(5)]);
        assert_eq!(diff.added, [addr(5)]);
        assert_eq!(diff.removed, [addr(3)]);
        // Duplicates in an answer count once.
        assert!(known.update([addr(2), addr(4), addr(5), addr(5)]).is_empty());
        // Scaled to zero.
        let diff = known.update([]);
        assert_eq!(diff.removed, [addr(2), addr(4), addr(5)]);
        assert!(known.addrs().is_empty());
    }
}
