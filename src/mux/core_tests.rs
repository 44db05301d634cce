//! Deterministic tests of the multiplexer core: no sockets, no clock, no
//! tokio. Two cores exchange frames through `Pair`; hand-made frames test
//! what a hostile peer could send.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use super::*;
use crate::mux::{
    config::Params,
    frame::{raw_frame as raw, Decoder, Input},
};

const WINDOW: u32 = 64 * 1024;

fn params(role: Role) -> Params {
    Params {
        role,
        local_max_streams: 4,
        local_stream_window: WINDOW,
        local_connection_window: 4 * WINDOW,
        peer_max_streams: 4,
        peer_stream_window: WINDOW,
        peer_connection_window: 4 * WINDOW,
        max_stream_window: 16 * u64::from(WINDOW),
        max_connection_window: 64 * u64::from(WINDOW),
        send_buffer: 256 * 1024,
        quantum: 16 * 1024,
        keepalive: Some(Duration::from_secs(10)),
        idle_timeout: Some(Duration::from_secs(30)),
        drain_timeout: Duration::from_secs(5),
    }
}

/// Everything `m` transmits now, as bytes.
fn transmit(m: &mut Multiplexer, now: Instant) -> Bytes {
    let mut out = Vec::new();
    while m.poll_transmit(now, &mut out, usize::MAX) > 0 {}
    let mut all = BytesMut::new();
    for b in out {
        all.extend_from_slice(&b);
    }
    all.freeze()
}

/// Decodes bytes into inputs (data pieces merged per frame for readability).
fn decode(mut bytes: Bytes) -> Vec<Input> {
    let mut d = Decoder::default();
    let mut out = Vec::new();
    while let Some(input) = d.next(&mut bytes).expect("we send valid frames") {
        out.push(input);
    }
    out
}

fn events(m: &mut Multiplexer) -> Vec<Event> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

struct Pair {
    dialer: Multiplexer,
    acceptor: Multiplexer,
    now: Instant,
}

impl Pair {
    fn new() -> Self {
        Self::with(params(Role::Dialer), params(Role::Acceptor))
    }

    fn with(d: Params, a: Params) -> Self {
        let now = Instant::now();
        let mut pair = Pair {
            dialer: Multiplexer::new(d, now),
            acceptor: Multiplexer::new(a, now),
            now,
        };
        // Let the first pings be answered, as a connection would.
        pair.pump();
        pair
    }

    /// Moves frames both ways until both sides are quiet.
    fn pump(&mut self) {
        for _ in 0..100 {
            let to_acceptor = transmit(&mut self.dialer, self.now);
            let to_dialer = transmit(&mut self.acceptor, self.now);
            if to_acceptor.is_empty() && to_dialer.is_empty() {
                return;
            }
            self.acceptor.handle_input(to_acceptor, self.now);
            self.dialer.handle_input(to_dialer, self.now);
        }
        panic!("the cores never went quiet");
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
    }
}

fn read_all(m: &mut Multiplexer, id: u32) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    loop {
        match m.read(id, usize::MAX).unwrap() {
            ReadOutcome::Data(b) => data.extend_from_slice(&b),
            ReadOutcome::Fin => return (data, true),
            ReadOutcome::Blocked => return (data, false),
        }
    }
}

fn credit(entries: &[(u32, u32)]) -> Bytes {
    let mut p = BytesMut::new();
    for &(id, inc) in entries {
        p.put_u32(id);
        p.put_u32(inc);
    }
    raw(5, 0, 0, &p)
}

/// An acceptor core fed `frames` from a hand-made dialer; its error.
fn acceptor_fed(frames: &[Bytes]) -> (Multiplexer, Option<Error>) {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    for f in frames {
        m.handle_input(f.clone(), now);
    }
    let err = m.error().cloned();
    (m, err)
}

fn violation(frames: &[Bytes]) -> Violation {
    match acceptor_fed(frames).1 {
        Some(Error::Protocol(v)) => v,
        other => panic!("expected a violation, got {other:?}"),
    }
}

