//! The echo service's client over weft RPC: the generated
//! `echo_client::EchoClient` over a `weft::rpc::client::Client` on a
//! `weft::pool::Pool` of encrypted connections, pinned to the server's
//! key. It makes each kind of call and prints what came back and how long
//! it took:
//!
//! - `Say` (unary): the first, cold call pays for the TCP connect, the
//!   weft handshake and the call; then `--count` warm calls on the pooled
//!   connection (one stream each, one round trip).
//! - `Expand` (server streaming): `--expand` replies.
//! - `Collect` (client streaming): "a", "b", "c" joined into one reply.
//! - `Chat` (bidirectional): one reply per request, as they come.
//! - Retries: the generated client over tower's `Retry` around the raw
//!   `Client`, with a policy that makes an idempotent call again when it
//!   failed `UNAVAILABLE` (`RawCall::try_clone` copies a call with one
//!   request message). It is shown against a second in-process server
//!   that starts listening 150 ms after the first attempt: the attempts
//!   before it fail to dial.
//!
//! cargo run --example rpc_client                  # in-process server
//! cargo run --example rpc_client -- --connect 127.0.0.1:7001 --peer-key <key>
//! cargo run --example rpc_client -- --json
//!
//! Without `--connect` it starts the `rpc_server` example's server
//! in-process on 127.0.0.1:0 and pins its key. `--json` prints one JSON
//! object as the last line.

#[path = "rpc_server.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use clap::Parser;
use futures_util::{stream, StreamExt};
use rpc_server::echo::{echo_client::EchoClient, EchoReply, EchoRequest, ExpandRequest};
use tokio::{net::TcpListener, sync::oneshot};
use tower::{retry::Policy, ServiceBuilder};
use weft::{
    handshake::{PeerId, Versions},
    mux,
    pool::{Dialer, Endpoint, Pool},
    rpc::{
        client::{Client, RawCall, RawReply},
        Code, Request, Status,
    },
    transport::TcpConnector,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};

#[derive(Debug, Parser)]
#[command(about = "The echo service's client over weft RPC")]
struct Args {
    /// The server (host:port); without it, one is started in-process.
    #[arg(long)]
    connect: Option<String>,
    /// The key the server must present (as rpc_server prints it); the
    /// in-process server's is pinned automatically.
    #[arg(long)]
    peer_key: Option<PeerId>,
    /// What Say sends.
    #[arg(long, default_value = "hi")]
    message: String,
    /// Warm Say calls after the cold one, for the warm median.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Replies Expand asks for.
    #[arg(long, default_value_t = 3)]
    expand: u32,
    /// One JSON object as the last line.
    #[arg(long)]
    json: bool,
}

/// The first and last of many replies.
fn shorten(replies: &[String]) -> String {
    match replies {
        [first, _, _, .., last] => format!("[{first:?}, .., {last:?}]"),
        _ => format!("{replies:?}"),
    }
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

/// The dialer stack: the full weft stack (default suites) over TCP.
fn dialer() -> impl Dialer {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new())
}

/// Retries a call that failed `UNAVAILABLE` (the pool found no stream:
/// the dial failed, or the connection went away before the server took
/// the call), up to `left` more times, waiting `delay` (doubling) before
/// each. Only for idempotent methods: UNAVAILABLE can also be a call the
/// server began. Calls with streamed requests are not retried
/// (`try_clone` is `None`).
#[derive(Debug, Clone)]
struct RetryUnavailable {
    left: usize,
    delay: Duration,
    /// Retries made, over every call (shared by the clones).
    retries: Arc<AtomicUsize>,
}

