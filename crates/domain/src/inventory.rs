//! The whole inventory of one event as plain data, and [`Inventory::invariants`]: the
//! single-condition checks of DESIGN.md's I1-I8 (I6 as far as rows show it) that must hold after every
//! transition. Tests call it after each step; `boxoffice check` loads a live database into
//! this shape and calls the same function.

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

use crate::decide::TierRow;
use crate::hold::{HoldStatus, SeatStatus};
use crate::order::{OrderStatus, PaymentStatus};

/// A seat as stored, with what a sale would point to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatRecord {
    pub seat_id: String,
    pub status: SeatStatus,
    pub hold_id: Option<String>,
    pub hold_expires_at: Option<OffsetDateTime>,
    pub order_id: Option<String>,
}

/// A hold as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRecord {
    pub hold_id: String,
    pub event_id: String,
    pub account_id: String,
    pub status: HoldStatus,
    pub expires_at: OffsetDateTime,
    pub seat_ids: Vec<String>,
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub idempotency_key: String,
    /// Units of a confirmed hold that left by exchange.
    pub exchanged_out: u32,
    /// The sale phase the hold was granted in.
    pub phase_id: Option<String>,
}

/// An order as stored, with its payment status and how many of its tickets are not voided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub order_id: String,
    pub hold_id: String,
    pub account_id: String,
    pub status: OrderStatus,
    pub payment_status: PaymentStatus,
    pub seat_ids: Vec<String>,
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub live_tickets: u32,
    /// A `refund.due` names the order's payment (a capture that came after it was
    /// cancelled is given back).
    pub refund_recorded: bool,
    /// What its payment operation took (0 for the order a transfer gave its receiver: the
    /// giver's order paid, and gets the money back).
    pub paid_minor: i64,
}

/// A ticket as stored, with the status of the exchange it names (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketRecord {
    pub ticket_id: String,
    pub order_id: String,
    pub seat_id: Option<String>,
    /// `VALID`, `VOIDED` or `CHECKED_IN` (a valid ticket with an exchange id is exchanging).
    pub status: String,
    pub exchange_id: Option<String>,
    pub exchange_status: Option<String>,
    /// The accepted transfer that voided the ticket (its seat went to the receiver's order).
    pub transfer_id: Option<String>,
    /// The refund that voided the ticket (its seat went back on sale).
    pub refund_id: Option<String>,
}

/// An exchange that gives up tickets of this event: its status, the tickets it names, and
/// the stored status of the hold of its new seats (which may be in another event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeRecord {
    pub exchange_id: String,
    pub status: String,
    pub ticket_ids: Vec<String>,
    pub new_hold_status: HoldStatus,
}

/// One event's seats, tiers, holds and orders, read at one instant of the store's clock.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub event_id: String,
    pub now: OffsetDateTime,
    pub max_tickets_per_account: u32,
    pub seats: Vec<SeatRecord>,
    pub tiers: Vec<TierRow>,
    pub holds: Vec<HoldRecord>,
    pub orders: Vec<OrderRecord>,
    pub tickets: Vec<TicketRecord>,
    pub exchanges: Vec<ExchangeRecord>,
    /// The event's waiting list.
    pub waitlist: Vec<WaitlistRecord>,
    /// The event's refunds.
    pub refunds: Vec<RefundRecord>,
    /// The event's cancellation, when it was cancelled.
    pub cancellation: Option<CancellationRecord>,
    /// The event's sale phases (`crate::phase`).
    pub phases: Vec<crate::phase::Phase>,
    /// The orders whose holds have priced lines (issue 40), with the lines' sum.
    pub order_prices: Vec<OrderPriceRecord>,
    /// The event's wheelchair spaces and companion seats (issue 41; none without a chart).
    pub accessibility: crate::accessibility::Accessibility,
}

/// An order's total beside the sum of its hold's priced lines (the order's fees included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderPriceRecord {
    pub order_id: String,
    pub total_minor: i64,
    pub lines_minor: i64,
}

/// An event's cancellation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancellationRecord {
    /// Its job found nothing more to refund, no payment out and no refund pending.
    pub finished: bool,
}

/// A refund as stored, with what its order's payment took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRecord {
    pub refund_id: String,
    pub order_id: String,
    pub ticket_ids: Vec<String>,
    pub amount_minor: i64,
    /// `PENDING`, `SUCCEEDED` or `FAILED`.
    pub status: String,
    /// The amount of the order's payment operation.
    pub paid_minor: i64,
    /// Its tickets' seats (or units) went back on sale; `false`: kept sold to the order.
    pub seats_released: bool,
}

/// A waiting-list entry as stored: its status (`WAITING`, `OFFERED`, `PURCHASED`, `LAPSED`,
/// `LEFT`) and the hold its offer is (or will be).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistRecord {
    pub waitlist_id: String,
    pub account_id: String,
    pub status: String,
    pub offer_hold_id: String,
}

/// One broken invariant: which one, and exactly where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `I1`..`I7`, as numbered in DESIGN.md.
    pub invariant: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

