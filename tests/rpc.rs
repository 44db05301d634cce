//! RPC over weft streams, end to end over encrypted loopback TCP: every
//! call kind, deadlines, cancellation, the statuses of unknown methods,
//! oversized messages and panics, load, per-service limits,
//! authorization, graceful shutdown. The service here is written by hand
//! against the runtime (`Call`, `Reply`); tests/rpc_codegen.rs runs the
//! generated code.

use std::{
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use futures_util::{stream, StreamExt};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tower::{Service, ServiceBuilder};
use weft::{
    handshake::{Handshake, HandshakeExt, PeerId, Versions},
    mux,
    pool::{Endpoint, Pool},
    rpc::{
        client::{self, Client},
        codegen::Limit,
        server::{AllowPeersLayer, Call, NamedService, Reply, Server},
        Code, Request, Response, Status,
    },
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

mod support;

#[derive(Clone, PartialEq, prost::Message)]
struct Msg {
    #[prost(string, tag = "1")]
    text: String,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
    #[prost(uint32, tag = "3")]
    count: u32,
}

fn msg(text: &str) -> Msg {
    Msg {
        text: text.to_owned(),
        ..Msg::default()
    }
}

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

/// What the handlers saw.
#[derive(Default)]
struct Seen {
    /// Handlers running now, and the most at once.
    running: AtomicUsize,
    most: AtomicUsize,
    /// Handlers started, in all.
    started_calls: AtomicUsize,
    /// Handlers that were dropped before they finished.
    dropped: AtomicUsize,
    /// Set when a call first fails over to UNAVAILABLE, for retries.
    failed_once: AtomicBool,
    /// Replies `Flood` produced so far.
    produced: AtomicUsize,
    /// The requests `Slow` began to handle.
    started: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Where `Gated` takes its replies from, one at a time, as the test
    /// sends them.
    gated: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Msg>>>,
}

/// Counts a running handler, and a drop before it finished.
struct Running {
    seen: Arc<Seen>,
    finished: bool,
}

impl Running {
    fn new(seen: &Arc<Seen>) -> Self {
        let now = seen.running.fetch_add(1, SeqCst) + 1;
        seen.most.fetch_max(now, SeqCst);
        seen.started_calls.fetch_add(1, SeqCst);
        Self {
            seen: seen.clone(),
            finished: false,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.seen.running.fetch_sub(1, SeqCst);
        if !self.finished {
            self.seen.dropped.fetch_add(1, SeqCst);
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<Reply, Status>> + Send>>;

/// `test.Echo`: Say, Slow (sleeps `count` ms), Panic, Expand (`count`
/// replies), Gated (replies as the test sends them), PanicAfter (`count`
/// replies, then a panic), Flood (`count` replies of 64 KiB), Collect
/// (joins the requests), Chat (answers each request).
#[derive(Clone)]
struct Echo {
    seen: Arc<Seen>,
    limit: Limit,
}

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

impl Service<Call> for Echo {
    type Response = Reply;
    type Error = Status;
    type Future = BoxFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> BoxFuture {
        let seen = self.seen.clone();
        let limit = self.limit.clone();
        let method = call.method().rsplit('/').next().unwrap_or_default().to_owned();
        Box::pin(async move {
            let _turn = limit.acquire_for(&call).await?;
            let mut running = Running::new(&seen);
            let reply = match method.as_str() {
                "Say" => {
                    let request = call.into_request::<Msg>().await?;
                    let mut response = Response::new(request.get_ref().clone());
                    if let Some(v) = request.metadata().get("echo-me") {
                        response.metadata_mut().insert("echoed", v);
                    }
                    if let Some(peer) = request.peer() {
                        response.metadata_mut().insert("peer", peer.to_string());
                    }
                    if let Some(addr) = request.remote_addr() {
                        response.metadata_mut().insert("remote-addr", addr.to_string());
                    }
                    Reply::unary(response)
                }
                "Slow" => {
                    let request = call.into_request::<Msg>().await?;
                    seen.started
                        .lock()
                        .unwrap()
                        .insert(request.get_ref().text.clone());
                    tokio::time::sleep(Duration::from_millis(request.get_ref().count.into())).await;
                    Reply::unary(Response::new(request.into_inner()))
                }
                "FailOnce" => {
                    let request = call.into_request::<Msg>().await?;
                    if !seen.failed_once.swap(true, SeqCst) {
                        running.finished = true;
                        return Err(Status::unavailable("try again"));
                    }
                    Reply::unary(Response::new(request.into_inner()))
                }
                "Panic" => {
                    let _ = call.into_request::<Msg>().await?;
                    running.finished = true;
                    panic!("the handler fell over");
                }
                "Expand" => {
                    let request = call.into_request::<Msg>().await?.into_inner();
                    let replies = (0..request.count).map(move |i| Ok(msg(&format!("{} {i}", request.text))));
                    Reply::streaming(Response::new(stream::iter(replies)))
                }
                "Gated" => {
                    let _ = call.into_request::<Msg>().await?;
                    let rx = seen.gated.lock().unwrap().take().expect("a gate for the call");
                    let replies =
                        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (Ok(m), rx)) });
                    let mut response = Response::new(replies);
                    response.metadata_mut().insert("gated", "yes");
                    Reply::streaming(response)
                }
                "PanicAfter" => {
                    let request = call.into_request::<Msg>().await?.into_inner();
                    let replies = (0..).map(move |i| {
                        assert!(i < request.count, "the replies ran out");
                        Ok(msg(&format!("{i}")))
                    });
                    Reply::streaming(Response::new(stream::iter(replies)))
                }
                "Flood" => {
                    let request = call.into_request::<Msg>().await?.into_inner();
                    let seen = seen.clone();
                    let replies = (0..request.count).map(move |_| {
                        seen.produced.fetch_add(1, SeqCst);
                        Ok(Msg {
                            payload: vec![1; 64 * 1024],
                            ..msg("flood")
                        })
                    });
                    Reply::streaming(Response::new(stream::iter(replies)))
                }
                "Collect" => {
                    let mut requests = call.into_streaming_request::<Msg>().into_inner();
                    let mut joined = String::new();
                    while let Some(m) = requests.message().await? {
                        joined.push_str(&m.text);
                    }
                    Reply::unary(Response::new(msg(&joined)))
                }
                "Chat" => {
                    let requests = call.into_streaming_request::<Msg>().into_inner();
                    let replies = requests.map(|m| m.map(|m| msg(&format!("re: {}", m.text))));
                    Reply::streaming(Response::new(replies))
                }
                other => return Err(Status::unimplemented(format!("no {other}"))),
            };
            running.finished = true;
            Ok(reply)
        })
    }
}

struct Fixture {
    addr: SocketAddr,
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

/// A server with `test.Echo`, a per-service limit, and optionally only
/// these callers allowed, its other settings from `builder`.
async fn server(
    limit: Option<usize>,
    allow: Option<Vec<PeerId>>,
    builder: weft::rpc::server::Builder,
) -> Fixture {
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
    let echo = Echo {
        seen: seen.clone(),
        limit: Limit::new(limit),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let signal = async move {
        let _ = stopped.await;
    };
    let server = match allow {
        Some(peers) => tokio::spawn(
            builder
                .layer(AllowPeersLayer::new(peers))
                .add_service(echo)
                .serve_with_shutdown(listener, acceptor, signal),
        ),
        None => tokio::spawn(
            builder
                .add_service(echo)
                .serve_with_shutdown(listener, acceptor, signal),
        ),
    };
    Fixture {
        addr,
        seen,
        stop: Some(stop),
        server,
    }
}

type Dialer = weft::stack::Multiplex<
    weft::stack::RecordSize<weft::stack::Encrypt<weft::stack::Negotiate<TcpConnector>>>,
>;

fn client(addr: SocketAddr, identity: Identity) -> Client<Dialer> {
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(identity))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    Client::new(pool, Endpoint::new(addr).expect_peer(ident(2).peer_id()))
}

/// Waits until `done` holds, looking every 5 ms; fails after 10 s (a
/// bound on a hang, not a measure: the tests assert what happened).
async fn until(what: &str, done: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn say(client: &mut Client<Dialer>, text: &str) -> Result<Msg, Status> {
    Ok(client::unary(client, "test.Echo/Say", Request::new(msg(text)))
        .await?
        .into_inner())
}

#[tokio::test]
async fn every_kind_of_call_runs_end_to_end_with_metadata_both_ways() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));

    // Unary, with metadata there and back, and the caller's identity.
    let mut request = Request::new(msg("hi"));
    request.metadata_mut().insert("echo-me", "42");
    let reply: Response<Msg> = client::unary(&mut c, "test.Echo/Say", request).await.unwrap();
    assert_eq!(reply.get_ref().text, "hi");
    assert_eq!(reply.metadata().get("echoed"), Some("42"));
    assert_eq!(
        reply.metadata().get("peer"),
        Some(ident(1).peer_id().to_string().as_str())
    );
    // And its address, as tonic's `remote_addr`.
    let remote = reply.metadata().get("remote-addr").expect("the caller's address");
    assert!(remote.starts_with("127.0.0.1:"), "{remote}");

    // Server streaming.
    let mut expand = Request::new(msg("n"));
    expand.get_mut().count = 5;
    let mut replies = client::server_streaming::<_, Msg, Msg>(&mut c, "test.Echo/Expand", expand)
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(m) = replies.message().await.unwrap() {
        got.push(m.text);
    }
    assert_eq!(got, ["n 0", "n 1", "n 2", "n 3", "n 4"]);

    // Client streaming.
    let parts = stream::iter(["a", "b", "c"].map(msg));
    let joined: Response<Msg> = client::client_streaming(&mut c, "test.Echo/Collect", Request::new(parts))
        .await
        .unwrap();
    assert_eq!(joined.get_ref().text, "abc");

    // Bidirectional: each request answered as it comes.
    let (tx, rx) = tokio::sync::mpsc::channel::<Msg>(1);
    let requests = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut chat = client::streaming::<_, Msg, Msg, _>(&mut c, "test.Echo/Chat", Request::new(requests))
        .await
        .unwrap()
        .into_inner();
    for word in ["one", "two", "three"] {
        tx.send(msg(word)).await.unwrap();
        assert_eq!(chat.message().await.unwrap().unwrap().text, format!("re: {word}"));
    }
    drop(tx);
    assert!(chat.message().await.unwrap().is_none(), "ends with OK");
    f.shutdown().await;
}

#[tokio::test]
async fn a_call_past_its_deadline_is_deadline_exceeded_and_its_handler_dropped() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    let mut request = Request::new(Msg {
        count: 5_000,
        ..msg("slow")
    });
    request.set_timeout(Duration::from_millis(100));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    // The handler was dropped (by the client's reset or the server's own
    // deadline, whichever came first: the test below has only the latter).
    until("the handler is dropped", || f.seen.dropped.load(SeqCst) == 1).await;
    assert_eq!(f.seen.running.load(SeqCst), 0);
    f.shutdown().await;
}

/// A connection to the server at `addr` to write calls on by hand.
async fn raw_connection(addr: SocketAddr) -> mux::Connection {
    let mut dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    dialer
        .handshake(Handshake::dial(addr).expect_peer(ident(2).peer_id()))
        .await
        .unwrap()
}

/// A call's frame on the wire: its kind, its length, its payload.
fn frame(kind: u8, payload: Vec<u8>) -> Vec<u8> {
    let mut frame = vec![kind];
    prost::encoding::encode_varint(payload.len() as u64, &mut frame);
    frame.extend(payload);
    frame
}

/// A call's HEADER frame for `method`, with a deadline of
/// `timeout_micros` (0: none).
fn header_frame(method: &str, timeout_micros: u64) -> Vec<u8> {
    use prost::Message;
    let header = support::wire::CallHeader {
        method: method.into(),
        timeout_micros,
        ..Default::default()
    };
    frame(1, header.encode_to_vec())
}

/// What the server sent on `stream` until its end (within 10 s): a
/// status frame and nothing else.
async fn status_alone(stream: &mut mux::Stream) -> support::wire::Status {
    use prost::Message;
    use tokio::io::AsyncReadExt;
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut reply))
        .await
        .expect("the server ended the call")
        .unwrap();
    let (&kind, mut rest) = reply.split_first().expect("a reply");
    assert_eq!(kind, 2, "a status, and no reply message: {reply:?}");
    let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
    support::wire::Status::decode(&rest[..len]).unwrap()
}

