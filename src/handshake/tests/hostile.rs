//! What an attacker on the path, or a peer that lies, does to the machine:
//! every edit fails the handshake before anything is delivered, with the
//! peer told (in the clear before keys, sealed after), and no input
//! panics.

use super::*;

#[test]
fn editing_any_byte_of_a_setup_fails_the_handshake() {
    let d = Side::dialer(1).suites(&[CipherSuite::Aes256Gcm, CipherSuite::ChaCha20Poly1305]);
    let a = Side::acceptor(2).suites(&[CipherSuite::Aes256Gcm, CipherSuite::ChaCha20Poly1305]);
    let len = d.start().unwrap().frame().len();
    for target in [Step::DialerSetup, Step::AcceptorSetup] {
        // Every byte of the payload (the header's length is checked on its own).
        for offset in 4..len {
            let outcome = run(&d, &a, |step, bytes| {
                if step == target && offset < bytes.len() {
                    bytes[offset] ^= 0x01;
                }
            });
            for side in [&outcome.dialer, &outcome.acceptor] {
                let Err(rejected) = side else {
                    panic!("{target:?} byte {offset}: a tampered Setup authenticated")
                };
                assert!(
                    !matches!(repr(rejected), Repr::Io(_)),
                    "{target:?} byte {offset}: {:?}",
                    rejected.error()
                );
            }
        }
    }
}

#[test]
fn editing_a_proof_fails_authentication_and_the_close_is_sealed() {
    let d = Side::dialer(1).suites(&[CipherSuite::XChaCha20Poly1305]);
    let a = Side::acceptor(2).suites(&[CipherSuite::XChaCha20Poly1305]);
    let outcome = run(&d, &a, |step, bytes| {
        if step == Step::DialerAuth {
            let last = bytes.len() - 1;
            bytes[last] ^= 0x80;
        }
    });
    assert!(outcome.dialer.is_ok(), "the dialer got a genuine proof");
    let rejected = outcome.acceptor.unwrap_err();
    assert!(
        matches!(repr(&rejected), Repr::BadRecord { sequence: 0 }),
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
fn a_proof_reflected_to_its_sender_fails() {
    // An attacker sends the dialer its own proof back as the acceptor's, in
    // the same session: the transcript is the same, and only the role byte
    // tells them apart (with the plaintext suite, so that no key does;
    // version 2, whose acceptor proof is the bare 96 bytes).
    for suites in [[CipherSuite::Plaintext], [CipherSuite::Aes256Gcm]] {
        let d = Side::dialer(1).suites(&suites).versions(1, 2);
        let a = Side::acceptor(2).suites(&suites).versions(1, 2);
        let (d_sent, a_sent) = (d.start().unwrap(), a.start().unwrap());
        let to_dialer = frame(a_sent.frame());
        let Ok(Next::Prove(proving)) = d_sent.receive(to_dialer).unwrap().proceed(clock()) else {
            panic!("the dialer proves");
        };
        let reflected = frame(proving.record());
        let refused = proving.receive(reflected).unwrap_err();
        assert!(
            matches!(
                repr(&refused),
                Repr::BadIdentityProof { .. } | Repr::BadRecord { .. }
            ),
            "{suites:?}: {:?}",
            refused.error()
        );
    }
}

#[test]
fn a_close_in_the_clear_in_place_of_the_proof_is_unauthenticated() {
    let mut clear = FrameKind::Close.header(4 + 3).to_vec();
    clear.extend_from_slice(&crate::CloseCode::UNAUTHORIZED.0.to_be_bytes());
    clear.extend_from_slice(b"go!");
    let outcome = run(&Side::dialer(1), &Side::acceptor(2), |step, bytes| {
        if step == Step::AcceptorAuth {
            *bytes = clear.clone();
        }
    });
    let rejected = outcome.dialer.unwrap_err();
    assert!(
        matches!(repr(&rejected), Repr::UnauthenticatedClose { code: crate::CloseCode::UNAUTHORIZED, reason } if reason == "go!"),
        "{:?}",
        rejected.error()
    );
    assert!(rejected.close_record().is_none(), "no answer to a close");
}

#[test]
fn a_refusal_in_place_of_the_setup_is_unauthenticated() {
    let mut clear = FrameKind::Close.header(4).to_vec();
    clear.extend_from_slice(&crate::CloseCode::VERSION_MISMATCH.0.to_be_bytes());
    let rejected = Side::dialer(1)
        .start()
        .unwrap()
        .receive(frame(&clear))
        .unwrap_err();
    assert!(
        matches!(
            repr(&rejected),
            Repr::UnauthenticatedClose {
                code: crate::CloseCode::VERSION_MISMATCH,
                ..
            }
        ),
        "{:?}",
        rejected.error()
    );
}

#[test]
fn a_low_order_ephemeral_key_is_refused_before_any_key_is_derived() {
    let outcome = run(&Side::dialer(1), &Side::acceptor(2), |step, bytes| {
        if step == Step::AcceptorSetup {
            // Field 3's 32 bytes follow its key and length (bytes 8 and 9
            // after the frame header and the two versions).
            let at = bytes.windows(2).position(|w| w == [0x1a, 0x20]).unwrap() + 2;
            bytes[at..at + 32].fill(0);
        }
    });
    let rejected = outcome.dialer.unwrap_err();
    assert!(matches!(repr(&rejected), Repr::WeakKey), "{:?}", rejected.error());
}

#[test]
fn a_frame_of_any_other_kind_in_place_of_a_setup_or_a_proof_is_refused() {
    for kind in [FrameKind::Data, FrameKind::Auth, FrameKind::KeyUpdate] {
        let mut bytes = kind.header(3).to_vec();
        bytes.extend_from_slice(b"abc");
        let rejected = Side::acceptor(2)
            .start()
            .unwrap()
            .receive(frame(&bytes))
            .unwrap_err();
        assert!(
            matches!(repr(&rejected), Repr::UnexpectedFrame { .. }),
            "{kind:?}"
        );
    }
    let outcome = run(&Side::dialer(1), &Side::acceptor(2), |step, bytes| {
        if step == Step::AcceptorAuth {
            *bytes = FrameKind::Setup.header(0).to_vec();
        }
    });
    assert!(matches!(
        repr(&outcome.dialer.unwrap_err()),
        Repr::UnexpectedFrame { .. }
    ));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any bytes as the peer's Setup, and any bytes as its Auth record (in
    /// the clear, with the plaintext suite, so that they are read): an
    /// error or an agreement, never a panic.
    #[test]
    fn no_setup_and_no_proof_panics(
        setup in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
        auth in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
    ) {
        for side in [Side::dialer(1), Side::acceptor(2)] {
            let bytes = [&FrameKind::Setup.header(setup.len())[..], &setup].concat();
            let _ = side.start().unwrap().receive(frame(&bytes)).map(|agreed| agreed.proceed(clock()));
        }
        let d = Side::dialer(1).suites(&[CipherSuite::Plaintext]);
        let a = Side::acceptor(2).suites(&[CipherSuite::Plaintext]);
        let outcome = run(&d, &a, |step, bytes| {
            if step == Step::AcceptorAuth {
                *bytes = [&FrameKind::Auth.header(auth.len())[..], &auth].concat();
            }
        });
        proptest::prop_assert!(outcome.dialer.is_err());
    }
}
