//! The pool: one connection per endpoint, more at the peer's stream limit,
//! one dial for many first calls, backoff, endings, idleness, go-away and
//! the retry of streams the peer never processed. Over duplex pipes with
//! a test server that counts what it sees.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tower::{Service, ServiceBuilder, ServiceExt};
use weft::{
    handshake::{HandshakeExt, Versions},
    mux::{self, Connection},
    pool::{Endpoint, Pool, PoolError, PooledStream},
    transport::{ExistingTransport, Target},
    Error, ErrorKind, MultiplexLayer, NegotiateLayer, StreamLimitLayer,
};

/// What the test server saw.
#[derive(Default)]
struct Seen {
    /// Transports dialed (TCP connections, in a real deployment).
    dials: AtomicUsize,
    /// Streams being served now, and the most at once.
    streams_now: AtomicUsize,
    streams_max: AtomicUsize,
    /// The server's side of each connection.
    conns: Mutex<Vec<Connection>>,
}

/// The base of the test dialer: each "dial" makes a duplex pipe and runs a
/// weft acceptor with `limit` on its far end, echoing every stream after
/// `delay`; or, while `fail` is set, fails as a refused TCP dial would.
#[derive(Clone)]
struct PipeConnector {
    seen: Arc<Seen>,
    limit: u32,
    delay: Duration,
    fail: Arc<AtomicBool>,
    /// How many of the next streams the server accepts it refuses
    /// (REFUSED_STREAM), unread.
    refuse_next: Arc<AtomicUsize>,
}

impl Service<Target> for PipeConnector {
    type Response = DuplexStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<DuplexStream>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _target: Target) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            tokio::task::yield_now().await;
            if this.fail.load(SeqCst) {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "refused by the test",
                ));
            }
            this.seen.dials.fetch_add(1, SeqCst);
            let (a, b) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                let mut acceptor = ServiceBuilder::new()
                    .layer(MultiplexLayer::new(mux::Builder::new()))
                    .layer(StreamLimitLayer::new(this.limit))
                    .layer(NegotiateLayer::new(Versions::CURRENT))
                    .service(ExistingTransport::new());
                let Ok(conn) = acceptor.accept_transport(b).await else {
                    return;
                };
                this.seen.conns.lock().unwrap().push(conn.clone());
                while let Ok(Some(mut stream)) = conn.accept().await {
                    let refuse = this
                        .refuse_next
                        .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if refuse {
                        stream.reset(weft::CloseCode::REFUSED_STREAM);
                        continue;
                    }
                    let seen = this.seen.clone();
                    let delay = this.delay;
                    tokio::spawn(async move {
                        let now = seen.streams_now.fetch_add(1, SeqCst) + 1;
                        seen.streams_max.fetch_max(now, SeqCst);
                        let mut request = Vec::new();
                        let read = stream.read_to_end(&mut request).await;
                        tokio::time::sleep(delay).await;
                        seen.streams_now.fetch_sub(1, SeqCst);
                        if read.is_ok() {
                            let _ = stream.write_all(&request).await;
                            let _ = stream.shutdown().await;
                        }
                    });
                }
            });
            Ok(a)
        })
    }
}

type Dialer = weft::stack::Multiplex<weft::stack::Negotiate<PipeConnector>>;

struct Setup {
    seen: Arc<Seen>,
    fail: Arc<AtomicBool>,
    refuse_next: Arc<AtomicUsize>,
    dialer: Dialer,
}

fn setup(limit: u32, delay: Duration) -> Setup {
    let seen = Arc::new(Seen::default());
    let fail = Arc::new(AtomicBool::new(false));
    let refuse_next = Arc::new(AtomicUsize::new(0));
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(PipeConnector {
            seen: seen.clone(),
            limit,
            delay,
            fail: fail.clone(),
            refuse_next: refuse_next.clone(),
        });
    Setup {
        seen,
        fail,
        refuse_next,
        dialer,
    }
}

fn endpoint() -> Endpoint {
    "127.0.0.1:7000".parse().unwrap()
}

