//! The control-frame budget: floods of frames that carry no stream data get
//! a go-away, and honest traffic never comes near it.

use super::*;
use crate::mux::Budgets;

fn control_flood(err: Option<&Error>) -> bool {
    matches!(
        err.map(Error::repr),
        Some(Repr::Protocol(Violation::ControlFlood { .. }))
    )
}

fn go_away_code(m: &mut Multiplexer, now: Instant) -> Option<CloseCode> {
    decode(transmit(m, now)).into_iter().find_map(|f| match f {
        Input::GoAway(g) => Some(g.code),
        _ => None,
    })
}

/// Feeds `frame(n)` for n in 0.. at `spread` apart, reading our answers
/// after each (so no pong queue builds up); the frame that failed, if any.
fn flood(frame: impl Fn(u64) -> Bytes, count: u64, spread: Duration) -> (Multiplexer, Instant, Option<u64>) {
    let start = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), start);
    let mut now = start;
    for n in 0..count {
        now = start + spread * n as u32;
        m.handle_input(frame(n), ORIGIN, now);
        if m.error().is_some() {
            return (m, now, Some(n));
        }
        let _ = transmit(&mut m, now);
    }
    (m, now, None)
}

#[test]
fn a_ping_flood_read_as_fast_as_it_comes_gets_go_away_past_the_burst() {
    let burst = Budgets::default().control_frame_burst;
    let ping = |n: u64| raw(7, 0, 0, &n.to_be_bytes());
    let (mut m, now, failed) = flood(ping, burst + 10, Duration::ZERO);
    assert_eq!(failed, Some(burst), "the burst is allowed, the next ping is not");
    assert!(control_flood(m.error()), "{:?}", m.error());
    assert_eq!(go_away_code(&mut m, now), Some(CloseCode::EXCESSIVE_LOAD));
    // The same pings at 500 a second, below the rate: no end.
    let (m, _, failed) = flood(ping, burst + 10, Duration::from_millis(2));
    assert_eq!(failed, None, "{:?}", m.error());
}

#[test]
fn a_credit_flood_gets_go_away_past_the_burst() {
    let burst = Budgets::default().control_frame_burst;
    // Connection credit of one byte at a time, a hundred entries a frame.
    let frame = |_| credit(&[(0, 1); 100]);
    let (mut m, now, failed) = flood(frame, burst / 100 + 1, Duration::ZERO);
    assert_eq!(failed, Some(burst / 100));
    assert!(control_flood(m.error()), "{:?}", m.error());
    assert_eq!(go_away_code(&mut m, now), Some(CloseCode::EXCESSIVE_LOAD));
}

#[test]
fn a_stream_credit_flood_gets_go_away_past_the_burst() {
    let burst = Budgets::default().control_frame_burst;
    // Stream credit going up by one each time: each frame valid.
    let frame = |n: u64| raw(6, 0, 0, &(5 + n as u32).to_be_bytes());
    let (m, _, failed) = flood(frame, burst + 1, Duration::ZERO);
    assert_eq!(failed, Some(burst));
    assert!(control_flood(m.error()), "{:?}", m.error());
}

#[test]
fn the_budget_is_configurable() {
    let mut p = params(Role::Acceptor);
    p.budgets.control_frame_burst = 10;
    let now = Instant::now();
    let mut m = Multiplexer::new(p, now);
    for n in 0..10u64 {
        m.handle_input(raw(7, 0, 0, &n.to_be_bytes()), ORIGIN, now);
        let _ = transmit(&mut m, now);
    }
    assert!(m.error().is_none());
    m.handle_input(raw(7, 0, 0, &11u64.to_be_bytes()), ORIGIN, now);
    match m.error().map(Error::repr) {
        Some(Repr::Protocol(Violation::ControlFlood { frames, .. })) => assert_eq!(*frames, 11),
        other => panic!("{other:?}"),
    }
}

#[test]
fn data_earns_the_credit_it_needs() {
    // A small burst, so that the credit of a long transfer could not fit
    // in it: what the data earns must pay for it.
    let mut d = params(Role::Dialer);
    let mut a = params(Role::Acceptor);
    d.budgets.control_frame_burst = 4;
    a.budgets.control_frame_burst = 4;
    let mut pair = Pair::with(d, a);
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    let chunk = Bytes::from(vec![7u8; 16 * 1024]);
    let mut received = 0usize;
    let mut accepted = None;
    for _ in 0..512 {
        assert_eq!(pair.dialer.write(id, &mut chunk.clone()).unwrap(), chunk.len());
        pair.pump();
        let sid = *accepted.get_or_insert_with(|| pair.acceptor.accept().unwrap().unwrap());
        received += read_all(&mut pair.acceptor, sid).0.len();
        pair.pump();
    }
    assert_eq!(
        received,
        512 * 16 * 1024,
        "8 MiB moved, with credit every half window"
    );
    assert!(pair.acceptor.error().is_none() && pair.dialer.error().is_none());
}

#[test]
fn many_short_streams_earn_their_stream_credit() {
    let mut d = params(Role::Dialer);
    let mut a = params(Role::Acceptor);
    d.budgets.control_frame_burst = 4;
    a.budgets.control_frame_burst = 4;
    let mut pair = Pair::with(d, a);
    for _ in 0..2000 {
        let id = pair.dialer.open(pair.now).unwrap().unwrap();
        pair.dialer
            .write(id, &mut Bytes::from_static(b"request"))
            .unwrap();
        pair.dialer.finish(id).unwrap();
        pair.pump();
        let sid = pair.acceptor.accept().unwrap().unwrap();
        assert_eq!(read_all(&mut pair.acceptor, sid), (b"request".to_vec(), true));
        pair.acceptor
            .write(sid, &mut Bytes::from_static(b"reply"))
            .unwrap();
        pair.acceptor.finish(sid).unwrap();
        pair.acceptor.drop_send(sid);
        pair.acceptor.drop_recv(sid);
        pair.pump();
        assert_eq!(read_all(&mut pair.dialer, id), (b"reply".to_vec(), true));
        pair.dialer.drop_send(id);
        pair.dialer.drop_recv(id);
        pair.pump();
    }
    assert!(pair.acceptor.error().is_none() && pair.dialer.error().is_none());
}
