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
//! # async fn f(listener: tokio::net::TcpListener, acceptor: impl weft::mux::Acceptor) -> std::io::Result<()> {
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
//! **Per-service limits.** A service wrapped with a [`Limit`] (the
//! generated servers' `max_concurrent_calls`) runs at most that many
//! calls at once. A call past the limit waits before its request is read:
//! its stream is open (it counts against the connection's stream limit,
//! which the peer sees as stream credit not yet returned), its first bytes
//! (at most the stream window) wait unread in our receive buffer, and
//! the rest in the peer's send buffer; the caller just waits for its
//! reply, and its deadline still runs. A call whose turn has not come a
//! tenth of its timeout before its deadline (at most 50 ms before) is
//! answered `RESOURCE_EXHAUSTED`, saying it never ran, so that its caller
//! can tell "queued" from "too slow" (`DEADLINE_EXCEEDED`).
//!
//! **Calls that never end.** Every call has a deadline: its caller's, or
//! the server's [`max_call_duration`](Builder::max_call_duration) (10
//! minutes by default), whichever is shorter; and a request message begun
//! must arrive whole within [`message_read_timeout`](Builder::message_read_timeout)
//! (30 s) of the handler waiting for its rest.

use std::{
    collections::HashMap,
    fmt,
    future::{Future, IntoFuture},
    io,
    panic::AssertUnwindSafe,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, Stream as AsyncStream};
use prost::Message;
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tower::{
    layer::util::{Identity, Stack},
    Layer, Service, ServiceExt,
};

use super::{
    replies::{finish_with, send_replies, Encoding, Replies},
    status::panic_text,
    streaming::{decode_request, FrameReader},
    wire::{
        check_metadata_entries, frame_len, message_frame, put_message_frame, Kind, Limits,
        CALL_HEADER_METADATA,
    },
    Metadata, Request, Response, Status, Streaming,
};
use crate::{
    error::{BoxError, CloseCode},
    handshake::PeerId,
    mux::{
        serve::{serve_streams, ConnectionLimits},
        Stream,
    },
};

/// A unary reply message up to this size is copied into one buffer with
/// its header and status (one allocation, one send); a larger one is sent
/// as it is, without copying.
const COPY_REPLY_MAX: usize = 4 * 1024;

/// The longest a call may run by default, whatever its caller's deadline
/// ([`Builder::max_call_duration`]).
pub const DEFAULT_MAX_CALL_DURATION: Duration = Duration::from_secs(600);

/// A call waiting for a turn gives up at most this long before its
/// deadline ([`Limit::acquire_for`]).
const TURN_MARGIN_MAX: Duration = Duration::from_millis(50);

/// A call as the server's services see it: method, metadata, caller, and
/// the request messages still on the stream.
pub struct Call {
    method: String,
    metadata: Metadata,
    peer: Option<PeerId>,
    timeout: Option<Duration>,
    reader: FrameReader,
    /// When the call must be over (its timeout from its arrival).
    deadline: Option<Instant>,
    suite: crate::CipherSuite,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("peer", &self.peer)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Call {
    /// `package.Service/Method`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The caller's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The caller's verified identity (`None` without encryption, the
    /// Plaintext suite included: its records are not authenticated, so the
    /// call cannot be attributed to anyone).
    pub fn peer(&self) -> Option<&PeerId> {
        self.peer.as_ref()
    }

    /// The cipher suite the caller's connection agreed.
    pub fn suite(&self) -> crate::CipherSuite {
        self.suite
    }

    /// How long the call may take: the caller's deadline or the server's
    /// [`max_call_duration`](Builder::max_call_duration), the shorter (the
    /// server drops the call past it).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The one request message of a unary or server-streaming call.
    pub async fn into_request<T: Message + Default>(mut self) -> Result<Request<T>, Status> {
        let message = match self.reader.frame().await? {
            Some(frame) if frame.kind == Kind::Message => decode_request::<T>(frame.payload)?,
            Some(_) => return Err(Status::internal("an unexpected frame in the request")),
            None => return Err(Status::invalid_argument("the call ended without its request")),
        };
        if self.reader.frame().await?.is_some() {
            return Err(Status::invalid_argument("more than one request message"));
        }
        Ok(self.request_of(message))
    }

    /// The request messages of a client- or bidirectional-streaming call.
    pub fn into_streaming_request<T: Message + Default>(self) -> Request<Streaming<T>> {
        let Call {
            metadata,
            peer,
            timeout,
            reader,
            ..
        } = self;
        Request {
            message: Streaming::requests(reader),
            metadata,
            peer,
            timeout,
        }
    }

    fn request_of<T>(&self, message: T) -> Request<T> {
        Request {
            message,
            metadata: self.metadata.clone(),
            peer: self.peer,
            timeout: self.timeout,
        }
    }
}

/// What a service answers a [`Call`] with: the server's metadata and the
/// reply message, or a stream of them.
pub struct Reply {
    metadata: Metadata,
    body: Body,
}

/// Reply messages, already framed: each is encoded once, straight into
/// its frame.
enum Body {
    One(Bytes),
    Many(Pin<Box<dyn Replies>>),
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reply").field("metadata", &self.metadata).finish()
    }
}

