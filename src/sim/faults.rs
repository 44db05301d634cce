//! A transport that misbehaves on purpose, the same way for the same seed:
//! writes and reads cut short at any byte boundary, delays, and the
//! connection dropped or reset after a given number of bytes.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll, Waker},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::Sleep,
};

/// What goes wrong, and when: a recipe for [`Faulty`] transports.
///
/// Every choice comes from a generator seeded with [`Faults::new`]'s seed,
/// so a failing run repeats exactly (give each transport its own seed).
///
/// ```
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use weft::sim::Faults;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let (a, mut b) = tokio::io::duplex(1024);
/// // Writes cut short anywhere, and the connection gone after 10 bytes.
/// let mut a = Faults::new(7).split_writes().cut_after(10).wrap(a);
/// assert!(a.write_all(b"0123456789 and more").await.is_err());
/// let mut got = Vec::new();
/// b.read_to_end(&mut got).await.unwrap();
/// assert_eq!(got, b"0123456789");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Faults {
    seed: u64,
    split_writes: bool,
    split_reads: bool,
    max_io: usize,
    delay: Option<(u32, Duration)>,
    end: Option<(u64, End)>,
}

/// How a faulty transport ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The connection is gone: reads end, writes fail with `BrokenPipe`.
    Cut,
    /// Reads and writes fail with `ConnectionReset`.
    Reset,
}

impl Faults {
    /// No faults yet, and the generator's seed.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            split_writes: false,
            split_reads: false,
            max_io: usize::MAX,
            delay: None,
            end: None,
        }
    }

    /// Each write takes between 1 byte and all it was given.
    pub fn split_writes(mut self) -> Self {
        self.split_writes = true;
        self
    }

    /// Each read returns between 1 byte and all there was room for.
    pub fn split_reads(mut self) -> Self {
        self.split_reads = true;
        self
    }

    /// No read or write moves more than `bytes` (at least 1): with 1, a
    /// message is cut at every byte boundary.
    pub fn max_io(mut self, bytes: usize) -> Self {
        self.max_io = bytes.max(1);
        self
    }

    /// One read or write in `one_in` (at random) first waits `delay`.
    pub fn delays(mut self, one_in: u32, delay: Duration) -> Self {
        self.delay = Some((one_in.max(1), delay));
        self
    }

    /// After `bytes` read and written in all, the connection is gone: the
    /// transport underneath is dropped (its peer sees it end), reads end and
    /// writes fail with `BrokenPipe`.
    pub fn cut_after(mut self, bytes: u64) -> Self {
        self.end = Some((bytes, End::Cut));
        self
    }

    /// After `bytes` read and written in all, reads and writes fail with
    /// `ConnectionReset`, and the transport underneath is dropped.
    pub fn reset_after(mut self, bytes: u64) -> Self {
        self.end = Some((bytes, End::Reset));
        self
    }

    /// `io`, misbehaving as this recipe says.
    pub fn wrap<IO>(&self, io: IO) -> Faulty<IO> {
        Faulty {
            io: Some(io),
            faults: self.clone(),
            rng: SplitMix(self.seed),
            moved: 0,
            read_delay: None,
            write_delay: None,
            scratch: Vec::new(),
            waiting: [None, None],
        }
    }
}

/// A transport wrapped by [`Faults::wrap`].
#[derive(Debug)]
pub struct Faulty<IO> {
    /// `None` once the connection was cut or reset.
    io: Option<IO>,
    faults: Faults,
    rng: SplitMix,
    /// Bytes read and written so far.
    moved: u64,
    read_delay: Option<Pin<Box<Sleep>>>,
    write_delay: Option<Pin<Box<Sleep>>>,
    scratch: Vec<u8>,
    /// Whoever waits to read or write on the transport underneath, woken
    /// when the other direction ends it (the transport will not).
    waiting: [Option<Waker>; 2],
}

/// SplitMix64: small, fast, and plenty for choosing faults.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `1..=n` (`n` at least 1).
    fn upto(&mut self, n: usize) -> usize {
        1 + (self.next() % n as u64) as usize
    }
}

impl<IO> Faulty<IO> {
    /// Bytes that may still move before the end, if one is planned.
    fn room(&self) -> Option<u64> {
        self.faults.end.map(|(at, _)| at.saturating_sub(self.moved))
    }

    /// The error a read or write meets once the end came: `None` for a
    /// cut read, which just ends.
    fn ended(&mut self, writing: bool) -> Option<io::Error> {
        if self.io.take().is_some() {
            self.waiting
                .iter_mut()
                .filter_map(Option::take)
                .for_each(Waker::wake);
        }
        match self.faults.end.map(|(_, end)| end) {
            Some(End::Reset) => Some(io::ErrorKind::ConnectionReset.into()),
            _ if writing => Some(io::ErrorKind::BrokenPipe.into()),
            _ => None,
        }
    }

