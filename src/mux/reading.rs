//! The one owner of the channel's reading half, and how whoever the
//! [`Arbiter`](super::arbiter::Arbiter) names reads it: the driver, or the
//! task of the one stream waiting on the connection, which then reads for
//! itself (the read is lent to it).
//!
//! Through the driver, a message costs a hand-off: the driver's task reads
//! and opens the record, wakes the stream's task, and that task takes the
//! data. When one stream's task is the only one waiting (a ping, a call in
//! flight, hyper's connection task over its one stream), that task reads
//! the channel itself: the record is opened where it is consumed, and the
//! driver does not run at all.
//!
//! The transport is always polled with one waker, [`ReadLease`]'s, which
//! wakes the stream's task while the read is lent to it and the driver
//! otherwise. The read is lent ([`Shared::wait_read`]) only while that
//! stream's reader is the only task waiting on the connection (for data,
//! room or credit, a stream to open or accept), and it comes back to the
//! driver ([`Shared::take_back_read`]) as soon as:
//!
//! - the stream has what it waited for (data, its end, an error), so the
//!   driver reads ahead, within the windows, while the task is busy with
//!   it; or its reading half is dropped;
//! - another task starts to wait on the connection;
//! - one of the driver's timers fires (keepalive, idle buffers, a record's
//!   deadline).
//!
//! So a task that stops polling its stream while the read is lent to it
//! (a timeout dropped its read) holds back only what nobody waits for, and
//! no longer than the driver's next timer: whoever starts to wait takes the
//! read back for the driver. Taking the read back costs no wake-up when
//! the transport holds the lease's waker (the last read ended `Pending`):
//! the next records wake the driver by themselves.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering::SeqCst},
        Arc,
    },
    task::{Context, Poll, Wake, Waker},
};

use bytes::Bytes;
use futures_util::task::AtomicWaker;

use crate::{
    error::Error,
    record::{ChannelReader, Origin},
};

/// Records a read takes at once before what it read is delivered.
const READS_PER_TURN: usize = 32;
/// Bytes a read takes at once before it yields, so that the streams'
/// tasks take the data while it is still in cache, and the channel's read
/// buffers are free again for reuse. Reading a whole window at once kept
/// megabytes of records alive, which cost a page fault per 4 KiB received
/// (the freed blocks went back to the kernel).
pub(crate) const READ_BUDGET: usize = 512 * 1024;
/// What a key update the peer sent counts for in [`READ_BUDGET`]: a key
/// derivation costs about what opening 16 KiB does, so a read opens at
/// most 32 of them (`record::MAX_KEY_UPDATES_IN_A_ROW` without data
/// between) besides its data.
const KEY_UPDATE_READ_COST: usize = 16 * 1024;

/// What one read took from the channel.
#[derive(Debug, Default)]
pub(crate) struct ReadTurn {
    /// Bytes read (key updates count as [`KEY_UPDATE_READ_COST`] each).
    pub(crate) bytes: usize,
    /// Whether the channel may have more: the read stopped at its limit,
    /// not at `Pending` or the end.
    pub(crate) more: bool,
    /// How the channel ended, if it did (`Some(None)`: cleanly).
    pub(crate) end: Option<Option<Error>>,
}

/// The reading half and the records read but not yet delivered.
pub(crate) struct ReadSide {
    pub(super) reader: ChannelReader,
    /// Records read this turn, handed to the core under one lock.
    pub(super) inbox: Vec<(Bytes, Origin)>,
}

impl std::fmt::Debug for ReadSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSide")
            .field("records_received", &self.reader.records_received())
            .field("inbox", &self.inbox.len())
            .finish_non_exhaustive()
    }
}

impl ReadSide {
    pub(crate) fn new(reader: ChannelReader) -> Self {
        Self {
            reader,
            inbox: Vec::new(),
        }
    }

    pub(crate) fn reader(&self) -> &ChannelReader {
        &self.reader
    }

    pub(crate) fn reader_mut(&mut self) -> &mut ChannelReader {
        &mut self.reader
    }

