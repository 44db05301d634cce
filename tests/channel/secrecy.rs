//! What the wire shows and what a reflection does: no plaintext in an
//! encrypting suite's records, a fresh ephemeral key per handshake on both
//! sides, and a side's own Setup, proof or record refused when it comes
//! back as the peer's.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft::{
    handshake::{CipherSuite, HandshakeExt},
    Error, ErrorKind,
};

use crate::support::*;

/// What the dialer's side of one connection put on the wire: its Setup
/// and every frame after it, while it sent `PROBE` in records of 1 KiB;
/// the acceptor's Setup; and the channels' peers as each side saw them.
struct Wire {
    dialer_setup: wire::Setup,
    acceptor_setup: wire::Setup,
    after_setup: Vec<Vec<u8>>,
    peers: (Option<weft::handshake::PeerId>, Option<weft::handshake::PeerId>),
}

const PROBE: &[u8] = b"a plaintext that must never be seen on the wire. ";

async fn wire_of_one_connection(suite: CipherSuite) -> Wire {
    let d2a = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let a2d = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let record = |log: Arc<Mutex<Vec<Vec<u8>>>>| {
        move |_, raw: Vec<u8>| {
            log.lock().unwrap().push(raw.clone());
            Edit::Send(vec![raw])
        }
    };
    let (a, b) = middle(record(d2a.clone()), record(a2d.clone()));
    let (d, acc) = connect(stack(ident(1), &[suite]), stack(ident(2), &[suite]), a, b).await;
    let (mut d, mut acc) = (d.unwrap(), acc.unwrap());
    let peers = (d.peer().copied(), acc.peer().copied());
    let message = PROBE.repeat(400);
    for chunk in message.chunks(1024) {
        d.write_all(chunk).await.unwrap();
        d.flush().await.unwrap();
    }
    d.shutdown().await.unwrap();
    let mut got = Vec::new();
    while let Some(chunk) = acc.recv().await.unwrap() {
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, message, "{suite}: the data arrived");
    let setup = |raw: &[u8]| <wire::Setup as prost::Message>::decode(&raw[4..]).unwrap();
    let d2a = d2a.lock().unwrap().clone();
    let acceptor_setup = setup(&a2d.lock().unwrap()[0]);
    Wire {
        dialer_setup: setup(&d2a[0]),
        acceptor_setup,
        after_setup: d2a[1..].to_vec(),
        peers,
    }
}

/// Whether any 16 bytes of `PROBE` appear in `frames`.
fn shows_the_probe(frames: &[Vec<u8>]) -> bool {
    let bytes = frames.concat();
    PROBE
        .windows(16)
        .any(|needle| bytes.windows(16).any(|window| window == needle))
}

/// Confidentiality and forward secrecy as seen from the wire, for every
/// encrypting suite: the plaintext appears nowhere in what the dialer
/// sent, the same plaintext sent on two connections gives different
/// records, and each handshake uses ephemeral keys of its own on both
/// sides (so a later theft of the identity keys opens no recorded
/// connection). Plaintext is the control: the probe shows there. (Its
/// handshake still proved both identities, which the channel reports; what
/// is built on it attributes nothing to them: tests/mux.rs.)
#[tokio::test]
async fn the_wire_shows_no_plaintext_and_each_handshake_its_own_keys() {
    for suite in [
        CipherSuite::Aes256Gcm,
        CipherSuite::ChaCha20Poly1305,
        CipherSuite::XSalsa20Poly1305,
        CipherSuite::XChaCha20Poly1305,
    ] {
        let first = wire_of_one_connection(suite).await;
        let second = wire_of_one_connection(suite).await;
        assert!(
            !shows_the_probe(&first.after_setup),
            "{suite}: plaintext on the wire"
        );
        assert_eq!(
            first.peers,
            (Some(ident(2).peer_id()), Some(ident(1).peer_id())),
            "{suite}"
        );
        // The same records, sealed twice: no frame of one is a frame of
        // the other.
        assert!(first.after_setup.len() > 20, "{suite}: the records were seen");
        for frame in &first.after_setup {
            assert!(!second.after_setup.contains(frame), "{suite}: a record repeated");
        }
        let keys = [
            &first.dialer_setup.ephemeral_key,
            &first.acceptor_setup.ephemeral_key,
            &second.dialer_setup.ephemeral_key,
            &second.acceptor_setup.ephemeral_key,
        ];
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(key.len(), 32, "{suite}");
            assert!(!keys[..i].contains(key), "{suite}: an ephemeral key used twice");
        }
    }
    let plain = wire_of_one_connection(CipherSuite::Plaintext).await;
    assert!(
        shows_the_probe(&plain.after_setup),
        "the control: plaintext shows"
    );
    assert_eq!(plain.peers, (Some(ident(2).peer_id()), Some(ident(1).peer_id())));
}