/// A call written by hand with a 100 ms deadline in its header, from a
/// client that never gives up on it itself (it neither resets the stream
/// nor stops reading): the server's deadline alone ends the call.
#[tokio::test]
async fn the_servers_own_deadline_ends_a_call_the_client_never_gives_up_on() {
    use prost::Message;
    use tokio::io::AsyncWriteExt;
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let connection = raw_connection(f.addr).await;
    let mut call = header_frame("test.Echo/Slow", 100_000);
    call.extend(frame(
        0,
        Msg {
            count: 60_000,
            ..msg("slow")
        }
        .encode_to_vec(),
    ));
    let mut stream = connection.open().await.unwrap();
    stream.write_all(&call).await.unwrap();
    stream.shutdown().await.unwrap();
    // The server answers on its own, well before the handler's minute:
    // a status, and no reply message.
    let status = status_alone(&mut stream).await;
    assert_eq!(status.code, Code::DeadlineExceeded as u32, "{status:?}");
    // The handler was dropped by that deadline, not by a reset: the
    // stream was never reset.
    until("the handler is dropped", || f.seen.dropped.load(SeqCst) == 1).await;
    assert_eq!(f.seen.running.load(SeqCst), 0);
    assert!(
        f.seen.started.lock().unwrap().contains("slow"),
        "the handler had started"
    );
    f.shutdown().await;
}

