//! Abuse limits (issue 18, item 4; OWASP API4 and API6): token buckets per account and per
//! client address on the flows bots hammer (holds, waiting-room joins, checkouts, exchanges,
//! sign-in). A request over its limit is answered 429 `RATE_LIMITED` with the seconds until
//! the bucket has a token again in `Retry-After`, and the limit's name in the problem body.
//!
//! The buckets live in this node's memory: behind a balancer that spreads an account's
//! requests over N nodes, an account gets up to N times its rate (each node still bounds it).
//! Their number is bounded: a full shard forgets its idle (refilled) buckets first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ApiError;

/// Buckets kept per shard; [`SHARDS`] shards.
pub const BUCKETS_PER_SHARD_MAX: usize = 16_384;
const SHARDS: usize = 16;

/// One limit: a sustained rate and a burst. A rate of 0 turns it off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    pub const OFF: Rate = Rate {
        per_second: 0.0,
        burst: 0.0,
    };

    pub const fn new(per_second: f64, burst: f64) -> Self {
        Self { per_second, burst }
    }

    fn is_off(&self) -> bool {
        self.per_second <= 0.0
    }

    /// `"5/s:20"` (rate per second, then the burst), or `"off"`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw == "off" {
            return Ok(Self::OFF);
        }
        let bad = || format!("{raw:?} is not RATE/s:BURST (e.g. 5/s:20) or off");
        let (rate, burst) = raw.split_once(":").ok_or_else(bad)?;
        let rate = rate.strip_suffix("/s").ok_or_else(bad)?;
        let per_second: f64 = rate.parse().map_err(|_| bad())?;
        let burst: f64 = burst.parse().map_err(|_| bad())?;
        // NaN and the infinities are outside both ranges.
        let in_range =
            (0.001..=1_000_000.0).contains(&per_second) && (1.0..=1_000_000.0).contains(&burst);
        if !in_range {
            return Err(bad());
        }
        Ok(Self { per_second, burst })
    }
}

/// The limits, by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitsConfig {
    /// Holds asked by one account (`POST /v1/events/{id}/holds`).
    pub holds_per_account: Rate,
    /// Holds asked from one client address.
    pub holds_per_address: Rate,
    /// Waiting-room joins by one account.
    pub joins_per_account: Rate,
    /// Waiting-room joins from one client address.
    pub joins_per_address: Rate,
    /// Checkouts and exchanges started by one account.
    pub checkouts_per_account: Rate,
    /// Sign-ins (`POST /v1/dev/token`) from one client address.
    pub signins_per_address: Rate,
    /// Holds one account may have live at once, across events (0: no bound; see
    /// [`crate::runtime::ledger`]).
    pub live_holds_per_account: u32,
    /// Lapsed holds within ten minutes from which an account waits before its next hold (0:
    /// never; see [`crate::runtime::ledger`]).
    pub lapsed_holds_per_account: u32,
    /// Refunds of cancelled events this node records a second (each is one provider call:
    /// `boxoffice_workers::cancellation`).
    pub cancellation_refunds_per_second: u32,
}

impl Default for LimitsConfig {
    /// Far above what one fan does by hand, far below what a bot needs. Per address they
    /// are off: behind a balancer every request comes from its address.
    fn default() -> Self {
        Self {
            holds_per_account: Rate::new(10.0, 40.0),
            holds_per_address: Rate::OFF,
            joins_per_account: Rate::new(2.0, 10.0),
            joins_per_address: Rate::OFF,
            checkouts_per_account: Rate::new(5.0, 20.0),
            signins_per_address: Rate::new(5.0, 20.0),
            live_holds_per_account: 8,
            lapsed_holds_per_account: 3,
            cancellation_refunds_per_second:
                boxoffice_workers::cancellation::REFUNDS_PER_SECOND_DEFAULT,
        }
    }
}

