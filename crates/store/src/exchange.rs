//! Exchanges (rebooking, 改签): a confirmed order's tickets move to new seats or tier units of
//! the same event or another one, all or nothing.
//!
//! Both backends run the same steps in one short transaction ([`crate::Store::begin_exchange`]):
//! lock the order's tickets (they must be `VALID` and not already being exchanged), judge the
//! old event's cutoff by the store's clock, take the new seats (or tier units) all or nothing,
//! check the target event's purchase limit, and then either swap at once (no price increase:
//! old tickets voided, old seats back on sale, a new hold and order `CONFIRMED` for the new
//! seats, tickets issued through the outbox) or hold the new seats and mark the old tickets
//! (price increase: the difference is paid through the checkout machinery, and the
//! confirmation transaction does the swap). The rules that need no store are here, so that
//! the two backends decide the same way.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse};
use boxoffice_domain::order::OrderStatus;

use crate::checkout::OrderView;
use crate::{EventRecord, HeldSeat, HoldView};

/// What the exchange gives up: seats of the order, or units of its tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromSide {
    Seats(Vec<String>),
    Tier { tier_id: String, quantity: u32 },
}

/// What the exchange takes in the target event, priced from the target event's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToSide {
    Seats(Vec<HeldSeat>),
    Tier {
        tier_id: String,
        quantity: u32,
        price_minor: i64,
    },
}

impl ToSide {
    pub fn quantity(&self) -> u32 {
        match self {
            Self::Seats(seats) => seats.len() as u32,
            Self::Tier { quantity, .. } => *quantity,
        }
    }

    pub fn value_minor(&self) -> i64 {
        match self {
            Self::Seats(seats) => seats.iter().map(|s| s.price_minor).sum(),
            Self::Tier {
                quantity,
                price_minor,
                ..
            } => i64::from(*quantity) * price_minor,
        }
    }
}

/// What `begin_exchange` is asked to do. The ids are chosen by the caller.
#[derive(Debug, Clone)]
pub struct ExchangeStart {
    pub scope: IdempotencyScope,
    pub request_digest: String,
    pub order_id: String,
    /// The order's event as the caller knows it (events are immutable); the store checks
    /// that the order is still of this event.
    pub from_event: EventRecord,
    pub from: FromSide,
    /// The target event (the same one, or another trip).
    pub to_event: EventRecord,
    pub to: ToSide,
    pub exchange_id: String,
    pub new_hold_id: String,
    pub new_order_id: String,
    pub operation_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeStatus {
    /// New seats held, old tickets marked `EXCHANGING`, the difference not paid yet.
    PaymentRequired,
    /// New seats sold to the account, old tickets voided and their seats back on sale.
    Completed,
    /// The payment failed or the new hold was released: the old tickets are valid again.
    Failed,
    /// The new hold ran out before the payment: the old tickets are valid again.
    Expired,
}

impl ExchangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PaymentRequired => "PAYMENT_REQUIRED",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Expired => "EXPIRED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "PAYMENT_REQUIRED" => Some(Self::PaymentRequired),
            "COMPLETED" => Some(Self::Completed),
            "FAILED" => Some(Self::Failed),
            "EXPIRED" => Some(Self::Expired),
            _ => None,
        }
    }
}

/// An exchange as stored, with the hold of its new seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeView {
    pub exchange_id: String,
    pub account_id: String,
    pub order_id: String,
    pub from_event_id: String,
    pub to_event_id: String,
    pub ticket_ids: Vec<String>,
    pub from_value_minor: i64,
    pub new_hold: HoldView,
    pub new_order_id: Option<String>,
    pub to_value_minor: i64,
    pub amount_due_minor: i64,
    pub currency: String,
    pub status: ExchangeStatus,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Why an exchange was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeRefused {
    /// The old event's start minus its cutoff has passed (or the target has started).
    Closed(String),
    /// Some of the new seats are sold or held by a live hold (or the tier lacks units).
    SeatsUnavailable(Vec<String>),
    /// The tickets are not this order's, not valid, or already being exchanged.
    Conflict(String),
    PurchaseLimit,
    SaleNotOpen,
}

/// How `begin_exchange` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeBegun {
    /// Committed: completed at once, or waiting for the difference to be paid.
    Done {
        exchange: Box<ExchangeView>,
        order: Box<OrderView>,
    },
    Refused(ExchangeRefused),
    /// The key was used before for the same request: its stored answer.
    Replayed(StoredResponse),
    KeyReusedWithOtherRequest,
    /// No such order for this account.
    OrderNotFound,
}

/// Renders the stored answer of a committed exchange from it and the order it came from.
pub type RenderExchange = dyn Fn(&ExchangeView, &OrderView) -> StoredResponse + Send + Sync;

/// One of the order's tickets as the exchange sees it (locked, in unit order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedTicket {
    pub ticket_id: String,
    pub seat_id: Option<String>,
    pub tier_id: Option<String>,
    pub unit: u32,
    /// The stored status: `VALID`, `VOIDED` or `CHECKED_IN`.
    pub status: String,
    /// Set while an exchange has the ticket (with `VALID`), or after one replaced it.
    pub exchange_id: Option<String>,
}

