//! The acceptor's record of the ephemeral keys it opened early data from
//! (docs/PROTOCOL.md, section 17.5): a key whose early data was accepted
//! is remembered until its window has passed, so that the same early data
//! is never accepted twice; a key whose box it opened (or tried to) and
//! refused is remembered too, so that a canned Setup sent again and again
//! costs a lookup, not an X25519 agreement, each time.
//!
//! Expiry is O(1) per entry: entries sit in one-second buckets on a
//! monotonic clock, and a bucket's entries go when its second has passed.
//! Accepted entries are bounded in all and per dialer (one client cannot
//! keep the record full); refused ones are a cache of work done, bounded
//! by evicting the oldest.

use std::{collections::HashMap, time::Instant};

use super::EARLY_WINDOW_MS;
use crate::terms::PeerId;

/// Accepted early data the record holds at once (about 6 MiB).
pub(crate) const ACCEPTED_CAPACITY: usize = 65_536;
/// The share of it one dialer identity may hold: an eighth (8,192 by
/// default, so that one identity, or a fleet of clients sharing one, is
/// accepted early about 800 times a second per acceptor, each entry
/// lasting its 10-second window; eight are needed to fill the record).
const DIALER_SHARE: usize = 8;
/// Refused early data (boxes opened, or tried) the record remembers.
pub(crate) const REFUSED_CAPACITY: usize = 16_384;
/// The longest an entry may need: its `sent_at` may be a window ahead of
/// our clock, and is good for a window after that.
const LONGEST_MS: u64 = 2 * EARLY_WINDOW_MS;
/// One-second buckets over the longest life, and one for the second
/// under way.
const BUCKETS: usize = (LONGEST_MS / 1000) as usize + 2;

/// Keys that each expire at a second of a monotonic clock, in buckets of
/// one second: insertion, lookup and expiry are O(1) per key.
#[derive(Debug)]
struct ExpiringSet<V> {
    index: HashMap<[u8; 32], V>,
    /// Bucket `s % BUCKETS` holds the keys expiring at second `s`.
    buckets: Vec<(u64, Vec<[u8; 32]>)>,
    /// Every second before this one has been expired.
    expired_to: u64,
}

impl<V: Copy> ExpiringSet<V> {
    fn new() -> Self {
        Self {
            index: HashMap::new(),
            buckets: (0..BUCKETS).map(|_| (0, Vec::new())).collect(),
            expired_to: 0,
        }
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn contains(&self, key: &[u8; 32]) -> bool {
        self.index.contains_key(key)
    }

    /// Drops every key whose second is before `now_s`, telling `gone` of
    /// each.
    fn expire(&mut self, now_s: u64, mut gone: impl FnMut(V)) {
        // After a long quiet spell, every bucket at most once.
        let from = self.expired_to.max(now_s.saturating_sub(BUCKETS as u64));
        for second in from..now_s {
            let (at, keys) = &mut self.buckets[(second % BUCKETS as u64) as usize];
            // (A bucket left from before a quiet spell holds an older second.)
            if *at < now_s {
                for key in keys.drain(..) {
                    if let Some(value) = self.index.remove(&key) {
                        gone(value);
                    }
                }
            }
        }
        self.expired_to = self.expired_to.max(now_s);
    }

    /// Adds `key`, to expire at second `expiry_s` (at most `BUCKETS - 1`
    /// seconds on, and not before `now_s`).
    fn insert(&mut self, key: [u8; 32], value: V, expiry_s: u64) {
        let (at, keys) = &mut self.buckets[(expiry_s % BUCKETS as u64) as usize];
        if *at != expiry_s {
            // Its last second has been expired already (or was never used):
            // expiries lie within a bucket's reach of `expired_to`, on a
            // clock that never goes back.
            debug_assert!(
                keys.iter().all(|key| !self.index.contains_key(key)),
                "a live bucket reused"
            );
            *at = expiry_s;
            keys.clear();
        }
        keys.push(key);
        self.index.insert(key, value);
    }

    /// Forgets the key that expires soonest, to make room.
    fn evict_oldest(&mut self) -> Option<V> {
        let start = self.expired_to;
        for second in start..start + BUCKETS as u64 {
            let (at, keys) = &mut self.buckets[(second % BUCKETS as u64) as usize];
            if *at != second {
                continue;
            }
            while let Some(key) = keys.pop() {
                if let Some(value) = self.index.remove(&key) {
                    return Some(value);
                }
            }
        }
        None
    }
}

/// The acceptor's record: accepted and refused early data, by the
/// dialer's ephemeral key.
#[derive(Debug)]
pub(crate) struct ReplayRecord {
    origin: Instant,
    /// The latest time seen: an earlier one (a clock read before a
    /// handshake's slower steps, on another worker) counts as it.
    latest: Instant,
    accepted: ExpiringSet<PeerId>,
    refused: ExpiringSet<()>,
    per_dialer: HashMap<PeerId, usize>,
    accepted_capacity: usize,
    /// What one dialer may hold of it.
    dialer_share: usize,
    refused_capacity: usize,
}

impl ReplayRecord {
    /// An empty record, its clock starting at `origin`.
    #[cfg(test)]
    pub(crate) fn new(origin: Instant) -> Self {
        Self::with_capacity(origin, ACCEPTED_CAPACITY, REFUSED_CAPACITY)
    }

