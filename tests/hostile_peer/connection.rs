//! Frame-by-frame peers against a multiplexed connection.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use crate::support::*;
use weft::{
    handshake::CipherSuite,
    mux::{Builder, Connection},
    CloseCode, Error, ErrorKind, StreamLimitLayer,
};

/// A dialer and an acceptor over a duplex pipe; the acceptor allows
/// `limit` streams.
async fn pair(limit: u32) -> (Connection, Connection) {
    conn_pair_duplex(
        CipherSuite::Aes256Gcm,
        (StreamLimitLayer::new(10), StreamLimitLayer::new(limit)),
        (Builder::new(), Builder::new()),
    )
    .await
}

/// HTTP/2's Rapid Reset (CVE-2023-44487) through weft's own API: open a
/// stream, reset it at once, again, for up to 100,000 streams, as fast as
/// the stream limit lets the attacker open them. The offender gets a
/// go-away with `EXCESSIVE_LOAD` well before the end; the heap comes
/// back; and another connection, served all along, answers every request.
/// (That a stream reset before it was accepted never reaches the accept
/// loop is the core's test,
/// `streams_reset_before_they_are_accepted_never_reach_the_application_and_free_their_slots`.)
#[tokio::test]
async fn rapid_reset_of_100000_streams_gets_go_away_and_another_connection_keeps_working() {
    // Faster than the accept loop: 64 streams opened and reset in one
    // write, read by the victim in one go, so none is accepted first.
    let attack = rapid_reset(Pace::Batches(64)).await;
    assert!(attack.why.contains("before they were accepted"), "{}", attack.why);
    assert_eq!(
        attack.accepted, 0,
        "a stream reset before it was accepted reached the application"
    );
    assert!(attack.opened <= 64, "{} streams opened", attack.opened);
}

/// The same, the attacker waiting until the application has accepted
/// each stream before resetting it: the budget of resets per second (a
/// burst of 1,000 at the default stream limit) stops it.
#[tokio::test]
async fn rapid_reset_after_each_accept_gets_go_away_at_the_budget_per_second() {
    let attack = rapid_reset(Pace::AfterEachAccept).await;
    assert!(attack.why.contains("in a second"), "{}", attack.why);
    // Every stream the attacker opened reached the application before its
    // reset (but the last, opened as the go-away came): this is the attack
    // on streams already accepted.
    assert!(
        attack.accepted + 1 >= attack.opened && attack.accepted <= attack.opened,
        "{} of {} streams accepted",
        attack.accepted,
        attack.opened
    );
    // The burst, and what a second refills: no fewer, and not many more
    // than the test's own duration allows.
    assert!(attack.opened >= 1_000, "stopped after {} resets", attack.opened);
    let allowed = 1_000 + (attack.seconds * 1_000.0) as u32 + 1;
    assert!(
        attack.opened <= allowed,
        "{} resets in {:.2} s",
        attack.opened,
        attack.seconds
    );
}

/// How the attacker paces its streams.
#[derive(Clone, Copy)]
enum Pace {
    /// Open and reset this many streams, then let the others run.
    Batches(u32),
    /// Reset each stream only once the victim's application holds it.
    AfterEachAccept,
}

/// What a Rapid Reset achieved.
struct Attack {
    /// The reason of the victim's go-away.
    why: String,
    opened: u32,
    /// Streams the victim's application accepted.
    accepted: u32,
    seconds: f64,
}

