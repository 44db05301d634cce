//! The handshake's sans-IO cores, with no sockets and no clock: the Setup
//! exchange (`setup::SetupSent`) and the authentication typestate
//! (`ProofSent` → `ProofVerified` → `Authenticated`). Bytes cross between
//! two in-memory sides, tampered with on the way where a test says so.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

use super::{
    auth::{AuthV3, ProofVerified},
    early::ProofKey,
    Authenticated, Ephemeral, Identity, ProofSent, Rejected, EARLY_ACCEPTED, EARLY_REFUSED,
};
use crate::{
    error::{CloseCode, Error, Repr},
    frame::{Frame, FrameCodec, FrameKind},
    handshake::{CipherSuite, PeerId, Role},
    proto::Setup,
    record::RecordKey,
    setup::{Agreed, SetupSent},
};

const MAX_SETUP: usize = 4096;

/// One side before the handshake: its keys and its Setup.
struct Side {
    identity: Identity,
    ephemeral: Ephemeral,
    setup: SetupSent,
}

fn side(role: Role, seed: u8, suites: &[CipherSuite]) -> Side {
    let ephemeral = Ephemeral::generate();
    let setup = Setup {
        min_version: 1,
        max_version: 1,
        ephemeral_key: ephemeral.public_key().to_vec(),
        suites: suites.iter().map(|s| s.id()).collect(),
        ..Setup::default()
    };
    Side {
        identity: Identity::from_seed(&[seed; 32]),
        ephemeral,
        setup: SetupSent::new(role, setup, MAX_SETUP).unwrap(),
    }
}

/// The one frame in `bytes`.
fn frame(bytes: &[u8]) -> Frame {
    let mut buf = BytesMut::from(bytes);
    let frame = FrameCodec::new(MAX_SETUP).decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    frame
}

/// A side's agreement, and what it needs for the next step.
type Exchanged = (Result<Agreed, Error>, Side2);

/// Both Setups cross, `tamper` editing what reaches the acceptor.
fn exchange(dialer: Side, acceptor: Side, tamper: impl FnOnce(&mut Vec<u8>)) -> (Exchanged, Exchanged) {
    let mut to_acceptor = dialer.setup.frame().to_vec();
    tamper(&mut to_acceptor);
    let to_dialer = acceptor.setup.frame().to_vec();
    let d = dialer.setup.receive(frame(&to_dialer));
    let a = acceptor.setup.receive(frame(&to_acceptor));
    let d_next = Side2 {
        identity: dialer.identity,
        ephemeral: dialer.ephemeral,
    };
    let a_next = Side2 {
        identity: acceptor.identity,
        ephemeral: acceptor.ephemeral,
    };
    ((d, d_next), (a, a_next))
}

/// A side after its Setup: what proving takes.
struct Side2 {
    identity: Identity,
    ephemeral: Ephemeral,
}

/// Both sides prove and verify; each side's outcome.
fn authenticate(
    d: (Agreed, Side2),
    a: (Agreed, Side2),
    tamper: impl FnOnce(&mut Vec<u8>),
) -> (Result<ProofVerified, Rejected>, Result<ProofVerified, Rejected>) {
    let d_sent = ProofSent::new(&d.0, d.1.ephemeral, &d.1.identity).unwrap();
    let a_sent = ProofSent::new(&a.0, a.1.ephemeral, &a.1.identity).unwrap();
    let mut to_acceptor = d_sent.record().to_vec();
    tamper(&mut to_acceptor);
    let to_dialer = a_sent.record().to_vec();
    (
        d_sent.receive(frame(&to_dialer)),
        a_sent.receive(frame(&to_acceptor)),
    )
}

fn agreed_pair(suites: &[CipherSuite]) -> ((Agreed, Side2), (Agreed, Side2)) {
    let ((d, ds), (a, acs)) = exchange(
        side(Role::Dialer, 1, suites),
        side(Role::Acceptor, 2, suites),
        |_| {},
    );
    ((d.unwrap(), ds), (a.unwrap(), acs))
}

fn peer(seed: u8) -> PeerId {
    Identity::from_seed(&[seed; 32]).peer_id()
}

