//! One writer per event: the task that owns the event's engine
//! (`boxoffice_domain::engine::EventEngine`) and through which every hold, release,
//! checkout start, checkout payment verdict, compensation and exchange into the event passes.
//!
//! What to decide, when to commit, what to answer and what to decide again is the domain's
//! pipeline ([`boxoffice_domain::pipeline::Pipeline`], the same state machine the
//! simulation drives): it takes whatever is queued (up to its `GROUP_COMMANDS_MAX`), decides
//! it in memory in arrival order, and asks for the group to be written; this file does the
//! IO it asks for. The group's effects go to the store ([`EngineStore::apply_group`], one
//! transaction of conditional, counted writes). While that group commits, the next is
//! decided on top of it: up to `GROUPS_IN_FLIGHT_MAX` groups are in flight, each starting
//! its transaction after its predecessor's locks and recording its sequence after its
//! predecessor's commit (`GroupTurn`). A request is answered only after its own group
//! committed.
//!
//! Architecture invariant: no answer before its commit, and no group after a failed one is
//! answered as decided. Each group carries the next writer sequence number and the store
//! refuses a group whose predecessor did not commit; when a group fails the pipeline waits
//! for the rest of it, loads the event again and decides every uncommitted request anew
//! (the attempt limits are the pipeline's), before anything newer.
//!
//! The writer also expires its event's holds: when the earliest deadline passes it runs a
//! group without commands, in which the engine ends every `HELD` hold past its deadline.
//!
//! A writer with no command for `idle_unload` (`boxoffice serve --writer-idle-unload-s`)
//! and nothing left to do on its own (no hold in `HELD`, no waiting-list entry) unloads: it
//! closes its lanes, hands the commands that came in meanwhile to a new writer, leaves the
//! writer map, hands the event's lease back and ends, dropping its engine. The next command
//! starts a new writer, which takes the lease and loads again. Loads (a failover's reloads
//! of every event at once, a sale opening many) take turns: at most `loads_max` at once per
//! node.
//!
//! Changes made elsewhere (the store's own settlement, the sweeper, an exchange out of the
//! event decided by another event's writer, another node)
//! reach the engine through the seat-map change feed: when a commit shows versions the
//! writer did not write, when a checkout or release named a hold the engine does not keep
//! (asked again after the catch-up), or every [`CATCH_UP_INTERVAL_MS`], the writer reads the
//! change rows it has not seen and the current rows of what they name (`refresh`), between
//! groups.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest};
use boxoffice_domain::engine::{
    AccessDecision, AccessRedeem, CancelDecision, CancelRequest, CheckoutDecision, CheckoutRequest,
    Command, CompensationDecision, CompensationRequest, Decision, Effects, EventEngine,
    ExchangeDecision, ExchangeGivesUp, ExchangeRequest, PaymentDecision, PaymentOutcome,
    PaymentRequest, RefundDecision, RefundRequest, ReleaseDecision, TransferDecision,
    TransferRequest, WaitlistDecision, WaitlistJoin,
};
use boxoffice_domain::hold::HoldStatus;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_domain::pipeline::{
    Action, Clock, GROUP_COMMANDS_MAX, GroupKind, Lane, Pipeline, Refusal,
};
use boxoffice_store::checkout::{
    CheckoutBegun, CheckoutStart, OrderView, PaymentOperation, ProviderVerdict, RenderOrder,
    Settled,
};
use boxoffice_store::engine::{
    CheckoutWrite, CommandWrite, CompensationWrite, EngineStore, ExchangeWrite, GroupCommitted,
    GroupTurn, GroupWrite, SettleWrite, checkout_refusal, refused_checkout, started_operation,
};
use boxoffice_store::exchange::{
    ExchangeBegun, ExchangeRefused, ExchangeStart, ExchangeView, RenderExchange, Surrender,
};
use boxoffice_store::refund::RefundWrite;
use boxoffice_store::transfer::TransferWrite;
use boxoffice_store::{
    EventRecord, HoldView, NewRecord, ReleaseOutcome, Store, StoreError, StoreResult,
};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Commands queued per event and lane before new ones are refused with 429 (besides the
/// group's worth the pipeline takes in ahead of deciding it).
pub const QUEUE_COMMANDS_MAX: usize = 10_000;
/// How often the writer reads the change feed for changes made elsewhere while it is busy.
pub const CATCH_UP_INTERVAL_MS: u64 = 100;
/// Change rows read per catch-up step.
const CATCH_UP_ROWS_MAX: u32 = 1_000;
/// How long a writer waits for its event's lease and engine load. The requests that arrive
/// meanwhile wait in its lanes for that one load; past this they are answered
/// `StoreError::Unavailable` (503 with `Retry-After`: every write carries its idempotency key,
/// so sending it again is safe) and the next command loads again.
pub const ENGINE_LOAD_WAIT_MS: u64 = 10_000;
/// How long a writer waits for a command before it unloads, unless configured
/// (`boxoffice serve --writer-idle-unload-s`): long enough that a sale's writers stay
/// loaded between fans, short enough that a node serving thousands of small events keeps
/// only the ones selling now.
pub const WRITER_IDLE_UNLOAD_S_DEFAULT: u64 = 300;
/// Engine loads one node runs at once, unless configured (`boxoffice serve
/// --writer-loads-max`): fewer than the writers' pool has connections
/// (`WRITER_POOL_CONNECTIONS_MAX` = 6 on PostgreSQL), so that the groups of the events
/// already loaded still find one while a failover reloads every other event.
pub const WRITER_LOADS_MAX_DEFAULT: usize = 4;

/// How long writers stay loaded without commands and how many may load at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterLimits {
    /// A writer with no command for this long unloads; 0: never.
    pub idle_unload_s: u64,
    /// Engine loads at once on this node (at least 1).
    pub loads_max: usize,
}

impl Default for WriterLimits {
    fn default() -> Self {
        Self {
            idle_unload_s: WRITER_IDLE_UNLOAD_S_DEFAULT,
            loads_max: WRITER_LOADS_MAX_DEFAULT,
        }
    }
}

/// Renders the stored response of a decided hold (the HTTP layer's choice of bytes).
pub type HoldRenderer = Arc<dyn Fn(&EventRecord, &HoldOutcome) -> StoredResponse + Send + Sync>;

/// Why a request was not decided.
#[derive(Debug)]
pub enum SubmitError {
    /// The event's queue is full: shed load (429).
    Overloaded,
    Store(StoreError),
}

/// What a command's request gets.
#[derive(Debug)]
enum Answer {
    Hold(Idempotent),
    Release(ReleaseOutcome),
    Checkout(CheckoutBegun),
    /// The engine did not keep a `HELD` hold asked to be released (made elsewhere since it
    /// last caught up): asked again after the catch-up.
    ReleaseNotKept(Box<HoldView>),
    /// The engine did not keep the hold of a checkout: it was made or changed elsewhere since
    /// the engine last caught up (the writer catches up before its next group), or it is no
    /// longer live.
    CheckoutNotKept,
    Payment(Option<Settled>),
    /// Whether the sale was given back (`false`: not confirmed, or a ticket of it was used
    /// at the door).
    Compensated(bool),
    /// The engine did not keep the order's hold: asked again after the catch-up.
    CompensationNotKept,
    Exchange(ExchangeBegun),
    /// The engine did not keep the old order's hold (a same-event exchange): asked again
    /// after the catch-up.
    ExchangeNotKept,
    Transfer(TransferAnswer),
    Refund(RefundAnswer),
    Waitlist(WaitlistAnswer),
    Cancel(CancelDecision),
    Access(AccessDecision),
}

/// What a refund got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundAnswer {
    /// Recorded `PENDING`: the tickets are void and their seats back on sale.
    Refunded,
    /// The order, its payment or a ticket changed since they were read (a check-in, an
    /// exchange, a transfer, another refund): why.
    Conflict(String),
    /// The engine did not keep the order's hold confirmed: asked again after a catch-up.
    NotKept,
}

/// What a waiting-list join or leave got: the engine's decision, and for a join offered
/// seats at once (freed seats were waiting), its hold and deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistAnswer {
    pub decision: WaitlistDecision,
    pub offered: Option<(String, OffsetDateTime)>,
}

/// What an accepted transfer offer got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferAnswer {
    /// Moved: the old tickets are void and the receiver's order exists.
    Accepted,
    /// Transfers of the event have closed.
    Closed,
    /// The receiver would hold more than the event's purchase limit.
    PurchaseLimit,
    /// The offer, the order or a ticket changed since they were read (a check-in, an
    /// exchange, a decline or lapse): why.
    Conflict(String),
    /// The engine did not keep the giver's hold confirmed: asked again after a catch-up.
    NotKept,
}

/// What a checkout's payment verdict needs besides its command: the operation as started,
/// the provider's verdict, the pending order, and where its answer is stored.
pub struct SettleContext {
    pub operation: PaymentOperation,
    pub verdict: ProviderVerdict,
    pub order: OrderView,
    /// Where the checkout's answer is stored, when the verdict came with the checkout request
    /// (a webhook's has none).
    pub scope: Option<IdempotencyScope>,
    pub render: &'static RenderOrder,
}

impl std::fmt::Debug for SettleContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettleContext")
            .field("operation_id", &self.operation.operation_id)
            .field("verdict", &self.verdict)
            .finish_non_exhaustive()
    }
}

impl SettleContext {
    /// The order after the verdict, as the group writes it.
    fn settled_order(&self, cancelled: Option<&str>, now: OffsetDateTime) -> OrderView {
        let mut order = self.order.clone();
        order.status = if cancelled.is_some() {
            OrderStatus::Cancelled
        } else {
            OrderStatus::Confirmed
        };
        order.payment_status = self.verdict.payment_status();
        order.cancel_reason = cancelled.map(str::to_owned);
        order.payment_failure_code = match &self.verdict {
            ProviderVerdict::Failed { reason, .. } => Some(reason.clone()),
            _ => None,
        };
        order.next_action_url = None;
        order.updated_at = now;
        order
    }
}

/// What a checkout start needs besides its command: the request, the hold as the route read
/// it (its seats and prices become the order's), and how its answer is stored.
struct CheckoutContext {
    start: CheckoutStart,
    hold: HoldView,
    render: &'static RenderOrder,
    /// Set when the group starts it: the hold is an exchange's, whose operation charges the
    /// exchange's amount due (read back from the store); any other charges the hold's total.
    exchange: bool,
}

/// What a compensation needs besides its command: the payment operation as read (its undo
/// is chosen from its status) and the order's cancel reason.
struct CompensateContext {
    operation: PaymentOperation,
    reason: String,
}

/// What an exchange needs besides its command: the request, the tickets the route picked
/// from the order it read, and how its answer is rendered.
struct ExchangeContext {
    start: ExchangeStart,
    gone: Surrender,
    order: OrderView,
    render: &'static RenderExchange,
    /// The exchange and the order as the group writes them (set when granted).
    granted: Option<(ExchangeView, OrderView)>,
}

