//! Multiplexed connections over real transports: loopback TCP and duplex,
//! each side the whole stack (its product a `Connection`).

mod support;

use std::{
    sync::{atomic::Ordering, Arc},
    time::{Duration, Instant},
};

use bytes::Bytes;
use support::{
    conn_pair_duplex, conn_pair_over, failed_with, ident, is_error, mux_frame, raw_peer_against, tcp_streams,
    SUITES,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    mux::{Builder, Connection},
    CloseCode, Error, ErrorKind, Side, StreamLimitLayer, Violation,
};

/// A dialer and an acceptor connection over loopback TCP.
async fn tcp_pair_with(
    suite: CipherSuite,
    limits: (StreamLimitLayer, StreamLimitLayer),
    builders: (Builder, Builder),
) -> (Connection, Connection) {
    let (a, b) = tcp_streams().await;
    conn_pair_over(a, b, suite, limits, builders).await
}

async fn tcp_pair(suite: CipherSuite) -> (Connection, Connection) {
    let limits = (StreamLimitLayer::new(1000), StreamLimitLayer::new(1000));
    tcp_pair_with(suite, limits, (Builder::new(), Builder::new())).await
}

/// Accepts streams forever, echoing each to its end.
fn echo_server(server: Connection) -> tokio::task::JoinHandle<()> {
    support::echo_server(server)
}

async fn echo_once(client: &Connection, message: &[u8]) -> Vec<u8> {
    support::echo_once(client, message).await
}

#[tokio::test]
async fn open_accept_echo_over_tcp_with_every_suite() {
    for suite in SUITES {
        let (client, server) = tcp_pair(suite).await;
        assert_eq!(client.agreement().suite(), suite);
        if suite == CipherSuite::Plaintext {
            // Nothing after the handshake is authenticated: nothing is
            // attributed to the peer (docs/SECURITY.md).
            assert_eq!((client.peer(), server.peer()), (None, None));
        } else {
            assert_eq!(client.peer(), Some(&ident(2).peer_id()));
            assert_eq!(server.peer(), Some(&ident(1).peer_id()));
        }
        echo_server(server);
        let message: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(echo_once(&client, &message).await, message, "{suite:?}");
        assert_eq!(echo_once(&client, b"x").await, b"x");
        let stats = client.stats();
        assert_eq!(stats.streams_opened, 2);
        assert_eq!(stats.bytes_sent, 300_001);
        assert!(stats.records_sent > 0);
    }
}

#[tokio::test]
async fn stream_ids_are_odd_for_the_dialer_and_even_for_the_acceptor() {
    let (client, server) = tcp_pair(CipherSuite::Plaintext).await;
    let a = client.open().await.unwrap();
    let b = client.open().await.unwrap();
    let c = server.open().await.unwrap();
    assert_eq!((a.id(), b.id(), c.id()), (1, 3, 2));
    assert_eq!(server.version(), 3);
}

#[tokio::test]
async fn zero_copy_chunks_arrive_in_order() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    let mut out = client.open().await.unwrap();
    for i in 0..100u8 {
        out.send(Bytes::from(vec![i; 1000])).await.unwrap();
    }
    out.finish().unwrap();
    let mut incoming = server.accept().await.unwrap().unwrap();
    assert_eq!(incoming.peer(), Some(&ident(1).peer_id()));
    let mut all = Vec::new();
    while let Some(chunk) = incoming.recv().await.unwrap() {
        all.extend_from_slice(&chunk);
    }
    let expected: Vec<u8> = (0..100u8).flat_map(|i| vec![i; 1000]).collect();
    assert_eq!(all, expected);
}

