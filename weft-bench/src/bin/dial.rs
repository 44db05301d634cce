//! Dial latency, from TCP connect through the handshake to the first byte
//! the server sends, as a histogram like the Vanadium seed's.
//!
//! cargo run --release -p weft-bench --bin dial                 # weft, 1,000 dials
//! cargo run --release -p weft-bench --bin dial -- --mode tls   # tokio-rustls TLS 1.3 full handshakes (ring)
//! cargo run --release -p weft-bench --bin dial -- --mode tls --tls-provider aws-lc-rs
//! cargo run --release -p weft-bench --bin dial -- --mode tcp   # TCP connect alone

use clap::{Parser, ValueEnum};
use weft_bench::{
    dial,
    stacks::{Mode, TlsProvider},
    Result,
};

#[derive(Parser, Debug)]
#[command(about = "Dial latency (connect, handshake, first byte) as a histogram")]
struct Args {
    /// What to dial.
    #[arg(long, value_enum, default_value = "weft")]
    mode: DialMode,
    /// Dials measured (after 10 unmeasured ones), one at a time.
    #[arg(long, short = 'c', default_value_t = 1000)]
    count: usize,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
    /// The TLS baseline's crypto provider: ring or aws-lc-rs.
    #[arg(long, default_value = "ring")]
    tls_provider: TlsProvider,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DialMode {
    Weft,
    Tls,
    Tcp,
}

fn main() {
    weft_bench::exit_on_failure("dial", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    weft_bench::pin_threads(args.pin);
    let mode = match args.mode {
        DialMode::Weft => Mode::Weft,
        DialMode::Tls => Mode::Tls,
        DialMode::Tcp => Mode::Tcp,
    };
    let outcome = dial::run_local(mode, args.count, args.tls_provider)?;
    if args.json {
        weft_bench::print_json(&outcome.json());
    } else {
        outcome.print();
    }
    Ok(())
}
