//! Every error weft gives either prints its cause or returns it from
//! `source()`, never both (the Rust API guidelines' rule): walked as
//! anyhow's `{:#}` and eyre walk them, each cause is said once. Errors of
//! each kind a caller meets: a refused dial, a dial in backoff, a
//! connector's own error with a cause of its own, a peer sending garbage,
//! a weft error carried through an `io::Error`, and the HTTP connector's.

mod support;

use std::{fmt, io, net::SocketAddr};

use support::{ident, mux_stack};
use tokio::{io::AsyncWriteExt, net::TcpListener};
use tower::{service_fn, Service, ServiceBuilder};
use weft::{
    handshake::{HandshakeExt, Versions},
    pool::{Endpoint, Pool},
    transport::TcpConnector,
    NegotiateLayer,
};

/// The texts of `err` and each of its causes, in order.
fn chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut texts = Vec::new();
    let mut next = Some(err);
    while let Some(err) = next {
        texts.push(err.to_string());
        next = err.source();
    }
    texts
}

/// No text in `err`'s chain holds a later one: each cause is said once.
fn says_each_cause_once(what: &str, err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let texts = chain(err);
    for (i, earlier) in texts.iter().enumerate() {
        for later in &texts[i + 1..] {
            assert!(
                !earlier.contains(later.as_str()),
                "{what}: {earlier:?} prints its cause {later:?}, which source() returns too: {texts:?}"
            );
        }
    }
    texts
}

async fn closed_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A connector's error with a cause of its own.
#[derive(Debug)]
struct NoRoute(io::Error);

impl fmt::Display for NoRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no route to the test's server")
    }
}

impl std::error::Error for NoRoute {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[tokio::test]
async fn every_error_says_each_of_its_causes_once() {
    // A dial refused, through the pool; and the next, in backoff.
    let pool = Pool::builder().build(mux_stack(ident(1), &[], TcpConnector::new()));
    let endpoint = Endpoint::new(closed_port().await);
    let refused = pool.open(endpoint.clone()).await.unwrap_err();
    let texts = says_each_cause_once("a refused dial", &refused);
    assert!(
        texts.len() >= 2 && texts.last().unwrap().contains("refused"),
        "{texts:?}"
    );
    let backoff = pool.open(endpoint).await.unwrap_err();
    let texts = says_each_cause_once("a dial in backoff", &backoff);
    assert!(texts.len() >= 3, "{texts:?}");

    // A connector's own error and its cause.
    let failing = service_fn(|_: SocketAddr| async {
        Err::<tokio::net::TcpStream, _>(NoRoute(io::Error::new(
            io::ErrorKind::HostUnreachable,
            "host down",
        )))
    });
    let mut dialer = ServiceBuilder::new()
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(failing);
    let err = dialer.dial(closed_port().await).await.unwrap_err();
    let texts = says_each_cause_once("a connector's error", &err);
    let all = texts.join(": ");
    assert!(all.contains("no route") && all.contains("host down"), "{texts:?}");

    // A peer that sends garbage, and the same error as an io::Error.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let _ = tcp.write_all(b"GET / HTTP/1.1\r\nHost: weft\r\n\r\n").await;
        let _ = tcp.shutdown().await;
    });
    let err = mux_stack(ident(1), &[], TcpConnector::new())
        .dial(addr)
        .await
        .unwrap_err();
    says_each_cause_once("a peer sending garbage", &err);
    let io = io::Error::from(err);
    says_each_cause_once("a weft error as an io::Error", &io);

    // The HTTP connector's, over a refused dial.
    let mut connector =
        weft::http::Connector::new(pool.clone()).route("weft.test", Endpoint::new(closed_port().await));
    std::future::poll_fn(|cx| connector.poll_ready(cx)).await.unwrap();
    let err = connector
        .call("http://weft.test/".parse().unwrap())
        .await
        .unwrap_err();
    let texts = says_each_cause_once("the HTTP connector's", &*err);
    assert!(texts.join(": ").contains("refused"), "{texts:?}");
}
