//! Soak runs, `#[ignore]`d (run them with `cargo test --release --test
//! stress -- --ignored --nocapture`): 100,000 streams churned on one
//! connection (`WEFT_SOAK_STREAMS`), 1,000 connections churned against one
//! server (`WEFT_SOAK_CONNECTIONS`), and RPC load at concurrency 256 for
//! ten minutes (`WEFT_SOAK_SECS`). CI runs them sized to about 30 s each
//! (.ci/run; TESTING.md has the long runs).
//! Each checks that no call failed and that the heap comes back to its
//! baseline once the load is gone (support::ThreadHeap counts the heap of
//! the test's thread, where its current-thread runtime runs everything).

mod support;

#[path = "../examples/rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use rpc_server::echo::{echo_client::EchoClient, EchoRequest};
use support::*;
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, HandshakeExt, Versions},
    mux::{self, Builder},
    pool::{Endpoint, Pool},
    rpc::client::Client,
    transport::TcpConnector,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

#[global_allocator]
static GLOBAL: ThreadHeap = ThreadHeap;

/// What may stay on the heap after a soak: the runtime's and the
/// allocator's own growth, not the connections'.
const SLACK: isize = 512 * 1024;

/// The environment's `name` as a number, or `default`.
fn sized(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

fn report(what: &str, before: isize, after: isize, start: Instant) {
    println!(
        "{what}: {:.1} s, heap {} -> {} bytes ({:+})",
        start.elapsed().as_secs_f64(),
        before,
        after,
        after - before
    );
}

#[tokio::test]
#[ignore = "soak: run with --ignored"]
async fn stress_churn_streams_on_one_connection() {
    let streams = sized("WEFT_SOAK_STREAMS", 100_000);
    let (client, server) = conn_pair_duplex(
        CipherSuite::Aes256Gcm,
        (StreamLimitLayer::new(100), StreamLimitLayer::new(100)),
        (Builder::new(), Builder::new()),
    )
    .await;
    let echo = echo_server(server);
    assert_eq!(echo_once(&client, b"warm").await, b"warm");
    settle().await;
    let before = live();
    let start = Instant::now();
    let client = Arc::new(client);
    let mut workers = Vec::new();
    for w in 0..64u64 {
        let client = client.clone();
        workers.push(tokio::spawn(async move {
            for n in 0..streams / 64 + 1 {
                let message = (w * 1_000_000 + n).to_be_bytes();
                assert_eq!(echo_once(&client, &message).await, message);
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    settle().await;
    let after = live();
    report(&format!("{streams} streams"), before, after, start);
    assert_eq!(client.stats().open_streams, 0);
    assert!(after - before < SLACK, "{} bytes kept", after - before);
    echo.abort();
}

#[tokio::test]
#[ignore = "soak: run with --ignored"]
async fn stress_churn_connections_against_one_server() {
    let connections = sized("WEFT_SOAK_CONNECTIONS", 1000);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let mut acceptor = conn_stack(
                    ident(2),
                    CipherSuite::Aes256Gcm,
                    StreamLimitLayer::new(10),
                    Builder::new(),
                );
                if let Ok(conn) = acceptor.accept_transport(tcp).await {
                    let _ = echo_server(conn).await;
                }
            });
        }
    });
    let dial = |addr: SocketAddr| async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut dialer = conn_stack(
            ident(1),
            CipherSuite::Aes256Gcm,
            StreamLimitLayer::new(10),
            Builder::new(),
        );
        let conn = dialer.dial(tcp).await.unwrap();
        assert_eq!(echo_once(&conn, b"hello").await, b"hello");
        conn.close(weft::CloseCode::NO_ERROR, "");
        let _ = conn.closed().await;
    };
    dial(addr).await;
    settle().await;
    let before = live();
    let start = Instant::now();
    for _ in 0..connections {
        dial(addr).await;
    }
    settle().await;
    let after = live();
    report(&format!("{connections} connections"), before, after, start);
    assert!(after - before < SLACK, "{} bytes kept", after - before);
    server.abort();
}

/// The RPC client's stack: the pool's usual one.
fn dialer() -> impl weft::pool::Dialer {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new())
}

#[tokio::test]
#[ignore = "soak: run with --ignored"]
async fn stress_rpc_load_at_concurrency_256() {
    let secs = sized("WEFT_SOAK_SECS", 600);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let server_id = identity.peer_id();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(rpc_server::run(listener, identity, async {
        let _ = stopped.await;
    }));
    let before;
    let calls = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    {
        let pool = Pool::builder().build(dialer());
        let client = EchoClient::new(Client::new(
            pool.clone(),
            Endpoint::new(addr).expect_peer(server_id),
        ));
        let say = |mut client: EchoClient<_>, text: String| async move {
            let reply = client
                .say(EchoRequest {
                    text: text.clone(),
                    payload: Vec::new(),
                })
                .await
                .expect("no call fails");
            assert_eq!(reply.get_ref().text, text);
        };
        say(client.clone(), "warm".into()).await;
        settle().await;
        before = live();
        let deadline = start + Duration::from_secs(secs);
        let mut callers = Vec::new();
        for c in 0..256u64 {
            let (client, calls) = (client.clone(), calls.clone());
            callers.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    say(client.clone(), format!("{c}/{n}")).await;
                    n += 1;
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for caller in callers {
            caller.await.unwrap();
        }
    }
    // The pool and its connections are gone; the server's end of them too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = live();
    let calls = calls.load(Ordering::Relaxed);
    report(
        &format!("RPC at 256 for {secs} s, {calls} calls"),
        before,
        after,
        start,
    );
    assert!(after - before < SLACK, "{} bytes kept", after - before);
    let _ = stop.send(());
    let _ = server.await;
}
