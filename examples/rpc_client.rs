//! The echo service's client over weft RPC: the generated
//! `echo_client::EchoClient` over a `weft::rpc::client::Client` on a
//! `weft::pool::Pool` of encrypted connections, pinned to the server's
//! key. It makes each kind of call once and prints what came back:
//!
//! - `Say` (unary): the first call dials (TCP connect, weft handshake),
//!   the second rides the pooled connection (one stream, one round trip).
//! - `Expand` (server streaming): `--expand` replies.
//! - `Collect` (client streaming): "a", "b", "c" joined into one reply.
//! - `Chat` (bidirectional): one reply per request, as they come.
//!
//! cargo run --example rpc_client                  # against an in-process server
//! cargo run --example rpc_client -- --connect 127.0.0.1:7001 --peer-key <key>
//!
//! Without `--connect` it starts the `rpc_server` example's server
//! in-process and pins its key. `rpc_retry` shows calls made again.

#[path = "rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::time::Duration;

use clap::Parser;
use futures_util::{stream, StreamExt};
use rpc_server::echo::{echo_client::EchoClient, EchoRequest, ExpandRequest};
use tokio::{net::TcpListener, sync::oneshot};
use weft::{
    handshake::PeerId,
    pool::{Endpoint, Pool},
    rpc::client::Client,
    Identity,
};

#[derive(Debug, Parser)]
#[command(about = "The echo service's client over weft RPC")]
struct Args {
    /// The server (host:port); without it, one is started in-process.
    #[arg(long)]
    connect: Option<String>,
    /// The key the server must present (as rpc_server prints it).
    #[arg(long)]
    peer_key: Option<PeerId>,
    /// What Say sends.
    #[arg(long, default_value = "hi")]
    message: String,
    /// Replies Expand asks for.
    #[arg(long, default_value_t = 3)]
    expand: u32,
}

fn say(text: &str) -> EchoRequest {
    EchoRequest {
        text: text.into(),
        payload: Vec::new(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();

    // The server: the one given, or rpc_server's, in-process.
    let (endpoint, local) = match (&args.connect, args.peer_key) {
        (Some(connect), key) => {
            let endpoint: Endpoint = connect.parse()?;
            (
                key.map_or(endpoint.clone(), |key| endpoint.expect_peer(key)),
                None,
            )
        }
        (None, _) => {
            let identity = Identity::generate();
            let key = identity.peer_id();
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let (stop, stopped) = oneshot::channel::<()>();
            let serving = rpc_server::run(listener, identity, async {
                let _ = stopped.await;
            });
            (
                Endpoint::new(addr).expect_peer(key),
                Some((stop, tokio::spawn(serving))),
            )
        }
    };
    println!("server   {endpoint}"); // with the key it pins

    // A pool of connections from weft's default dialer stack, and a client
    // of the endpoint over it; the generated client over that.
    let pool = Pool::builder().build(weft::dialer(Identity::generate()));
    let client = Client::new(pool.clone(), endpoint).timeout(Duration::from_secs(5));
    let mut echo = EchoClient::new(client);

    // Say: the first call dials, the second does not.
    for _ in 0..2 {
        let reply = echo.say(say(&args.message)).await?.into_inner();
        println!("Say      {:?}", reply.text);
    }

    // Expand: one request, a stream of replies.
    let request = ExpandRequest {
        text: args.message.clone(),
        count: args.expand,
    };
    let mut replies = echo.expand(request).await?.into_inner();
    let mut expanded = Vec::new();
    while let Some(reply) = replies.message().await? {
        expanded.push(reply.text);
    }
    println!("Expand   {expanded:?}");

    // Collect: a stream of requests, one reply.
    let requests = stream::iter(["a", "b", "c"].map(say));
    let collected = echo.collect(requests).await?.into_inner();
    println!("Collect  {:?}", collected.text);

    // Chat: requests and replies at once, each reply as its request comes.
    let requests = stream::iter(["one", "two", "three"].map(say));
    let mut replies = echo.chat(requests).await?.into_inner();
    let mut chat = Vec::new();
    while let Some(reply) = replies.next().await {
        chat.push(reply?.text);
    }
    println!("Chat     {chat:?}");

    let stats = pool.stats();
    println!(
        "pool     {} dial(s), {} stream(s) opened",
        stats.dials, stats.streams_opened
    );

    // The in-process server shuts down gracefully once asked.
    drop((echo, pool));
    if let Some((stop, server)) = local {
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), server).await???;
    }
    Ok(())
}