/// Runs the attack at `pace`; a second connection is served all along.
async fn rapid_reset(pace: Pace) -> Attack {
    let (attacker, victim) = pair(100).await;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let (accepted_tx, mut accepted_rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let accept_loop = tokio::spawn(async move {
        // The application reads each stream it gets, as a server would.
        while let Ok(Some(mut stream)) = victim.accept().await {
            let _ = accepted_tx.send(stream.id());
            let _ = stream.recv().await;
        }
        victim.closed().await
    });
    let honest_calls = tokio::spawn(async move {
        for n in 0..200u32 {
            assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
            tokio::task::yield_now().await;
        }
    });
    let started = std::time::Instant::now();
    let (mut opened, mut accepted) = (0u32, 0u32);
    let mut refused = None;
    for _ in 0..100_000 {
        let mut stream = match attacker.open().await {
            Ok(stream) => stream,
            Err(err) => {
                refused = Some(err);
                break;
            }
        };
        opened += 1;
        if let Pace::AfterEachAccept = pace {
            // The victim's application takes the stream (or the victim has
            // gone away, and there is nothing more to take).
            match accepted_rx.recv().await {
                Some(id) => {
                    assert_eq!(id, stream.id(), "the application got another stream");
                    accepted += 1;
                }
                None => {
                    refused = Some(attacker.closed().await);
                    break;
                }
            }
        }
        stream.reset(CloseCode::CANCEL);
        match pace {
            Pace::Batches(n) if opened.is_multiple_of(n) => tokio::task::yield_now().await,
            _ => {}
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let refused = refused.expect("the attacker was stopped before 100,000 streams");
    let ended = tokio::time::timeout(Duration::from_secs(5), accept_loop)
        .await
        .expect("the victim's connection ends")
        .unwrap();
    accepted += std::iter::from_fn(|| accepted_rx.try_recv().ok()).count() as u32;
    assert_eq!(ended.close_code(), CloseCode::EXCESSIVE_LOAD, "{ended:?}");
    assert!(
        refused.is_peer_close(CloseCode::EXCESSIVE_LOAD)
            || attacker.closed().await.is_peer_close(CloseCode::EXCESSIVE_LOAD),
        "the attacker hears why: {refused:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), honest_calls)
        .await
        .expect("the honest connection keeps answering")
        .unwrap();
    drop(attacker);
    echo.abort();
    let retained = heap_once_still(before).await;
    assert!(
        retained < 256 * 1024,
        "{retained} bytes still held after the attack"
    );
    let why = match ended.reason() {
        Some(reason) if !is_unauthenticated_close(&ended) => reason.to_owned(),
        _ => ended.to_string(),
    };
    Attack {
        why,
        opened,
        accepted,
        seconds,
    }
}

/// A hand-made peer writes `frames` (raw mux frames, in batches) while
/// reading everything we send back, so no pong or credit ever waits on it;
/// returns how the victim's connection ended. Each write carries at least
/// `batch` bytes of frames. A well-behaved connection answers requests
/// throughout, and the heap comes back.
async fn flood(limit: StreamLimitLayer, batch_len: usize, frames: impl Iterator<Item = Vec<u8>>) -> Error {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let (raw, victim) = raw_peer_against(CipherSuite::Aes256Gcm, limit).await;
    let (mut from_victim, mut to_victim) = tokio::io::split(raw);
    let drain = tokio::spawn(async move {
        let mut sink = vec![0u8; 64 * 1024];
        while matches!(from_victim.read(&mut sink).await, Ok(n) if n > 0) {}
    });
    let honest_calls = tokio::spawn(async move {
        for n in 0..200u32 {
            assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
            tokio::task::yield_now().await;
        }
    });
    let mut batch = Vec::new();
    for frame in frames {
        batch.extend_from_slice(&frame);
        if batch.len() >= batch_len {
            if to_victim.write_all(&batch).await.is_err() || to_victim.flush().await.is_err() {
                break; // the victim closed on us
            }

            batch.clear();
            tokio::task::yield_now().await;
        }
    }
    let _ = to_victim.write_all(&batch).await;
    let _ = to_victim.flush().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), victim.closed())
        .await
        .expect("the victim's connection ends");
    tokio::time::timeout(Duration::from_secs(10), honest_calls)
        .await
        .expect("the honest connection keeps answering")
        .unwrap();
    drop((victim, to_victim));
    tokio::time::timeout(Duration::from_secs(10), drain)
        .await
        .expect("the victim's side of the pipe ends with it")
        .unwrap();
    echo.abort();
    let retained = heap_once_still(before).await;
    assert!(
        retained < 256 * 1024,
        "{retained} bytes still held after the flood"
    );
    ended
}

fn control_flood(ended: &Error) -> bool {
    ended.close_code() == CloseCode::EXCESSIVE_LOAD && ended.to_string().contains("control frames")
}

/// CVE-2019-9512 by a peer that reads every pong: the pending-pong budget
/// never fills, and the control-frame budget stops it instead.
#[tokio::test]
async fn ping_flood_read_as_fast_as_it_comes_gets_go_away() {
    let pings = (0..100_000u64).map(|n| mux_frame(7, 0, 0, &n.to_be_bytes()));
    // Eight pings a write, so that no more than sixteen ever wait for
    // their pongs (the victim answers each read before the next).
    let ping_len = 18;
    let ended = flood(StreamLimitLayer::new(10), 8 * ping_len, pings).await;
    assert!(control_flood(&ended), "{ended:?}");
}

/// Credit of one byte at a time for the connection, a hundred entries per
/// frame: each frame valid, the flood not.
#[tokio::test]
async fn credit_flood_gets_go_away() {
    let entries: Vec<u8> = (0..100).flat_map(|_| [0, 0, 0, 0, 0, 0, 0, 1]).collect();
    let frames = (0..1_000).map(move |_| mux_frame(5, 0, 0, &entries));
    let ended = flood(StreamLimitLayer::new(10), 16 * 1024, frames).await;
    assert!(control_flood(&ended), "{ended:?}");
}

/// Stream credit going up by one each time (each frame valid: the raw
/// peer's stack declared 100 streams).
#[tokio::test]
async fn stream_credit_flood_gets_go_away() {
    let frames = (0..100_000u32).map(|n| mux_frame(6, 0, 0, &(101 + n).to_be_bytes()));
    let ended = flood(StreamLimitLayer::new(10), 16 * 1024, frames).await;
    assert!(control_flood(&ended), "{ended:?}");
}

/// One-byte data frames into a stream nobody reads: each byte spends the
/// stream's credit, so the flood holds at most the window (64 KiB here,
/// not the 64 Ki frames' worth of bookkeeping), and the byte past it is a
/// flow-control violation.
#[tokio::test]
async fn one_byte_data_frames_past_the_window_get_go_away_with_flow_control_error() {
    const WINDOW: u32 = 64 * 1024;
    let limit = StreamLimitLayer::new(10).receive_windows(WINDOW, 4 * WINDOW);
    let open = std::iter::once(mux_frame(1, 0, 1, b""));
    let bytes = (0..=WINDOW).map(|_| mux_frame(2, 0, 1, b"x"));
    let ended = flood(limit, 16 * 1024, open.chain(bytes)).await;
    assert_eq!(ended.close_code(), CloseCode::FLOW_CONTROL_ERROR, "{ended:?}");
}

/// Empty data frames (without FIN) carry nothing at all: the first is
/// malformed.
#[tokio::test]
async fn empty_data_frames_get_go_away_with_frame_encoding_error() {
    let open = std::iter::once(mux_frame(1, 0, 1, b""));
    let empty = (0..10_000).map(|_| mux_frame(2, 0, 1, b""));
    let ended = flood(StreamLimitLayer::new(10), 16 * 1024, open.chain(empty)).await;
    assert_eq!(ended.close_code(), CloseCode::FRAME_ENCODING_ERROR, "{ended:?}");
}

/// MadeYouReset (CVE-2025-8671) through the API: the server's handler
/// reads each request, resets its stream (as it would over a bad request)
/// and then works on for a while, holding it. However fast the peer opens streams,
/// no more handlers run at once than its stream limit.
#[tokio::test]
async fn streams_reset_while_their_handler_runs_keep_counting_against_the_limit() {
    const LIMIT: u32 = 8;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let (attacker, victim) = pair(LIMIT).await;
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let handled = Arc::new(AtomicUsize::new(0));
    let server = {
        let (running, most, handled) = (running.clone(), most.clone(), handled.clone());
        tokio::spawn(async move {
            while let Ok(Some(mut stream)) = victim.accept().await {
                let (running, most, handled) = (running.clone(), most.clone(), handled.clone());
                tokio::spawn(async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    // The whole request is read, and found bad.
                    let mut request = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut request).await;
                    stream.reset(CloseCode::CANCEL);
                    handled.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    drop(stream);
                });
            }
        })
    };
    for n in 0..200u32 {
        let mut stream = tokio::time::timeout(Duration::from_secs(5), attacker.open())
            .await
            .expect("credit comes back as handlers finish")
            .unwrap();
        let _ = stream.send(bytes::Bytes::from_static(b"request")).await;
        let _ = stream.finish();
        if n % 20 == 0 {
            assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
        }
    }
    // The attack did what it meant to: handlers piled up to the limit
    // (each holds its reset stream for 5 ms), and never past it.
    assert_eq!(
        most.load(Ordering::SeqCst),
        LIMIT as usize,
        "the most handlers at once, against the limit of {LIMIT}"
    );
    // Every request reached a handler that read and reset it: at least
    // all but the last few in flight when the loop ended.
    assert!(
        handled.load(Ordering::SeqCst) >= 200 - LIMIT as usize,
        "{} of 200 requests handled",
        handled.load(Ordering::SeqCst)
    );
    drop(attacker);
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.abort();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let retained = live() - before;
    assert!(retained < 256 * 1024, "{retained} bytes still held");
    echo.abort();
}

