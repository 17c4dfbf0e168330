//! What the event writer asks of a store: load an event's live inventory, read again the rows
//! that changed elsewhere, and persist a decided group ([`EngineStore`]).
//!
//! The rules live in `boxoffice_domain::engine`; a backend only loads and persists. Every
//! write of a group is conditional and counted, and any difference refuses the whole group
//! ([`StoreError::Conflict`]): a seat is taken only if it is still free by the group's clock,
//! a tier gives units only where that many are available, a hold is released only if it is
//! still `HELD` and live, the accounts that got holds are within their limit after the writes,
//! and the group's clock is not ahead of the store's.
//!
//! Architecture invariant: a group decided on stale state cannot commit. Each group carries
//! its writer sequence; the event's `seatmap` row must hold the one before it, checked and
//! set in the group's last statement. A group whose predecessor failed, or that follows
//! another node's writer, changes nothing.

use std::collections::BTreeMap;

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{
    CheckoutCancelled, CheckoutStarted, Effect, Effects, EngineRows, EngineSnapshot, ExchangeTaken,
    ExchangeTakes, HoldConfirmed, HoldCreated, OrderCompensated, RefundTaken, TransferTaken,
    WaitlistOffer,
};
use boxoffice_domain::hold::SeatStatus;

use crate::seatmap::{EventChanges, MapSeat};
use crate::{EventRecord, NewRecord, StoreError, StoreResult};

/// A group's place in its writer's pipeline. Groups of one writer run side by side but
/// take their locks and commit in order: a group starts its transaction once the group
/// before it holds every lock it needs, and writes its sequence number only once the group
/// before it committed. So two groups of one writer never wait on each other in a cycle,
/// and a group whose predecessor failed gives up without writing.
#[async_trait]
pub trait GroupTurn: Send + Sync {
    /// Waits until the previous group holds its locks; `false`: it failed.
    async fn before_locks(&self) -> bool;
    /// This group holds every lock it needs but the event's `seatmap` row.
    fn locks_taken(&self);
    /// Waits until the previous group committed; `false`: it did not.
    async fn before_record(&self) -> bool;
}

/// The turn of a group that has no predecessor in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstInLine;

#[async_trait]
impl GroupTurn for FirstInLine {
    async fn before_locks(&self) -> bool {
        true
    }

    fn locks_taken(&self) {}

    async fn before_record(&self) -> bool {
        true
    }
}

/// The refusal of a group whose predecessor in the pipeline did not commit.
pub fn predecessor_failed() -> StoreError {
    StoreError::Conflict("group refused: the group before it did not commit".into())
}

const SEQUENCE_MOVED: &str = "group refused: the event's writer sequence moved \
     (another writer, or a failed group before this one)";

/// The refusal of a group whose writer sequence is not the stored one plus one: another
/// writer (another node, a one-shot group) committed since the engine was loaded.
pub fn sequence_moved() -> StoreError {
    StoreError::Conflict(SEQUENCE_MOVED.into())
}

/// Whether `error` is [`sequence_moved`]: the group's commands are not at fault.
pub fn is_sequence_moved(error: &StoreError) -> bool {
    matches!(error, StoreError::Conflict(why) if why == SEQUENCE_MOVED)
}

/// One decided group, ready to persist.
#[derive(Clone)]
pub struct GroupWrite<'a> {
    pub event: &'a EventRecord,
    /// The endpoint the group's idempotency records are stored under.
    pub endpoint: &'a str,
    /// The engine's clock for this group: never ahead of the store's (checked), it is the
    /// `created_at` of what the group writes and the clock its conditions are judged by.
    pub now: OffsetDateTime,
    /// This group's place in its writer's sequence: the stored sequence must be one less.
    pub writer_seq: u64,
    /// The writer's lease on the event, checked inside the group's transaction: a group of
    /// a node whose lease was taken over fails with [`StoreError::Fenced`] and writes
    /// nothing. `None` for the one-shot paths (tools, the store's own settlement), which the
    /// writer sequence alone fences.
    pub fence: Option<crate::lease::Fence>,
    /// What the engine decided, in its order: the rows every statement of the group reads.
    pub effects: &'a Effects,
    /// The new holds' answers, stored under their requests' keys.
    pub records: Vec<NewRecord>,
    /// What the store needs besides the engine's effect, by the command's place in the
    /// group: an effect that needs more (a checkout started, a payment verdict, a sale given
    /// back, an exchange, a transfer) names its command, and its write is looked up here
    /// ([`GroupWrite::checkouts`] and the like), never matched by position. One missing, or
    /// of another kind, is the caller's mistake: the group fails with
    /// [`StoreError::Internal`] and writes nothing.
    pub commands: BTreeMap<usize, CommandWrite>,
    pub turn: &'a dyn GroupTurn,
}

/// What the store writes for one command beyond the engine's effect: the rows only the
/// caller knows (the payment operation, the stored answer, the tickets to sign).
#[derive(Debug, Clone)]
pub enum CommandWrite {
    Checkout(CheckoutWrite),
    Settle(SettleWrite),
    Compensation(CompensationWrite),
    Exchange(ExchangeWrite),
    Transfer(crate::transfer::TransferWrite),
    Refund(crate::refund::RefundWrite),
}

impl CommandWrite {
    fn kind(&self) -> &'static str {
        match self {
            Self::Checkout(_) => "checkout",
            Self::Settle(_) => "payment verdict",
            Self::Compensation(_) => "compensation",
            Self::Exchange(_) => "exchange",
            Self::Transfer(_) => "transfer",
            Self::Refund(_) => "refund",
        }
    }
}

/// An exchange's rows beyond the engine's (the new hold, its seats and units, the old
/// seats and units of this event freed): the exchange row, the old tickets the caller picked
/// (marked until the difference is paid, or voided), and when nothing is due the old side of
/// another event freed, the old hold's count of units that left, the new order, its payment
/// and its tickets, the outbox messages and the stored answer. The order must still be
/// `CONFIRMED` with its payment captured and every ticket picked still `VALID` and unmarked
/// (locked, then judged): else the store writes nothing of this exchange and says so
/// ([`GroupCommitted::exchanges_refused`]).
#[derive(Debug, Clone)]
pub struct ExchangeWrite {
    pub start: crate::exchange::ExchangeStart,
    /// The tickets given up, as the caller picked them from the order it read.
    pub gone: crate::exchange::Surrender,
    /// The old order's account and hold.
    pub account_id: String,
    pub old_hold_id: String,
    /// The answer, stored under the request's key.
    pub record: NewRecord,
}

/// An old order as an exchange's group reads it under its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedOrder {
    pub status: String,
    pub account_id: String,
    pub event_id: String,
    pub hold_id: String,
}

/// A ticket given up as an exchange's group reads it under its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedTicket {
    pub order_id: String,
    /// The stored status (`VALID`, `VOIDED`, `CHECKED_IN`).
    pub status: String,
    pub exchange_id: Option<String>,
}

