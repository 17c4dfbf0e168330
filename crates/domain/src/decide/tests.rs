//! Table tests of the batch decision: one small scenario per case.

use std::collections::BTreeMap;

use time::macros::datetime;
use time::{Duration, OffsetDateTime};

use super::*;

const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

fn rules() -> SaleRules {
    SaleRules {
        section_order: vec!["A".into()],
        on_sale_at: NOW - Duration::hours(1),
        hold_ttl_s: 300,
        max_seats_per_hold: 3,
        max_tickets_per_account: 4,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    }
}

fn state(seat_ids: &[&str]) -> BatchState {
    let seats = seat_ids
        .iter()
        .map(|id| {
            let row = SeatRow {
                seat_id: (*id).into(),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor: 1000,
            };
            ((*id).to_string(), row)
        })
        .collect();
    let tier = TierRow {
        tier_id: "GA".into(),
        capacity: 5,
        available: 5,
        held: 0,
        sold: 0,
        price_minor: 500,
    };
    BatchState {
        now: NOW,
        seats,
        tiers: BTreeMap::from([("GA".to_string(), tier)]),
        usage_by_account: BTreeMap::new(),
        prior_digests: BTreeMap::new(),
    }
}

fn seats_req(account: &str, key: &str, seat_ids: &[&str]) -> HoldRequest {
    HoldRequest {
        account_id: account.into(),
        idempotency_key: key.into(),
        request_digest: format!("seats:{seat_ids:?}"),
        new_hold_id: format!("h-{account}-{key}"),
        shape: HoldShape::Seats {
            seat_ids: seat_ids.iter().map(|s| s.to_string()).collect(),
        },
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    }
}

fn tier_req(account: &str, key: &str, quantity: u32) -> HoldRequest {
    HoldRequest {
        account_id: account.into(),
        idempotency_key: key.into(),
        request_digest: format!("tier:{quantity}"),
        new_hold_id: format!("h-{account}-{key}"),
        shape: HoldShape::Tier {
            tier_id: "GA".into(),
            quantity,
        },
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    }
}

fn kinds(outcomes: &[HoldOutcome]) -> Vec<&'static str> {
    outcomes
        .iter()
        .map(|o| match o {
            HoldOutcome::Held(_) => "held",
            HoldOutcome::Replayed => "replayed",
            HoldOutcome::ReplayOfEarlierInBatch { .. } => "replay-in-batch",
            HoldOutcome::KeyReusedWithOtherRequest => "key-reused",
            HoldOutcome::SeatsUnavailable { .. } => "unavailable",
            HoldOutcome::SoldOut { .. } => "sold-out",
            HoldOutcome::PurchaseLimit { .. } => "limit",
            HoldOutcome::SaleNotOpen { .. } => "not-open",
            HoldOutcome::EventCancelled => "cancelled",
            HoldOutcome::PhaseEnded { .. } => "phase-ended",
            HoldOutcome::OutsidePhase { .. } => "outside-phase",
            HoldOutcome::AccessCodeRequired { .. } => "code-required",
            HoldOutcome::CompanionSeatAlone { .. } => "companion-alone",
            HoldOutcome::SeatKeptAccessible { .. } => "kept-accessible",
            HoldOutcome::Invalid { .. } => "invalid",
        })
        .collect()
}

#[test]
fn first_request_wins_a_contested_seat() {
    let mut st = state(&["A-1-1", "A-1-2"]);
    let out = decide_holds(
        &rules(),
        &mut st,
        &[
            seats_req("a", "k1", &["A-1-1"]),
            seats_req("b", "k1", &["A-1-1", "A-1-2"]),
        ],
    );
    assert_eq!(kinds(&out), ["held", "unavailable"]);
    assert_eq!(
        out[1],
        HoldOutcome::SeatsUnavailable {
            unavailable_seat_ids: vec!["A-1-1".into()],
            largest_block: None,
        }
    );
    assert_eq!(st.seats["A-1-1"].hold_id.as_deref(), Some("h-a-k1"));
    assert_eq!(
        st.seats["A-1-2"].status,
        SeatStatus::Available,
        "all or nothing"
    );
}

#[test]
fn granted_hold_carries_prices_total_and_deadline() {
    let mut st = state(&["A-1-1", "A-1-2"]);
    let out = decide_holds(
        &rules(),
        &mut st,
        &[seats_req("a", "k", &["A-1-2", "A-1-1"])],
    );
    let HoldOutcome::Held(hold) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(
        hold.seats,
        vec![("A-1-2".to_string(), 1000), ("A-1-1".to_string(), 1000)]
    );
    assert_eq!(hold.total_minor, 2000);
    assert_eq!(hold.expires_at, NOW + Duration::seconds(300));
    assert_eq!(st.usage_by_account["a"], 2);
}