// ------------------------------------------ stream ids, limits and windows

/// The victim's end, checked against the code and the violation's text.
fn ended_with(ended: &Error, code: CloseCode, text: &str) {
    assert_eq!(ended.close_code(), code, "{ended:?}");
    assert!(ended.to_string().contains(text), "{ended}");
}

const ALL_AT_ONCE: usize = 16 * 1024;

#[tokio::test]
async fn opening_past_the_stream_limit_gets_go_away_with_stream_limit_error() {
    let opens = [1u32, 3, 5].map(|id| mux_frame(1, 0, id, b"x"));
    let ended = flood(StreamLimitLayer::new(2), ALL_AT_ONCE, opens.into_iter()).await;
    ended_with(&ended, CloseCode::STREAM_LIMIT_ERROR, "beyond its limit of 2");
}

#[tokio::test]
async fn a_stream_id_of_the_wrong_parity_gets_go_away_with_stream_state_error() {
    let ended = flood(
        StreamLimitLayer::new(10),
        ALL_AT_ONCE,
        std::iter::once(mux_frame(1, 0, 2, b"x")),
    )
    .await;
    ended_with(&ended, CloseCode::STREAM_STATE_ERROR, "wrong parity");
}

#[tokio::test]
async fn a_reused_stream_id_gets_go_away_with_stream_state_error() {
    let frames = [mux_frame(1, 1, 1, b"x"), mux_frame(1, 0, 1, b"again")];
    let ended = flood(StreamLimitLayer::new(10), ALL_AT_ONCE, frames.into_iter()).await;
    ended_with(&ended, CloseCode::STREAM_STATE_ERROR, "reopened stream 1");
}

