use std::time::{Duration, Instant};

use super::MAX_TAG_LEN;
use crate::frame::HEADER_LEN;

/// Record plaintext size a side accepts when its Setup does not say (TLS's).
pub(crate) const DEFAULT_RECORD_SIZE: usize = 16 * 1024;
/// The largest record plaintext weft sends or accepts.
pub(crate) const MAX_RECORD_SIZE: usize = 64 * 1024;
/// The smallest maximum record size a peer may declare: below it, per-record
/// overhead would dominate, so a smaller value is refused as invalid.
pub(crate) const MIN_RECORD_SIZE: usize = 512;

/// Plaintext in a record that fills one TCP segment: 1400 bytes on the wire
/// (fits a 1460-byte Ethernet MSS with TCP options, and IPv6) less the frame
/// header and the tag.
pub(super) const SEGMENT_RECORD_SIZE: usize = 1400 - HEADER_LEN - MAX_TAG_LEN;

/// Bytes sent in small records before records start to grow (Go's cutoff).
pub(super) const BOOST_THRESHOLD: u64 = 128 * 1024;

/// How much each record grows by after the threshold.
pub(super) const GROWTH_STEP: usize = 1024;

/// How records are sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordPolicy {
    /// Every record filled to this many bytes (capped at the agreed maximum).
    Fixed(usize),
    /// Small records first and after idle periods, growing to the maximum.
    Dynamic,
}

/// How a channel sizes its records and bounds its read buffer, once the
/// handshake is done: what [`RecordSizeLayer`](crate::RecordSizeLayer)
/// asks for. Without one, a channel sends fixed records of the agreed
/// maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordConfig {
    pub(crate) policy: RecordPolicy,
    /// The largest record we send and accept.
    pub(crate) max: usize,
    /// How long a dynamic channel must be idle to start small again.
    pub(crate) idle_reset: Duration,
    /// The largest read allocation once the peer is authenticated.
    pub(crate) max_read_buffer: usize,
}

/// The sans-IO record sizer: asks "how big should the next record be?" and
/// is told what was sent and when.
#[derive(Debug, Clone)]
pub(crate) struct RecordSizer {
    policy: RecordPolicy,
    max: usize,
    idle_reset: Duration,
    /// Bytes sent since the last reset.
    sent: u64,
    /// Records sent since `sent` crossed the threshold.
    grown: usize,
    last_record: Option<Instant>,
}

impl RecordSizer {
    /// Records of `size` bytes, always.
    pub(crate) fn fixed(size: usize) -> Self {
        Self::new(RecordPolicy::Fixed(size), size, Duration::MAX)
    }

    /// Dynamic records growing to `max`, reset after `idle_reset` of silence.
    #[cfg(test)]
    pub(crate) fn dynamic(max: usize, idle_reset: Duration) -> Self {
        Self::new(RecordPolicy::Dynamic, max, idle_reset)
    }

    /// A sizer for `policy` with records of at most `max` bytes.
    pub(crate) fn new(policy: RecordPolicy, max: usize, idle_reset: Duration) -> Self {
        Self {
            policy,
            max: max.max(1),
            idle_reset,
            sent: 0,
            grown: 0,
            last_record: None,
        }
    }

    /// The largest record this sizer asks for.
    pub(crate) fn max(&self) -> usize {
        match self.policy {
            RecordPolicy::Fixed(size) => size.clamp(1, self.max),
            RecordPolicy::Dynamic => self.max,
        }
    }

    /// The plaintext size for a record started at `now`.
    pub(crate) fn next_size(&mut self, now: Instant) -> usize {
        let RecordPolicy::Dynamic = self.policy else {
            return self.max();
        };
        if self
            .last_record
            .is_some_and(|last| now.saturating_duration_since(last) >= self.idle_reset)
        {
            self.sent = 0;
            self.grown = 0;
        }
        let size = if self.sent < BOOST_THRESHOLD {
            SEGMENT_RECORD_SIZE
        } else {
            SEGMENT_RECORD_SIZE.saturating_add(GROWTH_STEP.saturating_mul(self.grown + 1))
        };
        size.min(self.max)
    }

    /// Records that a record of `len` plaintext bytes went out at `now`.
    pub(crate) fn record_sent(&mut self, len: usize, now: Instant) {
        if self.sent >= BOOST_THRESHOLD {
            self.grown = self.grown.saturating_add(1);
        }
        self.sent = self.sent.saturating_add(len as u64);
        self.last_record = Some(now);
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn records_grow_after_the_threshold_and_shrink_after_silence() {
        use super::{RecordSizer, BOOST_THRESHOLD, GROWTH_STEP, SEGMENT_RECORD_SIZE};
        use std::time::{Duration, Instant};

        let mut sizer = RecordSizer::dynamic(16 * 1024, Duration::from_secs(1));
        let t = Instant::now();
        assert_eq!(sizer.next_size(t), SEGMENT_RECORD_SIZE);
        sizer.record_sent(BOOST_THRESHOLD as usize, t);
        assert_eq!(sizer.next_size(t), SEGMENT_RECORD_SIZE + GROWTH_STEP);
        // After a second of silence, small records again.
        assert_eq!(sizer.next_size(t + Duration::from_secs(1)), SEGMENT_RECORD_SIZE);
    }
    use super::*;

    #[test]
    fn dynamic_sizes_follow_the_go_schedule() {
        let t = Instant::now();
        let mut sizer = RecordSizer::dynamic(8 * 1024, Duration::from_secs(1));
        let mut sizes = Vec::new();
        for _ in 0..110 {
            let n = sizer.next_size(t);
            sizer.record_sent(n, t);
            sizes.push(n);
        }
        // ceil(131072 / 1380) = 95 small records reach the threshold...
        assert!(sizes[..95].iter().all(|&n| n == SEGMENT_RECORD_SIZE));
        // ...then 1 KiB more each record, up to the maximum.
        let grown: Vec<usize> = (1..=6).map(|k| SEGMENT_RECORD_SIZE + k * GROWTH_STEP).collect();
        assert_eq!(&sizes[95..101], &grown[..]);
        assert!(sizes[101..].iter().all(|&n| n == 8 * 1024));
    }

    #[test]
    fn idle_resets_but_busy_does_not() {
        let t = Instant::now();
        let mut sizer = RecordSizer::dynamic(64 * 1024, Duration::from_secs(1));
        sizer.record_sent(200_000, t);
        assert!(sizer.next_size(t + Duration::from_millis(999)) > SEGMENT_RECORD_SIZE);
        sizer.record_sent(10, t + Duration::from_millis(999));
        // Idle counts from the last record, not the first.
        assert!(sizer.next_size(t + Duration::from_millis(1500)) > SEGMENT_RECORD_SIZE);
        assert_eq!(
            sizer.next_size(t + Duration::from_millis(2000)),
            SEGMENT_RECORD_SIZE
        );
    }

    #[test]
    fn fixed_is_fixed_and_capped() {
        let t = Instant::now();
        let mut sizer = RecordSizer::new(RecordPolicy::Fixed(100_000), 16 * 1024, Duration::MAX);
        assert_eq!(sizer.next_size(t), 16 * 1024);
        let mut small = RecordSizer::fixed(2000);
        small.record_sent(1 << 20, t);
        assert_eq!(small.next_size(t), 2000);
    }
}
