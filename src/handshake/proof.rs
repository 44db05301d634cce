//! The machine's proving stages, as typestate: each security step can only
//! be taken on the state the step before produced.
//!
//! ```text
//!   ProofSent ──receive──▶ ProofVerified ──authorize──▶ Authenticated ──finish──▶ Established
//!   our Auth out           the peer's proof             pin and                    our proof if owed,
//!                          opened and verified          authorizer passed          what we learned
//! ```
//!
//! [`Authenticated`] holds a zero-size token that only a successful
//! [`ProofVerified::authorize`] makes, and a [`ProofVerified`] one that only
//! a verified proof makes (as rustls's `FinishedMessageVerified`): there is
//! no way to the record keys and the peer's identity without both checks.

use std::sync::Arc;

use bytes::Bytes;
use zeroize::Zeroize;

use super::{
    auth::{parse_acceptor_payload, AcceptorExtras, EarlyStatus},
    encrypt::EncryptConfig,
};
use crate::{
    crypto::{
        early::{ProofKey, Ticket, ANNOUNCEMENT_LEN},
        verify_proof,
    },
    error::{CloseCode, Error, Repr, Side},
    frame::{Frame, FrameKind},
    record::{encode_close, open_frame, parse_close, seal_frame, RecordKey, UpdatePolicy},
    terms::{Agreement, PeerId, Role},
};

/// Our sealing key and the peer's opening key, each at its next record.
pub(crate) type Keys = (RecordKey, RecordKey);

/// Proof that the peer's identity proof verified against our transcript.
#[derive(Debug)]
struct ProofChecked(());

/// Proof that the pin and the authorizer accepted the verified peer.
#[derive(Debug)]
struct PeerAuthorized(());

/// What became of early data on this connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EarlyOutcome {
    /// None was sent.
    None,
    /// We sent some (dialing), with version 3 agreed: accepted or not.
    Sent { accepted: bool },
    /// We accepted the dialer's (accepting): its payload, in effect the
    /// plaintext of its first Data record.
    Accepted(Bytes),
    /// We refused the dialer's (accepting): it sends its request again
    /// after the handshake.
    Refused,
}

/// This side's part in early data while the proofs cross.
#[derive(Debug)]
pub(crate) enum EarlyPart {
    /// None sent (dialing), or none offered (accepting).
    None,
    /// We sent early data with this proof key (dialing, version 3 agreed):
    /// an acceptor that accepted it proves itself with it, and our own
    /// proof waits for its verdict.
    Sent(ProofKey),
    /// We refused the dialer's (accepting).
    Refused,
}

impl From<Option<ProofKey>> for EarlyPart {
    fn from(key: Option<ProofKey>) -> Self {
        key.map_or(Self::None, Self::Sent)
    }
}

/// What a dialer learned for its next handshake to this acceptor: its box
/// key announcement (not yet verified) and, with early data accepted, a
/// ticket.
#[derive(Debug)]
pub(crate) struct Learned {
    pub(crate) peer: PeerId,
    pub(crate) announcement: [u8; ANNOUNCEMENT_LEN],
    pub(crate) ticket: Option<Ticket>,
}

/// The handshake is done: what was agreed, who the peer proved to be, the
/// record keys at the next record of each direction and how they update,
/// what became of early data, and what a dialer learned.
#[derive(Debug)]
pub(crate) struct Established {
    pub(crate) agreement: Agreement,
    pub(crate) peer: Option<PeerId>,
    pub(crate) keys: Option<Keys>,
    pub(crate) key_update: Option<UpdatePolicy>,
    pub(crate) early: EarlyOutcome,
    pub(crate) learned: Option<Learned>,
}

impl Established {
    /// Neither side runs an encryption layer: a plaintext channel, no
    /// proofs.
    pub(crate) fn without_proofs(agreement: Agreement) -> Self {
        Self {
            agreement,
            peer: None,
            keys: None,
            key_update: None,
            early: EarlyOutcome::None,
            learned: None,
        }
    }
}

/// Keys derived and our Auth made: waiting for the peer's.
#[derive(Debug)]
pub(crate) struct ProofSent {
    agreement: Agreement,
    transcript: [u8; 32],
    keys: Option<Keys>,
    record: Vec<u8>,
    key_update: Option<UpdatePolicy>,
    config: Arc<EncryptConfig>,
    pin: Option<PeerId>,
    early: EarlyPart,
}