impl Inventory {
    /// Every violated invariant; empty when the inventory is sound.
    pub fn invariants(&self) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut fail =
            |invariant: &'static str, detail: String| out.push(Violation { invariant, detail });
        let holds: BTreeMap<&str, &HoldRecord> =
            self.holds.iter().map(|h| (h.hold_id.as_str(), h)).collect();
        let seats: BTreeMap<&str, &SeatRecord> =
            self.seats.iter().map(|s| (s.seat_id.as_str(), s)).collect();

        for seat in &self.seats {
            let id = &seat.seat_id;
            match seat.status {
                SeatStatus::Available => {
                    if seat.hold_id.is_some() {
                        fail("I3", format!("available seat {id} still points to a hold"));
                    }
                    if seat.order_id.is_some() {
                        fail(
                            "I1",
                            format!("available seat {id} still points to an order"),
                        );
                    }
                }
                SeatStatus::Sold => {
                    if seat.order_id.is_none() {
                        fail("I1", format!("sold seat {id} points to no order"));
                    }
                }
                SeatStatus::Held => {
                    let Some(hold_id) = &seat.hold_id else {
                        fail("I3", format!("held seat {id} points to no hold"));
                        continue;
                    };
                    let Some(hold) = holds.get(hold_id.as_str()) else {
                        fail(
                            "I3",
                            format!("held seat {id} points to missing hold {hold_id}"),
                        );
                        continue;
                    };
                    if !matches!(hold.status, HoldStatus::Held | HoldStatus::PaymentPending) {
                        fail(
                            "I3",
                            format!(
                                "held seat {id} points to hold {hold_id} in {}",
                                hold.status.as_str()
                            ),
                        );
                    }
                    if seat.hold_expires_at != Some(hold.expires_at) {
                        fail(
                            "I3",
                            format!("held seat {id} has another deadline than hold {hold_id}"),
                        );
                    }
                    if !hold.seat_ids.contains(id) {
                        fail(
                            "I3",
                            format!("held seat {id} is not among the seats of hold {hold_id}"),
                        );
                    }
                    if hold.event_id != self.event_id {
                        fail(
                            "I3",
                            format!("held seat {id} points to hold {hold_id} of another event"),
                        );
                    }
                }
            }
        }

        // A live hold claims each of its seats: each must point back to it. Two live holds
        // on one seat would make one of them fail this check.
        let mut claimed_by: BTreeMap<&str, &str> = BTreeMap::new();
        let mut usage: BTreeMap<&str, u64> = BTreeMap::new();
        let mut held_by_tier: BTreeMap<&str, i64> = BTreeMap::new();
        for hold in &self.holds {
            let hid = &hold.hold_id;
            let live = hold.status.is_live(hold.expires_at, self.now);
            if live || hold.status == HoldStatus::Confirmed {
                *usage.entry(hold.account_id.as_str()).or_default() +=
                    u64::from(hold.quantity.saturating_sub(hold.exchanged_out));
            }
            if let Some(tier_id) = &hold.tier_id {
                if !hold.seat_ids.is_empty() {
                    fail("I3", format!("hold {hid} names both a tier and seats"));
                }
                if matches!(hold.status, HoldStatus::Held | HoldStatus::PaymentPending) {
                    *held_by_tier.entry(tier_id.as_str()).or_default() += i64::from(hold.quantity);
                }
                continue;
            }
            if u32::try_from(hold.seat_ids.len()).ok() != Some(hold.quantity) {
                fail(
                    "I3",
                    format!(
                        "hold {hid} quantity {} differs from its {} seats",
                        hold.quantity,
                        hold.seat_ids.len()
                    ),
                );
            }
            for seat_id in &hold.seat_ids {
                let Some(seat) = seats.get(seat_id.as_str()) else {
                    fail(
                        "I3",
                        format!("hold {hid} names seat {seat_id} that this event does not have"),
                    );
                    continue;
                };
                if !live {
                    continue;
                }
                if seat.status != SeatStatus::Held || seat.hold_id.as_deref() != Some(hid.as_str())
                {
                    fail(
                        "I5",
                        format!(
                            "live hold {hid} lost seat {seat_id} (seat is {} for {:?})",
                            seat.status.as_str(),
                            seat.hold_id
                        ),
                    );
                }
                if let Some(other) = claimed_by.insert(seat_id.as_str(), hid.as_str()) {
                    fail(
                        "I1",
                        format!("seat {seat_id} is claimed by live holds {other} and {hid}"),
                    );
                }
            }
        }

