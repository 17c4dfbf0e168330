//! Model test of the event engine: random sequences of command groups (named seats, best
//! available, tier quantities, releases, checkout starts, payment verdicts, compensations
//! of confirmed orders, exchanges of sold seats for others with or without a difference to
//! pay, replays) decided
//! with the store's clock known within a spread, clock advances, and changes made
//! elsewhere that reach the engine by refresh (a checkout confirming a hold, the sweeper
//! expiring holds). Each step runs through `EventEngine` and through a naive reference that
//! recomputes everything from a list of holds, one command at a time. After every step the
//! decisions and every seat must agree and `EventEngine::invariants()` must hold.
//!
//! Best-available requests come in every `together` mode; each one the reference grants is
//! checked against the split-party rules (exactly the seats asked, all free, split only when
//! no block fits, never when `required`), each refusal's `largestBlock` and the engine's
//! blocks per section against a seat-by-seat count.

use std::collections::BTreeMap;

use boxoffice_domain::best::{BestRequest, RowSeats, Together, choose, seat};
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape, SeatRow, TierRow};
use boxoffice_domain::engine::{
    CheckoutDecision, CheckoutRequest, Command, CompensationDecision, CompensationRequest,
    Decision, EngineHold, EngineRows, EngineSnapshot, EventEngine, ExchangeDecision,
    ExchangeGivesUp, ExchangeRequest, ExchangeTakes, PaymentDecision, PaymentOutcome,
    PaymentRequest, ReleaseDecision, TransferDecision,
};
use boxoffice_domain::event::SaleRules;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use proptest::prelude::*;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

const SECTIONS: [(&str, u32, u32, i64); 2] = [("A", 2, 4, 300), ("B", 2, 3, 100)];
const ACCOUNTS: [&str; 3] = ["a0", "a1", "a2"];
const TIER_CAPACITY: i64 = 5;
const TTL_S: u32 = 10;
const MAX_PER_HOLD: u32 = 3;
const LIMIT: u32 = 4;
const GRACE_S: u32 = 5;
const START: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

fn rules() -> SaleRules {
    SaleRules {
        section_order: SECTIONS.iter().map(|s| s.0.to_string()).collect(),
        on_sale_at: START,
        hold_ttl_s: TTL_S,
        max_seats_per_hold: MAX_PER_HOLD,
        max_tickets_per_account: LIMIT,
        currency: "EUR".into(),
        prices: Default::default(),
        accessibility: Default::default(),
    }
}

fn all_seats() -> Vec<(String, i64)> {
    let mut seats = Vec::new();
    for (name, rows, per_row, price) in SECTIONS {
        for row in 1..=rows {
            for number in 1..=per_row {
                seats.push((format!("{name}-{row}-{number}"), price));
            }
        }
    }
    seats
}

#[derive(Debug, Clone)]
enum Ask {
    Seats(Vec<usize>),
    Tier(u32),
    Best(u32, Option<usize>, Option<i64>, Together),
}

#[derive(Debug, Clone)]
enum Cmd {
    Hold {
        account: usize,
        key: u8,
        ask: Ask,
    },
    Release {
        account: usize,
        hold: usize,
    },
    Checkout {
        account: usize,
        hold: usize,
    },
    Pay {
        account: usize,
        hold: usize,
        outcome: u8,
    },
    /// A capture refused for good gives a sale back (see `Reference::target`).
    Compensate {
        hold: usize,
    },
    /// The first seats of a confirmed seat hold (see `Reference::target`) exchanged for
    /// `to`, with a difference to pay or not.
    Exchange {
        hold: usize,
        to: Vec<usize>,
        pays: bool,
    },
}

#[derive(Debug, Clone)]
enum Step {
    /// A group decided while the store's clock is known within `[now, now + spread s]`.
    Group(Vec<Cmd>, i64),
    Advance(i64),
    /// A checkout elsewhere confirms the n-th live seat hold.
    Confirm(usize),
    /// The sweeper expires every due seat hold.
    Sweep,
}

fn ask() -> impl Strategy<Value = Ask> {
    let n_seats = all_seats().len();
    prop_oneof![
        proptest::collection::vec(0..n_seats, 0..5).prop_map(Ask::Seats),
        (0u32..5).prop_map(Ask::Tier),
        (
            0u32..5,
            proptest::option::of(0..SECTIONS.len()),
            proptest::option::of(prop_oneof![Just(100i64), Just(300i64)]),
            proptest::sample::select(Together::ALL.to_vec()),
        )
            .prop_map(|(q, s, p, t)| Ask::Best(q, s, p, t)),
    ]
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        5 => (0..ACCOUNTS.len(), 0u8..5, ask()).prop_map(|(account, key, ask)| Cmd::Hold { account, key, ask }),
        1 => (0..ACCOUNTS.len(), 0usize..30).prop_map(|(account, hold)| Cmd::Release { account, hold }),
        2 => (0..ACCOUNTS.len(), 0usize..30).prop_map(|(account, hold)| Cmd::Checkout { account, hold }),
        2 => (0..ACCOUNTS.len(), 0usize..30, 0u8..4).prop_map(|(account, hold, outcome)| Cmd::Pay { account, hold, outcome }),
        2 => (0usize..30).prop_map(|hold| Cmd::Compensate { hold }),
        2 => (0usize..30, proptest::collection::vec(0..all_seats().len(), 1..3), any::<bool>())
            .prop_map(|(hold, to, pays)| Cmd::Exchange { hold, to, pays }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (proptest::collection::vec(cmd(), 1..7), 0i64..3).prop_map(|(cmds, spread)| Step::Group(cmds, spread)),
        2 => (0i64..8).prop_map(Step::Advance),
        1 => (0usize..10).prop_map(Step::Confirm),
        1 => Just(Step::Sweep),
    ]
}

