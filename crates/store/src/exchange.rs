//! Exchanges (rebooking, 改签): a confirmed order's tickets move to new seats or tier units of
//! the same event or another one, all or nothing.
//!
//! An exchange is a command of the target event's writer
//! (`boxoffice_domain::engine::ExchangeRequest`): the caller picks the tickets given up from
//! the order it read ([`surrender`]), the engine decides the times, the new seats (or tier
//! units), the purchase limit and, for a same-event exchange, the old seats; the group's
//! transaction ([`crate::engine::ExchangeWrite`]) locks the order and the tickets and writes
//! it only if they are still as read, else refuses it alone. Then either the swap happens at
//! once (no price increase: old tickets voided, old seats back on sale, a new hold and order
//! `CONFIRMED` for the new seats, the new tickets — signed by the caller beforehand — issued
//! in the same transaction) or the new seats are held and the old tickets marked (price
//! increase: the difference is paid through the checkout machinery, the confirmation
//! transaction does the swap, and the new order is ticketed like any order, through the
//! outbox). When both events live in one store an exchange across events is one transaction
//! too (DESIGN §7); the old event's writer learns of its freed seats from the change feed.
//! Between events on two shards it takes recorded steps, each a transaction on one shard:
//! the old tickets marked ([`ExchangeOut`], `Store::mark_exchange_out`), the new side taken
//! by the target's writer (`ExchangeStart::across_shards`), then [`settle_out`]: the swap or
//! the marks taken back, by the request or, for what it left open, the exchange settler.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};

use crate::checkout::OrderView;
use boxoffice_domain::engine::ExchangeTakes;
use boxoffice_domain::hold::HoldStatus;

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
    /// The engine's view of what the exchange takes.
    pub fn takes(&self) -> ExchangeTakes {
        match self {
            Self::Seats(seats) => ExchangeTakes::Seats(
                seats
                    .iter()
                    .map(|seat| (seat.seat_id.clone(), seat.price_minor))
                    .collect(),
            ),
            Self::Tier {
                tier_id,
                quantity,
                price_minor,
            } => ExchangeTakes::Tier {
                tier_id: tier_id.clone(),
                quantity: *quantity,
                price_minor: *price_minor,
            },
        }
    }

    pub fn quantity(&self) -> u32 {
        self.takes().quantity()
    }

    pub fn value_minor(&self) -> i64 {
        self.takes().value_minor()
    }
}

/// An exchange as the route asks it. The ids are chosen by the caller.
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
    /// The old event is on another shard than the target (DESIGN §7's two steps): the old
    /// tickets were marked there before ([`Store::mark_exchange_out`]) and are swapped or
    /// given back there after; the target's group writes only the new side and its `IN` row.
    ///
    /// [`Store::mark_exchange_out`]: crate::Store::mark_exchange_out
    pub across_shards: bool,
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
    /// The target event was cancelled.
    EventCancelled,
    /// A new companion seat without a wheelchair space of its section among the new seats.
    CompanionSeatAlone(String),
    /// New wheelchair spaces or companion seats kept for fans who ask for accessible places
    /// until `release_at`.
    SeatKeptAccessible {
        seat_ids: Vec<String>,
        release_at: boxoffice_domain::OffsetDateTime,
    },
}

/// How an exchange was answered by its event's writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeBegun {
    /// Committed: completed at once, or waiting for the difference to be paid.
    Done {
        exchange: Box<ExchangeView>,
        order: Box<OrderView>,
    },
    Refused(ExchangeRefused),
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

/// The refusal of an exchange of an order whose payment is not captured yet. Until the
/// capture the sale can still be compensated (a capture refused for good cancels the order):
/// an exchange before it would leave new tickets paid by nothing, or a refund of money never
/// taken. Judged by [`surrender`] on the order as read, then again under lock by the group
/// ([`crate::engine::exchanges_refused`]) or the old shard's mark (across shards).
pub fn not_captured(order_id: &str) -> ExchangeRefused {
    ExchangeRefused::Conflict(format!(
        "the payment of order {order_id} is not captured yet; try again in a moment"
    ))
}

