//! Redeeming an access code for a presale lane: a command of the event's writer.
//!
//! Every redemption of the event's codes is decided here, one at a time in arrival order,
//! against the redemptions the engine loaded and decided since ([`crate::phase::Lanes`]):
//! so two accounts racing a single-use code get one win and one `UsedUp`, in one process and
//! without a lock. The group writes the win as a counted conditional update of the code's
//! uses (`uses < max_uses`) and one redemption row unique per (event, phase, account)
//! (`store-sql/src/phase.rs`), so a writer that was wrong (another node's, a stale engine)
//! has its whole group refused rather than a code used twice.
//!
//! The code's own row (its use count's ceiling) is read by the caller before the command is
//! sent: codes are inserted once and never rewritten, so that read cannot be stale; its uses
//! are the engine's own count of redemptions, which only this writer makes.

use super::{Effect, Effects, EventEngine};
use crate::phase::{PhaseAccess, Redemption};

/// A fan's redemption of `code` for `phase_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRedeem {
    pub account_id: String,
    pub phase_id: String,
    /// Normalised (`crate::phase::normalize_code`).
    pub code: String,
    /// The code's `max_uses` as stored; `None`: the phase has no such code.
    pub max_uses: Option<u32>,
}

/// What the engine decided for a redemption. Exhaustive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessDecision {
    /// Redeemed with the group: the account may buy in the phase.
    Redeemed,
    /// The account redeemed a code for the phase before: the same success, no use taken.
    AlreadyRedeemed,
    /// The phase has no such code.
    UnknownCode,
    /// Every use of the code is taken.
    UsedUp,
    /// The event has no such phase.
    UnknownPhase,
    /// The phase is open to every fan: no code to redeem.
    NotCodePhase,
    /// The phase has ended.
    PhaseEnded,
    /// The event is cancelled.
    EventCancelled,
}

/// A redemption the group writes: the code's uses raised by one only while below its
/// maximum, and the account's redemption row inserted (unique per event, phase, account).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRedeemed {
    /// The command's place in the group.
    pub index: usize,
    pub redemption: Redemption,
}

impl EventEngine {
    /// Whether the account redeemed a code for the phase.
    pub fn has_access(&self, phase_id: &str, account_id: &str) -> bool {
        self.lanes
            .redeemed
            .contains(&(phase_id.to_owned(), account_id.to_owned()))
    }

    /// Redemptions of one code the engine counted.
    pub fn code_uses(&self, phase_id: &str, code: &str) -> u32 {
        self.lanes
            .code_uses
            .get(&(phase_id.to_owned(), code.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn decide_redeem(
        &mut self,
        index: usize,
        request: &AccessRedeem,
        effects: &mut Effects,
    ) -> AccessDecision {
        if self.cancelled {
            return AccessDecision::EventCancelled;
        }
        let now = self.state.now;
        let Some(phase) = self.lanes.phase(&request.phase_id) else {
            return AccessDecision::UnknownPhase;
        };
        match phase.access {
            PhaseAccess::Open => return AccessDecision::NotCodePhase,
            PhaseAccess::Code => {}
        }
        if self.has_access(&request.phase_id, &request.account_id) {
            return AccessDecision::AlreadyRedeemed;
        }
        if phase.ends_at.is_some_and(|end| end <= now) {
            return AccessDecision::PhaseEnded;
        }
        let Some(max_uses) = request.max_uses else {
            return AccessDecision::UnknownCode;
        };
        if self.code_uses(&request.phase_id, &request.code) >= max_uses {
            return AccessDecision::UsedUp;
        }
        let redemption = Redemption {
            phase_id: request.phase_id.clone(),
            account_id: request.account_id.clone(),
            code: request.code.clone(),
        };
        self.lanes.record(&redemption);
        effects.push(Effect::AccessRedeemed(AccessRedeemed { index, redemption }));
        AccessDecision::Redeemed
    }
}
