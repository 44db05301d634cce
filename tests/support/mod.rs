//! Shared test helpers: stacks, and a man in the middle that edits traffic.
#![allow(dead_code)]

pub mod counted;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::{Arc, Mutex},
};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Versions},
    stack::{Encrypt, Multiplex, Negotiate, RecordSize},
    transport::ExistingTransport,
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer,
};

/// Whether `err` is of `kind` and its text holds `text`: an error's
/// variant, told through the public API.
pub fn is_error(err: &weft::Error, kind: weft::ErrorKind, text: &str) -> bool {
    err.kind() == kind && err.to_string().contains(text)
}

/// Whether `result` failed with an error of `kind` whose text holds `text`.
pub fn failed_with<T>(result: &Result<T, weft::Error>, kind: weft::ErrorKind, text: &str) -> bool {
    result.as_ref().is_err_and(|err| is_error(err, kind, text))
}

/// Whether `err` is a close that arrived in the clear during the handshake
/// (of kind `Closed`, but not a close record).
pub fn is_unauthenticated_close(err: &weft::Error) -> bool {
    is_error(
        err,
        weft::ErrorKind::Closed,
        "unauthenticated close during the handshake",
    )
}

/// A frame's kind byte (docs/PROTOCOL.md, section 3), for frames made
/// and read by hand: weft's own frame codec is not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    Setup = 0x01,
    Auth = 0x02,
    Data = 0x03,
    Close = 0x04,
    KeyUpdate = 0x05,
}

impl FrameKind {
    /// The kind `byte` names, or the byte back if it names none.
    pub fn from_u8(byte: u8) -> Result<Self, u8> {
        Ok(match byte {
            0x01 => FrameKind::Setup,
            0x02 => FrameKind::Auth,
            0x03 => FrameKind::Data,
            0x04 => FrameKind::Close,
            0x05 => FrameKind::KeyUpdate,
            other => return Err(other),
        })
    }

    /// The 4-byte header of a frame of this kind with a `len`-byte payload:
    /// the kind byte, then the length in 24 bits, big-endian.
    pub fn header(self, len: usize) -> [u8; 4] {
        assert!(len < 1 << 24, "a frame payload of {len} bytes");
        let len = (len as u32).to_be_bytes();
        [self as u8, len[1], len[2], len[3]]
    }
}

/// The protocol's protobuf messages (proto/weft/v1), for peers made by
/// hand: the code weft's build script generated from the same files.
/// A call's frame on the wire (docs/PROTOCOL.md, section 16.1), made by
/// hand: its kind, its length's varint, its payload.
pub fn rpc_frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![kind];
    prost::encoding::encode_varint(payload.len() as u64, &mut frame);
    frame.extend_from_slice(payload);
    frame
}

pub mod wire {
    #![allow(dead_code, clippy::all)]
    include!(concat!(env!("OUT_DIR"), "/weft.v1.rs"));
}

pub type Stack = RecordSize<Encrypt<Negotiate<ExistingTransport>>>;

/// weft's multiplexed stack around `transport` (a connector, an acceptor,
/// or a transport given per call) as `identity`, speaking `protocols`.
pub type MuxStack<T> = Multiplex<Encrypt<Negotiate<T>>>;

/// The multiplexed stack with the defaults, the one most tests dial and
/// accept with.
pub fn mux_stack<T>(identity: Identity, protocols: &[&str], transport: T) -> MuxStack<T> {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(weft::mux::Builder::new()))
        .layer(EncryptLayer::new(identity))
        .layer(NegotiateLayer::new(Versions::CURRENT).protocols(protocols.iter().copied()))
        .service(transport)
}

/// The full stack over any transport, with these suites in this order.
pub fn stack(identity: Identity, suites: &[CipherSuite]) -> Stack {
    stack_with(identity, suites, RecordSizeLayer::dynamic(), Versions::CURRENT)
}

pub fn stack_with(
    identity: Identity,
    suites: &[CipherSuite],
    records: RecordSizeLayer,
    versions: Versions,
) -> Stack {
    ServiceBuilder::new()
        .layer(records)
        .layer(EncryptLayer::new(identity).suites(suites.iter().copied()))
        .layer(NegotiateLayer::new(versions))
        .service(ExistingTransport::new())
}

