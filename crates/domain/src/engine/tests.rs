//! Table tests of the event engine: one small scenario per case.

use time::macros::datetime;
use time::{Duration, OffsetDateTime};

use super::*;
use crate::best::Together;
use crate::decide::HoldShape;

const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

fn rules() -> SaleRules {
    SaleRules {
        section_order: vec!["A".into()],
        on_sale_at: NOW - Duration::hours(1),
        hold_ttl_s: 300,
        max_seats_per_hold: 4,
        max_tickets_per_account: 4,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    }
}

fn engine(seats: usize) -> EventEngine {
    engine_under(rules(), seats)
}

fn engine_under(rules: SaleRules, seats: usize) -> EventEngine {
    let snapshot = EngineSnapshot {
        seats: (1..=seats)
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
            capacity: 3,
            available: 3,
            held: 0,
            sold: 0,
            price_minor: 500,
        }],
        ..EngineSnapshot::default()
    };
    EventEngine::load(rules, snapshot, NOW)
}

fn hold(account: &str, key: &str, shape: HoldShape) -> Command {
    Command::Hold(HoldRequest {
        account_id: account.into(),
        idempotency_key: key.into(),
        request_digest: format!("{shape:?}"),
        new_hold_id: format!("h-{account}-{key}"),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    })
}

fn seats(ids: &[&str]) -> HoldShape {
    HoldShape::Seats {
        seat_ids: ids.iter().map(|id| (*id).to_string()).collect(),
    }
}

fn best(quantity: u32) -> HoldShape {
    best_together(quantity, Together::Prefer)
}

fn best_together(quantity: u32, together: Together) -> HoldShape {
    HoldShape::BestAvailable {
        quantity,
        section: None,
        max_price_minor: None,
        together,
    }
}

/// An engine over section A with `rows` rows of `per_row` seats, every seat free.
fn engine_of_rows(rows: u32, per_row: u32) -> EventEngine {
    let snapshot = EngineSnapshot {
        seats: (1..=rows)
            .flat_map(|row| (1..=per_row).map(move |n| (row, n)))
            .map(|(row, n)| SeatRow {
                seat_id: format!("A-{row}-{n}"),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor: 1000,
            })
            .collect(),
        ..EngineSnapshot::default()
    };
    EventEngine::load(rules(), snapshot, NOW)
}

fn held_seats(decision: &Decision) -> (Vec<&str>, bool) {
    let Decision::Hold(HoldOutcome::Held(hold)) = decision else {
        panic!("not held: {decision:?}");
    };
    let seats = hold.seats.iter().map(|(id, _)| id.as_str()).collect();
    (seats, hold.split)
}

#[test]
fn a_party_of_four_with_only_pairs_left_is_split_or_refused_as_it_asks() {
    // Two rows of five; the middle seat of each is taken: only pairs are left.
    let mut engine = engine_of_rows(2, 5);
    engine.decide(NOW, &[hold("x", "1", seats(&["A-1-3", "A-2-3"]))]);
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 2)]);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            hold("a", "1", best_together(4, Together::Required)),
            hold("b", "1", best_together(4, Together::Prefer)),
        ],
    );
    assert_eq!(
        decisions[0],
        Decision::Hold(HoldOutcome::SeatsUnavailable {
            unavailable_seat_ids: Vec::new(),
            largest_block: Some(2),
        })
    );
    // Same row first: both pairs of row 1.
    assert_eq!(
        held_seats(&decisions[1]),
        (vec!["A-1-1", "A-1-2", "A-1-4", "A-1-5"], true)
    );
    assert_eq!(effects.seats_taken().count(), 4);
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 2)]);
    // Row 1 is full now: the next party of four takes row 2's two pairs.
    let (decisions, _) = engine.decide(NOW, &[hold("c", "1", best(4))]);
    assert_eq!(
        held_seats(&decisions[0]),
        (vec!["A-2-1", "A-2-2", "A-2-4", "A-2-5"], true)
    );
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 0)]);
    let (decisions, _) = engine.decide(NOW, &[hold("d", "1", best(1))]);
    assert_eq!(
        decisions[0],
        Decision::Hold(HoldOutcome::SeatsUnavailable {
            unavailable_seat_ids: Vec::new(),
            largest_block: Some(0),
        })
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_split_party_sits_in_adjacent_rows_when_no_row_has_room() {
    // Three rows of four, each with one pair left at seats 1-2 (3 and 4 taken).
    let mut engine = engine_of_rows(3, 4);
    engine.decide(
        NOW,
        &[
            hold("x", "1", seats(&["A-1-3", "A-1-4", "A-2-3", "A-2-4"])),
            hold("y", "1", seats(&["A-3-3", "A-3-4"])),
        ],
    );
    let (decisions, _) = engine.decide(NOW, &[hold("a", "1", best(4))]);
    assert_eq!(
        held_seats(&decisions[0]),
        (vec!["A-1-1", "A-1-2", "A-2-1", "A-2-2"], true)
    );
    // "no" still takes a block when one fits (not split).
    let (decisions, _) = engine.decide(NOW, &[hold("b", "1", best_together(2, Together::No))]);
    assert_eq!(held_seats(&decisions[0]), (vec!["A-3-1", "A-3-2"], false));
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn the_largest_block_follows_seats_as_they_go_and_come_back() {
    let mut engine = engine(6);
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 6)]);
    let (decisions, _) = engine.decide(NOW, &[hold("a", "1", best(2))]);
    assert_eq!(held_seats(&decisions[0]), (vec!["A-1-3", "A-1-4"], false));
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 2)]);
    engine.decide(NOW, &[hold("b", "1", seats(&["A-1-6"]))]);
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 2)]);
    engine.decide(NOW, &[hold("c", "1", seats(&["A-1-1"]))]);
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 1)]);
    // Every hold lapses: the index frees the seats at their deadline, before any group.
    engine.advance(NOW + Duration::seconds(300));
    assert_eq!(engine.largest_blocks(), [("A".to_string(), 6)]);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_group_takes_seats_in_arrival_order_and_names_every_write() {
    let mut engine = engine(4);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1", "A-1-2"])),
            hold("b", "1", seats(&["A-1-2"])),
            hold("b", "2", best(2)),
        ],
    );
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    assert!(matches!(
        decisions[1],
        Decision::Hold(HoldOutcome::SeatsUnavailable { .. })
    ));
    let Decision::Hold(HoldOutcome::Held(third)) = &decisions[2] else {
        panic!("best available should find A-1-3 and A-1-4: {decisions:?}");
    };
    let picked: Vec<&str> = third.seats.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(picked, ["A-1-3", "A-1-4"]);
    assert_eq!(effects.holds_created().count(), 2);
    assert_eq!(
        effects.holds_created().nth(1).map(|created| created.index),
        Some(2),
        "the command index of the third request"
    );
    assert_eq!(effects.seats_taken().count(), 4);
    assert_eq!(effects.map_seats().len(), 4);
    assert_eq!(effects.accounts_checked(), BTreeSet::from(["a", "b"]));
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// The seat map and the rows the store writes are read from the one list of effects: a seat
/// one command frees and a later one takes shows the later change, and the map ends where
/// the engine's seats are.
#[test]
fn a_group_lists_its_effects_in_command_order_and_its_map_ends_where_the_seats_are() {
    let mut engine = engine(4);
    engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1", "A-1-2"])),
            hold("b", "1", seats(&["A-1-3"])),
        ],
    );
    engine.decide(
        NOW,
        &[Command::Checkout(CheckoutRequest {
            account_id: "b".into(),
            hold_id: "h-b-1".into(),
            order_id: "o-b".into(),
            grace_s: 60,
        })],
    );
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            Command::Release {
                account_id: "a".into(),
                hold_id: "h-a-1".into(),
            },
            hold("c", "1", seats(&["A-1-1"])),
            Command::Payment(PaymentRequest {
                account_id: "b".into(),
                hold_id: "h-b-1".into(),
                outcome: PaymentOutcome::Paid,
            }),
        ],
    );
    assert_eq!(decisions[2], Decision::Payment(PaymentDecision::Confirmed));
    let kinds: Vec<&str> = effects
        .iter()
        .map(|effect| match effect {
            Effect::HoldReleased(_) => "released",
            Effect::HoldCreated(_) => "created",
            Effect::HoldConfirmed(_) => "confirmed",
            other => panic!("not decided here: {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["released", "created", "confirmed"]);
    let created: Vec<&HoldCreated> = effects.holds_created().collect();
    assert_eq!((created[0].index, created[0].key.as_str()), (1, "1"));
    assert_eq!(effects.accounts_checked(), BTreeSet::from(["b", "c"]));
    let mut shown: BTreeMap<&str, (SeatStatus, Option<OffsetDateTime>)> = BTreeMap::new();
    for change in effects.map_seats() {
        shown.insert(change.seat_id, (change.status, change.hold_expires_at));
    }
    assert_eq!(shown.len(), 3, "A-1-4 is not touched: {shown:?}");
    for (seat_id, (status, until)) in &shown {
        let seat = engine.seat(seat_id).expect("seat");
        assert_eq!(
            (seat.status, seat.hold_expires_at),
            (*status, *until),
            "{seat_id}"
        );
    }
    assert_eq!(shown["A-1-1"].0, SeatStatus::Held, "freed, then taken by c");
    assert_eq!(shown["A-1-2"].0, SeatStatus::Available);
    assert_eq!(shown["A-1-3"].0, SeatStatus::Sold);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_key_used_in_an_earlier_group_replays_and_a_changed_body_is_refused() {
    let mut engine = engine(4);
    engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1"]))]);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1"])),
            hold("a", "1", seats(&["A-1-2"])),
        ],
    );
    assert_eq!(decisions[0], Decision::Hold(HoldOutcome::Replayed));
    assert_eq!(
        decisions[1],
        Decision::Hold(HoldOutcome::KeyReusedWithOtherRequest)
    );
    assert!(!effects.writes_inventory());
}

