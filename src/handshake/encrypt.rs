//! [`EncryptLayer`]: what a stack asks of the handshake's cryptography
//! (an identity, suites, who may connect, early data), added to the
//! request on the way down; on the way up, what the handshake learned
//! for the next (a box key and a ticket) is kept.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite};
use tower::{Layer, Service};

use super::{proof::Learned, stage::Sealed, Handshake, Negotiated};
use crate::{
    crypto::{
        early::{
            self, Acceptance, Announced, BoxKeyCache, EarlyBudget, EarlyDataStats, KeySource, LoadSignal,
            ACCEPTED_CAPACITY,
        },
        EphemeralPool, Identity,
    },
    error::Error,
    record::Channel,
    sync::lock,
    terms::{CipherSuite, PeerId},
};

/// How often an acceptor makes a new box key, by default.
const DEFAULT_BOX_KEY_ROTATION: Duration = Duration::from_secs(24 * 60 * 60);

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

/// How an acceptor takes early data: what its [`Acceptance`] is made from.
#[derive(Clone)]
struct EarlySettings {
    rotate_every: Duration,
    keys: KeySource,
    budget: EarlyBudget,
    load: Option<LoadSignal>,
    /// As set, or (`None`) enough for the budget.
    replay_capacity: Option<usize>,
}

impl EarlySettings {
    fn new(rotate_every: Duration) -> Self {
        Self {
            rotate_every,
            keys: KeySource::Random,
            budget: EarlyBudget::default(),
            load: None,
            replay_capacity: None,
        }
    }

    /// The replay record's size: as set, or what the budget can fill
    /// (every box opened, accepted, lasting up to 22 seconds), so that
    /// strangers' early data cannot fill it within the budget; at least
    /// 65,536 and, unless set, at most 2^20 (about 100 MiB).
    fn replay_capacity(&self) -> usize {
        self.replay_capacity.unwrap_or_else(|| {
            let filled = usize::try_from(self.budget.per_second.saturating_mul(22)).unwrap_or(usize::MAX);
            filled.clamp(ACCEPTED_CAPACITY, 1 << 20)
        })
    }
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

    /// Accepts early data (protocol version 3, docs/PROTOCOL.md section
    /// 17): a dialer that pins us and learned our box key on an earlier
    /// connection may send its first stream's bytes with its Setup, and we
    /// answer them in the first round trip. Our box keys rotate daily
    /// ([`box_key_rotation`](Self::box_key_rotation)).
    ///
    /// Early data can be replayed: the layer refuses the same early data
    /// twice within its 10-second window (it remembers up to 65,536 at
    /// once, an eighth of them from one dialer, then refuses early data until
    /// some expire), but another acceptor holding the same keys would not
    /// know. Serve only requests safe to repeat from it: a stream that came
    /// early says so ([`Stream::is_early`](crate::mux::Stream::is_early));
    /// the RPC server runs only methods marked idempotent on it, and the
    /// HTTP server only safe methods. Under load early data is refused
    /// before any work is spent on it
    /// ([`early_data_budget`](Self::early_data_budget),
    /// [`refuse_early_data_when`](Self::refuse_early_data_when)).
    /// docs/SECURITY.md says what early data does not protect.
    pub fn accept_early_data(self) -> Self {
        let rotation = self
            .config
            .early_settings
            .as_ref()
            .map_or(DEFAULT_BOX_KEY_ROTATION, |early| early.rotate_every);
        self.box_key_rotation(rotation)
    }

    /// Accepts early data (as [`accept_early_data`](Self::accept_early_data))
    /// with a new box key every `every`: each key is good for twice that,
    /// so a dialer's key learned just before a rotation still works, and
    /// is wiped when it expires.
    pub fn box_key_rotation(mut self, every: Duration) -> Self {
        let settings = self.early_settings();
        self.set_early(EarlySettings {
            rotate_every: every,
            ..settings
        });
        self
    }

