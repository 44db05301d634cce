//! The machine's first stages: [`SetupSent`] (our Setup made, a dialer's
//! early data sealed in it) and [`Agreed`] (both Setups in, the agreement
//! and the transcript), which either ends the handshake (no encryption
//! layer on either side) or makes our proof ([`Next`]).

use std::sync::Arc;

use bytes::Bytes;

use super::{
    agree::{agree, transcript_hash},
    auth::{acceptor_payload, AcceptorExtras, EarlyStatus},
    early::{self, Clock, EarlyAccepted, Judged, PeerEarly},
    encrypt::EncryptConfig,
    offer::StreamOffer,
    proof::{EarlyOutcome, EarlyPart, Established, Keys, ProofSent, Rejected},
    setup::{self, setup_before_early},
};
use crate::{
    crypto::{derive_record_keys, early::ProofKey, Ephemeral},
    error::{Error, Repr},
    frame::{Frame, FrameKind},
    proto::Setup,
    record::{parse_close, seal_frame, RecordConfig, UpdatePolicy},
    terms::{Agreement, CipherSuite, PeerId, Role, Versions},
};

/// Everything a handshake is asked to do, as the layers described it on
/// the way down: the machine's input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start<'a> {
    pub(crate) role: Role,
    pub(crate) versions: Versions,
    pub(crate) protocols: &'a [String],
    pub(crate) max_setup_size: usize,
    pub(crate) encryption: Option<&'a Arc<EncryptConfig>>,
    pub(crate) records: Option<RecordConfig>,
    pub(crate) streams: Option<StreamOffer>,
    /// The identity the peer must prove.
    pub(crate) pin: Option<PeerId>,
    /// The application protocol we require (a dialer's).
    pub(crate) protocol: Option<&'a str>,
    /// The channel's first bytes, to send early (a dialer's).
    pub(crate) early_data: Option<&'a Bytes>,
}

/// Our side's keys: what the encryption layer asked for, and this
/// handshake's ephemeral key.
pub(crate) struct Crypto {
    pub(crate) config: Arc<EncryptConfig>,
    ephemeral: Ephemeral,
}

impl std::fmt::Debug for Crypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crypto")
            .field("ephemeral", &self.ephemeral)
            .finish_non_exhaustive()
    }
}

/// Our Setup is made and sent (both sides send theirs at once, so there is
/// no state to wait in before ours is out): [`frame`](Self::frame) goes on
/// the wire, and the peer's first frame to [`receive`](Self::receive).
#[derive(Debug)]
pub(crate) struct SetupSent {
    role: Role,
    setup: Setup,
    frame: Vec<u8>,
    crypto: Option<Crypto>,
    /// Our early data went in the Setup: the key an acceptor that accepts
    /// it proves itself with.
    early: Option<ProofKey>,
    pin: Option<PeerId>,
    protocol: Option<String>,
}

impl SetupSent {
    /// Our Setup, from what the layers asked: versions, protocols, our
    /// ephemeral key and suites, record size, streams; and, for a dialer
    /// that offers version 3, pins the peer and knows its box key, the
    /// channel's first bytes sealed as early data, if the whole fits
    /// `max_setup_size`. Fails on what no peer would accept.
    pub(crate) fn new(start: Start<'_>, clock: Clock) -> Result<Self, Error> {
        let offers_early = start.role == Role::Dialer
            && start
                .versions
                .implemented()
                .is_some_and(|versions| versions.max() >= 3);
        // The protocol the early data is for: the one required, or else
        // the one we prefer.
        let protocol = start.protocol.or(start.protocols.first().map(String::as_str));
        let (crypto, seal) = match start.encryption {
            None => (None, None),
            Some(config) => {
                let (ephemeral, seal) = if offers_early {
                    early::seal(
                        config,
                        start.pin,
                        protocol.unwrap_or_default().as_bytes(),
                        start.early_data,
                        clock,
                    )
                } else {
                    (config.ephemerals.take(), None)
                };
                let config = config.clone();
                (Some(Crypto { config, ephemeral }), seal)
            }
        };
        let setup = setup::our_setup(&start, crypto.as_ref().map(|c| c.ephemeral.public_key()))?;
        let (payload, early_sent) = setup::encode(&setup, start.max_setup_size, seal.as_ref())?;
        let mut frame = FrameKind::Setup.header(payload.len()).to_vec();
        frame.extend_from_slice(&payload);
        // The protocol required: the one asked for, or, once early data
        // went, the one it is written in (a refusal would send it again
        // after the handshake, in whatever protocol was agreed).
        let required = match start.protocol {
            Some(wanted) => Some(wanted.to_owned()),
            None if early_sent => start.protocols.first().cloned(),
            None => None,
        };
        Ok(Self {
            role: start.role,
            setup,
            frame,
            crypto,
            early: seal.filter(|_| early_sent).map(|seal| seal.proof_key().clone()),
            pin: start.pin,
            protocol: required,
        })
    }

