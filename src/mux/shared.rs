//! What a connection's handles and its driver share, behind one lock: the
//! sans-IO core, the wakers of whoever waits, the [`Arbiter`] (who reads,
//! who writes, when to flush) and the wire that obeys it (the channel's
//! writing half, [`Wire`]).
//!
//! The reading half is not behind this lock: it has one of its own, held
//! by whoever reads ([`super::reading`]): the driver, or the one stream
//! waiting on the connection. Writing needs no hand-off to the driver
//! either: the task that queued output sends it itself when nothing waits
//! ahead of it ([`Shared::transmit_now`]), in the order the core's
//! scheduler gives.

use std::{
    sync::{Arc, Mutex},
    task::{Context, Waker},
    time::{Duration, Instant},
};

use super::{
    arbiter::Arbiter,
    core::{Event, Multiplexer},
    id_map::IdMap,
    reading::{ReadLease, ReadSide},
    wake_list::WakeList,
    wire::Wire,
};
use crate::{
    clock::now,
    error::Error,
    handshake::{Agreement, PeerId},
    record::ChannelWriter,
    sync::{self, Locked},
};

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

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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
    /// Who the transport wakes when records arrive ([`super::reading`]).
    pub(crate) lease: Arc<ReadLease>,
    /// Who reads, who writes and when to flush.
    pub(crate) arbiter: Arbiter,
    pub(crate) wire: Wire,
    /// The time, read once per hold of the lock ([`Shared::clock`]).
    clock: Option<Instant>,
    /// What the reading half counted, as of the driver's last read.
    pub(crate) records_received: u64,
    /// Records read by a stream's task, the read lent to it.
    pub(crate) records_read_by_streams: u64,
    /// Key updates the reading half opened, as of the driver's last read.
    pub(crate) key_updates_received: u64,
    pub(crate) read_buffers: usize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("core", &self.core)
            .field("pushed_back", &self.wire.pushed_back())
            .field("arbiter", &self.arbiter)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The connection's counts ([`Connection::stats`](super::Connection::stats),
    /// and its observer's reports).
    pub(crate) fn stats(&self) -> super::ConnectionStats {
        let core = self.core.stats();
        let ((ours, theirs), (max_ours, max_theirs)) = self.core.streams_counted();
        super::ConnectionStats {
            open_streams: self.core.streams_open_either_way(),
            streams_counted: ours,
            max_streams_counted: max_ours,
            peer_streams_counted: theirs,
            max_peer_streams_counted: max_theirs,
            streams_opened: core.streams_opened,
            streams_accepted: core.streams_accepted,
            bytes_sent: core.bytes_sent,
            bytes_received: core.bytes_received,
            frames_sent: core.frames_sent,
            frames_received: core.frames_received,
            records_sent: self.wire.records_sent().0,
            records_received: self.records_received,
            records_read_by_streams: self.records_read_by_streams,
            key_updates_sent: self.wire.key_updates_sent(),
            key_updates_received: self.key_updates_received,
            buffered: self.core.buffered(),
            recv_window: self.core.connection_windows().0,
            send_credit: self.core.connection_windows().1,
            queued: self.core.queued(),
            pinned: self.core.pinned(),
            rtt: self.core.rtt(),
            io_buffers: self.read_buffers + self.wire.buffer_capacity(),
        }
    }

    pub(crate) fn new(core: Multiplexer, writer: ChannelWriter) -> Self {
        Self {
            core,
            read_wakers: IdMap::default(),
            write_wakers: IdMap::default(),
            open_waiters: Waiters::default(),
            accept_waiters: Waiters::default(),
            closed_waiters: Waiters::default(),
            driver: None,
            lease: Arc::default(),
            arbiter: Arbiter::default(),
            wire: Wire::new(writer),
            clock: None,
            records_received: 0,
            records_read_by_streams: 0,
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

    /// Sends what the core has now from the caller's task, if the arbiter
    /// lets it ([`Wire::send_from_task`]), and with `flush` flushes it;
    /// otherwise wakes the driver, which flushes on its turn, once the
    /// caller's task yields: so what a task writes in one go (data, then
    /// its end) leaves in one record.
    pub(crate) fn transmit_now(&mut self, flush: bool) {
        let Some(driver) = self.driver.clone() else {
            return;
        };
        let now = self.clock();
        if self
            .wire
            .send_from_task(&mut self.core, &mut self.arbiter, &driver, now, flush)
        {
            driver.wake_by_ref();
        } else {
            self.kick();
        }
    }

    /// Writes stream `id`'s data straight into the channel if the core
    /// lets it through ([`Wire::write_through`]): the bytes taken, or
    /// `None` when the data must be queued instead.
    pub(crate) fn write_through(&mut self, id: u32, data: &[u8]) -> Option<Result<usize, Error>> {
        let driver = self.driver.clone()?;
        let now = self.clock();
        self.wire
            .write_through(&mut self.core, &mut self.arbiter, &driver, now, id, data)
    }

    /// The driver's write ([`Wire::transmit`]).
    pub(crate) fn transmit(
        &mut self,
        cx: &mut Context<'_>,
        batches: usize,
        flush: bool,
    ) -> Result<usize, Error> {
        let now = self.clock();
        self.wire
            .transmit(&mut self.core, &mut self.arbiter, cx, now, batches, flush)
    }

    /// Whether the driver's turn may flush ([`Arbiter::driver_may_flush`]).
    /// With `new_round` (a poll's first turn, when the tasks woken on the
    /// last poll have had their chance to run), readers woken before no
    /// longer count.
    pub(crate) fn driver_may_flush(&mut self, new_round: bool) -> bool {
        let flush = self.arbiter.driver_may_flush();
        if flush && new_round {
            self.core.next_wake_round();
        }
        flush
    }

    /// Whether the driver's turn leaves keepalive frames for the readers it
    /// woke ([`Arbiter::defer_keepalive`]).
    pub(crate) fn defer_keepalive_to_woken_readers(&mut self) -> bool {
        let now = self.clock();
        let core = &self.core;
        self.arbiter
            .defer_keepalive(core.woken_readers(), || core.only_keepalive_waiting(now))
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
                    self.take_back_read();
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
/// The next connection's [`Inner::id`].
static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[derive(Debug)]
pub(crate) struct Inner {
    state: Mutex<Shared>,
    /// The channel's reading half, held by whoever reads it; `None` once
    /// the driver has ended.
    pub(crate) read_side: Mutex<Option<ReadSide>>,
    /// The waker the transport is polled with, and whom it wakes.
    pub(crate) lease: Arc<ReadLease>,
    pub(crate) read_waker: Waker,
    pub(crate) agreement: Agreement,
    pub(crate) peer: Option<PeerId>,
    pub(crate) handshake_time: Duration,
    pub(crate) open_timeout: Option<Duration>,
    pub(crate) span: tracing::Span,
    /// This process's number for the connection (the live view names
    /// connections by it).
    pub(crate) id: u64,
    /// When the connection was built, after its handshake.
    pub(crate) opened_at: std::time::Instant,
    /// The peer's address, where the stack knew it
    /// ([`Connection::remote_addr`](super::Connection::remote_addr)).
    pub(crate) remote_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The stream whose first bytes were early data (version 3): ours,
    /// opened before the driver started, or the peer's first, whose bytes
    /// we accepted; with whether they were accepted early.
    pub(crate) early_stream: Option<(u32, bool)>,
    /// What became of early data on the connection.
    pub(crate) early_data: crate::handshake::EarlyData,
    /// Whether the dialer's early stream was handed out yet.
    pub(crate) early_taken: std::sync::atomic::AtomicBool,
}

impl Inner {
    pub(crate) fn new(
        shared: Shared,
        read_side: ReadSide,
        agreement: Agreement,
        peer: Option<PeerId>,
        handshake_time: Duration,
        open_timeout: Option<Duration>,
        span: tracing::Span,
    ) -> Self {
        let lease = shared.lease.clone();
        Self {
            state: Mutex::new(shared),
            read_side: Mutex::new(Some(read_side)),
            read_waker: Waker::from(lease.clone()),
            lease,
            agreement,
            peer,
            handshake_time,
            open_timeout,
            span,
            id: NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            opened_at: std::time::Instant::now(),
            remote_addr: std::sync::OnceLock::new(),
            early_stream: None,
            early_data: crate::handshake::EarlyData::None,
            early_taken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> Locked<'_, Shared> {
        // A panic while holding the lock leaves the core consistent enough
        // to fail every stream; keep going rather than poison everyone.
        let mut shared = sync::lock(&self.state);
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

    pub(crate) fn with_then<R>(&self, f: impl FnOnce(&mut Shared) -> R, then: impl FnOnce(&mut Shared)) -> R {
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
