//! What weft records through the [`metrics`] facade (the feature
//! `metrics`, on by default): install a recorder (metrics-exporter-prometheus,
//! say), and hand [`Metrics`] to the servers, clients, pools and stacks
//! that should report to it (each takes an `observer`); without a
//! recorder, each record is a no-op, and what is handed no observer
//! records nothing.
//!
//! Names follow OpenTelemetry's RPC semantic conventions (v1.45, stable)
//! where they apply; durations are in seconds.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `rpc.server.call.duration`, `rpc.client.call.duration` | histogram | `rpc.system.name` (`weft`), `rpc.method` (`package.Service/Method`), `rpc.response.status_code` (`OK`, `NOT_FOUND`, ...) |
//! | `weft.rpc.server.call.started`, `weft.rpc.client.call.started` | counter | `rpc.system.name`, `rpc.method` |
//! | `weft.handshakes` | counter | `role`, `result` (`ok` or the error's kind) |
//! | `weft.handshake.duration` | histogram | `role` |
//! | `weft.handshake.early_data` | counter | `role`, `outcome` (`accepted`, `refused`): early data (0-RTT) a dialer sent, or an acceptor was offered |
//! | `weft.connections.open` | gauge | `role` |
//! | `weft.streams.open` | gauge | |
//! | `weft.bytes.sent`, `weft.bytes.received` | counter | |
//! | `weft.records.sent`, `weft.records.received` | counter | |
//! | `weft.key_updates.sent`, `weft.key_updates.received` | counter | |
//! | `weft.budget.violations` | counter | `kind` (the budget a peer exceeded) |
//! | `weft.pool.connections` | gauge | |
//! | `weft.pool.dials`, `weft.pool.dial_failures` | counter | `endpoint` |
//! | `weft.pool.waiters` | gauge | |
//!
//! A call's duration is recorded when it ends: on the server when its
//! status is sent (or the call is reset); on the client when the caller
//! has its status (the one reply of a unary or client-streaming call, the
//! end of a streaming call's replies, or the error), or, if the caller
//! drops the call or its replies before that, as `CANCELLED`. The
//! histogram's count is the calls finished; started less finished is the
//! calls in flight.
//!
//! A server names the methods of the services it serves, and a client
//! those it calls, up to 256 methods each; a server's calls to services it
//! does not serve, and the calls past that cap, count under `rpc.method`
//! `_OTHER`, so a peer naming methods at random adds no series.
//!
//! The pool's dial counters carry the endpoint dialed: a counter stops
//! moving once its endpoint is gone from the pool, and an exporter's idle
//! timeout (for counters and histograms: README's example) drops it, so
//! endpoints churned by discovery leave no series behind. Gauges carry no
//! endpoint (an idle timeout would drop a current value).
//!
//! Bytes, records and key updates are counted over all connections, as
//! each connection's driver reports them (at most once a second, and when
//! the connection ends); per connection, see the live view
//! (`weft::admin`, feature `admin`) or
//! [`Connection::stats`](crate::mux::Connection::stats).
//!
//! [`metrics`]: https://docs.rs/metrics

mod connection;
mod pool;
mod rpc;

/// Reports what it observes to the [`metrics`] facade, under the names
/// above: hand it to what should report ([`mux::Builder::observer`],
/// [`Multiplex::observer`](crate::stack::Multiplex::observer) for a whole stack,
/// [`pool::Builder::observer`], [`rpc::server::Builder::observer`],
/// [`Client::observer`](crate::rpc::client::Client::observer)); alone, or
/// paired with the live view as `(Metrics::new(), admin)`.
///
/// [`mux::Builder::observer`]: crate::mux::Builder::observer
/// [`pool::Builder::observer`]: crate::pool::Builder::observer
/// [`rpc::server::Builder::observer`]: crate::rpc::server::Builder::observer
///
/// ```
/// use weft::{metrics::Metrics, pool::Pool, rpc::server::Server};
///
/// let pool = Pool::builder().observer(Metrics::new());
/// let server = Server::builder().observer(Metrics::new());
/// # let _ = (pool, server);
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Metrics;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The metrics observer (it describes the metrics to the recorder, the
    /// first time one is made).
    pub fn new() -> Self {
        describe_once();
        Self
    }
}

/// [`describe`], once per process.
fn describe_once() {
    static DESCRIBED: std::sync::Once = std::sync::Once::new();
    DESCRIBED.call_once(describe);
}

/// Histogram buckets, in seconds, that suit weft's durations (calls and
/// handshakes): from 100 µs (a call on one host) to 30 s (a long call),
/// about three to a decade. Prometheus exporters render a histogram
/// without buckets as a summary, which cannot be added up across
/// processes; give them these:
///
/// ```
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
///
/// let prometheus = PrometheusBuilder::new()
///     .set_buckets_for_metric(Matcher::Suffix("duration".into()), weft::metrics::DURATION_BUCKETS)
///     .unwrap();
/// ```
pub const DURATION_BUCKETS: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0,
];

