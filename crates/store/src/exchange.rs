//! Exchanges (rebooking, 改签): a confirmed order's tickets move to new seats or tier units of
//! the same event or another one, all or nothing.
//!
//! Both backends run the same steps in one short transaction ([`crate::Store::begin_exchange`]):
//! lock the order's tickets (they must be `VALID` and not already being exchanged), judge the
//! old event's cutoff by the store's clock, take the new seats (or tier units) all or nothing,
//! check the target event's purchase limit, and then either swap at once (no price increase:
//! old tickets voided, old seats back on sale, a new hold and order `CONFIRMED` for the new
//! seats, the new tickets — signed by the caller beforehand — issued in the same
//! transaction) or hold the new seats and mark the old tickets (price increase: the
//! difference is paid through the checkout machinery, the confirmation transaction does the
//! swap, and the new order is ticketed like any order, through the outbox). PostgreSQL
//! decides a batch of exchanges in one transaction ([`crate::Store::exchange_batch`],
//! [`decide_batch`]). The rules that need no store are here, so that the two backends
//! decide the same way.

use std::collections::BTreeMap;

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
    pub from_event: std::sync::Arc<EventRecord>,
    pub from: FromSide,
    /// The target event (the same one, or another trip).
    pub to_event: std::sync::Arc<EventRecord>,
    pub to: ToSide,
    pub exchange_id: String,
    pub new_hold_id: String,
    pub new_order_id: String,
    pub operation_id: String,
    /// The new order's tickets, signed by the caller, issued in the exchange's own
    /// transaction when it completes at once (so the new tickets exist exactly when the
    /// exchange committed, and can be exchanged again at once). With a price increase they
    /// are not used: the new order is ticketed like any order, after its payment.
    pub new_tickets: Vec<SignedTicket>,
}

/// A ticket drafted and signed before the transaction that issues it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTicket {
    pub draft: crate::checkout::TicketDraft,
    pub code: String,
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

    /// The surrender a pending exchange marked, from its marked tickets' `(ticket id, seat
    /// id)` in unit order (for the final swap after the difference is paid).
    pub fn marked(
        tickets: Vec<(String, Option<String>)>,
        order_tier_id: Option<&str>,
        value_minor: i64,
    ) -> Self {
        let seat_ids = tickets.iter().filter_map(|(_, s)| s.clone()).collect();
        Self {
            tier: order_tier_id.map(|tier_id| (tier_id.to_owned(), tickets.len() as u32)),
            ticket_ids: tickets.into_iter().map(|(t, _)| t).collect(),
            seat_ids,
            value_minor,
        }
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

/// A seat as an exchange batch found it, locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedSeat {
    /// `AVAILABLE`, `HELD` or `SOLD`.
    pub status: String,
    pub hold_expires_at: Option<OffsetDateTime>,
    pub order_id: Option<String>,
}

/// What a batch of exchanges is decided on: read under the batch's locks at `now`.
#[derive(Debug, Clone, Default)]
pub struct BatchFacts {
    /// The order of each exchange (by order id), when the account owns it.
    pub orders: BTreeMap<String, OrderView>,
    /// The tickets of each order, in unit order.
    pub tickets: BTreeMap<String, Vec<OwnedTicket>>,
    /// (event, seat) of every seat the batch names, old and new.
    pub seats: BTreeMap<(String, String), LockedSeat>,
    /// (event, tier) → available units, of every tier the batch names.
    pub tier_available: BTreeMap<(String, String), i64>,
    /// (event, account) → units held or owned there (`quantity - exchanged_out`).
    pub usage: BTreeMap<(String, String), i64>,
}

/// An exchange a batch grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub gone: Surrender,
    pub to_value_minor: i64,
    /// `to_value - from_value`: above 0 the new seats are only held until it is paid.
    pub amount_due_minor: i64,
}

impl Granted {
    pub fn pays(&self) -> bool {
        self.amount_due_minor > 0
    }
}

/// How one exchange of a batch was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    Granted(Granted),
    Refused(ExchangeRefused),
    /// No such order for this account.
    NotFound,
}

/// Decides a batch of exchanges in arrival order, as if each ran alone after the ones
/// before it: a ticket, seat, tier unit or purchase-limit unit an earlier exchange of the
/// batch took is gone for the later ones; what an earlier one gives back is not reused in
/// the same batch. Each is all or nothing. `facts` is updated with the grants.
pub fn decide_batch(
    now: OffsetDateTime,
    starts: &[&ExchangeStart],
    facts: &mut BatchFacts,
) -> Vec<Decided> {
    starts
        .iter()
        .map(|start| decide_one(now, start, facts))
        .collect()
}

