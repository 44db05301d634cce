//! [`Connector`]: dials a [`Target`] over TCP or, for a
//! [`Target::Unix`] path, a Unix domain socket, making a [`Socket`] of
//! either kind: what the standard dialer and its pool dial through.

use std::{
    future::Future,
    io::{self, IoSlice},
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
};
use tower::Service;

use super::{GaiResolver, Resolve, Target, TcpConnector};

/// A connection [`Connector`] made: TCP, or a Unix domain socket.
#[derive(Debug)]
pub enum Socket {
    /// A TCP connection, `TCP_NODELAY` set.
    Tcp(TcpStream),
    /// A Unix domain socket connection.
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

/// Dials TCP as [`TcpConnector`] does (its connect timeout and resolver),
/// and a [`Target::Unix`] path
/// ([`Endpoint::unix`](crate::pool::Endpoint::unix)) as a Unix domain
/// socket, within the same timeout: the standard dialer's connector
/// ([`weft::dialer`](crate::dialer)), so one pool reaches servers over
/// either.
///
/// ```no_run
/// # async fn f(server: weft::handshake::PeerId) -> Result<(), weft::pool::PoolError> {
/// use weft::{pool::{Endpoint, Pool}, Identity};
///
/// let pool = Pool::builder().build(weft::dialer(Identity::generate()));
/// let stream = pool.open(Endpoint::unix("/run/echo.sock").expect_peer(server)).await?;
/// # let _ = stream; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Connector<R = GaiResolver> {
    tcp: TcpConnector<R>,
}

impl Default for Connector {
    fn default() -> Self {
        Self {
            tcp: TcpConnector::new(),
        }
    }
}

impl Connector {
    /// A new connector, with the system's resolver.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<R> Connector<R> {
    /// How long a connection may take to establish, or `None` to wait as
    /// long as the operating system does
    /// ([`TcpConnector::connect_timeout`]; 10 s by default).
    pub fn connect_timeout(self, timeout: Option<Duration>) -> Self {
        Self {
            tcp: self.tcp.connect_timeout(timeout),
        }
    }

    /// Resolves host names with `resolver` ([`TcpConnector::resolver`]).
    pub fn resolver<Other: Resolve>(self, resolver: Other) -> Connector<Other> {
        Connector {
            tcp: self.tcp.resolver(resolver),
        }
    }
}

impl<R: Resolve> Service<Target> for Connector<R> {
    type Response = Socket;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Socket>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, target: Target) -> Self::Future {
        match target {
            #[cfg(unix)]
            Target::Unix(path) => {
                let timeout = self.tcp.timeout();
                Box::pin(async move {
                    let connecting = tokio::net::UnixStream::connect(&path);
                    let stream = match timeout {
                        Some(limit) => tokio::time::timeout(limit, connecting).await.map_err(|_| {
                            io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!(
                                    "connect to Unix socket {} did not finish within {}",
                                    path.display(),
                                    crate::error::Rounded(limit)
                                ),
                            )
                        })?,
                        None => connecting.await,
                    };
                    stream.map(Socket::Unix).map_err(|err| {
                        io::Error::new(
                            err.kind(),
                            format!("connect to Unix socket {} failed: {err}", path.display()),
                        )
                    })
                })
            }
            target => {
                let connecting = self.tcp.call(target);
                Box::pin(async move { connecting.await.map(Socket::Tcp) })
            }
        }
    }
}

impl<R: Resolve> Service<std::net::SocketAddr> for Connector<R> {
    type Response = Socket;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Socket>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, addr: std::net::SocketAddr) -> Self::Future {
        <Self as Service<Target>>::call(self, Target::Addr(addr))
    }
}

macro_rules! each {
    ($socket:expr, $io:ident => $body:expr) => {
        match $socket {
            Socket::Tcp($io) => $body,
            #[cfg(unix)]
            Socket::Unix($io) => $body,
        }
    };
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_read(cx, buf))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), io => Pin::new(io).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), io => Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        each!(self, io => io.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), io => Pin::new(io).poll_shutdown(cx))
    }
}
