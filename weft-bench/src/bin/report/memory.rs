//! Heap per idle connection and per idle stream, counted by the report's
//! allocator: 100 connections over in-memory pipes with the full stack
//! (AES-256-GCM, dynamic records, a stream limit of 2,000), measured per
//! end once their first pings have crossed; then 1,000 streams on one of
//! them, each opened with a byte and accepted, per end.

use std::time::Duration;

use bytes::Bytes;
use tower::ServiceBuilder;
use weft::{
    handshake::{HandshakeExt, Versions},
    mux,
    transport::ExistingTransport,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

use weft_bench::{counting::live, Context, Failure, Result};

/// Bytes per end of an idle connection (transport pipe included) and of
/// an idle open stream.
pub fn measure() -> Result<(f64, f64)> {
    const CONNS: usize = 100;
    const STREAMS: usize = 1000;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a runtime for the memory figures")?;
    runtime.block_on(async {
        let stack = |seed: u8| {
            ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(StreamLimitLayer::new(2 * STREAMS as u32))
                .layer(RecordSizeLayer::dynamic())
                .layer(EncryptLayer::new(Identity::from_seed(&[seed; 32])))
                .layer(NegotiateLayer::new(Versions::CURRENT))
                .service(ExistingTransport::new())
        };
        let (mut dialer, mut acceptor) = (stack(1), stack(2));
        let before = live();
        let mut conns = Vec::new();
        for _ in 0..CONNS {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let (d, acc) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
            conns.push((d.context("dialing")?, acc.context("accepting")?));
        }
        // The first pings cross; past the idle release (a second without
        // records, checked each second), the buffers are let go.
        tokio::time::sleep(Duration::from_millis(3000)).await;
        let per_conn = (live() - before) as f64 / (2 * CONNS) as f64;
        let (client, server) = &conns[0];
        let before = live();
        let mut held = Vec::new();
        for _ in 0..STREAMS {
            let mut stream = client.open().await.context("opening a stream")?;
            stream.send(Bytes::from_static(b"x")).await.context("sending")?;
            held.push(stream);
        }
        for _ in 0..STREAMS {
            let mut stream = server
                .accept()
                .await
                .context("accepting a stream")?
                .ok_or_else(|| Failure::new("the connection ended before its streams"))?;
            stream.recv().await.context("receiving")?;
            held.push(stream);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let per_stream = (live() - before) as f64 / (2 * STREAMS) as f64;
        drop(held);
        Ok((per_conn, per_stream))
    })
}
