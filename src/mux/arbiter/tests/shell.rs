//! The arbiter with the wire that obeys it and two real cores, over fake
//! transports that count writes and flushes and push back on demand: what
//! the policy's decisions come to on the wire, still without a socket, a
//! clock or a runtime.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::Bytes;
use tokio::io::AsyncWrite;

use crate::{
    handshake::Role,
    mux::{
        arbiter::Arbiter,
        core::{Multiplexer, ReadOutcome},
        params::Params,
        shared::Shared,
        wire::Wire,
    },
    record::{plaintext, ChannelReader},
};

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
