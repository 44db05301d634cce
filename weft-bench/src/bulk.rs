//! The bulk workload, after the quinn seed's bulk benchmark: `streams`
//! uploads of `stream_size` bytes, at most `max_streams` at once on each of
//! `conns` connections. The server reads each stream to its end and then
//! ends its side; a stream is done when the client sees that end.
//!
//! The baselines run the same workload with one TCP (or TLS) connection
//! per stream, `conns × max_streams` at once.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::mpsc,
    task::JoinSet,
};
use weft::{
    handshake::{CipherSuite, HandshakeExt, PeerId},
    mux::{Connection, Stream},
    Identity,
};

use super::{
    stacks::{
        tcp_connect, weft_acceptor, weft_dial, weft_dialer, Mode, Records, Tls, TlsChoice, TlsProvider,
        TlsSuite,
    },
    stats::{round3, Sample},
    Context, Failure, Result,
};

/// The baselines' writes go out in pieces of this size, from one shared
/// buffer, and their reads take up to as much: 1 MiB, as a program that
/// knows it moves bulk data would size them. Raw TCP needs it to reach
/// the loopback limit (64 KiB writes and reads ran at 1.7-2.0 GB/s here,
/// 1 MiB ones at 4.2-4.7).
const CHUNK: usize = 1 << 20;
/// weft's sends: 64 KiB pieces of the same buffer, each a `Bytes` the
/// stream queues without copying. (1 MiB pieces ran at 2.8-3.2 GB/s
/// plaintext here against 3.8 with these: a piece the size of the stream
/// window leaves the window empty until it is all acknowledged.)
const WEFT_CHUNK: usize = 64 * 1024;
const MIB: f64 = (1 << 20) as f64;

/// One run's shape.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub suite: CipherSuite,
    /// The TLS baseline's suite: the one matching `suite` unless set.
    pub tls_suite: Option<TlsSuite>,
    pub tls_provider: TlsProvider,
    pub records: Records,
    pub conns: usize,
    pub streams: usize,
    pub max_streams: u32,
    pub stream_size: u64,
    /// Show a progress bar on stderr (not during warm-up runs).
    pub progress: bool,
    /// Unmeasured runs of the workload first, on the same threads.
    pub warmups: usize,
}

impl Config {
    /// The suite as reported: `plaintext` for the raw TCP baseline.
    pub fn suite_name(&self) -> String {
        match self.mode {
            Mode::Tcp => "plaintext".to_owned(),
            Mode::Weft => self.suite.name().to_owned(),
            Mode::Tls => self
                .tls_choice()
                .map_or_else(|_| self.suite.name().to_owned(), |c| c.suite.to_string()),
        }
    }

    /// The TLS baseline's suite and provider.
    pub fn tls_choice(&self) -> Result<TlsChoice> {
        Ok(TlsChoice {
            suite: match self.tls_suite {
                Some(suite) => suite,
                None => TlsSuite::matching(self.suite)?,
            },
            provider: self.tls_provider,
        })
    }

    fn total(&self) -> u64 {
        (self.streams as u64).saturating_mul(self.stream_size)
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub config: Config,
    pub bytes: u64,
    pub seconds: f64,
    /// Mean time per connection from TCP connect to the end of the handshake.
    pub handshake_us: f64,
    /// Each stream's MiB/s.
    pub rates: Sample,
    /// Each stream's duration in milliseconds.
    pub durations: Sample,
    /// CPU seconds the process spent (both ends, when it runs both) over
    /// the same span as `seconds`.
    pub cpu_seconds: f64,
}

impl Outcome {
    pub fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / MIB / self.seconds
    }

    pub fn json(&self) -> serde_json::Value {
        let c = &self.config;
        serde_json::json!({
            "mode": c.mode.name(),
            "suite": c.suite_name(),
            "tls_provider": match c.mode {
                Mode::Tls => Some(c.tls_provider.to_string()),
                _ => None,
            },
            "records": match c.mode {
                Mode::Weft => c.records.to_string(),
                Mode::Tls => "tls".to_owned(),
                Mode::Tcp => "none".to_owned(),
            },
            "conns": c.conns,
            "streams": c.streams,
            "max_streams": c.max_streams,
            "bytes": self.bytes,
            "seconds": round3(self.seconds),
            "mib_per_s": round3(self.mib_per_s()),
            "handshake_us": round3(self.handshake_us),
            "cpu_s_per_gb": round3(self.cpu_seconds / (self.bytes as f64 / 1e9)),
            "warmups": c.warmups,
            "stream_mib_per_s": self.rates.quinn_json(),
            "stream_ms": self.durations.quinn_json(),
        })
    }

