use std::fmt;

/// An inclusive range of protocol versions.
///
/// Two sides agree on the highest version in both ranges. A range is
/// clamped to what this build implements ([`Versions::CURRENT`]) before
/// it is offered: `Versions::new(1, 9)` offers 1 to 3, and a range with
/// nothing this build implements fails the handshake before anything is
/// sent.
///
/// ```
/// use weft::handshake::Versions;
///
/// // Speak only version 1 (no key update), say to match an old peer.
/// let old = Versions::new(1, 1);
/// assert_eq!((old.min(), old.max()), (1, 1));
/// assert!(Versions::CURRENT.max() >= 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Versions {
    min: u32,
    max: u32,
}

impl Versions {
    /// The versions this release of weft speaks: 1; 2, which adds key
    /// update (docs/PROTOCOL.md, section 8.1) to version 1's wire format;
    /// and 3, which adds early data (section 17). The highest version both
    /// sides speak is agreed; the number is exposed so applications can
    /// gate their own behaviour on it.
    pub const CURRENT: Versions = Versions { min: 1, max: 3 };

    /// The range `min..=max`.
    ///
    /// # Panics
    ///
    /// If `min > max`: that is a configuration mistake, not a runtime event.
    pub fn new(min: u32, max: u32) -> Self {
        assert!(min <= max, "Versions::new({min}, {max}): min must not exceed max");
        Self { min, max }
    }

    /// Builds a range from a peer's Setup, which may be upside down.
    pub(crate) fn from_wire(min: u32, max: u32) -> Option<Self> {
        (min <= max).then_some(Self { min, max })
    }

    /// The lowest version in the range.
    pub fn min(self) -> u32 {
        self.min
    }

    /// The highest version in the range.
    pub fn max(self) -> u32 {
        self.max
    }

    /// The part of the range this build implements, if any: what a Setup
    /// offers.
    pub(crate) fn implemented(self) -> Option<Versions> {
        let min = self.min.max(Self::CURRENT.min);
        let max = self.max.min(Self::CURRENT.max);
        (min <= max).then_some(Self { min, max })
    }

    /// The highest version in both ranges, if any.
    pub(crate) fn agree(self, peer: Versions) -> Option<u32> {
        let low = self.min.max(peer.min);
        let high = self.max.min(peer.max);
        (low <= high).then_some(high)
    }
}

impl Default for Versions {
    fn default() -> Self {
        Self::CURRENT
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.min, self.max)
    }
}

/// An agreed protocol version, one this build implements: what each
/// version's behaviour is keyed on, exactly (a later version is not
/// taken for the last one this build knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Version {
    /// Version 1: the handshake, records and streams.
    V1,
    /// Version 2: version 1 and key update (docs/PROTOCOL.md, section 8.1).
    V2,
    /// Version 3: version 2 and early data (section 17).
    V3,
}

impl Version {
    /// The version numbered `number`, if this build implements it.
    pub(crate) fn from_number(number: u32) -> Option<Self> {
        match number {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            3 => Some(Self::V3),
            _ => None,
        }
    }

    /// Whether each side updates its keys (versions 2 and 3).
    pub(crate) fn has_key_update(self) -> bool {
        match self {
            Self::V1 => false,
            Self::V2 | Self::V3 => true,
        }
    }

    /// Whether early data may ride in the dialer's Setup (version 3).
    pub(crate) fn has_early_data(self) -> bool {
        match self {
            Self::V1 | Self::V2 => false,
            Self::V3 => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_clamped_to_what_this_build_implements() {
        assert_eq!(Versions::new(1, 9).implemented(), Some(Versions::new(1, 3)));
        assert_eq!(Versions::new(0, 2).implemented(), Some(Versions::new(1, 2)));
        assert_eq!(Versions::new(4, 9).implemented(), None);
        assert_eq!(Versions::CURRENT.implemented(), Some(Versions::CURRENT));
        for number in 1..=3 {
            assert!(Version::from_number(number).is_some());
        }
        assert_eq!(Version::from_number(4), None);
        assert_eq!(Version::from_number(0), None);
    }
}
