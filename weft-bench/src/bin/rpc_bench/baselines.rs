//! The baselines: tonic's and tarpc's echo servers and clients.

use std::{
    convert::Infallible,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context as TaskContext, Poll},
};

use futures_util::{stream, Stream, StreamExt};
use tarpc::{
    context,
    server::{BaseChannel, Channel},
    tokio_serde::formats::Bincode,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tonic::{
    codec::CompressionEncoding,
    codegen::{http, Body, BoxFuture, Service, StdError},
    server::{Grpc, NamedService, ServerStreamingService, UnaryService},
    transport::{server::Connected, Channel as TonicChannel, Endpoint},
};
use tonic_prost::ProstCodec;

use super::{check, check_count, check_expanded, say_request, Caller, EchoReply, EchoRequest, ExpandRequest};
use weft_bench::{
    echo::{MAX_EXPAND, SERVICE},
    http::TlsDial,
    Context, Failure, Result,
};

// ---- tonic ------------------------------------------------------------

const SAY_PATH: &str = "/weft.examples.Echo/Say";
const EXPAND_PATH: &str = "/weft.examples.Echo/Expand";

/// `weft.examples.Echo` for tonic, as tonic-build would generate it
/// around a trait (here without the trait).
#[derive(Debug, Clone, Default)]
pub struct TonicEcho {
    /// Replies sent, and requests read, in this encoding (`--compress`).
    compression: Option<CompressionEncoding>,
}

impl TonicEcho {
    /// tonic's server `Grpc`, with the echo's compression.
    fn grpc<C: tonic::codec::Codec>(&self, codec: C) -> Grpc<C> {
        match self.compression {
            Some(encoding) => Grpc::new(codec)
                .accept_compressed(encoding)
                .send_compressed(encoding),
            None => Grpc::new(codec),
        }
    }
}

impl NamedService for TonicEcho {
    const NAME: &'static str = SERVICE;
}

struct Say;

impl UnaryService<EchoRequest> for Say {
    type Response = EchoReply;
    type Future = BoxFuture<tonic::Response<EchoReply>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<EchoRequest>) -> Self::Future {
        Box::pin(async move {
            let EchoRequest { text, payload } = request.into_inner();
            Ok(tonic::Response::new(EchoReply { text, payload }))
        })
    }
}

type Replies = Pin<Box<dyn Stream<Item = Result<EchoReply, tonic::Status>> + Send + 'static>>;

struct Expand;

impl ServerStreamingService<ExpandRequest> for Expand {
    type Response = EchoReply;
    type ResponseStream = Replies;
    type Future = BoxFuture<tonic::Response<Replies>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<ExpandRequest>) -> Self::Future {
        Box::pin(async move {
            let ExpandRequest { text, count } = request.into_inner();
            if count > MAX_EXPAND {
                return Err(tonic::Status::invalid_argument("too many replies"));
            }
            let replies: Replies = Box::pin(stream::iter(0..count).map(move |i| {
                Ok(EchoReply {
                    text: format!("{text} {i}"),
                    payload: Vec::new(),
                })
            }));
            Ok(tonic::Response::new(replies))
        })
    }
}

impl<B> Service<http::Request<B>> for TonicEcho
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match request.uri().path() {
            SAY_PATH => {
                let mut grpc = self.grpc(ProstCodec::<EchoReply, EchoRequest>::default());
                Box::pin(async move { Ok(grpc.unary(Say, request).await) })
            }
            EXPAND_PATH => {
                let mut grpc = self.grpc(ProstCodec::<EchoReply, ExpandRequest>::default());
                Box::pin(async move { Ok(grpc.server_streaming(Expand, request).await) })
            }
            _ => Box::pin(async move { Ok(tonic::Status::unimplemented("no such method").into_http()) }),
        }
    }
}

/// A TLS stream as tonic's server takes it.
pub struct TlsConnection(TlsStream<TcpStream>);

impl Connected for TlsConnection {
    type ConnectInfo = ();