/// A decision with what differs between equivalent answers taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Held {
        seats: Vec<String>,
        units: u32,
        /// A best-available party seated apart.
        split: bool,
    },
    Replay,
    KeyReused,
    Unavailable,
    /// Best available refused, with the largest block left in the asked sections.
    UnavailableBest(u32),
    SoldOut,
    Limit,
    Invalid,
    Released,
    InCheckout,
    Ended,
    NotFound,
    CheckoutStarted,
    /// A checkout of a hold that expired, was released, or never was.
    CheckoutGone,
    Sold,
    Cancelled(&'static str),
    /// A verdict for a hold not in checkout: the store decides.
    PayElsewhere,
    Compensated,
    /// A compensation of a hold that is not confirmed.
    NotConfirmed,
    /// A compensation or exchange of a hold the engine does not keep (ended, or never was).
    NotKept,
    Exchanged,
    NotSold,
    TicketTaken,
    Closed,
    /// A transfer accepted (the model generates none yet: its stories are the server's).
    Transferred,
    /// A waiting-list join or leave (the model generates none yet: see the engine's unit
    /// tests and the server's stories).
    Waitlist,
    /// A refund decided (the model generates none yet: see the engine's unit tests and the
    /// server's stories).
    Refund,
    /// (The model never cancels its event.)
    Cancel,
}

fn verdict_of(decision: &Decision) -> Verdict {
    match decision {
        Decision::Hold(HoldOutcome::Held(hold)) => Verdict::Held {
            seats: hold.seats.iter().map(|(id, _)| id.clone()).collect(),
            units: if hold.tier_id.is_some() {
                hold.quantity
            } else {
                0
            },
            split: hold.split,
        },
        Decision::Hold(HoldOutcome::Replayed | HoldOutcome::ReplayOfEarlierInBatch { .. }) => {
            Verdict::Replay
        }
        Decision::Hold(HoldOutcome::KeyReusedWithOtherRequest) => Verdict::KeyReused,
        Decision::Hold(HoldOutcome::SeatsUnavailable {
            largest_block: None,
            ..
        }) => Verdict::Unavailable,
        Decision::Hold(HoldOutcome::SeatsUnavailable {
            largest_block: Some(largest),
            ..
        }) => Verdict::UnavailableBest(*largest),
        Decision::Hold(HoldOutcome::SoldOut { .. }) => Verdict::SoldOut,
        Decision::Hold(HoldOutcome::PurchaseLimit { .. }) => Verdict::Limit,
        Decision::Hold(
            HoldOutcome::SaleNotOpen { .. }
            | HoldOutcome::Invalid { .. }
            | HoldOutcome::PhaseEnded { .. }
            | HoldOutcome::OutsidePhase { .. }
            | HoldOutcome::AccessCodeRequired { .. }
            | HoldOutcome::CompanionSeatAlone { .. }
            | HoldOutcome::SeatKeptAccessible { .. }
            | HoldOutcome::EventCancelled,
        ) => Verdict::Invalid,
        // (The model has no phases: it never redeems a code.)
        Decision::Access(_) => Verdict::Invalid,
        Decision::Release(ReleaseDecision::Released { .. }) => Verdict::Released,
        Decision::Release(ReleaseDecision::InCheckout) => Verdict::InCheckout,
        Decision::Release(ReleaseDecision::AlreadyEnded) => Verdict::Ended,
        // The engine forgets ended holds it did not make; the writer then asks the store.
        Decision::Release(ReleaseDecision::NotFound | ReleaseDecision::NotKept) => {
            Verdict::NotFound
        }
        Decision::Checkout(CheckoutDecision::Started { .. }) => Verdict::CheckoutStarted,
        Decision::Checkout(CheckoutDecision::InCheckout) => Verdict::InCheckout,
        Decision::Checkout(CheckoutDecision::NotFound) => Verdict::NotFound,
        // The engine forgets ended holds; the writer then asks the store, which says expired.
        Decision::Checkout(CheckoutDecision::Expired | CheckoutDecision::NotKept) => {
            Verdict::CheckoutGone
        }
        Decision::Payment(PaymentDecision::Confirmed) => Verdict::Sold,
        Decision::Payment(PaymentDecision::Cancelled { reason }) => Verdict::Cancelled(reason),
        Decision::Payment(PaymentDecision::NotKept) => Verdict::PayElsewhere,
        Decision::Compensate(CompensationDecision::Compensated) => Verdict::Compensated,
        Decision::Compensate(CompensationDecision::NotConfirmed) => Verdict::NotConfirmed,
        Decision::Compensate(CompensationDecision::NotKept) => Verdict::NotKept,
        Decision::Exchange(ExchangeDecision::Granted { .. }) => Verdict::Exchanged,
        Decision::Exchange(ExchangeDecision::SeatsUnavailable(_)) => Verdict::Unavailable,
        Decision::Exchange(ExchangeDecision::PurchaseLimit) => Verdict::Limit,
        Decision::Exchange(ExchangeDecision::NotSold(_)) => Verdict::NotSold,
        // (The model has no chart: no accessible seats.)
        Decision::Exchange(
            ExchangeDecision::CompanionSeatAlone(_) | ExchangeDecision::SeatKeptAccessible { .. },
        ) => Verdict::Invalid,
        Decision::Exchange(ExchangeDecision::TicketTaken(_)) => Verdict::TicketTaken,
        Decision::Exchange(ExchangeDecision::NotKept) => Verdict::NotKept,
        Decision::Exchange(
            ExchangeDecision::Closed
            | ExchangeDecision::Started
            | ExchangeDecision::SaleNotOpen
            | ExchangeDecision::EventCancelled,
        ) => Verdict::Closed,
        Decision::Transfer(TransferDecision::Accepted) => Verdict::Transferred,
        Decision::Transfer(TransferDecision::PurchaseLimit) => Verdict::Limit,
        Decision::Transfer(TransferDecision::NotSold(_)) => Verdict::NotSold,
        Decision::Transfer(TransferDecision::TicketTaken(_)) => Verdict::TicketTaken,
        Decision::Transfer(TransferDecision::NotKept) => Verdict::NotKept,
        Decision::Transfer(TransferDecision::Closed) => Verdict::Closed,
        Decision::Waitlist(_) => Verdict::Waitlist,
        Decision::Refund(_) => Verdict::Refund,
        Decision::Cancel(_) => Verdict::Cancel,
    }
}

