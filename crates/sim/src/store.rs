//! The simulated store: the event's authoritative rows (seats, holds, the hold keys and their
//! recorded answers, the waiting list's entries), changed only by committed groups, and the
//! snapshot an engine is loaded from after a crash or a failed commit.
//!
//! It writes a group's effects in the real stores' order (what a group frees before what it
//! takes: `store-sqlite/src/engine.rs`, `apply_group`) but without their conditions: the
//! simulation checks the engine's decisions with its own ledger (`ledger.rs`), and a store
//! that refused a bad write would hide the bug the ledger is there to catch.

use std::collections::{BTreeMap, HashMap};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, NewHold, SeatRow};
use boxoffice_domain::engine::{Effects, EngineHold, EngineSnapshot, WaitEntry};
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
            | HoldOutcome::EventCancelled
            | HoldOutcome::PhaseEnded { .. }
            | HoldOutcome::OutsidePhase { .. }
            | HoldOutcome::AccessCodeRequired { .. }
            | HoldOutcome::CompanionSeatAlone { .. }
            | HoldOutcome::SeatKeptAccessible { .. }
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

/// A waiting-list entry's status, as the real store's `waitlist.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryStatus {
    Waiting,
    Offered,
    Purchased,
    Lapsed,
    Left,
}

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
    /// The waiting list's rows by entry id, and the entry of each offer hold.
    waitlist: BTreeMap<String, (WaitEntry, EntryStatus)>,
    waitlist_by_hold: HashMap<String, String>,
    /// The event's `waitlistOfferTtlSeconds`, loaded with the list.
    waitlist_offer_ttl_s: u32,
}

