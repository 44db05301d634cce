//! The crate's locks: they never poison (what they guard stays
//! consistent whatever panicked), and in debug builds each
//! thread counts those it holds, so that a curve operation or a signature
//! can check that it runs under none ([`assert_unlocked`]). A handshake
//! must never make another, on another worker, wait for its X25519 or
//! Ed25519 work (docs/SECURITY.md, "Early data").

use std::{
    ops::{Deref, DerefMut},
    sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError},
};

/// A lock guard, counted while it lives (in debug builds).
#[derive(Debug)]
pub(crate) struct Held<G> {
    guard: G,
    _count: Count,
}

impl<G: Deref> Deref for Held<G> {
    type Target = G::Target;

    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut> DerefMut for Held<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

/// A mutex's guard, from [`lock`] or [`try_lock`].
pub(crate) type Locked<'a, T> = Held<MutexGuard<'a, T>>;

/// `mutex`, locked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> Locked<'_, T> {
    let guard = mutex.lock().unwrap_or_else(PoisonError::into_inner);
    Held {
        guard,
        _count: Count::new(),
    }
}

/// `mutex`, locked, unless another holds it now.
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<Locked<'_, T>> {
    let guard = match mutex.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return None,
    };
    Some(Held {
        guard,
        _count: Count::new(),
    })
}

/// `lock`, read.
pub(crate) fn read<T>(lock: &RwLock<T>) -> Held<RwLockReadGuard<'_, T>> {
    let guard = lock.read().unwrap_or_else(PoisonError::into_inner);
    Held {
        guard,
        _count: Count::new(),
    }
}

/// `lock`, written.
pub(crate) fn write<T>(lock: &RwLock<T>) -> Held<RwLockWriteGuard<'_, T>> {
    let guard = lock.write().unwrap_or_else(PoisonError::into_inner);
    Held {
        guard,
        _count: Count::new(),
    }
}

/// Panics, in debug builds, if this thread holds a lock of this module:
/// `work` (an X25519 agreement, a signature) would make whoever waits for
/// it wait that long too.
pub(crate) fn assert_unlocked(work: &str) {
    #[cfg(debug_assertions)]
    HELD.with(|held| {
        assert!(
            held.get() == 0,
            "{work} under a lock that other handshakes share ({} held)",
            held.get()
        );
    });
    #[cfg(not(debug_assertions))]
    let _ = work;
}

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One lock held by this thread (counted in debug builds only).
#[derive(Debug)]
struct Count(());

impl Count {
    fn new() -> Self {
        #[cfg(debug_assertions)]
        HELD.with(|held| held.set(held.get() + 1));
        Self(())
    }
}

impl Drop for Count {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| held.set(held.get() - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(debug_assertions)]
    fn work_under_a_shared_lock_is_caught() {
        let mutex = Mutex::new(1);
        assert_unlocked("nothing held");
        let guard = lock(&mutex);
        let caught = std::panic::catch_unwind(|| assert_unlocked("an X25519 agreement"));
        assert!(caught.is_err(), "a lock is held");
        drop(guard);
        assert_unlocked("released");
        let rw = RwLock::new(2);
        {
            let _a = read(&rw);
            let _b = read(&rw);
            assert!(std::panic::catch_unwind(|| assert_unlocked("work")).is_err());
        }
        let _c = write(&rw);
        assert!(std::panic::catch_unwind(|| assert_unlocked("work")).is_err());
    }
}
