use std::{io, sync::Arc};

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Bytes in a frame header: one kind byte and a 24-bit payload length.
pub(crate) const HEADER_LEN: usize = 4;

/// The largest payload a 24-bit length can declare.
pub(super) const MAX_FRAME_PAYLOAD: usize = (1 << 24) - 1;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameKind {
    /// The Setup message (always in the clear).
    Setup = 0x01,
    /// The identity proof, the first record each side sends after Setup.
    Auth = 0x02,
    /// Application bytes.
    Data = 0x03,
    /// The close record: a code and a reason.
    Close = 0x04,
    /// Key update (version 2): the sender's next records use its next key.
    KeyUpdate = 0x05,
}

impl FrameKind {
    /// Parses a kind byte.
    pub(crate) fn from_u8(byte: u8) -> Result<Self, FrameError> {
        Ok(match byte {
            0x01 => FrameKind::Setup,
            0x02 => FrameKind::Auth,
            0x03 => FrameKind::Data,
            0x04 => FrameKind::Close,
            0x05 => FrameKind::KeyUpdate,
            other => return Err(FrameError::UnknownKind(other)),
        })
    }

    /// The header for a payload of `len` bytes (`len` must fit 24 bits).
    pub(crate) fn header(self, len: usize) -> [u8; HEADER_LEN] {
        debug_assert!(len <= MAX_FRAME_PAYLOAD);
        let len = (len as u32).to_be_bytes();
        [self as u8, len[1], len[2], len[3]]
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    /// What the frame carries.
    pub kind: FrameKind,
    /// The 4 header bytes as they arrived (sealed records authenticate them).
    pub header: [u8; HEADER_LEN],
    /// The payload, exactly as long as the header declared.
    pub payload: BytesMut,
}

/// Encodes and decodes [`Frame`]s, refusing payloads above a maximum.
#[derive(Debug, Clone)]
pub(crate) struct FrameCodec {
    max_payload: usize,
}

impl FrameCodec {
    /// A codec accepting payloads of at most `max_payload` bytes.
    pub(crate) fn new(max_payload: usize) -> Self {
        Self {
            max_payload: max_payload.min(MAX_FRAME_PAYLOAD),
        }
    }

    /// Changes the largest payload accepted (after the handshake, say).
    pub(crate) fn set_max_payload(&mut self, max_payload: usize) {
        self.max_payload = max_payload.min(MAX_FRAME_PAYLOAD);
    }

    /// Parses a header: the kind and declared length, checked against the
    /// maximum.
    pub(crate) fn parse_header(&self, header: [u8; HEADER_LEN]) -> Result<(FrameKind, usize), FrameError> {
        let kind = FrameKind::from_u8(header[0])?;
        let len = u32::from_be_bytes([0, header[1], header[2], header[3]]) as usize;
        if len > self.max_payload {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_payload,
            });
        }
        Ok((kind, len))
    }
}

/// What [`FrameCodec::split_frame`] found at the start of a buffer.
#[derive(Debug)]
pub(crate) enum Split {
    /// A whole frame, split off the buffer.
    Frame(Frame),
    /// Part of one: the bytes it still needs, and whether its header (with
    /// the length it declares, checked) is among those already there.
    Missing { bytes: usize, header_read: bool },
}

impl FrameCodec {
    /// The frame at the start of `src`, split off it, or how much of it is
    /// missing. Unlike [`Decoder::decode`], it reserves nothing: a caller
    /// that manages its own buffers makes the room.
    pub(crate) fn split_frame(&mut self, src: &mut BytesMut) -> Result<Split, FrameError> {
        let Some(header) = src.get(..HEADER_LEN) else {
            return Ok(Split::Missing {
                bytes: HEADER_LEN - src.len(),
                header_read: false,
            });
        };
        let header: [u8; HEADER_LEN] = header.try_into().expect("slice of HEADER_LEN");
        // The length is checked here, before anyone reserves for it.
        let (kind, len) = self.parse_header(header)?;
        let total = HEADER_LEN + len;
        if src.len() < total {
            return Ok(Split::Missing {
                bytes: total - src.len(),
                header_read: true,
            });
        }
        let mut payload = src.split_to(total);
        payload.advance(HEADER_LEN);
        Ok(Split::Frame(Frame {
            kind,
            header,
            payload,
        }))
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.split_frame(src)? {
            Split::Frame(frame) => Ok(Some(frame)),
            Split::Missing { bytes, header_read } => {
                if header_read {
                    // The length was checked: only what it declares.
                    src.reserve(bytes);
                }
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Incomplete(src.len())),
        }
    }
}

