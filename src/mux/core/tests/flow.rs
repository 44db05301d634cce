use super::*;

#[test]
fn credit_is_batched_for_many_streams_in_one_frame() {
    let (mut pair, ids) = windows_sent_and_accepted(3);
    // Reading a quarter of a window owes nothing yet.
    for &id in &ids {
        let ReadOutcome::Data(b) = pair.acceptor.read(id, WINDOW as usize / 4).unwrap() else {
            panic!()
        };
        assert_eq!(b.len(), WINDOW as usize / 4);
    }
    assert!(decode(transmit(&mut pair.acceptor, pair.now))
        .iter()
        .all(|f| !matches!(f, Input::Credit { .. })));
    // Past half a window on each: one credit frame names all three.
    for &id in &ids {
        pair.acceptor.read(id, WINDOW as usize / 2).unwrap();
    }
    let frames = decode(transmit(&mut pair.acceptor, pair.now));
    let credits: Vec<_> = frames
        .iter()
        .filter_map(|f| match f {
            Input::Credit(credit) => Some(credit.entries.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(credits.len(), 1, "{frames:?}");
    let streams: Vec<u32> = credits[0].iter().map(|e| e.0).filter(|&id| id != 0).collect();
    assert_eq!(streams, ids);
}

#[test]
fn windows_grow_when_used_up_within_two_round_trips() {
    // An acceptor that measured an RTT of 10 ms with its first ping, sent
    // when the first data (stream 1) arrived.
    let measured = |t0: Instant| {
        let mut a = Multiplexer::new(params(Role::Acceptor), t0);
        let mut d = Multiplexer::new(params(Role::Dialer), t0);
        let id = d.open(t0).unwrap().unwrap();
        d.write(id, &mut Bytes::from_static(b"x")).unwrap();
        a.handle_input(transmit(&mut d, t0), ORIGIN, t0);
        a.accept().unwrap();
        read_all(&mut a, id);
        d.handle_input(transmit(&mut a, t0), ORIGIN, t0);
        a.handle_input(transmit(&mut d, t0), ORIGIN, t0 + Duration::from_millis(10));
        assert_eq!(a.rtt(), Some(Duration::from_millis(10)));
        a
    };
    let t0 = Instant::now();
    let mut a = measured(t0);

    // Fast reader: a window consumed within 2 RTT doubles.
    let t = t0 + Duration::from_millis(12);
    a.handle_input(raw(1, 0, 3, &vec![0; WINDOW as usize]), ORIGIN, t);
    a.accept().unwrap();
    read_all(&mut a, 3);
    let _ = transmit(&mut a, t);
    assert_eq!(a.stream_window(3), Some(2 * u64::from(WINDOW)));

    // Slow reader: a window consumed over a second stays the same.
    let mut slow = measured(t0);
    let later = t0 + Duration::from_millis(12);
    slow.handle_input(raw(1, 0, 3, &vec![0; WINDOW as usize]), ORIGIN, later);
    slow.accept().unwrap();
    read_all(&mut slow, 3);
    let _ = transmit(&mut slow, later + Duration::from_secs(1));
    assert_eq!(slow.stream_window(3), Some(u64::from(WINDOW)));

    // Used up exactly two round trips after it opened: not within them.
    let mut edge = measured(t0);
    edge.handle_input(raw(1, 0, 3, &vec![0; WINDOW as usize]), ORIGIN, later);
    edge.accept().unwrap();
    read_all(&mut edge, 3);
    let _ = transmit(&mut edge, later + Duration::from_millis(20));
    assert_eq!(edge.stream_window(3), Some(u64::from(WINDOW)));
}

#[test]
fn credit_is_owed_again_only_once_half_a_window_more_was_read() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(raw(1, 0, 1, &vec![0; WINDOW as usize]), ORIGIN, now);
    m.accept().unwrap();
    let stream_credit = |m: &mut Multiplexer| -> Vec<u32> {
        credit_entries(transmit(m, now))
            .into_iter()
            .filter(|&(stream, _)| stream == 1)
            .map(|(_, increment)| increment)
            .collect()
    };
    let read = |m: &mut Multiplexer, n: usize| read_exactly(m, 1, n);
    read(&mut m, WINDOW as usize / 2);
    assert_eq!(
        m.buffered(),
        u64::from(WINDOW / 2),
        "what is read is no longer held"
    );
    assert_eq!(stream_credit(&mut m), vec![WINDOW / 2]);
    // The sender uses it; a little more is read: nothing owed yet.
    m.handle_input(raw(2, 0, 1, &vec![0; WINDOW as usize / 2]), ORIGIN, now);
    read(&mut m, 1024);
    assert_eq!(stream_credit(&mut m), Vec::<u32>::new());
    read(&mut m, WINDOW as usize / 2 - 1024);
    assert_eq!(stream_credit(&mut m), vec![WINDOW / 2]);
}

#[test]
fn a_sender_stops_at_the_credit_and_resumes_when_it_comes() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer
        .write(id, &mut Bytes::from(vec![5u8; 3 * WINDOW as usize]))
        .unwrap();
    pair.pump();
    pair.acceptor.accept().unwrap();
    let mut total = 0;
    for _ in 0..10 {
        let (data, _) = read_all(&mut pair.acceptor, id);
        total += data.len();
        assert!(pair.acceptor.buffered() <= u64::from(WINDOW) * 16);
        pair.pump();
    }
    assert_eq!(total, 3 * WINDOW as usize);
}

#[test]
fn tiny_pieces_are_copied_together_not_kept_as_slices() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(raw(1, 0, 1, b"a"), ORIGIN, now);
    for _ in 0..99 {
        m.handle_input(raw(2, 0, 1, b"b"), ORIGIN, now);
    }
    m.accept().unwrap();
    // One piece of 100 bytes: the slices of the records were not kept.
    let ReadOutcome::Data(all) = m.read(1, usize::MAX).unwrap() else {
        panic!()
    };
    assert_eq!(all.len(), 100);
    // A large piece stays zero-copy, after the small ones before it.
    let big = Bytes::from(vec![7u8; 20_000]);
    m.handle_input(raw(2, 0, 1, b"c"), ORIGIN, now);
    let mut frame = BytesMut::new();
    frame.put_u8(2);
    frame.put_u8(0);
    frame.put_u32(1);
    frame.put_u32(big.len() as u32);
    frame.extend_from_slice(&big);
    m.handle_input(frame.freeze(), ORIGIN, now);
    assert_eq!(
        m.read(1, usize::MAX).unwrap(),
        ReadOutcome::Data(Bytes::from_static(b"c"))
    );
    assert_eq!(m.read(1, usize::MAX).unwrap(), ReadOutcome::Data(big));
}