#[tokio::test]
async fn ten_thousand_sequential_streams_leave_an_empty_table() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    echo_server(server.clone());
    for i in 0..10_000u32 {
        let back = echo_once(&client, &i.to_be_bytes()).await;
        assert_eq!(back, i.to_be_bytes());
    }
    // The last stream's FIN and credit may still be on the way.
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.stats().open_streams + server.stats().open_streams > 0 {
        assert!(
            Instant::now() < deadline,
            "leaked: {:?} / {:?}",
            client.stats(),
            server.stats()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(client.stats().streams_opened, 10_000);
    assert_eq!(server.stats().streams_accepted, 10_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_streams_on_one_connection() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    echo_server(server);
    let mut tasks = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..1000 {
        streams.push(client.open().await.unwrap());
    }
    assert_eq!(client.stats().open_streams, 1000);
    for (i, mut stream) in streams.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            let message = vec![(i % 256) as u8; 10_000];
            stream.write_all(&message).await.unwrap();
            stream.shutdown().await.unwrap();
            let mut back = Vec::new();
            stream.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, message);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test]
async fn stream_n_plus_one_waits_until_one_finishes() {
    let limits = (StreamLimitLayer::new(100), StreamLimitLayer::new(3));
    let (client, server) =
        tcp_pair_with(CipherSuite::Plaintext, limits, (Builder::new(), Builder::new())).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(client.open().await.unwrap());
    }
    // Not accepted yet, and still counted: the fourth waits.
    let fourth = tokio::time::timeout(Duration::from_millis(200), client.open()).await;
    assert!(fourth.is_err(), "stream 4 opened past a limit of 3");

    // Finish the first stream in both directions; the server reads it to the end.
    let mut first = open.remove(0);
    first.shutdown().await.unwrap();
    let mut accepted = server.accept().await.unwrap().unwrap();
    let mut rest = Vec::new();
    accepted.read_to_end(&mut rest).await.unwrap();
    accepted.shutdown().await.unwrap();
    drop(accepted);
    let mut end = Vec::new();
    first.read_to_end(&mut end).await.unwrap();

    let fourth = tokio::time::timeout(Duration::from_secs(5), client.open()).await;
    assert!(fourth.expect("credit came back").is_ok());
}

