//! The admission table's limits, lockouts and fairness, with time as
//! instants (no clock, no sockets).

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use super::{
    core::{source, Admissions},
    AdmissionLayer,
};
use crate::Refusal;

fn ip(last: u8) -> Option<IpAddr> {
    Some(IpAddr::from([127, 0, 0, last]))
}

fn limits() -> AdmissionLayer {
    AdmissionLayer::new()
        .max_pending(4)
        .max_pending_per_address(2)
        .handshakes_per_second_per_address(10)
        .handshakes_per_second(1000)
        .evict_after(Duration::from_millis(500))
}

#[test]
fn one_address_holds_at_most_its_share_and_others_still_get_in() {
    let now = Instant::now();
    let mut table = Admissions::new(limits(), now);
    let a = table.admit(ip(2), now, ()).unwrap();
    table.admit(ip(2), now, ()).unwrap();
    assert_eq!(
        table.admit(ip(2), now, ()).unwrap_err(),
        Refusal::AddressBusy {
            address: ip(2).unwrap(),
            pending: 2
        }
    );
    table.admit(ip(3), now, ()).unwrap();
    // One from .2 finishes: .2 may start another.
    table.done(a.id);
    table.admit(ip(2), now, ()).unwrap();
    assert_eq!(table.pending(), 3);
}

#[test]
fn an_address_gets_its_rate_of_handshakes_per_second_and_no_more() {
    let start = Instant::now();
    let mut table = Admissions::new(limits(), start);
    for _ in 0..10 {
        let admitted = table.admit(ip(2), start, ()).unwrap();
        table.done(admitted.id);
    }
    assert!(matches!(
        table.admit(ip(2), start, ()),
        Err(Refusal::AddressRate { per_second: 10, .. })
    ));
    assert!(
        table.admit(ip(3), start, ()).is_ok(),
        "another address is not charged"
    );
    let later = start + Duration::from_millis(100);
    let admitted = table.admit(ip(2), later, ()).unwrap();
    table.done(admitted.id);
    assert!(
        table.admit(ip(2), later, ()).is_err(),
        "a tenth of a second earns one"
    );
}

#[test]
fn a_full_table_evicts_its_oldest_for_a_source_within_its_share_or_once_it_is_old_enough() {
    let start = Instant::now();
    let at = |ms| start + Duration::from_millis(ms);
    let mut table = Admissions::new(limits(), start);
    let first = table.admit(ip(1), start, "first").unwrap();
    for n in 2..=4 {
        table.admit(ip(n), at(10), "later").unwrap();
    }
    // Full; a source that has had no handshake lately is within its share
    // of the acceptor's rate: the oldest makes room.
    let admitted = table.admit(ip(9), at(100), "new").unwrap();
    assert_eq!(admitted.evicted, Some("first"));
    assert_eq!(table.pending(), 4);
    // Its end, reported later, changes nothing.
    table.done(first.id);
    assert_eq!(table.pending(), 4);
    // The same source a millisecond later is past its share (five sources
    // asking, at 1,000 a second: one each 5 ms), and nobody is old enough.
    assert_eq!(
        table.admit(ip(9), at(101), "again").unwrap_err(),
        Refusal::Busy { pending: 4 }
    );
    // Handshakes without an address are never within a share: they wait
    // for the oldest to have waited 500 ms.
    assert_eq!(
        table.admit(None, at(300), "anonymous").unwrap_err(),
        Refusal::Busy { pending: 4 }
    );
    let admitted = table.admit(None, at(510), "anonymous").unwrap();
    assert_eq!(admitted.evicted, Some("later"));
}

