//! Buffer reuse for the record layer's reads and writes.

use std::collections::VecDeque;

use bytes::BytesMut;

/// Earlier allocations a buffer keeps for reuse.
const SPARES: usize = 3;

/// A buffer, and the earlier allocations it reuses once every piece handed
/// out from them is gone. Each allocation has a number, so that a piece can
/// be traced to the allocation it keeps alive.
///
/// Records received and records sealed leave as slices of these buffers,
/// so the current allocation is usually still shared when it fills up.
/// Allocating afresh each time made glibc hand the freed blocks back to the
/// kernel and fault them in again: 250,000 page faults per 2 GiB received
/// (measured), against 300 for tokio-rustls.
///
/// A writer keeps what it needs between bursts (the bytes sealed between
/// two points where everything is written) according to the bursts
/// themselves ([`Chunks::settle`]).
#[derive(Debug, Default)]
pub(super) struct Chunks {
    current: Chunk,
    spares: VecDeque<Chunk>,
    next_id: u64,
    /// The owner's byte count at the last [`Chunks::settle`].
    settled_at: u64,
    /// The largest recent burst, halving with each burst after it.
    burst_peak: usize,
}

#[derive(Debug, Default)]
struct Chunk {
    buf: BytesMut,
    id: u64,
    /// Bytes allocated: what any piece of it keeps alive.
    size: usize,
}

/// Which allocation a piece of received data lives in, and how large that
/// allocation is: what holding the piece keeps alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) buffer: u64,
    pub(crate) size: usize,
}

impl Chunks {
    /// Starts with `buf` (bytes that arrived before, say).
    pub(super) fn with(buf: BytesMut) -> Self {
        let size = buf.capacity();
        Self {
            current: Chunk { buf, id: 0, size },
            next_id: 1,
            ..Self::default()
        }
    }

    /// The buffer.
    pub(super) fn buf(&mut self) -> &mut BytesMut {
        &mut self.current.buf
    }

    /// The buffer, to look at.
    pub(super) fn get(&self) -> &BytesMut {
        &self.current.buf
    }

    /// Bytes of the buffer's allocation.
    pub(super) fn size(&self) -> usize {
        self.current.size
    }

    /// The allocation the buffer's bytes live in.
    pub(super) fn origin(&self) -> Origin {
        Origin {
            buffer: self.current.id,
            size: self.current.size,
        }
    }

    /// Bytes allocated for the buffer and its spares: what they keep
    /// alive, whatever part of it pieces handed out still use.
    pub(super) fn capacity(&self) -> usize {
        self.current.size + self.spares.iter().map(|c| c.size).sum::<usize>()
    }

    /// Makes room for `additional` more bytes, without allocating when it
    /// can: by reclaiming the buffer's own allocation, or else one of the
    /// spares. Only when all are still in use does it allocate; the current
    /// allocation then joins the spares. What the buffer holds moves along.
    pub(super) fn make_room(&mut self, additional: usize) {
        if self.current.buf.try_reclaim(additional) {
            return;
        }
        let needed = self.current.buf.len() + additional;
        let next = match self
            .spares
            .iter_mut()
            .position(|spare| spare.buf.try_reclaim(needed))
        {
            Some(i) => self.spares.remove(i).unwrap_or_default(),
            None => {
                self.next_id += 1;
                let buf = BytesMut::with_capacity(needed);
                Chunk {
                    size: buf.capacity(),
                    buf,
                    id: self.next_id,
                }
            }
        };
        let mut old = std::mem::replace(&mut self.current, next);
        self.current.buf.extend_from_slice(&old.buf);
        old.buf.clear();
        // Kept even when every byte of it was handed out (its view is then
        // empty, with no room): it is reclaimed whole once those pieces are
        // gone. (A buffer that never allocated has nothing to offer; one
        // less than half the size of its successor, outgrown, would only
        // be held: a peer growing the buffer with one large record would
        // make us keep every size it passed through.)
        if old.size > 0 && old.size >= self.current.size / 2 {
            self.spares.push_back(old);
        }
        if self.spares.len() > SPARES {
            self.spares.pop_front();
        }
    }