        for tier in &self.tiers {
            let tid = &tier.tier_id;
            if tier.available < 0 || tier.held < 0 || tier.sold < 0 {
                fail(
                    "I4",
                    format!(
                        "tier {tid} has a negative count ({}/{}/{})",
                        tier.available, tier.held, tier.sold
                    ),
                );
            }
            if tier.available + tier.held + tier.sold != tier.capacity {
                fail(
                    "I4",
                    format!(
                        "tier {tid}: available {} + held {} + sold {} != capacity {}",
                        tier.available, tier.held, tier.sold, tier.capacity
                    ),
                );
            }
            let held_by_holds = held_by_tier.get(tid.as_str()).copied().unwrap_or(0);
            if tier.held != held_by_holds {
                fail(
                    "I4",
                    format!(
                        "tier {tid} counts {} held but its holds hold {held_by_holds}",
                        tier.held
                    ),
                );
            }
        }
        let tier_ids: BTreeSet<&str> = self.tiers.iter().map(|t| t.tier_id.as_str()).collect();
        for hold in &self.holds {
            if let Some(tier_id) = &hold.tier_id
                && !tier_ids.contains(tier_id.as_str())
            {
                fail(
                    "I4",
                    format!("hold {} names unknown tier {tier_id}", hold.hold_id),
                );
            }
        }

        for (account, n) in usage {
            // What an allocation keeps is no purchase (`crate::allocation`).
            if n > u64::from(self.max_tickets_per_account)
                && !crate::allocation::is_allocation_account(account)
            {
                fail(
                    "I7",
                    format!(
                        "account {account} holds or owns {n} > limit {}",
                        self.max_tickets_per_account
                    ),
                );
            }
        }

        // What each order gave up by completed exchanges, accepted transfers and refunds: those
        // places are no longer its own.
        // (A refund that kept its seats off sale gave nothing up: they stay the order's.)
        let kept: BTreeSet<&str> = self
            .refunds
            .iter()
            .filter(|r| !r.seats_released)
            .map(|r| r.refund_id.as_str())
            .collect();
        let mut gone_seats: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut gone_units: BTreeMap<&str, u32> = BTreeMap::new();
        for ticket in &self.tickets {
            let exchanged = ticket.exchange_status.as_deref() == Some("COMPLETED");
            let refunded = ticket
                .refund_id
                .as_deref()
                .is_some_and(|rid| !kept.contains(rid));
            let moved = exchanged || ticket.transfer_id.is_some() || refunded;
            if ticket.status == "VOIDED" && moved {
                *gone_units.entry(ticket.order_id.as_str()).or_default() += 1;
                if let Some(seat_id) = &ticket.seat_id {
                    gone_seats
                        .entry(ticket.order_id.as_str())
                        .or_default()
                        .insert(seat_id.as_str());
                }
            }
        }
        let effective: Vec<OrderRecord> = self
            .orders
            .iter()
            .map(|o| {
                let gone = gone_seats.get(o.order_id.as_str());
                OrderRecord {
                    seat_ids: o
                        .seat_ids
                        .iter()
                        .filter(|s| !gone.is_some_and(|g| g.contains(s.as_str())))
                        .cloned()
                        .collect(),
                    quantity: o
                        .quantity
                        .saturating_sub(gone_units.get(o.order_id.as_str()).copied().unwrap_or(0)),
                    ..o.clone()
                }
            })
            .collect();
        for hold in &self.holds {
            let gone = self
                .orders
                .iter()
                .find(|o| o.hold_id == hold.hold_id)
                .and_then(|o| gone_units.get(o.order_id.as_str()))
                .copied()
                .unwrap_or(0);
            if hold.exchanged_out != gone {
                fail(
                    "I9",
                    format!(
                        "hold {} counts {} units exchanged out, its order's tickets {gone}",
                        hold.hold_id, hold.exchanged_out
                    ),
                );
            }
        }
        let orders: BTreeMap<&str, &OrderRecord> =
            effective.iter().map(|o| (o.order_id.as_str(), o)).collect();
        for seat in self.seats.iter().filter(|s| s.status == SeatStatus::Sold) {
            let id = &seat.seat_id;
            let Some(order) = seat.order_id.as_deref().and_then(|o| orders.get(o)) else {
                fail("I1", format!("sold seat {id} points to a missing order"));
                continue;
            };
            if order.status != OrderStatus::Confirmed {
                fail(
                    "I1",
                    format!(
                        "sold seat {id} points to order {} in {}",
                        order.order_id,
                        order.status.as_str()
                    ),
                );
            }
            if !order.seat_ids.contains(id) {
                fail(
                    "I1",
                    format!(
                        "sold seat {id} is not among the seats of order {}",
                        order.order_id
                    ),
                );
            }
        }
        let mut sold_by_tier: BTreeMap<&str, i64> = BTreeMap::new();
        for order in &effective {
            let oid = &order.order_id;
            if order.status == OrderStatus::Confirmed {
                for seat_id in &order.seat_ids {
                    let owned = seats.get(seat_id.as_str()).is_some_and(|s| {
                        s.status == SeatStatus::Sold && s.order_id.as_deref() == Some(oid.as_str())
                    });
                    if !owned {
                        fail(
                            "I2",
                            format!("confirmed order {oid} does not own seat {seat_id}"),
                        );
                    }
                }
                if let Some(tier_id) = &order.tier_id {
                    *sold_by_tier.entry(tier_id.as_str()).or_default() += i64::from(order.quantity);
                }
                if order.live_tickets != 0 && order.live_tickets != order.quantity {
                    fail(
                        "I2",
                        format!(
                            "confirmed order {oid} has {} tickets for {} places",
                            order.live_tickets, order.quantity
                        ),
                    );
                }
                if order.payment_status == PaymentStatus::Voided
                    || order.payment_status == PaymentStatus::Failed
                {
                    fail(
                        "I8",
                        format!(
                            "confirmed order {oid} has a {} payment",
                            order.payment_status.as_str()
                        ),
                    );
                }
            } else if order.live_tickets != 0 {
                fail(
                    "I2",
                    format!(
                        "order {oid} in {} has {} live tickets",
                        order.status.as_str(),
                        order.live_tickets
                    ),
                );
            }
            if order.status == OrderStatus::Cancelled
                && order.payment_status == PaymentStatus::Authorized
            {
                fail(
                    "I8",
                    format!("cancelled order {oid} keeps an open authorization"),
                );
            }
            if order.status == OrderStatus::Cancelled
                && order.payment_status == PaymentStatus::Captured
                && !order.refund_recorded
            {
                fail("I8", format!("cancelled order {oid} was captured"));
            }
        }
        for tier in &self.tiers {
            let sold_by_orders = sold_by_tier
                .get(tier.tier_id.as_str())
                .copied()
                .unwrap_or(0);
            if tier.sold != sold_by_orders {
                fail(
                    "I4",
                    format!(
                        "tier {} counts {} sold but its confirmed orders hold {sold_by_orders}",
                        tier.tier_id, tier.sold
                    ),
                );
            }
        }