/// The engine's command for an exchange whose tickets `gone` were picked from `order`.
fn exchange_command(start: &ExchangeStart, gone: &Surrender, order: &OrderView) -> Command {
    let same_event = start.to_event.event_id == order.event_id;
    Command::Exchange(ExchangeRequest {
        account_id: order.account_id.clone(),
        exchange_id: start.exchange_id.clone(),
        new_hold_id: start.new_hold_id.clone(),
        closes_at: boxoffice_store::exchange::closes_at(&start.from_event),
        starts_at: start.to_event.starts_at,
        gives_up: same_event.then(|| ExchangeGivesUp {
            hold_id: order.hold_id.clone(),
            seat_ids: gone.seat_ids.clone(),
            tier: gone.tier.clone(),
        }),
        ticket_ids: gone.ticket_ids.clone(),
        takes: start.to.takes(),
        from_value_minor: gone.value_minor,
    })
}

/// A request on its way to the writer: its command, and what the writer keeps for it.
struct Job {
    command: Command,
    context: Context,
}

/// What the writer keeps for a request besides its command, while the pipeline has it.
struct Context {
    /// What an accepted transfer writes besides the engine's effect.
    transfer: Option<Box<TransferWrite>>,
    /// What a refund writes besides the engine's effect.
    refund: Option<Box<RefundWrite>>,
    checkout: Option<Box<CheckoutContext>>,
    settle: Option<Box<SettleContext>>,
    compensate: Option<Box<CompensateContext>>,
    exchange: Option<Box<ExchangeContext>>,
    reply: oneshot::Sender<StoreResult<Answer>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// The store's error, the same for each request of a group that failed as a whole.
#[derive(Debug)]
struct Refused(StoreError);

impl Clone for Refused {
    fn clone(&self) -> Self {
        Self(copy_of(&self.0))
    }
}

type WriterPipeline = Pipeline<Context, Refused>;
type Group = boxoffice_domain::pipeline::Group<Context>;

/// The event writers of this process: two queues (lanes) and one task per event, started on the
/// event's first command.
#[derive(Clone)]
pub struct EventWriters {
    store: Arc<dyn Store>,
    /// Where groups are loaded and written: the store itself, or a wrapper in tests that
    /// injects faults.
    engine_store: Arc<dyn EngineStore>,
    render: HoldRenderer,
    queues: Arc<Mutex<HashMap<String, Lanes>>>,
    /// Run the writers on the process's writer thread ([`super::threads::writers`]) rather than
    /// among the requests' tasks.
    own_thread: bool,
    /// The node's leases: when set, a writer writes its event only under the event's lease
    /// (its groups carry the lease's fence), and stops when another node holds it.
    cluster: Option<crate::runtime::cluster::Cluster>,
    /// Where writers report group latency and queue depth (the release controller reads it).
    meter: Option<Arc<crate::runtime::waitroom::HealthMeter>>,
    /// Where writers report the holds they commit and how each ended.
    ledger: Option<Arc<crate::runtime::ledger::HoldLedger>>,
    /// How long a writer waits for its lease and engine load ([`ENGINE_LOAD_WAIT_MS`]).
    load_wait: StdDuration,
    /// A writer with no command for this long unloads (`None`: never).
    idle_unload: Option<StdDuration>,
    /// Turns to load an engine: at most [`WriterLimits::loads_max`] loads at once.
    loads: Arc<tokio::sync::Semaphore>,
}

impl std::fmt::Debug for EventWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWriters").finish_non_exhaustive()
    }
}

impl EventWriters {
    pub fn new(store: Arc<dyn Store>, render: HoldRenderer) -> Self {
        let engine_store: Arc<dyn EngineStore> = store.clone();
        Self::with_engine_store(store, engine_store, render)
    }

    /// Writers that load and write their groups through `engine_store` (and read answers
    /// from `store`).
    pub fn with_engine_store(
        store: Arc<dyn Store>,
        engine_store: Arc<dyn EngineStore>,
        render: HoldRenderer,
    ) -> Self {
        Self {
            store,
            engine_store,
            render,
            queues: Arc::default(),
            own_thread: false,
            cluster: None,
            meter: None,
            ledger: None,
            load_wait: StdDuration::from_millis(ENGINE_LOAD_WAIT_MS),
            idle_unload: None,
            loads: Arc::new(tokio::sync::Semaphore::new(WRITER_LOADS_MAX_DEFAULT)),
        }
    }

    /// The same writers, unloading after `limits.idle_unload_s` without a command and
    /// loading at most `limits.loads_max` engines at once.
    pub fn with_limits(mut self, limits: WriterLimits) -> Self {
        self.idle_unload =
            (limits.idle_unload_s > 0).then(|| StdDuration::from_secs(limits.idle_unload_s));
        self.loads = Arc::new(tokio::sync::Semaphore::new(limits.loads_max.max(1)));
        self
    }

    /// The same writers, unloading after `idle` without a command (tests: less than a
    /// second); `None`: never.
    pub fn with_idle_unload(mut self, idle: Option<StdDuration>) -> Self {
        self.idle_unload = idle;
        self
    }

    /// The events whose writer runs on this node now (loaded, loading, or unloading: a writer
    /// that unloads leaves the map after it handed its lease back).
    pub fn running(&self) -> Vec<String> {
        let queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        queues.keys().cloned().collect()
    }

    /// The same writers, waiting at most `wait` for a lease and an engine load (tests).
    pub fn with_load_wait(mut self, wait: StdDuration) -> Self {
        self.load_wait = wait;
        self
    }

    /// The same writers, reporting their group latency and queue depth to `meter`.
    pub fn with_meter(mut self, meter: Arc<crate::runtime::waitroom::HealthMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// The same writers, each telling `ledger` of the holds it commits.
    pub fn with_ledger(mut self, ledger: Arc<crate::runtime::ledger::HoldLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The same writers, each writing its event only under the event's lease.
    pub fn with_cluster(mut self, cluster: crate::runtime::cluster::Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The same writers, run on a thread of their own (see [`crate::runtime::threads`]). Their
    /// `engine_store` should open its connections there: a pool that connects lazily.
    pub fn on_own_thread(mut self) -> Self {
        self.own_thread = true;
        self
    }

    /// Decides `request` on `event`'s writer and waits for its answer, which comes after the
    /// commit.
    pub async fn hold(
        &self,
        event: Arc<EventRecord>,
        request: HoldRequest,
    ) -> Result<Idempotent, SubmitError> {
        match self
            .submit(event, Command::Hold(request), None, None)
            .await?
        {
            Answer::Hold(answer) => Ok(answer),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a hold was answered as another command".into(),
            ))),
        }
    }

    /// Releases the account's hold on `event`'s writer.
    pub async fn release(
        &self,
        event: Arc<EventRecord>,
        account_id: &str,
        hold_id: &str,
    ) -> Result<ReleaseOutcome, SubmitError> {
        let command = Command::Release {
            account_id: account_id.to_owned(),
            hold_id: hold_id.to_owned(),
        };
        // A `HELD` hold the engine does not keep is asked about once more, after the catch-up
        // its first answer makes the writer do; still not kept, it has ended (the engine keeps
        // every live hold it has caught up with). The store's own release is never asked.
        for attempt in 0..2 {
            match self
                .submit(event.clone(), command.clone(), None, None)
                .await?
            {
                Answer::Release(outcome) => return Ok(outcome),
                Answer::ReleaseNotKept(_) if attempt == 0 => {}
                Answer::ReleaseNotKept(hold) => return Ok(ReleaseOutcome::AlreadyEnded(*hold)),
                _ => break,
            }
        }
        Err(SubmitError::Store(StoreError::Internal(
            "a release was answered as another command".into(),
        )))
    }

    /// Starts the checkout of `hold` (read by the caller: the account's, on `event`) on the
    /// event's writer: the hold moves to `PAYMENT_PENDING`, the order and its payment
    /// operation are created, and the answer is stored under the request's key, in one
    /// group. A key used before is answered from its stored answer when the engine refuses.
    pub async fn checkout(
        &self,
        event: Arc<EventRecord>,
        start: CheckoutStart,
        hold: HoldView,
        render: &'static RenderOrder,
    ) -> Result<CheckoutBegun, SubmitError> {
        let command = Command::Checkout(CheckoutRequest {
            account_id: start.scope.account_id.clone(),
            hold_id: start.hold_id.clone(),
            order_id: start.order_id.clone(),
            grace_s: event.payment_grace_s,
        });
        // A hold the engine does not keep is asked about once more, after the catch-up that
        // its first answer makes the writer do: a hold made or changed elsewhere is then
        // kept and decided; one still not kept is not live (the engine keeps every live hold
        // it has caught up with). The store's own checkout is never asked.
        for attempt in 0..2 {
            let context = CheckoutContext {
                start: start.clone(),
                hold: hold.clone(),
                render,
                exchange: true,
            };
            match self
                .submit(
                    event.clone(),
                    command.clone(),
                    Some(Box::new(context)),
                    None,
                )
                .await?
            {
                Answer::Checkout(begun) => return Ok(begun),
                Answer::CheckoutNotKept if attempt == 0 => {}
                Answer::CheckoutNotKept => break,
                _ => {
                    return Err(SubmitError::Store(StoreError::Internal(
                        "a checkout was answered as another command".into(),
                    )));
                }
            }
        }
        metrics::counter!("boxoffice_writer_checkouts_not_kept_total").increment(1);
        refused_checkout(self.store.as_ref(), &start, CheckoutBegun::HoldExpired)
            .await
            .map_err(SubmitError::Store)
    }

