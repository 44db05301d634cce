//! Connections and handshakes: the counters a connection's driver adds
//! its traffic to, and the handshakes a stack runs.

use std::time::Instant;

use metrics::{Counter, Gauge, Histogram};

use super::Totals;

use crate::{
    error::{Error, ErrorKind, Repr, Violation},
    handshake::{EarlyData, Role},
};

/// One connection's share of the counters: what it added so far, to add
/// only what is new.
pub(crate) struct ConnectionMetrics {
    bytes_sent: Counter,
    bytes_received: Counter,
    records_sent: Counter,
    records_received: Counter,
    key_updates_sent: Counter,
    key_updates_received: Counter,
    streams_open: Gauge,
    connections_open: Gauge,
    reported: Totals,
}

impl std::fmt::Debug for ConnectionMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionMetrics")
            .field("reported", &self.reported)
            .finish_non_exhaustive()
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Dialer => "dialer",
        Role::Acceptor => "acceptor",
    }
}

impl ConnectionMetrics {
    /// A connection of `role` opens.
    pub(crate) fn open(role: Role) -> Self {
        super::describe_once();
        let connections_open = metrics::gauge!(super::CONNECTIONS_OPEN, "role" => role_name(role));
        connections_open.increment(1.0);
        Self {
            bytes_sent: metrics::counter!(super::BYTES_SENT),
            bytes_received: metrics::counter!(super::BYTES_RECEIVED),
            records_sent: metrics::counter!(super::RECORDS_SENT),
            records_received: metrics::counter!(super::RECORDS_RECEIVED),
            key_updates_sent: metrics::counter!(super::KEY_UPDATES_SENT),
            key_updates_received: metrics::counter!(super::KEY_UPDATES_RECEIVED),
            streams_open: metrics::gauge!(super::STREAMS_OPEN),
            connections_open,
            reported: Totals::default(),
        }
    }

    /// Adds what changed since the last report.
    pub(crate) fn report(&mut self, totals: Totals) {
        let was = std::mem::replace(&mut self.reported, totals);
        let add = |counter: &Counter, now: u64, was: u64| {
            if now > was {
                counter.increment(now - was);
            }
        };
        add(&self.bytes_sent, totals.bytes_sent, was.bytes_sent);
        add(&self.bytes_received, totals.bytes_received, was.bytes_received);
        add(&self.records_sent, totals.records_sent, was.records_sent);
        add(
            &self.records_received,
            totals.records_received,
            was.records_received,
        );
        add(
            &self.key_updates_sent,
            totals.key_updates_sent,
            was.key_updates_sent,
        );
        add(
            &self.key_updates_received,
            totals.key_updates_received,
            was.key_updates_received,
        );
        if totals.open_streams != was.open_streams {
            self.streams_open
                .increment(totals.open_streams as f64 - was.open_streams as f64);
        }
    }

    /// The connection ended with `error`: its last traffic reported, its
    /// streams and itself no longer open, and a budget the peer exceeded
    /// counted.
    pub(crate) fn close(mut self, mut totals: Totals, error: Option<&Error>) {
        totals.open_streams = 0;
        self.report(totals);
        self.connections_open.decrement(1.0);
        if let Some(kind) = error.and_then(budget_exceeded) {
            metrics::counter!(super::BUDGET_VIOLATIONS, "kind" => kind).increment(1);
        }
    }
}

/// The budget `error` says the peer exceeded, if it does.
fn budget_exceeded(error: &Error) -> Option<&'static str> {
    match (error.repr(), error.violation()) {
        (_, Some(Violation::PingFlood(_))) => Some("pings"),
        (_, Some(Violation::PendingResetFlood(_))) => Some("pending_accept_resets"),
        (_, Some(Violation::ResetFlood(_))) => Some("resets"),
        (_, Some(Violation::ControlFlood { .. })) => Some("control_frames"),
        (Repr::KeyUpdateFlood(_), _) => Some("key_updates"),
        _ => None,
    }
}

/// The handshakes of one stack.
#[derive(Clone)]
pub(crate) struct HandshakeMetrics {
    role: Role,
    ok: Counter,
    duration: Histogram,
}

impl std::fmt::Debug for HandshakeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeMetrics")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl HandshakeMetrics {
    pub(crate) fn new(role: Role) -> Self {
        super::describe_once();
        let role_label = role_name(role);
        Self {
            role,
            ok: metrics::counter!(super::HANDSHAKES, "role" => role_label, "result" => "ok"),
            duration: metrics::histogram!(super::HANDSHAKE_DURATION, "role" => role_label),
        }
    }

    /// A handshake begun at `started` ended with `result`.
    pub(crate) fn finished<T>(&self, started: Instant, result: &Result<T, Error>) {
        match result {
            Ok(_) => {
                self.ok.increment(1);
                self.duration.record(started.elapsed().as_secs_f64());
            }
            // (Failures are rarer, and their kinds many: registered as they come.)
            Err(err) => metrics::counter!(
                super::HANDSHAKES,
                "role" => role_name(self.role),
                "result" => failure_kind(err)
            )
            .increment(1),
        }
    }
}

impl HandshakeMetrics {
    /// Early data went with a handshake (dialing) or came with it
    /// (accepting), and was accepted or refused.
    pub(crate) fn early_data(&self, outcome: EarlyData) {
        if outcome != EarlyData::None {
            metrics::counter!(
                super::EARLY_DATA,
                "role" => role_name(self.role),
                "outcome" => outcome.as_str()
            )
            .increment(1);
        }
    }
}

/// A short name for why a handshake failed, for the `result` label: its
/// kind (`timeout`, `authentication`, `negotiation`, ...).
fn failure_kind(err: &Error) -> &'static str {
    match err.kind() {
        ErrorKind::Io | ErrorKind::Connect | ErrorKind::Truncated => "transport",
        ErrorKind::Negotiation => "negotiation",
        ErrorKind::Authentication => "authentication",
        ErrorKind::Timeout => "timeout",
        ErrorKind::Closed => "refused",
        ErrorKind::NotAdmitted => "not_admitted",
        ErrorKind::Record => "record",
        _ => "protocol",
    }
}
