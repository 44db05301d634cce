//! One connection of a server: its handshake (which gives way if a
//! newcomer needs its place), then a task per stream its peer opens, until
//! it ends, is idle too long, or the server stops.

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use tokio::{sync::watch, task::JoinSet, time::Instant};
use tower::ServiceExt;

use super::{caps::Place, handler::Handler};
use crate::{
    handshake::Handshake,
    mux::{Connection, Stream},
    stack::Acceptor,
    CloseCode,
};

/// Tells the tasks of a server that it is stopping.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(watch::Receiver<bool>);

impl Stopping {
    pub(super) fn new(stopped: watch::Receiver<bool>) -> Self {
        Self(stopped)
    }

    /// Waits until the server stops (at once if it has).
    pub(crate) async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// A stream a peer opened, for a front's [`Handler`]: with the
/// connection it came on, the peer's transport address, the server's
/// stop, when it was opened, and what a layer read of it already.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) stream: Stream,
    /// The stream's first bytes, read by a layer that looked at them
    /// ([`DetectLayer`](super::DetectLayer)): the handler reads them
    /// before the stream's next.
    pub(crate) first: Bytes,
    // (Read by the HTTP handlers.)
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) connection: Connection,
    pub(crate) addr: Option<SocketAddr>,
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) stopping: Stopping,
    /// When the server took the stream: the start of any deadline for
    /// its first bytes.
    pub(crate) at: Instant,
}

/// How long an idle connection gone away has for streams under way before
/// it is closed.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A transport just accepted, with its peer's address and its place.
#[derive(Debug)]
pub(super) struct Arrival<IO> {
    pub(super) io: IO,
    pub(super) addr: Option<SocketAddr>,
    pub(super) place: Place,
}

/// Where a connection stands in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Serving; idle since the instant given (no stream running), if it is.
    Serving { idle_since: Option<Instant> },
    /// Gone away (the server stops, or it was idle too long): streams
    /// under way finish; idle since the instant given, if it is.
    GoingAway { idle_since: Option<Instant> },
}

impl Phase {
    fn going_away(self) -> bool {
        matches!(self, Phase::GoingAway { .. })
    }

    /// When an idle connection is next acted on: gone away at its idle
    /// limit, closed a grace after (only when idle ones close).
    fn idle_deadline(self, close_idle_after: Option<Duration>) -> Option<Instant> {
        let after = close_idle_after?;
        match self {
            Phase::Serving { idle_since } => idle_since.map(|since| since + after),
            Phase::GoingAway { idle_since } => idle_since.map(|since| since + IDLE_CLOSE_GRACE),
        }
    }

    /// The same phase, with streams running (`busy`) or not since `now`.
    fn with_streams(self, busy: bool, now: Instant) -> Self {
        let idle = |since: Option<Instant>| if busy { None } else { Some(since.unwrap_or(now)) };
        match self {
            Phase::Serving { idle_since } => Phase::Serving {
                idle_since: idle(idle_since),
            },
            Phase::GoingAway { idle_since } => Phase::GoingAway {
                idle_since: idle(idle_since),
            },
        }
    }
}

/// One connection: the handshake, then a task per stream, until the
/// connection ends (or, once stopping or idle too long, goes away and
/// drains).
pub(super) async fn serve_connection<IO, A, H>(
    acceptor: A,
    arrival: Arrival<IO>,
    mut stopping: Stopping,
    close_idle_after: Option<Duration>,
    handler: H,
) where
    IO: Send + 'static,
    A: Acceptor<IO>,
    H: Handler,
{
    let Arrival { io, addr, mut place } = arrival;
    let handshake = match addr {
        Some(addr) => Handshake::accept(io).with_peer_address(addr),
        None => Handshake::accept(io),
    };
    let conn = tokio::select! {
        conn = acceptor.oneshot(handshake) => match conn {
            Ok(conn) => conn,
            Err(err) => {
                tracing::debug!(error = %err, "handshake failed");
                return;
            }
        },
        () = stopping.wait() => return,
        Ok(()) = &mut place.give_way => {
            tracing::debug!("handshake pending too long at the connection cap; closed for a newcomer");
            return;
        }
    };
    place.occupied_by(&conn);
    let mut streams = JoinSet::new();
    let mut phase = Phase::Serving {
        idle_since: Some(Instant::now()),
    };
    loop {
        let idle_deadline = phase.idle_deadline(close_idle_after);
        tokio::select! {
            () = async {
                match idle_deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => {
                while streams.try_join_next().is_some() {}
                if !streams.is_empty() || conn.has_open_streams() {
                    phase = phase.with_streams(true, Instant::now());
                } else if !phase.going_away() {
                    // A go-away first: a stream the peer opens meanwhile
                    // is refused unprocessed, and it opens it elsewhere.
                    tracing::debug!("no stream for the idle limit; going away");
                    conn.go_away();
                    phase = Phase::GoingAway {
                        idle_since: Some(Instant::now()),
                    };
                } else {
                    conn.close(CloseCode::NO_ERROR, "no stream for the server's idle limit");
                    break;
                }
            }
            // A handler done: the connection may be idle from now.
            Some(_) = streams.join_next(), if close_idle_after.is_some() && !streams.is_empty() => {}
            next = conn.accept() => match next {
                Ok(Some(stream)) => {
                    let opened = Opened {
                        stream,
                        first: Bytes::new(),
                        connection: conn.clone(),
                        addr,
                        stopping: stopping.clone(),
                        at: Instant::now(),
                    };
                    // Boxed: tokio moving the handler's 2 KB future into
                    // its task cost more than the box (BENCHMARKS.md, "Per
                    // RPC call").
                    streams.spawn(Box::pin(handler.handle(opened)));
                }
                Ok(None) => break,
                Err(err) => {
                    if !err.is_closed() {
                        tracing::debug!(error = %err, "connection failed");
                    }
                    break;
                }
            },
            () = stopping.wait(), if !phase.going_away() => {
                // No new streams; those in flight finish, and accept
                // returns None once all were taken.
                conn.go_away();
                phase = Phase::GoingAway { idle_since: None };
            }
        }
        while streams.try_join_next().is_some() {}
        phase = phase.with_streams(!streams.is_empty(), Instant::now());
    }
    while streams.join_next().await.is_some() {}
}
