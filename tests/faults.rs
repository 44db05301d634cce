//! Faults: 1,000 streams with checksummed payloads, over transports that
//! cut writes and reads short at any byte, delay, drop the connection and
//! reset it (`weft::sim::Faults`, seeded, so a failure repeats). Every
//! stream ends with all its bytes intact or with a typed error; none hangs
//! (every await is bounded); nothing corrupt ever reaches the application;
//! and the server stays up.

mod support;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use support::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt, DuplexStream},
    sync::mpsc,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    mux::Builder,
    sim::Faults,
    Error, ErrorKind, StreamLimitLayer,
};

const CONNECTIONS: u64 = 40;
const STREAMS_PER_CONNECTION: usize = 25;
/// How long any one stream, or handshake, may take: past it is a hang.
const BOUND: Duration = Duration::from_secs(20);

/// FNV-1a, as the payloads' trailer.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `len` bytes from `seed`, then their checksum.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut data: Vec<u8> = (0..len as u64)
        .map(|i| (seed.wrapping_mul(31) ^ i) as u8)
        .collect();
    let sum = checksum(&data);
    data.extend_from_slice(&sum.to_be_bytes());
    data
}

fn intact(data: &[u8]) -> bool {
    data.len() >= 8 && {
        let (body, sum) = data.split_at(data.len() - 8);
        checksum(body).to_be_bytes() == sum
    }
}

/// What goes wrong on connection `n`: half are only slow and cut short
/// (and must deliver everything), a quarter are dropped and a quarter
/// reset, somewhere within the traffic they would carry.
fn plan(n: u64) -> (Faults, bool) {
    let faults = Faults::new(n)
        .split_writes()
        .split_reads()
        .delays(8, Duration::from_millis(1));
    let at = 100 + (n * 7919) % 150_000;
    match n % 4 {
        0 | 1 => (faults, true),
        2 => (faults.cut_after(at), false),
        _ => (faults.reset_after(at), false),
    }
}

/// The whole stack with AES-256-GCM as identity `n`.
fn full_stack(n: u8) -> ConnStack {
    conn_stack(
        ident(n),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(64),
        Builder::new(),
    )
}

/// A transport to the server (the server's end is sent to it).
fn transport(to_server: &mpsc::UnboundedSender<DuplexStream>) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    to_server.send(theirs).unwrap();
    ours
}

/// An echo server over the transports it is sent: each stream's payload is
/// checked before it is echoed; a corrupt one is counted.
fn server(corrupt: Arc<AtomicUsize>) -> mpsc::UnboundedSender<DuplexStream> {
    let (tx, mut rx) = mpsc::unbounded_channel::<DuplexStream>();
    tokio::spawn(async move {
        while let Some(io) = rx.recv().await {
            let corrupt = corrupt.clone();
            tokio::spawn(async move {
                let mut acceptor = full_stack(2);
                let Ok(conn) = acceptor.accept_transport(io).await else {
                    return;
                };
                while let Ok(Some(mut stream)) = conn.accept().await {
                    let corrupt = corrupt.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        if stream.read_to_end(&mut got).await.is_err() {
                            return;
                        }
                        if !intact(&got) {
                            corrupt.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        let _ = stream.write_all(&got).await;
                        let _ = stream.shutdown().await;
                    });
                }
            });
        }
    });
    tx
}

/// An error a fault may cause: the transport's, or an end the connection
/// noticed because of it. Never a peer's protocol violation or a record
/// that failed to open: the faults drop and delay bytes, they do not
/// change them.
fn caused_by_a_fault(err: &Error) -> bool {
    match err.kind() {
        ErrorKind::Io | ErrorKind::Truncated | ErrorKind::Stopped => true,
        // A close record, not a close in the clear.
        ErrorKind::Closed => !is_unauthenticated_close(err),
        // The transport ended inside a frame.
        ErrorKind::Record => err
            .to_string()
            .starts_with("peer sent a malformed frame: transport ended inside a frame"),
        _ => false,
    }
}

#[derive(Debug, Default)]
struct Outcomes {
    intact: usize,
    failed: Vec<String>,
}