/// A call that sends its header and nothing more, to a service with one
/// turn: its handler asks for the request and gets the message read
/// timeout, not the call's 10 minutes, so the turn it holds comes back
/// and the next caller runs.
#[tokio::test]
async fn a_call_that_sends_only_its_header_holds_a_turn_no_longer_than_the_read_timeout() {
    use tokio::io::AsyncWriteExt;
    let builder = Server::builder().message_read_timeout(Some(Duration::from_millis(300)));
    let f = server(Some(1), None, builder).await;
    let connection = raw_connection(f.addr).await;
    // A header with no deadline of its own, and then nothing.
    let mut idle = connection.open().await.unwrap();
    idle.write_all(&header_frame("test.Echo/Say", 0)).await.unwrap();
    until("the idle call holds the turn", || {
        f.seen.running.load(SeqCst) == 1
    })
    .await;

    let mut c = client(f.addr, ident(1));
    let mut request = Request::new(msg("next"));
    request.set_timeout(Duration::from_secs(5));
    let started = std::time::Instant::now();
    let answer = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", request).await;
    assert_eq!(answer.expect("the next caller runs").into_inner().text, "next");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the turn came back at the read timeout, not near the next caller's deadline: {:?}",
        started.elapsed()
    );

    // The idle call was told why.
    let status = status_alone(&mut idle).await;
    assert_eq!(status.code, Code::DeadlineExceeded as u32, "{status:?}");
    assert!(status.message.contains("did not arrive"), "{status:?}");
    f.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_call_drops_its_handler_on_the_server() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    let call = client::unary::<_, Msg, Msg>(
        &mut c,
        "test.Echo/Slow",
        Request::new(Msg {
            count: 10_000,
            ..msg("slow")
        }),
    );
    // Give up on it once its handler runs.
    let mut call = Box::pin(call);
    tokio::select! {
        ended = &mut call => panic!("the slow call ended: {ended:?}"),
        () = until("the handler runs", || f.seen.running.load(SeqCst) == 1) => {}
    }
    drop(call);
    until("the handler is dropped", || f.seen.dropped.load(SeqCst) == 1).await;
    assert_eq!(f.seen.running.load(SeqCst), 0);
    // The connection goes on.
    assert_eq!(say(&mut c, "after").await.unwrap().text, "after");
    f.shutdown().await;
}

