//! Per-call message compression (docs/PROTOCOL.md, section 16.5) over
//! encrypted loopback TCP, with the bytes each server's transport carries
//! counted: replies go compressed only to a client that reads the
//! encoding, requests only once the server has said it reads it, small
//! messages stay plain, every kind of call round-trips, a request in an
//! encoding the server does not read is refused unrun with what it reads,
//! and a compression bomb is refused before its bytes are held.

#![cfg(all(feature = "gzip", feature = "zstd"))]

#[path = "support/echo.rs"]
#[allow(unused_imports)]
mod echo;
mod support;

use std::{
    io::Write,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use echo::{
    generated::echo_server::Echo, EchoClient, EchoReply, EchoRequest, EchoServer, ExpandRequest, ReplyStream,
};
use futures_util::{stream, StreamExt};
use prost::Message;
use support::{
    counted::{Counted, Counts},
    rpc_frame, wire,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use weft::{
    handshake::{Handshake, HandshakeExt},
    pool::{Endpoint, Pool},
    rpc::{
        client::Client,
        server::{Builder, Server},
        Code, Encoding, Request, Response, Status, Streaming,
    },
    transport::ExistingTransport,
    Identity,
};

/// Counts each thread's heap: a test's runtime (current-thread) runs its
/// server and its client on its own thread.
#[global_allocator]
static HEAP: support::ThreadHeap = support::ThreadHeap;

// ------------------------------------------------------------ the server

/// Echo, every kind of call, with payloads.
#[derive(Clone, Default)]
struct Full {
    /// Handlers run.
    ran: Arc<AtomicUsize>,
}

fn reply(text: String, payload: Vec<u8>) -> EchoReply {
    EchoReply { text, payload }
}

impl Echo for Full {
    async fn say(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        self.ran.fetch_add(1, Ordering::Relaxed);
        let EchoRequest { text, payload } = request.into_inner();
        Ok(Response::new(reply(text, payload)))
    }

    /// `count` replies of 16 KiB each, the text repeated.
    async fn expand(
        &self,
        request: Request<ExpandRequest>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        self.ran.fetch_add(1, Ordering::Relaxed);
        let ExpandRequest { text, count } = request.into_inner();
        let payload = compressible(&text, 16 * 1024);
        let replies = stream::iter((0..count).map(move |i| Ok(reply(format!("{i}"), payload.clone()))));
        Ok(Response::new(Box::pin(replies) as ReplyStream<EchoReply>))
    }

    /// The payloads, joined.
    async fn collect(&self, request: Request<Streaming<EchoRequest>>) -> Result<Response<EchoReply>, Status> {
        self.ran.fetch_add(1, Ordering::Relaxed);
        let mut requests = request.into_inner();
        let mut payload = Vec::new();
        while let Some(request) = requests.message().await? {
            payload.extend(request.payload);
        }
        Ok(Response::new(reply("collected".into(), payload)))
    }

    async fn chat(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<ReplyStream<EchoReply>>, Status> {
        self.ran.fetch_add(1, Ordering::Relaxed);
        let replies = request
            .into_inner()
            .map(|request| request.map(|EchoRequest { text, payload }| reply(text, payload)));
        Ok(Response::new(Box::pin(replies) as ReplyStream<EchoReply>))
    }
}

/// `len` bytes of `text`, repeated: a message that compresses well.
fn compressible(text: &str, len: usize) -> Vec<u8> {
    text.bytes().cycle().take(len).collect()
}

/// A TCP listener whose connections' bytes are counted.
struct CountedListener {
    listener: TcpListener,
    counts: Arc<Counts>,
}

impl weft::transport::Listener for CountedListener {
    type Io = Counted<TcpStream>;

    async fn accept(&mut self) -> Option<std::io::Result<(Counted<TcpStream>, Option<SocketAddr>)>> {
        Some(
            self.listener
                .accept()
                .await
                .map(|(tcp, addr)| (Counted::new(tcp, &self.counts), Some(addr))),
        )
    }
}

type Dialer = weft::stack::StandardDialer;

struct Fixture {
    endpoint: Endpoint,
    addr: SocketAddr,
    peer: weft::handshake::PeerId,
    /// What the server's transports read and wrote.
    counts: Arc<Counts>,
    echo: Full,
}

impl Fixture {
    /// A client of the server, configured by `settings`.
    fn client(&self, settings: impl FnOnce(Client<Dialer>) -> Client<Dialer>) -> EchoClient<Client<Dialer>> {
        let pool = Pool::builder().build(weft::dialer(Identity::generate()));
        EchoClient::new(settings(Client::new(pool, self.endpoint.clone())))
    }
}

/// Serves `Full` with `builder`'s settings on a counted listener.
async fn serve(builder: Builder) -> Fixture {
    let identity = Identity::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (addr, peer) = (listener.local_addr().unwrap(), identity.peer_id());
    let endpoint = Endpoint::new(addr).expect_peer(peer);
    let counts = Arc::new(Counts::default());
    let echo = Full::default();
    let listener = CountedListener {
        listener,
        counts: counts.clone(),
    };
    tokio::spawn(builder.add_service(EchoServer::new(echo.clone())).serve(
        listener,
        support::mux_stack(identity, &[], ExistingTransport::new()),
    ));
    Fixture {
        endpoint,
        addr,
        peer,
        counts,
        echo,
    }
}

fn say(text: &str, payload: Vec<u8>) -> EchoRequest {
    EchoRequest {
        text: text.into(),
        payload,
    }
}

const ENCODINGS: [Encoding; 2] = [Encoding::Gzip, Encoding::Zstd];

// ------------------------------------------------------------ the tests

#[tokio::test]
async fn replies_go_compressed_to_a_client_that_reads_the_encoding_and_plain_to_one_that_does_not() {
    for encoding in ENCODINGS {
        let server = serve(Server::builder().send_compressed(encoding)).await;
        let payload = compressible("a reply that repeats ", 64 * 1024);
        let mut reads = server.client(|c| c.accept_compressed(encoding));
        let mut plain = server.client(|c| c);
        // Connected first, so only the call's bytes are counted.
        reads.say(say("warm", Vec::new())).await.unwrap();
        plain.say(say("warm", Vec::new())).await.unwrap();

        let before = server.counts.written_bytes();
        let echoed = reads.say(say("big", payload.clone())).await.unwrap().into_inner();
        let compressed = server.counts.written_bytes() - before;
        assert_eq!(echoed.payload, payload, "{encoding:?}");
        assert!(
            compressed < 8 * 1024,
            "{encoding:?}: {compressed} bytes for a 64 KiB reply"
        );

        let before = server.counts.written_bytes();
        let echoed = plain.say(say("big", payload.clone())).await.unwrap().into_inner();
        let sent = server.counts.written_bytes() - before;
        assert_eq!(echoed.payload, payload);
        assert!(
            sent > 64 * 1024,
            "{encoding:?}: {sent} bytes to a client that reads no encoding"
        );

        // Streamed replies, each compressed: 8 of 16 KiB.
        let before = server.counts.written_bytes();
        let mut replies = reads
            .expand(ExpandRequest {
                text: "streamed ".into(),
                count: 8,
            })
            .await
            .unwrap()
            .into_inner();
        let mut got = 0;
        while let Some(reply) = replies.message().await.unwrap() {
            assert_eq!(reply.payload, compressible("streamed ", 16 * 1024));
            got += 1;
        }
        let streamed = server.counts.written_bytes() - before;
        assert_eq!(got, 8);
        assert!(
            streamed < 16 * 1024,
            "{encoding:?}: {streamed} bytes for 128 KiB of replies"
        );
    }
}

#[tokio::test]
async fn requests_go_compressed_once_the_server_has_said_it_reads_the_encoding() {
    for encoding in ENCODINGS {
        let server = serve(Server::builder().accept_compressed(encoding)).await;
        let mut client = server.client(|c| c.send_compressed(encoding));
        let payload = compressible("a request that repeats ", 64 * 1024);
        // The first call: nothing heard of the server yet, so plain.
        let before = server.counts.read_bytes();
        let echoed = client
            .say(say("first", payload.clone()))
            .await
            .unwrap()
            .into_inner();
        let first = server.counts.read_bytes() - before;
        assert_eq!(echoed.payload, payload);
        assert!(
            first > 64 * 1024,
            "{encoding:?}: the first call sent {first} bytes"
        );
        // Its reply header said the server reads it: compressed from now.
        let before = server.counts.read_bytes();
        let echoed = client
            .say(say("second", payload.clone()))
            .await
            .unwrap()
            .into_inner();
        let second = server.counts.read_bytes() - before;
        assert_eq!(echoed.payload, payload);
        assert!(
            second < 8 * 1024,
            "{encoding:?}: the second call sent {second} bytes"
        );

        // Streamed requests, each compressed: client streaming and
        // bidirectional.
        let parts: Vec<EchoRequest> = (0..4).map(|_| say("part", payload.clone())).collect();
        let before = server.counts.read_bytes();
        let collected = client
            .collect(stream::iter(parts.clone()))
            .await
            .unwrap()
            .into_inner();
        let sent = server.counts.read_bytes() - before;
        assert_eq!(collected.payload, payload.repeat(4));
        assert!(
            sent < 16 * 1024,
            "{encoding:?}: {sent} bytes for 256 KiB of requests"
        );
        let before = server.counts.read_bytes();
        let mut chat = client.chat(stream::iter(parts)).await.unwrap().into_inner();
        let mut got = 0;
        while let Some(reply) = chat.message().await.unwrap() {
            assert_eq!(reply.payload, payload);
            got += 1;
        }
        let sent = server.counts.read_bytes() - before;
        assert_eq!(got, 4);
        assert!(sent < 16 * 1024, "{encoding:?}: {sent} bytes for 256 KiB of chat");
    }
}

#[tokio::test]
async fn a_client_of_a_server_that_reads_no_encoding_sends_plain_and_every_call_works() {
    let server = serve(Server::builder().send_compressed(Encoding::Zstd)).await;
    // Each side would compress, and neither reads the other's encoding.
    let mut client = server.client(|c| {
        c.send_compressed(Encoding::Gzip)
            .accept_compressed(Encoding::Gzip)
    });
    let payload = compressible("plain ", 32 * 1024);
    for _ in 0..3 {
        let before = (server.counts.read_bytes(), server.counts.written_bytes());
        let echoed = client.say(say("x", payload.clone())).await.unwrap().into_inner();
        assert_eq!(echoed.payload, payload);
        assert!(server.counts.read_bytes() - before.0 > 32 * 1024);
        assert!(server.counts.written_bytes() - before.1 > 32 * 1024);
    }
}

#[tokio::test]
async fn messages_under_the_threshold_stay_plain() {
    let server = serve(
        Server::builder()
            .send_compressed(Encoding::Zstd)
            .compression_threshold(128 * 1024),
    )
    .await;
    let mut client = server.client(|c| c.accept_compressed(Encoding::Zstd));
    client.say(say("warm", Vec::new())).await.unwrap();
    let payload = compressible("under the threshold ", 64 * 1024);
    let before = server.counts.written_bytes();
    let echoed = client.say(say("x", payload.clone())).await.unwrap().into_inner();
    assert_eq!(echoed.payload, payload);
    assert!(server.counts.written_bytes() - before > 64 * 1024);
}

// ----------------------------------------------- by hand: refusals, bombs

/// A connection to the server, for calls written by hand.
async fn raw_connection(server: &Fixture) -> weft::mux::Connection {
    weft::dialer(Identity::generate())
        .handshake(Handshake::dial(server.addr).expect_peer(server.peer))
        .await
        .unwrap()
}

const HEADER: u8 = 1;
const STATUS: u8 = 2;
const COMPRESSED: u8 = 3;

/// A Say call in `encoding`, its request the COMPRESSED frame `request`;
/// the frames the server answers with.
async fn say_compressed(conn: &weft::mux::Connection, encoding: &str, request: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let header = wire::CallHeader {
        method: "weft.examples.Echo/Say".into(),
        encoding: encoding.into(),
        ..Default::default()
    };
    let mut call = rpc_frame(HEADER, &header.encode_to_vec());
    call.extend(rpc_frame(COMPRESSED, request));
    let mut stream = conn.open().await.unwrap();
    // The server may stop reading once it has refused: the write's error
    // is not the test's concern, the answer is.
    let _ = stream.write_all(&call).await;
    let _ = stream.shutdown().await;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    let mut frames = Vec::new();
    let mut bytes = &reply[..];
    while let Some((&kind, mut rest)) = bytes.split_first() {
        let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
        frames.push((kind, rest[..len].to_vec()));
        bytes = &rest[len..];
    }
    frames
}

fn status_of(frames: &[(u8, Vec<u8>)]) -> wire::Status {
    let (_, status) = frames.iter().find(|(kind, _)| *kind == STATUS).expect("a status");
    wire::Status::decode(&status[..]).unwrap()
}

#[tokio::test]
async fn a_request_in_an_encoding_the_server_does_not_read_is_refused_unrun_saying_what_it_reads() {
    let server = serve(Server::builder().accept_compressed(Encoding::Gzip)).await;
    let conn = raw_connection(&server).await;
    let request = zstd::bulk::compress(&say("x", compressible("y", 4096)).encode_to_vec(), 3).unwrap();
    for named in ["zstd", "br"] {
        let frames = say_compressed(&conn, named, &request).await;
        let (kind, header) = &frames[0];
        assert_eq!(*kind, HEADER, "{frames:?}");
        let header = wire::ReplyHeader::decode(&header[..]).unwrap();
        assert_eq!(header.accept_encoding, vec!["gzip".to_owned()]);
        let status = status_of(&frames);
        assert_eq!(status.code, Code::Unimplemented as u32, "{status:?}");
        assert!(status.not_run, "{status:?}");
        assert!(
            status.message.contains(&format!("`{named}`")),
            "{}",
            status.message
        );
        assert!(status.message.contains("reads: gzip"), "{}", status.message);
    }
    assert_eq!(server.echo.ran.load(Ordering::Relaxed), 0, "no handler ran");
    // The same request in gzip is read.
    let request = compress_gzip(&say("x", compressible("y", 4096)).encode_to_vec());
    let frames = say_compressed(&conn, "gzip", &request).await;
    assert_eq!(status_of(&frames).code, 0, "{frames:?}");
}

fn compress_gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// 16 MiB of zeros as a request, compressed: some KiB. Three ways: gzip;
/// zstd saying its size in its header; zstd not saying it, with a window
/// the 1 MiB limit allows (cut off as it decompresses, as gzip is).
fn bombs() -> [(Encoding, Vec<u8>); 3] {
    let message = say("", vec![0; 16 << 20]).encode_to_vec();
    let mut unsized_zstd = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
    unsized_zstd.include_contentsize(false).unwrap();
    unsized_zstd.window_log(20).unwrap();
    unsized_zstd.write_all(&message).unwrap();
    [
        (Encoding::Gzip, compress_gzip(&message)),
        (Encoding::Zstd, zstd::bulk::compress(&message, 19).unwrap()),
        (Encoding::Zstd, unsized_zstd.finish().unwrap()),
    ]
}

#[tokio::test]
async fn a_compression_bomb_is_refused_with_resource_exhausted_before_its_bytes_are_held() {
    for (encoding, bomb) in bombs() {
        let server = serve(
            Server::builder()
                .accept_compressed(encoding)
                .max_message_size(1 << 20),
        )
        .await;
        let conn = raw_connection(&server).await;
        assert!(
            bomb.len() < 64 * 1024,
            "{encoding:?}: a bomb of {} bytes",
            bomb.len()
        );
        support::reset_largest();
        let frames = say_compressed(&conn, encoding.name(), &bomb).await;
        let largest = support::largest();
        let status = status_of(&frames);
        assert_eq!(
            status.code,
            Code::ResourceExhausted as u32,
            "{encoding:?}: {status:?}"
        );
        assert!(
            status.message.contains("past the limit of 1048576 bytes"),
            "{}",
            status.message
        );
        assert_eq!(server.echo.ran.load(Ordering::Relaxed), 0, "no handler ran");
        // 16 MiB would have been held; at most the limit (1 MiB) and a
        // byte is. (zstd's window, also at most the limit, is libzstd's
        // own malloc, not counted here.)
        assert!(
            largest <= (1 << 20) + 1,
            "{encoding:?}: an allocation of {largest} bytes"
        );
        // The connection serves the next call.
        let request = say("after", compressible("z", 2048)).encode_to_vec();
        let request = match encoding {
            Encoding::Gzip => compress_gzip(&request),
            _ => zstd::bulk::compress(&request, 3).unwrap(),
        };
        let frames = say_compressed(&conn, encoding.name(), &request).await;
        assert_eq!(status_of(&frames).code, 0, "{encoding:?}: {frames:?}");
    }
}
