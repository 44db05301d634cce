//! Reading a call's frames off its stream, and the messages of a call as
//! a `futures::Stream`.

use std::{
    fmt,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures_util::Stream;
use prost::Message;
use tokio::time::{Instant, Sleep};

use super::CallTimer;
use super::{
    compression::{decompress, Encoding},
    wire::{check_metadata_entries, Decoder, Frame, Kind, Limits, STATUS_TRAILERS},
    Code, Status,
};
use crate::mux::RecvStream;

/// The frames coming in on a call's stream.
pub(crate) struct CallFrames {
    recv: RecvStream,
    decoder: Decoder,
    /// The encoding of the peer's COMPRESSED frames, as its header named
    /// it (and this side reads it).
    encoding: Option<Encoding>,
    ended: bool,
    /// The deadline of the frame partly read, once the reader waited for
    /// its rest ([`Limits::message_read_timeout`]).
    deadline: Deadline,
}

/// Whether the frame partly read has a deadline running.
#[derive(Debug)]
enum Deadline {
    Unarmed,
    /// The timer, kept for the next frame's deadline once disarmed.
    Idle(Pin<Box<Sleep>>),
    Armed(Pin<Box<Sleep>>),
}

impl CallFrames {
    pub(crate) fn new(recv: RecvStream, limits: Limits) -> Self {
        Self::with_initial(recv, limits, Bytes::new())
    }

    /// A reader that has `initial` bytes of the stream already.
    pub(crate) fn with_initial(recv: RecvStream, limits: Limits, initial: Bytes) -> Self {
        let mut decoder = Decoder::new(limits);
        decoder.push(initial);
        Self {
            recv,
            decoder,
            encoding: None,
            ended: false,
            deadline: Deadline::Unarmed,
        }
    }

    /// The next frame; `None` at the end of the stream.
    pub(crate) fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Frame>, Status>> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                if let Deadline::Armed(timer) = std::mem::replace(&mut self.deadline, Deadline::Unarmed) {
                    self.deadline = Deadline::Idle(timer);
                }
                return Poll::Ready(self.decompressed(frame).map(Some));
            }
            if self.ended {
                return Poll::Ready(if self.decoder.has_partial() {
                    Err(Status::new(Code::Internal, "the stream ended inside a frame"))
                } else {
                    Ok(None)
                });
            }
            let polled = self.recv.poll_recv(cx);
            if polled.is_pending() {
                self.poll_deadline(cx)?;
            }
            match ready!(polled) {
                Ok(Some(data)) => self.decoder.push(data),
                Ok(None) => self.ended = true,
                Err(err) => return Poll::Ready(Err(Status::from_stream_error(&err))),
            }
        }
    }

    /// The peer's header named `encoding` for its COMPRESSED frames.
    pub(crate) fn set_encoding(&mut self, encoding: Option<Encoding>) {
        self.encoding = encoding;
    }

    /// A COMPRESSED frame as the MESSAGE it holds, decompressed within the
    /// message limit; any other frame as it is.
    fn decompressed(&self, frame: Frame) -> Result<Frame, Status> {
        if frame.kind != Kind::Compressed {
            return Ok(frame);
        }
        let encoding = self.encoding.ok_or_else(|| {
            Status::internal("a compressed message in a call whose header named no encoding")
        })?;
        Ok(Frame {
            kind: Kind::Message,
            payload: decompress(encoding, &frame.payload, self.decoder.limits().message)?,
        })
    }

    /// The reader waits: with part of a frame read, the frame's deadline
    /// runs (set now if it was not), and an error once it has passed.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Result<(), Status> {
        let Some(limit) = self.decoder.limits().message_read_timeout else {
            return Ok(());
        };
        if !self.decoder.has_partial() {
            return Ok(());
        }
        let deadline = Instant::now() + limit;
        self.deadline = match std::mem::replace(&mut self.deadline, Deadline::Unarmed) {
            Deadline::Unarmed => Deadline::Armed(Box::pin(tokio::time::sleep_until(deadline))),
            Deadline::Idle(mut timer) => {
                timer.as_mut().reset(deadline);
                Deadline::Armed(timer)
            }
            armed @ Deadline::Armed(_) => armed,
        };
        if let Deadline::Armed(timer) = &mut self.deadline {
            if timer.as_mut().poll(cx).is_ready() {
                return Err(Status::new(
                    Code::DeadlineExceeded,
                    format!(
                        "a message begun did not arrive whole within {}",
                        crate::error::Rounded(limit)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) async fn frame(&mut self) -> Result<Option<Frame>, Status> {
        std::future::poll_fn(|cx| self.poll_frame(cx)).await
    }

    /// `read` (of this reader's frames) within the message read timeout,
    /// from now, whether or not a byte of them has come: what a handler
    /// waiting for a call's one request allows it. The timer is made only
    /// if `read` does not finish at its first poll.
    pub(crate) async fn within_read_timeout<T>(
        limit: Option<Duration>,
        read: impl Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        let Some(limit) = limit else {
            return read.await;
        };
        let asked = Instant::now();
        let mut read = std::pin::pin!(read);
        let mut timer: Option<Pin<Box<Sleep>>> = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(read) = read.as_mut().poll(cx) {
                return Poll::Ready(read);
            }
            let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(asked + limit)));
            ready!(timer.as_mut().poll(cx));
            Poll::Ready(Err(Status::new(
                Code::DeadlineExceeded,
                format!(
                    "the request did not arrive whole within {} of the handler asking for it",
                    crate::error::Rounded(limit)
                ),
            )))
        })
        .await
    }

    /// How long a message may take to arrive ([`Limits::message_read_timeout`]).
    pub(crate) fn message_read_timeout(&self) -> Option<Duration> {
        self.decoder.limits().message_read_timeout
    }
}

