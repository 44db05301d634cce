//! Which suite two sides agree: plaintext only when neither encrypts or
//! both allow it, the acceptor's order, and a layer given no suite.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, HandshakeExt, Versions},
    transport::ExistingTransport,
    ErrorKind, NegotiateLayer,
};

use crate::support::*;

#[tokio::test]
async fn two_sides_without_encryption_get_a_plaintext_channel() {
    let plain = || {
        ServiceBuilder::new()
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(ExistingTransport::new())
    };
    let (a, b) = tokio::io::duplex(4096);
    let (d, mut acc) = (plain(), plain());
    let mut d = d;
    let (d, a) = tokio::join!(d.dial(a), acc.accept_transport(b));
    let (mut d, mut a) = (d.unwrap().into_plaintext(), a.unwrap().into_plaintext());
    assert_eq!(d.agreement().suite(), CipherSuite::Plaintext);
    assert_eq!(d.peer(), None);
    d.write_all(b"clear").await.unwrap();
    d.shutdown().await.unwrap();
    let mut text = String::new();
    a.read_to_string(&mut text).await.unwrap();
    assert_eq!(text, "clear");
}

#[tokio::test]
async fn plaintext_is_refused_unless_both_sides_allow_it() {
    let (a, b) = tokio::io::duplex(4096);
    let mut dialer = stack(ident(1), &[CipherSuite::Aes256Gcm, CipherSuite::Plaintext]);
    let mut acceptor = stack(ident(2), &[CipherSuite::Plaintext]);
    let mut strict = stack(ident(3), &[CipherSuite::Aes256Gcm]);
    let (d, a) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    assert_eq!(d.unwrap().agreement().suite(), CipherSuite::Plaintext);
    assert_eq!(a.unwrap().agreement().suite(), CipherSuite::Plaintext);

    let (a, b) = tokio::io::duplex(4096);
    let mut acceptor = stack(ident(2), &[CipherSuite::Plaintext]);
    let (d, a) = tokio::join!(strict.dial(a), acceptor.accept_transport(b));
    let no_common_suite = |result| failed_with(result, ErrorKind::Negotiation, "no common cipher suite");
    assert!(no_common_suite(&d), "{d:?}");
    assert!(no_common_suite(&a), "{a:?}");
}

#[tokio::test]
async fn an_encryption_layer_given_no_suite_fails_its_handshake_and_never_agrees_plaintext() {
    let plain = ServiceBuilder::new()
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let (a, b) = tokio::io::duplex(4096);
    let mut empty = stack(ident(1), &[]);
    let mut plain = plain;
    let (d, a) = tokio::join!(empty.dial(a), async {
        // The peer sees the dialer go before any Setup of it.
        tokio::time::timeout(Duration::from_secs(10), plain.accept_transport(b)).await
    });
    let err = d.expect_err("no suite, no channel");
    assert_eq!(err.side(), weft::Side::Local, "{err}");
    assert!(
        err.to_string().contains("EncryptLayer has no cipher suite"),
        "{err}"
    );
    assert!(a.expect("the peer's handshake ends").is_err());
}

#[tokio::test]
async fn the_acceptors_suite_order_decides() {
    let (a, b) = tokio::io::duplex(4096);
    let mut dialer = stack(ident(1), &[CipherSuite::Aes256Gcm, CipherSuite::XSalsa20Poly1305]);
    let mut acceptor = stack(ident(2), &[CipherSuite::XSalsa20Poly1305, CipherSuite::Aes256Gcm]);
    let (d, a) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    assert_eq!(d.unwrap().agreement().suite(), CipherSuite::XSalsa20Poly1305);
    assert_eq!(a.unwrap().agreement().suite(), CipherSuite::XSalsa20Poly1305);
}
