//! The live view against a live server: an RPC server and a client over
//! loopback with the view on, the view served over plain HTTP (axum),
//! and its JSON checked against the connections, the pool and the calls
//! the test made; the page served whole, with no external asset.

mod support;

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client as HttpClient, rt::TokioExecutor};
use serde_json::Value;
use support::{ident, mux_stack};
use tokio::net::TcpListener;
use weft::{
    admin::Admin,
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Status},
    transport::{TcpAcceptor, TcpConnector},
};

#[path = "support/echo.rs"]
mod echo;

use echo::{EchoClient, EchoRequest, Say};

/// `path` from the view's HTTP server: its status, content type and body.
async fn get(view: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
    let response = client
        .get(format!("http://{view}{path}").parse().unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, kind, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_shows_the_connections_pool_and_calls_of_a_live_server() {
    // The view, handed to what it shows: the server's stack and its calls,
    // the client's stack, pool and calls.
    let admin = Admin::new();

    // The view over plain HTTP, as an operator would reach it.
    let view_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let view = view_listener.local_addr().unwrap();
    let app = axum::Router::new().nest_service("/admin", admin.service());
    tokio::spawn(async move { axum::serve(view_listener, app).await });

    // An RPC server and a client, with one connection between them.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // It accepts early data, for the 0-RTT connection below.
    let acceptor = tower::ServiceBuilder::new()
        .layer(weft::MultiplexLayer::new(
            weft::mux::Builder::new().observer(admin.clone()),
        ))
        .layer(weft::EncryptLayer::new(ident(2)).accept_early_data())
        .layer(weft::NegotiateLayer::new(weft::handshake::Versions::CURRENT).protocols(["rpc"]))
        .service(TcpAcceptor::new());
    let say = Say::new(|request| match request.get_ref().text.as_str() {
        "missing" => Err(Status::not_found("no such thing")),
        text => Ok(text.to_owned()),
    })
    .after(Duration::from_millis(2));
    tokio::spawn(
        Server::builder()
            .observer(admin.clone())
            .add_service(say.server())
            .serve(listener, acceptor),
    );
    let pool_dialer = mux_stack(ident(1), &["rpc"], TcpConnector::new()).observer(admin.clone());
    let pool = Pool::builder().observer(admin.clone()).build(pool_dialer.clone());
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    let mut echo = EchoClient::new(Client::new(pool.clone(), endpoint.clone()).observer(admin.clone()));
    for text in ["a", "b", "c", "missing"] {
        let _ = echo
            .say(EchoRequest {
                text: text.into(),
                ..EchoRequest::default()
            })
            .await;
    }
    let dialed = pool.connections_to(&endpoint).pop().expect("a pooled connection");

    // The server counts its last call as the handler's task ends.
    let snapshot: Value = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let (status, kind, body) = get(view, "/admin/snapshot.json").await;
            assert_eq!((status, kind.as_str()), (200, "application/json"));
            let snapshot: Value = serde_json::from_str(&body).unwrap();
            let served = snapshot["methods"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["side"] == "server")
                .map(|m| m["calls"].as_u64().unwrap())
                .sum::<u64>();
            if served == 4 {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the server's calls show");

    // Both ends of the connection, each as its side sees it.
    let connections = snapshot["connections"].as_array().unwrap();
    let find = |role: &str, peer: String| {
        connections
            .iter()
            .find(|c| c["role"] == role && c["peer"] == peer)
            .unwrap_or_else(|| panic!("the {role}'s connection"))
    };
    let ours = find("dialer", ident(2).peer_id().to_string());
    assert_eq!(ours["remote_addr"], addr.to_string());
    assert_eq!(ours["protocol"], "rpc");
    assert_eq!(ours["suite"], dialed.agreement().suite().name());
    assert_eq!(ours["version"], dialed.version());
    assert_eq!(
        ours["early_data"], "none",
        "the dialer did not know the box key yet"
    );
    assert!(ours["bytes_sent"].as_u64().unwrap() > 0);
    // The default connection window, 4 MiB, each way.
    assert_eq!(ours["recv_window"], 4 << 20);
    assert!(ours["send_credit"].as_u64().unwrap() > 0);
    let theirs = find("acceptor", ident(1).peer_id().to_string());
    let client_addr: std::net::SocketAddr = theirs["remote_addr"].as_str().unwrap().parse().unwrap();
    assert!(client_addr.ip().is_loopback() && client_addr.port() != addr.port());
    assert_eq!(theirs["bytes_received"], ours["bytes_sent"]);
    assert_ne!(theirs["id"], ours["id"]);

    // The pool: the endpoint, with that connection.
    let pools = snapshot["pools"].as_array().unwrap();
    let pool_view = pools
        .iter()
        .find(|p| {
            p["endpoints"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["connections"].as_array().unwrap().contains(&ours["id"]))
        })
        .expect("the pool lists the connection");
    assert_eq!(pool_view["dials"], 1);
    assert_eq!(pool_view["endpoints"][0]["endpoint"], addr.to_string());
    assert_eq!(
        pool_view["endpoints"][0]["expected_peer"],
        ident(2).peer_id().to_string()
    );

    // The calls, both sides, by status, with durations.
    for side in ["client", "server"] {
        let say = snapshot["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["side"] == side && m["service"] == "weft.examples.Echo" && m["method"] == "Say")
            .unwrap_or_else(|| panic!("{side}'s Say"));
        assert_eq!(say["calls"], 4);
        assert_eq!(say["by_status"]["OK"], 3);
        assert_eq!(say["by_status"]["NOT_FOUND"], 1);
        let p50 = say["latency_us"]["p50"].as_u64().unwrap();
        assert!(p50 >= 1000, "{side}: p50 {p50} µs, with handlers that sleep 2 ms");
    }

    // A second pool on the same dialer knows the server's box key: its
    // first call goes in its dial's first flight, and the view says so
    // at both ends. The pool and its client were not handed the view:
    // they do not show (there is no global registry).
    let early_pool = Pool::builder().build(pool_dialer.clone());
    let mut early_echo = EchoClient::new(Client::new(early_pool.clone(), endpoint.clone()));
    let reply = early_echo.say(EchoRequest::default()).await.unwrap();
    assert!(reply.is_early());
    let early_conn = early_pool.connections_to(&endpoint).pop().unwrap();
    let snapshot = admin.snapshot();
    assert_eq!(snapshot.pools.len(), 1, "only the pool handed the view");
    let client_calls: u64 = snapshot
        .methods
        .iter()
        .filter(|m| m.side == "client")
        .map(|m| m.calls)
        .sum();
    assert_eq!(client_calls, 4, "only the client handed the view");
    let early = |role: &str| {
        snapshot
            .connections
            .iter()
            .filter(|c| c.role == role && c.early_data == "accepted")
            .count()
    };
    assert_eq!((early("dialer"), early("acceptor")), (1, 1));
    early_conn.close(weft::CloseCode::NO_ERROR, "done");
    drop((early_echo, early_pool, early_conn));

    // The page: whole, with nothing fetched from elsewhere.
    let (status, kind, page) = get(view, "/admin/").await;
    assert_eq!((status, kind.as_str()), (200, "text/html; charset=utf-8"));
    assert!(page.contains("<title>weft</title>") && page.contains("snapshot.json"));
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("src="));
    assert_eq!(get(view, "/admin/nothing").await.0, 404);

    // A connection that ends leaves the view.
    dialed.close(weft::CloseCode::NO_ERROR, "done");
    drop((echo, pool));
    tokio::time::timeout(Duration::from_secs(5), async {
        while admin
            .snapshot()
            .connections
            .iter()
            .any(|c| c.peer.as_deref() == Some(&ident(2).peer_id().to_string()))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the ended connection leaves the view");
}