pub fn ident(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

/// Every encrypting suite, and plaintext.
pub const SUITES: [CipherSuite; 5] = [
    CipherSuite::Aes256Gcm,
    CipherSuite::ChaCha20Poly1305,
    CipherSuite::XSalsa20Poly1305,
    CipherSuite::XChaCha20Poly1305,
    CipherSuite::Plaintext,
];

/// Copies `from` to `to`, XOR-ing the byte at `offset` of the stream with
/// `mask`.
pub async fn copy_flipping<R, W>(mut from: R, mut to: W, offset: usize, mask: u8)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut seen = 0usize;
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if (seen..seen + n).contains(&offset) {
            buf[offset - seen] ^= mask;
        }
        seen += n;
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// What the frame editor says to do with the traffic from here on.
pub enum Edit {
    /// Send these raw frames (header and payload each).
    Send(Vec<Vec<u8>>),
    /// End the connection in this direction, without a close record.
    Cut,
}

/// Copies frames from `from` to `to`, letting `edit` see each raw frame
/// (with its index in this direction) and decide what to forward.
pub async fn copy_frames<R, W>(mut from: R, mut to: W, mut edit: impl FnMut(usize, Vec<u8>) -> Edit)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut index = 0;
    // A frame: a kind byte, a 24-bit length, the payload (docs/PROTOCOL.md).
    let mut header = [0u8; 4];
    while from.read_exact(&mut header).await.is_ok() {
        let len = u32::from_be_bytes([0, header[1], header[2], header[3]]) as usize;
        let mut raw = header.to_vec();
        raw.resize(4 + len, 0);
        if from.read_exact(&mut raw[4..]).await.is_err() {
            break;
        }
        match edit(index, raw) {
            Edit::Send(out) => {
                for raw in out {
                    if to.write_all(&raw).await.is_err() {
                        return;
                    }
                }
            }
            Edit::Cut => break,
        }
        index += 1;
    }
    let _ = to.shutdown().await;
}

/// A dialer end, an acceptor end, and a middle that forwards between them:
/// `d2a` edits what the dialer sends, `a2d` what the acceptor sends.
pub fn middle(
    d2a: impl FnMut(usize, Vec<u8>) -> Edit + Send + 'static,
    a2d: impl FnMut(usize, Vec<u8>) -> Edit + Send + 'static,
) -> (DuplexStream, DuplexStream) {
    let (dialer, dialer_far) = tokio::io::duplex(1 << 20);
    let (acceptor, acceptor_far) = tokio::io::duplex(1 << 20);
    let (dr, dw) = tokio::io::split(dialer_far);
    let (ar, aw) = tokio::io::split(acceptor_far);
    tokio::spawn(copy_frames(dr, aw, d2a));
    tokio::spawn(copy_frames(ar, dw, a2d));
    (dialer, acceptor)
}

pub fn forward(_: usize, raw: Vec<u8>) -> Edit {
    Edit::Send(vec![raw])
}

/// A frame editor that records (kind, payload length) of each frame.
pub fn tap(log: Arc<Mutex<Vec<(FrameKind, usize)>>>) -> impl FnMut(usize, Vec<u8>) -> Edit {
    move |_, raw| {
        let kind = FrameKind::from_u8(raw[0]).unwrap();
        log.lock().unwrap().push((kind, raw.len() - 4));
        Edit::Send(vec![raw])
    }
}

pub fn raw_frame(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
    let mut raw = BytesMut::new();
    raw.extend_from_slice(&kind.header(payload.len()));
    raw.extend_from_slice(payload);
    raw.to_vec()
}

/// Runs both handshakes at once with owned stacks.
pub async fn connect<IO>(
    mut dialer: Stack,
    mut acceptor: Stack,
    dialer_io: IO,
    acceptor_io: IO,
) -> (
    Result<weft::Channel<IO>, weft::Error>,
    Result<weft::Channel<IO>, weft::Error>,
)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use weft::handshake::HandshakeExt;
    tokio::join!(dialer.dial(dialer_io), acceptor.accept_transport(acceptor_io))
}

/// AES-256-GCM's suite id on the wire (PROTOCOL.md, section 4).
pub const AES_256_GCM_ID: u32 = 3;

/// A raw Setup frame for version 1 offering only AES-256-GCM, with this
/// ephemeral key: what a hand-made peer sends first.
pub fn aes_setup_frame(ephemeral_key: &[u8]) -> Vec<u8> {
    let setup = wire::Setup {
        min_version: 1,
        max_version: 1,
        ephemeral_key: ephemeral_key.to_vec(),
        suites: vec![AES_256_GCM_ID],
        ..Default::default()
    };
    raw_frame(FrameKind::Setup, &prost::Message::encode_to_vec(&setup))
}

/// Two channels with the full stack and one suite, over a duplex.
pub async fn duplex_pair(suite: CipherSuite) -> (weft::Channel<DuplexStream>, weft::Channel<DuplexStream>) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let (d, acc) = connect(stack(ident(1), &[suite]), stack(ident(2), &[suite]), a, b).await;
    (d.unwrap(), acc.unwrap())
}

/// The whole stack over an existing transport, with one suite: its product
/// is a `weft::mux::Connection`.
pub type ConnStack = weft::stack::Multiplex<weft::stack::StreamLimit<Stack>>;