/// What a group's exchanges are judged on: the old orders and the tickets picked, locked,
/// and which of the exchanges' keys are already used.
#[derive(Debug, Clone, Default)]
pub struct ExchangeFacts {
    pub orders: std::collections::BTreeMap<String, LockedOrder>,
    /// Orders whose payment operation is `CAPTURED` (or settled by an exchange or a
    /// transfer): until then a capture refused for good can still cancel the order.
    pub captured: std::collections::BTreeSet<String>,
    pub tickets: std::collections::BTreeMap<String, LockedTicket>,
    /// `(account, endpoint, key)` of the keys already used.
    pub used_keys: std::collections::BTreeSet<(String, String, String)>,
    /// Ids of the group's exchanges across shards already recorded on this shard (the
    /// `ABORT` row of one whose request the settler gave up on).
    pub recorded: std::collections::BTreeSet<String>,
}

/// The command indexes of the exchanges the store refuses alone, judged in order: a key
/// already used (or by an earlier exchange of the group), an order no longer `CONFIRMED`,
/// not the one read (account, event, hold) or whose payment is not captured, a ticket no
/// longer `VALID` and unmarked (or taken by an earlier exchange of the group). An exchange
/// across shards is judged on its old shard when its tickets are marked there.
pub fn exchanges_refused(
    exchanges: &[(&ExchangeTaken, &ExchangeWrite)],
    mut facts: ExchangeFacts,
) -> Vec<usize> {
    let mut refused = Vec::new();
    for (taken, write) in exchanges {
        if !facts.used_keys.insert(write.key()) {
            refused.push(taken.index);
            continue;
        }
        if write.start.across_shards {
            // The old side is on another shard, marked there already; only the exchange's
            // own row must not be here yet.
            if facts.recorded.contains(&write.start.exchange_id) {
                refused.push(taken.index);
            }
            continue;
        }
        let order_ok = facts
            .orders
            .get(&write.start.order_id)
            .is_some_and(|order| {
                order.status == "CONFIRMED"
                    && order.account_id == write.account_id
                    && order.event_id == write.start.from_event.event_id
                    && order.hold_id == write.old_hold_id
            })
            && facts.captured.contains(&write.start.order_id);
        let tickets_ok = write.gone.ticket_ids.iter().all(|ticket_id| {
            facts.tickets.get(ticket_id).is_some_and(|ticket| {
                ticket.order_id == write.start.order_id
                    && ticket.status == "VALID"
                    && ticket.exchange_id.is_none()
            })
        });
        if !(order_ok && tickets_ok) {
            refused.push(taken.index);
            continue;
        }
        for ticket_id in &write.gone.ticket_ids {
            if let Some(ticket) = facts.tickets.get_mut(ticket_id) {
                ticket.exchange_id = Some(write.start.exchange_id.clone());
            }
        }
    }
    refused
}

/// One exchange a group writes, as rows: its write, the new hold's deadline as the engine
/// set it (the group's clock when sold at once), and what it takes.
#[derive(Debug, Clone)]
pub struct ExchangePlan<'a> {
    pub write: &'a ExchangeWrite,
    pub start: &'a crate::exchange::ExchangeStart,
    pub expires_at: OffsetDateTime,
    /// The new seats and their prices (none for a tier).
    pub seats: Vec<(String, i64)>,
    pub tier_id: Option<String>,
    pub quantity: u32,
}

impl<'a> ExchangePlan<'a> {
    pub fn new(write: &'a ExchangeWrite, expires_at: OffsetDateTime) -> Self {
        let start = &write.start;
        let (seats, tier_id) = match &start.to {
            crate::exchange::ToSide::Seats(seats) => (
                seats
                    .iter()
                    .map(|s| (s.seat_id.clone(), s.price_minor))
                    .collect(),
                None,
            ),
            crate::exchange::ToSide::Tier { tier_id, .. } => (Vec::new(), Some(tier_id.clone())),
        };
        Self {
            write,
            start,
            expires_at,
            seats,
            tier_id,
            quantity: start.to.quantity(),
        }
    }

    pub fn pays(&self) -> bool {
        self.write.pays()
    }

    pub fn to_event(&self) -> &str {
        &self.start.to_event.event_id
    }

    /// The old order's event (the group's event, or another one).
    pub fn old_event(&self) -> &str {
        &self.start.from_event.event_id
    }

    pub fn gone(&self) -> &crate::exchange::Surrender {
        &self.write.gone
    }

    /// Whether the old side is written here (see [`ExchangeWrite::old_side_here`]).
    pub fn old_side_here(&self) -> bool {
        self.write.old_side_here()
    }

    /// The exchange row's leg: `BOTH` sides here, or only the new side (`IN`).
    pub fn leg(&self) -> &'static str {
        if self.old_side_here() { "BOTH" } else { "IN" }
    }

    pub fn to_value_minor(&self) -> i64 {
        self.start.to.value_minor()
    }

    /// The new order: only when the swap happens now (else the checkout makes it).
    pub fn new_order_id(&self) -> Option<&str> {
        (!self.pays()).then_some(self.start.new_order_id.as_str())
    }
}

impl ExchangeWrite {
    /// The request's idempotency scope as `(account, endpoint, key)`.
    pub fn key(&self) -> (String, String, String) {
        let scope = &self.start.scope;
        (
            scope.account_id.clone(),
            scope.endpoint.clone(),
            scope.key.clone(),
        )
    }

    /// `to_value - from_value`: above 0 the new seats are held until it is paid.
    pub fn amount_due_minor(&self) -> i64 {
        self.start.to.value_minor() - self.gone.value_minor
    }

    pub fn pays(&self) -> bool {
        self.amount_due_minor() > 0
    }

    /// Whether the old side is written in this group's transaction (not on another shard).
    pub fn old_side_here(&self) -> bool {
        !self.start.across_shards
    }

    /// Whether the old side is of another event (freed by the store, not the engine).
    pub fn crosses_events(&self) -> bool {
        self.start.from_event.event_id != self.start.to_event.event_id
    }
}

