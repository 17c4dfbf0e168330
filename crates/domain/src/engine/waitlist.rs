//! The group waiting list after sell-out (pretix #974): a party of N asks for N seats —
//! together in one row or anywhere, optionally in one section and under a price cap — and
//! when seats come back the engine offers them to the earliest waiting entry they satisfy
//! whole, as a hold for that account with the event's offer TTL. Never a partial offer;
//! entries that cannot be satisfied keep their place.
//!
//! The list lives in the engine like the holds: entries join and leave as commands, and at
//! the end of every group that freed seats (or took new entries) the engine walks the waiting
//! entries in order and offers what it can. An offer is an ordinary hold (its seats taken
//! only if still free, counted against the account's purchase limit), paid through the
//! ordinary checkout; when it lapses its seats come back and the next entry gets its turn.

use std::collections::{BTreeMap, BTreeSet};

use time::OffsetDateTime;

use super::{Effects, EventEngine};
use crate::decide::{HoldOutcome, HoldRequest, HoldShape, NewHold};
use crate::hold::{HoldStatus, seat_is_free};

/// Waiting entries the engine looks at per group, from the front: a group frees at most
/// this many parties' worth of work, the next group goes on.
pub const WAITLIST_SCAN_MAX: usize = 256;

/// The offer TTL when the event sets none.
pub const WAITLIST_OFFER_TTL_DEFAULT_S: u32 = 600;

/// A waiting-list entry as the engine keeps it: waiting, or offered (its hold named).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitEntry {
    pub waitlist_id: String,
    pub account_id: String,
    /// The entry's place: entries are offered in this order.
    pub seq: u64,
    pub quantity: u32,
    pub section: Option<String>,
    pub max_price_minor: Option<i64>,
    /// Adjacent seats in one row, or any seats.
    pub together: bool,
    /// The hold the offer will be (chosen when the entry joined).
    pub offer_hold_id: String,
    /// Offered: the entry waits no more (its hold is live, or ended).
    pub offered: bool,
    /// The joining request's key and digest (a retry is answered with this entry).
    pub idempotency_key: String,
    pub request_digest: String,
}

/// A request to join the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistJoin {
    pub waitlist_id: String,
    pub account_id: String,
    pub quantity: u32,
    pub section: Option<String>,
    pub max_price_minor: Option<i64>,
    pub together: bool,
    pub offer_hold_id: String,
    pub idempotency_key: String,
    pub request_digest: String,
}

/// What the engine decided for a join or a leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitlistDecision {
    /// On the list at `position` (1 = next), or offered at once (`offer` set after the group's
    /// matching: see [`Effects::waitlist_offers`]).
    Joined { position: u32 },
    /// The account already has a live entry on this event's list (waiting, or offered with
    /// its hold still live): that one.
    AlreadyListed { waitlist_id: String },
    /// Left the list.
    Left,
    /// No such waiting entry of the account (offered already, left, or never): the writer asks
    /// the store which.
    NotWaiting,
    /// The list is full.
    Full,
}

/// The largest waiting list of one event.
pub const WAITLIST_ENTRIES_MAX: usize = 200_000;

/// An offer the group makes: the entry becomes `OFFERED` (only if still `WAITING`), and its
/// hold is written like a new hold (its seats in `seats_taken`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistOffer {
    pub waitlist_id: String,
    pub hold: NewHold,
}

impl EventEngine {
    /// The entry's place among the waiting ones (1 = next).
    fn position_of(&self, seq: u64) -> u32 {
        self.waitlist.range(..=seq).count() as u32
    }

    /// Whether the account has a live entry: waiting, or offered with its hold kept live.
    fn live_entry_of(&self, account_id: &str) -> Option<String> {
        if let Some(seq) = self.waiting_by_account.get(account_id) {
            return self.waitlist.get(seq).map(|e| e.waitlist_id.clone());
        }
        let (waitlist_id, hold_id) = self.offered_by_account.get(account_id)?;
        let live = self.holds.get(hold_id).is_some_and(|hold| {
            matches!(hold.status, HoldStatus::Held | HoldStatus::PaymentPending)
                && hold.expires_at > self.state.now
        });
        live.then(|| waitlist_id.clone())
    }

