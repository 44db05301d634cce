#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use weft::fuzzing::MuxOp;

/// The operations, as `arbitrary` builds them.
#[derive(Arbitrary, Debug)]
enum Op {
    Bytes(Vec<u8>),
    Frame {
        kind: u8,
        flags: u8,
        stream: u32,
        payload: Vec<u8>,
    },
    /// A frame on one of the first few stream ids, where streams live.
    NearFrame {
        kind: u8,
        flags: u8,
        stream: u8,
        payload: Vec<u8>,
    },
    Open,
    Accept,
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
    Transmit,
    Advance {
        millis: u16,
    },
    Eof,
}

impl From<Op> for MuxOp {
    fn from(op: Op) -> Self {
        match op {
            Op::Bytes(bytes) => MuxOp::Bytes(bytes),
            Op::Frame {
                kind,
                flags,
                stream,
                payload,
            } => MuxOp::Frame {
                kind,
                flags,
                stream,
                payload,
            },
            Op::NearFrame {
                kind,
                flags,
                stream,
                payload,
            } => MuxOp::Frame {
                kind: kind % 12,
                flags: flags % 4,
                stream: u32::from(stream % 16),
                payload,
            },
            Op::Open => MuxOp::Open,
            Op::Accept => MuxOp::Accept,
            Op::Write { stream, len } => MuxOp::Write { stream, len },
            Op::Read { stream, max } => MuxOp::Read { stream, max },
            Op::Finish { stream } => MuxOp::Finish { stream },
            Op::Reset { stream, code } => MuxOp::Reset { stream, code },
            Op::DropSend { stream } => MuxOp::DropSend { stream },
            Op::DropRecv { stream } => MuxOp::DropRecv { stream },
            Op::GoAway => MuxOp::GoAway,
            Op::Close => MuxOp::Close,
            Op::Transmit => MuxOp::Transmit,
            Op::Advance { millis } => MuxOp::Advance { millis },
            Op::Eof => MuxOp::Eof,
        }
    }
}

fuzz_target!(|input: (bool, Vec<Op>)| {
    let (dialer, ops) = input;
    weft::fuzzing::mux_core(dialer, ops.into_iter().map(MuxOp::from));
});
