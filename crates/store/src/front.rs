//! The store the server talks to ([`Front`]): one layer in front of one database or of one
//! per shard, that bounds the calls in flight ([`crate::gate`]) and sends each call to the
//! database that has its rows ([`crate::shard`]). Every method of the store's traits is
//! forwarded here once, with two choices written beside it: what kind of call it is for the
//! bound (a start, a look, or one that always passes) and where it goes (the event's shard,
//! the shard that has an id, the home shard, or every shard with the answers merged). Over one
//! database every route is that database and a merge of one answer is the answer.
//!
//! Architecture invariant: a wrapper of the store is this one layer; a new store method is
//! forwarded here once, never in a second hand-written wrapper.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::event::EventSpec;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::inventory::Inventory;
use futures_util::future::join_all;

use crate::cancellation;
use crate::engine::{EngineStore, GroupCommitted, GroupWrite};
use crate::gate::{CALLS_MIN, CALLS_PER_CONNECTION, Call, CallBound, Slot};
use crate::lease::{Fence, Lease, LeaseStore, NodeRecord, Taken};
use crate::mail::{
    AccountRecord, AccountUpdate, ClaimedMail, MailMessage, MailOutcome, MailStatus, MailStore,
    NewMail, Resent,
};
use crate::refund::{RefundSettled, RefundStore, RefundView, RefundWrite};
use crate::report::{ReportRows, ReportStore, TimelineRows};
use crate::shard::{OUTBOX_ID_SHARDS, Places, REMEMBERED_IDS_MAX};
use crate::transfer::{
    OfferRefused, Offered, TransferOffer, TransferRole, TransferStatus, TransferStore, TransferView,
};
use crate::webhook::{
    Attempt, DueDelivery, EndpointCreated, NewEndpoint, WebhookDelivery, WebhookEndpoint,
    WebhookEvent, WebhookStore,
};
use crate::{
    EventCounts, EventRecord, HoldView, ReadStore, RenderEvent, Store, StoreError, StoreResult,
    SweepReport, WorkerStore, checkout, door, exchange, seatmap, waitlist,
};

/// The kinds of ids a write is routed by: the shard that has one is found with a cheap read.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Order,
    Ticket,
    Operation,
}

/// One database, or one per shard, behind one [`Store`] (see the module's documentation).
pub struct Front {
    /// `stores[i]` is the shard `places.names()[i]`; one store when there are no shards.
    stores: Vec<Arc<dyn Store>>,
    places: Option<Arc<Places>>,
    bound: Option<CallBound>,
    /// Where ids were found (shards only).
    ids: Mutex<HashMap<String, usize>>,
    /// [`Places::moves_seen`] when `ids` was last trusted.
    moves_seen: AtomicU64,
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front")
            .field("stores", &self.stores)
            .field("places", &self.places)
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

/// The store a call goes to, and its place under the bound while the call runs (a
/// temporary: it lives until the end of the statement that awaits the call).
struct Via<'a> {
    store: &'a Arc<dyn Store>,
    _slot: Option<Slot<'a>>,
}

