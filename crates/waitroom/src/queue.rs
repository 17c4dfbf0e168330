//! The queue of one event: the pre-queue before on-sale, the order fixed at on-sale, the
//! 1-based positions and the serving counter that releases them.
//!
//! Every account gets a join index (0, 1, 2, … in join order) once. Before `on_sale_at_ms`
//! joiners wait in a pre-queue. The first step at or after on-sale ([`EventQueue::open`], or
//! lazily [`EventQueue::join`] / [`EventQueue::advance`]) fixes the order once:
//! [`QueuePolicy::Fifo`] keeps join order, [`QueuePolicy::Random`] maps the pre-queue through
//! a seeded [`Permutation`] (the same seed always gives the same order: replayable,
//! auditable). Later joiners are appended. Positions `<= serving` are released;
//! [`EventQueue::advance`] moves `serving` forward, and the release controller decides by how
//! much.
//!
//! A position is a pure function of the join index and the [`QueueView`] (policy, seed,
//! pre-queue length, serving counter, release times), so the hottest request, a status poll,
//! needs no account lookup: the signed queue ticket carries the join index and the view
//! answers. Only joining touches the account index.
//!
//! Memory: one boxed account id and a `u32` per account in a hash map: roughly 60-90 bytes
//! per account for 20-byte ids (allocator rounding and the map growing by doubling included).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::permutation::Permutation;

/// Most accounts one event's queue holds. Join indexes are `u32`; this keeps well below that
/// and bounds memory (see the module docs for the per-account cost).
pub const QUEUE_ACCOUNTS_MAX: u64 = 5_000_000;
/// Longest account id accepted, in bytes (the domain's `ACCOUNT_ID_LEN_MAX`).
pub const ACCOUNT_ID_LEN_MAX_BYTES: usize = 64;
/// How long a released account may take to come and claim its admission before its place
/// is reported `EXPIRED`, in milliseconds.
pub const CLAIM_WINDOW_DEFAULT_MS: i64 = 10 * 60 * 1000;

/// How the pre-queue is ordered at on-sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    /// Join order: early joiners go first.
    Fifo,
    /// One seeded shuffle of the pre-queue at on-sale, so arriving early buys nothing.
    Random,
}

/// Why a join was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    #[error("account id must be 1-{ACCOUNT_ID_LEN_MAX_BYTES} bytes")]
    InvalidAccountId,
    #[error("the queue is full ({QUEUE_ACCOUNTS_MAX} accounts)")]
    QueueFull,
}

/// The fixed settings of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueConfig {
    pub policy: QueuePolicy,
    pub on_sale_at_ms: i64,
    pub seed: u64,
    pub claim_window_ms: i64,
}

impl QueueConfig {
    pub fn new(policy: QueuePolicy, on_sale_at_ms: i64, seed: u64) -> Self {
        Self {
            policy,
            on_sale_at_ms,
            seed,
            claim_window_ms: CLAIM_WINDOW_DEFAULT_MS,
        }
    }
}

/// An account's place, as returned by [`EventQueue::join`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// 0-based join index; the queue ticket carries it.
    pub index: u64,
    /// 1-based position. While `provisional`, it is the join order and may change at on-sale.
    pub position: u64,
    /// True before on-sale under [`QueuePolicy::Random`]: the shuffle has not happened yet.
    pub provisional: bool,
    /// True when the account had already joined; the place returned is the same one.
    pub joined_before: bool,
}

/// Where a join index stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not released yet. `ahead_of_you` counts unreleased positions before this one.
    Waiting {
        position: u64,
        ahead_of_you: u64,
        /// See [`Place::provisional`].
        provisional: bool,
    },
    /// Released and still within the claim window: the account may claim an admission.
    Released { position: u64 },
    /// Released, but the claim window passed without the account taking its turn.
    Expired { position: u64 },
}

/// The fixed order, once the queue has opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Opened {
    pub opened_at_ms: i64,
    /// The seed the shuffle used (`None` under FIFO), recorded so the order can be replayed.
    pub permutation_seed: Option<u64>,
    /// How many accounts were in the pre-queue when it opened.
    pub pre_queue_len: u64,
}

