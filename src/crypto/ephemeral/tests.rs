use super::*;
use proptest::prelude::*;

fn reference(secret: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
    x25519_dalek::x25519(*secret, *public)
}

/// The agreement's bytes (all zero where it is refused), for comparing.
fn x25519(secret: &[u8; 32], public: &[u8; 32]) -> [u8; 32] {
    super::x25519(&private_key(secret), public).map_or([0; 32], |shared| *shared)
}

#[test]
fn a_key_moves_without_its_secret() {
    // What moving a key copies (into the pool's Vec, out of it, as the
    // Vec grows, and the buffers nobody wipes): aws-lc's pointer, the
    // algorithm's and the public key. The secret stays inside aws-lc,
    // which wipes it once.
    assert!(
        std::mem::size_of::<Ephemeral>() <= 3 * std::mem::size_of::<usize>() + 32,
        "the secret is not inline: {} bytes",
        std::mem::size_of::<Ephemeral>()
    );
    let key = Ephemeral::generate();
    let public = key.public_key();
    let peer = Ephemeral::generate();
    let expected = *Ephemeral::generate().agree(&peer.public_key()).as_bytes();
    let mut moved = vec![key];
    moved.reserve(1000); // the buffer the key sat in is freed unwiped
    let key = moved.pop().unwrap();
    assert_eq!(key.public_key(), public);
    assert_ne!(*key.agree(&peer.public_key()).as_bytes(), expected, "another key");
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
    let alice_public = Ephemeral::from_secret(alice).public_key();
    let bob_public = Ephemeral::from_secret(bob).public_key();
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
    for public in &publics {
        for secret in [[0; 32], [0xff; 32], [7; 32]] {
            // aws-lc refuses an all-zero agreement (a point of small
            // order), which reads here as all zero, as X25519 gives it.
            assert_eq!(
                x25519(&secret, public),
                reference(&secret, public),
                "{public:02x?}"
            );
        }
    }
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
        // Random bytes: about half are points of the curve, half of the
        // twist.
        prop_assert_eq!(x25519(&secret, &public), reference(&secret, &public));
    }

    #[test]
    fn a_key_pair_agrees_with_its_peer(a in any::<[u8; 32]>(), b in any::<[u8; 32]>()) {
        let public = |s: [u8; 32]| Ephemeral::from_secret(s).public_key();
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
    let taken: std::collections::HashSet<_> = (0..POOL_TARGET).map(|_| pool.take().public_key()).collect();
    assert_eq!(taken.len(), POOL_TARGET);
    assert_eq!(stocked(&pool), 0);
}