/// A compensation's rows beyond the hold, its seats and units: the order is cancelled for
/// `reason` only if it is still `CONFIRMED` (counted), its valid tickets are voided, an
/// exchange of them waiting for payment fails, the operation must still be in the status
/// read (its undo was chosen from it), and the outbox gets the cancellation and the undo.
/// A ticket of the order already used at the door, or an operation no longer in the status
/// read, refuses this compensation alone: the store writes nothing of it and says so
/// ([`GroupCommitted::compensations_refused`]).
#[derive(Debug, Clone)]
pub struct CompensationWrite {
    pub operation_id: String,
    pub operation_status: boxoffice_domain::order::PaymentStatus,
    pub reason: String,
    pub messages: Vec<(&'static str, serde_json::Value)>,
}

impl CompensationWrite {
    /// A failed capture leaves an authorization to void; a capture that went through after
    /// all can only be refunded.
    pub fn new(operation: &crate::checkout::PaymentOperation, reason: &str) -> Self {
        use boxoffice_domain::settlement::Undo;
        let undo = Undo::of(operation.status).unwrap_or(Undo::Void);
        Self {
            operation_id: operation.operation_id.clone(),
            operation_status: operation.status,
            reason: reason.to_owned(),
            messages: vec![
                (
                    crate::checkout::topic::ORDER_CANCELLED,
                    serde_json::json!({"orderId": operation.order_id, "reason": reason}),
                ),
                crate::checkout::payment_undo(operation, undo, reason),
            ],
        }
    }
}

/// A payment verdict's rows beyond the hold and its seats: the operation moves to the verdict's
/// status only if its order is not settled yet (`AUTHORIZING`, `UNKNOWN` or `REQUIRES_ACTION`:
/// each can take every verdict that sells or cancels; counted), the order from
/// `PENDING_PAYMENT` to its outcome (counted), the outbox messages, and the stored answer. Not
/// the exact status the caller read: the reconciler reads an operation before a provider call
/// of seconds, during which a lost answer may move it from `AUTHORIZING` to `UNKNOWN`, and a
/// stale read must not refuse the whole group.
#[derive(Debug, Clone)]
pub struct SettleWrite {
    pub operation_id: String,
    pub to_status: boxoffice_domain::order::PaymentStatus,
    pub provider_ref: Option<String>,
    pub last_error: Option<String>,
    /// When the reconciler looks at the operation again (`ProviderVerdict::operation_update`).
    pub recheck_after_s: f64,
    pub order_id: String,
    pub order_status: boxoffice_domain::order::OrderStatus,
    pub cancel_reason: Option<String>,
    pub messages: Vec<(&'static str, serde_json::Value)>,
    /// The stored answer of the checkout request, rewritten with the settled order.
    pub record: Option<(
        boxoffice_domain::idempotency::IdempotencyScope,
        boxoffice_domain::idempotency::StoredResponse,
    )>,
}

impl SettleWrite {
    /// The outbox messages of a settled checkout: capture, ticket issuance and the
    /// confirmation of a sale; the cancellation and what gives the money back otherwise.
    pub fn messages_for(
        operation: &crate::checkout::PaymentOperation,
        to_status: boxoffice_domain::order::PaymentStatus,
        cancelled: Option<&str>,
        paid: bool,
    ) -> Vec<(&'static str, serde_json::Value)> {
        use crate::checkout::topic;
        let order_id = operation.order_id.as_str();
        match cancelled {
            None => vec![
                (
                    topic::PAYMENT_CAPTURE,
                    serde_json::json!({"operationId": operation.operation_id}),
                ),
                (
                    topic::TICKETS_ISSUE,
                    serde_json::json!({"orderId": order_id}),
                ),
                (
                    topic::ORDER_CONFIRMED,
                    serde_json::json!({"orderId": order_id}),
                ),
            ],
            Some(reason) => {
                let mut messages = vec![(
                    topic::ORDER_CANCELLED,
                    serde_json::json!({"orderId": order_id, "reason": reason}),
                )];
                if paid && let Some(undo) = boxoffice_domain::settlement::Undo::of(to_status) {
                    messages.push(crate::checkout::payment_undo(operation, undo, reason));
                }
                messages
            }
        }
    }
}

/// A checkout start's rows beyond the hold's move: the order (copied from the hold by the
/// store), its payment operation (for the hold's total, or the difference an exchange's hold
/// costs), and the request's idempotency record under its own endpoint.
#[derive(Debug, Clone)]
pub struct CheckoutWrite {
    pub operation_id: String,
    pub provider: String,
    pub payment_method: String,
    pub endpoint: String,
    pub record: NewRecord,
}

impl std::fmt::Debug for GroupWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupWrite")
            .field("event_id", &self.event.event_id)
            .field("writer_seq", &self.writer_seq)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl GroupWrite<'_> {
    /// The seat-map changes the group's seat writes make (tier counts come from the store's
    /// answer, after the writes).
    pub fn map_seats(&self) -> EventChanges {
        let mut changes = EventChanges::default();
        for change in self.effects.map_seats() {
            changes.seats.insert(
                change.seat_id.to_owned(),
                MapSeat::new(change.status, change.hold_expires_at),
            );
        }
        changes
    }

    /// The seats released holds must free, as the engine counted them.
    pub fn seats_freed(&self) -> usize {
        self.effects
            .holds_released()
            .map(|hold| hold.seat_ids.len())
            .sum()
    }

    /// Units released holds give back, per tier.
    pub fn tier_units_returned(&self) -> BTreeMap<String, u32> {
        let mut returned = BTreeMap::new();
        for hold in self.effects.holds_released() {
            if let Some((tier_id, units)) = &hold.tier {
                *returned.entry(tier_id.clone()).or_default() += *units;
            }
        }
        returned
    }

    /// Tiers the group touches, in lock order.
    pub fn tiers_touched(&self) -> Vec<String> {
        let mut tiers: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        for effect in self.effects {
            match effect {
                Effect::HoldCreated(HoldCreated { hold, .. })
                | Effect::WaitlistOffered(WaitlistOffer { hold, .. }) => {
                    tiers.extend(hold.tier_id.as_deref());
                }
                Effect::HoldExpired(hold)
                | Effect::HoldReleased(hold)
                | Effect::CheckoutCancelled(CheckoutCancelled { hold, .. })
                | Effect::OrderCompensated(OrderCompensated { hold, .. })
                | Effect::Refunded(RefundTaken { given: hold, .. }) => {
                    tiers.extend(tier_of(&hold.tier));
                }
                Effect::HoldConfirmed(confirmed) => tiers.extend(tier_of(&confirmed.tier)),
                Effect::ExchangeTaken(exchange) => {
                    if let ExchangeTakes::Tier { tier_id, .. } = &exchange.takes {
                        tiers.insert(tier_id);
                    }
                    if let Some(freed) = &exchange.freed {
                        tiers.extend(tier_of(&freed.tier));
                    }
                }
                // A checkout moves no unit, and a transfer's stay sold.
                Effect::CheckoutStarted(_)
                | Effect::TransferTaken(_)
                | Effect::WaitlistJoined(_)
                | Effect::WaitlistLeft { .. }
                | Effect::WaitlistLapsed { .. }
                | Effect::WaitlistPurchased { .. }
                | Effect::EventCancelled(_)
                | Effect::AccessRedeemed(_) => {}
            }
        }
        tiers.into_iter().map(str::to_owned).collect()
    }

