//! Events spread over shards (issue 17): a directory maps each event to the PostgreSQL
//! primary that holds all of its rows, its lease and its change feed, and [`Sharded`] is a
//! [`Store`] that sends each call to the shard it concerns.
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
//!   exchange between events on two shards ([`Store::same_shard`] says so) takes DESIGN §7's
//!   recorded steps, one shard at a time (`crate::exchange::settle_out`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::inventory::Inventory;
use futures_util::future::join_all;

use crate::engine::{EngineStore, GroupCommitted, GroupWrite};
use crate::lease::{Fence, Lease, LeaseStore, NodeRecord, Taken};
use crate::{
    EventCounts, EventRecord, HoldRequest, HoldView, ReadStore, ReleaseOutcome, RenderEvent,
    RenderHold, Store, StoreError, StoreResult, SweepReport, WorkerStore, checkout, exchange,
    seatmap,
};

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
    /// Events seen on another shard than cached (moved): ids remembered by a [`Sharded`]
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

/// The kinds of ids looked for on every shard.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Hold,
    Order,
    Ticket,
    Operation,
}

/// A [`Store`] over several shards (see the module's documentation).
pub struct Sharded {
    shards: Vec<Arc<dyn Store>>,
    places: Arc<Places>,
    ids: Mutex<HashMap<String, usize>>,
    /// [`Places::moves_seen`] when `ids` was last trusted.
    moves_seen: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("places", &self.places)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

/// The first `Some` of a fan-out; an error only when no shard had it (a shard that cannot
/// answer may be the one that has it: never "not found" then).
fn first_found<T>(answers: Vec<StoreResult<Option<T>>>) -> StoreResult<Option<(usize, T)>> {
    let mut error = None;
    for (index, answer) in answers.into_iter().enumerate() {
        match answer {
            Ok(Some(found)) => return Ok(Some((index, found))),
            Ok(None) => {}
            Err(e) => error = Some(e),
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

impl Sharded {
    /// `shards[i]` is the shard `places.names()[i]`.
    pub fn new(shards: Vec<Arc<dyn Store>>, places: Arc<Places>) -> Self {
        assert_eq!(shards.len(), places.names().len(), "one store per shard");
        assert!(
            (1..=OUTBOX_ID_SHARDS as usize).contains(&shards.len()),
            "1-{OUTBOX_ID_SHARDS} shards"
        );
        Self {
            shards,
            places,
            ids: Mutex::default(),
            moves_seen: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn places(&self) -> &Arc<Places> {
        &self.places
    }

    /// The shards' stores, in the order of [`Places::names`].
    pub fn shards(&self) -> &[Arc<dyn Store>] {
        &self.shards
    }

    async fn of_event(&self, event_id: &str) -> StoreResult<&Arc<dyn Store>> {
        Ok(&self.shards[self.places.event(event_id).await?])
    }

    fn remembered(&self, id: &str) -> Option<usize> {
        let mut ids = self.ids.lock().expect("ids lock");
        let moves = self.places.moves_seen();
        if self
            .moves_seen
            .swap(moves, std::sync::atomic::Ordering::Relaxed)
            != moves
        {
            // An event moved: where its holds, orders and tickets were is no longer true.
            ids.clear();
        }
        ids.get(id).copied()
    }

    fn remember(&self, id: &str, index: usize) {
        let mut ids = self.ids.lock().expect("ids lock");
        if ids.len() >= REMEMBERED_IDS_MAX {
            ids.clear();
        }
        ids.insert(id.to_owned(), index);
    }

    async fn probe(store: &Arc<dyn Store>, kind: Kind, id: &str) -> StoreResult<Option<()>> {
        Ok(match kind {
            Kind::Hold => store.get_hold(id).await?.map(drop),
            Kind::Order => store.order_head(id).await?.map(drop),
            Kind::Ticket => store.get_ticket(id).await?.map(drop),
            Kind::Operation => store.payment_operation(id).await?.map(drop),
        })
    }

    /// The shard that has the object `id` names, if any does.
    async fn locate(&self, kind: Kind, id: &str) -> StoreResult<Option<usize>> {
        if let Some(index) = self.remembered(id) {
            return Ok(Some(index));
        }
        let answers = join_all(self.shards.iter().map(|s| Self::probe(s, kind, id))).await;
        let found = first_found(answers)?.map(|(index, ())| index);
        if let Some(index) = found {
            self.remember(id, index);
        }
        Ok(found)
    }

    /// The store of `id`'s shard, or the home one when no shard has it (it answers "not
    /// found" in its own way).
    async fn store_of(&self, kind: Kind, id: &str) -> StoreResult<&Arc<dyn Store>> {
        Ok(&self.shards[self.locate(kind, id).await?.unwrap_or(0)])
    }

    /// A read by id: on the shard remembered for `id`, and if it is not there any more (its
    /// event was moved) on every shard again.
    async fn read_by_id<'a, T, F, Fut>(
        &'a self,
        kind: Kind,
        id: &'a str,
        read: F,
    ) -> StoreResult<Option<T>>
    where
        F: Fn(&'a Arc<dyn Store>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Option<T>>>,
    {
        if let Some(index) = self.remembered(id) {
            if let Some(found) = read(&self.shards[index]).await? {
                return Ok(Some(found));
            }
            self.ids.lock().expect("ids lock").remove(id);
        }
        read(self.store_of(kind, id).await?).await
    }

    /// Sums a count over every shard.
    async fn sum<F, Fut>(&self, call: F) -> StoreResult<u64>
    where
        F: Fn(Arc<dyn Store>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<u64>>,
    {
        let mut total = 0;
        for answer in join_all(self.shards.iter().cloned().map(call)).await {
            total += answer?;
        }
        Ok(total)
    }

    /// Each shard's share of a batch of `limit` (at least 1): a batch over every shard holds
    /// at most `limit` plus one per shard.
    fn share(&self, limit: u32) -> u32 {
        limit.div_ceil(self.shards.len() as u32).max(1)
    }

    fn outbox_id(index: usize, id: i64) -> i64 {
        id * OUTBOX_ID_SHARDS + index as i64
    }

    fn outbox_shard(id: i64) -> (usize, i64) {
        (
            id.rem_euclid(OUTBOX_ID_SHARDS) as usize,
            id.div_euclid(OUTBOX_ID_SHARDS),
        )
    }
}

#[async_trait]
impl EngineStore for Sharded {
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

/// The event writers' side over several shards: the writers' own pools, routed by the same
/// [`Places`] as the requests' [`Sharded`].
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

#[async_trait]
impl Store for Sharded {
    fn backend(&self) -> &'static str {
        self.shards[0].backend()
    }

    async fn migrate(&self) -> StoreResult<()> {
        for shard in &self.shards {
            shard.migrate().await?;
        }
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        for answer in join_all(self.shards.iter().map(|s| s.ping())).await {
            answer?;
        }
        Ok(())
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        self.shards[0].now().await
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &boxoffice_domain::event::EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let placed_by = format!("{}\n{}\n{}", scope.account_id, scope.endpoint, scope.key);
        let index = self.places.place(event_id, &placed_by).await?;
        self.shards[index]
            .create_event(scope, request_digest, event_id, spec, render)
            .await
    }

    async fn hold_batch(
        &self,
        event: &EventRecord,
        endpoint: &str,
        requests: &[HoldRequest],
        render: &RenderHold,
    ) -> StoreResult<Vec<Idempotent>> {
        self.of_event(&event.event_id)
            .await?
            .hold_batch(event, endpoint, requests, render)
            .await
    }

    async fn release_hold(&self, account_id: &str, hold_id: &str) -> StoreResult<ReleaseOutcome> {
        self.store_of(Kind::Hold, hold_id)
            .await?
            .release_hold(account_id, hold_id)
            .await
    }

    async fn compensate_failed_capture(
        &self,
        operation_id: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        self.store_of(Kind::Operation, operation_id)
            .await?
            .compensate_failed_capture(operation_id, reason)
            .await
    }

    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool> {
        // The record is on one shard; the others have nothing to rewrite.
        let mut replaced = false;
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.replace_answer(scope, response)),
        )
        .await
        {
            replaced |= answer?;
        }
        Ok(replaced)
    }

    async fn begin_checkout(
        &self,
        start: &checkout::CheckoutStart,
        render: &checkout::RenderOrder,
    ) -> StoreResult<checkout::CheckoutBegun> {
        self.store_of(Kind::Hold, &start.hold_id)
            .await?
            .begin_checkout(start, render)
            .await
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        self.store_of(Kind::Ticket, ticket_id)
            .await?
            .check_in(ticket_id)
            .await
    }

    async fn mark_exchange_out(
        &self,
        out: &exchange::ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), exchange::ExchangeRefused>> {
        self.of_event(&out.from_event_id)
            .await?
            .mark_exchange_out(out, closes_at)
            .await
    }

    async fn exchange_in_fate(
        &self,
        out: &exchange::ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<exchange::InFate>> {
        self.of_event(&out.to_event_id)
            .await?
            .exchange_in_fate(out, abort_if_missing)
            .await
    }

    async fn finish_exchange_out(
        &self,
        from_event_id: &str,
        exchange_id: &str,
        fate: &exchange::InFate,
    ) -> StoreResult<Option<exchange::ExchangeStatus>> {
        self.of_event(from_event_id)
            .await?
            .finish_exchange_out(from_event_id, exchange_id, fate)
            .await
    }

    async fn open_exchanges_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<exchange::ExchangeOut>> {
        let share = self.share(limit);
        let mut open = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.open_exchanges_out(older_than_s, share)),
        )
        .await
        {
            open.extend(answer?);
        }
        Ok(open)
    }

    async fn same_shard(&self, event_a: &str, event_b: &str) -> StoreResult<bool> {
        Ok(self.places.event(event_a).await? == self.places.event(event_b).await?)
    }
}

#[async_trait]
impl ReadStore for Sharded {
    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        self.of_event(event_id).await?.get_event(event_id).await
    }

    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>> {
        let mut events = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.list_events(after_event_id, limit)),
        )
        .await
        {
            events.extend(answer?);
        }
        events.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        events.truncate(limit as usize);
        Ok(events)
    }

    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
        self.of_event(&event.event_id)
            .await?
            .event_counts(event)
            .await
    }

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
        self.read_by_id(Kind::Hold, hold_id, |s| s.get_hold(hold_id))
            .await
    }

    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>> {
        let answers = join_all(self.shards.iter().map(|s| s.stored_answers(asked))).await;
        let mut merged: Vec<Option<Idempotent>> = (0..asked.len()).map(|_| None).collect();
        for answer in answers {
            for (slot, found) in merged.iter_mut().zip(answer?) {
                if slot.is_none() {
                    *slot = found;
                }
            }
        }
        Ok(merged)
    }

    async fn stored_answer(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
    ) -> StoreResult<Option<Idempotent>> {
        let answers = join_all(
            self.shards
                .iter()
                .map(|s| s.stored_answer(scope, request_digest)),
        )
        .await;
        Ok(first_found(answers)?.map(|(_, found)| found))
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
        let mut ids = Vec::new();
        for answer in join_all(self.shards.iter().map(|s| s.list_event_ids())).await {
            ids.extend(answer?);
        }
        ids.sort();
        Ok(ids)
    }

    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
        self.of_event(event_id)
            .await?
            .load_inventory(event_id)
            .await
    }

    async fn get_order(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.read_by_id(Kind::Order, order_id, |s| s.get_order(order_id))
            .await
    }

    async fn order_head(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.read_by_id(Kind::Order, order_id, |s| s.order_head(order_id))
            .await
    }

    async fn order_to_exchange(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.read_by_id(Kind::Order, order_id, |s| s.order_to_exchange(order_id))
            .await
    }

    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<checkout::OrderView>> {
        let mut orders = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.list_orders(account_id, before_order_id, limit)),
        )
        .await
        {
            orders.extend(answer?);
        }
        // Newest first, as each shard lists them.
        orders.sort_by(|a, b| b.order_id.cmp(&a.order_id));
        orders.truncate(limit as usize);
        Ok(orders)
    }

    async fn get_ticket(&self, ticket_id: &str) -> StoreResult<Option<checkout::TicketView>> {
        self.read_by_id(Kind::Ticket, ticket_id, |s| s.get_ticket(ticket_id))
            .await
    }

    async fn get_exchange(&self, exchange_id: &str) -> StoreResult<Option<exchange::ExchangeView>> {
        if let Some(index) = self.remembered(exchange_id) {
            if let Some(found) = self.shards[index].get_exchange(exchange_id).await? {
                return Ok(Some(found));
            }
            self.ids.lock().expect("ids lock").remove(exchange_id);
        }
        let answers = join_all(self.shards.iter().map(|s| s.get_exchange(exchange_id))).await;
        Ok(first_found(answers)?.map(|(index, found)| {
            self.remember(exchange_id, index);
            found
        }))
    }

    async fn seat_map(&self, event_id: &str) -> StoreResult<Option<seatmap::MapSnapshot>> {
        self.of_event(event_id).await?.seat_map(event_id).await
    }

    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        self.of_event(event_id)
            .await?
            .seat_map_changes(event_id, after, limit)
            .await
    }
}

