//! The budgets of what a peer may send that costs us work but carries no
//! stream data ([`Budgets`](crate::mux::Budgets)), each a token bucket
//! whose exhaustion is a go-away with `EXCESSIVE_LOAD`.
//!
//! - **Resets.** HTTP/2's Rapid Reset (CVE-2023-44487) opens streams and
//!   resets them at once, making the server start work it then throws
//!   away, as fast as the stream limit allows. Two budgets stop it:
//!   - streams the peer reset before we accepted them, still waiting in
//!     the accept queue (h2's `max_pending_accept_reset_streams`). Such
//!     streams never reach the application: `accept` skips them and gives
//!     their slots back;
//!   - resets of the peer's own streams per second, at any stage (a
//!     multiple of the stream limit, with a floor, in bursts of as many):
//!     a client that cancels calls stays far below it, one that cancels
//!     every call the moment the server has started it does not.
//!
//!   Only resets of streams the peer had not finished count: a reset after
//!   its FIN stops our sending alone (the request is whole, and is
//!   delivered), as a client does that drops a stream without reading the
//!   reply.
//! - **Control frames per data byte** (the 2019 ping, settings and
//!   empty-frame floods, CVE-2019-9512/9515/9518; rustls's
//!   `TemperCounters` idea): pings, credit entries, stream credit and
//!   go-aways each take a token, and tokens come back with time, with
//!   stream data moved either way and with streams opened.

use std::time::Instant;

use crate::{bucket::TokenBucket, error::Violation, mux::Budgets};

/// What the peer may still send that costs us work but carries no stream
/// data: its resets ([`ResetBudget`]) and its control frames
/// ([`ControlBudget`]). Charged through these methods, which say when a
/// budget is spent: the peer is flooding.
#[derive(Debug)]
pub(super) struct PeerBudgets {
    resets: ResetBudget,
    control: ControlBudget,
}

impl PeerBudgets {
    /// The budgets of a connection at `now` that lets the peer open
    /// `max_streams` at once.
    pub(super) fn new(max_streams: u32, budgets: &Budgets, now: Instant) -> Self {
        Self {
            resets: ResetBudget::new(max_streams, budgets, now),
            control: ControlBudget::new(budgets, now),
        }
    }

    /// The peer reset a stream it opened, before its FIN, at `now`.
    pub(super) fn take_reset(&mut self, now: Instant) -> Result<(), Violation> {
        if self.resets.take(now) {
            Ok(())
        } else {
            Err(Violation::ResetFlood(self.resets.rate()))
        }
    }

    /// That stream was not accepted yet: it waits in the accept queue,
    /// cancelled, until `accept` skips it ([`Self::cancelled_skipped`]).
    pub(super) fn cancel_unaccepted(&mut self) -> Result<(), Violation> {
        let resets = &mut self.resets;
        resets.pending_accept += 1;
        if resets.pending_accept > resets.max_pending_accept {
            return Err(Violation::PendingResetFlood(resets.max_pending_accept));
        }
        Ok(())
    }

    /// `accept` skipped a cancelled stream: it waits no more.
    pub(super) fn cancelled_skipped(&mut self) {
        self.resets.pending_accept -= 1;
    }

    /// Charges `frames` control frames at `now`, given what the
    /// connection's traffic has `earned` in all.
    pub(super) fn take_control(
        &mut self,
        frames: u64,
        now: Instant,
        earned: Earnings,
    ) -> Result<(), Violation> {
        if self.control.take(frames, now, earned) {
            return Ok(());
        }
        Err(Violation::ControlFlood {
            frames: self.control.charged.saturating_add(frames),
            data_bytes: earned.data_bytes,
            streams: earned.streams,
        })
    }
}

/// A token bucket of peer resets: `rate` a second, at most `rate` saved.
#[derive(Debug)]
pub(super) struct ResetBudget {
    bucket: TokenBucket,
    /// Streams reset before they were accepted, still in the accept queue.
    pending_accept: usize,
    /// How many of those may wait at once.
    max_pending_accept: usize,
}

impl ResetBudget {
    pub(super) fn new(max_streams: u32, budgets: &Budgets, now: Instant) -> Self {
        let rate = u64::from(max_streams)
            .saturating_mul(budgets.resets_per_second_per_stream)
            .max(budgets.min_resets_per_second);
        Self {
            bucket: TokenBucket::full(rate, rate, now),
            pending_accept: 0,
            max_pending_accept: budgets.pending_accept_resets,
        }
    }

