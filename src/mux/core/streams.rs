//! Opening, accepting and finishing streams: the counts and stream credit
//! a finished stream gives back, and the streams a peer's go-away refuses.

use std::{collections::VecDeque, time::Instant};

use super::{
    ids::Ids,
    state::Multiplexer,
    stream::{Handles, StreamState},
    woken::Event,
};
use crate::{
    error::{CloseCode, Error, Repr, Side, Violation},
    mux::{frame::StreamCredit, id_map::IdMap},
};

/// The streams still held, by id, and the peer's streams waiting to be
/// accepted, in the order they came.
#[derive(Debug, Default)]
pub(super) struct Streams {
    table: IdMap<StreamState>,
    incoming: VecDeque<u32>,
}

impl Streams {
    #[inline]
    pub(super) fn get(&self, id: u32) -> Option<&StreamState> {
        self.table.get(&id)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut StreamState> {
        self.table.get_mut(&id)
    }

    #[inline]
    pub(super) fn contains_key(&self, id: u32) -> bool {
        self.table.contains_key(&id)
    }

    pub(super) fn insert(&mut self, id: u32, state: StreamState) {
        self.table.insert(id, state);
    }

    pub(super) fn remove(&mut self, id: u32) {
        self.table.remove(&id);
    }

    /// Streams in the table.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the table holds no stream.
    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    #[inline]
    pub(super) fn values(&self) -> impl Iterator<Item = &StreamState> {
        self.table.values()
    }

    #[inline]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&u32, &StreamState)> {
        self.table.iter()
    }

    /// A peer's stream, into the table, and to be accepted.
    pub(super) fn insert_incoming(&mut self, id: u32, state: StreamState) {
        self.table.insert(id, state);
        self.incoming.push_back(id);
    }

    /// The next stream waiting to be accepted, out of the queue.
    fn next_incoming(&mut self) -> Option<u32> {
        self.incoming.pop_front()
    }

    /// Whether no stream waits to be accepted.
    pub(super) fn no_incoming(&self) -> bool {
        self.incoming.is_empty()
    }
}

impl Multiplexer {
    #[cfg(test)]
    pub(super) fn peer_allowed(&self) -> u32 {
        self.ids.peer_allowed()
    }

    /// The stream `id` for a frame from the peer: `None` if it is finished
    /// and gone, a violation if it was never opened.
    pub(super) fn stream_mut(&mut self, id: u32) -> Result<Option<&mut StreamState>, Violation> {
        if self.streams.contains_key(id) {
            return Ok(self.streams.get_mut(id));
        }
        if self.ids.was_used(id, self.p.role) {
            Ok(None)
        } else {
            Err(Violation::UnknownStream(id))
        }
    }

    pub(super) fn on_stream_credit(&mut self, total: u32) -> Result<(), Violation> {
        if self.ids.on_stream_credit(total, self.p.role)? {
            self.wakes.push(Event::StreamCredit);
        }
        Ok(())
    }

    /// Streams we may open now without waiting: 0 while going away or
    /// closed.
    pub(crate) fn available_streams(&self) -> u32 {
        if self.ending.failed().is_some() || self.is_going_away() {
            0
        } else {
            self.ids.available()
        }
    }

    /// Opens a stream: `Ok(None)` while the peer's stream limit is reached.
    pub(crate) fn open(&mut self, now: Instant) -> Result<Option<u32>, Error> {
        if let Some(err) = self.ending.failed() {
            return Err(err.clone());
        }
        if let Some(side) = self.going_away_side() {
            return Err(Repr::GoingAway { side }.into());
        }
        let Some(id) = self.ids.open_local() else {
            return Ok(None);
        };
        self.stats.stream_opened();
        let mut state = StreamState::new(Side::Local, &self.p, now);
        // Scheduled now, so OPEN frames leave in id order.
        state.send.schedule(id, &mut self.schedule);
        self.streams.insert(id, state);
        tracing::trace!(stream = id, "opened");
        if self.ids.exhausted() {
            // That was our last id: the connection drains, and new streams
            // go to another.
            tracing::debug!("stream ids used up: going away");
            self.go_away(now);
        }
        Ok(Some(id))
    }

