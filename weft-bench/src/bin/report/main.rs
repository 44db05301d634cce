//! The standard set, in one run: the Vanadium seed's throughput matrix, the
//! quinn seed's bulk run, the dial histograms and the ping comparison, each
//! against raw TCP and TLS 1.3. Prints the tables as Markdown and draws
//! them as SVG charts (for BENCHMARKS.md).
//!
//! With `--markdown`, the headline figures instead: every ratio README
//! and BENCHMARKS.md state, each against its baseline in the same run
//! (bulk, fairness, dial, ping, RPC warm and cold, HTTP), as one Markdown
//! table with the machine, the date and each side's command
//! ([`headline`]).
//!
//! cargo run --release -p weft-bench --bin report                  # about 5 minutes; charts in docs/bench/
//! cargo run --release -p weft-bench --bin report -- --quick --out /tmp/charts
//! cargo run --release -p weft-bench --bin report -- --markdown    # the headline table, five rounds
//! cargo run --release -p weft-bench --bin report -- --markdown --quick   # one small round, under two minutes
//!
//! The cases run interleaved (every case once, then again) and the ratios
//! are taken within one repetition, so that the machine's drift moves
//! every case alike.

mod headline;
mod memory;

/// Counts the heap, for the memory figures (a relaxed atomic per
/// allocation; the headline figures run in processes of their own).
#[global_allocator]
static HEAP: weft_bench::counting::Counting = weft_bench::counting::Counting;

use std::{
    collections::BTreeMap,
    io::IsTerminal,
    path::{Path, PathBuf},
    time::Duration,
};

use clap::Parser;
use plotters::{coord::types::RangedCoordf64, prelude::*};
use weft::handshake::CipherSuite;
use weft_bench::{
    bulk::{self, Outcome as Bulk},
    dial,
    ping::{self, PingMode},
    stacks::{Mode, Records},
    stats::{round3, Sample},
    Context, Result,
};

#[derive(Parser, Debug)]
#[command(about = "Runs the standard measurements and writes SVG charts")]
struct Args {
    /// Where the charts go.
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
    /// Repetitions of the throughput matrix.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Tiny workloads, to check that everything runs (seconds, not minutes).
    #[arg(long)]
    quick: bool,
    /// Print one JSON object with every figure as the last line.
    #[arg(long)]
    json: bool,
    /// Pin the client's thread to core 0 and the server's to core 1.
    #[arg(long)]
    pin: bool,
    /// The headline figures, as one Markdown table (see the module docs).
    #[arg(long)]
    markdown: bool,
    /// `--markdown`: interleaved rounds (default 5, or 1 with `--quick`).
    #[arg(long)]
    rounds: Option<usize>,
    /// `--markdown`: only the figures whose name contains this text (as
    /// `--only "idle connection"`), to check a few again.
    #[arg(long)]
    only: Option<String>,
}

/// Sizes of one run of the set.
struct Plan {
    /// Bytes moved by each case of the matrix, split over its streams.
    matrix_bytes: u64,
    /// The quinn seed's run: streams, at once, MiB each.
    quinn: (usize, u32, f64),
    dials: usize,
    pings: usize,
    /// The bulk targets: bytes on one stream, and MiB on each of 100.
    target_one: u64,
    target_hundred_mib: f64,
}

/// The Vanadium seed's rows (VCs x flows) as connections x streams.
const MATRIX: [(usize, usize, &str); 6] = [
    (1, 1, "1VIF_1VC_1Flow"),
    (1, 2, "1VIF_1VC_2Flow"),
    (1, 8, "1VIF_1VC_8Flow"),
    (2, 2, "1VIF_2VC_2Flow"),
    (2, 8, "1VIF_2VC_8Flow"),
    (4, 8, "2VIF_4VC_8Flow"),
];

