//! The multiplexer's state: one connection's streams, windows, timers and
//! ending, and what the driver learns from it.
//!
//! The [`Multiplexer`] coordinates; its state lives in owners, each
//! defined beside the code that changes it and changed through its methods
//! (as quinn-proto's `Connection` over its `StreamsState`, `SendBuffer`,
//! ...): the streams and the accept queue ([`Streams`]), stream ids and
//! stream credit ([`Ids`]), the windows ([`ConnectionFlow`]), the pinned
//! read buffers ([`Pins`]), the turn order ([`Schedule`]), the send buffer's
//! accounting, room waiters, queued resets and frame buffer ([`Sending`]),
//! keepalive ([`Keepalive`]), the peer's budgets ([`PeerBudgets`]), the
//! ending ([`Ending`]), who to wake ([`Wakes`]) and the counters
//! ([`Counters`]). One stream's state, in the [`Streams`], is owned the
//! same way: its sending half ([`SendHalf`]), its receiving half
//! ([`RecvHalf`]) and the application's part of the [`StreamState`], each
//! with private fields.
//!
//! [`SendHalf`]: super::send_half::SendHalf
//! [`RecvHalf`]: super::recv_half::RecvHalf
//! [`StreamState`]: super::stream::StreamState

use std::time::Instant;

use bytes::Bytes;

use super::{
    budgets::{Earnings, PeerBudgets},
    buffer::Pins,
    ids::Ids,
    keepalive::Keepalive,
    schedule::Schedule,
    sending::Sending,
    shutdown::Ending,
    stats::{CoreStats, Counters},
    streams::Streams,
    window::ConnectionFlow,
    woken::Wakes,
};
use crate::{
    error::Error,
    mux::{frame::Decoder, params::Params},
};

/// What a read returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    Data(Bytes),
    Fin,
    Blocked,
}

/// The multiplexer state machine of one connection: a coordinator over the
/// owners of its state (see the module's docs), whose fields the core's
/// files reach through the owners' methods only.
#[derive(Debug)]
pub(crate) struct Multiplexer {
    pub(super) p: Params,
    pub(super) decoder: Decoder,
    /// The streams, and the peer's that wait to be accepted.
    pub(super) streams: Streams,
    /// Both sides' stream ids and stream credit.
    pub(super) ids: Ids,
    /// The connection's windows, and the streams owed credit.
    pub(super) flow: ConnectionFlow,
    /// The read buffers that received data keeps alive.
    pub(super) pins: Pins,
    /// Streams with something to send, in turn order.
    pub(super) schedule: Schedule,
    /// The connection's send buffer, its room waiters, the RESETs to send
    /// and the frame buffer.
    pub(super) sending: Sending,
    pub(super) keepalive: Keepalive,
    /// The resets and control frames the peer may still send.
    pub(super) peer_budgets: PeerBudgets,
    /// Go-away, drain, abandonment, the error and the close record.
    pub(super) ending: Ending,
    /// Who to wake: the driver's events and the woken readers
    /// ([`Multiplexer::woken_readers`]).
    pub(super) wakes: Wakes,
    /// Bytes, frames and streams counted.
    pub(super) stats: Counters,
}

impl Multiplexer {
    /// A multiplexer for a channel established at `now`.
    pub(crate) fn new(p: Params, now: Instant) -> Self {
        Self {
            decoder: Decoder::default(),
            streams: Streams::default(),
            ids: Ids::new(&p),
            flow: ConnectionFlow::new(&p, now),
            pins: Pins::default(),
            schedule: Schedule::default(),
            sending: Sending::default(),
            keepalive: Keepalive::new(now, p.keepalive, p.budgets.pending_pongs),
            peer_budgets: PeerBudgets::new(p.local_max_streams, &p.budgets, now),
            ending: Ending::default(),
            wakes: Wakes::default(),
            stats: Counters::default(),
            p,
        }
    }

    // ---------------------------------------------------------------- getters

    /// Streams in the table (open, or finished but still held).
    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Streams open in either direction: in the table and not closed both
    /// ways (a stream finished both ways whose handles linger is not), for
    /// the counters a person reads. A walk of the table.
    pub(crate) fn streams_open_either_way(&self) -> usize {
        self.streams
            .values()
            .filter(|stream| !(stream.send.done_on_wire() && stream.recv.closed()))
            .count()
    }

    /// Our streams the peer's limit counts now, and the peer's our limit
    /// counts; then the most of each at once.
    pub(crate) fn streams_counted(&self) -> ((u32, u32), (u32, u32)) {
        (
            (self.ids.local_counted(), self.ids.peer_counted()),
            self.ids.high_water(),
        )
    }

    /// Streams whose reader was woken, or which wait to be accepted, and
    /// have not been read since, in this round of the driver's: their
    /// tasks are about to run, and what they write in reply can leave in
    /// one write with what was written before them.
    pub(crate) fn woken_readers(&self) -> usize {
        self.wakes.woken_readers()
    }

    /// The driver flushes: readers woken before now no longer count in
    /// [`Multiplexer::woken_readers`] (one that never reads again must not
    /// hold back flushes for its lifetime).
    pub(crate) fn next_wake_round(&mut self) {
        self.wakes.next_round();
    }

    /// What the connection's traffic has earned the peer in control frames.
    pub(super) fn earnings(&self) -> Earnings {
        Earnings {
            data_bytes: self.stats.data_bytes(),
            streams: self.ids.streams_started(),
        }
    }

    /// Smoothed round-trip time from pings, once measured.
    pub(crate) fn rtt(&self) -> Option<std::time::Duration> {
        self.keepalive.rtt()
    }

    pub(crate) fn stats(&self) -> CoreStats {
        self.stats.snapshot(self.decoder.frames())
    }

    /// The error that ended the connection, if it ended.
    pub(crate) fn error(&self) -> Option<&Error> {
        self.ending.failed()
    }

    /// The current receive window of a stream (for tests and stats).
    #[cfg(test)]
    pub(super) fn stream_window(&self, id: u32) -> Option<u64> {
        self.streams.get(id).map(|s| s.recv.window())
    }

    /// Bytes streams have queued to send, not yet sent.
    pub(crate) fn queued(&self) -> u64 {
        debug_assert_eq!(
            self.sending.queued() as u64,
            self.streams.values().map(|s| s.send.queued() as u64).sum::<u64>()
        );
        self.sending.queued() as u64
    }

    /// Bytes buffered for the application across all streams.
    pub(crate) fn buffered(&self) -> u64 {
        self.flow.buffered()
    }

    /// The connection's receive window now, and the bytes the peer's
    /// connection window lets us send now.
    pub(crate) fn connection_windows(&self) -> (u64, u64) {
        (self.flow.recv_window(), self.flow.send_credit())
    }

    /// The connection went idle: lets the buffer its frames are written
    /// into go (4 KiB per idle connection otherwise).
    pub(crate) fn release_idle_buffers(&mut self) {
        self.sending.release_idle();
    }

    /// Bytes allocated for the frames' buffer.
    #[cfg(test)]
    pub(crate) fn frame_buffer_capacity(&self) -> usize {
        self.sending.frames_capacity()
    }

    /// Bytes of received-data allocations that streams' buffers keep alive
    /// without copying (bounded by the connection window).
    pub(crate) fn pinned(&self) -> usize {
        self.pins.pinned()
    }
}
