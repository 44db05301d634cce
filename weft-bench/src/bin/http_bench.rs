//! HTTP requests per second and latency through hyper, over three carriers
//! in one process on loopback (issue 10): weft (hyper-util's client through
//! `weft::http::Connector` and a `weft::pool::Pool`, `weft::http::serve` on
//! the server, AES-256-GCM), plain TCP (hyper-util's `HttpConnector` and its
//! auto server), and tokio-rustls TLS 1.3 (AES-256-GCM, ECDSA P-256
//! self-signed certificate, no resumption, ALPN).
//!
//! The weft client asks for `weft://127.0.0.1:PORT/`, routed to an
//! endpoint that pins the server's key (as the TLS client checks the
//! certificate); its stack is the pool's usual one (multiplexer, dynamic
//! records, encryption, the Setup offering `h2` or `http/1.1`), the
//! server's the same with a stream limit of 1,000.
//!
//! Every request is a `GET /` without a body; every response is 200 with a
//! 32-byte body, read to its end. The client runs on a current-thread
//! runtime, the server on a one-worker runtime, each on its own thread.
//!
//! - **Warm**: one client; one request, then a warm-up (10 per in-flight
//!   slot, at least 1,000), then `--requests` requests with `--concurrency`
//!   of them in flight at all times (closed loop). Reported: requests per
//!   second over the measured requests, p50 and p99 of each request's time
//!   from `client.get` to the body's end.
//! - **Cold**: `--cold` times in a row (after 5 unmeasured), a new client
//!   (for weft a new pool too, over a clone of one dialer stack): TCP
//!   connect, the handshake, one request, its response. Reported: the
//!   median, `cold_us`.
//!
//! HTTP/1.1 (`--protocol h1`): over TCP and TLS each request in flight has
//! its own connection; over weft its own stream of one weft connection.
//! h2 (`--protocol h2`): one connection (over weft, one stream, the
//! connector asked for `http2`) carries every request; TLS and weft agree
//! `h2` by ALPN and the Setup's protocols, TCP uses prior knowledge
//! (`http2_only`). `--protocol default`: both ends offer h2 and HTTP/1.1
//! and the client asks for nothing more, so TLS agrees h2 by ALPN, weft's
//! connector speaks HTTP/1.1 on each stream (its default) and TCP
//! HTTP/1.1.
//!
//! ```text
//! cargo build --release -p weft-bench --bin http_bench
//! target/release/http_bench --mode weft --protocol h2            # 64 in flight, 50,000 requests
//! target/release/http_bench --mode tls --protocol h1 --json
//! target/release/http_bench --mode tcp --concurrency 1 --requests 5000 --cold 50
//! ```
//!
//! With `--json`, the only output on stdout is one line:
//! `{"mode":…,"protocol":…,"concurrency":…,"requests":…,"rps":…,"p50_us":…,"p99_us":…,"cold_us":…}`.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http::{StatusCode, Uri, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{
        connect::{Connect, HttpConnector},
        Client,
    },
    rt::TokioExecutor,
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinSet};
use tower::ServiceBuilder;
use weft::{
    handshake::Versions,
    mux,
    pool::{Endpoint, Pool},
    transport::{TcpAcceptor, TcpConnector},
    AdmissionLayer, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
    StreamLimitLayer,
};
use weft_bench::{
    http as baseline,
    stats::{round3, Sample},
    Context, Failure, Result,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// hyper over weft, AES-256-GCM, through the pool.
    Weft,
    /// hyper over plain TCP.
    Tcp,
    /// hyper over tokio-rustls TLS 1.3, AES-256-GCM.
    Tls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Protocol {
    /// HTTP/1.1.
    H1,
    /// HTTP/2.
    H2,
    /// What a client gets when both ends offer h2 and HTTP/1.1 (as
    /// README's stacks do) and nothing more is asked: h2 over TLS (ALPN),
    /// HTTP/1.1 on each weft stream (`weft::http::Connector`'s default)
    /// and over TCP.
    Default,
}

impl Protocol {
    /// What ALPN and weft's Setup offer.
    fn alpn(self) -> &'static [&'static str] {
        match self {
            Protocol::H1 => &["http/1.1"],
            Protocol::H2 => &["h2"],
            Protocol::Default => &["h2", "http/1.1"],
        }
    }

    /// The HTTP version the requests travel in, over `mode`.
    fn version(self, mode: Mode) -> Version {
        match (self, mode) {
            (Protocol::H1, _) | (Protocol::Default, Mode::Weft | Mode::Tcp) => Version::HTTP_11,
            (Protocol::H2, _) | (Protocol::Default, Mode::Tls) => Version::HTTP_2,
        }
    }
}

#[derive(Parser, Debug, Clone, Copy)]
#[command(about = "HTTP/1.1 and h2 requests per second and latency over weft, TCP and TLS")]
struct Args {
    /// What carries the requests.
    #[arg(long, value_enum, default_value = "weft")]
    mode: Mode,
    /// HTTP/1.1 or h2.
    #[arg(long, value_enum, default_value = "h2")]
    protocol: Protocol,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Requests measured (after the warm-up).
    #[arg(long, default_value_t = 50_000)]
    requests: usize,
    /// Cold first requests (new client each), whose median is `cold_us`.
    #[arg(long, default_value_t = 200)]
    cold: usize,
    /// Print one JSON object as the last line, and nothing else on stdout.
    #[arg(long)]
    json: bool,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
}

