//! The secure channel end to end: handshakes over duplex and TCP, version
//! and suite negotiation, tampering, identity, record protection and sizing.

#[path = "../support/mod.rs"]
mod support;

mod secrecy;
mod suites;

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use support::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, Role, Versions},
    transport::{ExistingTransport, TcpConnector},
    CloseCode, Error, ErrorKind, NegotiateLayer, RecordSizeLayer,
};

/// Handshake both ends over a pair of transports, then check data flows both
/// ways and the close is clean.
async fn handshake_and_echo<IO>(dialer_io: IO, acceptor_io: IO, suite: CipherSuite)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut dialer = stack(ident(1), &[suite]);
    let mut acceptor = stack(ident(2), &[suite]);
    let (d, a) = tokio::join!(
        dialer.handshake(Handshake::dial(dialer_io).expect_peer(ident(2).peer_id())),
        acceptor.accept_transport(acceptor_io),
    );
    let (mut d, mut a) = (d.unwrap(), a.unwrap());
    for (channel, role, peer) in [(&d, Role::Dialer, 2), (&a, Role::Acceptor, 1)] {
        let agreed = channel.agreement();
        assert_eq!(agreed.role(), role);
        assert_eq!(agreed.suite(), suite);
        assert_eq!(agreed.version(), 3);
        assert_eq!(channel.peer(), Some(&ident(peer).peer_id()));
    }

    let message: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let server = tokio::spawn(async move {
        let mut got = vec![0; 100_000];
        a.read_exact(&mut got).await.unwrap();
        a.write_all(&got).await.unwrap();
        a.shutdown().await.unwrap();
        let mut rest = Vec::new();
        a.read_to_end(&mut rest).await.unwrap();
        rest
    });
    d.write_all(&message).await.unwrap();
    d.flush().await.unwrap();
    let mut echoed = Vec::new();
    d.read_to_end(&mut echoed).await.unwrap();
    assert_eq!(echoed, message);
    d.shutdown().await.unwrap();
    assert!(server.await.unwrap().is_empty());
}

#[tokio::test]
async fn every_suite_handshakes_over_duplex() {
    for suite in SUITES {
        let (a, b) = tokio::io::duplex(64 * 1024);
        handshake_and_echo(a, b, suite).await;
    }
}

#[tokio::test]
async fn every_suite_handshakes_over_loopback_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    for suite in SUITES {
        let (dialed, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        handshake_and_echo(dialed.unwrap(), accepted.unwrap().0, suite).await;
    }
}

#[tokio::test]
async fn tcp_connector_dials_through_the_whole_stack() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut channel = stack(ident(2), &CipherSuite::default_order())
            .accept_transport(tcp)
            .await
            .unwrap();
        channel.write_all(b"over tcp").await.unwrap();
        channel.shutdown().await.unwrap();
    });
    let mut dialer = ServiceBuilder::new()
        .layer(RecordSizeLayer::dynamic())
        .layer(weft::EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new());
    let mut channel = dialer.dial(addr).await.unwrap();
    assert_eq!(channel.agreement().suite(), CipherSuite::default_order()[0]);
    let mut text = String::new();
    channel.read_to_string(&mut text).await.unwrap();
    assert_eq!(text, "over tcp");
    server.await.unwrap();
}

#[tokio::test]
async fn version_matrix_over_the_wire() {
    // Each range is clamped to what this build implements (1 to 3) before
    // it is offered, so a range past it offers its part within it.
    let cases = [
        ((1, 1), (1, 1), Some(1)),
        ((1, 3), (2, 5), Some(3)),
        ((2, 9), (1, 6), Some(3)),
        ((1, 2), (3, 4), None),
    ];
    for ((dmin, dmax), (amin, amax), expected) in cases {
        let (a, b) = tokio::io::duplex(4096);
        let suites = [CipherSuite::Aes256Gcm];
        let mut dialer = stack_with(
            ident(1),
            &suites,
            RecordSizeLayer::dynamic(),
            Versions::new(dmin, dmax),
        );
        let mut acceptor = stack_with(
            ident(2),
            &suites,
            RecordSizeLayer::dynamic(),
            Versions::new(amin, amax),
        );
        let (d, a) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
        match expected {
            Some(version) => {
                assert_eq!(d.unwrap().agreement().version(), version);
                assert_eq!(a.unwrap().agreement().version(), version);
            }
            None => {
                let d = d.unwrap_err();
                let offered = format!("[{amin}, {}]", amax.min(3));
                assert_eq!(
                    d.to_string(),
                    format!(
                        "no common protocol version: we speak [{dmin}, {dmax}], the peer speaks {offered}"
                    )
                );
                assert!(
                    failed_with(&a, ErrorKind::Negotiation, "no common protocol version"),
                    "{a:?}"
                );
            }
        }
    }
    // A range with nothing this build implements fails before anything
    // is sent: a misassembled stack.
    let (a, _b) = tokio::io::duplex(4096);
    let mut dialer = stack_with(
        ident(1),
        &[CipherSuite::Aes256Gcm],
        RecordSizeLayer::dynamic(),
        Versions::new(4, 9),
    );
    let err = dialer.dial(a).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stack, "{err}");
}