// ------------------------------------------------------------ frame types

#[test]
fn open_write_close_is_one_frame() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Dialer), now);
    let _ = transmit(&mut m, now); // the first ping
    let id = m.open(now).unwrap().unwrap();
    m.write(id, Bytes::from_static(b"hello")).unwrap();
    m.finish(id).unwrap();
    let frames = decode(transmit(&mut m, now));
    assert_eq!(
        frames,
        vec![
            Input::Open { stream: 1 },
            Input::Data {
                stream: 1,
                data: Bytes::from_static(b"hello")
            },
            Input::Fin { stream: 1 },
        ]
    );
    // One header: OPEN with the FIN flag and the payload.
    let mut again = Multiplexer::new(params(Role::Dialer), now);
    let _ = transmit(&mut again, now);
    let id = again.open(now).unwrap().unwrap();
    again.write(id, Bytes::from_static(b"hello")).unwrap();
    again.finish(id).unwrap();
    let wire = transmit(&mut again, now);
    assert_eq!(wire.len(), 10 + 5);
    assert_eq!(&wire[..2], &[1, FLAG_FIN]);
}

#[test]
fn first_data_goes_out_without_waiting_for_the_peer() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, Bytes::from(vec![1u8; 200_000])).unwrap();
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
    pair.dialer.write(id, Bytes::from_static(b"abc")).unwrap();
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
        pair.dialer.read(1, 10),
        Err(Error::StreamReset {
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
    let ping = transmit(&mut a, now);
    assert!(decode(ping.clone()).contains(&Input::Ping(1)));
    b.handle_input(ping, now);
    let pong = transmit(&mut b, now);
    assert!(decode(pong.clone()).contains(&Input::Pong(1)));
    a.handle_input(pong, now + Duration::from_millis(30));
    assert_eq!(a.rtt(), Some(Duration::from_millis(30)));
    // The next ping is due a keepalive interval later.
    assert_eq!(
        a.poll_timeout(),
        Some(now + Duration::from_secs(30))
            .min(Some(now + Duration::from_millis(30) + Duration::from_secs(10)))
    );
}

#[test]
fn an_unsolicited_pong_is_a_violation() {
    assert_eq!(
        violation(&[raw(8, 0, 0, &7u64.to_be_bytes())]),
        Violation::UnsolicitedPong
    );
}

#[test]
fn go_away_refuses_new_streams_and_drains() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, Bytes::from_static(b"x")).unwrap();
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
    pair.dialer.write(id, Bytes::from_static(b"x")).unwrap();
    pair.pump();
    assert_eq!(pair.acceptor.accept().unwrap(), None);
    assert!(matches!(pair.dialer.read(id, 10), Err(Error::Refused)));
}

