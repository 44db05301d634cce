//! What waits on a connection: the stream
//! [`Connection::open`](super::Connection::open) waits for, and the
//! streams the peer opens, as a `futures::Stream`.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

use tokio::time::Sleep;

use super::{shared::Handle, stream::Stream};
use crate::error::{Error, Repr};

/// Opens a stream on `handle`'s connection, or registers `cx` to be woken
/// when one may be opened ([`Connection::poll_open`](super::Connection::poll_open)).
pub(super) fn poll_open(handle: &Arc<Handle>, cx: &mut Context<'_>) -> Poll<Result<Stream, Error>> {
    let id = handle.inner.with(|shared| {
        let now = shared.clock();
        let opened = shared.core.open(now);
        if let Ok(None) = opened {
            shared.open_waiters.register(cx.waker());
            shared.take_back_read();
        }
        opened
    })?;
    match id {
        Some(id) => Poll::Ready(Ok(Stream::new(id, handle.clone()))),
        None => Poll::Pending,
    }
}

/// The next stream the peer opens on `handle`'s connection
/// ([`Connection::poll_accept`](super::Connection::poll_accept)).
pub(super) fn poll_accept(handle: &Arc<Handle>, cx: &mut Context<'_>) -> Poll<Result<Option<Stream>, Error>> {
    let next = handle.inner.with(|shared| {
        let next = shared.core.accept();
        if matches!(next, Ok(None)) && !shared.core.accept_finished() {
            shared.accept_waiters.register(cx.waker());
            shared.take_back_read();
            return None;
        }
        Some(next)
    });
    match next {
        None => Poll::Pending,
        Some(next) => Poll::Ready(next.map(|id| id.map(|id| Stream::new(id, handle.clone())))),
    }
}

/// The future [`Connection::open`](super::Connection::open) returns: a stream, once the peer's
/// stream limit allows one.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub(super) struct Open {
    conn: Arc<Handle>,
    timeout: Option<Pin<Box<Sleep>>>,
}

impl Open {
    pub(super) fn new(conn: Arc<Handle>) -> Self {
        Self { conn, timeout: None }
    }
}

impl Future for Open {
    type Output = Result<Stream, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(opened) = poll_open(&this.conn, cx) {
            return Poll::Ready(opened);
        }
        let Some(limit) = this.conn.inner.open_timeout else {
            return Poll::Pending;
        };
        let sleep = this
            .timeout
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(Err(Repr::OpenTimeout(limit).into()))
    }
}

/// The streams the peer opens, as a [`futures::Stream`](futures_util::Stream)
/// ([`Connection::incoming`](super::Connection::incoming)).
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct IncomingStreams {
    conn: Arc<Handle>,
    done: bool,
}

impl IncomingStreams {
    pub(super) fn new(conn: Arc<Handle>) -> Self {
        Self { conn, done: false }
    }
}

impl futures_util::Stream for IncomingStreams {
    type Item = Result<Stream, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match ready!(poll_accept(&this.conn, cx)) {
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
