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
        pair.dialer.open(pair.now),
        Err(Error::GoingAway {
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
fn a_stream_crossing_go_away_is_refused() {
    let mut pair = Pair::new();
    pair.acceptor.go_away(pair.now);
    // The dialer opens before it hears of the go-away.
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"x")).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.accept().unwrap(), None);
    assert!(matches!(pair.dialer.read(id, 10), Err(Error::Refused)));
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
    assert!(matches!(pair.dialer.error(), Some(Error::IdleTimeout(_))));
    assert!(events(&mut pair.dialer).contains(&Event::Lost));
    assert!(matches!(pair.dialer.read(id, 1), Err(Error::IdleTimeout(_))));
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
        pair.acceptor.error(),
        Some(Error::Closed {
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
