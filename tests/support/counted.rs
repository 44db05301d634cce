//! A transport that counts its reads and writes: for tests that bound
//! what the data path asks of the kernel (tests/syscalls.rs) or how
//! writes are batched (tests/connection.rs).

use std::{
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    task::{Context, Poll},
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Reads and writes, as one end's transport made them.
#[derive(Debug, Default)]
pub struct Counts {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    /// Bytes read and written.
    pub read_bytes: AtomicU64,
    pub written_bytes: AtomicU64,
}

impl Counts {
    /// Writes so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Bytes read so far.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes.load(Ordering::Relaxed)
    }

    /// Bytes written so far.
    pub fn written_bytes(&self) -> u64 {
        self.written_bytes.load(Ordering::Relaxed)
    }

    /// Reads and writes so far.
    pub fn total(&self) -> u64 {
        self.reads.load(Ordering::Relaxed) + self.writes.load(Ordering::Relaxed)
    }
}

/// A transport whose reads and writes are counted in `counts`.
pub struct Counted<IO> {
    pub io: IO,
    pub counts: Arc<Counts>,
}

impl<IO> Counted<IO> {
    /// `io`, counted in `counts`.
    pub fn new(io: IO, counts: &Arc<Counts>) -> Self {
        Self {
            io,
            counts: counts.clone(),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if polled.is_ready() {
            this.counts.reads.fetch_add(1, Ordering::Relaxed);
            let read = (buf.filled().len() - before) as u64;
            this.counts.read_bytes.fetch_add(read, Ordering::Relaxed);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(written) = &polled {
            this.counts.writes.fetch_add(1, Ordering::Relaxed);
            let written = *written.as_ref().unwrap_or(&0) as u64;
            this.counts.written_bytes.fetch_add(written, Ordering::Relaxed);
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(written) = &polled {
            this.counts.writes.fetch_add(1, Ordering::Relaxed);
            let written = *written.as_ref().unwrap_or(&0) as u64;
            this.counts.written_bytes.fetch_add(written, Ordering::Relaxed);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