/// Picks the tickets `from` names among the order's `tickets`, or says why it cannot: the
/// order must be `CONFIRMED` with its payment captured.
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
    if order.payment_status != PaymentStatus::Captured {
        return Err(not_captured(&order.order_id));
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

impl OwnedTicket {
    /// A ticket as an order read shows it (`EXCHANGING` is `VALID` with a mark).
    pub fn from_view(ticket: &crate::checkout::TicketView) -> Self {
        let status = if ticket.status == "EXCHANGING" {
            "VALID".to_owned()
        } else {
            ticket.status.clone()
        };
        Self {
            ticket_id: ticket.ticket_id.clone(),
            seat_id: ticket.seat_id.clone(),
            tier_id: ticket.tier_id.clone(),
            unit: ticket.unit,
            status,
            exchange_id: ticket.exchange_id.clone(),
        }
    }
}

/// When exchanges of an event close: its start minus its exchange cutoff.
pub fn closes_at(event: &EventRecord) -> OffsetDateTime {
    event.starts_at - time::Duration::seconds(i64::from(event.exchange_cutoff_s))
}

/// A granted exchange as its group writes it, and the order it came from as the exchange
/// leaves it (the tickets given up marked, or voided when nothing is due): what its answer is
/// rendered from, before the commit. `now` is the group's clock; `expires_at` the new hold's
/// deadline (the group's clock when sold at once).
pub fn granted(
    start: &ExchangeStart,
    gone: &Surrender,
    order: &OrderView,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
) -> (ExchangeView, OrderView) {
    let to_value_minor = start.to.value_minor();
    let amount_due_minor = to_value_minor - gone.value_minor;
    let pays = amount_due_minor > 0;
    let (seats, tier_id) = match &start.to {
        ToSide::Seats(seats) => (seats.clone(), None),
        ToSide::Tier { tier_id, .. } => (Vec::new(), Some(tier_id.clone())),
    };
    let exchange = ExchangeView {
        exchange_id: start.exchange_id.clone(),
        account_id: order.account_id.clone(),
        order_id: order.order_id.clone(),
        from_event_id: order.event_id.clone(),
        to_event_id: start.to_event.event_id.clone(),
        ticket_ids: gone.ticket_ids.clone(),
        from_value_minor: gone.value_minor,
        new_hold: HoldView {
            hold_id: start.new_hold_id.clone(),
            event_id: start.to_event.event_id.clone(),
            account_id: order.account_id.clone(),
            status: if pays {
                HoldStatus::Held
            } else {
                HoldStatus::Confirmed
            },
            expires_at,
            seats,
            tier_id,
            quantity: start.to.quantity(),
            total_minor: to_value_minor,
            currency: start.to_event.currency.clone(),
            created_at: now,
            updated_at: now,
        },
        new_order_id: (!pays).then(|| start.new_order_id.clone()),
        to_value_minor,
        amount_due_minor,
        currency: start.to_event.currency.clone(),
        status: if pays {
            ExchangeStatus::PaymentRequired
        } else {
            ExchangeStatus::Completed
        },
        created_at: now,
        updated_at: now,
    };
    let mut order = order.clone();
    for ticket in &mut order.tickets {
        if gone.ticket_ids.contains(&ticket.ticket_id) {
            ticket.exchange_id = Some(start.exchange_id.clone());
            ticket.status = if pays { "EXCHANGING" } else { "VOIDED" }.to_owned();
        }
    }
    (exchange, order)
}

/// An exchange across shards as the old event's shard records it (its `OUT` row): the mark
/// on the old tickets, until the target shard's side of the same exchange has come to an end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeOut {
    pub exchange_id: String,
    pub account_id: String,
    pub order_id: String,
    /// The old order's hold (its count of units exchanged out rises with the swap).
    pub old_hold_id: String,
    pub from_event_id: String,
    pub to_event_id: String,
    pub ticket_ids: Vec<String>,
    pub from_value_minor: i64,
    /// The hold of the new seats, on the target's shard.
    pub new_hold_id: String,
    pub to_value_minor: i64,
    pub amount_due_minor: i64,
    pub currency: String,
    pub idempotency_key: String,
    pub status: ExchangeStatus,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl ExchangeOut {
    /// The `OUT` row an exchange starts with (times are the store's, set when written).
    pub fn new(start: &ExchangeStart, gone: &Surrender, order: &OrderView) -> Self {
        let to_value_minor = start.to.value_minor();
        Self {
            exchange_id: start.exchange_id.clone(),
            account_id: order.account_id.clone(),
            order_id: order.order_id.clone(),
            old_hold_id: order.hold_id.clone(),
            from_event_id: order.event_id.clone(),
            to_event_id: start.to_event.event_id.clone(),
            ticket_ids: gone.ticket_ids.clone(),
            from_value_minor: gone.value_minor,
            new_hold_id: start.new_hold_id.clone(),
            to_value_minor,
            amount_due_minor: to_value_minor - gone.value_minor,
            currency: start.to_event.currency.clone(),
            idempotency_key: start.scope.key.clone(),
            status: ExchangeStatus::PaymentRequired,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }
}

/// What became of an exchange across shards on the target's shard (its `IN` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InFate {
    /// The new seats are held until the difference is paid.
    Open,
    /// The new seats are sold: the old side must be swapped out.
    Completed { new_order_id: String },
    /// It ended without a sale (`FAILED` or `EXPIRED`), or never came and cannot come any
    /// more (`FAILED`, its `ABORT` row written): the old tickets get their mark back.
    Ended(ExchangeStatus),
}

/// Brings one exchange across shards forward as far as it can go now: asks the target's
/// shard what became of it (writing its `ABORT` row if it never came and `abort_if_missing`),
/// then swaps the old side out or takes the marks back on the old event's shard. Returns the
/// `OUT` row's status after (`None`: the target's side is not there yet and was left alone,
/// or there is no such `OUT` row). Every step is conditional: a second call, or a call racing
/// another node's, finds nothing more to do.
pub async fn settle_out(
    store: &dyn crate::Store,
    out: &ExchangeOut,
    abort_if_missing: bool,
) -> crate::StoreResult<Option<ExchangeStatus>> {
    let Some(fate) = store.exchange_in_fate(out, abort_if_missing).await? else {
        return Ok(None);
    };
    // `Open` only marks the `OUT` row as looked at, for the next look to wait.
    store
        .finish_exchange_out(&out.from_event_id, &out.exchange_id, &fate)
        .await
}

/// What a round of [`settle_open_exchanges_out`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutRound {
    pub looked: u32,
    pub completed: u32,
    pub ended: u32,
}

