//! Ending a connection (docs/PROTOCOL.md, section 15.6): go-away and
//! drain, either side's; abandonment when every handle is gone; closing
//! at once; and what each ending is reported as.

use std::time::Instant;

use super::{
    state::{Event, Multiplexer},
    stream::SendPhase,
};
use crate::{
    error::{CloseCode, Error, Side},
    mux::frame::{GoAway, MAX_REASON},
};

/// The `last stream` of a go-away's first step: every stream of the
/// peer's, until the second step says which.
const PROMISE_ALL: u32 = u32::MAX;

/// The opaque value of the ping that follows a go-away's first step. Our
/// keepalive pings count up from 1, so they never reach it.
const GO_AWAY_MARKER: u64 = u64::MAX;

impl Multiplexer {
    /// Queues a go-away with `code` (and `reason`), promising to process
    /// the peer's streams up to the last one seen (and none beyond).
    pub(super) fn queue_go_away(&mut self, code: CloseCode, mut reason: String) {
        truncate_utf8(&mut reason, MAX_REASON);
        self.shutdown.go_away_queued = Some(GoAway {
            last: self.ids.last_peer(),
            code,
            reason,
        });
    }

    /// Starts a graceful shutdown: the peer may open no more streams, open
    /// ones finish, then the connection closes (at the latest at `now` plus
    /// the drain timeout).
    ///
    /// In two steps, as HTTP/2 servers do it: a go-away that promises
    /// every stream (so streams the peer opened before it heard are still
    /// processed, not refused), followed by a ping; when its pong comes,
    /// every stream the peer opened before hearing has arrived, and a
    /// second go-away names the last of them.
    pub(crate) fn go_away(&mut self, now: Instant) {
        if self.shutdown.go_away_started || self.fatal.is_some() {
            return;
        }
        self.shutdown.go_away_started = true;
        self.shutdown.initiator.get_or_insert(Side::Local);
        self.shutdown.go_away_queued = Some(GoAway {
            last: PROMISE_ALL,
            code: CloseCode::NO_ERROR,
            reason: String::new(),
        });
        let marker = GO_AWAY_MARKER;
        self.shutdown.go_away_marker = Some(marker);
        self.shutdown.marker_queued = Some(marker);
        self.start_drain(now);
        self.events.push_back(Event::StreamCredit);
    }

    /// The pong of our go-away's ping: the peer has heard the go-away, and
    /// every stream it opened before that has arrived. The second step
    /// names the last of them.
    pub(super) fn on_go_away_marker(&mut self) {
        self.shutdown.go_away_marker = None;
        let last = self.ids.last_peer();
        self.shutdown.go_away_sent = Some(last);
        self.queue_go_away(CloseCode::NO_ERROR, String::new());
        // Accept may now be finished.
        self.events.push_back(Event::Incoming);
    }

    fn start_drain(&mut self, now: Instant) {
        if self.shutdown.drain_deadline.is_none() {
            self.shutdown.drain_deadline = Some(now + self.p.drain_timeout);
        }
    }

    /// The peer's go-away: with code 0, it processes our streams up to
    /// `last` and no more; otherwise it ends the connection at once.
    pub(super) fn on_go_away(&mut self, go_away: GoAway, now: Instant) {
        let GoAway { last, code, reason } = go_away;
        if code != CloseCode::NO_ERROR {
            self.fail(Error::closed_by_peer(code, reason));
            return;
        }
        // A second go-away may only lower the last id.
        let last = self.shutdown.peer_go_away.map_or(last, |had| had.min(last));
        self.shutdown.peer_go_away = Some(last);
        self.shutdown.initiator.get_or_insert(Side::Remote);
        self.start_drain(now);
        self.refuse_above(last);
        self.events.push_back(Event::StreamCredit);
    }

    /// Every handle is gone: refuse new streams, send what is queued, then
    /// close.
    pub(crate) fn abandon(&mut self, now: Instant) {
        self.go_away(now);
        self.shutdown.abandoned = true;
    }

    /// Ends the connection now, with `code`: every stream fails with
    /// [`Error::Closed`] (graceful if `code` is 0) and the peer gets our
    /// code and reason.
    pub(crate) fn close(&mut self, code: CloseCode, reason: &str) {
        if self.fatal.is_some() {
            return;
        }
        let mut reason = reason.to_owned();
        truncate_utf8(&mut reason, MAX_REASON);
        self.close = Some((code, reason.clone()));
        self.fail(Error::Closed {
            side: Side::Local,
            code,
            reason,
        });
    }

    pub(super) fn drain_deadline_passed(&mut self, now: Instant) {
        if self
            .shutdown
            .drain_deadline
            .is_some_and(|deadline| now >= deadline)
        {
            let reason = "drain deadline passed".to_string();
            self.close = Some((CloseCode::NO_ERROR, reason.clone()));
            self.fail(Error::Closed {
                side: Side::Local,
                code: CloseCode::NO_ERROR,
                reason,
            });
        }
    }

    /// Whether the channel should now be closed, and with what. After a
    /// graceful go-away, once no stream is left.
    pub(crate) fn poll_close(&mut self) -> Option<(CloseCode, String)> {
        if self.close.is_none() && self.fatal.is_none() && self.close_due() {
            self.close = Some((CloseCode::NO_ERROR, String::new()));
            let side = self.shutdown.initiator.unwrap_or(Side::Local);
            self.fail(Error::graceful(side));
        }
        self.close.clone()
    }

    /// Whether a graceful end is due: drained after a go-away, or every
    /// handle gone and everything sent.
    pub(crate) fn close_due(&self) -> bool {
        let drained = || {
            (self.shutdown.go_away_sent.is_some() || self.shutdown.peer_go_away.is_some())
                && self.streams.is_empty()
                && self.accept_queue.is_empty()
        };
        let abandoned_and_sent = || {
            self.shutdown.abandoned
                && self.shutdown.go_away_queued.is_none()
                && self.resets.is_empty()
                && self
                    .streams
                    .values()
                    .all(|s| s.handles.awaiting_accept() || s.send == SendPhase::Done && !s.reset_in_turn())
        };
        drained() || abandoned_and_sent()
    }
}

fn truncate_utf8(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
}
