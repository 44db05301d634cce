//! Hostile peers, one case per test, each named after what the offender
//! gets: the outcome, that the heap comes back, and that a well-behaved
//! connection served alongside keeps working throughout.

mod support;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use support::*;
use weft::{mux::Builder, CipherSuite, CloseCode, Connection, Error, StreamLimitLayer};

/// Counts the heap this thread holds (support::ThreadHeap): a test on a
/// current-thread runtime sees what its connections retain.
#[global_allocator]
static GLOBAL: ThreadHeap = ThreadHeap;

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
    // Faster than the accept loop: streams reset before they are accepted.
    let why = rapid_reset(64).await;
    assert!(why.contains("before they were accepted"), "{why}");
}

/// The same, the attacker letting the accept loop take each stream before
/// resetting it: the budget of resets per second stops it.
#[tokio::test]
async fn rapid_reset_after_each_accept_gets_go_away_at_the_budget_per_second() {
    let why = rapid_reset(1).await;
    assert!(why.contains("in a second"), "{why}");
}

/// Runs the attack, yielding to the server every `yield_every` streams;
/// returns the reason of the victim's go-away.
async fn rapid_reset(yield_every: u32) -> String {
    let (attacker, victim) = pair(100).await;
    let (honest, served) = pair(100).await;
    let echo = echo_server(served);
    let before = live();
    let accepted = Arc::new(AtomicUsize::new(0));
    let accept_loop = {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            // The application reads each stream it gets, as a server would.
            while let Ok(Some(mut stream)) = victim.accept().await {
                accepted.fetch_add(1, Ordering::Relaxed);
                let _ = stream.recv().await;
            }
            victim.closed().await
        })
    };
    let honest_calls = tokio::spawn(async move {
        for n in 0..200u32 {
            assert_eq!(echo_once(&honest, &n.to_be_bytes()).await, n.to_be_bytes());
            tokio::task::yield_now().await;
        }
    });
    let mut opened = 0u32;
    let mut refused = None;
    for _ in 0..100_000 {
        match attacker.open().await {
            Ok(mut stream) => {
                opened += 1;
                stream.reset(CloseCode::CANCEL);
            }
            Err(err) => {
                refused = Some(err);
                break;
            }
        }
        if opened % yield_every == 0 {
            tokio::task::yield_now().await;
        }
    }
    let refused = refused.expect("the attacker was stopped before 100,000 streams");
    assert!(opened < 100_000, "{opened} streams opened");
    let ended = tokio::time::timeout(Duration::from_secs(5), accept_loop)
        .await
        .expect("the victim's connection ends")
        .unwrap();
    assert_eq!(ended.close_code(), CloseCode::EXCESSIVE_LOAD, "{ended:?}");
    assert!(
        refused.is_peer_close(CloseCode::EXCESSIVE_LOAD)
            || attacker.closed().await.is_peer_close(CloseCode::EXCESSIVE_LOAD),
        "the attacker hears why: {refused:?}"
    );
    assert!(
        accepted.load(Ordering::Relaxed) <= opened as usize,
        "no more streams reach the application than were opened"
    );
    tokio::time::timeout(Duration::from_secs(10), honest_calls)
        .await
        .expect("the honest connection keeps answering")
        .unwrap();
    drop(attacker);
    echo.abort();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let retained = live() - before;
    assert!(
        retained < 256 * 1024,
        "{retained} bytes still held after the attack"
    );
    match ended {
        Error::Closed { reason, .. } => reason,
        other => other.to_string(),
    }
}
