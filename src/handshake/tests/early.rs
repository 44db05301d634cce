//! Early data through the machine: accepted, refused, absent, relayed,
//! replayed, flooded, and past the acceptor's budget, each counted.

use super::*;
use crate::crypto::early::EarlyDataStats;

/// A dialer of identity 1 pinning acceptor 2, which knows `layer`'s box
/// key, with `data` to send early.
fn knowing(layer: &EncryptLayer, data: &'static [u8]) -> Side {
    let announcement = layer.box_key_announcement().unwrap();
    let d_layer = EncryptLayer::new(ident(1))
        .with_box_key(peer(2), &announcement)
        .unwrap();
    Side::with(Role::Dialer, d_layer).pin(2).early(data)
}

fn stats(layer: &EncryptLayer) -> EarlyDataStats {
    layer.early_data_stats().unwrap()
}

#[test]
fn accepted_early_data_is_delivered_and_the_dialer_sends_no_proof() {
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&layer, b"GET /thing");
    let outcome = run(&d, &a, no_edit);
    let steps: Vec<Step> = outcome.sent.iter().map(|(step, _)| *step).collect();
    assert_eq!(
        steps,
        [Step::DialerSetup, Step::AcceptorSetup, Step::AcceptorAuth],
        "no Auth from the dialer"
    );
    let (mut d, mut a) = outcome.both();
    assert_eq!(a.early, EarlyOutcome::Accepted(Bytes::from_static(b"GET /thing")));
    assert_eq!(
        a.peer,
        Some(peer(1)),
        "the early data's signature named the dialer"
    );
    assert_eq!(d.early, EarlyOutcome::Sent { accepted: true });
    assert_eq!(d.peer, Some(peer(2)));
    assert!(keys_match(&mut d, &mut a));
    // The acceptor gave a ticket and its box key.
    let learned = d.learned.expect("learned");
    assert_eq!(learned.peer, peer(2));
    assert!(learned.ticket.is_some());
    let counted = stats(&layer);
    assert_eq!(
        (
            counted.offered,
            counted.accepted,
            counted.refused,
            counted.boxes_opened
        ),
        (1, 1, 0, 1)
    );
}

#[test]
fn refused_early_data_is_never_delivered_and_the_dialer_proves_itself_after_the_acceptor() {
    // The dialer knows a box key of another acceptor with identity 2.
    let (_, stale) = Side::early_acceptor(2);
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&stale, b"GET /thing");
    let outcome = run(&d, &a, no_edit);
    let steps: Vec<Step> = outcome.sent.iter().map(|(step, _)| *step).collect();
    assert_eq!(
        steps,
        [
            Step::DialerSetup,
            Step::AcceptorSetup,
            Step::AcceptorAuth,
            Step::DialerAuth
        ],
        "the dialer's proof after the acceptor's"
    );
    let (mut d, mut a) = outcome.both();
    assert_eq!(a.early, EarlyOutcome::Refused, "the acceptor says it refused");
    assert_eq!(d.early, EarlyOutcome::Sent { accepted: false });
    assert!(keys_match(&mut d, &mut a));
    let learned = d.learned.expect("the new key comes with the refusal");
    assert!(learned.ticket.is_none(), "no ticket without acceptance");
    assert_eq!(
        learned.announcement.to_vec(),
        layer.box_key_announcement().unwrap()
    );
    let counted = stats(&layer);
    assert_eq!(
        (counted.offered, counted.refused, counted.boxes_opened),
        (1, 1, 0),
        "no such key: no curve operation"
    );
}

#[test]
fn with_no_early_data_the_acceptor_says_so_and_announces_its_key() {
    let (a, layer) = Side::early_acceptor(2);
    let d = Side::dialer(1).pin(2);
    let (d, a) = run(&d, &a, no_edit).both();
    assert_eq!(
        (d.early.clone(), a.early),
        (EarlyOutcome::None, EarlyOutcome::None)
    );
    let learned = d.learned.expect("an announcement");
    assert_eq!(
        learned.announcement.to_vec(),
        layer.box_key_announcement().unwrap()
    );
    assert_eq!(stats(&layer), EarlyDataStats::default(), "nothing offered");
}

/// M (identity 3) announces A's box key (A is identity 2) under its own
/// signature.
fn relayed_announcement(layer: &EncryptLayer) -> Vec<u8> {
    let announcement = layer.box_key_announcement().unwrap();
    let mut message = b"weft v3 box key".to_vec();
    message.extend_from_slice(&announcement[..40]);
    [&announcement[..40], &ident(3).sign(&message)[..]].concat()
}

