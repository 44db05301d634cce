//! Calls started and finished, and their durations, per method: the
//! handles registered once per method (and status), then used per call.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, OnceLock, RwLock},
    time::Instant,
};

use metrics::{Counter, Histogram, Label};

use crate::rpc::Code;

/// Methods a server or client keeps handles for; calls to others (a
/// peer naming methods at random) share one entry, `rpc.method` `_OTHER`.
const MAX_METHODS: usize = 256;

/// The entry of the methods past the cap, and of a server's calls to
/// services it does not serve (OpenTelemetry's value for a method not
/// recognized).
const OTHER: &str = "_OTHER";

/// gRPC's status codes, 0 to 16.
const CODES: usize = 17;

/// Which end of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RpcSide {
    Client,
    Server,
}

impl RpcSide {
    /// The names of its calls started and of their durations.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            RpcSide::Client => (super::RPC_CLIENT_CALLS_STARTED, super::RPC_CLIENT_DURATION),
            RpcSide::Server => (super::RPC_SERVER_CALLS_STARTED, super::RPC_SERVER_DURATION),
        }
    }
}

/// One method's handles: started, and the duration per status (registered
/// at the status's first call; its count is the calls finished).
struct MethodMetrics {
    side: RpcSide,
    labels: [Label; 2],
    started: Counter,
    finished: [OnceLock<Histogram>; CODES],
    /// The live view's stats of the method, if it was on.
    #[cfg(feature = "admin")]
    admin: Option<Arc<crate::admin::MethodStats>>,
}

impl MethodMetrics {
    fn new(side: RpcSide, method: &str) -> Self {
        let method = method.trim_start_matches('/');
        let labels = [
            Label::new("rpc.system.name", super::RPC_SYSTEM),
            Label::new("rpc.method", method.to_owned()),
        ];
        let started = metrics::counter!(side.names().0, labels.to_vec());
        #[cfg(feature = "admin")]
        let admin = crate::admin::registry().and_then(|registry| {
            let (service, name) = method.rsplit_once('/').unwrap_or(("", method));
            let side = match side {
                RpcSide::Client => "client",
                RpcSide::Server => "server",
            };
            registry.method(side, service, name)
        });
        Self {
            side,
            labels,
            started,
            finished: std::array::from_fn(|_| OnceLock::new()),
            #[cfg(feature = "admin")]
            admin,
        }
    }

    fn finished(&self, code: Code) -> &Histogram {
        let index = (code as usize).min(CODES - 1);
        self.finished[index].get_or_init(|| {
            let mut labels = self.labels.to_vec();
            labels.push(Label::new("rpc.response.status_code", code.name()));
            metrics::histogram!(self.side.names().1, labels)
        })
    }
}

/// The RPC metrics of one server or client.
pub(crate) struct RpcMetrics {
    side: RpcSide,
    /// A server's services: calls to any other count as [`OTHER`], so a
    /// peer naming services at random takes no method's own entry.
    served: Option<HashSet<&'static str>>,
    methods: RwLock<HashMap<Box<str>, Arc<MethodMetrics>>>,
}

impl std::fmt::Debug for RpcMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcMetrics")
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

impl RpcMetrics {
    /// A client's metrics: every method it calls is named.
    pub(crate) fn client() -> Arc<Self> {
        Self::new(RpcSide::Client, None)
    }

    /// A server's metrics, serving these services.
    pub(crate) fn server(services: impl IntoIterator<Item = &'static str>) -> Arc<Self> {
        Self::new(RpcSide::Server, Some(services.into_iter().collect()))
    }

    fn new(side: RpcSide, served: Option<HashSet<&'static str>>) -> Arc<Self> {
        super::describe_once();
        Arc::new(Self {
            side,
            served,
            methods: RwLock::new(HashMap::new()),
        })
    }

    /// Whether calls to `method` count under its own name.
    fn named(&self, method: &str) -> bool {
        self.served.as_ref().is_none_or(|served| {
            let service = method.trim_start_matches('/').rsplit_once('/').map(|(s, _)| s);
            service.is_some_and(|service| served.contains(service))
        })
    }

