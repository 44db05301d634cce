//! The policy decided without a socket, a clock or a runtime: first the
//! arbiter alone, then the arbiter with the wire that obeys it and two real
//! cores, over fake transports that count writes and flushes and push back
//! on demand.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::Bytes;
use tokio::io::AsyncWrite;

use super::*;
use crate::{
    handshake::Role,
    mux::{
        core::{Multiplexer, ReadOutcome},
        params::Params,
        shared::Shared,
        wire::Wire,
    },
    record::{plaintext, ChannelReader},
};

fn lone() -> Waiting {
    Waiting {
        readers: 1,
        others: false,
        live: true,
    }
}

#[test]
fn a_lone_waiting_reader_is_lent_the_read_and_anyone_else_waiting_takes_it_back() {
    let mut arbiter = Arbiter::default();
    assert_eq!(arbiter.holder(), None);
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    assert_eq!(arbiter.holder(), Some(1));
    // Asking again (the same stream polled again) keeps it lent.
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    // A second reader: the driver reads for both.
    let two = Waiting { readers: 2, ..lone() };
    assert_eq!(arbiter.wait_read(3, two), Lending::TakenBack);
    assert_eq!(arbiter.holder(), None);
    assert_eq!(arbiter.wait_read(3, two), Lending::Driver);
    // A writer, an opener or an acceptor waiting: the driver reads.
    assert_eq!(arbiter.wait_read(1, lone()), Lending::Lent);
    let writer_too = Waiting {
        others: true,
        ..lone()
    };
    assert_eq!(arbiter.wait_read(1, writer_too), Lending::TakenBack);
    // No driver, or a failed connection: nothing to lend.
    let dead = Waiting {
        live: false,
        ..lone()
    };
    assert_eq!(arbiter.wait_read(1, dead), Lending::Driver);
    assert_eq!(arbiter.holder(), None);
}

#[test]
fn the_read_goes_back_when_its_stream_has_its_data_and_only_then() {
    let mut arbiter = Arbiter::default();
    assert_eq!(arbiter.wait_read(5, lone()), Lending::Lent);
    // Another stream's data changes nothing.
    assert_eq!(arbiter.stop_waiting(7), Lending::Driver);
    assert_eq!(arbiter.holder(), Some(5));
    assert_eq!(arbiter.stop_waiting(5), Lending::TakenBack);
    assert_eq!(arbiter.holder(), None);
    // A timer of the driver's takes it back as well.
    assert_eq!(arbiter.wait_read(5, lone()), Lending::Lent);
    assert_eq!(arbiter.take_back(), Lending::TakenBack);
    assert_eq!(arbiter.take_back(), Lending::Driver);
}

fn output(woken_readers: usize) -> Output {
    Output {
        queued: true,
        flush: true,
        woken_readers,
        pushed_back: false,
        failed: false,
    }
}

#[test]
fn a_writer_holds_its_flush_for_readers_woken_ahead_and_the_driver_yields_once_for_them() {
    let mut arbiter = Arbiter::default();
    // Nobody woken ahead: write and flush.
    let plan = arbiter.task_write(output(0));
    assert!(plan.write && plan.flush);
    // Two readers woken ahead: write, hold the flush.
    let plan = arbiter.task_write(output(2));
    assert!(plan.write && !plan.flush);
    arbiter.wrote(100);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.task_done(plan);
    // The driver's turn yields once for them, then flushes.
    assert!(!arbiter.driver_may_flush());
    assert!(arbiter.driver_may_flush());
    // A flush that was never held does not make the driver wait.
    arbiter.flushed();
    assert!(arbiter.driver_may_flush());
}

#[test]
fn a_task_flushes_what_it_left_unflushed_at_once_and_an_unflushed_write_holds_nobody_up() {
    let mut arbiter = Arbiter::default();
    // A write that asked for no flush (a stream's data, its end to come)
    // holds no flush: the driver's turn may flush it.
    let plan = arbiter.task_write(Output {
        flush: false,
        ..output(0)
    });
    assert!(plan.write && !plan.flush);
    arbiter.wrote(100);
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush());
    // The task's flush, with nothing more queued, goes from the task.
    let plan = arbiter.task_write(Output {
        queued: false,
        ..output(0)
    });
    assert!(plan.write && plan.flush);
    assert_eq!(plan.batches, 0);
}

#[test]
fn only_writers_that_held_bytes_count_towards_the_sixteen() {
    let mut arbiter = Arbiter::default();
    arbiter.spent(DIRECT_WRITE_BUDGET);
    // Sixteen tasks past their share: the driver writes for them, and
    // none of them held anything.
    for _ in 0..FLUSH_HOLD_WRITERS {
        let plan = arbiter.task_write(output(5));
        assert!(!plan.write);
        arbiter.task_done(plan);
    }
    assert!(arbiter.driver_may_flush(), "nothing held: no yield");
    arbiter.driver_turn();
    let plan = arbiter.task_write(output(5));
    assert!(plan.write && !plan.flush, "the next writer may still hold");
}

