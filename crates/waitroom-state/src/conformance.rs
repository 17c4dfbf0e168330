//! The tests every [`RoomStore`] backend must pass, written once. Each backend's test file
//! calls them (`tests/memory.rs`, `tests/redis.rs`). Every function uses fresh event ids, so
//! they may share one store.
//!
//! The strongest one is [`matches_the_model`]: a random sequence of ops applied to the
//! backend and to the pure [`Room`] must give the same answers and the same views.

use std::collections::HashSet;
use std::sync::Arc;

use boxoffice_waitroom::admission::{REFUSED_GRACE_MS, Shop, SlotCounts, SlotState};
use boxoffice_waitroom::queue::{QueueConfig, QueuePolicy, Status};
use boxoffice_waitroom::room::{ClaimOutcome, Controls, Op, OpResult, Room, RoomConfig};

use crate::RoomStore;

/// On-sale time of the test rooms (unix ms); tests pass their own clock.
pub const ON_SALE_MS: i64 = 1_000_000;

pub fn config(policy: QueuePolicy, seed: u64, max_active: u64) -> RoomConfig {
    let mut queue = QueueConfig::new(policy, ON_SALE_MS, seed);
    queue.claim_window_ms = 10_000;
    RoomConfig {
        queue,
        max_active_shoppers: max_active,
        admission_ttl_ms: 5_000,
        hold_window_ms: 2_000,
        release: boxoffice_waitroom::controller::ControllerConfig::default(),
    }
}

fn event_id(tag: &str) -> String {
    format!("evt-{tag}-{}", uuid::Uuid::now_v7().simple())
}

/// Accounts in position order, from each account's index and the store's view.
async fn order(store: &dyn RoomStore, event: &str, accounts: &[String]) -> Vec<String> {
    let view = store.view(event).await.unwrap();
    let mut placed = Vec::new();
    for account in accounts {
        let index = store.index_of(event, account).await.unwrap().unwrap();
        placed.push((view.position(index).0, account.clone()));
    }
    placed.sort();
    let positions: Vec<u64> = placed.iter().map(|(p, _)| *p).collect();
    assert_eq!(positions, (1..=accounts.len() as u64).collect::<Vec<_>>());
    placed.into_iter().map(|(_, account)| account).collect()
}

/// Sequential joins keep FIFO order, before and after on-sale.
pub async fn fifo_keeps_join_order(store: &dyn RoomStore) {
    let event = event_id("fifo");
    store
        .ensure_room(&event, config(QueuePolicy::Fifo, 1, 10))
        .await
        .unwrap();
    let accounts: Vec<String> = (0..30).map(|i| format!("fan-{i}")).collect();
    for (i, account) in accounts.iter().enumerate() {
        let now = ON_SALE_MS - 15 + i as i64;
        let place = store.join(&event, account, now).await.unwrap().unwrap();
        assert_eq!(place.position, i as u64 + 1);
        assert!(!place.provisional);
    }
    assert_eq!(order(store, &event, &accounts).await, accounts);
}

/// Joining again (another device) returns the same place and adds nobody.
pub async fn one_place_per_account(store: &dyn RoomStore) {
    for policy in [QueuePolicy::Fifo, QueuePolicy::Random] {
        let event = event_id("once");
        store
            .ensure_room(&event, config(policy, 3, 10))
            .await
            .unwrap();
        let first = store.join(&event, "alice", 0).await.unwrap().unwrap();
        store.join(&event, "bob", 0).await.unwrap().unwrap();
        let again = store.join(&event, "alice", 5).await.unwrap().unwrap();
        assert_eq!((again.index, again.position), (first.index, first.position));
        assert!(again.joined_before && !first.joined_before);
        assert_eq!(store.stats(&event).await.unwrap().joined, 2);
    }
}

