//! The server loop both servers run (`weft::http::serve`, the RPC
//! server): a listener's connections through an acceptor stack, a task
//! per stream the peer opens, and a graceful stop.

use std::{
    future::Future,
    io,
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    sync::{oneshot, watch, Semaphore},
    task::JoinSet,
};
use tower::ServiceExt;

use super::{
    places::{Occupant, Places},
    Connection, Stream, WeakConnection,
};
use crate::{admission, handshake::Handshake, stack::Acceptor, transport::Listener, Refusal};

/// Connections a server holds at once, handshakes included, by default.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Connections a server holds at once from one source address (an IPv4
/// address, or an IPv6 /64), by default.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 256;

/// How long an idle connection gone away has for streams under way before
/// it is closed.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How many connections a server takes: in all, and per source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionLimits {
    pub(crate) max: usize,
    pub(crate) per_address: usize,
    /// A connection with no stream for this long is closed (gracefully:
    /// a go-away, then the close once nothing is in flight).
    pub(crate) close_idle_after: Option<Duration>,
}

impl ConnectionLimits {
    /// Connections held at once, in all (at least 1).
    pub(crate) fn set_max(&mut self, n: usize) {
        self.max = n.max(1);
    }

    /// Connections held at once from one source (at least 1).
    pub(crate) fn set_per_address(&mut self, n: usize) {
        self.per_address = n.max(1);
    }

    /// Connections with no stream for `idle` are closed (`None`: never).
    pub(crate) fn set_close_idle_after(&mut self, idle: Option<Duration>) {
        self.close_idle_after = idle;
    }
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_CONNECTIONS,
            per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            close_idle_after: None,
        }
    }
}

/// What holds a server's place: a handshake under way (told to stop if
/// it must give way), or the connection it made.
#[derive(Debug)]
enum Holder {
    Handshake(oneshot::Sender<()>),
    Connection(WeakConnection),
}

impl Occupant for Holder {
    fn is_idle(&self) -> bool {
        match self {
            Holder::Handshake(_) => false,
            Holder::Connection(weak) => weak.upgrade().is_none_or(|conn| !conn.has_open_streams()),
        }
    }

    fn is_handshake(&self) -> bool {
        matches!(self, Holder::Handshake(_))
    }
}

impl Holder {
    /// Closed to make room for a newcomer.
    fn evict(self) {
        match self {
            Holder::Handshake(stop) => {
                let _ = stop.send(());
            }
            Holder::Connection(weak) => {
                if let Some(conn) = weak.upgrade() {
                    conn.close(
                        crate::CloseCode::NO_ERROR,
                        "closed while idle to make room for another peer: the server is at its connection cap",
                    );
                }
            }
        }
    }
}

type Table = Arc<Mutex<Places<Holder>>>;

fn lock(table: &Table) -> std::sync::MutexGuard<'_, Places<Holder>> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection's place, given back when dropped.
#[derive(Debug)]
struct Place {
    table: Table,
    id: u64,
}

impl Place {
    /// The handshake made `conn`: it holds the place from now on.
    fn occupied_by(&self, conn: &Connection) {
        lock(&self.table).occupy(self.id, Holder::Connection(conn.downgrade()));
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        lock(&self.table).release(self.id);
    }
}

/// A place for a connection from `addr` (if it has one), made by closing
/// another if a cap is full and the newcomer is entitled to it, and what
/// tells its handshake to stop if it must give way in turn; or why there
/// is none.
fn take_place(table: &Table, addr: Option<IpAddr>) -> Result<(Place, oneshot::Receiver<()>), Refusal> {
    let (stop, stopped) = oneshot::channel();
    let taken = lock(table).take(addr, std::time::Instant::now(), Holder::Handshake(stop))?;
    // (Closed outside the lock: closing takes the connection's own.)
    if let Some(evicted) = taken.evicted {
        evicted.evict();
    }
    Ok((
        Place {
            table: table.clone(),
            id: taken.id,
        },
        stopped,
    ))
}

/// Tells the tasks of a server that it is stopping.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(watch::Receiver<bool>);

