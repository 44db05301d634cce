//! A pool of multiplexed connections: one per endpoint while the peer's
//! stream limit allows, more when it is reached.
//!
//! [`Pool`] runs over any dialer stack whose product is a
//! [`Connection`] (the stack with [`MultiplexLayer`](crate::MultiplexLayer)
//! on top, over [`TcpConnector`](crate::transport::TcpConnector)). It is a
//! `tower::Service<Endpoint>` that opens a stream on a pooled connection,
//! and [`Pool::connection`] hands out the connection itself.
//!
//! - **One connection per endpoint.** Streams share it until the peer's
//!   stream limit is reached; then another is dialed, up to
//!   [`max_connections_per_endpoint`](Builder::max_connections_per_endpoint)
//!   (4 by default), and past that a call waits for whichever connection frees a stream
//!   first. Opening a stream costs no round trip.
//! - **One dial at a time per endpoint.** Calls that find no stream while
//!   a dial is in flight wait for it; a failed dial fails all of them, with
//!   the cause, and the next dial waits out an exponential backoff with
//!   jitter ([`PoolError::Backoff`] until then).
//! - **Endings.** A connection that ended is dropped at the next look (its
//!   state is asked, no timer), and one that sent or received a go-away
//!   takes no new streams while its own drain; new ones go to a fresh
//!   connection. A stream the peer provably never processed (above the
//!   go-away's last id, or refused before it was accepted) is opened again
//!   once, on another connection, without the caller seeing it
//!   ([`PooledStream`]).
//! - **Bounds.** Connections without streams close after
//!   [`idle_timeout`](Builder::idle_timeout) (and past
//!   [`max_idle_connections`](Builder::max_idle_connections)); the pool holds at most
//!   [`max_connections`](Builder::max_connections) (closing the longest
//!   idle one to make room), and at most
//!   [`max_pending`](Builder::max_pending) calls wait at once:
//!   `poll_ready` waits for a turn, as tower's backpressure expects.
//!
//! ```
//! use std::net::SocketAddr;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use weft::{
//!     handshake::Versions, mux, pool::{Endpoint, Pool}, transport::TcpConnector, EncryptLayer,
//!     Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer
//! };
//!
//! # async fn example(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
//! let dialer = ServiceBuilder::new()
//!     .layer(MultiplexLayer::new(mux::Builder::new()))
//!     .layer(RecordSizeLayer::dynamic())
//!     .layer(EncryptLayer::new(Identity::generate()))
//!     .layer(NegotiateLayer::new(Versions::CURRENT))
//!     .service(TcpConnector::new());
//! let mut pool = Pool::builder().max_connections_per_endpoint(4).build(dialer);
//! let stream = pool.ready().await?.call(Endpoint::new(addr)).await?;
//! println!("stream to {} over {:?}", stream.endpoint(), stream.peer());
//! # Ok(())
//! # }
//! ```

mod builder;
mod checkout;
mod dial;
mod endpoint;
mod error;
mod observe;
mod state;
mod stream;

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{ready, Context, Poll},
};

use tokio::{
    sync::{Notify, OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tokio_util::sync::PollSemaphore;
use tower::Service;

pub use builder::Builder;
use builder::Config;
pub use endpoint::Endpoint;
pub use error::PoolError;
use observe::Reports;
pub use observe::{EndpointStats, Observer, PoolWatch};
pub use stream::PooledStream;

use checkout::{carry_out, open_pooled, Waiting};
pub(crate) use dial::connect;
use state::{State, Step};

use crate::{error::Error, handshake::Handshake, mux::Connection, transport::Target};

impl Builder {
    /// The pool over `dialer`: a stack whose product is a [`Connection`].
    pub fn build<S>(self, dialer: S) -> Pool<S> {
        let semaphore = Arc::new(Semaphore::new(self.config.max_pending));
        let mut state = State::default();
        state.reports = Reports::new(self.observer.clone());
        let state = Arc::new(Mutex::new(state));
        if let Some(observer) = &self.observer {
            observer.built(PoolWatch::new(&state));
        }
        Pool {
            shared: Arc::new(Shared {
                dialer,
                config: self.config,
                state,
                changed: Notify::new(),
                sweeping: std::sync::atomic::AtomicBool::new(false),
                reopen: std::sync::OnceLock::new(),
            }),
            semaphore: PollSemaphore::new(semaphore),
            permit: None,
        }
    }
}

/// Counters of a pool, cheap to take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Dials that made a connection.
    pub dials: u64,
    /// Dials that failed.
    pub dial_failures: u64,
    /// Streams opened.
    pub streams_opened: u64,
    /// Streams opened on a connection that had carried one before.
    pub reuses: u64,
    /// Streams opened again after the peer refused them unprocessed.
    pub retries: u64,
    /// Connections dropped because they had ended.
    pub evicted: u64,
    /// Connections closed for idleness (or to make room).
    pub idle_closed: u64,
    /// Connections pooled now.
    pub connections: usize,
    /// Dials in flight now.
    pub dialing: usize,
    /// Calls waiting now, for a dial or for a stream.
    pub waiters: usize,
    /// Streams the peer's stream limit counts on each pooled connection
    /// (`ConnectionStats::streams_counted`: never more than that limit,
    /// unlike the streams still held by handles).
    pub streams_per_connection: Vec<usize>,
}

struct Shared<S> {
    dialer: S,
    config: Config,
    /// (Read by a [`PoolWatch`] too.)
    state: Arc<Mutex<State>>,
    /// Fired when a dial ends or connections go: waiting calls look again.
    changed: Notify,
    sweeping: std::sync::atomic::AtomicBool,
    /// How its streams open again when refused, made at the first.
    reopen: std::sync::OnceLock<stream::Reopen>,
}

impl<S> Shared<S> {
    fn lock(&self) -> crate::sync::Locked<'_, State> {
        crate::sync::lock(&self.state)
    }
}

