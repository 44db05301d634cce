//! RPC calls per second and latency, weft's RPC against tonic and tarpc,
//! in one process over loopback (issue 11): the same echo service
//! (`weft.examples.Echo`, proto/examples/echo.proto) on every carrier.
//!
//! - `weft`: the generated `echo_client::EchoClient` over
//!   `weft::rpc::client::Client` over a `weft::pool::Pool` (the pool's
//!   usual stack: multiplexer, dynamic records, encryption with AES-256-GCM
//!   or the `--suite` given, on both ends; the server's key pinned), served by
//!   `weft::rpc::server::Server` with the generated `EchoServer` around the
//!   `rpc_server` example's implementation. One weft connection carries
//!   every call, one stream each.
//! - The baselines use the same prost messages (the generated ones); tarpc
//!   a serde struct with their fields.
//! - `tonic`: tonic 0.14 on plain TCP (h2c, prior knowledge), a service
//!   and client written with tonic's generic `server::Grpc` and
//!   `client::Grpc` and tonic-prost's codec (what tonic-build would
//!   generate), one `Channel` (one HTTP/2 connection).
//! - `tonic-tls`: the same over tokio-rustls TLS 1.3 (AES-256-GCM, a
//!   self-signed ECDSA P-256 certificate, no resumption, ALPN `h2`),
//!   through `serve_with_incoming_shutdown` and
//!   `Endpoint::connect_with_connector`.
//! - `tarpc`: tarpc 0.38 with its bincode serde transport over plain TCP
//!   (length-delimited frames, Nagle off), one connection; unary only
//!   (tarpc has no streaming calls).
//! - `tcp`: no RPC at all, the floor under the others: the request's
//!   bytes echoed over raw TCP (Nagle off), one connection per call in
//!   flight, reused; unary only.
//!
//! With `--cold`, every call dials a connection of its own, pool bypassed
//! (the handshake is in every call's time):
//!
//! - `weft`: `rpc::client::Client::one_shot`, the handshake, then the call (two
//!   round trips: the Setups, then the call).
//! - `weft-0rtt`: the same against a server that accepts early data
//!   (protocol version 3): the client learned its box key on the first
//!   call, so each call rides in the first flight (one round trip).
//! - `tonic`, `tonic-tls`: a new tonic `Channel` per call (TCP, or a full
//!   TLS 1.3 handshake without resumption, then the HTTP/2 preface).
//!
//! `--delay-ms D` puts every mode's server behind the same proxy, which
//! holds every byte D ms each way and makes each new connection's first
//! bytes wait for a TCP handshake's round trip (weft-bench/src/delay.rs):
//! loopback with the round trips of a real path.
//!
//! Kinds of call:
//!
//! - `unary`: `Say` with a 32-byte text, echoed.
//! - `server-stream`: `Expand`, one request for `--messages` replies of a
//!   1 KiB text (each reply is "text i", as echo.proto says); `rps` is
//!   then reply messages per second, and the latencies are of whole calls
//!   (request to the last reply).
//!
//! Every reply is checked. The client runs on a current-thread runtime,
//! the server on a one-worker runtime, each on its own thread (as
//! `http_bench`). One call first, then a warm-up (10 calls per in-flight
//! slot, at least 1,000 unary or 100 streaming calls), then `--calls` calls
//! with `--concurrency` in flight at all times (closed loop). Reported:
//! calls (or messages) per second over the measured calls, p50 and p99 of
//! each call's time.
//!
//! ```text
//! cargo build --release -p weft-bench --bin rpc_bench
//! target/release/rpc_bench --mode weft                       # unary, 64 in flight
//! target/release/rpc_bench --mode tonic --concurrency 1 --json
//! target/release/rpc_bench --mode tonic-tls --kind server-stream
//! target/release/rpc_bench --cold --mode weft-0rtt --concurrency 1 --calls 2000
//! target/release/rpc_bench --cold --mode tonic-tls --concurrency 1 --calls 40 --delay-ms 25
//! ```
//!
//! With `--json`, the only output on stdout is one line:
//! `{"mode":…,"kind":…,"suite":…,"cold":…,"delay_ms":…,"bytes":…,"compress":…,"concurrency":…,"clients":…,"calls":…,"rps":…,"p50_us":…,"p99_us":…,"client_calls":…,"handshakes_per_s":…}`
//! (`suite` is weft's, `null` for the other modes; `clients` and
//! `client_calls`, `{"min":…,"median":…}`, `null` without `--clients`;
//! `handshakes_per_s`, `null` without `--dialers`).
//!
//! With `--compress gzip|zstd` (weft, tonic, tonic-tls), every message
//! goes compressed both ways, each side sending and reading the
//! encoding; `--bytes N` makes a unary call's message N bytes of
//! English-like text (about 3:1 compressible):
//!
//! ```text
//! target/release/rpc_bench --mode weft --bytes 65536 --compress zstd   # 64 in flight
//! target/release/rpc_bench --mode tonic-tls --bytes 65536 --compress zstd
//! ```
//!
//! With `--clients N`, N clients each dial a connection of their own
//! (weft: a pool each; tonic: a `Channel` each; tarpc: a client each),
//! make their first call one after another, then call in a closed loop,
//! one call in flight each, as a server meets a fleet of callers. The weft
//! server then takes N connections from 127.0.0.1 (its per-address cap,
//! 256 by default, is for one source among many).
//!
//! ```text
//! target/release/rpc_bench --mode weft --clients 1000
//! target/release/rpc_bench --mode tonic-tls --clients 1000
//! target/release/rpc_bench --mode weft --clients 1000 --dialers 8   # handshakes under load
//! ```

