//! The server's places, without sockets: caps that make room for
//! newcomers instead of locking them out.

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use super::{network, subnet, Occupant, Places, HANDSHAKE_GIVES_WAY_AFTER};
use crate::{handshake::PeerId, server::settings::ConnectionLimits, Refusal};

/// A test's occupant: its name, and whether it is a handshake or an idle
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fake {
    name: u32,
    handshake: bool,
    idle: bool,
}

impl Occupant for Fake {
    fn is_idle(&self) -> bool {
        self.idle
    }

    fn is_handshake(&self) -> bool {
        self.handshake
    }
}

fn idle(name: u32) -> Fake {
    Fake {
        name,
        handshake: false,
        idle: true,
    }
}

fn busy(name: u32) -> Fake {
    Fake {
        idle: false,
        ..idle(name)
    }
}

fn handshake(name: u32) -> Fake {
    Fake {
        handshake: true,
        ..busy(name)
    }
}

fn places(max: usize, per_address: usize) -> Places<Fake> {
    Places::new(ConnectionLimits { max, per_address })
}

/// 10.0.`net`.`host`.
fn ip(net: u8, host: u8) -> Option<IpAddr> {
    Some(IpAddr::from([10, 0, net, host]))
}

#[test]
fn sources_group_into_subnets_and_networks() {
    let addr = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(network(addr("10.0.3.77")), addr("10.0.3.0"));
    assert_eq!(subnet(addr("10.0.3.77")), addr("10.0.3.0"));
    assert_eq!(network(addr("2001:db8:1:2ff:3::9")), addr("2001:db8:1::"));
    assert_eq!(subnet(addr("2001:db8:1:2ff:3::9")), addr("2001:db8:1:200::"));
}

/// In the IPv6 network 2001:db8:1::/48, the /64 `n` of the /56 `sub`.
fn v6(sub: u8, n: u8) -> Option<IpAddr> {
    Some(IpAddr::from([
        0x20, 0x01, 0x0d, 0xb8, 0, 1, sub, n, 0, 0, 0, 0, 0, 0, 0, 1,
    ]))
}

#[test]
fn within_a_network_the_heaviest_source_gives_way_before_its_neighbours() {
    // 10.0.1.1 came first with one idle connection; 10.0.1.2 holds three.
    let now = Instant::now();
    let mut places = places(6, 256);
    places.take(ip(1, 1), now, idle(1)).unwrap();
    for n in 2..5 {
        places.take(ip(1, 2), now, idle(n)).unwrap();
    }
    places.take(ip(2, 1), now, idle(5)).unwrap();
    places.take(ip(3, 1), now, idle(6)).unwrap();
    // A newcomer from a third network: the heavy neighbour's oldest goes,
    // not the network's oldest.
    let taken = places.take(ip(4, 1), now, idle(9)).unwrap();
    assert_eq!(taken.evicted, Some(idle(2)));
}

#[test]
fn within_an_ipv6_network_the_heaviest_subnet_gives_way_before_the_heaviest_source() {
    // The /56 0 holds two connections from one /64 (the heaviest source),
    // older; the /56 1 holds three, one per /64 (the heaviest subnet).
    let now = Instant::now();
    let mut places = places(7, 256);
    places.take(v6(0, 0), now, idle(1)).unwrap();
    places.take(v6(0, 0), now, idle(2)).unwrap();
    for n in 0..3 {
        places.take(v6(1, n), now, idle(10 + u32::from(n))).unwrap();
    }
    places.take(ip(2, 1), now, idle(5)).unwrap();
    places.take(ip(3, 1), now, idle(6)).unwrap();
    let taken = places.take(ip(4, 1), now, idle(9)).unwrap();
    let evicted = taken.evicted.expect("one gave way");
    assert!(evicted.name >= 10, "from the heaviest /56: {evicted:?}");
    // Once the subnets are even, the heavier /64 goes.
    let taken = places.take(ip(5, 1), now, idle(8)).unwrap();
    assert_eq!(taken.evicted, Some(idle(1)));
}

#[test]
fn a_full_server_closes_the_heaviest_networks_oldest_idle_connection_for_a_new_network() {
    let now = Instant::now();
    // 40 networks hold every place with kept-alive idle connections.
    let mut places = places(80, 256);
    for net in 0..40 {
        for host in 0..2 {
            places
                .take(ip(net, host), now, idle(u32::from(net) * 10 + u32::from(host)))
                .unwrap();
        }
    }
    // A 41st network is served: the oldest idle connection of a network
    // holding the most gives way.
    let taken = places.take(ip(200, 1), now, idle(9999)).unwrap();
    let first = taken.evicted.expect("one gave way");
    assert_eq!(first.name % 10, 0, "its network's oldest: {first:?}");
    assert_eq!(places.len(), 80);
    // A 42nd too, from another network that still holds two.
    let taken = places.take(ip(201, 1), now, idle(9998)).unwrap();
    let second = taken.evicted.expect("one gave way");
    assert_eq!(second.name % 10, 0, "{second:?}");
    assert_ne!(second.name / 10, first.name / 10);
    // But the places even out: a network that holds one does not take a
    // second from networks that hold two, only one's equal.
    assert!(matches!(
        places.take(ip(200, 2), now, idle(9997)),
        Err(Refusal::Connections { open: 80 })
    ));
}

