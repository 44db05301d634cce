//! One stream's state: what it has sent and may send, what it received
//! and the application has not read, and which handles hold it.

use std::{collections::VecDeque, time::Instant};

use bytes::Bytes;

use super::{buffer::RecvBuffer, schedule::Turn, window::RecvWindow};
use crate::{
    error::{CloseCode, Error, Side},
    mux::config::Params,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SendPhase {
    Open,
    /// FIN queued behind the data.
    Finishing,
    /// FIN or RESET sent (or received): nothing more goes out.
    Done,
}

/// Whether the peer knows the stream: its OPEN left (a peer's stream is
/// known from the start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opening {
    Unsent,
    Sent,
}

/// Our RESET of the stream: there is only ever one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OurReset {
    None,
    /// To send in the stream's turn, after whatever of it is on the way
    /// (its OPEN, its FIN).
    InTurn(CloseCode),
    /// Queued among the control frames, sent, or no longer needed.
    Sent,
}

/// What the stream's writer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriterWait {
    None,
    /// Room in its own share, or the stream's end (`stopped`).
    Blocked,
    /// Room in the connection's send buffer: listed among the room waiters
    /// ([`Multiplexer::write_room`](super::Multiplexer::write_room)).
    BlockedOnConnection,
}

/// The receiving direction, as the peer and the application left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecvState {
    /// Data may arrive, for the application.
    Open,
    /// Data may arrive; the application does not want it: dropped on
    /// arrival (its credit returned).
    Discarding,
    /// FIN arrived: the data is complete, not all read.
    Finished,
    /// The application read to the end (saw the FIN).
    EndRead,
    /// RESET arrived (or the stream never reached the peer): no more data.
    Reset,
}

/// Whether the stream waits in the list of streams owed credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CreditListing {
    Unlisted,
    Listed,
}

/// Whether the stream's reader waits for data, its end or its failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReaderWait {
    None,
    Blocked,
}

/// Which of the application's handles hold the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handles {
    /// A peer's stream not yet accepted.
    Unaccepted,
    /// The peer reset it before we accepted it, and before its FIN: a
    /// cancelled request, which `accept` skips.
    Cancelled,
    Both,
    SendOnly,
    RecvOnly,
    /// Both halves dropped (or never handed out).
    Gone,
}

impl Handles {
    pub(super) fn send_alive(self) -> bool {
        matches!(self, Self::Both | Self::SendOnly)
    }

    pub(super) fn recv_alive(self) -> bool {
        matches!(self, Self::Both | Self::RecvOnly)
    }

    pub(super) fn awaiting_accept(self) -> bool {
        matches!(self, Self::Unaccepted | Self::Cancelled)
    }

    pub(super) fn drop_send(&mut self) {
        *self = match *self {
            Self::Both => Self::RecvOnly,
            Self::SendOnly => Self::Gone,
            other => other,
        };
    }

    pub(super) fn drop_recv(&mut self) {
        *self = match *self {
            Self::Both => Self::SendOnly,
            Self::RecvOnly => Self::Gone,
            other => other,
        };
    }
}

/// Whether a peer's stream still counts against the limit we gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    Counted,
    /// Given back (stream credit owed or sent).
    Released,
}

#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) opener: Side,
    // --- sending ---
    pub(super) send: SendPhase,
    pub(super) opening: Opening,
    pub(super) queue: SendQueue,
    pub(super) queued: usize,
    pub(super) send_offset: u64,
    pub(super) send_limit: u64,
    pub(super) turn: Turn,
    pub(super) our_reset: OurReset,
    pub(super) writer: WriterWait,
    // --- receiving ---
    pub(super) recv: RecvWindow,
    pub(super) recv_queue: RecvBuffer,
    pub(super) recv_state: RecvState,
    pub(super) credit: CreditListing,
    pub(super) reader: ReaderWait,
    /// The round this stream's reader was last woken in, if it has not
    /// read since ([`Multiplexer::woken_readers`](super::Multiplexer::woken_readers)).
    pub(super) woken_in: u64,
    // --- the application ---
    pub(super) failure: Option<Error>,
    pub(super) handles: Handles,
    pub(super) slot: Slot,
}

