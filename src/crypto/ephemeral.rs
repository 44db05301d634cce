//! Ephemeral X25519 keys, made ahead of time.
//!
//! Making a key pair costs a fixed-base scalar multiplication (about 14 µs
//! here). The pool hands out a key made earlier, and refills where it
//! costs the handshakes least:
//!
//! - A dialer makes keys while it waits for its connection and the peer's
//!   Setup ([`EphemeralPool::while_waiting`]). It makes one key at a time
//!   and, after each, yields to the runtime, which looks at the transport
//!   before polling the wait again: an answer that arrives meanwhile waits
//!   for one key at most, and once the pool is full a wait costs only a
//!   look at its length. (Looking again without a yield, as a first version
//!   did, found the wait pending however long ago the answer had come: a
//!   transport's readiness is news only the runtime's I/O poll brings. A
//!   wait went on making keys until the pool was full.)
//! - An acceptor refills after each handshake, in a task of its own that
//!   makes one key per pass of the runtime
//!   ([`EphemeralPool::refill_in_background`]), starting with a pass of
//!   the tasks ready with it: after a handshake that accepted early data,
//!   the connection's driver and the first stream's handler, whose answer
//!   is on the dial's path (a cold 0-RTT call 255 µs against 315 µs when
//!   the first key came first). Its waits inside a handshake are short, and
//!   each lies on the dial's path: the dialer's proof, read a key late, is
//!   verified a key late (`dial` p50 0.94–0.95 of making keys in those
//!   waits, BENCHMARKS.md).
//!
//! Refilling on tokio's blocking pool, as weft did before, made seven keys
//! at once every seventh handshake on a third thread, which took a CPU from
//! the dials running then (on two cores, `dial` p50 293 µs against 322 µs
//! before, BENCHMARKS.md).
//!
//! The agreement is X25519 (RFC 7748) computed on the birationally
//! equivalent Edwards curve when the peer's key is a point of the curve:
//! curve25519-dalek's variable-base Edwards multiplication (its AVX2 code
//! where the CPU has it) takes about 41 µs here against 58–72 µs for the
//! Montgomery ladder that x25519-dalek runs (`cargo bench --bench records
//! -- handshake_ops/x25519_dh`), and the dial waits for one agreement on
//! each side. The u-coordinate of the result is the same for either sign of
//! the point, so it is X25519's answer; a key on the curve's twist (which no
//! honest peer sends) takes the ladder. The tests check both against
//! x25519-dalek.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
};

use curve25519_dalek::montgomery::MontgomeryPoint;
use rand_core::{OsRng, RngCore};
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, Zeroizing};

/// How many keys the pool keeps ready: enough for a burst of handshakes
/// that start together.
const POOL_TARGET: usize = 8;

/// A fresh X25519 key pair for one handshake. It can be used once; its
/// secret is wiped when it is used or dropped.
pub(crate) struct Ephemeral {
    /// Boxed, so that moving the key (into the pool's `Vec` and out of it,
    /// or as that `Vec` grows) moves a pointer, and no copy of the secret
    /// is left behind in memory nobody wipes.
    secret: Box<Zeroizing<[u8; 32]>>,
    public: [u8; 32],
}

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ephemeral")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl Ephemeral {
    /// A new key pair from the operating system's random numbers.
    pub(crate) fn generate() -> Self {
        // Drawn straight into its box; the multiplication takes the scalar
        // by value (curve25519-dalek's copies on its stack are not ours to
        // wipe, PROTOCOL.md section 14).
        let mut secret = Box::new(Zeroizing::new([0; 32]));
        OsRng.fill_bytes(&mut secret[..]);
        let public = x25519_base(&secret);
        Self { secret, public }
    }

    /// The key pair of `secret` (test vectors).
    #[cfg(test)]
    pub(crate) fn from_secret(secret: [u8; 32]) -> Self {
        let secret = Box::new(Zeroizing::new(secret));
        let public = x25519_base(&secret);
        Self { secret, public }
    }

    /// The public key, for the Setup offer.
    pub(crate) fn public_key(&self) -> [u8; 32] {
        self.public
    }

    /// The box from this key to `public` (an acceptor's box key), for
    /// early data (docs/PROTOCOL.md, section 17.2): the secret stays
    /// here, and the box keeps only the key derived from the agreement.
    /// `None` for a key of small order.
    pub(crate) fn box_to(&self, public: &[u8; 32]) -> Option<super::early::BoxCipher> {
        super::early::BoxCipher::new(&self.secret, public)
    }

    /// The shared secret with the peer's public key (X25519); uses the
    /// secret up.
    pub(crate) fn agree(self, peer: &[u8; 32]) -> SharedSecret {
        SharedSecret(x25519(&self.secret, peer))
    }
}