#[test]
fn a_passed_deadline_frees_the_seat_for_best_available_without_a_write() {
    let mut engine = engine(2);
    engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1", "A-1-2"]))]);
    let (refused, _) = engine.decide(NOW + Duration::seconds(299), &[hold("b", "1", best(2))]);
    assert!(matches!(
        refused[0],
        Decision::Hold(HoldOutcome::SeatsUnavailable { .. })
    ));
    let (granted, effects) =
        engine.decide(NOW + Duration::seconds(300), &[hold("b", "2", best(2))]);
    assert!(matches!(granted[0], Decision::Hold(HoldOutcome::Held(_))));
    assert_eq!(effects.seats_taken().count(), 2);
    assert_eq!(
        effects.holds_expired().count(),
        1,
        "the lapsed hold ends in the same group"
    );
    let expired: Vec<_> = effects.holds_expired().collect();
    assert_eq!(expired[0].seat_ids, ["A-1-1", "A-1-2"]);
    assert_eq!(engine.usage("a", NOW + Duration::seconds(300)), 0);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn an_expired_hold_ends_in_the_next_group_and_gives_its_units_back() {
    let mut engine = engine(1);
    let tier = |q| HoldShape::Tier {
        tier_id: "GA".into(),
        quantity: q,
    };
    engine.decide(NOW, &[hold("a", "1", tier(3))]);
    let (sold_out, _) = engine.decide(NOW, &[hold("b", "1", tier(1))]);
    assert!(matches!(
        sold_out[0],
        Decision::Hold(HoldOutcome::SoldOut { available: 0, .. })
    ));
    let later = NOW + Duration::seconds(300);
    let (granted, effects) = engine.decide(later, &[hold("b", "2", tier(2))]);
    assert!(matches!(granted[0], Decision::Hold(HoldOutcome::Held(_))));
    assert_eq!(effects.holds_expired().count(), 1);
    let expired: Vec<_> = effects.holds_expired().collect();
    assert_eq!(expired[0].hold_id, "h-a-1");
    assert_eq!(expired[0].tier, Some(("GA".to_string(), 3)));
    assert_eq!(effects.tier_units_taken().get("GA"), Some(&2));
    assert_eq!(engine.tier("GA").map(|t| t.available), Some(1));
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_release_frees_the_seats_and_only_its_owner_may_release() {
    let mut engine = engine(2);
    engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1", "A-1-2"]))]);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            Command::Release {
                account_id: "b".into(),
                hold_id: "h-a-1".into(),
            },
            Command::Release {
                account_id: "a".into(),
                hold_id: "h-a-1".into(),
            },
            hold("b", "1", best(2)),
            Command::Release {
                account_id: "a".into(),
                hold_id: "nope".into(),
            },
        ],
    );
    assert_eq!(decisions[0], Decision::Release(ReleaseDecision::NotFound));
    assert!(matches!(
        decisions[1],
        Decision::Release(ReleaseDecision::Released { .. })
    ));
    assert!(matches!(decisions[2], Decision::Hold(HoldOutcome::Held(_))));
    assert_eq!(decisions[3], Decision::Release(ReleaseDecision::NotKept));
    assert_eq!(effects.holds_released().count(), 1);
    let released: Vec<_> = effects.holds_released().collect();
    assert_eq!(released[0].seat_ids, ["A-1-1", "A-1-2"]);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_refresh_takes_in_a_sale_made_elsewhere() {
    let mut engine = engine(2);
    engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1"]))]);
    let sold = SeatRow {
        seat_id: "A-1-1".into(),
        status: SeatStatus::Sold,
        hold_id: Some("h-a-1".into()),
        hold_expires_at: None,
        price_minor: 1000,
    };
    let confirmed = EngineHold {
        hold_id: "h-a-1".into(),
        account_id: "a".into(),
        status: HoldStatus::Confirmed,
        tier_id: None,
        quantity: 1,
        seat_ids: vec!["A-1-1".into()],
        expires_at: NOW + Duration::seconds(300),
        exchange: false,
        phase_id: None,
    };
    engine.refresh(EngineRows {
        seats: vec![sold],
        tiers: Vec::new(),
        holds: vec![confirmed],
    });
    let far = NOW + Duration::hours(1);
    assert_eq!(
        engine.usage("a", far),
        1,
        "a confirmed hold counts for good"
    );
    let (decisions, _) = engine.decide(far, &[hold("b", "1", best(1))]);
    let Decision::Hold(HoldOutcome::Held(hold)) = &decisions[0] else {
        panic!("{decisions:?}");
    };
    assert_eq!(hold.seats[0].0, "A-1-2");
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_mass_lapse_is_spread_over_groups() {
    let mut engine = engine(EXPIRIES_PER_GROUP_MAX + 100);
    let commands: Vec<Command> = (1..=EXPIRIES_PER_GROUP_MAX + 100)
        .map(|n| hold(&format!("fan{n}"), "1", seats(&[&format!("A-1-{n}")])))
        .collect();
    engine.decide(NOW, &commands);
    let later = NOW + Duration::seconds(300);
    let (_, first) = engine.decide(later, &[]);
    assert_eq!(first.holds_expired().count(), EXPIRIES_PER_GROUP_MAX);
    assert_eq!(
        engine.next_deadline(),
        Some(later),
        "the rest are still due"
    );
    let (_, second) = engine.decide(later, &[]);
    assert_eq!(second.holds_expired().count(), 100);
    assert_eq!(engine.next_deadline(), None);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_hold_that_may_have_lapsed_by_the_stores_clock_is_neither_checked_out_nor_sold() {
    let checkout = |key: &str| {
        Command::Checkout(CheckoutRequest {
            account_id: "a".into(),
            hold_id: format!("h-a-{key}"),
            order_id: format!("o-{key}"),
            grace_s: 60,
        })
    };
    let mut engine = engine(2);
    engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1"])),
            hold("a", "2", seats(&["A-1-2"])),
        ],
    );
    // Both deadlines are NOW + 300 s; the store's clock is known to be within 10 ms below
    // them, or past them.
    let deadline = NOW + Duration::seconds(300);
    let (decisions, effects) = engine.decide_within(
        deadline - Duration::milliseconds(5),
        deadline + Duration::milliseconds(5),
        &[checkout("1")],
    );
    assert_eq!(decisions, [Decision::Checkout(CheckoutDecision::Expired)]);
    assert!(effects.checkouts_started().next().is_none());
    // Known to be before the deadline: the checkout starts.
    let (decisions, _) = engine.decide_within(
        deadline - Duration::milliseconds(10),
        deadline - Duration::milliseconds(1),
        &[checkout("2")],
    );
    assert!(matches!(
        decisions[0],
        Decision::Checkout(CheckoutDecision::Started { .. })
    ));
    // Its money comes when the store's clock may be past the grace deadline: cancelled.
    let grace = deadline + Duration::seconds(60);
    let (decisions, effects) = engine.decide_within(
        grace - Duration::milliseconds(3),
        grace,
        &[Command::Payment(PaymentRequest {
            account_id: "a".into(),
            hold_id: "h-a-2".into(),
            outcome: PaymentOutcome::Paid,
        })],
    );
    assert_eq!(
        decisions,
        [Decision::Payment(PaymentDecision::Cancelled {
            reason: settlement::reason::HOLD_EXPIRED
        })]
    );
    assert_eq!(effects.checkouts_cancelled().count(), 1);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// An engine of `seats` seats where account `a` bought A-1-1 (hold `h-old`).
fn engine_with_a_sale(seats: usize) -> EventEngine {
    sale_under(engine(seats))
}

/// `engine` with seat A-1-1 sold to account a (hold `h-old`).
fn sale_under(mut engine: EventEngine) -> EventEngine {
    engine.refresh(EngineRows {
        seats: vec![SeatRow {
            seat_id: "A-1-1".into(),
            status: SeatStatus::Sold,
            hold_id: Some("h-old".into()),
            hold_expires_at: None,
            price_minor: 1000,
        }],
        tiers: Vec::new(),
        holds: vec![EngineHold {
            hold_id: "h-old".into(),
            account_id: "a".into(),
            status: HoldStatus::Confirmed,
            tier_id: None,
            quantity: 1,
            seat_ids: vec!["A-1-1".into()],
            expires_at: NOW,
            exchange: false,
            phase_id: None,
        }],
    });
    engine
}

/// `a` exchanges A-1-1 (bought for 1000) for `to` at `price`, within the event.
fn exchange(id: &str, to: &str, price: i64) -> Command {
    Command::Exchange(ExchangeRequest {
        account_id: "a".into(),
        exchange_id: format!("x-{id}"),
        new_hold_id: format!("h-x-{id}"),
        closes_at: NOW + Duration::days(1),
        starts_at: NOW + Duration::days(2),
        gives_up: Some(ExchangeGivesUp {
            hold_id: "h-old".into(),
            seat_ids: vec!["A-1-1".into()],
            tier: None,
        }),
        ticket_ids: vec!["t-1".into()],
        takes: ExchangeTakes::Seats(vec![(to.into(), price)]),
        from_value_minor: 1000,
    })
}

#[test]
fn an_exchange_with_nothing_due_swaps_both_sides_in_one_group() {
    let mut engine = engine_with_a_sale(3);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            exchange("1", "A-1-2", 1000),
            hold("b", "1", seats(&["A-1-1"])),
        ],
    );
    assert_eq!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::Granted { expires_at: NOW })
    );
    assert!(
        matches!(decisions[1], Decision::Hold(HoldOutcome::Held(_))),
        "the seat given back is on sale at once: {decisions:?}"
    );
    let taken = effects.exchanges().next().expect("the exchange's effect");
    assert!(taken.sold);
    assert_eq!(
        taken.freed.as_ref().map(|f| f.seat_ids.clone()),
        Some(vec!["A-1-1".to_owned()])
    );
    let new_seat = engine.seat("A-1-2").expect("seat");
    assert_eq!(new_seat.status, SeatStatus::Sold);
    assert_eq!(new_seat.hold_id.as_deref(), Some("h-x-1"));
    assert_eq!(engine.usage("a", NOW), 1, "one ticket given up, one taken");
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn an_exchange_with_a_difference_holds_the_new_seat_until_it_is_paid_or_lapses() {
    let mut engine = engine_with_a_sale(3);
    let (decisions, effects) = engine.decide(NOW, &[exchange("1", "A-1-2", 1500)]);
    let deadline = NOW + Duration::seconds(300);
    assert_eq!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::Granted {
            expires_at: deadline
        })
    );
    let taken = effects.exchanges().next().expect("the exchange's effect");
    assert!(!taken.sold && taken.freed.is_none());
    assert_eq!(
        engine.seat("A-1-1").map(|s| s.status),
        Some(SeatStatus::Sold)
    );
    assert_eq!(
        engine.seat("A-1-2").map(|s| s.status),
        Some(SeatStatus::Held)
    );
    assert_eq!(
        engine.usage("a", NOW),
        2,
        "both sides count until it completes"
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
    // Unpaid, the new hold lapses like any hold.
    let (_, effects) = engine.decide(deadline, &[]);
    assert_eq!(effects.holds_expired().count(), 1);
    let expired: Vec<_> = effects.holds_expired().collect();
    assert_eq!(expired[0].hold_id, "h-x-1");
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn an_exchange_is_refused_for_a_taken_seat_a_closed_cutoff_a_taken_ticket_or_a_seat_no_longer_sold()
{
    let mut engine = engine_with_a_sale(4);
    engine.decide(NOW, &[hold("b", "1", seats(&["A-1-2"]))]);
    let closed = match exchange("2", "A-1-3", 1000) {
        Command::Exchange(mut request) => {
            request.closes_at = NOW;
            Command::Exchange(request)
        }
        other => other,
    };
    let taken_by_c = match exchange("3", "A-1-3", 1000) {
        Command::Exchange(mut request) => {
            request.takes = ExchangeTakes::Seats(
                ["A-1-3", "A-1-4"]
                    .iter()
                    .map(|s| ((*s).to_owned(), 1000))
                    .collect(),
            );
            request.gives_up = None;
            request.account_id = "c".into();
            Command::Exchange(request)
        }
        other => other,
    };
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            exchange("1", "A-1-2", 1000),
            closed,
            hold("c", "1", seats(&["A-1-3", "A-1-4"])),
            taken_by_c,
        ],
    );
    assert_eq!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::SeatsUnavailable(vec!["A-1-2".into()]))
    );
    assert_eq!(decisions[1], Decision::Exchange(ExchangeDecision::Closed));
    assert_eq!(
        decisions[3],
        Decision::Exchange(ExchangeDecision::SeatsUnavailable(vec![
            "A-1-3".into(),
            "A-1-4".into()
        ]))
    );
    assert!(effects.exchanges().next().is_none());
    // Granted once, its ticket is taken, and the old seat is no longer the old hold's.
    let mut fresh = engine_with_a_sale(4);
    fresh.decide(NOW, &[exchange("5", "A-1-2", 1000)]);
    let other_ticket = match exchange("7", "A-1-3", 1000) {
        Command::Exchange(mut request) => {
            request.ticket_ids = vec!["t-2".into()];
            Command::Exchange(request)
        }
        other => other,
    };
    let (again, _) = fresh.decide(NOW, &[exchange("6", "A-1-3", 1000), other_ticket]);
    assert_eq!(
        again,
        vec![
            Decision::Exchange(ExchangeDecision::TicketTaken("t-1".into())),
            Decision::Exchange(ExchangeDecision::NotSold("A-1-1".into()))
        ]
    );
    assert!(fresh.invariants().is_empty(), "{:?}", fresh.invariants());
}