/// A record `key` seals, and whether `other` opens it.
fn opens(seal: &mut RecordKey, open: &mut RecordKey) -> bool {
    let header = FrameKind::Data.header(5 + 16);
    let mut record = b"hello".to_vec();
    let tag = seal.seal(&header, &mut record).unwrap();
    record.extend_from_slice(&tag);
    open.open(&header, &mut record).is_ok()
}

#[test]
fn both_sides_agree_and_authenticate_without_sockets() {
    let (d, a) = agreed_pair(&[CipherSuite::Aes256Gcm]);
    assert_eq!(d.0.transcript(), a.0.transcript());
    assert_eq!(d.0.agreement().suite(), CipherSuite::Aes256Gcm);
    let (dv, av) = authenticate(d, a, |_| {});
    let (dv, av) = (dv.unwrap(), av.unwrap());
    assert_eq!(dv.peer(), peer(2));
    assert_eq!(av.peer(), peer(1));
    let d: Authenticated = dv.authorize(Some(peer(2)), None).unwrap();
    let a: Authenticated = av.authorize(None, Some(&|p: &PeerId| *p == peer(1))).unwrap();
    let (_, d_keys, _) = d.into_parts();
    let (_, a_keys, _) = a.into_parts();
    let ((mut d_seal, mut d_open), (mut a_seal, mut a_open)) = (d_keys.unwrap(), a_keys.unwrap());
    // Each side opens what the other seals, at record 1 of each direction.
    assert!(opens(&mut d_seal, &mut a_open));
    assert!(opens(&mut a_seal, &mut d_open));
}

#[test]
fn editing_any_byte_of_a_setup_fails_the_handshake() {
    let len = side(Role::Dialer, 1, &[CipherSuite::Aes256Gcm])
        .setup
        .frame()
        .len();
    // Every byte of the payload (the header's length is checked on its own).
    for offset in 4..len {
        let flip = |bytes: &mut Vec<u8>| bytes[offset] ^= 0x01;
        let suites = [CipherSuite::Aes256Gcm, CipherSuite::ChaCha20Poly1305];
        let ((d, ds), (a, acs)) = exchange(
            side(Role::Dialer, 1, &suites),
            side(Role::Acceptor, 2, &suites),
            flip,
        );
        let (Ok(d), Ok(a)) = (d, a) else {
            continue; // refused at the Setup: fine
        };
        assert_ne!(d.transcript(), a.transcript(), "byte {offset}");
        let (dv, av) = authenticate((d, ds), (a, acs), |_| {});
        // The two sides derived different keys: neither opens the other's proof.
        for outcome in [dv, av] {
            let err = outcome.expect_err("a tampered Setup authenticated");
            assert!(
                matches!(
                    err.error().repr(),
                    Repr::BadRecord { sequence: 0 } | Repr::WeakKey
                ),
                "byte {offset}: {:?}",
                err.error()
            );
        }
    }
}

#[test]
fn editing_a_proof_fails_authentication_and_the_close_is_sealed() {
    let (d, a) = agreed_pair(&[CipherSuite::XChaCha20Poly1305]);
    let (dv, av) = authenticate(d, a, |record| {
        let last = record.len() - 1;
        record[last] ^= 0x80;
    });
    assert!(dv.is_ok(), "the dialer got a genuine proof");
    let rejected = av.unwrap_err();
    assert!(
        matches!(rejected.error().repr(), Repr::BadRecord { sequence: 0 }),
        "{:?}",
        rejected.error()
    );
    let close = frame(rejected.close_record().expect("the peer is told"));
    assert_eq!(close.kind, FrameKind::Close);
    assert_eq!(
        close.payload.len(),
        4 + rejected.error().to_string().len().min(256) + 16,
        "sealed: a tag"
    );
}

#[test]
fn a_close_in_the_clear_in_place_of_the_proof_is_unauthenticated() {
    let (d, a) = agreed_pair(&[CipherSuite::Aes256Gcm]);
    let d_sent = ProofSent::new(&d.0, d.1.ephemeral, &d.1.identity).unwrap();
    // An on-path attacker (or a peer that failed before its keys) says "no".
    let mut clear = FrameKind::Close.header(4 + 3).to_vec();
    clear.extend_from_slice(&CloseCode::UNAUTHORIZED.0.to_be_bytes());
    clear.extend_from_slice(b"go!");
    let rejected = d_sent.receive(frame(&clear)).unwrap_err();
    assert!(
        matches!(rejected.error().repr(), Repr::UnauthenticatedClose { code: CloseCode::UNAUTHORIZED, reason } if reason == "go!"),
        "{:?}",
        rejected.error()
    );
    assert!(rejected.close_record().is_none(), "no answer to a close");
    drop(a);
}

