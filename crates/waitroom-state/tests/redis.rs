//! The Redis backend passes the shared backend tests, keeps its rooms across clients, and
//! hands the release controller's lease to one node at a time.
//!
//! Needs a Redis at `redis://127.0.0.1:6379` (or `BOXOFFICE_TEST_REDIS_URL`); the tests fail,
//! rather than skip, without one. The Redis may be shared: every test works under its own
//! key prefix and deletes every key under it when it ends, even when it fails. Nothing here
//! flushes a database.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_waitroom::queue::QueuePolicy;
use boxoffice_waitroom_state::redis::RedisRooms;
use boxoffice_waitroom_state::{RoomStore, StateError, conformance};

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

fn url() -> String {
    std::env::var("BOXOFFICE_TEST_REDIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// A fresh key prefix for one test; deletes every key under it when dropped.
struct Prefix(String);

impl Prefix {
    fn new() -> Self {
        Self(format!("bo:test:{}:", uuid::Uuid::now_v7().simple()))
    }

    async fn rooms(&self) -> RedisRooms {
        let url = url();
        RedisRooms::connect(&url, &self.0)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "the Redis tests need a Redis at {url} (set BOXOFFICE_TEST_REDIS_URL to use \
                 another): {e}"
                )
            })
    }

    /// Every key under the prefix, found with SCAN (never KEYS: the Redis may be shared).
    fn keys(&self, con: &mut redis::Connection) -> redis::RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(format!("{}*", self.0))
                .arg("COUNT")
                .arg(1_000)
                .query(con)?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    fn clean(&self) -> redis::RedisResult<()> {
        let mut con = redis::Client::open(url())?.get_connection()?;
        let keys = self.keys(&mut con)?;
        for chunk in keys.chunks(500) {
            redis::cmd("DEL").arg(chunk).query::<()>(&mut con)?;
        }
        Ok(())
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        if let Err(e) = self.clean() {
            eprintln!("could not delete the test keys under {}: {e}", self.0);
        }
    }
}

#[tokio::test]
async fn fifo_keeps_join_order() {
    let prefix = Prefix::new();
    conformance::fifo_keeps_join_order(&prefix.rooms().await).await;
}

#[tokio::test]
async fn one_place_per_account() {
    let prefix = Prefix::new();
    conformance::one_place_per_account(&prefix.rooms().await).await;
}

