//! Hostile clients against the servers built on weft, frame by frame over
//! real connections: the RPC server (a metadata flood, a message that
//! never ends) and the HTTP server (a header flood). Each fails the
//! offending call or request alone: the next one on the same connection
//! is answered.

#[path = "../../examples/rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

#[path = "../../examples/hyper_server.rs"]
#[allow(dead_code)]
mod hyper_server;

use std::{collections::HashMap, future::IntoFuture, net::SocketAddr, time::Duration};

use crate::support::{
    rpc_frame,
    wire::{self, CallHeader},
};
use prost::Message;
use rpc_server::echo::{EchoReply, EchoRequest};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};
use tower::ServiceBuilder;
use weft::{
    handshake::{Handshake, HandshakeExt, PeerId, Versions},
    mux::{self, Connection},
    transport::TcpConnector,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};

/// A client connection to `addr`, offering `protocols`.
async fn connect(addr: SocketAddr, server: Option<PeerId>, protocols: &[&'static str]) -> Connection {
    let mut dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(protocols.iter().copied()))
        .service(TcpConnector::new());
    let mut request = Handshake::dial(addr);
    if let Some(peer) = server {
        request = request.expect_peer(peer);
    }
    dialer.handshake(request).await.unwrap()
}

// ------------------------------------------------------------------- RPC

const MESSAGE: u8 = 0;
const HEADER: u8 = 1;
const STATUS: u8 = 2;

fn call_header(method: &str, timeout: Option<Duration>, metadata: HashMap<String, String>) -> Vec<u8> {
    let metadata = metadata
        .into_iter()
        .map(|(key, text)| wire::MetadataEntry {
            key,
            value: Some(wire::metadata_entry::Value::Text(text)),
        })
        .collect();
    let header = CallHeader {
        method: method.into(),
        timeout_micros: timeout.map_or(0, |t| t.as_micros() as u64),
        metadata,
        ..CallHeader::default()
    };
    rpc_frame(HEADER, &header.encode_to_vec())
}

/// The frames of a reply: (kind, payload) each.
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some((&kind, rest)) = bytes.split_first() {
        let mut rest = rest;
        let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
        out.push((kind, rest[..len].to_vec()));
        bytes = &rest[len..];
    }
    out
}

/// The code of a reply's STATUS frame.
fn status_code(reply: &[u8]) -> Option<u32> {
    let (_, status) = frames(reply).into_iter().find(|(kind, _)| *kind == STATUS)?;
    Some(wire::Status::decode(&status[..]).unwrap().code)
}

/// A whole unary Say on a new stream of `conn`, by hand; its echo.
pub(crate) async fn say(conn: &Connection, text: &str) -> String {
    try_say(conn, text).await.unwrap()
}

/// [`say`], with what went wrong instead of a panic.
pub(crate) async fn try_say(conn: &Connection, text: &str) -> Result<String, String> {
    let mut stream = conn.open().await.map_err(|err| format!("opening: {err}"))?;
    let mut call = call_header("weft.examples.Echo/Say", None, HashMap::new());
    let request = EchoRequest {
        text: text.into(),
        payload: Vec::new(),
    };
    call.extend(rpc_frame(MESSAGE, &request.encode_to_vec()));
    let sent = async {
        stream.write_all(&call).await?;
        stream.shutdown().await
    };
    sent.await.map_err(|err| format!("sending: {err}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .await
        .map_err(|err| format!("reading the reply: {err}"))?;
    if status_code(&reply) != Some(0) {
        return Err(format!("{:?}", frames(&reply)));
    }
    let (_, message) = frames(&reply)
        .into_iter()
        .find(|(kind, _)| *kind == MESSAGE)
        .ok_or("no reply message")?;
    EchoReply::decode(&message[..])
        .map(|reply| reply.text)
        .map_err(|err| err.to_string())
}

/// The echo service served with `builder`'s settings.
pub(crate) async fn echo_server_with(builder: weft::rpc::server::Builder) -> (SocketAddr, PeerId) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let id = identity.peer_id();
    let server = builder
        .add_service(rpc_server::echo::echo_server::EchoServer::new(rpc_server::Echoer))
        .serve(listener, rpc_server::acceptor(identity));
    tokio::spawn(server);
    (addr, id)
}

async fn rpc_server() -> (SocketAddr, PeerId) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let id = identity.peer_id();
    tokio::spawn(rpc_server::run(listener, identity, std::future::pending()));
    (addr, id)
}

