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

#[cfg(test)]
mod tests {
    use time::macros::datetime;
    use time::{Duration, OffsetDateTime};

    use super::*;
    use crate::decide::{HoldOutcome, HoldRequest, HoldShape, SeatRow};
    use crate::engine::{Command, Decision, EngineSnapshot, EventEngine};
    use crate::event::SaleRules;
    use crate::hold::SeatStatus;
    use crate::phase::{Lanes, Phase};

    const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

    fn phase(phase_id: &str, access: PhaseAccess, sections: &[&str], limit: Option<u32>) -> Phase {
        Phase {
            phase_id: phase_id.into(),
            name: phase_id.into(),
            starts_at: NOW - Duration::minutes(1),
            ends_at: Some(NOW + Duration::hours(1)),
            access,
            sections: sections.iter().map(|s| (*s).to_owned()).collect(),
            tiers: Vec::new(),
            max_tickets_per_account: limit,
            waiting_room: None,
        }
    }

    /// Sections A and B of 10 seats each; a code presale of A (2 per account) open now and a
    /// general sale from an hour on.
    fn engine() -> EventEngine {
        let seats = ["A", "B"]
            .iter()
            .flat_map(|section| {
                (1..=10).map(move |n| SeatRow {
                    seat_id: format!("{section}-1-{n}"),
                    status: SeatStatus::Available,
                    hold_id: None,
                    hold_expires_at: None,
                    price_minor: 1000,
                })
            })
            .collect();
        let mut general = phase("general", PhaseAccess::Open, &[], None);
        general.starts_at = NOW + Duration::hours(1);
        general.ends_at = None;
        let snapshot = EngineSnapshot {
            seats,
            lanes: Lanes::new(
                vec![
                    phase("presale", PhaseAccess::Code, &["A"], Some(2)),
                    general,
                ],
                Vec::new(),
            ),
            ..EngineSnapshot::default()
        };
        let rules = SaleRules {
            section_order: vec!["A".into(), "B".into()],
            on_sale_at: NOW + Duration::days(1),
            hold_ttl_s: 300,
            max_seats_per_hold: 4,
            max_tickets_per_account: 6,
            currency: "EUR".into(),
            prices: Default::default(),
            accessibility: Default::default(),
        };
        EventEngine::load(rules, snapshot, NOW)
    }

    fn redeem(account: &str, code: &str, max_uses: Option<u32>) -> Command {
        Command::RedeemAccess(AccessRedeem {
            account_id: account.into(),
            phase_id: "presale".into(),
            code: code.into(),
            max_uses,
        })
    }

    fn hold(account: &str, key: &str, seat_ids: &[&str], phase_id: Option<&str>) -> Command {
        let shape = HoldShape::Seats {
            seat_ids: seat_ids.iter().map(|s| (*s).to_owned()).collect(),
        };
        Command::Hold(HoldRequest {
            account_id: account.into(),
            idempotency_key: key.into(),
            request_digest: format!("{shape:?}"),
            new_hold_id: format!("h-{account}-{key}"),
            shape,
            phase_id: phase_id.map(str::to_owned),
            ticket_types: Default::default(),
            accessible: false,
        })
    }

    fn access(decision: &Decision) -> &AccessDecision {
        match decision {
            Decision::Access(decision) => decision,
            other => panic!("not a redemption's decision: {other:?}"),
        }
    }

    fn outcome(decision: &Decision) -> &HoldOutcome {
        match decision {
            Decision::Hold(outcome) => outcome,
            other => panic!("not a hold's decision: {other:?}"),
        }
    }

