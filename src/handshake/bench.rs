//! What the early data benchmark (`weft-bench/benches/early.rs`) drives: an acceptor
//! that takes early data and the dialers it meets, through the machine's
//! own stages (no transport). Behind the `fuzzing` feature: not an API.

use std::sync::Arc;

use bytes::Bytes;

use super::{
    early::Clock,
    encrypt::{EncryptConfig, EncryptLayer},
    exchange::{Next, SetupSent, Start},
    proof::EarlyOutcome,
};
use crate::{
    frame::{Frame, FrameKind},
    terms::{PeerId, Role, Versions},
    Identity,
};

/// Whose Setup the acceptor gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialer {
    /// No early data (a 1-RTT handshake's first step).
    Plain,
    /// Early data signed by the dialer.
    Signed,
    /// Early data with the ticket of an earlier acceptance.
    Ticketed,
    /// Early data whose box opens but which was meant for another
    /// acceptor (relayed): refused after the box is opened.
    Relayed,
}

/// What the acceptor did with a Setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted its early data.
    Accepted,
    /// Proved itself and waits for the dialer's proof: no early data, or
    /// refused.
    Proving,
}

/// An acceptor of early data, one loaded (refusing early data without
/// opening it), and dialers of each kind.
#[derive(Debug)]
pub struct EarlyBench {
    acceptor: Arc<EncryptConfig>,
    loaded: Arc<EncryptConfig>,
    /// Dialers that sign, taken in turn (each may hold an eighth of the
    /// acceptor's replay record).
    signed: Vec<Arc<EncryptConfig>>,
    ticketed: Vec<Arc<EncryptConfig>>,
    relaying: Arc<EncryptConfig>,
    turn: std::sync::atomic::AtomicUsize,
}

/// Dialers of each kind taken in turn.
const DIALERS: usize = 16;

const ACCEPTOR: u8 = 1;
const STRANGER: u8 = 3;

fn peer(seed: u8) -> PeerId {
    Identity::from_seed(&[seed; 32]).peer_id()
}

fn start(role: Role, config: &Arc<EncryptConfig>, pin: Option<PeerId>, early: Option<&Bytes>) -> SetupSent {
    SetupSent::new(
        Start {
            role,
            versions: Versions::CURRENT,
            protocols: &[],
            max_setup_size: 4096,
            encryption: Some(config),
            records: None,
            streams: None,
            pin,
            protocol: None,
            early_data: early,
        },
        Clock::read(),
    )
    .expect("a valid Setup")
}

fn frame(bytes: &[u8]) -> Frame {
    Frame {
        kind: FrameKind::Setup,
        header: FrameKind::Setup.header(bytes.len() - 4),
        payload: bytes[4..].into(),
    }
}

impl Default for EarlyBench {
    fn default() -> Self {
        Self::new()
    }
}

impl EarlyBench {
    /// The acceptor (budget unbounded), and dialers that know its box key:
    /// one with a ticket, got by a handshake run here.
    pub fn new() -> Self {
        // A record for the hundreds of thousands of early data a benchmark
        // accepts within their 10-second windows.
        let layer = EncryptLayer::new(Identity::from_seed(&[ACCEPTOR; 32]))
            .accept_early_data()
            .early_data_budget(u64::MAX / 2)
            .early_data_replay_capacity(1 << 19);
        let announcement = layer.box_key_announcement().expect("a box key");
        let knowing = |seed: u8, signer: u8, announcement: &[u8]| {
            EncryptLayer::new(Identity::from_seed(&[seed; 32]))
                .with_box_key(peer(signer), announcement)
                .expect("a verified announcement")
                .config()
                .clone()
        };
        // M announces the acceptor's key under its own identity.
        let mut message = b"weft v3 box key".to_vec();
        message.extend_from_slice(&announcement[..40]);
        let forged = [
            &announcement[..40],
            &Identity::from_seed(&[STRANGER; 32]).sign(&message)[..],
        ]
        .concat();
        let bench = Self {
            acceptor: layer.config().clone(),
            loaded: layer.clone().refuse_early_data_when(|| true).config().clone(),
            signed: (0..DIALERS)
                .map(|i| knowing(10 + i as u8, ACCEPTOR, &announcement))
                .collect(),
            ticketed: (0..DIALERS)
                .map(|i| knowing(100 + i as u8, ACCEPTOR, &announcement))
                .collect(),
            relaying: knowing(5, STRANGER, &forged),
            turn: std::sync::atomic::AtomicUsize::new(0),
        };
        for ticketed in &bench.ticketed {
            bench.get_a_ticket(ticketed);
        }
        bench
    }

    /// One whole handshake of `dialer`, which keeps the ticket it gets.
    fn get_a_ticket(&self, dialer: &Arc<EncryptConfig>) {
        let early = Bytes::from_static(b"ticket, please");
        let d_sent = start(Role::Dialer, dialer, Some(peer(ACCEPTOR)), Some(&early));
        let a_sent = start(Role::Acceptor, &self.acceptor, None, None);
        let to_dialer = frame(a_sent.frame());
        let Ok(Next::AnswerEarly(auth, _)) = a_sent
            .receive(frame(d_sent.frame()))
            .and_then(|agreed| agreed.proceed(Clock::read()))
        else {
            panic!("the acceptor accepts the early data");
        };
        let Ok(Next::Prove(proving)) = d_sent
            .receive(to_dialer)
            .and_then(|agreed| agreed.proceed(Clock::read()))
        else {
            panic!("the dialer waits for the verdict");
        };
        let auth = Frame {
            kind: FrameKind::Auth,
            header: FrameKind::Auth.header(auth.len() - 4),
            payload: auth[4..].into(),
        };
        let established = proving
            .receive(auth)
            .and_then(|verified| verified.authorize())
            .map(|authenticated| authenticated.finish())
            .expect("the dialer authenticates the acceptor");
        assert_eq!(established.early, EarlyOutcome::Sent { accepted: true });
        dialer.learn(established.learned.expect("a ticket"));
    }

    /// A new Setup frame of `dialer`'s (a new ephemeral key, so a new box).
    pub fn setup(&self, dialer: Dialer) -> Vec<u8> {
        let early = Bytes::from_static(b"\x01\x01\x00\x00\x00\x01\x00\x00\x00\x0aGET /thing");
        let turn = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % DIALERS;
        let (config, pin) = match dialer {
            Dialer::Plain => (&self.signed[turn], None),
            Dialer::Signed => (&self.signed[turn], Some(peer(ACCEPTOR))),
            Dialer::Ticketed => (&self.ticketed[turn], Some(peer(ACCEPTOR))),
            Dialer::Relayed => (&self.relaying, Some(peer(STRANGER))),
        };
        let early = pin.map(|_| &early);
        start(Role::Dialer, config, pin, early).frame().to_vec()
    }

    /// The acceptor's first step on `setup`: its own Setup made, the
    /// dialer's read and agreed, early data judged, keys derived and its
    /// Auth made (`loaded`: the acceptor whose load signal says loaded).
    pub fn accept(&self, setup: &[u8], loaded: bool) -> Verdict {
        let config = if loaded { &self.loaded } else { &self.acceptor };
        let next = start(Role::Acceptor, config, None, None)
            .receive(frame(setup))
            .and_then(|agreed| agreed.proceed(Clock::read()))
            .expect("a valid handshake");
        match next {
            Next::AnswerEarly(..) => Verdict::Accepted,
            Next::Prove(_) => Verdict::Proving,
            Next::Established(_) => unreachable!("both sides encrypt"),
        }
    }
}
