//! The application's side of a connection: a cloneable [`Connection`]
//! handle and its state (the futures and streams that open and accept
//! are in [`waiting`](super::waiting)).

use std::{
    future::Future,
    net::SocketAddr,
    sync::{Arc, Weak},
    task::{Context, Poll},
    time::Duration,
};

use super::{
    shared::{Handle, Inner},
    stats::ConnectionStats,
    stream::Stream,
    waiting::{self, IncomingStreams, Open},
};
use crate::{
    clock::now,
    error::{CloseCode, Error},
    handshake::{Agreement, EarlyData, PeerId},
};

/// A multiplexed connection: many [`Stream`]s over one
/// [`Channel`](crate::record::Channel).
///
/// Cloneable; every clone (and every stream) keeps the connection alive,
/// and dropping the last one closes it after sending what is queued (a
/// [`WeakConnection`] does not keep it alive). One driver task per
/// connection, spawned on the current tokio runtime, reads the channel,
/// unless one stream's task alone waits on the connection: that task then
/// reads for itself, without a hand-off between tasks
/// ([`ConnectionStats::records_read_by_streams`] counts how often). Streams
/// write to the channel themselves when nothing is queued ahead of them.
///
/// Its state can be asked without awaiting, cheaply enough for every pool
/// checkout: [`is_closed`](Self::is_closed) and
/// [`close_reason`](Self::close_reason), [`is_going_away`](Self::is_going_away),
/// [`available_streams`](Self::available_streams); and
/// [`try_open`](Self::try_open) and [`poll_open`](Self::poll_open) open a
/// stream without waiting, or reserve one from a `poll_ready`.
///
/// A connection is what the whole stack yields, with
/// [`MultiplexLayer`](crate::MultiplexLayer) on top:
///
/// ```
/// # async fn example() -> Result<(), weft::Error> {
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use tower::ServiceBuilder;
/// use weft::{handshake::{HandshakeExt, Versions}, mux, transport::ExistingTransport, MultiplexLayer, NegotiateLayer, StreamLimitLayer};
///
/// let (a, b) = tokio::io::duplex(64 * 1024);
/// let stack = || ServiceBuilder::new()
///     .layer(MultiplexLayer::new(mux::Builder::new()))
///     .layer(StreamLimitLayer::new(10))
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(ExistingTransport::new());
/// let (mut dialer, mut acceptor) = (stack(), stack());
/// let (client, server) = tokio::try_join!(dialer.dial(a), acceptor.accept_transport(b))?;
/// assert_eq!(client.available_streams(), 10);
///
/// let mut stream = client.open().await?;
/// stream.write_all(b"hello").await?;
/// stream.shutdown().await?;
///
/// let mut incoming = server.accept().await?.expect("a stream");
/// let mut text = String::new();
/// incoming.read_to_string(&mut text).await?;
/// assert_eq!(text, "hello");
///
/// server.go_away();
/// assert!(server.is_going_away() && !server.is_closed());
/// # Ok(())
/// # }
/// # tokio::runtime::Runtime::new().unwrap().block_on(example()).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Connection {
    pub(super) handle: Arc<Handle>,
}

/// A handle that does not keep its [`Connection`] alive: for a watcher (a
/// pool's idle reaper, say) that must not stop the last user from closing
/// it.
#[derive(Debug, Clone)]
pub struct WeakConnection {
    handle: Weak<Handle>,
}

impl WeakConnection {
    /// The connection, if any strong handle (or stream) still holds it.
    pub fn upgrade(&self) -> Option<Connection> {
        self.handle.upgrade().map(|handle| Connection { handle })
    }
}

impl Connection {
    pub(super) fn inner(&self) -> &Arc<Inner> {
        &self.handle.inner
    }

