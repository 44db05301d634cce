//! Receiving: OPEN, DATA, FIN and RESET from the peer, and what the
//! application reads.

use std::time::Instant;

use bytes::Bytes;

use super::{
    state::{Multiplexer, ReadOutcome},
    stream::StreamState,
};
use crate::{
    error::{CloseCode, Error, Repr, Side, Violation},
    record::Origin,
};

impl Multiplexer {
    pub(super) fn on_open(&mut self, id: u32, now: Instant) -> Result<(), Violation> {
        self.ids.peer_opens(id, self.p.role)?;
        let mut state = StreamState::new(Side::Remote, &self.p, now);
        if self.ending.last_named() || self.ending.failed().is_some() {
            // Crossed our go-away: refused, never seen by the application.
            state.refuse_incoming();
            self.streams.insert(id, state);
            self.queue_reset(id, CloseCode::REFUSED_STREAM);
            return Ok(());
        }
        state.recv.incoming(&mut self.wakes);
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
        if s.recv.closed() {
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
        if s.recv.discarding() {
            self.consume(id, n);
            return Ok(());
        }
        let budget = self.flow.recv_window() as usize;
        s.recv.push(data, origin, &mut self.pins, budget);
        s.recv.wake_reader(id, &mut self.wakes);
        Ok(())
    }

    pub(super) fn on_fin(&mut self, id: u32) -> Result<(), Violation> {
        let s = self.stream_mut(id)?.ok_or(Violation::ClosedStream(id))?;
        if s.recv.closed() {
            return Err(Violation::ClosedStream(id));
        }
        s.recv.fin_arrived();
        if s.recv.reader_blocked() {
            let s = self.streams.get_mut(id).expect("found above");
            s.recv.wake_reader(id, &mut self.wakes);
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
        if s.opened_by_peer() && !s.recv.fin() {
            // The peer cancels a stream it opened before finishing it (a
            // reset after its FIN only stops our sending: the request is
            // whole, and delivered): within its budgets (budgets.rs), or it
            // is flooding.
            self.peer_budgets.take_reset(now)?;
            if s.cancel_unaccepted() {
                self.peer_budgets.cancel_unaccepted()?;
            }
        }
        // A refusal after the peer's data is a plain reset: the peer did
        // process the stream, and it must never be replayed.
        let failure = Error::from(
            if code == CloseCode::REFUSED_STREAM && !s.recv.heard_from_peer() {
                Repr::Refused
            } else {
                Repr::StreamReset {
                    code,
                    side: Side::Remote,
                }
            },
        );
        let mut dropped = 0;
        if let Some(n) = s.recv.reset_arrived(&mut self.pins) {
            dropped = n;
            s.fail(failure.clone());
        }
        let echo = !s.send.done_on_wire();
        let mut unqueued = 0;
        if echo {
            // Our direction was still open on the wire: close it with an echo
            // so the peer knows nothing more comes.
            s.fail(failure);
            unqueued = s.send.reset_by_peer();
        }
        self.unqueued(unqueued);
        self.wake_stream(id);
        if echo {
            self.queue_reset(id, code);
        }
        // The dropped data's credit goes back to the connection's window.
        self.consume(id, dropped);
        self.settle(id);
        Ok(())
    }

    /// Wakes a stream's blocked reader and writer: its state changed for
    /// both.
    pub(super) fn wake_stream(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        s.recv.wake_reader(id, &mut self.wakes);
        s.send.wake_writer(id, &mut self.wakes);
    }

    /// The next piece of a stream's data, at most `max` bytes.
    pub(crate) fn read(&mut self, id: u32, max: usize) -> Result<ReadOutcome, Error> {
        let Some(s) = self.streams.get_mut(id) else {
            return Err(self.ending.stream_gone());
        };
        s.recv.reader_done(&mut self.wakes);
        if let Some(err) = s.failure() {
            if !s.recv.fin() {
                return Err(err.clone());
            }
        }
        if let Some(chunk) = s.recv.pop(max, &mut self.pins) {
            self.consume(id, chunk.len());
            return Ok(ReadOutcome::Data(chunk));
        }
        if s.recv.read_fin() {
            self.settle(id);
            return Ok(ReadOutcome::Fin);
        }
        if let Some(err) = self.ending.failed() {
            return Err(err.clone());
        }
        s.recv.block_reader();
        Ok(ReadOutcome::Blocked)
    }

    /// The application dropped its receiving half.
    pub(crate) fn drop_recv(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        s.drop_recv();
        let dropped = s.recv.drop_reader(&mut self.pins, &mut self.wakes);
        // The dropped data's credit goes back to the connection's window.
        self.consume(id, dropped);
        self.abandon_if_unwanted(id);
    }
}
