//! Active shoppers of one event: who was admitted past the queue, for which session, until
//! when, and the shopper slots they take while they shop.
//!
//! An admission is the right to shop until its TTL; a **slot** is what the cap counts, and a
//! slot follows what the fan is doing, not the admission (DESIGN.md, "The end of the sale"):
//!
//! - [`SlotState::Idle`]: admitted (or back for another try), no hold yet. An idle slot is
//!   given back when its hold window passes ([`ActiveShoppers::expire`]); a refused hold
//!   ([`Shop::Refused`]) cuts the window to [`REFUSED_GRACE_MS`]: a fan who tries again at
//!   once keeps its slot, one who found nothing and walked away stops counting within
//!   seconds, not when the admission's TTL passes (and at once if it leaves the queue).
//! - [`SlotState::Holding`]: a hold was granted ([`Shop::Held`]).
//! - [`SlotState::Paying`]: a checkout started ([`Shop::Paying`]).
//!
//! The slot comes back when a hold ends without a sale ([`Shop::Ended`]: released, expired,
//! the card declined); the admission stays: within its TTL the fan may try again, taking a
//! slot if one is free ([`ActiveShoppers::admit`] answers [`AdmitOutcome::AlreadyAdmitted`]
//! with a new idle slot), else it waits at the head of the queue ([`AdmitOutcome::Full`]).
//! When the trip is over ([`ActiveShoppers::release_admitted_by`]: order confirmed, the fan
//! leaves) the admission ends with its slot.
//!
//! [`ActiveShoppers::active`] (slots taken) never exceeds `max_active_shoppers`. `room::Room`
//! drives it; a Redis backend mirrors it in `boxoffice-waitroom-state`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Largest cap an operator may set; bounds memory of the active set.
pub const ACTIVE_SHOPPERS_MAX: u64 = 1_000_000;

/// How long an admitted fan's slot stays idle before it is given back when the event sets
/// nothing: a minute to pick seats after admission or after a refusal (milliseconds).
pub const HOLD_WINDOW_DEFAULT_MS: i64 = 60_000;

/// How long an idle slot stays after a refused hold, at most (milliseconds): time to try
/// again (another section, fewer seats) without losing the slot to the next fan.
pub const REFUSED_GRACE_MS: i64 = 10_000;

/// What the fan in a slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SlotState {
    /// Admitted, no hold yet: given back when the hold window passes or a hold is refused.
    Idle,
    /// A hold was granted; given back when the trip ends.
    Holding,
    /// A checkout started; given back when the trip ends.
    Paying,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Holding => "holding",
            Self::Paying => "paying",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "idle" => Some(Self::Idle),
            "holding" => Some(Self::Holding),
            "paying" => Some(Self::Paying),
            _ => None,
        }
    }
}

/// A slot an admitted account takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Slot {
    pub state: SlotState,
    /// When this slot was taken: a message about an end before it does not free it.
    pub taken_at_ms: i64,
    /// While idle: when the slot is given back if no hold is granted.
    pub idle_until_ms: i64,
}

/// What a fan's shopping did to its slot (`room::Op::Shop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Shop {
    /// A hold was granted: the slot is `Holding` (taken again if it had been given back and
    /// one is free).
    Held,
    /// A checkout started: the slot is `Paying` (taken again likewise).
    Paying,
    /// A hold was refused (no seats): an idle slot's window is cut to [`REFUSED_GRACE_MS`]
    /// from now; a fan holding or paying keeps its slot.
    Refused,
    /// A hold ended without a sale (released, expired, the payment declined): the slot is
    /// given back at once, whatever its state; the admission stays for another try.
    Ended,
}

impl Shop {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Paying => "paying",
            Self::Refused => "refused",
            Self::Ended => "ended",
        }
    }
}

/// One admitted account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// The one session this admission is bound to (the admission token carries it).
    pub session_id: String,
    pub admitted_at_ms: i64,
    pub expires_at_ms: i64,
    /// The slot it takes now, if any (an admission outlives its slots: see the module docs).
    #[serde(default)]
    pub slot: Option<Slot>,
}

