//! RPC over weft streams: one call is one stream.
//!
//! The client writes a call header (`weft.v1.CallHeader`: method,
//! timeout, metadata) and its first request message in one write, so they
//! ride on the stream's open frame: a unary call on a warm connection is
//! one round trip, with no HTTP/2 headers. The server answers with its
//! metadata, the reply messages and a [`Status`], ending its side of the
//! stream. Messages are length-delimited prost encodings, at most
//! 4 MiB by default. docs/PROTOCOL.md, section
//! "RPC", has the bytes.
//!
//! - [`client::Client`] calls over a [`Pool`](crate::pool::Pool): all four
//!   kinds of call, deadlines that travel with the call, cancellation (a
//!   dropped call resets its stream, and the server drops its handler),
//!   metadata both ways. It is a `tower::Service` of [`client::RawCall`]s,
//!   so tower's timeout, retry and load-shed layers wrap it.
//! - [`server::Server`] serves [`server::Call`]s through ordinary tower
//!   middleware around a router by method name, with per-service limits,
//!   deadlines, `UNIMPLEMENTED` for unknown methods, `INTERNAL` for a
//!   handler that panics, and graceful shutdown.
//!
//! Messages are any `prost::Message`; the code generator (the `weft-build` crate)
//! writes typed clients and servers over these. With the features `gzip`
//! and `zstd`, messages may go compressed ([`Encoding`]), negotiated per
//! call:
//!
//! ```
//! # #[cfg(feature = "zstd")]
//! # fn f(pool: weft::pool::Pool<weft::stack::StandardDialer>, endpoint: weft::pool::Endpoint) {
//! use weft::rpc::{client::Client, server::Server, Encoding};
//!
//! // Replies compressed for clients that read zstd; requests read in it.
//! let server = Server::builder()
//!     .send_compressed(Encoding::Zstd)
//!     .accept_compressed(Encoding::Zstd);
//! // Requests compressed once the server has said it reads zstd.
//! let client = Client::new(pool, endpoint)
//!     .send_compressed(Encoding::Zstd)
//!     .accept_compressed(Encoding::Zstd);
//! # }
//! ```

/// The size and time limits of what a side receives (the field `limits`,
/// a `wire::Limits`), as builder methods: written once for the server
/// (which receives requests in calls) and the client (replies).
macro_rules! limits_methods {
    (
        received: $received:literal,
        envelope: $envelope:literal,
        envelope_refused: $refused:literal,
        waiting: $waiting:literal,
        unbounded: $unbounded:literal,
        late: $late:literal $(,)?
    ) => {
        #[doc = concat!("The largest ", $received, " message accepted (default 4 MiB): a larger one")]
        /// fails its call with `RESOURCE_EXHAUSTED`, refused on its length
        /// alone, and nothing else.
        pub fn max_message_size(mut self, max: usize) -> Self {
            self.limits.message = max;
            self
        }

        #[doc = concat!("The largest ", $envelope, " accepted (default 64 KiB): a larger one ", $refused)]
        pub fn max_envelope_size(mut self, max: usize) -> Self {
            self.limits.envelope = max;
            self
        }

        #[doc = concat!(
                            "How long a ", $received, " message may take to arrive whole once the ", $waiting,
                            " waits for its rest (default 30 s; `None`: ", $unbounded, "): past it, ", $late
                        )]
        pub fn message_read_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.limits.message_read_timeout = timeout;
            self
        }
    };
}

/// The compression settings a client and a server builder share.
macro_rules! compression_methods {
    (settings: $($settings:ident).+, send: $send:literal, accept: $accepted:literal $(,)?) => {
        /// Compresses messages of at least the
        /// [`compression_threshold`](Self::compression_threshold) (1 KiB by
        /// default) with `encoding` when the peer reads it, each only if
        /// that makes it smaller (off by default; features `gzip`,
        /// `zstd`).
        #[doc = $send]
        pub fn send_compressed(mut self, encoding: crate::rpc::Encoding) -> Self {
            self.$($settings).+.send = Some(encoding);
            self
        }

        #[doc = concat!("Reads ", $accepted, " compressed with `encoding`, and says so in its header; call it once for each encoding (none by default).")]
        /// A compressed message is held to the message size limit as it
        /// decompresses: one that would pass it fails its call with
        /// `RESOURCE_EXHAUSTED` before more than the limit is held.
        pub fn accept_compressed(mut self, encoding: crate::rpc::Encoding) -> Self {
            self.$($settings).+.accept = self.$($settings).+.accept.with(encoding);
            self
        }

        /// The smallest message [`send_compressed`](Self::send_compressed)
        /// compresses (default 1 KiB): below it, a codec's header and time
        /// cost more than they save.
        pub fn compression_threshold(mut self, bytes: usize) -> Self {
            self.$($settings).+.threshold = bytes;
            self
        }
    };
}

