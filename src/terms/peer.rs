use std::{fmt, str::FromStr};

use crate::ParseError;

/// A peer's public identity: its Ed25519 public key. Displays and parses as
/// 64 hex digits.
///
/// ```
/// use weft::{handshake::PeerId, Identity};
///
/// let id = Identity::from_seed(&[1; 32]).peer_id();
/// let text = id.to_string();
/// assert_eq!(text.len(), 64);
/// assert_eq!(text.parse::<PeerId>().unwrap(), id);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId([u8; 32]);

impl PeerId {
    /// The identity with these public-key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The public-key bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PeerId({self})")
    }
}

impl FromStr for PeerId {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || ParseError::new("a peer id (64 hex digits)", text);
        let s = text.as_bytes();
        if s.len() != 64 {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(s.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).map_err(|_| invalid())?;
            *byte = u8::from_str_radix(text, 16).map_err(|_| invalid())?;
        }
        Ok(Self(bytes))
    }
}
