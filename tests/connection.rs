//! What a pool, a retry policy and a server loop ask of a `Connection`:
//! its state without awaiting, errors that tell endings apart, and the
//! bounds and endings a hostile or departing peer meets.

mod support;

use std::{
    future::poll_fn,
    io,
    pin::Pin,
    sync::{atomic::Ordering, Arc},
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures_util::StreamExt;
use support::{
    counted::{Counted, Counts},
    *,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, Versions},
    mux::{Builder, Connection},
    transport::{ExistingTransport, TcpAcceptor},
    CloseCode, Error, ErrorKind, NegotiateLayer, Side, StreamLimitLayer,
};

/// The most a channel reads from its transport at once (docs/SECURITY.md:
/// the read buffer's cap), 128 KiB.
const READ_CHUNK_MAX: usize = 128 * 1024;

/// Counts the heap this thread holds (support::ThreadHeap): a test on a
/// current-thread runtime sees what its connections retain.
#[global_allocator]
static GLOBAL: ThreadHeap = ThreadHeap;

fn limits(dialer: u32, acceptor: u32) -> (StreamLimitLayer, StreamLimitLayer) {
    (StreamLimitLayer::new(dialer), StreamLimitLayer::new(acceptor))
}

fn builders() -> (Builder, Builder) {
    (Builder::new(), Builder::new())
}

async fn pair(acceptor_limit: u32) -> (Connection, Connection) {
    conn_pair_duplex(CipherSuite::Aes256Gcm, limits(10, acceptor_limit), builders()).await
}

/// Yields until `done` holds, at most about two seconds.
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(done(), "timed out waiting");
}

// ----------------------------------------------------------------- state

#[tokio::test]
async fn a_request_and_its_end_leave_in_one_record_and_an_asyncwrite_at_once() {
    let (client, server) = pair(10).await;
    let records = |c: &Connection| c.stats().records_sent;
    // Warm up: the first frames carry the first ping.
    let mut s = client.open().await.unwrap();
    s.send(Bytes::from_static(b"warm")).await.unwrap();
    s.finish().unwrap();
    let mut t = server.accept().await.unwrap().unwrap();
    assert_eq!(t.recv().await.unwrap().unwrap(), &b"warm"[..]);
    until(|| server.stats().records_sent > 0).await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    let before = records(&client);
    let mut s = client.open().await.unwrap();
    s.send(Bytes::from_static(b"request")).await.unwrap();
    s.finish().unwrap();
    assert_eq!(
        records(&client),
        before + 1,
        "data and FIN in one record, sent at the finish"
    );
    let mut t = server.accept().await.unwrap().unwrap();
    let mut got = Vec::new();
    t.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"request");
    // A write through AsyncWrite goes at once, before any flush or yield.
    let before = records(&server);
    t.write_all(b"reply").await.unwrap();
    assert_eq!(records(&server), before + 1);
    // And a send alone goes when the task yields.
    let before = records(&server);
    t.send(Bytes::from_static(b" and more")).await.unwrap();
    until(|| records(&server) > before).await;
    t.shutdown().await.unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"reply and more");
}

#[tokio::test(start_paused = true)]
async fn a_busy_connection_keeps_its_buffers_and_an_idle_one_lets_them_go() {
    let (client, server) = pair(10).await;
    let echo = echo_server(server.clone());
    let buffers = || (client.stats().io_buffers, server.stats().io_buffers);
    // Message after message, a few hundred milliseconds apart: reused.
    for _ in 0..8 {
        assert_eq!(echo_once(&client, b"ping").await, b"ping");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (c, s) = buffers();
        assert!(c > 0 && s > 0, "{c} {s}");
    }
    // A second and a bit without a record either way: both let them go.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(buffers(), (0, 0));
    // And take them again when traffic resumes.
    assert_eq!(echo_once(&client, b"again").await, b"again");
    let (c, s) = buffers();
    assert!(c > 0 && s > 0, "{c} {s}");
    echo.abort();
}

