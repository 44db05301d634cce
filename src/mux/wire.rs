//! The one owner of the channel's writing half: it writes what the
//! [`Arbiter`] lets through, from the task the arbiter names. What goes out
//! next is never decided here: every frame comes from the core's scheduler
//! ([`Multiplexer::poll_transmit`]), or, for data nothing else waits ahead
//! of, from the core's own decision to let it through
//! ([`Multiplexer::write_through`]).
//!
//! Two kinds of task write:
//!
//! - **The task that produced the output**, inline ([`Wire::send_from_task`]):
//!   a request or a reply leaves without a hand-off to another task. A
//!   stream's `AsyncWrite` with nothing waiting ahead does not even queue:
//!   its bytes go from the caller's buffer straight into the records
//!   ([`Wire::write_through`]), copied once, as over a bare channel.
//! - **The driver**, on its turn ([`Wire::transmit`]), for everything else:
//!   what the transport pushed back (its waker is the driver's, whoever
//!   wrote), output past a task's share, and what no task writes (credit,
//!   pongs, resets).

use std::{
    collections::VecDeque,
    task::{Context, Poll, Waker},
    time::Instant,
};

use bytes::Bytes;

use super::{
    arbiter::{Arbiter, Output},
    core::Multiplexer,
    frame::HEADER_LEN as MUX_HEADER_LEN,
};
use crate::{
    error::{CloseCode, Error, Repr},
    record::ChannelWriter,
};

/// Bytes a transmit takes from the core per batch before writing them.
pub(crate) const TRANSMIT_BATCH: usize = 256 * 1024;

/// The channel's writing half and what waits for it.
pub(crate) struct Wire {
    /// `None` once the driver has ended: the transport is let go at once (a
    /// peer still writing to us hears the close, rather than waiting on a
    /// socket nobody reads), however long the application keeps its
    /// handles; its counts stay in `released`.
    writer: Option<ChannelWriter>,
    /// Records and bytes sent, and key updates, as of the release.
    released: ((u64, u64), u64),
    /// Frames taken from the core that the transport has not taken yet.
    out: VecDeque<Bytes>,
    batch: Vec<Bytes>,
}

fn stopped() -> Error {
    Repr::DriverStopped.into()
}

impl Wire {
    pub(crate) fn new(writer: ChannelWriter) -> Self {
        Self {
            writer: Some(writer),
            released: ((0, 0), 0),
            out: VecDeque::new(),
            batch: Vec::new(),
        }
    }

    /// Records and bytes sent so far.
    pub(crate) fn records_sent(&self) -> (u64, u64) {
        self.writer
            .as_ref()
            .map_or(self.released.0, ChannelWriter::records_sent)
    }

    /// Key updates sent so far.
    pub(crate) fn key_updates_sent(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or(self.released.1, ChannelWriter::key_updates_sent)
    }