pub fn conn_stack(
    identity: Identity,
    suite: CipherSuite,
    limit: weft::StreamLimitLayer,
    builder: weft::mux::Builder,
) -> ConnStack {
    ServiceBuilder::new()
        .layer(weft::MultiplexLayer::new(builder))
        .layer(limit)
        .service(stack(identity, &[suite]))
}

/// A dialer and an acceptor connection over `a` and `b`, identities 1 and
/// 2, with these limits and settings for each side.
pub async fn conn_pair_over<IO>(
    a: IO,
    b: IO,
    suite: CipherSuite,
    limits: (weft::StreamLimitLayer, weft::StreamLimitLayer),
    builders: (weft::mux::Builder, weft::mux::Builder),
) -> (weft::mux::Connection, weft::mux::Connection)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use weft::handshake::HandshakeExt;
    let mut dialer = conn_stack(ident(1), suite, limits.0, builders.0);
    let mut acceptor = conn_stack(ident(2), suite, limits.1, builders.1);
    let (d, acc) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    (d.unwrap(), acc.unwrap())
}

/// The same over a `tokio::io::duplex` pipe.
pub async fn conn_pair_duplex(
    suite: CipherSuite,
    limits: (weft::StreamLimitLayer, weft::StreamLimitLayer),
    builders: (weft::mux::Builder, weft::mux::Builder),
) -> (weft::mux::Connection, weft::mux::Connection) {
    let (a, b) = tokio::io::duplex(1 << 16);
    conn_pair_over(a, b, suite, limits, builders).await
}

/// A connected pair of loopback TCP streams, Nagle off on both.
pub async fn tcp_streams() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (a, b) = tokio::join!(tokio::net::TcpStream::connect(addr), async {
        listener.accept().await.unwrap().0
    });
    let a = a.unwrap();
    a.set_nodelay(true).unwrap();
    b.set_nodelay(true).unwrap();
    (a, b)
}

/// A hand-made peer: a channel (no multiplexer) as the dialer, against a
/// whole stack with `limit` as the acceptor. The test writes raw mux
/// frames through the channel and watches what the connection does.
pub async fn raw_peer_against(
    suite: CipherSuite,
    limit: weft::StreamLimitLayer,
) -> (weft::Channel<DuplexStream>, weft::mux::Connection) {
    raw_peer_against_with(suite, limit, weft::mux::Builder::new()).await
}

/// [`raw_peer_against`], the victim's connection built by `builder`.
pub async fn raw_peer_against_with(
    suite: CipherSuite,
    limit: weft::StreamLimitLayer,
    builder: weft::mux::Builder,
) -> (weft::Channel<DuplexStream>, weft::mux::Connection) {
    use weft::handshake::HandshakeExt;
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut dialer = stack(ident(1), &[suite]);
    let mut acceptor = conn_stack(ident(2), suite, limit, builder);
    let (d, acc) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    (d.unwrap(), acc.unwrap())
}

/// A raw mux frame: kind, flags, stream, length, payload.
pub fn mux_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// Accepts streams forever, echoing each to its end.
pub fn echo_server(server: weft::mux::Connection) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok(Some(mut stream)) = server.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; 64 * 1024];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) => break,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                        Err(_) => return,
                    }
                }
                let _ = stream.shutdown().await;
            });
        }
    })
}

/// Opens a stream, sends `message`, finishes, and reads the reply to its end.
/// Reads `stream` to its end in 1 MiB reads, as a bulk receiver would:
/// how many bytes came.
pub async fn read_counting(mut stream: weft::mux::Stream) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        total += n;
    }
}

pub async fn echo_once(client: &weft::mux::Connection, message: &[u8]) -> Vec<u8> {
    let mut stream = client.open().await.unwrap();
    stream.write_all(message).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut back = Vec::new();
    stream.read_to_end(&mut back).await.unwrap();
    back
}

/// A global allocator that counts the heap each thread holds, and the
/// largest single allocation it made: a test binary installs it
/// (`#[global_allocator] static GLOBAL: ThreadHeap = ThreadHeap;`), and a
/// test on a current-thread runtime reads what its connections retain with
/// [`live`] (and the largest allocation since [`reset_largest`] with
/// [`largest`]), whatever other tests do.
pub struct ThreadHeap;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count(delta: isize, size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get() + delta));
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

unsafe impl GlobalAlloc for ThreadHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize, layout.size());
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize), 0);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize, new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// Allocations this thread has made (reallocations not counted), as
/// [`ThreadHeap`] counts them.
pub fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Bytes of heap this thread holds, as [`ThreadHeap`] counts them.
pub fn live() -> isize {
    LIVE.with(Cell::get)
}

/// The largest single allocation this thread made since [`reset_largest`].
pub fn largest() -> usize {
    LARGEST.with(Cell::get)
}

/// Starts [`largest`] afresh.
pub fn reset_largest() {
    LARGEST.with(|largest| largest.set(0));
}
