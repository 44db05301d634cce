//! Early data's cryptography, with no clock and no handshake: the box
//! keys, the box, the binding and tickets. (The test vectors of
//! docs/PROTOCOL.md section 17.7 are in `vectors.rs`.)

use std::sync::Arc;

use super::*;
use crate::crypto::{Ephemeral, Identity};

const NOW_S: u64 = 1_800_000_000;
const NOW_MS: u64 = NOW_S * 1000;
const DAY: u64 = 86_400;

fn acceptor_identity() -> Identity {
    Identity::from_seed(&[1; 32])
}

/// An acceptor's box key made now, good for two days, and its
/// announcement as a dialer verified it.
fn box_key() -> (Arc<BoxKey>, Announced) {
    let identity = acceptor_identity();
    let key = Arc::new(BoxKey::generate(&identity, NOW_S, NOW_S + 2 * DAY));
    let announced = Announced::verify(&key.announcement, &identity.peer_id()).expect("our own verifies");
    (key, announced)
}

/// Early data of `payload` to `announced`, signed by identity 2, bound to
/// identity 1 and `protocol`: D0, field 10 and the ephemeral key.
fn sealed(announced: &Announced, protocol: &[u8], payload: &[u8]) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    sealed_with(
        announced,
        Credential::Signed(&Identity::from_seed(&[2; 32])),
        NOW_MS,
        protocol,
        payload,
    )
}

fn sealed_with(
    announced: &Announced,
    credential: Credential<'_>,
    at_ms: u64,
    protocol: &[u8],
    payload: &[u8],
) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    let d0 = b"\x08\x01\x10\x03 the rest of a setup".to_vec();
    let (ephemeral, seal) = PreparedBox::new(announced, Ephemeral::generate()).unwrap().seal(
        credential,
        &acceptor_identity().peer_id(),
        protocol,
        at_ms,
        payload,
    );
    let d = append_early(d0.clone(), &seal.expect("small enough").seal(&d0));
    let field = field(&d, &d0);
    (d0, field, ephemeral.public_key())
}

/// D0 with field 10 appended, as a Setup carries it.
fn append_early(mut d0: Vec<u8>, early: &[u8]) -> Vec<u8> {
    d0.push(0x52);
    prost::encoding::encode_varint(early.len() as u64, &mut d0);
    d0.extend_from_slice(early);
    d0
}

/// Field 10 as a decoder sees it: the bytes after D0's key and length.
fn field(d: &[u8], d0: &[u8]) -> Vec<u8> {
    let mut rest = &d[d0.len() + 1..];
    let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
    assert_eq!(rest.len(), len);
    rest.to_vec()
}

/// Opens and checks early data as acceptor 1 does, for `protocol`.
fn accept(
    key: &BoxKey,
    early: &[u8],
    d0: &[u8],
    ephemeral: &[u8; 32],
    protocol: &[u8],
) -> Result<PeerId, &'static str> {
    let opened = open_box(key, early, d0, ephemeral)?;
    opened.verify(key, &acceptor_identity().peer_id(), protocol, ephemeral)
}

#[test]
fn an_announcement_verifies_only_against_its_identity_until_it_expires_and_never_for_a_small_order_key() {
    let (key, announced) = box_key();
    let identity = acceptor_identity();
    assert!(announced.valid_at(NOW_S + 2 * DAY - 1));
    assert!(!announced.valid_at(NOW_S + 2 * DAY));
    let stranger = Identity::from_seed(&[9; 32]).peer_id();
    assert_eq!(Announced::verify(&key.announcement, &stranger), None);
    for i in [0, 35, 50, ANNOUNCEMENT_LEN - 1] {
        let mut tampered = key.announcement;
        tampered[i] ^= 1;
        assert_eq!(
            Announced::verify(&tampered, &identity.peer_id()),
            None,
            "byte {i}"
        );
    }
    assert_eq!(
        Announced::verify(&key.announcement[..100], &identity.peer_id()),
        None
    );
    // A key of small order, properly signed: a box to it would have a key
    // anyone can compute.
    let mut one = [0u8; 32];
    one[0] = 1;
    for low in [[0u8; 32], one] {
        let mut bytes = key.announcement;
        bytes[..32].copy_from_slice(&low);
        let signature = identity.sign(&announcement_message(&low, key.not_after));
        bytes[40..].copy_from_slice(&signature);
        assert_eq!(Announced::verify(&bytes, &identity.peer_id()), None);
    }
}

