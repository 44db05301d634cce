//! The health service's answers, called directly: no server, no sockets.

use futures_util::{FutureExt, StreamExt};

use super::{
    proto::{health_server::Health as _, HealthCheckRequest},
    Health, ServingStatus,
};
use crate::rpc::{Code, Request};

fn asking(service: &str) -> Request<HealthCheckRequest> {
    Request::new(HealthCheckRequest {
        service: service.into(),
    })
}

async fn check(health: &Health, service: &str) -> Result<ServingStatus, Code> {
    match health.check(asking(service)).await {
        Ok(reply) => Ok(reply.into_inner().status()),
        Err(status) => Err(status.code()),
    }
}

#[tokio::test]
async fn check_answers_what_was_set_and_not_found_for_a_service_never_set() {
    let health = Health::new();
    assert_eq!(check(&health, "a.A").await, Err(Code::NotFound));
    health.set_serving("a.A");
    assert_eq!(check(&health, "a.A").await, Ok(ServingStatus::Serving));
    health.set_not_serving("a.A");
    assert_eq!(check(&health, "a.A").await, Ok(ServingStatus::NotServing));
    assert_eq!(
        check(&health, "").await,
        Err(Code::NotFound),
        "the server was never set"
    );
}

#[tokio::test]
async fn watch_sends_the_status_then_each_change_and_ends_after_the_shutdown() {
    let health = Health::new();
    let mut watch = health.watch(asking("a.A")).await.unwrap().into_inner();
    let mut next = || {
        watch
            .next()
            .now_or_never()
            .map(|reply| reply.map(|r| r.unwrap().status()))
    };
    assert_eq!(next(), Some(Some(ServingStatus::ServiceUnknown)));
    assert_eq!(next(), None, "nothing changed yet");
    health.set_serving("a.A");
    assert_eq!(next(), Some(Some(ServingStatus::Serving)));
    health.set_serving("a.A");
    health.set_serving("b.B");
    assert_eq!(next(), None, "neither its status changed nor the server stopped");
    health.shut_down();
    assert_eq!(next(), Some(Some(ServingStatus::NotServing)));
    assert_eq!(next(), Some(None), "the watch ends once the shutdown is told");
}

#[tokio::test]
async fn start_marks_the_server_and_its_services_serving_but_keeps_what_was_set() {
    let health = Health::new();
    health.set_not_serving("b.B");
    health.start(["a.A", "b.B"]);
    assert_eq!(health.status(""), Some(ServingStatus::Serving));
    assert_eq!(health.status("a.A"), Some(ServingStatus::Serving));
    assert_eq!(health.status("b.B"), Some(ServingStatus::NotServing));
}

#[tokio::test]
async fn after_the_shutdown_everything_is_not_serving_for_good() {
    let health = Health::new();
    health.start(["a.A"]);
    health.shut_down();
    health.set_serving("a.A");
    health.set_serving("c.C");
    assert_eq!(check(&health, "").await, Ok(ServingStatus::NotServing));
    assert_eq!(check(&health, "a.A").await, Ok(ServingStatus::NotServing));
    assert_eq!(check(&health, "c.C").await, Err(Code::NotFound));
    // A watch begun after the shutdown says so and ends.
    let mut watch = health.watch(asking("a.A")).await.unwrap().into_inner();
    assert_eq!(
        watch.next().await.unwrap().unwrap().status(),
        ServingStatus::NotServing
    );
    assert!(watch.next().await.is_none());
}

#[tokio::test]
async fn names_a_caller_asks_about_are_not_stored() {
    let health = Health::new();
    health.start([]);
    let mut watches = Vec::new();
    for n in 0..1000 {
        let _ = check(&health, &format!("x{n}")).await;
        watches.push(health.watch(asking(&format!("y{n}"))).await.unwrap());
    }
    assert_eq!(
        health.statuses.borrow().by_service.len(),
        1,
        "only the server's own entry"
    );
}
