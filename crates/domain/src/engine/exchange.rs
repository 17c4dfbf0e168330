//! The exchange command (rebooking, 改签): a confirmed order's tickets move to new seats or
//! tier units of this event, decided on this event's engine like a hold.
//!
//! The engine decides the inventory side: the target event's times, the new seats free (or
//! the tier's units available), the purchase limit with what a same-event exchange gives up,
//! and — when the old tickets are of this event — that their seats are still sold by the old
//! hold. It takes the new seats at once: held by a new hold until the difference is paid, or
//! sold to it when nothing is due, in which case the old seats of this event come back on
//! sale in the same group. The tickets themselves are not the engine's: the caller picks them
//! (`boxoffice_store::exchange::surrender`) and the store marks or voids them only if they
//! are still valid and unmarked, refusing that exchange alone otherwise.

use time::OffsetDateTime;

use super::{Effect, Effects, EngineHold, EventEngine, HoldReleased};
use crate::hold::{HoldStatus, SeatStatus, seat_is_free};

/// What an exchange takes in this event, priced by the caller from the event's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeTakes {
    /// Seat ids and prices, in request order.
    Seats(Vec<(String, i64)>),
    Tier {
        tier_id: String,
        quantity: u32,
        price_minor: i64,
    },
}

impl ExchangeTakes {
    pub fn quantity(&self) -> u32 {
        match self {
            Self::Seats(seats) => seats.len() as u32,
            Self::Tier { quantity, .. } => *quantity,
        }
    }

    /// The seats taken, in request order (none for a tier).
    pub fn seat_ids(&self) -> impl Iterator<Item = &str> {
        let seats: &[(String, i64)] = match self {
            Self::Seats(seats) => seats,
            Self::Tier { .. } => &[],
        };
        seats.iter().map(|(seat_id, _)| seat_id.as_str())
    }

    pub fn value_minor(&self) -> i64 {
        match self {
            Self::Seats(seats) => seats.iter().map(|(_, price)| price).sum(),
            Self::Tier {
                quantity,
                price_minor,
                ..
            } => i64::from(*quantity) * price_minor,
        }
    }
}

/// What a same-event exchange gives up: seats the old hold sold, or units of its tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeGivesUp {
    /// The old order's hold (`CONFIRMED`).
    pub hold_id: String,
    pub seat_ids: Vec<String>,
    pub tier: Option<(String, u32)>,
}

impl ExchangeGivesUp {
    pub fn quantity(&self) -> u32 {
        match &self.tier {
            Some((_, units)) => *units,
            None => self.seat_ids.len() as u32,
        }
    }
}

/// An exchange into this event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeRequest {
    pub account_id: String,
    pub exchange_id: String,
    /// The hold of the new seats.
    pub new_hold_id: String,
    /// When exchanges of the old event close (its start minus its cutoff), by the store's
    /// clock.
    pub closes_at: OffsetDateTime,
    /// This event's start: nothing is exchanged into a trip that has left.
    pub starts_at: OffsetDateTime,
    /// The old side when it is of this event; `None` when it is of another event (the store
    /// frees it there in the same transaction).
    pub gives_up: Option<ExchangeGivesUp>,
    /// The tickets given up (their count is the old side's quantity, wherever it is).
    pub ticket_ids: Vec<String>,
    pub takes: ExchangeTakes,
    /// What the given-up tickets were bought for: above it, the difference is due and the new
    /// seats are only held until it is paid.
    pub from_value_minor: i64,
}

impl ExchangeRequest {
    /// `to_value - from_value`: above 0 the new seats are held until it is paid.
    pub fn amount_due_minor(&self) -> i64 {
        self.takes.value_minor() - self.from_value_minor
    }

    pub fn pays(&self) -> bool {
        self.amount_due_minor() > 0
    }
}

/// What the engine decided for an exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeDecision {
    /// Taken with the group: the new hold's deadline (held until paid), or the group's clock
    /// (sold at once).
    Granted {
        expires_at: OffsetDateTime,
    },
    /// Exchanges of the old event have closed (its start minus its cutoff has passed).
    Closed,
    /// This event has started.
    Started,
    SaleNotOpen,
    /// The event was cancelled: nothing sells.
    EventCancelled,
    /// Seats taken (named), or too few units left in the tier (empty).
    SeatsUnavailable(Vec<String>),
    PurchaseLimit,
    /// A ticket given up is already given up by an exchange this engine granted (waiting for
    /// its difference, or completed).
    TicketTaken(String),
    /// An old seat of this event is no longer sold by the old hold.
    NotSold(String),
    /// The engine does not keep the old hold (confirmed elsewhere since the last catch-up):
    /// the writer asks again after a catch-up.
    NotKept,
    /// A new companion seat without a wheelchair space of its section among the new seats
    /// (`crate::accessibility`).
    CompanionSeatAlone(String),
    /// New wheelchair spaces or companion seats kept until `release_at` (the store's clock)
    /// for holds that ask for accessible places; an exchange does not ask.
    SeatKeptAccessible {
        seat_ids: Vec<String>,
        release_at: OffsetDateTime,
    },
}

