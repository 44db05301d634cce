//! What an acceptor's handshakes share for early data: its box keys, its
//! replay record, its budget of boxes to open and what it counts. Every
//! lock here is held for a lookup or an insertion, never across a curve
//! operation or a signature (`sync::assert_unlocked` checks it in debug
//! builds): a flood of early data on one worker does not make a handshake
//! on another wait for its cryptography.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, RwLock,
    },
    time::Instant,
};

use super::{replay::REFUSED_CAPACITY, BoxKey, BoxKeyring, ReplayRecord};
use crate::{
    bucket::TokenBucket,
    crypto::Identity,
    sync::{lock, read, write},
    terms::PeerId,
};

/// Decides, before a box is opened, whether the acceptor is too loaded to
/// take early data at all (`true`: refuse it without opening the box).
pub(crate) type LoadSignal = Arc<dyn Fn() -> bool + Send + Sync>;

/// How many boxes of early data an acceptor opens per second at most (each
/// an X25519 agreement), and in a burst: past it, early data is refused
/// without opening its box, and the handshake goes on as version 2's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EarlyBudget {
    pub(crate) per_second: u64,
}

impl Default for EarlyBudget {
    /// 1,000 a second per core, in bursts of as many: the rate at which
    /// `AdmissionLayer` admits handshakes by default.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Self {
            per_second: 1_000 * cores,
        }
    }
}

/// What an acceptor did with the early data it was offered, counted since
/// its [`EncryptLayer`](crate::EncryptLayer) was made
/// ([`early_data_stats`](crate::EncryptLayer::early_data_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EarlyDataStats {
    /// Setups that carried early data, with version 3 agreed.
    pub offered: u64,
    /// Early data accepted: its stream delivered before the dialer's first
    /// record.
    pub accepted: u64,
    /// Early data refused (the handshake went on as version 2's, and the
    /// dialer sent its request again after it), for any reason.
    pub refused: u64,
    /// Of those, refused without opening the box because the acceptor was
    /// loaded: its load signal, or its budget of boxes per second spent.
    pub refused_under_load: u64,
    /// Of those, refused with one lookup because a box from the same
    /// ephemeral key had been opened (or tried) before: a replay, or a
    /// canned Setup sent again.
    pub refused_as_seen: u64,
    /// Boxes opened or tried: one X25519 agreement each.
    pub boxes_opened: u64,
}

#[derive(Debug, Default)]
struct Counters {
    offered: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    refused_under_load: AtomicU64,
    refused_as_seen: AtomicU64,
    boxes_opened: AtomicU64,
}

/// One thing an acceptor did with early data, to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Offered,
    Accepted,
    Refused,
    RefusedUnderLoad,
    RefusedAsSeen,
    BoxOpened,
}

/// Where an acceptor's box keys come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// Random, made when first needed: this process's own.
    Random,
    /// Derived from the identity and the rotation period
    /// ([`BoxKey::derived`]): the same in every replica of the identity.
    Identity,
}

/// An acceptor's early data state, shared by every handshake of its
/// layer (and the layer's clones).
pub(crate) struct Acceptance {
    keys: RwLock<BoxKeyring>,
    source: KeySource,
    /// When it was made (Unix milliseconds): a replica deriving its keys
    /// refuses early data sent before its replay record could have seen
    /// it.
    pub(super) started_ms: u64,
    /// The wall clock as early data's window is judged by: the system's,
    /// but never stepping back (the last reading, advanced by the monotonic
    /// clock since): a clock set back must not reopen the window of early
    /// data the replay record has forgotten.
    wall: Mutex<(u64, Instant)>,
    record: Mutex<ReplayRecord>,
    budget: Mutex<TokenBucket>,
    load: Option<LoadSignal>,
    counters: Counters,
}