        // I9 (exchanges): a seat is sold to at most one live ticket, the ticket of the order
        // the seat points to; a ticket is either valid or replaced by a completed exchange,
        // never both and never neither.
        let mut live_by_seat: BTreeMap<&str, Vec<&TicketRecord>> = BTreeMap::new();
        for ticket in &self.tickets {
            let tid = &ticket.ticket_id;
            let live = matches!(ticket.status.as_str(), "VALID" | "CHECKED_IN");
            if let Some(seat_id) = ticket.seat_id.as_deref().filter(|_| live) {
                live_by_seat.entry(seat_id).or_default().push(ticket);
                let owner_order = orders
                    .get(ticket.order_id.as_str())
                    .is_some_and(|o| o.status == OrderStatus::Confirmed);
                let seat_points_here = seats.get(seat_id).is_some_and(|s| {
                    s.status == SeatStatus::Sold
                        && s.order_id.as_deref() == Some(ticket.order_id.as_str())
                });
                if owner_order && !seat_points_here {
                    fail(
                        "I9",
                        format!(
                            "live ticket {tid} is for seat {seat_id}, which is not sold to its order {}",
                            ticket.order_id
                        ),
                    );
                }
            }
            match (ticket.status.as_str(), ticket.exchange_status.as_deref()) {
                (_, None) if ticket.exchange_id.is_some() => {
                    fail("I9", format!("ticket {tid} names a missing exchange"))
                }
                ("VALID", Some(x)) if x != "PAYMENT_REQUIRED" => fail(
                    "I9",
                    format!("ticket {tid} is still marked by an exchange that is {x}"),
                ),
                ("VOIDED", Some(x)) if x != "COMPLETED" => fail(
                    "I9",
                    format!("ticket {tid} was voided by an exchange that is {x}"),
                ),
                ("CHECKED_IN", Some(_)) => fail(
                    "I9",
                    format!("ticket {tid} was checked in while an exchange had it"),
                ),
                _ => {}
            }
        }
        for (seat_id, live) in live_by_seat {
            if live.len() > 1 {
                let ids: Vec<&str> = live.iter().map(|t| t.ticket_id.as_str()).collect();
                fail(
                    "I9",
                    format!(
                        "seat {seat_id} has {} live tickets: {}",
                        live.len(),
                        ids.join(", ")
                    ),
                );
            }
        }
        let tickets: BTreeMap<&str, &TicketRecord> = self
            .tickets
            .iter()
            .map(|t| (t.ticket_id.as_str(), t))
            .collect();
        for exchange in &self.exchanges {
            let xid = &exchange.exchange_id;
            let (want_status, want_mark, want_hold): (&str, Option<&str>, &[HoldStatus]) =
                match exchange.status.as_str() {
                    "COMPLETED" => ("VOIDED", Some(xid.as_str()), &[HoldStatus::Confirmed]),
                    "PAYMENT_REQUIRED" => (
                        "VALID",
                        Some(xid.as_str()),
                        &[HoldStatus::Held, HoldStatus::PaymentPending],
                    ),
                    // Ended unpaid: the new hold never sold (it may outlive the exchange
                    // when a compensation ended it; its sale is then refused).
                    _ => (
                        "",
                        None,
                        &[
                            HoldStatus::Released,
                            HoldStatus::Expired,
                            HoldStatus::Held,
                            HoldStatus::PaymentPending,
                        ],
                    ),
                };
            if !want_hold.contains(&exchange.new_hold_status) {
                fail(
                    "I9",
                    format!(
                        "exchange {xid} is {} but the hold of its new seats is {}",
                        exchange.status,
                        exchange.new_hold_status.as_str()
                    ),
                );
            }
            for ticket_id in &exchange.ticket_ids {
                let Some(ticket) = tickets.get(ticket_id.as_str()) else {
                    fail(
                        "I9",
                        format!("exchange {xid} names missing ticket {ticket_id}"),
                    );
                    continue;
                };
                let fine = match want_mark {
                    Some(mark) => {
                        ticket.status == want_status && ticket.exchange_id.as_deref() == Some(mark)
                    }
                    None => ticket.exchange_id.as_deref() != Some(xid.as_str()),
                };
                if !fine {
                    fail(
                        "I9",
                        format!(
                            "exchange {xid} is {} but its ticket {ticket_id} is {} (exchange {:?})",
                            exchange.status, ticket.status, ticket.exchange_id
                        ),
                    );
                }
            }
        }