    /// Every seat the group writes, sorted: the order they are locked in.
    pub fn seats_touched(&self) -> Vec<&str> {
        let mut seat_ids: Vec<&str> = Vec::new();
        for effect in self.effects {
            match effect {
                Effect::HoldCreated(HoldCreated { hold, .. })
                | Effect::WaitlistOffered(WaitlistOffer { hold, .. }) => {
                    seat_ids.extend(hold.seats.iter().map(|(seat_id, _)| seat_id.as_str()));
                }
                Effect::HoldExpired(hold)
                | Effect::HoldReleased(hold)
                | Effect::CheckoutCancelled(CheckoutCancelled { hold, .. })
                | Effect::OrderCompensated(OrderCompensated { hold, .. })
                | Effect::Refunded(RefundTaken { given: hold, .. }) => {
                    seat_ids.extend(hold.seat_ids.iter().map(String::as_str));
                }
                Effect::CheckoutStarted(started) => {
                    seat_ids.extend(started.seat_ids.iter().map(String::as_str));
                }
                Effect::HoldConfirmed(confirmed) => {
                    seat_ids.extend(confirmed.seat_ids.iter().map(String::as_str));
                }
                Effect::ExchangeTaken(exchange) => seat_ids.extend(exchange_seats(exchange)),
                Effect::TransferTaken(transfer) => {
                    seat_ids.extend(transfer.seat_ids.iter().map(String::as_str));
                }
                Effect::WaitlistJoined(_)
                | Effect::WaitlistLeft { .. }
                | Effect::WaitlistLapsed { .. }
                | Effect::WaitlistPurchased { .. }
                | Effect::EventCancelled(_)
                | Effect::AccessRedeemed(_) => {}
            }
        }
        seat_ids.sort_unstable();
        seat_ids.dedup();
        seat_ids
    }

    /// The write of the command at `index`, which the engine's `what` names; its absence, or
    /// a write of another kind, refuses the group as the caller's mistake.
    fn command_write<'s, T>(
        &'s self,
        index: usize,
        what: &str,
        pick: impl Fn(&'s CommandWrite) -> Option<&'s T>,
    ) -> StoreResult<&'s T> {
        let write = self.commands.get(&index).ok_or_else(|| {
            StoreError::Internal(format!(
                "the engine decided a {what} for command {index}, which has no write"
            ))
        })?;
        pick(write).ok_or_else(|| {
            StoreError::Internal(format!(
                "the engine decided a {what} for command {index}, whose write is a {}",
                write.kind()
            ))
        })
    }

    /// The checkouts the group starts, each with its write, in the engine's order.
    pub fn checkouts(&self) -> StoreResult<Vec<(&CheckoutStarted, &CheckoutWrite)>> {
        self.effects
            .checkouts_started()
            .map(|started| {
                let write = self.command_write(started.index, "checkout", |write| match write {
                    CommandWrite::Checkout(write) => Some(write),
                    _ => None,
                })?;
                Ok((started, write))
            })
            .collect()
    }

    /// The holds in checkout the group sells, each with its payment verdict's write.
    pub fn sales(&self) -> StoreResult<Vec<(&HoldConfirmed, &SettleWrite)>> {
        self.effects
            .holds_confirmed()
            .map(|confirmed| Ok((confirmed, self.settlement(confirmed.index)?)))
            .collect()
    }

    /// The writes of every payment verdict the group applies (a hold sold or cancelled), in
    /// command order.
    pub fn settlements(&self) -> StoreResult<Vec<&SettleWrite>> {
        self.effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::HoldConfirmed(confirmed) => Some(confirmed.index),
                Effect::CheckoutCancelled(cancelled) => Some(cancelled.index),
                _ => None,
            })
            .map(|index| self.settlement(index))
            .collect()
    }

    fn settlement(&self, index: usize) -> StoreResult<&SettleWrite> {
        self.command_write(index, "payment verdict", |write| match write {
            CommandWrite::Settle(write) => Some(write),
            _ => None,
        })
    }

    /// The orders the group gives back, each with its write.
    pub fn compensations(&self) -> StoreResult<Vec<(&OrderCompensated, &CompensationWrite)>> {
        self.effects
            .orders_compensated()
            .map(|compensated| {
                let write =
                    self.command_write(compensated.index, "compensation", |write| match write {
                        CommandWrite::Compensation(write) => Some(write),
                        _ => None,
                    })?;
                Ok((compensated, write))
            })
            .collect()
    }

    /// The exchanges the group grants, each with its write.
    pub fn exchanges(&self) -> StoreResult<Vec<(&ExchangeTaken, &ExchangeWrite)>> {
        self.effects
            .exchanges()
            .map(|taken| {
                let write = self.command_write(taken.index, "exchange", |write| match write {
                    CommandWrite::Exchange(write) => Some(write),
                    _ => None,
                })?;
                Ok((taken, write))
            })
            .collect()
    }

    /// The transfers the group accepts, each with its write (which must describe the same
    /// transfer).
    pub fn refunds(&self) -> StoreResult<Vec<(&RefundTaken, &crate::refund::RefundWrite)>> {
        self.effects
            .refunds()
            .map(|taken| {
                let write = self.command_write(taken.index, "refund", |write| match write {
                    CommandWrite::Refund(write) => Some(write),
                    _ => None,
                })?;
                if write.refund.refund_id != taken.refund_id {
                    return Err(StoreError::Internal(format!(
                        "refund {} decided for command {}, refund {} described",
                        taken.refund_id, taken.index, write.refund.refund_id
                    )));
                }
                Ok((taken, write))
            })
            .collect()
    }

    pub fn transfers(&self) -> StoreResult<Vec<(&TransferTaken, &crate::transfer::TransferWrite)>> {
        self.effects
            .transfers()
            .map(|taken| {
                let write = self.command_write(taken.index, "transfer", |write| match write {
                    CommandWrite::Transfer(write) => Some(write),
                    _ => None,
                })?;
                if write.transfer.transfer_id != taken.transfer_id {
                    return Err(StoreError::Internal(format!(
                        "transfer {} decided for command {}, transfer {} described",
                        taken.transfer_id, taken.index, write.transfer.transfer_id
                    )));
                }
                Ok((taken, write))
            })
            .collect()
    }
}
/// A committed group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCommitted {
    /// The event's map version before the group (the group wrote `version` when it changed
    /// the map, else nothing).
    pub previous_version: u64,
    pub version: u64,
    /// The store's clock during the group.
    pub store_now: OffsetDateTime,
    /// When the round trip that read `store_now` was answered, here, and how long it took:
    /// the reading fell within that round trip, which bounds the store's clock.
    pub clock_answered: std::time::Instant,
    pub clock_round_trip: std::time::Duration,
    /// Holds the engine expired that the store found already ended (or no longer `HELD`):
    /// the engine's picture of them is wrong and must be read again.
    pub expiries_skipped: u64,
    /// Command indexes of compensations the store refused alone (a ticket of the order was
    /// used at the door, or its operation moved since it was read): nothing of them was written, and the engine, which gave their
    /// seats back, must be loaded again.
    pub compensations_refused: Vec<usize>,
    /// Command indexes of exchanges the store refused alone (the order is no longer
    /// confirmed, or a ticket picked was used, exchanged or marked since it was read): nothing
    /// of them was written, and the engine, which took their seats, must be loaded again.
    pub exchanges_refused: Vec<usize>,
    /// Command indexes of transfers the store refused alone (the offer, the order or a
    /// ticket changed since they were read): nothing of them was written, and the engine,
    /// which moved their seats, must be loaded again.
    pub transfers_refused: Vec<usize>,
    /// Command indexes of refunds the store refused alone (the order, its payment or a
    /// ticket changed since they were read): nothing of them was written, and the engine,
    /// which freed their seats, must be loaded again.
    pub refunds_refused: Vec<usize>,
}

