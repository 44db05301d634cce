//! Receiving: OPEN, DATA, FIN and RESET from the peer, and what the
//! application reads.

use std::time::Instant;

use bytes::Bytes;

use super::{
    state::{Multiplexer, ReadOutcome},
    stream::{Handles, ReaderWait, RecvState, StreamState},
};
use crate::{
    error::{CloseCode, Error, Side, Violation},
    record::Origin,
};

impl Multiplexer {
    pub(super) fn on_open(&mut self, id: u32, now: Instant) -> Result<(), Violation> {
        self.ids.peer_opens(id, self.p.role)?;
        let mut state = StreamState::new(Side::Remote, &self.p, now);
        if self.ending.last_named() || self.ending.failed().is_some() {
            // Crossed our go-away: refused, never seen by the application.
            state.handles = Handles::Gone;
            state.recv_state = RecvState::Discarding;
            state.send.end();
            self.streams.insert(id, state);
            self.queue_reset(id, CloseCode::REFUSED_STREAM);
            return Ok(());
        }
        self.wakes.incoming_stream(&mut state.woken_in);
        self.streams.insert_incoming(id, state);
        Ok(())
    }

    pub(super) fn on_data(&mut self, id: u32, data: Bytes, origin: Origin) -> Result<(), Violation> {
        let n = data.len();
        self.stats.data_received(n);
        let Some(s) = self.streams.get_mut(id) else {
            return Err(if self.ids.was_used(id, self.p.role) {
                Violation::ClosedStream(id)
            } else {
                Violation::UnknownStream(id)
            });
        };
        if s.recv_closed() {
            return Err(Violation::ClosedStream(id));
        }
        s.recv
            .receive(n)
            .map_err(|(offset, limit)| Violation::FlowControl {
                stream: id,
                offset,
                limit,
            })?;
        self.flow
            .receive(n)
            .map_err(|(offset, limit)| Violation::FlowControl {
                stream: 0,
                offset,
                limit,
            })?;
        if s.recv_state == RecvState::Discarding {
            self.consume(id, n);
            return Ok(());
        }
        let budget = self.flow.recv_window() as usize;
        s.recv_queue.push(data, origin, &mut self.pins, budget);
        if s.reader == ReaderWait::Blocked {
            s.reader = ReaderWait::None;
            self.wakes.wake_reader(id, &mut s.woken_in);
        }
        Ok(())
    }

    pub(super) fn on_fin(&mut self, id: u32) -> Result<(), Violation> {
        let s = self.stream_mut(id)?.ok_or(Violation::ClosedStream(id))?;
        if s.recv_closed() {
            return Err(Violation::ClosedStream(id));
        }
        s.recv_state = RecvState::Finished;
        if s.reader == ReaderWait::Blocked {
            s.reader = ReaderWait::None;
            let s = self.streams.get_mut(id).expect("found above");
            self.wakes.wake_reader(id, &mut s.woken_in);
        }
        self.settle(id);
        Ok(())
    }

    pub(super) fn on_reset(&mut self, id: u32, code: CloseCode, now: Instant) -> Result<(), Violation> {
        let Some(s) = self.streams.get_mut(id) else {
            // A reset for a stream already gone crossed our own close of
            // it; one for a stream never opened is a violation.
            if !self.ids.was_used(id, self.p.role) {
                return Err(Violation::UnknownStream(id));
            }
            return Ok(());
        };
        if s.opener == Side::Remote && !s.fin() {
            // The peer cancels a stream it opened before finishing it (a
            // reset after its FIN only stops our sending: the request is
            // whole, and delivered): within its budgets (budgets.rs), or it
            // is flooding.
            self.peer_budgets.take_reset(now)?;
            if s.handles == Handles::Unaccepted {
                s.handles = Handles::Cancelled;
                self.peer_budgets.cancel_unaccepted()?;
            }
        }
        // A refusal after the peer's data is a plain reset: the peer did
        // process the stream, and it must never be replayed.
        let failure = if code == CloseCode::REFUSED_STREAM && !s.heard_from_peer() {
            Error::Refused
        } else {
            Error::StreamReset {
                code,
                side: Side::Remote,
            }
        };
        let mut dropped = 0;
        if !s.recv_closed() {
            s.recv_state = RecvState::Reset;
            dropped = s.recv_queue.clear(&mut self.pins);
            s.failure.get_or_insert(failure.clone());
        }
        let echo = !s.send.done_on_wire();
        let mut unqueued = 0;
        if echo {
            // Our direction was still open on the wire: close it with an echo
            // so the peer knows nothing more comes.
            s.failure.get_or_insert(failure);
            unqueued = s.send.reset_by_peer();
        }
        self.unqueued(unqueued);
        self.wake_stream(id);
        if echo {
            self.queue_reset(id, code);
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.settle(id);
        Ok(())
    }

    /// Wakes a stream's blocked reader and writer: its state changed for
    /// both.
    pub(super) fn wake_stream(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        if s.reader == ReaderWait::Blocked {
            s.reader = ReaderWait::None;
            self.wakes.wake_reader(id, &mut s.woken_in);
        }
        s.send.wake_writer(id, &mut self.wakes);
    }

    /// The next piece of a stream's data, at most `max` bytes.
    pub(crate) fn read(&mut self, id: u32, max: usize) -> Result<ReadOutcome, Error> {
        let Some(s) = self.streams.get_mut(id) else {
            return Err(self.ending.failed().cloned().unwrap_or(Error::Finished));
        };
        self.wakes.reader_done(&mut s.woken_in);
        if let Some(err) = &s.failure {
            if !s.fin() {
                return Err(err.clone());
            }
        }
        if let Some(chunk) = s.recv_queue.pop(max, &mut self.pins) {
            self.consume(id, chunk.len());
            return Ok(ReadOutcome::Data(chunk));
        }
        if s.fin() {
            s.recv_state = RecvState::EndRead;
            self.settle(id);
            return Ok(ReadOutcome::Fin);
        }
        if let Some(err) = self.ending.failed() {
            return Err(err.clone());
        }
        s.reader = ReaderWait::Blocked;
        Ok(ReadOutcome::Blocked)
    }

    /// The application dropped its receiving half.
    pub(crate) fn drop_recv(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        s.handles.drop_recv();
        s.reader = ReaderWait::None;
        self.wakes.reader_done(&mut s.woken_in);
        let dropped = s.recv_queue.clear(&mut self.pins);
        if s.recv_state == RecvState::Open {
            s.recv_state = RecvState::Discarding;
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.abandon_if_unwanted(id);
    }
}
