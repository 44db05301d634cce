//! A small hyper service served over weft with `weft::http::serve`: every
//! TCP connection is a weft connection (X25519 + Ed25519 handshake, sealed
//! records, multiplexed streams), and every stream the client opens is one
//! HTTP/1.1 or h2 connection. Each request carries the caller's verified
//! `PeerInfo`.
//!
//! - `GET /hello` answers with the caller's verified peer id.
//! - `POST /echo` echoes the request body (up to 1 MiB).
//!
//! It prints its listen address and its own public key, which a client pins:
//!
//! cargo run --example hyper_server -- [--listen 127.0.0.1:7000] [--seed N] [--plaintext]
//! cargo run --example hyper_client -- --connect 127.0.0.1:7000 --peer-key <printed key>
//!
//! Ctrl-C shuts it down gracefully: no new connections, a go-away on every
//! weft connection, requests in flight finish. `hyper_client` (run without
//! `--connect`) starts this same server in-process.

use std::{convert::Infallible, future::Future, io, net::SocketAddr};

use bytes::Bytes;
use clap::Parser;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tower::{service_fn, ServiceBuilder};
use weft::{
    handshake::Versions, http::PeerInfo, mux, transport::TcpAcceptor, BoxAcceptor, EncryptLayer, Identity,
    MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// Streams (HTTP connections) one client may have open at once.
const MAX_STREAMS: u32 = 256;
/// The largest body `/echo` takes.
const MAX_ECHO: usize = 1 << 20;

#[derive(Debug, Parser)]
#[command(about = "A hyper service over weft")]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:7000")]
    listen: SocketAddr,
    /// A fixed identity from a number (example use only: the seed is the
    /// secret key), so that the key stays the same across runs.
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long)]
    plaintext: bool,
}

/// The acceptor stack: the full weft stack over accepted TCP connections,
/// with the EncryptLayer left out when `identity` is `None` (a stack type
/// each, boxed into one).
pub fn acceptor(identity: Option<Identity>) -> BoxAcceptor {
    let layers = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic());
    let negotiate = NegotiateLayer::new(Versions::CURRENT).protocols(["h2", "http/1.1"]);
    match identity {
        Some(identity) => BoxAcceptor::new(
            layers
                .layer(EncryptLayer::new(identity))
                .layer(negotiate)
                .service(TcpAcceptor::new()),
        ),
        None => BoxAcceptor::new(layers.layer(negotiate).service(TcpAcceptor::new())),
    }
}

/// The HTTP service: `/hello` and `/echo`.
pub async fn app(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Bytes| {
        let mut res = Response::new(Full::new(body));
        *res.status_mut() = status;
        Ok(res)
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/hello") => {
            let info = req.extensions().get::<PeerInfo>();
            let who = match info.and_then(|info| info.id) {
                Some(id) => id.to_string(),
                None => "unauthenticated peer (plaintext)".into(),
            };
            let addr = info
                .and_then(|info| info.addr)
                .map_or("-".into(), |a| a.to_string());
            reply(StatusCode::OK, format!("hello, {who} at {addr}\n").into())
        }
        (&Method::POST, "/echo") => match Limited::new(req.into_body(), MAX_ECHO).collect().await {
            Ok(body) => reply(StatusCode::OK, body.to_bytes()),
            Err(err) => reply(StatusCode::PAYLOAD_TOO_LARGE, format!("{err}\n").into()),
        },
        (_, "/hello" | "/echo") => reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new()),
        _ => reply(StatusCode::NOT_FOUND, "try GET /hello or POST /echo\n".into()),
    }
}

/// Serves [`app`] on `listener` until `shutdown` completes, then drains
/// gracefully.
pub async fn run(
    listener: TcpListener,
    identity: Option<Identity>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    weft::http::serve(listener, acceptor(identity), service_fn(app))
        .with_graceful_shutdown(shutdown)
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let identity = args.seed.map_or_else(Identity::generate, |n| {
        let mut seed = [0; 32];
        seed[..8].copy_from_slice(&n.to_le_bytes());
        Identity::from_seed(&seed)
    });
    let key = identity.peer_id();
    let listener = TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    println!("listening on {addr} (weft, h2 or http/1.1)");
    if args.plaintext {
        println!("plaintext: no encryption, no peer key (clients need --plaintext)");
    } else {
        println!("peer key  {key}");
        println!("try: cargo run --example hyper_client -- --connect {addr} --peer-key {key}");
    }
    let identity = (!args.plaintext).then_some(identity);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        println!("Ctrl-C: shutting down gracefully (requests in flight finish)");
    };
    run(listener, identity, shutdown).await?;
    println!("stopped");
    Ok(())
}