impl GroupWrite<'_> {
    /// The map without the seats of refused compensations (they stay sold) and refused
    /// exchanges (neither side moved).
    pub fn unmap_refused(&self, map: &mut crate::seatmap::MapChanges, refused: &[usize]) {
        let Some(changes) = map.by_event.get_mut(&self.event.event_id) else {
            return;
        };
        for compensated in self.effects.orders_compensated() {
            if refused.contains(&compensated.index) {
                for seat_id in &compensated.hold.seat_ids {
                    changes.seats.remove(seat_id);
                }
            }
        }
        for exchange in self.effects.exchanges() {
            if refused.contains(&exchange.index) {
                for seat_id in exchange_seats(exchange) {
                    changes.seats.remove(seat_id);
                }
            }
        }
        for refund in self.effects.refunds() {
            if refused.contains(&refund.index) {
                for seat_id in &refund.given.seat_ids {
                    changes.seats.remove(seat_id);
                }
            }
        }
    }
}

/// The exchanges the store writes: those not in `refused`, with the engine's deadlines.
pub fn exchange_plans<'a>(
    exchanges: &[(&'a ExchangeTaken, &'a ExchangeWrite)],
    refused: &[usize],
) -> Vec<ExchangePlan<'a>> {
    exchanges
        .iter()
        .filter(|(taken, _)| !refused.contains(&taken.index))
        .map(|(taken, write)| ExchangePlan::new(write, taken.expires_at))
        .collect()
}

/// The old orders and the tickets the exchanges give up, sorted (lock order), once each.
pub fn exchange_rows<'a>(
    exchanges: &[(&'a ExchangeTaken, &'a ExchangeWrite)],
) -> (Vec<&'a str>, Vec<&'a str>) {
    let here = || {
        exchanges
            .iter()
            .map(|(_, write)| *write)
            .filter(|write| write.old_side_here())
    };
    let mut orders: Vec<&str> = here().map(|x| x.start.order_id.as_str()).collect();
    orders.sort_unstable();
    orders.dedup();
    let mut tickets: Vec<&str> = here()
        .flat_map(|x| x.gone.ticket_ids.iter().map(String::as_str))
        .collect();
    tickets.sort_unstable();
    tickets.dedup();
    (orders, tickets)
}

/// The transfers, the orders and the tickets the transfers touch, each sorted (lock order)
/// once.
pub fn transfer_rows<'a>(
    transfers: &[(&'a TransferTaken, &'a crate::transfer::TransferWrite)],
) -> (Vec<&'a str>, Vec<&'a str>, Vec<&'a str>) {
    let mut transfer_ids: Vec<&str> = transfers
        .iter()
        .map(|(_, write)| write.transfer.transfer_id.as_str())
        .collect();
    transfer_ids.sort_unstable();
    transfer_ids.dedup();
    let mut orders: Vec<&str> = transfers
        .iter()
        .map(|(_, write)| write.transfer.order_id.as_str())
        .collect();
    orders.sort_unstable();
    orders.dedup();
    let mut tickets: Vec<&str> = transfers
        .iter()
        .flat_map(|(_, write)| write.transfer.ticket_ids.iter().map(String::as_str))
        .collect();
    tickets.sort_unstable();
    tickets.dedup();
    (transfer_ids, orders, tickets)
}

/// The transfers the store writes: those not in `refused`.
pub fn transfer_plans<'a>(
    transfers: &[(&'a TransferTaken, &'a crate::transfer::TransferWrite)],
    refused: &[usize],
) -> Vec<(&'a TransferTaken, &'a crate::transfer::TransferWrite)> {
    transfers
        .iter()
        .filter(|(taken, _)| !refused.contains(&taken.index))
        .copied()
        .collect()
}

/// The tier a hold's units are of.
fn tier_of(tier: &Option<(String, u32)>) -> Option<&str> {
    tier.as_ref().map(|(tier_id, _)| tier_id.as_str())
}

/// The seats of this event an exchange takes or frees.
fn exchange_seats(exchange: &ExchangeTaken) -> impl Iterator<Item = &str> {
    exchange.takes.seat_ids().chain(
        exchange
            .freed
            .iter()
            .flat_map(|f| f.seat_ids.iter().map(String::as_str)),
    )
}
/// The refusal of a group whose row counts differ from what the engine decided.
pub fn mismatch(what: &str, expected: usize, written: u64) -> StoreError {
    StoreError::Conflict(format!(
        "group refused: {what}: expected {expected}, the store wrote {written}"
    ))
}

/// A seat status as a backend stores it.
pub fn parse_seat_status(seat_id: &str, raw: &str) -> StoreResult<SeatStatus> {
    SeatStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {raw:?}")))
}

/// The event writer's side of a store.
#[async_trait]
pub trait EngineStore: Send + Sync {
    /// The event's live inventory in one consistent snapshot, and the store's clock then:
    /// every seat and tier, the holds in `HELD`, `PAYMENT_PENDING` or `CONFIRMED`, and the
    /// digests of the keys used at `endpoint` (a hold whose record was purged still owns its
    /// key).
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)>;

    /// The current rows of these seats and tiers; the holds named, the holds on those seats,
    /// and the kept holds of those tiers, each in its current status.
    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows>;

    /// Writes one group in one transaction, every write conditional and counted, the writer
    /// sequence checked last. Any difference: [`StoreError::Conflict`] and nothing written.
    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted>;

    /// The event's change rows after version `after` ([`crate::ReadStore::seat_map_changes`]),
    /// read through the writer's own connections.
    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<crate::seatmap::StoredBatch>>;
}

/// The endpoint under which an event's holds store their idempotency records.
pub fn hold_endpoint(event_id: &str) -> String {
    format!("POST /v1/events/{event_id}/holds")
}

