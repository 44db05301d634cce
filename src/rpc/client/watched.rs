//! A balanced endpoint's client, watched: its calls' outcomes go to the
//! fleet's outlier detection, and while the endpoint is out it is not
//! ready, so the balancer picks others.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    task::{ready, Context, Poll},
    time::Instant,
};

use rand_core::{OsRng, RngCore};
use tokio::time::Sleep;
use tower::{retry::budget::TpsBudget, Service};

use super::{Client, RawCall, RawReply};
use crate::{
    discover::{
        outliers::{Outcome, OutlierPolicy, Outliers},
        Endpoints,
    },
    pool::{Dialer, Endpoint},
    rpc::Status,
};

/// What every clone of one balanced client shares: the endpoints, which
/// of them are out, and the budget of retries.
pub(super) struct Fleet {
    pub(super) endpoints: Endpoints,
    outliers: Mutex<Outliers>,
    /// Endpoints failing or out, as last counted: while none is, a call
    /// that succeeds and a readiness check need no lock.
    troubled: AtomicUsize,
    /// Retries of calls that never ran, at most a fifth of the calls
    /// (and ten a second), as gRPC's and Finagle's retry budgets.
    pub(super) budget: TpsBudget,
}

impl Fleet {
    pub(super) fn new(endpoints: Endpoints) -> Self {
        Self {
            endpoints,
            outliers: Mutex::new(Outliers::new(OutlierPolicy::default())),
            troubled: AtomicUsize::new(0),
            budget: TpsBudget::new(std::time::Duration::from_secs(10), 10, 0.2),
        }
    }

    fn outliers(&self) -> crate::sync::Locked<'_, Outliers> {
        crate::sync::lock(&self.outliers)
    }

    /// Until when `endpoint` is out, if it is.
    fn out_until(&self, endpoint: &Endpoint) -> Option<Instant> {
        if self.troubled.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut outliers = self.outliers();
        let until = outliers.out_until(endpoint, Instant::now());
        self.troubled.store(outliers.troubled(), Ordering::Release);
        until
    }

    /// A call through `endpoint` ended so.
    fn record(&self, endpoint: &Endpoint, outcome: Outcome) {
        if outcome == Outcome::Reached && self.troubled.load(Ordering::Acquire) == 0 {
            return;
        }
        // A success only clears a count: no copy of the endpoints for it.
        let count = if outcome == Outcome::Reached {
            self.endpoints.count()
        } else {
            let current: std::collections::HashSet<Endpoint> = self.endpoints.current().into_iter().collect();
            self.outliers().retain(|e| current.contains(e));
            current.len()
        };
        let mut outliers = self.outliers();
        if let Some(until) = outliers.record(endpoint, outcome, count, Instant::now()) {
            tracing::info!(
                %endpoint,
                ?outcome,
                for_ms = until.saturating_duration_since(Instant::now()).as_millis() as u64,
                "balancer: endpoint taken out"
            );
        }
        self.troubled.store(outliers.troubled(), Ordering::Release);
        drop(outliers);
        if outcome == Outcome::Unreachable {
            // It may be gone from the name: look now, not at the TTL.
            self.endpoints.resolve_now();
        }
    }

    /// An endpoint to try a call again on: one of the others that is not
    /// out, at random.
    pub(super) fn another(&self, failed: &Endpoint) -> Option<Endpoint> {
        let mut others = self.endpoints.current();
        others.retain(|e| e != failed);
        let mut outliers = self.outliers();
        let now = Instant::now();
        others.retain(|e| outliers.out_until(e, now).is_none());
        drop(outliers);
        if others.is_empty() {
            return None;
        }
        let i = OsRng.next_u32() as usize % others.len();
        Some(others.swap_remove(i))
    }
}

/// A call that failed on an endpoint: its status, and where.
#[derive(Debug)]
pub(super) struct EndpointFailed {
    pub(super) endpoint: Endpoint,
    pub(super) status: Status,
}

impl fmt::Display for EndpointFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at {})", self.status, self.endpoint)
    }
}

impl std::error::Error for EndpointFailed {}

/// An endpoint's client, boxed (the balancer moves its services between
/// its ready and pending sets on every call, and a pointer moves cheaper
/// than a client), and watched.
pub(super) struct Watched<S> {
    client: Box<Client<S>>,
    endpoint: Endpoint,
    fleet: Arc<Fleet>,
    /// The wake-up at the end of the endpoint's time out.
    back: Option<Pin<Box<Sleep>>>,
}

impl<S> Watched<S> {
    pub(super) fn new(client: Client<S>, fleet: Arc<Fleet>) -> Self {
        Self {
            endpoint: client.endpoint.clone(),
            client: Box::new(client),
            fleet,
            back: None,
        }
    }
}

impl<S: Dialer> Service<RawCall> for Watched<S> {
    type Response = RawReply;
    type Error = EndpointFailed;
    type Future = WatchedCall;

    /// Not ready while the endpoint is out (woken when its time is up);
    /// then as its client.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), EndpointFailed>> {
        while let Some(until) = self.fleet.out_until(&self.endpoint) {
            let until = tokio::time::Instant::from_std(until);
            let back = self
                .back
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(until)));
            if back.deadline() != until {
                back.as_mut().reset(until);
            }
            ready!(back.as_mut().poll(cx));
        }
        self.client.poll_ready(cx).map_err(|status| EndpointFailed {
            endpoint: self.endpoint.clone(),
            status,
        })
    }

    fn call(&mut self, call: RawCall) -> WatchedCall {
        WatchedCall {
            inner: self.client.call(call),
            endpoint: self.endpoint.clone(),
            fleet: self.fleet.clone(),
        }
    }
}

/// A client's call, whatever its dialer.
type ClientCall = Pin<Box<dyn Future<Output = Result<RawReply, Status>> + Send>>;

/// A call through a [`Watched`] endpoint: its outcome recorded as it ends.
pub(super) struct WatchedCall {
    inner: ClientCall,
    endpoint: Endpoint,
    fleet: Arc<Fleet>,
}

impl Future for WatchedCall {
    type Output = Result<RawReply, EndpointFailed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let result = ready!(this.inner.as_mut().poll(cx));
        let outcome = match &result {
            Err(status) if status.is_unreached() => Outcome::Unreachable,
            Err(status) if status.is_never_processed() => Outcome::NeverProcessed,
            _ => Outcome::Reached,
        };
        this.fleet.record(&this.endpoint, outcome);
        Poll::Ready(result.map_err(|status| EndpointFailed {
            endpoint: this.endpoint.clone(),
            status,
        }))
    }
}