#[tokio::test]
async fn random_shuffle_is_a_seeded_permutation() {
    let prefix = Prefix::new();
    conformance::random_shuffle_is_a_seeded_permutation(&prefix.rooms().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cap_holds_under_concurrent_claims() {
    let prefix = Prefix::new();
    conformance::cap_holds_under_concurrent_claims(Arc::new(prefix.rooms().await)).await;
}

#[tokio::test]
async fn release_and_expiry() {
    let prefix = Prefix::new();
    conformance::release_and_expiry(&prefix.rooms().await).await;
}

#[tokio::test]
async fn a_clock_behind_never_dates_a_release_earlier() {
    let prefix = Prefix::new();
    conformance::a_clock_behind_never_dates_a_release_earlier(&prefix.rooms().await).await;
}

#[tokio::test]
async fn controls_are_kept() {
    let prefix = Prefix::new();
    conformance::controls_are_kept(&prefix.rooms().await).await;
}

#[tokio::test]
async fn matches_the_model() {
    let prefix = Prefix::new();
    let store = prefix.rooms().await;
    for seed in 0..6 {
        conformance::matches_the_model(&store, seed).await;
    }
}

#[tokio::test]
async fn restart_keeps_places() {
    let prefix = Prefix::new();
    let before = prefix.rooms().await;
    // `reopen` is synchronous: the second client connects up front and is first used after
    // the first one is dropped.
    let after = prefix.rooms().await;
    conformance::restart_keeps_places(Arc::new(before), move || {
        Arc::new(after) as Arc<dyn RoomStore>
    })
    .await;
}

#[tokio::test]
async fn every_key_lives_under_the_prefix_with_the_event_as_hash_tag() {
    let prefix = Prefix::new();
    let store = prefix.rooms().await;
    let config = conformance::config(QueuePolicy::Fifo, 1, 5);
    store.ensure_room("evt-keys", config).await.unwrap();
    store
        .join("evt-keys", "a", conformance::ON_SALE_MS)
        .await
        .unwrap()
        .unwrap();
    store
        .tick("evt-keys", conformance::ON_SALE_MS, 1)
        .await
        .unwrap();
    store
        .claim("evt-keys", "a", "s-a", conformance::ON_SALE_MS)
        .await
        .unwrap();
    store.lead("evt-keys", "node-a", 1_000).await.unwrap();
    let mut con = redis::Client::open(url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut keys = prefix.keys(&mut con).unwrap();
    keys.sort();
    let p = &prefix.0;
    let mut expected: Vec<String> = ["adm", "exp", "idle", "idx", "lead", "meta", "rel", "slot"]
        .iter()
        .map(|suffix| format!("{p}{{evt-keys}}:{suffix}"))
        .chain([format!("{p}rooms")])
        .collect();
    expected.sort();
    assert_eq!(keys, expected);
}

#[tokio::test]
async fn an_unknown_room_is_no_room() {
    let prefix = Prefix::new();
    let store = prefix.rooms().await;
    let no_room = |result: Result<(), StateError>| {
        assert!(
            matches!(result, Err(StateError::NoRoom(ref e)) if e == "evt-none"),
            "{result:?}"
        );
    };
    no_room(store.join("evt-none", "a", 0).await.map(drop));
    no_room(store.index_of("evt-none", "a").await.map(drop));
    no_room(store.view("evt-none").await.map(drop));
    no_room(store.claim("evt-none", "a", "s", 0).await.map(drop));
    no_room(store.admission("evt-none", "a", 0).await.map(drop));
    no_room(store.end("evt-none", "a", 0).await.map(drop));
    no_room(store.tick("evt-none", 0, 1).await.map(drop));
    no_room(
        store
            .set_controls(
                "evt-none",
                boxoffice_waitroom::room::Controls {
                    paused: true,
                    max_release_per_s: None,
                },
            )
            .await
            .map(drop),
    );
    no_room(store.stats("evt-none").await.map(drop));
    no_room(store.lead("evt-none", "node-a", 1_000).await.map(drop));
    assert!(store.rooms().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_unreachable_redis_is_unavailable() {
    // Port 1 is not Redis: the connect fails, it does not panic.
    let result = RedisRooms::connect("redis://127.0.0.1:1", "bo:test:unreachable:").await;
    assert!(
        matches!(result, Err(StateError::Unavailable(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn one_node_leads_at_a_time_and_the_lease_passes_on_after_expiry() {
    const LEASE_MS: u64 = 300;
    // Renewals while the test runs: long enough that no pause of this machine lapses it.
    const LONG_LEASE_MS: u64 = 60_000;
    let prefix = Prefix::new();
    let node_a = prefix.rooms().await;
    let node_b = prefix.rooms().await;
    let config = conformance::config(QueuePolicy::Fifo, 1, 5);
    node_a.ensure_room("evt-lead", config).await.unwrap();
    assert!(
        node_a
            .lead("evt-lead", "node-a", LONG_LEASE_MS)
            .await
            .unwrap()
    );
    assert!(!node_b.lead("evt-lead", "node-b", LEASE_MS).await.unwrap());
    // The leader extends its own lease; the other node still does not lead.
    for _ in 0..4 {
        assert!(
            node_a
                .lead("evt-lead", "node-a", LONG_LEASE_MS)
                .await
                .unwrap()
        );
        assert!(!node_b.lead("evt-lead", "node-b", LEASE_MS).await.unwrap());
    }
    // Another event's lease is separate.
    node_a.ensure_room("evt-lead-2", config).await.unwrap();
    assert!(node_b.lead("evt-lead-2", "node-b", LEASE_MS).await.unwrap());
    // The leader renews once more with a short lease and stops: once Redis has expired it,
    // the other node takes over, alone.
    assert!(node_a.lead("evt-lead", "node-a", LEASE_MS).await.unwrap());
    let mut took_over = false;
    for _ in 0..200 {
        if node_b
            .lead("evt-lead", "node-b", LONG_LEASE_MS)
            .await
            .unwrap()
        {
            took_over = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(took_over, "the lapsed lease passes on");
    assert!(!node_a.lead("evt-lead", "node-a", LEASE_MS).await.unwrap());
    // Two nodes racing for a free lease: exactly one wins.
    for round in 0..20 {
        let event = format!("evt-race-{round}");
        node_a.ensure_room(&event, config).await.unwrap();
        let (a, b) = tokio::join!(
            node_a.lead(&event, "node-a", LONG_LEASE_MS),
            node_b.lead(&event, "node-b", LONG_LEASE_MS)
        );
        assert!(a.unwrap() ^ b.unwrap(), "round {round}: exactly one leads");
    }
}

#[tokio::test]
async fn slots_follow_shoppers() {
    let prefix = Prefix::new();
    conformance::slots_follow_shoppers(&prefix.rooms().await).await;
}
