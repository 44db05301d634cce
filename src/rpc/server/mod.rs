//! The server: calls arrive on accepted streams and go through a tower
//! stack around a router by method name.
//!
//! ```no_run
//! # use weft::rpc::server::{Call, Reply, NamedService};
//! # #[derive(Clone)] struct Echo;
//! # impl NamedService for Echo { const NAME: &'static str = "echo.Echo"; }
//! # impl tower::Service<Call> for Echo {
//! #     type Response = Reply; type Error = weft::rpc::Status;
//! #     type Future = std::future::Ready<Result<Reply, weft::rpc::Status>>;
//! #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), weft::rpc::Status>> { std::task::Poll::Ready(Ok(())) }
//! #     fn call(&mut self, call: Call) -> Self::Future {
//! #         std::future::ready(Err(weft::rpc::Status::unimplemented(call.method())))
//! #     }
//! # }
//! # async fn f(listener: tokio::net::TcpListener, acceptor: impl weft::stack::Acceptor) -> std::io::Result<()> {
//! use std::time::Duration;
//! use tower::{limit::ConcurrencyLimitLayer, timeout::TimeoutLayer};
//! use weft::rpc::server::Server;
//!
//! Server::builder()
//!     .layer(TimeoutLayer::new(Duration::from_secs(2)))
//!     .layer(ConcurrencyLimitLayer::new(256))
//!     .add_service(Echo)
//!     .serve(listener, acceptor)
//!     .await
//! # }
//! ```
//!
//! **Limits of calls at once.** A generated server given
//! `max_concurrent_calls(n)` runs at most `n` calls at once, with the
//! semantics of tower's `ConcurrencyLimit`: its `poll_ready` takes the
//! call's turn, and is pending while `n` calls run, so `LoadShed` around
//! it sheds and a balancer sees its load. The server waits for a turn
//! before a call's handler reads its request, of the whole stack (a
//! `ConcurrencyLimitLayer` added with [`layer`](Builder::layer)) and then of
//! the service the call is for (the [`Router`] answers for every service,
//! so its own `poll_ready` is always ready, as axum's is). Meanwhile the
//! call's stream is open (it counts against the connection's stream limit,
//! which the peer sees as stream credit not yet returned), its first bytes
//! (at most the stream window) wait unread in our receive buffer, and
//! the rest in the peer's send buffer; the caller just waits for its
//! reply, and its deadline still runs. A call whose turn has not come a
//! tenth of its timeout before its deadline (at most 50 ms before) is
//! answered `RESOURCE_EXHAUSTED`, saying it never ran, so that its caller
//! can tell "queued" from "too slow" (`DEADLINE_EXCEEDED`). Once it has
//! its turn, a unary or server-streaming call's request must arrive within
//! the [`message_read_timeout`](Builder::message_read_timeout), so a
//! caller that sends a header and nothing more holds a turn no longer.
//!
//! **Calls that never end.** Every call has a deadline: its caller's, or
//! the server's [`max_call_duration`](Builder::max_call_duration) (10
//! minutes by default), whichever is shorter; and a request message begun
//! must arrive whole within [`message_read_timeout`](Builder::message_read_timeout)
//! (30 s) of the handler waiting for its rest.

mod allow;
mod call;
pub(crate) mod limit;
mod router;
mod serve_call;
#[cfg(feature = "http")]
mod with_http;

use std::{
    collections::HashMap,
    fmt,
    future::{Future, IntoFuture},
    io,
    sync::Arc,
    time::Duration,
};

use tower::{
    layer::util::{Identity, Stack},
    Layer, Service,
};

pub use allow::{AllowPeers, AllowPeersLayer};
pub use call::{Call, NamedService, Reply};
use router::Routed;
pub use router::Router;

use super::{compression::Compression, wire::Limits, Status};
use crate::{
    error::BoxError,
    server::{serve_front, settings_methods, Front, Opened, Settings},
    transport::Listener,
};

/// The longest a call may run by default, whatever its caller's deadline
/// ([`Builder::max_call_duration`]).
pub(crate) const DEFAULT_MAX_CALL_DURATION: Duration = Duration::from_secs(600);

/// The entry point: [`Server::builder`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A server with no middleware and no services yet.
    pub fn builder() -> Builder {
        Builder {
            layer: Identity::new(),
            routes: HashMap::new(),
            limits: Limits::default(),
            compression: Compression::default(),
            header_timeout: Duration::from_secs(10),
            max_call_duration: Some(DEFAULT_MAX_CALL_DURATION),
            server: Settings::default(),
            observer: None,
            health: None,
            #[cfg(feature = "http")]
            http: None,
        }
    }
}

