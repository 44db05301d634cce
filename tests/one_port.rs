//! RPC and HTTP from one listener (`rpc::server::Builder::with_http`): the
//! generated Echo service and an axum router behind one acceptor, reached
//! by an RPC client, an h2 client and an HTTP/1.1 client over one pooled
//! weft connection.

use std::time::Duration;

use axum::{extract::Extension, routing::get, Router};
use bytes::Bytes;
use futures_util::stream;
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::Client as HttpClient,
    rt::{TokioExecutor, TokioIo},
};
use tokio::{io::AsyncWriteExt, net::TcpListener};
use tower::ServiceBuilder;
use weft::{
    handshake::Versions,
    http::{Connector, PeerInfo},
    mux,
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Request, Response, Status, Streaming},
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer,
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

/// Say answers the text and who asked; the streaming calls count.
struct Say;

impl Echo for Say {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let peer = request.peer().map(ToString::to_string).unwrap_or_default();
        Ok(Response::new(EchoReply {
            text: format!("{} from {peer}", request.get_ref().text),
            ..EchoReply::default()
        }))
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let count = request.get_ref().count;
        let replies = stream::iter((0..count).map(|i| {
            Ok(EchoReply {
                text: i.to_string(),
                ..EchoReply::default()
            })
        }));
        Ok(Response::new(Box::pin(replies)))
    }

    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Err(Status::unimplemented("not here"))
    }

    async fn chat(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
}

const PROTOCOLS: [&str; 2] = ["h2", "http/1.1"];

#[tokio::test]
async fn calls_and_http_requests_share_one_listener_and_one_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(EncryptLayer::new(ident(2)))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(PROTOCOLS))
        .service(TcpAcceptor::new());
    let app: Router = Router::new().route(
        "/hello",
        get(|Extension(peer): Extension<PeerInfo>| async move {
            format!("hello, {}", peer.id.expect("an authenticated caller"))
        }),
    );
    let server = Server::builder().add_service(EchoServer::new(Say)).with_http(app);
    tokio::spawn(server.serve(listener, acceptor));

    let dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(PROTOCOLS))
        .service(TcpConnector::new());
    let pool = Pool::builder().build(dialer);
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    let caller = ident(1).peer_id().to_string();

    // An RPC call, unary and streaming.
    let mut echo = EchoClient::new(Client::new(pool.clone(), endpoint.clone()));
    let said = echo
        .say(EchoRequest {
            text: "hi".into(),
            ..EchoRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(said.into_inner().text, format!("hi from {caller}"));
    let mut expanded = echo
        .expand(ExpandRequest {
            text: String::new(),
            count: 3,
        })
        .await
        .unwrap()
        .into_inner();
    let mut counted = Vec::new();
    while let Some(reply) = expanded.message().await.unwrap() {
        counted.push(reply.text);
    }
    assert_eq!(counted, ["0", "1", "2"]);

    // h2 through hyper-util's client (the agreed protocol is h2, and the
    // connector asked for it).
    let connector = Connector::new(pool.clone())
        .route("app.test", endpoint.clone())
        .http2();
    let h2 = HttpClient::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(connector);
    let response = h2.get("http://app.test/hello".parse().unwrap()).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, format!("hello, {caller}").as_bytes());

    // HTTP/1.1 by hand on a stream of the same pool.
    let stream = pool.open(endpoint.clone()).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = http::Request::get("/hello")
        .header("host", "app.test")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_11);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, format!("hello, {caller}").as_bytes());

    // And a call after them, on the same connection still.
    let said = echo
        .say(EchoRequest {
            text: "again".into(),
            ..EchoRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(said.into_inner().text, format!("again from {caller}"));
    assert_eq!(pool.stats().dials, 1, "{:?}", pool.stats());
}

#[tokio::test]
async fn a_stream_that_sends_nothing_is_reset_at_the_header_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new());
    let app: Router = Router::new().route("/", get(|| async { "root" }));
    let server = Server::builder()
        .header_timeout(Duration::from_millis(200))
        .add_service(EchoServer::new(Say))
        .with_http(app);
    tokio::spawn(server.serve(listener, acceptor));
    let mut dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let connection = weft::handshake::HandshakeExt::dial(&mut dialer, addr)
        .await
        .unwrap();
    let mut silent = connection.open().await.unwrap();
    silent.flush().await.unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), silent.recv())
        .await
        .expect("reset well before 5 s")
        .unwrap_err();
    assert!(err.to_string().contains("reset"), "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
}
