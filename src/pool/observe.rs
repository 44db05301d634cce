//! What a pool tells the observer it was handed
//! ([`Builder::observer`](super::Builder::observer)): that it was built
//! (with a [`PoolWatch`] to read it by), its dials, its waiters and the
//! connections it holds.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, Weak},
};

use super::{state::State, Endpoint, PoolStats};

/// Told of a pool's work. Each method has a default that does nothing; a
/// pair `(A, B)` of observers tells both.
///
/// All but [`built`](Self::built) are told under the pool's lock, as the
/// change happens: they should return at once (count, or note), and must
/// not read the pool (a [`PoolWatch`] read from there waits for the lock
/// it is called under).
pub trait Observer: Send + Sync + 'static {
    /// A pool was built: `pool` reads its state for as long as it lives.
    fn built(&self, pool: PoolWatch) {
        let _ = pool;
    }

    /// Calls waiting for a stream went from `before` to `now`.
    fn waiters(&self, before: usize, now: usize) {
        let _ = (before, now);
    }

    /// The connections the pool holds to `endpoint` went from `before` to
    /// `now` (all of them go to 0 when the pool is dropped).
    fn connections(&self, endpoint: &Endpoint, before: usize, now: usize) {
        let _ = (endpoint, before, now);
    }

    /// A dial of `endpoint` ended, connected or not.
    fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        let _ = (endpoint, connected);
    }
}

impl Observer for () {}

impl<A: Observer, B: Observer> Observer for (A, B) {
    fn built(&self, pool: PoolWatch) {
        self.0.built(pool.clone());
        self.1.built(pool);
    }

    fn waiters(&self, before: usize, now: usize) {
        self.0.waiters(before, now);
        self.1.waiters(before, now);
    }

    fn connections(&self, endpoint: &Endpoint, before: usize, now: usize) {
        self.0.connections(endpoint, before, now);
        self.1.connections(endpoint, before, now);
    }

    fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        self.0.dialed(endpoint, connected);
        self.1.dialed(endpoint, connected);
    }
}

/// A pool's state, readable while the pool lives. It holds the pool
/// weakly: it keeps nothing alive.
#[derive(Clone)]
pub struct PoolWatch {
    state: Weak<Mutex<State>>,
}

impl fmt::Debug for PoolWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolWatch")
            .field("alive", &(self.state.strong_count() > 0))
            .finish()
    }
}

/// One endpoint of a pool, as a [`PoolWatch`] reads it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EndpointStats {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Its pooled connections, by [`Connection::id`](crate::mux::Connection::id).
    pub connections: Vec<u64>,
    /// Whether a dial is under way.
    pub dialing: bool,
    /// Dials failed in a row.
    pub failures: u32,
}

impl PoolWatch {
    pub(super) fn new(state: &Arc<Mutex<State>>) -> Self {
        Self {
            state: Arc::downgrade(state),
        }
    }

    /// The pool's counters, unless it is gone.
    pub fn stats(&self) -> Option<PoolStats> {
        let state = self.state.upgrade()?;
        let stats = crate::sync::lock(&state).stats();
        Some(stats)
    }

    /// The pool's endpoints and what it holds for each, unless it is gone.
    pub fn endpoints(&self) -> Option<Vec<EndpointStats>> {
        let state = self.state.upgrade()?;
        let endpoints = crate::sync::lock(&state).endpoint_stats();
        Some(endpoints)
    }

    /// Whether the pool is gone.
    pub fn is_gone(&self) -> bool {
        self.state.strong_count() == 0
    }
}

/// The pool's reports to its observer, kept in its state: what it told
/// of each endpoint, so each report says what changed, and a dropped pool
/// takes back what it held.
#[derive(Default)]
pub(crate) struct Reports {
    observer: Option<Arc<dyn Observer>>,
    held: HashMap<Endpoint, usize>,
    waiters: usize,
}

impl Reports {
    pub(crate) fn new(observer: Option<Arc<dyn Observer>>) -> Self {
        Self {
            observer,
            held: HashMap::new(),
            waiters: 0,
        }
    }

    /// Calls waiting for a stream now.
    pub(crate) fn waiters(&mut self, now: usize) {
        if let Some(observer) = &self.observer {
            let before = std::mem::replace(&mut self.waiters, now);
            if before != now {
                observer.waiters(before, now);
            }
        }
    }

    /// The pool holds `now` connections to `endpoint`.
    pub(crate) fn connections(&mut self, endpoint: &Endpoint, now: usize) {
        let Some(observer) = &self.observer else {
            return;
        };
        let before = if now == 0 {
            self.held.remove(endpoint)
        } else {
            self.held.insert(endpoint.clone(), now)
        }
        .unwrap_or(0);
        if before != now {
            observer.connections(endpoint, before, now);
        }
    }

    /// A dial of `endpoint` ended, connected or not.
    pub(crate) fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        if let Some(observer) = &self.observer {
            observer.dialed(endpoint, connected);
        }
    }
}

impl Drop for Reports {
    /// A pool gone holds nothing, and no call waits on it.
    fn drop(&mut self) {
        if let Some(observer) = &self.observer {
            for (endpoint, before) in self.held.drain() {
                observer.connections(&endpoint, before, 0);
            }
            if self.waiters > 0 {
                observer.waiters(self.waiters, 0);
            }
        }
    }
}
