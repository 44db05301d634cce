//! Endpoints from a DNS name, with hickory-resolver: A/AAAA or SRV
//! records, resolved again at their TTL by a task of their own.

use std::{
    collections::BTreeSet,
    fmt, io,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use hickory_resolver::{
    proto::rr::{RData, RecordType},
    TokioResolver,
};
use tokio::sync::watch;

use super::{
    schedule::{Known, Refresh},
    Endpoints,
};
use crate::{handshake::PeerId, pool::Endpoint};

/// The shortest wait between two lookups of a name, by default: a TTL of
/// 0 (or a failing name) is not a busy loop.
const DEFAULT_REFRESH_FLOOR: Duration = Duration::from_secs(1);

/// The longest wait between two lookups of a name, by default, whatever
/// its TTL: a pod replaced in a rolling update is seen within it.
const DEFAULT_REFRESH_CEILING: Duration = Duration::from_secs(30);

/// Endpoints kept from one name at most: an answer with more (a zone
/// gone wrong) is cut to the first of them, in address order, and says so.
const MAX_ENDPOINTS: usize = 1024;

/// What is looked up.
#[derive(Debug, Clone)]
enum Query {
    /// A and AAAA records, each address an endpoint at `port`.
    Ips { name: String, port: u16 },
    /// SRV records, each target's addresses an endpoint at its port.
    Srv { name: String },
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Query::Ips { name, port } => write!(f, "{name}:{port}"),
            Query::Srv { name } => write!(f, "SRV {name}"),
        }
    }
}

/// A DNS name to discover endpoints from, set up: where it is looked up,
/// and what every endpoint found there must be.
///
/// [`spawn`](Dns::spawn) starts a task that resolves it, and again at
/// its records' TTL (kept between a floor and a ceiling, 1 s and 30 s by
/// default), and publishes the set of endpoints it found. A lookup that
/// fails keeps the last good set (and logs a warning): a DNS outage does
/// not empty a client's endpoints. The task ends when the last
/// [`Endpoints`] handle (and every stream made from one) is dropped.
///
/// ```no_run
/// use weft::{discover::Dns, handshake::PeerId};
///
/// # async fn example(server_key: PeerId) -> std::io::Result<()> {
/// // A Kubernetes headless Service: one A record per ready pod.
/// let endpoints = Dns::ips("echo.default.svc.cluster.local", 7000)
///     .expect_peer(server_key)
///     .spawn()?;
/// println!("{:?}", endpoints.current());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Dns {
    query: Query,
    peer: Option<PeerId>,
    protocol: Option<String>,
    refresh: Refresh,
    resolver: Option<TokioResolver>,
}

impl fmt::Debug for Dns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dns")
            .field("query", &self.query.to_string())
            .field("peer", &self.peer)
            .field("protocol", &self.protocol)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl Dns {
    /// The A and AAAA records of `name`: every address is an endpoint at
    /// `port` (a Kubernetes headless Service, a name with one record per
    /// server).
    pub fn ips(name: impl Into<String>, port: u16) -> Self {
        Self::new(Query::Ips {
            name: name.into(),
            port,
        })
    }

    /// The SRV records of `name` (`_rpc._tcp.echo.example.`): every
    /// record's target, resolved to its addresses, is an endpoint at the
    /// record's port. Priority and weight are not used: the balancer
    /// spreads calls by load.
    pub fn srv(name: impl Into<String>) -> Self {
        Self::new(Query::Srv { name: name.into() })
    }

    fn new(query: Query) -> Self {
        Self {
            query,
            peer: None,
            protocol: None,
            refresh: Refresh {
                floor: DEFAULT_REFRESH_FLOOR,
                ceiling: DEFAULT_REFRESH_CEILING,
            },
            resolver: None,
        }
    }

    /// Every endpoint found must present this key
    /// ([`Endpoint::expect_peer`]): the servers behind one name share an
    /// identity. (For a set of keys, give the dialer's
    /// [`EncryptLayer`](crate::EncryptLayer) an authorizer instead: it
    /// applies to every endpoint the pool dials.)
    pub fn expect_peer(mut self, peer: PeerId) -> Self {
        self.peer = Some(peer);
        self
    }

    /// Every endpoint found must agree this application protocol
    /// ([`Endpoint::protocol`]).
    pub fn protocol(mut self, protocol: impl Into<String>) -> Self {
        self.protocol = Some(protocol.into());
        self
    }

    /// Resolves again no sooner than `floor` and no later than `ceiling`
    /// after an answer, whatever its TTL says (defaults 1 s and 30 s);
    /// after a failure, `floor` later. `floor` is at least 10 ms, and
    /// `ceiling` at least `floor`.
    pub fn refresh_bounds(mut self, floor: Duration, ceiling: Duration) -> Self {
        let floor = floor.max(Duration::from_millis(10));
        self.refresh = Refresh {
            floor,
            ceiling: ceiling.max(floor),
        };
        self
    }

    /// Resolves with `resolver` (a hickory resolver configured as you
    /// need: other name servers, options) instead of one built from the
    /// system's configuration (`/etc/resolv.conf`). weft re-exports the
    /// hickory-resolver it uses as
    /// [`weft::discover::hickory_resolver`](crate::discover::hickory_resolver)
    /// (0.26): build the resolver from there and the versions match.
    pub fn resolver(mut self, resolver: TokioResolver) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Starts resolving, in a task on the current tokio runtime, and
    /// returns the endpoints it publishes (none until the first answer).
    /// Fails only when no resolver was given and the system's
    /// configuration cannot be read.
    pub fn spawn(self) -> io::Result<Endpoints> {
        let resolver = match self.resolver {
            Some(resolver) => resolver,
            None => TokioResolver::builder_tokio()
                .and_then(|builder| builder.build())
                .map_err(|err| io::Error::other(format!("reading the system's DNS configuration: {err}")))?,
        };
        let (tx, rx) = watch::channel(Arc::new(BTreeSet::new()));
        let lookup = Lookup {
            resolver,
            query: self.query,
            peer: self.peer,
            protocol: self.protocol,
        };
        let name: Arc<str> = lookup.query.to_string().into();
        let resolve_now = Arc::new(tokio::sync::Notify::new());
        tokio::spawn(run(lookup, self.refresh, tx, resolve_now.clone()));
        Ok(Endpoints::from_watch(name, rx, Some(resolve_now)))
    }
}

