//! The control frames, each a type that encodes itself and decodes from its
//! buffered payload (docs/PROTOCOL.md, section 15.1).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{put_header, Kind, MAX_CONTROL_PAYLOAD, MAX_REASON};
use crate::error::{CloseCode, Violation};

pub(super) fn malformed(kind: Kind, what: &'static str) -> Violation {
    Violation::Malformed {
        kind: kind.name(),
        what,
    }
}

fn exact(kind: Kind, payload: &Bytes, len: usize) -> Result<(), Violation> {
    if payload.len() == len {
        Ok(())
    } else {
        Err(malformed(kind, "wrong payload length"))
    }
}

/// RESET: aborts every direction of a stream still open, with a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reset {
    pub(crate) stream: u32,
    pub(crate) code: CloseCode,
}

impl Reset {
    pub(crate) fn encode(&self, dst: &mut BytesMut) {
        put_header(dst, Kind::Reset, 0, self.stream, 4);
        dst.put_u32(self.code.0);
    }

    fn decode(stream: u32, mut payload: Bytes) -> Result<Self, Violation> {
        exact(Kind::Reset, &payload, 4)?;
        Ok(Self {
            stream,
            code: CloseCode(payload.get_u32()),
        })
    }
}

/// CREDIT: flow-control increments, `(stream, increment)` each; stream 0
/// is the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credit {
    pub(crate) entries: Vec<(u32, u32)>,
}

impl Credit {
    /// Bytes per entry: stream id and increment.
    const ENTRY_LEN: usize = 8;

    /// Encodes `entries` in as few frames as the control payload limit
    /// allows; returns how many frames.
    pub(crate) fn encode_all(entries: &[(u32, u32)], dst: &mut BytesMut) -> u64 {
        let per_frame = MAX_CONTROL_PAYLOAD / Self::ENTRY_LEN;
        let mut frames = 0;
        for chunk in entries.chunks(per_frame) {
            put_header(dst, Kind::Credit, 0, 0, chunk.len() * Self::ENTRY_LEN);
            for &(stream, increment) in chunk {
                dst.put_u32(stream);
                dst.put_u32(increment);
            }
            frames += 1;
        }
        frames
    }

    fn decode(mut payload: Bytes) -> Result<Self, Violation> {
        if payload.is_empty() || !payload.len().is_multiple_of(Self::ENTRY_LEN) {
            return Err(malformed(
                Kind::Credit,
                "payload is not a list of (stream, increment)",
            ));
        }
        let mut entries = Vec::with_capacity(payload.len() / Self::ENTRY_LEN);
        while payload.has_remaining() {
            entries.push((payload.get_u32(), payload.get_u32()));
        }
        Ok(Self { entries })
    }
}

/// STREAM_CREDIT: the total number of streams the receiver may have opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamCredit {
    pub(crate) total: u32,
}

impl StreamCredit {
    pub(crate) fn encode(&self, dst: &mut BytesMut) {
        put_header(dst, Kind::StreamCredit, 0, 0, 4);
        dst.put_u32(self.total);
    }

    fn decode(mut payload: Bytes) -> Result<Self, Violation> {
        exact(Kind::StreamCredit, &payload, 4)?;
        Ok(Self {
            total: payload.get_u32(),
        })
    }
}

/// PING: an opaque value the peer answers with a PONG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ping(pub(crate) u64);

/// PONG: the opaque value of the ping it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pong(pub(crate) u64);

macro_rules! opaque_frame {
    ($name:ident, $kind:expr) => {
        impl $name {
            pub(crate) fn encode(&self, dst: &mut BytesMut) {
                put_header(dst, $kind, 0, 0, 8);
                dst.put_u64(self.0);
            }

            fn decode(mut payload: Bytes) -> Result<Self, Violation> {
                exact($kind, &payload, 8)?;
                Ok(Self(payload.get_u64()))
            }
        }
    };
}

opaque_frame!(Ping, Kind::Ping);
opaque_frame!(Pong, Kind::Pong);

