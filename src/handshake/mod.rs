//! What a handshake is made of: who dialed ([`Role`]), the request that
//! travels down the stack ([`Handshake`]) with each layer's typed part of
//! the offer, the values both sides name in it ([`Versions`],
//! [`CipherSuite`], [`PeerId`]), and what they agreed ([`Agreement`]).
//!
//! Nothing here does I/O or depends on another part of weft: every layer
//! above builds on these names.

mod agreement;
mod offer;
mod peer;
mod request;
mod role;
mod suite;
mod versions;

pub use agreement::Agreement;
pub(crate) use offer::{EncryptionOffer, Offer, StreamOffer};
pub use peer::PeerId;
pub(crate) use request::EarlySealer;
pub use request::{Handshake, HandshakeExt};
pub use role::Role;
pub use suite::CipherSuite;
pub use versions::Versions;
