//! A client's deadline for calls that set none, as the server receives it:
//! by default 30 s for unary and client-streaming calls and none for calls
//! that stream replies; one set on the client for every call; none when
//! turned off; a call's own always first. (A call that comes with none
//! gets the server's maximum call duration, 10 minutes.)

mod support;

use std::time::Duration;

use futures_util::{stream, StreamExt};
use support::{ident, mux_stack};
use tokio::net::TcpListener;
use weft::{
    pool::{Endpoint, Pool},
    rpc::{
        client::{Client, DEFAULT_TIMEOUT},
        server::Server,
        Request, Response, Status, Streaming,
    },
    transport::{TcpAcceptor, TcpConnector},
};

#[path = "support/echo.rs"]
mod echo;

use echo::{Echo, EchoClient, EchoReply, EchoRequest, EchoServer, ExpandRequest, ReplyStream};

/// Answers every call with the deadline it came with.
struct Deadlines;

fn said(timeout: Option<Duration>) -> EchoReply {
    EchoReply {
        text: format!("{timeout:?}"),
        ..EchoReply::default()
    }
}

impl Echo for Deadlines {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        Ok(Response::new(said(request.timeout())))
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let reply = said(request.timeout());
        Ok(Response::new(Box::pin(stream::iter([Ok(reply)]))))
    }

    async fn collect(&self, request: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Ok(Response::new(said(request.timeout())))
    }

    async fn chat(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let reply = said(request.timeout());
        Ok(Response::new(Box::pin(stream::iter([Ok(reply)]))))
    }
}

/// What the server saw of each kind of call from `client`: unary,
/// server-streaming, client-streaming, bidirectional.
async fn deadlines_seen(client: Client<support::MuxStack<TcpConnector>>) -> [String; 4] {
    let mut echo = EchoClient::new(client);
    let unary = echo.say(EchoRequest::default()).await.unwrap().into_inner().text;
    let mut replies = echo.expand(ExpandRequest::default()).await.unwrap().into_inner();
    let server_streaming = replies.message().await.unwrap().unwrap().text;
    let client_streaming = echo
        .collect(stream::iter([EchoRequest::default()]))
        .await
        .unwrap()
        .into_inner()
        .text;
    let mut replies = echo
        .chat(stream::iter([EchoRequest::default()]).chain(stream::pending()))
        .await
        .unwrap()
        .into_inner();
    let bidirectional = replies.message().await.unwrap().unwrap().text;
    [unary, server_streaming, client_streaming, bidirectional]
}

#[tokio::test]
async fn calls_that_set_no_deadline_get_the_clients() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(EchoServer::new(Deadlines))
            .serve(listener, mux_stack(ident(2), &[], TcpAcceptor::new())),
    );
    let pool = Pool::builder().build(mux_stack(ident(1), &[], TcpConnector::new()));
    let client = || Client::new(pool.clone(), Endpoint::new(addr).expect_peer(ident(2).peer_id()));

    assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(30));
    assert_eq!(
        deadlines_seen(client()).await,
        ["Some(30s)", "Some(600s)", "Some(30s)", "Some(600s)"],
        "by default"
    );
    assert_eq!(
        deadlines_seen(client().timeout(Duration::from_secs(5))).await,
        ["Some(5s)"; 4],
        "set on the client"
    );
    assert_eq!(
        deadlines_seen(client().no_timeout()).await,
        ["Some(600s)"; 4],
        "turned off"
    );

    // A call's own deadline comes first.
    let mut echo = EchoClient::new(client().timeout(Duration::from_secs(5)));
    let mut request = Request::new(EchoRequest::default());
    request.set_timeout(Duration::from_secs(2));
    assert_eq!(echo.say(request).await.unwrap().into_inner().text, "Some(2s)");
}