    /// Applies a checkout's payment verdict on the event's writer: sold (or cancelled when
    /// the hold lapsed or the limit is exceeded) or cancelled for a decline, with the
    /// operation, the order, the outbox messages and the stored answer in the same group.
    /// Only a verdict that sells or cancels a pending order (`Authorized`, `Captured`,
    /// `Failed`, `Voided` of an operation not settled yet: `AUTHORIZING`, `UNKNOWN`,
    /// `REQUIRES_ACTION`) belongs here; a hold the engine does not keep in checkout goes to
    /// the store's own settlement.
    pub async fn settle(
        &self,
        event: Arc<EventRecord>,
        context: SettleContext,
    ) -> Result<Option<Settled>, SubmitError> {
        let outcome = match context.verdict.payment_status() {
            PaymentStatus::Authorized | PaymentStatus::Captured => PaymentOutcome::Paid,
            PaymentStatus::Failed => PaymentOutcome::Failed,
            PaymentStatus::Voided => PaymentOutcome::Voided,
            other => {
                return Err(SubmitError::Store(StoreError::Internal(format!(
                    "a {} verdict is not the writer's",
                    other.as_str()
                ))));
            }
        };
        let command = Command::Payment(PaymentRequest {
            account_id: context.order.account_id.clone(),
            hold_id: context.order.hold_id.clone(),
            outcome,
        });
        match self
            .submit(event, command, None, Some(Box::new(context)))
            .await?
        {
            Answer::Payment(settled) => Ok(settled),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a payment verdict was answered as another command".into(),
            ))),
        }
    }

    /// Gives a confirmed order's sale back on the event's writer after its capture was
    /// refused for good (`operation`, as read, is its payment): the order cancelled, its seats
    /// and units back on sale, its tickets voided, the undo of the payment queued, in one
    /// group. `false`: the order is not confirmed, a ticket of it was used at the door, or its operation
    /// moved since it was read (the relay reads it again).
    pub async fn compensate(
        &self,
        event: Arc<EventRecord>,
        order: &OrderView,
        operation: PaymentOperation,
        reason: &str,
    ) -> Result<bool, SubmitError> {
        let command = Command::Compensate(CompensationRequest {
            order_id: order.order_id.clone(),
            hold_id: order.hold_id.clone(),
        });
        // A hold the engine does not keep is asked about once more, after a catch-up; still
        // not kept, it is not confirmed (the engine keeps every confirmed hold it has caught
        // up with).
        for attempt in 0..2 {
            let context = Box::new(CompensateContext {
                operation: operation.clone(),
                reason: reason.to_owned(),
            });
            let job = self.job(command.clone(), |job| {
                job.context.compensate = Some(context)
            });
            match self.submit_job(event.clone(), job).await? {
                Answer::Compensated(given_back) => return Ok(given_back),
                Answer::CompensationNotKept if attempt == 0 => {}
                Answer::CompensationNotKept => return Ok(false),
                _ => break,
            }
        }
        Err(SubmitError::Store(StoreError::Internal(
            "a compensation was answered as another command".into(),
        )))
    }

    /// Decides an exchange into `event` (its target) on the event's writer: `gone` are the
    /// tickets picked from `order` (read by the caller: the account's). The new seats are
    /// taken, the old tickets marked or swapped, and the answer stored under the request's
    /// key, in one group; the group refuses it alone if the order or the tickets changed
    /// since they were read.
    pub async fn exchange(
        &self,
        event: Arc<EventRecord>,
        start: ExchangeStart,
        gone: Surrender,
        order: OrderView,
        render: &'static RenderExchange,
    ) -> Result<ExchangeBegun, SubmitError> {
        let command = exchange_command(&start, &gone, &order);
        // A same-event exchange whose old hold the engine does not keep is asked about once
        // more, after a catch-up; still not kept, the order is no longer confirmed.
        for attempt in 0..2 {
            let context = Box::new(ExchangeContext {
                start: start.clone(),
                gone: gone.clone(),
                order: order.clone(),
                render,
                granted: None,
            });
            let job = self.job(command.clone(), |job| job.context.exchange = Some(context));
            match self.submit_job(event.clone(), job).await? {
                Answer::Exchange(begun) => return Ok(begun),
                Answer::ExchangeNotKept if attempt == 0 => {}
                Answer::ExchangeNotKept => {
                    return Ok(ExchangeBegun::Refused(ExchangeRefused::Conflict(format!(
                        "order {} is no longer confirmed",
                        order.order_id
                    ))));
                }
                _ => break,
            }
        }
        Err(SubmitError::Store(StoreError::Internal(
            "an exchange was answered as another command".into(),
        )))
    }

    /// Accepts a transfer offer on the event's writer: `request` is the engine's command,
    /// `write` what the store writes besides (read by the caller: the offer, the giver's order
    /// and the tickets). The seats move to the receiver, the old tickets are voided and the
    /// new order written in one group; the group refuses it alone if the offer, the order or
    /// the tickets changed since they were read.
    pub async fn transfer(
        &self,
        event: Arc<EventRecord>,
        request: TransferRequest,
        write: TransferWrite,
    ) -> Result<TransferAnswer, SubmitError> {
        let command = Command::Transfer(request);
        // A giver's hold the engine does not keep is asked about once more, after a catch-up.
        for attempt in 0..2 {
            let context = Box::new(write.clone());
            let job = self.job(command.clone(), |job| job.context.transfer = Some(context));
            match self.submit_job(event.clone(), job).await? {
                Answer::Transfer(TransferAnswer::NotKept) if attempt == 0 => {}
                Answer::Transfer(TransferAnswer::NotKept) => {
                    return Ok(TransferAnswer::Conflict(format!(
                        "order {} is no longer confirmed",
                        write.transfer.order_id
                    )));
                }
                Answer::Transfer(answer) => return Ok(answer),
                _ => break,
            }
        }
        Err(SubmitError::Store(StoreError::Internal(
            "a transfer was answered as another command".into(),
        )))
    }

    /// Refunds tickets on the event's writer: `request` is the engine's command, `write` what
    /// the store writes besides (read by the caller: the order, its payment, the tickets). The
    /// tickets are voided, their seats freed and the refund recorded `PENDING` in one group;
    /// the group refuses it alone if the order or a ticket changed since they were read.
    pub async fn refund(
        &self,
        event: Arc<EventRecord>,
        request: RefundRequest,
        write: RefundWrite,
    ) -> Result<RefundAnswer, SubmitError> {
        let command = Command::Refund(request);
        // An order's hold the engine does not keep is asked about once more, after a catch-up.
        for attempt in 0..2 {
            let context = Box::new(write.clone());
            let job = self.job(command.clone(), |job| job.context.refund = Some(context));
            match self.submit_job(event.clone(), job).await? {
                Answer::Refund(RefundAnswer::NotKept) if attempt == 0 => {}
                Answer::Refund(RefundAnswer::NotKept) => {
                    return Ok(RefundAnswer::Conflict(format!(
                        "order {} is no longer confirmed",
                        write.refund.order_id
                    )));
                }
                Answer::Refund(answer) => return Ok(answer),
                _ => break,
            }
        }
        Err(SubmitError::Store(StoreError::Internal(
            "a refund was answered as another command".into(),
        )))
    }

    /// Cancels the event on its writer: from the group that commits it on, nothing sells, every
    /// live hold has ended and every ticket is void (`engine::cancel`); the refunds follow
    /// (`boxoffice_workers::cancellation`).
    pub async fn cancel(
        &self,
        event: Arc<EventRecord>,
        request: CancelRequest,
    ) -> Result<CancelDecision, SubmitError> {
        let job = self.job(Command::Cancel(request), |_| {});
        match self.submit_job(event, job).await? {
            Answer::Cancel(decision) => Ok(decision),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a cancellation was answered as another command".into(),
            ))),
        }
    }

    /// Redeems an access code for a presale lane on the event's writer: two accounts racing a
    /// single-use code get one `Redeemed` (`engine::access`).
    pub async fn redeem_access(
        &self,
        event: Arc<EventRecord>,
        request: AccessRedeem,
    ) -> Result<AccessDecision, SubmitError> {
        let job = self.job(Command::RedeemAccess(request), |_| {});
        match self.submit_job(event, job).await? {
            Answer::Access(decision) => Ok(decision),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a redemption was answered as another command".into(),
            ))),
        }
    }

    /// Puts `join` on the event's waiting list (or answers the account's live entry); when
    /// freed seats wait already, the group offers them at once.
    pub async fn waitlist_join(
        &self,
        event: Arc<EventRecord>,
        join: WaitlistJoin,
    ) -> Result<WaitlistAnswer, SubmitError> {
        let job = self.job(Command::WaitlistJoin(join), |_| {});
        match self.submit_job(event, job).await? {
            Answer::Waitlist(answer) => Ok(answer),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a waiting-list join was answered as another command".into(),
            ))),
        }
    }

    /// Takes the account's waiting entry off the event's list.
    pub async fn waitlist_leave(
        &self,
        event: Arc<EventRecord>,
        account_id: String,
        waitlist_id: String,
    ) -> Result<WaitlistAnswer, SubmitError> {
        let command = Command::WaitlistLeave {
            account_id,
            waitlist_id,
        };
        let job = self.job(command, |_| {});
        match self.submit_job(event, job).await? {
            Answer::Waitlist(answer) => Ok(answer),
            _ => Err(SubmitError::Store(StoreError::Internal(
                "a waiting-list leave was answered as another command".into(),
            ))),
        }
    }

    async fn submit(
        &self,
        event: Arc<EventRecord>,
        command: Command,
        checkout: Option<Box<CheckoutContext>>,
        settle: Option<Box<SettleContext>>,
    ) -> Result<Answer, SubmitError> {
        let job = self.job(command, |job| {
            job.context.checkout = checkout;
            job.context.settle = settle;
        });
        self.submit_job(event, job).await
    }

    /// A job for `command`, with `context` filled in.
    fn job(
        &self,
        command: Command,
        context: impl FnOnce(&mut Job),
    ) -> (Job, oneshot::Receiver<StoreResult<Answer>>) {
        let (reply, answer) = oneshot::channel();
        let mut job = Job {
            command,
            context: Context {
                checkout: None,
                settle: None,
                compensate: None,
                exchange: None,
                transfer: None,
                refund: None,
                reply,
            },
        };
        context(&mut job);
        (job, answer)
    }

    async fn submit_job(
        &self,
        event: Arc<EventRecord>,
        (job, answer): (Job, oneshot::Receiver<StoreResult<Answer>>),
    ) -> Result<Answer, SubmitError> {
        let mut job = job;
        // A writer that just stopped (its event's lease went to another node, or it unloaded
        // idle) is replaced once: the new one takes the lease again or answers who holds it.
        for attempt in 0..2 {
            let lanes = self.queue_for(&event);
            // New holds wait in their own lane: what completes a sale (a checkout, a payment
            // verdict, a release) is never shed or delayed behind a crowd asking for seats.
            let lane = match Lane::of(&job.command) {
                Lane::Holds => &lanes.holds,
                Lane::Sale => &lanes.sale,
            };
            match lane.try_send(job) {
                Ok(()) => break,
                Err(mpsc::error::TrySendError::Full(_)) => return Err(SubmitError::Overloaded),
                Err(mpsc::error::TrySendError::Closed(returned)) if attempt == 0 => {
                    job = returned;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    return Err(SubmitError::Store(StoreError::Unavailable(
                        "event writer stopped".into(),
                    )));
                }
            }
        }
        match answer.await {
            Ok(result) => result.map_err(SubmitError::Store),
            Err(_) => Err(SubmitError::Store(StoreError::Internal(
                "event writer dropped a request".into(),
            ))),
        }
    }

    fn queue_for(&self, event: &Arc<EventRecord>) -> Lanes {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(lanes) = queues.get(&event.event_id)
            && !lanes.holds.is_closed()
            && !lanes.sale.is_closed()
        {
            return lanes.clone();
        }
        let (sale, sale_rx) = mpsc::channel(QUEUE_COMMANDS_MAX);
        let (holds, holds_rx) = mpsc::channel(QUEUE_COMMANDS_MAX);
        let lanes = Lanes { sale, holds };
        queues.insert(event.event_id.clone(), lanes.clone());
        metrics::gauge!("boxoffice_writers_running").set(queues.len() as f64);
        let mut writer = Writer::new(
            self.store.clone(),
            self.engine_store.clone(),
            self.render.clone(),
            event.clone(),
        );
        writer.cluster = self.cluster.clone();
        writer.meter = self.meter.clone();
        writer.ledger = self.ledger.clone();
        writer.load_wait = self.load_wait;
        writer.idle_unload = self.idle_unload;
        writer.loads = self.loads.clone();
        // Only a writer that may unload needs the map (to hand over what arrives as it
        // closes); one that never does must not keep its own lanes open through it.
        writer.respawn = self.idle_unload.map(|_| self.clone());
        if self.own_thread {
            crate::runtime::threads::writers().spawn(writer.run(sale_rx, holds_rx));
        } else {
            tokio::spawn(writer.run(sale_rx, holds_rx));
        }
        lanes
    }
}

