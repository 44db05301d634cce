//! A live view of the process's connections, pools and RPC methods (the
//! feature `admin`), as gRPC's channelz and Finagle's admin page give:
//! a serializable [`Snapshot`], and a tower service that serves it as
//! JSON and as one self-contained page that refreshes itself.
//!
//! An [`Admin`] shows what it is handed as an observer: the connections
//! of a stack ([`Multiplex::observer`](crate::stack::Multiplex::observer),
//! [`mux::Builder::observer`](crate::mux::Builder::observer)), pools
//! ([`pool::Builder::observer`](crate::pool::Builder::observer)), and the
//! RPC methods of servers and clients
//! ([`rpc::server::Builder::observer`](crate::rpc::server::Builder::observer),
//! [`Client::observer`](crate::rpc::client::Client::observer)). It holds
//! them weakly (the view keeps nothing alive, and shows a connection
//! until it ends), and costs a lock per connection and pool built, and a
//! histogram record per RPC call. Paired with `weft::metrics::Metrics`,
//! `(Metrics::new(), admin.clone())`, both observe.
//!
//! ```no_run
//! use tokio::net::TcpListener;
//! use weft::{admin::Admin, rpc::server::Server, Identity};
//!
//! # async fn example() -> std::io::Result<()> {
//! let admin = Admin::new();
//! let acceptor = weft::acceptor(Identity::generate()).observer(admin.clone());
//! let server = Server::builder().observer(admin.clone());
//! // ... add services, serve with `acceptor` ...
//! # let _ = (acceptor, server);
//! // The page at http://127.0.0.1:9000/, its data at /snapshot.json:
//! // any hyper server takes the service, `weft::http::serve` too.
//! let app = axum::Router::new().fallback_service(admin.service());
//! axum::serve(TcpListener::bind("127.0.0.1:9000").await?, app).await
//! # }
//! ```

mod registry;
mod service;
mod snapshot;

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use registry::Registry;
pub use service::AdminService;
pub use snapshot::{ConnectionView, EndpointView, Latency, MethodView, PoolView, Snapshot};

use crate::{
    mux::Connection,
    pool::PoolWatch,
    rpc::{End, MethodObserver},
};

/// The live view: what it was handed shows in its [`snapshot`](Self::snapshot).
/// Cloning is cheap and shares the view.
#[derive(Clone, Default)]
pub struct Admin {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}

impl Admin {
    /// A view that shows nothing yet: hand it (or clones) to what it
    /// should show.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the view was handed, as it is now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            taken_at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            connections: self.registry.connections(),
            pools: self.registry.pools(),
            methods: self.registry.methods(),
        }
    }

    /// The view as a tower HTTP service: the page at its root (a path
    /// ending in `/` or `index.html`), the snapshot at `snapshot.json`.
    pub fn service(&self) -> AdminService {
        AdminService::new(self.clone())
    }
}

/// Shows the connections built from then on (until they end).
impl crate::mux::Observer for Admin {
    fn opened(&self, conn: &Connection) {
        self.registry.add_connection(conn);
    }
}

/// Shows the pool (while it lives).
impl crate::pool::Observer for Admin {
    fn built(&self, pool: PoolWatch) {
        self.registry.add_pool(pool);
    }
}

/// Shows each method's calls by status, and their latency.
impl crate::rpc::Observer for Admin {
    fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver> {
        self.registry.method(end, method)
    }
}
