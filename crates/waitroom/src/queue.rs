//! The queue of one event: the pre-queue before on-sale, the order fixed at on-sale, the
//! 1-based positions and the serving counter that releases them.
//!
//! Before `on_sale_at_ms` joiners wait in a pre-queue in join order. The first call at or
//! after on-sale ([`EventQueue::open`], or lazily [`EventQueue::join`] /
//! [`EventQueue::status`]) fixes the order once: [`QueuePolicy::Fifo`] keeps join order,
//! [`QueuePolicy::Random`] shuffles the pre-queue with a seeded Fisher–Yates so the same seed
//! always gives the same order (replayable, auditable). Later joiners are appended. Positions
//! `<= serving` are released; [`EventQueue::advance`] moves `serving` forward, and the release
//! controller decides by how much.
//!
//! Memory: one boxed account id in the order vector and one as the index key per account,
//! plus a `u32` index: roughly 110-150 bytes per account for 20-byte ids (allocator rounding
//! and the vector and map growing by doubling included), so two million accounts take about
//! 300 MB at most. The HTTP layer and a Redis
//! backend shared by several server processes come later; this is the in-memory model they
//! must agree with.

use std::collections::HashMap;

/// Most accounts one event's queue holds. Positions are indexed by `u32`; this keeps well
/// below that and bounds memory (see the module docs for the per-account cost).
pub const QUEUE_ACCOUNTS_MAX: usize = 5_000_000;
/// Longest account id accepted, in bytes (the domain's `ACCOUNT_ID_LEN_MAX`).
pub const ACCOUNT_ID_LEN_MAX_BYTES: usize = 64;
/// How long a released account may take to come and claim its admission before its place
/// is reported `EXPIRED`, in milliseconds.
pub const CLAIM_WINDOW_DEFAULT_MS: i64 = 10 * 60 * 1000;

/// How the pre-queue is ordered at on-sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// An account's place, as returned by [`EventQueue::join`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// 1-based position. While `provisional`, it is the join order and may change at on-sale.
    pub position: u64,
    /// True before on-sale under [`QueuePolicy::Random`]: the shuffle has not happened yet.
    pub provisional: bool,
    /// True when the account had already joined; the place returned is the same one.
    pub joined_before: bool,
}

/// What [`EventQueue::status`] reports for an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not released yet. `ahead_of_you` counts unreleased positions before this one.
    Waiting {
        position: u64,
        ahead_of_you: u64,
        /// See [`Place::provisional`].
        provisional: bool,
    },
    /// Released and still within the claim window: the caller may issue an admission.
    Admitted { position: u64 },
    /// Released, but the claim window passed without the account taking its turn.
    Expired { position: u64 },
    /// The account never joined this queue.
    Unknown,
}

/// The fixed order, once the queue has opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub opened_at_ms: i64,
    /// The seed the shuffle used (`None` under FIFO), recorded so the order can be replayed.
    pub permutation_seed: Option<u64>,
    /// How many accounts were in the pre-queue when it opened.
    pub pre_queue_len: u64,
}

/// One release by [`EventQueue::advance`]: positions up to `serving_after` released at
/// `released_at_ms`. Kept so a position's claim window starts when it was released, not when
/// the account polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Release {
    serving_after: u64,
    released_at_ms: i64,
}

/// The queue of one event. See the module docs.
#[derive(Debug)]
pub struct EventQueue {
    policy: QueuePolicy,
    on_sale_at_ms: i64,
    seed: u64,
    claim_window_ms: i64,
    /// Account ids by position: `order[i]` holds position `i + 1` once opened, join order
    /// before.
    order: Vec<Box<str>>,
    /// Account id to its index in `order`. A `u32` rather than `usize` saves 4 bytes per
    /// account at two million accounts.
    index: HashMap<Box<str>, u32>,
    opened: Option<Opened>,
    /// Positions `<= serving` are released. Never exceeds `order.len()`, so a release never
    /// applies to accounts that have not joined yet.
    serving: u64,
    /// One entry per non-empty advance, in order of `serving_after`.
    releases: Vec<Release>,
}

impl EventQueue {
    pub fn new(policy: QueuePolicy, on_sale_at_ms: i64, seed: u64) -> Self {
        Self {
            policy,
            on_sale_at_ms,
            seed,
            claim_window_ms: CLAIM_WINDOW_DEFAULT_MS,
            order: Vec::new(),
            index: HashMap::new(),
            opened: None,
            serving: 0,
            releases: Vec::new(),
        }
    }

    /// Replaces [`CLAIM_WINDOW_DEFAULT_MS`].
    pub fn with_claim_window_ms(mut self, claim_window_ms: i64) -> Self {
        self.claim_window_ms = claim_window_ms;
        self
    }

    pub fn policy(&self) -> QueuePolicy {
        self.policy
    }

    pub fn on_sale_at_ms(&self) -> i64 {
        self.on_sale_at_ms
    }

    /// `None` until the queue opened.
    pub fn opened(&self) -> Option<Opened> {
        self.opened
    }

