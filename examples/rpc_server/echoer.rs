//! The implementation of the echo service's generated `Echo` trait: one
//! `async fn` per method, each kind of call.

use futures_util::{stream, StreamExt};
use weft::rpc::{Request, Response, Status, Streaming};

use super::echo::{
    echo_server::{Echo, ReplyStream},
    EchoReply, EchoRequest, ExpandRequest,
};

/// The most replies one `Expand` sends.
pub const MAX_EXPAND: u32 = 1_000_000;

/// The implementation of the generated `Echo` trait.
#[derive(Debug, Clone, Default)]
pub struct Echoer;

impl Echo for Echoer {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let EchoRequest { text, payload } = request.into_inner();
        Ok(Response::new(EchoReply { text, payload }))
    }

    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let ExpandRequest { text, count } = request.into_inner();
        if count > MAX_EXPAND {
            return Err(Status::invalid_argument(format!(
                "at most {MAX_EXPAND} replies, not {count}"
            )));
        }
        let replies = stream::iter(0..count).map(move |i| {
            Ok(EchoReply {
                text: format!("{text} {i}"),
                payload: Vec::new(),
            })
        });
        Ok(Response::new(Box::pin(replies)))
    }

    async fn collect(&self, request: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        let mut requests = request.into_inner();
        let mut text = String::new();
        while let Some(request) = requests.message().await? {
            text.push_str(&request.text);
        }
        Ok(Response::new(EchoReply {
            text,
            payload: Vec::new(),
        }))
    }

    async fn chat(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        let replies = request.into_inner().map(|said| {
            said.map(|said| EchoReply {
                text: format!("re: {}", said.text),
                payload: said.payload,
            })
        });
        Ok(Response::new(Box::pin(replies)))
    }
}