#[tokio::test]
async fn a_metadata_flood_fails_that_call_alone() {
    let (addr, id) = rpc_server().await;
    let conn = connect(addr, Some(id), &[]).await;
    assert_eq!(say(&conn, "before").await, "before");
    // 20,000 metadata entries: some 400 KiB of call header, past the
    // envelope's 64 KiB.
    let metadata: HashMap<String, String> = (0..20_000)
        .map(|n| (format!("key-{n}"), "v".repeat(10)))
        .collect();
    let flood = call_header("weft.examples.Echo/Say", None, metadata);
    assert!(flood.len() > 256 * 1024);
    let before = crate::support::live();
    let mut stream = conn.open().await.unwrap();
    let _ = stream.write_all(&flood).await;
    let _ = stream.shutdown().await;
    let mut reply = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply))
        .await
        .expect("the flooded call ends");
    // Refused on the header's length alone, with the status that says so.
    ended.expect("the server answers");
    assert_eq!(
        status_code(&reply),
        Some(8),
        "RESOURCE_EXHAUSTED: {:?}",
        frames(&reply)
    );
    let (_, status) = frames(&reply).pop().unwrap();
    let message = wire::Status::decode(&status[..]).unwrap().message;
    assert!(message.contains("over the limit of 65536"), "{message}");
    // The connection, and the next call on it, are fine.
    assert_eq!(say(&conn, "after").await, "after");
    // And what the flood made both ends buffer goes back (the read buffers
    // it grew are let go once idle).
    drop((stream, reply));
    let mut retained = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        retained = crate::support::live() - before;
        if retained < 256 * 1024 {
            break;
        }
    }
    assert!(
        retained < 256 * 1024,
        "{retained} bytes still held after the flood"
    );
}

#[tokio::test]
async fn a_message_that_never_ends_holds_its_call_until_its_deadline_and_others_answer() {
    let (addr, id) = rpc_server().await;
    let conn = connect(addr, Some(id), &[]).await;
    assert_eq!(say(&conn, "warm").await, "warm");
    let before = crate::support::live();
    crate::support::reset_largest();
    // A request declared as 1 MiB, of which 1 KiB ever comes, with a
    // deadline of 300 ms.
    let mut stream = conn.open().await.unwrap();
    let mut call = call_header(
        "weft.examples.Echo/Say",
        Some(Duration::from_millis(300)),
        HashMap::new(),
    );
    call.push(MESSAGE);
    prost::encoding::encode_varint(1 << 20, &mut call);
    call.extend_from_slice(&[0u8; 1024]);
    stream.write_all(&call).await.unwrap();
    stream.flush().await.unwrap();
    // Meanwhile, on the same connection, every other call answers.
    for n in 0..100 {
        assert_eq!(say(&conn, &n.to_string()).await, n.to_string());
    }
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply))
        .await
        .expect("the deadline ends the stalled call")
        .unwrap();
    assert_eq!(
        status_code(&reply),
        Some(4),
        "DEADLINE_EXCEEDED: {:?}",
        frames(&reply)
    );
    // Nothing was reserved for the MiB promised, and what the call held
    // goes back.
    let largest = crate::support::largest();
    assert!(largest < 256 * 1024, "an allocation of {largest} bytes");
    drop((stream, reply));
    let retained = settled_heap(before).await;
    assert!(
        retained < 128 * 1024,
        "{retained} bytes still held after the call"
    );
}

