//! Dial latency, as the Vanadium seed's histogram: from TCP connect through
//! the handshake to the first byte the server sends, one dial at a time.
//!
//! Each connection is then closed gracefully, outside the dial's time, and
//! the next dial starts once the close is over: a weft connection's close
//! (its go-away and close records, answered by the server) ran during the
//! next dial before, and a TLS stream's ran inside its own. The close is
//! timed on its own (`close_us`).

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpListener,
    sync::mpsc,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    mux::Connection,
    Identity,
};

use super::{
    stacks::{
        tcp_connect, weft_acceptor, weft_dial, weft_dialer, Mode, Records, Tls, TlsChoice, TlsProvider,
    },
    stats::{round3, Histogram, Sample},
    Context, Failure, Result,
};

/// Dials before the measured ones.
const WARM_UP: usize = 10;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub mode: Mode,
    /// The TLS baseline's crypto provider.
    pub tls_provider: TlsProvider,
    /// Each dial in microseconds.
    pub dials: Sample,
    /// Each close after a dial, in microseconds: from the first byte until
    /// the connection is closed (weft) or the server's end is read (TCP,
    /// TLS).
    pub closes: Sample,
}

impl Outcome {
    pub fn json(&self) -> serde_json::Value {
        let d = &self.dials;
        serde_json::json!({
            "mode": self.mode.name(),
            "tls_provider": match self.mode {
                Mode::Tls => Some(self.tls_provider.to_string()),
                _ => None,
            },
            "count": d.len(),
            "dial_us": {
                "min": round3(d.min()),
                "avg": round3(d.avg()),
                "p50": round3(d.percentile(50.0)),
                "p99": round3(d.percentile(99.0)),
                "max": round3(d.max()),
            },
            "close_us": { "p50": round3(self.closes.percentile(50.0)) },
        })
    }

    pub fn histogram(&self) -> Histogram {
        Histogram::new(&self.dials)
    }

    pub fn print(&self) {
        let what = match self.mode {
            Mode::Weft => "weft (AES-256-GCM, Ed25519 identities, key pinned)".to_owned(),
            Mode::Tls => format!(
                "TLS 1.3 (AES-256-GCM, ECDSA P-256 certificate, no resumption, {})",
                self.tls_provider
            ),
            Mode::Tcp => "TCP connect".to_owned(),
        };
        println!("dial: {what}, connect to first byte");
        print!("{}", self.histogram().render(&self.dials, "µs"));
        println!(
            "p50 {:.0} µs, p99 {:.0} µs; the close after it (untimed in the dial): p50 {:.0} µs",
            self.dials.percentile(50.0),
            self.dials.percentile(99.0),
            self.closes.percentile(50.0)
        );
    }
}

/// Over weft: once the connection is up, the server opens a stream and
/// writes one byte on it (one frame, with the open and the end), then
/// waits for the dialer to leave.
async fn greet_weft(conn: Connection) -> Result<()> {
    let mut stream = conn.open().await.context("opening the greeting stream")?;
    stream.write_all(b"!").await.context("greeting")?;
    stream.shutdown().await.context("greeting")?;
    let _ = conn.closed().await;
    Ok(())
}

/// The first byte over weft: the server's greeting stream.
async fn first_weft_byte(conn: &Connection) -> Result<()> {
    let stream = conn.accept().await.context("accepting the greeting")?;
    let mut stream = stream.ok_or_else(|| Failure::new("the server closed without a greeting"))?;
    first_byte(&mut stream).await
}

/// After the handshake, the server writes one byte, then waits for the
/// dialer to leave.
async fn greet<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> Result<()> {
    io.write_all(b"!").await.context("greeting")?;
    io.flush().await.context("greeting")?;
    let mut sink = [0u8; 64];
    let _ = io.read(&mut sink).await;
    Ok(())
}

async fn first_byte<S: AsyncRead + Unpin>(io: &mut S) -> Result<()> {
    io.read_u8().await.context("reading the first byte")?;
    Ok(())
}

