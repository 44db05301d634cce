//! Stream ids and stream credit (docs/PROTOCOL.md, sections 15.2 and
//! 15.4): who may open which id, and how many.

use crate::{
    error::Violation,
    handshake::Role,
    mux::params::{id_space, Params},
};

/// Both sides' stream ids and stream credit. Ids are counted in 64 bits,
/// so that running out of the 32-bit id space is a state, not an overflow.
#[derive(Debug)]
pub(super) struct Ids {
    next_local: u64,
    local_opened: u32,
    /// How many streams the peer lets us open in all.
    local_allowed: u32,
    next_peer: u64,
    peer_opened: u32,
    /// How many streams we let the peer open in all.
    peer_allowed: u32,
    /// What our last stream credit frame said of it.
    peer_allowed_sent: u32,
    /// The limits as the Setups stated them, from which what each side's
    /// streams count against the other's limit follows.
    local_limit: u32,
    peer_limit: u32,
    /// The most of each side's streams counted at once.
    local_high_water: u32,
    peer_high_water: u32,
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
            local_limit: p.peer_max_streams,
            peer_limit: p.local_max_streams,
            local_high_water: 0,
            peer_high_water: 0,
        }
    }

    /// Our streams the peer's limit counts now: those opened, less the
    /// slots its stream credit gave back (if it raised its limit, fewer).
    pub(super) fn local_counted(&self) -> u32 {
        let given_back = self.local_allowed.saturating_sub(self.local_limit);
        self.local_opened.saturating_sub(given_back)
    }

    /// The peer's streams our limit counts now (each until its slot goes
    /// back).
    pub(super) fn peer_counted(&self) -> u32 {
        let given_back = self.peer_allowed.saturating_sub(self.peer_limit);
        self.peer_opened.saturating_sub(given_back)
    }

    /// The most of our streams, and of the peer's, counted at once.
    pub(super) fn high_water(&self) -> (u32, u32) {
        (self.local_high_water, self.peer_high_water)
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

    /// The id of a stream we open, counted: `None` while the peer's stream
    /// credit is used up.
    pub(super) fn open_local(&mut self) -> Option<u32> {
        if self.local_opened >= self.local_allowed {
            return None;
        }
        let id = self.next_local as u32;
        self.next_local += 2;
        self.local_opened += 1;
        self.local_high_water = self.local_high_water.max(self.local_counted());
        Some(id)
    }

    /// Our ids from `next` on are the ones left (for tests).
    #[cfg(test)]
    pub(super) fn set_next_local(&mut self, next: u64) {
        self.next_local = next;
    }

    /// The peer's stream credit: it lets us open `total` streams in all.
    /// Whether that is more than before (it may not be less, nor beyond
    /// the id space).
    pub(super) fn on_stream_credit(&mut self, total: u32, role: Role) -> Result<bool, Violation> {
        let had = self.local_allowed;
        if total < had || total > id_space(role) {
            return Err(Violation::BadStreamCredit { had, got: total });
        }
        self.local_allowed = total;
        Ok(total > had)
    }

    /// A stream of the peer's gave its slot back: it may open one more.
    pub(super) fn release_peer_slot(&mut self) {
        self.peer_allowed += 1;
    }

    /// The total of a stream credit frame, if one is owed: it is then
    /// counted as sent.
    pub(super) fn take_stream_credit(&mut self) -> Option<u32> {
        if !self.stream_credit_owed() {
            return None;
        }
        self.peer_allowed_sent = self.peer_allowed;
        Some(self.peer_allowed)
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
        self.peer_high_water = self.peer_high_water.max(self.peer_counted());
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
