//! A fleet that keeps answering: three RPC servers behind one DNS name
//! (hickory-server in process), eight callers calling throughout through
//! `rpc::client::Balanced`, and one server lost in each of the ways a
//! fleet loses one. Stopped gracefully while its record stays: no call
//! fails. Killed (its listener and connections gone at once, reset) while
//! its record stays: only the calls running on it fail, and none after it
//! is taken out, within 100 ms. Removed from the name and stopped at the
//! same moment (what a Kubernetes rolling update does): no call that
//! never ran fails. Each server sits behind a proxy the test can kill.
//! Only loopback addresses.

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::{
    net::{TcpListener, TcpStream},
    sync::{oneshot, watch},
    task::{JoinHandle, JoinSet},
};
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

use dns::{ip, listeners, Zone, NAME};
use echo::{EchoClient, EchoRequest, Say};
use support::{ident, mux_stack};

/// One instance: an RPC server on a port of its own, and a proxy to it on
/// the fleet's address, which the test may kill.
struct Instance {
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
    close_listener: Option<oneshot::Sender<()>>,
    proxy: JoinHandle<()>,
}

impl Instance {
    async fn start(front: TcpListener) -> Instance {
        let name = front.local_addr().unwrap().ip().to_string();
        let back = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let back_addr = back.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = Server::builder()
            .shutdown_timeout(Duration::from_secs(5))
            .add_service(Say::new(move |_| Ok(name.clone())).server());
        let server = tokio::spawn(server.serve_with_shutdown(
            back,
            mux_stack(ident(9), &[], TcpAcceptor::new()),
            async move {
                let _ = stopped.await;
            },
        ));
        let (close_listener, listener_closed) = oneshot::channel();
        Instance {
            stop: Some(stop),
            server,
            close_listener: Some(close_listener),
            proxy: tokio::spawn(proxy(front, back_addr, listener_closed)),
        }
    }

    /// Stops it gracefully: the listener closes (new connections are
    /// refused) and the server's connections go away once their calls are
    /// done.
    async fn stop(mut self) {
        let _ = self.close_listener.take().unwrap().send(());
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), &mut self.server)
            .await
            .expect("the server drains and stops")
            .unwrap()
            .unwrap();
        // Its connections close; the proxy ends with them.
        tokio::time::timeout(Duration::from_secs(10), &mut self.proxy)
            .await
            .expect("the proxy's links end with the server's connections")
            .unwrap();
    }

    /// Kills it: the listener closed and every connection reset at once.
    async fn kill(mut self) {
        self.proxy.abort();
        let _ = (&mut self.proxy).await;
    }
}

/// Forwards each connection to `back`: until `closed`, new ones too.
/// Aborted, it resets every connection it forwards.
async fn proxy(front: TcpListener, back: SocketAddr, mut closed: oneshot::Receiver<()>) {
    let mut links = JoinSet::new();
    loop {
        let client = tokio::select! {
            accepted = front.accept() => match accepted {
                Ok((client, _)) => client,
                Err(_) => continue,
            },
            _ = &mut closed => break,
        };
        links.spawn(async move {
            let Ok(server) = TcpStream::connect(back).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            // Dropped by an abort: a reset, not a close.
            let _ = client.set_zero_linger();
            let (mut client, mut server) = (client, server);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        });
    }
    drop(front);
    while links.join_next().await.is_some() {}
}

/// What the callers saw: answers by server with when, and failures with
/// when.
#[derive(Default)]
struct Tally {
    answered: Vec<(Instant, String)>,
    failed: Vec<(Instant, Status)>,
}

/// Three instances behind `NAME`, and eight callers calling them through
/// a balanced client until the returned sender says stop.
struct Fleet {
    zone: Zone,
    instances: Vec<Option<Instance>>,
    tally: Arc<Mutex<Tally>>,
    stop_calls: watch::Sender<bool>,
    callers: Vec<JoinHandle<()>>,
}

