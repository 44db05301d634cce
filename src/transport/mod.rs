//! The bottom of the stack: services that produce a transport for a weft
//! stack to run over.
//!
//! [`TcpConnector`] dials (an address, or a [`Target`] whose name its
//! [`Resolve`]r looks up), [`Connector`] dials TCP or a Unix domain
//! socket (the standard dialer's), [`TcpAcceptor`] takes a stream a listener
//! accepted, and [`ExistingTransport`] runs over any transport you already
//! have (a `tokio::io::duplex` pipe, a Unix socket, a simulated
//! `weft::sim::Link` with the feature `sim`), on either side. A server takes its
//! connections from a [`Listener`]: TCP, a Unix domain socket, or any
//! stream of transports ([`Incoming`]).

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::net::TcpStream;
use tower::Service;

mod listener;
mod resolve;
mod socket;

pub use listener::{Incoming, Listener};
pub use resolve::{GaiResolver, Name, Resolve, Target};
pub use socket::{Connector, Socket};

/// How long [`TcpConnector`] waits for a TCP connection by default: past
/// it, a dial to an address that never answers (a host gone, a full
/// accept queue, a firewall dropping SYNs) fails rather than waiting for
/// the operating system's retries (about two minutes on Linux).
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Addresses of one name a dial tries at most, in the resolver's order.
const MAX_ADDRESSES_TRIED: usize = 16;

/// Connects over TCP with `TCP_NODELAY` set (weft batches writes itself),
/// within a connect timeout (10 s unless set): to a
/// `SocketAddr`, or to a [`Target`], whose host names its resolver turns
/// into addresses ([`GaiResolver`], the system's, unless
/// [`resolver`](Self::resolver) sets another), tried in turn until one
/// connects (the first 16 at most). A [`Pool`](crate::pool::Pool) dials [`Target`]s.
#[derive(Debug, Clone, Copy)]
pub struct TcpConnector<R = GaiResolver> {
    connect_timeout: Option<Duration>,
    resolver: R,
}

impl Default for TcpConnector {
    fn default() -> Self {
        Self {
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            resolver: GaiResolver::new(),
        }
    }
}

impl TcpConnector {
    /// A new connector, with the system's resolver.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<R> TcpConnector<R> {
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// How long a TCP connection may take to establish, or `None` to wait
    /// as long as the operating system does. Past it the dial fails with
    /// [`io::ErrorKind::TimedOut`]. Each address of a name gets its own.
    pub fn connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Resolves host names with `resolver` (a DNS client of your own, a
    /// fixed table in tests) instead of the system's.
    pub fn resolver<Other: Resolve>(self, resolver: Other) -> TcpConnector<Other> {
        TcpConnector {
            connect_timeout: self.connect_timeout,
            resolver,
        }
    }
}

/// One TCP connection to `addr`, within `timeout`, Nagle off.
async fn connect(addr: SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
    let connecting = TcpStream::connect(addr);
    let stream = match timeout {
        Some(limit) => tokio::time::timeout(limit, connecting).await.map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "TCP connect to {addr} did not finish within {}",
                    crate::error::Rounded(limit)
                ),
            )
        })??,
        None => connecting.await?,
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

impl<R> Service<SocketAddr> for TcpConnector<R> {
    type Response = TcpStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, addr: SocketAddr) -> Self::Future {
        Box::pin(connect(addr, self.connect_timeout))
    }
}

impl<R: Resolve> Service<Target> for TcpConnector<R> {
    type Response = TcpStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, target: Target) -> Self::Future {
        let timeout = self.connect_timeout;
        let name = match target {
            Target::Addr(addr) => return Box::pin(connect(addr, timeout)),
            Target::Host(name) => name,
            #[cfg(unix)]
            Target::Unix(path) => {
                let message = format!(
                    "{} is a Unix socket: dial it with transport::Connector (the standard dialer's), not TcpConnector",
                    path.display()
                );
                return Box::pin(std::future::ready(Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    message,
                ))));
            }
        };
        let resolving = self.resolver.resolve(name.clone());
        Box::pin(async move {
            let mut addrs = resolving.await?;
            // (Each address gets its own connect timeout: a long answer
            // must not make a dial take minutes.)
            addrs.truncate(MAX_ADDRESSES_TRIED);
            let tried = addrs.len();
            let mut last = None;
            for addr in addrs {
                match connect(addr, timeout).await {
                    Ok(stream) => return Ok(stream),
                    Err(err) => {
                        tracing::debug!(%name, %addr, error = %err, "TCP connect failed; trying the next address");
                        last = Some(err);
                    }
                }
            }
            // (The resolver answers at least one address.)
            let last = last.unwrap_or_else(|| io::Error::from(io::ErrorKind::NotFound));
            Err(io::Error::new(
                last.kind(),
                format!("TCP connect to {name} failed at every address ({tried} tried); the last: {last}"),
            ))
        })
    }
}

/// The acceptor's base service for TCP: takes a stream a listener accepted
/// and sets `TCP_NODELAY` on it, as [`TcpConnector`] does on the dialing
/// side (weft batches writes itself, so Nagle's algorithm only adds delay).
///
/// ```
/// use tower::ServiceBuilder;
/// use weft::{handshake::Versions, transport::TcpAcceptor, NegotiateLayer};
///
/// let acceptor = ServiceBuilder::new()
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(TcpAcceptor::new());
/// // let (tcp, _) = listener.accept().await?;
/// // let channel = acceptor.accept_transport(tcp).await?;
/// # let _ = acceptor;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpAcceptor {
    _priv: (),
}

impl TcpAcceptor {
    /// A new acceptor.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Service<TcpStream> for TcpAcceptor {
    type Response = TcpStream;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<TcpStream>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: TcpStream) -> Self::Future {
        std::future::ready(stream.set_nodelay(true).map(|()| stream))
    }
}

/// The base service for a transport that already exists: hands back the
/// transport it is given, on either side (`stack.dial(io)` or
/// `stack.accept_transport(io)`).
///
/// ```
/// use tower::ServiceBuilder;
/// use weft::{handshake::Versions, transport::ExistingTransport, NegotiateLayer};
///
/// let stack = ServiceBuilder::new()
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(ExistingTransport::new());
/// # let _ = stack;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ExistingTransport {
    _priv: (),
}

impl ExistingTransport {
    /// A new pass-through service.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<IO> Service<IO> for ExistingTransport {
    type Response = IO;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<IO, std::convert::Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, io: IO) -> Self::Future {
        std::future::ready(Ok(io))
    }
}
