//! The multiplexer core under an arbitrary sequence of operations, for
//! cargo-fuzz (`fuzz/fuzz_targets/mux_core.rs`): what the peer sends (raw
//! bytes, or frames with well-formed headers and any fields), what the
//! application does, and time passing. Nothing may panic, and what the
//! core buffers stays within its windows.
#![cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))] // public only to `weft::fuzzing`

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::{
    core::Multiplexer,
    frame::{raw_frame, Decoder},
    params::{Params, MAX_WINDOW},
};
use crate::{error::CloseCode, handshake::Role, record::Origin};

/// One step of a fuzzed run. (`stream` fields pick among the streams the
/// run has opened or accepted, modulo their number.)
#[allow(missing_docs)] // the variants say what they are; fuzzing only
#[derive(Debug, Clone)]
#[cfg_attr(feature = "fuzzing", derive(arbitrary::Arbitrary))]
pub enum MuxOp {
    /// Bytes from the peer, as one record's payload.
    Bytes(Vec<u8>),
    /// One frame from the peer: any kind, flags, stream and payload.
    Frame {
        kind: u8,
        flags: u8,
        stream: u32,
        payload: Vec<u8>,
    },
    /// A frame on one of the first stream ids, where streams live: a kind
    /// and flags of the few there are, any payload.
    NearFrame {
        kind: u8,
        flags: u8,
        stream: u8,
        payload: Vec<u8>,
    },
    Open,
    Accept,
    /// Writes `len` bytes on the `stream`-th stream the run knows.
    Write {
        stream: u8,
        len: u16,
    },
    Read {
        stream: u8,
        max: u16,
    },
    Finish {
        stream: u8,
    },
    Reset {
        stream: u8,
        code: u32,
    },
    DropSend {
        stream: u8,
    },
    DropRecv {
        stream: u8,
    },
    GoAway,
    Close,
    /// Takes what the core would send now.
    Transmit,
    /// Lets time pass, then runs the timers.
    Advance {
        millis: u16,
    },
    /// The transport ended.
    Eof,
}

