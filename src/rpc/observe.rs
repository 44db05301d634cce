//! What a server or client tells the observer it was handed
//! ([`server::Builder::observer`](super::server::Builder::observer),
//! [`Client::observer`](super::client::Client::observer)): each call's
//! start, and its end with its status and duration.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    sync::{Arc, RwLock},
    time::{Duration, Instant},
};

use super::Code;

/// Which end of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// The caller.
    Client,
    /// The callee.
    Server,
}

impl End {
    /// `client` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            End::Client => "client",
            End::Server => "server",
        }
    }
}

/// Told of a server's or a client's calls, per method. A pair `(A, B)`
/// of observers tells both.
pub trait Observer: Send + Sync + 'static {
    /// Calls to `method` (`package.Service/Method`) will be made at this
    /// `end`: what this returns is told of each. Asked once per method,
    /// for at most 256 methods per server or client; calls past those,
    /// and a server's calls to services it does not serve (a peer naming
    /// methods at random), are told to the method [`OTHER_METHOD`].
    fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver>;
}

/// Told of the calls to one method.
pub trait MethodObserver: Send + Sync + 'static {
    /// A call began (its header was sent, or received).
    fn started(&self) {}

    /// A call ended with `code`, `took` after it began. A call its caller
    /// gave up on (dropped its future or its replies) ends `CANCELLED`.
    fn finished(&self, code: Code, took: Duration) {
        let _ = (code, took);
    }
}

/// The method that calls to methods not named on their own are told to.
pub const OTHER_METHOD: &str = "_OTHER";

impl MethodObserver for () {}

impl Observer for () {
    fn method(&self, _: End, _: &str) -> Arc<dyn MethodObserver> {
        Arc::new(())
    }
}

impl<A: Observer, B: Observer> Observer for (A, B) {
    fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver> {
        Arc::new((self.0.method(end, method), self.1.method(end, method)))
    }
}

impl MethodObserver for (Arc<dyn MethodObserver>, Arc<dyn MethodObserver>) {
    fn started(&self) {
        self.0.started();
        self.1.started();
    }

    fn finished(&self, code: Code, took: Duration) {
        self.0.finished(code, took);
        self.1.finished(code, took);
    }
}

/// Methods a server or client keeps observers for.
const MAX_METHODS: usize = 256;

/// The observers of one server's or client's methods, asked for once per
/// method and kept.
pub(crate) struct Methods {
    observer: Arc<dyn Observer>,
    end: End,
    /// A server's services: calls to any other are told to
    /// [`OTHER_METHOD`], so a peer naming services at random takes no
    /// method's own entry.
    served: Option<HashSet<&'static str>>,
    methods: RwLock<HashMap<Box<str>, Arc<dyn MethodObserver>>>,
}

impl fmt::Debug for Methods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Methods")
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl Methods {
    /// A client's: every method it calls is named.
    pub(crate) fn client(observer: Arc<dyn Observer>) -> Arc<Self> {
        Self::new(observer, End::Client, None)
    }

    /// A server's, serving these services.
    pub(crate) fn server(
        observer: Arc<dyn Observer>,
        services: impl IntoIterator<Item = &'static str>,
    ) -> Arc<Self> {
        Self::new(observer, End::Server, Some(services.into_iter().collect()))
    }

    fn new(observer: Arc<dyn Observer>, end: End, served: Option<HashSet<&'static str>>) -> Arc<Self> {
        Arc::new(Self {
            observer,
            end,
            served,
            methods: RwLock::new(HashMap::new()),
        })
    }

    /// Whether calls to `method` are told under its own name.
    fn named(&self, method: &str) -> bool {
        self.served.as_ref().is_none_or(|served| {
            let service = method.trim_start_matches('/').rsplit_once('/').map(|(s, _)| s);
            service.is_some_and(|service| served.contains(service))
        })
    }

    fn method(&self, method: &str) -> Arc<dyn MethodObserver> {
        if let Some(found) = crate::sync::read(&self.methods).get(method) {
            return found.clone();
        }
        let mut methods = crate::sync::write(&self.methods);
        let key = if methods.len() < MAX_METHODS && self.named(method) {
            method
        } else {
            OTHER_METHOD
        };
        if let Some(found) = methods.get(key) {
            return found.clone();
        }
        let observer = self.observer.method(self.end, key.trim_start_matches('/'));
        methods.insert(key.into(), observer.clone());
        observer
    }

    /// A call to `method` begins: told, and timed until
    /// [`CallTimer::finish`].
    pub(crate) fn start(&self, method: &str) -> CallTimer {
        let method = self.method(method);
        method.started();
        CallTimer {
            running: Some((method, Instant::now())),
        }
    }
}

