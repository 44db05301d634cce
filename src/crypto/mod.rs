//! Encryption: ephemeral X25519 keys, cipher suites, identity proofs and
//! record protection.
//!
//! The sans-IO parts ([`CipherSuite`], [`Identity`], the key schedule and
//! the record keys) are plain functions over bytes; [`EncryptLayer`] is the
//! tower layer that runs them over a channel.

mod ephemeral;
mod identity;
mod keys;
mod layer;
mod record;
mod suite;

pub use identity::{Identity, ParsePeerIdError, PeerId, PROOF_LEN};
pub use layer::{Encrypt, EncryptLayer};
pub use suite::{CipherSuite, ParseSuiteError};

pub(crate) use identity::verify_proof;
pub(crate) use keys::derive_record_keys;
pub use record::{RecordKey, MAX_TAG_LEN};
