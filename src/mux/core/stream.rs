//! One stream's state: what it has sent and may send, what it received
//! and the application has not read, and which handles hold it.

use std::time::Instant;

use super::{recv_half::RecvHalf, send_half::SendHalf};
use crate::{
    error::{Error, Side},
    mux::config::Params,
};

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
    pub(super) recv: RecvHalf,
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
            recv: RecvHalf::new(p, now),
            failure: None,
            handles: if local { Handles::Both } else { Handles::Unaccepted },
            slot: Slot::Counted,
        }
    }

    /// Both directions closed on the wire: nothing more will arrive or leave.
    pub(super) fn wire_done(&self) -> bool {
        self.send.done_on_wire() && self.recv.closed() && self.send.open_sent()
    }
}