#[async_trait]
impl WorkerStore for Sharded {
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        let mut total = SweepReport::default();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.expire_due_holds(limit, held_grace_ms)),
        )
        .await
        {
            let report = answer?;
            total.holds_expired += report.holds_expired;
            total.seats_freed += report.seats_freed;
            total.tier_units_returned += report.tier_units_returned;
        }
        Ok(total)
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        let mut total = SweepReport::default();
        for answer in join_all(self.shards.iter().map(|s| s.expire_holds(hold_ids))).await {
            let report = answer?;
            total.holds_expired += report.holds_expired;
            total.seats_freed += report.seats_freed;
            total.tier_units_returned += report.tier_units_returned;
        }
        Ok(total)
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        self.sum(|s| async move { s.purge_idempotency(older_than_s).await })
            .await
    }

    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &checkout::RenderOrder)>,
    ) -> StoreResult<Option<checkout::Settled>> {
        self.store_of(Kind::Operation, operation_id)
            .await?
            .settle_payment(operation_id, verdict, webhook, answer)
            .await
    }

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        if let Some(index) = self.remembered(operation_id) {
            if let Some(found) = self.shards[index].payment_operation(operation_id).await? {
                return Ok(Some(found));
            }
            // Not there any more: its event was moved.
            self.ids.lock().expect("ids lock").remove(operation_id);
        }
        let answers = join_all(
            self.shards
                .iter()
                .map(|s| s.payment_operation(operation_id)),
        )
        .await;
        Ok(first_found(answers)?.map(|(index, found)| {
            self.remember(operation_id, index);
            found
        }))
    }

    async fn payment_operations(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        let mut found = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.payment_operations(operation_ids)),
        )
        .await
        {
            found.extend(answer?);
        }
        Ok(found)
    }

    async fn capture_confirmed(&self, captures: &[(String, String)]) -> StoreResult<Vec<String>> {
        let mut done = Vec::new();
        for answer in join_all(self.shards.iter().map(|s| s.capture_confirmed(captures))).await {
            done.extend(answer?);
        }
        Ok(done)
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        let answers = join_all(
            self.shards
                .iter()
                .map(|s| s.payment_operation_by_ref(provider, provider_ref)),
        )
        .await;
        Ok(first_found(answers)?.map(|(_, found)| found))
    }

    async fn due_payment_operations(
        &self,
        limit: u32,
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        // An equal share per shard: filled shard by shard, a shard with a long queue (3-D
        // Secure checks come due every few seconds) kept the others' operations waiting for
        // minutes.
        let share = self.share(limit);
        let mut due = Vec::new();
        for answer in join_all(self.shards.iter().map(|s| s.due_payment_operations(share))).await {
            due.extend(answer?);
        }
        Ok(due)
    }

    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        self.store_of(Kind::Operation, operation_id)
            .await?
            .postpone_payment_operation(operation_id, delay_s, error)
            .await
    }

    async fn issue_tickets(&self, order_id: &str, sign: &checkout::SignTicket) -> StoreResult<u32> {
        self.store_of(Kind::Order, order_id)
            .await?
            .issue_tickets(order_id, sign)
            .await
    }

    async fn issue_tickets_of(
        &self,
        order_ids: &[String],
        sign: &checkout::SignTicket,
    ) -> StoreResult<u32> {
        // Each shard issues the tickets of the orders it has.
        let mut issued = 0;
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.issue_tickets_of(order_ids, sign)),
        )
        .await
        {
            issued += answer?;
        }
        Ok(issued)
    }

    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<checkout::OutboxMessage>> {
        // An equal share per shard, as for the due operations (a busy shard must not keep
        // another's tickets and captures waiting).
        let share = self.share(limit);
        let mut claimed = Vec::new();
        for (index, answer) in join_all(self.shards.iter().map(|s| s.claim_outbox(share, lease_s)))
            .await
            .into_iter()
            .enumerate()
        {
            claimed.extend(answer?.into_iter().map(|mut message| {
                message.id = Self::outbox_id(index, message.id);
                message
            }));
        }
        Ok(claimed)
    }

    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
        let mut by_shard: Vec<Vec<i64>> = vec![Vec::new(); self.shards.len()];
        for &id in ids {
            let (index, local) = Self::outbox_shard(id);
            let Some(list) = by_shard.get_mut(index) else {
                return Err(StoreError::Internal(format!(
                    "outbox id {id} names no shard"
                )));
            };
            list.push(local);
        }
        for (shard, local) in self.shards.iter().zip(by_shard) {
            if !local.is_empty() {
                shard.finish_outbox(&local).await?;
            }
        }
        Ok(())
    }

    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
        let (index, local) = Self::outbox_shard(id);
        match self.shards.get(index) {
            Some(shard) => shard.retry_outbox(local, delay_s, error).await,
            None => Err(StoreError::Internal(format!(
                "outbox id {id} names no shard"
            ))),
        }
    }

    async fn outbox_lag_s(&self) -> StoreResult<f64> {
        let mut lag: f64 = 0.0;
        for answer in join_all(self.shards.iter().map(|s| s.outbox_lag_s())).await {
            lag = lag.max(answer?);
        }
        Ok(lag)
    }

    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
        self.sum(|s| async move { s.prune_seat_map_changes(keep).await })
            .await
    }
}

