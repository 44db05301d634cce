//! Metadata with binary values and repeated keys, over real calls: the
//! request's metadata reaches the handler, and comes back in the reply
//! header and in a failed call's trailers, every entry in order.

mod support;

use support::*;
use tokio::net::TcpListener;
use weft::{
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Metadata, MetadataValue, Request, Response, Status, Streaming},
    transport::{TcpAcceptor, TcpConnector},
};

#[path = "support/echo.rs"]
mod echo;

use echo::{Echo, EchoClient, EchoReply, EchoRequest, EchoServer, ExpandRequest, ReplyStream};

/// `Say` answers with the request's metadata in its reply header, or, for
/// "fail", fails with it as the status's trailers.
#[derive(Clone)]
struct Mirror;

impl Echo for Mirror {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let metadata = request.metadata().clone();
        if request.get_ref().text == "fail" {
            let mut status = Status::not_found("asked to fail");
            *status.trailers_mut() = metadata;
            return Err(status);
        }
        let mut response = Response::new(EchoReply::default());
        *response.metadata_mut() = metadata;
        Ok(response)
    }

    async fn expand(&self, _: Request<ExpandRequest>) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("expand"))
    }

    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Err(Status::unimplemented("collect"))
    }

    async fn chat(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("chat"))
    }
}

/// Text, a repeated key and binary values (bytes that are no UTF-8 among
/// them), in an order a map would lose.
fn sent() -> Metadata {
    let mut metadata = Metadata::new();
    metadata.append("accept", "json");
    metadata.insert_binary("trace-bin", vec![0xff, 0x00, 0xfe]);
    metadata.append("accept", "proto");
    metadata.append_binary("trace-bin", Vec::new());
    metadata.insert("tenant", "");
    metadata
}

fn request(text: &str) -> Request<EchoRequest> {
    let mut request = Request::new(EchoRequest {
        text: text.into(),
        ..EchoRequest::default()
    });
    *request.metadata_mut() = sent();
    request
}

#[tokio::test]
async fn binary_values_and_repeated_keys_travel_whole_and_in_order_both_ways() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = mux_stack(ident(2), &[], TcpAcceptor::new());
    tokio::spawn(
        Server::builder()
            .add_service(EchoServer::new(Mirror))
            .serve(listener, acceptor),
    );
    let pool = Pool::builder().build(mux_stack(ident(1), &[], TcpConnector::new()));
    let endpoint = Endpoint::new(addr).expect_peer(ident(2).peer_id());
    let mut echo = EchoClient::new(Client::new(pool, endpoint));

    let reply = echo.say(request("hi")).await.unwrap();
    let back = reply.metadata();
    assert_eq!(back, &sent(), "the reply header: {back:?}");
    assert_eq!(back.get_all("accept").collect::<Vec<_>>(), ["json", "proto"]);
    assert_eq!(
        back.values("trace-bin").collect::<Vec<_>>(),
        [
            MetadataValue::Binary(&[0xff, 0x00, 0xfe]),
            MetadataValue::Binary(&[])
        ]
    );
    assert_eq!(back.get("tenant"), Some(""), "an empty text is still there");

    let failed = echo.say(request("fail")).await.unwrap_err();
    assert_eq!(
        failed.trailers(),
        &sent(),
        "the trailers: {:?}",
        failed.trailers()
    );
}
