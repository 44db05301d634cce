//! Handshake capacity: how many handshakes one acceptor core completes a
//! second, with many dialers at once. The acceptor runs on a thread of
//! its own (one core); the dialers, on the other, dial over and over, each
//! reading the first byte the acceptor sends once its handshake is done
//! (over weft, the answer to its first stream; over TLS, a byte after the
//! handshake, which also carries its session tickets). The figure is
//! handshakes per second of the acceptor's own CPU time (its thread's, from
//! /proc), so that the dialers' side, which shares the machine, does not
//! set it; handshakes per wall second are printed too.
//!
//! cargo run --release -p weft-bench --bin handshakes                        # weft, 1-RTT
//! cargo run --release -p weft-bench --bin handshakes -- --mode weft-0rtt    # weft, 0-RTT with a ticket
//! cargo run --release -p weft-bench --bin handshakes -- --mode tls-mutual   # TLS 1.3, full, client certificates
//! cargo run --release -p weft-bench --bin handshakes -- --mode tls-resumed  # TLS 1.3, resumed, client certificates
//!
//! Both TLS modes use rustls with aws-lc-rs (its default provider) and
//! AES-256-GCM, as weft's suite here; both weft modes pin the acceptor,
//! and both sides prove who they are in every mode (weft is always mutual).

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use rustls::{
    client::Resumption,
    crypto::aws_lc_rs,
    pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName},
    server::WebPkiClientVerifier,
    ClientConfig, RootCertStore, ServerConfig,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tower::ServiceBuilder;
use weft::{
    handshake::{CipherSuite, Handshake, HandshakeExt, Versions},
    mux,
    transport::{TcpAcceptor, TcpConnector},
    EncryptLayer, Identity, MultiplexLayer, NegotiateLayer, RecordSizeLayer, StreamLimitLayer,
};
use weft_bench::{Context, Failure, Result};

#[derive(Parser, Debug)]
#[command(about = "Handshakes one acceptor core completes a second, many dialers at once")]
struct Args {
    #[arg(long, value_enum, default_value = "weft")]
    mode: HandshakeMode,
    /// Dialers at once.
    #[arg(long, default_value_t = 32)]
    dialers: usize,
    /// Seconds measured.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Seconds before measuring, while every dialer prepares (learns the
    /// box key and a ticket, or gets its TLS tickets).
    #[arg(long, default_value_t = 1.0)]
    warm_up: f64,
    /// Print one JSON object as the last line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HandshakeMode {
    /// weft, one round trip, signatures both ways.
    Weft,
    /// weft, the dialer's first stream in its Setup, with a ticket.
    #[value(name = "weft-0rtt")]
    Weft0Rtt,
    /// TLS 1.3 full handshakes with client certificates.
    TlsMutual,
    /// TLS 1.3 resumed handshakes (PSK with ECDHE) with client certificates.
    TlsResumed,
}

impl HandshakeMode {
    fn name(self) -> &'static str {
        match self {
            Self::Weft => "weft",
            Self::Weft0Rtt => "weft-0rtt",
            Self::TlsMutual => "tls-mutual",
            Self::TlsResumed => "tls-resumed",
        }
    }
}

fn main() {
    weft_bench::exit_on_failure("handshakes", run);
}

/// This thread's CPU seconds so far (user and system, from
/// /proc/thread-self/stat in clock ticks of 10 ms).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// What the acceptor's thread counted while measuring.
#[derive(Default)]
struct Counted {
    handshakes: AtomicU64,
    measuring: AtomicBool,
}

