//! The Go TLS seed's throughput table: one-way transfers of 1, 2, 4, ...
//! 64 MiB over loopback TCP (AES-256-GCM), fixed maximum records against
//! dynamic records, each on a new connection.
//!
//! This machine is shared and noisy, and the first of two back-to-back
//! transfers tends to be the slower, so the two policies run in ABBA order
//! (fixed, dynamic, dynamic, fixed, ...) and the delta is the median of
//! the paired ratios, not a ratio of separate medians.
//!
//! cargo run --release --example records                 # 8 pairs per size
//! cargo run --release --example records -- 20 16384     # 20 pairs, 16 KiB max (default 64 KiB)
//!
//! Wall-clock on a shared machine cannot resolve a 2% difference (an A/A
//! run of this table shows several percent either way), so the example can
//! also run one policy alone, for counting instructions, which repeat:
//!
//! cargo build --release --example records
//! valgrind --tool=callgrind target/release/examples/records --only fixed 64 2 65536
//! valgrind --tool=callgrind target/release/examples/records --only dynamic 64 2 65536

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    runtime::Runtime,
};
use tower::ServiceBuilder;
use weft::{
    crypto::Encrypt, record::RecordSize, setup::Negotiate, setup::Versions, Accepted, CipherSuite,
    EncryptLayer, HandshakeExt, Identity, NegotiateLayer, RecordSizeLayer,
};

type Stack = RecordSize<Encrypt<Negotiate<Accepted>>>;

fn stack(records: RecordSizeLayer, seed: u8) -> Stack {
    ServiceBuilder::new()
        .layer(records)
        .layer(EncryptLayer::new(Identity::from_seed(&[seed; 32])).suites([CipherSuite::Aes256Gcm]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(Accepted::new())
}

/// One transfer of `bytes` on a new connection: time from connect to the
/// server having read the last byte.
fn transfer(client: &Runtime, server: &Runtime, records: RecordSizeLayer, bytes: usize) -> Duration {
    let listener = server
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local address");
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    server.spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        tcp.set_nodelay(true).expect("nodelay");
        let mut channel = stack(records, 2).accept(tcp).await.expect("handshake");
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < bytes {
            match channel.read(&mut buf).await.expect("read") {
                0 => panic!("ended after {got} of {bytes} bytes"),
                n => got += n,
            }
        }
        let _ = done_tx.send(());
    });
    client.block_on(async {
        let start = Instant::now();
        let tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let mut channel = stack(records, 1).dial(tcp).await.expect("handshake");
        let chunk = vec![0x5a; 64 * 1024];
        let mut sent = 0;
        while sent < bytes {
            let n = chunk.len().min(bytes - sent);
            channel.write_all(&chunk[..n]).await.expect("write");
            sent += n;
        }
        channel.flush().await.expect("flush");
        done_rx.await.expect("server finished");
        start.elapsed()
    })
}

/// The client runs on this thread, the server on a worker of its own.
fn runtimes() -> (Runtime, Runtime) {
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    (client, server)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--only") {
        args.next();
        let policy = args.next().expect("--only fixed|dynamic MIB COUNT MAX_RECORD");
        let mib: usize = args.next().map_or(64, |a| a.parse().expect("MiB: a number"));
        let count: usize = args.next().map_or(4, |a| a.parse().expect("count: a number"));
        let max: usize = args
            .next()
            .map_or(64 * 1024, |a| a.parse().expect("max record size: bytes"));
        let records = match policy.as_str() {
            "fixed" => RecordSizeLayer::fixed(max),
            "dynamic" => RecordSizeLayer::dynamic().max_record_size(max),
            other => panic!("unknown policy {other}: fixed or dynamic"),
        };
        let (client, server) = runtimes();
        for _ in 0..count {
            transfer(&client, &server, records, mib << 20);
        }
        return;
    }
    let pairs: usize = args.next().map_or(8, |a| a.parse().expect("pairs: a number"));
    let max: usize = args
        .next()
        .map_or(64 * 1024, |a| a.parse().expect("max record size: bytes"));
    let (client, server) = runtimes();
    let fixed = RecordSizeLayer::fixed(max);
    let dynamic = RecordSizeLayer::dynamic().max_record_size(max);

    println!("AES-256-GCM over loopback TCP, records up to {max} bytes, {pairs} ABBA pairs per size");
    println!(
        "{:>8}  {:>14}  {:>14}  {:>8}",
        "size", "fixed max", "dynamic", "delta"
    );
    for mib in [1usize, 2, 4, 8, 16, 32, 64] {
        let bytes = mib << 20;
        // Warm up this size once each.
        transfer(&client, &server, fixed, bytes);
        transfer(&client, &server, dynamic, bytes);
        let (mut f, mut d, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for pair in 0..pairs {
            let (a, b) = if pair % 2 == 0 {
                (fixed, dynamic)
            } else {
                (dynamic, fixed)
            };
            let first = transfer(&client, &server, a, bytes).as_secs_f64();
            let second = transfer(&client, &server, b, bytes).as_secs_f64();
            let (tf, td) = if pair % 2 == 0 {
                (first, second)
            } else {
                (second, first)
            };
            f.push(tf);
            d.push(td);
            ratios.push(td / tf);
        }
        println!(
            "{:>5}MiB  {:>11.2} ms  {:>11.2} ms  {:>+7.2}%",
            mib,
            median(&mut f) * 1e3,
            median(&mut d) * 1e3,
            (median(&mut ratios) - 1.0) * 100.0
        );
    }
}