    /// Keeps an entry loaded from the store or joined now.
    pub(super) fn keep_entry(&mut self, entry: WaitEntry) {
        self.waitlist_next_seq = self.waitlist_next_seq.max(entry.seq + 1);
        if entry.offered {
            self.offer_holds.insert(entry.offer_hold_id.clone());
            self.offered_by_account.insert(
                entry.account_id.clone(),
                (entry.waitlist_id.clone(), entry.offer_hold_id.clone()),
            );
        } else {
            self.waiting_by_account
                .insert(entry.account_id.clone(), entry.seq);
            self.waitlist.insert(entry.seq, entry);
        }
    }

    pub(super) fn decide_join(
        &mut self,
        request: &WaitlistJoin,
        effects: &mut Effects,
    ) -> WaitlistDecision {
        if let Some(waitlist_id) = self.live_entry_of(&request.account_id) {
            return WaitlistDecision::AlreadyListed { waitlist_id };
        }
        if self.waitlist.len() >= WAITLIST_ENTRIES_MAX {
            return WaitlistDecision::Full;
        }
        let entry = WaitEntry {
            waitlist_id: request.waitlist_id.clone(),
            account_id: request.account_id.clone(),
            seq: self.waitlist_next_seq,
            quantity: request.quantity,
            section: request.section.clone(),
            max_price_minor: request.max_price_minor,
            together: request.together,
            offer_hold_id: request.offer_hold_id.clone(),
            offered: false,
            idempotency_key: request.idempotency_key.clone(),
            request_digest: request.request_digest.clone(),
        };
        let seq = entry.seq;
        effects.waitlist_joined.push(entry.clone());
        self.offered_by_account.remove(&request.account_id);
        self.keep_entry(entry);
        self.waitlist_dirty = true;
        WaitlistDecision::Joined {
            position: self.position_of(seq),
        }
    }

    pub(super) fn decide_leave(
        &mut self,
        account_id: &str,
        waitlist_id: &str,
        effects: &mut Effects,
    ) -> WaitlistDecision {
        let Some(seq) = self.waiting_by_account.get(account_id).copied() else {
            return WaitlistDecision::NotWaiting;
        };
        if self
            .waitlist
            .get(&seq)
            .is_none_or(|e| e.waitlist_id != waitlist_id)
        {
            return WaitlistDecision::NotWaiting;
        }
        self.waitlist.remove(&seq);
        self.waiting_by_account.remove(account_id);
        effects.waitlist_left.push(waitlist_id.to_owned());
        WaitlistDecision::Left
    }

    /// The offer holds this group ended or sold (none when no offer is out: the common case
    /// costs one emptiness check).
    pub(super) fn offers_moved_on(&mut self, effects: &mut Effects) {
        if self.offer_holds.is_empty() {
            return;
        }
        let ended = effects
            .holds_released
            .iter()
            .chain(&effects.holds_expired)
            .chain(effects.checkouts_cancelled.iter().map(|(_, h)| h))
            .map(|h| h.hold_id.as_str());
        for hold_id in ended {
            if self.offer_holds.remove(hold_id) {
                effects.waitlist_lapsed.push(hold_id.to_owned());
            }
        }
        for confirmed in &effects.holds_confirmed {
            if self.offer_holds.remove(&confirmed.hold_id) {
                effects.waitlist_purchased.push(confirmed.hold_id.clone());
            }
        }
    }

