//! Per-service limits of calls at once, and waiting for a service's turn
//! with the call's deadline in view.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::{Instant, Sleep},
};
use tokio_util::sync::PollSemaphore;
use tower::Service;

use super::{super::Status, Call};

/// A call waiting for a turn gives up at most this long before its
/// deadline ([`ready_in_time`]).
const TURN_MARGIN_MAX: Duration = Duration::from_millis(50);

/// At most this many calls of a service at once: the generated servers'
/// `max_concurrent_calls`, with the semantics of tower's
/// `ConcurrencyLimit`. [`poll_turn`](Self::poll_turn) (the service's
/// `poll_ready`) takes a turn, pending while every turn is taken, so that
/// `LoadShed` sheds and balancers see the load; the call then takes the
/// turn with [`take_turn`](Self::take_turn) and holds it until its reply
/// is sent. A clone shares the turns but holds none of its own.
#[derive(Default)]
pub struct Limit {
    turns: Option<PollSemaphore>,
    /// The turn `poll_turn` took, for the next call.
    held: Option<OwnedSemaphorePermit>,
}

impl Clone for Limit {
    fn clone(&self) -> Self {
        Self {
            turns: self.turns.clone(),
            held: None,
        }
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("free", &self.turns.as_ref().map(PollSemaphore::available_permits))
            .field("held", &self.held.is_some())
            .finish()
    }
}

impl Limit {
    /// A limit of `max` calls at once (at least 1, at most tokio's
    /// [`Semaphore::MAX_PERMITS`]), or none.
    pub fn new(max: Option<usize>) -> Self {
        Self {
            turns: max.map(|max| {
                PollSemaphore::new(Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))))
            }),
            held: None,
        }
    }

    /// Takes a turn for the next call (at once without a limit, or if one
    /// is held): a service's `poll_ready`.
    pub fn poll_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(turns) = &mut self.turns else {
            return Poll::Ready(());
        };
        if self.held.is_none() {
            // (The semaphore is never closed.)
            self.held = ready!(turns.poll_acquire(cx));
        }
        Poll::Ready(())
    }

    /// The turn [`poll_turn`](Self::poll_turn) took, for a call: a
    /// service's `call`. Without one (`poll_ready` was not called), the
    /// turn is waited for when the returned [`Turn`] is.
    pub fn take_turn(&mut self) -> Turn {
        match (self.held.take(), &self.turns) {
            (Some(held), _) => Turn::Held(held),
            (None, Some(turns)) => Turn::Wait(turns.clone_inner()),
            (None, None) => Turn::Unlimited,
        }
    }

    /// Waits for `call`'s turn (none without a limit), as
    /// [`acquire`](Self::acquire) does, but not for all of the call's
    /// time: a turn that has not come a tenth of its timeout before its
    /// deadline (at most 50 ms before) fails the call with
    /// `RESOURCE_EXHAUSTED`, so that its caller learns it never ran, before
    /// its own deadline passes with `DEADLINE_EXCEEDED`. For a service
    /// written by hand that waits in its `call` rather than in `poll_ready`.
    pub async fn acquire_for(&self, call: &Call) -> Result<Option<OwnedSemaphorePermit>, Status> {
        let Some(turns) = &self.turns else {
            return Ok(None);
        };
        let turns = turns.clone_inner();
        let mut acquire = std::pin::pin!(turns.acquire_owned());
        let mut ready = TurnWait::new(&call.method, call.deadline, call.timeout);
        std::future::poll_fn(|cx| {
            let acquired = acquire.as_mut().poll(cx);
            ready.poll(cx, acquired)
        })
        .await
        .map(|permit| Some(permit.expect("the semaphore is never closed")))
    }

    /// Waits for a turn (none without a limit); the turn ends when the
    /// permit is dropped.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        match &self.turns {
            Some(turns) => Some(
                turns
                    .clone_inner()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed"),
            ),
            None => None,
        }
    }
}

