//! One stream's state: its sending half ([`SendHalf`], beside `send`),
//! its receiving half ([`RecvHalf`], beside `recv`), and what is the
//! application's: who opened it, how it failed, which handles hold it and
//! whether it counts against the peer's limit, changed here only.

use std::time::{Duration, Instant};

use super::{recv_half::RecvHalf, send_half::SendHalf};
use crate::{
    error::{Error, Side},
    mux::params::Params,
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

    fn drop_send(&mut self) {
        *self = match *self {
            Self::Both => Self::RecvOnly,
            Self::SendOnly => Self::Gone,
            other => other,
        };
    }

    fn drop_recv(&mut self) {
        *self = match *self {
            Self::Both => Self::SendOnly,
            Self::RecvOnly => Self::Gone,
            other => other,
        };
    }
}

/// Whether a peer's stream still counts against the limit we gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Counted,
    /// Given back (stream credit owed or sent).
    Released,
}

/// One stream's state: the two halves, each changed through its methods,
/// and the application's part, private to this file.
#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) send: SendHalf,
    pub(super) recv: RecvHalf,
    // --- the application ---
    opener: Side,
    failure: Option<Error>,
    handles: Handles,
    slot: Slot,
}

impl StreamState {
    pub(super) fn new(opener: Side, p: &Params, now: Instant) -> Self {
        let local = opener == Side::Local;
        Self {
            send: SendHalf::new(opener, p),
            recv: RecvHalf::new(p, now),
            opener,
            failure: None,
            handles: if local { Handles::Both } else { Handles::Unaccepted },
            slot: Slot::Counted,
        }
    }

    /// Both directions closed on the wire: nothing more will arrive or leave.
    #[inline]
    pub(super) fn wire_done(&self) -> bool {
        self.send.done_on_wire() && self.recv.closed() && self.send.open_sent()
    }

    /// Whether the peer opened the stream.
    #[inline]
    pub(super) fn opened_by_peer(&self) -> bool {
        self.opener == Side::Remote
    }

    /// Why the stream failed, if it did: what its reads (before its FIN)
    /// and writes return.
    #[inline]
    pub(super) fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// The stream fails with `err`, unless it failed already.
    #[inline]
    pub(super) fn fail(&mut self, err: Error) {
        self.failure.get_or_insert(err);
    }

    /// Which of the application's handles hold the stream.
    #[inline]
    pub(super) fn handles(&self) -> Handles {
        self.handles
    }

    /// A peer's stream that crossed our go-away: refused, never seen by the
    /// application; what arrives is dropped, and nothing of ours goes out
    /// but the RESET.
    pub(super) fn refuse_incoming(&mut self) {
        self.handles = Handles::Gone;
        self.recv.discard_arrivals();
        self.send.end();
    }

    /// The peer reset its stream: if it waited to be accepted, it is
    /// cancelled (`accept` skips it), and `true`.
    pub(super) fn cancel_unaccepted(&mut self) -> bool {
        if self.handles == Handles::Unaccepted {
            self.handles = Handles::Cancelled;
            return true;
        }
        false
    }

    /// The application accepts the stream, and holds both halves; unless
    /// the peer cancelled it (`false`): then no handle ever holds it.
    pub(super) fn accept(&mut self) -> bool {
        if self.handles == Handles::Cancelled {
            self.handles = Handles::Gone;
            return false;
        }
        self.handles = Handles::Both;
        true
    }

    /// The application dropped its sending half.
    #[inline]
    pub(super) fn drop_send(&mut self) {
        self.handles.drop_send();
    }

    /// The application dropped its receiving half.
    #[inline]
    pub(super) fn drop_recv(&mut self) {
        self.handles.drop_recv();
    }

    /// A peer's stream still counted against the limit we gave it no
    /// longer is: `true` if it was (the slot goes back to the peer).
    #[inline]
    pub(super) fn release_slot(&mut self) -> bool {
        if self.opener == Side::Remote && self.slot == Slot::Counted {
            self.slot = Slot::Released;
            return true;
        }
        false
    }

    /// The credit to grant the stream, out of the list of streams owed
    /// some ([`RecvHalf::grant_credit`]): none while its data is dropped,
    /// no handle reads it and our direction is done.
    #[inline]
    pub(super) fn grant_credit(&mut self, now: Instant, rtt: Option<Duration>) -> u32 {
        let abandoned = !self.handles.recv_alive() && self.send.is_done();
        self.recv.grant_credit(now, rtt, abandoned)
    }
}
