//! weft under hyper, axum and tonic: real clients and servers over
//! loopback TCP, the client through the pool and the connector, the
//! server through `weft::http::serve` (or tonic's own server fed weft
//! streams).

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use bytes::Bytes;
use futures_util::{stream, StreamExt};
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tower::BoxError;
use tower::{service_fn, ServiceBuilder};
use weft::{
    handshake::{PeerId, Versions},
    http::{Connector, PeerInfo},
    mux,
    pool::{Endpoint, Pool},
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

type Body = BoxBody<Bytes, BoxError>;

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

/// A server's acceptor: encrypted or not, this stream limit, these
/// application protocols; it counts the TCP connections it takes.
#[derive(Clone)]
struct ServerSetup {
    encrypted: bool,
    limit: u32,
    protocols: &'static [&'static str],
}

const SERVER: ServerSetup = ServerSetup {
    encrypted: true,
    limit: 1000,
    protocols: &["h2", "http/1.1"],
};

/// A running server: its address, its TCP connection count, and its
/// shutdown.
struct Server {
    addr: SocketAddr,
    tcp: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

/// Serves `service` over weft on `listener`.
fn serve<S, B>(listener: TcpListener, setup: ServerSetup, service: S) -> Server
where
    S: tower::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let addr = listener.local_addr().unwrap();
    let tcp = Arc::new(AtomicUsize::new(0));
    let count = tcp.clone();
    let negotiate = NegotiateLayer::new(Versions::CURRENT).protocols(setup.protocols.iter().copied());
    let base = ServiceBuilder::new()
        .map_request(move |tcp: tokio::net::TcpStream| {
            count.fetch_add(1, SeqCst);
            tcp
        })
        .service(TcpAcceptor::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let signal = async move {
        let _ = stopped.await;
    };
    let task = if setup.encrypted {
        let acceptor = ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(StreamLimitLayer::new(setup.limit))
            .layer(RecordSizeLayer::dynamic())
            .layer(EncryptLayer::new(ident(2)))
            .layer(negotiate)
            .service(base);
        tokio::spawn(weft::http::serve(listener, acceptor, service).with_graceful_shutdown(signal))
    } else {
        let acceptor = ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(StreamLimitLayer::new(setup.limit))
            .layer(negotiate)
            .service(base);
        tokio::spawn(weft::http::serve(listener, acceptor, service).with_graceful_shutdown(signal))
    };
    Server {
        addr,
        tcp,
        stop: Some(stop),
        task,
    }
}

async fn listen() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// How many `/slow-counted` requests have started, in this process.
static SLOW_COUNTED_STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The test service: `/hello` names the caller, `/upload` checksums the
/// body, `/download/N` streams N MiB, `/slow` answers after 20 ms
/// (`/slow-counted` too, counting in `SLOW_COUNTED_STARTED` when it starts).
async fn app(request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let peer = request.extensions().get::<PeerInfo>().cloned();
    let path = request.uri().path().to_owned();
    let response = match path.as_str() {
        "/hello" => {
            let id = peer
                .and_then(|p| p.id)
                .map_or("anonymous".to_owned(), |id| id.to_string());
            full(format!("hello, {id}"))
        }
        "/upload" => {
            let mut body = request.into_body();
            let (mut sum, mut len) = (Checksum::default(), 0u64);
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.unwrap().into_data() {
                    sum.add(&data);
                    len += data.len() as u64;
                }
            }
            full(format!("{len} {:016x}", sum.value()))
        }
        p if p.starts_with("/download/") => {
            let mib: usize = p["/download/".len()..].parse().unwrap();
            Response::new(pattern_body(mib))
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(20)).await;
            full("slow".to_owned())
        }
        "/slow-counted" => {
            SLOW_COUNTED_STARTED.fetch_add(1, SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            full("slow".to_owned())
        }
        _ => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(full(String::new()).into_body())
            .unwrap(),
    };
    Ok(response)
}

fn full(text: String) -> Response<Body> {
    Response::new(Full::new(Bytes::from(text)).map_err(|e| match e {}).boxed())
}

