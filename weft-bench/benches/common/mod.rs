//! What the benches share: the stacks under test and their baselines.
#![allow(dead_code)]

use std::{future::Future, net::SocketAddr, sync::Arc};

use rustls::{
    client::Resumption,
    crypto::{aws_lc_rs as tls_aws_lc, ring as tls_ring, CryptoProvider},
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
    ClientConfig, RootCertStore, ServerConfig, SupportedCipherSuite,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Versions},
    mux,
    stack::{Encrypt, Multiplex, Negotiate, RecordSize, StreamLimit},
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

/// The channel stacks: what the record-layer benches measure.
pub type Dialer = RecordSize<Encrypt<Negotiate<TcpConnector>>>;
pub type Acceptor = RecordSize<Encrypt<Negotiate<TcpAcceptor>>>;

/// The whole stack, whose product is a `Connection`.
pub type Stack<S> = Multiplex<StreamLimit<S>>;

/// The channel stack `channel` with the stream limit and the multiplexer on
/// top: what an application dials or accepts.
pub fn connections<S>(channel: S, max_streams: u32, builder: mux::Builder) -> Stack<S> {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(builder))
        .layer(StreamLimitLayer::new(max_streams))
        .service(channel)
}

pub fn weft_dialer(suite: CipherSuite, records: RecordSizeLayer) -> Dialer {
    ServiceBuilder::new()
        .layer(records)
        .layer(EncryptLayer::new(Identity::from_seed(&[1; 32])).suites([suite]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpConnector::new())
}

pub fn weft_acceptor(suite: CipherSuite, records: RecordSizeLayer) -> Acceptor {
    ServiceBuilder::new()
        .layer(records)
        .layer(EncryptLayer::new(Identity::from_seed(&[2; 32])).suites([suite]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(TcpAcceptor::new())
}

/// Whether `WEFT_BENCH_TLS_PROVIDER=aws-lc-rs` asks for aws-lc-rs in the
/// TLS baseline.
fn aws_lc_provider() -> bool {
    std::env::var("WEFT_BENCH_TLS_PROVIDER").is_ok_and(|p| p == "aws-lc-rs")
}

/// The TLS 1.3 baseline: tokio-rustls with the ring provider (aws-lc-rs,
/// rustls's default, with `WEFT_BENCH_TLS_PROVIDER=aws-lc-rs`), one suite,
/// a self-signed ECDSA P-256 certificate, no resumption.
pub struct Tls {
    pub connector: TlsConnector,
    pub acceptor: TlsAcceptor,
}

impl Tls {
    pub fn new(suite: SupportedCipherSuite) -> Self {
        let base = if aws_lc_provider() {
            tls_aws_lc::default_provider()
        } else {
            tls_ring::default_provider()
        };
        let provider = Arc::new(CryptoProvider {
            cipher_suites: vec![suite],
            ..base
        });
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert_der: CertificateDer<'static> = cert.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert_der.clone()], key)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert_der).unwrap();
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.resumption = Resumption::disabled();
        Self {
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: TlsAcceptor::from(Arc::new(server)),
        }
    }

    pub fn aes128() -> Self {
        Self::new(if aws_lc_provider() {
            tls_aws_lc::cipher_suite::TLS13_AES_128_GCM_SHA256
        } else {
            tls_ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        })
    }

    pub fn chacha() -> Self {
        Self::new(if aws_lc_provider() {
            tls_aws_lc::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256
        } else {
            tls_ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256
        })
    }

    /// The provider's name, for the benches' labels.
    pub fn provider_name() -> &'static str {
        if aws_lc_provider() {
            "aws-lc-rs"
        } else {
            "ring"
        }
    }

    pub async fn connect(&self, addr: SocketAddr) -> tokio_rustls::client::TlsStream<TcpStream> {
        let tcp = TcpStream::connect(addr).await.unwrap();
        tcp.set_nodelay(true).unwrap();
        self.connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap()
    }
}

/// The client's runtime: the bench thread itself.
///
/// The server runs on a runtime of its own ([`server_runtime`]), so each end
/// has its own thread, as two processes would. With both ends in one
/// multi-threaded runtime, a task woken on a busy worker waits in that
/// worker's LIFO slot, where it cannot be stolen: one end's handshake
/// arithmetic then delays the other's, which separate endpoints never see.
pub fn client_runtime() -> tokio::runtime::Runtime {
    if pinned() {
        core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// With `WEFT_BENCH_PIN` set, the client's thread runs on core 0 and the
/// server's on core 1.
fn pinned() -> bool {
    std::env::var_os("WEFT_BENCH_PIN").is_some()
}

/// The server's runtime: one worker thread of its own.
pub fn server_runtime() -> tokio::runtime::Runtime {
    let pin = pinned();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("server")
        .on_thread_start(move || {
            if pin {
                core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
            }
        })
        .enable_all()
        .build()
        .unwrap()
}

/// A loopback server that runs `serve` on every accepted connection (on the
/// runtime it is started from).
pub async fn server<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(serve(tcp));
        }
    });
    addr
}