#[test]
fn early_data_relayed_to_an_acceptor_it_was_not_meant_for_is_refused_there() {
    let (a, layer) = Side::early_acceptor(2);
    let forged = relayed_announcement(&layer);
    let d_layer = EncryptLayer::new(ident(1))
        .with_box_key(peer(3), &forged)
        .unwrap();
    let d = Side::with(Role::Dialer, d_layer).pin(3).early(b"PUT /account");
    // The dialer's Setup, meant for M, reaches A as it was sent.
    let outcome = run(&d, &a, no_edit);
    assert!(carries_early(&outcome.sent[0].1), "the dialer sent early data");
    // A refused it: it delivered nothing, said so (status 2, which it
    // proves with its signature), and waits for the dialer's proof.
    let counted = stats(&layer);
    assert_eq!(
        (
            counted.offered,
            counted.accepted,
            counted.refused,
            counted.boxes_opened
        ),
        (1, 0, 1, 1)
    );
    let refused = outcome.dialer.unwrap_err();
    assert!(
        matches!(repr(&refused), Repr::PeerKeyMismatch { .. }),
        "A is not M: {:?}",
        refused.error()
    );
    assert!(outcome.acceptor.is_err(), "no proof from the dialer ever comes");
}

#[test]
fn a_replayed_setup_is_refused_with_a_lookup() {
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&layer, b"GET /thing");
    let d_sent = d.start().unwrap();
    let replay = d_sent.frame().to_vec();
    let (_, a_done) = run_with(d_sent, a.start().unwrap(), no_edit, |_| {}).both();
    assert!(matches!(a_done.early, EarlyOutcome::Accepted(_)));
    // Whoever saw it sends the same Setup again, to the same acceptor.
    for _ in 0..3 {
        let agreed = a.start().unwrap().receive(frame(&replay)).unwrap();
        let Ok(Next::Prove(_)) = agreed.proceed(clock()) else {
            panic!("a replay must not be answered early");
        };
    }
    let counted = stats(&layer);
    assert_eq!(
        (counted.accepted, counted.refused_as_seen, counted.boxes_opened),
        (1, 3, 1)
    );
}

#[test]
fn a_canned_setup_sent_again_and_again_costs_one_x25519() {
    // A Setup whose box opens but whose credential does not verify (it was
    // bound to another acceptor): it costs an agreement the first time.
    let (a, layer) = Side::early_acceptor(2);
    let forged = relayed_announcement(&layer);
    let d_layer = EncryptLayer::new(ident(1))
        .with_box_key(peer(3), &forged)
        .unwrap();
    let canned = Side::with(Role::Dialer, d_layer)
        .pin(3)
        .early(b"x")
        .start()
        .unwrap();
    const N: u64 = 200;
    for _ in 0..N {
        let agreed = a.start().unwrap().receive(frame(canned.frame())).unwrap();
        assert!(matches!(agreed.proceed(clock()), Ok(Next::Prove(_))));
    }
    let counted = stats(&layer);
    assert_eq!(counted.boxes_opened, 1, "one X25519 for {N} copies");
    assert_eq!((counted.refused, counted.refused_as_seen), (N, N - 1));
}

#[test]
fn past_the_budget_early_data_is_refused_without_opening_its_box() {
    let layer = EncryptLayer::new(ident(2))
        .accept_early_data()
        .early_data_budget(2);
    let a = Side::with(Role::Acceptor, layer.clone());
    // Five dialers at once, each with its own early data.
    let announcement = layer.box_key_announcement().unwrap();
    let sents: Vec<SetupSent> = (0..5)
        .map(|_| {
            let d_layer = EncryptLayer::new(ident(1))
                .with_box_key(peer(2), &announcement)
                .unwrap();
            Side::with(Role::Dialer, d_layer)
                .pin(2)
                .early(b"GET /")
                .start()
                .unwrap()
        })
        .collect();
    let mut early = 0;
    for sent in sents {
        let (_, a_done) = run_with(sent, a.start().unwrap(), no_edit, |_| {}).both();
        early += usize::from(matches!(a_done.early, EarlyOutcome::Accepted(_)));
    }
    let counted = stats(&layer);
    assert_eq!(early, 2);
    assert_eq!(
        (counted.boxes_opened, counted.refused_under_load),
        (2, 3),
        "no curve operation past the budget"
    );
}

