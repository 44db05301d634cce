//! The handshake's shell (`drive`) under the layers, over an in-memory
//! pipe with a paused clock: stacks of encryption over negotiation, a
//! dialer's connector handing out one end once, an acceptor's taking the
//! other; or a peer played by the machine's stages by hand.

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
    assert!(matches!(pinned.unwrap_err().repr(), Repr::Stack(why) if why.starts_with("a pinned peer key")));
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

/// What the acceptor played by hand leaves behind it.
enum Leaves {
    /// Its Auth: a proof the dialer could not answer.
    Proof,
    /// A close in the clear, in place of its proof.
    Refusal,
}

/// Plays acceptor 2 by hand over `io`: sends its Setup, reads the
/// dialer's, sends what `leaves` says, and leaves before the dialer's
/// Auth can go.
async fn acceptor_that_leaves(mut io: DuplexStream, leaves: Leaves) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let sent = Side::acceptor(2).start().unwrap();
    io.write_all(sent.frame()).await.unwrap();
    let mut buf = BytesMut::new();
    let dialers = loop {
        if let Some(frame) = FrameCodec::new(MAX_SETUP).decode(&mut buf).unwrap() {
            break frame;
        }
        assert_ne!(io.read_buf(&mut buf).await.unwrap(), 0);
    };
    let Ok(Next::Prove(proving)) = sent.receive(dialers).unwrap().proceed(clock()) else {
        panic!("the acceptor proves itself");
    };
    match leaves {
        Leaves::Proof => io.write_all(proving.record()).await.unwrap(),
        Leaves::Refusal => {
            let payload = crate::record::encode_close(crate::CloseCode::UNAUTHORIZED, "not you");
            io.write_all(&FrameKind::Close.header(payload.len()))
                .await
                .unwrap();
            io.write_all(&payload).await.unwrap();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_dialer_whose_proof_cannot_go_reports_the_refusal_left_for_it_and_takes_no_proof() {
    // A refusal left in place of the proof is what the dialer reports.
    let d_layer = EncryptLayer::new(ident(1));
    let (d_io, a_io) = tokio::io::duplex(1 << 16);
    let (dialed, ()) = tokio::join!(dial(&d_layer, d_io), acceptor_that_leaves(a_io, Leaves::Refusal));
    match dialed.unwrap_err().repr() {
        Repr::UnauthenticatedClose { code, reason } => {
            assert_eq!(
                (*code, reason.as_str()),
                (crate::CloseCode::UNAUTHORIZED, "not you")
            )
        }
        other => panic!("{other:?}"),
    }
    // A proof left behind is not taken: the dialer's own never went.
    let (d_io, a_io) = tokio::io::duplex(1 << 16);
    let (dialed, ()) = tokio::join!(dial(&d_layer, d_io), acceptor_that_leaves(a_io, Leaves::Proof));
    let failed = dialed.unwrap_err();
    assert!(matches!(failed.repr(), Repr::Io(_)), "{failed:?}");
}
