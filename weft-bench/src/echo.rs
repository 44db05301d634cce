//! The example service of `proto/examples/echo.proto` as `rpc_bench`
//! serves it: `Say` answers with the request, `Expand` streams `count`
//! replies; the client-streaming methods are not measured and answer
//! UNIMPLEMENTED. (examples/rpc_server/ is the same service written to
//! teach; this one is written to be measured.)

use futures_util::{stream, StreamExt};
use tower::ServiceBuilder;
use weft::{
    handshake::Versions,
    mux,
    rpc::{Request, Response, Status, Streaming},
    transport::TcpAcceptor,
    EncryptLayer, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

weft::include_proto!("weft.examples");

use echo_server::{Echo, ReplyStream};

/// The service's name.
pub const SERVICE: &str = "weft.examples.Echo";
/// Streams one client may have open at once (calls in flight).
pub const MAX_STREAMS: u32 = 1000;
/// The most replies one `Expand` sends.
pub const MAX_EXPAND: u32 = 1_000_000;

/// The measured implementation of the generated `Echo` trait.
#[derive(Debug, Clone, Copy, Default)]
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
            return Err(Status::invalid_argument(format!("at most {MAX_EXPAND} replies")));
        }
        let replies = stream::iter(0..count).map(move |i| {
            Ok(EchoReply {
                text: format!("{text} {i}"),
                payload: Vec::new(),
            })
        });
        Ok(Response::new(Box::pin(replies)))
    }

    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Err(Status::unimplemented("not measured"))
    }

    async fn chat(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not measured"))
    }
}

/// The server's stack over accepted TCP connections, with `encrypt` and a
/// stream limit of [`MAX_STREAMS`].
pub fn acceptor_with(encrypt: EncryptLayer) -> impl weft::stack::Acceptor {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(encrypt)
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new())
}
