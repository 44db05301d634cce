//! Calls spread over a name's endpoints by load: tower's `p2c::Balance`
//! over a [`Client`] per endpoint, each measured by its calls in flight.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use tower::{
    balance::p2c::Balance,
    load::{CompleteOnResponse, PendingRequestsDiscover},
    retry::budget::Budget,
    Service,
};

use super::{
    watched::{EndpointFailed, Fleet, Watched},
    Client, RawCall, RawReply,
};
use crate::{
    discover::{Endpoints, Services},
    pool::{Dialer, Endpoint, Pool},
    rpc::Status,
};

type MakeClient<S> = Arc<dyn Fn(&Endpoint) -> Client<S> + Send + Sync>;
type BoxMake<S> = Box<dyn FnMut(&Endpoint) -> Watched<S> + Send + Sync>;
type Balancer<S> = Balance<PendingRequestsDiscover<Services<BoxMake<S>>, CompleteOnResponse>, RawCall>;

/// An RPC client over every endpoint a name resolves to
/// ([`Endpoints`], from [`Dns`](crate::discover::Dns)): each call goes to
/// the less loaded of two endpoints picked at random (tower's
/// `p2c::Balance`, with `PendingRequests` load: the calls in flight), on
/// the [`Pool`]'s connection to it. Endpoints that leave the name take no
/// new calls; those in flight finish.
///
/// Endpoints that fail are taken out for a while: at once one that
/// cannot be reached (its dial failed: refused, timed out), after three
/// failures in a row one whose calls never reach a handler (refused,
/// going away); for a second, then a second longer each time, up to 30 s;
/// never more than half of them (nor the last one) at once. An endpoint
/// that cannot be reached also makes the name be looked up again at
/// once. A call that provably never ran (its
/// [`Status::is_never_processed`]) and has one request is made again,
/// once, on another endpoint, within a budget of a fifth of the calls
/// (and ten a second): a stopped or killed server costs only the calls
/// that were running on it.
///
/// A generated client takes it as it takes a [`Client`]. Each clone
/// balances on its own (its own count of calls in flight per endpoint),
/// over the same endpoints, pool and connections, with no task in
/// between: clone one per task, as you would a [`Client`].
///
/// ```no_run
/// use weft::{discover::Dns, pool::Pool, rpc::client::Balanced};
///
/// # async fn example(dialer: impl weft::pool::Dialer, key: weft::handshake::PeerId) -> std::io::Result<()> {
/// let endpoints = Dns::ips("echo.default.svc.cluster.local", 7000).expect_peer(key).spawn()?;
/// let client = Balanced::new(Pool::builder().build(dialer), endpoints);
/// // EchoClient::new(client.clone()), and so on.
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
pub struct Balanced<S> {
    /// The endpoints, which are out, and the retry budget: shared by
    /// clones.
    fleet: Arc<Fleet>,
    make: MakeClient<S>,
    /// Only ever reached through `&mut self` (`get_mut`, no locking): the
    /// mutex makes the client `Sync`, which `Balance` (holding a
    /// `PhantomData` of calls, whose request streams need not be) is not.
    balance: Mutex<Balancer<S>>,
}

impl<S: Dialer> Balanced<S> {
    /// A [`Client::new`] per endpoint, over `pool`.
    pub fn new(pool: Pool<S>, endpoints: Endpoints) -> Self {
        Self::with_clients(endpoints, move |endpoint| {
            Client::new(pool.clone(), endpoint.clone())
        })
    }

    /// The client `make` builds per endpoint (with its timeout and limits
    /// set, say: `|e| Client::new(pool.clone(), e.clone()).timeout(t)`).
    pub fn with_clients(
        endpoints: Endpoints,
        make: impl Fn(&Endpoint) -> Client<S> + Send + Sync + 'static,
    ) -> Self {
        let make: MakeClient<S> = Arc::new(make);
        let fleet = Arc::new(Fleet::new(endpoints));
        let balance = Mutex::new(balancer(&fleet, &make));
        Self { fleet, make, balance }
    }

    /// The endpoints it balances over.
    pub fn endpoints(&self) -> &Endpoints {
        &self.fleet.endpoints
    }

    fn balance(&mut self) -> &mut Balancer<S> {
        self.balance.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

fn balancer<S: Dialer>(fleet: &Arc<Fleet>, make: &MakeClient<S>) -> Balancer<S> {
    let (make, watching) = (make.clone(), fleet.clone());
    let boxed: BoxMake<S> =
        Box::new(move |endpoint: &Endpoint| Watched::new(make(endpoint), watching.clone()));
    Balance::new(PendingRequestsDiscover::new(
        fleet.endpoints.services(boxed),
        CompleteOnResponse::default(),
    ))
}

impl<S: Dialer> Clone for Balanced<S> {
    fn clone(&self) -> Self {
        Self {
            fleet: self.fleet.clone(),
            make: self.make.clone(),
            balance: Mutex::new(balancer(&self.fleet, &self.make)),
        }
    }
}

impl<S> fmt::Debug for Balanced<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Balanced")
            .field("endpoints", &self.fleet.endpoints)
            .finish_non_exhaustive()
    }
}

impl<S: Dialer> Service<RawCall> for Balanced<S> {
    type Response = RawReply;
    type Error = Status;
    type Future = BalancedCall;

    /// Ready once an endpoint is (pending while the name has none yet).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.balance().poll_ready(cx).map_err(Status::from_error)
    }

    fn call(&mut self, call: RawCall) -> Self::Future {
        let again = call.try_clone();
        let first = self.balance().call(call);
        self.fleet.budget.deposit();
        let (fleet, make) = (self.fleet.clone(), self.make.clone());
        BalancedCall {
            inner: Box::pin(async move {
                let failed = match first.await {
                    Ok(reply) => return Ok(reply),
                    Err(err) => match err.downcast::<EndpointFailed>() {
                        Ok(failed) => *failed,
                        Err(other) => return Err(Status::from_error(other)),
                    },
                };
                // Never ran: once more, elsewhere, if the budget allows.
                let Some(call) = again.filter(|_| failed.status.is_never_processed()) else {
                    return Err(failed.status);
                };
                let Some(endpoint) = fleet.another(&failed.endpoint) else {
                    return Err(failed.status);
                };
                if !fleet.budget.withdraw() {
                    return Err(failed.status);
                }
                tracing::debug!(from = %failed.endpoint, to = %endpoint, "balancer: a call that never ran, made again");
                Watched::new(make(&endpoint), fleet)
                    .call(call)
                    .await
                    .map_err(|failed| failed.status)
            }),
        }
    }
}

/// A call through [`Balanced`]: the endpoint's call (and, if it never
/// ran, once more on another), its error as a [`Status`].
pub struct BalancedCall {
    inner: Pin<Box<dyn Future<Output = Result<RawReply, Status>> + Send>>,
}

impl Future for BalancedCall {
    type Output = Result<RawReply, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl fmt::Debug for BalancedCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BalancedCall").finish_non_exhaustive()
    }
}