#[test]
fn expired_hold_does_not_protect_its_seat() {
    let mut st = state(&["A-1-1"]);
    let seat = st.seats.get_mut("A-1-1").unwrap();
    seat.status = SeatStatus::Held;
    seat.hold_id = Some("old".into());
    seat.hold_expires_at = Some(NOW);
    let out = decide_holds(&rules(), &mut st, &[seats_req("b", "k", &["A-1-1"])]);
    assert_eq!(kinds(&out), ["held"]);
}

#[test]
fn live_hold_and_sold_seat_are_unavailable() {
    let mut st = state(&["A-1-1", "A-1-2", "A-1-3"]);
    let held = st.seats.get_mut("A-1-1").unwrap();
    held.status = SeatStatus::Held;
    held.hold_id = Some("old".into());
    held.hold_expires_at = Some(NOW + Duration::milliseconds(1));
    st.seats.get_mut("A-1-2").unwrap().status = SeatStatus::Sold;
    let out = decide_holds(
        &rules(),
        &mut st,
        &[seats_req("b", "k", &["A-1-1", "A-1-2", "A-1-3"])],
    );
    assert_eq!(
        out[0],
        HoldOutcome::SeatsUnavailable {
            unavailable_seat_ids: vec!["A-1-1".into(), "A-1-2".into()],
            largest_block: None,
        }
    );
    assert_eq!(st.seats["A-1-3"].status, SeatStatus::Available);
}

#[test]
fn tier_capacity_is_never_oversold() {
    let mut st = state(&[]);
    let out = decide_holds(
        &rules(),
        &mut st,
        &[
            tier_req("a", "k", 3),
            tier_req("b", "k", 3),
            tier_req("c", "k", 2),
        ],
    );
    assert_eq!(kinds(&out), ["held", "sold-out", "held"]);
    assert_eq!(
        out[1],
        HoldOutcome::SoldOut {
            tier_id: "GA".into(),
            available: 2
        }
    );
    let tier = &st.tiers["GA"];
    assert_eq!((tier.available, tier.held), (0, 5));
}

#[test]
fn purchase_limit_counts_earlier_holds_of_the_batch() {
    let mut st = state(&["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-1-5"]);
    st.usage_by_account.insert("a".into(), 1);
    let out = decide_holds(
        &rules(),
        &mut st,
        &[
            seats_req("a", "k1", &["A-1-1", "A-1-2"]),
            seats_req("a", "k2", &["A-1-3", "A-1-4"]),
        ],
    );
    assert_eq!(kinds(&out), ["held", "limit"]);
    assert_eq!(
        out[1],
        HoldOutcome::PurchaseLimit {
            limit: 4,
            current: 3,
            requested: 2
        }
    );
}

#[test]
fn idempotency_cases() {
    let mut st = state(&["A-1-1", "A-1-2"]);
    let same = seats_req("a", "old", &["A-1-1"]);
    st.prior_digests
        .insert(("a".into(), "old".into()), same.request_digest.clone());
    let other = seats_req("a", "old", &["A-1-2"]);
    let out = decide_holds(
        &rules(),
        &mut st,
        &[
            same,
            other,
            seats_req("a", "new", &["A-1-2"]),
            seats_req("a", "new", &["A-1-2"]),
            seats_req("a", "new", &["A-1-1"]),
            // Another account may use the same key string: keys are scoped per account.
            seats_req("b", "new", &["A-1-1"]),
        ],
    );
    assert_eq!(
        kinds(&out),
        [
            "replayed",
            "key-reused",
            "held",
            "replay-in-batch",
            "key-reused",
            "held"
        ]
    );
    assert_eq!(out[3], HoldOutcome::ReplayOfEarlierInBatch { index: 2 });
}

#[test]
fn sale_not_open_before_on_sale_at() {
    let mut st = state(&["A-1-1"]);
    let mut rules = rules();
    rules.on_sale_at = NOW + Duration::milliseconds(1);
    let out = decide_holds(&rules, &mut st, &[seats_req("a", "k", &["A-1-1"])]);
    assert_eq!(kinds(&out), ["not-open"]);
    rules.on_sale_at = NOW;
    let out = decide_holds(&rules, &mut st, &[seats_req("a", "k", &["A-1-1"])]);
    assert_eq!(
        kinds(&out),
        ["held"],
        "the sale opens at on_sale_at inclusive"
    );
}

