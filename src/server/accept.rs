//! The accept loop every server front runs: a listener's connections, each
//! given a place under the caps (or refused, saying why), through the
//! acceptor stack in a task of its own; and the graceful stop.

use std::{future::Future, io, sync::Arc, time::Duration};

use tokio::{
    sync::{watch, Semaphore},
    task::JoinSet,
};
use tracing::Instrument;

use super::{
    caps::Table,
    connection::{serve_connection, Arrival, Stopping},
    handler::Handler,
    settings::Settings,
};
use crate::{
    admission::{self, Admission},
    stack::Acceptor,
    transport::Listener,
};

/// A server front: what it is called in the logs, what it listens on,
/// the stack each connection goes through, its settings, and what each
/// stream is handed to.
#[derive(Debug)]
pub(crate) struct Front<L, A, H> {
    pub(crate) name: &'static str,
    pub(crate) listener: L,
    pub(crate) acceptor: A,
    pub(crate) settings: Settings,
    pub(crate) handler: H,
}

/// Serves `front` until `signal`: every connection goes through its
/// acceptor, and every stream of it to its handler, each in a task of its
/// own. At the signal: no new connections, a go-away on every connection,
/// handlers finish; past the shutdown timeout (if any) what is left is
/// dropped. A listener that ends (no more connections will come) is served
/// until the connections it gave end, or the signal. A connection past
/// the caps is refused before its handshake.
pub(crate) async fn serve<L, A, H, F>(front: Front<L, A, H>, signal: F) -> io::Result<()>
where
    L: Listener,
    A: Acceptor<L::Io>,
    H: Handler,
    F: Future<Output = ()> + Send,
{
    let Front {
        name,
        mut listener,
        acceptor,
        settings,
        handler,
    } = front;
    let (stop, stopping) = watch::channel(false);
    let stopping = Stopping::new(stopping);
    let mut connections = JoinSet::new();
    // The room: the places under the caps, and the handshakes' admission
    // (rates, pending, waiting), which refuse in the same turn.
    let table = Table::new(settings.connections);
    let refusing = Arc::new(Semaphore::new(admission::MAX_REFUSING));
    let acceptor = Admission::refusing_in(acceptor, settings.admission, refusing.clone());
    let mut signal = std::pin::pin!(signal);
    let mut listener_ended = false;
    loop {
        let (io, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Some(Ok(accepted)) => accepted,
                None => {
                    listener_ended = true;
                    break;
                }
                // Out of file descriptors and the like: the listener
                // itself is fine, so wait a moment rather than spin.
                Some(Err(err)) if !matches!(err.kind(), io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected) => {
                    tracing::debug!(error = %err, "{name}: accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Some(Err(err)) => return Err(err),
            },
            () = &mut signal => break,
        };
        let place = match table.take(addr.map(|addr| addr.ip())) {
            Ok(place) => place,
            Err(refusal) => {
                tracing::debug!(?addr, %refusal, "{name}: connection refused");
                admission::refuse_in_turn(&refusing, io, refusal);
                continue;
            }
        };
        let arrival = Arrival { io, addr, place };
        let span = tracing::debug_span!("connection", server = name, peer = ?addr);
        connections.spawn(
            serve_connection(
                acceptor.clone(),
                arrival,
                stopping.clone(),
                settings.close_idle_after,
                handler.clone(),
            )
            .instrument(span),
        );
        // Reap what has finished, so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    if listener_ended {
        // No more connections will come: those there are run to their
        // end, unless the signal comes first.
        tokio::select! {
            () = async { while connections.join_next().await.is_some() {} } => return Ok(()),
            () = &mut signal => {}
        }
    }
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    match settings.shutdown_timeout {
        Some(limit) => {
            if tokio::time::timeout(limit, drained).await.is_err() {
                tracing::debug!("{name}: still running at the shutdown timeout; closing");
                connections.shutdown().await;
            }
        }
        None => drained.await,
    }
    Ok(())
}