impl EventWriters {
    /// Queues `job`, which came in as its writer unloaded, on the event's new writer.
    fn hand_over(&self, event: &Arc<EventRecord>, job: Job) {
        let lanes = self.queue_for(event);
        let lane = match Lane::of(&job.command) {
            Lane::Holds => &lanes.holds,
            Lane::Sale => &lanes.sale,
        };
        if let Err(error) = lane.try_send(job) {
            let job = match error {
                mpsc::error::TrySendError::Full(job) | mpsc::error::TrySendError::Closed(job) => {
                    job
                }
            };
            let _ = job
                .context
                .reply
                .send(Err(StoreError::Busy("the event's writer is full".into())));
        }
    }

    /// Removes `event_id`'s entry if its writer closed its lanes (a writer started since
    /// has open ones, and stays).
    fn forget_closed(&self, event_id: &str) {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if queues
            .get(event_id)
            .is_some_and(|lanes| lanes.sale.is_closed() || lanes.holds.is_closed())
        {
            queues.remove(event_id);
        }
        metrics::gauge!("boxoffice_writers_running").set(queues.len() as f64);
    }
}

/// An event writer's two queues, each of [`QUEUE_COMMANDS_MAX`]: checkouts, payment verdicts
/// and releases (taken first), and new holds.
#[derive(Clone)]
struct Lanes {
    sale: mpsc::Sender<Job>,
    holds: mpsc::Sender<Job>,
}

/// Moves what `lane` has queued into `incoming`, up to a group.
fn top_up(incoming: &mut Vec<Job>, lane: &mut mpsc::Receiver<Job>, room: usize) {
    while incoming.len() < room {
        match lane.try_recv() {
            Ok(job) => incoming.push(job),
            Err(_) => break,
        }
    }
}

/// The endpoint under which an event's holds store their idempotency records.
pub fn hold_endpoint(event_id: &str) -> String {
    boxoffice_store::engine::hold_endpoint(event_id)
}

/// A decided group on its way to the store.
struct Pending {
    /// The pipeline's group: its commands, decisions, effects and clock.
    group: Group,
    delivery: Delivery,
    writer_seq: u64,
    started: Instant,
    /// The group gave up because the group before it failed (set once finished).
    predecessor_failed: bool,
    /// What the group does to holds, for the ledger once committed.
    hold_changes: crate::runtime::ledger::HoldChanges,
}

/// What a committed group's answers need besides the group, kept while the pipeline
/// answers it ([`Action::Answer`]).
struct Delivery {
    /// The group's id, to pair it with its answer.
    id: u64,
    /// The answer of each decided hold, rendered before the commit.
    answers: Vec<Option<StoredResponse>>,
    /// Compensations the store refused alone (set once committed).
    compensations_refused: Vec<usize>,
    /// Exchanges the store refused alone (set once committed).
    exchanges_refused: Vec<usize>,
    /// Transfers the store refused alone (set once committed).
    transfers_refused: Vec<usize>,
    /// Refunds the store refused alone (set once committed).
    refunds_refused: Vec<usize>,
    /// Waiting-list offers the group made: entry id to (hold id, deadline).
    waitlist_offered: HashMap<String, (String, OffsetDateTime)>,
}

type Commit = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Pending, StoreResult<GroupCommitted>)> + Send>,
>;

/// How far a group of the pipeline has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Started,
    /// Holds every lock it needs but the `seatmap` row: the next group may start.
    Locked,
    Committed,
    Failed,
}

/// A group's turn: its predecessor's progress, and its own for its successor.
struct Turn {
    previous: Option<watch::Receiver<Stage>>,
    mine: watch::Sender<Stage>,
    /// Set when this group gave up because the group before it failed (or showed the engine
    /// wrong): its commands are not at fault, and the attempt does not count against them.
    predecessor_failed: std::sync::atomic::AtomicBool,
}

impl Turn {
    async fn previous_reached(&self, wanted: &[Stage]) -> bool {
        let Some(previous) = &self.previous else {
            return true;
        };
        let mut previous = previous.clone();
        match previous
            .wait_for(|stage| wanted.contains(stage) || *stage == Stage::Failed)
            .await
        {
            Ok(stage) if *stage != Stage::Failed => true,
            // Failed, or its future is gone without a verdict: treat it as failed.
            _ => {
                self.predecessor_failed
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                false
            }
        }
    }
}

#[async_trait::async_trait]
impl GroupTurn for Turn {
    async fn before_locks(&self) -> bool {
        self.previous_reached(&[Stage::Locked, Stage::Committed])
            .await
    }

    fn locks_taken(&self) {
        self.mine.send_replace(Stage::Locked);
    }

    async fn before_record(&self) -> bool {
        self.previous_reached(&[Stage::Committed]).await
    }
}

/// The store's clock as this process estimates it: from below, and within the round trip
/// that measured it.
#[derive(Debug, Clone, Copy)]
struct StoreClock {
    /// Store clock minus local clock, when last measured (the measurement's latency makes it
    /// an underestimate, which is the safe side for taking seats).
    offset: Duration,
    /// How far the true offset may be above `offset`: the time from sending the call that
    /// read the store's clock to its answer.
    spread: Duration,
}

impl StoreClock {
    /// From `store_now`, read by a call sent at `sent` and answered now.
    fn measured(store_now: OffsetDateTime, sent: Instant) -> Self {
        Self::read(store_now, Instant::now(), sent.elapsed())
    }

    /// From `store_now`, read by a round trip of `round_trip` answered at `answered`.
    fn read(store_now: OffsetDateTime, answered: Instant, round_trip: StdDuration) -> Self {
        let answered_utc = OffsetDateTime::now_utc() - answered.elapsed();
        Self {
            offset: store_now - answered_utc,
            spread: Duration::try_from(round_trip).unwrap_or(Duration::ZERO),
        }
    }

    /// The engine's clock: the store's as last measured (behind it by that measurement's
    /// latency, never ahead: the store refuses a group whose clock is ahead of its own), in
    /// whole milliseconds like the store's own.
    fn now(&self) -> OffsetDateTime {
        whole_ms(OffsetDateTime::now_utc() + self.offset)
    }

    /// The latest the store's clock can read now, a whole millisecond up: a checkout or a
    /// sale is decided against it, so a hold a reader saw expired stays expired.
    fn latest(&self) -> OffsetDateTime {
        whole_ms(OffsetDateTime::now_utc() + self.offset + self.spread) + Duration::MILLISECOND
    }
}

fn whole_ms(t: OffsetDateTime) -> OffsetDateTime {
    let ms = t.unix_timestamp_nanos() / 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(ms * 1_000_000).unwrap_or(t)
}

struct Writer {
    store: Arc<dyn Store>,
    engine_store: Arc<dyn EngineStore>,
    render: HoldRenderer,
    event: Arc<EventRecord>,
    endpoint: String,
    /// What to decide, commit, answer and decide again: the domain's pipeline, whose IO
    /// this writer does.
    pipeline: WriterPipeline,
    clock: StoreClock,
    /// The next group's writer sequence number.
    next_seq: u64,
    /// Every map version up to this one is in the engine.
    contiguous: u64,
    last_catch_up: Instant,
    /// The engine's earliest hold deadline, as the pipeline last armed it.
    timer_at: Option<OffsetDateTime>,
    /// Committed groups waiting for the pipeline's [`Action::Answer`], oldest first.
    delivering: VecDeque<Delivery>,
    /// The progress of the last group sent, which the next one follows.
    last_turn: Option<watch::Receiver<Stage>>,
    /// The runtime of the requests: answers are delivered there (their reads use the
    /// requests' pool), keeping the writer's own thread for deciding and committing.
    requests: tokio::runtime::Handle,
    /// The node's leases, when the writer writes under one.
    cluster: Option<crate::runtime::cluster::Cluster>,
    /// The lease this writer writes under: every group carries it.
    fence: Option<boxoffice_store::lease::Fence>,
    /// Another node holds the event's lease: the writer answers what it has and ends.
    stopped: Option<StoreError>,
    meter: Option<Arc<crate::runtime::waitroom::HealthMeter>>,
    ledger: Option<Arc<crate::runtime::ledger::HoldLedger>>,
    /// How long a load (lease and engine) may take before the commands waiting for it are
    /// answered unavailable.
    load_wait: StdDuration,
    /// With no command for this long (and nothing of its own to do) the writer unloads.
    idle_unload: Option<StdDuration>,
    /// This node's turns to load an engine.
    loads: Arc<tokio::sync::Semaphore>,
    /// The writer map, to hand over what arrives while the writer unloads (set with
    /// `idle_unload`).
    respawn: Option<EventWriters>,
    /// When the last command arrived.
    last_command: tokio::time::Instant,
}

impl Writer {
    fn new(
        store: Arc<dyn Store>,
        engine_store: Arc<dyn EngineStore>,
        render: HoldRenderer,
        event: Arc<EventRecord>,
    ) -> Self {
        let endpoint = hold_endpoint(&event.event_id);
        Self {
            store,
            engine_store,
            render,
            event,
            endpoint,
            pipeline: WriterPipeline::new(),
            clock: StoreClock {
                offset: Duration::ZERO,
                spread: Duration::ZERO,
            },
            next_seq: 0,
            contiguous: 0,
            last_catch_up: Instant::now(),
            timer_at: None,
            delivering: VecDeque::new(),
            last_turn: None,
            requests: tokio::runtime::Handle::current(),
            cluster: None,
            fence: None,
            stopped: None,
            meter: None,
            ledger: None,
            load_wait: StdDuration::from_millis(ENGINE_LOAD_WAIT_MS),
            idle_unload: None,
            loads: Arc::new(tokio::sync::Semaphore::new(WRITER_LOADS_MAX_DEFAULT)),
            respawn: None,
            last_command: tokio::time::Instant::now(),
        }
    }