        // I10 (refunds): a ticket voided by a refund is one its refund names, of the same
        // order; every ticket a refund names is void by it; an order's refunds that did not
        // fail give back at most what its payment took.
        let refunds: BTreeMap<&str, &RefundRecord> = self
            .refunds
            .iter()
            .map(|r| (r.refund_id.as_str(), r))
            .collect();
        for ticket in &self.tickets {
            let Some(rid) = ticket.refund_id.as_deref() else {
                continue;
            };
            let named = refunds.get(rid).is_some_and(|r| {
                r.order_id == ticket.order_id && r.ticket_ids.contains(&ticket.ticket_id)
            });
            if !named || ticket.status != "VOIDED" {
                fail(
                    "I10",
                    format!(
                        "ticket {} is {} by refund {rid}, which does not name it",
                        ticket.ticket_id, ticket.status
                    ),
                );
            }
        }
        let mut given_back: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for refund in &self.refunds {
            for ticket_id in &refund.ticket_ids {
                let void_by_it = tickets.get(ticket_id.as_str()).is_some_and(|t| {
                    t.status == "VOIDED"
                        && t.refund_id.as_deref() == Some(refund.refund_id.as_str())
                });
                if !void_by_it {
                    fail(
                        "I10",
                        format!(
                            "refund {} names ticket {ticket_id}, which it did not void",
                            refund.refund_id
                        ),
                    );
                }
            }
            if refund.status != "FAILED" {
                let entry = given_back
                    .entry(refund.order_id.as_str())
                    .or_insert((0, refund.paid_minor));
                entry.0 += refund.amount_minor;
            }
        }
        for (order_id, (back, paid)) in given_back {
            if back > paid {
                fail(
                    "I10",
                    format!("order {order_id}'s refunds give back {back}, its payment took {paid}"),
                );
            }
        }

        let mut keys = BTreeSet::new();
        for hold in &self.holds {
            if !keys.insert((hold.account_id.as_str(), hold.idempotency_key.as_str())) {
                fail(
                    "I6",
                    format!(
                        "account {} has two holds under key {:?}",
                        hold.account_id, hold.idempotency_key
                    ),
                );
            }
        }
        // I10 (the waiting list): an entry that was offered names a hold of its own account
        // (a purchased one, a confirmed hold); a waiting one has no hold yet; an account
        // waits at most once, and has at most one live entry (waiting, or offered with its
        // hold live). Two offers of one seat would be two live holds of it (I3).
        let holds_by_id: BTreeMap<&str, &HoldRecord> =
            self.holds.iter().map(|h| (h.hold_id.as_str(), h)).collect();
        let mut live_entries: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for entry in &self.waitlist {
            let wid = &entry.waitlist_id;
            let hold = holds_by_id.get(entry.offer_hold_id.as_str());
            match (entry.status.as_str(), hold) {
                ("WAITING", Some(_)) => fail(
                    "I10",
                    format!("waiting entry {wid} already has its offer's hold"),
                ),
                ("WAITING", None) | ("LEFT", None) => {}
                ("OFFERED" | "PURCHASED" | "LAPSED", None) => fail(
                    "I10",
                    format!("entry {wid} was offered a hold that does not exist"),
                ),
                (_, Some(hold)) if hold.account_id != entry.account_id => fail(
                    "I10",
                    format!("entry {wid}'s offer is a hold of another account"),
                ),
                ("PURCHASED", Some(hold)) if hold.status != HoldStatus::Confirmed => fail(
                    "I10",
                    format!("purchased entry {wid}'s hold is {}", hold.status.as_str()),
                ),
                _ => {}
            }
            let live = entry.status == "WAITING"
                || (entry.status == "OFFERED"
                    && hold.is_some_and(|h| {
                        matches!(h.status, HoldStatus::Held | HoldStatus::PaymentPending)
                            && h.expires_at > self.now
                    }));
            if live {
                live_entries
                    .entry(entry.account_id.as_str())
                    .or_default()
                    .push(wid);
            }
        }
        for (account, entries) in live_entries {
            if entries.len() > 1 {
                fail(
                    "I10",
                    format!(
                        "account {account} has {} live waiting-list entries: {}",
                        entries.len(),
                        entries.join(", ")
                    ),
                );
            }
        }

