//! What a server spends on each idle connection: N connections from a
//! client in a process of its own (this example again, run with
//! `--client`), each having made one exchange and then left idle; the
//! server's process counts its heap (a counting allocator) and its
//! resident memory (VmRSS) before the connections and after they have
//! been idle 3 s (`--idle-ms`), and divides by N. Only the server's end is counted.
//!
//! - `weft`: `weft::server::serve` over the full stack (multiplexer,
//!   stream limit, dynamic records, AES-256-GCM, negotiation), a stream
//!   echoed per connection; its caps raised to take N from 127.0.0.1.
//! - `tls`: tokio-rustls TLS 1.3 (AES-256-GCM, ring, no client
//!   certificate), a task per connection echoing its bytes through a
//!   1 KiB buffer.
//!
//! ```text
//! cargo run --release -p weft-bench --bin idle -- --connections 10000
//! cargo run --release -p weft-bench --bin idle -- --connections 10000 --mode tls --json
//! ```
//!
//! With `--json`, the last line is
//! `{"mode":…,"connections":…,"heap_per_connection":…,"rss_per_connection":…}`
//! (bytes).

use std::{net::SocketAddr, process::Stdio, time::Duration};

use clap::{Parser, ValueEnum};
use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    process::Command,
};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, PeerId, Versions},
    mux,
    transport::{TcpAcceptor, TcpConnector},
    AdmissionLayer, EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
    StreamLimitLayer,
};
use weft_bench::{counting, stacks::Tls, Context, Failure, Result};

#[global_allocator]
static HEAP: counting::Counting = counting::Counting;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Weft,
    Tls,
}

#[derive(Parser, Debug)]
#[command(about = "Heap and resident memory a server spends per idle connection")]
struct Args {
    #[arg(long, value_enum, default_value = "weft")]
    mode: Mode,
    /// Connections held idle.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// How long the connections sit idle before the count, in ms: past
    /// weft's release of idle buffers (a second without records, checked
    /// each second, so at most two).
    #[arg(long, default_value_t = 3000)]
    idle_ms: u64,
    /// Exit at once after the count, the connections still held and
    /// nothing freed: under a heap profiler (`heaptrack idle
    /// --exit-holding`), what is left at exit is what they hold.
    #[arg(long)]
    exit_holding: bool,
    /// Run as the client of the server at this address (what the server
    /// starts itself).
    #[arg(long, hide = true)]
    client: Option<SocketAddr>,
    /// The client's key for the server: its peer id (weft) or its
    /// certificate in hex (TLS).
    #[arg(long, hide = true)]
    peer_key: Option<String>,
}

fn main() {
    weft_bench::exit_on_failure("idle", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a runtime")?;
    match args.client {
        Some(addr) => runtime.block_on(client(&args, addr)),
        None => runtime.block_on(server(&args)),
    }
}

/// Resident memory now, in bytes.
fn rss() -> Result<f64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .ok_or_else(|| Failure::new("no VmRSS in /proc/self/status"))?;
    Ok(kib * 1024.0)
}

