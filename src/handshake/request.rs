//! The request that travels down a weft stack.

use std::{future::Future, net::SocketAddr};

use tower::Service;

use super::{EncryptionOffer, Offer, PeerId, Role, StreamOffer};

/// The request that travels down a weft stack: a target for the inner
/// connector, our role, and the offer each layer adds its part to on the
/// way in.
///
/// ```
/// use weft::handshake::{Handshake, Role};
///
/// let dial = Handshake::dial("127.0.0.1:4000".parse::<std::net::SocketAddr>().unwrap());
/// assert_eq!(dial.role(), Role::Dialer);
/// ```
#[derive(Debug, Clone)]
pub struct Handshake<T> {
    target: T,
    role: Role,
    offer: Offer,
    expected_peer: Option<PeerId>,
    peer_address: Option<SocketAddr>,
}

impl<T> Handshake<T> {
    /// Dial `target` (an address for [`TcpConnector`](crate::transport::TcpConnector),
    /// say).
    pub fn dial(target: T) -> Self {
        Self::new(target, Role::Dialer)
    }

    /// Run the acceptor's side over `transport` (see
    /// [`TcpAcceptor`](crate::transport::TcpAcceptor) and
    /// [`ExistingTransport`](crate::transport::ExistingTransport)).
    pub fn accept(transport: T) -> Self {
        Self::new(transport, Role::Acceptor)
    }

    fn new(target: T, role: Role) -> Self {
        Self {
            target,
            role,
            offer: Offer::default(),
            expected_peer: None,
            peer_address: None,
        }
    }

    /// Require the peer to prove this identity, or fail the handshake with
    /// an error of [`ErrorKind::Authentication`](crate::ErrorKind::Authentication)
    /// (a peer key mismatch). Only an [`EncryptLayer`](crate::EncryptLayer)
    /// can verify it: a stack without one fails a pinned handshake with an
    /// error of [`ErrorKind::Stack`](crate::ErrorKind::Stack) rather than
    /// connect to an unverified peer.
    pub fn expect_peer(mut self, peer: PeerId) -> Self {
        self.expected_peer = Some(peer);
        self
    }

    /// The peer's address, for an acceptor's admission control
    /// ([`AdmissionLayer`](crate::AdmissionLayer)) when the
    /// transport is not a `TcpStream` it can ask.
    pub fn with_peer_address(mut self, addr: SocketAddr) -> Self {
        self.peer_address = Some(addr);
        self
    }

    /// The peer's address, if the handshake was given one.
    pub fn peer_address(&self) -> Option<SocketAddr> {
        self.peer_address
    }

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The target for the inner connector.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// The pinned peer identity, if any.
    pub fn expected_peer(&self) -> Option<PeerId> {
        self.expected_peer
    }

    /// The offer as the layers above have filled it in so far.
    pub(crate) fn offer(&self) -> &Offer {
        &self.offer
    }

    /// Adds the encryption layer's offer.
    pub(crate) fn offer_encryption(&mut self, offer: EncryptionOffer) {
        self.offer.encryption = Some(offer);
    }

    /// Declares the largest record plaintext we accept.
    pub(crate) fn offer_record_size(&mut self, max: u32) {
        self.offer.max_record_size = Some(max);
    }

    /// Declares the stream limit (and windows) the peer must respect.
    pub(crate) fn offer_streams(&mut self, offer: StreamOffer) {
        self.offer.streams = Some(offer);
    }

    /// The peer's address as far as the request tells: the one given
    /// ([`with_peer_address`](Self::with_peer_address)), or the target's
    /// when it is an address, a [`Target`](crate::transport::Target) of
    /// one, or a `TcpStream` (an acceptor's).
    pub(crate) fn remote_addr(&self) -> Option<SocketAddr>
    where
        T: 'static,
    {
        if self.peer_address.is_some() {
            return self.peer_address;
        }
        let target: &dyn std::any::Any = &self.target;
        if let Some(addr) = target.downcast_ref::<SocketAddr>() {
            return Some(*addr);
        }
        if let Some(crate::transport::Target::Addr(addr)) = target.downcast_ref::<crate::transport::Target>()
        {
            return Some(*addr);
        }
        target
            .downcast_ref::<tokio::net::TcpStream>()
            .and_then(|tcp| tcp.peer_addr().ok())
    }

    /// The target, for the innermost service.
    pub(crate) fn into_target(self) -> T {
        self.target
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