    /// An empty record holding at most `accepted` accepted and `refused`
    /// refused keys.
    pub(crate) fn with_capacity(origin: Instant, accepted: usize, refused: usize) -> Self {
        let accepted = accepted.max(1);
        Self {
            origin,
            latest: origin,
            accepted: ExpiringSet::new(),
            refused: ExpiringSet::new(),
            per_dialer: HashMap::new(),
            accepted_capacity: accepted,
            dialer_share: (accepted / DIALER_SHARE).max(1),
            refused_capacity: refused,
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    /// `now`, or the latest time seen if that is later.
    fn advance(&mut self, now: Instant) -> Instant {
        self.latest = self.latest.max(now);
        self.latest
    }

    fn expire(&mut self, now_s: u64) {
        let per_dialer = &mut self.per_dialer;
        self.accepted.expire(now_s, |dialer| {
            if let Some(count) = per_dialer.get_mut(&dialer) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    per_dialer.remove(&dialer);
                }
            }
        });
        self.refused.expire(now_s, |()| {});
    }

    /// Whether early data from `ephemeral` was opened (or tried) before,
    /// accepted or not: checked before any curve operation.
    pub(crate) fn seen(&mut self, ephemeral: &[u8; 32], now: Instant) -> bool {
        let now = self.advance(now);
        self.expire(self.second(now));
        self.accepted.contains(ephemeral) || self.refused.contains(ephemeral)
    }

    /// The second an entry for early data stamped `sent_at_ms` must last
    /// to, when our clock reads `unix_ms` (and `now` on the monotonic
    /// one): until its window has passed, on the monotonic clock.
    fn expiry(&self, sent_at_ms: u64, unix_ms: u64, now: Instant) -> u64 {
        let left_ms = sent_at_ms
            .saturating_add(EARLY_WINDOW_MS)
            .saturating_sub(unix_ms)
            .min(LONGEST_MS);
        // Rounded up: an entry lasts at least as long as it must.
        self.second(now) + left_ms.div_ceil(1000) + 1
    }

    /// Remembers `ephemeral`, whose early data was refused after its box
    /// was opened or tried, for as long as it could be accepted; room is
    /// made by forgetting the refusal that expires soonest.
    pub(crate) fn refused(
        &mut self,
        ephemeral: [u8; 32],
        sent_at_ms: Option<u64>,
        unix_ms: u64,
        now: Instant,
    ) {
        if self.seen(&ephemeral, now) {
            return;
        }
        if self.refused.len() >= self.refused_capacity && self.refused.evict_oldest().is_none() {
            return;
        }
        let expiry = self.expiry(sent_at_ms.unwrap_or(unix_ms), unix_ms, now);
        self.refused.insert(ephemeral, (), expiry);
    }

    /// Records `ephemeral`'s early data, stamped `sent_at_ms`, from
    /// `dialer`, as accepted; or says why it may not be: seen before, the
    /// record full, or the dialer's share of it.
    pub(crate) fn accept(
        &mut self,
        ephemeral: [u8; 32],
        dialer: PeerId,
        sent_at_ms: u64,
        unix_ms: u64,
        now: Instant,
    ) -> Result<(), &'static str> {
        let now = self.advance(now);
        if self.seen(&ephemeral, now) {
            return Err("replayed: early data from this ephemeral key was opened before");
        }
        if self.accepted.len() >= self.accepted_capacity {
            return Err("the replay record is full");
        }
        let held = self.per_dialer.get(&dialer).copied().unwrap_or(0);
        if held >= self.dialer_share {
            return Err("this dialer's share of the replay record is full");
        }
        let expiry = self.expiry(sent_at_ms, unix_ms, now);
        self.accepted.insert(ephemeral, dialer, expiry);
        *self.per_dialer.entry(dialer).or_default() += 1;
        Ok(())
    }

    /// Entries held: accepted, refused.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.accepted.len(), self.refused.len())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const NOW_MS: u64 = 1_800_000_000_000;

    fn peer(n: u8) -> PeerId {
        PeerId::from_bytes([n; 32])
    }

