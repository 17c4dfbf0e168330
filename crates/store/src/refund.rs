//! Refunds: tickets of a confirmed order given back for money (API.md, "Refunds and
//! cancellation").
//!
//! A fan's refund is a command of the event's writer (`boxoffice_domain::engine::
//! RefundRequest`), like a transfer: the engine frees the seats (or units) and the hold counts
//! that many fewer; the group's transaction writes the rest ([`RefundWrite`]): the tickets
//! `VOIDED` with the refund's id, the refund row `PENDING`, and its [`topic::REFUND_REQUESTED`]
//! outbox message. The store judges the order, its payment and the tickets under their locks
//! ([`refunds_refused`]) and refuses a refund alone when any changed since the route read them:
//! exactly one of a refund, an exchange, a transfer and a check-in of one ticket wins,
//! whichever commits first. The relay then asks the provider (a captured payment is
//! refunded; an authorization not yet captured, when nothing valid is left of the order, is
//! voided) and settles the refund `SUCCEEDED` or `FAILED` ([`RefundStore::settle_refund`]),
//! each with its webhook message. A `FAILED` refund is money still owed: it stays on the order
//! for the operator to see, never dropped.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{RefundRequest, RefundTaken};
use boxoffice_domain::event::RefundPolicy;

use crate::engine::{LockedOrder, LockedTicket};
use crate::{EventRecord, StoreResult};

/// Outbox topics of refunds.
pub mod topic {
    /// A refund recorded: `{refundId, eventId, orderId}` (the relay asks the provider).
    pub const REFUND_REQUESTED: &str = "refund.requested";
    /// The provider gave the money back (or the authorization was voided): the refund.
    pub const REFUND_SUCCEEDED: &str = "refund.succeeded";
    /// The provider refused: the money is still owed (the operator's case): the refund.
    pub const REFUND_FAILED: &str = "refund.failed";
}

/// At most this many tickets in one refund (an order has at most this many).
pub const TICKETS_PER_REFUND_MAX: usize = 100;

/// Why a fan's refund was asked for.
pub const REASON_REQUESTED_BY_CUSTOMER: &str = "REQUESTED_BY_CUSTOMER";
/// Why a refund of money owed back was made when its message gives no reason (a cheaper
/// exchange's difference).
pub const REASON_EXCHANGE_DIFFERENCE: &str = "EXCHANGE_DIFFERENCE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundStatus {
    Pending,
    Succeeded,
    Failed,
}

impl RefundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Succeeded => "SUCCEEDED",
            Self::Failed => "FAILED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "PENDING" => Self::Pending,
            "SUCCEEDED" => Self::Succeeded,
            "FAILED" => Self::Failed,
            _ => return None,
        })
    }
}

/// A refund as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundView {
    pub refund_id: String,
    pub event_id: String,
    pub order_id: String,
    /// Who asked (the order's owner for a fan's refund).
    pub account_id: String,
    /// The order's payment operation the money goes back through.
    pub operation_id: String,
    pub ticket_ids: Vec<String>,
    pub amount_minor: i64,
    pub currency: String,
    pub status: RefundStatus,
    pub reason: String,
    /// The provider's refund id, once it answered.
    pub provider_ref: Option<String>,
    /// Why the provider refused (`FAILED`), or why the relay is still asking.
    pub last_error: Option<String>,
    pub created_at: OffsetDateTime,
    pub settled_at: Option<OffsetDateTime>,
}

/// What a refund's group writes besides the engine's effect (the seats freed, the units
/// returned, the hold's count): the refund row `PENDING` under the request's key, the tickets
/// `VOIDED` with its id, and its outbox message. Judged under lock ([`refunds_refused`]).
#[derive(Debug, Clone)]
pub struct RefundWrite {
    /// The refund as it is written (`PENDING`, `created_at` the group's clock).
    pub refund: RefundView,
    /// The request's key and digest (a retry answers the same refund).
    pub idempotency_key: String,
    pub request_digest: String,
    /// The order's hold and owner, as the route read them (the refund's `account_id` is who
    /// asked: the owner, or an organiser).
    pub hold_id: String,
    pub owner_account_id: String,
    /// The tickets' seats (or units) go back on sale; `false` (an organiser's choice) keeps
    /// them sold to the order's hold, off sale.
    pub release_seats: bool,
}

