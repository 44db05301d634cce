//! Record protection per suite (seal + open of one record), against
//! crypto_box's own SalsaBox; and the public-key operations a handshake
//! spends, to choose the identity proof by measurement.
//!
//! cargo bench -p weft-bench --bench records --features fuzzing

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crypto_box::{aead::AeadInPlace, SalsaBox, SecretKey};
use ring::signature::{self, Ed25519KeyPair, KeyPair};
use weft::{fuzzing::RecordKey, handshake::CipherSuite};
use x25519_dalek::{EphemeralSecret, PublicKey, StaticSecret};

const SIZES: [usize; 4] = [64, 1024, 16 * 1024, 64 * 1024];

/// The next nonce of a counter, as crypto_box users number their boxes.
fn counter_nonce(n: &mut u64) -> [u8; 24] {
    *n += 1;
    let mut nonce = [0u8; 24];
    nonce[16..].copy_from_slice(&n.to_be_bytes());
    nonce
}

fn seal_open(c: &mut Criterion) {
    let mut group = c.benchmark_group("seal_open");
    for size in SIZES {
        group.throughput(Throughput::Bytes(size as u64));
        for suite in [
            CipherSuite::Aes256Gcm,
            CipherSuite::ChaCha20Poly1305,
            CipherSuite::XSalsa20Poly1305,
            CipherSuite::XChaCha20Poly1305,
        ] {
            let fresh = || {
                (
                    RecordKey::new(suite, &[7; 32], [9; 24]),
                    RecordKey::new(suite, &[7; 32], [9; 24]),
                )
            };
            let (mut sealer, mut opener) = fresh();
            let mut record = vec![0x5a; size + 16];
            let header = [3, 0, 0, 0];
            let mut count = 0u64;
            group.bench_with_input(BenchmarkId::new(suite.name(), size), &size, |b, &size| {
                b.iter(|| {
                    // New keys now and then, as a connection would need
                    // after sealing AES-GCM's volume limit.
                    count += 1;
                    if count.is_multiple_of(1 << 20) {
                        (sealer, opener) = fresh();
                    }
                    let tag = sealer.seal(&header, &mut record[..size]).unwrap();
                    record[size..].copy_from_slice(&tag);
                    opener.open(&header, &mut record).unwrap();
                })
            });
        }
        // Baseline: crypto_box's NaCl box, as Vanadium used it.
        let ours = SecretKey::from([1; 32]);
        let theirs = SecretKey::from([2; 32]);
        let salsa_box = SalsaBox::new(&theirs.public_key(), &ours);
        let mut buf = vec![0x5a; size];
        let mut n = 0u64;
        group.bench_with_input(BenchmarkId::new("crypto_box_salsabox", size), &size, |b, _| {
            b.iter(|| {
                let nonce = counter_nonce(&mut n);
                let tag = salsa_box
                    .encrypt_in_place_detached(&nonce.into(), b"", &mut buf)
                    .unwrap();
                salsa_box
                    .decrypt_in_place_detached(&nonce.into(), b"", &mut buf, &tag)
                    .unwrap();
            })
        });
    }
    group.finish();
}

/// Sealing alone: what a sender's core spends per record.
fn seal_only(c: &mut Criterion) {
    let mut group = c.benchmark_group("seal");
    for size in [16 * 1024, 64 * 1024] {
        group.throughput(Throughput::Bytes(size as u64));
        let mut buf = vec![0x5a; size];
        let ours = SecretKey::from([1; 32]);
        let salsa_box = SalsaBox::new(&SecretKey::from([2; 32]).public_key(), &ours);
        let mut n = 0u64;
        group.bench_with_input(BenchmarkId::new("crypto_box_salsabox", size), &size, |b, _| {
            b.iter(|| {
                let nonce = counter_nonce(&mut n);
                salsa_box
                    .encrypt_in_place_detached(&nonce.into(), b"", &mut buf)
                    .unwrap()
            })
        });
        for suite in [
            CipherSuite::XSalsa20Poly1305,
            CipherSuite::XChaCha20Poly1305,
            CipherSuite::Aes256Gcm,
            CipherSuite::ChaCha20Poly1305,
        ] {
            let mut key = RecordKey::new(suite, &[7; 32], [9; 24]);
            let mut count = 0u64;
            group.bench_with_input(BenchmarkId::new(suite.name(), size), &size, |b, _| {
                b.iter(|| {
                    count += 1;
                    if count.is_multiple_of(1 << 20) {
                        key = RecordKey::new(suite, &[7; 32], [9; 24]);
                    }
                    key.seal(&[3, 0, 0, 0], &mut buf).unwrap()
                })
            });
        }
    }
    group.finish();
}

