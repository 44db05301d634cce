//! Protocol version 3's early data (docs/PROTOCOL.md, section 17): a
//! dialer that knows the acceptor's box key sends its first stream's
//! bytes with its Setup, and the answer comes in the first round trip.
//! Over in-memory pipes with a middle that watches (and, for the hostile
//! cases, edits or replays) the frames.

mod support;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use bytes::Bytes;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tower::ServiceBuilder;
use weft::{
    handshake::{EarlyData, Handshake, HandshakeExt, Versions},
    mux::Connection,
    transport::ExistingTransport,
    EncryptLayer, MultiplexLayer, NegotiateLayer,
};

type Stack = MuxStack<ExistingTransport>;

fn stack(encrypt: EncryptLayer, versions: Versions, timeout: Duration) -> Stack {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(weft::mux::Builder::new()))
        .layer(encrypt)
        .layer(NegotiateLayer::new(versions).handshake_timeout(timeout))
        .service(ExistingTransport::new())
}

/// An acceptor that takes early data, as `ident(1)`.
fn acceptor() -> Stack {
    stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::CURRENT,
        Duration::from_secs(5),
    )
}

fn dialer() -> Stack {
    stack(
        EncryptLayer::new(ident(2)),
        Versions::CURRENT,
        Duration::from_secs(5),
    )
}

const REQUEST: &[u8] = b"GET /thing";

/// A dial of `io`, pinned to the acceptor, with REQUEST as its early stream.
fn early_request(io: DuplexStream) -> Handshake<DuplexStream> {
    Handshake::dial(io)
        .expect_peer(ident(1).peer_id())
        .early_stream(Bytes::from_static(REQUEST))
}

/// Answers each stream the peer opens with "early:" or "late:" and the
/// first bytes it read, then finishes it.
fn answer(conn: Connection) -> tokio::task::JoinHandle<Vec<bool>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(Some(mut stream)) = conn.accept().await {
            seen.push(stream.is_early());
            let mut buf = vec![0; REQUEST.len()];
            if stream.read_exact(&mut buf).await.is_err() {
                break;
            }
            let tag: &[u8] = if stream.is_early() { b"early:" } else { b"late:" };
            let _ = stream.write_all(&[tag, &buf].concat()).await;
            let _ = stream.shutdown().await;
        }
        seen
    })
}

/// The frames each way, by kind, in order, and the number of frames the
/// dialer had sent when the acceptor's first Data record went out.
#[derive(Default)]
struct Watch {
    d2a: Mutex<Vec<(FrameKind, usize)>>,
    a2d: Mutex<Vec<(FrameKind, usize)>>,
    dialer_frames_before_first_answer: Mutex<Option<usize>>,
    dialer_sent: AtomicUsize,
    /// What became of early data, as the dialer's connection says (the
    /// acceptor's said the same).
    early_data: Mutex<EarlyData>,
}

/// A middle that forwards everything and records it in `watch`; with
/// `hold`, nothing of the dialer's after its Setup reaches the acceptor.
fn watched(watch: &Arc<Watch>, hold: bool) -> (DuplexStream, DuplexStream) {
    let (w1, w2) = (watch.clone(), watch.clone());
    middle(
        move |index, raw| {
            w1.d2a
                .lock()
                .unwrap()
                .push((FrameKind::from_u8(raw[0]).unwrap(), raw.len()));
            if hold && index > 0 {
                return Edit::Send(vec![]);
            }
            w1.dialer_sent.fetch_add(1, Ordering::SeqCst);
            Edit::Send(vec![raw])
        },
        move |_, raw| {
            let kind = FrameKind::from_u8(raw[0]).unwrap();
            if kind == FrameKind::Data {
                let mut first = w2.dialer_frames_before_first_answer.lock().unwrap();
                first.get_or_insert(w2.dialer_sent.load(Ordering::SeqCst));
            }
            w2.a2d.lock().unwrap().push((kind, raw.len()));
            Edit::Send(vec![raw])
        },
    )
}