/// Middleware, services and limits for a server.
///
/// `Builder` alone names the builder [`Server::builder`] returns, with no
/// middleware yet (its `L` defaults to tower's `Identity` layer, which
/// need not be named beside [`weft::Identity`](crate::Identity)):
///
/// ```
/// use weft::rpc::server::{Builder, Server};
///
/// fn with_our_limits(builder: Builder) -> Builder {
///     builder.max_message_size(1 << 20)
/// }
/// let builder = with_our_limits(Server::builder());
/// ```
pub struct Builder<L = Identity> {
    layer: L,
    routes: HashMap<&'static str, Routed>,
    limits: Limits,
    compression: Compression,
    header_timeout: Duration,
    max_call_duration: Option<Duration>,
    server: Settings,
    observer: Option<Arc<dyn super::Observer>>,
    health: Option<super::health::Health>,
    #[cfg(feature = "http")]
    http: Option<with_http::HttpStreams>,
}

impl<L> fmt::Debug for Builder<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("services", &self.routes.keys())
            .finish()
    }
}

impl<L> Builder<L> {
    /// Adds middleware around every call (the first added is outermost,
    /// as with `ServiceBuilder`): tower's timeout, concurrency limit, load
    /// shed, tracing, or [`AllowPeersLayer`].
    pub fn layer<T>(self, layer: T) -> Builder<Stack<T, L>> {
        Builder {
            layer: Stack::new(layer, self.layer),
            routes: self.routes,
            limits: self.limits,
            compression: self.compression,
            header_timeout: self.header_timeout,
            max_call_duration: self.max_call_duration,
            server: self.server,
            observer: self.observer,
            health: self.health,
            #[cfg(feature = "http")]
            http: self.http,
        }
    }

    /// Serves HTTP on the same listener, and on the same connections: a
    /// stream that does not begin with a call's HEADER frame (section 16
    /// of docs/PROTOCOL.md) is an HTTP/1.1 or h2 connection, served by
    /// `service` (an axum `Router`, a tonic service, a `service_fn`) as
    /// [`http::serve`](crate::http::serve) serves it, with the
    /// [`PeerInfo`](crate::http::PeerInfo) in each request's extensions
    /// and a header read timeout of 30 s.
    /// The acceptor's `NegotiateLayer` offers `["h2", "http/1.1"]` for
    /// HTTP clients that pick HTTP/2 from the agreed protocol (the
    /// [`Connector`](crate::http::Connector) does); RPC needs none. The
    /// middleware added with [`layer`](Self::layer) wraps calls only.
    #[cfg(feature = "http")]
    pub fn with_http<S, B>(mut self, service: S) -> Self
    where
        S: crate::http::HttpService<B>,
        B: crate::http::ResponseBody,
    {
        self.http = Some(crate::http::on_stream::erased(
            service,
            Some(crate::http::DEFAULT_HEADER_READ_TIMEOUT),
        ));
        self
    }

    /// Serves `service`'s methods (`NAME/Method`).
    pub fn add_service<S>(mut self, service: S) -> Self
    where
        S: NamedService + Service<Call, Response = Reply, Error = Status> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
    {
        self.routes.insert(
            S::NAME,
            router::Routed {
                service: Arc::new(service),
                accepts_early: S::accepts_early,
            },
        );
        self
    }

    /// Serves `health` (`grpc.health.v1.Health`), which reports the server
    /// (`""`) and each of its services `SERVING` once it serves (those
    /// `health` was not told of already), and each `NOT_SERVING` the
    /// moment its shutdown begins, before the go-away: a client that
    /// watches stops sending first, and its `Watch` ends
    /// ([`weft::rpc::health`](super::health)).
    pub fn health(mut self, health: super::health::Health) -> Self {
        self.health = Some(health.clone());
        self.add_service(health.service())
    }

    compression_methods!(
        settings: compression,
        send: "Replies go compressed when the call's header says its client reads `encoding`; to any other client, uncompressed.",
        accept: "requests",
    );

    limits_methods!(
        received: "request",
        envelope: "call header (method, deadline and metadata)",
        envelope_refused: "is answered with `RESOURCE_EXHAUSTED`, and nothing else; its handler never runs.",
        waiting: "handler",
        unbounded: "as long as the call may run",
        late: "reading fails with `DEADLINE_EXCEEDED`, and a caller that sends part of a message and stops holds its buffer no longer.",
    );

