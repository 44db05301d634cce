use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

use super::{
    sealed::Sealed, Channel, RecordPolicy, RecordSizer, MAX_RECORD_SIZE, MIN_RECORD_SIZE, READ_CHUNK_MAX,
};
use crate::{error::Error, handshake::Handshake, setup::Negotiated};

/// How long a connection must be quiet before dynamic records start small
/// again (Go's choice).
pub(super) const DEFAULT_IDLE_RESET: Duration = Duration::from_secs(1);

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
    policy: RecordPolicy,
    max: usize,
    idle_reset: Duration,
    max_read_buffer: usize,
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
            policy: RecordPolicy::Dynamic,
            max: MAX_RECORD_SIZE,
            idle_reset: DEFAULT_IDLE_RESET,
            max_read_buffer: READ_CHUNK_MAX,
        }
    }

    /// Records of `size` bytes (clamped to 512 B..=64 KiB), which is also
    /// the largest we accept.
    pub fn fixed(size: usize) -> Self {
        let size = size.clamp(MIN_RECORD_SIZE, MAX_RECORD_SIZE);
        Self {
            policy: RecordPolicy::Fixed(size),
            max: size,
            idle_reset: DEFAULT_IDLE_RESET,
            max_read_buffer: READ_CHUNK_MAX,
        }
    }

    /// The largest record we send and accept (clamped to 512 B..=64 KiB).
    pub fn max_record_size(mut self, max: usize) -> Self {
        self.max = max.clamp(MIN_RECORD_SIZE, MAX_RECORD_SIZE);
        if let RecordPolicy::Fixed(size) = &mut self.policy {
            *size = self.max;
        }
        self
    }

    /// How long a dynamic channel must be idle before records are small
    /// again (default 1 s).
    pub fn idle_reset(mut self, idle: Duration) -> Self {
        self.idle_reset = idle;
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
        self.max_read_buffer = max;
        self
    }
}

impl<S> Layer<S> for RecordSizeLayer {
    type Service = RecordSize<S>;

    fn layer(&self, inner: S) -> RecordSize<S> {
        RecordSize { inner, config: *self }
    }
}

/// The service [`RecordSizeLayer`] builds.
#[derive(Debug, Clone)]
pub struct RecordSize<S> {
    inner: S,
    config: RecordSizeLayer,
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
/// Sealed: the stack's layers produce these.
#[diagnostic::on_unimplemented(
    message = "`RecordSizeLayer` cannot size the records of `{Self}`",
    label = "the layer below `RecordSizeLayer` makes this",
    note = "`RecordSizeLayer` goes above `EncryptLayer` (or `NegotiateLayer`) and below `StreamLimitLayer` and \
            `MultiplexLayer`: top to bottom, a stack reads Multiplex, StreamLimit, RecordSize, Encrypt, Negotiate, \
            then the connector"
)]
pub trait Sizable: Sealed + Send + 'static {
    #[doc(hidden)]
    type Io;
    #[doc(hidden)]
    fn channel_mut(&mut self) -> &mut Channel<Self::Io>;
}

impl<IO: Send + 'static> Sizable for Channel<IO> {
    type Io = IO;
    fn channel_mut(&mut self) -> &mut Channel<IO> {
        self
    }
}

impl<IO: Send + 'static> Sizable for Negotiated<IO> {
    type Io = IO;
    fn channel_mut(&mut self) -> &mut Channel<IO> {
        Negotiated::channel_mut(self)
    }
}

impl<S, T> Service<Handshake<T>> for RecordSize<S>
where
    S: Service<Handshake<T>, Error = Error>,
    S::Response: Sizable,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Handshake<T>) -> Self::Future {
        let config = self.config;
        req.offer_record_size(config.max as u32);
        let handshake = self.inner.call(req);
        Box::pin(async move {
            let mut stage = handshake.await?;
            let channel = stage.channel_mut();
            // We send no larger records than we accept, nor than the peer does.
            let max = channel.agreement().send_record_size().min(config.max);
            channel.set_sizer(RecordSizer::new(config.policy, max, config.idle_reset));
            channel.set_max_read_buffer(config.max_read_buffer);
            Ok(stage)
        })
    }
}