#[tokio::test]
async fn a_skipped_stream_id_gets_go_away_with_stream_state_error() {
    let frames = [mux_frame(1, 0, 1, b"x"), mux_frame(1, 0, 5, b"x")];
    let ended = flood(StreamLimitLayer::new(10), ALL_AT_ONCE, frames.into_iter()).await;
    ended_with(&ended, CloseCode::STREAM_STATE_ERROR, "expected 3");
}

#[tokio::test]
async fn credit_past_the_maximum_window_gets_go_away_with_flow_control_error() {
    let entry = |inc: u32| [0u32.to_be_bytes(), inc.to_be_bytes()].concat();
    let frames = (0..3).map(move |_| mux_frame(5, 0, 0, &entry(u32::MAX / 2)));
    let ended = flood(StreamLimitLayer::new(10), ALL_AT_ONCE, frames).await;
    ended_with(&ended, CloseCode::FLOW_CONTROL_ERROR, "past the maximum");
}

#[tokio::test]
async fn data_beyond_the_granted_window_gets_go_away_with_flow_control_error() {
    let limit = StreamLimitLayer::new(10).receive_windows(1000, 1 << 20);
    let frames = [mux_frame(1, 0, 1, &[7; 600]), mux_frame(2, 0, 1, &[7; 401])];
    let ended = flood(limit, ALL_AT_ONCE, frames.into_iter()).await;
    ended_with(&ended, CloseCode::FLOW_CONTROL_ERROR, "beyond the credit of 1000");
}

/// 64 KiB that every writer below copies from: what is held is ours, not
/// the writers'.
static CHUNK: [u8; 64 * 1024] = [0x5a; 64 * 1024];

/// Accepts `streams` streams on `victim`, each written `writes` times
/// [`CHUNK`] by a task of its own, as fast as it may; the connection and
/// the tasks once all are accepted.
fn spawn_writers(
    victim: Connection,
    streams: usize,
    writes: usize,
) -> tokio::task::JoinHandle<(Connection, Vec<tokio::task::JoinHandle<()>>)> {
    use tokio::io::AsyncWriteExt;
    tokio::spawn(async move {
        let mut tasks = Vec::new();
        while let Ok(Some(mut stream)) = victim.accept().await {
            tasks.push(tokio::spawn(async move {
                for _ in 0..writes {
                    if stream.write_all(&CHUNK).await.is_err() {
                        return;
                    }
                }
            }));
            if tasks.len() == streams {
                break;
            }
        }
        (victim, tasks)
    })
}

/// What this thread's heap holds above `before` once it stops moving (the
/// writers all blocked), for up to five seconds.
async fn heap_once_still(before: isize) -> isize {
    let mut held = live() - before;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = live() - before;
        let settled = (now - held).abs() < 4096;
        held = now;
        if settled {
            break;
        }
    }
    held
}

