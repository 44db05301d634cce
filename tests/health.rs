//! The health service (`weft::rpc::health`) served by an RPC server over
//! loopback: what `Check` and `Watch` answer while it serves, that the
//! shutdown turns it NOT_SERVING before the drain and ends every watch
//! (so the drain does not wait for them), and the plain HTTP answer for a
//! probe.

#[path = "support/echo.rs"]
#[allow(unused_imports)]
mod echo;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::{net::TcpListener, sync::oneshot};
use tower::ServiceExt;
use weft::{
    pool::{Endpoint, Pool},
    rpc::{
        client::Client,
        health::{
            proto::{health_client::HealthClient, HealthCheckRequest},
            Health, ServingStatus,
        },
        server::Server,
        Code,
    },
    Identity,
};

fn asking(service: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: service.into(),
    }
}

#[tokio::test]
async fn health_reports_serving_then_not_serving_from_the_shutdown_and_the_drain_does_not_wait_for_watches() {
    let identity = Identity::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = Endpoint::new(listener.local_addr().unwrap()).expect_peer(identity.peer_id());
    let health = Health::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        Server::builder()
            .add_service(echo::Say::new(|_| Ok("hi".into())).server())
            .health(health.clone())
            .serve_with_shutdown(listener, weft::acceptor(identity), async {
                let _ = stopped.await;
            }),
    );

    let pool = Pool::builder().build(weft::dialer(Identity::generate()));
    let mut client = HealthClient::new(Client::new(pool, endpoint));
    for service in ["", "weft.examples.Echo", "grpc.health.v1.Health"] {
        let reply = client.check(asking(service)).await.unwrap().into_inner();
        assert_eq!(reply.status(), ServingStatus::Serving, "{service:?}");
    }
    let unknown = client.check(asking("no.Such")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);

    // A load balancer's watch of the server, and of a service the
    // application turns off and on.
    let mut server_watch = client.watch(asking("")).await.unwrap().into_inner();
    let mut echo_watch = client
        .watch(asking("weft.examples.Echo"))
        .await
        .unwrap()
        .into_inner();
    let next = async |watch: &mut weft::rpc::Streaming<_>| -> Option<ServingStatus> {
        let reply: Option<Result<weft::rpc::health::proto::HealthCheckResponse, _>> =
            tokio::time::timeout(Duration::from_secs(5), watch.next())
                .await
                .expect("an answer in time");
        reply.map(|reply| reply.unwrap().status())
    };
    assert_eq!(next(&mut server_watch).await, Some(ServingStatus::Serving));
    assert_eq!(next(&mut echo_watch).await, Some(ServingStatus::Serving));
    health.set_not_serving("weft.examples.Echo");
    assert_eq!(next(&mut echo_watch).await, Some(ServingStatus::NotServing));
    health.set_serving("weft.examples.Echo");
    assert_eq!(next(&mut echo_watch).await, Some(ServingStatus::Serving));

    // The shutdown: both watches hear NOT_SERVING and end, and the drain
    // (whose timeout is 30 s) does not wait for them.
    let probe = health.http();
    let began = Instant::now();
    stop.send(()).unwrap();
    assert_eq!(next(&mut server_watch).await, Some(ServingStatus::NotServing));
    assert_eq!(next(&mut echo_watch).await, Some(ServingStatus::NotServing));
    assert_eq!(next(&mut server_watch).await, None);
    assert_eq!(next(&mut echo_watch).await, None);
    drop((server_watch, echo_watch, client));
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the drain ends without waiting out its timeout")
        .unwrap()
        .unwrap();
    assert!(began.elapsed() < Duration::from_secs(10));
    let answer = probe.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(answer.status(), http::StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn the_probe_answers_200_while_the_server_serves() {
    let health = Health::new();
    let probe = health.http();
    let before = probe.clone().oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(
        before.status(),
        http::StatusCode::SERVICE_UNAVAILABLE,
        "not started"
    );
    health.set_serving("");
    let serving = probe.oneshot(http::Request::new(())).await.unwrap();
    assert_eq!(serving.status(), http::StatusCode::OK);
}
