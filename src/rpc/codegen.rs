//! What the code `weft-build` generates names: everything through
//! `weft::rpc::codegen`, so a crate with generated clients and servers
//! needs only `weft` and `prost` as dependencies. Not a stable API of its
//! own; use the items where they are defined.

pub use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

pub use tower::Service;

pub use super::{
    client::{RawCall, RawReply},
    server::{limit::Limit, Call, NamedService, Reply},
    IntoRequest, IntoStreamingRequest, Request, Response, Status, Streaming,
};
pub use tower::BoxError;

/// The future of a generated server's `call`.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The replies of a server- or bidirectional-streaming method: any
/// `futures::Stream` of results, boxed (`Box::pin(stream)`).
pub type ReplyStream<T> = Pin<Box<dyn futures_util::Stream<Item = Result<T, Status>> + Send + 'static>>;

/// `replies`, holding `turn` (a [`Limit`]'s permit) until the last reply
/// is taken: a streaming call counts against its service's limit while
/// its replies are still being produced.
pub fn hold<T, P>(replies: ReplyStream<T>, turn: P) -> ReplyStream<T>
where
    T: 'static,
    P: Send + 'static,
{
    Box::pin(Held {
        replies,
        turn: Some(turn),
    })
}

struct Held<T, P> {
    replies: ReplyStream<T>,
    turn: Option<P>,
}

// Neither field is structurally pinned: `replies` is a `Pin<Box<_>>`.
impl<T, P> Unpin for Held<T, P> {}

impl<T, P> futures_util::Stream for Held<T, P> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.replies.as_mut().poll_next(cx);
        if let Poll::Ready(None) = next {
            self.turn = None;
        }
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.replies.size_hint()
    }
}

/// The unimplemented status of a method the service does not have.
pub fn unknown_method(method: &str) -> Status {
    Status::unimplemented(format!("no method {method:?} here"))
}