#[tokio::test(start_paused = true)]
async fn flipping_any_byte_of_either_setup_fails_the_handshake() {
    // Learn how long each Setup frame is.
    let log = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = middle(tap(log.clone()), forward);
    let suites = [CipherSuite::Aes256Gcm, CipherSuite::Plaintext];
    let (d, acc) = connect(stack(ident(1), &suites), stack(ident(2), &suites), a, b).await;
    d.unwrap();
    acc.unwrap();
    let setup_len = 4 + log.lock().unwrap()[0].1;
    assert!(setup_len > 40);

    for dialer_side in [true, false] {
        for offset in 0..setup_len {
            let (dialer_io, dialer_far) = tokio::io::duplex(1 << 16);
            let (acceptor_io, acceptor_far) = tokio::io::duplex(1 << 16);
            let (dr, dw) = tokio::io::split(dialer_far);
            let (ar, aw) = tokio::io::split(acceptor_far);
            let (d2a, a2d) = if dialer_side {
                (offset, usize::MAX)
            } else {
                (usize::MAX, offset)
            };
            tokio::spawn(copy_flipping(dr, aw, d2a, 0x01));
            tokio::spawn(copy_flipping(ar, dw, a2d, 0x01));

            let mut dialer = stack(ident(1), &suites);
            let mut acceptor = stack(ident(2), &suites);
            let server = async {
                let mut channel = acceptor.accept_transport(acceptor_io).await?;
                channel.write_all(b"secret").await?;
                channel.flush().await?;
                Ok::<_, Error>(channel)
            };
            let client = async {
                let mut channel = dialer.dial(dialer_io).await?;
                let mut buf = [0u8; 6];
                channel.read_exact(&mut buf).await?;
                Ok::<_, Error>(buf)
            };
            let (d, a) = tokio::join!(client, server);
            assert!(
                d.is_err(),
                "dialer accepted data with byte {offset} flipped (dialer's Setup: {dialer_side})"
            );
            assert!(
                a.is_err(),
                "acceptor finished with byte {offset} flipped (dialer's Setup: {dialer_side})"
            );
        }
    }
}

#[tokio::test]
async fn a_wrong_pinned_key_names_both_keys_here_and_neither_to_the_peer() {
    let (a, b) = tokio::io::duplex(4096);
    let suites = [CipherSuite::Aes256Gcm];
    let (mut dialer, mut acceptor) = (stack(ident(1), &suites), stack(ident(2), &suites));
    let expected = ident(9).peer_id();
    let (d, a) = tokio::join!(
        dialer.handshake(Handshake::dial(a).expect_peer(expected)),
        async {
            let mut channel = acceptor.accept_transport(b).await?;
            channel.read_u8().await.map_err(Error::from)
        }
    );
    let err = d.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Authentication, "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "peer key mismatch: expected {expected}, the peer proved {}",
            ident(2).peer_id()
        )
    );
    // The acceptor is told why, but not whom the dialer expected: an active
    // attacker in its place would learn it.
    let refused = a.unwrap_err();
    assert!(refused.is_peer_close(CloseCode::UNAUTHORIZED), "{refused}");
    let told = refused.to_string();
    assert!(!told.contains(&expected.to_string()), "{told}");
    assert!(!told.contains(&ident(2).peer_id().to_string()), "{told}");
    assert!(told.contains("peer key mismatch"), "{told}");
}

