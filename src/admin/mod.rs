//! A live view of the process's connections, pools and RPC methods (the
//! feature `admin`), as gRPC's channelz and Finagle's admin page give:
//! a serializable [`Snapshot`], and a tower service that serves it as
//! JSON and as one self-contained page that refreshes itself.
//!
//! [`enable`] turns the view on: connections, pools, servers and clients
//! built from then on are shown (held weakly: the view keeps nothing
//! alive, and shows a connection until it ends). It costs a lock per
//! connection and pool built, and a histogram record per RPC call.
//!
//! ```no_run
//! use tokio::net::TcpListener;
//!
//! # async fn example() -> std::io::Result<()> {
//! let admin = weft::admin::enable();
//! // ... build servers, pools and clients ...
//! // The page at http://127.0.0.1:9000/, its data at /snapshot.json:
//! // any hyper server takes the service, `weft::http::serve` too.
//! let app = axum::Router::new().fallback_service(admin.service());
//! axum::serve(TcpListener::bind("127.0.0.1:9000").await?, app).await
//! # }
//! ```

mod registry;
mod service;
mod snapshot;

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use registry::{registry, MethodStats, PoolSource};
pub use service::AdminService;
pub use snapshot::{ConnectionView, EndpointView, Latency, MethodView, PoolView, Snapshot};

/// Turns the live view on (once per process; later calls return the same
/// view) and returns it.
pub fn enable() -> Admin {
    registry::enable();
    Admin { _priv: () }
}

/// The live view, turned on by [`enable`].
#[derive(Debug, Clone, Copy)]
pub struct Admin {
    _priv: (),
}

impl Admin {
    /// What the process holds now.
    pub fn snapshot(&self) -> Snapshot {
        let Some(registry) = registry() else {
            return Snapshot::default();
        };
        Snapshot {
            taken_at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            connections: registry.connections(),
            pools: registry.pools(),
            methods: registry.methods(),
        }
    }

    /// The view as a tower HTTP service: the page at its root (a path
    /// ending in `/` or `index.html`), the snapshot at `snapshot.json`.
    pub fn service(&self) -> AdminService {
        AdminService::new(*self)
    }
}

/// A connection was built: shown from now on, if the view is on.
pub(crate) fn connection_built(conn: &crate::mux::Connection) {
    if let Some(registry) = registry() {
        registry.add_connection(conn);
    }
}