#[tokio::test]
async fn unknown_methods_oversized_messages_and_panics_fail_alone() {
    let f = server(None, None, Server::builder().max_message_size(64 * 1024)).await;
    let mut c = client(f.addr, ident(1)).max_message_size(64 * 1024);
    say(&mut c, "warm").await.unwrap();

    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Nope", Request::new(msg("x")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Other/Say", Request::new(msg("x")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
    assert_eq!(say(&mut c, "after unknown").await.unwrap().text, "after unknown");

    // A request over the server's limit: RESOURCE_EXHAUSTED, that call only.
    let big = Msg {
        payload: vec![7; 100 * 1024],
        ..msg("big")
    };
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", Request::new(big))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(say(&mut c, "after big").await.unwrap().text, "after big");

    // A handler that panics: INTERNAL, and the server goes on.
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Panic", Request::new(msg("x")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    // What the panic said stays in the server's log.
    assert!(err.message().contains("panicked"), "{err:?}");
    assert!(!err.message().contains("fell over"), "{err:?}");
    assert_eq!(say(&mut c, "after panic").await.unwrap().text, "after panic");
    f.shutdown().await;
}

/// The default message limit, 4 MiB, at its value and one byte past, both
/// ways: a request and its echoed reply of exactly 4 MiB are served; one
/// byte more is `RESOURCE_EXHAUSTED` on the server, and the next call on
/// the connection answers.
#[tokio::test]
async fn a_message_of_exactly_4_mib_passes_by_default_and_one_byte_more_does_not() {
    use prost::Message;
    const LIMIT: usize = 4 * 1024 * 1024;
    let f = server(None, None, Server::builder()).await;
    let mut c = client(f.addr, ident(1));
    let sized = |encoded: usize| {
        // Field 2's tag, a 4-byte length, the bytes.
        let m = Msg {
            payload: vec![7; encoded - 5],
            ..Msg::default()
        };
        assert_eq!(m.encoded_len(), encoded);
        m
    };
    let reply = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", Request::new(sized(LIMIT)))
        .await
        .expect("4 MiB there and back");
    assert_eq!(reply.get_ref().encoded_len(), LIMIT);
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", Request::new(sized(LIMIT + 1)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains(&(LIMIT + 1).to_string()), "{err:?}");
    assert_eq!(say(&mut c, "after").await.unwrap().text, "after");
    f.shutdown().await;
}

/// Metadata past either side's envelope limit: `RESOURCE_EXHAUSTED` for
/// that call, refused on the length alone, and the next call answers.
#[tokio::test]
async fn envelopes_past_either_sides_limit_fail_that_call_alone() {
    let f = server(None, None, Server::builder().max_envelope_size(4096)).await;
    let mut c = client(f.addr, ident(1)).max_envelope_size(1024);
    say(&mut c, "warm").await.unwrap();

    // A call header over the server's 4 KiB: the handler never runs.
    let mut request = Request::new(msg("big header"));
    request.metadata_mut().insert("padding", "x".repeat(8 * 1024));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("a header of"), "{err:?}");
    assert_eq!(f.seen.started_calls.load(SeqCst), 1, "only the warm-up ran");
    assert_eq!(say(&mut c, "after").await.unwrap().text, "after");

    // A reply header over the client's 1 KiB (the server echoes
    // `echo-me`), under the server's limit.
    let mut request = Request::new(msg("big reply header"));
    request.metadata_mut().insert("echo-me", "y".repeat(2048));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(say(&mut c, "after again").await.unwrap().text, "after again");
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_sequential_and_64_concurrent_calls_all_answer_right() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    for i in 0..10_000 {
        let text = i.to_string();
        assert_eq!(say(&mut c, &text).await.unwrap().text, text);
    }
    let calls = (0..64).map(|i| {
        let mut c = c.clone();
        tokio::spawn(async move {
            for j in 0..50 {
                let text = format!("{i}-{j}");
                assert_eq!(say(&mut c, &text).await.unwrap().text, text);
            }
        })
    });
    for call in futures_util::future::join_all(calls).await {
        call.unwrap();
    }
    f.shutdown().await;
}

