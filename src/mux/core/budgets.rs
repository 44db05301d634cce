//! What resets a peer may send: HTTP/2's Rapid Reset (CVE-2023-44487)
//! opens streams and resets them at once, making the server start work it
//! then throws away, as fast as the stream limit allows. Two budgets stop
//! it here, each answered with a go-away (`EXCESSIVE_LOAD`):
//!
//! - streams the peer reset before we accepted them, still waiting in the
//!   accept queue ([`MAX_PENDING_ACCEPT_RESETS`], h2's
//!   `max_pending_accept_reset_streams`). Such streams never reach the
//!   application: `accept` skips them and gives their slots back;
//! - resets of the peer's own streams per second, at any stage
//!   ([`RESETS_PER_SECOND_PER_STREAM`] times the stream limit, at least
//!   [`MIN_RESETS_PER_SECOND`], in bursts of as many): a client that
//!   cancels calls stays far below it, one that cancels every call the
//!   moment the server has started it does not.
//!
//! Only resets of streams the peer had not finished count: a reset after
//! its FIN stops our sending alone (the request is whole, and is
//! delivered), as a client does that drops a stream without reading the
//! reply.

use std::time::Instant;

/// Streams reset by the peer before they were accepted that may wait in
/// the accept queue at once.
pub(crate) const MAX_PENDING_ACCEPT_RESETS: usize = 20;
/// Resets of its own streams a peer may send per second, per stream it may
/// have open.
pub(crate) const RESETS_PER_SECOND_PER_STREAM: u64 = 10;
/// The smallest reset budget per second, whatever the stream limit.
pub(crate) const MIN_RESETS_PER_SECOND: u64 = 1000;

/// A token bucket of peer resets: `rate` a second, at most `rate` saved.
#[derive(Debug)]
pub(super) struct ResetBudget {
    rate: u64,
    /// Tokens, in thousandths (a millisecond's refill is `rate` of them).
    milli_tokens: u64,
    refilled: Instant,
    /// Streams reset before they were accepted, still in the accept queue.
    pub(super) pending_accept: usize,
}

impl ResetBudget {
    pub(super) fn new(max_streams: u32, now: Instant) -> Self {
        let rate = (u64::from(max_streams) * RESETS_PER_SECOND_PER_STREAM).max(MIN_RESETS_PER_SECOND);
        Self {
            rate,
            milli_tokens: rate * 1000,
            refilled: now,
            pending_accept: 0,
        }
    }

    /// The budget per second.
    pub(super) fn rate(&self) -> u64 {
        self.rate
    }

    /// Takes one reset from the budget at `now`; `false` if it is spent.
    pub(super) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled);
        let millis = elapsed.as_millis().min(u128::from(u32::MAX)) as u64;
        if millis > 0 {
            self.milli_tokens = (self.milli_tokens + millis * self.rate).min(self.rate * 1000);
            self.refilled = now;
        }
        if self.milli_tokens < 1000 {
            return false;
        }
        self.milli_tokens -= 1000;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_budget_allows_its_rate_in_a_burst_and_refills_with_time() {
        let now = Instant::now();
        let mut budget = ResetBudget::new(10, now);
        assert_eq!(budget.rate(), MIN_RESETS_PER_SECOND);
        for _ in 0..MIN_RESETS_PER_SECOND {
            assert!(budget.take(now));
        }
        assert!(!budget.take(now), "the burst is spent");
        assert!(
            budget.take(now + Duration::from_millis(1)),
            "a millisecond brings one back"
        );
        assert!(!budget.take(now + Duration::from_millis(1)));
        let later = now + Duration::from_secs(5);
        for _ in 0..MIN_RESETS_PER_SECOND {
            assert!(budget.take(later));
        }
        assert!(!budget.take(later), "saved up to one second's worth, no more");
        assert_eq!(ResetBudget::new(1000, now).rate(), 10_000);
    }
}
