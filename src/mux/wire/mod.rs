//! The one owner of the channel's writing half: when the socket is
//! written, by which task, and when it is flushed. What goes out next is
//! never decided here: every frame comes from the core's scheduler
//! ([`Multiplexer::poll_transmit`]), or, for data nothing else waits
//! ahead of, from the core's own decision to let it through
//! ([`Multiplexer::write_through`]).
//!
//! Two kinds of task write:
//!
//! - **The task that produced the output**, inline ([`Wire::send_from_task`]),
//!   when nothing waits in [`Wire::out`] for the transport and its budget
//!   ([`DIRECT_WRITE_BUDGET`]) since the driver's last turn is not spent:
//!   a request or a reply leaves without a hand-off to another task. A
//!   stream's `AsyncWrite` with nothing waiting ahead does not even queue:
//!   its bytes go from the caller's buffer straight into the records
//!   ([`Wire::write_through`]), copied once, as over a bare channel.
//! - **The driver**, on its turn ([`Wire::transmit`]), for everything else:
//!   what the transport pushed back (its waker is the driver's, whoever
//!   wrote), output past a task's budget, and what no task writes (credit,
//!   pongs, resets).
//!
//! A flush waits while readers the driver woke have yet to run
//! ([`Multiplexer::woken_readers`]): their tasks are queued to run and will
//! likely write in reply, so the last of them flushes for all, or the
//! driver does after one pass of the runtime's queue
//! ([`Wire::driver_may_flush`]). At most [`FLUSH_HOLD_WRITERS`] writers
//! hold a flush in a row, and never past [`FLUSH_HOLD_LIMIT`] bytes: the
//! peer starts on the first replies while the rest are written.

mod writer;

use std::{
    collections::VecDeque,
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::Bytes;

pub(crate) use writer::{FrameWriter, ReleasedWriter};

use super::{core::Multiplexer, frame::HEADER_LEN as MUX_HEADER_LEN};
use crate::error::Error;

/// Bytes a transmit takes from the core per batch before writing them.
pub(crate) const TRANSMIT_BATCH: usize = 256 * 1024;

/// Bytes streams may write themselves between two turns of the driver.
/// A stream whose writes the transport takes at once never has to wait,
/// so without a budget one busy writer would keep its task (and the
/// transport) to itself; past it, writes queue for the driver, which
/// serves the streams in turn. A message and its reply fit many times.
const DIRECT_WRITE_BUDGET: usize = 64 * 1024;

/// Unflushed bytes past which a flush is not held for woken readers: a
/// record's worth fills a write by itself, and holding more back only
/// starves the peer.
const FLUSH_HOLD_LIMIT: usize = 16 * 1024;

/// Writers that may hold a flush in a row for the readers woken ahead of
/// them; the next one flushes what they wrote. Without a cap, 64 calls
/// answered together left in one write after all 64 handlers ran, and the
/// peer idled meanwhile: the calls went in lockstep batches (measured,
/// unary RPC at 64 in flight, calls/s: no cap 195k, 4 writers 304-334k, 8
/// 350-379k, 16 400-407k, 32 304-316k).
const FLUSH_HOLD_WRITERS: usize = 16;

/// A flush a stream left to the driver because readers woken ahead of it
/// had yet to run ([`Wire::driver_may_flush`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushHold {
    None,
    /// Sealed bytes wait for the tasks queued ahead of the driver.
    Held,
    /// The driver yielded once for them; its next turn flushes.
    Yielded,
}

/// The channel's writing half and what waits for it.
pub(crate) struct Wire {
    writer: Box<dyn FrameWriter>,
    /// Frames taken from the core that the transport has not taken yet.
    out: VecDeque<Bytes>,
    batch: Vec<Bytes>,
    /// Bytes written into the channel since its last flush.
    unflushed: usize,
    hold: FlushHold,
    /// Writers that held their flush since the last one.
    held: usize,
    /// What tasks may still write themselves before the driver's next
    /// turn ([`DIRECT_WRITE_BUDGET`]).
    direct_budget: usize,
}

impl Wire {
    pub(crate) fn new(writer: Box<dyn FrameWriter>) -> Self {
        Self {
            writer,
            out: VecDeque::new(),
            batch: Vec::new(),
            unflushed: 0,
            hold: FlushHold::None,
            held: 0,
            direct_budget: DIRECT_WRITE_BUDGET,
        }
    }

