//! The simulated store: the event's authoritative rows (seats, holds, the hold keys and their
//! recorded answers), changed only by committed groups, and the snapshot an engine is loaded
//! from after a crash or a failed commit.
//!
//! It writes a group's effects in the real stores' order (what a group frees before what it
//! takes: `store-sqlite/src/engine.rs`, `apply_group`) but without their conditions: the
//! simulation checks the engine's decisions with its own ledger (`ledger.rs`), and a store
//! that refused a bad write would hide the bug the ledger is there to catch.

use std::collections::{BTreeMap, HashMap};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, SeatRow};
use boxoffice_domain::engine::{Effects, EngineHold, EngineSnapshot};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};

use crate::config::SeatLayout;

/// What a hold key's stored record answers a replay with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    Held { hold_id: String },
    Unavailable,
    PurchaseLimit,
}

impl Recorded {
    /// The record a decided hold outcome stores, if it stores one.
    pub(crate) fn of(outcome: &HoldOutcome) -> Option<Self> {
        match outcome {
            HoldOutcome::Held(hold) => Some(Self::Held {
                hold_id: hold.hold_id.clone(),
            }),
            HoldOutcome::SeatsUnavailable { .. } | HoldOutcome::SoldOut { .. } => {
                Some(Self::Unavailable)
            }
            HoldOutcome::PurchaseLimit { .. } => Some(Self::PurchaseLimit),
            HoldOutcome::Replayed
            | HoldOutcome::ReplayOfEarlierInBatch { .. }
            | HoldOutcome::KeyReusedWithOtherRequest
            | HoldOutcome::SaleNotOpen { .. }
            | HoldOutcome::Invalid { .. } => None,
        }
    }
}

/// A hold key's record: the request's digest and the answer.
#[derive(Debug, Clone)]
struct Record {
    digest: String,
    answer: Recorded,
}

/// One record a committed group writes: (account, key), digest, answer.
pub(crate) type NewRecord = ((String, String), String, Recorded);

/// The event's rows. See the module docs.
#[derive(Debug)]
pub(crate) struct SimStore {
    /// Every seat, in layout order (section, row, number).
    pub(crate) seats: Vec<SeatRow>,
    seat_index: HashMap<String, u32>,
    /// Every hold ever granted, in any status.
    pub(crate) holds: BTreeMap<String, EngineHold>,
    records: BTreeMap<(String, String), Record>,
    pub(crate) version: u64,
    pub(crate) writer_seq: u64,
    /// Seats `SOLD`.
    pub(crate) sold: u64,
    /// When each seat last came back on sale (a hold released, cancelled, or past its
    /// deadline), by seat index.
    returned_at: Vec<Option<OffsetDateTime>>,
    /// Each seat sale in commit order: when, and when the seat had last come back (`None`:
    /// sold on its first hold).
    pub(crate) sales: Vec<(OffsetDateTime, Option<OffsetDateTime>)>,
}

impl SimStore {
    pub(crate) fn new(layout: &SeatLayout) -> Self {
        let seats: Vec<SeatRow> = seat_ids(layout)
            .map(|(seat_id, price_minor)| SeatRow {
                seat_id,
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor,
            })
            .collect();
        let seat_index = seats
            .iter()
            .enumerate()
            .map(|(i, seat)| (seat.seat_id.clone(), i as u32))
            .collect();
        Self {
            seats,
            seat_index,
            holds: BTreeMap::new(),
            records: BTreeMap::new(),
            version: 0,
            writer_seq: 0,
            sold: 0,
            returned_at: Vec::new(),
            sales: Vec::new(),
        }
    }

    /// Every seat sold: nothing is free and no hold could lapse back (the server's
    /// `sold_out_now` on a house without tiers).
    pub(crate) fn sold_out(&self) -> bool {
        self.sold == self.seats.len() as u64
    }

    /// Seats held (by a live hold or one past its deadline not yet ended).
    pub(crate) fn held(&self) -> u64 {
        self.seats
            .iter()
            .filter(|seat| seat.status == SeatStatus::Held)
            .count() as u64
    }

    /// Seats free at `now` (a hold past its deadline frees its seats) and seats held by a
    /// hold not past it: what the server's live seat map counts for release.
    pub(crate) fn inventory_at(&self, now: OffsetDateTime) -> (u64, u64) {
        let mut free = 0;
        let mut held = 0;
        for seat in &self.seats {
            match seat.status {
                SeatStatus::Available => free += 1,
                SeatStatus::Held if seat.hold_expires_at.is_some_and(|at| at > now) => held += 1,
                SeatStatus::Held => free += 1,
                SeatStatus::Sold => {}
            }
        }
        (free, held)
    }

    pub(crate) fn record(&self, account_id: &str, key: &str) -> Option<&Recorded> {
        self.records
            .get(&(account_id.to_owned(), key.to_owned()))
            .map(|record| &record.answer)
    }

    /// What an engine loads from: every seat, the holds that are kept, every hold key.
    pub(crate) fn snapshot(&self) -> EngineSnapshot {
        EngineSnapshot {
            version: self.version,
            writer_seq: self.writer_seq,
            seats: self.seats.clone(),
            tiers: Vec::new(),
            holds: self
                .holds
                .values()
                .filter(|hold| {
                    matches!(
                        hold.status,
                        HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
                    )
                })
                .cloned()
                .collect(),
            keys: self
                .records
                .iter()
                .map(|(scope, record)| (scope.clone(), record.digest.clone()))
                .collect(),
            ..EngineSnapshot::default()
        }
    }

