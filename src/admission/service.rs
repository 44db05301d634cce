//! The tokio shell around the admission table: a tower service whose
//! future holds its handshake's place until the stack beneath yields.

use std::{
    any::Any,
    collections::HashMap,
    future::Future,
    net::IpAddr,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use tokio::{
    sync::{oneshot, Notify, Semaphore},
    time::Instant,
};
use tower::{Service, ServiceExt};

use super::{core::Admissions, AdmissionLayer};
use crate::{
    error::Repr,
    handshake::Handshake,
    sync::{self, Locked},
    Error, Refusal,
};

/// The admission table, and a turn signal for each source whose
/// handshakes wait for a place.
#[derive(Debug)]
struct Shared {
    table: Mutex<Admissions<oneshot::Sender<()>>>,
    turns: Mutex<HashMap<IpAddr, Arc<Notify>>>,
    max_wait: std::time::Duration,
    /// Refused TCP peers being told why.
    refusing: Arc<Semaphore>,
}

impl Shared {
    /// Wakes one handshake of `source` waiting for a place, if any waits.
    fn pass_turn(&self, source: IpAddr) {
        if let Some(turn) = turns(self).get(&source) {
            turn.notify_one();
        }
    }

    /// Turns `req` away: a TCP peer is told why (a close frame in the
    /// clear, `EXCESSIVE_LOAD` and the reason), so that its dialer can tell
    /// "wait and retry" from a broken network; any other transport is
    /// dropped. The error the stack returns.
    fn refuse<T: 'static>(&self, req: Handshake<T>, refusal: Refusal) -> Error {
        let target: Box<dyn Any> = Box::new(req.into_target());
        if let Ok(tcp) = target.downcast::<tokio::net::TcpStream>() {
            super::refuse_in_turn(&self.refusing, *tcp, refusal.clone());
        }
        Repr::NotAdmitted(refusal).into()
    }
}

type Table = Arc<Shared>;

fn lock(table: &Table) -> Locked<'_, Admissions<oneshot::Sender<()>>> {
    // A panic elsewhere leaves counts that are still counts.
    sync::lock(&table.table)
}

fn turns(table: &Shared) -> Locked<'_, HashMap<IpAddr, Arc<Notify>>> {
    sync::lock(&table.turns)
}

/// The service of [`AdmissionLayer`]: admits each handshake, or fails it
/// with an error of [`ErrorKind::NotAdmitted`](crate::ErrorKind::NotAdmitted)
/// before the stack beneath runs. Clones share one table.
#[derive(Debug, Clone)]
pub struct Admission<S> {
    inner: S,
    table: Table,
}

impl<S> Admission<S> {
    pub(super) fn new(inner: S, limits: AdmissionLayer) -> Self {
        Self::refusing_in(inner, limits, Arc::new(Semaphore::new(super::MAX_REFUSING)))
    }

    /// Admission for a server, whose refusals (of handshakes, and of
    /// connections past its caps) take their turns from `refusing`.
    pub(crate) fn refusing_in(inner: S, limits: AdmissionLayer, refusing: Arc<Semaphore>) -> Self {
        let max_wait = limits.max_wait;
        Self {
            inner,
            table: Arc::new(Shared {
                table: Mutex::new(Admissions::new(limits, Instant::now().into_std())),
                turns: Mutex::default(),
                max_wait,
                refusing,
            }),
        }
    }

    /// Handshakes pending now.
    pub fn pending(&self) -> usize {
        lock(&self.table).pending()
    }

    /// Handshakes waiting for their source's place now.
    pub fn waiting(&self) -> usize {
        lock(&self.table).waiting()
    }
}

/// The peer's address: the one the handshake was given, or its TCP
/// stream's.
fn peer_ip<T: 'static>(req: &Handshake<T>) -> Option<IpAddr> {
    let given = req.peer_address().map(|addr| addr.ip());
    given.or_else(|| {
        let target: &dyn Any = req.target();
        let tcp = target.downcast_ref::<tokio::net::TcpStream>()?;
        tcp.peer_addr().ok().map(|addr| addr.ip())
    })
}