impl Reply {
    /// The reply of a unary or client-streaming call.
    pub fn unary<T: Message>(response: Response<T>) -> Self {
        Self {
            metadata: response.metadata,
            body: Body::One(message_frame(&response.message)),
        }
    }

    /// The replies of a server- or bidirectional-streaming call; an error
    /// in the stream ends the call with that status.
    pub fn streaming<T, St>(response: Response<St>) -> Self
    where
        T: Message + 'static,
        St: AsyncStream<Item = Result<T, Status>> + Send + 'static,
    {
        Self {
            metadata: response.metadata,
            body: Body::Many(Box::pin(Encoding::new(response.message))),
        }
    }
}

/// A service's name, `package.Service`, for routing `package.Service/Method`.
pub trait NamedService {
    /// The name.
    const NAME: &'static str;
}

/// At most this many calls of a service at once (the generated servers'
/// `max_concurrent_calls`; see the [module docs](self) for what a waiting
/// caller sees).
#[derive(Debug, Clone, Default)]
pub struct Limit(Option<Arc<Semaphore>>);

impl Limit {
    /// A limit of `max` calls at once (at least 1, at most tokio's
    /// [`Semaphore::MAX_PERMITS`]), or none.
    pub fn new(max: Option<usize>) -> Self {
        Self(max.map(|max| Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS)))))
    }

    /// Waits for `call`'s turn (none without a limit), as
    /// [`acquire`](Self::acquire) does, but not for all of the call's
    /// time: a turn that has not come a tenth of its timeout before its
    /// deadline (at most 50 ms before) fails the call with
    /// `RESOURCE_EXHAUSTED`, so that its caller learns it never ran, before
    /// its own deadline passes with `DEADLINE_EXCEEDED`. What generated
    /// servers call.
    pub async fn acquire_for(&self, call: &Call) -> Result<Option<OwnedSemaphorePermit>, Status> {
        let Some(semaphore) = &self.0 else {
            return Ok(None);
        };
        if let Ok(permit) = semaphore.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        let (Some(deadline), Some(timeout)) = (call.deadline, call.timeout) else {
            return Ok(self.acquire().await);
        };
        let give_up = deadline - (timeout / 10).min(TURN_MARGIN_MAX);
        match tokio::time::timeout_at(give_up, self.acquire()).await {
            Ok(permit) => Ok(permit),
            Err(_) => Err(Status::resource_exhausted(format!(
                "{} waited {:?} of its {timeout:?} for a turn of its service's limit of concurrent calls, and never ran",
                call.method,
                timeout - (deadline - give_up)
            ))),
        }
    }

    /// Waits for a turn (none without a limit); the turn ends when the
    /// permit is dropped.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        match &self.0 {
            Some(semaphore) => Some(
                semaphore
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed"),
            ),
            None => None,
        }
    }
}

/// A service behind the router, called through a shared reference: each
/// call clones the concrete service (for generated servers, an `Arc`) and
/// boxes its future once. (`BoxCloneSyncService` allocated twice more per
/// call: its clone and its own future's box.)
trait Route: Send + Sync {
    fn call(&self, call: Call) -> RouteFuture;
}

type RouteFuture = Pin<Box<dyn Future<Output = Result<Reply, Status>> + Send>>;

impl<S> Route for S
where
    S: Service<Call, Response = Reply, Error = Status> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    fn call(&self, call: Call) -> RouteFuture {
        Box::pin(self.clone().oneshot(call))
    }
}

type RouteService = Arc<dyn Route>;

/// Routes calls by service name; an unknown method is `UNIMPLEMENTED`.
#[derive(Clone, Default)]
pub struct Router {
    services: Arc<HashMap<&'static str, RouteService>>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.services.keys()).finish()
    }
}

impl Service<Call> for Router {
    type Response = Reply;
    type Error = Status;
    type Future = RouteFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Call) -> Self::Future {
        let service = call
            .method
            .rsplit_once('/')
            .and_then(|(service, _)| self.services.get(service));
        match service {
            Some(service) => service.call(call),
            None => {
                let status = Status::unimplemented(format!("no method {:?} here", call.method));
                Box::pin(std::future::ready(Err(status)))
            }
        }
    }
}