    /// The frame to send: header and encoded Setup.
    pub(crate) fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Whether our Setup carries early data.
    pub(crate) fn early_sent(&self) -> bool {
        self.early.is_some()
    }

    /// The peer's first frame: its Setup, or its refusal. A refusal before
    /// there are keys comes in the clear, so it is reported as
    /// [`Repr::UnauthenticatedClose`]; a clean close is a truncation.
    pub(crate) fn receive(self, frame: Frame) -> Result<Agreed, Rejected> {
        self.agree(frame).map_err(Rejected::in_the_clear)
    }

    fn agree(self, frame: Frame) -> Result<Agreed, Error> {
        match frame.kind {
            FrameKind::Setup => {}
            FrameKind::Close => {
                return Err(match parse_close(&frame.payload)? {
                    Some((code, reason)) => Repr::UnauthenticatedClose { code, reason }.into(),
                    None => Repr::Truncated.into(),
                })
            }
            got => {
                return Err(Repr::UnexpectedFrame {
                    expected: "a Setup",
                    got,
                }
                .into())
            }
        }
        let (theirs, early_fields) = setup::decode(&frame.payload)?;
        let agreement = agree(&self.setup, &theirs, self.role)?;
        if let Some(wanted) = &self.protocol {
            if agreement.protocol() != Some(wanted) {
                return Err(Repr::UnexpectedProtocol {
                    wanted: wanted.clone(),
                    agreed: agreement.protocol().map(str::to_owned),
                }
                .into());
            }
        }
        let ours = &self.frame[crate::frame::HEADER_LEN..];
        let transcript = match self.role {
            Role::Dialer => transcript_hash(ours, &frame.payload),
            Role::Acceptor => transcript_hash(&frame.payload, ours),
        };
        // Without an encryption layer (suites) on our side, and so on
        // theirs, there are no proofs, and the key is ignored
        // (docs/PROTOCOL.md, section 5).
        let proofs_follow = self.crypto.is_some();
        let v3 = agreement.protocol_version().has_early_data();
        // Early data counts only with version 3 agreed (section 17.3).
        let peer_early =
            (self.role == Role::Acceptor && v3 && proofs_follow && !theirs.early_data.is_empty()).then(
                || PeerEarly {
                    d0: setup_before_early(&frame.payload, &theirs.early_data)
                        .filter(|_| early_fields == 1)
                        .map(<[u8]>::to_vec),
                    sealed: theirs.early_data,
                },
            );
        Ok(Agreed {
            window: setup::early_window(&self.setup),
            agreement,
            transcript,
            peer_ephemeral: theirs.ephemeral_key[..].try_into().ok().filter(|_| proofs_follow),
            crypto: self.crypto,
            early_sent: self.early.filter(|_| v3),
            peer_early,
            pin: self.pin,
        })
    }
}

/// Both Setups are in and agreed: the agreement, the transcript of both
/// (section 6), and what the proofs need.
#[derive(Debug)]
pub(crate) struct Agreed {
    agreement: Agreement,
    transcript: [u8; 32],
    peer_ephemeral: Option<[u8; 32]>,
    crypto: Option<Crypto>,
    /// Our early data went, with version 3 agreed.
    early_sent: Option<ProofKey>,
    /// The peer's early data, with version 3 agreed.
    peer_early: Option<PeerEarly>,
    pin: Option<PeerId>,
    /// The most early data our Setup's windows let the peer send.
    window: u32,
}

/// What follows the agreement.
#[derive(Debug)]
pub(crate) enum Next {
    /// Neither side runs an encryption layer: no proofs, and the handshake
    /// is done.
    Established(Box<Established>),
    /// Our Auth goes (it may be empty: a dialer whose early data awaits the
    /// acceptor's verdict proves itself after it), then the peer's is read.
    Prove(Box<ProofSent>),
    /// An acceptor that accepted early data: its Auth goes, and the
    /// handshake is done; its answer may follow at once.
    AnswerEarly(Vec<u8>, Box<Established>),
}

impl Agreed {
    /// What both sides agreed.
    pub(crate) fn agreement(&self) -> &Agreement {
        &self.agreement
    }

    /// Whether proofs follow: both sides run an encryption layer (and
    /// until the peer's proof, its records are small).
    pub(crate) fn proofs_follow(&self) -> bool {
        self.crypto.is_some()
    }

