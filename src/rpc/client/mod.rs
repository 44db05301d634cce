//! The client: calls over streams of a pool's connections.
//!
//! [`Client`] is a `tower::Service` of [`RawCall`]s (method, metadata,
//! timeout, encoded request messages) answered with a [`RawReply`], so
//! tower's timeout, retry and load-shed layers wrap it like any service;
//! [`unary`], [`server_streaming`], [`client_streaming`] and
//! [`streaming`] are the typed calls over any such service (the generated
//! clients call them).
//!
//! ```no_run
//! # async fn f(pool: weft::pool::Pool<impl weft::pool::Dialer>) -> Result<(), weft::rpc::Status> {
//! use weft::rpc::{client::{self, Client}, Request};
//!
//! let mut echo = Client::new(pool, "127.0.0.1:7000".parse().unwrap());
//! let mut request = Request::new(String::from("hi"));
//! request.set_timeout(std::time::Duration::from_secs(1));
//! let reply: weft::rpc::Response<String> = client::unary(&mut echo, "echo.Echo/Say", request).await?;
//! # Ok(()) }
//! ```

#[cfg(feature = "dns")]
mod balanced;
mod call;
mod deadline;
mod frames;
mod one_shot;
pub(crate) mod typed;
#[cfg(feature = "dns")]
mod watched;

#[cfg(feature = "dns")]
pub use balanced::{Balanced, BalancedCall};
pub use call::RawCall;
use call::Requests;
use deadline::{within, Progress};
use frames::{outgoing, reply_header, write_requests, Outgoing};
pub use typed::{client_streaming, server_streaming, streaming, unary, Method};

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use futures_util::FutureExt;
use prost::Message;
use tower::Service;

use super::{
    compression::ClientCompression,
    streaming::{AbortOnDrop, CallFrames},
    wire::Limits,
    CallTimer, Metadata, Methods, Response, Status, Streaming,
};
use crate::pool::{Dialer, Endpoint, Pool, PoolError, PooledStream};

/// Calls to one endpoint, on streams of its pooled connections. Cloning
/// is cheap and shares the pool.
pub struct Client<S> {
    via: Via<S>,
    endpoint: Endpoint,
    limits: Limits,
    /// Its settings, and the encodings its server was last heard to read.
    compression: ClientCompression,
    timeout: Deadline,
    /// Calls told to the observer per method, until the caller has the
    /// call's status (the timer travels with the reply) or gives up on it.
    methods: Option<Arc<Methods>>,
}

/// The deadline a client gives calls that set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deadline {
    /// [`DEFAULT_TIMEOUT`] for calls answered by one reply; none for
    /// calls that stream replies.
    Default,
    /// This, for every call.
    Set(Duration),
    /// None.
    Off,
}

impl Deadline {
    fn for_call(self, call: &RawCall) -> Option<Duration> {
        match self {
            Deadline::Default => call.one_reply.then_some(DEFAULT_TIMEOUT),
            Deadline::Set(timeout) => Some(timeout),
            Deadline::Off => None,
        }
    }
}

/// The deadline of a unary or client-streaming call that sets none, on a
/// client that sets none ([`Client::timeout`]): long past any answer a
/// caller waits for in person, and short enough that a server that
/// accepts connections and never answers (the handshake alone may take
/// 10 s to give up) frees its callers. Envoy's default route timeout is
/// 15 s; gRPC has none, and a call to a hung server waits forever. Calls
/// that stream replies (a watch may rightly last hours) get none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a client's calls reach the server.
enum Via<S> {
    /// Streams of a pool's connections.
    Pool(Pool<S>),
    /// A connection of its own per call, dialed with this stack
    /// ([`Client::one_shot`]).
    Dial(S),
}

impl<S: Clone> Clone for Via<S> {
    fn clone(&self) -> Self {
        match self {
            Via::Pool(pool) => Via::Pool(pool.clone()),
            Via::Dial(dialer) => Via::Dial(dialer.clone()),
        }
    }
}

impl<S: Clone> Clone for Client<S> {
    fn clone(&self) -> Self {
        Self {
            via: self.via.clone(),
            endpoint: self.endpoint.clone(),
            limits: self.limits,
            compression: self.compression.clone(),
            timeout: self.timeout,
            methods: self.methods.clone(),
        }
    }
}

impl<S> fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<S> Client<S> {
    /// Calls to `endpoint` over `pool`. A call that makes the pool dial
    /// goes in that dial's first flight, as early data (0-RTT, protocol
    /// version 3), when it may and can (as with
    /// [`one_shot`](Self::one_shot): the call is idempotent with one
    /// request, and the pool's dialer knows the server's box key from an
    /// earlier connection); calls that wait for that dial, and later ones,
    /// open streams on the new connection as usual.
    pub fn new(pool: Pool<S>, endpoint: Endpoint) -> Self {
        Self::via(Via::Pool(pool), endpoint)
    }

