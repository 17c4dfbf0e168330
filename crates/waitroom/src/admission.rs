//! Active shoppers of one event: who was admitted past the queue, for which session, until
//! when, and the cap on how many shop at once.
//!
//! A slot is taken by [`ActiveShoppers::admit`] and given back by
//! [`ActiveShoppers::release`] (order confirmed, hold released: at once) or by
//! [`ActiveShoppers::expire`] (the admission's TTL passed). [`ActiveShoppers::active`] never
//! exceeds `max_active_shoppers`. `room::Room` drives it; a Redis backend mirrors it in
//! `boxoffice-waitroom-state`.

use std::collections::HashMap;

/// Largest cap an operator may set; bounds memory of the active set.
pub const ACTIVE_SHOPPERS_MAX: u64 = 1_000_000;

/// One admitted account.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// The one session this admission is bound to (the admission token carries it).
    pub session_id: String,
    pub admitted_at_ms: i64,
    pub expires_at_ms: i64,
}

/// What [`ActiveShoppers::admit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitOutcome {
    /// A slot was taken.
    Admitted(Admission),
    /// The account already holds a live admission; it is returned unchanged and no second
    /// slot is taken. The caller compares `session_id` to refuse another session.
    AlreadyAdmitted(Admission),
    /// Every slot is taken; try again after a release or expiry.
    Full {
        active: u64,
        max_active_shoppers: u64,
    },
}

/// The active shoppers of one event. See the module docs.
#[derive(Debug)]
pub struct ActiveShoppers {
    max_active_shoppers: u64,
    /// Bounded by `max_active_shoppers`, so scanning it once per second in `expire` is cheap
    /// and a deadline index is not worth its bookkeeping.
    admissions: HashMap<Box<str>, Admission>,
}

