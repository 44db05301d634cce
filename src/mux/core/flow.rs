//! Flow control (docs/PROTOCOL.md, section 15.3): the credit the peer
//! grants us, and the credit frames that return what the application read.

use std::time::Instant;

use super::state::Multiplexer;
use crate::{
    error::Violation,
    mux::{frame::Credit, params::MAX_WINDOW},
};

impl Multiplexer {
    pub(super) fn on_credit(&mut self, id: u32, increment: u32) -> Result<(), Violation> {
        if increment == 0 {
            return Err(Violation::ZeroCredit(id));
        }
        if id == 0 {
            self.flow.add_send_credit(increment);
            if self.flow.send_credit() > MAX_WINDOW {
                return Err(Violation::CreditOverflow(0));
            }
            // The streams that waited for connection credit alone (only
            // ever while there was none) go first.
            self.schedule.connection_credit();
            return Ok(());
        }
        if self.stream_mut(id)?.is_none() {
            return Ok(()); // credit crossing our close of the stream
        }
        let s = self.streams.get_mut(id).expect("found above");
        if s.send.add_credit(increment) > MAX_WINDOW {
            return Err(Violation::CreditOverflow(id));
        }
        s.send.schedule_unblocked(id, &mut self.schedule);
        Ok(())
    }

    /// Returns `n` consumed bytes of stream `id` to the flow-control windows.
    pub(super) fn consume(&mut self, id: u32, n: usize) {
        self.flow.consume(n);
        if let Some(s) = self.streams.get_mut(id) {
            if s.recv.consume(n) {
                self.flow.list_for_credit(id);
            }
        }
    }

    /// Credit frames for the connection and every stream owed some.
    pub(super) fn put_credit(&mut self, now: Instant) {
        let rtt = self.keepalive.tuning_rtt();
        let mut entries: Vec<(u32, u32)> = Vec::new();
        // (An increment of 0 is a violation to the peer: never sent.)
        if let Some(increment) = self.flow.grant_due(now, rtt).filter(|&i| i != 0) {
            entries.push((0, increment));
        }
        for id in self.flow.take_credit_list() {
            let Some(s) = self.streams.get_mut(id) else {
                continue;
            };
            let increment = s.grant_credit(now, rtt);
            if increment != 0 {
                entries.push((id, increment));
            }
        }
        self.stats
            .frames_sent(Credit::encode_all(&entries, self.sending.frames()));
    }
}
