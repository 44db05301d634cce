//! The agreement both sides reach from the two Setup messages, without
//! another message, and the transcript of both (docs/PROTOCOL.md,
//! sections 5 and 6).

use aws_lc_rs::digest;

use crate::{
    error::{Error, Repr},
    proto::Setup,
    record::{DEFAULT_RECORD_SIZE, MAX_RECORD_SIZE, MIN_RECORD_SIZE},
    terms::{Agreement, CipherSuite, Role, Version, Versions},
};

fn record_size(declared: u32) -> usize {
    match declared {
        0 => DEFAULT_RECORD_SIZE,
        n => n as usize,
    }
}

fn stated(value: u32) -> Option<u32> {
    (value != 0).then_some(value)
}

/// Agrees on everything from our Setup and the peer's.
///
/// Deterministic and symmetric: the dialer and the acceptor reach the same
/// version, suite and protocol. Where both sides rank options, the
/// acceptor's ranking decides, as a TLS server's does.
pub(crate) fn agree(local: &Setup, peer: &Setup, role: Role) -> Result<Agreement, Error> {
    let local_versions = Versions::new(local.min_version, local.max_version);
    let peer_versions = Versions::from_wire(peer.min_version, peer.max_version)
        .ok_or(Repr::InvalidSetup("min_version exceeds max_version"))?;
    let mismatch = || Repr::VersionMismatch {
        local: local_versions,
        peer: peer_versions,
    };
    let agreed = local_versions.agree(peer_versions).ok_or_else(mismatch)?;
    // Our range is what this build implements (Versions::implemented), so
    // the agreed version is one it knows; behaviour is keyed on it exactly.
    let version = Version::from_number(agreed).ok_or_else(mismatch)?;

    if !peer.suites.is_empty() && peer.ephemeral_key.len() != 32 {
        return Err(Repr::InvalidSetup("ephemeral_key must be 32 bytes").into());
    }
    let suite = agree_suite(&local.suites, &peer.suites, role)?;

    let peer_record = record_size(peer.max_record_size);
    if peer_record < MIN_RECORD_SIZE {
        return Err(Repr::InvalidSetup("max_record_size below 512").into());
    }

    let protocol = agree_protocol(&local.protocols, &peer.protocols, role)?;

    Ok(Agreement {
        role,
        version,
        suite,
        send_record_size: peer_record.min(MAX_RECORD_SIZE),
        // Our own declaration is clamped to what weft supports, whatever a
        // caller wrote into the offer.
        recv_record_size: record_size(local.max_record_size).clamp(MIN_RECORD_SIZE, MAX_RECORD_SIZE),
        peer_max_streams: stated(peer.max_streams),
        peer_stream_window: stated(peer.stream_window),
        peer_connection_window: stated(peer.connection_window),
        local_max_streams: stated(local.max_streams),
        local_stream_window: stated(local.stream_window),
        local_connection_window: stated(local.connection_window),
        protocol,
    })
}

/// Both sides' lists as (the acceptor's, the dialer's): the acceptor's
/// ranking decides.
fn acceptor_first<'a, T>(local: &'a [T], peer: &'a [T], role: Role) -> (&'a [T], &'a [T]) {
    match role {
        Role::Acceptor => (local, peer),
        Role::Dialer => (peer, local),
    }
}

/// The acceptor's order decides: its first suite the dialer also offers.
fn agree_suite(local: &[u32], peer: &[u32], role: Role) -> Result<CipherSuite, Error> {
    let no_common = || Repr::NoCommonSuite {
        local: local.iter().filter_map(|&id| CipherSuite::from_id(id)).collect(),
        peer: peer.to_vec(),
    };
    match (local.is_empty(), peer.is_empty()) {
        // Neither side runs an encryption layer: a plaintext channel.
        (true, true) => return Ok(CipherSuite::Plaintext),
        // One side encrypts and the other cannot: that is no agreement,
        // even if the encrypting side allows plaintext, because plaintext
        // must be allowed explicitly by both.
        (true, false) | (false, true) => return Err(no_common().into()),
        (false, false) => {}
    }
    let (acceptor, dialer) = acceptor_first(local, peer, role);
    acceptor
        .iter()
        .filter(|id| dialer.contains(id))
        .find_map(|&id| CipherSuite::from_id(id))
        .ok_or_else(|| no_common().into())
}

fn agree_protocol(local: &[String], peer: &[String], role: Role) -> Result<Option<String>, Error> {
    if local.is_empty() || peer.is_empty() {
        return Ok(None);
    }
    let (acceptor, dialer) = acceptor_first(local, peer, role);
    acceptor
        .iter()
        .find(|p| dialer.contains(p))
        .cloned()
        .map(Some)
        .ok_or_else(|| {
            Repr::NoCommonProtocol {
                local: local.to_vec(),
                peer: peer.to_vec(),
            }
            .into()
        })
}

