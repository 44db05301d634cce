//! The one task per connection: reads records into the core, writes what
//! the streams did not write themselves, runs the timers, and closes the
//! channel.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use tokio::{
    io::AsyncRead,
    time::{Instant, Sleep},
};

use super::{
    shared::{now, Inner, Shared},
    wake_list::WakeList,
};
use crate::{
    error::Error,
    record::{ChannelReader, Origin, ABORT_FLUSH_TIMEOUT},
};

/// Records the driver reads per turn before giving writes a chance.
const READS_PER_TURN: usize = 32;
/// Bytes the driver reads per poll before it yields, so that the streams'
/// tasks (woken when it yields) take the data while it is still in cache,
/// and the channel's read buffers are free again for reuse. Reading a
/// whole window per poll kept megabytes of records alive at once, which
/// cost a page fault per 4 KiB received (the freed blocks went back to the
/// kernel).
const READ_BUDGET: usize = 512 * 1024;
/// What a key update the peer sent counts for in [`READ_BUDGET`]: a key
/// derivation costs about what opening 16 KiB does, so a turn opens at
/// most 32 of them (`record::MAX_KEY_UPDATES_IN_A_ROW` without data
/// between) besides its data.
const KEY_UPDATE_READ_COST: usize = 16 * 1024;
/// Batches the driver writes per turn before reading again.
const BATCHES_PER_TURN: usize = usize::MAX;
/// A connection that sent and received no record for this long lets the
/// channel's read and send buffers go (up to 16 KiB each, kept while busy
/// so that message after message reuses them): an idle connection holds
/// its state alone.
const IDLE_BUFFER_RELEASE: Duration = Duration::from_secs(1);

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// Sending what is left and the close record, until a deadline.
    Closing,
    Done,
}

pub(crate) struct Driver<R> {
    inner: Arc<Inner>,
    reader: ChannelReader<R>,
    /// Records read this turn, handed to the core under one lock.
    inbox: Vec<(Bytes, Origin)>,
    sleep: Pin<Box<Sleep>>,
    /// Once closing: when to give up on sending what is left.
    close_by: Option<Instant>,
    phase: Phase,
    idle: IdleBuffers,
    record: RecordDeadline,
}

/// How long a record begun may take to arrive whole: armed when a turn ends
/// with part of a record read, re-armed whenever a record completes.
struct RecordDeadline {
    limit: Option<Duration>,
    /// The deadline, and the records received when it was set.
    due: Option<(Instant, u64)>,
}

impl RecordDeadline {
    /// When the record being read must be whole, if one is partly read.
    fn next_check<R>(&mut self, reader: &ChannelReader<R>) -> Option<Instant> {
        let limit = self.limit?;
        if !reader.partial_record() {
            self.due = None;
            return None;
        }
        let records = reader.records_received().0;
        match self.due {
            Some((due, seen)) if seen == records => Some(due),
            _ => {
                let due = Instant::now() + limit;
                self.due = Some((due, records));
                Some(due)
            }
        }
    }

    /// At `now`: the error, if the same record is still partly read past
    /// its deadline.
    fn expired<R>(&self, reader: &ChannelReader<R>, now: Instant) -> Option<Error> {
        let (due, seen) = self.due?;
        let stuck = due <= now && reader.partial_record() && reader.records_received().0 == seen;
        stuck.then(|| Error::RecordTimeout(self.limit.unwrap_or_default()))
    }
}

/// When the channel's buffers go: [`IDLE_BUFFER_RELEASE`] after the last
/// record either way. Checked rather than tracked: at the deadline, the
/// record counts tell whether anything moved since the last check.
struct IdleBuffers {
    /// When to check next; `None` once released, until records move again.
    due: Option<Instant>,
    /// Records received and sent as of the last check.
    seen: (u64, u64),
}

impl<R> Driver<R> {
    pub(crate) fn new(
        inner: Arc<Inner>,
        reader: ChannelReader<R>,
        record_read_timeout: Option<Duration>,
    ) -> Self {
        let now = Instant::now();
        let seen = IdleBuffers::records_moved(&reader, &inner.lock());
        Self {
            inner,
            reader,
            inbox: Vec::new(),
            sleep: Box::pin(tokio::time::sleep_until(now)),
            close_by: None,
            phase: Phase::Running,
            idle: IdleBuffers {
                due: Some(now + IDLE_BUFFER_RELEASE),
                seen,
            },
            record: RecordDeadline {
                limit: record_read_timeout,
                due: None,
            },
        }
    }
}

