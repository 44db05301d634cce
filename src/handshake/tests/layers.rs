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
#[derive(Clone, Default)]
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

    use crate::{MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer};

    let mut stack = ServiceBuilder::new()
        .layer(MultiplexLayer::new(crate::mux::Builder::new()))
        .layer(StreamLimitLayer::new(8))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(Unready::default());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(stack.poll_ready(&mut cx).is_pending());
    stack.get_mut().get_mut().get_mut().get_mut().get_mut().fail = true;
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

/// Stacks of encryption over negotiation, over one end of an in-memory
/// pipe: a dialer's connector hands it out once, an acceptor's takes it.
mod over_a_pipe {
    use std::time::Duration;

    use tokio::io::DuplexStream;
    use tower::ServiceBuilder;

    use super::*;
    use crate::{
        handshake::{Handshake, HandshakeExt},
        NegotiateLayer,
    };

    async fn dial(layer: &EncryptLayer, io: DuplexStream) -> Result<(), Error> {
        let mut io = Some(io);
        let connect = tower::service_fn(move |()| {
            std::future::ready(
                io.take()
                    .ok_or(std::io::Error::from(std::io::ErrorKind::NotFound)),
            )
        });
        let mut stack = ServiceBuilder::new()
            .layer(layer.clone())
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(connect);
        stack.dial(()).await.map(drop)
    }

    async fn accept(layer: &EncryptLayer, io: DuplexStream) -> Result<(), Error> {
        let transport = tower::service_fn(|io: DuplexStream| std::future::ready(Ok::<_, std::io::Error>(io)));
        let mut stack = ServiceBuilder::new()
            .layer(layer.clone())
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(transport);
        stack.accept_transport(io).await.map(drop)
    }

    fn stocked(layer: &EncryptLayer) -> String {
        format!("{:?}", layer.config().ephemerals)
    }

    const FULL: &str = "EphemeralPool { ready: 8 }";
    const EMPTY: &str = "EphemeralPool { ready: 0 }";

    #[tokio::test(start_paused = true)]
    async fn a_dialer_makes_keys_while_it_waits_and_an_acceptor_after_its_handshake() {
        // The acceptor comes late: the dialer stocks its pool meanwhile.
        let (d_layer, a_layer) = (EncryptLayer::new(ident(1)), EncryptLayer::new(ident(2)));
        let (d_io, a_io) = tokio::io::duplex(1 << 16);
        let accepting = tokio::spawn({
            let a_layer = a_layer.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                accept(&a_layer, a_io).await
            }
        });
        dial(&d_layer, d_io).await.unwrap();
        assert_eq!(stocked(&d_layer), FULL, "made while the dialer waited");
        accepting.await.unwrap().unwrap();

        // The dialer comes late: the acceptor makes no key in its
        // handshake, and its own task stocks its pool after.
        let (d_layer, a_layer) = (EncryptLayer::new(ident(1)), EncryptLayer::new(ident(2)));
        let (d_io, a_io) = tokio::io::duplex(1 << 16);
        let accepting = tokio::spawn({
            let a_layer = a_layer.clone();
            async move {
                let accepted = accept(&a_layer, a_io).await;
                (accepted, stocked(&a_layer))
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        dial(&d_layer, d_io).await.unwrap();
        let dialer_after = stocked(&d_layer);
        let (accepted, acceptor_at_end) = accepting.await.unwrap();
        accepted.unwrap();
        assert_eq!(
            acceptor_at_end, EMPTY,
            "no key made inside the acceptor's handshake"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(stocked(&a_layer), FULL, "refilled after, in a task of its own");
        assert_eq!(
            stocked(&d_layer),
            dialer_after,
            "a dialer refills only while it waits"
        );
    }

    #[tokio::test]
    async fn a_pin_without_an_encryption_layer_fails_before_connecting_and_plaintext_stacks_agree() {
        let (d_io, a_io) = tokio::io::duplex(1 << 16);
        let connects = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut io = Some(d_io);
        let connect = tower::service_fn({
            let connects = connects.clone();
            move |()| {
                connects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                std::future::ready(
                    io.take()
                        .ok_or(std::io::Error::from(std::io::ErrorKind::NotFound)),
                )
            }
        });
        let mut dialer = ServiceBuilder::new()
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(connect);
        let pinned = dialer.handshake(Handshake::dial(()).expect_peer(peer(2))).await;
        assert!(
            matches!(pinned.unwrap_err().repr(), Repr::Stack(why) if why.starts_with("a pinned peer key"))
        );
        assert_eq!(
            connects.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "nothing dialed"
        );

        let transport = tower::service_fn(|io: DuplexStream| std::future::ready(Ok::<_, std::io::Error>(io)));
        let mut acceptor = ServiceBuilder::new()
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(transport);
        let (dialed, accepted) = tokio::join!(dialer.dial(()), acceptor.accept_transport(a_io));
        let (dialed, accepted) = (dialed.unwrap(), accepted.unwrap());
        assert_eq!(dialed.agreement().suite(), CipherSuite::Plaintext);
        assert_eq!(accepted.agreement().role(), Role::Acceptor);
        assert!(format!("{dialed:?}").starts_with("Negotiated { agreement: "));
    }
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
