//! A stream's sending half: what its writer queued, what of it left and
//! may leave, its OPEN, FIN and our RESET, its place in the turn order and
//! what its writer waits for. Changed through its methods only, by the
//! sending code (`send`, `transmit`) and whoever ends a stream.

use std::collections::VecDeque;

use bytes::Bytes;

use super::{
    schedule::{Schedule, Turn},
    sending::Sending,
    woken::Wakes,
};
use crate::{
    error::{CloseCode, Side},
    mux::{frame::Kind, params::Params},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendPhase {
    Open,
    /// FIN queued behind the data.
    Finishing,
    /// FIN or RESET sent (or received): nothing more goes out.
    Done,
}

/// Whether the peer knows the stream: its OPEN left (a peer's stream is
/// known from the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    Unsent,
    Sent,
}

/// Our RESET of the stream: there is only ever one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OurReset {
    None,
    /// To send in the stream's turn, after whatever of it is on the way
    /// (its OPEN, its FIN).
    InTurn(CloseCode),
    /// Queued among the control frames, sent, or no longer needed.
    Sent,
}

/// What the stream's writer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterWait {
    None,
    /// Room in its own share, or the stream's end (`stopped`).
    Blocked,
    /// Room in the connection's send buffer: listed among the room waiters
    /// ([`Multiplexer::write_room`](super::Multiplexer::write_room)).
    BlockedOnConnection,
}

/// A stream's sending half.
#[derive(Debug)]
pub(super) struct SendHalf {
    phase: SendPhase,
    opening: Opening,
    queue: SendQueue,
    /// Bytes in `queue`.
    queued: usize,
    /// Bytes sent.
    offset: u64,
    /// The offset the peer lets us send up to.
    limit: u64,
    turn: Turn,
    our_reset: OurReset,
    writer: WriterWait,
}

impl SendHalf {
    pub(super) fn new(opener: Side, p: &Params) -> Self {
        Self {
            phase: SendPhase::Open,
            opening: if opener == Side::Local {
                Opening::Unsent
            } else {
                Opening::Sent
            },
            queue: SendQueue::default(),
            queued: 0,
            offset: 0,
            limit: u64::from(p.peer_stream_window),
            turn: Turn::Idle,
            our_reset: OurReset::None,
            writer: WriterWait::None,
        }
    }

    // ---------------------------------------------------------------- queries

    /// Whether the peer knows the stream (its OPEN left).
    #[inline]
    pub(super) fn open_sent(&self) -> bool {
        self.opening == Opening::Sent
    }

    /// Whether the application may still write: neither finished nor reset.
    #[inline]
    pub(super) fn is_open(&self) -> bool {
        self.phase == SendPhase::Open
    }

    /// Whether FIN or RESET was sent (or received): nothing more goes out
    /// but a RESET of ours in turn.
    #[inline]
    pub(super) fn is_done(&self) -> bool {
        self.phase == SendPhase::Done
    }

    /// Whether our direction is closed on the wire: done, and no RESET of
    /// ours waits for its turn.
    #[inline]
    pub(super) fn done_on_wire(&self) -> bool {
        self.phase == SendPhase::Done && !self.reset_in_turn()
    }

    /// A RESET of ours waits for the stream's turn.
    #[inline]
    fn reset_in_turn(&self) -> bool {
        matches!(self.our_reset, OurReset::InTurn(_))
    }

    /// Whether we reset the stream: our RESET waits for its turn, was
    /// queued or sent, or is no longer needed.
    #[inline]
    pub(super) fn reset_by_us(&self) -> bool {
        self.our_reset != OurReset::None
    }

    /// Bytes queued, not yet sent.
    #[inline]
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// Bytes the stream's credit lets us send now.
    #[inline]
    pub(super) fn credit(&self) -> u64 {
        self.limit - self.offset
    }