#[test]
fn arriving_data_refreshes_the_round_trip_measurement() {
    let mut pair = Pair::new();
    // The first data measures a round trip (0 ms here).
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"first")).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.rtt(), Some(Duration::ZERO));
    pair.advance(Duration::from_millis(250));
    pair.dialer.write(id, &mut Bytes::from_static(b"data")).unwrap();
    let wire = transmit(&mut pair.dialer, pair.now);
    pair.acceptor.handle_input(wire, ORIGIN, pair.now);
    // The last ping was 250 ms ago: the receiver pings again now, well
    // before the 10 s keepalive.
    assert!(pair.acceptor.poll_timeout().unwrap() <= pair.now);
    let ping = transmit(&mut pair.acceptor, pair.now);
    let frames = decode(ping.clone());
    assert!(frames.iter().any(|f| matches!(f, Input::Ping(_))), "{frames:?}");
    // A loaded round trip counts at once for tuning, smoothed or not.
    pair.dialer.handle_input(ping, ORIGIN, pair.now);
    let pong = transmit(&mut pair.dialer, pair.now);
    pair.acceptor
        .handle_input(pong, ORIGIN, pair.now + Duration::from_millis(40));
    assert_eq!(
        pair.acceptor.keepalive.tuning_rtt(),
        Some(Duration::from_millis(40))
    );
    assert!(pair.acceptor.rtt().unwrap() < Duration::from_millis(40));
}

