//! One dial of an endpoint (the dialer resolves a name and tries its
//! addresses), the pinned peer and the required protocol checked, and
//! everyone waiting told.

use std::sync::Arc;

use tokio::time::Instant;
use tower::ServiceExt;

use bytes::Bytes;

use super::{state, Dialer, Endpoint, PoolError, Shared};
use crate::{
    error::Repr,
    handshake::Handshake,
    mux::{Connection, Stream},
};

/// Dials `endpoint`, then tells everyone waiting.
pub(super) async fn dial<S: Dialer>(
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
    tx: tokio::sync::watch::Sender<state::DialOutcome>,
) {
    let mut dialing = DialGuard {
        shared: shared.clone(),
        endpoint: endpoint.clone(),
        tx: Some(tx),
    };
    let result = dial_once(&shared.dialer, &endpoint, None).await;
    log(&endpoint, &result);
    dialing.finish(result);
}

/// Dials `endpoint` with `first` as the connection's first stream, whole
/// and finished: in the dialer's first flight as early data (protocol
/// version 3) when it can send some, else right after the handshake. The
/// connection joins the pool, everyone waiting is told, and the stream
/// goes to `opened` (dropped, and so reset, if nobody waits for it).
pub(super) async fn dial_with_stream<S: Dialer>(
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
    tx: tokio::sync::watch::Sender<state::DialOutcome>,
    first: Bytes,
    opened: tokio::sync::oneshot::Sender<(Stream, Connection)>,
) {
    let mut dialing = DialGuard {
        shared: shared.clone(),
        endpoint: endpoint.clone(),
        tx: Some(tx),
    };
    let result = dial_once(&shared.dialer, &endpoint, Some(first)).await;
    log(&endpoint, &result);
    let stream = result
        .as_ref()
        .ok()
        .and_then(|conn| Some((conn.take_early_stream()?, conn.clone())));
    dialing.finish(result);
    if let Some((stream, conn)) = stream {
        shared.lock().opened_on(&endpoint, &conn);
        let _ = opened.send((stream, conn));
    }
}

fn log(endpoint: &Endpoint, result: &Result<Connection, PoolError>) {
    match result {
        Ok(conn) => tracing::debug!(%endpoint, peer = ?conn.peer(), "pool: dialed"),
        Err(err) => tracing::debug!(%endpoint, error = %err, "pool: dial failed"),
    }
}

/// Ends a dial in the pool's state exactly once, even if the dial task
/// is dropped (its runtime shut down) or the dialer panicked: its waiters
/// then fail rather than wait on a dial that never ends.
struct DialGuard<S> {
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
    tx: Option<tokio::sync::watch::Sender<state::DialOutcome>>,
}

impl<S> DialGuard<S> {
    fn finish(&mut self, result: Result<Connection, PoolError>) {
        let Some(tx) = self.tx.take() else { return };
        let outcome =
            self.shared
                .lock()
                .dial_done(&self.endpoint, result, &self.shared.config, Instant::now());
        let _ = tx.send(Some(outcome));
        self.shared.changed.notify_waiters();
    }
}

impl<S> Drop for DialGuard<S> {
    fn drop(&mut self) {
        self.finish(Err(PoolError::Dial {
            endpoint: self.endpoint.clone(),
            source: Repr::DriverStopped.into(),
        }));
    }
}

async fn dial_once<S: Dialer>(
    dialer: &S,
    endpoint: &Endpoint,
    first: Option<Bytes>,
) -> Result<Connection, PoolError> {
    let mut handshake = Handshake::dial(endpoint.target().clone());
    if let Some(peer) = endpoint.expected_peer() {
        handshake = handshake.expect_peer(*peer);
    }
    if let Some(first) = first {
        handshake = handshake.early_stream_finished(first);
    }
    let conn = dialer
        .clone()
        .oneshot(handshake)
        .await
        .map_err(|source| PoolError::Dial {
            endpoint: endpoint.clone(),
            source,
        })?;
    if let Some(wanted) = endpoint.expected_protocol() {
        if conn.agreement().protocol() != Some(wanted) {
            return Err(PoolError::Protocol {
                endpoint: endpoint.clone(),
                agreed: conn.agreement().protocol().map(str::to_owned),
            });
        }
    }
    Ok(conn)
}
