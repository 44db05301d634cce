use super::*;
use crate::{
    crypto::Ephemeral,
    setup::{append_early, setup_before_early},
};

const NOW_S: u64 = 1_800_000_000;
const NOW_MS: u64 = NOW_S * 1000;
const DAY: u64 = 86_400;

fn acceptor() -> (Identity, BoxKeyring, Announced) {
    let identity = Identity::from_seed(&[1; 32]);
    let mut keys = BoxKeyring::new(DAY);
    let bytes = keys.announcement(&identity, NOW_S);
    let announced = Announced::verify(&bytes, &identity.peer_id()).expect("our own announcement verifies");
    (identity, keys, announced)
}

/// A Setup's fields 1 to 9 (any bytes do) with `payload` sealed after
/// them; its ephemeral key, and the early data's proof key.
fn sealed_setup(
    announced: &Announced,
    sent_at_ms: u64,
    payload: &[u8],
) -> (Vec<u8>, Vec<u8>, [u8; 32], ProofKey) {
    let dialer = Identity::from_seed(&[2; 32]);
    let d0 = b"\x08\x01\x10\x03 the rest of a setup".to_vec();
    let (ephemeral, seal) = PreparedBox::new(announced, Ephemeral::generate()).seal(
        Credential::Signed(&dialer),
        sent_at_ms,
        payload,
    );
    let seal = seal.expect("small enough");
    let d = append_early(d0.clone(), &seal.seal(&d0));
    (d0, d, ephemeral.public_key(), seal.proof_key().clone())
}

/// Field 10 as a decoder sees it: the bytes after D0's key and length.
fn field(d: &[u8], d0: &[u8]) -> Vec<u8> {
    let mut rest = &d[d0.len() + 1..];
    let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
    assert_eq!(rest.len(), len);
    rest.to_vec()
}

#[test]
fn an_announcement_verifies_only_against_its_identity_and_until_it_expires() {
    let (identity, mut keys, announced) = acceptor();
    let bytes = keys.announcement(&identity, NOW_S);
    assert!(announced.valid_at(NOW_S + 2 * DAY - 1));
    assert!(!announced.valid_at(NOW_S + 2 * DAY));
    let stranger = Identity::from_seed(&[9; 32]).peer_id();
    assert_eq!(Announced::verify(&bytes, &stranger), None);
    for i in [0, 35, 50, ANNOUNCEMENT_LEN - 1] {
        let mut tampered = bytes;
        tampered[i] ^= 1;
        assert_eq!(
            Announced::verify(&tampered, &identity.peer_id()),
            None,
            "byte {i}"
        );
    }
    assert_eq!(Announced::verify(&bytes[..100], &identity.peer_id()), None);
}

#[test]
fn keys_rotate_with_overlap_and_expired_ones_go() {
    let (identity, mut keys, first) = acceptor();
    assert_eq!(keys.announcement(&identity, NOW_S + DAY - 1)[..32], first.public);
    let second = keys.announcement(&identity, NOW_S + DAY);
    assert_ne!(second[..32], first.public, "a new key after a day");
    assert_eq!(keys.len(), 2);
    // The first is still good for early data until its expiry.
    assert!(keys.find(&first.public[..8], NOW_S + 2 * DAY - 1).is_some());
    assert!(keys.find(&first.public[..8], NOW_S + 2 * DAY).is_none());
    let third = keys.announcement(&identity, NOW_S + 2 * DAY);
    assert_ne!(third[..32], second[..32], "another day, another key");
    assert_eq!(keys.len(), 2, "the expired first key was dropped (and wiped)");
    assert!(keys.find(&second[..8], NOW_S + 2 * DAY).is_some());
}

