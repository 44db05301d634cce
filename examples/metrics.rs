//! weft's metrics in Prometheus's text format: metrics-exporter-prometheus
//! installed as the `metrics` recorder, the echo server and a client in
//! process making calls, and the metrics printed (or served for a
//! Prometheus to scrape).
//!
//! cargo run --example metrics                          # print them once
//! cargo run --example metrics -- --serve 127.0.0.1:9000  # and serve /metrics
//!
//! The names and labels are listed in `weft::metrics`.

#[path = "rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::{net::SocketAddr, time::Duration};

use axum::{routing::get, Router};
use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use metrics_util::MetricKindMask;
use rpc_server::echo::{echo_client::EchoClient, EchoRequest};
use tokio::net::TcpListener;
use weft::{
    metrics::Metrics,
    pool::{Endpoint, Pool},
    rpc::client::Client,
    Identity,
};

#[derive(Debug, Parser)]
#[command(about = "weft's metrics in Prometheus's text format")]
struct Args {
    /// Calls to make.
    #[arg(long, default_value_t = 1000)]
    calls: usize,
    /// Serve the metrics at http://ADDR/metrics (plain HTTP, for a
    /// Prometheus server), calling on, until interrupted.
    #[arg(long)]
    serve: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // First the recorder, then what reports to it.
    // Durations as histograms with buckets (they add up across
    // processes); counters and histograms nothing has touched for 5
    // minutes dropped (a pool's endpoints come and go with discovery).
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("duration".into()),
            weft::metrics::DURATION_BUCKETS,
        )?
        .idle_timeout(
            MetricKindMask::COUNTER | MetricKindMask::HISTOGRAM,
            Some(Duration::from_secs(300)),
        )
        .install_recorder()?;

    let server_identity = Identity::generate();
    let server_key = server_identity.peer_id();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // The server, the pool, its connections and the client each report
    // what they are handed the metrics observer for.
    let metrics = Metrics::new();
    tokio::spawn(rpc_server::run_observed(
        listener,
        server_identity,
        metrics,
        std::future::pending(),
    ));
    let dialer = weft::dialer(Identity::generate()).observer(metrics);
    let pool = Pool::builder().observer(metrics).build(dialer);
    let client = Client::new(pool, Endpoint::new(addr).expect_peer(server_key)).observer(metrics);

    let call = move |n: usize| {
        let mut echo = EchoClient::new(client.clone());
        async move {
            let request = EchoRequest {
                text: format!("call {n}"),
                ..EchoRequest::default()
            };
            echo.say(request).await
        }
    };
    for n in 0..args.calls {
        call(n).await?;
    }
    let Some(serve) = args.serve else {
        // (Connections report their traffic once a second while it moves.)
        tokio::time::sleep(Duration::from_millis(1100)).await;
        call(args.calls).await?;
        print!("{}", prometheus.render());
        return Ok(());
    };
    tokio::spawn(async move {
        for n in args.calls.. {
            let _ = call(n).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let app: Router = Router::new().route("/metrics", get(move || std::future::ready(prometheus.render())));
    println!("serving http://{serve}/metrics");
    axum::serve(TcpListener::bind(serve).await?, app).await?;
    Ok(())
}