/// `rpc.system.name`'s value.
pub(crate) const RPC_SYSTEM: &str = "weft";

/// RPC call durations on the server, in seconds, by status.
pub(crate) const RPC_SERVER_DURATION: &str = "rpc.server.call.duration";
/// RPC call durations on the client, in seconds, by status.
pub(crate) const RPC_CLIENT_DURATION: &str = "rpc.client.call.duration";
/// RPC calls a server began.
pub(crate) const RPC_SERVER_CALLS_STARTED: &str = "weft.rpc.server.call.started";
/// RPC calls a client began.
pub(crate) const RPC_CLIENT_CALLS_STARTED: &str = "weft.rpc.client.call.started";
/// Handshakes, by role and result.
pub(crate) const HANDSHAKES: &str = "weft.handshakes";
/// Early data sent (dialing) or offered (accepting), by role and outcome
/// (`accepted`, `refused`).
pub(crate) const EARLY_DATA: &str = "weft.handshake.early_data";
/// Handshake durations, in seconds, by role.
pub(crate) const HANDSHAKE_DURATION: &str = "weft.handshake.duration";
/// Connections open, by role.
pub(crate) const CONNECTIONS_OPEN: &str = "weft.connections.open";
/// Streams open, all connections together.
pub(crate) const STREAMS_OPEN: &str = "weft.streams.open";
/// Stream bytes sent, all connections together.
pub(crate) const BYTES_SENT: &str = "weft.bytes.sent";
/// Stream bytes received, all connections together.
pub(crate) const BYTES_RECEIVED: &str = "weft.bytes.received";
/// Records sent, all connections together.
pub(crate) const RECORDS_SENT: &str = "weft.records.sent";
/// Records received, all connections together.
pub(crate) const RECORDS_RECEIVED: &str = "weft.records.received";
/// Key updates sent (protocol version 2).
pub(crate) const KEY_UPDATES_SENT: &str = "weft.key_updates.sent";
/// Key updates received (protocol version 2).
pub(crate) const KEY_UPDATES_RECEIVED: &str = "weft.key_updates.received";
/// Connections ended because the peer exceeded a budget, by budget.
pub(crate) const BUDGET_VIOLATIONS: &str = "weft.budget.violations";
/// Connections a pool holds, by endpoint.
pub(crate) const POOL_CONNECTIONS: &str = "weft.pool.connections";
/// Dials a pool made, by endpoint.
pub(crate) const POOL_DIALS: &str = "weft.pool.dials";
/// Dials that failed, by endpoint.
pub(crate) const POOL_DIAL_FAILURES: &str = "weft.pool.dial_failures";
/// Calls waiting for a pool's stream.
pub(crate) const POOL_WAITERS: &str = "weft.pool.waiters";

/// Describes every metric (its unit and meaning) to the recorder: done
/// once, by the first [`Metrics`] made; call it yourself after installing
/// a recorder later than that.
pub fn describe() {
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            RPC_SERVER_DURATION,
            Unit::Seconds,
            "Durations of the RPC calls the server finished, by status"
        );
        describe_histogram!(
            RPC_CLIENT_DURATION,
            Unit::Seconds,
            "Durations of the RPC calls the client finished, by status"
        );
        describe_counter!(RPC_SERVER_CALLS_STARTED, "RPC calls the server began");
        describe_counter!(RPC_CLIENT_CALLS_STARTED, "RPC calls the client began");
        describe_counter!(HANDSHAKES, "weft handshakes, by role and result");
        describe_histogram!(HANDSHAKE_DURATION, Unit::Seconds, "weft handshakes' durations");
        describe_counter!(
            EARLY_DATA,
            "early data (0-RTT) sent (dialer) or offered (acceptor), by role and outcome: accepted or refused"
        );
        describe_gauge!(CONNECTIONS_OPEN, "weft connections open");
        describe_gauge!(STREAMS_OPEN, "weft streams open");
        describe_counter!(BYTES_SENT, Unit::Bytes, "stream bytes sent");
        describe_counter!(BYTES_RECEIVED, Unit::Bytes, "stream bytes received");
        describe_counter!(RECORDS_SENT, "records sent");
        describe_counter!(RECORDS_RECEIVED, "records received");
        describe_counter!(KEY_UPDATES_SENT, "key updates sent");
        describe_counter!(KEY_UPDATES_RECEIVED, "key updates received");
        describe_counter!(BUDGET_VIOLATIONS, "connections ended for a peer past a budget");
        describe_gauge!(POOL_CONNECTIONS, "connections the pools hold");
        describe_counter!(POOL_DIALS, "dials a pool made, by endpoint");
        describe_counter!(POOL_DIAL_FAILURES, "dials that failed, by endpoint");
        describe_gauge!(POOL_WAITERS, "calls waiting for a pool's stream");
    }
}
