//! One call on its stream: its header, the service, the reply, and the
//! deadline over all of it.

use std::{panic::AssertUnwindSafe, time::Duration};

use bytes::BytesMut;
use futures_util::{future::Either, FutureExt};
use prost::Message;
use tokio::time::Instant;
use tower::Service;
use tracing::Instrument;

use super::{
    super::{
        compression::{Compressor, Encodings},
        replies::{finish_with, send_replies},
        status::panic_text,
        streaming::CallFrames,
        wire::{
            check_metadata_entries, check_repeated, frame_len, put_message_frame, Kind,
            CALL_HEADER_ACCEPT_ENCODING, CALL_HEADER_METADATA, MAX_ACCEPT_ENCODINGS,
        },
        CallTimer, Code, Status,
    },
    call::Body,
    limit::ready_in_time,
    Call, Config, Reply,
};
use crate::{
    error::{BoxError, CloseCode},
    server::Opened,
};

/// A unary reply message up to this size is copied into one buffer with
/// its header and status (one allocation, one send); a larger one is sent
/// as it is, without copying.
const COPY_REPLY_MAX: usize = 4 * 1024;

/// One call, on the stream `opened`: its header (due within the header
/// timeout of the stream's opening), the service, the reply.
pub(super) async fn serve_call<S>(opened: Opened, service: S, config: Config)
where
    S: Service<Call, Response = Reply> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let Opened {
        stream,
        first: initial,
        addr: remote_addr,
        at: opened_at,
        ..
    } = opened;
    let peer = stream.peer().copied();
    let suite = stream.suite();
    let early = stream.is_early();
    let (recv, mut send) = stream.into_split();
    let mut reader = CallFrames::with_initial(recv, config.limits, initial);
    let header = match tokio::time::timeout_at(opened_at + config.header_timeout, reader.frame()).await {
        Ok(Ok(Some(frame))) if frame.kind == Kind::Header => {
            let counted = check_metadata_entries(&frame.payload, CALL_HEADER_METADATA).and_then(|()| {
                check_repeated(
                    &frame.payload,
                    CALL_HEADER_ACCEPT_ENCODING,
                    MAX_ACCEPT_ENCODINGS,
                    "accept_encoding names",
                )
            });
            if let Err(status) = counted {
                tracing::debug!(reason = %status.message(), "rpc server: call refused");
                let _ = finish_with(&mut send, BytesMut::new(), &status).await;
                return;
            }
            crate::proto::CallHeader::decode(frame.payload).ok()
        }
        Ok(Err(status)) if status.code() == Code::ResourceExhausted => {
            // A header over the limit, refused on its length alone: the
            // caller learns why.
            tracing::debug!(reason = %status.message(), "rpc server: call refused");
            let _ = finish_with(&mut send, BytesMut::new(), &status).await;
            return;
        }
        _ => None,
    };
    let Some(mut header) = header else {
        send.reset(CloseCode::PROTOCOL_ERROR);
        return;
    };
    if early && config.refuses_early(&header.method) {
        // Early data can be replayed: a method not marked idempotent does
        // not run on it, nor does any middleware see the call. The caller
        // reads it as never processed, and may send it again.
        tracing::debug!(method = %header.method, "an early call to a method not marked idempotent: not run");
        let status = Status::unavailable(format!(
            "{} came as early data (0-RTT) and is not marked idempotent: not run; call again",
            header.method
        ))
        .not_run_here();
        let _ = finish_with(&mut send, BytesMut::new(), &status).await;
        return;
    }
    // The encodings: of the requests (one this server does not read is
    // refused before anything runs, with what it reads, so the client
    // learns), and of the replies (only one the client reads).
    let (named, accepted) = (
        std::mem::take(&mut header.encoding),
        Encodings::from_names(&std::mem::take(&mut header.accept_encoding)),
    );
    match config.compression.incoming(&named) {
        Ok(encoding) => reader.set_encoding(encoding),
        Err(why) => {
            tracing::debug!(method = %header.method, %why, "rpc server: call refused");
            let mut frames = BytesMut::new();
            put_message_frame(
                &mut frames,
                Kind::Header,
                &reply_header(Vec::new(), None, &config),
            );
            let status = Status::unimplemented(format!("{}: {why}; not run", header.method)).not_run_here();
            let _ = finish_with(&mut send, frames, &status).await;
            return;
        }
    }
    let compressor = config.compression.compressor(accepted);
    let asked = (header.timeout_micros > 0).then(|| Duration::from_micros(header.timeout_micros));
    // The server's bound, when it is the shorter.
    let bound = config
        .max_call_duration
        .filter(|max| asked.is_none_or(|asked| *max < asked));
    let timeout = bound.or(asked);
    let deadline = timeout.map(|t| Instant::now() + t);
    let call = Call {
        method: header.method,
        metadata: super::super::Metadata::from_entries(header.metadata),
        peer,
        timeout,
        reader,
        deadline,
        suite,
        remote_addr,
        early,
    };
    let method = call.method.clone();
    // Counted from here; its code set where it ends (a call its caller
    // cancels ends CANCELLED).
    let mut ended = Ended {
        timer: config.methods.as_ref().map(|methods| methods.start(&method)),
        code: Code::Cancelled,
    };
    // The stack's turn first (its `poll_ready`: tower's concurrency
    // limits, a generated server's), given up on in time to say the call
    // never ran; then the call.
    let mut service = service;
    let named = method.as_str();
    // The call's span, continuing the caller's trace if it sent one; the
    // handler runs in both.
    let (span, context) = super::super::trace::call_span(named, &call.metadata);
    let handler = async move {
        if let Err(err) = ready_in_time(&mut service, &call).await? {
            return Err(status_for_caller(named, err.into()));
        }
        service
            .call(call)
            .await
            .map_err(|err| status_for_caller(named, err.into()))
    };
    let handler = match context {
        Some(context) => Either::Left(context.scope(handler)),
        None => Either::Right(handler),
    };
    // Entered at each poll only where a subscriber listens.
    let handler = match span.is_disabled() {
        true => Either::Left(handler),
        false => Either::Right(handler.instrument(span)),
    };
    let handler = AssertUnwindSafe(handler).catch_unwind();
    // The handler first: one that answers in its first poll (most do)
    // never arms the deadline's timer, which every call has (at most the
    // server's maximum duration), and which costs a timer entry.
    let outcome = tokio::select! {
        biased;
        outcome = handler => match outcome {
            Ok(result) => result,
            Err(panic) => {
                // What the panic said stays here: it may tell a stranger
                // about the server's insides.
                tracing::error!(%method, panic = %panic_text(&panic), "rpc server: handler panicked");
                Err(Status::internal(format!("the handler of {method} panicked")))
            }
        },
        () = sleep_until(deadline) => Err(past_deadline(&method, timeout.unwrap_or_default(), bound)),
        err = send.stopped() => {
            tracing::debug!(%method, reason = %err, "rpc server: call cancelled; handler dropped");
            return;
        }
    };
    let reply = match outcome {
        Ok(reply) => reply,
        Err(status) => {
            ended.code = status.code();
            let _ = finish_with(&mut send, BytesMut::new(), &status).await;
            return;
        }
    };
    let header = reply_header(reply.metadata.into_entries(), compressor, &config);
    let body = match (reply.body, compressor) {
        (Body::One(frame), Some(compressor)) => Body::One(compressor.frame(frame)),
        (body, _) => body,
    };
    match body {
        Body::One(frame) if frame.len() <= COPY_REPLY_MAX => {
            // Header, message and status in one buffer, sized exactly (one
            // allocation, none to freeze it), and the end with them: one
            // record.
            let ok = Status::new(Code::Ok, "").to_proto();
            let len = frame_len(header.encoded_len()) + frame.len() + frame_len(ok.encoded_len());
            let mut frames = BytesMut::with_capacity(len);
            put_message_frame(&mut frames, Kind::Header, &header);
            frames.extend_from_slice(&frame);
            put_message_frame(&mut frames, Kind::Status, &ok);
            ended.code = Code::Ok;
            if send.send(frames.freeze()).await.is_ok() {
                let _ = send.finish();
            }
        }
        Body::One(frame) => {
            // Header, message, status and end join one record: sends
            // leave together at the finish. The message is not copied.
            let mut frames = BytesMut::new();
            put_message_frame(&mut frames, Kind::Header, &header);
            if send.send(frames.split().freeze()).await.is_err() || send.send(frame).await.is_err() {
                return;
            }
            ended.code = Code::Ok;
            let _ = finish_with(&mut send, frames, &Status::new(Code::Ok, "")).await;
        }
        Body::Many(replies) => {
            // The header rides with the first replies. Boxed: the unary
            // calls' futures stay small.
            let mut first = BytesMut::new();
            put_message_frame(&mut first, Kind::Header, &header);
            let deadline = deadline.zip(timeout);
            let send_replies = send_replies(&mut send, replies, first, deadline, compressor, &method);
            ended.code = Box::pin(send_replies).await;
        }
    }
}

