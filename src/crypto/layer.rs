use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};
use tracing::debug;
use x25519_dalek::PublicKey;

use super::{derive_record_keys, ephemeral::Ephemeral, ephemeral::EphemeralPool, verify_proof, Identity};
use crate::{
    error::Error,
    frame::FrameKind,
    handshake::{CipherSuite, EncryptionOffer, Handshake, PeerId},
    record::Channel,
};

type Authorizer = Arc<dyn Fn(&PeerId) -> bool + Send + Sync>;

/// Encrypts and authenticates the channel: offers an ephemeral X25519 key
/// and our cipher suites in Setup, then each side proves its [`Identity`] in
/// its first sealed record.
///
/// ```
/// use weft::{CipherSuite, EncryptLayer, Identity};
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
    /// `false` ends the handshake with [`Error::Unauthorized`] and tells the
    /// peer so.
    pub fn authorize(mut self, authorizer: impl Fn(&PeerId) -> bool + Send + Sync + 'static) -> Self {
        self.authorizer = Some(Arc::new(authorizer));
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

impl<S, T, IO> Service<Handshake<T>> for Encrypt<S>
where
    S: Service<Handshake<T>, Response = Channel<IO>, Error = Error>,
    S::Future: Send + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Response = Channel<IO>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Channel<IO>, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        let ephemeral = self.config.ephemerals.take();
        req.offer_encryption(EncryptionOffer::new(
            *ephemeral.public.as_bytes(),
            self.config.suites.clone(),
        ));
        let expected = req.expected_peer();
        let config = self.config.clone();
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let result = async {
                let mut channel = handshake.await?;
                let deadline = channel.deadline();
                let outcome = tokio::time::timeout_at(
                    deadline,
                    authenticate(&mut channel, ephemeral, &config, expected),
                )
                .await
                .unwrap_or_else(|_| Err(Error::HandshakeTimeout(config_timeout(&channel))));
                match outcome {
                    Ok(()) => {
                        channel.finish_handshake_step();
                        channel.handshake = None;
                        Ok(channel)
                    }
                    Err(err) => {
                        debug!(error = %err, "handshake failed");
                        channel.abort(&err).await;
                        Err(err)
                    }
                }
            }
            .await;
            // Off the critical path now: make the next connection's key.
            config.ephemerals.refill();
            result
        })
    }
}

fn config_timeout<IO>(channel: &Channel<IO>) -> std::time::Duration {
    channel
        .handshake
        .as_ref()
        .map(|hs| hs.deadline - hs.started)
        .unwrap_or_default()
}

/// Keys, proof and verification: the part of the handshake after Setup.
async fn authenticate<IO>(
    channel: &mut Channel<IO>,
    ephemeral: Ephemeral,
    config: &EncryptLayer,
    expected: Option<PeerId>,
) -> Result<(), Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let agreement = channel.agreement();
    let (role, suite) = (agreement.role(), agreement.suite());
    let hs = channel.handshake.as_ref().ok_or(Error::Stack(
        "EncryptLayer needs a NegotiateLayer beneath it, and only one EncryptLayer",
    ))?;
    let transcript = hs.transcript;
    let peer_ephemeral = hs
        .peer_ephemeral
        .ok_or(Error::InvalidSetup("peer sent no ephemeral key"))?;

    if suite != CipherSuite::Plaintext {
        let shared = ephemeral.secret.diffie_hellman(&PublicKey::from(peer_ephemeral));
        if !shared.was_contributory() {
            return Err(Error::WeakKey);
        }
        let (seal, open) = derive_record_keys(suite, shared.as_bytes(), &transcript, role);
        channel.install_keys(seal, open);
    }

    channel.queue_record(FrameKind::Auth, &config.identity.prove(role, &transcript))?;
    if let Err(err) = channel.flush_records().await {
        // A peer that refused us and left may have said why first.
        return Err(match channel.read_handshake_record().await {
            Err(reason @ Error::PeerClosed { .. }) => reason,
            _ => err,
        });
    }

    let (kind, proof) = channel.read_handshake_record().await?;
    if kind != FrameKind::Auth {
        return Err(Error::UnexpectedFrame {
            expected: "identity proof",
            got: kind,
        });
    }
    let peer = verify_proof(&proof, role.peer(), &transcript)?;
    if let Some(expected) = expected {
        if expected != peer {
            return Err(Error::PeerKeyMismatch { expected, seen: peer });
        }
    }
    if let Some(authorize) = &config.authorizer {
        if !authorize(&peer) {
            return Err(Error::Unauthorized(peer));
        }
    }
    debug!(%peer, %suite, "peer authenticated");
    channel.set_peer(peer);
    Ok(())
}
