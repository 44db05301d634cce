//! The tokio shell around the admission table: a tower service whose
//! future holds its handshake's place until the stack beneath yields.

use std::{
    any::Any,
    future::Future,
    net::IpAddr,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll},
};

use tokio::{sync::oneshot, time::Instant};
use tower::Service;

use super::{core::Admissions, AdmissionLayer};
use crate::{error::Repr, handshake::Handshake, Error, Refusal};

type Table = Arc<Mutex<Admissions<oneshot::Sender<()>>>>;

fn lock(table: &Table) -> MutexGuard<'_, Admissions<oneshot::Sender<()>>> {
    // A panic elsewhere leaves counts that are still counts.
    table.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
        Self {
            inner,
            table: Arc::new(Mutex::new(Admissions::new(limits, Instant::now().into_std()))),
        }
    }

    /// Handshakes pending now.
    pub fn pending(&self) -> usize {
        lock(&self.table).pending()
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
    S: Service<Handshake<T>, Error = Error>,
    S::Future: Send + 'static,
    T: 'static,
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
            Err(refusal) => {
                tracing::debug!(peer = ?ip, %refusal, "handshake not admitted");
                // The request, and the transport in it, go now.
                Box::pin(AdmissionFuture::<S::Future>::refused(refusal))
            }
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
        lock(&self.table).done(self.id);
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Admission`]: the stack's handshake, holding its
    /// place until it ends, or failing with
    /// [`Refusal::Evicted`] if a newer one needed the room.
    #[derive(Debug)]
    pub(crate) struct AdmissionFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = Projected]
    #[derive(Debug)]
    enum State<F> {
        Admitted {
            #[pin]
            inner: F,
            evicted: oneshot::Receiver<()>,
            place: Option<Place>,
            since: Instant,
        },
        Refused { refusal: Option<Refusal> },
    }
}

impl<F> AdmissionFuture<F> {
    fn admitted(inner: F, evicted: oneshot::Receiver<()>, place: Place, since: Instant) -> Self {
        Self {
            state: State::Admitted {
                inner,
                evicted,
                place: Some(place),
                since,
            },
        }
    }

    fn refused(refusal: Refusal) -> Self {
        Self {
            state: State::Refused {
                refusal: Some(refusal),
            },
        }
    }
}

impl<F, R> Future for AdmissionFuture<F>
where
    F: Future<Output = Result<R, Error>>,
{
    type Output = Result<R, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            Projected::Refused { refusal } => {
                let refusal = refusal.take().expect("polled after completion");
                Poll::Ready(Err(Repr::NotAdmitted(refusal).into()))
            }
            Projected::Admitted {
                inner,
                evicted,
                place,
                since,
            } => {
                if let Poll::Ready(Ok(())) = Pin::new(evicted).poll(cx) {
                    place.take();
                    let waited = since.elapsed();
                    return Poll::Ready(Err(Repr::NotAdmitted(Refusal::Evicted(waited)).into()));
                }
                let result = std::task::ready!(inner.poll(cx));
                place.take();
                Poll::Ready(result)
            }
        }
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

    /// A stack beneath that is never ready.
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