impl<R: AsyncRead + Unpin> Driver<R> {
    /// Reads what the channel has (up to a turn's worth of records, and
    /// `budget` bytes: a record may cross it) into the inbox, without the
    /// lock. Returns the bytes read, whether the channel may have more (it
    /// stopped at the turn's limit or the budget, not at `Pending` or the
    /// end), and how it ended if it did (`Some(None)`: cleanly). With 64
    /// KiB records, 32 to a turn read 2 MiB at once before the budget
    /// applied per record, and the records held kept every read buffer in
    /// use.
    fn poll_read(&mut self, cx: &mut Context<'_>, budget: usize) -> (usize, bool, Option<Option<Error>>) {
        let mut bytes_read = 0;
        while self.inbox.len() < READS_PER_TURN && bytes_read < budget {
            let polled = self.reader.poll_data(cx);
            // Key updates opened on the way count as bytes read.
            bytes_read += self.reader.take_key_updates() as usize * KEY_UPDATE_READ_COST;
            match polled {
                Poll::Ready(Ok(Some((bytes, origin)))) => {
                    bytes_read += bytes.len();
                    self.inbox.push((bytes, origin));
                }
                Poll::Ready(Ok(None)) => return (bytes_read, false, Some(None)),
                Poll::Ready(Err(err)) => return (bytes_read, false, Some(Some(err))),
                Poll::Pending => return (bytes_read, false, None),
            }
        }
        (bytes_read, true, None)
    }

    /// Hands what was read to the core (under the lock the turn holds).
    fn deliver(
        inbox: &mut Vec<(Bytes, Origin)>,
        reader: &ChannelReader<R>,
        shared: &mut Shared,
        end: Option<Option<Error>>,
    ) {
        if inbox.is_empty() && end.is_none() {
            return;
        }
        let now = shared.clock();
        for (bytes, origin) in inbox.drain(..) {
            shared.core.handle_input(bytes, origin, now);
        }
        match end {
            Some(None) => shared.core.handle_eof(),
            Some(Some(err)) => shared.core.handle_transport_error(err),
            None => {}
        }
        shared.records_received = reader.records_received().0;
        shared.key_updates_received = reader.key_updates_received();
        shared.read_buffers = reader.buffer_capacity();
    }

