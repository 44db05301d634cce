//! Multiplexed throughput, latency and memory, against the baselines in the
//! same run, as ratios.
//!
//! ```text
//! cargo bench -p weft-bench --bench mux                       # everything
//! cargo bench -p weft-bench --bench mux -- throughput         # the connections x streams matrix
//! cargo bench -p weft-bench --bench mux -- latency            # open + 1-byte echo + close
//! cargo bench -p weft-bench --bench mux -- memory             # heap per idle connection and stream
//! WEFT_BENCH_MIB=256 WEFT_BENCH_REPS=3 cargo bench -p weft-bench --bench mux -- throughput   # quicker
//! ```
//!
//! Throughput: the Vanadium seed's matrix as connections x streams (1x1,
//! 1x2, 1x8, 2x2, 2x8, 4x8, 1x100), each case moving the same total one way
//! (client to server), the streams splitting it evenly. Cases are
//! interleaved, one repetition of every case before the next repetition,
//! and each ratio is taken within its repetition, so the machine's drift
//! cancels. Baselines: raw tokio TCP and tokio-rustls TLS 1.3 AES-128-GCM
//! on one connection; yamux 0.14 and h2 0.4 (2 MiB stream and 32 MiB
//! connection windows) with the same shapes. CPU seconds per GB count both
//! ends (the whole process, from /proc/self/stat).
//!
//! Each end runs on its own thread (see `common::client_runtime`); set
//! `WEFT_BENCH_PIN=1` to pin them to cores 0 and 1. The TLS baseline uses
//! ring; `WEFT_BENCH_TLS_PROVIDER=aws-lc-rs` gives it aws-lc-rs (rustls's
//! default provider, and weft's AES-GCM) instead.

mod common;

use std::{
    future::poll_fn,
    net::SocketAddr,
    task::Poll,
    time::{Duration, Instant},
};

use bytes::Bytes;
use common::*;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
    runtime::Runtime,
    sync::{mpsc, oneshot},
};
use tokio_util::compat::{FuturesAsyncReadCompatExt, TokioAsyncReadCompatExt};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    mux::{self, Connection},
    RecordSizeLayer, StreamLimitLayer,
};

// ------------------------------------------------------------ allocation

use weft_bench::counting::{live, Counting};

#[global_allocator]
static ALLOC: Counting = Counting;

// ------------------------------------------------------------ the cases

const CHUNK: usize = 64 * 1024;

/// What every stream of every case sends, from one place: with a buffer per
/// stream, 100 streams would read 6.4 MB of source data against one hot
/// 64 KiB buffer at one stream, and the matrix would measure the cache, not
/// the transport.
static DATA: [u8; CHUNK] = [0x5a; CHUNK];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Tcp,
    Tls,
    Weft(CipherSuite),
    Yamux,
    H2,
}

impl Mode {
    fn name(self) -> String {
        match self {
            Mode::Tcp => "raw TCP".into(),
            Mode::Tls => format!("tokio-rustls AES-128-GCM ({})", Tls::provider_name()),
            Mode::Weft(CipherSuite::Plaintext) => "weft plaintext".into(),
            Mode::Weft(suite) => format!("weft {suite:?}"),
            Mode::Yamux => "yamux 0.14".into(),
            Mode::H2 => "h2 0.4 (large windows)".into(),
        }
    }
}

/// A server for one mode on the server runtime: reads every stream to its
/// end, then answers one byte.
struct Server {
    addr: SocketAddr,
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn read_to_end_then_ack<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut buf = vec![0u8; CHUNK];
    while s.read(&mut buf).await.unwrap() > 0 {}
    s.write_all(b"k").await.unwrap();
    s.shutdown().await.unwrap();
}

async fn write_then_wait_ack<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, bytes: usize) {
    let mut sent = 0;
    while sent < bytes {
        let n = CHUNK.min(bytes - sent);
        s.write_all(&DATA[..n]).await.unwrap();
        sent += n;
    }
    s.shutdown().await.unwrap();
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).await.unwrap();
}

