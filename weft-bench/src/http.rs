//! The HTTP baselines for `http_bench`: the handler every server runs,
//! hyper-util's auto server over TCP or TLS, and a TLS 1.3 connector for
//! hyper-util's client (the stacks' TLS baseline, with ALPN).

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::{
    client::legacy::connect::{Connected, Connection},
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use rustls::pki_types::ServerName;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::oneshot,
};
use tokio_rustls::{client::TlsStream, TlsAcceptor, TlsConnector};
use tower::Service;
use weft::handshake::CipherSuite;

use super::{stacks::Tls, Failure, Result};

/// Every response's body.
pub static BODY: [u8; 32] = [b'w'; 32];

/// The servers' one handler: 200 and [`BODY`].
pub async fn hello<B>(_: Request<B>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(&BODY))))
}

/// The TLS baseline of the other examples (tokio-rustls 1.3 with ring,
/// AES-256-GCM, a self-signed ECDSA P-256 certificate, no resumption),
/// offering these ALPN protocols on both ends (the server's first that
/// the client offers is agreed).
pub fn tls_with_alpn(protocols: &[&str]) -> Result<(TlsDial, TlsAcceptor)> {
    let baseline = Tls::generate(CipherSuite::Aes256Gcm)?;
    let acceptor = baseline.acceptor.ok_or_else(|| Failure::new("TLS acceptor"))?;
    let alpn: Vec<Vec<u8>> = protocols.iter().map(|p| p.as_bytes().to_vec()).collect();
    let mut server = (**acceptor.config()).clone();
    server.alpn_protocols = alpn.clone();
    let mut client = (**baseline.connector.config()).clone();
    client.alpn_protocols = alpn;
    let dial = TlsDial {
        connector: TlsConnector::from(Arc::new(client)),
    };
    Ok((dial, TlsAcceptor::from(Arc::new(server))))
}

/// The TCP and TLS server: every connection through hyper-util's auto
/// builder (HTTP/1.1 or h2 from the first bytes), after a TLS handshake
/// with `tls`.
pub async fn serve_hyper(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    stop: oneshot::Receiver<()>,
) -> io::Result<()> {
    let mut stop = std::pin::pin!(stop);
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = &mut stop => return Ok(()),
        };
        tcp.set_nodelay(true)?;
        let tls = tls.clone();
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let service = hyper::service::service_fn(hello);
            let _ = match tls {
                None => builder.serve_connection(TokioIo::new(tcp), service).await,
                Some(tls) => match tls.accept(tcp).await {
                    Ok(stream) => builder.serve_connection(TokioIo::new(stream), service).await,
                    Err(_) => return,
                },
            };
        });
    }
}

/// The TLS baseline's connector for hyper-util: TCP connect, a full TLS
/// 1.3 handshake (server name `localhost`, which the certificate names),
/// h2 when ALPN agreed it.
#[derive(Clone)]
pub struct TlsDial {
    connector: TlsConnector,
}

impl Service<Uri> for TlsDial {
    type Response = TlsIo;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<TlsIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connector = self.connector.clone();
        Box::pin(async move {
            let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("{uri}: no host and port"));
            let authority = uri.authority().ok_or_else(bad)?;
            let addr: SocketAddr = authority.as_str().parse().map_err(|_| bad())?;
            let tcp = TcpStream::connect(addr).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from("localhost")
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            let stream = connector.connect(name, tcp).await?;
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            Ok(TlsIo {
                io: TokioIo::new(stream),
                h2,
            })
        })
    }
}

/// A TLS stream as a hyper-util connection (as hyper-rustls's is).
pub struct TlsIo {
    io: TokioIo<TlsStream<TcpStream>>,
    h2: bool,
}

impl Connection for TlsIo {
    fn connected(&self) -> Connected {
        if self.h2 {
            Connected::new().negotiated_h2()
        } else {
            Connected::new()
        }
    }
}

impl Read for TlsIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl Write for TlsIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
