use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};
use tracing::debug;

use super::{
    auth::AuthV3,
    early::ProofKey,
    early::{self, Acceptance, BoxKeyCache, EarlyAccepted},
    early_layer::{judge_early, lock, prepare_early, seal_early},
    ephemeral::EphemeralPool,
    Authenticated, Ephemeral, Identity, ProofSent, Rejected, EARLY_ACCEPTED,
};
use crate::{
    error::{Error, Repr},
    frame::FrameKind,
    handshake::{CipherSuite, EncryptionOffer, Handshake, PeerId, Role},
    record::{before, sealed::Sealed, Channel, HandshakeState, RecordKey, UpdatePolicy},
    setup::Negotiated,
};

/// How often an acceptor makes a new box key, by default.
const DEFAULT_BOX_KEY_ROTATION: Duration = Duration::from_secs(24 * 60 * 60);

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
    pub(super) identity: Arc<Identity>,
    suites: Vec<CipherSuite>,
    pub(super) authorizer: Option<Authorizer>,
    pub(super) ephemerals: EphemeralPool,
    key_update_every: Option<u64>,
    /// Box keys learned from acceptors, for early data (dialing).
    pub(super) box_keys: Arc<Mutex<BoxKeyCache>>,
    /// Our box keys and replay record, if we accept early data.
    pub(super) early: Option<Arc<Acceptance>>,
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
            box_keys: Arc::default(),
            early: None,
        }
    }

    /// Accepts early data (protocol version 3, docs/PROTOCOL.md section
    /// 17): a dialer that pins us and learned our box key on an earlier
    /// connection may send its first stream's bytes with its Setup, and we
    /// answer them in the first round trip. Our box keys rotate daily
    /// ([`box_key_rotation`](Self::box_key_rotation)).
    ///
    /// Early data can be replayed: the layer refuses the same early data
    /// twice within its 10-second window (it remembers up to 65,536 at
    /// once, then refuses all early data until some expire), but another
    /// acceptor holding the same keys would not know. Serve only requests
    /// safe to repeat from it: a stream that came early says so
    /// ([`Stream::is_early`](crate::mux::Stream::is_early)); the RPC server
    /// runs only methods marked idempotent on it, and the HTTP server only
    /// safe methods. docs/SECURITY.md says what early data does not protect.
    pub fn accept_early_data(self) -> Self {
        self.box_key_rotation(DEFAULT_BOX_KEY_ROTATION)
    }

    /// Accepts early data (as [`accept_early_data`](Self::accept_early_data))
    /// with a new box key every `every`: each key is good for twice that,
    /// so a dialer's key learned just before a rotation still works, and
    /// is wiped when it expires.
    pub fn box_key_rotation(mut self, every: Duration) -> Self {
        self.early = Some(Arc::new(Acceptance::new(every.as_secs().max(1))));
        self
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

    /// Our current box key announcement (104 bytes: the key, its expiry,
    /// our signature), when we accept early data: what a dialer learns on
    /// its first connection, to hand to dialers ahead of it
    /// ([`with_box_key`](Self::with_box_key)) so that even their first call
    /// goes early. Makes our first box key if there is none yet; with
    /// rotation, hand out the new one before the old expires.
    pub fn box_key_announcement(&self) -> Option<Vec<u8>> {
        let acceptance = self.early.as_ref()?;
        let now_s = early::unix_ms() / 1000;
        Some(
            lock(&acceptance.keys)
                .announcement(&self.identity, now_s)
                .to_vec(),
        )
    }

    /// Knows `peer`'s box key from its `announcement`
    /// ([`box_key_announcement`](Self::box_key_announcement) on its side),
    /// as if learned on an earlier connection: a dial that pins `peer`
    /// can send early data from the first. Fails if the announcement is
    /// not one `peer` signed; an expired one is kept and simply not used.
    pub fn with_box_key(self, peer: PeerId, announcement: &[u8]) -> Result<Self, crate::ParseError> {
        let key = early::Announced::verify(announcement, &peer).ok_or_else(|| {
            let hex: String = announcement.iter().take(32).map(|b| format!("{b:02x}")).collect();
            crate::ParseError::new("a box key announcement signed by the peer given", &hex)
        })?;
        lock(&self.box_keys).learn_verified(peer, key, announcement);
        Ok(self)
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
        let pin = req.expected_peer();
        let dialing = req.role() == Role::Dialer;
        let (ephemeral, early_key) = if dialing {
            seal_early(&mut req, &self.config, pin)
        } else {
            (self.config.ephemerals.take(), None)
        };
        req.offer_encryption(EncryptionOffer::new(
            ephemeral.public_key(),
            self.config.suites.clone(),
        ));
        let config = self.config.clone();
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let secured = async {
                // A dialer makes keys for later handshakes while it waits
                // for its connection and the peer's Setup, and a box for
                // its next early data to this peer once its own Setup has
                // gone, while it waits for the peer's Auth. An acceptor's
                // waits each lie on the dial's path: it refills afterwards.
                let negotiated = if dialing {
                    config.ephemerals.while_waiting(handshake, || false).await?
                } else {
                    handshake.await?
                };
                let (mut channel, mut hs) = negotiated.into_negotiated().into_parts();
                let authenticating = authenticate(&mut channel, &mut hs, ephemeral, &config, pin, early_key);
                let authenticated = if dialing {
                    let spare = {
                        let config = config.clone();
                        move || prepare_early(&config, pin)
                    };
                    config.ephemerals.while_waiting(authenticating, spare).await
                } else {
                    authenticating.await
                };
                match authenticated {
                    Ok(Secured::Verified(authenticated)) => {
                        let (peer, keys, extras) = authenticated.into_parts();
                        if let Some((seal, open)) = keys {
                            channel.install_keys(seal, open);
                        }
                        enable_key_update(&mut channel, &config);
                        if let Some(bytes) = extras.announcement {
                            // Checked against the identity the proof showed.
                            let mut cache = lock(&config.box_keys);
                            cache.learn(peer, &bytes);
                            if let Some(ticket) = extras.ticket.as_deref().and_then(early::Ticket::from_auth)
                            {
                                cache.keep_ticket(&peer, &bytes, ticket);
                            }
                        }
                        channel.set_early_accepted(hs.early.sent && extras.early_status == EARLY_ACCEPTED);
                        debug!(%peer, suite = %channel.agreement().suite(), "peer authenticated");
                        channel.authenticated(peer);
                        channel.set_handshake_time(hs.started.elapsed());
                        Ok(channel)
                    }
                    Ok(Secured::Early(early, keys)) => {
                        if let Some((seal, open)) = keys {
                            channel.install_keys(seal, open);
                        }
                        enable_key_update(&mut channel, &config);
                        debug!(peer = %early.dialer, "early data accepted");
                        channel.set_unread(early.payload);
                        channel.set_early_accepted(true);
                        channel.authenticated(early.dialer);
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

/// With version 2 or later agreed and keys installed, key update.
fn enable_key_update<IO>(channel: &mut Channel<IO>, config: &EncryptLayer) {
    if channel.agreement().version() >= 2 && channel.agreement().suite() != CipherSuite::Plaintext {
        channel.enable_key_update(UpdatePolicy {
            every: config.key_update_every,
        });
    }
}

/// How the handshake ended well: the peer's proof verified, or (an
/// acceptor) early data accepted, which proved who the dialer is.
enum Secured {
    Verified(Authenticated),
    Early(EarlyAccepted, Option<(RecordKey, RecordKey)>),
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
    early_key: Option<ProofKey>,
) -> Result<Secured, Rejected>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut timer = hs.take_timer();
    let (transcript, peer_ephemeral, timeout) = (hs.transcript, hs.peer_ephemeral, hs.deadline - hs.started);
    let agreement = channel.agreement();
    let v3 = agreement.version() >= 3;
    let (role, suite) = (agreement.role(), agreement.suite());
    // An acceptor's Auth under version 3: the early data's status and our
    // box key, after the proof.
    let mut extension = Vec::new();
    let mut accepted: Option<EarlyAccepted> = None;
    // Our early data's proof key, if it went under version 3.
    let mut early_key = early_key.filter(|_| v3 && hs.early.sent);
    if v3 && role == Role::Acceptor {
        let (status, early) = judge_early(hs, config, pin, suite);
        early_key = early.as_ref().map(|early| early.proof_key.clone());
        accepted = early;
        extension.push(status);
        if let Some(acceptance) = &config.early {
            let now_s = early::unix_ms() / 1000;
            let mut keys = lock(&acceptance.keys);
            extension.extend_from_slice(&keys.announcement(&config.identity, now_s));
            // Accepted early data showed who the dialer is: a ticket, so
            // that its next early data needs no signature.
            if let Some(ticket) = accepted
                .as_ref()
                .and_then(|early| keys.issue_ticket(&early.dialer))
            {
                extension.extend_from_slice(&ticket);
            }
        }
    }
    let sent = ProofSent::start(
        role,
        suite,
        &transcript,
        peer_ephemeral.as_ref(),
        ephemeral,
        &config.identity,
        AuthV3 {
            agreed: v3,
            extension: &extension,
            early: early_key,
        },
    )
    .map_err(Rejected::in_the_clear)?;
    let io = channel.record_io();
    if !sent.record().is_empty() {
        io.queue_frame(sent.record());
    }
    if let Some(early) = accepted {
        // Our answer may follow our Auth at once: the dialer sends no
        // Auth, and its first record, which only its ephemeral key's
        // holder can seal, shows it is there.
        return match before(timer.as_mut(), io.flush()).await {
            Some(Ok(())) => Ok(Secured::Early(early, sent.accepted_early())),
            Some(Err(err)) => Err(sent.reject(err)),
            None => Err(sent.reject(Repr::HandshakeTimeout(timeout).into())),
        };
    }
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
    let mut authenticated = verified.authorize(pin, config.authorizer.as_deref())?;
    // A dialer whose early data was not accepted proves itself now.
    let owed = match authenticated.owed_proof(&config.identity) {
        Ok(owed) => owed,
        Err(err) => return Err(authenticated.reject(err)),
    };
    if let Some(record) = owed {
        io.queue_frame(&record);
        match before(timer.as_mut(), io.flush()).await {
            Some(Ok(())) => {}
            Some(Err(err)) => return Err(authenticated.reject(err)),
            None => return Err(authenticated.reject(Repr::HandshakeTimeout(timeout).into())),
        }
    }
    Ok(Secured::Verified(authenticated))
}