mod baselines;
mod clients;

use std::{
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use clap::{Parser, ValueEnum};
use tokio::{net::TcpListener, sync::oneshot, task::JoinSet};
use tower::{Service, ServiceBuilder};
use weft::{
    handshake::{CipherSuite, Versions},
    mux,
    pool::{Dialer, Endpoint, Pool},
    rpc::{
        client::{Balanced, Client, RawCall, RawReply},
        server::Server,
    },
    transport::TcpConnector,
    AdmissionLayer, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};
use weft_bench::echo::{
    echo_client::EchoClient, echo_server::EchoServer, EchoReply, EchoRequest, ExpandRequest,
};
use weft_bench::{
    stats::{round3, Sample},
    Context, Failure, Result,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// weft RPC, encrypted, through the pool (with `--cold`, a connection
    /// per call).
    Weft,
    /// With `--cold`: weft RPC with each call in the first flight, as
    /// early data (protocol version 3).
    #[value(name = "weft-0rtt")]
    Weft0Rtt,
    /// tonic over plain TCP (h2c).
    Tonic,
    /// tonic over tokio-rustls TLS 1.3.
    TonicTls,
    /// tarpc's bincode transport over plain TCP.
    Tarpc,
    /// No RPC: the message echoed over raw TCP, a connection per call in
    /// flight (the floor under every mode).
    Tcp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// Say: 32-byte request, 32-byte reply.
    Unary,
    /// Expand: one request, `--messages` replies of 1 KiB.
    ServerStream,
}

#[derive(Parser, Debug, Clone, Copy)]
#[command(
    about = "Echo RPCs per second and latency over weft, tonic (h2c and TLS) and tarpc, and a raw TCP echo"
)]
struct Args {
    /// What carries the calls.
    #[arg(long, value_enum, default_value = "weft")]
    mode: Mode,
    /// Unary calls, or server-streaming ones.
    #[arg(long, value_enum, default_value = "unary")]
    kind: Kind,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Calls measured, after the warm-up (default 20,000 unary, 1,000
    /// server-streaming).
    #[arg(long)]
    calls: Option<usize>,
    /// Replies per server-streaming call.
    #[arg(long, default_value_t = 100)]
    messages: u32,
    /// Print one JSON object as the last line, and nothing else on stdout.
    #[arg(long)]
    json: bool,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
    /// `--mode weft` only: the one suite both ends allow (`plaintext`
    /// measures what encryption costs).
    #[arg(long, value_parser = weft_bench::stacks::parse_suite, default_value = "aes256gcm")]
    suite: CipherSuite,
    /// `--mode weft` only: calls through `rpc::client::Balanced` over the
    /// one endpoint (`discover::Endpoints::fixed`), what discovery costs
    /// per call.
    #[arg(long)]
    balanced: bool,
    /// Install metrics-exporter-prometheus as the `metrics` recorder
    /// first: what weft's metrics cost.
    #[arg(long)]
    metrics: bool,
    /// Every call on a new connection (the handshake in its time), no
    /// pool: `weft`, `weft-0rtt`, `tonic` and `tonic-tls`.
    #[arg(long)]
    cold: bool,
    /// Unary calls from this many clients, each with a connection of its
    /// own and one call in flight (`--concurrency` is then the number of
    /// clients): calls per second, p99, and how evenly the clients were
    /// served (`client_calls`: the fewest calls a client made, and the
    /// median client's). Default calls: 100 per client.
    #[arg(long)]
    clients: Option<usize>,
    /// With `--clients`: this many tasks besides make cold calls (a
    /// connection and a handshake each) over and over while the clients'
    /// calls are measured: `handshakes_per_s`, the handshakes the server
    /// completes while it serves the clients. weft and tonic-tls.
    #[arg(long, default_value_t = 0)]
    dialers: usize,
    /// Hold every byte this many ms each way, behind a proxy in front of
    /// every mode's server (and a TCP handshake's round trip per new
    /// connection).
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Unary calls: a message of this many bytes each way instead of 32,
    /// English-like text that compresses about 3:1 (what `--compress` is
    /// measured with).
    #[arg(long)]
    bytes: Option<usize>,
    /// weft, tonic and tonic-tls: every message compressed with this
    /// encoding both ways (each side sends it and reads it). weft's first
    /// call goes plain: its client learns from the reply that the server
    /// reads it.
    #[arg(long, value_enum)]
    compress: Option<Compress>,
}

/// A message compression both weft and tonic have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Compress {
    Gzip,
    Zstd,
}

