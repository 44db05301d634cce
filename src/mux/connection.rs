//! The tokio shell: a cloneable [`Connection`] handle, and one driver task
//! per connection that moves bytes between the channel and the core.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
    time::Duration,
};

use bytes::Bytes;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::Notify,
    time::{Instant, Sleep},
};
use tracing::Instrument;

use super::{
    config::{Builder, Params},
    core::{Event, Multiplexer},
    id_map::IdMap,
    stream::Stream,
};
use crate::{
    error::{CloseCode, Error},
    handshake::Agreement,
    handshake::PeerId,
    record::{Channel, ChannelStats, ABORT_FLUSH_TIMEOUT},
};

/// Bytes the driver takes from the core per batch before writing them.
const TRANSMIT_BATCH: usize = 256 * 1024;
/// Records the driver reads per turn before giving writes a chance.
const READS_PER_TURN: usize = 32;
/// Bytes the driver reads per poll before it yields, so that the streams'
/// tasks (woken when it yields) take the data while it is still in cache,
/// and the channel's read buffers are free again for reuse. Reading a
/// whole window per poll kept megabytes of records alive at once, which
/// cost a page fault per 4 KiB received (the freed blocks went back to the
/// kernel).
const READ_BUDGET: usize = 512 * 1024;

/// State shared by the handles and the driver, behind one mutex.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) core: Multiplexer,
    pub(crate) read_wakers: IdMap<Waker>,
    pub(crate) write_wakers: IdMap<Waker>,
    driver: Option<Waker>,
    channel_stats: ChannelStats,
    io_buffers: usize,
}

impl Shared {
    /// Wakes the driver if the core has something to send.
    pub(crate) fn kick(&mut self) {
        if self.core.wants_transmit(now()) || self.core.error().is_some() || self.core.close_due() {
            if let Some(driver) = &self.driver {
                driver.wake_by_ref();
            }
        }
    }

    /// Takes the wakers the core's events call for.
    fn take_wakers(&mut self, inner: &Inner, wake: &mut Vec<Waker>) {
        while let Some(event) = self.core.poll_event() {
            match event {
                Event::Readable(id) => wake.extend(self.read_wakers.remove(&id)),
                Event::Writable(id) => wake.extend(self.write_wakers.remove(&id)),
                Event::Incoming => inner.accept.notify_waiters(),
                Event::StreamCredit => inner.open.notify_waiters(),
                Event::Lost => {
                    wake.extend(self.read_wakers.drain().map(|(_, w)| w));
                    wake.extend(self.write_wakers.drain().map(|(_, w)| w));
                    inner.accept.notify_waiters();
                    inner.open.notify_waiters();
                    inner.closed.notify_waiters();
                }
            }
        }
    }
}

/// What every handle of one connection shares.
#[derive(Debug)]
pub(crate) struct Inner {
    state: Mutex<Shared>,
    accept: Notify,
    open: Notify,
    closed: Notify,
    agreement: Agreement,
    peer: Option<PeerId>,
    handshake_time: Duration,
    open_timeout: Option<Duration>,
    pub(crate) span: tracing::Span,
}

impl Inner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves the core consistent enough
        // to fail every stream; keep going rather than poison everyone.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `f` on the shared state, then wakes whoever its events concern
    /// and the driver if there is output.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut wake = Vec::new();
        let result = {
            let mut shared = self.lock();
            let result = f(&mut shared);
            shared.take_wakers(self, &mut wake);
            shared.kick();
            result
        };
        wake.into_iter().for_each(Waker::wake);
        result
    }

    pub(crate) fn peer(&self) -> Option<&PeerId> {
        self.peer.as_ref()
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

pub(crate) fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Counters of one connection, cheap to take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Streams in the table: open, or finished but still held.
    pub open_streams: usize,
    /// Streams we opened so far.
    pub streams_opened: u64,
    /// Streams we accepted so far.
    pub streams_accepted: u64,
    /// Stream payload bytes sent.
    pub bytes_sent: u64,
    /// Stream payload bytes received.
    pub bytes_received: u64,
    /// Mux frames sent.
    pub frames_sent: u64,
    /// Mux frames received.
    pub frames_received: u64,
    /// Records sealed (as of the driver's last turn).
    pub records_sent: u64,
    /// Records opened (as of the driver's last turn).
    pub records_received: u64,
    /// Received bytes the application has not read yet.
    pub buffered: u64,
    /// Smoothed round-trip time from pings, once measured.
    pub rtt: Option<Duration>,
    /// The channel's read and write buffer capacity (as of the driver's
    /// last turn): see [`Channel::buffer_capacity`].
    pub io_buffers: usize,
}

