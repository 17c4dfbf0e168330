//! The simulation's own account of who owns which seat, built only from committed effects
//! and checked against every one of them: the check that catches a double sale even when the
//! engine's own invariants agree with its (wrong) state.
//!
//! Each seat has at most one owner (a hold number). A seat taken while its owner still counts
//! (`HELD` or `PAYMENT_PENDING` before its deadline, or `CONFIRMED`) is a double grant. Every
//! status change of a hold is checked against the condition the real store writes it under
//! (a release of a live `HELD` hold, an expiry of a `HELD` hold past its deadline, a sale of a
//! live `PAYMENT_PENDING` hold of exactly the seats it owns, ...). A waiting-list offer is a
//! hold like any (its seats checked the same way), made only for an entry still waiting, of
//! the entry's own account and exactly its quantity (the store's and `boxoffice check`'s I10).
//! At the end, [`Ledger::finish`] checks that the seats sold are exactly the seats of the
//! confirmed holds, none sold twice.

use std::collections::HashMap;

use boxoffice_domain::decide::NewHold;
use boxoffice_domain::engine::{Effects, HoldReleased};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};

use crate::config::SeatLayout;
use crate::report::ViolationKind;
use crate::store::{SimStore, seat_ids};

/// A finding of the ledger: what kind and what exactly.
pub(crate) type Finding = (ViolationKind, String);

#[derive(Debug)]
struct LedgerHold {
    hold_id: String,
    status: HoldStatus,
    /// Milliseconds from the simulation's epoch.
    expires_at_ms: i64,
    seats: Vec<u32>,
}

impl LedgerHold {
    /// Whether the hold still claims its seats at `now_ms`.
    fn counts(&self, now_ms: i64) -> bool {
        match self.status {
            HoldStatus::Confirmed => true,
            HoldStatus::Held | HoldStatus::PaymentPending => self.expires_at_ms > now_ms,
            HoldStatus::Released | HoldStatus::Expired => false,
        }
    }
}

/// How a hold ends, each under its own condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// By its owner: only a `HELD` hold before its deadline.
    Released,
    /// By the engine's timer: only a `HELD` hold past its deadline.
    Expired,
    /// By a payment verdict: only a `PAYMENT_PENDING` hold.
    CheckoutCancelled,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Expired => "expired",
            Self::CheckoutCancelled => "cancelled at checkout",
        }
    }
}

