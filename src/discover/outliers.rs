//! Which endpoints of a balanced set take no calls for now: the
//! outlier detection a balancer consults (after Envoy's consecutive
//! failures and Finagle's failure accrual). Sans-IO: it is told outcomes
//! and the time, and answers until when an endpoint is out.
//!
//! An endpoint that cannot be reached (its dial failed: refused, timed
//! out, or the pool backing off after such a failure) is ejected at
//! once; one whose calls fail without ever reaching a handler (refused
//! streams, go-aways) after `consecutive` such failures in a row. An
//! ejection lasts `base` times the endpoint's ejections so far, at most
//! `max`; a success clears the count of failures, and an endpoint in for
//! `max` since it was last out is forgiven its past ejections. At most
//! `max_share` of the endpoints are out at once (never all): past that, a
//! failing endpoint stays in and its calls fail, rather than every call
//! waiting for endpoints that may never come back.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crate::pool::Endpoint;

/// How the set judges its endpoints.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutlierPolicy {
    /// Failures in a row, never processed, that eject an endpoint.
    pub(crate) consecutive: u32,
    /// The first ejection's length; each next one adds as much.
    pub(crate) base: Duration,
    /// The longest ejection.
    pub(crate) max: Duration,
    /// The share of the endpoints that may be out at once.
    pub(crate) max_share: f64,
}

impl Default for OutlierPolicy {
    fn default() -> Self {
        Self {
            consecutive: 3,
            base: Duration::from_secs(1),
            max: Duration::from_secs(30),
            max_share: 0.5,
        }
    }
}

/// How a call through an endpoint ended, as far as its health goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It reached the server (whatever the server answered).
    Reached,
    /// It never reached a handler: refused, or the connection going away.
    NeverProcessed,
    /// The endpoint could not be reached at all.
    Unreachable,
}

/// One endpoint's standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Taking calls; `failures` in a row so far.
    In { failures: u32 },
    /// Out until `until`.
    Out { until: Instant },
}

#[derive(Debug, Clone, Copy)]
struct Health {
    standing: Standing,
    /// Ejections so far, for the next one's length.
    ejections: u32,
    /// When it last came back, or was first seen: forgiven its ejections
    /// once it has served `max` since.
    since: Instant,
}

/// The standing of a set's endpoints.
#[derive(Debug, Default)]
pub(crate) struct Outliers {
    policy: OutlierPolicy,
    endpoints: HashMap<Endpoint, Health>,
}

impl Outliers {
    pub(crate) fn new(policy: OutlierPolicy) -> Self {
        Self {
            policy,
            endpoints: HashMap::new(),
        }
    }

    /// Until when `endpoint` is out, if it is; one whose time is up comes
    /// back in.
    pub(crate) fn out_until(&mut self, endpoint: &Endpoint, now: Instant) -> Option<Instant> {
        let health = self.endpoints.get_mut(endpoint)?;
        match health.standing {
            Standing::Out { until } if until > now => Some(until),
            Standing::Out { .. } => {
                health.standing = Standing::In { failures: 0 };
                health.since = now;
                None
            }
            Standing::In { .. } => None,
        }
    }

    /// A call through `endpoint` ended so; of `endpoints` in the set now.
    /// Returns until when it is out, if this put it out.
    pub(crate) fn record(
        &mut self,
        endpoint: &Endpoint,
        outcome: Outcome,
        endpoints: usize,
        now: Instant,
    ) -> Option<Instant> {
        let out_now = self.out(now);
        let policy = self.policy;
        let health = self.endpoints.entry(endpoint.clone()).or_insert(Health {
            standing: Standing::In { failures: 0 },
            ejections: 0,
            since: now,
        });
        let Standing::In { failures } = health.standing else {
            // Calls begun before it went out still end.
            return None;
        };
        let failures = match outcome {
            Outcome::Reached => {
                health.standing = Standing::In { failures: 0 };
                return None;
            }
            Outcome::NeverProcessed => failures + 1,
            Outcome::Unreachable => failures.max(policy.consecutive),
        };
        if now.duration_since(health.since) >= policy.max {
            // In for that long since it was last out: its past is forgiven.
            health.ejections = 0;
        }
        health.standing = Standing::In { failures };
        let room = ((endpoints as f64 * policy.max_share).floor() as usize).min(endpoints.saturating_sub(1));
        if failures < policy.consecutive || out_now >= room {
            return None;
        }
        health.ejections += 1;
        let until = now + policy.base.saturating_mul(health.ejections).min(policy.max);
        health.standing = Standing::Out { until };
        Some(until)
    }

