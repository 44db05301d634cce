//! Early data (protocol version 3) for RPC and HTTP: over loopback TCP, the
//! generated client sends a call to a method the .proto marks idempotent
//! in its first flight through `Client::one_shot`, the server runs it and tells the
//! handler it came early; a call to any other method never goes early,
//! and one that arrives early anyway is not run. Over `http::serve`, a
//! safe request in early data is served and any other is answered
//! `425 Too Early` without running the service.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
};

use futures_util::stream;
use tokio::net::TcpListener;
use weft::{
    pool::Endpoint,
    rpc::{
        client::{self, Client, RawCall},
        server::Server,
        Code, Request, Response, Status, Streaming,
    },
    Identity,
};

pub mod echo {
    weft::include_proto!("weft.examples");
}

use echo::{
    echo_client::EchoClient,
    echo_server::{Echo, EchoServer, ReplyStream},
    EchoReply, EchoRequest, ExpandRequest,
};

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

/// Handlers that say whether their request came early, and count the
/// Collect calls that ran.
#[derive(Default)]
struct MyEcho {
    collects: Arc<AtomicUsize>,
    says: Arc<AtomicUsize>,
}

fn reply(text: String) -> EchoReply {
    EchoReply {
        text,
        ..EchoReply::default()
    }
}

fn early_or_late<T>(request: &Request<T>) -> &'static str {
    if request.is_early() {
        "early"
    } else {
        "late"
    }
}

impl Echo for MyEcho {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        self.says.fetch_add(1, SeqCst);
        let when = early_or_late(&request);
        Ok(Response::new(reply(format!(
            "{} ({when})",
            request.get_ref().text
        ))))
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let when = early_or_late(&request);
        let ExpandRequest { text, count } = request.into_inner();
        let replies = (0..count).map(move |i| Ok(reply(format!("{text} {i} ({when})"))));
        Ok(Response::new(Box::pin(stream::iter(replies))))
    }

    async fn collect(&self, request: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        self.collects.fetch_add(1, SeqCst);
        let when = early_or_late(&request);
        let mut requests = request.into_inner();
        let mut parts = Vec::new();
        while let Some(part) = requests.message().await? {
            parts.push(part.text);
        }
        Ok(Response::new(reply(format!("{} ({when})", parts.join("")))))
    }

    async fn chat(
        &self,
        _request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
}

/// A server that accepts early data, as `ident(2)`.
async fn server() -> (SocketAddr, Arc<AtomicUsize>) {
    let (addr, collects, _) = counting_server().await;
    (addr, collects)
}

/// The same, counting the Collect calls and the Say calls that ran.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (addr, collects, says, _) = watched_server().await;
    (addr, collects, says)
}

/// The same, and the calls its middleware saw.
async fn watched_server() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = {
        use tower::ServiceBuilder;
        use weft::{handshake::Versions, mux, transport::TcpAcceptor, *};
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(StreamLimitLayer::new(100))
            .layer(RecordSizeLayer::dynamic())
            .layer(EncryptLayer::new(ident(2)).accept_early_data())
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpAcceptor::new())
    };
    let echo = MyEcho::default();
    let (collects, says) = (echo.collects.clone(), echo.says.clone());
    let seen = Arc::new(AtomicUsize::new(0));
    let middleware = {
        let seen = seen.clone();
        tower::util::MapRequestLayer::new(move |call| {
            seen.fetch_add(1, SeqCst);
            call
        })
    };
    tokio::spawn(
        Server::builder()
            .layer(middleware)
            .add_service(EchoServer::new(echo))
            .serve(listener, acceptor),
    );
    (addr, collects, says, seen)
}

fn one_shot(addr: SocketAddr) -> Client<weft::stack::StandardDialer> {
    Client::one_shot(
        weft::dialer(ident(1)),
        Endpoint::new(addr).expect_peer(ident(2).peer_id()),
    )
}

