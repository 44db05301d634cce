//! Each check the acceptor makes of early data before accepting it, at
//! its edge: the pinned dialer, the authorizer, the 10-second window, the
//! windows its Setup declared, and a field too short to hold a box.

use super::*;
use crate::{
    crypto::early::{EarlyDataStats, EARLY_WINDOW_MS},
    handshake::{offer::StreamOffer, setup::append_early},
};

/// A dialer of identity `seed` pinning acceptor 2, which knows `layer`'s
/// box key, with `data` to send early.
fn dialer_knowing(seed: u8, layer: &EncryptLayer, data: &'static [u8]) -> Side {
    let announcement = layer.box_key_announcement().unwrap();
    let d_layer = EncryptLayer::new(ident(seed))
        .with_box_key(peer(2), &announcement)
        .unwrap();
    Side::with(Role::Dialer, d_layer).pin(2).early(data)
}

fn stats(layer: &EncryptLayer) -> EarlyDataStats {
    layer.early_data_stats().unwrap()
}

/// Whether acceptor `a` accepts the early data of `d`'s Setup, judged at
/// `at` (and the handshake goes on either way).
fn accepts(d: &Side, a: &Side, sent_at: Clock, at: Clock) -> bool {
    let setup = d.start_at(sent_at).unwrap().frame().to_vec();
    match a.start().unwrap().receive(frame(&setup)).unwrap().proceed(at) {
        Ok(Next::AnswerEarly(..)) => true,
        Ok(_) => false,
        Err(rejected) => panic!("{:?}", rejected.error()),
    }
}

#[test]
fn early_data_is_accepted_from_the_dialer_the_acceptor_pinned_and_no_other() {
    let layer = EncryptLayer::new(ident(2)).accept_early_data();
    let a = Side::with(Role::Acceptor, layer.clone()).pin(1);
    let now = clock();
    assert!(accepts(&dialer_knowing(1, &layer, b"GET /"), &a, now, now));
    assert!(!accepts(&dialer_knowing(3, &layer, b"GET /"), &a, now, now));
    assert_eq!((stats(&layer).accepted, stats(&layer).refused), (1, 1));
}

#[test]
fn early_data_is_accepted_from_a_dialer_the_authorizer_admits_and_no_other() {
    let layer = EncryptLayer::new(ident(2))
        .accept_early_data()
        .authorize(|dialer| *dialer == peer(1));
    let a = Side::with(Role::Acceptor, layer.clone());
    let now = clock();
    assert!(accepts(&dialer_knowing(1, &layer, b"GET /"), &a, now, now));
    assert!(!accepts(&dialer_knowing(3, &layer, b"GET /"), &a, now, now));
    assert_eq!((stats(&layer).accepted, stats(&layer).refused), (1, 1));
}

#[test]
fn early_data_sent_10_seconds_from_the_acceptors_clock_is_accepted_and_a_millisecond_more_is_not() {
    let layer = EncryptLayer::new(ident(2)).accept_early_data();
    let a = Side::with(Role::Acceptor, layer.clone());
    let sent = clock();
    let later = |ms: u64| Clock {
        unix_ms: sent.unix_ms + ms,
        now: sent.now,
    };
    assert!(accepts(
        &dialer_knowing(1, &layer, b"GET /"),
        &a,
        sent,
        later(EARLY_WINDOW_MS)
    ));
    assert!(!accepts(
        &dialer_knowing(1, &layer, b"GET /"),
        &a,
        sent,
        later(EARLY_WINDOW_MS + 1)
    ));
    // Sent ahead of the acceptor's clock, the same.
    let a2_layer = EncryptLayer::new(ident(2)).accept_early_data();
    let a2 = Side::with(Role::Acceptor, a2_layer.clone());
    let ahead = |ms: u64| Clock {
        unix_ms: sent.unix_ms + ms,
        now: sent.now,
    };
    assert!(accepts(
        &dialer_knowing(1, &a2_layer, b"GET /"),
        &a2,
        ahead(EARLY_WINDOW_MS),
        sent
    ));
}

#[test]
fn early_data_as_large_as_the_acceptors_stream_window_is_accepted_and_a_byte_more_is_not() {
    let layer = EncryptLayer::new(ident(2)).accept_early_data();
    let mut a = Side::with(Role::Acceptor, layer.clone());
    a.streams = Some(StreamOffer::new(8).with_windows(100, 1000));
    let now = clock();
    let fits: &'static [u8] = &[7; 100];
    let over: &'static [u8] = &[7; 101];
    assert!(accepts(&dialer_knowing(1, &layer, fits), &a, now, now));
    assert!(!accepts(&dialer_knowing(1, &layer, over), &a, now, now));
}

