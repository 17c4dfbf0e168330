//! Comps (issue 40): seats or units an allocation keeps (holds of its system account, see
//! `crate::allocation`) given to an account, in one command of the group: the kept holds end
//! and the account holds exactly their seats and units at price 0, so that no other command
//! can take them in between; the comp's checkout then confirms it (`server`'s comps route).
//! What a kept hold is, how it lapses and how it is released by hand need nothing here: the
//! engine treats it as the hold it is.

use super::{Effect, Effects, EventEngine, HoldCreated};
use crate::allocation::AllocationPurpose;
use crate::decide::{HoldOutcome, HoldRequest, HoldShape};
use crate::hold::HoldStatus;

/// Whether a hold request is a comp (decided alone, by [`EventEngine::decide_comp`]).
pub(super) fn is_comp(request: &HoldRequest) -> bool {
    matches!(&request.shape, HoldShape::Allocation(a) if a.is_comp())
}

impl EventEngine {
    /// Decides a comp: its key first (a replay ends nothing), then that every hold it names is
    /// the allocation's, kept, live and holds exactly the comp's seats or units, and that
    /// the account may own that many more; then those holds end and the comp's hold is
    /// decided like any other on the seats and units they freed.
    pub(super) fn decide_comp(
        &mut self,
        index: usize,
        request: &HoldRequest,
        effects: &mut Effects,
    ) -> HoldOutcome {
        if self.cancelled {
            return HoldOutcome::EventCancelled;
        }
        let HoldShape::Allocation(shape) = &request.shape else {
            return self.decide_one_hold(index, request, effects);
        };
        let AllocationPurpose::Comp {
            from_account,
            from_hold_ids,
        } = &shape.purpose
        else {
            return self.decide_one_hold(index, request, effects);
        };
        let key = (request.account_id.clone(), request.idempotency_key.clone());
        if self.state.prior_digests.contains_key(&key) {
            // A replay, or the key reused: decided as any hold request, ending nothing.
            return self.decide_one_hold(index, request, effects);
        }
        let now = self.state.now;
        let mut seats = Vec::new();
        let mut units: u32 = 0;
        let mut not_kept = Vec::new();
        for hold_id in from_hold_ids {
            let kept = self.holds.get(hold_id).filter(|hold| {
                hold.account_id == *from_account
                    && hold.status == HoldStatus::Held
                    && hold.expires_at > now
            });
            match kept {
                None => not_kept.push(hold_id.clone()),
                Some(hold) => {
                    seats.extend(hold.seat_ids.iter().cloned());
                    if hold.tier_id.is_some() {
                        if hold.tier_id.as_ref() != shape.tier.as_ref().map(|(t, _)| t) {
                            not_kept.push(hold_id.clone());
                        }
                        units = units.saturating_add(hold.quantity);
                    }
                }
            }
        }
        let mut asked = shape.seat_ids.clone();
        asked.sort();
        seats.sort();
        let units_asked = shape.tier.as_ref().map_or(0, |(_, n)| *n);
        if !not_kept.is_empty() || asked != seats || units != units_asked {
            return match &shape.tier {
                Some((tier_id, _)) => HoldOutcome::SoldOut {
                    tier_id: tier_id.clone(),
                    available: i64::from(units),
                },
                None => HoldOutcome::SeatsUnavailable {
                    unavailable_seat_ids: shape
                        .seat_ids
                        .iter()
                        .filter(|s| !seats.contains(s))
                        .cloned()
                        .collect(),
                    largest_block: None,
                },
            };
        }
        let current = self.usage(&request.account_id, now);
        let requested = shape.quantity();
        if current.saturating_add(requested) > self.rules.max_tickets_per_account {
            return HoldOutcome::PurchaseLimit {
                limit: self.rules.max_tickets_per_account,
                current,
                requested,
            };
        }
        for hold_id in from_hold_ids {
            if let Some(ended) = self.end_hold(hold_id) {
                effects.push(Effect::HoldReleased(ended));
            }
        }
        self.decide_one_hold(index, request, effects)
    }

