//! What a connection's handles and its driver share, behind one lock: the
//! sans-IO core, the wakers of whoever waits, and the channel's writing
//! half, which whoever holds the lock may write to.
//!
//! The driver task reads; writing needs no hand-off to it. A stream that
//! queues output while nothing else is waiting to be written seals and
//! writes it itself, in the same fair turn order the driver would use
//! ([`Shared::transmit_now`]); only when the transport pushes back does
//! the driver take over, woken by the transport. A stream's `AsyncWrite`
//! with nothing waiting ahead does not even queue: its bytes go from the
//! caller's buffer straight into the records ([`Shared::write_through`]),
//! copied once, as over a bare channel.
//!
//! A flush waits, though, while readers the driver woke have yet to run
//! ([`Multiplexer::woken_readers`]): their tasks are queued to run and will
//! likely write in reply, so the last of them flushes for all, or the
//! driver does after one pass of the runtime's queue
//! ([`Shared::driver_may_flush`]). Sixty-four calls answered together
//! leave in a write or two instead of sixty-four; a lone call, with nobody
//! else woken, still leaves at once.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
    time::Duration,
};

use bytes::Bytes;
use std::time::Instant;

use tokio::io::AsyncWrite;

use super::{
    core::{Event, Multiplexer},
    frame::HEADER_LEN as MUX_HEADER_LEN,
    id_map::IdMap,
    wake_list::WakeList,
};
use crate::{
    error::{CloseCode, Error},
    handshake::{Agreement, PeerId},
    record::ChannelWriter,
};

/// Bytes a transmit takes from the core per batch before writing them.
pub(crate) const TRANSMIT_BATCH: usize = 256 * 1024;

/// Bytes streams may write themselves between two turns of the driver.
/// A stream whose writes the transport takes at once never has to wait,
/// so without a budget one busy writer would keep its task (and the
/// transport) to itself; past it, writes queue for the driver, which
/// serves the streams in turn. A message and its reply fit many times.
const DIRECT_WRITE_BUDGET: usize = 64 * 1024;

/// Unflushed bytes past which a flush is not held for woken readers
/// ([`Shared::transmit_now`]): a record's worth fills a write by itself,
/// and holding more back only starves the peer.
const FLUSH_HOLD_LIMIT: usize = 16 * 1024;

/// The channel's writing half, whatever its transport: what the shared
/// state writes frames into.
pub(crate) trait FrameWriter: Send {
    fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        now: Instant,
    ) -> Poll<Result<usize, Error>>;
    fn reserve(&mut self, len: usize, now: Instant);
    fn poll_flush(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Error>>;
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>>;
    fn set_close(&mut self, code: CloseCode, reason: String);
    fn records_sent(&self) -> (u64, u64);
    fn key_updates_sent(&self) -> u64;
    fn buffer_capacity(&self) -> usize;
    fn release_idle_buffers(&mut self);
}

impl<W: AsyncWrite + Unpin + Send> FrameWriter for ChannelWriter<W> {
    fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        now: Instant,
    ) -> Poll<Result<usize, Error>> {
        ChannelWriter::poll_write_data(self, cx, data, now)
    }
    fn reserve(&mut self, len: usize, now: Instant) {
        ChannelWriter::reserve(self, len, now);
    }
    fn poll_flush(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Error>> {
        ChannelWriter::poll_flush(self, cx, now)
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        ChannelWriter::poll_close(self, cx)
    }
    fn set_close(&mut self, code: CloseCode, reason: String) {
        ChannelWriter::set_close(self, code, reason);
    }
    fn records_sent(&self) -> (u64, u64) {
        ChannelWriter::records_sent(self)
    }
    fn key_updates_sent(&self) -> u64 {
        ChannelWriter::key_updates_sent(self)
    }
    fn buffer_capacity(&self) -> usize {
        ChannelWriter::buffer_capacity(self)
    }
    fn release_idle_buffers(&mut self) {
        ChannelWriter::release_idle_buffers(self);
    }
}

/// What stands in for the channel's writing half once the driver has ended:
/// the transport is let go at once (a peer still writing to us hears the
/// close, rather than waiting on a socket nobody reads), however long the
/// application keeps its handles; only the counters remain.
pub(crate) struct ReleasedWriter {
    pub(crate) records_sent: (u64, u64),
    pub(crate) key_updates_sent: u64,
}

