//! The handshake machine, deterministically: two machines, one per role,
//! whose frames cross in memory (edited on the way where a test says so),
//! with no sockets, no clock but the one handed in, and no sleeps. Every
//! stage's transition is taken here as production takes it.

mod early;
mod early_checks;
mod hostile;
mod layers;
mod shell;
mod versions;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use super::{
    early::Clock,
    encrypt::{EncryptConfig, EncryptLayer},
    exchange::{Next, SetupSent, Start},
    proof::{EarlyOutcome, Established, ProofSent, Rejected},
};
use crate::{
    crypto::{early::ProofKey, Identity},
    error::{Error, Repr},
    frame::{Frame, FrameCodec, FrameKind},
    record::RecordKey,
    terms::{CipherSuite, PeerId, Role, Versions},
};

const MAX_SETUP: usize = 4096;

/// The clocks, as the shell reads them: box keys and announcements are
/// made on the system clock.
fn clock() -> Clock {
    Clock::read()
}

fn ident(seed: u8) -> Identity {
    Identity::from_seed(&[seed; 32])
}

fn peer(seed: u8) -> PeerId {
    ident(seed).peer_id()
}

/// One side, as its stack's layers describe it.
#[derive(Clone)]
struct Side {
    role: Role,
    versions: Versions,
    protocols: Vec<String>,
    encryption: Option<Arc<EncryptConfig>>,
    pin: Option<PeerId>,
    protocol: Option<String>,
    early_data: Option<Bytes>,
    streams: Option<crate::handshake::offer::StreamOffer>,
}

impl Side {
    /// A side with identity `seed`, every default.
    fn new(role: Role, seed: u8) -> Self {
        Self::with(role, EncryptLayer::new(ident(seed)))
    }

    fn with(role: Role, layer: EncryptLayer) -> Self {
        Self {
            role,
            versions: Versions::CURRENT,
            protocols: Vec::new(),
            encryption: Some(layer.config().clone()),
            pin: None,
            protocol: None,
            early_data: None,
            streams: None,
        }
    }

    fn dialer(seed: u8) -> Self {
        Self::new(Role::Dialer, seed)
    }

    fn acceptor(seed: u8) -> Self {
        Self::new(Role::Acceptor, seed)
    }

    /// An acceptor of identity `seed` that takes early data.
    fn early_acceptor(seed: u8) -> (Self, EncryptLayer) {
        let layer = EncryptLayer::new(ident(seed)).accept_early_data();
        (Self::with(Role::Acceptor, layer.clone()), layer)
    }

    fn suites(mut self, suites: &[CipherSuite]) -> Self {
        let config = self.encryption.as_mut().expect("an encrypting side");
        Arc::make_mut(config).suites = suites.to_vec();
        self
    }

    fn versions(mut self, min: u32, max: u32) -> Self {
        self.versions = Versions::new(min, max);
        self
    }

    fn plaintext_stack(mut self) -> Self {
        self.encryption = None;
        self
    }

    fn pin(mut self, seed: u8) -> Self {
        self.pin = Some(peer(seed));
        self
    }

    fn early(mut self, data: &'static [u8]) -> Self {
        self.early_data = Some(Bytes::from_static(data));
        self
    }

    fn start(&self) -> Result<SetupSent, Error> {
        self.start_at(clock())
    }

    fn start_at(&self, clock: Clock) -> Result<SetupSent, Error> {
        SetupSent::new(
            Start {
                role: self.role,
                versions: self.versions,
                protocols: &self.protocols,
                max_setup_size: MAX_SETUP,
                encryption: self.encryption.as_ref(),
                records: None,
                streams: self.streams,
                pin: self.pin,
                protocol: self.protocol.as_deref(),
                early_data: self.early_data.as_ref(),
            },
            clock,
        )
    }
}

/// Whether a Setup frame carries early data (field 10).
fn carries_early(setup: &[u8]) -> bool {
    let setup: crate::proto::Setup = prost::Message::decode(&setup[crate::frame::HEADER_LEN..]).unwrap();
    !setup.early_data.is_empty()
}

/// The one frame in `bytes`.
fn frame(bytes: &[u8]) -> Frame {
    let mut buf = BytesMut::from(bytes);
    let frame = FrameCodec::new(64 * 1024).decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty(), "one frame");
    frame
}

/// Which frame of the handshake a test may edit on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    DialerSetup,
    AcceptorSetup,
    AcceptorAuth,
    DialerAuth,
}

/// What each side's machine ended with, and the frames that crossed.
struct Outcome {
    dialer: Result<Established, Rejected>,
    acceptor: Result<Established, Rejected>,
    /// Each frame as sent (before any edit), in order.
    sent: Vec<(Step, Vec<u8>)>,
}

impl Outcome {
    fn both(self) -> (Established, Established) {
        (
            self.dialer.expect("the dialer established"),
            self.acceptor.expect("the acceptor established"),
        )
    }
}

fn no_edit(_: Step, _: &mut Vec<u8>) {}

