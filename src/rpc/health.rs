//! A health service with gRPC's semantics (`grpc.health.v1.Health`:
//! `Check` and `Watch`, a status per service), for load balancers,
//! clients that watch their servers, and probes.
//!
//! [`Health`] is the service and its reporter in one (clone it to keep
//! reporting): hand it to the server with
//! [`Builder::health`](super::server::Builder::health), which serves it,
//! marks the server (`""`) and every service it serves `SERVING` when it
//! starts, and every one `NOT_SERVING` the moment it starts draining, so
//! that a balancer stops sending before the go-away arrives; each `Watch`
//! then ends, and the drain need not wait for it.
//!
//! ```no_run
//! use tokio::net::TcpListener;
//! use weft::{rpc::{health::Health, server::Server}, Identity};
//!
//! # async fn run(identity: Identity) -> std::io::Result<()> {
//! let health = Health::new();
//! let listener = TcpListener::bind("0.0.0.0:7001").await?;
//! let serving = Server::builder()
//!     // .add_service(MyServer::new(..))
//!     .health(health.clone())
//!     .serve_with_shutdown(listener, weft::acceptor(identity), async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     });
//! // Elsewhere, when a dependency goes away:
//! health.set_not_serving("my.package.MyService");
//! serving.await
//! # }
//! ```
//!
//! A Kubernetes probe speaks plain HTTP or gRPC, not weft: serve
//! [`Health::http`] (feature `http`) on a plain TCP port for an `httpGet`
//! probe, as `/healthz` of an axum router say.

use std::{collections::HashMap, sync::Arc};

use futures_util::StreamExt;
use tokio::sync::watch;

use super::{codegen::ReplyStream, Request, Response, Status};

/// The messages, `health_server` and `health_client`, as generated from
/// `proto/grpc/health/v1/health.proto`.
pub mod proto {
    #![allow(missing_docs, missing_debug_implementations, unreachable_pub)]
    include!(concat!(env!("OUT_DIR"), "/grpc.health.v1.rs"));
}

pub use proto::health_check_response::ServingStatus;
use proto::{health_server::HealthServer, HealthCheckRequest, HealthCheckResponse};

/// What the service reports: each service's status by name, and whether
/// the server is shutting down (after which nothing changes again).
#[derive(Debug, Default)]
struct Statuses {
    by_service: HashMap<String, ServingStatus>,
    shut_down: bool,
}

/// The health service, and the handle that sets what it reports.
///
/// Only the server's own code names services: a caller asking about a
/// name makes nothing be stored, so what a stranger can make it hold is
/// one watch per open call.
/// Every change is one `send_modify` of the watch, so a check and the
/// update it leads to are one step.
#[derive(Debug, Clone)]
pub struct Health {
    statuses: Arc<watch::Sender<Statuses>>,
}

impl Default for Health {
    fn default() -> Self {
        Self::new()
    }
}

impl Health {
    /// A health service that knows no service yet (the server's
    /// [`Builder::health`](super::server::Builder::health) sets them).
    pub fn new() -> Self {
        Self {
            statuses: Arc::new(watch::Sender::new(Statuses::default())),
        }
    }

    /// Reports `service` (its full name, `package.Service`; `""` for the
    /// server as a whole) serving.
    pub fn set_serving(&self, service: impl Into<String>) {
        self.set(service.into(), ServingStatus::Serving);
    }

    /// Reports `service` not serving: a balancer or a watching client
    /// sends it nothing until it is serving again.
    pub fn set_not_serving(&self, service: impl Into<String>) {
        self.set(service.into(), ServingStatus::NotServing);
    }

    /// What `service` reports now; `None` for a service never set.
    pub fn status(&self, service: &str) -> Option<ServingStatus> {
        self.statuses.borrow().by_service.get(service).copied()
    }

    fn set(&self, service: String, status: ServingStatus) {
        self.statuses.send_if_modified(|now| {
            if now.shut_down || now.by_service.get(&service) == Some(&status) {
                return false;
            }
            now.by_service.insert(service, status);
            true
        });
    }

