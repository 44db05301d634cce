//! The streaming decoder: bytes in, [`Input`]s out.

use bytes::{Buf, Bytes, BytesMut};

use super::{
    control::{self, malformed},
    Credit, GoAway, Kind, Ping, Pong, Reset, StreamCredit, FLAG_FIN, HEADER_LEN, MAX_CONTROL_PAYLOAD,
};
use crate::error::Violation;

/// A decoded input, in wire order. Data-bearing frames come as `Open`
/// (header), `Data` pieces, then `Fin` if flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Open { stream: u32 },
    Data { stream: u32, data: Bytes },
    Fin { stream: u32 },
    Reset(Reset),
    Credit(Credit),
    StreamCredit(StreamCredit),
    Ping(Ping),
    Pong(Pong),
    GoAway(GoAway),
}

#[derive(Debug)]
enum State {
    Header,
    /// Handing on data payload pieces.
    Payload {
        stream: u32,
        left: usize,
        fin: bool,
    },
    /// Buffering a control payload.
    Control {
        kind: Kind,
        stream: u32,
        len: usize,
    },
}

/// Streaming decoder: bytes in, [`Input`]s out, never panicking and never
/// buffering more than a header or a bounded control payload.
#[derive(Debug)]
pub(crate) struct Decoder {
    state: State,
    partial: BytesMut,
    /// Frame headers decoded so far: every frame, data frames included.
    frames: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            state: State::Header,
            partial: BytesMut::new(),
            frames: 0,
        }
    }
}

impl Decoder {
    /// Frames decoded so far (their headers, at least).
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// The next input decodable from `src` (consuming from it), or `None`
    /// when `src` is used up.
    pub(crate) fn next(&mut self, src: &mut Bytes) -> Result<Option<Input>, Violation> {
        loop {
            match self.state {
                State::Header => {
                    let header = if self.partial.is_empty() && src.len() >= HEADER_LEN {
                        src.split_to(HEADER_LEN)
                    } else {
                        let need = HEADER_LEN - self.partial.len();
                        let take = need.min(src.len());
                        self.partial.extend_from_slice(&src[..take]);
                        src.advance(take);
                        if self.partial.len() < HEADER_LEN {
                            return Ok(None);
                        }
                        self.partial.split().freeze()
                    };
                    if let Some(input) = self.start_frame(&header)? {
                        return Ok(Some(input));
                    }
                }
                State::Payload { stream, left, fin } => {
                    if left == 0 {
                        self.state = State::Header;
                        if fin {
                            return Ok(Some(Input::Fin { stream }));
                        }
                        continue;
                    }
                    if src.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(src.len());
                    let data = src.split_to(take);
                    self.state = State::Payload {
                        stream,
                        left: left - take,
                        fin,
                    };
                    return Ok(Some(Input::Data { stream, data }));
                }
                State::Control { kind, stream, len } => {
                    let payload = if self.partial.is_empty() && src.len() >= len {
                        src.split_to(len)
                    } else {
                        let take = (len - self.partial.len()).min(src.len());
                        self.partial.extend_from_slice(&src[..take]);
                        src.advance(take);
                        if self.partial.len() < len {
                            return Ok(None);
                        }
                        self.partial.split().freeze()
                    };
                    self.state = State::Header;
                    return control::decode(kind, stream, payload).map(Some);
                }
            }
        }
    }