#[tokio::test]
async fn unauthorized_peers_are_refused_while_the_acceptor_serves_others() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let allowed = ident(1).peer_id();
    let acceptor = ServiceBuilder::new()
        .layer(weft::EncryptLayer::new(ident(2)).authorize(move |peer| *peer == allowed))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let rejected = Arc::new(Mutex::new(Vec::new()));
    let log = rejected.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut acceptor = acceptor.clone();
            let log = log.clone();
            tokio::spawn(async move {
                match acceptor.accept_transport(tcp).await {
                    Ok(mut channel) => {
                        channel.write_all(b"welcome").await.unwrap();
                        channel.shutdown().await.unwrap();
                    }
                    Err(err) => log.lock().unwrap().push(err),
                }
            });
        }
    });
    let dial = |n| async move {
        let mut dialer = ServiceBuilder::new()
            .layer(weft::EncryptLayer::new(ident(n)))
            .layer(NegotiateLayer::new(Versions::CURRENT))
            .service(TcpConnector::new());
        let mut channel = dialer.dial(addr).await?;
        let mut text = String::new();
        channel.read_to_string(&mut text).await?;
        Ok::<_, Error>(text)
    };
    for _ in 0..3 {
        // The refused dialer learns why, at the latest on its first read.
        let err = dial(7).await.unwrap_err();
        assert!(err.is_peer_close(CloseCode::UNAUTHORIZED), "{err:?}");
        assert_eq!(dial(1).await.unwrap(), "welcome");
    }
    let rejected = rejected.lock().unwrap();
    assert_eq!(rejected.len(), 3);
    assert!(rejected.iter().all(|e| e.kind() == ErrorKind::Authentication
        && e.to_string() == format!("peer {} is not authorized", ident(7).peer_id())));
}

/// Runs a dialer that sends three flushed records ("one", "two", "three")
/// through `edit` (applied to the dialer's frames: 0 is Setup, 1 the
/// identity proof, 2.. data) and returns what the acceptor read, and how it
/// ended.
async fn send_through(
    suite: CipherSuite,
    edit: impl FnMut(usize, Vec<u8>) -> Edit + Send + 'static,
) -> (Vec<u8>, Result<(), Error>) {
    let (a, b) = middle(edit, forward);
    let (d, acc) = connect(stack(ident(1), &[suite]), stack(ident(2), &[suite]), a, b).await;
    let (mut d, mut acc) = (d.unwrap(), acc.unwrap());
    tokio::spawn(async move {
        for word in [&b"one"[..], b"two", b"three"] {
            d.write_all(word).await.unwrap();
            d.flush().await.unwrap();
        }
        let _ = d.shutdown().await;
        // Keep the dialer alive until the acceptor is done.
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut got = Vec::new();
    let end = loop {
        match acc.recv().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break Ok(()),
            Err(err) => break Err(err),
        }
    };
    (got, end)
}

#[tokio::test]
async fn tampered_records_are_typed_errors_and_earlier_data_survives() {
    for suite in [
        CipherSuite::Aes256Gcm,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::XChaCha20Poly1305,
    ] {
        // Untouched: everything, then a clean end.
        let (got, end) = send_through(suite, forward).await;
        assert_eq!(got, b"onetwothree");
        assert!(end.is_ok());

        // Replayed: record "one" again in place of "two".
        let mut first = None;
        let (got, end) = send_through(suite, move |i, raw| {
            if i == 2 {
                first = Some(raw.clone());
            }
            if i == 3 {
                return Edit::Send(vec![first.clone().unwrap()]);
            }
            Edit::Send(vec![raw])
        })
        .await;
        assert_eq!(got, b"one", "{suite}");
        assert!(
            failed_with(&end, ErrorKind::Record, "record 2 failed authentication"),
            "{suite}: {end:?}"
        );

        // Reordered: "three" before "two".
        let mut held = None;
        let (got, end) = send_through(suite, move |i, raw| match i {
            3 => {
                held = Some(raw);
                Edit::Send(vec![])
            }
            4 => Edit::Send(vec![raw, held.take().unwrap()]),
            _ => Edit::Send(vec![raw]),
        })
        .await;
        assert_eq!(got, b"one");
        assert!(
            failed_with(&end, ErrorKind::Record, "record 2 failed authentication"),
            "{suite}: {end:?}"
        );

        // Dropped: "two" never arrives.
        let (got, end) = send_through(suite, |i, raw| {
            Edit::Send(if i == 3 { vec![] } else { vec![raw] })
        })
        .await;
        assert_eq!(got, b"one");
        assert!(
            failed_with(&end, ErrorKind::Record, " failed authentication (modified"),
            "{suite}: {end:?}"
        );

        // Bit-flipped: in the header (kind byte stays valid) or the payload.
        for position in [3, 4, 6] {
            let (got, end) = send_through(suite, move |i, mut raw| {
                if i == 3 {
                    let at = position.min(raw.len() - 1);
                    raw[at] ^= 0x01;
                }
                Edit::Send(vec![raw])
            })
            .await;
            assert_eq!(got, b"one");
            assert!(end.is_err(), "{suite}: flip at {position}");
        }

        // Truncated: the transport ends after "two", without a close record.
        let (got, end) = send_through(
            suite,
            |i, raw| if i == 4 { Edit::Cut } else { Edit::Send(vec![raw]) },
        )
        .await;
        assert_eq!(got, b"onetwo");
        assert!(failed_with(&end, ErrorKind::Truncated, ""), "{suite}: {end:?}");

        // A close record forged in the clear is refused, not taken as an end.
        let (got, end) = send_through(suite, |i, raw| {
            if i == 3 {
                return Edit::Send(vec![raw_frame(FrameKind::Close, &[0, 0, 0, 0])]);
            }
            Edit::Send(vec![raw])
        })
        .await;
        assert_eq!(got, b"one");
        assert!(
            failed_with(&end, ErrorKind::Record, " failed authentication (modified"),
            "{suite}: {end:?}"
        );
    }
}

#[tokio::test]
async fn plaintext_truncation_is_still_told_apart_from_a_clean_close() {
    let (got, end) = send_through(CipherSuite::Plaintext, |i, raw| {
        if i == 4 {
            Edit::Cut
        } else {
            Edit::Send(vec![raw])
        }
    })
    .await;
    assert_eq!(got, b"onetwo");
    assert!(failed_with(&end, ErrorKind::Truncated, ""));
}

/// The data-record payload sizes a dialer with `records` puts on the wire
/// for `script` (a list of (bytes to write, then pause)).
async fn record_sizes(records: RecordSizeLayer, script: &[(usize, Duration)]) -> Vec<usize> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = middle(tap(log.clone()), forward);
    let suites = [CipherSuite::Aes256Gcm];
    let (d, acc) = connect(
        stack_with(ident(1), &suites, records, Versions::CURRENT),
        stack_with(
            ident(2),
            &suites,
            RecordSizeLayer::dynamic().max_record_size(64 * 1024),
            Versions::CURRENT,
        ),
        a,
        b,
    )
    .await;
    let (mut d, mut acc) = (d.unwrap(), acc.unwrap());
    let reader = tokio::spawn(async move {
        let mut sink = Vec::new();
        acc.read_to_end(&mut sink).await.unwrap();
        sink.len()
    });
    let mut total = 0;
    for &(bytes, pause) in script {
        d.write_all(&vec![0x5a; bytes]).await.unwrap();
        d.flush().await.unwrap();
        total += bytes;
        tokio::time::sleep(pause).await;
    }
    d.shutdown().await.unwrap();
    assert_eq!(reader.await.unwrap(), total);
    let log = log.lock().unwrap();
    log.iter()
        .filter(|(kind, _)| *kind == FrameKind::Data)
        .map(|(_, len)| len - 16)
        .collect()
}

