//! What weft reports through the `metrics` facade, read back from
//! metrics-util's debugging recorder (installed for this whole test
//! binary): RPC calls per method and status on both ends, handshakes,
//! connections and their traffic, the pool, and a budget a hostile peer
//! exceeded.

mod support;

use std::{collections::HashMap, time::Duration};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::*;
use tokio::{io::AsyncWriteExt, net::TcpListener};
use weft::{
    handshake::CipherSuite,
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Code, Status},
    transport::{TcpAcceptor, TcpConnector},
    StreamLimitLayer,
};

#[path = "support/echo.rs"]
mod echo;

use echo::{EchoClient, EchoRequest, ExpandRequest, Say};

/// `Say` answers its text, or NOT_FOUND for "missing".
fn say_or_not_found() -> Say {
    Say::new(|request| match request.get_ref().text.as_str() {
        "missing" => Err(Status::not_found("no such thing")),
        text => Ok(text.to_owned()),
    })
}

/// Every metric's value so far, by name and labels. The debugging
/// recorder's snapshots drain what they read (counters and gauges swap to
/// zero, histograms clear), so each is added to what came before: counter
/// and gauge changes add up, and a histogram counts its samples. (A gauge
/// that is set, not moved, reads right only in the snapshot after it was
/// set.)
#[derive(Default)]
struct Metrics(HashMap<(String, Vec<(String, String)>), f64>);

impl Metrics {
    fn absorb(&mut self, snapshotter: &Snapshotter) -> &Self {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let mut labels: Vec<_> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let add = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(samples) => samples.len() as f64,
            };
            *self.0.entry((key.key().name().to_owned(), labels)).or_default() += add;
        }
        self
    }

    /// The sum over the series of `name` whose labels include `with`.
    fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|((n, labels), _)| {
                n == name
                    && with
                        .iter()
                        .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, value)| value)
            .sum()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_connections_pools_and_budgets_are_reported() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder of this test binary");

    // A server and a client, one pooled connection between them, each
    // piece handed the metrics.
    let reporting = weft::metrics::Metrics::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = mux_stack(ident(2), &[], TcpAcceptor::new()).observer(reporting);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .observer(reporting)
            .add_service(say_or_not_found().server())
            .serve_with_shutdown(listener, acceptor, async move {
                let _ = stopped.await;
            }),
    );
    let dialer = mux_stack(ident(1), &[], TcpConnector::new()).observer(reporting);
    let pool = Pool::builder().observer(reporting).build(dialer);
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    let mut echo = EchoClient::new(Client::new(pool.clone(), endpoint.clone()).observer(reporting));
    for text in ["a", "b", "c", "missing"] {
        let said = echo
            .say(EchoRequest {
                text: text.into(),
                ..EchoRequest::default()
            })
            .await;
        assert_eq!(said.is_ok(), text != "missing");
    }
    let unimplemented = echo.expand(ExpandRequest::default()).await.unwrap_err();
    assert_eq!(unimplemented.code(), Code::Unimplemented);

    // (The server counts a call as its handler's task ends, which may be
    // just after the caller has its reply.)
    let mut seen = Metrics::default();
    tokio::time::timeout(Duration::from_secs(5), async {
        while seen.absorb(&snapshotter).sum("rpc.server.call.duration", &[]) < 5.0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server counts every call");
    let m = &seen;
    let say = ("rpc.method", "weft.examples.Echo/Say");
    for (started, duration) in [
        ("weft.rpc.server.call.started", "rpc.server.call.duration"),
        ("weft.rpc.client.call.started", "rpc.client.call.duration"),
    ] {
        assert_eq!(m.sum(started, &[say]), 4.0, "{started}");
        assert_eq!(m.sum(duration, &[say, ("rpc.response.status_code", "OK")]), 3.0);
        assert_eq!(
            m.sum(duration, &[say, ("rpc.response.status_code", "NOT_FOUND")]),
            1.0
        );
        assert_eq!(
            m.sum(
                duration,
                &[
                    ("rpc.method", "weft.examples.Echo/Expand"),
                    ("rpc.response.status_code", "UNIMPLEMENTED")
                ]
            ),
            1.0
        );
        assert_eq!(m.sum(started, &[("rpc.system.name", "weft")]), 5.0);
    }
    for role in ["dialer", "acceptor"] {
        assert_eq!(m.sum("weft.handshakes", &[("role", role), ("result", "ok")]), 1.0);
        assert_eq!(m.sum("weft.handshake.duration", &[("role", role)]), 1.0);
        assert_eq!(m.sum("weft.connections.open", &[("role", role)]), 1.0);
    }
    let where_ = addr.to_string();
    assert_eq!(m.sum("weft.pool.dials", &[("endpoint", &where_)]), 1.0);
    assert_eq!(m.sum("weft.pool.dial_failures", &[("endpoint", &where_)]), 0.0);
    // The pool's connections are one series, however many endpoints come
    // and go.
    assert_eq!(m.sum("weft.pool.connections", &[]), 1.0);
    assert!(
        !m.0.keys()
            .any(|(name, labels)| name == "weft.pool.connections" && !labels.is_empty()),
        "a series per endpoint"
    );

    // A dial that fails is counted as such.
    let nowhere = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    assert!(pool.open(Endpoint::new(nowhere)).await.is_err());
    let m = seen.absorb(&snapshotter);
    let nowhere = nowhere.to_string();
    assert_eq!(m.sum("weft.pool.dial_failures", &[("endpoint", &nowhere)]), 1.0);

    // Both ends close: their traffic is in, and nothing is open.
    stop.send(()).unwrap();
    drop((echo, pool));
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while seen.absorb(&snapshotter).sum("weft.connections.open", &[]) != 0.0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every connection ends");
    let m = &seen;
    let (sent, received) = (m.sum("weft.bytes.sent", &[]), m.sum("weft.bytes.received", &[]));
    assert!(
        sent > 0.0 && sent == received,
        "{sent} bytes sent, {received} received"
    );
    assert!(m.sum("weft.records.sent", &[]) >= 10.0);
    assert!(m.sum("weft.records.received", &[]) >= 10.0);
    assert_eq!(m.sum("weft.streams.open", &[]), 0.0);
    assert_eq!(
        m.sum("weft.pool.connections", &[]),
        0.0,
        "a pool dropped holds nothing"
    );

    // A peer past its budget of control frames: counted by kind.
    let (raw, victim) = raw_peer_against_with(
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        weft::mux::Builder::new().observer(reporting),
    )
    .await;
    let (_from_victim, mut to_victim) = tokio::io::split(raw);
    let flood: Vec<u8> = (0..20_000u32)
        .flat_map(|n| mux_frame(6, 0, 0, &(101 + n).to_be_bytes()))
        .collect();
    let _ = to_victim.write_all(&flood).await;
    let _ = to_victim.flush().await;
    tokio::time::timeout(Duration::from_secs(10), victim.closed())
        .await
        .expect("the victim's connection ends");
    drop(victim);
    tokio::time::timeout(Duration::from_secs(5), async {
        while seen.absorb(&snapshotter).sum("weft.budget.violations", &[]) == 0.0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the violation is counted");
    assert_eq!(
        seen.sum("weft.budget.violations", &[("kind", "control_frames")]),
        1.0
    );
}
