//! The handshake: who dialed ([`Role`]), the request that travels down
//! the stack ([`Handshake`]) collecting what each layer asks for, the
//! values both sides name ([`Versions`], [`CipherSuite`], [`PeerId`]), and
//! what they agreed ([`Agreement`]).
//!
//! Inside, versions 1 to 3 are one sans-IO machine that owns the
//! transcript, each stage a type:
//!
//! ```text
//!   Start ─new─▶ SetupSent ─receive─▶ Agreed ─proceed─▶ ProofSent ─receive─▶ ProofVerified
//!   the layers'  our Setup out        both Setups:       keys derived,        the peer's proof
//!   parts        (a dialer's early    the agreement,     early data judged,   checked
//!                 data sealed in it)  the transcript     our Auth out
//!                                                                    ─authorize─▶ Authenticated ─finish─▶ Established
//!                                                                     pin, authorizer            our owed proof, what
//!                                                                                                we learned
//! ```
//!
//! `Agreed` ends the handshake at once when neither side encrypts, and an
//! acceptor that accepts early data answers after its Auth without
//! waiting for the dialer's. The layers only describe, on the way down;
//! [`NegotiateLayer`](crate::NegotiateLayer), innermost, runs the machine
//! over the transport (its shell, `drive`, is the only part that does I/O)
//! and hands the established channel up, where each layer reads what it
//! needs of it.

mod agree;
mod auth;
#[cfg(feature = "fuzzing")]
pub(crate) mod bench;
mod drive;
mod early;
pub(crate) mod encrypt;
mod exchange;
pub(crate) mod negotiate;
mod offer;
mod proof;
pub(crate) mod record_size;
mod request;
mod setup;
pub(crate) mod stage;
#[cfg(test)]
mod tests;

pub use crate::crypto::early::EarlyDataStats;
pub use crate::terms::{Agreement, CipherSuite, EarlyData, PeerId, Role, Versions};
pub(crate) use negotiate::Negotiated;
pub(crate) use offer::StreamOffer;
pub use request::{Handshake, HandshakeExt};

#[cfg(feature = "fuzzing")]
pub(crate) use {
    early::Clock,
    exchange::{SetupSent, Start},
};
