//! Maps keyed by stream id (or read-buffer number), with a hash that costs
//! one multiplication.
//!
//! The standard SipHash guards against keys chosen to collide; stream ids
//! cannot be chosen that way: each side's ids are consecutive (a gap is a
//! protocol violation) and bounded by the stream limit. SipHash cost about
//! 70 instructions per lookup, several lookups per message (callgrind).

use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

/// A map from stream id to `V`.
pub(crate) type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// A map from read-buffer number to `V` (numbers are consecutive too: the
/// channel counts its allocations).
pub(crate) type BufferMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing: consecutive ids spread over both the low bits (the
/// bucket) and the high bits (hashbrown's tag).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u32 keys are hashed here; this is the general fallback.
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.write_u64(u64::from(id));
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (id ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ids_land_in_distinct_buckets_and_tags() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<IdHasher>::default();
        let hashes: Vec<u64> = (1..=64u32).map(|id| build.hash_one(id)).collect();
        let buckets: std::collections::HashSet<u64> = hashes.iter().map(|h| h & 63).collect();
        let tags: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert_eq!(buckets.len(), 64);
        assert!(tags.len() > 32, "{} tags", tags.len());
        let mut map = IdMap::default();
        map.extend((0..1000u32).map(|id| (id, id * 2)));
        assert!((0..1000u32).all(|id| map[&id] == id * 2));
    }
}