/// A position-dependent checksum, cheap enough for 100 MiB in a debug
/// build (it sums words, with their offsets).
#[derive(Default)]
struct Checksum {
    sum: u64,
    offset: u64,
    pending: Vec<u8>,
}

impl Checksum {
    fn add(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        let whole = self.pending.len() / 8 * 8;
        for word in self.pending[..whole].chunks_exact(8) {
            let w = u64::from_le_bytes(word.try_into().unwrap());
            self.sum = self.sum.rotate_left(5) ^ w.wrapping_add(self.offset);
            self.offset += 1;
        }
        self.pending.drain(..whole);
    }
    fn value(&self) -> u64 {
        self.pending
            .iter()
            .fold(self.sum, |s, &b| s.rotate_left(3) ^ b as u64)
    }
}

/// `mib` MiB of a pattern, in 64 KiB chunks.
fn pattern_chunks(mib: usize) -> impl Iterator<Item = Bytes> {
    (0..mib * 16).map(|i| {
        let chunk: Vec<u8> = (0..64 * 1024u32)
            .map(|j| (j.wrapping_mul(31) ^ i as u32) as u8)
            .collect();
        Bytes::from(chunk)
    })
}

fn pattern_checksum(mib: usize) -> (u64, u64) {
    let mut sum = Checksum::default();
    let mut len = 0;
    for chunk in pattern_chunks(mib) {
        sum.add(&chunk);
        len += chunk.len() as u64;
    }
    (len, sum.value())
}

fn pattern_body(mib: usize) -> Body {
    let frames = stream::iter(pattern_chunks(mib)).map(|chunk| Ok::<_, BoxError>(Frame::data(chunk)));
    BodyExt::boxed(StreamBody::new(frames))
}

/// A client: hyper-util over the connector over a pool, with these
/// settings.
fn client_with(
    encrypted: bool,
    protocols: &'static [&'static str],
    pool: weft::pool::Builder,
    route: impl FnOnce(Connector<ClientStack>) -> Connector<ClientStack>,
) -> (Client<Connector<ClientStack>, Body>, Pool<ClientStack>) {
    let stack = client_stack(encrypted, protocols);
    let pool = pool.build(stack);
    let connector = route(Connector::new(pool.clone()).allow_unpinned());
    (Client::builder(TokioExecutor::new()).build(connector), pool)
}

type ClientStack = tower::util::Either<
    weft::stack::Multiplex<
        weft::stack::RecordSize<weft::stack::Encrypt<weft::stack::Negotiate<TcpConnector>>>,
    >,
    weft::stack::Multiplex<weft::stack::Negotiate<TcpConnector>>,
>;

fn client_stack(encrypted: bool, protocols: &'static [&'static str]) -> ClientStack {
    let negotiate = NegotiateLayer::new(Versions::CURRENT).protocols(protocols.iter().copied());
    if encrypted {
        tower::util::Either::Left(
            ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(RecordSizeLayer::dynamic())
                .layer(EncryptLayer::new(ident(1)))
                .layer(negotiate)
                .service(TcpConnector::new()),
        )
    } else {
        tower::util::Either::Right(
            ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(negotiate)
                .service(TcpConnector::new()),
        )
    }
}

fn uri(addr: SocketAddr, path: &str) -> http::Uri {
    format!("weft://{addr}{path}").parse().unwrap()
}

async fn text(response: Response<Incoming>) -> String {
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

/// What the test service says to client identity 1.
fn hello() -> String {
    format!("hello, {}", ident(1).peer_id())
}

/// Every error in `err`'s source chain, as text.
fn chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut chain = Vec::new();
    let mut source = Some(err);
    while let Some(e) = source {
        chain.push(e.to_string());
        source = e.source();
    }
    chain
}

fn empty() -> Body {
    Empty::new().map_err(|e| match e {}).boxed()
}

