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
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, HandshakeExt, Versions},
    mux,
    sim::Link,
    MultiplexLayer, RecordSizeLayer, StreamLimitLayer,
};

/// From the server starting to write a 1 MiB response on a stream to the
/// client's first decrypted byte of it, over 1 Mbit/s with 50 ms one way,
/// each side the whole stack.
async fn first_byte(records: RecordSizeLayer) -> Duration {
    let (client_io, server_io) = Link::new(1_000_000, Duration::from_millis(50)).pair();
    let suites = [CipherSuite::Aes256Gcm];
    let stack = move |seed| {
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .service(stack_with(ident(seed), &suites, records, Versions::CURRENT))
    };
    let (wrote_tx, wrote_rx) = oneshot::channel();
    let server = tokio::spawn(async move {
        let conn = stack(2).accept_transport(server_io).await.unwrap();
        let mut stream = conn.accept().await.unwrap().unwrap();
        let mut request = [0u8; 1];
        stream.read_exact(&mut request).await.unwrap();
        wrote_tx.send(Instant::now()).unwrap();
        stream.write_all(&vec![1; 1 << 20]).await.unwrap();
    });
    let conn = stack(1).dial(client_io).await.unwrap();
    let mut stream = conn.open().await.unwrap();
    stream.write_all(b"?").await.unwrap();
    let mut first = [0u8; 1];
    stream.read_exact(&mut first).await.unwrap();
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

/// The acceptor's connection window after 8 MiB came over 100 Mbit/s with
/// 50 ms each way (a bandwidth-delay product of 1.25 MB), its receive
/// windows declared at 64 KiB and 128 KiB and allowed to grow to `max`.
async fn window_after_bulk(max: Option<(u32, u32)>) -> u64 {
    let (client_io, server_io) = Link::new(100_000_000, Duration::from_millis(50)).pair();
    let suites = [CipherSuite::Aes256Gcm];
    let stack = move |seed| {
        let mut limit = StreamLimitLayer::new(10).receive_windows(64 * 1024, 128 * 1024);
        if let Some((stream, connection)) = max {
            limit = limit.max_receive_windows(stream, connection);
        }
        ServiceBuilder::new()
            .layer(MultiplexLayer::new(mux::Builder::new()))
            .layer(limit)
            .service(stack_with(
                ident(seed),
                &suites,
                RecordSizeLayer::dynamic(),
                Versions::CURRENT,
            ))
    };
    let client = tokio::spawn(async move {
        let conn = stack(1).dial(client_io).await.unwrap();
        let mut stream = conn.open().await.unwrap();
        stream.write_all(&vec![1; 8 << 20]).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut end = Vec::new();
        stream.read_to_end(&mut end).await.unwrap();
    });
    let conn = stack(2).accept_transport(server_io).await.unwrap();
    let mut stream = conn.accept().await.unwrap().unwrap();
    let mut received = Vec::new();
    stream.read_to_end(&mut received).await.unwrap();
    assert_eq!(received.len(), 8 << 20);
    let window = conn.stats().recv_window;
    stream.shutdown().await.unwrap();
    client.await.unwrap();
    window
}

#[tokio::test(start_paused = true)]
async fn the_stream_limit_layer_bounds_how_far_the_windows_grow() {
    let bounded = window_after_bulk(Some((128 * 1024, 256 * 1024))).await;
    let default = window_after_bulk(None).await;
    assert!(bounded <= 256 * 1024, "bounded: {bounded}");
    assert!(
        default > 256 * 1024,
        "by default the window grows past it: {default}"
    );
}