/// One connection through a watched middle: the dialer opens its first
/// stream with REQUEST through `early_stream`; returns what it read back,
/// whether its stream says it went early, the watch, and whether the
/// acceptor saw each stream as early (unless `hold`: then the acceptor
/// never hears the dialer's end).
async fn call(dialer: &Stack, acceptor: &Stack, hold: bool) -> (Vec<u8>, bool, Arc<Watch>, Vec<bool>) {
    let watch = Arc::new(Watch::default());
    let (d_io, a_io) = watched(&watch, hold);
    let request = early_request(d_io);
    let (mut dialer, mut acceptor) = (dialer.clone(), acceptor.clone());
    let (d, a) = tokio::join!(dialer.handshake(request), acceptor.accept_transport(a_io));
    let (client, server) = (d.unwrap(), a.unwrap());
    assert_eq!(client.early_data(), server.early_data(), "both ends agree");
    *watch.early_data.lock().unwrap() = client.early_data();
    let answers = answer(server);
    let mut stream = client.take_early_stream().expect("the early stream");
    assert!(client.take_early_stream().is_none(), "handed out once");
    let went_early = stream.is_early();
    assert_eq!(went_early, client.early_data() == EarlyData::Accepted);
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    drop(stream);
    client.go_away();
    if hold {
        answers.abort();
        return (reply, went_early, watch, Vec::new());
    }
    let seen = answers.await.unwrap();
    (reply, went_early, watch, seen)
}

#[tokio::test]
async fn the_first_call_learns_the_box_key_and_the_second_is_answered_in_the_first_round_trip() {
    let (dialer, acceptor) = (dialer(), acceptor());

    // No box key known yet: the bytes go after the handshake.
    let (reply, early, watch, seen) = call(&dialer, &acceptor, false).await;
    assert_eq!(reply, b"late:GET /thing");
    assert!(!early);
    assert_eq!(seen, [false]);
    assert_eq!(
        *watch.early_data.lock().unwrap(),
        EarlyData::None,
        "none was sent"
    );
    assert_eq!(
        *watch.dialer_frames_before_first_answer.lock().unwrap(),
        Some(3),
        "1-RTT: the answer waited for the dialer's Setup, Auth and request"
    );

    // Now it is: the request rides in the Setup, and the acceptor answers
    // it right after its Auth: with everything of the dialer's after its
    // Setup held back, the whole answer still arrives.
    let (reply, early, watch, _) = call(&dialer, &acceptor, true).await;
    assert_eq!(reply, b"early:GET /thing");
    assert!(early);
    assert_eq!(*watch.early_data.lock().unwrap(), EarlyData::Accepted);
    assert_eq!(
        *watch.dialer_frames_before_first_answer.lock().unwrap(),
        Some(1),
        "0-RTT: answered when only the dialer's Setup had arrived"
    );
    let d2a = watch.d2a.lock().unwrap().clone();
    assert_eq!(d2a[0].0, FrameKind::Setup);
    // Frame header, key id, tag, time, id, signature and proof key, OPEN
    // header.
    let early = 4 + 8 + 16 + 8 + 32 + 64 + 32 + 10 + REQUEST.len();
    assert!(d2a[0].1 > early + 40, "the Setup carries the early data: {d2a:?}");
    assert!(
        d2a[1..].iter().all(|(kind, _)| *kind == FrameKind::Data),
        "the early data proved who the dialer is: no Auth follows, {d2a:?}"
    );
    let signed = d2a[0].1;

    // And when it is let through, the acceptor sees the stream as early.
    // It goes with the ticket the last call got: in place of the id and
    // signature (96 bytes), the ticket's length, the ticket (104) and a
    // MAC (32).
    let (reply, early, watch, seen) = call(&dialer, &acceptor, false).await;
    assert_eq!(
        (&reply[..], early, &seen[..]),
        (&b"early:GET /thing"[..], true, &[true][..])
    );
    let ticketed = watch.d2a.lock().unwrap()[0].1;
    assert_eq!(ticketed, signed + 1 + 104 + 32 - 96, "a ticket, not a signature");
}

/// A middle that records each frame the dialer sends.
fn recording(log: Arc<Mutex<Vec<Vec<u8>>>>) -> (DuplexStream, DuplexStream) {
    middle(
        move |_, raw| {
            log.lock().unwrap().push(raw.clone());
            Edit::Send(vec![raw])
        },
        forward,
    )
}

/// A dialer that has learned the acceptor's box key: one call made.
async fn learned(acceptor: &Stack) -> Stack {
    let dialer = dialer();
    let (reply, ..) = call(&dialer, acceptor, false).await;
    assert_eq!(reply, b"late:GET /thing");
    dialer
}

