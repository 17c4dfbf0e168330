//! Model test of the hold decision: random sequences of hold batches, releases, sweeps and
//! clock advances, applied both through `decide_holds` (as the stores apply it) and through a
//! naive reference model. After every step the outcomes must agree and
//! `Inventory::invariants()` must hold.

use std::collections::BTreeMap;

use boxoffice_domain::decide::{
    BatchState, HoldOutcome, HoldRequest, HoldShape, SeatRow, TierRow, decide_holds,
};
use boxoffice_domain::event::SaleRules;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::inventory::{HoldRecord, Inventory, SeatRecord};
use proptest::prelude::*;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

const SEATS: [&str; 6] = ["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-1-5", "A-1-6"];
const ACCOUNTS: [&str; 3] = ["a0", "a1", "a2"];
const TIER_CAPACITY: i64 = 5;
const TTL_S: u32 = 10;
const START: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

fn rules() -> SaleRules {
    SaleRules {
        section_order: vec!["A".into()],
        on_sale_at: START,
        hold_ttl_s: TTL_S,
        max_seats_per_hold: 3,
        max_tickets_per_account: 4,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    }
}

#[derive(Debug, Clone)]
enum Ask {
    Seats(Vec<usize>),
    Tier(u32),
}

#[derive(Debug, Clone)]
enum Step {
    Batch(Vec<(usize, u8, Ask)>),
    Advance(i64),
    Release(usize),
    Sweep,
}

fn ask() -> impl Strategy<Value = Ask> {
    prop_oneof![
        proptest::collection::vec(0..SEATS.len(), 0..5).prop_map(Ask::Seats),
        (0u32..5).prop_map(Ask::Tier),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => proptest::collection::vec((0..ACCOUNTS.len(), 0u8..4, ask()), 1..6).prop_map(Step::Batch),
        2 => (0i64..8).prop_map(Step::Advance),
        1 => (0usize..20).prop_map(Step::Release),
        1 => Just(Step::Sweep),
    ]
}

/// The system under test: an inventory changed only the way the stores change it.
struct Subject {
    inv: Inventory,
    records: BTreeMap<(String, String), String>,
    next_hold: u32,
}

impl Subject {
    fn new() -> Self {
        let seats = SEATS
            .iter()
            .map(|id| SeatRecord {
                seat_id: id.to_string(),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                order_id: None,
            })
            .collect();
        let tier = TierRow {
            tier_id: "GA".into(),
            capacity: TIER_CAPACITY,
            available: TIER_CAPACITY,
            held: 0,
            sold: 0,
            price_minor: 50,
        };
        Self {
            inv: Inventory {
                cancellation: None,
                order_prices: Vec::new(),
                event_id: "e".into(),
                now: START,
                max_tickets_per_account: 4,
                seats,
                tiers: vec![tier],
                holds: Vec::new(),
                orders: Vec::new(),
                tickets: Vec::new(),
                exchanges: Vec::new(),
                waitlist: Vec::new(),
                refunds: Vec::new(),
                phases: Vec::new(),
                accessibility: Default::default(),
            },
            records: BTreeMap::new(),
            next_hold: 0,
        }
    }

    /// Expires one hold the way the sweeper does: conditioned on status and deadline, and
    /// seats freed only where they still point to this hold.
    fn expire(&mut self, index: usize) {
        let now = self.inv.now;
        let hold = &mut self.inv.holds[index];
        if hold.status != HoldStatus::Held || hold.expires_at > now {
            return;
        }
        hold.status = HoldStatus::Expired;
        let hold = hold.clone();
        self.free(&hold);
    }

    fn free(&mut self, hold: &HoldRecord) {
        for seat in &mut self.inv.seats {
            if seat.status == SeatStatus::Held
                && seat.hold_id.as_deref() == Some(hold.hold_id.as_str())
            {
                seat.status = SeatStatus::Available;
                seat.hold_id = None;
                seat.hold_expires_at = None;
            }
        }
        if let Some(tier_id) = &hold.tier_id {
            let tier = self
                .inv
                .tiers
                .iter_mut()
                .find(|t| &t.tier_id == tier_id)
                .unwrap();
            tier.held -= i64::from(hold.quantity);
            tier.available += i64::from(hold.quantity);
        }
    }

