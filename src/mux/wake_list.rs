//! The wakers a turn under the connection's lock collects, to be woken
//! once the lock is released.

use std::task::Waker;

/// Wakers to call after the lock is released: the first one inline, so
/// that a turn that wakes one reader (every message received) does not
/// allocate, and one that wakes none costs nothing.
#[derive(Default)]
pub(crate) struct WakeList {
    first: Option<Waker>,
    more: Vec<Waker>,
}

impl WakeList {
    pub(crate) fn push(&mut self, waker: Waker) {
        if self.first.is_none() {
            self.first = Some(waker);
        } else {
            self.more.push(waker);
        }
    }

    /// Wakes every waker collected.
    pub(crate) fn wake_all(self) {
        if let Some(first) = self.first {
            first.wake();
        }
        self.more.into_iter().for_each(Waker::wake);
    }
}

impl Extend<Waker> for WakeList {
    fn extend<I: IntoIterator<Item = Waker>>(&mut self, wakers: I) {
        wakers.into_iter().for_each(|waker| self.push(waker));
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicUsize, Ordering},
            Arc,
        },
        task::Wake,
    };

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn every_waker_is_woken_once() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let mut list = WakeList::default();
        list.extend((0..5).map(|_| Waker::from(count.clone())));
        list.wake_all();
        assert_eq!(count.0.load(Ordering::Relaxed), 5);
    }
}