#[tokio::test]
async fn replayed_early_data_is_refused_and_never_reaches_the_application() {
    let acceptor = stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::CURRENT,
        Duration::from_millis(300),
    );
    let dialer = learned(&acceptor).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let (d_io, a_io) = recording(log.clone());
    let request = early_request(d_io);
    let (mut d, mut a) = (dialer.clone(), acceptor.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    let (client, server) = (client.unwrap(), server.unwrap());
    assert!(
        client.take_early_stream().unwrap().is_early(),
        "the original went early"
    );
    drop((client, server));

    // Anyone who saw the Setup sends it again, to the same acceptor: its
    // early data is refused, and with no proof to follow, the handshake
    // runs out of time; nothing reaches the application.
    let setup = log.lock().unwrap()[0].clone();
    assert_eq!(setup[0], FrameKind::Setup as u8);
    let (mut attacker, a_io) = tokio::io::duplex(1 << 16);
    attacker.write_all(&setup).await.unwrap();
    let replayed = acceptor.clone().accept_transport(a_io).await;
    assert!(
        failed_with(&replayed, weft::ErrorKind::Timeout, "handshake"),
        "{replayed:?}"
    );

    // To another acceptor of the same identity (another box key): refused
    // too, for want of the key.
    let other = stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::CURRENT,
        Duration::from_millis(300),
    );
    let (mut attacker, a_io) = tokio::io::duplex(1 << 16);
    attacker.write_all(&setup).await.unwrap();
    let replayed = other.clone().accept_transport(a_io).await;
    assert!(
        failed_with(&replayed, weft::ErrorKind::Timeout, "handshake"),
        "{replayed:?}"
    );
}

/// An acceptor as `ident(1)` whose box keys every replica of the
/// identity shares, giving up on a handshake after 300 ms.
fn replica() -> Stack {
    stack(
        EncryptLayer::new(ident(1)).box_keys_from_identity(),
        Versions::CURRENT,
        Duration::from_millis(300),
    )
}

#[tokio::test]
async fn early_data_replayed_across_replicas_that_share_box_keys_runs_at_most_once_on_each() {
    let (a, b) = (replica(), replica());
    // A replica takes early data once its replay record has seen a whole
    // window (10 s) of it.
    tokio::time::sleep(Duration::from_millis(10_100)).await;
    let dialer = learned(&a).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let (d_io, a_io) = recording(log.clone());
    let (mut d, mut acceptor) = (dialer.clone(), a.clone());
    let (client, server) = tokio::join!(d.handshake(early_request(d_io)), acceptor.accept_transport(a_io));
    let (client, server) = (client.unwrap(), server.unwrap());
    assert_eq!(
        client.early_data(),
        EarlyData::Accepted,
        "the original went early to A"
    );
    drop((client, server));
    let setup = log.lock().unwrap()[0].clone();

    // Replayed to replica B, which holds the same box key and a replay
    // record of its own: B runs it once, as early data (only what is
    // safe to repeat runs from early data), and never again.
    let replay_to = |acceptor: Stack| {
        let setup = setup.clone();
        async move {
            let (mut attacker, a_io) = tokio::io::duplex(1 << 16);
            attacker.write_all(&setup).await.unwrap();
            let accepted = acceptor.clone().accept_transport(a_io).await;
            let delivered = match &accepted {
                Ok(conn) => tokio::time::timeout(Duration::from_secs(2), conn.accept())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
                    .map(|stream| stream.is_early()),
                Err(_) => None,
            };
            (accepted.map(|conn| conn.early_data()), delivered)
        }
    };
    let (once, delivered) = replay_to(b.clone()).await;
    assert_eq!(once.unwrap(), EarlyData::Accepted);
    assert_eq!(
        delivered,
        Some(true),
        "delivered to B's application, marked early"
    );
    let (twice, delivered) = replay_to(b.clone()).await;
    assert!(
        failed_with(&twice, weft::ErrorKind::Timeout, "handshake"),
        "{twice:?}"
    );
    assert_eq!(delivered, None, "B's replay record refused it the second time");
    // And to A, which accepted the original: refused.
    let (again, _) = replay_to(a.clone()).await;
    assert!(
        failed_with(&again, weft::ErrorKind::Timeout, "handshake"),
        "{again:?}"
    );
    // And to a replica started (or restarted) since, whose replay record
    // is empty: refused, as sent before it could have seen it.
    let (restarted, delivered) = replay_to(replica()).await;
    assert!(
        failed_with(&restarted, weft::ErrorKind::Timeout, "handshake"),
        "{restarted:?}"
    );
    assert_eq!(delivered, None);
}