#[tokio::test]
async fn a_message_that_never_ends_without_a_deadline_is_dropped_at_the_message_read_timeout() {
    let (addr, id) = echo_server_with(
        weft::rpc::server::Server::builder().message_read_timeout(Some(Duration::from_millis(300))),
    )
    .await;
    let conn = connect(addr, Some(id), &[]).await;
    assert_eq!(say(&conn, "warm").await, "warm");
    // No deadline; a request declared as 1 MiB, of which 1 KiB ever comes.
    let mut stream = conn.open().await.unwrap();
    let mut call = call_header("weft.examples.Echo/Say", None, HashMap::new());
    call.push(MESSAGE);
    prost::encoding::encode_varint(1 << 20, &mut call);
    call.extend_from_slice(&[0u8; 1024]);
    stream.write_all(&call).await.unwrap();
    stream.flush().await.unwrap();
    let start = std::time::Instant::now();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply))
        .await
        .expect("the message read timeout ends the stalled call")
        .unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        status_code(&reply),
        Some(4),
        "DEADLINE_EXCEEDED: {:?}",
        frames(&reply)
    );
    assert_eq!(say(&conn, "after").await, "after");
}

/// What this thread's heap holds above `before` once it stops falling
/// (for up to three seconds: idle connections let their buffers go after
/// a second).
async fn settled_heap(before: isize) -> isize {
    let mut retained = crate::support::live() - before;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        retained = crate::support::live() - before;
        if retained < 64 * 1024 {
            break;
        }
    }
    retained
}

// ------------------------------------------------------------------ HTTP

async fn http_request(conn: &Connection, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = conn.open().await.unwrap();
    stream.write_all(request).await?;
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    // HTTP/1.1 keeps the stream open: read the head and what follows it.
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("a response, or the stream's end, within 5 s")?;
        if n == 0 {
            return Ok(response);
        }
        response.extend_from_slice(&buf[..n]);
        if response.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(response);
        }
    }
}

#[tokio::test]
async fn a_header_flood_gets_its_request_refused_and_the_next_request_answers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let id = identity.peer_id();
    tokio::spawn(hyper_server::run(
        listener,
        Some(identity),
        std::future::pending(),
    ));
    let conn = connect(addr, Some(id), &["http/1.1"]).await;
    let hello = b"GET /hello HTTP/1.1\r\nhost: weft\r\n\r\n";
    let ok = http_request(&conn, hello).await.unwrap();
    assert!(
        ok.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&ok)
    );
    let before = crate::support::live();
    // 10,000 headers.
    let mut flood = b"GET /hello HTTP/1.1\r\nhost: weft\r\n".to_vec();
    for n in 0..10_000 {
        flood.extend_from_slice(format!("x-flood-{n}: {n}\r\n").as_bytes());
    }
    flood.extend_from_slice(b"\r\n");
    let refused = http_request(&conn, &flood).await.unwrap();
    assert!(
        refused.starts_with(b"HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    let during = crate::support::live() - before;
    let ok = http_request(&conn, hello).await.unwrap();
    assert!(
        ok.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&ok)
    );
    // What the flood made the server buffer (hyper's read buffer, up to
    // its limit, and ours) goes back.
    drop((flood, refused, ok));
    let retained = settled_heap(before).await;
    println!("held {during} bytes after the flood, {retained} once settled");
    assert!(
        retained < 128 * 1024,
        "{retained} bytes still held after the flood"
    );
}

#[tokio::test]
async fn a_request_head_that_never_ends_has_its_stream_closed_at_the_header_read_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let id = identity.peer_id();
    let server = weft::http::serve(
        listener,
        hyper_server::acceptor(Some(identity)),
        tower::service_fn(hyper_server::app),
    )
    .header_read_timeout(Duration::from_millis(300));
    tokio::spawn(server.into_future());
    let conn = connect(addr, Some(id), &["http/1.1"]).await;
    // Half a head, then nothing.
    let mut stalled = conn.open().await.unwrap();
    stalled
        .write_all(b"GET /hello HTTP/1.1\r\nhost: weft\r\n")
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let mut sink = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), stalled.read_to_end(&mut sink)).await;
    let waited = start.elapsed();
    assert!(ended.is_ok(), "the stalled stream still open after 5 s");
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}, before the timeout"
    );
    // Another request on the same connection is answered.
    let hello = b"GET /hello HTTP/1.1\r\nhost: weft\r\n\r\n";
    let ok = http_request(&conn, hello).await.unwrap();
    assert!(
        ok.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&ok)
    );
}

