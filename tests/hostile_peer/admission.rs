//! Admission control over loopback TCP: slowloris peers stalling
//! mid-handshake, from one address and from many, and a flood of canned
//! Setups. Attackers connect from 127.0.0.2 and up (Linux routes all of
//! 127/8 to the loopback), honest peers from 127.0.0.1.

use std::{
    net::{IpAddr, SocketAddr},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::support::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpSocket, TcpStream},
};
use tower::{Layer, ServiceExt};
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt},
    mux::Builder,
    stack::Admission,
    AdmissionLayer, Error, Refusal, StreamLimitLayer,
};

#[derive(Default)]
struct Counts {
    connected: AtomicUsize,
    refused: AtomicUsize,
    evicted: AtomicUsize,
    failed: AtomicUsize,
}

/// An echo server behind `layer`; its address, its counts and its
/// admission service (to ask how many handshakes are pending).
async fn server(layer: AdmissionLayer) -> (SocketAddr, Arc<Counts>, Admission<ConnStack>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stack = conn_stack(
        ident(2),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        Builder::new(),
    );
    let acceptor = layer.layer(stack);
    let counts = Arc::new(Counts::default());
    let (service, counts_) = (acceptor.clone(), counts.clone());
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = listener.accept().await.unwrap();
            let (acceptor, counts) = (acceptor.clone(), counts_.clone());
            tokio::spawn(async move {
                match acceptor
                    .oneshot(Handshake::accept(tcp).with_peer_address(peer))
                    .await
                {
                    Ok(conn) => {
                        counts.connected.fetch_add(1, Ordering::Relaxed);
                        let _ = echo_server(conn).await;
                    }
                    Err(err) => match err.refusal() {
                        Some(Refusal::Evicted(_)) => {
                            counts.evicted.fetch_add(1, Ordering::Relaxed);
                        }
                        Some(_) => {
                            counts.refused.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {
                            counts.failed.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                }
            });
        }
    });
    (addr, counts, service)
}

/// A TCP connection to `server` from 127.0.0.`last`.
async fn connect_from(last: u8, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(IpAddr::from([127, 0, 0, last]), 0))
        .unwrap();
    socket.connect(server).await.unwrap()
}

/// An honest peer's handshake from 127.0.0.`last` to `server`.
async fn dial_from(last: u8, server: SocketAddr) -> Result<weft::mux::Connection, Error> {
    let tcp = connect_from(last, server).await;
    let mut dialer = conn_stack(
        ident(1),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        Builder::new(),
    );
    dialer.dial(tcp).await
}

/// An honest peer from 127.0.0.1 connects and gets an echo (ten seconds
/// bound a hang; what is asserted is that it gets through).
async fn honest_peer(server: SocketAddr) {
    let connected = tokio::time::timeout(Duration::from_secs(10), async {
        let tcp = TcpStream::connect(server).await.unwrap();
        let mut dialer = conn_stack(
            ident(1),
            CipherSuite::Aes256Gcm,
            StreamLimitLayer::new(10),
            Builder::new(),
        );
        let conn = dialer.dial(tcp).await.expect("the honest peer is admitted");
        assert_eq!(echo_once(&conn, b"honest").await, b"honest");
    })
    .await;
    connected.expect("an honest peer connects");
}

/// How many of `connections` the server has closed: read to their end,
/// or reset, all read at once for two seconds (those still open then are
/// the ones the server keeps; a closed one ends at once).
async fn count_closed(connections: &mut [TcpStream]) -> usize {
    let reads = connections.iter_mut().map(|tcp| async move {
        let mut sink = Vec::new();
        let end = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut sink)).await;
        usize::from(end.is_ok())
    });
    futures_util::future::join_all(reads).await.into_iter().sum()
}

/// Waits until `f` holds (five seconds at most).
async fn until(f: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the condition holds within five seconds");
}

#[tokio::test]
async fn slowloris_from_one_address_holds_its_share_and_honest_peers_still_connect() {
    let layer = AdmissionLayer::new()
        .max_pending_per_address(16)
        .max_waiting_per_address(64)
        .max_wait(Duration::from_secs(1));
    let (addr, counts, admission) = server(layer).await;
    let before = live();
    // 200 connections from one address that never say a word.
    let mut stalled = Vec::new();
    for _ in 0..200 {
        stalled.push(connect_from(2, addr).await);
    }
    // 16 pending, 64 waiting for a place, the rest turned away at once;
    // the waiting ones too once they have waited a second.
    until(|| counts.refused.load(Ordering::Relaxed) == 120).await;
    assert_eq!((admission.pending(), admission.waiting()), (16, 64));
    until(|| counts.refused.load(Ordering::Relaxed) == 184).await;
    assert_eq!(admission.pending(), 16, "the address's share, no more");
    assert_eq!(admission.waiting(), 0);
    // What the attack holds: 16 pending handshakes (each a task, its Setup
    // and a 4 KiB read buffer at most) and the test's own 200 sockets.
    let held = live() - before;
    println!("200 stalled connections hold {held} bytes");
    assert!(held < 16 * 16 * 1024 + 200 * 1024, "{held} bytes held");
    honest_peer(addr).await;
    assert_eq!(counts.connected.load(Ordering::Relaxed), 1);
    // Those turned away see their connection close at once.
    let closed = count_closed(&mut stalled).await;
    assert_eq!(closed, 184);
}