async fn get(client: &Client<Connector<ClientStack>, Body>, uri: http::Uri) -> Response<Incoming> {
    client
        .request(Request::get(uri).body(empty()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mib_upload_and_download_arrive_intact_plaintext_and_encrypted() {
    for (encrypted, protocols) in [(true, &["h2"][..]), (false, &["http/1.1"][..])] {
        let setup = ServerSetup {
            encrypted,
            protocols: &["h2", "http/1.1"],
            ..SERVER
        };
        let server = serve(listen().await, setup, service_fn(app));
        let protocols: &'static [&'static str] = if protocols == ["h2"] {
            &["h2"]
        } else {
            &["http/1.1"]
        };
        let (client, _pool) = client_with(encrypted, protocols, Pool::builder(), |c| c.http2());
        let (len, sum) = pattern_checksum(100);

        let upload = Request::post(uri(server.addr, "/upload"))
            .body(pattern_body(100))
            .unwrap();
        let reply = text(client.request(upload).await.unwrap()).await;
        assert_eq!(
            reply,
            format!("{len} {sum:016x}"),
            "upload, encrypted: {encrypted}"
        );

        let response = get(&client, uri(server.addr, "/download/100")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let expected_version = if protocols == ["h2"] {
            http::Version::HTTP_2
        } else {
            http::Version::HTTP_11
        };
        assert_eq!(response.version(), expected_version);
        let mut body = response.into_body();
        let (mut got, mut got_len) = (Checksum::default(), 0u64);
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                got.add(&data);
                got_len += data.len() as u64;
            }
        }
        assert_eq!(
            (got_len, got.value()),
            (len, sum),
            "download, encrypted: {encrypted}"
        );
        drop(client);
        server.shutdown().await;
    }
}

#[tokio::test]
async fn concurrent_http1_requests_to_one_endpoint_ride_one_tcp_connection() {
    let server = serve(listen().await, SERVER, service_fn(app));
    let (client, pool) = client_with(true, &["http/1.1"], Pool::builder(), |c| c);
    let requests = (0..100).map(|_| {
        let client = client.clone();
        async move { get(&client, uri(server.addr, "/slow")).await }
    });
    for response in futures_util::future::join_all(requests).await {
        assert_eq!(response.version(), http::Version::HTTP_11);
        assert_eq!(text(response).await, "slow");
    }
    assert_eq!(
        server.tcp.load(SeqCst),
        1,
        "100 HTTP/1.1 connections, one TCP connection"
    );
    assert_eq!(pool.stats().dials, 1);
    assert!(pool.stats().streams_opened >= 2, "{:?}", pool.stats());
}

#[tokio::test]
async fn a_stream_limit_of_10_and_4_connections_serve_100_requests_with_at_most_40_streams() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (now, max) = (in_flight.clone(), most.clone());
    let counting = service_fn(move |request: Request<Incoming>| {
        let (now, max) = (now.clone(), max.clone());
        async move {
            let n = now.fetch_add(1, SeqCst) + 1;
            max.fetch_max(n, SeqCst);
            let response = app(request).await;
            now.fetch_sub(1, SeqCst);
            response
        }
    });
    let setup = ServerSetup { limit: 10, ..SERVER };
    let server = serve(listen().await, setup, counting);
    let builder = Pool::builder().max_connections_per_endpoint(4);
    let (client, pool) = client_with(true, &["http/1.1"], builder, |c| c);
    let requests = (0..100).map(|_| {
        let client = client.clone();
        async move { get(&client, uri(server.addr, "/slow")).await }
    });
    for response in futures_util::future::join_all(requests).await {
        assert_eq!(text(response).await, "slow");
    }
    let tcp = server.tcp.load(SeqCst);
    assert!((2..=4).contains(&tcp), "{tcp} TCP connections");
    let most = most.load(SeqCst);
    assert!(most <= 40, "{most} requests (streams) at once");
    assert!(most > 10, "{most}: more than one connection's worth at once");
    assert!(pool.stats().streams_per_connection.iter().all(|&n| n <= 10));
}

