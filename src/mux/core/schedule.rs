//! The turn order of the streams with something to send: deficit-free
//! round robin by quanta, with a list for newcomers in front, as in
//! fq_codel (RFC 8290, section 4.1).
//!
//! A stream that becomes ready from idle joins the `new` list and is
//! served before every stream of the `old` list, so a request opened while
//! a hundred bulk streams are busy leaves within a record or two instead of
//! a hundred. After its turn a stream goes to the tail of `old`, even when
//! it has nothing left to send: it stays there as a placeholder until its
//! turn in `old` comes round, so a stream cannot stay new (and first) by
//! sending a quantum, going quiet and coming back at once.
//!
//! Streams whose data waits only for connection credit step out into
//! `conn_blocked`; the credit puts them back at the front, in their order,
//! and meanwhile the streams behind them go, so their OPEN, FIN and RESET
//! frames (which need no credit) are not held up.

use std::collections::VecDeque;

/// Where a stream stands in the turn order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    /// In no list: nothing to send, or not since its last turn ended.
    Idle,
    /// Listed, in `new`, `old` or `conn_blocked`.
    Listed,
}

/// Which list a stream's turn came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum List {
    New,
    Old,
}

#[derive(Debug, Default)]
pub(super) struct Schedule {
    new: VecDeque<u32>,
    old: VecDeque<u32>,
    conn_blocked: VecDeque<u32>,
}

impl Schedule {
    /// Lists a stream that has something to send, if it is not listed.
    pub(super) fn schedule(&mut self, id: u32, turn: &mut Turn) {
        if *turn == Turn::Idle {
            *turn = Turn::Listed;
            self.new.push_back(id);
        }
    }

    /// Lists a stream whose data waited for its stream credit, if it is not
    /// listed: behind the others, as if it had kept its place (it was
    /// blocked, not idle: a stream its reader keeps in credit must not
    /// jump the queue every time the credit comes).
    pub(super) fn schedule_unblocked(&mut self, id: u32, turn: &mut Turn) {
        if *turn == Turn::Idle {
            *turn = Turn::Listed;
            self.old.push_back(id);
        }
    }

    /// The next stream in turn (taken out of its list; its `Turn` stays
    /// `Listed` until the caller settles it).
    pub(super) fn next(&mut self) -> Option<(u32, List)> {
        if let Some(id) = self.new.pop_front() {
            return Some((id, List::New));
        }
        self.old.pop_front().map(|id| (id, List::Old))
    }

    /// After its turn: the stream goes to the back of the old list.
    pub(super) fn requeue(&mut self, id: u32) {
        self.old.push_back(id);
    }

    /// The stream's data waits for connection credit alone.
    pub(super) fn block_on_connection(&mut self, id: u32) {
        self.conn_blocked.push_back(id);
    }

    /// Connection credit came: the streams that waited for it go first, in
    /// their order.
    pub(super) fn connection_credit(&mut self) {
        while let Some(id) = self.conn_blocked.pop_back() {
            self.new.push_front(id);
        }
    }

    /// Whether any stream waits for connection credit.
    pub(super) fn any_blocked_on_connection(&self) -> bool {
        !self.conn_blocked.is_empty()
    }

    /// Whether no stream is in turn (those waiting for connection credit
    /// apart).
    pub(super) fn is_empty(&self) -> bool {
        self.new.is_empty() && self.old.is_empty()
    }

    /// Whether `id` is the one stream in turn, or none is.
    pub(super) fn is_empty_but(&self, id: u32) -> bool {
        match (self.new.len(), self.old.len()) {
            (0, 0) => true,
            (1, 0) => self.new[0] == id,
            (0, 1) => self.old[0] == id,
            _ => false,
        }
    }

    /// Takes every stream out of turn (their `Turn`s are the caller's).
    pub(super) fn clear(&mut self) {
        self.new.clear();
        self.old.clear();
        self.conn_blocked.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newcomers_go_first_and_then_behind_the_old() {
        let mut s = Schedule::default();
        let mut turns = [Turn::Idle; 4];
        for id in 0..3 {
            s.schedule(id, &mut turns[id as usize]);
        }
        let (first, from) = s.next().unwrap();
        assert_eq!((first, from), (0, List::New));
        s.requeue(0);
        s.schedule(0, &mut turns[0]);
        // A newcomer overtakes the old list, not the other newcomers.
        s.schedule(3, &mut turns[3]);
        let order: Vec<_> = std::iter::from_fn(|| s.next()).collect();
        assert_eq!(
            order,
            [(1, List::New), (2, List::New), (3, List::New), (0, List::Old)]
        );
    }

    #[test]
    fn streams_waiting_for_connection_credit_come_back_first_in_order() {
        let mut s = Schedule::default();
        let mut turns = [Turn::Idle; 3];
        for id in 0..3 {
            s.schedule(id, &mut turns[id as usize]);
        }
        let _ = s.next();
        s.block_on_connection(0);
        let _ = s.next();
        s.block_on_connection(1);
        assert!(s.any_blocked_on_connection());
        assert!(s.is_empty_but(2));
        s.connection_credit();
        let order: Vec<_> = std::iter::from_fn(|| s.next()).map(|(id, _)| id).collect();
        assert_eq!(order, [0, 1, 2]);
    }
}
