//! A call at the level of encoded messages.

use std::{borrow::Cow, fmt, time::Duration};

use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::rpc::Metadata;

/// A call at the level of encoded messages: what [`Client`](super::Client) serves.
pub struct RawCall {
    pub(super) method: Cow<'static, str>,
    pub(super) metadata: Metadata,
    pub(super) timeout: Option<Duration>,
    pub(super) requests: Requests,
    /// Safe to repeat: may go as early data.
    pub(super) idempotent: bool,
    /// Answered by one reply (unary and client-streaming calls): the
    /// client's default deadline applies.
    pub(super) one_reply: bool,
}

pub(super) enum Requests {
    One(Bytes),
    Many(BoxStream<'static, Bytes>),
}

impl RawCall {
    /// A call with one request message (unary and server streaming).
    pub fn unary(method: impl Into<Cow<'static, str>>, metadata: Metadata, message: Bytes) -> Self {
        Self {
            method: method.into(),
            metadata,
            timeout: None,
            requests: Requests::One(message),
            idempotent: false,
            one_reply: false,
        }
    }

    /// A call with a stream of request messages (client and bidirectional
    /// streaming).
    pub fn streaming(
        method: impl Into<Cow<'static, str>>,
        metadata: Metadata,
        messages: BoxStream<'static, Bytes>,
    ) -> Self {
        Self {
            method: method.into(),
            metadata,
            timeout: None,
            requests: Requests::Many(messages),
            idempotent: false,
            one_reply: false,
        }
    }

    /// Marks the call safe to repeat (its method is idempotent, or has no
    /// side effects): a [`Client::one_shot`](super::Client::one_shot) client sends such a call with one
    /// request message as early data (0-RTT), which can be replayed.
    /// Generated clients mark the methods the .proto marks
    /// `idempotency_level = IDEMPOTENT` or `NO_SIDE_EFFECTS`.
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// Whether the call is marked safe to repeat.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// Marks the call as answered by one reply (a unary or
    /// client-streaming call, as the typed calls do): a [`Client`]'s
    /// default deadline applies to it.
    pub(crate) fn with_one_reply(mut self) -> Self {
        self.one_reply = true;
        self
    }

    /// With a timeout (it travels with the call).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The method, `package.Service/Method`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Its metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Its metadata, to change (tower middleware around a client: a
    /// `traceparent` from OpenTelemetry's context, credentials).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// A copy, for a retry: only calls with one request message can be
    /// made again.
    pub fn try_clone(&self) -> Option<Self> {
        match &self.requests {
            Requests::One(message) => Some(Self {
                method: self.method.clone(),
                metadata: self.metadata.clone(),
                timeout: self.timeout,
                requests: Requests::One(message.clone()),
                idempotent: self.idempotent,
                one_reply: self.one_reply,
            }),
            Requests::Many(_) => None,
        }
    }
}

impl fmt::Debug for RawCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawCall")
            .field("method", &self.method)
            .field("timeout", &self.timeout)
            .finish()
    }
}
