//! A bounded cache of tokens that already verified, keyed by the whole token string.
//!
//! A waiting fan polls the queue status every few seconds with the same bearer token and the
//! same queue ticket; verifying both (base64, JSON, HMAC) is most of the poll's cost. A hit
//! needs the exact token bytes that verified before, so the cache can only skip work, never
//! accept a token the verifier would refuse; claims that expire (`exp`) are still checked
//! by the caller on every hit.
//!
//! Sharded mutexes keep contention low; a full shard is simply cleared (the next polls
//! verify again), which bounds memory without bookkeeping per entry. A token is hashed once
//! (a seeded fast hash): the hash picks the shard and keys the shard's map, and the token
//! itself, kept beside its value, is compared on every hit (two tokens with one hash are a
//! miss for one of them, never a wrong answer).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// Shards of one cache.
pub const TOKEN_CACHE_SHARDS: usize = 16;
/// Entries per shard before it is cleared.
pub const TOKEN_CACHE_SHARD_ENTRIES_MAX: usize = 16_384;
/// Longest token cached, in bytes.
pub const TOKEN_CACHE_TOKEN_LEN_MAX: usize = 1_024;

/// The shard maps are keyed by the token's hash, already mixed: pass it through.
#[derive(Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the key is a u64); fold anything else in anyway.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Shard<V> = HashMap<u64, (Box<str>, V), BuildHasherDefault<Prehashed>>;

/// See the module docs.
#[derive(Debug)]
pub struct TokenCache<V> {
    hasher: foldhash::fast::RandomState,
    shards: Vec<Mutex<Shard<V>>>,
}

impl<V: Clone> Default for TokenCache<V> {
    fn default() -> Self {
        Self {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..TOKEN_CACHE_SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
        }
    }
}

impl<V: Clone> TokenCache<V> {
    fn shard(&self, hash: u64) -> &Mutex<Shard<V>> {
        // The low bits key the map; the high bits pick the shard.
        &self.shards[(hash >> 58) as usize % self.shards.len()]
    }

    /// What `token` verified to, if it did before.
    pub fn get(&self, token: &str) -> Option<V> {
        self.with(token, V::clone)
    }

    /// `read` of what `token` verified to, if it did before, without copying it.
    pub fn with<R>(&self, token: &str, read: impl FnOnce(&V) -> R) -> Option<R> {
        let hash = self.hasher.hash_one(token);
        let shard = self.shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        match shard.get(&hash) {
            Some((kept, value)) if **kept == *token => Some(read(value)),
            _ => None,
        }
    }

    /// Remembers that `token` verified to `value`.
    pub fn insert(&self, token: &str, value: V) {
        if token.len() > TOKEN_CACHE_TOKEN_LEN_MAX {
            return;
        }
        let hash = self.hasher.hash_one(token);
        let mut shard = self.shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        if shard.len() >= TOKEN_CACHE_SHARD_ENTRIES_MAX {
            shard.clear();
        }
        shard.insert(hash, (token.into(), value));
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