    /// The quinn seed's report.
    pub fn print(&self) {
        let c = &self.config;
        let via = match c.mode {
            Mode::Weft => format!("weft ({}, {} records)", c.suite, c.records),
            Mode::Tcp => "raw TCP".to_owned(),
            Mode::Tls => match c.tls_choice() {
                Ok(choice) => format!("TLS 1.3 ({choice})"),
                Err(_) => format!("TLS 1.3 ({})", c.suite),
            },
        };
        println!("Overall stats:");
        println!(
            "Sent {} bytes on {} streams in {:.2}s ({:.2} MiB/s) over {via}",
            self.bytes,
            c.streams,
            self.seconds,
            self.mib_per_s()
        );
        println!(
            "CPU: {:.3} s per GB, the whole process",
            self.cpu_seconds / (self.bytes as f64 / 1e9)
        );
        let conns = match c.mode {
            Mode::Weft => c.conns,
            _ => c.streams,
        };
        println!(
            "Handshake: {:.0} µs on average over {conns} connection{}",
            self.handshake_us,
            if conns == 1 { "" } else { "s" }
        );
        println!("Stream metrics:");
        println!("      │ Throughput     │ Duration");
        println!("──────┼────────────────┼──────────");
        let rows: [(&str, f64, f64); 6] = [
            ("AVG", self.rates.avg(), self.durations.avg()),
            ("P0", self.rates.min(), self.durations.min()),
            (
                "P10",
                self.rates.percentile(10.0),
                self.durations.percentile(10.0),
            ),
            (
                "P50",
                self.rates.percentile(50.0),
                self.durations.percentile(50.0),
            ),
            (
                "P90",
                self.rates.percentile(90.0),
                self.durations.percentile(90.0),
            ),
            ("P100", self.rates.max(), self.durations.max()),
        ];
        for (name, rate, ms) in rows {
            println!("{name:<5} │ {rate:>8.2} MiB/s │ {}", duration(ms));
        }
    }
}

fn duration(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2}s", ms / 1000.0)
    } else {
        format!("{ms:.2}ms")
    }
}

/// What a client needs to trust the server.
#[derive(Clone)]
pub enum ServerKey {
    Weft(PeerId),
    Tls(Tls),
    Tcp,
}

impl ServerKey {
    /// The `--peer-key` value to give the client, if it needs one.
    pub fn printable(&self) -> Option<String> {
        match self {
            ServerKey::Weft(peer) => Some(peer.to_string()),
            ServerKey::Tls(tls) => Some(tls.certificate_hex()),
            ServerKey::Tcp => None,
        }
    }

    /// The key a client was given with `--peer-key`.
    pub fn parse(config: &Config, key: Option<&str>) -> Result<Self> {
        let need = || {
            Failure::new(format_args!(
                "--connect with --mode {} needs --peer-key",
                config.mode.name()
            ))
        };
        match config.mode {
            Mode::Tcp => Ok(ServerKey::Tcp),
            Mode::Weft => {
                let key = key.ok_or_else(need)?;
                let peer = key.parse::<PeerId>().map_err(|_| {
                    Failure::new(format_args!(
                        "--peer-key {key:?} is not a weft key (64 hex digits)"
                    ))
                })?;
                Ok(ServerKey::Weft(peer))
            }
            Mode::Tls => {
                let certificate = Tls::parse_certificate(key.ok_or_else(need)?)?;
                Ok(ServerKey::Tls(Tls::trusting(config.tls_choice()?, certificate)?))
            }
        }
    }
}

/// Serves the workload on `listener` until the runtime stops. Each failure
/// goes to `failures`; the server goes on with other connections.
pub fn serve(
    listener: TcpListener,
    config: &Config,
    failures: mpsc::UnboundedSender<Failure>,
) -> Result<ServerKey> {
    let key = match config.mode {
        Mode::Weft => {
            let identity = Identity::generate();
            let key = ServerKey::Weft(identity.peer_id());
            let acceptor = weft_acceptor(identity, config.suite, config.records, config.max_streams);
            spawn_accept_loop(listener, failures, move |tcp| {
                let mut acceptor = acceptor.clone();
                async move {
                    let conn = acceptor.accept_transport(tcp).await.context("weft handshake")?;
                    let mut streams = JoinSet::new();
                    while let Some(stream) = conn.accept().await.context("accepting a stream")? {
                        streams.spawn(drain_weft(stream));
                    }
                    while let Some(done) = streams.join_next().await {
                        done.context("a stream's task")??;
                    }
                    Ok(())
                }
            });
            key
        }
        Mode::Tcp => {
            spawn_accept_loop(listener, failures, drain);
            ServerKey::Tcp
        }
        Mode::Tls => {
            let tls = Tls::generate_with(config.tls_choice()?)?;
            let acceptor = tls.acceptor.clone().ok_or_else(|| Failure::new("TLS acceptor"))?;
            spawn_accept_loop(listener, failures, move |tcp| {
                let acceptor = acceptor.clone();
                async move { drain(acceptor.accept(tcp).await.context("TLS handshake")?).await }
            });
            ServerKey::Tls(tls)
        }
    };
    Ok(key)
}