/// Waits until `done` holds, looking every 5 ms; fails after 10 s (a
/// bound on a hang, not a measure).
async fn until(what: &str, done: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One request: open, send, finish, read the echo.
async fn echo<S: weft::pool::Dialer>(pool: &Pool<S>, message: &[u8]) -> Result<Vec<u8>, PoolError> {
    let stream = pool.clone().ready().await?.call(endpoint()).await?;
    Ok(exchange(stream, message).await)
}

async fn exchange(mut stream: PooledStream, message: &[u8]) -> Vec<u8> {
    stream.write_all(message).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    reply
}

#[tokio::test]
async fn concurrent_streams_to_one_endpoint_share_one_connection() {
    let s = setup(1000, Duration::from_millis(5));
    let pool = Pool::builder().build(s.dialer);
    let calls = (0..100).map(|i| {
        let pool = pool.clone();
        async move { echo(&pool, format!("request {i}").as_bytes()).await }
    });
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply.unwrap(), format!("request {i}").as_bytes());
    }
    assert_eq!(s.seen.dials.load(SeqCst), 1, "one transport for 100 streams");
    let stats = pool.stats();
    assert_eq!(
        (stats.dials, stats.connections, stats.streams_opened),
        (1, 1, 100)
    );
    assert_eq!(stats.reuses, 99);
}

#[tokio::test]
async fn at_the_peers_stream_limit_the_pool_grows_to_its_bound_then_queues() {
    let s = setup(10, Duration::from_millis(20));
    let pool = Pool::builder().max_connections_per_endpoint(4).build(s.dialer);
    let calls = (0..100).map(|i| {
        let pool = pool.clone();
        async move { echo(&pool, format!("{i}").as_bytes()).await }
    });
    let replies = futures_util::future::join_all(calls).await;
    for (i, reply) in replies.into_iter().enumerate() {
        assert_eq!(reply.unwrap(), format!("{i}").as_bytes());
    }
    let dials = s.seen.dials.load(SeqCst);
    assert!(
        (2..=4).contains(&dials),
        "{dials} connections for 100 streams, 10 each"
    );
    let max = s.seen.streams_max.load(SeqCst);
    assert!(max <= 40, "{max} streams at once");
    assert!(max > 10, "{max}: more than one connection served at once");
    assert_eq!(pool.stats().waiters, 0);
}

#[tokio::test]
async fn by_default_the_pool_dials_another_connection_at_the_peers_stream_limit() {
    let s = setup(2, Duration::from_millis(50));
    let pool = Pool::builder().build(s.dialer);
    let calls = (0..6).map(|i| {
        let pool = pool.clone();
        async move { echo(&pool, format!("{i}").as_bytes()).await }
    });
    for (i, reply) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply.unwrap(), format!("{i}").as_bytes());
    }
    assert_eq!(
        s.seen.dials.load(SeqCst),
        3,
        "6 calls at once, 2 streams a connection"
    );
    assert_eq!(s.seen.streams_max.load(SeqCst), 6);
}

#[tokio::test]
async fn concurrent_first_calls_share_one_dial_and_its_failure() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder()
        .backoff(Duration::from_millis(200), Duration::from_secs(1))
        .build(s.dialer);
    // A dial that fails: all 50 callers get its cause.
    s.fail.store(true, SeqCst);
    let calls = (0..50).map(|_| {
        let pool = pool.clone();
        async move { pool.open(endpoint()).await }
    });
    for result in futures_util::future::join_all(calls).await {
        let err = result.unwrap_err();
        assert!(matches!(err, PoolError::Dial { .. }), "{err:?}");
        assert_eq!(err.endpoint(), &endpoint());
        let cause = err.connection_error().expect("the dialer's error");
        assert_eq!(cause.kind(), ErrorKind::Connect, "{cause:?}");
        assert_eq!(
            io::Error::from(err.clone()).kind(),
            io::ErrorKind::ConnectionRefused
        );
        assert!(err.to_string().contains("127.0.0.1:7000"), "{err}");
    }
    assert_eq!(pool.stats().dial_failures, 1, "one dial for 50 callers");

    // Within the backoff, calls fail at once, with the cause.
    s.fail.store(false, SeqCst);
    let err = pool.open(endpoint()).await.unwrap_err();
    let PoolError::Backoff {
        retry_in, failures, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        *retry_in <= Duration::from_millis(200) && *failures == 1,
        "{err:?}"
    );
    assert!(
        err.connection_error().map(Error::kind) == Some(ErrorKind::Connect),
        "{err:?}"
    );
    assert_eq!(s.seen.dials.load(SeqCst), 0);

    // After it, the next call dials, and 50 concurrent ones share it.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let calls = (0..50).map(|i| {
        let pool = pool.clone();
        async move { echo(&pool, &[i]).await }
    });
    for (i, reply) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply.unwrap(), [i as u8]);
    }
    assert_eq!(s.seen.dials.load(SeqCst), 1);
    assert_eq!(pool.stats().dials, 1);
}