impl std::ops::Deref for Via<'_> {
    type Target = Arc<dyn Store>;

    fn deref(&self) -> &Arc<dyn Store> {
        self.store
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

fn add_sweeps(reports: Vec<SweepReport>) -> SweepReport {
    reports
        .into_iter()
        .fold(SweepReport::default(), |total, report| SweepReport {
            holds_expired: total.holds_expired + report.holds_expired,
            seats_freed: total.seats_freed + report.seats_freed,
            tier_units_returned: total.tier_units_returned + report.tier_units_returned,
        })
}

/// Lists merged from every shard, in the order each shard lists them (by id, ascending or
/// descending), cut to `limit`.
fn merged<T>(
    lists: Vec<Vec<T>>,
    key: impl Fn(&T) -> &str,
    newest_first: bool,
    limit: u32,
) -> Vec<T> {
    if lists.len() == 1 {
        let mut one: Vec<T> = lists.into_iter().flatten().collect();
        one.truncate(limit as usize);
        return one;
    }
    let mut all: Vec<T> = lists.into_iter().flatten().collect();
    all.sort_by(|a, b| key(a).cmp(key(b)));
    if newest_first {
        all.reverse();
    }
    all.truncate(limit as usize);
    all
}

impl Front {
    /// One database, every call passed on.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::build(vec![store], None)
    }

    /// Several shards: `shards[i]` is the shard `places.names()[i]`.
    pub fn sharded(shards: Vec<Arc<dyn Store>>, places: Arc<Places>) -> Self {
        assert_eq!(shards.len(), places.names().len(), "one store per shard");
        assert!(
            (1..=OUTBOX_ID_SHARDS as usize).contains(&shards.len()),
            "1-{OUTBOX_ID_SHARDS} shards"
        );
        Self::build(shards, Some(places))
    }

    fn build(stores: Vec<Arc<dyn Store>>, places: Option<Arc<Places>>) -> Self {
        Self {
            stores,
            places,
            bound: None,
            ids: Mutex::default(),
            moves_seen: AtomicU64::new(0),
        }
    }

    /// At most `limit` starts and looks in flight at once (at least 1): past it a call fails
    /// at once with [`StoreError::Busy`] ([`crate::gate`] says why).
    pub fn bounded(mut self, limit: usize) -> Self {
        self.bound = Some(CallBound::new(limit));
        self
    }

    /// Bounded for a pool of `connections` in all: [`CALLS_PER_CONNECTION`] calls per
    /// connection, at least [`CALLS_MIN`].
    pub fn bounded_for_pool(self, connections: u32) -> Self {
        self.bounded((connections as usize * CALLS_PER_CONNECTION).max(CALLS_MIN))
    }

    /// The calls in flight and their bound, if bounded.
    pub fn bound(&self) -> Option<&CallBound> {
        self.bound.as_ref()
    }

    /// The stores behind, in the order of [`Places::names`] when there are shards.
    pub fn shards(&self) -> &[Arc<dyn Store>] {
        &self.stores
    }

    pub fn places(&self) -> Option<&Arc<Places>> {
        self.places.as_ref()
    }

    fn enter(&self, call: Call) -> StoreResult<Option<Slot<'_>>> {
        match (&self.bound, call) {
            (Some(bound), Start | Look) => bound.enter(call).map(Some),
            _ => Ok(None),
        }
    }

    fn at(&self, call: Call, index: usize) -> StoreResult<Via<'_>> {
        Ok(Via {
            _slot: self.enter(call)?,
            store: &self.stores[index],
        })
    }

    /// The home shard (the only store when there are no shards).
    fn home(&self, call: Call) -> StoreResult<Via<'_>> {
        self.at(call, 0)
    }

    async fn shard_of_event(&self, event_id: &str) -> StoreResult<usize> {
        match &self.places {
            Some(places) => places.event(event_id).await,
            None => Ok(0),
        }
    }

    /// The event's shard.
    async fn event(&self, call: Call, event_id: &str) -> StoreResult<Via<'_>> {
        let slot = self.enter(call)?;
        let index = self.shard_of_event(event_id).await?;
        Ok(Via {
            _slot: slot,
            store: &self.stores[index],
        })
    }

    /// The shard that has the object `id` names, or the home one when none has it (it
    /// answers "not found" in its own way).
    async fn located(&self, call: Call, kind: Kind, id: &str) -> StoreResult<Via<'_>> {
        let slot = self.enter(call)?;
        let index = match self.remembered(id) {
            Some(index) => index,
            None if self.stores.len() == 1 => 0,
            None => {
                let answers = join_all(self.stores.iter().map(|s| Self::probe(s, kind, id))).await;
                let found = self
                    .chosen(answers, String::as_str)
                    .await?
                    .map(|(index, _)| index);
                if let Some(index) = found {
                    self.remember(id, index);
                }
                found.unwrap_or(0)
            }
        };
        Ok(Via {
            _slot: slot,
            store: &self.stores[index],
        })
    }

    /// Whether `store` has the object, and its event's id.
    async fn probe(store: &Arc<dyn Store>, kind: Kind, id: &str) -> StoreResult<Option<String>> {
        Ok(match kind {
            Kind::Order => store.order_head(id).await?.map(|o| o.event_id),
            Kind::Ticket => store.get_ticket(id).await?.map(|t| t.event_id),
            Kind::Operation => store.payment_operation(id).await?.map(|p| p.event_id),
        })
    }

    /// Of every shard's answer for one object, in shard order, the shard and object to use:
    /// the only shard that has it; when several have it, the one the directory names for its
    /// event (`event_of`): a shard move's target holds a copy of the event's rows from the
    /// move's start to its cut-over, and the source keeps them until they are deleted after
    /// it, while only the directory's shard is written. Errors as [`first_found`].
    async fn chosen<T>(
        &self,
        answers: Vec<StoreResult<Option<T>>>,
        event_of: fn(&T) -> &str,
    ) -> StoreResult<Option<(usize, T)>> {
        let mut found: Vec<(usize, T)> = Vec::new();
        let mut error = None;
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(Some(object)) => found.push((index, object)),
                Ok(None) => {}
                Err(e) => error = Some(e),
            }
        }
        if found.len() > 1 {
            let placed = self.shard_of_event(event_of(&found[0].1)).await?;
            if let Some(at) = found.iter().position(|(index, _)| *index == placed) {
                return Ok(Some(found.swap_remove(at)));
            }
        }
        match (found.into_iter().next(), error) {
            (Some(first), _) => Ok(Some(first)),
            (None, Some(e)) => Err(e),
            (None, None) => Ok(None),
        }
    }

    /// A read by id: on the shard remembered for `id`, and if it is not there any more (its
    /// event was moved) or none is remembered, on every shard at once ([`Front::chosen`]
    /// with `event_of`); where it was found is remembered.
    async fn find<'a, T, F, Fut>(
        &'a self,
        call: Call,
        id: &str,
        event_of: fn(&T) -> &str,
        read: F,
    ) -> StoreResult<Option<T>>
    where
        F: Fn(&'a Arc<dyn Store>) -> Fut,
        Fut: Future<Output = StoreResult<Option<T>>>,
    {
        let _slot = self.enter(call)?;
        if self.stores.len() == 1 {
            return read(&self.stores[0]).await;
        }
        if let Some(index) = self.remembered(id) {
            if let Some(found) = read(&self.stores[index]).await? {
                return Ok(Some(found));
            }
            self.ids.lock().expect("ids lock").remove(id);
        }
        let answers = join_all(self.stores.iter().map(&read)).await;
        Ok(self.chosen(answers, event_of).await?.map(|(index, found)| {
            self.remember(id, index);
            found
        }))
    }

    /// Every store's answer, in shard order.
    async fn each<'a, T, F, Fut>(&'a self, call: Call, ask: F) -> StoreResult<Vec<T>>
    where
        F: Fn(&'a Arc<dyn Store>) -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        let _slot = self.enter(call)?;
        if self.stores.len() == 1 {
            return Ok(vec![ask(&self.stores[0]).await?]);
        }
        join_all(self.stores.iter().map(ask))
            .await
            .into_iter()
            .collect()
    }

    /// [`Front::each`] with the answers' lists joined.
    async fn each_joined<'a, T, F, Fut>(&'a self, call: Call, ask: F) -> StoreResult<Vec<T>>
    where
        F: Fn(&'a Arc<dyn Store>) -> Fut,
        Fut: Future<Output = StoreResult<Vec<T>>>,
    {
        Ok(self.each(call, ask).await?.into_iter().flatten().collect())
    }

    fn remembered(&self, id: &str) -> Option<usize> {
        if self.stores.len() == 1 {
            return None;
        }
        let mut ids = self.ids.lock().expect("ids lock");
        let moves = self.places.as_ref().map_or(0, |p| p.moves_seen());
        if self.moves_seen.swap(moves, Ordering::Relaxed) != moves {
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

    /// Each shard's share of a batch of `limit` (at least 1): a batch over every shard holds
    /// at most `limit` plus one per shard.
    fn share(&self, limit: u32) -> u32 {
        limit.div_ceil(self.stores.len() as u32).max(1)
    }

    /// An outbox message's id as this layer hands it out: with shards, the shard's id times
    /// [`OUTBOX_ID_SHARDS`] plus the shard's index.
    fn outbox_id(&self, index: usize, id: i64) -> i64 {
        match self.places {
            Some(_) => id * OUTBOX_ID_SHARDS + index as i64,
            None => id,
        }
    }

    /// The shard and its own id of an id from [`Front::outbox_id`].
    fn outbox_shard(&self, id: i64) -> StoreResult<(usize, i64)> {
        let (index, local) = match self.places {
            Some(_) => (
                id.rem_euclid(OUTBOX_ID_SHARDS) as usize,
                id.div_euclid(OUTBOX_ID_SHARDS),
            ),
            None => (0, id),
        };
        if index >= self.stores.len() {
            return Err(StoreError::Internal(format!(
                "outbox id {id} names no shard"
            )));
        }
        Ok((index, local))
    }
}

use Call::{Look, Pass, Start};

#[async_trait]
impl EngineStore for Front {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        let via = self.event(Pass, &event.event_id).await?;
        via.engine_load(event, endpoint).await
    }

    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows> {
        let via = self.event(Pass, event_id).await?;
        via.engine_rows(event_id, seat_ids, tier_ids, hold_ids)
            .await
    }

    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
        let via = self.event(Pass, &group.event.event_id).await?;
        via.apply_group(group).await
    }

    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        let via = self.event(Pass, event_id).await?;
        via.engine_changes(event_id, after, limit).await
    }
}

