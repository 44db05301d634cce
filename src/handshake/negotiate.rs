//! [`NegotiateLayer`]: the innermost weft layer, which runs the whole
//! handshake over the transport its connector makes (the machine's stages
//! driven by the shell in `drive`), with what every layer above asked for;
//! and [`Negotiated`], what it makes.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};

use super::{
    drive::{self, Drive},
    early::Clock,
    exchange::{SetupSent, Start},
    proof::Learned,
    Handshake,
};
use crate::{
    error::{BoxError, Error, Repr},
    record::Channel,
    terms::{Agreement, Role, Versions},
};

/// How long a handshake may take, from transport-ready to established.
pub(super) const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest Setup message accepted from a peer. A Setup is a few dozen
/// bytes plus application protocol names; 4 KiB leaves room for growth
/// while bounding what an unauthenticated peer can make us buffer.
pub(super) const DEFAULT_MAX_SETUP_SIZE: usize = 4096;

/// Runs the handshake: sends our Setup (with every outer layer's part of
/// the offer) the moment the transport is up, reads the peer's, agrees,
/// and, with an [`EncryptLayer`](crate::EncryptLayer) above, proves and
/// verifies identities, all under one deadline.
///
/// This is the innermost weft layer: it turns the inner connector's
/// transport into a [`Negotiated`] channel, for the layers above.
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
        let encryption = req.parts.encryption.clone();
        if req.expected_peer().is_some() && encryption.is_none() {
            // Only an encryption layer verifies identities: without one a
            // pin would be silently ignored.
            return Box::pin(std::future::ready(Err(Repr::Stack(
                "a pinned peer key needs an EncryptLayer in the stack to verify it",
            )
            .into())));
        }
        let role = req.role();
        let pin = req.expected_peer();
        let start = Start {
            role,
            versions: config.versions,
            protocols: &config.protocols,
            max_setup_size: config.max_setup_size,
            encryption: encryption.as_ref(),
            records: req.parts.records,
            streams: req.parts.streams,
            pin,
            protocol: req.expected_protocol(),
            early_data: req.parts.early_data.as_ref(),
        };
        let sent = match SetupSent::new(start, Clock::read()) {
            Ok(sent) => sent,
            Err(err) => return Box::pin(std::future::ready(Err(err))),
        };
        let drive = Drive {
            timeout: config.timeout,
            max_setup_size: config.max_setup_size,
            records: req.parts.records,
            dialer_spare: encryption
                .filter(|_| role == Role::Dialer)
                .map(|config| (config, pin)),
        };
        let connect = self.inner.call(req.into_target());
        Box::pin(async move {
            let io = drive::connecting(&drive, connect)
                .await
                .map_err(|err| Repr::Connect(err.into().into()))?;
            drive::run(io, sent, drive).await
        })
    }
}

/// A channel whose handshake is done, made by [`NegotiateLayer`]: with an
/// [`EncryptLayer`](crate::EncryptLayer) in the stack, encrypted and its
/// peer proven, which the encryption layer above makes an encrypted
/// [`Channel`] of (and nothing else does, so a stack with the encryption
/// in the wrong place does not compile). Without one the agreed suite is
/// the plaintext one, and [`StreamLimitLayer`](crate::StreamLimitLayer) or
/// [`MultiplexLayer`](crate::MultiplexLayer) take it as it is (or
/// [`into_plaintext`](Self::into_plaintext) gives the channel).
pub struct Negotiated<IO> {
    channel: Channel<IO>,
    learned: Option<Learned>,
}

impl<IO> std::fmt::Debug for Negotiated<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Negotiated")
            .field("agreement", self.channel.agreement())
            .finish_non_exhaustive()
    }
}

impl<IO> Negotiated<IO> {
    pub(crate) fn new(channel: Channel<IO>, learned: Option<Learned>) -> Self {
        Self { channel, learned }
    }

    /// What the two Setup messages agreed.
    pub fn agreement(&self) -> &Agreement {
        self.channel.agreement()
    }

    /// The channel, to look at.
    pub fn channel(&self) -> &Channel<IO> {
        &self.channel
    }

    /// The channel, in the clear: the handshake ended with no encryption
    /// (and no identity proved), as when the stack has no
    /// [`EncryptLayer`](crate::EncryptLayer).
    pub fn into_plaintext(self) -> Channel<IO> {
        self.channel
    }

    /// The channel, and what a dialer's handshake learned for the next.
    pub(crate) fn into_parts(self) -> (Channel<IO>, Option<Learned>) {
        (self.channel, self.learned)
    }
}
