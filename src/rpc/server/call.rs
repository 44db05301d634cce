//! What a service sees of a call, and what it answers.

use std::{fmt, pin::Pin, time::Duration};

use bytes::Bytes;
use futures_util::Stream;
use prost::Message;
use tokio::time::Instant;

use super::super::{
    replies::{Encoding, Replies},
    streaming::{decode_request, CallFrames},
    wire::{message_frame, Kind},
    Metadata, Request, Response, Status, Streaming,
};
use crate::handshake::PeerId;

/// A call as the server's services see it: method, metadata, caller, and
/// the request messages still on the stream.
pub struct Call {
    pub(super) method: String,
    pub(super) metadata: Metadata,
    pub(super) peer: Option<PeerId>,
    pub(super) timeout: Option<Duration>,
    pub(super) reader: CallFrames,
    /// When the call must be over (its timeout from its arrival).
    pub(super) deadline: Option<Instant>,
    pub(super) suite: crate::handshake::CipherSuite,
    pub(super) remote_addr: Option<std::net::SocketAddr>,
    /// The call came in the dialer's early data (protocol version 3).
    pub(super) early: bool,
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
    /// Whether the call came in the caller's early data (0-RTT, protocol
    /// version 3): anyone who saw it could have sent it again. The server
    /// runs only methods whose service
    /// [`accepts_early`](NamedService::accepts_early) calls on it.
    pub fn is_early(&self) -> bool {
        self.early
    }

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

    /// The caller's transport address (its TCP peer).
    pub fn remote_addr(&self) -> Option<std::net::SocketAddr> {
        self.remote_addr
    }

    /// The cipher suite the caller's connection agreed.
    pub fn suite(&self) -> crate::handshake::CipherSuite {
        self.suite
    }

    /// How long the call may take: the caller's deadline or the server's
    /// [`max_call_duration`](super::Builder::max_call_duration), the shorter (the
    /// server drops the call past it).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The one request message of a unary or server-streaming call.
    ///
    /// It must arrive whole, with the end of the caller's side, within the
    /// server's [`message_read_timeout`](super::Builder::message_read_timeout)
    /// of this call (30 s by default), whether or not a byte of it has come:
    /// a caller that sends a call's header and nothing more holds the
    /// call's turn of a limit no longer than that.
    pub async fn into_request<T: Message + Default>(mut self) -> Result<Request<T>, Status> {
        let limit = self.reader.message_read_timeout();
        let reader = &mut self.reader;
        let message = CallFrames::within_read_timeout(limit, async move {
            let message = match reader.frame().await? {
                Some(frame) if frame.kind == Kind::Message => decode_request::<T>(frame.payload)?,
                Some(_) => return Err(Status::internal("an unexpected frame in the request")),
                None => return Err(Status::invalid_argument("the call ended without its request")),
            };
            if reader.frame().await?.is_some() {
                return Err(Status::invalid_argument("more than one request message"));
            }
            Ok(message)
        })
        .await?;
        Ok(self.request_of(message))
    }

    /// The request messages of a client- or bidirectional-streaming call.
    pub fn into_streaming_request<T: Message + Default>(self) -> Request<Streaming<T>> {
        let Call {
            metadata,
            peer,
            timeout,
            reader,
            remote_addr,
            early,
            ..
        } = self;
        Request {
            message: Streaming::requests(reader),
            metadata,
            peer,
            timeout,
            remote_addr,
            early,
        }
    }

    fn request_of<T>(&self, message: T) -> Request<T> {
        Request {
            message,
            metadata: self.metadata.clone(),
            peer: self.peer,
            timeout: self.timeout,
            remote_addr: self.remote_addr,
            early: self.early,
        }
    }
}

/// What a service answers a [`Call`] with: the server's metadata and the
/// reply message, or a stream of them.
pub struct Reply {
    pub(super) metadata: Metadata,
    pub(super) body: Body,
}

/// Reply messages, already framed: each is encoded once, straight into
/// its frame.
pub(super) enum Body {
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
        St: Stream<Item = Result<T, Status>> + Send + 'static,
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

    /// Whether `method` (its name after the last `/`) may run on a call
    /// that came as early data, which can be replayed: only methods safe
    /// to repeat. Generated servers say yes for the methods the .proto
    /// marks `option idempotency_level = IDEMPOTENT` or `NO_SIDE_EFFECTS`;
    /// by default, none. The server answers an early call to any other
    /// method `UNAVAILABLE` without running it.
    fn accepts_early(method: &str) -> bool {
        let _ = method;
        false
    }
}
