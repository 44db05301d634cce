//! `--clients N`: N clients, each with a connection of its own and one
//! unary call in flight, as a server meets a fleet of callers rather than
//! one busy caller: calls per second, each call's time, and how evenly the
//! server served the clients (every client's count of calls).

use std::{
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::Instant,
};

use tokio::task::JoinSet;

use weft_bench::{stats::Sample, Context, Failure, Result};

use crate::{Args, Caller};

/// Calls each client makes to warm up, once all are connected.
const WARM_UP_PER_CLIENT: usize = 10;

/// What the clients did over the measured calls.
pub struct Outcome {
    pub rps: f64,
    pub latencies: Sample,
    /// Calls each client made.
    pub per_client: Vec<usize>,
    /// With `--dialers`: cold calls (a handshake each) the server
    /// completed a second meanwhile.
    pub handshakes_per_s: Option<f64>,
}

impl Outcome {
    /// The fewest calls a client made, and the median client's: alike if
    /// every client was served alike, the first near 0 if one starved.
    pub fn slowest_and_median(&self) -> (usize, usize) {
        let mut counts = self.per_client.clone();
        counts.sort_unstable();
        (counts[0], counts[counts.len() / 2])
    }
}

/// Connects `n` clients with `connect`, one after another, each making its
/// first call (as a fleet's clients arrive, and so that the connections'
/// handshakes are not in the measured time); warms up; then `--calls`
/// calls, each client calling as soon as its last call is answered. With
/// `cold` (a caller whose every call dials a connection of its own),
/// `--dialers` tasks make cold calls over and over while the clients'
/// calls are measured: the handshakes a server completes under load.
pub async fn bench<C, F, Fut, D>(n: usize, connect: F, cold: Option<D>, args: &Args) -> Result<Outcome>
where
    C: Caller,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<C>>,
    D: Caller,
{
    let payload = args.payload();
    let mut callers = Vec::with_capacity(n);
    for i in 0..n {
        let mut caller = connect().await.context(format_args!("connecting client {i}"))?;
        caller
            .say(payload.clone())
            .await
            .context(format_args!("client {i}'s first call"))?;
        callers.push(caller);
    }
    run(&callers, &payload, n * WARM_UP_PER_CLIENT)
        .await
        .context("warming up")?;
    let total = args.calls();
    let stop = Arc::new(AtomicBool::new(false));
    let dialed = Arc::new(AtomicUsize::new(0));
    let mut dialers = JoinSet::new();
    for _ in 0..cold.as_ref().map_or(0, |_| args.dialers) {
        let (mut cold, stop, dialed, payload) = (
            cold.clone().expect("a cold caller"),
            stop.clone(),
            dialed.clone(),
            payload.clone(),
        );
        dialers.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                cold.say(payload.clone()).await.context("a cold call")?;
                dialed.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, Failure>(())
        });
    }
    let began = Instant::now();
    let (latencies, per_client) = run(&callers, &payload, total).await?;
    let seconds = began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let handshakes = dialed.load(Ordering::Relaxed);
    while let Some(done) = dialers.join_next().await {
        done.context("a dialer's task")??;
    }
    Ok(Outcome {
        rps: total as f64 / seconds,
        latencies: Sample::new(latencies),
        per_client,
        handshakes_per_s: cold.map(|_| handshakes as f64 / seconds),
    })
}

/// `total` unary calls from all the callers, one in flight each: every
/// call's time in µs, and each caller's count.
async fn run<C: Caller>(callers: &[C], payload: &str, total: usize) -> Result<(Vec<f64>, Vec<usize>)> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for (i, caller) in callers.iter().enumerate() {
        let (mut caller, next, payload) = (caller.clone(), next.clone(), payload.to_owned());
        tasks.spawn(async move {
            let mut times = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let began = Instant::now();
                caller
                    .say(payload.clone())
                    .await
                    .context(format_args!("client {i}"))?;
                times.push(began.elapsed().as_secs_f64() * 1e6);
            }
            Ok::<_, Failure>((i, times))
        });
    }
    let mut all = Vec::with_capacity(total);
    let mut per_client = vec![0; callers.len()];
    while let Some(done) = tasks.join_next().await {
        let (i, times) = done.context("a client's task")??;
        per_client[i] = times.len();
        all.extend(times);
    }
    Ok((all, per_client))
}
