//! Box keys derived from the identity: every replica of one identity
//! holds the same keys, tickets and announcements, and a replica that
//! never announced a key still opens early data to it.

use std::sync::Arc;

use super::{Acceptance, BoxKey, EarlyBudget, KeySource};
use crate::{crypto::Identity, terms::PeerId};

const NOW_S: u64 = 1_800_000_000;
const HOUR: u64 = 3_600;

fn replica(seed: u8, rotate_every: u64) -> (Identity, Acceptance) {
    (
        Identity::from_seed(&[seed; 32]),
        Acceptance::new(
            rotate_every,
            KeySource::Identity,
            EarlyBudget::default(),
            None,
            64,
        ),
    )
}

fn id(key: &BoxKey) -> &[u8] {
    &key.public[..super::KEY_ID_LEN]
}

#[test]
fn replicas_of_one_identity_derive_the_same_keys_and_announcements() {
    let (a_identity, a) = replica(1, HOUR);
    let (b_identity, b) = replica(1, HOUR);
    let from_a = a.current_key(&a_identity, NOW_S);
    let from_b = b.current_key(&b_identity, NOW_S + 17);
    assert_eq!(from_a.public, from_b.public);
    assert_eq!(from_a.announcement, from_b.announcement, "the signature too");
    assert_eq!(from_a.not_after, from_b.not_after);
    // The period is the Unix clock's, not the process's start.
    assert_eq!(from_a.not_after, (NOW_S / HOUR) * HOUR + 2 * HOUR);

    // Another identity, or another rotation, derives another key.
    let (c_identity, c) = replica(2, HOUR);
    assert_ne!(c.current_key(&c_identity, NOW_S).public, from_a.public);
    let (d_identity, d) = replica(1, 2 * HOUR);
    assert_ne!(d.current_key(&d_identity, NOW_S).public, from_a.public);
    // And a random acceptor of the same identity its own.
    let random = Acceptance::new(HOUR, KeySource::Random, EarlyBudget::default(), None, 64);
    assert_ne!(random.current_key(&a_identity, NOW_S).public, from_a.public);
}

#[test]
fn a_replica_that_never_announced_finds_the_key_another_announced() {
    let (a_identity, a) = replica(1, HOUR);
    let (b_identity, b) = replica(1, HOUR);
    let key = a.current_key(&a_identity, NOW_S);
    let found = b
        .find(&b_identity, id(&key), NOW_S)
        .expect("replica B holds A's current key before announcing any");
    assert_eq!(found.public, key.public);

    // A's clock runs a little ahead, into the next period: B, still in
    // this one, holds that key too; and the last period's, which a dialer
    // may still hold, while it is unexpired.
    let next = a.current_key(&a_identity, NOW_S + HOUR);
    assert_ne!(next.public, key.public);
    let ahead = super::keyring::AHEAD_S;
    assert!(
        b.find(&b_identity, id(&next), NOW_S + HOUR - ahead).is_some(),
        "the next period's, within a clock's lead of its start"
    );
    assert!(
        b.find(&b_identity, id(&next), NOW_S + HOUR - ahead - 1).is_none(),
        "but not a whole period early"
    );
    let (_, late) = replica(1, HOUR);
    assert!(
        late.find(&b_identity, id(&key), NOW_S + HOUR).is_some(),
        "a replica started a period later holds the last period's key"
    );
    assert!(
        late.find(&b_identity, id(&key), NOW_S - NOW_S % HOUR + 2 * HOUR)
            .is_none(),
        "until it expires"
    );
}

#[test]
fn a_replica_derives_its_keys_once_a_period_not_once_a_lookup() {
    let derived = || super::keyring::DERIVED.with(std::cell::Cell::get);
    let start = NOW_S - NOW_S % HOUR;
    let (identity, replica) = replica(1, HOUR);
    let before = derived();
    let first = replica.find(&identity, &[0; super::KEY_ID_LEN], start);
    assert!(first.is_none(), "no key has that id");
    assert_eq!(derived() - before, 3, "the last, this and the next period's");
    let current = replica.current_key(&identity, start);
    for later in 0..100 {
        replica.find(&identity, &[later; super::KEY_ID_LEN], start + u64::from(later));
        assert!(Arc::ptr_eq(
            &current,
            &replica.current_key(&identity, start + u64::from(later))
        ));
    }
    assert_eq!(derived() - before, 3, "lookups in the same period derive nothing");
    replica.current_key(&identity, start + HOUR);
    assert_eq!(derived() - before, 4, "a new period: only the one after it");
}