#[tokio::test]
async fn open_timeout_is_a_typed_error() {
    let limits = (StreamLimitLayer::new(100), StreamLimitLayer::new(1));
    let builders = (
        Builder::new().open_timeout(Some(Duration::from_millis(50))),
        Builder::new(),
    );
    let (client, _server) = tcp_pair_with(CipherSuite::Plaintext, limits, builders).await;
    let _first = client.open().await.unwrap();
    let err = client.open().await.unwrap_err();
    assert!(
        is_error(&err, ErrorKind::Timeout, "no stream credit from the peer within"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stalled_reader_does_not_slow_the_others() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    // The stalled stream: the server accepts it and never reads.
    let mut stalled = client.open().await.unwrap();
    let writer = tokio::spawn(async move {
        let chunk = vec![0u8; 64 * 1024];
        loop {
            if stalled.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let held = server.accept().await.unwrap().unwrap();
    echo_server(server.clone());
    let started = Instant::now();
    for _ in 0..20 {
        let message = vec![7u8; 100_000];
        assert_eq!(echo_once(&client, &message).await, message);
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    // The stalled stream buffers no more than its window on the server.
    let buffered = server.stats().buffered;
    assert!(
        buffered <= 1 << 20, // the default stream window
        "buffered {buffered}"
    );
    drop(held);
    writer.abort();
}

#[tokio::test]
async fn a_peer_that_never_reads_gets_no_more_than_the_windows() {
    let (client, server) = tcp_pair(CipherSuite::Plaintext).await;
    let mut streams = Vec::new();
    let mut writers = Vec::new();
    for _ in 0..20 {
        let mut s = client.open().await.unwrap();
        streams.push(s.id());
        writers.push(tokio::spawn(async move {
            let chunk = Bytes::from(vec![1u8; 64 * 1024]);
            while s.send(chunk.clone()).await.is_ok() {}
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = server.stats();
    // Nobody reads: the windows never grow, and 20 streams share the
    // connection window.
    assert!(
        stats.buffered <= 4 << 20, // the default connection window
        "{stats:?}"
    );
    assert!(stats.buffered > 0);
    for w in writers {
        w.abort();
    }
}

#[tokio::test]
async fn half_close_works_in_each_direction() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    let mut c = client.open().await.unwrap();
    c.write_all(b"request").await.unwrap();
    c.shutdown().await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"request");
    // The server can still write after the client's half close.
    s.write_all(b"response one").await.unwrap();
    s.write_all(b", two").await.unwrap();
    s.shutdown().await.unwrap();
    let mut back = Vec::new();
    c.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"response one, two");
    // Writing after our own half close is refused, saying why.
    let err = Error::from(c.write_all(b"more").await.unwrap_err());
    assert_eq!(err.kind(), ErrorKind::Finished, "{err:?}");

    // And the other way: the server half-closes first.
    let mut c = client.open().await.unwrap();
    c.write_all(b"ping").await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    s.shutdown().await.unwrap();
    let mut none = Vec::new();
    c.read_to_end(&mut none).await.unwrap();
    assert!(none.is_empty());
    c.write_all(b" and more").await.unwrap();
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"ping and more");
}

#[tokio::test]
async fn reset_propagates_both_ways() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    // Client resets: the server's read fails with the code.
    let mut c = client.open().await.unwrap();
    c.write_all(b"partial").await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    c.reset(CloseCode(0x77));
    let err = loop {
        match s.recv().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a reset stream read as complete"),
            Err(err) => break err,
        }
    };
    assert!(
        err.kind() == ErrorKind::Reset && err.close_code() == CloseCode(0x77) && err.side() == Side::Remote,
        "{err:?}"
    );
    assert!(c
        .recv()
        .await
        .is_err_and(|err| err.kind() == ErrorKind::Reset && err.side() == Side::Local));

    // Server resets: the client's pending read and later writes fail.
    let mut c = client.open().await.unwrap();
    c.write_all(b"x").await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    let reader = tokio::spawn(async move {
        let err = c.recv().await.unwrap_err();
        (c, err)
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.reset(CloseCode(0x42));
    let (mut c, err) = reader.await.unwrap();
    assert!(
        err.kind() == ErrorKind::Reset && err.close_code() == CloseCode(0x42),
        "{err:?}"
    );
    assert!(c.send(Bytes::from_static(b"y")).await.is_err());
}

#[tokio::test]
async fn dropping_an_unfinished_stream_resets_it() {
    let (client, server) = tcp_pair(CipherSuite::Plaintext).await;
    let mut c = client.open().await.unwrap();
    c.write_all(b"half a message").await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    drop(c);
    let mut buf = Vec::new();
    let err = s.read_to_end(&mut buf).await.unwrap_err();
    let err = Error::from(err);
    assert!(
        err.kind() == ErrorKind::Reset && err.close_code() == CloseCode::CANCEL,
        "{err:?}"
    );

    // A finished stream, dropped at once, still delivers everything.
    let mut c = client.open().await.unwrap();
    c.write_all(b"complete").await.unwrap();
    c.shutdown().await.unwrap();
    drop(c);
    let mut s = server.accept().await.unwrap().unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"complete");
}

#[tokio::test]
async fn split_halves_work_from_different_tasks() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    echo_server(server);
    let stream = client.open().await.unwrap();
    let (mut recv, mut send) = stream.into_split();
    let writer = tokio::spawn(async move {
        for i in 0..100u32 {
            send.write_all(&i.to_be_bytes()).await.unwrap();
        }
        send.shutdown().await.unwrap();
    });
    let mut back = Vec::new();
    recv.read_to_end(&mut back).await.unwrap();
    writer.await.unwrap();
    let expected: Vec<u8> = (0..100u32).flat_map(|i| i.to_be_bytes()).collect();
    assert_eq!(back, expected);
}

/// One thread for everything, so the readers are scheduled alike and what
/// is measured is the sender's scheduling, not the runtime's placement.
/// Measured in bytes, not time: when the first stream has all of its 16
/// MiB, every other has at least 80% of its own.
#[tokio::test]
async fn eight_streams_at_once_are_within_twenty_percent_when_the_first_finishes() {
    use std::sync::atomic::AtomicUsize;
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    const SIZE: usize = 16 << 20;
    let received: Arc<[AtomicUsize; 8]> = Arc::new(std::array::from_fn(|_| AtomicUsize::new(0)));
    let at_first_end = Arc::new(std::sync::Mutex::new(None::<Vec<usize>>));
    let sink = {
        let (received, at_first_end) = (received.clone(), at_first_end.clone());
        tokio::spawn(async move {
            let mut readers = Vec::new();
            for i in 0..8 {
                let mut s = server.accept().await.unwrap().unwrap();
                let (received, at_first_end) = (received.clone(), at_first_end.clone());
                readers.push(tokio::spawn(async move {
                    let mut n = 0;
                    while let Some(chunk) = s.recv().await.unwrap() {
                        n += chunk.len();
                        received[i].store(n, Ordering::SeqCst);
                    }
                    assert_eq!(n, SIZE);
                    at_first_end
                        .lock()
                        .unwrap()
                        .get_or_insert_with(|| received.iter().map(|r| r.load(Ordering::SeqCst)).collect());
                }));
            }
            for r in readers {
                r.await.unwrap();
            }
        })
    };
    let mut writers = Vec::new();
    for _ in 0..8 {
        let mut s = client.open().await.unwrap();
        writers.push(tokio::spawn(async move {
            let chunk = Bytes::from(vec![3u8; 64 * 1024]);
            for _ in 0..SIZE / chunk.len() {
                s.send(chunk.clone()).await.unwrap();
            }
            s.finish().unwrap();
            // Done when the peer has everything: wait for its end.
            let _ = s.recv().await;
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    sink.await.unwrap();
    let shares = at_first_end.lock().unwrap().clone().expect("a stream finished");
    let least = *shares.iter().min().unwrap();
    assert!(
        least >= SIZE * 8 / 10,
        "when the first stream had its {SIZE} bytes, the others had {shares:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn keepalive_detects_a_silent_peer() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let builder = Builder::new()
        .keepalive(Some(Duration::from_secs(1)))
        .idle_timeout(Some(Duration::from_secs(3)));
    let mut dialer = support::conn_stack(
        ident(1),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        builder,
    );
    // The peer is a channel that reads nothing and answers nothing.
    let mut silent = support::stack(ident(2), &[CipherSuite::Aes256Gcm]);
    let (client, _silent) = tokio::join!(dialer.dial(a), silent.accept_transport(b));
    let client = client.unwrap();
    let mut stream = client.open().await.unwrap();
    let started = tokio::time::Instant::now();
    let err = stream.recv().await.unwrap_err();
    assert!(is_error(&err, ErrorKind::Timeout, "peer silent for"), "{err:?}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    assert!(failed_with(
        &client.open().await,
        ErrorKind::Timeout,
        "peer silent for"
    ));
}

#[tokio::test(start_paused = true)]
async fn pings_keep_an_idle_connection_alive_and_measure_rtt() {
    let builder = || {
        Builder::new()
            .keepalive(Some(Duration::from_secs(1)))
            .idle_timeout(Some(Duration::from_secs(3)))
    };
    let limits = (StreamLimitLayer::new(10), StreamLimitLayer::new(10));
    let (client, server) = conn_pair_duplex(CipherSuite::Aes256Gcm, limits, (builder(), builder())).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(client.stats().rtt.is_some());
    echo_server(server);
    assert_eq!(echo_once(&client, b"still here").await, b"still here");
}

#[tokio::test]
async fn go_away_drains_in_flight_streams() {
    let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
    let mut c = client.open().await.unwrap();
    c.write_all(b"in flight").await.unwrap();
    let mut s = server.accept().await.unwrap().unwrap();
    server.go_away();
    // New streams are refused on both sides (once the go-away arrived).
    let started = Instant::now();
    while !client.is_going_away() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the go-away never arrived"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(client
        .open()
        .await
        .is_err_and(|err| err.kind() == ErrorKind::GoingAway && err.side() == Side::Remote));
    assert!(server
        .open()
        .await
        .is_err_and(|err| err.kind() == ErrorKind::GoingAway && err.side() == Side::Local));
    assert!(server.accept().await.unwrap().is_none());
    // The stream in flight completes.
    c.shutdown().await.unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"in flight");
    s.write_all(b"done").await.unwrap();
    s.shutdown().await.unwrap();
    let mut back = Vec::new();
    c.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"done");
    drop((c, s));
    // Then the connection closes by itself, gracefully: the server's go-away.
    let closed = tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .unwrap();
    assert!(closed.is_closed() && closed.side() == Side::Local, "{closed:?}");
    let closed = tokio::time::timeout(Duration::from_secs(5), client.closed())
        .await
        .unwrap();
    assert!(closed.is_closed() && closed.side() == Side::Remote, "{closed:?}");
}

#[tokio::test]
async fn killing_the_tcp_connection_fails_every_stream_promptly() {
    // A proxy in the middle that we can cut.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (server_addr, proxy_addr) = (listener.local_addr().unwrap(), proxy.local_addr().unwrap());
    // Cut once every stream is moving data (the server's readers say so).
    let moving = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cut_now = Arc::new(tokio::sync::Notify::new());
    let cut = {
        let cut_now = cut_now.clone();
        tokio::spawn(async move {
            let (mut inbound, _) = proxy.accept().await.unwrap();
            let mut outbound = TcpStream::connect(server_addr).await.unwrap();
            tokio::select! {
                copied = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {
                    panic!("the transfer ended before the cut: {copied:?}")
                }
                () = cut_now.notified() => {}
            }
            // Both sockets drop: the connection dies mid-transfer.
        })
    };
    let (a, b) = tokio::join!(TcpStream::connect(proxy_addr), async {
        listener.accept().await.unwrap().0
    });
    let limits = (StreamLimitLayer::new(100), StreamLimitLayer::new(100));
    let builders = (Builder::new(), Builder::new());
    let (client, server) = conn_pair_over(a.unwrap(), b, CipherSuite::Aes256Gcm, limits, builders).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut stream = client.open().await.unwrap();
        tasks.push(tokio::spawn(async move {
            let chunk = Bytes::from(vec![0u8; 64 * 1024]);
            loop {
                if let Err(err) = stream.send(chunk.clone()).await {
                    return err;
                }
            }
        }));
    }
    let server_side = tokio::spawn(async move {
        let mut readers = Vec::new();
        while let Ok(Some(mut s)) = server.accept().await {
            let (moving, cut_now) = (moving.clone(), cut_now.clone());
            readers.push(tokio::spawn(async move {
                let mut first = true;
                loop {
                    match s.recv().await {
                        Ok(Some(_)) => {
                            if std::mem::take(&mut first) && moving.fetch_add(1, Ordering::SeqCst) + 1 == 8 {
                                cut_now.notify_one();
                            }
                        }
                        Ok(None) => return None,
                        Err(err) => return Some(err),
                    }
                }
            }));
        }
        let mut errors = 0;
        for r in readers {
            if r.await.unwrap().is_some() {
                errors += 1;
            }
        }
        errors
    });
    cut.await.unwrap();
    for task in tasks {
        let err = tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .expect("a writer hung after the connection died")
            .unwrap();
        assert_ne!(err.kind(), ErrorKind::Reset, "{err:?}");
    }
    let errors = tokio::time::timeout(Duration::from_secs(2), server_side)
        .await
        .expect("a reader hung after the connection died")
        .unwrap();
    assert_eq!(errors, 8);
}

#[tokio::test]
async fn a_peer_opening_past_the_limit_gets_go_away_with_the_code() {
    // A hand-made client ignores the limit the server declared.
    let (mut a, server) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(2)).await;
    for id in [1u32, 3, 5] {
        a.write_all(&mux_frame(1, 0, id, b"")).await.unwrap();
    }
    a.flush().await.unwrap();
    let err = server.closed().await;
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err:?}");
    assert_eq!(
        err.violation(),
        Some(&Violation::StreamLimit { id: 5, allowed: 2 })
    );
    // On the wire: a go-away with STREAM_LIMIT_ERROR, then the close.
    let mut got = Vec::new();
    let read = a.read_to_end(&mut got).await;
    let goaway = got
        .windows(2)
        .position(|w| w == [9, 0])
        .expect("a go-away frame arrived");
    let code = u32::from_be_bytes(got[goaway + 14..goaway + 18].try_into().unwrap());
    assert_eq!(CloseCode(code), CloseCode::STREAM_LIMIT_ERROR);
    let err = Error::from(read.unwrap_err());
    assert!(err.is_peer_close(CloseCode::STREAM_LIMIT_ERROR), "{err:?}");
}

#[tokio::test]
async fn a_peer_sending_past_its_credit_gets_go_away_with_flow_control_error() {
    let limit = StreamLimitLayer::new(10).receive_windows(1000, 1 << 20);
    let (mut a, server) = raw_peer_against(CipherSuite::Aes256Gcm, limit).await;
    // OPEN stream 1 with 1001 bytes: one more than the declared window.
    a.write_all(&mux_frame(1, 0, 1, &[0u8; 1001])).await.unwrap();
    a.flush().await.unwrap();
    let err = server.closed().await;
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err:?}");
    assert_eq!(
        err.violation(),
        Some(&Violation::FlowControl {
            stream: 1,
            offset: 1001,
            limit: 1000
        })
    );
    let mut rest = Vec::new();
    let err = Error::from(a.read_to_end(&mut rest).await.unwrap_err());
    assert!(err.is_peer_close(CloseCode::FLOW_CONTROL_ERROR), "{err:?}");
}

#[test]
fn streams_fail_when_the_driver_runtime_goes_away() {
    // The connection's driver lives on `driver_rt`; the application on `app_rt`.
    let app_rt = tokio::runtime::Runtime::new().unwrap();
    let driver_rt = tokio::runtime::Runtime::new().unwrap();
    let (a, b) = tokio::io::duplex(1 << 16);
    let limit = || StreamLimitLayer::new(10);
    let mut acceptor = support::conn_stack(ident(2), CipherSuite::Plaintext, limit(), Builder::new());
    let server = app_rt.spawn(async move { acceptor.accept_transport(b).await });
    let mut dialer = support::conn_stack(ident(1), CipherSuite::Plaintext, limit(), Builder::new());
    let client = driver_rt.block_on(dialer.dial(a)).unwrap();
    let _server = app_rt.block_on(server).unwrap().unwrap();
    let mut stream = app_rt.block_on(client.open()).unwrap();
    let reader = app_rt.spawn(async move { stream.recv().await });
    std::thread::sleep(Duration::from_millis(50));
    drop(driver_rt);
    let read = app_rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), reader).await })
        .expect("a read hung after its driver's runtime shut down")
        .unwrap();
    assert!(failed_with(&read, ErrorKind::Stopped, ""), "{read:?}");
}

