//! A server of raw streams: the loop `weft::http::serve` and the RPC
//! server run, for a protocol of your own on each stream.

use std::{
    fmt,
    future::{Future, IntoFuture},
    io,
    pin::Pin,
    time::Duration,
};

use super::{
    serve::{serve_streams, ConnectionLimits},
    Stream,
};
use crate::{stack::Acceptor, transport::Listener};

/// How long streams in flight may take to finish after a graceful
/// shutdown starts, by default.
const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves streams: every connection `listener` accepts goes through
/// `acceptor`, and every stream its peer opens goes to `handler`, each in
/// a task of its own, until the listener fails (or ends, for
/// [`Incoming`](crate::transport::Incoming)). A graceful shutdown
/// ([`with_graceful_shutdown`](Serve::with_graceful_shutdown)) stops
/// accepting, sends every connection a go-away, and lets the streams in
/// flight finish. Connections past the limits are refused before their
/// handshake, as the HTTP and RPC servers do.
///
/// ```no_run
/// use tokio::{io::{AsyncReadExt, AsyncWriteExt}, net::TcpListener};
/// use weft::Identity;
///
/// # async fn example() -> std::io::Result<()> {
/// let listener = TcpListener::bind("127.0.0.1:7000").await?;
/// // Each stream: read the request to its end, answer, finish.
/// weft::mux::serve(listener, weft::acceptor(Identity::generate()), |mut stream: weft::mux::Stream| async move {
///     let mut request = Vec::new();
///     if stream.read_to_end(&mut request).await.is_ok() {
///         let _ = stream.write_all(&request).await;
///         let _ = stream.shutdown().await;
///     }
/// })
/// .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap() })
/// .await
/// # }
/// ```
pub fn serve<L, A, H, F>(listener: L, acceptor: A, handler: H) -> Serve<L, A, H>
where
    L: Listener,
    A: Acceptor<L::Io>,
    H: Fn(Stream) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    Serve {
        listener,
        acceptor,
        handler,
        drain_timeout: Some(DEFAULT_DRAIN_TIMEOUT),
        limits: ConnectionLimits::default(),
    }
}

/// A stream server [`serve`] set up: await it, or run it until a signal.
pub struct Serve<L, A, H> {
    listener: L,
    acceptor: A,
    handler: H,
    drain_timeout: Option<Duration>,
    limits: ConnectionLimits,
}

impl<L, A, H> Serve<L, A, H> {
    /// Connections held at once, handshakes included (at least 1; default
    /// 10,000). At the cap a newcomer is not simply refused: if its
    /// network (an IPv4 /24, an IPv6 /48) holds at least two fewer than
    /// the network holding the most, that network's oldest idle connection
    /// (no open stream) is closed for it; otherwise the oldest handshake
    /// pending half a second or more gives way. Only when nothing may give
    /// way is it refused before its handshake: the peer's handshake fails
    /// with an unauthenticated close, `EXCESSIVE_LOAD`, saying why.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.limits.set_max(n);
        self
    }

    /// Connections held at once from one source address, an IPv4 address
    /// or an IPv6 /64 (at least 1; default 256): at it, the source's own
    /// oldest idle connection (or a handshake of its pending half a
    /// second) is closed for its newcomer, and otherwise the newcomer is
    /// refused as past [`max_connections`](Self::max_connections).
    pub fn max_connections_per_address(mut self, n: usize) -> Self {
        self.limits.set_per_address(n);
        self
    }

    /// Closes a connection that has had no stream for `idle` (default
    /// `None`: never), gracefully: a go-away (a stream the peer opens
    /// meanwhile is refused unprocessed, so it opens it again
    /// elsewhere), then the close. gRPC's `MaxConnectionIdle`; the peer's
    /// pings do not count as use.
    pub fn close_idle_after(mut self, idle: Option<Duration>) -> Self {
        self.limits.set_close_idle_after(idle);
        self
    }

    /// How long streams in flight may take to finish once a graceful
    /// shutdown starts (default 30 s), or `None` to wait for them however
    /// long they take; past it, their connections close.
    pub fn drain_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.drain_timeout = timeout;
        self
    }
}

impl<L, A, H, F> Serve<L, A, H>
where
    L: Listener,
    A: Acceptor<L::Io>,
    H: Fn(Stream) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    /// Runs until `signal` completes, then shuts down gracefully: no new
    /// connections, a go-away on every connection (the peer's pool sends
    /// new streams elsewhere), and the streams in flight finish (within
    /// the drain timeout); then the future completes.
    pub fn with_graceful_shutdown<S>(self, signal: S) -> impl Future<Output = io::Result<()>> + Send
    where
        S: Future<Output = ()> + Send + 'static,
    {
        let Serve {
            listener,
            acceptor,
            handler,
            drain_timeout,
            limits,
        } = self;
        let handler = move |stream, _: &super::Connection, _, _| handler(stream);
        serve_streams(
            "mux::serve",
            listener,
            acceptor,
            signal,
            (drain_timeout, limits),
            handler,
        )
    }
}

impl<L, A, H, F> IntoFuture for Serve<L, A, H>
where
    L: Listener,
    A: Acceptor<L::Io>,
    H: Fn(Stream) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.with_graceful_shutdown(std::future::pending()))
    }
}

impl<L, A, H> fmt::Debug for Serve<L, A, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("drain_timeout", &self.drain_timeout)
            .finish_non_exhaustive()
    }
}