/// A way to carry the workload, as the charts name it.
#[derive(Clone, Copy)]
struct Carrier {
    name: &'static str,
    mode: Mode,
    suite: CipherSuite,
}

const CARRIERS: [Carrier; 5] = [
    Carrier {
        name: "weft AES-256-GCM",
        mode: Mode::Weft,
        suite: CipherSuite::Aes256Gcm,
    },
    Carrier {
        name: "weft XSalsa20-Poly1305 (NaCl box)",
        mode: Mode::Weft,
        suite: CipherSuite::XSalsa20Poly1305,
    },
    Carrier {
        name: "weft plaintext",
        mode: Mode::Weft,
        suite: CipherSuite::Plaintext,
    },
    Carrier {
        name: "TLS 1.3 AES-256-GCM",
        mode: Mode::Tls,
        suite: CipherSuite::Aes256Gcm,
    },
    Carrier {
        name: "raw TCP",
        mode: Mode::Tcp,
        suite: CipherSuite::Plaintext,
    },
];

fn main() {
    weft_bench::exit_on_failure("report", run);
}

fn run() -> Result<()> {
    let args = Args::parse();
    if args.markdown {
        let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 5 }).max(1);
        let rows = headline::measure(args.quick, rounds, args.only.as_deref())?;
        println!(
            "{}",
            headline::markdown(&rows, rounds, args.only.as_deref(), &machine(), &today())
        );
        let (per_conn, per_stream) = memory::measure()?;
        println!(
            "Heap per end of an idle connection, everything included (the pipe, the channel, the multiplexer, \
             its driver): {per_conn:.0} bytes; per end of an idle open stream: {per_stream:.0} bytes \
             (100 connections, then 1,000 streams, counted by the report's allocator).\n"
        );
        if args.json {
            weft_bench::print_json(&headline::json(&rows));
        }
        return Ok(());
    }
    weft_bench::pin_threads(args.pin);
    let plan = if args.quick {
        Plan {
            matrix_bytes: 4 << 20,
            quinn: (12, 4, 0.5),
            dials: 20,
            pings: 50,
            target_one: 4 << 20,
            target_hundred_mib: 0.0625,
        }
    } else {
        Plan {
            matrix_bytes: 1 << 30,
            quinn: (300, 100, 10.0),
            dials: 1000,
            pings: 10_000,
            target_one: 2 << 30,
            target_hundred_mib: 20.0,
        }
    };
    let reps = args.reps.max(1);
    std::fs::create_dir_all(&args.out).context(format_args!("creating {}", args.out.display()))?;
    let machine = machine();
    println!("# weft report, {} on {machine}\n", today());

    let matrix = matrix(&plan, reps)?;
    print_matrix(&matrix, plan.matrix_bytes, reps);
    chart_matrix(&args.out.join("throughput.svg"), &matrix)?;

    let targets = targets(&plan, reps)?;
    print_targets(&targets, &plan, reps);

    let quinn = quinn(&plan)?;
    print_quinn(&quinn, &plan);
    chart_spread(&args.out.join("streams.svg"), &quinn, &plan)?;

    let dials = dials(&plan)?;
    print_dials(&dials);
    chart_dials(&args.out.join("dial.svg"), &dials)?;

    let pings = pings(&plan)?;
    print_pings(&pings, &plan);

    println!(
        "charts: {}",
        args.out.join("{throughput,streams,dial}.svg").display()
    );
    if args.json {
        weft_bench::print_json(&serde_json::json!({
            "machine": machine,
            "matrix": matrix.iter().map(|(case, runs)| serde_json::json!({
                "case": format!("{}x{}", case.0, case.1),
                "mib_per_s": runs.iter().map(|(name, r)| (name.to_string(), round3(r.median))).collect::<BTreeMap<_, _>>(),
            })).collect::<Vec<_>>(),
            "targets": targets.iter().map(|t| serde_json::json!({
                "streams": t.streams,
                "weft_mib_per_s": round3(t.weft),
                "tls_mib_per_s": round3(t.tls),
                "ratio": round3(t.ratio),
                "weft_p10_over_p50": round3(t.spread),
            })).collect::<Vec<_>>(),
            "quinn": quinn.iter().map(|(c, b)| (c.name.to_owned(), b.json())).collect::<BTreeMap<_, _>>(),
            "dial": dials.iter().map(|d| (d.mode.name().to_owned(), d.json())).collect::<BTreeMap<_, _>>(),
            "ping": pings.iter().map(|(m, s)| (m.name().to_owned(), serde_json::json!({"p50_us": round3(s.percentile(50.0))}))).collect::<BTreeMap<_, _>>(),
        }));
    }
    Ok(())
}