fn decide_one(now: OffsetDateTime, start: &ExchangeStart, facts: &mut BatchFacts) -> Decided {
    let Some(order) = facts
        .orders
        .get(&start.order_id)
        .filter(|o| o.account_id == start.scope.account_id)
    else {
        return Decided::NotFound;
    };
    let no_tickets = Vec::new();
    let tickets = facts.tickets.get(&order.order_id).unwrap_or(&no_tickets);
    let gone = match surrender(order, tickets, &start.from).and_then(|gone| {
        judge_times(
            now,
            start.from_event.starts_at,
            start.from_event.exchange_cutoff_s,
            start.to_event.on_sale_at,
            start.to_event.starts_at,
        )
        .map(|()| gone)
    }) {
        Ok(gone) => gone,
        Err(refused) => return Decided::Refused(refused),
    };
    let from_event = order.event_id.clone();
    let to_event = start.to_event.event_id.clone();
    // The old seats are still sold to this order (the tickets say so; the seats must agree).
    for seat_id in &gone.seat_ids {
        let sold_here = facts
            .seats
            .get(&(from_event.clone(), seat_id.clone()))
            .is_some_and(|s| s.status == "SOLD" && s.order_id.as_deref() == Some(&order.order_id));
        if !sold_here {
            return Decided::Refused(ExchangeRefused::Conflict(format!(
                "seat {seat_id} is no longer sold to order {}",
                order.order_id
            )));
        }
    }
    match &start.to {
        ToSide::Seats(seats) => {
            let taken: Vec<String> = seats
                .iter()
                .filter(|want| {
                    !facts
                        .seats
                        .get(&(to_event.clone(), want.seat_id.clone()))
                        .is_some_and(|s| {
                            s.status == "AVAILABLE"
                                || (s.status == "HELD"
                                    && s.hold_expires_at.is_some_and(|until| until <= now))
                        })
                })
                .map(|s| s.seat_id.clone())
                .collect();
            if !taken.is_empty() {
                return Decided::Refused(ExchangeRefused::SeatsUnavailable(taken));
            }
        }
        ToSide::Tier {
            tier_id, quantity, ..
        } => {
            let available = facts
                .tier_available
                .get(&(to_event.clone(), tier_id.clone()))
                .copied()
                .unwrap_or(0);
            if available < i64::from(*quantity) {
                return Decided::Refused(ExchangeRefused::SeatsUnavailable(Vec::new()));
            }
        }
    }
    let account = (to_event.clone(), order.account_id.clone());
    let usage = facts.usage.get(&account).copied().unwrap_or(0);
    let giving_up_here = if from_event == to_event {
        gone.quantity()
    } else {
        0
    };
    let taking = start.to.quantity();
    if !within_limit(
        usage,
        taking,
        giving_up_here,
        start.to_event.max_tickets_per_account,
    ) {
        return Decided::Refused(ExchangeRefused::PurchaseLimit);
    }
    // Granted: what it takes is gone for the rest of the batch.
    let to_value_minor = start.to.value_minor();
    let granted = Granted {
        amount_due_minor: to_value_minor - gone.value_minor,
        to_value_minor,
        gone,
    };
    facts.usage.insert(
        account,
        usage + i64::from(taking) - i64::from(giving_up_here),
    );
    match &start.to {
        ToSide::Seats(seats) => {
            for seat in seats {
                facts.seats.insert(
                    (to_event.clone(), seat.seat_id.clone()),
                    LockedSeat {
                        status: "SOLD".into(),
                        hold_expires_at: None,
                        order_id: None,
                    },
                );
            }
        }
        ToSide::Tier {
            tier_id, quantity, ..
        } => {
            if let Some(available) = facts.tier_available.get_mut(&(to_event, tier_id.clone())) {
                *available -= i64::from(*quantity);
            }
        }
    }
    if let Some(tickets) = facts.tickets.get_mut(&start.order_id) {
        for ticket in tickets
            .iter_mut()
            .filter(|t| granted.gone.ticket_ids.contains(&t.ticket_id))
        {
            ticket.exchange_id = Some(start.exchange_id.clone());
            if !granted.pays() {
                ticket.status = "VOIDED".into();
            }
        }
    }
    for seat_id in &granted.gone.seat_ids {
        // Given back, but not to this batch.
        if let Some(seat) = facts.seats.get_mut(&(from_event.clone(), seat_id.clone()))
            && !granted.pays()
        {
            seat.order_id = None;
        }
    }
    Decided::Granted(granted)
}

/// Outbox topics of exchanges.
pub mod topic {
    /// An exchange completed; its new order is confirmed and ticketed (it stands for that
    /// order's `order.confirmed`). Payload `{exchangeId, orderId, newOrderId}`.
    pub const EXCHANGE_COMPLETED: &str = "exchange.completed";
    /// An exchange lowered the price: money is owed back to the account. Payload
    /// `{exchangeId, orderId, amountMinor, currency}`. Refund accounting consumes it
    /// (outside boxoffice's scope; the relay records delivery).
    pub const REFUND_DUE: &str = crate::checkout::topic::REFUND_DUE;
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

