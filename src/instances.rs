//! The standard stacks' generic code, compiled in weft, in debug builds.
//!
//! A program that serves RPC over `weft::acceptor` and calls through a
//! pool over `weft::dialer` instantiates the handshake, the records, the
//! multiplexer, the server's accept loop and the client's calls over
//! `TcpStream` and `Target`. In a debug build rustc shares generic
//! instances with the crates below (`-Z share-generics`, on by default
//! without optimizations), so instances compiled here are linked rather
//! than compiled again in every program, test and example on weft: each
//! rebuild of a small service then compiles its own code, not weft's.
//! Release builds (no sharing) leave this out.

use std::{future::Future, hint::black_box, io, pin::Pin};

use tokio::net::TcpListener;
use tower::Service;

use crate::{
    pool::{Endpoint, Pool},
    rpc::{
        client::{Client, RawCall, RawReply},
        server::Server,
        Status,
    },
    stack::StandardDialer,
    Identity,
};

type Serving = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;
type Calling = Box<
    dyn Service<
            RawCall,
            Response = RawReply,
            Error = Status,
            Future = Pin<Box<dyn Future<Output = Result<RawReply, Status>> + Send>>,
        > + Send,
>;

/// Never called: its body is compiled, and with it every instance it
/// names (a future's `poll` through its vtable, `tokio::spawn` of the
/// server as a program spawns it).
#[doc(hidden)]
pub fn standard_instances(
    listener: TcpListener,
    server: Identity,
    client: Identity,
    endpoint: Endpoint,
) -> (Serving, Calling) {
    let serve = Server::builder().serve(listener, crate::acceptor(server));
    let serving: Serving = if black_box(false) {
        drop(tokio::spawn(serve));
        Box::pin(std::future::pending())
    } else {
        Box::pin(serve)
    };
    let pool: Pool<StandardDialer> = Pool::builder().build(crate::dialer(client));
    (serving, Box::new(Client::new(pool, endpoint)))
}