impl StreamState {
    pub(super) fn new(opener: Side, p: &Params, now: Instant) -> Self {
        let local = opener == Side::Local;
        Self {
            opener,
            send: SendPhase::Open,
            opening: if local { Opening::Unsent } else { Opening::Sent },
            queue: SendQueue::default(),
            queued: 0,
            send_offset: 0,
            send_limit: u64::from(p.peer_stream_window),
            turn: Turn::Idle,
            our_reset: OurReset::None,
            writer: WriterWait::None,
            recv: RecvWindow::new(u64::from(p.local_stream_window), p.max_stream_window, now),
            recv_queue: RecvBuffer::default(),
            recv_state: RecvState::Open,
            credit: CreditListing::Unlisted,
            reader: ReaderWait::None,
            woken_in: 0,
            failure: None,
            handles: if local { Handles::Both } else { Handles::Unaccepted },
            slot: Slot::Counted,
        }
    }

    pub(super) fn open_sent(&self) -> bool {
        self.opening == Opening::Sent
    }

    /// FIN or RESET arrived: the peer sends nothing more.
    pub(super) fn recv_closed(&self) -> bool {
        matches!(
            self.recv_state,
            RecvState::Finished | RecvState::EndRead | RecvState::Reset
        )
    }

    /// FIN arrived: the data is complete.
    pub(super) fn fin(&self) -> bool {
        matches!(self.recv_state, RecvState::Finished | RecvState::EndRead)
    }

    /// Whether any byte (or the end) of the peer's direction arrived: the
    /// peer processed the stream, whatever it says after.
    pub(super) fn heard_from_peer(&self) -> bool {
        self.recv.received() > 0 || self.fin()
    }

    /// A RESET of ours waits for the stream's turn.
    pub(super) fn reset_in_turn(&self) -> bool {
        matches!(self.our_reset, OurReset::InTurn(_))
    }

    pub(super) fn send_credit(&self) -> u64 {
        self.send_limit - self.send_offset
    }

    /// Drops what is queued to send: how many bytes that was.
    pub(super) fn drop_queue(&mut self) -> usize {
        self.queue.clear();
        std::mem::take(&mut self.queued)
    }

    /// Whether a transmit turn would emit anything for this stream.
    pub(super) fn has_output(&self) -> bool {
        !self.open_sent()
            || (self.send == SendPhase::Finishing && self.queued == 0)
            || (self.queued > 0 && self.send_credit() > 0)
            || (self.reset_in_turn() && self.send != SendPhase::Finishing)
    }

    /// Both directions closed on the wire: nothing more will arrive or leave.
    pub(super) fn wire_done(&self) -> bool {
        self.send == SendPhase::Done && !self.reset_in_turn() && self.recv_closed() && self.open_sent()
    }
}

/// What a stream's writer queued, in order, without copying: one piece
/// inline (a request or a reply is usually one), more in a deque, so that
/// a stream that writes once allocates nothing for its queue.
#[derive(Debug, Default)]
pub(super) struct SendQueue {
    /// The front, when there is one.
    first: Option<Bytes>,
    rest: VecDeque<Bytes>,
}

impl SendQueue {
    pub(super) fn push_back(&mut self, piece: Bytes) {
        if self.first.is_none() {
            // An empty front means an empty queue: `pop_front` refills it.
            debug_assert!(self.rest.is_empty());
            self.first = Some(piece);
        } else {
            self.rest.push_back(piece);
        }
    }

    pub(super) fn front_mut(&mut self) -> Option<&mut Bytes> {
        self.first.as_mut()
    }

    pub(super) fn pop_front(&mut self) -> Option<Bytes> {
        let front = self.first.take();
        self.first = self.rest.pop_front();
        front
    }

    pub(super) fn clear(&mut self) {
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