#[test]
fn a_refusal_is_sealed_and_follows_the_proof() {
    let (d, a) = agreed_pair(&[CipherSuite::Aes256Gcm]);
    let (dv, av) = authenticate(d, a, |_| {});
    // The dialer accepts the acceptor; the acceptor refuses the dialer.
    let (_, keys, _) = dv.unwrap().authorize(Some(peer(2)), None).unwrap().into_parts();
    let refusal = av.unwrap().authorize(Some(peer(9)), None).unwrap_err();
    assert!(
        matches!(refusal.error().repr(), Repr::PeerKeyMismatch { expected, seen } if *expected == peer(9) && *seen == peer(1)),
        "{:?}",
        refusal.error()
    );
    // Its close is record 1 of its direction, sealed: the dialer opens it
    // with the key that follows the proof, and reads why.
    let (_, mut open) = keys.unwrap();
    let mut close = frame(refusal.close_record().unwrap());
    assert_eq!(close.kind, FrameKind::Close);
    let plaintext = open.open(&close.header, &mut close.payload).unwrap();
    assert_eq!(plaintext[..4], CloseCode::UNAUTHORIZED.0.to_be_bytes());
    assert!(
        String::from_utf8_lossy(&plaintext[4..]).contains("expected"),
        "names both keys"
    );
}

#[test]
fn the_authorizer_decides_after_the_pin() {
    let (d, a) = agreed_pair(&[CipherSuite::Aes256Gcm]);
    let (_, av) = authenticate(d, a, |_| {});
    let refused = av
        .unwrap()
        .authorize(Some(peer(1)), Some(&|_: &PeerId| false))
        .unwrap_err();
    assert!(
        matches!(refused.error().repr(), Repr::Unauthorized(p) if *p == peer(1)),
        "{:?}",
        refused.error()
    );
    assert!(refused.close_record().is_some());
}

#[test]
fn with_the_plaintext_suite_proofs_are_still_verified_but_there_are_no_keys() {
    let (d, a) = agreed_pair(&[CipherSuite::Plaintext]);
    assert_eq!(d.0.agreement().suite(), CipherSuite::Plaintext);
    let (dv, av) = authenticate(d, a, |_| {});
    let (peer_of_dialer, keys, _) = dv.unwrap().authorize(None, None).unwrap().into_parts();
    assert_eq!(peer_of_dialer, peer(2));
    assert!(keys.is_none());
    assert_eq!(av.unwrap().peer(), peer(1));
    // A tampered proof in the clear fails its signature instead.
    let (d, a) = agreed_pair(&[CipherSuite::Plaintext]);
    let (_, av) = authenticate(d, a, |record| record[40] ^= 1);
    assert!(matches!(
        av.unwrap_err().error().repr(),
        Repr::BadIdentityProof { .. }
    ));
}

#[test]
fn a_low_order_ephemeral_key_is_refused_before_any_key_is_derived() {
    let dialer = side(Role::Dialer, 1, &[CipherSuite::Aes256Gcm]);
    let mut setup = Setup {
        min_version: 1,
        max_version: 1,
        ephemeral_key: vec![0; 32],
        suites: vec![CipherSuite::Aes256Gcm.id()],
        ..Setup::default()
    };
    setup.protocols.clear();
    let evil = SetupSent::new(Role::Acceptor, setup, MAX_SETUP).unwrap();
    let agreed = dialer.setup.receive(frame(evil.frame())).unwrap();
    let err = ProofSent::new(&agreed, dialer.ephemeral, &dialer.identity).unwrap_err();
    assert!(matches!(err.repr(), Repr::WeakKey), "{err:?}");
}

#[test]
fn a_refusal_in_place_of_the_setup_is_unauthenticated() {
    let dialer = side(Role::Dialer, 1, &[CipherSuite::Aes256Gcm]);
    let mut clear = FrameKind::Close.header(4).to_vec();
    clear.extend_from_slice(&CloseCode::VERSION_MISMATCH.0.to_be_bytes());
    let err = dialer.setup.receive(frame(&clear)).unwrap_err();
    assert!(
        matches!(
            err.repr(),
            Repr::UnauthenticatedClose {
                code: CloseCode::VERSION_MISMATCH,
                ..
            }
        ),
        "{err:?}"
    );
}

