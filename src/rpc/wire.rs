//! The frames of a call on its stream, sans-IO: a kind byte, a varint
//! length, the payload. Bytes in, frames out; nothing is allocated for a
//! frame whose length is past the limit.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

use super::{Code, Status};

/// The largest message accepted by default: 4 MiB, as gRPC.
pub(crate) const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// The largest envelope accepted by default: a call header (method,
/// deadline and metadata), a reply header or a status, 64 KiB. Envelopes
/// are small; one past this fails its call with `RESOURCE_EXHAUSTED`
/// whatever the message limit, so a metadata flood costs at most this much
/// per call.
pub(crate) const DEFAULT_MAX_ENVELOPE_SIZE: usize = 64 * 1024;
/// How long a message may take to arrive whole, from when its reader
/// first waits for the rest of it, by default: a peer that sends part of a
/// message and stops holds the call's buffer that long at most. 4 MiB in
/// it needs about 1.1 Mbit/s.
pub(crate) const DEFAULT_MESSAGE_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest payloads a side accepts: messages, and envelopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) message: usize,
    pub(crate) envelope: usize,
    /// See `DEFAULT_MESSAGE_READ_TIMEOUT`.
    pub(crate) message_read_timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            message: DEFAULT_MAX_MESSAGE_SIZE,
            envelope: DEFAULT_MAX_ENVELOPE_SIZE,
            message_read_timeout: Some(DEFAULT_MESSAGE_READ_TIMEOUT),
        }
    }
}

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A request or reply message (a prost encoding).
    Message = 0,
    /// `CallHeader` (client) or `ReplyHeader` (server), first.
    Header = 1,
    /// `Status`, the server's last frame.
    Status = 2,
    /// A message compressed with the encoding its sender's header named
    /// (section 16.5); bounded by the message limit both compressed and
    /// not.
    Compressed = 3,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Message),
            1 => Some(Kind::Header),
            2 => Some(Kind::Status),
            3 => Some(Kind::Compressed),
            _ => None,
        }
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) kind: Kind,
    pub(crate) payload: Bytes,
}

/// Appends the head of a frame of `kind` whose payload is `len` bytes.
pub(crate) fn put_frame_head(dst: &mut BytesMut, kind: Kind, len: usize) {
    dst.put_u8(kind as u8);
    prost::encoding::encode_varint(len as u64, dst);
}

/// The bytes a frame with `len` bytes of payload takes: its kind, its
/// length's varint, the payload. Buffers sized exactly freeze without an
/// allocation of their own (`Bytes::from` a full `Vec`).
pub(crate) fn frame_len(len: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

/// Appends a frame of `kind` holding `payload`.
pub(crate) fn put_frame(dst: &mut BytesMut, kind: Kind, payload: &[u8]) {
    dst.reserve(frame_len(payload.len()));
    put_frame_head(dst, kind, payload.len());
    dst.put_slice(payload);
}

/// Appends a frame of `kind` holding `message`'s encoding.
pub(crate) fn put_message_frame(dst: &mut BytesMut, kind: Kind, message: &impl Message) {
    let len = message.encoded_len();
    dst.reserve(frame_len(len));
    put_frame_head(dst, kind, len);
    message.encode(dst).expect("reserved room for the encoding");
}

/// `message` encoded straight into a MESSAGE frame of its own.
pub(crate) fn message_frame(message: &impl Message) -> Bytes {
    let len = message.encoded_len();
    let mut frame = BytesMut::with_capacity(frame_len(len));
    put_frame_head(&mut frame, Kind::Message, len);
    message.encode(&mut frame).expect("room for the encoding");
    frame.freeze()
}

/// Splits frames off the bytes of a stream.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// The chunk last pushed, while whole frames are taken from it as
    /// slices (no copy).
    chunk: Bytes,
    /// A frame split across chunks, gathered here.
    buf: BytesMut,
    limits: Limits,
}

