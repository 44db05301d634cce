use super::*;

#[test]
fn go_away_refuses_new_streams_and_drains() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"x")).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.accept().unwrap(), Some(1));
    pair.acceptor.go_away(pair.now);
    pair.pump();
    assert!(matches!(
        pair.dialer.open(pair.now).as_ref().map_err(Error::repr),
        Err(Repr::GoingAway {
            side: Side::Remote,
            ..
        })
    ));
    assert_eq!(pair.acceptor.poll_close(), None, "stream 1 is still open");
    // Stream 1 finishes both ways, both handles go.
    pair.dialer.finish(1).unwrap();
    pair.acceptor.finish(1).unwrap();
    pair.pump();
    read_all(&mut pair.acceptor, 1);
    read_all(&mut pair.dialer, 1);
    for m in [&mut pair.acceptor, &mut pair.dialer] {
        m.drop_send(1);
        m.drop_recv(1);
    }
    pair.pump();
    assert_eq!(
        pair.acceptor.poll_close(),
        Some((CloseCode::NO_ERROR, String::new()))
    );
}

#[test]
fn a_stream_crossing_go_away_is_processed_and_the_second_step_names_the_last() {
    let mut pair = Pair::new();
    pair.acceptor.go_away(pair.now);
    // The first step promises every stream, and a ping marks it.
    let first = decode(transmit(&mut pair.acceptor, pair.now));
    assert!(
        matches!(&first[..], [Input::GoAway(GoAway { last: u32::MAX, code, .. }), Input::Ping(_), ..] if *code == CloseCode::NO_ERROR),
        "{first:?}"
    );
    // The dialer opens before it hears of the go-away...
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"x")).unwrap();
    let opened = transmit(&mut pair.dialer, pair.now);
    pair.acceptor.handle_input(opened, ORIGIN, pair.now);
    // ...and then hears it (answering the ping).
    pair.dialer.handle_input(raw_frames(&first), ORIGIN, pair.now);
    assert!(pair.dialer.is_going_away());
    pair.pump();
    // The crossing stream is processed, not refused.
    assert_eq!(pair.acceptor.accept().unwrap(), Some(id));
    assert!(matches!(pair.dialer.read(id, 10), Ok(ReadOutcome::Blocked)));
    // The pong brought the second step: the last stream is the crossing
    // one, and accept is finished.
    assert_eq!(pair.acceptor.accept().unwrap(), None);
    assert!(pair.acceptor.accept_finished());
    // A stream opened past the second step (by a peer that ignores it) is
    // refused, never seen by the application.
    pair.acceptor
        .handle_input(raw(1, 0, id + 2, b"late"), ORIGIN, pair.now);
    assert_eq!(pair.acceptor.accept().unwrap(), None);
    let frames = decode(transmit(&mut pair.acceptor, pair.now));
    assert!(
        frames.iter().any(
            |f| matches!(f, Input::Reset(r) if r.stream == id + 2 && r.code == CloseCode::REFUSED_STREAM)
        ),
        "{frames:?}"
    );
}

/// Re-encodes decoded frames, to hand them to the other side.
fn raw_frames(frames: &[Input]) -> Bytes {
    let mut out = bytes::BytesMut::new();
    for frame in frames {
        match frame {
            Input::GoAway(g) => g.encode(&mut out),
            Input::Ping(p) => p.encode(&mut out),
            Input::Pong(p) => p.encode(&mut out),
            other => panic!("not re-encodable here: {other:?}"),
        }
    }
    out.freeze()
}

#[test]
fn silence_past_the_idle_timeout_fails_every_stream() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.pump();
    let deadline = pair.dialer.poll_timeout().unwrap();
    assert!(deadline <= pair.now + Duration::from_secs(30));
    pair.advance(Duration::from_secs(10));
    pair.dialer.handle_timeout(pair.now);
    assert!(pair.dialer.error().is_none());
    // A ping goes out, and nothing comes back.
    assert!(decode(transmit(&mut pair.dialer, pair.now))
        .iter()
        .any(|f| matches!(f, Input::Ping(_))));
    pair.advance(Duration::from_secs(20));
    pair.dialer.handle_timeout(pair.now);
    assert!(matches!(
        pair.dialer.error().map(Error::repr),
        Some(Repr::IdleTimeout(_))
    ));
    assert!(events(&mut pair.dialer).contains(&Event::Lost));
    assert!(matches!(
        pair.dialer.read(id, 1).as_ref().map_err(Error::repr),
        Err(Repr::IdleTimeout(_))
    ));
    assert_eq!(
        pair.dialer.poll_close().map(|c| c.0),
        Some(CloseCode::IDLE_TIMEOUT)
    );
}

