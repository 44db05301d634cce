//! The connection's side of sending: the bytes all streams queued in its
//! send buffer, the writers waiting for room in it, the RESETs to send
//! among the next control frames, and the buffer the frames' headers and
//! control frames are written into.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::streams::Streams;
use crate::error::CloseCode;

/// The frame buffer is refilled in chunks of this size...
const FRAMES_CHUNK: usize = 4096;
/// ...when less than this is left (room for any control frame but a large
/// credit list, which grows it as needed).
const FRAMES_LOW: usize = 512;

/// The connection's send buffer accounting, its room waiters, its queued
/// RESETs and its frame buffer; the turns are the [`Schedule`]'s.
///
/// [`Schedule`]: super::schedule::Schedule
#[derive(Debug, Default)]
pub(super) struct Sending {
    /// Bytes all streams have queued to send, at most
    /// `Params::connection_send_buffer`.
    queued: usize,
    /// Streams whose writer waits for room in the connection's send
    /// buffer; woken together once a quarter of it is free.
    room_waiters: Vec<u32>,
    /// RESETs to send among the next control frames.
    resets: VecDeque<(u32, CloseCode)>,
    /// Headers and control frames of many turns, sharing one allocation
    /// rather than one small allocation per frame.
    frames: BytesMut,
}

impl Sending {
    /// Bytes queued in the connection's send buffer.
    #[inline]
    pub(super) fn queued(&self) -> usize {
        self.queued
    }

    /// A writer queued `n` bytes.
    #[inline]
    pub(super) fn queue(&mut self, n: usize) {
        self.queued += n;
    }

    /// `n` queued bytes left (sent or dropped); the waiting writers are
    /// the caller's to wake ([`Self::room_freed`]).
    #[inline]
    pub(super) fn unqueue(&mut self, n: usize) {
        self.queued -= n;
    }

    /// Room left for a writer in the connection's send buffer of `cap`
    /// bytes: none while writers wait for it, who have it first.
    #[inline]
    pub(super) fn room(&self, cap: usize) -> usize {
        if self.room_waiters.is_empty() {
            cap.saturating_sub(self.queued)
        } else {
            0
        }
    }

    /// Stream `id`'s writer waits for room in the connection's send
    /// buffer. The waiters whose streams ended or stopped waiting (in
    /// `streams`) are pruned first once they outgrow the streams.
    pub(super) fn wait_for_room(&mut self, id: u32, streams: &Streams) {
        if self.room_waiters.len() >= 2 * streams.len() + 16 {
            // Streams that ended while they waited are still listed:
            // while the buffer stays full, the list must not grow
            // with every stream that comes and goes.
            self.room_waiters
                .retain(|id| streams.get(*id).is_some_and(|s| s.send.waits_for_room()));
        }
        self.room_waiters.push(id);
    }

    /// Whether writers wait for room in the connection's send buffer of
    /// `cap` bytes and a quarter of it is free: they are to be woken
    /// ([`Self::take_room_waiters`]).
    #[inline]
    pub(super) fn room_freed(&self, cap: usize) -> bool {
        !self.room_waiters.is_empty() && cap.saturating_sub(self.queued) >= (cap / 4).max(1)
    }

    /// The writers waiting for room, to wake: they wait no more.
    pub(super) fn take_room_waiters(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.room_waiters)
    }

    /// The writers waiting for room (for tests).
    #[cfg(test)]
    pub(super) fn room_waiters_mut(&mut self) -> &mut Vec<u32> {
        &mut self.room_waiters
    }

    /// Queues a RESET of stream `id` among the next control frames.
    pub(super) fn push_reset(&mut self, id: u32, code: CloseCode) {
        self.resets.push_back((id, code));
    }

    /// The next RESET to send among the control frames.
    pub(super) fn pop_reset(&mut self) -> Option<(u32, CloseCode)> {
        self.resets.pop_front()
    }

    /// Whether RESETs wait among the control frames.
    #[inline]
    pub(super) fn resets_queued(&self) -> bool {
        !self.resets.is_empty()
    }

    /// Makes room in the frame buffer for a transmit's frames, if little
    /// is left.
    #[inline]
    pub(super) fn reserve_frames(&mut self) {
        if self.frames.capacity() < FRAMES_LOW {
            self.frames.reserve(FRAMES_CHUNK);
        }
    }

    /// The connection went idle: lets the frame buffer go if nothing
    /// waits in it (the next turn allocates afresh).
    pub(super) fn release_idle(&mut self) {
        if self.frames.is_empty() {
            self.frames = BytesMut::new();
        }
    }

    /// Bytes allocated for the frame buffer.
    #[cfg(test)]
    pub(super) fn frames_capacity(&self) -> usize {
        self.frames.capacity()
    }

    /// The frame buffer, for headers and control frames to be written
    /// into.
    #[inline]
    pub(super) fn frames(&mut self) -> &mut BytesMut {
        &mut self.frames
    }

    /// What was written into the frame buffer, taken out of it.
    #[inline]
    pub(super) fn split_frames(&mut self) -> Bytes {
        self.frames.split().freeze()
    }

    /// Appends what was written into the frame buffer to `out`, if
    /// anything was: the bytes appended.
    #[inline]
    pub(super) fn flush_frames(&mut self, out: &mut Vec<Bytes>) -> usize {
        if self.frames.is_empty() {
            return 0;
        }
        let control = self.split_frames();
        let n = control.len();
        out.push(control);
        n
    }
}
