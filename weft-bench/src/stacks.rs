//! The stacks under test: weft's layers, and the TLS 1.3 and raw TCP
//! baselines.

use std::{fmt, net::SocketAddr, str::FromStr, sync::Arc};

use rustls::{
    client::Resumption,
    crypto::{aws_lc_rs as tls_aws_lc, ring as tls_ring, CryptoProvider},
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
    ClientConfig, RootCertStore, ServerConfig,
};
use tokio::net::TcpStream;
use tokio_rustls::{client::TlsStream, TlsAcceptor, TlsConnector};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, PeerId, Versions},
    mux::{self, Connection},
    stack::{Encrypt, Multiplex, Negotiate, RecordSize, StreamLimit},
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};

use super::{Context, Failure, Result};

/// The record sizes weft accepts (`RecordSizeLayer` clamps to them).
const MIN_RECORD: usize = 512;
const MAX_RECORD: usize = 64 * 1024;

/// What carries the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// weft's full stack, multiplexed.
    Weft,
    /// Raw tokio TCP, one connection per stream.
    Tcp,
    /// tokio-rustls TLS 1.3, one connection per stream.
    Tls,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Weft => "weft",
            Mode::Tcp => "tcp",
            Mode::Tls => "tls",
        }
    }
}

/// A `--suite` value: one of weft's suites.
pub fn parse_suite(name: &str) -> Result<CipherSuite, String> {
    CipherSuite::from_str(name).map_err(|e| e.to_string())
}

/// A `--records` value: `dynamic` or `fixed:BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    Dynamic,
    Fixed(usize),
}

impl Records {
    pub fn layer(self) -> RecordSizeLayer {
        match self {
            Records::Dynamic => RecordSizeLayer::dynamic(),
            Records::Fixed(bytes) => RecordSizeLayer::fixed(bytes),
        }
    }
}

impl FromStr for Records {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "dynamic" {
            return Ok(Records::Dynamic);
        }
        let bytes = s
            .strip_prefix("fixed:")
            .and_then(|b| b.parse::<usize>().ok())
            .filter(|b| (MIN_RECORD..=MAX_RECORD).contains(b))
            .ok_or_else(|| {
                format!(
                    "expected `dynamic` or `fixed:BYTES` with {MIN_RECORD} to {MAX_RECORD} bytes, not {s:?}"
                )
            })?;
        Ok(Records::Fixed(bytes))
    }
}

impl fmt::Display for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Records::Dynamic => f.write_str("dynamic"),
            Records::Fixed(bytes) => write!(f, "fixed:{bytes}"),
        }
    }
}

/// weft's whole stack over a base service `B`: its product is a
/// [`Connection`].
pub type WeftStack<B> = Multiplex<StreamLimit<RecordSize<Encrypt<Negotiate<B>>>>>;
pub type WeftDialer = WeftStack<TcpConnector>;
pub type WeftAcceptor = WeftStack<TcpAcceptor>;

/// The one stack, on either side: multiplexing on top, the stream limit
/// it enforces (and declares to the peer) beneath it, then records,
/// encryption with one suite, and the Setup exchange over `base`.
pub fn weft_stack<B>(
    identity: Identity,
    suite: CipherSuite,
    records: Records,
    max_streams: u32,
    base: B,
) -> WeftStack<B> {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(max_streams))
        .layer(records.layer())
        .layer(EncryptLayer::new(identity).suites([suite]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(base)
}

/// weft's dialing stack, allowing the server `max_streams` at once.
pub fn weft_dialer(identity: Identity, suite: CipherSuite, records: Records, max_streams: u32) -> WeftDialer {
    weft_stack(identity, suite, records, max_streams, TcpConnector::new())
}

/// weft's accepting stack, allowing `max_streams` at once per connection.
pub fn weft_acceptor(
    identity: Identity,
    suite: CipherSuite,
    records: Records,
    max_streams: u32,
) -> WeftAcceptor {
    weft_stack(identity, suite, records, max_streams, TcpAcceptor::new())
}

/// Dials `addr` and checks that the peer is `peer`.
pub async fn weft_dial(dialer: &mut WeftDialer, addr: SocketAddr, peer: PeerId) -> Result<Connection> {
    dialer
        .handshake(Handshake::dial(addr).expect_peer(peer))
        .await
        .context(format_args!("weft handshake with {addr}"))
}

/// Which crypto provider the TLS baseline's rustls uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsProvider {
    /// ring, as in the baselines since the start.
    #[default]
    Ring,
    /// aws-lc-rs, rustls's default provider.
    AwsLc,
}

impl FromStr for TlsProvider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ring" => Ok(Self::Ring),
            "aws-lc-rs" => Ok(Self::AwsLc),
            other => Err(format!("unknown TLS provider {other:?}: ring or aws-lc-rs")),
        }
    }
}

impl fmt::Display for TlsProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ring => "ring",
            Self::AwsLc => "aws-lc-rs",
        })
    }
}