impl Compress {
    fn weft(self) -> weft::rpc::Encoding {
        match self {
            Compress::Gzip => weft::rpc::Encoding::Gzip,
            Compress::Zstd => weft::rpc::Encoding::Zstd,
        }
    }

    fn tonic(self) -> tonic::codec::CompressionEncoding {
        match self {
            Compress::Gzip => tonic::codec::CompressionEncoding::Gzip,
            Compress::Zstd => tonic::codec::CompressionEncoding::Zstd,
        }
    }
}

/// A weft client, compressing as `--compress` says.
fn weft_client<S>(client: Client<S>, args: &Args) -> Client<S> {
    // (At the default threshold, 1 KiB: a 32-byte message goes plain.)
    match args.compress {
        Some(c) => client.send_compressed(c.weft()).accept_compressed(c.weft()),
        None => client,
    }
}

/// `len` bytes of text from a vocabulary of 64 words, chosen by a fixed
/// pseudo-random sequence: compressible about as much as prose.
fn compressible_text(len: usize) -> String {
    const WORDS: [&str; 64] = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "their",
        "one",
        "all",
        "we",
        "can",
        "her",
        "has",
        "there",
        "been",
        "if",
        "more",
        "when",
        "will",
        "would",
        "who",
        "so",
        "no",
        "stream",
        "record",
        "frame",
        "window",
        "connection",
        "handshake",
        "server",
        "client",
        "message",
        "call",
        "deadline",
        "status",
        "metadata",
        "encoding",
        "weft",
        "tower",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::with_capacity(len + 16);
    while text.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(WORDS[(state % 64) as usize]);
        text.push(' ');
    }
    text.truncate(len);
    text
}

/// Connections the weft server takes from one address, as by default.
const DEFAULT_PER_ADDRESS: usize = 256;

/// A unary call's message.
const UNARY_BYTES: usize = 32;
/// A streamed reply's message.
const STREAM_BYTES: usize = 1024;

