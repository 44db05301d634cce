//! A stream's receiving half: how far the peer may send, the data waiting
//! for the application, how the peer and the application left the
//! direction, and its reader. Changed through its methods only, by the
//! receiving code (`recv`, `flow`) and whoever ends a stream.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{
    buffer::{Pins, RecvBuffer},
    window::RecvWindow,
    woken::Wakes,
};
use crate::{mux::params::Params, record::Origin};

/// The receiving direction, as the peer and the application left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecvState {
    /// Data may arrive, for the application.
    Open,
    /// Data may arrive; the application does not want it: dropped on
    /// arrival (its credit returned).
    Discarding,
    /// FIN arrived: the data is complete, not all read.
    Finished,
    /// The application read to the end (saw the FIN).
    EndRead,
    /// RESET arrived (or the stream never reached the peer): no more data.
    Reset,
}

/// Whether the stream waits in the list of streams owed credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CreditListing {
    Unlisted,
    Listed,
}

/// Whether the stream's reader waits for data, its end or its failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReaderWait {
    None,
    Blocked,
}

/// A stream's receiving half.
#[derive(Debug)]
pub(super) struct RecvHalf {
    window: RecvWindow,
    buffer: RecvBuffer,
    state: RecvState,
    credit: CreditListing,
    reader: ReaderWait,
    /// The round this stream's reader was last woken in, if it has not
    /// read since ([`Multiplexer::woken_readers`](super::Multiplexer::woken_readers)).
    woken_in: u64,
}

impl RecvHalf {
    pub(super) fn new(p: &Params, now: Instant) -> Self {
        Self {
            window: RecvWindow::new(u64::from(p.local_stream_window), p.max_stream_window, now),
            buffer: RecvBuffer::default(),
            state: RecvState::Open,
            credit: CreditListing::Unlisted,
            reader: ReaderWait::None,
            woken_in: 0,
        }
    }

    // ---------------------------------------------------------------- queries

    /// FIN or RESET arrived: the peer sends nothing more.
    #[inline]
    pub(super) fn closed(&self) -> bool {
        matches!(
            self.state,
            RecvState::Finished | RecvState::EndRead | RecvState::Reset
        )
    }

    /// FIN arrived: the data is complete.
    #[inline]
    pub(super) fn fin(&self) -> bool {
        matches!(self.state, RecvState::Finished | RecvState::EndRead)
    }

    /// The application read to the end (saw the FIN).
    #[inline]
    pub(super) fn end_read(&self) -> bool {
        self.state == RecvState::EndRead
    }

    /// Data that arrives is dropped: the application does not want it.
    #[inline]
    pub(super) fn discarding(&self) -> bool {
        self.state == RecvState::Discarding
    }

    /// Whether any byte (or the end) of the peer's direction arrived: the
    /// peer processed the stream, whatever it says after.
    #[inline]
    pub(super) fn heard_from_peer(&self) -> bool {
        self.window.received() > 0 || self.fin()
    }

    /// The current receive window (auto-tuned; for tests).
    #[cfg(test)]
    pub(super) fn window(&self) -> u64 {
        self.window.window()
    }

    // --------------------------------------------------------------- the peer

    /// Accounts `n` received bytes; `Err((offset, limit))` if that breaks
    /// the stream's credit.
    #[inline]
    pub(super) fn receive(&mut self, n: usize) -> Result<(), (u64, u64)> {
        self.window.receive(n)
    }

    /// Buffers received data for the application (`pins` and `budget`:
    /// see [`RecvBuffer::push`]).
    #[inline]
    pub(super) fn push(&mut self, data: Bytes, origin: Origin, pins: &mut Pins, budget: usize) {
        self.buffer.push(data, origin, pins, budget);
    }

    /// FIN arrived.
    #[inline]
    pub(super) fn fin_arrived(&mut self) {
        self.state = RecvState::Finished;
    }

    /// RESET arrived: unless the direction was closed already, no more
    /// data, and what was buffered is dropped (how many bytes that was).
    pub(super) fn reset_arrived(&mut self, pins: &mut Pins) -> Option<usize> {
        if self.closed() {
            return None;
        }
        self.state = RecvState::Reset;
        Some(self.buffer.clear(pins))
    }

