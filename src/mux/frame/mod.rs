//! Multiplexing frames, carried in the channel's byte stream
//! (docs/PROTOCOL.md, section 15.1).
//!
//! Every frame is a 10-byte header — kind (u8), flags (u8), stream id (u32
//! big-endian), payload length (u32 big-endian) — and its payload. Data
//! payloads are handed on in whatever pieces they arrive (never buffered
//! whole), so their length is bounded only by flow control; control
//! payloads are buffered and bounded by [`MAX_CONTROL_PAYLOAD`]. Each
//! control frame is a type in [`control`] that encodes and decodes itself;
//! [`Decoder`] turns bytes into [`Input`]s.

mod control;
mod decode;

use bytes::BufMut;

pub(crate) use control::{Credit, GoAway, Ping, Pong, Reset, StreamCredit};
pub(crate) use decode::{Decoder, Input};

/// Length of a mux frame header.
pub(crate) const HEADER_LEN: usize = 10;

/// The largest control payload (credit lists, go-away reasons) we buffer:
/// a DoS bound, room for 2,047 stream credits in one frame.
pub(crate) const MAX_CONTROL_PAYLOAD: usize = 16 * 1024;

/// The longest go-away reason, in bytes.
pub(crate) const MAX_REASON: usize = 256;

/// The FIN flag: the sender's direction of the stream ends with this frame.
pub(crate) const FLAG_FIN: u8 = 0x1;

/// Mux frame kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Opens a stream; may carry its first data, and FIN.
    Open = 1,
    /// Stream data (non-empty); may carry FIN.
    Data = 2,
    /// Half close: the sender's direction ends.
    Fin = 3,
    /// Abort the stream's open directions: u32 code.
    Reset = 4,
    /// Flow-control credit: (u32 stream, u32 increment)*, stream 0 = connection.
    Credit = 5,
    /// Stream credit: u32 total streams the receiver may open.
    StreamCredit = 6,
    /// u64 opaque, answered by a pong.
    Ping = 7,
    /// u64 opaque of the ping answered.
    Pong = 8,
    /// u32 last stream id processed, u32 code, reason.
    GoAway = 9,
}

impl Kind {
    fn from_u8(kind: u8) -> Option<Kind> {
        Some(match kind {
            1 => Kind::Open,
            2 => Kind::Data,
            3 => Kind::Fin,
            4 => Kind::Reset,
            5 => Kind::Credit,
            6 => Kind::StreamCredit,
            7 => Kind::Ping,
            8 => Kind::Pong,
            9 => Kind::GoAway,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Open => "open",
            Kind::Data => "data",
            Kind::Fin => "fin",
            Kind::Reset => "reset",
            Kind::Credit => "credit",
            Kind::StreamCredit => "stream credit",
            Kind::Ping => "ping",
            Kind::Pong => "pong",
            Kind::GoAway => "go-away",
        }
    }

    /// Frames about the connection as a whole carry stream id 0.
    fn is_connection_level(self) -> bool {
        matches!(
            self,
            Kind::Credit | Kind::StreamCredit | Kind::Ping | Kind::Pong | Kind::GoAway
        )
    }
}

/// Writes a frame header.
pub(crate) fn put_header(dst: &mut impl BufMut, kind: Kind, flags: u8, stream: u32, len: usize) {
    debug_assert!(len <= u32::MAX as usize);
    dst.put_u8(kind as u8);
    dst.put_u8(flags);
    dst.put_u32(stream);
    dst.put_u32(len as u32);
}

/// A frame from raw fields, valid or not: what a hostile peer could send.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> bytes::Bytes {
    let mut b = bytes::BytesMut::new();
    b.put_u8(kind);
    b.put_u8(flags);
    b.put_u32(stream);
    b.put_u32(payload.len() as u32);
    b.put_slice(payload);
    b.freeze()
}