/// What is running, on one line of a terminal (nothing otherwise).
fn status(what: impl std::fmt::Display) {
    if std::io::stderr().is_terminal() {
        eprint!("\r{:<72}\r{what}", "");
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "an unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores of {cpu}")
}

fn today() -> String {
    std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "today".to_owned(), |d| d.trim().to_owned())
}

fn bulk_config(carrier: Carrier, conns: usize, streams_per_conn: usize, stream_size: u64) -> bulk::Config {
    // The baselines take one connection per stream.
    let (conns, max_streams) = match carrier.mode {
        Mode::Weft => (conns, streams_per_conn as u32),
        _ => (1, (conns * streams_per_conn) as u32),
    };
    let streams = conns * max_streams as usize;
    bulk::Config {
        mode: carrier.mode,
        suite: carrier.suite,
        tls_suite: None,
        tls_provider: Default::default(),
        records: Records::Dynamic,
        conns,
        streams,
        max_streams,
        stream_size,
        progress: false,
        warmups: 0,
    }
}

/// One case of the matrix: each carrier's MiB/s over the repetitions.
struct Runs {
    median: f64,
    /// Median over the repetitions of the ratio to raw TCP in the same one.
    to_tcp: f64,
    to_tls: f64,
}

type Matrix = Vec<((usize, usize, &'static str), Vec<(&'static str, Runs)>)>;

fn matrix(plan: &Plan, reps: usize) -> Result<Matrix> {
    let mut speeds: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); CARRIERS.len()]; MATRIX.len()];
    for rep in 0..reps {
        for (row, &(conns, streams, label)) in MATRIX.iter().enumerate() {
            let size = plan.matrix_bytes / (conns * streams) as u64;
            for (i, &carrier) in CARRIERS.iter().enumerate() {
                status(format_args!(
                    "matrix {}/{reps}: {label} {}",
                    rep + 1,
                    carrier.name
                ));
                let outcome = bulk::run_local(&bulk_config(carrier, conns, streams, size))
                    .context(format_args!("{} {conns}x{streams}", carrier.name))?;
                speeds[row][i].push(outcome.mib_per_s());
            }
        }
    }
    status("");
    let tcp = CARRIERS.iter().position(|c| c.mode == Mode::Tcp).unwrap_or(0);
    let tls = CARRIERS.iter().position(|c| c.mode == Mode::Tls).unwrap_or(0);
    Ok(MATRIX
        .iter()
        .zip(speeds)
        .map(|(&case, row)| {
            let ratio = |i: usize, base: usize| median((0..reps).map(|r| row[i][r] / row[base][r]).collect());
            let runs = CARRIERS
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    (
                        c.name,
                        Runs {
                            median: median(row[i].clone()),
                            to_tcp: ratio(i, tcp),
                            to_tls: ratio(i, tls),
                        },
                    )
                })
                .collect();
            (case, runs)
        })
        .collect())
}

fn median(values: Vec<f64>) -> f64 {
    Sample::new(values).percentile(50.0)
}

