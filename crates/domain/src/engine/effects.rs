//! A group's effects: one list of [`Effect`] values in the order the engine decided them.
//!
//! The store writes each kind in one statement, in its own order (`store-sql/src/group.rs`),
//! so it reads each kind from the list ([`Effects::holds_released`] and the like); what it
//! writes of several kinds at once — the seats and units new holds take, the seat map's
//! changes, the accounts whose purchase limit it checks — is derived here from the same list,
//! never kept beside it, so no two vectors have to line up.

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

use super::{
    AccessRedeemed, CheckoutStarted, EventCancelled, ExchangeTaken, HoldConfirmed,
    OrderCompensated, RefundTaken, TransferTaken, WaitEntry, WaitlistOffer,
};
use crate::decide::NewHold;
use crate::hold::SeatStatus;

/// A hold the group ends: released (the store ends it only if it is still `HELD` and not
/// past its deadline, and counts it) or expired (only if still `HELD` and past its deadline;
/// one the sweeper ended first is skipped). Then the seats that still point to it are freed
/// and its units returned, exactly once because the status change is conditional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldReleased {
    pub hold_id: String,
    /// The hold's owner (the outbox tells it with the hold's end).
    pub account_id: String,
    pub seat_ids: Vec<String>,
    pub tier: Option<(String, u32)>,
}

/// A new hold a command of the group asked for. The store inserts it under the request's
/// key (a key another writer used meanwhile refuses the group), and its seats and units are
/// taken with the group's other new holds ([`Effects::seats_taken`],
/// [`Effects::tier_units_taken`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldCreated {
    /// The command's place in the group.
    pub index: usize,
    /// The request's idempotency key, which the hold now owns.
    pub key: String,
    pub hold: NewHold,
}

/// A hold in checkout ended by a payment verdict: the store ends it only if it is still
/// `PAYMENT_PENDING`, then frees exactly these seats and returns its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutCancelled {
    /// The command's place in the group.
    pub index: usize,
    pub hold: HoldReleased,
}

/// A seat a new hold takes (a view of [`Effects`]). The store writes it only if the seat is
/// still free by the group's clock (available, or held past its deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatTaken<'a> {
    pub seat_id: &'a str,
    pub hold_id: &'a str,
    pub hold_expires_at: OffsetDateTime,
}

/// A change the seat map shows (a view of [`Effects`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapSeatChange<'a> {
    pub seat_id: &'a str,
    pub status: SeatStatus,
    pub hold_expires_at: Option<OffsetDateTime>,
}

/// One change the engine decided for a group. Every effect carries or implies the condition
/// the store must find; one that the store completes with the writer's own rows (an order's
/// payment operation, an exchange's tickets) names its command by its place in the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A hold past its deadline, ended before the group's commands (the engine's own timer:
    /// the sweeper only tidies events no writer has loaded).
    HoldExpired(HoldReleased),
    HoldCreated(HoldCreated),
    HoldReleased(HoldReleased),
    CheckoutStarted(CheckoutStarted),
    /// A hold in checkout sold by a payment.
    HoldConfirmed(HoldConfirmed),
    CheckoutCancelled(CheckoutCancelled),
    /// A confirmed order given back after a capture refused for good.
    OrderCompensated(OrderCompensated),
    /// An exchange into the event.
    ExchangeTaken(ExchangeTaken),
    /// A transfer accepted.
    TransferTaken(TransferTaken),
    /// Tickets refunded: their seats and units back on sale.
    Refunded(RefundTaken),
    WaitlistJoined(WaitEntry),
    WaitlistLeft {
        waitlist_id: String,
    },
    /// Seats offered to a waiting entry: a new hold no command asked for, whose seats are
    /// taken with the group's new holds.
    WaitlistOffered(WaitlistOffer),
    /// An offer hold (of an entry offered earlier) the group ended: its entry becomes
    /// `LAPSED`.
    WaitlistLapsed {
        hold_id: String,
    },
    /// An offer hold the group sold: its entry becomes `PURCHASED`.
    WaitlistPurchased {
        hold_id: String,
    },
    /// The event cancelled (`engine::cancel`): the store records it and voids every ticket.
    EventCancelled(EventCancelled),
    /// An access code redeemed for a presale lane (`engine::access`).
    AccessRedeemed(AccessRedeemed),
}