// ------------------------------------------------------------------ pool

/// A server whose first connection floods the pool's connection with pings
/// and never reads: that connection ends with a go-away (EXCESSIVE_LOAD),
/// and the pool's next request dials a new one, served honestly.
#[tokio::test]
async fn a_server_flooding_a_pooled_connection_loses_it_and_the_pool_dials_anew() {
    use crate::support::{conn_stack, echo_server, ident, mux_frame, stack};
    use tower::ServiceExt;
    use weft::{
        handshake::CipherSuite,
        pool::{Endpoint, Pool},
        StreamLimitLayer,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (flooded, flooder_leaves) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        // The first connection: a channel speaking raw mux frames.
        let (tcp, _) = listener.accept().await.unwrap();
        let mut raw = stack(ident(2), &[CipherSuite::Aes256Gcm])
            .accept_transport(tcp)
            .await
            .unwrap();
        let pings: Vec<u8> = (0..20_000u64)
            .flat_map(|n| mux_frame(7, 0, 0, &n.to_be_bytes()))
            .collect();
        let _ = raw.write_all(&pings).await;
        let _ = raw.flush().await;
        // Once its connection is gone, the flooder lets go of its end
        // (what it holds is not the pool's).
        let _ = flooder_leaves.await;
        drop((raw, pings));
        // Then honest ones.
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut acceptor = conn_stack(
                ident(2),
                CipherSuite::Aes256Gcm,
                StreamLimitLayer::new(10),
                mux::Builder::new(),
            );
            if let Ok(conn) = acceptor.accept_transport(tcp).await {
                echo_server(conn);
            }
        }
    });
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()).suites([CipherSuite::Aes256Gcm]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    let before = crate::support::live();
    let first = pool.connection(&endpoint).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), first.closed())
        .await
        .expect("the flooded connection ends");
    assert_eq!(ended.close_code(), weft::CloseCode::EXCESSIVE_LOAD, "{ended:?}");
    let _ = flooded.send(());
    // The next request goes over a new connection.
    let mut stream = tokio::time::timeout(Duration::from_secs(5), pool.clone().oneshot(endpoint.clone()))
        .await
        .expect("the pool dials anew")
        .unwrap();
    stream.write_all(b"after").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut back = Vec::new();
    stream.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"after");
    assert_eq!(pool.stats().dials, 2);
    // The flooded connection's memory is gone: the pool holds its new
    // connection alone (both ends of it, on this thread), and the flooding
    // server's task is done with its pings.
    drop((stream, back, first, ended));
    let retained = settled_heap(before).await;
    println!("{retained} bytes held after the flood, by the new connection");
    assert!(retained < 256 * 1024, "{retained} bytes held after the flood");
}

