//! The read lent to the one task waiting on a connection: that task reads
//! the channel itself (no hand-off from the driver), and nobody else waits
//! on it for longer because of it. Loopback TCP, counted in records.

mod support;

use std::time::Duration;

use support::{conn_pair_over, echo_server, tcp_streams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft::{
    handshake::CipherSuite,
    mux::{Builder, Connection},
    StreamLimitLayer,
};

/// Well within the driver's first timer (a second, for its idle buffers),
/// which would take the read back by itself.
const PROMPTLY: Duration = Duration::from_millis(300);

async fn pair(builders: (Builder, Builder)) -> (Connection, Connection) {
    let (a, b) = tcp_streams().await;
    let limits = (StreamLimitLayer::new(100), StreamLimitLayer::new(100));
    conn_pair_over(a, b, CipherSuite::Aes256Gcm, limits, builders).await
}

#[tokio::test]
async fn the_one_waiting_task_reads_its_replies_itself() {
    let (client, server) = pair((Builder::new(), Builder::new())).await;
    echo_server(server);
    let mut stream = client.open().await.unwrap();
    let mut back = [0u8; 64];
    for i in 0..200u8 {
        stream.write_all(&[i; 64]).await.unwrap();
        stream.read_exact(&mut back).await.unwrap();
        assert_eq!(back, [i; 64]);
    }
    let stats = client.stats();
    // Every reply, save perhaps the first few (the connection's opening
    // records) and one that raced the task's turn, came without the driver.
    assert!(
        stats.records_read_by_streams >= 190,
        "{} of {} records read by the stream's task",
        stats.records_read_by_streams,
        stats.records_received
    );
}

#[tokio::test]
async fn many_waiting_tasks_leave_the_reading_to_the_driver() {
    let (client, server) = pair((Builder::new(), Builder::new())).await;
    echo_server(server);
    let mut calls = Vec::new();
    for i in 0..8u8 {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            let mut stream = client.open().await.unwrap();
            let mut back = [0u8; 1000];
            for _ in 0..50 {
                stream.write_all(&[i; 1000]).await.unwrap();
                stream.read_exact(&mut back).await.unwrap();
                assert_eq!(back, [i; 1000]);
            }
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    let stats = client.stats();
    assert!(stats.frames_received >= 400, "{stats:?}");
    // Eight tasks wait at once most of the time: the driver reads for all.
    assert!(
        stats.records_read_by_streams * 2 < stats.records_received,
        "{} of {} records read by a stream's task",
        stats.records_read_by_streams,
        stats.records_received
    );
}

#[tokio::test]
async fn a_read_given_up_while_lent_holds_back_nobody_who_waits() {
    let (client, server) = pair((Builder::new(), Builder::new())).await;
    let quiet = client.open().await.unwrap();
    let (mut quiet_recv, _quiet_send) = quiet.into_split();
    // The read is lent to this task, which gives up on it and does not
    // poll the stream again.
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_millis(20), quiet_recv.read(&mut buf)).await;
    assert!(read.is_err(), "nothing was sent on the quiet stream");
    // A stream the server opens, and data on it, reach a task that starts
    // to wait for them.
    let from_server = tokio::spawn(async move {
        let mut stream = server.open().await.unwrap();
        stream.write_all(b"hello").await.unwrap();
        stream.shutdown().await.unwrap();
        server
    });
    let accepted = tokio::time::timeout(PROMPTLY, client.accept()).await;
    let mut stream = accepted.expect("the server's stream in time").unwrap().unwrap();
    let mut hello = Vec::new();
    tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut hello))
        .await
        .expect("its data in time")
        .unwrap();
    assert_eq!(hello, b"hello");
    let server = from_server.await.unwrap();
    // And an echo on another stream goes through at once.
    echo_server(server);
    let mut other = client.open().await.unwrap();
    other.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    tokio::time::timeout(PROMPTLY, other.read_exact(&mut back))
        .await
        .expect("the echo in time")
        .unwrap();
    assert_eq!(&back, b"ping");
    drop(quiet_recv);
}

#[tokio::test]
async fn the_drivers_timer_takes_back_a_read_nobody_polls() {
    // The client pings every 50 ms: its timer brings the driver back.
    let client_builder = Builder::new().keepalive(Some(Duration::from_millis(50)));
    let (client, server) = pair((client_builder, Builder::new())).await;
    let mut quiet = client.open().await.unwrap();
    // (The server learns of the stream from its first frame.)
    quiet.write_all(b"x").await.unwrap();
    let (mut quiet_recv, _quiet_send) = quiet.into_split();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_millis(20), quiet_recv.read(&mut buf)).await;
    assert!(read.is_err());
    // The server writes on the stream the client's task no longer polls.
    let mut accepted = server.accept().await.unwrap().unwrap();
    accepted.write_all(&[7; 1000]).await.unwrap();
    accepted.flush().await.unwrap();
    // Nobody waits for it, yet it is read and buffered within the timer's
    // period, not held in the socket until someone polls.
    let read_in_time = async {
        while client.stats().buffered < 1000 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), read_in_time)
        .await
        .expect("the driver read what nobody polled for");
    drop(quiet_recv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_given_up_at_random_while_others_come_and_go_all_complete() {
    let (client, server) = pair((Builder::new(), Builder::new())).await;
    echo_server(server);
    // Meanwhile, other streams come and go: the read is lent and taken
    // back over and over.
    let churn = {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 0..100u32 {
                let message = i.to_be_bytes();
                assert_eq!(support::echo_once(&client, &message).await, message);
            }
        })
    };
    let mut stream = client.open().await.unwrap();
    let mut seed = 0x2545_f491_u32;
    let all = async {
        for i in 0..500u32 {
            stream.write_all(&i.to_be_bytes()).await.unwrap();
            let mut back = [0u8; 4];
            let mut got = 0;
            while got < 4 {
                // A read given up after 0-255 us, often while lent.
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let patience = Duration::from_micros(u64::from(seed >> 24));
                if let Ok(n) = tokio::time::timeout(patience, stream.read(&mut back[got..])).await {
                    got += n.unwrap();
                }
            }
            assert_eq!(back, i.to_be_bytes());
        }
    };
    tokio::time::timeout(Duration::from_secs(30), all)
        .await
        .expect("every echo came back");
    churn.await.unwrap();
    // (The read was lent along the way.)
    assert!(client.stats().records_read_by_streams > 0);
}