    fn batch(&mut self, requests: &[HoldRequest]) -> Vec<HoldOutcome> {
        // The stores reclaim expired tier holds inside the batch transaction.
        for i in 0..self.inv.holds.len() {
            if self.inv.holds[i].tier_id.is_some() {
                self.expire(i);
            }
        }
        let now = self.inv.now;
        let mut usage = BTreeMap::new();
        for hold in &self.inv.holds {
            if hold.status.is_live(hold.expires_at, now) || hold.status == HoldStatus::Confirmed {
                *usage.entry(hold.account_id.clone()).or_insert(0) += hold.quantity;
            }
        }
        let mut state = BatchState {
            now,
            seats: self
                .inv
                .seats
                .iter()
                .map(|s| {
                    let row = SeatRow {
                        seat_id: s.seat_id.clone(),
                        status: s.status,
                        hold_id: s.hold_id.clone(),
                        hold_expires_at: s.hold_expires_at,
                        price_minor: 100,
                    };
                    (s.seat_id.clone(), row)
                })
                .collect(),
            tiers: self
                .inv
                .tiers
                .iter()
                .map(|t| (t.tier_id.clone(), t.clone()))
                .collect(),
            usage_by_account: usage,
            prior_digests: self.records.clone(),
        };
        let outcomes = decide_holds(&rules(), &mut state, requests);
        for (request, outcome) in requests.iter().zip(&outcomes) {
            if outcome.is_recorded() {
                self.records.insert(
                    (request.account_id.clone(), request.idempotency_key.clone()),
                    request.request_digest.clone(),
                );
            }
            if let HoldOutcome::Held(new_hold) = outcome {
                self.inv.holds.push(HoldRecord {
                    hold_id: new_hold.hold_id.clone(),
                    event_id: "e".into(),
                    account_id: new_hold.account_id.clone(),
                    status: HoldStatus::Held,
                    expires_at: new_hold.expires_at,
                    seat_ids: new_hold.seats.iter().map(|(id, _)| id.clone()).collect(),
                    tier_id: new_hold.tier_id.clone(),
                    quantity: new_hold.quantity,
                    idempotency_key: request.idempotency_key.clone(),
                    exchanged_out: 0,
                    phase_id: None,
                });
            }
        }
        for seat in &mut self.inv.seats {
            let row = &state.seats[&seat.seat_id];
            seat.status = row.status;
            seat.hold_id = row.hold_id.clone();
            seat.hold_expires_at = row.hold_expires_at;
        }
        self.inv.tiers = state.tiers.into_values().collect();
        outcomes
    }
}

/// The reference: recomputes everything from the list of holds, one request at a time.
#[derive(Default)]
struct Reference {
    /// (account, key) -> digest.
    records: BTreeMap<(String, String), String>,
    /// (hold id, account, seats, tier quantity, expires_at, released)
    holds: Vec<(String, String, Vec<String>, u32, OffsetDateTime, bool)>,
}

impl Reference {
    fn live(
        &self,
        now: OffsetDateTime,
    ) -> impl Iterator<Item = &(String, String, Vec<String>, u32, OffsetDateTime, bool)> {
        self.holds.iter().filter(move |h| !h.5 && h.4 > now)
    }

    fn expect(
        &mut self,
        now: OffsetDateTime,
        request: &HoldRequest,
        batch_seen: &mut BTreeMap<(String, String), String>,
    ) -> &'static str {
        let scope = (request.account_id.clone(), request.idempotency_key.clone());
        if let Some(digest) = batch_seen.get(&scope) {
            return if *digest == request.request_digest {
                "replay-in-batch"
            } else {
                "key-reused"
            };
        }
        if let Some(digest) = self.records.get(&scope) {
            return if *digest == request.request_digest {
                "replayed"
            } else {
                "key-reused"
            };
        }
        let verdict = self.decide(now, request);
        if verdict != "invalid" {
            self.records
                .insert(scope.clone(), request.request_digest.clone());
            batch_seen.insert(scope, request.request_digest.clone());
        }
        verdict
    }

    fn decide(&mut self, now: OffsetDateTime, request: &HoldRequest) -> &'static str {
        let (seat_ids, quantity) = match &request.shape {
            HoldShape::Seats { seat_ids } => (seat_ids.clone(), seat_ids.len() as u32),
            HoldShape::Tier { quantity, .. } => (Vec::new(), *quantity),
            HoldShape::BestAvailable { .. } => {
                unreachable!("best available is covered by domain::best and the HTTP stories")
            }
            HoldShape::Allocation(_) => {
                unreachable!("allocations are covered by engine::allocation and the HTTP stories")
            }
        };
        let mut distinct = seat_ids.clone();
        distinct.sort();
        distinct.dedup();
        if quantity == 0 || quantity > 3 || distinct.len() != seat_ids.len() {
            return "invalid";
        }
        let used: u32 = self
            .live(now)
            .filter(|h| h.1 == request.account_id)
            .map(|h| h.3)
            .sum();
        if used + quantity > 4 {
            return "limit";
        }
        if matches!(request.shape, HoldShape::Tier { .. }) {
            let taken: u32 = self.live(now).filter(|h| h.2.is_empty()).map(|h| h.3).sum();
            if i64::from(taken + quantity) > TIER_CAPACITY {
                return "sold-out";
            }
        } else if self
            .live(now)
            .any(|h| h.2.iter().any(|s| seat_ids.contains(s)))
        {
            return "unavailable";
        }
        let expires = now + Duration::seconds(TTL_S.into());
        self.holds.push((
            request.new_hold_id.clone(),
            request.account_id.clone(),
            seat_ids,
            quantity,
            expires,
            false,
        ));
        "held"
    }
}