    fn poll_closing(&mut self, cx: &mut Context<'_>, wake: &mut WakeList) -> Poll<()> {
        let mut shared = self.inner.lock();
        if self.phase == Phase::Running {
            let Some((code, reason)) = shared.core.poll_close() else {
                // A transport failure: nothing can be sent any more.
                self.phase = Phase::Done;
                shared.take_wakers(wake);
                return Poll::Ready(());
            };
            shared.wire.writer_mut().set_close(code, reason);
            self.phase = Phase::Closing;
            self.close_by = Some(Instant::now() + ABORT_FLUSH_TIMEOUT);
        }
        shared.take_wakers(wake);
        match shared.transmit(cx, BATCHES_PER_TURN, true) {
            Err(_) => {
                self.phase = Phase::Done;
                return Poll::Ready(());
            }
            Ok(_) if shared.wire.pushed_back() => {}
            Ok(_) => {
                if shared.wire.writer_mut().poll_close(cx).is_ready() {
                    self.phase = Phase::Done;
                    return Poll::Ready(());
                }
            }
        }
        // The transport pushes back: wait for it until the deadline. (A
        // close that leaves at once never sets the timer: registering one
        // can wake the runtime's driver for nothing.)
        if let Some(deadline) = self.close_by {
            if self.sleep.deadline() != deadline {
                self.sleep.as_mut().reset(deadline);
            }
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.phase = Phase::Done;
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn poll_inner(&mut self, cx: &mut Context<'_>, wake: &mut WakeList) -> Poll<()> {
        if self.phase != Phase::Running {
            register(&mut self.inner.lock(), cx);
            return self.poll_closing(cx, wake);
        }
        // Bounded, so one busy connection cannot starve the runtime, and
        // the streams take what was read soon (see READ_BUDGET).
        let mut budget = READ_BUDGET;
        for turn in 0..64 {
            let (bytes_read, more_to_read, end) = self.poll_read(cx, budget);
            budget = budget.saturating_sub(bytes_read);
            // One lock per turn: what was read, what to write, the timers.
            let mut shared = self.inner.lock();
            if turn == 0 {
                register(&mut shared, cx);
            }
            // Whether this turn flushes, decided before what was read wakes
            // anyone: those it wakes count towards the next flush.
            let flush = shared.driver_may_flush(turn == 0);
            Self::deliver(&mut self.inbox, &self.reader, &mut shared, end);
            if shared.core.error().is_some() {
                shared.take_wakers(wake);
                drop(shared);
                return self.poll_closing(cx, wake);
            }
            // Pongs and our ping may wait for the readers just woken.
            let flush = flush && !shared.defer_keepalive_to_woken_readers();
            // Writes come after reads, so what a read calls for (credit,
            // a pong) is written in the same turn. The core is then drained
            // or the channel is pushing back: another turn would find
            // nothing to write.
            if let Err(err) = shared.transmit(cx, BATCHES_PER_TURN, flush) {
                shared.core.handle_transport_error(err);
                shared.take_wakers(wake);
                drop(shared);
                return self.poll_closing(cx, wake);
            }
            let mut timer = false;
            let core_deadline = shared.core.poll_timeout().map(Instant::from_std);
            let release = self.idle.next_check(&self.reader, &shared);
            let record_due = self.record.next_check(&self.reader);
            if let Some(deadline) = core_deadline.into_iter().chain(release).chain(record_due).min() {
                if self.sleep.deadline() != deadline {
                    self.sleep.as_mut().reset(deadline);
                }
                if self.sleep.as_mut().poll(cx).is_ready() {
                    if core_deadline.is_some_and(|due| due <= deadline) {
                        shared.core.handle_timeout(now());
                        // A due ping needs another turn, unless the channel
                        // is pushing back (its wake-up brings us back).
                        timer = shared.core.error().is_some()
                            || !shared.wire.pushed_back() && shared.core.wants_transmit(now());
                    }
                    if record_due.is_some_and(|due| due <= deadline) {
                        if let Some(err) = self.record.expired(&self.reader, deadline) {
                            tracing::debug!(error = %err, "the peer's record never completed");
                            shared.core.handle_transport_error(err);
                            timer = true;
                        }
                    }
                    if release.is_some_and(|due| due <= deadline) {
                        self.idle.release_if_idle(&mut self.reader, &mut shared, deadline);
                        // Another turn sets the timer for what comes next.
                        timer = true;
                    }
                }
            }
            shared.take_wakers(wake);
            let close = shared.core.poll_close().is_some() || shared.core.error().is_some();
            drop(shared);
            if close {
                return self.poll_closing(cx, wake);
            }
            if !flush {
                // Behind the tasks just woken, which may add to the flush.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // Each turn reads until the channel is pending and writes until
            // the core is drained or the channel pushes back; only a full
            // turn of reads or a timer's work needs another.
            if !more_to_read && !timer {
                return Poll::Pending;
            }
            if budget == 0 {
                break;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl IdleBuffers {
    fn records_moved<R>(reader: &ChannelReader<R>, shared: &Shared) -> (u64, u64) {
        (reader.records_received().0, shared.wire.writer().records_sent().0)
    }

    /// When the buffers are checked next: re-armed once records move after
    /// a release (two integer comparisons per turn otherwise).
    fn next_check<R>(&mut self, reader: &ChannelReader<R>, shared: &Shared) -> Option<Instant> {
        if self.due.is_none() {
            let moved = Self::records_moved(reader, shared);
            if moved != self.seen {
                self.seen = moved;
                self.due = Some(Instant::now() + IDLE_BUFFER_RELEASE);
            }
        }
        self.due
    }

    /// At the check's deadline `now`: lets the buffers go if no record
    /// moved since the last check, or checks again a period later.
    fn release_if_idle<R>(&mut self, reader: &mut ChannelReader<R>, shared: &mut Shared, now: Instant) {
        let moved = Self::records_moved(reader, shared);
        if moved != self.seen {
            self.seen = moved;
            self.due = Some(now + IDLE_BUFFER_RELEASE);
            return;
        }
        reader.release_idle_buffers();
        shared.wire.writer_mut().release_idle_buffers();
        shared.read_buffers = reader.buffer_capacity();
        self.due = None;
    }
}

/// The driver's turn begins: its waker is the one the transport and the
/// streams wake, and streams may write themselves again.
fn register(shared: &mut Shared, cx: &Context<'_>) {
    match &shared.driver {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => shared.driver = Some(cx.waker().clone()),
    }
    shared.wire.refill_direct_budget();
}

impl<R: AsyncRead + Unpin> Future for Driver<R> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut wake = WakeList::default();
        let result = this.poll_inner(cx, &mut wake);
        wake.wake_all();
        result
    }
}

impl<R> Drop for Driver<R> {
    /// Whatever ends the driver (its end, a panic, its runtime shutting
    /// down) ends every stream: nobody waits on a connection that is gone.
    /// The transport goes with it (the reading half here, the writing half
    /// in the shared state), whoever still holds a handle.
    fn drop(&mut self) {
        let mut wake = WakeList::default();
        let writer;
        {
            let mut shared = self.inner.lock();
            shared.core.handle_transport_error(Error::DriverStopped);
            writer = shared.wire.release();
            shared.driver = None;
            shared.take_wakers(&mut wake);
        }
        // Outside the lock: closing a transport may take a while.
        drop(writer);
        wake.wake_all();
    }
}
