//! Records and outcomes of checkout: orders, payment operations, tickets, and the outbox
//! messages the relay delivers. The [`crate::Store`] methods that use them are the only way
//! an order changes state.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_domain::settlement::Undo;

use crate::HeldSeat;

/// Seconds after which the reconciler looks at a payment operation nobody settled (its
/// process may have died between the order commit and the provider's answer), and between
/// two looks at one waiting for the shopper.
pub const OPERATION_RECHECK_S: f64 = 5.0;

/// Renders the stored checkout response from an order.
pub type RenderOrder = dyn Fn(&OrderView) -> StoredResponse + Send + Sync;

/// An order with its payment state and tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderView {
    pub order_id: String,
    pub event_id: String,
    pub hold_id: String,
    pub account_id: String,
    pub status: OrderStatus,
    pub payment_status: PaymentStatus,
    pub next_action_url: Option<String>,
    pub seats: Vec<HeldSeat>,
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub total_minor: i64,
    pub currency: String,
    pub cancel_reason: Option<String>,
    /// Why the payment failed, when `payment_status` is `FAILED`: the provider's decline
    /// code (`generic_decline`, `card_declined`, ...) or error code (`resource_missing`: a
    /// payment method it does not know); the operation's `last_error`.
    pub payment_failure_code: Option<String>,
    pub tickets: Vec<TicketView>,
    /// The order's refunds, oldest first (read with the tickets).
    pub refunds: Vec<crate::refund::RefundView>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl OrderView {
    /// What the order's refunds give back, pending ones included, failed ones not.
    pub fn refunded_minor(&self) -> i64 {
        self.refunds
            .iter()
            .filter(|r| r.status != crate::refund::RefundStatus::Failed)
            .map(|r| r.amount_minor)
            .sum()
    }
}

/// One issued ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketView {
    pub ticket_id: String,
    pub event_id: String,
    pub order_id: String,
    pub account_id: String,
    pub seat_id: Option<String>,
    pub tier_id: Option<String>,
    pub unit: u32,
    pub code: String,
    /// `VALID`, `VOIDED`, `CHECKED_IN`, or `EXCHANGING` (valid, but an exchange in payment
    /// has it: it cannot be checked in or exchanged again until the exchange ends).
    pub status: String,
    /// The exchange that has the ticket (`EXCHANGING`) or replaced it (`VOIDED`).
    pub exchange_id: Option<String>,
    /// The refund that voided it.
    pub refund_id: Option<String>,
    /// Why it was voided when no refund or exchange says it (`EVENT_CANCELLED`).
    pub void_reason: Option<String>,
    /// Who will use it, when a name or answers were given (`None`: the account holding it).
    pub holder: Option<boxoffice_domain::holder::HolderDetails>,
    pub issued_at: OffsetDateTime,
}

/// The payment operation of an order (its authorization, later captured or voided).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentOperation {
    pub operation_id: String,
    pub order_id: String,
    pub event_id: String,
    pub provider: String,
    pub payment_method: String,
    pub status: PaymentStatus,
    pub provider_ref: Option<String>,
    pub amount_minor: i64,
    pub currency: String,
    pub n_attempts: u32,
}

/// What `begin_checkout` is asked to do.
#[derive(Debug, Clone)]
pub struct CheckoutStart {
    pub scope: IdempotencyScope,
    pub request_digest: String,
    pub hold_id: String,
    /// Ids for the new order and its payment operation, chosen by the caller.
    pub order_id: String,
    pub operation_id: String,
    pub provider: String,
    pub payment_method: String,
}

