//! Per-call message compression (docs/PROTOCOL.md, section 16.5): which
//! encodings a side sends and reads, what each call agreed, and the
//! codecs, sans-IO (bytes in, bytes out).
//!
//! Each side says in its header what it reads (`accept_encoding`) and what
//! its COMPRESSED frames are in (`encoding`). A server compresses replies
//! only in an encoding the call's header accepts; a client compresses
//! requests only in one its server's reply headers have said it reads, so
//! a call never depends on the peer having what this side has. A
//! compressed message is bounded by the message size limit twice: on the
//! wire, and as it is decompressed, before the bytes past the limit are
//! held.

use std::sync::{
    atomic::{AtomicU8, Ordering},
    Arc,
};

use bytes::{Bytes, BytesMut};

use super::{
    wire::{frame_len, put_frame, Kind},
    Status,
};

/// A message compression algorithm for weft RPC (features `gzip` and
/// `zstd`), as gRPC names it in `grpc-encoding`.
///
/// With neither feature on, it has no variants: nothing compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// gzip (RFC 1952) at flate2's default level, 6.
    #[cfg(feature = "gzip")]
    Gzip,
    /// Zstandard (RFC 8878) at zstd's default level, 3.
    #[cfg(feature = "zstd")]
    Zstd,
}

impl Encoding {
    /// Every encoding this build has.
    const ALL: &'static [Encoding] = &[
        #[cfg(feature = "gzip")]
        Encoding::Gzip,
        #[cfg(feature = "zstd")]
        Encoding::Zstd,
    ];

    /// Its name on the wire: `"gzip"`, `"zstd"`.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "gzip")]
            Encoding::Gzip => "gzip",
            #[cfg(feature = "zstd")]
            Encoding::Zstd => "zstd",
        }
    }

    /// The encoding called `name` on the wire, if this build has it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|e| e.name() == name)
    }

    fn bit(self) -> u8 {
        1 << Self::ALL.iter().position(|e| *e == self).unwrap_or_default()
    }
}

/// A set of encodings, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Encodings(u8);

impl Encodings {
    pub(crate) fn with(self, encoding: Encoding) -> Self {
        Self(self.0 | encoding.bit())
    }

    pub(crate) fn contains(self, encoding: Encoding) -> bool {
        self.0 & encoding.bit() != 0
    }

    /// Their names, for a header.
    pub(crate) fn names(self) -> Vec<String> {
        Encoding::ALL
            .iter()
            .filter(|e| self.contains(**e))
            .map(|e| e.name().to_owned())
            .collect()
    }

    /// The ones among `names` this build has (unknown names ignored).
    pub(crate) fn from_names(names: &[String]) -> Self {
        names
            .iter()
            .filter_map(|name| Encoding::from_name(name))
            .fold(Self::default(), Self::with)
    }
}

/// The smallest message compressed by default: 1 KiB. Below it, the
/// codec's own header and its time cost more than they save.
pub(crate) const DEFAULT_THRESHOLD: usize = 1024;

/// A side's compression settings: what it sends in, what it reads, and
/// the smallest message it compresses. Off by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compression {
    pub(crate) send: Option<Encoding>,
    pub(crate) accept: Encodings,
    pub(crate) threshold: usize,
}