fn start_server(rt: &Runtime, mode: Mode) -> Server {
    let addr = rt.block_on(async move {
        match mode {
            Mode::Tcp => server(read_to_end_then_ack).await,
            Mode::Tls => server(|tcp| async move {
                read_to_end_then_ack(tls().acceptor.accept(tcp).await.unwrap()).await
            })
            .await,
            Mode::Weft(suite) => {
                server(move |tcp| async move {
                    let mut acceptor = connections(
                        weft_acceptor(suite, RecordSizeLayer::dynamic()),
                        1000,
                        mux::Builder::new(),
                    );
                    let conn = acceptor.accept_transport(tcp).await.unwrap();
                    while let Ok(Some(mut stream)) = conn.accept().await {
                        tokio::spawn(async move {
                            while stream.recv().await.unwrap().is_some() {}
                            stream.send(Bytes::from_static(b"k")).await.unwrap();
                            stream.finish().unwrap();
                        });
                    }
                })
                .await
            }
            Mode::Yamux => {
                server(|tcp| async move {
                    let mut conn =
                        yamux::Connection::new(tcp.compat(), yamux::Config::default(), yamux::Mode::Server);
                    while let Some(Ok(stream)) = poll_fn(|cx| conn.poll_next_inbound(cx)).await {
                        tokio::spawn(read_to_end_then_ack(stream.compat()));
                    }
                })
                .await
            }
            Mode::H2 => {
                server(|tcp| async move {
                    let mut conn = h2_server_builder().handshake::<_, Bytes>(tcp).await.unwrap();
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        tokio::spawn(async move {
                            let mut body = req.into_body();
                            while let Some(data) = body.data().await {
                                let data = data.unwrap();
                                body.flow_control().release_capacity(data.len()).unwrap();
                            }
                            let mut send = respond.send_response(http::Response::new(()), false).unwrap();
                            send.send_data(Bytes::from_static(b"k"), true).unwrap();
                        });
                    }
                })
                .await
            }
        }
    });
    Server { addr }
}

/// One TLS configuration (one certificate) for both ends of every case.
fn tls() -> &'static Tls {
    static TLS: std::sync::OnceLock<Tls> = std::sync::OnceLock::new();
    TLS.get_or_init(Tls::aes128)
}

fn h2_server_builder() -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    b.initial_window_size(2 << 20)
        .initial_connection_window_size(32 << 20)
        .max_concurrent_streams(1000);
    b
}

/// One run of a mode: `conns` connections, `streams` each, `total` bytes in
/// all. Returns the seconds and each stream's MiB/s.
async fn run(mode: Mode, addr: SocketAddr, conns: usize, streams: usize, total: usize) -> (f64, Vec<f64>) {
    let per_stream = total / (conns * streams);
    let start = Instant::now();
    let mut tasks = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..conns {
        match mode {
            Mode::Tcp => {
                let tcp = TcpStream::connect(addr).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                tasks.push(tokio::spawn(timed(write_then_wait_ack(tcp, per_stream))));
            }
            Mode::Tls => {
                let s = tls().connect(addr).await;
                tasks.push(tokio::spawn(timed(write_then_wait_ack(s, per_stream))));
            }
            Mode::Weft(suite) => {
                let mut builder = mux::Builder::new();
                if let Ok(bytes) = std::env::var("WEFT_BENCH_SEND_BUFFER") {
                    builder = builder.send_buffer(bytes.parse().unwrap());
                }
                let mut dialer = connections(weft_dialer(suite, RecordSizeLayer::dynamic()), 100, builder);
                let conn = dialer.dial(addr).await.unwrap();
                for _ in 0..streams {
                    let mut s = conn.open().await.unwrap();
                    tasks.push(tokio::spawn(timed(async move {
                        let chunk = Bytes::from_static(&DATA);
                        let mut sent = 0;
                        while sent < per_stream {
                            let n = CHUNK.min(per_stream - sent);
                            s.send(chunk.slice(..n)).await.unwrap();
                            sent += n;
                        }
                        s.finish().unwrap();
                        assert_eq!(s.recv().await.unwrap().as_deref(), Some(&b"k"[..]));
                    })));
                }
                keep.push(conn);
            }
            Mode::Yamux => {
                let tcp = TcpStream::connect(addr).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let opener = yamux_client(tcp);
                for _ in 0..streams {
                    let (tx, rx) = oneshot::channel();
                    opener.send(tx).await.unwrap();
                    let stream = rx.await.unwrap();
                    tasks.push(tokio::spawn(timed(write_then_wait_ack(
                        stream.compat(),
                        per_stream,
                    ))));
                }
            }
            Mode::H2 => {
                let tcp = TcpStream::connect(addr).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let (client, conn) = h2::client::Builder::new()
                    .initial_window_size(2 << 20)
                    .initial_connection_window_size(32 << 20)
                    .handshake::<_, Bytes>(tcp)
                    .await
                    .unwrap();
                tokio::spawn(conn);
                for _ in 0..streams {
                    let mut client = client.clone().ready().await.unwrap();
                    let request = http::Request::post("http://localhost/").body(()).unwrap();
                    let (response, send) = client.send_request(request, false).unwrap();
                    tasks.push(tokio::spawn(timed(async move {
                        h2_send(send, per_stream).await;
                        let mut body = response.await.unwrap().into_body();
                        while let Some(data) = body.data().await {
                            data.unwrap();
                        }
                    })));
                }
            }
        }
    }
    let mut rates = Vec::new();
    for t in tasks {
        let secs = t.await.unwrap();
        rates.push(per_stream as f64 / secs / (1 << 20) as f64);
    }
    drop(keep);
    (start.elapsed().as_secs_f64(), rates)
}