/// A multiplexed connection: many [`Stream`]s over one [`Channel`].
///
/// Cloneable; every clone (and every stream) keeps the connection alive,
/// and dropping the last one closes it after sending what is queued. One
/// driver task per connection, spawned on the current tokio runtime, does
/// all the I/O.
///
/// ```
/// # async fn example() -> Result<(), weft::Error> {
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use weft::{handshake::Versions, ExistingTransport, Connection, Handshake, HandshakeExt, NegotiateLayer, StreamLimitLayer};
/// use tower::ServiceBuilder;
///
/// let (a, b) = tokio::io::duplex(64 * 1024);
/// let stack = || ServiceBuilder::new()
///     .layer(StreamLimitLayer::new(10))
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(ExistingTransport::new());
/// let (mut dialer, mut acceptor) = (stack(), stack());
/// let (client, server) = tokio::try_join!(
///     dialer.handshake(Handshake::dial(a)),
///     acceptor.handshake(Handshake::accept(b)),
/// )?;
/// let (client, server) = (Connection::new(client), Connection::new(server));
///
/// let mut stream = client.open().await?;
/// stream.write_all(b"hello").await?;
/// stream.shutdown().await?;
///
/// let mut incoming = server.accept().await?.expect("a stream");
/// let mut text = String::new();
/// incoming.read_to_string(&mut text).await?;
/// assert_eq!(text, "hello");
/// # Ok(())
/// # }
/// # tokio::runtime::Runtime::new().unwrap().block_on(example()).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Connection {
    handle: Arc<Handle>,
}

impl Builder {
    /// Starts the connection over an established channel, spawning its
    /// driver task on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn build<IO>(&self, channel: Channel<IO>) -> Connection
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let agreement = channel.agreement().clone();
        let params = Params::new(&agreement, self);
        let span = tracing::debug_span!(
            "weft::connection",
            role = ?agreement.role(),
            peer = %channel.peer().map_or_else(|| "anonymous".to_string(), |p| p.to_string()),
            version = agreement.version(),
            suite = ?agreement.suite(),
        );
        let inner = Arc::new(Inner {
            state: Mutex::new(Shared {
                core: Multiplexer::new(params, now()),
                read_wakers: IdMap::default(),
                write_wakers: IdMap::default(),
                driver: None,
                channel_stats: channel.stats(),
                io_buffers: channel.buffer_capacity(),
            }),
            accept: Notify::new(),
            open: Notify::new(),
            closed: Notify::new(),
            agreement,
            peer: channel.peer().copied(),
            handshake_time: channel.handshake_time(),
            open_timeout: self.open_timeout,
            span: span.clone(),
        });
        let driver = Driver {
            inner: inner.clone(),
            channel,
            out: VecDeque::new(),
            batch: Vec::new(),
            inbox: Vec::new(),
            need_flush: false,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            phase: Phase::Running,
        };
        tokio::spawn(driver.instrument(span));
        Connection {
            handle: Arc::new(Handle { inner }),
        }
    }
}

