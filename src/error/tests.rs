//! Errors' texts, codes and trips through `io::Error`.

use super::*;
use crate::frame::{FrameError, FrameKind};

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
    let unauthenticated = Error::from(Repr::UnauthenticatedClose {
        code: CloseCode::PROTOCOL_ERROR,
        reason,
    });
    for err in [closed, unauthenticated] {
        let text = err.to_string();
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text:?}");
        assert!(text.contains("bye\\n2026"), "{text:?}");
    }
}

#[test]
fn an_unexpected_frame_reads_as_english() {
    let err = Error::from(Repr::UnexpectedFrame {
        expected: "an identity proof",
        got: FrameKind::Data,
    });
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

#[test]
fn io_error_kinds_keep_timeouts_refusals_and_endings_apart() {
    use io::ErrorKind::*;
    use std::time::Duration;
    let kind = |repr: Repr| io::Error::from(Error::from(repr)).kind();
    assert_eq!(kind(Repr::IdleTimeout(Duration::from_secs(1))), TimedOut);
    assert_eq!(kind(Repr::OpenTimeout(Duration::from_secs(1))), TimedOut);
    assert!(Error::from(Repr::IdleTimeout(Duration::from_secs(1))).is_timeout());
    assert_eq!(
        kind(Repr::Refused),
        ConnectionReset,
        "a refused stream, not a refused connection"
    );
    assert_eq!(kind(Repr::Truncated), UnexpectedEof);
    // (A connection that was refused is one: tests/connection.rs.)
}

/// One error of each variant, in the table's order.
fn one_of_each() -> Vec<Error> {
    use crate::{
        proto::Setup,
        terms::{CipherSuite, PeerId, Versions},
    };
    use prost::Message;
    use std::{sync::Arc, time::Duration};

    let peer: PeerId = "01".repeat(32).parse().unwrap();
    let seen: PeerId = "02".repeat(32).parse().unwrap();
    vec![
        Repr::Io(Arc::new(io::ErrorKind::TimedOut.into())),
        Repr::Connect(Arc::new(io::Error::from(io::ErrorKind::ConnectionRefused))),
        Repr::Frame(FrameError::UnknownKind(b'G')),
        Repr::SetupDecode(Setup::decode(&[0xff][..]).unwrap_err()),
        Repr::InvalidSetup("max_record_size below 512"),
        Repr::VersionMismatch {
            local: Versions::CURRENT,
            peer: Versions::new(7, 9),
        },
        Repr::NoCommonSuite {
            local: vec![CipherSuite::Aes256Gcm],
            peer: vec![99],
        },
        Repr::NoCommonProtocol {
            local: vec!["h2".into()],
            peer: vec!["smtp".into()],
        },
        Repr::UnexpectedProtocol {
            wanted: "rpc".into(),
            agreed: Some("h2".into()),
        },
        Repr::HandshakeTimeout(Duration::from_secs(10)),
        Repr::UnexpectedFrame {
            expected: "an identity proof",
            got: FrameKind::Data,
        },
        Repr::WeakKey,
        Repr::BadIdentityProof { peer },
        Repr::PeerKeyMismatch { expected: peer, seen },
        Repr::Unauthorized(peer),
        Repr::BadRecord { sequence: 0 },
        Repr::EmptyRecord,
        Repr::BadClose,
        Repr::Truncated,
        Repr::Closed {
            side: Side::Remote,
            code: CloseCode::UNAUTHORIZED,
            reason: "no".into(),
        },
        Repr::UnauthenticatedClose {
            code: CloseCode::VERSION_MISMATCH,
            reason: "too old".into(),
        },
        Repr::KeyExhausted(1 << 40),
        Repr::RecordTimeout(Duration::from_secs(5)),
        Repr::KeyUpdateFlood(32),
        Repr::Stack("a pinned peer key with no encryption layer"),
        Repr::Protocol(Violation::PingFlood(16)),
        Repr::StreamReset {
            code: CloseCode::CANCEL,
            side: Side::Local,
        },
        Repr::Finished,
        Repr::Refused,
        Repr::GoingAway { side: Side::Remote },
        Repr::OpenTimeout(Duration::from_secs(1)),
        Repr::IdleTimeout(Duration::from_secs(30)),
        Repr::NotAdmitted(Refusal::Busy { pending: 64 }),
        Repr::DriverStopped,
    ]
    .into_iter()
    .map(Error::from)
    .collect()
}

/// The kind, side, close code, close record and io::ErrorKind of `err`.
fn facts(err: &Error) -> (ErrorKind, Side, CloseCode, bool, io::ErrorKind) {
    let io_kind = io::Error::from(err.clone()).kind();
    (
        err.kind(),
        err.side(),
        err.close_code(),
        err.warrants_close(),
        io_kind,
    )
}

#[test]
fn every_variant_is_in_the_table_and_its_facts_agree_with_each_other() {
    let all = one_of_each();
    let names: Vec<_> = all.iter().map(|err| err.repr().variant_name()).collect();
    assert_eq!(
        names,
        Repr::VARIANTS,
        "one error of each variant, in the table's order"
    );
    let mut texts = std::collections::HashSet::new();
    for err in &all {
        let (kind, _, code, close_record, io_kind) = facts(err);
        assert!(texts.insert(err.to_string()), "a text of its own: {err}");
        // A close record always says something went wrong.
        assert!(!close_record || code != CloseCode::NO_ERROR, "{err:?}");
        if kind == ErrorKind::Timeout {
            assert_eq!(io_kind, io::ErrorKind::TimedOut, "{err:?}");
        }
        assert_eq!(
            err.is_retryable(),
            matches!(kind, ErrorKind::Refused | ErrorKind::GoingAway),
            "{err:?}"
        );
        // Through an io::Error and back, nothing changes.
        let back = Error::from(io::Error::from(err.clone()));
        assert_eq!(facts(&back), facts(err), "{err:?}");
        assert_eq!(back.to_string(), err.to_string());
    }
}

#[test]
fn the_table_says_what_each_error_means() {
    use io::ErrorKind as Io;
    use std::{sync::Arc, time::Duration};

    let refused = Error::from(Repr::Refused);
    assert!(refused.is_retryable() && !refused.is_timeout() && !refused.is_closed());
    assert_eq!(
        facts(&refused),
        (
            ErrorKind::Refused,
            Side::Remote,
            CloseCode::REFUSED_STREAM,
            false,
            Io::ConnectionReset
        )
    );

    let pinned = one_of_each().swap_remove(13);
    assert!(matches!(pinned.repr(), Repr::PeerKeyMismatch { .. }));
    assert_eq!(
        facts(&pinned),
        (
            ErrorKind::Authentication,
            Side::Local,
            CloseCode::UNAUTHORIZED,
            true,
            Io::PermissionDenied
        )
    );
    assert_eq!(
        pinned.reason_for_peer(),
        "peer key mismatch: not the key we expected"
    );

    let timed_out = Error::from(Repr::Io(Arc::new(Io::TimedOut.into())));
    assert!(timed_out.is_timeout() && !timed_out.is_retryable());
    assert_eq!(
        facts(&timed_out),
        (
            ErrorKind::Io,
            Side::Local,
            CloseCode::INTERNAL_ERROR,
            false,
            Io::TimedOut
        )
    );
    assert!(!Error::from(Repr::Io(Arc::new(Io::BrokenPipe.into()))).is_timeout());

    // The side and code of a close, a reset or a go-away are their own.
    let graceful = Error::graceful(Side::Local);
    assert!(graceful.is_closed() && !graceful.is_peer_close(CloseCode::NO_ERROR));
    assert_eq!(
        facts(&graceful),
        (
            ErrorKind::Closed,
            Side::Local,
            CloseCode::NO_ERROR,
            false,
            Io::NotConnected
        )
    );
    let refused_us = Error::closed_by_peer(CloseCode::UNAUTHORIZED, "no".into());
    assert!(!refused_us.is_closed() && refused_us.is_peer_close(CloseCode::UNAUTHORIZED));
    assert_eq!(
        facts(&refused_us),
        (
            ErrorKind::Closed,
            Side::Remote,
            CloseCode::UNAUTHORIZED,
            false,
            Io::ConnectionAborted
        )
    );
    let reset = Error::from(Repr::StreamReset {
        code: CloseCode(0x77),
        side: Side::Remote,
    });
    assert_eq!(
        facts(&reset),
        (
            ErrorKind::Reset,
            Side::Remote,
            CloseCode(0x77),
            false,
            Io::ConnectionReset
        )
    );
    let going = Error::from(Repr::GoingAway { side: Side::Local });
    assert!(going.is_retryable());
    assert_eq!(
        facts(&going),
        (
            ErrorKind::GoingAway,
            Side::Local,
            CloseCode::NO_ERROR,
            false,
            Io::NotConnected
        )
    );

    // A close in the clear is a close, but not the peer's for certain.
    let unauthenticated = Error::from(Repr::UnauthenticatedClose {
        code: CloseCode::VERSION_MISMATCH,
        reason: String::new(),
    });
    assert!(!unauthenticated.is_peer_close(CloseCode::VERSION_MISMATCH) && !unauthenticated.is_closed());
    assert_eq!(
        facts(&unauthenticated),
        (
            ErrorKind::Closed,
            Side::Remote,
            CloseCode::VERSION_MISMATCH,
            false,
            Io::ConnectionAborted
        )
    );

    // A violation closes with its own code.
    let flood = Error::from(Repr::Protocol(Violation::PingFlood(16)));
    assert_eq!(
        facts(&flood),
        (
            ErrorKind::Protocol,
            Side::Remote,
            CloseCode::EXCESSIVE_LOAD,
            true,
            Io::InvalidData
        )
    );

    // A connector's I/O error keeps its kind; another error is Other.
    let connect = Error::from(Repr::Connect(Arc::new(io::Error::from(Io::ConnectionRefused))));
    assert_eq!(
        facts(&connect),
        (
            ErrorKind::Connect,
            Side::Local,
            CloseCode::INTERNAL_ERROR,
            false,
            Io::ConnectionRefused
        )
    );
    let connect = Error::from(Repr::Connect(Arc::new(std::fmt::Error)));
    assert_eq!(io::Error::from(connect).kind(), Io::Other);

    // Deadlines: ours are timeouts; a record the peer stalled is the peer's.
    for ours in [
        Repr::HandshakeTimeout(Duration::from_secs(10)),
        Repr::OpenTimeout(Duration::from_secs(1)),
        Repr::IdleTimeout(Duration::from_secs(30)),
    ]
    .map(Error::from)
    {
        assert!(ours.is_timeout() && ours.side() == Side::Local, "{ours:?}");
    }
    let stalled = Error::from(Repr::RecordTimeout(Duration::from_secs(5)));
    assert!(!stalled.is_timeout());
    assert_eq!(
        facts(&stalled),
        (
            ErrorKind::Timeout,
            Side::Remote,
            CloseCode::IDLE_TIMEOUT,
            true,
            Io::TimedOut
        )
    );
}
