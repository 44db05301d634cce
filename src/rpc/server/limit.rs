//! Per-service limits of calls at once.

use std::{sync::Arc, time::Duration};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{super::Status, Call};

/// A call waiting for a turn gives up at most this long before its
/// deadline ([`Limit::acquire_for`]).
const TURN_MARGIN_MAX: Duration = Duration::from_millis(50);

/// At most this many calls of a service at once (the generated servers'
/// `max_concurrent_calls`; see the [module docs](super) for what a waiting
/// caller sees).
#[derive(Debug, Clone, Default)]
pub struct Limit(Option<Arc<Semaphore>>);

impl Limit {
    /// A limit of `max` calls at once (at least 1, at most tokio's
    /// [`Semaphore::MAX_PERMITS`]), or none.
    pub fn new(max: Option<usize>) -> Self {
        Self(max.map(|max| Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS)))))
    }

    /// Waits for `call`'s turn (none without a limit), as
    /// [`acquire`](Self::acquire) does, but not for all of the call's
    /// time: a turn that has not come a tenth of its timeout before its
    /// deadline (at most 50 ms before) fails the call with
    /// `RESOURCE_EXHAUSTED`, so that its caller learns it never ran, before
    /// its own deadline passes with `DEADLINE_EXCEEDED`. What generated
    /// servers call.
    pub async fn acquire_for(&self, call: &Call) -> Result<Option<OwnedSemaphorePermit>, Status> {
        let Some(semaphore) = &self.0 else {
            return Ok(None);
        };
        if let Ok(permit) = semaphore.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let (Some(deadline), Some(timeout)) = (call.deadline, call.timeout) else {
            return Ok(self.acquire().await);
        };
        let give_up = deadline - (timeout / 10).min(TURN_MARGIN_MAX);
        match tokio::time::timeout_at(give_up, self.acquire()).await {
            Ok(permit) => Ok(permit),
            Err(_) => Err(Status::resource_exhausted(format!(
                "{} waited {} of its {} for a turn of its service's limit of concurrent calls, and never ran",
                call.method,
                crate::error::Rounded(timeout - (deadline - give_up)),
                crate::error::Rounded(timeout),
            ))),
        }
    }

    /// Waits for a turn (none without a limit); the turn ends when the
    /// permit is dropped.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        match &self.0 {
            Some(semaphore) => Some(
                semaphore
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed"),
            ),
            None => None,
        }
    }
}