    /// Calls to `endpoint`, each on a new connection `dialer` makes for it
    /// and closes after it: no pool, for a process that makes a call or
    /// two to a server and exits. A call marked
    /// [`idempotent`](RawCall::idempotent) with one request message (the
    /// generated clients mark the methods the .proto marks
    /// `idempotency_level = IDEMPOTENT` or `NO_SIDE_EFFECTS`) goes in the
    /// first flight as early data (0-RTT, protocol version 3) when it can:
    /// the endpoint is pinned ([`Endpoint::expect_peer`]), the server
    /// accepts early data
    /// ([`EncryptLayer::accept_early_data`](crate::EncryptLayer::accept_early_data)),
    /// and this dialer (or a clone: they share what they learn) has
    /// connected to it before and so knows its box key. Any other call
    /// goes right after the handshake; which way a call went is not the
    /// caller's concern.
    ///
    /// ```no_run
    /// # async fn f(server_key: weft::handshake::PeerId) -> Result<(), weft::rpc::Status> {
    /// use weft::{pool::Endpoint, rpc::{client::{self, Client}, Request}, Identity};
    ///
    /// let endpoint = Endpoint::new("127.0.0.1:7000".parse().unwrap()).expect_peer(server_key);
    /// let mut echo = Client::one_shot(weft::dialer(Identity::generate()), endpoint);
    /// let reply: weft::rpc::Response<String> =
    ///     client::unary(&mut echo, "echo.Echo/Say", Request::new(String::from("hi"))).await?;
    /// # Ok(()) }
    /// ```
    pub fn one_shot(dialer: S, endpoint: Endpoint) -> Self {
        Self::via(Via::Dial(dialer), endpoint)
    }

    /// Tells `observer` of each call, per method: its start, and its end
    /// with its status and duration, until the caller has the call's
    /// status or gives up on it (none by default). `weft::metrics::Metrics`
    /// reports to the `metrics` facade, `weft::admin::Admin` shows the
    /// methods in the live view, and a pair `(A, B)` does both.
    pub fn observer(mut self, observer: impl super::Observer) -> Self {
        self.methods = Some(Methods::client(Arc::new(observer)));
        self
    }

    /// The call's timer, if calls are observed.
    fn timer(&self, method: &str) -> Option<CallTimer> {
        self.methods.as_ref().map(|methods| methods.start(method))
    }

    fn via(via: Via<S>, endpoint: Endpoint) -> Self {
        Self {
            via,
            endpoint,
            limits: Limits::default(),
            compression: ClientCompression::default(),
            timeout: Deadline::Default,
            methods: None,
        }
    }

    /// The deadline of calls that set none themselves, every kind of call
    /// (by default [`DEFAULT_TIMEOUT`], 30 s, for unary and
    /// client-streaming calls, and none for calls that stream replies). It
    /// travels with the call, so the server gives up when the caller does.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Deadline::Set(timeout);
        self
    }

    /// No deadline for calls that set none: they wait as long as the
    /// server takes.
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Deadline::Off;
        self
    }

    compression_methods!(
        settings: compression.config,
        send: "Requests go compressed once the server has said, in a reply header, that it reads `encoding` (a client's clones share what they learn): the first call to a server goes uncompressed, and so does every call to a server that does not read it.",
        accept: "replies",
    );

    limits_methods!(
        received: "reply",
        envelope: "reply header or status",
        envelope_refused: "fails its call with `RESOURCE_EXHAUSTED`.",
        waiting: "call",
        unbounded: "as long as the call's deadline allows",
        late: "the call fails with `DEADLINE_EXCEEDED`.",
    );

    /// Where the calls go.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

/// The answer to a [`RawCall`], once the server's header has come: its
/// metadata, and the reply messages to come (ending with the call's
/// status).
pub struct RawReply {
    metadata: Metadata,
    /// The call went as early data, and the server accepted it.
    early: bool,
    reader: CallFrames,
    /// The task writing streamed requests, stopped with the reply.
    _writer: Option<AbortOnDrop>,
    /// The call's metrics, recorded when its replies end (or as a cancel,
    /// if they are dropped first).
    timer: Option<CallTimer>,
}

impl fmt::Debug for RawReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawReply")
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl RawReply {
    /// The server's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Whether the call went as early data (0-RTT) and the server accepted
    /// it ([`Response::is_early`]).
    pub fn is_early(&self) -> bool {
        self.early
    }

    /// The reply messages, decoded as `T`.
    pub fn into_streaming<T: Message + Default>(self) -> Response<Streaming<T>> {
        let mut streaming = Streaming::replies(self.reader);
        streaming.keep_alive(self._writer);
        streaming.time(self.timer);
        let mut response = Response::new(streaming).with_early(self.early);
        *response.metadata_mut() = self.metadata;
        response
    }
}

impl<S: Dialer> Service<RawCall> for Client<S> {
    type Response = RawReply;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<RawReply, Status>> + Send>>;

