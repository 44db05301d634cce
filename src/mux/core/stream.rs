//! One stream's state: what it has sent and may send, what it received
//! and the application has not read, and which handles hold it.

use std::{collections::VecDeque, time::Instant};

use bytes::Bytes;

use super::{buffer::RecvBuffer, schedule::Turn, window::RecvWindow};
use crate::{
    error::{CloseCode, Error},
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

#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) local: bool,
    // --- sending ---
    pub(super) send: SendPhase,
    pub(super) open_sent: bool,
    pub(super) queue: SendQueue,
    pub(super) queued: usize,
    pub(super) send_offset: u64,
    pub(super) send_limit: u64,
    pub(super) turn: Turn,
    /// A RESET to send after whatever of this stream is on the way.
    pub(super) pending_reset: Option<CloseCode>,
    /// We sent (or queued) a RESET: never a second one.
    pub(super) reset_sent: bool,
    pub(super) write_blocked: bool,
    /// The writer waits for room in the connection's send buffer, not its
    /// own ([`Multiplexer::write_room`](super::Multiplexer::write_room)).
    pub(super) awaits_connection_room: bool,
    // --- receiving ---
    pub(super) recv: RecvWindow,
    pub(super) recv_queue: RecvBuffer,
    /// FIN or RESET arrived: the peer sends nothing more.
    pub(super) recv_closed: bool,
    /// FIN arrived: the data is complete.
    pub(super) fin: bool,
    /// The application read to the end (saw the FIN).
    pub(super) fin_read: bool,
    /// The application does not want the data: drop it on arrival.
    pub(super) discard: bool,
    pub(super) credit_listed: bool,
    pub(super) read_blocked: bool,
    /// The round this stream's reader was last woken in, if it has not
    /// read since ([`Multiplexer::woken_readers`](super::Multiplexer::woken_readers)).
    pub(super) woken_in: u64,
    // --- the application ---
    pub(super) failure: Option<Error>,
    pub(super) awaiting_accept: bool,
    /// The peer reset the stream before we accepted it, and before its
    /// FIN: a cancelled request, which `accept` skips.
    pub(super) reset_before_accept: bool,
    pub(super) send_alive: bool,
    pub(super) recv_alive: bool,
    pub(super) released: bool,
}

impl StreamState {
    pub(super) fn new(local: bool, p: &Params, now: Instant) -> Self {
        Self {
            local,
            send: SendPhase::Open,
            open_sent: !local,
            queue: SendQueue::default(),
            queued: 0,
            send_offset: 0,
            send_limit: u64::from(p.peer_stream_window),
            turn: Turn::Idle,
            pending_reset: None,
            reset_sent: false,
            write_blocked: false,
            awaits_connection_room: false,
            recv: RecvWindow::new(u64::from(p.local_stream_window), p.max_stream_window, now),
            recv_queue: RecvBuffer::default(),
            recv_closed: false,
            fin: false,
            fin_read: false,
            discard: false,
            credit_listed: false,
            read_blocked: false,
            woken_in: 0,
            failure: None,
            awaiting_accept: !local,
            reset_before_accept: false,
            send_alive: local,
            recv_alive: local,
            released: false,
        }
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
        !self.open_sent
            || (self.send == SendPhase::Finishing && self.queued == 0)
            || (self.queued > 0 && self.send_credit() > 0)
            || (self.pending_reset.is_some() && self.send != SendPhase::Finishing)
    }

    /// Both directions closed on the wire: nothing more will arrive or leave.
    pub(super) fn wire_done(&self) -> bool {
        self.send == SendPhase::Done && self.pending_reset.is_none() && self.recv_closed && self.open_sent
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
