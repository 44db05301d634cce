//! The live view under load: three echo servers in process, a balanced
//! client calling them (`rpc::client::Balanced` over their three
//! endpoints), and the view (`weft::admin`) served over plain HTTP.
//!
//! cargo run --example admin                          # http://127.0.0.1:9000/ for 60 s
//! cargo run --example admin -- --listen 127.0.0.1:9001 --seconds 0   # until interrupted
//!
//! Open the page in a browser: connections (both ends of each, in one
//! process), the pool's endpoints and the calls per method refresh every
//! second.

#[path = "rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::{net::SocketAddr, time::Duration};

use clap::Parser;
use rpc_server::echo::{echo_client::EchoClient, EchoRequest, ExpandRequest};
use tokio::net::TcpListener;
use weft::{
    admin::Admin,
    discover::Endpoints,
    pool::{Endpoint, Pool},
    rpc::client::{Balanced, Client},
    Identity,
};

#[derive(Debug, Parser)]
#[command(about = "weft's live view, under load")]
struct Args {
    /// Where to serve the view (plain HTTP).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// How long to run (0: until interrupted).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Callers calling at once.
    #[arg(long, default_value_t = 8)]
    callers: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // The view: what it is handed (as an observer) it shows.
    let admin = Admin::new();

    let mut endpoints = Vec::new();
    for _ in 0..3 {
        let identity = Identity::generate();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        endpoints.push(Endpoint::new(listener.local_addr()?).expect_peer(identity.peer_id()));
        let serving = rpc_server::run_observed(listener, identity, admin.clone(), std::future::pending());
        tokio::spawn(serving);
    }
    let dialer = weft::dialer(Identity::generate()).observer(admin.clone());
    let pool = Pool::builder().observer(admin.clone()).build(dialer);
    let calls = admin.clone();
    let client = Balanced::with_clients(Endpoints::fixed(endpoints), move |endpoint| {
        Client::new(pool.clone(), endpoint.clone()).observer(calls.clone())
    });
    for caller in 0..args.callers {
        let mut echo = EchoClient::new(client.clone());
        tokio::spawn(async move {
            for n in 0u64.. {
                let text = format!("caller {caller}, call {n}");
                if n % 10 == 9 {
                    // A streaming call now and then.
                    let request = ExpandRequest { text, count: 5 };
                    if let Ok(replies) = echo.expand(request).await {
                        let mut replies = replies.into_inner();
                        while let Ok(Some(_)) = replies.message().await {}
                    }
                } else {
                    let _ = echo
                        .say(EchoRequest {
                            text,
                            ..EchoRequest::default()
                        })
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
    }

    let app = axum::Router::new().fallback_service(admin.service());
    let listener = TcpListener::bind(args.listen).await?;
    println!(
        "the live view: http://{}/ (its data at /snapshot.json)",
        listener.local_addr()?
    );
    let serving = axum::serve(listener, app);
    if args.seconds == 0 {
        serving.await?;
    } else if let Ok(served) = tokio::time::timeout(Duration::from_secs(args.seconds), serving).await {
        served?;
    }
    Ok(())
}
