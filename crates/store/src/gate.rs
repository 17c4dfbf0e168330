//! A bound on the store calls in flight at once ([`Gated`]), so that overload is refused at
//! once instead of queueing for a pooled connection until the pool's acquire timeout.
//!
//! Why: a pool serves its waiters first come, first served, each with a deadline. When more
//! wait than the pool can serve before that deadline, nearly every caller waits the whole
//! timeout and many still fail; worse, a waiter whose deadline strikes while its connection
//! is being opened or checked drops that connection. Measured in the on-sale on PostgreSQL:
//! 3,762 of 3,819 sessions in three minutes ended abandoned by the client, while the
//! database sat idle between reconnects (`pg_stat_database.sessions_abandoned`). A bounded
//! number of calls in flight keeps the queue shorter than the pool can drain well before the
//! deadline; the call past the bound fails at once with [`StoreError::Busy`] (answered 429
//! with `Retry-After`).
//!
//! Only calls that start work or look at it are bounded, never one that finishes work
//! already started: a settlement, a webhook's reads, a release, ticket issue, the outbox and
//! the writer's groups always pass. Refusing those would strand an order its fan already
//! paid for (it waits for the reconciler while its fan polls, and the polls crowd the pool
//! further). Looks that a client repeats (an order's status, a seat map) may take only half
//! the places, so they are refused before a checkout's first read is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::inventory::Inventory;

use crate::engine::{EngineStore, GroupCommitted, GroupWrite};
use crate::{
    EventCounts, EventRecord, HoldRequest, HoldView, ReadStore, ReleaseOutcome, RenderEvent,
    RenderHold, Store, StoreError, StoreResult, SweepReport, WorkerStore, checkout, exchange,
    seatmap,
};

/// Store calls in flight per pooled connection that [`Gated::for_pool`] allows: enough that
/// every connection has its next call waiting, few enough that a call waits for about one
/// call ahead of it. Calls past what the connections serve add only waiting (Little's law):
/// with 16 per connection (768 on PostgreSQL) the on-sale's checkouts and webhooks waited
/// seconds in the pool's queue for calls that could have been refused at once.
pub const CALLS_PER_CONNECTION: usize = 2;
/// The bound of [`Gated::for_pool`] is never below this (SQLite's small pool reads
/// in-process, fast).
pub const CALLS_MIN: usize = 64;

/// The words of the [`StoreError::Busy`] a call past the bound gets (the server counts its
/// refusals by them).
pub const CALLS_BUSY: &str = "too many store calls in flight";

/// A store whose calls in flight are bounded; past the bound a call fails at once with
/// [`StoreError::Busy`]. `ping` (readiness) and `migrate` are never refused.
pub struct Gated {
    inner: Arc<dyn Store>,
    bound: CallBound,
}

/// What a bounded call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The first read or write of a request that starts work (a checkout's look at its hold,
    /// an idempotency look-up, an exchange).
    Start,
    /// A look a client repeats (an order's status, a list, a seat map): refused first.
    Look,
}

/// At most `limit` holders of a [`Slot`] at once.
#[derive(Debug)]
pub struct CallBound {
    in_flight: AtomicUsize,
    limit: usize,
}

impl CallBound {
    /// At least one.
    pub fn new(limit: usize) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            limit: limit.max(1),
        }
    }

    /// A place for one call, or [`StoreError::Busy`] at once when all are taken (for a
    /// [`Call::Look`], when half are).
    pub fn enter(&self, call: Call) -> StoreResult<Slot<'_>> {
        let limit = match call {
            Call::Start => self.limit,
            Call::Look => self.limit.div_ceil(2),
        };
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(&self.in_flight);
        if before >= limit {
            return Err(StoreError::Busy(format!(
                "{CALLS_BUSY} (limit {})",
                self.limit
            )));
        }
        Ok(slot)
    }

    /// Places taken now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl std::fmt::Debug for Gated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated")
            .field("inner", &self.inner)
            .field("limit", &self.bound.limit)
            .finish_non_exhaustive()
    }
}

/// One call's place; gives it back when dropped (also when the call is cancelled).
#[derive(Debug)]
pub struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gated {
    /// `inner` with at most `limit` calls in flight (at least 1).
    pub fn new(inner: Arc<dyn Store>, limit: usize) -> Self {
        Self {
            inner,
            bound: CallBound::new(limit),
        }
    }

    /// `inner` over a pool of `connections`: [`CALLS_PER_CONNECTION`] calls per connection,
    /// at least [`CALLS_MIN`].
    pub fn for_pool(inner: Arc<dyn Store>, connections: u32) -> Self {
        Self::new(
            inner,
            (connections as usize * CALLS_PER_CONNECTION).max(CALLS_MIN),
        )
    }

    /// The calls in flight and their bound.
    pub fn bound(&self) -> &CallBound {
        &self.bound
    }
}