/// The rows a group writes: one list of [`Effect`]s in the order the engine decided them.
/// Every entry carries or implies its condition; the store counts what it wrote and refuses
/// the whole group on any difference. What the store writes in one statement (the seats new
/// holds take, the seat map's changes, the accounts whose limit it checks) is read from the
/// list, never kept beside it, so nothing has to line up with anything else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects(Vec<Effect>);

impl Effects {
    pub fn push(&mut self, effect: Effect) {
        self.0.push(effect);
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Effect> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the group writes anything but idempotency records: every effect is a row.
    pub fn writes_inventory(&self) -> bool {
        !self.is_empty()
    }

    pub fn holds_expired(&self) -> impl Iterator<Item = &HoldReleased> {
        self.iter().filter_map(|effect| match effect {
            Effect::HoldExpired(hold) => Some(hold),
            _ => None,
        })
    }

    pub fn holds_created(&self) -> impl Iterator<Item = &HoldCreated> {
        self.iter().filter_map(|effect| match effect {
            Effect::HoldCreated(created) => Some(created),
            _ => None,
        })
    }

    pub fn holds_released(&self) -> impl Iterator<Item = &HoldReleased> {
        self.iter().filter_map(|effect| match effect {
            Effect::HoldReleased(hold) => Some(hold),
            _ => None,
        })
    }

    pub fn checkouts_started(&self) -> impl Iterator<Item = &CheckoutStarted> {
        self.iter().filter_map(|effect| match effect {
            Effect::CheckoutStarted(started) => Some(started),
            _ => None,
        })
    }

    pub fn holds_confirmed(&self) -> impl Iterator<Item = &HoldConfirmed> {
        self.iter().filter_map(|effect| match effect {
            Effect::HoldConfirmed(confirmed) => Some(confirmed),
            _ => None,
        })
    }

    pub fn checkouts_cancelled(&self) -> impl Iterator<Item = &CheckoutCancelled> {
        self.iter().filter_map(|effect| match effect {
            Effect::CheckoutCancelled(cancelled) => Some(cancelled),
            _ => None,
        })
    }

    pub fn orders_compensated(&self) -> impl Iterator<Item = &OrderCompensated> {
        self.iter().filter_map(|effect| match effect {
            Effect::OrderCompensated(compensated) => Some(compensated),
            _ => None,
        })
    }

    pub fn exchanges(&self) -> impl Iterator<Item = &ExchangeTaken> {
        self.iter().filter_map(|effect| match effect {
            Effect::ExchangeTaken(taken) => Some(taken),
            _ => None,
        })
    }

    pub fn transfers(&self) -> impl Iterator<Item = &TransferTaken> {
        self.iter().filter_map(|effect| match effect {
            Effect::TransferTaken(taken) => Some(taken),
            _ => None,
        })
    }

    /// The event's cancellation, when the group cancels it.
    pub fn event_cancelled(&self) -> Option<&EventCancelled> {
        self.iter().find_map(|effect| match effect {
            Effect::EventCancelled(cancelled) => Some(cancelled),
            _ => None,
        })
    }

    pub fn access_redeemed(&self) -> impl Iterator<Item = &AccessRedeemed> {
        self.iter().filter_map(|effect| match effect {
            Effect::AccessRedeemed(redeemed) => Some(redeemed),
            _ => None,
        })
    }

    pub fn refunds(&self) -> impl Iterator<Item = &RefundTaken> {
        self.iter().filter_map(|effect| match effect {
            Effect::Refunded(taken) => Some(taken),
            _ => None,
        })
    }

    pub fn waitlist_joined(&self) -> impl Iterator<Item = &WaitEntry> {
        self.iter().filter_map(|effect| match effect {
            Effect::WaitlistJoined(entry) => Some(entry),
            _ => None,
        })
    }

    /// The ids of the entries that left.
    pub fn waitlist_left(&self) -> impl Iterator<Item = &str> {
        self.iter().filter_map(|effect| match effect {
            Effect::WaitlistLeft { waitlist_id } => Some(waitlist_id.as_str()),
            _ => None,
        })
    }

    pub fn waitlist_offers(&self) -> impl Iterator<Item = &WaitlistOffer> {
        self.iter().filter_map(|effect| match effect {
            Effect::WaitlistOffered(offer) => Some(offer),
            _ => None,
        })
    }

    /// The offer holds whose entries lapse.
    pub fn waitlist_lapsed(&self) -> impl Iterator<Item = &str> {
        self.iter().filter_map(|effect| match effect {
            Effect::WaitlistLapsed { hold_id } => Some(hold_id.as_str()),
            _ => None,
        })
    }

    /// The offer holds whose entries purchased.
    pub fn waitlist_purchased(&self) -> impl Iterator<Item = &str> {
        self.iter().filter_map(|effect| match effect {
            Effect::WaitlistPurchased { hold_id } => Some(hold_id.as_str()),
            _ => None,
        })
    }

    /// Every new hold whose seats and units the group takes: those commands asked for and
    /// the waiting list's offers, in order.
    pub fn new_holds(&self) -> impl Iterator<Item = &NewHold> {
        self.iter().filter_map(|effect| match effect {
            Effect::HoldCreated(HoldCreated { hold, .. })
            | Effect::WaitlistOffered(WaitlistOffer { hold, .. }) => Some(hold),
            // An exchange's new hold takes its seats and units itself.
            Effect::HoldExpired(_)
            | Effect::HoldReleased(_)
            | Effect::CheckoutStarted(_)
            | Effect::HoldConfirmed(_)
            | Effect::CheckoutCancelled(_)
            | Effect::OrderCompensated(_)
            | Effect::ExchangeTaken(_)
            | Effect::TransferTaken(_)
            | Effect::Refunded(_)
            | Effect::WaitlistJoined(_)
            | Effect::WaitlistLeft { .. }
            | Effect::WaitlistLapsed { .. }
            | Effect::WaitlistPurchased { .. }
            | Effect::EventCancelled(_)
            | Effect::AccessRedeemed(_) => None,
        })
    }

    /// The seats the new holds take, in order.
    pub fn seats_taken(&self) -> impl Iterator<Item = SeatTaken<'_>> {
        self.new_holds().flat_map(|hold| {
            hold.seats.iter().map(|(seat_id, _)| SeatTaken {
                seat_id,
                hold_id: &hold.hold_id,
                hold_expires_at: hold.expires_at,
            })
        })
    }