#[tokio::test]
async fn slowloris_from_many_addresses_gives_way_to_new_peers() {
    // Long enough that no stalled handshake gives way for its age while
    // the test runs, however slow the machine: what makes room is the
    // sources' shares.
    let layer = AdmissionLayer::new()
        .max_pending(32)
        .evict_after(Duration::from_secs(60));
    let (addr, counts, admission) = server(layer).await;
    let before = live();
    // 32 addresses, two stalled handshakes each, half a Setup header sent.
    let mut stalled = Vec::new();
    for last in 2..34u8 {
        for _ in 0..2 {
            let mut tcp = connect_from(last, addr).await;
            tcp.write_all(&[0x01, 0x00]).await.unwrap();
            stalled.push(tcp);
        }
    }
    let turned_away = || counts.refused.load(Ordering::Relaxed) + counts.evicted.load(Ordering::Relaxed);
    until(|| admission.pending() == 32 && turned_away() == 32).await;
    // The first 16 addresses filled the table with two each; each of the
    // next 16 evicted one of theirs to get its first in (it had two fewer).
    assert!(
        counts.evicted.load(Ordering::Relaxed) >= 16,
        "{} evicted",
        counts.evicted.load(Ordering::Relaxed)
    );
    // 32 pending handshakes (a task, its keys, two bytes and a 4 KiB read
    // buffer at most each: some 13 KB measured) and the test's own 64
    // sockets.
    let held = live() - before;
    println!("64 stalled connections hold {held} bytes");
    assert!(held < 32 * 24 * 1024 + 64 * 2048, "{held} bytes held");
    // An honest peer, within its share of the acceptor's rate, pushes the
    // oldest out at once, and the room it leaves when it is through serves
    // the next.
    for _ in 0..5 {
        honest_peer(addr).await;
    }
    assert_eq!(counts.connected.load(Ordering::Relaxed), 5);
    assert_eq!(turned_away(), 33);
    assert_eq!(admission.pending(), 31, "the stalled ones left");
    // Those turned away had their connection closed.
    let closed = count_closed(&mut stalled).await;
    assert_eq!(closed, 32 + 1, "the 32 turned away and the one evicted");
}

#[tokio::test]
async fn a_flood_of_canned_setups_is_held_to_the_rate_and_honest_peers_still_connect() {
    let layer = AdmissionLayer::new()
        .handshakes_per_second_per_address(50)
        .max_pending_per_address(1000);
    let (addr, counts, admission) = server(layer).await;
    let before = live();
    // Canned Setups, no crypto on the attacker's side: each would cost the
    // server a key agreement and a signature.
    let setup = aes_setup_frame(&{
        let mut key = [0u8; 32];
        key[0] = 9;
        key
    });
    let start = Instant::now();
    let flood = tokio::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..1000 {
            let mut tcp = connect_from(2, addr).await;
            let _ = tcp.write_all(&setup).await;
            held.push(tcp);
        }
        held
    });
    honest_peer(addr).await;
    let held = flood.await.unwrap();
    // Each of the flood's handshakes was turned away, or is stuck waiting
    // for a proof that never comes (or failed).
    let settled = || {
        counts.refused.load(Ordering::Relaxed) + admission.pending() + counts.failed.load(Ordering::Relaxed)
    };
    until(|| settled() == 1000).await;
    let elapsed = start.elapsed();
    let admitted = 1000 - counts.refused.load(Ordering::Relaxed);
    // A burst of 50, then 50 a second.
    let bound = 50 + (50.0 * elapsed.as_secs_f64()).ceil() as usize;
    assert!(
        admitted <= bound,
        "{admitted} of the flood admitted in {elapsed:?}, bound {bound}"
    );
    assert!(admitted >= 50, "the burst is admitted: {admitted}");
    // What the flood holds: the handshakes admitted, each waiting for a
    // proof (a task, its Setup, its keys and its buffers), and the test's
    // own 1,000 sockets; those refused hold nothing.
    let during = live() - before;
    println!("{admitted} admitted of 1,000 canned Setups hold {during} bytes");
    assert!(
        during < admitted as isize * 24 * 1024 + 1000 * 1024,
        "{during} bytes held"
    );
    drop(held);
}