#[async_trait]
impl LeaseStore for Sharded {
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()> {
        // A lease names its node; the node's address must be beside it on every shard.
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.register_node(node_id, advertise_url)),
        )
        .await
        {
            answer?;
        }
        Ok(())
    }

    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        self.shards[0].nodes().await
    }

    async fn take_lease(&self, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken> {
        self.of_event(event_id)
            .await?
            .take_lease(event_id, node_id, ttl_ms)
            .await
    }

    async fn renew_leases(
        &self,
        node_id: &str,
        held: &[(String, u64)],
        ttl_ms: u64,
    ) -> StoreResult<Vec<String>> {
        let mut by_shard: Vec<Vec<(String, u64)>> = vec![Vec::new(); self.shards.len()];
        for lease in held {
            by_shard[self.places.event(&lease.0).await?].push(lease.clone());
        }
        let mut kept = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .zip(&by_shard)
                .filter(|(_, held)| !held.is_empty())
                .map(|(s, held)| s.renew_leases(node_id, held, ttl_ms)),
        )
        .await
        {
            kept.extend(answer?);
        }
        Ok(kept)
    }

    async fn release_lease(&self, event_id: &str, fence: &Fence) -> StoreResult<bool> {
        self.of_event(event_id)
            .await?
            .release_lease(event_id, fence)
            .await
    }

    async fn lease(&self, event_id: &str) -> StoreResult<Option<Lease>> {
        self.of_event(event_id).await?.lease(event_id).await
    }
}

