//! The bottom of the stack: the request every layer sees, and the services
//! that produce a transport (a TCP connector, or a pass-through for a
//! transport that was already accepted).

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::net::TcpStream;
use tower::Service;

use crate::{crypto::PeerId, proto::Setup};

/// Which end of the connection we are. Both ends run the same code; the role
/// only orders the transcript, picks the key for each direction, and decides
/// whose preferences win (the acceptor's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// We opened the connection.
    Dialer,
    /// We accepted it.
    Acceptor,
}

impl Role {
    /// The other end's role.
    pub fn peer(self) -> Role {
        match self {
            Role::Dialer => Role::Acceptor,
            Role::Acceptor => Role::Dialer,
        }
    }

    pub(crate) fn wire(self) -> u8 {
        match self {
            Role::Dialer => 0,
            Role::Acceptor => 1,
        }
    }
}

/// The request that travels down a weft stack: a target for the inner
/// connector, our role, and the Setup offer each layer adds to on the way in.
///
/// ```
/// use weft::{Handshake, Role};
///
/// let dial = Handshake::dial("127.0.0.1:4000".parse::<std::net::SocketAddr>().unwrap());
/// assert_eq!(dial.role(), Role::Dialer);
/// ```
#[derive(Debug, Clone)]
pub struct Handshake<T> {
    pub(crate) target: T,
    pub(crate) role: Role,
    pub(crate) offer: Setup,
    pub(crate) expected_peer: Option<PeerId>,
}

impl<T> Handshake<T> {
    /// Dial `target` (an address for [`TcpConnector`], say).
    pub fn dial(target: T) -> Self {
        Self::new(target, Role::Dialer)
    }

    /// Run the acceptor's side over `transport` (see [`Accepted`]).
    pub fn accept(transport: T) -> Self {
        Self::new(transport, Role::Acceptor)
    }

    fn new(target: T, role: Role) -> Self {
        Self {
            target,
            role,
            offer: Setup::default(),
            expected_peer: None,
        }
    }

    /// Require the peer to prove this identity, or fail the handshake with
    /// [`Error::PeerKeyMismatch`](crate::Error::PeerKeyMismatch).
    pub fn expect_peer(mut self, peer: PeerId) -> Self {
        self.expected_peer = Some(peer);
        self
    }

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The target for the inner connector.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// The Setup offer as the layers above have filled it in so far.
    pub fn offer(&self) -> &Setup {
        &self.offer
    }

    /// Mutable access to the offer, for layers that add their part.
    pub fn offer_mut(&mut self) -> &mut Setup {
        &mut self.offer
    }
}

/// Connects over TCP with `TCP_NODELAY` set (weft batches writes itself).
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector {
    _priv: (),
}

impl TcpConnector {
    /// A new connector.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Service<SocketAddr> for TcpConnector {
    type Response = TcpStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, addr: SocketAddr) -> Self::Future {
        Box::pin(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok(stream)
        })
    }
}

/// The acceptor's base service: hands back the transport it is given.
///
/// ```
/// use tower::ServiceBuilder;
/// use weft::{Accepted, NegotiateLayer, setup::Versions};
///
/// let acceptor = ServiceBuilder::new()
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(Accepted::new());
/// # let _ = acceptor;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Accepted {
    _priv: (),
}

impl Accepted {
    /// A new pass-through service.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<IO> Service<IO> for Accepted {
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

/// Shorthand for driving a weft stack: waits for the stack to be ready,
/// then runs one handshake (`stack.dial(addr)`, `stack.accept(io)`; the
/// crate-level example uses both).
pub trait HandshakeExt<T>: Service<Handshake<T>> {
    /// Runs `request` once the stack is ready.
    fn handshake(
        &mut self,
        request: Handshake<T>,
    ) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send
    where
        Self: Send,
        Self::Future: Send,
        T: Send,
    {
        async move {
            std::future::poll_fn(|cx| self.poll_ready(cx)).await?;
            self.call(request).await
        }
    }

    /// Dials `target` ([`Handshake::dial`]).
    fn dial(&mut self, target: T) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send
    where
        Self: Send,
        Self::Future: Send,
        T: Send,
    {
        self.handshake(Handshake::dial(target))
    }

    /// Accepts over `transport` ([`Handshake::accept`]).
    fn accept(&mut self, transport: T) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send
    where
        Self: Send,
        Self::Future: Send,
        T: Send,
    {
        self.handshake(Handshake::accept(transport))
    }
}

impl<S: Service<Handshake<T>>, T> HandshakeExt<T> for S {}