impl Connection {
    /// A connection with the default settings over an established channel.
    /// See [`Builder::build`].
    pub fn new<IO>(channel: Channel<IO>) -> Connection
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        Builder::new().build(channel)
    }

    /// Settings beyond the defaults.
    pub fn builder() -> Builder {
        Builder::new()
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.handle.inner
    }

    /// Opens a stream. Waits while the peer's stream limit is reached (up
    /// to the open timeout, if one is set); never exceeds it. No round trip:
    /// the stream's first data goes out with its open frame.
    pub async fn open(&self) -> Result<Stream, Error> {
        let inner = self.inner();
        let wait = async {
            loop {
                let notified = inner.open.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Some(id) = inner.with(|shared| shared.core.open(now()))? {
                    return Ok::<u32, Error>(id);
                }
                notified.await;
            }
        };
        let id = match inner.open_timeout {
            Some(limit) => tokio::time::timeout(limit, wait)
                .await
                .map_err(|_| Error::OpenTimeout(limit))??,
            None => wait.await?,
        };
        Ok(Stream::new(id, self.handle.clone()))
    }

    /// The next stream the peer opens; `None` once the connection has
    /// closed cleanly or is going away and every stream was accepted.
    pub async fn accept(&self) -> Result<Option<Stream>, Error> {
        let inner = self.inner();
        loop {
            let notified = inner.accept.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (next, finished) = inner.with(|shared| (shared.core.accept(), shared.core.accept_finished()));
            if let Some(id) = next? {
                return Ok(Some(Stream::new(id, self.handle.clone())));
            }
            if finished {
                return Ok(None);
            }
            notified.await;
        }
    }

    /// Graceful shutdown: the peer may open no more streams (and learns the
    /// last one we take), streams in flight finish, then the connection
    /// closes; after the drain timeout it closes regardless.
    pub fn go_away(&self) {
        self.inner().with(|shared| shared.core.go_away(now()));
    }

    /// Closes now: every stream fails with [`Error::Closed`] here, and the
    /// peer gets our `code` and `reason` (at most 256 bytes).
    pub fn close(&self, code: CloseCode, reason: &str) {
        self.inner().with(|shared| shared.core.close(code, reason));
    }

    /// Waits until the connection has ended, and says why.
    pub async fn closed(&self) -> Error {
        let inner = self.inner();
        loop {
            let notified = inner.closed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(err) = inner.lock().core.error().cloned() {
                return err;
            }
            notified.await;
        }
    }

    /// What the handshake agreed.
    pub fn agreement(&self) -> &Agreement {
        &self.inner().agreement
    }

    /// How long the handshake took, as this side saw it.
    pub fn handshake_time(&self) -> Duration {
        self.inner().handshake_time
    }

    /// The agreed protocol version.
    pub fn version(&self) -> u32 {
        self.agreement().version()
    }

    /// The peer's verified identity (`None` on a plaintext connection).
    pub fn peer(&self) -> Option<&PeerId> {
        self.inner().peer()
    }

    /// A snapshot of the connection's counters.
    pub fn stats(&self) -> ConnectionStats {
        let shared = self.inner().lock();
        let core = shared.core.stats();
        ConnectionStats {
            open_streams: shared.core.open_streams(),
            streams_opened: core.streams_opened,
            streams_accepted: core.streams_accepted,
            bytes_sent: core.bytes_sent,
            bytes_received: core.bytes_received,
            frames_sent: core.frames_sent,
            frames_received: core.frames_received,
            records_sent: shared.channel_stats.records_sent,
            records_received: shared.channel_stats.records_received,
            buffered: shared.core.buffered(),
            rtt: shared.core.rtt(),
            io_buffers: shared.io_buffers,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// Sending what is left and the close record, until a deadline.
    Closing {
        deadline: Instant,
    },
    Done,
}

/// The one task per connection: reads records into the core, writes its
/// frames into the channel, runs its timers.
struct Driver<IO> {
    inner: Arc<Inner>,
    channel: Channel<IO>,
    /// Frames taken from the core, not yet in the channel.
    out: VecDeque<Bytes>,
    batch: Vec<Bytes>,
    /// Records read this turn, handed to the core under one lock.
    inbox: Vec<Bytes>,
    need_flush: bool,
    sleep: Pin<Box<Sleep>>,
    phase: Phase,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Driver<IO> {
    /// Reads what the channel has (up to a turn's worth) into the core.
    /// Returns the bytes read, and whether the channel may have more (it
    /// stopped at the turn's limit, not at `Pending` or the end).
    fn poll_read(&mut self, cx: &mut Context<'_>, wake: &mut Vec<Waker>) -> (usize, bool) {
        let mut end = None;
        let mut bytes_read = 0;
        let mut more = true;
        while self.inbox.len() < READS_PER_TURN {
            match self.channel.poll_recv(cx) {
                Poll::Ready(Ok(Some(bytes))) => {
                    bytes_read += bytes.len();
                    self.inbox.push(bytes);
                }
                Poll::Ready(Ok(None)) => {
                    end = Some(None);
                    more = false;
                    break;
                }
                Poll::Ready(Err(err)) => {
                    end = Some(Some(err));
                    more = false;
                    break;
                }
                Poll::Pending => {
                    more = false;
                    break;
                }
            }
        }
        if self.inbox.is_empty() && end.is_none() {
            return (0, false);
        }
        let now = now();
        let mut shared = self.inner.lock();
        for chunk in self.inbox.drain(..) {
            shared.core.handle_input(chunk, now);
        }
        match end {
            Some(None) => shared.core.handle_eof(),
            Some(Some(err)) => shared.core.handle_transport_error(err),
            None => {}
        }
        shared.channel_stats = self.channel.stats();
        shared.io_buffers = self.channel.buffer_capacity();
        shared.take_wakers(&self.inner, wake);
        (bytes_read, more)
    }

    /// Writes the core's frames into the channel until it has none or the
    /// channel pushes back; flushes once the queue drains.
    fn poll_write(&mut self, cx: &mut Context<'_>, wake: &mut Vec<Waker>) -> Result<(), Error> {
        loop {
            if self.out.is_empty() {
                let mut shared = self.inner.lock();
                shared.core.poll_transmit(now(), &mut self.batch, TRANSMIT_BATCH);
                shared.channel_stats = self.channel.stats();
                shared.take_wakers(&self.inner, wake);
                drop(shared);
                self.out.extend(self.batch.drain(..));
                if self.out.is_empty() {
                    break;
                }
            }
            while let Some(front) = self.out.front_mut() {
                match self.channel.poll_write_data(cx, front) {
                    Poll::Ready(Ok(n)) => {
                        self.need_flush = true;
                        if n == front.len() {
                            self.out.pop_front();
                        } else {
                            bytes::Buf::advance(front, n);
                        }
                    }
                    Poll::Ready(Err(err)) => return Err(err),
                    Poll::Pending => return Ok(()),
                }
            }
        }
        if self.need_flush {
            match self.channel.poll_flush_records(cx) {
                Poll::Ready(Ok(())) => self.need_flush = false,
                Poll::Ready(Err(err)) => return Err(err),
                Poll::Pending => {}
            }
        }
        Ok(())
    }

    fn poll_closing(&mut self, cx: &mut Context<'_>, wake: &mut Vec<Waker>) -> Poll<()> {
        if let Phase::Running = self.phase {
            let close = self.inner.lock().core.poll_close();
            let Some((code, reason)) = close else {
                // A transport failure: nothing can be sent any more.
                self.phase = Phase::Done;
                return Poll::Ready(());
            };
            self.channel.set_close(code, reason);
            let deadline = Instant::now() + ABORT_FLUSH_TIMEOUT;
            self.sleep.as_mut().reset(deadline);
            self.phase = Phase::Closing { deadline };
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.phase = Phase::Done;
            return Poll::Ready(());
        }
        match self.poll_write(cx, wake) {
            Err(_) => {
                self.phase = Phase::Done;
                return Poll::Ready(());
            }
            Ok(()) if !self.out.is_empty() => return Poll::Pending,
            Ok(()) => {}
        }
        match self.channel.poll_close(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                self.phase = Phase::Done;
                Poll::Ready(())
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Future for Driver<IO> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut wake = Vec::new();
        let result = this.poll_inner(cx, &mut wake);
        wake.into_iter().for_each(Waker::wake);
        result
    }
}

impl<IO> Drop for Driver<IO> {
    /// Whatever ends the driver (its end, a panic, its runtime shutting
    /// down) ends every stream: nobody waits on a connection that is gone.
    fn drop(&mut self) {
        let mut wake = Vec::new();
        {
            let mut shared = self.inner.lock();
            shared.core.handle_transport_error(Error::Closed);
            shared.driver = None;
            shared.take_wakers(&self.inner, &mut wake);
        }
        wake.into_iter().for_each(Waker::wake);
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Driver<IO> {
    fn poll_inner(&mut self, cx: &mut Context<'_>, wake: &mut Vec<Waker>) -> Poll<()> {
        {
            let mut shared = self.inner.lock();
            match &shared.driver {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => shared.driver = Some(cx.waker().clone()),
            }
        }
        if self.phase != Phase::Running {
            return self.poll_closing(cx, wake);
        }
        // Bounded, so one busy connection cannot starve the runtime, and
        // the streams take what was read soon (see READ_BUDGET).
        let mut budget = READ_BUDGET;
        for _ in 0..64 {
            let (bytes_read, more_to_read) = self.poll_read(cx, wake);
            budget = budget.saturating_sub(bytes_read);
            if self.inner.lock().core.error().is_some() {
                return self.poll_closing(cx, wake);
            }
            // Writes come after reads, so what a read calls for (credit,
            // a pong) goes out in the same turn. The core is then drained
            // or the channel is pushing back: another turn would find
            // nothing to write.
            if let Err(err) = self.poll_write(cx, wake) {
                let mut shared = self.inner.lock();
                shared.core.handle_transport_error(err);
                shared.take_wakers(&self.inner, wake);
                drop(shared);
                return self.poll_closing(cx, wake);
            }
            let mut timer = false;
            let deadline = self.inner.lock().core.poll_timeout();
            if let Some(deadline) = deadline {
                let deadline = Instant::from_std(deadline);
                if self.sleep.deadline() != deadline {
                    self.sleep.as_mut().reset(deadline);
                }
                if self.sleep.as_mut().poll(cx).is_ready() {
                    let mut shared = self.inner.lock();
                    shared.core.handle_timeout(now());
                    shared.take_wakers(&self.inner, wake);
                    // A due ping needs another turn, unless the channel is
                    // pushing back (its wake-up brings us back).
                    timer = shared.core.error().is_some()
                        || self.out.is_empty() && shared.core.wants_transmit(now());
                }
            }
            let close = {
                let mut shared = self.inner.lock();
                shared.core.poll_close().is_some() || shared.core.error().is_some()
            };
            if close {
                return self.poll_closing(cx, wake);
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