async fn run_connection(n: u64, to_server: mpsc::UnboundedSender<DuplexStream>) -> Outcomes {
    let (faults, clean) = plan(n);
    let ours = transport(&to_server);
    let mut dialer = full_stack(1);
    let mut outcomes = Outcomes::default();
    let conn = match tokio::time::timeout(BOUND, dialer.dial(faults.wrap(ours))).await {
        Err(_) => panic!("connection {n}: the handshake hung"),
        Ok(Err(err)) => {
            assert!(
                !clean,
                "connection {n} only had delays and short writes, yet: {err:?}"
            );
            assert!(caused_by_a_fault(&err), "connection {n}: {err:?}");
            outcomes.failed = vec![format!("{err}"); STREAMS_PER_CONNECTION];
            return outcomes;
        }
        Ok(Ok(conn)) => conn,
    };
    let mut tasks = Vec::new();
    for s in 0..STREAMS_PER_CONNECTION {
        let conn = conn.clone();
        let seed = n * 1000 + s as u64;
        let sent = payload(seed, (seed as usize * 977) % (16 * 1024));
        tasks.push(tokio::spawn(async move {
            let exchange = async {
                let mut stream = conn.open().await?;
                stream.write_all(&sent).await?;
                stream.shutdown().await?;
                let mut back = Vec::new();
                stream.read_to_end(&mut back).await?;
                Ok::<_, std::io::Error>(back)
            };
            let outcome = tokio::time::timeout(BOUND, exchange)
                .await
                .unwrap_or_else(|_| panic!("stream {seed} hung"));
            (sent, outcome)
        }));
    }
    for task in tasks {
        let (sent, outcome) = task.await.unwrap();
        match outcome {
            Ok(back) => {
                assert_eq!(back, sent, "connection {n}: an echo came back changed");
                outcomes.intact += 1;
            }
            Err(io) => {
                let err = Error::from(io);
                assert!(
                    !clean,
                    "connection {n} only had delays and short writes, yet: {err:?}"
                );
                assert!(caused_by_a_fault(&err), "connection {n}: {err:?}");
                outcomes.failed.push(err.to_string());
            }
        }
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_streams_through_faults_end_intact_or_with_a_typed_error() {
    let corrupt = Arc::new(AtomicUsize::new(0));
    let to_server = server(corrupt.clone());
    let mut intact = 0;
    let mut failed = 0;
    // Eight connections at a time.
    let mut batch = Vec::new();
    for n in 0..CONNECTIONS {
        batch.push(tokio::spawn(run_connection(n, to_server.clone())));
        if batch.len() == 8 || n + 1 == CONNECTIONS {
            for task in batch.drain(..) {
                let outcomes = task.await.unwrap();
                intact += outcomes.intact;
                failed += outcomes.failed.len();
            }
        }
    }
    assert_eq!(intact + failed, 1000);
    assert!(intact >= 500, "every stream of the clean half arrives: {intact}");
    assert!(failed > 0, "the faults did cut some streams");
    assert_eq!(
        corrupt.load(Ordering::Relaxed),
        0,
        "nothing corrupt reached the server's application"
    );
    // The server stays up: a clean connection is served as before.
    let ours = transport(&to_server);
    let mut dialer = full_stack(1);
    let conn = tokio::time::timeout(BOUND, dialer.dial(ours))
        .await
        .unwrap()
        .unwrap();
    let sent = payload(7, 1000);
    assert_eq!(echo_once(&conn, &sent).await, sent);
    println!("{intact} streams intact, {failed} ended with a typed error");
}

/// A message cut at every byte boundary: each read and write of the
/// transport moves one byte, both ways, handshake included.
#[tokio::test]
async fn one_byte_at_a_time_every_stream_arrives_intact() {
    let corrupt = Arc::new(AtomicUsize::new(0));
    let to_server = server(corrupt.clone());
    let ours = transport(&to_server);
    let mut dialer = full_stack(1);
    let faulty = Faults::new(1).max_io(1).wrap(ours);
    let conn = tokio::time::timeout(BOUND, dialer.dial(faulty))
        .await
        .unwrap()
        .unwrap();
    for n in 0..10u64 {
        let sent = payload(n, 100 * n as usize);
        let back = tokio::time::timeout(BOUND, echo_once(&conn, &sent))
            .await
            .unwrap();
        assert_eq!(back, sent);
    }
    assert_eq!(corrupt.load(Ordering::Relaxed), 0);
}
