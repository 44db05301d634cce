//! The echo service of `proto/examples/echo.proto`, with the server that
//! weft's code generator wrote for it (`echo_server::EchoServer`, from
//! build.rs into `OUT_DIR/weft.examples.rs`), served over encrypted weft
//! with `weft::rpc::server::Server`: every TCP connection is a weft
//! connection (X25519 + Ed25519 handshake, sealed records, multiplexed
//! streams), and every call is one stream.
//!
//! - `Say`: unary, answers with the request's text and payload.
//! - `Expand`: server streaming, `count` replies, "text 0" to
//!   "text count-1".
//! - `Collect`: client streaming, one reply joining the requests' texts.
//! - `Chat`: bidirectional, a reply to each request ("re: text"), as they
//!   come.
//!
//! It prints its address and its own public key, which a client pins:
//!
//! cargo run --example rpc_server -- [--listen 127.0.0.1:7001] [--seed N]
//! cargo run --example rpc_client -- --connect 127.0.0.1:7001 --peer-key <printed key>
//!
//! Ctrl-C shuts it down gracefully: no new connections, a go-away on every
//! weft connection, calls in flight finish. The other RPC examples start
//! this same server in-process.

use std::{future::Future, io, net::SocketAddr};

use clap::Parser;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use weft::{
    handshake::Versions, mux, rpc::server::Server, transport::TcpAcceptor, EncryptLayer, Identity,
    MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// The messages, `echo_server` and `echo_client`, as generated.
pub mod echo {
    weft::include_proto!("weft.examples");
}

mod echoer;

use echo::echo_server::EchoServer;
pub use echoer::Echoer;

/// The service's name.
pub const SERVICE: &str = "weft.examples.Echo";

/// Streams one client may have open at once (calls in flight).
pub const MAX_STREAMS: u32 = 1000;
/// The most replies one `Expand` sends.
pub const MAX_EXPAND: u32 = echoer::MAX_EXPAND;

/// The acceptor stack: the full weft stack (default suites) over accepted
/// TCP connections, with a stream limit of [`MAX_STREAMS`]. (The server
/// admits its handshakes: its `admission` setting.)
pub fn acceptor(identity: Identity) -> impl weft::stack::Acceptor {
    acceptor_with(identity, mux::Builder::new())
}

fn acceptor_with(identity: Identity, connections: mux::Builder) -> impl weft::stack::Acceptor {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(connections))
        .layer(StreamLimitLayer::new(MAX_STREAMS))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(identity))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new())
}

/// Serves the echo service on `listener` until `shutdown` completes, then
/// drains gracefully.
pub async fn run(
    listener: TcpListener,
    identity: Identity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    run_observed(listener, identity, (), shutdown).await
}

/// Serves the echo service as [`run`] does, telling `observer` of its
/// connections and of its calls: the metrics (`examples/metrics.rs`), the
/// live view (`examples/admin.rs`), or both as a pair; `()` tells nothing.
pub async fn run_observed<O>(
    listener: TcpListener,
    identity: Identity,
    observer: O,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()>
where
    O: weft::mux::Observer + weft::rpc::Observer + Clone,
{
    let acceptor = acceptor_with(identity, mux::Builder::new().observer(observer.clone()));
    Server::builder()
        .observer(observer)
        .add_service(EchoServer::new(Echoer))
        .serve_with_shutdown(listener, acceptor, shutdown)
        .await
}

#[derive(Debug, Parser)]
#[command(about = "The echo service over weft RPC")]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:7001")]
    listen: SocketAddr,
    /// A fixed identity from a number (example use only: the seed is the
    /// secret key), so that the key stays the same across runs.
    #[arg(long)]
    seed: Option<u64>,
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
    println!("listening on {addr} (weft RPC, {SERVICE}: Say, Expand, Collect, Chat)");
    println!("peer key  {key}");
    println!("try: cargo run --example rpc_client -- --connect {addr} --peer-key {key}");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        println!("Ctrl-C: shutting down gracefully (calls in flight finish)");
    };
    run(listener, identity, shutdown).await?;
    println!("stopped");
    Ok(())
}