#[tokio::test]
async fn a_1_to_3_build_and_a_1_to_2_build_agree_on_2_with_no_early_data_in_both_orders() {
    let acceptor_v3 = acceptor();
    let dialer_v3 = learned(&acceptor_v3).await;
    let acceptor_v2 = stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::new(1, 2),
        Duration::from_secs(5),
    );
    let dialer_v2 = stack(
        EncryptLayer::new(ident(2)),
        Versions::new(1, 2),
        Duration::from_secs(5),
    );
    // The 1..3 dialer knows the key and sends early data; the 1..2 acceptor
    // skips the unknown field. And the other way round.
    for (dialer, acceptor) in [(&dialer_v3, &acceptor_v2), (&dialer_v2, &acceptor_v3)] {
        let (reply, early, _, seen) = call(dialer, acceptor, false).await;
        assert_eq!(reply, b"late:GET /thing");
        assert!(!early);
        assert_eq!(seen, [false]);
    }
    let (d_io, a_io) = tokio::io::duplex(1 << 16);
    let request = early_request(d_io);
    let (mut d, mut a) = (dialer_v3.clone(), acceptor_v2.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    assert_eq!(client.unwrap().agreement().version(), 2);
    assert_eq!(server.unwrap().agreement().version(), 2);
}

#[tokio::test]
async fn a_box_key_the_acceptor_no_longer_has_falls_back_without_an_error_and_is_replaced() {
    let first = acceptor();
    let dialer = learned(&first).await;
    // A restarted acceptor: the same identity, new box keys.
    let restarted = acceptor();
    let (reply, early, watch, seen) = call(&dialer, &restarted, false).await;
    assert_eq!(
        (&reply[..], early, &seen[..]),
        (&b"late:GET /thing"[..], false, &[false][..])
    );
    assert_eq!(
        *watch.early_data.lock().unwrap(),
        EarlyData::Refused,
        "sent, refused, sent again after the handshake"
    );
    // Its new key came with that handshake.
    let (reply, early, _, _) = call(&dialer, &restarted, false).await;
    assert_eq!((&reply[..], early), (&b"early:GET /thing"[..], true));
}

#[tokio::test]
async fn an_expired_box_key_is_not_used() {
    // A key made now is good for twice the rotation: two seconds.
    let acceptor = stack(
        EncryptLayer::new(ident(1)).box_key_rotation(Duration::from_secs(1)),
        Versions::CURRENT,
        Duration::from_secs(5),
    );
    let dialer = learned(&acceptor).await;
    let (_, early, ..) = call(&dialer, &acceptor, false).await;
    assert!(early);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // The dialer's key expired: no early data; the acceptor's rotated.
    let (reply, early, watch, _) = call(&dialer, &acceptor, false).await;
    assert_eq!((&reply[..], early), (&b"late:GET /thing"[..], false));
    assert!(watch.d2a.lock().unwrap()[0].1 < 150, "no early data in the Setup");
    let (_, early, ..) = call(&dialer, &acceptor, false).await;
    assert!(early, "the new key was learned");
}

