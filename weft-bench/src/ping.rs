//! Round trips of a small message on one long-lived connection (one weft
//! stream), the OpenConnect thread's `ping` comparison.

use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpListener,
    sync::oneshot,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    Identity,
};

use super::{
    stacks::{tcp_connect, weft_acceptor, weft_dial, weft_dialer, Records, Tls},
    stats::{round3, Sample},
    Context, Failure, Result,
};

/// What carries the pings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PingMode {
    Tcp,
    /// A weft stream, AES-256-GCM.
    Weft,
    /// A weft stream without encryption.
    WeftPlaintext,
    /// TLS 1.3, AES-256-GCM.
    Tls,
}

impl PingMode {
    pub fn name(self) -> &'static str {
        match self {
            PingMode::Tcp => "tcp",
            PingMode::Weft => "weft",
            PingMode::WeftPlaintext => "weft-plaintext",
            PingMode::Tls => "tls",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub mode: PingMode,
    pub count: usize,
    pub size: usize,
    /// Pause between round trips (zero: back to back).
    pub interval: Duration,
}

/// Round trips before the measured ones, to warm caches and windows.
const WARM_UP: usize = 10;

#[derive(Debug, Clone)]
pub struct Outcome {
    pub config: Config,
    /// Round trips in microseconds.
    pub rtts: Sample,
    pub seconds: f64,
}

impl Outcome {
    pub fn json(&self) -> serde_json::Value {
        let r = &self.rtts;
        serde_json::json!({
            "mode": self.config.mode.name(),
            "count": r.len(),
            "size": self.config.size,
            "rtt_us": {
                "min": round3(r.min()),
                "avg": round3(r.avg()),
                "max": round3(r.max()),
                "mdev": round3(r.mdev()),
                "p50": round3(r.percentile(50.0)),
                "p99": round3(r.percentile(99.0)),
            },
        })
    }

    /// As ping prints its summary, in milliseconds.
    pub fn print(&self) {
        let r = &self.rtts;
        let ms = |us: f64| us / 1e3;
        println!("--- {} ping statistics ---", self.config.mode.name());
        println!(
            "{} round trips of {} bytes, time {:.0}ms",
            r.len(),
            self.config.size,
            self.seconds * 1e3
        );
        println!(
            "rtt min/avg/max/mdev = {:.3}/{:.3}/{:.3}/{:.3} ms",
            ms(r.min()),
            ms(r.avg()),
            ms(r.max()),
            ms(r.mdev())
        );
        println!(
            "rtt p50/p99 = {:.3}/{:.3} ms",
            ms(r.percentile(50.0)),
            ms(r.percentile(99.0))
        );
    }
}

/// An echo server and the client, each on its own thread, over loopback.
pub fn run_local(config: &Config) -> Result<Outcome> {
    if config.size == 0 || config.count == 0 {
        return Err(Failure::new("--size and --count must be at least 1"));
    }
    let server_rt = super::server_runtime()?;
    let listener = server_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .context("binding loopback")?;
    let addr = listener.local_addr().context("local address")?;
    let suite = match config.mode {
        PingMode::WeftPlaintext => CipherSuite::Plaintext,
        _ => CipherSuite::Aes256Gcm,
    };
    let tls = match config.mode {
        PingMode::Tls => Some(Tls::generate(suite)?),
        _ => None,
    };
    let server_identity = Identity::generate();
    let peer = server_identity.peer_id();
    let (failed_tx, failed) = oneshot::channel();
    let mode = config.mode;
    let server_tls = tls.clone();
    server_rt.spawn(async move {
        let served = async {
            let (tcp, _) = listener.accept().await.context("accepting")?;
            tcp.set_nodelay(true).context("TCP_NODELAY")?;
            match mode {
                PingMode::Tcp => echo(tcp).await,
                PingMode::Tls => {
                    let acceptor = server_tls
                        .and_then(|t| t.acceptor)
                        .ok_or_else(|| Failure::new("TLS acceptor"))?;
                    echo(acceptor.accept(tcp).await.context("TLS handshake")?).await
                }
                PingMode::Weft | PingMode::WeftPlaintext => {
                    let mut acceptor = weft_acceptor(server_identity, suite, Records::Dynamic, 1);
                    let conn = acceptor.accept_transport(tcp).await.context("weft handshake")?;
                    match conn.accept().await.context("accepting the stream")? {
                        Some(stream) => echo(stream).await,
                        None => Ok(()),
                    }
                }
            }
        };
        if let Err(failure) = served.await {
            let _ = failed_tx.send(failure);
        }
    });
    let config = *config;
    let outcome = super::client_runtime()?.block_on(async move {
        // In a task of its own, as an application's would be: a `block_on`
        // future woken by another task costs tokio's current-thread
        // scheduler an extra non-blocking `epoll_wait` per wake-up.
        let pings = tokio::spawn(async move {
            match config.mode {
                PingMode::Tcp => pings(tcp_connect(addr).await?, &config).await,
                PingMode::Tls => {
                    let tls = tls.ok_or_else(|| Failure::new("TLS connector"))?;
                    pings(tls.connect(addr).await?, &config).await
                }
                PingMode::Weft | PingMode::WeftPlaintext => {
                    let mut dialer = weft_dialer(Identity::generate(), suite, Records::Dynamic, 1);
                    let conn = weft_dial(&mut dialer, addr, peer).await?;
                    let stream = conn.open().await.context("opening a stream")?;
                    pings(stream, &config).await
                }
            }
        });
        tokio::select! {
            outcome = pings => outcome.context("the client's task")?,
            Ok(failure) = failed => Err(Failure::new(format_args!("server: {failure}"))),
        }
    });
    server_rt.shutdown_timeout(Duration::from_secs(1));
    outcome
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = io.read(&mut buf).await.context("echo: reading")?;
        if n == 0 {
            return io.shutdown().await.context("echo: ending");
        }
        io.write_all(&buf[..n]).await.context("echo: writing")?;
        io.flush().await.context("echo: flushing")?;
    }
}

async fn pings<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, config: &Config) -> Result<Outcome> {
    let message: Vec<u8> = (0..config.size).map(|i| i as u8).collect();
    let mut back = vec![0u8; config.size];
    let mut rtts = Vec::with_capacity(config.count);
    let start = Instant::now();
    for i in 0..WARM_UP + config.count {
        if i > 0 && !config.interval.is_zero() {
            tokio::time::sleep(config.interval).await;
        }
        let began = Instant::now();
        io.write_all(&message).await.context("ping: writing")?;
        io.flush().await.context("ping: flushing")?;
        io.read_exact(&mut back).await.context("ping: reading the echo")?;
        let rtt = began.elapsed();
        if back != message {
            return Err(Failure::new("the echo differs from the ping"));
        }
        if i >= WARM_UP {
            rtts.push(rtt.as_secs_f64() * 1e6);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // End cleanly: our end, then the server's.
    io.shutdown().await.context("ending")?;
    if io.read(&mut back).await.context("waiting for the server's end")? != 0 {
        return Err(Failure::new("the server sent more than the echoes"));
    }
    Ok(Outcome {
        config: *config,
        rtts: Sample::new(rtts),
        seconds,
    })
}