#[test]
fn keys_rotate_with_overlap_and_expired_ones_go() {
    let identity = acceptor_identity();
    let acceptance = Acceptance::new(DAY, KeySource::Random, EarlyBudget::default(), None, 64);
    let first = acceptance.current_key(&identity, NOW_S);
    assert!(Arc::ptr_eq(
        &first,
        &acceptance.current_key(&identity, NOW_S + DAY - 1)
    ));
    let second = acceptance.current_key(&identity, NOW_S + DAY);
    assert_ne!(second.public, first.public, "a new key after a day");
    // The first is still good for early data until its expiry.
    assert!(acceptance
        .find(&identity, &first.public[..8], NOW_S + 2 * DAY - 1)
        .is_some());
    assert!(acceptance
        .find(&identity, &first.public[..8], NOW_S + 2 * DAY)
        .is_none());
    let third = acceptance.current_key(&identity, NOW_S + 2 * DAY);
    assert_ne!(third.public, second.public, "another day, another key");
    assert!(acceptance
        .find(&identity, &second.public[..8], NOW_S + 2 * DAY)
        .is_some());
    let mut ring = BoxKeyring::new(DAY);
    ring.insert(BoxKey::generate(&identity, NOW_S, NOW_S + 2 * DAY), NOW_S);
    ring.insert(
        BoxKey::generate(&identity, NOW_S + DAY, NOW_S + 3 * DAY),
        NOW_S + DAY,
    );
    ring.insert(
        BoxKey::generate(&identity, NOW_S + 2 * DAY, NOW_S + 4 * DAY),
        NOW_S + 2 * DAY,
    );
    assert_eq!(ring.len(), 2, "the expired first key was dropped (and wiped)");
}

#[test]
fn a_rotation_of_centuries_never_wraps() {
    let identity = acceptor_identity();
    for every in [u64::MAX, u64::MAX / 2 + 1, 1 << 62] {
        let acceptance = Acceptance::new(every, KeySource::Random, EarlyBudget::default(), None, 64);
        let key = acceptance.current_key(&identity, NOW_S);
        assert_eq!(
            key.not_after,
            NOW_S.saturating_add(every.saturating_mul(2)),
            "{every}"
        );
        assert!(key.not_after > NOW_S, "{every}: it did not wrap");
        let millennium = NOW_S + 1000 * 365 * DAY;
        assert!(Arc::ptr_eq(&key, &acceptance.current_key(&identity, millennium)));
    }
}

#[test]
fn early_data_opens_with_the_box_key_and_the_same_setup() {
    let (key, announced) = box_key();
    let (d0, early, public) = sealed(&announced, b"", b"GET the thing");
    let opened = open_box(&key, &early, &d0, &public).unwrap();
    assert_eq!(&opened.payload[..], b"GET the thing");
    assert_eq!(opened.sent_at_ms, NOW_MS);
    assert_eq!(
        accept(&key, &early, &d0, &public, b""),
        Ok(Identity::from_seed(&[2; 32]).peer_id())
    );
    // A Setup changed anywhere before the early data: another nonce.
    let mut other = d0.clone();
    other[1] = 2;
    assert_eq!(
        open_box(&key, &early, &other, &public).unwrap_err(),
        "the box did not open"
    );
    // Another ephemeral key (a middle that swapped it): another box key.
    let swapped = Ephemeral::generate().public_key();
    assert!(open_box(&key, &early, &d0, &swapped).is_err());
    // Any bit of the box flipped.
    for i in [8, 20, early.len() - 1] {
        let mut tampered = early.clone();
        tampered[i] ^= 1;
        assert!(open_box(&key, &tampered, &d0, &public).is_err(), "byte {i}");
    }
    assert_eq!(
        open_box(&key, &early[..40], &d0, &public).unwrap_err(),
        "early data too short"
    );
    // A dialer key of small order opens nothing, whatever the box.
    assert!(open_box(&key, &early, &d0, &[0; 32]).is_err());
}

