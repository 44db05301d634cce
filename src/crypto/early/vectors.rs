//! The test vectors of docs/PROTOCOL.md section 17.7, through the code
//! that seals and opens early data (computed independently, with PyNaCl
//! (libsodium) and Python's hashlib and hmac, when they were written).

use super::*;
use crate::crypto::{Ephemeral, Identity};

const NOW_S: u64 = 1_800_000_000;
const NOW_MS: u64 = NOW_S * 1000;

fn hex<const N: usize>(text: &str) -> [u8; N] {
    assert_eq!(text.len(), 2 * N);
    std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
}

fn hex_vec(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn acceptor_identity() -> Identity {
    Identity::from_seed(&[1; 32])
}

/// Opens and checks early data as acceptor 1 does, for `protocol`.
fn accept(
    key: &BoxKey,
    early: &[u8],
    d0: &[u8],
    ephemeral: &[u8; 32],
    protocol: &[u8],
) -> Result<PeerId, &'static str> {
    let opened = open_box(key, early, d0, ephemeral)?;
    opened.verify(key, &acceptor_identity().peer_id(), protocol, ephemeral)
}

#[test]
fn the_early_data_of_protocol_md_matches_its_test_vectors() {
    let acceptor = acceptor_identity();
    let dialer = Identity::from_seed(&[2; 32]);
    let key = BoxKey::from_secret(
        Box::new(zeroize::Zeroizing::new(hex(
            "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f",
        ))),
        &acceptor,
        NOW_S,
        1_800_172_800,
    );
    assert_eq!(
        acceptor.peer_id().as_bytes(),
        &hex::<32>("8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c")
    );
    assert_eq!(
        key.public,
        hex::<32>("79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a")
    );
    assert_eq!(
        key.announcement,
        hex::<104>(concat!(
            "79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a000000006b4c7500",
            "f8b7373886eecad726096acf61bc06e6008db79df07c00820142f99e58863210f9ba4b09fd6a4f40",
            "46082702f1185fb83d193344b4e1328ec7396a029cc65009"
        ))
    );
    assert_eq!(
        key.announcement_hash,
        hex::<32>("e64529bf0a0f868e20026aff51ca813ff67e285abf0a20ec2a52c4644e214d10")
    );
    let ephemeral = Ephemeral::from_secret(hex(
        "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f",
    ));
    assert_eq!(
        ephemeral.public_key(),
        hex::<32>("675dd574ed7789310b3d2e7681f3790b466c773b1521fecf36577958371ea52f")
    );
    // D0: a Setup's fields 1 to 9 as prost encodes them.
    let setup = crate::proto::Setup {
        min_version: 1,
        max_version: 3,
        ephemeral_key: ephemeral.public_key().to_vec(),
        suites: vec![3, 2, 4, 1],
        max_record_size: 65_536,
        protocols: vec!["rpc".into()],
        ..Default::default()
    };
    let d0 = prost::Message::encode_to_vec(&setup);
    assert_eq!(
        d0,
        hex_vec("080110031a20675dd574ed7789310b3d2e7681f3790b466c773b1521fecf36577958371ea52f220403020401288080044a03727063")
    );
    assert_eq!(
        early_nonce(&d0),
        hex::<24>("4c3ddb6c2597cf3087b773e009e2886911f9f471672949c0")
    );
    let payload = b"hello, early data";
    let binding = Binding {
        acceptor: &acceptor.peer_id(),
        announcement: &key.announcement_hash,
        protocol: b"rpc",
    };
    let message = early_message(binding, &ephemeral.public_key(), NOW_MS, payload);
    assert_eq!(
        message,
        hex_vec(concat!(
            "7765667420763320626f756e64206561726c7920646174618a88e3dd7409f195fd52db2d3cba5d72",
            "ca6709bf1d94121bf3748801b40f6f5ce64529bf0a0f868e20026aff51ca813ff67e285abf0a20ec",
            "2a52c4644e214d10675dd574ed7789310b3d2e7681f3790b466c773b1521fecf36577958371ea52f",
            "000001a3185c500003727063f7d61dac8c84cec69772aec1b316f2fcb935d2302bb9330e3cebb33a",
            "0cecac75"
        ))
    );
    let announced = Announced::verify(&key.announcement, &acceptor.peer_id()).unwrap();
    let proof_key = ProofKey::from_bytes(&std::array::from_fn(|i| 0x80 + i as u8));
    let (_, seal) = PreparedBox::new(&announced, ephemeral).unwrap().seal_with(
        Credential::Signed(&dialer),
        &acceptor.peer_id(),
        b"rpc",
        NOW_MS,
        payload,
        proof_key.clone(),
    );
    let early = seal.unwrap().seal(&d0);
    assert_eq!(
        early,
        hex_vec(concat!(
            "79a631eede1bf9c923c9e534250c14fc5b550b1601420e91eee1ca8052d7519c1a841984b6e89cde",
            "e8239b3ddcf5e5dd48100959297a0405b5117e8ee004ff6532ecbd9208179426da4c27e0101be5e5",
            "10e2c3a2afff4e37107e5e831b4536c70ac26389eee32fb241598a26881420a5eaf23b915a38729f",
            "4e15567645fbd7382d907d774771902041c5f89a261c177ff70e644e3723b3b70b65735ed87abd9c",
            "1a93d98f2708b08d57f05d0971499851cdbe"
        ))
    );
    // The acceptor opens it, and it is the dialer's, bound to it and "rpc".
    let e = hex::<32>("675dd574ed7789310b3d2e7681f3790b466c773b1521fecf36577958371ea52f");
    assert_eq!(accept(&key, &early, &d0, &e, b"rpc"), Ok(dialer.peer_id()));
    // Its proof when it accepts, over a transcript of the bytes 0 to 31,
    // and a ticket's MAC of the same message under a PSK of 0xa0 to 0xbf.
    let transcript: [u8; 32] = std::array::from_fn(|i| i as u8);
    assert_eq!(
        proof_key.prove(&transcript),
        hex::<64>(concat!(
            "6d0923037ad1068b2d30fb8db13c349c2dfb375092514242f6a2d4c035646c2c",
            "333c90d4990251ea71b10b346b95b808a80ca218a12a306653d4f45d38a643ed"
        ))
    );
    let psk = ticket::Psk::from_bytes(&std::array::from_fn(|i| 0xa0 + i as u8));
    assert_eq!(
        psk.mac(&message),
        hex::<32>("3f27cb883b9c93d226d9f4696ce6f615618b461c938f088ca199af36ee9f263f")
    );
}