#[async_trait]
impl Store for Front {
    fn backend(&self) -> &'static str {
        self.stores[0].backend()
    }

    async fn migrate(&self) -> StoreResult<()> {
        for store in &self.stores {
            store.migrate().await?;
        }
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        self.each(Pass, |s| s.ping()).await.map(drop)
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        self.home(Pass)?.now().await
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let slot = self.enter(Start)?;
        let index = match &self.places {
            Some(places) => {
                let placed_by = format!("{}\n{}\n{}", scope.account_id, scope.endpoint, scope.key);
                places.place(event_id, &placed_by).await?
            }
            None => 0,
        };
        let created = self.stores[index]
            .create_event(scope, request_digest, event_id, spec, render)
            .await;
        drop(slot);
        created
    }

    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool> {
        // The record is on one shard; the others have nothing to rewrite.
        let replaced = self
            .each(Pass, |s| s.replace_answer(scope, response))
            .await?;
        Ok(replaced.contains(&true))
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        let via = self.located(Pass, Kind::Ticket, ticket_id).await?;
        via.check_in(ticket_id).await
    }

    async fn same_shard(&self, event_a: &str, event_b: &str) -> StoreResult<bool> {
        Ok(self.shard_of_event(event_a).await? == self.shard_of_event(event_b).await?)
    }

    async fn mark_exchange_out(
        &self,
        out: &exchange::ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), exchange::ExchangeRefused>> {
        let via = self.event(Start, &out.from_event_id).await?;
        via.mark_exchange_out(out, closes_at).await
    }

    async fn exchange_in_fate(
        &self,
        out: &exchange::ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<exchange::InFate>> {
        let via = self.event(Pass, &out.to_event_id).await?;
        via.exchange_in_fate(out, abort_if_missing).await
    }

    async fn finish_exchange_out(
        &self,
        from_event_id: &str,
        exchange_id: &str,
        fate: &exchange::InFate,
    ) -> StoreResult<Option<exchange::ExchangeStatus>> {
        let via = self.event(Pass, from_event_id).await?;
        via.finish_exchange_out(from_event_id, exchange_id, fate)
            .await
    }

    async fn open_exchanges_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<exchange::ExchangeOut>> {
        let share = self.share(limit);
        self.each_joined(Pass, |s| s.open_exchanges_out(older_than_s, share))
            .await
    }
}