fn say(text: &str) -> EchoRequest {
    EchoRequest {
        text: text.to_owned(),
        ..EchoRequest::default()
    }
}

#[tokio::test]
async fn methods_marked_idempotent_go_early_once_the_box_key_is_known() {
    let (addr, _) = server().await;
    let mut echo = EchoClient::new(one_shot(addr));
    // The first call learns the server's box key.
    let first = echo.say(say("hi")).await.unwrap();
    assert!(!first.is_early(), "the client sees it went late");
    assert_eq!(first.into_inner().text, "hi (late)");
    for _ in 0..3 {
        let again = echo.say(say("hi")).await.unwrap();
        assert!(again.is_early(), "the client sees it went early");
        assert_eq!(again.into_inner().text, "hi (early)");
    }
    let expanded = echo
        .expand(ExpandRequest {
            text: "n".into(),
            count: 2,
        })
        .await
        .unwrap();
    assert!(expanded.is_early(), "a streamed reply says so too");
    let mut expanded = expanded.into_inner();
    assert_eq!(expanded.message().await.unwrap().unwrap().text, "n 0 (early)");
    assert_eq!(expanded.message().await.unwrap().unwrap().text, "n 1 (early)");
    assert!(expanded.message().await.unwrap().is_none());
}

#[tokio::test]
async fn the_standard_acceptor_with_early_data_takes_the_second_call_early() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(EchoServer::new(MyEcho::default()))
            .serve(listener, weft::acceptor_with_early_data(ident(2))),
    );
    let mut echo = EchoClient::new(one_shot(addr));
    assert_eq!(echo.say(say("hi")).await.unwrap().into_inner().text, "hi (late)");
    assert_eq!(echo.say(say("hi")).await.unwrap().into_inner().text, "hi (early)");
}

#[tokio::test]
async fn a_pooled_client_sends_the_call_that_makes_it_dial_in_the_first_flight() {
    use weft::pool::Pool;
    let (addr, _) = server().await;
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    // Pools built on clones of one dialer share what it learns.
    let dialer = weft::dialer(ident(1));
    let pooled = |pool: &Pool<_>| EchoClient::new(Client::new(pool.clone(), endpoint.clone()));
    let first = Pool::builder().build(dialer.clone());
    let mut echo = pooled(&first);
    assert_eq!(echo.say(say("a")).await.unwrap().into_inner().text, "a (late)");
    // On the connection the first call made: an ordinary stream.
    assert_eq!(echo.say(say("b")).await.unwrap().into_inner().text, "b (late)");
    assert_eq!(first.stats().dials, 1);

    // A second pool's first call dials, and goes in that dial's first
    // flight; the next one finds the connection pooled.
    let second = Pool::builder().build(dialer.clone());
    let mut echo = pooled(&second);
    // The client sees which way each went on its reply, as the handler
    // did on its request.
    let (c, d) = (
        echo.say(say("c")).await.unwrap(),
        echo.say(say("d")).await.unwrap(),
    );
    assert_eq!((c.is_early(), &c.into_inner().text[..]), (true, "c (early)"));
    assert_eq!((d.is_early(), &d.into_inner().text[..]), (false, "d (late)"));
    let stats = second.stats();
    assert_eq!((stats.dials, stats.streams_opened), (1, 2), "{stats:?}");

    // A call that may not go early makes its dial wait for the handshake.
    let third = Pool::builder().build(dialer.clone());
    let collected = pooled(&third)
        .collect(stream::iter([say("e"), say("f")]))
        .await
        .unwrap()
        .into_inner()
        .text;
    assert_eq!(collected, "ef (late)");
}