fn spawn_accept_loop<F, Fut>(listener: TcpListener, failures: mpsc::UnboundedSender<Failure>, handle: F)
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            let tcp = match listener.accept().await {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    let _ = failures.send(Failure::new(format_args!("server: accepting: {e}")));
                    // Out of file descriptors, say: give it a moment.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if let Err(e) = tcp.set_nodelay(true) {
                let _ = failures.send(Failure::new(format_args!("server: TCP_NODELAY: {e}")));
            }
            let peer = tcp.peer_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string());
            let work = handle(tcp);
            let failures = failures.clone();
            tokio::spawn(async move {
                if let Err(e) = work.await {
                    let _ = failures.send(Failure::new(format_args!("server, client {peer}: {e}")));
                }
            });
        }
    });
}

async fn drain_weft(mut stream: Stream) -> Result<()> {
    while stream.recv().await.context("reading a stream")?.is_some() {}
    stream.finish().context("ending a stream")
}

async fn drain<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    while io.read(&mut buf).await.context("reading")? > 0 {}
    io.shutdown().await.context("ending the connection")
}

/// The data every stream sends: one shared buffer.
fn data() -> Bytes {
    Bytes::from(vec![0x5a; CHUNK])
}

/// Server and client in one process over loopback: the server on a worker
/// thread of its own, the client on this thread. The first failure on
/// either side ends the run.
pub fn run_local(config: &Config) -> Result<Outcome> {
    let server_rt = super::server_runtime()?;
    let (failures, mut failed) = mpsc::unbounded_channel();
    let (addr, key) = server_rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding loopback")?;
        let addr = listener.local_addr().context("local address")?;
        Ok::<_, Failure>((addr, serve(listener, config, failures)?))
    })?;
    let warm_up = Config {
        progress: false,
        ..config.clone()
    };
    let outcome = super::client_runtime()?.block_on(async {
        let runs = async {
            for _ in 0..config.warmups {
                client(addr, &warm_up, &key).await.context("warming up")?;
            }
            client(addr, config, &key).await
        };
        tokio::select! {
            outcome = runs => outcome,
            Some(failure) = failed.recv() => Err(failure),
        }
    });
    server_rt.shutdown_timeout(Duration::from_secs(1));
    outcome
}

/// The client side against `addr`.
pub async fn client(addr: SocketAddr, config: &Config, key: &ServerKey) -> Result<Outcome> {
    if config.conns == 0 || config.streams == 0 || config.max_streams == 0 {
        return Err(Failure::new(
            "--conns, --streams and --max-streams must be at least 1",
        ));
    }
    let sent = Arc::new(AtomicU64::new(0));
    let progress = config
        .progress
        .then(|| progress_bar(config.total(), sent.clone()));
    let outcome = workload(addr, config, key, sent).await;
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    outcome
}

