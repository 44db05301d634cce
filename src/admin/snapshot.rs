//! What the live view shows: a snapshot of the process's connections,
//! pools and RPC methods, serializable (JSON, for the page and for you).

use std::collections::BTreeMap;

use serde::Serialize;

/// The process's weft state at one moment ([`Admin::snapshot`](super::Admin::snapshot)).
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Snapshot {
    /// When it was taken, in milliseconds since the Unix epoch.
    pub taken_at_unix_ms: u64,
    /// The connections open (built since the view was enabled).
    pub connections: Vec<ConnectionView>,
    /// The pools, and their endpoints.
    pub pools: Vec<PoolView>,
    /// The RPC methods called or served.
    pub methods: Vec<MethodView>,
}

/// One connection.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ConnectionView {
    /// The process's number for it (the pools list their connections by it).
    pub id: u64,
    /// `dialer` or `acceptor`.
    pub role: &'static str,
    /// The peer's verified key, if any.
    pub peer: Option<String>,
    /// The peer's address, where known.
    pub remote_addr: Option<String>,
    /// The cipher suite.
    pub suite: String,
    /// The protocol version.
    pub version: u32,
    /// The agreed application protocol, if any.
    pub protocol: Option<String>,
    /// Milliseconds since it was built.
    pub age_ms: u64,
    /// How long its handshake took, in microseconds.
    pub handshake_us: u64,
    /// What became of early data (0-RTT) on it: `none`, `accepted` (its
    /// first stream answered in the first round trip) or `refused`.
    pub early_data: &'static str,
    /// The last round trip measured, in microseconds.
    pub rtt_us: Option<u64>,
    /// Streams open (handles held).
    pub streams_open: usize,
    /// Streams our side opened that the peer's limit counts.
    pub streams_counted: u32,
    /// The peer's streams our limit counts.
    pub peer_streams_counted: u32,
    /// Stream bytes each way.
    pub bytes_sent: u64,
    /// Stream bytes received.
    pub bytes_received: u64,
    /// Records each way.
    pub records_sent: u64,
    /// Records received.
    pub records_received: u64,
    /// Bytes received and not yet read by the application: what the
    /// receive windows hold.
    pub buffered: u64,
    /// Bytes queued to send: what waits for the peer's windows.
    pub queued: u64,
    /// The connection's receive window now.
    pub recv_window: u64,
    /// Bytes the peer's connection window lets us send now.
    pub send_credit: u64,
    /// Whether it is going away (no new streams).
    pub going_away: bool,
}

/// One pool.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PoolView {
    /// Its endpoints, with what is pooled for each.
    pub endpoints: Vec<EndpointView>,
    /// Calls waiting for a stream.
    pub waiters: usize,
    /// Dials made, and failed.
    pub dials: u64,
    /// Dials that failed.
    pub dial_failures: u64,
    /// Streams opened.
    pub streams_opened: u64,
}

/// One endpoint of a pool.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct EndpointView {
    /// Where it is: an address, or a host name and port.
    pub endpoint: String,
    /// The key its peer must present, if pinned.
    pub expected_peer: Option<String>,
    /// The application protocol it must agree, if any.
    pub protocol: Option<String>,
    /// Its pooled connections, by [`ConnectionView::id`].
    pub connections: Vec<u64>,
    /// Whether a dial is under way.
    pub dialing: bool,
    /// Dials failed in a row.
    pub failures: u32,
}

/// One RPC method, on one side.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct MethodView {
    /// `client` or `server`.
    pub side: &'static str,
    /// The service (`weft.examples.Echo`).
    pub service: String,
    /// The method (`Say`).
    pub method: String,
    /// Calls finished.
    pub calls: u64,
    /// Calls finished, by status (`OK`, `NOT_FOUND`, ...).
    pub by_status: BTreeMap<&'static str, u64>,
    /// Their durations' quantiles, in microseconds.
    pub latency_us: Latency,
}

/// Quantiles of durations, in microseconds (0 before any call).
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[non_exhaustive]
pub struct Latency {
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The longest.
    pub max: u64,
}