    /// Offers freed seats to the waiting entries, front first: each entry satisfied whole
    /// gets a hold; the others keep their place. Runs at the end of a group that freed seats
    /// or took entries (and the first group after a load).
    pub(super) fn offer_to_waitlist(&mut self, effects: &mut Effects) {
        let freed = !effects.holds_released.is_empty()
            || !effects.holds_expired.is_empty()
            || !effects.checkouts_cancelled.is_empty()
            || !effects.orders_compensated.is_empty()
            || effects.exchanges.iter().any(|x| x.freed.is_some());
        if self.waitlist.is_empty() || !(freed || self.waitlist_dirty) {
            return;
        }
        self.waitlist_dirty = false;
        let now = self.state.now;
        if now < self.rules.on_sale_at {
            return;
        }
        let ttl = if self.waitlist_offer_ttl_s == 0 {
            WAITLIST_OFFER_TTL_DEFAULT_S
        } else {
            self.waitlist_offer_ttl_s
        };
        let front: Vec<WaitEntry> = self
            .waitlist
            .values()
            .take(WAITLIST_SCAN_MAX)
            .cloned()
            .collect();
        for entry in front {
            let shape = if entry.together {
                HoldShape::BestAvailable {
                    quantity: entry.quantity,
                    section: entry.section.clone(),
                    max_price_minor: entry.max_price_minor,
                }
            } else {
                match self.any_seats(&entry, now) {
                    Some(seat_ids) => HoldShape::Seats { seat_ids },
                    None => continue,
                }
            };
            let key = format!("waitlist:{}", entry.waitlist_id);
            let request = HoldRequest {
                account_id: entry.account_id.clone(),
                idempotency_key: key.clone(),
                request_digest: String::new(),
                new_hold_id: entry.offer_hold_id.clone(),
                shape,
            };
            // The offer is a hold with the offer's TTL, decided by the hold rules; it is not
            // a command of the group, so it leaves the group's new holds for its own list.
            let created_before = effects.holds_created.len();
            let hold_ttl_s = std::mem::replace(&mut self.rules.hold_ttl_s, ttl);
            let outcome = self.decide_holds(std::slice::from_ref(&request), 0, effects);
            self.rules.hold_ttl_s = hold_ttl_s;
            self.state
                .prior_digests
                .remove(&(entry.account_id.clone(), key));
            let Some(HoldOutcome::Held(hold)) = outcome.into_iter().next() else {
                continue;
            };
            effects.holds_created.truncate(created_before);
            self.waitlist.remove(&entry.seq);
            self.waiting_by_account.remove(&entry.account_id);
            self.offered_by_account.insert(
                entry.account_id.clone(),
                (entry.waitlist_id.clone(), hold.hold_id.clone()),
            );
            self.offer_holds.insert(hold.hold_id.clone());
            effects.waitlist_offers.push(WaitlistOffer {
                waitlist_id: entry.waitlist_id.clone(),
                hold,
            });
        }
    }

    /// `quantity` free seats anywhere (best rows first) within the entry's section and price
    /// cap, or `None` if there are not that many.
    fn any_seats(&self, entry: &WaitEntry, now: OffsetDateTime) -> Option<Vec<String>> {
        let sections: BTreeSet<&str> = match &entry.section {
            Some(section) => [section.as_str()].into(),
            None => self
                .rules
                .section_order
                .iter()
                .map(String::as_str)
                .collect(),
        };
        let mut by_section: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for seat in self.state.seats.values() {
            if !seat_is_free(seat.status, seat.hold_expires_at, now)
                || entry
                    .max_price_minor
                    .is_some_and(|cap| seat.price_minor > cap)
            {
                continue;
            }
            let section = seat.seat_id.rsplitn(3, '-').nth(2).unwrap_or_default();
            if !sections.contains(section) {
                continue;
            }
            let rank = self
                .rules
                .section_order
                .iter()
                .position(|s| s == section)
                .unwrap_or(usize::MAX);
            by_section.entry(rank).or_default().push(&seat.seat_id);
        }
        let seats: Vec<String> = by_section
            .into_values()
            .flatten()
            .take(entry.quantity as usize)
            .map(str::to_owned)
            .collect();
        (seats.len() == entry.quantity as usize).then_some(seats)
    }
}