/// Cold requests before the measured ones.
const COLD_WARM_UP: usize = 5;

struct Outcome {
    rps: f64,
    latencies: Sample,
    cold: Sample,
    /// What the weft pool saw, for the readable output.
    pool: Option<String>,
}

fn main() {
    weft_bench::exit_on_failure("http_bench", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    weft_bench::pin_threads(args.pin);
    if args.concurrency == 0 || args.requests == 0 {
        return Err(Failure::new("--concurrency and --requests must be at least 1"));
    }
    let server_rt = weft_bench::server_runtime()?;
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .context("binding loopback")?;
    let addr = listener.local_addr().context("local address")?;
    let (stop, stopped) = oneshot::channel::<()>();
    let alpn = args.protocol.alpn();

    // The server, and what the client needs to reach it.
    let mut tls = None;
    let mut server_peer = None;
    let server = match args.mode {
        Mode::Weft => {
            let identity = Identity::generate();
            server_peer = Some(identity.peer_id());
            let acceptor = ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(StreamLimitLayer::new(1000))
                .layer(RecordSizeLayer::dynamic())
                .layer(EncryptLayer::new(identity))
                .layer(NegotiateLayer::new(Versions::CURRENT).protocols(alpn.iter().copied()))
                .service(TcpAcceptor::new());
            // Cold requests are a handshake each, all from 127.0.0.1: an
            // admission rate for a busy client, not for a stranger (the
            // TLS server admits them all).
            let serve = weft::http::serve(
                listener,
                acceptor,
                tower::service_fn(baseline::hello::<hyper::body::Incoming>),
            )
            .admission(
                AdmissionLayer::new()
                    .handshakes_per_second(1_000_000)
                    .handshakes_per_second_per_address(1_000_000),
            );
            server_rt.spawn(serve.with_graceful_shutdown(async {
                let _ = stopped.await;
            }))
        }
        Mode::Tcp | Mode::Tls => {
            let acceptor = match args.mode {
                Mode::Tls => {
                    let (dial, acceptor) = baseline::tls_with_alpn(alpn)?;
                    tls = Some(dial);
                    Some(acceptor)
                }
                _ => None,
            };
            server_rt.spawn(baseline::serve_hyper(listener, acceptor, stopped))
        }
    };

    let outcome = weft_bench::client_runtime()?.block_on(async move {
        // In a task of its own, as an application's would be (see ping).
        tokio::spawn(async move {
            let version = args.protocol.version(args.mode);
            match args.mode {
                Mode::Weft => {
                    let dialer = ServiceBuilder::new()
                        .layer(MultiplexLayer::new(mux::Builder::new()))
                        .layer(RecordSizeLayer::dynamic())
                        .layer(EncryptLayer::new(Identity::generate()))
                        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(alpn.iter().copied()))
                        .service(TcpConnector::new());
                    let uri = format!("weft://{addr}/").parse::<Uri>().context("the URI")?;
                    // The server's key is pinned, as the TLS client checks
                    // the certificate.
                    let endpoint = Endpoint::new(addr).expect_peer(server_peer.expect("the server's key"));
                    let route = addr.to_string();
                    let new_client = |pool: Pool<_>| {
                        let connector =
                            weft::http::Connector::new(pool).route(route.clone(), endpoint.clone());
                        // h2 on one stream only when asked for; the
                        // connector's default is HTTP/1.1 on each.
                        let connector = match args.protocol {
                            Protocol::H2 => connector.http2(),
                            _ => connector,
                        };
                        Client::builder(TokioExecutor::new()).build(connector)
                    };
                    let warm = Pool::builder().build(dialer.clone());
                    let mut stats = None;
                    // Takes the warm pool's stats, and lets it go before the
                    // cold requests.
                    let slot = &mut stats;
                    let warm_pool = warm.clone();
                    let after_warm = move || *slot = Some(warm_pool.stats());
                    let mut outcome = bench(
                        new_client(warm),
                        || new_client(Pool::builder().build(dialer.clone())),
                        after_warm,
                        &uri,
                        version,
                        &args,
                    )
                    .await?;
                    let warm = stats.expect("the warm run's stats");
                    outcome.pool = Some(format!(
                        "weft pool (warm client): {} dial(s), {} stream(s) opened, open per connection {:?}",
                        warm.dials, warm.streams_opened, warm.streams_per_connection
                    ));
                    Ok(outcome)
                }
                Mode::Tcp => {
                    let mut http = HttpConnector::new();
                    http.set_nodelay(true);
                    let uri = format!("http://{addr}/").parse::<Uri>().context("the URI")?;
                    let h2 = args.protocol == Protocol::H2;
                    let new_client = || {
                        Client::builder(TokioExecutor::new())
                            .http2_only(h2)
                            .build(http.clone())
                    };
                    bench(new_client(), new_client, || {}, &uri, version, &args).await
                }
                Mode::Tls => {
                    let dial = tls.expect("the TLS client");
                    let uri = format!("https://{addr}/").parse::<Uri>().context("the URI")?;
                    let new_client = || Client::builder(TokioExecutor::new()).build(dial.clone());
                    bench(new_client(), new_client, || {}, &uri, version, &args).await
                }
            }
        })
        .await
        .context("the client's task")?
    });

    // Shut the server down (weft's gracefully) and see that it ends.
    weft_bench::stop_server("http_bench", &server_rt, stop, server);
    server_rt.shutdown_timeout(Duration::from_secs(1));
    let outcome = outcome?;
    report(&args, &outcome);
    Ok(())
}