    #[test]
    fn a_single_use_code_in_one_group_admits_the_first_only() {
        let mut engine = engine();
        let commands: Vec<Command> = (0..5)
            .map(|i| redeem(&format!("fan{i}"), "CODE1", Some(1)))
            .collect();
        let (decisions, effects) = engine.decide(NOW, &commands);
        assert_eq!(access(&decisions[0]), &AccessDecision::Redeemed);
        for decision in &decisions[1..] {
            assert_eq!(access(decision), &AccessDecision::UsedUp);
        }
        assert_eq!(effects.access_redeemed().count(), 1);
        // And in a later group too.
        let (decisions, effects) = engine.decide(NOW, &[redeem("late", "CODE1", Some(1))]);
        assert_eq!(access(&decisions[0]), &AccessDecision::UsedUp);
        assert!(effects.is_empty());
    }

    #[test]
    fn an_account_redeems_once_and_again_is_the_same_success() {
        let mut engine = engine();
        let (decisions, _) = engine.decide(
            NOW,
            &[
                redeem("ann", "CODE2", Some(3)),
                redeem("ann", "CODE2", Some(3)),
                redeem("ann", "OTHER", None),
            ],
        );
        assert_eq!(access(&decisions[0]), &AccessDecision::Redeemed);
        assert_eq!(access(&decisions[1]), &AccessDecision::AlreadyRedeemed);
        assert_eq!(access(&decisions[2]), &AccessDecision::AlreadyRedeemed);
        assert_eq!(engine.code_uses("presale", "CODE2"), 1);
        let (decisions, _) = engine.decide(NOW, &[redeem("bob", "NOPE", None)]);
        assert_eq!(access(&decisions[0]), &AccessDecision::UnknownCode);
    }

    #[test]
    fn a_code_phase_holds_for_redeemers_inside_its_sections_and_limit() {
        let mut engine = engine();
        let (decisions, _) = engine.decide(NOW, &[hold("ann", "k1", &["A-1-1"], None)]);
        assert_eq!(
            outcome(&decisions[0]),
            &HoldOutcome::AccessCodeRequired {
                phase_id: "presale".into()
            }
        );
        engine.decide(NOW, &[redeem("ann", "CODE3", Some(1))]);
        let (decisions, effects) = engine.decide(
            NOW,
            &[
                hold("ann", "k2", &["B-1-1"], Some("presale")),
                hold("ann", "k3", &["A-1-1", "A-1-2"], None),
                hold("ann", "k4", &["A-1-3"], None),
            ],
        );
        assert!(matches!(
            outcome(&decisions[0]),
            HoldOutcome::OutsidePhase { phase_id, .. } if phase_id == "presale"
        ));
        let HoldOutcome::Held(held) = outcome(&decisions[1]) else {
            panic!("{decisions:?}");
        };
        assert_eq!(held.phase_id.as_deref(), Some("presale"));
        assert_eq!(
            outcome(&decisions[2]),
            &HoldOutcome::PurchaseLimit {
                limit: 2,
                current: 2,
                requested: 1
            }
        );
        assert_eq!(effects.holds_created().count(), 1);
        assert_eq!(engine.invariants(), Vec::<String>::new());
    }

    #[test]
    fn the_general_sale_opens_after_the_presale_by_the_clock() {
        let mut engine = engine();
        let (decisions, _) = engine.decide(NOW, &[hold("bob", "k1", &["B-1-1"], Some("general"))]);
        assert_eq!(
            outcome(&decisions[0]),
            &HoldOutcome::SaleNotOpen {
                on_sale_at: NOW + Duration::hours(1)
            }
        );
        let later = NOW + Duration::hours(1) + Duration::seconds(1);
        let (decisions, _) = engine.decide(
            later,
            &[
                hold("bob", "k2", &["B-1-1"], None),
                hold("bob", "k3", &["A-1-1"], Some("presale")),
                redeem("carl", "CODE4", Some(1)),
            ],
        );
        let HoldOutcome::Held(held) = outcome(&decisions[0]) else {
            panic!("{decisions:?}");
        };
        assert_eq!(held.phase_id.as_deref(), Some("general"));
        assert!(matches!(
            outcome(&decisions[1]),
            HoldOutcome::PhaseEnded { phase_id, .. } if phase_id == "presale"
        ));
        assert_eq!(access(&decisions[2]), &AccessDecision::PhaseEnded);
    }
}
