use super::*;

#[test]
fn unaccepted_streams_count_against_the_limit() {
    let mut pair = Pair::new();
    for _ in 0..4 {
        let id = pair.dialer.open(pair.now).unwrap().unwrap();
        pair.dialer.finish(id).unwrap();
    }
    assert_eq!(pair.dialer.open(pair.now).unwrap(), None, "limit of 4 reached");
    pair.pump();
    // The streams finished their sending side, but none is accepted: no credit.
    assert_eq!(pair.dialer.open(pair.now).unwrap(), None);
    // Accept one, finish it, read it to the end: one credit comes back.
    let id = pair.acceptor.accept().unwrap().unwrap();
    assert_eq!(read_all(&mut pair.acceptor, id), (vec![], true));
    pair.acceptor.finish(id).unwrap();
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    pair.pump();
    assert!(events(&mut pair.dialer).contains(&Event::StreamCredit));
    assert!(pair.dialer.open(pair.now).unwrap().is_some());
    assert_eq!(pair.dialer.open(pair.now).unwrap(), None);
}

/// A stream's slot comes back once the handler is done with it, both
/// ways, whether or not it still holds the handles: it read the request to
/// its end and sent the reply's end. Until then it counts.
#[test]
fn a_handler_done_with_its_stream_gives_its_slot_back_holding_it() {
    let mut pair = Pair::new();
    let id = empty_request_accepted(&mut pair);
    pair.acceptor.finish(id).unwrap();
    pair.pump();
    // Ended on the wire both ways, but the handler has not read the end.
    assert_eq!(pair.acceptor.peer_allowed(), 4);
    read_all(&mut pair.acceptor, id);
    assert_eq!(pair.acceptor.peer_allowed(), 5);
    // Holding the handles, it keeps the stream (not its slot).
    assert_eq!(pair.acceptor.open_streams(), 1);
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    assert_eq!(pair.acceptor.peer_allowed(), 5);
    assert_eq!(pair.acceptor.open_streams(), 0);

    // One that sent its end and dropped the reading half unread is done too.
    let id = empty_request_accepted(&mut pair);
    pair.acceptor.drop_recv(id);
    assert_eq!(pair.acceptor.peer_allowed(), 5);
    pair.acceptor.finish(id).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 6);
}

/// MadeYouReset (CVE-2025-8671): in HTTP/2, a stream the server itself
/// reset (over a bad request, say) stopped counting against the limit while
/// its handler ran on, so a peer could have any number of handlers running.
/// Here a stream counts until its handler lets go of it, however it ended.
#[test]
fn streams_reset_while_their_handler_runs_keep_their_slot() {
    let mut pair = Pair::new();
    let mut handlers = Vec::new();
    for n in 0..4 {
        let sid = empty_request_accepted(&mut pair);
        read_all(&mut pair.acceptor, sid);
        if n % 2 == 0 {
            // The server resets it itself.
            pair.acceptor.reset(sid, CloseCode::CANCEL);
        } else {
            // The peer resets it after its FIN (ids are the same at both
            // ends).
            pair.dialer.reset(sid, CloseCode::CANCEL);
        }
        pair.pump();
        handlers.push(sid);
    }
    assert_eq!(pair.acceptor.peer_allowed(), 4, "four handlers still run");
    assert_eq!(
        pair.dialer.open(pair.now).unwrap(),
        None,
        "so the peer may open no fifth stream"
    );
    for sid in handlers {
        pair.acceptor.drop_send(sid);
        pair.acceptor.drop_recv(sid);
    }
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 8);
    assert!(pair.dialer.open(pair.now).unwrap().is_some());
}

// ------------------------------------------------------------ scheduling