#[test]
fn early_data_meant_for_another_acceptor_announcement_or_protocol_does_not_verify() {
    let (key, announced) = box_key();
    let dialer = Identity::from_seed(&[2; 32]);
    // Sealed to our box key, but bound to M (identity 3), as a dialer does
    // that learned our key from M's announcement of it.
    let d0 = b"\x08\x01 d0".to_vec();
    let (ephemeral, seal) = PreparedBox::new(&announced, Ephemeral::generate()).unwrap().seal(
        Credential::Signed(&dialer),
        &Identity::from_seed(&[3; 32]).peer_id(),
        b"",
        NOW_MS,
        b"PUT /x",
    );
    let early = field(&append_early(d0.clone(), &seal.unwrap().seal(&d0)), &d0);
    let public = ephemeral.public_key();
    assert!(open_box(&key, &early, &d0, &public).is_ok(), "the box is ours");
    assert!(
        accept(&key, &early, &d0, &public, b"").is_err(),
        "but it was meant for M"
    );
    // Bound to "rpc": an acceptor that agreed "h2" does not take it.
    let (d0, early, public) = sealed(&announced, b"rpc", b"x");
    assert!(accept(&key, &early, &d0, &public, b"rpc").is_ok());
    assert!(accept(&key, &early, &d0, &public, b"h2").is_err());
    assert!(accept(&key, &early, &d0, &public, b"").is_err());
    // Bound to another announcement of the same box key (M's signature
    // over our key): our own announcement's hash does not match.
    let forged = Announced {
        hash: [7; 32],
        ..announced
    };
    let (d0, early, public) = sealed(&forged, b"", b"x");
    assert!(open_box(&key, &early, &d0, &public).is_ok());
    assert!(accept(&key, &early, &d0, &public, b"").is_err());
}

#[test]
fn a_signature_by_someone_else_is_refused() {
    // A box made by hand, claiming a dialer id that did not sign it.
    let (key, announced) = box_key();
    let ephemeral = Ephemeral::generate();
    let signer = Identity::from_seed(&[2; 32]);
    let claimed = Identity::from_seed(&[3; 32]).peer_id();
    let binding = Binding {
        acceptor: &acceptor_identity().peer_id(),
        announcement: &announced.hash,
        protocol: b"",
    };
    let message = early_message(binding, &ephemeral.public_key(), NOW_MS, b"x");
    let mut plaintext = NOW_MS.to_be_bytes().to_vec();
    plaintext.push(SIGNED);
    plaintext.extend_from_slice(claimed.as_bytes());
    plaintext.extend_from_slice(&signer.sign(&message));
    plaintext.extend_from_slice(&[0; 32]);
    plaintext.push(b'x');
    let sealed = ephemeral
        .box_to(&announced.public)
        .unwrap()
        .seal(&early_nonce(b"d0"), &plaintext);
    let early = [&key_id(&announced.public)[..], &sealed].concat();
    assert_eq!(
        accept(&key, &early, b"d0", &ephemeral.public_key(), b"").unwrap_err(),
        "the dialer's signature did not verify (or it was meant for another acceptor)"
    );
}

#[test]
fn a_payload_too_large_for_early_data_is_not_sealed() {
    let (_, announced) = box_key();
    let dialer = Identity::from_seed(&[2; 32]);
    let seals = |payload: &[u8]| {
        let ephemeral = Ephemeral::generate();
        let public = ephemeral.public_key();
        let (back, seal) = PreparedBox::new(&announced, ephemeral).unwrap().seal(
            Credential::Signed(&dialer),
            &acceptor_identity().peer_id(),
            b"",
            NOW_MS,
            payload,
        );
        assert_eq!(
            back.public_key(),
            public,
            "the ephemeral key comes back either way"
        );
        seal.is_some()
    };
    assert!(seals(&[0; MAX_EARLY_PAYLOAD]));
    assert!(!seals(&[0; MAX_EARLY_PAYLOAD + 1]));
    assert!(!seals(&[]));
    // The largest early data keeps a Setup of about 100 bytes under 4 KiB,
    // with a protocol name of 255 bytes bound too.
    let (d0, early, _) = sealed(&announced, &[b'p'; 255], &[0; MAX_EARLY_PAYLOAD]);
    assert!(d0.len() + early.len() + 100 < 4096, "{}", early.len());
}

#[test]
fn an_acceptors_proof_holds_only_for_its_key_and_transcript() {
    let (key, other) = (ProofKey::random(), ProofKey::random());
    let tag = key.prove(&[1; 32]);
    assert!(key.verify(&[1; 32], &tag));
    assert!(!key.verify(&[2; 32], &tag), "another session");
    assert!(!other.verify(&[1; 32], &tag), "another early data");
    let mut flipped = tag;
    flipped[63] ^= 1;
    assert!(!key.verify(&[1; 32], &flipped));
    assert!(!key.verify(&[1; 32], &tag[..32]), "a truncated tag");
}

