//! The wipe check: while armed, every block the unit tests' allocator
//! frees is searched for two secrets, and a block that still holds one
//! is counted. A secret left behind in freed memory (a copy in a `Vec`, a
//! key type that wipes its scalar but not its bytes, as crypto_box's
//! `SecretKey` does) is found; one wiped before its memory went is not.
//! (Copies on the stack are not seen: PROTOCOL.md section 14 says which
//! the curve arithmetic makes.) Only blocks freed by the test's own thread
//! count, which is where everything it checks runs: in full `cargo test
//! --lib` runs, another test's thread was seen (3 runs of 8) freeing an
//! 88-byte block that held the ephemeral secret: memory the C allocator
//! handed from thread to thread. Where the secret entered it is not found
//! yet: no block this thread freed through Rust's allocator held it, and
//! none of this thread's reusable memory did afterwards.

#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst},
        Mutex,
    },
};

use rand_core::{OsRng, RngCore};
use zeroize::Zeroizing;

use super::{
    early::{Announced, BoxKey, BoxKeyring, Credential, PreparedBox},
    Ephemeral, Identity,
};

/// The unit tests' allocator: the system's, and the search while armed.
struct Searching;

#[global_allocator]
static ALLOCATOR: Searching = Searching;

static ARMED: AtomicBool = AtomicBool::new(false);
/// The two secrets searched for, as 4 words each.
static SECRETS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static FOUND: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Whether this thread is the armed test's.
    static SEARCHING_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
/// One armed test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether `block` holds the first [`SEARCHED`] bytes of `secret` (all
/// of a key; an IV's 24).
fn holds(block: &[u8], secret: &[u64; 4]) -> bool {
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(secret) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    block.windows(SEARCHED).any(|window| window == &bytes[..SEARCHED])
}

/// How much of a secret is searched for: 24 random bytes are as unique
/// as 32, and a record key's IV is 24.
const SEARCHED: usize = 24;

// SAFETY: every call goes to the system allocator with the caller's
// arguments; `dealloc` reads the block it is handed, which is allocated
// and `layout.size()` bytes long until the system frees it after.
unsafe impl GlobalAlloc for Searching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(SeqCst) && layout.size() >= SEARCHED && SEARCHING_HERE.with(std::cell::Cell::get) {
            // SAFETY: the block is live and `layout.size()` bytes long.
            let block = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
            let word = |i: usize| SECRETS[i].load(SeqCst);
            let first = [word(0), word(1), word(2), word(3)];
            let second = [word(4), word(5), word(6), word(7)];
            if holds(block, &first) || holds(block, &second) {
                FOUND.fetch_add(1, SeqCst);
            }
        }
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Two random secrets, armed: what `FOUND` counts until disarmed.
fn arm() -> (Zeroizing<[u8; 32]>, Zeroizing<[u8; 32]>) {
    let (mut a, mut b) = (Zeroizing::new([0u8; 32]), Zeroizing::new([0u8; 32]));
    OsRng.fill_bytes(&mut a[..]);
    OsRng.fill_bytes(&mut b[..]);
    for (i, chunk) in a.chunks_exact(8).chain(b.chunks_exact(8)).enumerate() {
        SECRETS[i].store(u64::from_le_bytes(chunk.try_into().unwrap()), SeqCst);
    }
    FOUND.store(0, SeqCst);
    ARMED.store(true, SeqCst);
    (a, b)
}

/// `a` and `b` armed.
fn arm_with(a: &[u8; 32], b: &[u8; 32]) {
    for (i, chunk) in a.chunks_exact(8).chain(b.chunks_exact(8)).enumerate() {
        SECRETS[i].store(u64::from_le_bytes(chunk.try_into().unwrap()), SeqCst);
    }
    FOUND.store(0, SeqCst);
    ARMED.store(true, SeqCst);
}

/// One armed test at a time (while the guard is held), and the blocks
/// this thread frees are the ones searched.
fn search_here() -> std::sync::MutexGuard<'static, ()> {
    let one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    SEARCHING_HERE.with(|here| here.set(true));
    one
}

fn found() -> usize {
    FOUND.load(SeqCst)
}

