//! The RPC frame decoder and the envelope messages under arbitrary input,
//! for cargo-fuzz (`fuzz/fuzz_targets/rpc_decoder.rs`): bytes of a call's
//! stream, arriving in pieces of any size, split into frames whose
//! payloads decode as call headers, reply headers and statuses. Nothing may
//! panic or reserve more than arrived, and the same bytes decode to the
//! same frames however they are cut.
#![cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))] // public only to `weft::fuzzing`

use bytes::Bytes;
use prost::Message;

use super::wire::{Decoder, Limits, DEFAULT_MAX_ENVELOPE_SIZE};
use crate::proto;

const MAX_MESSAGE: usize = 4096;

/// Decodes `bytes`, fed in pieces of `step`; the frames, or where it
/// failed.
fn frames(bytes: &[u8], step: usize) -> Result<Vec<(u8, Bytes)>, ()> {
    let mut decoder = Decoder::new(Limits {
        message: MAX_MESSAGE,
        envelope: DEFAULT_MAX_ENVELOPE_SIZE,
        message_read_timeout: None,
    });
    let mut frames = Vec::new();
    for piece in bytes.chunks(step.max(1)) {
        decoder.push(Bytes::copy_from_slice(piece));
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    assert!(frame.payload.len() <= DEFAULT_MAX_ENVELOPE_SIZE.max(MAX_MESSAGE));
                    frames.push((frame.kind as u8, frame.payload));
                }
                Ok(None) => break,
                Err(_) => return Err(()),
            }
        }
    }
    Ok(frames)
}

/// One fuzz case: see the module's documentation.
pub fn run(data: &[u8]) {
    let Some((&step, bytes)) = data.split_first() else {
        return;
    };
    let whole = frames(bytes, bytes.len());
    let cut = frames(bytes, usize::from(step));
    assert_eq!(
        whole.is_ok(),
        cut.is_ok(),
        "the same verdict however the bytes are cut"
    );
    if let (Ok(whole), Ok(cut)) = (&whole, &cut) {
        assert_eq!(whole, cut, "the same frames however the bytes are cut");
    }
    for (_, payload) in whole.into_iter().flatten() {
        let _ = proto::CallHeader::decode(payload.clone());
        let _ = proto::ReplyHeader::decode(payload.clone());
        let _ = proto::Status::decode(payload);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        // The fuzz target's harness, in `cargo test`.
        #[test]
        fn the_same_bytes_cut_anyhow_decode_alike(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            super::run(&data);
        }
    }
}