    async fn run(mut self, mut sale: mpsc::Receiver<Job>, mut holds: mpsc::Receiver<Job>) {
        let mut in_flight: FuturesOrdered<Commit> = FuturesOrdered::new();
        let mut incoming: Vec<Job> = Vec::with_capacity(GROUP_COMMANDS_MAX);
        let mut incoming_holds: Vec<Job> = Vec::with_capacity(GROUP_COMMANDS_MAX);
        let mut open = true;
        // Tests move the store's clock instead of sleeping past a deadline: the engine's
        // clock and its expiry timer follow at once (never in production).
        let mut clock_moves = boxoffice_store::clock::subscribe();
        loop {
            if in_flight.is_empty()
                && self.pipeline.engine().is_some()
                && self.last_catch_up.elapsed() >= StdDuration::from_millis(CATCH_UP_INTERVAL_MS)
            {
                // Idle: look at what changed elsewhere now and then.
                self.pipeline.mark_stale();
            }
            self.carry_out(&mut in_flight, &mut sale, &mut holds).await;
            if in_flight.is_empty()
                && let Some(error) = &self.stopped
            {
                // Not the event's owner: every request still here is answered (a 503 the
                // client may send again, to any node) and the writer ends.
                sale.close();
                holds.close();
                while let Ok(job) = sale.try_recv().or_else(|_| holds.try_recv()) {
                    let _ = job.context.reply.send(Err(copy_of(error)));
                }
                if let Some(writers) = &self.respawn {
                    writers.forget_closed(&self.event.event_id);
                }
                return;
            }
            if !open && in_flight.is_empty() && self.pipeline.queued_len() == 0 {
                return;
            }
            // The pipeline's lanes take at most a group beyond what is in flight; the rest
            // waits in the channels, which refuse what is past QUEUE_COMMANDS_MAX (429).
            let room = GROUP_COMMANDS_MAX.saturating_sub(self.pipeline.queued_len());
            // The engine's own timer: when a hold's deadline passes, a group ends it (the
            // sweeper only tidies events no writer has loaded).
            let expiry_in = self.timer_at.map(|deadline| {
                let wait = deadline - self.clock.now();
                StdDuration::try_from(wait).unwrap_or(StdDuration::ZERO)
            });
            let expiry = tokio::time::sleep(expiry_in.unwrap_or(StdDuration::from_secs(3600)));
            // Idle: nothing in flight, queued or to answer (whether the engine still keeps a
            // HELD hold or a waiting list is asked when the idle time is up).
            let quiet = in_flight.is_empty()
                && self.pipeline.queued_len() == 0
                && self.pipeline.in_flight_len() == 0
                && self.delivering.is_empty()
                && self.stopped.is_none();
            let unload_at = self
                .idle_unload
                .filter(|_| quiet && open)
                .and_then(|idle| self.last_command.checked_add(idle));
            let unload = tokio::time::sleep_until(
                unload_at
                    .unwrap_or_else(|| tokio::time::Instant::now() + StdDuration::from_secs(3600)),
            );
            tokio::select! {
                biased;
                Some((pending, result)) = in_flight.next(), if !in_flight.is_empty() => {
                    self.finish(pending, result);
                }
                Ok(()) = clock_moves.changed() => {
                    self.measure_clock().await;
                }
                n = sale.recv_many(&mut incoming, room), if open && room > 0 => {
                    if n == 0 {
                        open = false;
                        continue;
                    }
                    self.last_command = tokio::time::Instant::now();
                    top_up(&mut incoming, &mut holds, room);
                    self.queue_depth(sale.len() + holds.len());
                    self.take(&mut incoming);
                }
                n = holds.recv_many(&mut incoming_holds, room), if open && room > 0 => {
                    if n == 0 {
                        open = false;
                        continue;
                    }
                    self.last_command = tokio::time::Instant::now();
                    self.queue_depth(sale.len() + holds.len());
                    self.take(&mut incoming_holds);
                }
                () = expiry, if expiry_in.is_some() => {
                    // The pipeline ends the lapsed holds once nothing is in flight, after a
                    // catch-up (a checkout may have extended one).
                    // (Ticked at the deadline it was armed for: the clock's estimate may read a
                    // hair earlier, and the pipeline would keep waiting for a timer that ran.)
                    if let Some(at) = self.timer_at.take() {
                        self.pipeline.tick(at.max(self.clock.now()));
                    }
                }
                () = unload, if unload_at.is_some() => {
                    if self
                        .pipeline
                        .engine()
                        .is_some_and(EventEngine::has_timers_or_waiters)
                    {
                        // A HELD hold (its deadline ends it here) or a waiting list keeps
                        // the engine: asked again after another idle time.
                        self.last_command = tokio::time::Instant::now();
                        continue;
                    }
                    self.unload(&mut sale, &mut holds).await;
                    return;
                }
                else => {
                    if !open && in_flight.is_empty() {
                        self.pipeline.stop(&Refused(StoreError::Unavailable(
                            "event writer stopped".into(),
                        )));
                        self.carry_out(&mut in_flight, &mut sale, &mut holds).await;
                        return;
                    }
                }
            }
        }
    }

    /// Unloads the idle writer: the node stops holding the event's lease at this writer's
    /// epoch, the lanes close (a command sent from now on starts a new writer:
    /// `EventWriters::submit_job` replaces a writer whose lanes closed, once), what was sent
    /// before they closed goes to that new writer; else the lease row is handed back — only
    /// if it is still this node's at this epoch: a hand-back that comes late (the lease taken
    /// over, or taken again by a newer writer) finds nothing to do — and the writer leaves
    /// the map. The caller then ends, dropping the engine.
    async fn unload(&mut self, sale: &mut mpsc::Receiver<Job>, holds: &mut mpsc::Receiver<Job>) {
        let Some(writers) = self.respawn.take() else {
            return;
        };
        metrics::counter!("boxoffice_writer_unloads_total").increment(1);
        // First the node stops holding the lease at this epoch: a writer started from here on
        // takes it again (a new epoch), so none ever writes under the epoch handed back.
        let fence = self.fence.take();
        let let_go = match (&self.cluster, &fence) {
            (Some(cluster), Some(fence)) => cluster.let_go(&self.event.event_id, fence),
            _ => false,
        };
        sale.close();
        holds.close();
        let mut late = Vec::new();
        while let Ok(job) = sale.try_recv().or_else(|_| holds.try_recv()) {
            late.push(job);
        }
        if !late.is_empty() {
            // Sent before the lanes closed: a new writer serves them (it takes the lease,
            // still this node's, again).
            tracing::debug!(event_id = %self.event.event_id, commands = late.len(), "commands came in as the writer unloaded: handed to a new writer");
            for job in late {
                writers.hand_over(&self.event, job);
            }
            return;
        }
        if let (true, Some(cluster), Some(fence)) = (let_go, &self.cluster, &fence)
            && let Err(error) = cluster.hand_back(&self.event.event_id, fence).await
        {
            // It lapses within its TTL anyway: it is no longer renewed.
            tracing::warn!(%error, event_id = %self.event.event_id, "could not hand the idle event's lease back");
        }
        // Last: a writer that left the map has handed its lease back.
        writers.forget_closed(&self.event.event_id);
        tracing::debug!(event_id = %self.event.event_id, "idle event writer unloaded");
    }

    /// Hands commands just received to the pipeline (which, with nothing in flight, has the
    /// engine catch up first, so a request sees every commit that answered before it: a
    /// declined payment's seats, another node's release).
    fn take(&mut self, incoming: &mut Vec<Job>) {
        for job in incoming.drain(..) {
            self.pipeline.submit(job.command, job.context);
        }
    }

    /// Does what the pipeline asks for until it waits for a commit or a command: loads,
    /// catch-ups, commits started, answers, failures, the timer.
    async fn carry_out(
        &mut self,
        in_flight: &mut FuturesOrdered<Commit>,
        sale: &mut mpsc::Receiver<Job>,
        holds: &mut mpsc::Receiver<Job>,
    ) {
        loop {
            let clock = Clock {
                now: self.clock.now(),
                latest: self.clock.latest(),
            };
            // The hold TTL follows the sale only while fans wait in the event's queue.
            if let Some(waiting) = self
                .meter
                .as_ref()
                .and_then(|meter| meter.queue_waiting(&self.event.event_id))
                && let Some(engine) = self.pipeline.engine_mut()
            {
                engine.set_demand_waiting(waiting);
            }
            let Some(action) = self.pipeline.poll(clock) else {
                return;
            };
            match action {
                Action::Load => match self.reload().await {
                    Ok(engine) => self.pipeline.loaded(Ok(engine)),
                    Err(error) => {
                        if let Some(stopped) = &self.stopped {
                            self.pipeline.stop(&Refused(copy_of(stopped)));
                            continue;
                        }
                        // The commands that arrived during the load waited for it as well:
                        // they get its answer now, not a load (and a deadline) of their own.
                        while let Ok(job) = sale.try_recv().or_else(|_| holds.try_recv()) {
                            self.pipeline.submit(job.command, job.context);
                        }
                        self.pipeline.loaded(Err(Refused(error)));
                    }
                },
                Action::CatchUp => {
                    let caught_up = self.catch_up().await;
                    self.pipeline.caught_up(caught_up);
                }
                Action::Commit(group) => {
                    if group.kind == GroupKind::Expiry {
                        metrics::counter!("boxoffice_writer_expiry_groups_total").increment(1);
                    }
                    in_flight.push_back(self.commit(group));
                }
                Action::Answer(group) => {
                    let delivery = self.delivering.pop_front();
                    match delivery {
                        Some(delivery) if delivery.id == group.id => {
                            self.requests.spawn(deliver(
                                self.store.clone(),
                                self.event.clone(),
                                self.endpoint.clone(),
                                group,
                                delivery,
                            ));
                        }
                        _ => {
                            for job in group.jobs {
                                let _ = job.context.reply.send(Err(StoreError::Internal(
                                    "a committed group lost its answers".into(),
                                )));
                            }
                        }
                    }
                }
                Action::Fail(job, Refused(error)) => {
                    let _ = job.context.reply.send(Err(error));
                }
                Action::ArmTimer(at) => self.timer_at = Some(at),
            }
        }
    }

    /// Loads the engine from the store, under the event's lease when the node has leases
    /// (another node holding it stops the writer).
    async fn reload(&mut self) -> Result<EventEngine, StoreError> {
        // The commands waiting for this load wait at most `load_wait` in all (the lease and
        // the snapshot): a store that stopped answering is told as unavailable, not waited on.
        let deadline = tokio::time::Instant::now() + self.load_wait;
        let too_long = |what: &str| {
            metrics::counter!("boxoffice_coalesced_timeouts_total", "what" => "engine load")
                .increment(1);
            StoreError::Unavailable(format!(
                "{what} of event {} took longer than {} ms",
                self.event.event_id,
                self.load_wait.as_millis()
            ))
        };
        if let Some(cluster) = &self.cluster {
            // A writer loads its event only under the event's lease.
            let acquired = tokio::time::timeout_at(deadline, cluster.acquire(&self.event.event_id))
                .await
                .unwrap_or_else(|_| Err(too_long("taking the lease")));
            match acquired {
                Ok(Ok(fence)) => self.fence = Some(fence),
                Ok(Err(lease)) => {
                    tracing::info!(event_id = %self.event.event_id, owner = %lease.node_id, epoch = lease.epoch, "the event is owned by another node; the writer stops");
                    let error = StoreError::Fenced(format!(
                        "event {} is owned by node {} (epoch {})",
                        self.event.event_id, lease.node_id, lease.epoch
                    ));
                    self.stopped = Some(copy_of(&error));
                    return Err(error);
                }
                Err(error) => {
                    tracing::warn!(%error, event_id = %self.event.event_id, "could not take the event's lease");
                    return Err(error);
                }
            }
        }
        // One of this node's turns to load: after a failover every event's writer reloads,
        // and at most `loads_max` of them read their event at once.
        let waited = Instant::now();
        let permit = tokio::time::timeout_at(deadline, self.loads.clone().acquire_owned()).await;
        metrics::histogram!("boxoffice_writer_load_wait_seconds")
            .record(waited.elapsed().as_secs_f64());
        let _permit = match permit {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => {
                return Err(StoreError::Internal(
                    "the writers' load turns were closed".into(),
                ));
            }
            Err(_) => return Err(too_long("waiting for a turn to load")),
        };
        metrics::counter!("boxoffice_writer_loads_total").increment(1);
        let sent = Instant::now();
        let loaded = tokio::time::timeout_at(
            deadline,
            self.engine_store.engine_load(&self.event, &self.endpoint),
        )
        .await
        .unwrap_or_else(|_| Err(too_long("loading the engine")));
        match loaded {
            Ok((snapshot, store_now)) => {
                self.clock = StoreClock::measured(store_now, sent);
                self.next_seq = snapshot.writer_seq + 1;
                self.contiguous = snapshot.version;
                self.last_catch_up = Instant::now();
                self.last_turn = None;
                self.timer_at = None;
                let mut engine = EventEngine::load(self.event.rules(), snapshot, self.clock.now());
                engine.set_hold_ttl_follows_sale(self.event.waiting_room.hold_ttl_follows_sale);
                Ok(engine)
            }
            Err(error) => {
                tracing::warn!(%error, event_id = %self.event.event_id, "event writer could not load the event");
                Err(error)
            }
        }
    }