#[test]
fn a_source_with_fewer_pending_evicts_from_the_one_with_the_most() {
    // The lockout: 16 sources with 16 pending each fill 256 places,
    // churning so fast that none is ever 500 ms old.
    let start = Instant::now();
    let limits = AdmissionLayer::new()
        .max_pending(256)
        .max_pending_per_address(16)
        .handshakes_per_second(1000);
    let mut table = Admissions::new(limits, start);
    for n in 0..256u32 {
        let source = Some(IpAddr::from([10, 0, 0, (n % 16) as u8]));
        table.admit(source, start, n % 16).unwrap();
    }
    // An honest source with nothing pending gets in: the oldest of a
    // source with the most pending gives way.
    let honest = ip(7);
    let admitted = table.admit(honest, start, 99).unwrap();
    assert_eq!(admitted.evicted, Some(0), "the oldest of a source with 16");
    // So does its second, a millisecond later, past its share of the
    // acceptor's rate (17 sources asking at 1,000 a second: one each
    // 17 ms), with 1 against 16.
    let later = start + Duration::from_millis(1);
    let admitted = table.admit(honest, later, 99).unwrap();
    assert_eq!(admitted.evicted, Some(1));
    // Sources a handshake apart do not evict each other: source 0, with 15
    // against 16 and past its share, waits like anyone else.
    assert_eq!(
        table
            .admit(Some(IpAddr::from([10, 0, 0, 0])), later, 0)
            .unwrap_err(),
        Refusal::Busy { pending: 256 }
    );
}

#[test]
fn handshakes_without_an_address_count_only_against_the_table() {
    let now = Instant::now();
    let mut table = Admissions::new(limits(), now);
    for _ in 0..4 {
        table.admit(None, now, ()).unwrap();
    }
    assert_eq!(
        table.admit(None, now, ()).unwrap_err(),
        Refusal::Busy { pending: 4 }
    );
}

#[test]
fn ipv6_counts_by_its_64_prefix_and_mapped_ipv4_as_ipv4() {
    let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
    let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
    assert_eq!(source(a), source(b));
    let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
    assert_eq!(source(mapped), IpAddr::from([192, 0, 2, 7]));
}

#[test]
fn idle_addresses_are_let_go() {
    let start = Instant::now();
    let limits = AdmissionLayer::new().handshakes_per_second(1_000_000);
    let mut table = Admissions::new(limits, start);
    for n in 0..5000u32 {
        let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
        let admitted = table.admit(addr, start, ()).unwrap();
        table.done(admitted.id);
    }
    assert!(table.sources().tracked() <= 5000);
    // A second later every bucket is full again: the next new address
    // past the threshold lets them all go.
    let later = start + Duration::from_secs(2);
    for n in 5000..10_000u32 {
        let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
        let admitted = table.admit(addr, later, ()).unwrap();
        table.done(admitted.id);
    }
    assert!(table.sources().tracked() < 8000, "{}", table.sources().tracked());
}

#[test]
fn churning_more_addresses_than_can_be_tracked_never_locks_new_ones_out() {
    // Both ways the table used to fill up for good: more pending
    // handshakes allowed than a quarter of the addresses tracked, and a
    // per-address rate so low that no address is ever idle for long.
    for limits in [
        AdmissionLayer::new().max_pending(20_000),
        AdmissionLayer::new().handshakes_per_second_per_address(1),
    ] {
        let limits = limits.handshakes_per_second(1_000_000);
        let start = Instant::now();
        let mut table = Admissions::new(limits, start);
        for n in 0..150_000u32 {
            let now = start + Duration::from_micros(u64::from(n));
            let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
            let admitted = table.admit(addr, now, ()).unwrap_or_else(|refusal| {
                panic!("address {n} of a churn: {refusal}");
            });
            table.done(admitted.id);
            assert!(table.sources().tracked() <= 65_536);
        }
    }
}

/// One honest address asking ten handshakes a second while an attacker
/// with `addresses` addresses asks 100,000 a second (spread over them, at
/// most 100 a second each), for five seconds at 2,000 a second in all:
/// the handshakes each got.
fn flood(addresses: u32) -> (u32, u32) {
    let limits = AdmissionLayer::new()
        .max_pending(100_000)
        .handshakes_per_second(2_000);
    let start = Instant::now();
    let mut table = Admissions::new(limits, start);
    let (mut honest_in, mut attacker_in) = (0, 0);
    for ms in 0..5_000u64 {
        let now = start + Duration::from_millis(ms);
        for k in 0..100 {
            let n = ((ms * 100 + k) % u64::from(addresses)) as u32;
            let addr = Some(IpAddr::from((0x0b00_0000 + n).to_be_bytes()));
            if let Ok(admitted) = table.admit(addr, now, ()) {
                attacker_in += 1;
                table.done(admitted.id);
            }
        }
        if ms % 100 == 0 {
            if let Ok(admitted) = table.admit(ip(1), now, ()) {
                honest_in += 1;
                table.done(admitted.id);
            }
        }
    }
    (honest_in, attacker_in)
}

