//! The encryption layer's builder as a user sees it: the suites it keeps
//! and what its `Debug` shows (never a secret).

use super::*;

#[test]
fn suites_keep_their_order_once_each_and_debug_shows_what_the_layer_does() {
    use CipherSuite::*;

    let layer =
        EncryptLayer::new(ident(1)).suites([Aes256Gcm, XSalsa20Poly1305, Aes256Gcm, ChaCha20Poly1305]);
    assert_eq!(
        layer.config().suites,
        [Aes256Gcm, XSalsa20Poly1305, ChaCha20Poly1305]
    );
    let layer = layer.allow_plaintext().allow_plaintext();
    assert_eq!(
        layer.config().suites,
        [Aes256Gcm, XSalsa20Poly1305, ChaCha20Poly1305, Plaintext]
    );

    let shown = format!("{layer:?}");
    assert!(
        shown.starts_with("EncryptLayer { identity: Identity { peer_id: "),
        "{shown}"
    );
    assert!(shown.contains("authorizer: false, early_data: false"), "{shown}");
    let shown = format!("{:?}", layer.authorize(|_| true).accept_early_data());
    assert!(shown.contains("authorizer: true, early_data: true"), "{shown}");
}

/// A connector that is not ready until told, then fails.
#[derive(Debug, Clone, Default)]
struct Unready {
    fail: bool,
}

impl tower::Service<()> for Unready {
    type Response = tokio::io::DuplexStream;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        if self.fail {
            std::task::Poll::Ready(Err(std::io::Error::other("the connector is down")))
        } else {
            std::task::Poll::Pending
        }
    }

    fn call(&mut self, (): ()) -> Self::Future {
        unreachable!("never ready")
    }
}

#[test]
fn every_layer_is_ready_only_when_the_connector_is_and_says_why_not() {
    use tower::{Service, ServiceBuilder};

    use crate::{NegotiateLayer, RecordSizeLayer};

    let mut stack = ServiceBuilder::new()
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(Unready::default());
    let encrypt = format!("{:?}", stack.get_ref());
    assert!(
        encrypt.starts_with("Encrypt { inner: Negotiate { inner: Unready"),
        "{encrypt}"
    );
    assert!(encrypt.contains("identity: Identity { peer_id: "), "{encrypt}");
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(stack.poll_ready(&mut cx).is_pending());
    stack.get_mut().get_mut().get_mut().fail = true;
    match stack.poll_ready(&mut cx) {
        std::task::Poll::Ready(Err(err)) => {
            assert!(err.to_string().contains("the connector is down"), "{err}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_setup_no_peer_would_accept_fails_before_it_is_sent() {
    // Ok, or whether the refusal is the one of too many or too long names.
    let with = |protocols: Vec<String>| {
        let mut side = Side::dialer(1);
        side.protocols = protocols;
        side.start().map(|_| ()).map_err(|err| {
            matches!(err.repr(), Repr::Stack(why) if why.starts_with("more than 32 application protocols"))
        })
    };
    // 32 names, and a name of 255 bytes: the most a peer accepts.
    let names = |n: usize| (0..n).map(|i| format!("p{i}")).collect::<Vec<_>>();
    assert_eq!(with(names(32)), Ok(()));
    assert_eq!(with(names(33)), Err(true));
    assert_eq!(with(vec!["p".repeat(255)]), Ok(()));
    assert_eq!(with(vec!["p".repeat(256)]), Err(true));
    assert_eq!(with(vec!["rpc".into(), "p".repeat(256)]), Err(true));
}

#[test]
fn our_setup_may_be_as_large_as_the_most_we_accept_and_no_larger() {
    // Names of 255 bytes, then one whose length brings the Setup to the
    // size asked for.
    let sized = |size: usize| {
        let mut side = Side::dialer(1);
        side.protocols = vec!["p".repeat(255); 15];
        side.protocols.push(String::new());
        let setup_len = |side: &Side| {
            side.start()
                .map(|sent| sent.frame().len() - crate::frame::HEADER_LEN)
        };
        while setup_len(&side).is_ok_and(|len| len < size) {
            side.protocols.last_mut().unwrap().push('q');
        }
        side.start()
    };
    let made = sized(MAX_SETUP).unwrap();
    assert_eq!(made.frame().len(), crate::frame::HEADER_LEN + MAX_SETUP);
    let refused = sized(MAX_SETUP + 1).unwrap_err();
    assert!(matches!(refused.repr(), Repr::Stack(why) if why.starts_with("our Setup is larger")));
}

#[test]
fn the_stream_limit_and_windows_declared_reach_the_peer() {
    use crate::handshake::offer::StreamOffer;

    let mut d = Side::dialer(1);
    d.streams = Some(StreamOffer::new(7).with_windows(1000, 5000));
    let mut a = Side::acceptor(2);
    a.streams = Some(StreamOffer::new(0));
    let (d, a) = run(&d, &a, no_edit).both();
    let (d, a) = (&d.agreement, &a.agreement);
    assert_eq!(
        (
            d.local_max_streams(),
            d.local_stream_window,
            d.local_connection_window
        ),
        (Some(7), Some(1000), Some(5000))
    );
    assert_eq!(
        (
            a.peer_max_streams(),
            a.peer_stream_window(),
            a.peer_connection_window()
        ),
        (Some(7), Some(1000), Some(5000))
    );
    // A limit of 0 is declared as 1, without windows.
    assert_eq!(
        (
            d.peer_max_streams(),
            d.peer_stream_window(),
            d.peer_connection_window()
        ),
        (Some(1), None, None)
    );
}

#[test]
fn box_keys_rotate_daily_by_default_and_each_lasts_two_rotations() {
    use crate::crypto::early::Announced;

    let lasts = |layer: EncryptLayer| {
        let announcement = layer.box_key_announcement().unwrap();
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        Announced::verify(&announcement, &peer(1)).unwrap().not_after - now_s
    };
    let day = 24 * 60 * 60;
    let default = lasts(EncryptLayer::new(ident(1)).accept_early_data());
    assert!((2 * day - 2..=2 * day).contains(&default), "{default} s");
    let hourly = EncryptLayer::new(ident(1))
        .box_key_rotation(std::time::Duration::from_secs(3600))
        .accept_early_data();
    assert!((7198..=7200).contains(&lasts(hourly)));
}