/// A waiting-list entry as the ledger follows it: its account, quantity, and whether it still
/// waits (not offered, not left).
#[derive(Debug)]
struct LedgerEntry {
    account_id: String,
    quantity: u32,
    waiting: bool,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Ledger {
    seat_numbers: HashMap<String, u32>,
    seat_names: Vec<String>,
    /// The hold number owning each seat.
    owner: Vec<Option<u32>>,
    holds: Vec<LedgerHold>,
    hold_numbers: HashMap<String, u32>,
    entries: HashMap<String, LedgerEntry>,
    /// Effects checked (seats taken or freed, holds changed).
    pub(crate) checks: u64,
}

impl Ledger {
    pub(crate) fn new(layout: &SeatLayout) -> Self {
        let seat_names: Vec<String> = seat_ids(layout).map(|(id, _)| id).collect();
        let seat_numbers = seat_names
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i as u32))
            .collect();
        Self {
            owner: vec![None; seat_names.len()],
            seat_numbers,
            seat_names,
            holds: Vec::new(),
            hold_numbers: HashMap::new(),
            entries: HashMap::new(),
            checks: 0,
        }
    }

    /// Checks and records one committed group whose clock read `now_ms`, in the order the
    /// store writes it.
    pub(crate) fn apply(&mut self, effects: &Effects, now_ms: i64, findings: &mut Vec<Finding>) {
        for released in effects.holds_released() {
            self.end(released, Ending::Released, now_ms, findings);
        }
        for expired in effects.holds_expired() {
            self.end(expired, Ending::Expired, now_ms, findings);
        }
        for cancelled in effects.checkouts_cancelled() {
            self.end(&cancelled.hold, Ending::CheckoutCancelled, now_ms, findings);
        }
        for confirmed in effects.holds_confirmed() {
            self.checks += 1;
            let Some(h) = self.hold_number(&confirmed.hold_id, findings) else {
                continue;
            };
            let hold = &self.holds[h as usize];
            if hold.status != HoldStatus::PaymentPending || hold.expires_at_ms <= now_ms {
                findings.push((
                    ViolationKind::StoreCondition,
                    format!(
                        "hold {} sold while {} until {} ms (now {now_ms} ms)",
                        hold.hold_id,
                        hold.status.as_str(),
                        hold.expires_at_ms
                    ),
                ));
            }
            let mut sold = Vec::with_capacity(confirmed.seat_ids.len());
            for seat_id in &confirmed.seat_ids {
                let Some(seat) = self.seat_number(seat_id, findings) else {
                    continue;
                };
                if self.owner[seat as usize] != Some(h) {
                    findings.push((
                        ViolationKind::DoubleGrant,
                        format!(
                            "hold {} sold seat {seat_id} while {}",
                            self.holds[h as usize].hold_id,
                            self.owned_by(seat)
                        ),
                    ));
                }
                sold.push(seat);
            }
            let hold = &mut self.holds[h as usize];
            let mut held = hold.seats.clone();
            held.sort_unstable();
            sold.sort_unstable();
            if held != sold {
                findings.push((
                    ViolationKind::StoreCondition,
                    format!(
                        "hold {} sold {} of its {} seats",
                        hold.hold_id,
                        sold.len(),
                        held.len()
                    ),
                ));
            }
            hold.status = HoldStatus::Confirmed;
        }
        for created in effects.holds_created() {
            self.new_hold(&created.hold, findings);
        }
        self.waitlist(effects, findings);
        for taken in effects.seats_taken() {
            self.checks += 1;
            let (Some(h), Some(seat)) = (
                self.hold_number(taken.hold_id, findings),
                self.seat_number(taken.seat_id, findings),
            ) else {
                continue;
            };
            if let Some(previous) = self.owner[seat as usize]
                && previous != h
                && self.holds[previous as usize].counts(now_ms)
            {
                findings.push((
                    ViolationKind::DoubleGrant,
                    format!(
                        "seat {} granted to hold {} while {}",
                        taken.seat_id,
                        taken.hold_id,
                        self.owned_by(seat)
                    ),
                ));
            }
            self.owner[seat as usize] = Some(h);
        }
        for started in effects.checkouts_started() {
            self.checks += 1;
            let Some(h) = self.hold_number(&started.hold_id, findings) else {
                continue;
            };
            let hold = &self.holds[h as usize];
            if hold.status != HoldStatus::Held || hold.expires_at_ms <= now_ms {
                findings.push((
                    ViolationKind::StoreCondition,
                    format!(
                        "checkout of hold {} started while {} until {} ms (now {now_ms} ms)",
                        hold.hold_id,
                        hold.status.as_str(),
                        hold.expires_at_ms
                    ),
                ));
            }
            for seat_id in &started.seat_ids {
                if let Some(seat) = self.seat_number(seat_id, findings)
                    && self.owner[seat as usize] != Some(h)
                {
                    findings.push((
                        ViolationKind::StoreCondition,
                        format!(
                            "checkout of hold {} extends seat {seat_id} while {}",
                            started.hold_id,
                            self.owned_by(seat)
                        ),
                    ));
                }
            }
            let hold = &mut self.holds[h as usize];
            hold.status = HoldStatus::PaymentPending;
            hold.expires_at_ms = crate::world::epoch_ms(started.expires_at);
        }
        if effects.orders_compensated().next().is_some() || effects.exchanges().next().is_some() {
            findings.push((
                ViolationKind::Unexpected,
                "the engine wrote a compensation or an exchange nobody asked for".to_owned(),
            ));
        }
    }

    /// A hold granted (by a command or as an offer): its seats are checked as they are taken.
    fn new_hold(&mut self, created: &NewHold, findings: &mut Vec<Finding>) {
        self.checks += 1;
        if self.hold_numbers.contains_key(&created.hold_id) {
            findings.push((
                ViolationKind::StoreCondition,
                format!("hold {} created twice", created.hold_id),
            ));
            return;
        }
        let seats = created
            .seats
            .iter()
            .filter_map(|(seat_id, _)| self.seat_numbers.get(seat_id).copied())
            .collect();
        let number = self.holds.len() as u32;
        self.hold_numbers.insert(created.hold_id.clone(), number);
        self.holds.push(LedgerHold {
            hold_id: created.hold_id.clone(),
            status: HoldStatus::Held,
            expires_at_ms: crate::world::epoch_ms(created.expires_at),
            seats,
        });
    }

    /// The waiting list's changes, in the store's order: entries joined, left, offered.
    fn waitlist(&mut self, effects: &Effects, findings: &mut Vec<Finding>) {
        for entry in effects.waitlist_joined() {
            self.checks += 1;
            let joined = LedgerEntry {
                account_id: entry.account_id.clone(),
                quantity: entry.quantity,
                waiting: true,
            };
            if self
                .entries
                .insert(entry.waitlist_id.clone(), joined)
                .is_some()
            {
                findings.push((
                    ViolationKind::StoreCondition,
                    format!("waiting-list entry {} joined twice", entry.waitlist_id),
                ));
            }
        }
        for waitlist_id in effects.waitlist_left() {
            self.checks += 1;
            match self.entries.get_mut(waitlist_id) {
                Some(entry) if entry.waiting => entry.waiting = false,
                _ => findings.push((
                    ViolationKind::StoreCondition,
                    format!("waiting-list entry {waitlist_id} left while not waiting"),
                )),
            }
        }
        for offer in effects.waitlist_offers() {
            self.checks += 1;
            let hold = &offer.hold;
            match self.entries.get_mut(&offer.waitlist_id) {
                Some(entry)
                    if entry.waiting
                        && entry.account_id == hold.account_id
                        && entry.quantity as usize == hold.seats.len() =>
                {
                    entry.waiting = false;
                }
                entry => findings.push((
                    ViolationKind::StoreCondition,
                    format!(
                        "offer {} of {} seats to {} for waiting-list entry {}, {}",
                        hold.hold_id,
                        hold.seats.len(),
                        hold.account_id,
                        offer.waitlist_id,
                        match entry {
                            None => "which never joined".to_owned(),
                            Some(entry) => format!(
                                "{} of {} for {} seats",
                                if entry.waiting {
                                    "waiting"
                                } else {
                                    "not waiting"
                                },
                                entry.account_id,
                                entry.quantity
                            ),
                        }
                    ),
                )),
            }
            self.new_hold(hold, findings);
        }
    }

    /// A hold ends as `status`: released (live `HELD` only), expired (`HELD` past its
    /// deadline only) or its checkout cancelled (`PAYMENT_PENDING` only); the seats named are
    /// freed and must be its own, and none of its own may stay behind.
    fn end(
        &mut self,
        ended: &HoldReleased,
        ending: Ending,
        now_ms: i64,
        findings: &mut Vec<Finding>,
    ) {
        self.checks += 1;
        let Some(h) = self.hold_number(&ended.hold_id, findings) else {
            return;
        };
        let hold = &self.holds[h as usize];
        let allowed = match ending {
            Ending::Released => hold.status == HoldStatus::Held && hold.expires_at_ms > now_ms,
            Ending::Expired => hold.status == HoldStatus::Held && hold.expires_at_ms <= now_ms,
            Ending::CheckoutCancelled => hold.status == HoldStatus::PaymentPending,
        };
        let status = match ending {
            Ending::Released | Ending::CheckoutCancelled => HoldStatus::Released,
            Ending::Expired => HoldStatus::Expired,
        };
        if !allowed {
            findings.push((
                ViolationKind::StoreCondition,
                format!(
                    "hold {} {} while {} until {} ms (now {now_ms} ms)",
                    hold.hold_id,
                    ending.as_str(),
                    hold.status.as_str(),
                    hold.expires_at_ms
                ),
            ));
        }
        for seat_id in &ended.seat_ids {
            let Some(seat) = self.seat_number(seat_id, findings) else {
                continue;
            };
            if self.owner[seat as usize] == Some(h) {
                self.owner[seat as usize] = None;
            } else {
                findings.push((
                    ViolationKind::StoreCondition,
                    format!(
                        "hold {} freed seat {seat_id} while {}",
                        ended.hold_id,
                        self.owned_by(seat)
                    ),
                ));
            }
        }
        // An expiry frees whatever still points to the hold (the store frees by hold id).
        let hold = &self.holds[h as usize];
        for &seat in &hold.seats {
            if self.owner[seat as usize] == Some(h) {
                if ending != Ending::Expired {
                    findings.push((
                        ViolationKind::StoreCondition,
                        format!(
                            "hold {} {} but left seat {} held",
                            hold.hold_id,
                            ending.as_str(),
                            self.seat_names[seat as usize]
                        ),
                    ));
                }
                self.owner[seat as usize] = None;
            }
        }
        self.holds[h as usize].status = status;
    }

    /// The end-of-run check: every seat of a confirmed hold is owned by it and sold in the
    /// store to it, no seat is in two confirmed holds, every sold seat belongs to a confirmed
    /// hold, and no hold is still live.
    pub(crate) fn finish(&self, store: &SimStore, findings: &mut Vec<Finding>) {
        let mut sold_by: Vec<Option<u32>> = vec![None; self.owner.len()];
        for (h, hold) in self.holds.iter().enumerate() {
            let h = h as u32;
            match hold.status {
                HoldStatus::Confirmed => {}
                HoldStatus::Held | HoldStatus::PaymentPending => {
                    findings.push((
                        ViolationKind::Unfinished,
                        format!(
                            "hold {} is still {} at the end",
                            hold.hold_id,
                            hold.status.as_str()
                        ),
                    ));
                    continue;
                }
                HoldStatus::Released | HoldStatus::Expired => continue,
            }
            for &seat in &hold.seats {
                let name = &self.seat_names[seat as usize];
                if let Some(other) = sold_by[seat as usize] {
                    findings.push((
                        ViolationKind::SoldTwice,
                        format!(
                            "seat {name} sold to hold {} and to hold {}",
                            self.holds[other as usize].hold_id, hold.hold_id
                        ),
                    ));
                }
                sold_by[seat as usize] = Some(h);
                if self.owner[seat as usize] != Some(h) {
                    findings.push((
                        ViolationKind::SoldTwice,
                        format!(
                            "seat {name} of confirmed hold {} is not its own: {}",
                            hold.hold_id,
                            self.owned_by(seat)
                        ),
                    ));
                }
            }
        }
        for (seat, row) in store.seats.iter().enumerate() {
            let ledger_sold = sold_by[seat].is_some();
            let store_sold = row.status == SeatStatus::Sold;
            if ledger_sold != store_sold {
                findings.push((
                    ViolationKind::SoldTwice,
                    format!(
                        "seat {} is {} in the store but {} by the ledger",
                        row.seat_id,
                        row.status.as_str(),
                        if ledger_sold { "sold" } else { "not sold" }
                    ),
                ));
            }
        }
    }

    /// Seats sold to confirmed holds, by the ledger.
    pub(crate) fn seats_sold(&self) -> u64 {
        self.holds
            .iter()
            .filter(|hold| hold.status == HoldStatus::Confirmed)
            .map(|hold| hold.seats.len() as u64)
            .sum()
    }

    fn owned_by(&self, seat: u32) -> String {
        match self.owner[seat as usize] {
            None => "nobody had it".to_owned(),
            Some(h) => {
                let hold = &self.holds[h as usize];
                match hold.status {
                    HoldStatus::Confirmed => format!("hold {} had bought it", hold.hold_id),
                    _ => format!(
                        "hold {} had it ({} until {} ms)",
                        hold.hold_id,
                        hold.status.as_str(),
                        hold.expires_at_ms
                    ),
                }
            }
        }
    }

    fn hold_number(&self, hold_id: &str, findings: &mut Vec<Finding>) -> Option<u32> {
        let number = self.hold_numbers.get(hold_id).copied();
        if number.is_none() {
            findings.push((
                ViolationKind::StoreCondition,
                format!("effects name hold {hold_id}, which was never created"),
            ));
        }
        number
    }

    fn seat_number(&self, seat_id: &str, findings: &mut Vec<Finding>) -> Option<u32> {
        let number = self.seat_numbers.get(seat_id).copied();
        if number.is_none() {
            findings.push((
                ViolationKind::StoreCondition,
                format!("effects name seat {seat_id}, which the house does not have"),
            ));
        }
        number
    }
}