/// One release: positions up to `serving_after` released at `released_at_ms`. Kept so a
/// position's claim window starts when it was released, not when the account polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Release {
    pub serving_after: u64,
    pub released_at_ms: i64,
}

/// Everything a status poll needs, and nothing about accounts: cheap to copy to every server
/// process. Backends build it; [`QueueView::status`] answers from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    pub config: QueueConfig,
    /// Accounts that joined.
    pub joined: u64,
    pub opened: Option<Opened>,
    /// Highest released position. Never exceeds `joined`.
    pub serving: u64,
    /// One entry per non-empty release, in order of `serving_after`.
    pub releases: Vec<Release>,
}

impl QueueView {
    pub fn new(config: QueueConfig) -> Self {
        Self {
            config,
            joined: 0,
            opened: None,
            serving: 0,
            releases: Vec::new(),
        }
    }

    /// Accounts not released yet.
    pub fn waiting(&self) -> u64 {
        self.joined.saturating_sub(self.serving)
    }

    fn is_provisional(&self) -> bool {
        self.opened.is_none() && self.config.policy == QueuePolicy::Random
    }

    /// The 1-based position of join index `index`, and whether it is provisional.
    pub fn position(&self, index: u64) -> (u64, bool) {
        match (self.opened, self.config.policy) {
            (Some(opened), QueuePolicy::Random) if index < opened.pre_queue_len => (
                Permutation::new(opened.pre_queue_len, self.config.seed).apply(index) + 1,
                false,
            ),
            _ => (index + 1, self.is_provisional()),
        }
    }

    /// Where join index `index` stands at `now_ms`.
    pub fn status(&self, index: u64, now_ms: i64) -> Status {
        let (position, provisional) = self.position(index);
        if position > self.serving {
            return Status::Waiting {
                position,
                ahead_of_you: position - self.serving - 1,
                provisional,
            };
        }
        match self.released_at_ms(position) {
            Some(released_at_ms)
                if now_ms > released_at_ms.saturating_add(self.config.claim_window_ms) =>
            {
                Status::Expired { position }
            }
            _ => Status::Released { position },
        }
    }

    /// When `position` (already released) was released.
    pub fn released_at_ms(&self, position: u64) -> Option<i64> {
        let i = self
            .releases
            .partition_point(|release| release.serving_after < position);
        self.releases.get(i).map(|release| release.released_at_ms)
    }

    /// Fixes the order if it is not fixed yet; idempotent.
    fn open(&mut self, now_ms: i64) -> Opened {
        if let Some(opened) = self.opened {
            return opened;
        }
        let opened = Opened {
            opened_at_ms: now_ms,
            permutation_seed: (self.config.policy == QueuePolicy::Random)
                .then_some(self.config.seed),
            pre_queue_len: self.joined,
        };
        self.opened = Some(opened);
        opened
    }

    fn open_if_due(&mut self, now_ms: i64) {
        if self.opened.is_none() && now_ms >= self.config.on_sale_at_ms {
            self.open(now_ms);
        }
    }

    /// Releases up to `n` more positions at `now_ms` (see [`EventQueue::advance`]).
    fn advance(&mut self, n: u64, now_ms: i64) -> u64 {
        self.open_if_due(now_ms);
        if self.opened.is_none() {
            return 0;
        }
        let released = n.min(self.waiting());
        if released == 0 {
            return 0;
        }
        self.serving += released;
        // A clock behind the last release's (stepped back, or a new leader's) never dates a
        // release before the one it follows: release times stay in order, and no later
        // release's claim window ends before an earlier one's.
        let released_at_ms = self
            .releases
            .last()
            .map_or(now_ms, |last| last.released_at_ms.max(now_ms));
        self.releases.push(Release {
            serving_after: self.serving,
            released_at_ms,
        });
        released
    }