    /// One hold request decided as a run of its own, its new hold recorded in `effects`.
    fn decide_one_hold(
        &mut self,
        index: usize,
        request: &HoldRequest,
        effects: &mut Effects,
    ) -> HoldOutcome {
        let outcome = self
            .decide_holds(std::slice::from_ref(request), index)
            .pop()
            .unwrap_or(HoldOutcome::Invalid {
                field: "hold".into(),
                reason: "not decided".into(),
            });
        if let HoldOutcome::Held(hold) = &outcome {
            effects.push(Effect::HoldCreated(HoldCreated {
                index,
                key: request.idempotency_key.clone(),
                hold: hold.clone(),
            }));
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;
    use time::{Duration, OffsetDateTime};

    use super::*;
    use crate::allocation::{KeptHold, KeptItem, account_for, comp_shape, keep_shape};
    use crate::decide::{SeatRow, TierRow};
    use crate::engine::{Command, Decision, EngineSnapshot, ReleaseDecision};
    use crate::event::SaleRules;
    use crate::hold::SeatStatus;

    const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);
    const UNTIL: OffsetDateTime = datetime!(2026-12-01 12:00 UTC);

    fn engine(on_sale_at: OffsetDateTime) -> EventEngine {
        let snapshot = EngineSnapshot {
            seats: (1..=8)
                .map(|n| SeatRow {
                    seat_id: format!("A-1-{n}"),
                    status: SeatStatus::Available,
                    hold_id: None,
                    hold_expires_at: None,
                    price_minor: 1000,
                })
                .collect(),
            tiers: vec![TierRow {
                tier_id: "GA".into(),
                capacity: 2,
                available: 2,
                held: 0,
                sold: 0,
                price_minor: 500,
            }],
            ..EngineSnapshot::default()
        };
        let rules = SaleRules {
            section_order: vec!["A".into()],
            on_sale_at,
            hold_ttl_s: 300,
            max_seats_per_hold: 4,
            max_tickets_per_account: 4,
            currency: "EUR".into(),
            prices: Default::default(),
            accessibility: Default::default(),
        };
        EventEngine::load(rules, snapshot, NOW)
    }

    fn request(account: &str, key: &str, hold_id: &str, shape: HoldShape) -> Command {
        Command::Hold(HoldRequest {
            account_id: account.into(),
            idempotency_key: key.into(),
            request_digest: format!("{shape:?}"),
            new_hold_id: hold_id.into(),
            shape,
            phase_id: None,
            ticket_types: Default::default(),
            accessible: false,
        })
    }

    fn seats(ids: &[&str]) -> HoldShape {
        HoldShape::Seats {
            seat_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// Keeps `items` for allocation "sponsor" until [`UNTIL`], one hold `k<n>` each.
    fn keep(engine: &mut EventEngine, items: &[KeptItem]) -> Vec<KeptHold> {
        let commands: Vec<Command> = items
            .iter()
            .enumerate()
            .map(|(n, item)| {
                request(
                    &account_for("sponsor"),
                    &format!("key{n}"),
                    &format!("k{n}"),
                    keep_shape(item, UNTIL),
                )
            })
            .collect();
        let (decisions, _) = engine.decide(NOW, &commands);
        for decision in &decisions {
            assert!(
                matches!(decision, Decision::Hold(HoldOutcome::Held(_))),
                "{decision:?}"
            );
        }
        items
            .iter()
            .enumerate()
            .map(|(n, item)| KeptHold {
                hold_id: format!("k{n}"),
                item: item.clone(),
            })
            .collect()
    }

    fn seat(id: &str) -> KeptItem {
        KeptItem::Seat(id.into())
    }

    #[test]
    fn kept_seats_are_held_before_the_sale_opens_and_past_every_account_limit() {
        let mut engine = engine(NOW + Duration::hours(1));
        let items: Vec<KeptItem> = (1..=6).map(|n| seat(&format!("A-1-{n}"))).collect();
        keep(&mut engine, &items);
        let row = engine.seat("A-1-6").expect("seat");
        assert_eq!(row.status, SeatStatus::Held);
        assert_eq!(row.hold_expires_at, Some(UNTIL));
        assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
        assert!(
            !engine.has_timers_or_waiters(),
            "kept seats alone keep no writer loaded"
        );
    }

    #[test]
    fn fans_are_refused_kept_seats_and_units_and_best_available_skips_them() {
        let mut engine = engine(NOW - Duration::hours(1));
        keep(
            &mut engine,
            &[
                seat("A-1-1"),
                seat("A-1-2"),
                KeptItem::Unit("GA".into()),
                KeptItem::Unit("GA".into()),
            ],
        );
        let best = HoldShape::BestAvailable {
            quantity: 2,
            section: None,
            max_price_minor: None,
            together: crate::best::Together::Required,
        };
        let (decisions, _) = engine.decide(
            NOW,
            &[
                request("fan", "1", "f1", seats(&["A-1-2"])),
                request(
                    "fan",
                    "2",
                    "f2",
                    HoldShape::Tier {
                        tier_id: "GA".into(),
                        quantity: 1,
                    },
                ),
                request("fan", "3", "f3", best),
            ],
        );
        assert_eq!(
            decisions[0],
            Decision::Hold(HoldOutcome::SeatsUnavailable {
                unavailable_seat_ids: vec!["A-1-2".into()],
                largest_block: None,
            })
        );
        assert_eq!(
            decisions[1],
            Decision::Hold(HoldOutcome::SoldOut {
                tier_id: "GA".into(),
                available: 0,
            })
        );
        let Decision::Hold(HoldOutcome::Held(hold)) = &decisions[2] else {
            panic!("{:?}", decisions[2]);
        };
        let taken: Vec<&str> = hold.seats.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(taken, ["A-1-3", "A-1-4"]);
    }

    #[test]
    fn kept_seats_lapse_at_release_time_and_sell_to_fans() {
        let mut engine = engine(NOW - Duration::hours(1));
        keep(&mut engine, &[seat("A-1-1")]);
        let (decisions, effects) =
            engine.decide(UNTIL, &[request("fan", "1", "f1", seats(&["A-1-1"]))]);
        assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
        assert_eq!(effects.holds_expired().count(), 1);
        assert!(engine.invariants().is_empty());
    }

    #[test]
    fn only_the_allocation_releases_its_seats() {
        let mut engine = engine(NOW - Duration::hours(1));
        keep(&mut engine, &[seat("A-1-1")]);
        let (decisions, _) = engine.decide(
            NOW,
            &[
                Command::Release {
                    account_id: "fan".into(),
                    hold_id: "k0".into(),
                },
                Command::Release {
                    account_id: account_for("sponsor"),
                    hold_id: "k0".into(),
                },
                request("fan", "1", "f1", seats(&["A-1-1"])),
            ],
        );
        assert_eq!(decisions[0], Decision::Release(ReleaseDecision::NotFound));
        assert_eq!(
            decisions[1],
            Decision::Release(ReleaseDecision::Released {
                hold_id: "k0".into()
            })
        );
        assert!(matches!(decisions[2], Decision::Hold(HoldOutcome::Held(_))));
    }

    #[test]
    fn a_comp_moves_kept_seats_to_the_account_at_price_zero_in_one_command() {
        let mut engine = engine(NOW + Duration::hours(1));
        let kept = keep(&mut engine, &[seat("A-1-1"), seat("A-1-2"), seat("A-1-3")]);
        let shape = comp_shape("sponsor", &kept[..2]).expect("a comp");
        let comp = request("guest", "comp1", "c1", shape);
        let (decisions, effects) = engine.decide(NOW, std::slice::from_ref(&comp));
        let Decision::Hold(HoldOutcome::Held(hold)) = &decisions[0] else {
            panic!("{:?}", decisions[0]);
        };
        assert_eq!(hold.total_minor, 0);
        assert!(hold.seats.iter().all(|(_, price)| *price == 0));
        assert_eq!(effects.holds_released().count(), 2);
        assert_eq!(
            engine.seat("A-1-1").and_then(|s| s.hold_id.as_deref()),
            Some("c1")
        );
        assert_eq!(
            engine.seat("A-1-3").and_then(|s| s.hold_id.as_deref()),
            Some("k2")
        );
        assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
        // The same comp again is a replay: nothing more ends.
        let (decisions, effects) = engine.decide(NOW, &[comp]);
        assert_eq!(decisions[0], Decision::Hold(HoldOutcome::Replayed));
        assert!(effects.is_empty());
    }

    #[test]
    fn a_comp_of_what_is_no_longer_kept_or_over_the_limit_ends_nothing() {
        let mut engine = engine(NOW - Duration::hours(1));
        let items: Vec<KeptItem> = (1..=6).map(|n| seat(&format!("A-1-{n}"))).collect();
        let kept = keep(&mut engine, &items);
        engine.decide(
            NOW,
            &[Command::Release {
                account_id: account_for("sponsor"),
                hold_id: "k0".into(),
            }],
        );
        let stale = comp_shape("sponsor", &kept[..2]).expect("a comp");
        let too_many = comp_shape("sponsor", &kept[1..]).expect("a comp");
        let other = comp_shape("artist", &kept[1..2]).expect("a comp");
        let (decisions, effects) = engine.decide(
            NOW,
            &[
                request("guest", "1", "c1", stale),
                request("guest", "2", "c2", too_many),
                request("guest", "3", "c3", other),
            ],
        );
        assert_eq!(
            decisions[0],
            Decision::Hold(HoldOutcome::SeatsUnavailable {
                unavailable_seat_ids: vec!["A-1-1".into()],
                largest_block: None,
            })
        );
        assert_eq!(
            decisions[1],
            Decision::Hold(HoldOutcome::PurchaseLimit {
                limit: 4,
                current: 0,
                requested: 5,
            })
        );
        assert!(matches!(
            decisions[2],
            Decision::Hold(HoldOutcome::SeatsUnavailable { .. })
        ));
        assert!(effects.is_empty());
        assert_eq!(
            engine.seat("A-1-2").and_then(|s| s.hold_id.as_deref()),
            Some("k1")
        );
    }

    #[test]
    fn a_comp_of_units_moves_them_without_changing_the_tier_counts() {
        let mut engine = engine(NOW - Duration::hours(1));
        let kept = keep(
            &mut engine,
            &[KeptItem::Unit("GA".into()), KeptItem::Unit("GA".into())],
        );
        let shape = comp_shape("sponsor", &kept).expect("a comp");
        let (decisions, _) = engine.decide(NOW, &[request("guest", "1", "c1", shape)]);
        assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
        let tier = engine.tier("GA").expect("tier");
        assert_eq!((tier.available, tier.held), (0, 2));
        assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
    }
}
