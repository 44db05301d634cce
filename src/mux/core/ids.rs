//! Stream ids and stream credit (docs/PROTOCOL.md, sections 15.2 and
//! 15.4): who may open which id, and how many.

use crate::{error::Violation, handshake::Role, mux::config::Params};

/// Both sides' stream ids and stream credit. Ids are counted in 64 bits,
/// so that running out of the 32-bit id space is a state, not an overflow.
#[derive(Debug)]
pub(super) struct Ids {
    pub(super) next_local: u64,
    pub(super) local_opened: u32,
    /// How many streams the peer lets us open in all.
    pub(super) local_allowed: u32,
    next_peer: u64,
    peer_opened: u32,
    /// How many streams we let the peer open in all.
    pub(super) peer_allowed: u32,
    pub(super) peer_allowed_sent: u32,
}

impl Ids {
    pub(super) fn new(p: &Params) -> Self {
        let (next_local, next_peer) = match p.role {
            Role::Dialer => (1, 2),
            Role::Acceptor => (2, 1),
        };
        Self {
            next_local,
            local_opened: 0,
            local_allowed: p.peer_max_streams,
            next_peer,
            peer_opened: 0,
            peer_allowed: p.local_max_streams,
            peer_allowed_sent: p.local_max_streams,
        }
    }

    pub(super) fn is_local(id: u32, role: Role) -> bool {
        (id % 2 == 1) == (role == Role::Dialer)
    }

    /// An id that was used before (and may no longer be in the table).
    pub(super) fn was_used(&self, id: u32, role: Role) -> bool {
        id != 0
            && if Self::is_local(id, role) {
                u64::from(id) < self.next_local
            } else {
                u64::from(id) < self.next_peer
            }
    }

    /// Whether we have used our last id.
    pub(super) fn exhausted(&self) -> bool {
        self.next_local > u64::from(u32::MAX)
    }

    /// Streams we may open now: the peer's credit left, 0 once our ids are
    /// used up.
    pub(super) fn available(&self) -> u32 {
        if self.exhausted() {
            0
        } else {
            self.local_allowed.saturating_sub(self.local_opened)
        }
    }

    /// Checks the peer's OPEN of `id` and counts it.
    pub(super) fn peer_opens(&mut self, id: u32, role: Role) -> Result<(), Violation> {
        if Self::is_local(id, role) || id == 0 {
            return Err(Violation::WrongParity(id));
        }
        let expected = self.next_peer;
        if u64::from(id) < expected {
            return Err(Violation::StreamReused(id));
        }
        if u64::from(id) > expected {
            return Err(Violation::StreamGap {
                expected: expected as u32,
                got: id,
            });
        }
        if self.peer_opened >= self.peer_allowed {
            return Err(Violation::StreamLimit {
                id,
                allowed: self.peer_allowed,
            });
        }
        self.next_peer += 2;
        self.peer_opened += 1;
        Ok(())
    }

    /// The last id of the peer's that we have seen (0 if none): what our
    /// go-away promises to process.
    pub(super) fn last_peer(&self) -> u32 {
        self.next_peer.saturating_sub(2) as u32
    }

    /// How many streams we let the peer open in all, so far.
    #[cfg(test)]
    pub(super) fn peer_allowed(&self) -> u32 {
        self.peer_allowed
    }

    /// Streams opened so far, by either side.
    pub(super) fn streams_started(&self) -> u64 {
        // Ids start at 1 and 2 and go up in twos.
        (self.next_local + self.next_peer - 3) / 2
    }

    pub(super) fn stream_credit_owed(&self) -> bool {
        self.peer_allowed > self.peer_allowed_sent
    }
}
