//! The generated code (`weft-build`, here from build.rs over
//! proto/examples/echo.proto) end to end over encrypted loopback TCP:
//! every kind of call through `EchoClient` and `EchoServer`, metadata
//! both ways, tower's retry layer between the generated client and the
//! raw one, and `max_concurrent_calls`.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use futures_util::{stream, StreamExt};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tower::{retry::Policy, ServiceBuilder};
use weft::{
    handshake::Versions,
    mux,
    pool::{Endpoint, Pool},
    rpc::{
        client::{Client, RawCall, RawReply},
        server::Server,
        Code, Request, Response, Status, Streaming,
    },
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
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

fn request(text: &str) -> EchoRequest {
    EchoRequest {
        text: text.to_owned(),
        ..EchoRequest::default()
    }
}

fn reply(text: impl Into<String>) -> EchoReply {
    EchoReply {
        text: text.into(),
        ..EchoReply::default()
    }
}

/// What the handlers saw.
#[derive(Default)]
struct Seen {
    /// Say handlers running now, and the most at once.
    running: AtomicUsize,
    most: AtomicUsize,
    /// Set when Say first failed a "fail-once" call with UNAVAILABLE.
    failed_once: AtomicBool,
    /// Say handlers that ran.
    says: AtomicUsize,
}

/// The implementation: Say echoes (sleeping `sleep-ms` from the metadata,
/// failing once with UNAVAILABLE when asked, and answering the
/// `echo-me` metadata as `echoed`), Expand counts, Collect joins, Chat
/// answers each request.
struct MyEcho {
    seen: Arc<Seen>,
}

impl Echo for MyEcho {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        self.seen.says.fetch_add(1, SeqCst);
        let now = self.seen.running.fetch_add(1, SeqCst) + 1;
        self.seen.most.fetch_max(now, SeqCst);
        let sleep = request.metadata().get("sleep-ms").and_then(|ms| ms.parse().ok());
        if let Some(ms) = sleep {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        self.seen.running.fetch_sub(1, SeqCst);
        if request.metadata().contains_key("fail-once") && !self.seen.failed_once.swap(true, SeqCst) {
            return Err(Status::unavailable("not yet; try again"));
        }
        let mut response = Response::new(EchoReply {
            text: request.get_ref().text.clone(),
            payload: request.get_ref().payload.clone(),
        });
        if let Some(value) = request.metadata().get("echo-me") {
            response.metadata_mut().insert("echoed", value);
        }
        if let Some(peer) = request.peer() {
            response.metadata_mut().insert("peer", peer.to_string());
        }
        Ok(response)
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let ExpandRequest { text, count } = request.into_inner();
        let replies = stream::iter((0..count).map(move |i| Ok(reply(format!("{text} {i}")))));
        let mut response = Response::new(Box::pin(replies) as ReplyStream<EchoReply>);
        response.metadata_mut().insert("count", count.to_string());
        Ok(response)
    }

    async fn collect(&self, request: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        let separator = request
            .metadata()
            .get("separator")
            .map(str::to_owned)
            .unwrap_or_default();
        let mut requests = request.into_inner();
        let mut parts = Vec::new();
        while let Some(part) = requests.message().await? {
            parts.push(part.text);
        }
        Ok(Response::new(reply(parts.join(&separator))))
    }

    async fn chat(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let replies = request
            .into_inner()
            .map(|said| said.map(|said| reply(format!("re: {}", said.text))));
        Ok(Response::new(Box::pin(replies)))
    }
}

struct Fixture {
    addr: SocketAddr,
    /// A clone of the server's service: it shares the service's turns.
    echo: EchoServer<MyEcho>,
    seen: Arc<Seen>,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<std::io::Result<()>>,
}

impl Fixture {
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.server.await.unwrap().unwrap();
    }
}

/// A server with the generated `EchoServer`, at most `limit` calls at
/// once if given.
async fn server(limit: Option<usize>) -> Fixture {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(1000))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(2)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let mut echo = EchoServer::new(MyEcho { seen: seen.clone() });
    if let Some(limit) = limit {
        echo = echo.max_concurrent_calls(limit);
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let signal = async move {
        let _ = stopped.await;
    };
    let kept = echo.clone();
    let server = tokio::spawn(
        Server::builder()
            .add_service(echo)
            .serve_with_shutdown(listener, acceptor, signal),
    );
    Fixture {
        addr,
        echo: kept,
        seen,
        stop: Some(stop),
        server,
    }
}

type Dialer = weft::stack::Multiplex<
    weft::stack::RecordSize<weft::stack::Encrypt<weft::stack::Negotiate<TcpConnector>>>,
>;

/// The raw client: calls to the server at `addr`, pinned to its identity.
fn raw_client(addr: SocketAddr) -> Client<Dialer> {
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    Client::new(pool, Endpoint::new(addr).expect_peer(ident(2).peer_id()))
}

fn client(addr: SocketAddr) -> EchoClient<Client<Dialer>> {
    EchoClient::new(raw_client(addr))
}