impl LimitsConfig {
    /// `NAME=RATE` (`holds-per-account=10/s:40`, `joins-per-address=off`) or, for the
    /// counts, `NAME=COUNT` (`live-holds-per-account=8`, `lapsed-holds-per-account=off`,
    /// `cancellation-refunds-per-second=100`) over these limits.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (name, rate) = assignment
            .split_once('=')
            .ok_or_else(|| format!("{assignment:?} is not NAME=RATE"))?;
        if name == "cancellation-refunds-per-second" {
            let max = boxoffice_workers::cancellation::REFUNDS_PER_SECOND_MAX;
            self.cancellation_refunds_per_second = rate
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("{name}: {rate:?} is not a count (1-{max})"))?;
            return Ok(());
        }
        let count = match name {
            "live-holds-per-account" => Some(&mut self.live_holds_per_account),
            "lapsed-holds-per-account" => Some(&mut self.lapsed_holds_per_account),
            _ => None,
        };
        if let Some(count) = count {
            *count = match rate {
                "off" => 0,
                n => n
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or_else(|| format!("{name}: {n:?} is not a count (1-10000) or off"))?,
            };
            return Ok(());
        }
        let rate = Rate::parse(rate)?;
        let slot = match name {
            "holds-per-account" => &mut self.holds_per_account,
            "holds-per-address" => &mut self.holds_per_address,
            "joins-per-account" => &mut self.joins_per_account,
            "joins-per-address" => &mut self.joins_per_address,
            "checkouts-per-account" => &mut self.checkouts_per_account,
            "signins-per-address" => &mut self.signins_per_address,
            "all" if rate == Rate::OFF => {
                *self = Self::OFF;
                return Ok(());
            }
            other => return Err(format!("no limit named {other:?}")),
        };
        *slot = rate;
        Ok(())
    }

    /// Every limit off (benchmarks of the engine alone).
    pub const OFF: LimitsConfig = LimitsConfig {
        holds_per_account: Rate::OFF,
        holds_per_address: Rate::OFF,
        joins_per_account: Rate::OFF,
        joins_per_address: Rate::OFF,
        checkouts_per_account: Rate::OFF,
        signins_per_address: Rate::OFF,
        live_holds_per_account: 0,
        lapsed_holds_per_account: 0,
        cancellation_refunds_per_second: boxoffice_workers::cancellation::REFUNDS_PER_SECOND_MAX,
    };
}

/// The limits a request is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    HoldsPerAccount,
    HoldsPerAddress,
    JoinsPerAccount,
    JoinsPerAddress,
    CheckoutsPerAccount,
    SigninsPerAddress,
}