impl std::fmt::Debug for Acceptance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptance")
            .field("keys", &*read(&self.keys))
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Acceptance {
    /// Box keys rotated every `rotate_every_s`, at most `budget` boxes
    /// opened a second, refusing early data whenever `load` says so, and
    /// remembering at most `replay_capacity` accepted early data at once.
    pub(crate) fn new(
        rotate_every_s: u64,
        source: KeySource,
        budget: EarlyBudget,
        load: Option<LoadSignal>,
        replay_capacity: usize,
    ) -> Self {
        let now = Instant::now();
        let rate = budget.per_second;
        Self {
            keys: RwLock::new(BoxKeyring::new(rotate_every_s)),
            source,
            started_ms: super::unix_ms(),
            wall: Mutex::new((0, now)),
            record: Mutex::new(ReplayRecord::with_capacity(
                now,
                replay_capacity,
                REFUSED_CAPACITY,
            )),
            budget: Mutex::new(TokenBucket::full(rate, rate, now)),
            load,
            counters: Counters::default(),
        }
    }

    /// The key to announce at `now_s` (Unix seconds): the current one, or a
    /// new one signed by `identity` when the newest is `rotate_every` old
    /// (made and signed outside the lock; expired keys are dropped, and so
    /// wiped).
    pub(crate) fn current_key(&self, identity: &Identity, now_s: u64) -> Arc<BoxKey> {
        if self.source == KeySource::Identity {
            return self.derive_around(identity, now_s);
        }
        if let Some(current) = read(&self.keys).current(now_s) {
            return current.clone();
        }
        let not_after = read(&self.keys).not_after(now_s);
        let key = BoxKey::generate(identity, now_s, not_after);
        write(&self.keys).insert(key, now_s)
    }

    /// The unexpired box key whose id is `id`. A replica deriving its keys
    /// holds them from its first handshake on, whether or not it has
    /// announced one yet: a dialer that learned the key from another
    /// replica goes early to this one.
    pub(crate) fn find(&self, identity: &Identity, id: &[u8], now_s: u64) -> Option<Arc<BoxKey>> {
        if self.source == KeySource::Identity {
            self.derive_around(identity, now_s);
        }
        read(&self.keys).find(id, now_s)
    }

    /// A replica's derived keys for the period of `now_s` and the ones on
    /// either side (a dialer may hold the last one, or a replica whose
    /// clock is a little ahead may announce the next): derived outside the
    /// lock, once a period, and a lookup otherwise. The period's key.
    fn derive_around(&self, identity: &Identity, now_s: u64) -> Arc<BoxKey> {
        let every = self.rotate_every();
        let period = now_s / every;
        let made = |p: u64| p.saturating_mul(every);
        let (current, missing): (_, Vec<u64>) = {
            let ring = read(&self.keys);
            let beside = [period.saturating_sub(1), period.saturating_add(1)];
            (
                ring.made_at(made(period)),
                beside
                    .into_iter()
                    .filter(|&p| p != period && ring.made_at(made(p)).is_none())
                    .collect(),
            )
        };
        let current = match (current, missing.is_empty()) {
            (Some(current), true) => return current,
            (Some(current), false) => current,
            (None, _) => Arc::new(BoxKey::derived(identity, every, period)),
        };
        let mut keys: Vec<Arc<BoxKey>> = missing
            .into_iter()
            .map(|p| Arc::new(BoxKey::derived(identity, every, p)))
            .collect();
        keys.push(current.clone());
        write(&self.keys).insert_derived(keys, now_s);
        current
    }

    fn rotate_every(&self) -> u64 {
        read(&self.keys).rotate_every()
    }

    /// The wall clock, in Unix milliseconds, as early data is judged by at
    /// `now` (the system's reading `unix_ms`): never before an earlier
    /// judgement's, advanced by the monotonic clock since it.
    pub(crate) fn wall_clock(&self, unix_ms: u64, now: Instant) -> u64 {
        let mut wall = lock(&self.wall);
        let (last_ms, last) = *wall;
        let since = now.saturating_duration_since(last).as_millis();
        let advanced = last_ms.saturating_add(u64::try_from(since).unwrap_or(u64::MAX));
        let unix_ms = unix_ms.max(advanced);
        *wall = (unix_ms, now.max(last));
        unix_ms
    }

    /// Whether the load signal says the acceptor is loaded (then early
    /// data is refused before any work is spent on it).
    pub(crate) fn loaded(&self) -> bool {
        self.load.as_ref().is_some_and(|loaded| loaded())
    }

    /// Takes a box to open from the budget, if one is left at `now`.
    pub(crate) fn take_budget(&self, now: Instant) -> bool {
        let mut budget = lock(&self.budget);
        budget.refill(now, 0);
        budget.take(1)
    }

    /// Whether a box from `ephemeral` was opened (or tried) before.
    pub(crate) fn seen(&self, ephemeral: &[u8; 32], now: Instant) -> bool {
        lock(&self.record).seen(ephemeral, now)
    }

    /// Remembers that the box from `ephemeral` was opened (or tried) and
    /// its early data refused.
    pub(crate) fn refused(&self, ephemeral: [u8; 32], sent_at_ms: Option<u64>, unix_ms: u64, now: Instant) {
        lock(&self.record).refused(ephemeral, sent_at_ms, unix_ms, now);
    }

    /// Records `ephemeral`'s early data from `dialer` as accepted, or says
    /// why it may not be.
    pub(crate) fn accept(
        &self,
        ephemeral: [u8; 32],
        dialer: PeerId,
        sent_at_ms: u64,
        unix_ms: u64,
        now: Instant,
    ) -> Result<(), &'static str> {
        // Derived keys open early data recorded before this acceptor was
        // made (by a process of the same identity, or this one before a
        // restart), which its new replay record never saw: none of it is
        // taken, so each early data runs at most once on each acceptor
        // alive in its window. (A dialer's clock may be 10 s off either
        // way, so the window's width past the start.)
        if self.source == KeySource::Identity
            && sent_at_ms < self.started_ms.saturating_add(super::EARLY_WINDOW_MS)
        {
            return Err("sent before this acceptor's replay record could have seen it (its first 10 s)");
        }
        lock(&self.record).accept(ephemeral, dialer, sent_at_ms, unix_ms, now)
    }

    pub(crate) fn count(&self, what: Counted) {
        let counter = match what {
            Counted::Offered => &self.counters.offered,
            Counted::Accepted => &self.counters.accepted,
            Counted::Refused => &self.counters.refused,
            Counted::RefusedUnderLoad => &self.counters.refused_under_load,
            Counted::RefusedAsSeen => &self.counters.refused_as_seen,
            Counted::BoxOpened => &self.counters.boxes_opened,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> EarlyDataStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let c = &self.counters;
        EarlyDataStats {
            offered: get(&c.offered),
            accepted: get(&c.accepted),
            refused: get(&c.refused),
            refused_under_load: get(&c.refused_under_load),
            refused_as_seen: get(&c.refused_as_seen),
            boxes_opened: get(&c.boxes_opened),
        }
    }
}