/// Closes the connection the writers write to, and stops them.
async fn stop_writers(writers: tokio::task::JoinHandle<(Connection, Vec<tokio::task::JoinHandle<()>>)>) {
    let (victim, tasks) = writers.await.unwrap();
    victim.close(CloseCode::NO_ERROR, "");
    for task in tasks {
        task.abort();
    }
}

/// A peer that asks for data, grants all the credit it could want and
/// never reads its socket: what we buffer for it stays within the send
/// buffers, however much the application tries to write.
#[tokio::test]
async fn a_peer_that_never_reads_cannot_make_us_buffer_without_bound() {
    use tokio::io::AsyncWriteExt;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let (mut raw, victim) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(10)).await;
    let before = live();
    // Ten streams, each with a window of a gigabyte, and the same for the
    // connection; then silence.
    let mut frames = Vec::new();
    for id in (1..20).step_by(2) {
        frames.extend(mux_frame(1, 1, id, b"send me everything"));
        frames.extend(mux_frame(
            5,
            0,
            0,
            &[id.to_be_bytes(), (1u32 << 29).to_be_bytes()].concat(),
        ));
    }
    frames.extend(mux_frame(
        5,
        0,
        0,
        &[0u32.to_be_bytes(), (1u32 << 29).to_be_bytes()].concat(),
    ));
    raw.write_all(&frames).await.unwrap();
    raw.flush().await.unwrap();
    // The application writes 100 MiB into each stream.
    let writers = spawn_writers(victim, 10, 1600);
    let held = heap_once_still(before).await;
    // What mux::Builder documents for sending (each stream's 256 KiB send
    // buffer, 512 KiB of send buffers for sealed records and the record
    // being filled), and 1.6 MiB for the tasks, the pipe and the runtime:
    // not the gigabyte the application tried to write.
    let bound = 10 * 256 * 1024 + 512 * 1024 + 10 * 64 * 1024 + 1024 * 1024;
    assert!(
        held < bound,
        "{held} bytes held for a peer that never reads (bound {bound})"
    );
    // And it does not grow.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = live() - before;
    assert!(later - held < 64 * 1024, "{held} then {later} bytes held");
    for n in 0..50u32 {
        assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
    }
    stop_writers(writers).await;
    echo.abort();
    drop(raw);
}

/// A peer that opens many streams, asks each for a reply and never reads
/// its socket: all the replies together queue no more than the
/// connection's send buffer (`mux::Builder::connection_send_buffer`, 16
/// MiB), not its stream limit × each stream's 256 KiB (50 MiB here).
#[tokio::test]
async fn a_peer_that_never_reads_many_streams_holds_no_more_than_the_connection_send_buffer() {
    use tokio::io::AsyncWriteExt;
    const STREAMS: u32 = 200;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let (mut raw, victim) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(STREAMS)).await;
    let before = live();
    let opens: Vec<u8> = (0..STREAMS)
        .flat_map(|n| mux_frame(1, 1, 2 * n + 1, b"reply, please"))
        .collect();
    raw.write_all(&opens).await.unwrap();
    raw.flush().await.unwrap();
    // Each handler writes 1 MiB.
    let writers = spawn_writers(victim, STREAMS as usize, 16);
    let held = heap_once_still(before).await;
    // The connection's send buffer, 512 KiB of send buffers for sealed
    // records and the record being filled, the stream table and the tasks
    // (8 KiB each, generously), and a MiB for the pipe and the runtime.
    let bound = (16 << 20) + 512 * 1024 + STREAMS as isize * 8 * 1024 + (1 << 20);
    println!("{held} bytes held for {STREAMS} streams never read");
    assert!(held < bound, "{held} bytes held (bound {bound})");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = live() - before;
    assert!(later - held < 64 * 1024, "{held} then {later} bytes held");
    for n in 0..20u32 {
        assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
    }
    stop_writers(writers).await;
    echo.abort();
    drop(raw);
}

