//! The cryptography of the handshake, as plain functions over bytes: an
//! endpoint's long-term [`Identity`] (Ed25519), fresh ephemeral X25519
//! keys ([`Ephemeral`], made ahead of time), the key schedule that turns
//! their agreement and the transcript into record keys, and version 3's
//! early data ([`early`]: box keys, the box, tickets, the replay record).
//!
//! The handshake machine (`handshake`) runs these in its steps; the record
//! protection they feed is [`RecordKey`](crate::record::RecordKey).

pub(crate) mod early;
mod ephemeral;
mod identity;
mod keys;
#[cfg(test)]
mod wipe_tests;

pub(crate) use ephemeral::{Ephemeral, EphemeralPool};
pub use identity::Identity;

pub(crate) use identity::{verify_proof, verify_signature, PROOF_LEN};
pub(crate) use keys::derive_record_keys;