/// A small record: one 1400-byte segment less the header and the tag.
const SEGMENT_RECORD_SIZE: usize = 1400 - 4 - 16;
/// Bytes sent in small records before they grow.
const BOOST_THRESHOLD: u64 = 128 * 1024;
/// How much each record grows by after that.
const GROWTH_STEP: usize = 1024;

/// The dynamic schedule, written out independently of the implementation:
/// small records until 128 KiB have been sent, then each record 1 KiB
/// larger up to `max`; after a second with no record, small again. The
/// script is (bytes written then flushed, pause after).
fn dynamic_schedule(script: &[(usize, Duration)], max: usize) -> Vec<usize> {
    let (mut sizes, mut sent, mut grown) = (Vec::new(), 0u64, 0usize);
    let (mut now, mut last) = (Duration::ZERO, None::<Duration>);
    for &(bytes, pause) in script {
        if last.is_some_and(|last| now - last >= Duration::from_secs(1)) {
            (sent, grown) = (0, 0);
        }
        let mut left = bytes;
        while left > 0 {
            let size = if sent < BOOST_THRESHOLD {
                SEGMENT_RECORD_SIZE
            } else {
                (SEGMENT_RECORD_SIZE + (grown + 1) * GROWTH_STEP).min(max)
            };
            let size = size.min(left);
            if sent >= BOOST_THRESHOLD {
                grown += 1;
            }
            sizes.push(size);
            sent += size as u64;
            left -= size;
        }
        last = Some(now);
        now += pause;
    }
    sizes
}