impl Stopping {
    /// Waits until the server stops (at once if it has).
    pub(crate) async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Serves `listener` until `signal`: every connection goes through
/// `acceptor`, and every stream of it to `handler` (with the connection,
/// the peer's address and the stop), each in a task of its own. At the
/// signal: no new connections, a go-away on every connection, handlers
/// finish; past `drain_timeout` (if any) what is left is dropped. A
/// listener that ends (no more connections will come) is served until
/// the connections it gave end, or the signal. A connection past `limits`
/// is refused before its handshake. `name` labels the logs.
pub(crate) async fn serve_streams<L, A, H, Fut, F>(
    name: &'static str,
    mut listener: L,
    acceptor: A,
    signal: F,
    (drain_timeout, limits): (Option<Duration>, ConnectionLimits),
    handler: H,
) -> io::Result<()>
where
    L: Listener,
    A: Acceptor<L::Io>,
    H: Fn(Stream, &Connection, Option<SocketAddr>, Stopping) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let (stop, stopping) = watch::channel(false);
    let stopping = Stopping(stopping);
    let mut connections = JoinSet::new();
    let table: Table = Arc::new(Mutex::new(Places::new(limits)));
    let refusing = Arc::new(Semaphore::new(admission::MAX_REFUSING));
    let mut signal = std::pin::pin!(signal);
    let mut listener_ended = false;
    loop {
        let (tcp, addr) = tokio::select! {
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
        let place = match take_place(&table, addr.map(|addr| addr.ip())) {
            Ok(place) => place,
            Err(refusal) => {
                tracing::debug!(?addr, %refusal, "{name}: connection refused");
                admission::refuse_in_turn(&refusing, tcp, refusal);
                continue;
            }
        };
        connections.spawn(serve_connection(
            name,
            acceptor.clone(),
            (tcp, addr, place),
            (stopping.clone(), limits.close_idle_after),
            handler.clone(),
        ));
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

/// One connection: the handshake, then a task per stream, until the
/// connection ends (or, once stopping, goes away and drains).
async fn serve_connection<IO, A, H, Fut>(
    name: &'static str,
    acceptor: A,
    (io, addr, (place, mut give_way)): (IO, Option<SocketAddr>, (Place, oneshot::Receiver<()>)),
    (mut stopping, close_idle_after): (Stopping, Option<Duration>),
    handler: H,
) where
    IO: Send + 'static,
    A: Acceptor<IO>,
    H: Fn(Stream, &Connection, Option<SocketAddr>, Stopping) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let handshake = match addr {
        Some(addr) => Handshake::accept(io).with_peer_address(addr),
        None => Handshake::accept(io),
    };
    let conn = tokio::select! {
        conn = acceptor.oneshot(handshake) => match conn {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(?addr, error = %err, "{name}: handshake failed");
                return;
            }
        },
        () = stopping.wait() => return,
        Ok(()) = &mut give_way => {
            tracing::debug!(?addr, "{name}: handshake pending too long at the connection cap; closed for a newcomer");
            return;
        }
    };
    place.occupied_by(&conn);
    let mut streams = JoinSet::new();
    let mut going_away = false;
    // Since when no stream has run (its deadline, if idle ones close).
    let mut idle_since = Some(tokio::time::Instant::now());
    loop {
        // (Once going away, a grace of a second for streams under way.)
        let idle_deadline = match going_away {
            false => idle_since
                .zip(close_idle_after)
                .map(|(since, after)| since + after),
            true => idle_since
                .filter(|_| close_idle_after.is_some())
                .map(|since| since + IDLE_CLOSE_GRACE),
        };
        tokio::select! {
            () = async {
                match idle_deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => {
                while streams.try_join_next().is_some() {}
                if !streams.is_empty() || conn.has_open_streams() {
                    idle_since = None;
                } else if !going_away {
                    // A go-away first: a stream the peer opens meanwhile
                    // is refused unprocessed, and it opens it elsewhere.
                    tracing::debug!(?addr, "{name}: no stream for the idle limit; going away");
                    conn.go_away();
                    going_away = true;
                    idle_since = Some(tokio::time::Instant::now());
                } else {
                    conn.close(crate::CloseCode::NO_ERROR, "no stream for the server's idle limit");
                    break;
                }
            }
            // A handler done: the connection may be idle from now.
            Some(_) = streams.join_next(), if close_idle_after.is_some() && !streams.is_empty() => {}
            next = conn.accept() => match next {
                Ok(Some(stream)) => {
                    streams.spawn(Box::pin(handler(stream, &conn, addr, stopping.clone())));
                }
                Ok(None) => break,
                Err(err) => {
                    if !err.is_closed() {
                        tracing::debug!(?addr, error = %err, "{name}: connection failed");
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
        if streams.is_empty() {
            idle_since.get_or_insert_with(tokio::time::Instant::now);
        } else {
            idle_since = None;
        }
    }
    while streams.join_next().await.is_some() {}
}
