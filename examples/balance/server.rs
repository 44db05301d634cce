//! The servers of the `balance` example: each answers every stream with
//! its name, and shuts down gracefully when told.

use std::io;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::oneshot,
};
use weft::{mux::Stream, pool::Endpoint, Identity};

/// A running server: where it is (with its key), the streams it accepted,
/// and how to stop it.
pub struct Server {
    pub endpoint: Endpoint,
    pub stop: oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts a server that answers every stream with its name.
pub async fn start(name: &'static str) -> io::Result<Server> {
    let identity = Identity::generate();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = Endpoint::new(listener.local_addr()?).expect_peer(identity.peer_id());
    let (stop, stopped) = oneshot::channel::<()>();
    // Every stream answered with `name`; at the stop, a go-away on each
    // connection, and the streams in flight finish.
    let server = weft::server::serve(listener, weft::acceptor(identity), move |stream| async move {
        let _ = answer(stream, name).await;
    })
    .with_graceful_shutdown(async move {
        let _ = stopped.await;
    });
    let task = tokio::spawn(async move {
        let _ = server.await;
    });
    Ok(Server { endpoint, stop, task })
}
/// One stream: read the request, answer with the server's name.
async fn answer(mut stream: Stream, name: &'static str) -> io::Result<()> {
    let mut request = Vec::new();
    stream.read_to_end(&mut request).await?;
    stream.write_all(name.as_bytes()).await?;
    stream.shutdown().await
}