/// `self.inner.$method(args).await` inside a slot for a `$call`, or (`pass`) without one.
macro_rules! gated {
    (pass, $self:ident . $method:ident ( $($arg:expr),* )) => {
        $self.inner.$method($($arg),*).await
    };
    ($call:ident, $self:ident . $method:ident ( $($arg:expr),* )) => {{
        let _slot = $self.bound.enter(Call::$call)?;
        $self.inner.$method($($arg),*).await
    }};
}

#[async_trait]
impl EngineStore for Gated {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        gated!(pass, self.engine_load(event, endpoint))
    }

    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows> {
        gated!(
            pass,
            self.engine_rows(event_id, seat_ids, tier_ids, hold_ids)
        )
    }

    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
        gated!(pass, self.apply_group(group))
    }

    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        gated!(pass, self.engine_changes(event_id, after, limit))
    }
}

#[async_trait]
impl Store for Gated {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn migrate(&self) -> StoreResult<()> {
        self.inner.migrate().await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        gated!(pass, self.now())
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &boxoffice_domain::event::EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        gated!(
            Start,
            self.create_event(scope, request_digest, event_id, spec, render)
        )
    }

    async fn hold_batch(
        &self,
        event: &EventRecord,
        endpoint: &str,
        requests: &[HoldRequest],
        render: &RenderHold,
    ) -> StoreResult<Vec<Idempotent>> {
        gated!(Start, self.hold_batch(event, endpoint, requests, render))
    }

    async fn release_hold(&self, account_id: &str, hold_id: &str) -> StoreResult<ReleaseOutcome> {
        gated!(pass, self.release_hold(account_id, hold_id))
    }

    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool> {
        gated!(pass, self.replace_answer(scope, response))
    }

    async fn begin_checkout(
        &self,
        start: &checkout::CheckoutStart,
        render: &checkout::RenderOrder,
    ) -> StoreResult<checkout::CheckoutBegun> {
        gated!(Start, self.begin_checkout(start, render))
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        gated!(pass, self.check_in(ticket_id))
    }

    async fn same_shard(&self, event_a: &str, event_b: &str) -> StoreResult<bool> {
        gated!(pass, self.same_shard(event_a, event_b))
    }

    async fn mark_exchange_out(
        &self,
        out: &crate::exchange::ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), crate::exchange::ExchangeRefused>> {
        gated!(Start, self.mark_exchange_out(out, closes_at))
    }

    async fn exchange_in_fate(
        &self,
        out: &crate::exchange::ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<crate::exchange::InFate>> {
        gated!(pass, self.exchange_in_fate(out, abort_if_missing))
    }

    async fn finish_exchange_out(
        &self,
        from_event_id: &str,
        exchange_id: &str,
        fate: &crate::exchange::InFate,
    ) -> StoreResult<Option<crate::exchange::ExchangeStatus>> {
        gated!(
            pass,
            self.finish_exchange_out(from_event_id, exchange_id, fate)
        )
    }

    async fn open_exchanges_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<crate::exchange::ExchangeOut>> {
        gated!(pass, self.open_exchanges_out(older_than_s, limit))
    }
}

#[async_trait]
impl ReadStore for Gated {
    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        gated!(Start, self.get_event(event_id))
    }

    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>> {
        gated!(Look, self.list_events(after_event_id, limit))
    }

    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
        gated!(Look, self.event_counts(event))
    }

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
        gated!(Start, self.get_hold(hold_id))
    }

    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>> {
        gated!(Start, self.stored_answers(asked))
    }

    async fn stored_answer(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
    ) -> StoreResult<Option<Idempotent>> {
        gated!(Start, self.stored_answer(scope, request_digest))
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
        gated!(Look, self.list_event_ids())
    }

    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
        gated!(Look, self.load_inventory(event_id))
    }

    async fn get_order(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        gated!(Look, self.get_order(order_id))
    }

    async fn order_head(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        gated!(pass, self.order_head(order_id))
    }

    async fn order_to_exchange(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        gated!(Start, self.get_order(order_id))
    }

    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<checkout::OrderView>> {
        gated!(Look, self.list_orders(account_id, before_order_id, limit))
    }

    async fn get_ticket(&self, ticket_id: &str) -> StoreResult<Option<checkout::TicketView>> {
        gated!(Look, self.get_ticket(ticket_id))
    }

    async fn get_exchange(&self, exchange_id: &str) -> StoreResult<Option<exchange::ExchangeView>> {
        gated!(Look, self.get_exchange(exchange_id))
    }

    async fn seat_map(&self, event_id: &str) -> StoreResult<Option<seatmap::MapSnapshot>> {
        gated!(Look, self.seat_map(event_id))
    }

    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>> {
        gated!(Look, self.seat_map_changes(event_id, after, limit))
    }
}

