//! Dynamic records over a slow link, in virtual time: the Go seed's latency
//! result, exactly.

mod support;

use std::time::Duration;

use support::{ident, stack_with};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::oneshot,
    time::Instant,
};
use weft::{handshake::Versions, sim::Link, CipherSuite, HandshakeExt, RecordSizeLayer};

/// From the server starting to write a 1 MiB response to the client's
/// first decrypted byte, over 1 Mbit/s with 50 ms one way.
async fn first_byte(records: RecordSizeLayer) -> Duration {
    let (client_io, server_io) = Link::new(1_000_000, Duration::from_millis(50)).pair();
    let suites = [CipherSuite::Aes256Gcm];
    let (wrote_tx, wrote_rx) = oneshot::channel();
    let server = tokio::spawn(async move {
        let mut channel = stack_with(ident(2), &suites, records, Versions::CURRENT)
            .accept(server_io)
            .await
            .unwrap();
        let mut request = [0u8; 1];
        channel.read_exact(&mut request).await.unwrap();
        wrote_tx.send(Instant::now()).unwrap();
        channel.write_all(&vec![1; 1 << 20]).await.unwrap();
    });
    let mut channel = stack_with(ident(1), &suites, records, Versions::CURRENT)
        .dial(client_io)
        .await
        .unwrap();
    channel.write_all(b"?").await.unwrap();
    channel.flush().await.unwrap();
    let mut first = [0u8; 1];
    channel.read_exact(&mut first).await.unwrap();
    let took = wrote_rx.await.unwrap().elapsed();
    server.abort();
    took
}

#[tokio::test(start_paused = true)]
async fn dynamic_records_deliver_the_first_byte_three_times_sooner() {
    let ms = Duration::from_millis;
    // 50 ms of delay, plus a 16,404-byte record at 125 bytes per ms.
    let fixed = first_byte(RecordSizeLayer::fixed(16 * 1024)).await;
    assert!((ms(181)..=ms(183)).contains(&fixed), "fixed: {fixed:?}");
    // 50 ms plus one 1,400-byte record (a TCP segment's worth).
    let dynamic = first_byte(RecordSizeLayer::dynamic()).await;
    assert!((ms(61)..=ms(63)).contains(&dynamic), "dynamic: {dynamic:?}");
    assert!(fixed.as_secs_f64() / dynamic.as_secs_f64() > 2.8);
}
