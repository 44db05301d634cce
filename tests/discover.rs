//! Discovery from a real DNS server: hickory-server in-process on
//! 127.0.0.1, serving a zone the test changes while calls flow through a
//! balanced RPC client (`rpc::client::Balanced` over `discover::Dns`) to
//! RPC servers on 127.0.0.2, .3 and .4. One server is taken out of the
//! zone and shut down gracefully, a fourth is added: no call fails, the
//! new server gets calls within two TTLs, and the removed one drains by
//! go-away. Only loopback addresses.

use std::{
    collections::HashMap,
    future::IntoFuture,
    net::{IpAddr, SocketAddr},
    str::FromStr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hickory_proto::rr::{rdata::A, LowerName, Name, RData, Record, RecordType, RrKey};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use weft::{
    discover::Dns,
    pool::Pool,
    rpc::{client::Balanced, server::Server, Request, Status},
    transport::{TcpAcceptor, TcpConnector},
};

#[path = "support/dns.rs"]
mod dns;
#[path = "support/echo.rs"]
mod echo;
mod support;

use dns::{ip, listeners, Zone, NAME, TTL};
use echo::{EchoClient, EchoRequest, Say};
use support::{ident, mux_stack};

/// An RPC server on `ip:port` (the fleet's identity 9), stopped
/// gracefully by the sender.
struct RpcServer {
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

fn start_server(listener: TcpListener) -> RpcServer {
    let name = listener.local_addr().unwrap().ip().to_string();
    let acceptor = mux_stack(ident(9), &[], TcpAcceptor::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = Server::builder()
        .shutdown_timeout(Duration::from_secs(5))
        .add_service(Say::new(move |_| Ok(name.clone())).server());
    let task = tokio::spawn(server.serve_with_shutdown(listener, acceptor, async move {
        let _ = stopped.await;
    }));
    RpcServer { stop, task }
}

/// Calls answered, by server, with when; and failures.
#[derive(Default)]
struct Tally {
    answered: Vec<(Instant, String)>,
    failed: Vec<Status>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_follow_the_zone_as_servers_come_and_go_and_none_fails() {
    let mut listeners = listeners().await;
    let port = listeners[0].local_addr().unwrap().port();
    let fourth = listeners.pop().unwrap();
    let mut servers: HashMap<IpAddr, RpcServer> = HashMap::new();
    for listener in listeners {
        let addr = listener.local_addr().unwrap();
        servers.insert(addr.ip(), start_server(listener));
    }
    let mut zone = Zone::start(&[ip(2), ip(3), ip(4)]).await;

    let endpoints = Dns::ips(NAME, port)
        .expect_peer(ident(9).peer_id())
        .resolver(zone.resolver())
        .refresh_bounds(Duration::from_millis(100), Duration::from_secs(u64::from(TTL)))
        .spawn()
        .unwrap();
    let dialer = mux_stack(ident(1), &[], TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    let client = Balanced::new(pool.clone(), endpoints.clone());

    // Eight callers, calling until told to stop.
    let tally = Arc::new(Mutex::new(Tally::default()));
    let (stop_calls, calls_stopped) = tokio::sync::watch::channel(false);
    let mut callers = Vec::new();
    for _ in 0..8 {
        let mut echo = EchoClient::new(client.clone());
        let tally = tally.clone();
        let stopped = calls_stopped.clone();
        callers.push(tokio::spawn(async move {
            while !*stopped.borrow() {
                let request = EchoRequest {
                    text: "who?".into(),
                    ..EchoRequest::default()
                };
                let mut request = Request::new(request);
                request.set_timeout(Duration::from_secs(5));
                let outcome = echo.say(request).await;
                let mut tally = tally.lock().unwrap();
                match outcome {
                    Ok(reply) => tally.answered.push((Instant::now(), reply.into_inner().text)),
                    Err(status) => tally.failed.push(status),
                }
            }
        }));
    }
    let answered_by = |since: Instant| {
        let tally = tally.lock().unwrap();
        let mut by: HashMap<String, usize> = HashMap::new();
        for (at, server) in &tally.answered {
            if *at >= since {
                *by.entry(server.clone()).or_default() += 1;
            }
        }
        by
    };

    // All three get calls.
    let start = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = answered_by(start);
    for server in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        assert!(
            before.get(server).copied().unwrap_or(0) > 0,
            "{server}: {before:?}"
        );
    }

    // .4 leaves the zone, .5 joins it, in one change.
    servers.insert(ip(5).into(), start_server(fourth));
    zone.set(&[ip(2), ip(3), ip(5)]).await;
    let changed = Instant::now();
    let first_from_new = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let first = tally
                .lock()
                .unwrap()
                .answered
                .iter()
                .find(|(at, s)| *at >= changed && s == "127.0.0.5")
                .map(|(at, _)| *at);
            if let Some(at) = first {
                return at;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the new server gets calls");
    let took = first_from_new - changed;
    assert!(
        took <= Duration::from_secs(2 * u64::from(TTL)),
        "the new server's first call after {took:?}"
    );
    eprintln!("before: {before:?}; the new server answered {took:?} after the change");

    // The client no longer lists .4: shut it down gracefully. Its
    // connections go away, the calls in flight there finish.
    tokio::time::timeout(Duration::from_secs(5), async {
        while endpoints
            .current()
            .iter()
            .any(|e| e.to_string().starts_with("127.0.0.4"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect(".4 leaves the client's endpoints");
    let removed = servers.remove(&IpAddr::from(ip(4))).unwrap();
    let _ = removed.stop.send(());
    tokio::time::timeout(Duration::from_secs(10), removed.task)
        .await
        .expect("the removed server drains and stops")
        .unwrap()
        .unwrap();
    let drained_at = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = answered_by(drained_at);
    assert_eq!(after.get("127.0.0.4"), None, "{after:?}");
    for server in ["127.0.0.2", "127.0.0.3", "127.0.0.5"] {
        assert!(after.get(server).copied().unwrap_or(0) > 0, "{server}: {after:?}");
    }
    // The pool's connection to .4 went away by the server's go-away.
    let gone = SocketAddr::from((ip(4), port));
    for conn in pool.connections_to(&weft::pool::Endpoint::new(gone).expect_peer(ident(9).peer_id())) {
        assert!(
            conn.is_going_away() || conn.is_closed(),
            "a connection to .4 still open"
        );
    }

    let _ = stop_calls.send(true);
    for caller in callers {
        caller.await.unwrap();
    }
    let tally = tally.lock().unwrap();
    assert!(tally.failed.is_empty(), "failed calls: {:?}", tally.failed);
    eprintln!("after: {after:?}; {} calls in all", tally.answered.len());
    assert!(tally.answered.len() > 100, "{} calls", tally.answered.len());
}

#[tokio::test]
async fn srv_records_give_hosts_and_ports_and_a_failing_name_keeps_the_last_set() {
    use hickory_proto::rr::rdata::SRV;
    let mut zone = Zone::start(&[]).await;
    let srv_name = Name::from_str("_rpc._tcp.weft.test.").unwrap();
    let targets = [("a.weft.test.", ip(2), 7001), ("b.weft.test.", ip(3), 7002)];
    let mut records = Vec::new();
    for (target, address, port) in targets {
        let target = Name::from_str(target).unwrap();
        let srv = SRV::new(10, 10, port, target.clone());
        records.push(Record::from_rdata(srv_name.clone(), TTL, RData::SRV(srv)));
        records.push(Record::from_rdata(target, TTL, RData::A(A(address))));
    }
    zone.add(records).await;
    let mut endpoints = Dns::srv("_rpc._tcp.weft.test.")
        .protocol("rpc")
        .resolver(zone.resolver())
        .refresh_bounds(Duration::from_millis(50), Duration::from_millis(200))
        .spawn()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), endpoints.changed())
        .await
        .expect("the first answer");
    let found: Vec<String> = endpoints.current().iter().map(ToString::to_string).collect();
    assert_eq!(found, ["127.0.0.2:7001 (rpc)", "127.0.0.3:7002 (rpc)"]);

    // The name disappears: the last good set stays, through several
    // failed lookups.
    zone.handler
        .records_mut()
        .await
        .remove(&RrKey::new(LowerName::new(&srv_name), RecordType::SRV));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let kept: Vec<String> = endpoints.current().iter().map(ToString::to_string).collect();
    assert_eq!(kept, found);

    // And when it comes back changed, the change is taken.
    zone.serial += 1;
    let srv = SRV::new(10, 10, 7003, Name::from_str("a.weft.test.").unwrap());
    assert!(
        zone.handler
            .upsert(Record::from_rdata(srv_name, TTL, RData::SRV(srv)), zone.serial)
            .await
    );
    tokio::time::timeout(Duration::from_secs(5), endpoints.changed())
        .await
        .expect("the new answer");
    let found: Vec<String> = endpoints.current().iter().map(ToString::to_string).collect();
    assert_eq!(found, ["127.0.0.2:7003 (rpc)"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hyper_client_spreads_its_connections_over_the_name() {
    use axum::{routing::get, Router};
    use http_body_util::{BodyExt, Empty};
    use hyper_util::{client::legacy::Client, rt::TokioExecutor};
    use weft::http::BalancedConnector;

    let mut listeners = listeners().await;
    listeners.truncate(2);
    let port = listeners[0].local_addr().unwrap().port();
    // Every handler waits for all 40 requests to arrive, so that each
    // holds its connection: on a busy machine the requests could
    // otherwise run one after another over one reused connection.
    let all_in = Arc::new(tokio::sync::Barrier::new(40));
    for listener in listeners {
        let name = listener.local_addr().unwrap().ip().to_string();
        let all_in = all_in.clone();
        let app: Router = Router::new().route(
            "/",
            get(move || {
                let (name, all_in) = (name.clone(), all_in.clone());
                async move {
                    // A request that never sees the rest fails (its
                    // handler panics): the client's answer shows it.
                    tokio::time::timeout(Duration::from_secs(10), all_in.wait())
                        .await
                        .expect("all 40 requests arrive together");
                    name
                }
            }),
        );
        let acceptor = mux_stack(ident(9), &["http/1.1"], TcpAcceptor::new());
        tokio::spawn(weft::http::serve(listener, acceptor, app).into_future());
    }
    let zone = Zone::start(&[ip(2), ip(3)]).await;
    let endpoints = Dns::ips(NAME, port)
        .expect_peer(ident(9).peer_id())
        .resolver(zone.resolver())
        .spawn()
        .unwrap();
    // Once the name resolves to both (the first lookup is the spawned
    // task's, and may not have finished).
    let mut watch = endpoints.clone();
    while watch.current().len() < 2 {
        tokio::time::timeout(Duration::from_secs(5), watch.changed())
            .await
            .expect("the name resolves to both addresses");
    }
    let dialer = mux_stack(ident(1), &["http/1.1"], TcpConnector::new());
    let connector = BalancedConnector::new(Pool::builder().build(dialer), endpoints);
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<bytes::Bytes>>(connector);

    // 40 requests at once over HTTP/1.1: a connection (a weft stream) each.
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..40 {
        let client = client.clone();
        requests.spawn(async move {
            let response = client
                .get("http://anything.test/".parse().unwrap())
                .await
                .unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            String::from_utf8(body.to_vec()).unwrap()
        });
    }
    let mut by: HashMap<String, usize> = HashMap::new();
    while let Some(server) = requests.join_next().await {
        *by.entry(server.unwrap()).or_default() += 1;
    }
    assert_eq!(by.values().sum::<usize>(), 40);
    for server in ["127.0.0.2", "127.0.0.3"] {
        assert!(by.get(server).copied().unwrap_or(0) >= 5, "{by:?}");
    }
}