    pub(crate) fn writer(&self) -> &dyn FrameWriter {
        &*self.writer
    }

    pub(crate) fn writer_mut(&mut self) -> &mut dyn FrameWriter {
        &mut *self.writer
    }

    /// The driver has ended: the transport goes (returned, to be dropped
    /// outside the lock), its counters stay, and nothing more is written.
    pub(crate) fn release(&mut self) -> Box<dyn FrameWriter> {
        let released = ReleasedWriter {
            records_sent: self.writer.records_sent(),
            key_updates_sent: self.writer.key_updates_sent(),
        };
        self.out.clear();
        std::mem::replace(&mut self.writer, Box::new(released))
    }

    /// Whether frames wait for the transport, which pushed back.
    pub(crate) fn pushed_back(&self) -> bool {
        !self.out.is_empty()
    }

    /// The driver's turn: tasks may write themselves again.
    pub(crate) fn refill_direct_budget(&mut self) {
        self.direct_budget = DIRECT_WRITE_BUDGET;
    }

    /// Sends what the core has now, from the calling task, if nothing is
    /// waiting ahead of it and its budget allows; with `flush`, flushes it
    /// too, unless readers woken ahead of this task are still to write
    /// (then the last of them, or the driver, flushes). The transport
    /// registers `driver`, never the caller's waker, so a pushed-back
    /// write always resumes.
    ///
    /// Returns whether the driver must run: output or a flush waits for
    /// it. (Whatever else the core has is the caller's to kick.)
    pub(crate) fn send_from_task(
        &mut self,
        core: &mut Multiplexer,
        driver: &Waker,
        now: Instant,
        flush: bool,
    ) -> bool {
        let has_output = core.has_output();
        // Readers woken ahead of this task will likely write too: their
        // frames and these leave in one write, the last one's (or the
        // driver's, after them).
        let hold = flush && core.woken_readers() > 0 && self.held < FLUSH_HOLD_WRITERS;
        if self.direct_budget > 0
            && self.out.is_empty()
            && core.error().is_none()
            && (has_output || flush && self.unflushed > 0)
        {
            let mut cx = Context::from_waker(driver);
            // (Nothing in the core: only the flush.)
            match self.transmit(core, &mut cx, now, usize::from(has_output), flush && !hold) {
                Ok(written) => self.direct_budget = self.direct_budget.saturating_sub(written),
                Err(err) => core.handle_transport_error(err),
            }
            if hold && self.unflushed >= FLUSH_HOLD_LIMIT {
                // Enough for a write of its own: waiting would only delay it.
                if let Err(err) = self.transmit(core, &mut cx, now, 0, true) {
                    core.handle_transport_error(err);
                }
            }
        }
        if hold && self.unflushed > 0 {
            self.held += 1;
            if self.hold == FlushHold::None {
                self.hold = FlushHold::Held;
            }
        }
        !self.out.is_empty() || self.unflushed > 0
    }