    /// Whether a transmit turn would emit anything for this stream.
    #[inline]
    pub(super) fn has_output(&self) -> bool {
        !self.open_sent()
            || (self.phase == SendPhase::Finishing && self.queued == 0)
            || (self.queued > 0 && self.credit() > 0)
            || (self.reset_in_turn() && self.phase != SendPhase::Finishing)
    }

    /// Whether anything of the stream waits for its turn (queued data, our
    /// RESET), so that nothing may be written through.
    #[inline]
    pub(super) fn waits_in_turn(&self) -> bool {
        self.queued > 0 || self.reset_in_turn()
    }

    /// Whether the writer waits for room in the connection's send buffer.
    #[inline]
    pub(super) fn waits_for_room(&self) -> bool {
        self.writer == WriterWait::BlockedOnConnection
    }

    // ------------------------------------------------------------ the turns

    /// Lists the stream in turn for what it has to send, if it is not
    /// listed ([`Schedule::schedule`]).
    #[inline]
    pub(super) fn schedule(&mut self, id: u32, schedule: &mut Schedule) {
        schedule.schedule(id, &mut self.turn);
    }

    /// Stream credit came: a stream with something to send, and not done,
    /// is listed behind the others if it is not listed
    /// ([`Schedule::schedule_unblocked`]).
    #[inline]
    pub(super) fn schedule_unblocked(&mut self, id: u32, schedule: &mut Schedule) {
        if self.has_output() && self.phase != SendPhase::Done {
            schedule.schedule_unblocked(id, &mut self.turn);
        }
    }

    /// The stream's turn is over, and it is listed no more.
    #[inline]
    pub(super) fn end_turn(&mut self) {
        self.turn = Turn::Idle;
    }

    /// The bytes of data a turn sends: a quantum at most, within both
    /// credits.
    #[inline]
    pub(super) fn turn_len(&self, conn_credit: u64, quantum: usize) -> usize {
        (self.queued as u64)
            .min(self.credit())
            .min(conn_credit)
            .min(quantum as u64) as usize
    }

    /// Whether a turn that may send `n` bytes finds the stream's data
    /// blocked on connection credit alone.
    #[inline]
    pub(super) fn blocked_on_connection(&self, n: usize) -> bool {
        self.open_sent() && n == 0 && self.queued > 0 && self.credit() > 0
    }

    /// The frame a turn sending `n` bytes of data starts with (its OPEN,
    /// DATA, or a lone FIN; none if there is nothing of those), and
    /// whether the FIN goes with it.
    #[inline]
    pub(super) fn turn_frame(&mut self, n: usize) -> (Option<Kind>, bool) {
        let fin = self.phase == SendPhase::Finishing && n == self.queued;
        let kind = if self.opening == Opening::Unsent {
            self.opening = Opening::Sent;
            Some(Kind::Open)
        } else if n > 0 {
            Some(Kind::Data)
        } else if fin {
            Some(Kind::Fin)
        } else {
            None
        };
        (kind, fin)
    }

    /// Takes `n` queued bytes for the wire, into `out`, counted as sent.
    #[inline]
    pub(super) fn take(&mut self, n: usize, out: &mut Vec<Bytes>) {
        let mut left = n;
        while left > 0 {
            let front = self.queue.front_mut().expect("queued bytes");
            if front.len() <= left {
                left -= front.len();
                out.push(self.queue.pop_front().expect("front exists"));
            } else {
                out.push(front.split_to(left));
                left = 0;
            }
        }
        self.queued -= n;
        self.offset += n as u64;
    }

    /// Our FIN left.
    #[inline]
    pub(super) fn fin_sent(&mut self) {
        self.phase = SendPhase::Done;
    }

    /// Our RESET in turn, when its turn came (after the FIN, if one is
    /// queued): its code, and it counts as sent.
    #[inline]
    pub(super) fn take_reset_in_turn(&mut self) -> Option<CloseCode> {
        if self.phase != SendPhase::Finishing {
            if let OurReset::InTurn(code) = self.our_reset {
                self.our_reset = OurReset::Sent;
                self.phase = SendPhase::Done;
                return Some(code);
            }
        }
        None
    }