fn report(args: &Args, outcome: &Outcome) {
    let (mode, protocol) = (name(args.mode), name(args.protocol));
    let p50 = round3(outcome.latencies.percentile(50.0));
    let p99 = round3(outcome.latencies.percentile(99.0));
    let cold = round3(outcome.cold.percentile(50.0));
    let rps = outcome.rps.round();
    if args.json {
        // In this order (serde_json's maps would sort the keys).
        let fields = [
            ("mode", serde_json::json!(mode)),
            ("protocol", serde_json::json!(protocol)),
            ("concurrency", serde_json::json!(args.concurrency)),
            ("requests", serde_json::json!(args.requests)),
            ("rps", serde_json::json!(rps)),
            ("p50_us", serde_json::json!(p50)),
            ("p99_us", serde_json::json!(p99)),
            ("cold_us", serde_json::json!(cold)),
        ];
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        println!("{{{}}}", body.join(","));
    } else {
        println!(
            "{mode} {protocol}: {} requests, {} in flight: {rps:.0} requests/s, p50 {p50:.1} µs, p99 {p99:.1} µs; \
             cold first request (median of {}) {cold:.1} µs",
            args.requests,
            args.concurrency,
            outcome.cold.len()
        );
        if let Some(pool) = &outcome.pool {
            println!("{pool}");
        }
    }
}

/// A value's name on the command line.
fn name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The warm run on `client` (then `after_warm`), then the cold requests,
/// each on a client of its own from `new_client`.
async fn bench<C>(
    client: Client<C, Empty<Bytes>>,
    new_client: impl Fn() -> Client<C, Empty<Bytes>>,
    after_warm: impl FnOnce(),
    uri: &Uri,
    version: Version,
    args: &Args,
) -> Result<Outcome>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    get(&client, uri, version).await.context("the first request")?;
    let warm_up = (10 * args.concurrency).max(1000);
    load(&client, uri, version, warm_up, args.concurrency)
        .await
        .context("warming up")?;
    let began = Instant::now();
    let latencies = load(&client, uri, version, args.requests, args.concurrency).await?;
    let seconds = began.elapsed().as_secs_f64();
    drop(client);
    after_warm();

    let mut cold = Vec::with_capacity(args.cold);
    for i in 0..COLD_WARM_UP + args.cold {
        let client = new_client();
        let began = Instant::now();
        get(&client, uri, version).await.context("a cold request")?;
        let took = began.elapsed();
        drop(client);
        if i >= COLD_WARM_UP {
            cold.push(took.as_secs_f64() * 1e6);
        }
    }
    Ok(Outcome {
        rps: args.requests as f64 / seconds,
        latencies: Sample::new(latencies),
        cold: Sample::new(cold),
        pool: None,
    })
}

/// `total` requests with `concurrency` in flight; each one's time in µs.
async fn load<C>(
    client: &Client<C, Empty<Bytes>>,
    uri: &Uri,
    version: Version,
    total: usize,
    concurrency: usize,
) -> Result<Vec<f64>>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.min(total) {
        let (client, uri, next) = (client.clone(), uri.clone(), next.clone());
        tasks.spawn(async move {
            let mut times = Vec::with_capacity(total / concurrency + 1);
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let began = Instant::now();
                get(&client, &uri, version).await?;
                times.push(began.elapsed().as_secs_f64() * 1e6);
            }
            Ok::<_, Failure>(times)
        });
    }
    let mut all = Vec::with_capacity(total);
    while let Some(times) = tasks.join_next().await {
        all.extend(times.context("a request task")??);
    }
    Ok(all)
}

/// One GET, its status, version and whole body checked.
async fn get<C>(client: &Client<C, Empty<Bytes>>, uri: &Uri, version: Version) -> Result<()>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let response = client.get(uri.clone()).await.context(format_args!("GET {uri}"))?;
    if response.status() != StatusCode::OK {
        return Err(Failure::new(format_args!("GET {uri}: {}", response.status())));
    }
    if response.version() != version {
        return Err(Failure::new(format_args!(
            "GET {uri}: answered in {:?}, not {version:?}",
            response.version()
        )));
    }
    let body = response.into_body().collect().await.context("reading the body")?;
    match body.to_bytes().len() {
        n if n == baseline::BODY.len() => Ok(()),
        n => Err(Failure::new(format_args!(
            "a body of {n} bytes, not {}",
            baseline::BODY.len()
        ))),
    }
}
