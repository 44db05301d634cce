//! Ephemeral X25519 keys, made ahead of time.
//!
//! Making a key pair costs a fixed-base scalar multiplication (17 µs here,
//! BENCHMARKS.md). The pool hands out a key made earlier, and is refilled
//! on tokio's blocking pool once a handshake is over, so neither dialing nor
//! accepting waits for it, and the refill does not compete with the
//! handshake's own work for the CPU.

use std::sync::{Arc, Mutex};

use rand_core::OsRng;
use x25519_dalek::{EphemeralSecret, PublicKey, SharedSecret};

/// How many keys a refill makes ready.
const POOL_TARGET: usize = 8;
/// A refill starts only when the pool is down to this many keys: one
/// wake-up of a blocking thread per batch rather than per handshake.
const POOL_LOW_WATER: usize = 1;

/// A fresh X25519 key pair for one handshake. It can be used once; its
/// secret is wiped when it is used or dropped.
pub struct Ephemeral {
    secret: EphemeralSecret,
    public: PublicKey,
}

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ephemeral")
            .field("public", self.public.as_bytes())
            .finish_non_exhaustive()
    }
}

impl Ephemeral {
    /// A new key pair from the operating system's random numbers.
    pub fn generate() -> Self {
        let secret = EphemeralSecret::random_from_rng(OsRng);
        let public = PublicKey::from(&secret);
        Self { secret, public }
    }

    /// The public key, for the Setup offer.
    pub fn public_key(&self) -> [u8; 32] {
        *self.public.as_bytes()
    }

    /// The shared secret with the peer's public key; uses the secret up.
    pub(crate) fn agree(self, peer: &[u8; 32]) -> SharedSecret {
        self.secret.diffie_hellman(&PublicKey::from(*peer))
    }
}

/// A small stock of fresh ephemeral keys. Each key is handed out once and
/// zeroized when dropped.
#[derive(Clone, Default)]
pub(crate) struct EphemeralPool {
    ready: Arc<Mutex<Vec<Ephemeral>>>,
}

impl std::fmt::Debug for EphemeralPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ready = self.ready.lock().map(|r| r.len()).unwrap_or(0);
        f.debug_struct("EphemeralPool").field("ready", &ready).finish()
    }
}

impl EphemeralPool {
    /// A key nobody else has seen: one made ahead of time, or a new one.
    pub(crate) fn take(&self) -> Ephemeral {
        let key = self.ready.lock().ok().and_then(|mut ready| ready.pop());
        key.unwrap_or_else(Ephemeral::generate)
    }

    /// Tops the pool up in the background (call when the CPU is not on a
    /// handshake's critical path).
    pub(crate) fn refill(&self) {
        if self.ready.lock().map_or(true, |r| r.len() > POOL_LOW_WATER) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ready = self.ready.clone();
        handle.spawn_blocking(move || loop {
            if ready.lock().map_or(true, |r| r.len() >= POOL_TARGET) {
                return;
            }
            let key = Ephemeral::generate();
            match ready.lock() {
                Ok(mut r) if r.len() < POOL_TARGET => r.push(key),
                _ => return,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_never_handed_out_twice() {
        let pool = EphemeralPool::default();
        let a = pool.take();
        let b = pool.take();
        assert_ne!(a.public_key(), b.public_key());
    }

    #[tokio::test]
    async fn the_pool_refills_in_the_background() {
        let pool = EphemeralPool::default();
        let _ = pool.take();
        pool.refill();
        for _ in 0..200 {
            if pool.ready.lock().unwrap().len() == POOL_TARGET {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("pool did not refill");
    }
}