#[test]
fn an_exchange_into_the_event_counts_against_the_limit() {
    let mut engine = engine_with_a_sale(6);
    // `a` owns 1 of at most 4 here; an exchange from another event brings 4 more.
    let request = |id: &str, n: usize| {
        Command::Exchange(ExchangeRequest {
            account_id: "a".into(),
            exchange_id: format!("x-{id}"),
            new_hold_id: format!("h-x-{id}"),
            closes_at: NOW + Duration::days(1),
            starts_at: NOW + Duration::days(2),
            gives_up: None,
            ticket_ids: (0..n).map(|t| format!("t-{id}-{t}")).collect(),
            takes: ExchangeTakes::Seats((2..2 + n).map(|s| (format!("A-1-{s}"), 100)).collect()),
            from_value_minor: 100 * n as i64,
        })
    };
    let (decisions, _) = engine.decide(NOW, &[request("1", 4), request("2", 3)]);
    assert_eq!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::PurchaseLimit)
    );
    assert!(matches!(
        decisions[1],
        Decision::Exchange(ExchangeDecision::Granted { .. })
    ));
    assert_eq!(engine.usage("a", NOW), 4);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// `a` transfers A-1-1 (sold by `h-old`, ticket `t-1`) to `to`.
fn transfer(id: &str, to: &str) -> Command {
    Command::Transfer(TransferRequest {
        transfer_id: format!("tr-{id}"),
        from_account_id: "a".into(),
        old_hold_id: "h-old".into(),
        to_account_id: to.into(),
        new_hold_id: format!("h-tr-{id}"),
        seat_ids: vec!["A-1-1".into()],
        tier: None,
        ticket_ids: vec!["t-1".into()],
        closes_at: NOW + Duration::days(1),
    })
}

