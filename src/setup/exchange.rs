//! The Setup exchange, sans-IO: our Setup message out, the peer's in, and
//! the agreement both sides reach from the two without another message.

use prost::Message;

use super::{agree, transcript_hash};
use crate::{
    error::{Error, Repr},
    frame::{Frame, FrameKind},
    handshake::{Agreement, EarlySealer, Role},
    proto::Setup,
    record::{parse_close, EarlyFacts, PeerEarly},
};

/// Setup field 10 (`early_data`), length-delimited: its key byte.
const EARLY_FIELD_KEY: u8 = 0x52;

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
    /// Whether the Setup carries early data (version 3).
    early_sent: bool,
}

impl SetupSent {
    /// Our side of the exchange as `role`, sending `setup`. Fails if the
    /// encoded Setup is larger than `max_size`, the most we would accept
    /// from a peer (docs/PROTOCOL.md, section 4).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn new(role: Role, setup: Setup, max_size: usize) -> Result<Self, Error> {
        Self::with_early(role, setup, max_size, None)
    }

    /// The same, with early data sealed by `early` appended when the Setup
    /// offers version 3 and the whole still fits `max_size` (the most a
    /// peer accepts by default); otherwise without it.
    pub(crate) fn with_early(
        role: Role,
        setup: Setup,
        max_size: usize,
        early: Option<&dyn EarlySealer>,
    ) -> Result<Self, Error> {
        if setup.protocols.len() > MAX_SETUP_PROTOCOLS
            || setup.protocols.iter().any(|p| p.len() > MAX_PROTOCOL_NAME)
        {
            return Err(Repr::Stack(
                "more than 32 application protocols, or a name over 255 bytes: a peer refuses such a Setup",
            )
            .into());
        }
        let mut payload = setup.encode_to_vec();
        if payload.len() > max_size {
            return Err(Repr::Stack("our Setup is larger than the largest Setup we accept").into());
        }
        let mut early_sent = false;
        if let Some(sealer) = early.filter(|_| role == Role::Dialer && setup.max_version >= 3) {
            let field = sealer.seal(&payload);
            let with = append_early(payload.clone(), &field);
            if with.len() <= max_size {
                payload = with;
                early_sent = true;
            }
        }
        let mut frame = FrameKind::Setup.header(payload.len()).to_vec();
        frame.extend_from_slice(&payload);
        Ok(Self {
            role,
            setup,
            frame,
            early_sent,
        })
    }

    /// Whether our Setup carries early data.
    #[cfg(test)]
    pub(crate) fn early_sent(&self) -> bool {
        self.early_sent
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
        // Early data counts only with version 3 agreed, and only where the
        // dialer must put it: last (docs/PROTOCOL.md, section 17.3).
        let peer_early = (self.role == Role::Acceptor
            && agreement.version() >= 3
            && proofs_follow
            && !theirs.early_data.is_empty())
        .then(|| {
            setup_before_early(&frame.payload, &theirs.early_data).map(|d0| PeerEarly {
                sealed: theirs.early_data.clone(),
                d0: d0.to_vec(),
            })
        })
        .flatten();
        let window = |declared: u32, default: u32| if declared == 0 { default } else { declared };
        let local_window =
            window(self.setup.stream_window, 1 << 20).min(window(self.setup.connection_window, 4 << 20));
        Ok(Agreed {
            early_sent: self.early_sent && agreement.version() >= 3,
            agreement,
            transcript,
            peer_ephemeral: theirs.ephemeral_key[..].try_into().ok().filter(|_| proofs_follow),
            peer_early,
            local_window,
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
    early_sent: bool,
    peer_early: Option<PeerEarly>,
    local_window: u32,
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

    /// Whether our early data went out with version 3 agreed, and the
    /// peer's early data, if it sent some where it must.
    #[cfg(test)]
    pub(crate) fn early(&self) -> (bool, Option<&PeerEarly>) {
        (self.early_sent, self.peer_early.as_ref())
    }

    pub(crate) fn into_parts(self) -> (Agreement, [u8; 32], Option<[u8; 32]>, EarlyFacts) {
        let early = EarlyFacts {
            sent: self.early_sent,
            peer: self.peer_early,
            local_window: self.local_window,
        };
        (self.agreement, self.transcript, self.peer_ephemeral, early)
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

    /// A sealer that seals nothing: field 10 is `len` bytes of 7.
    #[derive(Debug)]
    struct Fixed(usize);

    impl crate::handshake::EarlySealer for Fixed {
        fn seal(&self, _d0: &[u8]) -> Vec<u8> {
            vec![7; self.0]
        }
    }

    #[test]
    fn early_data_rides_in_a_version_3_setup_and_counts_only_with_3_agreed() -> Result<(), crate::Error> {
        use crate::{frame::FrameCodec, handshake::Role, proto::Setup, setup::SetupSent};
        use bytes::BytesMut;
        use tokio_util::codec::Decoder;

        let setup = |max_version| Setup {
            min_version: 1,
            max_version,
            ephemeral_key: vec![9; 32],
            suites: vec![3],
            ..Setup::default()
        };
        let frame = |bytes: &[u8]| {
            FrameCodec::new(4096)
                .decode(&mut BytesMut::from(bytes))
                .unwrap()
                .unwrap()
        };
        let exchange = |dialer_max, acceptor_max, early_len| -> Result<_, crate::Error> {
            let sealer = Fixed(early_len);
            let dialer = SetupSent::with_early(Role::Dialer, setup(dialer_max), 4096, Some(&sealer))?;
            let acceptor = SetupSent::new(Role::Acceptor, setup(acceptor_max), 4096)?;
            let sent = dialer.early_sent();
            let (to_acceptor, to_dialer) = (frame(dialer.frame()), frame(acceptor.frame()));
            let d = dialer.receive(to_dialer)?;
            let a = acceptor.receive(to_acceptor)?;
            assert_eq!(d.transcript(), a.transcript());
            let d0_len = a.early().1.map(|early| (early.sealed.len(), early.d0.len()));
            Ok((sent, d.early().0, d0_len))
        };
        // Both speak 3: sent, and the acceptor finds it, after D0.
        let (sent, counted, found) = exchange(3, 3, 100)?;
        assert!(sent && counted);
        let plain = prost::Message::encode_to_vec(&setup(3)).len();
        assert_eq!(found, Some((100, plain)));
        // An acceptor of 1..2: it agrees on 2, and nothing counts.
        assert_eq!(exchange(3, 2, 100)?, (true, false, None));
        // A dialer of 1..2 sends none; nor does one whose Setup would pass
        // 4 KiB with it.
        assert_eq!(exchange(2, 3, 100)?, (false, false, None));
        assert_eq!(exchange(3, 3, 4096)?, (false, false, None));
        Ok(())
    }
}
