//! A call on a connection of its own, dialed for it
//! ([`Client::one_shot`](super::Client::one_shot)) by the pool's dial:
//! early data (protocol version 3) when the call may go early.

use std::time::Duration;

use super::{outgoing, reply_header, write_requests, Outgoing, RawCall, RawReply};
use crate::{
    pool::{connect, Dialer, Endpoint},
    rpc::{
        compression::ClientCompression,
        streaming::{AbortOnDrop, CallFrames},
        wire::Limits,
        Status,
    },
};

/// Dials with the pool's dial (the call as the connection's first stream,
/// early when it may go early), and waits for the reply's header.
pub(super) async fn call_once<D: Dialer>(
    dialer: D,
    endpoint: Endpoint,
    limits: Limits,
    compression: ClientCompression,
    timeout: Option<Duration>,
    call: RawCall,
) -> Result<RawReply, Status> {
    let idempotent = call.idempotent;
    let Outgoing {
        first,
        streamed: requests,
        compressor,
    } = outgoing(call, timeout, &compression);
    let early = idempotent && requests.is_none();
    let connection = connect(&dialer, &endpoint, early.then(|| first.clone())).await?;
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
    let early = stream.is_early();
    let (recv, mut send) = stream.into_split();
    let writer = requests.map(|messages| {
        AbortOnDrop(tokio::spawn(async move {
            let _ = write_requests(&mut send, messages, compressor).await;
        }))
    });
    reply_header(CallFrames::new(recv, limits), writer, early, &compression).await
}
