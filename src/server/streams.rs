//! The server of raw streams, for a protocol of your own on each stream:
//! the front the HTTP and RPC servers share, with a stream handler.

use std::{
    fmt,
    future::{Future, IntoFuture},
    io,
    pin::Pin,
};

use super::{
    accept::Front,
    connection::Opened,
    settings::{settings_methods, Settings},
};
use crate::{mux::Stream, stack::Acceptor, transport::Listener};

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
/// weft::server::serve(listener, weft::acceptor(Identity::generate()), |mut stream: weft::mux::Stream| async move {
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
        settings: Settings::default(),
    }
}

/// A stream server [`serve`] set up: await it, or run it until a signal.
pub struct Serve<L, A, H> {
    listener: L,
    acceptor: A,
    handler: H,
    settings: Settings,
}

impl<L, A, H> Serve<L, A, H> {
    settings_methods!(settings);
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
            settings,
        } = self;
        let front = Front {
            name: "server::serve",
            listener,
            acceptor,
            settings,
            handler: move |opened: Opened| handler(opened.stream),
        };
        super::accept::serve(front, signal)
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
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
