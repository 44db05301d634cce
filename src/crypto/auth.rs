//! The authentication step of the handshake, sans-IO, as typestate: each
//! security step can only be taken on the state the step before produced.
//!
//! ```text
//!   Agreed ──ProofSent::new──▶ ProofSent ──receive──▶ ProofVerified ──authorize──▶ Authenticated
//!            keys derived,                 peer's proof              pin and
//!            our proof sealed              opened and verified       authorizer passed
//! ```
//!
//! [`Authenticated`] holds a zero-size token that only a successful
//! [`ProofVerified::authorize`] makes, and a [`ProofVerified`] one that only
//! a verified proof makes (as rustls's `FinishedMessageVerified`): there is
//! no way to get the record keys and the peer's identity without both
//! checks.

use super::{derive_record_keys, early::ProofKey, verify_proof, Ephemeral, Identity};
use crate::{
    error::{CloseCode, Error, Repr, Side},
    frame::{Frame, FrameKind},
    handshake::{CipherSuite, PeerId, Role},
    record::{encode_close, open_frame, parse_close, seal_frame, RecordKey},
};

/// Our sealing key and the peer's opening key, each at its next record.
type Keys = (RecordKey, RecordKey);

/// Proof that the peer's identity proof verified against our transcript.
#[derive(Debug)]
struct ProofChecked(());

/// Proof that the pin and the authorizer accepted the verified peer.
#[derive(Debug)]
struct PeerAuthorized(());

/// Keys derived and our identity proof sealed: waiting for the peer's.
#[derive(Debug)]
pub(crate) struct ProofSent {
    role: Role,
    transcript: [u8; 32],
    keys: Option<Keys>,
    record: Vec<u8>,
    /// Version 3: the acceptor's Auth carries the early data's status and
    /// its box key announcement after the proof (docs/PROTOCOL.md, section
    /// 17.3).
    v3: bool,
    /// A dialer's early data's proof key: an acceptor that accepted it
    /// proves itself with it. Our own proof waits for the acceptor's
    /// verdict: accepted early data proved who we are (section 17.3).
    early: Option<ProofKey>,
}

/// What version 3 adds to the Auth step (docs/PROTOCOL.md, section 17.3).
#[derive(Debug, Default)]
pub(crate) struct AuthV3<'a> {
    /// Version 3 was agreed.
    pub(crate) agreed: bool,
    /// An acceptor's: what its Auth carries after its proof.
    pub(crate) extension: &'a [u8],
    /// The proof key of the early data: an acceptor that accepted it
    /// proves itself with it in place of a signature; a dialer that sent
    /// it checks such a proof.
    pub(crate) early: Option<ProofKey>,
}

/// What an acceptor's Auth carries after its proof under version 3.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AuthExtras {
    /// 0 no early data received, 1 accepted, 2 refused.
    pub(crate) early_status: u8,
    /// Its box key announcement, if it accepts early data.
    pub(crate) announcement: Option<Vec<u8>>,
    /// With early data accepted: a ticket for the next, and its PSK
    /// (`psk || ticket`).
    pub(crate) ticket: Option<Vec<u8>>,
}

/// The status byte of early data the acceptor accepted.
pub(crate) const EARLY_ACCEPTED: u8 = 1;
/// ... and of early data it refused.
pub(crate) const EARLY_REFUSED: u8 = 2;

impl ProofSent {
    /// Derives the record keys from our `ephemeral` key and the peer's (the
    /// shared secret salted with the transcript), and seals our proof that
    /// we hold `identity`: the Auth record, record 0 of our direction
    /// (docs/PROTOCOL.md, sections 7 and 9). With the Plaintext suite there
    /// are no keys, and the proof goes in the clear.
    #[cfg(test)]
    pub(crate) fn new(
        agreed: &crate::setup::Agreed,
        ephemeral: Ephemeral,
        identity: &Identity,
    ) -> Result<Self, Error> {
        let agreement = agreed.agreement();
        Self::start(
            agreement.role(),
            agreement.suite(),
            agreed.transcript(),
            agreed.peer_ephemeral(),
            ephemeral,
            identity,
            AuthV3 {
                agreed: agreement.version() >= 3,
                ..AuthV3::default()
            },
        )
    }

