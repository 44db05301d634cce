//! Calls started and finished, and their durations, per method: the
//! handles registered once per method (and status), then used per call.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use metrics::{Counter, Histogram, Label};

use super::Metrics;
use crate::rpc::{Code, End, MethodObserver, Observer};

/// gRPC's status codes, 0 to 16.
const CODES: usize = 17;

/// The names of an end's calls started and of their durations.
fn names(end: End) -> (&'static str, &'static str) {
    match end {
        End::Client => (super::RPC_CLIENT_CALLS_STARTED, super::RPC_CLIENT_DURATION),
        End::Server => (super::RPC_SERVER_CALLS_STARTED, super::RPC_SERVER_DURATION),
    }
}

/// Reports calls to the `metrics` facade, per method.
impl Observer for Metrics {
    fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver> {
        Arc::new(MethodMetrics::new(end, method))
    }
}

/// One method's handles: started, and the duration per status (registered
/// at the status's first call; its count is the calls finished).
struct MethodMetrics {
    end: End,
    labels: [Label; 2],
    started: Counter,
    finished: [OnceLock<Histogram>; CODES],
}

impl MethodMetrics {
    fn new(end: End, method: &str) -> Self {
        let labels = [
            Label::new("rpc.system.name", super::RPC_SYSTEM),
            Label::new("rpc.method", method.to_owned()),
        ];
        let started = metrics::counter!(names(end).0, labels.to_vec());
        Self {
            end,
            labels,
            started,
            finished: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl MethodObserver for MethodMetrics {
    fn started(&self) {
        self.started.increment(1);
    }

    fn finished(&self, code: Code, took: Duration) {
        let index = (code as usize).min(CODES - 1);
        self.finished[index]
            .get_or_init(|| {
                let mut labels = self.labels.to_vec();
                labels.push(Label::new("rpc.response.status_code", code.name()));
                metrics::histogram!(names(self.end).1, labels)
            })
            .record(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    #[test]
    fn calls_are_counted_per_method_and_timed_per_status() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let method = Metrics::new().method(End::Server, "weft.examples.Echo/Say");
            for code in [Code::Ok, Code::Ok, Code::NotFound, Code::Cancelled] {
                method.started();
                method.finished(code, Duration::from_millis(1));
            }
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
}
