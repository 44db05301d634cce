//! A raw TCP echo, the floor under every RPC carrier: what a round trip of
//! the same bytes costs with no framing, no encryption and no RPC layer.
//! Nagle off both ways; the server echoes whatever it reads.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{Context, Failure, Result};

/// Echoes every connection on `listener` until `stop`.
pub async fn serve(listener: TcpListener, stop: impl std::future::Future<Output = ()> + Send) -> Result<()> {
    let mut stop = std::pin::pin!(stop);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (mut tcp, _) = tokio::select! {
            accepted = listener.accept() => accepted.context("accepting")?,
            () = &mut stop => break,
        };
        tcp.set_nodelay(true).context("setting TCP_NODELAY")?;
        connections.spawn(async move {
            let mut buf = vec![0; 64 * 1024];
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tcp.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
    connections.shutdown().await;
    Ok(())
}

/// Connections to an echo server, one per call in flight: a call takes an
/// idle one (or dials one, the first time) and puts it back after.
#[derive(Clone)]
pub struct Connections {
    addr: SocketAddr,
    idle: Arc<Mutex<Vec<TcpStream>>>,
}

impl Connections {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            idle: Arc::default(),
        }
    }

    /// Sends `message` and reads its echo back, checked.
    pub async fn echo(&self, message: &[u8], back: &mut Vec<u8>) -> Result<()> {
        let idle = self.idle.lock().expect("not poisoned").pop();
        let mut tcp = match idle {
            Some(tcp) => tcp,
            None => super::stacks::tcp_connect(self.addr).await?,
        };
        tcp.write_all(message).await.context("writing the message")?;
        back.resize(message.len(), 0);
        tcp.read_exact(back).await.context("reading the echo")?;
        if back != message {
            return Err(Failure::new("the echo differs from the message"));
        }
        self.idle.lock().expect("not poisoned").push(tcp);
        Ok(())
    }
}
