//! The Go TLS seed's two results, on weft (AES-256-GCM):
//!
//! (a) latency: the time to the first decrypted byte of a 1 MiB response
//!     over a slow link (1 Mbit/s, 50 ms one way, simulated in process by
//!     `weft::sim`), with dynamic records against fixed 16 KiB records;
//! (b) throughput: one-way transfers of 1, 2, 4, ... 64 MiB over loopback
//!     TCP, fixed maximum records against dynamic records, each on a new
//!     connection, as the seed's table.
//!
//! For (b), this machine is shared and noisy, and the first of two
//! back-to-back transfers tends to be the slower, so the two policies run
//! in ABBA order (fixed, dynamic, dynamic, fixed, ...) and the delta is the
//! median of the paired ratios, not a ratio of separate medians.
//!
//! cargo run --release -p weft-bench --bin records                        # both, 8 pairs per size
//! cargo run --release -p weft-bench --bin records -- --pairs 20 --max 16384
//! cargo run --release -p weft-bench --bin records -- --link-kbit 500 --delay-ms 50   # golang/go#15713's link
//!
//! Wall-clock on a shared machine cannot resolve a 2% difference (an A/A
//! run of this table shows several percent either way), so the example can
//! also run one policy alone, for counting instructions, which repeat:
//!
//! cargo build --release -p weft-bench --bin records
//! valgrind --tool=callgrind target/release/records --only fixed --sizes 64 --pairs 2 --max 65536
//! valgrind --tool=callgrind target/release/records --only dynamic --sizes 64 --pairs 2 --max 65536

use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    runtime::Runtime,
    sync::oneshot,
};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, HandshakeExt, Versions},
    mux::{self, Connection, Stream},
    sim::Link,
    stack::{Encrypt, Multiplex, Negotiate, RecordSize},
    transport::ExistingTransport,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};
use weft_bench::{stats::round3, Context, Failure, Result};

