//! Servers on listeners other than TCP (`weft::transport::Listener`): the
//! RPC server with HTTP beside it on a Unix domain socket, reached through
//! a pool at `Endpoint::unix` (the same pool dialing TCP too); `http::serve` on a stream of
//! in-memory pipes (`Incoming`), which stops when the stream ends; and the
//! connection limit on transports without a peer address.

#![cfg(unix)]

use std::{path::PathBuf, time::Duration};

use axum::{extract::Extension, routing::get, Router};
use bytes::Bytes;
use futures_util::stream;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tower::ServiceBuilder;
use weft::{
    handshake::{HandshakeExt, Versions},
    http::PeerInfo,
    mux,
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server},
    transport::{Connector, ExistingTransport, Incoming, TcpAcceptor, TcpConnector},
    Identity, MultiplexLayer, NegotiateLayer,
};

#[path = "support/echo.rs"]
mod echo;
mod support;

use echo::{EchoClient, EchoRequest, Say};
use support::{ident, mux_stack};

/// `Say` answers its text, who asked, and from which address (none over a
/// Unix socket).
fn say_who() -> Say {
    Say::new(|request| {
        let peer = request.peer().map(ToString::to_string).unwrap_or_default();
        Ok(format!(
            "{} from {peer} at {:?}",
            request.get_ref().text,
            request.remote_addr()
        ))
    })
}

/// A socket path of this test's own, removed when dropped.
struct SocketPath(PathBuf);

