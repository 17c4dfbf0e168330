//! The [`Store`] trait: everything boxoffice asks of its authoritative store, and the records
//! it gets back. Backends live in their own crates (`boxoffice-store-postgres`,
//! `boxoffice-store-sqlite`), each with its own migrations; the story tests in
//! `crates/server/tests` run unchanged against both.
//!
//! Architecture invariant: every state transition a backend performs is a conditional update
//! on the authoritative row (status, hold id, deadline from the store's clock), so a late or
//! repeated call finds nothing to do. Every idempotent write stores its response in the same
//! transaction as the state it creates.

pub mod allocation;
pub mod cancellation;
pub mod checkout;
pub mod clock;
pub mod door;
pub mod engine;
pub mod exchange;
pub mod front;
pub mod gate;
pub mod holder;
pub mod lease;
pub mod mail;
pub mod phase;
pub mod pricing;
pub mod refund;
pub mod report;
pub mod seatmap;
pub mod shard;
pub mod transfer;
pub mod venue;
pub mod waitlist;
pub mod webhook;

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest};
use boxoffice_domain::event::{
    EventSpec, QueuePolicy, SaleRules, Section, Tier, WaitingRoomSettings,
};
use boxoffice_domain::hold::HoldStatus;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::ids::SeatRef;
use boxoffice_domain::inventory::Inventory;

/// Times a batch is retried after a transient conflict (deadlock, serialization failure, a
/// concurrent insert of the same idempotency key) before the error reaches the caller.
pub const BATCH_ATTEMPTS_MAX: u32 = 5;

/// How a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or is shutting down: answer 503, never guess.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store is up but saturated: no pooled connection came free in time. Answered 429
    /// with `Retry-After` (overload costs latency at the door, never a false "unavailable").
    #[error("store busy: {0}")]
    Busy(String),
    /// This node does not hold the event's lease (any more): another node owns the event.
    /// Answered 503 with `Retry-After`; the request may be sent again (to any node).
    #[error("not the event's owner: {0}")]
    Fenced(String),
    /// A transient conflict that survived every retry.
    #[error("store conflict: {0}")]
    Conflict(String),
    /// Anything else: a bug or corrupt data. Logged, answered as a bare 500.
    #[error("store error: {0}")]
    Internal(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Renders the stored response of a created event, inside the creating transaction.
pub type RenderEvent = dyn Fn(&EventRecord) -> StoredResponse + Send + Sync;
/// Renders the stored response of one decided hold request, inside the batch transaction.
pub type RenderHold = dyn Fn(&HoldOutcome) -> StoredResponse + Send + Sync;

/// An event as stored. Immutable after creation, so the server may cache it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub event_id: String,
    pub name: String,
    pub starts_at: OffsetDateTime,
    pub on_sale_at: OffsetDateTime,
    pub currency: String,
    pub hold_ttl_s: u32,
    pub payment_grace_s: u32,
    pub max_seats_per_hold: u32,
    pub max_tickets_per_account: u32,
    pub exchange_cutoff_s: u32,
    pub transfer_cutoff_s: u32,
    pub waitlist_offer_ttl_s: u32,
    pub refund_policy: Option<boxoffice_domain::event::RefundPolicy>,
    /// What each ticket's holder must give before payment (PATCH may change it).
    pub holder_policy: Option<boxoffice_domain::holder::HolderPolicy>,
    /// Ticket types, fees and tax, phases, allocations as created (issue 40).
    pub sale: boxoffice_domain::sale::SaleSetup,
    /// The venue chart the event was created on, as copied then (issue 41); its sections'
    /// `row_lengths` come from it. Absent: sections of `rows` × `seats_per_row`.
    pub chart: Option<std::sync::Arc<boxoffice_domain::event_chart::EventChart>>,
    pub waiting_room: WaitingRoomSettings,
    pub sections: Vec<Section>,
    pub tiers: Vec<Tier>,
    pub created_at: OffsetDateTime,
}