/// The tickets an exchange gives up, with their seats (or tier) and what they cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Surrender {
    pub ticket_ids: Vec<String>,
    pub seat_ids: Vec<String>,
    /// `(tier id, units)` for a tier exchange.
    pub tier: Option<(String, u32)>,
    pub value_minor: i64,
}

impl Surrender {
    pub fn quantity(&self) -> u32 {
        self.ticket_ids.len() as u32
    }
}

/// Picks the tickets `from` names among the order's `tickets`, or says why it cannot.
pub fn surrender(
    order: &OrderView,
    tickets: &[OwnedTicket],
    from: &FromSide,
) -> Result<Surrender, ExchangeRefused> {
    if order.status != OrderStatus::Confirmed {
        return Err(ExchangeRefused::Conflict(format!(
            "order {} is {}, not CONFIRMED",
            order.order_id,
            order.status.as_str()
        )));
    }
    let not_issued = || {
        ExchangeRefused::Conflict(
            "the order's tickets are not issued yet; try again in a moment".into(),
        )
    };
    let unusable = |ticket: &OwnedTicket, what: &str| -> Option<ExchangeRefused> {
        let why = match (ticket.status.as_str(), &ticket.exchange_id) {
            ("VALID", None) => return None,
            ("VALID", Some(_)) => "is already being exchanged",
            ("CHECKED_IN", _) => "was already checked in",
            _ => "is void (exchanged or cancelled)",
        };
        Some(ExchangeRefused::Conflict(format!(
            "the ticket for {what} {why}"
        )))
    };
    match from {
        FromSide::Seats(seat_ids) => {
            let mut picked = Surrender {
                ticket_ids: Vec::new(),
                seat_ids: Vec::new(),
                tier: None,
                value_minor: 0,
            };
            for seat_id in seat_ids {
                let Some(bought) = order.seats.iter().find(|s| &s.seat_id == seat_id) else {
                    return Err(ExchangeRefused::Conflict(format!(
                        "seat {seat_id} is not a seat of order {}",
                        order.order_id
                    )));
                };
                // The live ticket of the seat if there is one, else the last one issued.
                let mut of_seat = tickets
                    .iter()
                    .filter(|t| t.seat_id.as_deref() == Some(seat_id.as_str()));
                let Some(ticket) = of_seat.clone().find(|t| t.status != "VOIDED") else {
                    return Err(match of_seat.next() {
                        Some(voided) => unusable(voided, seat_id).unwrap_or_else(not_issued),
                        None => not_issued(),
                    });
                };
                if let Some(refused) = unusable(ticket, seat_id) {
                    return Err(refused);
                }
                picked.ticket_ids.push(ticket.ticket_id.clone());
                picked.seat_ids.push(seat_id.clone());
                picked.value_minor += bought.price_minor;
            }
            Ok(picked)
        }
        FromSide::Tier { tier_id, quantity } => {
            if order.tier_id.as_deref() != Some(tier_id.as_str()) {
                return Err(ExchangeRefused::Conflict(format!(
                    "order {} has no tickets of tier {tier_id}",
                    order.order_id
                )));
            }
            if (tickets.len() as u32) < order.quantity {
                return Err(not_issued());
            }
            let free: Vec<&OwnedTicket> = tickets
                .iter()
                .filter(|t| t.status == "VALID" && t.exchange_id.is_none())
                .take(*quantity as usize)
                .collect();
            if free.len() < *quantity as usize {
                return Err(ExchangeRefused::Conflict(format!(
                    "only {} tickets of tier {tier_id} in this order can be exchanged",
                    free.len()
                )));
            }
            // What one unit cost when it was bought.
            let unit_price = order.total_minor / i64::from(order.quantity.max(1));
            Ok(Surrender {
                ticket_ids: free.iter().map(|t| t.ticket_id.clone()).collect(),
                seat_ids: Vec::new(),
                tier: Some((tier_id.clone(), *quantity)),
                value_minor: unit_price * i64::from(*quantity),
            })
        }
    }
}

/// The time rules, judged by the store's clock: the old event's start minus its cutoff must
/// be ahead, the target's sale open and its start ahead.
pub fn judge_times(
    now: OffsetDateTime,
    from_starts_at: OffsetDateTime,
    from_cutoff_s: u32,
    to_on_sale_at: OffsetDateTime,
    to_starts_at: OffsetDateTime,
) -> Result<(), ExchangeRefused> {
    let closes_at = from_starts_at - time::Duration::seconds(i64::from(from_cutoff_s));
    if now >= closes_at {
        return Err(ExchangeRefused::Closed(format!(
            "exchanges of this event closed at {closes_at} (its start minus the exchange cutoff)"
        )));
    }
    if now >= to_starts_at {
        return Err(ExchangeRefused::Closed(
            "the target event has already started".into(),
        ));
    }
    if now < to_on_sale_at {
        return Err(ExchangeRefused::SaleNotOpen);
    }
    Ok(())
}

