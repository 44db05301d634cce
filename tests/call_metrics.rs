//! A client's call metrics taken when the call ends, for every kind of
//! call: a streaming call's status and duration are its last reply's, not
//! its header's, and a call the caller gives up on counts as CANCELLED.
//! Read back from metrics-util's debugging recorder (installed for this
//! whole test binary) and from the live view; each test calls its own
//! method, so they run at once without reading each other's calls.

mod support;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use futures_util::{stream, StreamExt};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use support::*;
use tokio::{net::TcpListener, sync::Notify};
use weft::{
    admin::Admin,
    metrics::Metrics,
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Code, Request, Response, Status, Streaming},
    transport::{TcpAcceptor, TcpConnector},
};

#[path = "support/echo.rs"]
mod echo;

use echo::{Echo, EchoClient, EchoReply, EchoRequest, EchoServer, ExpandRequest, ReplyStream};

/// How long the server's streamed replies take before their status.
const STREAM_TAKES: Duration = Duration::from_millis(300);

/// `weft.examples.Echo` for these tests: `Say` "hang" and `Collect`
/// never answer (each says it began); `Expand` sends `count` replies,
/// waits [`STREAM_TAKES`], and ends NOT_FOUND; `Chat` answers each
/// request.
#[derive(Clone, Default)]
struct Watch {
    began: Arc<Notify>,
}

impl Echo for Watch {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        if request.get_ref().text == "hang" {
            self.began.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(Response::new(EchoReply::default()))
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let count = request.get_ref().count;
        let replies = stream::iter((0..count).map(|_| Ok(EchoReply::default()))).chain(stream::once(async {
            tokio::time::sleep(STREAM_TAKES).await;
            Err(Status::not_found("no more"))
        }));
        Ok(Response::new(Box::pin(replies)))
    }

    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        self.began.notify_one();
        std::future::pending().await
    }

    async fn chat(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let replies = request.into_inner().map(|said| {
            said.map(|said| EchoReply {
                text: said.text,
                ..EchoReply::default()
            })
        });
        Ok(Response::new(Box::pin(replies)))
    }
}

/// Every histogram sample recorded so far, by name and labels: the
/// debugging recorder's snapshots drain what they read, so each test adds
/// what it reads here for all of them.
#[derive(Default)]
struct Samples(HashMap<Series, Vec<f64>>);

/// A metric's name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

fn snapshotter() -> &'static (Snapshotter, Mutex<Samples>) {
    static RECORDER: OnceLock<(Snapshotter, Mutex<Samples>)> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("the only recorder of this test binary");
        (snapshotter, Mutex::default())
    })
}

/// The client's call durations of `method` so far, by status.
fn client_calls(method: &str) -> HashMap<String, Vec<f64>> {
    let (snapshotter, samples) = snapshotter();
    let mut samples = samples.lock().unwrap();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Histogram(values) = value {
            let mut labels: Vec<_> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let entry = samples
                .0
                .entry((key.key().name().to_owned(), labels))
                .or_default();
            entry.extend(values.into_iter().map(|v| v.into_inner()));
        }
    }
    let method = format!("weft.examples.Echo/{method}");
    let mut by_status = HashMap::new();
    for ((name, labels), values) in &samples.0 {
        let label = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        if name == "rpc.client.call.duration" && label("rpc.method") == Some(&method) {
            let status = label("rpc.response.status_code").unwrap_or_default().to_owned();
            by_status.entry(status).or_insert_with(Vec::new).extend(values);
        }
    }
    by_status
}

/// Waits until the client has recorded `calls` calls of `method`; then
/// their durations by status.
async fn client_calls_ended(method: &str, calls: usize) -> HashMap<String, Vec<f64>> {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let seen = client_calls(method);
            if seen.values().map(Vec::len).sum::<usize>() >= calls {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the client never recorded {calls} calls of {method}: {:?}",
            client_calls(method)
        )
    })
}

/// The live view every test's client is handed.
fn admin() -> &'static Admin {
    static ADMIN: OnceLock<Admin> = OnceLock::new();
    ADMIN.get_or_init(Admin::new)
}

