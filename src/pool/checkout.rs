//! The checkout: looking for a stream on a pooled connection, and
//! carrying out what the look says (dial, wait for a dial, a slot or the
//! pool), until one is open; and the sweep of idle connections.

use std::{
    future::Future,
    sync::{Arc, Weak},
    task::Poll,
    time::Duration,
};

use tokio::time::Instant;

use super::{
    dial,
    state::Step,
    stream::{Opening, Reopen},
    Dialer, Endpoint, PoolError, PooledStream, Shared,
};
use crate::{
    error::Repr,
    mux::{Connection, Stream},
};

/// How often a call waiting at the pool's connection limit looks again
/// for a connection that has become idle.
const POOL_FULL_RECHECK: Duration = Duration::from_millis(25);

/// Opens a stream to `endpoint`, wrapped so that a refusal is retried.
pub(super) async fn open_pooled<S: Dialer>(
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
) -> Result<PooledStream, PoolError> {
    let (stream, conn) = open_stream(&shared, &endpoint).await?;
    let weak = Arc::downgrade(&shared);
    let target = endpoint.clone();
    let reopen: Reopen = Arc::new(move || -> Opening {
        let weak: Weak<Shared<S>> = weak.clone();
        let endpoint = target.clone();
        Box::pin(async move {
            let Some(shared) = weak.upgrade() else {
                return Err(PoolError::Open {
                    endpoint,
                    source: Repr::DriverStopped.into(),
                });
            };
            shared.lock().counters.retries += 1;
            open_stream(&shared, &endpoint).await
        })
    });
    Ok(PooledStream::new(stream, conn, endpoint, reopen))
}

/// The checkout loop: look, and carry out what the look says, until a
/// stream is open.
async fn open_stream<S: Dialer>(
    shared: &Arc<Shared<S>>,
    endpoint: &Endpoint,
) -> Result<(Stream, Connection), PoolError> {
    let mut waiting = None;
    loop {
        let changed = shared.changed.notified();
        let step = shared
            .lock()
            .stream_step(endpoint, &shared.config, Instant::now());
        match step {
            Step::Opened(stream, conn) => return Ok((stream, conn)),
            // The waits are boxed: the common case, a stream opened at
            // the first look, then carries no room for them in every
            // call's future (which a caller may move and box).
            Step::WaitSlot(conns) => {
                waiting.get_or_insert_with(|| Waiting::new(shared));
                if let Some((stream, conn)) = Box::pin(wait_for_slot(conns, changed)).await {
                    shared.lock().opened_on(endpoint, &conn);
                    return Ok((stream, conn));
                }
            }
            other => {
                waiting.get_or_insert_with(|| Waiting::new(shared));
                if let Some(result) = Box::pin(carry_out(shared, endpoint, other, changed)).await {
                    result?;
                }
            }
        }
    }
}

/// Carries out a dial or a wait; `Some(Err)` fails the call, anything
/// else means look again.
pub(super) async fn carry_out<S: Dialer>(
    shared: &Arc<Shared<S>>,
    endpoint: &Endpoint,
    step: Step,
    changed: tokio::sync::futures::Notified<'_>,
) -> Option<Result<(), PoolError>> {
    match step {
        Step::Fail(err) => Some(Err(err)),
        Step::WaitDial(mut rx) => {
            let outcome = match rx.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone(),
                // The dial task is gone (its runtime shut down).
                Err(_) => return None,
            };
            match outcome {
                Some(Err(err)) => Some(Err(err)),
                _ => None,
            }
        }
        Step::Dial(tx, mut rx) => {
            start_sweeper(shared);
            tokio::spawn(dial::dial(shared.clone(), endpoint.clone(), tx));
            match rx.wait_for(Option::is_some).await.ok()?.clone() {
                Some(Err(err)) => Some(Err(err)),
                _ => None,
            }
        }
        Step::WaitPool => {
            // Streams ending do not tell the pool, so a connection that has
            // just become idle (and could make room) is found by looking
            // again: at a change, or soon.
            let _ = tokio::time::timeout(POOL_FULL_RECHECK, changed).await;
            None
        }
        Step::WaitSlot(_) | Step::Opened(..) | Step::Connection(_) => None,
    }
}

/// Waits until one of `conns` lets a stream open (and opens it), or the
/// pool changes (`None`: look again).
async fn wait_for_slot(
    conns: Vec<Connection>,
    changed: tokio::sync::futures::Notified<'_>,
) -> Option<(Stream, Connection)> {
    let mut changed = std::pin::pin!(changed);
    std::future::poll_fn(|cx| {
        if changed.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        for conn in &conns {
            match conn.poll_open(cx) {
                Poll::Ready(Ok(stream)) => return Poll::Ready(Some((stream, conn.clone()))),
                // Gone or going away: the next look skips it.
                Poll::Ready(Err(_)) => return Poll::Ready(None),
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

/// Starts the sweep that closes idle connections, once per pool, on the
/// runtime of its first dial. It stops when the pool is dropped.
fn start_sweeper<S: Send + Sync + 'static>(shared: &Arc<Shared<S>>) {
    use std::sync::atomic::Ordering;
    if shared.sweeping.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(shared);
    let period = (shared.config.idle_timeout / 4).max(Duration::from_millis(10));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let Some(shared) = weak.upgrade() else { return };
            let config = &shared.config;
            let changed = shared.lock().sweep(
                config.idle_timeout,
                config.max_idle,
                config.backoff.max,
                Instant::now(),
            );
            if changed {
                shared.changed.notify_waiters();
            }
        }
    });
}

/// Counts a waiting call in the stats while it lives.
pub(super) struct Waiting<'a, S>(&'a Shared<S>);

impl<'a, S> Waiting<'a, S> {
    pub(super) fn new(shared: &'a Shared<S>) -> Self {
        let mut state = shared.lock();
        state.waiters += 1;
        state.metrics.waiters(state.waiters);
        drop(state);
        Self(shared)
    }
}

impl<S> Drop for Waiting<'_, S> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waiters -= 1;
        state.metrics.waiters(state.waiters);
    }
}