impl CheckoutStart {
    /// The order a started checkout of `hold` creates, as the start's group writes it (copied
    /// from the hold; `now` is the group's clock).
    pub fn pending_order(&self, hold: &crate::HoldView, now: OffsetDateTime) -> OrderView {
        OrderView {
            order_id: self.order_id.clone(),
            event_id: hold.event_id.clone(),
            hold_id: hold.hold_id.clone(),
            account_id: hold.account_id.clone(),
            status: OrderStatus::PendingPayment,
            payment_status: PaymentStatus::Authorizing,
            next_action_url: None,
            seats: hold.seats.clone(),
            tier_id: hold.tier_id.clone(),
            quantity: hold.quantity,
            total_minor: hold.total_minor,
            currency: hold.currency.clone(),
            cancel_reason: None,
            payment_failure_code: None,
            tickets: Vec::new(),
            refunds: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    /// The payment operation a started checkout of `hold` creates: `AUTHORIZING` the hold's
    /// total (an exchange's hold charges the exchange's amount due instead: read it back).
    pub fn new_operation(&self, hold: &crate::HoldView) -> PaymentOperation {
        PaymentOperation {
            operation_id: self.operation_id.clone(),
            order_id: self.order_id.clone(),
            event_id: hold.event_id.clone(),
            provider: self.provider.clone(),
            payment_method: self.payment_method.clone(),
            status: PaymentStatus::Authorizing,
            provider_ref: None,
            amount_minor: hold.total_minor,
            currency: hold.currency.clone(),
            n_attempts: 0,
        }
    }
}

/// How `begin_checkout` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutBegun {
    /// Order and operation committed; the caller now authorizes, outside any transaction.
    Started {
        order: Box<OrderView>,
        operation: Box<PaymentOperation>,
    },
    /// The key was used before for the same request: its latest stored answer.
    Replayed(StoredResponse),
    KeyReusedWithOtherRequest,
    /// No such hold for this account.
    HoldNotFound,
    /// The hold expired or was released.
    HoldExpired,
    /// The hold is already in checkout (or sold) under another request.
    HoldInCheckout,
}

/// What the provider said about an authorization (from its answer, a webhook, or a
/// reconciler's query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderVerdict {
    Authorized {
        provider_ref: String,
    },
    RequiresAction {
        provider_ref: String,
        next_action_url: Option<String>,
    },
    Captured {
        provider_ref: String,
    },
    Voided {
        provider_ref: String,
    },
    Failed {
        provider_ref: Option<String>,
        reason: String,
    },
    /// The call's outcome is not known (timeout, lost response): never a failure.
    Unknown {
        reason: String,
    },
}

impl ProviderVerdict {
    pub fn payment_status(&self) -> PaymentStatus {
        match self {
            Self::Authorized { .. } => PaymentStatus::Authorized,
            Self::RequiresAction { .. } => PaymentStatus::RequiresAction,
            Self::Captured { .. } => PaymentStatus::Captured,
            Self::Voided { .. } => PaymentStatus::Voided,
            Self::Failed { .. } => PaymentStatus::Failed,
            Self::Unknown { .. } => PaymentStatus::Unknown,
        }
    }

    pub fn provider_ref(&self) -> Option<&str> {
        match self {
            Self::Authorized { provider_ref }
            | Self::RequiresAction { provider_ref, .. }
            | Self::Captured { provider_ref }
            | Self::Voided { provider_ref } => Some(provider_ref),
            Self::Failed { provider_ref, .. } => provider_ref.as_deref(),
            Self::Unknown { .. } => None,
        }
    }
}

/// The result of applying a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The order after the verdict. Its tickets may be left out (PostgreSQL reads them only
    /// when the settlement stores a rendered answer, or when the verdict changed the order).
    pub order: OrderView,
    /// Whether anything changed (false for a stale or duplicated verdict).
    pub changed: bool,
}

/// A message of the transactional outbox, claimed for delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    pub id: i64,
    pub event_id: String,
    pub topic: String,
    pub payload: String,
    pub n_attempts: u32,
    pub created_at: OffsetDateTime,
}

/// A ticket to be issued; the caller signs its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketDraft {
    pub ticket_id: String,
    pub event_id: String,
    pub order_id: String,
    pub seat_id: Option<String>,
    pub tier_id: Option<String>,
    pub unit: u32,
}

/// Signs a ticket draft into its code.
pub type SignTicket = dyn Fn(&TicketDraft) -> String + Send + Sync;