impl Limit {
    pub fn name(self) -> &'static str {
        match self {
            Limit::HoldsPerAccount => "holds-per-account",
            Limit::HoldsPerAddress => "holds-per-address",
            Limit::JoinsPerAccount => "joins-per-account",
            Limit::JoinsPerAddress => "joins-per-address",
            Limit::CheckoutsPerAccount => "checkouts-per-account",
            Limit::SigninsPerAddress => "signins-per-address",
        }
    }

    fn rate(self, config: &LimitsConfig) -> Rate {
        match self {
            Limit::HoldsPerAccount => config.holds_per_account,
            Limit::HoldsPerAddress => config.holds_per_address,
            Limit::JoinsPerAccount => config.joins_per_account,
            Limit::JoinsPerAddress => config.joins_per_address,
            Limit::CheckoutsPerAccount => config.checkouts_per_account,
            Limit::SigninsPerAddress => config.signins_per_address,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every limit.
#[derive(Debug)]
pub struct Limits {
    config: LimitsConfig,
    shards: Vec<Mutex<HashMap<(Limit, String), Bucket>>>,
}

impl Limits {
    pub fn new(config: LimitsConfig) -> Self {
        Self {
            config,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    /// Takes a token for `key` (an account id or a client address) under `limit`, or tells
    /// how long until one is there.
    pub fn take_at(&self, limit: Limit, key: &str, now: Instant) -> Result<(), Duration> {
        let rate = limit.rate(&self.config);
        if rate.is_off() {
            return Ok(());
        }
        let shard = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (limit, key).hash(&mut hasher);
            (hasher.finish() as usize) % SHARDS
        };
        let mut buckets = self.shards[shard]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let refilled = |bucket: &Bucket| {
            let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
            (bucket.tokens + elapsed * rate.per_second).min(rate.burst)
        };
        let slot = (limit, key.to_owned());
        if buckets.len() >= BUCKETS_PER_SHARD_MAX && !buckets.contains_key(&slot) {
            // Idle buckets are full again: forgetting them changes nothing.
            buckets.retain(|(l, _), bucket| {
                let rate = l.rate(&self.config);
                let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
                bucket.tokens + elapsed * rate.per_second < rate.burst
            });
            if buckets.len() >= BUCKETS_PER_SHARD_MAX {
                metrics::counter!("boxoffice_limit_buckets_dropped_total")
                    .increment(buckets.len() as u64);
                buckets.clear();
            }
        }
        let bucket = buckets.entry(slot).or_insert(Bucket {
            tokens: rate.burst,
            at: now,
        });
        let tokens = refilled(bucket);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            Ok(())
        } else {
            *bucket = Bucket { tokens, at: now };
            Err(Duration::from_secs_f64((1.0 - tokens) / rate.per_second))
        }
    }

    /// The account's and the client address's buckets of a flow, both.
    pub fn take_both(
        &self,
        per_account: Limit,
        account: &str,
        per_address: Limit,
        address: Option<&axum::Extension<crate::ClientAddr>>,
    ) -> Result<(), ApiError> {
        self.take(per_account, account)?;
        match address {
            Some(axum::Extension(crate::ClientAddr(ip))) => self.take(per_address, &ip.to_string()),
            None => Ok(()),
        }
    }

    /// [`Self::take_at`] now, as the API's answer.
    pub fn take(&self, limit: Limit, key: &str) -> Result<(), ApiError> {
        self.take_at(limit, key, Instant::now()).map_err(|wait| {
            metrics::counter!("boxoffice_limit_refused_total", "limit" => limit.name())
                .increment(1);
            ApiError::rate_limited(limit.name(), wait)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let limits = Limits::new(LimitsConfig {
            holds_per_account: Rate::new(2.0, 3.0),
            ..LimitsConfig::OFF
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limits.take_at(Limit::HoldsPerAccount, "ann", t0).is_ok());
        }
        let wait = limits
            .take_at(Limit::HoldsPerAccount, "ann", t0)
            .unwrap_err();
        assert_eq!(
            wait,
            Duration::from_millis(500),
            "one token every half second"
        );
        // Another account, and another limit, have buckets of their own.
        assert!(limits.take_at(Limit::HoldsPerAccount, "bob", t0).is_ok());
        assert!(
            limits.take_at(Limit::JoinsPerAccount, "ann", t0).is_ok(),
            "off"
        );
        // Half a second later there is one token again, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert!(limits.take_at(Limit::HoldsPerAccount, "ann", t1).is_ok());
        assert!(limits.take_at(Limit::HoldsPerAccount, "ann", t1).is_err());
        // Idle long enough, the burst is back, never more.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(limits.take_at(Limit::HoldsPerAccount, "ann", t2).is_ok());
        }
        assert!(limits.take_at(Limit::HoldsPerAccount, "ann", t2).is_err());
    }

    #[test]
    fn rates_parse_or_are_refused() {
        assert_eq!(Rate::parse("5/s:20").unwrap(), Rate::new(5.0, 20.0));
        assert_eq!(Rate::parse("0.5/s:1").unwrap(), Rate::new(0.5, 1.0));
        assert_eq!(Rate::parse("off").unwrap(), Rate::OFF);
        for bad in [
            "5", "5/s", "5:20", "-1/s:2", "5/s:0", "NaN/s:2", "5/m:20", "",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_set_by_name() {
        let mut config = LimitsConfig::default();
        config.set("joins-per-address=3/s:6").unwrap();
        assert_eq!(config.joins_per_address, Rate::new(3.0, 6.0));
        config.set("holds-per-account=off").unwrap();
        assert_eq!(config.holds_per_account, Rate::OFF);
        assert!(config.set("holds=1/s:1").is_err());
        config.set("live-holds-per-account=3").unwrap();
        assert_eq!(config.live_holds_per_account, 3);
        config.set("lapsed-holds-per-account=off").unwrap();
        assert_eq!(config.lapsed_holds_per_account, 0);
        for bad in [
            "live-holds-per-account=0",
            "live-holds-per-account=1/s:2",
            "lapsed-holds-per-account=-1",
        ] {
            assert!(config.set(bad).is_err(), "{bad}");
        }
        assert!(config.set("holds-per-account").is_err());
        config.set("all=off").unwrap();
        assert_eq!(config, LimitsConfig::OFF);
    }

    #[test]
    fn the_buckets_are_bounded() {
        let limits = Limits::new(LimitsConfig {
            holds_per_account: Rate::new(1.0, 2.0),
            ..LimitsConfig::OFF
        });
        let t0 = Instant::now();
        for i in 0..(SHARDS * BUCKETS_PER_SHARD_MAX + 1000) {
            let _ = limits.take_at(Limit::HoldsPerAccount, &format!("fan-{i}"), t0);
        }
        let kept: usize = limits.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(kept <= SHARDS * BUCKETS_PER_SHARD_MAX, "{kept}");
    }
}