fn kind(outcome: &HoldOutcome) -> &'static str {
    match outcome {
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
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_500))]

    #[test]
    fn decisions_match_the_reference_and_keep_invariants(steps in proptest::collection::vec(step(), 1..40)) {
        let mut subject = Subject::new();
        let mut reference = Reference::default();
        for step in steps {
            match step {
                Step::Batch(asks) => {
                    let requests: Vec<HoldRequest> = asks
                        .iter()
                        .map(|(account, key, ask)| {
                            subject.next_hold += 1;
                            let shape = match ask {
                                Ask::Seats(ix) => HoldShape::Seats { seat_ids: ix.iter().map(|i| SEATS[*i].to_string()).collect() },
                                Ask::Tier(q) => HoldShape::Tier { tier_id: "GA".into(), quantity: *q },
                            };
                            HoldRequest {
                                account_id: ACCOUNTS[*account].into(),
                                idempotency_key: format!("k{key}"),
                                request_digest: format!("{shape:?}"),
                                new_hold_id: format!("h{}", subject.next_hold),
                                shape,
                                phase_id: None,
                                ticket_types: Default::default(),
                                accessible: false,
                            }
                        })
                        .collect();
                    let outcomes = subject.batch(&requests);
                    let mut seen = BTreeMap::new();
                    for (request, outcome) in requests.iter().zip(&outcomes) {
                        let expected = reference.expect(subject.inv.now, request, &mut seen);
                        prop_assert_eq!(kind(outcome), expected, "request {:?}", request);
                    }
                }
                Step::Advance(s) => subject.inv.now += Duration::seconds(s),
                Step::Release(i) => {
                    let now = subject.inv.now;
                    if let Some(hold) = subject.inv.holds.get(i).cloned()
                        && hold.status == HoldStatus::Held
                        && hold.expires_at > now
                    {
                        subject.inv.holds[i].status = HoldStatus::Released;
                        subject.free(&hold);
                        let r = reference.holds.iter_mut().find(|h| h.0 == hold.hold_id).unwrap();
                        r.5 = true;
                    }
                }
                Step::Sweep => {
                    for i in 0..subject.inv.holds.len() {
                        subject.expire(i);
                    }
                }
            }
            let violations = subject.inv.invariants();
            prop_assert!(violations.is_empty(), "{:?}", violations);
        }
    }
}

/// The checker must be able to fail: plant a double hold and see it reported.
#[test]
fn invariants_catch_a_planted_double_hold() {
    let mut subject = Subject::new();
    let req = |key: &str, account: &str| HoldRequest {
        account_id: account.into(),
        idempotency_key: key.into(),
        request_digest: key.into(),
        new_hold_id: format!("h-{key}"),
        shape: HoldShape::Seats {
            seat_ids: vec!["A-1-1".into()],
        },
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    };
    let out = subject.batch(&[req("k1", "a0")]);
    assert!(matches!(out[0], HoldOutcome::Held(_)));
    assert!(subject.inv.invariants().is_empty());
    let mut planted = subject.inv.holds[0].clone();
    planted.hold_id = "intruder".into();
    planted.account_id = "a1".into();
    subject.inv.holds.push(planted);
    let violations = subject.inv.invariants();
    assert!(
        violations
            .iter()
            .any(|v| v.invariant == "I5" && v.detail.contains("intruder")),
        "{violations:?}"
    );
}
