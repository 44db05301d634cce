//! What went wrong, in detail: the variants crate code builds and matches.
//! The public [`Error`](super::Error) wraps one; the facts of each variant
//! (its kind, side, close code...) are listed in `kinds.rs`.

use std::{io, sync::Arc, time::Duration};

use super::{CloseCode, Refusal, Side, Violation};
use crate::{
    frame::{FrameError, FrameKind},
    terms::{CipherSuite, PeerId, Versions},
};

/// Everything that can go wrong while establishing or using a channel, a
/// connection or a stream, and how they end: the detail behind an
/// [`Error`](super::Error).
///
/// Each variant's text holds all it knows, its causes' included, and none
/// has a `source()`: an error either prints its cause or returns it,
/// never both (the Rust API guidelines' rule), so `anyhow`'s `{:#}` and
/// eyre say each cause once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Repr {
    /// The underlying transport failed.
    #[error("transport I/O failed: {0}")]
    Io(Arc<io::Error>),

    /// The inner connector could not produce a transport.
    #[error("could not connect: {}", super::text_with_causes(&**.0))]
    Connect(Arc<dyn std::error::Error + Send + Sync>),

    /// The peer sent bytes that are not a valid frame.
    #[error("peer sent a malformed frame: {0}")]
    Frame(FrameError),

    /// The peer's Setup message could not be decoded.
    #[error("peer sent an undecodable Setup message: {0}")]
    SetupDecode(prost::DecodeError),

    /// A Setup field the peer sent is invalid (a key of the wrong length...).
    #[error("peer sent an invalid Setup: {0}")]
    InvalidSetup(&'static str),

    /// The version ranges of the two sides do not overlap.
    #[error("no common protocol version: we speak {local}, the peer speaks {peer}")]
    VersionMismatch {
        /// Our range.
        local: Versions,
        /// The peer's range.
        peer: Versions,
    },

    /// No cipher suite is acceptable to both sides.
    #[error("no common cipher suite: we offered {local:?}, the peer offered {peer:?}")]
    NoCommonSuite {
        /// What we offered, in preference order.
        local: Vec<CipherSuite>,
        /// What the peer offered, as wire ids (unknown ids included).
        peer: Vec<u32>,
    },

    /// Both sides named application protocols, but none in common.
    #[error("no common application protocol: we offered {local:?}, the peer offered {peer:?}")]
    NoCommonProtocol {
        /// What we offered.
        local: Vec<String>,
        /// What the peer offered.
        peer: Vec<String>,
    },

    /// The agreed application protocol is not the one the dialer
    /// required ([`Handshake::expect_protocol`]).
    ///
    /// [`Handshake::expect_protocol`]: crate::handshake::Handshake::expect_protocol
    #[error("application protocol {agreed:?} agreed where {wanted:?} was required")]
    UnexpectedProtocol {
        /// The protocol required.
        wanted: String,
        /// The protocol agreed, if any.
        agreed: Option<String>,
    },

    /// The handshake did not finish within its deadline.
    #[error("handshake did not finish within {}", crate::error::Rounded(*.0))]
    HandshakeTimeout(Duration),

    /// A frame arrived that is not allowed at this point of the protocol.
    #[error("peer sent an unexpected {got:?} frame where {expected} was expected")]
    UnexpectedFrame {
        /// What the protocol allows here.
        expected: &'static str,
        /// What arrived.
        got: FrameKind,
    },

    /// The peer's ephemeral key gives an all-zero X25519 shared secret.
    #[error("peer's ephemeral key is a low-order point (all-zero shared secret)")]
    WeakKey,

    /// The peer's identity proof does not verify against the transcript.
    #[error("peer's identity proof for {peer} does not verify")]
    BadIdentityProof {
        /// The identity the peer claimed.
        peer: PeerId,
    },

    /// We pinned a peer key ([`Handshake::expect_peer`]), and the peer proved
    /// a different one.
    ///
    /// [`Handshake::expect_peer`]: crate::handshake::Handshake::expect_peer
    #[error("peer key mismatch: expected {expected}, the peer proved {seen}")]
    PeerKeyMismatch {
        /// The pinned key.
        expected: PeerId,
        /// The key the peer proved it holds.
        seen: PeerId,
    },

    /// Our authorizer refused the peer.
    #[error("peer {0} is not authorized")]
    Unauthorized(PeerId),

    /// A record failed authentication: it was modified, replayed, reordered,
    /// or a record before it was dropped.
    #[error("record {sequence} failed authentication (modified, replayed, reordered or dropped)")]
    BadRecord {
        /// The sequence number the record was opened under.
        sequence: u64,
    },

    /// The peer sent an empty data record, which weft never sends.
    #[error("peer sent an empty data record")]
    EmptyRecord,

    /// A close record's payload is malformed.
    #[error("peer sent a malformed close record")]
    BadClose,

    /// The transport ended without the peer's close record: the connection
    /// was truncated (by an attacker, a crash or a reset).
    #[error("connection truncated: the transport ended without a close record")]
    Truncated,

    /// The connection (or channel) was closed by `side` with `code`:
    /// gracefully when the code is [`CloseCode::NO_ERROR`] (a drained
    /// go-away, a clean close; see
    /// [`Error::is_closed`](super::Error::is_closed)), as a failure
    /// otherwise (the peer refused us, or we closed with an error code).
    #[error("{}", closed_text(*side, *code, reason))]
    Closed {
        /// Who closed it.
        side: Side,
        /// The code it was closed with.
        code: CloseCode,
        /// The reason text (at most 256 bytes; empty for a graceful close).
        reason: String,
    },

    /// A close arrived in the clear during the handshake. It may be the
    /// peer explaining why it refused us, but anyone on the path could have
    /// sent it, code and reason included: never fall back to weaker
    /// settings (an older version, another suite) because of it.
    #[error("unauthenticated close during the handshake: {code} ({})", reason.escape_debug())]
    UnauthenticatedClose {
        /// The code it carried.
        code: CloseCode,
        /// The reason it carried.
        reason: String,
    },

    /// The sending key has sealed as much as it may (records before the
    /// nonce counter could wrap, or AES-GCM's data volume): the connection
    /// must be re-established.
    #[error("sending key exhausted after {0} records; reconnect")]
    KeyExhausted(u64),

    /// A record the peer began did not arrive whole in time
    /// ([`mux::Builder::record_read_timeout`](crate::mux::Builder::record_read_timeout)):
    /// a peer that sends all but the last byte of a large record holds our
    /// read buffer until then, and no longer.
    #[error("a record the peer began did not arrive whole within {}", crate::error::Rounded(*.0))]
    RecordTimeout(Duration),

    /// The peer sent more key updates in a row, with no data between
    /// them, than a receiver allows (32):
    /// each costs a key derivation, and an honest sender updates once in
    /// billions of records.
    #[error("peer sent more than {0} key updates in a row, with no data between them")]
    KeyUpdateFlood(u32),

    /// What the stack was asked cannot work, as the compiler could not
    /// tell: a pinned peer key with no encryption layer to verify it, or a
    /// Setup too large for any peer to accept. (Layers in the wrong order
    /// do not compile; see [`stack`](crate::stack).)
    #[error("misassembled stack: {0}")]
    Stack(&'static str),

    /// The peer broke the multiplexing protocol.
    #[error("peer violated the multiplexing protocol: {0}")]
    Protocol(Violation),

    /// A stream was reset, by `side`, with `code`.
    #[error("stream reset by the {side:?} side: {code}")]
    StreamReset {
        /// The code the resetting side gave.
        code: CloseCode,
        /// Who reset it.
        side: Side,
    },

    /// We already finished (half-closed) this stream or channel: no more
    /// writes.
    #[error("already finished by us: no more writes")]
    Finished,

    /// The peer did not process this stream: it was refused before being
    /// accepted, or lay above the last stream id of the peer's go-away. It
    /// is safe to send again on another connection.
    #[error("stream refused: the peer did not process it")]
    Refused,

    /// No new streams on this connection: `side` sent a go-away (or we used
    /// up our stream ids). Open the stream on another connection.
    #[error("connection is going away ({side:?} side): no new streams")]
    GoingAway {
        /// Who started it.
        side: Side,
    },

    /// `open()` waited longer than its timeout for the peer's stream credit.
    #[error("no stream credit from the peer within {}", crate::error::Rounded(*.0))]
    OpenTimeout(Duration),

    /// Nothing arrived from the peer for the idle timeout, pings included.
    #[error("peer silent for {}: connection presumed dead", crate::error::Rounded(*.0))]
    IdleTimeout(Duration),

    /// Admission control turned the handshake away before it finished
    /// (see [`AdmissionLayer`](crate::AdmissionLayer)): the
    /// transport is dropped, and the peer sees it close.
    #[error("handshake not admitted: {0}")]
    NotAdmitted(Refusal),

    /// The connection's driver task stopped (its tokio runtime shut down,
    /// or the task was aborted): the connection is gone.
    #[error("the connection's driver task stopped")]
    DriverStopped,
}

fn closed_text(side: Side, code: CloseCode, reason: &str) -> String {
    let who = match side {
        Side::Local => "we",
        Side::Remote => "the peer",
    };
    match (code, reason.is_empty()) {
        (CloseCode::NO_ERROR, _) => format!("connection closed gracefully ({who} ended it)"),
        (code, true) => format!("{who} closed the connection: {code}"),
        // The peer chose the text: escaped, it cannot forge log lines.
        (code, false) => format!("{who} closed the connection: {code} ({})", reason.escape_debug()),
    }
}

impl Repr {
    /// The reason our close record gives the peer for this error: its text,
    /// but for a pinned key or an authorizer that refused the peer, which
    /// the peer is told in general terms (an active attacker must not learn
    /// whom we expected).
    pub(super) fn reason_for_peer(&self) -> String {
        match self {
            Repr::PeerKeyMismatch { .. } => "peer key mismatch: not the key we expected".to_owned(),
            Repr::Unauthorized(_) => "peer not authorized".to_owned(),
            other => other.to_string(),
        }
    }
}

impl From<Violation> for Repr {
    fn from(violation: Violation) -> Self {
        Repr::Protocol(violation)
    }
}
