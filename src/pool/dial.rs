//! One dial of an endpoint (the dialer resolves a name and tries its
//! addresses), the pinned peer and the required protocol checked, and
//! everyone waiting told.

use std::sync::Arc;

use tokio::{sync::oneshot, time::Instant};
use tower::ServiceExt;

use bytes::Bytes;

use super::{state, Dialer, Endpoint, PoolError, Shared};
use crate::{
    error::Repr,
    handshake::Handshake,
    mux::{Connection, Stream},
};

/// What a dial carries and gives back: the new connection's first stream,
/// whole, and where that stream goes once open (or the dial's error, if
/// the peer may have acted on it).
pub(super) type First = (Bytes, oneshot::Sender<Result<(Stream, Connection), PoolError>>);

/// Dials `endpoint`, then tells everyone waiting. With `first`, the
/// connection's first stream is `first`'s bytes, whole and finished: in the
/// dialer's first flight as early data (protocol version 3) when it can
/// send some, else right after the handshake; the stream goes to `first`'s
/// sender (dropped, and so reset, if nobody waits for it). A dial that
/// fails after its early data went tells that sender so, and the others
/// waiting (whose requests never went) the error without it.
pub(super) async fn dial<S: Dialer>(
    shared: Arc<Shared<S>>,
    endpoint: Endpoint,
    tx: tokio::sync::watch::Sender<state::DialOutcome>,
    first: Option<First>,
) {
    let mut dialing = DialGuard {
        shared: shared.clone(),
        endpoint: endpoint.clone(),
        tx: Some(tx),
    };
    let (bytes, opened) = first.unzip();
    let mut result = connect(&shared.dialer, &endpoint, bytes).await;
    log(&endpoint, &result);
    let stream = match &mut result {
        Ok(conn) => conn.take_early_stream().map(|stream| Ok((stream, conn.clone()))),
        Err(err) if !err.never_processed() => {
            let in_doubt = err.clone();
            *err = err.clone().settled();
            Some(Err(in_doubt))
        }
        Err(_) => None,
    };
    dialing.finish(result);
    if let (Some(stream), Some(opened)) = (stream, opened) {
        if let Ok((_, conn)) = &stream {
            shared.lock().opened_on(&endpoint, conn);
        }
        let _ = opened.send(stream);
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

/// One dial of `endpoint` by `dialer`, pinned as the endpoint says,
/// requiring the protocol it says, with `first` as the new connection's
/// first stream (whole and finished; early data when the dialer can):
/// the pool's dial, and a one-shot client's.
pub(crate) async fn connect<S: Dialer>(
    dialer: &S,
    endpoint: &Endpoint,
    first: Option<Bytes>,
) -> Result<Connection, PoolError> {
    let mut handshake = Handshake::dial(endpoint.target().clone());
    if let Some(peer) = endpoint.expected_peer() {
        handshake = handshake.expect_peer(*peer);
    }
    if let Some(wanted) = endpoint.expected_protocol() {
        handshake = handshake.expect_protocol(wanted);
    }
    if let Some(first) = first {
        handshake = handshake.early_stream_finished(first);
    }
    dialer
        .clone()
        .oneshot(handshake)
        .await
        .map_err(|source| match source.repr() {
            Repr::UnexpectedProtocol { agreed, .. } => PoolError::Protocol {
                endpoint: endpoint.clone(),
                agreed: agreed.clone(),
            },
            _ => PoolError::Dial {
                endpoint: endpoint.clone(),
                source,
            },
        })
}