    /// How long a stream may take to send its call header (default 10 s).
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// The longest a call may run, whatever deadline its caller set, or
    /// none (default 10 minutes): a call
    /// past it ends with `DEADLINE_EXCEEDED`, its handler dropped, and
    /// [`Call::timeout`] is the shorter of the two. A server of calls that
    /// stream for longer (subscriptions, say) sets a longer one or `None`.
    pub fn max_call_duration(mut self, max: Option<Duration>) -> Self {
        self.max_call_duration = max;
        self
    }

    /// Tells `observer` of each call, per method: its start, and its end
    /// with its status and duration, from its header to its status (none
    /// by default). `weft::metrics::Metrics` reports to the `metrics`
    /// facade, `weft::admin::Admin` shows the methods in the live view,
    /// and a pair `(A, B)` does both.
    pub fn observer(mut self, observer: impl super::Observer) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    settings_methods!(server);

    /// Serves on `listener` (a tokio `TcpListener` or `UnixListener`, or
    /// any stream of transports as [`Incoming`](crate::transport::Incoming)),
    /// every connection through `acceptor`, until the listener fails or
    /// ends.
    pub fn serve<I, A>(self, listener: I, acceptor: A) -> impl Future<Output = io::Result<()>> + Send
    where
        I: Listener,
        A: crate::stack::Acceptor<I::Io>,
        L: Layer<Router>,
        L::Service: Service<Call, Response = Reply> + Clone + Send + 'static,
        <L::Service as Service<Call>>::Error: Into<BoxError>,
        <L::Service as Service<Call>>::Future: Send,
    {
        self.serve_with_shutdown(listener, acceptor, std::future::pending())
    }

    /// Serves until `signal` (or the listener's end), then shuts down
    /// gracefully: no new connections, a go-away on every connection (calls the peer opened
    /// before it heard are still served), calls in flight finish (within
    /// the shutdown timeout), and the future completes.
    pub fn serve_with_shutdown<I, A, F>(
        self,
        listener: I,
        acceptor: A,
        signal: F,
    ) -> impl Future<Output = io::Result<()>> + Send
    where
        I: Listener,
        A: crate::stack::Acceptor<I::Io>,
        F: IntoFuture<Output = ()>,
        F::IntoFuture: Send,
        L: Layer<Router>,
        L::Service: Service<Call, Response = Reply> + Clone + Send + 'static,
        <L::Service as Service<Call>>::Error: Into<BoxError>,
        <L::Service as Service<Call>>::Future: Send,
    {
        // Health reports every service serving now, and none once the
        // shutdown begins (before the front's go-away).
        let signal = signal.into_future();
        let signal = match self.health {
            Some(health) => {
                health.start(self.routes.keys().copied());
                futures_util::future::Either::Left(async move {
                    signal.await;
                    health.shut_down();
                })
            }
            None => futures_util::future::Either::Right(signal),
        };
        let methods =
            (self.observer).map(|observer| super::Methods::server(observer, self.routes.keys().copied()));
        let routes = Arc::new(self.routes);
        let router = Router {
            services: routes.clone(),
        };
        let service = self.layer.layer(router);
        let config = Config {
            limits: self.limits,
            compression: self.compression,
            header_timeout: self.header_timeout,
            max_call_duration: self.max_call_duration,
            methods,
            routes,
        };
        let calls = move |opened: Opened| serve_call::serve_call(opened, service.clone(), config.clone());
        // Calls, and HTTP beside them if the server has it.
        #[cfg(feature = "http")]
        let handler = {
            let header_timeout = self.header_timeout;
            let detect = self.http.map(|http| with_http::detect_http(http, header_timeout));
            tower::util::option_layer(detect).layer(calls)
        };
        #[cfg(not(feature = "http"))]
        let handler = calls;
        let front = Front {
            name: "rpc server",
            listener,
            acceptor,
            settings: self.server,
            handler,
        };
        serve_front(front, signal)
    }
}

#[derive(Clone)]
struct Config {
    limits: Limits,
    compression: Compression,
    header_timeout: Duration,
    max_call_duration: Option<Duration>,
    /// Calls told to the observer per method, from their header to their
    /// end.
    methods: Option<Arc<super::Methods>>,
    /// The routes, for which methods may run on early data: asked before
    /// any middleware sees the call.
    routes: Arc<HashMap<&'static str, Routed>>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("limits", &self.limits)
            .field("header_timeout", &self.header_timeout)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Whether `method` may run on early data: a method of a served
    /// service that marks it idempotent. (An unknown method is left to the
    /// router, which answers `UNIMPLEMENTED`.)
    fn refuses_early(&self, method: &str) -> bool {
        method
            .rsplit_once('/')
            .and_then(|(service, method)| Some((self.routes.get(service)?, method)))
            .is_some_and(|(routed, method)| !(routed.accepts_early)(method))
    }
}
