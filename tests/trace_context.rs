//! Trace context across calls (`weft::rpc::trace`): a client that starts
//! a trace calls server A, whose handler calls server B. A subscriber that
//! records every span's fields shows that A's span for the call is the
//! child of the client's span and B's the child of A's, in one trace,
//! though A's handler does nothing about traces.

#[path = "support/echo.rs"]
#[allow(unused_imports)]
mod echo;

use std::{
    collections::HashMap,
    fmt,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use tokio::net::TcpListener;
use tracing::{
    field::{Field, Visit},
    span::{Attributes, Id, Record},
    Event, Metadata, Subscriber,
};
use weft::{
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, trace::TraceContext, Request, Response, Status, Streaming},
    Identity,
};

/// The fields of every span named `rpc`, in the order they began.
#[derive(Clone, Default)]
struct Recorder {
    next: Arc<AtomicU64>,
    spans: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        if span.metadata().name() == "rpc" {
            let mut fields = HashMap::new();
            span.record(&mut Fields(&mut fields));
            self.spans.lock().unwrap().push(fields);
        }
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

async fn serve(say: echo::Say) -> Endpoint {
    let identity = Identity::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = Endpoint::new(listener.local_addr().unwrap()).expect_peer(identity.peer_id());
    let server = Server::builder().add_service(say.server());
    tokio::spawn(server.serve(listener, weft::acceptor(identity)));
    endpoint
}

/// Say answers what trace context its handler had in scope, after
/// calling on to `next` (plain code: no trace handling of its own).
#[derive(Clone)]
struct Relay(echo::EchoClient<Client<weft::stack::StandardDialer>>);

impl echo::Echo for Relay {
    async fn say(&self, _: Request<echo::EchoRequest>) -> Result<Response<echo::EchoReply>, Status> {
        self.0.clone().say(echo::say("from a")).await?;
        let text = TraceContext::current()
            .map(|c| c.traceparent())
            .unwrap_or_default();
        Ok(Response::new(echo::EchoReply {
            text,
            ..Default::default()
        }))
    }
    async fn expand(
        &self,
        _: Request<echo::ExpandRequest>,
    ) -> Result<Response<echo::ReplyStream<echo::EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn collect(
        &self,
        _: Request<Streaming<echo::EchoRequest>>,
    ) -> Result<Response<echo::EchoReply>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn chat(
        &self,
        _: Request<Streaming<echo::EchoRequest>>,
    ) -> Result<Response<echo::ReplyStream<echo::EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
}

async fn serve_relay(next: echo::EchoClient<Client<weft::stack::StandardDialer>>) -> Endpoint {
    let identity = Identity::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = Endpoint::new(listener.local_addr().unwrap()).expect_peer(identity.peer_id());
    let server = Server::builder().add_service(echo::EchoServer::new(Relay(next)));
    tokio::spawn(server.serve(listener, weft::acceptor(identity)));
    endpoint
}

fn client(endpoint: Endpoint) -> echo::EchoClient<Client<weft::stack::StandardDialer>> {
    let pool = Pool::builder().build(weft::dialer(Identity::generate()));
    echo::EchoClient::new(Client::new(pool, endpoint))
}

#[tokio::test]
async fn a_servers_span_for_a_call_continues_its_callers_trace_through_a_handlers_own_calls() {
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let b = serve(echo::Say::new(|_| Ok("b".into()))).await;
    let a = serve_relay(client(b)).await;

    let root = TraceContext::new_root();
    let mut a_client = client(a);
    let in_a = root
        .clone()
        .scope(async move { a_client.say(echo::say("hi")).await })
        .await
        .unwrap()
        .into_inner()
        .text;
    let spans = recorder.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 2, "{spans:?}");
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    // A's span begins with its call, before its handler calls B.
    let (span_a, span_b) = (&spans[0], &spans[1]);
    let trace = hex(&root.trace_id());
    assert_eq!(span_a["trace_id"], trace, "{spans:?}");
    assert_eq!(span_b["trace_id"], trace, "{spans:?}");
    assert_eq!(
        span_a["parent_id"],
        hex(&root.span_id()),
        "A's parent is the caller"
    );
    assert_eq!(span_b["parent_id"], span_a["span_id"], "B's parent is A's span");
    assert_ne!(span_a["span_id"], hex(&root.span_id()));
    assert_eq!(span_a["rpc.method"], "weft.examples.Echo/Say");
    // What A's handler had in scope is A's own span, in the same trace.
    assert_eq!(in_a, format!("00-{trace}-{}-01", span_a["span_id"]));
}

#[tokio::test]
async fn a_call_outside_any_trace_carries_none() {
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());
    let a = serve(echo::Say::new(|request| {
        Ok(format!(
            "{:?} {:?}",
            request.metadata().get("traceparent"),
            TraceContext::current()
        ))
    }))
    .await;
    let reply = client(a).say(echo::say("hi")).await.unwrap().into_inner().text;
    assert_eq!(reply, "None None");
    let spans = recorder.spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 1);
    assert!(!spans[0].contains_key("trace_id"), "{spans:?}");
}
