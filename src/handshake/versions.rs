use std::fmt;

/// An inclusive range of protocol versions.
///
/// Two sides agree on the highest version in both ranges.
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
