use std::{
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

use super::{stage::Sealed, Handshake, Negotiated};
use crate::{
    error::Error,
    record::{Channel, RecordConfig, RecordPolicy, MAX_RECORD_SIZE, MIN_RECORD_SIZE, READ_CHUNK_MAX},
};

/// How long a connection must be quiet before dynamic records start small
/// again (Go's choice).
pub(crate) const DEFAULT_IDLE_RESET: Duration = Duration::from_secs(1);

/// Sets how records are sized, declares in Setup the largest record we
/// accept, and bounds the channel's read buffer.
///
/// Without this layer a channel sends fixed records of the agreed maximum
/// and accepts records up to 16 KiB.
///
/// ```
/// use weft::RecordSizeLayer;
///
/// let dynamic = RecordSizeLayer::dynamic().max_record_size(64 * 1024);
/// // Many connections, little memory each: 64 KiB read buffers at most.
/// let fixed = RecordSizeLayer::fixed(16 * 1024).max_read_buffer(64 * 1024);
/// # let _ = (dynamic, fixed);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RecordSizeLayer {
    config: RecordConfig,
}

impl RecordSizeLayer {
    /// Dynamic records up to 64 KiB, as Go's crypto/tls sizes them: small
    /// records (one TCP segment) first and after an idle period
    /// ([`idle_reset`](Self::idle_reset)), growing to the maximum once
    /// 128 KiB have gone out.
    ///
    /// Records start at one segment, so the first bytes of a response are
    /// opened as soon as they arrive; bulk transfers grow to 64 KiB records,
    /// measured about 6% faster here than 16 KiB ones (BENCHMARKS.md).
    pub fn dynamic() -> Self {
        Self {
            config: RecordConfig {
                policy: RecordPolicy::Dynamic,
                max: MAX_RECORD_SIZE,
                idle_reset: DEFAULT_IDLE_RESET,
                max_read_buffer: READ_CHUNK_MAX,
            },
        }
    }

    /// Records of `size` bytes (clamped to 512 B..=64 KiB), which is also
    /// the largest we accept.
    pub fn fixed(size: usize) -> Self {
        let size = size.clamp(MIN_RECORD_SIZE, MAX_RECORD_SIZE);
        Self {
            config: RecordConfig {
                policy: RecordPolicy::Fixed(size),
                max: size,
                idle_reset: DEFAULT_IDLE_RESET,
                max_read_buffer: READ_CHUNK_MAX,
            },
        }
    }

    /// The largest record we send and accept (clamped to 512 B..=64 KiB).
    pub fn max_record_size(mut self, max: usize) -> Self {
        self.config.max = max.clamp(MIN_RECORD_SIZE, MAX_RECORD_SIZE);
        if let RecordPolicy::Fixed(size) = &mut self.config.policy {
            *size = self.config.max;
        }
        self
    }

    /// How long a dynamic channel must be idle before records are small
    /// again (default 1 s).
    pub fn idle_reset(mut self, idle: Duration) -> Self {
        self.config.idle_reset = idle;
        self
    }

    /// The largest read allocation once the peer is authenticated
    /// (default 128 KiB; clamped to 16 KiB..=8 MiB).
    ///
    /// The read buffer doubles while reads fill it, so several records
    /// come in per system call; a channel keeps the current buffer and up
    /// to three spares while its reader falls behind, each at most `max`
    /// and the record it completes (`4 × (max + 64 KiB)` in all). When it
    /// catches up, a reader of bulk data keeps them; one exchanging
    /// messages lets them go. Smaller buffers cost a copy of each record
    /// cut at a buffer's end, and more system calls.
    pub fn max_read_buffer(mut self, max: usize) -> Self {
        self.config.max_read_buffer = max;
        self
    }
}

impl<S> Layer<S> for RecordSizeLayer {
    type Service = RecordSize<S>;

    fn layer(&self, inner: S) -> RecordSize<S> {
        RecordSize {
            inner,
            config: self.config,
        }
    }
}

/// The service [`RecordSizeLayer`] builds.
#[derive(Debug, Clone)]
pub struct RecordSize<S> {
    inner: S,
    config: RecordConfig,
}

impl<S> RecordSize<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// What a [`RecordSizeLayer`] takes from the layer below it: a
/// [`Negotiated`] channel (from a [`NegotiateLayer`](crate::NegotiateLayer))
/// or an encrypted [`Channel`] (from an [`EncryptLayer`](crate::EncryptLayer)).
/// Sealed: the stack's layers produce these. The layer only describes
/// the records it wants, on the way down; the handshake beneath makes the
/// channel with them.
#[diagnostic::on_unimplemented(
    message = "`RecordSizeLayer` cannot size the records of `{Self}`",
    label = "the layer below `RecordSizeLayer` makes this",
    note = "`RecordSizeLayer` goes above `EncryptLayer` (or `NegotiateLayer`) and below `StreamLimitLayer` and \
            `MultiplexLayer`: top to bottom, a stack reads Multiplex, StreamLimit, RecordSize, Encrypt, Negotiate, \
            then the connector"
)]
pub trait Sizable: Sealed + Send + 'static {}

impl<IO: Send + 'static> Sizable for Channel<IO> {}

impl<IO: Send + 'static> Sizable for Negotiated<IO> {}

impl<S, T> Service<Handshake<T>> for RecordSize<S>
where
    S: Service<Handshake<T>, Error = Error>,
    S::Response: Sizable,
{
    type Response = S::Response;
    type Error = Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    /// Adds the record sizes to the request: the handshake declares our
    /// largest record in Setup, and sizes the channel's records with them
    /// (no larger than the peer accepts).
    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        req.parts.records = Some(self.config);
        self.inner.call(req)
    }
}