impl<S, T> Service<Handshake<T>> for Admission<S>
where
    S: Service<Handshake<T>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    T: Send + 'static,
{
    type Response = S::Response;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Handshake<T>) -> Self::Future {
        let ip = peer_ip(&req);
        let now = Instant::now();
        let (evict, evicted) = oneshot::channel();
        let admitted = lock(&self.table).admit(ip, now.into_std(), evict);
        match admitted {
            Ok(admitted) => {
                if let Some(evict) = admitted.evicted {
                    let _ = evict.send(());
                }
                let place = Place {
                    table: self.table.clone(),
                    id: admitted.id,
                };
                Box::pin(AdmissionFuture::admitted(
                    self.inner.call(req),
                    evicted,
                    place,
                    now,
                ))
            }
            Err(Refusal::AddressBusy { address, .. }) if lock(&self.table).wait(address) => {
                // Its source has as many pending as it may: it waits for
                // one of them to end, as in a listen backlog.
                let turn = turns(&self.table).entry(address).or_default().clone();
                let waiting = Waiting {
                    table: self.table.clone(),
                    source: address,
                };
                Box::pin(wait_for_place(waiting, turn, self.inner.clone(), req, ip))
            }
            Err(refusal) => {
                tracing::debug!(peer = ?ip, %refusal, "handshake not admitted");
                // The request, and the transport in it, go now.
                let err = self.table.refuse(req, refusal);
                Box::pin(std::future::ready(Err(err)))
            }
        }
    }
}

/// A handshake waiting for its source's place: it stops waiting when
/// dropped, whatever became of it.
struct Waiting {
    table: Table,
    source: IpAddr,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let left = lock(&self.table).stop_waiting(self.source);
        if left == 0 {
            turns(&self.table).remove(&self.source);
        } else {
            // It may have been woken for a place it did not take (turned
            // away for its rate, or gone): the next one tries.
            self.table.pass_turn(self.source);
        }
    }
}

