//! Calls spread over a name's endpoints by load: tower's `p2c::Balance`
//! over a [`Client`] per endpoint, each measured by its calls in flight.

use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use std::{future::Future, pin::Pin};
use tower::{
    balance::p2c::Balance,
    load::{CompleteOnResponse, PendingRequestsDiscover},
    Service,
};

use super::{Client, RawCall, RawReply};
use crate::{
    discover::{Endpoints, Services},
    pool::{Dialer, Endpoint, Pool},
    rpc::Status,
};

type MakeClient<S> = Arc<dyn Fn(&Endpoint) -> Client<S> + Send + Sync>;
type BoxMake<S> = Box<dyn FnMut(&Endpoint) -> BoxedClient<S> + Send + Sync>;
type Balancer<S> = Balance<PendingRequestsDiscover<Services<BoxMake<S>>, CompleteOnResponse>, RawCall>;
type BalancerFuture<S> = <Balancer<S> as Service<RawCall>>::Future;

/// An endpoint's client, boxed: the balancer moves its services between
/// its ready and pending sets on every call, and a pointer moves cheaper
/// than a client.
struct BoxedClient<S>(Box<Client<S>>);

impl<S: Dialer> Service<RawCall> for BoxedClient<S> {
    type Response = RawReply;
    type Error = Status;
    type Future = <Client<S> as Service<RawCall>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, call: RawCall) -> Self::Future {
        self.0.call(call)
    }
}

/// An RPC client over every endpoint a name resolves to
/// ([`Endpoints`], from [`Dns`](crate::discover::Dns)): each call goes to
/// the less loaded of two endpoints picked at random (tower's
/// `p2c::Balance`, with `PendingRequests` load: the calls in flight), on
/// the [`Pool`]'s connection to it. Endpoints that leave the name take no
/// new calls; those in flight finish.
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
    endpoints: Endpoints,
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
        let balance = Mutex::new(balancer(&endpoints, &make));
        Self {
            endpoints,
            make,
            balance,
        }
    }

    /// The endpoints it balances over.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    fn balance(&mut self) -> &mut Balancer<S> {
        self.balance.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

fn balancer<S: Dialer>(endpoints: &Endpoints, make: &MakeClient<S>) -> Balancer<S> {
    let make = make.clone();
    let boxed: BoxMake<S> = Box::new(move |endpoint: &Endpoint| BoxedClient(Box::new(make(endpoint))));
    Balance::new(PendingRequestsDiscover::new(
        endpoints.services(boxed),
        CompleteOnResponse::default(),
    ))
}

impl<S: Dialer> Clone for Balanced<S> {
    fn clone(&self) -> Self {
        Self {
            endpoints: self.endpoints.clone(),
            make: self.make.clone(),
            balance: Mutex::new(balancer(&self.endpoints, &self.make)),
        }
    }
}

impl<S> fmt::Debug for Balanced<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Balanced")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl<S: Dialer> Service<RawCall> for Balanced<S> {
    type Response = RawReply;
    type Error = Status;
    type Future = BalancedCall<S>;

    /// Ready once an endpoint is (pending while the name has none yet).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        self.balance().poll_ready(cx).map_err(Status::from_error)
    }

    fn call(&mut self, call: RawCall) -> Self::Future {
        BalancedCall {
            inner: self.balance().call(call),
        }
    }
}

pin_project_lite::pin_project! {
    /// A call through [`Balanced`]: the endpoint's call, its error as a
    /// [`Status`].
    pub struct BalancedCall<S: Dialer> {
        #[pin]
        inner: BalancerFuture<S>,
    }
}

impl<S: Dialer> Future for BalancedCall<S> {
    type Output = Result<RawReply, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map_err(Status::from_error)
    }
}

impl<S: Dialer> fmt::Debug for BalancedCall<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BalancedCall").finish_non_exhaustive()
    }
}
