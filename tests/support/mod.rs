//! Shared test helpers: stacks, and a man in the middle that edits traffic.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio_util::codec::FramedRead;
use tower::ServiceBuilder;
use weft::{
    crypto::Encrypt,
    frame::{FrameCodec, FrameKind, MAX_FRAME_PAYLOAD},
    handshake::Versions,
    record::RecordSize,
    setup::Negotiate,
    CipherSuite, EncryptLayer, ExistingTransport, Identity, NegotiateLayer, RecordSizeLayer,
};

pub type Stack = RecordSize<Encrypt<Negotiate<ExistingTransport>>>;

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
pub async fn copy_frames<R, W>(from: R, mut to: W, mut edit: impl FnMut(usize, Vec<u8>) -> Edit)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames = FramedRead::new(from, FrameCodec::new(MAX_FRAME_PAYLOAD));
    let mut index = 0;
    while let Some(Ok(frame)) = frames.next().await {
        let mut raw = frame.header.to_vec();
        raw.extend_from_slice(&frame.payload);
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
    use weft::HandshakeExt;
    tokio::join!(dialer.dial(dialer_io), acceptor.accept(acceptor_io))
}

/// A raw Setup frame for version 1 offering only AES-256-GCM, with this
/// ephemeral key: what a hand-made peer sends first.
pub fn aes_setup_frame(ephemeral_key: &[u8]) -> Vec<u8> {
    let setup = weft::proto::Setup {
        min_version: 1,
        max_version: 1,
        ephemeral_key: ephemeral_key.to_vec(),
        suites: vec![weft::CipherSuite::Aes256Gcm.id()],
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