    // --------------------------------------------------------- the application

    /// Room for the writer: its own (`share`, less what it queued), at
    /// most the connection's (`connection_room`); and whether it now waits
    /// for the connection's room, to be listed among its waiters. Without
    /// room, the writer waits for it.
    #[inline]
    pub(super) fn room(&mut self, share: usize, connection_room: usize) -> (usize, bool) {
        let own_room = share.saturating_sub(self.queued);
        let room = own_room.min(connection_room);
        let mut waits = false;
        if room == 0 {
            if own_room == 0 {
                self.writer = WriterWait::Blocked;
            } else if self.writer != WriterWait::BlockedOnConnection {
                self.writer = WriterWait::BlockedOnConnection;
                waits = true;
            }
        }
        (room, waits)
    }

    /// Queues a piece the writer wrote.
    #[inline]
    pub(super) fn push(&mut self, piece: Bytes) {
        self.queued += piece.len();
        self.queue.push_back(piece);
    }

    /// `n` bytes of data sent straight through, nothing being queued:
    /// the frame's kind (the OPEN, if it has not left), and whether the
    /// stream was listed in turn (its turn is this frame, and it is listed
    /// no more).
    #[inline]
    pub(super) fn send_through(&mut self, n: usize) -> (Kind, bool) {
        let kind = match self.opening {
            Opening::Sent => Kind::Data,
            Opening::Unsent => {
                self.opening = Opening::Sent;
                Kind::Open
            }
        };
        let was_listed = std::mem::replace(&mut self.turn, Turn::Idle) == Turn::Listed;
        self.offset += n as u64;
        (kind, was_listed)
    }

    /// The application finishes: FIN follows the queued data, in the
    /// stream's turn. Nothing if it finished (or was reset) already.
    pub(super) fn finish(&mut self, id: u32, schedule: &mut Schedule) {
        if self.phase == SendPhase::Open {
            self.phase = SendPhase::Finishing;
            schedule.schedule(id, &mut self.turn);
        }
    }

    /// The writer waits for the stream's end (a reset, the connection's),
    /// unless it waits for room already.
    #[inline]
    pub(super) fn wait_for_end(&mut self) {
        if self.writer == WriterWait::None {
            self.writer = WriterWait::Blocked;
        }
    }

    // ----------------------------------------------------------- the writer

    /// Wakes the writer if it waits for anything.
    #[inline]
    pub(super) fn wake_writer(&mut self, id: u32, wakes: &mut Wakes) {
        if self.writer != WriterWait::None {
            self.writer = WriterWait::None;
            wakes.wake_writer(id);
        }
    }

    /// Wakes the writer if it waits for room in the connection's send
    /// buffer, which freed up.
    #[inline]
    pub(super) fn wake_room_waiter(&mut self, id: u32, wakes: &mut Wakes) {
        if self.writer == WriterWait::BlockedOnConnection {
            self.writer = WriterWait::None;
            wakes.wake_writer(id);
        }
    }

    /// Wakes the writer if it waits, once no more than `queued` bytes are
    /// left queued.
    #[inline]
    pub(super) fn wake_writer_at(&mut self, queued: usize, id: u32, wakes: &mut Wakes) {
        if self.writer != WriterWait::None && self.queued <= queued {
            self.writer = WriterWait::None;
            wakes.wake_writer(id);
        }
    }

    // ----------------------------------------------------------- the ending

    /// Drops what is queued to send: how many bytes that was.
    #[inline]
    pub(super) fn drop_queue(&mut self) -> usize {
        self.queue.clear();
        std::mem::take(&mut self.queued)
    }

    /// Nothing more goes out but a RESET of ours.
    #[inline]
    pub(super) fn end(&mut self) {
        self.phase = SendPhase::Done;
    }