    /// Writes up to `data.len()` bytes of stream `id` (at most a batch)
    /// straight into the channel, which copies them once, into the
    /// records, when the core lets them through
    /// ([`Multiplexer::write_through`]); the flush is the caller's, or the
    /// driver's. What the transport does not take at once waits in `out`
    /// for the driver, and until it has gone, data queues. Returns the
    /// bytes taken, or `None` when the data must be queued instead.
    ///
    /// The task's budget ([`DIRECT_WRITE_BUDGET`]) applies when other
    /// streams are open: past it, its data queues for turns in the
    /// driver's transmit. Without it, a writer
    /// whose task never yields (the transport taking every write) wrote
    /// megabytes while the writers of other streams waited for the lock,
    /// with nothing queued for the scheduler to share out (measured: 100
    /// streams of 4 MiB over loopback TCP, the first quarter of the run
    /// gave one stream 1.9-2.7 times the mean).
    pub(crate) fn write_through(
        &mut self,
        core: &mut Multiplexer,
        driver: &Waker,
        now: Instant,
        id: u32,
        data: &[u8],
    ) -> Option<Result<usize, Error>> {
        // (With one stream there is no one to share with: its writes go
        // through while the transport takes them, as over a bare channel.)
        if !self.out.is_empty() || self.direct_budget == 0 && core.open_streams() > 1 {
            return None;
        }
        let mut header = [0; MUX_HEADER_LEN];
        let max = data.len().min(TRANSMIT_BATCH);
        let n = match core.write_through(id, max, &mut header) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(err) => return Some(Err(err)),
        };
        self.direct_budget = self.direct_budget.saturating_sub(n);
        let mut cx = Context::from_waker(driver);
        // One record for the header and the data, not one ending where
        // the buffer the header started does.
        self.writer.reserve(header.len() + n, now);
        for piece in [&header[..], &data[..n]] {
            let mut taken = 0;
            while taken < piece.len() && self.out.is_empty() {
                match self.writer.poll_write_data(&mut cx, &piece[taken..], now) {
                    Poll::Ready(Ok(k)) => {
                        self.unflushed += k;
                        taken += k;
                    }
                    Poll::Ready(Err(err)) => {
                        core.handle_transport_error(err);
                        return Some(Ok(n));
                    }
                    Poll::Pending => break,
                }
            }
            if taken < piece.len() {
                // Behind whatever the transport has not taken yet.
                self.out.push_back(Bytes::copy_from_slice(&piece[taken..]));
            }
        }
        Some(Ok(n))
    }

    /// Whether the driver's turn may flush: not the first turn after a
    /// task held its flush for the readers woken ahead of it
    /// ([`Wire::send_from_task`]). The driver then yields once, so that the
    /// tasks queued before it run and write, and flushes on its next turn:
    /// a held flush waits one pass of the runtime's queue, never more.
    /// With `new_round` (a poll's first turn, when the tasks woken on the
    /// last poll have had their chance to run), readers woken before no
    /// longer count.
    pub(crate) fn driver_may_flush(&mut self, core: &mut Multiplexer, new_round: bool) -> bool {
        if self.hold == FlushHold::Held && self.unflushed > 0 && self.unflushed < FLUSH_HOLD_LIMIT {
            self.hold = FlushHold::Yielded;
            return false;
        }
        self.hold = FlushHold::None;
        if new_round {
            core.next_wake_round();
        }
        true
    }

    /// Whether the driver's turn, which woke readers, leaves the pongs and
    /// the ping it owes unflushed for them: their tasks run first, so what
    /// was read reaches them a write sooner, and what they write in reply
    /// takes the keepalive frames along. The driver yields once and flushes
    /// on its next turn, as for a task's held flush. Only keepalive waits
    /// so: credit, resets and stream data are flushed as before, and a turn
    /// that finds bytes waiting for a flush already does not defer.
    pub(crate) fn defer_keepalive_to_woken_readers(&mut self, core: &Multiplexer, now: Instant) -> bool {
        let defer = self.hold == FlushHold::None
            && self.unflushed == 0
            && core.woken_readers() > 0
            && core.only_keepalive_waiting(now);
        if defer {
            self.hold = FlushHold::Yielded;
        }
        defer
    }

    /// Writes the core's frames into the channel until it has none (after
    /// at most `batches` batches) or the channel pushes back; with `flush`,
    /// flushes once the queue drains. `cx` is the driver's. Returns the
    /// bytes taken from the core.
    pub(crate) fn transmit(
        &mut self,
        core: &mut Multiplexer,
        cx: &mut Context<'_>,
        now: Instant,
        batches: usize,
        flush: bool,
    ) -> Result<usize, Error> {
        let mut taken = 0;
        let mut written = 0;
        loop {
            if self.out.is_empty() {
                if taken == batches {
                    break;
                }
                taken += 1;
                written += core.poll_transmit(now, &mut self.batch, TRANSMIT_BATCH);
                self.out.extend(self.batch.drain(..));
                if self.out.is_empty() {
                    break;
                }
            }
            while let Some(front) = self.out.front_mut() {
                match self.writer.poll_write_data(cx, front, now) {
                    Poll::Ready(Ok(n)) => {
                        self.unflushed += n;
                        if n == front.len() {
                            self.out.pop_front();
                        } else {
                            bytes::Buf::advance(front, n);
                        }
                    }
                    Poll::Ready(Err(err)) => return Err(err),
                    Poll::Pending => return Ok(written),
                }
            }
        }
        if flush && self.unflushed > 0 && self.out.is_empty() {
            match self.writer.poll_flush(cx, now) {
                Poll::Ready(Ok(())) => {
                    self.unflushed = 0;
                    self.held = 0;
                }
                Poll::Ready(Err(err)) => return Err(err),
                Poll::Pending => {}
            }
        }
        Ok(written)
    }
}
