//! [`EncryptLayer`]'s early data settings (protocol version 3): as an
//! acceptor, whether and how it takes early data (box keys, their
//! rotation and source, the budget, the load signal, the replay record);
//! as a dialer, the box keys it knows ahead and keeps.

use std::{sync::Arc, time::Duration};

use super::EncryptLayer;
use crate::{
    crypto::early::{
        self, Acceptance, Announced, EarlyBudget, EarlyDataStats, KeySource, LoadSignal, ACCEPTED_CAPACITY,
    },
    sync::lock,
    terms::PeerId,
};

/// How often an acceptor makes a new box key, by default.
const DEFAULT_BOX_KEY_ROTATION: Duration = Duration::from_secs(24 * 60 * 60);

/// How an acceptor takes early data: what its [`Acceptance`] is made from.
#[derive(Clone)]
pub(super) struct EarlySettings {
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

impl EncryptLayer {
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
}