fn run() -> Result<()> {
    let args = Args::parse();
    if args.dialers == 0 || args.seconds <= 0.0 {
        return Err(Failure::new("--dialers and --seconds must be positive"));
    }
    let sides = Sides::new(args.mode)?;
    let counted = Arc::new(Counted::default());
    // The acceptor: a runtime on one thread, which counts its own CPU time.
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (cpu_tx, mut cpu_rx) = tokio::sync::mpsc::unbounded_channel::<std::sync::mpsc::Sender<f64>>();
    let server = {
        let (sides, counted) = (sides.clone(), counted.clone());
        std::thread::Builder::new()
            .name("acceptor".into())
            .spawn(move || -> Result<()> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("the acceptor's runtime")?;
                rt.block_on(async move {
                    let listener = TcpListener::bind("127.0.0.1:0").await.context("binding")?;
                    addr_tx.send(listener.local_addr().context("address")?).ok();
                    tokio::spawn(accept_loop(listener, sides, counted));
                    // Answer each request for this thread's CPU time so far.
                    while let Some(reply) = cpu_rx.recv().await {
                        let _ = reply.send(thread_cpu_seconds());
                    }
                    Ok(())
                })
            })
            .context("the acceptor's thread")?
    };
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| Failure::new("the acceptor did not start"))?;
    let acceptor_cpu = || -> Result<f64> {
        let (tx, rx) = std::sync::mpsc::channel();
        cpu_tx
            .send(tx)
            .map_err(|_| Failure::new("the acceptor stopped"))?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| Failure::new("the acceptor did not answer"))
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("the dialers' runtime")?;
    let measured = rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let dialers: Vec<_> = (0..args.dialers)
            .map(|_| tokio::spawn(dial_loop(sides.clone(), addr, stop.clone())))
            .collect();
        // One unmeasured second: every dialer has prepared, the acceptor's
        // keys are made.
        tokio::time::sleep(Duration::from_secs_f64(args.warm_up)).await;
        let (cpu0, wall0) = (acceptor_cpu()?, Instant::now());
        counted.handshakes.store(0, Ordering::SeqCst);
        counted.measuring.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
        let handshakes = counted.handshakes.load(Ordering::SeqCst);
        let (cpu1, wall) = (acceptor_cpu()?, wall0.elapsed());
        counted.measuring.store(false, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        for dialer in dialers {
            dialer.await.context("a dialer")??;
        }
        Ok::<_, Failure>((handshakes, cpu1 - cpu0, wall))
    })?;
    drop(server);
    let (handshakes, cpu, wall) = measured;
    let per_core = handshakes as f64 / cpu.max(0.01);
    let per_wall = handshakes as f64 / wall.as_secs_f64();
    if args.json {
        weft_bench::print_json(&serde_json::json!({
            "mode": args.mode.name(),
            "dialers": args.dialers,
            "handshakes": handshakes,
            "acceptor_cpu_s": cpu,
            "wall_s": wall.as_secs_f64(),
            "per_core_second": per_core.round(),
            "per_second": per_wall.round(),
        }));
    } else {
        println!(
            "{}: {handshakes} handshakes in {:.2} s with {} dialers: {per_core:.0} per second of the acceptor's core \
             ({cpu:.2} s of CPU), {per_wall:.0} per wall second",
            args.mode.name(),
            wall.as_secs_f64(),
            args.dialers,
        );
    }
    Ok(())
}

/// weft's whole stack over `base`.
type WeftStack<B> = weft::stack::Multiplex<
    weft::stack::StreamLimit<weft::stack::RecordSize<weft::stack::Encrypt<weft::stack::Negotiate<B>>>>,
>;

/// weft's layers with `encrypt` (AES-256-GCM) over `base`, as both ends
/// use them.
fn weft_stack<B>(encrypt: EncryptLayer, base: B) -> WeftStack<B> {
    ServiceBuilder::new()
        .layer(MultiplexLayer::new(mux::Builder::new()))
        .layer(StreamLimitLayer::new(100))
        .layer(RecordSizeLayer::dynamic())
        .layer(encrypt.suites([CipherSuite::Aes256Gcm]))
        .layer(NegotiateLayer::new(Versions::CURRENT))
        .service(base)
}

/// Both ends of one mode.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // two of each, made once
enum Sides {
    Weft {
        dialer: WeftStack<TcpConnector>,
        acceptor: WeftStack<TcpAcceptor>,
        peer: weft::handshake::PeerId,
        early: bool,
    },
    Tls {
        connector: TlsConnector,
        acceptor: TlsAcceptor,
    },
}

const REQUEST: &[u8] = b"hello";

