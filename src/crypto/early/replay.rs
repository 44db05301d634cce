//! The acceptor's anti-replay record (docs/PROTOCOL.md, section 17.5).

use std::collections::HashMap;

use super::EARLY_WINDOW_MS;

/// The acceptor's anti-replay record: each accepted early data's
/// ephemeral key, until its window has passed (docs/PROTOCOL.md, section
/// 17.5). Bounded: when full of keys still inside their window, it
/// refuses.
#[derive(Debug)]
pub(crate) struct ReplayGuard {
    pub(super) seen: HashMap<[u8; 32], u64>,
    capacity: usize,
    /// The earliest expiry in `seen`: nothing to prune before it.
    next_expiry: u64,
}

impl ReplayGuard {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            seen: HashMap::new(),
            capacity,
            next_expiry: u64::MAX,
        }
    }

    /// Whether `ephemeral`'s early data was accepted already: checked
    /// before any crypto, so that replaying one early data over and over
    /// costs the acceptor a lookup each.
    pub(crate) fn seen(&self, ephemeral: &[u8; 32]) -> bool {
        self.seen.contains_key(ephemeral)
    }

    /// Records `ephemeral` (early data stamped `sent_at_ms`, at `now_ms`),
    /// or says why it cannot: seen before, or no room.
    pub(crate) fn admit(
        &mut self,
        ephemeral: [u8; 32],
        sent_at_ms: u64,
        now_ms: u64,
    ) -> Result<(), &'static str> {
        if self.seen.contains_key(&ephemeral) {
            return Err("replayed: this ephemeral key's early data was accepted before");
        }
        if self.seen.len() >= self.capacity && now_ms >= self.next_expiry {
            self.seen.retain(|_, expiry| *expiry > now_ms);
            self.next_expiry = self.seen.values().copied().min().unwrap_or(u64::MAX);
        }
        if self.seen.len() >= self.capacity {
            return Err("the replay record is full");
        }
        let expiry = sent_at_ms.saturating_add(EARLY_WINDOW_MS);
        self.next_expiry = self.next_expiry.min(expiry);
        self.seen.insert(ephemeral, expiry);
        Ok(())
    }
}