#[test]
fn early_data_opens_with_the_box_key_and_the_same_setup() {
    let (_, keys, announced) = acceptor();
    let (d0, d, public, proof_key) = sealed_setup(&announced, NOW_MS, b"GET the thing");
    let early = field(&d, &d0);
    assert_eq!(setup_before_early(&d, &early), Some(&d0[..]));
    let opened = open_early(&keys, &early, &d0, &public, NOW_MS + 300).unwrap();
    assert_eq!(&opened.payload[..], b"GET the thing");
    assert_eq!(opened.dialer, Identity::from_seed(&[2; 32]).peer_id());
    assert_eq!(opened.sent_at_ms, NOW_MS);
    // The acceptor proves with the key it found, the dialer checks with
    // the one it sealed.
    let transcript = [7; 32];
    assert!(proof_key.verify(&transcript, &opened.proof_key.prove(&transcript)));

    // A Setup changed anywhere before the early data: another nonce.
    let mut other = d0.clone();
    other[1] = 2;
    assert_eq!(
        open_early(&keys, &early, &other, &public, NOW_MS).unwrap_err(),
        "the box did not open"
    );
    // Another ephemeral key (a middle that swapped it): another box key.
    let swapped = Ephemeral::generate().public_key();
    assert!(open_early(&keys, &early, &d0, &swapped, NOW_MS).is_err());
    // Any bit of the box flipped.
    for i in [8, 20, early.len() - 1] {
        let mut tampered = early.clone();
        tampered[i] ^= 1;
        assert!(
            open_early(&keys, &tampered, &d0, &public, NOW_MS).is_err(),
            "byte {i}"
        );
    }
}

#[test]
fn early_data_is_refused_outside_its_window_or_to_an_unknown_key() {
    let (_, keys, announced) = acceptor();
    let (d0, d, key, _) = sealed_setup(&announced, NOW_MS, b"x");
    let early = field(&d, &d0);
    assert!(open_early(&keys, &early, &d0, &key, NOW_MS + EARLY_WINDOW_MS).is_ok());
    assert!(open_early(&keys, &early, &d0, &key, NOW_MS - EARLY_WINDOW_MS).is_ok());
    assert_eq!(
        open_early(&keys, &early, &d0, &key, NOW_MS + EARLY_WINDOW_MS + 1).unwrap_err(),
        "sent more than 10 s from our clock"
    );
    let (_, other_keys, _) = acceptor();
    assert_eq!(
        open_early(&other_keys, &early, &d0, &key, NOW_MS).unwrap_err(),
        "no such box key, or it expired"
    );
    assert_eq!(
        open_early(&keys, &early, &d0, &key, (NOW_S + 2 * DAY) * 1000).unwrap_err(),
        "no such box key, or it expired"
    );
    assert_eq!(
        open_early(&keys, &early[..40], &d0, &key, NOW_MS).unwrap_err(),
        "early data too short"
    );
}

#[test]
fn a_signature_by_someone_else_is_refused() {
    // A box made by hand with a dialer id that did not sign it.
    let (_, keys, announced) = acceptor();
    let ephemeral = Ephemeral::generate();
    let signer = Identity::from_seed(&[2; 32]);
    let claimed = Identity::from_seed(&[3; 32]).peer_id();
    let message = early_message(&ephemeral.public_key(), &announced.public, NOW_MS, b"x");
    let mut plaintext = Zeroizing::new(NOW_MS.to_be_bytes().to_vec());
    plaintext.push(SIGNED);
    plaintext.extend_from_slice(claimed.as_bytes());
    plaintext.extend_from_slice(&signer.sign(&message));
    plaintext.extend_from_slice(&[0; 32]);
    plaintext.push(b'x');
    let seal = EarlySeal {
        cipher: SalsaBox::new(
            &PublicKey::from(announced.public),
            &SecretKey::from(*ephemeral.secret_bytes()),
        ),
        key_id: key_id(&announced.public),
        plaintext,
        proof_key: ProofKey::random(),
    };
    let d = append_early(b"d0".to_vec(), &seal.seal(b"d0"));
    let early = field(&d, b"d0");
    assert_eq!(
        open_early(&keys, &early, b"d0", &ephemeral.public_key(), NOW_MS).unwrap_err(),
        "the dialer's signature did not verify"
    );
}