#[test]
fn a_dialer_keeps_one_box_per_peer_made_ahead_for_the_key_it_holds() {
    let (key, announced) = box_key();
    let peer = acceptor_identity().peer_id();
    let mut cache = BoxKeyCache::default();
    assert_eq!(cache.wants_prepared(&peer, NOW_S), None, "no key, no box");
    cache.learn_verified(peer, announced, &key.announcement);
    assert!(cache.holds(&peer, &key.announcement));
    let (newer, _) = box_key();
    assert!(!cache.holds(&peer, &newer.announcement), "another announcement");
    assert!(
        !cache.holds(&acceptor_identity_other(), &key.announcement),
        "another acceptor"
    );
    assert_eq!(cache.wants_prepared(&peer, NOW_S), Some(announced));
    assert_eq!(cache.wants_prepared(&peer, NOW_S + 2 * DAY), None, "expired");
    cache.keep_prepared(
        &peer,
        PreparedBox::new(&announced, Ephemeral::generate()).unwrap(),
    );
    assert_eq!(cache.wants_prepared(&peer, NOW_S), None, "made already");
    let taken = cache.take_prepared(&peer, &announced).expect("made ahead");
    assert!(cache.take_prepared(&peer, &announced).is_none(), "used once");
    // A box to a key since replaced is not kept, nor handed out.
    cache.keep_prepared(&peer, taken);
    let (next_key, next) = box_key();
    cache.learn_verified(peer, next, &next_key.announcement);
    assert!(cache.take_prepared(&peer, &next).is_none());
    cache.keep_prepared(
        &peer,
        PreparedBox::new(&announced, Ephemeral::generate()).unwrap(),
    );
    assert_eq!(cache.wants_prepared(&peer, NOW_S), Some(next));
}

#[test]
fn a_ticket_stands_in_for_the_signature_and_only_its_maker_can_read_it() {
    let (key, announced) = box_key();
    let dialer = Identity::from_seed(&[2; 32]).peer_id();
    let ticket = key.tickets.issue(&dialer);
    let (d0, early, public) = sealed_with(
        &announced,
        Credential::Ticket(&ticket),
        NOW_MS,
        b"",
        b"GET /again",
    );
    assert_eq!(accept(&key, &early, &d0, &public, b""), Ok(dialer));
    // Another acceptor's ticket, under our box key: we did not make it.
    let (other_key, _) = box_key();
    let foreign = other_key.tickets.issue(&dialer);
    let (d0, early, public) = sealed_with(&announced, Credential::Ticket(&foreign), NOW_MS, b"", b"x");
    assert_eq!(
        accept(&key, &early, &d0, &public, b"").unwrap_err(),
        "a ticket we did not make"
    );
    // Our ticket with a MAC under any other key: someone who saw the
    // ticket go by (inside a box it could not open) but has no PSK.
    let forged = Ticket {
        ticket: ticket.ticket.clone(),
        psk: key.tickets.issue(&dialer).psk,
    };
    let (d0, early, public) = sealed_with(&announced, Credential::Ticket(&forged), NOW_MS, b"", b"x");
    assert_eq!(
        accept(&key, &early, &d0, &public, b"").unwrap_err(),
        "the MAC under the ticket's key did not verify (or it was meant for another acceptor)"
    );
    // Tickets have the lengths the wire allows, and a PSK that Debug hides.
    assert!(Ticket::from_auth(&[0; 32]).is_none());
    assert!(Ticket::from_auth(&[0; 32 + 256]).is_none());
    let shown = format!("{:?}", Ticket::from_auth(&[0x5a; 32 + 255]).unwrap());
    assert!(!shown.contains("5a") && !shown.contains("90"), "{shown}");
    // The shortest ticket (one byte) is read as far as the ticket.
    let short = Ticket::from_auth(&[[7; 32].as_slice(), &[9]].concat()).unwrap();
    let (d0, early, public) = sealed_with(&announced, Credential::Ticket(&short), NOW_MS, b"", b"x");
    assert_eq!(
        accept(&key, &early, &d0, &public, b"").unwrap_err(),
        "a ticket we did not make"
    );
    // It is the shortest early data there can be: the least the acceptor
    // looks at.
    assert_eq!(early.len(), MIN_EARLY_LEN);
    // The longest ticket with the least payload: sealed in the buffer made
    // for it (a debug assertion checks it never moved).
    let longest = Ticket::from_auth(&[[7; 32].as_slice(), &[9; 255]].concat()).unwrap();
    let (_, early, _) = sealed_with(&announced, Credential::Ticket(&longest), NOW_MS, b"", b"x");
    assert_eq!(early.len(), MIN_EARLY_LEN + 254);
}