#[test]
fn the_drain_deadline_ends_a_go_away_that_never_drains() {
    let mut pair = Pair::new();
    let _ = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.pump();
    pair.acceptor.go_away(pair.now);
    pair.pump();
    assert!(pair.acceptor.poll_close().is_none());
    pair.advance(Duration::from_secs(5));
    pair.acceptor.handle_timeout(pair.now);
    assert!(matches!(
        pair.acceptor.error().map(Error::repr),
        Some(Repr::Closed {
            side: Side::Local,
            code: CloseCode::NO_ERROR,
            ..
        })
    ));
    assert!(pair.acceptor.poll_close().is_some());
}

#[test]
fn a_reset_stream_dropped_afterwards_sends_one_reset() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"x")).unwrap();
    pair.pump();
    pair.acceptor.accept().unwrap();
    pair.dialer.reset(id, CloseCode(5));
    pair.dialer.drop_recv(id);
    pair.dialer.drop_send(id);
    let wire = transmit(&mut pair.dialer, pair.now);
    let resets = decode(wire.clone())
        .into_iter()
        .filter(|f| matches!(f, Input::Reset { .. }))
        .count();
    assert_eq!(resets, 1);
    pair.acceptor.handle_input(wire, ORIGIN, pair.now);
    // The acceptor echoes; both tables end empty once its handles go.
    pair.pump();
    pair.acceptor.drop_recv(id);
    pair.acceptor.drop_send(id);
    pair.pump();
    assert_eq!(pair.dialer.open_streams(), 0);
    assert_eq!(pair.acceptor.open_streams(), 0);
}

/// The peer's GO_AWAY frame naming `last` as the last stream it processes
/// (code 0).
fn go_away_naming(last: u32) -> Bytes {
    let mut payload = last.to_be_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_be_bytes());
    raw(9, 0, 0, &payload)
}

/// A dialer core whose streams 1, 3 and 5 are on the wire, each with a
/// request.
fn three_on_the_wire() -> (Multiplexer, Instant) {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    let _ = transmit(&mut m, now);
    let ids: Vec<u32> = (0..3).map(|_| m.open(now).unwrap().unwrap()).collect();
    for &id in &ids {
        m.write(id, &mut Bytes::from_static(b"request")).unwrap();
    }
    let _ = transmit(&mut m, now);
    (m, now)
}

#[test]
fn streams_above_the_peers_go_away_last_id_are_refused_and_retryable() {
    let (mut m, now) = three_on_the_wire();
    let never_sent = m.open(now).unwrap().unwrap(); // 7 is not
                                                    // The peer processes stream 1 and no more.
    m.handle_input(go_away_naming(1), ORIGIN, now);
    assert!(m.error().is_none());
    for id in [3, 5, never_sent] {
        let err = m.read(id, 10).unwrap_err();
        assert!(
            matches!(err.repr(), Repr::Refused) && err.is_retryable(),
            "{id}: {err:?}"
        );
        assert!(m
            .write(id, &mut Bytes::from_static(b"x"))
            .unwrap_err()
            .is_retryable());
    }
    assert!(
        matches!(m.read(1, 10), Ok(ReadOutcome::Blocked)),
        "stream 1 goes on"
    );
    let frames = decode(transmit(&mut m, now));
    let resets: Vec<u32> = frames
        .iter()
        .filter_map(|f| match f {
            Input::Reset(r) => Some(r.stream),
            _ => None,
        })
        .collect();
    assert_eq!(
        resets,
        vec![3, 5],
        "the peer may hold 3 and 5; 7 never existed for it"
    );
    assert!(!frames.contains(&Input::Open { stream: 7 }));
    assert!(matches!(
        m.open(now).as_ref().map_err(Error::repr),
        Err(Repr::GoingAway { side: Side::Remote })
    ));
}