#[test]
fn a_payload_too_large_for_early_data_is_not_sealed() {
    let (_, _, announced) = acceptor();
    let dialer = Identity::from_seed(&[2; 32]);
    let seals = |payload: &[u8]| {
        let ephemeral = Ephemeral::generate();
        let public = ephemeral.public_key();
        let (back, seal) =
            PreparedBox::new(&announced, ephemeral).seal(Credential::Signed(&dialer), NOW_MS, payload);
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
    // The largest early data keeps a Setup of about 100 bytes under 4 KiB.
    let (d0, d, _, _) = sealed_setup(&announced, NOW_MS, &[0; MAX_EARLY_PAYLOAD]);
    assert!(d.len() - d0.len() + 100 < 4096, "{}", d.len());
}

#[test]
fn early_data_must_be_the_last_field() {
    let early = b"sealed bytes";
    let mut d = append_early(b"d0".to_vec(), early);
    assert_eq!(d[2], 0x52, "field 10, length-delimited");
    assert_eq!(setup_before_early(&d, early), Some(&b"d0"[..]));
    d.extend_from_slice(b"\x48\x01"); // field 9 after it
    assert_eq!(setup_before_early(&d, early), None);
}

#[test]
fn the_replay_record_takes_each_key_once_and_is_bounded() {
    let mut guard = ReplayGuard::new(2);
    guard.admit([1; 32], NOW_MS, NOW_MS).unwrap();
    assert!(guard
        .admit([1; 32], NOW_MS, NOW_MS + 5)
        .unwrap_err()
        .starts_with("replayed"));
    guard.admit([2; 32], NOW_MS + 1000, NOW_MS).unwrap();
    assert_eq!(
        guard.admit([3; 32], NOW_MS, NOW_MS).unwrap_err(),
        "the replay record is full"
    );
    // Once the first's window has passed, it makes room; the second's has not.
    guard
        .admit([3; 32], NOW_MS + 10_500, NOW_MS + EARLY_WINDOW_MS + 1)
        .unwrap();
    assert_eq!(
        guard
            .admit([4; 32], NOW_MS + 10_500, NOW_MS + EARLY_WINDOW_MS + 2)
            .unwrap_err(),
        "the replay record is full"
    );
    // The first key is forgotten: early data with it would be refused on
    // its clock by then anyway.
    assert_eq!(guard.seen.len(), 2);
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
    let (identity, mut keys, announced) = acceptor();
    let peer = identity.peer_id();
    let mut cache = BoxKeyCache::default();
    assert_eq!(cache.wants_prepared(&peer, NOW_S), None, "no key, no box");
    cache.learn(peer, &keys.announcement(&identity, NOW_S));
    assert_eq!(cache.wants_prepared(&peer, NOW_S), Some(announced));
    assert_eq!(cache.wants_prepared(&peer, NOW_S + 2 * DAY), None, "expired");
    let ephemeral = Ephemeral::generate();
    let public = ephemeral.public_key();
    cache.keep_prepared(&peer, PreparedBox::new(&announced, ephemeral));
    assert_eq!(cache.wants_prepared(&peer, NOW_S), None, "made already");
    let taken = cache.take_prepared(&peer, &announced).expect("made ahead");
    assert_eq!(taken.ephemeral.public_key(), public);
    assert!(cache.take_prepared(&peer, &announced).is_none(), "used once");

    // A box to a key since replaced is not kept, nor handed out.
    cache.keep_prepared(&peer, taken);
    let next = keys.announcement(&identity, NOW_S + DAY);
    cache.learn(peer, &next);
    let rotated = Announced::verify(&next, &peer).unwrap();
    assert!(cache.take_prepared(&peer, &rotated).is_none());
    let stale = PreparedBox::new(&announced, Ephemeral::generate());
    cache.keep_prepared(&peer, stale);
    assert_eq!(cache.wants_prepared(&peer, NOW_S + DAY), Some(rotated));
}

/// Early data of `payload` to `announced` with `ticket`: D0, field 10 and
/// the ephemeral key.
fn ticketed_setup(announced: &Announced, ticket: &Ticket, payload: &[u8]) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    ticketed_at(NOW_MS, announced, ticket, payload)
}

fn ticketed_at(
    at_ms: u64,
    announced: &Announced,
    ticket: &Ticket,
    payload: &[u8],
) -> (Vec<u8>, Vec<u8>, [u8; 32]) {
    let d0 = b"\x08\x01 a setup".to_vec();
    let (ephemeral, seal) =
        PreparedBox::new(announced, Ephemeral::generate()).seal(Credential::Ticket(ticket), at_ms, payload);
    let d = append_early(d0.clone(), &seal.expect("small enough").seal(&d0));
    let early = field(&d, &d0);
    (d0, early, ephemeral.public_key())
}