#[test]
fn streams_take_turns_one_quantum_each_after_control_frames() {
    let mut pair = Pair::new();
    let ids: Vec<u32> = (0..3)
        .map(|_| pair.dialer.open(pair.now).unwrap().unwrap())
        .collect();
    for &id in &ids {
        pair.dialer
            .write(id, &mut Bytes::from(vec![0u8; 48 * 1024]))
            .unwrap();
    }
    // A credit owed by the dialer goes before any data.
    pair.acceptor.open(pair.now).unwrap().unwrap();
    let id2 = 2;
    pair.acceptor
        .write(id2, &mut Bytes::from(vec![0u8; WINDOW as usize]))
        .unwrap();
    pair.pump();
    pair.dialer.accept().unwrap();
    read_all(&mut pair.dialer, id2);
    pair.dialer.write(ids[0], &mut Bytes::from(vec![0u8; 1])).unwrap();
    let frames = decode(transmit(&mut pair.dialer, pair.now));
    let order: Vec<&Input> = frames.iter().filter(|f| !matches!(f, Input::Ping(_))).collect();
    assert!(matches!(order[0], Input::Credit { .. }), "{order:?}");

    // Fresh pair: three streams, one quantum per turn, in rotation.
    let mut pair = Pair::new();
    let ids: Vec<u32> = (0..3)
        .map(|_| pair.dialer.open(pair.now).unwrap().unwrap())
        .collect();
    for &id in &ids {
        pair.dialer
            .write(id, &mut Bytes::from(vec![0u8; 48 * 1024]))
            .unwrap();
    }
    let mut owners = Vec::new();
    let mut d = Decoder::default();
    let mut wire = transmit(&mut pair.dialer, pair.now);
    let mut last = 0;
    while let Some(input) = d.next(&mut wire).unwrap() {
        if let Input::Data { stream, .. } = input {
            if stream != last {
                owners.push(stream);
                last = stream;
            }
        }
    }
    // 48 KiB each in 16 KiB quanta: 1 3 5 1 3 5 1 3 5.
    assert_eq!(owners, vec![1, 3, 5, 1, 3, 5, 1, 3, 5]);
}

#[test]
fn a_stream_blocked_on_connection_credit_holds_up_no_open_fin_or_reset_behind_it() {
    let now = Instant::now();
    let mut p = params(Role::Dialer);
    p.peer_connection_window = 1000;
    let mut m = Multiplexer::new(p, now);
    // Stream 1 uses the whole connection window and has more to send.
    let one = m.open(now).unwrap().unwrap();
    m.write(one, &mut Bytes::from(vec![1u8; 5000])).unwrap();
    let _ = transmit(&mut m, now);
    // Behind it: a stream that only opens and finishes, one that opens
    // with data it cannot send yet, and a reset.
    let three = m.open(now).unwrap().unwrap();
    m.finish(three).unwrap();
    let five = m.open(now).unwrap().unwrap();
    m.write(five, &mut Bytes::from_static(b"later")).unwrap();
    m.finish(one).unwrap();
    m.reset(one, CloseCode(0x55));
    let frames = decode(transmit(&mut m, now));
    assert!(frames.contains(&Input::Open { stream: 3 }), "{frames:?}");
    assert!(frames.contains(&Input::Fin { stream: 3 }), "{frames:?}");
    assert!(frames.contains(&Input::Open { stream: 5 }), "{frames:?}");
    assert!(
        frames
            .iter()
            .any(|f| matches!(f, Input::Reset(r) if r.stream == 1)),
        "{frames:?}"
    );
    assert!(
        !frames.iter().any(|f| matches!(f, Input::Data { .. })),
        "no credit for data: {frames:?}"
    );

    // Credit comes: stream 5's data goes out, first in line.
    m.handle_input(credit(&[(0, 100)]), ORIGIN, now);
    let frames = decode(transmit(&mut m, now));
    assert_eq!(
        frames,
        vec![Input::Data {
            stream: 5,
            data: Bytes::from_static(b"later")
        }]
    );
}