#[tokio::test]
async fn a_broken_connection_is_replaced_at_the_next_call() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().build(s.dialer);
    assert_eq!(echo(&pool, b"before").await.unwrap(), b"before");
    // The server goes (a restart): its side of the connection fails.
    let server = s.seen.conns.lock().unwrap().pop().unwrap();
    server.close(weft::CloseCode(0x99), "restarting");
    let client = pool.connections_to(&endpoint()).pop().unwrap();
    let _ = client.closed().await;
    assert_eq!(echo(&pool, b"after").await.unwrap(), b"after");
    assert_eq!(s.seen.dials.load(SeqCst), 2);
    let stats = pool.stats();
    assert_eq!((stats.evicted, stats.connections), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn idle_connections_close_after_the_timeout() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder()
        .idle_timeout(Duration::from_secs(30))
        .build(s.dialer);
    assert_eq!(echo(&pool, b"x").await.unwrap(), b"x");
    let conn = pool.connections_to(&endpoint()).pop().unwrap();
    // Busy: a stream held open keeps it.
    let held = pool.open(endpoint()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        pool.stats().connections,
        1,
        "a connection with a stream is not idle"
    );
    drop(held);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(pool.stats().connections, 1, "idle for less than the timeout");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let stats = pool.stats();
    assert_eq!((stats.connections, stats.idle_closed), (0, 1));
    // It was closed gracefully (a go-away), not dropped mid-stream.
    let reason = conn.closed().await;
    assert!(reason.is_closed(), "{reason:?}");
    // The next call dials again.
    assert_eq!(echo(&pool, b"y").await.unwrap(), b"y");
    assert_eq!(s.seen.dials.load(SeqCst), 2);
}

#[tokio::test]
async fn go_away_drains_in_flight_streams_and_moves_new_ones_to_a_new_connection() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().build(s.dialer);
    // A stream in flight, read by the server.
    let mut first = pool.open(endpoint()).await.unwrap();
    first.write_all(b"one").await.unwrap();
    first.flush().await.unwrap();
    until("the server takes the stream", || {
        s.seen.streams_now.load(SeqCst) == 1
    })
    .await;
    let server = s.seen.conns.lock().unwrap()[0].clone();
    server.go_away();
    // A stream that crosses the go-away (opened before it arrives) is
    // still served where it went: the go-away promised it.
    let late = pool.open(endpoint()).await.unwrap();
    let old = late.connection().clone();
    assert_eq!(exchange(late, b"two").await, b"two");
    assert!(old.is_going_away());
    // The stream in flight completes on the old connection.
    assert_eq!(exchange(first, b"").await, b"one");
    // New streams go to a new connection.
    let next = pool.open(endpoint()).await.unwrap();
    assert!(!next.connection().same_connection(&old));
    assert_eq!(exchange(next, b"three").await, b"three");
    assert_eq!(s.seen.dials.load(SeqCst), 2);
    assert_eq!(pool.stats().retries, 0, "nothing was refused");
    // The old connection drains and ends, and the pool lets it go.
    let reason = old.closed().await;
    assert!(reason.is_closed(), "{reason:?}");
    assert_eq!(pool.connections_to(&endpoint()).len(), 1);
}

