//! The record opener under arbitrary input, for cargo-fuzz
//! (`fuzz/fuzz_targets/record_opener.rs`): either raw bytes as they would
//! come off the transport, or records sealed with the right key and then
//! damaged (a flipped bit, a cut, a record dropped or repeated), key
//! updates among them. Nothing may panic, no damaged record may open, and
//! every record before the damage opens to exactly what was sealed.
#![cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))] // public only to `weft::fuzzing`

use bytes::BytesMut;

use super::{open::Opener, KeySchedule, RecordKey};
use crate::{frame::FrameKind, terms::CipherSuite};

const MAX_PLAINTEXT: usize = 16 * 1024;

/// The first key of a direction, with the schedule of the keys after it.
fn first_key(suite: CipherSuite) -> RecordKey {
    RecordKey::new(suite, &[7; 32], [9; 24])
        .with_schedule(KeySchedule::new(suite, zeroize::Zeroizing::new([5; 32])))
}

fn opener(suite: CipherSuite) -> Opener {
    let mut opener = Opener::new(BytesMut::new(), MAX_PLAINTEXT + suite.tag_len());
    opener.set_limits(MAX_PLAINTEXT, suite.tag_len());
    opener.authenticated();
    if suite != CipherSuite::Plaintext {
        opener.set_key(first_key(suite));
        opener.enable_key_update();
    }
    opener
}

/// Feeds `wire` to `opener` in pieces of `step` bytes; returns the
/// plaintexts opened before the first error (and whether one came).
fn open_all(opener: &mut Opener, wire: &[u8], step: usize) -> (Vec<(FrameKind, Vec<u8>)>, bool) {
    let mut opened = Vec::new();
    for piece in wire.chunks(step.max(1)) {
        opener.read_buf().extend_from_slice(piece);
        loop {
            match opener.next_frame() {
                Ok(Some(frame)) => match opener.open(frame) {
                    Ok((kind, plaintext)) => opened.push((kind, plaintext.to_vec())),
                    Err(_) => return (opened, true),
                },
                Ok(None) => break,
                Err(_) => return (opened, true),
            }
        }
    }
    (opened, false)
}

/// One fuzz case: see the module's documentation.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let suite = CipherSuite::ALL[usize::from(mode >> 4) % CipherSuite::ALL.len()];
    let step = usize::from(mode & 0x07) * 97 + 1;
    if mode & 0x08 == 0 {
        // Raw bytes off the wire.
        let _ = open_all(&mut opener(suite), rest, step);
        return;
    }
    // Records sealed with the right key: [kind, len, bytes...] each, until
    // the input runs out; the last four bytes (if any) say how to damage.
    let (records, damage) = rest.split_at(rest.len().saturating_sub(4));
    let mut sealer = (suite != CipherSuite::Plaintext).then(|| first_key(suite));
    let mut sealed: Vec<Vec<u8>> = Vec::new();
    let mut plaintexts = Vec::new();
    let mut input = records;
    let mut updates_in_a_row = 0;
    while let [kind, len, tail @ ..] = input {
        let kind = [
            FrameKind::Auth,
            FrameKind::Data,
            FrameKind::Close,
            FrameKind::KeyUpdate,
        ][usize::from(*kind) % 4];
        let kind = match (kind, &sealer) {
            (FrameKind::KeyUpdate, None) => FrameKind::Data, // no keys to update
            // A receiver takes no more in a row (PROTOCOL.md 8.1): a
            // sender that stays within the rule sends a record between.
            (FrameKind::KeyUpdate, _) if updates_in_a_row == super::MAX_KEY_UPDATES_IN_A_ROW => {
                FrameKind::Data
            }
            (kind, _) => kind,
        };
        if kind == FrameKind::KeyUpdate {
            updates_in_a_row += 1;
        } else {
            updates_in_a_row = 0;
        }
        let len = if kind == FrameKind::KeyUpdate {
            0
        } else {
            usize::from(*len).min(tail.len())
        };
        let (plaintext, next) = tail.split_at(len);
        input = next;
        let mut body = plaintext.to_vec();
        let header = kind.header(body.len() + suite.tag_len());
        if let Some(key) = &mut sealer {
            let Ok(tag) = key.seal(&header, &mut body) else {
                return;
            };
            body.extend_from_slice(&tag[..suite.tag_len()]);
            if kind == FrameKind::KeyUpdate {
                let next = key.next().expect("the first key has a schedule");
                *key = next;
            }
        }
        let mut record = header.to_vec();
        record.extend_from_slice(&body);
        sealed.push(record);
        plaintexts.push((kind, plaintext.to_vec()));
    }
    let intact: Vec<u8> = sealed.concat();
    let (opened, failed) = open_all(&mut opener(suite), &intact, step);
    assert!(!failed, "an intact record failed to open");
    assert_eq!(opened, plaintexts, "intact records open to what was sealed");
    let [what, at_hi, at_lo, bit] = *damage else {
        return;
    };
    if sealed.is_empty() || suite == CipherSuite::Plaintext {
        // Without a key nothing can tell damage from data.
        return;
    }
    let at = usize::from(u16::from_be_bytes([at_hi, at_lo]));
    // The first record the damage touches: all before it must still open.
    let (wire, first_damaged) = match what % 4 {
        0 => {
            let at = at % intact.len();
            let mut wire = intact.clone();
            wire[at] ^= 1 << (bit % 8);
            (wire, record_at(&sealed, at))
        }
        1 => {
            // Cut anywhere: what is cut off never opens; what is whole does.
            let wire = &intact[..at % intact.len()];
            let (opened, _) = open_all(&mut opener(suite), wire, step);
            assert!(opened.len() <= plaintexts.len());
            assert_eq!(opened[..], plaintexts[..opened.len()]);
            return;
        }
        2 if sealed.len() > 1 => {
            // A record dropped: the ones after it fail (their sequence
            // numbers moved).
            let drop = at % sealed.len();
            ([&sealed[..drop], &sealed[drop + 1..]].concat().concat(), drop)
        }
        _ => {
            // A record replayed right after itself.
            let again = at % sealed.len();
            let mut records = sealed.clone();
            records.insert(again + 1, sealed[again].clone());
            (records.concat(), again + 1)
        }
    };
    let (opened, _) = open_all(&mut opener(suite), &wire, step);
    assert!(
        opened.len() <= first_damaged,
        "a damaged record opened ({} opened, damage at record {first_damaged})",
        opened.len()
    );
    assert_eq!(opened[..], plaintexts[..opened.len()]);
}

/// Which record of `sealed` byte `at` of their concatenation belongs to.
fn record_at(sealed: &[Vec<u8>], mut at: usize) -> usize {
    for (i, record) in sealed.iter().enumerate() {
        if at < record.len() {
            return i;
        }
        at -= record.len();
    }
    sealed.len()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        // The fuzz target's harness, in `cargo test`: sealed records with
        // damage (mode bit 0x08 set) and raw bytes.
        #[test]
        fn damaged_records_never_open(mode in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut data = vec![mode | 0x08];
            data.extend_from_slice(&body);
            super::run(&data);
        }

        #[test]
        fn raw_bytes_open_nothing_they_should_not(mode in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut data = vec![mode & !0x08];
            data.extend_from_slice(&body);
            super::run(&data);
        }
    }
}
