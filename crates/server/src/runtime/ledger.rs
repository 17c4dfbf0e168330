//! Who holds what, and who lets holds lapse (issue 18, item 4; OWASP API6: hold-and-abandon
//! bots keep seats away from fans). The event writers of this node tell the ledger of every
//! hold they commit and of how each one ended; the hold route asks it before a new hold:
//!
//! - **live holds per account**, across events: at most `live-holds-per-account` holds not yet
//!   ended (released, checked out or lapsed); one more is answered 429 `RATE_LIMITED` with
//!   `limit: "live-holds-per-account"`;
//! - **lapsed holds per account**: an account whose holds ran out `lapsed-holds-per-account`
//!   times within [`LAPSE_WINDOW`] waits before its next hold, [`LAPSE_PENALTY_BASE`] doubled
//!   for each lapse past the threshold (at most [`LAPSE_PENALTY_MAX`]) from its last lapse:
//!   429 with `limit: "lapsed-holds-per-account"` and that wait in `Retry-After`.
//!
//! Like the token buckets, the ledger is this node's memory: it knows the holds of the events
//! this node's writers own (in a cluster, an account's holds on events owned by other nodes
//! are counted there), and it starts empty after a restart. Its size is bounded by the live
//! holds (each ends) and by [`ACCOUNTS_MAX`] accounts with recent lapses.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lapses older than this are forgotten.
pub const LAPSE_WINDOW: Duration = Duration::from_secs(600);
/// The wait after the threshold's lapse; each further lapse doubles it.
pub const LAPSE_PENALTY_BASE: Duration = Duration::from_secs(30);
/// The longest wait.
pub const LAPSE_PENALTY_MAX: Duration = Duration::from_secs(600);
/// Accounts with recent lapses kept; past it, the oldest lapses are forgotten first.
pub const ACCOUNTS_MAX: usize = 100_000;
/// Lapses kept per account (more change nothing: the wait is at its longest).
const LAPSES_PER_ACCOUNT_MAX: usize = 16;

/// What one committed group did to holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldChanges {
    /// New holds and their accounts.
    pub created: Vec<(String, String)>,
    /// Holds ended by their owner: released, or taken into a checkout.
    pub ended: Vec<String>,
    /// Holds that ran out.
    pub lapsed: Vec<String>,
}

impl HoldChanges {
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.ended.is_empty() && self.lapsed.is_empty()
    }
}

/// Why a hold is refused, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub limit: &'static str,
    pub wait: Duration,
}

#[derive(Debug, Default)]
struct Inner {
    /// Live hold → its account.
    holds: HashMap<String, String>,
    /// Account → its live holds.
    live: HashMap<String, u32>,
    /// Account → when its holds lapsed, oldest first.
    lapses: HashMap<String, VecDeque<Instant>>,
}

/// The ledger of this node's holds.
#[derive(Debug)]
pub struct HoldLedger {
    /// Most live holds per account (0: no bound).
    live_max: u32,
    /// Lapses within [`LAPSE_WINDOW`] from which an account waits (0: never).
    lapses_threshold: u32,
    inner: Mutex<Inner>,
}

impl HoldLedger {
    pub fn new(live_max: u32, lapses_threshold: u32) -> Self {
        Self {
            live_max,
            lapses_threshold,
            inner: Mutex::default(),
        }
    }

    /// Whether the ledger bounds anything (the writers skip it otherwise).
    pub fn is_on(&self) -> bool {
        self.live_max > 0 || self.lapses_threshold > 0
    }

