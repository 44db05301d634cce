//! One-way channel throughput over loopback TCP: each weft suite and
//! plaintext, against raw tokio TCP and tokio-rustls TLS 1.3 (AES-128-GCM,
//! ChaCha20-Poly1305), in the same run; then dynamic against fixed maximum
//! records on 64 MiB.
//!
//! cargo bench -p weft-bench --bench throughput
//! WEFT_BENCH_MIB=64 cargo bench -p weft-bench --bench throughput   # a quicker run

mod common;

use std::time::{Duration, Instant};

use common::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    sync::mpsc,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    RecordSizeLayer,
};

const CHUNK: usize = 64 * 1024;

fn mib() -> usize {
    std::env::var("WEFT_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Reads exactly `total` bytes, then reports.
async fn drain<S: AsyncRead + Unpin>(mut stream: S, total: usize, done: mpsc::Sender<()>) {
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0;
    while got < total {
        match stream.read(&mut buf).await.unwrap() {
            0 => panic!("stream ended after {got} of {total} bytes"),
            n => got += n,
        }
    }
    done.send(()).await.unwrap();
    // Hold the stream until the writer has closed its end.
    let _ = stream.read(&mut buf).await;
}

async fn pump<S: AsyncWrite + Unpin>(stream: &mut S, total: usize) {
    let buf = vec![0x5a; CHUNK];
    let mut sent = 0;
    while sent < total {
        let n = CHUNK.min(total - sent);
        stream.write_all(&buf[..n]).await.unwrap();
        sent += n;
    }
    stream.flush().await.unwrap();
}

fn one_way(c: &mut Criterion) {
    let rt = client_runtime();
    let server_rt = server_runtime();
    let total = mib() << 20;
    let mut group = c.benchmark_group(format!("one_way_{}MiB", mib()));
    group
        .throughput(Throughput::Bytes(total as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));

    // Raw TCP.
    {
        let (tx, mut rx) = mpsc::channel(1);
        let addr = server_rt.block_on(server(move |tcp| drain(tcp, total, tx.clone())));
        group.bench_function("tcp", |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let mut tcp = TcpStream::connect(addr).await.unwrap();
                        tcp.set_nodelay(true).unwrap();
                        pump(&mut tcp, total).await;
                        rx.recv().await.unwrap();
                    }
                    start.elapsed()
                })
            })
        });
    }

    // TLS 1.3 baselines.
    for (name, tls) in [
        ("tls_aes128gcm", Tls::aes128()),
        ("tls_chacha20poly1305", Tls::chacha()),
    ] {
        let (tx, mut rx) = mpsc::channel(1);
        let acceptor = tls.acceptor.clone();
        let addr = server_rt.block_on(server(move |tcp| {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            async move { drain(acceptor.accept(tcp).await.unwrap(), total, tx).await }
        }));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let mut stream = tls.connect(addr).await;
                        pump(&mut stream, total).await;
                        rx.recv().await.unwrap();
                    }
                    start.elapsed()
                })
            })
        });
    }

    // weft, each suite, default (dynamic) records up to 16 KiB.
    for suite in [
        CipherSuite::Aes256Gcm,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::Plaintext,
    ] {
        weft_case(
            &rt,
            &server_rt,
            &mut group,
            &format!("weft_{}", suite.name()),
            suite,
            RecordSizeLayer::dynamic(),
            total,
        );
    }
    group.finish();

    // Dynamic against fixed maximum records, 64 MiB.
    let total = 64 << 20;
    let mut group = c.benchmark_group("records_64MiB");
    group
        .throughput(Throughput::Bytes(total as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(60)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(15));
    for max in [16 * 1024, 64 * 1024] {
        for (policy, records) in [
            ("fixed", RecordSizeLayer::fixed(max)),
            ("dynamic", RecordSizeLayer::dynamic().max_record_size(max)),
        ] {
            let name = format!("{policy}_{}k", max / 1024);
            weft_case(
                &rt,
                &server_rt,
                &mut group,
                &name,
                CipherSuite::Aes256Gcm,
                records,
                total,
            );
        }
    }
    group.finish();
}

fn weft_case(
    rt: &tokio::runtime::Runtime,
    server_rt: &tokio::runtime::Runtime,
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    suite: CipherSuite,
    records: RecordSizeLayer,
    total: usize,
) {
    let (tx, mut rx) = mpsc::channel(1);
    let acceptor = weft_acceptor(suite, records);
    let addr = server_rt.block_on(server(move |tcp| {
        let (mut acceptor, tx) = (acceptor.clone(), tx.clone());
        async move { drain(acceptor.accept_transport(tcp).await.unwrap(), total, tx).await }
    }));
    let dialer = weft_dialer(suite, records);
    group.bench_function(BenchmarkId::from_parameter(name), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let mut channel = dialer.clone().dial(addr).await.unwrap();
                    pump(&mut channel, total).await;
                    rx.recv().await.unwrap();
                }
                start.elapsed()
            })
        })
    });
}

criterion_group!(benches, one_way);
criterion_main!(benches);
