//! Keepalive (docs/PROTOCOL.md, section 15.5): pings that measure the round
//! trip window tuning uses and detect a dead peer, and the pongs we owe.

use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::{
    error::{Error, Repr, Violation},
    mux::frame::{Ping, Pong},
};

/// While data arrives, the round trip is measured again this often: under
/// load it includes the queues, which is what window tuning must cover.
const RTT_REFRESH: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(super) struct Keepalive {
    /// Opaque values of pings received and not yet answered.
    pongs: Vec<u64>,
    /// How many may wait: a peer that pings faster than we can answer (or
    /// pings and never reads) floods us, and gets a go-away with
    /// `EXCESSIVE_LOAD` rather than an ever longer queue of pongs
    /// ([`Budgets::pending_pongs`](crate::mux::Budgets::pending_pongs)).
    max_pongs: usize,
    ping_due: Option<Instant>,
    ping_outstanding: Option<(u64, Instant)>,
    last_ping: Option<Instant>,
    next_ping: u64,
    rtt: Option<Duration>,
    /// The larger of the smoothed and the latest round trip: what window
    /// tuning uses, so a queue that builds up under load counts at once.
    tuning_rtt: Option<Duration>,
    /// When the peer was last heard from: any channel data counts.
    last_recv: Instant,
}

impl Keepalive {
    /// Keepalive for a connection established at `now`, pinging every
    /// `interval` while idle. The first ping, which measures the round trip
    /// window tuning uses, rides with the first frames sent for another
    /// reason, or goes when data first arrives: a connection's start costs
    /// no record of its own.
    pub(super) fn new(now: Instant, interval: Option<Duration>, max_pongs: usize) -> Self {
        Self {
            pongs: Vec::new(),
            max_pongs,
            ping_due: interval.map(|interval| now + interval),
            ping_outstanding: None,
            last_ping: None,
            next_ping: 1,
            rtt: None,
            tuning_rtt: None,
            last_recv: now,
        }
    }

    pub(super) fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    pub(super) fn tuning_rtt(&self) -> Option<Duration> {
        self.tuning_rtt
    }

    /// Anything arrived from the peer.
    pub(super) fn received(&mut self, now: Instant) {
        self.last_recv = now;
    }

    /// Stream data arrived: measure the loaded round trip soon.
    pub(super) fn data_arrived(&mut self, now: Instant) {
        if self.ping_outstanding.is_none() {
            let refresh = self.last_ping.map_or(now, |sent| sent + RTT_REFRESH);
            self.ping_due = Some(self.ping_due.map_or(refresh, |due| due.min(refresh)));
        }
    }

    pub(super) fn on_ping(&mut self, opaque: u64) -> Result<(), Violation> {
        if self.pongs.len() >= self.max_pongs {
            return Err(Violation::PingFlood(self.max_pongs));
        }
        self.pongs.push(opaque);
        Ok(())
    }

    pub(super) fn on_pong(
        &mut self,
        opaque: u64,
        now: Instant,
        keepalive: Option<Duration>,
    ) -> Result<(), Violation> {
        match self.ping_outstanding {
            Some((id, sent)) if id == opaque => {
                let sample = now.saturating_duration_since(sent);
                let smoothed = match self.rtt {
                    None => sample,
                    Some(rtt) => (rtt * 7 + sample) / 8,
                };
                self.rtt = Some(smoothed);
                self.tuning_rtt = Some(smoothed.max(sample));
                self.ping_outstanding = None;
                self.ping_due = keepalive.map(|interval| now + interval);
                Ok(())
            }
            _ => Err(Violation::UnsolicitedPong),
        }
    }

    /// Pongs owed, then our ping if one is due, or if it is our first and
    /// other frames are going out anyway (`other_output`); returns the
    /// frames written.
    pub(super) fn put_frames(&mut self, now: Instant, dst: &mut BytesMut, other_output: bool) -> u64 {
        let mut frames = 0;
        for opaque in self.pongs.drain(..) {
            Pong(opaque).encode(dst);
            frames += 1;
        }
        let first = self.last_ping.is_none() && (other_output || frames > 0);
        if self.ping_outstanding.is_none() && (first || self.ping_due.is_some_and(|due| now >= due)) {
            let opaque = self.next_ping;
            self.next_ping += 1;
            Ping(opaque).encode(dst);
            self.ping_outstanding = Some((opaque, now));
            self.last_ping = Some(now);
            self.ping_due = None;
            frames += 1;
        }
        frames
    }

    pub(super) fn pongs_owed(&self) -> bool {
        !self.pongs.is_empty()
    }

    pub(super) fn ping_due(&self, now: Instant) -> bool {
        self.ping_outstanding.is_none() && self.ping_due.is_some_and(|due| now >= due)
    }

    /// When a ping is due, if none is out.
    pub(super) fn ping_deadline(&self) -> Option<Instant> {
        if self.ping_outstanding.is_none() {
            self.ping_due
        } else {
            None
        }
    }

    pub(super) fn idle_deadline(&self, idle: Option<Duration>) -> Option<Instant> {
        idle.map(|idle| self.last_recv + idle)
    }

    /// The error if the peer has been silent past `idle`.
    pub(super) fn idle_expired(&self, now: Instant, idle: Option<Duration>) -> Option<Error> {
        let idle = idle?;
        (now >= self.last_recv + idle).then(|| Repr::IdleTimeout(idle).into())
    }
}