    fn connect_info(&self) {}
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut TaskContext<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// An accepted TCP connection, Nagle off.
async fn accept(listener: &TcpListener) -> io::Result<TcpStream> {
    let (tcp, _) = listener.accept().await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// tonic's server with the echo service on `listener`, over TLS with
/// `tls`, compressing with `compression`, until `stop`.
pub async fn serve_tonic(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    compression: Option<CompressionEncoding>,
    stop: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let mut server = tonic::transport::Server::builder();
    let router = server.add_service(TonicEcho { compression });
    let served = match tls {
        None => {
            let incoming = stream::unfold(listener, |listener| async {
                let next = accept(&listener).await;
                Some((next, listener))
            });
            router.serve_with_incoming_shutdown(incoming, stop).await
        }
        Some(tls) => {
            // One handshake at a time, in the accept loop: the bench
            // dials once.
            let incoming = stream::unfold((listener, tls), |(listener, tls)| async {
                let next = match accept(&listener).await {
                    Ok(tcp) => tls.accept(tcp).await.map(TlsConnection),
                    Err(err) => Err(err),
                };
                Some((next, (listener, tls)))
            });
            router.serve_with_incoming_shutdown(incoming, stop).await
        }
    };
    served.context("the tonic server")
}

/// tonic's generic client on one `Channel`.
#[derive(Clone)]
pub struct TonicCaller(tonic::client::Grpc<TonicChannel>);

impl TonicCaller {
    /// Over TCP, or TLS with `tls`.
    pub async fn connect(addr: SocketAddr, tls: Option<TlsDial>) -> Result<Self> {
        Self::connect_compressed(addr, tls, None).await
    }

    /// [`connect`](Self::connect), its calls compressed both ways with
    /// `compression`.
    pub async fn connect_compressed(
        addr: SocketAddr,
        tls: Option<TlsDial>,
        compression: Option<CompressionEncoding>,
    ) -> Result<Self> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .context("the endpoint")?
            .tcp_nodelay(true);
        let channel = match tls {
            None => endpoint.connect().await,
            Some(dial) => endpoint.connect_with_connector(dial).await,
        }
        .context(format_args!("connecting to {addr}"))?;
        let grpc = tonic::client::Grpc::new(channel);
        Ok(Self(match compression {
            Some(encoding) => grpc.send_compressed(encoding).accept_compressed(encoding),
            None => grpc,
        }))
    }

    async fn ready(&mut self) -> Result<()> {
        self.0
            .ready()
            .await
            .map_err(|err| Failure::new(format_args!("the channel: {err}")))
    }
}

impl Caller for TonicCaller {
    async fn say(&mut self, text: String) -> Result<()> {
        self.ready().await?;
        let request = tonic::Request::new(say_request(text));
        let sent = request.get_ref().text.clone();
        let reply = self
            .0
            .unary(
                request,
                http::uri::PathAndQuery::from_static(SAY_PATH),
                ProstCodec::<EchoRequest, EchoReply>::default(),
            )
            .await
            .context("Say")?;
        check("Say", &sent, &reply.get_ref().text)
    }

    async fn expand(&mut self, text: String, count: u32) -> Result<()> {
        self.ready().await?;
        let request = tonic::Request::new(ExpandRequest {
            text: text.clone(),
            count,
        });
        let mut replies = self
            .0
            .server_streaming(
                request,
                http::uri::PathAndQuery::from_static(EXPAND_PATH),
                ProstCodec::<ExpandRequest, EchoReply>::default(),
            )
            .await
            .context("Expand")?
            .into_inner();
        let mut n = 0;
        while let Some(reply) = replies.message().await.context("Expand")? {
            check_expanded(&text, n, &reply.text)?;
            n += 1;
        }
        check_count(n, count)
    }
}

// ---- tarpc ------------------------------------------------------------

/// The echo message for tarpc, `EchoRequest`'s and `EchoReply`'s
/// fields (serde, bincode on the wire).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TarpcMessage {
    pub text: String,
    pub payload: Vec<u8>,
}

#[tarpc::service]
pub trait TarpcEcho {
    /// Answers with the request's message.
    async fn say(request: TarpcMessage) -> TarpcMessage;
}

#[derive(Clone)]
struct TarpcServer;

impl TarpcEcho for TarpcServer {
    async fn say(self, _: context::Context, request: TarpcMessage) -> TarpcMessage {
        request
    }
}

/// tarpc's transport: length-delimited bincode over TCP.
fn transport<Item, SinkItem>(
    tcp: TcpStream,
) -> tarpc::serde_transport::Transport<TcpStream, Item, SinkItem, Bincode<Item, SinkItem>>
where
    Item: for<'de> serde::Deserialize<'de>,
    SinkItem: serde::Serialize,
{
    tarpc::serde_transport::new(Framed::new(tcp, LengthDelimitedCodec::new()), Bincode::default())
}

/// tarpc's server with the echo service on `listener` until `stop`:
/// every connection a channel, every request a task.
pub async fn serve_tarpc(
    listener: TcpListener,
    stop: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let mut stop = std::pin::pin!(stop);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let tcp = tokio::select! {
            tcp = accept(&listener) => tcp.context("accepting")?,
            () = &mut stop => break,
        };
        let channel = BaseChannel::with_defaults(transport(tcp));
        connections.spawn(channel.execute(TarpcServer.serve()).for_each(|call| async move {
            tokio::spawn(call);
        }));
    }
    connections.shutdown().await;
    Ok(())
}

/// tarpc's generated client on one connection.
#[derive(Clone)]
pub struct TarpcCaller(TarpcEchoClient);

impl TarpcCaller {
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        let tcp = weft_bench::stacks::tcp_connect(addr).await?;
        let client = TarpcEchoClient::new(tarpc::client::Config::default(), transport(tcp)).spawn();
        Ok(Self(client))
    }
}

impl Caller for TarpcCaller {
    async fn say(&mut self, text: String) -> Result<()> {
        let sent = text.clone();
        let request = TarpcMessage {
            text,
            payload: Vec::new(),
        };
        let reply = self.0.say(context::current(), request).await.context("say")?;
        check("say", &sent, &reply.text)
    }

    async fn expand(&mut self, _: String, _: u32) -> Result<()> {
        Err(Failure::new("tarpc has no streaming calls"))
    }
}