    /// As [`new`](Self::new), from the agreement's parts, with what
    /// version 3 adds. An acceptor that accepted early data proves itself
    /// with the early data's proof key: its id and a MAC of the transcript
    /// under that key, which only the holder of the box key could read. A
    /// dialer that sent early data proves itself only if the acceptor does
    /// not accept it ([`Authenticated::owed_proof`]): no record yet.
    pub(crate) fn start(
        role: Role,
        suite: CipherSuite,
        transcript: &[u8; 32],
        peer_ephemeral: Option<&[u8; 32]>,
        ephemeral: Ephemeral,
        identity: &Identity,
        v3: AuthV3<'_>,
    ) -> Result<Self, Error> {
        let peer_ephemeral = peer_ephemeral.ok_or(Repr::InvalidSetup("peer sent no ephemeral key"))?;
        let mut keys = None;
        if suite != CipherSuite::Plaintext {
            let shared = ephemeral.agree(peer_ephemeral);
            if !shared.was_contributory() {
                return Err(Repr::WeakKey.into());
            }
            keys = Some(derive_record_keys(suite, shared.as_bytes(), transcript, role));
        }
        let mut proof = match (role, &v3.early) {
            (Role::Acceptor, Some(key)) => {
                let mut proof = identity.peer_id().as_bytes().to_vec();
                proof.extend_from_slice(&key.prove(transcript));
                proof
            }
            (Role::Dialer, Some(_)) => Vec::new(),
            (_, None) => identity.prove(role, transcript).to_vec(),
        };
        let record = if proof.is_empty() {
            Vec::new()
        } else {
            proof.extend_from_slice(v3.extension);
            seal_frame(keys.as_mut().map(|(seal, _)| seal), FrameKind::Auth, &proof)?
        };
        Ok(Self {
            role,
            transcript: *transcript,
            keys,
            record,
            v3: v3.agreed,
            early: v3.early.filter(|_| role == Role::Dialer),
        })
    }

    /// The acceptor accepted early data, whose signature showed the
    /// dialer's identity and bound it to the dialer's ephemeral key, and
    /// answers now (docs/PROTOCOL.md, section 17.3): the keys, at record 1
    /// for sealing and record 0 for opening. The dialer sends no Auth; its
    /// first record, sealed under keys only that ephemeral key's holder
    /// can derive, shows it is there.
    pub(crate) fn accepted_early(self) -> Option<Keys> {
        self.keys
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
        match self.check(&mut frame) {
            Ok((peer, extras)) => Ok(ProofVerified {
                peer,
                owes_proof: self.early.is_some() && extras.early_status != EARLY_ACCEPTED,
                transcript: self.transcript,
                keys: self.keys,
                extras,
                _checked: ProofChecked(()),
            }),
            Err(error) => Err(Rejected::new(error, self.keys.as_mut())),
        }
    }

    fn check(&mut self, frame: &mut Frame) -> Result<(PeerId, AuthExtras), Error> {
        let open = self.keys.as_mut().map(|(_, open)| open);
        match frame.kind {
            FrameKind::Close => Err(close_error(open, frame)),
            // Never sealed, so refused on its kind.
            FrameKind::Setup => Err(Repr::UnexpectedFrame {
                expected: "an identity proof",
                got: FrameKind::Setup,
            }
            .into()),
            // Authenticated first: with keys, nothing unsealed is acted on.
            kind => {
                let payload = open_frame(open, frame)?;
                if kind != FrameKind::Auth {
                    return Err(Repr::UnexpectedFrame {
                        expected: "an identity proof",
                        got: kind,
                    }
                    .into());
                }
                if !(self.v3 && self.role == Role::Dialer) {
                    return Ok((
                        verify_proof(payload, self.role.peer(), &self.transcript)?,
                        AuthExtras::default(),
                    ));
                }
                // The acceptor's Auth under version 3: the proof, the
                // early data's status, and perhaps its box key.
                // With early data accepted, a ticket may follow: its PSK
                // and the ticket, 1 to 255 bytes.
                const TICKETED: std::ops::RangeInclusive<usize> = 201 + 32 + 1..=201 + 32 + 255;
                let extras = match payload.len() {
                    97 => AuthExtras {
                        early_status: payload[96],
                        ..AuthExtras::default()
                    },
                    201 => AuthExtras {
                        early_status: payload[96],
                        announcement: Some(payload[97..].to_vec()),
                        ticket: None,
                    },
                    len if TICKETED.contains(&len) && payload[96] == EARLY_ACCEPTED => AuthExtras {
                        early_status: payload[96],
                        announcement: Some(payload[97..201].to_vec()),
                        ticket: Some(payload[201..].to_vec()),
                    },
                    _ => {
                        return Err(Repr::InvalidSetup(
                            "a version 3 acceptor's Auth is 97 or 201 bytes, or up to 488 with a ticket",
                        )
                        .into())
                    }
                };
                if extras.early_status > EARLY_REFUSED {
                    return Err(Repr::InvalidSetup("an unknown early data status").into());
                }
                if extras.early_status != EARLY_ACCEPTED {
                    return Ok((
                        verify_proof(&payload[..96], self.role.peer(), &self.transcript)?,
                        extras,
                    ));
                }
                // Accepted early data: the proof is the acceptor's id and a
                // MAC under our early data's proof key.
                let key = self.early.as_ref().ok_or(Repr::InvalidSetup(
                    "an acceptor accepted early data we never sent",
                ))?;
                let (id, tag) = payload[..96].split_at(32);
                let peer =
                    PeerId::from_bytes(id.try_into().map_err(|_| Repr::InvalidSetup("a short proof"))?);
                if !key.verify(&self.transcript, tag) {
                    return Err(Repr::BadIdentityProof { peer }.into());
                }
                Ok((peer, extras))
            }
        }
    }

