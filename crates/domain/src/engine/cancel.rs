//! Cancelling the event: a command of the event's writer, decided once.
//!
//! From the group that cancels on, the engine sells nothing: new holds are refused
//! ([`HoldOutcome::EventCancelled`](crate::decide::HoldOutcome::EventCancelled)), every live
//! hold not in checkout ends in that group (its seats and units back, though nothing sells
//! them again), a payment that answers later for a hold in checkout cancels that checkout
//! (the relay voids the authorization), and the waiting list offers nothing. The store writes
//! the rest with the group: the cancellation row, every ticket voided, the `event.cancelled`
//! message (`boxoffice_store::cancellation`). The money goes back afterwards, order by order,
//! by a job outside the engine (`boxoffice_workers::cancellation`): nothing it does can sell.

use super::{Effect, Effects, EventEngine};
use crate::hold::HoldStatus;

/// The organiser's cancellation of the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelRequest {
    /// The admin who asked, the request's key and digest (stored with the cancellation).
    pub account_id: String,
    pub idempotency_key: String,
    pub request_digest: String,
    pub reason: String,
}

/// What the engine decided for a cancellation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelDecision {
    /// Cancelled with the group: `holds_ended` live holds ended.
    Cancelled { holds_ended: usize },
    /// The event was cancelled before: the store has its cancellation.
    AlreadyCancelled,
}

/// The event cancelled by the group (the command's place in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCancelled {
    pub index: usize,
    pub request: CancelRequest,
}

impl EventEngine {
    /// Whether the event is cancelled: nothing sells any more.
    pub fn cancelled(&self) -> bool {
        self.cancelled
    }

    pub(super) fn decide_cancel(
        &mut self,
        index: usize,
        request: &CancelRequest,
        effects: &mut Effects,
    ) -> CancelDecision {
        if self.cancelled {
            return CancelDecision::AlreadyCancelled;
        }
        self.cancelled = true;
        // Every hold still `HELD` ends now (an exchange's new hold and a waiting-list offer
        // too); a hold in checkout waits for its payment's verdict, which cancels it.
        // One past its deadline that the group's expiries did not reach yet (they stop at
        // `EXPIRIES_PER_GROUP_MAX`) expires instead: the store releases only live holds.
        // A hold granted earlier in this group is not in the store yet, so it cannot be
        // released with it: it stays, unsellable (checkouts are refused), until its deadline.
        let now = self.state.now;
        let granted: std::collections::BTreeSet<String> = effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::HoldCreated(created) => Some(created.hold.hold_id.clone()),
                Effect::ExchangeTaken(taken) => Some(taken.hold_id.clone()),
                _ => None,
            })
            .collect();
        let live: Vec<(String, bool)> = self
            .holds
            .iter()
            .filter(|(id, hold)| hold.status == HoldStatus::Held && !granted.contains(id.as_str()))
            .map(|(hold_id, hold)| (hold_id.clone(), hold.expires_at > now))
            .collect();
        let mut holds_ended = 0;
        for (hold_id, before_deadline) in live {
            // (Its deadline entry stays: `expire_due` skips a hold the engine no longer keeps.)
            if let Some(ended) = self.end_hold(&hold_id) {
                effects.push(if before_deadline {
                    Effect::HoldReleased(ended)
                } else {
                    Effect::HoldExpired(ended)
                });
                holds_ended += 1;
            }
        }
        effects.push(Effect::EventCancelled(EventCancelled {
            index,
            request: request.clone(),
        }));
        CancelDecision::Cancelled { holds_ended }
    }
}
