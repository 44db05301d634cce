//! What a server hands each stream a peer opens: a [`Handler`], as a
//! tower service is what a request is handed to. A closure over
//! [`Opened`] is one; layers wrap them ([`DetectLayer`](super::DetectLayer),
//! or an `Option` of one through `tower::util::option_layer`).

use std::future::Future;

use futures_util::future::Either as EitherFuture;
use tower::util::Either;

use super::Opened;

/// A stream's handling, boxed: for handlers whose futures differ.
#[cfg(feature = "http")]
pub(crate) type Handling = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Takes each stream a peer opens.
pub(crate) trait Handler: Clone + Send + 'static {
    /// The handling of one stream, run as a task of its own (the task
    /// ends when it does).
    type Future: Future<Output = ()> + Send + 'static;

    /// Handles `opened`.
    fn handle(&self, opened: Opened) -> Self::Future;
}

impl<F, Fut> Handler for F
where
    F: Fn(Opened) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    type Future = Fut;

    fn handle(&self, opened: Opened) -> Fut {
        self(opened)
    }
}

impl<A: Handler, B: Handler> Handler for Either<A, B> {
    type Future = EitherFuture<A::Future, B::Future>;

    fn handle(&self, opened: Opened) -> Self::Future {
        match self {
            Either::Left(a) => EitherFuture::Left(a.handle(opened)),
            Either::Right(b) => EitherFuture::Right(b.handle(opened)),
        }
    }
}