#[tokio::test]
async fn a_stream_refused_unprocessed_is_opened_again_and_replayed_unseen() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().build(s.dialer);
    assert_eq!(echo(&pool, b"warm").await.unwrap(), b"warm");
    // The server refuses the next stream before reading it: the caller
    // wrote its request and finished, and reads the reply as usual.
    s.refuse_next.store(1, SeqCst);
    let stream = pool.open(endpoint()).await.unwrap();
    assert_eq!(
        exchange(stream, b"request").await,
        b"request",
        "the caller sees no refusal"
    );
    assert_eq!(pool.stats().retries, 1);
    // The same through send and finish (one record, no copy on the way).
    s.refuse_next.store(1, SeqCst);
    let mut stream = pool.open(endpoint()).await.unwrap();
    stream.send(bytes::Bytes::from_static(b"sent")).await.unwrap();
    stream.finish().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"sent");
    assert_eq!(pool.stats().retries, 2);
    // Only once: a second refusal of the same stream (the server refuses
    // it and its retry) reaches the caller.
    let mut stream = pool.open(endpoint()).await.unwrap();
    s.refuse_next.store(2, SeqCst);
    stream.write_all(b"x").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    let err = stream.read_to_end(&mut reply).await.unwrap_err();
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>()).unwrap();
    assert!(inner.is_retryable(), "{inner:?}");
    assert_eq!(pool.stats().retries, 3);

    // Past the replay buffer (16 KiB), a refusal is the caller's to see.
    s.refuse_next.store(1, SeqCst);
    let mut stream = pool.open(endpoint()).await.unwrap();
    stream.write_all(&[7; 20 * 1024]).await.unwrap();
    let _ = stream.shutdown().await;
    let err = stream.read_to_end(&mut Vec::new()).await.unwrap_err();
    assert!(err
        .get_ref()
        .and_then(|e| e.downcast_ref::<Error>())
        .is_some_and(Error::is_retryable));
    assert_eq!(pool.stats().retries, 3, "not retried");
}

/// A stream refused unprocessed on a connection that is not going away
/// (the server refused it, say for load) opens again on another
/// connection: a new one is dialed when the pool may, rather than asking
/// the connection that just refused.
#[tokio::test]
async fn a_refused_stream_is_opened_again_on_another_connection() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().build(s.dialer);
    assert_eq!(echo(&pool, b"warm").await.unwrap(), b"warm");
    let first = pool.connections_to(&endpoint())[0].clone();
    s.refuse_next.store(1, SeqCst);
    let mut stream = pool.open(endpoint()).await.unwrap();
    assert!(stream.connection().same_as(&first));
    stream.write_all(b"request").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"request", "the caller sees no refusal");
    assert_eq!(pool.stats().retries, 1);
    assert!(
        !stream.connection().same_as(&first),
        "opened again on the connection that refused"
    );
    assert_eq!(s.seen.dials.load(SeqCst), 2);
    // At the pool's limit of one connection, the only one is used again.
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().max_connections_per_endpoint(1).build(s.dialer);
    assert_eq!(echo(&pool, b"warm").await.unwrap(), b"warm");
    s.refuse_next.store(1, SeqCst);
    let stream = pool.open(endpoint()).await.unwrap();
    assert_eq!(exchange(stream, b"again").await, b"again");
    assert_eq!((pool.stats().retries, s.seen.dials.load(SeqCst)), (1, 1));
}

#[tokio::test]
async fn waiting_calls_are_bounded_and_poll_ready_pushes_back() {
    let s = setup(1, Duration::from_millis(50));
    let mut pool = Pool::builder()
        .max_connections_per_endpoint(1)
        .max_pending(2)
        .build(s.dialer);
    let held = pool.open(endpoint()).await.unwrap();
    // The connection's one stream is held: two calls wait, a third cannot
    // even get a turn.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.open(endpoint()).await.map(|_| ()) })
        })
        .collect();
    until("two calls wait", || pool.stats().waiters == 2).await;
    let ready = futures_util::FutureExt::now_or_never(pool.ready());
    assert!(ready.is_none(), "a third waiting call has no turn");
    drop(held);
    for call in waiting {
        call.await.unwrap().unwrap();
    }
    pool.ready().await.unwrap();
    pool.release_turn();
}