    /// Accepts early data (as [`accept_early_data`](Self::accept_early_data))
    /// with box keys derived from our identity and the rotation period
    /// instead of made at random: every replica that holds the same
    /// identity (and rotation) holds the same box keys, ticket keys and
    /// announcements, with no file or word between them, so a dialer that
    /// learned the key from one replica sends early data to any other, and
    /// its tickets work there too. A replica holds the current period's
    /// key and those on either side (a clock up to 10 s ahead announces the
    /// next that early), each wiped when it expires. A replica takes early
    /// data from its 11th second on: what was sent before it started, its
    /// replay record never saw.
    ///
    /// What it costs: whoever steals the identity's seed can derive every
    /// box key, past and future, and so read any early data ever sent to
    /// it that they recorded (random keys, once wiped, keep early data
    /// sent before the theft secret); and each replica keeps its own
    /// replay record, so one early data recorded on the way can be run
    /// once by each replica within its 10-second window. docs/SECURITY.md
    /// says more.
    ///
    /// ```
    /// use weft::{EncryptLayer, Identity};
    ///
    /// let seed = [7; 32]; // in practice, the fleet's secret, from a vault
    /// let replica_a = EncryptLayer::new(Identity::from_seed(&seed)).box_keys_from_identity();
    /// let replica_b = EncryptLayer::new(Identity::from_seed(&seed)).box_keys_from_identity();
    /// assert_eq!(replica_a.box_key_announcement(), replica_b.box_key_announcement());
    /// ```
    pub fn box_keys_from_identity(mut self) -> Self {
        let settings = self.early_settings();
        self.set_early(EarlySettings {
            keys: KeySource::Identity,
            ..settings
        });
        self
    }

    /// At most `per_second` boxes of early data opened a second (in bursts
    /// of as many), each an X25519 agreement: past it, early data is
    /// refused without opening its box, and the handshake goes on as
    /// version 2's (its request sent again after it). By default 1,000 a
    /// second per core. Turns early data on if it was not.
    pub fn early_data_budget(mut self, per_second: u64) -> Self {
        let settings = self.early_settings();
        self.set_early(EarlySettings {
            budget: EarlyBudget { per_second },
            ..settings
        });
        self
    }

    /// Refuses early data, without opening its box, whenever `loaded` says
    /// the acceptor is loaded (a queue past a length, a CPU past a share):
    /// as TLS and QUIC servers turn 0-RTT off under load. Called once per
    /// handshake that carries early data. Turns early data on if it was
    /// not.
    pub fn refuse_early_data_when(mut self, loaded: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        let settings = self.early_settings();
        self.set_early(EarlySettings {
            load: Some(Arc::new(loaded)),
            ..settings
        });
        self
    }

    /// Remembers at most `entries` accepted early data at once (by default
    /// 65,536, or 22 seconds of the budget if that is more; about 100
    /// bytes each): each for its 10-second window,
    /// at most an eighth of them from one dialer. When full, early data is
    /// refused until some expire, which also caps the early data accepted
    /// a second at about `entries / 10`. Turns early data on if it was
    /// not.
    pub fn early_data_replay_capacity(mut self, entries: usize) -> Self {
        let settings = self.early_settings();
        self.set_early(EarlySettings {
            replay_capacity: Some(entries.max(1)),
            ..settings
        });
        self
    }

    fn early_settings(&self) -> EarlySettings {
        self.config
            .early_settings
            .clone()
            .unwrap_or_else(|| EarlySettings::new(DEFAULT_BOX_KEY_ROTATION))
    }

    fn set_early(&mut self, settings: EarlySettings) {
        let acceptance = Acceptance::new(
            settings.rotate_every.as_secs().max(1),
            settings.keys,
            settings.budget,
            settings.load.clone(),
            settings.replay_capacity(),
        );
        let config = self.config_mut();
        config.early = Some(Arc::new(acceptance));
        config.early_settings = Some(settings);
    }

    /// What this acceptor did with the early data it was offered, counted
    /// across its clones and handshakes: `None` if it does not accept
    /// early data.
    pub fn early_data_stats(&self) -> Option<EarlyDataStats> {
        self.config.early.as_ref().map(|early| early.stats())
    }