/// X25519 of `secret` and the peer's `public` u-coordinate: on the Edwards
/// curve when `public` is a point of the curve, with the ladder when it is
/// on the twist. (Which of the two is taken depends on the peer's public
/// key only.)
pub(crate) fn x25519(secret: &[u8; 32], public: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    crate::sync::assert_unlocked("an X25519 agreement");
    let point = MontgomeryPoint(*public);
    let mut shared = match point.to_edwards(0) {
        Some(edwards) => edwards.mul_clamped(*secret).to_montgomery(),
        None => point.mul_clamped(*secret),
    };
    let bytes = Zeroizing::new(shared.to_bytes());
    shared.zeroize();
    bytes
}

/// The X25519 public key of `secret` (a fixed-base multiplication).
pub(crate) fn x25519_base(secret: &[u8; 32]) -> [u8; 32] {
    crate::sync::assert_unlocked("an X25519 key pair");
    MontgomeryPoint::mul_base_clamped(*secret).to_bytes()
}

/// An X25519 shared secret, wiped when dropped.
pub(crate) struct SharedSecret(Zeroizing<[u8; 32]>);

impl SharedSecret {
    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Whether the peer's key contributed: all zeros means it was a point
    /// of small order, whatever our secret (RFC 7748, section 6.1).
    pub(crate) fn was_contributory(&self) -> bool {
        !bool::from(self.0.ct_eq(&[0; 32]))
    }
}

/// A small stock of fresh ephemeral keys. Each key is handed out once and
/// zeroized when dropped.
#[derive(Clone, Default)]
pub(crate) struct EphemeralPool {
    inner: Arc<PoolInner>,
}

#[derive(Default)]
struct PoolInner {
    ready: Mutex<Vec<Ephemeral>>,
    /// Whether a task of [`EphemeralPool::refill_in_background`] runs.
    refilling: AtomicBool,
}

impl std::fmt::Debug for EphemeralPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ready = self.inner.ready.lock().map(|r| r.len()).unwrap_or(0);
        f.debug_struct("EphemeralPool").field("ready", &ready).finish()
    }
}

/// Marks a refill task running; clears the mark however the task ends
/// (its runtime may drop it unfinished).
struct Refilling(EphemeralPool);

impl Drop for Refilling {
    fn drop(&mut self) {
        self.0.inner.refilling.store(false, Ordering::Release);
    }
}

impl EphemeralPool {
    /// A key nobody else has seen: one made ahead of time, or a new one.
    pub(crate) fn take(&self) -> Ephemeral {
        let key = self.inner.ready.lock().ok().and_then(|mut ready| ready.pop());
        key.unwrap_or_else(Ephemeral::generate)
    }

    /// Refills the pool in a task of its own on the current tokio runtime,
    /// one key per pass of the runtime, unless it is full or a refill runs
    /// already. Outside a runtime it does nothing ([`take`](Self::take)
    /// makes a key when the pool has none).
    pub(crate) fn refill_in_background(&self) {
        if self.is_full() || self.inner.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let refilling = Refilling(self.clone());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            loop {
                tokio::task::yield_now().await;
                if !refilling.0.make_one() {
                    break;
                }
            }
            drop(refilling);
        });
    }

    fn is_full(&self) -> bool {
        self.inner
            .ready
            .lock()
            .map_or(true, |ready| ready.len() >= POOL_TARGET)
    }

    /// Runs `future`, making keys for later handshakes while it waits: one
    /// key per pass of the runtime (which looks at the transport between
    /// them), until the pool holds [`POOL_TARGET`] keys; then `spare`'s
    /// work, a piece per pass, while it says it did some.
    pub(crate) fn while_waiting<F: Future>(
        &self,
        future: F,
        spare: impl FnMut() -> bool + Send + 'static,
    ) -> WhileWaiting<F> {
        WhileWaiting {
            future,
            pool: self.clone(),
            spare: Box::new(spare),
            yielding: None,
        }
    }

    /// Makes one key if the pool is short of keys; whether it did.
    fn make_one(&self) -> bool {
        if self.is_full() {
            return false;
        }
        // Made outside the lock: another handshake may take a key meanwhile.
        let key = Ephemeral::generate();
        match self.inner.ready.lock() {
            Ok(mut ready) if ready.len() < POOL_TARGET => {
                ready.push(key);
                true
            }
            _ => false,
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`EphemeralPool::while_waiting`].
    pub(crate) struct WhileWaiting<F> {
        #[pin]
        future: F,
        pool: EphemeralPool,
        spare: Box<dyn FnMut() -> bool + Send>,
        // The yield after a key: tokio's, which wakes us once the runtime
        // has polled its I/O.
        yielding: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    }
}

impl<F: Future> Future for WhileWaiting<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(output);
        }
        // Pending, with our waker registered: the time until the peer
        // answers is free. One key per pass of the runtime.
        if let Some(yielding) = this.yielding {
            if yielding.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            *this.yielding = None;
        }
        if this.pool.make_one() || (this.spare)() {
            let mut yielding: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(tokio::task::yield_now());
            if yielding.as_mut().poll(cx).is_pending() {
                *this.yielding = Some(yielding);
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests;