#[tokio::test]
async fn a_per_service_limit_of_8_runs_8_of_64_callers_at_once_and_serves_all() {
    let f = server(Some(8), None, Server::builder().max_message_size(1 << 20)).await;
    let c = client(f.addr, ident(1));
    let calls = (0..64).map(|i| {
        let mut c = c.clone();
        async move {
            let request = Request::new(Msg {
                count: 20,
                ..msg(&i.to_string())
            });
            client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request).await
        }
    });
    for (i, reply) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply.unwrap().into_inner().text, i.to_string());
    }
    assert_eq!(f.seen.most.load(SeqCst), 8, "at most 8 at once, and 8 reached");
    f.shutdown().await;
}

#[tokio::test]
async fn an_unlisted_peer_key_gets_permission_denied() {
    let f = server(
        None,
        Some(vec![ident(1).peer_id()]),
        Server::builder().max_message_size(1 << 20),
    )
    .await;
    let mut allowed = client(f.addr, ident(1));
    assert_eq!(say(&mut allowed, "ok").await.unwrap().text, "ok");
    let mut stranger = client(f.addr, ident(7));
    let err = say(&mut stranger, "let me in").await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains(&ident(7).peer_id().to_string()), "{err:?}");
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_under_load_fails_no_accepted_call() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let c = client(f.addr, ident(1));
    let done = Arc::new(AtomicUsize::new(0));
    let callers: Vec<_> = (0..32)
        .map(|i| {
            let (mut c, done) = (c.clone(), done.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for j in 0..200 {
                    let request = Request::new(Msg {
                        count: 1,
                        ..msg(&format!("{i}-{j}"))
                    });
                    let outcome = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request).await;
                    if outcome.is_ok() {
                        done.fetch_add(1, SeqCst);
                    }
                    outcomes.push((format!("{i}-{j}"), outcome.map(|r| r.into_inner().text)));
                }
                outcomes
            })
        })
        .collect();
    // Shut down mid-load: once 200 of the 6,400 calls were answered.
    until("200 calls answered", || done.load(SeqCst) >= 200).await;
    let seen = f.seen.clone();
    f.shutdown().await;
    let started = seen.started.lock().unwrap().clone();
    let (mut ok, mut failed) = (0, 0);
    for caller in callers {
        for (text, outcome) in caller.await.unwrap() {
            match outcome {
                Ok(reply) => {
                    assert_eq!(reply, text);
                    ok += 1;
                }
                Err(status) => {
                    // Only calls that never reached a handler may fail:
                    // those after the shutdown, which find no server.
                    assert!(
                        !started.contains(&text),
                        "{text} was accepted, then failed: {status:?}"
                    );
                    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                    failed += 1;
                }
            }
        }
    }
    assert!(ok >= 200 && failed > 0, "{ok} served, {failed} refused");
}