#[async_trait]
impl ReadStore for Front {
    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        self.event(Start, event_id).await?.get_event(event_id).await
    }

    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>> {
        let lists = self
            .each(Look, |s| s.list_events(after_event_id, limit))
            .await?;
        Ok(merged(lists, |e| &e.event_id, false, limit))
    }

    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
        let via = self.event(Look, &event.event_id).await?;
        via.event_counts(event).await
    }

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
        self.find(
            Start,
            hold_id,
            |h: &HoldView| &h.event_id,
            |s| s.get_hold(hold_id),
        )
        .await
    }

    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>> {
        if self.stores.len() == 1 {
            return self.home(Start)?.stored_answers(asked).await;
        }
        let mut merged: Vec<Option<Idempotent>> = (0..asked.len()).map(|_| None).collect();
        for answers in self.each(Start, |s| s.stored_answers(asked)).await? {
            for (slot, found) in merged.iter_mut().zip(answers) {
                if slot.is_none() {
                    *slot = found;
                }
            }
        }
        Ok(merged)
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
        let mut ids = self.each_joined(Look, |s| s.list_event_ids()).await?;
        ids.sort();
        Ok(ids)
    }

    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
        let via = self.event(Look, event_id).await?;
        via.load_inventory(event_id).await
    }

    async fn get_order(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.find(
            Look,
            order_id,
            |o: &checkout::OrderView| &o.event_id,
            |s| s.get_order(order_id),
        )
        .await
    }

    async fn order_head(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.find(
            Pass,
            order_id,
            |o: &checkout::OrderView| &o.event_id,
            |s| s.order_head(order_id),
        )
        .await
    }

    async fn order_to_exchange(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.find(
            Start,
            order_id,
            |o: &checkout::OrderView| &o.event_id,
            |s| s.order_to_exchange(order_id),
        )
        .await
    }

    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<checkout::OrderView>> {
        let lists = self
            .each(Look, |s| s.list_orders(account_id, before_order_id, limit))
            .await?;
        Ok(merged(lists, |o| &o.order_id, true, limit))
    }

    async fn get_ticket(&self, ticket_id: &str) -> StoreResult<Option<checkout::TicketView>> {
        self.find(
            Look,
            ticket_id,
            |t: &checkout::TicketView| &t.event_id,
            |s| s.get_ticket(ticket_id),
        )
        .await
    }

    async fn get_exchange(&self, exchange_id: &str) -> StoreResult<Option<exchange::ExchangeView>> {
        self.find(
            Look,
            exchange_id,
            |x: &exchange::ExchangeView| &x.from_event_id,
            |s| s.get_exchange(exchange_id),
        )
        .await
    }

    async fn seat_map(&self, event_id: &str) -> StoreResult<Option<seatmap::MapSnapshot>> {
        self.event(Look, event_id).await?.seat_map(event_id).await
    }

    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        let via = self.event(Look, event_id).await?;
        via.seat_map_changes(event_id, after, limit).await
    }
}

