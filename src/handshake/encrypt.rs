//! [`EncryptLayer`]: what a stack asks of the handshake's cryptography
//! (an identity, suites, who may connect, early data), added to the
//! request on the way down; on the way up, what the handshake learned
//! for the next (a box key and a ticket) is kept.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};

use super::{proof::Learned, stage::Sealed, Handshake, Negotiated};
use crate::{
    crypto::{
        early::{self, Acceptance, Announced, BoxKeyCache},
        EphemeralPool, Identity,
    },
    error::Error,
    record::Channel,
    sync::lock,
    terms::{CipherSuite, PeerId},
};

mod early_settings;

use early_settings::EarlySettings;

pub(crate) type Authorizer = Arc<dyn Fn(&PeerId) -> bool + Send + Sync>;
type LearnedHook = Arc<dyn Fn(&PeerId, &[u8]) + Send + Sync>;

/// What an [`EncryptLayer`] asks of a handshake, shared by its
/// handshakes and its clones: cheap to hand each request.
#[derive(Clone)]
pub(crate) struct EncryptConfig {
    pub(crate) identity: Arc<Identity>,
    pub(crate) suites: Vec<CipherSuite>,
    pub(crate) authorizer: Option<Authorizer>,
    pub(crate) ephemerals: EphemeralPool,
    pub(crate) key_update_every: Option<u64>,
    /// Box keys learned from acceptors, for early data (dialing).
    pub(crate) box_keys: Arc<Mutex<BoxKeyCache>>,
    /// Our box keys, replay record and budget, if we accept early data.
    pub(crate) early: Option<Arc<Acceptance>>,
    /// Told each box key announcement a dialer learns (to keep).
    learned: Option<LearnedHook>,
    early_settings: Option<EarlySettings>,
}

impl std::fmt::Debug for EncryptConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptConfig")
            .field("identity", &self.identity)
            .field("suites", &self.suites)
            .finish_non_exhaustive()
    }
}

impl EncryptConfig {
    /// Keeps what a dialer's handshake learned: the acceptor's box key
    /// (its signature verified outside the cache's lock, unless it is the
    /// one we hold) and the ticket that came with it.
    pub(crate) fn learn(&self, learned: Learned) {
        let Learned {
            peer,
            announcement,
            ticket,
        } = learned;
        if !lock(&self.box_keys).holds(&peer, &announcement) {
            let Some(key) = Announced::verify(&announcement, &peer) else {
                return;
            };
            // (An expired one is not kept: a dialer whose clock is ahead
            // would never use it.)
            if !key.valid_at(early::unix_ms() / 1000) {
                return;
            }
            // Decided under the lock, so that two dials learning the same
            // key at once hand it on once.
            let news = lock(&self.box_keys).learn_verified(peer, key, &announcement);
            if let (true, Some(hook)) = (news, &self.learned) {
                hook(&peer, &announcement);
            }
        }
        if let Some(ticket) = ticket {
            lock(&self.box_keys).keep_ticket(&peer, &announcement, ticket);
        }
    }
}

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
    config: Arc<EncryptConfig>,
}

impl std::fmt::Debug for EncryptLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptLayer")
            .field("identity", &self.config.identity)
            .field("suites", &self.config.suites)
            .field("authorizer", &self.config.authorizer.is_some())
            .field("early_data", &self.config.early.is_some())
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
            config: Arc::new(EncryptConfig {
                identity,
                suites: CipherSuite::default_order(),
                authorizer: None,
                ephemerals: EphemeralPool::default(),
                key_update_every: None,
                box_keys: Arc::default(),
                early: None,
                learned: None,
                early_settings: None,
            }),
        }
    }

    /// What the layer asks of a handshake (for the machine's tests).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn config(&self) -> &Arc<EncryptConfig> {
        &self.config
    }

    fn config_mut(&mut self) -> &mut EncryptConfig {
        Arc::make_mut(&mut self.config)
    }

    /// The suites we accept, most preferred first. Include
    /// [`CipherSuite::Plaintext`] to allow an unencrypted channel when the
    /// peer allows it too. Duplicates are dropped. An empty `order` leaves
    /// the layer no suite: each handshake then fails before anything is
    /// sent, with an error that says so.
    pub fn suites(mut self, order: impl IntoIterator<Item = CipherSuite>) -> Self {
        let suites = &mut self.config_mut().suites;
        suites.clear();
        for suite in order {
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        self
    }

    /// Allows a plaintext channel (last in our preference) when the peer
    /// allows it too. The handshake still proves both identities, but the
    /// data records that follow have no confidentiality and no integrity:
    /// anyone on the path can read and change them.
    pub fn allow_plaintext(mut self) -> Self {
        let suites = &mut self.config_mut().suites;
        if !suites.contains(&CipherSuite::Plaintext) {
            suites.push(CipherSuite::Plaintext);
        }
        self
    }

    /// Decides who may connect: called with each peer's verified identity;
    /// `false` ends the handshake with an error of
    /// [`ErrorKind::Authentication`](crate::ErrorKind::Authentication) and
    /// tells the peer so.
    pub fn authorize(mut self, authorizer: impl Fn(&PeerId) -> bool + Send + Sync + 'static) -> Self {
        self.config_mut().authorizer = Some(Arc::new(authorizer));
        self
    }

    /// With protocol version 2 or 3 agreed, each side updates its sending
    /// key every `records` records, besides (as always with those versions)
    /// once half of the key's usage limit is spent, which is what keeps a
    /// connection from ever closing with `KEY_EXHAUSTED`. A policy for
    /// those who want keys to change more often than the ciphers need
    /// (docs/PROTOCOL.md, section 8.1). With version 1, no key ever
    /// changes.
    pub fn key_update_every(mut self, records: u64) -> Self {
        self.config_mut().key_update_every = Some(records.max(1));
        self
    }

    /// Our identity.
    pub fn identity(&self) -> &Identity {
        &self.config.identity
    }
}

impl<S> Layer<S> for EncryptLayer {
    type Service = Encrypt<S>;

    fn layer(&self, inner: S) -> Encrypt<S> {
        Encrypt {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service [`EncryptLayer`] builds.
#[derive(Clone)]
pub struct Encrypt<S> {
    inner: S,
    config: Arc<EncryptConfig>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Encrypt<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encrypt")
            .field("inner", &self.inner)
            .field("identity", &self.config.identity)
            .finish_non_exhaustive()
    }
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
        let accepting = req.role() == crate::terms::Role::Acceptor;
        req.parts.encryption = Some(self.config.clone());
        let config = self.config.clone();
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let outcome = handshake.await;
            // An acceptor's waits inside a handshake each lie on the dial's
            // path: it makes its keys for the next ones afterwards.
            if accepting {
                config.ephemerals.refill_in_background();
            }
            let (channel, learned) = outcome?.into_negotiated().into_parts();
            if let Some(learned) = learned {
                config.learn(learned);
            }
            Ok(channel)
        })
    }
}
