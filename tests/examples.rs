//! The teaching examples, each run as a user would run it (tiny
//! workloads), so that none of them can rot, and what each prints is
//! checked.
//!
//! `cargo test` builds the examples before it runs the tests, into
//! `target/<profile>/examples`, beside the test binary's directory.

use std::process::{Command, Output};

fn example(name: &str) -> Command {
    let mut dir = std::env::current_exe().expect("test binary path");
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "{} is not built", path.display());
    Command::new(path)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs an example to success; its standard output.
fn run(name: &str, args: &[&str]) -> String {
    let output = example(name).args(args).output().expect("run the example");
    assert!(
        output.status.success(),
        "{name} {args:?} failed: {}",
        stderr(&output)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[test]
fn hyper_client_against_its_own_server_agrees_h2_speaks_http1_on_streams_and_pins_the_key() {
    let text = run("hyper_client", &["--count", "3"]);
    let pinned = text
        .lines()
        .next()
        .and_then(|line| line.split("pinned to ").nth(1))
        .unwrap_or_else(|| panic!("no pinned key in: {text}"))
        .to_owned();
    let answer = format!("200 h2 (HTTP/1.1) peer {pinned} body \"hello, ");
    assert_eq!(text.matches(&answer).count(), 3, "{text}");
    assert!(text.contains("pool     1 dial(s)"), "{text}");
    let text = run("hyper_client", &["--count", "2", "--h2"]);
    assert_eq!(
        text.matches("200 h2 (HTTP/2.0) peer ").count(),
        2,
        "asked for h2: {text}"
    );
}

#[test]
fn balance_removes_a_server_mid_run_without_a_failed_call() {
    let text = run("balance", &["--calls", "300", "--concurrency", "16"]);
    let counts = |label: &str| -> Vec<usize> {
        let line = text
            .lines()
            .find_map(|line| line.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} in: {text}"));
        let list = line.trim().trim_start_matches('[').trim_end_matches(']');
        list.split(", ").map(|n| n.parse().expect("a count")).collect()
    };
    let (before, after) = (
        counts("calls per server, issued before the removal:"),
        counts("calls per server, issued after the removal:"),
    );
    assert_eq!(before.iter().chain(&after).sum::<usize>(), 300, "{text}");
    assert_eq!(after[2], 0, "nothing reaches the removed server: {text}");
    assert!(
        (0..3).all(|i| before[i] + after[i] > 0),
        "every server served: {text}"
    );
    assert!(text.contains("\nfailed 0\n"), "{text}");
}

#[test]
fn rpc_client_makes_every_kind_of_call_against_its_own_server() {
    let text = run("rpc_client", &[]);
    for line in [
        "Say      \"hi\"\nSay      \"hi\"\n",
        "Expand   [\"hi 0\", \"hi 1\", \"hi 2\"]\n",
        "Collect  \"abc\"\n",
        "Chat     [\"re: one\", \"re: two\", \"re: three\"]\n",
        "pool     1 dial(s), 5 stream(s) opened",
    ] {
        assert!(text.contains(line), "{line:?} missing from: {text}");
    }
}

#[test]
fn rpc_retry_calls_again_until_the_late_server_answers() {
    let text = run("rpc_retry", &[]);
    assert!(text.contains("retry    weft.examples.Echo/Say failed"), "{text}");
    assert!(
        text.contains("Say      \"retried\", once the server was up"),
        "{text}"
    );
}

#[test]
fn discovery_can_be_tested_against_a_dns_server_in_process() {
    let output = example("discover_zone").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("before: 127.0.0.2:7000, 127.0.0.3:7000\nafter: 127.0.0.3:7000, 127.0.0.4:7000"),
        "{text}"
    );
}

#[test]
fn echo_negotiates_echoes_and_multiplexes() {
    let text = run("echo", &[]);
    for line in ["version  3", "suite    aes256gcm", "echo     "] {
        assert!(text.contains(line), "{line:?} missing from: {text}");
    }
}

#[test]
fn metrics_prints_the_calls_in_prometheus_text() {
    let text = run("metrics", &["--calls", "20"]);
    assert!(text.contains("# TYPE weft_rpc_"), "{text}");
    assert!(text.contains("rpc_method=\"weft.examples.Echo/Say\""), "{text}");
}

/// A server example started as its own process: its first lines name its
/// address and its key, and it runs until killed.
struct Server(std::process::Child);

impl Server {
    fn start(name: &str) -> (Self, String, String) {
        use std::io::{BufRead, BufReader};
        let mut child = example(name)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut next = || lines.next().expect("a line").expect("UTF-8");
        let listening = next();
        let addr = listening["listening on ".len()..]
            .split(' ')
            .next()
            .expect("an address")
            .to_owned();
        let key = next()["peer key  ".len()..].to_owned();
        // What it prints later is read too: a closed pipe would end it.
        std::thread::spawn(move || lines.for_each(drop));
        (Self(child), addr, key)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn rpc_client_calls_the_rpc_server_it_is_pointed_at() {
    let (_server, addr, key) = Server::start("rpc_server");
    let text = run("rpc_client", &["--connect", &addr, "--peer-key", &key]);
    assert!(
        text.contains(&format!("server   {addr} (expecting peer {key})")),
        "{text}"
    );
    assert!(text.contains("Collect  \"abc\""), "{text}");
}

#[test]
fn hyper_client_requests_from_the_hyper_server_it_is_pointed_at() {
    let (_server, addr, key) = Server::start("hyper_server");
    let text = run(
        "hyper_client",
        &["--connect", &addr, "--peer-key", &key, "--count", "2"],
    );
    let answer = format!("200 h2 (HTTP/1.1) peer {key} body");
    assert_eq!(text.matches(&answer).count(), 2, "{text}");
}

#[test]
fn admin_serves_the_live_view_while_its_load_runs() {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut child = example("admin")
        .args(["--listen", "127.0.0.1:0", "--seconds", "3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start admin");
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut first)
        .expect("its address");
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut http = std::net::TcpStream::connect(&addr).expect("connect to the view");
    write!(
        http,
        "GET /snapshot.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).expect("the view answers");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"connections\""), "{answer}");
    assert!(child.wait().expect("admin ends").success());
}

#[test]
fn tonic_calls_over_weft_both_ways() {
    let text = run("tonic", &[]);
    for line in [
        "Check    example.Greeter: Serving\n",
        "Watch    example.Greeter: Some(Serving)\n",
        "Watch    example.Greeter: then Some(NotServing)\n",
        "pool     1 dial(s), 1 stream(s) opened\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from: {text}");
    }
}