impl EventRecord {
    pub fn rules(&self) -> SaleRules {
        SaleRules {
            on_sale_at: self.on_sale_at,
            section_order: self.sections.iter().map(|s| s.name.clone()).collect(),
            hold_ttl_s: self.hold_ttl_s,
            max_seats_per_hold: self.max_seats_per_hold,
            max_tickets_per_account: self.max_tickets_per_account,
            currency: self.currency.clone(),
            prices: boxoffice_domain::pricing::PriceList::of(&self.sale),
            accessibility: self
                .chart
                .as_deref()
                .map(boxoffice_domain::accessibility::Accessibility::of)
                .unwrap_or_default(),
        }
    }

    /// Whether the seat exists in this event's layout; answered without the store.
    pub fn has_seat(&self, seat: &SeatRef) -> bool {
        self.sections.iter().any(|section| section.contains(seat))
    }

    /// A seat's standard face price: its category's on a chart, else its section's; `None`
    /// for a seat the event does not have.
    pub fn seat_price_minor(&self, seat: &SeatRef) -> Option<i64> {
        let section = self.sections.iter().find(|s| s.contains(seat))?;
        Some(
            self.chart
                .as_ref()
                .and_then(|chart| chart.seat_price(seat))
                .unwrap_or(section.price_minor),
        )
    }

    pub fn has_tier(&self, tier_id: &str) -> bool {
        self.tiers.iter().any(|tier| tier.tier_id == tier_id)
    }
}

/// Builds the record a backend persists for a new event. `now` is the store's clock, which
/// fills `on_sale_at` when the spec leaves it out.
pub fn event_record(event_id: &str, spec: &EventSpec, now: OffsetDateTime) -> EventRecord {
    EventRecord {
        event_id: event_id.to_owned(),
        name: spec.name.clone(),
        starts_at: spec.starts_at,
        on_sale_at: spec.on_sale_at.unwrap_or(now),
        currency: spec.currency.clone(),
        hold_ttl_s: spec.hold_ttl_s,
        payment_grace_s: spec.payment_grace_s,
        max_seats_per_hold: spec.max_seats_per_hold,
        max_tickets_per_account: spec.max_tickets_per_account,
        exchange_cutoff_s: spec.exchange_cutoff_s,
        transfer_cutoff_s: spec.transfer_cutoff_s,
        waitlist_offer_ttl_s: spec.waitlist_offer_ttl_s,
        refund_policy: spec.refund_policy,
        holder_policy: spec.holder_policy.clone(),
        sale: spec.sale.clone(),
        chart: spec.chart.clone(),
        waiting_room: spec.waiting_room.clone(),
        sections: spec.sections.clone(),
        tiers: spec.tiers.clone(),
        created_at: now,
    }
}

/// Serializes waiting-room settings for a JSON column.
pub fn waiting_room_json(settings: &WaitingRoomSettings) -> String {
    serde_json::to_string(settings).unwrap_or_else(|_| "{}".into())
}

/// Reads waiting-room settings from a JSON column; a damaged value falls back to the
/// defaults with the door shut, never to an open sale without a queue that was configured.
pub fn parse_waiting_room(raw: &str) -> WaitingRoomSettings {
    serde_json::from_str(raw).unwrap_or(WaitingRoomSettings {
        enabled: true,
        policy: QueuePolicy::Fifo,
        ..WaitingRoomSettings::default()
    })
}

/// Live counts of one section or tier, as of the store's clock (an expired hold counts as
/// available).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub available: i64,
    pub held: i64,
    pub sold: i64,
}

/// Counts per section name and per tier id, in the event's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventCounts {
    pub sections: Vec<(String, Counts)>,
    pub tiers: Vec<(String, Counts)>,
    /// The event was cancelled (`cancellation`).
    pub cancelled: bool,
}

