//! A call's frames on its stream, as the client writes and reads them
//! (docs/PROTOCOL.md, section 16.1): its first bytes, its streamed
//! requests, and the server's reply header.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{stream::BoxStream, StreamExt};
use prost::Message;

use super::{RawCall, RawReply, Requests};
use crate::{
    mux::SendStream,
    rpc::{
        compression::{ClientCompression, Compressor},
        streaming::{AbortOnDrop, CallFrames},
        wire::{
            check_metadata_entries, check_repeated, frame_len, put_frame, put_frame_head, put_message_frame,
            Kind, MAX_ACCEPT_ENCODINGS, REPLY_HEADER_ACCEPT_ENCODING, REPLY_HEADER_METADATA, STATUS_TRAILERS,
        },
        Status,
    },
};

/// What a call sends on its stream.
pub(super) struct Outgoing {
    /// Its first bytes: its header, and its request when it has one (all
    /// of it, then).
    pub(super) first: Bytes,
    /// Otherwise, the requests to stream after them.
    pub(super) streamed: Option<BoxStream<'static, Bytes>>,
    /// How its requests are compressed, if they are.
    pub(super) compressor: Option<Compressor>,
}

/// What `call` sends on its stream, with `timeout` in its header, its
/// requests compressed as `compression` allows.
pub(super) fn outgoing(
    call: RawCall,
    timeout: Option<Duration>,
    compression: &ClientCompression,
) -> Outgoing {
    let compressor = compression.compressor();
    let header = crate::proto::CallHeader {
        method: call.method.into_owned(),
        timeout_micros: timeout.map_or(0, |t| t.as_micros().clamp(1, u64::MAX as u128) as u64),
        metadata: call.metadata.into_entries(),
        encoding: compressor
            .map(|c| c.encoding.name().to_owned())
            .unwrap_or_default(),
        accept_encoding: compression.config.accept.names(),
    };
    // Sized exactly: one allocation, and none more to freeze it.
    let request_len = match &call.requests {
        Requests::One(message) => frame_len(message.len()),
        Requests::Many(_) => 0,
    };
    let mut first = BytesMut::with_capacity(frame_len(header.encoded_len()) + request_len);
    put_message_frame(&mut first, Kind::Header, &header);
    let streamed = match call.requests {
        Requests::One(message) => {
            match compressor {
                Some(compressor) => compressor.put_frame(&mut first, &message),
                None => put_frame(&mut first, Kind::Message, &message),
            }
            None
        }
        Requests::Many(messages) => Some(messages),
    };
    Outgoing {
        first: first.freeze(),
        streamed,
        compressor,
    }
}

/// Waits for the server's reply header (or its status, for a call that
/// failed at once).
pub(super) async fn reply_header(
    mut reader: CallFrames,
    writer: Option<AbortOnDrop>,
    early: bool,
    compression: &ClientCompression,
) -> Result<RawReply, Status> {
    match reader.frame().await? {
        Some(frame) if frame.kind == Kind::Header => {
            check_metadata_entries(&frame.payload, REPLY_HEADER_METADATA)?;
            check_repeated(
                &frame.payload,
                REPLY_HEADER_ACCEPT_ENCODING,
                MAX_ACCEPT_ENCODINGS,
                "accept_encoding names",
            )?;
            let header = crate::proto::ReplyHeader::decode(frame.payload)
                .map_err(|err| Status::internal(format!("undecodable reply header: {err}")))?;
            reader.set_encoding(compression.reply_header(&header.encoding, &header.accept_encoding)?);
            Ok(RawReply {
                metadata: crate::rpc::Metadata::from_entries(header.metadata),
                early,
                reader,
                _writer: writer,
                timer: None,
            })
        }
        Some(frame) if frame.kind == Kind::Status => {
            check_metadata_entries(&frame.payload, STATUS_TRAILERS)?;
            let status = crate::proto::Status::decode(frame.payload)
                .map_err(|err| Status::internal(format!("undecodable status: {err}")))?;
            Err(Status::from_proto(status))
        }
        Some(_) => Err(Status::internal("a reply message before the reply header")),
        None => Err(Status::internal("the call ended without a status")),
    }
}

/// Writes streamed requests, then the end of them.
pub(super) async fn write_requests(
    send: &mut SendStream,
    mut messages: BoxStream<'static, Bytes>,
    compressor: Option<Compressor>,
) -> Result<(), Status> {
    while let Some(message) = messages.next().await {
        if let Some(compressor) = compressor {
            let mut frame = BytesMut::new();
            compressor.put_frame(&mut frame, &message);
            send.send(frame.freeze()).await?;
            continue;
        }
        // The frame's head, then the message as it is: no copy of the
        // message before it joins the record.
        let mut head = BytesMut::with_capacity(6);
        put_frame_head(&mut head, Kind::Message, message.len());
        send.send(head.freeze()).await?;
        send.send(message).await?;
    }
    send.finish()?;
    Ok(())
}
