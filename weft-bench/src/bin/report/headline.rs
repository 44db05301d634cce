//! The headline figures (`report --markdown`): every ratio README and
//! BENCHMARKS.md claim, each measured against its baseline in the same
//! run. Each figure runs the example that measures it (`bulk`, `dial`,
//! `handshakes`, `idle`, `ping`, `rpc_bench`, `http_bench`) with `--json`, ours and the
//! baseline's back to back, in rounds that interleave every figure; a
//! figure's ratio is taken within a round, and the table gives the median
//! and the range over the rounds, with the command of each side.

use std::{path::PathBuf, process::Command};

use weft_bench::{stats::Sample, Context, Failure, Result};

/// Which way a metric is better.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// A number in an example's JSON: a path of keys.
#[derive(Clone, Copy)]
struct Metric {
    path: &'static [&'static str],
    unit: &'static str,
    better: Better,
}

const MIB_PER_S: Metric = Metric {
    path: &["mib_per_s"],
    unit: "MiB/s",
    better: Better::Higher,
};
const RPS: Metric = Metric {
    path: &["rps"],
    unit: "/s",
    better: Better::Higher,
};
const P50_US: Metric = Metric {
    path: &["p50_us"],
    unit: "µs",
    better: Better::Lower,
};
const P99_US: Metric = Metric {
    path: &["p99_us"],
    unit: "µs",
    better: Better::Lower,
};

/// One headline: ours against a baseline (or, with no baseline, a ratio
/// of two of ours' own numbers, as fairness's p10 / p50).
struct Figure {
    what: &'static str,
    against: &'static str,
    example: &'static str,
    ours: Vec<String>,
    theirs: Option<Vec<String>>,
    metric: Metric,
    /// With no baseline: the denominator, from the same run.
    per: Option<Metric>,
}

