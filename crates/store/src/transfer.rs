//! Ticket transfers between accounts: the giver offers tickets of a confirmed order to
//! another account, which accepts or declines.
//!
//! The offer is one short transaction of the store ([`TransferStore::offer_transfer`]): it
//! changes no inventory, so it does not go through the event's writer. Accepting does: it is a
//! command of the event engine (`boxoffice_domain::engine::TransferRequest`), which moves the
//! seats (or units) from the giver's confirmed hold to a new confirmed hold of the receiver —
//! no capacity is consumed — and checks the receiver's purchase limit; the group's
//! transaction writes the rest ([`TransferWrite`]): the old tickets voided, the receiver's new
//! order, its tickets, the offer `ACCEPTED`. The store judges the offer, the order, its payment
//! and the tickets under their locks ([`transfers_refused`]) and refuses a transfer alone when
//! any changed since the route read them (a check-in, an exchange, a decline, a lapse).

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::TransferTaken;

use crate::HeldSeat;
use crate::StoreResult;
use crate::engine::{LockedOrder, LockedTicket};
use crate::exchange::SignedTicket;

/// Outbox topics of transfers (notifications: the relay logs them for a notifier).
pub mod topic {
    /// An offer was made: `{transferId, eventId, orderId, fromAccountId, toAccountId,
    /// ticketIds, expiresAt}` (for the receiver).
    pub const TRANSFER_OFFERED: &str = "transfer.offered";
    /// Accepted: `{transferId, eventId, orderId, newOrderId, fromAccountId, toAccountId,
    /// ticketIds, newTicketIds}` (for both parties; the old tickets are void).
    pub const TRANSFER_ACCEPTED: &str = "transfer.accepted";
    /// Declined by the receiver, or withdrawn by the giver: `{transferId, fromAccountId,
    /// toAccountId}`.
    pub const TRANSFER_DECLINED: &str = "transfer.declined";
    pub const TRANSFER_WITHDRAWN: &str = "transfer.withdrawn";
}

/// How long an offer stays open at most (it also closes with the event's transfer cutoff).
pub const OFFER_TTL_S: i64 = 7 * 24 * 3600;

/// At most this many tickets in one offer.
pub const TICKETS_PER_TRANSFER_MAX: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferStatus {
    Offered,
    Accepted,
    Declined,
    Withdrawn,
    /// An offer past its deadline (stored `OFFERED`; read as `EXPIRED` by the store's clock).
    Expired,
}

impl TransferStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Offered => "OFFERED",
            Self::Accepted => "ACCEPTED",
            Self::Declined => "DECLINED",
            Self::Withdrawn => "WITHDRAWN",
            Self::Expired => "EXPIRED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "OFFERED" => Self::Offered,
            "ACCEPTED" => Self::Accepted,
            "DECLINED" => Self::Declined,
            "WITHDRAWN" => Self::Withdrawn,
            "EXPIRED" => Self::Expired,
            _ => return None,
        })
    }
}

/// A transfer as stored, its status read by the store's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferView {
    pub transfer_id: String,
    pub event_id: String,
    pub order_id: String,
    pub from_account_id: String,
    pub to_account_id: String,
    pub ticket_ids: Vec<String>,
    pub status: TransferStatus,
    pub expires_at: OffsetDateTime,
    /// The receiver's order, once accepted.
    pub new_order_id: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Which side of transfers an account lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferRole {
    Given,
    Received,
}

/// An offer to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferOffer {
    /// The giver's request (account, endpoint, key).
    pub scope: boxoffice_domain::idempotency::IdempotencyScope,
    pub request_digest: String,
    pub transfer_id: String,
    pub event_id: String,
    pub order_id: String,
    pub to_account_id: String,
    pub ticket_ids: Vec<String>,
}

/// Why an offer was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferRefused {
    /// No such order of the giver's.
    OrderNotFound,
    /// The key was used with another request.
    KeyReused,
    /// Past the event's transfer cutoff (store clock).
    Closed,
    /// A ticket is not the order's, not valid (checked in, void), being exchanged or already
    /// offered, or the order's payment is not captured yet: why.
    Conflict(String),
}

/// An offer made now, or the one the key made before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    Created(TransferView),
    Replayed(TransferView),
}

