use super::*;

#[test]
fn data_on_an_unknown_stream_is_a_violation() {
    assert_eq!(violation(&[raw(2, 0, 1, b"x")]), Violation::UnknownStream(1));
    assert_eq!(violation(&[raw(3, 0, 7, b"")]), Violation::UnknownStream(7));
    assert_eq!(violation(&[raw(4, 0, 9, &[0; 4])]), Violation::UnknownStream(9));
}

/// An acceptor whose stream 1 came (with FIN), was accepted, read, finished
/// and dropped: the id is used and gone.
fn acceptor_after_stream_1() -> (Multiplexer, Instant) {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(raw(1, FLAG_FIN, 1, b"done"), ORIGIN, now);
    assert_eq!(m.accept().unwrap(), Some(1));
    read_all(&mut m, 1);
    m.finish(1).unwrap();
    let _ = transmit(&mut m, now);
    m.drop_send(1);
    m.drop_recv(1);
    assert_eq!(m.open_streams(), 0);
    (m, now)
}

#[test]
fn data_on_a_closed_stream_is_a_violation() {
    let (mut m, now) = acceptor_after_stream_1();
    m.handle_input(raw(2, 0, 1, b"late"), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::ClosedStream(1)))
    ));
}

#[test]
fn data_after_fin_is_a_violation() {
    assert_eq!(
        violation(&[raw(1, FLAG_FIN, 1, b"a"), raw(2, 0, 1, b"b")]),
        Violation::ClosedStream(1)
    );
}

#[test]
fn a_stream_id_of_the_wrong_parity_is_a_violation() {
    assert_eq!(violation(&[raw(1, 0, 2, b"")]), Violation::WrongParity(2));
}

#[test]
fn reusing_a_finished_id_is_a_violation() {
    let (mut m, now) = acceptor_after_stream_1();
    m.handle_input(raw(1, 0, 1, b""), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::StreamReused(1)))
    ));
}

#[test]
fn skipping_ids_is_a_violation() {
    assert_eq!(
        violation(&[raw(1, 0, 3, b"")]),
        Violation::StreamGap { expected: 1, got: 3 }
    );
}

#[test]
fn zero_credit_is_a_violation() {
    assert_eq!(violation(&[credit(&[(0, 0)])]), Violation::ZeroCredit(0));
    assert_eq!(
        violation(&[raw(1, 0, 1, b""), credit(&[(1, 0)])]),
        Violation::ZeroCredit(1)
    );
}

#[test]
fn credit_past_the_maximum_window_is_a_violation() {
    let big = (MAX_WINDOW as u32) - WINDOW + 1;
    assert_eq!(
        violation(&[raw(1, 0, 1, b""), credit(&[(1, big)])]),
        Violation::CreditOverflow(1)
    );
    assert_eq!(
        violation(&[credit(&[(0, u32::MAX)])]),
        Violation::CreditOverflow(0)
    );
    // Up to the maximum exactly is credit like any other, a byte more is
    // not: for a stream, and for the connection.
    let (_, err) = acceptor_fed(&[raw(1, 0, 1, b""), credit(&[(1, big - 1)])]);
    assert!(err.is_none(), "{err:?}");
    let connection = params(Role::Acceptor).peer_connection_window;
    let (_, err) = acceptor_fed(&[credit(&[(0, MAX_WINDOW as u32 - connection)])]);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        violation(&[credit(&[(0, MAX_WINDOW as u32 - connection + 1)])]),
        Violation::CreditOverflow(0)
    );
}

#[test]
fn credit_for_a_stream_never_opened_is_a_violation() {
    assert_eq!(violation(&[credit(&[(41, 5)])]), Violation::UnknownStream(41));
}

#[test]
fn data_past_the_window_is_a_flow_control_violation() {
    let v = violation(&[raw(1, 0, 1, &vec![0; WINDOW as usize + 1])]);
    assert_eq!(
        v,
        Violation::FlowControl {
            stream: 1,
            offset: u64::from(WINDOW) + 1,
            limit: u64::from(WINDOW)
        }
    );
    assert_eq!(v.code(), CloseCode::FLOW_CONTROL_ERROR);
}

#[test]
fn the_connection_window_bounds_all_streams_together() {
    let mut frames = Vec::new();
    for id in [1u32, 3, 5, 7] {
        frames.push(raw(1, 0, id, &vec![0; WINDOW as usize]));
    }
    let (m, err) = acceptor_fed(&frames);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(m.buffered(), 4 * u64::from(WINDOW));
    // One more byte on any stream breaks the connection window... and the
    // stream window first, so use a fresh core with a smaller connection window.
    let now = Instant::now();
    let mut p = params(Role::Acceptor);
    p.local_connection_window = WINDOW + 10;
    let mut m = Multiplexer::new(p, now);
    m.handle_input(raw(1, 0, 1, &vec![0; WINDOW as usize]), ORIGIN, now);
    m.handle_input(raw(1, 0, 3, &[0; 11]), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::FlowControl { stream: 0, .. }))
    ));
}

