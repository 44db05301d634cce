//! The terms of a connection: who dialed ([`Role`]), the versions each
//! side speaks ([`Versions`]), the ways to protect records
//! ([`CipherSuite`]), whose key is whose ([`PeerId`]), and what the two
//! sides agreed ([`Agreement`]), and what became of early data
//! ([`EarlyData`]).
//!
//! Plain names, with no I/O and nothing of the rest of weft beneath
//! them: the record layer, the handshake and everything above build on
//! them. They are public as `weft::handshake::{Role, Versions, ...}`.

mod agreement;
mod early;
mod peer;
mod role;
mod suite;
mod versions;

pub use agreement::Agreement;
pub use early::EarlyData;
pub use peer::PeerId;
pub use role::Role;
pub use suite::CipherSuite;
pub(crate) use versions::Version;
pub use versions::Versions;