/// An exchange the group writes: the new hold (`HELD` until `expires_at`, or `CONFIRMED` and
/// its seats and units sold), and, when nothing is due and the old side is of this event,
/// the old seats and units back on sale. The store takes each new seat only if it is still
/// free by the group's clock, units only where available, and frees the old seats only if
/// still sold by the old order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeTaken {
    /// The command's place in the group.
    pub index: usize,
    pub exchange_id: String,
    pub hold_id: String,
    pub account_id: String,
    pub takes: ExchangeTakes,
    /// Sold at once (nothing due); else held until `expires_at`.
    pub sold: bool,
    pub expires_at: OffsetDateTime,
    /// The old hold's seats and units freed here (a same-event exchange sold at once).
    pub freed: Option<HoldReleased>,
}

impl EventEngine {
    pub(super) fn decide_exchange(
        &mut self,
        index: usize,
        request: &ExchangeRequest,
        effects: &mut Effects,
    ) -> ExchangeDecision {
        let now = self.state.now;
        // The cutoff and the start by the latest the store's clock can read: an exchange is
        // never taken after either by the store's clock.
        if self.latest >= request.closes_at {
            return ExchangeDecision::Closed;
        }
        if self.latest >= request.starts_at {
            return ExchangeDecision::Started;
        }
        if now < self.rules.on_sale_at {
            return ExchangeDecision::SaleNotOpen;
        }
        if self.cancelled {
            return ExchangeDecision::EventCancelled;
        }
        // A ticket an exchange of this engine took while its new hold lives (an ended one
        // gave it back; the store judges the tickets in any case).
        if let Some(ticket_id) = request.ticket_ids.iter().find(|ticket_id| {
            self.exchanged_tickets
                .get(*ticket_id)
                .is_some_and(|hold_id| self.holds.contains_key(hold_id))
        }) {
            return ExchangeDecision::TicketTaken(ticket_id.clone());
        }
        if let Some(given) = &request.gives_up {
            let Some(old) = self.holds.get(&given.hold_id) else {
                return ExchangeDecision::NotKept;
            };
            if old.status != HoldStatus::Confirmed || old.account_id != request.account_id {
                return ExchangeDecision::NotKept;
            }
            for seat_id in &given.seat_ids {
                let sold_here = self.state.seats.get(seat_id).is_some_and(|seat| {
                    seat.status == SeatStatus::Sold
                        && seat.hold_id.as_deref() == Some(given.hold_id.as_str())
                });
                if !sold_here {
                    return ExchangeDecision::NotSold(seat_id.clone());
                }
            }
            if let Some((tier_id, units)) = &given.tier
                && (old.tier_id.as_ref() != Some(tier_id) || old.quantity < *units)
            {
                return ExchangeDecision::NotSold(tier_id.clone());
            }
        }
        if let ExchangeTakes::Seats(seats) = &request.takes {
            // The rules of a hold of named seats (`crate::decide`) bind the new seats too.
            let seat_ids: Vec<String> = seats.iter().map(|(id, _)| id.clone()).collect();
            let access = &self.rules.accessibility;
            if let Some(seat_id) = access.companion_alone(&seat_ids) {
                return ExchangeDecision::CompanionSeatAlone(seat_id.clone());
            }
            let kept = access.kept_seats(&seat_ids, now);
            if let (false, Some(release_at)) = (kept.is_empty(), access.release_at) {
                return ExchangeDecision::SeatKeptAccessible {
                    seat_ids: kept,
                    release_at,
                };
            }
        }
        match &request.takes {
            ExchangeTakes::Seats(seats) => {
                let taken: Vec<String> = seats
                    .iter()
                    .filter(|(seat_id, _)| {
                        !self.state.seats.get(seat_id).is_some_and(|seat| {
                            seat_is_free(seat.status, seat.hold_expires_at, now)
                        })
                    })
                    .map(|(seat_id, _)| seat_id.clone())
                    .collect();
                if !taken.is_empty() {
                    return ExchangeDecision::SeatsUnavailable(taken);
                }
            }
            ExchangeTakes::Tier {
                tier_id, quantity, ..
            } => {
                let available = self.state.tiers.get(tier_id).map_or(0, |t| t.available);
                if available < i64::from(*quantity) {
                    return ExchangeDecision::SeatsUnavailable(Vec::new());
                }
            }
        }
        let giving_up_here = request
            .gives_up
            .as_ref()
            .map_or(0, |_| request.ticket_ids.len() as u32);
        let usage = i64::from(self.usage(&request.account_id, now));
        if usage + i64::from(request.takes.quantity()) - i64::from(giving_up_here)
            > i64::from(self.rules.max_tickets_per_account)
        {
            return ExchangeDecision::PurchaseLimit;
        }
        let sold = !request.pays();
        let expires_at = if sold {
            now
        } else {
            now + time::Duration::seconds(i64::from(self.rules.hold_ttl_s))
        };
        // The old side first: a same-event exchange sold at once gives it back now.
        let freed = match &request.gives_up {
            Some(given) if sold => Some(self.give_up(given)),
            _ => None,
        };
        self.take_for_exchange(request, sold, expires_at);
        // Sold at once, the store counts both sides as the engine does: its last check of
        // the limit stands behind this one (`Effects::accounts_checked`). While a difference
        // is unpaid the store counts the old side too, which the rule above lets through.
        for ticket_id in &request.ticket_ids {
            self.exchanged_tickets
                .insert(ticket_id.clone(), request.new_hold_id.clone());
        }
        effects.push(Effect::ExchangeTaken(ExchangeTaken {
            index,
            exchange_id: request.exchange_id.clone(),
            hold_id: request.new_hold_id.clone(),
            account_id: request.account_id.clone(),
            takes: request.takes.clone(),
            sold,
            expires_at,
            freed,
        }));
        ExchangeDecision::Granted { expires_at }
    }