#[tokio::test]
async fn unary_say_echoes_with_metadata_both_ways() {
    let f = server(None).await;
    let mut echo = client(f.addr);

    // A bare message.
    let reply = echo.say(request("hi")).await.unwrap();
    assert_eq!(reply.get_ref().text, "hi");
    assert!(!reply.metadata().contains_key("echoed"));

    // A Request, with metadata there and back, and the caller's identity.
    let mut said = Request::new(EchoRequest {
        text: "with metadata".into(),
        payload: vec![7; 100_000],
    });
    said.metadata_mut().insert("echo-me", "42");
    let reply = echo.say(said).await.unwrap();
    assert_eq!(reply.get_ref().text, "with metadata");
    assert_eq!(reply.get_ref().payload, vec![7; 100_000]);
    assert_eq!(reply.metadata().get("echoed"), Some("42"));
    assert_eq!(
        reply.metadata().get("peer"),
        Some(ident(1).peer_id().to_string().as_str())
    );
    f.shutdown().await;
}

#[tokio::test]
async fn server_streaming_expand_sends_count_replies() {
    let f = server(None).await;
    let mut echo = client(f.addr);
    let response = echo
        .expand(ExpandRequest {
            text: "n".into(),
            count: 5,
        })
        .await
        .unwrap();
    assert_eq!(response.metadata().get("count"), Some("5"));
    let mut replies = response.into_inner();
    let mut got = Vec::new();
    while let Some(reply) = replies.message().await.unwrap() {
        got.push(reply.text);
    }
    assert_eq!(got, ["n 0", "n 1", "n 2", "n 3", "n 4"]);

    // No replies at all is a stream that ends with OK, too.
    let replies: Vec<_> = echo
        .expand(ExpandRequest {
            text: "none".into(),
            count: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .collect()
        .await;
    assert!(replies.is_empty(), "{replies:?}");
    f.shutdown().await;
}

#[tokio::test]
async fn client_streaming_collect_concatenates() {
    let f = server(None).await;
    let mut echo = client(f.addr);

    // A bare stream.
    let parts = stream::iter(["a", "b", "c"].map(request));
    let joined = echo.collect(parts).await.unwrap();
    assert_eq!(joined.get_ref().text, "abc");

    // A Request around one, with metadata the handler reads.
    let mut parts = Request::new(stream::iter(["x", "y", "z"].map(request)));
    parts.metadata_mut().insert("separator", "-");
    assert_eq!(echo.collect(parts).await.unwrap().into_inner().text, "x-y-z");

    // No requests.
    assert_eq!(echo.collect(stream::empty()).await.unwrap().into_inner().text, "");
    f.shutdown().await;
}

#[tokio::test]
async fn bidirectional_chat_answers_each_request_as_it_comes() {
    let f = server(None).await;
    let mut echo = client(f.addr);
    let (tx, rx) = tokio::sync::mpsc::channel::<EchoRequest>(1);
    let requests = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut chat = echo.chat(requests).await.unwrap().into_inner();
    // Ping-pong: each reply comes before the next request is sent.
    for word in ["one", "two", "three"] {
        tx.send(request(word)).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), chat.message())
            .await
            .expect("a reply before the next request")
            .unwrap()
            .unwrap();
        assert_eq!(answer.text, format!("re: {word}"));
    }
    drop(tx);
    assert!(chat.message().await.unwrap().is_none(), "ends with OK");
    f.shutdown().await;
}