    /// Reads what the channel has, up to a turn's worth of records and
    /// `budget` bytes (a record may cross it), into the inbox, polling the
    /// transport with the lease's waker. Without the connection's lock.
    pub(crate) fn poll_read(&mut self, lease: &ReadLease, waker: &Waker, budget: usize) -> ReadTurn {
        let mut cx = Context::from_waker(waker);
        let mut turn = ReadTurn::default();
        lease.arm();
        while self.inbox.len() < READS_PER_TURN && turn.bytes < budget {
            let polled = self.reader.poll_data(&mut cx);
            // Key updates opened on the way count as bytes read.
            turn.bytes += self.reader.take_key_updates() as usize * KEY_UPDATE_READ_COST;
            match polled {
                Poll::Ready(Ok(Some((bytes, origin)))) => {
                    turn.bytes += bytes.len();
                    self.inbox.push((bytes, origin));
                }
                Poll::Ready(Ok(None)) => turn.end = Some(None),
                Poll::Ready(Err(err)) => turn.end = Some(Some(err)),
                // The lease's waker is registered: whoever holds it reads next.
                Poll::Pending => return turn,
            }
            if turn.end.is_some() {
                break;
            }
        }
        lease.disarm();
        turn.more = turn.end.is_none();
        turn
    }
}

/// Whom the transport wakes when records arrive: the driver, or the task
/// the read is lent to. It is the one waker the transport is ever polled
/// with, so lending the read and taking it back need no new poll. Lent and
/// taken back under the connection's lock, as the [`Arbiter`] decides;
/// woken by the transport without it, and without a lock of its own: each
/// target is an [`AtomicWaker`], which a wake-up empties and the next
/// poll of its task fills again (the driver's every turn, the holder's
/// every wait for data).
///
/// [`Arbiter`]: super::arbiter::Arbiter
#[derive(Debug, Default)]
pub(crate) struct ReadLease {
    driver: AtomicWaker,
    /// The task the read is lent to.
    holder: AtomicWaker,
    /// Whether the read is lent (for the transport's wake-ups, and for the
    /// driver, which asks without the connection's lock).
    lent: AtomicBool,
    /// Whether the transport holds this waker (a read ended `Pending`
    /// since it last fired): then taking the read back needs no wake-up,
    /// as the next records wake the driver by themselves.
    armed: AtomicBool,
}

impl Wake for ReadLease {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.armed.store(false, SeqCst);
        if self.lent.load(SeqCst) {
            self.holder.wake();
        } else {
            self.driver.wake();
        }
    }
}

impl ReadLease {
    /// Lends the read to the task `holder` wakes.
    pub(super) fn lend(&self, holder: &Waker) {
        self.holder.register(holder);
        self.lent.store(true, SeqCst);
    }

    /// Takes the read back for the driver: whether the transport holds
    /// this waker (then the next records wake the driver by themselves).
    pub(super) fn take_back(&self) -> bool {
        self.lent.store(false, SeqCst);
        drop(self.holder.take());
        self.armed.load(SeqCst)
    }

    /// Whether the transport holds this waker (a read ended `Pending`
    /// since it last fired).
    pub(super) fn is_armed(&self) -> bool {
        self.armed.load(SeqCst)
    }

    /// The driver's turn: records that arrive while the read is not lent
    /// wake it.
    pub(crate) fn set_driver(&self, waker: &Waker) {
        self.driver.register(waker);
    }

    /// Whether the read is lent to a stream's task.
    pub(crate) fn is_lent(&self) -> bool {
        self.lent.load(SeqCst)
    }

    /// Wakes the task the read is lent to, if it is and the transport
    /// may have records for which nobody is registered (a read stopped at
    /// its limit, or the holder could not read: another read was under
    /// way). Called with the reading half free.
    pub(crate) fn nudge_holder(&self) {
        if !self.lent.load(SeqCst) || self.armed.load(SeqCst) {
            return;
        }
        self.holder.wake();
    }

    fn arm(&self) {
        self.armed.store(true, SeqCst);
    }

    fn disarm(&self) {
        self.armed.store(false, SeqCst);
    }
}