/// A TLS 1.3 cipher suite for the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsSuite {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl TlsSuite {
    /// The TLS suite matching weft's `suite`.
    pub fn matching(suite: CipherSuite) -> Result<Self> {
        match suite {
            CipherSuite::Aes256Gcm => Ok(Self::Aes256Gcm),
            CipherSuite::ChaCha20Poly1305 => Ok(Self::ChaCha20Poly1305),
            other => Err(Failure::new(format_args!(
                "TLS 1.3 has no {other} suite: use aes256gcm or chacha20poly1305 with the tls baseline, \
                 or name its suite with --tls-suite"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Aes128Gcm => "aes128gcm",
            Self::Aes256Gcm => "aes256gcm",
            Self::ChaCha20Poly1305 => "chacha20poly1305",
        }
    }
}

impl FromStr for TlsSuite {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Self::Aes128Gcm, Self::Aes256Gcm, Self::ChaCha20Poly1305]
            .into_iter()
            .find(|suite| suite.name() == s)
            .ok_or_else(|| format!("unknown TLS suite {s:?}: aes128gcm, aes256gcm or chacha20poly1305"))
    }
}

impl fmt::Display for TlsSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The TLS baseline's suite and provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlsChoice {
    pub suite: TlsSuite,
    pub provider: TlsProvider,
}

impl TlsChoice {
    /// The suite matching weft's `suite`, with ring.
    pub fn matching(suite: CipherSuite) -> Result<Self> {
        Ok(Self {
            suite: TlsSuite::matching(suite)?,
            provider: TlsProvider::Ring,
        })
    }
}

impl fmt::Display for TlsChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", self.suite, self.provider)
    }
}

/// The TLS 1.3 baseline: tokio-rustls with ring (or aws-lc-rs), one suite,
/// a self-signed ECDSA P-256 certificate, no resumption (every dial is a
/// full handshake).
#[derive(Clone)]
pub struct Tls {
    pub connector: TlsConnector,
    /// Only on the side that made the certificate.
    pub acceptor: Option<TlsAcceptor>,
    /// The certificate, which the client trusts: the server's "key".
    pub certificate: CertificateDer<'static>,
}

impl Tls {
    fn provider(choice: TlsChoice) -> Arc<CryptoProvider> {
        Arc::new(match choice.provider {
            TlsProvider::Ring => CryptoProvider {
                cipher_suites: vec![match choice.suite {
                    TlsSuite::Aes128Gcm => tls_ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
                    TlsSuite::Aes256Gcm => tls_ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
                    TlsSuite::ChaCha20Poly1305 => tls_ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
                }],
                ..tls_ring::default_provider()
            },
            TlsProvider::AwsLc => CryptoProvider {
                cipher_suites: vec![match choice.suite {
                    TlsSuite::Aes128Gcm => tls_aws_lc::cipher_suite::TLS13_AES_128_GCM_SHA256,
                    TlsSuite::Aes256Gcm => tls_aws_lc::cipher_suite::TLS13_AES_256_GCM_SHA384,
                    TlsSuite::ChaCha20Poly1305 => tls_aws_lc::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
                }],
                ..tls_aws_lc::default_provider()
            },
        })
    }

    /// Both ends, with a fresh certificate, ring, and the TLS suite matching
    /// weft's `suite`.
    pub fn generate(suite: CipherSuite) -> Result<Self> {
        Self::generate_with(TlsChoice::matching(suite)?)
    }

    /// Both ends, with a fresh certificate.
    pub fn generate_with(choice: TlsChoice) -> Result<Self> {
        let provider = Self::provider(choice);
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .context("making a self-signed certificate")?;
        let certificate: CertificateDer<'static> = cert.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        let server = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("configuring the TLS server")?
            .with_no_client_auth()
            .with_single_cert(vec![certificate.clone()], key)
            .context("configuring the TLS server")?;
        let mut tls = Self::trusting(choice, certificate)?;
        tls.acceptor = Some(TlsAcceptor::from(Arc::new(server)));
        Ok(tls)
    }

    /// The client end, trusting one certificate.
    pub fn trusting(choice: TlsChoice, certificate: CertificateDer<'static>) -> Result<Self> {
        let mut roots = RootCertStore::empty();
        roots
            .add(certificate.clone())
            .context("trusting the server's certificate")?;
        let mut client = ClientConfig::builder_with_provider(Self::provider(choice))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("configuring the TLS client")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.resumption = Resumption::disabled();
        Ok(Self {
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: None,
            certificate,
        })
    }

    /// The certificate as hex, for `--peer-key`.
    pub fn certificate_hex(&self) -> String {
        self.certificate.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A certificate from [`Tls::certificate_hex`].
    pub fn parse_certificate(hex: &str) -> Result<CertificateDer<'static>> {
        let bad = || Failure::new("the TLS server's --peer-key is the hex certificate it printed");
        if !hex.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>>>()?;
        Ok(CertificateDer::from(bytes))
    }

    /// TCP connect and a full TLS 1.3 handshake.
    pub async fn connect(&self, addr: SocketAddr) -> Result<TlsStream<TcpStream>> {
        let tcp = tcp_connect(addr).await?;
        let name = ServerName::try_from("localhost").context("server name")?;
        self.connector
            .connect(name, tcp)
            .await
            .context(format_args!("TLS handshake with {addr}"))
    }
}

/// A TCP connection with Nagle off, as every stack here uses.
pub async fn tcp_connect(addr: SocketAddr) -> Result<TcpStream> {
    let tcp = TcpStream::connect(addr)
        .await
        .context(format_args!("connecting to {addr}"))?;
    tcp.set_nodelay(true).context("setting TCP_NODELAY")?;
    Ok(tcp)
}