async fn timed(f: impl std::future::Future<Output = ()>) -> f64 {
    let start = Instant::now();
    f.await;
    start.elapsed().as_secs_f64()
}

async fn h2_send(mut send: h2::SendStream<Bytes>, bytes: usize) {
    let chunk = Bytes::from_static(&DATA);
    let mut left = bytes;
    while left > 0 {
        send.reserve_capacity(CHUNK.min(left));
        let cap = poll_fn(|cx| send.poll_capacity(cx)).await.unwrap().unwrap();
        let n = cap.min(left);
        send.send_data(chunk.slice(..n), false).unwrap();
        left -= n;
    }
    send.send_data(Bytes::new(), true).unwrap();
}

/// A yamux client connection: its driver task, and a way to open streams.
fn yamux_client(tcp: TcpStream) -> mpsc::Sender<oneshot::Sender<yamux::Stream>> {
    let (tx, mut rx) = mpsc::channel::<oneshot::Sender<yamux::Stream>>(16);
    let mut conn = yamux::Connection::new(tcp.compat(), yamux::Config::default(), yamux::Mode::Client);
    tokio::spawn(async move {
        let mut waiting: Vec<oneshot::Sender<yamux::Stream>> = Vec::new();
        poll_fn(|cx| loop {
            while let Poll::Ready(Some(req)) = rx.poll_recv(cx) {
                waiting.push(req);
            }
            while !waiting.is_empty() {
                match conn.poll_new_outbound(cx) {
                    Poll::Ready(Ok(stream)) => {
                        let _ = waiting.remove(0).send(stream);
                    }
                    Poll::Ready(Err(_)) => return Poll::Ready(()),
                    Poll::Pending => break,
                }
            }
            match conn.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        })
        .await
    });
    tx
}

/// Process CPU seconds (user + system) so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of the file; index 11 and 12 after the comm field.
    (ticks(11) + ticks(12)) / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

// ------------------------------------------------------------ throughput

