//! One direction of a simulated link, sans IO: bytes and `now` in, bytes
//! and the next moment anything changes out.

use std::{collections::VecDeque, time::Duration};

use bytes::{Buf, Bytes};
use tokio::time::Instant;

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wrote {
    /// This many bytes were queued on the link (at least one).
    Accepted(usize),
    /// The sender's queue is full until this moment.
    WaitUntil(Instant),
    /// The receiver holds a full window of unread bytes; a read frees room.
    WaitForReader,
    /// The receiving end is gone.
    Broken,
}

/// What a read did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// This many bytes were copied out (at least one).
    Data(usize),
    /// The next bytes (or the end) arrive at this moment.
    WaitUntil(Instant),
    /// Nothing is on the way; a write changes that.
    WaitForWriter,
    /// The sender shut down and everything it sent has been read.
    Eof,
}

/// One direction: a serializer of `bits_per_second`, then `delay` of
/// propagation, then the receiver's window of unread bytes.
#[derive(Debug)]
pub(crate) struct Pipe {
    bits_per_second: u64,
    delay: Duration,
    mtu: usize,
    /// How far ahead of `now` the serializer may be booked, in bytes.
    queue: usize,
    /// Unread bytes (in flight or arrived) beyond which writes wait.
    window: usize,
    /// Packets in order, each with the moment it has fully arrived.
    packets: VecDeque<(Instant, Bytes)>,
    unread: usize,
    /// When the serializer finishes what it has been given.
    busy_until: Option<Instant>,
    /// When the sender's shutdown reaches the receiver.
    fin_at: Option<Instant>,
    reader_gone: bool,
}

impl Pipe {
    pub(crate) fn new(
        bits_per_second: u64,
        delay: Duration,
        mtu: usize,
        queue: usize,
        window: usize,
    ) -> Self {
        Self {
            bits_per_second: bits_per_second.max(1),
            delay,
            mtu: mtu.max(1),
            queue: queue.max(1),
            window: window.max(1),
            packets: VecDeque::new(),
            unread: 0,
            busy_until: None,
            fin_at: None,
            reader_gone: false,
        }
    }

    /// Time to put `bytes` on the wire.
    fn serialize(&self, bytes: usize) -> Duration {
        let nanos = bytes as u128 * 8 * 1_000_000_000 / self.bits_per_second as u128;
        Duration::from_nanos(nanos.min(u64::MAX as u128) as u64)
    }

    /// Bytes the serializer still has to send at `now`.
    fn backlog(&self, now: Instant) -> usize {
        let ahead = self
            .busy_until
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        (ahead.as_nanos() * self.bits_per_second as u128 / 8 / 1_000_000_000).min(usize::MAX as u128) as usize
    }

    pub(crate) fn write(&mut self, now: Instant, data: &[u8]) -> Wrote {
        if self.reader_gone || self.fin_at.is_some() {
            return Wrote::Broken;
        }
        if data.is_empty() {
            return Wrote::Accepted(0);
        }
        if self.unread >= self.window {
            return Wrote::WaitForReader;
        }
        let backlog = self.backlog(now);
        if backlog >= self.queue {
            // Wait until half the queue has gone out.
            let busy_until = self.busy_until.unwrap_or(now);
            return Wrote::WaitUntil(busy_until - self.serialize(self.queue / 2).min(busy_until - now));
        }
        let room = (self.queue - backlog).min(self.window - self.unread);
        let accepted = data.len().min(room);
        let mut start = self.busy_until.map_or(now, |t| t.max(now));
        for packet in data[..accepted].chunks(self.mtu) {
            let sent = start + self.serialize(packet.len());
            self.packets
                .push_back((sent + self.delay, Bytes::copy_from_slice(packet)));
            start = sent;
        }
        self.busy_until = Some(start);
        self.unread += accepted;
        Wrote::Accepted(accepted)
    }

    /// The sender is done: the end arrives after everything queued.
    pub(crate) fn shutdown(&mut self, now: Instant) {
        if self.fin_at.is_none() {
            let sent = self.busy_until.map_or(now, |t| t.max(now));
            self.fin_at = Some(sent + self.delay);
        }
    }

    /// The receiver is gone: later writes fail, and what is queued is dropped.
    pub(crate) fn close_reader(&mut self) {
        self.reader_gone = true;
        self.packets.clear();
        self.unread = 0;
    }