fn print_matrix(matrix: &Matrix, bytes: u64, reps: usize) {
    println!(
        "## Throughput: the Vanadium matrix ({} MiB per case, median of {reps} interleaved runs)\n",
        bytes >> 20
    );
    println!("| Vanadium row | conns x streams | carrier | MiB/s | MB/s | ratio to raw TCP | ratio to TLS |");
    println!("|---|---|---|---|---|---|---|");
    for ((conns, streams, label), runs) in matrix {
        for (name, r) in runs {
            println!(
                "| {label} | {conns}x{streams} | {name} | {:.0} | {:.0} | {:.2} | {:.2} |",
                r.median,
                r.median * 1.048576,
                r.to_tcp,
                r.to_tls
            );
        }
    }
    println!();
}

/// The bulk example's targets: weft AES-256-GCM against `--baseline tls`
/// at 1 stream and at 100 streams, and the spread across streams.
struct Target {
    streams: usize,
    weft: f64,
    tls: f64,
    /// Median over the repetitions of weft / TLS within each.
    ratio: f64,
    /// Median per-stream P10 / P50 of the weft runs.
    spread: f64,
}

fn targets(plan: &Plan, reps: usize) -> Result<Vec<Target>> {
    let hundred = (plan.target_hundred_mib * (1 << 20) as f64) as u64;
    [(1usize, plan.target_one), (100, hundred)]
        .into_iter()
        .map(|(streams, size)| {
            let (mut weft, mut tls, mut ratios, mut spreads) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for rep in 0..reps {
                status(format_args!(
                    "bulk targets {}/{reps}: {streams} stream(s)",
                    rep + 1
                ));
                let w = bulk::run_local(&bulk_config(CARRIERS[0], 1, streams, size)).context("weft")?;
                let t = bulk::run_local(&bulk_config(CARRIERS[3], 1, streams, size)).context("TLS")?;
                ratios.push(w.mib_per_s() / t.mib_per_s());
                spreads.push(w.rates.percentile(10.0) / w.rates.percentile(50.0));
                weft.push(w.mib_per_s());
                tls.push(t.mib_per_s());
            }
            status("");
            Ok(Target {
                streams,
                weft: median(weft),
                tls: median(tls),
                ratio: median(ratios),
                spread: median(spreads),
            })
        })
        .collect()
}

fn print_targets(targets: &[Target], plan: &Plan, reps: usize) {
    println!(
        "## Bulk: weft AES-256-GCM against `--baseline tls` ({} MiB on 1 stream; {} MiB on each of 100; median of {reps} interleaved runs)\n",
        plan.target_one >> 20,
        plan.target_hundred_mib
    );
    println!("| streams | weft MiB/s | TLS MiB/s | weft / TLS | weft per-stream P10/P50 |");
    println!("|---|---|---|---|---|");
    for t in targets {
        println!(
            "| {} | {:.0} | {:.0} | {:.2} | {:.2} |",
            t.streams, t.weft, t.tls, t.ratio, t.spread
        );
    }
    println!();
}

fn quinn(plan: &Plan) -> Result<Vec<(Carrier, Bulk)>> {
    let (streams, at_once, mib) = plan.quinn;
    let size = (mib * (1 << 20) as f64) as u64;
    [CARRIERS[0], CARRIERS[3], CARRIERS[4]]
        .into_iter()
        .map(|carrier| {
            status(format_args!("quinn bulk run: {}", carrier.name));
            let mut config = bulk_config(carrier, 1, at_once as usize, size);
            config.streams = streams;
            let outcome = bulk::run_local(&config).context(carrier.name)?;
            Ok((carrier, outcome))
        })
        .collect::<Result<Vec<_>>>()
        .inspect(|_| status(""))
}

