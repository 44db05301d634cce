//! The scheduler's promises, counted in bytes: equal shares for equal
//! demand, a newcomer served at once, every owed frame sent on the next
//! poll, and no stream held up by another's slow reader.

use super::*;
use crate::mux::frame::Reset;

/// Data bytes per stream, in the order the frames left.
fn data_frames(wire: Bytes) -> Vec<(u32, usize)> {
    decode(wire)
        .into_iter()
        .filter_map(|i| match i {
            Input::Data { stream, data } => Some((stream, data.len())),
            _ => None,
        })
        .collect()
}

/// What one poll of `m` with `budget` transmits.
fn poll_once(m: &mut Multiplexer, now: Instant, budget: usize) -> Bytes {
    let mut out = Vec::new();
    m.poll_transmit(now, &mut out, budget);
    let mut all = BytesMut::new();
    for b in out {
        all.extend_from_slice(&b);
    }
    all.freeze()
}

/// The data frames `m` sends, polled 16 KiB at a time (as a driver with a
/// busy transport would) until it has nothing left, `after` running after
/// each poll.
fn drain(m: &mut Multiplexer, now: Instant, mut after: impl FnMut(&mut Multiplexer)) -> Vec<(u32, usize)> {
    let mut frames = Vec::new();
    loop {
        let wire = poll_once(m, now, 16 * 1024);
        if wire.is_empty() {
            return frames;
        }
        frames.extend(data_frames(wire));
        after(m);
    }
}

/// Params for `n` streams that flow control never stops: the scheduler
/// alone decides who goes.
fn open_params(role: Role, n: u32, quantum: usize) -> Params {
    let mut p = Params::small(role, n);
    p.peer_stream_window = 16 << 20;
    p.peer_connection_window = MAX_WINDOW as u32;
    p.send_buffer = 1 << 20;
    p.quantum = quantum;
    p
}

/// A dialer core with `streams` streams of 1 MiB queued each, polled a
/// quantum at a time `polls` times: busy streams, past their first turns.
fn busy(streams: usize, quantum: usize, polls: usize) -> (Multiplexer, Instant, Bytes) {
    let now = Instant::now();
    let mut m = Multiplexer::new(open_params(Role::Dialer, 100, quantum), now);
    let payload = Bytes::from(vec![7u8; 1 << 20]);
    for _ in 0..streams {
        let id = m.open(now).unwrap().unwrap();
        m.write(id, &mut payload.clone()).unwrap();
    }
    for _ in 0..polls {
        assert!(!poll_once(&mut m, now, quantum).is_empty());
    }
    (m, now, payload)
}

/// The largest difference from the mean, as a share of it, of any
/// stream's bytes over the windows of `window` bytes that start at a frame
/// in the first `starts` frames (and are whole).
fn worst_window(frames: &[(u32, usize)], ids: &[u32], window: usize, starts: usize) -> (f64, usize) {
    let index = |id: u32| ids.iter().position(|&i| i == id).unwrap();
    let mut sent = vec![0usize; ids.len()];
    let (mut end, mut in_window, mut worst, mut windows) = (0, 0, 0.0f64, 0);
    let mean = window / ids.len();
    for start in 0..starts.min(frames.len()) {
        while end < frames.len() && in_window + frames[end].1 <= window {
            sent[index(frames[end].0)] += frames[end].1;
            in_window += frames[end].1;
            end += 1;
        }
        if in_window < window {
            break;
        }
        let off = sent.iter().map(|&n| n.abs_diff(mean) as f64 / mean as f64);
        worst = off.fold(worst, f64::max);
        windows += 1;
        sent[index(frames[start].0)] -= frames[start].1;
        in_window -= frames[start].1;
    }
    (worst, windows)
}

