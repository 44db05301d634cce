//! Dial time: TCP connect + handshake until the first application byte can
//! be read, for weft (default suite order, so AES-256-GCM here) against a
//! tokio-rustls TLS 1.3 full handshake (self-signed ECDSA P-256) and a bare
//! TCP connect, in the same run.
//!
//! cargo bench -p weft-bench --bench dial

mod common;

use std::time::Duration;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    RecordSizeLayer,
};

/// After the handshake, write one byte, then wait for the dialer to leave.
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    stream.write_all(b"!").await.unwrap();
    stream.flush().await.unwrap();
    let mut sink = [0u8; 64];
    let _ = stream.read(&mut sink).await;
}

fn dial(c: &mut Criterion) {
    let rt = client_runtime();
    let server_rt = server_runtime();
    let mut group = c.benchmark_group("dial");
    group
        .sample_size(200)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    let addr = server_rt.block_on(server(greet));
    group.bench_function("tcp", |b| {
        b.to_async(&rt).iter(|| async {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            tcp.set_nodelay(true).unwrap();
            tcp.read_u8().await.unwrap()
        })
    });

    let tls = Tls::aes128();
    let acceptor = tls.acceptor.clone();
    let addr = server_rt.block_on(server(move |tcp| {
        let acceptor = acceptor.clone();
        async move { greet(acceptor.accept(tcp).await.unwrap()).await }
    }));
    group.bench_function("tls13_ecdsa_p256", |b| {
        b.to_async(&rt)
            .iter(|| async { tls.connect(addr).await.read_u8().await.unwrap() })
    });

    let suite = CipherSuite::default_order()[0];
    let acceptor = weft_acceptor(suite, RecordSizeLayer::dynamic());
    let addr = server_rt.block_on(server(move |tcp| {
        let mut acceptor = acceptor.clone();
        async move { greet(acceptor.accept_transport(tcp).await.unwrap()).await }
    }));
    let dialer = weft_dialer(suite, RecordSizeLayer::dynamic());
    group.bench_function(format!("weft_{}", suite.name()), |b| {
        b.to_async(&rt)
            .iter(|| async { dialer.clone().dial(addr).await.unwrap().read_u8().await.unwrap() })
    });
    group.finish();
}

criterion_group!(benches, dial);
criterion_main!(benches);