/// Version 3's Auth step with early data: the dialer's and the acceptor's
/// `ProofSent`, over one transcript; `acceptor_key` is what the acceptor
/// proves with (`None`: early data refused, it signs), `status` what it
/// says.
fn early_auth(
    dialer_key: Option<ProofKey>,
    acceptor_key: Option<ProofKey>,
    status: u8,
) -> (ProofSent, ProofSent, Identity, Identity) {
    let (dialer, acceptor) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
    let (d_eph, a_eph) = (Ephemeral::generate(), Ephemeral::generate());
    let (d_pub, a_pub) = (d_eph.public_key(), a_eph.public_key());
    let transcript = [5; 32];
    let start = |role, peer: &[u8; 32], eph, identity: &Identity, extension: &[u8], early| {
        let v3 = AuthV3 {
            agreed: true,
            extension,
            early,
        };
        ProofSent::start(
            role,
            CipherSuite::Aes256Gcm,
            &transcript,
            Some(peer),
            eph,
            identity,
            v3,
        )
        .unwrap()
    };
    let d_sent = start(Role::Dialer, &a_pub, d_eph, &dialer, &[], dialer_key);
    let a_sent = start(Role::Acceptor, &d_pub, a_eph, &acceptor, &[status], acceptor_key);
    (d_sent, a_sent, dialer, acceptor)
}

#[test]
fn an_acceptor_that_took_early_data_proves_itself_with_its_key_and_the_dialer_sends_no_proof() {
    let key = ProofKey::random();
    let (d_sent, a_sent, dialer, acceptor) = early_auth(Some(key.clone()), Some(key), EARLY_ACCEPTED);
    assert!(
        d_sent.record().is_empty(),
        "no proof before the acceptor's verdict"
    );
    let verified = d_sent.receive(frame(a_sent.record())).unwrap();
    assert_eq!(verified.peer(), acceptor.peer_id());
    let mut authenticated = verified.authorize(Some(acceptor.peer_id()), None).unwrap();
    assert!(authenticated.owed_proof(&dialer).unwrap().is_none());
    // And the two sides' keys match: the dialer's first record opens.
    let (_, d_keys, extras) = authenticated.into_parts();
    assert_eq!(extras.early_status, EARLY_ACCEPTED);
    let (mut d_seal, _) = d_keys.unwrap();
    let (_, mut a_open) = a_sent.accepted_early().unwrap();
    assert!(opens(&mut d_seal, &mut a_open));
}

#[test]
fn an_accepting_proof_under_any_other_key_or_for_early_data_never_sent_is_refused() {
    let (d_sent, a_sent, ..) = early_auth(Some(ProofKey::random()), Some(ProofKey::random()), EARLY_ACCEPTED);
    let refused = d_sent.receive(frame(a_sent.record())).unwrap_err();
    assert!(
        matches!(refused.error().repr(), Repr::BadIdentityProof { .. }),
        "{:?}",
        refused.error()
    );
    let (d_sent, a_sent, ..) = early_auth(None, Some(ProofKey::random()), EARLY_ACCEPTED);
    let refused = d_sent.receive(frame(a_sent.record())).unwrap_err();
    assert!(
        matches!(refused.error().repr(), Repr::InvalidSetup(_)),
        "{:?}",
        refused.error()
    );
}

#[test]
fn a_dialer_whose_early_data_was_refused_proves_itself_after_the_acceptor() {
    let (d_sent, a_sent, dialer, acceptor) = early_auth(Some(ProofKey::random()), None, EARLY_REFUSED);
    let verified = d_sent.receive(frame(a_sent.record())).unwrap();
    let mut authenticated = verified.authorize(Some(acceptor.peer_id()), None).unwrap();
    let proof = authenticated
        .owed_proof(&dialer)
        .unwrap()
        .expect("our proof is due");
    assert!(authenticated.owed_proof(&dialer).unwrap().is_none(), "once");
    let seen = a_sent.receive(frame(&proof)).unwrap();
    assert_eq!(seen.peer(), dialer.peer_id());
}