/// 100 streams with the same demand: over every window of 1 MiB that
/// leaves, each stream's bytes are within 10% of the mean.
///
/// The quantum is 1 KiB here, so that a window holds about ten turns of
/// each stream (with the 16 KiB of a full record it holds 64 turns, fewer
/// than the streams, and no window could be fair at this resolution); the
/// order of turns is the same whatever the quantum.
#[test]
fn equal_demand_gets_equal_shares_in_every_mebibyte() {
    const STREAMS: usize = 100;
    const QUANTUM: usize = 1024;
    const WINDOW: usize = 1 << 20;
    let now = Instant::now();
    let mut m = Multiplexer::new(open_params(Role::Dialer, STREAMS as u32, QUANTUM), now);
    let payload = Bytes::from(vec![7u8; 256 * 1024]);
    let ids: Vec<u32> = (0..STREAMS).map(|_| m.open(now).unwrap().unwrap()).collect();
    for &id in &ids {
        assert_eq!(m.write(id, &mut payload.clone()).unwrap(), payload.len());
    }
    let frames = drain(&mut m, now, |_| {});
    let total: usize = frames.iter().map(|f| f.1).sum();
    assert_eq!(total, STREAMS * payload.len());
    // Every window of 1 MiB that starts at a frame, while all streams have
    // data left.
    let (worst, windows) = worst_window(&frames, &ids, WINDOW, frames.len());
    assert!(
        worst <= 0.10,
        "a stream's share of a window off by {:.1}%",
        worst * 100.0
    );
    assert!(windows > 20_000, "{windows} windows");
}

/// A stream opened while 99 others are busy has its first quantum among
/// the next two records that leave, and then waits its turn like them.
#[test]
fn a_newcomer_is_served_within_two_records() {
    const QUANTUM: usize = 16 * 1024;
    // The 99 have been through their first turns and more.
    let (mut m, now, payload) = busy(99, QUANTUM, 150);
    let newcomer = m.open(now).unwrap().unwrap();
    m.write(newcomer, &mut payload.clone()).unwrap();
    let mut frames = Vec::new();
    while frames.len() < 2 + 100 {
        frames.extend(data_frames(poll_once(&mut m, now, QUANTUM)));
    }
    assert!(
        frames[..2].iter().any(|f| f.0 == newcomer),
        "the newcomer's first data: {:?}",
        &frames[..2]
    );
    let first = frames.iter().position(|f| f.0 == newcomer).unwrap();
    // Behind the others after its turn: one more turn in the next 100.
    let again = frames[first + 1..first + 101]
        .iter()
        .filter(|f| f.0 == newcomer)
        .count();
    assert_eq!(again, 1, "{:?}", &frames[first + 1..first + 101]);
}

/// A stream that sends a little, goes quiet and comes back does not jump
/// the queue every time: until its turn among the old streams comes, it
/// is still listed, and waits there.
#[test]
fn a_stream_cannot_stay_new_by_pausing() {
    const QUANTUM: usize = 16 * 1024;
    let (mut m, now, payload) = busy(50, QUANTUM, 60);
    let gamer = m.open(now).unwrap().unwrap();
    m.write(gamer, &mut Bytes::from_static(b"a little")).unwrap();
    let frames = data_frames(poll_once(&mut m, now, QUANTUM));
    assert_eq!(frames.first().map(|f| f.0), Some(gamer), "{frames:?}");
    // Back at once: it waits behind the 50.
    m.write(gamer, &mut payload.clone()).unwrap();
    let mut frames = Vec::new();
    while frames.len() < 50 {
        frames.extend(data_frames(poll_once(&mut m, now, QUANTUM)));
    }
    let at = frames.iter().position(|f| f.0 == gamer);
    assert!(at.is_none_or(|at| at >= 49), "served at {at:?} of {frames:?}");
}

/// The frames of the next poll, which `m` said it had (and the bytes).
fn owed_frames(m: &mut Multiplexer, now: Instant) -> (Vec<Input>, Bytes) {
    assert!(
        m.has_output(),
        "the core owes a frame: a driver must be woken for it"
    );
    let wire = poll_once(m, now, usize::MAX);
    assert!(!m.has_output());
    (decode(wire.clone()), wire)
}

fn only_frames(m: &mut Multiplexer, now: Instant) -> Vec<Input> {
    owed_frames(m, now).0
}