#[async_trait]
impl WorkerStore for Gated {
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        gated!(pass, self.expire_due_holds(limit, held_grace_ms))
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        gated!(pass, self.expire_holds(hold_ids))
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        gated!(pass, self.purge_idempotency(older_than_s))
    }

    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &checkout::RenderOrder)>,
    ) -> StoreResult<Option<checkout::Settled>> {
        gated!(
            pass,
            self.settle_payment(operation_id, verdict, webhook, answer)
        )
    }

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        gated!(pass, self.payment_operation(operation_id))
    }

    async fn payment_operations(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        gated!(pass, self.payment_operations(operation_ids))
    }

    async fn capture_confirmed(&self, captures: &[(String, String)]) -> StoreResult<Vec<String>> {
        gated!(pass, self.capture_confirmed(captures))
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>> {
        gated!(pass, self.payment_operation_by_ref(provider, provider_ref))
    }

    async fn due_payment_operations(
        &self,
        limit: u32,
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        gated!(pass, self.due_payment_operations(limit))
    }

    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        gated!(
            pass,
            self.postpone_payment_operation(operation_id, delay_s, error)
        )
    }

    async fn issue_tickets(&self, order_id: &str, sign: &checkout::SignTicket) -> StoreResult<u32> {
        gated!(pass, self.issue_tickets(order_id, sign))
    }

    async fn issue_tickets_of(
        &self,
        order_ids: &[String],
        sign: &checkout::SignTicket,
    ) -> StoreResult<u32> {
        gated!(pass, self.issue_tickets_of(order_ids, sign))
    }

    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<checkout::OutboxMessage>> {
        gated!(pass, self.claim_outbox(limit, lease_s))
    }

    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
        gated!(pass, self.finish_outbox(ids))
    }

    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
        gated!(pass, self.retry_outbox(id, delay_s, error))
    }

    async fn outbox_lag_s(&self) -> StoreResult<f64> {
        gated!(pass, self.outbox_lag_s())
    }

    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
        gated!(pass, self.prune_seat_map_changes(keep))
    }
}

/// An organiser's report is a look: refused first under load.
#[async_trait]
impl crate::report::ReportStore for Gated {
    async fn report_rows(&self, event: &EventRecord) -> StoreResult<crate::report::ReportRows> {
        gated!(Look, self.report_rows(event))
    }

    async fn timeline_rows(
        &self,
        event: &EventRecord,
        bucket_s: u32,
    ) -> StoreResult<crate::report::TimelineRows> {
        gated!(Look, self.timeline_rows(event, bucket_s))
    }
}

#[async_trait]
impl crate::lease::LeaseStore for Gated {
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()> {
        gated!(pass, self.register_node(node_id, advertise_url))
    }

    async fn nodes(&self) -> StoreResult<Vec<crate::lease::NodeRecord>> {
        gated!(pass, self.nodes())
    }

    async fn take_lease(
        &self,
        event_id: &str,
        node_id: &str,
        ttl_ms: u64,
    ) -> StoreResult<crate::lease::Taken> {
        gated!(pass, self.take_lease(event_id, node_id, ttl_ms))
    }

    async fn renew_leases(
        &self,
        node_id: &str,
        held: &[(String, u64)],
        ttl_ms: u64,
    ) -> StoreResult<Vec<String>> {
        gated!(pass, self.renew_leases(node_id, held, ttl_ms))
    }

    async fn release_lease(
        &self,
        event_id: &str,
        fence: &crate::lease::Fence,
    ) -> StoreResult<bool> {
        gated!(pass, self.release_lease(event_id, fence))
    }

    async fn lease(&self, event_id: &str) -> StoreResult<Option<crate::lease::Lease>> {
        gated!(pass, self.lease(event_id))
    }
}