#[derive(Debug, Clone)]
struct RefHold {
    hold_id: String,
    account: String,
    status: HoldStatus,
    seats: Vec<String>,
    units: u32,
    expires_at: OffsetDateTime,
    /// The new hold of an exchange: its payment is the store's to settle.
    exchange: bool,
    /// An exchange's tickets given up (a seat's ticket is named after the seat).
    gave: Vec<String>,
}

/// The reference: seats, holds and keys, everything recomputed per command.
struct Reference {
    now: OffsetDateTime,
    /// The latest the store's clock may read while the group is decided: a checkout or a
    /// sale needs the hold's deadline ahead of it.
    latest: OffsetDateTime,
    /// seat id -> (status, hold id, deadline, price)
    seats: BTreeMap<String, (SeatStatus, Option<String>, Option<OffsetDateTime>, i64)>,
    holds: Vec<RefHold>,
    keys: BTreeMap<(String, String), String>,
}

impl Reference {
    fn new() -> Self {
        Self {
            now: START,
            latest: START,
            seats: all_seats()
                .into_iter()
                .map(|(id, price)| (id, (SeatStatus::Available, None, None, price)))
                .collect(),
            holds: Vec::new(),
            keys: BTreeMap::new(),
        }
    }

    fn free(&self, seat_id: &str) -> bool {
        let (status, _, until, _) = &self.seats[seat_id];
        match status {
            SeatStatus::Available => true,
            SeatStatus::Held => until.is_some_and(|t| t <= self.now),
            SeatStatus::Sold => false,
        }
    }

    fn counts(&self, hold: &RefHold) -> bool {
        match hold.status {
            HoldStatus::Confirmed => true,
            HoldStatus::Held | HoldStatus::PaymentPending => hold.expires_at > self.now,
            _ => false,
        }
    }

    /// Units as the store counts them: a hold's units come back when the hold is ended
    /// (at the start of the next group, for one past its deadline).
    fn tier_available(&self) -> i64 {
        let taken: u32 = self
            .holds
            .iter()
            .filter(|h| {
                matches!(
                    h.status,
                    HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
                )
            })
            .map(|h| h.units)
            .sum();
        TIER_CAPACITY - i64::from(taken)
    }

    /// The writer's timer: every `HELD` hold past its deadline ends when a group starts.
    fn expire_due(&mut self) {
        let now = self.now;
        for i in 0..self.holds.len() {
            let hold = &self.holds[i];
            if hold.status != HoldStatus::Held || hold.expires_at > now {
                continue;
            }
            self.holds[i].status = HoldStatus::Expired;
            let hold = self.holds[i].clone();
            for seat_id in &hold.seats {
                let entry = self.seats.get_mut(seat_id).unwrap();
                if entry.0 == SeatStatus::Held && entry.1.as_deref() == Some(hold.hold_id.as_str())
                {
                    *entry = (SeatStatus::Available, None, None, entry.3);
                }
            }
        }
    }