/// Streams a peer opens after our go-away reached it (after it answered
/// the ping that follows the go-away, docs/PROTOCOL.md section 15.6) are
/// refused with a RESET carrying REFUSED_STREAM, never delivered.
#[tokio::test]
async fn streams_opened_after_our_go_away_are_refused_unseen() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let (raw, victim) = raw_peer_against(CipherSuite::Aes256Gcm, StreamLimitLayer::new(10)).await;
    let (mut from_victim, mut to_victim) = tokio::io::split(raw);
    // One stream before the go-away: it is served.
    to_victim.write_all(&mux_frame(1, 1, 1, b"before")).await.unwrap();
    to_victim.flush().await.unwrap();
    let first = victim
        .accept()
        .await
        .unwrap()
        .expect("the stream before the go-away");
    victim.go_away();
    // Wait for the go-away (kind 9) and answer its marker ping, as a peer does.
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    while !seen.windows(2).any(|w| w == [9, 0]) {
        let n = from_victim.read(&mut buf).await.unwrap();
        seen.extend_from_slice(&buf[..n]);
    }
    let mut pongs = Vec::new();
    let mut rest = &seen[..];
    while rest.len() >= 10 {
        let len = u32::from_be_bytes(rest[6..10].try_into().unwrap()) as usize;
        if rest[0] == 7 {
            pongs.extend(mux_frame(8, 0, 0, &rest[10..10 + len]));
        }
        rest = &rest[10 + len..];
    }
    // The pong: the second go-away names stream 1 as the last.
    to_victim.write_all(&pongs).await.unwrap();
    to_victim.flush().await.unwrap();
    while seen.windows(2).filter(|w| *w == [9, 0]).count() < 2 {
        let n = from_victim.read(&mut buf).await.unwrap();
        seen.extend_from_slice(&buf[..n]);
    }
    // Then three more streams, as if it had not heard.
    for id in [3u32, 5, 7] {
        to_victim.write_all(&mux_frame(1, 1, id, b"after")).await.unwrap();
    }
    to_victim.flush().await.unwrap();
    // Each gets a RESET with REFUSED_STREAM.
    let mut refused = 0;
    let reset = |id: u32| {
        [
            vec![4, 0],
            id.to_be_bytes().to_vec(),
            4u32.to_be_bytes().to_vec(),
            CloseCode::REFUSED_STREAM.0.to_be_bytes().to_vec(),
        ]
        .concat()
    };
    tokio::time::timeout(Duration::from_secs(5), async {
        while refused < 3 {
            let n = from_victim.read(&mut buf).await.unwrap();
            seen.extend_from_slice(&buf[..n]);
            refused = [3u32, 5, 7]
                .iter()
                .filter(|&&id| seen.windows(14).any(|w| w == reset(id)))
                .count();
        }
    })
    .await
    .expect("the three late streams are refused");
    drop(first);
    // None reached the application.
    let next = tokio::time::timeout(Duration::from_secs(5), victim.accept())
        .await
        .unwrap();
    assert!(matches!(next, Ok(None)), "{next:?}");
    assert_eq!(echo_once(&honest, b"still").await, b"still");
    drop((victim, from_victim, to_victim, seen, buf));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let retained = live() - before;
    assert!(retained < 256 * 1024, "{retained} bytes still held");
    echo.abort();
}

// ------------------------------------------------------- damaged records

