//! Input from the network and time, and what the driver polls for.

use std::time::Instant;

use bytes::Bytes;

use super::{state::Multiplexer, woken::Event};
use crate::{
    error::{CloseCode, Error, Repr, Side, Violation},
    mux::frame::Input,
    record::Origin,
};

impl Multiplexer {
    // --------------------------------------------------------- network input

    /// Feeds decrypted channel bytes, which live in the allocation `origin`.
    pub(crate) fn handle_input(&mut self, bytes: Bytes, origin: Origin, now: Instant) {
        if self.ending.failed().is_some() {
            return;
        }
        let received = self.stats.bytes_received();
        self.keepalive.received(now);
        self.decode(bytes, origin, now);
        if self.stats.bytes_received() > received {
            // Data is flowing: measure the loaded round trip soon.
            self.keepalive.data_arrived(now);
        }
    }

    fn decode(&mut self, mut bytes: Bytes, origin: Origin, now: Instant) {
        loop {
            match self.decoder.next(&mut bytes) {
                Ok(Some(input)) => {
                    if let Err(violation) = self.apply(input, origin, now) {
                        self.violation(violation);
                        return;
                    }
                }
                Ok(None) => return,
                Err(violation) => {
                    self.violation(violation);
                    return;
                }
            }
        }
    }

    fn apply(&mut self, input: Input, origin: Origin, now: Instant) -> Result<(), Violation> {
        tracing::trace!(?input, "frame in");
        self.charge_control(&input, now)?;
        match input {
            Input::Open { stream } => self.on_open(stream, now),
            Input::Data { stream, data } => self.on_data(stream, data, origin),
            Input::Fin { stream } => self.on_fin(stream),
            Input::Reset(reset) => self.on_reset(reset.stream, reset.code, now),
            Input::Credit(credit) => {
                for (stream, increment) in credit.entries {
                    self.on_credit(stream, increment)?;
                }
                Ok(())
            }
            Input::StreamCredit(credit) => self.on_stream_credit(credit.total),
            Input::Ping(ping) => self.keepalive.on_ping(ping.0),
            Input::Pong(pong) if self.ending.is_marker(pong.0) => {
                self.on_go_away_marker();
                Ok(())
            }
            Input::Pong(pong) => self.keepalive.on_pong(pong.0, now, self.p.keepalive),
            Input::GoAway(go_away) => {
                self.on_go_away(go_away, now);
                Ok(())
            }
        }
    }

    /// Takes a control frame's cost from the peer's budget
    /// (docs/SECURITY.md, "Limits"): pings, credit entries, stream credit
    /// and go-aways carry no stream data, and a peer sending more of them
    /// than its traffic earns is flooding.
    fn charge_control(&mut self, input: &Input, now: Instant) -> Result<(), Violation> {
        let frames = match input {
            Input::Ping(_) | Input::StreamCredit(_) | Input::GoAway(_) => 1,
            Input::Credit(credit) => credit.entries.len() as u64,
            Input::Open { .. }
            | Input::Data { .. }
            | Input::Fin { .. }
            | Input::Reset(_)
            | Input::Pong(_) => {
                return Ok(());
            }
        };
        let earned = self.earnings();
        self.peer_budgets.take_control(frames, now, earned)
    }

    /// The peer closed the channel cleanly (its close record, code 0):
    /// a graceful end, which we answer with our own clean close. It is the
    /// end of whoever went away first (ours, if the peer closed because
    /// our go-away left it nothing to do), else the peer's.
    pub(crate) fn handle_eof(&mut self) {
        if self.ending.failed().is_none() {
            self.ending.close_with(CloseCode::NO_ERROR, String::new());
        }
        self.fail(Error::graceful(self.ending.initiator_or(Side::Remote)));
    }

    /// The channel failed: an I/O error, a truncation, the peer's error
    /// close, or a record that failed to open. A failure of ours that the
    /// peer should hear of (a record that failed authentication, a frame
    /// too large) goes into our close record.
    pub(crate) fn handle_transport_error(&mut self, err: Error) {
        if self.ending.failed().is_none() && err.warrants_close() {
            self.ending.close_with(err.close_code(), err.to_string());
        }
        self.fail(err);
    }

    /// Time passed: pings, the idle timeout and the drain deadline.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.ending.failed().is_some() {
            return;
        }
        if let Some(err) = self.keepalive.idle_expired(now, self.p.idle_timeout) {
            self.ending.close_with(CloseCode::IDLE_TIMEOUT, err.to_string());
            self.fail(err);
            return;
        }
        self.drain_deadline_passed(now);
    }

    pub(super) fn violation(&mut self, violation: Violation) {
        tracing::debug!(%violation, "peer violated the protocol");
        let code = violation.code();
        let reason = violation.to_string();
        self.queue_go_away(code, reason.clone());
        self.ending.close_with(code, reason);
        self.fail(Repr::Protocol(violation).into());
    }

    // ---------------------------------------------------------------- output

    /// The next deadline at which [`Self::handle_timeout`] (or a transmit,
    /// for a due ping) has work.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.ending.failed().is_some() {
            return None;
        }
        let idle = self.keepalive.idle_deadline(self.p.idle_timeout);
        [idle, self.keepalive.ping_deadline(), self.ending.drain_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next thing to wake someone for.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.wakes.pop()
    }

    /// Whether anything is waiting to be transmitted.
    pub(crate) fn wants_transmit(&self, now: Instant) -> bool {
        self.has_output() || self.ending.failed().is_none() && self.keepalive.ping_due(now)
    }

    /// Whether frames wait to be transmitted, a due ping apart: what the
    /// application's calls can have queued (pings are the driver's timer's
    /// business), answered without reading the clock.
    pub(crate) fn has_output(&self) -> bool {
        self.control_waiting() || self.ending.failed().is_none() && !self.schedule.is_empty()
    }

    /// Whether control frames wait to be transmitted (a due ping apart).
    pub(super) fn control_waiting(&self) -> bool {
        self.ending.failed().is_none() && self.keepalive.pongs_owed() || self.control_but_pongs_waiting()
    }

    /// Whether all that waits to be transmitted is keepalive: pongs we owe,
    /// our due ping. No task waits for those, so they may wait for the
    /// write of a task the same read woke.
    pub(crate) fn only_keepalive_waiting(&self, now: Instant) -> bool {
        self.ending.failed().is_none()
            && (self.keepalive.pongs_owed() || self.keepalive.ping_due(now))
            && self.schedule.is_empty()
            && !self.control_but_pongs_waiting()
    }

    fn control_but_pongs_waiting(&self) -> bool {
        self.ending.frames_queued()
            || self.ending.failed().is_none()
                && (self.sending.resets_queued() || self.flow.credit_owed() || self.ids.stream_credit_owed())
    }
}