#[cfg(test)]
mod tests {
    use boxoffice_domain::engine::{Effect, HoldCreated, WaitEntry, WaitlistOffer};
    use time::Duration;

    use super::*;
    use crate::world::{EPOCH, epoch_ms};

    fn ledger() -> Ledger {
        Ledger::new(&SeatLayout {
            sections: 1,
            rows_per_section: 1,
            seats_per_row: 4,
        })
    }

    /// A hold `hold_id` of `acct-<hold>` of `seats` until `until_s`.
    fn new_hold(hold_id: &str, seats: &[&str], until_s: i64) -> NewHold {
        NewHold {
            hold_id: hold_id.to_owned(),
            account_id: format!("acct-{hold_id}"),
            seats: seats.iter().map(|s| ((*s).to_owned(), 100)).collect(),
            tier_id: None,
            quantity: seats.len() as u32,
            total_minor: 100 * seats.len() as i64,
            expires_at: EPOCH + Duration::seconds(until_s),
            split: false,
            phase_id: None,
            price: Default::default(),
        }
    }

    /// Effects of a group in which `hold_id` takes `seats` until `until_s`.
    fn taking(hold_id: &str, seats: &[&str], until_s: i64) -> Effects {
        Effects::from(vec![Effect::HoldCreated(HoldCreated {
            index: 0,
            key: format!("k-{hold_id}"),
            hold: new_hold(hold_id, seats, until_s),
        })])
    }