/// Records replayed, reordered, bit-flipped or cut mid-record on their way
/// to a connection (through a frame-editing middle): the connection ends
/// with a typed error (a record that fails authentication, or a
/// truncation), nothing damaged reaches a stream, the heap comes back, and
/// another connection keeps answering.
#[tokio::test]
async fn damaged_records_end_their_connection_and_others_go_on() {
    type Editor = Box<dyn FnMut(usize, Vec<u8>) -> Edit + Send>;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    const AT: usize = 6; // a data record, well after the handshake
    let cases: Vec<(&str, Editor)> = vec![
        ("replayed", {
            let mut last = None;
            Box::new(move |i, raw: Vec<u8>| {
                if i == AT {
                    let again = last.take().unwrap_or_else(|| raw.clone());
                    return Edit::Send(vec![raw, again]);
                }
                last = Some(raw.clone());
                Edit::Send(vec![raw])
            })
        }),
        ("reordered", {
            let mut held = None;
            Box::new(move |i, raw| match i {
                AT => {
                    held = Some(raw);
                    Edit::Send(vec![])
                }
                i if i == AT + 1 => Edit::Send(vec![raw, held.take().unwrap()]),
                _ => Edit::Send(vec![raw]),
            })
        }),
        (
            "flipped",
            Box::new(|i, mut raw: Vec<u8>| {
                if i == AT {
                    let last = raw.len() - 1;
                    raw[last] ^= 0x40;
                }
                Edit::Send(vec![raw])
            }),
        ),
        (
            "cut mid-record",
            Box::new(|i, mut raw: Vec<u8>| {
                if i == AT {
                    raw.truncate(raw.len() / 2);
                    return Edit::Send(vec![raw]);
                }
                if i > AT {
                    return Edit::Cut;
                }
                Edit::Send(vec![raw])
            }),
        ),
    ];
    for (what, edit) in cases {
        let before = live();
        let (d, a) = middle(edit, forward);
        let (client, server) = conn_pair_over(
            d,
            a,
            CipherSuite::Aes256Gcm,
            (StreamLimitLayer::new(10), StreamLimitLayer::new(10)),
            (Builder::new(), Builder::new()),
        )
        .await;
        let served = echo_server(server.clone());
        // Echoes until the damage ends the connection: every echo that
        // completes is intact.
        for n in 0..50u32 {
            let message = n.to_be_bytes();
            let mut stream = match client.open().await {
                Ok(stream) => stream,
                Err(_) => break,
            };
            let exchange = async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                stream.write_all(&message).await?;
                stream.shutdown().await?;
                let mut back = Vec::new();
                stream.read_to_end(&mut back).await?;
                Ok::<_, std::io::Error>(back)
            };
            match tokio::time::timeout(Duration::from_secs(5), exchange)
                .await
                .expect("no echo hangs")
            {
                Ok(back) => assert_eq!(back, message, "{what}: a damaged echo came back"),
                Err(_) => break,
            }
        }
        let ended = tokio::time::timeout(Duration::from_secs(5), server.closed())
            .await
            .unwrap_or_else(|_| panic!("{what}: the damaged connection ends"));
        let typed = is_error(&ended, ErrorKind::Record, " failed authentication (modified")
            || ended.kind() == ErrorKind::Truncated
            || is_error(&ended, ErrorKind::Record, "peer sent a malformed frame");
        assert!(typed, "{what}: {ended:?}");
        assert_eq!(echo_once(&honest, what.as_bytes()).await, what.as_bytes());
        drop((client, server));
        served.abort();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let retained = live() - before;
        assert!(retained < 256 * 1024, "{what}: {retained} bytes held after");
    }
    echo.abort();
}

/// Whatever follows the close record is never read: a record that would
/// open a stream (in plaintext, so that nothing but the close stops it),
/// an earlier record replayed, and a header promising 64 KiB. The
/// connection ends as the clean close it is, no stream arrives after it,
/// and another connection keeps answering.
#[tokio::test]
async fn records_after_the_close_record_are_never_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let mut last_data = None;
    let after_close = move |_, raw: Vec<u8>| match FrameKind::from_u8(raw[0]) {
        Ok(FrameKind::Close) => {
            let opens = raw_frame(FrameKind::Data, &mux_frame(1, 1, 3, b"after the close"));
            let replayed = last_data.take().expect("data before the close");
            let mut promise = FrameKind::Data.header(64 * 1024).to_vec();
            promise.extend_from_slice(&[0x5a; 100]);
            Edit::Send(vec![raw, opens, replayed, promise])
        }
        Ok(FrameKind::Data) => {
            last_data = Some(raw.clone());
            Edit::Send(vec![raw])
        }
        _ => Edit::Send(vec![raw]),
    };
    let (d, a) = middle(after_close, forward);
    let (client, server) = conn_pair_over(
        d,
        a,
        CipherSuite::Plaintext,
        (StreamLimitLayer::new(10), StreamLimitLayer::new(10)),
        (Builder::new(), Builder::new()),
    )
    .await;
    let accepted = Arc::new(std::sync::Mutex::new(Vec::new()));
    let served_streams = {
        let (server, accepted) = (server.clone(), accepted.clone());
        tokio::spawn(async move {
            while let Ok(Some(mut stream)) = server.accept().await {
                let mut request = Vec::new();
                let _ = stream.read_to_end(&mut request).await;
                accepted.lock().unwrap().push(request.clone());
                let _ = stream.write_all(&request).await;
                let _ = stream.shutdown().await;
            }
        })
    };
    let mut stream = client.open().await.unwrap();
    stream.write_all(b"before the close").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut back = Vec::new();
    stream.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"before the close");
    drop(stream);
    client.close(CloseCode::NO_ERROR, "");
    let ended = tokio::time::timeout(Duration::from_secs(5), server.closed())
        .await
        .expect("the connection ends");
    assert!(ended.is_peer_close(CloseCode::NO_ERROR), "{ended:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*accepted.lock().unwrap(), vec![b"before the close".to_vec()]);
    assert_eq!(echo_once(&honest, b"still here").await, b"still here");
    drop((client, server));
    served_streams.abort();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let retained = live() - before;
    assert!(retained < 256 * 1024, "{retained} bytes held after");
    echo.abort();
}