/// The reply header: the handler's metadata, the encoding of the replies,
/// and what this server reads.
fn reply_header(
    metadata: Vec<crate::proto::MetadataEntry>,
    compressor: Option<Compressor>,
    config: &Config,
) -> crate::proto::ReplyHeader {
    crate::proto::ReplyHeader {
        metadata,
        encoding: compressor
            .map(|c| c.encoding.name().to_owned())
            .unwrap_or_default(),
        accept_encoding: config.compression.accept.names(),
    }
}

/// Records a call's end in the metrics, with its code, however it ends.
struct Ended {
    timer: Option<CallTimer>,
    code: Code,
}

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.finish(self.code);
        }
    }
}

/// The status a middleware's error gives the caller: a [`Status`] (a
/// handler's, or one a layer chose) as it is, tower's timeout and load
/// shedding as their codes; any other error `UNKNOWN` with a generic
/// message, its text logged here rather than sent to a stranger.
fn status_for_caller(method: &str, err: BoxError) -> Status {
    let status = Status::from_error(err);
    if status.code() != Code::Unknown {
        return status;
    }
    tracing::warn!(%method, error = %status.message(), "rpc server: a middleware failed the call");
    Status::new(
        Code::Unknown,
        format!("{method} failed in the server's middleware"),
    )
}

/// Why a call past its deadline ended: the server's maximum, or its
/// caller's deadline.
fn past_deadline(method: &str, timeout: Duration, bound: Option<Duration>) -> Status {
    match bound {
        Some(max) => Status::new(
            Code::DeadlineExceeded,
            format!(
                "{method} ran past the server's maximum call duration of {}",
                crate::error::Rounded(max)
            ),
        ),
        None => Status::deadline_exceeded(timeout),
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