    fn start_frame(&mut self, mut header: &[u8]) -> Result<Option<Input>, Violation> {
        self.frames += 1;
        let raw_kind = header.get_u8();
        let kind = Kind::from_u8(raw_kind).ok_or(Violation::UnknownFrame(raw_kind))?;
        let flags = header.get_u8();
        let stream = header.get_u32();
        let len = header.get_u32() as usize;
        let allowed_flags = if matches!(kind, Kind::Open | Kind::Data) {
            FLAG_FIN
        } else {
            0
        };
        if flags & !allowed_flags != 0 {
            return Err(malformed(kind, "unknown flags"));
        }
        if kind.is_connection_level() != (stream == 0) {
            return Err(malformed(
                kind,
                if stream == 0 {
                    "stream id 0"
                } else {
                    "stream id on a connection-level frame"
                },
            ));
        }
        let fin = flags & FLAG_FIN != 0;
        match kind {
            Kind::Open => {
                self.state = State::Payload {
                    stream,
                    left: len,
                    fin,
                };
                Ok(Some(Input::Open { stream }))
            }
            Kind::Data => {
                if len == 0 && !fin {
                    return Err(malformed(kind, "empty without FIN"));
                }
                self.state = State::Payload {
                    stream,
                    left: len,
                    fin,
                };
                Ok(None)
            }
            Kind::Fin => {
                if len != 0 {
                    return Err(malformed(kind, "payload on a FIN"));
                }
                Ok(Some(Input::Fin { stream }))
            }
            _ => {
                if len > MAX_CONTROL_PAYLOAD {
                    return Err(Violation::FrameTooLarge {
                        kind: kind.name(),
                        len,
                        max: MAX_CONTROL_PAYLOAD,
                    });
                }
                self.state = State::Control { kind, stream, len };
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::mux::frame::{put_header, raw_frame as frame};

    fn decode_all(mut src: Bytes) -> Result<Vec<Input>, Violation> {
        let mut d = Decoder::default();
        let mut out = vec![];
        while let Some(input) = d.next(&mut src)? {
            out.push(input);
        }
        Ok(out)
    }

    #[test]
    fn open_with_data_and_fin_is_three_inputs() {
        let got = decode_all(frame(1, FLAG_FIN, 1, b"hi")).unwrap();
        assert_eq!(
            got,
            vec![
                Input::Open { stream: 1 },
                Input::Data {
                    stream: 1,
                    data: Bytes::from_static(b"hi")
                },
                Input::Fin { stream: 1 }
            ]
        );
    }

    #[test]
    fn data_split_anywhere_arrives_whole() {
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&frame(2, 0, 3, b"hello world"));
        wire.extend_from_slice(&frame(7, 0, 0, &9u64.to_be_bytes()));
        let wire = wire.freeze();
        for cut in 0..wire.len() {
            let mut d = Decoder::default();
            let mut data = Vec::new();
            let mut pings = vec![];
            for mut part in [wire.slice(..cut), wire.slice(cut..)] {
                while let Some(input) = d.next(&mut part).unwrap() {
                    match input {
                        Input::Data { data: d, .. } => data.extend_from_slice(&d),
                        Input::Ping(Ping(p)) => pings.push(p),
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            assert_eq!(data, b"hello world", "cut at {cut}");
            assert_eq!(pings, vec![9]);
        }
    }

    #[test]
    fn illegal_frames_are_typed_violations() {
        assert_eq!(
            decode_all(frame(0x42, 0, 1, b"")),
            Err(Violation::UnknownFrame(0x42))
        );
        assert!(matches!(
            decode_all(frame(2, 0, 1, b"")),
            Err(Violation::Malformed {
                what: "empty without FIN",
                ..
            })
        ));
        assert!(matches!(
            decode_all(frame(2, 0, 0, b"x")),
            Err(Violation::Malformed {
                what: "stream id 0",
                ..
            })
        ));
        assert!(matches!(
            decode_all(frame(7, 0, 5, &[0; 8])),
            Err(Violation::Malformed { .. })
        ));
        assert!(matches!(
            decode_all(frame(5, 0, 0, &[0; 7])),
            Err(Violation::Malformed { .. })
        ));
        assert!(matches!(
            decode_all(frame(4, 2, 1, &[0; 4])),
            Err(Violation::Malformed {
                what: "unknown flags",
                ..
            })
        ));
        // A huge control frame is refused at its header, before buffering.
        let mut header = BytesMut::new();
        put_header(&mut header, Kind::GoAway, 0, 0, 1 << 30);
        assert!(matches!(
            decode_all(header.freeze()),
            Err(Violation::FrameTooLarge { .. })
        ));
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..256), cut in 0usize..256) {
            let bytes = Bytes::from(bytes);
            let cut = cut.min(bytes.len());
            let mut d = Decoder::default();
            for mut part in [bytes.slice(..cut), bytes.slice(cut..)] {
                loop {
                    match d.next(&mut part) {
                        Ok(Some(_)) => continue,
                        Ok(None) => break,
                        Err(_) => return Ok(()),
                    }
                }
            }
        }
    }
}