    /// The next stream the peer opened: `Ok(None)` if none is waiting.
    pub(crate) fn accept(&mut self) -> Result<Option<u32>, Error> {
        while let Some(id) = self.streams.next_incoming() {
            let Some(s) = self.streams.get_mut(id) else {
                continue;
            };
            if !s.accept() {
                // Cancelled before anyone saw it: the application never
                // does, and its slot goes back to the peer.
                self.peer_budgets.cancelled_skipped();
                self.settle(id);
                continue;
            }
            self.stats.stream_accepted();
            return Ok(Some(id));
        }
        match self.ending.failed() {
            // A clean end, either side's: no more streams, and no error.
            Some(err) if err.is_closed() => Ok(None),
            Some(err) => Err(err.clone()),
            None => Ok(None),
        }
    }

    /// Whether `accept` can never return a stream again.
    pub(crate) fn accept_finished(&self) -> bool {
        self.streams.no_incoming() && (self.ending.failed().is_some() || self.ending.last_named())
    }

    /// Gives back the stream credit and the table slot of a finished stream.
    pub(super) fn settle(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        if !s.wire_done() || s.handles().awaiting_accept() {
            return;
        }
        // The slot comes back once the application is done with the
        // stream: it read the peer's end (or dropped the reading half) and
        // sent its own end (or dropped the sending half), so that a reply
        // and the slot it frees leave in one write. A stream reset (by the
        // peer after its FIN, or by us over a bad request) keeps counting
        // until both halves are dropped, whatever its handler still does,
        // so a peer cannot make us run more handlers at once than its limit
        // by getting its streams reset (MadeYouReset, CVE-2025-8671).
        let handles = s.handles();
        let let_go = handles == Handles::Gone;
        let finished = s.failure().is_none()
            && (s.recv.end_read() || !handles.recv_alive())
            && (!handles.send_alive() || !s.send.reset_by_us() && s.send.is_done());
        if (let_go || finished) && s.release_slot() {
            self.ids.release_peer_slot();
        }
        if let_go {
            tracing::trace!(stream = id, "stream finished");
            s.recv.reader_done(&mut self.wakes);
            self.streams.remove(id);
        }
    }

    pub(super) fn put_stream_credit(&mut self) {
        if let Some(total) = self.ids.take_stream_credit() {
            StreamCredit { total }.encode(self.sending.frames());
            self.stats.frame_sent();
        }
    }

    /// Fails our streams the peer will never process (above `last`, its
    /// go-away's last id): the ones whose OPEN never left are forgotten, the
    /// others reset, and every one reads and writes [`Repr::Refused`]. A
    /// stream the peer has sent on was processed, whatever the go-away
    /// says: it goes on, and is never taken for refused (which would let
    /// the pool replay it).
    pub(super) fn refuse_above(&mut self, last: u32) {
        let refused: Vec<u32> = self
            .streams
            .iter()
            .filter(|(&id, s)| {
                Ids::is_local(id, self.p.role) && id > last && !s.wire_done() && !s.recv.heard_from_peer()
            })
            .map(|(&id, _)| id)
            .collect();
        // In id order, as the peer would have seen them.
        let mut refused = refused;
        refused.sort_unstable();
        for id in refused {
            let s = self.streams.get_mut(id).expect("listed above");
            s.fail(Repr::Refused.into());
            let unqueued = s.send.drop_queue();
            // Never heard from the peer: nothing of its is held, nor any
            // credit owed for it.
            let dropped = s.recv.clear(&mut self.pins);
            debug_assert_eq!(dropped, 0, "data from a peer never heard from");
            let reset = if s.send.open_sent() {
                s.recv.discard_arrivals();
                !s.send.reset_by_us() && !s.recv.closed()
            } else {
                // Never on the wire: for the peer it never existed.
                s.recv.never_reached_peer();
                false
            };
            s.send.refuse();
            tracing::trace!(stream = id, "refused: above the peer's go-away");
            self.wake_stream(id);
            if reset {
                self.queue_reset(id, CloseCode::CANCEL);
            }
            self.unqueued(unqueued);
            self.settle(id);
        }
    }

    /// Who started the go-away that stops new streams, if one did (our
    /// ids running out counts as ours).
    pub(super) fn going_away_side(&self) -> Option<Side> {
        if self.ending.went_away() || self.ids.exhausted() {
            Some(Side::Local)
        } else if self.ending.peer_went_away() {
            Some(Side::Remote)
        } else {
            None
        }
    }

    /// Whether either side sent a go-away: no new streams.
    pub(crate) fn is_going_away(&self) -> bool {
        self.going_away_side().is_some()
    }
}
