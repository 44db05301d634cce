//! A pool's connections, dials and waiters.

use super::Metrics;
use crate::pool::{Endpoint, Observer};

/// The `endpoint` label: where it is (its pin and protocol do not make
/// it another place).
fn label(endpoint: &Endpoint) -> String {
    endpoint.target().to_string()
}

/// Reports a pool's work to the `metrics` facade. Its connections are one
/// gauge for all endpoints (moved by how many each pool holds, so pools
/// add up), not a series per endpoint: endpoints come and go with
/// discovery, and a gauge cannot be taken back. Per endpoint, the dial
/// counters (which an exporter may drop once idle) and the live view.
impl Observer for Metrics {
    fn waiters(&self, before: usize, now: usize) {
        metrics::gauge!(super::POOL_WAITERS).increment(now as f64 - before as f64);
    }

    fn connections(&self, _: &Endpoint, before: usize, now: usize) {
        metrics::gauge!(super::POOL_CONNECTIONS).increment(now as f64 - before as f64);
    }

    fn dialed(&self, endpoint: &Endpoint, connected: bool) {
        metrics::counter!(super::POOL_DIALS, "endpoint" => label(endpoint)).increment(1);
        if !connected {
            metrics::counter!(super::POOL_DIAL_FAILURES, "endpoint" => label(endpoint)).increment(1);
        }
    }
}