    fn rows(&self) -> Vec<RowSeats> {
        let mut rows = Vec::new();
        for (name, n_rows, per_row, price) in SECTIONS {
            for row in 1..=n_rows {
                rows.push(RowSeats {
                    section: name.into(),
                    row,
                    price_minor: price,
                    free: (1..=per_row)
                        .map(|n| self.free(&format!("{name}-{row}-{n}")))
                        .collect(),
                });
            }
        }
        rows
    }

    fn hold(
        &mut self,
        request: &HoldRequest,
        in_group: &mut BTreeMap<(String, String), String>,
    ) -> Verdict {
        let scope = (request.account_id.clone(), request.idempotency_key.clone());
        if let Some(digest) = in_group.get(&scope).or_else(|| self.keys.get(&scope)) {
            return if *digest == request.request_digest {
                Verdict::Replay
            } else {
                Verdict::KeyReused
            };
        }
        let verdict = self.decide_hold(request);
        if !matches!(verdict, Verdict::Invalid) {
            self.keys
                .insert(scope.clone(), request.request_digest.clone());
            in_group.insert(scope, request.request_digest.clone());
        }
        verdict
    }

    fn decide_hold(&mut self, request: &HoldRequest) -> Verdict {
        let quantity = request.shape.quantity();
        if quantity == 0 || quantity > MAX_PER_HOLD {
            return Verdict::Invalid;
        }
        if let HoldShape::Seats { seat_ids } = &request.shape {
            let mut distinct = seat_ids.clone();
            distinct.sort();
            distinct.dedup();
            if distinct.len() != seat_ids.len() {
                return Verdict::Invalid;
            }
        }
        let used: u32 = self
            .holds
            .iter()
            .filter(|h| h.account == request.account_id && self.counts(h))
            .map(|h| h.seats.len() as u32 + h.units)
            .sum();
        if used + quantity > LIMIT {
            return Verdict::Limit;
        }
        let mut split = false;
        let seats = match &request.shape {
            HoldShape::Seats { seat_ids } => {
                if !seat_ids.iter().all(|id| self.free(id)) {
                    return Verdict::Unavailable;
                }
                seat_ids.clone()
            }
            HoldShape::BestAvailable {
                quantity,
                section,
                max_price_minor,
                together,
            } => {
                let best = BestRequest {
                    quantity: *quantity,
                    section: section.clone(),
                    max_price_minor: *max_price_minor,
                };
                let rows = self.rows();
                let Some(seating) = seat(&rows, &best, *together) else {
                    return Verdict::UnavailableBest(brute_largest_block(&rows, &best));
                };
                // The split-party rules, checked here on every granted best-available hold.
                assert_eq!(
                    seating.seat_ids.len() as u32,
                    *quantity,
                    "as many seats as asked"
                );
                assert!(
                    seating.seat_ids.iter().all(|id| self.free(id)),
                    "every seat free: {seating:?}"
                );
                let block = choose(&rows, &best);
                assert_eq!(
                    seating.split,
                    block.is_none(),
                    "split only when no block fits: {seating:?}"
                );
                if *together == Together::Required {
                    assert!(!seating.split, "required never splits");
                }
                split = seating.split;
                seating.seat_ids
            }
            HoldShape::Tier { quantity, .. } => {
                if self.tier_available() < i64::from(*quantity) {
                    return Verdict::SoldOut;
                }
                Vec::new()
            }
            // Allocations' holds are the engine's own unit tests' (`engine/allocation.rs`).
            HoldShape::Allocation(_) => unreachable!("the model asks for no allocation hold"),
        };
        let expires_at = self.now + Duration::seconds(i64::from(TTL_S));
        for seat_id in &seats {
            let price = self.seats[seat_id].3;
            self.seats.insert(
                seat_id.clone(),
                (
                    SeatStatus::Held,
                    Some(request.new_hold_id.clone()),
                    Some(expires_at),
                    price,
                ),
            );
        }
        let units = if seats.is_empty() { quantity } else { 0 };
        self.holds.push(RefHold {
            hold_id: request.new_hold_id.clone(),
            account: request.account_id.clone(),
            status: HoldStatus::Held,
            seats: seats.clone(),
            units,
            expires_at,
            exchange: false,
            gave: Vec::new(),
        });
        Verdict::Held {
            seats,
            units,
            split,
        }
    }