fn args(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

/// The set, sized for a full run or a quick look.
fn figures(quick: bool) -> Vec<Figure> {
    // Bytes per bulk run, streams' calls and requests.
    let (mib, calls, c1_calls, requests, cold, delayed) = if quick {
        (128, 4_000, 1_000, 4_000, 200, 6)
    } else {
        (2048, 40_000, 10_000, 40_000, 2_000, 30)
    };
    let bulk = |streams: usize, extra: &str| {
        let each = (mib as f64 / streams as f64).max(0.5);
        args(&format!(
            "--streams {streams} --max-streams {streams} --stream-size {each} {extra} --json"
        ))
    };
    let mut set = Vec::new();
    for streams in [1, 8, 100] {
        set.push(Figure {
            what: leak(format!("bulk, {streams} stream(s), plaintext")),
            against: "raw TCP, 1 MiB reads and writes",
            example: "bulk",
            ours: bulk(streams, "--suite plaintext"),
            theirs: Some(bulk(streams, "--baseline tcp")),
            metric: MIB_PER_S,
            per: None,
        });
    }
    for streams in [1, 8, 100] {
        set.push(Figure {
            what: leak(format!("bulk, {streams} stream(s), AES-256-GCM")),
            against: "tokio-rustls, aws-lc-rs (rustls's default), a connection per stream",
            example: "bulk",
            ours: bulk(streams, "--suite aes256gcm"),
            theirs: Some(bulk(streams, "--baseline tls --tls-provider aws-lc-rs")),
            metric: MIB_PER_S,
            per: None,
        });
    }
    set.push(Figure {
        what: "fairness: the slowest tenth of 300 streams, 100 at once",
        against: "the median stream (p10 / p50 of stream MiB/s)",
        example: "bulk",
        ours: args(&format!(
            "--streams 300 --max-streams 100 --stream-size {} --json",
            if quick { 1 } else { 10 }
        )),
        theirs: None,
        metric: Metric {
            path: &["stream_mib_per_s", "p10"],
            unit: "MiB/s",
            better: Better::Higher,
        },
        per: Some(Metric {
            path: &["stream_mib_per_s", "p50"],
            unit: "MiB/s",
            better: Better::Higher,
        }),
    });
    let dials = if quick { 100 } else { 1000 };
    set.push(Figure {
        what: "dial: connect, handshake, first byte",
        against: "tokio-rustls TLS 1.3, aws-lc-rs",
        example: "dial",
        ours: args(&format!("-c {dials} --json")),
        theirs: Some(args(&format!(
            "--mode tls --tls-provider aws-lc-rs -c {dials} --json"
        ))),
        metric: Metric {
            path: &["dial_us", "p50"],
            unit: "µs",
            better: Better::Lower,
        },
        per: None,
    });
    // Handshakes one acceptor core completes a second, many dialers at
    // once (per second of the acceptor thread's CPU).
    let seconds = if quick { 1 } else { 3 };
    let handshakes = |mode: &str| args(&format!("--mode {mode} --seconds {seconds} --json"));
    for (what, ours, against, theirs) in [
        (
            "handshakes per acceptor core second, 1-RTT",
            "weft",
            "tokio-rustls TLS 1.3 with client certificates (mutual), aws-lc-rs",
            "tls-mutual",
        ),
        (
            "handshakes per acceptor core second, 0-RTT with a ticket",
            "weft-0rtt",
            "tokio-rustls TLS 1.3 resumed, client certificates, aws-lc-rs",
            "tls-resumed",
        ),
    ] {
        set.push(Figure {
            what,
            against,
            example: "handshakes",
            ours: handshakes(ours),
            theirs: Some(handshakes(theirs)),
            metric: Metric {
                path: &["per_core_second"],
                unit: "/s",
                better: Better::Higher,
            },
            per: None,
        });
    }
    // Capacity: what each idle connection costs a server holding many.
    let idle = if quick { 1_000 } else { 10_000 };
    let bytes = |path| Metric {
        path,
        unit: "B",
        better: Better::Lower,
    };
    for (what, metric) in [
        ("server heap per idle connection", bytes(&["heap_per_connection"])),
        (
            "server resident memory per idle connection",
            bytes(&["rss_per_connection"]),
        ),
    ] {
        set.push(Figure {
            what: leak(format!("{what}, {idle} connections")),
            against: "tokio-rustls TLS 1.3, ring, a task per connection",
            example: "idle",
            ours: args(&format!("--connections {idle} --json")),
            theirs: Some(args(&format!("--mode tls --connections {idle} --json"))),
            metric,
            per: None,
        });
    }
    let pings = if quick { 1_000 } else { 10_000 };
    set.push(Figure {
        what: "ping: 64 bytes there and back",
        against: "tokio-rustls TLS 1.3, ring",
        example: "ping",
        ours: args(&format!("--count {pings} --json")),
        theirs: Some(args(&format!("--mode tls --count {pings} --json"))),
        metric: Metric {
            path: &["rtt_us", "p50"],
            unit: "µs",
            better: Better::Lower,
        },
        per: None,
    });
    let rpc = |mode: &str, extra: &str| args(&format!("--mode {mode} {extra} --json"));
    for (against, mode) in [
        ("tonic over TLS 1.3", "tonic-tls"),
        ("tonic over plain TCP (h2c)", "tonic"),
        ("tarpc (unencrypted)", "tarpc"),
    ] {
        set.push(Figure {
            what: "RPC unary, 64 in flight",
            against,
            example: "rpc_bench",
            ours: rpc("weft", &format!("--calls {calls}")),
            theirs: Some(rpc(mode, &format!("--calls {calls}"))),
            metric: RPS,
            per: None,
        });
    }
    // A fleet of callers: a connection each, one call in flight each.
    let fleet = if quick { 100 } else { 1_000 };
    let clients = |mode: &str| rpc(mode, &format!("--clients {fleet}"));
    let fleet_what = leak(format!(
        "RPC unary, {fleet} clients, a connection and a call in flight each"
    ));
    for (against, mode, metric) in [
        ("tonic over TLS 1.3", "tonic-tls", RPS),
        ("tarpc (unencrypted)", "tarpc", RPS),
        ("tonic over TLS 1.3 (p99)", "tonic-tls", P99_US),
    ] {
        set.push(Figure {
            what: fleet_what,
            against,
            example: "rpc_bench",
            ours: clients("weft"),
            theirs: Some(clients(mode)),
            metric,
            per: None,
        });
    }
    let dialers = if quick { 4 } else { 32 };
    set.push(Figure {
        what: leak(format!(
            "handshakes a second while {fleet} clients call ({dialers} dialers, a cold call each)"
        )),
        against: "tonic over TLS 1.3, a new `Channel` per cold call",
        example: "rpc_bench",
        ours: rpc("weft", &format!("--clients {fleet} --dialers {dialers}")),
        theirs: Some(rpc(
            "tonic-tls",
            &format!("--clients {fleet} --dialers {dialers}"),
        )),
        metric: Metric {
            path: &["handshakes_per_s"],
            unit: "/s",
            better: Better::Higher,
        },
        per: None,
    });
    set.push(Figure {
        what: leak(format!("RPC unary, {fleet} clients: the slowest client served")),
        against: "the median client (calls made)",
        example: "rpc_bench",
        ours: clients("weft"),
        theirs: None,
        metric: Metric {
            path: &["client_calls", "min"],
            unit: "calls",
            better: Better::Higher,
        },
        per: Some(Metric {
            path: &["client_calls", "median"],
            unit: "calls",
            better: Better::Higher,
        }),
    });
    set.push(Figure {
        what: "RPC unary, 1 in flight",
        against: "tarpc (unencrypted)",
        example: "rpc_bench",
        ours: rpc("weft", &format!("--concurrency 1 --calls {c1_calls}")),
        theirs: Some(rpc("tarpc", &format!("--concurrency 1 --calls {c1_calls}"))),
        metric: P50_US,
        per: None,
    });
    set.push(Figure {
        what: "RPC server streaming, 1 KiB replies, 64 in flight",
        against: "tonic over TLS 1.3",
        example: "rpc_bench",
        ours: rpc("weft", &format!("--kind server-stream --calls {}", calls / 40)),
        theirs: Some(rpc(
            "tonic-tls",
            &format!("--kind server-stream --calls {}", calls / 40),
        )),
        metric: RPS,
        per: None,
    });
    set.push(Figure {
        what: "RPC cold unary call with 0-RTT, loopback",
        against: "tonic over TLS 1.3, a connection per call",
        example: "rpc_bench",
        ours: rpc("weft-0rtt", &format!("--cold --concurrency 1 --calls {cold}")),
        theirs: Some(rpc(
            "tonic-tls",
            &format!("--cold --concurrency 1 --calls {cold}"),
        )),
        metric: P50_US,
        per: None,
    });
    set.push(Figure {
        what: "RPC cold unary call with 0-RTT, loopback",
        against: "weft's 1-RTT cold call",
        example: "rpc_bench",
        ours: rpc("weft-0rtt", &format!("--cold --concurrency 1 --calls {cold}")),
        theirs: Some(rpc("weft", &format!("--cold --concurrency 1 --calls {cold}"))),
        metric: P50_US,
        per: None,
    });
    set.push(Figure {
        what: "RPC cold unary call with 0-RTT, 25 ms each way",
        against: "weft's 1-RTT cold call",
        example: "rpc_bench",
        ours: rpc(
            "weft-0rtt",
            &format!("--cold --concurrency 1 --calls {delayed} --delay-ms 25"),
        ),
        theirs: Some(rpc(
            "weft",
            &format!("--cold --concurrency 1 --calls {delayed} --delay-ms 25"),
        )),
        metric: P50_US,
        per: None,
    });
    for protocol in ["h2", "h1"] {
        set.push(Figure {
            what: leak(format!("HTTP {protocol}, 64 in flight")),
            against: "hyper over tokio-rustls TLS 1.3, ring",
            example: "http_bench",
            ours: args(&format!(
                "--mode weft --protocol {protocol} --requests {requests} --json"
            )),
            theirs: Some(args(&format!(
                "--mode tls --protocol {protocol} --requests {requests} --json"
            ))),
            metric: RPS,
            per: None,
        });
    }
    set.push(Figure {
        what: "HTTP by the connector's default (HTTP/1.1 on each stream), 64 in flight",
        against: "hyper over tokio-rustls TLS 1.3, ring, h2 (ALPN's choice)",
        example: "http_bench",
        ours: args(&format!(
            "--mode weft --protocol default --requests {requests} --json"
        )),
        theirs: Some(args(&format!(
            "--mode tls --protocol default --requests {requests} --json"
        ))),
        metric: RPS,
        per: None,
    });
    set
}

/// A figure's name made at run time, kept for the run.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The tools' binaries: beside this one (`target/release`), built first,
/// so that one command runs the set.
fn binaries() -> Result<PathBuf> {
    let dir = std::env::current_exe()
        .context("finding the report's binary")?
        .parent()
        .map(PathBuf::from)
        .ok_or_else(|| Failure::new("the report's binary has no directory"))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("report: building the tools it runs (cargo build --release -p weft-bench --bins)");
    let built = Command::new(cargo)
        .args(["build", "--release", "-p", "weft-bench", "--bins"])
        .status()
        .context("running cargo build")?;
    if !built.success() {
        return Err(Failure::new("cargo build --release -p weft-bench --bins failed"));
    }
    Ok(dir)
}

/// Runs `example` with `args`; its last line's JSON.
fn run(dir: &std::path::Path, example: &str, args: &[String]) -> Result<serde_json::Value> {
    let output = Command::new(dir.join(example))
        .args(args)
        .output()
        .context(format_args!("running {example}"))?;
    if !output.status.success() {
        return Err(Failure::new(format_args!(
            "{example} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).context(format_args!("{example}'s JSON"))
}

fn value(json: &serde_json::Value, metric: Metric) -> Result<f64> {
    let mut at = json;
    for key in metric.path {
        at = &at[*key];
    }
    at.as_f64()
        .ok_or_else(|| Failure::new(format_args!("no {} in {json}", metric.path.join("."))))
}

/// One figure's outcome: ours and theirs per round, and the ratios.
pub struct Row {
    figure: Figure,
    ours: Vec<f64>,
    theirs: Vec<f64>,
    ratios: Vec<f64>,
}

/// Runs the set (or the figures whose name contains `only`) in `rounds`
/// interleaved rounds (ours first in even rounds, the baseline first in
/// odd ones).
pub fn measure(quick: bool, rounds: usize, only: Option<&str>) -> Result<Vec<Row>> {
    let dir = binaries()?;
    let mut rows: Vec<Row> = figures(quick)
        .into_iter()
        .filter(|figure| only.is_none_or(|only| figure.what.contains(only)))
        .map(|figure| Row {
            figure,
            ours: Vec::new(),
            theirs: Vec::new(),
            ratios: Vec::new(),
        })
        .collect();
    for round in 0..rounds {
        for row in &mut rows {
            let figure = &row.figure;
            crate::status(format_args!("round {}/{rounds}: {}", round + 1, figure.what));
            let (ours, theirs) = match &figure.theirs {
                None => {
                    let json = run(&dir, figure.example, &figure.ours)?;
                    let per = figure.per.expect("a figure without a baseline has a denominator");
                    (value(&json, figure.metric)?, value(&json, per)?)
                }
                Some(theirs_args) => {
                    let mut pair = [(&figure.ours, 0.0), (theirs_args, 0.0)];
                    if round % 2 == 1 {
                        pair.swap(0, 1);
                    }
                    for (args, out) in &mut pair {
                        *out = value(&run(&dir, figure.example, args)?, figure.metric)?;
                    }
                    if round % 2 == 1 {
                        pair.swap(0, 1);
                    }
                    (pair[0].1, pair[1].1)
                }
            };
            row.ours.push(ours);
            row.theirs.push(theirs);
            row.ratios.push(ours / theirs);
        }
    }
    crate::status("");
    Ok(rows)
}

/// The table, as Markdown: what, against what, the ratio (median and
/// range over the rounds), both medians, and the commands.
pub fn markdown(rows: &[Row], rounds: usize, only: Option<&str>, machine: &str, date: &str) -> String {
    let only = only
        .map(|only| format!(" --rounds {rounds} --only {only:?}"))
        .unwrap_or_default();
    let mut out = format!(
        "Measured {date} on {machine}: {rounds} interleaved round(s), the ratio taken within each \
         round (median, and the range); `cargo run --release -p weft-bench --bin report -- --markdown{only}`.\n\n\
         | figure | against | ratio | ours | theirs | better | commands |\n|---|---|---|---|---|---|---|\n"
    );
    for row in rows {
        let f = &row.figure;
        let ratios = Sample::new(row.ratios.clone());
        let (lo, hi) = (ratios.percentile(0.0), ratios.percentile(100.0));
        let ours = Sample::new(row.ours.clone()).percentile(50.0);
        let theirs = Sample::new(row.theirs.clone()).percentile(50.0);
        let better = match (f.metric.better, f.per.is_some()) {
            (_, true) => "closer to 1",
            (Better::Higher, _) => "higher",
            (Better::Lower, _) => "lower",
        };
        let theirs_cmd = f
            .theirs
            .as_ref()
            .map(|t| format!("; `{} {}`", f.example, t.join(" ")))
            .unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | **{:.2}** ({lo:.2}–{hi:.2}) | {} {} | {} {} | {better} | `{} {}`{theirs_cmd} |\n",
            f.what,
            f.against,
            ratios.percentile(50.0),
            sig(ours),
            f.metric.unit,
            sig(theirs),
            f.per.unwrap_or(f.metric).unit,
            f.example,
            f.ours.join(" "),
        ));
    }
    out
}

/// Three significant figures, enough for a median.
fn sig(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The rows as JSON.
pub fn json(rows: &[Row]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|row| {
                serde_json::json!({
                    "figure": row.figure.what,
                    "against": row.figure.against,
                    "ratios": row.ratios,
                    "ours": row.ours,
                    "theirs": row.theirs,
                })
            })
            .collect(),
    )
}