#[tokio::test]
async fn a_method_not_marked_idempotent_never_goes_early_and_is_not_run_if_it_comes_early() {
    let (addr, collects, _, seen) = watched_server().await;
    // Clones share what their dialer learns.
    let shot = one_shot(addr);
    let mut echo = EchoClient::new(shot.clone());
    echo.say(say("learn the key")).await.unwrap();
    // Client streaming: not marked, never early.
    let collected = echo
        .collect(stream::iter([say("a"), say("b")]))
        .await
        .unwrap()
        .into_inner()
        .text;
    assert_eq!(collected, "ab (late)");
    assert_eq!(collects.load(SeqCst), 1);

    // A client that marks a call to it idempotent anyway: the call goes
    // early, and the server answers UNAVAILABLE without running it.
    let mut raw = shot.clone();
    let message = prost::Message::encode_to_vec(&say("x"));
    let call = RawCall::unary("weft.examples.Echo/Collect", Default::default(), message.into()).idempotent();
    let refused = match tower::ServiceExt::oneshot(&mut raw, call).await {
        Err(status) => status,
        Ok(reply) => reply
            .into_streaming::<EchoReply>()
            .into_inner()
            .message()
            .await
            .unwrap_err(),
    };
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("not marked idempotent"), "{refused:?}");
    assert!(
        refused.is_never_processed(),
        "the server said it did not run it: {refused:?}"
    );
    assert_eq!(collects.load(SeqCst), 1, "the handler did not run");
    assert_eq!(seen.load(SeqCst), 2, "nor did any middleware see it");

    // The same call, not marked: after the handshake, and run.
    let reply: Response<EchoReply> =
        client::unary(&mut raw, "weft.examples.Echo/Collect", Request::new(say("x")))
            .await
            .unwrap();
    assert_eq!(reply.into_inner().text, "x (late)");
    assert_eq!(collects.load(SeqCst), 2);
}

/// A proxy to `server` that forwards everything the client sends and,
/// back, only the server's first frame (its Setup): then it drops the
/// client's connection, as a network that fails mid-handshake does.
async fn cut_after_the_servers_setup(server: SocketAddr) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = tokio::net::TcpStream::connect(server).await.unwrap();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut up_read, mut up_write) = upstream.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut up_write).await;
            });
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                up_read.read_exact(&mut header).await.unwrap();
                let len = u32::from_be_bytes([0, header[1], header[2], header[3]]) as usize;
                let mut setup = vec![0u8; len];
                up_read.read_exact(&mut setup).await.unwrap();
                client_write
                    .write_all(&[&header[..], &setup].concat())
                    .await
                    .unwrap();
                // Everything after the Setup is lost; the server keeps
                // its end (and whatever it ran) until it notices.
                drop(client_write);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_dial_that_fails_after_its_call_went_early_is_not_reported_never_processed() {
    use weft::pool::Pool;
    let (addr, _, says) = counting_server().await;
    let dialer = weft::dialer(ident(1));
    let pinned = |addr| Endpoint::new(addr).expect_peer(ident(2).peer_id());
    // Learn the box key over a good path.
    let good = Pool::builder().build(dialer.clone());
    EchoClient::new(Client::new(good, pinned(addr)))
        .say(say("learn"))
        .await
        .unwrap();
    assert_eq!(says.load(SeqCst), 1);

    // Through a path that fails after the server's Setup: the call went in
    // the first flight, the server ran it, and the dial failed.
    let proxy = cut_after_the_servers_setup(addr).await;
    let flaky = Pool::builder().build(dialer.clone());
    let lost = EchoClient::new(Client::new(flaky.clone(), pinned(proxy)))
        .say(say("lost"))
        .await
        .unwrap_err();
    assert!(!lost.is_never_processed(), "it may have run (it did): {lost:?}");
    assert!(lost.message().contains("may have acted on it"), "{lost:?}");
    assert_eq!(says.load(SeqCst), 2, "the server ran the early call");

    // The same through one-shot clients, with the pool's dial.
    let shot = Client::one_shot(dialer.clone(), pinned(proxy));
    let lost = EchoClient::new(shot).say(say("lost again")).await.unwrap_err();
    assert!(!lost.is_never_processed(), "{lost:?}");
    assert_eq!(says.load(SeqCst), 3);

    // A dial that fails before anything is sent (no one listens): never
    // processed, safe to retry.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let refused = EchoClient::new(Client::one_shot(dialer.clone(), pinned(closed)))
        .say(say("nobody"))
        .await
        .unwrap_err();
    assert!(refused.is_never_processed(), "{refused:?}");
}