    /// Opens a stream: waits while the peer's stream limit is reached (up
    /// to the open timeout, if one is set), never exceeding it. No round
    /// trip: the stream's first data goes out with its open frame.
    ///
    /// The future holds its own handle to the connection (it is `'static`),
    /// so it can be spawned or kept.
    pub fn open(&self) -> impl Future<Output = Result<Stream, Error>> + Send + 'static {
        Open::new(self.handle.clone())
    }

    /// The stream a dialer asked to open with its handshake
    /// ([`Handshake::early_stream`](crate::handshake::Handshake::early_stream)),
    /// its bytes written (in the first flight, if the peer accepted them
    /// as early data; right after the handshake otherwise): once, then
    /// `None`. [`Stream::is_early`] says which way its bytes went.
    pub fn take_early_stream(&self) -> Option<Stream> {
        let inner = self.inner();
        let (id, _) = inner
            .early_stream
            .filter(|_| inner.agreement.role() == crate::handshake::Role::Dialer)?;
        let taken = inner.early_taken.swap(true, std::sync::atomic::Ordering::AcqRel);
        (!taken).then(|| Stream::new(id, self.handle.clone()))
    }

    /// What became of early data (0-RTT) on this connection: none sent,
    /// accepted (the first stream answered in the first round trip), or
    /// refused (sent again after the handshake). The same on both ends.
    pub fn early_data(&self) -> EarlyData {
        self.inner().early_data
    }

    /// Whether a stream is open either way (a server at its connection
    /// cap closes idle connections first).
    pub(crate) fn has_open_streams(&self) -> bool {
        self.inner()
            .with(|shared| shared.core.streams_open_either_way() > 0)
    }

    /// Opens a stream if the peer's stream limit allows one now:
    /// `Ok(None)` if it does not (yet).
    pub fn try_open(&self) -> Result<Option<Stream>, Error> {
        let id = self.inner().with(|shared| {
            let now = shared.clock();
            shared.core.open(now)
        })?;
        Ok(id.map(|id| Stream::new(id, self.handle.clone())))
    }

    /// Opens a stream, or registers `cx` to be woken when one may be
    /// opened: for a caller reserving a stream in a `poll_ready`.
    pub fn poll_open(&self, cx: &mut Context<'_>) -> Poll<Result<Stream, Error>> {
        waiting::poll_open(&self.handle, cx)
    }

    /// The next stream the peer opens; `None` once the connection has
    /// closed gracefully, or is going away and every stream was accepted.
    pub async fn accept(&self) -> Result<Option<Stream>, Error> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next stream the peer opens ([`Connection::accept`]).
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<Result<Option<Stream>, Error>> {
        waiting::poll_accept(&self.handle, cx)
    }

    /// The streams the peer opens, as a [`futures::Stream`](futures_util::Stream)
    /// (for server loops written over streams of connections): it ends
    /// where [`accept`](Self::accept) returns `None`, after yielding the
    /// error, if the connection failed.
    pub fn incoming(&self) -> IncomingStreams {
        IncomingStreams::new(self.handle.clone())
    }

    /// Graceful shutdown: the peer may open no more streams (and learns the
    /// last one we take), streams in flight finish, then the connection
    /// closes; after the drain timeout it closes regardless.
    pub fn go_away(&self) {
        self.inner().with(|shared| shared.core.go_away(now()));
    }

    /// Closes now: every stream fails here with an error of
    /// [`ErrorKind::Closed`](crate::ErrorKind::Closed) (graceful,
    /// [`is_closed`](Error::is_closed), when `code` is
    /// [`CloseCode::NO_ERROR`]), and the peer gets our
    /// `code` and `reason` (at most 256 bytes).
    pub fn close(&self, code: CloseCode, reason: &str) {
        self.inner().with(|shared| shared.core.close(code, reason));
    }

    /// Waits until the connection has ended, and says why.
    pub async fn closed(&self) -> Error {
        std::future::poll_fn(|cx| {
            let mut shared = self.inner().lock();
            match shared.core.error().cloned() {
                Some(err) => Poll::Ready(err),
                None => {
                    shared.closed_waiters.register(cx.waker());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Whether the connection has ended, gracefully or not
    /// ([`close_reason`](Self::close_reason) says how).
    pub fn is_closed(&self) -> bool {
        self.inner().lock().core.error().is_some()
    }

    /// Why the connection ended, once it has: a graceful close
    /// ([`Error::is_closed`]) or the failure.
    pub fn close_reason(&self) -> Option<Error> {
        self.inner().lock().core.error().cloned()
    }

    /// Whether either side sent a go-away (or our stream ids ran out): no
    /// new streams here, while the ones in flight finish.
    pub fn is_going_away(&self) -> bool {
        self.inner().lock().core.is_going_away()
    }

    /// How many streams may be opened now without waiting: the stream
    /// credit left from the peer's limit (0 while going away or closed).
    pub fn available_streams(&self) -> u32 {
        self.inner().lock().core.available_streams()
    }

    /// Whether `other` is a handle to this same connection.
    pub fn same_connection(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.handle, &other.handle)
    }

    /// A handle that does not keep the connection alive.
    pub fn downgrade(&self) -> WeakConnection {
        WeakConnection {
            handle: Arc::downgrade(&self.handle),
        }
    }

    /// What the handshake agreed.
    pub fn agreement(&self) -> &Agreement {
        &self.inner().agreement
    }

    /// The agreed protocol version.
    pub fn version(&self) -> u32 {
        self.agreement().version()
    }

    /// The peer's verified identity: `None` without an encryption layer,
    /// and with the Plaintext suite (the handshake proved the identity, but
    /// the records after it are not authenticated, so anyone on the path
    /// could have written what is read; [`agreement`](Self::agreement)
    /// says which suite was agreed).
    pub fn peer(&self) -> Option<&PeerId> {
        self.inner().peer.as_ref()
    }

    /// How long the handshake took, as this side saw it.
    pub fn handshake_time(&self) -> Duration {
        self.inner().handshake_time
    }

    /// The peer's address, where the stack knew it: the address a dialer
    /// dialed (not a host name's), the address an acceptor's listener
    /// gave or its `TcpStream` has; `None` over other transports.
    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.inner().remote_addr.get().copied()
    }

    /// Whether `other` is a handle to this same connection.
    pub fn same_as(&self, other: &Connection) -> bool {
        Arc::ptr_eq(self.inner(), other.inner())
    }

    /// This process's number for the connection (unique among the
    /// process's connections; the live view names connections by it).
    pub fn id(&self) -> u64 {
        self.inner().id
    }

    /// How long ago the connection was built, after its handshake.
    pub fn age(&self) -> Duration {
        self.inner().opened_at.elapsed()
    }

    /// Records the peer's address (once; by the stack that built it).
    pub(crate) fn set_remote_addr(&self, addr: Option<SocketAddr>) {
        if let Some(addr) = addr {
            let _ = self.inner().remote_addr.set(addr);
        }
    }

    /// A snapshot of the connection's counters.
    pub fn stats(&self) -> ConnectionStats {
        self.inner().lock().stats()
    }
}