/// The random policy shuffles the pre-queue once at on-sale: a permutation (nobody lost or
/// duplicated), different from join order and from another seed's, appended to by later
/// joiners.
pub async fn random_shuffle_is_a_seeded_permutation(store: &dyn RoomStore) {
    let accounts: Vec<String> = (0..200).map(|i| format!("fan-{i}")).collect();
    let mut orders = Vec::new();
    for seed in [11, 12] {
        let event = event_id("random");
        store
            .ensure_room(&event, config(QueuePolicy::Random, seed, 10))
            .await
            .unwrap();
        for account in &accounts {
            let place = store
                .join(&event, account, ON_SALE_MS - 100)
                .await
                .unwrap()
                .unwrap();
            assert!(place.provisional);
        }
        assert_eq!(order(store, &event, &accounts).await, accounts);
        store.tick(&event, ON_SALE_MS, 0).await.unwrap();
        let opened = store.view(&event).await.unwrap().opened.unwrap();
        assert_eq!(opened.permutation_seed, Some(seed));
        assert_eq!(opened.pre_queue_len, 200);
        let shuffled = order(store, &event, &accounts).await;
        let mut sorted = shuffled.clone();
        sorted.sort();
        let mut expected = accounts.clone();
        expected.sort();
        assert_eq!(sorted, expected, "a permutation");
        assert_ne!(shuffled, accounts, "shuffled");
        let late = store
            .join(&event, "late", ON_SALE_MS + 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(late.position, 201);
        assert!(!late.provisional);
        orders.push(shuffled);
    }
    assert_ne!(orders[0], orders[1], "another seed, another order");
}

/// Many accounts claiming at once never push active shoppers over the cap; ending an
/// admission gives its slot back at once; a late end for an older admission does nothing.
pub async fn cap_holds_under_concurrent_claims(store: Arc<dyn RoomStore>) {
    const ACCOUNTS: usize = 1_000;
    const CAP: u64 = 40;
    let event = event_id("cap");
    store
        .ensure_room(&event, config(QueuePolicy::Fifo, 1, CAP))
        .await
        .unwrap();
    for i in 0..ACCOUNTS {
        store
            .join(&event, &format!("fan-{i}"), ON_SALE_MS)
            .await
            .unwrap()
            .unwrap();
    }
    // Release everyone: the cap, not the release, must hold them back.
    assert_eq!(
        store
            .tick(&event, ON_SALE_MS, ACCOUNTS as u64)
            .await
            .unwrap(),
        ACCOUNTS as u64
    );
    let mut tasks = Vec::new();
    for i in 0..ACCOUNTS {
        let store = store.clone();
        let event = event.clone();
        tasks.push(tokio::spawn(async move {
            let account = format!("fan-{i}");
            let outcome = store
                .claim(&event, &account, &format!("s-{i}"), ON_SALE_MS + 1)
                .await
                .unwrap();
            let active = store.stats(&event).await.unwrap().active;
            assert!(active <= CAP, "{active} active over the cap {CAP}");
            (account, outcome)
        }));
    }
    let mut admitted = Vec::new();
    for task in tasks {
        let (account, outcome) = task.await.unwrap();
        match outcome {
            ClaimOutcome::Admitted(admission) => admitted.push((account, admission)),
            ClaimOutcome::Full => {}
            other => panic!("{account}: {other:?}"),
        }
    }
    assert_eq!(admitted.len() as u64, CAP);
    assert_eq!(store.stats(&event).await.unwrap().active, CAP);
    // Claiming again returns the same admission and takes no slot.
    let (first, admission) = &admitted[0];
    assert_eq!(
        store
            .claim(&event, first, "another-session", ON_SALE_MS + 2)
            .await
            .unwrap(),
        ClaimOutcome::Admitted(admission.clone())
    );
    assert_eq!(
        store
            .admission(&event, first, ON_SALE_MS + 2)
            .await
            .unwrap()
            .as_ref(),
        Some(admission)
    );
    // A late end about something older than the admission changes nothing.
    assert!(!store.end(&event, first, ON_SALE_MS).await.unwrap());
    assert!(store.end(&event, first, ON_SALE_MS + 3).await.unwrap());
    assert!(!store.end(&event, first, ON_SALE_MS + 3).await.unwrap());
    assert_eq!(store.stats(&event).await.unwrap().active, CAP - 1);
    let admitted_accounts: HashSet<&str> = admitted.iter().map(|(a, _)| a.as_str()).collect();
    let waiting = (0..ACCOUNTS)
        .map(|i| format!("fan-{i}"))
        .find(|a| !admitted_accounts.contains(a.as_str()))
        .unwrap();
    assert!(matches!(
        store
            .claim(&event, &waiting, "s-next", ON_SALE_MS + 4)
            .await
            .unwrap(),
        ClaimOutcome::Admitted(_)
    ));
    assert_eq!(
        store
            .claim(&event, "never-joined", "s", ON_SALE_MS + 4)
            .await
            .unwrap(),
        ClaimOutcome::NotReleased
    );
}

/// Release follows the queue: nothing before on-sale, never past the last joiner; a released
/// place expires after the claim window; admissions expire after their TTL at the next tick.
pub async fn release_and_expiry(store: &dyn RoomStore) {
    let event = event_id("release");
    store
        .ensure_room(&event, config(QueuePolicy::Fifo, 1, 100))
        .await
        .unwrap();
    for account in ["a", "b", "c"] {
        store
            .join(&event, account, ON_SALE_MS - 10)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(store.tick(&event, ON_SALE_MS - 5, 10).await.unwrap(), 0);
    assert_eq!(store.view(&event).await.unwrap().opened, None);
    assert_eq!(store.tick(&event, ON_SALE_MS, 2).await.unwrap(), 2);
    assert_eq!(store.tick(&event, ON_SALE_MS + 1, 10).await.unwrap(), 1);
    assert_eq!(store.tick(&event, ON_SALE_MS + 2, 10).await.unwrap(), 0);
    let view = store.view(&event).await.unwrap();
    assert_eq!(view.serving, 3);
    assert_eq!(
        view.status(0, ON_SALE_MS + 10_000),
        Status::Released { position: 1 }
    );
    assert_eq!(
        view.status(0, ON_SALE_MS + 10_001),
        Status::Expired { position: 1 }
    );
    assert_eq!(
        store
            .claim(&event, "a", "s-a", ON_SALE_MS + 10_001)
            .await
            .unwrap(),
        ClaimOutcome::Expired
    );
    assert!(matches!(
        store
            .claim(&event, "b", "s-b", ON_SALE_MS + 100)
            .await
            .unwrap(),
        ClaimOutcome::Admitted(_)
    ));
    assert_eq!(store.stats(&event).await.unwrap().active, 1);
    store.tick(&event, ON_SALE_MS + 5_100, 0).await.unwrap();
    assert_eq!(store.stats(&event).await.unwrap().active, 0, "TTL passed");
    assert_eq!(
        store
            .admission(&event, "b", ON_SALE_MS + 5_100)
            .await
            .unwrap(),
        None
    );
}

/// A slot follows what its fan does (issue 35): idle from admission until the hold window
/// passes (30 s here), holding, paying; a refusal cuts an idle slot's window to
/// `REFUSED_GRACE_MS`; a hold that ended frees the slot and keeps the admission, whose next
/// claim takes a slot again if one is free and else waits at the head (`Full`); a confirmed
/// order (`end`) ends the admission.
pub async fn slots_follow_shoppers(store: &dyn RoomStore) {
    let event = event_id("slots");
    let mut config = config(QueuePolicy::Fifo, 1, 2);
    config.hold_window_ms = 30_000;
    config.admission_ttl_ms = 60_000;
    config.queue.claim_window_ms = 100_000;
    store.ensure_room(&event, config).await.unwrap();
    for account in ["a", "b", "c"] {
        store
            .join(&event, account, ON_SALE_MS - 10)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(store.tick(&event, ON_SALE_MS, 3).await.unwrap(), 3);
    let at = |ms: i64| ON_SALE_MS + ms;
    let claimed = |outcome: ClaimOutcome| match outcome {
        ClaimOutcome::Admitted(admission) => Some(admission),
        _ => None,
    };
    let a = claimed(store.claim(&event, "a", "s-a", at(10)).await.unwrap()).unwrap();
    assert_eq!(
        a.slot.map(|slot| (slot.state, slot.idle_until_ms)),
        Some((SlotState::Idle, at(30_010)))
    );
    claimed(store.claim(&event, "b", "s-b", at(10)).await.unwrap()).unwrap();
    assert_eq!(
        store.claim(&event, "c", "s-c", at(20)).await.unwrap(),
        ClaimOutcome::Full
    );
    // b gets a hold, then pays; a is refused: its slot stays only the grace.
    assert!(store.shop(&event, "b", Shop::Held, at(30)).await.unwrap());
    assert!(
        store
            .shop(&event, "a", Shop::Refused, at(40))
            .await
            .unwrap()
    );
    assert!(
        !store
            .shop(&event, "a", Shop::Refused, at(45))
            .await
            .unwrap()
    );
    assert!(
        !store
            .shop(&event, "b", Shop::Refused, at(41))
            .await
            .unwrap()
    );
    assert!(store.shop(&event, "b", Shop::Paying, at(50)).await.unwrap());
    assert_eq!(
        store.stats(&event).await.unwrap().slots,
        SlotCounts {
            idle: 1,
            holding: 0,
            paying: 1
        }
    );
    let grace_end = at(40 + REFUSED_GRACE_MS);
    assert_eq!(
        store
            .claim(&event, "c", "s-c", grace_end - 1)
            .await
            .unwrap(),
        ClaimOutcome::Full
    );
    // a walked away: past the grace its slot goes to c.
    claimed(store.claim(&event, "c", "s-c", grace_end).await.unwrap()).unwrap();
    // a's admission is still live (a second try) but has no slot, and none is free.
    let a_now = store
        .admission(&event, "a", grace_end + 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a_now.session_id, "s-a");
    assert_eq!(a_now.slot, None);
    assert_eq!(
        store
            .claim(&event, "a", "s-a2", grace_end + 20)
            .await
            .unwrap(),
        ClaimOutcome::Full
    );
    // c stays idle past the hold window: its slot no longer counts, and a takes it with the
    // same session.
    let c_gone = grace_end + 30_000;
    let again = claimed(store.claim(&event, "a", "s-a2", c_gone).await.unwrap()).unwrap();
    assert_eq!(again.session_id, "s-a");
    assert_eq!(again.slot.map(|slot| slot.taken_at_ms), Some(c_gone));
    assert_eq!(
        store
            .admission(&event, "c", c_gone)
            .await
            .unwrap()
            .unwrap()
            .slot,
        None
    );
    // b's order is confirmed: the admission ends with its slot. A hold of a's that ended
    // before a took its slot again frees nothing of the new slot; one after it does.
    assert!(store.end(&event, "b", c_gone + 10).await.unwrap());
    assert_eq!(
        store.admission(&event, "b", c_gone + 10).await.unwrap(),
        None
    );
    assert!(
        !store
            .shop(&event, "a", Shop::Ended, c_gone - 1)
            .await
            .unwrap()
    );
    assert!(
        store
            .shop(&event, "a", Shop::Held, c_gone + 20)
            .await
            .unwrap()
    );
    assert!(
        store
            .shop(&event, "a", Shop::Ended, c_gone + 30)
            .await
            .unwrap()
    );
    store.tick(&event, c_gone + 40, 0).await.unwrap();
    let stats = store.stats(&event).await.unwrap();
    assert_eq!(stats.active, 0);
    assert_eq!(stats.slots, SlotCounts::default());
    assert!(
        store
            .admission(&event, "a", c_gone + 40)
            .await
            .unwrap()
            .is_some()
    );
    // The admission's TTL ends it.
    store.tick(&event, at(60_010), 0).await.unwrap();
    assert_eq!(
        store.admission(&event, "a", at(60_010)).await.unwrap(),
        None
    );
}

/// A tick with a clock behind the last release's (a clock stepped back, or a new leader's
/// behind the old one's) releases at the last release's time, never before it: release
/// times stay in order, as `Room::invariants` requires. Found by the `waitroom_journal`
/// fuzz target (a journal with a tick at 8,399 ms and then one at 1,000 ms).
pub async fn a_clock_behind_never_dates_a_release_earlier(store: &dyn RoomStore) {
    let event = event_id("clock-behind");
    store
        .ensure_room(&event, config(QueuePolicy::Fifo, 1, 100))
        .await
        .unwrap();
    for account in ["a", "b"] {
        store
            .join(&event, account, ON_SALE_MS - 10)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(store.tick(&event, ON_SALE_MS + 7_000, 1).await.unwrap(), 1);
    assert_eq!(store.tick(&event, ON_SALE_MS, 1).await.unwrap(), 1);
    let view = store.view(&event).await.unwrap();
    let released_at: Vec<i64> = view.releases.iter().map(|r| r.released_at_ms).collect();
    assert_eq!(released_at, [ON_SALE_MS + 7_000, ON_SALE_MS + 7_000]);
    // The second fan's claim window runs from the later time, as the first one's does.
    assert_eq!(
        view.status(1, ON_SALE_MS + 17_000),
        Status::Released { position: 2 }
    );
}

/// The operator's controls are kept and shown.
pub async fn controls_are_kept(store: &dyn RoomStore) {
    let event = event_id("controls");
    store
        .ensure_room(&event, config(QueuePolicy::Fifo, 1, 100))
        .await
        .unwrap();
    let controls = Controls {
        paused: true,
        max_release_per_s: Some(25),
    };
    assert_eq!(
        store.set_controls(&event, controls).await.unwrap(),
        controls
    );
    assert_eq!(store.stats(&event).await.unwrap().controls, controls);
    // An existing room keeps its config.
    let kept = store
        .ensure_room(&event, config(QueuePolicy::Random, 9, 1))
        .await
        .unwrap();
    assert_eq!(kept, config(QueuePolicy::Fifo, 1, 100));
}

/// A random sequence of ops gives the same answers, views and stats on the backend as on the
/// pure model.
pub async fn matches_the_model(store: &dyn RoomStore, seed: u64) {
    let event = event_id("model");
    let policy = if seed.is_multiple_of(2) {
        QueuePolicy::Random
    } else {
        QueuePolicy::Fifo
    };
    let config = config(policy, seed, 4);
    store.ensure_room(&event, config).await.unwrap();
    let mut model = Room::new(config);
    let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = |bound: u64| {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) % bound
    };
    let mut now_ms = ON_SALE_MS - 2_000;
    for step in 0..400 {
        now_ms += next(120) as i64;
        let account = format!("fan-{}", next(40));
        let op = match next(12) {
            0..=3 => Op::Join {
                account_id: account,
                now_ms,
            },
            4..=5 => Op::Claim {
                account_id: account,
                session_id: format!("s-{step}"),
                now_ms,
            },
            6 => Op::End {
                account_id: account,
                at_ms: now_ms - next(3) as i64 * 1_000,
            },
            10..=11 => Op::Shop {
                account_id: account,
                shop: [Shop::Held, Shop::Paying, Shop::Refused, Shop::Ended][next(4) as usize],
                at_ms: now_ms - next(2) as i64 * 500,
            },
            7..=8 => Op::Tick {
                now_ms,
                release: next(4),
            },
            _ => Op::Control(Controls {
                paused: next(2) == 0,
                max_release_per_s: Some(next(100)),
            }),
        };
        let expected = model.apply(&op);
        let got = match &op {
            Op::Join { account_id, now_ms } => {
                OpResult::Joined(store.join(&event, account_id, *now_ms).await.unwrap())
            }
            Op::Claim {
                account_id,
                session_id,
                now_ms,
            } => OpResult::Claimed(
                store
                    .claim(&event, account_id, session_id, *now_ms)
                    .await
                    .unwrap(),
            ),
            Op::End { account_id, at_ms } => {
                OpResult::Ended(store.end(&event, account_id, *at_ms).await.unwrap())
            }
            Op::Shop {
                account_id,
                shop,
                at_ms,
            } => OpResult::Shopped(store.shop(&event, account_id, *shop, *at_ms).await.unwrap()),
            Op::Tick { now_ms, release } => OpResult::Ticked {
                released: store.tick(&event, *now_ms, *release).await.unwrap(),
            },
            Op::Control(controls) => {
                OpResult::Controlled(store.set_controls(&event, *controls).await.unwrap())
            }
        };
        assert_eq!(got, expected, "step {step}: {op:?}");
        assert_eq!(
            &store.view(&event).await.unwrap(),
            model.view(),
            "step {step}"
        );
        assert_eq!(
            store.stats(&event).await.unwrap(),
            model.stats(),
            "step {step}"
        );
        model.invariants();
    }
}

/// Places, the serving counter, admissions and controls survive a restart: `reopen` gives a
/// new store over the same state.
pub async fn restart_keeps_places<F>(before: Arc<dyn RoomStore>, reopen: F)
where
    F: FnOnce() -> Arc<dyn RoomStore>,
{
    let event = event_id("restart");
    let config = config(QueuePolicy::Random, 77, 10);
    before.ensure_room(&event, config).await.unwrap();
    let accounts: Vec<String> = (0..50).map(|i| format!("fan-{i}")).collect();
    for account in &accounts {
        before
            .join(&event, account, ON_SALE_MS - 1)
            .await
            .unwrap()
            .unwrap();
    }
    before.tick(&event, ON_SALE_MS, 5).await.unwrap();
    let order_before = order(before.as_ref(), &event, &accounts).await;
    let first = &order_before[0];
    let ClaimOutcome::Admitted(admission) = before
        .claim(&event, first, "s-first", ON_SALE_MS + 1)
        .await
        .unwrap()
    else {
        panic!("the first place was not admitted");
    };
    let controls = Controls {
        paused: true,
        max_release_per_s: Some(3),
    };
    before.set_controls(&event, controls).await.unwrap();
    let stats_before = before.stats(&event).await.unwrap();
    let view_before = before.view(&event).await.unwrap();
    drop(before);

    let after = reopen();
    assert!(
        after
            .rooms()
            .await
            .unwrap()
            .contains(&(event.clone(), config))
    );
    assert_eq!(after.view(&event).await.unwrap(), view_before);
    assert_eq!(after.stats(&event).await.unwrap(), stats_before);
    assert_eq!(order(after.as_ref(), &event, &accounts).await, order_before);
    assert_eq!(
        after
            .admission(&event, first, ON_SALE_MS + 2)
            .await
            .unwrap(),
        Some(admission)
    );
    let again = after
        .join(&event, &accounts[7], ON_SALE_MS + 3)
        .await
        .unwrap()
        .unwrap();
    assert!(again.joined_before);
    assert_eq!(after.tick(&event, ON_SALE_MS + 4, 1).await.unwrap(), 1);
}