/// A call in flight, for its duration and status: told when it
/// [finishes](Self::finish), or, dropped unfinished, as `CANCELLED` (the
/// caller gave up on the call: dropped its future or its replies).
pub(crate) struct CallTimer {
    /// `None` once told.
    running: Option<(Arc<dyn MethodObserver>, Instant)>,
}

impl CallTimer {
    /// The call ended with `code`.
    pub(crate) fn finish(mut self, code: Code) {
        self.record(code);
    }

    fn record(&mut self, code: Code) {
        if let Some((method, started)) = self.running.take() {
            method.finished(code, started.elapsed());
        }
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        self.record(Code::Cancelled);
    }
}

impl fmt::Debug for CallTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallTimer")
            .field("running", &self.running.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records the methods it was asked for, and each call's end.
    #[derive(Default)]
    struct Recorded {
        asked: Mutex<Vec<(End, String)>>,
        ends: Arc<Mutex<Vec<(String, Code)>>>,
    }

    struct Ends(String, Arc<Mutex<Vec<(String, Code)>>>);

    impl MethodObserver for Ends {
        fn finished(&self, code: Code, _: Duration) {
            self.1.lock().unwrap().push((self.0.clone(), code));
        }
    }

    impl Observer for Arc<Recorded> {
        fn method(&self, end: End, method: &str) -> Arc<dyn MethodObserver> {
            self.asked.lock().unwrap().push((end, method.to_owned()));
            Arc::new(Ends(method.to_owned(), self.ends.clone()))
        }
    }

    #[test]
    fn each_call_ends_once_with_its_code_and_a_timer_dropped_is_a_cancel() {
        let recorded = Arc::new(Recorded::default());
        let methods = Methods::server(Arc::new(recorded.clone()), ["weft.examples.Echo"]);
        for code in [Code::Ok, Code::NotFound] {
            methods.start("/weft.examples.Echo/Say").finish(code);
        }
        drop(methods.start("/weft.examples.Echo/Say"));
        assert_eq!(
            *recorded.asked.lock().unwrap(),
            [(End::Server, "weft.examples.Echo/Say".to_owned())],
            "asked once per method, without the leading slash"
        );
        let ends: Vec<Code> = recorded.ends.lock().unwrap().iter().map(|(_, c)| *c).collect();
        assert_eq!(ends, [Code::Ok, Code::NotFound, Code::Cancelled]);
    }

    #[test]
    fn methods_past_the_cap_share_one_entry() {
        let recorded = Arc::new(Recorded::default());
        let methods = Methods::client(Arc::new(recorded.clone()));
        for i in 0..MAX_METHODS + 50 {
            methods.start(&format!("/s/m{i}")).finish(Code::Unimplemented);
        }
        assert_eq!(methods.methods.read().unwrap().len(), MAX_METHODS + 1);
        assert_eq!(recorded.asked.lock().unwrap().len(), MAX_METHODS + 1);
        let others = recorded
            .ends
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == OTHER_METHOD)
            .count();
        assert_eq!(others, 50);
    }

    #[test]
    fn a_servers_calls_to_services_it_does_not_serve_share_one_entry() {
        let recorded = Arc::new(Recorded::default());
        let methods = Methods::server(Arc::new(recorded.clone()), ["weft.examples.Echo"]);
        methods.start("/weft.examples.Echo/Say").finish(Code::Ok);
        for i in 0..10 {
            methods.start(&format!("/s{i}/m")).finish(Code::Unimplemented);
        }
        methods.start("no slash").finish(Code::Unimplemented);
        let mut keys: Vec<_> = methods
            .methods
            .read()
            .unwrap()
            .keys()
            .map(|k| k.to_string())
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["/weft.examples.Echo/Say", OTHER_METHOD]);
    }
}
