//! Spreads calls over three in-process weft servers with tower's
//! power-of-two-choices balancer (`tower::balance::p2c::Balance`), fed by a
//! `tower::discover` stream of `Change<usize, Service>`. Every service is
//! the one shared `weft::pool::Pool` bound to one endpoint (pinned to that
//! server's key), made a whole call (open a stream, send a small request,
//! read the reply: the server's name) with `ServiceExt::and_then`, and
//! weighed by `tower::load::PendingRequests`.
//!
//! Halfway through, the third server is removed from the discover stream
//! (`Change::Remove`) and, once every call sent its way has its stream
//! open, shut down gracefully: a go-away on each of its
//! connections, calls in flight there finish, the connections close. The
//! run counts calls per server, before and after the removal, and failed
//! calls (there must be none).
//!
//! cargo run --example balance -- [--calls 4000] [--concurrency 64]
//!
//! The exit status is 1 if any call failed.

mod server;

use std::{
    convert::Infallible,
    io,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use clap::Parser;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::{mpsc, Semaphore},
    task::JoinSet,
};
use tower::{
    balance::p2c::Balance,
    discover::Change,
    load::{CompleteOnResponse, PendingRequests},
    Service, ServiceExt,
};
use weft::{
    pool::{Pool, PooledStream},
    Identity,
};

const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
/// The server taken out halfway.
const REMOVED: usize = 2;

#[derive(Debug, Parser)]
#[command(about = "p2c balancing over three weft servers, one removed mid-run")]
struct Args {
    /// Calls in all.
    #[arg(long, default_value_t = 4000)]
    calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
}

/// Calls answered by each server, issued before the removal (0) and after
/// it (1); calls the removed server answered during its shutdown; failed
/// calls.
#[derive(Default)]
struct Tally {
    counts: [[usize; 3]; 2],
    drained: usize,
    failed: usize,
}

impl Tally {
    fn add(&mut self, (phase, stopping, result): (usize, bool, Result<String, tower::BoxError>)) {
        match result.map(|name| NAMES.iter().position(|n| *n == name)) {
            Ok(Some(i)) => {
                self.counts[phase][i] += 1;
                self.drained += usize::from(i == REMOVED && stopping);
            }
            Ok(None) => self.failed += 1,
            Err(err) => {
                eprintln!("call failed: {err}");
                self.failed += 1;
            }
        }
    }
}

/// One call on a pooled stream: send a small request, read the reply.
async fn call(mut stream: PooledStream) -> io::Result<String> {
    stream.write_all(b"who are you?").await?;
    stream.shutdown().await?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await?;
    Ok(reply)
}

#[tokio::main]
async fn main() -> Result<(), tower::BoxError> {
    let args = Args::parse();
    let mut servers = Vec::new();
    for name in NAMES {
        servers.push(server::start(name).await?);
    }

    // One pool for all three servers.
    let pool = Pool::builder().build(weft::dialer(Identity::generate()));

    // The discover stream: each server's service inserted, keyed by index.
    let (changes, mut discovered) = mpsc::unbounded_channel();
    // Calls sent to the server to be removed whose stream is not open yet
    // (still in the pool's checkout): it is shut down only once there are
    // none. Such a call would find only a connection that has gone away,
    // and dial a listener that is gone.
    let opening = Arc::new(AtomicUsize::new(0));
    for (i, server) in servers.iter().enumerate() {
        let endpoint = server.endpoint.clone();
        let (sent, opened) = (opening.clone(), opening.clone());
        let service = pool
            .clone()
            .map_request(move |()| {
                if i == REMOVED {
                    sent.fetch_add(1, Ordering::AcqRel);
                }
                endpoint.clone()
            })
            .and_then(move |stream| {
                if i == REMOVED {
                    opened.fetch_sub(1, Ordering::AcqRel);
                }
                call(stream)
            });
        let _ = changes.send(Ok::<_, Infallible>(Change::Insert(
            i,
            PendingRequests::new(service, CompleteOnResponse::default()),
        )));
    }
    let discover = futures_util::stream::poll_fn(move |cx| discovered.poll_recv(cx));
    let mut balance = Balance::new(discover);

    let in_flight = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let stopping = Arc::new(AtomicBool::new(false));
    let mut calls = JoinSet::new();
    let mut tally = Tally::default();
    let mut shutdown = None;
    for n in 0..args.calls {
        if n == args.calls / 2 {
            // Out of discovery first (the next poll_ready evicts it)...
            let _ = changes.send(Ok(Change::Remove(REMOVED)));
            balance.ready().await?;
            println!("removing {} after {n} calls", NAMES[REMOVED]);
            // ...then a graceful shutdown of the server itself.
            let server = servers.remove(REMOVED);
            let stopping = stopping.clone();
            let opening = opening.clone();
            shutdown = Some(tokio::spawn(async move {
                // Once every call sent its way has its stream open (at
                // most a second): calls still in the pipe are promised by
                // the go-away's first step, and served.
                let waiting = Instant::now();
                while opening.load(Ordering::Acquire) > 0 && waiting.elapsed() < Duration::from_secs(1) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                stopping.store(true, Ordering::Release);
                let _ = server.stop.send(());
                server.task.await?;
                Ok::<_, tokio::task::JoinError>(server.endpoint)
            }));
        }
        let permit = in_flight.clone().acquire_owned().await?;
        let phase = usize::from(shutdown.is_some());
        let reply = balance.ready().await?.call(());
        let stopping = stopping.clone();
        calls.spawn(async move {
            let result = reply.await;
            drop(permit);
            (phase, stopping.load(Ordering::Acquire), result)
        });
        while let Some(done) = calls.try_join_next() {
            tally.add(done?);
        }
    }
    while let Some(done) = calls.join_next().await {
        tally.add(done?);
    }

    if let Some(shutdown) = shutdown {
        let endpoint = tokio::time::timeout(Duration::from_secs(5), shutdown).await???;
        let open = pool
            .connections_to(&endpoint)
            .iter()
            .filter(|c| !c.is_closed())
            .count();
        println!(
            "removed {}: {} call(s) in flight there finished during its shutdown, {open} connection(s) to it left open",
            NAMES[REMOVED], tally.drained,
        );
    }
    println!(
        "calls per server, issued before the removal: {:?}",
        tally.counts[0]
    );
    println!(
        "calls per server, issued after the removal:  {:?}",
        tally.counts[1]
    );
    println!("failed {}", tally.failed);
    if tally.failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