#[tokio::test]
async fn a_connection_answers_its_state_without_awaiting() {
    let (client, server) = pair(3).await;
    assert!(!client.is_closed() && client.close_reason().is_none());
    echo_server(server.clone());
    assert!(!client.is_going_away());
    assert_eq!(client.available_streams(), 3, "the server's limit");
    let mut first = client.try_open().unwrap().expect("credit");
    let _second = client.open().await.unwrap();
    assert_eq!(client.available_streams(), 1);
    let _third = client.try_open().unwrap().expect("credit");
    assert_eq!(client.available_streams(), 0);
    assert!(
        client.try_open().unwrap().is_none(),
        "no credit: no stream, no wait"
    );
    // In flight on the server, so its go-away drains rather than closing.
    first.write_all(b"in flight").await.unwrap();
    let mut echoed = [0u8; 1];
    first.read_exact(&mut echoed).await.unwrap();

    server.go_away();
    assert!(server.is_going_away() && !server.is_closed());
    assert_eq!(server.available_streams(), 0);
    until(|| client.is_going_away()).await;
    let err = client.try_open().unwrap_err();
    assert!(
        err.kind() == ErrorKind::GoingAway && err.side() == Side::Remote && err.is_retryable(),
        "{err:?}"
    );
    assert!(!client.is_closed(), "draining, not closed");
    drop(first);

    client.close(CloseCode::NO_ERROR, "done");
    assert!(client.is_closed());
    let reason = client.close_reason().unwrap();
    assert!(reason.is_closed() && reason.side() == Side::Local, "{reason:?}");
}

#[tokio::test]
async fn poll_open_reserves_a_stream_and_wakes_when_one_frees() {
    let (client, server) = pair(1).await;
    echo_server(server);
    let mut held = poll_fn(|cx| client.poll_open(cx)).await.unwrap();
    // A second reservation waits, as a `poll_ready` would.
    let waiting = tokio::spawn({
        let client = client.clone();
        async move { poll_fn(|cx| client.poll_open(cx)).await.map(|s| s.id()) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    held.write_all(b"done").await.unwrap();
    held.shutdown().await.unwrap();
    let mut back = Vec::new();
    held.read_to_end(&mut back).await.unwrap();
    drop(held);
    let id = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id.unwrap(), 3);
}

#[tokio::test]
async fn a_weak_handle_does_not_keep_the_connection_alive() {
    let (client, server) = pair(10).await;
    let weak = client.downgrade();
    assert!(weak.upgrade().is_some());
    drop(client);
    // The last strong handle went: the connection goes away and closes.
    let ended = tokio::time::timeout(Duration::from_secs(2), server.closed())
        .await
        .unwrap();
    assert!(ended.is_closed() && ended.side() == Side::Remote, "{ended:?}");
    assert!(weak.upgrade().is_none());
}

#[tokio::test]
async fn incoming_streams_are_a_futures_stream_that_ends_with_the_connection() {
    let (client, server) = pair(10).await;
    let mut incoming = server.incoming();
    for _ in 0..3 {
        let mut s = client.open().await.unwrap();
        s.write_all(b"hi").await.unwrap();
        s.shutdown().await.unwrap();
    }
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(incoming.next().await.unwrap().unwrap().id());
    }
    assert_eq!(ids, [1, 3, 5]);
    client.go_away();
    drop(client);
    assert!(
        incoming.next().await.is_none(),
        "a graceful end ends the stream, with no error"
    );
}

// ---------------------------------------------------------------- errors

#[tokio::test]
async fn a_graceful_end_is_not_a_failure_and_says_who_ended_it() {
    // Drained after the server's go-away.
    let (client, server) = pair(10).await;
    server.go_away();
    let (c, s) = tokio::join!(client.closed(), server.closed());
    assert!(c.is_closed() && c.side() == Side::Remote, "{c:?}");
    assert!(s.is_closed() && s.side() == Side::Local, "{s:?}");
    assert_eq!(io::Error::from(c).kind(), io::ErrorKind::NotConnected);

    // Closed at once with a code: a failure, the closing side's, its code.
    let (client, server) = pair(10).await;
    let mut stream = client.open().await.unwrap();
    stream.write_all(b"x").await.unwrap();
    server.close(CloseCode(0x77), "maintenance");
    let err = client.closed().await;
    assert!(!err.is_closed() && err.side() == Side::Remote, "{err:?}");
    assert_eq!(err.close_code(), CloseCode(0x77));
    assert!(err.to_string().contains("maintenance"), "{err}");
    assert_eq!(io::Error::from(err).kind(), io::ErrorKind::ConnectionAborted);
    let err = stream.recv().await.unwrap_err();
    assert_eq!(err.close_code(), CloseCode(0x77));
}

#[tokio::test]
async fn a_stream_crossing_the_peers_go_away_is_still_processed_and_later_ones_are_retryable() {
    let (client, server) = pair(10).await;
    // Stream 1 reaches the server before its go-away, and stays in flight;
    // stream 3 crosses the go-away.
    let mut first = client.open().await.unwrap();
    first.write_all(b"one").await.unwrap();
    let mut accepted = server.accept().await.unwrap().unwrap();
    let mut got = [0u8; 3];
    accepted.read_exact(&mut got).await.unwrap();
    server.go_away();
    let mut late = client
        .try_open()
        .unwrap()
        .expect("the go-away is still on its way");
    late.write_all(b"two").await.unwrap();
    late.shutdown().await.unwrap();
    // The go-away's first step promised every stream, so the crossing one
    // is served: no error, nothing to retry.
    let mut crossing = server.accept().await.unwrap().expect("the crossing stream");
    let mut request = Vec::new();
    crossing.read_to_end(&mut request).await.unwrap();
    assert_eq!(request, b"two");
    crossing.write_all(b"served").await.unwrap();
    crossing.shutdown().await.unwrap();
    let mut reply = Vec::new();
    late.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"served");
    // The second step names it as the last: accept is finished.
    assert!(server.accept().await.unwrap().is_none());
    // Opening now is refused up front, as safe to retry elsewhere.
    let err = client.open().await.unwrap_err();
    assert!(
        err.kind() == ErrorKind::GoingAway && err.side() == Side::Remote && err.is_retryable(),
        "{err:?}"
    );
    // Stream 1 completes.
    first.shutdown().await.unwrap();
    accepted.write_all(b"ok").await.unwrap();
    accepted.shutdown().await.unwrap();
    let mut reply = Vec::new();
    first.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"ok");
    // With every stream done and let go, the connection ends gracefully,
    // the server's doing.
    drop((first, accepted, late, crossing));
    let err = client.closed().await;
    assert!(err.is_closed() && err.side() == Side::Remote, "{err:?}");
}

