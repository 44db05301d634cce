//! A token bucket, the shape of every rate budget here: the multiplexer's
//! reset and control-frame budgets, and handshakes per address.

use std::time::Instant;

/// Tokens in thousandths, refilled at `rate` a second up to `capacity`.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: u64,
    capacity_milli: u64,
    milli_tokens: u64,
    refilled: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub(crate) fn full(rate: u64, capacity: u64, now: Instant) -> Self {
        let capacity_milli = capacity.saturating_mul(1000);
        Self {
            rate,
            capacity_milli,
            milli_tokens: capacity_milli,
            refilled: now,
        }
    }

    /// Tokens per second.
    pub(crate) fn rate(&self) -> u64 {
        self.rate
    }

    /// Adds what the time since the last refill earned, and `extra_milli`
    /// thousandths of a token.
    pub(crate) fn refill(&mut self, now: Instant, extra_milli: u64) {
        let elapsed = now.saturating_duration_since(self.refilled).as_millis();
        let millis = elapsed.min(u128::from(u32::MAX)) as u64;
        if millis > 0 {
            self.refilled = now;
        }
        let earned = millis.saturating_mul(self.rate).saturating_add(extra_milli);
        self.milli_tokens = self.milli_tokens.saturating_add(earned).min(self.capacity_milli);
    }

    /// Whether the bucket is full (refilled to `now` first).
    pub(crate) fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now, 0);
        self.milli_tokens == self.capacity_milli
    }

    /// Whether `n` tokens are left (as of the last refill).
    pub(crate) fn has(&self, n: u64) -> bool {
        self.milli_tokens >= n.saturating_mul(1000)
    }

    /// Takes `n` tokens; `false` (taking none) if fewer are left.
    pub(crate) fn take(&mut self, n: u64) -> bool {
        if !self.has(n) {
            return false;
        }
        self.milli_tokens -= n.saturating_mul(1000);
        true
    }
}