impl Policy<RawCall, RawReply, Status> for RetryUnavailable {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, call: &mut RawCall, result: &mut Result<RawReply, Status>) -> Option<Self::Future> {
        match result {
            Err(status) if status.code() == Code::Unavailable && self.left > 0 => {
                self.left -= 1;
                self.retries.fetch_add(1, Ordering::Relaxed);
                let wait = self.delay;
                self.delay *= 2;
                eprintln!("retry    {} failed ({status}); again in {wait:?}", call.method());
                Some(tokio::time::sleep(wait))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, call: &RawCall) -> Option<RawCall> {
        call.try_clone()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();

    // The server: the one given, or rpc_server's, in-process.
    let mut local = None;
    let endpoint = match &args.connect {
        Some(connect) => {
            let endpoint: Endpoint = connect.parse()?;
            match args.peer_key {
                Some(key) => endpoint.expect_peer(key),
                None => endpoint,
            }
        }
        None => {
            let identity = Identity::generate();
            let key = args.peer_key.unwrap_or(identity.peer_id());
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let (stop, stopped) = oneshot::channel::<()>();
            let server = tokio::spawn(rpc_server::run(listener, identity, async {
                let _ = stopped.await;
            }));
            local = Some((stop, server));
            Endpoint::new(addr).expect_peer(key)
        }
    };
    // An endpoint shows the key it pins ("as KEY").
    println!(
        "server   {endpoint}{}{}",
        if local.is_some() { " (in-process)" } else { "" },
        if endpoint.expected_peer().is_none() {
            " (key not pinned)"
        } else {
            ""
        }
    );

    let pool = Pool::builder().build(dialer());
    let mut echo =
        EchoClient::new(Client::new(pool.clone(), endpoint.clone()).timeout(Duration::from_secs(5)));

    // Say: cold, then warm.
    let say = |text: &str| EchoRequest {
        text: text.into(),
        payload: Vec::new(),
    };
    let started = Instant::now();
    let reply: EchoReply = echo.say(say(&args.message)).await?.into_inner();
    let cold = started.elapsed();
    println!(
        "Say      {:?} in {:.1} us (cold: TCP connect + weft handshake + call)",
        reply.text,
        micros(cold)
    );
    let mut warm = Vec::with_capacity(args.count);
    for _ in 0..args.count {
        let started = Instant::now();
        let again = echo.say(say(&args.message)).await?.into_inner();
        warm.push(started.elapsed());
        if again.text != args.message {
            return Err(format!("Say answered {:?}, not {:?}", again.text, args.message).into());
        }
    }
    warm.sort();
    let warm_p50 = warm.get(warm.len() / 2).copied();
    println!(
        "Say      warm p50 {} over {} calls",
        warm_p50.map_or("-".into(), |t| format!("{:.1} us", micros(t))),
        warm.len()
    );

    // Expand: one request, a stream of replies.
    let started = Instant::now();
    let mut replies = echo
        .expand(ExpandRequest {
            text: args.message.clone(),
            count: args.expand,
        })
        .await?
        .into_inner();
    let mut expanded = Vec::new();
    while let Some(reply) = replies.message().await? {
        expanded.push(reply.text);
    }
    println!(
        "Expand   {} replies {} in {:.1} us",
        expanded.len(),
        shorten(&expanded),
        micros(started.elapsed())
    );
    if expanded.len() != args.expand as usize {
        return Err(format!("Expand answered {} replies, not {}", expanded.len(), args.expand).into());
    }

    // Collect: a stream of requests, one reply.
    let started = Instant::now();
    let requests = stream::iter(["a", "b", "c"].map(say));
    let collected = echo.collect(requests).await?.into_inner();
    println!(
        "Collect  {:?} in {:.1} us",
        collected.text,
        micros(started.elapsed())
    );

    // Chat: requests and replies at once, each reply as its request comes.
    let started = Instant::now();
    let lines = ["one", "two", "three"];
    let requests = stream::iter(lines.map(say));
    let mut replies = echo.chat(requests).await?.into_inner();
    let mut chat = Vec::new();
    while let Some(reply) = replies.next().await {
        chat.push(reply?.text);
    }
    println!("Chat     {chat:?} in {:.1} us", micros(started.elapsed()));
    if chat.len() != lines.len() {
        return Err(format!("Chat answered {chat:?} to {lines:?}").into());
    }

    // Retries: a second server that starts late; the generated client over
    // tower's Retry around the raw client.
    let retries = Arc::new(AtomicUsize::new(0));
    let (retry_took, retried) = {
        let identity = Identity::generate();
        let key = identity.peer_id();
        // A free port, closed again until the late server takes it.
        let addr: SocketAddr = TcpListener::bind("127.0.0.1:0").await?.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let late = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let listener = TcpListener::bind(addr).await?;
            rpc_server::run(listener, identity, async {
                let _ = stopped.await;
            })
            .await
        });
        let pool = Pool::builder()
            .backoff(Duration::from_millis(10), Duration::from_millis(100))
            .build(dialer());
        let policy = RetryUnavailable {
            left: 8,
            delay: Duration::from_millis(20),
            retries: retries.clone(),
        };
        let raw = Client::new(pool, Endpoint::new(addr).expect_peer(key));
        let mut retrying = EchoClient::new(ServiceBuilder::new().retry(policy).service(raw));
        let started = Instant::now();
        let mut request = Request::new(say("retried"));
        request.set_timeout(Duration::from_secs(2));
        let reply = retrying.say(request).await?.into_inner();
        let took = started.elapsed();
        let _ = stop.send(());
        drop(retrying);
        tokio::time::timeout(Duration::from_secs(5), late)
            .await
            .map_err(|_| "the late server did not shut down within 5 s")???;
        (took, reply.text)
    };
    let retries = retries.load(Ordering::Relaxed);
    println!(
        "Retry    {retried:?} after {retries} retries on UNAVAILABLE, in {:.1} ms (the server came up 150 ms late)",
        retry_took.as_secs_f64() * 1e3
    );

    let stats = pool.stats();
    println!(
        "pool     {} dial(s), {} stream(s) opened, {} connection(s) pooled",
        stats.dials, stats.streams_opened, stats.connections
    );

    // The in-process server shuts down gracefully once the client is gone.
    drop(echo);
    drop(pool);
    if let Some((stop, server)) = local {
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .map_err(|_| "the in-process server did not shut down within 5 s")???;
    }

    if args.json {
        // In this order (serde_json's maps would sort the keys).
        let fields = [
            ("say", serde_json::json!(reply.text)),
            ("expand", serde_json::json!(expanded.len())),
            ("collect", serde_json::json!(collected.text)),
            ("chat", serde_json::json!(chat.len())),
            ("retries", serde_json::json!(retries)),
            ("cold_us", serde_json::json!(micros(cold))),
            ("warm_p50_us", serde_json::json!(warm_p50.map(micros))),
            ("dials", serde_json::json!(stats.dials)),
            ("streams_opened", serde_json::json!(stats.streams_opened)),
        ];
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        println!("{{{}}}", body.join(","));
    }
    Ok(())
}