/// `test.Echo` with no limit of its own, for a server built with layers,
/// and what its handlers see.
fn unlimited_echo() -> (Arc<Seen>, Echo) {
    let seen = Arc::new(Seen::default());
    let echo = Echo {
        seen: seen.clone(),
        limit: Limit::new(None),
    };
    (seen, echo)
}

#[tokio::test]
async fn tower_middleware_around_the_router_maps_to_statuses() {
    use tower::{limit::ConcurrencyLimitLayer, load_shed::LoadShedLayer, timeout::TimeoutLayer};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(2)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let (seen, echo) = unlimited_echo();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .layer(TimeoutLayer::new(Duration::from_millis(100)))
            .layer(LoadShedLayer::new())
            .layer(ConcurrencyLimitLayer::new(1))
            .add_service(echo)
            .serve_with_shutdown(listener, acceptor, async move {
                let _ = stopped.await;
            }),
    );
    let mut c = client(addr, ident(1));
    // tower's timeout: DEADLINE_EXCEEDED.
    let slow = |ms| {
        Request::new(Msg {
            count: ms,
            ..msg("slow")
        })
    };
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", slow(1_000))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    // Load shedding past a concurrency of 1: UNAVAILABLE.
    let mut busy = c.clone();
    let first =
        tokio::spawn(
            async move { client::unary::<_, Msg, Msg>(&mut busy, "test.Echo/Slow", slow(60)).await },
        );
    until("the first call runs", || seen.running.load(SeqCst) == 1).await;
    let err = say(&mut c, "shed me").await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(first.await.unwrap().unwrap().into_inner().text, "slow");
    assert_eq!(say(&mut c, "room again").await.unwrap().text, "room again");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// A call queued behind the stack's own limit (tower's
/// `ConcurrencyLimitLayer`, no load shedding) is told before its deadline
/// that it never ran, as one queued behind a service's limit is.
#[tokio::test]
async fn a_call_queued_behind_a_concurrency_limit_layer_is_told_it_never_ran() {
    use tower::limit::ConcurrencyLimitLayer;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, echo) = unlimited_echo();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .layer(ConcurrencyLimitLayer::new(1))
            .add_service(echo)
            .serve_with_shutdown(listener, weft::acceptor(ident(2)), async move {
                let _ = stopped.await;
            }),
    );
    let mut c = client(addr, ident(1));
    let mut busy = c.clone();
    let slow = Request::new(Msg {
        count: 1_000,
        ..msg("slow")
    });
    let first =
        tokio::spawn(async move { client::unary::<_, Msg, Msg>(&mut busy, "test.Echo/Slow", slow).await });
    until("the first call runs", || seen.running.load(SeqCst) == 1).await;
    let mut queued = Request::new(msg("queued"));
    queued.set_timeout(Duration::from_millis(300));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", queued)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("never ran"), "{err:?}");
    assert_eq!(first.await.unwrap().unwrap().into_inner().text, "slow");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_slows_its_producer_and_nobody_else() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    // 2,000 replies of 64 KiB (125 MiB), read one at a time, slowly.
    let flood = Request::new(Msg {
        count: 2_000,
        ..msg("flood")
    });
    let mut replies = client::server_streaming::<_, Msg, Msg>(&mut c, "test.Echo/Flood", flood)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replies.message().await.unwrap().unwrap().payload.len(), 64 * 1024);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The producer waits on the stream's window, not on memory.
    let produced = f.seen.produced.load(SeqCst);
    assert!(
        produced < 600,
        "{produced} of 2,000 replies produced for a reader that took one"
    );
    // Another call on the same connection is not held up.
    let meanwhile = tokio::time::timeout(Duration::from_secs(10), say(&mut c, "meanwhile"))
        .await
        .expect("a call beside the unread flood is answered");
    assert_eq!(meanwhile.unwrap().text, "meanwhile");
    // And the flood arrives whole once read.
    let mut n = 1;
    while let Some(m) = replies.message().await.unwrap() {
        assert_eq!(m.payload.len(), 64 * 1024);
        n += 1;
    }
    assert_eq!(n, 2_000);
    f.shutdown().await;
}

/// Replies are sent in batches of what the handler has ready: the header
/// leaves before the first reply exists, and a reply made alone leaves
/// alone, without waiting for company.
#[tokio::test]
async fn replies_leave_as_the_handler_makes_them_and_the_header_before_them() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    *f.seen.gated.lock().unwrap() = Some(rx);
    let call = client::server_streaming::<_, Msg, Msg>(&mut c, "test.Echo/Gated", Request::new(msg("")));
    // No reply exists yet: the header came alone.
    let response = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the header arrives while no reply exists")
        .unwrap();
    assert_eq!(response.metadata().get("gated"), Some("yes"));
    let mut replies = response.into_inner();
    for round in 0..3 {
        // One reply, then nothing more for now: it leaves at once.
        tx.send(msg(&format!("alone {round}"))).unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), replies.message())
            .await
            .expect("a reply made alone leaves at once")
            .unwrap()
            .unwrap();
        assert_eq!(got.text, format!("alone {round}"));
    }
    // Many at once, in order, then the end.
    for i in 0..100 {
        tx.send(msg(&format!("many {i}"))).unwrap();
    }
    drop(tx);
    for i in 0..100 {
        assert_eq!(
            replies.message().await.unwrap().unwrap().text,
            format!("many {i}")
        );
    }
    assert!(replies.message().await.unwrap().is_none(), "ends with OK");
    f.shutdown().await;
}

