//! Endpoints found by DNS, for balancing calls over a fleet (the feature
//! `dns`).
//!
//! [`Dns`] names where the servers are: the A/AAAA records of a name (a
//! Kubernetes headless Service has one per ready pod), or its SRV
//! records. [`Dns::spawn`] resolves it with hickory-resolver, again at
//! the records' TTL, and publishes the set of [`Endpoint`]s it found as
//! [`Endpoints`]: a cheap handle that any number of balancers share.
//! [`Endpoints::discover`] is a `tower::discover::Discover` of them
//! (`Change::Insert` and `Change::Remove` as the set changes), and
//! [`Endpoints::services`] makes a service for each; with them, tower's
//! `p2c::Balance` spreads calls by load. weft does that for you:
//! [`rpc::client::Balanced`](crate::rpc::client::Balanced) for RPC and
//! [`http::BalancedConnector`](crate::http::BalancedConnector) for
//! hyper, both over a [`Pool`](crate::pool::Pool).
//!
//! Servers removed from the name drop out of the set within a refresh;
//! their connections are not cut, so calls in flight finish. A server
//! that stops before its record goes is taken out by the balancer as
//! soon as it cannot be dialed, which also makes the name be looked up
//! again ([`Endpoints::resolve_now`]); `Balanced` makes a call that never
//! reached it again on another server.
//!
//! To test discovery of your own, serve a zone from your test's process:
//! `examples/discover_zone.rs` does, with hickory-server and a resolver
//! that asks it alone, and changes the zone as the test goes.

mod dns;
pub(crate) mod outliers;
mod schedule;

use std::{
    collections::{BTreeSet, VecDeque},
    convert::Infallible,
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::{Stream, StreamExt};
use tokio::sync::watch;
use tower::discover::Change;

pub use dns::Dns;
/// The hickory-resolver weft resolves with (0.26), for
/// [`Dns::resolver`]: build a `TokioResolver` from this path and its
/// version always matches weft's.
///
/// ```no_run
/// use weft::discover::{hickory_resolver::TokioResolver, Dns};
///
/// # fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let resolver = TokioResolver::builder_tokio()?.build()?;
/// let dns = Dns::ips("echo.default.svc.cluster.local", 7000).resolver(resolver);
/// # let _ = dns;
/// # Ok(())
/// # }
/// ```
pub use hickory_resolver;

use crate::pool::Endpoint;

type Set = Arc<BTreeSet<Endpoint>>;

/// The endpoints a name resolves to, as its resolver task last found them
/// (or a fixed list): cheap to clone, each clone sees every change.
#[derive(Clone)]
pub struct Endpoints {
    name: Arc<str>,
    rx: watch::Receiver<Set>,
    /// A fixed list's sender: nothing will change it, but it stays open.
    _fixed: Option<Arc<watch::Sender<Set>>>,
    /// Asks the resolver task to look again now (none for a fixed list).
    resolve_now: Option<Arc<tokio::sync::Notify>>,
}

impl fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoints")
            .field("name", &self.name)
            .field("current", &self.rx.borrow().len())
            .finish()
    }
}

impl Endpoints {
    fn from_watch(
        name: Arc<str>,
        rx: watch::Receiver<Set>,
        resolve_now: Option<Arc<tokio::sync::Notify>>,
    ) -> Self {
        Self {
            name,
            rx,
            _fixed: None,
            resolve_now,
        }
    }

    /// A fixed list, that never changes: a balancer over endpoints you
    /// list yourself.
    pub fn fixed(endpoints: impl IntoIterator<Item = Endpoint>) -> Self {
        let set: BTreeSet<Endpoint> = endpoints.into_iter().collect();
        let name: Arc<str> = format!("{} fixed endpoint(s)", set.len()).into();
        let (tx, rx) = watch::channel(Arc::new(set));
        Self {
            name,
            rx,
            _fixed: Some(Arc::new(tx)),
            resolve_now: None,
        }
    }

    /// What they were found from (`name:port`, `SRV name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many endpoints there are now (no copy of them).
    pub(crate) fn count(&self) -> usize {
        self.rx.borrow().len()
    }

    /// The endpoints now.
    pub fn current(&self) -> Vec<Endpoint> {
        self.rx.borrow().iter().cloned().collect()
    }

    /// Asks for the name to be looked up again now, not at its TTL (a
    /// balancer does when an endpoint cannot be reached: it may be gone).
    /// Lookups stay at most one per refresh floor (1 s by default),
    /// however often this is asked; the resolver's cache may still answer
    /// within the records' TTL. Nothing, for a fixed list.
    pub fn resolve_now(&self) {
        if let Some(resolve_now) = &self.resolve_now {
            resolve_now.notify_one();
        }
    }