impl FrameWriter for ReleasedWriter {
    fn poll_write_data(&mut self, _: &mut Context<'_>, _: &[u8], _: Instant) -> Poll<Result<usize, Error>> {
        Poll::Ready(Err(Error::DriverStopped))
    }
    fn reserve(&mut self, _: usize, _: Instant) {}
    fn poll_flush(&mut self, _: &mut Context<'_>, _: Instant) -> Poll<Result<(), Error>> {
        Poll::Ready(Err(Error::DriverStopped))
    }
    fn poll_close(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
    fn set_close(&mut self, _: CloseCode, _: String) {}
    fn records_sent(&self) -> (u64, u64) {
        self.records_sent
    }
    fn key_updates_sent(&self) -> u64 {
        self.key_updates_sent
    }
    fn buffer_capacity(&self) -> usize {
        0
    }
    fn release_idle_buffers(&mut self) {}
}

/// Wakers of tasks waiting on the connection as a whole, each once.
#[derive(Debug, Default)]
pub(crate) struct Waiters(Vec<Waker>);

impl Waiters {
    pub(crate) fn register(&mut self, waker: &Waker) {
        if !self.0.iter().any(|w| w.will_wake(waker)) {
            self.0.push(waker.clone());
        }
    }

    fn take(&mut self, wake: &mut WakeList) {
        wake.extend(self.0.drain(..));
    }
}

/// A flush a stream left to the driver because readers woken ahead of it
/// had yet to run ([`Shared::driver_may_flush`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushHold {
    None,
    /// Sealed bytes wait for the tasks queued ahead of the driver.
    Held,
    /// The driver yielded once for them; its next turn flushes.
    Yielded,
}

/// State shared by the handles and the driver, behind one mutex.
pub(crate) struct Shared {
    pub(crate) core: Multiplexer,
    pub(crate) read_wakers: IdMap<Waker>,
    pub(crate) write_wakers: IdMap<Waker>,
    pub(crate) open_waiters: Waiters,
    pub(crate) accept_waiters: Waiters,
    pub(crate) closed_waiters: Waiters,
    pub(crate) driver: Option<Waker>,
    pub(crate) writer: Box<dyn FrameWriter>,
    /// Frames taken from the core, not yet taken by the writer.
    pub(crate) out: VecDeque<Bytes>,
    batch: Vec<Bytes>,
    need_flush: bool,
    /// Bytes written into the channel since its last flush.
    unflushed: usize,
    flush_hold: FlushHold,
    /// The time, read once per hold of the lock ([`Shared::clock`]).
    clock: Option<Instant>,
    /// What streams may still write themselves before the driver's next
    /// turn ([`DIRECT_WRITE_BUDGET`]).
    direct_budget: usize,
    /// What the reading half counted, as of the driver's last read.
    pub(crate) records_received: u64,
    /// Key updates the reading half opened, as of the driver's last read.
    pub(crate) key_updates_received: u64,
    pub(crate) read_buffers: usize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("core", &self.core)
            .field("out", &self.out.len())
            .finish_non_exhaustive()
    }
}