        // I11 (a cancelled event): every ticket is void; once the cancellation is finished,
        // no payment is out and every paid order's money went back, its refunds settled,
        // or a refund of it failed (money still owed, the operator's to see).
        if let Some(cancellation) = &self.cancellation {
            for ticket in &self.tickets {
                if ticket.status != "VOIDED" {
                    fail(
                        "I11",
                        format!(
                            "ticket {} of the cancelled event is {}",
                            ticket.ticket_id, ticket.status
                        ),
                    );
                }
            }
            if cancellation.finished {
                let mut refunds_of: BTreeMap<&str, Vec<&RefundRecord>> = BTreeMap::new();
                for refund in &self.refunds {
                    refunds_of
                        .entry(refund.order_id.as_str())
                        .or_default()
                        .push(refund);
                }
                for order in &self.orders {
                    let oid = &order.order_id;
                    if order.status == OrderStatus::PendingPayment {
                        fail(
                            "I11",
                            format!("order {oid} is still out after the cancellation finished"),
                        );
                        continue;
                    }
                    // A transfer's order took nothing: the giver's paid, and is refunded.
                    let paid = order.status == OrderStatus::Confirmed
                        && order.paid_minor > 0
                        && matches!(
                            order.payment_status,
                            PaymentStatus::Authorized | PaymentStatus::Captured
                        );
                    if !paid {
                        continue;
                    }
                    let refunds = refunds_of.get(oid.as_str()).map_or(&[][..], Vec::as_slice);
                    let failed = refunds.iter().any(|r| r.status == "FAILED");
                    let pending = refunds.iter().any(|r| r.status == "PENDING");
                    let back: i64 = refunds
                        .iter()
                        .filter(|r| r.status == "SUCCEEDED")
                        .map(|r| r.amount_minor)
                        .sum();
                    let took = refunds.first().map(|r| r.paid_minor);
                    let whole = took.is_some_and(|took| back >= took);
                    if pending || !(whole || failed) {
                        fail(
                            "I11",
                            format!(
                                "paid order {oid} of the finished cancellation got {back} back \
                                 ({} refunds, none failed{})",
                                refunds.len(),
                                if pending { ", one pending" } else { "" }
                            ),
                        );
                    }
                }
            }
        }
        // I12 (sale phases): no hold or ticket of a phase lies outside the phase's sections
        // and tiers, and every phase a hold names is one of the event's.
        for hold in &self.holds {
            let Some(phase_id) = &hold.phase_id else {
                continue;
            };
            let Some(phase) = self.phases.iter().find(|p| &p.phase_id == phase_id) else {
                fail(
                    "I12",
                    format!(
                        "hold {} names phase {phase_id}, which the event has not",
                        hold.hold_id
                    ),
                );
                continue;
            };
            for seat_id in &hold.seat_ids {
                let section = crate::ids::SeatRef::parse(seat_id).map(|seat| seat.section);
                if section.is_ok_and(|section| !phase.sells_section(&section)) {
                    fail(
                        "I12",
                        format!(
                            "hold {} of phase {phase_id} has seat {seat_id}, outside the phase",
                            hold.hold_id
                        ),
                    );
                }
            }
            if let Some(tier_id) = &hold.tier_id
                && !phase.sells_tier(tier_id)
            {
                fail(
                    "I12",
                    format!(
                        "hold {} of phase {phase_id} has tier {tier_id}, outside the phase",
                        hold.hold_id
                    ),
                );
            }
        }
        // I13 (the companion rule): no held or sold companion seat without a wheelchair space
        // of its section in the same hold (an order's seats are its hold's).
        for hold in &self.holds {
            let kept = matches!(
                hold.status,
                HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
            );
            if !kept {
                continue;
            }
            if let Some(seat_id) = self.accessibility.companion_alone(&hold.seat_ids) {
                fail(
                    "I13",
                    format!(
                        "hold {} ({}) has companion seat {seat_id} without a wheelchair space of its section",
                        hold.hold_id,
                        hold.status.as_str()
                    ),
                );
            }
        }
        // P1: an order costs what its lines say — every ticket's all-in price and the
        // order's fees — whatever re-priced it (a promo code rewrites both together).
        for price in &self.order_prices {
            if price.total_minor != price.lines_minor {
                fail(
                    "P1",
                    format!(
                        "order {} totals {} but its lines sum to {}",
                        price.order_id, price.total_minor, price.lines_minor
                    ),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn sold_inventory() -> Inventory {
        Inventory {
            cancellation: None,
            event_id: "e".into(),
            now: datetime!(2026-12-01 10:00 UTC),
            max_tickets_per_account: 6,
            seats: vec![SeatRecord {
                seat_id: "A-1-1".into(),
                status: SeatStatus::Sold,
                hold_id: Some("h".into()),
                hold_expires_at: None,
                order_id: Some("o".into()),
            }],
            tiers: Vec::new(),
            holds: vec![HoldRecord {
                hold_id: "h".into(),
                event_id: "e".into(),
                account_id: "ann".into(),
                status: HoldStatus::Confirmed,
                expires_at: datetime!(2026-12-01 10:05 UTC),
                seat_ids: vec!["A-1-1".into()],
                tier_id: None,
                quantity: 1,
                idempotency_key: "k".into(),
                exchanged_out: 0,
                phase_id: None,
            }],
            orders: vec![OrderRecord {
                order_id: "o".into(),
                hold_id: "h".into(),
                account_id: "ann".into(),
                status: OrderStatus::Confirmed,
                payment_status: PaymentStatus::Captured,
                seat_ids: vec!["A-1-1".into()],
                tier_id: None,
                quantity: 1,
                live_tickets: 1,
                refund_recorded: false,
                paid_minor: 1000,
            }],
            tickets: vec![TicketRecord {
                ticket_id: "t".into(),
                order_id: "o".into(),
                seat_id: Some("A-1-1".into()),
                status: "VALID".into(),
                exchange_id: None,
                exchange_status: None,
                transfer_id: None,
                refund_id: None,
            }],
            exchanges: Vec::new(),
            waitlist: Vec::new(),
            refunds: Vec::new(),
            phases: Vec::new(),
            order_prices: vec![OrderPriceRecord {
                order_id: "o".into(),
                total_minor: 1000,
                lines_minor: 1000,
            }],
            accessibility: Default::default(),
        }
    }

    #[test]
    fn a_companion_seat_sold_without_its_wheelchair_space_is_named() {
        use crate::accessibility::{AccessKind, Accessibility};
        let mut inventory = sold_inventory();
        inventory.accessibility = Accessibility::from_kinds(
            [
                ("A-1-1".to_owned(), AccessKind::Companion),
                ("A-1-2".to_owned(), AccessKind::Wheelchair),
            ],
            None,
        );
        let found: Vec<String> = inventory
            .invariants()
            .into_iter()
            .filter(|v| v.invariant == "I13")
            .map(|v| v.detail)
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("companion seat A-1-1"), "{found:?}");
        // With its space in the same hold, clean.
        inventory.holds[0].seat_ids.push("A-1-2".into());
        assert!(
            inventory.invariants().iter().all(|v| v.invariant != "I13"),
            "{:?}",
            inventory.invariants()
        );
    }

    #[test]
    fn an_order_whose_lines_do_not_sum_to_its_total_is_named() {
        let mut inventory = sold_inventory();
        inventory.order_prices[0].lines_minor = 999;
        let found: Vec<&str> = inventory
            .invariants()
            .iter()
            .map(|v| v.invariant)
            .collect::<Vec<_>>();
        assert_eq!(found, vec!["P1"]);
    }

    #[test]
    fn a_refund_must_name_the_tickets_it_voided_and_stay_within_the_payment() {
        let mut inventory = sold_inventory();
        inventory.refunds.push(RefundRecord {
            refund_id: "r".into(),
            order_id: "o".into(),
            ticket_ids: vec!["t".into()],
            amount_minor: 5_000,
            status: "PENDING".into(),
            paid_minor: 1_000,
            seats_released: true,
        });
        let found: Vec<String> = inventory
            .invariants()
            .into_iter()
            .filter(|v| v.invariant == "I10")
            .map(|v| v.detail)
            .collect();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("which it did not void"), "{found:?}");
        assert!(found[1].contains("give back 5000"), "{found:?}");
    }

    #[test]
    fn a_ticket_of_a_lane_outside_the_lane_is_named() {
        let phase = |sections: &[&str]| crate::phase::Phase {
            phase_id: "fanclub".into(),
            name: "Fan club".into(),
            starts_at: datetime!(2026-12-01 09:00 UTC),
            ends_at: None,
            access: crate::phase::PhaseAccess::Code,
            sections: sections.iter().map(|s| (*s).to_owned()).collect(),
            tiers: Vec::new(),
            max_tickets_per_account: None,
            waiting_room: None,
        };
        let mut inventory = sold_inventory();
        inventory.holds[0].phase_id = Some("fanclub".into());
        inventory.phases = vec![phase(&["A"])];
        assert_eq!(inventory.invariants(), Vec::new());
        // The planted bug: the lane sold a seat of a section it does not sell.
        inventory.phases = vec![phase(&["B"])];
        let found = inventory.invariants();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, "I12");
        assert!(found[0].detail.contains("seat A-1-1"), "{found:?}");
        inventory.phases.clear();
        let found = inventory.invariants();
        assert!(
            found[0].detail.contains("which the event has not"),
            "{found:?}"
        );
    }