fn print_quinn(runs: &[(Carrier, Bulk)], plan: &Plan) {
    let (streams, at_once, mib) = plan.quinn;
    println!("## The quinn seed's bulk run: {streams} streams, {at_once} at once, {mib} MiB each\n");
    println!("| carrier | MiB/s | handshake µs | stream AVG | P0 | P10 | P50 | P90 | P100 | P10/P50 |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (carrier, b) in runs {
        let r = &b.rates;
        println!(
            "| {} | {:.2} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            carrier.name,
            b.mib_per_s(),
            b.handshake_us,
            r.avg(),
            r.min(),
            r.percentile(10.0),
            r.percentile(50.0),
            r.percentile(90.0),
            r.max(),
            r.percentile(10.0) / r.percentile(50.0)
        );
    }
    println!("\n(per-stream figures in MiB/s)\n");
}

fn dials(plan: &Plan) -> Result<Vec<dial::Outcome>> {
    [Mode::Weft, Mode::Tls, Mode::Tcp]
        .into_iter()
        .map(|mode| {
            dial::run_local(mode, plan.dials, Default::default())
                .context(format_args!("dialing {}", mode.name()))
        })
        .collect()
}

fn print_dials(dials: &[dial::Outcome]) {
    println!(
        "## Dial: connect, handshake and first byte ({} dials each)\n",
        dials[0].dials.len()
    );
    println!("| mode | min µs | avg µs | p50 µs | p99 µs | max µs | p50 ratio to TLS |");
    println!("|---|---|---|---|---|---|---|");
    let tls = dials
        .iter()
        .find(|d| d.mode == Mode::Tls)
        .map_or(1.0, |d| d.dials.percentile(50.0));
    for d in dials {
        let s = &d.dials;
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} |",
            d.mode.name(),
            s.min(),
            s.avg(),
            s.percentile(50.0),
            s.percentile(99.0),
            s.max(),
            s.percentile(50.0) / tls
        );
    }
    println!();
    for d in dials.iter().filter(|d| d.mode != Mode::Tcp) {
        println!("{}:\n```", d.mode.name());
        print!("{}", d.histogram().render(&d.dials, "µs"));
        println!("```\n");
    }
}

/// Each mode's round trips, pooled from five interleaved rounds.
fn pings(plan: &Plan) -> Result<Vec<(PingMode, Sample)>> {
    const ROUNDS: usize = 5;
    let modes = [
        PingMode::Tcp,
        PingMode::Tls,
        PingMode::Weft,
        PingMode::WeftPlaintext,
    ];
    let mut pooled = vec![Vec::new(); modes.len()];
    for _ in 0..ROUNDS {
        for (i, &mode) in modes.iter().enumerate() {
            let config = ping::Config {
                mode,
                count: plan.pings.div_ceil(ROUNDS),
                size: 64,
                interval: Duration::ZERO,
            };
            let outcome = ping::run_local(&config).context(format_args!("ping {}", mode.name()))?;
            pooled[i].extend_from_slice(outcome.rtts.values());
        }
    }
    Ok(modes
        .into_iter()
        .zip(pooled.into_iter().map(Sample::new))
        .collect())
}

fn print_pings(pings: &[(PingMode, Sample)], plan: &Plan) {
    println!(
        "## Ping: {} round trips of 64 bytes per mode, five interleaved rounds\n",
        plan.pings
    );
    println!("| mode | min | avg | max | mdev | p50 | p99 | p50 ratio to TCP | p50 ratio to TLS |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let p50 = |mode: PingMode| {
        pings
            .iter()
            .find(|(m, _)| *m == mode)
            .map_or(1.0, |(_, s)| s.percentile(50.0))
    };
    let (tcp, tls) = (p50(PingMode::Tcp), p50(PingMode::Tls));
    for (mode, s) in pings {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            mode.name(),
            s.min(),
            s.avg(),
            s.max(),
            s.mdev(),
            s.percentile(50.0),
            s.percentile(99.0),
            s.percentile(50.0) / tcp,
            s.percentile(50.0) / tls
        );
    }
    println!("\n(µs)\n");
}

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(214, 39, 40),
    RGBColor(127, 127, 127),
];