/// SHA-256 over both Setup messages, byte for byte as sent, dialer's first.
pub(crate) fn transcript_hash(dialer: &[u8], acceptor: &[u8]) -> [u8; 32] {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(b"weft v1 transcript");
    for setup in [dialer, acceptor] {
        ctx.update(&(setup.len() as u32).to_be_bytes());
        ctx.update(setup);
    }
    ctx.finish().as_ref().try_into().expect("SHA-256 is 32 bytes")
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_highest_common_version_and_the_acceptors_ranking_win() {
        use crate::{
            handshake::agree::agree,
            proto::Setup,
            terms::{CipherSuite, Role},
        };

        let dialer = Setup {
            min_version: 1,
            max_version: 3,
            ephemeral_key: vec![9; 32],
            suites: vec![CipherSuite::ChaCha20Poly1305.id(), CipherSuite::Aes256Gcm.id()],
            ..Setup::default()
        };
        let acceptor = Setup {
            min_version: 2,
            max_version: 5,
            ephemeral_key: vec![7; 32],
            suites: vec![CipherSuite::Aes256Gcm.id(), CipherSuite::ChaCha20Poly1305.id()],
            ..Setup::default()
        };
        let agreed = agree(&dialer, &acceptor, Role::Dialer).unwrap();
        assert_eq!(agreed.version(), 3);
        assert_eq!(agreed.suite(), CipherSuite::Aes256Gcm);
    }
    use super::*;
    use crate::terms::CipherSuite::*;

    fn setup(min: u32, max: u32, suites: &[CipherSuite]) -> Setup {
        Setup {
            min_version: min,
            max_version: max,
            ephemeral_key: if suites.is_empty() { vec![] } else { vec![1; 32] },
            suites: suites.iter().map(|s| s.id()).collect(),
            ..Setup::default()
        }
    }

    #[test]
    fn version_matrix_picks_the_highest_common_version() {
        // Our ranges are clamped to what this build implements (1 to 3)
        // before they are offered; the peer's are anything.
        let cases = [
            ((1, 1), (1, 1), Some(1)),
            ((1, 3), (2, 5), Some(3)),
            ((2, 3), (1, 3), Some(3)),
            ((1, 3), (4, 4), None),
            ((1, 2), (3, 4), None),
            ((2, 3), (1, 1), None),
        ];
        for ((lmin, lmax), (pmin, pmax), expected) in cases {
            let result = agree(&setup(lmin, lmax, &[]), &setup(pmin, pmax, &[]), Role::Dialer);
            match (result.as_ref().map_err(Error::repr), expected) {
                (Ok(a), Some(v)) => assert_eq!(a.version(), v),
                (Err(Repr::VersionMismatch { local, peer }), None) => {
                    assert_eq!(*local, Versions::new(lmin, lmax));
                    assert_eq!(*peer, Versions::new(pmin, pmax));
                }
                (other, _) => panic!("{lmin}-{lmax} vs {pmin}-{pmax}: {other:?}"),
            }
        }
    }

    #[test]
    fn mismatch_error_names_both_ranges() {
        let err = agree(&setup(1, 2, &[]), &setup(3, 4, &[]), Role::Acceptor).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no common protocol version: we speak [1, 2], the peer speaks [3, 4]"
        );
    }

    #[test]
    fn the_acceptors_order_decides_and_both_sides_agree() {
        let dialer = setup(1, 1, &[ChaCha20Poly1305, Aes256Gcm, XSalsa20Poly1305]);
        let acceptor = setup(1, 1, &[XSalsa20Poly1305, Aes256Gcm]);
        let d = agree(&dialer, &acceptor, Role::Dialer).unwrap();
        let a = agree(&acceptor, &dialer, Role::Acceptor).unwrap();
        assert_eq!(d.suite(), XSalsa20Poly1305);
        assert_eq!(a.suite(), XSalsa20Poly1305);
    }

    #[test]
    fn plaintext_needs_both_sides() {
        let strict = setup(1, 1, &[Aes256Gcm]);
        let lax = setup(1, 1, &[Plaintext]);
        assert!(matches!(
            agree(&strict, &lax, Role::Dialer).as_ref().map_err(Error::repr),
            Err(Repr::NoCommonSuite { .. })
        ));
        let lax2 = setup(1, 1, &[Aes256Gcm, Plaintext]);
        assert_eq!(agree(&lax2, &lax, Role::Dialer).unwrap().suite(), Plaintext);
        // A side without an encryption layer never agrees with one that has it,
        let none = setup(1, 1, &[]);
        assert!(matches!(
            agree(&none, &lax, Role::Dialer).as_ref().map_err(Error::repr),
            Err(Repr::NoCommonSuite { .. })
        ));
        // and two such sides agree on plaintext.
        assert_eq!(agree(&none, &none, Role::Dialer).unwrap().suite(), Plaintext);
    }

    #[test]
    fn unknown_suite_ids_are_skipped() {
        let mut peer = setup(1, 1, &[Aes256Gcm]);
        peer.suites.insert(0, 0xdead);
        let agreed = agree(&setup(1, 1, &[Aes256Gcm]), &peer, Role::Dialer).unwrap();
        assert_eq!(agreed.suite(), Aes256Gcm);
        // Even when both sides list the unknown id first.
        let mut ours = setup(1, 1, &[Aes256Gcm]);
        ours.suites.insert(0, 0xdead);
        let agreed = agree(&ours, &peer, Role::Acceptor).unwrap();
        assert_eq!(agreed.suite(), Aes256Gcm);
    }

    #[test]
    fn invalid_peer_setups_are_refused() {
        let ours = setup(1, 1, &[Aes256Gcm]);
        let mut bad = setup(1, 1, &[Aes256Gcm]);
        bad.ephemeral_key.pop();
        assert!(matches!(
            agree(&ours, &bad, Role::Dialer).as_ref().map_err(Error::repr),
            Err(Repr::InvalidSetup(_))
        ));
        let mut upside_down = setup(1, 1, &[Aes256Gcm]);
        upside_down.min_version = 3;
        assert!(matches!(
            agree(&ours, &upside_down, Role::Dialer)
                .as_ref()
                .map_err(Error::repr),
            Err(Repr::InvalidSetup(_))
        ));
        // The least record size is 512: 511 is refused, 512 agreed.
        let mut tiny = setup(1, 1, &[Aes256Gcm]);
        tiny.max_record_size = MIN_RECORD_SIZE as u32 - 1;
        assert!(matches!(
            agree(&ours, &tiny, Role::Dialer).as_ref().map_err(Error::repr),
            Err(Repr::InvalidSetup("max_record_size below 512"))
        ));
        tiny.max_record_size = MIN_RECORD_SIZE as u32;
        let agreed = agree(&ours, &tiny, Role::Dialer).unwrap();
        assert_eq!(agreed.send_record_size(), 512);
    }

    #[test]
    fn record_sizes_and_limits_come_from_the_right_side() {
        let mut ours = setup(1, 1, &[]);
        ours.max_record_size = 4096;
        let mut peer = setup(1, 1, &[]);
        peer.max_record_size = 1 << 30;
        peer.max_streams = 100;
        let agreed = agree(&ours, &peer, Role::Dialer).unwrap();
        assert_eq!(agreed.recv_record_size(), 4096);
        assert_eq!(agreed.send_record_size(), MAX_RECORD_SIZE);
        assert_eq!(agreed.peer_max_streams(), Some(100));
        assert_eq!(agreed.peer_stream_window(), None);
    }

    #[test]
    fn protocols_agree_in_the_acceptors_order() {
        let mut d = setup(1, 1, &[]);
        d.protocols = vec!["http/1.1".into(), "h2".into()];
        let mut a = setup(1, 1, &[]);
        a.protocols = vec!["h2".into(), "http/1.1".into()];
        assert_eq!(agree(&d, &a, Role::Dialer).unwrap().protocol(), Some("h2"));
        a.protocols = vec!["rpc".into()];
        assert!(matches!(
            agree(&d, &a, Role::Dialer).as_ref().map_err(Error::repr),
            Err(Repr::NoCommonProtocol { .. })
        ));
        a.protocols.clear();
        assert_eq!(agree(&d, &a, Role::Dialer).unwrap().protocol(), None);
    }

    #[test]
    fn transcript_hash_depends_on_every_byte_and_the_order() {
        let base = transcript_hash(b"abc", b"def");
        assert_ne!(base, transcript_hash(b"def", b"abc"));
        assert_ne!(base, transcript_hash(b"ab", b"cdef"));
        assert_ne!(base, transcript_hash(b"abd", b"def"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        #[test]
        fn a_random_setup_payload_is_an_error_or_an_agreement(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            let ours = Setup { min_version: 1, max_version: 1, ..Setup::default() };
            if let Ok(theirs) = <Setup as prost::Message>::decode(&bytes[..]) {
                let _ = agree(&ours, &theirs, Role::Acceptor);
            }
        }
    }
}