/// Connects `dialer` and `acceptor` through a middle that edits the
/// dialer's Setup (frame 0) with `edit_d` and the acceptor's with
/// `edit_a`; returns both outcomes and every stream the acceptor's
/// application saw, until its connection ended (the dialer's connection,
/// if it had one, is closed first).
async fn edited(
    dialer: &Stack,
    acceptor: &Stack,
    edit_d: impl Fn(Vec<u8>) -> Vec<u8> + Send + 'static,
    edit_a: impl Fn(Vec<u8>) -> Vec<u8> + Send + 'static,
) -> (Result<(), weft::Error>, Result<Vec<bool>, weft::Error>) {
    let (d_io, a_io) = middle(
        move |i, raw| Edit::Send(vec![if i == 0 { edit_d(raw) } else { raw }]),
        move |i, raw| Edit::Send(vec![if i == 0 { edit_a(raw) } else { raw }]),
    );
    let request = early_request(d_io);
    let (mut d, mut a) = (dialer.clone(), acceptor.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    let client = client.map(drop);
    let seen = match server {
        Ok(server) => {
            let answers = answer(server);
            let seen = tokio::time::timeout(Duration::from_secs(10), answers)
                .await
                .expect("the acceptor's connection ends with the dialer's");
            Ok(seen.unwrap())
        }
        Err(err) => Err(err),
    };
    (client, seen)
}

/// A Setup frame with its message changed by `f`.
fn edit_setup(raw: Vec<u8>, f: impl Fn(&mut wire::Setup)) -> Vec<u8> {
    use prost::Message;
    let mut setup = wire::Setup::decode(&raw[4..]).unwrap();
    f(&mut setup);
    let payload = setup.encode_to_vec();
    [&FrameKind::Setup.header(payload.len())[..], &payload].concat()
}

#[tokio::test]
async fn a_middle_that_strips_version_3_makes_the_handshake_fail() {
    let acceptor = acceptor();
    let dialer = learned(&acceptor).await;
    // From the dialer's offer: the acceptor agrees on 2 and ignores the
    // early data; the transcripts differ.
    let (client, seen) = edited(
        &dialer,
        &acceptor,
        |raw| edit_setup(raw, |s| s.max_version = 2),
        |raw| raw,
    )
    .await;
    // The dialer cannot open the acceptor's proof: it was keyed from
    // another transcript. The acceptor delivers nothing.
    assert!(failed_to_open_the_proof(&client), "{client:?}");
    assert!(
        seen.is_err() || seen.as_ref().is_ok_and(|seen| seen.is_empty()),
        "{seen:?}"
    );
    // From the acceptor's: the dialer agrees on 2 and fails at the
    // acceptor's proof. (The acceptor agreed on 3 and may have taken the
    // early data: why only requests safe to repeat go early.)
    let (client, _) = edited(
        &dialer,
        &acceptor,
        |raw| raw,
        |raw| edit_setup(raw, |s| s.max_version = 2),
    )
    .await;
    assert!(failed_to_open_the_proof(&client), "{client:?}");
}

/// Whether a dial failed at the acceptor's proof, the first record, which
/// did not open: the two sides' transcripts (so their keys) differ.
fn failed_to_open_the_proof(client: &Result<(), weft::Error>) -> bool {
    support::failed_with(client, weft::ErrorKind::Record, "record 0 failed authentication")
}

#[tokio::test]
async fn early_data_changed_in_flight_is_never_delivered() {
    let acceptor = acceptor();
    let dialer = learned(&acceptor).await;
    let flip_last = |mut raw: Vec<u8>| {
        let last = raw.len() - 1;
        raw[last] ^= 1;
        raw
    };
    let (client, seen) = edited(&dialer, &acceptor, flip_last, |raw| raw).await;
    assert!(
        failed_to_open_the_proof(&client),
        "the transcripts differ: {client:?}"
    );
    assert!(seen.is_err(), "the acceptor took no connection: {seen:?}");
}

#[tokio::test]
async fn early_data_from_a_dialer_the_acceptor_refuses_is_never_delivered() {
    let strict = stack(
        EncryptLayer::new(ident(1))
            .accept_early_data()
            .authorize(|peer| *peer != ident(2).peer_id()),
        Versions::CURRENT,
        Duration::from_secs(5),
    );
    let dialer = dialer();
    // The dialer's handshake ends before the acceptor's refusal arrives,
    // so it learns the box key the first time and uses it the second.
    for attempt in 0..2 {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (d_io, a_io) = recording(log.clone());
        let request = Handshake::dial(d_io)
            .expect_peer(ident(1).peer_id())
            .early_stream(Bytes::from_static(REQUEST));
        let (mut d, mut a) = (dialer.clone(), strict.clone());
        let (_, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
        assert!(
            matches!(&server, Err(err) if err.kind() == weft::ErrorKind::Authentication),
            "{server:?}"
        );
        let setup_len = log.lock().unwrap()[0].len();
        assert_eq!(
            setup_len > 150,
            attempt == 1,
            "early data on the second attempt only"
        );
    }
}

#[tokio::test]
async fn early_data_needs_a_pinned_peer() {
    let acceptor = acceptor();
    let dialer = learned(&acceptor).await;
    let (d_io, a_io) = tokio::io::duplex(1 << 16);
    // Unpinned: whoever answers could be anyone, so nothing goes early.
    let request = Handshake::dial(d_io).early_stream(Bytes::from_static(REQUEST));
    let (mut d, mut a) = (dialer.clone(), acceptor.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    let (client, server) = (client.unwrap(), server.unwrap());
    let answers = answer(server);
    let mut stream = client.take_early_stream().unwrap();
    assert!(!stream.is_early());
    stream.shutdown().await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    assert_eq!(reply, b"late:GET /thing");
    answers.abort();
}

/// The Setup frame of a 0-RTT dial by `dialer` to `acceptor`, as sent.
async fn captured_setup(dialer: &Stack, acceptor: &Stack) -> Vec<u8> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (d_io, a_io) = recording(log.clone());
    let request = early_request(d_io);
    let (mut d, mut a) = (dialer.clone(), acceptor.clone());
    let (client, _server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    assert!(client.unwrap().take_early_stream().unwrap().is_early());
    let setup = log.lock().unwrap()[0].clone();
    setup
}

#[tokio::test]
async fn early_data_past_the_setup_size_is_refused_on_the_frame_header() {
    let acceptor = stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::CURRENT,
        Duration::from_secs(5),
    );
    let dialer = learned(&acceptor).await;
    let setup = captured_setup(&dialer, &acceptor).await;
    // The same Setup with 5,000 more bytes of early data: its header says
    // more than the 4 KiB a Setup may be, and nothing more is read.
    let grown = edit_setup(setup, |s| s.early_data.resize(s.early_data.len() + 5000, 0));
    let (mut attacker, a_io) = tokio::io::duplex(1 << 16);
    attacker.write_all(&grown).await.unwrap();
    let refused = acceptor.clone().accept_transport(a_io).await;
    assert!(
        failed_with(&refused, weft::ErrorKind::Record, "exceeds"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_flood_of_replayed_early_data_is_refused_every_time() {
    let acceptor = stack(
        EncryptLayer::new(ident(1)).accept_early_data(),
        Versions::CURRENT,
        Duration::from_millis(300),
    );
    let dialer = learned(&acceptor).await;
    let setup = captured_setup(&dialer, &acceptor).await;
    let replays = (0..200).map(|_| {
        let (acceptor, setup) = (acceptor.clone(), setup.clone());
        async move {
            let (mut attacker, a_io) = tokio::io::duplex(1 << 16);
            attacker.write_all(&setup).await.unwrap();
            let outcome = acceptor.clone().accept_transport(a_io).await;
            drop(attacker);
            outcome
        }
    });
    for outcome in futures_util::future::join_all(replays).await {
        assert!(
            failed_with(&outcome, weft::ErrorKind::Timeout, "handshake"),
            "a replay got through: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn an_early_stream_past_3_kib_is_no_early_stream() {
    let acceptor = acceptor();
    let dialer = learned(&acceptor).await;
    let (d_io, a_io) = tokio::io::duplex(1 << 16);
    let request = Handshake::dial(d_io)
        .expect_peer(ident(1).peer_id())
        .early_stream(Bytes::from(vec![b'x'; 3063]));
    let (mut d, mut a) = (dialer.clone(), acceptor.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    let (client, _server) = (client.unwrap(), server.unwrap());
    assert!(client.take_early_stream().is_none(), "open the stream yourself");
}

#[tokio::test]
async fn a_dialer_configured_with_the_box_key_sends_early_from_its_first_call() {
    let server = EncryptLayer::new(ident(1)).accept_early_data();
    let announcement = server.box_key_announcement().expect("it accepts early data");
    let acceptor = stack(server, Versions::CURRENT, Duration::from_secs(5));
    // Signed by someone else's key: refused.
    assert!(EncryptLayer::new(ident(2))
        .with_box_key(ident(3).peer_id(), &announcement)
        .is_err());
    let configured = EncryptLayer::new(ident(2))
        .with_box_key(ident(1).peer_id(), &announcement)
        .unwrap();
    let dialer = stack(configured, Versions::CURRENT, Duration::from_secs(5));
    let (reply, early, _, seen) = call(&dialer, &acceptor, false).await;
    assert_eq!(
        (&reply[..], early, &seen[..]),
        (&b"early:GET /thing"[..], true, &[true][..])
    );
}

/// `announcement`'s box key (another server's), announced as `signer`'s:
/// what a hostile server does to have dialers box their early data to a
/// server they never chose.
fn announced_as(signer: u8, announcement: &[u8]) -> Vec<u8> {
    use ed25519_dalek::Signer;
    let key = ed25519_dalek::SigningKey::from_bytes(&[signer; 32]);
    let mut message = b"weft v3 box key".to_vec();
    message.extend_from_slice(&announcement[..40]);
    [&announcement[..40], &key.sign(&message).to_bytes()[..]].concat()
}

#[tokio::test]
async fn early_data_relayed_by_a_hostile_server_to_another_is_refused_there_and_delivers_nothing() {
    // A, the server the dialer never chose, and M (identity 3), which the
    // dialer pins: M announces A's box key under its own signature.
    let a_layer = EncryptLayer::new(ident(1)).accept_early_data();
    let forged = announced_as(3, &a_layer.box_key_announcement().unwrap());
    let a = stack(a_layer, Versions::CURRENT, Duration::from_secs(2));
    let d_layer = EncryptLayer::new(ident(2))
        .with_box_key(ident(3).peer_id(), &forged)
        .unwrap();
    let d = stack(d_layer, Versions::CURRENT, Duration::from_secs(2));
    // The dialer's early call to M, whose bytes M relays to A as they are.
    let log = Arc::new(Mutex::new(Vec::new()));
    let (d_io, a_io) = recording(log.clone());
    let request = Handshake::dial(d_io)
        .expect_peer(ident(3).peer_id())
        .early_stream(Bytes::from_static(REQUEST));
    let (mut d, mut a) = (d.clone(), a.clone());
    let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
    assert!(log.lock().unwrap()[0].len() > 150, "the dialer sent early data");
    // A is not M: the dialer's pin fails it...
    assert!(
        failed_with(&client, weft::ErrorKind::Authentication, "mismatch"),
        "{client:?}"
    );
    // ...and A refused the early data, so nothing of it ran at A.
    match server {
        Err(_) => {}
        Ok(conn) => {
            let delivered = tokio::time::timeout(Duration::from_millis(500), conn.accept()).await;
            assert!(
                !matches!(delivered, Ok(Ok(Some(_)))),
                "A ran a request the dialer meant for M"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_early_data_on_one_worker_spends_no_lock_another_handshake_waits_on() {
    // Every box opened costs an X25519 agreement and a verification: in
    // debug builds weft asserts that no lock other handshakes share is
    // held across either (src/sync.rs), so a handshake that did would
    // panic here, on either worker.
    let a_layer = EncryptLayer::new(ident(1))
        .accept_early_data()
        .early_data_budget(1_000_000);
    let acceptor = stack(a_layer.clone(), Versions::CURRENT, Duration::from_secs(5));
    // The flood: early data boxed to A's key but meant for M, from a
    // dialer that pins M (each Setup a new ephemeral key: a new box).
    let forged = announced_as(3, &a_layer.box_key_announcement().unwrap());
    let flooder = stack(
        EncryptLayer::new(ident(4))
            .with_box_key(ident(3).peer_id(), &forged)
            .unwrap(),
        Versions::CURRENT,
        Duration::from_secs(5),
    );
    let honest = stack(
        EncryptLayer::new(ident(2))
            .with_box_key(ident(1).peer_id(), &a_layer.box_key_announcement().unwrap())
            .unwrap(),
        Versions::CURRENT,
        Duration::from_secs(5),
    );
    let dial = |dialer: Stack, pin: u8| {
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let (d_io, a_io) = tokio::io::duplex(1 << 16);
            let request = Handshake::dial(d_io)
                .expect_peer(ident(pin).peer_id())
                .early_stream(Bytes::from_static(REQUEST));
            let (mut d, mut a) = (dialer, acceptor);
            let (client, server) = tokio::join!(d.handshake(request), a.accept_transport(a_io));
            (
                client.map(|c| c.take_early_stream().is_some_and(|s| s.is_early())),
                server.is_ok(),
            )
        })
    };
    let floods: Vec<_> = (0..60).map(|_| dial(flooder.clone(), 3)).collect();
    let honests: Vec<_> = (0..10).map(|_| dial(honest.clone(), 1)).collect();
    for flood in floods {
        let (client, _) = flood.await.expect("no handshake panicked");
        assert!(client.is_err(), "A is not M");
    }
    for honest in honests {
        let (client, server) = honest.await.expect("no handshake panicked");
        assert!(
            matches!(client, Ok(true)) && server,
            "an honest 0-RTT handshake: {client:?}"
        );
    }
    let stats = a_layer.early_data_stats().unwrap();
    assert_eq!((stats.accepted, stats.refused), (10, 60), "{stats:?}");
    assert_eq!(stats.boxes_opened, 70, "each box once");
}