#[async_trait]
impl WorkerStore for Front {
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        let reports = self
            .each(Pass, |s| s.expire_due_holds(limit, held_grace_ms))
            .await?;
        Ok(add_sweeps(reports))
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        Ok(add_sweeps(
            self.each(Pass, |s| s.expire_holds(hold_ids)).await?,
        ))
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        let purged = self
            .each(Pass, |s| s.purge_idempotency(older_than_s))
            .await?;
        Ok(purged.into_iter().sum())
    }

    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &checkout::RenderOrder)>,
    ) -> StoreResult<Option<checkout::Settled>> {
        let via = self.located(Pass, Kind::Operation, operation_id).await?;
        via.settle_payment(operation_id, verdict, webhook, answer)
            .await
    }

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        self.find(
            Pass,
            operation_id,
            |p: &checkout::PaymentOperation| &p.event_id,
            |s| s.payment_operation(operation_id),
        )
        .await
    }

    async fn payment_operations(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        self.each_joined(Pass, |s| s.payment_operations(operation_ids))
            .await
    }

    async fn capture_confirmed(&self, captures: &[(String, String)]) -> StoreResult<Vec<String>> {
        self.each_joined(Pass, |s| s.capture_confirmed(captures))
            .await
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        let _slot = self.enter(Pass)?;
        let answers = join_all(
            self.stores
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
        self.each_joined(Pass, |s| s.due_payment_operations(share))
            .await
    }

    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        let via = self.located(Pass, Kind::Operation, operation_id).await?;
        via.postpone_payment_operation(operation_id, delay_s, error)
            .await
    }

    async fn issue_tickets(&self, order_id: &str, sign: &checkout::SignTicket) -> StoreResult<u32> {
        let via = self.located(Pass, Kind::Order, order_id).await?;
        via.issue_tickets(order_id, sign).await
    }

    async fn issue_tickets_of(
        &self,
        order_ids: &[String],
        sign: &checkout::SignTicket,
    ) -> StoreResult<u32> {
        // Each shard issues the tickets of the orders it has.
        let issued = self
            .each(Pass, |s| s.issue_tickets_of(order_ids, sign))
            .await?;
        Ok(issued.into_iter().sum())
    }

    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<checkout::OutboxMessage>> {
        // An equal share per shard, as for the due operations (a busy shard must not keep
        // another's tickets and captures waiting).
        let share = self.share(limit);
        let claimed = self.each(Pass, |s| s.claim_outbox(share, lease_s)).await?;
        let mut messages = Vec::new();
        for (index, claimed) in claimed.into_iter().enumerate() {
            messages.extend(claimed.into_iter().map(|mut message| {
                message.id = self.outbox_id(index, message.id);
                message
            }));
        }
        Ok(messages)
    }

    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
        let mut by_shard: Vec<Vec<i64>> = vec![Vec::new(); self.stores.len()];
        for &id in ids {
            let (index, local) = self.outbox_shard(id)?;
            by_shard[index].push(local);
        }
        for (store, local) in self.stores.iter().zip(by_shard) {
            if !local.is_empty() {
                store.finish_outbox(&local).await?;
            }
        }
        Ok(())
    }

    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
        let (index, local) = self.outbox_shard(id)?;
        self.stores[index].retry_outbox(local, delay_s, error).await
    }

    async fn outbox_lag_s(&self) -> StoreResult<f64> {
        let lags = self.each(Pass, |s| s.outbox_lag_s()).await?;
        Ok(lags.into_iter().fold(0.0, f64::max))
    }

    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
        let pruned = self.each(Pass, |s| s.prune_seat_map_changes(keep)).await?;
        Ok(pruned.into_iter().sum())
    }
}

/// An organiser's report is a look: refused first under load.
#[async_trait]
impl ReportStore for Front {
    async fn report_rows(&self, event: &EventRecord) -> StoreResult<ReportRows> {
        self.event(Look, &event.event_id)
            .await?
            .report_rows(event)
            .await
    }

    async fn timeline_rows(&self, event: &EventRecord, bucket_s: u32) -> StoreResult<TimelineRows> {
        let via = self.event(Look, &event.event_id).await?;
        via.timeline_rows(event, bucket_s).await
    }
}