/// Ends our side (a TLS close_notify, then FIN) and reads until the
/// server's end. (The server leaves without close_notify: that read error
/// is its end too.)
async fn close<S: AsyncRead + AsyncWrite + Unpin>(io: &mut S) {
    let _ = io.shutdown().await;
    let mut sink = [0u8; 64];
    while matches!(io.read(&mut sink).await, Ok(1..)) {}
}

/// `count` dials of `mode` against a loopback server on a thread of its
/// own (TLS with `tls_provider`).
pub fn run_local(mode: Mode, count: usize, tls_provider: TlsProvider) -> Result<Outcome> {
    if count == 0 {
        return Err(Failure::new("--count must be at least 1"));
    }
    let suite = CipherSuite::Aes256Gcm;
    let server_rt = super::server_runtime()?;
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .context("binding loopback")?;
    let addr = listener.local_addr().context("local address")?;
    let identity = Identity::generate();
    let peer = identity.peer_id();
    let tls = match mode {
        Mode::Tls => Some(Tls::generate_with(TlsChoice {
            provider: tls_provider,
            ..TlsChoice::matching(suite)?
        })?),
        _ => None,
    };
    let (failures, mut failed) = mpsc::unbounded_channel::<Failure>();
    let server_tls = tls.clone();
    server_rt.spawn(async move {
        let acceptor = weft_acceptor(identity, suite, Records::Dynamic, 100);
        let tls = server_tls.and_then(|t| t.acceptor);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let (failures, tls) = (failures.clone(), tls.clone());
            let mut acceptor = acceptor.clone();
            tokio::spawn(async move {
                let served = async {
                    match (mode, tls) {
                        (Mode::Tcp, _) => greet(tcp).await,
                        (Mode::Tls, Some(tls)) => {
                            greet(tls.accept(tcp).await.context("TLS handshake")?).await
                        }
                        (Mode::Weft, _) => {
                            greet_weft(acceptor.accept_transport(tcp).await.context("weft handshake")?).await
                        }
                        (Mode::Tls, None) => Err(Failure::new("TLS acceptor")),
                    }
                };
                if let Err(failure) = served.await {
                    let _ = failures.send(failure);
                }
            });
        }
    });
    let outcome = super::client_runtime()?.block_on(async move {
        // In a task of its own, as an application's would be (see ping.rs:
        // a `block_on` future woken by another task costs an extra
        // `epoll_wait` per wake-up, and weft's first byte comes through
        // the connection's driver task).
        let dials = tokio::spawn(async move {
            let mut dialer = weft_dialer(Identity::generate(), suite, Records::Dynamic, 100);
            let (mut dials, mut closes) = (Vec::with_capacity(count), Vec::with_capacity(count));
            for i in 0..WARM_UP + count {
                let began = Instant::now();
                let dialled;
                match (mode, &tls) {
                    (Mode::Tcp, _) => {
                        let mut io = tcp_connect(addr).await?;
                        first_byte(&mut io).await?;
                        dialled = Instant::now();
                        close(&mut io).await;
                    }
                    (Mode::Tls, Some(tls)) => {
                        let mut io = tls.connect(addr).await?;
                        first_byte(&mut io).await?;
                        dialled = Instant::now();
                        close(&mut io).await;
                    }
                    (Mode::Weft, _) => {
                        let conn = weft_dial(&mut dialer, addr, peer).await?;
                        first_weft_byte(&conn).await?;
                        dialled = Instant::now();
                        conn.go_away();
                        let _ = conn.closed().await;
                    }
                    (Mode::Tls, None) => return Err(Failure::new("TLS connector")),
                }
                if i >= WARM_UP {
                    let micros = |d: Duration| d.as_secs_f64() * 1e6;
                    dials.push(micros(dialled - began));
                    closes.push(micros(dialled.elapsed()));
                }
            }
            Ok(Outcome {
                mode,
                tls_provider,
                dials: Sample::new(dials),
                closes: Sample::new(closes),
            })
        });
        tokio::select! {
            outcome = dials => outcome.context("the client's task")?,
            Some(failure) = failed.recv() => Err(Failure::new(format_args!("server: {failure}"))),
        }
    });
    server_rt.shutdown_timeout(Duration::from_secs(1));
    outcome
}