    /// Records a committed group's changes. `lapses_count`: false when the store skipped
    /// some of the group's expiries (the holds had moved on), so none of its lapses is
    /// counted against anyone.
    pub fn apply(&self, changes: &HoldChanges, lapses_count: bool, now: Instant) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for (hold_id, account) in &changes.created {
            if inner
                .holds
                .insert(hold_id.clone(), account.clone())
                .is_none()
            {
                *inner.live.entry(account.clone()).or_default() += 1;
            }
        }
        for hold_id in &changes.ended {
            inner.end(hold_id);
        }
        for hold_id in &changes.lapsed {
            let Some(account) = inner.end(hold_id) else {
                continue;
            };
            if !lapses_count || self.lapses_threshold == 0 {
                continue;
            }
            if inner.lapses.len() >= ACCOUNTS_MAX && !inner.lapses.contains_key(&account) {
                inner.forget_old_lapses(now);
            }
            let lapses = inner.lapses.entry(account).or_default();
            lapses.push_back(now);
            if lapses.len() > LAPSES_PER_ACCOUNT_MAX {
                lapses.pop_front();
            }
        }
    }

    /// Whether `account` may ask for one more hold now.
    pub fn check(&self, account: &str, now: Instant) -> Result<(), Refused> {
        if !self.is_on() {
            return Ok(());
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if self.lapses_threshold > 0
            && let Some(lapses) = inner.lapses.get_mut(account)
        {
            while lapses
                .front()
                .is_some_and(|at| now.saturating_duration_since(*at) >= LAPSE_WINDOW)
            {
                lapses.pop_front();
            }
            let count = lapses.len() as u32;
            let last = lapses.back().copied();
            if lapses.is_empty() {
                inner.lapses.remove(account);
            }
            if let Some(last) = last
                && count >= self.lapses_threshold
            {
                let wait = penalty(count - self.lapses_threshold);
                let waited = now.saturating_duration_since(last);
                if waited < wait {
                    return Err(Refused {
                        limit: "lapsed-holds-per-account",
                        wait: wait - waited,
                    });
                }
            }
        }
        if self.live_max > 0 && inner.live.get(account).copied().unwrap_or(0) >= self.live_max {
            return Err(Refused {
                limit: "live-holds-per-account",
                // A hold ends within its TTL at the latest; a release frees one at once.
                wait: Duration::from_secs(5),
            });
        }
        Ok(())
    }

    /// The account's live holds, as this node knows them.
    pub fn live(&self, account: &str) -> u32 {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.live.get(account).copied().unwrap_or(0)
    }
}

impl Inner {
    fn end(&mut self, hold_id: &str) -> Option<String> {
        let account = self.holds.remove(hold_id)?;
        if let Some(n) = self.live.get_mut(&account) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.live.remove(&account);
            }
        }
        Some(account)
    }

    fn forget_old_lapses(&mut self, now: Instant) {
        self.lapses.retain(|_, lapses| {
            lapses
                .back()
                .is_some_and(|at| now.saturating_duration_since(*at) < LAPSE_WINDOW)
        });
        if self.lapses.len() >= ACCOUNTS_MAX {
            metrics::counter!("boxoffice_ledger_accounts_dropped_total")
                .increment(self.lapses.len() as u64);
            self.lapses.clear();
        }
    }
}