fn chart_matrix(path: &Path, matrix: &Matrix) -> Result<()> {
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = matrix
        .iter()
        .flat_map(|(_, runs)| runs.iter().map(|(_, r)| r.median))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput by connections x streams (MiB/s, higher is better)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..matrix.len() as f64, 0.0..top * 1.3)?;
    let labels: Vec<String> = matrix.iter().map(|((c, s, _), _)| format!("{c}x{s}")).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(matrix.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("connections x streams per connection")
        .y_desc("MiB/s")
        .draw()?;
    let width = 0.8 / CARRIERS.len() as f64;
    for (i, carrier) in CARRIERS.iter().enumerate() {
        let color = COLORS[i];
        chart
            .draw_series(matrix.iter().enumerate().map(|(row, (_, runs))| {
                let x = row as f64 + 0.1 + i as f64 * width;
                Rectangle::new([(x, 0.0), (x + width * 0.9, runs[i].1.median)], color.filled())
            }))?
            .label(carrier.name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

/// The legend, boxed, where it hides the least.
fn legend<'a, DB>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Per-stream throughput, sorted: the spread across streams.
fn chart_spread(path: &Path, runs: &[(Carrier, Bulk)], plan: &Plan) -> Result<()> {
    let (streams, at_once, mib) = plan.quinn;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = runs.iter().map(|(_, b)| b.rates.max()).fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Per-stream throughput: {streams} streams, {at_once} at once, {mib} MiB each"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..100.0, 0.0..top * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("streams, slowest to fastest (percentile)")
        .y_desc("MiB/s per stream")
        .draw()?;
    for (i, (carrier, b)) in runs.iter().enumerate() {
        let color = COLORS[CARRIERS.iter().position(|c| c.name == carrier.name).unwrap_or(i)];
        let n = b.rates.len().max(2) - 1;
        chart
            .draw_series(LineSeries::new(
                b.rates
                    .values()
                    .iter()
                    .enumerate()
                    .map(|(k, &r)| (k as f64 * 100.0 / n as f64, r)),
                color.stroke_width(2),
            ))?
            .label(carrier.name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

/// Dial latency histograms for weft and TLS on shared, even buckets.
fn chart_dials(path: &Path, dials: &[dial::Outcome]) -> Result<()> {
    let shown: Vec<&dial::Outcome> = dials.iter().filter(|d| d.mode != Mode::Tcp).collect();
    let high = shown.iter().map(|d| d.dials.percentile(99.0)).fold(1.0, f64::max) * 1.2;
    const BUCKETS: usize = 40;
    let width = high / BUCKETS as f64;
    let counts: Vec<Vec<f64>> = shown
        .iter()
        .map(|d| {
            let mut c = vec![0.0; BUCKETS];
            for &x in d.dials.values() {
                c[((x / width) as usize).min(BUCKETS - 1)] += 100.0 / d.dials.len() as f64;
            }
            c
        })
        .collect();
    let top = counts.iter().flatten().copied().fold(1.0, f64::max);
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Dial latency: connect, handshake, first byte (share of dials per bucket)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..high, 0.0..top * 1.15)?;
    chart
        .configure_mesh()
        .x_desc("µs (the last bucket holds everything slower)")
        .y_desc("% of dials")
        .draw()?;
    for (i, (d, c)) in shown.iter().zip(&counts).enumerate() {
        let color = if d.mode == Mode::Weft {
            COLORS[0]
        } else {
            COLORS[3]
        };
        let half = width / 2.0;
        chart
            .draw_series(c.iter().enumerate().map(|(b, &share)| {
                let x = b as f64 * width + i as f64 * half;
                Rectangle::new([(x, 0.0), (x + half * 0.9, share)], color.filled())
            }))?
            .label(format!(
                "{} (p50 {:.0} µs)",
                d.mode.name(),
                d.dials.percentile(50.0)
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}