#[tokio::test]
async fn a_method_the_server_does_not_have_is_unimplemented() {
    let f = server(None).await;
    let mut raw = raw_client(f.addr);
    let err = weft::rpc::client::unary::<_, EchoRequest, EchoReply>(
        &mut raw,
        "weft.examples.Echo/Shout",
        Request::new(request("x")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    // The server goes on.
    let mut echo = EchoClient::new(raw);
    assert_eq!(
        echo.say(request("after")).await.unwrap().into_inner().text,
        "after"
    );
    f.shutdown().await;
}

/// tower's retry policy: a call that failed with UNAVAILABLE is made
/// again, once, if it can be (`RawCall::try_clone`: calls with one
/// request message).
#[derive(Clone)]
struct RetryUnavailableOnce {
    left: usize,
    retries: Arc<AtomicUsize>,
}

impl Policy<RawCall, RawReply, Status> for RetryUnavailableOnce {
    type Future = std::future::Ready<()>;

    fn retry(&mut self, _call: &mut RawCall, result: &mut Result<RawReply, Status>) -> Option<Self::Future> {
        match result {
            Err(status) if status.code() == Code::Unavailable && self.left > 0 => {
                self.left -= 1;
                self.retries.fetch_add(1, SeqCst);
                Some(std::future::ready(()))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, call: &RawCall) -> Option<RawCall> {
        call.try_clone()
    }
}

#[tokio::test]
async fn a_retry_layer_around_the_raw_client_retries_unavailable_once() {
    let f = server(None).await;
    let retries = Arc::new(AtomicUsize::new(0));
    let retrying = ServiceBuilder::new()
        .retry(RetryUnavailableOnce {
            left: 1,
            retries: retries.clone(),
        })
        .service(raw_client(f.addr));
    let mut echo = EchoClient::new(retrying);

    let mut said = Request::new(request("second time lucky"));
    said.metadata_mut().insert("fail-once", String::new());
    let reply = echo.say(said).await.unwrap();
    assert_eq!(reply.into_inner().text, "second time lucky");
    assert!(f.seen.failed_once.load(SeqCst), "the first call failed");
    assert_eq!(retries.load(SeqCst), 1);
    assert_eq!(f.seen.says.load(SeqCst), 2, "the handler ran twice");

    // A streaming call cannot be made again (`try_clone` is None), and
    // goes through the layer as it is.
    let parts = stream::iter(["a", "b"].map(request));
    assert_eq!(echo.collect(parts).await.unwrap().into_inner().text, "ab");
    assert_eq!(retries.load(SeqCst), 1);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_calls_8_runs_8_of_64_callers_at_once_and_serves_all() {
    let f = server(Some(8)).await;
    let echo = client(f.addr);
    let calls = (0..64).map(|i| {
        let mut echo = echo.clone();
        tokio::spawn(async move {
            let mut said = Request::new(request(&i.to_string()));
            said.metadata_mut().insert("sleep-ms", "20");
            echo.say(said).await
        })
    });
    for (i, reply) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply.unwrap().unwrap().into_inner().text, i.to_string());
    }
    assert_eq!(f.seen.says.load(SeqCst), 64);
    assert_eq!(f.seen.most.load(SeqCst), 8, "at most 8 at once, and 8 reached");
    f.shutdown().await;
}

/// A Chat begun, one request answered: the requests' sender, and the
/// replies.
async fn chat_under_way(
    echo: &mut EchoClient<Client<Dialer>>,
) -> (tokio::sync::mpsc::Sender<EchoRequest>, Streaming<EchoReply>) {
    let (tx, rx) = tokio::sync::mpsc::channel::<EchoRequest>(1);
    let requests = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut chat = echo.chat(requests).await.unwrap().into_inner();
    tx.send(request("hello")).await.unwrap();
    assert_eq!(chat.message().await.unwrap().unwrap().text, "re: hello");
    (tx, chat)
}

#[tokio::test]
async fn a_streaming_call_keeps_its_turn_until_its_last_reply() {
    let f = server(Some(1)).await;
    let mut echo = client(f.addr);
    let (tx, mut chat) = chat_under_way(&mut echo).await;

    // The chat holds the one turn: a Say waits, and is told before its
    // deadline that it never ran.
    let mut other = echo.clone();
    let mut said = Request::new(request("blocked"));
    said.set_timeout(Duration::from_millis(200));
    let err = other.say(said).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("never ran"), "{err:?}");
    // Given up a tenth of its timeout before its deadline.
    assert!(err.message().contains("waited 180 ms of its 200 ms"), "{err:?}");
    assert_eq!(f.seen.says.load(SeqCst), 0);

    // The chat's end returns it.
    drop(tx);
    assert!(chat.message().await.unwrap().is_none());
    assert_eq!(
        other.say(request("free")).await.unwrap().into_inner().text,
        "free"
    );
    f.shutdown().await;
}

/// The limit is the service's readiness, as with tower's
/// `ConcurrencyLimit`: while a call holds the one turn, `poll_ready` on
/// any clone of the service is pending (so `LoadShed` around it sheds and
/// a balancer sees the load); the turn comes back when the call ends, and
/// a turn taken in `poll_ready` but never used comes back when its clone
/// is dropped.
#[tokio::test]
async fn a_limited_server_is_not_ready_while_its_turns_are_taken() {
    use futures_util::FutureExt;
    use tower::Service;
    let f = server(Some(1)).await;
    let mut kept = f.echo.clone();
    let ready = |service: &mut EchoServer<MyEcho>| {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .now_or_never()
            .map(|ready| ready.expect("readiness never fails"))
    };
    assert!(ready(&mut kept).is_some(), "a free turn: ready");
    drop(kept);

    let mut echo = client(f.addr);
    let (tx, mut chat) = chat_under_way(&mut echo).await;
    let mut other = f.echo.clone();
    assert!(ready(&mut other).is_none(), "the chat holds the turn: not ready");

    drop(tx);
    assert!(chat.message().await.unwrap().is_none());
    tokio::time::timeout(
        Duration::from_secs(5),
        std::future::poll_fn(|cx| other.poll_ready(cx)),
    )
    .await
    .expect("the chat's end gives the turn back")
    .unwrap();
    // `other` holds it, unused: a third waits until `other` is dropped.
    let mut third = f.echo.clone();
    assert!(ready(&mut third).is_none(), "the turn is held by a ready clone");
    drop(other);
    assert!(ready(&mut third).is_some(), "a dropped clone's turn comes back");
    drop(third);
    assert_eq!(echo.say(request("free")).await.unwrap().into_inner().text, "free");
    f.shutdown().await;
}
