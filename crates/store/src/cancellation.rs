//! Cancelling an event (API.md, "Refunds and cancellation"): the sale stops at once, every
//! buyer gets the money back, exactly once, by a job that survives restarts.
//!
//! The cancellation is a command of the event's writer (`boxoffice_domain::engine::
//! CancelRequest`): from its group on the engine sells nothing, and the group's transaction
//! records the cancellation (one row per event), voids every ticket of the event (`VOIDED`,
//! void reason `EVENT_CANCELLED`: the door bundle revokes them) and writes the
//! [`topic::EVENT_CANCELLED`] message. Tickets of an order confirmed before that commit but
//! issued after it are issued void.
//!
//! The money goes back afterwards, in steps ([`CancellationStore::cancellation_step`]): each
//! step, in one transaction under the cancellation's lock, takes the next paid orders of the
//! event (confirmed, payment authorized or captured, something still owed, no cancellation
//! refund yet) by order id after the step's cursor and records for each a refund of what is
//! still owed (its payment less the refunds that did not fail) under the key
//! [`refund_key`] — unique, so no order is ever refunded twice by the cancellation — with the
//! refund's `refund.requested` message; the relay asks the provider (a captured payment is
//! refunded, an authorization voided). A step that finds nothing after the cursor starts the
//! next one from the beginning; the cancellation is finished once a step from the beginning
//! finds nothing with no payment of the event still out (an order `PENDING_PAYMENT`) and no
//! refund of it `PENDING`, and then the `event.cancelled` message goes out again with the
//! final counts. A crash between steps loses nothing: what a step recorded is committed with
//! its cursor, and a step that did not commit is taken again.

use boxoffice_domain::OffsetDateTime;

use crate::StoreResult;

/// Outbox topics of a cancellation.
pub mod topic {
    /// The event was cancelled (and, again, when every refund settled): the cancellation.
    pub const EVENT_CANCELLED: &str = "event.cancelled";
}

/// The refunds' reason, and the tickets' void reason.
pub const REASON_EVENT_CANCELLED: &str = "EVENT_CANCELLED";
/// Who asks for a cancellation's refunds (the refund's `account_id`).
pub const CANCELLATION_ACCOUNT: &str = "boxoffice:cancellation";
/// Longest reason an organiser may give, in characters.
pub const CANCEL_REASON_LEN_MAX: usize = 500;
/// Most orders one step records refunds for.
pub const CANCELLATION_STEP_MAX: u32 = 1_000;

/// The key of the cancellation's refund of `order_id` (one per order, ever).
pub fn refund_key(order_id: &str) -> String {
    format!("event.cancelled:{order_id}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancellationStatus {
    /// Refunds are still being recorded or paid.
    Cancelling,
    /// Every paid order's money went back (or its refund failed, for the operator).
    Cancelled,
}

impl CancellationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelling => "CANCELLING",
            Self::Cancelled => "CANCELLED",
        }
    }
}

/// A cancellation and how far its refunds got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancellationView {
    pub event_id: String,
    pub reason: String,
    /// The admin who cancelled.
    pub account_id: String,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    /// Paid orders of the event (confirmed; authorized, captured, or voided by a refund).
    pub orders: u64,
    /// Of those, how many have every refund settled and nothing left owed.
    pub refunded: u64,
    /// Of those, how many have a cancellation refund the provider refused (the operator's).
    pub failed: u64,
    /// What the cancellation's refunds gave back so far.
    pub amount_refunded_minor: i64,
    /// The cancellation's refunds recorded and not settled yet.
    pub pending: u64,
}

impl CancellationView {
    pub fn status(&self) -> CancellationStatus {
        if self.finished_at.is_some() {
            CancellationStatus::Cancelled
        } else {
            CancellationStatus::Cancelling
        }
    }

    /// The `event.cancelled` message and webhook: the cancellation as the API shows it.
    pub fn message(&self) -> serde_json::Value {
        serde_json::json!({
            "eventId": self.event_id,
            "status": self.status().as_str(),
            "reason": self.reason,
            "orders": self.orders,
            "refunded": self.refunded,
            "failed": self.failed,
            "amountRefundedMinor": self.amount_refunded_minor,
        })
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CancellationStep {
    /// Refunds recorded.
    pub recorded: u32,
    /// The cancellation is finished (by this step or before).
    pub finished: bool,
}

/// The cancellations' store.
#[async_trait::async_trait]
pub trait CancellationStore: Send + Sync {
    /// The event's cancellation with its counts, and the request's key and digest; `None`
    /// when the event is not cancelled.
    async fn get_cancellation(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<(CancellationView, String, String)>>;

    /// Whether the event is cancelled (one key lookup).
    async fn event_cancelled(&self, event_id: &str) -> StoreResult<bool>;

    /// One step of the event's refunds (see the module): at most `limit` refunds recorded.
    async fn cancellation_step(&self, event_id: &str, limit: u32) -> StoreResult<CancellationStep>;

    /// The events whose cancellation is not finished.
    async fn cancellations_open(&self) -> StoreResult<Vec<String>>;
}
