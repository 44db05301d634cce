//! The close record's payload: a code and a reason (docs/PROTOCOL.md,
//! section 10).

use crate::error::{CloseCode, Error};

/// The longest reason text a close record carries.
pub const MAX_CLOSE_REASON: usize = 256;

pub(crate) fn encode_close(code: CloseCode, reason: &str) -> Vec<u8> {
    let mut reason = &reason.as_bytes()[..reason.len().min(MAX_CLOSE_REASON)];
    while std::str::from_utf8(reason).is_err() {
        reason = &reason[..reason.len() - 1];
    }
    let mut payload = Vec::with_capacity(4 + reason.len());
    payload.extend_from_slice(&code.0.to_be_bytes());
    payload.extend_from_slice(reason);
    payload
}

/// The error a close record received during the handshake stands for.
pub(crate) fn handshake_close(payload: &[u8]) -> Error {
    match parse_close(payload) {
        Ok(Some(err)) | Err(err) => err,
        Ok(None) => Error::PeerClosed {
            code: CloseCode::NO_ERROR,
            reason: "closed during the handshake".into(),
        },
    }
}

/// The error (or clean end) a close record stands for.
pub(crate) fn parse_close(payload: &[u8]) -> Result<Option<Error>, Error> {
    if payload.len() < 4 || payload.len() > 4 + MAX_CLOSE_REASON {
        return Err(Error::BadClose);
    }
    let code = CloseCode(u32::from_be_bytes(payload[..4].try_into().expect("4 bytes")));
    if code == CloseCode::NO_ERROR {
        return Ok(None);
    }
    Ok(Some(Error::PeerClosed {
        code,
        reason: String::from_utf8_lossy(&payload[4..]).into_owned(),
    }))
}