#[test]
fn the_acceptors_rate_is_shared_by_the_sources_asking() {
    // The honest address asks for 50 handshakes; it is entitled to
    // 10,000 / (addresses + 1) of the 10,000 the acceptor starts in five
    // seconds (about 2,000 a second; a burst of 2,000 on top), and gets at
    // least 80% of that, or of what it asks for if that is less.
    for addresses in [1, 10, 100, 1_000, 10_000] {
        let (honest, attacker) = flood(addresses);
        let total = honest + attacker;
        assert!(total <= 12_000, "{total} handshakes in 5 s at 2,000 a second");
        let entitled = (10_000.0 / f64::from(addresses + 1)).min(50.0);
        assert!(
            f64::from(honest) >= 0.8 * entitled,
            "{addresses} attacking addresses: the honest one got {honest} of {total}, \
             entitled to {entitled:.0}"
        );
        println!("{addresses} attacking addresses: honest {honest}/50, attacker {attacker}");
    }
}

#[test]
fn a_source_with_handshakes_pending_keeps_its_count_through_every_pruning() {
    // Five seconds of other addresses, each done at once: the idle ones
    // are pruned again and again while .2's rate refills; and 150,000
    // addresses that spend their rate of one a second, which fill the
    // table until every source with nothing pending goes.
    for (limits, churn, step) in [
        (AdmissionLayer::new(), 5_000u32, Duration::from_millis(1)),
        (
            AdmissionLayer::new().handshakes_per_second_per_address(1),
            150_000,
            Duration::from_micros(1),
        ),
    ] {
        let limits = limits
            .max_pending(100)
            .max_pending_per_address(2)
            .handshakes_per_second(1_000_000);
        let first = Instant::now();
        let mut table = Admissions::new(limits, first);
        table.admit(ip(2), first, ()).unwrap();
        let start = first + Duration::from_secs(1);
        table.admit(ip(2), start, ()).unwrap();
        for n in 0..churn {
            let now = start + step * n;
            let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
            let admitted = table.admit(addr, now, ()).unwrap();
            table.done(admitted.id);
            assert!(table.sources().tracked() <= 65_536);
        }
        let later = start + step * churn + Duration::from_secs(5);
        assert_eq!(
            table.admit(ip(2), later, ()).unwrap_err(),
            Refusal::AddressBusy {
                address: ip(2).unwrap(),
                pending: 2
            }
        );
    }
}

#[test]
fn a_source_that_spent_its_rate_is_remembered_through_a_pruning() {
    let limits = AdmissionLayer::new()
        .max_pending(100)
        .handshakes_per_second_per_address(10)
        .handshakes_per_second(1_000_000);
    let start = Instant::now();
    let mut table = Admissions::new(limits, start);
    for _ in 0..10 {
        let admitted = table.admit(ip(2), start, ()).unwrap();
        table.done(admitted.id);
    }
    // Within the same second, enough other addresses to prune the table
    // (each has spent a token, so none is idle; the table is far from
    // crowded).
    for n in 0..2_000u32 {
        let now = start + Duration::from_micros(u64::from(n));
        let addr = Some(IpAddr::from((0x0a00_0000 + n).to_be_bytes()));
        let admitted = table.admit(addr, now, ()).unwrap();
        table.done(admitted.id);
    }
    assert!(matches!(
        table.admit(ip(2), start + Duration::from_millis(10), ()),
        Err(Refusal::AddressRate { per_second: 10, .. })
    ));
}