impl SocketPath {
    fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("weft-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        Self(path)
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const PROTOCOLS: [&str; 2] = ["h2", "http/1.1"];

#[tokio::test]
async fn rpc_and_http_serve_on_a_unix_socket_through_a_pool() {
    let path = SocketPath::new("rpc");
    let listener = UnixListener::bind(&path.0).unwrap();
    let acceptor = mux_stack(ident(2), &PROTOCOLS, ExistingTransport::new());
    let app: Router = Router::new().route(
        "/hello",
        get(|Extension(peer): Extension<PeerInfo>| async move {
            format!(
                "hello, {} at {:?}",
                peer.id.expect("an authenticated caller"),
                peer.addr
            )
        }),
    );
    let server = Server::builder().add_service(say_who().server()).with_http(app);
    tokio::spawn(server.serve(listener, acceptor));

    // The standard connector dials the socket's path; the same pool
    // reaches a TCP server too.
    let dialer = mux_stack(ident(1), &PROTOCOLS, Connector::new());
    let pool = Pool::builder().build(dialer);
    let endpoint = Endpoint::unix(&path.0).expect_peer(ident(2).peer_id());
    assert_eq!(
        endpoint.target().to_string(),
        format!("unix:{}", path.0.display())
    );
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tcp_endpoint = Endpoint::new(tcp.local_addr().unwrap()).expect_peer(ident(2).peer_id());
    tokio::spawn(
        Server::builder()
            .add_service(say_who().server())
            .serve(tcp, mux_stack(ident(2), &PROTOCOLS, TcpAcceptor::new())),
    );
    let caller = ident(1).peer_id().to_string();

    let mut echo = EchoClient::new(Client::new(pool.clone(), endpoint.clone()));
    for text in ["hi", "again"] {
        let said = echo
            .say(EchoRequest {
                text: text.into(),
                ..EchoRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(said.into_inner().text, format!("{text} from {caller} at None"));
    }

    // HTTP/1.1 on a stream of the same connection.
    let stream = pool.open(endpoint.clone()).await.unwrap();
    let body = get_over_http1(stream, "/hello", "app.test").await;
    assert_eq!(body, format!("hello, {caller} at None").as_bytes());
    assert_eq!(pool.stats().dials, 1, "{:?}", pool.stats());

    let mut over_tcp = EchoClient::new(Client::new(pool.clone(), tcp_endpoint));
    let said = over_tcp
        .say(EchoRequest::default())
        .await
        .unwrap()
        .into_inner()
        .text;
    assert!(said.contains("at Some(127.0.0.1:"), "{said}");
    assert_eq!(pool.stats().dials, 2, "{:?}", pool.stats());

    // A TCP-only connector says what it cannot dial.
    let tcp_only = Pool::builder().build(mux_stack(ident(1), &PROTOCOLS, TcpConnector::new()));
    let err = tcp_only.open(endpoint).await.unwrap_err();
    let chain: Vec<String> = std::iter::successors(Some(&err as &dyn std::error::Error), |e| e.source())
        .map(ToString::to_string)
        .collect();
    assert!(
        chain
            .iter()
            .any(|cause| cause.contains("is a Unix socket: dial it with transport::Connector")),
        "{chain:?}"
    );
}

/// A dialer over in-memory pipes.
fn pipe_dialer(
    identity: Identity,
) -> impl tower::Service<
    weft::handshake::Handshake<tokio::io::DuplexStream>,
    Response = weft::mux::Connection,
    Error = weft::Error,
    Future: Send,
> {
    mux_stack(identity, &[], ExistingTransport::new())
}

#[tokio::test]
async fn http_serve_takes_a_stream_of_pipes_and_stops_when_it_ends() {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (ours_too, theirs_too) = tokio::io::duplex(64 * 1024);
    // The server's connections: two pipes, then the stream ends.
    let incoming = Incoming::new(stream::iter([Ok(theirs), Ok(theirs_too)]));
    let acceptor = mux_stack(ident(2), &[], ExistingTransport::new());
    let app: Router = Router::new().route(
        "/",
        get(|Extension(peer): Extension<PeerInfo>| async move {
            format!("{} at {:?}", peer.id.expect("an authenticated caller"), peer.addr)
        }),
    );
    let server = tokio::spawn(async move { weft::http::serve(incoming, acceptor, app).await });

    let caller = ident(1).peer_id();
    let mut replies = Vec::new();
    for pipe in [ours, ours_too] {
        let conn = pipe_dialer(ident(1)).dial(pipe).await.unwrap();
        assert_eq!(conn.peer(), Some(&ident(2).peer_id()));
        let stream = conn.open().await.unwrap();
        replies.push(get_over_http1(stream, "/", "pipe.test").await);
        conn.close(weft::CloseCode::NO_ERROR, "done");
    }
    assert_eq!(replies, vec![Bytes::from(format!("{caller} at None")); 2]);

    // The stream has ended and both connections closed: the server stops.
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops once its listener ends")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn max_connections_counts_connections_without_an_address() {
    let path = SocketPath::new("limit");
    let listener = UnixListener::bind(&path.0).unwrap();
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let server = Server::builder()
        .max_connections(1)
        .max_connections_per_address(1)
        .add_service(say_who().server());
    tokio::spawn(server.serve(listener, acceptor));

    let mut dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let first = dialer
        .dial(UnixStream::connect(&path.0).await.unwrap())
        .await
        .unwrap();
    let second = dialer
        .dial(UnixStream::connect(&path.0).await.unwrap())
        .await
        .expect_err("one connection at most");
    let text = second.to_string();
    assert!(text.contains("connections"), "{text}");
    // The per-address limit has no address to count: the first stays.
    assert!(!first.is_closed());
    drop(first);
    // Its place is freed: another is served.
    let third = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let unix = UnixStream::connect(&path.0).await.unwrap();
            if let Ok(conn) = dialer.dial(unix).await {
                break conn;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a place once the first connection is gone");
    assert!(!third.is_closed());
}

/// An echo of each stream's bytes, as `weft::server::serve` runs it.
async fn echo(mut stream: weft::mux::Stream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = Vec::new();
    if stream.read_to_end(&mut request).await.is_ok() {
        let _ = stream.write_all(&request).await;
        let _ = stream.shutdown().await;
    }
}

#[tokio::test]
async fn mux_serve_runs_a_handler_per_stream_and_drains_at_shutdown() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let path = SocketPath::new("mux-serve");
    let listener = UnixListener::bind(&path.0).unwrap();
    let acceptor = mux_stack(ident(2), &[], ExistingTransport::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        weft::server::serve(listener, acceptor, echo).with_graceful_shutdown(async move {
            let _ = stopped.await;
        }),
    );
    let mut dialer = mux_stack(ident(1), &[], ExistingTransport::new());
    let conn = dialer
        .dial(UnixStream::connect(&path.0).await.unwrap())
        .await
        .unwrap();
    // Many streams at once, each echoed by a handler of its own.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..20u8 {
        let conn = conn.clone();
        calls.spawn(async move {
            let mut stream = conn.open().await.unwrap();
            stream.write_all(&[i; 100]).await.unwrap();
            stream.shutdown().await.unwrap();
            let mut back = Vec::new();
            stream.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, [i; 100]);
        });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    // A stream in flight when the shutdown starts still finishes; the
    // connection goes away, so a new stream is refused retryably, or finds
    // the connection drained and closed gracefully: either way, open it
    // elsewhere.
    let mut late = conn.open().await.unwrap();
    late.write_all(b"in flight").await.unwrap();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !conn.is_going_away() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a go-away at the shutdown");
    late.shutdown().await.unwrap();
    let mut back = Vec::new();
    late.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"in flight");
    let refused = conn.open().await.unwrap_err();
    assert!(refused.is_retryable() || refused.is_closed(), "{refused}");
    drop((late, conn));
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server ends once its connections drained")
        .unwrap()
        .unwrap();
}

/// A GET of `path` over HTTP/1.1 on one weft stream; the body of the reply.
async fn get_over_http1(
    stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    path: &str,
    host: &str,
) -> Bytes {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = http::Request::get(path)
        .header("host", host)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    response.into_body().collect().await.unwrap().to_bytes()
}