fn throughput(client: &Runtime, server_rt: &Runtime) {
    let total = env("WEFT_BENCH_MIB", 1024) << 20;
    let reps = env("WEFT_BENCH_REPS", 5);
    let shapes = [(1, 1), (1, 2), (1, 8), (2, 2), (2, 8), (4, 8), (1, 100)];
    let mut cases: Vec<(Mode, usize, usize)> = vec![(Mode::Tcp, 1, 1), (Mode::Tls, 1, 1)];
    for mode in [
        Mode::Weft(CipherSuite::Plaintext),
        Mode::Weft(CipherSuite::Aes256Gcm),
        Mode::Yamux,
        Mode::H2,
    ] {
        for &(c, s) in &shapes {
            cases.push((mode, c, s));
        }
    }
    // WEFT_BENCH_ONLY=plaintext (say) keeps the baselines and the cases
    // whose name contains it, for quick experiments.
    if let Ok(only) = std::env::var("WEFT_BENCH_ONLY") {
        // A trailing '$' asks for an exact match ("weft Aes256Gcm 1x1$").
        cases.retain(|&(m, c, s)| {
            let name = format!("{} {c}x{s}", m.name());
            m == Mode::Tcp
                || m == Mode::Tls
                || match only.strip_suffix('$') {
                    Some(exact) => name == exact,
                    None => name.contains(&only),
                }
        });
    }
    let servers: Vec<(Mode, Server)> = [
        Mode::Tcp,
        Mode::Tls,
        Mode::Weft(CipherSuite::Plaintext),
        Mode::Weft(CipherSuite::Aes256Gcm),
        Mode::Yamux,
        Mode::H2,
    ]
    .into_iter()
    .map(|m| (m, start_server(server_rt, m)))
    .collect();
    let addr = |m: Mode| servers.iter().find(|(s, _)| *s == m).unwrap().1.addr;

    // rates[case] = per rep (GB/s, cpu s/GB, per-stream MiB/s)
    let mut results: Vec<Vec<(f64, f64, Vec<f64>)>> = vec![Vec::new(); cases.len()];
    for rep in 0..reps {
        eprintln!("throughput: repetition {} of {reps}", rep + 1);
        for (i, &(mode, c, s)) in cases.iter().enumerate() {
            let cpu = cpu_seconds();
            let (secs, rates) = client.block_on(run(mode, addr(mode), c, s, total));
            let cpu = cpu_seconds() - cpu;
            let gb = total as f64 / 1e9;
            results[i].push((gb / secs, cpu / gb, rates));
        }
    }
    println!(
        "\n## Throughput, {} MiB per case, {reps} interleaved repetitions (median; ratios within each repetition)\n",
        total >> 20
    );
    println!(
        "| case | conns x streams | GB/s | ratio to raw TCP | ratio to TLS | ratio to its 1x1 | CPU s/GB | per-stream P10/P50 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let tcp = &results[0];
    let tls = &results[1];
    for (i, &(mode, c, s)) in cases.iter().enumerate() {
        let r = &results[i];
        let gbps = median(r.iter().map(|x| x.0).collect());
        let ratio = median(r.iter().zip(tcp).map(|(x, t)| x.0 / t.0).collect());
        let to_tls = median(r.iter().zip(tls).map(|(x, t)| x.0 / t.0).collect());
        let one = cases
            .iter()
            .position(|&(m, c1, s1)| m == mode && c1 == 1 && s1 == 1);
        let to_one = one.map_or(f64::NAN, |one| {
            median(r.iter().zip(&results[one]).map(|(x, o)| x.0 / o.0).collect())
        });
        let cpu = median(r.iter().map(|x| x.1).collect());
        let spread = median(
            r.iter()
                .map(|x| percentile(&x.2, 0.1) / percentile(&x.2, 0.5))
                .collect(),
        );
        println!(
            "| {} | {c}x{s} | {gbps:.2} | {ratio:.2} | {to_tls:.2} | {to_one:.2} | {cpu:.2} | {spread:.2} |",
            mode.name()
        );
    }
}

// --------------------------------------------------------------- latency

fn latency(client: &Runtime, server_rt: &Runtime) {
    let count = env("WEFT_BENCH_PINGS", 20_000);
    // Raw TCP and TLS: a 1-byte ping-pong on one connection.
    let echo = |rt: &Runtime, encrypted: bool| {
        rt.block_on(async move {
            if encrypted {
                server(|tcp| async move { echo_bytes(tls().acceptor.accept(tcp).await.unwrap()).await }).await
            } else {
                server(echo_bytes).await
            }
        })
    };
    let tcp_addr = echo(server_rt, false);
    let tls_addr = echo(server_rt, true);
    let weft_addr = |suite| {
        server_rt.block_on(server(move |tcp| async move {
            let conn = connections(
                weft_acceptor(suite, RecordSizeLayer::dynamic()),
                100,
                mux::Builder::new(),
            )
            .accept_transport(tcp)
            .await
            .unwrap();
            while let Ok(Some(mut stream)) = conn.accept().await {
                tokio::spawn(async move {
                    while let Some(b) = stream.recv().await.unwrap() {
                        stream.send(b).await.unwrap();
                    }
                    stream.finish().unwrap();
                });
            }
        }))
    };
    let plain_addr = weft_addr(CipherSuite::Plaintext);
    let aes_addr = weft_addr(CipherSuite::Aes256Gcm);

    let results = client.block_on(async {
        let mut tcp = TcpStream::connect(tcp_addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut tls = tls().connect(tls_addr).await;
        let dial = |suite, addr| async move {
            connections(
                weft_dialer(suite, RecordSizeLayer::dynamic()),
                100,
                mux::Builder::new(),
            )
            .dial(addr)
            .await
            .unwrap()
        };
        let plain = dial(CipherSuite::Plaintext, plain_addr).await;
        let aes = dial(CipherSuite::Aes256Gcm, aes_addr).await;
        let mut samples: [Vec<f64>; 4] = Default::default();
        // Interleaved, so drift hits every case alike.
        for _ in 0..count {
            samples[0].push(ping(&mut tcp).await);
            samples[1].push(ping(&mut tls).await);
            samples[2].push(open_echo_close(&plain).await);
            samples[3].push(open_echo_close(&aes).await);
        }
        samples
    });
    let tcp_p50 = percentile(&results[0], 0.5);
    println!("\n## Latency, {count} interleaved round trips (µs)\n");
    println!("| case | p50 | p99 | p50 ratio to raw TCP |");
    println!("|---|---|---|---|");
    for (name, s) in [
        "raw TCP: 1-byte ping-pong",
        "tokio-rustls AES-128-GCM: 1-byte ping-pong",
        "weft plaintext: open + 1-byte echo + close",
        "weft AES-256-GCM: open + 1-byte echo + close",
    ]
    .iter()
    .zip(&results)
    {
        let p50 = percentile(s, 0.5);
        println!(
            "| {name} | {p50:.1} | {:.1} | {:.2} |",
            percentile(s, 0.99),
            p50 / tcp_p50
        );
    }
}

async fn echo_bytes<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                s.write_all(&buf[..n]).await.unwrap();
                s.flush().await.unwrap();
            }
        }
    }
}

