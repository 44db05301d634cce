//! The halves a connection's driver splits a channel into: one reads
//! records, one writes them, each over its half of the transport.

use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{
    buffers::Origin,
    halves::{OpenSide, SealSide},
};
use crate::error::{CloseCode, Error};

/// The transport's reading half, its type erased here once: each read
/// of the socket is one dynamic call, and nothing above is generic over
/// the transport.
pub(crate) type TransportRead = Box<dyn AsyncRead + Send + Unpin>;
/// The transport's writing half, erased once as [`TransportRead`].
pub(crate) type TransportWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// The reading half of a split channel.
pub(crate) struct ChannelReader {
    pub(super) io: TransportRead,
    pub(super) read: OpenSide,
    pub(super) unread: Bytes,
}

impl std::fmt::Debug for ChannelReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelReader")
            .field("records_received", &self.records_received())
            .finish_non_exhaustive()
    }
}

impl ChannelReader {
    /// The next chunk of application data and the allocation it lives in;
    /// `None` once the peer has closed cleanly.
    pub(crate) fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<(Bytes, Origin)>, Error>> {
        if !self.unread.is_empty() {
            // Read through `AsyncRead` before the split: a copy, owned.
            let bytes = std::mem::take(&mut self.unread);
            let origin = Origin {
                buffer: u64::MAX,
                size: bytes.len(),
            };
            return Poll::Ready(Ok(Some((bytes, origin))));
        }
        self.read.poll_data(&mut self.io, cx)
    }

    /// Drops the plaintext waiting to be read before the transport's (the
    /// early data the handshake accepted), unread: for a reader that found
    /// it malformed and acts on none of it.
    pub(crate) fn discard_unread(&mut self) {
        self.unread = Bytes::new();
    }

    /// Records and bytes received so far.
    pub(crate) fn records_received(&self) -> (u64, u64) {
        (self.read.opener.records, self.read.opener.bytes)
    }

    /// Whether part of a record has arrived and the rest has not.
    pub(crate) fn partial_record(&self) -> bool {
        self.unread.is_empty() && self.read.opener.partial_record()
    }

    /// Key updates opened since the last call (for a read budget: each
    /// costs a key derivation).
    pub(crate) fn take_key_updates(&mut self) -> u32 {
        self.read.opener.take_key_updates()
    }

    /// Key updates the peer sent.
    pub(crate) fn key_updates_received(&self) -> u64 {
        self.read.opener.key_updates
    }

    /// Bytes of read buffer held.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.read.opener.capacity()
    }

    /// Lets the read buffer go if it holds nothing (the connection is idle).
    pub(crate) fn release_idle_buffers(&mut self) {
        self.read.opener.release_idle();
    }
}

/// The writing half of a split channel.
pub(crate) struct ChannelWriter {
    pub(super) io: TransportWrite,
    pub(super) write: SealSide,
}

impl std::fmt::Debug for ChannelWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelWriter")
            .field("records_sent", &self.records_sent())
            .finish_non_exhaustive()
    }
}

impl ChannelWriter {
    /// Copies `data` into records (started at `now`); waits while sealed
    /// bytes are past the high-water mark.
    pub(crate) fn poll_write_data(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
        now: std::time::Instant,
    ) -> Poll<Result<usize, Error>> {
        self.write.poll_write_data(&mut self.io, cx, data, now)
    }

    /// The next writes bring `len` bytes (a frame's header and data):
    /// the record they start has room for all of them, up to its size.
    pub(crate) fn reserve(&mut self, len: usize, now: std::time::Instant) {
        self.write.reserve(len, now);
    }

    /// Seals the open record (at `now`) and writes everything out.
    pub(crate) fn poll_flush(
        &mut self,
        cx: &mut Context<'_>,
        now: std::time::Instant,
    ) -> Poll<Result<(), Error>> {
        self.write.poll_flush(&mut self.io, cx, now)
    }

    /// Sends the close record and shuts the transport's write side.
    pub(crate) fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.write.poll_close(&mut self.io, cx)
    }

    /// The code and reason our close record carries (unless sealing
    /// itself failed: then that failure's).
    pub(crate) fn set_close(&mut self, code: CloseCode, reason: String) {
        self.write.set_close(code, reason);
    }

    /// Records and bytes sent so far.
    pub(crate) fn records_sent(&self) -> (u64, u64) {
        (self.write.sealer.records, self.write.sealer.bytes)
    }

    /// Key updates we sent.
    pub(crate) fn key_updates_sent(&self) -> u64 {
        self.write.sealer.key_updates
    }

    /// Bytes of send buffer held.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.write.sealer.capacity()
    }

    /// Lets the send buffer go if nothing waits in it (the connection is
    /// idle).
    pub(crate) fn release_idle_buffers(&mut self) {
        self.write.sealer.release_idle();
    }
}

/// Halves over `read` and `write` with no handshake and no keys (records
/// as the Plaintext suite frames them), for tests of what drives them.
#[cfg(test)]
pub(crate) fn plaintext(
    read: TransportRead,
    write: TransportWrite,
    max_payload: usize,
) -> (ChannelReader, ChannelWriter) {
    use super::{open::Opener, seal::Sealer, sizer::RecordSizer};
    let mut opener = Opener::new(bytes::BytesMut::new(), max_payload);
    opener.authenticated();
    let reader = ChannelReader {
        io: read,
        read: OpenSide::new(opener),
        unread: Bytes::new(),
    };
    let writer = ChannelWriter {
        io: write,
        write: SealSide::new(Sealer::new(RecordSizer::fixed(max_payload))),
    };
    (reader, writer)
}
