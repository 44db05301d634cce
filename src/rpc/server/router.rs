//! Calls to services by name.

use std::{
    collections::HashMap,
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tower::Service;

use super::{super::Status, limit::ready_in_time, Call, Reply};

/// A service behind the router, called through a shared reference: each
/// call clones the concrete service (for generated servers, an `Arc`) and
/// boxes its future once. (`BoxCloneSyncService` allocated twice more per
/// call: its clone and its own future's box.)
pub(super) trait Route: Send + Sync {
    fn call(&self, call: Call) -> RouteFuture;
}

pub(super) type RouteFuture = Pin<Box<dyn Future<Output = Result<Reply, Status>> + Send>>;

impl<S> Route for S
where
    S: Service<Call, Response = Reply, Error = Status> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    fn call(&self, call: Call) -> RouteFuture {
        // The service's turn (a generated server's limit, in its
        // `poll_ready`) is waited for here, with the call's deadline in
        // view: the router answers for every service, so its own
        // readiness cannot be one service's.
        let mut service = self.clone();
        Box::pin(async move {
            ready_in_time(&mut service, &call).await??;
            Service::call(&mut service, call).await
        })
    }
}

pub(super) type RouteService = Arc<dyn Route>;

/// A routed service, and which of its methods may run on early data
/// ([`NamedService::accepts_early`](super::NamedService::accepts_early)).
#[derive(Clone)]
pub(super) struct Routed {
    pub(super) service: RouteService,
    pub(super) accepts_early: fn(&str) -> bool,
}

/// Routes calls by service name; an unknown method is `UNIMPLEMENTED`,
/// and a call that came as early data to a method not safe to repeat is
/// `UNAVAILABLE`, not run. Always ready, as axum's router is: it answers
/// for every service, so its readiness cannot be one service's; a call
/// waits for its service's own (a generated server's limit) once routed,
/// and is answered `RESOURCE_EXHAUSTED`, never run, if its turn does not
/// come before its deadline.
#[derive(Clone, Default)]
pub struct Router {
    pub(super) services: Arc<HashMap<&'static str, Routed>>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.services.keys()).finish()
    }
}

impl Service<Call> for Router {
    type Response = Reply;
    type Error = Status;
    type Future = RouteFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let route = call
            .method
            .rsplit_once('/')
            .and_then(|(service, method)| Some((self.services.get(service)?, method)));
        match route {
            Some((routed, method)) if call.early && !(routed.accepts_early)(method) => {
                tracing::debug!(method = %call.method, "an early call to a method not marked idempotent: not run");
                let status = Status::unavailable(format!(
                    "{} came as early data (0-RTT) and is not marked idempotent: not run; call again",
                    call.method
                ))
                .not_run_here();
                Box::pin(std::future::ready(Err(status)))
            }
            Some((routed, _)) => routed.service.call(call),
            None => {
                let status = Status::unimplemented(format!("no method {:?} here", call.method));
                Box::pin(std::future::ready(Err(status)))
            }
        }
    }
}