    /// Single-condition assertions; tests call this after every step.
    pub fn invariants(&self) {
        assert!(self.joined <= QUEUE_ACCOUNTS_MAX);
        assert!(self.serving <= self.joined);
        for pair in self.releases.windows(2) {
            assert!(pair[0].serving_after < pair[1].serving_after);
            assert!(pair[0].released_at_ms <= pair[1].released_at_ms);
        }
        assert_eq!(
            self.releases
                .last()
                .map_or(0, |release| release.serving_after),
            self.serving
        );
        match self.opened {
            None => assert_eq!(self.serving, 0),
            Some(opened) => assert!(opened.pre_queue_len <= self.joined),
        }
    }
}

/// The queue of one event: the account index and the view. See the module docs.
#[derive(Debug)]
pub struct EventQueue {
    /// Account id to join index.
    index: HashMap<Box<str>, u32>,
    view: QueueView,
}

impl EventQueue {
    pub fn new(config: QueueConfig) -> Self {
        Self {
            index: HashMap::new(),
            view: QueueView::new(config),
        }
    }

    pub fn view(&self) -> &QueueView {
        &self.view
    }

    pub fn config(&self) -> QueueConfig {
        self.view.config
    }

    /// `None` until the queue opened.
    pub fn opened(&self) -> Option<Opened> {
        self.view.opened
    }

    /// Highest released position.
    pub fn serving(&self) -> u64 {
        self.view.serving
    }

    /// Accounts in the queue, released ones included.
    pub fn len(&self) -> u64 {
        self.view.joined
    }

    pub fn is_empty(&self) -> bool {
        self.view.joined == 0
    }

    /// Accounts not released yet.
    pub fn waiting(&self) -> u64 {
        self.view.waiting()
    }

    /// The join index of `account_id`, if it joined.
    pub fn index_of(&self, account_id: &str) -> Option<u64> {
        self.index.get(account_id).map(|&i| u64::from(i))
    }

    /// Gives `account_id` a place, or returns the place it already has.
    pub fn join(&mut self, account_id: &str, now_ms: i64) -> Result<Place, JoinError> {
        if account_id.is_empty() || account_id.len() > ACCOUNT_ID_LEN_MAX_BYTES {
            return Err(JoinError::InvalidAccountId);
        }
        self.view.open_if_due(now_ms);
        if let Some(index) = self.index_of(account_id) {
            return Ok(self.place(index, true));
        }
        if self.view.joined >= QUEUE_ACCOUNTS_MAX {
            return Err(JoinError::QueueFull);
        }
        let index = self.view.joined;
        let slot = u32::try_from(index).map_err(|_| JoinError::QueueFull)?;
        self.index.insert(account_id.into(), slot);
        self.view.joined += 1;
        Ok(self.place(index, false))
    }

    fn place(&self, index: u64, joined_before: bool) -> Place {
        let (position, provisional) = self.view.position(index);
        Place {
            index,
            position,
            provisional,
            joined_before,
        }
    }

    /// Where `account_id` stands at `now_ms`; `None` if it never joined.
    pub fn status(&self, account_id: &str, now_ms: i64) -> Option<Status> {
        self.index_of(account_id)
            .map(|index| self.view.status(index, now_ms))
    }

    /// Fixes the order: applies the seeded permutation under [`QueuePolicy::Random`].
    /// Idempotent; may be called before `on_sale_at_ms` by an operator opening early.
    pub fn open(&mut self, now_ms: i64) -> Opened {
        self.view.open(now_ms)
    }

    /// Opens the queue if on-sale has come.
    pub fn open_if_due(&mut self, now_ms: i64) {
        self.view.open_if_due(now_ms);
    }

    /// Releases up to `n` more positions at `now_ms`; returns how many were released. Nothing
    /// is released before the queue opens, nor past the last account that joined.
    pub fn advance(&mut self, n: u64, now_ms: i64) -> u64 {
        self.view.advance(n, now_ms)
    }

    /// Every account with its current position (tests and audits; O(n)).
    pub fn positions(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.index
            .iter()
            .map(|(account_id, &i)| (&**account_id, self.view.position(u64::from(i)).0))
    }

