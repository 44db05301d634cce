//! RPC and HTTP on one listener: a stream whose first byte begins a
//! call's HEADER frame is a call; any other is an HTTP/1.1 or h2
//! connection (an HTTP/1.1 request starts with its method's letters, h2
//! with its `PRI` preface: never the byte 1 of a HEADER).

use std::time::Duration;

use crate::{
    http::{
        on_stream::{Rewound, ServeHttp},
        PeerInfo,
    },
    mux::Stream,
    rpc::wire::Kind,
    server::{DetectLayer, Handler, Opened},
};

/// The HTTP service of a server that has one, for the streams that are not
/// calls.
pub(super) type HttpStreams = ServeHttp<Rewound<Stream>>;

/// Whether a stream's first bytes begin a call.
fn is_call(first: &[u8]) -> bool {
    first.first() == Some(&(Kind::Header as u8))
}

/// The layer over a server's calls that hands the streams that are not
/// calls to `http`: the header timeout covers the wait for a stream's
/// first bytes.
pub(super) fn detect_http(http: HttpStreams, header_timeout: Duration) -> DetectLayer<impl Handler> {
    let serve_http = move |opened: Opened| {
        let info = PeerInfo::of_stream(&opened.connection, &opened.stream, opened.addr);
        http(Rewound::new(opened.first, opened.stream), info, opened.stopping)
    };
    DetectLayer::new(is_call, serve_http, header_timeout)
}