    /// Waits until the set differs from what this handle last saw (from
    /// [`current`](Self::current) or a previous wait).
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            // A fixed list, or a task that ended: nothing will change.
            std::future::pending::<()>().await;
        }
        self.rx.mark_unchanged();
    }

    /// A `tower::discover::Discover` of the endpoints: every endpoint now
    /// as a `Change::Insert`, then the changes as they come (keyed and
    /// valued by the endpoint).
    pub fn discover(&self) -> EndpointsDiscover {
        let mut rx = self.rx.clone();
        rx.mark_changed();
        let sets = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let set = rx.borrow_and_update().clone();
            Some((set, rx))
        });
        EndpointsDiscover {
            sets: Box::pin(sets),
            known: BTreeSet::new(),
            pending: VecDeque::new(),
        }
    }

    /// A `tower::discover::Discover` of a service per endpoint, made by
    /// `make` (an RPC client for the endpoint, say), keyed by the endpoint.
    pub fn services<M, S>(&self, make: M) -> Services<M>
    where
        M: FnMut(&Endpoint) -> S,
    {
        Services {
            endpoints: self.discover(),
            make,
        }
    }
}

/// The changes of an [`Endpoints`] set, as a `tower::discover::Discover`
/// ([`Endpoints::discover`]). It never ends: while the name has no
/// change, it waits.
pub struct EndpointsDiscover {
    sets: Pin<Box<dyn Stream<Item = Set> + Send + Sync>>,
    known: BTreeSet<Endpoint>,
    pending: VecDeque<Change<Endpoint, Endpoint>>,
}

impl fmt::Debug for EndpointsDiscover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointsDiscover")
            .field("known", &self.known.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Stream for EndpointsDiscover {
    type Item = Result<Change<Endpoint, Endpoint>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(change) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(change)));
            }
            match this.sets.poll_next_unpin(cx) {
                Poll::Ready(Some(set)) => {
                    for gone in this.known.difference(&set) {
                        this.pending.push_back(Change::Remove(gone.clone()));
                    }
                    for new in set.difference(&this.known) {
                        this.pending.push_back(Change::Insert(new.clone(), new.clone()));
                    }
                    this.known = (*set).clone();
                }
                // The set is final (a fixed list, or its task ended): wait
                // forever rather than end, which a balancer takes as an
                // error.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A service per endpoint, as a `tower::discover::Discover`
/// ([`Endpoints::services`]).
pub struct Services<M> {
    endpoints: EndpointsDiscover,
    make: M,
}

impl<M> fmt::Debug for Services<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Services")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl<M, S> Stream for Services<M>
where
    M: FnMut(&Endpoint) -> S + Unpin,
{
    type Item = Result<Change<Endpoint, S>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        this.endpoints.poll_next_unpin(cx).map_ok(|change| match change {
            Change::Insert(endpoint, _) => {
                let service = (this.make)(&endpoint);
                Change::Insert(endpoint, service)
            }
            Change::Remove(endpoint) => Change::Remove(endpoint),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(last: u8) -> Endpoint {
        Endpoint::new(std::net::SocketAddr::from(([127, 0, 0, last], 7000)))
    }

    #[tokio::test]
    async fn a_discover_starts_with_the_set_and_follows_its_changes() {
        let (tx, rx) = watch::channel(Arc::new(BTreeSet::from([endpoint(2), endpoint(3)])));
        let endpoints = Endpoints::from_watch("test".into(), rx, None);
        let mut discover = endpoints.discover();
        let mut next = || {
            let polled =
                discover.poll_next_unpin(&mut Context::from_waker(futures_util::task::noop_waker_ref()));
            match polled {
                Poll::Ready(Some(Ok(Change::Insert(key, _)))) => Some(("insert", key)),
                Poll::Ready(Some(Ok(Change::Remove(key)))) => Some(("remove", key)),
                _ => None,
            }
        };
        assert_eq!(next(), Some(("insert", endpoint(2))));
        assert_eq!(next(), Some(("insert", endpoint(3))));
        assert_eq!(next(), None);
        tx.send_replace(Arc::new(BTreeSet::from([endpoint(3), endpoint(4)])));
        assert_eq!(next(), Some(("remove", endpoint(2))));
        assert_eq!(next(), Some(("insert", endpoint(4))));
        assert_eq!(next(), None);
        // The task gone: the last set stands, and the stream waits.
        drop(tx);
        assert_eq!(next(), None);
        assert_eq!(endpoints.current(), [endpoint(3), endpoint(4)]);
    }

    #[tokio::test]
    async fn services_are_made_for_inserted_endpoints_only() {
        let endpoints = Endpoints::fixed([endpoint(2), endpoint(3)]);
        let mut made = Vec::new();
        let mut services = endpoints.services(|endpoint: &Endpoint| endpoint.to_string());
        while let Poll::Ready(Some(Ok(Change::Insert(_, service)))) =
            services.poll_next_unpin(&mut Context::from_waker(futures_util::task::noop_waker_ref()))
        {
            made.push(service);
        }
        assert_eq!(made, ["127.0.0.2:7000", "127.0.0.3:7000"]);
    }
}