    fn release(&mut self, account: &str, hold_id: &str) -> Verdict {
        let now = self.now;
        let Some(hold) = self.holds.iter_mut().find(|h| h.hold_id == hold_id) else {
            return Verdict::NotFound;
        };
        if hold.account != account {
            return Verdict::NotFound;
        }
        match hold.status {
            HoldStatus::PaymentPending => return Verdict::InCheckout,
            HoldStatus::Held if hold.expires_at > now => {}
            HoldStatus::Held | HoldStatus::Confirmed => return Verdict::Ended,
            _ => return Verdict::NotFound,
        }
        hold.status = HoldStatus::Released;
        let hold = hold.clone();
        for seat_id in &hold.seats {
            let entry = self.seats.get_mut(seat_id).unwrap();
            if entry.0 == SeatStatus::Held && entry.1.as_deref() == Some(hold_id) {
                *entry = (SeatStatus::Available, None, None, entry.3);
            }
        }
        Verdict::Released
    }

    fn checkout(&mut self, account: &str, hold_id: &str) -> Verdict {
        let now = self.latest;
        let Some(hold) = self.holds.iter_mut().find(|h| h.hold_id == hold_id) else {
            return Verdict::CheckoutGone;
        };
        let kept = matches!(
            hold.status,
            HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
        );
        if !kept {
            return Verdict::CheckoutGone;
        }
        if hold.account != account {
            return Verdict::NotFound;
        }
        match hold.status {
            HoldStatus::PaymentPending | HoldStatus::Confirmed => return Verdict::InCheckout,
            HoldStatus::Held if hold.expires_at > now => {}
            _ => return Verdict::CheckoutGone,
        }
        hold.status = HoldStatus::PaymentPending;
        hold.expires_at += Duration::seconds(i64::from(GRACE_S));
        let hold = hold.clone();
        for seat_id in &hold.seats {
            let entry = self.seats.get_mut(seat_id).unwrap();
            if entry.0 == SeatStatus::Held && entry.1.as_deref() == Some(hold_id) {
                entry.2 = Some(hold.expires_at);
            }
        }
        Verdict::CheckoutStarted
    }

    fn pay(&mut self, account: &str, hold_id: &str, outcome: PaymentOutcome) -> Verdict {
        let Some(index) = self.holds.iter().position(|h| h.hold_id == hold_id) else {
            return Verdict::PayElsewhere;
        };
        let hold = &self.holds[index];
        if hold.account != account || hold.status != HoldStatus::PaymentPending || hold.exchange {
            return Verdict::PayElsewhere;
        }
        let used: u32 = self
            .holds
            .iter()
            .filter(|h| h.account == account && self.counts(h))
            .map(|h| h.seats.len() as u32 + h.units)
            .sum();
        let reason = match outcome {
            PaymentOutcome::Failed => Some("PAYMENT_FAILED"),
            PaymentOutcome::Voided => Some("PAYMENT_VOIDED"),
            PaymentOutcome::Paid if hold.expires_at <= self.latest => Some("HOLD_EXPIRED"),
            PaymentOutcome::Paid if used > LIMIT => Some("PURCHASE_LIMIT"),
            PaymentOutcome::Paid => None,
        };
        let hold = self.holds[index].clone();
        self.holds[index].status = if reason.is_some() {
            HoldStatus::Released
        } else {
            HoldStatus::Confirmed
        };
        for seat_id in &hold.seats {
            let entry = self.seats.get_mut(seat_id).unwrap();
            if entry.0 == SeatStatus::Held && entry.1.as_deref() == Some(hold_id) {
                *entry = match reason {
                    Some(_) => (SeatStatus::Available, None, None, entry.3),
                    None => (SeatStatus::Sold, entry.1.clone(), None, entry.3),
                };
            }
        }
        match reason {
            Some(reason) => Verdict::Cancelled(reason),
            None => Verdict::Sold,
        }
    }

    /// Whom a command names: for odd `n`, the `n`-th hold in `status` (modulo their number)
    /// and its account, when there is one; else account `account` and hold `h{n}`, whatever
    /// it is (another's, ended, or none).
    fn target(&self, account: usize, n: usize, status: HoldStatus) -> (String, String) {
        let matching: Vec<&RefHold> = self.holds.iter().filter(|h| h.status == status).collect();
        match matching.len() {
            len if len > 0 && n % 2 == 1 => {
                let hold = matching[n % len];
                (hold.account.clone(), hold.hold_id.clone())
            }
            _ => (ACCOUNTS[account].into(), format!("h{n}")),
        }
    }

    /// A confirmed hold's sale given back: the hold ends, its sold seats and units are free.
    fn compensate(&mut self, hold_id: &str) -> Verdict {
        let Some(hold) = self.holds.iter_mut().find(|h| h.hold_id == hold_id) else {
            return Verdict::NotKept;
        };
        match hold.status {
            HoldStatus::Confirmed => {}
            HoldStatus::Held | HoldStatus::PaymentPending => return Verdict::NotConfirmed,
            HoldStatus::Released | HoldStatus::Expired => return Verdict::NotKept,
        }
        hold.status = HoldStatus::Released;
        let hold = hold.clone();
        for seat_id in &hold.seats {
            let entry = self.seats.get_mut(seat_id).unwrap();
            if entry.0 == SeatStatus::Sold && entry.1.as_deref() == Some(hold_id) {
                *entry = (SeatStatus::Available, None, None, entry.3);
            }
        }
        Verdict::Compensated
    }