/// The wait after `past` lapses beyond the threshold's.
fn penalty(past: u32) -> Duration {
    LAPSE_PENALTY_BASE
        .saturating_mul(1u32 << past.min(10))
        .min(LAPSE_PENALTY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(pairs: &[(&str, &str)]) -> HoldChanges {
        HoldChanges {
            created: pairs
                .iter()
                .map(|(h, a)| ((*h).to_owned(), (*a).to_owned()))
                .collect(),
            ..HoldChanges::default()
        }
    }

    #[test]
    fn live_holds_are_bounded_across_events_and_freed_as_they_end() {
        let ledger = HoldLedger::new(2, 0);
        let t0 = Instant::now();
        ledger.apply(
            &created(&[("h1", "ann"), ("h2", "ann"), ("h3", "bob")]),
            true,
            t0,
        );
        assert_eq!(ledger.live("ann"), 2);
        let refused = ledger.check("ann", t0).unwrap_err();
        assert_eq!(refused.limit, "live-holds-per-account");
        assert!(ledger.check("bob", t0).is_ok(), "an account of its own");
        // A release, a checkout or a lapse each frees one.
        ledger.apply(
            &HoldChanges {
                ended: vec!["h1".into()],
                ..HoldChanges::default()
            },
            true,
            t0,
        );
        assert!(ledger.check("ann", t0).is_ok());
        ledger.apply(&created(&[("h4", "ann")]), true, t0);
        ledger.apply(
            &HoldChanges {
                lapsed: vec!["h2".into()],
                ended: vec!["h4".into(), "unknown".into()],
                ..HoldChanges::default()
            },
            true,
            t0,
        );
        assert_eq!(ledger.live("ann"), 0);
        assert!(
            !ledger.inner.lock().unwrap().live.contains_key("ann"),
            "no empty entries"
        );
    }

    #[test]
    fn an_account_that_lets_holds_lapse_waits_longer_each_time() {
        let ledger = HoldLedger::new(0, 3);
        let t0 = Instant::now();
        let lapse = |n: usize, at: Instant| {
            let hold = format!("h{n}");
            ledger.apply(&created(&[(&hold, "ann")]), true, at);
            ledger.apply(
                &HoldChanges {
                    lapsed: vec![hold],
                    ..HoldChanges::default()
                },
                true,
                at,
            );
        };
        lapse(1, t0);
        lapse(2, t0);
        assert!(
            ledger.check("ann", t0).is_ok(),
            "two lapses are a fan's bad luck"
        );
        lapse(3, t0);
        let first = ledger.check("ann", t0).unwrap_err();
        assert_eq!(first.limit, "lapsed-holds-per-account");
        assert_eq!(first.wait, LAPSE_PENALTY_BASE);
        assert!(ledger.check("bob", t0).is_ok());
        let later = t0 + LAPSE_PENALTY_BASE;
        assert!(ledger.check("ann", later).is_ok(), "the wait is over");
        lapse(4, later);
        assert_eq!(
            ledger.check("ann", later).unwrap_err().wait,
            LAPSE_PENALTY_BASE * 2
        );
        // Past the window the lapses are forgotten.
        let much_later = later + LAPSE_WINDOW;
        assert!(ledger.check("ann", much_later).is_ok());
        assert!(ledger.inner.lock().unwrap().lapses.is_empty());
    }

    #[test]
    fn lapses_of_a_group_with_skipped_expiries_count_against_nobody() {
        let ledger = HoldLedger::new(0, 1);
        let t0 = Instant::now();
        ledger.apply(&created(&[("h1", "ann")]), true, t0);
        ledger.apply(
            &HoldChanges {
                lapsed: vec!["h1".into()],
                ..HoldChanges::default()
            },
            false,
            t0,
        );
        assert!(ledger.check("ann", t0).is_ok());
        assert_eq!(ledger.live("ann"), 0);
    }

    #[test]
    fn the_wait_doubles_up_to_its_longest() {
        assert_eq!(penalty(0), LAPSE_PENALTY_BASE);
        assert_eq!(penalty(1), LAPSE_PENALTY_BASE * 2);
        assert_eq!(penalty(4), LAPSE_PENALTY_MAX.min(LAPSE_PENALTY_BASE * 16));
        assert_eq!(penalty(40), LAPSE_PENALTY_MAX);
    }

    #[test]
    fn accounts_with_lapses_are_bounded() {
        let ledger = HoldLedger::new(0, 3);
        let t0 = Instant::now();
        for i in 0..(ACCOUNTS_MAX + 10) {
            let hold = format!("h{i}");
            ledger.apply(&created(&[(&hold, &format!("fan-{i}"))]), true, t0);
            ledger.apply(
                &HoldChanges {
                    lapsed: vec![hold],
                    ..HoldChanges::default()
                },
                true,
                t0,
            );
        }
        assert!(ledger.inner.lock().unwrap().lapses.len() <= ACCOUNTS_MAX);
        assert!(ledger.inner.lock().unwrap().holds.is_empty());
    }
}
