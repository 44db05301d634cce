//! Who reads the channel, carried out under the connection's lock: the
//! read lent to a lone waiting stream's task and taken back for the driver
//! as the [`Arbiter`](super::arbiter::Arbiter) decides (the policy
//! [`super::reading`] describes), and a lent read made from the stream's
//! task.

use std::task::{Context, Poll, Waker};

use super::{
    arbiter::{Lending, Waiting},
    reading::{ReadSide, READ_BUDGET},
    shared::{Inner, Shared},
};
use crate::{
    error::Error,
    sync::{self, Locked},
};

impl ReadSide {
    /// Hands what was read to the core, under the lock.
    pub(crate) fn deliver(&mut self, shared: &mut Shared, end: Option<Option<Error>>) {
        if self.inbox.is_empty() && end.is_none() {
            return;
        }
        let now = shared.clock();
        for (bytes, origin) in self.inbox.drain(..) {
            shared.core.handle_input(bytes, origin, now);
        }
        match end {
            Some(None) => shared.core.handle_eof(),
            Some(Some(err)) => shared.core.handle_transport_error(err),
            None => {}
        }
        shared.records_received = self.reader.records_received().0;
        shared.key_updates_received = self.reader.key_updates_received();
        shared.read_buffers = self.reader.buffer_capacity();
    }
}

impl Shared {
    /// Registers `waker` for stream `id`'s data, and lends it the read if
    /// its task is the only one waiting on the connection: returns whether
    /// it should read now (the read is lent to it, and the transport may
    /// have records: otherwise they wake it when they come).
    pub(crate) fn wait_read(&mut self, id: u32, waker: &Waker) -> bool {
        self.read_wakers.insert(id, waker.clone());
        let waiting = Waiting {
            readers: self.read_wakers.len(),
            others: !self.write_wakers.is_empty()
                || !self.open_waiters.is_empty()
                || !self.accept_waiters.is_empty(),
            live: self.driver.is_some() && self.core.error().is_none(),
        };
        match self.arbiter.wait_read(id, waiting) {
            Lending::Lent => {
                self.lease.lend(waker);
                !self.lease.is_armed()
            }
            Lending::TakenBack => {
                self.read_taken_back();
                false
            }
            Lending::Driver => false,
        }
    }

    /// Registers `waker` for room or credit on stream `id`: the driver
    /// reads for it (credit comes in the peer's records).
    pub(crate) fn wait_write(&mut self, id: u32, waker: &Waker) {
        self.write_wakers.insert(id, waker.clone());
        self.take_back_read();
    }

    /// Stream `id` has what it waited for: the read goes back to the
    /// driver if it was lent to it, so that the driver reads ahead (within
    /// the windows) while the task is busy with what it got.
    pub(crate) fn stop_waiting(&mut self, id: u32) {
        if self.arbiter.stop_waiting(id) == Lending::TakenBack {
            self.read_taken_back();
        }
    }

    /// Stream `id` no longer reads (it read its end, failed, or its
    /// reading half is gone).
    pub(crate) fn stop_reading(&mut self, id: u32) {
        self.read_wakers.remove(&id);
        self.stop_waiting(id);
    }

    /// Takes the read back for the driver (another task waits, or a timer
    /// of the driver's fired).
    pub(crate) fn take_back_read(&mut self) {
        if self.arbiter.take_back() == Lending::TakenBack {
            self.read_taken_back();
        }
    }

    /// The arbiter took the read back: the lease wakes the driver from now
    /// on, and wakes it now if records may wait for it (the transport does
    /// not hold the lease's waker).
    fn read_taken_back(&mut self) {
        if !self.lease.take_back() {
            if let Some(driver) = &self.driver {
                driver.wake_by_ref();
            }
        }
    }
}

impl Inner {
    /// The reading half (kept going after a panic poisoned its lock, as
    /// the connection's state is).
    pub(crate) fn lock_read_side(&self) -> Locked<'_, Option<ReadSide>> {
        sync::lock(&self.read_side)
    }

    /// The reading half, unless another task holds it now.
    pub(crate) fn try_lock_read_side(&self) -> Option<Locked<'_, Option<ReadSide>>> {
        sync::try_lock(&self.read_side)
    }

    /// Reads the channel from the calling task, the read being lent to it,
    /// delivers what came, then runs `then` (the stream's next read)
    /// under the same lock, and sends what the core owes from this task.
    /// `Pending` if another task is reading: it delivers, and wakes whoever
    /// the records are for.
    pub(crate) fn read_lent<T>(
        &self,
        cx: &Context<'_>,
        id: u32,
        then: impl FnOnce(&mut Shared) -> Poll<T>,
    ) -> Poll<T> {
        // Taken: the driver's turn holds it, delivers what it reads, and
        // wakes this task after the turn if records may be left
        // ([`ReadLease::nudge_holder`]).
        let Some(mut guard) = self.try_lock_read_side() else {
            return Poll::Pending;
        };
        let Some(side) = guard.as_mut() else {
            // The driver has ended: the core has failed every stream.
            return self.with(then);
        };
        let turn = side.poll_read(&self.lease, &self.read_waker, READ_BUDGET);
        let polled = self.with_then(
            |shared| {
                // The caller looks for its data itself next: what is read
                // for it need not wake its task.
                shared.read_wakers.remove(&id);
                shared.records_read_by_streams += side.inbox.len() as u64;
                side.deliver(shared, turn.end);
                then(shared)
            },
            // What the core owes for what was read (credit, a pong) leaves
            // from this task.
            |shared| match shared.core.has_output() {
                true => shared.transmit_now(true),
                false => shared.kick(),
            },
        );
        drop(guard);
        if turn.more && polled.is_pending() {
            // More records wait, and none was this stream's: read on after
            // the tasks this read woke.
            cx.waker().wake_by_ref();
        }
        polled
    }
}