    /// Writes one committed group at the group's clock `now`; returns the accounts whose
    /// shopping trip the group ended (a hold released, expired, cancelled or sold), in the
    /// group's order.
    pub(crate) fn apply(
        &mut self,
        effects: &Effects,
        records: Vec<NewRecord>,
        now: OffsetDateTime,
    ) -> Vec<String> {
        let mut ended = Vec::new();
        for released in &effects.holds_released {
            self.free_seats(&released.hold_id, &released.seat_ids, now);
            self.end_hold(&released.hold_id, HoldStatus::Released, &mut ended);
        }
        for expired in &effects.holds_expired {
            // The real store skips a hold the sweeper ended first; here nothing else ends
            // holds, and the ledger reports a hold expired early or twice.
            let due = self
                .holds
                .get(&expired.hold_id)
                .is_some_and(|hold| hold.status == HoldStatus::Held && hold.expires_at <= now);
            if !due {
                continue;
            }
            let seat_ids = self.holds[&expired.hold_id].seat_ids.clone();
            let deadline = self.holds[&expired.hold_id].expires_at;
            self.free_seats(&expired.hold_id, &seat_ids, deadline);
            self.end_hold(&expired.hold_id, HoldStatus::Expired, &mut ended);
        }
        for (_, cancelled) in &effects.checkouts_cancelled {
            self.free_seats(&cancelled.hold_id, &cancelled.seat_ids, now);
            self.end_hold(&cancelled.hold_id, HoldStatus::Released, &mut ended);
        }
        for confirmed in &effects.holds_confirmed {
            for seat_id in &confirmed.seat_ids {
                let index = self.seat_index.get(seat_id).map(|&i| i as usize);
                if let Some(seat) = self.seat_mut(seat_id) {
                    let newly_sold = seat.status != SeatStatus::Sold;
                    seat.status = SeatStatus::Sold;
                    seat.hold_id = Some(confirmed.hold_id.clone());
                    seat.hold_expires_at = None;
                    if newly_sold {
                        self.sold += 1;
                        let returned = index
                            .and_then(|i| self.returned_at.get(i).copied())
                            .flatten();
                        self.sales.push((now, returned));
                    }
                }
            }
            self.end_hold(&confirmed.hold_id, HoldStatus::Confirmed, &mut ended);
        }
        for (_, created) in &effects.holds_created {
            self.holds.insert(
                created.hold_id.clone(),
                EngineHold {
                    hold_id: created.hold_id.clone(),
                    account_id: created.account_id.clone(),
                    status: HoldStatus::Held,
                    tier_id: created.tier_id.clone(),
                    quantity: created.quantity,
                    seat_ids: created.seats.iter().map(|(id, _)| id.clone()).collect(),
                    expires_at: created.expires_at,
                    exchange: false,
                },
            );
        }
        for taken in &effects.seats_taken {
            if let Some(seat) = self.seat_mut(&taken.seat_id) {
                let was_sold = seat.status == SeatStatus::Sold;
                seat.status = SeatStatus::Held;
                seat.hold_id = Some(taken.hold_id.clone());
                seat.hold_expires_at = Some(taken.hold_expires_at);
                if was_sold {
                    self.sold -= 1;
                }
            }
        }
        for started in &effects.checkouts_started {
            if let Some(hold) = self.holds.get_mut(&started.hold_id) {
                hold.status = HoldStatus::PaymentPending;
                hold.expires_at = started.expires_at;
            }
            for seat_id in &started.seat_ids {
                if let Some(seat) = self.seat_mut(seat_id) {
                    seat.hold_expires_at = Some(started.expires_at);
                }
            }
        }
        for (scope, digest, answer) in records {
            self.records.insert(scope, Record { digest, answer });
        }
        self.version += 1;
        self.writer_seq += 1;
        ended
    }

    fn seat_mut(&mut self, seat_id: &str) -> Option<&mut SeatRow> {
        let i = *self.seat_index.get(seat_id)?;
        self.seats.get_mut(i as usize)
    }

    /// Frees the seats that still point to `hold_id` as held; they came back at `at`.
    fn free_seats(&mut self, hold_id: &str, seat_ids: &[String], at: OffsetDateTime) {
        if self.returned_at.len() < self.seats.len() {
            self.returned_at.resize(self.seats.len(), None);
        }
        for seat_id in seat_ids {
            let index = self.seat_index.get(seat_id).map(|&i| i as usize);
            if let Some(seat) = self.seat_mut(seat_id)
                && seat.status == SeatStatus::Held
                && seat.hold_id.as_deref() == Some(hold_id)
            {
                seat.status = SeatStatus::Available;
                seat.hold_id = None;
                seat.hold_expires_at = None;
                if let Some(i) = index {
                    self.returned_at[i] = Some(at);
                }
            }
        }
    }

    fn end_hold(&mut self, hold_id: &str, status: HoldStatus, ended: &mut Vec<String>) {
        if let Some(hold) = self.holds.get_mut(hold_id) {
            hold.status = status;
            ended.push(hold.account_id.clone());
        }
    }
}

/// Every seat id of the layout with its price, in layout order: sections best first (the
/// front section dearest), then rows, then numbers.
pub(crate) fn seat_ids(layout: &SeatLayout) -> impl Iterator<Item = (String, i64)> + '_ {
    (0..layout.sections).flat_map(move |section| {
        let name = SeatLayout::section_name(section);
        let price_minor = (15_000 - 100 * i64::from(section)).max(2_000);
        (1..=layout.rows_per_section).flat_map(move |row| {
            let name = name.clone();
            (1..=layout.seats_per_row)
                .map(move |number| (format!("{name}-{row}-{number}"), price_minor))
        })
    })
}