pub mod client;
#[doc(hidden)]
pub mod codegen;
mod compression;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) mod fuzz;
pub mod health;
mod metadata;
mod observe;
mod replies;
pub mod server;
mod status;
mod streaming;
pub mod trace;
mod wire;

use std::time::Duration;

pub use compression::Encoding;
pub use metadata::{Metadata, MetadataValue};
pub(crate) use observe::{CallTimer, Methods};
pub use observe::{End, MethodObserver, Observer, OTHER_METHOD};
pub use status::{Code, Status};
pub use streaming::Streaming;

use crate::handshake::PeerId;

/// The accessors a [`Request`] and a [`Response`] share: their metadata
/// and their message.
macro_rules! message_accessors {
    () => {
        /// Its metadata.
        pub fn metadata(&self) -> &Metadata {
            &self.metadata
        }

        /// Its metadata, to add to.
        pub fn metadata_mut(&mut self) -> &mut Metadata {
            &mut self.metadata
        }

        /// The message.
        pub fn get_ref(&self) -> &T {
            &self.message
        }

        /// The message, mutably.
        pub fn get_mut(&mut self) -> &mut T {
            &mut self.message
        }

        /// The message.
        pub fn into_inner(self) -> T {
            self.message
        }
    };
}

/// A request: the message (or the stream of them), and its metadata; on
/// the server, who sent it and how long the caller waits.
#[derive(Debug, Clone, Default)]
pub struct Request<T> {
    message: T,
    metadata: Metadata,
    peer: Option<PeerId>,
    timeout: Option<Duration>,
    remote_addr: Option<std::net::SocketAddr>,
    /// It came in the caller's early data (a server's request).
    early: bool,
}

impl<T> Request<T> {
    /// A request carrying `message`.
    pub fn new(message: T) -> Self {
        Self {
            message,
            metadata: Metadata::new(),
            peer: None,
            timeout: None,
            remote_addr: None,
            early: false,
        }
    }

    message_accessors!();

    /// On the server: the caller's verified identity (`None` without
    /// encryption).
    pub fn peer(&self) -> Option<&PeerId> {
        self.peer.as_ref()
    }

    /// On the server: the caller's transport address (its TCP peer), as
    /// tonic's `Request::remote_addr`; `None` on the client.
    pub fn remote_addr(&self) -> Option<std::net::SocketAddr> {
        self.remote_addr
    }

    /// On the server: whether the request came in the caller's early data
    /// (0-RTT), which whoever saw it could have sent again. Only methods
    /// marked idempotent run on such requests.
    pub fn is_early(&self) -> bool {
        self.early
    }

    /// On the client: how long to wait for this call (it travels with the
    /// call, and the server drops the handler past it). On the server:
    /// what the caller set.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Sets the call's timeout.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = Some(timeout);
    }

    /// The same request around another message.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Request<U> {
        Request {
            message: f(self.message),
            metadata: self.metadata,
            peer: self.peer,
            timeout: self.timeout,
            remote_addr: self.remote_addr,
            early: self.early,
        }
    }
}

/// A response: the message (or the stream of them) and the server's
/// metadata.
#[derive(Debug, Clone, Default)]
pub struct Response<T> {
    message: T,
    metadata: Metadata,
    early: bool,
}

impl<T> Response<T> {
    /// A response carrying `message`.
    pub fn new(message: T) -> Self {
        Self {
            message,
            metadata: Metadata::new(),
            early: false,
        }
    }

    message_accessors!();

    /// On the client: whether the call went as early data (0-RTT) and the
    /// server accepted it there, so that its reply came in the first round
    /// trip of a new connection. `false` for a call on a connection
    /// already open, and for early data the server refused (the call went
    /// again after the handshake).
    pub fn is_early(&self) -> bool {
        self.early
    }

    pub(crate) fn with_early(mut self, early: bool) -> Self {
        self.early = early;
        self
    }

    /// The same response around another message.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Response<U> {
        Response {
            message: f(self.message),
            metadata: self.metadata,
            early: self.early,
        }
    }
}

/// What a typed client method takes: a message, or a [`Request`] around
/// one (with metadata or a timeout).
pub trait IntoRequest<T> {
    /// The request.
    fn into_request(self) -> Request<T>;
}