/// What [`ActiveShoppers::admit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitOutcome {
    /// A new admission took a slot.
    Admitted(Admission),
    /// The account already holds a live admission; it is returned (same session), with a
    /// slot: the one it had, or a new idle one if it had none and one was free. The caller
    /// compares `session_id` to refuse another session.
    AlreadyAdmitted(Admission),
    /// Every slot is taken; try again after a release or expiry.
    Full {
        active: u64,
        max_active_shoppers: u64,
    },
}

/// Slots taken, by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotCounts {
    pub idle: u64,
    pub holding: u64,
    pub paying: u64,
}

impl SlotCounts {
    pub fn total(&self) -> u64 {
        self.idle + self.holding + self.paying
    }

    fn add(&mut self, state: SlotState, delta: i64) {
        let count = match state {
            SlotState::Idle => &mut self.idle,
            SlotState::Holding => &mut self.holding,
            SlotState::Paying => &mut self.paying,
        };
        *count = count
            .checked_add_signed(delta)
            .expect("slot count below zero");
    }
}

/// The active shoppers of one event. See the module docs.
#[derive(Debug)]
pub struct ActiveShoppers {
    max_active_shoppers: u64,
    /// Live admissions (and expired ones not swept yet), each with its slot if it takes one.
    /// Bounded by the admission rate times the TTL; scanned once per tick by `expire`.
    admissions: HashMap<Box<str>, Admission>,
    /// Slots taken, by state (kept with every change; `invariants` recounts).
    slots: SlotCounts,
}

impl ActiveShoppers {
    /// `max_active_shoppers` is clamped to [`ACTIVE_SHOPPERS_MAX`].
    pub fn new(max_active_shoppers: u64) -> Self {
        Self {
            max_active_shoppers: max_active_shoppers.min(ACTIVE_SHOPPERS_MAX),
            admissions: HashMap::new(),
            slots: SlotCounts::default(),
        }
    }

    pub fn max_active_shoppers(&self) -> u64 {
        self.max_active_shoppers
    }

    /// Changes the cap. Lowering it below `active()` evicts no one: new admissions wait until
    /// enough shoppers leave.
    pub fn set_max_active_shoppers(&mut self, max_active_shoppers: u64) {
        self.max_active_shoppers = max_active_shoppers.min(ACTIVE_SHOPPERS_MAX);
    }

    /// Slots taken (expired ones not yet swept included): what the cap counts.
    pub fn active(&self) -> u64 {
        self.slots.total()
    }

    /// Slots taken, by state.
    pub fn slots(&self) -> SlotCounts {
        self.slots
    }

    /// Admissions kept (live, or expired and not swept yet), with or without a slot.
    pub fn admissions(&self) -> u64 {
        self.admissions.len() as u64
    }

    /// Slots an admission could take now.
    pub fn free_slots(&self) -> u64 {
        self.max_active_shoppers.saturating_sub(self.active())
    }

    /// The live admission of `account_id` at `now_ms`, if any; its `slot` is `None` when it
    /// takes none at `now_ms` (an idle slot past its window counts as given back).
    pub fn get(&self, account_id: &str, now_ms: i64) -> Option<Admission> {
        let admission = self
            .admissions
            .get(account_id)
            .filter(|admission| now_ms < admission.expires_at_ms)?;
        let mut admission = admission.clone();
        admission.slot = admission.slot.filter(|slot| slot_live(slot, now_ms));
        Some(admission)
    }