    fn event(id: &str) -> EventRecord {
        crate::event_record(
            id,
            &boxoffice_domain::event::EventSpec {
                name: "trip".into(),
                starts_at: datetime!(2027-01-01 12:00 UTC),
                on_sale_at: Some(datetime!(2026-01-01 12:00 UTC)),
                currency: "EUR".into(),
                hold_ttl_s: 300,
                payment_grace_s: 60,
                max_seats_per_hold: 6,
                max_tickets_per_account: 6,
                exchange_cutoff_s: 3600,
                waiting_room: Default::default(),
                sections: Vec::new(),
                tiers: Vec::new(),
            },
            datetime!(2026-01-01 12:00 UTC),
        )
    }

    fn start(id: &str, from_seat: &str, to_seat: &str) -> ExchangeStart {
        ExchangeStart {
            scope: IdempotencyScope {
                account_id: "ann".into(),
                endpoint: "POST /v1/orders/o/exchanges".into(),
                key: id.into(),
            },
            request_digest: "d".into(),
            order_id: "o".into(),
            from_event: event("e").into(),
            from: FromSide::Seats(vec![from_seat.into()]),
            to_event: event("e").into(),
            to: ToSide::Seats(vec![HeldSeat {
                seat_id: to_seat.into(),
                price_minor: 100,
            }]),
            exchange_id: format!("x-{id}"),
            new_hold_id: format!("h-{id}"),
            new_order_id: format!("o-{id}"),
            operation_id: format!("p-{id}"),
            new_tickets: Vec::new(),
        }
    }

    fn facts() -> BatchFacts {
        let mut facts = BatchFacts::default();
        facts.orders.insert("o".into(), order());
        facts.tickets.insert(
            "o".into(),
            vec![
                ticket("t1", "A-1-1", 1, "VALID", None),
                ticket("t2", "A-1-2", 2, "VALID", None),
            ],
        );
        let seat = |status: &str, order: Option<&str>| LockedSeat {
            status: status.into(),
            hold_expires_at: None,
            order_id: order.map(Into::into),
        };
        for (id, locked) in [
            ("A-1-1", seat("SOLD", Some("o"))),
            ("A-1-2", seat("SOLD", Some("o"))),
            ("B-1-1", seat("AVAILABLE", None)),
            ("B-1-2", seat("AVAILABLE", None)),
            ("B-1-3", seat("SOLD", Some("other"))),
        ] {
            facts.seats.insert(("e".into(), id.into()), locked);
        }
        facts.usage.insert(("e".into(), "ann".into()), 2);
        facts
    }

    #[test]
    fn a_batch_decides_as_if_one_after_the_other() {
        let now = datetime!(2026-12-01 10:00 UTC);
        let asked = [
            start("1", "A-1-1", "B-1-3"), // taken: refused, gives nothing up
            start("2", "A-1-1", "B-1-1"), // the same ticket: granted
            start("3", "A-1-1", "B-1-2"), // the ticket is gone now
            start("4", "A-1-2", "B-1-1"), // the seat is gone now
            start("5", "A-1-2", "A-1-1"), // given back by 2, not to this batch
        ];
        let refs: Vec<&ExchangeStart> = asked.iter().collect();
        let mut facts = facts();
        let decided = decide_batch(now, &refs, &mut facts);
        assert!(
            matches!(&decided[0], Decided::Refused(ExchangeRefused::SeatsUnavailable(s)) if s == &["B-1-3"])
        );
        assert!(
            matches!(&decided[1], Decided::Granted(g) if g.gone.ticket_ids == ["t1"] && !g.pays())
        );
        assert!(matches!(
            &decided[2],
            Decided::Refused(ExchangeRefused::Conflict(_))
        ));
        assert!(matches!(
            &decided[3],
            Decided::Refused(ExchangeRefused::SeatsUnavailable(_))
        ));
        assert!(matches!(
            &decided[4],
            Decided::Refused(ExchangeRefused::SeatsUnavailable(_))
        ));
        // The grant took B-1-1 and voided t1 for the rest of the batch.
        assert_eq!(facts.tickets["o"][0].status, "VOIDED");
        assert_eq!(facts.usage[&("e".to_owned(), "ann".to_owned())], 2);
    }

    #[test]
    fn another_account_or_order_is_not_found() {
        let now = datetime!(2026-12-01 10:00 UTC);
        let mut eve = start("1", "A-1-1", "B-1-1");
        eve.scope.account_id = "eve".into();
        let mut missing = start("2", "A-1-1", "B-1-1");
        missing.order_id = "nope".into();
        let decided = decide_batch(now, &[&eve, &missing], &mut facts());
        assert_eq!(decided, vec![Decided::NotFound, Decided::NotFound]);
    }

    #[test]
    fn the_limit_counts_what_a_same_event_exchange_gives_up() {
        assert!(within_limit(6, 2, 2, 6));
        assert!(!within_limit(6, 2, 0, 6));
    }
}
