//! Sending: what the application writes, finishes and resets, how much
//! of the connection's send buffer each stream may queue, and data
//! written straight through (the turns that send the rest are in
//! `transmit`).

use bytes::Bytes;

use super::{state::Multiplexer, stream::StreamState};
use crate::{
    error::{CloseCode, Error, Repr, Side},
    mux::frame::{put_header, HEADER_LEN},
};

/// The least of the connection's send buffer a stream may queue however
/// many share it ([`Multiplexer::send_share`]). Small: past the streams
/// whose shares it makes add up to more than the connection's buffer
/// (4,096 with the default 16 MiB), some streams find no room while
/// others have data queued, and fairness holds only over longer spans.
const MIN_SEND_SHARE: usize = 4 * 1024;

impl Multiplexer {
    fn stream_for_app(&mut self, id: u32) -> Result<&mut StreamState, Error> {
        let Some(s) = self.streams.get_mut(id) else {
            return Err(self.ending.stream_gone());
        };
        if let Some(err) = s.failure() {
            return Err(err.clone());
        }
        if let Some(err) = self.ending.failed() {
            return Err(err.clone());
        }
        Ok(s)
    }

    /// Queues as much of `data` as the stream's send buffer has room for,
    /// without copying (the rest stays in `data`): how much was taken. 0
    /// means blocked: an [`Event::Writable`](super::Event::Writable) follows.
    pub(crate) fn write(&mut self, id: u32, data: &mut Bytes) -> Result<usize, Error> {
        let n = self.write_room(id)?.min(data.len());
        if n == 0 {
            return Ok(0);
        }
        let s = self.streams.get_mut(id).expect("write_room found it");
        let piece = if n == data.len() {
            std::mem::take(data)
        } else {
            data.split_to(n)
        };
        s.send.push(piece);
        self.sending.queue(n);
        if s.send.has_output() {
            s.send.schedule(id, &mut self.schedule);
        }
        Ok(n)
    }

    /// Takes up to `max` bytes of stream `id`'s data for the wire at once,
    /// when sending them now is exactly what the stream's turn would do:
    /// nothing else of the connection waits to go out, nothing of the
    /// stream is queued, and there is credit. Writes the frame's header
    /// into `header` and returns how many bytes of the data must follow
    /// it, counted as sent; 0 when the data must be queued instead
    /// ([`Self::write`]).
    pub(crate) fn write_through(
        &mut self,
        id: u32,
        max: usize,
        header: &mut [u8; HEADER_LEN],
    ) -> Result<usize, Error> {
        // The only stream in turn may be this one, waiting to send its OPEN
        // (or listed after its last turn, with nothing queued).
        if self.control_waiting()
            || self.schedule.any_blocked_on_connection()
            || !self.schedule.is_empty_but(id)
        {
            return Ok(0);
        }
        let conn_credit = self.flow.send_credit();
        let quantum = if self.streams.len() > 1 {
            self.p.quantum
        } else {
            usize::MAX
        };
        let s = self.stream_for_app(id)?;
        if !s.send.is_open() {
            return Err(Repr::Finished.into());
        }
        if s.send.waits_in_turn() {
            return Ok(0);
        }
        // This is the stream's turn: a quantum of it while other streams
        // are open (their writers may be about to queue; measured: 256 KiB
        // written through at once let a stream of 100 run 1.7-1.9 times
        // the mean at a quarter of a run, about one run in forty), and no
        // quantum for a lone stream, which shares with no one (the frame
        // may span records).
        let n = (max.min(quantum) as u64).min(s.send.credit()).min(conn_credit) as usize;
        if n == 0 {
            return Ok(0);
        }
        let (kind, was_listed) = s.send.send_through(n);
        put_header(&mut &mut header[..], kind, 0, id, n);
        if was_listed {
            // Its turn (for the OPEN, or the one after its last) is this
            // frame.
            self.schedule.clear();
        }
        self.flow.sent(n);
        self.stats.data_sent(n);
        self.stats.frame_sent();
        tracing::trace!(stream = id, ?kind, len = n, "frame out, written through");
        Ok(n)
    }

    /// How much one stream may queue: its send buffer
    /// ([`Builder::send_buffer`]), or its fair share of the connection's
    /// ([`Builder::connection_send_buffer`]) when all streams' buffers
    /// would not fit in it, but never less than [`MIN_SEND_SHARE`].
    ///
    /// Shared out, a full connection buffer leaves every stream data
    /// queued for its turns: otherwise the writers woken by their own
    /// stream's turn take the room as soon as it frees up, and the streams
    /// whose writers found none have nothing to send in theirs (measured:
    /// the slowest tenth of 100 streams at 0.23 of the median stream with
    /// 256 KiB each in 16 MiB; 0.91 shared out).
    ///
    /// [`Builder::send_buffer`]: crate::mux::Builder::send_buffer
    /// [`Builder::connection_send_buffer`]: crate::mux::Builder::connection_send_buffer
    pub(super) fn send_share(&self) -> usize {
        let share = self.p.connection_send_buffer / self.streams.len().max(1);
        self.p.send_buffer.min(share.max(MIN_SEND_SHARE))
    }