/// A streaming call's deadline runs while its handler has no reply ready:
/// the caller gets what was sent, then DEADLINE_EXCEEDED.
#[tokio::test]
async fn a_streaming_call_past_its_deadline_ends_with_deadline_exceeded() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    *f.seen.gated.lock().unwrap() = Some(rx);
    tx.send(msg("in time")).unwrap();
    let mut request = Request::new(msg(""));
    request.set_timeout(Duration::from_millis(200));
    let mut replies = client::server_streaming::<_, Msg, Msg>(&mut c, "test.Echo/Gated", request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(replies.message().await.unwrap().unwrap().text, "in time");
    let err = replies.message().await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    // The server let go of the replies: the gate's other end is gone.
    until("the server lets go of the replies", || tx.is_closed()).await;
    assert_eq!(say(&mut c, "after").await.unwrap().text, "after");
    f.shutdown().await;
}

/// Replies that panic part way (after many were ready at once): the
/// caller gets every reply made before the panic, then INTERNAL.
#[tokio::test]
async fn replies_that_panic_midway_end_with_internal_after_the_ones_made() {
    let f = server(None, None, Server::builder().max_message_size(1 << 20)).await;
    let mut c = client(f.addr, ident(1));
    for count in [0, 1, 50, 1_000] {
        let request = Request::new(Msg { count, ..msg("") });
        let mut replies = client::server_streaming::<_, Msg, Msg>(&mut c, "test.Echo/PanicAfter", request)
            .await
            .unwrap()
            .into_inner();
        for i in 0..count {
            assert_eq!(replies.message().await.unwrap().unwrap().text, i.to_string());
        }
        let err = replies.message().await.unwrap_err();
        assert_eq!(err.code(), Code::Internal, "{err:?}");
        assert!(err.message().contains("panicked"), "{err:?}");
        assert!(
            !err.message().contains("ran out"),
            "the panic's text stays in the server's log: {err:?}"
        );
    }
    assert_eq!(say(&mut c, "after").await.unwrap().text, "after");
    f.shutdown().await;
}

#[tokio::test]
async fn a_per_service_limit_of_usize_max_does_not_panic_and_admits_every_call() {
    let limit = Limit::new(Some(usize::MAX));
    let mut turns = Vec::new();
    for _ in 0..1000 {
        turns.push(limit.acquire().await.expect("a limit gives turns"));
    }
    assert_eq!(turns.len(), 1000);
}

#[tokio::test]
async fn a_call_past_the_servers_maximum_duration_ends_with_deadline_exceeded_saying_so() {
    let builder = Server::builder().max_call_duration(Some(Duration::from_millis(200)));
    let f = server(None, None, builder).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    // No deadline of its own: the server's bounds it.
    let request = Request::new(Msg {
        count: 5_000,
        ..msg("slow")
    });
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(err.message().contains("maximum call duration"), "{err:?}");
    // Ended by the server's bound, not by the handler's minute: it was
    // dropped.
    until("the handler is dropped", || f.seen.dropped.load(SeqCst) == 1).await;
    f.shutdown().await;
}

#[tokio::test]
async fn a_call_whose_turn_never_comes_is_resource_exhausted_before_its_deadline() {
    let f = server(Some(1), None, Server::builder()).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    // One call holds the service's only turn for two seconds.
    let mut holder = c.clone();
    let held = tokio::spawn(async move {
        let request = Request::new(Msg {
            count: 2_000,
            ..msg("holder")
        });
        client::unary::<_, Msg, Msg>(&mut holder, "test.Echo/Slow", request).await
    });
    until("the holder runs", || f.seen.running.load(SeqCst) == 1).await;
    // The next waits for it, with 300 ms to live: it is told it never ran,
    // not that it ran out of time.
    let mut request = Request::new(Msg {
        count: 1,
        ..msg("queued")
    });
    request.set_timeout(Duration::from_millis(300));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("never ran"), "{err:?}");
    assert!(
        !f.seen.started.lock().unwrap().contains("queued"),
        "the queued call's handler never ran"
    );
    assert_eq!(held.await.unwrap().unwrap().into_inner().text, "holder");
    f.shutdown().await;
}

