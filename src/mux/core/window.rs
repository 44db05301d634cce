//! Flow-control windows (docs/PROTOCOL.md, section 15.3): how far the peer
//! may send, per stream and per connection, growing toward the
//! bandwidth-delay product; and how far we may.

use std::time::{Duration, Instant};

use crate::mux::params::Params;

/// A flow-control receive window: how far the peer may send.
#[derive(Debug)]
pub(super) struct RecvWindow {
    /// Bytes received.
    received: u64,
    /// The offset the peer may send up to.
    limit: u64,
    /// Bytes the application consumed (or we discarded).
    consumed: u64,
    /// The current window (auto-tuned).
    window: u64,
    max: u64,
    /// When the current window was last granted.
    epoch: Instant,
}

impl RecvWindow {
    pub(super) fn new(window: u64, max: u64, now: Instant) -> Self {
        Self {
            received: 0,
            limit: window,
            consumed: 0,
            window,
            max: max.max(window),
            epoch: now,
        }
    }

    /// Accounts `n` received bytes; `Err((offset, limit))` if that breaks
    /// the credit.
    pub(super) fn receive(&mut self, n: usize) -> Result<(), (u64, u64)> {
        self.received += n as u64;
        if self.received > self.limit {
            return Err((self.received, self.limit));
        }
        Ok(())
    }

    /// Bytes received so far.
    pub(super) fn received(&self) -> u64 {
        self.received
    }

    /// The current window (auto-tuned; for tests).
    #[cfg(test)]
    pub(super) fn window(&self) -> u64 {
        self.window
    }

    /// The application consumed `n` bytes (or we discarded them).
    #[inline]
    pub(super) fn consume(&mut self, n: usize) {
        self.consumed += n as u64;
    }

    /// Whether enough was consumed (half a window) to return credit.
    pub(super) fn credit_due(&self) -> bool {
        self.consumed + self.window - self.limit >= self.window / 2
    }

    /// Grants credit up to a window past what was consumed, growing the
    /// window first if the last one was used up within two round trips.
    pub(super) fn grant(&mut self, now: Instant, rtt: Option<Duration>) -> u32 {
        if let Some(rtt) = rtt {
            if now.saturating_duration_since(self.epoch) < 2 * rtt && self.window < self.max {
                self.window = (self.window * 2).min(self.max);
            }
        }
        self.epoch = now;
        let limit = self.consumed + self.window;
        let increment = limit.saturating_sub(self.limit);
        self.limit = self.limit.max(limit);
        increment as u32
    }
}

/// The connection's flow control: what we may send, what the peer may
/// send, and the credit we owe.
#[derive(Debug)]
pub(super) struct ConnectionFlow {
    send_offset: u64,
    send_limit: u64,
    recv: RecvWindow,
    /// The connection's own credit is owed.
    credit_due: bool,
    /// Streams owed credit, for the next credit frame.
    credit_list: Vec<u32>,
}

impl ConnectionFlow {
    pub(super) fn new(p: &Params, now: Instant) -> Self {
        Self {
            send_offset: 0,
            send_limit: u64::from(p.peer_connection_window),
            recv: RecvWindow::new(u64::from(p.local_connection_window), p.max_connection_window, now),
            credit_due: false,
            credit_list: Vec::new(),
        }
    }

    /// Bytes the connection window lets us send now.
    pub(super) fn send_credit(&self) -> u64 {
        self.send_limit - self.send_offset
    }

    #[inline]
    pub(super) fn sent(&mut self, n: usize) {
        self.send_offset += n as u64;
    }

    /// The peer granted `increment` more bytes.
    pub(super) fn add_send_credit(&mut self, increment: u32) {
        self.send_limit += u64::from(increment);
    }

    /// Accounts `n` received bytes; `Err((offset, limit))` if that breaks
    /// the connection's credit.
    #[inline]
    pub(super) fn receive(&mut self, n: usize) -> Result<(), (u64, u64)> {
        self.recv.receive(n)
    }

    /// The connection's current receive window.
    #[inline]
    pub(super) fn recv_window(&self) -> u64 {
        self.recv.window
    }

    /// The application consumed `n` bytes (or we discarded them): the
    /// connection's credit is owed once half a window was.
    #[inline]
    pub(super) fn consume(&mut self, n: usize) {
        self.recv.consume(n);
        if !self.credit_due && self.recv.credit_due() {
            self.credit_due = true;
        }
    }

    /// Stream `id` is owed credit, in the next credit frame.
    #[inline]
    pub(super) fn list_for_credit(&mut self, id: u32) {
        self.credit_list.push(id);
    }

    /// The streams owed credit, out of the list.
    pub(super) fn take_credit_list(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.credit_list)
    }

    /// The connection's own credit to grant, if it is owed (0 if the
    /// window has nothing to grant).
    pub(super) fn grant_due(&mut self, now: Instant, rtt: Option<Duration>) -> Option<u32> {
        if !self.credit_due {
            return None;
        }
        self.credit_due = false;
        Some(self.recv.grant(now, rtt))
    }

    /// Bytes received and not yet consumed by the application.
    pub(super) fn buffered(&self) -> u64 {
        self.recv.received - self.recv.consumed
    }

    /// Whether a credit frame is owed.
    pub(super) fn credit_owed(&self) -> bool {
        self.credit_due || !self.credit_list.is_empty()
    }
}