    /// Units the new holds take, per tier (the store subtracts them only where that many
    /// are available).
    pub fn tier_units_taken(&self) -> BTreeMap<&str, u32> {
        let mut taken: BTreeMap<&str, u32> = BTreeMap::new();
        for hold in self.new_holds() {
            if let Some(tier_id) = &hold.tier_id {
                *taken.entry(tier_id).or_default() += hold.quantity;
            }
        }
        taken
    }

    /// The accounts that got seats or units (a new hold, a sale, an exchange sold at once,
    /// a transfer's receiver): the store checks their purchase limit after the writes.
    pub fn accounts_checked(&self) -> BTreeSet<&str> {
        self.iter()
            .filter_map(|effect| match effect {
                Effect::HoldCreated(HoldCreated { hold, .. })
                | Effect::WaitlistOffered(WaitlistOffer { hold, .. }) => {
                    Some(hold.account_id.as_str())
                }
                Effect::HoldConfirmed(confirmed) => Some(confirmed.account_id.as_str()),
                // While a difference is unpaid the store counts the old side too, which the
                // engine's check lets through: only an exchange sold at once is checked.
                Effect::ExchangeTaken(taken) if taken.sold => Some(taken.account_id.as_str()),
                Effect::TransferTaken(taken) => Some(taken.to_account_id.as_str()),
                Effect::HoldExpired(_)
                | Effect::HoldReleased(_)
                | Effect::CheckoutStarted(_)
                | Effect::CheckoutCancelled(_)
                | Effect::OrderCompensated(_)
                | Effect::ExchangeTaken(_)
                | Effect::Refunded(_)
                | Effect::WaitlistJoined(_)
                | Effect::WaitlistLeft { .. }
                | Effect::WaitlistLapsed { .. }
                | Effect::WaitlistPurchased { .. }
                | Effect::EventCancelled(_)
                | Effect::AccessRedeemed(_) => None,
            })
            // What an allocation keeps is no purchase (`crate::allocation`).
            .filter(|account| !crate::allocation::is_allocation_account(account))
            .collect()
    }