/// The messages of a call as they arrive: requests on the server (client
/// and bidirectional streaming), replies on the client (server and
/// bidirectional streaming). A `futures::Stream` of `Result<T, Status>`,
/// or [`message`](Self::message) one at a time. On the client, a call
/// that fails ends the stream with its [`Status`].
///
/// Flow control is the weft stream's: messages not yet taken wait in its
/// window, so a slow consumer slows its producer and nobody else.
pub struct Streaming<T> {
    reader: Option<CallFrames>,
    /// Replies end with a status frame; requests end with the stream.
    replies: bool,
    /// The task writing a client's streamed requests: stopped with it.
    writer: Option<AbortOnDrop>,
    /// A client call's metrics: recorded with the status that ends the
    /// replies, or as a cancel if they are dropped before it.
    timer: Option<CallTimer>,
    _message: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Streaming<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streaming")
            .field("ended", &self.reader.is_none())
            .finish()
    }
}

impl<T: Message + Default> Streaming<T> {
    pub(crate) fn requests(reader: CallFrames) -> Self {
        Self {
            reader: Some(reader),
            replies: false,
            writer: None,
            timer: None,
            _message: PhantomData,
        }
    }

    pub(crate) fn replies(reader: CallFrames) -> Self {
        Self {
            reader: Some(reader),
            replies: true,
            writer: None,
            timer: None,
            _message: PhantomData,
        }
    }

    /// The next message; `None` at the end.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        futures_util::StreamExt::next(self).await.transpose()
    }

    /// Keeps the task writing the call's requests until this ends.
    pub(crate) fn keep_alive(&mut self, writer: Option<AbortOnDrop>) {
        self.writer = writer;
    }

    /// Times the call until its replies end.
    pub(crate) fn time(&mut self, timer: Option<CallTimer>) {
        self.timer = timer;
    }

    /// The call's timer, for a caller that decides the call's outcome
    /// itself (a call with one reply: its status is the caller's result).
    pub(crate) fn take_timer(&mut self) -> Option<CallTimer> {
        self.timer.take()
    }
}

impl<T: Message + Default> Stream for Streaming<T> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(reader) = this.reader.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = ready!(reader.poll_frame(cx));
        let item = match frame {
            Ok(Some(Frame {
                kind: Kind::Message,
                payload,
            })) if this.replies => return Poll::Ready(Some(decode(payload))),
            Ok(Some(Frame {
                kind: Kind::Message,
                payload,
            })) => return Poll::Ready(Some(decode_request(payload))),
            Ok(Some(Frame {
                kind: Kind::Status,
                payload,
            })) if this.replies => match check_metadata_entries(&payload, STATUS_TRAILERS).and_then(|()| {
                crate::proto::Status::decode(payload)
                    .map_err(|err| Status::internal(format!("undecodable status: {err}")))
            }) {
                Ok(status) if status.code == 0 => None,
                Ok(status) => Some(Err(Status::from_proto(status))),
                Err(status) => Some(Err(status)),
            },
            Ok(Some(frame)) => Some(Err(Status::internal(format!(
                "unexpected {:?} frame in a call",
                frame.kind
            )))),
            Ok(None) if this.replies => Some(Err(Status::internal("the call ended without a status"))),
            Ok(None) => None,
            Err(status) => Some(Err(status)),
        };
        this.reader = None;
        if let Some(timer) = this.timer.take() {
            timer.finish(match &item {
                Some(Err(status)) => status.code(),
                _ => Code::Ok,
            });
        }
        Poll::Ready(item)
    }
}

/// Aborts a task when dropped: the task writing a client's streamed
/// requests ends with the call.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A message off the wire.
pub(crate) fn decode<T: Message + Default>(payload: Bytes) -> Result<T, Status> {
    T::decode(payload).map_err(|err| Status::internal(format!("undecodable message: {err}")))
}

/// A request message, decoded on the server: a failure's detail (prost's
/// text, which names the schema's types and fields) is logged, and the
/// status the caller gets says only that the message did not decode.
pub(crate) fn decode_request<T: Message + Default>(payload: Bytes) -> Result<T, Status> {
    T::decode(payload).map_err(|err| {
        tracing::debug!(error = %err, "rpc server: undecodable request message");
        Status::internal("undecodable request message")
    })
}