impl Sides {
    fn new(mode: HandshakeMode) -> Result<Self> {
        Ok(match mode {
            HandshakeMode::Weft | HandshakeMode::Weft0Rtt => {
                let identity = Identity::generate();
                let peer = identity.peer_id();
                let early = mode == HandshakeMode::Weft0Rtt;
                let mut accepting = EncryptLayer::new(identity);
                if early {
                    accepting = accepting.accept_early_data().early_data_budget(u64::MAX / 2);
                }
                Sides::Weft {
                    dialer: weft_stack(EncryptLayer::new(Identity::generate()), TcpConnector::new()),
                    acceptor: weft_stack(accepting, TcpAcceptor::new()),
                    peer,
                    early,
                }
            }
            HandshakeMode::TlsMutual | HandshakeMode::TlsResumed => {
                let provider = Arc::new(rustls::crypto::CryptoProvider {
                    cipher_suites: vec![aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384],
                    ..aws_lc_rs::default_provider()
                });
                let certificate = |name: &str| -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
                    let cert =
                        rcgen::generate_simple_self_signed(vec![name.to_owned()]).context("a certificate")?;
                    Ok((
                        cert.cert.der().clone(),
                        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der())),
                    ))
                };
                let (server_cert, server_key) = certificate("localhost")?;
                let (client_cert, client_key) = certificate("client")?;
                let roots = |cert: &CertificateDer<'static>| -> Result<Arc<RootCertStore>> {
                    let mut roots = RootCertStore::empty();
                    roots.add(cert.clone()).context("a root")?;
                    Ok(Arc::new(roots))
                };
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots(&client_cert)?, provider.clone())
                        .build()
                        .context("the client verifier")?;
                let server = ServerConfig::builder_with_provider(provider.clone())
                    .with_protocol_versions(&[&rustls::version::TLS13])
                    .context("the TLS server")?
                    .with_client_cert_verifier(verifier)
                    .with_single_cert(vec![server_cert.clone()], server_key)
                    .context("the TLS server")?;
                let mut client = ClientConfig::builder_with_provider(provider)
                    .with_protocol_versions(&[&rustls::version::TLS13])
                    .context("the TLS client")?
                    .with_root_certificates(roots(&server_cert)?)
                    .with_client_auth_cert(vec![client_cert], client_key)
                    .context("the TLS client")?;
                if mode == HandshakeMode::TlsMutual {
                    client.resumption = Resumption::disabled();
                }
                Sides::Tls {
                    connector: TlsConnector::from(Arc::new(client)),
                    acceptor: TlsAcceptor::from(Arc::new(server)),
                }
            }
        })
    }

    /// The same, with a weft dialer of a new identity.
    fn for_one_dialer(&self) -> Self {
        match self {
            Sides::Weft {
                acceptor,
                peer,
                early,
                ..
            } => Sides::Weft {
                dialer: weft_stack(EncryptLayer::new(Identity::generate()), TcpConnector::new()),
                acceptor: acceptor.clone(),
                peer: *peer,
                early: *early,
            },
            tls => tls.clone(),
        }
    }

    /// Before measuring: a weft dialer that goes early learns the box key
    /// and gets a ticket; a TLS client that resumes gets its tickets.
    async fn prepare(&self, addr: SocketAddr) -> Result<()> {
        for _ in 0..2 {
            self.dial(addr).await?;
        }
        Ok(())
    }

    /// One dial, to the first byte.
    async fn dial(&self, addr: SocketAddr) -> Result<()> {
        match self {
            Sides::Weft {
                dialer, peer, early, ..
            } => {
                let mut handshake = Handshake::dial(weft::transport::Target::from(addr)).expect_peer(*peer);
                if *early {
                    handshake = handshake.early_stream_finished(Bytes::from_static(REQUEST));
                }
                let connection = dialer.clone().handshake(handshake).await.context("a weft dial")?;
                let mut stream = match connection.take_early_stream() {
                    Some(stream) => stream,
                    None => connection
                        .accept()
                        .await
                        .context("the greeting")?
                        .ok_or_else(|| Failure::new("the acceptor closed without a greeting"))?,
                };
                stream.read_u8().await.context("the first byte")?;
                Ok(())
            }
            Sides::Tls { connector, .. } => {
                let tcp = TcpStream::connect(addr).await.context("connecting")?;
                tcp.set_nodelay(true).context("TCP_NODELAY")?;
                let name = ServerName::try_from("localhost").context("a name")?;
                let mut tls = connector.connect(name, tcp).await.context("a TLS handshake")?;
                tls.read_u8().await.context("the first byte")?;
                Ok(())
            }
        }
    }
}

/// One dialer, as one client of many: over weft an identity of its own,
/// which learns the acceptor's box key and a ticket before the measured
/// dials; over TLS the one client configuration (whose session cache
/// resuming clients share).
async fn dial_loop(sides: Sides, addr: SocketAddr, stop: Arc<AtomicBool>) -> Result<()> {
    let sides = sides.for_one_dialer();
    sides.prepare(addr).await?;
    while !stop.load(Ordering::Relaxed) {
        sides.dial(addr).await?;
    }
    Ok(())
}

async fn accept_loop(listener: TcpListener, sides: Sides, counted: Arc<Counted>) {
    while let Ok((tcp, _)) = listener.accept().await {
        let (sides, counted) = (sides.clone(), counted.clone());
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            match sides {
                Sides::Weft { acceptor, early, .. } => {
                    let Ok(connection) = acceptor.clone().accept_transport(tcp).await else {
                        return;
                    };
                    count(&counted);
                    // The first stream: the early one (answered), or one
                    // of ours that greets.
                    let stream = if early {
                        connection.accept().await.ok().flatten()
                    } else {
                        connection.open().await.ok()
                    };
                    if let Some(mut stream) = stream {
                        let _ = stream.write_all(b"!").await;
                        let _ = stream.shutdown().await;
                        let _ = connection.closed().await;
                    }
                }
                Sides::Tls { acceptor, .. } => {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    count(&counted);
                    let _ = tls.write_all(b"!").await;
                    let _ = tls.flush().await;
                    let mut sink = [0u8; 64];
                    let _ = tls.read(&mut sink).await;
                }
            }
        });
    }
}

fn count(counted: &Counted) {
    if counted.measuring.load(Ordering::Relaxed) {
        counted.handshakes.fetch_add(1, Ordering::Relaxed);
    }
}
