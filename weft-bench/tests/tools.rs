//! The measuring tools, run with tiny workloads so that they cannot rot:
//! each prints one JSON object as its last line, which is checked here.
//! (Cargo builds this crate's binaries before its tests, and names them in
//! `CARGO_BIN_EXE_<name>`.)

use std::{
    io::{BufRead, BufReader},
    process::{Command, Output, Stdio},
};

use serde_json::Value;

fn example(name: &str) -> Command {
    let path = match name {
        "bulk" => env!("CARGO_BIN_EXE_bulk"),
        "dial" => env!("CARGO_BIN_EXE_dial"),
        "handshakes" => env!("CARGO_BIN_EXE_handshakes"),
        "http_bench" => env!("CARGO_BIN_EXE_http_bench"),
        "idle" => env!("CARGO_BIN_EXE_idle"),
        "ping" => env!("CARGO_BIN_EXE_ping"),
        "records" => env!("CARGO_BIN_EXE_records"),
        "report" => env!("CARGO_BIN_EXE_report"),
        "rpc_bench" => env!("CARGO_BIN_EXE_rpc_bench"),
        other => panic!("no tool named {other}"),
    };
    Command::new(path)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs an example to success and parses its last line.
fn json(name: &str, args: &[&str]) -> Value {
    let output = example(name)
        .args(args)
        .arg("--json")
        .output()
        .expect("run the example");
    assert!(
        output.status.success(),
        "{name} {args:?} failed: {}",
        stderr(&output)
    );
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let last = stdout.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{name}: last line {last:?} is not JSON: {e}"))
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

/// The quinn table's figures are present and in order.
fn check_percentiles(v: &Value, key: &str) {
    let p = |name: &str| num(v, &[key, name]);
    assert!(p("p0") > 0.0, "{v}");
    assert!(p("p0") <= p("p10") && p("p10") <= p("p50") && p("p50") <= p("p90") && p("p90") <= p("p100"));
    assert!(p("p0") <= p("avg") && p("avg") <= p("p100"));
}

#[test]
fn bulk_over_weft_spreads_streams_over_connections() {
    let v = json(
        "bulk",
        &[
            "--streams",
            "6",
            "--max-streams",
            "2",
            "--stream-size",
            "0.25",
            "--conns",
            "2",
        ],
    );
    assert_eq!(v["mode"], "weft");
    assert_eq!(v["suite"], "aes256gcm");
    assert_eq!(v["records"], "dynamic");
    assert_eq!(
        (
            v["conns"].as_u64(),
            v["streams"].as_u64(),
            v["max_streams"].as_u64()
        ),
        (Some(2), Some(6), Some(2))
    );
    assert_eq!(v["bytes"].as_u64(), Some(6 << 18));
    assert!(num(&v, &["seconds"]) > 0.0 && num(&v, &["mib_per_s"]) > 0.0);
    assert!(num(&v, &["handshake_us"]) > 0.0);
    // (In ticks of 10 ms: a run this small may count none.)
    assert!(num(&v, &["cpu_s_per_gb"]) >= 0.0);
    check_percentiles(&v, "stream_mib_per_s");
    check_percentiles(&v, "stream_ms");
}

#[test]
fn bulk_runs_every_suite_and_record_policy() {
    for (suite, records) in [
        ("xsalsa20poly1305", "dynamic"),
        ("xchacha20poly1305", "dynamic"),
        ("chacha20poly1305", "fixed:16384"),
        ("plaintext", "fixed:512"),
    ] {
        let v = json(
            "bulk",
            &[
                "--streams",
                "2",
                "--max-streams",
                "2",
                "--stream-size",
                "0.125",
                "--suite",
                suite,
                "--records",
                records,
            ],
        );
        assert_eq!(
            (v["suite"].as_str(), v["records"].as_str()),
            (Some(suite), Some(records))
        );
        assert_eq!(v["bytes"].as_u64(), Some(2 << 17));
    }
}

#[test]
fn bulk_baselines_run_the_same_workload() {
    for baseline in ["tcp", "tls"] {
        let v = json(
            "bulk",
            &[
                "--streams",
                "4",
                "--max-streams",
                "2",
                "--stream-size",
                "0.25",
                "--baseline",
                baseline,
                "--warm-up",
                "1",
            ],
        );
        assert_eq!(v["mode"], baseline);
        assert_eq!(v["records"], if baseline == "tcp" { "none" } else { "tls" });
        assert_eq!(v["bytes"].as_u64(), Some(4 << 18));
        assert_eq!(v["warmups"].as_u64(), Some(1));
        check_percentiles(&v, "stream_mib_per_s");
    }
}

#[test]
fn bulk_explains_a_suite_tls_does_not_have() {
    let output = example("bulk")
        .args(["--suite", "xsalsa20poly1305", "--baseline", "tls"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("TLS 1.3 has no xsalsa20poly1305 suite"),
        "{}",
        stderr(&output)
    );
    let output = example("bulk").args(["--suite", "rot13"]).output().unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("\"rot13\" is not a cipher suite"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn bulk_without_a_server_fails_with_a_message_not_a_panic() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = example("bulk")
        .args(["--baseline", "tcp", "--connect", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("bulk: error: connecting to 127.0.0.1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bulk_splits_across_processes_and_pins_the_server_key() {
    let mut server = example("bulk")
        .args(["--listen", "127.0.0.1:0", "--max-streams", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line from the server").unwrap();
    let listening = next();
    let addr = listening
        .strip_prefix("listening on ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line {listening:?}"))
        .to_owned();
    let key_line = next();
    let key = key_line
        .strip_prefix("peer key: ")
        .expect("the server's key")
        .to_owned();
    assert!(next().contains(&format!("--connect {addr} --peer-key {key}")));

    let v = json(
        "bulk",
        &[
            "--connect",
            &addr,
            "--peer-key",
            &key,
            "--streams",
            "3",
            "--max-streams",
            "4",
            "--stream-size",
            "0.25",
        ],
    );
    assert_eq!(v["bytes"].as_u64(), Some(3 << 18));

    // Another key: the handshake fails, with both keys in the message.
    let wrong = "11".repeat(32);
    let output = example("bulk")
        .args([
            "--connect",
            &addr,
            "--peer-key",
            &wrong,
            "--streams",
            "1",
            "--stream-size",
            "0.25",
        ])
        .output()
        .unwrap();
    server.kill().unwrap();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("bulk: error: weft handshake with") && err.contains(&wrong),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn ping_reports_like_ping_in_every_mode() {
    for mode in ["tcp", "tls", "weft", "weft-plaintext"] {
        let v = json("ping", &["--mode", mode, "--count", "20"]);
        assert_eq!(v["mode"], mode);
        assert_eq!(v["count"].as_u64(), Some(20));
        let r = |k: &str| num(&v, &["rtt_us", k]);
        assert!(r("min") > 0.0 && r("min") <= r("p50") && r("p50") <= r("p99") && r("p99") <= r("max"));
        assert!(r("min") <= r("avg") && r("avg") <= r("max") && r("mdev") >= 0.0);
    }
}

#[test]
fn dial_reports_a_histogram_in_every_mode() {
    for mode in ["weft", "tls", "tcp"] {
        let output = example("dial")
            .args(["--mode", mode, "--count", "8"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(text.contains("Count: 8 Min:") && text.contains("inf)"), "{text}");
        let v = json("dial", &["--mode", mode, "--count", "8"]);
        assert_eq!(v["mode"], mode);
        assert_eq!(v["count"].as_u64(), Some(8));
        let d = |k: &str| num(&v, &["dial_us", k]);
        assert!(d("min") > 0.0 && d("min") <= d("p50") && d("p50") <= d("p99") && d("p99") <= d("max"));
    }
}

#[test]
fn handshakes_counts_what_one_acceptor_core_completes_in_every_mode() {
    for mode in ["weft", "weft-0rtt", "tls-mutual", "tls-resumed"] {
        let v = json(
            "handshakes",
            &[
                "--mode",
                mode,
                "--dialers",
                "4",
                "--seconds",
                "0.3",
                "--warm-up",
                "0.3",
            ],
        );
        assert_eq!(v["mode"], mode);
        assert!(num(&v, &["handshakes"]) > 0.0, "{mode}: {v}");
        assert!(num(&v, &["per_core_second"]) > 0.0, "{mode}: {v}");
    }
}

#[test]
fn records_reproduces_both_of_the_go_seeds_results() {
    // A shorter delay than the real run's (2 Mbit/s, 5 ms), to keep it
    // short, on a link slow enough that a 16 KiB record's 65 ms dwarfs the
    // scheduling delays of a loaded machine (CI runs these tools in
    // parallel on 2 cores: at 8 Mbit/s, 16 ms of starvation once made a
    // dynamic first record look like a fixed one). Three trials' medians.
    let v = json(
        "records",
        &[
            "--sizes",
            "1,2",
            "--pairs",
            "1",
            "--trials",
            "3",
            "--link-kbit",
            "2000",
            "--delay-ms",
            "5",
        ],
    );
    let first = &v["first_byte_ms"];
    // Fixed 16 KiB records: 5 ms + 65.5 ms; dynamic: 5 ms + 5.7 ms.
    assert!(num(first, &["fixed", "from_write"]) >= 70.0, "{first}");
    assert!(num(first, &["ratio", "from_write"]) > 2.0, "{first}");
    let table = v["throughput"].as_array().unwrap();
    assert_eq!(table.len(), 2);
    assert_eq!(table[1]["mib"].as_u64(), Some(2));
    assert!(num(&table[1], &["fixed_ms"]) > 0.0 && num(&table[1], &["dynamic_ms"]) > 0.0);
}

#[test]
fn report_draws_the_charts() {
    let out = std::env::temp_dir().join(format!("weft-report-{}", std::process::id()));
    let v = json(
        "report",
        &["--quick", "--reps", "1", "--out", out.to_str().unwrap()],
    );
    for chart in ["throughput", "streams", "dial"] {
        let svg = std::fs::read_to_string(out.join(format!("{chart}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{chart}.svg");
    }
    assert_eq!(v["matrix"].as_array().map(Vec::len), Some(6));
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2);
    assert!(num(&targets[1], &["ratio"]) > 0.0 && num(&targets[1], &["weft_p10_over_p50"]) > 0.0);
    for mode in ["weft", "tls", "tcp"] {
        assert!(num(&v, &["dial", mode, "dial_us", "p50"]) > 0.0);
    }
    assert!(num(&v, &["ping", "weft", "p50_us"]) > 0.0);
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn http_bench_measures_hyper_over_weft_tcp_and_tls() {
    for (mode, protocol) in [("weft", "h2"), ("weft", "h1"), ("tcp", "h2"), ("tls", "h1")] {
        let v = json(
            "http_bench",
            &[
                "--mode",
                mode,
                "--protocol",
                protocol,
                "--concurrency",
                "8",
                "--requests",
                "200",
                "--cold",
                "3",
            ],
        );
        assert_eq!(
            (v["mode"].as_str(), v["protocol"].as_str()),
            (Some(mode), Some(protocol)),
            "{v}"
        );
        assert_eq!(v["requests"].as_u64(), Some(200), "{v}");
        assert_eq!(v["concurrency"].as_u64(), Some(8), "{v}");
        assert!(num(&v, &["rps"]) > 0.0, "{v}");
        assert!(
            num(&v, &["p50_us"]) > 0.0 && num(&v, &["p50_us"]) <= num(&v, &["p99_us"]),
            "{v}"
        );
        assert!(num(&v, &["cold_us"]) > 0.0, "{v}");
    }
}

#[test]
fn rpc_bench_measures_weft_tonic_tarpc_and_raw_tcp() {
    for (mode, kind, suite) in [
        ("weft", "unary", "aes256gcm"),
        ("weft", "server-stream", "aes256gcm"),
        ("weft", "server-stream", "plaintext"),
        ("tonic", "unary", ""),
        ("tarpc", "unary", ""),
        ("tcp", "unary", ""),
    ] {
        let mut args = vec![
            "--mode",
            mode,
            "--kind",
            kind,
            "--concurrency",
            "4",
            "--calls",
            "40",
        ];
        if !suite.is_empty() {
            args.extend(["--suite", suite]);
        }
        let v = json("rpc_bench", &args);
        assert_eq!(
            (v["mode"].as_str(), v["kind"].as_str()),
            (Some(mode), Some(kind)),
            "{v}"
        );
        // The suite is weft's; the other modes say none.
        assert_eq!(v["suite"].as_str().unwrap_or_default(), suite, "{v}");
        assert_eq!(v["calls"].as_u64(), Some(40), "{v}");
        assert!(num(&v, &["rps"]) > 0.0, "{v}");
        assert!(
            num(&v, &["p50_us"]) > 0.0 && num(&v, &["p50_us"]) <= num(&v, &["p99_us"]),
            "{v}"
        );
    }
}

/// Compressed calls, weft and tonic alike, with a message large enough to
/// be compressed; and the modes that cannot compress say so.
#[test]
fn rpc_bench_compresses_weft_and_tonic_alike() {
    // (The codecs are slow in a debug build: small runs.)
    for mode in ["weft", "tonic"] {
        for codec in ["gzip", "zstd"] {
            let args = [
                "--mode",
                mode,
                "--bytes",
                "4096",
                "--compress",
                codec,
                "--concurrency",
                "2",
                "--calls",
                "20",
            ];
            let v = json("rpc_bench", &args);
            assert_eq!(v["compress"].as_str(), Some(codec), "{v}");
            assert_eq!(v["bytes"].as_u64(), Some(4096), "{v}");
            assert!(num(&v, &["rps"]) > 0.0, "{v}");
        }
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_rpc_bench"))
        .args(["--mode", "tarpc", "--compress", "zstd"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--compress measures weft, tonic"));
}

/// Many clients, a connection each: every mode serves them all, and
/// says how many calls the slowest and the median client made.
#[test]
fn rpc_bench_serves_many_clients_a_connection_each() {
    for mode in ["weft", "tonic-tls", "tarpc"] {
        let v = json(
            "rpc_bench",
            &["--mode", mode, "--clients", "20", "--calls", "200"],
        );
        assert_eq!(v["clients"].as_u64(), Some(20), "{v}");
        assert_eq!(v["concurrency"].as_u64(), Some(20), "{v}");
        assert!(num(&v, &["rps"]) > 0.0, "{v}");
        let (min, median) = (
            num(&v, &["client_calls", "min"]),
            num(&v, &["client_calls", "median"]),
        );
        assert!(min <= median && median > 0.0, "{v}");
    }
}

/// What an idle connection costs a server: counted for weft and for TLS
/// with the client in a process of its own.
#[test]
fn idle_counts_the_servers_memory_per_connection() {
    for mode in ["weft", "tls"] {
        let v = json("idle", &["--mode", mode, "--connections", "50"]);
        assert_eq!(v["mode"].as_str(), Some(mode), "{v}");
        assert_eq!(v["connections"].as_u64(), Some(50), "{v}");
        // An idle connection costs the server something, and not
        // megabytes.
        let heap = num(&v, &["heap_per_connection"]);
        assert!(heap > 1_000.0 && heap < 1_000_000.0, "{v}");
    }
}

/// Cold calls, a connection each, behind the delaying proxy: the 0-RTT
/// call takes one round trip fewer than the 1-RTT one (with 200 ms each
/// way, 400 ms less; the debug build's crypto, on a machine busy with the
/// other tests, may take up to 150 ms of it back). A relative figure from
/// one run, with the delay large against the CPU's share.
#[test]
fn rpc_bench_cold_calls_take_a_round_trip_less_with_early_data() {
    let p50 = |mode: &str| {
        let args = [
            "--cold",
            "--mode",
            mode,
            "--concurrency",
            "1",
            "--calls",
            "2",
            "--delay-ms",
            "200",
        ];
        let v = json("rpc_bench", &args);
        assert_eq!(
            (v["cold"].as_bool(), v["delay_ms"].as_u64()),
            (Some(true), Some(200)),
            "{v}"
        );
        num(&v, &["p50_us"]) / 1000.0
    };
    let (one_rtt, zero_rtt) = (p50("weft"), p50("weft-0rtt"));
    // TCP's round trip, the Setups', the call's: at least 1,200 ms; 0-RTT
    // at least 800.
    assert!(
        one_rtt >= 1200.0 && zero_rtt >= 800.0,
        "{one_rtt} ms, {zero_rtt} ms"
    );
    assert!(
        zero_rtt < one_rtt - 250.0,
        "0-RTT {zero_rtt} ms against 1-RTT {one_rtt} ms: not a round trip less"
    );
}