impl Default for Compression {
    fn default() -> Self {
        Self {
            send: None,
            accept: Encodings::default(),
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

impl Compression {
    /// How this side's messages go when the peer reads `peer_reads`.
    pub(crate) fn compressor(&self, peer_reads: Encodings) -> Option<Compressor> {
        self.send
            .filter(|e| peer_reads.contains(*e))
            .map(|encoding| Compressor {
                encoding,
                threshold: self.threshold,
            })
    }

    /// The encoding a peer's header names, checked against what this side
    /// reads: `None` for none; an error naming both otherwise.
    pub(crate) fn incoming(&self, named: &str) -> Result<Option<Encoding>, String> {
        if named.is_empty() {
            return Ok(None);
        }
        match Encoding::from_name(named).filter(|e| self.accept.contains(*e)) {
            Some(encoding) => Ok(Some(encoding)),
            None => {
                let reads = self.accept.names();
                Err(format!(
                    "messages compressed with `{named}`, which this side does not read (it reads: {})",
                    if reads.is_empty() {
                        "none".to_owned()
                    } else {
                        reads.join(", ")
                    }
                ))
            }
        }
    }
}

/// What a client has learned of its server's encodings, from the last
/// reply header: shared by a client's clones, replaced by each header (a
/// server that stops reading an encoding is heard at its next reply).
#[derive(Debug, Default, Clone)]
pub(crate) struct Learned(Arc<AtomicU8>);

impl Learned {
    pub(crate) fn get(&self) -> Encodings {
        Encodings(self.0.load(Ordering::Relaxed))
    }

    pub(crate) fn set(&self, reads: Encodings) {
        self.0.store(reads.0, Ordering::Relaxed);
    }
}

/// A client's compression: its settings, and what it has learned of its
/// server. Clones share what they learn.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClientCompression {
    pub(crate) config: Compression,
    learned: Learned,
}

impl ClientCompression {
    /// How the next call's requests go: compressed only in an encoding
    /// the server has said it reads.
    pub(crate) fn compressor(&self) -> Option<Compressor> {
        self.config.compressor(self.learned.get())
    }

    /// Learns from a reply header what the server reads, and returns the
    /// encoding of its replies (an error if this client does not read
    /// it: it never offered it).
    pub(crate) fn reply_header(
        &self,
        encoding: &str,
        server_reads: &[String],
    ) -> Result<Option<Encoding>, Status> {
        self.learned.set(Encodings::from_names(server_reads));
        self.config
            .incoming(encoding)
            .map_err(|why| Status::internal(format!("the server sent {why}")))
    }
}

/// One direction of one call: messages of at least `threshold` bytes go
/// compressed with `encoding` (unless compressing does not shrink them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compressor {
    pub(crate) encoding: Encoding,
    threshold: usize,
}

impl Compressor {
    /// Appends `message` as a frame: COMPRESSED when that is smaller,
    /// MESSAGE otherwise.
    pub(crate) fn put_frame(&self, dst: &mut BytesMut, message: &[u8]) {
        match self.compress(message) {
            Some(compressed) => put_frame(dst, Kind::Compressed, &compressed),
            None => put_frame(dst, Kind::Message, message),
        }
    }

    /// The MESSAGE frame `dst` holds from `start` on (just appended),
    /// compressed in place when that is smaller.
    pub(crate) fn compress_tail(&self, dst: &mut BytesMut, start: usize) {
        let head = message_head_len(&dst[start..]);
        if let Some(compressed) = self.compress(&dst[start + head..]) {
            dst.truncate(start);
            put_frame(dst, Kind::Compressed, &compressed);
        }
    }

    /// A framed MESSAGE, compressed when that is smaller.
    pub(crate) fn frame(&self, frame: Bytes) -> Bytes {
        let head = message_head_len(&frame);
        match self.compress(&frame[head..]) {
            Some(compressed) => {
                let mut dst = BytesMut::with_capacity(frame_len(compressed.len()));
                put_frame(&mut dst, Kind::Compressed, &compressed);
                dst.freeze()
            }
            None => frame,
        }
    }

    /// `message` compressed, if it is long enough and shrinks.
    fn compress(&self, message: &[u8]) -> Option<Vec<u8>> {
        if message.len() < self.threshold {
            return None;
        }
        compress(self.encoding, message).filter(|c| c.len() < message.len())
    }
}

/// The length of the head (kind and length varint) of a MESSAGE frame this
/// side encoded.
fn message_head_len(frame: &[u8]) -> usize {
    1 + frame[1..]
        .iter()
        .position(|b| b & 0x80 == 0)
        .map_or(0, |last| last + 1)
}

/// `data` compressed with `encoding`; `None` if the codec failed (it does
/// not, writing to memory).
#[cfg_attr(not(any(feature = "gzip", feature = "zstd")), allow(unused_variables))]
fn compress(encoding: Encoding, data: &[u8]) -> Option<Vec<u8>> {
    match encoding {
        #[cfg(feature = "gzip")]
        Encoding::Gzip => {
            use std::io::Write;
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2),
                flate2::Compression::default(),
            );
            encoder.write_all(data).ok()?;
            encoder.finish().ok()
        }
        #[cfg(feature = "zstd")]
        Encoding::Zstd => zstd::bulk::compress(data, zstd::DEFAULT_COMPRESSION_LEVEL).ok(),
    }
}