impl RefundWrite {
    /// A refund of `order` asked by `account_id` with `key` (request `digest`), `PENDING` at
    /// `now`; the store fills in the order's payment operation.
    pub fn new(
        order: &crate::checkout::OrderView,
        account_id: &str,
        ticket_ids: Vec<String>,
        amount_minor: i64,
        reason: &str,
        (key, digest): (&str, &str),
        now: OffsetDateTime,
    ) -> Self {
        Self {
            refund: RefundView {
                refund_id: uuid::Uuid::now_v7().to_string(),
                event_id: order.event_id.clone(),
                order_id: order.order_id.clone(),
                account_id: account_id.to_owned(),
                operation_id: String::new(),
                ticket_ids,
                amount_minor,
                currency: order.currency.clone(),
                status: RefundStatus::Pending,
                reason: reason.to_owned(),
                provider_ref: None,
                last_error: None,
                created_at: now,
                settled_at: None,
            },
            idempotency_key: key.to_owned(),
            request_digest: digest.to_owned(),
            hold_id: order.hold_id.clone(),
            owner_account_id: order.account_id.clone(),
            release_seats: true,
        }
    }

    /// The same refund, keeping its tickets' seats (or units) off sale.
    pub fn keeping_seats(mut self) -> Self {
        self.release_seats = false;
        self
    }

    /// The engine's command for this refund's tickets of `order`: their seats, or as many
    /// units of its tier (none when the seats are kept off sale: the engine then only judges
    /// the hold and the tickets, and frees nothing).
    pub fn command(&self, order: &crate::checkout::OrderView) -> RefundRequest {
        let ticket_ids = &self.refund.ticket_ids;
        if !self.release_seats {
            return RefundRequest {
                refund_id: self.refund.refund_id.clone(),
                account_id: order.account_id.clone(),
                hold_id: order.hold_id.clone(),
                seat_ids: Vec::new(),
                tier: None,
                ticket_ids: ticket_ids.clone(),
            };
        }
        RefundRequest {
            refund_id: self.refund.refund_id.clone(),
            account_id: order.account_id.clone(),
            hold_id: order.hold_id.clone(),
            seat_ids: order
                .tickets
                .iter()
                .filter(|t| ticket_ids.contains(&t.ticket_id))
                .filter_map(|t| t.seat_id.clone())
                .collect(),
            tier: order
                .tier_id
                .clone()
                .map(|tier_id| (tier_id, ticket_ids.len() as u32)),
            ticket_ids: ticket_ids.clone(),
        }
    }
}

/// What a group's refunds are judged on, locked.
#[derive(Debug, Clone, Default)]
pub struct RefundFacts {
    pub orders: BTreeMap<String, LockedOrder>,
    /// Orders whose payment may be refunded (authorized or captured).
    pub paid: BTreeSet<String>,
    pub tickets: BTreeMap<String, LockedTicket>,
    /// Tickets in an open transfer offer (`OFFERED`, not past its deadline).
    pub offered: BTreeSet<String>,
    /// `(account, key)` of the refund keys already used.
    pub used_keys: BTreeSet<(String, String)>,
    /// What may still go back per order: its payment's amount less its refunds that did not
    /// fail.
    pub refundable: BTreeMap<String, i64>,
}

/// The command indexes of the refunds the store refuses alone, judged in order: the key
/// already used (or by an earlier refund of the group); the order no longer `CONFIRMED` with
/// its payment authorized or captured, or not the one read; more than its payment less its
/// refunds; a ticket no longer `VALID`, unmarked and offered to nobody (or taken by an earlier
/// refund of the group).
pub fn refunds_refused(
    refunds: &[(&RefundTaken, &RefundWrite)],
    mut facts: RefundFacts,
) -> Vec<usize> {
    let mut refused = Vec::new();
    for (taken, write) in refunds {
        let refund = &write.refund;
        if !facts
            .used_keys
            .insert((refund.account_id.clone(), write.idempotency_key.clone()))
        {
            refused.push(taken.index);
            continue;
        }
        let order_ok = facts.orders.get(&refund.order_id).is_some_and(|order| {
            order.status == "CONFIRMED"
                && order.account_id == write.owner_account_id
                && order.event_id == refund.event_id
                && order.hold_id == write.hold_id
        }) && facts.paid.contains(&refund.order_id);
        let left = facts.refundable.get(&refund.order_id).copied().unwrap_or(0);
        let amount_ok = refund.amount_minor <= left;
        let tickets_ok = refund.ticket_ids.iter().all(|ticket_id| {
            !facts.offered.contains(ticket_id)
                && facts.tickets.get(ticket_id).is_some_and(|ticket| {
                    ticket.order_id == refund.order_id
                        && ticket.status == "VALID"
                        && ticket.exchange_id.is_none()
                })
        });
        if !(order_ok && amount_ok && tickets_ok) {
            refused.push(taken.index);
            continue;
        }
        facts
            .refundable
            .insert(refund.order_id.clone(), left - refund.amount_minor);
        for ticket_id in &refund.ticket_ids {
            if let Some(ticket) = facts.tickets.get_mut(ticket_id) {
                ticket.status = "VOIDED".into();
            }
        }
    }
    refused
}

