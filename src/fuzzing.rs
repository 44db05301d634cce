//! Entry points for the fuzz targets in `fuzz/` (cargo-fuzz), behind the
//! `fuzzing` feature: not part of weft's API, and not stable. Each takes
//! arbitrary input and panics only on a defect: a panic inside weft, an
//! invariant broken (a damaged record opened, memory past a window), or a
//! decoder that answers differently for the same bytes cut differently.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

pub use crate::mux::fuzz::{run as mux_core, MuxOp};
pub use crate::record::fuzz::run as record_opener;
pub use crate::rpc::fuzz::run as rpc_decoder;
use crate::{
    frame::{Frame, FrameCodec, FrameKind, HEADER_LEN},
    handshake::{CipherSuite, Role},
    proto::Setup,
    setup::SetupSent,
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
/// role's own Setup. It agrees or fails with an error; it never panics.
pub fn setup(data: &[u8]) {
    for role in [Role::Dialer, Role::Acceptor] {
        let ours = Setup {
            min_version: 1,
            max_version: 1,
            ephemeral_key: vec![3; 32],
            suites: [CipherSuite::Aes256Gcm, CipherSuite::XSalsa20Poly1305]
                .iter()
                .map(|suite| suite.id())
                .collect(),
            max_streams: 100,
            ..Setup::default()
        };
        let Ok(sent) = SetupSent::new(role, ours, 64 * 1024) else {
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
        let _ = sent.receive(frame);
    }
}

/// One direction's record key, for the cipher benchmark
/// (`benches/records.rs`): seals and opens records as a channel does.
#[derive(Debug)]
pub struct RecordKey(crate::record::RecordKey);

impl RecordKey {
    /// A key for `suite` from `key` and the nonce base `iv`.
    pub fn new(suite: CipherSuite, key: &[u8; 32], iv: [u8; 24]) -> Self {
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