#[test]
fn a_transfer_moves_the_sold_seat_to_the_receiver_without_taking_capacity() {
    let mut engine = engine_with_a_sale(3);
    let (decisions, effects) = engine.decide(NOW, &[transfer("1", "b")]);
    assert_eq!(decisions, [Decision::Transfer(TransferDecision::Accepted)]);
    let seat = engine.seat("A-1-1").expect("seat");
    assert_eq!(
        seat.status,
        SeatStatus::Sold,
        "still sold: no capacity moves"
    );
    assert_eq!(seat.hold_id.as_deref(), Some("h-tr-1"));
    assert_eq!(engine.usage("a", NOW), 0, "the giver counts it no more");
    assert_eq!(engine.usage("b", NOW), 1, "the receiver counts it");
    assert!(
        effects.map_seats().is_empty(),
        "the seat map does not change"
    );
    assert!(effects.holds_created().next().is_none() && effects.seats_taken().next().is_none());
    assert_eq!(effects.transfers().count(), 1);
    let transfers: Vec<_> = effects.transfers().collect();
    assert_eq!(transfers[0].old_hold_id, "h-old");
    assert!(effects.accounts_checked().contains("b"));
    // The same seats again (a second offer of them) find them sold by another hold now.
    let (decisions, _) = engine.decide(NOW, &[transfer("2", "c")]);
    assert_eq!(
        decisions,
        [Decision::Transfer(TransferDecision::NotSold(
            "A-1-1".into()
        ))]
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_transfer_is_refused_past_the_cutoff_over_the_receivers_limit_and_for_an_exchanged_ticket() {
    let mut engine = engine_with_a_sale(6);
    // `b` already holds 4, the limit.
    let (decisions, _) = engine.decide(
        NOW,
        &[hold("b", "1", seats(&["A-1-2", "A-1-3", "A-1-4", "A-1-5"]))],
    );
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    let closed = match transfer("1", "c") {
        Command::Transfer(mut request) => {
            request.closes_at = NOW;
            Command::Transfer(request)
        }
        other => other,
    };
    let (decisions, _) = engine.decide(NOW, &[closed, transfer("2", "b")]);
    assert_eq!(
        decisions,
        [
            Decision::Transfer(TransferDecision::Closed),
            Decision::Transfer(TransferDecision::PurchaseLimit)
        ]
    );
    // An exchange of the ticket granted first wins over a transfer in the same group.
    let (decisions, _) = engine.decide(NOW, &[exchange("1", "A-1-6", 1500), transfer("3", "c")]);
    assert!(matches!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::Granted { .. })
    ));
    assert_eq!(
        decisions[1],
        Decision::Transfer(TransferDecision::TicketTaken("t-1".into()))
    );
    assert_eq!(engine.usage("c", NOW), 0);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_transfer_of_a_hold_the_engine_does_not_keep_confirmed_is_asked_again() {
    let mut engine = engine(3);
    let (decisions, effects) = engine.decide(NOW, &[transfer("1", "b")]);
    assert_eq!(decisions, [Decision::Transfer(TransferDecision::NotKept)]);
    assert!(!effects.writes_inventory());
}

fn join(account: &str, quantity: u32, together: bool) -> Command {
    Command::WaitlistJoin(WaitlistJoin {
        waitlist_id: format!("w-{account}"),
        account_id: account.into(),
        quantity,
        section: None,
        max_price_minor: None,
        together,
        offer_hold_id: format!("h-w-{account}"),
        idempotency_key: format!("k-{account}"),
        request_digest: String::new(),
    })
}

#[test]
fn freed_seats_go_to_the_earliest_entry_they_satisfy_whole() {
    let mut engine = engine(4);
    // Sold out: `a` holds all four seats.
    let (decisions, _) = engine.decide(
        NOW,
        &[hold("a", "1", seats(&["A-1-1", "A-1-2", "A-1-3", "A-1-4"]))],
    );
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    let (decisions, effects) = engine.decide(NOW, &[join("b", 3, true), join("c", 2, false)]);
    assert_eq!(
        decisions,
        [
            Decision::Waitlist(WaitlistDecision::Joined { position: 1 }),
            Decision::Waitlist(WaitlistDecision::Joined { position: 2 })
        ]
    );
    assert!(
        effects.waitlist_offers().next().is_none(),
        "nothing is free yet"
    );
    assert_eq!(effects.waitlist_joined().count(), 2);
    // A second entry of one account is the first one.
    let (decisions, _) = engine.decide(NOW, &[join("b", 1, true)]);
    assert_eq!(
        decisions,
        [Decision::Waitlist(WaitlistDecision::AlreadyListed {
            waitlist_id: "w-b".into()
        })]
    );
    // The hold lapses: four seats come back; b (3 together) is offered first, c (2) cannot
    // be satisfied whole by the one left and keeps waiting.
    let lapse = NOW + Duration::seconds(301);
    let (_, effects) = engine.decide(lapse, &[]);
    assert_eq!(effects.holds_expired().count(), 1);
    assert_eq!(effects.waitlist_offers().count(), 1, "{effects:?}");
    let offer = effects.waitlist_offers().next().expect("an offer");
    assert_eq!(offer.waitlist_id, "w-b");
    assert_eq!(offer.hold.account_id, "b");
    assert_eq!(offer.hold.seats.len(), 3);
    assert_eq!(
        offer.hold.expires_at,
        lapse + Duration::seconds(i64::from(WAITLIST_OFFER_TTL_DEFAULT_S))
    );
    assert!(
        effects.holds_created().next().is_none(),
        "an offer is no command's hold"
    );
    assert_eq!(effects.seats_taken().count(), 3);
    assert_eq!(engine.usage("b", lapse), 3);
    // b's offer lapses in turn: its three seats and the fourth go to c (2 of them).
    let later = lapse + Duration::seconds(i64::from(WAITLIST_OFFER_TTL_DEFAULT_S) + 1);
    let (_, effects) = engine.decide(later, &[]);
    assert_eq!(effects.waitlist_offers().count(), 1);
    let offers: Vec<_> = effects.waitlist_offers().collect();
    assert_eq!(offers[0].waitlist_id, "w-c");
    assert_eq!(offers[0].hold.seats.len(), 2);
    // b may join again: its offer is no longer live.
    let (decisions, _) = engine.decide(later, &[join("b", 1, true)]);
    assert!(matches!(
        decisions[0],
        Decision::Waitlist(WaitlistDecision::Joined { .. })
    ));
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn an_entry_leaves_and_a_hold_request_in_the_same_group_comes_second() {
    let mut engine = engine(2);
    let (_, _) = engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1", "A-1-2"]))]);
    let (_, _) = engine.decide(NOW, &[join("b", 1, true), join("c", 1, true)]);
    let (decisions, effects) = engine.decide(
        NOW,
        &[Command::WaitlistLeave {
            account_id: "b".into(),
            waitlist_id: "w-b".into(),
        }],
    );
    assert_eq!(decisions, [Decision::Waitlist(WaitlistDecision::Left)]);
    assert_eq!(effects.waitlist_left().collect::<Vec<_>>(), ["w-b"]);
    // Leaving twice, or someone else's entry: not waiting.
    let (decisions, _) = engine.decide(
        NOW,
        &[
            Command::WaitlistLeave {
                account_id: "b".into(),
                waitlist_id: "w-b".into(),
            },
            Command::WaitlistLeave {
                account_id: "b".into(),
                waitlist_id: "w-c".into(),
            },
        ],
    );
    assert_eq!(
        decisions,
        [
            Decision::Waitlist(WaitlistDecision::NotWaiting),
            Decision::Waitlist(WaitlistDecision::NotWaiting)
        ]
    );
    // `a` releases; a hold request for the seat in the same group is decided first (it
    // came first), the other seat goes to c, never both to two.
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            Command::Release {
                account_id: "a".into(),
                hold_id: "h-a-1".into(),
            },
            hold("d", "1", seats(&["A-1-1"])),
        ],
    );
    assert!(matches!(decisions[1], Decision::Hold(HoldOutcome::Held(_))));
    assert_eq!(effects.waitlist_offers().count(), 1);
    assert_eq!(
        effects
            .waitlist_offers()
            .map(|offer| offer.hold.seats.clone())
            .collect::<Vec<_>>(),
        [vec![("A-1-2".to_owned(), 1000)]]
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// A house of two sections (A at 1000, B at 2000), `rows` rows of `per_row` seats each,
/// every seat held by an account of its own (`x-<seat>`, hold `h-x-<seat>-1`).
fn sold_out_house(rows: u32, per_row: u32) -> EventEngine {
    let mut seats = Vec::new();
    for (section, price_minor) in [("A", 1000), ("B", 2000)] {
        for row in 1..=rows {
            for number in 1..=per_row {
                seats.push(SeatRow {
                    seat_id: format!("{section}-{row}-{number}"),
                    status: SeatStatus::Available,
                    hold_id: None,
                    hold_expires_at: None,
                    price_minor,
                });
            }
        }
    }
    let holds: Vec<Command> = seats
        .iter()
        .map(|seat| hold(&format!("x-{}", seat.seat_id), "1", seats_of(&seat.seat_id)))
        .collect();
    let snapshot = EngineSnapshot {
        seats,
        ..EngineSnapshot::default()
    };
    let mut rules = rules();
    rules.section_order = vec!["A".into(), "B".into()];
    let mut engine = EventEngine::load(rules, snapshot, NOW);
    let (decisions, _) = engine.decide(NOW, &holds);
    assert!(
        decisions
            .iter()
            .all(|d| matches!(d, Decision::Hold(HoldOutcome::Held(_))))
    );
    engine
}

fn seats_of(seat_id: &str) -> HoldShape {
    seats(&[seat_id])
}

fn release_seat(seat_id: &str) -> Command {
    Command::Release {
        account_id: format!("x-{seat_id}"),
        hold_id: format!("h-x-{seat_id}-1"),
    }
}

fn join_for(
    account: &str,
    quantity: u32,
    section: Option<&str>,
    max_price_minor: Option<i64>,
    together: bool,
) -> Command {
    Command::WaitlistJoin(WaitlistJoin {
        waitlist_id: format!("w-{account}"),
        account_id: account.into(),
        quantity,
        section: section.map(str::to_owned),
        max_price_minor,
        together,
        offer_hold_id: format!("h-w-{account}"),
        idempotency_key: format!("k-{account}"),
        request_digest: String::new(),
    })
}

fn offered(effects: &Effects) -> Vec<(String, Vec<String>)> {
    effects
        .waitlist_offers()
        .map(|offer| {
            let mut seats: Vec<String> = offer.hold.seats.iter().map(|(s, _)| s.clone()).collect();
            seats.sort();
            (offer.waitlist_id.clone(), seats)
        })
        .collect()
}

#[test]
fn entries_nothing_satisfies_never_keep_a_later_entry_from_its_offer() {
    let mut engine = sold_out_house(2, 5);
    // 299 entries no freed seat can satisfy — too many seats, a price cap under every seat,
    // a section with nothing free, together where only singles come back — then one that can.
    let mut joins = Vec::new();
    for n in 0..299 {
        let account = format!("w{n:03}");
        joins.push(match n % 4 {
            0 => join_for(&account, 3, None, None, false),
            1 => join_for(&account, 1, None, Some(0), false),
            2 => join_for(&account, 1, Some("B"), None, true),
            _ => join_for(&account, 2, Some("A"), None, true),
        });
    }
    joins.push(join_for("w299", 2, None, None, false));
    let (decisions, effects) = engine.decide(NOW, &joins);
    assert!(
        effects.waitlist_offers().next().is_none(),
        "nothing is free yet"
    );
    assert_eq!(
        decisions[299],
        Decision::Waitlist(WaitlistDecision::Joined { position: 300 })
    );
    // Two single seats of A come back, apart.
    let (_, effects) = engine.decide(NOW, &[release_seat("A-1-1"), release_seat("A-2-5")]);
    assert_eq!(
        offered(&effects),
        [(
            "w-w299".to_owned(),
            vec!["A-1-1".to_owned(), "A-2-5".to_owned()]
        )]
    );
    assert_eq!(engine.waitlist.len(), 299, "the others keep their place");
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn the_earliest_entry_satisfied_whole_gets_the_seats_and_a_match_never_splits_a_party() {
    let mut engine = sold_out_house(1, 4);
    let (_, effects) = engine.decide(
        NOW,
        &[
            join_for("a", 3, Some("A"), None, true),
            join_for("b", 1, None, Some(1500), false),
            join_for("c", 2, None, None, true),
            join_for("d", 1, Some("B"), None, false),
            join_for("e", 1, None, None, true),
        ],
    );
    assert!(effects.waitlist_offers().next().is_none());
    // A-1-1 and A-1-2 and B-1-4 come back: a (3 of A together) cannot be satisfied; b takes
    // the first seat of A under its cap; c (2 together) cannot have the one of A left; d
    // takes B's; e takes the last of A.
    let (_, effects) = engine.decide(
        NOW,
        &[
            release_seat("A-1-1"),
            release_seat("A-1-2"),
            release_seat("B-1-4"),
        ],
    );
    assert_eq!(
        offered(&effects),
        [
            ("w-b".to_owned(), vec!["A-1-1".to_owned()]),
            ("w-d".to_owned(), vec!["B-1-4".to_owned()]),
            ("w-e".to_owned(), vec!["A-1-2".to_owned()]),
        ]
    );
    // The rest of A's row comes back: c (2 together, waiting behind a) gets it, a (3)
    // still cannot be satisfied and keeps its place.
    let (_, effects) = engine.decide(NOW, &[release_seat("A-1-3"), release_seat("A-1-4")]);
    assert_eq!(
        offered(&effects),
        [(
            "w-c".to_owned(),
            vec!["A-1-3".to_owned(), "A-1-4".to_owned()]
        )]
    );
    assert_eq!(engine.position_of(engine.waiting_by_account["a"]), 1);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_match_held_back_by_purchase_limits_stops_at_its_bound_and_asks_for_no_group() {
    // One ticket per account: every waiting account already holds its one, so every entry is
    // held back by its limit, one look each.
    let waiting = WAITLIST_LOOKS_PER_GROUP_MAX + 1;
    let mut engine = engine(waiting + 1);
    engine.rules.max_tickets_per_account = 1;
    let holds: Vec<Command> = (1..=waiting + 1)
        .map(|n| hold(&format!("a{n}"), "1", seats(&[&format!("A-1-{n}")])))
        .collect();
    let (decisions, _) = engine.decide(NOW, &holds);
    assert!(
        decisions
            .iter()
            .all(|d| matches!(d, Decision::Hold(HoldOutcome::Held(_))))
    );
    let joins: Vec<Command> = (1..=waiting)
        .map(|n| join(&format!("a{n}"), 1, false))
        .collect();
    let (_, effects) = engine.decide(NOW, &joins);
    assert!(effects.waitlist_offers().next().is_none());
    // The last account's seat comes back: nobody waiting may take it.
    let last = waiting + 1;
    let (_, effects) = engine.decide(
        NOW,
        &[Command::Release {
            account_id: format!("a{last}"),
            hold_id: format!("h-a{last}-1"),
        }],
    );
    assert!(effects.waitlist_offers().next().is_none());
    assert!(
        !engine.waitlist_wants_group(),
        "a match that made no offer asks for no group of its own"
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn seats_a_catch_up_finds_freed_elsewhere_are_offered_by_a_group_of_no_commands() {
    let mut engine = engine(2);
    let (_, _) = engine.decide(NOW, &[hold("a", "1", seats(&["A-1-1", "A-1-2"]))]);
    let (_, effects) = engine.decide(NOW, &[join("b", 2, true)]);
    assert!(effects.waitlist_offers().next().is_none());
    assert!(!engine.waitlist_wants_group());
    // Another node (or the sweeper) ended a's hold: the catch-up reads the rows.
    let freed = |seat_id: &str| SeatRow {
        seat_id: seat_id.into(),
        status: SeatStatus::Available,
        hold_id: None,
        hold_expires_at: None,
        price_minor: 1000,
    };
    let mut ended = engine.hold("h-a-1").cloned().expect("kept");
    ended.status = HoldStatus::Released;
    engine.refresh(EngineRows {
        seats: vec![freed("A-1-1"), freed("A-1-2")],
        tiers: Vec::new(),
        holds: vec![ended],
    });
    assert!(engine.waitlist_wants_group());
    let (_, effects) = engine.decide(NOW, &[]);
    assert_eq!(
        offered(&effects),
        [(
            "w-b".to_owned(),
            vec!["A-1-1".to_owned(), "A-1-2".to_owned()]
        )]
    );
    assert!(!engine.waitlist_wants_group());
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// An entry as the plain walk reads it: id, quantity, section rank, cap, together.
type Listed = (String, u32, Option<usize>, Option<i64>, bool);

/// What a walk of the whole list front to back offers, written plainly: every entry in
/// order takes the first seats that satisfy it whole (best available for a party together,
/// else the first free seats by section, row and number within its section and cap).
fn walk_whole_list(
    free: &mut BTreeSet<(usize, u32, u32)>,
    entries: &[Listed],
    rows: u32,
    per_row: u32,
) -> Vec<(String, Vec<String>)> {
    let sections = ["A", "B"];
    let prices = [1000, 2000];
    let mut offers = Vec::new();
    for (waitlist_id, quantity, section, cap, together) in entries {
        let allowed = |rank: usize| {
            section.is_none_or(|s| s == rank) && cap.is_none_or(|cap| prices[rank] <= cap)
        };
        let taken: Option<Vec<(usize, u32, u32)>> = if *together {
            let row_seats: Vec<crate::best::RowSeats> = (0..2)
                .flat_map(|rank| (1..=rows).map(move |row| (rank, row)))
                .map(|(rank, row)| crate::best::RowSeats {
                    section: sections[rank].into(),
                    row,
                    price_minor: prices[rank],
                    free: (1..=per_row)
                        .map(|n| free.contains(&(rank, row, n)))
                        .collect(),
                })
                .collect();
            let request = crate::best::BestRequest {
                quantity: *quantity,
                section: section.map(|s| sections[s].to_owned()),
                max_price_minor: *cap,
            };
            crate::best::choose(&row_seats, &request).map(|choice| {
                let rank = sections.iter().position(|s| *s == choice.section).unwrap();
                (choice.first_seat..choice.first_seat + choice.quantity)
                    .map(|n| (rank, choice.row, n))
                    .collect()
            })
        } else {
            let seats: Vec<(usize, u32, u32)> = free
                .iter()
                .filter(|(rank, _, _)| allowed(*rank))
                .take(*quantity as usize)
                .copied()
                .collect();
            (seats.len() == *quantity as usize).then_some(seats)
        };
        if let Some(seats) = taken {
            for seat in &seats {
                free.remove(seat);
            }
            let mut ids: Vec<String> = seats
                .iter()
                .map(|(rank, row, n)| format!("{}-{row}-{n}", sections[*rank]))
                .collect();
            ids.sort();
            offers.push((waitlist_id.clone(), ids));
        }
    }
    offers
}

mod matching_by_class {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The matcher by class offers exactly what a walk of the whole list front to back
        /// would: the same entries, the same seats, in the same order.
        #[test]
        fn offers_what_a_walk_of_the_whole_list_offers(
            entries in proptest::collection::vec(
                (1u32..=4, proptest::option::of(0usize..2),
                 proptest::option::of(prop_oneof![Just(0i64), Just(1000), Just(1500), Just(2000), Just(5000)]),
                 any::<bool>()),
                1..40,
            ),
            freed in proptest::collection::btree_set((0usize..2, 1u32..=3, 1u32..=6), 0..30),
        ) {
            let (rows, per_row) = (3, 6);
            let mut engine = sold_out_house(rows, per_row);
            let sections = ["A", "B"];
            let listed: Vec<Listed> = entries
                .iter()
                .enumerate()
                .map(|(n, (quantity, section, cap, together))| {
                    (format!("w-e{n}"), *quantity, *section, *cap, *together)
                })
                .collect();
            let joins: Vec<Command> = entries
                .iter()
                .enumerate()
                .map(|(n, (quantity, section, cap, together))| {
                    join_for(&format!("e{n}"), *quantity, section.map(|s| sections[s]), *cap, *together)
                })
                .collect();
            let (_, effects) = engine.decide(NOW, &joins);
            prop_assert!(effects.waitlist_offers().next().is_none());
            let releases: Vec<Command> = freed
                .iter()
                .map(|(rank, row, n)| release_seat(&format!("{}-{row}-{n}", sections[*rank])))
                .collect();
            let (_, effects) = engine.decide(NOW, &releases);
            let mut free = freed.clone();
            let expected = walk_whole_list(&mut free, &listed, rows, per_row);
            prop_assert_eq!(offered(&effects), expected);
            prop_assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
        }
    }
}

/// Issue 35, item 7: with the TTL following the sale, holds granted after enough fans paid
/// get the measured p99 plus the margin (here 20 s + 30 s = 50 s, under the 60 s floor: 60 s);
/// a granted deadline never moves; without waiting demand, or before enough payers, the
/// event's TTL.
#[test]
fn the_hold_ttl_follows_the_time_fans_take_to_pay() {
    use crate::hold_ttl::{FLOOR_S, SAMPLES_MIN};
    let payers = SAMPLES_MIN as u32;
    let mut engine = engine(payers as usize + 2);
    engine.set_hold_ttl_follows_sale(true);
    let accounts: Vec<String> = (0..payers).map(|i| format!("fan-{i}")).collect();
    let holds: Vec<Command> = accounts
        .iter()
        .map(|account| hold(account, "k", best(1)))
        .collect();
    let (decisions, _) = engine.decide(NOW, &holds);
    for decision in &decisions {
        let Decision::Hold(HoldOutcome::Held(held)) = decision else {
            panic!("{decision:?}");
        };
        assert_eq!(
            held.expires_at,
            NOW + Duration::seconds(300),
            "nothing measured yet"
        );
    }
    // One fan more holds before anyone paid: its deadline is kept whatever comes after.
    let (early, _) = engine.decide(NOW, &[hold("early", "k", best(1))]);
    let Decision::Hold(HoldOutcome::Held(early)) = &early[0] else {
        panic!("{early:?}");
    };
    assert_eq!(engine.hold_ttl_s(), 300);
    let paid_at = NOW + Duration::seconds(20);
    let checkouts: Vec<Command> = accounts
        .iter()
        .map(|account| {
            Command::Checkout(CheckoutRequest {
                account_id: account.clone(),
                hold_id: format!("h-{account}-k"),
                order_id: format!("o-{account}"),
                grace_s: 60,
            })
        })
        .collect();
    engine.decide(paid_at, &checkouts);
    assert_eq!(engine.hold_to_pay().p99_ms(), Some(20_000));
    assert_eq!(engine.hold_ttl_s(), FLOOR_S);
    let (late, _) = engine.decide(paid_at, &[hold("late", "k", best(1))]);
    let Decision::Hold(HoldOutcome::Held(late)) = &late[0] else {
        panic!("{late:?}");
    };
    assert_eq!(
        late.expires_at,
        paid_at + Duration::seconds(i64::from(FLOOR_S))
    );
    assert_eq!(
        engine.hold(&early.hold_id).unwrap().expires_at,
        NOW + Duration::seconds(300),
        "a granted deadline never moves"
    );
    // Nobody waits: the event's TTL again (the rules themselves never changed).
    engine.set_demand_waiting(false);
    assert_eq!(engine.hold_ttl_s(), 300);
    assert_eq!(engine.rules().hold_ttl_s, 300);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

/// `a` refunds A-1-1 (sold by `h-old`, ticket `t-1`).
fn refund(id: &str) -> Command {
    Command::Refund(RefundRequest {
        refund_id: format!("rf-{id}"),
        account_id: "a".into(),
        hold_id: "h-old".into(),
        seat_ids: vec!["A-1-1".into()],
        tier: None,
        ticket_ids: vec!["t-1".into()],
    })
}

#[test]
fn a_refund_frees_the_seat_for_a_later_hold_of_the_same_group() {
    let mut engine = engine_with_a_sale(3);
    assert_eq!(engine.usage("a", NOW), 1);
    let (decisions, effects) =
        engine.decide(NOW, &[refund("1"), hold("b", "k", seats(&["A-1-1"]))]);
    assert_eq!(decisions[0], Decision::Refund(RefundDecision::Refunded));
    assert!(
        matches!(decisions[1], Decision::Hold(HoldOutcome::Held(_))),
        "the freed seat is on sale at once: {decisions:?}"
    );
    assert_eq!(
        engine.usage("a", NOW),
        0,
        "a refunded ticket counts no more"
    );
    assert!(effects.frees_inventory());
    let refunds: Vec<_> = effects.refunds().collect();
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0].given.hold_id, "h-old");
    assert_eq!(refunds[0].given.seat_ids, ["A-1-1"]);
    // The map shows the seat freed, then held by `b`.
    let map: Vec<_> = effects
        .map_seats()
        .iter()
        .map(|c| (c.seat_id.to_owned(), c.status))
        .collect();
    assert_eq!(
        map,
        [
            ("A-1-1".to_owned(), SeatStatus::Available),
            ("A-1-1".to_owned(), SeatStatus::Held)
        ]
    );
    // Refunded once: a second refund of the seat finds it no longer sold by the hold.
    let (decisions, _) = engine.decide(NOW, &[refund("2")]);
    assert_eq!(
        decisions,
        [Decision::Refund(RefundDecision::NotSold("A-1-1".into()))]
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn a_refund_of_an_exchanged_ticket_or_an_unkept_hold_is_refused() {
    let mut engine = engine_with_a_sale(6);
    let (decisions, _) = engine.decide(NOW, &[exchange("1", "A-1-6", 1500), refund("1")]);
    assert!(matches!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::Granted { .. })
    ));
    assert_eq!(
        decisions[1],
        Decision::Refund(RefundDecision::TicketTaken("t-1".into()))
    );
    let unkept = Command::Refund(RefundRequest {
        hold_id: "h-nobody".into(),
        ticket_ids: vec!["t-other".into()],
        ..match refund("2") {
            Command::Refund(request) => request,
            _ => unreachable!(),
        }
    });
    let (decisions, _) = engine.decide(NOW, &[unkept]);
    assert_eq!(decisions, [Decision::Refund(RefundDecision::NotKept)]);
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

fn cancel() -> Command {
    Command::Cancel(CancelRequest {
        account_id: "admin".into(),
        idempotency_key: "c-1".into(),
        request_digest: "d".into(),
        reason: "storm".into(),
    })
}

#[test]
fn a_cancellation_ends_live_holds_and_nothing_sells_after_it() {
    let mut engine = engine(6);
    engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1"])),
            hold("b", "1", seats(&["A-1-2"])),
        ],
    );
    engine.decide(
        NOW,
        &[Command::Checkout(CheckoutRequest {
            account_id: "b".into(),
            hold_id: "h-b-1".into(),
            order_id: "o-b".into(),
            grace_s: 60,
        })],
    );
    // A hold granted earlier in the cancelling group is not in the store yet: it stays, and
    // nothing may check it out.
    let (decisions, effects) = engine.decide(NOW, &[hold("c", "1", seats(&["A-1-3"])), cancel()]);
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    assert_eq!(
        decisions[1],
        Decision::Cancel(CancelDecision::Cancelled { holds_ended: 1 })
    );
    let released: Vec<&str> = effects
        .holds_released()
        .map(|h| h.hold_id.as_str())
        .collect();
    assert_eq!(
        released,
        ["h-a-1"],
        "the live hold ends; the one in checkout waits"
    );
    assert!(effects.event_cancelled().is_some());
    assert!(engine.cancelled());

    let (decisions, effects) = engine.decide(
        NOW,
        &[
            hold("d", "1", seats(&["A-1-4"])),
            Command::Checkout(CheckoutRequest {
                account_id: "c".into(),
                hold_id: "h-c-1".into(),
                order_id: "o-c".into(),
                grace_s: 60,
            }),
            // The payment out at the cancellation answers: the checkout is cancelled (the
            // authorization is voided), nothing is sold.
            Command::Payment(PaymentRequest {
                account_id: "b".into(),
                hold_id: "h-b-1".into(),
                outcome: PaymentOutcome::Paid,
            }),
            join("e", 1, false),
            cancel(),
        ],
    );
    assert_eq!(decisions[0], Decision::Hold(HoldOutcome::EventCancelled));
    assert_eq!(decisions[1], Decision::Checkout(CheckoutDecision::Expired));
    assert_eq!(
        decisions[2],
        Decision::Payment(PaymentDecision::Cancelled {
            reason: crate::settlement::reason::EVENT_CANCELLED
        })
    );
    assert_eq!(
        decisions[3],
        Decision::Waitlist(WaitlistDecision::EventCancelled)
    );
    assert_eq!(
        decisions[4],
        Decision::Cancel(CancelDecision::AlreadyCancelled)
    );
    assert!(effects.holds_confirmed().next().is_none());
    assert!(effects.new_holds().next().is_none());
    assert!(effects.event_cancelled().is_none(), "cancelled once");
    assert_eq!(engine.invariants(), Vec::<String>::new());
}

#[test]
fn an_engine_loaded_after_the_cancellation_sells_nothing() {
    let snapshot = EngineSnapshot {
        seats: vec![SeatRow {
            seat_id: "A-1-1".into(),
            status: SeatStatus::Available,
            hold_id: None,
            hold_expires_at: None,
            price_minor: 1000,
        }],
        cancelled: true,
        ..EngineSnapshot::default()
    };
    let mut engine = EventEngine::load(rules(), snapshot, NOW);
    let (decisions, effects) = engine.decide(
        NOW,
        &[
            hold("a", "1", seats(&["A-1-1"])),
            exchange("x", "A-1-1", 1000),
        ],
    );
    assert_eq!(decisions[0], Decision::Hold(HoldOutcome::EventCancelled));
    assert!(matches!(
        decisions[1],
        Decision::Exchange(ExchangeDecision::EventCancelled | ExchangeDecision::NotKept)
    ));
    assert!(effects.is_empty());
}

/// The keys of holds are remembered for the event's hold TTL + `HOLD_KEYS_KEPT_PAST_TTL_S`,
/// then forgotten: an event selling for days keeps only its recent keys. A retry inside the
/// window is a replay; the keys loaded with the engine age the same way.
#[test]
fn hold_keys_are_forgotten_after_the_hold_ttl_and_a_margin() {
    let kept = Duration::seconds(i64::from(rules().hold_ttl_s + HOLD_KEYS_KEPT_PAST_TTL_S));
    let snapshot = EngineSnapshot {
        seats: (1..=40)
            .map(|n| SeatRow {
                seat_id: format!("A-1-{n}"),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor: 1000,
            })
            .collect(),
        keys: vec![(("old".into(), "k".into()), "digest".into())],
        ..EngineSnapshot::default()
    };
    let mut engine = EventEngine::load(rules(), snapshot, NOW);
    assert_eq!(engine.keys_remembered(), 1);
    // One hold a minute for ten minutes, each with its own key.
    for minute in 0..10 {
        let at = NOW + Duration::minutes(minute);
        let seat = format!("A-1-{}", minute + 1);
        let (decisions, _) =
            engine.decide(at, &[hold(&format!("fan{minute}"), "k", seats(&[&seat]))]);
        assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    }
    // The TTL is 300 s and the margin 300 s: at minute 9 the key loaded at minute 0 and
    // those of minutes 0-9 are all within ten minutes.
    assert_eq!(engine.keys_remembered(), 11);
    // A retry within the window is a replay.
    let (decisions, _) = engine.decide(
        NOW + Duration::minutes(9),
        &[hold("fan5", "k", seats(&["A-1-6"]))],
    );
    assert_eq!(decisions[0], Decision::Hold(HoldOutcome::Replayed));
    // Ten minutes and a second after minute 4: the loaded key and those of minutes 0-4 are
    // gone, those of minutes 5-9 are kept.
    let later = NOW + Duration::minutes(4) + kept + Duration::seconds(1);
    engine.decide(later, &[]);
    assert_eq!(engine.keys_remembered(), 5);
    let (decisions, _) = engine.decide(later, &[hold("fan9", "k", seats(&["A-1-10"]))]);
    assert_eq!(decisions[0], Decision::Hold(HoldOutcome::Replayed));
    // Long after, with a hold a minute going on, the engine never keeps more than the
    // window's worth of keys.
    for minute in 0..120 {
        let at = later + Duration::hours(1) + Duration::minutes(minute);
        let seat = format!("A-1-{}", 11 + minute % 30);
        engine.decide(at, &[hold(&format!("late{minute}"), "k", seats(&[&seat]))]);
        assert!(
            engine.keys_remembered() <= 11,
            "{}",
            engine.keys_remembered()
        );
    }
}

/// A writer unloads an idle engine only when nothing waits on it: a `HELD` hold keeps it
/// (its deadline ends the hold there), a released one no longer does.
#[test]
fn a_held_hold_keeps_the_engine_and_a_released_one_does_not() {
    let mut engine = engine(4);
    assert!(!engine.has_timers_or_waiters());
    let (decisions, _) = engine.decide(NOW, &[hold("ann", "1", seats(&["A-1-1"]))]);
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    assert!(engine.has_timers_or_waiters());
    let (decisions, _) = engine.decide(
        NOW,
        &[Command::Release {
            account_id: "ann".into(),
            hold_id: "h-ann-1".into(),
        }],
    );
    assert_eq!(
        decisions[0],
        Decision::Release(ReleaseDecision::Released {
            hold_id: "h-ann-1".into()
        })
    );
    assert!(!engine.has_timers_or_waiters());
    // A hold that lapses is ended by the engine's own group; then nothing waits either.
    engine.decide(NOW, &[hold("bob", "1", seats(&["A-1-2"]))]);
    assert!(engine.has_timers_or_waiters());
    engine.decide(NOW + Duration::seconds(301), &[]);
    assert!(!engine.has_timers_or_waiters());
}

#[test]
fn an_exchange_keeps_the_companion_rule_and_the_kept_accessible_seats() {
    use crate::accessibility::{AccessKind, Accessibility};
    let release_at = NOW + Duration::hours(1);
    let rules = SaleRules {
        accessibility: Accessibility::from_kinds(
            [
                ("A-1-3".to_owned(), AccessKind::Wheelchair),
                ("A-1-4".to_owned(), AccessKind::Companion),
            ],
            Some(release_at),
        ),
        ..rules()
    };
    let mut engine = sale_under(engine_under(rules, 4));
    let pair = match exchange("2", "A-1-3", 1000) {
        Command::Exchange(mut request) => {
            request.takes =
                ExchangeTakes::Seats(vec![("A-1-3".to_owned(), 1000), ("A-1-4".to_owned(), 1000)]);
            Command::Exchange(request)
        }
        other => other,
    };
    let (decisions, effects) = engine.decide(NOW, &[exchange("1", "A-1-4", 1000), pair.clone()]);
    assert_eq!(
        decisions[0],
        Decision::Exchange(ExchangeDecision::CompanionSeatAlone("A-1-4".into()))
    );
    assert_eq!(
        decisions[1],
        Decision::Exchange(ExchangeDecision::SeatKeptAccessible {
            seat_ids: vec!["A-1-3".into(), "A-1-4".into()],
            release_at,
        })
    );
    assert!(effects.exchanges().next().is_none());
    // From the release time the pair may be taken.
    let (decisions, _) = engine.decide(release_at, &[pair]);
    assert!(
        matches!(
            decisions[0],
            Decision::Exchange(ExchangeDecision::Granted { .. })
        ),
        "{decisions:?}"
    );
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}

#[test]
fn the_engine_index_never_offers_accessible_seats_to_best_available() {
    use crate::accessibility::{AccessKind, Accessibility};
    let rules = SaleRules {
        accessibility: Accessibility::from_kinds(
            [("A-1-1".to_owned(), AccessKind::Wheelchair)],
            None,
        ),
        ..rules()
    };
    let mut engine = engine_under(rules, 3);
    let (decisions, _) = engine.decide(NOW, &[hold("a", "1", best(2))]);
    let Decision::Hold(HoldOutcome::Held(held)) = &decisions[0] else {
        panic!("{decisions:?}");
    };
    let ids: Vec<&str> = held.seats.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["A-1-2", "A-1-3"]);
    let (decisions, _) = engine.decide(NOW, &[hold("b", "1", best(1))]);
    assert!(
        matches!(
            decisions[0],
            Decision::Hold(HoldOutcome::SeatsUnavailable { .. })
        ),
        "{decisions:?}"
    );
    // Named, the space is the fan's; the index stays in step.
    let (decisions, _) = engine.decide(NOW, &[hold("b", "2", seats(&["A-1-1"]))]);
    assert!(matches!(decisions[0], Decision::Hold(HoldOutcome::Held(_))));
    assert!(engine.invariants().is_empty(), "{:?}", engine.invariants());
}
