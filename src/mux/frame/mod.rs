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

/// Whether `payload` (a dialer's early data) is what early data may be:
/// the frames of stream 1 alone, starting with its OPEN (then DATA, and a
/// FIN flag or frame), whole (docs/PROTOCOL.md, section 17.2). Anything
/// else would act on the connection beyond the stream the acceptor
/// marks early.
pub(crate) fn is_early_stream(mut payload: &[u8]) -> bool {
    let mut first = true;
    while !payload.is_empty() {
        let Some(header) = payload.get(..HEADER_LEN) else {
            return false;
        };
        let (kind, flags) = (header[0], header[1]);
        let stream = u32::from_be_bytes([header[2], header[3], header[4], header[5]]);
        let len = u32::from_be_bytes([header[6], header[7], header[8], header[9]]) as usize;
        let allowed = if first {
            kind == Kind::Open as u8
        } else {
            kind == Kind::Data as u8 || kind == Kind::Fin as u8
        };
        if !allowed || stream != 1 || flags & !FLAG_FIN != 0 {
            return false;
        }
        let Some(rest) = payload.get(HEADER_LEN..).and_then(|rest| rest.get(len..)) else {
            return false;
        };
        payload = rest;
        first = false;
    }
    !first
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

#[cfg(test)]
mod early_tests {
    use super::*;

    fn frames(list: &[(Kind, u8, u32, &[u8])]) -> Vec<u8> {
        list.iter()
            .flat_map(|(kind, flags, stream, payload)| raw_frame(*kind as u8, *flags, *stream, payload))
            .collect()
    }

    #[test]
    fn early_data_may_only_open_stream_1() {
        assert!(is_early_stream(&frames(&[(Kind::Open, FLAG_FIN, 1, b"req")])));
        assert!(is_early_stream(&frames(&[
            (Kind::Open, 0, 1, b"re"),
            (Kind::Data, 0, 1, b"q"),
            (Kind::Fin, 0, 1, b"")
        ])));
        for bad in [
            frames(&[]),
            frames(&[(Kind::Data, 0, 1, b"no open")]),
            frames(&[(Kind::Open, 0, 3, b"another stream")]),
            // A second request on stream 3 would not be marked early.
            frames(&[(Kind::Open, FLAG_FIN, 1, b"a"), (Kind::Open, FLAG_FIN, 3, b"b")]),
            frames(&[(Kind::Open, 0, 1, b"a"), (Kind::Ping, 0, 0, &[0; 8])]),
            frames(&[(Kind::Open, 0x80, 1, b"unknown flag")]),
        ] {
            assert!(!is_early_stream(&bad), "{bad:?}");
        }
        let mut cut = frames(&[(Kind::Open, 0, 1, b"whole")]);
        cut.pop();
        assert!(!is_early_stream(&cut), "a frame cut short");
    }
}