#[tokio::test]
async fn at_the_pools_limit_an_idle_connection_elsewhere_makes_room() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder().max_connections(1).build(s.dialer);
    let a: Endpoint = "127.0.0.1:7001".parse().unwrap();
    let b: Endpoint = "127.0.0.1:7002".parse().unwrap();
    let conn_a = pool.connection(&a).await.unwrap();
    assert!(
        pool.connection(&a).await.unwrap().same_connection(&conn_a),
        "reused"
    );
    // b needs a connection; a's has no streams, so it goes (gracefully).
    let stream_b = pool.open(b.clone()).await.unwrap();
    assert_eq!(exchange(stream_b, b"b").await, b"b");
    assert!(conn_a.is_going_away() || conn_a.is_closed());
    let stats = pool.stats();
    assert_eq!((stats.connections, stats.idle_closed, stats.dials), (1, 1, 2));
    assert!(pool.connections_to(&a).is_empty());
    // While b's connection carries a stream, a's call waits for room.
    let held = pool.open(b).await.unwrap();
    let waiting = tokio::spawn({
        let pool = pool.clone();
        async move { pool.connection(&a).await.map(|c| c.peer().is_none()) }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiting.is_finished(), "no room while b's connection is busy");
    drop(held);
    // Once b's stream is gone, the waiting call finds b's connection idle
    // and closes it to make room.
    assert!(tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap());
    assert_eq!(pool.stats().idle_closed, 2);
}

#[tokio::test(start_paused = true)]
async fn idle_connections_past_the_cap_close_longest_idle_first() {
    let s = setup(1000, Duration::ZERO);
    let pool = Pool::builder()
        .idle_timeout(Duration::from_secs(40))
        .max_idle_connections(1)
        .build(s.dialer);
    let a: Endpoint = "127.0.0.1:7001".parse().unwrap();
    let b: Endpoint = "127.0.0.1:7002".parse().unwrap();
    let conn_a = pool.connection(&a).await.unwrap();
    // a idles first (the sweep runs every 10 s here)...
    tokio::time::sleep(Duration::from_secs(11)).await;
    let conn_b = pool.connection(&b).await.unwrap();
    assert_eq!(pool.stats().connections, 2);
    // ...so when both idle, a goes and b stays, well before the timeout.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let stats = pool.stats();
    assert_eq!((stats.connections, stats.idle_closed), (1, 1), "{stats:?}");
    assert!(conn_a.is_going_away() || conn_a.is_closed());
    assert!(!conn_b.is_going_away());
    assert_eq!(pool.connections_to(&b).len(), 1);
}

/// An unpinned endpoint whose address is answered by another identity
/// after a refusal: the refused request is not replayed to the stranger,
/// and the caller sees the refusal.
#[tokio::test]
async fn a_refused_stream_is_never_replayed_to_a_peer_of_another_identity() {
    use weft::{EncryptLayer, Identity};
    let dials = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let (d, s) = (dials.clone(), served.clone());
    let connector = tower::service_fn(move |_: Target| {
        let (dials, served) = (d.clone(), s.clone());
        async move {
            // Each dial reaches a server with an identity of its own.
            let n = dials.fetch_add(1, SeqCst) as u8;
            let (a, b) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                let mut acceptor = ServiceBuilder::new()
                    .layer(MultiplexLayer::new(mux::Builder::new()))
                    .layer(EncryptLayer::new(Identity::from_seed(&[10 + n; 32])))
                    .layer(NegotiateLayer::new(Versions::CURRENT))
                    .service(ExistingTransport::new());
                let Ok(conn) = acceptor.accept_transport(b).await else {
                    return;
                };
                while let Ok(Some(mut stream)) = conn.accept().await {
                    if n == 0 {
                        // The first server goes away and refuses the stream
                        // unread: a retry must dial anew.
                        conn.go_away();
                        stream.reset(weft::CloseCode::REFUSED_STREAM);
                        continue;
                    }
                    served.fetch_add(1, SeqCst);
                    let mut request = Vec::new();
                    let _ = stream.read_to_end(&mut request).await;
                    let _ = stream.write_all(&request).await;
                    let _ = stream.shutdown().await;
                }
            });
            Ok::<_, io::Error>(a)
        }
    });
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(EncryptLayer::new(Identity::from_seed(&[1; 32])))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(connector);
    let pool = Pool::builder().build(dialer);
    let mut stream = pool.open(endpoint()).await.unwrap();
    stream.write_all(b"for the first").await.unwrap();
    stream.shutdown().await.unwrap_or(());
    let err = stream.read_to_end(&mut Vec::new()).await.unwrap_err();
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
    assert!(inner.is_some_and(Error::is_retryable), "{err:?}");
    assert_eq!(dials.load(SeqCst), 2, "the retry dialed the second server");
    assert_eq!(served.load(SeqCst), 0, "which never saw the request");
}