#[test]
fn a_held_flush_that_another_writer_flushed_makes_the_driver_wait_for_nothing() {
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(2));
    arbiter.wrote(100);
    arbiter.task_done(plan);
    // The last reader's task writes and flushes for all.
    let plan = arbiter.task_write(output(0));
    assert!(plan.flush);
    arbiter.wrote(100);
    arbiter.flushed();
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush(), "nothing is held any more");
}

#[test]
fn at_most_sixteen_writers_hold_a_flush_in_a_row() {
    let mut arbiter = Arbiter::default();
    for writer in 0..FLUSH_HOLD_WRITERS {
        let plan = arbiter.task_write(output(100));
        assert!(plan.write && !plan.flush, "writer {writer} holds");
        arbiter.wrote(10);
        arbiter.task_done(plan);
    }
    let plan = arbiter.task_write(output(100));
    assert!(plan.write && plan.flush, "the seventeenth flushes for all");
    arbiter.flushed();
    // And the count starts again.
    assert!(!arbiter.task_write(output(100)).flush);
}

#[test]
fn a_held_flush_never_holds_back_a_records_worth() {
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(3));
    arbiter.wrote(FLUSH_HOLD_LIMIT - 1);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.wrote(1);
    assert!(arbiter.flush_past_hold(plan));
    // Nor does the driver wait on so much.
    arbiter.task_done(plan);
    assert!(arbiter.driver_may_flush());
}

#[test]
fn no_task_writes_past_its_share_until_the_drivers_turn_so_no_writer_starves() {
    let mut arbiter = Arbiter::default();
    assert!(arbiter.may_write_through(false, 2));
    arbiter.spent(DIRECT_WRITE_BUDGET - 1);
    assert!(arbiter.task_write(output(0)).write);
    arbiter.spent(1);
    // Spent: output queues for the driver, which serves streams in turn.
    assert!(!arbiter.task_write(output(0)).write);
    assert!(!arbiter.may_write_through(false, 2));
    // Alone on the connection, a stream shares with nobody.
    assert!(arbiter.may_write_through(false, 1));
    // Nothing jumps what the transport pushed back, alone or not.
    assert!(!arbiter.may_write_through(true, 1));
    assert!(
        !Arbiter::default()
            .task_write(Output {
                pushed_back: true,
                ..output(0)
            })
            .write
    );
    arbiter.driver_turn();
    assert!(arbiter.may_write_through(false, 2));
    assert!(arbiter.task_write(output(0)).write);
}

#[test]
fn the_shares_are_a_records_worth_held_and_64_kib_written_between_turns() {
    // A reply of 10,000 bytes is still held for the readers ahead.
    let mut arbiter = Arbiter::default();
    let plan = arbiter.task_write(output(1));
    arbiter.wrote(10_000);
    assert!(!arbiter.flush_past_hold(plan));
    arbiter.wrote(16 * 1024 - 10_000);
    assert!(arbiter.flush_past_hold(plan));
    // A task writes 60,000 bytes itself and more, up to 64 KiB.
    let mut arbiter = Arbiter::default();
    arbiter.spent(60_000);
    assert!(arbiter.may_write_through(false, 2));
    arbiter.spent(64 * 1024 - 60_000);
    assert!(!arbiter.may_write_through(false, 2));
}

#[test]
fn keepalive_waits_for_the_woken_readers_only_when_it_is_all_that_waits() {
    let mut arbiter = Arbiter::default();
    assert!(!arbiter.defer_keepalive(0, || true));
    assert!(!arbiter.defer_keepalive(2, || false));
    assert!(arbiter.defer_keepalive(2, || true));
    // Deferred once: the driver's next turn flushes.
    assert!(arbiter.driver_may_flush());
    // Bytes waiting for a flush already go now.
    arbiter.wrote(10);
    assert!(!arbiter.defer_keepalive(2, || true));
}

/// A transport's writing half that records what it was given, one entry
/// per write call, and takes at most `room` bytes when set.
#[derive(Clone, Default)]
struct Transport(Arc<Mutex<Log>>);

#[derive(Default)]
struct Log {
    writes: Vec<Vec<u8>>,
    flushes: usize,
    room: Option<usize>,
    waker: Option<Waker>,
}

