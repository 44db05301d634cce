//! What the live view knows: the connections and pools it was told of
//! (held weakly: the view keeps nothing alive), and the RPC methods'
//! counts and durations.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use hdrhistogram::Histogram;

use super::snapshot::{ConnectionView, EndpointView, Latency, MethodView, PoolView};
use crate::{
    handshake::Role,
    mux::{Connection, WeakConnection},
    pool::PoolWatch,
    rpc::{Code, End, MethodObserver},
};

/// Methods kept, per end: past them, calls to others are not shown (a
/// peer naming methods at random cannot grow the registry).
const MAX_METHODS: usize = 1024;

/// A method: its end (`client` or `server`), service and name.
type MethodKey = (&'static str, String, String);

#[derive(Default)]
pub(super) struct Registry {
    connections: Mutex<Vec<WeakConnection>>,
    pools: Mutex<Vec<PoolWatch>>,
    methods: Mutex<BTreeMap<MethodKey, Arc<MethodStats>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> crate::sync::Locked<'_, T> {
    crate::sync::lock(mutex)
}

impl Registry {
    /// A connection was built.
    pub(super) fn add_connection(&self, conn: &Connection) {
        let mut connections = lock(&self.connections);
        // Those ended go as others come, so the list stays the size of
        // what is open.
        if connections.len() >= 64 && connections.len().is_power_of_two() {
            connections.retain(|weak| weak.upgrade().is_some_and(|c| !c.is_closed()));
        }
        connections.push(conn.downgrade());
    }

    /// A pool was built.
    pub(super) fn add_pool(&self, pool: PoolWatch) {
        let mut pools = lock(&self.pools);
        pools.retain(|pool| !pool.is_gone());
        pools.push(pool);
    }

    /// The stats of a method, if there is room for them.
    pub(super) fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver> {
        let (service, name) = method.rsplit_once('/').unwrap_or(("", method));
        let mut methods = lock(&self.methods);
        let key = (end.as_str(), service.to_owned(), name.to_owned());
        if let Some(found) = methods.get(&key) {
            return found.clone();
        }
        if methods.len() >= 2 * MAX_METHODS {
            return Arc::new(());
        }
        methods.entry(key).or_default().clone()
    }

    pub(super) fn connections(&self) -> Vec<ConnectionView> {
        let mut live = Vec::new();
        lock(&self.connections).retain(|weak| match weak.upgrade() {
            Some(conn) if !conn.is_closed() => {
                live.push(conn);
                true
            }
            _ => false,
        });
        live.iter().map(view_of).collect()
    }

    pub(super) fn pools(&self) -> Vec<PoolView> {
        let pools: Vec<PoolWatch> = lock(&self.pools).clone();
        pools.iter().filter_map(pool_view).collect()
    }

    pub(super) fn methods(&self) -> Vec<MethodView> {
        lock(&self.methods)
            .iter()
            .map(|((end, service, method), stats)| stats.view(end, service, method))
            .collect()
    }
}

/// A pool as the view shows it, unless it is gone.
fn pool_view(pool: &PoolWatch) -> Option<PoolView> {
    let stats = pool.stats()?;
    let mut endpoints: Vec<EndpointView> = pool
        .endpoints()?
        .into_iter()
        .map(|es| EndpointView {
            endpoint: es.endpoint.target().to_string(),
            expected_peer: es.endpoint.expected_peer().map(ToString::to_string),
            protocol: es.endpoint.expected_protocol().map(str::to_owned),
            connections: es.connections,
            dialing: es.dialing,
            failures: es.failures,
        })
        .collect();
    endpoints.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    Some(PoolView {
        endpoints,
        waiters: stats.waiters,
        dials: stats.dials,
        dial_failures: stats.dial_failures,
        streams_opened: stats.streams_opened,
    })
}

fn view_of(conn: &Connection) -> ConnectionView {
    let agreement = conn.agreement();
    let stats = conn.stats();
    ConnectionView {
        id: conn.id(),
        role: match agreement.role() {
            Role::Dialer => "dialer",
            Role::Acceptor => "acceptor",
        },
        peer: conn.peer().map(ToString::to_string),
        remote_addr: conn.remote_addr().map(|addr| addr.to_string()),
        suite: agreement.suite().name().to_owned(),
        version: agreement.version(),
        protocol: agreement.protocol().map(str::to_owned),
        age_ms: millis(conn.age()),
        handshake_us: micros(conn.handshake_time()),
        early_data: conn.early_data().as_str(),
        rtt_us: stats.rtt.map(micros),
        streams_open: stats.open_streams,
        streams_counted: stats.streams_counted,
        peer_streams_counted: stats.peer_streams_counted,
        bytes_sent: stats.bytes_sent,
        bytes_received: stats.bytes_received,
        records_sent: stats.records_sent,
        records_received: stats.records_received,
        buffered: stats.buffered,
        queued: stats.queued,
        recv_window: stats.recv_window,
        send_credit: stats.send_credit,
        going_away: conn.is_going_away(),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// gRPC's status codes, 0 to 16.
const CODES: usize = 17;

/// One method's calls: counted by status, their durations in a histogram
/// (microseconds, two significant digits: a few KiB).
pub(super) struct MethodStats {
    by_code: [AtomicU64; CODES],
    durations: Mutex<Histogram<u64>>,
}

impl Default for MethodStats {
    fn default() -> Self {
        Self {
            by_code: std::array::from_fn(|_| AtomicU64::new(0)),
            // 1 µs to an hour; records past it saturate.
            durations: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 2)
                    .expect("a valid range and precision, constants"),
            ),
        }
    }
}

impl MethodObserver for MethodStats {
    fn finished(&self, code: Code, took: Duration) {
        self.by_code[(code.as_u32() as usize).min(CODES - 1)].fetch_add(1, Ordering::Relaxed);
        lock(&self.durations).saturating_record(micros(took).max(1));
    }
}

impl MethodStats {
    fn view(&self, side: &'static str, service: &str, method: &str) -> MethodView {
        let by_status: BTreeMap<&'static str, u64> = self
            .by_code
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then(|| (Code::from_u32(i as u32).name(), n))
            })
            .collect();
        let durations = lock(&self.durations);
        let latency = if durations.is_empty() {
            Latency::default()
        } else {
            Latency {
                p50: durations.value_at_quantile(0.5),
                p90: durations.value_at_quantile(0.9),
                p99: durations.value_at_quantile(0.99),
                max: durations.max(),
            }
        };
        MethodView {
            side,
            service: service.to_owned(),
            method: method.to_owned(),
            calls: by_status.values().sum(),
            by_status,
            latency_us: latency,
        }
    }
}