/// Soak: many connections, streams of random sizes opened, echoed, reset or
/// dropped at random, for `WEFT_STRESS_SECS` (default 20). Every completed
/// echo must be intact and every table empty at the end.
/// `cargo test --release --test mux stress -- --ignored`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn stress_churn_leaves_no_stream_behind() {
    let secs: u64 = std::env::var("WEFT_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut pairs = Vec::new();
    for _ in 0..4 {
        let (client, server) = tcp_pair(CipherSuite::Aes256Gcm).await;
        echo_server(server.clone());
        pairs.push((client, server));
    }
    let mut workers = Vec::new();
    for (w, (client, _)) in pairs.iter().enumerate() {
        for lane in 0..16u64 {
            let client = client.clone();
            workers.push(tokio::spawn(async move {
                // A small xorshift: no extra dependency for randomness.
                let mut x = (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (lane + 1);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut echoed = 0u64;
                while Instant::now() < deadline {
                    let size = (next() % 200_000) as usize;
                    let mut stream = client.open().await.unwrap();
                    let message: Vec<u8> = (0..size).map(|i| (i as u64 ^ size as u64) as u8).collect();
                    match next() % 10 {
                        0 => {
                            // Abandon half way: dropped unfinished, so reset.
                            let _ = stream.write_all(&message[..size / 2]).await;
                        }
                        1 => {
                            let _ = stream.write_all(&message[..size / 3]).await;
                            stream.reset(CloseCode(0x99));
                        }
                        _ => {
                            let (mut recv, mut send) = stream.into_split();
                            let writer = tokio::spawn(async move {
                                send.write_all(&message).await.unwrap();
                                send.shutdown().await.unwrap();
                                message
                            });
                            let mut back = Vec::new();
                            recv.read_to_end(&mut back).await.unwrap();
                            assert_eq!(back, writer.await.unwrap());
                            echoed += 1;
                        }
                    }
                }
                echoed
            }));
        }
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await.unwrap();
    }
    assert!(total > 0);
    let settle = Instant::now() + Duration::from_secs(5);
    for (client, server) in &pairs {
        while client.stats().open_streams + server.stats().open_streams > 0 {
            assert!(
                Instant::now() < settle,
                "leaked: {:?} / {:?}",
                client.stats(),
                server.stats()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
