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
    pair.pump();
    assert!(events(&mut pair.dialer).contains(&Event::StreamCredit));
    assert!(pair.dialer.open(pair.now).unwrap().is_some());
    assert_eq!(pair.dialer.open(pair.now).unwrap(), None);
}

#[test]
fn a_handler_holding_a_finished_stream_releases_its_slot_when_done() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.finish(id).unwrap();
    pair.pump();
    let id = pair.acceptor.accept().unwrap().unwrap();
    // Still reading? The slot is held.
    pair.acceptor.finish(id).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.peer_allowed(), 4);
    read_all(&mut pair.acceptor, id);
    assert_eq!(pair.acceptor.peer_allowed(), 5);
    // The table keeps the entry while a handle holds it, then lets go.
    assert_eq!(pair.acceptor.open_streams(), 1);
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    assert_eq!(pair.acceptor.open_streams(), 0);
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