impl Args {
    fn calls(&self) -> usize {
        self.calls.unwrap_or(match (self.kind, self.clients) {
            (_, Some(clients)) => 100 * clients,
            (Kind::Unary, None) => 20_000,
            (Kind::ServerStream, None) => 1_000,
        })
    }

    /// Calls in flight at once: one per client with `--clients`.
    fn in_flight(&self) -> usize {
        self.clients.unwrap_or(self.concurrency)
    }

    /// The message every call sends.
    fn payload(&self) -> String {
        match (self.kind, self.bytes) {
            (Kind::Unary, Some(bytes)) => compressible_text(bytes),
            (Kind::Unary, None) => "w".repeat(UNARY_BYTES),
            (Kind::ServerStream, _) => "w".repeat(STREAM_BYTES),
        }
    }
}

fn main() {
    weft_bench::exit_on_failure("rpc_bench", run);
}

/// What `--clients` measured besides: the calls of the slowest and the
/// median client, and with `--dialers` the cold calls a second.
type Fleet = ((usize, usize), Option<f64>);

/// How the server is stopped and awaited.
type ServerTask = tokio::task::JoinHandle<Result<()>>;

fn run() -> Result<()> {
    let args = Args::parse();
    weft_bench::pin_threads(args.pin);
    if args.metrics {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .map_err(|err| Failure::new(format!("installing the metrics recorder: {err}")))?;
    }
    if args.concurrency == 0 || args.calls() == 0 || args.messages == 0 {
        return Err(Failure::new(
            "--concurrency, --calls and --messages must be at least 1",
        ));
    }
    if args.cold && (matches!(args.mode, Mode::Tarpc | Mode::Tcp) || args.balanced) {
        return Err(Failure::new(
            "--cold measures weft, weft-0rtt, tonic and tonic-tls, without --balanced",
        ));
    }
    if args.clients.is_some_and(|n| n == 0)
        || (args.clients.is_some() && (args.cold || args.balanced || args.kind != Kind::Unary))
    {
        return Err(Failure::new(
            "--clients takes at least 1, for warm unary calls (no --cold, --balanced or --kind server-stream)",
        ));
    }
    if args.dialers > 0 && (args.clients.is_none() || !matches!(args.mode, Mode::Weft | Mode::TonicTls)) {
        return Err(Failure::new(
            "--dialers goes with --clients, for weft and tonic-tls",
        ));
    }
    if args.mode == Mode::Weft0Rtt && !args.cold {
        return Err(Failure::new(
            "--mode weft-0rtt needs --cold: early data is for a connection's first call",
        ));
    }
    if args.compress.is_some()
        && (args.cold
            || args.clients.is_some()
            || !matches!(args.mode, Mode::Weft | Mode::Tonic | Mode::TonicTls))
    {
        return Err(Failure::new(
            "--compress measures weft, tonic and tonic-tls, without --cold or --clients",
        ));
    }
    if args.bytes.is_some() && args.kind != Kind::Unary {
        return Err(Failure::new("--bytes is for --kind unary"));
    }
    if args.kind == Kind::ServerStream && matches!(args.mode, Mode::Tarpc | Mode::Tcp) {
        return Err(Failure::new(
            "tarpc has no streaming calls, nor does the raw TCP echo: --mode tarpc and tcp are --kind unary only",
        ));
    }
    let server_rt = weft_bench::server_runtime()?;
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .context("binding loopback")?;
    let addr = listener.local_addr().context("local address")?;
    let (stop, stopped) = oneshot::channel::<()>();
    let stopped = async {
        let _ = stopped.await;
    };

    // The server, and what the client needs to reach it.
    let mut server_peer = None;
    let mut tls = None;
    let server: ServerTask = match args.mode {
        Mode::Weft | Mode::Weft0Rtt => {
            let identity = Identity::generate();
            server_peer = Some(identity.peer_id());
            let mut encrypt = EncryptLayer::new(identity).suites([args.suite]);
            if args.mode == Mode::Weft0Rtt {
                encrypt = encrypt.accept_early_data();
            }
            // Cold calls are a handshake each, all from 127.0.0.1: an
            // admission rate for a busy client, not for a stranger.
            let admission = AdmissionLayer::new()
                .handshakes_per_second(1_000_000)
                .handshakes_per_second_per_address(1_000_000);
            let acceptor = weft_bench::echo::acceptor_with(encrypt);
            // Every client is 127.0.0.1 here: the per-address cap is for
            // a fleet's clients behind one address, not strangers.
            let connections = args
                .clients
                .map_or(DEFAULT_PER_ADDRESS, |n| n.max(DEFAULT_PER_ADDRESS));
            let compression = args.compress.map(Compress::weft);
            server_rt.spawn(async move {
                let builder = match compression {
                    Some(encoding) => Server::builder()
                        .send_compressed(encoding)
                        .accept_compressed(encoding),
                    None => Server::builder(),
                };
                builder
                    .admission(admission)
                    .max_connections_per_address(connections)
                    .add_service(EchoServer::new(weft_bench::echo::Echoer))
                    .serve_with_shutdown(listener, acceptor, stopped)
                    .await
                    .context("the weft server")
            })
        }
        Mode::Tonic => server_rt.spawn(baselines::serve_tonic(
            listener,
            None,
            args.compress.map(Compress::tonic),
            stopped,
        )),
        Mode::TonicTls => {
            let (dial, acceptor) = weft_bench::http::tls_with_alpn(&["h2"])?;
            tls = Some(dial);
            server_rt.spawn(baselines::serve_tonic(
                listener,
                Some(acceptor),
                args.compress.map(Compress::tonic),
                stopped,
            ))
        }
        Mode::Tarpc => server_rt.spawn(baselines::serve_tarpc(listener, stopped)),
        Mode::Tcp => server_rt.spawn(weft_bench::tcp_echo::serve(listener, stopped)),
    };

    // Behind the delaying proxy, on a runtime of its own, if asked.
    let proxy_rt = weft_bench::server_runtime()?;
    let addr = if args.delay_ms > 0 {
        let proxy = proxy_rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .context("binding the proxy")?;
        let proxy_addr = proxy.local_addr().context("the proxy's address")?;
        proxy_rt.spawn(weft_bench::delay::proxy(
            proxy,
            addr,
            Duration::from_millis(args.delay_ms),
        ));
        proxy_addr
    } else {
        addr
    };

    let outcome = weft_bench::client_runtime()?.block_on(async move {
        // In a task of its own, as an application's would be (see ping).
        tokio::spawn(async move {
            if let Some(n) = args.clients {
                let outcome = match args.mode {
                    Mode::Weft | Mode::Weft0Rtt => {
                        let endpoint =
                            Endpoint::new(addr).expect_peer(server_peer.expect("the server's key"));
                        let connect = || async {
                            let pool = Pool::builder().build(dialer(args.suite));
                            Ok(WeftCaller(EchoClient::new(Client::new(pool, endpoint.clone()))))
                        };
                        let cold = WeftCaller(EchoClient::new(Client::one_shot(
                            dialer(args.suite),
                            endpoint.clone(),
                        )));
                        clients::bench(n, connect, Some(cold), &args).await
                    }
                    Mode::Tonic | Mode::TonicTls => {
                        let cold = ColdTonic {
                            addr,
                            tls: tls.clone(),
                        };
                        let connect = || baselines::TonicCaller::connect(addr, tls.clone());
                        clients::bench(n, connect, Some(cold), &args).await
                    }
                    Mode::Tarpc => {
                        let connect = || baselines::TarpcCaller::connect(addr);
                        clients::bench(n, connect, None::<ColdTonic>, &args).await
                    }
                    Mode::Tcp => {
                        let connect =
                            || async { Ok(TcpCaller(weft_bench::tcp_echo::Connections::new(addr))) };
                        clients::bench(n, connect, None::<ColdTonic>, &args).await
                    }
                }?;
                let handshakes = outcome.handshakes_per_s.filter(|_| args.dialers > 0);
                let counts = outcome.slowest_and_median();
                return Ok((outcome.rps, outcome.latencies, Some((counts, handshakes))));
            }
            let (rps, latencies) = match args.mode {
                Mode::Weft | Mode::Weft0Rtt if args.cold => {
                    let endpoint = Endpoint::new(addr).expect_peer(server_peer.expect("the server's key"));
                    let client = EchoClient::new(Client::one_shot(dialer(args.suite), endpoint));
                    bench(WeftCaller(client), &args).await
                }
                Mode::Tonic | Mode::TonicTls if args.cold => bench(ColdTonic { addr, tls }, &args).await,
                Mode::Weft | Mode::Weft0Rtt => {
                    let endpoint = Endpoint::new(addr).expect_peer(server_peer.expect("the server's key"));
                    let pool = Pool::builder().build(dialer(args.suite));
                    let outcome = if args.balanced {
                        let endpoints = weft::discover::Endpoints::fixed([endpoint]);
                        let client = EchoClient::new(Balanced::new(pool.clone(), endpoints));
                        bench(WeftCaller(client), &args).await
                    } else {
                        let client = weft_client(Client::new(pool.clone(), endpoint), &args);
                        bench(WeftCaller(EchoClient::new(client)), &args).await
                    };
                    let stats = pool.stats();
                    if !args.json {
                        println!(
                            "weft pool: {} dial(s), {} stream(s) opened, open per connection {:?}",
                            stats.dials, stats.streams_opened, stats.streams_per_connection
                        );
                    }
                    outcome
                }
                Mode::Tonic | Mode::TonicTls => {
                    let compression = args.compress.map(Compress::tonic);
                    let caller = baselines::TonicCaller::connect_compressed(addr, tls, compression).await?;
                    bench(caller, &args).await
                }
                Mode::Tarpc => bench(baselines::TarpcCaller::connect(addr).await?, &args).await,
                Mode::Tcp => bench(TcpCaller(weft_bench::tcp_echo::Connections::new(addr)), &args).await,
            }?;
            Ok::<_, Failure>((rps, latencies, None))
        })
        .await
        .context("the client's task")?
    });

    // Shut the server down (weft's and tonic's gracefully) and see that it
    // ends.
    weft_bench::stop_server("rpc_bench", &server_rt, stop, server);
    server_rt.shutdown_timeout(Duration::from_secs(1));
    proxy_rt.shutdown_timeout(Duration::from_secs(1));
    let (rps, latencies, fleet) = outcome?;
    report(&args, rps, &latencies, fleet);
    Ok(())
}