/// Runs both machines over memory, as the shell would: the Setups cross,
/// each side proceeds, and the Auth records cross in the order the
/// protocol allows (a dialer whose early data awaits a verdict proves
/// itself after the acceptor's Auth). `edit` sees every frame on its way.
fn run(d: &Side, a: &Side, edit: impl FnMut(Step, &mut Vec<u8>)) -> Outcome {
    run_with(d.start().unwrap(), a.start().unwrap(), edit, |_| {})
}

/// [`run`] from Setups made already, with `lie` applied to the dialer's
/// proving stage before the acceptor's Auth reaches it.
fn run_with(
    d_sent: SetupSent,
    a_sent: SetupSent,
    mut edit: impl FnMut(Step, &mut Vec<u8>),
    lie: impl FnOnce(&mut ProofSent),
) -> Outcome {
    let mut sent = Vec::new();
    let mut cross = |step: Step, bytes: &[u8], sent: &mut Vec<(Step, Vec<u8>)>| {
        sent.push((step, bytes.to_vec()));
        let mut bytes = bytes.to_vec();
        edit(step, &mut bytes);
        frame(&bytes)
    };
    let to_acceptor = cross(Step::DialerSetup, d_sent.frame(), &mut sent);
    let to_dialer = cross(Step::AcceptorSetup, a_sent.frame(), &mut sent);
    let d_next = d_sent
        .receive(to_dialer)
        .and_then(|agreed| agreed.proceed(clock()));
    let a_next = a_sent
        .receive(to_acceptor)
        .and_then(|agreed| agreed.proceed(clock()));
    // The acceptor's Auth (or its end without proofs).
    let (mut acceptor, a_proving, a_auth) = match a_next {
        Err(rejected) => (Some(Err(rejected)), None, None),
        Ok(Next::Established(established)) => (Some(Ok(*established)), None, None),
        Ok(Next::AnswerEarly(record, established)) => (Some(Ok(*established)), None, Some(record)),
        Ok(Next::Prove(proving)) => {
            let record = proving.record().to_vec();
            (None, Some(proving), Some(record))
        }
    };
    let a_auth = a_auth.map(|record| cross(Step::AcceptorAuth, &record, &mut sent));
    // The dialer's: its Auth first unless it waits on a verdict, then the
    // acceptor's read, then the proof it owes, if any.
    let mut d_auth = None;
    let dialer = match d_next {
        Err(rejected) => Err(rejected),
        Ok(Next::Established(established)) => Ok(*established),
        Ok(Next::AnswerEarly(..)) => panic!("a dialer never answers early data"),
        Ok(Next::Prove(mut proving)) => {
            if !proving.record().is_empty() {
                d_auth = Some(proving.record().to_vec());
            }
            lie(&mut proving);
            match a_auth {
                None => Err(proving.reject(Repr::Truncated.into())),
                Some(a_auth) => proving
                    .receive(a_auth)
                    .and_then(|verified| verified.authorize())
                    .and_then(|mut authenticated| {
                        match authenticated.owed_proof() {
                            Ok(Some(owed)) => d_auth = Some(owed),
                            Ok(None) => {}
                            Err(err) => return Err(authenticated.reject(err)),
                        }
                        Ok(authenticated.finish())
                    }),
            }
        }
    };
    if let Some(proving) = a_proving {
        acceptor = Some(match d_auth {
            Some(record) => {
                let record = cross(Step::DialerAuth, &record, &mut sent);
                proving
                    .receive(record)
                    .and_then(|verified| verified.authorize())
                    .map(|mut authenticated| {
                        assert!(
                            authenticated.owed_proof().unwrap().is_none(),
                            "an acceptor owes nothing"
                        );
                        authenticated.finish()
                    })
            }
            None => Err(proving.reject(Repr::Truncated.into())),
        });
    }
    Outcome {
        dialer,
        acceptor: acceptor.expect("the acceptor ended"),
        sent,
    }
}

/// Whether a record `seal` seals opens with `open`.
fn opens(seal: &mut RecordKey, open: &mut RecordKey) -> bool {
    let header = FrameKind::Data.header(5 + 16);
    let mut record = b"hello".to_vec();
    let tag = seal.seal(&header, &mut record).unwrap();
    record.extend_from_slice(&tag);
    open.open(&header, &mut record).is_ok()
}

/// Each side opens what the other seals, at the next record of each
/// direction.
fn keys_match(d: &mut Established, a: &mut Established) -> bool {
    let (d_seal, d_open) = d.keys.as_mut().expect("keys");
    let (a_seal, a_open) = a.keys.as_mut().expect("keys");
    opens(d_seal, a_open) && opens(a_seal, d_open)
}

fn repr(rejected: &Rejected) -> &Repr {
    rejected.error().repr()
}