    /// Measures the store's clock again (after a test moved it).
    async fn measure_clock(&mut self) {
        let sent = Instant::now();
        match self.store.now().await {
            Ok(store_now) => self.clock = StoreClock::measured(store_now, sent),
            Err(error) => tracing::warn!(%error, "event writer could not read the store's clock"),
        }
    }

    /// Reads the change rows after the last version the engine has in full, and the current
    /// rows of what they name. Only between groups (nothing in flight).
    /// `false`: the feed or the rows could not be read, or the rows the engine needs were
    /// pruned: the engine is loaded again.
    async fn catch_up(&mut self) -> bool {
        self.last_catch_up = Instant::now();
        loop {
            let batches = match self
                .engine_store
                .engine_changes(&self.event.event_id, self.contiguous, CATCH_UP_ROWS_MAX)
                .await
            {
                Ok(batches) => batches,
                Err(error) => {
                    tracing::warn!(%error, "event writer could not read the change feed");
                    return false;
                }
            };
            if batches.is_empty() {
                return true;
            }
            if batches[0].version != self.contiguous + 1 {
                // Rows were pruned past what the engine has: start over from the store.
                return false;
            }
            let mut seat_ids = BTreeSet::new();
            let mut tier_ids = BTreeSet::new();
            let mut last = self.contiguous;
            for batch in &batches {
                seat_ids.extend(batch.changes.seats.keys().cloned());
                tier_ids.extend(batch.changes.tiers.keys().cloned());
                last = batch.version;
            }
            let seat_ids: Vec<String> = seat_ids.into_iter().collect();
            let tier_ids: Vec<String> = tier_ids.into_iter().collect();
            let Some(engine) = self.pipeline.engine_mut() else {
                return false;
            };
            let hold_ids = engine.holds_touching(&seat_ids, &tier_ids);
            match self
                .engine_store
                .engine_rows(&self.event.event_id, &seat_ids, &tier_ids, &hold_ids)
                .await
            {
                Ok(rows) => {
                    engine.refresh(rows);
                    engine.caught_up_to(last);
                    self.contiguous = last;
                    metrics::counter!("boxoffice_writer_catch_ups_total").increment(1);
                }
                Err(error) => {
                    tracing::warn!(%error, "event writer could not read changed rows");
                    return false;
                }
            }
            if batches.len() < CATCH_UP_ROWS_MAX as usize {
                return true;
            }
        }
    }

    /// Starts the commit of a group the pipeline decided: renders its answers and builds
    /// its writes.
    fn commit(&mut self, group: Group) -> Commit {
        let Group {
            id,
            kind,
            mut jobs,
            decisions,
            effects,
            now,
        } = group;
        let hold_changes = if self.ledger.is_some() {
            crate::runtime::ledger::HoldChanges {
                created: effects
                    .holds_created()
                    .map(|created| {
                        (
                            created.hold.hold_id.clone(),
                            created.hold.account_id.clone(),
                        )
                    })
                    .collect(),
                ended: effects
                    .holds_released()
                    .map(|h| h.hold_id.clone())
                    .chain(effects.checkouts_started().map(|c| c.hold_id.clone()))
                    .collect(),
                lapsed: effects.holds_expired().map(|h| h.hold_id.clone()).collect(),
            }
        } else {
            crate::runtime::ledger::HoldChanges::default()
        };
        for decision in &decisions {
            let (kind, decided) = match decision {
                Decision::Hold(_) => ("hold", true),
                Decision::Release(d) => ("release", *d != ReleaseDecision::NotKept),
                Decision::Checkout(d) => ("checkout", *d != CheckoutDecision::NotKept),
                Decision::Payment(d) => ("payment", *d != PaymentDecision::NotKept),
                Decision::Compensate(d) => ("compensate", *d != CompensationDecision::NotKept),
                Decision::Exchange(d) => ("exchange", *d != ExchangeDecision::NotKept),
                Decision::Transfer(d) => ("transfer", *d != TransferDecision::NotKept),
                Decision::Refund(d) => ("refund", *d != RefundDecision::NotKept),
                Decision::Waitlist(_) => ("waitlist", true),
                Decision::Cancel(_) => ("cancel", true),
                Decision::Access(_) => ("access", true),
            };
            // Commands the engine decided, those asked again after a catch-up (a checkout or
            // release of a hold it does not keep), and payments for the store's settlement.
            let path = match decision {
                _ if decided => "engine",
                Decision::Checkout(_)
                | Decision::Release(_)
                | Decision::Compensate(_)
                | Decision::Exchange(_)
                | Decision::Transfer(_)
                | Decision::Refund(_)
                | Decision::Waitlist(_) => "retry",
                _ => "store",
            };
            metrics::counter!("boxoffice_writer_commands_total", "kind" => kind, "path" => path)
                .increment(1);
        }
        let mut answers: Vec<Option<StoredResponse>> = Vec::with_capacity(decisions.len());
        let mut records = Vec::new();
        for (job, decision) in jobs.iter().zip(&decisions) {
            let rendered = match (decision, &job.command) {
                (Decision::Hold(outcome), Command::Hold(request)) => match outcome {
                    HoldOutcome::Replayed
                    | HoldOutcome::ReplayOfEarlierInBatch { .. }
                    | HoldOutcome::KeyReusedWithOtherRequest => None,
                    decided => {
                        let response = (self.render)(&self.event, decided);
                        if decided.is_recorded() {
                            records.push(NewRecord {
                                account_id: request.account_id.clone(),
                                key: request.idempotency_key.clone(),
                                request_digest: request.request_digest.clone(),
                                response: response.clone(),
                            });
                        }
                        Some(response)
                    }
                },
                _ => None,
            };
            answers.push(rendered);
        }
        // What the store writes besides each effect, by the command the effect names (a
        // command whose write is missing fails its group with an internal error).
        let mut commands: BTreeMap<usize, CommandWrite> = BTreeMap::new();
        for started in effects.checkouts_started() {
            if let Some(context) = jobs[started.index].context.checkout.as_deref_mut() {
                context.exchange = self
                    .pipeline
                    .engine()
                    .and_then(|engine| engine.hold(&started.hold_id))
                    .is_none_or(|hold| hold.exchange);
            }
        }
        for started in effects.checkouts_started() {
            let Some(context) = jobs[started.index].context.checkout.as_deref() else {
                continue;
            };
            let order = pending_order(context, now);
            answers[started.index] = Some((context.render)(&order));
            let write = CheckoutWrite {
                operation_id: context.start.operation_id.clone(),
                provider: context.start.provider.clone(),
                payment_method: context.start.payment_method.clone(),
                endpoint: context.start.scope.endpoint.clone(),
                record: NewRecord {
                    account_id: context.start.scope.account_id.clone(),
                    key: context.start.scope.key.clone(),
                    request_digest: context.start.request_digest.clone(),
                    response: (context.render)(&order),
                },
            };
            commands.insert(started.index, CommandWrite::Checkout(write));
        }
        for (index, (job, decision)) in jobs.iter().zip(&decisions).enumerate() {
            let (Decision::Payment(decision), Some(context)) =
                (decision, job.context.settle.as_deref())
            else {
                continue;
            };
            let cancelled = match decision {
                PaymentDecision::Confirmed => None,
                PaymentDecision::Cancelled { reason } => Some(*reason),
                PaymentDecision::NotKept => continue,
            };
            let to_status = context.verdict.payment_status();
            let order = context.settled_order(cancelled, now);
            let paid = matches!(
                to_status,
                PaymentStatus::Authorized | PaymentStatus::Captured
            );
            let update = context
                .verdict
                .operation_update(context.operation.n_attempts);
            let write = SettleWrite {
                operation_id: context.operation.operation_id.clone(),
                to_status,
                provider_ref: context.verdict.provider_ref().map(str::to_owned),
                last_error: update.last_error,
                recheck_after_s: update.recheck_after_s,
                order_id: context.order.order_id.clone(),
                order_status: order.status,
                cancel_reason: order.cancel_reason.clone(),
                messages: SettleWrite::messages_for(&context.operation, to_status, cancelled, paid),
                record: context
                    .scope
                    .clone()
                    .map(|scope| (scope, (context.render)(&order))),
            };
            commands.insert(index, CommandWrite::Settle(write));
        }
        for compensated in effects.orders_compensated() {
            if let Some(context) = jobs[compensated.index].context.compensate.as_deref() {
                let write = CompensationWrite::new(&context.operation, &context.reason);
                commands.insert(compensated.index, CommandWrite::Compensation(write));
            }
        }
        for taken in effects.exchanges() {
            let Some(context) = jobs[taken.index].context.exchange.as_deref_mut() else {
                continue;
            };
            let (exchange, order) = boxoffice_store::exchange::granted(
                &context.start,
                &context.gone,
                &context.order,
                now,
                taken.expires_at,
            );
            let response = (context.render)(&exchange, &order);
            answers[taken.index] = Some(response.clone());
            let scope = &context.start.scope;
            let write = ExchangeWrite {
                start: context.start.clone(),
                gone: context.gone.clone(),
                account_id: context.order.account_id.clone(),
                old_hold_id: context.order.hold_id.clone(),
                record: NewRecord {
                    account_id: scope.account_id.clone(),
                    key: scope.key.clone(),
                    request_digest: context.start.request_digest.clone(),
                    response,
                },
            };
            commands.insert(taken.index, CommandWrite::Exchange(write));
            context.granted = Some((exchange, order));
        }
        for taken in effects.transfers() {
            if let Some(write) = jobs[taken.index].context.transfer.as_deref() {
                commands.insert(taken.index, CommandWrite::Transfer(write.clone()));
            }
        }
        for taken in effects.refunds() {
            if let Some(write) = jobs[taken.index].context.refund.as_deref() {
                commands.insert(taken.index, CommandWrite::Refund(write.clone()));
            }
        }
        let writer_seq = self.next_seq;
        self.next_seq += 1;
        let delivery = Delivery {
            id,
            answers,
            compensations_refused: Vec::new(),
            exchanges_refused: Vec::new(),
            transfers_refused: Vec::new(),
            refunds_refused: Vec::new(),
            waitlist_offered: effects
                .waitlist_offers()
                .map(|o| {
                    (
                        o.waitlist_id.clone(),
                        (o.hold.hold_id.clone(), o.hold.expires_at),
                    )
                })
                .collect(),
        };
        let pending = Pending {
            // The effects travel with the write and rejoin the group once it finished.
            group: Group {
                id,
                kind,
                jobs,
                decisions,
                effects: Effects::default(),
                now,
            },
            delivery,
            writer_seq,
            started: Instant::now(),
            predecessor_failed: false,
            hold_changes,
        };
        let (mine, progress) = watch::channel(Stage::Started);
        let turn = Turn {
            previous: self.last_turn.replace(progress),
            mine,
            predecessor_failed: std::sync::atomic::AtomicBool::new(false),
        };
        let store = self.engine_store.clone();
        let event = self.event.clone();
        let endpoint = self.endpoint.clone();
        let fence = self.fence.clone();
        Box::pin(async move {
            let group = GroupWrite {
                event: &event,
                endpoint: &endpoint,
                now,
                writer_seq,
                fence,
                effects: &effects,
                records,
                commands,
                turn: &turn,
            };
            let result = store.apply_group(&group).await;
            // A group that committed with a command the store refused alone, or an expiry it
            // skipped, showed the engine wrong: the group decided on top of it must not
            // commit (it may give back seats the refused command did not free), so it is
            // told its predecessor failed and is decided again after the reload.
            let engine_was_right = result.as_ref().is_ok_and(|committed| {
                committed.compensations_refused.is_empty()
                    && committed.exchanges_refused.is_empty()
                    && committed.transfers_refused.is_empty()
                    && committed.refunds_refused.is_empty()
                    && committed.expiries_skipped == 0
            });
            turn.mine.send_replace(if engine_was_right {
                Stage::Committed
            } else {
                Stage::Failed
            });
            let mut pending = pending;
            pending.group.effects = effects;
            pending.predecessor_failed = turn
                .predecessor_failed
                .load(std::sync::atomic::Ordering::Relaxed);
            (pending, result)
        })
    }