    /// Effects of a group in which `account_id` joins the waiting list for `quantity` seats.
    fn joining(waitlist_id: &str, account_id: &str, quantity: u32) -> Effects {
        Effects::from(vec![Effect::WaitlistJoined(WaitEntry {
            waitlist_id: waitlist_id.to_owned(),
            account_id: account_id.to_owned(),
            seq: 1,
            quantity,
            section: None,
            max_price_minor: None,
            together: false,
            offer_hold_id: format!("offer-{waitlist_id}"),
            offered: false,
            idempotency_key: "w".to_owned(),
            request_digest: String::new(),
        })])
    }

    /// Effects of a group that offers entry `waitlist_id` hold `hold_id` (of `acct-<hold>`).
    fn offering(waitlist_id: &str, hold_id: &str, seats: &[&str], until_s: i64) -> Effects {
        Effects::from(vec![Effect::WaitlistOffered(WaitlistOffer {
            waitlist_id: waitlist_id.to_owned(),
            hold: new_hold(hold_id, seats, until_s),
        })])
    }

    fn released(hold_id: &str, seats: &[&str]) -> Effects {
        Effects::from(vec![Effect::HoldReleased(HoldReleased {
            hold_id: hold_id.to_owned(),
            account_id: "fan".to_owned(),
            seat_ids: seats.iter().map(|s| (*s).to_owned()).collect(),
            tier: None,
        })])
    }