#[test]
fn no_box_secret_or_ephemeral_secret_is_left_in_freed_memory() {
    let _one = search_here();
    // The check sees a copy left behind. (Its bytes stay in the freed
    // block, which the allocator may hand out again, partly overwritten,
    // and which may be freed again while armed: so the secrets it held are
    // not the ones searched for below.)
    let (control, _) = arm();
    drop(std::hint::black_box(control.to_vec()));
    assert_eq!(found(), 1, "a Vec holding the secret, freed");
    let (box_secret, ephemeral_secret) = arm();

    // An acceptor's box key, kept in a keyring (whose Vec grows and moves
    // its keys), a dialer's ephemeral key boxed to it, early data sealed
    // and opened, and everything dropped.
    let identity = Identity::from_seed(&[1; 32]);
    let now_s = 1_800_000_000;
    let key = BoxKey::from_secret(
        Box::new(Zeroizing::new(*box_secret)),
        &identity,
        now_s,
        now_s + 100,
    );
    let announced = Announced::verify(&key.announcement, &identity.peer_id()).unwrap();
    let mut ring = BoxKeyring::new(50);
    let key = ring.insert(key, now_s);
    for later in 1..5 {
        ring.insert(
            BoxKey::generate(&identity, now_s + 50 * later, now_s + 50 * later + 100),
            now_s + 50 * later,
        );
    }
    let ephemeral = Ephemeral::from_secret(*ephemeral_secret);
    let public = ephemeral.public_key();
    let prepared = PreparedBox::new(&announced, ephemeral).unwrap();
    let (ephemeral, seal) = prepared.seal(
        Credential::Signed(&Identity::from_seed(&[2; 32])),
        &identity.peer_id(),
        b"",
        now_s * 1000,
        b"early",
    );
    let field = seal.unwrap().seal(b"d0");
    let opened = super::early::open_box(&key, &field, b"d0", &public).unwrap();
    assert_eq!(&opened.payload[..], b"early");
    // The ephemeral key goes on to the session's agreement, and is used up.
    let _shared = ephemeral.agree(&key.public);
    drop((opened, ring, key));
    ARMED.store(false, SeqCst);
    assert_eq!(found(), 0, "a secret was left in freed memory");
}

#[test]
fn a_record_key_leaves_neither_its_key_nor_its_iv_in_freed_memory() {
    use crate::{record::RecordKey, terms::CipherSuite};

    let _one = search_here();
    for suite in CipherSuite::ALL
        .into_iter()
        .filter(|&s| s != CipherSuite::Plaintext)
    {
        let (key, iv) = arm();
        let iv: [u8; 24] = iv[..24].try_into().unwrap();
        // Boxed, as a connection holds its keys: the box is freed with the
        // key in it, after the key's own drop.
        let mut record_key = Box::new(RecordKey::new(suite, &key, iv));
        let mut record = *b"a record";
        record_key.seal(&[3, 0, 0, 24], &mut record).unwrap();
        drop(std::hint::black_box(record_key));
        ARMED.store(false, SeqCst);
        assert_eq!(
            found(),
            0,
            "{suite:?}: the key or its IV was left in freed memory"
        );
    }
}

#[test]
fn a_replicas_derived_keys_and_the_root_they_come_from_leave_nothing_in_freed_memory() {
    use super::early::{Acceptance, EarlyBudget, KeySource};

    let _one = search_here();
    let mut seed = Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(&mut seed[..]);
    let (every, now_s) = (50, 1_800_000_000);
    for searched in ["the root", "a box key", "a ticket key"] {
        // The root, as PROTOCOL.md section 17.1 derives it, armed before
        // the identity is made: a copy left while making it is seen too.
        let root = Zeroizing::new(
            <[u8; 32]>::try_from(
                aws_lc_rs::hmac::sign(
                    &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &seed[..]),
                    b"weft v3 replica secrets",
                )
                .as_ref(),
            )
            .unwrap(),
        );
        if searched == "the root" {
            arm_with(&root, &root);
        }
        let identity = Identity::from_seed(&seed);
        assert_eq!(identity.replica_root(), *root);
        let (box_secret, ticket_secret) = BoxKey::derived_secrets(&identity, every, now_s / every);
        match searched {
            "the root" => {}
            "a box key" => arm_with(&box_secret, &box_secret),
            _ => arm_with(&ticket_secret, &ticket_secret),
        }
        drop((box_secret, ticket_secret));
        // A replica's keys derived, rotated past and expired, and a ticket
        // issued and opened; then everything dropped.
        let acceptance = Acceptance::new(every, KeySource::Identity, EarlyBudget::default(), None, 64);
        let key = acceptance.current_key(&identity, now_s);
        let ticket = key.tickets.issue(&identity.peer_id());
        assert!(key.tickets.open(&ticket.ticket).is_some());
        for later in 1..5 {
            acceptance.current_key(&identity, now_s + every * later);
        }
        drop((key, ticket, acceptance, identity));
        ARMED.store(false, SeqCst);
        assert_eq!(found(), 0, "{searched} was left in freed memory");
    }
}