    /// The peer reset the stream while our direction was open on the wire:
    /// the queue is dropped (how many bytes that was), and nothing more
    /// goes out but the echo, which replaces a RESET of ours in turn.
    pub(super) fn reset_by_peer(&mut self) -> usize {
        let unqueued = self.drop_queue();
        self.phase = SendPhase::Done;
        if self.reset_in_turn() {
            // The echo goes instead.
            self.our_reset = OurReset::None;
        }
        unqueued
    }

    /// Our one RESET of stream `id`, with `code`: among the next control
    /// frames (`sending`) if nothing else of the stream is still to go
    /// out, otherwise in its turn (`schedule`), right after its OPEN or
    /// FIN.
    pub(super) fn queue_reset(
        &mut self,
        id: u32,
        code: CloseCode,
        sending: &mut Sending,
        schedule: &mut Schedule,
    ) {
        if self.open_sent() && self.phase == SendPhase::Done {
            self.our_reset = OurReset::Sent;
            sending.push_reset(id, code);
        } else {
            self.our_reset = OurReset::InTurn(code);
            schedule.schedule(id, &mut self.turn);
        }
    }

    /// The peer refused the stream (above its go-away's last): nothing
    /// more goes out, and a RESET of ours not sent yet never is. If the
    /// OPEN never left, for the peer the stream never existed.
    pub(super) fn refuse(&mut self) {
        if self.open_sent() {
            self.phase = SendPhase::Done;
            if self.reset_in_turn() {
                // Never sent: the peer will not process the stream.
                self.our_reset = OurReset::Sent;
            }
        } else {
            // Never on the wire: nothing of it is ever sent.
            self.opening = Opening::Sent;
            self.phase = SendPhase::Done;
            self.our_reset = OurReset::Sent;
        }
    }

    /// The peer granted `increment` more bytes: the stream's credit now.
    #[inline]
    pub(super) fn add_credit(&mut self, increment: u32) -> u64 {
        self.limit += u64::from(increment);
        self.credit()
    }
}

/// What a stream's writer queued, in order, without copying: one piece
/// inline (a request or a reply is usually one), more in a deque, so that
/// a stream that writes once allocates nothing for its queue.
#[derive(Debug, Default)]
struct SendQueue {
    /// The front, when there is one.
    first: Option<Bytes>,
    rest: VecDeque<Bytes>,
}

impl SendQueue {
    fn push_back(&mut self, piece: Bytes) {
        if self.first.is_none() {
            // An empty front means an empty queue: `pop_front` refills it.
            debug_assert!(self.rest.is_empty());
            self.first = Some(piece);
        } else {
            self.rest.push_back(piece);
        }
    }

    fn front_mut(&mut self) -> Option<&mut Bytes> {
        self.first.as_mut()
    }

    fn pop_front(&mut self) -> Option<Bytes> {
        let front = self.first.take();
        self.first = self.rest.pop_front();
        front
    }

    fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_queue_keeps_its_order_and_allocates_nothing_for_one_piece() {
        let mut q = SendQueue::default();
        q.push_back(Bytes::from_static(b"a"));
        assert_eq!(q.rest.capacity(), 0);
        q.push_back(Bytes::from_static(b"b"));
        q.push_back(Bytes::from_static(b"c"));
        assert_eq!(q.front_mut().map(|b| b.clone()), Some(Bytes::from_static(b"a")));
        assert_eq!(q.pop_front(), Some(Bytes::from_static(b"a")));
        q.push_back(Bytes::from_static(b"d"));
        let rest: Vec<Bytes> = std::iter::from_fn(|| q.pop_front()).collect();
        assert_eq!(rest, [&b"b"[..], b"c", b"d"]);
        assert!(q.front_mut().is_none());
        q.push_back(Bytes::from_static(b"e"));
        q.clear();
        assert_eq!(q.pop_front(), None);
    }
}