impl EventCounts {
    /// Puts counts read from a backend in the event's order. `section_rows` are
    /// (section, available, held, sold); `tier_rows` are (tier id, capacity, sold, live held).
    /// A section or tier without rows counts zero.
    pub fn assemble(
        event: &EventRecord,
        section_rows: Vec<(String, i64, i64, i64)>,
        tier_rows: Vec<(String, i64, i64, i64)>,
    ) -> Self {
        let by_section: std::collections::BTreeMap<String, Counts> = section_rows
            .into_iter()
            .map(|(name, available, held, sold)| {
                (
                    name,
                    Counts {
                        available,
                        held,
                        sold,
                    },
                )
            })
            .collect();
        let by_tier: std::collections::BTreeMap<String, Counts> = tier_rows
            .into_iter()
            .map(|(tier_id, capacity, sold, held)| {
                let counts = Counts {
                    available: capacity - sold - held,
                    held,
                    sold,
                };
                (tier_id, counts)
            })
            .collect();
        let section_counts = |name: &String| by_section.get(name).copied().unwrap_or_default();
        let tier_counts = |id: &String| by_tier.get(id).copied().unwrap_or_default();
        Self {
            sections: event
                .sections
                .iter()
                .map(|s| (s.name.clone(), section_counts(&s.name)))
                .collect(),
            tiers: event
                .tiers
                .iter()
                .map(|t| (t.tier_id.clone(), tier_counts(&t.tier_id)))
                .collect(),
            cancelled: false,
        }
    }
}

/// Runs `attempt` again after a transient conflict ([`StoreError::Conflict`]), with a short
/// growing pause, up to [`BATCH_ATTEMPTS_MAX`] attempts.
pub async fn retrying<T, F, Fut>(mut attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut n_attempts = 0;
    loop {
        n_attempts += 1;
        match attempt().await {
            Err(StoreError::Conflict(why)) if n_attempts < BATCH_ATTEMPTS_MAX => {
                tracing::debug!(n_attempts, %why, "retrying after a transient conflict");
                tokio::time::sleep(std::time::Duration::from_millis(2u64 << n_attempts)).await;
            }
            other => return other,
        }
    }
}

/// A hold as stored, with the seats and prices it was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldView {
    pub hold_id: String,
    pub event_id: String,
    pub account_id: String,
    /// The stored status; [`HoldView::effective_status`] accounts for the clock.
    pub status: HoldStatus,
    pub expires_at: OffsetDateTime,
    pub seats: Vec<HeldSeat>,
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub total_minor: i64,
    pub currency: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl HoldView {
    pub fn effective_status(&self, now: OffsetDateTime) -> HoldStatus {
        self.status.effective(self.expires_at, now)
    }
}

/// One seat of a hold and the price it was held at.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldSeat {
    pub seat_id: String,
    pub price_minor: i64,
}

/// What releasing a hold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Released now.
    Released(HoldView),
    /// Nothing to do: the hold had already ended (released, expired, confirmed). Repeating
    /// a release is harmless.
    AlreadyEnded(HoldView),
    /// The hold is in checkout; only the payment flow may end it.
    InCheckout(HoldView),
    /// No such hold for this account.
    NotFound,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SweepReport {
    pub holds_expired: u64,
    pub seats_freed: u64,
    pub tier_units_returned: u64,
}