/// The tickets a confirmed order gets, with fresh ids: one per seat (units 1, 2, ... in the
/// order's seat order) or, for a tier order, one per unit.
pub fn ticket_drafts(
    event_id: &str,
    order_id: &str,
    seats: &[crate::HeldSeat],
    tier_id: Option<&str>,
    quantity: u32,
) -> Vec<TicketDraft> {
    let draft = |unit: u32, seat_id: Option<String>| TicketDraft {
        ticket_id: uuid::Uuid::now_v7().to_string(),
        event_id: event_id.to_owned(),
        order_id: order_id.to_owned(),
        seat_id,
        tier_id: tier_id.map(str::to_owned),
        unit,
    };
    match tier_id {
        Some(_) => (1..=quantity).map(|unit| draft(unit, None)).collect(),
        None => seats
            .iter()
            .zip(1..)
            .map(|(seat, unit)| draft(unit, Some(seat.seat_id.clone())))
            .collect(),
    }
}

/// Outbox topics.
pub mod topic {
    pub const HOLD_CREATED: &str = "hold.created";
    pub const HOLD_RELEASED: &str = "hold.released";
    pub const HOLD_EXPIRED: &str = "hold.expired";
    /// Capture the authorization of a confirmed order. Payload `{operationId}`.
    pub const PAYMENT_CAPTURE: &str = "payment.capture";
    /// Void the authorization of a cancelled order. Payload `{operationId}`.
    pub const PAYMENT_VOID: &str = "payment.void";
    /// Issue the tickets of a confirmed order. Payload `{orderId}`.
    pub const TICKETS_ISSUE: &str = "tickets.issue";
    pub const ORDER_CONFIRMED: &str = "order.confirmed";
    pub const ORDER_CANCELLED: &str = "order.cancelled";
    /// Money taken for an order that kept no seat: refund it. Payload `{orderId,
    /// operationId, amountMinor, currency, reason}` (an exchange's has `exchangeId` instead
    /// of `operationId`).
    pub const REFUND_DUE: &str = "refund.due";
}

/// The outbox message that gives an order's money back ([`Undo`], decided by
/// `boxoffice_domain::settlement`): a void of the authorization, or a refund of a capture.
pub fn payment_undo(
    operation: &PaymentOperation,
    undo: Undo,
    reason: &str,
) -> (&'static str, serde_json::Value) {
    match undo {
        Undo::Refund => (
            topic::REFUND_DUE,
            serde_json::json!({
                "orderId": operation.order_id,
                "operationId": operation.operation_id,
                "amountMinor": operation.amount_minor,
                "currency": operation.currency,
                "reason": reason,
            }),
        ),
        Undo::Void => (
            topic::PAYMENT_VOID,
            serde_json::json!({"operationId": operation.operation_id}),
        ),
    }
}

/// How long to wait before asking the provider again about an operation whose outcome is
/// unknown: 1, 2, 4, ... seconds, at most a minute.
pub fn unknown_backoff_s(n_attempts: u32) -> f64 {
    f64::from(1u32 << n_attempts.min(6)).min(60.0)
}

/// The payment operation's row after a verdict, beside its new status: where the shopper
/// goes for 3-D Secure, the provider's error, and when the reconciler looks again.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationUpdate {
    pub next_action_url: Option<String>,
    pub last_error: Option<String>,
    pub recheck_after_s: f64,
}

impl ProviderVerdict {
    /// The operation's other columns once it takes this verdict, `n_attempts` calls made.
    pub fn operation_update(&self, n_attempts: u32) -> OperationUpdate {
        let (next_action_url, recheck_after_s) = match self {
            Self::RequiresAction {
                next_action_url, ..
            } => (next_action_url.clone(), OPERATION_RECHECK_S),
            Self::Unknown { .. } => (None, unknown_backoff_s(n_attempts)),
            _ => (None, OPERATION_RECHECK_S),
        };
        let last_error = match self {
            Self::Failed { reason, .. } | Self::Unknown { reason } => Some(reason.clone()),
            _ => None,
        };
        OperationUpdate {
            next_action_url,
            last_error,
            recheck_after_s,
        }
    }
}
