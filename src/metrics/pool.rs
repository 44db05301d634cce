//! A pool's connections, dials and waiters.

use metrics::Gauge;

use crate::pool::Endpoint;

/// The metrics of one pool.
pub(crate) struct PoolMetrics {
    waiters: Gauge,
}

impl std::fmt::Debug for PoolMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolMetrics").finish_non_exhaustive()
    }
}

impl Default for PoolMetrics {
    fn default() -> Self {
        super::describe_once();
        Self {
            waiters: metrics::gauge!(super::POOL_WAITERS),
        }
    }
}

/// The `endpoint` label: where it is (its pin and protocol do not make
/// it another place).
fn label(endpoint: &Endpoint) -> String {
    endpoint.target().to_string()
}

impl PoolMetrics {
    /// Calls waiting for a stream now.
    pub(crate) fn waiters(&self, n: usize) {
        self.waiters.set(n as f64);
    }

    /// The pool holds `n` connections to `endpoint` now.
    pub(crate) fn connections(&self, endpoint: &Endpoint, n: usize) {
        metrics::gauge!(super::POOL_CONNECTIONS, "endpoint" => label(endpoint)).set(n as f64);
    }

    /// A dial of `endpoint` ended, connected or not.
    pub(crate) fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        metrics::counter!(super::POOL_DIALS, "endpoint" => label(endpoint)).increment(1);
        if !connected {
            metrics::counter!(super::POOL_DIAL_FAILURES, "endpoint" => label(endpoint)).increment(1);
        }
    }
}