#[test]
fn a_ticket_from_one_replica_opens_at_another() {
    let (a_identity, a) = replica(1, HOUR);
    let (b_identity, b) = replica(1, HOUR);
    let dialer = PeerId::from_bytes([9; 32]);
    let issued = a.current_key(&a_identity, NOW_S).tickets.issue(&dialer);
    let at_b = b.current_key(&b_identity, NOW_S);
    let (who, psk) = at_b.tickets.open(&issued.ticket).expect("B opens A's ticket");
    assert_eq!(who, dialer);
    assert_eq!(psk.as_bytes(), issued.psk.as_bytes());
    // Not another identity's replica.
    let (c_identity, c) = replica(2, HOUR);
    assert!(c
        .current_key(&c_identity, NOW_S)
        .tickets
        .open(&issued.ticket)
        .is_none());
}

#[test]
fn a_replica_takes_no_early_data_sent_before_its_replay_record_could_see_it() {
    // A restarted (or new) replica derives the keys a recorded early data
    // was boxed to, with an empty replay record: within its first window,
    // it refuses early data; a random-key acceptor cannot open such early
    // data at all, and has no such wait.
    let now = std::time::Instant::now();
    let dialer = PeerId::from_bytes([9; 32]);
    let (_, replica) = replica(1, HOUR);
    // (The replica's own start: a test thread may be a few ms behind.)
    let started = replica.started_ms;
    let refused = replica.accept([1; 32], dialer, started, started, now);
    assert!(refused.is_err(), "sent as it started");
    let refused = replica.accept(
        [2; 32],
        dialer,
        started + super::EARLY_WINDOW_MS - 1,
        started,
        now,
    );
    assert!(refused.is_err(), "a dialer's clock may run 10 s ahead");
    let later = started + super::EARLY_WINDOW_MS;
    assert_eq!(replica.accept([3; 32], dialer, later, later, now), Ok(()));
    let random = Acceptance::new(HOUR, KeySource::Random, EarlyBudget::default(), None, 64);
    assert_eq!(random.accept([4; 32], dialer, started, started, now), Ok(()));
}

#[test]
fn a_dialer_hands_on_a_key_once_when_replicas_straddle_a_rotation() {
    // Replicas whose clocks straddle a rotation announce the old key and
    // the new in turn: the dialer uses whichever came last, but only a
    // key expiring later than any before is news to keep.
    let (identity, replica) = replica(1, HOUR);
    let peer = identity.peer_id();
    let old = replica.current_key(&identity, NOW_S);
    let new = replica.current_key(&identity, NOW_S + HOUR);
    let announced = |key: &BoxKey| super::Announced::verify(&key.announcement, &peer).unwrap();
    let mut cache = super::BoxKeyCache::default();
    let mut news = Vec::new();
    for key in [&old, &new, &old, &new, &old] {
        news.push(cache.learn_verified(peer, announced(key), &key.announcement));
    }
    assert_eq!(news, [true, true, false, false, false]);
    assert!(cache.holds(&peer, &old.announcement), "the last one came is used");
}

#[test]
fn a_ring_holds_each_derived_key_once_and_no_expired_one() {
    let identity = Identity::from_seed(&[1; 32]);
    let start = NOW_S - NOW_S % HOUR;
    let keys = |periods: &[u64]| -> Vec<Arc<BoxKey>> {
        periods
            .iter()
            .map(|&p| Arc::new(BoxKey::derived(&identity, HOUR, p)))
            .collect()
    };
    let period = start / HOUR;
    let mut ring = super::BoxKeyring::new(HOUR);
    ring.insert_derived(keys(&[period - 1, period, period + 1]), start);
    assert_eq!(ring.len(), 3);
    // The same again: held once.
    ring.insert_derived(keys(&[period - 1, period, period + 1]), start);
    assert_eq!(ring.len(), 3, "no key twice");
    // At the last period's key's expiry (two periods after it was made),
    // it goes, and one that expires then is not taken.
    let expiry = start + HOUR;
    ring.insert_derived(keys(&[period + 2]), expiry);
    assert_eq!(ring.len(), 3, "the last period's key went at its expiry");
    let mut fresh = super::BoxKeyring::new(HOUR);
    fresh.insert_derived(keys(&[period - 1]), expiry);
    assert_eq!(fresh.len(), 0, "a key expiring now is not taken");
}