#[async_trait]
impl LeaseStore for Front {
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()> {
        // A lease names its node; the node's address must be beside it on every shard.
        self.each(Pass, |s| s.register_node(node_id, advertise_url))
            .await
            .map(drop)
    }

    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        self.home(Pass)?.nodes().await
    }

    async fn take_lease(&self, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken> {
        let via = self.event(Pass, event_id).await?;
        via.take_lease(event_id, node_id, ttl_ms).await
    }

    async fn renew_leases(
        &self,
        node_id: &str,
        held: &[(String, u64)],
        ttl_ms: u64,
    ) -> StoreResult<Vec<String>> {
        let mut by_shard: Vec<Vec<(String, u64)>> = vec![Vec::new(); self.stores.len()];
        for lease in held {
            by_shard[self.shard_of_event(&lease.0).await?].push(lease.clone());
        }
        let mut kept = Vec::new();
        for answer in join_all(
            self.stores
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
        let via = self.event(Pass, event_id).await?;
        via.release_lease(event_id, fence).await
    }

    async fn lease(&self, event_id: &str) -> StoreResult<Option<Lease>> {
        self.event(Pass, event_id).await?.lease(event_id).await
    }
}

#[async_trait]
impl TransferStore for Front {
    async fn offer_transfer(
        &self,
        offer: &TransferOffer,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<Offered, OfferRefused>> {
        // The offer lives with its order, on the event's shard.
        let via = self.event(Start, &offer.event_id).await?;
        via.offer_transfer(offer, closes_at).await
    }

    async fn get_transfer(&self, transfer_id: &str) -> StoreResult<Option<TransferView>> {
        self.find(
            Start,
            transfer_id,
            |t: &TransferView| &t.event_id,
            |s| s.get_transfer(transfer_id),
        )
        .await
    }

    async fn list_transfers(
        &self,
        account_id: &str,
        role: TransferRole,
        limit: u32,
    ) -> StoreResult<Vec<TransferView>> {
        let lists = self
            .each(Look, |s| s.list_transfers(account_id, role, limit))
            .await?;
        Ok(merged(lists, |t| &t.transfer_id, true, limit))
    }

    async fn end_transfer(
        &self,
        transfer_id: &str,
        account_id: &str,
        to: TransferStatus,
    ) -> StoreResult<Option<TransferView>> {
        let index = match &self.places {
            Some(_) => match self.get_transfer(transfer_id).await? {
                Some(found) => self.shard_of_event(&found.event_id).await?,
                None => return Ok(None),
            },
            None => 0,
        };
        let via = self.at(Start, index)?;
        via.end_transfer(transfer_id, account_id, to).await
    }
}

#[async_trait]
impl RefundStore for Front {
    async fn get_refund(&self, event_id: &str, refund_id: &str) -> StoreResult<Option<RefundView>> {
        let via = self.event(Look, event_id).await?;
        via.get_refund(event_id, refund_id).await
    }

    async fn refund_by_key(
        &self,
        event_id: &str,
        account_id: &str,
        key: &str,
    ) -> StoreResult<Option<(RefundView, String)>> {
        let via = self.event(Start, event_id).await?;
        via.refund_by_key(event_id, account_id, key).await
    }

    async fn refund_money(&self, write: &RefundWrite) -> StoreResult<Result<RefundView, String>> {
        let via = self.event(Start, &write.refund.event_id).await?;
        via.refund_money(write).await
    }

    async fn record_refund_due(
        &self,
        write: &RefundWrite,
    ) -> StoreResult<Result<RefundView, String>> {
        let via = self.event(Pass, &write.refund.event_id).await?;
        via.record_refund_due(write).await
    }

    async fn settle_refund(
        &self,
        event_id: &str,
        refund_id: &str,
        settled: &RefundSettled,
    ) -> StoreResult<Option<RefundView>> {
        let via = self.event(Pass, event_id).await?;
        via.settle_refund(event_id, refund_id, settled).await
    }

    async fn event_refund_policy(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<Option<boxoffice_domain::event::RefundPolicy>>> {
        let via = self.event(Look, event_id).await?;
        via.event_refund_policy(event_id).await
    }

    async fn set_refund_policy(
        &self,
        event_id: &str,
        policy: Option<boxoffice_domain::event::RefundPolicy>,
    ) -> StoreResult<bool> {
        let via = self.event(Start, event_id).await?;
        via.set_refund_policy(event_id, policy).await
    }
}

#[async_trait]
impl cancellation::CancellationStore for Front {
    async fn get_cancellation(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<(cancellation::CancellationView, String, String)>> {
        let via = self.event(Look, event_id).await?;
        via.get_cancellation(event_id).await
    }

    async fn event_cancelled(&self, event_id: &str) -> StoreResult<bool> {
        let via = self.event(Look, event_id).await?;
        via.event_cancelled(event_id).await
    }

    async fn cancellation_step(
        &self,
        event_id: &str,
        limit: u32,
    ) -> StoreResult<cancellation::CancellationStep> {
        let via = self.event(Pass, event_id).await?;
        via.cancellation_step(event_id, limit).await
    }

    async fn cancellations_open(&self) -> StoreResult<Vec<String>> {
        self.each_joined(Pass, |s| s.cancellations_open()).await
    }
}

#[async_trait]
impl waitlist::WaitlistStore for Front {
    async fn get_waitlist_entry(
        &self,
        waitlist_id: &str,
    ) -> StoreResult<Option<waitlist::WaitlistView>> {
        self.find(
            Look,
            waitlist_id,
            |w: &waitlist::WaitlistView| &w.event_id,
            |s| s.get_waitlist_entry(waitlist_id),
        )
        .await
    }
}

/// A phase's access codes live with their event.
#[async_trait]
impl crate::phase::PhaseStore for Front {
    async fn insert_access_codes(
        &self,
        batch: &crate::phase::CodeBatch,
    ) -> StoreResult<crate::phase::CodesInserted> {
        self.event(Start, &batch.event_id)
            .await?
            .insert_access_codes(batch)
            .await
    }

    async fn access_codes(
        &self,
        event_id: &str,
        phase_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<crate::phase::AccessCodeRow>> {
        self.event(Look, event_id)
            .await?
            .access_codes(event_id, phase_id, limit)
            .await
    }

    async fn access_code(
        &self,
        event_id: &str,
        phase_id: &str,
        code: &str,
    ) -> StoreResult<Option<crate::phase::AccessCodeRow>> {
        self.event(Start, event_id)
            .await?
            .access_code(event_id, phase_id, code)
            .await
    }

    async fn access_redeemed(
        &self,
        event_id: &str,
        phase_id: &str,
        account_id: &str,
    ) -> StoreResult<bool> {
        self.event(Look, event_id)
            .await?
            .access_redeemed(event_id, phase_id, account_id)
            .await
    }
}

#[async_trait]
impl crate::allocation::AllocationStore for Front {
    async fn add_allocations(
        &self,
        event_id: &str,
        allocations: &[boxoffice_domain::allocation::Allocation],
        answer: Option<&crate::allocation::Answer>,
    ) -> StoreResult<Vec<String>> {
        let via = self.event(Start, event_id).await?;
        via.add_allocations(event_id, allocations, answer).await
    }

    async fn allocations(
        &self,
        event_id: &str,
    ) -> StoreResult<Vec<boxoffice_domain::allocation::Allocation>> {
        self.event(Look, event_id)
            .await?
            .allocations(event_id)
            .await
    }

    async fn kept_holds(&self, event_id: &str) -> StoreResult<Vec<crate::allocation::KeptRow>> {
        self.event(Look, event_id).await?.kept_holds(event_id).await
    }

    async fn record_comp(
        &self,
        comp: &crate::allocation::CompRecord,
        answer: Option<&crate::allocation::Answer>,
    ) -> StoreResult<()> {
        let via = self.event(Start, &comp.event_id).await?;
        via.record_comp(comp, answer).await
    }

    async fn comps(&self, event_id: &str) -> StoreResult<Vec<crate::allocation::CompRecord>> {
        self.event(Look, event_id).await?.comps(event_id).await
    }

    async fn record_box_office_sale(
        &self,
        sale: &crate::allocation::BoxOfficeSale,
        answer: Option<&crate::allocation::Answer>,
    ) -> StoreResult<()> {
        let via = self.event(Start, &sale.event_id).await?;
        via.record_box_office_sale(sale, answer).await
    }

    async fn box_office_sale(
        &self,
        event_id: &str,
        order_id: &str,
    ) -> StoreResult<Option<crate::allocation::BoxOfficeSale>> {
        let via = self.event(Look, event_id).await?;
        via.box_office_sale(event_id, order_id).await
    }

    async fn unrecorded_comp_orders(&self, event_id: &str) -> StoreResult<Vec<String>> {
        let via = self.event(Look, event_id).await?;
        via.unrecorded_comp_orders(event_id).await
    }

    async fn record_answer(
        &self,
        event_id: &str,
        answer: &crate::allocation::Answer,
    ) -> StoreResult<()> {
        let via = self.event(Start, event_id).await?;
        via.record_answer(event_id, answer).await
    }
}

#[async_trait]
impl door::DoorStore for Front {
    async fn door_lists(&self, event_id: &str) -> StoreResult<door::DoorLists> {
        self.event(Look, event_id).await?.door_lists(event_id).await
    }
}

/// A hold's or a ticket's holder lives with its event.
#[async_trait]
impl crate::holder::HolderStore for Front {
    async fn hold_holders(
        &self,
        event_id: &str,
        hold_id: &str,
    ) -> StoreResult<Vec<crate::holder::HoldHolder>> {
        self.event(Look, event_id)
            .await?
            .hold_holders(event_id, hold_id)
            .await
    }

    async fn set_hold_holders(
        &self,
        event_id: &str,
        hold_id: &str,
        account_id: &str,
        holders: &[crate::holder::HoldHolder],
    ) -> StoreResult<crate::holder::HoldHoldersSet> {
        self.event(Start, event_id)
            .await?
            .set_hold_holders(event_id, hold_id, account_id, holders)
            .await
    }

    async fn set_ticket_holder(
        &self,
        event_id: &str,
        ticket_id: &str,
        account_id: &str,
        details: &boxoffice_domain::holder::HolderDetails,
        change_cutoff_s: u32,
    ) -> StoreResult<crate::holder::TicketHolderSet> {
        self.event(Start, event_id)
            .await?
            .set_ticket_holder(event_id, ticket_id, account_id, details, change_cutoff_s)
            .await
    }
}

/// A hold's lines and an event's promo codes live with their event.
#[async_trait]
impl crate::pricing::PricingStore for Front {
    async fn sales_split(&self, event_id: &str) -> StoreResult<crate::pricing::SalesSplit> {
        self.event(Look, event_id)
            .await?
            .sales_split(event_id)
            .await
    }

    async fn hold_price(
        &self,
        event_id: &str,
        hold_id: &str,
    ) -> StoreResult<Option<boxoffice_domain::pricing::OrderPrice>> {
        self.event(Look, event_id)
            .await?
            .hold_price(event_id, hold_id)
            .await
    }

    async fn create_promo_code(
        &self,
        code: &crate::pricing::PromoCode,
        scope: &boxoffice_domain::idempotency::IdempotencyScope,
        request_digest: &str,
        response: &boxoffice_domain::idempotency::StoredResponse,
    ) -> StoreResult<Option<boxoffice_domain::idempotency::Idempotent>> {
        self.event(Start, &code.event_id)
            .await?
            .create_promo_code(code, scope, request_digest, response)
            .await
    }

    async fn promo_codes(&self, event_id: &str) -> StoreResult<Vec<crate::pricing::PromoCode>> {
        self.event(Look, event_id)
            .await?
            .promo_codes(event_id)
            .await
    }

    async fn apply_promo_code(
        &self,
        event: &EventRecord,
        hold_id: &str,
        account_id: &str,
        code: &str,
    ) -> StoreResult<crate::pricing::PromoApplied> {
        self.event(Start, &event.event_id)
            .await?
            .apply_promo_code(event, hold_id, account_id, code)
            .await
    }
}

/// Venue charts belong to no event: they live in the home shard alone, as webhooks do.
#[async_trait]
impl crate::venue::VenueStore for Front {
    async fn create_venue_chart(
        &self,
        new: &crate::venue::NewChart,
    ) -> StoreResult<crate::venue::ChartCreated> {
        self.home(Start)?.create_venue_chart(new).await
    }

    async fn venue_chart(
        &self,
        chart_id: &str,
    ) -> StoreResult<
        Option<(
            crate::venue::ChartSummary,
            boxoffice_domain::venue::VenueChart,
        )>,
    > {
        self.home(Look)?.venue_chart(chart_id).await
    }

    async fn list_venue_charts(
        &self,
        after_chart_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<crate::venue::ChartSummary>> {
        self.home(Look)?
            .list_venue_charts(after_chart_id, limit)
            .await
    }
}

/// Webhooks live in the home shard alone, endpoints and deliveries both: the relay fans out
/// with the global outbox ids (local id × 64 + shard index), so a delivery's event id is
/// unique across shards, and the delivery worker and the admin routes read one database.
#[async_trait]
impl WebhookStore for Front {
    async fn create_webhook_endpoint(&self, new: &NewEndpoint) -> StoreResult<EndpointCreated> {
        self.home(Start)?.create_webhook_endpoint(new).await
    }

    async fn get_webhook_endpoint(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        self.home(Look)?.get_webhook_endpoint(endpoint_id).await
    }

    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<WebhookEndpoint>> {
        self.home(Look)?.list_webhook_endpoints().await
    }

    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        let via = self.home(Start)?;
        via.set_webhook_endpoint_enabled(endpoint_id, enabled).await
    }

    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool> {
        self.home(Start)?.delete_webhook_endpoint(endpoint_id).await
    }

    async fn fan_out_webhooks(&self, events: &[WebhookEvent]) -> StoreResult<u64> {
        self.home(Pass)?.fan_out_webhooks(events).await
    }

    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<DueDelivery>> {
        let via = self.home(Pass)?;
        via.claim_webhook_deliveries(limit, lease_s).await
    }

    async fn record_webhook_attempt(&self, delivery_id: i64, attempt: &Attempt) -> StoreResult<()> {
        let via = self.home(Pass)?;
        via.record_webhook_attempt(delivery_id, attempt).await
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let via = self.home(Look)?;
        via.list_webhook_deliveries(endpoint_id, before, limit)
            .await
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: i64,
    ) -> StoreResult<Option<WebhookDelivery>> {
        let via = self.home(Start)?;
        via.replay_webhook_delivery(endpoint_id, delivery_id).await
    }
}

/// Accounts and mails live in the home shard alone, as webhooks do: the relay fans out with
/// the global outbox ids, so a mail's (outbox id, account) is unique across shards, and the
/// mail worker and the admin routes read one database. Only the accounts with tickets of a
/// cancelled event are read where the event is.
#[async_trait]
impl MailStore for Front {
    async fn get_account(&self, account_id: &str) -> StoreResult<Option<AccountRecord>> {
        self.home(Look)?.get_account(account_id).await
    }

    async fn update_account(
        &self,
        account_id: &str,
        update: &AccountUpdate,
    ) -> StoreResult<AccountRecord> {
        self.home(Start)?.update_account(account_id, update).await
    }

    async fn record_token_email(&self, account_id: &str, email: &str) -> StoreResult<bool> {
        self.home(Pass)?.record_token_email(account_id, email).await
    }

    async fn fan_out_mail(&self, mails: &[NewMail]) -> StoreResult<u64> {
        self.home(Pass)?.fan_out_mail(mails).await
    }

    async fn cancelled_ticket_accounts(
        &self,
        event_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<String>> {
        let via = self.event(Pass, event_id).await?;
        via.cancelled_ticket_accounts(event_id, limit).await
    }

    async fn expire_mail_leases(&self) -> StoreResult<u64> {
        self.home(Pass)?.expire_mail_leases().await
    }

    async fn claim_mail(&self, limit: u32, lease_s: f64) -> StoreResult<Vec<ClaimedMail>> {
        self.home(Pass)?.claim_mail(limit, lease_s).await
    }

    async fn record_mail(&self, mail_id: i64, outcome: &MailOutcome) -> StoreResult<bool> {
        self.home(Pass)?.record_mail(mail_id, outcome).await
    }

    async fn get_mail(&self, mail_id: i64) -> StoreResult<Option<MailMessage>> {
        self.home(Look)?.get_mail(mail_id).await
    }

    async fn list_mail(
        &self,
        status: Option<MailStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<MailMessage>> {
        self.home(Look)?.list_mail(status, before, limit).await
    }

    async fn resend_mail(&self, mail_id: i64) -> StoreResult<Option<Resent>> {
        self.home(Start)?.resend_mail(mail_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn merged_lists_keep_each_shards_order_and_the_limit() {
        let lists = vec![vec!["a3", "a1"], vec!["a4", "a2"]];
        assert_eq!(merged(lists.clone(), |s| s, true, 3), ["a4", "a3", "a2"]);
        assert_eq!(merged(lists, |s| s, false, 10), ["a1", "a2", "a3", "a4"]);
    }
}
