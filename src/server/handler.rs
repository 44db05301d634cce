//! What a server hands each stream a peer opens: a [`Handler`], as a
//! tower service is what a request is handed to. A closure over
//! [`Opened`] is one; layers wrap them ([`DetectLayer`](super::DetectLayer),
//! or an `Option` of one through `tower::util::option_layer`).

use std::{future::Future, pin::Pin};

use tower::util::Either;

use super::Opened;

/// A stream's handling, run in a task of its own.
pub(crate) type Handling = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Takes each stream a peer opens.
pub(crate) trait Handler: Clone + Send + 'static {
    /// Handles `opened` (the task ends when the future does).
    fn handle(&self, opened: Opened) -> Handling;
}

impl<F, Fut> Handler for F
where
    F: Fn(Opened) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn handle(&self, opened: Opened) -> Handling {
        Box::pin(self(opened))
    }
}

impl<A: Handler, B: Handler> Handler for Either<A, B> {
    fn handle(&self, opened: Opened) -> Handling {
        match self {
            Either::Left(a) => a.handle(opened),
            Either::Right(b) => b.handle(opened),
        }
    }
}
