//! Trace context carried with a call: W3C Trace Context's `traceparent`
//! and `tracestate` in the call's metadata, so a server's span for a call
//! continues its caller's trace.
//!
//! - **The server** reads `traceparent` from each call, and runs the
//!   handler inside a `tracing` span `rpc` (level INFO) with the fields
//!   `rpc.method`, `trace_id`, `span_id` (the call's own, new) and
//!   `parent_id` (the caller's), and with the call's [`TraceContext`] in
//!   scope ([`TraceContext::current`]).
//! - **The client** adds the context in scope to each call it makes (in a
//!   handler, the call's: its span is the parent of the calls it makes),
//!   so a handler's calls to other services continue the trace with no
//!   code of its own. Code
//!   that starts a trace puts one in scope ([`TraceContext::new_root`],
//!   [`TraceContext::scope`]); a call whose metadata has a `traceparent`
//!   already keeps it.
//!
//! There is no OpenTelemetry dependency. To hand the context to
//! OpenTelemetry, a tower layer around the server's calls reads
//! [`TraceContext::current`] and sets the parent of `Span::current()` (the
//! call's span) with `tracing-opentelemetry`; around the client, a layer
//! sets `traceparent` on [`RawCall::metadata_mut`](super::client::RawCall::metadata_mut)
//! from the current OpenTelemetry context.

use std::{cell::Cell, fmt, future::Future};

use super::Metadata;

/// The metadata key of the trace's position (W3C Trace Context).
pub const TRACEPARENT: &str = "traceparent";
/// The metadata key of vendors' trace state (W3C Trace Context).
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` carried on (the W3C limit is 32 members; a
/// longer one is dropped, not cut).
const MAX_TRACESTATE: usize = 512;

tokio::task_local! {
    static CURRENT: TraceContext;
}

/// Where a call stands in a distributed trace: the trace's id, the id of
/// the span that made the call (or of the call's own span, on the server),
/// whether the trace is sampled, and vendors' `tracestate`.
#[derive(Clone, PartialEq, Eq)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    sampled: bool,
    state: Option<String>,
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

impl TraceContext {
    /// A new trace, sampled, with random ids.
    pub fn new_root() -> Self {
        Self {
            trace_id: random_id(),
            span_id: random_id(),
            sampled: true,
            state: None,
        }
    }

    /// A span of the same trace: a new span id, the rest kept.
    pub fn child(&self) -> Self {
        Self {
            span_id: random_id(),
            ..self.clone()
        }
    }

    /// The trace's id, 16 bytes (never all zero).
    pub fn trace_id(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The span's id, 8 bytes (never all zero).
    pub fn span_id(&self) -> [u8; 8] {
        self.span_id
    }

    /// Whether the trace is sampled (the `sampled` flag).
    pub fn is_sampled(&self) -> bool {
        self.sampled
    }

    /// Vendors' `tracestate`, carried on unread.
    pub fn state(&self) -> Option<&str> {
        self.state.as_deref()
    }

    /// The context in scope: the call a server's handler runs for, or
    /// what [`TraceContext::scope`] put there.
    pub fn current() -> Option<TraceContext> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Runs `work` with this context in scope: the calls it makes carry it.
    pub fn scope<F: Future>(self, work: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, work)
    }

    /// The `traceparent` value: `00-<trace id>-<span id>-<flags>`.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.span_id),
            u8::from(self.sampled)
        )
    }

    /// The context of `traceparent` (and `tracestate`), as W3C Trace
    /// Context reads them: `None` for a malformed value, version `ff`, or
    /// an all-zero id. A later version's extra fields are ignored.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let bytes = traceparent.as_bytes();
        let version = decode::<1>(bytes.get(0..2)?)?[0];
        let exact = bytes.len() == 55;
        // Version 00 is exactly 55 characters; a later one at least, and
        // what follows them begins with '-'.
        if version == 0xff || (version == 0 && !exact) || (!exact && bytes.get(55) != Some(&b'-')) {
            return None;
        }
        if bytes.get(2) != Some(&b'-') || bytes.get(35) != Some(&b'-') || bytes.get(52) != Some(&b'-') {
            return None;
        }
        let trace_id = decode::<16>(&bytes[3..35])?;
        let span_id = decode::<8>(&bytes[36..52])?;
        let flags = decode::<1>(&bytes[53..55])?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let state = tracestate
            .filter(|state| !state.is_empty() && state.len() <= MAX_TRACESTATE)
            .map(str::to_owned);
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
            state,
        })
    }

    /// The context a call's metadata carries, if it carries a valid one.
    pub fn from_metadata(metadata: &Metadata) -> Option<Self> {
        Self::parse(metadata.get(TRACEPARENT)?, metadata.get(TRACESTATE))
    }

    /// Writes this context into `metadata` (`traceparent`, and
    /// `tracestate` if any), replacing what was there.
    pub fn to_metadata(&self, metadata: &mut Metadata) {
        metadata.insert(TRACEPARENT, self.traceparent());
        metadata.remove(TRACESTATE);
        if let Some(state) = &self.state {
            metadata.insert(TRACESTATE, state.clone());
        }
    }
}

/// On the client: the context in scope, into a call's metadata that has
/// no `traceparent` of its own.
pub(crate) fn inject(metadata: &mut Metadata) {
    if metadata.contains_key(TRACEPARENT) {
        return;
    }
    let _ = CURRENT.try_with(|context| context.to_metadata(metadata));
}

/// On the server: the call's span, and the context its handler runs in
/// (a child of the caller's), if the caller sent one.
pub(crate) fn call_span(method: &str, metadata: &Metadata) -> (tracing::Span, Option<TraceContext>) {
    let own = TraceContext::from_metadata(metadata).map(|caller| (caller.child(), caller.span_id));
    // No span at all where no subscriber wants one (not even the disabled
    // one the macro makes for the `log` crate's sake): a call costs no
    // tracing then.
    if !tracing::enabled!(tracing::Level::INFO) {
        return (tracing::Span::none(), own.map(|(own, _)| own));
    }
    let Some((own, parent)) = own else {
        return (tracing::info_span!("rpc", rpc.method = method), None);
    };
    let span = tracing::info_span!(
        "rpc",
        rpc.method = method,
        trace_id = %hex(&own.trace_id),
        span_id = %hex(&own.span_id),
        parent_id = %hex(&parent),
    );
    (span, Some(own))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
    text
}

/// `N` bytes from `2 * N` lowercase hex digits (W3C allows no others).
fn decode<const N: usize>(text: &[u8]) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

thread_local! {
    /// A SplitMix64 state per thread, seeded from the OS once: ids for
    /// spans need to be unlikely to collide, not secret, and a system
    /// call per call would cost more than the rest of the trace context.
    static SEED: Cell<u64> = Cell::new({
        let mut seed = [0; 8];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut seed);
        u64::from_le_bytes(seed)
    });
}

/// `N` random bytes, never all zero.
fn random_id<const N: usize>() -> [u8; N] {
    let mut out = [0; N];
    loop {
        for chunk in out.chunks_mut(8) {
            let next = SEED.with(|seed| {
                let state = seed.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
                seed.set(state);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            });
            chunk.copy_from_slice(&next.to_le_bytes()[..chunk.len()]);
        }
        if out.iter().any(|b| *b != 0) {
            return out;
        }
    }
}

#[cfg(test)]
mod tests;