/// `data` decompressed with `encoding`, refused with `RESOURCE_EXHAUSTED`
/// as soon as it passes `limit` bytes: no more than `limit + 1` bytes of
/// it are ever held. A gzip message is one member and a zstd message one
/// frame, with nothing after it; a zstd frame whose header claims more
/// than the limit, or a window past it, is refused on its header, and
/// the decoder's window is held to the limit. Its cost is bounded both
/// ways: at most `limit` compressed bytes read (the frame's own limit),
/// at most `limit + 1` written.
pub(crate) fn decompress(encoding: Encoding, data: &[u8], limit: usize) -> Result<Bytes, Status> {
    #[cfg_attr(not(any(feature = "gzip", feature = "zstd")), allow(unused_variables))]
    let bounded = |reader: &mut dyn std::io::Read| {
        read_bounded(reader, limit, data.len()).map_err(|err| match err {
            Bounded::Over => Status::resource_exhausted(format!(
                "a message compressed with {} decompresses past the limit of {limit} bytes",
                encoding.name()
            )),
            Bounded::Io(err) => undecodable(encoding, err),
        })
    };
    match encoding {
        #[cfg(feature = "gzip")]
        Encoding::Gzip => {
            // Over the bytes themselves (a `BufRead`), so that what the
            // member leaves is exactly what follows it.
            let mut decoder = flate2::bufread::GzDecoder::new(data);
            let message = bounded(&mut decoder)?;
            let after = decoder.into_inner().len();
            if after > 0 {
                return Err(Status::internal(format!(
                    "a message compressed with gzip is one member: {after} bytes follow it"
                )));
            }
            Ok(message)
        }
        #[cfg(feature = "zstd")]
        Encoding::Zstd => {
            let window_log = zstd_window_log(limit);
            check_zstd_frame(data, limit, window_log)?;
            let undecodable = |err| undecodable(encoding, err);
            let mut decoder = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(undecodable)?
                .single_frame();
            decoder.window_log_max(window_log).map_err(undecodable)?;
            bounded(&mut decoder)
        }
    }
}

/// A codec's failure, as the call's status.
fn undecodable(encoding: Encoding, err: std::io::Error) -> Status {
    Status::internal(format!(
        "a message compressed with {} did not decompress: {err}",
        encoding.name()
    ))
}

/// The largest zstd window a message of at most `limit` bytes may ask
/// for, as a power of two: the limit rounded up (at least 1 KiB), within
/// what zstd decodes on this target.
#[cfg(feature = "zstd")]
fn zstd_window_log(limit: usize) -> u32 {
    let most = if cfg!(target_pointer_width = "64") { 31 } else { 30 };
    limit
        .max(1 << 10)
        .checked_next_power_of_two()
        .map_or(most, |window| window.trailing_zeros())
        .clamp(10, most)
}

/// A zstd message is one frame, not skippable, and its header fits the
/// limit: the content size it claims, if any, and its window.
#[cfg(feature = "zstd")]
fn check_zstd_frame(data: &[u8], limit: usize, window_log: u32) -> Result<(), Status> {
    use zstd::zstd_safe::{self, FrameHeaderStatus, FrameType};
    let malformed = |what: &str| Status::internal(format!("a message compressed with zstd {what}"));
    let frame = zstd_safe::find_frame_compressed_size(data).map_err(|code| {
        malformed(&format!(
            "is not a zstd frame: {}",
            zstd_safe::get_error_name(code)
        ))
    })?;
    if frame != data.len() {
        return Err(malformed(&format!(
            "is one frame: {} bytes follow it",
            data.len() - frame
        )));
    }
    let header = match zstd_safe::get_frame_header(data) {
        Ok(FrameHeaderStatus::Complete(header)) => header,
        _ => return Err(malformed("has no whole frame header")),
    };
    if header.frameType == FrameType::ZSTD_skippableFrame {
        return Err(malformed("is a skippable frame, which holds no message"));
    }
    // (u64::MAX and u64::MAX - 1: no size given, or an error.)
    let declared = header.frameContentSize;
    let says_more = declared < u64::MAX - 1 && declared > limit as u64;
    if says_more || header.windowSize > 1 << window_log {
        return Err(Status::resource_exhausted(format!(
            "a message compressed with zstd says it needs {} bytes (and a window of {}), past the limit of {limit} bytes",
            if declared < u64::MAX - 1 { declared.to_string() } else { "unknown".to_owned() },
            header.windowSize
        )));
    }
    Ok(())
}

enum Bounded {
    Over,
    Io(std::io::Error),
}

/// Reads `reader` to its end into a buffer that never grows past
/// `limit + 1` bytes (it doubles, from four times the compressed size, up
/// to that): `Over` once it would hold more than `limit`.
fn read_bounded(reader: &mut dyn std::io::Read, limit: usize, hint: usize) -> Result<Bytes, Bounded> {
    let cap = limit.saturating_add(1);
    let mut out = vec![0u8; hint.saturating_mul(4).max(256).min(cap)];
    let mut filled = 0;
    loop {
        if filled == out.len() {
            if filled >= cap {
                return Err(Bounded::Over);
            }
            let grow = out.len().min(cap - out.len());
            out.reserve_exact(grow);
            out.resize(out.len() + grow, 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => {
                out.truncate(filled);
                return Ok(Bytes::from(out));
            }
            Ok(n) => {
                filled += n;
                if filled > limit {
                    return Err(Bounded::Over);
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(Bounded::Io(err)),
        }
    }
}

#[cfg(test)]
#[path = "compression/tests.rs"]
mod tests;