    /// Single-condition assertions over the whole queue; tests call this after every step.
    pub fn invariants(&self) {
        self.view.invariants();
        assert_eq!(self.index.len() as u64, self.view.joined);
        let mut seen = vec![false; self.index.len()];
        for &i in self.index.values() {
            assert!(!std::mem::replace(&mut seen[i as usize], true));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON_SALE_MS: i64 = 1_000_000;

    fn queue(policy: QueuePolicy) -> EventQueue {
        EventQueue::new(QueueConfig::new(policy, ON_SALE_MS, 42))
    }

    fn join_all(q: &mut EventQueue, accounts: &[&str], now_ms: i64) {
        for account in accounts {
            q.join(account, now_ms).unwrap();
            q.invariants();
        }
    }

    /// Accounts by position.
    fn order(q: &EventQueue) -> Vec<String> {
        let mut placed: Vec<(u64, String)> = q
            .positions()
            .map(|(account, position)| (position, account.to_owned()))
            .collect();
        placed.sort();
        for (i, (position, _)) in placed.iter().enumerate() {
            assert_eq!(*position, i as u64 + 1, "positions are 1..=len");
        }
        placed.into_iter().map(|(_, account)| account).collect()
    }

    #[test]
    fn joining_again_returns_the_same_place() {
        for (policy, now_ms) in [
            (QueuePolicy::Fifo, ON_SALE_MS - 1),
            (QueuePolicy::Fifo, ON_SALE_MS),
            (QueuePolicy::Random, ON_SALE_MS - 1),
            (QueuePolicy::Random, ON_SALE_MS + 5),
        ] {
            let mut q = queue(policy);
            let first = q.join("alice", now_ms).unwrap();
            q.join("bob", now_ms).unwrap();
            let again = q.join("alice", now_ms).unwrap();
            assert_eq!(again.position, first.position, "{policy:?} at {now_ms}");
            assert_eq!(again.index, first.index);
            assert!(!first.joined_before);
            assert!(again.joined_before);
            assert_eq!(q.len(), 2);
            q.invariants();
        }
    }

    #[test]
    fn refuses_malformed_account_ids() {
        let mut q = queue(QueuePolicy::Fifo);
        let too_long = "a".repeat(ACCOUNT_ID_LEN_MAX_BYTES + 1);
        for bad in ["", too_long.as_str()] {
            assert_eq!(q.join(bad, 0), Err(JoinError::InvalidAccountId));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn fifo_keeps_join_order_and_appends_later_joiners() {
        let mut q = queue(QueuePolicy::Fifo);
        join_all(&mut q, &["a", "b", "c"], ON_SALE_MS - 100);
        assert_eq!(q.opened(), None);
        join_all(&mut q, &["d"], ON_SALE_MS);
        assert_eq!(
            q.opened(),
            Some(Opened {
                opened_at_ms: ON_SALE_MS,
                permutation_seed: None,
                pre_queue_len: 3
            })
        );
        assert_eq!(order(&q), ["a", "b", "c", "d"]);
    }

    #[test]
    fn random_shuffles_the_pre_queue_once_and_appends_later_joiners() {
        let pre: Vec<String> = (0..50).map(|i| format!("acct-{i}")).collect();
        let pre_refs: Vec<&str> = pre.iter().map(String::as_str).collect();
        let mut q = queue(QueuePolicy::Random);
        join_all(&mut q, &pre_refs, ON_SALE_MS - 10);
        let provisional = q.join("acct-0", ON_SALE_MS - 10).unwrap();
        assert!(provisional.provisional);
        assert_eq!(order(&q), pre, "join order until on-sale");

        let opened = q.open(ON_SALE_MS);
        assert_eq!(opened.permutation_seed, Some(42));
        assert_eq!(opened.pre_queue_len, 50);
        let shuffled = order(&q);
        assert_ne!(shuffled, pre, "50 accounts left in join order by a shuffle");
        let mut sorted = shuffled.clone();
        sorted.sort();
        let mut expected = pre.clone();
        expected.sort();
        assert_eq!(sorted, expected, "the shuffle is a permutation");

        // Idempotent: opening again, joining and polling later never reshuffle.
        assert_eq!(q.open(ON_SALE_MS + 1), opened);
        join_all(&mut q, &["late-1", "late-2"], ON_SALE_MS + 2);
        q.status("acct-3", ON_SALE_MS + 3);
        assert_eq!(order(&q)[..50], shuffled[..]);
        assert_eq!(order(&q)[50..], ["late-1", "late-2"]);
        let settled = q.join("acct-0", ON_SALE_MS + 4).unwrap();
        assert!(!settled.provisional);
        assert_eq!(order(&q)[settled.position as usize - 1], "acct-0");
        assert_eq!(
            settled.index, provisional.index,
            "the ticket's index never changes"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_order_and_another_seed_another() {
        let accounts: Vec<String> = (0..100).map(|i| format!("a{i}")).collect();
        let run = |seed: u64| {
            let mut q = EventQueue::new(QueueConfig::new(QueuePolicy::Random, ON_SALE_MS, seed));
            for account in &accounts {
                q.join(account, 0).unwrap();
            }
            q.open(ON_SALE_MS);
            order(&q)
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn opens_lazily_at_on_sale() {
        let mut q = queue(QueuePolicy::Random);
        join_all(&mut q, &["a", "b"], 0);
        assert!(matches!(
            q.status("a", ON_SALE_MS - 1),
            Some(Status::Waiting {
                provisional: true,
                ..
            })
        ));
        assert_eq!(q.opened(), None);
        q.open_if_due(ON_SALE_MS - 1);
        assert_eq!(q.opened(), None);
        q.open_if_due(ON_SALE_MS);
        assert!(matches!(
            q.status("a", ON_SALE_MS),
            Some(Status::Waiting {
                provisional: false,
                ..
            })
        ));
        assert!(q.opened().is_some());
    }

    #[test]
    fn advance_releases_in_position_order() {
        let mut q = queue(QueuePolicy::Fifo);
        join_all(&mut q, &["a", "b", "c", "d"], ON_SALE_MS - 1);
        assert_eq!(
            q.advance(10, ON_SALE_MS - 1),
            0,
            "nothing released before on-sale"
        );
        assert_eq!(q.advance(2, ON_SALE_MS), 2);
        q.invariants();
        let now = ON_SALE_MS + 1;
        let cases = [
            ("a", Some(Status::Released { position: 1 })),
            ("b", Some(Status::Released { position: 2 })),
            (
                "c",
                Some(Status::Waiting {
                    position: 3,
                    ahead_of_you: 0,
                    provisional: false,
                }),
            ),
            (
                "d",
                Some(Status::Waiting {
                    position: 4,
                    ahead_of_you: 1,
                    provisional: false,
                }),
            ),
            ("zed", None),
        ];
        for (account, expected) in cases {
            assert_eq!(q.status(account, now), expected, "{account}");
        }
    }

    #[test]
    fn advance_never_releases_accounts_that_have_not_joined() {
        let mut q = queue(QueuePolicy::Fifo);
        join_all(&mut q, &["a"], ON_SALE_MS);
        assert_eq!(q.advance(100, ON_SALE_MS), 1);
        assert_eq!(q.advance(100, ON_SALE_MS), 0);
        join_all(&mut q, &["b"], ON_SALE_MS + 1);
        assert!(matches!(
            q.status("b", ON_SALE_MS + 1),
            Some(Status::Waiting { position: 2, .. })
        ));
        assert_eq!(q.serving(), 1);
        assert_eq!(q.waiting(), 1);
    }

    #[test]
    fn a_released_place_expires_after_the_claim_window() {
        let window_ms = 1_000;
        let mut config = QueueConfig::new(QueuePolicy::Fifo, ON_SALE_MS, 42);
        config.claim_window_ms = window_ms;
        let mut q = EventQueue::new(config);
        join_all(&mut q, &["a", "b"], ON_SALE_MS);
        q.advance(1, ON_SALE_MS);
        q.advance(1, ON_SALE_MS + 500);
        q.invariants();
        let cases = [
            (
                "a",
                ON_SALE_MS + window_ms,
                Status::Released { position: 1 },
            ),
            (
                "a",
                ON_SALE_MS + window_ms + 1,
                Status::Expired { position: 1 },
            ),
            (
                "b",
                ON_SALE_MS + window_ms + 1,
                Status::Released { position: 2 },
            ),
            (
                "b",
                ON_SALE_MS + 500 + window_ms + 1,
                Status::Expired { position: 2 },
            ),
        ];
        for (account, now_ms, expected) in cases {
            assert_eq!(
                q.status(account, now_ms),
                Some(expected),
                "{account} at {now_ms}"
            );
        }
    }

    #[test]
    fn holds_two_hundred_thousand_accounts_with_correct_positions() {
        const N: u64 = 200_000;
        for policy in [QueuePolicy::Fifo, QueuePolicy::Random] {
            let mut q = queue(policy);
            for i in 0..N / 2 {
                q.join(&format!("acct-{i}"), ON_SALE_MS - 1).unwrap();
            }
            for i in N / 2..N {
                q.join(&format!("acct-{i}"), ON_SALE_MS).unwrap();
            }
            assert_eq!(q.len(), N);
            q.invariants();
            // Later joiners keep join order after the (possibly shuffled) pre-queue.
            for i in [N / 2, N / 2 + 1, N - 1] {
                let place = q.join(&format!("acct-{i}"), ON_SALE_MS + 1).unwrap();
                assert_eq!(place.position, i + 1);
            }
            if policy == QueuePolicy::Fifo {
                let place = q.join("acct-0", ON_SALE_MS + 1).unwrap();
                assert_eq!(place.position, 1);
            }
            let mut positions: Vec<u64> = q.positions().map(|(_, p)| p).collect();
            positions.sort_unstable();
            assert!(positions.iter().copied().eq(1..=N));
            q.advance(1_000, ON_SALE_MS + 2);
            let last = format!("acct-{}", N - 1);
            assert_eq!(
                q.status(&last, ON_SALE_MS + 2),
                Some(Status::Waiting {
                    position: N,
                    ahead_of_you: N - 1_000 - 1,
                    provisional: false
                })
            );
        }
    }

    proptest::proptest! {
        /// Any mix of joins, polls, opens and advances keeps one place per account, positions
        /// a permutation of 1..=len, and the serving counter within the queue.
        #[test]
        fn random_operations_keep_the_queue_consistent(
            policy_random in proptest::bool::ANY,
            seed in proptest::num::u64::ANY,
            ops in proptest::collection::vec((0u8..4, 0u16..40, 0i64..50), 1..150),
        ) {
            let policy = if policy_random { QueuePolicy::Random } else { QueuePolicy::Fifo };
            let mut q = EventQueue::new(QueueConfig::new(policy, 1_000, seed));
            let mut joined = std::collections::HashSet::new();
            let mut now_ms = 900;
            for (kind, account, step_ms) in ops {
                now_ms += step_ms;
                let account = format!("acct-{account}");
                match kind {
                    0 => {
                        let place = q.join(&account, now_ms).unwrap();
                        proptest::prop_assert_eq!(place.joined_before, !joined.insert(account.clone()));
                        proptest::prop_assert_eq!(&order(&q)[place.position as usize - 1], &account);
                    }
                    1 => {
                        let status = q.status(&account, now_ms);
                        proptest::prop_assert_eq!(status.is_none(), !joined.contains(&account));
                    }
                    2 => {
                        let serving_before = q.serving();
                        let released = q.advance(step_ms.unsigned_abs() % 5, now_ms);
                        proptest::prop_assert_eq!(q.serving(), serving_before + released);
                    }
                    _ => {
                        if now_ms >= 1_000 {
                            q.open(now_ms);
                        }
                    }
                }
                q.invariants();
                order(&q);
                proptest::prop_assert_eq!(q.len(), joined.len() as u64);
            }
        }
    }
}
