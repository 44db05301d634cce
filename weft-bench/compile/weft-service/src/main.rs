//! A new project on weft, written with README's dependency lines only: a
//! server and a client of a generated service over loopback. `.ci/package`
//! builds and runs it against the packaged crates; `compile_time.sh` times
//! its build against the same service on tonic (`../tonic-service`).

mod hello {
    weft::include_proto!("hello");
}

use hello::{
    greeter_client::GreeterClient,
    greeter_server::{Greeter, GreeterServer},
    Hello,
};
use tokio::net::TcpListener;
use weft::{
    pool::{Endpoint, Pool},
    rpc::{client::Client, server::Server, Request, Response, Status},
    Identity,
};

struct Greet;

impl Greeter for Greet {
    async fn say(&self, request: Request<Hello>) -> Result<Response<Hello>, Status> {
        let text = format!("hello, {}", request.into_inner().text);
        Ok(Response::new(Hello { text }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let identity = Identity::generate();
    let key = identity.peer_id();
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = Endpoint::new(listener.local_addr()?).expect_peer(key);
    let server = Server::builder().add_service(GreeterServer::new(Greet));
    tokio::spawn(server.serve(listener, weft::acceptor(identity)));

    let pool = Pool::builder().build(weft::dialer(Identity::generate()));
    let mut greeter = GreeterClient::new(Client::new(pool, endpoint));
    let reply = greeter.say(Hello { text: "weft".into() }).await?.into_inner();
    assert_eq!(reply.text, "hello, weft");
    println!("{}", reply.text);
    Ok(())
}