    /// Endpoints failing or out: while there are none, a success changes
    /// nothing and nothing is out.
    pub(crate) fn troubled(&self) -> usize {
        self.endpoints
            .values()
            .filter(|h| h.standing != Standing::In { failures: 0 })
            .count()
    }

    /// Endpoints out now.
    fn out(&self, now: Instant) -> usize {
        self.endpoints
            .values()
            .filter(|h| matches!(h.standing, Standing::Out { until } if until > now))
            .count()
    }

    /// Forgets endpoints no longer in the set.
    pub(crate) fn retain(&mut self, keep: impl Fn(&Endpoint) -> bool) {
        self.endpoints.retain(|endpoint, _| keep(endpoint));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(last: u8) -> Endpoint {
        Endpoint::new(std::net::SocketAddr::from(([127, 0, 0, last], 7000)))
    }

    #[test]
    fn failures_in_a_row_eject_for_longer_each_time_and_a_success_clears_them() {
        let mut outliers = Outliers::default();
        let (a, t0) = (endpoint(2), Instant::now());
        for _ in 0..2 {
            assert_eq!(outliers.record(&a, Outcome::NeverProcessed, 3, t0), None);
        }
        // A success between: the count starts again.
        assert_eq!(outliers.record(&a, Outcome::Reached, 3, t0), None);
        for _ in 0..2 {
            assert_eq!(outliers.record(&a, Outcome::NeverProcessed, 3, t0), None);
        }
        let until = outliers.record(&a, Outcome::NeverProcessed, 3, t0);
        assert_eq!(until, Some(t0 + Duration::from_secs(1)));
        assert_eq!(outliers.out_until(&a, t0), until);
        // Back at its time; the next ejection is twice as long.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(outliers.out_until(&a, t1), None);
        assert_eq!(
            outliers.record(&a, Outcome::Unreachable, 3, t1),
            Some(t1 + Duration::from_secs(2))
        );
        // Ejections grow to the most, and are forgiven after serving that long.
        let mut t = t1;
        for _ in 0..40 {
            t += Duration::from_secs(31);
            assert_eq!(outliers.out_until(&a, t), None);
            let until = outliers.record(&a, Outcome::Unreachable, 3, t).unwrap();
            assert!(until - t <= Duration::from_secs(30));
        }
        t += Duration::from_secs(31);
        assert_eq!(outliers.out_until(&a, t), None);
        let served = t + Duration::from_secs(30);
        assert_eq!(
            outliers.record(&a, Outcome::Unreachable, 3, served),
            Some(served + Duration::from_secs(1))
        );
    }

    #[test]
    fn an_unreachable_endpoint_is_out_at_once_but_never_more_than_the_share() {
        let mut outliers = Outliers::default();
        let t0 = Instant::now();
        // Of four, two may be out.
        assert!(outliers
            .record(&endpoint(2), Outcome::Unreachable, 4, t0)
            .is_some());
        assert!(outliers
            .record(&endpoint(3), Outcome::Unreachable, 4, t0)
            .is_some());
        assert_eq!(outliers.record(&endpoint(4), Outcome::Unreachable, 4, t0), None);
        assert_eq!(outliers.out_until(&endpoint(4), t0), None);
        // Once one is back, another may go.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(outliers.out_until(&endpoint(2), t1), None);
        assert!(outliers
            .record(&endpoint(4), Outcome::Unreachable, 4, t1)
            .is_some());
        // One endpoint alone is never out: its calls fail instead of waiting.
        let mut alone = Outliers::default();
        for _ in 0..10 {
            assert_eq!(alone.record(&endpoint(2), Outcome::Unreachable, 1, t0), None);
        }
        // Of two, one may.
        let mut pair = Outliers::default();
        assert!(pair.record(&endpoint(2), Outcome::Unreachable, 2, t0).is_some());
        assert_eq!(pair.record(&endpoint(3), Outcome::Unreachable, 2, t0), None);
    }

    #[test]
    fn calls_that_end_while_out_change_nothing_and_gone_endpoints_are_forgotten() {
        let mut outliers = Outliers::default();
        let t0 = Instant::now();
        let until = outliers
            .record(&endpoint(2), Outcome::Unreachable, 3, t0)
            .unwrap();
        assert_eq!(outliers.record(&endpoint(2), Outcome::Reached, 3, t0), None);
        assert_eq!(outliers.out_until(&endpoint(2), t0), Some(until));
        outliers.retain(|e| *e != endpoint(2));
        assert_eq!(outliers.out_until(&endpoint(2), t0), None);
        assert!(outliers.endpoints.is_empty());
    }
}
