//! What waits on a connection: the stream [`Connection::open`] waits
//! for, and the streams the peer opens, as a `futures::Stream`.

use std::{
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

use futures_util::Stream as AsyncStream;
use tokio::time::Sleep;

use super::{connection::Connection, stream::Stream};
use crate::error::{Error, Repr};

/// The future [`Connection::open`] returns: a stream, once the peer's
/// stream limit allows one.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub(super) struct Open {
    conn: Connection,
    timeout: Option<Pin<Box<Sleep>>>,
}

impl Open {
    pub(super) fn new(conn: Connection) -> Self {
        Self { conn, timeout: None }
    }
}

impl Future for Open {
    type Output = Result<Stream, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(opened) = this.conn.poll_open(cx) {
            return Poll::Ready(opened);
        }
        let Some(limit) = this.conn.inner().open_timeout else {
            return Poll::Pending;
        };
        let sleep = this
            .timeout
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(Repr::OpenTimeout(limit).into()))
    }
}

/// The streams the peer opens, as a [`futures::Stream`](AsyncStream)
/// ([`Connection::incoming`]).
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct Incoming {
    conn: Connection,
    done: bool,
}

impl Incoming {
    pub(super) fn new(conn: Connection) -> Self {
        Self { conn, done: false }
    }
}

impl AsyncStream for Incoming {
    type Item = Result<Stream, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match ready!(this.conn.poll_accept(cx)) {
            Ok(Some(stream)) => Poll::Ready(Some(Ok(stream))),
            Ok(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Err(err) => {
                this.done = true;
                Poll::Ready(Some(Err(err)))
            }
        }
    }
}