#[test]
fn under_load_early_data_is_refused_without_opening_its_box_and_the_call_still_goes() {
    let loaded = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let signal = loaded.clone();
    let layer = EncryptLayer::new(ident(2))
        .accept_early_data()
        .refuse_early_data_when(move || signal.load(std::sync::atomic::Ordering::Relaxed));
    let a = Side::with(Role::Acceptor, layer.clone());
    let d = knowing(&layer, b"GET /");
    let (d_done, _) = run(&d, &a, no_edit).both();
    assert_eq!(
        d_done.early,
        EarlyOutcome::Sent { accepted: false },
        "refused, and the handshake went on"
    );
    assert_eq!(
        (stats(&layer).boxes_opened, stats(&layer).refused_under_load),
        (0, 1)
    );
    loaded.store(false, std::sync::atomic::Ordering::Relaxed);
    let (d_done, _) = run(&knowing(&layer, b"GET /"), &a, no_edit).both();
    assert_eq!(d_done.early, EarlyOutcome::Sent { accepted: true });
}

#[test]
fn early_data_for_one_protocol_is_refused_where_another_is_agreed() {
    let (mut a, layer) = Side::early_acceptor(2);
    a.protocols = vec!["h2".into(), "rpc".into()];
    let mut d = knowing(&layer, b"\x00rpc call");
    d.protocols = vec!["rpc".into(), "h2".into()];
    // The acceptor's order decides: "h2"; the early data was for "rpc", its
    // first. The acceptor refuses it (it would read it as h2), and the
    // dialer, whose first stream is written in "rpc", fails before it sends
    // anything more (where it would have sent that stream again in h2).
    let outcome = run(&d, &a, no_edit);
    let refused = outcome.dialer.unwrap_err();
    assert!(
        matches!(repr(&refused), Repr::UnexpectedProtocol { agreed: Some(agreed), .. } if agreed == "h2"),
        "{:?}",
        refused.error()
    );
    assert_eq!(
        (stats(&layer).accepted, stats(&layer).refused),
        (0, 1),
        "not read as h2"
    );
    // Without early data to send, a dialer that requires nothing takes h2.
    let plain = Side::dialer(1).pin(2);
    let mut plain_h2 = plain.clone();
    plain_h2.protocols = d.protocols.clone();
    let (d_done, _) = run(&plain_h2, &a, no_edit).both();
    assert_eq!(d_done.agreement.protocol(), Some("h2"));
    // And a dialer that requires "rpc" fails the same way, early data or not.
    d.protocol = Some("rpc".into());
    let refused = run(&d, &a, no_edit).dialer.unwrap_err();
    assert!(
        matches!(repr(&refused), Repr::UnexpectedProtocol { .. }),
        "{:?}",
        refused.error()
    );
    // Where both put "rpc" first, it goes early.
    a.protocols = vec!["rpc".into()];
    let (_, a_done) = run(&d, &a, no_edit).both();
    assert!(matches!(a_done.early, EarlyOutcome::Accepted(_)));
}

#[test]
fn a_clock_set_back_does_not_reopen_the_window_of_early_data_the_record_forgot() {
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&layer, b"GET /");
    let t0 = std::time::Instant::now();
    let unix = crate::crypto::early::unix_ms();
    let sent = d.start().unwrap();
    let setup = sent.frame().to_vec();
    let at = |unix_ms: u64, after: u64| Clock {
        unix_ms,
        now: t0 + std::time::Duration::from_secs(after),
    };
    let judged = |clock: Clock| match a.start().unwrap().receive(frame(&setup)).unwrap().proceed(clock) {
        Ok(Next::AnswerEarly(..)) => true,
        Ok(_) => false,
        Err(rejected) => panic!("{:?}", rejected.error()),
    };
    assert!(judged(at(unix, 0)), "accepted once");
    // 25 seconds on (the record has forgotten it), the system clock was set
    // back 20 seconds: by it the early data is 5 seconds old.
    assert!(!judged(at(unix + 5_000, 25)), "not accepted again");
    assert_eq!(stats(&layer).accepted, 1);
}

#[test]
fn early_data_given_twice_in_one_setup_does_not_count() {
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&layer, b"GET /");
    let sent = d.start().unwrap();
    let mut payload = sent.frame()[4..].to_vec();
    // A second field 10 at the front: D0 would hold early data of its own.
    let mut twice = vec![0x52, 3, b'a', b'b', b'c'];
    twice.append(&mut payload);
    let bytes = [&FrameKind::Setup.header(twice.len())[..], &twice].concat();
    let Ok(Next::Prove(_)) = a
        .start()
        .unwrap()
        .receive(frame(&bytes))
        .unwrap()
        .proceed(clock())
    else {
        panic!("refused, the handshake goes on");
    };
    assert_eq!((stats(&layer).boxes_opened, stats(&layer).refused), (0, 1));
}