// ---------------------------------------------------------- illegal input

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
    m.handle_input(raw(1, FLAG_FIN, 1, b"done"), now);
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
    m.handle_input(raw(2, 0, 1, b"late"), now);
    assert!(matches!(
        m.error(),
        Some(Error::Protocol(Violation::ClosedStream(1)))
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
    m.handle_input(raw(1, 0, 1, b""), now);
    assert!(matches!(
        m.error(),
        Some(Error::Protocol(Violation::StreamReused(1)))
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
    m.handle_input(raw(1, 0, 1, &vec![0; WINDOW as usize]), now);
    m.handle_input(raw(1, 0, 3, &[0; 11]), now);
    assert!(matches!(
        m.error(),
        Some(Error::Protocol(Violation::FlowControl { stream: 0, .. }))
    ));
}

#[test]
fn opening_past_the_limit_sends_go_away_with_the_code() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    for id in [1u32, 3, 5, 7, 9] {
        m.handle_input(raw(1, 0, id, b""), now);
    }
    assert!(matches!(
        m.error(),
        Some(Error::Protocol(Violation::StreamLimit { id: 9, allowed: 4 }))
    ));
    let frames = decode(transmit(&mut m, now));
    assert!(
        frames.iter().any(|f| matches!(
            f,
            Input::GoAway { last: 7, code, .. } if *code == CloseCode::STREAM_LIMIT_ERROR
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
    m.handle_input(raw(6, 0, 0, &2u32.to_be_bytes()), now);
    assert!(matches!(
        m.error(),
        Some(Error::Protocol(Violation::BadStreamCredit { had: 4, got: 2 }))
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
            m.handle_input(raw(kind, flags, stream, &payload), now);
            let _ = m.accept();
            let _ = transmit(&mut m, now);
            let _ = events(&mut m);
        }
        prop_assert!(m.buffered() <= 4 * u64::from(WINDOW));
    });
}

// ----------------------------------------------------------- flow control

#[test]
fn credit_is_batched_for_many_streams_in_one_frame() {
    let mut pair = Pair::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = pair.dialer.open(pair.now).unwrap().unwrap();
        pair.dialer
            .write(id, Bytes::from(vec![0u8; WINDOW as usize]))
            .unwrap();
        ids.push(id);
    }
    pair.pump();
    for _ in 0..3 {
        pair.acceptor.accept().unwrap().unwrap();
    }
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
            Input::Credit { entries } => Some(entries.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(credits.len(), 1, "{frames:?}");
    let streams: Vec<u32> = credits[0].iter().map(|e| e.0).filter(|&id| id != 0).collect();
    assert_eq!(streams, ids);
}

#[test]
fn windows_grow_when_used_up_within_two_round_trips() {
    // An acceptor that measured an RTT of 10 ms with its first ping.
    let measured = |t0: Instant| {
        let mut a = Multiplexer::new(params(Role::Acceptor), t0);
        let mut d = Multiplexer::new(params(Role::Dialer), t0);
        d.handle_input(transmit(&mut a, t0), t0);
        a.handle_input(transmit(&mut d, t0), t0 + Duration::from_millis(10));
        assert_eq!(a.rtt(), Some(Duration::from_millis(10)));
        a
    };
    let t0 = Instant::now();
    let mut a = measured(t0);

    // Fast reader: a window consumed within 2 RTT doubles.
    let t = t0 + Duration::from_millis(12);
    a.handle_input(raw(1, 0, 1, &vec![0; WINDOW as usize]), t);
    a.accept().unwrap();
    read_all(&mut a, 1);
    let _ = transmit(&mut a, t);
    assert_eq!(a.stream_window(1), Some(2 * u64::from(WINDOW)));

    // Slow reader: a window consumed over a second stays the same.
    let mut slow = measured(t0);
    let later = t0 + Duration::from_millis(12);
    slow.handle_input(raw(1, 0, 1, &vec![0; WINDOW as usize]), later);
    slow.accept().unwrap();
    read_all(&mut slow, 1);
    let _ = transmit(&mut slow, later + Duration::from_secs(1));
    assert_eq!(slow.stream_window(1), Some(u64::from(WINDOW)));
}

#[test]
fn a_sender_stops_at_the_credit_and_resumes_when_it_comes() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer
        .write(id, Bytes::from(vec![5u8; 3 * WINDOW as usize]))
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

// -------------------------------------------------------- stream limits

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
    assert_eq!(pair.acceptor.peer_allowed, 4);
    read_all(&mut pair.acceptor, id);
    assert_eq!(pair.acceptor.peer_allowed, 5);
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
        pair.dialer.write(id, Bytes::from(vec![0u8; 48 * 1024])).unwrap();
    }
    // A credit owed by the dialer goes before any data.
    pair.acceptor.open(pair.now).unwrap().unwrap();
    let id2 = 2;
    pair.acceptor
        .write(id2, Bytes::from(vec![0u8; WINDOW as usize]))
        .unwrap();
    pair.pump();
    pair.dialer.accept().unwrap();
    read_all(&mut pair.dialer, id2);
    pair.dialer.write(ids[0], Bytes::from(vec![0u8; 1])).unwrap();
    let frames = decode(transmit(&mut pair.dialer, pair.now));
    let order: Vec<&Input> = frames.iter().filter(|f| !matches!(f, Input::Ping(_))).collect();
    assert!(matches!(order[0], Input::Credit { .. }), "{order:?}");

    // Fresh pair: three streams, one quantum per turn, in rotation.
    let mut pair = Pair::new();
    let ids: Vec<u32> = (0..3)
        .map(|_| pair.dialer.open(pair.now).unwrap().unwrap())
        .collect();
    for &id in &ids {
        pair.dialer.write(id, Bytes::from(vec![0u8; 48 * 1024])).unwrap();
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

// ------------------------------------------------------------- timeouts

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
    assert!(matches!(pair.acceptor.error(), Some(Error::Closed)));
    assert!(pair.acceptor.poll_close().is_some());
}

#[test]
fn tiny_pieces_are_copied_together_not_kept_as_slices() {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    m.handle_input(raw(1, 0, 1, b"a"), now);
    for _ in 0..99 {
        m.handle_input(raw(2, 0, 1, b"b"), now);
    }
    m.accept().unwrap();
    // One piece of 100 bytes: the slices of the records were not kept.
    let ReadOutcome::Data(all) = m.read(1, usize::MAX).unwrap() else {
        panic!()
    };
    assert_eq!(all.len(), 100);
    // A large piece stays zero-copy, after the small ones before it.
    let big = Bytes::from(vec![7u8; 20_000]);
    m.handle_input(raw(2, 0, 1, b"c"), now);
    let mut frame = BytesMut::new();
    frame.put_u8(2);
    frame.put_u8(0);
    frame.put_u32(1);
    frame.put_u32(big.len() as u32);
    frame.extend_from_slice(&big);
    m.handle_input(frame.freeze(), now);
    assert_eq!(
        m.read(1, usize::MAX).unwrap(),
        ReadOutcome::Data(Bytes::from_static(b"c"))
    );
    assert_eq!(m.read(1, usize::MAX).unwrap(), ReadOutcome::Data(big));
}

#[test]
fn arriving_data_refreshes_the_round_trip_measurement() {
    let mut pair = Pair::new();
    pair.advance(Duration::from_millis(250));
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, Bytes::from_static(b"data")).unwrap();
    let wire = transmit(&mut pair.dialer, pair.now);
    pair.acceptor.handle_input(wire, pair.now);
    // The last ping was 250 ms ago: the receiver pings again now, well
    // before the 10 s keepalive.
    assert!(pair.acceptor.poll_timeout().unwrap() <= pair.now);
    let frames = decode(transmit(&mut pair.acceptor, pair.now));
    assert!(frames.iter().any(|f| matches!(f, Input::Ping(_))), "{frames:?}");
    // A loaded round trip counts at once for tuning, smoothed or not.
    pair.dialer
        .handle_input(raw(7, 0, 0, &2u64.to_be_bytes()), pair.now);
    let pong = transmit(&mut pair.dialer, pair.now);
    pair.acceptor
        .handle_input(pong, pair.now + Duration::from_millis(40));
    assert_eq!(pair.acceptor.tuning_rtt, Some(Duration::from_millis(40)));
    assert!(pair.acceptor.rtt().unwrap() < Duration::from_millis(40));
}

#[test]
fn a_reset_stream_dropped_afterwards_sends_one_reset() {
    let mut pair = Pair::new();
    let id = pair.dialer.open(pair.now).unwrap().unwrap();
    pair.dialer.write(id, Bytes::from_static(b"x")).unwrap();
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
    pair.acceptor.handle_input(wire, pair.now);
    // The acceptor echoes; both tables end empty once its handles go.
    pair.pump();
    pair.acceptor.drop_recv(id);
    pair.acceptor.drop_send(id);
    pair.pump();
    assert_eq!(pair.dialer.open_streams(), 0);
    assert_eq!(pair.acceptor.open_streams(), 0);
}
