use std::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use crate::{
    error::{Error, Repr},
    terms::{PeerId, Role},
};

/// Bytes in an identity proof: the 32-byte public key and a 64-byte
/// Ed25519 signature.
pub(crate) const PROOF_LEN: usize = 32 + 64;

const PROOF_CONTEXT: &[u8] = b"weft v1 identity proof";

/// An endpoint's long-term identity: an Ed25519 key pair.
///
/// Each side proves it holds its key by signing the handshake transcript
/// (both Setup messages) in its first sealed record. Ed25519 was chosen by
/// measurement: a signature and a strict verification (ed25519-dalek, 18 +
/// 36 µs here) cost less than the two extra X25519 operations a static-key
/// box would (104 µs), and less than ring's Ed25519 (23 + 45 µs); see
/// BENCHMARKS.md. The secret key is zeroized when the identity is dropped.
///
/// ```
/// use weft::Identity;
///
/// let identity = Identity::from_seed(&[7; 32]);
/// let again = Identity::from_seed(&[7; 32]);
/// assert_eq!(identity.peer_id(), again.peer_id());
/// ```
pub struct Identity {
    keys: SigningKey,
    id: PeerId,
}

impl Identity {
    /// A fresh random identity.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut seed[..]);
        Self::from_seed(&seed)
    }

    /// The identity for a 32-byte secret seed (keep the seed secret).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let keys = SigningKey::from_bytes(seed);
        let id = PeerId::from_bytes(keys.verifying_key().to_bytes());
        Self { keys, id }
    }

    /// The public half, as peers see it.
    pub fn peer_id(&self) -> PeerId {
        self.id
    }

    /// An Ed25519 signature of `message` (box key announcements and early
    /// data, docs/PROTOCOL.md section 17).
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        crate::sync::assert_unlocked("an Ed25519 signature");
        self.keys.sign(message).to_bytes()
    }

    /// The proof that we hold this identity in the session whose transcript
    /// hash is `transcript`, as `role`.
    pub(crate) fn prove(&self, role: Role, transcript: &[u8; 32]) -> [u8; PROOF_LEN] {
        let signature = self.sign(&proof_message(role, transcript));
        let mut proof = [0u8; PROOF_LEN];
        proof[..32].copy_from_slice(self.id.as_bytes());
        proof[32..].copy_from_slice(&signature);
        proof
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("peer_id", &self.id)
            .finish_non_exhaustive()
    }
}

fn proof_message(role: Role, transcript: &[u8; 32]) -> [u8; PROOF_CONTEXT.len() + 1 + 32] {
    let mut msg = [0u8; PROOF_CONTEXT.len() + 1 + 32];
    msg[..PROOF_CONTEXT.len()].copy_from_slice(PROOF_CONTEXT);
    msg[PROOF_CONTEXT.len()] = role.wire();
    msg[PROOF_CONTEXT.len() + 1..].copy_from_slice(transcript);
    msg
}

/// Checks a peer's proof (made as `role`) against our transcript hash and
/// returns the identity it proves.
pub(crate) fn verify_proof(proof: &[u8], role: Role, transcript: &[u8; 32]) -> Result<PeerId, Error> {
    if proof.len() != PROOF_LEN {
        return Err(Repr::InvalidSetup("identity proof must be 96 bytes").into());
    }
    let peer = PeerId::from_bytes(proof[..32].try_into().expect("32 bytes"));
    let signature = proof[32..].try_into().expect("64 bytes");
    if !verify_signature(&peer, &proof_message(role, transcript), signature) {
        return Err(Repr::BadIdentityProof { peer }.into());
    }
    Ok(peer)
}

/// Whether `signature` is `signer`'s over `message`, verified strictly
/// (docs/PROTOCOL.md, section 9): no small-order keys or R, no
/// non-canonical R or S (so no malleable signatures), and one encoding of
/// the key, so that a second encoding of a key never passes for another
/// identity.
pub(crate) fn verify_signature(signer: &PeerId, message: &[u8], signature: &[u8; 64]) -> bool {
    crate::sync::assert_unlocked("an Ed25519 verification");
    if !is_canonical_point(signer.as_bytes()) {
        return false;
    }
    let Ok(key) = VerifyingKey::from_bytes(signer.as_bytes()) else {
        return false;
    };
    key.verify_strict(message, &Signature::from_bytes(signature))
        .is_ok()
}

/// Whether a compressed Edwards point encodes its y-coordinate canonically
/// (below p = 2^255 - 19). The sign bit of x is bit 255.
fn is_canonical_point(bytes: &[u8; 32]) -> bool {
    let top = bytes[31] & 0x7f;
    !(top == 0x7f && bytes[1..31].iter().all(|&b| b == 0xff) && bytes[0] >= 0xed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_for_the_same_role_and_transcript() {
        let id = Identity::from_seed(&[3; 32]);
        let th = [5u8; 32];
        let proof = id.prove(Role::Dialer, &th);
        assert_eq!(verify_proof(&proof, Role::Dialer, &th).unwrap(), id.peer_id());
        assert!(matches!(
            verify_proof(&proof, Role::Acceptor, &th)
                .as_ref()
                .map_err(Error::repr),
            Err(Repr::BadIdentityProof { .. })
        ));
        assert!(verify_proof(&proof, Role::Dialer, &[6; 32]).is_err());
        let mut forged = proof;
        forged[..32].copy_from_slice(Identity::from_seed(&[4; 32]).peer_id().as_bytes());
        assert!(verify_proof(&forged, Role::Dialer, &th).is_err());
        assert!(verify_proof(&proof[..95], Role::Dialer, &th).is_err());
    }

    #[test]
    fn non_canonical_keys_are_refused_before_verification() {
        // y = p + 2, with either sign bit: the same point as y = 2.
        let mut key = [0xff; 32];
        key[0] = 0xef;
        key[31] = 0x7f;
        assert!(!is_canonical_point(&key));
        key[31] = 0xff;
        assert!(!is_canonical_point(&key));
        // p - 1 is the largest canonical y.
        key[0] = 0xec;
        assert!(is_canonical_point(&key));
        let mut proof = [0u8; PROOF_LEN];
        proof[..32].copy_from_slice(&[0xff; 32]);
        assert!(matches!(
            verify_proof(&proof, Role::Dialer, &[0; 32])
                .as_ref()
                .map_err(Error::repr),
            Err(Repr::BadIdentityProof { .. })
        ));
        let id = Identity::from_seed(&[9; 32]);
        assert!(is_canonical_point(id.peer_id().as_bytes()));
    }

    #[test]
    fn peer_ids_refuse_bad_text() {
        assert!("zz".parse::<PeerId>().is_err());
        assert!("g".repeat(64).parse::<PeerId>().is_err());
        assert!("é".repeat(32).parse::<PeerId>().is_err());
    }
}
