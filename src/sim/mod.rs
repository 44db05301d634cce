//! Networks in memory, for tests and examples: a slow link ([`Link`],
//! `tokio::io::duplex` with a bandwidth and a one-way delay), and a
//! transport that fails on purpose, reproducibly ([`Faults`]).
//!
//! Each direction serializes bytes at the link's rate, in packets of at most
//! one MTU, and delivers each packet `delay` after its last bit left. So the
//! first byte of a 16 KiB record at 1 Mbit/s arrives 50 ms + 1.2 ms after it
//! was written, but can only be decrypted 50 ms + 131 ms after, when the
//! record's last packet is in: what dynamic record sizing is about.
//!
//! The link runs on tokio's clock, to its resolution of a millisecond, so
//! under `tokio::time::pause` a simulated minute passes in no time and
//! every result repeats exactly.
//!
//! ```
//! use std::time::Duration;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use weft::sim::Link;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> std::io::Result<()> {
//! // 1 Mbit/s with 50 ms one way: 125 bytes take 1 ms to send.
//! let (mut a, mut b) = Link::new(1_000_000, Duration::from_millis(50)).pair();
//! let start = tokio::time::Instant::now();
//! a.write_all(&[0; 1250]).await?;
//! let mut buf = [0; 1250];
//! b.read_exact(&mut buf).await?;
//! assert_eq!(start.elapsed(), Duration::from_millis(60));
//! # Ok(())
//! # }
//! ```

mod faults;
mod pipe;

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};

pub use faults::{Faults, Faulty};
use pipe::{Pipe, Read, Wrote};

/// A link's shape: bandwidth and one-way delay, the same both ways.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    bits_per_second: u64,
    delay: Duration,
    mtu: usize,
    queue: usize,
    window: usize,
}

impl Link {
    /// A link of `bits_per_second` each way with `delay` one way, packets
    /// of 1500 bytes, a 64 KiB send queue and a 4 MiB receive window.
    pub fn new(bits_per_second: u64, delay: Duration) -> Self {
        Self {
            bits_per_second,
            delay,
            mtu: 1500,
            queue: 64 * 1024,
            window: 4 << 20,
        }
    }

    /// The largest packet: a packet arrives only when all of it has.
    pub fn mtu(mut self, bytes: usize) -> Self {
        self.mtu = bytes;
        self
    }

    /// How many bytes may wait to be serialized before writes wait (a
    /// socket's send buffer plus the bottleneck's queue).
    pub fn queue(mut self, bytes: usize) -> Self {
        self.queue = bytes;
        self
    }

    /// How many unread bytes (on the way or arrived) the receiver holds
    /// before writes wait for it to read.
    pub fn window(mut self, bytes: usize) -> Self {
        self.window = bytes;
        self
    }

    /// The two ends, each `AsyncRead + AsyncWrite`.
    pub fn pair(self) -> (LinkEnd, LinkEnd) {
        let pipe = || {
            Pipe::new(
                self.bits_per_second,
                self.delay,
                self.mtu,
                self.queue,
                self.window,
            )
        };
        let shared = Arc::new(Mutex::new(Shared {
            pipes: [pipe(), pipe()],
            readers: [None, None],
            writers: [None, None],
        }));
        let end = |side| LinkEnd {
            shared: shared.clone(),
            side,
            read_timer: None,
            write_timer: None,
        };
        (end(0), end(1))
    }
}

#[derive(Debug)]
struct Shared {
    /// `pipes[i]` carries what end `i` writes.
    pipes: [Pipe; 2],
    /// The waker of the end reading `pipes[i]`, waiting for a write.
    readers: [Option<Waker>; 2],
    /// The waker of the end writing `pipes[i]`, waiting for a read.
    writers: [Option<Waker>; 2],
}

/// One end of a [`Link`].
///
/// Dropping it ends what it sent (the peer reads to the end) and makes the
/// peer's writes fail with `BrokenPipe`.
#[derive(Debug)]
pub struct LinkEnd {
    shared: Arc<Mutex<Shared>>,
    side: usize,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl LinkEnd {
    fn lock(&self) -> crate::sync::Locked<'_, Shared> {
        // The lock is never held across anything that can panic.
        crate::sync::lock(&self.shared)
    }
}

