use super::*;

#[test]
fn open_write_close_is_one_frame() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    // A connection's start sends nothing of its own.
    assert!(transmit(&mut m, now).is_empty());
    let id = m.open(now).unwrap().unwrap();
    m.write(id, &mut Bytes::from_static(b"hello")).unwrap();
    m.finish(id).unwrap();
    let frames = decode(transmit(&mut m, now));
    assert_eq!(
        frames,
        vec![
            // The first ping rides with the first frames.
            Input::Ping(Ping(1)),
            Input::Open { stream: 1 },
            Input::Data {
                stream: 1,
                data: Bytes::from_static(b"hello")
            },
            Input::Fin { stream: 1 },
        ]
    );
    // One header: OPEN with the FIN flag and the payload.
    let id = m.open(now).unwrap().unwrap();
    m.write(id, &mut Bytes::from_static(b"hello")).unwrap();
    m.finish(id).unwrap();
    let wire = transmit(&mut m, now);
    assert_eq!(wire.len(), 10 + 5);
    assert_eq!(&wire[..2], &[1, FLAG_FIN]);
}

#[test]
fn first_data_goes_out_without_waiting_for_the_peer() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer
        .write(id, &mut Bytes::from(vec![1u8; 200_000]))
        .unwrap();
    let wire = transmit(&mut pair.dialer, pair.now);
    // Exactly the peer's initial stream window leaves before any reply.
    let data: usize = decode(wire)
        .iter()
        .map(|i| match i {
            Input::Data { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(data, WINDOW as usize);
}

#[test]
fn data_fin_reset_travel_and_are_reported() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"abc")).unwrap();
    pair.pump();
    assert!(events(&mut pair.acceptor).contains(&Event::Incoming));
    assert_eq!(pair.acceptor.accept().unwrap(), Some(1));
    assert_eq!(read_all(&mut pair.acceptor, 1), (b"abc".to_vec(), false));
    pair.dialer.finish(id).unwrap();
    pair.pump();
    assert!(events(&mut pair.acceptor).contains(&Event::Readable(1)));
    assert_eq!(read_all(&mut pair.acceptor, 1), (vec![], true));
    // The acceptor resets; the dialer's read and write both fail.
    pair.acceptor.reset(1, CloseCode(9));
    pair.pump();
    assert!(matches!(
        pair.dialer.read(1, 10).as_ref().map_err(Error::repr),
        Err(Repr::StreamReset {
            code: CloseCode(9),
            side: Side::Remote
        })
    ));
}

#[test]
fn ping_is_answered_with_pong_and_gives_an_rtt() {
    let now = Instant::now();
    let mut a = Multiplexer::new(params(Role::Dialer), now);
    let mut b = Multiplexer::new(params(Role::Acceptor), now);
    let id = a.open(now).unwrap().unwrap();
    a.write(id, &mut Bytes::from_static(b"x")).unwrap();
    let ping = transmit(&mut a, now);
    assert!(decode(ping.clone()).contains(&Input::Ping(Ping(1))));
    b.handle_input(ping, ORIGIN, now);
    let pong = transmit(&mut b, now);
    let frames = decode(pong.clone());
    assert!(frames.contains(&Input::Pong(Pong(1))), "{frames:?}");
    // The receiver's own first ping rides with its pong.
    assert!(frames.contains(&Input::Ping(Ping(1))), "{frames:?}");
    a.handle_input(pong, ORIGIN, now + Duration::from_millis(30));
    assert_eq!(a.rtt(), Some(Duration::from_millis(30)));
    // The next ping is due a keepalive interval later.
    assert_eq!(
        a.poll_timeout(),
        Some(now + Duration::from_millis(30) + Duration::from_secs(10))
            .min(Some(now + Duration::from_millis(30) + Duration::from_secs(30)))
    );
}

#[test]
fn an_idle_connection_pings_after_the_keepalive_interval() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(10)));
    assert!(transmit(&mut m, now + Duration::from_secs(9)).is_empty());
    let later = now + Duration::from_secs(10);
    assert_eq!(decode(transmit(&mut m, later)), vec![Input::Ping(Ping(1))]);
}

#[test]
fn an_unsolicited_pong_is_a_violation() {
    assert_eq!(
        violation(&[raw(8, 0, 0, &7u64.to_be_bytes())]),
        Violation::UnsolicitedPong
    );
}

#[test]
fn data_is_written_through_only_when_its_turn_would_send_it_now() {
    let now = Instant::now();
    let mut p = params(Role::Dialer);
    p.peer_connection_window = 3000;
    let mut m = Multiplexer::new(p, now);
    let one = m.open(now).unwrap().unwrap();
    let mut header = [0; HEADER_LEN];
    // Nothing waits: the frame opens the stream with the data.
    assert_eq!(m.write_through(one, 1000, &mut header).unwrap(), 1000);
    let mut wire = BytesMut::from(&header[..]);
    wire.extend_from_slice(&[7; 1000]);
    assert_eq!(
        decode(wire.freeze()),
        vec![
            Input::Open { stream: one },
            Input::Data {
                stream: one,
                data: Bytes::from(vec![7; 1000])
            }
        ]
    );
    assert_eq!(m.stats().bytes_sent, 1000);
    // Then plain data, up to the credit left (2000 of the connection's).
    assert_eq!(m.write_through(one, 5000, &mut header).unwrap(), 2000);
    assert_eq!(&header[..2], &[Kind::Data as u8, 0]);
    assert_eq!(
        m.write_through(one, 5000, &mut header).unwrap(),
        0,
        "no credit left"
    );
    // Another stream's queued data (or any control frame) goes first.
    let three = m.open(now).unwrap().unwrap();
    m.write(three, &mut Bytes::from_static(b"queued")).unwrap();
    m.handle_input(credit(&[(0, 10_000)]), ORIGIN, now);
    assert_eq!(m.write_through(one, 10, &mut header).unwrap(), 0);
    let _ = transmit(&mut m, now);
    assert_eq!(m.write_through(one, 10, &mut header).unwrap(), 10);
    // Nor does it jump its own queue, or write after the stream's end.
    m.write(one, &mut Bytes::from_static(b"own queue")).unwrap();
    assert_eq!(m.write_through(one, 10, &mut header).unwrap(), 0);
    m.finish(one).unwrap();
    let _ = transmit(&mut m, now);
    assert!(matches!(
        m.write_through(one, 10, &mut header)
            .as_ref()
            .map_err(Error::repr),
        Err(Repr::Finished)
    ));
}

#[test]
fn an_idle_connection_lets_its_frame_buffer_go_and_writes_afresh_after() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    let id = m.open(now).unwrap().unwrap();
    m.write(id, &mut Bytes::from_static(b"hello")).unwrap();
    assert!(!transmit(&mut m, now).is_empty());
    assert!(m.frame_buffer_capacity() > 0, "kept between turns");
    m.release_idle_buffers();
    assert_eq!(m.frame_buffer_capacity(), 0);
    // A turn with nothing to write makes none.
    assert!(transmit(&mut m, now).is_empty());
    assert_eq!(m.frame_buffer_capacity(), 0);
    m.finish(id).unwrap();
    assert_eq!(decode(transmit(&mut m, now)), vec![Input::Fin { stream: 1 }]);
}