/// A request flood on one connection: calls opened as fast as the
/// connection allows, each asking for a 64 KiB reply that is never read.
/// The replies fill the flooder's receive window, the handlers then wait
/// on flow control holding their streams, and the stream limit stops the
/// flood: it stalls, while another connection's calls answer throughout.
#[tokio::test]
async fn a_request_flood_on_one_connection_stalls_at_the_limits() {
    use std::sync::{
        atomic::{AtomicUsize, Ordering::Relaxed},
        Arc,
    };
    let (addr, id) = rpc_server().await;
    let honest = connect(addr, Some(id), &[]).await;
    assert_eq!(say(&honest, "warm").await, "warm");
    let before = crate::support::live();
    let flooder = connect(addr, Some(id), &[]).await;
    let opened = Arc::new(AtomicUsize::new(0));
    let flood = {
        let opened = opened.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            for n in 0..10_000u32 {
                let Ok(mut stream) = flooder.open().await else {
                    break;
                };
                let mut call = call_header("weft.examples.Echo/Say", None, HashMap::new());
                let request = EchoRequest {
                    text: n.to_string(),
                    payload: vec![0x5a; 64 * 1024],
                };
                call.extend(rpc_frame(MESSAGE, &request.encode_to_vec()));
                let _ = stream.write_all(&call).await;
                let _ = stream.shutdown().await;
                opened.fetch_add(1, Relaxed);
                held.push(stream); // never read
            }
            held
        })
    };
    for n in 0..100 {
        assert_eq!(say(&honest, &n.to_string()).await, n.to_string());
    }
    // The flood stalls.
    let mut last = opened.load(Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = opened.load(Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    // At most the stream limit waits on the server, plus the calls whose
    // replies fit the 4 MiB window the flooder never returns.
    let bound = rpc_server::MAX_STREAMS as usize + 64 + 8;
    println!("the flood stalled at {last} calls");
    assert!(last <= bound, "{last} calls opened, past {bound}");
    assert_eq!(say(&honest, "still").await, "still");
    let during = crate::support::live() - before;
    // The flooder goes (its connection with it): what the server held for
    // it, some 70 MB of replies waiting on flow control, comes back.
    flood.abort();
    let mut retained = during;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        retained = crate::support::live() - before;
        if retained < 512 * 1024 {
            break;
        }
    }
    println!("held {during} bytes during the flood, {retained} after");
    assert!(
        retained < 512 * 1024,
        "{retained} bytes still held after the flood"
    );
    assert_eq!(say(&honest, "after").await, "after");
}

/// What a call header of `metadata` makes the server hold while its
/// handler runs (`None` if it never ran), measured by the thread's heap
/// (the server runs on this thread's runtime), above what it held before;
/// and the call's status code.
async fn held_by_header(metadata: HashMap<String, String>) -> (Option<isize>, u32) {
    held_by_header_frame(call_header("weft.examples.Echo/Say", None, metadata)).await
}

