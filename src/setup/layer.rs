use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    time::Instant,
};
use tower::{Layer, Service};
use tracing::debug;

use super::{Negotiated, SetupSent};
use crate::{
    error::{BoxError, Error, Repr},
    handshake::{Handshake, Offer, Versions},
    proto::Setup,
    record::{before, clear_close_frame, HandshakeState, RecordIo},
};

/// How long a handshake may take, from transport-ready to established.
pub(super) const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest Setup message accepted from a peer. A Setup is a few dozen
/// bytes plus application protocol names; 4 KiB leaves room for growth
/// while bounding what an unauthenticated peer can make us buffer.
pub(super) const DEFAULT_MAX_SETUP_SIZE: usize = 4096;

/// Runs the Setup exchange: sends our Setup (with every outer layer's
/// offer) the moment the transport is up, reads the peer's, and agrees.
///
/// This is the innermost weft layer: it turns the inner connector's
/// transport into a [`Negotiated`] channel, for the
/// [`EncryptLayer`](crate::EncryptLayer) above.
///
/// ```
/// use std::time::Duration;
/// use weft::{handshake::Versions, NegotiateLayer};
///
/// let layer = NegotiateLayer::new(Versions::new(1, 1))
///     .handshake_timeout(Duration::from_secs(5))
///     .protocols(["rpc"]);
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct NegotiateLayer {
    config: Arc<Config>,
}

#[derive(Debug, Clone)]
struct Config {
    versions: Versions,
    timeout: Duration,
    max_setup_size: usize,
    protocols: Vec<String>,
}

impl NegotiateLayer {
    /// Negotiates within `versions`, with the default deadline (10 s) and
    /// Setup size limit (4 KiB).
    pub fn new(versions: Versions) -> Self {
        Self {
            config: Arc::new(Config {
                versions,
                timeout: DEFAULT_HANDSHAKE_TIMEOUT,
                max_setup_size: DEFAULT_MAX_SETUP_SIZE,
                protocols: Vec::new(),
            }),
        }
    }

    /// The deadline for the whole handshake (Setup and authentication). It
    /// starts when the inner connector hands over the transport; bound the
    /// connect itself with tower's `TimeoutLayer` around the connector.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        Arc::make_mut(&mut self.config).timeout = timeout;
        self
    }

    /// The largest Setup message accepted from a peer.
    pub fn max_setup_size(mut self, max: usize) -> Self {
        Arc::make_mut(&mut self.config).max_setup_size = max;
        self
    }

    /// Application protocols we speak, most preferred first. When both
    /// sides name some, the acceptor's first that the dialer also names is
    /// agreed, and no overlap fails the handshake.
    pub fn protocols<P: Into<String>>(mut self, protocols: impl IntoIterator<Item = P>) -> Self {
        Arc::make_mut(&mut self.config).protocols = protocols.into_iter().map(Into::into).collect();
        self
    }
}

impl<S> Layer<S> for NegotiateLayer {
    type Service = Negotiate<S>;

    fn layer(&self, inner: S) -> Negotiate<S> {
        Negotiate {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service [`NegotiateLayer`] builds.
#[derive(Debug, Clone)]
pub struct Negotiate<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Negotiate<S> {
    /// The inner connector.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
    /// The inner connector, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
    /// Unwraps the inner connector.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, T> Service<Handshake<T>> for Negotiate<S>
where
    S: Service<T>,
    S::Response: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Negotiated<S::Response>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Negotiated<S::Response>, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| Error::from(Repr::Connect(err.into().into())))
    }

    fn call(&mut self, req: Handshake<T>) -> Self::Future {
        let config = self.config.clone();
        if req.expected_peer().is_some() && req.offer().encryption().is_none() {
            // Only an encryption layer verifies identities: without one a
            // pin would be silently ignored.
            return Box::pin(std::future::ready(Err(Repr::Stack(
                "a pinned peer key needs an EncryptLayer in the stack to verify it",
            )
            .into())));
        }
        let exchange = match SetupSent::with_early(
            req.role(),
            setup_message(req.offer(), &config),
            config.max_setup_size,
            req.early_sealer().map(|sealer| &**sealer),
        ) {
            Ok(exchange) => exchange,
            Err(err) => return Box::pin(std::future::ready(Err(err))),
        };
        let connect = self.inner.call(req.into_target());
        Box::pin(async move {
            let io = connect.await.map_err(|err| Repr::Connect(err.into().into()))?;
            exchange_over(io, exchange, &config).await
        })
    }
}

/// Our Setup message: every layer's typed offer, and our versions and
/// application protocols.
fn setup_message(offer: &Offer, config: &Config) -> Setup {
    let mut setup = Setup {
        min_version: config.versions.min(),
        max_version: config.versions.max(),
        protocols: config.protocols.clone(),
        ..Setup::default()
    };
    if let Some(encryption) = offer.encryption() {
        setup.ephemeral_key = encryption.public_key().to_vec();
        setup.suites = encryption.suites().iter().map(|suite| suite.id()).collect();
    }
    if let Some(max) = offer.max_record_size() {
        setup.max_record_size = max;
    }
    if let Some(streams) = offer.streams() {
        setup.max_streams = streams.max_streams();
        setup.stream_window = streams.stream_window().unwrap_or(0);
        setup.connection_window = streams.connection_window().unwrap_or(0);
    }
    setup
}

/// Sends our Setup the moment the transport is up, without waiting for the
/// peer (one round trip in all), reads the peer's, and agrees.
async fn exchange_over<IO>(io: IO, exchange: SetupSent, config: &Config) -> Result<Negotiated<IO>, Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let deadline = started + config.timeout;
    let mut io = RecordIo::new(io, config.max_setup_size);
    // One timer for the whole handshake: authentication waits on it too.
    let mut timer = Box::pin(tokio::time::sleep_until(deadline));
    let outcome = before(timer.as_mut(), async {
        io.queue_frame(exchange.frame());
        io.flush().await?;
        let frame = io.read_frame().await?;
        exchange.receive(frame)
    })
    .await
    .unwrap_or_else(|| Err(Repr::HandshakeTimeout(config.timeout).into()));
    match outcome {
        Ok(agreed) => {
            let (agreement, transcript, peer_ephemeral, early) = agreed.into_parts();
            debug!(version = agreement.version(), suite = %agreement.suite(), "setup agreed");
            let handshake = HandshakeState {
                transcript,
                peer_ephemeral,
                early,
                started,
                deadline,
                timer: Some(timer),
            };
            let channel = io.into_channel(agreement, handshake.peer_ephemeral.is_some(), started);
            Ok(Negotiated::new(channel, handshake))
        }
        Err(err) => {
            debug!(error = %err, "negotiation failed");
            if err.warrants_close() {
                // Tell the peer why, in the clear: there are no keys yet.
                io.abort_with(&clear_close_frame(&err)).await;
            }
            Err(err)
        }
    }
}
