//! The time the sans-IO cores are given: tokio's clock, as a std
//! `Instant`, so that a paused runtime (a test's `start_paused`) pauses
//! the multiplexer's and the record policy's timers too.

/// Now, on tokio's clock.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