/// The settler's round: every exchange across shards still open on its old event's shard
/// and untouched for `look_after_s` seconds (a difference paid or a new hold that ran out
/// since, a request that died between the steps) is brought forward by [`settle_out`]; one
/// that never reached the target's shard, `abort_after_s` seconds after it was marked, is
/// aborted there (longer than any request waits for the target's writer). A failed look is
/// logged and tried again next round.
pub async fn settle_open_exchanges_out(
    store: &dyn crate::Store,
    look_after_s: f64,
    abort_after_s: f64,
    limit: u32,
) -> crate::StoreResult<OutRound> {
    let mut round = OutRound::default();
    let open = store.open_exchanges_out(look_after_s, limit).await?;
    if open.is_empty() {
        return Ok(round);
    }
    let now = store.now().await?;
    let abort_before = now - time::Duration::seconds_f64(abort_after_s);
    for out in open {
        round.looked += 1;
        match settle_out(store, &out, out.created_at <= abort_before).await {
            Ok(Some(ExchangeStatus::Completed)) => round.completed += 1,
            Ok(Some(ExchangeStatus::Failed | ExchangeStatus::Expired)) => round.ended += 1,
            Ok(_) => {}
            Err(e) => tracing::warn!(
                exchange_id = %out.exchange_id,
                error = %e,
                "exchange across shards not settled this round"
            ),
        }
    }
    Ok(round)
}

/// One shard's row of an exchange across shards, as `boxoffice check` compares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegRow {
    pub exchange_id: String,
    /// `OUT`, `IN` or `ABORT`.
    pub leg: String,
    pub status: ExchangeStatus,
    pub updated_at: OffsetDateTime,
}