    /// Ready once the call has a turn among the pool's
    /// [`max_pending`](crate::pool::Builder::max_pending) calls that may
    /// wait for a stream at once: past them, `Pending`, so tower's
    /// load shedding and balancing see the pool as busy. (A `call` without
    /// a `poll_ready` first waits for its turn in the call.)
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        match &mut self.via {
            Via::Pool(pool) => pool.poll_ready(cx).map_err(Status::from),
            Via::Dial(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, mut call: RawCall) -> Self::Future {
        super::trace::inject(&mut call.metadata);
        let endpoint = self.endpoint.clone();
        let pool = match &mut self.via {
            Via::Pool(pool) => pool,
            Via::Dial(dialer) => {
                let timeout = call.timeout.or_else(|| self.timeout.for_call(&call));
                let timer = self.methods.as_ref().map(|methods| methods.start(&call.method));
                let work = one_shot::call_once(
                    dialer.clone(),
                    endpoint,
                    self.limits,
                    self.compression.clone(),
                    timeout,
                    call,
                );
                return Box::pin(async move {
                    let reply = match timeout {
                        Some(limit) => tokio::time::timeout(limit, work)
                            .await
                            .unwrap_or_else(|_| Err(Status::deadline_exceeded(limit))),
                        None => work.await,
                    };
                    timed(reply, timer)
                });
            }
        };
        let limits = self.limits;
        let timeout = call.timeout.or_else(|| self.timeout.for_call(&call));
        let method = call.method.clone();
        let idempotent = call.idempotent;
        let outgoing = outgoing(call, timeout, &self.compression);
        // A call that may go early, and is whole in its first bytes, rides
        // in the first flight of a dial the pool makes for it.
        let early = (idempotent && outgoing.streamed.is_none()).then(|| outgoing.first.clone());
        let opening = pool.open_in_turn(endpoint.clone(), early);
        // With a deadline, what it interrupts is told apart: the dial and
        // handshake, or the server's answer.
        let progress = timeout.map(|_| {
            Arc::new(Progress {
                endpoint: endpoint.clone(),
                connected: AtomicBool::new(false),
            })
        });
        let timer = self.timer(&method);
        let compression = self.compression.clone();
        let mut within = within(
            timeout,
            start(opening, limits, compression, outgoing, progress.clone()),
        );
        within.progress = progress;
        Box::pin(within.map(move |reply| timed(reply, timer)))
    }
}

/// A call that failed before its reply header ends here; one answered
/// ends when its replies do, so its timer goes with them.
fn timed(reply: Result<RawReply, Status>, timer: Option<CallTimer>) -> Result<RawReply, Status> {
    match reply {
        Ok(mut reply) => {
            reply.timer = timer;
            Ok(reply)
        }
        Err(status) => {
            if let Some(timer) = timer {
                timer.finish(status.code());
            }
            Err(status)
        }
    }
}

/// Opens the call's stream, sends its header and requests (unless they
/// went with the opening), and waits for the server's header.
async fn start(
    opening: impl Future<Output = Result<(PooledStream, bool), PoolError>>,
    limits: Limits,
    compression: ClientCompression,
    Outgoing {
        first,
        streamed: requests,
        compressor,
    }: Outgoing,
    progress: Option<Arc<Progress>>,
) -> Result<RawReply, Status> {
    let (mut stream, sent) = opening.await?;
    if let Some(progress) = progress {
        progress.connected.store(true, Ordering::Relaxed);
    }
    let (reader, writer, early) = match requests {
        None => {
            // Header, request and end in one write: they ride on the
            // stream's open. Until the first reply byte, the pooled stream
            // may still open the call again elsewhere if the peer refuses
            // it unprocessed.
            if !sent {
                let written = async {
                    stream.send(first).await?;
                    stream.finish().await
                }
                .await;
                if let Err(err) = written {
                    // A server that refuses the request part way (a
                    // message past its limit) answers with its status,
                    // then stops our sending: its status says why, and
                    // the failed write only that it stopped us.
                    return match stream.recv().await {
                        Ok(Some(initial)) if !initial.is_empty() => {
                            let (recv, _send) = stream.into_inner().into_split();
                            let reader = CallFrames::with_initial(recv, limits, initial);
                            reply_header(reader, None, false, &compression).await
                        }
                        _ => Err(err.into()),
                    };
                }
            }
            let initial = stream.recv().await?.unwrap_or_default();
            // Read once the reply began: until then the pooled stream may
            // have opened the call again elsewhere, not early.
            let early = stream.get_ref().is_early();
            let (recv, _send) = stream.into_inner().into_split();
            (CallFrames::with_initial(recv, limits, initial), None, early)
        }
        Some(messages) => {
            let (recv, mut send) = stream.into_inner().into_split();
            send.send(first).await?;
            let task = tokio::spawn(async move {
                let _ = write_requests(&mut send, messages, compressor).await;
            });
            (CallFrames::new(recv, limits), Some(AbortOnDrop(task)), false)
        }
    };
    reply_header(reader, writer, early, &compression).await
}
