//! The Auth record's payload (docs/PROTOCOL.md, sections 9 and 17.3): a
//! side's identity proof, and under version 3 what the acceptor adds
//! after its own: the early data's status, its box key announcement, and
//! with accepted early data a ticket for the next.

use zeroize::Zeroizing;

use crate::{
    crypto::{early::Ticket, early::ANNOUNCEMENT_LEN, PROOF_LEN},
    error::{Error, Repr},
};

/// What the acceptor did with the dialer's early data: the status byte of
/// its version 3 Auth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EarlyStatus {
    /// The dialer's Setup carried none.
    Absent,
    /// Accepted: its stream was delivered, and the acceptor proves itself
    /// with the early data's proof key.
    Accepted,
    /// Refused: the handshake goes on as version 2's.
    Refused,
}

impl EarlyStatus {
    fn wire(self) -> u8 {
        match self {
            Self::Absent => 0,
            Self::Accepted => 1,
            Self::Refused => 2,
        }
    }

    fn from_wire(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(Self::Absent),
            1 => Some(Self::Accepted),
            2 => Some(Self::Refused),
            _ => None,
        }
    }
}

/// What an acceptor's Auth carries after its proof under version 3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AcceptorExtras {
    pub(crate) status: EarlyStatus,
    /// Its box key announcement, if it accepts early data.
    pub(crate) announcement: Option<[u8; ANNOUNCEMENT_LEN]>,
    /// With early data accepted: a ticket for the next, with its PSK.
    pub(crate) ticket: Option<Ticket>,
}

/// Bytes of a ticket's PSK, before the ticket.
const PSK_LEN: usize = 32;

/// An acceptor's version 3 Auth payload: `proof`, then `extras`. Wiped
/// when dropped (it may hold a ticket's PSK).
pub(crate) fn acceptor_payload(proof: &[u8], extras: &AcceptorExtras) -> Zeroizing<Vec<u8>> {
    let mut payload = Zeroizing::new(Vec::with_capacity(
        PROOF_LEN + 1 + ANNOUNCEMENT_LEN + PSK_LEN + 128,
    ));
    payload.extend_from_slice(proof);
    payload.push(extras.status.wire());
    if let Some(announcement) = &extras.announcement {
        payload.extend_from_slice(announcement);
        if let Some(ticket) = &extras.ticket {
            payload.extend_from_slice(&ticket.to_auth());
        }
    }
    payload
}

/// An acceptor's version 3 Auth payload, read: its proof (96 bytes: a
/// signature's, or with early data accepted the acceptor's id and a MAC)
/// and what follows it. Any other length or an unknown status is invalid.
pub(crate) fn parse_acceptor_payload(payload: &[u8]) -> Result<(&[u8; PROOF_LEN], AcceptorExtras), Error> {
    const WITH_ANNOUNCEMENT: usize = PROOF_LEN + 1 + ANNOUNCEMENT_LEN;
    let invalid = || {
        Repr::InvalidSetup("a version 3 acceptor's Auth is 97 or 201 bytes, or up to 488 with a ticket")
            .into()
    };
    let (proof, rest) = payload.split_first_chunk::<PROOF_LEN>().ok_or_else(invalid)?;
    let (&status, rest) = rest.split_first().ok_or_else(invalid)?;
    let status = EarlyStatus::from_wire(status).ok_or(Repr::InvalidSetup("an unknown early data status"))?;
    let (announcement, ticket) = match payload.len() {
        len if len == PROOF_LEN + 1 => (None, None),
        WITH_ANNOUNCEMENT => (Some(rest), None),
        // Longer: an announcement and a ticket (its PSK and 1 to 255
        // bytes, which `from_auth` checks), only with early data accepted.
        _ if status == EarlyStatus::Accepted => {
            let (announcement, ticket) = rest.split_at_checked(ANNOUNCEMENT_LEN).ok_or_else(invalid)?;
            (
                Some(announcement),
                Some(Ticket::from_auth(ticket).ok_or_else(invalid)?),
            )
        }
        _ => return Err(invalid()),
    };
    let announcement = announcement.map(|bytes| bytes.try_into().expect("104 bytes"));
    Ok((
        proof,
        AcceptorExtras {
            status,
            announcement,
            ticket,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_length_the_protocol_allows_reads_back_and_no_other() {
        let proof = [7u8; PROOF_LEN];
        let ticket = Ticket::from_auth(&[[9u8; 32].as_slice(), &[5u8; 104]].concat()).unwrap();
        let cases = [
            AcceptorExtras {
                status: EarlyStatus::Absent,
                announcement: None,
                ticket: None,
            },
            AcceptorExtras {
                status: EarlyStatus::Refused,
                announcement: Some([3; ANNOUNCEMENT_LEN]),
                ticket: None,
            },
            AcceptorExtras {
                status: EarlyStatus::Accepted,
                announcement: Some([3; ANNOUNCEMENT_LEN]),
                ticket: Some(ticket.clone()),
            },
        ];
        for extras in cases {
            let payload = acceptor_payload(&proof, &extras);
            let (read_proof, read) = parse_acceptor_payload(&payload).unwrap();
            assert_eq!((read_proof, &read), (&proof, &extras));
        }
        // A ticket with anything but acceptance, an unknown status, any
        // other length.
        let mut refused_with_ticket = acceptor_payload(
            &proof,
            &AcceptorExtras {
                status: EarlyStatus::Accepted,
                announcement: Some([3; ANNOUNCEMENT_LEN]),
                ticket: Some(ticket),
            },
        )
        .to_vec();
        refused_with_ticket[PROOF_LEN] = 2;
        assert!(parse_acceptor_payload(&refused_with_ticket).is_err());
        let mut unknown = acceptor_payload(&proof, &cases_absent()).to_vec();
        unknown[PROOF_LEN] = 3;
        assert!(parse_acceptor_payload(&unknown).is_err());
        // A ticket of 1 and of 255 bytes, the shortest and the longest.
        for ticket_len in [1, 255] {
            let ticket = Ticket::from_auth(&vec![4u8; 32 + ticket_len]).unwrap();
            let extras = AcceptorExtras {
                status: EarlyStatus::Accepted,
                announcement: Some([3; ANNOUNCEMENT_LEN]),
                ticket: Some(ticket),
            };
            let payload = acceptor_payload(&proof, &extras);
            assert_eq!(payload.len(), 201 + 32 + ticket_len);
            assert_eq!(parse_acceptor_payload(&payload).unwrap().1, extras);
        }
        for len in [0, 95, 96, 98, 150, 200, 202, 201 + 32, 201 + 32 + 256] {
            let mut payload = vec![0u8; len];
            if len > PROOF_LEN {
                payload[PROOF_LEN] = 1;
            }
            assert!(parse_acceptor_payload(&payload).is_err(), "{len} bytes");
        }
    }

    fn cases_absent() -> AcceptorExtras {
        AcceptorExtras {
            status: EarlyStatus::Absent,
            announcement: None,
            ticket: None,
        }
    }
}