/// The outbox message of a refund recorded (the relay's).
pub fn requested_message(refund: &RefundView) -> serde_json::Value {
    serde_json::json!({
        "refundId": refund.refund_id,
        "eventId": refund.event_id,
        "orderId": refund.order_id,
    })
}

/// The webhook message of a settled refund: the refund as the API shows it.
pub fn settled_message(refund: &RefundView) -> serde_json::Value {
    let rfc3339 = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    };
    serde_json::json!({
        "refundId": refund.refund_id,
        "eventId": refund.event_id,
        "orderId": refund.order_id,
        "ticketIds": refund.ticket_ids,
        "amountMinor": refund.amount_minor,
        "currency": refund.currency,
        "status": refund.status.as_str(),
        "reason": refund.reason,
        "failure": refund.last_error,
        "createdAt": rfc3339(refund.created_at),
        "settledAt": refund.settled_at.map(rfc3339),
    })
}

/// Why a fan may not refund on their own at the store's clock `now`: the event has no
/// refund policy, or its cutoff before the start has passed. `None` when they may.
pub fn fan_refund_closed(event: &EventRecord, now: OffsetDateTime) -> Option<String> {
    let Some(policy) = &event.refund_policy else {
        return Some("this event takes no refunds from fans (it has no refundPolicy)".into());
    };
    let closes_at = fan_refund_closes_at(event, policy);
    (now >= closes_at).then(|| {
        format!(
            "refunds closed {}s before the event's start",
            policy.fan_refund_cutoff_s
        )
    })
}

/// When fans' refunds of an event close: its start minus the policy's cutoff.
pub fn fan_refund_closes_at(event: &EventRecord, policy: &RefundPolicy) -> OffsetDateTime {
    event.starts_at - time::Duration::seconds(i64::from(policy.fan_refund_cutoff_s))
}

/// What a fan gets back for tickets bought for `prices_minor`: each price less the policy's
/// kept fee, never below nothing.
pub fn fan_refund_amount(policy: &RefundPolicy, prices_minor: &[i64]) -> i64 {
    prices_minor
        .iter()
        .map(|price| (price - policy.keep_fee_minor).max(0))
        .sum()
}

/// How the provider settled a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundSettled {
    /// The money went back (`provider_ref`: the provider's refund, or the voided payment).
    Succeeded { provider_ref: Option<String> },
    /// Refused for good: the money is still owed.
    Failed {
        provider_ref: Option<String>,
        reason: String,
    },
}

/// The refunds side of a store. Every call is routed by the event.
#[async_trait::async_trait]
pub trait RefundStore: Send + Sync {
    async fn get_refund(&self, event_id: &str, refund_id: &str) -> StoreResult<Option<RefundView>>;

    /// The refund `account_id` asked for with `key`, and its request digest.
    async fn refund_by_key(
        &self,
        event_id: &str,
        account_id: &str,
        key: &str,
    ) -> StoreResult<Option<(RefundView, String)>>;

    /// An organiser's refund of money alone (no ticket voided, nothing freed), in one
    /// transaction: under the order's lock the order must be `CONFIRMED` and paid (authorized
    /// or captured) and `write.refund.amount_minor` at most its payment less its refunds that
    /// did not fail; the refund is written `PENDING` with its outbox message. `Err`: why not.
    async fn refund_money(&self, write: &RefundWrite) -> StoreResult<Result<RefundView, String>>;

    /// Money owed back (a `refund.due` message: a cheaper exchange's difference, a capture
    /// of an order that kept nothing) recorded as a refund with no ticket, once per
    /// `write.idempotency_key`: the key's refund when it has one; else under the order's lock,
    /// in any status, its payment captured and the amount within what it took less its
    /// refunds; written `PENDING` with its outbox message. `Err`: why not.
    async fn record_refund_due(
        &self,
        write: &RefundWrite,
    ) -> StoreResult<Result<RefundView, String>>;

    /// The event's refund policy as stored now (`None`: no such event; `Some(None)`: fans
    /// cannot refund). The server caches events; the policy alone may change after creation.
    async fn event_refund_policy(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<Option<RefundPolicy>>>;

    /// Sets (or, with `None`, removes) the event's refund policy; `false`: no such event.
    async fn set_refund_policy(
        &self,
        event_id: &str,
        policy: Option<RefundPolicy>,
    ) -> StoreResult<bool>;

    /// A `PENDING` refund settles, once, with its webhook message; the refund as it is after
    /// (already settled: unchanged).
    async fn settle_refund(
        &self,
        event_id: &str,
        refund_id: &str,
        settled: &RefundSettled,
    ) -> StoreResult<Option<RefundView>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_fee_never_makes_a_refund_negative() {
        let policy = RefundPolicy {
            fan_refund_cutoff_s: 0,
            keep_fee_minor: 300,
        };
        assert_eq!(fan_refund_amount(&policy, &[5_000, 200, 300]), 4_700);
    }
}
