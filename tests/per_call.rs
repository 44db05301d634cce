//! What one RPC call costs, counted rather than timed, so that CI can
//! guard README's per-call figures without timing flakiness: heap
//! allocations and records per unary call, both ends together (client
//! and server on one current-thread runtime, so one thread's counting
//! allocator sees both), over encrypted loopback TCP.

mod support;

use std::net::SocketAddr;

use support::*;
use tokio::net::TcpListener;
use weft::{
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server},
};

#[global_allocator]
static GLOBAL: ThreadHeap = ThreadHeap;

pub mod echo {
    weft::include_proto!("weft.examples");
}

use echo::{
    echo_client::EchoClient,
    echo_server::{Echo, EchoServer, ReplyStream},
    EchoReply, EchoRequest, ExpandRequest,
};
use weft::rpc::{Request, Response, Status, Streaming};

struct Say;

impl Echo for Say {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        let EchoRequest { text, payload } = request.into_inner();
        Ok(Response::new(EchoReply { text, payload }))
    }
    async fn expand(&self, _: Request<ExpandRequest>) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn collect(&self, _: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        Err(Status::unimplemented("not here"))
    }
    async fn chat(
        &self,
        _: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        Err(Status::unimplemented("not here"))
    }
}

/// The bounds: what this code measures, with room for a dependency's
/// update, and far below what a regression (a copy per frame, a record
/// per frame, a task per call) would add.
const MAX_ALLOCATIONS_PER_CALL: f64 = 26.0;
const MAX_RECORDS_PER_CALL: f64 = 2.2;

#[tokio::test(flavor = "current_thread")]
async fn a_unary_call_costs_at_most_26_allocations_and_about_2_records_both_ends() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let server = ident(2);
    let key = server.peer_id();
    tokio::spawn(
        Server::builder()
            .add_service(EchoServer::new(Say))
            .serve(listener, weft::acceptor(server)),
    );
    let pool = Pool::builder().build(weft::dialer(ident(1)));
    let mut echo = EchoClient::new(Client::new(pool.clone(), Endpoint::new(addr).expect_peer(key)));
    let request = || EchoRequest {
        text: "w".repeat(32),
        payload: Vec::new(),
    };
    // Warm: the connection, its buffers, the runtime's.
    for _ in 0..2_000 {
        echo.say(request()).await.unwrap();
    }
    let connection = pool
        .connections_to(&Endpoint::new(addr).expect_peer(key))
        .remove(0);
    let (allocs, records) = (
        allocations(),
        connection.stats().records_sent + connection.stats().records_received,
    );
    let calls = 5_000;
    for _ in 0..calls {
        echo.say(request()).await.unwrap();
    }
    let stats = connection.stats();
    let per_call = (allocations() - allocs) as f64 / f64::from(calls);
    let records_per_call = (stats.records_sent + stats.records_received - records) as f64 / f64::from(calls);
    println!("{per_call:.1} allocations and {records_per_call:.2} records per call, both ends");
    assert!(
        per_call <= MAX_ALLOCATIONS_PER_CALL,
        "{per_call:.1} allocations per call"
    );
    assert!(
        records_per_call <= MAX_RECORDS_PER_CALL,
        "{records_per_call:.2} records per call"
    );
    assert!(
        records_per_call >= 1.9,
        "a call is a record each way: {records_per_call:.2}"
    );
}

/// Records per MiB of a bulk transfer: dynamic records grow to 64 KiB,
/// so 64 MiB on one stream takes 1,024 full records plus the small ones
/// of the start and the partial ones of a writer that caught up (1,373
/// here, the same every run on one thread). Records that stopped growing
/// (16 KiB: 4,096) or a record per frame would take far more.
#[tokio::test(flavor = "current_thread")]
async fn a_bulk_transfer_takes_full_records() {
    use tokio::io::AsyncWriteExt;
    use weft::{handshake::CipherSuite, mux::Builder, StreamLimitLayer};

    let (a, b) = tcp_streams().await;
    let limits = (StreamLimitLayer::new(8), StreamLimitLayer::new(8));
    let (client, server) = conn_pair_over(
        a,
        b,
        CipherSuite::Aes256Gcm,
        limits,
        (Builder::new(), Builder::new()),
    )
    .await;
    const MIB: usize = 64;
    let reader = tokio::spawn(async move { read_counting(server.accept().await.unwrap().unwrap()).await });
    let mut stream = client.open().await.unwrap();
    let chunk = bytes::Bytes::from(vec![7u8; 1 << 20]);
    for _ in 0..MIB {
        stream.send(chunk.clone()).await.unwrap();
    }
    stream.shutdown().await.unwrap();
    assert_eq!(reader.await.unwrap(), MIB << 20);
    let records = client.stats().records_sent;
    println!("{records} records for {MIB} MiB");
    assert!(
        (1024..=1500).contains(&records),
        "{records} records for {MIB} MiB"
    );
}
