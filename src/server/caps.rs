//! The server's table of places (the connection caps), as the accept loop
//! and each connection's task hold it: what holds a place, how it gives
//! way, and the place a connection gives back when it ends.

use std::{
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Instant,
};

use tokio::sync::oneshot;

use super::{
    places::{Occupant, Places},
    settings::ConnectionLimits,
};
use crate::{
    mux::{Connection, WeakConnection},
    sync::Locked,
    Refusal,
};

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
                // A go-away, not a close: a stream the peer opened before
                // it heard is still served (it learns the last one taken),
                // and the connection closes once none is left.
                if let Some(conn) = weak.upgrade() {
                    tracing::debug!(
                        "idle connection going away to make room: the server is at its connection cap"
                    );
                    conn.go_away();
                }
            }
        }
    }
}

/// The places of one server, shared by its accept loop and connections.
#[derive(Debug, Clone)]
pub(super) struct Table(Arc<Mutex<Places<Holder>>>);

impl Table {
    pub(super) fn new(limits: ConnectionLimits) -> Self {
        Self(Arc::new(Mutex::new(Places::new(limits))))
    }

    fn lock(&self) -> Locked<'_, Places<Holder>> {
        crate::sync::lock(&self.0)
    }

    /// A place for a connection from `addr` (if it has one), made by
    /// closing another if a cap is full and the newcomer is entitled to
    /// it; or why there is none.
    pub(super) fn take(&self, addr: Option<IpAddr>) -> Result<Place, Refusal> {
        let (stop, give_way) = oneshot::channel();
        let taken = self.lock().take(addr, Instant::now(), Holder::Handshake(stop))?;
        // (Closed outside the lock: closing takes the connection's own.)
        if let Some(evicted) = taken.evicted {
            evicted.evict();
        }
        Ok(Place {
            table: self.clone(),
            id: taken.id,
            give_way,
        })
    }
}

/// One connection's place, given back when dropped; while its handshake
/// runs, what tells it to give way to a newcomer.
#[derive(Debug)]
pub(super) struct Place {
    table: Table,
    id: u64,
    pub(super) give_way: oneshot::Receiver<()>,
}

impl Place {
    /// The handshake made `conn`: it holds the place from now on.
    pub(super) fn occupied_by(&self, conn: &Connection) {
        self.table.lock().occupy(
            self.id,
            Holder::Connection(conn.downgrade()),
            conn.peer().copied(),
        );
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.table.lock().release(self.id);
    }
}
