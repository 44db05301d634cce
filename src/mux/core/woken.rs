//! Which streams' readers were woken and have not read since: the tasks
//! about to run, whose writes in reply a flush can wait for.
//!
//! A count per round of the driver: a reader woken but busy elsewhere (a
//! handler streaming its replies that never reads its request's end) must
//! not hold back every flush for as long as it lives, so the driver starts
//! a new round whenever it flushes, and what was woken before it no longer
//! counts. Forgetting is one increment: a stream's mark names the round it
//! was made in.

/// The count, and the round marks are made in.
#[derive(Debug)]
pub(super) struct WokenReaders {
    round: u64,
    count: usize,
}

impl Default for WokenReaders {
    fn default() -> Self {
        // Round 0 is a stream's "never woken".
        Self { round: 1, count: 0 }
    }
}

impl WokenReaders {
    /// Marks a stream (its `mark`) woken in this round.
    pub(super) fn mark(&mut self, mark: &mut u64) {
        if *mark != self.round {
            *mark = self.round;
            self.count += 1;
        }
    }

    /// The stream read (or will never read): it no longer counts.
    pub(super) fn clear(&mut self, mark: &mut u64) {
        if *mark == self.round {
            self.count -= 1;
        }
        *mark = 0;
    }

    /// A new round: nothing woken before it counts.
    pub(super) fn next_round(&mut self) {
        self.round += 1;
        self.count = 0;
    }

    pub(super) fn count(&self) -> usize {
        self.count
    }
}
