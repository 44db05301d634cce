//! [`MultiplexLayer`]: the top of the stack, where the established channel
//! becomes a [`Connection`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};

use super::{
    config::{Builder, MaxWindows},
    connection::Connection,
    frame::{put_header, Kind, FLAG_FIN, HEADER_LEN},
    limit::StreamLimited,
};
use crate::{
    error::Error,
    handshake::{stage::Sealed, Handshake, Negotiated, Role},
    record::Channel,
};

/// Turns the channel the layers below establish into a [`Connection`]:
/// streams, flow control, keepalive and go-away, with the settings of a
/// [`Builder`]. With it on top, a whole dialer (or acceptor) is one tower
/// service, `Service<Handshake<T>, Response = Connection>`, that a pool can
/// clone and call.
///
/// Directly beneath it goes the [`StreamLimitLayer`](crate::StreamLimitLayer)
/// that declares the stream limit this connection then enforces (without
/// one, both sides use the default of 100).
///
/// ```
/// use std::time::Duration;
/// use tower::ServiceBuilder;
/// use weft::{handshake::Versions, mux, transport::TcpConnector, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer};
///
/// let dialer = ServiceBuilder::new()
///     .layer(MultiplexLayer::new(mux::Builder::new().open_timeout(Some(Duration::from_secs(2)))))
///     .layer(StreamLimitLayer::new(100))
///     .layer(RecordSizeLayer::dynamic())
///     .layer(EncryptLayer::new(Identity::generate()))
///     .layer(NegotiateLayer::new(Versions::CURRENT))
///     .service(TcpConnector::new());
/// // let connection = dialer.dial(addr).await?;
/// # let _ = dialer;
/// ```
#[derive(Debug, Clone, Default)]
pub struct MultiplexLayer {
    builder: Builder,
}

impl MultiplexLayer {
    /// Connections with `builder`'s settings.
    pub fn new(builder: Builder) -> Self {
        Self { builder }
    }
}

impl<S> Layer<S> for MultiplexLayer {
    type Service = Multiplex<S>;

    fn layer(&self, inner: S) -> Multiplex<S> {
        Multiplex {
            inner,
            builder: self.builder.clone(),
        }
    }
}

/// The service [`MultiplexLayer`] builds.
#[derive(Debug, Clone)]
pub struct Multiplex<S> {
    inner: S,
    builder: Builder,
}

impl<S> Multiplex<S> {
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

    /// Tells `observer` of this stack's handshakes and connections, as
    /// [`Builder::observer`] does: for a stack built whole, such as
    /// [`weft::acceptor`](crate::acceptor)'s.
    ///
    /// ```
    /// use weft::Identity;
    ///
    /// # #[cfg(feature = "metrics")]
    /// let acceptor = weft::acceptor(Identity::generate()).observer(weft::metrics::Metrics::new());
    /// ```
    pub fn observer(mut self, observer: impl super::Observer) -> Self {
        self.builder = self.builder.observer(observer);
        self
    }
}

/// What a [`MultiplexLayer`] builds a connection from: a [`Channel`], a
/// [`StreamLimited`] one, or in a stack without encryption a
/// [`Negotiated`] one. Sealed: the stack's layers produce these.
#[diagnostic::on_unimplemented(
    message = "`MultiplexLayer` cannot build a connection from `{Self}`",
    label = "the layer below `MultiplexLayer` makes this",
    note = "`MultiplexLayer` goes on top of the stack, over `StreamLimitLayer`, `RecordSizeLayer`, `EncryptLayer` \
            or `NegotiateLayer`: top to bottom, a stack reads Multiplex, StreamLimit, RecordSize, Encrypt, \
            Negotiate, then the connector"
)]
pub trait Multiplexable: Sealed + Send + 'static {
    #[doc(hidden)]
    fn into_connection(self, builder: &Builder, early: Option<(Bytes, bool)>) -> Connection;
}

impl<IO> Multiplexable for Negotiated<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn into_connection(self, builder: &Builder, early: Option<(Bytes, bool)>) -> Connection {
        builder.build_with_early(self.into_plaintext(), early, MaxWindows::default())
    }
}

impl<IO> Multiplexable for Channel<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn into_connection(self, builder: &Builder, early: Option<(Bytes, bool)>) -> Connection {
        builder.build_with_early(self, early, MaxWindows::default())
    }
}

impl<IO> Multiplexable for StreamLimited<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn into_connection(self, builder: &Builder, early: Option<(Bytes, bool)>) -> Connection {
        builder.build_with_early(self.channel, early, self.max_windows)
    }
}

impl<S, T: 'static> Service<Handshake<T>> for Multiplex<S>
where
    S: Service<Handshake<T>, Error = Error>,
    S::Response: Multiplexable,
    S::Future: Send + 'static,
{
    type Response = Connection;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Connection, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        let builder = self.builder.clone();
        let role = req.role();
        let started = Instant::now();
        let remote = req.remote_addr();
        // The first stream's bytes, as the channel's first bytes: the OPEN
        // of stream 1 that carries them, for early data (at most 3 KiB in
        // all; more is no early stream at all).
        let early = req
            .take_early_stream()
            .filter(|(data, _)| req.role() == Role::Dialer && data.len() <= MAX_EARLY_STREAM);
        if let Some((data, finish)) = &early {
            let mut open = bytes::BytesMut::with_capacity(HEADER_LEN + data.len());
            put_header(&mut open, Kind::Open, u8::from(*finish) * FLAG_FIN, 1, data.len());
            open.extend_from_slice(data);
            req.parts.early_data = Some(open.freeze());
        }
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let result = handshake.await.map(|channel| {
                let conn = channel.into_connection(&builder, early);
                conn.set_remote_addr(remote);
                conn
            });
            if let Some(observer) = builder.observer.get() {
                observer.handshake(role, started.elapsed(), result.as_ref());
            }
            result
        })
    }
}

/// The most a dialer's first stream may carry with its handshake
/// ([`Handshake::early_stream`]): early data's 3 KiB, its OPEN frame's
/// header included.
pub(crate) const MAX_EARLY_STREAM: usize = 3072 - HEADER_LEN;

/// A whole acceptor stack over transports `IO` (TCP unless said), what
/// servers take (`weft::http::serve`, `weft::rpc::server`) with a
/// [`Listener`](crate::transport::Listener) of them: its product is a
/// [`Connection`] (any stack with [`MultiplexLayer`] on top, over
/// [`TcpAcceptor`](crate::transport::TcpAcceptor) for TCP or
/// [`ExistingTransport`](crate::transport::ExistingTransport) for any transport).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an acceptor stack over `{IO}`: it must be a service of `Handshake<{IO}>` whose product is a `mux::Connection`",
    label = "not an acceptor stack",
    note = "an acceptor stack is `MultiplexLayer` (and the layers under it) around a transport acceptor: `weft::acceptor(identity)` over TCP, or `ServiceBuilder::new().layer(MultiplexLayer::new(..)) .. .service(TcpAcceptor::new())` (`ExistingTransport::new()` for transports of your own)",
    note = "a stack used by two servers is cloned (`acceptor.clone()`), and `BoxAcceptor::new(stack)` names any TCP stack as one type"
)]
pub trait Acceptor<IO = tokio::net::TcpStream>:
    Service<Handshake<IO>, Response = Connection, Error = Error, Future: Send> + Clone + Send + 'static
{
}

impl<A, IO> Acceptor<IO> for A where
    A: Service<Handshake<IO>, Response = Connection, Error = Error, Future: Send> + Clone + Send + 'static
{
}
