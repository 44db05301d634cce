//! [`StreamLimitLayer`]: declares to the peer how many streams it may open
//! at once, and the initial flow-control windows, for the
//! [`MultiplexLayer`](crate::MultiplexLayer) above it to enforce.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};

use super::config::MaxWindows;
use crate::{
    error::Error,
    handshake::{stage::Sealed, Agreement, Handshake, Negotiated, StreamOffer},
    record::Channel,
};

/// Declares, in Setup, the most concurrent streams the peer may open on a
/// connection, and optionally the initial receive windows; and sets how
/// far those windows may grow (the one place for every window setting).
///
/// The peer is told, so its `open()` waits for credit instead of overrunning
/// us; a peer that opens more anyway breaks the protocol and gets a go-away
/// with [`CloseCode::STREAM_LIMIT_ERROR`](crate::CloseCode::STREAM_LIMIT_ERROR).
///
/// The semantics are QUIC's: every stream the peer opened counts until it
/// has finished in both directions *and* our application accepted it and
/// read it to the end or dropped it. Streams not yet accepted count; a
/// server handler keeps its slot until it is done.
///
/// Its product is a [`StreamLimited`] channel, which only a
/// [`MultiplexLayer`](crate::MultiplexLayer) directly above can turn into a
/// connection (it is no byte stream of its own): the connection that
/// enforces the limit is built in the same stack that declared it, so the
/// declaration cannot be forgotten. Without this layer, the peer may open
/// 100.
///
/// ```
/// use tower::ServiceBuilder;
/// use weft::{handshake::Versions, mux, transport::TcpConnector, MultiplexLayer, NegotiateLayer, StreamLimitLayer};
///
/// let dialer = ServiceBuilder::new()
///     .layer(MultiplexLayer::new(mux::Builder::new()))
///     .layer(StreamLimitLayer::new(100))
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(TcpConnector::new());
/// # let _ = dialer;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct StreamLimitLayer {
    config: StreamOffer,
    max_windows: MaxWindows,
}

impl StreamLimitLayer {
    /// At most `max_streams` concurrent streams from the peer (at least 1:
    /// Setup cannot say 0).
    pub fn new(max_streams: u32) -> Self {
        Self {
            config: StreamOffer::new(max_streams),
            max_windows: MaxWindows::default(),
        }
    }

    /// The initial receive windows we declare, per stream and per
    /// connection (defaults 1 MiB and 4 MiB).
    /// The peer may send this much before hearing from us.
    pub fn receive_windows(mut self, stream: u32, connection: u32) -> Self {
        self.config = self.config.with_windows(stream, connection);
        self
    }

    /// How far auto-tuning may grow the receive windows, per stream and
    /// per connection (defaults 16 MiB and 32 MiB, each at most 1 GiB):
    /// what a peer may make one connection hold for the application
    /// (`mux::Builder`'s "Memory"). Only this side knows it; the peer is
    /// told each window as it grows.
    pub fn max_receive_windows(mut self, stream: u32, connection: u32) -> Self {
        self.max_windows = MaxWindows::new(stream, connection);
        self
    }
}

impl<S> Layer<S> for StreamLimitLayer {
    type Service = StreamLimit<S>;

    fn layer(&self, inner: S) -> StreamLimit<S> {
        StreamLimit {
            inner,
            config: self.config,
            max_windows: self.max_windows,
        }
    }
}

/// The service [`StreamLimitLayer`] builds.
#[derive(Debug, Clone)]
pub struct StreamLimit<S> {
    inner: S,
    config: StreamOffer,
    max_windows: MaxWindows,
}

impl<S> StreamLimit<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// What a [`StreamLimitLayer`] takes from the layer below it: an encrypted
/// [`Channel`] (from an [`EncryptLayer`](crate::EncryptLayer) or a
/// [`RecordSizeLayer`](crate::RecordSizeLayer) over one), or in a stack
/// without encryption a [`Negotiated`] one. Sealed: the stack's layers
/// produce these.
#[diagnostic::on_unimplemented(
    message = "`StreamLimitLayer` cannot limit the streams of `{Self}`",
    label = "the layer below `StreamLimitLayer` makes this",
    note = "`StreamLimitLayer` goes directly below `MultiplexLayer`, over `RecordSizeLayer`, `EncryptLayer` or \
            `NegotiateLayer`: top to bottom, a stack reads Multiplex, StreamLimit, RecordSize, Encrypt, Negotiate, \
            then the connector"
)]
pub trait Limitable: Sealed + Send + 'static {
    #[doc(hidden)]
    type Io: Send + 'static;
    #[doc(hidden)]
    fn into_channel(self) -> Channel<Self::Io>;
}

impl<IO: Send + 'static> Limitable for Channel<IO> {
    type Io = IO;
    fn into_channel(self) -> Self {
        self
    }
}

impl<IO> Limitable for Negotiated<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = IO;
    fn into_channel(self) -> Channel<IO> {
        self.into_plaintext()
    }
}

impl<S, T> Service<Handshake<T>> for StreamLimit<S>
where
    S: Service<Handshake<T>, Error = Error>,
    S::Response: Limitable,
    S::Future: Send + 'static,
{
    type Response = StreamLimited<<S::Response as Limitable>::Io>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        let limit = self.config;
        let max_windows = self.max_windows;
        req.parts.streams = Some(limit);
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let channel = handshake.await?.into_channel();
            debug_assert_eq!(channel.agreement().local_max_streams(), Some(limit.max_streams()));
            Ok(StreamLimited { channel, max_windows })
        })
    }
}

/// A channel whose stream limit [`StreamLimitLayer`] declared to the peer,
/// waiting for the [`MultiplexLayer`](crate::MultiplexLayer) above to build
/// the connection that enforces it.
#[derive(Debug)]
pub struct StreamLimited<IO> {
    pub(super) channel: Channel<IO>,
    /// How far the connection built of it may grow its windows.
    pub(super) max_windows: MaxWindows,
}

impl<IO> Sealed for StreamLimited<IO> {}

impl<IO> StreamLimited<IO> {
    /// What the handshake agreed.
    pub fn agreement(&self) -> &Agreement {
        self.channel.agreement()
    }

    /// The channel, to look at (its peer, its counters): only the
    /// connection built from it reads and writes it.
    pub fn channel(&self) -> &Channel<IO> {
        &self.channel
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceBuilder;

    use super::*;
    use crate::{handshake::Versions, mux::Builder, MultiplexLayer, NegotiateLayer};

    /// A connector that is never ready.
    struct NeverReady;

    impl Service<()> for NeverReady {
        type Response = tokio::io::DuplexStream;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Pending
        }

        fn call(&mut self, (): ()) -> Self::Future {
            unreachable!("never ready")
        }
    }

    #[test]
    fn the_stream_limit_and_multiplex_layers_are_ready_only_when_the_connector_is() {
        let mut stack = ServiceBuilder::new()
            .layer(MultiplexLayer::new(Builder::new()))
            .layer(StreamLimitLayer::new(8))
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(NeverReady);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(stack.poll_ready(&mut cx).is_pending());
        assert!(stack.get_mut().poll_ready(&mut cx).is_pending());
    }
}