/// The authoritative store, by concern: what the event writer needs
/// ([`engine::EngineStore`]: load an event, apply a group), the read side ([`ReadStore`]:
/// events, holds, orders, tickets, exchanges, the seat map), the workers' side
/// ([`WorkerStore`]: payment operations, tickets, the outbox, expiry and tidying), and here
/// what is left: setup, event creation and the commands that do not go through a writer yet.
/// Every method is one short transaction (or none).
#[async_trait]
pub trait Store:
    engine::EngineStore
    + lease::LeaseStore
    + report::ReportStore
    + ReadStore
    + WorkerStore
    + transfer::TransferStore
    + refund::RefundStore
    + cancellation::CancellationStore
    + waitlist::WaitlistStore
    + phase::PhaseStore
    + door::DoorStore
    + allocation::AllocationStore
    + webhook::WebhookStore
    + holder::HolderStore
    + mail::MailStore
    + pricing::PricingStore
    + venue::VenueStore
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
{
    /// `"postgres"` or `"sqlite"`.
    fn backend(&self) -> &'static str;

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Round trip to the store (readiness).
    async fn ping(&self) -> StoreResult<()>;

    /// The store's clock, truncated to milliseconds.
    async fn now(&self) -> StoreResult<OffsetDateTime>;

    /// Creates an event with its seats and tiers, or replays the stored answer of `scope`.
    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent>;

    /// Rewrites the stored answer of an existing record (a checkout's, once its order is
    /// settled by another request). `false`: no such record.
    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool>;

    /// `VALID` to `CHECKED_IN`, once: `(changed now, status after)`, `None` for no ticket.
    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>>;

    /// Whether the rows of two events are in one database, so that an exchange between them
    /// is one transaction: always, except on different shards ([`front::Front`]).
    async fn same_shard(&self, event_a: &str, event_b: &str) -> StoreResult<bool> {
        let _ = (event_a, event_b);
        Ok(true)
    }

    /// An exchange across shards, step one, on the old event's shard (DESIGN §7): in one
    /// transaction, the order must still be `CONFIRMED` (same account, event and hold) with
    /// its payment captured, every ticket given up still `VALID` and unmarked, and the store's
    /// clock before `closes_at`; then the tickets are marked with the exchange and its `OUT`
    /// row written. Else nothing is written and the refusal says why. Only PostgreSQL has
    /// shards (SQLite answers an error).
    async fn mark_exchange_out(
        &self,
        out: &exchange::ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), exchange::ExchangeRefused>>;

    /// On the target event's shard: what became of the exchange (its `IN` row); when there
    /// is none, `None`, or with `abort_if_missing` its `ABORT` row is written (under the same
    /// lock as the `IN` row's write, so that one of the two wins) and it has `Ended`.
    async fn exchange_in_fate(
        &self,
        out: &exchange::ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<exchange::InFate>>;

    /// On the old event's shard, the last step: an `OUT` row still `PAYMENT_REQUIRED`
    /// follows the target's fate: `Completed` voids the marked tickets and puts their seats
    /// (or units) back on sale, `Ended` takes the marks back. Returns the row's status after
    /// (`None` when there is no such row); a row already ended is left as it is; `Open` only
    /// notes the look (the row's `updated_at`), so that the settler waits before the next.
    async fn finish_exchange_out(
        &self,
        from_event_id: &str,
        exchange_id: &str,
        fate: &exchange::InFate,
    ) -> StoreResult<Option<exchange::ExchangeStatus>>;

    /// `OUT` rows still `PAYMENT_REQUIRED` and untouched for `older_than_s` seconds, oldest
    /// first, at most `limit` (the settler's work list). None where there are no shards.
    /// (Every wrapper must pass these four on: none has a default, so none is forgotten.)
    async fn open_exchanges_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<exchange::ExchangeOut>>;
}

/// The writer's paths without a writer: each call loads the event's engine afresh, decides
/// one command (or one batch) and applies it as one group, decided again on a fresh load
/// when it loses a race ([`engine::one_shot`]). `serve` decides these on the event's writer;
/// tools and tests use them, and `serve` gives a sale back this way only when no writer of
/// its own has the event. Not part of [`Store`]: every store has them, through the engine
/// side it already has, so no wrapper forwards them.
#[async_trait]
pub trait OneShot: Store {
    /// Decides a batch of hold requests for one event on the event engine and persists it as
    /// one group ([`engine::hold_batch_once`], retried after a conflict). The server goes
    /// through its event writer instead; this one-shot form (a full load per call) is for
    /// tools and store tests. Returns one answer per request, in order, after the commit.
    async fn hold_batch(
        &self,
        event: &EventRecord,
        endpoint: &str,
        requests: &[HoldRequest],
        render: &RenderHold,
    ) -> StoreResult<Vec<Idempotent>> {
        engine::one_shot(|| engine::hold_batch_once(self, event, endpoint, requests, render)).await
    }

    /// Releases a live `HELD` hold of `account_id`, in one group decided by a freshly loaded
    /// engine ([`engine::release_once`]; `serve` releases on the event's writer). A group
    /// that loses a race is decided again on a fresh load.
    async fn release_hold(&self, account_id: &str, hold_id: &str) -> StoreResult<ReleaseOutcome> {
        engine::one_shot(|| engine::release_once(self, account_id, hold_id)).await
    }

    /// A capture that failed for good: in one group decided by a freshly loaded engine
    /// ([`engine::compensate_once`]; `serve` gives sales back on the event's writer) the
    /// confirmed order is cancelled, its seats or tier units go back on sale, its tickets are
    /// voided, its hold released, and a void of the authorization (a refund of a capture) is
    /// queued. Refused (`false`, nothing changes) when the order is not confirmed or one of
    /// its tickets was already used at the door.
    async fn compensate_failed_capture(
        &self,
        operation_id: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        engine::one_shot(|| engine::compensate_once(self, operation_id, reason)).await
    }

    /// Starts checkout of a `HELD` hold in one group decided by a freshly loaded engine
    /// ([`engine::checkout_once`]; `serve` starts checkouts on the event's writer): the hold
    /// moves to `PAYMENT_PENDING` with its one grace extension, an order and its payment
    /// operation (`AUTHORIZING`) are created, and the idempotency record stores
    /// `render(order)`. A group that loses a race (another group on the event, the same key)
    /// is decided again on a fresh load.
    async fn begin_checkout(
        &self,
        start: &checkout::CheckoutStart,
        render: &checkout::RenderOrder,
    ) -> StoreResult<checkout::CheckoutBegun> {
        engine::one_shot(|| engine::checkout_once(self, start, render)).await
    }
}

impl<S: Store + ?Sized> OneShot for S {}

/// The read side of a store: what requests and tools look at, never a write.
#[async_trait]
pub trait ReadStore: Send + Sync {
    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>>;

    /// Events in id order (ids sort by creation time), after `after_event_id`.
    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>>;

    /// Live counts per section and tier.
    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts>;

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>>;

    /// The answers already stored for these (scope, request digest) pairs, in order, read
    /// in one query without a transaction or a write: a replay when the digest matches, a
    /// key reuse when it does not, `None` when the key is new. Lets a request that would be
    /// refused before reaching its transaction (an admission that ended since, a seat the
    /// map shows sold) still replay its first answer, as the contract's idempotency demands.
    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>>;

    /// [`ReadStore::stored_answers`] for one scope.
    async fn stored_answer(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
    ) -> StoreResult<Option<Idempotent>> {
        let mut answers = self
            .stored_answers(&[(scope.clone(), request_digest.to_owned())])
            .await?;
        Ok(answers.pop().flatten())
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>>;

    /// One event's whole inventory at one instant, for [`Inventory::invariants`].
    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>>;

    async fn get_order(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>>;

    /// The order with its tickets, read to start an exchange of them (bounded as work that
    /// starts, not as a look a client repeats).
    async fn order_to_exchange(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.get_order(order_id).await
    }

    /// The order without its tickets (`tickets` empty): who owns it, of which event. The
    /// default reads the whole order.
    async fn order_head(&self, order_id: &str) -> StoreResult<Option<checkout::OrderView>> {
        self.get_order(order_id).await
    }

    /// The account's orders, newest first, before `before_order_id`.
    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<checkout::OrderView>>;

    async fn get_ticket(&self, ticket_id: &str) -> StoreResult<Option<checkout::TicketView>>;

    async fn get_exchange(&self, exchange_id: &str) -> StoreResult<Option<exchange::ExchangeView>>;

    /// Every seat and tier of an event and the map version they are at, read in one
    /// consistent snapshot; `None` for an unknown event.
    async fn seat_map(&self, event_id: &str) -> StoreResult<Option<seatmap::MapSnapshot>>;

    /// The committed change rows of an event after version `after`, oldest first, at most
    /// `limit`.
    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<seatmap::StoredBatch>>;
}

/// The workers' side of a store: payment settlement and the reconciler's list, ticket
/// issuance and compensation, the outbox, the sweeper, and the tidying of old records.
#[async_trait]
pub trait WorkerStore: Send + Sync {
    /// Expires up to `limit` holds whose deadline has passed (the sweeper's work): a `HELD`
    /// hold `held_grace_ms` after its deadline (its event's writer, if one has it loaded,
    /// ends it at the deadline itself), a `PAYMENT_PENDING` one at its deadline.
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport>;

    /// Expires the given holds if, by the store's clock, they are still `HELD` and past their
    /// deadline; frees only the seats that still point to them. A late or repeated call
    /// changes nothing.
    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport>;

    /// Deletes idempotency records older than `older_than_s` seconds.
    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64>;

    /// Applies what the provider said about an operation, in one transaction: forward-only
    /// payment status; on authorization a still-valid hold is sold and the order confirmed
    /// (capture and tickets queued), otherwise the order is cancelled and a void queued; on
    /// failure the order is cancelled and the hold's stock freed. `webhook` (provider, event
    /// id) is recorded in the same transaction: a duplicate returns `None` and changes
    /// nothing. `answer` rewrites the checkout's idempotency record with the settled order.
    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &checkout::RenderOrder)>,
    ) -> StoreResult<Option<checkout::Settled>>;

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>>;

    /// The operations of these ids that exist, in no particular order (the relay reads a
    /// round's captures at once). The default asks for each in turn.
    async fn payment_operations(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<checkout::PaymentOperation>> {
        let mut operations = Vec::with_capacity(operation_ids.len());
        for operation_id in operation_ids {
            operations.extend(self.payment_operation(operation_id).await?);
        }
        Ok(operations)
    }

    /// Captures the provider took, applied together where the backend can: each (operation
    /// id, provider reference) whose operation is still `AUTHORIZED` on a `CONFIRMED` order
    /// becomes `CAPTURED` (nothing else changes). Returns the ids it applied; the caller
    /// settles every other one with [`Self::settle_payment`], which decides the rest. The
    /// default applies none.
    async fn capture_confirmed(&self, captures: &[(String, String)]) -> StoreResult<Vec<String>> {
        let _ = captures;
        Ok(Vec::new())
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<checkout::PaymentOperation>>;

    /// The reconciler's work list (see the backends for the exact conditions).
    async fn due_payment_operations(
        &self,
        limit: u32,
    ) -> StoreResult<Vec<checkout::PaymentOperation>>;

    /// Counts an attempt and moves the operation's next look `delay_s` out.
    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()>;

    /// Issues a confirmed order's tickets once (one per seat or tier unit); returns how many
    /// were new.
    async fn issue_tickets(&self, order_id: &str, sign: &checkout::SignTicket) -> StoreResult<u32>;

    /// [`WorkerStore::issue_tickets`] for several orders, in one transaction where the backend can
    /// (the outbox relay hands it a round's `tickets.issue` messages); orders not confirmed
    /// get none. Returns how many tickets were new.
    async fn issue_tickets_of(
        &self,
        order_ids: &[String],
        sign: &checkout::SignTicket,
    ) -> StoreResult<u32> {
        let mut issued = 0;
        for order_id in order_ids {
            issued += self.issue_tickets(order_id, sign).await?;
        }
        Ok(issued)
    }

    /// Claims undelivered outbox rows for `lease_s` seconds (at-least-once delivery).
    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<checkout::OutboxMessage>>;

    /// Marks delivered outbox rows as published (one write for a round of deliveries).
    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()>;

    /// Schedules another delivery attempt of an outbox row.
    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()>;

    /// Seconds since the oldest undelivered outbox row was written (0 when none).
    async fn outbox_lag_s(&self) -> StoreResult<f64>;

    /// Deletes change rows more than `keep` versions behind their event's current version;
    /// returns how many went.
    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64>;
}

/// An idempotency record to insert with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub account_id: String,
    pub key: String,
    pub request_digest: String,
    pub response: StoredResponse,
}

/// The outbox payload announcing a new hold.
pub fn hold_created_payload(event_id: &str, hold: &boxoffice_domain::decide::NewHold) -> String {
    serde_json::json!({
        "eventId": event_id,
        "holdId": hold.hold_id,
        "accountId": hold.account_id,
        "seatIds": hold.seats.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        "tierId": hold.tier_id,
        "quantity": hold.quantity,
    })
    .to_string()
}

/// The outbox payload announcing that a hold ended (`hold.released`, `hold.expired`).
/// What a stored idempotency record answers a request with `request_digest`: its response
/// when the digests match, a key reuse when they do not.
pub fn stored_answer_of(
    stored_digest: &str,
    request_digest: &str,
    status: i64,
    body: Vec<u8>,
) -> Idempotent {
    if stored_digest == request_digest {
        Idempotent::Replayed(StoredResponse {
            status: u16::try_from(status).unwrap_or(500),
            body,
        })
    } else {
        Idempotent::KeyReusedWithOtherRequest
    }
}

pub fn hold_ended_payload(
    event_id: &str,
    hold_id: &str,
    account_id: &str,
    status: HoldStatus,
) -> String {
    serde_json::json!({
        "eventId": event_id,
        "holdId": hold_id,
        "accountId": account_id,
        "status": status.as_str(),
    })
    .to_string()
}

/// Serializes a hold's seats for its JSON column.
pub fn held_seats_json(seats: &[(String, i64)]) -> String {
    let seats: Vec<HeldSeat> = seats
        .iter()
        .map(|(seat_id, price_minor)| HeldSeat {
            seat_id: seat_id.clone(),
            price_minor: *price_minor,
        })
        .collect();
    serde_json::to_string(&seats).unwrap_or_else(|_| "[]".into())
}

pub fn parse_held_seats(raw: &str) -> StoreResult<Vec<HeldSeat>> {
    serde_json::from_str(raw).map_err(|e| StoreError::Internal(format!("hold seats column: {e}")))
}

/// The columns `load_inventory` reads per order, in this order.
pub type OrderColumns = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    i64,
    i64,
    i64,
);

/// The SQL (without placeholders' dialect: `{p}` is the event id parameter) that reads
/// [`OrderColumns`] for one event.
pub const ORDER_RECORDS_SQL: &str =
    "SELECT o.order_id, o.hold_id, o.account_id, o.status, p.status, o.seats,
        o.tier_id, CAST(o.quantity AS BIGINT),
        (SELECT count(*) FROM ticket t WHERE t.order_id = o.order_id AND t.status <> 'VOIDED'),
        CASE WHEN o.status = 'CANCELLED' AND p.status = 'CAPTURED'
             THEN (SELECT count(*) FROM outbox b
                    WHERE b.topic = 'refund.due' AND CAST(b.payload AS TEXT) LIKE '%' || p.operation_id || '%')
             ELSE 0 END,
        p.amount_minor
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = {p} ORDER BY o.order_id";

/// The SQL (`{p}` is the event id parameter) that reads [`TicketColumns`] for one event.
pub const TICKET_RECORDS_SQL: &str =
    "SELECT t.ticket_id, t.order_id, t.seat_id, t.status, t.exchange_id, x.status, t.transfer_id,
        t.refund_id
   FROM ticket t LEFT JOIN exchange x ON x.exchange_id = t.exchange_id
  WHERE t.event_id = {p} ORDER BY t.ticket_id";

/// The columns `load_inventory` reads per ticket, in this order.
pub type TicketColumns = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

pub fn ticket_record(columns: TicketColumns) -> boxoffice_domain::inventory::TicketRecord {
    let (
        ticket_id,
        order_id,
        seat_id,
        status,
        exchange_id,
        exchange_status,
        transfer_id,
        refund_id,
    ) = columns;
    boxoffice_domain::inventory::TicketRecord {
        ticket_id,
        order_id,
        seat_id,
        status,
        exchange_id,
        exchange_status,
        transfer_id,
        refund_id,
    }
}

/// The SQL (`{p}` is the event id parameter) that reads [`ExchangeColumns`] of the exchanges
/// that give up tickets of one event.
pub const EXCHANGE_RECORDS_SQL: &str = "SELECT x.exchange_id, x.status, x.ticket_ids, h.status
   FROM exchange x JOIN hold h ON h.hold_id = x.new_hold_id
  WHERE x.from_event_id = {p} ORDER BY x.exchange_id";

/// The SQL (`{p}` is the event id parameter) that reads an event's waiting list for
/// `load_inventory`: id, account, status, offer hold.
pub const WAITLIST_RECORDS_SQL: &str = "SELECT waitlist_id, account_id, status, offer_hold_id FROM waitlist WHERE event_id = {p} ORDER BY seq";

pub fn waitlist_record(
    (waitlist_id, account_id, status, offer_hold_id): (String, String, String, String),
) -> boxoffice_domain::inventory::WaitlistRecord {
    boxoffice_domain::inventory::WaitlistRecord {
        waitlist_id,
        account_id,
        status,
        offer_hold_id,
    }
}

/// The columns `load_inventory` reads per exchange: id, status, ticket ids (JSON), new hold's
/// status.
pub type ExchangeColumns = (String, String, String, String);

pub fn exchange_record(
    columns: ExchangeColumns,
) -> StoreResult<boxoffice_domain::inventory::ExchangeRecord> {
    let (exchange_id, status, ticket_ids, hold_status) = columns;
    Ok(boxoffice_domain::inventory::ExchangeRecord {
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange {exchange_id} ticket ids: {e}")))?,
        new_hold_status: parse_hold_status(&hold_status)?,
        exchange_id,
        status,
    })
}

/// An order row as `load_inventory` reads it.
pub fn order_record(
    columns: OrderColumns,
) -> StoreResult<boxoffice_domain::inventory::OrderRecord> {
    let (
        order_id,
        hold_id,
        account_id,
        status,
        payment_status,
        seats,
        tier_id,
        quantity,
        live_tickets,
        refunds,
        paid_minor,
    ) = columns;
    let status = boxoffice_domain::order::OrderStatus::parse(&status)
        .ok_or_else(|| StoreError::Internal(format!("order {order_id} has status {status:?}")))?;
    let payment_status = boxoffice_domain::order::PaymentStatus::parse(&payment_status)
        .ok_or_else(|| {
            StoreError::Internal(format!(
                "order {order_id} has payment status {payment_status:?}"
            ))
        })?;
    Ok(boxoffice_domain::inventory::OrderRecord {
        seat_ids: parse_held_seats(&seats)?
            .into_iter()
            .map(|s| s.seat_id)
            .collect(),
        order_id,
        hold_id,
        account_id,
        status,
        payment_status,
        tier_id,
        quantity: u32::try_from(quantity).unwrap_or(0),
        live_tickets: u32::try_from(live_tickets).unwrap_or(0),
        refund_recorded: refunds > 0,
        paid_minor,
    })
}

pub fn parse_hold_status(raw: &str) -> StoreResult<HoldStatus> {
    HoldStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("unknown hold status {raw:?}")))
}
