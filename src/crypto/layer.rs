use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};
use tracing::debug;

use super::{ephemeral::EphemeralPool, Authenticated, Ephemeral, Identity, ProofSent, Rejected};
use crate::{
    error::{Error, Repr},
    frame::FrameKind,
    handshake::{CipherSuite, EncryptionOffer, Handshake, PeerId, Role},
    record::{before, sealed::Sealed, Channel, HandshakeState, UpdatePolicy},
    setup::Negotiated,
};

type Authorizer = Arc<dyn Fn(&PeerId) -> bool + Send + Sync>;

/// Encrypts and authenticates the channel: offers an ephemeral X25519 key
/// and our cipher suites in Setup, then each side proves its [`Identity`] in
/// its first sealed record.
///
/// ```
/// use weft::{handshake::CipherSuite, EncryptLayer, Identity};
///
/// let layer = EncryptLayer::new(Identity::generate())
///     .suites([CipherSuite::ChaCha20Poly1305, CipherSuite::XSalsa20Poly1305])
///     .authorize(|peer| peer.as_bytes()[0] != 0);
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct EncryptLayer {
    identity: Arc<Identity>,
    suites: Vec<CipherSuite>,
    authorizer: Option<Authorizer>,
    ephemerals: EphemeralPool,
    key_update_every: Option<u64>,
}

impl std::fmt::Debug for EncryptLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptLayer")
            .field("identity", &self.identity)
            .field("suites", &self.suites)
            .field("authorizer", &self.authorizer.is_some())
            .finish_non_exhaustive()
    }
}

impl EncryptLayer {
    /// Encryption as `identity`, with [`CipherSuite::default_order`].
    pub fn new(identity: Identity) -> Self {
        Self::with_shared_identity(Arc::new(identity))
    }

    /// The same, for an identity shared with other stacks.
    pub fn with_shared_identity(identity: Arc<Identity>) -> Self {
        Self {
            identity,
            suites: CipherSuite::default_order(),
            authorizer: None,
            ephemerals: EphemeralPool::default(),
            key_update_every: None,
        }
    }

    /// The suites we accept, most preferred first. Include
    /// [`CipherSuite::Plaintext`] to allow an unencrypted channel when the
    /// peer allows it too. Duplicates are dropped.
    ///
    /// # Panics
    ///
    /// If `order` is empty.
    pub fn suites(mut self, order: impl IntoIterator<Item = CipherSuite>) -> Self {
        self.suites.clear();
        for suite in order {
            if !self.suites.contains(&suite) {
                self.suites.push(suite);
            }
        }
        assert!(
            !self.suites.is_empty(),
            "EncryptLayer::suites needs at least one suite"
        );
        self
    }

    /// Allows a plaintext channel (last in our preference) when the peer
    /// allows it too. The handshake still proves both identities, but the
    /// data records that follow have no confidentiality and no integrity:
    /// anyone on the path can read and change them.
    pub fn allow_plaintext(mut self) -> Self {
        if !self.suites.contains(&CipherSuite::Plaintext) {
            self.suites.push(CipherSuite::Plaintext);
        }
        self
    }

    /// Decides who may connect: called with each peer's verified identity;
    /// `false` ends the handshake with an error of
    /// [`ErrorKind::Authentication`](crate::ErrorKind::Authentication) and
    /// tells the peer so.
    pub fn authorize(mut self, authorizer: impl Fn(&PeerId) -> bool + Send + Sync + 'static) -> Self {
        self.authorizer = Some(Arc::new(authorizer));
        self
    }

    /// With protocol version 2 agreed, each side updates its sending key
    /// every `records` records, besides (as always with version 2) once
    /// half of the key's usage limit is spent, which is what keeps a
    /// connection from ever closing with `KEY_EXHAUSTED`. A policy for
    /// those who want keys to change more often than the ciphers need
    /// (docs/PROTOCOL.md, section 8.1). With version 1, no key ever
    /// changes.
    pub fn key_update_every(mut self, records: u64) -> Self {
        self.key_update_every = Some(records.max(1));
        self
    }

    /// Our identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
}

impl<S> Layer<S> for EncryptLayer {
    type Service = Encrypt<S>;

    fn layer(&self, inner: S) -> Encrypt<S> {
        Encrypt {
            inner,
            config: self.clone(),
        }
    }
}

/// The service [`EncryptLayer`] builds.
#[derive(Debug, Clone)]
pub struct Encrypt<S> {
    inner: S,
    config: EncryptLayer,
}