impl ProofSent {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        agreement: Agreement,
        transcript: [u8; 32],
        keys: Option<Keys>,
        record: Vec<u8>,
        key_update: Option<UpdatePolicy>,
        config: Arc<EncryptConfig>,
        pin: Option<PeerId>,
        early: EarlyPart,
    ) -> Self {
        Self {
            agreement,
            transcript,
            keys,
            record,
            key_update,
            config,
            pin,
            early,
        }
    }

    /// Our Auth record, ready for the wire (empty while a dialer's proof
    /// waits on the acceptor's verdict on its early data).
    pub(crate) fn record(&self) -> &[u8] {
        &self.record
    }

    /// The peer's first record after its Setup: its proof, or its refusal.
    ///
    /// A refusal sealed under the session keys is the peer's own
    /// ([`Repr::Closed`]); one in the clear, which anyone on the path could
    /// have sent, is [`Repr::UnauthenticatedClose`].
    pub(crate) fn receive(mut self, mut frame: Frame) -> Result<ProofVerified, Rejected> {
        let checked = self.check(&mut frame);
        // The Auth may hold a ticket's PSK: not left in the read buffer.
        frame.payload[..].zeroize();
        match checked {
            Ok((peer, extras)) => Ok(ProofVerified {
                peer,
                extras,
                sent: self,
                _checked: ProofChecked(()),
            }),
            Err(error) => Err(Rejected::new(error, self.keys.as_mut())),
        }
    }

    fn check(&mut self, frame: &mut Frame) -> Result<(PeerId, Option<AcceptorExtras>), Error> {
        let role = self.agreement.role();
        let open = self.keys.as_mut().map(|(_, open)| open);
        match frame.kind {
            FrameKind::Close => return Err(close_error(open, frame)),
            // Never sealed, so refused on its kind.
            FrameKind::Setup => {
                return Err(Repr::UnexpectedFrame {
                    expected: "an identity proof",
                    got: FrameKind::Setup,
                }
                .into())
            }
            _ => {}
        }
        // Authenticated first: with keys, nothing unsealed is acted on.
        let kind = frame.kind;
        let payload = open_frame(open, frame)?;
        if kind != FrameKind::Auth {
            return Err(Repr::UnexpectedFrame {
                expected: "an identity proof",
                got: kind,
            }
            .into());
        }
        if !(self.agreement.protocol_version().has_early_data() && role == Role::Dialer) {
            return Ok((verify_proof(payload, role.peer(), &self.transcript)?, None));
        }
        // The acceptor's Auth under version 3: the proof, the early data's
        // status, and perhaps its box key and a ticket.
        let (proof, extras) = parse_acceptor_payload(payload)?;
        if extras.status != EarlyStatus::Accepted {
            return Ok((verify_proof(proof, role.peer(), &self.transcript)?, Some(extras)));
        }
        // Accepted early data: the proof is the acceptor's id and a MAC
        // under our early data's proof key.
        let EarlyPart::Sent(key) = &self.early else {
            return Err(Repr::InvalidSetup("an acceptor accepted early data we never sent").into());
        };
        let (id, tag) = proof.split_at(32);
        let peer = PeerId::from_bytes(id.try_into().expect("32 bytes"));
        if !key.verify(&self.transcript, tag) {
            return Err(Repr::BadIdentityProof { peer }.into());
        }
        Ok((peer, Some(extras)))
    }

    /// Gives up with `error` (the deadline passed, say): the close record
    /// that tells the peer, sealed if there are keys.
    pub(crate) fn reject(mut self, error: Error) -> Rejected {
        Rejected::new(error, self.keys.as_mut())
    }

    /// Replaces the key our early data went with (`None`: as if none
    /// went): a dialer facing an acceptor that lies, for the tests.
    #[cfg(test)]
    pub(crate) fn set_early_key(&mut self, key: Option<ProofKey>) {
        self.early = key.into();
    }
}

/// What a close frame in place of the peer's proof says, and whether the
/// peer provably sent it.
fn close_error(open: Option<&mut RecordKey>, frame: &mut Frame) -> Error {
    if let Some(key) = open {
        let mut sealed = frame.clone();
        if let Ok(payload) = open_frame(Some(key), &mut sealed) {
            return match parse_close(payload) {
                Ok(Some((code, reason))) => Error::closed_by_peer(code, reason),
                Ok(None) => Error::graceful(Side::Remote),
                Err(err) => err,
            };
        }
    }
    match parse_close(&frame.payload) {
        Ok(Some((code, reason))) => Repr::UnauthenticatedClose { code, reason }.into(),
        Ok(None) => Repr::UnauthenticatedClose {
            code: CloseCode::NO_ERROR,
            reason: String::new(),
        }
        .into(),
        Err(err) => err,
    }
}

/// The peer's proof verified: we know who it is, and nothing more yet.
#[derive(Debug)]
pub(crate) struct ProofVerified {
    peer: PeerId,
    extras: Option<AcceptorExtras>,
    sent: ProofSent,
    _checked: ProofChecked,
}