    fn queue_depth(&self, depth: usize) {
        metrics::gauge!("boxoffice_writer_queue_depth").set(depth as f64);
        if let Some(meter) = &self.meter {
            meter.writer_queue_depth(depth as u64);
        }
    }

    /// A group's commit finished (groups finish in the order they were decided).
    fn finish(&mut self, pending: Pending, result: StoreResult<GroupCommitted>) {
        let Pending {
            group,
            mut delivery,
            writer_seq,
            started,
            predecessor_failed,
            hold_changes,
        } = pending;
        metrics::histogram!("boxoffice_hold_batch_seconds").record(started.elapsed().as_secs_f64());
        if let Some(meter) = &self.meter {
            meter.group_finished(started.elapsed());
        }
        metrics::histogram!("boxoffice_hold_batch_requests").record(group.jobs.len() as f64);
        match result {
            // The engine is gone when a group before this one failed or showed it wrong:
            // impossible while such a group tells its successor it failed and the store
            // checks the writer sequence. Answered as committed all the same (the pipeline
            // loads the engine again before the next group).
            Ok(committed) if self.pipeline.engine().is_none() => {
                delivery.compensations_refused = committed.compensations_refused;
                delivery.exchanges_refused = committed.exchanges_refused;
                delivery.transfers_refused = committed.transfers_refused;
                delivery.refunds_refused = committed.refunds_refused;
                self.delivering.push_back(delivery);
                self.pipeline.committed(group, false);
            }
            Ok(committed) => {
                boxoffice_workers::crash::point("hold_committed");
                self.clock = StoreClock::read(
                    committed.store_now,
                    committed.clock_answered,
                    committed.clock_round_trip,
                );
                if committed.previous_version == self.contiguous {
                    self.contiguous = committed.version;
                } else {
                    // Versions this writer did not write: catch up before the next group.
                    self.pipeline.mark_stale();
                }
                if let Some(engine) = self.pipeline.engine_mut() {
                    engine.committed(committed.version, writer_seq);
                }
                if let Some(ledger) = &self.ledger
                    && !hold_changes.is_empty()
                {
                    // Expiries the store skipped (the hold had moved on) were no lapse.
                    ledger.apply(
                        &hold_changes,
                        committed.expiries_skipped == 0,
                        Instant::now(),
                    );
                }
                let mut engine_was_right = true;
                if committed.expiries_skipped > 0 {
                    // The engine expired holds the store had already moved on (a checkout
                    // it had not heard of yet): load the event again before the next group.
                    metrics::counter!("boxoffice_writer_expiries_skipped_total")
                        .increment(committed.expiries_skipped);
                    engine_was_right = false;
                }
                if !committed.compensations_refused.is_empty() {
                    // The engine gave back a sale the store kept (a ticket was used at the
                    // door meanwhile): load the event again before the next group.
                    engine_was_right = false;
                    delivery.compensations_refused = committed.compensations_refused;
                }
                if !committed.exchanges_refused.is_empty() {
                    // The engine took seats for exchanges the store refused (the order or its
                    // tickets changed since they were read): load the event again.
                    metrics::counter!("boxoffice_writer_exchanges_refused_total")
                        .increment(committed.exchanges_refused.len() as u64);
                    engine_was_right = false;
                    delivery.exchanges_refused = committed.exchanges_refused;
                }
                if !committed.transfers_refused.is_empty() {
                    // The engine moved seats for transfers the store refused (the offer, the
                    // order or its tickets changed since they were read): load it again.
                    metrics::counter!("boxoffice_writer_transfers_refused_total")
                        .increment(committed.transfers_refused.len() as u64);
                    engine_was_right = false;
                    delivery.transfers_refused = committed.transfers_refused;
                }
                if !committed.refunds_refused.is_empty() {
                    // The engine freed seats for refunds the store refused (the order or its
                    // tickets changed since they were read): load it again.
                    metrics::counter!("boxoffice_writer_refunds_refused_total")
                        .increment(committed.refunds_refused.len() as u64);
                    engine_was_right = false;
                    delivery.refunds_refused = committed.refunds_refused;
                }
                self.delivering.push_back(delivery);
                self.pipeline.committed(group, engine_was_right);
            }
            Err(error) => {
                metrics::counter!("boxoffice_writer_group_failures_total").increment(1);
                let fenced = matches!(error, StoreError::Fenced(_));
                if fenced && let (Some(cluster), Some(fence)) = (&self.cluster, &self.fence) {
                    // Another node took the lease: this node writes nothing more of the
                    // event unless it takes the lease again (the reload tries, and stops the
                    // writer when another node holds it).
                    metrics::counter!("boxoffice_cluster_fenced_groups_total").increment(1);
                    cluster.lost(&self.event.event_id, fence);
                }
                if self.pipeline.engine().is_some() {
                    tracing::info!(%error, event_id = %self.event.event_id, "group refused; reloading the event");
                }
                // A group refused only because the group before it failed, or because
                // another writer committed, does not count against its commands.
                let refusal = if !matches!(error, StoreError::Conflict(_) | StoreError::Fenced(_)) {
                    Refusal::Final
                } else if fenced || boxoffice_store::engine::is_sequence_moved(&error) {
                    Refusal::Moved
                } else if predecessor_failed {
                    Refusal::Predecessor
                } else {
                    Refusal::Own
                };
                self.pipeline.refused(group, refusal, Refused(error));
            }
        }
    }
}

/// Answers a committed group's requests. Replays and releases read what the commit made.
async fn deliver(
    store: Arc<dyn Store>,
    event: Arc<EventRecord>,
    endpoint: String,
    group: Group,
    pending: Delivery,
) {
    let mut delivered: Vec<Option<Idempotent>> = Vec::with_capacity(group.jobs.len());
    let now = group.now;
    for (index, ((job, decision), rendered)) in group
        .jobs
        .into_iter()
        .zip(group.decisions)
        .zip(pending.answers)
        .enumerate()
    {
        let context = job.context;
        let answer = match (&job.command, decision) {
            (Command::Hold(request), Decision::Hold(outcome)) => {
                let answer = hold_answer(
                    store.as_ref(),
                    &endpoint,
                    request,
                    &outcome,
                    rendered,
                    &delivered,
                )
                .await;
                delivered.push(answer.as_ref().ok().map(copy_answer));
                answer.map(Answer::Hold)
            }
            (
                Command::Release {
                    account_id,
                    hold_id,
                },
                Decision::Release(decision),
            ) => {
                delivered.push(None);
                release_answer(store.as_ref(), &event, account_id, hold_id, decision).await
            }
            (Command::Payment(_), Decision::Payment(decision)) => {
                delivered.push(None);
                match &context.settle {
                    Some(context) => payment_answer(store.as_ref(), context, decision, now)
                        .await
                        .map(Answer::Payment),
                    None => Err(StoreError::Internal(
                        "a payment verdict without its request".into(),
                    )),
                }
            }
            (Command::Compensate(_), Decision::Compensate(decision)) => {
                delivered.push(None);
                Ok(match decision {
                    CompensationDecision::Compensated => {
                        Answer::Compensated(!pending.compensations_refused.contains(&index))
                    }
                    CompensationDecision::NotConfirmed => Answer::Compensated(false),
                    CompensationDecision::NotKept => Answer::CompensationNotKept,
                })
            }
            (Command::Exchange(_), Decision::Exchange(decision)) => {
                delivered.push(None);
                match context.exchange.as_deref() {
                    Some(context) => Ok(exchange_answer(
                        context,
                        decision,
                        pending.exchanges_refused.contains(&index),
                    )),
                    None => Err(StoreError::Internal(
                        "an exchange without its request".into(),
                    )),
                }
            }
            (Command::WaitlistJoin(join), Decision::Waitlist(decision)) => {
                delivered.push(None);
                Ok(Answer::Waitlist(WaitlistAnswer {
                    decision,
                    offered: pending.waitlist_offered.get(&join.waitlist_id).cloned(),
                }))
            }
            (Command::WaitlistLeave { .. }, Decision::Waitlist(decision)) => {
                delivered.push(None);
                Ok(Answer::Waitlist(WaitlistAnswer {
                    decision,
                    offered: None,
                }))
            }
            (Command::Transfer(_), Decision::Transfer(decision)) => {
                delivered.push(None);
                Ok(Answer::Transfer(transfer_answer(
                    decision,
                    pending.transfers_refused.contains(&index),
                )))
            }
            (Command::Refund(_), Decision::Refund(decision)) => {
                delivered.push(None);
                Ok(Answer::Refund(refund_answer(
                    decision,
                    pending.refunds_refused.contains(&index),
                )))
            }
            (Command::Cancel(_), Decision::Cancel(decision)) => {
                delivered.push(None);
                Ok(Answer::Cancel(decision.clone()))
            }
            (Command::RedeemAccess(_), Decision::Access(decision)) => {
                delivered.push(None);
                Ok(Answer::Access(decision))
            }
            (Command::Checkout(_), Decision::Checkout(CheckoutDecision::NotKept)) => {
                delivered.push(None);
                Ok(Answer::CheckoutNotKept)
            }
            (Command::Checkout(_), Decision::Checkout(decision)) => {
                delivered.push(None);
                match &context.checkout {
                    Some(context) => {
                        checkout_answer(store.as_ref(), context, decision, rendered, now)
                            .await
                            .map(Answer::Checkout)
                    }
                    None => Err(StoreError::Internal(
                        "a checkout without its request".into(),
                    )),
                }
            }
            _ => {
                delivered.push(None);
                Err(StoreError::Internal("a decision of another kind".into()))
            }
        };
        // A client that went away no longer listens; its answer is stored anyway.
        let _ = context.reply.send(answer);
    }
}

