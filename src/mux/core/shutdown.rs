//! Ending a connection (docs/PROTOCOL.md, section 15.6): go-away and
//! drain, either side's; abandonment when every handle is gone; closing
//! at once; and what each ending is reported as.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::{state::Multiplexer, woken::Event};
use crate::{
    error::{CloseCode, Error, Repr, Side},
    mux::frame::{GoAway, Ping, MAX_REASON},
};

/// The `last stream` of a go-away's first step: every stream of the
/// peer's, until the second step says which.
const PROMISE_ALL: u32 = u32::MAX;

/// The opaque value of the ping that follows a go-away's first step. Our
/// keepalive pings count up from 1, so they never reach it.
const GO_AWAY_MARKER: u64 = u64::MAX;

/// How the connection ends: our go-away and the peer's, the drain, the
/// abandonment, the error that ended it, and our close record. Changed by
/// the ending code in this file only, through its methods.
#[derive(Debug, Default)]
pub(super) struct Ending {
    /// Our graceful go-away, by its steps.
    ours: OurGoAway,
    /// A go-away to send among the next control frames: a step of ours, or
    /// the one a violation ends the connection with.
    go_away_queued: Option<GoAway>,
    /// The ping that follows our go-away's first step is still to send.
    marker_queued: bool,
    /// The peer's graceful go-away: the last of our streams it processes.
    peer_go_away: Option<u32>,
    /// Who went away first: whose graceful end the drain is.
    initiator: Option<Side>,
    drain_deadline: Option<Instant>,
    /// Every handle is gone: close once our queued output is sent.
    abandoned: bool,
    /// The error that ended the connection.
    fatal: Option<Error>,
    /// What our close record says, once the channel is to be closed.
    close: Option<(CloseCode, String)>,
}

/// Our graceful go-away, in its two steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum OurGoAway {
    /// Not started: we open streams, and take the peer's.
    #[default]
    None,
    /// The first step was queued: we open no more streams, and the peer
    /// learns that it may open none; the ping that follows it
    /// ([`GO_AWAY_MARKER`]) marks where the peer heard it, and its pong is
    /// awaited.
    Promised,
    /// The pong came: the second step names the last peer stream we
    /// process.
    Named(u32),
}

impl Ending {
    /// The error that ended the connection, if it ended.
    #[inline]
    pub(super) fn failed(&self) -> Option<&Error> {
        self.fatal.as_ref()
    }

    /// What the application is told of a stream no longer in the table:
    /// the connection's failure, or that the stream finished.
    pub(super) fn stream_gone(&self) -> Error {
        self.failed().cloned().unwrap_or_else(|| Repr::Finished.into())
    }

    /// The connection ended with `err` (unless it had ended already).
    pub(super) fn fail(&mut self, err: Error) {
        self.fatal.get_or_insert(err);
    }

    /// Our close record says `code` and `reason`.
    pub(super) fn close_with(&mut self, code: CloseCode, reason: String) {
        self.close = Some((code, reason));
    }

    /// Whether the channel is to be closed (our close record is set).
    pub(super) fn closing(&self) -> bool {
        self.close.is_some()
    }

    /// What our close record says, once the channel is to be closed.
    pub(super) fn close_record(&self) -> Option<(CloseCode, String)> {
        self.close.clone()
    }

    /// Queues a go-away naming `last`, with `code` and `reason`.
    pub(super) fn queue_go_away(&mut self, last: u32, code: CloseCode, mut reason: String) {
        truncate_utf8(&mut reason, MAX_REASON);
        self.go_away_queued = Some(GoAway { last, code, reason });
    }

    /// Our go-away's first step, and the drain: `false` if it was taken
    /// already, or the connection ended.
    fn start_go_away(&mut self, now: Instant, drain_timeout: Duration) -> bool {
        if self.ours != OurGoAway::None || self.fatal.is_some() {
            return false;
        }
        self.ours = OurGoAway::Promised;
        self.initiator.get_or_insert(Side::Local);
        self.go_away_queued = Some(GoAway {
            last: PROMISE_ALL,
            code: CloseCode::NO_ERROR,
            reason: String::new(),
        });
        self.marker_queued = true;
        self.start_drain(now, drain_timeout);
        true
    }

    /// Whether a pong with `opaque` answers our go-away's ping.
    #[inline]
    pub(super) fn is_marker(&self, opaque: u64) -> bool {
        self.ours == OurGoAway::Promised && opaque == GO_AWAY_MARKER
    }

    /// The second step of our go-away: it names `last`.
    fn name_last(&mut self, last: u32) {
        self.ours = OurGoAway::Named(last);
        self.queue_go_away(last, CloseCode::NO_ERROR, String::new());
    }

    fn start_drain(&mut self, now: Instant, drain_timeout: Duration) {
        if self.drain_deadline.is_none() {
            self.drain_deadline = Some(now + drain_timeout);
        }
    }

    /// The peer's graceful go-away, naming `last`, and the drain: the last
    /// of our streams it processes (a second go-away may only lower it).
    fn peer_goes_away(&mut self, last: u32, now: Instant, drain_timeout: Duration) -> u32 {
        let last = self.peer_go_away.map_or(last, |had| had.min(last));
        self.peer_go_away = Some(last);
        self.initiator.get_or_insert(Side::Remote);
        self.start_drain(now, drain_timeout);
        last
    }

    /// Whether we started a go-away (either step).
    pub(super) fn went_away(&self) -> bool {
        self.ours != OurGoAway::None
    }

