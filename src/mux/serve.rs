//! The server loop both servers run (`weft::http::serve`, the RPC
//! server): TCP connections through an acceptor stack, a task per stream
//! the peer opens, and a graceful stop.

use std::{future::Future, io, net::SocketAddr, time::Duration};

use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use tower::ServiceExt;

use super::{Acceptor, Connection, Stream};
use crate::handshake::Handshake;

/// Tells the tasks of a server that it is stopping.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(watch::Receiver<bool>);

impl Stopping {
    /// Waits until the server stops (at once if it has).
    pub(crate) async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Serves `listener` until `signal`: every TCP connection goes through
/// `acceptor`, and every stream of it to `handler` (with the connection,
/// the peer's address and the stop), each in a task of its own. At the
/// signal: no new TCP connections, a go-away on every connection,
/// handlers finish; past `drain_timeout` (if any) what is left is
/// dropped. `name` labels the logs.
pub(crate) async fn serve_streams<A, H, Fut, F>(
    name: &'static str,
    listener: TcpListener,
    acceptor: A,
    signal: F,
    drain_timeout: Option<Duration>,
    handler: H,
) -> io::Result<()>
where
    A: Acceptor,
    H: Fn(Stream, &Connection, SocketAddr, Stopping) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let (stop, stopping) = watch::channel(false);
    let stopping = Stopping(stopping);
    let mut connections = JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        let (tcp, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors and the like: the listener
                // itself is fine, so wait a moment rather than spin.
                Err(err) if !matches!(err.kind(), io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected) => {
                    tracing::debug!(error = %err, "{name}: accept failed; retrying");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                Err(err) => return Err(err),
            },
            () = &mut signal => break,
        };
        connections.spawn(serve_connection(
            name,
            acceptor.clone(),
            tcp,
            addr,
            stopping.clone(),
            handler.clone(),
        ));
        // Reap what has finished, so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    match drain_timeout {
        Some(limit) => {
            if tokio::time::timeout(limit, drained).await.is_err() {
                tracing::debug!("{name}: still running at the drain timeout; closing");
                connections.shutdown().await;
            }
        }
        None => drained.await,
    }
    Ok(())
}

/// One TCP connection: the handshake, then a task per stream, until the
/// connection ends (or, once stopping, goes away and drains).
async fn serve_connection<A, H, Fut>(
    name: &'static str,
    acceptor: A,
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    mut stopping: Stopping,
    handler: H,
) where
    A: Acceptor,
    H: Fn(Stream, &Connection, SocketAddr, Stopping) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let conn = tokio::select! {
        conn = acceptor.oneshot(Handshake::accept(tcp).with_peer_address(addr)) => match conn {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(%addr, error = %err, "{name}: handshake failed");
                return;
            }
        },
        () = stopping.wait() => return,
    };
    let mut streams = JoinSet::new();
    let mut going_away = false;
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Ok(Some(stream)) => {
                    streams.spawn(Box::pin(handler(stream, &conn, addr, stopping.clone())));
                }
                Ok(None) => break,
                Err(err) => {
                    if !err.is_closed() {
                        tracing::debug!(%addr, error = %err, "{name}: connection failed");
                    }
                    break;
                }
            },
            () = stopping.wait(), if !going_away => {
                // No new streams; those in flight finish, and accept
                // returns None once all were taken.
                conn.go_away();
                going_away = true;
            }
        }
        while streams.try_join_next().is_some() {}
    }
    while streams.join_next().await.is_some() {}
}
