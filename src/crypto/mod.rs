//! Encryption and identity: ephemeral X25519 keys, the key schedule,
//! Ed25519 identity proofs, the authentication step of the handshake as a
//! sans-IO state machine, and [`EncryptLayer`], which runs it over a
//! channel.
//!
//! The sans-IO parts ([`Identity`], [`Ephemeral`], the key schedule, and
//! [`ProofSent`] → [`ProofVerified`] → [`Authenticated`]) are plain
//! functions over bytes; the record protection they feed is
//! [`RecordKey`](crate::record::RecordKey).

mod auth;
pub(crate) mod early;
mod early_layer;
mod ephemeral;
mod identity;
mod keys;
mod layer;

pub(crate) use auth::{Authenticated, ProofSent, Rejected, EARLY_ACCEPTED, EARLY_REFUSED};
pub(crate) use ephemeral::Ephemeral;
pub use identity::Identity;
pub use layer::{Encrypt, EncryptLayer, Encryptable};

pub(crate) use identity::verify_proof;
pub(crate) use keys::derive_record_keys;

#[cfg(test)]
mod tests;