    /// The suites we accept, most preferred first. Include
    /// [`CipherSuite::Plaintext`] to allow an unencrypted channel when the
    /// peer allows it too. Duplicates are dropped.
    ///
    /// # Panics
    ///
    /// If `order` is empty.
    pub fn suites(mut self, order: impl IntoIterator<Item = CipherSuite>) -> Self {
        let suites = &mut self.config_mut().suites;
        suites.clear();
        for suite in order {
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        assert!(
            !suites.is_empty(),
            "EncryptLayer::suites needs at least one suite"
        );
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

    /// Our current box key announcement (104 bytes: the key, its expiry,
    /// our signature), when we accept early data: what a dialer learns on
    /// its first connection, to hand to dialers ahead of it
    /// ([`with_box_key`](Self::with_box_key)) so that even their first call
    /// goes early. Makes our first box key if there is none yet; with
    /// rotation, hand out the new one before the old expires.
    pub fn box_key_announcement(&self) -> Option<Vec<u8>> {
        let acceptance = self.config.early.as_ref()?;
        let key = acceptance.current_key(&self.config.identity, early::unix_ms() / 1000);
        Some(key.announcement.to_vec())
    }

    /// Knows `peer`'s box key from its `announcement`
    /// ([`box_key_announcement`](Self::box_key_announcement) on its side),
    /// as if learned on an earlier connection: a dial that pins `peer`
    /// can send early data from the first. Fails if the announcement is
    /// not one `peer` signed, or announces a key of small order; an
    /// expired one is kept and simply not used.
    pub fn with_box_key(self, peer: PeerId, announcement: &[u8]) -> Result<Self, crate::ParseError> {
        let key = Announced::verify(announcement, &peer).ok_or_else(|| {
            let hex: String = announcement.iter().take(32).map(|b| format!("{b:02x}")).collect();
            crate::ParseError::new("a box key announcement signed by the peer given", &hex)
        })?;
        lock(&self.config.box_keys).learn_verified(peer, key, announcement);
        Ok(self)
    }

    /// Calls `learned` with each box key announcement a dialer of this
    /// layer learns, new or rotated (once per key, unexpired, and only one
    /// expiring later than any before for that acceptor; outside any
    /// lock): keep them, and hand them to
    /// [`with_box_key`](Self::with_box_key) when the process starts again,
    /// so that its first call to each acceptor goes early too. An
    /// announcement is public (a key, its expiry, the acceptor's
    /// signature): no secret to guard. Tickets are not handed out: their
    /// secrets stay in memory. It runs on the handshake's task: keep it
    /// short (an append, or a send to a task that writes).
    ///
    /// ```no_run
    /// use std::io::Write;
    /// use weft::{handshake::PeerId, EncryptLayer, Identity};
    ///
    /// # fn hex(bytes: &[u8]) -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() }
    /// # fn unhex(text: &str) -> Vec<u8> { (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect() }
    /// # fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// // At start: every announcement kept, one `peer announcement` per line.
    /// let mut layer = EncryptLayer::new(Identity::generate());
    /// for line in std::fs::read_to_string("box-keys.txt").unwrap_or_default().lines() {
    ///     if let Some((peer, announcement)) = line.split_once(' ') {
    ///         layer = layer.with_box_key(peer.parse::<PeerId>()?, &unhex(announcement))?;
    ///     }
    /// }
    /// // From then on: each one learned, appended.
    /// let layer = layer.on_box_key_learned(|peer, announcement| {
    ///     let line = format!("{peer} {}\n", hex(announcement));
    ///     let file = std::fs::OpenOptions::new().create(true).append(true).open("box-keys.txt");
    ///     let _ = file.and_then(|mut file| file.write_all(line.as_bytes()));
    /// });
    /// let dialer = weft::dialer_with(layer);
    /// # let _ = dialer; Ok(()) }
    /// ```
    pub fn on_box_key_learned(mut self, learned: impl Fn(&PeerId, &[u8]) + Send + Sync + 'static) -> Self {
        self.config_mut().learned = Some(Arc::new(learned));
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