/// `clients`: with `--clients`, the calls the slowest client made and
/// those the median client made, and with `--dialers` the cold calls a
/// second.
fn report(args: &Args, rps: f64, latencies: &Sample, clients: Option<Fleet>) {
    let handshakes = clients.and_then(|(_, handshakes)| handshakes).map(f64::round);
    let clients = clients.map(|(counts, _)| counts);
    let (mode, kind) = (name(args.mode), name(args.kind));
    // (The suite is weft's alone.)
    let suite = matches!(args.mode, Mode::Weft | Mode::Weft0Rtt).then(|| args.suite.to_string());
    let p50 = round3(latencies.percentile(50.0));
    let p99 = round3(latencies.percentile(99.0));
    let rps = rps.round();
    if args.json {
        // In this order (serde_json's maps would sort the keys).
        let fields = [
            ("mode", serde_json::json!(mode)),
            ("kind", serde_json::json!(kind)),
            ("suite", serde_json::json!(suite)),
            ("cold", serde_json::json!(args.cold)),
            ("delay_ms", serde_json::json!(args.delay_ms)),
            ("bytes", serde_json::json!(args.bytes.unwrap_or(UNARY_BYTES))),
            ("compress", serde_json::json!(args.compress.map(name))),
            ("concurrency", serde_json::json!(args.in_flight())),
            ("clients", serde_json::json!(args.clients)),
            ("calls", serde_json::json!(args.calls())),
            ("rps", serde_json::json!(rps)),
            ("p50_us", serde_json::json!(p50)),
            ("p99_us", serde_json::json!(p99)),
            (
                "client_calls",
                serde_json::json!(
                    clients.map(|(min, median)| serde_json::json!({"min": min, "median": median}))
                ),
            ),
            ("handshakes_per_s", serde_json::json!(handshakes)),
        ];
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        println!("{{{}}}", body.join(","));
    } else {
        let what = match args.kind {
            Kind::Unary => "calls/s".to_owned(),
            Kind::ServerStream => format!("messages/s ({} x 1 KiB per call)", args.messages),
        };
        let what = match (args.bytes, args.compress) {
            (None, None) => what,
            (bytes, compress) => format!(
                "{what} ({} B each way{})",
                bytes.unwrap_or(UNARY_BYTES),
                compress.map(|c| format!(", {}", name(c))).unwrap_or_default()
            ),
        };
        let how = match (args.cold, args.delay_ms) {
            (false, 0) => String::new(),
            (true, 0) => " (cold)".to_owned(),
            (false, ms) => format!(" ({ms} ms each way)"),
            (true, ms) => format!(" (cold, {ms} ms each way)"),
        };
        let clients = match (args.clients, clients) {
            (Some(n), Some((min, median))) => {
                let dialed = handshakes
                    .map(|h| format!(", while {} dialers made {h:.0} cold calls/s", args.dialers))
                    .unwrap_or_default();
                format!(
                    " from {n} clients (the slowest made {min} calls, the median client {median}{dialed})"
                )
            }
            _ => String::new(),
        };
        println!(
            "{mode} {kind}{how}: {} calls, {} in flight{clients}: {rps:.0} {what}, p50 {p50:.1} µs, p99 {p99:.1} µs per call",
            args.calls(),
            args.in_flight(),
        );
    }
}

