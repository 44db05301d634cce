//! The request that travels down a weft stack.

use std::{future::Future, net::SocketAddr, sync::Arc};

use bytes::Bytes;
use tower::Service;

use super::{encrypt::EncryptConfig, offer::StreamOffer};
use crate::{
    record::RecordConfig,
    terms::{PeerId, Role},
};

/// The request that travels down a weft stack: a target for the inner
/// connector, our role, what we require of the peer, and what each layer
/// asks of the handshake, added on the way in.
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
    expected_peer: Option<PeerId>,
    expected_protocol: Option<String>,
    peer_address: Option<SocketAddr>,
    /// The first stream's bytes, to send early if the stack can
    /// ([`early_stream`](Self::early_stream)).
    early_stream: Option<(Bytes, bool)>,
    /// What the layers ask of the handshake.
    pub(crate) parts: Parts,
}

/// What the layers of a stack ask of the handshake, each its typed part,
/// added on the way down: the handshake (`NegotiateLayer`, innermost) does
/// all of it, and the layers read what it established on the way up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Parts {
    /// [`EncryptLayer`](crate::EncryptLayer)'s: identity, suites, who may
    /// connect, early data.
    pub(crate) encryption: Option<Arc<EncryptConfig>>,
    /// [`RecordSizeLayer`](crate::RecordSizeLayer)'s: how records are sized.
    pub(crate) records: Option<RecordConfig>,
    /// [`StreamLimitLayer`](crate::StreamLimitLayer)'s: the stream limit
    /// and windows the peer is told.
    pub(crate) streams: Option<StreamOffer>,
    /// [`MultiplexLayer`](crate::MultiplexLayer)'s: the channel's first
    /// bytes (the frames of the first stream), to send early.
    pub(crate) early_data: Option<Bytes>,
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
            expected_peer: None,
            expected_protocol: None,
            peer_address: None,
            early_stream: None,
            parts: Parts::default(),
        }
    }

    /// Sends `data` as the first stream's first bytes, in the first flight
    /// when it can: 0-RTT, protocol version 3 (docs/PROTOCOL.md, section
    /// 17). It can when the stack pins the peer
    /// ([`expect_peer`](Self::expect_peer)), the peer speaks version 3,
    /// accepts early data, and announced its box key on an earlier
    /// connection of this stack; otherwise `data` goes on the stream right
    /// after the handshake. Either way the connection's
    /// [`take_early_stream`](crate::mux::Connection::take_early_stream)
    /// is that stream, opened and written (not finished: see
    /// [`early_stream_finished`](Self::early_stream_finished)). Needs a
    /// [`MultiplexLayer`](crate::MultiplexLayer); other stacks ignore it.
    ///
    /// `data` is at most 3,062 bytes (early data's 3 KiB, less the frame
    /// that opens the stream); with more, there is no early stream:
    /// `take_early_stream` is `None`, and you open the stream yourself.
    ///
    /// Early data can be replayed by whoever saw it: send early only what
    /// is safe to repeat (an idempotent request).
    pub fn early_stream(mut self, data: Bytes) -> Self {
        self.early_stream = (!data.is_empty()).then_some((data, false));
        self
    }

    /// As [`early_stream`](Self::early_stream), and the stream's sending
    /// side finished after `data`: a whole request in the first flight.
    pub fn early_stream_finished(mut self, data: Bytes) -> Self {
        self.early_stream = (!data.is_empty()).then_some((data, true));
        self
    }

    /// The first stream's early bytes and whether they end it, for the
    /// multiplexing layer.
    pub(crate) fn take_early_stream(&mut self) -> Option<(Bytes, bool)> {
        self.early_stream.take()
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

    /// Require the agreed application protocol to be `protocol` (a
    /// dialer's), or fail the handshake with an error of
    /// [`ErrorKind::Negotiation`](crate::ErrorKind::Negotiation) before
    /// anything is sent after the Setups. Early data is bound to it: an
    /// acceptor that would read it as another protocol refuses it
    /// (docs/PROTOCOL.md, section 17.2). Without it, early data is bound
    /// to the first protocol the stack's `NegotiateLayer` names.
    pub fn expect_protocol(mut self, protocol: impl Into<String>) -> Self {
        self.expected_protocol = Some(protocol.into());
        self
    }

    /// The application protocol required, if any.
    pub fn expected_protocol(&self) -> Option<&str> {
        self.expected_protocol.as_deref()
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
/// then runs one handshake (`stack.dial(addr)`, `stack.accept_transport(io)`; the
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

    /// Accepts over `transport` ([`Handshake::accept`]): the acceptor's
    /// handshake (where [`Connection::accept`](crate::mux::Connection::accept)
    /// takes the streams of an established connection).
    fn accept_transport(
        &mut self,
        transport: T,
    ) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send
    where
        Self: Send,
        Self::Future: Send,
        T: Send,
    {
        self.handshake(Handshake::accept(transport))
    }
}

impl<S: Service<Handshake<T>>, T> HandshakeExt<T> for S {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{crypto::Identity, transport::Target};

    #[test]
    fn an_early_stream_is_taken_once_and_an_empty_one_is_none() {
        let data = Bytes::from_static(b"GET /");
        let mut open = Handshake::dial(()).early_stream(data.clone());
        assert_eq!(open.take_early_stream(), Some((data.clone(), false)));
        assert_eq!(open.take_early_stream(), None, "taken once");
        let mut finished = Handshake::dial(()).early_stream_finished(data.clone());
        assert_eq!(finished.take_early_stream(), Some((data, true)));
        let mut empty = Handshake::dial(()).early_stream(Bytes::new());
        assert_eq!(empty.take_early_stream(), None);
        let mut empty = Handshake::dial(()).early_stream_finished(Bytes::new());
        assert_eq!(empty.take_early_stream(), None);
    }

    #[test]
    fn what_the_request_requires_reads_back() {
        let peer = Identity::from_seed(&[1; 32]).peer_id();
        let given: SocketAddr = "192.0.2.1:9".parse().unwrap();
        let dial = Handshake::dial(())
            .expect_peer(peer)
            .expect_protocol("rpc")
            .with_peer_address(given);
        assert_eq!(
            (
                dial.expected_peer(),
                dial.expected_protocol(),
                dial.peer_address()
            ),
            (Some(peer), Some("rpc"), Some(given))
        );
        let plain = Handshake::dial(());
        assert_eq!(
            (
                plain.expected_peer(),
                plain.expected_protocol(),
                plain.peer_address()
            ),
            (None, None, None)
        );
    }

    #[tokio::test]
    async fn the_remote_address_is_the_one_given_or_the_targets() {
        let given: SocketAddr = "192.0.2.1:9".parse().unwrap();
        let target: SocketAddr = "198.51.100.2:80".parse().unwrap();
        assert_eq!(Handshake::dial(target).remote_addr(), Some(target));
        assert_eq!(Handshake::dial(Target::Addr(target)).remote_addr(), Some(target));
        assert_eq!(
            Handshake::dial(target).with_peer_address(given).remote_addr(),
            Some(given),
            "the address given wins"
        );
        assert_eq!(Handshake::dial("host:80").remote_addr(), None);
        // An acceptor's TcpStream: its peer's address.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dialed = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, from) = listener.accept().await.unwrap();
        assert_eq!(from, dialed.local_addr().unwrap());
        assert_eq!(Handshake::accept(accepted).remote_addr(), Some(from));
    }
}