#[test]
fn a_stream_the_peer_answered_is_never_refused_by_a_later_go_away_or_reset() {
    let (mut m, now) = three_on_the_wire();
    // The peer answers 3 and 5 (unread here), then says its go-away's last
    // stream is 1, and refuses 5.
    m.handle_input(raw(2, 0, 3, b"reply"), ORIGIN, now);
    m.handle_input(raw(2, 0, 5, b"reply"), ORIGIN, now);
    m.handle_input(go_away_naming(1), ORIGIN, now);
    m.handle_input(
        raw(4, 0, 5, &CloseCode::REFUSED_STREAM.0.to_be_bytes()),
        ORIGIN,
        now,
    );
    assert!(m.error().is_none(), "{:?}", m.error());
    // 3 was processed: its reply reads, and it goes on.
    assert_eq!(
        m.read(3, 10).unwrap(),
        ReadOutcome::Data(Bytes::from_static(b"reply"))
    );
    m.write(3, &mut Bytes::from_static(b"more")).unwrap();
    // 5 was processed too: reset, but not "refused", so never replayed.
    let err = m.read(5, 10).unwrap_err();
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        matches!(
            err.repr(),
            Repr::StreamReset {
                code: CloseCode::REFUSED_STREAM,
                side: Side::Remote
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_clean_close_from_the_peer_is_graceful_and_answered() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.handle_eof();
    let err = m.error().unwrap();
    assert!(err.is_closed() && err.side() == Side::Remote, "{err:?}");
    assert_eq!(m.poll_close(), Some((CloseCode::NO_ERROR, String::new())));
}

#[test]
fn a_record_that_fails_to_open_is_reported_in_our_close_and_a_dead_transport_is_not() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.handle_transport_error(Repr::BadRecord { sequence: 9 }.into());
    let (code, reason) = m.poll_close().unwrap();
    assert_eq!(code, CloseCode::AUTHENTICATION_FAILED);
    assert!(reason.contains("record 9"), "{reason}");

    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.handle_transport_error(Repr::Truncated.into());
    assert_eq!(m.poll_close(), None);
}

#[test]
fn streams_waiting_to_be_accepted_when_we_go_away_are_still_accepted() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"x")).unwrap();
    pair.pump();
    pair.acceptor.go_away(pair.now);
    // Its second step names the last stream, and still one waits.
    pair.pump();
    assert!(!pair.acceptor.accept_finished(), "one waits to be accepted");
    assert!(!pair.acceptor.close_due(), "nor is the connection drained");
    assert_eq!(pair.acceptor.accept().unwrap(), Some(id));
    assert!(pair.acceptor.accept_finished(), "none can come after the go-away");
}

#[test]
fn no_stream_is_available_to_open_once_going_away_or_failed() {
    let mut pair = Pair::new();
    assert!(pair.dialer.available_streams() > 0);
    pair.dialer.go_away(pair.now);
    assert_eq!(pair.dialer.available_streams(), 0);
    let (failed, err) = acceptor_fed(&[credit(&[(0, 0)])]);
    assert!(err.is_some());
    assert_eq!(failed.available_streams(), 0);
}

#[test]
fn a_stream_we_reset_before_the_peers_go_away_refused_it_is_reset_once() {
    let (mut m, now) = three_on_the_wire();
    m.reset(5, CloseCode(7)); // ours, not yet sent
    m.handle_input(go_away_naming(1), ORIGIN, now);
    let mut resets: Vec<(u32, CloseCode)> = decode(transmit(&mut m, now))
        .into_iter()
        .filter_map(|f| match f {
            Input::Reset(r) => Some((r.stream, r.code)),
            _ => None,
        })
        .collect();
    resets.sort_by_key(|&(stream, _)| stream);
    assert_eq!(resets, vec![(3, CloseCode::CANCEL), (5, CloseCode(7))]);
}
