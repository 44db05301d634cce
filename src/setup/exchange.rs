//! The Setup exchange, sans-IO: our Setup message out, the peer's in, and
//! the agreement both sides reach from the two without another message.

use prost::Message;

use super::{agree, transcript_hash};
use crate::{
    error::{Error, Repr},
    frame::{Frame, FrameKind},
    handshake::{Agreement, Role},
    proto::Setup,
    record::parse_close,
};

/// Our half of the Setup exchange: our Setup, encoded once, exactly as it
/// is sent and hashed into the transcript.
///
/// Both sides send their Setup at once, so there is no state to wait in
/// before ours is out: [`SetupSent::frame`] goes on the wire, and the peer's
/// first frame goes to [`SetupSent::receive`].
#[derive(Debug)]
pub(crate) struct SetupSent {
    role: Role,
    setup: Setup,
    frame: Vec<u8>,
}

impl SetupSent {
    /// Our side of the exchange as `role`, sending `setup`. Fails if the
    /// encoded Setup is larger than `max_size`, the most we would accept
    /// from a peer (docs/PROTOCOL.md, section 4).
    pub(crate) fn new(role: Role, setup: Setup, max_size: usize) -> Result<Self, Error> {
        if setup.protocols.len() > MAX_SETUP_PROTOCOLS
            || setup.protocols.iter().any(|p| p.len() > MAX_PROTOCOL_NAME)
        {
            return Err(Repr::Stack(
                "more than 32 application protocols, or a name over 255 bytes: a peer refuses such a Setup",
            )
            .into());
        }
        let payload = setup.encode_to_vec();
        if payload.len() > max_size {
            return Err(Repr::Stack("our Setup is larger than the largest Setup we accept").into());
        }
        let mut frame = FrameKind::Setup.header(payload.len()).to_vec();
        frame.extend_from_slice(&payload);
        Ok(Self { role, setup, frame })
    }

    /// The frame to send: header and encoded Setup.
    pub(crate) fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// The peer's first frame: its Setup, or its refusal. A refusal before
    /// there are keys comes in the clear, so it is reported as
    /// [`Repr::UnauthenticatedClose`]; a clean close is a truncation.
    pub(crate) fn receive(self, frame: Frame) -> Result<Agreed, Error> {
        match frame.kind {
            FrameKind::Setup => {}
            FrameKind::Close => {
                return Err(match parse_close(&frame.payload)? {
                    Some((code, reason)) => Repr::UnauthenticatedClose { code, reason }.into(),
                    None => Repr::Truncated.into(),
                })
            }
            got => {
                return Err(Repr::UnexpectedFrame {
                    expected: "a Setup",
                    got,
                }
                .into())
            }
        }
        check_repeated_fields(&frame.payload)?;
        let theirs = Setup::decode(&frame.payload[..]).map_err(Repr::SetupDecode)?;
        let agreement = agree(&self.setup, &theirs, self.role)?;
        let ours = &self.frame[crate::frame::HEADER_LEN..];
        let transcript = match self.role {
            Role::Dialer => transcript_hash(ours, &frame.payload),
            Role::Acceptor => transcript_hash(&frame.payload, ours),
        };
        // Without suites on our side (and so on theirs) there are no
        // proofs, and the key is ignored (docs/PROTOCOL.md, section 5).
        let proofs_follow = !self.setup.suites.is_empty();
        Ok(Agreed {
            agreement,
            transcript,
            peer_ephemeral: theirs.ephemeral_key[..].try_into().ok().filter(|_| proofs_follow),
        })
    }
}

/// Cipher suite ids a Setup may list (docs/PROTOCOL.md, section 4).
pub(crate) const MAX_SETUP_SUITES: usize = 16;
/// Application protocols a Setup may list, and the longest name.
pub(crate) const MAX_SETUP_PROTOCOLS: usize = 32;
pub(crate) const MAX_PROTOCOL_NAME: usize = 255;

/// Counts the repeated fields of an encoded Setup before it is decoded:
/// 2,000 empty protocol names fit in 4 KiB and would decode to 48 KiB of
/// `String`s, before the peer has proven anything. (Malformed encodings
/// are left to the decoder to report.)
fn check_repeated_fields(mut buf: &[u8]) -> Result<(), Error> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let (mut suites, mut protocols) = (0usize, 0usize);
    while !buf.is_empty() {
        let Ok((tag, wire_type)) = decode_key(&mut buf) else {
            return Ok(());
        };
        match (tag, wire_type) {
            (4 | 9, WireType::LengthDelimited) => {
                let Ok(len) = decode_varint(&mut buf) else {
                    return Ok(());
                };
                let Some(field) = usize::try_from(len).ok().and_then(|len| buf.get(..len)) else {
                    return Ok(());
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
                    return Ok(());
                }
            }
            _ => {
                if skip_field(wire_type, tag, &mut buf, DecodeContext::default()).is_err() {
                    return Ok(());
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
    Ok(())
}

/// Both Setups are in and agreed: what the layers above build on.
#[derive(Debug, Clone)]
pub(crate) struct Agreed {
    agreement: Agreement,
    transcript: [u8; 32],
    peer_ephemeral: Option<[u8; 32]>,
}

impl Agreed {
    /// What both sides agreed.
    #[cfg(test)]
    pub(crate) fn agreement(&self) -> &Agreement {
        &self.agreement
    }

    /// The transcript hash of both Setups, dialer's first (section 6): what
    /// the keys are salted with and the identity proofs sign.
    #[cfg(test)]
    pub(crate) fn transcript(&self) -> &[u8; 32] {
        &self.transcript
    }

    /// The peer's ephemeral X25519 key, if it sent one of 32 bytes.
    #[cfg(test)]
    pub(crate) fn peer_ephemeral(&self) -> Option<&[u8; 32]> {
        self.peer_ephemeral.as_ref()
    }

    pub(crate) fn into_parts(self) -> (Agreement, [u8; 32], Option<[u8; 32]>) {
        (self.agreement, self.transcript, self.peer_ephemeral)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_setups_cross_and_agree_on_one_transcript() -> Result<(), crate::Error> {
        use crate::{frame::FrameCodec, handshake::Role, proto::Setup, setup::SetupSent};
        use bytes::BytesMut;
        use tokio_util::codec::Decoder;

        let setup = |min_version| Setup {
            min_version,
            max_version: 2,
            ..Setup::default()
        };
        let dialer = SetupSent::new(Role::Dialer, setup(1), 4096)?;
        let acceptor = SetupSent::new(Role::Acceptor, setup(2), 4096)?;
        // Each side's frame crosses to the other.
        let frame = |bytes: &[u8]| {
            FrameCodec::new(4096)
                .decode(&mut BytesMut::from(bytes))
                .unwrap()
                .unwrap()
        };
        let (to_acceptor, to_dialer) = (frame(dialer.frame()), frame(acceptor.frame()));
        let d = dialer.receive(to_dialer)?;
        let a = acceptor.receive(to_acceptor)?;
        assert_eq!(d.agreement().version(), 2);
        assert_eq!(d.transcript(), a.transcript());
        Ok(())
    }
}
