//! A streaming call's replies on the server, sent in batches: every reply
//! the handler has ready when it is asked joins one send, encoded straight
//! into it. A handler that yields one reply at a time sends each at once;
//! one that has many ready shares the cost of a send (the connection's
//! lock, a wake-up of its driver) among them, and the header and status
//! ride with the first and last.

use std::{
    future::{poll_fn, Future},
    panic::{catch_unwind, AssertUnwindSafe},
    pin::{pin, Pin},
    task::{Context, Poll},
    time::Duration,
};

use bytes::BytesMut;
use futures_util::Stream;
use prost::Message;
use tokio::time::Instant;

use super::{
    compression::Compressor,
    wire::{put_message_frame, Kind},
    Code, Status,
};
use crate::{error::Error, mux::SendStream};

/// A batch is sent once it holds this many bytes, even if more replies
/// are ready: a record's worth, so that the first replies leave while the
/// handler makes the next.
const BATCH_MAX: usize = 16 * 1024;

/// A streaming handler's replies, each encoded as it is taken.
pub(crate) trait Replies: Send {
    /// Appends the next reply, if one is ready, to `dst` as a MESSAGE
    /// frame; `None` at the end; an error ends the call with its status.
    fn poll_encode(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut BytesMut,
    ) -> Poll<Option<Result<(), Status>>>;
}

pin_project_lite::pin_project! {
    /// [`Replies`] from a stream of messages.
    pub(crate) struct Encoding<St> {
        #[pin]
        messages: St,
    }
}

impl<St> Encoding<St> {
    pub(crate) fn new(messages: St) -> Self {
        Self { messages }
    }
}

impl<T, St> Replies for Encoding<St>
where
    T: Message,
    St: Stream<Item = Result<T, Status>> + Send,
{
    fn poll_encode(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut BytesMut,
    ) -> Poll<Option<Result<(), Status>>> {
        self.project().messages.poll_next(cx).map(|next| {
            next.map(|reply| reply.map(|message| put_message_frame(dst, Kind::Message, &message)))
        })
    }
}

/// What a call's batch ends with.
enum Gathered {
    /// More replies to come; `full` if the batch filled up (the handler
    /// had more ready), not if the handler has none ready now.
    More { full: bool },
    /// The replies ended: this status closes the call.
    End(Status),
    /// The caller is gone (it reset the stream, or the connection ended).
    Stopped,
}

/// Sends `replies` after `first` (the reply header, already framed) and
/// then their status, and finishes the stream; returns early, sending
/// nothing more, if the caller goes away. Past `deadline` the call ends
/// with `DEADLINE_EXCEEDED` (checked while the handler has no reply ready
/// and before each batch). Returns the code the call ended with
/// (`CANCELLED` when its caller went away).
pub(crate) async fn send_replies(
    send: &mut SendStream,
    mut replies: Pin<Box<dyn Replies>>,
    first: BytesMut,
    deadline: Option<(Instant, Duration)>,
    compressor: Option<Compressor>,
    method: &str,
) -> Code {
    let mut expired = pin!(async {
        match deadline {
            Some((at, timeout)) => {
                tokio::time::sleep_until(at).await;
                Status::deadline_exceeded(timeout)
            }
            None => std::future::pending().await,
        }
    });
    let mut batch = first;
    // Whether the last batch filled up: then the next is likely to, and
    // gets its room at once. Otherwise each reply reserves its own, so a
    // handler that makes one reply at a time allocates each exactly.
    let mut bursting = false;
    let status = loop {
        if bursting {
            batch.reserve(BATCH_MAX);
        }
        let gathered = poll_fn(|cx| {
            if let Poll::Ready(status) = expired.as_mut().poll(cx) {
                return Poll::Ready(Gathered::End(status));
            }
            gather(cx, replies.as_mut(), &mut batch, send, compressor, method)
        })
        .await;
        match gathered {
            Gathered::More { full } => {
                if send.send(batch.split().freeze()).await.is_err() {
                    return Code::Cancelled;
                }
                if !full {
                    // The handler is at work: hold no spare room meanwhile.
                    batch = BytesMut::new();
                }
                bursting = full;
            }
            Gathered::End(status) => break status,
            Gathered::Stopped => return Code::Cancelled,
        }
    };
    let _ = finish_with(send, batch, &status).await;
    status.code()
}

/// Writes what is in `frames`, the status, and the end of the stream.
pub(super) async fn finish_with(
    send: &mut SendStream,
    mut frames: BytesMut,
    status: &Status,
) -> Result<(), Error> {
    put_message_frame(&mut frames, Kind::Status, &status.to_proto());
    send.send(frames.freeze()).await?;
    send.finish()
}

/// Takes ready replies into `batch` until it is full, the handler has
/// none ready, or the replies end.
fn gather(
    cx: &mut Context<'_>,
    mut replies: Pin<&mut dyn Replies>,
    batch: &mut BytesMut,
    send: &mut SendStream,
    compressor: Option<Compressor>,
    method: &str,
) -> Poll<Gathered> {
    let mut taken = 0;
    while batch.len() < BATCH_MAX {
        let before = batch.len();
        match catch_unwind(AssertUnwindSafe(|| replies.as_mut().poll_encode(cx, batch))) {
            Ok(Poll::Ready(Some(Ok(())))) => {
                if let Some(compressor) = compressor {
                    compressor.compress_tail(batch, before);
                }
                taken += 1;
                if taken == 2 && batch.capacity() < BATCH_MAX {
                    // A second reply ready at once: more are likely. Room
                    // for the batch now (and for a last reply past its
                    // end, as large as this one), rather than growing it
                    // reply by reply, copying it each time.
                    let reply = batch.len() - before;
                    batch.reserve((BATCH_MAX + reply).saturating_sub(batch.len()));
                }
            }
            Ok(Poll::Ready(Some(Err(status)))) => return Poll::Ready(Gathered::End(status)),
            Ok(Poll::Ready(None)) => return Poll::Ready(Gathered::End(Status::new(Code::Ok, ""))),
            // Send what there is (at first, the reply header alone).
            Ok(Poll::Pending) if !batch.is_empty() => return Poll::Ready(Gathered::More { full: false }),
            Ok(Poll::Pending) => {
                // Nothing to send: wait for the handler, the caller's
                // going away, or the deadline.
                return match send.poll_stopped(cx) {
                    Poll::Ready(err) => {
                        tracing::debug!(%method, reason = %err, "rpc server: call cancelled; replies dropped");
                        Poll::Ready(Gathered::Stopped)
                    }
                    Poll::Pending => Poll::Pending,
                };
            }
            Err(panic) => {
                // A reply half-encoded when it panicked is not sent.
                batch.truncate(before);
                tracing::error!(%method, panic = %super::status::panic_text(&panic), "rpc server: replies panicked");
                return Poll::Ready(Gathered::End(Status::internal(format!(
                    "the replies of {method} panicked"
                ))));
            }
        }
    }
    Poll::Ready(Gathered::More { full: true })
}
