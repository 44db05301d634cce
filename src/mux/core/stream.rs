//! One stream's state: what it has sent and may send, what it received
//! and the application has not read, and which handles hold it.

use std::time::Instant;

use super::{buffer::RecvBuffer, send_half::SendHalf, window::RecvWindow};
use crate::{
    error::{Error, Side},
    mux::config::Params,
};

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
    pub(super) send: SendHalf,
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
            send: SendHalf::new(opener, p),
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

    /// Both directions closed on the wire: nothing more will arrive or leave.
    pub(super) fn wire_done(&self) -> bool {
        self.send.done_on_wire() && self.recv_closed() && self.send.open_sent()
    }
}