/// A value's name on the command line.
fn name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The weft client's stack: the pool's usual one, with `suite` only.
fn dialer(suite: CipherSuite) -> impl Dialer {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()).suites([suite]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new())
}

/// One client of the echo service, cloned into every calling task.
trait Caller: Clone + Send + 'static {
    /// `Say(message)`, its echo checked.
    fn say(&mut self, message: String) -> impl Future<Output = Result<()>> + Send;
    /// `Expand(message, count)`: the replies, each checked.
    fn expand(&mut self, message: String, count: u32) -> impl Future<Output = Result<()>> + Send;
}

/// The unary request.
fn say_request(text: String) -> EchoRequest {
    EchoRequest {
        text,
        payload: Vec::new(),
    }
}

/// A reply's text, checked against what was sent.
fn check(what: &str, sent: &str, got: &str) -> Result<()> {
    if sent != got {
        return Err(Failure::new(format_args!(
            "{what}: {} bytes back, not the {} sent",
            got.len(),
            sent.len()
        )));
    }
    Ok(())
}

/// Expand's `i`-th reply: "text i".
fn check_expanded(text: &str, i: u32, got: &str) -> Result<()> {
    let suffix = got.strip_prefix(text).and_then(|rest| rest.strip_prefix(' '));
    if suffix.and_then(|n| n.parse::<u32>().ok()) != Some(i) {
        return Err(Failure::new(format_args!(
            "Expand: reply {i} has {} bytes, not the text and {i}",
            got.len()
        )));
    }
    Ok(())
}