/// Runs `ops` against a fresh core (a dialer's or an acceptor's). Panics
/// only if the core does, or if it buffers past its largest window or
/// queues past its connection send buffer.
pub fn run(dialer: bool, ops: impl IntoIterator<Item = MuxOp>) {
    let mut p = Params::small(if dialer { Role::Dialer } else { Role::Acceptor }, 8);
    // Small enough that a few writes (at most 64 KiB each) reach it.
    p.connection_send_buffer = 192 * 1024;
    let send_bound = p.connection_send_buffer as u64;
    let bound = p.max_connection_window.min(MAX_WINDOW);
    let mut now = Instant::now();
    let mut m = Multiplexer::new(p, now);
    let mut ids: Vec<u32> = Vec::new();
    let origin = Origin { buffer: 0, size: 0 };
    let pick = |ids: &[u32], i: u8| (!ids.is_empty()).then(|| ids[usize::from(i) % ids.len()]);
    for op in ops {
        match op {
            MuxOp::Bytes(bytes) => m.handle_input(Bytes::from(bytes), origin, now),
            MuxOp::Frame {
                kind,
                flags,
                stream,
                payload,
            } => m.handle_input(raw_frame(kind, flags, stream, &payload), origin, now),
            MuxOp::NearFrame {
                kind,
                flags,
                stream,
                payload,
            } => {
                let frame = raw_frame(kind % 12, flags % 4, u32::from(stream % 16), &payload);
                m.handle_input(frame, origin, now);
            }
            MuxOp::Open => {
                if let Ok(Some(id)) = m.open(now) {
                    ids.push(id);
                }
            }
            MuxOp::Accept => {
                while let Ok(Some(id)) = m.accept() {
                    ids.push(id);
                }
            }
            MuxOp::Write { stream, len } => {
                if let Some(id) = pick(&ids, stream) {
                    let _ = m.write(id, &mut Bytes::from(vec![0x5a; usize::from(len)]));
                }
            }
            MuxOp::Read { stream, max } => {
                if let Some(id) = pick(&ids, stream) {
                    let _ = m.read(id, usize::from(max).max(1));
                }
            }
            MuxOp::Finish { stream } => {
                if let Some(id) = pick(&ids, stream) {
                    let _ = m.finish(id);
                }
            }
            MuxOp::Reset { stream, code } => {
                if let Some(id) = pick(&ids, stream) {
                    m.reset(id, CloseCode(code));
                }
            }
            MuxOp::DropSend { stream } => {
                if let Some(id) = pick(&ids, stream) {
                    m.drop_send(id);
                }
            }
            MuxOp::DropRecv { stream } => {
                if let Some(id) = pick(&ids, stream) {
                    m.drop_recv(id);
                }
            }
            MuxOp::GoAway => m.go_away(now),
            MuxOp::Close => m.close(CloseCode::NO_ERROR, "fuzz"),
            MuxOp::Transmit => {
                let mut out = Vec::new();
                // Bounded: a core that always has output must not hang us.
                for _ in 0..64 {
                    if m.poll_transmit(now, &mut out, 1 << 20) == 0 {
                        break;
                    }
                }
                // What we send, our own decoder takes without complaint.
                let mut all = BytesMut::new();
                out.iter().for_each(|b| all.extend_from_slice(b));
                let mut wire = all.freeze();
                let mut decoder = Decoder::default();
                while let Some(_frame) = decoder.next(&mut wire).expect("we send valid frames") {}
            }
            MuxOp::Advance { millis } => {
                now += Duration::from_millis(u64::from(millis));
                m.handle_timeout(now);
            }
            MuxOp::Eof => m.handle_eof(),
        }
        while m.poll_event().is_some() {}
        let _ = m.poll_timeout();
        let _ = m.poll_close();
        assert!(
            m.buffered() <= bound,
            "buffered {} past the largest window {bound}",
            m.buffered()
        );
        assert!(
            m.queued() <= send_bound,
            "queued {} past the connection's send buffer {send_bound}",
            m.queued()
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::MuxOp;

    fn op() -> impl Strategy<Value = MuxOp> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..40);
        prop_oneof![
            bytes().prop_map(MuxOp::Bytes),
            (any::<u8>(), any::<u8>(), any::<u8>(), bytes()).prop_map(|(kind, flags, stream, payload)| {
                MuxOp::NearFrame {
                    kind,
                    flags,
                    stream,
                    payload,
                }
            }),
            (0u8..12, 0u8..4, 0u32..16, bytes()).prop_map(|(kind, flags, stream, payload)| MuxOp::Frame {
                kind,
                flags,
                stream,
                payload
            }),
            Just(MuxOp::Open),
            Just(MuxOp::Accept),
            (any::<u8>(), any::<u16>()).prop_map(|(stream, len)| MuxOp::Write { stream, len }),
            (any::<u8>(), any::<u16>()).prop_map(|(stream, max)| MuxOp::Read { stream, max }),
            any::<u8>().prop_map(|stream| MuxOp::Finish { stream }),
            (any::<u8>(), any::<u32>()).prop_map(|(stream, code)| MuxOp::Reset { stream, code }),
            any::<u8>().prop_map(|stream| MuxOp::DropSend { stream }),
            any::<u8>().prop_map(|stream| MuxOp::DropRecv { stream }),
            Just(MuxOp::GoAway),
            Just(MuxOp::Close),
            Just(MuxOp::Transmit),
            any::<u16>().prop_map(|millis| MuxOp::Advance { millis }),
            Just(MuxOp::Eof),
        ]
    }

    proptest! {
        // The fuzz target's harness, in `cargo test`.
        #[test]
        fn any_sequence_of_operations_keeps_the_core_whole(dialer in any::<bool>(), ops in proptest::collection::vec(op(), 0..40)) {
            super::run(dialer, ops);
        }
    }
}
