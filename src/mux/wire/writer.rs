//! The channel's writing half behind one interface, whatever its
//! transport, and what stands in for it once the driver has ended.

use std::{
    task::{Context, Poll},
    time::Instant,
};

use tokio::io::AsyncWrite;

use crate::{
    error::{CloseCode, Error, Repr},
    record::ChannelWriter,
};

/// The channel's writing half, whatever its transport: what the shared
/// state writes frames into.
pub(crate) trait FrameWriter: Send {
    fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        now: Instant,
    ) -> Poll<Result<usize, Error>>;
    fn reserve(&mut self, len: usize, now: Instant);
    fn poll_flush(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Error>>;
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>>;
    fn set_close(&mut self, code: CloseCode, reason: String);
    fn records_sent(&self) -> (u64, u64);
    fn key_updates_sent(&self) -> u64;
    fn buffer_capacity(&self) -> usize;
    fn release_idle_buffers(&mut self);
}

impl<W: AsyncWrite + Unpin + Send> FrameWriter for ChannelWriter<W> {
    fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        now: Instant,
    ) -> Poll<Result<usize, Error>> {
        ChannelWriter::poll_write_data(self, cx, data, now)
    }
    fn reserve(&mut self, len: usize, now: Instant) {
        ChannelWriter::reserve(self, len, now);
    }
    fn poll_flush(&mut self, cx: &mut Context<'_>, now: Instant) -> Poll<Result<(), Error>> {
        ChannelWriter::poll_flush(self, cx, now)
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        ChannelWriter::poll_close(self, cx)
    }
    fn set_close(&mut self, code: CloseCode, reason: String) {
        ChannelWriter::set_close(self, code, reason);
    }
    fn records_sent(&self) -> (u64, u64) {
        ChannelWriter::records_sent(self)
    }
    fn key_updates_sent(&self) -> u64 {
        ChannelWriter::key_updates_sent(self)
    }
    fn buffer_capacity(&self) -> usize {
        ChannelWriter::buffer_capacity(self)
    }
    fn release_idle_buffers(&mut self) {
        ChannelWriter::release_idle_buffers(self);
    }
}

/// What stands in for the channel's writing half once the driver has ended:
/// the transport is let go at once (a peer still writing to us hears the
/// close, rather than waiting on a socket nobody reads), however long the
/// application keeps its handles; only the counters remain.
pub(crate) struct ReleasedWriter {
    pub(crate) records_sent: (u64, u64),
    pub(crate) key_updates_sent: u64,
}

impl FrameWriter for ReleasedWriter {
    fn poll_write_data(&mut self, _: &mut Context<'_>, _: &[u8], _: Instant) -> Poll<Result<usize, Error>> {
        Poll::Ready(Err(Repr::DriverStopped.into()))
    }
    fn reserve(&mut self, _: usize, _: Instant) {}
    fn poll_flush(&mut self, _: &mut Context<'_>, _: Instant) -> Poll<Result<(), Error>> {
        Poll::Ready(Err(Repr::DriverStopped.into()))
    }
    fn poll_close(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }
    fn set_close(&mut self, _: CloseCode, _: String) {}
    fn records_sent(&self) -> (u64, u64) {
        self.records_sent
    }
    fn key_updates_sent(&self) -> u64 {
        self.key_updates_sent
    }
    fn buffer_capacity(&self) -> usize {
        0
    }
    fn release_idle_buffers(&mut self) {}
}