    fn at_s(s: i64) -> i64 {
        epoch_ms(EPOCH + Duration::seconds(s))
    }

    /// Groups of effects, each with its clock in seconds.
    type Groups = Vec<(Effects, i64)>;

    /// Applies `groups` in order; the kinds found.
    fn findings(groups: &[(Effects, i64)]) -> Vec<ViolationKind> {
        let mut ledger = ledger();
        let mut found = Vec::new();
        for (effects, now_s) in groups {
            ledger.apply(effects, at_s(*now_s), &mut found);
        }
        found.into_iter().map(|(kind, _)| kind).collect()
    }

    #[test]
    fn each_case_finds_what_it_should() {
        let cases: Vec<(&str, Groups, Vec<ViolationKind>)> = vec![
            (
                "two holds, two seats",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (taking("h2", &["S001-1-2"], 300), 1),
                ],
                vec![],
            ),
            (
                "a live hold's seat granted again",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (taking("h2", &["S001-1-1"], 301), 1),
                ],
                vec![ViolationKind::DoubleGrant],
            ),
            (
                "a lapsed hold's seat granted again",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (taking("h2", &["S001-1-1"], 600), 300),
                ],
                vec![],
            ),
            (
                "a released seat granted again",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (released("h1", &["S001-1-1"]), 10),
                    (taking("h2", &["S001-1-1"], 310), 10),
                ],
                vec![],
            ),
            (
                "a release of a seat the hold does not have",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (released("h1", &["S001-1-2"]), 10),
                ],
                vec![ViolationKind::StoreCondition, ViolationKind::StoreCondition],
            ),
            (
                "a release after the deadline",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (released("h1", &["S001-1-1"]), 300),
                ],
                vec![ViolationKind::StoreCondition],
            ),
            (
                "an offer to a waiting entry, then its seat lapses and is offered again",
                vec![
                    (joining("w1", "acct-o1", 1), 0),
                    (joining("w2", "acct-o2", 1), 0),
                    (offering("w1", "o1", &["S001-1-1"], 300), 1),
                    (offering("w2", "o2", &["S001-1-1"], 600), 300),
                ],
                vec![],
            ),
            (
                "a second offer to one entry",
                vec![
                    (joining("w1", "acct-o1", 1), 0),
                    (offering("w1", "o1", &["S001-1-1"], 300), 1),
                    (offering("w1", "o1b", &["S001-1-2"], 300), 2),
                ],
                vec![ViolationKind::StoreCondition],
            ),
            (
                "an offer to another account, or of fewer seats than the entry asked",
                vec![
                    (joining("w1", "acct-x", 1), 0),
                    (joining("w2", "acct-o2", 2), 0),
                    (offering("w1", "o1", &["S001-1-1"], 300), 1),
                    (offering("w2", "o2", &["S001-1-2"], 300), 1),
                ],
                vec![ViolationKind::StoreCondition, ViolationKind::StoreCondition],
            ),
            (
                "an offer of a live hold's seat",
                vec![
                    (taking("h1", &["S001-1-1"], 300), 0),
                    (joining("w1", "acct-o1", 1), 0),
                    (offering("w1", "o1", &["S001-1-1"], 300), 1),
                ],
                vec![ViolationKind::DoubleGrant],
            ),
        ];
        for (name, groups, expected) in cases {
            assert_eq!(findings(&groups), expected, "{name}");
        }
    }
}