#[tokio::test]
async fn the_idle_pool_of_hyper_util_never_starves_the_stream_credit() {
    let setup = ServerSetup { limit: 10, ..SERVER };
    let server = serve(listen().await, setup, service_fn(app));
    // hyper-util's default idle pool, which keeps every idle HTTP/1.1
    // connection (a weft stream, holding one of the 10) for 90 s.
    let (client, _pool) = client_with(true, &["http/1.1"], Pool::builder(), |c| c);
    let run = async {
        for _ in 0..500 {
            assert_eq!(
                text(get(&client, uri(server.addr, "/hello")).await).await,
                hello()
            );
        }
        let requests = (0..200).map(|_| {
            let client = client.clone();
            async move { text(get(&client, uri(server.addr, "/slow")).await).await }
        });
        for reply in futures_util::future::join_all(requests).await {
            assert_eq!(reply, "slow");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("500 sequential and 200 concurrent requests against a limit of 10 never hang");
}

#[tokio::test]
async fn a_pinned_key_that_does_not_match_names_both_keys_in_the_error_chain() {
    let server = serve(listen().await, SERVER, service_fn(app));
    let wrong: PeerId = ident(9).peer_id();
    let seen = ident(2).peer_id();
    let endpoint = Endpoint::new(server.addr).expect_peer(wrong);
    let (client, _pool) = client_with(true, &["h2"], Pool::builder(), |c| {
        c.route("pinned.test", endpoint)
    });
    let err = client
        .request(Request::get("http://pinned.test/hello").body(empty()).unwrap())
        .await
        .unwrap_err();
    let chain = chain(&err);
    let mismatch = chain
        .iter()
        .find(|e| e.contains(&wrong.to_string()) && e.contains(&seen.to_string()));
    assert!(mismatch.is_some(), "no link names both keys: {chain:#?}");
    // hyper-util says only "client error (Connect)"; its source, weft's
    // connector error, carries the whole cause in its own text.
    assert!(
        chain
            .get(1)
            .is_some_and(|e| e.contains("dialing") && e.contains(&wrong.to_string())),
        "{chain:#?}"
    );
}

#[tokio::test]
async fn the_client_learns_the_protocol_and_the_peer_and_the_server_the_caller() {
    let server = serve(listen().await, SERVER, service_fn(app));
    let endpoint = Endpoint::new(server.addr).expect_peer(ident(2).peer_id());
    let (client, _pool) = client_with(true, &["h2"], Pool::builder(), |c| {
        c.route("api.test", endpoint).http2()
    });
    let response = get(&client, "http://api.test/hello".parse().unwrap()).await;
    assert_eq!(response.version(), http::Version::HTTP_2, "Connected said h2");
    let info = response
        .extensions()
        .get::<PeerInfo>()
        .cloned()
        .expect("PeerInfo extra");
    assert_eq!(info.id, Some(ident(2).peer_id()));
    assert_eq!(info.protocol.as_deref(), Some("h2"));
    assert_eq!(text(response).await, format!("hello, {}", ident(1).peer_id()));
    // An authority with no route is not guessed at.
    let err = client
        .request(Request::get("http://elsewhere.test/").body(empty()).unwrap())
        .await
        .unwrap_err();
    assert!(chain(&err).iter().any(|e| e.contains("no route")), "{err:?}");
}

#[tokio::test]
async fn graceful_shutdown_finishes_requests_in_flight_and_a_restarted_server_is_reached() {
    let listener = listen().await;
    let addr = listener.local_addr().unwrap();
    let server = serve(listener, SERVER, service_fn(app));
    let (client, pool) = client_with(true, &["http/1.1"], Pool::builder(), |c| c);
    assert_eq!(text(get(&client, uri(addr, "/hello")).await).await, hello());
    // A request in flight when the shutdown starts still gets its answer.
    let slow = tokio::spawn({
        let client = client.clone();
        async move { text(get(&client, uri(addr, "/slow-counted")).await).await }
    });
    let started = std::time::Instant::now();
    while SLOW_COUNTED_STARTED.load(SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the request never started"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.shutdown().await;
    assert_eq!(slow.await.unwrap(), "slow");
    // The restarted server (same port) answers the next request.
    let server = serve(TcpListener::bind(addr).await.unwrap(), SERVER, service_fn(app));
    assert_eq!(text(get(&client, uri(addr, "/hello")).await).await, hello());
    assert_eq!(server.tcp.load(SeqCst), 1);
    assert_eq!(pool.stats().dials, 2);
}

/// A request whose handler never answers does not hold a graceful
/// shutdown past the server's `shutdown_timeout`: its connection is
/// closed and the server's future completes (before, `http::serve`
/// waited forever).
#[tokio::test]
async fn a_graceful_shutdown_closes_what_is_left_at_the_shutdown_timeout() {
    let listener = listen().await;
    let addr = listener.local_addr().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let seen = started.clone();
    let never = service_fn(move |_: Request<Incoming>| {
        seen.fetch_add(1, SeqCst);
        std::future::pending::<Result<Response<Body>, Infallible>>()
    });
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(EncryptLayer::new(ident(2)))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["h2", "http/1.1"]))
        .service(TcpAcceptor::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        weft::http::serve(listener, acceptor, never)
            .shutdown_timeout(Duration::from_millis(300))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            }),
    );
    let (client, _pool) = client_with(true, &["http/1.1"], Pool::builder(), |c| c);
    let request = tokio::spawn(async move { client.get(uri(addr, "/hang")).await });
    let waiting = std::time::Instant::now();
    while started.load(SeqCst) == 0 {
        assert!(
            waiting.elapsed() < Duration::from_secs(10),
            "the request never started"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let _ = stop.send(());
    let shutting = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the shutdown ends at its timeout")
        .unwrap()
        .unwrap();
    assert!(
        shutting.elapsed() >= Duration::from_millis(250),
        "the request had its time: {:?}",
        shutting.elapsed()
    );
    // The request in flight fails: its connection was closed.
    let answer = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .expect("the request ends with its connection")
        .unwrap();
    assert!(answer.is_err(), "{answer:?}");
}

#[tokio::test]
async fn an_axum_router_over_weft_sees_the_callers_identity() {
    use axum::{extract::Extension, routing::get as route_get, Router};
    let router: Router = Router::new().route(
        "/whoami",
        route_get(|Extension(peer): Extension<PeerInfo>| async move {
            format!("{}", peer.id.expect("an authenticated caller"))
        }),
    );
    let server = serve(listen().await, SERVER, router);
    let (client, _pool) = client_with(true, &["h2", "http/1.1"], Pool::builder(), |c| c);
    let response = get(&client, uri(server.addr, "/whoami")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, ident(1).peer_id().to_string());
}

/// A weft stream as tonic's server wants its connections: with the peer's
/// identity as its connect info.
struct TonicIo(weft::mux::Stream);

impl tonic::transport::server::Connected for TonicIo {
    type ConnectInfo = Option<PeerId>;
    fn connect_info(&self) -> Option<PeerId> {
        self.0.peer().copied()
    }
}

impl tokio::io::AsyncRead for TonicIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TonicIo {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn tonic_unary_and_server_streaming_calls_ride_weft_both_ways() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };

    // The server: tonic's own, fed the streams of accepted weft
    // connections.
    let listener = listen().await;
    let addr = listener.local_addr().unwrap();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("weft.test", tonic_health::ServingStatus::Serving)
        .await;
    let (streams_tx, streams_rx) = tokio::sync::mpsc::channel::<Result<TonicIo, weft::Error>>(16);
    tokio::spawn(async move {
        let acceptor = ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(RecordSizeLayer::dynamic())
            .layer(EncryptLayer::new(ident(2)))
            .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["h2"]))
            .service(TcpAcceptor::new());
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, streams) = (acceptor.clone(), streams_tx.clone());
            tokio::spawn(async move {
                use weft::handshake::HandshakeExt;
                let conn = acceptor.clone().accept_transport(tcp).await.unwrap();
                let mut incoming = conn.incoming();
                while let Some(stream) = incoming.next().await {
                    if streams.send(stream.map(TonicIo)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let incoming = stream::unfold(
        streams_rx,
        |mut rx| async move { rx.recv().await.map(|s| (s, rx)) },
    );
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health)
            .serve_with_incoming(incoming),
    );

    // The client: tonic's Channel over the connector.
    let (_, pool) = client_with(true, &["h2"], Pool::builder(), |c| c);
    let connector =
        Connector::new(pool).route("health.test", Endpoint::new(addr).expect_peer(ident(2).peer_id()));
    let channel = tonic::transport::Endpoint::from_static("http://health.test")
        .connect_with_connector(connector)
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);

    // Unary.
    let reply = client
        .check(HealthCheckRequest {
            service: "weft.test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.status(), ServingStatus::Serving);

    // Server streaming: the current status, then each change.
    let mut watch = client
        .watch(HealthCheckRequest {
            service: "weft.test".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::Serving
    );
    reporter
        .set_service_status("weft.test", tonic_health::ServingStatus::NotServing)
        .await;
    assert_eq!(
        watch.message().await.unwrap().unwrap().status(),
        ServingStatus::NotServing
    );
}

#[tokio::test]
async fn host_names_resolve_and_a_required_protocol_is_checked() {
    let server = serve(listen().await, SERVER, service_fn(app));
    let port = server.addr.port();
    // weft://localhost:PORT: the name is resolved on the dial, each
    // address tried in turn (this server listens on 127.0.0.1 only).
    let (client, pool) = client_with(true, &["http/1.1"], Pool::builder(), |c| c);
    let uri: http::Uri = format!("weft://localhost:{port}/hello").parse().unwrap();
    assert_eq!(text(get(&client, uri).await).await, hello());
    assert_eq!(pool.stats().dials, 1);
    // An endpoint that requires h2, against a Setup that agreed
    // http/1.1: the dial fails and says what was agreed.
    let strict = Endpoint::host("localhost", port).protocol("h2");
    let err = pool.open(strict.clone()).await.unwrap_err();
    match &err {
        weft::pool::PoolError::Protocol { endpoint, agreed } => {
            assert_eq!(endpoint, &strict);
            assert_eq!(agreed.as_deref(), Some("http/1.1"));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("localhost"), "{err}");
}

#[tokio::test]
async fn each_stream_speaks_http1_unless_h2_is_asked_for_by_the_connector_or_the_endpoint() {
    // The connection agrees h2 (the server's first choice) every time.
    let server = serve(listen().await, SERVER, service_fn(app));
    let pinned = || Endpoint::new(server.addr).expect_peer(ident(2).peer_id());
    let version = |client: Client<Connector<ClientStack>, Body>, uri: &'static str| async move {
        let response = get(&client, uri.parse().unwrap()).await;
        let info = response
            .extensions()
            .get::<PeerInfo>()
            .cloned()
            .expect("PeerInfo");
        assert_eq!(info.protocol.as_deref(), Some("h2"), "the connection agreed h2");
        let version = response.version();
        assert_eq!(text(response).await, format!("hello, {}", ident(1).peer_id()));
        version
    };
    let protocols = &["h2", "http/1.1"];
    // By default: HTTP/1.1 on each stream.
    let (client, _pool) = client_with(true, protocols, Pool::builder(), |c| c.route("a.test", pinned()));
    assert_eq!(
        version(client, "http://a.test/hello").await,
        http::Version::HTTP_11
    );
    // The connector asked for h2.
    let (client, _pool) = client_with(true, protocols, Pool::builder(), |c| {
        c.route("a.test", pinned()).http2()
    });
    assert_eq!(
        version(client, "http://a.test/hello").await,
        http::Version::HTTP_2
    );
    // The endpoint requires h2.
    let (client, _pool) = client_with(true, protocols, Pool::builder(), |c| {
        c.route("a.test", pinned().protocol("h2"))
    });
    assert_eq!(
        version(client, "http://a.test/hello").await,
        http::Version::HTTP_2
    );
}