    /// The first seats of confirmed hold `hold_id` exchanged for `to` (distinct, none of them
    /// given up; as many as given up), sold at once or held until the difference is paid.
    /// `None`: a request the route would not send.
    fn exchange(
        &mut self,
        hold_id: &str,
        to: &[String],
        pays: bool,
        new_hold_id: &str,
    ) -> Option<(Verdict, Vec<String>)> {
        let Some(index) = self.holds.iter().position(|h| h.hold_id == hold_id) else {
            return Some((Verdict::NotKept, Vec::new()));
        };
        let old = self.holds[index].clone();
        if old.seats.len() < to.len() || old.units > 0 {
            return None;
        }
        let given: Vec<String> = old.seats[..to.len()].to_vec();
        if to.iter().any(|s| given.contains(s)) {
            return None;
        }
        let taken = self.holds.iter().any(|h| {
            matches!(
                h.status,
                HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
            ) && h.gave.iter().any(|t| given.contains(t))
        });
        if taken {
            return Some((Verdict::TicketTaken, given));
        }
        if old.status != HoldStatus::Confirmed {
            return Some((Verdict::NotKept, given));
        }
        if !to.iter().all(|s| self.free(s)) {
            return Some((Verdict::Unavailable, given));
        }
        let used: u32 = self
            .holds
            .iter()
            .filter(|h| h.account == old.account && self.counts(h))
            .map(|h| h.seats.len() as u32 + h.units)
            .sum();
        if used > LIMIT {
            return Some((Verdict::Limit, given));
        }
        let expires_at = if pays {
            self.now + Duration::seconds(i64::from(TTL_S))
        } else {
            self.now
        };
        if !pays {
            self.holds[index].seats.retain(|s| !given.contains(s));
            for seat_id in &given {
                let entry = self.seats.get_mut(seat_id).unwrap();
                *entry = (SeatStatus::Available, None, None, entry.3);
            }
        }
        for seat_id in to {
            let entry = self.seats.get_mut(seat_id).unwrap();
            *entry = if pays {
                (
                    SeatStatus::Held,
                    Some(new_hold_id.into()),
                    Some(expires_at),
                    entry.3,
                )
            } else {
                (SeatStatus::Sold, Some(new_hold_id.into()), None, entry.3)
            };
        }
        self.holds.push(RefHold {
            hold_id: new_hold_id.into(),
            account: old.account.clone(),
            status: if pays {
                HoldStatus::Held
            } else {
                HoldStatus::Confirmed
            },
            seats: to.to_vec(),
            units: 0,
            expires_at,
            exchange: true,
            gave: given.clone(),
        });
        Some((Verdict::Exchanged, given))
    }

    fn seat_row(&self, seat_id: &str) -> SeatRow {
        let (status, hold_id, until, price) = self.seats[seat_id].clone();
        SeatRow {
            seat_id: seat_id.into(),
            status,
            hold_id,
            hold_expires_at: until,
            price_minor: price,
        }
    }

    fn engine_hold(&self, hold: &RefHold) -> EngineHold {
        EngineHold {
            hold_id: hold.hold_id.clone(),
            account_id: hold.account.clone(),
            status: hold.status,
            tier_id: (hold.units > 0).then(|| "GA".to_string()),
            quantity: hold.seats.len() as u32 + hold.units,
            seat_ids: hold.seats.clone(),
            expires_at: hold.expires_at,
            exchange: hold.exchange,
            phase_id: None,
        }
    }

    /// A payment elsewhere confirms the n-th live seat hold (held, or in checkout): the rows
    /// the engine is sent.
    fn confirm(&mut self, n: usize) -> Option<EngineRows> {
        let now = self.now;
        let index = self
            .holds
            .iter()
            .enumerate()
            .filter(|(_, h)| {
                matches!(h.status, HoldStatus::Held | HoldStatus::PaymentPending)
                    && h.expires_at > now
                    && h.units == 0
                    && !h.exchange
            })
            .map(|(i, _)| i)
            .nth(n)?;
        self.holds[index].status = HoldStatus::Confirmed;
        let hold = self.holds[index].clone();
        for seat_id in &hold.seats {
            let entry = self.seats.get_mut(seat_id).unwrap();
            *entry = (SeatStatus::Sold, Some(hold.hold_id.clone()), None, entry.3);
        }
        Some(EngineRows {
            seats: hold.seats.iter().map(|id| self.seat_row(id)).collect(),
            tiers: Vec::new(),
            holds: vec![self.engine_hold(&hold)],
        })
    }

    /// The sweeper ends every due seat hold: the rows the engine is sent.
    fn sweep(&mut self) -> EngineRows {
        let now = self.now;
        let mut rows = EngineRows::default();
        for i in 0..self.holds.len() {
            let hold = &self.holds[i];
            if hold.status != HoldStatus::Held || hold.expires_at > now || hold.units > 0 {
                continue;
            }
            self.holds[i].status = HoldStatus::Expired;
            let hold = self.holds[i].clone();
            for seat_id in &hold.seats {
                let entry = self.seats.get_mut(seat_id).unwrap();
                if entry.0 == SeatStatus::Held && entry.1.as_deref() == Some(hold.hold_id.as_str())
                {
                    *entry = (SeatStatus::Available, None, None, entry.3);
                    rows.seats.push(self.seat_row(seat_id));
                }
            }
            rows.holds.push(self.engine_hold(&hold));
        }
        rows
    }
}