impl<S> Encrypt<S> {
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

/// What an [`EncryptLayer`] takes from the layer below it: a
/// [`Negotiated`] channel, from a [`NegotiateLayer`](crate::NegotiateLayer)
/// (directly, or through a [`RecordSizeLayer`](crate::RecordSizeLayer)).
/// Sealed: the stack's layers produce these. A channel is encrypted once:
/// what `EncryptLayer` makes is not `Encryptable`.
#[diagnostic::on_unimplemented(
    message = "`EncryptLayer` cannot encrypt `{Self}`: it takes the negotiated channel `NegotiateLayer` makes",
    label = "the layer below `EncryptLayer` makes this",
    note = "`EncryptLayer` goes directly above `NegotiateLayer`, once: top to bottom, a stack reads Multiplex, \
            StreamLimit, RecordSize, Encrypt, Negotiate, then the connector"
)]
pub trait Encryptable: Sealed + Send + 'static {
    #[doc(hidden)]
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    #[doc(hidden)]
    fn into_negotiated(self) -> Negotiated<Self::Io>;
}

impl<IO> Encryptable for Negotiated<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Io = IO;
    fn into_negotiated(self) -> Self {
        self
    }
}

impl<S, T> Service<Handshake<T>> for Encrypt<S>
where
    S: Service<Handshake<T>, Error = Error>,
    S::Response: Encryptable,
    S::Future: Send + 'static,
{
    type Response = Channel<<S::Response as Encryptable>::Io>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        let ephemeral = self.config.ephemerals.take();
        req.offer_encryption(EncryptionOffer::new(
            ephemeral.public_key(),
            self.config.suites.clone(),
        ));
        let pin = req.expected_peer();
        let dialing = req.role() == Role::Dialer;
        let config = self.config.clone();
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let secured = async {
                // A dialer makes keys for later handshakes while it waits
                // for its connection and the peer's Setup. An acceptor's
                // waits each lie on the dial's path: it refills afterwards.
                let negotiated = if dialing {
                    config.ephemerals.while_waiting(handshake).await?
                } else {
                    handshake.await?
                };
                let (mut channel, mut hs) = negotiated.into_negotiated().into_parts();
                match authenticate(&mut channel, &mut hs, ephemeral, &config, pin).await {
                    Ok(authenticated) => {
                        let (peer, keys) = authenticated.into_parts();
                        if let Some((seal, open)) = keys {
                            channel.install_keys(seal, open);
                            if channel.agreement().version() >= 2 {
                                channel.enable_key_update(UpdatePolicy {
                                    every: config.key_update_every,
                                });
                            }
                        }
                        debug!(%peer, suite = %channel.agreement().suite(), "peer authenticated");
                        channel.authenticated(peer);
                        channel.set_handshake_time(hs.started.elapsed());
                        Ok(channel)
                    }
                    Err(rejected) => {
                        debug!(error = %rejected.error(), "handshake failed");
                        if let Some(close) = rejected.close_record() {
                            channel.record_io().abort_with(close).await;
                        }
                        Err(rejected.into_error())
                    }
                }
            };
            let outcome = secured.await;
            if !dialing {
                config.ephemerals.refill_in_background();
            }
            outcome
        })
    }
}

/// Keys, proofs and checks: the part of the handshake after Setup, each
/// step a state of the sans-IO core; only sending our proof and reading the
/// peer's wait for the transport (and the handshake deadline).
async fn authenticate<IO>(
    channel: &mut Channel<IO>,
    hs: &mut HandshakeState,
    ephemeral: Ephemeral,
    config: &EncryptLayer,
    pin: Option<PeerId>,
) -> Result<Authenticated, Rejected>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut timer = hs.take_timer();
    let (transcript, peer_ephemeral, timeout) = (hs.transcript, hs.peer_ephemeral, hs.deadline - hs.started);
    let agreement = channel.agreement();
    let sent = ProofSent::start(
        agreement.role(),
        agreement.suite(),
        &transcript,
        peer_ephemeral.as_ref(),
        ephemeral,
        &config.identity,
    )
    .map_err(Rejected::in_the_clear)?;
    let io = channel.record_io();
    io.queue_frame(sent.record());
    let exchange = async {
        if let Err(err) = io.flush().await {
            // A peer that refused us and left may have said why first.
            return match io.read_frame().await {
                Ok(frame) if frame.kind == FrameKind::Close => Ok(frame),
                _ => Err(err),
            };
        }
        io.read_frame().await
    };
    let exchanged = before(timer.as_mut(), exchange).await;
    let frame = match exchanged {
        Some(Ok(frame)) => frame,
        Some(Err(err)) => return Err(sent.reject(err)),
        None => return Err(sent.reject(Repr::HandshakeTimeout(timeout).into())),
    };
    let verified = sent.receive(frame)?;
    verified.authorize(pin, config.authorizer.as_deref())
}