    /// How many of `len` bytes this operation may move: split at random,
    /// and never past the planned end. `None` if the end has come.
    fn allowance(&mut self, len: usize, split: bool) -> Option<usize> {
        let len = len.min(self.faults.max_io);
        let mut n = if split && len > 0 { self.rng.upto(len) } else { len };
        if let Some(room) = self.room() {
            if room == 0 {
                return None;
            }
            n = n.min(room.min(usize::MAX as u64) as usize);
        }
        Some(n)
    }

    /// Remembers who waits on the transport underneath in one direction.
    fn pending<T>(&mut self, cx: &Context<'_>, writing: bool) -> Poll<T> {
        self.waiting[usize::from(writing)] = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Waits first, now and then, if delays were asked for.
    fn poll_delay(&mut self, cx: &mut Context<'_>, writing: bool) -> Poll<()> {
        let Some((one_in, delay)) = self.faults.delay else {
            return Poll::Ready(());
        };
        let slot = if writing {
            &mut self.write_delay
        } else {
            &mut self.read_delay
        };
        if slot.is_none() {
            if !self.rng.next().is_multiple_of(u64::from(one_in)) {
                return Poll::Ready(());
            }
            *slot = Some(Box::pin(tokio::time::sleep(delay)));
        }
        let sleep = slot.as_mut().expect("set above");
        std::task::ready!(sleep.as_mut().poll(cx));
        *slot = None;
        Poll::Ready(())
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Faulty<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.io.is_none() {
            return Poll::Ready(this.ended(false).map_or(Ok(()), Err));
        }
        std::task::ready!(this.poll_delay(cx, false));
        let Some(n) = this.allowance(buf.remaining(), this.faults.split_reads) else {
            return Poll::Ready(this.ended(false).map_or(Ok(()), Err));
        };
        let io = this.io.as_mut().expect("checked above");
        let got = if n == buf.remaining() {
            let before = buf.filled().len();
            if Pin::new(io).poll_read(cx, buf)?.is_pending() {
                return this.pending(cx, false);
            }
            buf.filled().len() - before
        } else {
            this.scratch.resize(n, 0);
            let mut limited = ReadBuf::new(&mut this.scratch);
            if Pin::new(io).poll_read(cx, &mut limited)?.is_pending() {
                return this.pending(cx, false);
            }
            let got = limited.filled().len();
            buf.put_slice(&this.scratch[..got]);
            got
        };
        this.moved += got as u64;
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Faulty<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.io.is_none() {
            return Poll::Ready(Err(this.ended(true).expect("a write's end is an error")));
        }
        std::task::ready!(this.poll_delay(cx, true));
        let Some(n) = this.allowance(data.len(), this.faults.split_writes) else {
            return Poll::Ready(Err(this.ended(true).expect("a write's end is an error")));
        };
        let io = this.io.as_mut().expect("checked above");
        let Poll::Ready(wrote) = Pin::new(io).poll_write(cx, &data[..n])? else {
            return this.pending(cx, true);
        };
        this.moved += wrote as u64;
        Poll::Ready(Ok(wrote))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = match this.io.as_mut() {
            Some(io) => Pin::new(io).poll_flush(cx),
            None => return Poll::Ready(Err(this.ended(true).expect("a write's end is an error"))),
        };
        match polled {
            Poll::Pending => this.pending(cx, true),
            done => done,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = match this.io.as_mut() {
            Some(io) => Pin::new(io).poll_shutdown(cx),
            None => return Poll::Ready(Err(this.ended(true).expect("a write's end is an error"))),
        };
        match polled {
            Poll::Pending => this.pending(cx, true),
            done => done,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn split_writes_and_reads_deliver_every_byte_in_order() {
        let (a, b) = tokio::io::duplex(64);
        let mut a = Faults::new(1).split_writes().wrap(a);
        let mut b = Faults::new(2)
            .split_reads()
            .delays(3, Duration::from_millis(1))
            .wrap(b);
        let data: Vec<u8> = (0..10_000u32).map(|n| n as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            a.write_all(&sent).await.unwrap();
            a.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert_eq!(got, data);
    }

    #[tokio::test]
    async fn a_reset_fails_both_ways_and_the_peer_sees_the_end() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = Faults::new(3).reset_after(5).wrap(a);
        let err = a.write_all(b"0123456789").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
        let mut byte = [0u8; 1];
        assert_eq!(
            a.read(&mut byte).await.unwrap_err().kind(),
            io::ErrorKind::ConnectionReset
        );
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"01234");
    }

    #[test]
    fn the_same_seed_makes_the_same_choices() {
        let mut a = SplitMix(42);
        let mut b = SplitMix(42);
        for _ in 0..100 {
            assert_eq!(a.upto(1000), b.upto(1000));
        }
    }
}