/// (The kinds of errors built by hand, which only weft can build, are
/// checked in src/error/tests.rs.)
#[tokio::test]
async fn io_error_kinds_keep_timeouts_refusals_and_endings_apart() {
    use std::io::ErrorKind::*;
    let kind = |err: Error| io::Error::from(err).kind();
    // A connection that was refused is one.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut dialer = ServiceBuilder::new()
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(weft::transport::TcpConnector::new());
    let err = dialer.dial(addr).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
    assert_eq!(err.side(), Side::Local);
    assert_eq!(kind(err), ConnectionRefused);
}

/// Reads nothing once `stalled` is set, and never wakes its reader: a peer
/// that stopped reading.
struct Stalling<IO> {
    io: IO,
    stalled: Arc<std::sync::atomic::AtomicBool>,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Stalling<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.stalled.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Stalling<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A connection closed while its peer reads nothing waits for the
/// transport until its close deadline (500 ms), and then lets go: its
/// driver ends, on time, without the peer.
#[tokio::test(start_paused = true)]
async fn a_close_the_peer_never_reads_gives_up_at_its_deadline() {
    let (a, b) = tokio::io::duplex(4096);
    let stalled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a = Stalling {
        io: a,
        stalled: Arc::default(),
    };
    let b = Stalling {
        io: b,
        stalled: stalled.clone(),
    };
    let (local, peer) = conn_pair_over(a, b, CipherSuite::Aes256Gcm, limits(10, 10), builders()).await;
    // The acceptor's key refill, a task of its own, ends first (the paused
    // clock moves once no task is left to run): the count below is the
    // closing driver's.
    tokio::time::sleep(Duration::from_millis(1)).await;
    stalled.store(true, Ordering::SeqCst);
    // More than the pipe holds: the rest waits in the connection's queue.
    let mut stream = local.open().await.unwrap();
    stream.write_all(&[7; 64 * 1024]).await.unwrap();
    drop(stream);
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    let before = tasks();
    let started = tokio::time::Instant::now();
    local.close(CloseCode::NO_ERROR, "done");
    while tasks() == before {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the closing driver waits for a peer that never reads"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_millis(750),
        "gave up after {waited:?}"
    );
    drop(peer);
}

// --------------------------------------------------------------- defects

#[tokio::test]
async fn sending_queues_no_more_than_the_send_buffer() {
    let builders = (Builder::new().send_buffer(64 * 1024), Builder::new());
    let (client, server) = conn_pair_duplex(CipherSuite::Aes256Gcm, limits(10, 10), builders).await;
    let mut stream = client.open().await.unwrap();
    // The server never reads; one send of 8 MiB.
    let sender = tokio::spawn(async move { stream.send(Bytes::from(vec![0u8; 8 << 20])).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued = client.stats().queued;
    assert!(queued <= 64 * 1024, "queued {queued}");
    assert!(!sender.is_finished(), "it waits for room");
    drop(server);
    sender.abort();
}

#[tokio::test]
async fn a_pin_without_an_encryption_layer_is_refused() {
    let mut unencrypted = ServiceBuilder::new()
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let (a, _b) = tokio::io::duplex(1024);
    let err = unencrypted
        .handshake(Handshake::dial(a).expect_peer(ident(2).peer_id()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stack, "{err:?}");
}

#[tokio::test]
async fn an_accepted_tcp_stream_gets_nodelay() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut dialer = ServiceBuilder::new()
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(ExistingTransport::new());
        dialer.dial(tcp).await.unwrap()
    });
    let (tcp, _) = listener.accept().await.unwrap();
    assert!(!tcp.nodelay().unwrap(), "a fresh accepted stream has Nagle on");
    let mut acceptor = ServiceBuilder::new()
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let channel = acceptor.accept_transport(tcp).await.unwrap();
    assert!(channel.channel().get_ref().nodelay().unwrap());
    client.await.unwrap();
}

#[tokio::test]
async fn dropping_the_send_half_finishes_it_and_the_receive_half_reads_on() {
    let (client, server) = pair(10).await;
    let (mut recv, mut send) = client.open().await.unwrap().into_split();
    send.write_all(b"request").await.unwrap();
    drop(send);
    let mut s = server.accept().await.unwrap().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"request", "the peer reads a clean end");
    s.write_all(b"the whole reply").await.unwrap();
    s.shutdown().await.unwrap();
    let mut reply = Vec::new();
    recv.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"the whole reply");
}