/// The entry point: [`Server::builder`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A server with no middleware and no services yet.
    pub fn builder() -> Builder<Identity> {
        Builder {
            layer: Identity::new(),
            routes: HashMap::new(),
            limits: Limits::default(),
            header_timeout: Duration::from_secs(10),
            max_call_duration: Some(DEFAULT_MAX_CALL_DURATION),
            shutdown_timeout: Duration::from_secs(30),
            connections: ConnectionLimits::default(),
        }
    }
}

/// Middleware, services and limits for a server.
pub struct Builder<L> {
    layer: L,
    routes: HashMap<&'static str, RouteService>,
    limits: Limits,
    header_timeout: Duration,
    max_call_duration: Option<Duration>,
    shutdown_timeout: Duration,
    connections: ConnectionLimits,
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
            header_timeout: self.header_timeout,
            max_call_duration: self.max_call_duration,
            shutdown_timeout: self.shutdown_timeout,
            connections: self.connections,
        }
    }

    /// Serves `service`'s methods (`NAME/Method`).
    pub fn add_service<S>(mut self, service: S) -> Self
    where
        S: NamedService + Service<Call, Response = Reply, Error = Status> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
    {
        self.routes.insert(S::NAME, Arc::new(service));
        self
    }

    /// The largest request message accepted (default 4 MiB): a larger one
    /// fails its call with `RESOURCE_EXHAUSTED`, and nothing else.
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.limits.message = max;
        self
    }

    /// The largest call header (method, deadline and metadata) accepted
    /// (default [`DEFAULT_MAX_ENVELOPE_SIZE`](super::DEFAULT_MAX_ENVELOPE_SIZE),
    /// 64 KiB): a larger one is answered with `RESOURCE_EXHAUSTED`, and
    /// nothing else; its handler never runs.
    pub fn max_envelope_size(mut self, max: usize) -> Self {
        self.limits.envelope = max;
        self
    }

    /// How long a stream may take to send its call header (default 10 s).
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// The longest a call may run, whatever deadline its caller set, or
    /// none (default [`DEFAULT_MAX_CALL_DURATION`], 10 minutes): a call
    /// past it ends with `DEADLINE_EXCEEDED`, its handler dropped, and
    /// [`Call::timeout`] is the shorter of the two. A server of calls that
    /// stream for longer (subscriptions, say) sets a longer one or `None`.
    pub fn max_call_duration(mut self, max: Option<Duration>) -> Self {
        self.max_call_duration = max;
        self
    }

    /// How long a request message may take to arrive whole once the
    /// handler waits for its rest (default
    /// [`DEFAULT_MESSAGE_READ_TIMEOUT`](super::DEFAULT_MESSAGE_READ_TIMEOUT),
    /// 30 s; `None`: as long as the call may run): past it, reading fails
    /// with `DEADLINE_EXCEEDED`, and a caller that sends part of a message
    /// and stops holds its buffer no longer.
    pub fn message_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.limits.message_read_timeout = timeout;
        self
    }

    /// Connections held at once, handshakes included (at least 1; default
    /// [`mux::DEFAULT_MAX_CONNECTIONS`](crate::mux::DEFAULT_MAX_CONNECTIONS)).
    /// One past it is refused before its handshake: the peer's handshake
    /// fails with an unauthenticated close, `EXCESSIVE_LOAD`, saying why.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.connections.max = n.max(1);
        self
    }

    /// Connections held at once from one source address, an IPv4 address
    /// or an IPv6 /64 (at least 1; default
    /// [`mux::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS`](crate::mux::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS)),
    /// refused as [`max_connections`](Self::max_connections) are.
    pub fn max_connections_per_address(mut self, n: usize) -> Self {
        self.connections.per_address = n.max(1);
        self
    }

    /// How long calls in flight may take to finish after a graceful
    /// shutdown starts (default 30 s); then their connections close.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Serves on `listener`, every TCP connection through `acceptor`,
    /// until the listener fails.
    pub fn serve<A>(self, listener: TcpListener, acceptor: A) -> impl Future<Output = io::Result<()>> + Send
    where
        A: crate::mux::Acceptor,
        L: Layer<Router>,
        L::Service: Service<Call, Response = Reply> + Clone + Send + 'static,
        <L::Service as Service<Call>>::Error: Into<BoxError>,
        <L::Service as Service<Call>>::Future: Send,
    {
        self.serve_with_shutdown(listener, acceptor, std::future::pending())
    }

    /// Serves until `signal`, then shuts down gracefully: no new TCP
    /// connections, a go-away on every connection (calls the peer opened
    /// before it heard are still served), calls in flight finish (within
    /// the shutdown timeout), and the future completes.
    pub fn serve_with_shutdown<A, F>(
        self,
        listener: TcpListener,
        acceptor: A,
        signal: F,
    ) -> impl Future<Output = io::Result<()>> + Send
    where
        A: crate::mux::Acceptor,
        F: IntoFuture<Output = ()>,
        F::IntoFuture: Send,
        L: Layer<Router>,
        L::Service: Service<Call, Response = Reply> + Clone + Send + 'static,
        <L::Service as Service<Call>>::Error: Into<BoxError>,
        <L::Service as Service<Call>>::Future: Send,
    {
        let router = Router {
            services: Arc::new(self.routes),
        };
        let service = self.layer.layer(router);
        let config = Config {
            limits: self.limits,
            header_timeout: self.header_timeout,
            max_call_duration: self.max_call_duration,
        };
        run(
            listener,
            acceptor,
            service,
            config,
            (Some(self.shutdown_timeout), self.connections),
            signal.into_future(),
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Config {
    limits: Limits,
    header_timeout: Duration,
    max_call_duration: Option<Duration>,
}

async fn run<A, S, F>(
    listener: TcpListener,
    acceptor: A,
    service: S,
    config: Config,
    limits: (Option<Duration>, ConnectionLimits),
    signal: F,
) -> io::Result<()>
where
    A: crate::mux::Acceptor,
    S: Service<Call, Response = Reply> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
    F: Future<Output = ()> + Send,
{
    let handler = move |stream, _: &crate::mux::Connection, _, _| serve_call(stream, service.clone(), config);
    serve_streams("rpc server", listener, acceptor, signal, limits, handler).await
}

/// One call: its header, the service, the reply.
async fn serve_call<S>(stream: Stream, service: S, config: Config)
where
    S: Service<Call, Response = Reply> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let peer = stream.peer().copied();
    let suite = stream.suite();
    let (recv, mut send) = stream.into_split();
    let mut reader = FrameReader::new(recv, config.limits);
    let header = match tokio::time::timeout(config.header_timeout, reader.frame()).await {
        Ok(Ok(Some(frame))) if frame.kind == Kind::Header => {
            if let Err(status) = check_metadata_entries(&frame.payload, CALL_HEADER_METADATA) {
                tracing::debug!(reason = %status.message(), "rpc server: call refused");
                let _ = finish_with(&mut send, BytesMut::new(), &status).await;
                return;
            }
            crate::proto::CallHeader::decode(frame.payload).ok()
        }
        Ok(Err(status)) if status.code() == super::Code::ResourceExhausted => {
            // A header over the limit, refused on its length alone: the
            // caller learns why.
            tracing::debug!(reason = %status.message(), "rpc server: call refused");
            let _ = finish_with(&mut send, BytesMut::new(), &status).await;
            return;
        }
        _ => None,
    };
    let Some(header) = header else {
        send.reset(CloseCode::PROTOCOL_ERROR);
        return;
    };
    let asked = (header.timeout_micros > 0).then(|| Duration::from_micros(header.timeout_micros));
    // The server's bound, when it is the shorter.
    let bound = config
        .max_call_duration
        .filter(|max| asked.is_none_or(|asked| *max < asked));
    let timeout = bound.or(asked);
    let deadline = timeout.map(|t| Instant::now() + t);
    let call = Call {
        method: header.method,
        metadata: header.metadata,
        peer,
        timeout,
        reader,
        deadline,
        suite,
    };
    let method = call.method.clone();
    let handler = AssertUnwindSafe(service.oneshot(call)).catch_unwind();
    let outcome = tokio::select! {
        outcome = handler => match outcome {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(err)) => Err(status_for_caller(&method, err.into())),
            Err(panic) => {
                // What the panic said stays here: it may tell a stranger
                // about the server's insides.
                tracing::error!(%method, panic = %panic_text(&panic), "rpc server: handler panicked");
                Err(Status::internal(format!("the handler of {method} panicked")))
            }
        },
        () = sleep_until(deadline) => Err(past_deadline(&method, timeout.unwrap_or_default(), bound)),
        err = send.stopped() => {
            tracing::debug!(%method, reason = %err, "rpc server: call cancelled; handler dropped");
            return;
        }
    };
    let reply = match outcome {
        Ok(reply) => reply,
        Err(status) => {
            let _ = finish_with(&mut send, BytesMut::new(), &status).await;
            return;
        }
    };
    let header = crate::proto::ReplyHeader {
        metadata: reply.metadata,
    };
    match reply.body {
        Body::One(frame) if frame.len() <= COPY_REPLY_MAX => {
            // Header, message and status in one buffer, sized exactly (one
            // allocation, none to freeze it), and the end with them: one
            // record.
            let ok = Status::new(super::Code::Ok, "").to_proto();
            let len = frame_len(header.encoded_len()) + frame.len() + frame_len(ok.encoded_len());
            let mut frames = BytesMut::with_capacity(len);
            put_message_frame(&mut frames, Kind::Header, &header);
            frames.extend_from_slice(&frame);
            put_message_frame(&mut frames, Kind::Status, &ok);
            if send.send(frames.freeze()).await.is_ok() {
                let _ = send.finish();
            }
        }
        Body::One(frame) => {
            // Header, message, status and end join one record: sends
            // leave together at the finish. The message is not copied.
            let mut frames = BytesMut::new();
            put_message_frame(&mut frames, Kind::Header, &header);
            if send.send(frames.split().freeze()).await.is_err() || send.send(frame).await.is_err() {
                return;
            }
            let _ = finish_with(&mut send, frames, &Status::new(super::Code::Ok, "")).await;
        }
        Body::Many(replies) => {
            // The header rides with the first replies. Boxed: the unary
            // calls' futures stay small.
            let mut first = BytesMut::new();
            put_message_frame(&mut first, Kind::Header, &header);
            let deadline = deadline.zip(timeout);
            Box::pin(send_replies(&mut send, replies, first, deadline, &method)).await;
        }
    }
}