/// [`held_by_header`] for a HEADER frame made by hand.
async fn held_by_header_frame(header: Vec<u8>) -> (Option<isize>, u32) {
    use std::sync::{
        atomic::{AtomicIsize, Ordering},
        Arc,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let identity = Identity::generate();
    let id = identity.peer_id();
    let during = Arc::new(AtomicIsize::new(isize::MIN));
    let seen = during.clone();
    let handler = tower::layer::layer_fn(move |_router| {
        let seen = seen.clone();
        tower::service_fn(move |call: weft::rpc::server::Call| {
            seen.store(crate::support::live(), Ordering::SeqCst);
            drop(call);
            async {
                Err::<weft::rpc::server::Reply, weft::rpc::Status>(weft::rpc::Status::unavailable("measured"))
            }
        })
    });
    tokio::spawn(
        weft::rpc::server::Server::builder()
            .layer(handler)
            .serve(listener, rpc_server::acceptor(identity)),
    );
    let conn = connect(addr, Some(id), &[]).await;
    // Warm: the connection's buffers as large as the header makes them.
    for round in 0..2 {
        let before = crate::support::live();
        let mut stream = conn.open().await.unwrap();
        stream.write_all(&header).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.unwrap();
        if round == 1 {
            let during = during.load(Ordering::SeqCst);
            return (
                (during != isize::MIN).then(|| during - before),
                status_code(&reply).unwrap(),
            );
        }
    }
    unreachable!()
}

/// A 64 KiB call header of 6,000 tiny metadata entries decoded to about
/// 1-2 MiB of maps and strings; past the entry limit it is refused before
/// it is decoded, and one of as many bytes in a single entry holds little
/// more than its bytes.
#[tokio::test]
async fn a_call_header_of_thousands_of_tiny_entries_is_refused_before_it_is_decoded() {
    let tiny: HashMap<String, String> = (0..6_000).map(|n| (format!("{n:x}"), String::new())).collect();
    let one: HashMap<String, String> = [("k".to_owned(), "v".repeat(40_000))].into();
    let at_limit: HashMap<String, String> = (0..256).map(|n| (format!("{n:x}"), "v".repeat(150))).collect();
    let (held_tiny, code_tiny) = held_by_header(tiny).await;
    assert_eq!(
        (held_tiny, code_tiny),
        (None, 8),
        "RESOURCE_EXHAUSTED, before the handler"
    );
    let (Some(held_one), 14) = held_by_header(one).await else {
        panic!("the handler runs");
    };
    let (Some(held_limit), 14) = held_by_header(at_limit).await else {
        panic!("the handler runs");
    };
    println!("one entry of 40 kB: {held_one} bytes held; 256 of 150 bytes: {held_limit}");
    // At the limit, the decoded entries cost little more than their bytes.
    assert!(
        held_limit < held_one + 64 * 1024,
        "256 entries held {held_limit} bytes, one entry of 40 kB {held_one}"
    );
}

/// The same flood through the call header's `accept_encoding` (the
/// encodings the client reads replies in): 20,000 one-byte names fit in
/// 60 kB and decoded to a megabyte of `String`s held for the call. They
/// are counted before the header is decoded: past 16, refused.
#[tokio::test]
async fn a_call_header_of_thousands_of_encoding_names_is_refused_before_it_is_decoded() {
    let header = |names: usize| {
        let header = CallHeader {
            method: "weft.examples.Echo/Say".into(),
            accept_encoding: (0..names)
                .map(|n| ((b'a' + (n % 26) as u8) as char).to_string())
                .collect(),
            ..CallHeader::default()
        };
        rpc_frame(HEADER, &header.encode_to_vec())
    };
    let flood = header(20_000);
    assert!(flood.len() < 64 * 1024, "within the envelope limit");
    assert_eq!(
        held_by_header_frame(flood).await,
        (None, 8),
        "RESOURCE_EXHAUSTED, before the handler"
    );
    let (Some(_), 14) = held_by_header_frame(header(16)).await else {
        panic!("16 names: the handler runs");
    };
}

/// A request message that does not decode (a string field that is not
/// UTF-8): `INTERNAL`, saying so, without prost's text, which would name
/// the schema's types and fields to a stranger.
#[tokio::test]
async fn an_undecodable_request_gets_internal_without_the_decoders_detail() {
    let (addr, id) = rpc_server().await;
    let conn = connect(addr, Some(id), &[]).await;
    let mut stream = conn.open().await.unwrap();
    let mut call = call_header("weft.examples.Echo/Say", None, HashMap::new());
    // Field 1 (text), length 2, not UTF-8.
    call.extend(rpc_frame(MESSAGE, &[0x0a, 0x02, 0xff, 0xfe]));
    stream.write_all(&call).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    assert_eq!(status_code(&reply), Some(13), "INTERNAL: {:?}", frames(&reply));
    let (_, status) = frames(&reply).pop().unwrap();
    let message = wire::Status::decode(&status[..]).unwrap().message;
    assert_eq!(message, "undecodable request message");
    assert_eq!(say(&conn, "after").await, "after");
}

/// A call whose header never arrives whole holds nothing past the header
/// timeout: the server resets the stream with `PROTOCOL_ERROR`.
#[tokio::test]
async fn a_call_header_that_never_arrives_is_reset_at_the_header_timeout() {
    let (addr, id) =
        echo_server_with(weft::rpc::server::Server::builder().header_timeout(Duration::from_millis(300)))
            .await;
    let conn = connect(addr, Some(id), &[]).await;
    let mut stream = conn.open().await.unwrap();
    // The HEADER frame's kind and a length, and nothing of its payload.
    stream.write_all(&[HEADER, 0x40]).await.unwrap();
    stream.flush().await.unwrap();
    let start = std::time::Instant::now();
    let mut sink = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut sink))
        .await
        .expect("the header timeout ends the stream");
    let err = ended.unwrap_err();
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<weft::Error>());
    assert!(
        inner.is_some_and(
            |e| e.kind() == weft::ErrorKind::Reset && e.close_code() == weft::CloseCode::PROTOCOL_ERROR
        ),
        "{err:?}"
    );
    assert!(start.elapsed() >= Duration::from_millis(250));
    assert_eq!(say(&conn, "after").await, "after");
}