#[async_trait]
impl crate::transfer::TransferStore for Gated {
    async fn offer_transfer(
        &self,
        offer: &crate::transfer::TransferOffer,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<crate::transfer::Offered, crate::transfer::OfferRefused>> {
        gated!(Start, self.offer_transfer(offer, closes_at))
    }

    async fn get_transfer(
        &self,
        transfer_id: &str,
    ) -> StoreResult<Option<crate::transfer::TransferView>> {
        gated!(Start, self.get_transfer(transfer_id))
    }

    async fn list_transfers(
        &self,
        account_id: &str,
        role: crate::transfer::TransferRole,
        limit: u32,
    ) -> StoreResult<Vec<crate::transfer::TransferView>> {
        gated!(Look, self.list_transfers(account_id, role, limit))
    }

    async fn end_transfer(
        &self,
        transfer_id: &str,
        account_id: &str,
        to: crate::transfer::TransferStatus,
    ) -> StoreResult<Option<crate::transfer::TransferView>> {
        gated!(Start, self.end_transfer(transfer_id, account_id, to))
    }
}

#[async_trait]
impl crate::waitlist::WaitlistStore for Gated {
    async fn get_waitlist_entry(
        &self,
        waitlist_id: &str,
    ) -> StoreResult<Option<crate::waitlist::WaitlistView>> {
        gated!(Look, self.get_waitlist_entry(waitlist_id))
    }
}

#[async_trait]
impl crate::door::DoorStore for Gated {
    async fn door_lists(&self, event_id: &str) -> StoreResult<crate::door::DoorLists> {
        gated!(Look, self.door_lists(event_id))
    }
}

/// Admin calls are bounded like the other starts and looks; the workers' calls always pass.
#[async_trait]
impl crate::webhook::WebhookStore for Gated {
    async fn create_webhook_endpoint(
        &self,
        new: &crate::webhook::NewEndpoint,
    ) -> StoreResult<crate::webhook::EndpointCreated> {
        gated!(Start, self.create_webhook_endpoint(new))
    }

    async fn get_webhook_endpoint(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Option<crate::webhook::WebhookEndpoint>> {
        gated!(Look, self.get_webhook_endpoint(endpoint_id))
    }

    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<crate::webhook::WebhookEndpoint>> {
        gated!(Look, self.list_webhook_endpoints())
    }

    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<crate::webhook::WebhookEndpoint>> {
        gated!(
            Start,
            self.set_webhook_endpoint_enabled(endpoint_id, enabled)
        )
    }

    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool> {
        gated!(Start, self.delete_webhook_endpoint(endpoint_id))
    }

    async fn fan_out_webhooks(&self, events: &[crate::webhook::WebhookEvent]) -> StoreResult<u64> {
        gated!(pass, self.fan_out_webhooks(events))
    }

    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<crate::webhook::DueDelivery>> {
        gated!(pass, self.claim_webhook_deliveries(limit, lease_s))
    }

    async fn record_webhook_attempt(
        &self,
        delivery_id: i64,
        attempt: &crate::webhook::Attempt,
    ) -> StoreResult<()> {
        gated!(pass, self.record_webhook_attempt(delivery_id, attempt))
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<crate::webhook::WebhookDelivery>> {
        gated!(
            Look,
            self.list_webhook_deliveries(endpoint_id, before, limit)
        )
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: i64,
    ) -> StoreResult<Option<crate::webhook::WebhookDelivery>> {
        gated!(
            Start,
            self.replay_webhook_delivery(endpoint_id, delivery_id)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_the_bound_is_refused_at_once_and_every_place_is_given_back() {
        let bound = CallBound::new(2);
        let a = bound
            .enter(Call::Look)
            .expect("a look takes the first half");
        assert!(
            matches!(bound.enter(Call::Look), Err(StoreError::Busy(_))),
            "looks take at most half the places"
        );
        let b = bound.enter(Call::Start).expect("a start takes the rest");
        match bound.enter(Call::Start) {
            Err(StoreError::Busy(why)) => assert!(why.contains(CALLS_BUSY), "{why}"),
            other => panic!("a third call must be refused as busy, got {other:?}"),
        }
        assert_eq!(bound.in_flight(), 2, "a refused call holds no place");
        drop(a);
        let c = bound
            .enter(Call::Start)
            .expect("a place given back is taken again");
        drop((b, c));
        assert_eq!(bound.in_flight(), 0);
        assert_eq!(
            CallBound::new(0).limit(),
            1,
            "a bound of 0 would refuse everything"
        );
    }
}