#[test]
fn both_sides_agree_and_authenticate_without_sockets() {
    let d = Side::dialer(1).pin(2).suites(&[CipherSuite::Aes256Gcm]);
    let a = Side::acceptor(2).suites(&[CipherSuite::Aes256Gcm]);
    let (mut d, mut a) = run(&d, &a, no_edit).both();
    assert_eq!(d.peer, Some(peer(2)));
    assert_eq!(a.peer, Some(peer(1)));
    assert_eq!(d.agreement.suite(), CipherSuite::Aes256Gcm);
    assert_eq!((d.agreement.version(), a.agreement.version()), (3, 3));
    assert!(d.key_update.is_some() && a.key_update.is_some());
    assert_eq!(
        (d.early.clone(), a.early.clone()),
        (EarlyOutcome::None, EarlyOutcome::None)
    );
    assert!(keys_match(&mut d, &mut a));
}

#[test]
fn without_an_encryption_layer_on_either_side_there_are_no_proofs() {
    let d = Side::dialer(1).plaintext_stack();
    let a = Side::acceptor(2).plaintext_stack();
    let outcome = run(&d, &a, no_edit);
    assert_eq!(outcome.sent.len(), 2, "two Setups and nothing else");
    let (d, a) = outcome.both();
    assert_eq!(d.agreement.suite(), CipherSuite::Plaintext);
    assert!(d.peer.is_none() && a.peer.is_none() && d.keys.is_none() && d.key_update.is_none());
    // The shell is told whether proofs follow the Setups.
    let proofs_follow = |d: &Side, a: &Side| {
        let agreed = d.start().unwrap().receive(frame(a.start().unwrap().frame()));
        agreed.unwrap().proofs_follow()
    };
    assert!(!proofs_follow(&Side::dialer(1).plaintext_stack(), &a_plain()));
    assert!(proofs_follow(&Side::dialer(1), &Side::acceptor(2)));
    // One side with an encryption layer and one without: no agreement.
    let outcome = run(&Side::dialer(1), &a_plain(), no_edit);
    assert!(matches!(
        repr(outcome.dialer.as_ref().unwrap_err()),
        Repr::NoCommonSuite { .. }
    ));
}

fn a_plain() -> Side {
    Side::acceptor(2).plaintext_stack()
}

#[test]
fn with_the_plaintext_suite_proofs_are_still_verified_but_there_are_no_keys() {
    let d = Side::dialer(1).suites(&[CipherSuite::Plaintext]);
    let a = Side::acceptor(2).suites(&[CipherSuite::Plaintext]);
    let (d_done, a_done) = run(&d, &a, no_edit).both();
    assert_eq!(d_done.agreement.suite(), CipherSuite::Plaintext);
    assert_eq!((d_done.peer, a_done.peer), (Some(peer(2)), Some(peer(1))));
    assert!(d_done.keys.is_none() && d_done.key_update.is_none());
    // A tampered proof in the clear fails its signature instead.
    let outcome = run(&d, &a, |step, bytes| {
        if step == Step::DialerAuth {
            bytes[40] ^= 1;
        }
    });
    assert!(matches!(
        repr(outcome.acceptor.as_ref().unwrap_err()),
        Repr::BadIdentityProof { .. }
    ));
}

#[test]
fn a_refusal_is_sealed_and_follows_the_proof() {
    // The acceptor pins identity 9; the dialer is identity 1.
    let d = Side::dialer(1);
    let a = Side::acceptor(2).pin(9);
    let outcome = run(&d, &a, no_edit);
    let mut dialer = outcome.dialer.expect("the dialer accepts the acceptor");
    let refusal = outcome.acceptor.unwrap_err();
    assert!(
        matches!(repr(&refusal), Repr::PeerKeyMismatch { expected, seen } if *expected == peer(9) && *seen == peer(1)),
        "{:?}",
        refusal.error()
    );
    // Its close is record 1 of its direction, sealed: the dialer opens it
    // with the key that follows the proof, and reads a reason that names
    // no key.
    let (_, open) = dialer.keys.as_mut().unwrap();
    let mut close = frame(refusal.close_record().unwrap());
    assert_eq!(close.kind, FrameKind::Close);
    let plaintext = open.open(&close.header, &mut close.payload).unwrap();
    assert_eq!(plaintext[..4], crate::CloseCode::UNAUTHORIZED.0.to_be_bytes());
    assert_eq!(&plaintext[4..], b"peer key mismatch: not the key we expected");
}

#[test]
fn the_authorizer_decides_after_the_pin() {
    let d = Side::dialer(1);
    let layer = EncryptLayer::new(ident(2)).authorize(|_| false);
    let a = Side::with(Role::Acceptor, layer).pin(1);
    let refused = run(&d, &a, no_edit).acceptor.unwrap_err();
    assert!(
        matches!(repr(&refused), Repr::Unauthorized(p) if *p == peer(1)),
        "{:?}",
        refused.error()
    );
    assert!(refused.close_record().is_some());
}

#[test]
fn a_dialer_pinned_to_another_identity_fails_at_the_acceptors_proof() {
    let d = Side::dialer(1).pin(3);
    let refused = run(&d, &Side::acceptor(2), no_edit).dialer.unwrap_err();
    assert!(matches!(repr(&refused), Repr::PeerKeyMismatch { .. }));
}

#[test]
fn an_early_data_proof_key_is_wiped_and_never_shown() {
    let key = ProofKey::random();
    assert_eq!(format!("{key:?}"), "ProofKey(..)");
}