    /// Admits `account_id` for `session_id` until `now_ms + ttl_ms` with an idle slot until
    /// `now_ms + hold_window_ms`, if a slot is free. An account with a live admission keeps it
    /// (and its slot); without a slot it takes one if free.
    pub fn admit(
        &mut self,
        account_id: &str,
        session_id: &str,
        now_ms: i64,
        ttl_ms: i64,
        hold_window_ms: i64,
    ) -> AdmitOutcome {
        if let Some(existing) = self.admissions.get(account_id) {
            if now_ms < existing.expires_at_ms {
                if existing.slot.is_some_and(|slot| slot_live(&slot, now_ms)) {
                    return AdmitOutcome::AlreadyAdmitted(existing.clone());
                }
                self.set_slot(account_id, None);
                if !self.room_for_one(now_ms) {
                    return self.full();
                }
                let slot = idle_slot(now_ms, hold_window_ms);
                self.set_slot(account_id, Some(slot));
                return AdmitOutcome::AlreadyAdmitted(self.admissions[account_id].clone());
            }
            // Expired but not swept yet: its slot is free again.
            self.forget(account_id);
        }
        if !self.room_for_one(now_ms) {
            return self.full();
        }
        let admission = Admission {
            session_id: session_id.to_owned(),
            admitted_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
            slot: None,
        };
        self.admissions.insert(account_id.into(), admission);
        self.set_slot(account_id, Some(idle_slot(now_ms, hold_window_ms)));
        AdmitOutcome::Admitted(self.admissions[account_id].clone())
    }

    /// What the account's shopping did at `at_ms` (see [`Shop`]). Returns whether its slot
    /// changed. A live admission without a slot takes one for a hold or a checkout only if
    /// one is free (the cap is never passed: such a fan shops on without being counted).
    pub fn shop(&mut self, account_id: &str, shop: Shop, at_ms: i64) -> bool {
        let Some(admission) = self.admissions.get(account_id) else {
            return false;
        };
        if at_ms >= admission.expires_at_ms {
            return false;
        }
        let slot = admission.slot.filter(|slot| slot_live(slot, at_ms));
        let state = match shop {
            Shop::Held => SlotState::Holding,
            Shop::Paying => SlotState::Paying,
            Shop::Ended => {
                return match admission.slot {
                    Some(slot) if slot.taken_at_ms <= at_ms => {
                        self.set_slot(account_id, None);
                        true
                    }
                    _ => false,
                };
            }
            Shop::Refused => {
                let until_ms = at_ms.saturating_add(REFUSED_GRACE_MS);
                return match slot {
                    Some(slot)
                        if slot.state == SlotState::Idle
                            && slot.taken_at_ms <= at_ms
                            && until_ms < slot.idle_until_ms =>
                    {
                        let cut = Slot {
                            idle_until_ms: until_ms,
                            ..slot
                        };
                        self.set_slot(account_id, Some(cut));
                        true
                    }
                    _ => false,
                };
            }
        };
        match slot {
            Some(slot) if slot.taken_at_ms > at_ms => false,
            Some(slot) if slot.state == state => false,
            // Paying is never taken back to holding (a late message about the hold).
            Some(slot) if slot.state == SlotState::Paying => false,
            Some(slot) => {
                self.set_slot(account_id, Some(Slot { state, ..slot }));
                true
            }
            None => {
                self.set_slot(account_id, None);
                if !self.room_for_one(at_ms) {
                    return false;
                }
                let slot = Slot {
                    state,
                    taken_at_ms: at_ms,
                    idle_until_ms: at_ms,
                };
                self.set_slot(account_id, Some(slot));
                true
            }
        }
    }

    /// Gives the account's slot back at once (its admission stays). Returns whether it held
    /// one.
    pub fn release(&mut self, account_id: &str) -> bool {
        let had = self
            .admissions
            .get(account_id)
            .is_some_and(|admission| admission.slot.is_some());
        self.set_slot(account_id, None);
        had
    }

    /// The trip is over (order confirmed, the fan left): ends the admission and its slot,
    /// only if the admission began at or before `at_ms` (a late message about a trip that
    /// ended before the account was admitted again must not end the new admission). Returns
    /// whether an admission ended.
    pub fn release_admitted_by(&mut self, account_id: &str, at_ms: i64) -> bool {
        match self.admissions.get(account_id) {
            Some(admission) if admission.admitted_at_ms <= at_ms => {
                self.forget(account_id);
                true
            }
            _ => false,
        }
    }

