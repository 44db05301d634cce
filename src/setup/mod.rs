//! The one Setup exchange: versions and every offer, in one message per side.
//!
//! Both sides send their [`Setup`](crate::proto::Setup) the moment the
//! transport is up, without waiting for the peer, so negotiation costs one
//! round trip in all. [`agree`] is the pure function both sides run on the
//! two messages; it is deterministic, so both reach the same
//! [`Agreement`](crate::handshake::Agreement) without another message.
//! [`SetupSent`] is the exchange as a sans-IO state machine, and
//! [`NegotiateLayer`] the tower layer that runs it over a transport.

mod agreement;
mod exchange;
mod layer;
mod negotiated;

pub(crate) use agreement::agree;
#[cfg(test)]
pub(crate) use exchange::Agreed;
pub(crate) use exchange::SetupSent;
#[cfg(test)]
pub(crate) use exchange::{append_early, setup_before_early};
pub use layer::{Negotiate, NegotiateLayer};
pub use negotiated::Negotiated;

pub(crate) use agreement::transcript_hash;
