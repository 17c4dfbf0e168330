//! Events spread over shards (issue 17): a directory maps each event to the PostgreSQL
//! primary that holds all of its rows, its lease and its change feed, and the store's
//! [`Front`](crate::front::Front) sends each call to the shard it concerns.
//!
//! - **The directory** lives in the home database (the one `--database-url` names): the other
//!   shards (`shard`: name and URL), the placement rule, and one row per placed event
//!   (`event_shard`). An event with no row lives on the home shard ([`HOME_SHARD`]), so a
//!   store from before shards keeps every event where it was. Every node reads the shard
//!   list at start and connects to every shard; an event's shard, once read, is cached for
//!   [`PLACE_TTL`] and then read again, so that nodes follow an event an operator moved
//!   (`boxoffice shard move`; a move seen clears the remembered ids too).
//! - **Placement.** A new event is placed by the rule (the shard with the fewest placed
//!   events, or one pinned shard) in one transaction that also records the creating request's
//!   idempotency scope: the same request sent again lands on the same shard, where its
//!   stored answer is.
//! - **Routing.** A call about an event goes to the event's shard. A call about a hold,
//!   order, ticket, exchange or payment operation looks for it on every shard at once the
//!   first time and remembers where it was. Idempotency look-ups ask every shard. Lists are
//!   merged in their order. The workers' calls (expiry, the outbox, the reconciler's due
//!   operations) run on every shard, each shard with an equal share of a batch; an outbox
//!   message's id carries its shard ([`OUTBOX_ID_SHARDS`]).
//! - **What never spans shards**: a group of an event's writer (one event, one shard). An
//!   exchange between events on two shards ([`Store::same_shard`](crate::Store::same_shard) says so) takes DESIGN §7's
//!   recorded steps, one shard at a time (`crate::exchange::settle_out`).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};

use crate::engine::{EngineStore, GroupCommitted, GroupWrite};
use crate::{EventRecord, StoreError, StoreResult, seatmap};

/// The name of the home shard: the database the directory lives in.
pub const HOME_SHARD: &str = "main";
/// Shards a cluster may have (an outbox message id is its shard's id times this plus the
/// shard's index).
pub const OUTBOX_ID_SHARDS: i64 = 64;
/// Ids remembered with their shard before the memory is cleared (a hold, order, ticket,
/// exchange or operation not remembered is looked for on every shard again).
pub const REMEMBERED_IDS_MAX: usize = 500_000;
/// How long an event's shard, once read from the directory, is used before it is read again
/// (after `boxoffice shard move`, requests for the event fail for at most this long).
pub const PLACE_TTL: std::time::Duration = std::time::Duration::from_secs(5);

/// A shard besides the home one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRecord {
    pub name: String,
    pub url: String,
}

/// How new events are placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementRule {
    /// On the shard with the fewest placed events (ties: by name).
    LeastEvents,
    /// Every new event on this shard.
    Pinned(String),
}

impl PlacementRule {
    /// `least-events` or `pinned:NAME`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "least-events" => Ok(Self::LeastEvents),
            _ => match text.strip_prefix("pinned:") {
                Some(name) => {
                    check_shard_name(name)?;
                    Ok(Self::Pinned(name.to_owned()))
                }
                None => Err(format!(
                    "placement rule {text:?}: expected least-events or pinned:NAME"
                )),
            },
        }
    }
}

impl std::fmt::Display for PlacementRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::LeastEvents => f.write_str("least-events"),
            Self::Pinned(name) => write!(f, "pinned:{name}"),
        }
    }
}

/// A shard's name: 1-32 of `a-z`, `0-9`, `-`, starting with a letter.
pub fn check_shard_name(name: &str) -> Result<(), String> {
    let ok = (1..=32).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "shard name {name:?}: 1-32 of a-z, 0-9 and '-', starting with a letter"
        ))
    }
}

/// The directory's side of the home store.
#[async_trait]
pub trait DirectoryStore: Send + Sync {
    /// The shards besides the home one, by name.
    async fn shards(&self) -> StoreResult<Vec<ShardRecord>>;
    /// Adds a shard; adding one again with the same URL is a no-op, with another URL an
    /// error.
    async fn add_shard(&self, shard: &ShardRecord) -> StoreResult<()>;
    async fn placement_rule(&self) -> StoreResult<PlacementRule>;
    async fn set_placement_rule(&self, rule: &PlacementRule) -> StoreResult<()>;
    /// The shard an event was placed on (`None`: never placed, so the home shard's).
    async fn event_shard(&self, event_id: &str) -> StoreResult<Option<String>>;
    /// Places `event_id` among `candidates` by the rule, or where the request `placed_by`
    /// (an idempotency scope) placed its event before; the shard's name.
    async fn place_event(
        &self,
        event_id: &str,
        placed_by: &str,
        candidates: &[String],
    ) -> StoreResult<String>;
    /// Placed events per shard.
    async fn placed_counts(&self) -> StoreResult<Vec<(String, u64)>>;
    /// Names `shard` as the event's from now on (`boxoffice shard move`, once its rows are
    /// there).
    async fn move_event(&self, event_id: &str, shard: &str) -> StoreResult<()>;
}

