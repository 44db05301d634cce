//! tonic over weft: a tonic service (tonic-health's, here; any generated
//! by tonic-build is the same) served by `weft::http::serve`, and tonic's
//! `Channel` dialing through `weft::http::Connector`. The calls are gRPC
//! as tonic speaks it, h2 on one weft stream; the connections under them
//! are weft's, encrypted and pinned to the server's key.
//!
//! cargo run --example tonic

use std::time::Duration;

use tokio::net::TcpListener;
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
use weft::{
    http::Connector,
    pool::{Endpoint, Pool},
    Identity,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server: tonic's services as a tower service of HTTP requests,
    // under weft's HTTP server, which speaks h2 on each stream that
    // begins with h2's preface.
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("example.Greeter", tonic_health::ServingStatus::Serving)
        .await;
    let routes = tonic::service::Routes::new(health);
    let identity = Identity::generate();
    let key = identity.peer_id();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        weft::http::serve(listener, weft::acceptor(identity), routes).with_graceful_shutdown(async {
            let _ = stopped.await;
        }),
    );
    println!("server   {addr}, key {key}");

    // The client: tonic's Channel, whose connections are streams from a
    // weft pool. `http://greeter` is routed to the server, pinned to its
    // key; tonic speaks h2, so the connector is asked for h2 too.
    let pool = Pool::builder().build(weft::dialer(Identity::generate()));
    let connector = Connector::new(pool.clone())
        .http2()
        .route("greeter", Endpoint::new(addr).expect_peer(key));
    let channel = tonic::transport::Endpoint::from_static("http://greeter")
        .connect_with_connector(connector)
        .await?;
    let mut health = HealthClient::new(channel);

    let request = HealthCheckRequest {
        service: "example.Greeter".into(),
    };
    let status = health.check(request.clone()).await?.into_inner().status();
    println!("Check    example.Greeter: {status:?}");
    let mut watch = health.watch(request).await?.into_inner();
    let first = watch.message().await?.map(|reply| reply.status());
    println!("Watch    example.Greeter: {first:?}");
    reporter
        .set_service_status("example.Greeter", tonic_health::ServingStatus::NotServing)
        .await;
    let then = watch.message().await?.map(|reply| reply.status());
    println!("Watch    example.Greeter: then {then:?}");
    let stats = pool.stats();
    println!(
        "pool     {} dial(s), {} stream(s) opened",
        stats.dials, stats.streams_opened
    );

    drop((watch, health));
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), server).await???;
    Ok(())
}