    /// The handshake's next step: done, without an encryption layer; else
    /// the keys derived (the shared secret salted with the transcript), an
    /// acceptor's verdict on early data, and our Auth: the proof that we
    /// hold our identity, record 0 of our direction (sections 7, 9, 17.3).
    pub(crate) fn proceed(self, clock: Clock) -> Result<Next, Rejected> {
        let Some(crypto) = self.crypto else {
            return Ok(Next::Established(Box::new(Established::without_proofs(
                self.agreement,
            ))));
        };
        let peer_ephemeral = self
            .peer_ephemeral
            .ok_or_else(|| Rejected::in_the_clear(Repr::InvalidSetup("peer sent no ephemeral key").into()))?;
        let (role, suite) = (self.agreement.role(), self.agreement.suite());
        let v3 = self.agreement.protocol_version().has_early_data();
        let config = crypto.config;
        let (status, accepted) = match (&self.peer_early, role) {
            (Some(early), Role::Acceptor) => early::judge(
                &config,
                early,
                Judged {
                    agreement: &self.agreement,
                    ephemeral: &peer_ephemeral,
                    pin: self.pin,
                    window: self.window,
                },
                clock,
            ),
            _ => (EarlyStatus::Absent, None),
        };
        let mut keys: Option<Keys> = None;
        if suite != CipherSuite::Plaintext {
            let shared = crypto.ephemeral.agree(&peer_ephemeral);
            if !shared.was_contributory() {
                return Err(Rejected::in_the_clear(Repr::WeakKey.into()));
            }
            keys = Some(derive_record_keys(
                suite,
                shared.as_bytes(),
                &self.transcript,
                role,
            ));
        }
        let record = match role {
            // Having sent early data, our proof waits for the acceptor's
            // verdict: accepted early data proved who we are.
            Role::Dialer if self.early_sent.is_some() => Vec::new(),
            Role::Dialer => seal_auth(&mut keys, &config.identity.prove(role, &self.transcript))?,
            Role::Acceptor => {
                let proof = match &accepted {
                    Some(early) => {
                        let mut proof = config.identity.peer_id().as_bytes().to_vec();
                        proof.extend_from_slice(&early.proof_key.prove(&self.transcript));
                        proof
                    }
                    None => config.identity.prove(role, &self.transcript).to_vec(),
                };
                if v3 {
                    let extras = acceptor_extras(&config, status, accepted.as_ref(), clock);
                    seal_auth(&mut keys, &acceptor_payload(&proof, &extras))?
                } else {
                    seal_auth(&mut keys, &proof)?
                }
            }
        };
        let key_update = (self.agreement.protocol_version().has_key_update()
            && suite != CipherSuite::Plaintext)
            .then_some(UpdatePolicy {
                every: config.key_update_every,
            });
        if let Some(EarlyAccepted { dialer, payload, .. }) = accepted {
            // The dialer sends no Auth: its early data's signature (or
            // ticket) bound its identity to its ephemeral key, and its first
            // record, which only that key's holder can seal, shows it is
            // there.
            let established = Established {
                agreement: self.agreement,
                peer: Some(dialer),
                keys,
                key_update,
                early: EarlyOutcome::Accepted(payload),
                learned: None,
            };
            return Ok(Next::AnswerEarly(record, Box::new(established)));
        }
        Ok(Next::Prove(Box::new(ProofSent::new(
            self.agreement,
            self.transcript,
            keys,
            record,
            key_update,
            config,
            self.pin,
            match status {
                EarlyStatus::Refused => EarlyPart::Refused,
                _ => self.early_sent.into(),
            },
        ))))
    }
}

/// `payload` as our Auth record, sealed if there are keys.
fn seal_auth(keys: &mut Option<Keys>, payload: &[u8]) -> Result<Vec<u8>, Rejected> {
    seal_frame(keys.as_mut().map(|(seal, _)| seal), FrameKind::Auth, payload).map_err(Rejected::in_the_clear)
}

/// What an acceptor's version 3 Auth carries after its proof: the early
/// data's status, our current box key's announcement if we accept early
/// data, and with early data accepted a ticket under that same key.
fn acceptor_extras(
    config: &EncryptConfig,
    status: EarlyStatus,
    accepted: Option<&EarlyAccepted>,
    clock: Clock,
) -> AcceptorExtras {
    let Some(acceptance) = &config.early else {
        return AcceptorExtras {
            status,
            announcement: None,
            ticket: None,
        };
    };
    let key = acceptance.current_key(&config.identity, clock.unix_s());
    AcceptorExtras {
        status,
        announcement: Some(key.announcement),
        ticket: accepted.map(|early| key.tickets.issue(&early.dialer)),
    }
}