/// GO_AWAY: the last stream id of the receiver's that the sender
/// processes, a code (0 for a graceful shutdown) and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GoAway {
    pub(crate) last: u32,
    pub(crate) code: CloseCode,
    pub(crate) reason: String,
}

impl GoAway {
    pub(crate) fn encode(&self, dst: &mut BytesMut) {
        debug_assert!(self.reason.len() <= MAX_REASON);
        put_header(dst, Kind::GoAway, 0, 0, 8 + self.reason.len());
        dst.put_u32(self.last);
        dst.put_u32(self.code.0);
        dst.put_slice(self.reason.as_bytes());
    }

    fn decode(mut payload: Bytes) -> Result<Self, Violation> {
        if payload.len() < 8 || payload.len() > 8 + MAX_REASON {
            return Err(malformed(Kind::GoAway, "wrong payload length"));
        }
        let last = payload.get_u32();
        let code = CloseCode(payload.get_u32());
        // The reason is for diagnostics only: decoded leniently.
        let reason = String::from_utf8_lossy(&payload).into_owned();
        Ok(Self { last, code, reason })
    }
}

/// Decodes a buffered control payload of `kind`.
pub(super) fn decode(kind: Kind, stream: u32, payload: Bytes) -> Result<super::Input, Violation> {
    use super::Input;
    Ok(match kind {
        Kind::Reset => Input::Reset(Reset::decode(stream, payload)?),
        Kind::Credit => Input::Credit(Credit::decode(payload)?),
        Kind::StreamCredit => Input::StreamCredit(StreamCredit::decode(payload)?),
        Kind::Ping => Input::Ping(Ping::decode(payload)?),
        Kind::Pong => Input::Pong(Pong::decode(payload)?),
        Kind::GoAway => Input::GoAway(GoAway::decode(payload)?),
        Kind::Open | Kind::Data | Kind::Fin => unreachable!("data frames are not buffered"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::frame::{Decoder, Input};

    fn round_trip(encoded: BytesMut) -> Input {
        let mut bytes = encoded.freeze();
        let input = Decoder::default().next(&mut bytes).unwrap().unwrap();
        assert!(bytes.is_empty());
        input
    }

    #[test]
    fn every_control_frame_decodes_to_what_it_encoded() {
        let mut dst = BytesMut::new();
        let reset = Reset {
            stream: 7,
            code: CloseCode::CANCEL,
        };
        reset.encode(&mut dst);
        assert_eq!(round_trip(dst.split()), Input::Reset(reset));
        StreamCredit { total: 9 }.encode(&mut dst);
        assert_eq!(
            round_trip(dst.split()),
            Input::StreamCredit(StreamCredit { total: 9 })
        );
        Ping(3).encode(&mut dst);
        assert_eq!(round_trip(dst.split()), Input::Ping(Ping(3)));
        Pong(4).encode(&mut dst);
        assert_eq!(round_trip(dst.split()), Input::Pong(Pong(4)));
        let go_away = GoAway {
            last: 5,
            code: CloseCode::NO_ERROR,
            reason: "bye".into(),
        };
        go_away.encode(&mut dst);
        assert_eq!(round_trip(dst.split()), Input::GoAway(go_away));
        assert_eq!(Credit::encode_all(&[(0, 10), (3, 20)], &mut dst), 1);
        assert_eq!(
            round_trip(dst.split()),
            Input::Credit(Credit {
                entries: vec![(0, 10), (3, 20)]
            })
        );
    }

    #[test]
    fn long_credit_lists_split_across_frames_within_the_payload_limit() {
        let entries: Vec<(u32, u32)> = (0..5000).map(|i| (i * 2 + 1, 1)).collect();
        let mut dst = BytesMut::new();
        assert_eq!(Credit::encode_all(&entries, &mut dst), 3);
        let mut bytes = dst.freeze();
        let mut decoder = Decoder::default();
        let mut back = Vec::new();
        while let Some(input) = decoder.next(&mut bytes).unwrap() {
            let Input::Credit(credit) = input else {
                panic!("{input:?}")
            };
            back.extend(credit.entries);
        }
        assert_eq!(back, entries);
    }
}