    /// Whether the group puts seats or units back on sale (the waiting list is matched
    /// against every class then).
    pub fn frees_inventory(&self) -> bool {
        self.iter().any(|effect| match effect {
            Effect::HoldExpired(_)
            | Effect::HoldReleased(_)
            | Effect::CheckoutCancelled(_)
            | Effect::OrderCompensated(_)
            | Effect::Refunded(_) => true,
            Effect::ExchangeTaken(taken) => taken.freed.is_some(),
            Effect::HoldCreated(_)
            | Effect::CheckoutStarted(_)
            | Effect::HoldConfirmed(_)
            | Effect::TransferTaken(_)
            | Effect::WaitlistJoined(_)
            | Effect::WaitlistLeft { .. }
            | Effect::WaitlistOffered(_)
            | Effect::WaitlistLapsed { .. }
            | Effect::WaitlistPurchased { .. }
            | Effect::EventCancelled(_)
            | Effect::AccessRedeemed(_) => false,
        })
    }

    /// The changes the seat map shows, in the order they were made (a later one of a seat
    /// wins). An expiry shows nothing: the map shows what the store actually ended (the
    /// sweeper or a checkout may have got there first), which the store reports itself. A
    /// transfer changes who bought a seat, which the map does not show.
    pub fn map_seats<'a>(&'a self) -> Vec<MapSeatChange<'a>> {
        let mut changes = Vec::new();
        let mut change = |seat_id: &'a str, status: SeatStatus, until: Option<OffsetDateTime>| {
            changes.push(MapSeatChange {
                seat_id,
                status,
                hold_expires_at: until,
            });
        };
        for effect in self.iter() {
            match effect {
                Effect::HoldCreated(HoldCreated { hold, .. })
                | Effect::WaitlistOffered(WaitlistOffer { hold, .. }) => {
                    for (seat_id, _) in &hold.seats {
                        change(seat_id, SeatStatus::Held, Some(hold.expires_at));
                    }
                }
                Effect::HoldReleased(hold)
                | Effect::CheckoutCancelled(CheckoutCancelled { hold, .. })
                | Effect::OrderCompensated(OrderCompensated { hold, .. })
                | Effect::Refunded(RefundTaken { given: hold, .. }) => {
                    for seat_id in &hold.seat_ids {
                        change(seat_id, SeatStatus::Available, None);
                    }
                }
                Effect::CheckoutStarted(started) => {
                    for seat_id in &started.seat_ids {
                        change(seat_id, SeatStatus::Held, Some(started.expires_at));
                    }
                }
                Effect::HoldConfirmed(confirmed) => {
                    for seat_id in &confirmed.seat_ids {
                        change(seat_id, SeatStatus::Sold, None);
                    }
                }
                Effect::ExchangeTaken(taken) => {
                    // The old side first: its seats are free before the new ones are taken.
                    for seat_id in taken.freed.iter().flat_map(|freed| &freed.seat_ids) {
                        change(seat_id, SeatStatus::Available, None);
                    }
                    let (status, until) = if taken.sold {
                        (SeatStatus::Sold, None)
                    } else {
                        (SeatStatus::Held, Some(taken.expires_at))
                    };
                    for seat_id in taken.takes.seat_ids() {
                        change(seat_id, status, until);
                    }
                }
                Effect::HoldExpired(_)
                | Effect::TransferTaken(_)
                | Effect::WaitlistJoined(_)
                | Effect::WaitlistLeft { .. }
                | Effect::WaitlistLapsed { .. }
                | Effect::WaitlistPurchased { .. }
                | Effect::EventCancelled(_)
                | Effect::AccessRedeemed(_) => {}
            }
        }
        changes
    }
}

impl<'a> IntoIterator for &'a Effects {
    type Item = &'a Effect;
    type IntoIter = std::slice::Iter<'a, Effect>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Vec<Effect>> for Effects {
    fn from(effects: Vec<Effect>) -> Self {
        Self(effects)
    }
}

impl FromIterator<Effect> for Effects {
    fn from_iter<I: IntoIterator<Item = Effect>>(effects: I) -> Self {
        Self(effects.into_iter().collect())
    }
}