/// Under the Plaintext suite the handshake proves who the caller is, but
/// nothing after it is authenticated: anyone on the path could inject a
/// call. So no call is attributed to the caller, and a server that lets
/// in only certain peers refuses it.
#[tokio::test]
async fn a_call_over_the_plaintext_suite_is_attributed_to_no_one_and_refused_by_allow_peers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let plaintext = |n| EncryptLayer::new(ident(n)).suites([weft::handshake::CipherSuite::Plaintext]);
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(100))
        .layer(plaintext(2))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let echo = Echo {
        seen: Arc::new(Seen::default()),
        limit: Limit::new(None),
    };
    tokio::spawn(
        Server::builder()
            .layer(AllowPeersLayer::new([ident(1).peer_id()]))
            .add_service(echo)
            .serve(listener, acceptor),
    );
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(plaintext(1))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    let mut c = Client::new(pool, Endpoint::new(addr).expect_peer(ident(2).peer_id()));
    let err = say(&mut c, "injected?").await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("unencrypted"), "{err:?}");
}

/// A middleware that fails with its own error: the caller gets `UNKNOWN`
/// and a generic message, and the error's text stays in the server's log.
#[tokio::test]
async fn a_middlewares_own_error_text_stays_on_the_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(2)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let failing = tower::layer::layer_fn(|_router| {
        tower::service_fn(|_: Call| async {
            Err::<Reply, tower::BoxError>("the database at 10.0.0.5 refused user admin".into())
        })
    });
    tokio::spawn(Server::builder().layer(failing).serve(listener, acceptor));
    let mut c = client(addr, ident(1));
    let err = say(&mut c, "x").await.unwrap_err();
    assert_eq!(err.code(), Code::Unknown, "{err:?}");
    assert!(!err.message().contains("10.0.0.5"), "{err:?}");
    assert!(err.message().contains("test.Echo/Say"), "{err:?}");
}

/// A deadline says which step it interrupted: a server that accepts TCP
/// and never answers the handshake, against a handler that is slow.
#[tokio::test]
async fn a_deadline_tells_a_hung_handshake_from_a_slow_handler() {
    // Accepts, and says nothing.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let _held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = silent.accept().await {
            held.push(tcp);
        }
    });
    let mut c = client(silent_addr, ident(1));
    let mut request = Request::new(msg("hello?"));
    request.set_timeout(Duration::from_millis(200));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Say", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(err.message().contains("no connection to"), "{err:?}");
    assert!(err.message().contains("handshake"), "{err:?}");

    let f = server(None, None, Server::builder()).await;
    let mut c = client(f.addr, ident(1));
    say(&mut c, "warm").await.unwrap();
    let mut request = Request::new(Msg {
        count: 2_000,
        ..msg("slow")
    });
    request.set_timeout(Duration::from_millis(200));
    let err = client::unary::<_, Msg, Msg>(&mut c, "test.Echo/Slow", request)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(!err.message().contains("no connection"), "{err:?}");
    f.shutdown().await;
}

#[tokio::test]
async fn the_client_is_ready_only_with_a_turn_in_the_pool() {
    use std::future::poll_fn;
    use tower::load_shed::LoadShedLayer;
    use weft::rpc::client::RawCall;
    let f = server(None, None, Server::builder()).await;
    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    // One call at a time may wait for the pool.
    let pool = Pool::builder().max_pending(1).build(dialer);
    let mut first = Client::new(pool, Endpoint::new(f.addr).expect_peer(ident(2).peer_id()));
    let mut second = first.clone();
    poll_fn(|cx| Service::<RawCall>::poll_ready(&mut first, cx))
        .await
        .unwrap();
    // The turn is taken: the other handle is not ready...
    let waker = futures_util::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(Service::<RawCall>::poll_ready(&mut second, &mut cx).is_pending());
    // ...which tower's load shedding sees, and sheds.
    let mut shed = ServiceBuilder::new()
        .layer(LoadShedLayer::new())
        .service(second.clone());
    let err = client::unary::<_, Msg, Msg>(&mut shed, "test.Echo/Say", Request::new(msg("shed")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    // The first call runs in the turn it took, then gives it back.
    assert_eq!(say(&mut first, "in turn").await.unwrap().text, "in turn");
    tokio::time::timeout(
        Duration::from_secs(5),
        poll_fn(|cx| Service::<RawCall>::poll_ready(&mut second, cx)),
    )
    .await
    .expect("the turn came back")
    .unwrap();
    assert_eq!(say(&mut second, "next").await.unwrap().text, "next");
}
