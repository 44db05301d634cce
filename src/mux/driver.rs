//! The one task per connection: reads records into the core (unless the
//! read is lent to a stream's task, [`super::reading`]), writes what the
//! streams did not write themselves, runs the timers, and closes the
//! channel.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::time::{Instant, Sleep};

use super::{
    observe::TrafficReports,
    reading::{ReadTurn, READ_BUDGET},
    shared::{Inner, Shared},
    wake_list::WakeList,
};
use crate::{
    clock::now,
    error::{Error, Repr},
    record::{ChannelReader, ABORT_FLUSH_TIMEOUT},
};

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

pub(crate) struct Driver {
    inner: Arc<Inner>,
    sleep: Pin<Box<Sleep>>,
    /// Once closing: when to give up on sending what is left.
    close_by: Option<Instant>,
    phase: Phase,
    idle: IdleBuffers,
    record: RecordDeadline,
    /// The connection's traffic, reported to its observer once a second
    /// while it moves (with the idle check), and at its end.
    reports: Option<TrafficReports>,
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
    fn next_check(&mut self, reader: &ChannelReader) -> Option<Instant> {
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
    fn expired(&self, reader: &ChannelReader, now: Instant) -> Option<Error> {
        let (due, seen) = self.due?;
        let stuck = due <= now && reader.partial_record() && reader.records_received().0 == seen;
        stuck.then(|| Repr::RecordTimeout(self.limit.unwrap_or_default()).into())
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

impl Driver {
    pub(crate) fn new(
        inner: Arc<Inner>,
        record_read_timeout: Option<Duration>,
        reports: Option<TrafficReports>,
    ) -> Self {
        let now = Instant::now();
        let seen = {
            let side = inner.lock_read_side();
            let shared = inner.lock();
            side.as_ref()
                .map_or((0, 0), |side| IdleBuffers::records_moved(side.reader(), &shared))
        };
        Self {
            inner,
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
            reports,
        }
    }
}

impl Driver {
    fn poll_closing(&mut self, cx: &mut Context<'_>, wake: &mut WakeList) -> Poll<()> {
        let mut shared = self.inner.lock();
        if self.phase == Phase::Running {
            let Some((code, reason)) = shared.core.poll_close() else {
                // A transport failure: nothing can be sent any more.
                self.phase = Phase::Done;
                shared.take_wakers(wake);
                return Poll::Ready(());
            };
            shared.wire.set_close(code, reason);
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
                if shared.wire.poll_close(cx).is_ready() {
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
        // Records arriving wake the driver unless the read is lent.
        self.inner.lease.set_driver(cx.waker());
        // Bounded, so one busy connection cannot starve the runtime, and
        // the streams take what was read soon (see READ_BUDGET).
        let mut budget = READ_BUDGET;
        for turn in 0..64 {
            // The reading half, unless a stream's task is reading it now
            // (that task delivers what it reads).
            let mut side_guard = self.inner.try_lock_read_side();
            let mut side = side_guard.as_deref_mut().and_then(Option::as_mut);
            let read = match side.as_deref_mut() {
                Some(side) if !self.inner.lease.is_lent() => {
                    side.poll_read(&self.inner.lease, &self.inner.read_waker, budget)
                }
                // Lent to a stream's task, which reads for itself.
                _ => ReadTurn::default(),
            };
            budget = budget.saturating_sub(read.bytes);
            // One lock per turn: what was read, what to write, the timers.
            let mut shared = self.inner.lock();
            if turn == 0 {
                register(&mut shared, cx);
            }
            // Whether this turn flushes, decided before what was read wakes
            // anyone: those it wakes count towards the next flush.
            let flush = shared.driver_may_flush(turn == 0);
            if let Some(side) = side.as_deref_mut() {
                side.deliver(&mut shared, read.end);
            }
            if shared.core.error().is_some() {
                shared.take_wakers(wake);
                drop(shared);
                drop(side_guard);
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
                drop(side_guard);
                return self.poll_closing(cx, wake);
            }
            let mut timer = false;
            let core_deadline = shared.core.poll_timeout().map(Instant::from_std);
            // (While a stream's task reads, the checks that need the
            // reading half keep the deadlines they had.)
            let (release, record_due) = match side.as_deref() {
                Some(side) => (
                    self.idle.next_check(side.reader(), &shared),
                    self.record.next_check(side.reader()),
                ),
                None => (self.idle.due, self.record.due.map(|(due, _)| due)),
            };
            if let Some(deadline) = core_deadline.into_iter().chain(release).chain(record_due).min() {
                if self.sleep.deadline() != deadline {
                    self.sleep.as_mut().reset(deadline);
                }
                if self.sleep.as_mut().poll(cx).is_ready() {
                    // After a timer the driver reads again, whoever the
                    // read was lent to: a task that stopped polling its
                    // stream holds nothing back past it.
                    if shared.arbiter.holder().is_some() {
                        shared.take_back_read();
                        timer = true;
                    }
                    if core_deadline.is_some_and(|due| due <= deadline) {
                        shared.core.handle_timeout(now());
                        // A due ping needs another turn, unless the channel
                        // is pushing back (its wake-up brings us back).
                        timer |= shared.core.error().is_some()
                            || !shared.wire.pushed_back() && shared.core.wants_transmit(now());
                    }
                    let reader_due = record_due.is_some_and(|due| due <= deadline)
                        || release.is_some_and(|due| due <= deadline);
                    match side {
                        // Checked on a turn that holds the reading half.
                        None if reader_due => timer = true,
                        None => {}
                        Some(side) => {
                            if record_due.is_some_and(|due| due <= deadline) {
                                if let Some(err) = self.record.expired(side.reader(), deadline) {
                                    tracing::debug!(error = %err, "the peer's record never completed");
                                    shared.core.handle_transport_error(err);
                                    timer = true;
                                }
                            }
                            if release.is_some_and(|due| due <= deadline) {
                                self.idle
                                    .release_if_idle(side.reader_mut(), &mut shared, deadline);
                                if let Some(reports) = &mut self.reports {
                                    reports.report(shared.stats());
                                }
                                // Another turn sets the timer for what comes next.
                                timer = true;
                            }
                        }
                    }
                }
            }
            shared.take_wakers(wake);
            let close = shared.core.poll_close().is_some() || shared.core.error().is_some();
            drop(shared);
            drop(side_guard);
            // If the read is lent and the transport may hold records for
            // which nobody is registered (a read of ours stopped at its
            // budget, or the holder found the reading half taken by this
            // turn), the holder reads now: it could not have after its
            // last try.
            self.inner.lease.nudge_holder();
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
            if !read.more && !timer {
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
    fn records_moved(reader: &ChannelReader, shared: &Shared) -> (u64, u64) {
        (reader.records_received().0, shared.wire.records_sent().0)
    }

    /// When the buffers are checked next: re-armed once records move after
    /// a release (two integer comparisons per turn otherwise).
    fn next_check(&mut self, reader: &ChannelReader, shared: &Shared) -> Option<Instant> {
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
    fn release_if_idle(&mut self, reader: &mut ChannelReader, shared: &mut Shared, now: Instant) {
        let moved = Self::records_moved(reader, shared);
        if moved != self.seen {
            self.seen = moved;
            self.due = Some(now + IDLE_BUFFER_RELEASE);
            return;
        }
        reader.release_idle_buffers();
        shared.wire.release_idle_buffers();
        shared.core.release_idle_buffers();
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
    shared.arbiter.driver_turn();
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut wake = WakeList::default();
        let result = this.poll_inner(cx, &mut wake);
        wake.wake_all();
        result
    }
}

impl Drop for Driver {
    /// Whatever ends the driver (its end, a panic, its runtime shutting
    /// down) ends every stream: nobody waits on a connection that is gone.
    /// The transport goes with it (the reading half here, the writing half
    /// in the shared state), whoever still holds a handle.
    fn drop(&mut self) {
        let mut wake = WakeList::default();
        let writer;
        // The reading half first (a stream's task reading takes it before
        // the connection's lock too).
        let reader = self.inner.lock_read_side().take();
        {
            let mut shared = self.inner.lock();
            if let Some(reports) = self.reports.take() {
                reports.close(shared.stats(), shared.core.error());
            }
            shared.core.handle_transport_error(Repr::DriverStopped.into());
            writer = shared.wire.release();
            shared.driver = None;
            shared.take_wakers(&mut wake);
        }
        // Outside the lock: closing a transport may take a while.
        drop(writer);
        drop(reader);
        wake.wake_all();
    }
}