    #[test]
    fn each_key_is_accepted_once_until_its_window_has_passed() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::new(t0);
        record.accept([1; 32], peer(1), NOW_MS, NOW_MS, t0).unwrap();
        assert!(record
            .accept(
                [1; 32],
                peer(2),
                NOW_MS,
                NOW_MS + 9_000,
                t0 + Duration::from_secs(9)
            )
            .unwrap_err()
            .starts_with("replayed"));
        // Stamped 10 s ago, it could be accepted until now: still held.
        assert!(record.seen(&[1; 32], t0 + Duration::from_millis(10_000)));
        // Past its window (and the bucket's second), forgotten.
        assert!(!record.seen(&[1; 32], t0 + Duration::from_millis(12_001)));
        assert_eq!(record.len(), (0, 0));
    }

    /// Entries of every lifetime from none to the longest, all live at
    /// once: each second of the span has a bucket of its own.
    #[test]
    fn entries_of_every_lifetime_are_held_at_once() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::new(t0);
        let lives = 0..=LONGEST_MS / 1000;
        for k in lives.clone() {
            // Stamped so that `k` seconds of its window are left.
            let sent_at = NOW_MS - EARLY_WINDOW_MS + k * 1000;
            record.refused([k as u8; 32], Some(sent_at), NOW_MS, t0);
        }
        for k in lives {
            assert!(record.seen(&[k as u8; 32], t0), "{k} s left, forgotten");
        }
    }

    #[test]
    fn an_entry_stamped_ahead_of_our_clock_lasts_until_its_own_window_has_passed() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::new(t0);
        // Stamped 10 s in our future: acceptable until 20 s from now.
        record
            .accept([1; 32], peer(1), NOW_MS + 10_000, NOW_MS, t0)
            .unwrap();
        assert!(record.seen(&[1; 32], t0 + Duration::from_millis(19_999)));
        assert!(!record.seen(&[1; 32], t0 + Duration::from_millis(22_001)));
        // The wall clock's jumps do not matter: the monotonic one counts.
    }

    #[test]
    fn a_refused_key_is_remembered_and_the_oldest_refusal_makes_room() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::with_capacity(t0, 4, 2);
        record.refused([1; 32], None, NOW_MS, t0);
        record.refused([2; 32], Some(NOW_MS), NOW_MS, t0 + Duration::from_secs(1));
        assert!(record.seen(&[1; 32], t0) && record.seen(&[2; 32], t0));
        record.refused([3; 32], None, NOW_MS, t0 + Duration::from_secs(1));
        assert_eq!(record.len(), (0, 2));
        assert!(
            !record.seen(&[1; 32], t0 + Duration::from_secs(1)),
            "the oldest went"
        );
        assert!(record.seen(&[3; 32], t0 + Duration::from_secs(1)));
        // A refused key is never accepted later.
        assert!(record.accept([3; 32], peer(1), NOW_MS, NOW_MS, t0).is_err());
    }

    #[test]
    fn one_dialer_cannot_keep_the_record_full_and_a_full_record_refuses() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::with_capacity(t0, 2000, 16);
        let key = |i: usize| {
            let mut key = [0; 32];
            key[..8].copy_from_slice(&(i as u64).to_be_bytes());
            key
        };
        // An eighth of it each.
        for i in 0..250 {
            record.accept(key(i), peer(1), NOW_MS, NOW_MS, t0).unwrap();
        }
        assert_eq!(
            record.accept(key(250), peer(1), NOW_MS, NOW_MS, t0),
            Err("this dialer's share of the replay record is full")
        );
        // Others still get in, up to the whole record.
        for i in 0..1750 {
            record
                .accept(key(10_000 + i), peer(2 + (i / 250) as u8), NOW_MS, NOW_MS, t0)
                .unwrap();
        }
        assert_eq!(
            record.accept(key(99_999), peer(9), NOW_MS, NOW_MS, t0),
            Err("the replay record is full")
        );
        // Once the window has passed, all of it is free again, the shares
        // included.
        let later = t0 + Duration::from_secs(13);
        record
            .accept(key(99_999), peer(1), NOW_MS + 13_000, NOW_MS + 13_000, later)
            .unwrap();
        assert_eq!(record.len(), (1, 0));
        assert_eq!(record.per_dialer.len(), 1);
        assert_eq!(ReplayRecord::new(t0).dialer_share, 8192);
    }

    #[test]
    fn a_time_read_before_a_later_one_counts_as_the_later_and_nothing_leaks() {
        // A handshake that read the clock, then spent time on its curve
        // operations while another, later, recorded its own early data.
        let t0 = Instant::now();
        let mut record = ReplayRecord::new(t0);
        let at = |s: u64| t0 + Duration::from_secs(s);
        record
            .accept([1; 32], peer(1), NOW_MS + 10_000, NOW_MS, at(30))
            .unwrap();
        record
            .accept([2; 32], peer(2), NOW_MS - 9_500, NOW_MS, at(27))
            .unwrap();
        record.refused([3; 32], Some(NOW_MS - 9_000), NOW_MS, at(25));
        assert_eq!(record.len(), (2, 1));
        assert!(!record.seen(&[9; 32], at(90)));
        assert_eq!(record.len(), (0, 0), "everything expired");
        assert!(record.per_dialer.is_empty());
    }

    #[test]
    fn expiry_after_a_long_quiet_spell_touches_each_bucket_once() {
        let t0 = Instant::now();
        let mut record = ReplayRecord::new(t0);
        record.accept([1; 32], peer(1), NOW_MS, NOW_MS, t0).unwrap();
        let much_later = t0 + Duration::from_secs(1_000_000);
        assert!(!record.seen(&[1; 32], much_later));
        record
            .accept(
                [1; 32],
                peer(1),
                NOW_MS + 1_000_000_000,
                NOW_MS + 1_000_000_000,
                much_later,
            )
            .unwrap();
        assert_eq!(record.len(), (1, 0));
    }
}