/// Each frame the core owes leaves on the next poll, with nothing else to
/// send: connection and stream credit after a read, stream credit after a
/// stream ends (the last one too: a pool at the limit waits for it), a
/// pong, a reset and a go-away.
#[test]
fn every_owed_frame_leaves_on_the_next_poll() {
    const STREAMS: u32 = 100;
    let mut pair = Pair::with(
        Params::small(Role::Dialer, STREAMS),
        Params::small(Role::Acceptor, STREAMS),
    );
    let now = pair.now;
    let ids: Vec<u32> = (0..STREAMS)
        .map(|_| {
            let id = pair.dialer.open(now).unwrap().unwrap();
            pair.dialer
                .write(id, &mut Bytes::from_static(b"request"))
                .unwrap();
            pair.dialer.finish(id).unwrap();
            id
        })
        .collect();
    let wire = transmit(&mut pair.dialer, now);
    pair.acceptor.handle_input(wire, ORIGIN, now);
    let _ = transmit(&mut pair.acceptor, now);
    // Each stream read and answered, one at a time: its slot comes back
    // with the answer's end, the last one's too.
    for (n, &id) in ids.iter().enumerate() {
        assert_eq!(pair.acceptor.accept().unwrap(), Some(id));
        assert_eq!(read_all(&mut pair.acceptor, id), (b"request".to_vec(), true));
        pair.acceptor.finish(id).unwrap();
        let (frames, wire) = owed_frames(&mut pair.acceptor, now);
        assert!(frames.contains(&Input::Fin { stream: id }), "{frames:?}");
        pair.acceptor.drop_send(id);
        pair.acceptor.drop_recv(id);
        assert!(!pair.acceptor.has_output());
        pair.dialer.handle_input(wire, ORIGIN, now);
        let total = STREAMS + n as u32 + 1;
        assert!(
            frames.contains(&Input::StreamCredit(crate::mux::frame::StreamCredit { total })),
            "after stream {id}: {frames:?}"
        );
    }

    // A slot given back by a drop alone, with nothing else to send.
    let id = pair.dialer.open(now).unwrap().unwrap();
    pair.dialer.write(id, &mut Bytes::from_static(b"unread")).unwrap();
    pair.dialer.finish(id).unwrap();
    pair.acceptor
        .handle_input(transmit(&mut pair.dialer, now), ORIGIN, now);
    assert_eq!(pair.acceptor.accept().unwrap(), Some(id));
    pair.acceptor.finish(id).unwrap();
    let _ = transmit(&mut pair.acceptor, now);
    assert!(!pair.acceptor.has_output());
    pair.acceptor.drop_send(id);
    pair.acceptor.drop_recv(id);
    let total = 2 * STREAMS + 1;
    let frames = only_frames(&mut pair.acceptor, now);
    assert!(
        frames.contains(&Input::StreamCredit(crate::mux::frame::StreamCredit { total })),
        "{frames:?}"
    );

    // Credit after a read, of the stream and the connection.
    let id = pair.dialer.open(now).unwrap().unwrap();
    pair.dialer
        .write(id, &mut Bytes::from(vec![1u8; WINDOW as usize]))
        .unwrap();
    pair.acceptor
        .handle_input(transmit(&mut pair.dialer, now), ORIGIN, now);
    let _ = transmit(&mut pair.acceptor, now);
    pair.acceptor.accept().unwrap();
    read_all(&mut pair.acceptor, id);
    let frames = only_frames(&mut pair.acceptor, now);
    let Some(Input::Credit(credit)) = frames.iter().find(|f| matches!(f, Input::Credit(_))) else {
        panic!("no credit after the read: {frames:?}");
    };
    assert!(credit.entries.iter().any(|e| e.0 == id), "{credit:?}");

    // A pong.
    let mut ping = BytesMut::new();
    Ping(77).encode(&mut ping);
    pair.acceptor.handle_input(ping.freeze(), ORIGIN, now);
    assert!(only_frames(&mut pair.acceptor, now).contains(&Input::Pong(Pong(77))));

    // A reset.
    pair.acceptor.reset(id, CloseCode::CANCEL);
    let frames = only_frames(&mut pair.acceptor, now);
    assert!(
        frames.contains(&Input::Reset(Reset {
            stream: id,
            code: CloseCode::CANCEL
        })),
        "{frames:?}"
    );

    // A go-away.
    pair.acceptor.go_away(now);
    let frames = only_frames(&mut pair.acceptor, now);
    assert!(frames.iter().any(|f| matches!(f, Input::GoAway(_))), "{frames:?}");
}