#[derive(Parser, Debug)]
#[command(about = "Dynamic against fixed records: first-byte latency on a slow link, and bulk throughput")]
struct Args {
    /// ABBA pairs per transfer size in (b); transfers per size with --only.
    #[arg(long, default_value_t = 8)]
    pairs: usize,
    /// The largest record, and the fixed policy's size, in (b).
    #[arg(long, default_value_t = 65536)]
    max: usize,
    /// Transfer sizes in MiB for (b), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    sizes: Vec<usize>,
    /// Run only one policy of (b), for instruction counts; nothing printed.
    #[arg(long, value_enum)]
    only: Option<Policy>,
    /// (a): the slow link's bandwidth in kbit/s.
    #[arg(long, default_value_t = 1000)]
    link_kbit: u64,
    /// (a): the slow link's one-way delay in milliseconds.
    #[arg(long, default_value_t = 50)]
    delay_ms: u64,
    /// (a): the size of the fixed records it compares with.
    #[arg(long, default_value_t = 16384)]
    fixed: usize,
    /// (a): trials of each policy.
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Policy {
    Fixed,
    Dynamic,
}

type Stack = Multiplex<RecordSize<Encrypt<Negotiate<ExistingTransport>>>>;

/// The AES-256-GCM stack with `records`, as either end (a stack over a
/// transport it is given dials or accepts alike).
fn stack(records: RecordSizeLayer, seed: u8) -> Stack {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(records)
        .layer(EncryptLayer::new(Identity::from_seed(&[seed; 32])).suites([CipherSuite::Aes256Gcm]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new())
}

fn main() {
    weft_bench::exit_on_failure("records", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    if args.pairs == 0 || args.trials == 0 || args.sizes.is_empty() {
        return Err(Failure::new("--pairs, --trials and --sizes need at least one"));
    }
    let (client, server) = (weft_bench::client_runtime()?, weft_bench::server_runtime()?);
    if let Some(policy) = args.only {
        let records = match policy {
            Policy::Fixed => RecordSizeLayer::fixed(args.max),
            Policy::Dynamic => RecordSizeLayer::dynamic().max_record_size(args.max),
        };
        for &mib in &args.sizes {
            for _ in 0..args.pairs {
                transfer(&client, &server, records, mib << 20)?;
            }
        }
        return Ok(());
    }
    let link = Link::new(args.link_kbit * 1000, Duration::from_millis(args.delay_ms));
    let first = first_byte_table(&client, link, &args)?;
    let table = throughput_table(&client, &server, &args)?;
    if args.json {
        weft_bench::print_json(&serde_json::json!({
            "first_byte_ms": first,
            "throughput": table,
        }));
    }
    Ok(())
}

/// (a): median time to the first decrypted byte, fixed then dynamic.
fn first_byte_table(rt: &Runtime, link: Link, args: &Args) -> Result<serde_json::Value> {
    let fixed = RecordSizeLayer::fixed(args.fixed);
    let dynamic = RecordSizeLayer::dynamic();
    let (mut f, mut d) = (Vec::new(), Vec::new());
    for _ in 0..args.trials {
        f.push(rt.block_on(first_byte(link, fixed))?);
        d.push(rt.block_on(first_byte(link, dynamic))?);
    }
    let ms = |t: Duration| t.as_secs_f64() * 1e3;
    let median_of = |v: &[FirstByte], pick: fn(&FirstByte) -> Duration| {
        let mut values: Vec<f64> = v.iter().map(|x| ms(pick(x))).collect();
        median(&mut values)
    };
    let (f_req, d_req) = (
        median_of(&f, |x| x.from_request),
        median_of(&d, |x| x.from_request),
    );
    let (f_wr, d_wr) = (median_of(&f, |x| x.from_write), median_of(&d, |x| x.from_write));
    if !args.json {
        println!(
            "(a) first decrypted byte of a 1 MiB response over a simulated {} kbit/s link, {} ms one way \
             (median of {} trials)",
            args.link_kbit, args.delay_ms, args.trials
        );
        println!("{:>26}  {:>16}  {:>16}", "", "from the request", "from the write");
        println!(
            "{:>26}  {:>13.1} ms  {:>13.1} ms",
            format!("fixed {} B records", args.fixed),
            f_req,
            f_wr
        );
        println!("{:>26}  {:>13.1} ms  {:>13.1} ms", "dynamic records", d_req, d_wr);
        println!(
            "{:>26}  {:>15.2}x  {:>15.2}x",
            "fixed / dynamic",
            f_req / d_req,
            f_wr / d_wr
        );
        println!();
    }
    Ok(serde_json::json!({
        "link_kbit": args.link_kbit,
        "delay_ms": args.delay_ms,
        "fixed_record": args.fixed,
        "fixed": {"from_request": round3(f_req), "from_write": round3(f_wr)},
        "dynamic": {"from_request": round3(d_req), "from_write": round3(d_wr)},
        "ratio": {"from_request": round3(f_req / d_req), "from_write": round3(f_wr / d_wr)},
    }))
}

struct FirstByte {
    /// From the client's one-byte request to its first decrypted byte.
    from_request: Duration,
    /// From the server starting to write the response to that byte.
    from_write: Duration,
}

/// One trial of (a): a handshake over the link, a one-byte request, then
/// the server writes 1 MiB and the client times its first decrypted byte.
async fn first_byte(link: Link, records: RecordSizeLayer) -> Result<FirstByte> {
    let (client_io, server_io) = link.pair();
    let (wrote_tx, wrote_rx) = oneshot::channel();
    let server = tokio::spawn(async move {
        let conn = stack(records, 2)
            .accept_transport(server_io)
            .await
            .context("server handshake")?;
        let mut stream = accept_one(&conn).await?;
        let mut request = [0u8; 1];
        stream
            .read_exact(&mut request)
            .await
            .context("reading the request")?;
        let _ = wrote_tx.send(Instant::now());
        stream
            .write_all(&vec![0x5a; 1 << 20])
            .await
            .context("writing the response")?;
        stream.shutdown().await.context("ending the response")?;
        Ok::<_, Failure>(())
    });
    let measured = async {
        let conn = stack(records, 1)
            .dial(client_io)
            .await
            .context("client handshake")?;
        let mut stream = conn.open().await.context("opening the request stream")?;
        let asked = Instant::now();
        stream.write_all(b"?").await.context("writing the request")?;
        let mut first = [0u8; 1];
        stream
            .read_exact(&mut first)
            .await
            .context("reading the response")?;
        let got = Instant::now();
        let wrote = wrote_rx
            .await
            .map_err(|_| Failure::new("the server never wrote"))?;
        Ok(FirstByte {
            from_request: got - asked,
            from_write: got - wrote,
        })
    }
    .await;
    // The rest of the response would take seconds; it is not needed.
    server.abort();
    measured
}

/// (b): the Go seed's table.
fn throughput_table(client: &Runtime, server: &Runtime, args: &Args) -> Result<serde_json::Value> {
    let fixed = RecordSizeLayer::fixed(args.max);
    let dynamic = RecordSizeLayer::dynamic().max_record_size(args.max);
    if !args.json {
        println!(
            "(b) AES-256-GCM over loopback TCP, records up to {} bytes, {} ABBA pairs per size",
            args.max, args.pairs
        );
        println!(
            "{:>8}  {:>14}  {:>14}  {:>8}",
            "size", "fixed max", "dynamic", "delta"
        );
    }
    let mut rows = Vec::new();
    for &mib in &args.sizes {
        let bytes = mib << 20;
        // Warm up this size once each.
        transfer(client, server, fixed, bytes)?;
        transfer(client, server, dynamic, bytes)?;
        let (mut f, mut d, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for pair in 0..args.pairs {
            let (a, b) = if pair % 2 == 0 {
                (fixed, dynamic)
            } else {
                (dynamic, fixed)
            };
            let first = transfer(client, server, a, bytes)?.as_secs_f64();
            let second = transfer(client, server, b, bytes)?.as_secs_f64();
            let (tf, td) = if pair % 2 == 0 {
                (first, second)
            } else {
                (second, first)
            };
            f.push(tf);
            d.push(td);
            ratios.push(td / tf);
        }
        let (f_ms, d_ms) = (median(&mut f) * 1e3, median(&mut d) * 1e3);
        let delta = (median(&mut ratios) - 1.0) * 100.0;
        if !args.json {
            println!("{mib:>5}MiB  {f_ms:>11.2} ms  {d_ms:>11.2} ms  {delta:>+7.2}%");
        }
        rows.push(serde_json::json!({
            "mib": mib,
            "fixed_ms": round3(f_ms),
            "dynamic_ms": round3(d_ms),
            "delta_pct": round3(delta),
        }));
    }
    Ok(serde_json::Value::Array(rows))
}

/// One transfer of `bytes` on a new connection: time from connect to the
/// server having read the last byte.
fn transfer(client: &Runtime, server: &Runtime, records: RecordSizeLayer, bytes: usize) -> Result<Duration> {
    let listener = server
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .context("binding loopback")?;
    let addr = listener.local_addr().context("local address")?;
    let (done_tx, done_rx) = oneshot::channel();
    server.spawn(async move {
        let received = async {
            let (tcp, _) = listener.accept().await.context("accepting")?;
            tcp.set_nodelay(true).context("TCP_NODELAY")?;
            let conn = stack(records, 2)
                .accept_transport(tcp)
                .await
                .context("server handshake")?;
            let mut stream = accept_one(&conn).await?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut got = 0;
            while got < bytes {
                match stream.read(&mut buf).await.context("reading")? {
                    0 => return Err(Failure::new(format_args!("ended after {got} of {bytes} bytes"))),
                    n => got += n,
                }
            }
            Ok(())
        };
        let _ = done_tx.send(received.await);
    });
    client.block_on(async {
        let start = Instant::now();
        let tcp = TcpStream::connect(addr).await.context("connecting")?;
        tcp.set_nodelay(true).context("TCP_NODELAY")?;
        let conn = stack(records, 1).dial(tcp).await.context("client handshake")?;
        let mut stream = conn.open().await.context("opening a stream")?;
        let chunk = vec![0x5a; 64 * 1024];
        let mut sent = 0;
        while sent < bytes {
            let n = chunk.len().min(bytes - sent);
            stream.write_all(&chunk[..n]).await.context("writing")?;
            sent += n;
        }
        stream.shutdown().await.context("finishing")?;
        done_rx
            .await
            .map_err(|_| Failure::new("the server's task ended"))?
            .context("server")?;
        Ok(start.elapsed())
    })
}

/// The one stream a client opens on `conn`.
async fn accept_one(conn: &Connection) -> Result<Stream> {
    conn.accept()
        .await
        .context("accepting a stream")?
        .ok_or_else(|| Failure::new("the client opened no stream"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}