    /// Whether our go-away named the last stream of the peer's we process:
    /// the peer's later streams are refused.
    #[inline]
    pub(super) fn last_named(&self) -> bool {
        matches!(self.ours, OurGoAway::Named(_))
    }

    /// Whether the peer sent a graceful go-away.
    pub(super) fn peer_went_away(&self) -> bool {
        self.peer_go_away.is_some()
    }

    /// Who went away first, if either did; `default` otherwise.
    pub(super) fn initiator_or(&self, default: Side) -> Side {
        self.initiator.unwrap_or(default)
    }

    pub(super) fn drain_deadline(&self) -> Option<Instant> {
        self.drain_deadline
    }

    /// Whether a go-away or its ping waits to be sent.
    #[inline]
    pub(super) fn frames_queued(&self) -> bool {
        self.go_away_queued.is_some() || self.marker_queued
    }

    /// Writes the queued go-away and our go-away's ping (that one only
    /// while the connection lives) to `dst`; returns the frames written.
    pub(super) fn put_frames(&mut self, dst: &mut BytesMut) -> u64 {
        let mut frames = 0;
        if let Some(go_away) = self.go_away_queued.take() {
            go_away.encode(dst);
            frames += 1;
        }
        if std::mem::take(&mut self.marker_queued) && self.fatal.is_none() {
            Ping(GO_AWAY_MARKER).encode(dst);
            frames += 1;
        }
        frames
    }
}

impl Multiplexer {
    /// Queues a go-away with `code` (and `reason`), promising to process
    /// the peer's streams up to the last one seen (and none beyond).
    pub(super) fn queue_go_away(&mut self, code: CloseCode, reason: String) {
        self.ending.queue_go_away(self.ids.last_peer(), code, reason);
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
        if self.ending.start_go_away(now, self.p.drain_timeout) {
            self.wakes.push(Event::StreamCredit);
        }
    }

    /// The pong of our go-away's ping: the peer has heard the go-away, and
    /// every stream it opened before that has arrived. The second step
    /// names the last of them.
    pub(super) fn on_go_away_marker(&mut self) {
        self.ending.name_last(self.ids.last_peer());
        // Accept may now be finished.
        self.wakes.push(Event::Incoming);
    }

    /// The peer's go-away: with code 0, it processes our streams up to
    /// `last` and no more; otherwise it ends the connection at once.
    pub(super) fn on_go_away(&mut self, go_away: GoAway, now: Instant) {
        let GoAway { last, code, reason } = go_away;
        if code != CloseCode::NO_ERROR {
            self.fail(Error::closed_by_peer(code, reason));
            return;
        }
        let last = self.ending.peer_goes_away(last, now, self.p.drain_timeout);
        self.refuse_above(last);
        self.wakes.push(Event::StreamCredit);
    }

    /// Every handle is gone: refuse new streams, send what is queued, then
    /// close.
    pub(crate) fn abandon(&mut self, now: Instant) {
        self.go_away(now);
        self.ending.abandoned = true;
    }

    /// Ends the connection now, with `code`: every stream fails with
    /// [`Repr::Closed`] (graceful if `code` is 0) and the peer gets our
    /// code and reason.
    pub(crate) fn close(&mut self, code: CloseCode, reason: &str) {
        if self.ending.failed().is_some() {
            return;
        }
        let mut reason = reason.to_owned();
        truncate_utf8(&mut reason, MAX_REASON);
        self.ending.close_with(code, reason.clone());
        self.fail(
            Repr::Closed {
                side: Side::Local,
                code,
                reason,
            }
            .into(),
        );
    }

    /// The connection ends with `err` (unless it ended already): nothing
    /// more is sent but what is queued for the peer, and everyone wakes.
    pub(super) fn fail(&mut self, err: Error) {
        if self.ending.failed().is_some() {
            return;
        }
        tracing::debug!(error = %err, "connection ended");
        self.ending.fail(err);
        self.schedule.clear();
        self.wakes.push(Event::Lost);
    }

    pub(super) fn drain_deadline_passed(&mut self, now: Instant) {
        if self
            .ending
            .drain_deadline()
            .is_some_and(|deadline| now >= deadline)
        {
            let reason = "drain deadline passed".to_string();
            self.ending.close_with(CloseCode::NO_ERROR, reason.clone());
            self.fail(
                Repr::Closed {
                    side: Side::Local,
                    code: CloseCode::NO_ERROR,
                    reason,
                }
                .into(),
            );
        }
    }

    /// Whether the channel should now be closed, and with what. After a
    /// graceful go-away, once no stream is left.
    pub(crate) fn poll_close(&mut self) -> Option<(CloseCode, String)> {
        if !self.ending.closing() && self.ending.failed().is_none() && self.close_due() {
            self.ending.close_with(CloseCode::NO_ERROR, String::new());
            let side = self.ending.initiator_or(Side::Local);
            self.fail(Error::graceful(side));
        }
        self.ending.close_record()
    }

    /// Whether a graceful end is due: drained after a go-away, or every
    /// handle gone and everything sent.
    pub(crate) fn close_due(&self) -> bool {
        let drained = || {
            (self.ending.last_named() || self.ending.peer_went_away())
                && self.streams.is_empty()
                && self.streams.no_incoming()
        };
        let abandoned_and_sent = || {
            self.ending.abandoned
                && self.ending.go_away_queued.is_none()
                && !self.sending.resets_queued()
                && self
                    .streams
                    .values()
                    .all(|s| s.handles().awaiting_accept() || s.send.done_on_wire())
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