/// The transfers side of a store.
#[async_trait::async_trait]
pub trait TransferStore: Send + Sync {
    /// In one transaction: the key's earlier offer (same digest) is answered again; else the
    /// order must be the giver's and `CONFIRMED` with its payment captured, every ticket the
    /// order's, `VALID`, unmarked and in no open offer, and the store's clock before
    /// `closes_at`; the offer is written `OFFERED` until the earlier of `closes_at` and
    /// [`OFFER_TTL_S`] from now, with its outbox message.
    async fn offer_transfer(
        &self,
        offer: &TransferOffer,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<Offered, OfferRefused>>;

    async fn get_transfer(&self, transfer_id: &str) -> StoreResult<Option<TransferView>>;

    /// The account's transfers on one side, newest first, at most `limit`.
    async fn list_transfers(
        &self,
        account_id: &str,
        role: TransferRole,
        limit: u32,
    ) -> StoreResult<Vec<TransferView>>;

    /// An open offer ends: `Declined` by its receiver, `Withdrawn` by its giver (`account_id`
    /// must be that party, else `None` as for no transfer). Conditional on `OFFERED` and not
    /// past its deadline; the transfer as it is after (already ended: unchanged).
    async fn end_transfer(
        &self,
        transfer_id: &str,
        account_id: &str,
        to: TransferStatus,
    ) -> StoreResult<Option<TransferView>>;
}

/// The expiry of a new offer: a week from `now`, or the transfer cutoff if sooner.
pub fn offer_expires_at(now: OffsetDateTime, closes_at: OffsetDateTime) -> OffsetDateTime {
    (now + time::Duration::seconds(OFFER_TTL_S)).min(closes_at)
}

/// When transfers of an event close: its start minus its transfer cutoff.
pub fn closes_at(event: &crate::EventRecord) -> OffsetDateTime {
    event.starts_at - time::Duration::seconds(i64::from(event.transfer_cutoff_s))
}

/// What a transfer's group writes besides the engine's effect (the seats' hold, the old
/// hold's count): the offer `ACCEPTED`, the old tickets `VOIDED`, the receiver's order (its
/// payment settled by the giver's: an operation of provider `transfer`, `CAPTURED`, 0), its
/// tickets signed by the caller, and the outbox message. Judged under lock
/// ([`transfers_refused`]).
#[derive(Debug, Clone)]
pub struct TransferWrite {
    /// The offer as the route read it (`OFFERED`).
    pub transfer: TransferView,
    /// The giver's order's hold.
    pub old_hold_id: String,
    pub new_hold_id: String,
    pub new_order_id: String,
    pub operation_id: String,
    /// The seats moved and the prices they were bought for (none for a tier).
    pub seats: Vec<HeldSeat>,
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub total_minor: i64,
    pub currency: String,
    pub new_tickets: Vec<SignedTicket>,
}

/// A transfer as its group reads it under lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedTransfer {
    /// The stored status (`OFFERED` past its deadline stays `OFFERED` here).
    pub status: String,
    pub expires_at: OffsetDateTime,
    pub order_id: String,
    pub from_account_id: String,
    pub to_account_id: String,
}

/// What a group's transfers are judged on, locked.
#[derive(Debug, Clone, Default)]
pub struct TransferFacts {
    pub transfers: BTreeMap<String, LockedTransfer>,
    pub orders: BTreeMap<String, LockedOrder>,
    /// Orders whose payment is captured (or settled by an exchange or a transfer).
    pub captured: BTreeSet<String>,
    pub tickets: BTreeMap<String, LockedTicket>,
}

/// The command indexes of the transfers the store refuses alone, judged in order at the
/// group's clock `now`: the offer no longer `OFFERED` or past its deadline, or not the one
/// read; the order no longer `CONFIRMED` with its payment captured, or not the one read; a
/// ticket no longer `VALID` and unmarked (or taken by an earlier transfer of the group).
pub fn transfers_refused(
    transfers: &[(&TransferTaken, &TransferWrite)],
    mut facts: TransferFacts,
    now: OffsetDateTime,
) -> Vec<usize> {
    let mut refused = Vec::new();
    for (taken, write) in transfers {
        let offer = &write.transfer;
        let transfer_ok = facts
            .transfers
            .get(&offer.transfer_id)
            .is_some_and(|locked| {
                locked.status == "OFFERED"
                    && locked.expires_at > now
                    && locked.order_id == offer.order_id
                    && locked.from_account_id == offer.from_account_id
                    && locked.to_account_id == offer.to_account_id
            });
        let order_ok = facts.orders.get(&offer.order_id).is_some_and(|order| {
            order.status == "CONFIRMED"
                && order.account_id == offer.from_account_id
                && order.event_id == offer.event_id
                && order.hold_id == write.old_hold_id
        }) && facts.captured.contains(&offer.order_id);
        let tickets_ok = offer.ticket_ids.iter().all(|ticket_id| {
            facts.tickets.get(ticket_id).is_some_and(|ticket| {
                ticket.order_id == offer.order_id
                    && ticket.status == "VALID"
                    && ticket.exchange_id.is_none()
            })
        });
        if !(transfer_ok && order_ok && tickets_ok) {
            refused.push(taken.index);
            continue;
        }
        for ticket_id in &offer.ticket_ids {
            if let Some(ticket) = facts.tickets.get_mut(ticket_id) {
                ticket.status = "VOIDED".into();
            }
        }
        if let Some(locked) = facts.transfers.get_mut(&offer.transfer_id) {
            locked.status = "ACCEPTED".into();
        }
    }
    refused
}

