//! The refund command: tickets of a confirmed order given back for money, decided on the
//! event's engine like a transfer.
//!
//! A refund frees what it gives back in the same group that records it: the seats the
//! order's hold sold go back on sale, the tier's units return from sold to available, and the
//! hold counts that many fewer against the account's purchase limit (as an exchange's old
//! side does). The engine decides the inventory side: the hold kept and confirmed for the
//! account, every seat still sold by it (or the tier's units still its own), no ticket given
//! up by an exchange this engine granted. The tickets and the money are not the engine's: the
//! store voids the tickets only if they are still valid, unmarked and offered to nobody, and
//! records the refund `PENDING` with its outbox message (the relay asks the provider),
//! refusing that refund alone otherwise (`boxoffice_store::refund`).

use super::{Effect, Effects, EventEngine, ExchangeGivesUp, HoldReleased};
use crate::hold::{HoldStatus, SeatStatus};

/// Tickets of a confirmed order given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    pub refund_id: String,
    /// The order's owner and its hold (`CONFIRMED`).
    pub account_id: String,
    pub hold_id: String,
    /// The seats of the tickets (none for a tier), freed.
    pub seat_ids: Vec<String>,
    /// The tier and units of the tickets, returned.
    pub tier: Option<(String, u32)>,
    /// The tickets given back (voided by the store).
    pub ticket_ids: Vec<String>,
}

/// What the engine decided for a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundDecision {
    /// Given back with the group.
    Refunded,
    /// A ticket is given up by an exchange this engine granted.
    TicketTaken(String),
    /// A seat (or the tier's units) is no longer sold by the order's hold.
    NotSold(String),
    /// The engine does not keep the hold confirmed (confirmed elsewhere since the last
    /// catch-up, or ended): the writer asks again after a catch-up.
    NotKept,
}

/// A refund the group writes: the hold counts `given`'s quantity fewer, its seats (each still
/// `SOLD` by the hold) are free again and its units back on sale. The store writes the rest
/// (the tickets voided, the refund row, its outbox message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundTaken {
    /// The command's place in the group.
    pub index: usize,
    pub refund_id: String,
    pub given: HoldReleased,
}

impl EventEngine {
    pub(super) fn decide_refund(
        &mut self,
        index: usize,
        request: &RefundRequest,
        effects: &mut Effects,
    ) -> RefundDecision {
        if let Some(ticket_id) = request.ticket_ids.iter().find(|ticket_id| {
            self.exchanged_tickets
                .get(*ticket_id)
                .is_some_and(|hold_id| self.holds.contains_key(hold_id))
        }) {
            return RefundDecision::TicketTaken(ticket_id.clone());
        }
        let Some(hold) = self.holds.get(&request.hold_id) else {
            return RefundDecision::NotKept;
        };
        if hold.status != HoldStatus::Confirmed || hold.account_id != request.account_id {
            return RefundDecision::NotKept;
        }
        for seat_id in &request.seat_ids {
            let sold_here = self.state.seats.get(seat_id).is_some_and(|seat| {
                seat.status == SeatStatus::Sold
                    && seat.hold_id.as_deref() == Some(request.hold_id.as_str())
            });
            if !sold_here {
                return RefundDecision::NotSold(seat_id.clone());
            }
        }
        if let Some((tier_id, units)) = &request.tier
            && (hold.tier_id.as_ref() != Some(tier_id) || hold.quantity < *units)
        {
            return RefundDecision::NotSold(tier_id.clone());
        }
        let given = ExchangeGivesUp {
            hold_id: request.hold_id.clone(),
            seat_ids: request.seat_ids.clone(),
            tier: request.tier.clone(),
        };
        let given = self.give_up(&given);
        effects.push(Effect::Refunded(RefundTaken {
            index,
            refund_id: request.refund_id.clone(),
            given,
        }));
        RefundDecision::Refunded
    }
}
