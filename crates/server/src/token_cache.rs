//! A bounded cache of tokens that already verified, keyed by the whole token string.
//!
//! A waiting fan polls the queue status every few seconds with the same bearer token and the
//! same queue ticket; verifying both (base64, JSON, HMAC) is most of the poll's cost. A hit
//! needs the exact token bytes that verified before, so the cache can only skip work, never
//! accept a token the verifier would refuse; claims that expire (`exp`) are still checked
//! by the caller on every hit.
//!
//! Sharded mutexes keep contention low; a full shard is simply cleared (the next polls
//! verify again), which bounds memory without bookkeeping per entry.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;

/// Shards of one cache.
pub const TOKEN_CACHE_SHARDS: usize = 16;
/// Entries per shard before it is cleared.
pub const TOKEN_CACHE_SHARD_ENTRIES_MAX: usize = 16_384;
/// Longest token cached, in bytes.
pub const TOKEN_CACHE_TOKEN_LEN_MAX: usize = 1_024;

/// See the module docs.
#[derive(Debug)]
pub struct TokenCache<V> {
    hasher: RandomState,
    shards: Vec<Mutex<HashMap<Box<str>, V>>>,
}

impl<V: Clone> Default for TokenCache<V> {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            shards: (0..TOKEN_CACHE_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }
}

impl<V: Clone> TokenCache<V> {
    fn shard(&self, token: &str) -> &Mutex<HashMap<Box<str>, V>> {
        let i = (self.hasher.hash_one(token) as usize) % self.shards.len();
        &self.shards[i]
    }

    /// What `token` verified to, if it did before.
    pub fn get(&self, token: &str) -> Option<V> {
        self.shard(token)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// Remembers that `token` verified to `value`.
    pub fn insert(&self, token: &str, value: V) {
        if token.len() > TOKEN_CACHE_TOKEN_LEN_MAX {
            return;
        }
        let mut shard = self.shard(token).lock().unwrap_or_else(|e| e.into_inner());
        if shard.len() >= TOKEN_CACHE_SHARD_ENTRIES_MAX {
            shard.clear();
        }
        shard.insert(token.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_only_the_exact_token_and_stays_bounded() {
        let cache = TokenCache::<u32>::default();
        cache.insert("a.b.c", 1);
        assert_eq!(cache.get("a.b.c"), Some(1));
        assert_eq!(cache.get("a.b.d"), None);
        assert_eq!(cache.get("a.b.c "), None);
        for i in 0..(TOKEN_CACHE_SHARDS * TOKEN_CACHE_SHARD_ENTRIES_MAX * 2) {
            cache.insert(&format!("t{i}"), 0);
        }
        let total: usize = cache.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(total <= TOKEN_CACHE_SHARDS * TOKEN_CACHE_SHARD_ENTRIES_MAX);
        cache.insert(&"x".repeat(TOKEN_CACHE_TOKEN_LEN_MAX + 1), 5);
        assert_eq!(cache.get(&"x".repeat(TOKEN_CACHE_TOKEN_LEN_MAX + 1)), None);
    }
}
