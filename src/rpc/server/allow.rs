//! Authorization by the caller's identity.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use super::{super::Status, Call, Reply};
use crate::{error::BoxError, handshake::PeerId};

/// Lets through only calls from these peers: any other (or an
/// unauthenticated caller, a caller over the Plaintext suite included)
/// gets `PERMISSION_DENIED`.
#[derive(Debug, Clone)]
pub struct AllowPeersLayer {
    allowed: Arc<Vec<PeerId>>,
}

impl AllowPeersLayer {
    /// Allows `peers`.
    pub fn new(peers: impl IntoIterator<Item = PeerId>) -> Self {
        Self {
            allowed: Arc::new(peers.into_iter().collect()),
        }
    }
}

impl<S> Layer<S> for AllowPeersLayer {
    type Service = AllowPeers<S>;

    fn layer(&self, inner: S) -> AllowPeers<S> {
        AllowPeers {
            inner,
            allowed: self.allowed.clone(),
        }
    }
}

/// The service [`AllowPeersLayer`] builds.
#[derive(Debug, Clone)]
pub struct AllowPeers<S> {
    inner: S,
    allowed: Arc<Vec<PeerId>>,
}

impl<S> Service<Call> for AllowPeers<S>
where
    S: Service<Call, Response = Reply>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = BoxError;
    type Future = futures_util::future::Either<
        futures_util::future::ErrInto<S::Future, BoxError>,
        std::future::Ready<Result<Reply, BoxError>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, call: Call) -> Self::Future {
        use futures_util::TryFutureExt;
        match call.peer() {
            Some(peer) if self.allowed.contains(peer) => {
                futures_util::future::Either::Left(self.inner.call(call).err_into())
            }
            peer => {
                let status = Status::permission_denied(match peer {
                    Some(peer) => format!("{peer} may not call {}", call.method()),
                    None if call.suite() == crate::handshake::CipherSuite::Plaintext => format!(
                        "a caller on an unencrypted connection may not call {} (its records are not authenticated)",
                        call.method()
                    ),
                    None => format!("an unauthenticated caller may not call {}", call.method()),
                });
                futures_util::future::Either::Right(std::future::ready(Err(status.into())))
            }
        }
    }
}