    // -------------------------------------------------------- the application

    /// The next piece of the buffered data, at most `max` bytes.
    #[inline]
    pub(super) fn pop(&mut self, max: usize, pins: &mut Pins) -> Option<Bytes> {
        self.buffer.pop(max, pins)
    }

    /// Whether FIN arrived, for a reader that found no data before it:
    /// the end is read.
    #[inline]
    pub(super) fn read_fin(&mut self) -> bool {
        if self.fin() {
            self.state = RecvState::EndRead;
            return true;
        }
        false
    }

    /// The application consumed `n` bytes (or we discarded them): whether
    /// the stream is now owed credit, and to be listed for it.
    #[inline]
    pub(super) fn consume(&mut self, n: usize) -> bool {
        self.window.consume(n);
        if !self.closed() && self.credit == CreditListing::Unlisted && self.window.credit_due() {
            self.credit = CreditListing::Listed;
            return true;
        }
        false
    }

    /// The credit to grant the stream, out of the list of streams owed
    /// some: none once the peer sends nothing more, or while the data is
    /// dropped and the stream is `abandoned` (no handle reads it and our
    /// direction is done).
    pub(super) fn grant_credit(&mut self, now: Instant, rtt: Option<Duration>, abandoned: bool) -> u32 {
        self.credit = CreditListing::Unlisted;
        if self.closed() || self.state == RecvState::Discarding && abandoned {
            return 0;
        }
        self.window.grant(now, rtt)
    }

    /// Data that arrives from now on is dropped, unless the peer's
    /// direction closed.
    #[inline]
    pub(super) fn discard_arrivals(&mut self) {
        if self.state == RecvState::Open {
            self.state = RecvState::Discarding;
        }
    }

    /// Unless the peer's direction closed, drops what is buffered and
    /// what arrives from now on: how many bytes were dropped.
    pub(super) fn discard(&mut self, pins: &mut Pins) -> usize {
        if self.closed() {
            return 0;
        }
        self.state = RecvState::Discarding;
        self.buffer.clear(pins)
    }

    /// Drops what is buffered: how many bytes that was.
    #[inline]
    pub(super) fn clear(&mut self, pins: &mut Pins) -> usize {
        self.buffer.clear(pins)
    }

    /// The stream never reached the peer: nothing of it comes.
    pub(super) fn never_reached_peer(&mut self) {
        self.state = RecvState::Reset;
    }

    // ------------------------------------------------------------- the reader

    /// The reader found nothing to read: it waits.
    #[inline]
    pub(super) fn block_reader(&mut self) {
        self.reader = ReaderWait::Blocked;
    }

    /// Whether the reader waits.
    #[inline]
    pub(super) fn reader_blocked(&self) -> bool {
        self.reader == ReaderWait::Blocked
    }

    /// Wakes stream `id`'s reader if it waits.
    #[inline]
    pub(super) fn wake_reader(&mut self, id: u32, wakes: &mut Wakes) {
        if self.reader == ReaderWait::Blocked {
            self.reader = ReaderWait::None;
            wakes.wake_reader(id, &mut self.woken_in);
        }
    }

    /// The peer's stream waits to be accepted: it counts as a woken
    /// reader ([`Wakes::incoming_stream`]).
    #[inline]
    pub(super) fn incoming(&mut self, wakes: &mut Wakes) {
        wakes.incoming_stream(&mut self.woken_in);
    }

    /// The reader read, or never reads again: it no longer counts as woken
    /// ([`Wakes::reader_done`]).
    #[inline]
    pub(super) fn reader_done(&mut self, wakes: &mut Wakes) {
        wakes.reader_done(&mut self.woken_in);
    }

    /// The application dropped its receiving half: the reader waits no
    /// more, and what is buffered and what arrives is dropped (how many
    /// bytes were buffered).
    pub(super) fn drop_reader(&mut self, pins: &mut Pins, wakes: &mut Wakes) -> usize {
        self.reader = ReaderWait::None;
        wakes.reader_done(&mut self.woken_in);
        let dropped = self.buffer.clear(pins);
        self.discard_arrivals();
        dropped
    }
}