/// The status a middleware's error gives the caller: a [`Status`] (a
/// handler's, or one a layer chose) as it is, tower's timeout and load
/// shedding as their codes; any other error `UNKNOWN` with a generic
/// message, its text logged here rather than sent to a stranger.
fn status_for_caller(method: &str, err: BoxError) -> Status {
    let status = Status::from_error(err);
    if status.code() != super::Code::Unknown {
        return status;
    }
    tracing::warn!(%method, error = %status.message(), "rpc server: a middleware failed the call");
    Status::new(
        super::Code::Unknown,
        format!("{method} failed in the server's middleware"),
    )
}

/// Why a call past its deadline ended: the server's maximum, or its
/// caller's deadline.
fn past_deadline(method: &str, timeout: Duration, bound: Option<Duration>) -> Status {
    match bound {
        Some(max) => Status::new(
            super::Code::DeadlineExceeded,
            format!("{method} ran past the server's maximum call duration of {max:?}"),
        ),
        None => Status::deadline_exceeded(timeout),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Lets through only calls from these peers: any other (or an
/// unauthenticated caller, a caller over the Plaintext suite included)
/// gets `PERMISSION_DENIED`.
#[derive(Debug, Clone)]
pub struct AllowPeersLayer {
    allowed: Arc<Vec<PeerId>>,
}

impl AllowPeersLayer {
    /// Allows `peers`.
    pub fn new(peers: impl IntoIterator<Item = PeerId>) -> Self {
        Self {
            allowed: Arc::new(peers.into_iter().collect()),
        }
    }
}

impl<S> Layer<S> for AllowPeersLayer {
    type Service = AllowPeers<S>;

    fn layer(&self, inner: S) -> AllowPeers<S> {
        AllowPeers {
            inner,
            allowed: self.allowed.clone(),
        }
    }
}

/// The service [`AllowPeersLayer`] builds.
#[derive(Debug, Clone)]
pub struct AllowPeers<S> {
    inner: S,
    allowed: Arc<Vec<PeerId>>,
}

impl<S> Service<Call> for AllowPeers<S>
where
    S: Service<Call, Response = Reply>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = BoxError;
    type Future = futures_util::future::Either<
        futures_util::future::ErrInto<S::Future, BoxError>,
        std::future::Ready<Result<Reply, BoxError>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, call: Call) -> Self::Future {
        use futures_util::TryFutureExt;
        match call.peer() {
            Some(peer) if self.allowed.contains(peer) => {
                futures_util::future::Either::Left(self.inner.call(call).err_into())
            }
            peer => {
                let status = Status::permission_denied(match peer {
                    Some(peer) => format!("{peer} may not call {}", call.method()),
                    None if call.suite() == crate::CipherSuite::Plaintext => format!(
                        "a caller on an unencrypted connection may not call {} (its records are not authenticated)",
                        call.method()
                    ),
                    None => format!("an unauthenticated caller may not call {}", call.method()),
                });
                futures_util::future::Either::Right(std::future::ready(Err(status.into())))
            }
        }
    }
}