    /// Lets the spares go (the reader caught up, and reads small pieces:
    /// they only help while reads follow each other).
    pub(super) fn drop_spares(&mut self) {
        self.spares.clear();
    }

    /// Everything is written (the buffer is empty again), and `moved`
    /// bytes have passed through it in all. While the bursts between two
    /// such points are larger than `keep`, the buffer and its spares stay
    /// for the next burst (keeping one spare allocated a buffer afresh for
    /// nearly every burst of a bulk sender: 3,500 per GiB, measured). Once
    /// the largest recent burst (halved at each burst after it: after bulk
    /// data, about five small bursts) is no larger than `keep`, the spares
    /// go, and so does a buffer larger than `keep`. A call with nothing
    /// moved since the last changes nothing.
    pub(super) fn settle(&mut self, moved: u64, keep: usize) {
        let burst = moved.wrapping_sub(self.settled_at);
        if burst == 0 || !self.current.buf.is_empty() {
            return;
        }
        self.settled_at = moved;
        let burst = usize::try_from(burst).unwrap_or(usize::MAX);
        self.burst_peak = burst.max(self.burst_peak / 2);
        // Bulk keeps everything: the next burst fills as many buffers (a
        // connection's driver seals up to its high-water mark before it
        // writes, and a record that would cross a buffer's end is sealed
        // shorter).
        if self.burst_peak <= keep {
            if self.current.size > keep {
                self.release();
            } else {
                self.spares.clear();
            }
        }
    }

    /// Lets everything go; the next write allocates afresh.
    pub(super) fn release(&mut self) {
        self.spares.clear();
        self.current = Chunk::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_handed_out_whole_is_kept_and_reused_once_free() {
        let mut chunks = Chunks::default();
        let fill = |chunks: &mut Chunks, byte: u8| {
            let room = chunks.get().capacity() - chunks.get().len();
            chunks.buf().extend_from_slice(&vec![byte; room]);
            // Every byte handed out: the buffer's view is empty, no room.
            chunks.buf().split().freeze()
        };
        chunks.make_room(1024);
        let first = chunks.origin();
        let whole = fill(&mut chunks, 1);
        chunks.make_room(1024);
        assert_ne!(chunks.origin(), first, "the first is still in use");
        let second = fill(&mut chunks, 2);
        drop(whole);
        chunks.make_room(1024);
        assert_eq!(chunks.origin(), first, "free again, so reused");
        assert_eq!(second[0], 2);
    }

    #[test]
    fn make_room_reuses_an_allocation_once_its_pieces_are_gone() {
        let mut chunks = Chunks::default();
        chunks.make_room(1024);
        chunks.buf().extend_from_slice(&[1; 1024]);
        let first_id = chunks.origin().buffer;
        // A record leaves as a slice; 24 bytes of the next stay behind.
        let first = chunks.buf().split_to(1000).freeze();
        let first_allocation = first.as_ptr();
        chunks.make_room(1024);
        assert_ne!(
            chunks.get().as_ptr(),
            first_allocation,
            "the first record still uses it"
        );
        assert_ne!(chunks.origin().buffer, first_id);
        assert_eq!(&chunks.get()[..], &[1; 24]);
        assert_eq!(chunks.spares.len(), 1);

        chunks.buf().extend_from_slice(&[2; 1000]);
        let second = chunks.buf().split_to(1000).freeze();
        drop(first);
        chunks.make_room(1000);
        assert_eq!(chunks.get().as_ptr(), first_allocation, "free again, so reused");
        assert_eq!(
            chunks.origin().buffer,
            first_id,
            "the same allocation keeps its number"
        );
        assert_eq!(&chunks.get()[..], &[2; 24]);
        assert!(chunks.get().capacity() >= 1024);
        drop(second);
        // Unshared, the buffer's own allocation is reclaimed in place.
        let own = chunks.get().as_ptr();
        chunks.make_room(1000);
        assert_eq!(chunks.get().as_ptr(), own);
    }
}