/// An identity other than the acceptor's.
fn acceptor_identity_other() -> crate::terms::PeerId {
    Identity::from_seed(&[0xEE; 32]).peer_id()
}

#[test]
fn what_holds_a_secret_shows_none_of_it() {
    let (key, announced) = box_key();
    let cipher = key.open_box(&Ephemeral::generate().public_key()).unwrap();
    assert_eq!(format!("{cipher:?}"), "BoxCipher(..)");
    let acceptance = super::Acceptance::new(
        60,
        super::KeySource::Random,
        super::EarlyBudget { per_second: 1 },
        None,
        16,
    );
    let shown = format!("{acceptance:?}");
    assert!(
        shown.starts_with("Acceptance { keys: BoxKeyring { keys: 0, "),
        "{shown}"
    );
    assert!(shown.contains("stats: EarlyDataStats { offered: 0"), "{shown}");
    let shown = format!(
        "{:?}",
        PreparedBox::new(&announced, Ephemeral::generate()).unwrap()
    );
    assert!(shown.starts_with("PreparedBox { box_public: ["), "{shown}");
    let shown = format!("{key:?}");
    assert!(shown.starts_with("BoxKey { id: "), "{shown}");
    assert!(
        shown.contains(&format!("not_after: {}", key.not_after)),
        "{shown}"
    );
    let _ = announced;
}

#[test]
fn a_dialer_remembers_the_box_keys_of_1024_acceptors_and_forgets_the_oldest_for_the_next() {
    let (key, announced) = box_key();
    let acceptor = |i: u32| {
        let mut bytes = [0u8; 32];
        bytes[..4].copy_from_slice(&i.to_be_bytes());
        crate::terms::PeerId::from_bytes(bytes)
    };
    let mut cache = BoxKeyCache::default();
    for i in 0..1024 {
        cache.learn_verified(acceptor(i), announced, &key.announcement);
    }
    assert!((0..1024).all(|i| cache.holds(&acceptor(i), &key.announcement)));
    cache.learn_verified(acceptor(1024), announced, &key.announcement);
    assert!(!cache.holds(&acceptor(0), &key.announcement), "the oldest goes");
    assert!((1..=1024).all(|i| cache.holds(&acceptor(i), &key.announcement)));
}

#[test]
fn tickets_are_equal_in_bytes_and_psk_and_show_only_their_length() {
    let (key, announced) = box_key();
    let dialer = Identity::from_seed(&[2; 32]).peer_id();
    let ticket = key.tickets.issue(&dialer);
    assert_eq!(ticket, ticket.clone());
    let other_psk = Ticket {
        ticket: ticket.ticket.clone(),
        psk: key.tickets.issue(&dialer).psk,
    };
    assert_ne!(ticket, other_psk, "another PSK");
    let mut other_bytes = ticket.clone();
    other_bytes.ticket[0] ^= 1;
    assert_ne!(ticket, other_bytes, "other bytes");
    assert_eq!(
        format!("{ticket:?}"),
        format!("Ticket {{ len: {}, .. }}", ticket.ticket.len())
    );
    assert_eq!(format!("{:?}", ticket.psk), "Psk(..)");
    // A sealed early data shows its key's id and its length.
    let (_, seal) = PreparedBox::new(&announced, Ephemeral::generate()).unwrap().seal(
        Credential::Ticket(&ticket),
        &dialer,
        b"",
        NOW_MS,
        b"GET /",
    );
    let shown = format!("{:?}", seal.unwrap());
    assert!(shown.starts_with("EarlySeal { key_id: ["), "{shown}");
    assert!(shown.contains(", len: "), "{shown}");
}

#[test]
fn early_data_is_judged_by_the_system_clock_in_unix_milliseconds() {
    let system = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ours = unix_ms();
    assert!(ours.abs_diff(system) < 1_000, "{ours} against {system}");
}