#[test]
fn a_write_takes_no_more_than_the_send_buffer_has_room_for() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    let id = m.open(now).unwrap().unwrap();
    let mut data = Bytes::from(vec![7u8; 1 << 20]);
    assert_eq!(m.write(id, &mut data).unwrap(), 256 * 1024);
    assert_eq!(
        data.len(),
        (1 << 20) - 256 * 1024,
        "the rest stays with the caller"
    );
    assert_eq!(m.queued(), 256 * 1024);
    assert_eq!(m.write(id, &mut data).unwrap(), 0, "blocked until some leaves");
    let _ = transmit(&mut m, now);
    // The peer's stream window took 64 KiB: that much room again.
    assert_eq!(m.write(id, &mut data).unwrap(), WINDOW as usize);
    assert!(m.queued() <= 256 * 1024);
}

#[test]
fn using_up_the_stream_ids_goes_away_and_refuses_more() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    m.ids.set_next_local(u64::from(u32::MAX));
    assert_eq!(m.available_streams(), 4);
    assert_eq!(m.open(now).unwrap(), Some(u32::MAX));
    assert!(m.is_going_away());
    assert_eq!(m.available_streams(), 0);
    assert!(matches!(
        m.open(now).as_ref().map_err(Error::repr),
        Err(Repr::GoingAway { side: Side::Local })
    ));
    let frames = decode(transmit(&mut m, now));
    assert!(
        frames
            .iter()
            .any(|f| matches!(f, Input::GoAway(g) if g.code == CloseCode::NO_ERROR)),
        "{frames:?}"
    );
}

#[test]
fn woken_readers_are_counted_until_they_read() {
    let mut pair = Pair::new();
    let now = pair.now;
    let a = pair.dialer.open(now).unwrap().unwrap();
    let b = pair.dialer.open(now).unwrap().unwrap();
    for id in [a, b] {
        pair.dialer
            .write(id, &mut Bytes::from_static(b"request"))
            .unwrap();
    }
    pair.pump();
    // Two streams wait to be accepted: two tasks about to run.
    assert_eq!(pair.acceptor.woken_readers(), 2);
    let first = pair.acceptor.accept().unwrap().unwrap();
    let second = pair.acceptor.accept().unwrap().unwrap();
    assert_eq!(pair.acceptor.woken_readers(), 2, "accepted, not yet read");
    assert!(matches!(
        pair.acceptor.read(first, usize::MAX),
        Ok(ReadOutcome::Data(_))
    ));
    assert_eq!(pair.acceptor.woken_readers(), 1);
    // Dropping the other unread counts it out too.
    pair.acceptor.drop_recv(second);
    assert_eq!(pair.acceptor.woken_readers(), 0);

    // A reader that blocked and is woken by data counts until its read.
    assert!(matches!(
        pair.acceptor.read(first, usize::MAX),
        Ok(ReadOutcome::Blocked)
    ));
    assert_eq!(pair.acceptor.woken_readers(), 0, "a blocked reader is not woken");
    pair.dialer.write(a, &mut Bytes::from_static(b"more")).unwrap();
    pair.dialer.finish(a).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.woken_readers(), 1);
    assert!(matches!(
        pair.acceptor.read(first, usize::MAX),
        Ok(ReadOutcome::Data(_))
    ));
    assert_eq!(pair.acceptor.woken_readers(), 0);
    assert!(matches!(
        pair.acceptor.read(first, usize::MAX),
        Ok(ReadOutcome::Fin)
    ));
    assert_eq!(pair.acceptor.woken_readers(), 0);
}