impl<T> IntoRequest<T> for T {
    fn into_request(self) -> Request<T> {
        Request::new(self)
    }
}

impl<T> IntoRequest<T> for Request<T> {
    fn into_request(self) -> Request<T> {
        self
    }
}

/// What a typed client method of a client- or bidirectional-streaming
/// call takes: a `futures::Stream` of messages, or a [`Request`] around
/// one.
pub trait IntoStreamingRequest {
    /// The stream of messages.
    type Stream: futures_util::Stream<Item = Self::Message> + Send + 'static;
    /// The messages.
    type Message;
    /// The request.
    fn into_streaming_request(self) -> Request<Self::Stream>;
}

impl<St> IntoStreamingRequest for St
where
    St: futures_util::Stream + Send + 'static,
{
    type Stream = St;
    type Message = St::Item;
    fn into_streaming_request(self) -> Request<St> {
        Request::new(self)
    }
}

impl<St> IntoStreamingRequest for Request<St>
where
    St: futures_util::Stream + Send + 'static,
{
    type Stream = St;
    type Message = St::Item;
    fn into_streaming_request(self) -> Request<St> {
        self
    }
}

/// Includes the code `weft-build` generated (in a build script) for a
/// protobuf package (its messages, and the clients and servers of its
/// services), from the build script's `OUT_DIR`, as tonic's
/// `include_proto!` does.
///
/// What it includes for one service, `weft.examples.Echo`
/// (`proto/examples/echo.proto`, which weft's own build script compiles),
/// and how it is used:
///
/// ```no_run
/// pub mod echo {
///     weft::include_proto!("weft.examples");
/// }
///
/// use echo::{
///     echo_client::EchoClient,
///     echo_server::{Echo, EchoServer, ReplyStream},
///     EchoReply, EchoRequest, ExpandRequest,
/// };
/// use futures_util::stream;
/// use weft::rpc::{Request, Response, Status, Streaming};
///
/// fn reply(text: String) -> EchoReply {
///     EchoReply { text, ..Default::default() }
/// }
///
/// // The server: a trait with one `async fn` per method.
/// struct MyEcho;
///
/// impl Echo for MyEcho {
///     async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
///         Ok(Response::new(reply(request.into_inner().text)))
///     }
///
///     async fn expand(
///         &self,
///         request: Request<ExpandRequest>,
///     ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
///         let ExpandRequest { text, count } = request.into_inner();
///         let replies = (0..count).map(move |i| Ok(reply(format!("{text} {i}"))));
///         Ok(Response::new(Box::pin(stream::iter(replies))))
///     }
///
///     async fn collect(
///         &self,
///         request: Request<Streaming<EchoRequest>>,
///     ) -> Result<Response<EchoReply>, Status> {
///         let mut requests = request.into_inner();
///         let mut text = String::new();
///         while let Some(request) = requests.message().await? {
///             text += &request.text;
///         }
///         Ok(Response::new(reply(text)))
///     }
///
///     async fn chat(
///         &self,
///         request: Request<Streaming<EchoRequest>>,
///     ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
///         let replies = stream::unfold(Some(request.into_inner()), |requests| async move {
///             let mut requests = requests?;
///             match requests.message().await {
///                 Ok(Some(request)) => Some((Ok(reply(request.text)), Some(requests))),
///                 Ok(None) => None,
///                 // The error is the last reply.
///                 Err(status) => Some((Err(status), None)),
///             }
///         });
///         Ok(Response::new(Box::pin(replies)))
///     }
/// }
///
/// // Served with a limit of its own...
/// let server = weft::rpc::server::Server::builder()
///     .add_service(EchoServer::new(MyEcho).max_concurrent_calls(64));
///
/// // ...and called through a client (`Clone`, over a pool, or any tower
/// // middleware around one).
/// async fn call(client: weft::rpc::client::Client<impl weft::pool::Dialer>) -> Result<(), Status> {
///     let mut echo = EchoClient::new(client);
///     let said = echo.say(EchoRequest { text: "hi".into(), ..Default::default() }).await?;
///     assert_eq!(said.into_inner().text, "hi");
///     let mut replies = echo.expand(ExpandRequest { text: "n".into(), count: 3 }).await?.into_inner();
///     while let Some(reply) = replies.message().await? {
///         println!("{}", reply.text);
///     }
///     Ok(())
/// }
/// # drop(server);
/// ```
#[macro_export]
macro_rules! include_proto {
    ($package:literal) => {
        include!(concat!(env!("OUT_DIR"), concat!("/", $package, ".rs")));
    };
}
