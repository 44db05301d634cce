//! The Setup message (docs/PROTOCOL.md, section 4): ours, made from what
//! each layer asked for and encoded once, exactly as it is sent and
//! hashed; the peer's, counted before it is decoded; and field 10, the
//! dialer's early data, which must come last.

use prost::Message;

use super::{exchange::Start, offer::StreamOffer};
use crate::{
    crypto::early::EarlySeal,
    error::{Error, Repr},
    proto::Setup,
    terms::Versions,
};

/// Cipher suite ids a Setup may list (docs/PROTOCOL.md, section 4).
pub(crate) const MAX_SETUP_SUITES: usize = 16;
/// Application protocols a Setup may list, and the longest name.
pub(crate) const MAX_SETUP_PROTOCOLS: usize = 32;
pub(crate) const MAX_PROTOCOL_NAME: usize = 255;

/// Setup field 10 (`early_data`), length-delimited: its key byte.
const EARLY_FIELD_KEY: u8 = 0x52;

/// Our Setup message: our versions (clamped to what this build
/// implements) and application protocols, our ephemeral key and suites
/// if we encrypt, the largest record we accept, and the stream limit and
/// windows we declare. Fails, before anything is sent, on what no peer
/// would accept.
pub(crate) fn our_setup(start: &Start<'_>, ephemeral_key: Option<[u8; 32]>) -> Result<Setup, Error> {
    let versions: Versions = start.versions.implemented().ok_or(Repr::Stack(
        "no version this build implements (1 to 3) is in the range asked for",
    ))?;
    if start.protocols.len() > MAX_SETUP_PROTOCOLS
        || start.protocols.iter().any(|p| p.len() > MAX_PROTOCOL_NAME)
    {
        return Err(Repr::Stack(
            "more than 32 application protocols, or a name over 255 bytes: a peer refuses such a Setup",
        )
        .into());
    }
    let mut setup = Setup {
        min_version: versions.min(),
        max_version: versions.max(),
        protocols: start.protocols.to_vec(),
        ..Setup::default()
    };
    if start
        .encryption
        .is_some_and(|encryption| encryption.suites.is_empty())
    {
        // No suite would read as no encryption layer at all, and agree a
        // plaintext channel with a peer that has none.
        return Err(
            Repr::Stack("the EncryptLayer has no cipher suite: EncryptLayer::suites was given none").into(),
        );
    }
    if let (Some(key), Some(encryption)) = (ephemeral_key, start.encryption) {
        setup.ephemeral_key = key.to_vec();
        setup.suites = encryption.suites.iter().map(|suite| suite.id()).collect();
    }
    if let Some(records) = start.records {
        setup.max_record_size = records.max as u32;
    }
    if let Some(streams) = start.streams {
        declare_streams(&mut setup, streams);
    }
    Ok(setup)
}

fn declare_streams(setup: &mut Setup, streams: StreamOffer) {
    setup.max_streams = streams.max_streams();
    setup.stream_window = streams.stream_window().unwrap_or(0);
    setup.connection_window = streams.connection_window().unwrap_or(0);
}

/// The smaller of the stream and connection windows a Setup declares:
/// the most early data its sender lets the peer send on one stream.
pub(crate) fn early_window(setup: &Setup) -> u32 {
    let window = |declared: u32, default: u32| if declared == 0 { default } else { declared };
    window(setup.stream_window, 1 << 20).min(window(setup.connection_window, 4 << 20))
}

/// `setup` encoded, with early data of `seal`'s appended last when
/// given and the whole still fits `max_size`; and whether it went.
/// Fails if even without it the Setup is larger than `max_size`, the most
/// we accept from a peer (and so, by default, the most a peer accepts).
pub(crate) fn encode(
    setup: &Setup,
    max_size: usize,
    seal: Option<&EarlySeal>,
) -> Result<(Vec<u8>, bool), Error> {
    let payload = setup.encode_to_vec();
    if payload.len() > max_size {
        return Err(Repr::Stack("our Setup is larger than the largest Setup we accept").into());
    }
    if let Some(seal) = seal {
        let field = seal.seal(&payload);
        let with = append_early(payload.clone(), &field);
        if with.len() <= max_size {
            return Ok((with, true));
        }
    }
    Ok((payload, false))
}

/// The peer's Setup, decoded after its repeated fields were counted, and
/// how many times field 10 (early data) occurs in it: early data counts
/// only if once (section 17.3).
pub(crate) fn decode(payload: &[u8]) -> Result<(Setup, usize), Error> {
    let early_fields = check_repeated_fields(payload)?;
    Ok((Setup::decode(payload).map_err(Repr::SetupDecode)?, early_fields))
}