/// `n` replies counted.
fn check_count(n: u32, expected: u32) -> Result<()> {
    if n != expected {
        return Err(Failure::new(format_args!("Expand: {n} replies, not {expected}")));
    }
    Ok(())
}

/// weft RPC, through the generated client over the raw one.
#[derive(Clone)]
struct WeftCaller<T>(EchoClient<T>);

impl<T> Caller for WeftCaller<T>
where
    T: Service<RawCall, Response = RawReply> + Clone + Send + 'static,
    T::Error: Into<tower::BoxError>,
    T::Future: Send,
{
    async fn say(&mut self, text: String) -> Result<()> {
        let request = say_request(text);
        let sent = request.text.clone();
        let reply = self.0.say(request).await.context("Say")?;
        check("Say", &sent, &reply.get_ref().text)
    }

    async fn expand(&mut self, text: String, count: u32) -> Result<()> {
        let request = ExpandRequest {
            text: text.clone(),
            count,
        };
        let mut replies = self.0.expand(request).await.context("Expand")?.into_inner();
        let mut n = 0;
        while let Some(reply) = replies.message().await.context("Expand")? {
            check_expanded(&text, n, &reply.text)?;
            n += 1;
        }
        check_count(n, count)
    }
}

/// tonic with a new `Channel` (TCP and HTTP/2, or TLS too) per call.
#[derive(Clone)]
struct ColdTonic {
    addr: std::net::SocketAddr,
    tls: Option<weft_bench::http::TlsDial>,
}

