use std::fmt;

use aws_lc_rs::{
    hmac,
    signature::{Ed25519KeyPair, KeyPair},
};
use ed25519_dalek::{Signature, VerifyingKey};
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
/// measurement: a signature (aws-lc, 9 µs here) and a strict verification
/// (ed25519-dalek, 37 µs) cost less than the two extra X25519 operations a
/// static-key box would (104 µs); see BENCHMARKS.md. The secret key is kept
/// inside aws-lc, which cleanses it when the identity is dropped.
///
/// ```
/// use weft::Identity;
///
/// let identity = Identity::from_seed(&[7; 32]);
/// let again = Identity::from_seed(&[7; 32]);
/// assert_eq!(identity.peer_id(), again.peer_id());
/// ```
pub struct Identity {
    keys: Ed25519KeyPair,
    id: PeerId,
    /// What [`replica_secret`](Self::replica_secret) derives from: a
    /// function of the seed, so every holder of the identity has the same
    /// one. Boxed, so that it is never moved, and wiped when dropped.
    replica_root: Box<Zeroizing<[u8; 32]>>,
}

const REPLICA_ROOT_LABEL: &[u8] = b"weft v3 replica secrets";

impl Identity {
    /// A fresh random identity.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut seed[..]);
        Self::from_seed(&seed)
    }

    /// The identity for a 32-byte secret seed (keep the seed secret).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let keys = Ed25519KeyPair::from_seed_unchecked(seed).expect("aws-lc takes any 32-byte Ed25519 seed");
        let public: [u8; 32] = keys
            .public_key()
            .as_ref()
            .try_into()
            .expect("an Ed25519 public key is 32 bytes");
        let mut replica_root = Box::new(Zeroizing::new([0u8; 32]));
        replica_root.copy_from_slice(
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, seed), REPLICA_ROOT_LABEL).as_ref(),
        );
        Self {
            keys,
            id: PeerId::from_bytes(public),
            replica_root,
        }
    }

    /// A secret that every process holding this identity derives alike,
    /// with no word between them: HMAC-SHA-256, keyed by a function of the
    /// seed, of `u8(label length) || label || context`. Replicas sharing an identity derive
    /// their box keys with it (docs/SECURITY.md says what that costs when
    /// the identity is stolen).
    pub(crate) fn replica_secret(&self, label: &[u8], context: &[u8]) -> Zeroizing<[u8; 32]> {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.replica_root[..]);
        // The label's length first, so that no label and context can pass
        // for another label's.
        let mut message = Vec::with_capacity(1 + label.len() + context.len());
        message.push(u8::try_from(label.len()).expect("a label under 256 bytes"));
        message.extend_from_slice(label);
        message.extend_from_slice(context);
        let mut secret = Zeroizing::new([0u8; 32]);
        secret.copy_from_slice(hmac::sign(&key, &message).as_ref());
        secret
    }

    /// What replica secrets derive from (for the wipe check).
    #[cfg(test)]
    pub(crate) fn replica_root(&self) -> [u8; 32] {
        **self.replica_root
    }

    /// The public half, as peers see it.
    pub fn peer_id(&self) -> PeerId {
        self.id
    }

    /// An Ed25519 signature of `message` (box key announcements and early
    /// data, docs/PROTOCOL.md section 17).
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        crate::sync::assert_unlocked("an Ed25519 signature");
        self.keys
            .sign(message)
            .as_ref()
            .try_into()
            .expect("an Ed25519 signature is 64 bytes")
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

    fn unhex<const N: usize>(text: &str) -> [u8; N] {
        let bytes: Vec<u8> = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    }

    #[test]
    fn signatures_are_rfc_8032s_and_verify_strictly() {
        // RFC 8032 section 7.1, tests 1 and 2.
        let vectors = [
            (
                "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
                "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
                &[][..],
                "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
            ),
            (
                "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
                "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
                &[0x72][..],
                "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
            ),
        ];
        for (seed, public, message, signature) in vectors {
            let id = Identity::from_seed(&unhex(seed));
            assert_eq!(id.peer_id().as_bytes(), &unhex::<32>(public));
            let signed = id.sign(message);
            assert_eq!(signed, unhex::<64>(signature));
            assert!(verify_signature(&id.peer_id(), message, &signed));
            let mut flipped = signed;
            flipped[63] ^= 0x10;
            assert!(!verify_signature(&id.peer_id(), message, &flipped));
        }
        // The signer (aws-lc) and the verifier (ed25519-dalek) agree
        // byte for byte: Ed25519 signatures are deterministic.
        for seed in 0..8u8 {
            let id = Identity::from_seed(&[seed; 32]);
            let dalek = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
            let message = vec![seed; 40 * usize::from(seed)];
            assert_eq!(id.peer_id().as_bytes(), dalek.verifying_key().as_bytes());
            assert_eq!(
                id.sign(&message),
                ed25519_dalek::Signer::sign(&dalek, &message).to_bytes()
            );
        }
    }

    #[test]
    fn peer_ids_refuse_bad_text() {
        assert!("zz".parse::<PeerId>().is_err());
        assert!("g".repeat(64).parse::<PeerId>().is_err());
        assert!("é".repeat(32).parse::<PeerId>().is_err());
    }
}