/// Reflection: what a side sent, sent back to it as the peer's. A dialer
/// whose bytes all come back (it handshakes with itself), an acceptor
/// handed its own proof as the dialer's, and a dialer handed its own
/// record as the acceptor's: each fails, and names the step.
#[tokio::test]
async fn reflected_setups_proofs_and_records_fail() {
    let suite = CipherSuite::Aes256Gcm;
    // Everything reflected, from the first byte.
    let (near, far) = tokio::io::duplex(1 << 16);
    let echo = tokio::spawn(async move {
        let (mut r, mut w) = tokio::io::split(far);
        let _ = tokio::io::copy(&mut r, &mut w).await;
    });
    let alone = tokio::time::timeout(Duration::from_secs(5), stack(ident(1), &[suite]).dial(near))
        .await
        .expect("a reflected dial ends");
    // Its own proof does not open with the key it opens the peer's with:
    // each direction has its own.
    assert!(
        failed_with(&alone, ErrorKind::Record, "record 0 failed authentication"),
        "{alone:?}"
    );
    echo.abort();

    // The acceptor's proof (its frame 1) handed back to it as the
    // dialer's.
    let from_acceptor = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let log = from_acceptor.clone();
    let (a, b) = middle(
        {
            let from_acceptor = from_acceptor.clone();
            move |i, raw| {
                if i == 1 {
                    return Edit::Send(vec![from_acceptor.lock().unwrap()[1].clone()]);
                }
                Edit::Send(vec![raw])
            }
        },
        move |_, raw| {
            log.lock().unwrap().push(raw.clone());
            Edit::Send(vec![raw])
        },
    );
    let (_, acc) = connect(stack(ident(1), &[suite]), stack(ident(2), &[suite]), a, b).await;
    let acc = acc.map(drop);
    assert!(
        failed_with(&acc, ErrorKind::Record, "record 0 failed authentication"),
        "{acc:?}"
    );

    // The dialer's first record (its frame 2, "ping") handed back to it
    // in place of the acceptor's answer.
    let from_dialer = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let log = from_dialer.clone();
    let (a, b) = middle(
        move |_, raw| {
            log.lock().unwrap().push(raw.clone());
            Edit::Send(vec![raw])
        },
        {
            let from_dialer = from_dialer.clone();
            move |i, raw| {
                if i == 2 {
                    return Edit::Send(vec![from_dialer.lock().unwrap()[2].clone()]);
                }
                Edit::Send(vec![raw])
            }
        },
    );
    let (d, acc) = connect(stack(ident(1), &[suite]), stack(ident(2), &[suite]), a, b).await;
    let (mut d, mut acc) = (d.unwrap(), acc.unwrap());
    d.write_all(b"ping").await.unwrap();
    d.flush().await.unwrap();
    let mut ping = [0; 4];
    acc.read_exact(&mut ping).await.unwrap();
    acc.write_all(b"pong").await.unwrap();
    acc.flush().await.unwrap();
    let mut pong = [0; 4];
    let got = d.read_exact(&mut pong).await;
    let err = got.expect_err("a reflected record read as the peer's");
    let weft_err = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
    assert!(
        weft_err.is_some_and(|e| is_error(e, ErrorKind::Record, "record 1 failed authentication")),
        "{err:?}"
    );
}
