//! A call's deadline, and the step it interrupted.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};

use super::super::{Code, Status};
use crate::pool::Endpoint;

/// How far a call got, for the status its deadline ends it with.
pub(super) struct Progress {
    pub(super) endpoint: Endpoint,
    /// The stream is open: the dial and handshake, if any, are done.
    pub(super) connected: AtomicBool,
}

/// `work`, failing with `DEADLINE_EXCEEDED` past `timeout` (if any).
pub(super) fn within<F>(timeout: Option<Duration>, work: F) -> Within<F> {
    Within {
        work,
        deadline: None,
        timeout,
        progress: None,
    }
}

/// The status of a call past its `timeout`: which step it was in, when
/// that is known.
fn past_deadline(timeout: Duration, progress: Option<&Progress>) -> Status {
    match progress {
        None => Status::deadline_exceeded(timeout),
        Some(p) if !p.connected.load(Ordering::Relaxed) => Status::new(
            Code::DeadlineExceeded,
            format!(
                "no connection to {} within {}: the dial or the handshake did not finish",
                p.endpoint,
                crate::error::Rounded(timeout)
            ),
        ),
        Some(p) => Status::new(
            Code::DeadlineExceeded,
            format!(
                "no answer from {} within {}: the call was sent",
                p.endpoint,
                crate::error::Rounded(timeout)
            ),
        ),
    }
}

pin_project_lite::pin_project! {
    /// `work`, failed with `DEADLINE_EXCEEDED` once its timeout passes
    /// (counted from the first poll, which starts the timer: building the
    /// future needs no runtime). The work is held in place (an `async fn`
    /// taking it would hold it twice over, and move it).
    pub(super) struct Within<F> {
        #[pin]
        work: F,
        #[pin]
        deadline: Option<tokio::time::Sleep>,
        timeout: Option<Duration>,
        pub(super) progress: Option<Arc<Progress>>,
    }
}

impl<F, T> Future for Within<F>
where
    F: Future<Output = Result<T, Status>>,
{
    type Output = Result<T, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let (Some(limit), None) = (*this.timeout, this.deadline.as_ref().get_ref()) {
            this.deadline.set(Some(tokio::time::sleep(limit)));
        }
        if let Poll::Ready(outcome) = this.work.poll(cx) {
            return Poll::Ready(outcome);
        }
        match this.deadline.as_pin_mut().map(|deadline| deadline.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(past_deadline(
                this.timeout.unwrap_or_default(),
                this.progress.as_deref(),
            ))),
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::Code;

    #[test]
    fn a_timeout_needs_no_runtime_to_build_and_counts_from_the_first_poll() {
        // Built outside any runtime (as a `Service::call` may be).
        let stalled = within(
            Some(Duration::from_millis(50)),
            std::future::pending::<Result<(), Status>>(),
        );
        let quick = within(Some(Duration::from_secs(1)), async { Ok::<_, Status>(7) });
        let untimed = within(None, async { Ok::<_, Status>(8) });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let started = tokio::time::Instant::now();
            let err = stalled.await.unwrap_err();
            assert_eq!(err.code(), Code::DeadlineExceeded);
            assert_eq!(started.elapsed(), Duration::from_millis(50));
            assert_eq!(quick.await.unwrap(), 7);
            assert_eq!(untimed.await.unwrap(), 8);
        });
    }
}