/// A connection over `a`/`b` whose dialer-to-acceptor direction passes
/// through `edit`.
async fn edited_pair(edit: impl FnMut(usize, Vec<u8>) -> Edit + Send + 'static) -> (Connection, Connection) {
    let (a, b) = middle(edit, forward);
    conn_pair_over(a, b, CipherSuite::Aes256Gcm, limits(10, 10), builders()).await
}

#[tokio::test]
async fn a_record_that_fails_authentication_is_reported_to_the_peer_in_a_close() {
    // Frames 0 and 1 are the dialer's Setup and proof; 2 on are records.
    let (client, server) = edited_pair(|i, mut raw| {
        if i == 3 {
            let last = raw.len() - 1;
            raw[last] ^= 1;
        }
        Edit::Send(vec![raw])
    })
    .await;
    for _ in 0..4 {
        if let Ok(mut s) = client.open().await {
            let _ = s.write_all(b"hello").await;
        }
    }
    let err = server.closed().await;
    assert!(
        is_error(&err, ErrorKind::Record, " failed authentication (modified"),
        "{err:?}"
    );
    let err = client.closed().await;
    assert!(
        err.is_peer_close(CloseCode::AUTHENTICATION_FAILED),
        "the close said why: {err:?}"
    );
}

#[tokio::test]
async fn an_unknown_frame_kind_after_the_handshake_is_reported_in_a_close() {
    let (client, server) = edited_pair(|i, raw| {
        if i == 3 {
            return Edit::Send(vec![raw_frame_bytes(0x0b, &[0; 8]), raw]);
        }
        Edit::Send(vec![raw])
    })
    .await;
    for _ in 0..4 {
        if let Ok(mut s) = client.open().await {
            let _ = s.write_all(b"hello").await;
        }
    }
    let err = server.closed().await;
    assert!(
        is_error(&err, ErrorKind::Record, "peer sent a malformed frame"),
        "{err:?}"
    );
    let err = client.closed().await;
    assert!(err.is_peer_close(CloseCode::PROTOCOL_ERROR), "{err:?}");
}