/// A peer that never reads must not make us queue its stream limit ×
/// `send_buffer`: all streams together queue at most the connection's
/// send buffer, each at most its share of it, and the writers it blocks
/// wake once a quarter is free.
#[test]
fn all_streams_together_queue_no_more_than_the_connection_send_buffer() {
    let now = Instant::now();
    let mut p = params(Role::Dialer);
    p.connection_send_buffer = 512 * 1024;
    let mut m = Multiplexer::new(p, now);
    let mut ids: Vec<u32> = (0..2).map(|_| m.open(now).unwrap().unwrap()).collect();
    let mut rest: Vec<Bytes> = (0..4).map(|_| Bytes::from(vec![1u8; 1 << 20])).collect();
    // Two streams: a share of 256 KiB each, their whole send buffer.
    assert_eq!(m.write(ids[0], &mut rest[0]).unwrap(), 256 * 1024);
    assert_eq!(m.write(ids[1], &mut rest[1]).unwrap(), 256 * 1024);
    // Two more: room in their shares (128 KiB now), none in the
    // connection's buffer.
    ids.extend((0..2).map(|_| m.open(now).unwrap().unwrap()));
    assert_eq!(m.write(ids[2], &mut rest[2]).unwrap(), 0);
    assert_eq!(m.write(ids[3], &mut rest[3]).unwrap(), 0);
    assert_eq!(
        m.write(ids[3], &mut rest[3]).unwrap(),
        0,
        "asking twice is harmless"
    );
    assert_eq!(m.queued(), 512 * 1024);
    assert!(events(&mut m).is_empty());
    // The peer's stream windows take 64 KiB of each of the first two:
    // a quarter of the connection's buffer is free, and both wake.
    let _ = transmit(&mut m, now);
    assert_eq!(m.queued(), 384 * 1024);
    let woken = events(&mut m);
    assert!(woken.contains(&Event::Writable(ids[2])), "{woken:?}");
    assert!(woken.contains(&Event::Writable(ids[3])), "{woken:?}");
    assert_eq!(woken.iter().filter(|e| **e == Event::Writable(ids[3])).count(), 1);
    assert_eq!(m.write(ids[2], &mut rest[2]).unwrap(), 128 * 1024);
    assert_eq!(m.write(ids[3], &mut rest[3]).unwrap(), 0);
    assert_eq!(m.queued(), 512 * 1024);
    // A reset gives its stream's queued bytes back at once.
    m.reset(ids[0], CloseCode::CANCEL);
    assert_eq!(m.queued(), 320 * 1024);
    assert!(events(&mut m).contains(&Event::Writable(ids[3])));
    // At most its share, though the connection's buffer has more room.
    assert_eq!(m.write(ids[3], &mut rest[3]).unwrap(), 128 * 1024);
    assert_eq!(m.queued(), 448 * 1024);
}

/// Streams that ended while they waited for room in the connection's send
/// buffer leave the list of waiters once it outgrows the streams: it
/// cannot grow without bound while the buffer stays full.
#[test]
fn the_writers_waiting_for_the_connection_are_pruned_of_ended_streams() {
    let now = Instant::now();
    let mut p = params(Role::Dialer);
    p.connection_send_buffer = 256 * 1024;
    let mut m = Multiplexer::new(p, now);
    let a = m.open(now).unwrap().unwrap();
    assert_eq!(
        m.write(a, &mut Bytes::from(vec![1u8; 256 * 1024])).unwrap(),
        256 * 1024
    );
    let b = m.open(now).unwrap().unwrap();
    // Ids of streams long gone, as if each had waited and ended.
    m.sending
        .room_waiters_mut()
        .extend((1000..1100).map(|n| 2 * n + 1));
    assert_eq!(m.write(b, &mut Bytes::from_static(b"waits")).unwrap(), 0);
    assert_eq!(*m.sending.room_waiters_mut(), vec![b]);
}

#[test]
fn a_reset_from_the_peer_wakes_the_streams_waiting_reader_and_writer() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"abc")).unwrap();
    pair.pump();
    pair.acceptor.accept().unwrap().unwrap();
    // Its reader has read all there is and waits; its writer has filled
    // its buffer and waits.
    assert_eq!(read_all(&mut pair.acceptor, id), (b"abc".to_vec(), false));
    let mut big = Bytes::from(vec![0u8; 4 << 20]);
    while pair.acceptor.write(id, &mut big).unwrap() > 0 {}
    events(&mut pair.acceptor);
    pair.dialer.reset(id, CloseCode(3));
    let reset = transmit(&mut pair.dialer, pair.now);
    pair.acceptor.handle_input(reset, ORIGIN, pair.now);
    let woken = events(&mut pair.acceptor);
    assert!(woken.contains(&Event::Readable(id)), "{woken:?}");
    assert!(woken.contains(&Event::Writable(id)), "{woken:?}");
}

