//! Bulk throughput, after the quinn seed's bulk benchmark: many streams
//! uploading at once over weft, or over raw TCP or TLS 1.3 for comparison.
//!
//! cargo run --release -p weft-bench --bin bulk                      # 100 × 100 MiB streams, 100 at once, AES-256-GCM
//! cargo run --release -p weft-bench --bin bulk -- --baseline tls    # the same over tokio-rustls, a connection per stream
//! cargo run --release -p weft-bench --bin bulk -- --streams 300 --max-streams 100 --stream-size 10
//! cargo run --release -p weft-bench --bin bulk -- --streams 1 --max-streams 1 --stream-size 4096 --suite plaintext
//!
//! Across two hosts: `--listen ADDR` on one prints its key, and
//! `--connect ADDR --peer-key KEY` on the other runs the client. With
//! `--json` the last line of the output is one JSON object.

use std::{io::IsTerminal, net::SocketAddr};

use clap::{Parser, ValueEnum};
use tokio::{net::TcpListener, sync::mpsc};
use weft::handshake::CipherSuite;
use weft_bench::{
    bulk::{self, Config, ServerKey},
    stacks::{parse_suite, Mode, Records, TlsProvider, TlsSuite},
    Context, Failure, Result,
};

#[derive(Parser, Debug)]
#[command(about = "Bulk upload throughput over weft, or over raw TCP or TLS 1.3 for comparison")]
struct Args {
    /// Streams in total.
    #[arg(long, short = 'n', default_value_t = 100)]
    streams: usize,
    /// Streams at once on each connection; also the server's stream limit.
    #[arg(long, short = 'm', default_value_t = 100)]
    max_streams: u32,
    /// MiB sent on each stream.
    #[arg(long, short = 's', default_value_t = 100.0)]
    stream_size: f64,
    /// Connections (weft) over which the streams are spread.
    #[arg(long, short = 'c', default_value_t = 1)]
    conns: usize,
    /// Cipher suite: aes256gcm, chacha20poly1305, xsalsa20poly1305,
    /// xchacha20poly1305 or plaintext (TLS: aes256gcm or chacha20poly1305).
    #[arg(long, default_value = "aes256gcm", value_parser = parse_suite)]
    suite: CipherSuite,
    /// The TLS baseline's suite: aes128gcm, aes256gcm or chacha20poly1305
    /// (default: the one matching --suite).
    #[arg(long)]
    tls_suite: Option<TlsSuite>,
    /// The TLS baseline's crypto provider: ring or aws-lc-rs.
    #[arg(long, default_value = "ring")]
    tls_provider: TlsProvider,
    /// Record sizes: dynamic, or fixed:BYTES.
    #[arg(long, default_value = "dynamic")]
    records: Records,
    /// Run the same workload over raw TCP or TLS 1.3 instead, one TCP
    /// connection per stream.
    #[arg(long)]
    baseline: Option<Baseline>,
    /// Unmeasured runs of the same workload first, on the same threads. A
    /// TLS connection on threads that have carried TLS
    /// before runs up to twice as fast as the first one (BENCHMARKS.md).
    #[arg(long, default_value_t = 0)]
    warm_up: usize,
    /// Print one JSON object as the last line, and no progress bar.
    #[arg(long)]
    json: bool,
    /// Only serve, on this address, until interrupted.
    #[arg(long, conflicts_with = "connect")]
    listen: Option<SocketAddr>,
    /// Only run the client, against a `--listen` server.
    #[arg(long)]
    connect: Option<SocketAddr>,
    /// The key the `--listen` server printed.
    #[arg(long, requires = "connect")]
    peer_key: Option<String>,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Baseline {
    Tcp,
    Tls,
}

fn main() {
    weft_bench::exit_on_failure("bulk", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    weft_bench::pin_threads(args.pin);
    if !(args.stream_size > 0.0 && args.stream_size.is_finite()) {
        return Err(Failure::new("--stream-size must be a positive number of MiB"));
    }
    let config = Config {
        mode: match args.baseline {
            None => Mode::Weft,
            Some(Baseline::Tcp) => Mode::Tcp,
            Some(Baseline::Tls) => Mode::Tls,
        },
        suite: args.suite,
        tls_suite: args.tls_suite,
        tls_provider: args.tls_provider,
        records: args.records,
        conns: args.conns,
        streams: args.streams,
        max_streams: args.max_streams,
        stream_size: (args.stream_size * (1 << 20) as f64).round() as u64,
        progress: !args.json && std::io::stderr().is_terminal(),
        warmups: args.warm_up,
    };
    if let Some(addr) = args.listen {
        return listen(addr, &config);
    }
    if !args.json {
        describe(&config, args.connect);
    }
    let outcome = match args.connect {
        Some(addr) => {
            let key = ServerKey::parse(&config, args.peer_key.as_deref())?;
            weft_bench::client_runtime()?.block_on(async {
                let warm_up = Config {
                    progress: false,
                    ..config.clone()
                };
                for _ in 0..config.warmups {
                    bulk::client(addr, &warm_up, &key).await.context("warming up")?;
                }
                bulk::client(addr, &config, &key).await
            })?
        }
        None => bulk::run_local(&config)?,
    };
    if args.json {
        weft_bench::print_json(&outcome.json());
    } else {
        outcome.print();
    }
    Ok(())
}

fn describe(config: &Config, remote: Option<SocketAddr>) {
    let via = match config.mode {
        Mode::Weft => format!(
            "weft ({}, {} records) on {} connection(s)",
            config.suite, config.records, config.conns
        ),
        Mode::Tcp => "raw TCP, a connection per stream".to_owned(),
        Mode::Tls => match config.tls_choice() {
            Ok(choice) => format!("TLS 1.3 ({choice}), a connection per stream"),
            Err(_) => format!("TLS 1.3 ({}), a connection per stream", config.suite),
        },
    };
    let where_ = remote.map_or("in-process over loopback".to_owned(), |a| format!("to {a}"));
    println!(
        "bulk: {} streams of {:.2} MiB, {} at once per connection, over {via}, {where_}",
        config.streams,
        config.stream_size as f64 / (1 << 20) as f64,
        config.max_streams
    );
}

/// Serves until Ctrl-C, printing the address, the key and each failure.
fn listen(addr: SocketAddr, config: &Config) -> Result<()> {
    let rt = weft_bench::server_runtime()?;
    rt.block_on(async {
        let listener = TcpListener::bind(addr)
            .await
            .context(format_args!("binding {addr}"))?;
        let local = listener.local_addr().context("local address")?;
        let (failures, mut failed) = mpsc::unbounded_channel();
        let key = bulk::serve(listener, config, failures)?;
        println!("listening on {local} ({})", config.mode.name());
        let mut client = format!("cargo run --release -p weft-bench --bin bulk -- --connect {local}");
        if let Some(key) = key.printable() {
            println!("peer key: {key}");
            client.push_str(&format!(" --peer-key {key}"));
        }
        match config.mode {
            Mode::Tcp => client.push_str(" --baseline tcp"),
            Mode::Tls => client.push_str(" --baseline tls"),
            Mode::Weft => {}
        }
        println!("run the client with: {client}");
        loop {
            tokio::select! {
                Some(failure) = failed.recv() => eprintln!("bulk: {failure}"),
                interrupted = tokio::signal::ctrl_c() => return interrupted.context("waiting for Ctrl-C"),
            }
        }
    })
}
