//! The backoff's steps, and the endpoints a pool remembers.

use std::time::Duration;

use super::{builder::Backoff, *};
use crate::error::Repr;

#[test]
fn backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half() {
    let backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(1),
    };
    for (failures, step) in [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (30, 1000)] {
        let step = Duration::from_millis(step);
        for _ in 0..100 {
            let delay = backoff.delay(failures);
            assert!(delay >= step / 2 && delay <= step, "{failures}: {delay:?}");
        }
    }
    let draws: std::collections::HashSet<_> = (0..20).map(|_| backoff.delay(3)).collect();
    assert!(draws.len() > 1, "jittered");
}

#[test]
fn endpoint_after_endpoint_that_fails_to_dial_is_not_remembered_without_bound() {
    let config = Builder::default().config;
    let mut state = state::State::default();
    let now = Instant::now();
    for n in 0..10_000u32 {
        let endpoint = Endpoint::host(format!("host-{n}.invalid"), 7000);
        assert!(matches!(
            state.connection_step(&endpoint, &config, now),
            state::Step::Dial(..)
        ));
        let failed = PoolError::Dial {
            endpoint: endpoint.clone(),
            source: Repr::Truncated.into(),
        };
        let _ = state.dial_done(&endpoint, Err(failed), &config, now);
        assert!(
            state.endpoints() <= 4096,
            "{} endpoints after {n}",
            state.endpoints()
        );
    }
}
