//! The group waiting list after sell-out (pretix #974): a party of N asks for N seats —
//! together in one row or anywhere, optionally in one section and under a price cap — and
//! when seats come back the engine offers them to the earliest waiting entry they satisfy
//! whole, as a hold for that account with the event's offer TTL. Never a partial offer;
//! entries that cannot be satisfied keep their place.
//!
//! The list lives in the engine like the holds: entries join and leave as commands, and at
//! the end of every group that freed seats (or took new entries) the engine offers what it
//! can. An offer is an ordinary hold (its seats taken only if still free, counted against
//! the account's purchase limit), paid through the ordinary checkout; when it lapses its
//! seats come back and the next entry gets its turn.
//!
//! Matching costs what can match, not the list's length. Entries are kept by class — section,
//! price cap (as the highest seat price under it), quantity, together — and entries of one
//! class are satisfied by the same free seats or by none. A match takes the class whose first
//! entry is earliest, asks the free-seat index (`free_seats`) whether the class can be
//! satisfied at all (a count by section and price), then the hold rules; a class that cannot
//! be is passed over whole for the rest of the match (seats only get fewer within it). So
//! the earliest entry that can be satisfied whole gets the seats, exactly as a walk of the
//! whole list front to back would decide, while entries nothing satisfies cost one look per
//! class, however many there are and wherever they stand.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;

use super::{Effect, Effects, EventEngine};
use crate::best::Together;
use crate::decide::{HoldOutcome, HoldRequest, HoldShape, NewHold};
use crate::hold::HoldStatus;

/// Offers one match makes at most: each is a hold the group writes, so a lapse of many
/// offers at once spreads over several groups (the rest are matched by the next group).
pub const WAITLIST_OFFERS_PER_GROUP_MAX: usize = 256;

/// Entries one match looks at at most. Only entries that could take seats but not under
/// their account's purchase limit are looked at without an offer or a class passed over;
/// past this bound the match stops (the next group that frees seats or takes an entry
/// matches again from the front).
pub const WAITLIST_LOOKS_PER_GROUP_MAX: usize = 4_096;

/// The offer TTL when the event sets none.
pub const WAITLIST_OFFER_TTL_DEFAULT_S: u32 = 600;

/// An offer's hold id is this prefix and the entry's id ([`offer_hold_id`]), so that a
/// reader holding only the hold knows which entry to ask whether the hold is its offer (the
/// server makes every hold id; a fan cannot choose one).
pub const OFFER_HOLD_PREFIX: &str = "wl-";

/// The hold id an entry's offer will have.
pub fn offer_hold_id(waitlist_id: &str) -> String {
    format!("{OFFER_HOLD_PREFIX}{waitlist_id}")
}

/// The entry a hold id was made for as its offer, if it has an offer's shape.
pub fn offer_waitlist_id(hold_id: &str) -> Option<&str> {
    hold_id
        .strip_prefix(OFFER_HOLD_PREFIX)
        .filter(|id| !id.is_empty())
}

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
    /// The event is cancelled: nothing is offered any more.
    EventCancelled,
}

/// The largest waiting list of one event.
pub const WAITLIST_ENTRIES_MAX: usize = 200_000;

/// What an entry asks of the free seats. Entries of one class are satisfied by the same free
/// seats or by none; only their accounts' purchase limits tell them apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct WaitClass {
    section: Option<String>,
    /// The highest seat price of the event at most the entry's cap (`None`: no cap, or a cap
    /// at least every price).
    cap: Option<i64>,
    quantity: u32,
    together: bool,
}

impl WaitClass {
    /// Whether every entry of `self` is refused when `dead` (a class of entries together)
    /// found no seats: as many or more seats, within the same section or any, under a cap no
    /// higher.
    fn passed_over_with(&self, dead: &Self) -> bool {
        let cap_within = match (self.cap, dead.cap) {
            (_, None) => true,
            (Some(mine), Some(theirs)) => mine <= theirs,
            (None, Some(_)) => false,
        };
        self.together
            && dead.together
            && self.quantity >= dead.quantity
            && cap_within
            && (dead.section.is_none() || dead.section == self.section)
    }
}

/// An offer the group makes: the entry becomes `OFFERED` (only if still `WAITING`), and its
/// hold is written like a new hold (its seats in `seats_taken`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistOffer {
    pub waitlist_id: String,
    pub hold: NewHold,
}