/// One name's lookups.
struct Lookup {
    resolver: TokioResolver,
    query: Query,
    peer: Option<PeerId>,
    protocol: Option<String>,
}

impl Lookup {
    /// The addresses the name resolves to now, and until when the answer
    /// holds.
    async fn addrs(&self) -> Result<(Vec<SocketAddr>, Instant), String> {
        match &self.query {
            Query::Ips { name, port } => {
                let lookup = self
                    .resolver
                    .lookup_ip(name.as_str())
                    .await
                    .map_err(|e| e.to_string())?;
                let addrs = lookup.iter().map(|ip| SocketAddr::new(ip, *port)).collect();
                Ok((addrs, lookup.valid_until()))
            }
            Query::Srv { name } => {
                let lookup = self
                    .resolver
                    .lookup(name.as_str(), RecordType::SRV)
                    .await
                    .map_err(|e| e.to_string())?;
                let mut valid_until = lookup.valid_until();
                let mut addrs = Vec::new();
                for record in lookup.answers().iter().take(MAX_ENDPOINTS) {
                    let RData::SRV(srv) = &record.data else { continue };
                    // The addresses the answer carries for the target, or
                    // a lookup of their own.
                    let given: Vec<_> = lookup
                        .additionals()
                        .iter()
                        .filter(|extra| extra.name == srv.target)
                        .filter_map(|extra| extra.data.ip_addr())
                        .collect();
                    if !given.is_empty() {
                        addrs.extend(given.into_iter().map(|ip| SocketAddr::new(ip, srv.port)));
                        continue;
                    }
                    let target = self
                        .resolver
                        .lookup_ip(srv.target.clone())
                        .await
                        .map_err(|e| format!("{}: {e}", srv.target))?;
                    valid_until = valid_until.min(target.valid_until());
                    addrs.extend(target.iter().map(|ip| SocketAddr::new(ip, srv.port)));
                }
                Ok((addrs, valid_until))
            }
        }
    }

    /// The endpoint at `addr`, with what every endpoint must be.
    fn endpoint(&self, addr: SocketAddr) -> Endpoint {
        let mut endpoint = Endpoint::new(addr);
        if let Some(peer) = self.peer {
            endpoint = endpoint.expect_peer(peer);
        }
        if let Some(protocol) = &self.protocol {
            endpoint = endpoint.protocol(protocol.clone());
        }
        endpoint
    }
}

/// Resolves `lookup` until nobody holds its endpoints, publishing every
/// change of the set: again at the answer's TTL, or sooner when asked
/// (at most once per refresh floor).
async fn run(
    lookup: Lookup,
    refresh: Refresh,
    tx: watch::Sender<Arc<BTreeSet<Endpoint>>>,
    resolve_now: Arc<tokio::sync::Notify>,
) {
    let mut known = Known::default();
    loop {
        let looked = Instant::now();
        let next = match lookup.addrs().await {
            Ok((mut addrs, valid_until)) if !addrs.is_empty() => {
                if addrs.len() > MAX_ENDPOINTS {
                    tracing::warn!(
                        name = %lookup.query,
                        answered = addrs.len(),
                        kept = MAX_ENDPOINTS,
                        "discover: more addresses than a name may have; keeping the first"
                    );
                    addrs.sort_unstable();
                    addrs.dedup();
                    addrs.truncate(MAX_ENDPOINTS);
                }
                let diff = known.update(addrs);
                if !diff.is_empty() {
                    tracing::info!(
                        name = %lookup.query,
                        added = ?diff.added,
                        removed = ?diff.removed,
                        "discover: endpoints changed"
                    );
                    let set = known.addrs().iter().map(|&addr| lookup.endpoint(addr)).collect();
                    tx.send_replace(Arc::new(set));
                }
                refresh.after_answer(Instant::now(), valid_until)
            }
            Ok(_) => {
                tracing::warn!(
                    name = %lookup.query,
                    kept = known.addrs().len(),
                    "discover: the name has no address; keeping the last good set"
                );
                refresh.after_failure(Instant::now())
            }
            Err(error) => {
                tracing::warn!(
                    name = %lookup.query,
                    %error,
                    kept = known.addrs().len(),
                    "discover: lookup failed; keeping the last good set"
                );
                refresh.after_failure(Instant::now())
            }
        };
        let asked = tokio::select! {
            () = tokio::time::sleep_until(tokio::time::Instant::from_std(next)) => false,
            () = resolve_now.notified() => true,
            () = tx.closed() => return,
        };
        if asked {
            tracing::debug!(name = %lookup.query, "discover: looking again, asked by a balancer");
            let soonest = tokio::time::Instant::from_std(looked + refresh.floor);
            tokio::select! {
                () = tokio::time::sleep_until(soonest) => {}
                () = tx.closed() => return,
            }
        }
    }
}