impl ProofVerified {
    /// Checks the pin (the identity we expect, if any) and then the
    /// authorizer (if any).
    pub(crate) fn authorize(mut self) -> Result<Authenticated, Rejected> {
        let config = &self.sent.config;
        let refusal = match self.sent.pin {
            Some(expected) if expected != self.peer => Some(Repr::PeerKeyMismatch {
                expected,
                seen: self.peer,
            }),
            _ if config
                .authorizer
                .as_ref()
                .is_some_and(|authorize| !authorize(&self.peer)) =>
            {
                Some(Repr::Unauthorized(self.peer))
            }
            _ => None,
        };
        match refusal {
            Some(error) => Err(Rejected::new(error.into(), self.sent.keys.as_mut())),
            None => Ok(Authenticated {
                peer: self.peer,
                extras: self.extras,
                sent: self.sent,
                proved: false,
                _authorized: PeerAuthorized(()),
            }),
        }
    }
}

/// Both checks passed. Only [`ProofVerified::authorize`] makes one, and
/// only [`ProofSent::receive`] makes a [`ProofVerified`], after the proof
/// verified: their fields (the tokens among them) are private to this
/// module, and no conversion skips a step, so no other code can make one up.
#[derive(Debug)]
pub(crate) struct Authenticated {
    peer: PeerId,
    extras: Option<AcceptorExtras>,
    sent: ProofSent,
    /// Our owed proof went.
    proved: bool,
    _authorized: PeerAuthorized,
}

impl Authenticated {
    /// Whether the acceptor accepted our early data.
    fn early_accepted(&self) -> bool {
        self.extras
            .as_ref()
            .is_some_and(|extras| extras.status == EarlyStatus::Accepted)
    }

    /// The proof we still owe, if any: a dialer whose early data the
    /// acceptor did not accept proves its identity now, after the
    /// acceptor's proof verified, as record 0 of its direction
    /// (docs/PROTOCOL.md, section 17.4). Once.
    pub(crate) fn owed_proof(&mut self) -> Result<Option<Vec<u8>>, Error> {
        if !matches!(self.sent.early, EarlyPart::Sent(_)) || self.early_accepted() || self.proved {
            return Ok(None);
        }
        self.proved = true;
        let proof = self
            .sent
            .config
            .identity
            .prove(Role::Dialer, &self.sent.transcript);
        seal_frame(
            self.sent.keys.as_mut().map(|(seal, _)| seal),
            FrameKind::Auth,
            &proof,
        )
        .map(Some)
    }

    /// The handshake established.
    pub(crate) fn finish(self) -> Established {
        let accepted = self.early_accepted();
        let Self {
            peer, extras, sent, ..
        } = self;
        let early = match sent.early {
            EarlyPart::Sent(_) => EarlyOutcome::Sent { accepted },
            EarlyPart::Refused => EarlyOutcome::Refused,
            EarlyPart::None => EarlyOutcome::None,
        };
        let learned = extras.and_then(|extras| {
            Some(Learned {
                peer,
                announcement: extras.announcement?,
                ticket: extras.ticket.filter(|_| accepted),
            })
        });
        Established {
            agreement: sent.agreement,
            peer: Some(peer),
            keys: sent.keys,
            key_update: sent.key_update,
            early,
            learned,
        }
    }

    /// Gives up with `error`: the close record that tells the peer.
    pub(crate) fn reject(mut self, error: Error) -> Rejected {
        Rejected::new(error, self.sent.keys.as_mut())
    }
}

/// The handshake failed: why, and the close record that tells the peer
/// (sealed when there are keys, in the clear otherwise; none when the peer
/// itself closed).
#[derive(Debug)]
pub(crate) struct Rejected {
    error: Error,
    close: Option<Vec<u8>>,
}

impl Rejected {
    fn new(error: Error, seal: Option<&mut Keys>) -> Self {
        let close = error.warrants_close().then(|| {
            let payload = encode_close(error.close_code(), &error.reason_for_peer());
            let key = seal.map(|(seal, _)| seal);
            // A key used up can still seal its close record (its reserve);
            // failing that, the close goes in the clear.
            seal_frame(key, FrameKind::Close, &payload)
                .or_else(|_| seal_frame(None, FrameKind::Close, &payload))
                .expect("a clear close record always encodes")
        });
        Self { error, close }
    }

    /// A failure before there are keys: the close goes in the clear.
    pub(crate) fn in_the_clear(error: Error) -> Self {
        Self::new(error, None)
    }

    /// A failure once there are `keys`: the close goes sealed.
    pub(crate) fn sealed(error: Error, keys: Option<&mut Keys>) -> Self {
        Self::new(error, keys)
    }

    /// Why.
    pub(crate) fn error(&self) -> &Error {
        &self.error
    }

    /// The close record to send the peer, if any.
    pub(crate) fn close_record(&self) -> Option<&[u8]> {
        self.close.as_deref()
    }

    /// The error.
    pub(crate) fn into_error(self) -> Error {
        self.error
    }
}