/// Where each event is: the directory and what this process read of it.
pub struct Places {
    names: Vec<String>,
    directory: Arc<dyn DirectoryStore>,
    events: RwLock<HashMap<String, (usize, std::time::Instant)>>,
    /// Events seen on another shard than cached (moved): ids remembered by a [`Front`](crate::front::Front)
    /// before may point to the old shard.
    moves: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Places")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Places {
    /// `names[0]` is the home shard.
    pub fn new(names: Vec<String>, directory: Arc<dyn DirectoryStore>) -> Self {
        Self {
            names,
            directory,
            events: RwLock::default(),
            moves: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn index_of(&self, name: &str) -> StoreResult<usize> {
        self.names.iter().position(|n| n == name).ok_or_else(|| {
            StoreError::Unavailable(format!(
                "shard {name:?} is in the directory but not known to this node: restart it to connect to every shard"
            ))
        })
    }

    /// The index of the shard that holds `event_id`.
    pub async fn event(&self, event_id: &str) -> StoreResult<usize> {
        let cached = self
            .events
            .read()
            .expect("places lock")
            .get(event_id)
            .copied();
        if let Some((index, read_at)) = cached
            && read_at.elapsed() < PLACE_TTL
        {
            return Ok(index);
        }
        let index = match self.directory.event_shard(event_id).await? {
            // Not placed: the event may not exist yet, and may be placed elsewhere; an event
            // created before shards were added is on the home shard.
            None if cached.is_none() => return Ok(0),
            None => 0,
            Some(name) => self.index_of(&name)?,
        };
        if cached.is_some_and(|(before, _)| before != index) {
            self.moves
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(event_id, shard = %self.names[index], "event moved to another shard");
        }
        self.remember(event_id, index);
        Ok(index)
    }

    /// How many moved events this process has seen.
    pub fn moves_seen(&self) -> u64 {
        self.moves.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn remember(&self, event_id: &str, index: usize) {
        let mut events = self.events.write().expect("places lock");
        if events.len() >= REMEMBERED_IDS_MAX {
            events.clear();
        }
        events.insert(event_id.to_owned(), (index, std::time::Instant::now()));
    }

    /// Places a new event (see [`DirectoryStore::place_event`]); the shard's index.
    pub async fn place(&self, event_id: &str, placed_by: &str) -> StoreResult<usize> {
        let name = self
            .directory
            .place_event(event_id, placed_by, &self.names)
            .await?;
        let index = self.index_of(&name)?;
        self.remember(event_id, index);
        Ok(index)
    }
}

/// The event writers' side over several shards: the writers' own pools, routed by the same
/// [`Places`] as the requests' [`Front`](crate::front::Front).
pub struct ShardedEngines {
    shards: Vec<Arc<dyn EngineStore>>,
    places: Arc<Places>,
}

impl std::fmt::Debug for ShardedEngines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedEngines")
            .field("places", &self.places)
            .finish_non_exhaustive()
    }
}

impl ShardedEngines {
    pub fn new(shards: Vec<Arc<dyn EngineStore>>, places: Arc<Places>) -> Self {
        assert_eq!(shards.len(), places.names().len(), "one store per shard");
        Self { shards, places }
    }

    async fn of_event(&self, event_id: &str) -> StoreResult<&Arc<dyn EngineStore>> {
        Ok(&self.shards[self.places.event(event_id).await?])
    }
}

#[async_trait]
impl EngineStore for ShardedEngines {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        self.of_event(&event.event_id)
            .await?
            .engine_load(event, endpoint)
            .await
    }

    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows> {
        self.of_event(event_id)
            .await?
            .engine_rows(event_id, seat_ids, tier_ids, hold_ids)
            .await
    }

    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
        self.of_event(&group.event.event_id)
            .await?
            .apply_group(group)
            .await
    }

    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        self.of_event(event_id)
            .await?
            .engine_changes(event_id, after, limit)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_and_rules() {
        for good in ["s1", "shard-2", "a"] {
            assert_eq!(check_shard_name(good), Ok(()), "{good}");
        }
        for bad in ["", "1s", "S1", "s_1", "s 1", &"s".repeat(33)] {
            assert!(check_shard_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            PlacementRule::parse("least-events"),
            Ok(PlacementRule::LeastEvents)
        );
        assert_eq!(
            PlacementRule::parse("pinned:s2"),
            Ok(PlacementRule::Pinned("s2".into()))
        );
        for bad in ["", "pinned:", "pinned:S", "fewest"] {
            assert!(PlacementRule::parse(bad).is_err(), "{bad}");
        }
        for rule in [
            PlacementRule::LeastEvents,
            PlacementRule::Pinned("s2".into()),
        ] {
            assert_eq!(PlacementRule::parse(&rule.to_string()), Ok(rule));
        }
    }
}
