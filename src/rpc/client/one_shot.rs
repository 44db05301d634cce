//! A call on a connection of its own, dialed for it
//! ([`Client::one_shot`](super::Client::one_shot)): early data (protocol
//! version 3) when the call may go early.

use std::time::Duration;

use tower::ServiceExt;

use super::{first_bytes, reply_header, write_requests, RawCall, RawReply};
use crate::{
    handshake::Handshake,
    pool::{Dialer, Endpoint},
    rpc::{
        streaming::{AbortOnDrop, FrameReader},
        wire::Limits,
        Status,
    },
};

/// Dials, sends the call (early when it may), and waits for the reply's
/// header.
pub(super) async fn call_once<D: Dialer>(
    dialer: D,
    endpoint: Endpoint,
    limits: Limits,
    timeout: Option<Duration>,
    call: RawCall,
) -> Result<RawReply, Status> {
    let idempotent = call.idempotent;
    let (first, requests) = first_bytes(call, timeout);
    let mut handshake = Handshake::dial(endpoint.target().clone());
    if let Some(peer) = endpoint.expected_peer() {
        handshake = handshake.expect_peer(*peer);
    }
    let early = idempotent && requests.is_none();
    if early {
        handshake = handshake.early_stream_finished(first.clone());
    }
    let connection = dialer.oneshot(handshake).await?;
    if let Some(expected) = endpoint.expected_protocol() {
        if connection.agreement().protocol() != Some(expected) {
            return Err(Status::unavailable(format!(
                "{endpoint} agreed on protocol {:?}, not {expected:?}",
                connection.agreement().protocol()
            )));
        }
    }
    // The stream holds the connection: it closes when the reply is done.
    let stream = match connection.take_early_stream() {
        Some(stream) => stream,
        None => {
            let mut stream = connection.open().await?;
            stream.send(first).await?;
            if requests.is_none() {
                stream.finish()?;
            }
            stream
        }
    };
    connection.go_away();
    let (recv, mut send) = stream.into_split();
    let writer = requests.map(|messages| {
        AbortOnDrop(tokio::spawn(async move {
            let _ = write_requests(&mut send, messages).await;
        }))
    });
    reply_header(FrameReader::new(recv, limits), writer).await
}