/// Starts a checkout on a freshly loaded engine and persists it as one group: the writer's
/// path without the writer (one load per call), for tools and store tests; `serve` starts
/// every checkout on the event's writer. The key's stored answer comes first; the rules are
/// the engine's (`EventEngine::decide`), the writes the backend's `apply_group`, and a
/// refusal writes nothing.
pub async fn checkout_once<S>(
    store: &S,
    start: &crate::checkout::CheckoutStart,
    render: &crate::checkout::RenderOrder,
) -> StoreResult<crate::checkout::CheckoutBegun>
where
    S: crate::Store + ?Sized,
{
    use crate::checkout::CheckoutBegun;
    use boxoffice_domain::engine::{
        CheckoutDecision, CheckoutRequest, Command, Decision, EventEngine,
    };
    use boxoffice_domain::idempotency::Idempotent;

    let Some(hold) = store
        .get_hold(&start.hold_id)
        .await?
        .filter(|hold| hold.account_id == start.scope.account_id)
    else {
        return Ok(CheckoutBegun::HoldNotFound);
    };
    match store
        .stored_answer(&start.scope, &start.request_digest)
        .await?
    {
        Some(Idempotent::Replayed(stored)) => return Ok(CheckoutBegun::Replayed(stored)),
        Some(Idempotent::KeyReusedWithOtherRequest) => {
            return Ok(CheckoutBegun::KeyReusedWithOtherRequest);
        }
        Some(Idempotent::Fresh(_)) | None => {}
    }
    let Some(event) = store.get_event(&hold.event_id).await? else {
        return Ok(CheckoutBegun::HoldNotFound);
    };
    let endpoint = hold_endpoint(&event.event_id);
    let sent = std::time::Instant::now();
    let (snapshot, now) = store.engine_load(&event, &endpoint).await?;
    // The store's clock now is at most the load's round trip past its reading: the hold's
    // deadline must be ahead of that, as on the writer (`EventEngine::decide_within`).
    let latest = now
        + time::Duration::try_from(sent.elapsed()).unwrap_or(time::Duration::ZERO)
        + time::Duration::MILLISECOND;
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let command = Command::Checkout(CheckoutRequest {
        account_id: start.scope.account_id.clone(),
        hold_id: start.hold_id.clone(),
        order_id: start.order_id.clone(),
        grace_s: event.payment_grace_s,
    });
    let (decisions, effects) = engine.decide_within(now, latest, std::slice::from_ref(&command));
    let refused = match decisions.first() {
        Some(Decision::Checkout(CheckoutDecision::Started { .. })) => None,
        // A fresh engine keeps every live hold: one it does not keep has ended.
        Some(Decision::Checkout(decision)) => Some(checkout_refusal(decision)),
        _ => Some(CheckoutBegun::HoldExpired),
    };
    if let Some(refused) = refused {
        // The same key may have won since the look above (a request sent twice at once).
        return refused_checkout(store, start, refused).await;
    }
    let exchange = engine.hold(&start.hold_id).is_some_and(|h| h.exchange);
    let order = start.pending_order(&hold, now);
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        // The one command of the group.
        commands: BTreeMap::from([(
            0,
            CommandWrite::Checkout(CheckoutWrite {
                operation_id: start.operation_id.clone(),
                provider: start.provider.clone(),
                payment_method: start.payment_method.clone(),
                endpoint: start.scope.endpoint.clone(),
                record: NewRecord {
                    account_id: start.scope.account_id.clone(),
                    key: start.scope.key.clone(),
                    request_digest: start.request_digest.clone(),
                    response: render(&order),
                },
            }),
        )]),
        turn: &FirstInLine,
    };
    store.apply_group(&group).await?;
    let operation = started_operation(store, start, &hold, exchange).await?;
    Ok(CheckoutBegun::Started {
        order: Box::new(order),
        operation: Box::new(operation),
    })
}

/// Releases a hold on a freshly loaded engine and persists it as one group: the writer's
/// path without the writer, for tools and store tests; `serve` releases on the event's
/// writer. Only a release the engine decides writes anything.
pub async fn release_once<S>(
    store: &S,
    account_id: &str,
    hold_id: &str,
) -> StoreResult<crate::ReleaseOutcome>
where
    S: crate::Store + ?Sized,
{
    use crate::ReleaseOutcome;
    use boxoffice_domain::engine::{Command, Decision, EventEngine, ReleaseDecision};
    use boxoffice_domain::hold::HoldStatus;

    let Some(hold) = store
        .get_hold(hold_id)
        .await?
        .filter(|hold| hold.account_id == account_id)
    else {
        return Ok(ReleaseOutcome::NotFound);
    };
    let Some(event) = store.get_event(&hold.event_id).await? else {
        return Ok(ReleaseOutcome::NotFound);
    };
    let endpoint = hold_endpoint(&event.event_id);
    let (snapshot, now) = store.engine_load(&event, &endpoint).await?;
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let command = Command::Release {
        account_id: account_id.to_owned(),
        hold_id: hold_id.to_owned(),
    };
    let (decisions, effects) = engine.decide(now, std::slice::from_ref(&command));
    match decisions.first() {
        Some(Decision::Release(ReleaseDecision::Released { .. })) => {}
        Some(Decision::Release(ReleaseDecision::NotFound)) => return Ok(ReleaseOutcome::NotFound),
        // In checkout, ended, or (a fresh engine keeps every live hold) not kept: as it is.
        _ => {
            return Ok(if hold.status == HoldStatus::PaymentPending {
                ReleaseOutcome::InCheckout(hold)
            } else {
                ReleaseOutcome::AlreadyEnded(hold)
            });
        }
    }
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    store.apply_group(&group).await?;
    let current = store.get_hold(hold_id).await?.unwrap_or(hold);
    Ok(ReleaseOutcome::Released(current))
}

/// Gives a confirmed order's sale back on a freshly loaded engine and persists it as one
/// group: the writer's path without the writer, for the store's own callers and tests;
/// `serve`'s relay gives sales back on the event's writer. `false`: the order is not
/// confirmed, a ticket of it was used at the door, or its operation moved meanwhile (the
/// store refuses it alone).
pub async fn compensate_once<S>(store: &S, operation_id: &str, reason: &str) -> StoreResult<bool>
where
    S: crate::Store + ?Sized,
{
    use boxoffice_domain::engine::{
        Command, CompensationDecision, CompensationRequest, Decision, EventEngine,
    };
    use boxoffice_domain::order::OrderStatus;

    let Some(operation) = store.payment_operation(operation_id).await? else {
        return Ok(false);
    };
    let Some(order) = store.order_head(&operation.order_id).await? else {
        return Ok(false);
    };
    if order.status != OrderStatus::Confirmed {
        return Ok(false);
    }
    let Some(event) = store.get_event(&order.event_id).await? else {
        return Ok(false);
    };
    let endpoint = hold_endpoint(&event.event_id);
    let (snapshot, now) = store.engine_load(&event, &endpoint).await?;
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let command = Command::Compensate(CompensationRequest {
        order_id: order.order_id.clone(),
        hold_id: order.hold_id.clone(),
    });
    let (decisions, effects) = engine.decide(now, std::slice::from_ref(&command));
    // A fresh engine keeps every confirmed hold: one it does not keep is not confirmed.
    if decisions.first() != Some(&Decision::Compensate(CompensationDecision::Compensated)) {
        return Ok(false);
    }
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        // The one command of the group.
        commands: BTreeMap::from([(
            0,
            CommandWrite::Compensation(CompensationWrite::new(&operation, reason)),
        )]),
        turn: &FirstInLine,
    };
    let committed = store.apply_group(&group).await?;
    Ok(committed.compensations_refused.is_empty())
}