    /// Forgets every admission whose TTL passed at `now_ms` (its slot with it) and gives back
    /// every idle slot whose hold window passed; returns the accounts whose slot came back.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let mut freed = Vec::new();
        let slots = &mut self.slots;
        self.admissions.retain(|account_id, admission| {
            let live = now_ms < admission.expires_at_ms;
            if let Some(slot) = admission.slot
                && (!live || !slot_live(&slot, now_ms))
            {
                slots.add(slot.state, -1);
                admission.slot = None;
                freed.push(account_id.to_string());
            }
            live
        });
        freed
    }

    /// Single-condition assertions; tests call this after every step.
    pub fn invariants(&self) {
        assert!(self.max_active_shoppers <= ACTIVE_SHOPPERS_MAX);
        let mut counted = SlotCounts::default();
        for admission in self.admissions.values() {
            assert!(admission.admitted_at_ms <= admission.expires_at_ms);
            if let Some(slot) = admission.slot {
                counted.add(slot.state, 1);
                assert!(slot.taken_at_ms >= admission.admitted_at_ms);
            }
        }
        assert_eq!(counted, self.slots);
    }

    /// Whether a slot is free at `now_ms`, sweeping what time ended before refusing.
    fn room_for_one(&mut self, now_ms: i64) -> bool {
        if self.active() >= self.max_active_shoppers {
            // Full only counts live slots: sweep the expired ones before refusing.
            self.expire(now_ms);
        }
        self.active() < self.max_active_shoppers
    }

    fn full(&self) -> AdmitOutcome {
        AdmitOutcome::Full {
            active: self.active(),
            max_active_shoppers: self.max_active_shoppers,
        }
    }

    /// Sets the account's slot, keeping the counts.
    fn set_slot(&mut self, account_id: &str, slot: Option<Slot>) {
        let Some(admission) = self.admissions.get_mut(account_id) else {
            return;
        };
        if let Some(old) = admission.slot {
            self.slots.add(old.state, -1);
        }
        if let Some(new) = slot {
            self.slots.add(new.state, 1);
        }
        admission.slot = slot;
    }

    /// Drops an admission and its slot.
    fn forget(&mut self, account_id: &str) {
        self.set_slot(account_id, None);
        self.admissions.remove(account_id);
    }
}

fn idle_slot(now_ms: i64, hold_window_ms: i64) -> Slot {
    Slot {
        state: SlotState::Idle,
        taken_at_ms: now_ms,
        idle_until_ms: now_ms.saturating_add(hold_window_ms),
    }
}

