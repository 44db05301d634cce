//! Calls made again: the generated echo client over tower's `Retry`
//! around weft's raw RPC `Client`, with a policy that makes an idempotent
//! call again when it failed `UNAVAILABLE` (`RawCall::try_clone` copies a
//! call with one request message; a call with streamed requests is not
//! copied, so not retried).
//!
//! The server (the `rpc_server` example's, in-process) starts listening
//! 150 ms after the first attempt: the attempts before it fail to dial,
//! and the call succeeds once it is up.
//!
//! cargo run --example rpc_retry

#[path = "rpc_server/main.rs"]
#[allow(dead_code)]
mod rpc_server;

use std::{net::SocketAddr, time::Duration};

use rpc_server::echo::{echo_client::EchoClient, EchoRequest};
use tokio::{net::TcpListener, sync::oneshot};
use tower::{retry::Policy, ServiceBuilder};
use weft::{
    pool::{Endpoint, Pool},
    rpc::{
        client::{Client, RawCall, RawReply},
        Code, Request, Status,
    },
    Identity,
};

/// Retries a call that failed `UNAVAILABLE` (the pool found no stream:
/// the dial failed, or the connection went away before the server took
/// the call), up to `left` more times, waiting `delay` (doubling) before
/// each. Only for idempotent methods: UNAVAILABLE can also be a call the
/// server began.
#[derive(Debug, Clone)]
struct RetryUnavailable {
    left: usize,
    delay: Duration,
}

impl Policy<RawCall, RawReply, Status> for RetryUnavailable {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, call: &mut RawCall, result: &mut Result<RawReply, Status>) -> Option<Self::Future> {
        match result {
            Err(status) if status.code() == Code::Unavailable && self.left > 0 => {
                self.left -= 1;
                let wait = self.delay;
                self.delay *= 2;
                println!("retry    {} failed ({status}); again in {wait:?}", call.method());
                Some(tokio::time::sleep(wait))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, call: &RawCall) -> Option<RawCall> {
        call.try_clone()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let identity = Identity::generate();
    let key = identity.peer_id();
    // A free port, closed again until the late server takes it.
    let addr: SocketAddr = TcpListener::bind("127.0.0.1:0").await?.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let listener = TcpListener::bind(addr).await?;
        rpc_server::run(listener, identity, async {
            let _ = stopped.await;
        })
        .await
    });

    // A pool that waits little between failed dials, a client over it,
    // the retry around the client, the generated client around the retry.
    let pool = Pool::builder()
        .backoff(Duration::from_millis(10), Duration::from_millis(100))
        .build(weft::dialer(Identity::generate()));
    let raw = Client::new(pool, Endpoint::new(addr).expect_peer(key));
    let policy = RetryUnavailable {
        left: 8,
        delay: Duration::from_millis(20),
    };
    let mut echo = EchoClient::new(ServiceBuilder::new().retry(policy).service(raw));

    let mut request = Request::new(EchoRequest {
        text: "retried".into(),
        payload: Vec::new(),
    });
    request.set_timeout(Duration::from_secs(2));
    let reply = echo.say(request).await?.into_inner();
    println!("Say      {:?}, once the server was up", reply.text);

    drop(echo);
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(5), late).await???;
    Ok(())
}