#[test]
fn slices_pin_no_more_read_buffer_than_the_connection_window() {
    // A peer sends 16 KiB pieces, each in a 512 KiB read buffer of its own
    // (the rest of each buffer: frames that cost no credit), to streams
    // nobody reads.
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    let mut total = 0;
    for (i, id) in [1u32, 3, 5, 7].into_iter().enumerate() {
        m.handle_input(raw(1, 0, id, b""), ORIGIN, now);
        for j in 0..4u64 {
            let origin = Origin {
                buffer: 1 + i as u64 * 4 + j,
                size: 512 * 1024,
            };
            m.handle_input(raw(2, 0, id, &[0; 16 * 1024]), origin, now);
            total += 16 * 1024;
        }
    }
    assert!(m.error().is_none(), "{:?}", m.error());
    assert_eq!(m.buffered(), total);
    // The window is 256 KiB: half a buffer's worth of slices may pin.
    assert!(m.pinned() <= 4 * WINDOW as usize, "{}", m.pinned());
    // Pieces of one buffer share its pin.
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(raw(1, 0, 1, b""), ORIGIN, now);
    let origin = Origin {
        buffer: 42,
        size: 128 * 1024,
    };
    for _ in 0..3 {
        m.handle_input(raw(2, 0, 1, &[0; 16 * 1024]), origin, now);
    }
    assert_eq!(m.pinned(), 128 * 1024);
    // Read out, the pins go.
    read_all(&mut m, 1);
    assert_eq!(m.pinned(), 0);
}

#[test]
fn a_stream_whose_peer_finished_after_it_was_owed_credit_gets_none() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer
        .write(id, &mut Bytes::from(vec![0u8; WINDOW as usize]))
        .unwrap();
    pair.pump();
    pair.acceptor.accept().unwrap().unwrap();
    // Three quarters read: the stream is owed credit, not yet sent...
    read_exactly(&mut pair.acceptor, id, 3 * WINDOW as usize / 4);
    assert!(pair.acceptor.wants_transmit(pair.now), "credit owed");
    // ...when its peer finishes: it will send nothing more.
    pair.dialer.finish(id).unwrap();
    let fin = transmit(&mut pair.dialer, pair.now);
    pair.acceptor.handle_input(fin, ORIGIN, pair.now);
    let entries = credit_entries(transmit(&mut pair.acceptor, pair.now));
    assert!(
        entries
            .iter()
            .all(|&(stream, increment)| stream != id && increment != 0),
        "{entries:?}"
    );
}

#[test]
fn unread_data_dropped_by_a_reset_or_by_its_reader_returns_its_connection_credit() {
    // Four streams fill the acceptor's connection window, unread; their
    // resets (or the application dropping their readers) drop the data,
    // and its credit comes back to the dialer.
    for by_reader in [false, true] {
        let (mut pair, ids) = windows_sent_and_accepted(4);
        for &id in &ids {
            if by_reader {
                pair.acceptor.drop_recv(id);
            } else {
                pair.dialer.reset(id, CloseCode(3));
            }
        }
        let resets = transmit(&mut pair.dialer, pair.now);
        pair.acceptor.handle_input(resets, ORIGIN, pair.now);
        let returned: u64 = credit_entries(transmit(&mut pair.acceptor, pair.now))
            .into_iter()
            .filter(|&(stream, _)| stream == 0)
            .map(|(_, increment)| u64::from(increment))
            .sum();
        assert_eq!(
            returned,
            4 * u64::from(WINDOW),
            "the dropped bytes' credit (by the reader: {by_reader})"
        );
    }
}

/// The (stream, increment) entries of the credit frames in `wire`.
fn credit_entries(wire: Bytes) -> Vec<(u32, u32)> {
    decode(wire)
        .into_iter()
        .filter_map(|f| match f {
            Input::Credit(credit) => Some(credit.entries),
            _ => None,
        })
        .flatten()
        .collect()
}

/// A pair whose dialer sent a stream window of data on each of `n`
/// streams, all accepted and none read: the pair and the streams.
fn windows_sent_and_accepted(n: usize) -> (Pair, Vec<u32>) {
    let mut pair = Pair::new();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = pair.dialer.open(pair.now).unwrap().unwrap();
        pair.dialer
            .write(id, &mut Bytes::from(vec![0u8; WINDOW as usize]))
            .unwrap();
        ids.push(id);
    }
    pair.pump();
    for _ in 0..n {
        pair.acceptor.accept().unwrap().unwrap();
    }
    (pair, ids)
}

/// Reads `n` bytes of stream `id`, there already.
fn read_exactly(m: &mut Multiplexer, id: u32, n: usize) {
    let mut read = 0;
    while read < n {
        let ReadOutcome::Data(b) = m.read(id, n - read).unwrap() else {
            panic!("{n} bytes of stream {id} there to read")
        };
        read += b.len();
    }
}