#[tokio::test(start_paused = true)]
async fn dynamic_record_sizes_on_the_wire_follow_the_schedule_and_reset_after_idle() {
    // 400 KB, half a second of quiet (still warm: records keep growing),
    // 50 KB, 1.5 s of quiet (idle: small records again), 20 KB.
    let script = [
        (400_000, Duration::from_millis(500)),
        (50_000, Duration::from_millis(1500)),
        (20_000, Duration::ZERO),
    ];
    let sizes = record_sizes(RecordSizeLayer::dynamic().max_record_size(16 * 1024), &script).await;
    let expected = dynamic_schedule(&script, 16 * 1024);
    assert_eq!(sizes, expected);
    // The schedule really has all three phases.
    assert_eq!(sizes[0], SEGMENT_RECORD_SIZE);
    assert!(sizes.contains(&(16 * 1024)));
    assert_eq!(sizes[sizes.len() - 15], SEGMENT_RECORD_SIZE);
}

#[tokio::test]
async fn dynamic_records_grow_to_64k_by_default() {
    let sizes = record_sizes(RecordSizeLayer::dynamic(), &[(3 << 20, Duration::ZERO)]).await;
    assert_eq!(sizes, dynamic_schedule(&[(3 << 20, Duration::ZERO)], 64 * 1024));
    assert!(sizes.contains(&(64 * 1024)));
}

#[tokio::test]
async fn fixed_records_are_fixed_and_small_writes_coalesce() {
    let sizes = record_sizes(RecordSizeLayer::fixed(4096), &[(10_000, Duration::ZERO)]).await;
    assert_eq!(sizes, [4096, 4096, 1808]);

    // Ten small writes and one flush make one record.
    let log = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = middle(tap(log.clone()), forward);
    let suites = [CipherSuite::ChaCha20Poly1305];
    let (d, acc) = connect(stack(ident(1), &suites), stack(ident(2), &suites), a, b).await;
    let (mut d, mut acc) = (d.unwrap(), acc.unwrap());
    for _ in 0..10 {
        d.write_all(&[1; 100]).await.unwrap();
    }
    d.flush().await.unwrap();
    let chunk = acc.recv().await.unwrap().unwrap();
    assert_eq!(chunk.len(), 1000);
    let data: Vec<usize> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k == FrameKind::Data)
        .map(|(_, n)| *n)
        .collect();
    assert_eq!(data, [1000 + 16]);
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_hits_the_handshake_deadline() {
    let (a, _silent) = tokio::io::duplex(4096);
    let started = tokio::time::Instant::now();
    let err = stack(ident(1), &[CipherSuite::Aes256Gcm])
        .dial(a)
        .await
        .unwrap_err();
    assert!(
        err.kind() == ErrorKind::Timeout && err.to_string() == "handshake did not finish within 10 s",
        "{err:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(10));

    // A peer that sends its Setup and then goes silent hits it too.
    let (a, b) = tokio::io::duplex(4096);
    let (_b_read, mut b_write) = tokio::io::split(b);
    b_write.write_all(&aes_setup_frame(&[9; 32])).await.unwrap();
    let started = tokio::time::Instant::now();
    let err = stack(ident(1), &[CipherSuite::Aes256Gcm])
        .dial(a)
        .await
        .unwrap_err();
    assert!(
        is_error(&err, ErrorKind::Timeout, "handshake did not finish within"),
        "{err:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(10));
}

#[tokio::test]
async fn a_one_sided_refusal_still_reaches_the_other_side_with_its_reason() {
    // The dialer's Setup reaches the acceptor declaring a record size it
    // finds invalid; the dialer finds the acceptor's Setup fine and
    // installs keys, then reads the acceptor's clear-text refusal.
    let small_records = |index, raw: Vec<u8>| {
        if index > 0 {
            return Edit::Send(vec![raw]);
        }
        let mut setup = <wire::Setup as prost::Message>::decode(&raw[4..]).unwrap();
        setup.max_record_size = 300;
        Edit::Send(vec![raw_frame(
            FrameKind::Setup,
            &prost::Message::encode_to_vec(&setup),
        )])
    };
    let (a, b) = middle(small_records, forward);
    let mut dialer = ServiceBuilder::new()
        .layer(weft::EncryptLayer::new(ident(1)))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new());
    let mut acceptor = stack(ident(2), &CipherSuite::default_order());
    let (d, acc) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    assert!(
        failed_with(&acc, ErrorKind::Negotiation, "peer sent an invalid Setup"),
        "{acc:?}"
    );
    // It came in the clear, after the dialer had keys: reported as such.
    let err = d.unwrap_err();
    assert!(
        is_unauthenticated_close(&err)
            && err.close_code() == CloseCode::PROTOCOL_ERROR
            && err
                .reason()
                .is_some_and(|reason| reason.contains("max_record_size")),
        "{err:?}"
    );
}