impl SimStore {
    pub(crate) fn new(layout: &SeatLayout, waitlist_offer_ttl_s: u32) -> Self {
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
            waitlist: BTreeMap::new(),
            waitlist_by_hold: HashMap::new(),
            waitlist_offer_ttl_s,
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

    /// What an engine loads from: every seat, the holds that are kept, every hold key, the
    /// waiting list's entries still waiting or offered (in their order) and its offer TTL.
    pub(crate) fn snapshot(&self) -> EngineSnapshot {
        EngineSnapshot {
            cancelled: false,
            lanes: Default::default(),
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
            waitlist: {
                let mut entries: Vec<WaitEntry> = self
                    .waitlist
                    .values()
                    .filter_map(|(entry, status)| match status {
                        EntryStatus::Waiting => Some(entry.clone()),
                        EntryStatus::Offered => Some(WaitEntry {
                            offered: true,
                            ..entry.clone()
                        }),
                        EntryStatus::Purchased | EntryStatus::Lapsed | EntryStatus::Left => None,
                    })
                    .collect();
                entries.sort_by_key(|entry| entry.seq);
                entries
            },
            waitlist_offer_ttl_s: self.waitlist_offer_ttl_s,
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
        for released in effects.holds_released() {
            self.free_seats(&released.hold_id, &released.seat_ids, now);
            self.end_hold(&released.hold_id, HoldStatus::Released, &mut ended);
        }
        for expired in effects.holds_expired() {
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
        for cancelled in effects.checkouts_cancelled() {
            let hold = &cancelled.hold;
            self.free_seats(&hold.hold_id, &hold.seat_ids, now);
            self.end_hold(&hold.hold_id, HoldStatus::Released, &mut ended);
        }
        for confirmed in effects.holds_confirmed() {
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
        for created in effects.holds_created() {
            self.insert_hold(&created.hold);
        }
        self.write_waitlist(effects);
        for taken in effects.seats_taken() {
            if let Some(seat) = self.seat_mut(taken.seat_id) {
                let was_sold = seat.status == SeatStatus::Sold;
                seat.status = SeatStatus::Held;
                seat.hold_id = Some(taken.hold_id.to_owned());
                seat.hold_expires_at = Some(taken.hold_expires_at);
                if was_sold {
                    self.sold -= 1;
                }
            }
        }
        for started in effects.checkouts_started() {
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

    fn insert_hold(&mut self, created: &NewHold) {
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
                phase_id: None,
            },
        );
    }

    /// The waiting list's rows, as the real store writes them after the new holds and before
    /// the seats taken (`store-sqlite/src/waitlist.rs`, `write_waitlist`): entries joined,
    /// left (only `WAITING`), offered (the offer's hold inserted `HELD`; only `WAITING`), and
    /// the offers that lapsed or sold (only `OFFERED`). The ledger checks the conditions.
    fn write_waitlist(&mut self, effects: &Effects) {
        for entry in effects.waitlist_joined() {
            self.waitlist.insert(
                entry.waitlist_id.clone(),
                (entry.clone(), EntryStatus::Waiting),
            );
        }
        for waitlist_id in effects.waitlist_left() {
            self.move_entry(waitlist_id, EntryStatus::Waiting, EntryStatus::Left);
        }
        for offer in effects.waitlist_offers() {
            self.insert_hold(&offer.hold);
            self.waitlist_by_hold
                .insert(offer.hold.hold_id.clone(), offer.waitlist_id.clone());
            self.move_entry(
                &offer.waitlist_id,
                EntryStatus::Waiting,
                EntryStatus::Offered,
            );
        }
        let lapsed = effects.waitlist_lapsed().map(|h| (h, EntryStatus::Lapsed));
        let purchased = effects
            .waitlist_purchased()
            .map(|h| (h, EntryStatus::Purchased));
        for (hold_id, status) in lapsed.chain(purchased) {
            if let Some(waitlist_id) = self.waitlist_by_hold.get(hold_id).cloned() {
                self.move_entry(&waitlist_id, EntryStatus::Offered, status);
            }
        }
    }

    fn move_entry(&mut self, waitlist_id: &str, from: EntryStatus, to: EntryStatus) {
        if let Some((_, status)) = self.waitlist.get_mut(waitlist_id)
            && *status == from
        {
            *status = to;
        }
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

#[cfg(test)]
mod tests {
    use boxoffice_domain::engine::{Effect, WaitlistOffer};
    use time::Duration;

    use super::*;
    use crate::world::EPOCH;

    fn entry(fan: u64, seq: u64) -> WaitEntry {
        WaitEntry {
            waitlist_id: format!("w-{fan}"),
            account_id: format!("fan-{fan}"),
            seq,
            quantity: 1,
            section: None,
            max_price_minor: None,
            together: false,
            offer_hold_id: format!("h-{fan}-1"),
            offered: false,
            idempotency_key: "w".to_owned(),
            request_digest: "waitlist:1:any".to_owned(),
        }
    }

    fn listed(store: &SimStore) -> Vec<(String, bool)> {
        store
            .snapshot()
            .waitlist
            .into_iter()
            .map(|entry| (entry.waitlist_id, entry.offered))
            .collect()
    }

    #[test]
    fn an_engine_reloads_the_entries_still_waiting_or_offered_in_their_order() {
        let layout = SeatLayout {
            sections: 1,
            rows_per_section: 1,
            seats_per_row: 4,
        };
        let mut store = SimStore::new(&layout, 300);
        // Ids in another order than the places: the snapshot goes by place.
        let joined: Effects = [entry(9, 1), entry(10, 2), entry(11, 3)]
            .into_iter()
            .map(Effect::WaitlistJoined)
            .collect();
        store.apply(&joined, Vec::new(), EPOCH);
        let expires_at = EPOCH + Duration::seconds(300);
        let offered = Effects::from(vec![Effect::WaitlistOffered(WaitlistOffer {
            waitlist_id: "w-9".to_owned(),
            hold: NewHold {
                hold_id: "h-9-1".to_owned(),
                account_id: "fan-9".to_owned(),
                seats: vec![("S001-1-1".to_owned(), 15_000)],
                tier_id: None,
                quantity: 1,
                total_minor: 15_000,
                expires_at,
                split: false,
                phase_id: None,
                price: Default::default(),
            },
        })]);
        store.apply(&offered, Vec::new(), EPOCH + Duration::seconds(1));
        assert_eq!(
            listed(&store),
            [
                ("w-9".to_owned(), true),
                ("w-10".to_owned(), false),
                ("w-11".to_owned(), false)
            ]
        );
        let snapshot = store.snapshot();
        assert_eq!(snapshot.waitlist_offer_ttl_s, 300);
        assert!(
            snapshot
                .holds
                .iter()
                .any(|hold| hold.hold_id == "h-9-1" && hold.status == HoldStatus::Held)
        );
        assert_eq!(store.held(), 1);
        // The offer lapsed, an entry left: neither is loaded again.
        let moved = Effects::from(vec![
            Effect::WaitlistLapsed {
                hold_id: "h-9-1".to_owned(),
            },
            Effect::WaitlistLeft {
                waitlist_id: "w-11".to_owned(),
            },
        ]);
        store.apply(&moved, Vec::new(), EPOCH + Duration::seconds(300));
        assert_eq!(listed(&store), [("w-10".to_owned(), false)]);
    }
}
