//! hyper-util's legacy `Client` over weft: `weft::http::Connector` turns
//! each hyper connection into a stream on a pooled, encrypted weft
//! connection, pinned to the server's key. It sends `--count` requests one
//! after another and prints, for each, the status, the negotiated protocol
//! (from the response's `PeerInfo` extension and its HTTP version), the
//! server's verified key and the body. The first request dials; the
//! others reuse the connection and its stream (HTTP/1.1 on a weft stream,
//! the connector's default; with `--h2`, HTTP/2 on one weft stream).
//!
//! cargo run --example hyper_client                  # in-process server
//! cargo run --example hyper_client -- --connect 127.0.0.1:7000 --peer-key <key>
//! cargo run --example hyper_client -- --path /echo --data 'hello' --count 5
//!
//! Without `--connect` it starts the `hyper_server` example's server
//! in-process on 127.0.0.1:0 and pins its key.

#[path = "hyper_server.rs"]
#[allow(dead_code)]
mod hyper_server;

use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use tokio::{net::TcpListener, sync::oneshot};
use tower::ServiceBuilder;
use weft::{
    handshake::{PeerId, Versions},
    http::{Connector, PeerInfo},
    mux,
    pool::{Endpoint, Pool},
    transport::TcpConnector,
    BoxDialer, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};

#[derive(Debug, Parser)]
#[command(about = "hyper-util's client over weft")]
struct Args {
    /// The server (host:port); without it, one is started in-process.
    #[arg(long)]
    connect: Option<String>,
    /// The key the server must present (64 hex digits, as hyper_server
    /// prints it); the in-process server's is pinned automatically.
    #[arg(long)]
    peer_key: Option<PeerId>,
    /// The request path.
    #[arg(long, default_value = "/hello")]
    path: String,
    /// A body to POST (without it, GET).
    #[arg(long)]
    data: Option<String>,
    /// Requests, one after another.
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Speak h2 on one weft stream (`Connector::http2`) rather than
    /// HTTP/1.1 on a stream per request in flight (the connector's
    /// default, where weft is the multiplexer).
    #[arg(long)]
    h2: bool,
    /// No EncryptLayer (for a server run with --plaintext).
    #[arg(long)]
    plaintext: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();

    // The server: the one given, or hyper_server's, in-process.
    let mut local = None;
    let (authority, peer_key) = match &args.connect {
        Some(connect) => (connect.clone(), args.peer_key),
        None => {
            let identity = Identity::generate();
            let key = identity.peer_id();
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let (stop, stopped) = oneshot::channel::<()>();
            let identity = (!args.plaintext).then_some(identity);
            let server = tokio::spawn(hyper_server::run(listener, identity, async {
                let _ = stopped.await;
            }));
            local = Some((stop, server));
            let pin = (!args.plaintext).then_some(args.peer_key.unwrap_or(key));
            (addr.to_string(), pin)
        }
    };

    // The dialer stack (encryption on or off: a stack type each, boxed
    // into one), the pool, and hyper-util's client over the pool.
    let layers = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic());
    let negotiate = NegotiateLayer::new(Versions::CURRENT).protocols(["h2", "http/1.1"]);
    let dialer = if args.plaintext {
        BoxDialer::new(layers.layer(negotiate).service(TcpConnector::new()))
    } else {
        BoxDialer::new(
            layers
                .layer(EncryptLayer::new(Identity::generate()))
                .layer(negotiate)
                .service(TcpConnector::new()),
        )
    };
    let pool = Pool::builder().build(dialer);
    let mut endpoint: Endpoint = authority.parse()?;
    if let Some(key) = peer_key {
        endpoint = endpoint.expect_peer(key);
    }
    // `http://<authority>` is routed to the (pinned) endpoint.
    let connector = Connector::new(pool.clone()).route(authority.clone(), endpoint.clone());
    let connector = if args.h2 { connector.http2() } else { connector };
    let client = Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(connector);
    let uri: http::Uri = format!("http://{authority}{}", args.path).parse()?;

    let pinned = peer_key.map_or("not pinned".into(), |k| format!("pinned to {k}"));
    println!("server   {authority}, {pinned}");

    for i in 1..=args.count {
        let (method, body) = match &args.data {
            Some(data) => (Method::POST, Bytes::from(data.clone())),
            None => (Method::GET, Bytes::new()),
        };
        let req = Request::builder()
            .method(method)
            .uri(uri.clone())
            .body(Full::new(body))?;
        let (parts, body) = client.request(req).await?.into_parts();
        let body = body.collect().await?.to_bytes();
        // What weft agreed for the connection, and whom it verified.
        let info = parts.extensions.get::<PeerInfo>();
        let peer = info.and_then(|info| info.id);
        println!(
            "#{i:<3} {} {} ({:?}) peer {} body {:?}",
            parts.status.as_u16(),
            info.and_then(|info| info.protocol.as_deref()).unwrap_or("-"),
            parts.version,
            peer.map_or("-".into(), |p| p.to_string()),
            String::from_utf8_lossy(&body).trim_end(),
        );
        if peer_key.is_some() && peer != peer_key {
            return Err(format!("the server presented {peer:?}, not the pinned key").into());
        }
    }
    let stats = pool.stats();
    println!(
        "pool     {} dial(s), {} stream(s) opened",
        stats.dials, stats.streams_opened
    );

    // The in-process server shuts down gracefully once the client is gone.
    drop(client);
    if let Some((stop, server)) = local {
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), server).await???;
    }
    Ok(())
}
