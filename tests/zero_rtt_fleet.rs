//! 0-RTT in a fleet: three replicas of one identity behind one DNS name
//! (hickory-server in process), each with box keys derived from the
//! identity (`EncryptLayer::box_keys_from_identity`), and a client
//! balanced across them. The client learns the box key from whichever
//! replica it reaches first; every other replica it dials then takes its
//! first call as early data, the client sees so on each reply, and the
//! metrics count it on both ends. A restarted client that kept the
//! announcement it learned (`on_box_key_learned`, `with_box_key`) goes
//! early from its very first call. Only loopback addresses.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use weft::{
    discover::Dns,
    handshake::PeerId,
    metrics::Metrics,
    pool::{Endpoint, Pool},
    rpc::{client::Balanced, client::Client, server::Server},
    EncryptLayer, Identity,
};

#[path = "support/dns.rs"]
mod dns;
#[path = "support/echo.rs"]
mod echo;

use dns::{ip, listeners, Zone, NAME};
use echo::{say, EchoClient, Say};

fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

/// A replica of the fleet's identity on `listener`, answering its own
/// address and whether the request came early.
fn replica(listener: tokio::net::TcpListener) {
    let name = listener.local_addr().unwrap().ip().to_string();
    let answer = Say::new(move |request| {
        let how = if request.is_early() { "early" } else { "late" };
        Ok(format!("{name} {how}"))
    });
    let acceptor =
        weft::acceptor_with(EncryptLayer::new(ident(9)).box_keys_from_identity()).observer(Metrics::new());
    tokio::spawn(
        Server::builder()
            .add_service(answer.server())
            .serve(listener, acceptor),
    );
}

/// A counter's name, labels and value.
type Counted = (String, Vec<(String, String)>, u64);

/// Announcements kept: whose, and the bytes.
type Kept = Arc<Mutex<Vec<(PeerId, Vec<u8>)>>>;

/// The sum of the counter `name` with these labels, so far.
fn counted(snapshot: &[Counted], name: &str, with: &[(&str, &str)]) -> u64 {
    snapshot
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && with
                    .iter()
                    .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(.., value)| value)
        .sum()
}

#[tokio::test]
async fn every_cold_call_after_the_first_goes_early_across_three_replicas() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder of this test binary");

    let mut fronts = listeners().await;
    fronts.truncate(3);
    let port = fronts[0].local_addr().unwrap().port();
    for front in fronts {
        replica(front);
    }
    // A replica takes early data once its replay record has seen a whole
    // window (10 s) of it (docs/SECURITY.md).
    tokio::time::sleep(std::time::Duration::from_millis(10_100)).await;
    let zone = Zone::start(&[ip(2), ip(3), ip(4)]).await;
    let fleet = ident(9).peer_id();
    let endpoints = Dns::ips(NAME, port)
        .expect_peer(fleet)
        .resolver(zone.resolver())
        .spawn()
        .unwrap();

    // The client keeps each announcement it learns, as it would on disk.
    let kept: Kept = Arc::default();
    let keep = kept.clone();
    let dialer = weft::dialer_with(EncryptLayer::new(ident(1)).on_box_key_learned(
        move |peer, announcement| {
            keep.lock().unwrap().push((*peer, announcement.to_vec()));
        },
    ))
    .observer(Metrics::new());
    let pool = Pool::builder().build(dialer);
    let mut echo = EchoClient::new(Balanced::new(pool.clone(), endpoints));

    // One call at a time, until the client has dialed all three: each
    // dial carries the call that made it.
    let mut replies = Vec::new();
    while pool.stats().dials < 3 {
        assert!(replies.len() < 500, "never dialed all three: {replies:?}");
        let reply = echo.say(say("hi")).await.unwrap();
        replies.push((reply.is_early(), reply.into_inner().text));
    }
    let stats = pool.stats();
    assert_eq!((stats.dials, stats.dial_failures), (3, 0), "{stats:?}");
    let answered: HashSet<_> = replies
        .iter()
        .map(|(_, text)| text.split(' ').next().unwrap())
        .collect();
    assert_eq!(answered.len(), 3, "every replica answered: {replies:?}");
    // The first call learned the key, late; each later dial went early,
    // to a replica that never announced anything to this client. The
    // client's view agrees with each handler's.
    let early: Vec<_> = replies.iter().filter(|(early, _)| *early).collect();
    assert!(!replies[0].0, "the first call cannot go early: {replies:?}");
    assert_eq!(
        early.len(),
        2,
        "every dial after the first went early: {replies:?}"
    );
    assert!(
        early.iter().all(|(_, text)| text.ends_with(" early")),
        "{replies:?}"
    );
    assert!(
        replies
            .iter()
            .all(|(early, text)| *early == text.ends_with(" early")),
        "{replies:?}"
    );
    let first = replies[0].1.split(' ').next().unwrap();
    assert!(
        early.iter().all(|(_, text)| !text.starts_with(first)),
        "the early calls went to the other replicas: {replies:?}"
    );
    // All three announce the same key: learned once.
    assert_eq!(kept.lock().unwrap().len(), 1);

    // A restarted client, given what the last one kept: its first call
    // goes early.
    let mut restarted = EncryptLayer::new(ident(1));
    for (peer, announcement) in kept.lock().unwrap().iter() {
        restarted = restarted.with_box_key(*peer, announcement).unwrap();
    }
    let endpoint = Endpoint::new(std::net::SocketAddr::from((ip(3), port))).expect_peer(fleet);
    let mut fresh = EchoClient::new(Client::one_shot(
        weft::dialer_with(restarted).observer(Metrics::new()),
        endpoint,
    ));
    let reply = fresh.say(say("hi")).await.unwrap();
    assert!(reply.is_early(), "the restarted client's first call went early");
    assert_eq!(reply.into_inner().text, "127.0.0.3 early");

    // Counted on both ends: the dialer sent early data three times, all
    // accepted; the acceptors were offered it three times.
    let snapshot: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((
                key.key().name().to_owned(),
                key.key()
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect(),
                n,
            )),
            _ => None,
        })
        .collect();
    let early_data = "weft.handshake.early_data";
    for role in ["dialer", "acceptor"] {
        assert_eq!(
            counted(&snapshot, early_data, &[("role", role), ("outcome", "accepted")]),
            3,
            "{role}"
        );
        assert_eq!(
            counted(&snapshot, early_data, &[("role", role), ("outcome", "refused")]),
            0,
            "{role}"
        );
    }
}