#[test]
fn busy_connections_are_never_closed_to_make_room() {
    let now = Instant::now();
    let mut places = places(4, 256);
    for host in 0..4 {
        places.take(ip(1, host), now, busy(u32::from(host))).unwrap();
    }
    let refused = places.take(ip(2, 1), now, idle(9)).unwrap_err();
    assert!(matches!(refused, Refusal::Connections { open: 4 }), "{refused}");
    // One of them going idle makes room.
    let mut places = places_with(&[busy(0), idle(1), busy(2), busy(3)], now);
    assert_eq!(
        places.take(ip(2, 1), now, idle(9)).unwrap().evicted,
        Some(idle(1))
    );
}

/// Four places on network 1, held by `occupants`.
fn places_with(occupants: &[Fake], now: Instant) -> Places<Fake> {
    let mut places = places(occupants.len(), 256);
    for (host, occupant) in occupants.iter().enumerate() {
        places.take(ip(1, host as u8), now, *occupant).unwrap();
    }
    places
}

#[test]
fn bare_connects_from_many_networks_give_way_once_pending_past_half_a_second() {
    // Handshakes that never progress, one per network: no network holds
    // more than the newcomer's would, so only their age makes room.
    let start = Instant::now();
    let mut places = places(100, 256);
    for net in 0..100 {
        places.take(ip(net, 1), start, handshake(u32::from(net))).unwrap();
    }
    let early = start + HANDSHAKE_GIVES_WAY_AFTER - Duration::from_millis(1);
    assert!(matches!(
        places.take(ip(200, 1), early, idle(9)),
        Err(Refusal::Connections { open: 100 })
    ));
    let later = start + HANDSHAKE_GIVES_WAY_AFTER;
    let taken = places.take(ip(200, 1), later, handshake(9)).unwrap();
    assert_eq!(taken.evicted, Some(handshake(0)), "the oldest pending handshake");
    // The newcomer's own handshake is young: the next gives way from the
    // others.
    let taken = places.take(ip(201, 1), later, handshake(8)).unwrap();
    assert_eq!(taken.evicted, Some(handshake(1)));
}

#[test]
fn a_source_at_its_own_cap_makes_room_only_from_its_own() {
    let now = Instant::now();
    let mut places = places(100, 2);
    places.take(ip(1, 1), now, busy(1)).unwrap();
    places.take(ip(1, 1), now, idle(2)).unwrap();
    places.take(ip(1, 2), now, idle(3)).unwrap();
    // Its idle one goes for it, not its neighbour's.
    let taken = places.take(ip(1, 1), now, busy(4)).unwrap();
    assert_eq!(taken.evicted, Some(idle(2)));
    // Now both of its own are busy: refused.
    let refused = places.take(ip(1, 1), now, idle(5)).unwrap_err();
    assert!(
        matches!(refused, Refusal::AddressConnections { open: 2, .. }),
        "{refused}"
    );
    assert_eq!(places.len(), 3);
}

#[test]
fn released_places_leave_no_count_behind() {
    let now = Instant::now();
    let mut places = places(3, 256);
    let ids: Vec<u64> = (0..3)
        .map(|host| places.take(ip(1, host), now, idle(u32::from(host))).unwrap().id)
        .collect();
    for id in ids {
        places.release(id);
        places.release(id);
    }
    assert_eq!(places.len(), 0);
    assert!(
        places.by_source.is_empty()
            && places.by_subnet.is_empty()
            && places.by_network.is_empty()
            && places.by_peer.is_empty()
    );
    // A place taken by a handshake is held by its connection after, and
    // its peer's count goes with it.
    let id = places.take(ip(1, 1), now, handshake(1)).unwrap().id;
    places.occupy(id, busy(1), Some(PeerId::from_bytes([1; 32])));
    places.release(id);
    assert!(places.by_peer.is_empty());
    let id = places.take(ip(1, 1), now, handshake(1)).unwrap().id;
    places.occupy(id, busy(1), None);
    places.take(ip(2, 1), now, idle(2)).unwrap();
    places.take(ip(3, 1), now, idle(3)).unwrap();
    let refused = places.take(ip(4, 1), now + Duration::from_secs(5), idle(4));
    assert!(refused.is_err(), "a busy connection does not give way by age");
}

#[test]
fn one_verified_peer_spread_over_many_networks_gives_way_as_the_heaviest() {
    // A client identity holds most places, a connection from each of 60
    // networks: no network is heavy, the peer is. A newcomer from a
    // network of its own closes that peer's oldest idle connection.
    let now = Instant::now();
    let heavy = PeerId::from_bytes([7; 32]);
    let mut places = places(80, 256);
    for net in 0..60 {
        let taken = places.take(ip(net, 1), now, handshake(u32::from(net))).unwrap();
        places.occupy(taken.id, idle(u32::from(net)), Some(heavy));
    }
    // 20 other peers, one connection each, busy.
    for n in 0..20u8 {
        let taken = places.take(ip(100 + n, 1), now, handshake(1000)).unwrap();
        places.occupy(
            taken.id,
            busy(1000 + u32::from(n)),
            Some(PeerId::from_bytes([n; 32])),
        );
    }
    let taken = places.take(ip(200, 1), now, handshake(9)).expect("served");
    assert_eq!(taken.evicted, Some(idle(0)), "the heavy peer's oldest");
    assert_eq!(places.len(), 80);
    // A peer that holds no more than the newcomer's network does not
    // give way: with the heavy peer gone to one place, none may.
    let mut even = self::places(2, 256);
    for (net, id) in [(1, 1), (2, 2)] {
        let taken = even.take(ip(net, 1), now, handshake(0)).unwrap();
        even.occupy(taken.id, idle(id), Some(PeerId::from_bytes([id as u8; 32])));
    }
    assert!(matches!(
        even.take(ip(3, 1), now, handshake(3)),
        Err(Refusal::Connections { .. })
    ));
}
