//! The checkout: looking for a stream on a pooled connection, and
//! carrying out what the look says (dial, wait for a dial, a slot or the
//! pool), until one is open; and the sweep of idle connections.

use std::{
    future::Future,
    sync::{Arc, Weak},
    task::Poll,
    time::Duration,
};

use bytes::Bytes;
use tokio::{sync::watch, time::Instant};

use super::{
    dial,
    state::{DialOutcome, Step},
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

/// Opens a stream to `endpoint`, wrapped so that a refusal is retried;
/// with `first` (the stream's whole content), carried by a dial the look
/// makes (in its first flight, 0-RTT, when the dialer can). Whether `first`
/// was sent, with the stream's end: if not, the caller sends it.
pub(super) async fn open_pooled<S: Dialer>(
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
    first: Option<Bytes>,
) -> Result<(PooledStream, bool), PoolError> {
    let reopen = shared.reopen.get_or_init(|| reopener(&shared)).clone();
    let (stream, conn, sent) = open_stream(&shared, &endpoint, first.clone(), None).await?;
    let stream = PooledStream::new(stream, conn, endpoint, reopen);
    Ok(match first.filter(|_| sent) {
        Some(first) => (stream.sent(first), true),
        None => (stream, false),
    })
}

/// How a pooled stream opens again, once, if refused: on another
/// connection to its endpoint than the one that refused. Made once per
/// pool, holding it weakly.
fn reopener<S: Dialer>(shared: &Arc<Shared<S>>) -> Reopen {
    let weak = Arc::downgrade(shared);
    Arc::new(move |refused: &Connection, endpoint: &Endpoint| -> Opening {
        let weak: Weak<Shared<S>> = weak.clone();
        let endpoint = endpoint.clone();
        let refused = refused.clone();
        Box::pin(async move {
            let Some(shared) = weak.upgrade() else {
                return Err(PoolError::Open {
                    endpoint,
                    source: Repr::DriverStopped.into(),
                });
            };
            shared.lock().counters.retries += 1;
            let (stream, conn, _) = open_stream(&shared, &endpoint, None, Some(&refused)).await?;
            Ok((stream, conn))
        })
    })
}

/// The checkout loop: look (past `avoid`), and carry out what the look
/// says, until a stream is open; a dial it makes carries `first` as its
/// first stream if given (whether it did, last).
async fn open_stream<S: Dialer>(
    shared: &Arc<Shared<S>>,
    endpoint: &Endpoint,
    first: Option<Bytes>,
    avoid: Option<&Connection>,
) -> Result<(Stream, Connection, bool), PoolError> {
    let mut waiting = None;
    loop {
        let changed = shared.changed.notified();
        let step = shared
            .lock()
            .stream_step(endpoint, &shared.config, Instant::now(), avoid);
        match step {
            Step::Opened(stream, conn) => return Ok((stream, conn, false)),
            // The waits are boxed: the common case, a stream opened at
            // the first look, then carries no room for them in every
            // call's future (which a caller may move and box).
            Step::WaitSlot(conns) => {
                waiting.get_or_insert_with(|| Waiting::new(shared));
                if let Some((stream, conn)) = Box::pin(wait_for_slot(conns, changed)).await {
                    shared.lock().opened_on(endpoint, &conn);
                    return Ok((stream, conn, false));
                }
            }
            Step::Dial(tx, rx) => {
                waiting.get_or_insert_with(|| Waiting::new(shared));
                if let Some((stream, conn)) =
                    Box::pin(dial_and_open(shared, endpoint, (tx, rx), first.clone())).await?
                {
                    return Ok((stream, conn, true));
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
        Step::Dial(tx, rx) => match Box::pin(dial_and_open(shared, endpoint, (tx, rx), None)).await {
            Err(err) => Some(Err(err)),
            Ok(_) => None,
        },
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

/// Dials `endpoint` in a task of its own, as every dial (a caller that
/// gives up does not fail the others waiting for it), with `first` as the
/// new connection's first stream if given: that stream, or `None` (look
/// again), or the dial's error. The caller whose `first` rode the dial is
/// told if the peer may have acted on it (its early data in doubt); the
/// others waiting, whose requests never went, are not.
async fn dial_and_open<S: Dialer>(
    shared: &Arc<Shared<S>>,
    endpoint: &Endpoint,
    (tx, mut rx): (watch::Sender<DialOutcome>, watch::Receiver<DialOutcome>),
    first: Option<Bytes>,
) -> Result<Option<(Stream, Connection)>, PoolError> {
    start_sweeper(shared);
    let (opened, stream) = tokio::sync::oneshot::channel();
    let first = first.map(|first| (first, opened));
    tokio::spawn(dial::dial(shared.clone(), endpoint.clone(), tx, first));
    match stream.await {
        Ok(Ok(stream)) => return Ok(Some(stream)),
        Ok(Err(in_doubt)) => return Err(in_doubt),
        Err(_) => {}
    }
    match rx
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|outcome| outcome.clone())
    {
        Some(Err(err)) => Err(err),
        _ => Ok(None),
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
        let waiters = state.waiters;
        state.reports.waiters(waiters);
        drop(state);
        Self(shared)
    }
}

impl<S> Drop for Waiting<'_, S> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waiters -= 1;
        let waiters = state.waiters;
        state.reports.waiters(waiters);
    }
}