/// `d0` (a Setup's fields 1 to 9, encoded) with field 10 appended, last:
/// D (docs/PROTOCOL.md, section 17.2).
pub(crate) fn append_early(mut d0: Vec<u8>, early: &[u8]) -> Vec<u8> {
    d0.push(EARLY_FIELD_KEY);
    prost::encoding::encode_varint(early.len() as u64, &mut d0);
    d0.extend_from_slice(early);
    d0
}

/// The part of a Setup payload `d` before its field 10, when field 10
/// (`early`, as decoded) is the last thing in it: D0, what the early
/// data's nonce hashes. `None` if the early data is anywhere else.
pub(crate) fn setup_before_early<'a>(d: &'a [u8], early: &[u8]) -> Option<&'a [u8]> {
    let mut field = vec![EARLY_FIELD_KEY];
    prost::encoding::encode_varint(early.len() as u64, &mut field);
    field.extend_from_slice(early);
    d.strip_suffix(&field[..])
}

/// Counts the repeated fields of an encoded Setup before it is decoded:
/// 2,000 empty protocol names fit in 4 KiB and would decode to 48 KiB of
/// `String`s, before the peer has proven anything. (Malformed encodings
/// are left to the decoder to report.) How many times field 10 occurs.
fn check_repeated_fields(mut buf: &[u8]) -> Result<usize, Error> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let (mut suites, mut protocols, mut early) = (0usize, 0usize, 0usize);
    while !buf.is_empty() {
        let Ok((tag, wire_type)) = decode_key(&mut buf) else {
            return Ok(early);
        };
        early += usize::from(tag == 10);
        match (tag, wire_type) {
            (4 | 9, WireType::LengthDelimited) => {
                let Ok(len) = decode_varint(&mut buf) else {
                    return Ok(early);
                };
                let Some(field) = usize::try_from(len).ok().and_then(|len| buf.get(..len)) else {
                    return Ok(early);
                };
                if tag == 4 {
                    // Packed: one suite per varint's last byte.
                    suites += field.iter().filter(|b| *b & 0x80 == 0).count();
                } else {
                    protocols += 1;
                    if field.len() > MAX_PROTOCOL_NAME {
                        return Err(Repr::InvalidSetup("an application protocol name over 255 bytes").into());
                    }
                }
                buf = &buf[field.len()..];
            }
            (4, WireType::Varint) => {
                suites += 1;
                if decode_varint(&mut buf).is_err() {
                    return Ok(early);
                }
            }
            _ => {
                if skip_field(wire_type, tag, &mut buf, DecodeContext::default()).is_err() {
                    return Ok(early);
                }
            }
        }
        if suites > MAX_SETUP_SUITES {
            return Err(Repr::InvalidSetup("more than 16 cipher suites").into());
        }
        if protocols > MAX_SETUP_PROTOCOLS {
            return Err(Repr::InvalidSetup("more than 32 application protocols").into());
        }
    }
    Ok(early)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_data_must_be_the_last_field() {
        let early = b"sealed bytes";
        let mut d = append_early(b"d0".to_vec(), early);
        assert_eq!(d[2], 0x52, "field 10, length-delimited");
        assert_eq!(setup_before_early(&d, early), Some(&b"d0"[..]));
        d.extend_from_slice(b"\x48\x01"); // field 9 after it
        assert_eq!(setup_before_early(&d, early), None);
    }

    #[test]
    fn a_setup_with_too_many_repeated_fields_is_refused_before_it_is_decoded() {
        let mut many = Setup {
            suites: (0..17).collect(),
            ..Setup::default()
        };
        assert!(decode(&many.encode_to_vec()).is_err());
        many.suites.truncate(16);
        assert!(decode(&many.encode_to_vec()).is_ok());
        // Field 10 counted: early data twice does not count.
        let once = append_early(Setup::default().encode_to_vec(), b"early");
        assert_eq!(decode(&once).unwrap().1, 1);
        assert_eq!(decode(&append_early(once, b"again")).unwrap().1, 2);
        many.protocols = vec![String::new(); 33];
        assert!(decode(&many.encode_to_vec()).is_err());
        many.protocols.truncate(32);
        assert!(decode(&many.encode_to_vec()).is_ok());
        // A name of 255 bytes, and one byte more.
        many.protocols = vec!["p".repeat(255)];
        assert!(decode(&many.encode_to_vec()).is_ok());
        many.protocols[0].push('p');
        assert!(decode(&many.encode_to_vec()).is_err());
        // Suites not packed, one field each: counted the same.
        let unpacked = |n: u64| {
            let mut setup = Vec::new();
            for suite in 0..n {
                prost::encoding::encode_key(4, prost::encoding::WireType::Varint, &mut setup);
                prost::encoding::encode_varint(suite, &mut setup);
            }
            setup
        };
        assert_eq!(decode(&unpacked(16)).unwrap().0.suites.len(), 16);
        assert!(decode(&unpacked(17)).is_err());
    }
}