#[async_trait]
impl crate::transfer::TransferStore for Sharded {
    async fn offer_transfer(
        &self,
        offer: &crate::transfer::TransferOffer,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<crate::transfer::Offered, crate::transfer::OfferRefused>> {
        // The offer lives with its order, on the event's shard.
        self.of_event(&offer.event_id)
            .await?
            .offer_transfer(offer, closes_at)
            .await
    }

    async fn get_transfer(
        &self,
        transfer_id: &str,
    ) -> StoreResult<Option<crate::transfer::TransferView>> {
        if let Some(index) = self.remembered(transfer_id) {
            if let Some(found) = self.shards[index].get_transfer(transfer_id).await? {
                return Ok(Some(found));
            }
            self.ids.lock().expect("ids lock").remove(transfer_id);
        }
        let answers = join_all(self.shards.iter().map(|s| s.get_transfer(transfer_id))).await;
        Ok(first_found(answers)?.map(|(index, found)| {
            self.remember(transfer_id, index);
            found
        }))
    }

    async fn list_transfers(
        &self,
        account_id: &str,
        role: crate::transfer::TransferRole,
        limit: u32,
    ) -> StoreResult<Vec<crate::transfer::TransferView>> {
        let mut transfers = Vec::new();
        for answer in join_all(
            self.shards
                .iter()
                .map(|s| s.list_transfers(account_id, role, limit)),
        )
        .await
        {
            transfers.extend(answer?);
        }
        // Newest first, as each shard lists them.
        transfers.sort_by(|a, b| b.transfer_id.cmp(&a.transfer_id));
        transfers.truncate(limit as usize);
        Ok(transfers)
    }

    async fn end_transfer(
        &self,
        transfer_id: &str,
        account_id: &str,
        to: crate::transfer::TransferStatus,
    ) -> StoreResult<Option<crate::transfer::TransferView>> {
        let Some(found) = self.get_transfer(transfer_id).await? else {
            return Ok(None);
        };
        self.of_event(&found.event_id)
            .await?
            .end_transfer(transfer_id, account_id, to)
            .await
    }
}

#[async_trait]
impl crate::waitlist::WaitlistStore for Sharded {
    async fn get_waitlist_entry(
        &self,
        waitlist_id: &str,
    ) -> StoreResult<Option<crate::waitlist::WaitlistView>> {
        if let Some(index) = self.remembered(waitlist_id) {
            if let Some(found) = self.shards[index].get_waitlist_entry(waitlist_id).await? {
                return Ok(Some(found));
            }
            self.ids.lock().expect("ids lock").remove(waitlist_id);
        }
        let answers = join_all(
            self.shards
                .iter()
                .map(|s| s.get_waitlist_entry(waitlist_id)),
        )
        .await;
        Ok(first_found(answers)?.map(|(index, found)| {
            self.remember(waitlist_id, index);
            found
        }))
    }
}

#[async_trait]
impl crate::door::DoorStore for Sharded {
    async fn door_lists(&self, event_id: &str) -> StoreResult<crate::door::DoorLists> {
        self.of_event(event_id).await?.door_lists(event_id).await
    }
}

/// Webhooks live in the home shard alone, endpoints and deliveries both: the relay fans out
/// with the global outbox ids (local id × 64 + shard index), so a delivery's event id is
/// unique across shards, and the delivery worker and the admin routes read one database.
#[async_trait]
impl crate::webhook::WebhookStore for Sharded {
    async fn create_webhook_endpoint(
        &self,
        new: &crate::webhook::NewEndpoint,
    ) -> StoreResult<crate::webhook::EndpointCreated> {
        self.shards[0].create_webhook_endpoint(new).await
    }

