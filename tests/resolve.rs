//! Names resolved by the dialer (`TcpConnector::resolver`): a pool
//! endpoint given by host name reaches the server at the addresses the
//! resolver answers, trying them in turn, and a name that does not
//! resolve fails the dial saying which name.

mod support;

use std::{
    io,
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use support::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};
use tower::{service_fn, ServiceBuilder};
use weft::{
    handshake::{HandshakeExt, Versions},
    mux,
    pool::{Endpoint, Pool},
    transport::{Name, TcpAcceptor, TcpConnector},
    MultiplexLayer, NegotiateLayer,
};

/// A weft echo server on loopback, as identity 2.
async fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut acceptor = mux_stack(ident(2), &[], TcpAcceptor::new());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            if let Ok(conn) = acceptor.accept_transport(tcp).await {
                echo_server(conn);
            }
        }
    });
    addr
}

/// A loopback port nobody listens on.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test]
async fn a_pool_dials_a_name_at_the_addresses_its_resolver_answers_in_turn() {
    let live = server().await;
    let dead = closed_port().await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let resolver = {
        let asked = asked.clone();
        service_fn(move |name: Name| {
            asked.lock().unwrap().push(name.to_string());
            // The first address refuses: the connector tries the next.
            async move { Ok::<_, io::Error>(vec![dead, live]) }
        })
    };
    let dialer = mux_stack(ident(1), &[], TcpConnector::new().resolver(resolver));
    let pool = Pool::builder().build(dialer);
    let endpoint = Endpoint::host("echo.test", 7000).expect_peer(ident(2).peer_id());

    for message in [&b"first"[..], b"second"] {
        let mut stream = pool.open(endpoint.clone()).await.unwrap();
        stream.write_all(message).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut back = Vec::new();
        stream.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, message);
    }
    // One dial, one lookup, of the name and port the endpoint gave.
    assert_eq!(pool.stats().dials, 1);
    assert_eq!(*asked.lock().unwrap(), ["echo.test:7000"]);
}

#[tokio::test]
async fn a_name_that_does_not_resolve_fails_the_dial_naming_it() {
    let resolver = service_fn(|_: Name| async {
        Err::<Vec<SocketAddr>, _>(io::Error::new(io::ErrorKind::NotFound, "NXDOMAIN"))
    });
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new().resolver(resolver));
    let pool = Pool::builder().build(dialer);
    let err = pool.open(Endpoint::host("gone.test", 7000)).await.unwrap_err();
    let text = weft_error_text(&err);
    assert!(text.contains("resolving gone.test:7000: NXDOMAIN"), "{text}");
}

#[tokio::test]
async fn every_address_refusing_says_how_many_were_tried() {
    let dead = [closed_port().await, closed_port().await];
    let resolver = service_fn(move |_: Name| async move { Ok::<_, io::Error>(dead) });
    let mut connector = TcpConnector::new().resolver(resolver);
    let err = tower::ServiceExt::oneshot(&mut connector, weft::transport::Target::host("down.test", 80))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    assert!(
        err.to_string()
            .starts_with("TCP connect to down.test:80 failed at every address (2 tried)"),
        "{err}"
    );
}

/// An error's text with its causes.
fn weft_error_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