/// The outbox message of an accepted transfer.
pub fn accepted_message(write: &TransferWrite) -> serde_json::Value {
    let offer = &write.transfer;
    serde_json::json!({
        "transferId": offer.transfer_id,
        "eventId": offer.event_id,
        "orderId": offer.order_id,
        "newOrderId": write.new_order_id,
        "fromAccountId": offer.from_account_id,
        "toAccountId": offer.to_account_id,
        "ticketIds": offer.ticket_ids,
        "newTicketIds": write.new_tickets.iter().map(|t| t.draft.ticket_id.as_str()).collect::<Vec<_>>(),
    })
}

/// The outbox message of a new offer.
pub fn offered_message(view: &TransferView) -> serde_json::Value {
    serde_json::json!({
        "transferId": view.transfer_id,
        "eventId": view.event_id,
        "orderId": view.order_id,
        "fromAccountId": view.from_account_id,
        "toAccountId": view.to_account_id,
        "ticketIds": view.ticket_ids,
        "expiresAt": view.expires_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
    })
}

/// The outbox message of an offer declined or withdrawn.
pub fn ended_message(view: &TransferView) -> serde_json::Value {
    serde_json::json!({
        "transferId": view.transfer_id,
        "fromAccountId": view.from_account_id,
        "toAccountId": view.to_account_id,
    })
}

/// Why an offer of `ticket_ids` from `order` is refused, judged on the order's tickets as
/// read under lock and the ticket ids of the order's open offers: `None` when it may be made.
pub fn offer_conflict(
    ticket_ids: &[String],
    order_tickets: &BTreeMap<String, LockedTicket>,
    offered: &BTreeSet<String>,
) -> Option<String> {
    for ticket_id in ticket_ids {
        let Some(ticket) = order_tickets.get(ticket_id) else {
            return Some(format!("ticket {ticket_id} is not one of the order's"));
        };
        if ticket.exchange_id.is_some() && ticket.status == "VALID" {
            return Some(format!("ticket {ticket_id} is being exchanged"));
        }
        match ticket.status.as_str() {
            "VALID" => {}
            "CHECKED_IN" => return Some(format!("ticket {ticket_id} is checked in")),
            _ => return Some(format!("ticket {ticket_id} is void")),
        }
        if offered.contains(ticket_id) {
            return Some(format!("ticket {ticket_id} is already offered"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(order: &str, status: &str, exchange: Option<&str>) -> LockedTicket {
        LockedTicket {
            order_id: order.into(),
            status: status.into(),
            exchange_id: exchange.map(str::to_owned),
        }
    }

    #[test]
    fn an_offer_is_refused_for_a_ticket_used_exchanged_void_foreign_or_offered() {
        let tickets: BTreeMap<String, LockedTicket> = [
            ("t-1", ticket("o", "VALID", None)),
            ("t-2", ticket("o", "CHECKED_IN", None)),
            ("t-3", ticket("o", "VALID", Some("x"))),
            ("t-4", ticket("o", "VOIDED", Some("x"))),
            ("t-5", ticket("o", "VALID", None)),
        ]
        .into_iter()
        .map(|(id, t)| (id.to_owned(), t))
        .collect();
        let offered: BTreeSet<String> = ["t-5".to_owned()].into();
        let why = |ids: &[&str]| {
            let ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
            offer_conflict(&ids, &tickets, &offered)
        };
        assert_eq!(why(&["t-1"]), None);
        assert_eq!(
            why(&["t-1", "t-2"]).as_deref(),
            Some("ticket t-2 is checked in")
        );
        assert_eq!(
            why(&["t-3"]).as_deref(),
            Some("ticket t-3 is being exchanged")
        );
        assert_eq!(why(&["t-4"]).as_deref(), Some("ticket t-4 is void"));
        assert_eq!(
            why(&["t-9"]).as_deref(),
            Some("ticket t-9 is not one of the order's")
        );
        assert_eq!(
            why(&["t-5"]).as_deref(),
            Some("ticket t-5 is already offered")
        );
    }
}