impl ActiveShoppers {
    /// `max_active_shoppers` is clamped to [`ACTIVE_SHOPPERS_MAX`].
    pub fn new(max_active_shoppers: u64) -> Self {
        Self {
            max_active_shoppers: max_active_shoppers.min(ACTIVE_SHOPPERS_MAX),
            admissions: HashMap::new(),
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

    /// Admissions counted against the cap, expired ones not yet swept included.
    pub fn active(&self) -> u64 {
        self.admissions.len() as u64
    }

    /// Slots an admission could take now.
    pub fn free_slots(&self) -> u64 {
        self.max_active_shoppers.saturating_sub(self.active())
    }

    /// The live admission of `account_id` at `now_ms`, if any.
    pub fn get(&self, account_id: &str, now_ms: i64) -> Option<&Admission> {
        self.admissions
            .get(account_id)
            .filter(|admission| now_ms < admission.expires_at_ms)
    }

    /// Admits `account_id` for `session_id` until `now_ms + ttl_ms`, if a slot is free.
    pub fn admit(
        &mut self,
        account_id: &str,
        session_id: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> AdmitOutcome {
        if let Some(existing) = self.admissions.get(account_id) {
            if now_ms < existing.expires_at_ms {
                return AdmitOutcome::AlreadyAdmitted(existing.clone());
            }
            // Expired but not swept yet: its slot is free again.
            self.admissions.remove(account_id);
        }
        if self.active() >= self.max_active_shoppers {
            // Full only counts live admissions: sweep the expired ones before refusing.
            self.expire(now_ms);
        }
        if self.active() >= self.max_active_shoppers {
            return AdmitOutcome::Full {
                active: self.active(),
                max_active_shoppers: self.max_active_shoppers,
            };
        }
        let admission = Admission {
            session_id: session_id.to_owned(),
            admitted_at_ms: now_ms,
            expires_at_ms: now_ms.saturating_add(ttl_ms),
        };
        self.admissions.insert(account_id.into(), admission.clone());
        AdmitOutcome::Admitted(admission)
    }

    /// Gives the account's slot back at once (confirmation, hold released, logout). Returns
    /// whether it held one.
    pub fn release(&mut self, account_id: &str) -> bool {
        self.admissions.remove(account_id).is_some()
    }

    /// Gives the slot back only if the admission began at or before `at_ms`: a late message
    /// about a hold that ended before the account was admitted again must not end the new
    /// admission. Returns whether a slot was freed.
    pub fn release_admitted_by(&mut self, account_id: &str, at_ms: i64) -> bool {
        match self.admissions.get(account_id) {
            Some(admission) if admission.admitted_at_ms <= at_ms => {
                self.admissions.remove(account_id);
                true
            }
            _ => false,
        }
    }

    /// Frees the slot of every admission whose TTL passed at `now_ms`; returns their accounts.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let mut expired = Vec::new();
        self.admissions.retain(|account_id, admission| {
            let live = now_ms < admission.expires_at_ms;
            if !live {
                expired.push(account_id.to_string());
            }
            live
        });
        expired
    }

    /// Single-condition assertions; tests call this after every step.
    pub fn invariants(&self) {
        assert!(self.max_active_shoppers <= ACTIVE_SHOPPERS_MAX);
        for admission in self.admissions.values() {
            assert!(admission.admitted_at_ms <= admission.expires_at_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    const TTL_MS: i64 = 1_000;

    #[test]
    fn admits_up_to_the_cap_then_refuses() {
        let mut shoppers = ActiveShoppers::new(2);
        assert!(matches!(
            shoppers.admit("a", "s1", 0, TTL_MS),
            AdmitOutcome::Admitted(_)
        ));
        assert!(matches!(
            shoppers.admit("b", "s2", 0, TTL_MS),
            AdmitOutcome::Admitted(_)
        ));
        assert_eq!(
            shoppers.admit("c", "s3", 0, TTL_MS),
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
        let AdmitOutcome::Admitted(first) = shoppers.admit("a", "s1", 0, TTL_MS) else {
            panic!("first admission refused");
        };
        assert_eq!(
            shoppers.admit("a", "s2", 10, TTL_MS),
            AdmitOutcome::AlreadyAdmitted(first)
        );
        assert_eq!(shoppers.active(), 1);
    }

    #[test]
    fn release_gives_the_slot_back_at_once() {
        let mut shoppers = ActiveShoppers::new(1);
        shoppers.admit("a", "s1", 0, TTL_MS);
        assert!(shoppers.release("a"));
        assert!(!shoppers.release("a"));
        assert!(matches!(
            shoppers.admit("b", "s2", 1, TTL_MS),
            AdmitOutcome::Admitted(_)
        ));
    }

    #[test]
    fn expire_frees_slots_past_their_ttl_only() {
        let mut shoppers = ActiveShoppers::new(3);
        shoppers.admit("a", "s1", 0, TTL_MS);
        shoppers.admit("b", "s2", 500, TTL_MS);
        assert_eq!(shoppers.expire(TTL_MS - 1), Vec::<String>::new());
        assert_eq!(shoppers.expire(TTL_MS), ["a"]);
        assert_eq!(shoppers.active(), 1);
        assert!(shoppers.get("b", TTL_MS).is_some());
        assert!(shoppers.get("b", 500 + TTL_MS).is_none());
    }

    #[test]
    fn an_expired_unswept_admission_does_not_block_readmission() {
        let mut shoppers = ActiveShoppers::new(1);
        shoppers.admit("a", "s1", 0, TTL_MS);
        assert!(matches!(
            shoppers.admit("a", "s2", TTL_MS, TTL_MS),
            AdmitOutcome::Admitted(Admission { ref session_id, .. }) if session_id == "s2"
        ));
        assert_eq!(shoppers.active(), 1);
    }

    #[test]
    fn a_full_set_sweeps_expired_admissions_before_refusing() {
        let mut shoppers = ActiveShoppers::new(2);
        shoppers.admit("a", "s1", 0, TTL_MS);
        shoppers.admit("b", "s2", 0, 5 * TTL_MS);
        assert_eq!(shoppers.active(), 2);
        assert!(matches!(
            shoppers.admit("c", "s3", TTL_MS, TTL_MS),
            AdmitOutcome::Admitted(_)
        ));
        assert!(shoppers.get("a", TTL_MS).is_none());
        assert_eq!(shoppers.active(), 2);
    }

    #[test]
    fn lowering_the_cap_evicts_no_one_but_blocks_new_admissions() {
        let mut shoppers = ActiveShoppers::new(3);
        for account in ["a", "b", "c"] {
            shoppers.admit(account, "s", 0, TTL_MS);
        }
        shoppers.set_max_active_shoppers(1);
        assert_eq!(shoppers.active(), 3);
        assert_eq!(shoppers.free_slots(), 0);
        shoppers.release("a");
        shoppers.release("b");
        assert!(matches!(
            shoppers.admit("d", "s", 0, TTL_MS),
            AdmitOutcome::Full { .. }
        ));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Admit { account: u8, ttl_ms: i64 },
        Release { account: u8 },
        Expire,
        Advance { ms: i64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12, 1i64..2_000).prop_map(|(account, ttl_ms)| Op::Admit { account, ttl_ms }),
            2 => (0u8..12).prop_map(|account| Op::Release { account }),
            1 => Just(Op::Expire),
            2 => (0i64..1_500).prop_map(|ms| Op::Advance { ms }),
        ]
    }

    fn live(model: &HashMap<String, i64>, now_ms: i64) -> usize {
        model.values().filter(|&&expires| now_ms < expires).count()
    }

    proptest! {
        /// A model (account -> expiry, expired entries kept) says who is live; the real set
        /// must agree with it, never exceed the cap and never count anyone twice.
        #[test]
        fn never_exceeds_the_cap_nor_double_counts(
            cap in 0u64..6,
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            let mut shoppers = ActiveShoppers::new(cap);
            let mut model: HashMap<String, i64> = HashMap::new();
            let mut now_ms = 0i64;
            for op in ops {
                match op {
                    Op::Admit { account, ttl_ms } => {
                        let account = format!("acct-{account}");
                        let was_live = model.get(&account).is_some_and(|&e| now_ms < e);
                        let live_before = live(&model, now_ms) as u64;
                        match shoppers.admit(&account, "s", now_ms, ttl_ms) {
                            AdmitOutcome::Admitted(_) => {
                                prop_assert!(!was_live);
                                prop_assert!(live_before < cap);
                                model.insert(account, now_ms + ttl_ms);
                            }
                            AdmitOutcome::AlreadyAdmitted(_) => prop_assert!(was_live),
                            AdmitOutcome::Full { .. } => {
                                prop_assert!(!was_live);
                                prop_assert!(live_before >= cap);
                            }
                        }
                    }
                    Op::Release { account } => {
                        let account = format!("acct-{account}");
                        let was_live = model.get(&account).is_some_and(|&e| now_ms < e);
                        let released = shoppers.release(&account);
                        prop_assert!(released || !was_live);
                        model.remove(&account);
                    }
                    Op::Expire => {
                        shoppers.expire(now_ms);
                        prop_assert_eq!(shoppers.active(), live(&model, now_ms) as u64);
                    }
                    Op::Advance { ms } => now_ms += ms,
                }
                shoppers.invariants();
                prop_assert!(shoppers.active() <= cap);
                prop_assert!(shoppers.active() >= live(&model, now_ms) as u64);
            }
        }
    }
}