async fn ping<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> f64 {
    let start = Instant::now();
    s.write_all(b"p").await.unwrap();
    s.flush().await.unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).await.unwrap();
    start.elapsed().as_secs_f64() * 1e6
}

async fn open_echo_close(conn: &Connection) -> f64 {
    let start = Instant::now();
    let mut s = conn.open().await.unwrap();
    s.send(Bytes::from_static(b"p")).await.unwrap();
    s.finish().unwrap();
    let b = s.recv().await.unwrap().unwrap();
    assert_eq!(&b[..], b"p");
    assert!(s.recv().await.unwrap().is_none());
    start.elapsed().as_secs_f64() * 1e6
}

// ---------------------------------------------------------------- memory

fn memory(client: &Runtime) {
    const CONNS: usize = 100;
    const STREAMS: usize = 1000;
    client.block_on(async {
        // Channels first, so the figure is what the multiplexer adds.
        let mut pairs = Vec::new();
        for _ in 0..CONNS {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let mut d = weft_dialer_over(CipherSuite::Aes256Gcm);
            let mut acc = weft_acceptor_over(CipherSuite::Aes256Gcm);
            let (a, b) = tokio::join!(d.dial(a), acc.accept_transport(b));
            pairs.push((a.unwrap(), b.unwrap()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let buffers_before: usize = pairs
            .iter()
            .map(|(a, b)| a.channel().buffer_capacity() + b.channel().buffer_capacity())
            .sum();
        let before = live();
        let mut conns = Vec::new();
        for (a, b) in pairs {
            conns.push((multiplexed(a).await, multiplexed(b).await));
        }
        // Let the first pings cross, so each connection is as it idles.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = live();
        let buffers: usize = conns
            .iter()
            .map(|(a, b)| a.stats().io_buffers + b.stats().io_buffers)
            .sum();
        let ends = (2 * CONNS) as f64;
        let per_conn = (after - before) as f64 / ends;
        let grown = buffers as isize - buffers_before as isize;
        let per_conn_state = (after - before - grown) as f64 / ends;
        // Past the idle release (a second without records): buffers gone.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let idle_buffers: usize = conns
            .iter()
            .map(|(a, b)| a.stats().io_buffers + b.stats().io_buffers)
            .sum();

        // Idle streams on one connection: opened, accepted, nothing sent.
        let (client, server) = &conns[0];
        let before = live();
        let mut held = Vec::new();
        for _ in 0..STREAMS {
            let mut s = client.open().await.unwrap();
            s.send(Bytes::from_static(b"x")).await.unwrap();
            held.push(s);
        }
        for _ in 0..STREAMS {
            let mut s = server.accept().await.unwrap().unwrap();
            assert_eq!(&s.recv().await.unwrap().unwrap()[..], b"x");
            held.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let per_stream = (live() - before) as f64 / (2 * STREAMS) as f64;
        println!("\n## Heap (counting allocator; per end of a connection)\n");
        println!("| what | bytes |");
        println!("|---|---|");
        println!("| idle connection, all included | {per_conn:.0} |");
        println!("| idle connection, channel I/O buffers excluded | {per_conn_state:.0} |");
        println!(
            "| the channel's I/O buffers, within a second of traffic (read and send) | {:.0} |",
            buffers as f64 / ends
        );
        println!(
            "| the channel's I/O buffers after a second without records | {:.0} |",
            idle_buffers as f64 / ends
        );
        println!("| idle open stream (after a 1-byte exchange) | {per_stream:.0} |");
        drop(held);
    });
}

fn weft_dialer_over(suite: CipherSuite) -> Channels {
    weft_channels(suite, 1)
}

fn weft_acceptor_over(suite: CipherSuite) -> Channels {
    weft_channels(suite, 2)
}

/// A channel stack over an existing transport (a duplex pipe here), with
/// the stream limit the memory figures need, so the heap of the channels
/// can be measured before the multiplexer's.
type Channels = weft::stack::StreamLimit<
    weft::stack::RecordSize<weft::stack::Encrypt<weft::stack::Negotiate<weft::transport::ExistingTransport>>>,
>;

/// The multiplexer on top of an established channel: a `MultiplexLayer`
/// over a service that hands it the channel, with the stream limit the
/// memory figures need declared.
async fn multiplexed(channel: weft::stack::StreamLimited<tokio::io::DuplexStream>) -> Connection {
    use tower::{Layer, ServiceExt};
    let mut channel = Some(channel);
    let inner = tower::service_fn(move |_: weft::handshake::Handshake<()>| {
        std::future::ready(Ok::<_, weft::Error>(channel.take().expect("one call")))
    });
    weft::MultiplexLayer::new(mux::Builder::new())
        .layer(inner)
        .oneshot(weft::handshake::Handshake::dial(()))
        .await
        .unwrap()
}

fn weft_channels(suite: CipherSuite, seed: u8) -> Channels {
    use weft::{handshake::Versions, transport::ExistingTransport, EncryptLayer, Identity, NegotiateLayer};
    tower::ServiceBuilder::new()
        .layer(StreamLimitLayer::new(2000))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::from_seed(&[seed; 32])).suites([suite]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(ExistingTransport::new())
}

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    let client = client_runtime();
    let server_rt = server_runtime();
    println!("# weft mux bench, {}", std::env::consts::ARCH);
    if wants("throughput") {
        throughput(&client, &server_rt);
    }
    if wants("latency") {
        latency(&client, &server_rt);
    }
    if wants("memory") {
        memory(&client);
    }
}