/// The most seats in a row free side by side in the rows `best` may take, seat by seat.
fn brute_largest_block(rows: &[RowSeats], best: &BestRequest) -> u32 {
    let mut largest = 0;
    for row in rows {
        if best.section.as_ref().is_some_and(|s| *s != row.section)
            || best
                .max_price_minor
                .is_some_and(|max| row.price_minor > max)
        {
            continue;
        }
        for start in 0..row.free.len() {
            let run = row.free[start..].iter().take_while(|f| **f).count() as u32;
            largest = largest.max(run);
        }
    }
    largest
}

fn request(account: usize, key: u8, ask: &Ask, hold_id: String) -> HoldRequest {
    let seats = all_seats();
    let shape = match ask {
        Ask::Seats(indexes) => HoldShape::Seats {
            seat_ids: indexes.iter().map(|i| seats[*i].0.clone()).collect(),
        },
        Ask::Tier(quantity) => HoldShape::Tier {
            tier_id: "GA".into(),
            quantity: *quantity,
        },
        Ask::Best(quantity, section, price, together) => HoldShape::BestAvailable {
            quantity: *quantity,
            section: section.map(|i| SECTIONS[i].0.to_string()),
            max_price_minor: *price,
            together: *together,
        },
    };
    HoldRequest {
        account_id: ACCOUNTS[account].into(),
        idempotency_key: format!("k{key}"),
        request_digest: format!("{shape:?}"),
        new_hold_id: hold_id,
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    }
}