impl Transport {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.0.lock().expect("not poisoned")
    }

    fn writes(&self) -> usize {
        self.log().writes.len()
    }

    /// Everything written so far, read back as records.
    fn bytes(&self) -> Vec<u8> {
        self.log().writes.concat()
    }

    fn set_room(&self, room: Option<usize>) {
        let waker = {
            let mut log = self.log();
            log.room = room;
            log.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut log = self.log();
        let mut all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        if let Some(room) = log.room {
            if room == 0 {
                log.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
            all.truncate(room);
            log.room = Some(room - all.len());
        }
        let n = all.len();
        log.writes.push(all);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.log().flushes += 1;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

const RECORD: usize = 16 * 1024;

/// One side: its core, its arbiter, its wire over a fake transport.
struct Side {
    core: Multiplexer,
    arbiter: Arbiter,
    wire: Wire,
    transport: Transport,
    /// How much of `transport` the other side has read.
    delivered: usize,
}

impl Side {
    fn new(role: Role, now: Instant) -> Self {
        let transport = Transport::default();
        let (_, writer) = plaintext(Box::new(tokio::io::empty()), Box::new(transport.clone()), RECORD);
        Self {
            core: Multiplexer::new(Params::small(role, 64), now),
            arbiter: Arbiter::default(),
            wire: Wire::new(writer),
            transport,
            delivered: 0,
        }
    }

    /// A task's send, with the driver's waker (the transport's).
    fn send_from_task(&mut self, now: Instant, flush: bool) -> bool {
        let driver = Waker::noop();
        self.wire
            .send_from_task(&mut self.core, &mut self.arbiter, driver, now, flush)
    }

    /// The driver's turn: it may write everything, and flushes unless it
    /// yields for the readers woken ahead.
    fn driver_turn(&mut self, now: Instant) -> bool {
        self.arbiter.driver_turn();
        let flush = self.arbiter.driver_may_flush();
        let mut cx = Context::from_waker(Waker::noop());
        self.wire
            .transmit(&mut self.core, &mut self.arbiter, &mut cx, now, usize::MAX, flush)
            .expect("the fake transport does not fail");
        flush
    }

    /// What `from` wrote since the last delivery, opened as records and
    /// handed to this side's core.
    fn receive(&mut self, from: &mut Side, now: Instant) {
        let bytes = from.transport.bytes();
        let fresh = bytes[from.delivered..].to_vec();
        from.delivered = bytes.len();
        let (mut reader, _) = plaintext(
            Box::new(std::io::Cursor::new(fresh)),
            Box::new(tokio::io::sink()),
            RECORD,
        );
        for (data, origin) in read_all(&mut reader) {
            self.core.handle_input(data, origin, now);
        }
    }

    fn read(&mut self, id: u32) -> Bytes {
        match self.core.read(id, usize::MAX).expect("the stream is fine") {
            ReadOutcome::Data(data) => data,
            other => panic!("stream {id}: {other:?}"),
        }
    }
}

fn read_all(reader: &mut ChannelReader) -> Vec<(Bytes, crate::record::Origin)> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Ok(Some(data))) = reader.poll_data(&mut cx) {
        out.push(data);
    }
    out
}

#[test]
fn replies_woken_together_leave_in_one_write_sent_by_the_last_writer() {
    let now = Instant::now();
    let mut dialer = Side::new(Role::Dialer, now);
    let mut acceptor = Side::new(Role::Acceptor, now);
    for n in 0..3u8 {
        let id = dialer.core.open(now).unwrap().expect("room for a stream");
        dialer.core.write(id, &mut Bytes::from(vec![n; 100])).unwrap();
    }
    // Nobody woken ahead: the task writes and flushes, the driver has
    // nothing to do.
    assert!(!dialer.send_from_task(now, true));
    assert_eq!(dialer.transport.writes(), 1, "three requests, one write");
    acceptor.receive(&mut dialer, now);
    assert_eq!(acceptor.core.woken_readers(), 3);

    // Each handler's task reads its request and replies from its task.
    for n in 0..3u8 {
        let id = acceptor.core.accept().unwrap().expect("a stream waits");
        assert_eq!(acceptor.read(id), Bytes::from(vec![n; 100]));
        acceptor.core.write(id, &mut Bytes::from(vec![n; 50])).unwrap();
        acceptor.send_from_task(now, true);
        let expected = usize::from(n == 2);
        assert_eq!(acceptor.transport.writes(), expected, "after reply {n}");
    }
    assert_eq!(acceptor.transport.log().flushes, 1);
    assert_eq!(acceptor.arbiter.unflushed(), 0, "nothing left for the driver");
    dialer.receive(&mut acceptor, now);
    for id in [1, 3, 5] {
        assert_eq!(dialer.read(id).len(), 50);
    }
}

#[test]
fn a_reply_whose_woken_neighbours_never_write_leaves_on_the_drivers_second_turn() {
    let now = Instant::now();
    let mut dialer = Side::new(Role::Dialer, now);
    let mut acceptor = Side::new(Role::Acceptor, now);
    for _ in 0..2 {
        let id = dialer.core.open(now).unwrap().expect("room");
        dialer.core.write(id, &mut Bytes::from_static(b"ping")).unwrap();
    }
    dialer.send_from_task(now, true);
    acceptor.receive(&mut dialer, now);
    let id = acceptor.core.accept().unwrap().expect("a stream");
    acceptor.read(id);
    acceptor.core.write(id, &mut Bytes::from_static(b"pong")).unwrap();
    // The other stream's task is woken and does not run yet: the flush waits.
    assert!(acceptor.send_from_task(now, true), "the driver must run");
    assert_eq!(acceptor.transport.writes(), 0);
    // The driver yields once, then flushes: one pass of the queue, no more.
    assert!(!acceptor.driver_turn(now));
    assert_eq!(acceptor.transport.writes(), 0);
    assert!(acceptor.driver_turn(now));
    assert_eq!(acceptor.transport.writes(), 1);
    dialer.receive(&mut acceptor, now);
    assert_eq!(dialer.read(id), Bytes::from_static(b"pong"));
}

#[test]
fn what_the_transport_pushed_back_is_all_sent_by_the_driver_and_nothing_jumps_it() {
    let now = Instant::now();
    let mut dialer = Side::new(Role::Dialer, now);
    let mut acceptor = Side::new(Role::Acceptor, now);
    dialer.transport.set_room(Some(1000));
    let big = dialer.core.open(now).unwrap().expect("room");
    // Within the stream's window: all of it may go at once.
    let message: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    let mut rest = Bytes::from(message.clone());
    dialer.core.write(big, &mut rest).unwrap();
    assert!(rest.is_empty(), "the send buffer takes it all");
    assert!(
        dialer.send_from_task(now, true),
        "pushed back: the driver must run"
    );
    assert!(dialer.arbiter.unflushed() > 0);
    // A second stream's data goes behind it, whoever writes it.
    let small = dialer.core.open(now).unwrap().expect("room");
    let through = dialer.wire.write_through(
        &mut dialer.core,
        &mut dialer.arbiter,
        Waker::noop(),
        now,
        small,
        b"later",
    );
    if through.is_none() {
        dialer
            .core
            .write(small, &mut Bytes::from_static(b"later"))
            .unwrap();
    }
    dialer.core.finish(small).unwrap();
    assert!(dialer.send_from_task(now, true));
    assert_eq!(
        dialer.transport.writes(),
        1,
        "only what the transport had room for"
    );
    // The transport takes everything now: the driver's turn sends it all.
    dialer.transport.set_room(None);
    dialer.driver_turn(now);
    assert!(!dialer.wire.pushed_back());
    assert!(!dialer.core.has_output(), "nothing owed is left unsent");
    assert_eq!(dialer.arbiter.unflushed(), 0);
    acceptor.receive(&mut dialer, now);
    assert!(acceptor.core.error().is_none(), "every frame arrived whole");
    assert_eq!(acceptor.core.accept().unwrap(), Some(big));
    assert_eq!(acceptor.core.accept().unwrap(), Some(small));
    let mut got = Vec::new();
    while let Ok(ReadOutcome::Data(data)) = acceptor.core.read(big, usize::MAX) {
        got.extend_from_slice(&data);
    }
    assert_eq!(got, message);
    assert_eq!(acceptor.read(small), Bytes::from_static(b"later"));
    assert!(matches!(
        acceptor.core.read(small, usize::MAX),
        Ok(ReadOutcome::Fin)
    ));
}

#[test]
fn a_lone_waiting_stream_is_lent_the_read_and_a_writer_waiting_takes_it_back() {
    let now = Instant::now();
    let (_, writer) = plaintext(
        Box::new(tokio::io::empty()),
        Box::new(Transport::default()),
        RECORD,
    );
    let mut shared = Shared::new(Multiplexer::new(Params::small(Role::Dialer, 4), now), writer);
    let (a, b) = (
        shared.core.open(now).unwrap().unwrap(),
        shared.core.open(now).unwrap().unwrap(),
    );
    // Without a driver nothing is lent.
    assert!(!shared.wait_read(a, Waker::noop()));
    shared.driver = Some(Waker::noop().clone());
    // Lent, and the transport has not been polled with the lease: read now.
    assert!(shared.wait_read(a, Waker::noop()));
    assert!(shared.lease.is_lent());
    assert_eq!(shared.arbiter.holder(), Some(a));
    shared.wait_write(b, Waker::noop());
    assert!(!shared.lease.is_lent(), "the driver reads for both");
    assert_eq!(shared.arbiter.holder(), None);
}
