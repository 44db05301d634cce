//! Received data waiting for the application, and how much memory it
//! keeps alive.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use crate::{mux::id_map::BufferMap, record::Origin};

/// Data pieces smaller than this are always copied into the stream's own
/// buffer: a small slice would keep its whole read-buffer allocation
/// alive for a few bytes of data.
const COPY_BELOW: usize = 16 * 1024;

/// The read-buffer allocations that stream buffers keep alive by holding
/// slices of them (zero-copy), and the bytes those allocations add up to.
///
/// A slice keeps its whole allocation alive (up to
/// [`READ_CHUNK_MAX`](crate::record::READ_CHUNK_MAX)), and the rest of the
/// allocation may hold nothing the peer paid credit for (pings, credit
/// frames). So what is retained, not what is credited, is bounded here: a
/// piece is kept as a slice only while the allocations pinned this way
/// stay within the connection window; past that it is copied.
#[derive(Debug, Default)]
pub(super) struct Pins {
    buffers: BufferMap<Pinned>,
    pinned: usize,
}

#[derive(Debug)]
struct Pinned {
    size: usize,
    pieces: u32,
}

impl Pins {
    /// Whether a piece of `origin` may be kept as a slice: it may if its
    /// allocation is pinned already, or fits within `budget`. It is then
    /// counted until [`Pins::unpin`].
    fn pin(&mut self, origin: Origin, budget: usize) -> bool {
        if let Some(pinned) = self.buffers.get_mut(&origin.buffer) {
            pinned.pieces += 1;
            return true;
        }
        if self.pinned + origin.size > budget {
            return false;
        }
        self.pinned += origin.size;
        self.buffers.insert(
            origin.buffer,
            Pinned {
                size: origin.size,
                pieces: 1,
            },
        );
        true
    }

    fn unpin(&mut self, buffer: u64) {
        if let Some(pinned) = self.buffers.get_mut(&buffer) {
            pinned.pieces -= 1;
            if pinned.pieces == 0 {
                self.pinned -= pinned.size;
                self.buffers.remove(&buffer);
            }
        }
    }

    /// Bytes of allocations pinned.
    pub(super) fn pinned(&self) -> usize {
        self.pinned
    }
}

/// A piece of received data, and the allocation it pins if it is a slice.
#[derive(Debug)]
struct Piece {
    bytes: Bytes,
    pins: Option<u64>,
}

/// Received data waiting for the application: large pieces as they came
/// (zero-copy, within the pin budget), the rest copied together into a
/// tail.
#[derive(Debug, Default)]
pub(super) struct RecvBuffer {
    pieces: VecDeque<Piece>,
    tail: BytesMut,
}

impl RecvBuffer {
    pub(super) fn push(&mut self, data: Bytes, origin: Origin, pins: &mut Pins, budget: usize) {
        if data.len() >= COPY_BELOW && pins.pin(origin, budget) {
            if !self.tail.is_empty() {
                let bytes = self.tail.split().freeze();
                self.pieces.push_back(Piece { bytes, pins: None });
            }
            self.pieces.push_back(Piece {
                bytes: data,
                pins: Some(origin.buffer),
            });
        } else {
            self.tail.extend_from_slice(&data);
        }
    }

    /// The next piece, at most `max` bytes. A piece handed out whole stops
    /// counting as pinned: it is the application's now.
    pub(super) fn pop(&mut self, max: usize, pins: &mut Pins) -> Option<Bytes> {
        if let Some(front) = self.pieces.front_mut() {
            if front.bytes.len() > max {
                return Some(front.bytes.split_to(max));
            }
            let piece = self.pieces.pop_front().expect("front exists");
            if let Some(buffer) = piece.pins {
                pins.unpin(buffer);
            }
            return Some(piece.bytes);
        }
        if self.tail.is_empty() {
            return None;
        }
        let n = self.tail.len().min(max);
        Some(self.tail.split_to(n).freeze())
    }

    /// Drops everything; returns how many bytes that was.
    pub(super) fn clear(&mut self, pins: &mut Pins) -> usize {
        let mut n = self.tail.len();
        for piece in self.pieces.drain(..) {
            n += piece.bytes.len();
            if let Some(buffer) = piece.pins {
                pins.unpin(buffer);
            }
        }
        self.tail = BytesMut::new();
        n
    }
}
