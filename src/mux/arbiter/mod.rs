//! Who reads the channel, who writes it, and when it is flushed: the
//! connection's I/O policy in one object, with no I/O of its own. The
//! shell asks it and acts ([`super::wire`] writes, [`super::lending`]
//! lends the read, [`super::driver`] runs the turns); it sees only counts
//! and stream ids, never a socket, a waker or a clock, so every decision is
//! tested here without either ([`tests`]).
//!
//! - **Reading.** The driver reads, unless one stream's task is the only
//!   one waiting on the connection: then the read is lent to it, and the
//!   record is opened where it is consumed ([`Arbiter::wait_read`]). It
//!   comes back to the driver as soon as anyone else waits, the stream has
//!   what it waited for, or a timer of the driver's fires.
//! - **Writing.** The task that produced output writes it itself when
//!   nothing waits ahead of it for the transport and its share since the
//!   driver's last turn ([`DIRECT_WRITE_BUDGET`]) is not spent; the driver
//!   writes everything else on its turn, which refills the share: so no
//!   writer keeps the transport to itself.
//! - **Flushing.** A flush waits while readers woken ahead of the writer
//!   have yet to run, since they likely write in reply: the last of them
//!   flushes for all, or the driver does after one pass of the runtime's
//!   queue. At most [`FLUSH_HOLD_WRITERS`] writers hold a flush in a row,
//!   and never past [`FLUSH_HOLD_LIMIT`] bytes.

#[cfg(test)]
mod tests;

/// Bytes streams may write themselves between two turns of the driver.
/// A stream whose writes the transport takes at once never has to wait,
/// so without a budget one busy writer would keep its task (and the
/// transport) to itself; past it, writes queue for the driver, which
/// serves the streams in turn. A message and its reply fit many times.
pub(crate) const DIRECT_WRITE_BUDGET: usize = 64 * 1024;

/// Unflushed bytes past which a flush is not held for woken readers: a
/// record's worth fills a write by itself, and holding more back only
/// starves the peer.
pub(crate) const FLUSH_HOLD_LIMIT: usize = 16 * 1024;

/// Writers that may hold a flush in a row for the readers woken ahead of
/// them; the next one flushes what they wrote. Without a cap, 64 calls
/// answered together left in one write after all 64 handlers ran, and the
/// peer idled meanwhile: the calls went in lockstep batches (measured,
/// unary RPC at 64 in flight, calls/s: no cap 195k, 4 writers 304-334k, 8
/// 350-379k, 16 400-407k, 32 304-316k).
pub(crate) const FLUSH_HOLD_WRITERS: usize = 16;

/// Who reads the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// The driver, on its turns.
    Driver,
    /// The task of this stream, the only one waiting on the connection.
    Lent(u32),
}

/// A flush a writer left to the driver because readers woken ahead of it
/// had yet to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushHold {
    None,
    /// Sealed bytes wait for the tasks queued ahead of the driver.
    Held,
    /// The driver yielded once for them; its next turn flushes.
    Yielded,
}

/// What the connection waits on as a stream's task starts to wait for
/// its data, as the shell counts it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Waiting {
    /// Tasks waiting for a stream's data, this one included.
    pub(crate) readers: usize,
    /// Whether any task waits for room, credit, a stream to open or one to
    /// accept.
    pub(crate) others: bool,
    /// Whether the driver runs and the connection has not failed (else
    /// nothing is lent: the core already failed every stream).
    pub(crate) live: bool,
}

/// A lending decision for the shell to carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lending {
    /// The read is (still) lent to the stream that asked.
    Lent,
    /// The read went back to the driver.
    TakenBack,
    /// The driver reads, as it did.
    Driver,
}

/// What a task that queued output finds when it asks to send it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Output {
    /// Whether the core has frames to send.
    pub(crate) queued: bool,
    /// Whether the task asks for a flush.
    pub(crate) flush: bool,
    /// Readers woken ahead of the task that have not read yet.
    pub(crate) woken_readers: usize,
    /// Whether frames wait for the transport, which pushed back.
    pub(crate) pushed_back: bool,
    /// Whether the connection has failed.
    pub(crate) failed: bool,
}

/// How a task sends its output ([`Arbiter::task_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskWrite {
    /// Whether the task writes now (else the driver does, on its turn).
    pub(crate) write: bool,
    /// Batches to take from the core (none: only the flush).
    pub(crate) batches: usize,
    /// Whether the write flushes.
    pub(crate) flush: bool,
    /// Whether the flush is held for the readers woken ahead.
    hold: bool,
}

/// The policy's state: who reads, what is written and not flushed, who
/// holds a flush, and what tasks may still write before the driver's turn.
#[derive(Debug)]
pub(crate) struct Arbiter {
    reader: Reader,
    hold: FlushHold,
    /// Writers that held their flush since the last flush.
    held: usize,
    /// Bytes written into the channel since its last flush.
    unflushed: usize,
    /// What tasks may still write themselves before the driver's next turn.
    direct_budget: usize,
}

impl Default for Arbiter {
    fn default() -> Self {
        Self {
            reader: Reader::Driver,
            hold: FlushHold::None,
            held: 0,
            unflushed: 0,
            direct_budget: DIRECT_WRITE_BUDGET,
        }
    }
}

