use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures_util::{SinkExt, StreamExt};
use prost::Message;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    time::Instant,
};
use tokio_util::codec::Framed;
use tower::{Layer, Service};
use tracing::debug;

use super::{agree, transcript_hash};
use crate::{
    error::{BoxError, Error},
    frame::{FrameCodec, FrameKind},
    handshake::{Handshake, Offer, Role, Versions},
    proto::Setup,
    record::{encode_close, parse_close, Channel, HandshakeState, ABORT_FLUSH_TIMEOUT},
};

/// How long a handshake may take, from transport-ready to established.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest Setup message accepted from a peer. A Setup is a few dozen
/// bytes plus application protocol names; 4 KiB leaves room for growth
/// while bounding what an unauthenticated peer can make us buffer.
pub const DEFAULT_MAX_SETUP_SIZE: usize = 4096;

/// Read-buffer capacity while the handshake runs: the peer's Setup and its
/// first records arrive together.
const HANDSHAKE_READ_CAPACITY: usize = 8 * 1024;

/// Runs the Setup exchange: sends our Setup (with every outer layer's
/// offer) the moment the transport is up, reads the peer's, and agrees.
///
/// This is the innermost weft layer: it turns the inner connector's
/// transport into a [`Channel`].
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
    /// Negotiates within `versions`, with the default deadline
    /// ([`DEFAULT_HANDSHAKE_TIMEOUT`]) and Setup size limit
    /// ([`DEFAULT_MAX_SETUP_SIZE`]).
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
    type Response = Channel<S::Response>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Channel<S::Response>, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| Error::Connect(err.into().into()))
    }

    fn call(&mut self, req: Handshake<T>) -> Self::Future {
        let config = self.config.clone();
        let role = req.role();
        let offer = setup_message(req.offer(), &config);
        let connect = self.inner.call(req.into_target());
        Box::pin(async move {
            let io = connect.await.map_err(|err| Error::Connect(err.into().into()))?;
            exchange(io, role, offer, &config).await
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

async fn exchange<IO>(io: IO, role: Role, offer: Setup, config: &Config) -> Result<Channel<IO>, Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let deadline = started + config.timeout;
    let ours = offer.encode_to_vec();
    let mut framed = Framed::with_capacity(
        io,
        FrameCodec::new(config.max_setup_size),
        HANDSHAKE_READ_CAPACITY,
    );
    let outcome = tokio::time::timeout_at(deadline, async {
        // Send first, without waiting for the peer: one round trip in all.
        framed.send((FrameKind::Setup, &ours[..])).await?;
        let frame = framed.next().await.ok_or(Error::Truncated)??;
        match frame.kind {
            FrameKind::Setup => {}
            FrameKind::Close => return Err(parse_close(&frame.payload)?.unwrap_or(Error::Truncated)),
            got => {
                return Err(Error::UnexpectedFrame {
                    expected: "Setup",
                    got,
                })
            }
        }
        let theirs = Setup::decode(&frame.payload[..]).map_err(Error::SetupDecode)?;
        let agreement = agree(&offer, &theirs, role)?;
        Ok((frame.payload, theirs, agreement))
    })
    .await
    .unwrap_or(Err(Error::HandshakeTimeout(config.timeout)));

    let (their_bytes, theirs, agreement) = match outcome {
        Ok(agreed) => agreed,
        Err(err) => {
            debug!(error = %err, "negotiation failed");
            if err.warrants_close() {
                // Tell the peer why, in the clear: there are no keys yet.
                let close = encode_close(err.close_code(), &err.to_string());
                let _ =
                    tokio::time::timeout(ABORT_FLUSH_TIMEOUT, framed.send((FrameKind::Close, &close[..])))
                        .await;
            }
            return Err(err);
        }
    };

    let transcript = match role {
        Role::Dialer => transcript_hash(&ours, &their_bytes),
        Role::Acceptor => transcript_hash(&their_bytes, &ours),
    };
    let handshake = HandshakeState {
        transcript,
        peer_ephemeral: theirs.ephemeral_key[..].try_into().ok(),
        started,
        deadline,
    };
    let parts = framed.into_parts();
    let mut channel = Channel::from_parts(parts.io, parts.read_buf, parts.write_buf, agreement, handshake);
    channel.finish_handshake_step();
    debug!(version = channel.agreement().version(), suite = %channel.agreement().suite(), "setup agreed");
    Ok(channel)
}