    /// The new seats or units go to the exchange's hold: held until `expires_at`, or sold.
    fn take_for_exchange(
        &mut self,
        request: &ExchangeRequest,
        sold: bool,
        expires_at: OffsetDateTime,
    ) {
        let (status, deadline) = if sold {
            (SeatStatus::Sold, None)
        } else {
            (SeatStatus::Held, Some(expires_at))
        };
        let mut seat_ids = Vec::new();
        let mut tier_id = None;
        match &request.takes {
            ExchangeTakes::Seats(seats) => {
                for (seat_id, _) in seats {
                    let Some(seat) = self.state.seats.get_mut(seat_id) else {
                        continue;
                    };
                    seat.status = status;
                    seat.hold_id = Some(request.new_hold_id.clone());
                    seat.hold_expires_at = deadline;
                    self.index_free(seat_id, false);
                    if let Some(deadline) = deadline {
                        self.seat_deadlines.insert((deadline, seat_id.clone()));
                    }
                    seat_ids.push(seat_id.clone());
                }
            }
            ExchangeTakes::Tier {
                tier_id: id,
                quantity,
                ..
            } => {
                if let Some(tier) = self.state.tiers.get_mut(id) {
                    tier.available -= i64::from(*quantity);
                    if sold {
                        tier.sold += i64::from(*quantity);
                    } else {
                        tier.held += i64::from(*quantity);
                    }
                }
                tier_id = Some(id.clone());
            }
        }
        self.keep_hold(EngineHold {
            hold_id: request.new_hold_id.clone(),
            account_id: request.account_id.clone(),
            status: if sold {
                HoldStatus::Confirmed
            } else {
                HoldStatus::Held
            },
            tier_id,
            quantity: request.takes.quantity(),
            seat_ids,
            expires_at,
            phase_id: None,
            exchange: true,
        });
    }

    /// The old hold gives up seats or units: the seats back on sale, the units returned from
    /// its tier's sold count, and the hold counts that many fewer against the limit.
    pub(super) fn give_up(&mut self, given: &ExchangeGivesUp) -> HoldReleased {
        for seat_id in &given.seat_ids {
            self.free_seat(seat_id);
        }
        if let Some((tier_id, units)) = &given.tier
            && let Some(tier) = self.state.tiers.get_mut(tier_id)
        {
            tier.sold -= i64::from(*units);
            tier.available += i64::from(*units);
        }
        let mut account_id = String::new();
        if let Some(old) = self.holds.get_mut(&given.hold_id) {
            old.quantity = old.quantity.saturating_sub(given.quantity());
            old.seat_ids.retain(|s| !given.seat_ids.contains(s));
            account_id.clone_from(&old.account_id);
        }
        HoldReleased {
            hold_id: given.hold_id.clone(),
            account_id,
            seat_ids: given.seat_ids.clone(),
            tier: given.tier.clone(),
        }
    }
}
