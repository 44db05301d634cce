//! Dials an in-process server through the full weft stack over loopback
//! TCP (one tower service whose product is a `Connection`), echoes a
//! message on a stream, and prints what was negotiated and how long the
//! handshake took: the first (cold) dial, and the median of 20 more. Then
//! it echoes over 8 streams at once on one multiplexed connection.
//!
//! cargo run --release --example echo
//! cargo run --release --example echo -- aes256gcm|chacha20poly1305|xsalsa20poly1305|plaintext

use std::time::Instant;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, Versions},
    mux::{self, Connection},
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// Dials after the first, for a warm median.
const WARM_DIALS: usize = 20;
/// Streams echoing at once on the multiplexed connection.
const STREAMS: usize = 8;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let suites = match std::env::args().nth(1) {
        Some(name) => vec![name.parse::<CipherSuite>()?],
        None => CipherSuite::default_order(),
    };

    let server_identity = Identity::generate();
    let server_id = server_identity.peer_id();
    let mut acceptor = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(STREAMS as u32))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(server_identity).suites(suites.clone()))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["echo"]))
        .service(TcpAcceptor::new());
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        for _ in 0..=WARM_DIALS {
            let (tcp, _) = listener.accept().await?;
            let connection = acceptor.accept_transport(tcp).await?;
            if let Some(mut stream) = connection.accept().await? {
                let mut message = Vec::new();
                stream.read_to_end(&mut message).await?;
                stream.write_all(&message).await?;
                stream.shutdown().await?;
            }
        }
        // Then one multiplexed connection: every stream echoed by a task.
        let (tcp, _) = listener.accept().await?;
        let connection: Connection = acceptor.accept_transport(tcp).await?;
        while let Some(mut stream) = connection.accept().await? {
            tokio::spawn(async move {
                let mut message = Vec::new();
                stream.read_to_end(&mut message).await?;
                stream.write_all(&message).await?;
                stream.shutdown().await
            });
        }
        Ok::<_, weft::Error>(())
    });

    let mut dialer = ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(STREAMS as u32))
        .layer(RecordSizeLayer::dynamic())
        .layer(EncryptLayer::new(Identity::generate()).suites(suites))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(["echo"]))
        .service(TcpConnector::new());
    let mut dials = Vec::new();
    let mut last = None;
    for _ in 0..=WARM_DIALS {
        let started = Instant::now();
        let connection = dialer
            .handshake(Handshake::dial(addr).expect_peer(server_id))
            .await?;
        dials.push(started.elapsed());
        let mut stream = connection.open().await?;
        stream.write_all(b"hello through weft").await?;
        stream.shutdown().await?;
        let mut echoed = String::new();
        stream.read_to_string(&mut echoed).await?;
        last = Some((connection, echoed));
    }
    let (channel, echoed) = last.expect("at least one dial");

    // Streams: one connection, STREAMS echoes at once, no round trip to open.
    let connection = dialer
        .handshake(Handshake::dial(addr).expect_peer(server_id))
        .await?;
    let started = Instant::now();
    let mut echoes = Vec::new();
    for i in 0..STREAMS {
        let mut stream = connection.open().await?;
        echoes.push(tokio::spawn(async move {
            stream.write_all(format!("stream {i}").as_bytes()).await?;
            stream.shutdown().await?;
            let mut back = String::new();
            stream.read_to_string(&mut back).await?;
            Ok::<_, std::io::Error>((stream.id(), back))
        }));
    }
    let mut streams = Vec::new();
    for echo in echoes {
        streams.push(echo.await??);
    }
    let streams_took = started.elapsed();
    let stats = connection.stats();
    drop(connection);
    server.await??;
    let first = dials.remove(0);
    dials.sort();
    let median = dials[dials.len() / 2];

    let agreed = channel.agreement();
    println!("server   {addr} ({server_id})");
    println!("version  {}", agreed.version());
    println!("suite    {}", agreed.suite());
    println!("protocol {}", agreed.protocol().unwrap_or("-"));
    println!("records  up to {} bytes each way", agreed.send_record_size());
    println!(
        "peer     {}",
        channel.peer().map_or("-".into(), |p| p.to_string())
    );
    println!(
        "dial     first {:.0} us, then median {:.0} us over {WARM_DIALS} more (TCP connect + Setup + identity proofs)",
        first.as_secs_f64() * 1e6,
        median.as_secs_f64() * 1e6
    );
    println!("echo     {echoed:?}");
    println!(
        "streams  {} echoed at once over one connection in {:.0} us: ids {:?}, all intact: {}",
        streams.len(),
        streams_took.as_secs_f64() * 1e6,
        streams.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        streams
            .iter()
            .enumerate()
            .all(|(i, (_, back))| *back == format!("stream {i}")),
    );
    println!(
        "mux      {} frames and {} records sent, rtt {}",
        stats.frames_sent,
        stats.records_sent,
        stats
            .rtt
            .map_or("-".into(), |rtt| format!("{:.0} us", rtt.as_secs_f64() * 1e6)),
    );
    Ok(())
}