/// Waits (at most the layer's `max_wait`) for a place for `req`, each
/// time one of its source's handshakes ends, then runs it as admitted.
async fn wait_for_place<S, T: 'static>(
    waiting: Waiting,
    turn: Arc<Notify>,
    inner: S,
    req: Handshake<T>,
    ip: Option<IpAddr>,
) -> Result<S::Response, Error>
where
    S: Service<Handshake<T>, Error = Error>,
{
    let since = Instant::now();
    let deadline = since + waiting.table.max_wait;
    let table = waiting.table.clone();
    loop {
        // Listening before asking, so that a place freed in between is
        // not missed.
        let notified = turn.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let (evict, evicted) = oneshot::channel();
        // (The table's lock is let go before anything below takes it.)
        let admitted = lock(&table).admit(ip, Instant::now().into_std(), evict);
        match admitted {
            Ok(admitted) => {
                drop(waiting);
                if let Some(evict) = admitted.evicted {
                    let _ = evict.send(());
                }
                let place = Place {
                    table,
                    id: admitted.id,
                };
                let inner = inner.oneshot(req);
                return AdmissionFuture::admitted(inner, evicted, place, since).await;
            }
            Err(Refusal::AddressBusy { .. }) => {}
            Err(refusal) => {
                tracing::debug!(peer = ?ip, %refusal, "handshake not admitted after waiting");
                return Err(table.refuse(req, refusal));
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let pending = lock(&table).pending_from(waiting.source);
            let refusal = Refusal::AddressBusy {
                address: super::source(waiting.source),
                pending,
            };
            tracing::debug!(peer = ?ip, %refusal, waited = ?since.elapsed(), "handshake not admitted: waited too long");
            return Err(table.refuse(req, refusal));
        }
    }
}

/// A handshake's place in the table, given back when dropped.
#[derive(Debug)]
struct Place {
    table: Table,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        let waited_for = lock(&self.table).done(self.id);
        // A handshake of the same source waits for this place: its turn.
        if let Some(source) = waited_for {
            self.table.pass_turn(source);
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of an admitted handshake: the stack's, holding its
    /// place until it ends, or failing with [`Refusal::Evicted`] if a
    /// newer one needed the room.
    #[derive(Debug)]
    pub(crate) struct AdmissionFuture<F> {
        #[pin]
        inner: F,
        evicted: oneshot::Receiver<()>,
        place: Option<Place>,
        since: Instant,
    }
}

impl<F> AdmissionFuture<F> {
    fn admitted(inner: F, evicted: oneshot::Receiver<()>, place: Place, since: Instant) -> Self {
        Self {
            inner,
            evicted,
            place: Some(place),
            since,
        }
    }
}

impl<F, R> Future for AdmissionFuture<F>
where
    F: Future<Output = Result<R, Error>>,
{
    type Output = Result<R, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(Ok(())) = Pin::new(this.evicted).poll(cx) {
            this.place.take();
            let waited = this.since.elapsed();
            return Poll::Ready(Err(Repr::NotAdmitted(Refusal::Evicted(waited)).into()));
        }
        let result = std::task::ready!(this.inner.poll(cx));
        this.place.take();
        Poll::Ready(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pending_counts_the_handshakes_holding_a_place() {
        let never = tower::service_fn(|_: Handshake<()>| std::future::pending::<Result<(), Error>>());
        let mut admission = Admission::new(never, AdmissionLayer::new());
        assert_eq!(admission.pending(), 0);
        let address = "127.0.0.2:7000".parse().unwrap();
        let first = admission.call(Handshake::accept(()).with_peer_address(address));
        let second = admission.call(Handshake::accept(()).with_peer_address(address));
        assert_eq!(admission.pending(), 2);
        drop(first);
        assert_eq!(admission.pending(), 1);
        drop(second);
        assert_eq!(admission.pending(), 0);
    }

    #[tokio::test]
    async fn each_address_has_its_own_share_and_the_stack_beneath_decides_readiness() {
        let never = tower::service_fn(|_: Handshake<()>| std::future::pending::<Result<(), Error>>());
        let mut admission = Admission::new(never, AdmissionLayer::new().max_pending_per_address(1));
        let at = |last: u8| std::net::SocketAddr::from(([127, 0, 0, last], 7000));
        let _a = admission.call(Handshake::accept(()).with_peer_address(at(2)));
        let _b = admission.call(Handshake::accept(()).with_peer_address(at(3)));
        assert_eq!(admission.pending(), 2, "two addresses, one each");
        let third = admission.call(Handshake::accept(()).with_peer_address(at(2)));
        let refused = tokio::time::timeout(std::time::Duration::from_secs(5), third)
            .await
            .expect("refused at once, not admitted")
            .unwrap_err();
        assert_eq!(refused.kind(), crate::ErrorKind::NotAdmitted);

        // Ready as the stack beneath is.
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(admission.poll_ready(&mut cx).is_ready());
        let mut waiting = Admission::new(NeverReady, AdmissionLayer::new());
        assert!(waiting.poll_ready(&mut cx).is_pending());
    }

    /// A stack beneath whose handshakes take 100 ms.
    fn slow() -> impl Service<Handshake<()>, Response = (), Error = Error, Future: Send> + Clone + Send {
        tower::service_fn(|_: Handshake<()>| async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            Ok::<_, Error>(())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_past_the_pending_limit_waits_its_turn_and_past_the_waiting_room_is_turned_away() {
        let layer = AdmissionLayer::new()
            .max_pending_per_address(1)
            .max_waiting_per_address(2);
        let mut admission = Admission::new(slow(), layer);
        let address = "127.0.0.2:7000".parse().unwrap();
        let mut burst: Vec<_> = (0..3)
            .map(|_| admission.call(Handshake::accept(()).with_peer_address(address)))
            .collect();
        assert_eq!((admission.pending(), admission.waiting()), (1, 2));
        // The fourth finds the waiting room full: turned away at once.
        let fourth = admission.call(Handshake::accept(()).with_peer_address(address));
        let refused = fourth.await.unwrap_err();
        assert!(
            matches!(refused.refusal(), Some(Refusal::AddressBusy { pending: 1, .. })),
            "{refused}"
        );
        // The three are served in turn, one at a time, all waiting at once
        // (each woken when a place is freed: none waits out its 5 s).
        let started = Instant::now();
        for done in futures_util::future::join_all(burst.drain(..)).await {
            done.unwrap();
        }
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(300));
        assert_eq!((admission.pending(), admission.waiting()), (0, 0));
        assert!(turns(&admission.table).is_empty(), "no turn signal left behind");
    }

    #[tokio::test(start_paused = true)]
    async fn a_handshake_waits_for_a_place_at_most_max_wait() {
        let never = tower::service_fn(|_: Handshake<()>| std::future::pending::<Result<(), Error>>());
        let layer = AdmissionLayer::new()
            .max_pending_per_address(1)
            .max_wait(std::time::Duration::from_secs(2));
        let mut admission = Admission::new(never, layer);
        let address = "127.0.0.2:7000".parse().unwrap();
        let _stalled = admission.call(Handshake::accept(()).with_peer_address(address));
        let started = Instant::now();
        let waited = admission
            .call(Handshake::accept(()).with_peer_address(address))
            .await
            .unwrap_err();
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(2));
        assert!(
            matches!(waited.refusal(), Some(Refusal::AddressBusy { pending: 1, .. })),
            "{waited}"
        );
        assert_eq!(admission.waiting(), 0);
        // Without a waiting room, turned away at once.
        let mut no_room = Admission::new(
            slow(),
            AdmissionLayer::new()
                .max_pending_per_address(1)
                .max_waiting_per_address(0),
        );
        let _first = no_room.call(Handshake::accept(()).with_peer_address(address));
        let started = Instant::now();
        assert!(no_room
            .call(Handshake::accept(()).with_peer_address(address))
            .await
            .is_err());
        assert_eq!(started.elapsed(), std::time::Duration::ZERO);
    }

    /// A stack beneath that is never ready.
    #[derive(Clone)]
    struct NeverReady;

    impl Service<Handshake<()>> for NeverReady {
        type Response = ();
        type Error = Error;
        type Future = std::future::Ready<Result<(), Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
            Poll::Pending
        }

        fn call(&mut self, _: Handshake<()>) -> Self::Future {
            std::future::ready(Ok(()))
        }
    }
}