    #[test]
    fn a_sound_sale_passes() {
        assert_eq!(sold_inventory().invariants(), Vec::new());
    }

    #[test]
    fn each_planted_sale_fault_is_named() {
        type Plant = fn(&mut Inventory);
        let cases: [(&str, Plant); 9] = [
            // A second live ticket for the seat (an exchange that sold it twice).
            ("I9", |inv| {
                let mut twin = inv.tickets[0].clone();
                twin.ticket_id = "t2".into();
                inv.tickets.push(twin);
            }),
            // The old ticket still valid although its exchange completed (both).
            ("I9", |inv| {
                inv.tickets[0].exchange_id = Some("x".into());
                inv.tickets[0].exchange_status = Some("COMPLETED".into());
            }),
            // An exchange that failed but left its mark (the ticket could never be used).
            ("I9", |inv| {
                inv.tickets[0].exchange_id = Some("x".into());
                inv.tickets[0].exchange_status = Some("FAILED".into());
            }),
            ("I1", |inv| inv.orders[0].status = OrderStatus::Cancelled),
            ("I1", |inv| inv.seats[0].order_id = Some("ghost".into())),
            ("I2", |inv| inv.orders[0].live_tickets = 2),
            ("I8", |inv| {
                inv.orders[0].status = OrderStatus::Cancelled;
                inv.orders[0].payment_status = PaymentStatus::Authorized;
            }),
            ("I2", |inv| inv.seats[0].status = SeatStatus::Available),
            // Money kept for an order that kept no seat, with no refund recorded.
            ("I8", |inv| inv.orders[0].status = OrderStatus::Cancelled),
        ];
        for (expected, plant) in cases {
            let mut inventory = sold_inventory();
            plant(&mut inventory);
            let violations = inventory.invariants();
            assert!(
                violations.iter().any(|v| v.invariant == expected),
                "{expected}: {violations:?}"
            );
        }
    }