    pub(crate) fn read(&mut self, now: Instant, buf: &mut [u8]) -> Read {
        let mut copied = 0;
        while copied < buf.len() {
            let Some((at, packet)) = self.packets.front_mut() else {
                break;
            };
            if *at > now {
                break;
            }
            let n = packet.len().min(buf.len() - copied);
            buf[copied..copied + n].copy_from_slice(&packet[..n]);
            packet.advance(n);
            copied += n;
            if packet.is_empty() {
                self.packets.pop_front();
            }
        }
        self.unread -= copied;
        if copied > 0 {
            return Read::Data(copied);
        }
        match (self.packets.front(), self.fin_at) {
            (Some((at, _)), _) => Read::WaitUntil(*at),
            (None, Some(fin)) if fin <= now => Read::Eof,
            (None, Some(fin)) => Read::WaitUntil(fin),
            (None, None) => Read::WaitForWriter,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// 1 Mbit/s, 50 ms: 125 bytes per millisecond.
    fn pipe() -> Pipe {
        Pipe::new(1_000_000, 50 * MS, 1250, 64 * 1024, 1 << 20)
    }

    #[test]
    fn a_packet_arrives_after_serialization_and_delay() {
        let mut pipe = pipe();
        let t0 = Instant::now();
        assert_eq!(pipe.write(t0, &[7; 1250]), Wrote::Accepted(1250));
        let mut buf = [0u8; 2000];
        assert_eq!(pipe.read(t0, &mut buf), Read::WaitUntil(t0 + 60 * MS));
        assert_eq!(pipe.read(t0 + 59 * MS, &mut buf), Read::WaitUntil(t0 + 60 * MS));
        assert_eq!(pipe.read(t0 + 60 * MS, &mut buf), Read::Data(1250));
        assert_eq!(pipe.read(t0 + 60 * MS, &mut buf), Read::WaitForWriter);
    }

    #[test]
    fn packets_queue_behind_each_other_and_arrive_one_by_one() {
        let mut pipe = pipe();
        let t0 = Instant::now();
        assert_eq!(pipe.write(t0, &[1; 2500]), Wrote::Accepted(2500));
        // A later write waits for the serializer.
        assert_eq!(pipe.write(t0 + MS, &[2; 125]), Wrote::Accepted(125));
        let mut buf = [0u8; 4000];
        assert_eq!(pipe.read(t0 + 60 * MS, &mut buf), Read::Data(1250));
        assert_eq!(pipe.read(t0 + 60 * MS, &mut buf), Read::WaitUntil(t0 + 70 * MS));
        assert_eq!(pipe.read(t0 + 71 * MS, &mut buf), Read::Data(1375));
        assert_eq!((buf[1249], buf[1250]), (1, 2));
    }

    #[test]
    fn a_full_queue_makes_the_writer_wait() {
        let mut pipe = Pipe::new(1_000_000, 50 * MS, 1250, 2500, 1 << 20);
        let t0 = Instant::now();
        assert_eq!(pipe.write(t0, &[0; 10_000]), Wrote::Accepted(2500));
        // 2500 bytes take 20 ms; the writer may go on when half is out.
        assert_eq!(pipe.write(t0, &[0; 10_000]), Wrote::WaitUntil(t0 + 10 * MS));
        assert_eq!(pipe.write(t0 + 10 * MS, &[0; 10_000]), Wrote::Accepted(1250));
    }

    #[test]
    fn a_full_window_waits_for_the_reader() {
        let mut pipe = Pipe::new(1_000_000_000, MS, 1500, 1 << 20, 3000);
        let t0 = Instant::now();
        assert_eq!(pipe.write(t0, &[0; 5000]), Wrote::Accepted(3000));
        assert_eq!(pipe.write(t0, &[0; 5000]), Wrote::WaitForReader);
        let mut buf = [0u8; 1000];
        assert_eq!(pipe.read(t0 + 2 * MS, &mut buf), Read::Data(1000));
        assert_eq!(pipe.write(t0 + 2 * MS, &[0; 5000]), Wrote::Accepted(1000));
    }

    #[test]
    fn the_end_arrives_after_the_data() {
        let mut pipe = pipe();
        let t0 = Instant::now();
        pipe.write(t0, &[0; 125]);
        pipe.shutdown(t0);
        assert_eq!(pipe.write(t0, &[0; 1]), Wrote::Broken);
        let mut buf = [0u8; 200];
        assert_eq!(pipe.read(t0 + 51 * MS, &mut buf), Read::Data(125));
        assert_eq!(pipe.read(t0 + 51 * MS, &mut buf), Read::Eof);
    }

    #[test]
    fn a_gone_reader_breaks_the_writer() {
        let mut pipe = pipe();
        let t0 = Instant::now();
        pipe.write(t0, &[0; 125]);
        pipe.close_reader();
        assert_eq!(pipe.write(t0, &[0; 1]), Wrote::Broken);
    }
}
