//! The close record's payload: a code and a reason (docs/PROTOCOL.md,
//! section 10).

use crate::{
    error::{CloseCode, Error, Repr},
    frame::FrameKind,
};

/// The longest reason text a close record carries.
pub(crate) const MAX_CLOSE_REASON: usize = 256;

/// The payload of a close record: the code, then the reason cut to
/// [`MAX_CLOSE_REASON`] bytes on a character boundary.
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

/// A whole close frame in the clear, for a handshake that fails before
/// there are keys: what `err` ended it with.
pub(crate) fn clear_close_frame(err: &Error) -> Vec<u8> {
    let payload = encode_close(err.close_code(), &err.reason_for_peer());
    let mut frame = FrameKind::Close.header(payload.len()).to_vec();
    frame.extend_from_slice(&payload);
    frame
}

/// The code and reason a close record carries; `None` for a clean close
/// (code 0, whose reason is ignored).
pub(crate) fn parse_close(payload: &[u8]) -> Result<Option<(CloseCode, String)>, Error> {
    if payload.len() < 4 || payload.len() > 4 + MAX_CLOSE_REASON {
        return Err(Repr::BadClose.into());
    }
    let code = CloseCode(u32::from_be_bytes(payload[..4].try_into().expect("4 bytes")));
    if code == CloseCode::NO_ERROR {
        return Ok(None);
    }
    // The reason is for diagnostics only: decoded leniently.
    Ok(Some((code, String::from_utf8_lossy(&payload[4..]).into_owned())))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn reasons_are_cut_on_a_character_boundary() {
        let long = "é".repeat(200);
        let payload = encode_close(CloseCode::PROTOCOL_ERROR, &long);
        assert!(payload.len() <= 4 + MAX_CLOSE_REASON);
        let (code, reason) = parse_close(&payload).unwrap().unwrap();
        assert_eq!(code, CloseCode::PROTOCOL_ERROR);
        assert!(long.starts_with(&reason));
        assert_eq!(
            parse_close(&encode_close(CloseCode::NO_ERROR, "bye")).unwrap(),
            None
        );
    }

    proptest! {
        #[test]
        fn any_close_payload_parses_or_is_refused(payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            match parse_close(&payload).as_ref().map_err(Error::repr) {
                Ok(None) => prop_assert!(payload.len() >= 4 && payload[..4] == [0; 4]),
                Ok(Some((code, _))) => prop_assert!(*code != CloseCode::NO_ERROR && payload.len() <= 260),
                Err(Repr::BadClose) => prop_assert!(payload.len() < 4 || payload.len() > 260),
                Err(other) => prop_assert!(false, "{other:?}"),
            }
        }
    }
}