    fn method(&self, method: &str) -> Arc<MethodMetrics> {
        if let Some(found) = crate::sync::read(&self.methods).get(method) {
            return found.clone();
        }
        let mut methods = crate::sync::write(&self.methods);
        let key = if methods.len() < MAX_METHODS && self.named(method) {
            method
        } else {
            OTHER
        };
        methods
            .entry(key.into())
            .or_insert_with(|| Arc::new(MethodMetrics::new(self.side, key)))
            .clone()
    }

    /// A call to `method` begins: counted, and timed until
    /// [`CallTimer::finish`].
    pub(crate) fn start(&self, method: &str) -> CallTimer {
        let method = self.method(method);
        method.started.increment(1);
        CallTimer {
            running: Some((method, Instant::now())),
        }
    }
}

/// A call in flight, for its duration and status: recorded when it
/// [finishes](Self::finish), or, dropped unfinished, as `CANCELLED` (the
/// caller gave up on the call: dropped its future or its replies).
pub(crate) struct CallTimer {
    /// `None` once recorded.
    running: Option<(Arc<MethodMetrics>, Instant)>,
}

impl CallTimer {
    /// The call ended with `code`.
    pub(crate) fn finish(mut self, code: Code) {
        self.record(code);
    }

    fn record(&mut self, code: Code) {
        let Some((method, started)) = self.running.take() else {
            return;
        };
        let took = started.elapsed();
        method.finished(code).record(took.as_secs_f64());
        #[cfg(feature = "admin")]
        if let Some(stats) = &method.admin {
            stats.record(code, took);
        }
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

impl std::fmt::Debug for CallTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTimer")
            .field("running", &self.running.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    #[test]
    fn calls_are_counted_per_method_and_timed_per_status_and_a_timer_dropped_is_a_cancel() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let rpc = RpcMetrics::server(["weft.examples.Echo"]);
            for code in [Code::Ok, Code::Ok, Code::NotFound] {
                rpc.start("/weft.examples.Echo/Say").finish(code);
            }
            drop(rpc.start("/weft.examples.Echo/Say"));
        });
        let snapshot = snapshotter.snapshot().into_vec();
        let value = |name: &str, code: Option<&str>| {
            snapshot
                .iter()
                .filter(|(key, ..)| key.key().name() == name)
                .filter(|(key, ..)| {
                    let labels: Vec<_> = key.key().labels().map(|l| (l.key(), l.value())).collect();
                    labels.contains(&("rpc.system.name", "weft"))
                        && labels.contains(&("rpc.method", "weft.examples.Echo/Say"))
                        && code.is_none_or(|code| labels.contains(&("rpc.response.status_code", code)))
                })
                .map(|(.., value)| match value {
                    DebugValue::Counter(n) => *n as usize,
                    DebugValue::Histogram(values) => values.len(),
                    DebugValue::Gauge(_) => 0,
                })
                .sum::<usize>()
        };
        assert_eq!(value(super::super::RPC_SERVER_CALLS_STARTED, None), 4);
        assert_eq!(value(super::super::RPC_SERVER_DURATION, Some("OK")), 2);
        assert_eq!(value(super::super::RPC_SERVER_DURATION, Some("NOT_FOUND")), 1);
        assert_eq!(value(super::super::RPC_SERVER_DURATION, Some("CANCELLED")), 1);
        assert_eq!(value(super::super::RPC_SERVER_DURATION, None), 4);
    }

    #[test]
    fn methods_past_the_cap_share_one_entry() {
        let rpc = RpcMetrics::server(["s"]);
        for i in 0..MAX_METHODS + 50 {
            rpc.start(&format!("/s/m{i}")).finish(Code::Unimplemented);
        }
        assert_eq!(rpc.methods.read().unwrap().len(), MAX_METHODS + 1);
    }

    #[test]
    fn a_servers_calls_to_services_it_does_not_serve_share_one_entry() {
        let rpc = RpcMetrics::server(["weft.examples.Echo"]);
        rpc.start("/weft.examples.Echo/Say").finish(Code::Ok);
        for i in 0..10 {
            rpc.start(&format!("/s{i}/m")).finish(Code::Unimplemented);
        }
        rpc.start("no slash").finish(Code::Unimplemented);
        let methods = rpc.methods.read().unwrap();
        let mut keys: Vec<_> = methods.keys().map(|k| &**k).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["/weft.examples.Echo/Say", OTHER]);
    }
}
