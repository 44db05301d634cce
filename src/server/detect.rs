//! Two protocols on one listener, told apart by a stream's first bytes:
//! a layer over stream handlers, as linkerd2-proxy's detect stack is over
//! its services. The RPC server puts one over its calls when it also
//! serves HTTP.

use std::time::Duration;

use super::{
    handler::{Handler, Handling},
    Opened,
};
use crate::error::CloseCode;

/// Hands a stream to the handler beneath if its first bytes `match`, and
/// to `otherwise` if not: a [`tower::Layer`] over [`Handler`]s.
#[derive(Debug, Clone)]
pub(crate) struct DetectLayer<O> {
    matches: fn(&[u8]) -> bool,
    otherwise: O,
    within: Duration,
}

impl<O> DetectLayer<O> {
    /// Streams whose first bytes `matches` says are the inner handler's
    /// go to it, and the rest to `otherwise`. A stream that sends nothing
    /// in the time `within` from its opening is reset (`PROTOCOL_ERROR`);
    /// one that ends before sending anything is the inner handler's.
    pub(crate) fn new(matches: fn(&[u8]) -> bool, otherwise: O, within: Duration) -> Self {
        Self {
            matches,
            otherwise,
            within,
        }
    }
}

impl<H, O: Clone> tower::Layer<H> for DetectLayer<O> {
    type Service = Detect<H, O>;

    fn layer(&self, inner: H) -> Detect<H, O> {
        Detect {
            inner,
            layer: self.clone(),
        }
    }
}

/// The handler a [`DetectLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct Detect<H, O> {
    inner: H,
    layer: DetectLayer<O>,
}

impl<H: Handler, O: Handler> Handler for Detect<H, O> {
    type Future = Handling;

    fn handle(&self, mut opened: Opened) -> Handling {
        if !opened.first.is_empty() {
            return self.route(opened);
        }
        let this = self.clone();
        Box::pin(async move {
            let deadline = opened.at + this.layer.within;
            match tokio::time::timeout_at(deadline, opened.stream.recv()).await {
                Ok(Ok(first)) => opened.first = first.unwrap_or_default(),
                // The stream failed (the peer reset it): nothing to answer.
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::debug!(addr = ?opened.addr, "nothing on a stream within the time to tell its protocol");
                    opened.stream.reset(CloseCode::PROTOCOL_ERROR);
                    return;
                }
            }
            this.route(opened).await;
        })
    }
}

impl<H: Handler, O: Handler> Detect<H, O> {
    fn route(&self, opened: Opened) -> Handling {
        if opened.first.is_empty() || (self.layer.matches)(&opened.first) {
            Box::pin(self.inner.handle(opened))
        } else {
            Box::pin(self.layer.otherwise.handle(opened))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use tokio::{io::AsyncWriteExt, sync::mpsc, time::Instant};
    use tower::{Layer, ServiceBuilder};

    use super::DetectLayer;
    use crate::{
        handshake::{HandshakeExt, Versions},
        mux::{self, Connection},
        server::{connection::Stopping, Handler, Opened},
        transport::ExistingTransport,
        MultiplexLayer, NegotiateLayer, StreamLimitLayer,
    };

    async fn connected() -> (Connection, Connection) {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let stack = || {
            ServiceBuilder::new()
                .layer(MultiplexLayer::new(mux::Builder::new()))
                .layer(StreamLimitLayer::new(10))
                .layer(NegotiateLayer::new(Versions::CURRENT))
                .service(ExistingTransport::new())
        };
        let (mut dialer, mut acceptor) = (stack(), stack());
        tokio::try_join!(dialer.dial(a), acceptor.accept_transport(b)).unwrap()
    }

    /// A handler that reports which it is and what first bytes it had.
    fn reporting(name: &'static str, seen: mpsc::UnboundedSender<(&'static str, Bytes)>) -> impl Handler {
        move |opened: Opened| {
            let seen = seen.clone();
            async move {
                let _ = seen.send((name, opened.first));
            }
        }
    }

    /// Opens a stream from `client`, writes `bytes` (and ends it if
    /// `end`), and hands the server's side to `handler`.
    async fn route(handler: &impl Handler, bytes: &[u8], end: bool) -> mux::Stream {
        let (client, server) = connected().await;
        let mut sent = client.open().await.unwrap();
        sent.write_all(bytes).await.unwrap();
        if end {
            sent.shutdown().await.unwrap();
        }
        let stream = server.accept().await.unwrap().expect("a stream");
        handler.handle(opened(stream, server)).await;
        sent
    }

    /// `stream` of `connection`, opened now.
    fn opened(stream: mux::Stream, connection: Connection) -> Opened {
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        Opened {
            stream,
            first: Bytes::new(),
            connection,
            addr: None,
            stopping: Stopping::new(stopped),
            at: Instant::now(),
        }
    }

    #[tokio::test]
    async fn each_stream_goes_where_its_first_bytes_say_with_them() {
        let (seen, mut reports) = mpsc::unbounded_channel();
        let detect = DetectLayer::new(
            |first| first[0] == 1,
            reporting("other", seen.clone()),
            Duration::from_secs(5),
        )
        .layer(reporting("inner", seen));
        route(&detect, b"\x01call", false).await;
        assert_eq!(
            reports.recv().await.unwrap(),
            ("inner", Bytes::from_static(b"\x01call"))
        );
        route(&detect, b"GET / HTTP/1.1\r\n", false).await;
        assert_eq!(
            reports.recv().await.unwrap(),
            ("other", Bytes::from_static(b"GET / HTTP/1.1\r\n"))
        );
        // One that ends before a byte is the inner handler's.
        route(&detect, b"", true).await;
        assert_eq!(reports.recv().await.unwrap(), ("inner", Bytes::new()));
        // One whose first bytes come a while after it opened, within the
        // limit, is waited for.
        let (client, server) = connected().await;
        let mut sent = client.open().await.unwrap();
        sent.flush().await.unwrap();
        let stream = server.accept().await.unwrap().expect("a stream");
        let later = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            sent.write_all(b"GET /").await.unwrap();
            sent
        });
        detect.handle(opened(stream, server)).await;
        assert_eq!(
            reports.try_recv().expect("handed on once its bytes came"),
            ("other", Bytes::from_static(b"GET /"))
        );
        drop(later.await.unwrap());
    }

    #[tokio::test]
    async fn a_stream_silent_past_the_limit_is_reset_and_handed_to_neither() {
        let (seen, mut reports) = mpsc::unbounded_channel();
        let detect = DetectLayer::new(
            |_| true,
            reporting("other", seen.clone()),
            Duration::from_millis(100),
        )
        .layer(reporting("inner", seen));
        let mut sent = route(&detect, b"", false).await;
        assert!(reports.try_recv().is_err(), "handed to neither");
        let err = sent.recv().await.unwrap_err();
        assert!(err.to_string().contains("reset"), "the peer sees a reset: {err}");
    }
}