/// A call's turn of a [`Limit`]: held (dropped when the call ends), to be
/// waited for, or not needed.
#[derive(Debug)]
pub enum Turn {
    /// Taken in `poll_ready`.
    Held(OwnedSemaphorePermit),
    /// Not taken yet: [`wait`](Self::wait) takes it.
    Wait(Arc<Semaphore>),
    /// The service has no limit.
    Unlimited,
}

impl Turn {
    /// The permit (none without a limit), waiting for it if it was not
    /// taken in `poll_ready`. The turn ends when it is dropped.
    pub async fn wait(self) -> Option<OwnedSemaphorePermit> {
        match self {
            Turn::Held(held) => Some(held),
            Turn::Wait(turns) => Some(
                turns
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed"),
            ),
            Turn::Unlimited => None,
        }
    }
}

/// Waits until `service` is ready for `call`, or fails the call with
/// `RESOURCE_EXHAUSTED` a tenth of its timeout before its deadline (at
/// most 50 ms before), saying it never ran: a call queued behind a limit
/// learns it was not run before its own deadline passes, and can tell
/// "queued" from "too slow". A service ready at once costs one poll and
/// no timer. The inner result is the service's own readiness.
pub(crate) async fn ready_in_time<S: Service<Call>>(
    service: &mut S,
    call: &Call,
) -> Result<Result<(), S::Error>, Status> {
    let mut wait = TurnWait::new(&call.method, call.deadline, call.timeout);
    std::future::poll_fn(|cx| {
        let polled = service.poll_ready(cx);
        wait.poll(cx, polled)
    })
    .await
}

/// A wait for a turn that gives up in time: the timer is made only once
/// the turn has not come at the first poll.
struct TurnWait<'a> {
    method: &'a str,
    /// When to give up, and the call's timeout (for the message).
    give_up: Option<(Instant, Duration)>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<'a> TurnWait<'a> {
    fn new(method: &'a str, deadline: Option<Instant>, timeout: Option<Duration>) -> Self {
        let give_up = deadline
            .zip(timeout)
            .map(|(deadline, timeout)| (deadline - (timeout / 10).min(TURN_MARGIN_MAX), timeout));
        Self {
            method,
            give_up,
            timer: None,
        }
    }

    /// `turn` as polled now, or the refusal once the time to give up came.
    fn poll<T>(&mut self, cx: &mut Context<'_>, turn: Poll<T>) -> Poll<Result<T, Status>> {
        if let Poll::Ready(turn) = turn {
            return Poll::Ready(Ok(turn));
        }
        let Some((give_up, timeout)) = self.give_up else {
            return Poll::Pending;
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(give_up)));
        ready!(timer.as_mut().poll(cx));
        let waited = timeout - (timeout / 10).min(TURN_MARGIN_MAX);
        Poll::Ready(Err(Status::resource_exhausted(format!(
            "{} waited {} of its {} for a turn (a limit of calls at once), and never ran",
            self.method,
            crate::error::Rounded(waited),
            crate::error::Rounded(timeout),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use super::{Limit, Turn};

    #[test]
    fn a_turn_taken_in_poll_ready_is_the_calls_and_shows_in_debug() {
        let mut limit = Limit::new(Some(2));
        assert!(
            format!("{limit:?}").contains("free: Some(2), held: false"),
            "{limit:?}"
        );
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(limit.poll_turn(&mut cx), Poll::Ready(()));
        assert!(
            format!("{limit:?}").contains("free: Some(1), held: true"),
            "{limit:?}"
        );
        assert!(matches!(limit.take_turn(), Turn::Held(_)));
        // A clone shares the turns and holds none of its own.
        let mut clone = limit.clone();
        assert!(matches!(clone.take_turn(), Turn::Wait(_)));
        assert!(matches!(Limit::new(None).take_turn(), Turn::Unlimited));
    }
}
