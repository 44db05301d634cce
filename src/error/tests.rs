//! Errors' texts, codes and trips through `io::Error`.

use super::*;

#[test]
fn weft_errors_survive_a_trip_through_io_error() {
    let err = Error::closed_by_peer(CloseCode::UNAUTHORIZED, "no".into());
    let io: io::Error = err.into();
    assert_eq!(io.kind(), io::ErrorKind::ConnectionAborted);
    let back = Error::from(io);
    assert!(back.is_peer_close(CloseCode::UNAUTHORIZED));
}

#[test]
fn a_reason_the_peer_chose_is_escaped_so_it_cannot_forge_log_lines() {
    let reason = "bye\n2026-12-04T00:00:00Z  INFO weft: admin logged in\u{1b}[2J".to_owned();
    let closed = Error::closed_by_peer(CloseCode::PROTOCOL_ERROR, reason.clone());
    let unauthenticated = Error::UnauthenticatedClose {
        code: CloseCode::PROTOCOL_ERROR,
        reason,
    };
    for err in [closed, unauthenticated] {
        let text = err.to_string();
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("bye\\n2026"), "{text:?}");
    }
}

#[test]
fn an_unexpected_frame_reads_as_english() {
    let err = Error::UnexpectedFrame {
        expected: "an identity proof",
        got: FrameKind::Data,
    };
    assert_eq!(
        err.to_string(),
        "peer sent an unexpected Data frame where an identity proof was expected"
    );
}

#[test]
fn close_codes_describe_themselves() {
    assert_eq!(format!("{:?}", CloseCode::UNAUTHORIZED), "UNAUTHORIZED");
    assert_eq!(format!("{:?}", CloseCode(0x77)), "CloseCode(0x77)");
    assert!(CloseCode::PROTOCOL_ERROR.description().is_some());
    assert!(CloseCode(0x77).description().is_none());
}