/// A frame of any kind byte, valid or not.
fn raw_frame_bytes(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut raw = vec![kind, 0, 0, payload.len() as u8];
    raw.extend_from_slice(payload);
    raw
}

#[tokio::test]
async fn a_clean_close_without_go_away_is_answered_with_ours() {
    let (mut raw, server) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(10)).await;
    raw.shutdown().await.unwrap();
    let ended = server.closed().await;
    assert!(ended.is_closed() && ended.side() == Side::Remote, "{ended:?}");
    // Our close comes back: the peer reads a clean end, not a truncation.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), raw.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_ping_flood_gets_go_away_with_excessive_load_and_every_ping_before_is_answered() {
    let (mut raw, server) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(10)).await;
    // Sixteen at once are answered, every one.
    let pings: Vec<u8> = (1..=16u64)
        .flat_map(|n| mux_frame(7, 0, 0, &n.to_be_bytes()))
        .collect();
    raw.write_all(&pings).await.unwrap();
    raw.flush().await.unwrap();
    let mut got = Vec::new();
    while count_frames(&got, 8) < 16 {
        got.extend_from_slice(&raw.recv().await.unwrap().unwrap());
    }
    // Seventeen at once are a flood.
    let pings: Vec<u8> = (1..=17u64)
        .flat_map(|n| mux_frame(7, 0, 0, &n.to_be_bytes()))
        .collect();
    raw.write_all(&pings).await.unwrap();
    raw.flush().await.unwrap();
    let err = server.closed().await;
    assert_eq!(err.close_code(), CloseCode::EXCESSIVE_LOAD, "{err:?}");
    let mut rest = Vec::new();
    let end = raw.read_to_end(&mut rest).await;
    let go_away = rest.windows(2).position(|w| w == [9, 0]).expect("a go-away");
    let code = u32::from_be_bytes(rest[go_away + 14..go_away + 18].try_into().unwrap());
    assert_eq!(CloseCode(code), CloseCode::EXCESSIVE_LOAD);
    assert!(Error::from(end.unwrap_err()).is_peer_close(CloseCode::EXCESSIVE_LOAD));
}

/// Frames of `kind` in a run of whole mux frames.
fn count_frames(mut bytes: &[u8], kind: u8) -> usize {
    let mut n = 0;
    while bytes.len() >= 10 {
        let len = u32::from_be_bytes(bytes[6..10].try_into().unwrap()) as usize;
        if bytes.len() < 10 + len {
            break;
        }
        n += usize::from(bytes[0] == kind);
        bytes = &bytes[10 + len..];
    }
    n
}

