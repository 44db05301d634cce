//! weft's measuring tools (the binaries of this crate) and what they
//! share: the stacks and their baselines, the
//! workloads (so `report` can run them in-process), statistics, and errors
//! that end a run with a message instead of a panic.

pub mod bulk;
pub mod counting;
pub mod delay;
pub mod dial;
pub mod echo;
pub mod http;
pub mod ping;
pub mod stacks;
pub mod stats;
pub mod tcp_echo;

use std::{
    fmt::{self, Display},
    sync::atomic::{AtomicBool, Ordering},
};

/// Why a run ended early: what was being done, and what went wrong.
///
/// It is deliberately not `std::error::Error`, so that `?` converts any
/// error into it.
#[derive(Debug)]
pub struct Failure(String);

impl Failure {
    pub fn new(message: impl Display) -> Self {
        Self(message.to_string())
    }
}

impl Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(error: E) -> Self {
        Self(chain(&error))
    }
}

/// An error and its sources, joined by ": ", without repeating a source
/// that the message already includes.
fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

pub type Result<T, E = Failure> = std::result::Result<T, E>;

/// Adds what was being done to an error.
pub trait Context<T> {
    fn context(self, what: impl Display) -> Result<T>;
}

impl<T, E: std::error::Error> Context<T> for Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|error| Failure(format!("{what}: {}", chain(&error))))
    }
}

impl<T> Context<T> for Result<T, Failure> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|failure| Failure(format!("{what}: {failure}")))
    }
}

/// Runs an example's `main`: on failure, prints the message to stderr and
/// exits with status 1.
pub fn exit_on_failure(example: &str, run: impl FnOnce() -> Result<()>) {
    if let Err(failure) = run() {
        eprintln!("{example}: error: {failure}");
        std::process::exit(1);
    }
}

static PIN: AtomicBool = AtomicBool::new(false);

/// With `on`, the runtimes made from now on pin the client's thread to core
/// 0 and the server's threads to core 1, as two processes on two cores
/// would run. Left to the scheduler, Linux often queues the woken end
/// behind the busy one on the same core (BENCHMARKS.md).
pub fn pin_threads(on: bool) {
    PIN.store(on, Ordering::Relaxed);
}

fn pin_to(core: usize) {
    if PIN.load(Ordering::Relaxed) {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
}

/// The client's runtime: the calling thread.
///
/// The server runs on a runtime of its own ([`server_runtime`]), so each end
/// has its own thread, as two processes would. With both ends in one
/// multi-threaded runtime, a task woken on a busy worker waits in that
/// worker's LIFO slot where it cannot be stolen, and one end's work delays
/// the other's in a way that separate endpoints never see.
pub fn client_runtime() -> Result<tokio::runtime::Runtime> {
    pin_to(0);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the client's runtime")
}

/// The server's runtime: one worker thread.
pub fn server_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("server")
        .on_thread_start(|| pin_to(1))
        .enable_all()
        .build()
        .context("starting the server's runtime")
}

/// Signals a server to stop (`stop`), and sees that its task (`server`,
/// on `runtime`) ends within 5 s, saying on stderr, as `example`, if it
/// failed or did not end.
pub fn stop_server<E: Display>(
    example: &str,
    runtime: &tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::result::Result<(), E>>,
) {
    let _ = stop.send(());
    let limit = std::time::Duration::from_secs(5);
    match runtime.block_on(async { tokio::time::timeout(limit, server).await }) {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => eprintln!("{example}: the server failed: {err}"),
        Ok(Err(err)) => eprintln!("{example}: the server's task: {err}"),
        Err(_) => eprintln!("{example}: the server did not end within 5 s of the shutdown signal"),
    }
}

/// Prints `value` as the one JSON line that ends the output.
pub fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

/// This process's CPU seconds so far, user and system, all threads (from
/// /proc/self/stat, in clock ticks of 10 ms; 0 where there is no /proc).
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime, fields 14 and 15 of the file.
    (ticks(11) + ticks(12)) / 100.0
}