#[tokio::test]
async fn connections_past_the_servers_limits_are_refused_saying_why() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = conn_stack(
        ident(2),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        Builder::new(),
    );
    // Each request is held by its handler (counted as it begins), so its
    // connection is busy for the whole test.
    let begun = Arc::new(AtomicUsize::new(0));
    let counted = begun.clone();
    let service = tower::service_fn(move |_: http::Request<hyper::body::Incoming>| {
        counted.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<
            Result<http::Response<http_body_util::Empty<bytes::Bytes>>, std::convert::Infallible>,
        >()
    });
    let server = weft::http::serve(listener, acceptor, service)
        .max_connections(3)
        .max_connections_per_address(2);
    tokio::spawn(std::future::IntoFuture::into_future(server));
    let dial = |last: u8| dial_from(last, addr);
    let refused = |result: Result<weft::mux::Connection, Error>| match result {
        Err(err) if is_unauthenticated_close(&err) => {
            assert_eq!(err.close_code(), weft::CloseCode::EXCESSIVE_LOAD);
            err.reason().expect("a close has a reason").to_owned()
        }
        Err(other) => panic!("refused with {other}"),
        Ok(_) => panic!("a connection past the limit was taken"),
    };
    // Each connection busy with a request its handler holds: a full cap
    // closes only idle connections to make room.
    let busy = |conn: weft::mux::Connection| {
        let begun = begun.clone();
        async move {
            let before = begun.load(Ordering::SeqCst);
            let mut stream = conn.open().await.unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut stream, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            tokio::io::AsyncWriteExt::flush(&mut stream).await.unwrap();
            until(|| begun.load(Ordering::SeqCst) > before).await;
            (conn, stream)
        }
    };
    let first = busy(dial(2).await.unwrap()).await;
    let _second = busy(dial(2).await.unwrap()).await;
    let reason = refused(dial(2).await);
    assert!(reason.contains("2 connections from 127.0.0.2"), "{reason}");
    let _third = busy(dial(3).await.unwrap()).await;
    let reason = refused(dial(4).await);
    assert!(reason.contains("3 connections open"), "{reason}");
    // One closes: its place is free again.
    drop(first);
    tokio::time::timeout(Duration::from_secs(5), async {
        while dial(4).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a place is free once a connection closed");
}

#[tokio::test]
async fn a_burst_of_64_dials_from_one_address_is_served_in_turn_not_dropped() {
    // Pods behind one NAT address reconnecting at once, or one client
    // dialing many connections: past the 16 pending per address, the rest
    // wait their turn.
    let (addr, counts, _admission) = server(AdmissionLayer::new()).await;
    let dials = (0..64).map(|_| honest_peer(addr));
    futures_util::future::join_all(dials).await;
    assert_eq!(counts.connected.load(Ordering::Relaxed), 64);
    assert_eq!(counts.refused.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_handshake_turned_away_is_told_why_not_dropped() {
    // One pending handshake per address, none waiting: the second from the
    // same address is turned away, and its dialer reads why (a close in
    // the clear, EXCESSIVE_LOAD) rather than a reset it could not tell
    // from a broken network.
    let layer = AdmissionLayer::new()
        .max_pending_per_address(1)
        .max_waiting_per_address(0);
    let (addr, counts, _admission) = server(layer).await;
    let _stalled = connect_from(2, addr).await;
    until(|| _admission.pending() == 1).await;
    let tcp = connect_from(2, addr).await;
    let mut dialer = conn_stack(
        ident(1),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        Builder::new(),
    );
    let err = dialer.dial(tcp).await.expect_err("turned away");
    assert!(is_unauthenticated_close(&err), "{err}");
    assert_eq!(err.close_code(), weft::CloseCode::EXCESSIVE_LOAD);
    let reason = err.reason().expect("a close has a reason");
    assert!(reason.contains("handshakes from 127.0.0.2 pending"), "{reason}");
    assert_eq!(counts.refused.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_server_admits_handshakes_by_its_own_setting_over_the_standard_acceptor() {
    // The admission is the server's, set on its builder: the standard
    // acceptor carries none, and the server's limits hold over it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = weft::server::serve(listener, weft::acceptor(ident(2)), |_stream| async {}).admission(
        AdmissionLayer::new()
            .max_pending_per_address(1)
            .max_waiting_per_address(0),
    );
    tokio::spawn(std::future::IntoFuture::into_future(server));
    let dial = |last: u8| dial_from(last, addr);
    // A handshake from 127.0.0.2 that never sends a byte holds its
    // address's one place (once the server has taken it: until then a
    // dial from there goes through, and is let go).
    let _stalled = connect_from(2, addr).await;
    let err = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match dial(2).await {
                Ok(conn) => drop(conn),
                Err(err) => break err,
            }
        }
    })
    .await
    .expect("turned away within five seconds");
    assert!(is_unauthenticated_close(&err), "{err}");
    assert_eq!(err.close_code(), weft::CloseCode::EXCESSIVE_LOAD);
    let reason = err.reason().expect("a close has a reason");
    assert!(reason.contains("handshakes from 127.0.0.2 pending"), "{reason}");
    // Another address has its own place.
    dial(3).await.expect("another address is admitted");
}