/// The peer's worst: a 16 KiB piece of stream data in each read buffer
/// (`record::READ_CHUNK_MAX`), for streams nobody reads, and the rest of
/// each buffer filled with frames that cost no credit. What the connection retains must stay
/// within the bound `mux::Builder` documents (three times the connection
/// window, plus the read buffers), not grow with the buffers the pieces
/// keep alive (32 times the window, before).
#[test]
fn a_hostile_mix_of_frames_retains_no_more_than_the_documented_bound() {
    const WINDOW: u32 = 1 << 20;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut attacker = stack(ident(1), &[CipherSuite::Plaintext]);
        let limit = StreamLimitLayer::new(10).receive_windows(WINDOW / 4, WINDOW);
        // The filler is a credit flood, which the control-frame budget ends
        // long before the buffers fill (tests/hostile_peer/connection.rs,
        // credit_flood_gets_go_away); lifted here, to test the bound on
        // what the pieces keep alive on its own.
        let mut budgets = weft::mux::Budgets::default();
        budgets.control_frame_burst = u64::MAX;
        let builder = Builder::new().budgets(budgets);
        let mut victim = conn_stack(ident(2), CipherSuite::Plaintext, limit, builder);
        let (raw, server) = tokio::join!(attacker.dial(a), victim.accept_transport(b));
        let (mut raw, server) = (raw.unwrap(), server.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let before = live();

        // Credit frames for the connection, one byte each: free to send.
        let mut filler = Vec::new();
        let entries: Vec<u8> = (0..2047).flat_map(|_| [0, 0, 0, 0, 0, 0, 0, 1]).collect();
        while filler.len() < READ_CHUNK_MAX - 16 * 1024 {
            filler.extend(mux_frame(5, 0, 0, &entries));
        }
        let mut frames = 0u64;
        for stream in [1u32, 3, 5, 7] {
            raw.write_all(&mux_frame(1, 0, stream, b"")).await.unwrap();
            frames += 1;
            for _ in 0..16 {
                raw.write_all(&mux_frame(2, 0, stream, &[0x5a; 16 * 1024]))
                    .await
                    .unwrap();
                raw.write_all(&filler).await.unwrap();
                raw.flush().await.unwrap();
                frames += 1 + (filler.len() / (10 + entries.len())) as u64;
            }
        }
        until(|| server.stats().frames_received >= frames).await;
        let stats = server.stats();
        assert_eq!(
            stats.buffered,
            u64::from(WINDOW),
            "the whole window arrived: {stats:?}"
        );
        assert!(stats.pinned <= WINDOW as usize, "{stats:?}");
        let retained = (live() - before) as usize;
        // (`live` counts both ends: the attacker's channel keeps the send
        // buffers its bursts fill, four of 128 KiB.)
        let bound = 3 * WINDOW as usize + 4 * (READ_CHUNK_MAX + 64 * 1024) + 64 * 1024 + 4 * 128 * 1024;
        assert!(retained <= bound, "retained {retained} bytes, bound {bound}");
        assert!(retained >= WINDOW as usize, "the data itself is held: {retained}");
        drop((raw, server));
    });
}

// ----------------------------------------------------------- write batching

/// A client and a server whose transport counts its writes.
async fn counted_pair() -> (Connection, Connection, Arc<Counts>) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (ours, writes) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let (a, b) = (Counted::new(a, &ours), Counted::new(b, &writes));
    let (client, server) = conn_pair_over(a, b, CipherSuite::Aes256Gcm, limits(64, 64), builders()).await;
    (client, server, writes)
}

#[tokio::test]
async fn replies_of_streams_woken_together_leave_in_one_write() {
    let (client, server, writes) = counted_pair().await;
    // Warm up: the first ping and its pong are out of the way.
    assert_eq!(echo_once_on(&client, &server, b"warm").await, b"warm");
    tokio::time::sleep(Duration::from_millis(20)).await;

    let mut calls = Vec::new();
    for i in 0..8u8 {
        let mut s = client.open().await.unwrap();
        s.send(Bytes::from(vec![i; 10])).await.unwrap();
        s.finish().unwrap();
        calls.push(s);
    }
    // All eight wait at the server before any handler runs.
    until(|| server.stats().open_streams >= 8).await;
    let before = writes.writes();
    // Eight handlers, each its own task, as a server spawns them.
    let mut handlers = Vec::new();
    for _ in 0..8 {
        let mut t = server.accept().await.unwrap().unwrap();
        handlers.push(tokio::spawn(async move {
            let mut request = Vec::new();
            t.read_to_end(&mut request).await.unwrap();
            t.write_all(&request).await.unwrap();
            t.shutdown().await.unwrap();
        }));
    }
    for handler in handlers {
        handler.await.unwrap();
    }
    for (i, mut s) in calls.into_iter().enumerate() {
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, vec![i as u8; 10]);
    }
    let replies = writes.writes() - before;
    assert!(
        replies <= 2,
        "eight replies written by eight tasks woken together took {replies} writes"
    );
}

#[tokio::test]
async fn a_pong_owed_leaves_with_the_reply_of_the_reader_its_read_woke() {
    let (client, server, writes) = counted_pair().await;
    // The handler is waiting for the stream when the request arrives.
    let handler = tokio::spawn(async move {
        let mut t = server.accept().await.unwrap().unwrap();
        let mut request = Vec::new();
        t.read_to_end(&mut request).await.unwrap();
        // The reply and its end in one go, as the request came.
        t.send(Bytes::from(request)).await.unwrap();
        t.finish().unwrap();
        server
    });
    tokio::task::yield_now().await;
    let before = writes.writes();
    // The first request carries the client's first ping: reading it, the
    // server owes a pong, and its own first ping is due (data arrived).
    let mut s = client.open().await.unwrap();
    s.send(Bytes::from_static(b"hello")).await.unwrap();
    s.finish().unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"hello");
    let server = handler.await.unwrap();
    let sent = writes.writes() - before;
    assert_eq!(sent, 1, "the pong, the ping and the reply took {sent} writes");
    // The pong arrived with the reply: the client knows the round trip.
    until(|| client.stats().rtt.is_some()).await;
    drop(server);
}