/// Runs a one-shot group (`hold_batch_once`, `release_once`, `checkout_once`) until it is not
/// refused for a conflict, at most [`ONE_SHOT_ATTEMPTS_MAX`] times. Every one-shot call
/// competes for the event's writer sequence: each round of a race lets at least one through,
/// so the attempts are bounded by the racers.
pub async fn one_shot<T, F, Fut>(mut attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut n_attempts = 0;
    loop {
        n_attempts += 1;
        match attempt().await {
            Err(StoreError::Conflict(_)) if n_attempts < ONE_SHOT_ATTEMPTS_MAX => {
                let pause_ms = 1 + (n_attempts % 7) * 3;
                tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
            }
            other => return other,
        }
    }
}

/// What a checkout the engine did not start is told (one it does not keep, after a fresh
/// load or a catch-up, has ended).
pub fn checkout_refusal(
    decision: &boxoffice_domain::engine::CheckoutDecision,
) -> crate::checkout::CheckoutBegun {
    use crate::checkout::CheckoutBegun;
    use boxoffice_domain::engine::CheckoutDecision;
    match decision {
        CheckoutDecision::InCheckout => CheckoutBegun::HoldInCheckout,
        CheckoutDecision::NotFound => CheckoutBegun::HoldNotFound,
        CheckoutDecision::Started { .. }
        | CheckoutDecision::Expired
        | CheckoutDecision::NotKept => CheckoutBegun::HoldExpired,
    }
}

/// A checkout that does not start: the key's stored answer first (the same key may have won
/// meanwhile: a request sent twice at once, or to two nodes), else `refused`.
pub async fn refused_checkout<S>(
    store: &S,
    start: &crate::checkout::CheckoutStart,
    refused: crate::checkout::CheckoutBegun,
) -> StoreResult<crate::checkout::CheckoutBegun>
where
    S: crate::Store + ?Sized,
{
    use crate::checkout::CheckoutBegun;
    use boxoffice_domain::idempotency::Idempotent;
    Ok(
        match store
            .stored_answer(&start.scope, &start.request_digest)
            .await?
        {
            Some(Idempotent::Replayed(stored)) => CheckoutBegun::Replayed(stored),
            Some(Idempotent::KeyReusedWithOtherRequest) => CheckoutBegun::KeyReusedWithOtherRequest,
            Some(Idempotent::Fresh(_)) | None => refused,
        },
    )
}

/// The payment operation a started checkout wrote: built from the start and the hold, or,
/// for an exchange's hold (which charges the exchange's amount due), read back.
pub async fn started_operation<S>(
    store: &S,
    start: &crate::checkout::CheckoutStart,
    hold: &crate::HoldView,
    exchange: bool,
) -> StoreResult<crate::checkout::PaymentOperation>
where
    S: crate::Store + ?Sized,
{
    if !exchange {
        return Ok(start.new_operation(hold));
    }
    store
        .payment_operation(&start.operation_id)
        .await?
        .ok_or_else(|| {
            StoreError::Internal(format!(
                "checkout committed without its payment operation {}",
                start.operation_id
            ))
        })
}

/// Attempts of a one-shot hold batch ([`crate::Store::hold_batch`]) before a conflict reaches
/// the caller.
pub const ONE_SHOT_ATTEMPTS_MAX: u64 = 64;