    /// Gives up with `error` (the deadline passed, say): the close record
    /// that tells the peer, sealed if there are keys.
    pub(crate) fn reject(mut self, error: Error) -> Rejected {
        Rejected::new(error, self.keys.as_mut())
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
    /// A dialer whose early data was not accepted: our proof is still due.
    owes_proof: bool,
    transcript: [u8; 32],
    keys: Option<Keys>,
    extras: AuthExtras,
    _checked: ProofChecked,
}

impl ProofVerified {
    /// The identity the peer proved it holds.
    #[cfg(test)]
    pub(crate) fn peer(&self) -> PeerId {
        self.peer
    }

    /// Checks the pin (the identity we expect, if any) and then the
    /// authorizer (if any).
    pub(crate) fn authorize(
        mut self,
        pin: Option<PeerId>,
        authorizer: Option<&(dyn Fn(&PeerId) -> bool + Send + Sync)>,
    ) -> Result<Authenticated, Rejected> {
        let refusal = match pin {
            Some(expected) if expected != self.peer => Some(Repr::PeerKeyMismatch {
                expected,
                seen: self.peer,
            }),
            _ if authorizer.is_some_and(|authorize| !authorize(&self.peer)) => {
                Some(Repr::Unauthorized(self.peer))
            }
            _ => None,
        };
        match refusal {
            Some(error) => Err(Rejected::new(error.into(), self.keys.as_mut())),
            None => Ok(Authenticated {
                peer: self.peer,
                owes_proof: self.owes_proof,
                transcript: self.transcript,
                keys: self.keys,
                extras: self.extras,
                _authorized: PeerAuthorized(()),
            }),
        }
    }
}

/// Both checks passed: the peer's identity, and the record keys at record 1
/// of each direction (none with the Plaintext suite).
///
/// Only [`ProofVerified::authorize`] makes one, and only
/// [`ProofSent::receive`] makes a [`ProofVerified`], after the proof
/// verified: their fields (the tokens among them) are private to this
/// module, and no conversion skips a step, so no other code can make one up.
#[derive(Debug)]
pub(crate) struct Authenticated {
    peer: PeerId,
    owes_proof: bool,
    transcript: [u8; 32],
    keys: Option<Keys>,
    extras: AuthExtras,
    _authorized: PeerAuthorized,
}

impl Authenticated {
    /// The peer, `(sealing key, opening key)` for the records that follow,
    /// and what the peer's Auth carried after its proof.
    pub(crate) fn into_parts(self) -> (PeerId, Option<(RecordKey, RecordKey)>, AuthExtras) {
        (self.peer, self.keys, self.extras)
    }

    /// A dialer whose early data the acceptor did not accept proves its
    /// identity now, after the acceptor's proof verified: our Auth record,
    /// record 0 of our direction (docs/PROTOCOL.md, section 17.4). `None`
    /// when no proof is due.
    pub(crate) fn owed_proof(&mut self, identity: &Identity) -> Result<Option<Vec<u8>>, Error> {
        if !std::mem::take(&mut self.owes_proof) {
            return Ok(None);
        }
        let proof = identity.prove(Role::Dialer, &self.transcript);
        seal_frame(self.keys.as_mut().map(|(seal, _)| seal), FrameKind::Auth, &proof).map(Some)
    }

    /// Gives up with `error`: the close record that tells the peer.
    pub(crate) fn reject(mut self, error: Error) -> Rejected {
        Rejected::new(error, self.keys.as_mut())
    }
}

/// Authentication failed: why, and the close record that tells the peer
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
