//! A pool's connections, dials and waiters.

use std::collections::HashMap;

use metrics::Gauge;

use crate::pool::Endpoint;

/// The metrics of one pool. Its connections are one gauge for all
/// endpoints (moved by how many this pool holds, so pools add up), not a
/// series per endpoint: endpoints come and go with discovery, and a gauge
/// cannot be taken back. Per endpoint, the dial counters (which an
/// exporter may drop once idle) and the live view.
pub(crate) struct PoolMetrics {
    waiters: Gauge,
    connections: Gauge,
    /// What each endpoint holding connections adds to `connections`.
    held: HashMap<Endpoint, usize>,
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
            connections: metrics::gauge!(super::POOL_CONNECTIONS),
            held: HashMap::new(),
        }
    }
}

impl Drop for PoolMetrics {
    /// A pool gone holds nothing.
    fn drop(&mut self) {
        self.connections
            .decrement(self.held.values().sum::<usize>() as f64);
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
    pub(crate) fn connections(&mut self, endpoint: &Endpoint, n: usize) {
        let before = if n == 0 {
            self.held.remove(endpoint)
        } else {
            self.held.insert(endpoint.clone(), n)
        };
        self.connections.increment(n as f64 - before.unwrap_or(0) as f64);
    }

    /// A dial of `endpoint` ended, connected or not.
    pub(crate) fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        metrics::counter!(super::POOL_DIALS, "endpoint" => label(endpoint)).increment(1);
        if !connected {
            metrics::counter!(super::POOL_DIAL_FAILURES, "endpoint" => label(endpoint)).increment(1);
        }
    }
}
