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
        let public = MontgomeryPoint::mul_base_clamped(**secret).to_bytes();
        Self { secret, public }
    }

    /// The public key, for the Setup offer.
    pub(crate) fn public_key(&self) -> [u8; 32] {
        self.public
    }

    /// The secret, for the early data's box (docs/PROTOCOL.md, section
    /// 17.2), which derives its own key from it.
    pub(crate) fn secret_bytes(&self) -> &[u8; 32] {
        &self.secret
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
fn x25519(secret: &[u8; 32], public: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    let point = MontgomeryPoint(*public);
    let mut shared = match point.to_edwards(0) {
        Some(edwards) => edwards.mul_clamped(*secret).to_montgomery(),
        None => point.mul_clamped(*secret),
    };
    let bytes = Zeroizing::new(shared.to_bytes());
    shared.zeroize();
    bytes
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reference(secret: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
        x25519_dalek::x25519(*secret, *public)
    }

    /// The agreement's bytes, unwrapped for comparing.
    fn x25519(secret: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
        *super::x25519(secret, public)
    }

    #[test]
    fn a_key_moves_without_its_secret() {
        // What moving a key copies (into the pool's Vec, out of it, as the
        // Vec grows, and the buffers nobody wipes): a pointer and the public
        // key. The secret stays in its box, wiped once.
        assert_eq!(
            std::mem::size_of::<Ephemeral>(),
            std::mem::size_of::<usize>() + 32,
            "the secret is not inline"
        );
        let key = Ephemeral::generate();
        let secret = **key.secret;
        let mut moved = vec![key];
        moved.reserve(1000); // the buffer the key sat in is freed unwiped
        assert_eq!(**moved[0].secret, secret, "the same box");
    }

    #[test]
    fn matches_rfc_7748s_test_vectors() {
        // Section 5.2, the first vector; section 6.1, Alice and Bob.
        let hex = |s: &str| -> [u8; 32] {
            std::array::from_fn(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        };
        assert_eq!(
            x25519(
                &hex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
                &hex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"),
            ),
            hex("c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552")
        );
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
        let alice_public = MontgomeryPoint::mul_base_clamped(alice).to_bytes();
        let bob_public = MontgomeryPoint::mul_base_clamped(bob).to_bytes();
        assert_eq!(
            alice_public,
            hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
        assert_eq!(
            bob_public,
            hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        );
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        assert_eq!(x25519(&alice, &bob_public), shared);
        assert_eq!(x25519(&bob, &alice_public), shared);
    }

    #[test]
    fn small_order_non_canonical_and_twist_points_agree_with_x25519_dalek() {
        // The eight points of small order, as u-coordinates.
        let mut publics: Vec<[u8; 32]> = curve25519_dalek::constants::EIGHT_TORSION
            .iter()
            .map(|point| point.to_montgomery().to_bytes())
            .collect();
        // p - 1 (= -1, of the twist), p and p + 1 (non-canonical 0 and 1),
        // all ones, and small u with and without the top bit (which X25519
        // ignores): points of the curve and of the twist.
        let p_plus = |n: u8| -> [u8; 32] {
            let mut bytes = [0xff; 32];
            bytes[0] = 0xed + n;
            bytes[31] = 0x7f;
            bytes
        };
        publics.extend([p_plus(0), p_plus(1), [0xff; 32]]);
        let mut minus_one = p_plus(0);
        minus_one[0] = 0xec;
        publics.push(minus_one);
        for u in 0..64u8 {
            let mut public = [0; 32];
            public[0] = u;
            publics.push(public);
            public[31] = 0x80;
            publics.push(public);
        }
        let mut on_curve = 0;
        for public in &publics {
            on_curve += usize::from(MontgomeryPoint(*public).to_edwards(0).is_some());
            for secret in [[0; 32], [0xff; 32], [7; 32]] {
                assert_eq!(
                    x25519(&secret, public),
                    reference(&secret, public),
                    "{public:02x?}"
                );
            }
        }
        assert!(
            on_curve > 8 && on_curve < publics.len() - 8,
            "both paths taken: {on_curve}"
        );
        // Points of small order contribute nothing, and the agreement says so.
        for point in curve25519_dalek::constants::EIGHT_TORSION {
            let shared = Ephemeral::generate().agree(&point.to_montgomery().to_bytes());
            assert!(!shared.was_contributory());
        }
        let peer = Ephemeral::generate();
        assert!(Ephemeral::generate().agree(&peer.public_key()).was_contributory());
    }

    proptest! {
        #[test]
        fn matches_x25519_dalek(secret in any::<[u8; 32]>(), public in any::<[u8; 32]>()) {
            // Random bytes: about half are points of the curve (the Edwards
            // path), half of the twist (the ladder).
            prop_assert_eq!(x25519(&secret, &public), reference(&secret, &public));
        }

        #[test]
        fn a_key_pair_agrees_with_its_peer(a in any::<[u8; 32]>(), b in any::<[u8; 32]>()) {
            let public = |s: [u8; 32]| MontgomeryPoint::mul_base_clamped(s).to_bytes();
            prop_assert_eq!(x25519(&a, &public(b)), x25519(&b, &public(a)));
            prop_assert_eq!(public(a), x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from(a)).to_bytes());
        }
    }

    #[test]
    fn keys_are_never_handed_out_twice() {
        let pool = EphemeralPool::default();
        let a = pool.take();
        let b = pool.take();
        assert_ne!(a.public_key(), b.public_key());
    }

    fn stocked(pool: &EphemeralPool) -> usize {
        pool.inner.ready.lock().unwrap().len()
    }

    #[tokio::test]
    async fn a_refill_lets_the_tasks_ready_with_it_run_before_its_first_key() {
        // As after an acceptor's handshake: the refill, then the
        // connection's own work (its driver, the first stream's handler)
        // ready to run in the same pass.
        let pool = EphemeralPool::default();
        pool.refill_in_background();
        let connection = tokio::spawn({
            let pool = pool.clone();
            async move { stocked(&pool) }
        });
        assert_eq!(
            connection.await.unwrap(),
            0,
            "no key made ahead of the connection's work"
        );
    }

    #[tokio::test]
    async fn an_acceptors_refill_runs_in_a_task_of_its_own_one_key_per_pass() {
        let pool = EphemeralPool::default();
        pool.refill_in_background();
        // Nothing made by the caller, and a second call starts no second task.
        assert_eq!(stocked(&pool), 0);
        pool.refill_in_background();
        tokio::task::yield_now().await;
        let after_one_pass = stocked(&pool);
        assert!(after_one_pass <= 2, "{after_one_pass} keys after one pass");
        for _ in 0..1000 {
            if !pool.inner.refilling.load(Ordering::Acquire) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(stocked(&pool), POOL_TARGET);
        assert!(!pool.inner.refilling.load(Ordering::Acquire));
        // Full: no task.
        pool.refill_in_background();
        assert!(!pool.inner.refilling.load(Ordering::Acquire));
        // Outside a runtime: nothing, and the mark is not left set.
        let outside = EphemeralPool::default();
        std::thread::spawn({
            let outside = outside.clone();
            move || outside.refill_in_background()
        })
        .join()
        .unwrap();
        assert_eq!(stocked(&outside), 0);
        assert!(!outside.inner.refilling.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn a_wait_makes_keys_while_it_lasts_one_per_pass_of_the_runtime() {
        let pool = EphemeralPool::default();
        // Ready at once: no key is made.
        assert_eq!(pool.while_waiting(async { 7 }, || false).await, 7);
        assert_eq!(stocked(&pool), 0);
        // A peer that answers on its next turn: the wait ends after the key
        // in hand (looking again without a yield, it went on to fill the
        // pool).
        let (tx, rx) = tokio::sync::oneshot::channel();
        let peer = tokio::spawn(async move {
            tokio::task::yield_now().await;
            tx.send(()).unwrap();
        });
        pool.while_waiting(rx, || false).await.unwrap();
        peer.await.unwrap();
        let made = stocked(&pool);
        assert!((1..=2).contains(&made), "{made} keys made");
        // A wait that lasts fills the pool to its target, and no further.
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.while_waiting(std::future::pending::<()>(), || false).await }
        });
        for _ in 0..1000 {
            if stocked(&pool) == POOL_TARGET {
                break;
            }
            tokio::task::yield_now().await;
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(stocked(&pool), POOL_TARGET);
        waiting.abort();
        // Each key goes out once.
        let taken: std::collections::HashSet<_> =
            (0..POOL_TARGET).map(|_| pool.take().public_key()).collect();
        assert_eq!(taken.len(), POOL_TARGET);
        assert_eq!(stocked(&pool), 0);
    }
}