    /// Marks `services` and the server serving, where not set already
    /// (the server's start).
    pub(crate) fn start<'a>(&self, services: impl IntoIterator<Item = &'a str>) {
        self.statuses.send_if_modified(|now| {
            let before = now.by_service.len();
            if !now.shut_down {
                for service in std::iter::once("").chain(services) {
                    now.by_service
                        .entry(service.to_owned())
                        .or_insert(ServingStatus::Serving);
                }
            }
            now.by_service.len() != before
        });
    }

    /// Marks every service and the server not serving, for good, and ends
    /// every `Watch` once it has said so (the server's drain).
    pub fn shut_down(&self) {
        self.statuses.send_modify(|now| {
            now.by_service
                .values_mut()
                .for_each(|status| *status = ServingStatus::NotServing);
            now.by_service
                .entry(String::new())
                .or_insert(ServingStatus::NotServing);
            now.shut_down = true;
        });
    }

    /// The service to serve (what [`Builder::health`](super::server::Builder::health)
    /// adds): `grpc.health.v1.Health`.
    pub fn service(&self) -> HealthServer<Health> {
        HealthServer::new(self.clone())
    }

    /// The server's overall status as plain HTTP, for a probe that does
    /// not speak weft: `200 SERVING`, or `503 NOT_SERVING` (also before
    /// the server starts), for any request.
    #[cfg(feature = "http")]
    pub fn http(&self) -> Probe {
        Probe(self.clone())
    }
}

/// [`Health::http`]: a `tower::Service` of any HTTP request, answering
/// the server's overall status (an axum route, or `hyper`'s
/// `service_fn`, on a plain TCP port).
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
pub struct Probe(Health);

#[cfg(feature = "http")]
impl<B> tower::Service<http::Request<B>> for Probe {
    type Response = http::Response<http_body_util::Full<bytes::Bytes>>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<B>) -> Self::Future {
        let (code, body) = match self.0.status("") {
            Some(ServingStatus::Serving) => (http::StatusCode::OK, "SERVING\n"),
            _ => (http::StatusCode::SERVICE_UNAVAILABLE, "NOT_SERVING\n"),
        };
        let mut response = http::Response::new(http_body_util::Full::from(body));
        *response.status_mut() = code;
        std::future::ready(Ok(response))
    }
}

/// Where a `Watch` stands: a status to send (and whether it is the last),
/// waiting for a change from the status sent, or done.
enum WatchStep {
    Send(ServingStatus, bool),
    Wait(ServingStatus),
    Done,
}

/// What a `Watch` of one service sends next, from the statuses: its
/// status (`SERVICE_UNKNOWN` for a service not set) and whether the
/// server is shutting down.
fn watched(statuses: &Statuses, service: &str) -> (ServingStatus, bool) {
    let status = statuses
        .by_service
        .get(service)
        .copied()
        .unwrap_or(ServingStatus::ServiceUnknown);
    (status, statuses.shut_down)
}

impl proto::health_server::Health for Health {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = &request.get_ref().service;
        match self.status(service) {
            Some(status) => Ok(Response::new(HealthCheckResponse {
                status: status.into(),
            })),
            None => Err(Status::not_found(format!("no service {service:?} is known"))),
        }
    }

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<ReplyStream<HealthCheckResponse>>, Status> {
        let service = request.into_inner().service;
        let mut changes = self.statuses.subscribe();
        // The status now; then each change to it, until the shutdown's
        // NOT_SERVING has been sent.
        let (status, last) = watched(&changes.borrow_and_update(), &service);
        let first = WatchStep::Send(status, last);
        let replies = futures_util::stream::unfold(
            (changes, service, first),
            |(mut changes, service, step)| async move {
                let (status, last) = match step {
                    WatchStep::Send(status, last) => (status, last),
                    WatchStep::Wait(sent) => loop {
                        // An error: the service is gone, nothing will change.
                        changes.changed().await.ok()?;
                        let (now, last) = watched(&changes.borrow_and_update(), &service);
                        if now != sent || last {
                            break (now, last);
                        }
                    },
                    WatchStep::Done => return None,
                };
                let reply = HealthCheckResponse {
                    status: status.into(),
                };
                let next = if last {
                    WatchStep::Done
                } else {
                    WatchStep::Wait(status)
                };
                Some((Ok(reply), (changes, service, next)))
            },
        );
        Ok(Response::new(replies.boxed()))
    }
}

#[cfg(test)]
mod tests;