async fn server(args: &Args) -> Result<()> {
    let n = args.connections.max(1);
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding loopback")?;
    let addr = listener.local_addr().context("the local address")?;
    let key = match args.mode {
        Mode::Weft => {
            let identity = Identity::generate();
            let key = identity.peer_id().to_string();
            let acceptor = ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(StreamLimitLayer::new(100))
                .layer(RecordSizeLayer::dynamic())
                .layer(EncryptLayer::new(identity).suites([CipherSuite::Aes256Gcm]))
                .layer(NegotiateLayer::new(Versions::CURRENT))
                .service(TcpAcceptor::new());
            let serve = weft::server::serve(listener, acceptor, |mut stream: mux::Stream| async move {
                let mut request = Vec::new();
                if stream.read_to_end(&mut request).await.is_ok() {
                    let _ = stream.write_all(&request).await;
                    let _ = stream.shutdown().await;
                }
            })
            // Every client is 127.0.0.1, dialing as fast as it can: the
            // caps and admission of a server its own fleet dials, not
            // strangers.
            .admission(
                AdmissionLayer::new()
                    .max_pending(1024)
                    .max_pending_per_address(1024)
                    .handshakes_per_second(1_000_000)
                    .handshakes_per_second_per_address(1_000_000),
            )
            .max_connections(n + 100)
            .max_connections_per_address(n + 100);
            tokio::spawn(std::future::IntoFuture::into_future(serve));
            key
        }
        Mode::Tls => {
            let tls = Tls::generate(CipherSuite::Aes256Gcm)?;
            let acceptor = tls
                .acceptor
                .clone()
                .ok_or_else(|| Failure::new("a TLS acceptor"))?;
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let _ = tcp.set_nodelay(true);
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let mut buf = [0u8; 1024];
                        while let Ok(read) = tls.read(&mut buf).await {
                            if read == 0 || tls.write_all(&buf[..read]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            tls.certificate_hex()
        }
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (heap_before, rss_before) = (counting::live() as f64, rss()?);

    let exe = std::env::current_exe().context("this example's binary")?;
    let mode = if args.mode == Mode::Weft { "weft" } else { "tls" };
    let mut child = Command::new(exe)
        .args(["--client", &addr.to_string(), "--mode", mode])
        .args(["--connections", &n.to_string(), "--peer-key", &key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the client")?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Failure::new("the client's stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .await
        .context("waiting for the client")?;
    if line.trim() != "ready" {
        return Err(Failure::new(format_args!(
            "the client did not connect: {:?}",
            line.trim()
        )));
    }
    tokio::time::sleep(Duration::from_millis(args.idle_ms)).await;
    let heap = (counting::live() as f64 - heap_before) / n as f64;
    let resident = (rss()? - rss_before) / n as f64;
    if args.exit_holding {
        println!(
            "{mode}: {:.1} KiB of heap per connection; exiting with them held",
            heap / 1024.0
        );
        std::process::exit(0);
    }
    drop(child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;

    if args.json {
        weft_bench::print_json(&serde_json::json!({
            "mode": mode,
            "connections": n,
            "heap_per_connection": heap.round(),
            "rss_per_connection": resident.round(),
        }));
    } else {
        println!(
            "{mode}: {n} idle connections cost the server {:.1} KiB of heap and {:.1} KiB resident each",
            heap / 1024.0,
            resident / 1024.0
        );
    }
    Ok(())
}

/// Dials `--connections` connections, one exchange each, says "ready",
/// and holds them until its stdin closes.
async fn client(args: &Args, addr: SocketAddr) -> Result<()> {
    let key = args
        .peer_key
        .as_deref()
        .ok_or_else(|| Failure::new("--client needs --peer-key"))?;
    let mut held_weft = Vec::new();
    let mut held_tls = Vec::new();
    match args.mode {
        Mode::Weft => {
            let peer: PeerId = key.parse().map_err(|_| Failure::new("--peer-key: a peer id"))?;
            let mut dialer = ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(RecordSizeLayer::dynamic())
                .layer(EncryptLayer::new(Identity::generate()).suites([CipherSuite::Aes256Gcm]))
                .layer(NegotiateLayer::new(Versions::CURRENT))
                .service(TcpConnector::new());
            for i in 0..args.connections {
                let conn = dialer
                    .handshake(Handshake::dial(addr).expect_peer(peer))
                    .await
                    .context(format_args!("dialing connection {i}"))?;
                let mut stream = conn.open().await.context("opening a stream")?;
                stream.write_all(b"x").await.context("sending")?;
                stream.shutdown().await.context("finishing")?;
                let mut echo = Vec::new();
                stream.read_to_end(&mut echo).await.context("the echo")?;
                held_weft.push(conn);
            }
        }
        Mode::Tls => {
            let certificate = Tls::parse_certificate(key)?;
            let tls = Tls::trusting(
                weft_bench::stacks::TlsChoice::matching(CipherSuite::Aes256Gcm)?,
                certificate,
            )?;
            let name = ServerName::try_from("localhost").context("the server's name")?;
            for i in 0..args.connections {
                let tcp = TcpStream::connect(addr)
                    .await
                    .context(format_args!("connecting {i}"))?;
                let _ = tcp.set_nodelay(true);
                let mut stream = tls
                    .connector
                    .connect(name.clone(), tcp)
                    .await
                    .context(format_args!("the TLS handshake of {i}"))?;
                stream.write_all(b"x").await.context("sending")?;
                let mut echo = [0u8; 1];
                stream.read_exact(&mut echo).await.context("the echo")?;
                held_tls.push(stream);
            }
        }
    }
    println!("ready");
    let mut rest = String::new();
    let _ = BufReader::new(tokio::io::stdin()).read_line(&mut rest).await;
    drop((held_weft, held_tls));
    Ok(())
}
