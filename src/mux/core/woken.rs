//! Who to wake: the events the driver acts on, and which streams' readers
//! were woken and have not read since (the tasks about to run, whose
//! writes in reply a flush can wait for).
//!
//! The woken readers are counted per round of the driver: a reader woken
//! but busy elsewhere (a handler streaming its replies that never reads its
//! request's end) must not hold back every flush for as long as it lives,
//! so the driver starts a new round whenever it flushes, and what was woken
//! before it no longer counts. Forgetting is one increment: a stream's mark
//! names the round it was made in.

use std::collections::VecDeque;

/// What the driver must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Stream data, its end, or its failure arrived for a blocked reader.
    Readable(u32),
    /// A blocked writer may write again (or learn its stream failed).
    Writable(u32),
    /// A stream from the peer waits to be accepted.
    Incoming,
    /// The peer granted stream credit, or opening became impossible.
    StreamCredit,
    /// The connection failed or closed: everyone wakes.
    Lost,
}

/// The wake-ups for the driver, in order, and the woken readers: owned by
/// the code that wakes (through these methods), read by the driver.
#[derive(Debug, Default)]
pub(super) struct Wakes {
    events: VecDeque<Event>,
    readers: WokenReaders,
}

impl Wakes {
    /// Wakes stream `id`'s blocked reader, marked (its `mark`) woken in
    /// this round.
    #[inline]
    pub(super) fn wake_reader(&mut self, id: u32, mark: &mut u64) {
        self.readers.mark(mark);
        self.events.push_back(Event::Readable(id));
    }

    /// Wakes stream `id`'s blocked writer.
    #[inline]
    pub(super) fn wake_writer(&mut self, id: u32) {
        self.events.push_back(Event::Writable(id));
    }

    /// A stream from the peer (its `mark`) waits to be accepted: whoever
    /// accepts wakes, and it counts as a woken reader.
    pub(super) fn incoming_stream(&mut self, mark: &mut u64) {
        self.readers.mark(mark);
        self.events.push_back(Event::Incoming);
    }

    /// A wake-up for the connection, not one stream's reader or writer.
    pub(super) fn push(&mut self, event: Event) {
        self.events.push_back(event);
    }

    /// The next wake-up for the driver.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The stream (its `mark`) read, or will never read: its reader no
    /// longer counts as woken.
    #[inline]
    pub(super) fn reader_done(&mut self, mark: &mut u64) {
        self.readers.clear(mark);
    }

    /// Readers woken in this round that have not read since.
    pub(super) fn woken_readers(&self) -> usize {
        self.readers.count
    }

    /// A new round: no reader woken before it counts.
    pub(super) fn next_round(&mut self) {
        self.readers.round += 1;
        self.readers.count = 0;
    }
}

/// The count of woken readers, and the round marks are made in.
#[derive(Debug)]
struct WokenReaders {
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
    #[inline]
    fn mark(&mut self, mark: &mut u64) {
        if *mark != self.round {
            *mark = self.round;
            self.count += 1;
        }
    }

    /// The stream read (or will never read): it no longer counts.
    #[inline]
    fn clear(&mut self, mark: &mut u64) {
        if *mark == self.round {
            self.count -= 1;
        }
        *mark = 0;
    }
}
