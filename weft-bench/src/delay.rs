//! A TCP proxy that makes loopback look like a path with a one-way delay:
//! every byte either way arrives `delay` after it was sent, and a new
//! connection behaves as if its TCP handshake had taken a round trip
//! (the client's first bytes arrive no sooner than 3 delays after it
//! connected, the server's no sooner than 4), as over a real path where
//! the SYN, SYN-ACK and ACK each take one delay. The same proxy stands in
//! front of every mode's server, so all carriers cross the same path.

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::mpsc,
    time::Instant,
};

/// Serves `listener`, forwarding each connection to `server` with `delay`
/// each way, until the runtime stops.
pub async fn proxy(listener: TcpListener, server: SocketAddr, delay: Duration) {
    while let Ok((client, _)) = listener.accept().await {
        let accepted = Instant::now();
        tokio::spawn(async move {
            let Ok(upstream) = TcpStream::connect(server).await else {
                return;
            };
            let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = upstream.into_split();
            // Client to server: sent after the handshake's round trip (2
            // delays), then one delay on the way.
            let to_server = pump(client_read, server_write, move |now| {
                now.max(accepted + 2 * delay) + delay
            });
            // Server to client: the server accepts a delay and a half after
            // the SYN, 3 delays in, so nothing of its reaches the client
            // before 4 delays.
            let to_client = pump(server_read, client_write, move |now| {
                (now + delay).max(accepted + 4 * delay)
            });
            tokio::join!(to_server, to_client);
        });
    }
}

/// Copies `from` to `to`, each chunk written at `deliver_at(when it was
/// read)` (never earlier than the chunk before it), then ends `to`.
async fn pump(
    mut from: impl AsyncReadExt + Unpin + Send + 'static,
    mut to: impl AsyncWriteExt + Unpin,
    deliver_at: impl Fn(Instant) -> Instant + Send + 'static,
) {
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if chunks
                        .send((deliver_at(Instant::now()), Bytes::copy_from_slice(&buf[..n])))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    while let Some((at, chunk)) = due.recv().await {
        tokio::time::sleep_until(at).await;
        if to.write_all(&chunk).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
    reader.abort();
}
