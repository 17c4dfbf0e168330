//! The transfer command: an offered ticket transfer accepted by its receiver, decided on the
//! event's engine like a hold.
//!
//! A transfer consumes no capacity: the seats (or tier units) stay sold, and only who they
//! are sold to changes. The giver's confirmed hold gives them up (it counts that many fewer
//! against the giver's purchase limit) and a new confirmed hold of the receiver takes them
//! (counted against the receiver's). The engine decides the inventory side: the transfer
//! cutoff by the latest the store's clock can read, the giver's hold confirmed and still
//! selling these seats (or units), no exchange of this engine holding a ticket, and the
//! receiver's purchase limit. The tickets themselves are not the engine's: the store voids
//! the old ones only if they are still valid and unmarked and the offer still open, refusing
//! that transfer alone otherwise.

use time::OffsetDateTime;

use super::{Effect, Effects, EngineHold, EventEngine};
use crate::hold::{HoldStatus, SeatStatus};

/// An accepted transfer offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRequest {
    pub transfer_id: String,
    /// The giver, whose confirmed hold `old_hold_id` sold the tickets.
    pub from_account_id: String,
    pub old_hold_id: String,
    /// The receiver, and the confirmed hold that will sell them the same seats.
    pub to_account_id: String,
    pub new_hold_id: String,
    /// The seats of the tickets offered (none for a tier).
    pub seat_ids: Vec<String>,
    /// The tier and units of the tickets offered.
    pub tier: Option<(String, u32)>,
    /// The tickets offered (voided by the store).
    pub ticket_ids: Vec<String>,
    /// When transfers of the event close (its start minus its transfer cutoff), by the
    /// store's clock.
    pub closes_at: OffsetDateTime,
}

impl TransferRequest {
    /// Seats or units that move.
    pub fn quantity(&self) -> u32 {
        match &self.tier {
            Some((_, units)) => *units,
            None => self.seat_ids.len() as u32,
        }
    }
}

/// What the engine decided for a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferDecision {
    /// Moved with the group.
    Accepted,
    /// Transfers of the event have closed.
    Closed,
    /// The receiver would hold more than the event's purchase limit.
    PurchaseLimit,
    /// A ticket is given up by an exchange this engine granted.
    TicketTaken(String),
    /// A seat (or the tier's units) is no longer sold by the giver's hold.
    NotSold(String),
    /// The engine does not keep the giver's hold confirmed (confirmed elsewhere since the
    /// last catch-up, or no longer confirmed): the writer asks again after a catch-up.
    NotKept,
}

/// A transfer the group writes: the seats' hold moves from `old_hold_id` to the new
/// confirmed hold (each seat only if still sold by the old one), the old hold counts
/// `quantity` fewer, and the store writes the rest (tickets, orders, the offer's status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferTaken {
    /// The command's place in the group.
    pub index: usize,
    pub transfer_id: String,
    pub old_hold_id: String,
    pub new_hold_id: String,
    pub to_account_id: String,
    pub seat_ids: Vec<String>,
    pub tier: Option<(String, u32)>,
}

impl TransferTaken {
    pub fn quantity(&self) -> u32 {
        match &self.tier {
            Some((_, units)) => *units,
            None => self.seat_ids.len() as u32,
        }
    }
}

impl EventEngine {
    pub(super) fn decide_transfer(
        &mut self,
        index: usize,
        request: &TransferRequest,
        effects: &mut Effects,
    ) -> TransferDecision {
        let now = self.state.now;
        if self.latest >= request.closes_at {
            return TransferDecision::Closed;
        }
        if let Some(ticket_id) = request.ticket_ids.iter().find(|ticket_id| {
            self.exchanged_tickets
                .get(*ticket_id)
                .is_some_and(|hold_id| self.holds.contains_key(hold_id))
        }) {
            return TransferDecision::TicketTaken(ticket_id.clone());
        }
        let Some(old) = self.holds.get(&request.old_hold_id) else {
            return TransferDecision::NotKept;
        };
        if old.status != HoldStatus::Confirmed || old.account_id != request.from_account_id {
            return TransferDecision::NotKept;
        }
        for seat_id in &request.seat_ids {
            let sold_here = self.state.seats.get(seat_id).is_some_and(|seat| {
                seat.status == SeatStatus::Sold
                    && seat.hold_id.as_deref() == Some(request.old_hold_id.as_str())
            });
            if !sold_here {
                return TransferDecision::NotSold(seat_id.clone());
            }
        }
        if let Some((tier_id, units)) = &request.tier
            && (old.tier_id.as_ref() != Some(tier_id) || old.quantity < *units)
        {
            return TransferDecision::NotSold(tier_id.clone());
        }
        let quantity = request.quantity();
        // The giver and the receiver may be one account (a transfer to oneself moves nothing).
        let giving_back = if request.to_account_id == request.from_account_id {
            quantity
        } else {
            0
        };
        let usage = i64::from(self.usage(&request.to_account_id, now));
        if usage + i64::from(quantity) - i64::from(giving_back)
            > i64::from(self.rules.max_tickets_per_account)
        {
            return TransferDecision::PurchaseLimit;
        }
        if let Some(old) = self.holds.get_mut(&request.old_hold_id) {
            old.quantity = old.quantity.saturating_sub(quantity);
            old.seat_ids.retain(|s| !request.seat_ids.contains(s));
        }
        for seat_id in &request.seat_ids {
            if let Some(seat) = self.state.seats.get_mut(seat_id) {
                seat.hold_id = Some(request.new_hold_id.clone());
            }
        }
        self.keep_hold(EngineHold {
            hold_id: request.new_hold_id.clone(),
            account_id: request.to_account_id.clone(),
            status: HoldStatus::Confirmed,
            tier_id: request.tier.as_ref().map(|(tier_id, _)| tier_id.clone()),
            quantity,
            seat_ids: request.seat_ids.clone(),
            expires_at: now,
            exchange: false,
            phase_id: None,
        });
        // The receiver's limit is checked by the store too (`Effects::accounts_checked`).
        effects.push(Effect::TransferTaken(TransferTaken {
            index,
            transfer_id: request.transfer_id.clone(),
            old_hold_id: request.old_hold_id.clone(),
            new_hold_id: request.new_hold_id.clone(),
            to_account_id: request.to_account_id.clone(),
            seat_ids: request.seat_ids.clone(),
            tier: request.tier.clone(),
        }));
        TransferDecision::Accepted
    }
}