/// A pool of connections, one per endpoint while the peer's stream limit
/// allows (see the [module docs](self)). Cloning is cheap and shares the
/// pool.
pub struct Pool<S> {
    shared: Arc<Shared<S>>,
    semaphore: PollSemaphore,
    permit: Option<OwnedSemaphorePermit>,
}

impl<S> Clone for Pool<S> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            semaphore: self.semaphore.clone(),
            permit: None,
        }
    }
}

impl<S> fmt::Debug for Pool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("stats", &self.stats()).finish()
    }
}

impl Pool<()> {
    /// Settings for a pool.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<S> Pool<S> {
    /// A snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        self.shared.lock().stats()
    }

    /// Gives back the turn a `poll_ready` took, for a caller that will
    /// not `call` after all.
    pub fn release_turn(&mut self) {
        self.permit = None;
    }

    /// The connections pooled for `endpoint` now.
    pub fn connections_to(&self, endpoint: &Endpoint) -> Vec<Connection> {
        self.shared.lock().connections_to(endpoint)
    }
}

/// What a dialer must be: a stack that dials a [`Target`] (over
/// [`TcpConnector`](crate::transport::TcpConnector), which resolves host names with
/// its resolver) and yields a [`Connection`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a dialer stack: it must be a `Clone + Send + Sync` service of `Handshake<Target>` whose product is a `mux::Connection`",
    label = "not a dialer stack",
    note = "a dialer stack is `MultiplexLayer` (and the layers under it) around a connector: `weft::dialer(identity)`, or `ServiceBuilder::new().layer(MultiplexLayer::new(..)) .. .service(Connector::new())`; `BoxDialer::new(stack)` names any of them as one type"
)]
pub trait Dialer:
    Service<Handshake<Target>, Response = Connection, Error = Error, Future: Send> + Clone + Send + Sync + 'static
{
}

impl<S> Dialer for S where
    S: Service<Handshake<Target>, Response = Connection, Error = Error, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

impl<S: Dialer> Pool<S> {
    /// Opens a stream to `endpoint` on a pooled connection, dialing if
    /// none has room (waits for a turn if
    /// [`max_pending`](Builder::max_pending) calls are waiting already).
    pub async fn open(&self, endpoint: Endpoint) -> Result<PooledStream, PoolError> {
        let _turn = self.turn().await;
        let (stream, _) = open_pooled(self.shared.clone(), endpoint, None).await?;
        Ok(stream)
    }

    /// As [`open`](Self::open), in the turn a `poll_ready` took (taken
    /// from this handle), or in one it waits for if it took none; and
    /// with `first`, the whole content of the stream: if the pool dials for
    /// it, the dial carries it as the new connection's first stream, in the
    /// first flight as early data (0-RTT) when the dialer can. Whether
    /// `first` was sent, with the stream's end; if not, the caller sends
    /// it.
    pub(crate) fn open_in_turn(
        &mut self,
        endpoint: Endpoint,
        first: Option<bytes::Bytes>,
    ) -> impl Future<Output = Result<(PooledStream, bool), PoolError>> + Send + 'static
    where
        S: Dialer,
    {
        let turn = self.permit.take();
        let pool = self.clone();
        async move {
            // (Held until the stream is open.)
            let _turn = match turn {
                Some(turn) => turn,
                None => pool.turn().await,
            };
            open_pooled(pool.shared.clone(), endpoint, first).await
        }
    }

    /// A turn among the [`max_pending`](Builder::max_pending) calls that
    /// may wait at once.
    async fn turn(&self) -> OwnedSemaphorePermit {
        self.semaphore
            .clone_inner()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// A pooled connection to `endpoint` (one with stream credit left if
    /// there is one), dialing if there is none.
    pub async fn connection(&self, endpoint: &Endpoint) -> Result<Connection, PoolError> {
        let _turn = self.turn().await;
        let shared = &self.shared;
        let mut waiting = None;
        loop {
            let changed = shared.changed.notified();
            let step = shared
                .lock()
                .connection_step(endpoint, &shared.config, Instant::now());
            match step {
                Step::Connection(conn) => return Ok(conn),
                other => {
                    waiting.get_or_insert_with(|| Waiting::new(shared));
                    if let Some(result) = carry_out(shared, endpoint, other, changed).await {
                        result?;
                    }
                }
            }
        }
    }
}

impl<S: Dialer> Service<Endpoint> for Pool<S> {
    type Response = PooledStream;
    type Error = PoolError;
    type Future = Pin<Box<dyn Future<Output = Result<PooledStream, PoolError>> + Send>>;

    /// Waits for a turn among the [`max_pending`](Builder::max_pending)
    /// calls that may wait at once.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), PoolError>> {
        if self.permit.is_none() {
            let permit = ready!(self.semaphore.poll_acquire(cx)).expect("the semaphore is never closed");
            self.permit = Some(permit);
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, endpoint: Endpoint) -> Self::Future {
        let permit = self.permit.take().expect("poll_ready must be called first");
        let shared = self.shared.clone();
        Box::pin(async move {
            let opened = open_pooled(shared, endpoint, None).await;
            drop(permit);
            opened.map(|(stream, _)| stream)
        })
    }
}

#[cfg(test)]
mod tests;