/// The live view's client calls of `method`, by status.
fn live_view(method: &str) -> weft::admin::MethodView {
    admin()
        .snapshot()
        .methods
        .into_iter()
        .find(|m| m.side == "client" && m.method == method)
        .unwrap_or_else(|| panic!("no client method {method} in the live view"))
}

/// A server of [`Watch`], and a client of it handed the metrics and the
/// live view (the metrics recorder installed first).
async fn serve(watch: Watch) -> EchoClient<Client<MuxStack<TcpConnector>>> {
    snapshotter();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = mux_stack(ident(2), &[], TcpAcceptor::new());
    tokio::spawn(
        Server::builder()
            .add_service(EchoServer::new(watch))
            .serve(listener, acceptor),
    );
    let pool = Pool::builder().build(mux_stack(ident(1), &[], TcpConnector::new()));
    let client = Client::new(pool, Endpoint::new(addr).expect_peer(ident(2).peer_id()))
        .observer((Metrics::new(), admin().clone()));
    EchoClient::new(client)
}

#[tokio::test]
async fn a_server_streaming_call_counts_with_its_final_status_and_lasts_until_it() {
    let mut echo = serve(Watch::default()).await;
    let mut replies = echo
        .expand(ExpandRequest {
            count: 2,
            ..ExpandRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(replies.message().await.unwrap().is_some());
    assert!(replies.message().await.unwrap().is_some());
    assert_eq!(replies.message().await.unwrap_err().code(), Code::NotFound);
    let calls = client_calls_ended("Expand", 1).await;
    assert_eq!(calls.keys().collect::<Vec<_>>(), ["NOT_FOUND"], "{calls:?}");
    let took = calls["NOT_FOUND"][0];
    assert!(
        took >= STREAM_TAKES.as_secs_f64(),
        "the call took {took} s, less than its replies"
    );
    let live = live_view("Expand");
    assert_eq!(live.by_status.into_iter().collect::<Vec<_>>(), [("NOT_FOUND", 1)]);
    assert!(
        live.latency_us.p50 >= STREAM_TAKES.as_micros() as u64,
        "{:?}",
        live.latency_us
    );
}

#[tokio::test]
async fn a_bidirectional_call_whose_replies_the_caller_drops_counts_as_cancelled() {
    let mut echo = serve(Watch::default()).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<EchoRequest>(1);
    let requests = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut chat = echo.chat(requests).await.unwrap().into_inner();
    tx.send(EchoRequest::default()).await.unwrap();
    assert!(chat.message().await.unwrap().is_some());
    drop(chat);
    let calls = client_calls_ended("Chat", 1).await;
    assert_eq!(calls.keys().collect::<Vec<_>>(), ["CANCELLED"], "{calls:?}");
    let live = live_view("Chat");
    assert_eq!(live.by_status.into_iter().collect::<Vec<_>>(), [("CANCELLED", 1)]);
}

#[tokio::test]
async fn a_unary_call_the_caller_gives_up_on_counts_as_cancelled() {
    let watch = Watch::default();
    let began = watch.began.clone();
    let mut echo = serve(watch).await;
    let request = EchoRequest {
        text: "hang".into(),
        ..EchoRequest::default()
    };
    tokio::select! {
        _ = echo.say(request) => panic!("the call never ends"),
        () = began.notified() => {}
    }
    let calls = client_calls_ended("Say", 1).await;
    assert_eq!(calls.keys().collect::<Vec<_>>(), ["CANCELLED"], "{calls:?}");
}

#[tokio::test]
async fn a_client_streaming_call_the_caller_gives_up_on_counts_as_cancelled() {
    let watch = Watch::default();
    let began = watch.began.clone();
    let mut echo = serve(watch).await;
    tokio::select! {
        _ = echo.collect(stream::iter([EchoRequest::default()])) => panic!("the call never ends"),
        () = began.notified() => {}
    }
    let calls = client_calls_ended("Collect", 1).await;
    assert_eq!(calls.keys().collect::<Vec<_>>(), ["CANCELLED"], "{calls:?}");
}