/// Whether a slot still counts at `now_ms`: an idle one until its hold window passes.
fn slot_live(slot: &Slot, now_ms: i64) -> bool {
    slot.state != SlotState::Idle || now_ms < slot.idle_until_ms
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    const TTL_MS: i64 = 1_000;
    /// Longer than the TTL: these tests are about the TTL unless they say otherwise.
    const WINDOW_MS: i64 = 10_000;

    fn admit(
        shoppers: &mut ActiveShoppers,
        account: &str,
        session: &str,
        now: i64,
    ) -> AdmitOutcome {
        shoppers.admit(account, session, now, TTL_MS, WINDOW_MS)
    }

    #[test]
    fn admits_up_to_the_cap_then_refuses() {
        let mut shoppers = ActiveShoppers::new(2);
        assert!(matches!(
            admit(&mut shoppers, "a", "s1", 0),
            AdmitOutcome::Admitted(_)
        ));
        assert!(matches!(
            admit(&mut shoppers, "b", "s2", 0),
            AdmitOutcome::Admitted(_)
        ));
        assert_eq!(
            admit(&mut shoppers, "c", "s3", 0),
            AdmitOutcome::Full {
                active: 2,
                max_active_shoppers: 2
            }
        );
        assert_eq!(shoppers.free_slots(), 0);
        shoppers.invariants();
    }

    #[test]
    fn admitting_again_takes_no_second_slot() {
        let mut shoppers = ActiveShoppers::new(5);
        let AdmitOutcome::Admitted(first) = admit(&mut shoppers, "a", "s1", 0) else {
            panic!("first admission refused");
        };
        assert_eq!(
            admit(&mut shoppers, "a", "s2", 10),
            AdmitOutcome::AlreadyAdmitted(first)
        );
        assert_eq!(shoppers.active(), 1);
    }

    #[test]
    fn release_gives_the_slot_back_at_once_and_keeps_the_admission() {
        let mut shoppers = ActiveShoppers::new(1);
        admit(&mut shoppers, "a", "s1", 0);
        assert!(shoppers.release("a"));
        assert!(!shoppers.release("a"));
        assert_eq!(shoppers.get("a", 1).map(|a| a.slot), Some(None));
        assert!(matches!(
            admit(&mut shoppers, "b", "s2", 1),
            AdmitOutcome::Admitted(_)
        ));
        // a's admission is live but every slot is taken: back to the head of the queue.
        assert!(matches!(
            admit(&mut shoppers, "a", "s9", 2),
            AdmitOutcome::Full { .. }
        ));
        shoppers.release("b");
        let AdmitOutcome::AlreadyAdmitted(again) = admit(&mut shoppers, "a", "s9", 3) else {
            panic!("a did not take a slot again");
        };
        assert_eq!(again.session_id, "s1");
        assert_eq!(
            again.slot.map(|s| (s.state, s.taken_at_ms)),
            Some((SlotState::Idle, 3))
        );
        shoppers.invariants();
    }

    #[test]
    fn an_idle_slot_comes_back_after_the_hold_window_a_holding_one_does_not() {
        let mut shoppers = ActiveShoppers::new(2);
        shoppers.admit("idle", "s1", 0, 900_000, 60_000);
        shoppers.admit("buyer", "s2", 0, 900_000, 60_000);
        assert!(shoppers.shop("buyer", Shop::Held, 5_000));
        assert_eq!(
            shoppers.slots(),
            SlotCounts {
                idle: 1,
                holding: 1,
                paying: 0
            }
        );
        // Past the window the idle slot no longer counts for admission, even before a sweep.
        assert!(matches!(
            shoppers.admit("next", "s3", 60_000, 900_000, 60_000),
            AdmitOutcome::Admitted(_)
        ));
        assert_eq!(shoppers.get("idle", 60_000).map(|a| a.slot), Some(None));
        assert!(shoppers.get("buyer", 60_000).unwrap().slot.is_some());
        assert_eq!(shoppers.expire(120_000), ["next"]);
        assert_eq!(shoppers.slots().holding, 1);
        shoppers.invariants();
    }

    #[test]
    fn a_refusal_cuts_an_idle_slots_window_but_not_a_holding_one() {
        let mut shoppers = ActiveShoppers::new(3);
        shoppers.admit("a", "s1", 0, 900_000, 60_000);
        shoppers.admit("b", "s2", 0, 900_000, 60_000);
        shoppers.shop("b", Shop::Held, 1);
        assert!(shoppers.shop("a", Shop::Refused, 2));
        assert_eq!(
            shoppers
                .get("a", 2)
                .and_then(|a| a.slot)
                .map(|s| s.idle_until_ms),
            Some(2 + REFUSED_GRACE_MS)
        );
        // Refused again: the window only ever shrinks.
        assert!(!shoppers.shop("a", Shop::Refused, 3));
        assert_eq!(shoppers.get("a", 2 + REFUSED_GRACE_MS).unwrap().slot, None);
        assert!(!shoppers.shop("b", Shop::Refused, 2));
        assert!(shoppers.shop("b", Shop::Paying, 3));
        // A late message about the hold does not take a paying fan back to holding.
        assert!(!shoppers.shop("b", Shop::Held, 2));
        shoppers.expire(2 + REFUSED_GRACE_MS);
        assert_eq!(
            shoppers.slots(),
            SlotCounts {
                idle: 0,
                holding: 0,
                paying: 1
            }
        );
        shoppers.invariants();
    }

    #[test]
    fn a_hold_that_ended_before_the_slot_was_taken_again_frees_nothing() {
        let mut shoppers = ActiveShoppers::new(1);
        admit(&mut shoppers, "a", "s1", 0);
        shoppers.shop("a", Shop::Held, 5);
        assert!(shoppers.shop("a", Shop::Ended, 10));
        admit(&mut shoppers, "a", "s1", 20);
        assert!(!shoppers.shop("a", Shop::Ended, 15));
        assert!(shoppers.shop("a", Shop::Ended, 25));
        assert_eq!(shoppers.active(), 0);
        assert!(shoppers.get("a", 30).is_some(), "the admission stays");
        // The trip over: the admission ends with it, unless it began after.
        assert!(!shoppers.release_admitted_by("a", -1));
        assert!(shoppers.release_admitted_by("a", 30));
        assert!(shoppers.get("a", 30).is_none());
    }

    #[test]
    fn a_hold_granted_after_the_slot_lapsed_takes_one_only_if_free() {
        let mut shoppers = ActiveShoppers::new(1);
        shoppers.admit("a", "s1", 0, 900_000, 1_000);
        shoppers.admit("b", "s2", 1_000, 900_000, 1_000);
        assert!(!shoppers.shop("a", Shop::Held, 1_500));
        assert!(shoppers.shop("b", Shop::Held, 1_500));
        shoppers.release("b");
        assert!(shoppers.shop("a", Shop::Held, 1_600));
        assert_eq!(shoppers.slots().holding, 1);
        shoppers.invariants();
    }

    #[test]
    fn expire_forgets_admissions_past_their_ttl_only() {
        let mut shoppers = ActiveShoppers::new(3);
        admit(&mut shoppers, "a", "s1", 0);
        admit(&mut shoppers, "b", "s2", 500);
        assert_eq!(shoppers.expire(TTL_MS - 1), Vec::<String>::new());
        assert_eq!(shoppers.expire(TTL_MS), ["a"]);
        assert_eq!(shoppers.active(), 1);
        assert_eq!(shoppers.admissions(), 1);
        assert!(shoppers.get("b", TTL_MS).is_some());
        assert!(shoppers.get("b", 500 + TTL_MS).is_none());
    }

    #[test]
    fn an_expired_unswept_admission_does_not_block_readmission() {
        let mut shoppers = ActiveShoppers::new(1);
        admit(&mut shoppers, "a", "s1", 0);
        assert!(matches!(
            admit(&mut shoppers, "a", "s2", TTL_MS),
            AdmitOutcome::Admitted(Admission { ref session_id, .. }) if session_id == "s2"
        ));
        assert_eq!(shoppers.active(), 1);
    }

    #[test]
    fn a_full_set_sweeps_expired_admissions_before_refusing() {
        let mut shoppers = ActiveShoppers::new(2);
        admit(&mut shoppers, "a", "s1", 0);
        shoppers.admit("b", "s2", 0, 5 * TTL_MS, WINDOW_MS);
        assert_eq!(shoppers.active(), 2);
        assert!(matches!(
            admit(&mut shoppers, "c", "s3", TTL_MS),
            AdmitOutcome::Admitted(_)
        ));
        assert!(shoppers.get("a", TTL_MS).is_none());
        assert_eq!(shoppers.active(), 2);
    }

    #[test]
    fn lowering_the_cap_evicts_no_one_but_blocks_new_admissions() {
        let mut shoppers = ActiveShoppers::new(3);
        for account in ["a", "b", "c"] {
            admit(&mut shoppers, account, "s", 0);
        }
        shoppers.set_max_active_shoppers(1);
        assert_eq!(shoppers.active(), 3);
        assert_eq!(shoppers.free_slots(), 0);
        shoppers.release("a");
        shoppers.release("b");
        assert!(matches!(
            admit(&mut shoppers, "d", "s", 0),
            AdmitOutcome::Full { .. }
        ));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit {
            account: u8,
            ttl_ms: i64,
            window_ms: i64,
        },
        Shop {
            account: u8,
            shop: Shop,
        },
        Release {
            account: u8,
        },
        Expire,
        Advance {
            ms: i64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        let shop = prop_oneof![
            Just(Shop::Held),
            Just(Shop::Paying),
            Just(Shop::Refused),
            Just(Shop::Ended)
        ];
        prop_oneof![
            4 => (0u8..12, 1i64..2_000, 1i64..2_000)
                .prop_map(|(account, ttl_ms, window_ms)| Op::Admit { account, ttl_ms, window_ms }),
            3 => (0u8..12, shop).prop_map(|(account, shop)| Op::Shop { account, shop }),
            2 => (0u8..12).prop_map(|account| Op::Release { account }),
            1 => Just(Op::Expire),
            2 => (0i64..1_500).prop_map(|ms| Op::Advance { ms }),
        ]
    }

    /// The model: account -> (admission expiry, slot (idle?, idle until)), nothing swept.
    type Model = HashMap<String, (i64, Option<(bool, i64)>)>;

    fn slot_counts(model: &Model, now_ms: i64) -> u64 {
        model
            .values()
            .filter(|(expires, slot)| {
                now_ms < *expires && slot.is_some_and(|(idle, until)| !idle || now_ms < until)
            })
            .count() as u64
    }

    proptest! {
        /// A model (account -> expiry and slot, expired entries kept) says who takes a slot;
        /// the real set must agree with it, never exceed the cap and never count anyone twice.
        #[test]
        fn never_exceeds_the_cap_nor_double_counts(
            cap in 0u64..6,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut shoppers = ActiveShoppers::new(cap);
            let mut model: Model = HashMap::new();
            let mut now_ms = 0i64;
            for op in ops {
                match op {
                    Op::Admit { account, ttl_ms, window_ms } => {
                        let account = format!("acct-{account}");
                        let entry = model.get(&account).copied();
                        let was_live = entry.is_some_and(|(e, _)| now_ms < e);
                        let had_slot = was_live && entry.is_some_and(|(_, slot)| {
                            slot.is_some_and(|(idle, until)| !idle || now_ms < until)
                        });
                        let taken_before = slot_counts(&model, now_ms);
                        match shoppers.admit(&account, "s", now_ms, ttl_ms, window_ms) {
                            AdmitOutcome::Admitted(_) => {
                                prop_assert!(!was_live);
                                prop_assert!(taken_before < cap);
                                model.insert(account, (now_ms + ttl_ms, Some((true, now_ms + window_ms))));
                            }
                            AdmitOutcome::AlreadyAdmitted(admission) => {
                                prop_assert!(was_live);
                                prop_assert!(admission.slot.is_some());
                                if !had_slot {
                                    prop_assert!(taken_before < cap);
                                    let expires = entry.map_or(0, |(e, _)| e);
                                    model.insert(account, (expires, Some((true, now_ms + window_ms))));
                                }
                            }
                            AdmitOutcome::Full { .. } => {
                                prop_assert!(!had_slot);
                                prop_assert!(taken_before >= cap);
                            }
                        }
                    }
                    Op::Shop { account, shop } => {
                        let account = format!("acct-{account}");
                        shoppers.shop(&account, shop, now_ms);
                        let admission = shoppers.get(&account, now_ms);
                        let slot = admission.and_then(|a| a.slot);
                        if let Some((expires, _)) = model.get(&account).copied() {
                            let mapped = slot.map(|s| (s.state == SlotState::Idle, s.idle_until_ms));
                            model.insert(account, (expires, mapped));
                        }
                        if shop == Shop::Refused {
                            let cut = slot.is_none_or(|s| {
                                s.state != SlotState::Idle
                                    || s.idle_until_ms <= now_ms + REFUSED_GRACE_MS
                            });
                            prop_assert!(cut);
                        }
                        if shop == Shop::Ended {
                            prop_assert!(slot.is_none());
                        }
                    }
                    Op::Release { account } => {
                        let account = format!("acct-{account}");
                        shoppers.release(&account);
                        if let Some(entry) = model.get_mut(&account) {
                            entry.1 = None;
                        }
                    }
                    Op::Expire => {
                        shoppers.expire(now_ms);
                        prop_assert_eq!(shoppers.active(), slot_counts(&model, now_ms));
                    }
                    Op::Advance { ms } => now_ms += ms,
                }
                shoppers.invariants();
                prop_assert!(shoppers.active() <= cap);
                prop_assert!(shoppers.active() >= slot_counts(&model, now_ms));
            }
        }
    }
}
