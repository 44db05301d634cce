//! HTTP/1.1 or h2 on one stream: what [`serve`](super::serve) runs on every
//! stream a peer opens, and the RPC server on the streams that are not
//! calls ([`with_http`](crate::rpc::server::Builder::with_http)).

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
    service::TowerToHyperService,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower::Service;

use super::{HttpService, PeerInfo, ResponseBody};
use crate::server::Stopping;

/// A service and hyper-util's auto builder (HTTP/1.1 or h2, as the
/// stream's first bytes say), ready to serve streams.
pub(crate) struct HttpOnStreams<S> {
    builder: auto::Builder<TokioExecutor>,
    service: S,
}

impl<S: Clone> Clone for HttpOnStreams<S> {
    fn clone(&self) -> Self {
        Self {
            builder: self.builder.clone(),
            service: self.service.clone(),
        }
    }
}

impl<S> HttpOnStreams<S> {
    pub(crate) fn new(service: S, header_read_timeout: Option<Duration>) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // Without a timer hyper's timeouts never fire.
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout);
        builder.http2().timer(TokioTimer::new());
        Self { builder, service }
    }

    /// Serves `io` until the HTTP connection over it ends; at the stop,
    /// hyper's graceful shutdown (requests in flight finish).
    pub(crate) fn serve<IO, B>(
        &self,
        io: IO,
        info: PeerInfo,
        mut stopping: Stopping,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: HttpService<B>,
        B: ResponseBody,
    {
        let service = WithPeer {
            inner: self.service.clone(),
            info,
        };
        let http = self
            .builder
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service))
            .into_owned();
        async move {
            let mut http = std::pin::pin!(http);
            let stopped = tokio::select! {
                ended = http.as_mut() => Some(ended),
                () = stopping.wait() => None,
            };
            let ended = match stopped {
                Some(ended) => ended,
                None => {
                    http.as_mut().graceful_shutdown();
                    http.await
                }
            };
            if let Err(err) = ended {
                tracing::debug!(error = %err, "HTTP connection ended with an error");
            }
        }
    }
}

/// [`HttpOnStreams::serve`] with the service's type erased, for a server
/// that holds it beside others (the RPC server's HTTP streams).
pub(crate) type ServeHttp<IO> =
    Arc<dyn Fn(IO, PeerInfo, Stopping) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// `service` as a [`ServeHttp`].
pub(crate) fn erased<IO, S, B>(service: S, header_read_timeout: Option<Duration>) -> ServeHttp<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService<B>,
    B: ResponseBody,
{
    let http = HttpOnStreams::new(service, header_read_timeout);
    Arc::new(move |io, info, stopping| Box::pin(http.serve(io, info, stopping)))
}

/// Puts the [`PeerInfo`] in each request's extensions.
#[derive(Clone)]
struct WithPeer<S> {
    inner: S,
    info: PeerInfo,
}

/// The service's body, or the empty one of a request refused as too early.
pub(crate) type EarlyOr<B> = http_body_util::Either<B, http_body_util::Empty<<B as hyper::body::Body>::Data>>;

impl<S, B> Service<Request<Incoming>> for WithPeer<S>
where
    S: Service<Request<Incoming>, Response = Response<B>>,
    S::Error: Into<crate::error::BoxError>,
    B: hyper::body::Body,
{
    type Response = Response<EarlyOr<B>>;
    type Error = crate::error::BoxError;
    type Future = futures_util::future::Either<
        futures_util::future::MapErr<
            futures_util::future::MapOk<S::Future, fn(Response<B>) -> Response<EarlyOr<B>>>,
            fn(S::Error) -> crate::error::BoxError,
        >,
        std::future::Ready<Result<Response<EarlyOr<B>>, crate::error::BoxError>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        use futures_util::TryFutureExt;
        let safe = [http::Method::GET, http::Method::HEAD, http::Method::OPTIONS].contains(request.method());
        if self.info.early && !safe {
            // RFC 8470: early data may be replayed; the client sends it
            // again after the handshake.
            tracing::debug!(method = %request.method(), "a request that is not safe came as early data: 425");
            let mut too_early = Response::new(http_body_util::Either::Right(http_body_util::Empty::new()));
            *too_early.status_mut() =
                http::StatusCode::from_u16(425).unwrap_or(http::StatusCode::SERVICE_UNAVAILABLE);
            return futures_util::future::Either::Right(std::future::ready(Ok(too_early)));
        }
        if self.info.early {
            // RFC 8470, section 5.1: a request that came in early data says
            // so, for a handler that forwards it (and for the next hop).
            request
                .headers_mut()
                .insert("early-data", http::HeaderValue::from_static("1"));
        }
        request.extensions_mut().insert(self.info.clone());
        let left: fn(Response<B>) -> Response<EarlyOr<B>> =
            |response| response.map(http_body_util::Either::Left);
        let boxed: fn(S::Error) -> crate::error::BoxError = Into::into;
        futures_util::future::Either::Left(self.inner.call(request).map_ok(left).map_err(boxed))
    }
}

/// A transport whose first bytes were read already (to tell what it
/// carries): they are read again first.
#[derive(Debug)]
pub(crate) struct Rewound<IO> {
    first: Bytes,
    io: IO,
}

impl<IO> Rewound<IO> {
    pub(crate) fn new(first: Bytes, io: IO) -> Self {
        Self { first, io }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewound<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.first.has_remaining() {
            let n = self.first.len().min(buf.remaining());
            buf.put_slice(&self.first[..n]);
            self.first.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewound<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_rewound_transport_reads_its_first_bytes_again_then_the_rest() {
        let (mut ours, theirs) = tokio::io::duplex(64);
        ours.write_all(b" world").await.unwrap();
        ours.shutdown().await.unwrap();
        let mut rewound = Rewound::new(Bytes::from_static(b"hello"), theirs);
        let mut small = [0u8; 3];
        rewound.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"hel");
        let mut rest = String::new();
        rewound.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "lo world");
    }
}