/// The time the core sees: tokio's clock, so a paused runtime pauses it
/// too.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Shared {
    pub(crate) fn new(core: Multiplexer, writer: Box<dyn FrameWriter>) -> Self {
        Self {
            core,
            read_wakers: IdMap::default(),
            write_wakers: IdMap::default(),
            open_waiters: Waiters::default(),
            accept_waiters: Waiters::default(),
            closed_waiters: Waiters::default(),
            driver: None,
            writer,
            out: VecDeque::new(),
            batch: Vec::new(),
            need_flush: false,
            unflushed: 0,
            flush_hold: FlushHold::None,
            clock: None,
            direct_budget: DIRECT_WRITE_BUDGET,
            records_received: 0,
            key_updates_received: 0,
            read_buffers: 0,
        }
    }

    /// The time as of this hold of the lock: one clock read however many
    /// frames and records the hold writes.
    pub(crate) fn clock(&mut self) -> Instant {
        *self.clock.get_or_insert_with(now)
    }

    /// Whether the driver has work: output to send, or an ending to act on.
    fn driver_has_work(&self) -> bool {
        self.core.has_output() || self.core.error().is_some() || self.core.close_due()
    }

    /// Wakes the driver if it has work.
    pub(crate) fn kick(&mut self) {
        if self.driver_has_work() {
            if let Some(driver) = &self.driver {
                driver.wake_by_ref();
            }
        }
    }

    /// Sends what the core has now, from the caller's task, if nothing is
    /// waiting ahead of it, and with `flush` writes it to the transport;
    /// otherwise (or if the transport pushes back, or more is left, or
    /// sealed bytes wait for a flush) wakes the driver, which flushes on its
    /// turn, once the caller's task yields: so what a task writes in one go
    /// (data, then its end) leaves in one record. The transport registers
    /// the driver's waker, never the caller's, so a pushed-back write
    /// always resumes.
    pub(crate) fn transmit_now(&mut self, flush: bool) {
        let Some(driver) = self.driver.clone() else {
            return;
        };
        let has_output = self.core.has_output();
        // Readers woken ahead of this task will likely write too: their
        // frames and these leave in one write, the last one's (or the
        // driver's, after them).
        let hold = flush && self.core.woken_readers() > 0;
        if self.direct_budget > 0
            && self.out.is_empty()
            && self.core.error().is_none()
            && (has_output || flush && self.need_flush)
        {
            let mut cx = Context::from_waker(&driver);
            // (Nothing in the core: only the flush.)
            match self.transmit(&mut cx, usize::from(has_output), flush && !hold) {
                Ok(written) => self.direct_budget = self.direct_budget.saturating_sub(written),
                Err(err) => self.core.handle_transport_error(err),
            }
            if hold && self.unflushed >= FLUSH_HOLD_LIMIT {
                // Enough for a write of its own: waiting would only delay it.
                if let Err(err) = self.transmit(&mut cx, 0, true) {
                    self.core.handle_transport_error(err);
                }
            }
        }
        if hold && self.need_flush && self.flush_hold == FlushHold::None {
            self.flush_hold = FlushHold::Held;
        }
        if !self.out.is_empty() || self.need_flush {
            driver.wake_by_ref();
        } else {
            self.kick();
        }
    }

    /// Writes up to `data.len()` bytes of stream `id` (at most a batch)
    /// straight into the channel, which copies them once, into the
    /// records, when nothing waits ahead of them
    /// ([`Multiplexer::write_through`]); the flush is the caller's, or the
    /// driver's. What the transport does not take at once waits in `out`
    /// for the driver, and until it has gone, data queues. Returns the
    /// bytes taken, or `None` when the data must be queued instead.
    ///
    /// No budget applies, unlike [`Shared::transmit_now`]: the task writes
    /// only its own data, and only while no other stream's waits, so the
    /// streams still take turns (a write each, rather than a quantum each).
    pub(crate) fn write_through(&mut self, id: u32, data: &[u8]) -> Option<Result<usize, Error>> {
        let driver = self.driver.clone()?;
        if !self.out.is_empty() {
            return None;
        }
        let mut header = [0; MUX_HEADER_LEN];
        let max = data.len().min(TRANSMIT_BATCH);
        let n = match self.core.write_through(id, max, &mut header) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(err) => return Some(Err(err)),
        };
        let mut cx = Context::from_waker(&driver);
        let now = self.clock();
        // One record for the header and the data, not one ending where
        // the buffer the header started does.
        self.writer.reserve(header.len() + n, now);
        for piece in [&header[..], &data[..n]] {
            let mut taken = 0;
            while taken < piece.len() && self.out.is_empty() {
                match self.writer.poll_write_data(&mut cx, &piece[taken..], now) {
                    Poll::Ready(Ok(k)) => {
                        self.need_flush = true;
                        self.unflushed += k;
                        taken += k;
                    }
                    Poll::Ready(Err(err)) => {
                        self.core.handle_transport_error(err);
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
    /// stream held its flush for the readers woken ahead of it
    /// ([`Shared::transmit_now`]). The driver then yields once, so that the
    /// tasks queued before it run and write, and flushes on its next turn:
    /// a held flush waits one pass of the runtime's queue, never more.
    /// With `new_round` (a poll's first turn, when the tasks woken on the
    /// last poll have had their chance to run), readers woken before no
    /// longer count.
    pub(crate) fn driver_may_flush(&mut self, new_round: bool) -> bool {
        if self.flush_hold == FlushHold::Held && self.need_flush && self.unflushed < FLUSH_HOLD_LIMIT {
            self.flush_hold = FlushHold::Yielded;
            return false;
        }
        self.flush_hold = FlushHold::None;
        if new_round {
            self.core.next_wake_round();
        }
        true
    }

    /// Whether the driver's turn, which woke readers, leaves the pongs and
    /// the ping it owes unflushed for them: their tasks run first, so what
    /// was read reaches them a write sooner, and what they write in reply
    /// takes the keepalive frames along. The driver yields once and flushes
    /// on its next turn, as for a stream's held flush. Only keepalive
    /// waits so: credit, resets and stream data are flushed as before, and
    /// a turn that finds bytes waiting for a flush already does not defer.
    pub(crate) fn defer_keepalive_to_woken_readers(&mut self) -> bool {
        let now = self.clock();
        let defer = self.flush_hold == FlushHold::None
            && !self.need_flush
            && self.core.woken_readers() > 0
            && self.core.only_keepalive_waiting(now);
        if defer {
            self.flush_hold = FlushHold::Yielded;
        }
        defer
    }

    /// The driver's turn: streams may write themselves again.
    pub(crate) fn refill_direct_budget(&mut self) {
        self.direct_budget = DIRECT_WRITE_BUDGET;
    }

    /// Writes the core's frames into the channel until it has none (after
    /// at most `batches` batches) or the channel pushes back; with `flush`,
    /// flushes once the queue drains. `cx` is the driver's. Returns the
    /// bytes taken from the core.
    pub(crate) fn transmit(
        &mut self,
        cx: &mut Context<'_>,
        batches: usize,
        flush: bool,
    ) -> Result<usize, Error> {
        let mut taken = 0;
        let mut written = 0;
        let now = self.clock();
        loop {
            if self.out.is_empty() {
                if taken == batches {
                    break;
                }
                taken += 1;
                written += self.core.poll_transmit(now, &mut self.batch, TRANSMIT_BATCH);
                self.out.extend(self.batch.drain(..));
                if self.out.is_empty() {
                    break;
                }
            }
            while let Some(front) = self.out.front_mut() {
                match self.writer.poll_write_data(cx, front, now) {
                    Poll::Ready(Ok(n)) => {
                        self.need_flush = true;
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
        if flush && self.need_flush && self.out.is_empty() {
            match self.writer.poll_flush(cx, now) {
                Poll::Ready(Ok(())) => {
                    self.need_flush = false;
                    self.unflushed = 0;
                }
                Poll::Ready(Err(err)) => return Err(err),
                Poll::Pending => {}
            }
        }
        Ok(written)
    }

    /// Takes the wakers the core's events call for.
    pub(crate) fn take_wakers(&mut self, wake: &mut WakeList) {
        while let Some(event) = self.core.poll_event() {
            match event {
                Event::Readable(id) => wake.extend(self.read_wakers.remove(&id)),
                Event::Writable(id) => wake.extend(self.write_wakers.remove(&id)),
                Event::Incoming => self.accept_waiters.take(wake),
                Event::StreamCredit => self.open_waiters.take(wake),
                Event::Lost => {
                    wake.extend(self.read_wakers.drain().map(|(_, w)| w));
                    wake.extend(self.write_wakers.drain().map(|(_, w)| w));
                    self.accept_waiters.take(wake);
                    self.open_waiters.take(wake);
                    self.closed_waiters.take(wake);
                }
            }
        }
    }
}

/// What every handle of one connection shares.
#[derive(Debug)]
pub(crate) struct Inner {
    state: Mutex<Shared>,
    pub(crate) agreement: Agreement,
    pub(crate) peer: Option<PeerId>,
    pub(crate) handshake_time: Duration,
    pub(crate) open_timeout: Option<Duration>,
    pub(crate) span: tracing::Span,
}

impl Inner {
    pub(crate) fn new(
        shared: Shared,
        agreement: Agreement,
        peer: Option<PeerId>,
        handshake_time: Duration,
        open_timeout: Option<Duration>,
        span: tracing::Span,
    ) -> Self {
        Self {
            state: Mutex::new(shared),
            agreement,
            peer,
            handshake_time,
            open_timeout,
            span,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves the core consistent enough
        // to fail every stream; keep going rather than poison everyone.
        let mut shared = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        shared.clock = None;
        shared
    }

    /// Runs `f` on the shared state, then wakes whoever its events concern
    /// and the driver if it has work.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        self.with_then(f, Shared::kick)
    }

    /// Runs `f`, which queues output, and sends that output now from this
    /// task if nothing waits ahead of it ([`Shared::transmit_now`]).
    pub(crate) fn with_output<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        self.with_then(f, |shared| shared.transmit_now(true))
    }

    /// As [`Inner::with_output`], but leaves the flush to a later flush of
    /// the caller's or to the driver's turn (data is sealed at once, and
    /// what the caller writes next joins its record).
    pub(crate) fn with_output_unflushed<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        self.with_then(f, |shared| shared.transmit_now(false))
    }

    fn with_then<R>(&self, f: impl FnOnce(&mut Shared) -> R, then: impl FnOnce(&mut Shared)) -> R {
        let mut wake = WakeList::default();
        let result = {
            let mut shared = self.lock();
            let result = f(&mut shared);
            then(&mut shared);
            shared.take_wakers(&mut wake);
            result
        };
        wake.wake_all();
        result
    }
}

/// Keeps the connection alive; the last one dropped closes it.
#[derive(Debug)]
pub(crate) struct Handle {
    pub(crate) inner: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Queued data still goes out; then the channel closes.
        self.inner.with(|shared| shared.core.abandon(now()));
    }
}