#[test]
fn a_ticket_stands_in_for_the_signature_and_only_its_maker_can_read_it() {
    let (_, keys, announced) = acceptor();
    let dialer = Identity::from_seed(&[2; 32]).peer_id();
    let ticket = Ticket::from_auth(&keys.issue_ticket(&dialer).unwrap()).expect("psk and ticket");
    let (d0, early, public) = ticketed_setup(&announced, &ticket, b"GET /again");
    let opened = open_early(&keys, &early, &d0, &public, NOW_MS).unwrap();
    assert_eq!((opened.dialer, &opened.payload[..]), (dialer, &b"GET /again"[..]));

    // Another acceptor's ticket, under our box key: we did not make it.
    let (_, other_keys, _) = acceptor();
    let foreign = Ticket::from_auth(&other_keys.issue_ticket(&dialer).unwrap()).unwrap();
    let (d0, early, public) = ticketed_setup(&announced, &foreign, b"x");
    assert_eq!(
        open_early(&keys, &early, &d0, &public, NOW_MS).unwrap_err(),
        "a ticket we did not make"
    );
    // Our ticket with a MAC under any other key: someone who saw the
    // ticket go by (inside a box it could not open) but has no PSK.
    let forged = Ticket {
        ticket: ticket.ticket.clone(),
        psk: Ticket::from_auth(&keys.issue_ticket(&dialer).unwrap())
            .unwrap()
            .psk,
    };
    let (d0, early, public) = ticketed_setup(&announced, &forged, b"x");
    assert_eq!(
        open_early(&keys, &early, &d0, &public, NOW_MS).unwrap_err(),
        "the MAC under the ticket's key did not verify"
    );
    // Tickets have the lengths the wire allows, and a PSK.
    assert!(Ticket::from_auth(&[0; 32]).is_none());
    assert!(Ticket::from_auth(&[0; 32 + 256]).is_none());
    assert!(Ticket::from_auth(&[0; 32 + 255]).is_some());
}

#[test]
fn tickets_are_made_under_the_announced_key_and_go_with_it() {
    let (identity, mut keys, first) = acceptor();
    const LATER: u64 = (NOW_S + DAY) * 1000;
    let dialer = Identity::from_seed(&[2; 32]).peer_id();
    let old = Ticket::from_auth(&keys.issue_ticket(&dialer).unwrap()).unwrap();
    // A day on, a new key is announced; the old one still opens its own
    // tickets until it expires, and new tickets are the new key's.
    let next = keys.announcement(&identity, NOW_S + DAY);
    let second = Announced::verify(&next, &identity.peer_id()).unwrap();
    let new = Ticket::from_auth(&keys.issue_ticket(&dialer).unwrap()).unwrap();
    let (d0, early, public) = ticketed_at(LATER, &first, &old, b"x");
    assert!(open_early(&keys, &early, &d0, &public, LATER).is_ok());
    let (d0, early, public) = ticketed_at(LATER, &second, &new, b"x");
    assert!(open_early(&keys, &early, &d0, &public, LATER).is_ok());
    let (d0, early, public) = ticketed_at(LATER, &second, &old, b"x");
    assert_eq!(
        open_early(&keys, &early, &d0, &public, LATER).unwrap_err(),
        "a ticket we did not make"
    );
    // And the largest early data with a ticket still fits a 4 KiB Setup.
    let (d0, early, _) = ticketed_setup(&second, &new, &[0; MAX_EARLY_PAYLOAD]);
    assert!(d0.len() + early.len() + 100 < 4096, "{}", early.len());
}

#[test]
fn the_shortest_ticketed_early_data_is_read_to_its_ticket() {
    // A one-byte ticket (the wire allows 1 to 255): read as far as the
    // ticket, which this acceptor did not make, not refused as short.
    let (_, keys, announced) = acceptor();
    let ticket = Ticket::from_auth(&[[7; 32].as_slice(), &[9]].concat()).unwrap();
    let (d0, early, public) = ticketed_setup(&announced, &ticket, b"x");
    assert_eq!(
        open_early(&keys, &early, &d0, &public, NOW_MS).unwrap_err(),
        "a ticket we did not make"
    );
}