fn snapshot() -> EngineSnapshot {
    EngineSnapshot {
        version: 0,
        writer_seq: 0,
        seats: all_seats()
            .into_iter()
            .map(|(seat_id, price_minor)| SeatRow {
                seat_id,
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor,
            })
            .collect(),
        tiers: vec![TierRow {
            tier_id: "GA".into(),
            capacity: TIER_CAPACITY,
            available: TIER_CAPACITY,
            held: 0,
            sold: 0,
            price_minor: 50,
        }],
        holds: Vec::new(),
        keys: Vec::new(),
        ..EngineSnapshot::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn engine_agrees_with_the_reference(steps in proptest::collection::vec(step(), 1..40)) {
        let mut engine = EventEngine::load(rules(), snapshot(), START);
        let mut reference = Reference::new();
        let mut next_hold = 0usize;
        for step in steps {
            match step {
                Step::Group(cmds, spread) => {
                    reference.latest = reference.now + Duration::seconds(spread);
                    reference.expire_due();
                    let mut commands = Vec::new();
                    let mut expected = Vec::new();
                    let mut in_group = BTreeMap::new();
                    let mut expected_sold = Vec::new();
                    for cmd in &cmds {
                        match cmd {
                            Cmd::Hold { account, key, ask } => {
                                let r = request(*account, *key, ask, format!("h{next_hold}"));
                                next_hold += 1;
                                expected.push(reference.hold(&r, &mut in_group));
                                commands.push(Command::Hold(r));
                            }
                            Cmd::Release { account, hold } => {
                                let hold_id = format!("h{hold}");
                                expected.push(reference.release(ACCOUNTS[*account], &hold_id));
                                commands.push(Command::Release {
                                    account_id: ACCOUNTS[*account].into(),
                                    hold_id,
                                });
                            }
                            Cmd::Checkout { account, hold } => {
                                let (account_id, hold_id) =
                                    reference.target(*account, *hold, HoldStatus::Held);
                                expected.push(reference.checkout(&account_id, &hold_id));
                                commands.push(Command::Checkout(CheckoutRequest {
                                    account_id,
                                    hold_id,
                                    order_id: format!("o{next_hold}-{hold}"),
                                    grace_s: GRACE_S,
                                }));
                            }
                            Cmd::Pay { account, hold, outcome } => {
                                let (account_id, hold_id) =
                                    reference.target(*account, *hold, HoldStatus::PaymentPending);
                                let outcome = match outcome {
                                    0 => PaymentOutcome::Failed,
                                    1 => PaymentOutcome::Voided,
                                    _ => PaymentOutcome::Paid,
                                };
                                expected.push(reference.pay(&account_id, &hold_id, outcome));
                                commands.push(Command::Payment(PaymentRequest {
                                    account_id,
                                    hold_id,
                                    outcome,
                                }));
                            }
                            Cmd::Exchange { hold, to, pays } => {
                                let (_, hold_id) = reference.target(0, *hold, HoldStatus::Confirmed);
                                let seats = all_seats();
                                let mut to_ids: Vec<String> =
                                    to.iter().map(|i| seats[*i].0.clone()).collect();
                                to_ids.dedup();
                                let new_hold_id = format!("h{next_hold}");
                                let Some(old) = reference
                                    .holds
                                    .iter()
                                    .find(|h| h.hold_id == hold_id)
                                    .cloned()
                                else {
                                    continue;
                                };
                                let Some((verdict, given)) =
                                    reference.exchange(&hold_id, &to_ids, *pays, &new_hold_id)
                                else {
                                    continue;
                                };
                                next_hold += 1;
                                let price = |id: &String| reference.seats[id].3;
                                let to_value: i64 = to_ids.iter().map(price).sum();
                                if verdict == Verdict::Exchanged {
                                    expected_sold.push(!*pays);
                                }
                                expected.push(verdict);
                                commands.push(Command::Exchange(ExchangeRequest {
                                    account_id: old.account.clone(),
                                    exchange_id: format!("x{next_hold}"),
                                    new_hold_id,
                                    closes_at: START + Duration::days(1),
                                    starts_at: START + Duration::days(2),
                                    gives_up: Some(ExchangeGivesUp {
                                        hold_id: hold_id.clone(),
                                        seat_ids: given.clone(),
                                        tier: None,
                                    }),
                                    ticket_ids: given.clone(),
                                    takes: ExchangeTakes::Seats(
                                        to_ids.iter().map(|id| (id.clone(), seats.iter().find(|s| &s.0 == id).unwrap().1)).collect(),
                                    ),
                                    from_value_minor: if *pays { to_value - 1 } else { to_value },
                                }));
                            }
                            Cmd::Compensate { hold } => {
                                let (_, hold_id) = reference.target(0, *hold, HoldStatus::Confirmed);
                                expected.push(reference.compensate(&hold_id));
                                commands.push(Command::Compensate(CompensationRequest {
                                    order_id: format!("o-{hold}"),
                                    hold_id,
                                }));
                            }
                        }
                    }
                    let (decisions, effects) =
                        engine.decide_within(reference.now, reference.latest, &commands);
                    let got: Vec<Verdict> = decisions.iter().map(verdict_of).collect();
                    prop_assert_eq!(&got, &expected);
                    let granted = got.iter().filter(|v| matches!(v, Verdict::Held { .. })).count();
                    prop_assert_eq!(effects.holds_created().count(), granted);
                    let started = got.iter().filter(|v| **v == Verdict::CheckoutStarted).count();
                    prop_assert_eq!(effects.checkouts_started().count(), started);
                    let sold = got.iter().filter(|v| **v == Verdict::Sold).count();
                    prop_assert_eq!(effects.holds_confirmed().count(), sold);
                    let cancelled = got.iter().filter(|v| matches!(v, Verdict::Cancelled(_))).count();
                    prop_assert_eq!(effects.checkouts_cancelled().count(), cancelled);
                    let compensated = got.iter().filter(|v| **v == Verdict::Compensated).count();
                    prop_assert_eq!(effects.orders_compensated().count(), compensated);
                    let exchanged: Vec<bool> = effects.exchanges().map(|x| x.sold).collect();
                    prop_assert_eq!(exchanged, expected_sold);
                }
                Step::Advance(s) => {
                    reference.now += Duration::seconds(s);
                    engine.advance(reference.now);
                }
                Step::Confirm(n) => {
                    if let Some(rows) = reference.confirm(n) {
                        engine.refresh(rows);
                    }
                }
                Step::Sweep => {
                    let rows = reference.sweep();
                    engine.refresh(rows);
                }
            }
            for (seat_id, _) in all_seats() {
                let row = engine.seat(&seat_id).unwrap();
                let (status, hold_id, until, _) = &reference.seats[&seat_id];
                prop_assert_eq!(row.status, *status, "seat {}", seat_id);
                prop_assert_eq!(&row.hold_id, hold_id, "seat {}", seat_id);
                prop_assert_eq!(row.hold_expires_at, *until, "seat {}", seat_id);
            }
            engine.advance(reference.now);
            let tier = engine.tier("GA").unwrap();
            prop_assert_eq!(tier.available, reference.tier_available());
            for account in ACCOUNTS {
                let used: u32 = reference
                    .holds
                    .iter()
                    .filter(|h| h.account == account && reference.counts(h))
                    .map(|h| h.seats.len() as u32 + h.units)
                    .sum();
                prop_assert_eq!(engine.usage(account, reference.now), used);
            }
            let violations = engine.invariants();
            prop_assert!(violations.is_empty(), "{:?}", violations);
            let rows = reference.rows();
            let expected_blocks: Vec<(String, u32)> = SECTIONS
                .iter()
                .map(|(name, ..)| {
                    let best = BestRequest {
                        quantity: 1,
                        section: Some(name.to_string()),
                        max_price_minor: None,
                    };
                    (name.to_string(), brute_largest_block(&rows, &best))
                })
                .collect();
            prop_assert_eq!(engine.largest_blocks(), expected_blocks);
        }
    }
}