    /// Room in a stream's send buffer (0: blocked, and an
    /// [`Event::Writable`](super::Event::Writable) follows).
    ///
    /// The room is the stream's own share ([`Self::send_share`]), and at
    /// most what is left of the connection's buffer: a writer blocked by
    /// the connection's waits until a quarter of it is free again, with
    /// every other writer so blocked.
    pub(crate) fn write_room(&mut self, id: u32) -> Result<usize, Error> {
        let limit = self.send_share();
        // Writers waiting for the connection's room have it first: one
        // woken by its own stream's turn queues up behind them.
        let connection_room = self.sending.room(self.p.connection_send_buffer);
        let s = self.stream_for_app(id)?;
        if !s.send.is_open() {
            return Err(Repr::Finished.into());
        }
        let (room, waits) = s.send.room(limit, connection_room);
        if waits {
            self.sending.wait_for_room(id, &self.streams);
        }
        Ok(room)
    }

    /// `n` queued bytes left the connection's send buffer (sent or
    /// dropped): wakes the writers waiting for room in it, once a quarter
    /// of it is free.
    pub(super) fn unqueued(&mut self, n: usize) {
        self.sending.unqueue(n);
        self.wake_room_waiters();
    }

    pub(super) fn wake_room_waiters(&mut self) {
        if !self.sending.room_freed(self.p.connection_send_buffer) {
            return;
        }
        for id in self.sending.take_room_waiters() {
            let Some(s) = self.streams.get_mut(id) else {
                continue;
            };
            s.send.wake_room_waiter(id, &mut self.wakes);
        }
    }

    /// Half-closes a stream: FIN follows the queued data.
    pub(crate) fn finish(&mut self, id: u32) -> Result<(), Error> {
        self.stream_for_app(id)?;
        let s = self.streams.get_mut(id).expect("found above");
        s.send.finish(id, &mut self.schedule);
        Ok(())
    }

    /// Resets a stream with `code`: both directions, whatever is still open.
    pub(crate) fn reset(&mut self, id: u32, code: CloseCode) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        if s.wire_done() {
            return;
        }
        s.fail(
            Repr::StreamReset {
                code,
                side: Side::Local,
            }
            .into(),
        );
        let unqueued = s.send.drop_queue();
        let reset_needed = !s.send.is_done() || !s.recv.closed();
        s.send.end();
        let dropped = s.recv.discard(&mut self.pins);
        if reset_needed && !s.send.reset_by_us() {
            self.queue_reset(id, code);
        }
        if dropped > 0 {
            self.consume(id, dropped);
        }
        self.unqueued(unqueued);
        self.settle(id);
    }

    /// The application dropped its sending half. Unfinished, it is
    /// finished if the receiving half still reads (the split halves'
    /// semantics, as tokio's `OwnedWriteHalf`), or reset with `CANCEL` if
    /// the whole stream is gone, so the peer never takes an abandoned
    /// stream for a complete one.
    /// Whether the stream can no longer be written because the peer reset
    /// it, or the connection ended: the error then. Otherwise `None`, and
    /// a reset or the end wakes the writer ([`Event::Writable`](super::Event::Writable)).
    pub(crate) fn stopped(&mut self, id: u32) -> Option<Error> {
        let Some(s) = self.streams.get_mut(id) else {
            return Some(
                self.ending
                    .failed()
                    .cloned()
                    .unwrap_or_else(|| Repr::Finished.into()),
            );
        };
        if let Some(err) = s.failure().or(self.ending.failed()) {
            return Some(err.clone());
        }
        s.send.wait_for_end();
        None
    }

    pub(crate) fn drop_send(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        s.drop_send();
        if s.send.is_open() && s.failure().is_none() && self.ending.failed().is_none() {
            if s.handles().recv_alive() {
                let _ = self.finish(id);
            } else {
                self.reset(id, CloseCode::CANCEL);
            }
        } else {
            self.abandon_if_unwanted(id);
        }
    }

    /// With both halves gone and the peer still sending, tell it to stop
    /// (after our FIN, if one is on its way).
    pub(super) fn abandon_if_unwanted(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        let unwanted = !s.handles().send_alive() && !s.handles().recv_alive();
        if unwanted && !s.recv.closed() && !s.send.reset_by_us() && self.ending.failed().is_none() {
            // The peer's FIN or echo then closes the receiving side.
            self.queue_reset(id, CloseCode::CANCEL);
        }
        self.settle(id);
    }

    /// Queues the one RESET of stream `id`: among the next control frames
    /// if nothing else of the stream is still to go out, otherwise right
    /// after its OPEN or FIN.
    pub(super) fn queue_reset(&mut self, id: u32, code: CloseCode) {
        let Some(s) = self.streams.get_mut(id) else {
            return;
        };
        s.send
            .queue_reset(id, code, &mut self.sending, &mut self.schedule);
    }
}
