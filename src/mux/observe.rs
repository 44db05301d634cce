//! What a [`Builder`](super::Builder) tells the observer it was handed
//! about the connections it builds: handshakes, connections, their
//! traffic and their ends. The metrics (`weft::metrics::Metrics`) and
//! the live view (`weft::admin::Admin`) are observers; so is anything
//! that implements [`Observer`].

use std::{fmt, sync::Arc, time::Duration};

use super::{connection::Connection, stats::ConnectionStats};
use crate::{error::Error, handshake::Role};

/// Told of the handshakes and connections of the stacks and builders it
/// is handed to ([`Builder::observer`](super::Builder::observer)). Each
/// method has a default that does nothing; a pair `(A, B)` of observers
/// tells both.
///
/// [`traffic`](Self::traffic) and [`closed`](Self::closed) are told by the
/// connection's driver under the connection's lock: they should return at
/// once (count, or note), and must not call into the connection.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use weft::mux::{self, Connection, Observer};
///
/// #[derive(Default)]
/// struct Count(AtomicUsize);
///
/// impl Observer for Count {
///     fn opened(&self, _: &Connection) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let builder = mux::Builder::new().observer(Count::default());
/// # let _ = builder;
/// ```
pub trait Observer: Send + Sync + 'static {
    /// A handshake of `role` ended after `took`, with a connection or an
    /// error.
    fn handshake(&self, role: Role, took: Duration, result: Result<&Connection, &Error>) {
        let _ = (role, took, result);
    }

    /// A connection was built (after its handshake, before any stream).
    fn opened(&self, conn: &Connection) {
        let _ = conn;
    }

    /// A connection's counts moved from `before` to `now` (its
    /// [`stats`](Connection::stats), taken by its driver at most once a
    /// second while traffic moves, and at its end: what is new is the
    /// difference).
    fn traffic(&self, role: Role, before: &ConnectionStats, now: &ConnectionStats) {
        let _ = (role, before, now);
    }

    /// A connection ended, with the error that ended it unless it was
    /// closed cleanly; its last traffic was reported just before.
    fn closed(&self, role: Role, error: Option<&Error>) {
        let _ = (role, error);
    }
}

impl Observer for () {}

impl<A: Observer, B: Observer> Observer for (A, B) {
    fn handshake(&self, role: Role, took: Duration, result: Result<&Connection, &Error>) {
        self.0.handshake(role, took, result);
        self.1.handshake(role, took, result);
    }

    fn opened(&self, conn: &Connection) {
        self.0.opened(conn);
        self.1.opened(conn);
    }

    fn traffic(&self, role: Role, before: &ConnectionStats, now: &ConnectionStats) {
        self.0.traffic(role, before, now);
        self.1.traffic(role, before, now);
    }

    fn closed(&self, role: Role, error: Option<&Error>) {
        self.0.closed(role, error);
        self.1.closed(role, error);
    }
}

/// The observer a builder was handed, if any (none costs nothing).
#[derive(Clone, Default)]
pub(crate) struct Observing(Option<Arc<dyn Observer>>);

impl Observing {
    pub(crate) fn new(observer: impl Observer) -> Self {
        Self(Some(Arc::new(observer)))
    }

    pub(crate) fn get(&self) -> Option<&Arc<dyn Observer>> {
        self.0.as_ref()
    }
}

impl fmt::Debug for Observing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

/// A connection's reports to its observer, kept by its driver: what it
/// reported last, so each report says what moved.
pub(crate) struct TrafficReports {
    observer: Arc<dyn Observer>,
    role: Role,
    reported: ConnectionStats,
}

impl TrafficReports {
    pub(crate) fn new(observer: Arc<dyn Observer>, role: Role) -> Self {
        Self {
            observer,
            role,
            reported: ConnectionStats::default(),
        }
    }

    /// Reports `now`, if anything moved.
    pub(crate) fn report(&mut self, now: ConnectionStats) {
        if now != self.reported {
            let before = std::mem::replace(&mut self.reported, now);
            self.observer.traffic(self.role, &before, &now);
        }
    }

    /// The connection ended: its last traffic, no stream open, then its
    /// end.
    pub(crate) fn close(mut self, mut last: ConnectionStats, error: Option<&Error>) {
        last.open_streams = 0;
        self.report(last);
        self.observer.closed(self.role, error);
    }
}
