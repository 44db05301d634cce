//! Transmitting: the frames that leave, control frames first, then one
//! quantum per stream in turn ([`schedule`](super::schedule)).

use std::time::Instant;

use bytes::Bytes;

use super::{schedule::List, state::Multiplexer};
use crate::mux::frame::{put_header, Kind, Reset, FLAG_FIN, HEADER_LEN};

impl Multiplexer {
    /// Appends frames to `out` until about `budget` bytes or nothing is
    /// left: control frames first, then one quantum per stream in turn.
    /// Returns the bytes appended.
    ///
    /// A stream whose data waits for connection credit alone gives up its
    /// turn until the credit comes; the streams behind it go on, so their
    /// OPEN, FIN and RESET frames, which need no credit, are not held up.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut Vec<Bytes>, budget: usize) -> usize {
        // Nothing to write: no frame buffer is made (an idle connection's
        // was let go, and the driver's turns call this with nothing due).
        if !self.wants_transmit(now) {
            return 0;
        }
        let mut written = 0;
        self.sending.reserve_frames();
        self.stats
            .frames_sent(self.ending.put_frames(self.sending.frames()));
        if self.ending.failed().is_some() {
            return self.sending.flush_frames(out);
        }
        let other_output = !self.schedule.is_empty()
            || self.sending.resets_queued()
            || self.flow.credit_owed()
            || self.ids.stream_credit_owed();
        self.stats.frames_sent(
            self.keepalive
                .put_frames(now, self.sending.frames(), other_output),
        );
        self.put_credit(now);
        while let Some((stream, code)) = self.sending.pop_reset() {
            Reset { stream, code }.encode(self.sending.frames());
            self.stats.frame_sent();
            self.settle(stream);
        }
        written += self.sending.flush_frames(out);

        while written < budget {
            let Some((id, from)) = self.schedule.next() else {
                break;
            };
            written += self.transmit_turn(id, from, out);
        }
        // After the turns, so that the slots of streams whose last frame
        // left just now are in it, in the same write.
        self.put_stream_credit();
        written += self.sending.flush_frames(out);
        written
    }

    /// Stream `id`'s first frames went out as early data (docs/PROTOCOL.md,
    /// section 17.4): takes them as a transmit would, counted as sent, and
    /// keeps for the wire any other frame that transmit made.
    pub(crate) fn sent_early(&mut self, id: u32, now: Instant) {
        let mut out = Vec::new();
        self.poll_transmit(now, &mut out, usize::MAX);
        let mut rest: &[u8] = &out.concat();
        let mut kept = bytes::BytesMut::new();
        while rest.len() >= HEADER_LEN {
            let (kind, stream) = (rest[0], u32::from_be_bytes([rest[2], rest[3], rest[4], rest[5]]));
            let len = u32::from_be_bytes([rest[6], rest[7], rest[8], rest[9]]) as usize;
            let Some(frame) = rest.get(..HEADER_LEN + len) else {
                break;
            };
            let early = stream == id && [Kind::Open as u8, Kind::Data as u8, Kind::Fin as u8].contains(&kind);
            if !early {
                kept.extend_from_slice(frame);
            }
            rest = &rest[frame.len()..];
        }
        self.sending.frames().extend_from_slice(&kept);
    }

    /// One stream's turn: its OPEN, up to a quantum of data, its FIN or
    /// RESET. Returns the bytes appended.
    fn transmit_turn(&mut self, id: u32, from: List, out: &mut Vec<Bytes>) -> usize {
        let conn_credit = self.flow.send_credit();
        let quantum = self.p.quantum;
        let send_share = self.send_share();
        let Some(s) = self.streams.get_mut(id) else {
            return 0;
        };
        if from == List::Old && !s.send.has_output() {
            // A placeholder (see `schedule`): its turn is over.
            s.send.end_turn();
            return 0;
        }
        let n = s.send.turn_len(conn_credit, quantum);
        if s.send.blocked_on_connection(n) {
            // Blocked on connection credit alone: back in turn when it comes.
            self.schedule.block_on_connection(id);
            return 0;
        }
        let mut written = 0;
        let (kind, fin) = s.send.turn_frame(n);
        if let Some(kind) = kind {
            let flags = if fin && kind != Kind::Fin { FLAG_FIN } else { 0 };
            put_header(self.sending.frames(), kind, flags, id, n);
            self.stats.frame_sent();
            tracing::trace!(stream = id, ?kind, len = n, fin, "frame out");
        }
        if n > 0 {
            out.push(self.sending.split_frames());
            written += HEADER_LEN;
            s.send.take(n, out);
            self.sending.unqueue(n);
            self.flow.sent(n);
            self.stats.data_sent(n);
            written += n;
            // Half its share free before its writer is woken: a wake-up
            // per half share rather than per turn, and the other half
            // still queued for the turns until the writer has run.
            s.send.wake_writer_at(send_share / 2, id, &mut self.wakes);
        }
        if fin {
            s.send.fin_sent();
        }
        if let Some(code) = s.send.take_reset_in_turn() {
            Reset { stream: id, code }.encode(self.sending.frames());
            self.stats.frame_sent();
        }
        if !s.send.is_done() && (s.send.has_output() || from == List::New) {
            // Behind the others; a newcomer with nothing left stays listed
            // as a placeholder until its turn in the old list.
            self.schedule.requeue(id);
        } else {
            s.send.end_turn();
        }
        self.settle(id);
        if n > 0 {
            self.wake_room_waiters();
        }
        written
    }
}
