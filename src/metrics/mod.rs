//! What weft records through the [`metrics`] facade (the feature
//! `metrics`, on by default): install a recorder (metrics-exporter-prometheus,
//! say) before building servers, clients, pools and stacks, and they
//! report to it; without one, each record is a no-op.
//!
//! Names follow OpenTelemetry's RPC semantic conventions where they
//! apply; durations are in seconds.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `rpc.server.duration`, `rpc.client.duration` | histogram | `rpc.system`, `rpc.service`, `rpc.method`, `rpc.status_code` |
//! | `rpc.server.calls_started`, `rpc.client.calls_started` | counter | `rpc.system`, `rpc.service`, `rpc.method` |
//! | `rpc.server.calls_finished`, `rpc.client.calls_finished` | counter | the same and `rpc.status_code` |
//! | `weft.handshakes` | counter | `role`, `result` (`ok` or the error's kind) |
//! | `weft.handshake.duration` | histogram | `role` |
//! | `weft.connections.open` | gauge | `role` |
//! | `weft.streams.open` | gauge | |
//! | `weft.bytes.sent`, `weft.bytes.received` | counter | |
//! | `weft.records.sent`, `weft.records.received` | counter | |
//! | `weft.key_updates.sent`, `weft.key_updates.received` | counter | |
//! | `weft.budget.violations` | counter | `kind` (the budget a peer exceeded) |
//! | `weft.pool.connections` | gauge | `endpoint` |
//! | `weft.pool.dials`, `weft.pool.dial_failures` | counter | `endpoint` |
//! | `weft.pool.waiters` | gauge | |
//!
//! A server names the methods of the services it serves, and a client
//! those it calls, up to 256 methods each; a server's calls to services it
//! does not serve, and the calls past that cap, count under `rpc.service`
//! and `rpc.method` "other", so a peer naming methods at random adds no
//! series.
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
mod totals;

pub(crate) use connection::{ConnectionMetrics, HandshakeMetrics};
pub(crate) use pool::PoolMetrics;
pub(crate) use rpc::{CallTimer, RpcMetrics};
pub(crate) use totals::Totals;

/// [`describe`], once per process.
pub(crate) fn describe_once() {
    static DESCRIBED: std::sync::Once = std::sync::Once::new();
    DESCRIBED.call_once(describe);
}

/// `rpc.system`'s value.
pub(crate) const RPC_SYSTEM: &str = "weft";

/// RPC call durations on the server, in seconds.
pub(crate) const RPC_SERVER_DURATION: &str = "rpc.server.duration";
/// RPC call durations on the client, in seconds.
pub(crate) const RPC_CLIENT_DURATION: &str = "rpc.client.duration";
/// RPC calls a server began.
pub(crate) const RPC_SERVER_CALLS_STARTED: &str = "rpc.server.calls_started";
/// RPC calls a client began.
pub(crate) const RPC_CLIENT_CALLS_STARTED: &str = "rpc.client.calls_started";
/// RPC calls a server finished, by status.
pub(crate) const RPC_SERVER_CALLS_FINISHED: &str = "rpc.server.calls_finished";
/// RPC calls a client finished, by status.
pub(crate) const RPC_CLIENT_CALLS_FINISHED: &str = "rpc.client.calls_finished";
/// Handshakes, by role and result.
pub(crate) const HANDSHAKES: &str = "weft.handshakes";
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
/// once by the first server, client, pool or connection built; call it
/// yourself after installing a recorder later than that.
pub fn describe() {
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            RPC_SERVER_DURATION,
            Unit::Seconds,
            "RPC calls' durations on the server"
        );
        describe_histogram!(
            RPC_CLIENT_DURATION,
            Unit::Seconds,
            "RPC calls' durations on the client"
        );
        describe_counter!(RPC_SERVER_CALLS_STARTED, "RPC calls the server began");
        describe_counter!(RPC_CLIENT_CALLS_STARTED, "RPC calls the client began");
        describe_counter!(
            RPC_SERVER_CALLS_FINISHED,
            "RPC calls the server finished, by status"
        );
        describe_counter!(
            RPC_CLIENT_CALLS_FINISHED,
            "RPC calls the client finished, by status"
        );
        describe_counter!(HANDSHAKES, "weft handshakes, by role and result");
        describe_histogram!(HANDSHAKE_DURATION, Unit::Seconds, "weft handshakes' durations");
        describe_gauge!(CONNECTIONS_OPEN, "weft connections open");
        describe_gauge!(STREAMS_OPEN, "weft streams open");
        describe_counter!(BYTES_SENT, Unit::Bytes, "stream bytes sent");
        describe_counter!(BYTES_RECEIVED, Unit::Bytes, "stream bytes received");
        describe_counter!(RECORDS_SENT, "records sent");
        describe_counter!(RECORDS_RECEIVED, "records received");
        describe_counter!(KEY_UPDATES_SENT, "key updates sent");
        describe_counter!(KEY_UPDATES_RECEIVED, "key updates received");
        describe_counter!(BUDGET_VIOLATIONS, "connections ended for a peer past a budget");
        describe_gauge!(POOL_CONNECTIONS, "connections a pool holds, by endpoint");
        describe_counter!(POOL_DIALS, "dials a pool made, by endpoint");
        describe_counter!(POOL_DIAL_FAILURES, "dials that failed, by endpoint");
        describe_gauge!(POOL_WAITERS, "calls waiting for a pool's stream");
    }
}