    /// Highest released position.
    pub fn serving(&self) -> u64 {
        self.serving
    }

    /// Accounts in the queue, released ones included.
    pub fn len(&self) -> u64 {
        self.order.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Accounts not released yet.
    pub fn waiting(&self) -> u64 {
        self.len() - self.serving
    }

    /// Gives `account_id` a place, or returns the place it already has.
    pub fn join(&mut self, account_id: &str, now_ms: i64) -> Result<Place, JoinError> {
        if account_id.is_empty() || account_id.len() > ACCOUNT_ID_LEN_MAX_BYTES {
            return Err(JoinError::InvalidAccountId);
        }
        self.open_if_due(now_ms);
        if let Some(&i) = self.index.get(account_id) {
            return Ok(self.place(i, true));
        }
        if self.order.len() >= QUEUE_ACCOUNTS_MAX {
            return Err(JoinError::QueueFull);
        }
        let i = u32::try_from(self.order.len()).map_err(|_| JoinError::QueueFull)?;
        let boxed: Box<str> = account_id.into();
        self.order.push(boxed.clone());
        self.index.insert(boxed, i);
        Ok(self.place(i, false))
    }

    fn place(&self, i: u32, joined_before: bool) -> Place {
        Place {
            position: u64::from(i) + 1,
            provisional: self.is_provisional(),
            joined_before,
        }
    }

    fn is_provisional(&self) -> bool {
        self.opened.is_none() && self.policy == QueuePolicy::Random
    }

    /// Where `account_id` stands at `now_ms`.
    pub fn status(&mut self, account_id: &str, now_ms: i64) -> Status {
        self.open_if_due(now_ms);
        let Some(&i) = self.index.get(account_id) else {
            return Status::Unknown;
        };
        let position = u64::from(i) + 1;
        if position > self.serving {
            return Status::Waiting {
                position,
                ahead_of_you: position - self.serving - 1,
                provisional: self.is_provisional(),
            };
        }
        match self.released_at_ms(position) {
            Some(released_at_ms)
                if now_ms > released_at_ms.saturating_add(self.claim_window_ms) =>
            {
                Status::Expired { position }
            }
            _ => Status::Admitted { position },
        }
    }

    /// When `position` (already released) was released.
    fn released_at_ms(&self, position: u64) -> Option<i64> {
        let i = self
            .releases
            .partition_point(|release| release.serving_after < position);
        self.releases.get(i).map(|release| release.released_at_ms)
    }

    fn open_if_due(&mut self, now_ms: i64) {
        if self.opened.is_none() && now_ms >= self.on_sale_at_ms {
            self.open(now_ms);
        }
    }

    /// Fixes the order: shuffles the pre-queue under [`QueuePolicy::Random`]. Idempotent; may
    /// be called before `on_sale_at_ms` by an operator opening early.
    pub fn open(&mut self, now_ms: i64) -> Opened {
        if let Some(opened) = self.opened {
            return opened;
        }
        let permutation_seed = match self.policy {
            QueuePolicy::Fifo => None,
            QueuePolicy::Random => {
                shuffle(&mut self.order, self.seed);
                for (i, account_id) in self.order.iter().enumerate() {
                    // The order length never exceeds QUEUE_ACCOUNTS_MAX < u32::MAX.
                    if let Some(slot) = self.index.get_mut(account_id) {
                        *slot = i as u32;
                    }
                }
                Some(self.seed)
            }
        };
        let opened = Opened {
            opened_at_ms: now_ms,
            permutation_seed,
            pre_queue_len: self.len(),
        };
        self.opened = Some(opened);
        opened
    }

    /// Releases up to `n` more positions at `now_ms`; returns how many were released. Nothing
    /// is released before the queue opens, nor past the last account that joined.
    pub fn advance(&mut self, n: u64, now_ms: i64) -> u64 {
        self.open_if_due(now_ms);
        if self.opened.is_none() {
            return 0;
        }
        let released = n.min(self.waiting());
        if released == 0 {
            return 0;
        }
        self.serving += released;
        self.releases.push(Release {
            serving_after: self.serving,
            released_at_ms: now_ms,
        });
        released
    }

    /// The account at a 1-based position, if any.
    pub fn account_at(&self, position: u64) -> Option<&str> {
        let i = usize::try_from(position.checked_sub(1)?).ok()?;
        self.order.get(i).map(|account_id| &**account_id)
    }

    /// Single-condition assertions over the whole queue; tests call this after every step.
    pub fn invariants(&self) {
        assert_eq!(self.order.len(), self.index.len());
        assert!(self.order.len() <= QUEUE_ACCOUNTS_MAX);
        assert!(self.serving <= self.len());
        for (i, account_id) in self.order.iter().enumerate() {
            assert_eq!(self.index.get(account_id).copied(), Some(i as u32));
        }
        for pair in self.releases.windows(2) {
            assert!(pair[0].serving_after < pair[1].serving_after);
        }
        assert_eq!(
            self.releases
                .last()
                .map_or(0, |release| release.serving_after),
            self.serving
        );
        if self.opened.is_none() {
            assert_eq!(self.serving, 0);
        }
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator; plenty for a fair
/// shuffle that must be reproducible from its seed, not secret.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift with rejection, so no modulo bias).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }
}

/// Fisher–Yates shuffle driven by [`SplitMix64`] seeded with `seed`.
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut rng = SplitMix64::new(seed);
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON_SALE_MS: i64 = 1_000_000;

    fn queue(policy: QueuePolicy) -> EventQueue {
        EventQueue::new(policy, ON_SALE_MS, 42)
    }

    fn join_all(q: &mut EventQueue, accounts: &[&str], now_ms: i64) {
        for account in accounts {
            q.join(account, now_ms).unwrap();
            q.invariants();
        }
    }

    fn order(q: &EventQueue) -> Vec<String> {
        (1..=q.len())
            .map(|p| q.account_at(p).unwrap().to_owned())
            .collect()
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
        assert_eq!(q.account_at(settled.position), Some("acct-0"));
    }

    #[test]
    fn the_same_seed_gives_the_same_order_and_another_seed_another() {
        let accounts: Vec<String> = (0..100).map(|i| format!("a{i}")).collect();
        let run = |seed: u64| {
            let mut q = EventQueue::new(QueuePolicy::Random, ON_SALE_MS, seed);
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
    fn opens_lazily_on_status_at_on_sale() {
        let mut q = queue(QueuePolicy::Random);
        join_all(&mut q, &["a", "b"], 0);
        assert!(matches!(
            q.status("a", ON_SALE_MS - 1),
            Status::Waiting {
                provisional: true,
                ..
            }
        ));
        assert_eq!(q.opened(), None);
        assert!(matches!(
            q.status("a", ON_SALE_MS),
            Status::Waiting {
                provisional: false,
                ..
            }
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
            ("a", Status::Admitted { position: 1 }),
            ("b", Status::Admitted { position: 2 }),
            (
                "c",
                Status::Waiting {
                    position: 3,
                    ahead_of_you: 0,
                    provisional: false,
                },
            ),
            (
                "d",
                Status::Waiting {
                    position: 4,
                    ahead_of_you: 1,
                    provisional: false,
                },
            ),
            ("zed", Status::Unknown),
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
            Status::Waiting { position: 2, .. }
        ));
        assert_eq!(q.serving(), 1);
        assert_eq!(q.waiting(), 1);
    }

    #[test]
    fn a_released_place_expires_after_the_claim_window() {
        let window_ms = 1_000;
        let mut q = queue(QueuePolicy::Fifo).with_claim_window_ms(window_ms);
        join_all(&mut q, &["a", "b"], ON_SALE_MS);
        q.advance(1, ON_SALE_MS);
        q.advance(1, ON_SALE_MS + 500);
        q.invariants();
        let cases = [
            (
                "a",
                ON_SALE_MS + window_ms,
                Status::Admitted { position: 1 },
            ),
            (
                "a",
                ON_SALE_MS + window_ms + 1,
                Status::Expired { position: 1 },
            ),
            (
                "b",
                ON_SALE_MS + window_ms + 1,
                Status::Admitted { position: 2 },
            ),
            (
                "b",
                ON_SALE_MS + 500 + window_ms + 1,
                Status::Expired { position: 2 },
            ),
        ];
        for (account, now_ms, expected) in cases {
            assert_eq!(q.status(account, now_ms), expected, "{account} at {now_ms}");
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SplitMix64::new(1);
        let mut seen = [false; 7];
        for _ in 0..1_000 {
            let x = rng.below(7);
            assert!(x < 7);
            seen[x as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn holds_two_hundred_thousand_accounts_with_correct_positions() {
        const N: u64 = 200_000;
        let started = std::time::Instant::now();
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
            q.advance(1_000, ON_SALE_MS + 2);
            let last = format!("acct-{}", N - 1);
            assert_eq!(
                q.status(&last, ON_SALE_MS + 2),
                Status::Waiting {
                    position: N,
                    ahead_of_you: N - 1_000 - 1,
                    provisional: false
                }
            );
        }
        // Generous bound for a debug build on a busy CI machine; the point is "not quadratic".
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
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
            let mut q = EventQueue::new(policy, 1_000, seed);
            let mut joined = std::collections::HashSet::new();
            let mut now_ms = 900;
            for (kind, account, step_ms) in ops {
                now_ms += step_ms;
                let account = format!("acct-{account}");
                match kind {
                    0 => {
                        let place = q.join(&account, now_ms).unwrap();
                        proptest::prop_assert_eq!(place.joined_before, !joined.insert(account.clone()));
                        proptest::prop_assert_eq!(q.account_at(place.position), Some(account.as_str()));
                    }
                    1 => {
                        let status = q.status(&account, now_ms);
                        proptest::prop_assert_eq!(status == Status::Unknown, !joined.contains(&account));
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
                proptest::prop_assert_eq!(q.len(), joined.len() as u64);
            }
        }
    }
}
