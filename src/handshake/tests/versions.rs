//! Every version pair, both roles: the agreed version, and behaviour keyed
//! on exactly it.

use super::*;

#[test]
fn every_pair_of_ranges_agrees_on_the_highest_common_version_in_both_roles() {
    let ranges = [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (3, 3)];
    for (dmin, dmax) in ranges {
        for (amin, amax) in ranges {
            let d = Side::dialer(1).versions(dmin, dmax);
            let a = Side::acceptor(2).versions(amin, amax);
            let outcome = run(&d, &a, no_edit);
            let common = (dmin.max(amin) <= dmax.min(amax)).then_some(dmax.min(amax));
            match common {
                Some(version) => {
                    let (mut d, mut a) = outcome.both();
                    assert_eq!((d.agreement.version(), a.agreement.version()), (version, version));
                    assert_eq!(d.agreement.role(), Role::Dialer);
                    assert_eq!(a.agreement.role(), Role::Acceptor);
                    // Key update with versions 2 and 3 only.
                    assert_eq!(
                        d.key_update.is_some(),
                        version >= 2,
                        "{dmin}..{dmax} / {amin}..{amax}"
                    );
                    assert_eq!(a.key_update.is_some(), version >= 2);
                    assert!(keys_match(&mut d, &mut a));
                }
                None => {
                    for rejected in [outcome.dialer.unwrap_err(), outcome.acceptor.unwrap_err()] {
                        assert!(matches!(repr(&rejected), Repr::VersionMismatch { .. }));
                        // Told in the clear: there are no keys yet.
                        let close = frame(rejected.close_record().unwrap());
                        assert_eq!(close.kind, FrameKind::Close);
                    }
                }
            }
        }
    }
}

#[test]
fn a_range_past_this_build_is_clamped_and_a_later_version_never_passes_for_3() {
    // We are asked for 1 to 9: we offer 1 to 3.
    let d = Side::dialer(1).versions(1, 9);
    let sent = d.start().unwrap();
    let ours: crate::proto::Setup = prost::Message::decode(&sent.frame()[4..]).unwrap();
    assert_eq!((ours.min_version, ours.max_version), (1, 3));
    // A peer that speaks only 4 to 9: no common version, though both
    // ranges reach 9; version 4's behaviour is not version 3's.
    let mut theirs = ours.clone();
    theirs.min_version = 4;
    theirs.max_version = 9;
    let payload = prost::Message::encode_to_vec(&theirs);
    let frame = frame(&[&FrameKind::Setup.header(payload.len())[..], &payload].concat());
    let refused = sent.receive(frame).unwrap_err();
    assert!(
        matches!(repr(&refused), Repr::VersionMismatch { .. }),
        "{:?}",
        refused.error()
    );
    // A range of nothing this build implements fails before anything is sent.
    let err = Side::dialer(1).versions(4, 9).start().unwrap_err();
    assert!(matches!(err.repr(), Repr::Stack(_)), "{err:?}");
}

#[test]
fn no_early_data_goes_below_version_3() {
    let (a, layer) = Side::early_acceptor(2);
    let announcement = layer.box_key_announcement().unwrap();
    let d_layer = EncryptLayer::new(ident(1))
        .with_box_key(peer(2), &announcement)
        .unwrap();
    for (dmax, amax) in [(2, 3), (3, 2), (1, 3)] {
        let d = Side::with(Role::Dialer, d_layer.clone())
            .pin(2)
            .early(b"GET /")
            .versions(1, dmax);
        let a = a.clone().versions(1, amax);
        let outcome = run(&d, &a, no_edit);
        assert_eq!(
            carries_early(&outcome.sent[0].1),
            dmax >= 3,
            "early data only in a Setup offering 3"
        );
        let (d, a) = outcome.both();
        assert_ne!(a.early, EarlyOutcome::Accepted(Bytes::from_static(b"GET /")));
        assert!(matches!(d.early, EarlyOutcome::None), "{:?}", d.early);
    }
    assert_eq!(
        layer.early_data_stats().unwrap().offered,
        0,
        "never counted below 3"
    );
}