impl Decoder {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            chunk: Bytes::new(),
            buf: BytesMut::new(),
            limits,
        }
    }

    /// More bytes from the stream. Frames that arrive whole are sliced
    /// out of `data`; of a frame split across chunks, only its own bytes
    /// are copied together.
    pub(crate) fn push(&mut self, data: Bytes) {
        if !self.chunk.is_empty() {
            // Frames of the last chunk not taken yet: the rest of it joins
            // `buf`, which `next_frame` completes from `data`.
            self.buf.extend_from_slice(&std::mem::take(&mut self.chunk));
        }
        self.chunk = data;
    }

    /// The limits it decodes with.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether bytes of an unfinished frame are waiting.
    pub(crate) fn has_partial(&self) -> bool {
        !self.buf.is_empty() || !self.chunk.is_empty()
    }

    /// The next whole frame, if the bytes so far hold one. A length past
    /// the limit (or an unknown kind) fails before its payload arrives.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame>, Status> {
        while !self.buf.is_empty() {
            // A frame split across chunks: completed from the chunk, with
            // no more of it than the frame needs (the rest stays a slice).
            let need = match self.head(&self.buf)? {
                Some((kind, header_len, len)) if self.buf.len() >= header_len + len => {
                    self.buf.advance(header_len);
                    let payload = self.buf.split_to(len).freeze();
                    return Ok(Some(Frame { kind, payload }));
                }
                Some((_, header_len, len)) => header_len + len - self.buf.len(),
                // The rest of the header: up to its length's last byte
                // (one without the continuation bit), so that nothing of a
                // frame after it is copied.
                None => {
                    let room = MAX_HEAD_LEN - self.buf.len();
                    self.chunk
                        .iter()
                        .take(room)
                        .position(|byte| byte & 0x80 == 0)
                        .map_or(room, |last| last + 1)
                }
            };
            if self.chunk.is_empty() {
                return Ok(None);
            }
            let take = need.min(self.chunk.len());
            self.buf.extend_from_slice(&self.chunk[..take]);
            self.chunk.advance(take);
        }
        match self.head(&self.chunk)? {
            Some((kind, header_len, len)) if self.chunk.len() >= header_len + len => {
                self.chunk.advance(header_len);
                let payload = self.chunk.split_to(len);
                Ok(Some(Frame { kind, payload }))
            }
            // Incomplete: its bytes are copied out now (they would be when
            // the next chunk arrives anyway), so that a call stalled inside
            // a frame does not keep the whole read buffer the chunk is a
            // slice of alive (128 KiB by default, up to 8 MiB, per call).
            _ => {
                if !self.chunk.is_empty() {
                    self.buf.extend_from_slice(&std::mem::take(&mut self.chunk));
                }
                Ok(None)
            }
        }
    }

    /// The kind, header length and payload length of the frame `bytes`
    /// begin with, once they hold its whole header.
    fn head(&self, bytes: &[u8]) -> Result<Option<(Kind, usize, usize)>, Status> {
        let Some(&kind) = bytes.first() else {
            return Ok(None);
        };
        let kind = Kind::from_u8(kind)
            .ok_or_else(|| Status::new(Code::Internal, format!("unknown RPC frame kind {kind}")))?;
        let mut header = &bytes[1..];
        let before = header.len();
        let len = match prost::encoding::decode_varint(&mut header) {
            Ok(len) => len,
            // Up to 10 bytes of varint: incomplete, or invalid.
            Err(_) if before < 10 => return Ok(None),
            Err(_) => return Err(Status::new(Code::Internal, "invalid RPC frame length")),
        };
        let (limit, what) = match kind {
            Kind::Message => (self.limits.message, "a message"),
            Kind::Compressed => (self.limits.message, "a compressed message"),
            Kind::Header => (self.limits.envelope, "a header"),
            Kind::Status => (self.limits.envelope, "a status"),
        };
        if len > limit as u64 {
            return Err(Status::resource_exhausted(format!(
                "{what} of {len} bytes is over the limit of {limit}"
            )));
        }
        // (No room is reserved for what is promised: the buffer grows with
        // what arrives.)
        Ok(Some((kind, 1 + before - header.len(), len as usize)))
    }
}

/// Metadata entries a call header, reply header or status may carry (and
/// the field each keeps them in).
pub(crate) const MAX_METADATA_ENTRIES: usize = 256;
pub(crate) const CALL_HEADER_METADATA: u32 = 3;
pub(crate) const REPLY_HEADER_METADATA: u32 = 1;
pub(crate) const STATUS_TRAILERS: u32 = 4;

/// Counts the entries of the map in `field` of an encoded envelope before
/// it is decoded: 64 KiB of tiny entries decode to 1-2 MiB of maps and
/// strings. `RESOURCE_EXHAUSTED` past [`MAX_METADATA_ENTRIES`].
/// (Malformed encodings are left to the decoder to report.)
pub(crate) fn check_metadata_entries(envelope: &[u8], field: u32) -> Result<(), Status> {
    check_repeated(envelope, field, MAX_METADATA_ENTRIES, "metadata entries")
}

/// Encoding names a call header or reply header may list in its
/// `accept_encoding` (and the field of each): there are two encodings.
pub(crate) const MAX_ACCEPT_ENCODINGS: usize = 16;
pub(crate) const CALL_HEADER_ACCEPT_ENCODING: u32 = 5;
pub(crate) const REPLY_HEADER_ACCEPT_ENCODING: u32 = 3;

/// Counts the entries of the repeated `field` of an encoded envelope
/// before it is decoded: `RESOURCE_EXHAUSTED` past `most` (64 KiB of
/// one-byte strings decode to a megabyte of `String`s).
pub(crate) fn check_repeated(mut envelope: &[u8], field: u32, most: usize, what: &str) -> Result<(), Status> {
    use prost::encoding::{decode_key, skip_field, DecodeContext};
    let mut entries = 0usize;
    while !envelope.is_empty() {
        let Ok((tag, wire_type)) = decode_key(&mut envelope) else {
            return Ok(());
        };
        if skip_field(wire_type, tag, &mut envelope, DecodeContext::default()).is_err() {
            return Ok(());
        }
        if tag == field {
            entries += 1;
            if entries > most {
                return Err(Status::resource_exhausted(format!("more than {most} {what}")));
            }
        }
    }
    Ok(())
}

/// A frame's kind and the longest length varint.
const MAX_HEAD_LEN: usize = 1 + 10;

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