#[tokio::test]
async fn a_flush_held_for_a_reader_that_never_reads_still_leaves() {
    let (client, server, _) = counted_pair().await;
    // A stream the server accepts and never reads: its reader stays woken.
    let mut idle = client.open().await.unwrap();
    idle.send(Bytes::from_static(b"never read")).await.unwrap();
    idle.finish().unwrap();
    let _unread = server.accept().await.unwrap().unwrap();
    for round in 0..100u32 {
        let message = round.to_be_bytes();
        let reply = tokio::time::timeout(Duration::from_secs(1), echo_once_on(&client, &server, &message))
            .await
            .expect("a held flush leaves within a pass of the runtime");
        assert_eq!(reply, message);
    }
}

/// Opens a stream, sends `message`, and has the server echo it back.
async fn echo_once_on(client: &Connection, server: &Connection, message: &[u8]) -> Vec<u8> {
    let mut s = client.open().await.unwrap();
    s.send(Bytes::copy_from_slice(message)).await.unwrap();
    s.finish().unwrap();
    let mut t = server.accept().await.unwrap().unwrap();
    let echo = tokio::spawn(async move {
        let mut request = Vec::new();
        t.read_to_end(&mut request).await.unwrap();
        t.write_all(&request).await.unwrap();
        t.shutdown().await.unwrap();
    });
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).await.unwrap();
    echo.await.unwrap();
    reply
}

// ------------------------------------------------------------ read buffers

/// The most read and write buffer (`ConnectionStats::io_buffers`) the
/// reading side of a 32 MiB transfer holds, with its read buffer limited
/// to `max_read_buffer` (or the default), the writer on a thread of its own
/// over loopback TCP.
fn most_buffer_held_reading(max_read_buffer: Option<usize>) -> usize {
    use weft::{MultiplexLayer, RecordSizeLayer};
    static CHUNK: [u8; 64 * 1024] = [0x5a; 64 * 1024];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                let mut dialer = conn_stack(
                    ident(1),
                    CipherSuite::Aes256Gcm,
                    StreamLimitLayer::new(10),
                    Builder::new(),
                );
                let conn = dialer.dial(tcp).await.unwrap();
                let mut stream = conn.open().await.unwrap();
                for _ in 0..512 {
                    stream.write_all(&CHUNK).await.unwrap();
                }
                stream.shutdown().await.unwrap();
                let mut end = Vec::new();
                stream.read_to_end(&mut end).await.unwrap();
            });
        });
        let (tcp, _) = listener.accept().await.unwrap();
        let mut records = RecordSizeLayer::dynamic();
        if let Some(max) = max_read_buffer {
            records = records.max_read_buffer(max);
        }
        let mut acceptor = ServiceBuilder::new()
            .layer(MultiplexLayer::new(Builder::new()))
            .layer(StreamLimitLayer::new(10))
            .service(stack_with(
                ident(2),
                &[CipherSuite::Aes256Gcm],
                records,
                Versions::CURRENT,
            ));
        let conn = acceptor.accept_transport(tcp).await.unwrap();
        let mut buf = vec![0; 64 * 1024];
        let mut stream = conn.accept().await.unwrap().unwrap();
        let (mut total, mut most) = (0, 0);
        for reads in 0.. {
            most = most.max(conn.stats().io_buffers);
            if reads % 16 == 0 {
                // Falls behind on purpose, blocking the runtime (the
                // connection's driver with it): the socket fills, and the
                // driver's next reads fill their buffers, which then grow
                // as far as they may. A reader that keeps up never grows
                // them, and the test would measure nothing.
                std::thread::sleep(Duration::from_millis(5));
            }
            match stream.read(&mut buf).await.unwrap() {
                0 => break,
                n => total += n,
            }
        }
        assert_eq!(total, 32 << 20);
        stream.shutdown().await.unwrap();
        writer.join().unwrap();
        most
    })
}