    #[test]
    fn a_refunded_capture_of_a_cancelled_order_is_not_an_i8_violation() {
        let mut inventory = sold_inventory();
        inventory.orders[0].status = OrderStatus::Cancelled;
        inventory.orders[0].refund_recorded = true;
        let violations = inventory.invariants();
        assert!(
            violations.iter().all(|v| v.invariant != "I8"),
            "{violations:?}"
        );
        inventory.orders[0].refund_recorded = false;
        assert!(inventory.invariants().iter().any(|v| v.invariant == "I8"));
    }

    #[test]
    fn waiting_list_faults_are_named() {
        let hold = |inv: &Inventory| inv.holds[0].clone();
        let entry = |status: &str, account: &str, hold_id: &str| WaitlistRecord {
            waitlist_id: format!("w-{status}-{account}"),
            account_id: account.into(),
            status: status.into(),
            offer_hold_id: hold_id.into(),
        };
        // Sound: the sold hold was a purchased offer; another account waits.
        let mut sound = sold_inventory();
        let sold = hold(&sound);
        sound.waitlist = vec![
            entry("PURCHASED", &sold.account_id, &sold.hold_id),
            entry("WAITING", "zed", "h-not-yet"),
        ];
        assert_eq!(sound.invariants(), Vec::new());
        type Plant = fn(&mut Inventory);
        let cases: [Plant; 4] = [
            // Offered a hold that is not there.
            |inv| inv.waitlist[1].status = "OFFERED".into(),
            // Waiting, yet its hold exists.
            |inv| inv.waitlist[0].status = "WAITING".into(),
            // Its offer is another account's hold.
            |inv| inv.waitlist[0].account_id = "zed".into(),
            // Two waiting entries of one account.
            |inv| {
                let mut twin = inv.waitlist[1].clone();
                twin.waitlist_id = "w-twin".into();
                inv.waitlist.push(twin);
            },
        ];
        for plant in cases {
            let mut inventory = sound.clone();
            plant(&mut inventory);
            let violations = inventory.invariants();
            assert!(
                violations.iter().any(|v| v.invariant == "I10"),
                "{:?}: {violations:?}",
                inventory.waitlist
            );
        }
    }

    #[test]
    fn a_cancelled_event_voids_every_ticket_and_a_finished_one_paid_everyone_back() {
        let mut inventory = sold_inventory();
        inventory.cancellation = Some(CancellationRecord { finished: false });
        let i11 = |inventory: &Inventory| {
            inventory
                .invariants()
                .into_iter()
                .filter(|v| v.invariant == "I11")
                .count()
        };
        assert_eq!(i11(&inventory), 1, "a valid ticket of a cancelled event");
        inventory.tickets[0].status = "VOIDED".into();
        inventory.orders[0].live_tickets = 0;
        assert_eq!(i11(&inventory), 0, "refunds may still be under way");
        inventory.cancellation = Some(CancellationRecord { finished: true });
        assert_eq!(
            i11(&inventory),
            1,
            "finished, yet the paid order got nothing back"
        );
        let refund = |status: &str, amount_minor| RefundRecord {
            refund_id: format!("r-{status}"),
            order_id: "o".into(),
            ticket_ids: Vec::new(),
            amount_minor,
            status: status.into(),
            paid_minor: 1_000,
            seats_released: true,
        };
        inventory.refunds = vec![refund("PENDING", 1_000)];
        assert_eq!(i11(&inventory), 1, "finished with a refund pending");
        inventory.refunds = vec![refund("FAILED", 1_000)];
        assert_eq!(
            i11(&inventory),
            0,
            "a failed refund is the operator's to see"
        );
        inventory.refunds = vec![refund("SUCCEEDED", 400), refund("SUCCEEDED", 600)];
        assert_eq!(i11(&inventory), 0, "paid back in full");
    }
}