impl EventEngine {
    /// The entry's place among the waiting ones (1 = next).
    pub(super) fn position_of(&self, seq: u64) -> u32 {
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
            self.waitlist_classes
                .entry(self.class_of(&entry))
                .or_default()
                .insert(entry.seq);
            self.waitlist.insert(entry.seq, entry);
        }
    }

    /// The entry's class (see [`WaitClass`]).
    fn class_of(&self, entry: &WaitEntry) -> WaitClass {
        let cap = entry.max_price_minor.and_then(|cap| {
            let highest = self.seat_prices.last().copied();
            if highest.is_some_and(|highest| cap >= highest) {
                return None;
            }
            // Below every price (an entry from before such caps were refused): kept as it
            // is, a class nothing satisfies.
            Some(
                self.seat_prices
                    .range(..=cap)
                    .next_back()
                    .copied()
                    .unwrap_or(cap),
            )
        });
        WaitClass {
            section: entry.section.clone(),
            cap,
            quantity: entry.quantity,
            together: entry.together,
        }
    }

    /// Takes a waiting entry off the list (left, or offered).
    fn unlist(&mut self, seq: u64) -> Option<WaitEntry> {
        let entry = self.waitlist.remove(&seq)?;
        self.waiting_by_account.remove(&entry.account_id);
        let class = self.class_of(&entry);
        if let Some(seqs) = self.waitlist_classes.get_mut(&class) {
            seqs.remove(&seq);
            if seqs.is_empty() {
                self.waitlist_classes.remove(&class);
            }
        }
        Some(entry)
    }

    pub(super) fn decide_join(
        &mut self,
        request: &WaitlistJoin,
        effects: &mut Effects,
    ) -> WaitlistDecision {
        if self.cancelled {
            return WaitlistDecision::EventCancelled;
        }
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
        effects.push(Effect::WaitlistJoined(entry.clone()));
        self.offered_by_account.remove(&request.account_id);
        self.waitlist_joined_classes.insert(self.class_of(&entry));
        self.keep_entry(entry);
        // The newest entry is the last: its place is the list's length (counting the places
        // before it cost the list's length on every join).
        let position = u32::try_from(self.waitlist.len()).unwrap_or(u32::MAX);
        debug_assert_eq!(position, self.position_of(seq));
        WaitlistDecision::Joined { position }
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
        self.unlist(seq);
        effects.push(Effect::WaitlistLeft {
            waitlist_id: waitlist_id.to_owned(),
        });
        WaitlistDecision::Left
    }

    /// The offer holds this group ended or sold (none when no offer is out: the common case
    /// costs one emptiness check).
    pub(super) fn offers_moved_on(&mut self, effects: &mut Effects) {
        if self.offer_holds.is_empty() {
            return;
        }
        let ended: Vec<String> = effects
            .holds_released()
            .chain(effects.holds_expired())
            .chain(effects.checkouts_cancelled().map(|c| &c.hold))
            .map(|h| h.hold_id.clone())
            .collect();
        let sold: Vec<String> = effects
            .holds_confirmed()
            .map(|c| c.hold_id.clone())
            .collect();
        for hold_id in ended {
            if self.offer_holds.remove(&hold_id) {
                effects.push(Effect::WaitlistLapsed { hold_id });
            }
        }
        for hold_id in sold {
            if self.offer_holds.remove(&hold_id) {
                effects.push(Effect::WaitlistPurchased { hold_id });
            }
        }
    }

    /// Whether the list must be matched although no group asked for it (a match stopped at
    /// its bound, or a catch-up freed seats): the writer then runs a group of no commands.
    pub fn waitlist_wants_group(&self) -> bool {
        self.waitlist_dirty && !self.waitlist.is_empty()
    }

    /// Offers free seats to the waiting entries: the earliest entry that can be satisfied
    /// whole gets a hold, again and again until none can (see the module's documentation);
    /// the others keep their place. Runs at the end of a group that freed seats or took
    /// entries (then only the joined entries' classes can have become satisfiable), and the
    /// first group after a load.
    pub(super) fn offer_to_waitlist(&mut self, effects: &mut Effects) {
        if self.cancelled {
            self.waitlist_joined_classes.clear();
            return;
        }
        let freed = effects.frees_inventory();
        let joined = std::mem::take(&mut self.waitlist_joined_classes);
        let every_class = freed || self.waitlist_dirty;
        if self.waitlist.is_empty() || (!every_class && joined.is_empty()) {
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
        // Each class's first entry not yet looked at, earliest first.
        let classes: Vec<WaitClass> = if every_class {
            self.waitlist_classes.keys().cloned().collect()
        } else {
            joined.into_iter().collect()
        };
        let mut heads: BinaryHeap<Reverse<(u64, usize)>> = classes
            .iter()
            .enumerate()
            .filter_map(|(i, class)| {
                let first = self.waitlist_classes.get(class)?.first()?;
                Some(Reverse((*first, i)))
            })
            .collect();
        let mut dead_together: Vec<usize> = Vec::new();
        let (mut offers, mut looks) = (0usize, 0usize);
        while let Some(Reverse((seq, i))) = heads.pop() {
            if offers >= WAITLIST_OFFERS_PER_GROUP_MAX || looks >= WAITLIST_LOOKS_PER_GROUP_MAX {
                // The next group goes on from the front — asked for at once only if this
                // match made offers (they leave the list, so the next one gets further); one
                // stopped by entries its accounts' limits hold back waits for seats to come
                // back or a join, or the writer would run empty groups for ever.
                self.waitlist_dirty = offers > 0;
                break;
            }
            looks += 1;
            let class = &classes[i];
            let next_in_class = |engine: &Self| {
                engine
                    .waitlist_classes
                    .get(class)
                    .and_then(|seqs| seqs.range((Bound::Excluded(seq), Bound::Unbounded)).next())
                    .map(|next| Reverse((*next, i)))
            };
            let Some(entry) = self.waitlist.get(&seq).cloned() else {
                heads.extend(next_in_class(self));
                continue;
            };
            if dead_together
                .iter()
                .any(|&dead| class.passed_over_with(&classes[dead]))
            {
                continue;
            }
            let section = match &entry.section {
                Some(section) => match self.free.rank_of(section) {
                    Some(rank) => Some(rank),
                    None => continue,
                },
                None => None,
            };
            if self.free.count(section, entry.max_price_minor) < entry.quantity as usize {
                // Not enough free seats for anyone of the class: passed over whole.
                continue;
            }
            let usage = self.usage(&entry.account_id, now);
            if usage.saturating_add(entry.quantity) > self.rules.max_tickets_per_account {
                // This account only: the next entry of the class may be satisfied.
                heads.extend(next_in_class(self));
                continue;
            }
            let shape = if entry.together {
                HoldShape::BestAvailable {
                    quantity: entry.quantity,
                    section: entry.section.clone(),
                    max_price_minor: entry.max_price_minor,
                    // A waiting party asked for seats together: never split it.
                    together: Together::Required,
                }
            } else {
                match self
                    .free
                    .first(section, entry.max_price_minor, entry.quantity as usize)
                {
                    Some(seat_ids) => HoldShape::Seats { seat_ids },
                    None => continue,
                }
            };
            match self.offer(&entry, shape, ttl, effects) {
                Some(HoldOutcome::Held(_)) => {
                    offers += 1;
                    heads.extend(next_in_class(self));
                }
                // This entry only (its account's limit, or its offer's key already taken).
                Some(
                    HoldOutcome::PurchaseLimit { .. }
                    | HoldOutcome::KeyReusedWithOtherRequest
                    | HoldOutcome::AccessCodeRequired { .. }
                    | HoldOutcome::Replayed
                    | HoldOutcome::ReplayOfEarlierInBatch { .. },
                ) => {
                    heads.extend(next_in_class(self));
                }
                // No seats for this class (or a shape the event refuses): passed over whole.
                Some(
                    HoldOutcome::SeatsUnavailable { .. }
                    | HoldOutcome::SoldOut { .. }
                    | HoldOutcome::SaleNotOpen { .. }
                    | HoldOutcome::EventCancelled
                    | HoldOutcome::PhaseEnded { .. }
                    | HoldOutcome::OutsidePhase { .. }
                    | HoldOutcome::CompanionSeatAlone { .. }
                    | HoldOutcome::SeatKeptAccessible { .. }
                    | HoldOutcome::Invalid { .. },
                )
                | None => {
                    if class.together {
                        dead_together.push(i);
                    }
                }
            }
        }
    }

    /// Asks the hold rules for the entry's offer (a hold of its account with the offer's
    /// TTL) and, when granted, makes the entry offered.
    fn offer(
        &mut self,
        entry: &WaitEntry,
        shape: HoldShape,
        ttl_s: u32,
        effects: &mut Effects,
    ) -> Option<HoldOutcome> {
        let key = format!("waitlist:{}", entry.waitlist_id);
        let request = HoldRequest {
            account_id: entry.account_id.clone(),
            idempotency_key: key.clone(),
            request_digest: String::new(),
            new_hold_id: entry.offer_hold_id.clone(),
            shape,
            phase_id: None,
            ticket_types: Default::default(),
            accessible: false,
        };
        // The offer is a hold with the offer's TTL, decided by the hold rules; it is not a
        // command of the group, so it is the offer's effect, not a new hold's.
        let hold_ttl_s = std::mem::replace(&mut self.rules.hold_ttl_s, ttl_s);
        let outcome = self.decide_holds(std::slice::from_ref(&request), 0);
        self.rules.hold_ttl_s = hold_ttl_s;
        self.state
            .prior_digests
            .remove(&(entry.account_id.clone(), key));
        let outcome = outcome.into_iter().next()?;
        let HoldOutcome::Held(hold) = &outcome else {
            return Some(outcome);
        };
        self.unlist(entry.seq);
        self.offered_by_account.insert(
            entry.account_id.clone(),
            (entry.waitlist_id.clone(), hold.hold_id.clone()),
        );
        self.offer_holds.insert(hold.hold_id.clone());
        effects.push(Effect::WaitlistOffered(WaitlistOffer {
            waitlist_id: entry.waitlist_id.clone(),
            hold: hold.clone(),
        }));
        Some(outcome)
    }
}
