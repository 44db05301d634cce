//! Ephemeral X25519 keys, made ahead of time, and X25519 itself.
//!
//! X25519 is aws-lc's (through aws-lc-rs): 25 µs an agreement and 8 µs a
//! key pair here, against 45 and 17 µs for curve25519-dalek's Edwards
//! arithmetic (which weft used before) and 53 µs for x25519-dalek's ladder
//! (`cargo bench --features fuzzing --bench records -- handshake_ops`).
//! The secret stays inside aws-lc, which cleanses what it frees; the
//! shared secret comes out wiped when dropped. aws-lc refuses a peer key
//! of small order (an all-zero agreement), which weft reports as such.
//!
//! Making a key pair costs a fixed-base multiplication. The pool hands out
//! a key made earlier, and refills where it costs the handshakes least:
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
//!   the first key came first).
//!
//! Refilling on tokio's blocking pool, as weft did before, made seven keys
//! at once every seventh handshake on a third thread, which took a CPU from
//! the dials running then (on two cores, `dial` p50 293 µs against 322 µs
//! before, BENCHMARKS.md).

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll},
};

use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey, X25519};
use rand_core::{OsRng, RngCore};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// How many keys the pool keeps ready: enough for a burst of handshakes
/// that start together.
const POOL_TARGET: usize = 8;

/// A fresh X25519 key pair for one handshake. It can be used once (and,
/// by a dialer sending early data, for that data's box too); its secret
/// lives inside aws-lc, which wipes it when the key is dropped, and moving
/// the key moves a pointer.
pub(crate) struct Ephemeral {
    key: PrivateKey,
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
    /// A new key pair from aws-lc's random numbers.
    pub(crate) fn generate() -> Self {
        // The operating system's random numbers, as weft's other secrets:
        // aws-lc's own generator seeds each thread's state with CPU jitter
        // entropy (jitterentropy), tens of millions of instructions on a
        // thread's first key (callgrind, `dial`).
        let mut secret = Zeroizing::new([0u8; 32]);
        OsRng.fill_bytes(&mut secret[..]);
        Self::from_key(private_key(&secret))
    }

    /// The key pair of `secret` (test vectors).
    #[cfg(test)]
    pub(crate) fn from_secret(secret: [u8; 32]) -> Self {
        let secret = Zeroizing::new(secret);
        Self::from_key(private_key(&secret))
    }

    fn from_key(key: PrivateKey) -> Self {
        let public = public_key(&key);
        Self { key, public }
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
        x25519(&self.key, public).map(|shared| super::early::BoxCipher::from_shared(&shared))
    }

    /// The shared secret with the peer's public key (X25519); uses the
    /// secret up.
    pub(crate) fn agree(self, peer: &[u8; 32]) -> SharedSecret {
        SharedSecret(x25519(&self.key, peer).unwrap_or_else(|| Zeroizing::new([0; 32])))
    }
}

/// An X25519 private key of `secret` (a box key's, say).
pub(crate) fn private_key(secret: &[u8; 32]) -> PrivateKey {
    PrivateKey::from_private_key(&X25519, secret).expect("any 32 bytes are an X25519 private key")
}

/// The X25519 public key of `key` (a fixed-base multiplication).
pub(crate) fn public_key(key: &PrivateKey) -> [u8; 32] {
    crate::sync::assert_unlocked("an X25519 key pair");
    let public = key
        .compute_public_key()
        .expect("aws-lc computes X25519 public keys");
    public
        .as_ref()
        .try_into()
        .expect("an X25519 public key is 32 bytes")
}

/// X25519 of `key` and the peer's `public` u-coordinate (RFC 7748), wiped
/// when dropped; `None` if `public` is of small order (the agreement would
/// be all zero whatever the secret, and aws-lc refuses it).
pub(crate) fn x25519(key: &PrivateKey, public: &[u8; 32]) -> Option<Zeroizing<[u8; 32]>> {
    crate::sync::assert_unlocked("an X25519 agreement");
    let peer = UnparsedPublicKey::new(&X25519, public);
    agreement::agree(key, peer, (), |shared| {
        let mut out = Zeroizing::new([0u8; 32]);
        out.copy_from_slice(shared);
        Ok(out)
    })
    .ok()
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
