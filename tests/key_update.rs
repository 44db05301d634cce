//! Key update, protocol version 2 (docs/PROTOCOL.md, section 8.1): a build
//! speaking versions 1 to 2 and one speaking only 1 agree on 1, in both
//! orders, and never update; two 1-to-2 builds agree on 2 and update their
//! keys, here every 1,000 records, with every byte arriving intact.

mod support;

use std::time::Duration;

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, HandshakeExt, Versions},
    mux::Builder,
    transport::ExistingTransport,
    Channel, EncryptLayer, ErrorKind, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// A build speaking `versions`, updating its key every 1,000 records when
/// version 2 is agreed.
fn build(n: u8, suite: CipherSuite, versions: Versions) -> Stack {
    ServiceBuilder::new()
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(ident(n)).suites([suite]).key_update_every(1000))
        .layer(NegotiateLayer::new(versions))
        .service(ExistingTransport::new())
}

async fn channels(
    suite: CipherSuite,
    dialer: Versions,
    acceptor: Versions,
) -> (Channel<DuplexStream>, Channel<DuplexStream>) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (d, acc) = connect(build(1, suite, dialer), build(2, suite, acceptor), a, b).await;
    (d.unwrap(), acc.unwrap())
}

/// Sends `records` records of 100 bytes (a flush each) both ways at once,
/// and checks every byte on arrival.
async fn exchange(
    a: Channel<DuplexStream>,
    b: Channel<DuplexStream>,
    records: usize,
) -> (Channel<DuplexStream>, Channel<DuplexStream>) {
    let message = |n: usize| -> Vec<u8> { (0..100).map(|i| (n * 7 + i) as u8).collect() };
    let (a_read, a_write) = tokio::io::split(a);
    let (b_read, b_write) = tokio::io::split(b);
    let send = |mut w: tokio::io::WriteHalf<Channel<DuplexStream>>| async move {
        for n in 0..records {
            w.write_all(&message(n)).await.unwrap();
            w.flush().await.unwrap();
        }
        w
    };
    let recv = |mut r: tokio::io::ReadHalf<Channel<DuplexStream>>| async move {
        let mut buf = [0u8; 100];
        for n in 0..records {
            r.read_exact(&mut buf).await.unwrap();
            assert_eq!(buf.to_vec(), message(n), "record {n}");
        }
        r
    };
    let (a_write, b_write, a_read, b_read) =
        tokio::join!(send(a_write), send(b_write), recv(a_read), recv(b_read));
    (a_read.unsplit(a_write), b_read.unsplit(b_write))
}

#[tokio::test]
async fn a_current_build_and_a_1_only_build_agree_on_1_in_both_orders_and_never_update() {
    let both = Versions::CURRENT;
    let old = Versions::new(1, 1);
    assert_eq!(both.max(), 3);
    for (dialer, acceptor) in [(both, old), (old, both)] {
        let (d, a) = channels(CipherSuite::Aes256Gcm, dialer, acceptor).await;
        assert_eq!((d.agreement().version(), a.agreement().version()), (1, 1));
        let (d, a) = exchange(d, a, 3000).await;
        for ch in [&d, &a] {
            let stats = ch.stats();
            assert_eq!(
                (stats.key_updates_sent, stats.key_updates_received),
                (0, 0),
                "{stats:?}"
            );
        }
    }
}

#[tokio::test]
async fn two_current_builds_agree_on_3_and_update_every_1000_records_each_way() {
    for suite in [
        CipherSuite::Aes256Gcm,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::XChaCha20Poly1305,
    ] {
        let (d, a) = channels(suite, Versions::CURRENT, Versions::CURRENT).await;
        assert_eq!((d.agreement().version(), a.agreement().version()), (3, 3));
        let (d, a) = exchange(d, a, 5_000).await;
        let (ds, as_) = (d.stats(), a.stats());
        // 5,001 records each way (the Auth record, then the data), one
        // update per 1,000 under a key.
        assert!(ds.key_updates_sent >= 4, "{suite}: {ds:?}");
        assert_eq!(ds.key_updates_sent, as_.key_updates_received, "{suite}");
        assert_eq!(as_.key_updates_sent, ds.key_updates_received, "{suite}");
        assert!(as_.key_updates_sent >= 4, "{suite}: {as_:?}");
    }
}

#[tokio::test]
async fn plaintext_never_updates() {
    let (d, a) = channels(CipherSuite::Plaintext, Versions::CURRENT, Versions::CURRENT).await;
    assert_eq!(d.agreement().version(), 3);
    let (d, _a) = exchange(d, a, 2000).await;
    assert_eq!(d.stats().key_updates_sent, 0);
}

/// Through the whole stack: a connection's streams go on across the
/// updates of both directions (the multiplexer's driver reads and writes
/// the channel's halves).
#[tokio::test]
async fn a_connection_carries_on_across_key_updates() {
    let conn_build = |n| {
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(Builder::new()))
            .layer(StreamLimitLayer::new(100))
            .service(build(n, CipherSuite::Aes256Gcm, Versions::CURRENT))
    };
    let (a, b) = tokio::io::duplex(1 << 16);
    let (mut dialer, mut acceptor) = (conn_build(1), conn_build(2));
    let (client, server) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    let (client, server) = (client.unwrap(), server.unwrap());
    assert_eq!(client.version(), 3);
    let echo = echo_server(server);
    // Each echo is a few records each way: 3,000 of them cross several
    // updates of each key.
    for n in 0..3000u32 {
        let message = n.to_be_bytes();
        let back = tokio::time::timeout(Duration::from_secs(5), echo_once(&client, &message))
            .await
            .expect("no echo hangs across an update");
        assert_eq!(back, message);
    }
    let stats = client.stats();
    assert!(stats.key_updates_sent >= 2, "{stats:?}");
    assert!(stats.key_updates_received >= 2, "{stats:?}");
    echo.abort();
}

/// A middle that rewrites either side's Setup to offer only version 1 (so
/// that no key update would ever happen) makes the handshake fail: both
/// Setups are in the transcript both proofs sign.
#[tokio::test]
async fn a_middle_that_downgrades_a_setup_to_version_1_fails_the_handshake() {
    use prost::Message;

    let to_version_1 = |index: usize, raw: Vec<u8>| {
        if index != 0 || raw[0] != FrameKind::Setup as u8 {
            return Edit::Send(vec![raw]);
        }
        let mut setup = wire::Setup::decode(&raw[4..]).unwrap();
        assert_eq!((setup.min_version, setup.max_version), (1, 3));
        setup.max_version = 1;
        Edit::Send(vec![raw_frame(FrameKind::Setup, &setup.encode_to_vec())])
    };
    for dialers_setup in [true, false] {
        let (a, b) = if dialers_setup {
            middle(to_version_1, forward)
        } else {
            middle(forward, to_version_1)
        };
        let suite = CipherSuite::Aes256Gcm;
        let (d, acc) = connect(
            build(1, suite, Versions::CURRENT),
            build(2, suite, Versions::CURRENT),
            a,
            b,
        )
        .await;
        assert!(
            d.is_err() && acc.is_err(),
            "the downgrade of the {} Setup was not noticed",
            if dialers_setup { "dialer's" } else { "acceptor's" }
        );
        let errors = [d.unwrap_err(), acc.unwrap_err()];
        // The transcript salts the keys: neither side's Auth record opens.
        assert!(
            errors.iter().all(
                |e| is_error(e, ErrorKind::Record, " failed authentication (modified")
                    || is_error(e, ErrorKind::Authentication, "peer's identity proof for")
            ),
            "{errors:?}"
        );
    }
}