/// A stream whose reader does not read holds only its own window: the
/// other stream's data keeps flowing to the end.
#[test]
fn a_slow_reader_does_not_hold_up_another_stream() {
    let mut pair = Pair::new();
    let now = pair.now;
    let slow = pair.dialer.open(now).unwrap().unwrap();
    let fast = pair.dialer.open(now).unwrap().unwrap();
    let mut slow_data = Bytes::from(vec![1u8; 1 << 20]);
    let mut fast_data = Bytes::from(vec![2u8; 1 << 20]);
    let mut received = 0;
    for _ in 0..1000 {
        for (id, data) in [(slow, &mut slow_data), (fast, &mut fast_data)] {
            if !data.is_empty() {
                pair.dialer.write(id, data).unwrap();
                if data.is_empty() {
                    pair.dialer.finish(id).unwrap();
                }
            }
        }
        let to_acceptor = transmit(&mut pair.dialer, now);
        pair.acceptor.handle_input(to_acceptor, ORIGIN, now);
        while let Ok(Some(_)) = pair.acceptor.accept() {}
        // Only the fast stream is read.
        let (data, fin) = read_all(&mut pair.acceptor, fast);
        received += data.len();
        let to_dialer = transmit(&mut pair.acceptor, now);
        pair.dialer.handle_input(to_dialer, ORIGIN, now);
        if fin {
            break;
        }
    }
    assert_eq!(received, 1 << 20);
    // The slow stream sent its window and waits.
    assert_eq!(pair.acceptor.stream_window(slow), Some(u64::from(WINDOW)));
}

/// Writers that write whenever they are woken, more streams than the
/// connection's send buffer holds full buffers of: every window of 1 MiB
/// is still shared within 10% (the quantum is 1 KiB, as above). Woken
/// writers must not take the room freed by one stream's turn ahead of the
/// writers already waiting for room in the connection's buffer.
#[test]
fn writers_share_a_full_connection_send_buffer_fairly() {
    const STREAMS: usize = 100;
    const WINDOW: usize = 1 << 20;
    // 16 MiB over 100 streams of 256 KiB (the defaults), and 2 MiB.
    for connection_send_buffer in [16 << 20, 2 << 20] {
        let now = Instant::now();
        let mut p = open_params(Role::Dialer, STREAMS as u32, 1024);
        p.send_buffer = 256 * 1024;
        p.connection_send_buffer = connection_send_buffer;
        let mut m = Multiplexer::new(p, now);
        let ids: Vec<u32> = (0..STREAMS).map(|_| m.open(now).unwrap().unwrap()).collect();
        let mut left = vec![2usize << 20; STREAMS];
        let chunk = Bytes::from(vec![7u8; 64 * 1024]);
        let mut write = |m: &mut Multiplexer, i: usize| {
            while left[i] > 0 {
                let mut piece = chunk.slice(..chunk.len().min(left[i]));
                let n = m.write(ids[i], &mut piece).unwrap();
                left[i] -= n;
                if n == 0 {
                    break;
                }
            }
        };
        for i in 0..STREAMS {
            write(&mut m, i);
        }
        let frames = drain(&mut m, now, |m| {
            for event in events(m) {
                if let Event::Writable(id) = event {
                    write(m, ids.iter().position(|&i| i == id).unwrap());
                }
            }
        });
        // The windows of the first half, while every stream has data left.
        let (worst, _) = worst_window(&frames, &ids, WINDOW, frames.len() / 2);
        assert!(
            worst <= 0.10,
            "a stream's share of a window off by {:.0}% with {connection_send_buffer} bytes to share",
            worst * 100.0
        );
    }
}