async fn hold_answer(
    store: &dyn Store,
    endpoint: &str,
    request: &HoldRequest,
    outcome: &HoldOutcome,
    rendered: Option<StoredResponse>,
    earlier: &[Option<Idempotent>],
) -> StoreResult<Idempotent> {
    match outcome {
        HoldOutcome::KeyReusedWithOtherRequest => Ok(Idempotent::KeyReusedWithOtherRequest),
        HoldOutcome::ReplayOfEarlierInBatch { index } => match earlier.get(*index) {
            Some(Some(Idempotent::Fresh(response) | Idempotent::Replayed(response))) => {
                Ok(Idempotent::Replayed(response.clone()))
            }
            _ => Ok(Idempotent::KeyReusedWithOtherRequest),
        },
        HoldOutcome::Replayed => {
            let scope = IdempotencyScope {
                account_id: request.account_id.clone(),
                endpoint: endpoint.to_owned(),
                key: request.idempotency_key.clone(),
            };
            Ok(store
                .stored_answer(&scope, &request.request_digest)
                .await?
                // A hold whose record was purged keeps its key: a reuse, like the batch path.
                .unwrap_or(Idempotent::KeyReusedWithOtherRequest))
        }
        _ => match rendered {
            Some(response) => Ok(Idempotent::Fresh(response)),
            None => Err(StoreError::Internal(
                "a decided hold without its answer".into(),
            )),
        },
    }
}

async fn release_answer(
    store: &dyn Store,
    event: &EventRecord,
    account_id: &str,
    hold_id: &str,
    decision: ReleaseDecision,
) -> StoreResult<Answer> {
    if decision == ReleaseDecision::NotFound {
        return Ok(Answer::Release(ReleaseOutcome::NotFound));
    }
    let Some(hold) = store
        .get_hold(hold_id)
        .await?
        .filter(|hold| hold.account_id == account_id && hold.event_id == event.event_id)
    else {
        return Ok(Answer::Release(ReleaseOutcome::NotFound));
    };
    if decision == ReleaseDecision::NotKept && hold.status == HoldStatus::Held {
        // A hold the engine has not seen yet (made by another node since the last
        // catch-up): asked again once the writer caught up.
        return Ok(Answer::ReleaseNotKept(Box::new(hold)));
    }
    Ok(Answer::Release(match decision {
        ReleaseDecision::Released { .. } => ReleaseOutcome::Released(hold),
        _ if hold.status == HoldStatus::PaymentPending => ReleaseOutcome::InCheckout(hold),
        _ => ReleaseOutcome::AlreadyEnded(hold),
    }))
}

/// The order a checkout start creates, as the group writes it.
fn pending_order(context: &CheckoutContext, now: OffsetDateTime) -> OrderView {
    context.start.pending_order(&context.hold, now)
}

async fn checkout_answer(
    store: &dyn Store,
    context: &CheckoutContext,
    decision: CheckoutDecision,
    rendered: Option<StoredResponse>,
    now: OffsetDateTime,
) -> StoreResult<CheckoutBegun> {
    let start = &context.start;
    match decision {
        CheckoutDecision::Started { .. } => {
            if rendered.is_none() {
                return Err(StoreError::Internal(
                    "a started checkout without its answer".into(),
                ));
            }
            // The operation as the group wrote it, without reading it back; only an
            // exchange's (which charges the exchange's amount due) is read.
            let operation =
                started_operation(store, start, &context.hold, context.exchange).await?;
            Ok(CheckoutBegun::Started {
                order: Box::new(pending_order(context, now)),
                operation: Box::new(operation),
            })
        }
        // Answered by `EventWriters::checkout` (asked again after a catch-up).
        CheckoutDecision::NotKept => Err(StoreError::Internal(
            "a checkout the engine does not keep reached its answer".into(),
        )),
        refused => refused_checkout(store, start, checkout_refusal(&refused)).await,
    }
}

async fn payment_answer(
    store: &dyn Store,
    context: &SettleContext,
    decision: PaymentDecision,
    now: OffsetDateTime,
) -> StoreResult<Option<Settled>> {
    let cancelled = match decision {
        PaymentDecision::Confirmed => None,
        PaymentDecision::Cancelled { reason } => Some(reason),
        // Not the engine's to decide: the store's settlement (one transaction) does — unless
        // the other source of the same verdict (the provider's answer, its webhook) settled
        // it already, when only the request's stored answer is left to write.
        PaymentDecision::NotKept => {
            let operation = store
                .payment_operation(&context.operation.operation_id)
                .await?;
            let settled_already =
                operation.is_some_and(|op| op.status == context.verdict.payment_status());
            if settled_already
                && let Some(order) = store.order_head(&context.order.order_id).await?
                && order.status != OrderStatus::PendingPayment
            {
                if let Some(scope) = &context.scope {
                    store
                        .replace_answer(scope, &(context.render)(&order))
                        .await?;
                }
                return Ok(Some(Settled {
                    order,
                    changed: false,
                }));
            }
            return store
                .settle_payment(
                    &context.operation.operation_id,
                    &context.verdict,
                    None,
                    context.scope.as_ref().map(|scope| (scope, context.render)),
                )
                .await;
        }
    };
    Ok(Some(Settled {
        order: context.settled_order(cancelled, now),
        changed: true,
    }))
}

/// An exchange's answer: as the group wrote it, or why it was refused.
fn transfer_answer(decision: TransferDecision, refused: bool) -> TransferAnswer {
    match decision {
        TransferDecision::Accepted if refused => TransferAnswer::Conflict(
            "the offer, the order or a ticket changed meanwhile (checked in, exchanged, \
             declined or lapsed)"
                .into(),
        ),
        TransferDecision::Accepted => TransferAnswer::Accepted,
        TransferDecision::Closed => TransferAnswer::Closed,
        TransferDecision::PurchaseLimit => TransferAnswer::PurchaseLimit,
        TransferDecision::TicketTaken(ticket_id) => {
            TransferAnswer::Conflict(format!("ticket {ticket_id} is being exchanged"))
        }
        TransferDecision::NotSold(seat_id) => {
            TransferAnswer::Conflict(format!("{seat_id} is no longer sold to the giver's order"))
        }
        TransferDecision::NotKept => TransferAnswer::NotKept,
    }
}

/// A refund's answer: as the group wrote it, or why it was refused.
fn refund_answer(decision: RefundDecision, refused: bool) -> RefundAnswer {
    match decision {
        RefundDecision::Refunded if refused => RefundAnswer::Conflict(
            "the order or a ticket changed meanwhile (checked in, exchanged, offered in a \
             transfer or refunded), or the refund is more than the order's payment less its \
             refunds"
                .into(),
        ),
        RefundDecision::Refunded => RefundAnswer::Refunded,
        RefundDecision::TicketTaken(ticket_id) => {
            RefundAnswer::Conflict(format!("ticket {ticket_id} is being exchanged"))
        }
        RefundDecision::NotSold(seat_id) => {
            RefundAnswer::Conflict(format!("{seat_id} is no longer sold to this order"))
        }
        RefundDecision::NotKept => RefundAnswer::NotKept,
    }
}

fn exchange_answer(context: &ExchangeContext, decision: ExchangeDecision, refused: bool) -> Answer {
    let refused_for = |why: ExchangeRefused| Answer::Exchange(ExchangeBegun::Refused(why));
    match decision {
        ExchangeDecision::Granted { .. } if refused => refused_for(ExchangeRefused::Conflict(
            "the order (no longer CONFIRMED, or its payment not captured) or its tickets changed while the exchange was decided".into(),
        )),
        ExchangeDecision::Granted { .. } => match context.granted.clone() {
            Some((exchange, order)) => Answer::Exchange(ExchangeBegun::Done {
                exchange: Box::new(exchange),
                order: Box::new(order),
            }),
            None => refused_for(ExchangeRefused::Conflict(
                "the exchange was granted without its answer".into(),
            )),
        },
        ExchangeDecision::Closed => refused_for(ExchangeRefused::Closed(format!(
            "exchanges of this event closed at {} (its start minus the exchange cutoff)",
            boxoffice_store::exchange::closes_at(&context.start.from_event)
        ))),
        ExchangeDecision::Started => refused_for(ExchangeRefused::Closed(
            "the target event has already started".into(),
        )),
        ExchangeDecision::SaleNotOpen => refused_for(ExchangeRefused::SaleNotOpen),
        ExchangeDecision::EventCancelled => refused_for(ExchangeRefused::EventCancelled),
        ExchangeDecision::SeatsUnavailable(seats) => {
            refused_for(ExchangeRefused::SeatsUnavailable(seats))
        }
        ExchangeDecision::PurchaseLimit => refused_for(ExchangeRefused::PurchaseLimit),
        ExchangeDecision::TicketTaken(ticket_id) => refused_for(ExchangeRefused::Conflict(
            format!("ticket {ticket_id} is already being exchanged"),
        )),
        ExchangeDecision::NotSold(seat_id) => refused_for(ExchangeRefused::Conflict(format!(
            "seat {seat_id} is no longer sold to order {}",
            context.order.order_id
        ))),
        ExchangeDecision::NotKept => Answer::ExchangeNotKept,
        ExchangeDecision::CompanionSeatAlone(seat_id) => {
            refused_for(ExchangeRefused::CompanionSeatAlone(seat_id))
        }
        ExchangeDecision::SeatKeptAccessible {
            seat_ids,
            release_at,
        } => refused_for(ExchangeRefused::SeatKeptAccessible {
            seat_ids,
            release_at,
        }),
    }
}

fn copy_answer(answer: &Idempotent) -> Idempotent {
    match answer {
        Idempotent::Fresh(response) => Idempotent::Fresh(response.clone()),
        Idempotent::Replayed(response) => Idempotent::Replayed(response.clone()),
        Idempotent::KeyReusedWithOtherRequest => Idempotent::KeyReusedWithOtherRequest,
    }
}

/// The same error again, for each request of a group that failed as a whole.
pub(crate) fn copy_of(error: &StoreError) -> StoreError {
    let message = error.to_string();
    match error {
        StoreError::Unavailable(_) => StoreError::Unavailable(message),
        StoreError::Busy(_) => StoreError::Busy(message),
        StoreError::Conflict(_) => StoreError::Conflict(message),
        StoreError::Fenced(_) => StoreError::Fenced(message),
        StoreError::Internal(_) => StoreError::Internal(message),
    }
}