/// Acceptor `a` given `setup` (a Setup payload without early data) with
/// `early` as its early data field refuses it, and the handshake goes on.
fn refused_and_goes_on(a: &Side, setup: &[u8], early: &[u8]) {
    let payload = append_early(setup.to_vec(), early);
    let bytes = [&FrameKind::Setup.header(payload.len())[..], &payload].concat();
    let Ok(Next::Prove(_)) = a
        .start()
        .unwrap()
        .receive(frame(&bytes))
        .unwrap()
        .proceed(clock())
    else {
        panic!(
            "{} bytes of early data: refused, the handshake goes on",
            early.len()
        );
    };
}

#[test]
fn an_early_data_field_too_short_to_hold_a_box_is_refused_without_a_lookup() {
    let (a, layer) = Side::early_acceptor(2);
    let plain = Side::dialer(1).pin(2).start().unwrap().frame()[4..].to_vec();
    for len in [0, 1, 7, 8, crate::crypto::early::MIN_EARLY_LEN - 1] {
        refused_and_goes_on(&a, &plain, &vec![0xAB; len]);
    }
    assert_eq!(stats(&layer).boxes_opened, 0);
    // Exactly the least a box can be, naming the acceptor's key: looked up
    // and opened (and refused, as garbage).
    let announcement = layer.box_key_announcement().unwrap();
    let public: [u8; 32] = announcement[..32].try_into().unwrap();
    let mut least = crate::crypto::early::key_id(&public).to_vec();
    least.resize(crate::crypto::early::MIN_EARLY_LEN, 0xAB);
    refused_and_goes_on(&a, &plain, &least);
    assert_eq!(stats(&layer).boxes_opened, 1);
}

#[test]
fn a_dialer_waiting_for_its_transport_prepares_one_box_for_its_next_early_data() {
    use crate::handshake::early::prepare;

    let layer = EncryptLayer::new(ident(2)).accept_early_data();
    let d = dialer_knowing(1, &layer, b"GET /");
    let config = d.encryption.as_ref().unwrap();
    assert!(!prepare(config, None), "nothing pinned: nothing to prepare");
    assert!(
        !prepare(config, Some(peer(3))),
        "no box key known for that acceptor"
    );
    assert!(prepare(config, Some(peer(2))), "a box for acceptor 2");
    assert!(!prepare(config, Some(peer(2))), "made already");
}

#[test]
fn early_data_that_would_take_a_setup_past_its_limit_waits_for_the_handshake() {
    static REQUEST: [u8; 2500] = [7; 2500];
    let (_, layer) = Side::early_acceptor(2);
    let fits = dialer_knowing(1, &layer, &REQUEST);
    let sent = fits.start().unwrap();
    assert!(sent.early_sent());
    // With 1.5 KiB of protocol names the whole would be over 4 KiB: the
    // Setup goes without it.
    let mut too_big = fits.clone();
    too_big.protocols = vec!["p".repeat(255); 6];
    let sent = too_big.start().unwrap();
    assert!(!sent.early_sent());
    assert!(!carries_early(sent.frame()));
    assert!(sent.frame().len() <= crate::frame::HEADER_LEN + MAX_SETUP);
}

#[test]
fn replicas_deriving_box_keys_from_their_identity_announce_the_same_one() {
    let replica = || {
        EncryptLayer::new(ident(2))
            .accept_early_data()
            .box_keys_from_identity()
            .box_key_announcement()
            .unwrap()
    };
    assert_eq!(replica()[..32], replica()[..32]);
    let random = || {
        EncryptLayer::new(ident(2))
            .accept_early_data()
            .box_key_announcement()
            .unwrap()
    };
    assert_ne!(random()[..32], random()[..32]);
}

#[test]
fn past_the_replay_records_capacity_early_data_is_refused() {
    let layer = EncryptLayer::new(ident(2))
        .accept_early_data()
        .early_data_replay_capacity(1);
    let a = Side::with(Role::Acceptor, layer.clone());
    assert!(accepts(
        &dialer_knowing(1, &layer, b"GET /1"),
        &a,
        clock(),
        clock()
    ));
    assert!(!accepts(
        &dialer_knowing(3, &layer, b"GET /2"),
        &a,
        clock(),
        clock()
    ));
    assert_eq!((stats(&layer).accepted, stats(&layer).refused), (1, 1));
}