    /// Bytes of send buffer held.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.writer.as_ref().map_or(0, ChannelWriter::buffer_capacity)
    }

    /// Lets the send buffer go if nothing waits in it.
    pub(crate) fn release_idle_buffers(&mut self) {
        if let Some(writer) = &mut self.writer {
            writer.release_idle_buffers();
        }
    }

    /// The code and reason the close record carries.
    pub(crate) fn set_close(&mut self, code: CloseCode, reason: String) {
        if let Some(writer) = &mut self.writer {
            writer.set_close(code, reason);
        }
    }

    /// Sends the close record and shuts the transport's write side.
    pub(crate) fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        match &mut self.writer {
            Some(writer) => writer.poll_close(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    /// The driver has ended: the transport goes (returned, to be dropped
    /// outside the lock), its counters stay, and nothing more is written.
    pub(crate) fn release(&mut self) -> Option<ChannelWriter> {
        self.released = (self.records_sent(), self.key_updates_sent());
        self.out.clear();
        self.writer.take()
    }

    /// Whether frames wait for the transport, which pushed back.
    pub(crate) fn pushed_back(&self) -> bool {
        !self.out.is_empty()
    }

    /// Sends what the core has now from the calling task, as the arbiter
    /// allows ([`Arbiter::task_write`]): with `flush`, flushes it too,
    /// unless readers woken ahead of this task are still to write. The
    /// transport registers `driver`, never the caller's waker, so a
    /// pushed-back write always resumes.
    ///
    /// Returns whether the driver must run: output or a flush waits for
    /// it. (Whatever else the core has is the caller's to kick.)
    pub(crate) fn send_from_task(
        &mut self,
        core: &mut Multiplexer,
        arbiter: &mut Arbiter,
        driver: &Waker,
        now: Instant,
        flush: bool,
    ) -> bool {
        let plan = arbiter.task_write(Output {
            queued: core.has_output(),
            flush,
            woken_readers: core.woken_readers(),
            pushed_back: self.pushed_back(),
            failed: core.error().is_some(),
        });
        if plan.write {
            let mut cx = Context::from_waker(driver);
            match self.transmit(core, arbiter, &mut cx, now, plan.batches, plan.flush) {
                Ok(written) => arbiter.spent(written),
                Err(err) => core.handle_transport_error(err),
            }
            if arbiter.flush_past_hold(plan) {
                if let Err(err) = self.transmit(core, arbiter, &mut cx, now, 0, true) {
                    core.handle_transport_error(err);
                }
            }
        }
        arbiter.task_done(plan);
        self.pushed_back() || arbiter.unflushed() > 0
    }

    /// Writes up to `data.len()` bytes of stream `id` (at most a batch)
    /// straight into the channel, which copies them once, into the
    /// records, when the arbiter ([`Arbiter::may_write_through`]) and the
    /// core ([`Multiplexer::write_through`]) let them through; the flush is
    /// the caller's, or the driver's. What the transport does not take at
    /// once waits in `out` for the driver, and until it has gone, data
    /// queues. Returns the bytes taken, or `None` when the data must be
    /// queued instead.
    ///
    /// Without the task's share, a writer whose task never yields (the
    /// transport taking every write) wrote megabytes while the writers of
    /// other streams waited for the lock, with nothing queued for the
    /// scheduler to share out (measured: 100 streams of 4 MiB over
    /// loopback TCP, the first quarter of the run gave one stream 1.9-2.7
    /// times the mean).
    pub(crate) fn write_through(
        &mut self,
        core: &mut Multiplexer,
        arbiter: &mut Arbiter,
        driver: &Waker,
        now: Instant,
        id: u32,
        data: &[u8],
    ) -> Option<Result<usize, Error>> {
        if !arbiter.may_write_through(self.pushed_back(), core.open_streams()) {
            return None;
        }
        let mut header = [0; MUX_HEADER_LEN];
        let max = data.len().min(TRANSMIT_BATCH);
        let n = match core.write_through(id, max, &mut header) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(err) => return Some(Err(err)),
        };
        arbiter.spent(n);
        let Some(writer) = &mut self.writer else {
            core.handle_transport_error(stopped());
            return Some(Ok(n));
        };
        let mut cx = Context::from_waker(driver);
        // One record for the header and the data, not one ending where
        // the buffer the header started does.
        writer.reserve(header.len() + n, now);
        for piece in [&header[..], &data[..n]] {
            let mut taken = 0;
            while taken < piece.len() && self.out.is_empty() {
                match writer.poll_write_data(&mut cx, &piece[taken..], now) {
                    Poll::Ready(Ok(k)) => {
                        arbiter.wrote(k);
                        taken += k;
                    }
                    Poll::Ready(Err(err)) => {
                        core.handle_transport_error(err);
                        return Some(Ok(n));
                    }
                    Poll::Pending => break,
                }
            }
            if taken < piece.len() {
                // Behind whatever the transport has not taken yet.
                self.out.push_back(Bytes::copy_from_slice(&piece[taken..]));
            }
        }
        Some(Ok(n))
    }

    /// Writes the core's frames into the channel until it has none (after
    /// at most `batches` batches) or the channel pushes back; with `flush`,
    /// flushes once the queue drains. `cx` is the driver's. Returns the
    /// bytes taken from the core.
    pub(crate) fn transmit(
        &mut self,
        core: &mut Multiplexer,
        arbiter: &mut Arbiter,
        cx: &mut Context<'_>,
        now: Instant,
        batches: usize,
        flush: bool,
    ) -> Result<usize, Error> {
        let writer = self.writer.as_mut().ok_or_else(stopped)?;
        let mut taken = 0;
        let mut written = 0;
        loop {
            if self.out.is_empty() {
                if taken == batches {
                    break;
                }
                taken += 1;
                written += core.poll_transmit(now, &mut self.batch, TRANSMIT_BATCH);
                self.out.extend(self.batch.drain(..));
                if self.out.is_empty() {
                    break;
                }
            }
            while let Some(front) = self.out.front_mut() {
                match writer.poll_write_data(cx, front, now) {
                    Poll::Ready(Ok(n)) => {
                        arbiter.wrote(n);
                        if n == front.len() {
                            self.out.pop_front();
                        } else {
                            bytes::Buf::advance(front, n);
                        }
                    }
                    Poll::Ready(Err(err)) => return Err(err),
                    Poll::Pending => return Ok(written),
                }
            }
        }
        if flush && arbiter.unflushed() > 0 && self.out.is_empty() {
            match writer.poll_flush(cx, now) {
                Poll::Ready(Ok(())) => arbiter.flushed(),
                Poll::Ready(Err(err)) => return Err(err),
                Poll::Pending => {}
            }
        }
        Ok(written)
    }
}