/// Decides `requests` on a freshly loaded engine and persists them as one group: the
/// writer's path without the writer (one load per call), for tools and store tests. The
/// rules are the engine's, the writes the backend's `apply_group`; nothing else decides.
pub async fn hold_batch_once<S>(
    store: &S,
    event: &EventRecord,
    endpoint: &str,
    requests: &[boxoffice_domain::decide::HoldRequest],
    render: &crate::RenderHold,
) -> StoreResult<Vec<boxoffice_domain::idempotency::Idempotent>>
where
    S: crate::Store + ?Sized,
{
    use boxoffice_domain::decide::HoldOutcome;
    use boxoffice_domain::engine::{Command, Decision, EventEngine};
    use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};

    let (snapshot, now) = store.engine_load(event, endpoint).await?;
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let commands: Vec<Command> = requests.iter().cloned().map(Command::Hold).collect();
    let (decisions, effects) = engine.decide(now, &commands);
    let mut records = Vec::new();
    let mut rendered = Vec::with_capacity(decisions.len());
    for (request, decision) in requests.iter().zip(&decisions) {
        let response = match decision {
            Decision::Hold(
                HoldOutcome::Replayed
                | HoldOutcome::ReplayOfEarlierInBatch { .. }
                | HoldOutcome::KeyReusedWithOtherRequest,
            )
            | Decision::Release(_)
            | Decision::Checkout(_)
            | Decision::Payment(_)
            | Decision::Compensate(_)
            | Decision::Exchange(_)
            | Decision::Transfer(_)
            | Decision::Refund(_)
            | Decision::Waitlist(_)
            | Decision::Cancel(_)
            | Decision::Access(_) => None,
            Decision::Hold(outcome) => {
                let response = render(outcome);
                if outcome.is_recorded() {
                    records.push(NewRecord {
                        account_id: request.account_id.clone(),
                        key: request.idempotency_key.clone(),
                        request_digest: request.request_digest.clone(),
                        response: response.clone(),
                    });
                }
                Some(response)
            }
        };
        rendered.push(response);
    }
    let group = GroupWrite {
        event,
        endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records,
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    store.apply_group(&group).await?;
    let mut answers: Vec<Idempotent> = Vec::with_capacity(requests.len());
    for ((request, decision), response) in requests.iter().zip(decisions).zip(rendered) {
        let answer = match decision {
            Decision::Hold(HoldOutcome::KeyReusedWithOtherRequest) => {
                Idempotent::KeyReusedWithOtherRequest
            }
            Decision::Hold(HoldOutcome::ReplayOfEarlierInBatch { index }) => {
                match answers.get(index) {
                    Some(Idempotent::Fresh(r) | Idempotent::Replayed(r)) => {
                        Idempotent::Replayed(r.clone())
                    }
                    _ => Idempotent::KeyReusedWithOtherRequest,
                }
            }
            Decision::Hold(HoldOutcome::Replayed) => {
                let scope = IdempotencyScope {
                    account_id: request.account_id.clone(),
                    endpoint: endpoint.to_owned(),
                    key: request.idempotency_key.clone(),
                };
                store
                    .stored_answer(&scope, &request.request_digest)
                    .await?
                    .unwrap_or(Idempotent::KeyReusedWithOtherRequest)
            }
            _ => match response {
                Some(response) => Idempotent::Fresh(response),
                None => Idempotent::KeyReusedWithOtherRequest,
            },
        };
        answers.push(answer);
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use boxoffice_domain::engine::Effect;
    use boxoffice_domain::event::{EventSpec, Section, WaitingRoomSettings};
    use boxoffice_domain::idempotency::StoredResponse;
    use boxoffice_domain::order::PaymentStatus;
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2027-01-01 10:00 UTC);

    fn event() -> EventRecord {
        let spec = EventSpec {
            name: "Night".into(),
            starts_at: NOW + time::Duration::days(1),
            on_sale_at: Some(NOW),
            currency: "EUR".into(),
            hold_ttl_s: 300,
            payment_grace_s: 60,
            max_seats_per_hold: 4,
            max_tickets_per_account: 4,
            exchange_cutoff_s: 0,
            transfer_cutoff_s: 0,
            waitlist_offer_ttl_s: 0,
            refund_policy: None,
            holder_policy: None,
            sale: Default::default(),
            chart: None,
            waiting_room: WaitingRoomSettings::default(),
            sections: vec![Section {
                name: "A".into(),
                rows: 1,
                seats_per_row: 4,
                price_minor: 1000,
                row_lengths: Vec::new(),
            }],
            tiers: Vec::new(),
        };
        crate::event_record("e", &spec, NOW)
    }

    /// A checkout of hold `h-<index>` started by the command at `index`.
    fn started(index: usize) -> Effect {
        Effect::CheckoutStarted(CheckoutStarted {
            index,
            account_id: "ann".into(),
            hold_id: format!("h-{index}"),
            order_id: format!("o-{index}"),
            seat_ids: vec![format!("A-1-{index}")],
            expires_at: NOW,
        })
    }

    fn checkout_write(operation_id: &str) -> CommandWrite {
        CommandWrite::Checkout(CheckoutWrite {
            operation_id: operation_id.into(),
            provider: "sim".into(),
            payment_method: "card".into(),
            endpoint: "POST /v1/checkout".into(),
            record: NewRecord {
                account_id: "ann".into(),
                key: operation_id.into(),
                request_digest: String::new(),
                response: StoredResponse {
                    status: 201,
                    body: Vec::new(),
                },
            },
        })
    }

    fn group<'a>(
        event: &'a EventRecord,
        effects: &'a Effects,
        commands: BTreeMap<usize, CommandWrite>,
    ) -> GroupWrite<'a> {
        GroupWrite {
            event,
            endpoint: "POST /test/holds",
            now: NOW,
            writer_seq: 1,
            fence: None,
            effects,
            records: Vec::new(),
            commands,
            turn: &FirstInLine,
        }
    }

    #[test]
    fn each_effect_finds_its_commands_write_by_index_whatever_the_order() {
        let event = event();
        let effects = Effects::from(vec![started(3), started(1)]);
        let commands = BTreeMap::from([(1, checkout_write("op-1")), (3, checkout_write("op-3"))]);
        let group = group(&event, &effects, commands);
        let paired: Vec<(&str, &str)> = group
            .checkouts()
            .expect("every checkout has its write")
            .into_iter()
            .map(|(started, write)| (started.hold_id.as_str(), write.operation_id.as_str()))
            .collect();
        assert_eq!(paired, [("h-3", "op-3"), ("h-1", "op-1")]);
    }

    #[test]
    fn an_effect_whose_command_has_no_write_of_its_kind_is_an_internal_error() {
        let event = event();
        let effects = Effects::from(vec![started(0)]);
        let missing = group(&event, &effects, BTreeMap::new());
        assert!(
            matches!(missing.checkouts(), Err(StoreError::Internal(why)) if why.contains("no write")),
            "a checkout without its write"
        );
        let compensation = CommandWrite::Compensation(CompensationWrite {
            operation_id: "op-0".into(),
            operation_status: PaymentStatus::Captured,
            reason: "CAPTURE_FAILED".into(),
            messages: Vec::new(),
        });
        let other_kind = group(&event, &effects, BTreeMap::from([(0, compensation)]));
        assert!(
            matches!(other_kind.checkouts(), Err(StoreError::Internal(why)) if why.contains("compensation")),
            "a checkout whose write is a compensation's"
        );
    }

    /// An exchange of order `o-<index>`'s ticket `t-<index>`, the command at `index`.
    fn exchange(
        event: &std::sync::Arc<EventRecord>,
        index: usize,
    ) -> (ExchangeTaken, ExchangeWrite) {
        let taken = ExchangeTaken {
            index,
            exchange_id: format!("x-{index}"),
            hold_id: format!("new-h-{index}"),
            account_id: "ann".into(),
            takes: ExchangeTakes::Seats(vec![(format!("A-1-{}", index + 3), 1000)]),
            sold: true,
            expires_at: NOW,
            freed: None,
        };
        let start = crate::exchange::ExchangeStart {
            scope: boxoffice_domain::idempotency::IdempotencyScope {
                account_id: "ann".into(),
                endpoint: format!("POST /v1/orders/o-{index}/exchanges"),
                key: format!("k-{index}"),
            },
            request_digest: String::new(),
            order_id: format!("o-{index}"),
            from_event: event.clone(),
            from: crate::exchange::FromSide::Seats(vec![format!("A-1-{}", index + 1)]),
            to_event: event.clone(),
            to: crate::exchange::ToSide::Seats(vec![crate::HeldSeat {
                seat_id: format!("A-1-{}", index + 3),
                price_minor: 1000,
            }]),
            exchange_id: format!("x-{index}"),
            new_hold_id: format!("new-h-{index}"),
            new_order_id: format!("new-o-{index}"),
            operation_id: format!("op-{index}"),
            new_tickets: Vec::new(),
            across_shards: false,
        };
        let write = ExchangeWrite {
            start,
            gone: crate::exchange::Surrender {
                ticket_ids: vec![format!("t-{index}")],
                seat_ids: vec![format!("A-1-{}", index + 1)],
                tier: None,
                value_minor: 1000,
            },
            account_id: "ann".into(),
            old_hold_id: format!("h-{index}"),
            record: NewRecord {
                account_id: "ann".into(),
                key: format!("k-{index}"),
                request_digest: String::new(),
                response: StoredResponse {
                    status: 201,
                    body: Vec::new(),
                },
            },
        };
        (taken, write)
    }

    #[test]
    fn an_exchange_of_an_order_not_captured_is_refused_alone() {
        let event = std::sync::Arc::new(event());
        let (first, second) = (exchange(&event, 0), exchange(&event, 1));
        let exchanges = [(&first.0, &first.1), (&second.0, &second.1)];
        let mut facts = ExchangeFacts::default();
        for index in 0..2 {
            facts.orders.insert(
                format!("o-{index}"),
                LockedOrder {
                    status: "CONFIRMED".into(),
                    account_id: "ann".into(),
                    event_id: event.event_id.clone(),
                    hold_id: format!("h-{index}"),
                },
            );
            facts.tickets.insert(
                format!("t-{index}"),
                LockedTicket {
                    order_id: format!("o-{index}"),
                    status: "VALID".into(),
                    exchange_id: None,
                },
            );
        }
        // Order o-1 is confirmed, its payment only authorized: a capture refused for good
        // could still cancel it.
        facts.captured.insert("o-0".into());
        assert_eq!(exchanges_refused(&exchanges, facts.clone()), [1]);
        facts.captured.insert("o-1".into());
        assert!(exchanges_refused(&exchanges, facts).is_empty());
    }
}
