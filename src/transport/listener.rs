//! Where a server's connections come from: a TCP listener, a Unix domain
//! socket's, or any stream of transports.

use std::{future::Future, io, net::SocketAddr, pin::Pin};

use futures_util::{Stream, StreamExt};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
};

/// What a server accepts connections from: [`http::serve`](crate::http::serve)
/// and the RPC server's `serve` take any of these, with an acceptor stack
/// over its [`Io`](Self::Io). Implemented for tokio's `TcpListener`, its
/// `UnixListener` (on Unix), and [`Incoming`] (any stream of transports,
/// as tonic's `serve_with_incoming`).
pub trait Listener: Send + 'static {
    /// A connection's transport.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// The next connection, with the peer's IP address where there is one
    /// (the server's limits per source address count it); `None` when no
    /// more will come: the server then runs until the connections it has
    /// end (or its shutdown signal comes), and returns.
    /// An error of kind `InvalidInput` or `NotConnected` ends the server
    /// with it; others (out of file descriptors, a connection reset before
    /// it was accepted) are retried after a moment.
    fn accept(&mut self) -> impl Future<Output = Option<io::Result<(Self::Io, Option<SocketAddr>)>>> + Send;
}

impl Listener for TcpListener {
    type Io = TcpStream;

    async fn accept(&mut self) -> Option<io::Result<(TcpStream, Option<SocketAddr>)>> {
        Some(
            TcpListener::accept(self)
                .await
                .map(|(tcp, addr)| (tcp, Some(addr))),
        )
    }
}

#[cfg(unix)]
impl Listener for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;

    async fn accept(&mut self) -> Option<io::Result<(tokio::net::UnixStream, Option<SocketAddr>)>> {
        Some(
            tokio::net::UnixListener::accept(self)
                .await
                .map(|(unix, _)| (unix, None)),
        )
    }
}

/// A [`Listener`] of the transports a stream yields (connections from
/// another library, a TLS terminator, tests' pipes): once the stream ends,
/// the server returns when the connections it gave have ended.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use weft::transport::{Incoming, Listener};
///
/// let (pipe, _other_end) = tokio::io::duplex(4096);
/// let mut incoming = Incoming::new(futures_util::stream::iter([Ok(pipe)]));
/// assert!(incoming.accept().await.is_some());
/// assert!(incoming.accept().await.is_none());
/// # }
/// ```
pub struct Incoming<S> {
    stream: Pin<Box<S>>,
}

impl<S> std::fmt::Debug for Incoming<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming").finish_non_exhaustive()
    }
}

impl<S> Incoming<S> {
    /// The transports `stream` yields, with no peer address.
    pub fn new(stream: S) -> Self {
        Self {
            stream: Box::pin(stream),
        }
    }
}

impl<S, IO> Listener for Incoming<S>
where
    S: Stream<Item = io::Result<IO>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = IO;

    async fn accept(&mut self) -> Option<io::Result<(IO, Option<SocketAddr>)>> {
        let next = self.stream.next().await?;
        Some(next.map(|io| (io, None)))
    }
}