    async fn get_webhook_endpoint(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Option<crate::webhook::WebhookEndpoint>> {
        self.shards[0].get_webhook_endpoint(endpoint_id).await
    }

    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<crate::webhook::WebhookEndpoint>> {
        self.shards[0].list_webhook_endpoints().await
    }

    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<crate::webhook::WebhookEndpoint>> {
        self.shards[0]
            .set_webhook_endpoint_enabled(endpoint_id, enabled)
            .await
    }

    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool> {
        self.shards[0].delete_webhook_endpoint(endpoint_id).await
    }

    async fn fan_out_webhooks(&self, events: &[crate::webhook::WebhookEvent]) -> StoreResult<u64> {
        self.shards[0].fan_out_webhooks(events).await
    }

    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<crate::webhook::DueDelivery>> {
        self.shards[0]
            .claim_webhook_deliveries(limit, lease_s)
            .await
    }

    async fn record_webhook_attempt(
        &self,
        delivery_id: i64,
        attempt: &crate::webhook::Attempt,
    ) -> StoreResult<()> {
        self.shards[0]
            .record_webhook_attempt(delivery_id, attempt)
            .await
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<crate::webhook::WebhookDelivery>> {
        self.shards[0]
            .list_webhook_deliveries(endpoint_id, before, limit)
            .await
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: i64,
    ) -> StoreResult<Option<crate::webhook::WebhookDelivery>> {
        self.shards[0]
            .replay_webhook_delivery(endpoint_id, delivery_id)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_ids_carry_their_shard() {
        for index in [0, 1, 5, 63] {
            for local in [1, 2, 999_999_999] {
                let id = Sharded::outbox_id(index, local);
                assert_eq!(Sharded::outbox_shard(id), (index, local));
            }
        }
    }

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

    #[test]
    fn a_shard_that_cannot_answer_is_never_taken_for_not_found() {
        let down = || StoreError::Unavailable("down".into());
        assert!(matches!(
            first_found::<u8>(vec![Ok(None), Err(down())]),
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            first_found(vec![Err(down()), Ok(Some(7u8))]),
            Ok(Some((1, 7)))
        ));
        assert!(matches!(
            first_found::<u8>(vec![Ok(None), Ok(None)]),
            Ok(None)
        ));
    }
}
