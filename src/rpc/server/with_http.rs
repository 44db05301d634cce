//! RPC and HTTP on one listener: a stream whose first byte begins a
//! call's HEADER frame is a call; any other is an HTTP/1.1 or h2
//! connection (an HTTP/1.1 request starts with its method's letters, h2
//! with its `PRI` preface: never the byte 1 of a HEADER).

use std::net::SocketAddr;

use tokio::time::Instant;
use tower::Service;

use super::{serve_call::serve_call, Call, Config, Reply};
use crate::{
    error::{BoxError, CloseCode},
    http::{
        on_stream::{Rewound, ServeHttp},
        PeerInfo,
    },
    mux::Stream,
    rpc::wire::Kind,
    server::Stopping,
};

/// The HTTP service of a server that has one, for the streams that are not
/// calls.
pub(super) type HttpStreams = ServeHttp<Rewound<Stream>>;

/// Serves `stream` as a call, or as HTTP if its first byte says so.
pub(super) async fn call_or_http<S>(
    mut stream: Stream,
    addr: Option<SocketAddr>,
    service: S,
    mut config: Config,
    (http, info, stopping): (HttpStreams, PeerInfo, Stopping),
) where
    S: Service<Call, Response = Reply> + Send,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    // The header timeout covers the wait for the first bytes too.
    let started = Instant::now();
    let first = match tokio::time::timeout(config.header_timeout, stream.recv()).await {
        Ok(Ok(first)) => first.unwrap_or_default(),
        // The stream failed (the peer reset it): nothing to answer.
        Ok(Err(_)) => return,
        Err(_) => {
            tracing::debug!(?addr, "rpc server: nothing on a stream within the header timeout");
            stream.reset(CloseCode::PROTOCOL_ERROR);
            return;
        }
    };
    if first.first().is_some_and(|&b| b != Kind::Header as u8) {
        http(Rewound::new(first, stream), info, stopping).await;
        return;
    }
    config.header_timeout = config.header_timeout.saturating_sub(started.elapsed());
    serve_call(stream, first, addr, service, config).await;
}