    /// The budget per second.
    pub(super) fn rate(&self) -> u64 {
        self.bucket.rate()
    }

    /// Takes one reset from the budget at `now`; `false` if it is spent.
    pub(super) fn take(&mut self, now: Instant) -> bool {
        self.bucket.refill(now, 0);
        self.bucket.take(1)
    }
}

/// What the peer's traffic has earned so far, for [`ControlBudget::take`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Earnings {
    /// Stream data moved, both ways.
    pub(super) data_bytes: u64,
    /// Streams opened, by either side.
    pub(super) streams: u64,
}

/// The control frames a peer may send: a burst, refilled with time, data
/// and streams.
#[derive(Debug)]
pub(super) struct ControlBudget {
    bucket: TokenBucket,
    bytes_per_frame: u64,
    frames_per_stream: u64,
    /// What had been earned at the last refill.
    counted: Earnings,
    /// Control frames charged in all, within the budget.
    charged: u64,
}

impl ControlBudget {
    pub(super) fn new(budgets: &Budgets, now: Instant) -> Self {
        Self {
            bucket: TokenBucket::full(
                budgets.control_frames_per_second,
                budgets.control_frame_burst,
                now,
            ),
            bytes_per_frame: budgets.data_bytes_per_control_frame.max(1),
            frames_per_stream: budgets.control_frames_per_stream,
            counted: Earnings::default(),
            charged: 0,
        }
    }

    /// Charges `frames` control frames at `now`, given what the
    /// connection's traffic has earned in all; `false` if the budget is
    /// spent.
    pub(super) fn take(&mut self, frames: u64, now: Instant, earned: Earnings) -> bool {
        let bytes = earned.data_bytes.saturating_sub(self.counted.data_bytes);
        let streams = earned.streams.saturating_sub(self.counted.streams);
        self.counted = earned;
        let extra = bytes.saturating_mul(1000) / self.bytes_per_frame
            + streams
                .saturating_mul(self.frames_per_stream)
                .saturating_mul(1000);
        self.bucket.refill(now, extra);
        let taken = self.bucket.take(frames);
        if taken {
            self.charged = self.charged.saturating_add(frames);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_reset_budget_allows_its_rate_in_a_burst_and_refills_with_time() {
        let now = Instant::now();
        let budgets = Budgets::default();
        let mut budget = ResetBudget::new(10, &budgets, now);
        let min = budgets.min_resets_per_second;
        assert_eq!(budget.rate(), min);
        for _ in 0..min {
            assert!(budget.take(now));
        }
        assert!(!budget.take(now), "the burst is spent");
        assert!(
            budget.take(now + Duration::from_millis(1)),
            "a millisecond brings one back"
        );
        assert!(!budget.take(now + Duration::from_millis(1)));
        let later = now + Duration::from_secs(5);
        for _ in 0..min {
            assert!(budget.take(later));
        }
        assert!(!budget.take(later), "saved up to one second's worth, no more");
        assert_eq!(ResetBudget::new(1000, &budgets, now).rate(), 10_000);
    }

    #[test]
    fn control_frames_are_earned_by_time_data_and_streams_up_to_the_burst() {
        let now = Instant::now();
        let budgets = Budgets::default();
        let mut budget = ControlBudget::new(&budgets, now);
        let none = Earnings::default();
        assert!(budget.take(budgets.control_frame_burst, now, none));
        assert!(!budget.take(1, now, none), "the burst is spent");
        // A millisecond earns one frame at 1,000 a second.
        assert!(budget.take(1, now + Duration::from_millis(1), none));
        assert!(!budget.take(1, now + Duration::from_millis(1), none));
        // A KiB of data earns one, a stream four.
        let data = Earnings {
            data_bytes: 3 * 1024,
            streams: 0,
        };
        assert!(budget.take(3, now + Duration::from_millis(1), data));
        assert!(
            !budget.take(1, now + Duration::from_millis(1), data),
            "earned once only"
        );
        let streams = Earnings {
            data_bytes: 3 * 1024,
            streams: 2,
        };
        assert!(budget.take(8, now + Duration::from_millis(1), streams));
        assert!(!budget.take(1, now + Duration::from_millis(1), streams));
        // Idle for a day: saved up to the burst, no more.
        let later = now + Duration::from_secs(86_400);
        assert!(budget.take(budgets.control_frame_burst, later, streams));
        assert!(!budget.take(1, later, streams));
        assert_eq!(budget.charged, 2 * budgets.control_frame_burst + 1 + 3 + 8);
    }
}
