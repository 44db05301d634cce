//! Connections and handshakes: what a stack's handshakes and its
//! connections' drivers report.

use std::time::Duration;

use super::Metrics;
use crate::{
    error::{Error, ErrorKind, Repr, Violation},
    handshake::{EarlyData, Role},
    mux::{Connection, ConnectionStats},
};

/// Reports handshakes, connections and their traffic to the `metrics`
/// facade (the names in the [module docs](crate::metrics)).
impl crate::mux::Observer for Metrics {
    fn handshake(&self, role: Role, took: Duration, result: Result<&Connection, &Error>) {
        let role = role_name(role);
        match result {
            Ok(conn) => {
                metrics::counter!(super::HANDSHAKES, "role" => role, "result" => "ok").increment(1);
                metrics::histogram!(super::HANDSHAKE_DURATION, "role" => role).record(took.as_secs_f64());
                let early = conn.early_data();
                if early != EarlyData::None {
                    metrics::counter!(super::EARLY_DATA, "role" => role, "outcome" => early.as_str())
                        .increment(1);
                }
            }
            Err(err) => {
                metrics::counter!(super::HANDSHAKES, "role" => role, "result" => failure_kind(err))
                    .increment(1);
            }
        }
    }

    fn opened(&self, conn: &Connection) {
        metrics::gauge!(super::CONNECTIONS_OPEN, "role" => role_name(conn.agreement().role())).increment(1.0);
    }

    fn traffic(&self, _: Role, was: &ConnectionStats, now: &ConnectionStats) {
        let add = |name: &'static str, now: u64, was: u64| {
            if now > was {
                metrics::counter!(name).increment(now - was);
            }
        };
        add(super::BYTES_SENT, now.bytes_sent, was.bytes_sent);
        add(super::BYTES_RECEIVED, now.bytes_received, was.bytes_received);
        add(super::RECORDS_SENT, now.records_sent, was.records_sent);
        add(
            super::RECORDS_RECEIVED,
            now.records_received,
            was.records_received,
        );
        add(
            super::KEY_UPDATES_SENT,
            now.key_updates_sent,
            was.key_updates_sent,
        );
        add(
            super::KEY_UPDATES_RECEIVED,
            now.key_updates_received,
            was.key_updates_received,
        );
        if now.open_streams != was.open_streams {
            metrics::gauge!(super::STREAMS_OPEN).increment(now.open_streams as f64 - was.open_streams as f64);
        }
    }

    fn closed(&self, role: Role, error: Option<&Error>) {
        metrics::gauge!(super::CONNECTIONS_OPEN, "role" => role_name(role)).decrement(1.0);
        if let Some(kind) = error.and_then(budget_exceeded) {
            metrics::counter!(super::BUDGET_VIOLATIONS, "kind" => kind).increment(1);
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Dialer => "dialer",
        Role::Acceptor => "acceptor",
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
