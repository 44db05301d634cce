//! Encryption and identity: ephemeral X25519 keys, the key schedule,
//! Ed25519 identity proofs, and [`EncryptLayer`], which runs them over a
//! channel.
//!
//! The sans-IO parts ([`Identity`], the key schedule) are plain functions
//! over bytes; the record protection they feed is
//! [`RecordKey`](crate::record::RecordKey).

mod ephemeral;
mod identity;
mod keys;
mod layer;

pub use identity::{Identity, PROOF_LEN};
pub use layer::{Encrypt, EncryptLayer};

pub(crate) use identity::verify_proof;
pub(crate) use keys::derive_record_keys;