/// `RecordSizeLayer::max_read_buffer` bounds what a busy connection's
/// reads allocate: four buffers (the current one and three spares) of at
/// most the limit and a record (64 KiB) each, and the write buffer (256
/// KiB at most), where by default the read buffers grow to
/// `record::READ_CHUNK_MAX` (128 KiB) each, and to 1 MiB when raised that
/// far. The reader falls behind on purpose, so that the buffers grow as
/// far as they may.
#[test]
fn a_read_buffer_limit_bounds_the_buffers_of_a_busy_connection() {
    let limited = most_buffer_held_reading(Some(32 * 1024));
    let default = most_buffer_held_reading(None);
    let raised = most_buffer_held_reading(Some(1024 * 1024));
    println!("read and write buffers held: {limited} bytes limited, {default} by default, {raised} raised");
    let bound = |max: usize| 4 * (max + 65 * 1024) + 256 * 1024;
    assert!(limited <= bound(32 * 1024), "{limited}");
    assert!(default <= bound(READ_CHUNK_MAX), "{default}");
    assert!(raised <= bound(1024 * 1024), "{raised}");
    assert!(raised > 2 * limited, "{raised} raised, {limited} limited");
}

/// An address whose accept queue is full drops our SYNs: the dial fails
/// at the connect timeout, not after the operating system's two minutes.
#[tokio::test]
async fn a_tcp_dial_that_never_connects_fails_at_the_connect_timeout() {
    use tower::ServiceExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    // Fill the accept queue (never accepted).
    let mut held = Vec::new();
    for _ in 0..8 {
        match tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => held.push(tcp),
            _ => break,
        }
    }
    let connector = weft::transport::TcpConnector::new().connect_timeout(Some(Duration::from_millis(300)));
    let start = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), connector.oneshot(addr))
        .await
        .expect("the connect timeout ends the dial")
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    assert!(start.elapsed() >= Duration::from_millis(250));
    drop((held, listener));
}

/// A connection limited to 8 streams, whose finished streams' handles are
/// kept: the table holds more than 8, but the limit counts at most 8, and
/// the stats say both.
#[tokio::test]
async fn stats_count_the_streams_the_limit_counts_apart_from_those_held() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (client, server) = conn_pair_duplex(
        CipherSuite::Aes256Gcm,
        (weft::StreamLimitLayer::new(8), weft::StreamLimitLayer::new(8)),
        (weft::mux::Builder::new(), weft::mux::Builder::new()),
    )
    .await;
    let server_side = server.clone();
    let echo = tokio::spawn(async move {
        while let Ok(Some(mut stream)) = server.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let _ = stream.read_to_end(&mut request).await;
                let _ = stream.write_all(&request).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    let mut held = Vec::new();
    for _round in 0..2 {
        let mut streams = Vec::new();
        for _ in 0..8 {
            let mut stream = client.open().await.unwrap();
            stream.write_all(b"x").await.unwrap();
            stream.shutdown().await.unwrap();
            streams.push(stream);
        }
        let stats = client.stats();
        assert!(stats.streams_counted <= 8, "{stats:?}");
        for stream in &mut streams {
            let mut reply = Vec::new();
            stream.read_to_end(&mut reply).await.unwrap();
            assert_eq!(reply, b"x");
        }
        held.extend(streams);
        // The peer's credit for the finished ones comes back.
        tokio::time::timeout(Duration::from_secs(5), async {
            while client.stats().streams_counted > 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("the slots come back");
    }
    let stats = client.stats();
    assert_eq!(stats.max_streams_counted, 8, "{stats:?}");
    assert_eq!(stats.streams_counted, 0, "{stats:?}");
    // Sixteen handles kept, every stream finished both ways: none is open
    // (the table holds them until the handles go, but they count nowhere).
    assert_eq!(held.len(), 16);
    assert_eq!(stats.open_streams, 0, "{stats:?}");
    let theirs = server_side.stats();
    assert_eq!(
        (theirs.peer_streams_counted, theirs.max_peer_streams_counted),
        (0, 8),
        "{theirs:?}"
    );
    drop(held);
    echo.abort();
}