#[test]
fn an_accepting_proof_under_any_other_key_or_for_early_data_never_sent_is_refused() {
    let (a, layer) = Side::early_acceptor(2);
    for lie in [Some(ProofKey::random()), None] {
        let d = knowing(&layer, b"GET /");
        let outcome = run_with(d.start().unwrap(), a.start().unwrap(), no_edit, |proving| {
            proving.set_early_key(lie.clone());
        });
        let refused = outcome.dialer.unwrap_err();
        match lie {
            Some(_) => assert!(
                matches!(repr(&refused), Repr::BadIdentityProof { .. }),
                "{:?}",
                refused.error()
            ),
            None => assert!(
                matches!(repr(&refused), Repr::InvalidSetup(_)),
                "{:?}",
                refused.error()
            ),
        }
        // The close is sealed: there are keys (a tag of 16 bytes).
        let reason = refused.error().to_string();
        let close = frame(refused.close_record().unwrap());
        assert_eq!(close.payload.len(), 4 + reason.len().min(256) + 16);
    }
}

#[test]
fn a_ticket_from_an_accepted_early_data_stands_in_for_the_next_signature() {
    let (a, layer) = Side::early_acceptor(2);
    let d = knowing(&layer, b"GET /1");
    let signed = d.start().unwrap().frame().len();
    let (d_done, _) = run(&d, &a, no_edit).both();
    let config = d.encryption.as_ref().unwrap();
    config.learn(d_done.learned.unwrap());
    // The next early data goes with the ticket: an id and a signature (96
    // bytes) give way to the ticket's length, the ticket (104) and a MAC.
    let ticketed = d.start().unwrap().frame().len();
    assert_eq!(ticketed, signed + 1 + 104 + 32 - 96);
    let (_, a_done) = run(&d, &a, no_edit).both();
    assert!(matches!(a_done.early, EarlyOutcome::Accepted(_)));
    assert_eq!(stats(&layer).accepted, 2);
}

#[test]
fn a_dialer_keeps_a_box_key_it_learns_once_and_no_forged_or_expired_one() {
    use std::sync::Mutex;

    use super::super::proof::Learned;

    let (_, layer) = Side::early_acceptor(2);
    let fresh: [u8; 104] = layer.box_key_announcement().unwrap().try_into().unwrap();
    // Signed by identity 2 but expired: made on a clock 20 years back.
    let (_, old_layer) = Side::early_acceptor(2);
    let acceptance = old_layer.config().early.clone().unwrap();
    let expired = acceptance.current_key(&ident(2), 1_200_000_000).announcement;
    // A's key under M's signature.
    let forged: [u8; 104] = relayed_announcement(&layer).try_into().unwrap();

    let told = Arc::new(Mutex::new(Vec::new()));
    let d_layer = EncryptLayer::new(ident(1)).on_box_key_learned({
        let told = told.clone();
        move |peer, announcement| told.lock().unwrap().push((*peer, announcement.to_vec()))
    });
    let config = d_layer.config();
    let learn = |announcement: [u8; 104]| {
        config.learn(Learned {
            peer: peer(2),
            announcement,
            ticket: None,
        })
    };
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let held = || config.box_keys.lock().unwrap().get(&peer(2), now_s).is_some();

    learn(forged);
    learn(expired);
    assert!(!held(), "neither a forged nor an expired key is kept");
    assert!(told.lock().unwrap().is_empty());
    learn(fresh);
    learn(fresh);
    assert!(held());
    assert_eq!(
        *told.lock().unwrap(),
        [(peer(2), fresh.to_vec())],
        "told once, of the key as announced"
    );
    assert!(format!("{:?}", **config).starts_with("EncryptConfig { identity: "));
}

#[test]
fn a_started_dialer_knows_whether_its_early_data_went_and_shows_only_its_public_key() {
    let (_, layer) = Side::early_acceptor(2);
    let early = knowing(&layer, b"GET /").start().unwrap();
    assert!(early.early_sent());
    // Early data to an acceptor whose box key is unknown does not go.
    let unknown = Side::dialer(1).pin(2).early(b"GET /").start().unwrap();
    assert!(!unknown.early_sent());
    let shown = format!("{early:?}");
    assert!(
        shown.contains("crypto: Some(Crypto { ephemeral: Ephemeral { public: "),
        "{shown}"
    );
}