/// An HTTP server (`weft::http::serve`) that accepts early data, as
/// `ident(2)`; its service counts the requests it ran and says whether
/// each came early.
async fn http_server() -> (SocketAddr, Arc<AtomicUsize>) {
    use http_body_util::Full;
    use weft::http::PeerInfo;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = {
        use tower::ServiceBuilder;
        use weft::{handshake::Versions, mux, transport::TcpAcceptor, *};
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(EncryptLayer::new(ident(2)).accept_early_data())
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpAcceptor::new())
    };
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let app = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        counter.fetch_add(1, SeqCst);
        let early = request
            .extensions()
            .get::<PeerInfo>()
            .is_some_and(|info| info.early);
        // RFC 8470's header, for a handler that forwards the request.
        let marked = request
            .headers()
            .get("early-data")
            .is_some_and(|value| value == "1");
        assert_eq!(marked, early, "Early-Data: 1 exactly on early requests");
        let body = format!("{} {}", request.method(), if marked { "early" } else { "late" });
        async move { Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(bytes::Bytes::from(body)))) }
    });
    tokio::spawn(std::future::IntoFuture::into_future(weft::http::serve(
        listener, acceptor, app,
    )));
    (addr, ran)
}

/// Sends `request` (an HTTP/1.1 request, whole) as the first stream of a
/// new connection, early if it can; returns the response's head line and
/// body, and whether the stream went early.
async fn http_over_early_stream(
    dialer: &weft::stack::StandardDialer,
    addr: SocketAddr,
    request: &'static str,
) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use weft::handshake::{Handshake, HandshakeExt};
    let handshake = Handshake::dial(weft::transport::Target::from(addr))
        .expect_peer(ident(2).peer_id())
        .early_stream(bytes::Bytes::from_static(request.as_bytes()));
    let connection = dialer.clone().handshake(handshake).await.unwrap();
    let mut stream = connection.take_early_stream().unwrap();
    let early = stream.is_early();
    let mut response = Vec::new();
    let mut buf = [0u8; 1024];
    // Connection: close: the server ends the stream after the response.
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        response.extend_from_slice(&buf[..n]);
    }
    stream.shutdown().await.ok();
    let text = String::from_utf8_lossy(&response).into_owned();
    let head = text.lines().next().unwrap_or_default().to_owned();
    let body = text.rsplit("\r\n\r\n").next().unwrap_or_default().to_owned();
    (format!("{head} | {body}"), early)
}

#[tokio::test]
async fn http_serves_safe_methods_from_early_data_and_answers_others_too_early_without_running_them() {
    let (addr, ran) = http_server().await;
    let dialer = weft::dialer(ident(1));
    let get = "GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let post = "POST / HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
    // The first connection learns the box key.
    let (response, early) = http_over_early_stream(&dialer, addr, get).await;
    assert_eq!((response.as_str(), early), ("HTTP/1.1 200 OK | GET late", false));
    let (response, early) = http_over_early_stream(&dialer, addr, get).await;
    assert_eq!((response.as_str(), early), ("HTTP/1.1 200 OK | GET early", true));
    assert_eq!(ran.load(SeqCst), 2);
    // A POST in early data: 425, and the service never sees it.
    let (response, early) = http_over_early_stream(&dialer, addr, post).await;
    assert!(early);
    assert!(response.starts_with("HTTP/1.1 425"), "{response}");
    assert_eq!(ran.load(SeqCst), 2);
}
