//! The service of weft-service on tonic: a server and a client of a
//! generated service over loopback, over TLS with a certificate the
//! client trusts (`cert.pem` and `key.pem` beside the binary's working
//! directory; compile_time.sh makes them with openssl).

mod hello {
    tonic::include_proto!("hello");
}

use hello::{
    greeter_client::GreeterClient,
    greeter_server::{Greeter, GreeterServer},
    Hello,
};
use tokio::net::TcpListener;
use tonic::{
    transport::{Certificate, ClientTlsConfig, Identity, Server, ServerTlsConfig},
    Request, Response, Status,
};

struct Greet;

#[tonic::async_trait]
impl Greeter for Greet {
    async fn say(&self, request: Request<Hello>) -> Result<Response<Hello>, Status> {
        let text = format!("hello, {}", request.into_inner().text);
        Ok(Response::new(Hello { text }))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (cert, key) = (std::fs::read("cert.pem")?, std::fs::read("key.pem")?);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = Server::builder()
        .tls_config(ServerTlsConfig::new().identity(Identity::from_pem(&cert, &key)))?
        .add_service(GreeterServer::new(Greet))
        .serve_with_incoming(tokio_stream(listener));
    tokio::spawn(server);

    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&cert))
        .domain_name("localhost");
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect()
        .await?;
    let mut greeter = GreeterClient::new(channel);
    let reply = greeter.say(Hello { text: "tonic".into() }).await?.into_inner();
    assert_eq!(reply.text, "hello, tonic");
    println!("{}", reply.text);
    Ok(())
}

/// The listener's connections as the stream tonic serves.
fn tokio_stream(
    listener: TcpListener,
) -> impl tonic::codegen::tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(listener)
}