impl Caller for ColdTonic {
    async fn say(&mut self, text: String) -> Result<()> {
        let mut caller = baselines::TonicCaller::connect(self.addr, self.tls.clone()).await?;
        caller.say(text).await
    }

    async fn expand(&mut self, text: String, count: u32) -> Result<()> {
        let mut caller = baselines::TonicCaller::connect(self.addr, self.tls.clone()).await?;
        caller.expand(text, count).await
    }
}

/// The raw TCP echo: `say` is the message's bytes there and back.
#[derive(Clone)]
struct TcpCaller(weft_bench::tcp_echo::Connections);

impl Caller for TcpCaller {
    async fn say(&mut self, text: String) -> Result<()> {
        self.0
            .echo(text.as_bytes(), &mut Vec::new())
            .await
            .context("echo")
    }

    async fn expand(&mut self, _: String, _: u32) -> Result<()> {
        Err(Failure::new("the raw TCP echo has no streaming calls"))
    }
}

/// The first call, the warm-up, the measured calls: calls (or messages)
/// per second and each call's time.
async fn bench<C: Caller>(mut caller: C, args: &Args) -> Result<(f64, Sample)> {
    let payload = args.payload();
    match args.kind {
        Kind::Unary => caller.say(payload.clone()).await,
        Kind::ServerStream => caller.expand(payload.clone(), args.messages).await,
    }
    .context("the first call")?;
    let floor = match args.kind {
        Kind::Unary => 1000,
        Kind::ServerStream => 100,
    };
    // A cold call is a whole connection (and, delayed, whole round
    // trips): a fifth of the measured calls warms up.
    let warm_up = if args.cold {
        (args.calls() / 5).max(5)
    } else {
        (10 * args.concurrency).max(floor)
    };
    load(&caller, args, &payload, warm_up)
        .await
        .context("warming up")?;
    let calls = args.calls();
    let began = Instant::now();
    let latencies = load(&caller, args, &payload, calls).await?;
    let seconds = began.elapsed().as_secs_f64();
    let per_call = match args.kind {
        Kind::Unary => 1.0,
        Kind::ServerStream => f64::from(args.messages),
    };
    Ok((calls as f64 * per_call / seconds, Sample::new(latencies)))
}

/// `total` calls with `--concurrency` in flight; each one's time in µs.
async fn load<C: Caller>(caller: &C, args: &Args, payload: &str, total: usize) -> Result<Vec<f64>> {
    let concurrency = args.concurrency;
    let (kind, messages) = (args.kind, args.messages);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.min(total) {
        let (mut caller, next, payload) = (caller.clone(), next.clone(), payload.to_owned());
        tasks.spawn(async move {
            let mut times = Vec::with_capacity(total / concurrency + 1);
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let began = Instant::now();
                match kind {
                    Kind::Unary => caller.say(payload.clone()).await?,
                    Kind::ServerStream => caller.expand(payload.clone(), messages).await?,
                }
                times.push(began.elapsed().as_secs_f64() * 1e6);
            }
            Ok::<_, Failure>(times)
        });
    }
    let mut all = Vec::with_capacity(total);
    while let Some(times) = tasks.join_next().await {
        all.extend(times.context("a calling task")??);
    }
    Ok(all)
}