#[test]
fn invalid_shapes() {
    let mut st = state(&["A-1-1", "A-1-2", "A-1-3", "A-1-4"]);
    let mut unknown_tier = tier_req("a", "k5", 1);
    unknown_tier.shape = HoldShape::Tier {
        tier_id: "VIP".into(),
        quantity: 1,
    };
    let out = decide_holds(
        &rules(),
        &mut st,
        &[
            seats_req("a", "k1", &[]),
            seats_req("a", "k2", &["A-1-1", "A-1-1"]),
            seats_req("a", "k3", &["A-1-1", "A-1-2", "A-1-3", "A-1-4"]),
            seats_req("a", "k4", &["Z-1-1"]),
            unknown_tier,
            tier_req("a", "k6", 0),
        ],
    );
    assert_eq!(kinds(&out), ["invalid"; 6]);
    assert!(st.seats.values().all(|s| s.status == SeatStatus::Available));
}

/// Row 2 of section A: a wheelchair space (A-2-1), a companion seat (A-2-2), a standard
/// seat (A-2-3); row 1 standard seats.
fn accessible_rules(release_at: Option<OffsetDateTime>) -> SaleRules {
    use crate::accessibility::{AccessKind, Accessibility};
    SaleRules {
        accessibility: Accessibility::from_kinds(
            [
                ("A-2-1".to_owned(), AccessKind::Wheelchair),
                ("A-2-2".to_owned(), AccessKind::Companion),
            ],
            release_at,
        ),
        ..rules()
    }
}

#[test]
fn a_companion_seat_alone_is_refused_and_held_with_its_space() {
    let rules = accessible_rules(None);
    let mut state = state(&["A-1-1", "A-1-2", "A-2-1", "A-2-2", "A-2-3"]);
    let requests = [
        seats_req("u1", "k1", &["A-2-2"]),
        seats_req("u1", "k2", &["A-2-2", "A-2-3"]),
        seats_req("u2", "k1", &["A-2-1", "A-2-2"]),
    ];
    let outcomes = decide_holds(&rules, &mut state, &requests);
    assert_eq!(
        kinds(&outcomes),
        ["companion-alone", "companion-alone", "held"]
    );
    assert_eq!(
        outcomes[0],
        HoldOutcome::CompanionSeatAlone {
            seat_id: "A-2-2".into()
        }
    );
    assert!(!outcomes[0].is_recorded(), "a retry may change the request");
    assert_eq!(state.seats["A-2-2"].status, SeatStatus::Held);
}

#[test]
fn kept_accessible_seats_go_to_accessible_holds_until_the_release_time() {
    let release_at = NOW + Duration::minutes(10);
    let rules = accessible_rules(Some(release_at));
    let mut state = state(&["A-1-1", "A-2-1", "A-2-2", "A-2-3"]);
    let mut asks = seats_req("u2", "k1", &["A-2-1", "A-2-2"]);
    asks.accessible = true;
    let requests = [
        seats_req("u1", "k1", &["A-2-1"]),
        seats_req("u1", "k2", &["A-2-1", "A-2-2", "A-2-3"]),
        seats_req("u1", "k3", &["A-2-3"]),
        asks,
    ];
    let outcomes = decide_holds(&rules, &mut state, &requests);
    assert_eq!(
        kinds(&outcomes),
        ["kept-accessible", "kept-accessible", "held", "held"]
    );
    assert_eq!(
        outcomes[1],
        HoldOutcome::SeatKeptAccessible {
            seat_ids: vec!["A-2-1".into(), "A-2-2".into()],
            release_at,
        }
    );
    // From the release time, anyone.
    let mut state = super::tests::state(&["A-2-1", "A-2-2"]);
    state.now = release_at;
    let outcomes = decide_holds(&rules, &mut state, &[seats_req("u1", "k1", &["A-2-1"])]);
    assert_eq!(kinds(&outcomes), ["held"]);
}

#[test]
fn best_available_never_seats_a_party_in_accessible_seats() {
    let rules = accessible_rules(None);
    let mut state = state(&["A-1-1", "A-2-1", "A-2-2", "A-2-3"]);
    let best = |key: &str, quantity| HoldRequest {
        shape: HoldShape::BestAvailable {
            quantity,
            section: None,
            max_price_minor: None,
            together: Together::Prefer,
        },
        ..seats_req("u1", key, &[])
    };
    let outcomes = decide_holds(&rules, &mut state, &[best("k1", 2)]);
    let HoldOutcome::Held(hold) = &outcomes[0] else {
        panic!("{outcomes:?}");
    };
    let mut seats: Vec<&str> = hold.seats.iter().map(|(id, _)| id.as_str()).collect();
    seats.sort_unstable();
    assert_eq!(seats, ["A-1-1", "A-2-3"]);
    let outcomes = decide_holds(&rules, &mut state, &[best("k2", 1)]);
    assert_eq!(kinds(&outcomes), ["unavailable"]);
}