fn handshake_operations(c: &mut Criterion) {
    let mut group = c.benchmark_group("handshake_ops");
    let peer = PublicKey::from(&StaticSecret::from([3; 32]));
    group.bench_function("x25519_keygen", |b| {
        b.iter(|| PublicKey::from(&EphemeralSecret::random_from_rng(rand_core::OsRng)))
    });
    let secret = StaticSecret::from([4; 32]);
    group.bench_function("x25519_dh", |b| b.iter(|| secret.diffie_hellman(&peer)));
    let bytes = secret.to_bytes();
    group.bench_function("x25519_dh_edwards", |b| {
        b.iter(|| {
            curve25519_dalek::montgomery::MontgomeryPoint(*peer.as_bytes())
                .to_edwards(0)
                .unwrap()
                .mul_clamped(bytes)
                .to_montgomery()
        })
    });
    // The proof weft uses: one Ed25519 signature, one verification.
    let keys = Ed25519KeyPair::from_seed_unchecked(&[5; 32]).unwrap();
    let message = [6u8; 56];
    group.bench_function("ed25519_sign", |b| b.iter(|| keys.sign(&message)));
    let sig = keys.sign(&message);
    let public = signature::UnparsedPublicKey::new(&signature::ED25519, keys.public_key().as_ref().to_vec());
    group.bench_function("ed25519_verify", |b| {
        b.iter(|| public.verify(&message, sig.as_ref()).unwrap())
    });
    // The same operations in ed25519-dalek (curve25519-dalek's backends).
    let dalek = ed25519_dalek::SigningKey::from_bytes(&[5; 32]);
    group.bench_function("ed25519_dalek_sign", |b| {
        b.iter(|| ed25519_dalek::Signer::sign(&dalek, &message))
    });
    let dalek_sig = ed25519_dalek::Signer::sign(&dalek, &message);
    let dalek_public = dalek.verifying_key();
    group.bench_function("ed25519_dalek_verify", |b| {
        b.iter(|| dalek_public.verify_strict(&message, &dalek_sig).unwrap())
    });
    group.bench_function("ed25519_dalek_verify_nonstrict", |b| {
        b.iter(|| ed25519_dalek::Verifier::verify(&dalek_public, &message, &dalek_sig).unwrap())
    });
    // aws-lc's Ed25519 (through aws-lc-rs): weft signs with it since
    // 2026-12-06 and verifies strictly with ed25519-dalek.
    let aws_keys = aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&[5; 32]).unwrap();
    group.bench_function("aws_lc_ed25519_sign", |b| b.iter(|| aws_keys.sign(&message)));
    let aws_public = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::ED25519,
        aws_lc_rs::signature::KeyPair::public_key(&aws_keys)
            .as_ref()
            .to_vec(),
    );
    group.bench_function("aws_lc_ed25519_verify", |b| {
        b.iter(|| {
            aws_public
                .verify(&message, dalek_sig.to_bytes().as_ref())
                .unwrap()
        })
    });
    // ring's X25519, for comparison with x25519-dalek.
    group.bench_function("ring_x25519_keygen_agree", |b| {
        let rng = ring::rand::SystemRandom::new();
        let peer_public = ring::agreement::UnparsedPublicKey::new(&ring::agreement::X25519, *peer.as_bytes());
        b.iter(|| {
            let key = ring::agreement::EphemeralPrivateKey::generate(&ring::agreement::X25519, &rng).unwrap();
            ring::agreement::agree_ephemeral(key, &peer_public, |k| k[0]).unwrap()
        })
    });
    // aws-lc's X25519 (through aws-lc-rs), for a static secret (a box key)
    // and for a key pair made per agreement (a handshake's ephemeral).
    let aws_secret =
        aws_lc_rs::agreement::PrivateKey::from_private_key(&aws_lc_rs::agreement::X25519, &bytes).unwrap();
    group.bench_function("aws_lc_x25519_dh", |b| {
        b.iter(|| {
            let peer_public =
                aws_lc_rs::agreement::UnparsedPublicKey::new(&aws_lc_rs::agreement::X25519, *peer.as_bytes());
            aws_lc_rs::agreement::agree(&aws_secret, peer_public, (), |k| Ok(k[0])).unwrap()
        })
    });
    group.bench_function("aws_lc_x25519_keygen", |b| {
        b.iter(|| {
            let key = aws_lc_rs::agreement::PrivateKey::generate(&aws_lc_rs::agreement::X25519).unwrap();
            key.compute_public_key().unwrap()
        })
    });
    // The alternative: a box from the static X25519 secret to the peer's
    // ephemeral key, made by one side and opened by the other: two DH.
    group.bench_function("static_box_proof_2x_dh", |b| {
        b.iter(|| (secret.diffie_hellman(&peer), secret.diffie_hellman(&peer)))
    });
    group.finish();
}

criterion_group!(benches, seal_open, seal_only, handshake_operations);
criterion_main!(benches);
