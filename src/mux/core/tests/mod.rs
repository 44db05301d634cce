//! Deterministic tests of the multiplexer core: no sockets, no clock, no
//! tokio. Two cores exchange frames through `Pair`; hand-made frames test
//! what a hostile peer could send.

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use super::{Event, Multiplexer, ReadOutcome};
use crate::{
    error::{CloseCode, Error, Repr, Side, Violation},
    handshake::Role,
    mux::{
        frame::{raw_frame as raw, Decoder, GoAway, Input, Kind, Ping, Pong, FLAG_FIN, HEADER_LEN},
        params::{Params, MAX_WINDOW},
    },
    record::Origin,
};

/// Where test input lives: no allocation worth pinning.
pub(super) const ORIGIN: Origin = Origin { buffer: 0, size: 0 };

pub(super) const WINDOW: u32 = 64 * 1024;

pub(super) fn params(role: Role) -> Params {
    Params::small(role, 4)
}

/// Everything `m` transmits now, as bytes.
pub(super) fn transmit(m: &mut Multiplexer, now: Instant) -> Bytes {
    let mut out = Vec::new();
    while m.poll_transmit(now, &mut out, usize::MAX) > 0 {}
    let mut all = BytesMut::new();
    for b in out {
        all.extend_from_slice(&b);
    }
    all.freeze()
}

/// Decodes bytes into inputs (data pieces merged per frame for readability).
pub(super) fn decode(mut bytes: Bytes) -> Vec<Input> {
    let mut d = Decoder::default();
    let mut out = Vec::new();
    while let Some(input) = d.next(&mut bytes).expect("we send valid frames") {
        out.push(input);
    }
    out
}

pub(super) fn events(m: &mut Multiplexer) -> Vec<Event> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

pub(super) struct Pair {
    pub(super) dialer: Multiplexer,
    pub(super) acceptor: Multiplexer,
    pub(super) now: Instant,
}

impl Pair {
    pub(super) fn new() -> Self {
        Self::with(params(Role::Dialer), params(Role::Acceptor))
    }

    pub(super) fn with(d: Params, a: Params) -> Self {
        let now = Instant::now();
        let mut pair = Pair {
            dialer: Multiplexer::new(d, now),
            acceptor: Multiplexer::new(a, now),
            now,
        };
        // Nothing goes out on start: the first pings ride with the first
        // frames sent for another reason.
        pair.pump();
        pair
    }

    /// Moves frames both ways until both sides are quiet.
    pub(super) fn pump(&mut self) {
        for _ in 0..100 {
            let to_acceptor = transmit(&mut self.dialer, self.now);
            let to_dialer = transmit(&mut self.acceptor, self.now);
            if to_acceptor.is_empty() && to_dialer.is_empty() {
                return;
            }
            self.acceptor.handle_input(to_acceptor, ORIGIN, self.now);
            self.dialer.handle_input(to_dialer, ORIGIN, self.now);
        }
        panic!("the cores never went quiet");
    }

    pub(super) fn advance(&mut self, by: Duration) {
        self.now += by;
    }
}

pub(super) fn read_all(m: &mut Multiplexer, id: u32) -> (Vec<u8>, bool) {
    let mut data = Vec::new();
    loop {
        match m.read(id, usize::MAX).unwrap() {
            ReadOutcome::Data(b) => data.extend_from_slice(&b),
            ReadOutcome::Fin => return (data, true),
            ReadOutcome::Blocked => return (data, false),
        }
    }
}

pub(super) fn credit(entries: &[(u32, u32)]) -> Bytes {
    let mut p = BytesMut::new();
    for &(id, inc) in entries {
        p.put_u32(id);
        p.put_u32(inc);
    }
    raw(5, 0, 0, &p)
}

/// An acceptor core fed `frames` from a hand-made dialer; its error.
pub(super) fn acceptor_fed(frames: &[Bytes]) -> (Multiplexer, Option<Error>) {
    let now = Instant::now();
    let mut m = Multiplexer::new(params(Role::Acceptor), now);
    for f in frames {
        m.handle_input(f.clone(), ORIGIN, now);
    }
    let err = m.error().cloned();
    (m, err)
}

pub(super) fn violation(frames: &[Bytes]) -> Violation {
    match acceptor_fed(frames).1.as_ref().map(Error::repr) {
        Some(Repr::Protocol(v)) => v.clone(),
        other => panic!("expected a violation, got {other:?}"),
    }
}

mod budgets;
mod flow;
mod frames;
mod scheduling;
mod shutdown;
mod streams;
mod violations;