/// A handler that read the request to its end and has not sent its
/// reply's end still runs: its stream counts until it does.
#[test]
fn a_handler_that_read_the_request_but_has_not_finished_its_reply_keeps_its_slot() {
    let mut pair = Pair::new();
    let id = empty_request_accepted(&mut pair);
    assert_eq!(pair.acceptor.peer_allowed(), 4);
    assert_eq!(read_all(&mut pair.acceptor, id), (Vec::new(), true));
    pair.acceptor
        .write(id, &mut Bytes::from_static(b"part of a reply"))
        .unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 4, "the handler still sends");
    pair.acceptor.finish(id).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 5);
}

#[test]
fn accept_ends_cleanly_after_a_clean_close_and_with_the_error_after_a_failure() {
    let mut pair = Pair::new();
    assert!(!pair.acceptor.accept_finished(), "streams may still come");
    pair.acceptor.close(CloseCode::NO_ERROR, "done");
    assert_eq!(pair.acceptor.accept().unwrap(), None);
    assert!(pair.acceptor.accept_finished());
    let (mut failed, err) = acceptor_fed(&[credit(&[(0, 0)])]);
    assert!(err.is_some());
    assert!(failed.accept().is_err(), "a failure is no clean end");
    assert!(failed.accept_finished());
}

/// A stream we reset (over a bad request, say) while its handler holds it
/// counts until the handler lets go (MadeYouReset, from our side).
#[test]
fn a_stream_we_reset_while_its_handler_holds_it_keeps_its_slot() {
    let mut pair = Pair::new();
    let id = empty_request_accepted(&mut pair);
    assert_eq!(read_all(&mut pair.acceptor, id), (Vec::new(), true));
    pair.acceptor.reset(id, CloseCode(7));
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 4, "its handler still holds it");
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 5);
}

/// A stream the dialer opened and finished at once, accepted: its id.
fn empty_request_accepted(pair: &mut Pair) -> u32 {
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.finish(id).unwrap();
    pair.pump();
    pair.acceptor.accept().unwrap().unwrap()
}

/// What each side's stream limit counts now and the most it counted at
/// once, as the counters show them: opened, given back, and opened the
/// other way.
#[test]
fn each_limit_counts_the_streams_open_against_it_and_the_most_at_once() {
    let mut pair = Pair::new();
    for _ in 0..3 {
        let id = pair.dialer.open(pair.now).unwrap().unwrap();
        pair.dialer.finish(id).unwrap();
    }
    pair.pump();
    assert_eq!(pair.dialer.streams_counted(), ((3, 0), (3, 0)));
    assert_eq!(pair.acceptor.streams_counted(), ((0, 3), (0, 3)));
    // The acceptor is done with one both ways: its slot goes back.
    let id = pair.acceptor.accept().unwrap().unwrap();
    read_all(&mut pair.acceptor, id);
    pair.acceptor.finish(id).unwrap();
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    pair.pump();
    assert_eq!(pair.acceptor.streams_counted(), ((0, 2), (0, 3)));
    assert_eq!(pair.dialer.streams_counted(), ((2, 0), (3, 0)));
    // One the other way.
    pair.acceptor.open(pair.now).unwrap().unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.streams_counted(), ((1, 2), (1, 3)));
    assert_eq!(pair.dialer.streams_counted(), ((2, 1), (3, 1)));
    // Four streams started in all, as each side counts what the peer's
    // traffic has earned it.
    assert_eq!(
        (pair.dialer.earnings().streams, pair.acceptor.earnings().streams),
        (4, 4)
    );
}