/// Waits on `timer` until `until`; made on first use, so that a link can
/// be made outside a runtime.
fn sleep_until(timer: &mut Option<Pin<Box<Sleep>>>, until: Instant, cx: &mut Context<'_>) -> Poll<()> {
    let timer = match timer {
        Some(timer) => {
            timer.as_mut().reset(until);
            timer
        }
        None => timer.insert(Box::pin(tokio::time::sleep_until(until))),
    };
    timer.as_mut().poll(cx)
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(waker) = waker.take() {
        waker.wake();
    }
}

impl AsyncRead for LinkEnd {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let incoming = 1 - this.side;
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            let until = {
                let mut shared = this.lock();
                match shared.pipes[incoming].read(Instant::now(), buf.initialize_unfilled()) {
                    Read::Data(n) => {
                        buf.advance(n);
                        wake(&mut shared.writers[incoming]);
                        return Poll::Ready(Ok(()));
                    }
                    Read::Eof => return Poll::Ready(Ok(())),
                    Read::WaitForWriter => {
                        shared.readers[incoming] = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    Read::WaitUntil(until) => {
                        // A write may also bring an earlier end of waiting.
                        shared.readers[incoming] = Some(cx.waker().clone());
                        until
                    }
                }
            };
            if sleep_until(&mut this.read_timer, until, cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl AsyncWrite for LinkEnd {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let outgoing = this.side;
        loop {
            let until = {
                let mut shared = this.lock();
                match shared.pipes[outgoing].write(Instant::now(), data) {
                    Wrote::Accepted(n) => {
                        wake(&mut shared.readers[outgoing]);
                        return Poll::Ready(Ok(n));
                    }
                    Wrote::Broken => {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "the link's other end is gone or this end shut down",
                        )))
                    }
                    Wrote::WaitForReader => {
                        shared.writers[outgoing] = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    Wrote::WaitUntil(until) => until,
                }
            };
            if sleep_until(&mut this.write_timer, until, cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut shared = self.lock();
        shared.pipes[self.side].shutdown(Instant::now());
        wake(&mut shared.readers[self.side]);
        Poll::Ready(Ok(()))
    }
}

impl Drop for LinkEnd {
    fn drop(&mut self) {
        let mut shared = self.lock();
        let (outgoing, incoming) = (self.side, 1 - self.side);
        shared.pipes[outgoing].shutdown(Instant::now());
        shared.pipes[incoming].close_reader();
        wake(&mut shared.readers[outgoing]);
        wake(&mut shared.writers[incoming]);
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn a_megabyte_takes_its_serialization_time_plus_the_delay() {
        // 8 Mbit/s: 1 MiB in 1.048576 s.
        let (mut a, mut b) = Link::new(8_000_000, 20 * MS).pair();
        let start = Instant::now();
        let writer = tokio::spawn(async move {
            a.write_all(&vec![5; 1 << 20]).await.unwrap();
            a.shutdown().await.unwrap();
            a
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), 1 << 20);
        assert!(got.iter().all(|&x| x == 5));
        // tokio's timers round up to the millisecond.
        let exact = Duration::from_nanos(1_048_576_000) + 20 * MS;
        assert!(
            (exact..=exact + MS).contains(&start.elapsed()),
            "{:?}",
            start.elapsed()
        );
        drop(writer.await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn both_directions_are_independent() {
        let (mut a, mut b) = Link::new(1_000_000, 50 * MS).pair();
        let start = Instant::now();
        a.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        b.read_exact(&mut buf).await.unwrap();
        b.write_all(b"pong").await.unwrap();
        a.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        // Two trips of 50 ms plus 32 µs of serialization each, each rounded
        // up to tokio's millisecond.
        assert_eq!(start.elapsed(), 102 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_an_end_ends_its_data_and_breaks_the_peer_writes() {
        let (mut a, mut b) = Link::new(1_000_000, 50 * MS).pair();
        a.write_all(b"last words").await.unwrap();
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"last words");
        let err = b.write_all(b"anyone?").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_stops_stops_the_writer_at_the_window() {
        let (mut a, mut b) = Link::new(1_000_000_000, MS).window(64 * 1024).pair();
        let wrote = tokio::time::timeout(Duration::from_secs(10), a.write_all(&vec![0; 1 << 20])).await;
        assert!(wrote.is_err(), "the writer should wait for the reader");
        let mut buf = vec![0u8; 1 << 20];
        let n = b.read(&mut buf).await.unwrap();
        assert_eq!(n, 64 * 1024);
    }
}
