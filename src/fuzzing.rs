//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz), behind the
//! `fuzzing` feature: not part of weft's API, and not stable. Each takes
//! arbitrary input and panics only on a defect: a panic inside weft, an
//! invariant broken (a damaged record opened, memory past a window), or a
//! decoder that answers differently for the same bytes cut differently.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

pub use crate::handshake::bench::{Dialer as EarlyDialer, EarlyBench, Verdict as EarlyVerdict};
pub use crate::mux::fuzz::{run as mux_core, MuxOp};
pub use crate::record::fuzz::run as record_opener;
pub use crate::rpc::fuzz::run as rpc_decoder;
use crate::{
    frame::{Frame, FrameCodec, FrameKind, HEADER_LEN},
    handshake::{Clock, SetupSent, Start},
    terms::{Role, Versions},
};

/// The record framing codec: frames out of arbitrary bytes, with a small
/// limit, fed all at once and then a byte at a time; the two agree.
pub fn frame_codec(data: &[u8]) {
    let decode = |pieces: &mut dyn Iterator<Item = &[u8]>| {
        let mut codec = FrameCodec::new(1024);
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for piece in pieces {
            buf.extend_from_slice(piece);
            loop {
                match codec.decode(&mut buf) {
                    Ok(Some(frame)) => {
                        assert!(frame.payload.len() <= 1024);
                        frames.push(frame);
                    }
                    Ok(None) => break,
                    Err(_) => return Err(()),
                }
            }
        }
        Ok(frames)
    };
    let whole = decode(&mut std::iter::once(data));
    let bytewise = decode(&mut data.chunks(1));
    assert_eq!(whole, bytewise, "the same frames however the bytes are cut");
}

/// A peer's Setup message: arbitrary bytes as its payload, against each
/// role's own Setup (an encrypting one, of version 1 to 3), and the step
/// after it: it agrees (and proves) or fails with an error; it never
/// panics.
pub fn setup(data: &[u8]) {
    let encryption = std::sync::Arc::new(crate::EncryptLayer::new(crate::Identity::from_seed(&[3; 32])));
    for role in [Role::Dialer, Role::Acceptor] {
        let config = encryption.config();
        let start = Start {
            role,
            versions: Versions::CURRENT,
            protocols: &[],
            max_setup_size: 64 * 1024,
            encryption: Some(config),
            records: None,
            streams: None,
            pin: None,
            protocol: None,
            early_data: None,
        };
        let Ok(sent) = SetupSent::new(start, Clock::read()) else {
            return;
        };
        let Ok(len) = u32::try_from(data.len()) else {
            return;
        };
        let frame = Frame {
            kind: FrameKind::Setup,
            header: FrameKind::Setup.header(len as usize),
            payload: BytesMut::from(data),
        };
        debug_assert_eq!(frame.header.len(), HEADER_LEN);
        if let Ok(agreed) = sent.receive(frame) {
            let _ = agreed.proceed(Clock::read());
        }
    }
}

/// One direction's record key, for the cipher benchmark
/// (`weft-bench/benches/records.rs`): seals and opens records as a channel does.
#[derive(Debug)]
pub struct RecordKey(crate::record::RecordKey);

impl RecordKey {
    /// A key for `suite` from `key` and the nonce base `iv`.
    pub fn new(suite: crate::handshake::CipherSuite, key: &[u8; 32], iv: [u8; 24]) -> Self {
        Self(crate::record::RecordKey::new(suite, key, iv))
    }

    /// Encrypts `in_out` in place under `header`; returns the tag.
    pub fn seal(&mut self, header: &[u8], in_out: &mut [u8]) -> Result<[u8; 16], crate::Error> {
        self.0.seal(header, in_out)
    }

    /// Decrypts `in_out` (ciphertext then tag) in place.
    pub fn open<'a>(&mut self, header: &[u8], in_out: &'a mut [u8]) -> Result<&'a mut [u8], crate::Error> {
        self.0.open(header, in_out)
    }
}