/// The record read timeout is for a record begun: a connection with
/// nothing half read, quiet for several of them (no keepalive either),
/// stays open and works.
#[tokio::test]
async fn a_quiet_connection_outlives_many_record_read_timeouts() {
    let builder = || {
        Builder::new()
            .record_read_timeout(Some(Duration::from_millis(50)))
            .keepalive(None)
    };
    let (a, b) = tokio::io::duplex(1 << 18);
    let (dialer, acceptor) = conn_pair_over(
        a,
        b,
        CipherSuite::Aes256Gcm,
        (StreamLimitLayer::new(10), StreamLimitLayer::new(10)),
        (builder(), builder()),
    )
    .await;
    let echo = echo_server(acceptor.clone());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !dialer.is_closed() && !acceptor.is_closed(),
        "a quiet connection ended"
    );
    assert_eq!(echo_once(&dialer, b"still here").await, b"still here");
    echo.abort();
}

/// All of a record but its last byte, then nothing: the victim's read
/// buffer holds the record until the record read timeout, then the
/// connection ends with `IDLE_TIMEOUT`, long before the idle timeout.
#[tokio::test]
async fn a_record_that_never_completes_ends_its_connection_at_the_record_read_timeout() {
    use tokio::io::AsyncWriteExt;
    use weft::handshake::HandshakeExt;
    let (a, b) = tokio::io::duplex(1 << 18);
    let mut dialer = stack(ident(1), &[CipherSuite::Aes256Gcm]);
    let builder = Builder::new().record_read_timeout(Some(Duration::from_millis(300)));
    let mut acceptor = conn_stack(
        ident(2),
        CipherSuite::Aes256Gcm,
        StreamLimitLayer::new(10),
        builder,
    );
    let (raw, victim) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
    let (mut raw, victim) = (raw.unwrap(), victim.unwrap());
    let record = raw_frame(FrameKind::Data, &[7; 8 * 1024]);
    raw.get_mut()
        .write_all(&record[..record.len() - 1])
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(5), victim.closed())
        .await
        .expect("the victim's connection ends within 5 s, its idle timeout is 30 s");
    let waited = start.elapsed();
    assert!(
        is_error(
            &ended,
            ErrorKind::Timeout,
            "a record the peer began did not arrive whole"
        ),
        "{ended:?}"
    );
    assert_eq!(ended.close_code(), CloseCode::IDLE_TIMEOUT);
    assert!(waited >= Duration::from_millis(250), "ended after {waited:?}");
    drop(raw);
}

/// 200 authenticated peers each send all of a largest record but its last
/// byte, and stop: what each makes the victim hold is about what it sent,
/// not twice that (docs/SECURITY.md's per-connection worst case).
#[tokio::test(flavor = "current_thread")]
async fn a_held_partial_record_costs_about_its_own_size() {
    use tokio::io::AsyncWriteExt;
    use weft::handshake::HandshakeExt;
    const PEERS: usize = 200;
    let mut victims = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..PEERS {
        let (a, b) = tcp_streams().await;
        let mut dialer = stack(ident(1), &[CipherSuite::Aes256Gcm]);
        let mut acceptor = conn_stack(
            ident(2),
            CipherSuite::Aes256Gcm,
            StreamLimitLayer::new(10),
            Builder::new(),
        );
        let (raw, victim) = tokio::join!(dialer.dial(a), acceptor.accept_transport(b));
        peers.push(raw.unwrap());
        victims.push(victim.unwrap());
    }
    // Let the connections settle (their greetings and first buffers).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let record = raw_frame(FrameKind::Data, &vec![7; 65_552]);
    let before = live();
    for raw in &mut peers {
        raw.get_mut()
            .write_all(&record[..record.len() - 1])
            .await
            .unwrap();
    }
    // The victims read what arrived (the peers' writes went to the kernel).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let each = (live() - before) / PEERS as isize;
    println!("a held partial record of 65,551 bytes costs {each} bytes");
    assert!(each <= 70 * 1024, "{each} bytes per held partial record");
    assert!(victims.iter().all(|victim| !victim.is_closed()));
    drop((peers, victims));
}