impl Encoder<(FrameKind, &[u8])> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, (kind, payload): (FrameKind, &[u8]), dst: &mut BytesMut) -> Result<(), FrameError> {
        if payload.len() > self.max_payload {
            return Err(FrameError::TooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        dst.reserve(HEADER_LEN + payload.len());
        dst.put_slice(&kind.header(payload.len()));
        dst.put_slice(payload);
        Ok(())
    }
}

/// Errors in the frame layer: the bytes are not a well-formed frame.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum FrameError {
    /// The header declares a payload longer than the receiver accepts.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The declared payload length.
        len: usize,
        /// The largest payload the receiver accepts now.
        max: usize,
    },
    /// The header names a frame kind this version does not know.
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    /// The transport ended in the middle of a frame.
    #[error("transport ended inside a frame ({0} bytes of it arrived)")]
    Incomplete(usize),
    /// The transport failed while a frame was read or written (what a
    /// tokio-util codec's error must be able to carry).
    #[error("transport I/O failed: {0}")]
    Io(Arc<io::Error>),
}

impl From<io::Error> for FrameError {
    fn from(err: io::Error) -> Self {
        FrameError::Io(Arc::new(err))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_frame_round_trips_and_a_16_mib_header_is_refused_on_sight() {
        use crate::frame::{Frame, FrameCodec, FrameKind};
        use bytes::BytesMut;
        use tokio_util::codec::{Decoder, Encoder};

        let mut codec = FrameCodec::new(1024);
        let mut wire = BytesMut::new();
        codec.encode((FrameKind::Data, &b"hello"[..]), &mut wire).unwrap();
        let frame: Frame = codec.decode(&mut wire).unwrap().unwrap();
        assert_eq!(frame.kind, FrameKind::Data);
        assert_eq!(&frame.payload[..], b"hello");

        // A header declaring 4 GiB... well, 16 MiB, the most 24 bits can say,
        // is refused on sight.
        let mut hostile = BytesMut::from(&[0x03, 0xff, 0xff, 0xff][..]);
        assert!(codec.decode(&mut hostile).is_err());
    }
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_declaring_the_largest_length_is_refused_without_reserving() {
        let mut codec = FrameCodec::new(64 * 1024);
        let mut src = BytesMut::with_capacity(16);
        src.put_slice(&[0x03, 0xff, 0xff, 0xff]);
        let before = src.capacity();
        let err = codec.decode(&mut src).unwrap_err();
        assert!(matches!(
            err,
            FrameError::TooLarge {
                len: MAX_FRAME_PAYLOAD,
                max: 65536
            }
        ));
        assert_eq!(src.capacity(), before, "nothing was reserved");
    }

    #[test]
    fn partial_frames_wait_and_reserve_only_what_is_declared() {
        let mut codec = FrameCodec::new(1000);
        let mut src = BytesMut::new();
        src.put_slice(&FrameKind::Data.header(900));
        src.put_slice(&[7; 10]);
        assert!(codec.decode(&mut src).unwrap().is_none());
        assert!(src.capacity() >= HEADER_LEN + 900);
        assert!(src.capacity() < 4096);
        src.put_slice(&[7; 890]);
        let frame = codec.decode(&mut src).unwrap().unwrap();
        assert_eq!(frame.payload.len(), 900);
        assert!(src.is_empty());
    }

    #[test]
    fn unknown_kind_and_truncation_are_errors() {
        let mut codec = FrameCodec::new(1000);
        let mut src = BytesMut::from(&[0x09, 0, 0, 1, 0][..]);
        assert!(matches!(codec.decode(&mut src), Err(FrameError::UnknownKind(9))));
        let mut src = BytesMut::from(&[0x03, 0, 0, 5, 1, 2][..]);
        assert!(matches!(
            codec.decode_eof(&mut src),
            Err(FrameError::Incomplete(6))
        ));
    }

    #[test]
    fn encoder_refuses_oversized_payloads() {
        let mut codec = FrameCodec::new(4);
        let mut dst = BytesMut::new();
        assert!(codec.encode((FrameKind::Data, &[0u8; 5][..]), &mut dst).is_err());
        assert!(dst.is_empty());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), max in 0usize..4096) {
            let mut codec = FrameCodec::new(max);
            let mut src = BytesMut::from(&bytes[..]);
            while let Ok(Some(frame)) = codec.decode_eof(&mut src) {
                prop_assert!(frame.payload.len() <= max);
            }
        }

        #[test]
        fn frames_round_trip(kind in 1u8..=4, payload in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut codec = FrameCodec::new(600);
            let kind = FrameKind::from_u8(kind).unwrap();
            let mut wire = BytesMut::new();
            codec.encode((kind, &payload[..]), &mut wire).unwrap();
            let frame = codec.decode(&mut wire).unwrap().unwrap();
            prop_assert_eq!(frame.kind, kind);
            prop_assert_eq!(&frame.payload[..], &payload[..]);
            prop_assert!(wire.is_empty());
        }
    }
}