/// What `boxoffice check` finds between the two sides of exchanges across shards: each `OUT`
/// row (old event's shard) against the row of the same id on the target's shard (`IN` or
/// `ABORT`, `None` when there is none), and each target row without its `OUT` row. An
/// exchange still open (`OUT` waiting) is counted, and a violation only once it has been
/// untouched past `settled_by` (the settler looks at it every few seconds).
pub fn leg_violations(
    outs: &[LegRow],
    targets: &std::collections::BTreeMap<String, LegRow>,
    settled_by: OffsetDateTime,
) -> (Vec<String>, u32) {
    use ExchangeStatus::{Completed, PaymentRequired};
    let mut violations = Vec::new();
    let mut open = 0;
    let mut seen = std::collections::BTreeSet::new();
    for out in outs {
        let xid = &out.exchange_id;
        let target = targets.get(xid);
        seen.insert(xid.as_str());
        let target_done = target.map(|t| (t.leg.as_str(), t.status));
        match (out.status, target_done) {
            (PaymentRequired, _) => {
                open += 1;
                if out.updated_at < settled_by {
                    violations.push(format!(
                        "exchange {xid} is still open on the old event's shard (target side: {})",
                        target.map_or("none".to_owned(), |t| format!(
                            "{} {}",
                            t.leg,
                            t.status.as_str()
                        ))
                    ));
                }
            }
            (Completed, Some(("IN", Completed))) => {}
            (Completed, _) => violations.push(format!(
                "exchange {xid} swapped the old tickets out, but its target side is {}",
                target.map_or("missing".to_owned(), |t| format!(
                    "{} {}",
                    t.leg,
                    t.status.as_str()
                ))
            )),
            (ended, Some(("IN", Completed))) => violations.push(format!(
                "exchange {xid} sold the new side, but the old side is {} (its tickets given back)",
                ended.as_str()
            )),
            _ => {}
        }
    }
    for (xid, target) in targets {
        if !seen.contains(xid.as_str()) {
            violations.push(format!(
                "exchange {xid} has a {} row on the target's shard and none on the old event's",
                target.leg
            ));
        }
    }
    (violations, open)
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
            payment_failure_code: None,
            tickets: Vec::new(),
            refunds: Vec::new(),
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

    fn leg(id: &str, leg: &str, status: ExchangeStatus, at: OffsetDateTime) -> LegRow {
        LegRow {
            exchange_id: id.into(),
            leg: leg.into(),
            status,
            updated_at: at,
        }
    }

    #[test]
    fn the_two_sides_of_an_exchange_across_shards_must_agree() {
        use ExchangeStatus::*;
        let old = datetime!(2026-12-01 10:00 UTC);
        let new = datetime!(2026-12-01 10:10 UTC);
        let settled_by = datetime!(2026-12-01 10:05 UTC);
        let outs = [
            leg("done", "OUT", Completed, old),
            leg("aborted", "OUT", Failed, old),
            leg("paying", "OUT", PaymentRequired, new),
            leg("stuck", "OUT", PaymentRequired, old),
            leg("lost", "OUT", Completed, old),
            leg("both", "OUT", Expired, old),
        ];
        let targets: std::collections::BTreeMap<String, LegRow> = [
            leg("done", "IN", Completed, old),
            leg("aborted", "ABORT", Failed, old),
            leg("paying", "IN", PaymentRequired, new),
            leg("lost", "IN", Expired, old),
            leg("both", "IN", Completed, old),
            leg("orphan", "IN", Completed, old),
        ]
        .into_iter()
        .map(|row| (row.exchange_id.clone(), row))
        .collect();
        let (violations, open) = leg_violations(&outs, &targets, settled_by);
        assert_eq!(open, 2, "{violations:?}");
        let named: Vec<&str> = violations
            .iter()
            .map(|v| v.split(' ').nth(1).unwrap())
            .collect();
        assert_eq!(named, ["stuck", "lost", "both", "orphan"], "{violations:?}");
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
    fn an_order_whose_payment_is_not_captured_yet_conflicts() {
        let tickets = [ticket("t1", "A-1-1", 1, "VALID", None)];
        let from = FromSide::Seats(vec!["A-1-1".into()]);
        for payment_status in [
            PaymentStatus::Authorizing,
            PaymentStatus::RequiresAction,
            PaymentStatus::Authorized,
            PaymentStatus::Unknown,
            PaymentStatus::Voided,
            PaymentStatus::Failed,
        ] {
            let order = OrderView {
                payment_status,
                ..order()
            };
            let refused = surrender(&order, &tickets, &from);
            assert!(
                matches!(&refused, Err(ExchangeRefused::Conflict(d)) if d.contains("not captured")),
                "{payment_status:?}: {refused:?}"
            );
        }
        assert!(surrender(&order(), &tickets, &from).is_ok());
    }
}