/// The target event's purchase limit: what the account holds or owns there, plus the new
/// units, minus what it gives up there (a same-event exchange), must fit.
pub fn within_limit(
    usage_in_target: i64,
    taking: u32,
    giving_up_in_target: u32,
    max_tickets_per_account: u32,
) -> bool {
    usage_in_target + i64::from(taking) - i64::from(giving_up_in_target)
        <= i64::from(max_tickets_per_account)
}

/// Outbox topics of exchanges.
pub mod topic {
    /// An exchange completed. Payload `{exchangeId, orderId, newOrderId}`.
    pub const EXCHANGE_COMPLETED: &str = "exchange.completed";
    /// An exchange lowered the price: money is owed back to the account. Payload
    /// `{exchangeId, orderId, amountMinor, currency}`. Refund accounting consumes it
    /// (outside boxoffice's scope; the relay records delivery).
    pub const REFUND_DUE: &str = "refund.due";
    /// An exchange ended without completing (payment failed, hold expired or released).
    pub const EXCHANGE_ENDED: &str = "exchange.ended";
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxoffice_domain::order::PaymentStatus;
    use time::macros::datetime;

    fn order() -> OrderView {
        OrderView {
            order_id: "o".into(),
            event_id: "e".into(),
            hold_id: "h".into(),
            account_id: "ann".into(),
            status: OrderStatus::Confirmed,
            payment_status: PaymentStatus::Captured,
            next_action_url: None,
            seats: vec![
                HeldSeat {
                    seat_id: "A-1-1".into(),
                    price_minor: 100,
                },
                HeldSeat {
                    seat_id: "A-1-2".into(),
                    price_minor: 150,
                },
            ],
            tier_id: None,
            quantity: 2,
            total_minor: 250,
            currency: "EUR".into(),
            cancel_reason: None,
            tickets: Vec::new(),
            created_at: datetime!(2026-12-01 10:00 UTC),
            updated_at: datetime!(2026-12-01 10:00 UTC),
        }
    }

    fn ticket(
        id: &str,
        seat: &str,
        unit: u32,
        status: &str,
        exchange: Option<&str>,
    ) -> OwnedTicket {
        OwnedTicket {
            ticket_id: id.into(),
            seat_id: Some(seat.into()),
            tier_id: None,
            unit,
            status: status.into(),
            exchange_id: exchange.map(Into::into),
        }
    }

    #[test]
    fn a_valid_ticket_is_surrendered_at_its_price() {
        let tickets = [
            ticket("t1", "A-1-1", 1, "VALID", None),
            ticket("t2", "A-1-2", 2, "VALID", None),
        ];
        let picked = surrender(&order(), &tickets, &FromSide::Seats(vec!["A-1-2".into()]))
            .expect("surrendered");
        assert_eq!(picked.ticket_ids, vec!["t2".to_owned()]);
        assert_eq!(picked.value_minor, 150);
    }

    #[test]
    fn marked_used_void_unissued_and_foreign_tickets_conflict() {
        let cases = [
            (
                ticket("t1", "A-1-1", 1, "VALID", Some("x")),
                "being exchanged",
            ),
            (ticket("t1", "A-1-1", 1, "CHECKED_IN", None), "checked in"),
            (ticket("t1", "A-1-1", 1, "VOIDED", Some("x")), "void"),
        ];
        for (t, why) in cases {
            let refused = surrender(&order(), &[t], &FromSide::Seats(vec!["A-1-1".into()]));
            assert!(
                matches!(&refused, Err(ExchangeRefused::Conflict(d)) if d.contains(why)),
                "{why}: {refused:?}"
            );
        }
        let unissued = surrender(&order(), &[], &FromSide::Seats(vec!["A-1-1".into()]));
        assert!(matches!(unissued, Err(ExchangeRefused::Conflict(d)) if d.contains("not issued")));
        let foreign = surrender(&order(), &[], &FromSide::Seats(vec!["B-1-1".into()]));
        assert!(matches!(foreign, Err(ExchangeRefused::Conflict(d)) if d.contains("not a seat")));
    }

    #[test]
    fn cutoff_is_judged_against_the_start_minus_the_cutoff() {
        let starts = datetime!(2026-12-01 12:00 UTC);
        let on_sale = datetime!(2026-11-01 12:00 UTC);
        let later = datetime!(2026-12-02 12:00 UTC);
        let open = judge_times(
            datetime!(2026-12-01 10:59 UTC),
            starts,
            3600,
            on_sale,
            later,
        );
        assert_eq!(open, Ok(()));
        let closed = judge_times(
            datetime!(2026-12-01 11:00 UTC),
            starts,
            3600,
            on_sale,
            later,
        );
        assert!(matches!(closed, Err(ExchangeRefused::Closed(_))));
    }

    #[test]
    fn the_limit_counts_what_a_same_event_exchange_gives_up() {
        assert!(within_limit(6, 2, 2, 6));
        assert!(!within_limit(6, 2, 0, 6));
    }
}