#[test]
fn opening_past_the_limit_sends_go_away_with_the_code() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    for id in [1u32, 3, 5, 7, 9] {
        m.handle_input(raw(1, 0, id, b""), ORIGIN, now);
    }
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::StreamLimit { id: 9, allowed: 4 }))
    ));
    let frames = decode(transmit(&mut m, now));
    assert!(
        frames.iter().any(|f| matches!(
            f,
            Input::GoAway(GoAway { last: 7, code, .. }) if *code == CloseCode::STREAM_LIMIT_ERROR
        )),
        "{frames:?}"
    );
    let (code, reason) = m.poll_close().unwrap();
    assert_eq!(code, CloseCode::STREAM_LIMIT_ERROR);
    assert!(reason.contains("limit"), "{reason}");
}

#[test]
fn stream_credit_going_backwards_is_a_violation() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.handle_input(raw(6, 0, 0, &2u32.to_be_bytes()), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::BadStreamCredit { had: 4, got: 2 }))
    ));
}

#[test]
fn a_peer_never_panics_us_with_random_frames() {
    use proptest::prelude::*;
    proptest!(|(frames in proptest::collection::vec(
        (0u8..11, 0u8..3, 0u32..12, proptest::collection::vec(any::<u8>(), 0..24)),
        0..24,
    ))| {
        let now = Instant::now();
        let mut m = Multiplexer::new(params(Role::Acceptor), now);
        for (kind, flags, stream, payload) in frames {
            m.handle_input(raw(kind, flags, stream, &payload), ORIGIN, now);
            let _ = m.accept();
            let _ = transmit(&mut m, now);
            let _ = events(&mut m);
        }
        prop_assert!(m.buffered() <= 4 * u64::from(WINDOW));
    });
}

#[test]
fn every_ping_is_answered_and_a_flood_is_a_violation() {
    let ping = |n: u64| raw(7, 0, 0, &n.to_be_bytes());
    // Sixteen at once: sixteen pongs.
    let pings: Vec<Bytes> = (1..=16).map(ping).collect();
    let (mut m, err) = acceptor_fed(&pings);
    assert!(err.is_none(), "{err:?}");
    let pongs = decode(transmit(&mut m, Instant::now()))
        .into_iter()
        .filter(|f| matches!(f, Input::Pong(_)))
        .count();
    assert_eq!(pongs, 16);
    // A seventeenth before any is answered: go-away, EXCESSIVE_LOAD.
    let pings: Vec<Bytes> = (1..=17).map(ping).collect();
    let (mut m, err) = acceptor_fed(&pings);
    assert!(
        matches!(
            err.as_ref().map(Error::repr),
            Some(Repr::Protocol(Violation::PingFlood(16)))
        ),
        "{err:?}"
    );
    let frames = decode(transmit(&mut m, Instant::now()));
    assert!(
        frames
            .iter()
            .any(|f| matches!(f, Input::GoAway(g) if g.code == CloseCode::EXCESSIVE_LOAD)),
        "{frames:?}"
    );
    assert_eq!(
        m.poll_close().map(|(code, _)| code),
        Some(CloseCode::EXCESSIVE_LOAD)
    );
}

/// An acceptor that allows `streams` streams at once.
fn acceptor_allowing(streams: u32) -> (Multiplexer, Instant) {
    let now = Instant::now();
    let mut p = params(Role::Acceptor);
    p.local_max_streams = streams;
    (Multiplexer::new(p, now), now)
}

fn reset(stream: u32) -> Bytes {
    raw(4, 0, stream, &CloseCode::CANCEL.0.to_be_bytes())
}

#[test]
fn streams_reset_before_they_are_accepted_never_reach_the_application_and_free_their_slots() {
    let (mut m, now) = acceptor_allowing(64);
    for id in [1, 3, 5] {
        m.handle_input(raw(1, 0, id, b"request"), ORIGIN, now);
    }
    m.handle_input(reset(1), ORIGIN, now);
    m.handle_input(reset(5), ORIGIN, now);
    assert_eq!(m.accept().unwrap(), Some(3), "only the stream still wanted");
    assert_eq!(m.accept().unwrap(), None);
    assert_eq!(m.open_streams(), 1, "the reset streams are gone");
    assert!(m.error().is_none());
}

#[test]
fn more_than_twenty_streams_reset_before_they_are_accepted_get_go_away() {
    let (mut m, now) = acceptor_allowing(64);
    for n in 0..21u32 {
        let id = 2 * n + 1;
        m.handle_input(raw(1, 0, id, b"x"), ORIGIN, now);
        m.handle_input(reset(id), ORIGIN, now);
        if n < 20 {
            assert!(m.error().is_none(), "{n} pending resets are within the budget");
        }
    }
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::PendingResetFlood(20)))
    ));
    let frames = decode(transmit(&mut m, now));
    assert!(frames
        .iter()
        .any(|f| matches!(f, Input::GoAway(g) if g.code == CloseCode::EXCESSIVE_LOAD)));
}

