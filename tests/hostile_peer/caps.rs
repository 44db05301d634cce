//! A server at its connection cap makes room instead of locking
//! newcomers out: kept-alive idle connections filling every place from
//! 40 networks, then a 41st network is served; bare TCP connects that
//! never handshake filling every place, then an honest client is served
//! as soon as they have been pending half a second (not at their 10 s
//! handshake deadline). Clients connect from 127.0.N.1, each N a network
//! of its own (Linux routes all of 127/8 to the loopback).

use std::{net::SocketAddr, time::Duration};

use tokio::net::{TcpSocket, TcpStream};
use weft::{
    handshake::{Handshake, HandshakeExt, PeerId},
    mux::Connection,
    rpc::server::Server,
    transport::ExistingTransport,
};

use super::servers::{echo_server_with, say, try_say};
use crate::support::{ident, mux_stack};

/// A TCP connection to `server` from 127.0.`net`.1.
async fn tcp_from(net: u8, server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, net, 1], 0))).unwrap();
    socket.connect(server).await.unwrap()
}

/// A weft connection to `server` from 127.0.`net`.1.
async fn dial_from(net: u8, server: SocketAddr, key: PeerId) -> Result<Connection, weft::Error> {
    let tcp = tcp_from(net, server).await;
    let mut dialer = mux_stack(ident(1), &[], ExistingTransport::new());
    dialer.handshake(Handshake::dial(tcp).expect_peer(key)).await
}

#[tokio::test]
async fn at_the_cap_a_new_network_is_served_by_closing_an_idle_connection_of_the_heaviest() {
    let (addr, key) = echo_server_with(Server::builder().max_connections(80)).await;
    // 40 networks, two kept-alive connections each, idle: every place.
    let mut held = Vec::new();
    for net in 1..=40 {
        for _ in 0..2 {
            let conn = dial_from(net, addr, key).await.unwrap();
            assert_eq!(say(&conn, "hi").await, "hi");
            held.push(conn);
        }
    }
    // A 41st network gets a place, and is answered.
    let newcomer = tokio::time::timeout(Duration::from_secs(5), dial_from(41, addr, key))
        .await
        .expect("served at once")
        .expect("not refused at the cap");
    assert_eq!(say(&newcomer, "new").await, "new");
    // One idle connection of the others was closed to make room.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !held.iter().any(Connection::is_closed) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("an idle connection was closed for the newcomer");
    assert_eq!(held.iter().filter(|conn| conn.is_closed()).count(), 1);
}

#[tokio::test]
async fn bare_connects_filling_the_cap_give_way_to_an_honest_client_within_a_second() {
    let (addr, key) = echo_server_with(Server::builder().max_connections(100)).await;
    // 100 TCP connections from 100 networks that never send a byte.
    let mut bare = Vec::new();
    for net in 1..=100 {
        bare.push(tcp_from(net, addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // An honest client soon after: its handshake takes a place once the
    // oldest bare connection has been pending half a second, long before
    // the 10 s handshake deadline.
    let started = std::time::Instant::now();
    let honest = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match dial_from(200, addr, key).await {
                Ok(conn) => return conn,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("the honest client is served within its deadline");
    assert_eq!(say(&honest, "honest").await, "honest");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(bare);
}

#[tokio::test]
async fn a_connection_with_no_stream_for_the_idle_limit_is_closed_and_a_busy_one_is_not() {
    let idle = Duration::from_millis(300);
    let (addr, key) = echo_server_with(Server::builder().close_idle_after(Some(idle))).await;
    let quiet = dial_from(1, addr, key).await.unwrap();
    let busy = dial_from(1, addr, key).await.unwrap();
    assert_eq!(say(&quiet, "once").await, "once");
    // The busy one calls every 100 ms for a second: never idle that long.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(1) {
        assert_eq!(say(&busy, "again").await, "again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !busy.is_closed() && !busy.is_going_away(),
        "a used connection stays"
    );
    // The quiet one went away (its pings do not count as use).
    tokio::time::timeout(Duration::from_secs(5), quiet.closed())
        .await
        .expect("the quiet connection is closed after its idle limit");
    // The busy one, once it stops, too.
    tokio::time::timeout(Duration::from_secs(5), busy.closed())
        .await
        .expect("closed once idle");
}

/// A connection closed to make room for a newcomer may be just starting
/// a call: its peer opened a stream the server had not seen when it chose
/// the connection as idle. The connection goes away (the peer learns the
/// last stream taken) instead of closing at once, so that call is served.
/// A fleet's clients meet this at the per-address cap: a pod behind one
/// NAT address whose new connection evicts its own idle one.
#[tokio::test]
async fn a_call_that_races_its_idle_connections_eviction_is_served() {
    let (addr, key) = echo_server_with(Server::builder().max_connections_per_address(1)).await;
    for round in 0..20 {
        let conn = dial_from(1, addr, key).await.unwrap();
        // The newcomer from the same address takes the one place: the
        // idle connection gives way as the call on it begins.
        let newcomer = tokio::spawn(dial_from(1, addr, key));
        tokio::task::yield_now().await;
        let answer = tokio::time::timeout(Duration::from_secs(5), try_say(&conn, "racing"))
            .await
            .expect("the call ends");
        assert_eq!(answer.as_deref(), Ok("racing"), "round {round}");
        let newcomer = newcomer.await.unwrap().expect("the newcomer is served");
        assert_eq!(say(&newcomer, "next").await, "next");
    }
}
