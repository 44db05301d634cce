//! Round-trip latency of a small message over one long-lived connection,
//! reported like ping: the OpenConnect thread's comparison.
//!
//! cargo run --release -p weft-bench --bin ping                       # weft (AES-256-GCM), 10,000 round trips of 64 bytes
//! cargo run --release -p weft-bench --bin ping -- --mode tcp         # raw TCP with TCP_NODELAY
//! cargo run --release -p weft-bench --bin ping -- --mode tls         # tokio-rustls TLS 1.3, AES-256-GCM
//! cargo run --release -p weft-bench --bin ping -- --mode weft-plaintext --interval-ms 100 --count 100

use std::time::Duration;

use clap::Parser;
use weft_bench::{
    ping::{self, PingMode},
    Failure, Result,
};

#[derive(Parser, Debug)]
#[command(about = "Round-trip latency of a small message, reported like ping")]
struct Args {
    /// What carries the pings.
    #[arg(long, value_enum, default_value = "weft")]
    mode: PingMode,
    /// Round trips measured (after 10 unmeasured ones).
    #[arg(long, short = 'c', default_value_t = 10_000)]
    count: usize,
    /// Bytes per message.
    #[arg(long, short = 's', default_value_t = 64)]
    size: usize,
    /// Milliseconds between round trips (0: back to back).
    #[arg(long, short = 'i', default_value_t = 0.0)]
    interval_ms: f64,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
}

fn main() {
    weft_bench::exit_on_failure("ping", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    weft_bench::pin_threads(args.pin);
    if !(args.interval_ms >= 0.0 && args.interval_ms.is_finite()) {
        return Err(Failure::new("--interval-ms must be zero or more"));
    }
    let config = ping::Config {
        mode: args.mode,
        count: args.count,
        size: args.size,
        interval: Duration::from_secs_f64(args.interval_ms / 1e3),
    };
    let outcome = ping::run_local(&config)?;
    if args.json {
        weft_bench::print_json(&outcome.json());
    } else {
        outcome.print();
    }
    Ok(())
}