async fn workload(
    addr: SocketAddr,
    config: &Config,
    key: &ServerKey,
    sent: Arc<AtomicU64>,
) -> Result<Outcome> {
    let start = Instant::now();
    let cpu = super::cpu_seconds();
    let mut handshakes = Vec::new();
    let mut workers = JoinSet::new();
    let next = Arc::new(AtomicUsize::new(0));
    let mut conns = Vec::new();
    match (config.mode, key) {
        (Mode::Weft, ServerKey::Weft(peer)) => {
            let mut dialer = weft_dialer(
                Identity::generate(),
                config.suite,
                config.records,
                config.max_streams,
            );
            for i in 0..config.conns {
                let began = Instant::now();
                let conn = weft_dial(&mut dialer, addr, *peer).await?;
                handshakes.push(began.elapsed());
                // Streams go to the connections in turn: this one's share.
                let share = (config.streams + config.conns - 1 - i) / config.conns;
                let taken = Arc::new(AtomicUsize::new(0));
                for _ in 0..(config.max_streams as usize).min(share) {
                    let (conn, taken, sent) = (conn.clone(), taken.clone(), sent.clone());
                    let size = config.stream_size;
                    workers.spawn(async move {
                        let mut durations = Vec::new();
                        while taken.fetch_add(1, Ordering::Relaxed) < share {
                            durations.push(weft_stream(&conn, size, &sent).await?);
                        }
                        Ok::<_, Failure>((durations, Vec::new()))
                    });
                }
                conns.push(conn);
            }
        }
        (Mode::Tcp | Mode::Tls, _) => {
            let tls = match key {
                ServerKey::Tls(tls) => Some(tls.clone()),
                _ => None,
            };
            let at_once = (config.max_streams as usize * config.conns).min(config.streams);
            for _ in 0..at_once {
                let (next, sent, tls) = (next.clone(), sent.clone(), tls.clone());
                let (streams, size) = (config.streams, config.stream_size);
                workers.spawn(async move {
                    let (mut durations, mut handshakes) = (Vec::new(), Vec::new());
                    while next.fetch_add(1, Ordering::Relaxed) < streams {
                        let began = Instant::now();
                        let (handshake, _) = match &tls {
                            Some(tls) => {
                                let io = tls.connect(addr).await?;
                                let handshake = began.elapsed();
                                (handshake, upload(io, size, &sent).await?)
                            }
                            None => {
                                let io = tcp_connect(addr).await?;
                                let handshake = began.elapsed();
                                (handshake, upload(io, size, &sent).await?)
                            }
                        };
                        handshakes.push(handshake);
                        durations.push(began.elapsed());
                    }
                    Ok((durations, handshakes))
                });
            }
        }
        _ => return Err(Failure::new("the server's key does not match the mode")),
    }
    let mut durations = Vec::new();
    while let Some(done) = workers.join_next().await {
        let (d, h) = done.context("a client task")??;
        durations.extend(d);
        handshakes.extend(h);
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = super::cpu_seconds() - cpu;
    drop(conns);
    let size = config.stream_size as f64;
    let rates = durations.iter().map(|d| size / MIB / d.as_secs_f64()).collect();
    let handshake_us =
        handshakes.iter().map(|h| h.as_secs_f64() * 1e6).sum::<f64>() / handshakes.len().max(1) as f64;
    Ok(Outcome {
        config: config.clone(),
        bytes: config.total(),
        seconds,
        handshake_us,
        rates: Sample::new(rates),
        durations: Sample::new(durations.iter().map(|d| d.as_secs_f64() * 1e3).collect()),
        cpu_seconds,
    })
}

/// One weft stream: open, send `size` bytes, finish, wait for the server's
/// end. Returns how long it took.
async fn weft_stream(conn: &Connection, size: u64, sent: &AtomicU64) -> Result<Duration> {
    let began = Instant::now();
    let mut stream = conn.open().await.context("opening a stream")?;
    let chunk = data();
    let mut left = size;
    while left > 0 {
        let n = left.min(WEFT_CHUNK as u64) as usize;
        stream.send(chunk.slice(..n)).await.context("sending")?;
        sent.fetch_add(n as u64, Ordering::Relaxed);
        left -= n as u64;
    }
    stream.finish().context("finishing a stream")?;
    if let Some(extra) = stream.recv().await.context("waiting for the server's end")? {
        return Err(Failure::new(format_args!(
            "the server sent {} unexpected bytes",
            extra.len()
        )));
    }
    Ok(began.elapsed())
}

/// Sends `size` bytes, shuts down writing, waits for the server's end.
async fn upload<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, size: u64, sent: &AtomicU64) -> Result<()> {
    let chunk = data();
    let mut left = size;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        io.write_all(&chunk[..n]).await.context("sending")?;
        sent.fetch_add(n as u64, Ordering::Relaxed);
        left -= n as u64;
    }
    io.shutdown().await.context("ending the upload")?;
    let mut rest = [0u8; 16];
    match io.read(&mut rest).await.context("waiting for the server's end")? {
        0 => Ok(()),
        n => Err(Failure::new(format_args!("the server sent {n} unexpected bytes"))),
    }
}

/// A bar on stderr, moved by a ticker from the bytes sent so far.
fn progress_bar(total: u64, sent: Arc<AtomicU64>) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {elapsed}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ticker = bar.clone();
    tokio::spawn(async move {
        while !ticker.is_finished() {
            ticker.set_position(sent.load(Ordering::Relaxed));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    bar
}