#[test]
fn an_accept_that_skips_reset_streams_makes_room_for_as_many_again() {
    let (mut m, now) = acceptor_allowing(64);
    for round in 0..3u32 {
        for n in 0..20u32 {
            let id = 2 * (20 * round + n) + 1;
            m.handle_input(raw(1, 0, id, b"x"), ORIGIN, now);
            m.handle_input(reset(id), ORIGIN, now);
        }
        assert!(
            m.error().is_none(),
            "round {round}: 20 pending resets are within the budget"
        );
        // The application looks for a stream: the 20 cancelled ones are
        // skipped, and wait no more.
        assert_eq!(m.accept().unwrap(), None);
    }
}

#[test]
fn resets_past_the_budget_per_second_get_go_away_and_the_same_spread_out_do_not() {
    // The application accepts each stream at once, so only the rate counts.
    let run = |spread: Duration| {
        let (mut m, start) = acceptor_allowing(4);
        let budget = 1000u32; // MIN_RESETS_PER_SECOND for a limit of 4
        for n in 0..=budget {
            let now = start + spread * n;
            let id = 2 * n + 1;
            m.handle_input(raw(1, 0, id, b"x"), ORIGIN, now);
            assert_eq!(m.accept().unwrap(), Some(id));
            m.handle_input(reset(id), ORIGIN, now);
            if m.error().is_some() {
                return Some(n);
            }
            m.drop_send(id);
            m.drop_recv(id);
            // Give the slot back, as the driver's transmit would.
            let _ = transmit(&mut m, now);
        }
        None
    };
    assert_eq!(
        run(Duration::ZERO),
        Some(1000),
        "the 1,001st reset in a burst is a flood"
    );
    assert_eq!(
        run(Duration::from_millis(2)),
        None,
        "500 a second is within the budget"
    );
}

#[test]
fn a_reset_after_the_peers_fin_delivers_the_request_and_costs_no_budget() {
    let (mut m, now) = acceptor_allowing(64);
    // Whole requests, then "stop sending": a client that drops its streams
    // without reading the replies. Far past both budgets, and no flood.
    for n in 0..1100u32 {
        let id = 2 * n + 1;
        m.handle_input(raw(1, FLAG_FIN, id, b"whole"), ORIGIN, now);
        m.handle_input(reset(id), ORIGIN, now);
        assert_eq!(m.accept().unwrap(), Some(id), "the request is delivered");
        assert_eq!(read_all(&mut m, id), (b"whole".to_vec(), true));
        m.drop_send(id);
        m.drop_recv(id);
        let _ = transmit(&mut m, now);
    }
    assert!(m.error().is_none());
}

/// Data on one of our own stream ids: closed if we used it (and it is
/// gone), unknown if we never did.
#[test]
fn data_on_one_of_our_own_ids_is_closed_if_we_used_it_and_unknown_if_not() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    let id = m.open(now).unwrap().unwrap();
    assert_eq!(id, 2);
    m.finish(id).unwrap();
    let _ = transmit(&mut m, now);
    m.handle_input(raw(2, FLAG_FIN, id, b""), ORIGIN, now);
    read_all(&mut m, id);
    m.drop_send(id);
    m.drop_recv(id);
    assert_eq!(m.open_streams(), 0);
    m.handle_input(raw(2, 0, id, b"late"), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::ClosedStream(2)))
    ));
    // Never used: the next id we would open, and one past it.
    assert_eq!(violation(&[raw(2, 0, 2, b"x")]), Violation::UnknownStream(2));
    assert_eq!(violation(&[raw(2, 0, 4, b"x")]), Violation::UnknownStream(4));
}

/// Stream credit may stay where it is (no news) or rise to the whole id
/// space, and no further.
#[test]
fn stream_credit_may_repeat_itself_or_rise_to_the_id_space_and_no_further() {
    let now = Instant::now();
    let credit_frame = |total: u32| raw(6, 0, 0, &total.to_be_bytes());
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.handle_input(credit_frame(4), ORIGIN, now);
    assert!(m.error().is_none());
    assert!(
        !events(&mut m).contains(&Event::StreamCredit),
        "no more than before"
    );
    m.handle_input(credit_frame(1 << 31), ORIGIN, now);
    assert!(m.error().is_none());
    assert!(events(&mut m).contains(&Event::StreamCredit));
    // An acceptor's ids are one fewer: all the even ones below 2^32.
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(credit_frame(1 << 31), ORIGIN, now);
    assert!(matches!(
        m.error().map(Error::repr),
        Some(Repr::Protocol(Violation::BadStreamCredit {
            had: 4,
            got: 0x8000_0000
        }))
    ));
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(credit_frame((1 << 31) - 1), ORIGIN, now);
    assert!(m.error().is_none());
}