impl Fleet {
    async fn start() -> Fleet {
        let mut fronts = listeners().await;
        fronts.truncate(3);
        let port = fronts[0].local_addr().unwrap().port();
        let mut instances = Vec::new();
        for front in fronts {
            instances.push(Some(Instance::start(front).await));
        }
        let zone = Zone::start(&[ip(2), ip(3), ip(4)]).await;
        let endpoints = Dns::ips(NAME, port)
            .expect_peer(ident(9).peer_id())
            .resolver(zone.resolver())
            .refresh_bounds(Duration::from_millis(100), Duration::from_secs(1))
            .spawn()
            .unwrap();
        let pool = Pool::builder().build(mux_stack(ident(1), &[], TcpConnector::new()));
        let client = Balanced::new(pool, endpoints);
        let tally = Arc::new(Mutex::new(Tally::default()));
        let (stop_calls, calls_stopped) = watch::channel(false);
        let mut callers = Vec::new();
        for _ in 0..8 {
            let mut echo = EchoClient::new(client.clone());
            let tally = tally.clone();
            let stopped = calls_stopped.clone();
            callers.push(tokio::spawn(async move {
                while !*stopped.borrow() {
                    let mut request = Request::new(EchoRequest::default());
                    request.set_timeout(Duration::from_secs(5));
                    let outcome = echo.say(request).await;
                    let mut tally = tally.lock().unwrap();
                    match outcome {
                        Ok(reply) => tally.answered.push((Instant::now(), reply.into_inner().text)),
                        Err(status) => tally.failed.push((Instant::now(), status)),
                    }
                }
            }));
        }
        let fleet = Fleet {
            zone,
            instances,
            tally,
            stop_calls,
            callers,
        };
        // Every instance answers before anything happens to one.
        let start = Instant::now();
        for server in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
            fleet
                .wait_for(&format!("{server} answers"), |t| {
                    t.answered.iter().any(|(at, s)| *at >= start && s == server)
                })
                .await;
        }
        fleet
    }

    /// Waits (at most 10 s) until the tally shows `what`.
    async fn wait_for(&self, what: &str, seen: impl Fn(&Tally) -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !seen(&self.tally.lock().unwrap()) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("never saw: {what}"));
    }

    /// The calls answered by the other two since `since` reach `calls`
    /// more, with none by `gone`: the fleet carries on without it.
    async fn carries_on_without(&self, gone: &str, since: Instant, calls: usize) {
        self.wait_for(&format!("{calls} calls answered by the others"), |t| {
            t.answered
                .iter()
                .filter(|(at, s)| *at >= since && s != gone)
                .count()
                >= calls
        })
        .await;
    }

    /// Stops the callers: what they saw.
    async fn finish(self) -> Tally {
        let _ = self.stop_calls.send(true);
        for caller in self.callers {
            caller.await.unwrap();
        }
        for instance in self.instances.into_iter().flatten() {
            instance.stop().await;
        }
        Arc::try_unwrap(self.tally).ok().unwrap().into_inner().unwrap()
    }
}

/// How many calls failed, and the first few.
fn failures(tally: &Tally) -> String {
    let first: Vec<String> = tally.failed.iter().take(3).map(|(_, s)| s.to_string()).collect();
    format!("{} failed, first {first:?}", tally.failed.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopped_gracefully_while_its_record_stays_costs_no_call() {
    let mut fleet = Fleet::start().await;
    let stopped = Instant::now();
    fleet.instances[2].take().unwrap().stop().await;
    fleet.carries_on_without("127.0.0.4", stopped, 500).await;
    let tally = fleet.finish().await;
    assert!(tally.failed.is_empty(), "{}", failures(&tally));
    eprintln!("{} calls, none failed", tally.answered.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_while_its_record_stays_costs_only_the_calls_running_on_it() {
    let mut fleet = Fleet::start().await;
    let killed = Instant::now();
    fleet.instances[2].take().unwrap().kill().await;
    fleet.carries_on_without("127.0.0.4", killed, 500).await;
    let tally = fleet.finish().await;
    // At most one call per caller was running on it; each failed as
    // possibly run (the connection was lost), and all within 100 ms.
    assert!(tally.failed.len() <= 8, "{}", failures(&tally));
    for (at, status) in &tally.failed {
        assert!(
            !status.is_never_processed(),
            "a call that never ran failed: {status}"
        );
        let after = at.duration_since(killed);
        assert!(
            after <= Duration::from_millis(100),
            "a call failed {after:?} after the kill: {status}"
        );
    }
    eprintln!(
        "{} calls, {} failed (running on the killed server)",
        tally.answered.len(),
        tally.failed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_removed_and_stopped_at_the_same_moment_fails_no_call_that_never_ran() {
    let mut fleet = Fleet::start().await;
    let removed = Instant::now();
    let stop = fleet.instances[2].take().unwrap().stop();
    let set: [Ipv4Addr; 2] = [ip(2), ip(3)];
    let ((), ()) = tokio::join!(stop, fleet.zone.set(&set));
    fleet.carries_on_without("127.0.0.4", removed, 500).await;
    let tally = fleet.finish().await;
    assert!(tally.failed.is_empty(), "{}", failures(&tally));
    eprintln!("{} calls, none failed", tally.answered.len());
}