impl Arbiter {
    /// The stream the read is lent to, if any.
    pub(crate) fn holder(&self) -> Option<u32> {
        match self.reader {
            Reader::Lent(id) => Some(id),
            Reader::Driver => None,
        }
    }

    /// Stream `id`'s task waits for its data: the read is lent to it if it
    /// is the only task waiting on the connection, and goes back to the
    /// driver otherwise.
    pub(crate) fn wait_read(&mut self, id: u32, waiting: Waiting) -> Lending {
        if waiting.readers == 1 && !waiting.others && waiting.live {
            self.reader = Reader::Lent(id);
            return Lending::Lent;
        }
        self.take_back()
    }

    /// Another task starts to wait on the connection, a timer of the
    /// driver's fired, or the connection failed: the driver reads.
    pub(crate) fn take_back(&mut self) -> Lending {
        match std::mem::replace(&mut self.reader, Reader::Driver) {
            Reader::Lent(_) => Lending::TakenBack,
            Reader::Driver => Lending::Driver,
        }
    }

    /// Stream `id` has what it waited for (or stopped reading): if the read
    /// was lent to it, the driver reads ahead while its task is busy.
    pub(crate) fn stop_waiting(&mut self, id: u32) -> Lending {
        match self.reader {
            Reader::Lent(held) if held == id => self.take_back(),
            _ => Lending::Driver,
        }
    }

    /// How a task sends the output it queued: itself if nothing waits
    /// ahead of it and its share is not spent, with the flush held if
    /// readers woken ahead will likely write too.
    pub(crate) fn task_write(&self, output: Output) -> TaskWrite {
        let hold = output.flush && output.woken_readers > 0 && self.held < FLUSH_HOLD_WRITERS;
        // (A flush with nothing written is a write of nothing.)
        let write = self.direct_budget > 0
            && !output.pushed_back
            && !output.failed
            && (output.queued || output.flush);
        TaskWrite {
            write,
            batches: usize::from(output.queued),
            flush: output.flush && !hold,
            hold,
        }
    }

    /// After a task's write: whether it flushes after all, since what is
    /// held fills a write by itself.
    pub(crate) fn flush_past_hold(&self, plan: TaskWrite) -> bool {
        plan.write && plan.hold && self.unflushed >= FLUSH_HOLD_LIMIT
    }

    /// A task's send is done: a flush it held waits for the readers ahead,
    /// or the driver.
    pub(crate) fn task_done(&mut self, plan: TaskWrite) {
        if plan.hold && self.unflushed > 0 {
            self.held += 1;
            if self.hold == FlushHold::None {
                self.hold = FlushHold::Held;
            }
        }
    }

    /// Whether a stream's data may go straight into the channel: nothing
    /// waits ahead of it, and its task's share is not spent unless it is
    /// the only stream (with none to share with, writes go through while
    /// the transport takes them, as over a bare channel).
    pub(crate) fn may_write_through(&self, pushed_back: bool, open_streams: usize) -> bool {
        !pushed_back && (self.direct_budget > 0 || open_streams <= 1)
    }

    /// A task wrote `bytes` of the core's frames or its data itself.
    pub(crate) fn spent(&mut self, bytes: usize) {
        self.direct_budget = self.direct_budget.saturating_sub(bytes);
    }

    /// The transport took `bytes` into records, not flushed yet.
    pub(crate) fn wrote(&mut self, bytes: usize) {
        self.unflushed += bytes;
    }

    /// Bytes written and not flushed.
    pub(crate) fn unflushed(&self) -> usize {
        self.unflushed
    }

    /// The transport flushed everything written.
    pub(crate) fn flushed(&mut self) {
        self.unflushed = 0;
        self.held = 0;
    }

    /// The driver's turn begins: tasks may write themselves again.
    pub(crate) fn driver_turn(&mut self) {
        self.direct_budget = DIRECT_WRITE_BUDGET;
    }

    /// Whether the driver's turn may flush: not the first turn after a
    /// writer held its flush for the readers woken ahead of it. The driver
    /// then yields once, so that the tasks queued before it run and write,
    /// and flushes on its next turn: a held flush waits one pass of the
    /// runtime's queue, never more.
    pub(crate) fn driver_may_flush(&mut self) -> bool {
        if self.hold == FlushHold::Held && self.unflushed > 0 && self.unflushed < FLUSH_HOLD_LIMIT {
            self.hold = FlushHold::Yielded;
            return false;
        }
        self.hold = FlushHold::None;
        true
    }

    /// Whether the driver's turn, which woke readers, leaves the keepalive
    /// frames it owes unflushed for them: their tasks run first, and what
    /// they write in reply takes the keepalive along. The driver yields
    /// once and flushes on its next turn, as for a held flush. Only when
    /// keepalive is all that waits, and nothing waits for a flush already.
    pub(crate) fn defer_keepalive(
        &mut self,
        woken_readers: usize,
        only_keepalive: impl FnOnce() -> bool,
    ) -> bool {
        let defer =
            self.hold == FlushHold::None && self.unflushed == 0 && woken_readers > 0 && only_keepalive();
        if defer {
            self.hold = FlushHold::Yielded;
        }
        defer
    }
}
