//! A pool's settings, and the backoff after failed dials.

use std::{sync::Arc, time::Duration};

/// How long dials wait after failing: exponential from `initial` to
/// `max`, each delay drawn between half and all of its step (jitter).
#[derive(Debug, Clone, Copy)]
pub(super) struct Backoff {
    pub(super) initial: Duration,
    pub(super) max: Duration,
}

impl Backoff {
    /// The wait after the `failures`-th failure in a row.
    pub(super) fn delay(&self, failures: u32) -> Duration {
        let step = self
            .initial
            .saturating_mul(1 << failures.saturating_sub(1).min(20))
            .min(self.max);
        let jitter = rand_core::RngCore::next_u32(&mut rand_core::OsRng) as f64 / u32::MAX as f64;
        step.mul_f64(0.5 + 0.5 * jitter)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(super) max_per_endpoint: usize,
    pub(super) max_connections: usize,
    pub(super) max_pending: usize,
    pub(super) idle_timeout: Duration,
    pub(super) max_idle: usize,
    pub(super) backoff: Backoff,
}

/// Connections to one endpoint a pool dials at most, by default: when the
/// peer's stream limit is reached on them, calls wait for a stream.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_ENDPOINT: usize = 4;

/// Settings for a [`Pool`](super::Pool).
#[derive(Clone)]
pub struct Builder {
    pub(super) config: Config,
    pub(super) observer: Option<Arc<dyn super::Observer>>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("config", &self.config)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            config: Config {
                max_per_endpoint: DEFAULT_MAX_CONNECTIONS_PER_ENDPOINT,
                max_connections: usize::MAX,
                max_pending: 1024,
                idle_timeout: Duration::from_secs(90),
                max_idle: usize::MAX,
                backoff: Backoff {
                    initial: Duration::from_millis(100),
                    max: Duration::from_secs(10),
                },
            },
            observer: None,
        }
    }
}

impl Builder {
    /// Connections to one endpoint at most (default 4): another is dialed only
    /// when those there are at the peer's stream limit; 1 keeps every call
    /// to the endpoint on one connection, waiting at the limit.
    pub fn max_connections_per_endpoint(mut self, max: usize) -> Self {
        self.config.max_per_endpoint = max.max(1);
        self
    }

    /// Connections in the whole pool at most (default: no limit). At the
    /// limit, a dial closes the connection idle the longest elsewhere, or
    /// waits for one to close.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.config.max_connections = max.max(1);
        self
    }

    /// Calls waiting for a stream at once, at most (default 1,024): past
    /// it, `poll_ready` waits.
    pub fn max_pending(mut self, max: usize) -> Self {
        self.config.max_pending = max.max(1);
        self
    }

    /// How long a connection without streams stays pooled (default 90 s,
    /// as hyper-util's pool).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.idle_timeout = timeout;
        self
    }

    /// Connections without streams kept at most, in the whole pool
    /// (default: no limit but the idle timeout); past it, the sweep (every
    /// quarter of the idle timeout) closes those idle the longest.
    pub fn max_idle_connections(mut self, max: usize) -> Self {
        self.config.max_idle = max;
        self
    }

    /// The wait after a failed dial, doubling per failure in a row up to
    /// `max` (defaults 100 ms and 10 s), each drawn at random between half
    /// and all of it.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.config.backoff = Backoff {
            initial,
            max: max.max(initial),
        };
        self
    }

    /// Tells `observer` of the pool's dials, waiters and connections, and
    /// hands it a [`PoolWatch`](super::PoolWatch) to read the pool by
    /// (none by default): `weft::metrics::Metrics` reports to the
    /// `metrics` facade, `weft::admin::Admin` shows the pool in the live
    /// view, and a pair `(A, B)` does both.
    pub fn observer(mut self, observer: impl super::Observer) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }
}
