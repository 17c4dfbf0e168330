//! A node forgets (issue 38, item 3).
//!
//! - The writer of an idle event unloads: it leaves the writer map, its lease row is handed
//!   back (read from the store: expired, the epoch kept), and the next command starts a new
//!   writer that takes the lease again (the next epoch) and loads the event, its keys
//!   included (a retry of a request decided before the unload is a replay).
//! - Commands that race the unload are all served: a writer unloading a millisecond after
//!   each quiet spell, four fans holding and releasing at once and coming back before,
//!   during and after the unload, every answer as decided and the event loaded again more
//!   than once.
//! - A hold key the engine forgot (past the hold TTL and the margin) still gets its first
//!   answer: the store refuses the group that would use it twice, and the reloaded engine
//!   knows it.
//! - A node that does not own an event (a webhook's writer) learns it without waiting for
//!   the owner's group in flight on the lease row, and routes to the owner likewise.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::{Backend, TestApp};
use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::idempotency::{Idempotent, StoredResponse};
use boxoffice_server::runtime::cluster::{Cluster, ClusterConfig, Route};
use boxoffice_server::runtime::writer::{EventWriters, SubmitError};
use boxoffice_store::engine::{EngineStore, GroupCommitted, GroupWrite};
use boxoffice_store::{EventRecord, ReleaseOutcome, StoreError, StoreResult};
use serde_json::json;

fn render(_event: &EventRecord, outcome: &HoldOutcome) -> StoredResponse {
    match outcome {
        HoldOutcome::Held(hold) => StoredResponse {
            status: 201,
            body: hold.hold_id.clone().into_bytes(),
        },
        other => StoredResponse {
            status: 409,
            body: format!("{other:?}").into_bytes(),
        },
    }
}

fn seat_request(account: &str, key: &str, seat_id: &str) -> HoldRequest {
    let shape = HoldShape::Seats {
        seat_ids: vec![seat_id.to_owned()],
    };
    HoldRequest {
        account_id: account.to_owned(),
        idempotency_key: key.to_owned(),
        request_digest: format!("{shape:?}"),
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    }
}

fn node(app: &TestApp, node_id: &str) -> Cluster {
    Cluster::new(
        ClusterConfig {
            node_id: node_id.into(),
            advertise_url: "http://127.0.0.1:1".into(),
            lease_ttl_ms: 60_000,
        },
        app.db.store.clone(),
    )
    .unwrap()
}

async fn event_of(app: &TestApp, event_id: &str) -> Arc<EventRecord> {
    Arc::new(
        app.db
            .store
            .get_event(event_id)
            .await
            .unwrap()
            .expect("event"),
    )
}

/// The real store, counting engine loads.
struct CountedLoads {
    inner: Arc<dyn boxoffice_store::Store>,
    loads: AtomicUsize,
}

#[async_trait]
impl EngineStore for CountedLoads {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.engine_load(event, endpoint).await
    }

    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows> {
        self.inner
            .engine_rows(event_id, seat_ids, tier_ids, hold_ids)
            .await
    }

    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::seatmap::StoredBatch>> {
        self.inner.engine_changes(event_id, after, limit).await
    }

    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
        self.inner.apply_group(group).await
    }
}

async fn hold(
    writers: &EventWriters,
    event: &Arc<EventRecord>,
    request: HoldRequest,
) -> Idempotent {
    match writers.hold(event.clone(), request).await {
        Ok(answer) => answer,
        Err(SubmitError::Overloaded) => panic!("the writer refused a hold as overloaded"),
        Err(SubmitError::Store(error)) => panic!("the writer failed a hold: {error}"),
    }
}

fn hold_id_of(answer: &Idempotent) -> String {
    match answer {
        Idempotent::Fresh(response) if response.status == 201 => {
            String::from_utf8(response.body.clone()).unwrap()
        }
        other => panic!("not a fresh 201: {other:?}"),
    }
}

async fn release(writers: &EventWriters, event: &Arc<EventRecord>, account: &str, hold_id: &str) {
    match writers.release(event.clone(), account, hold_id).await {
        Ok(ReleaseOutcome::Released(_)) => {}
        Ok(other) => panic!("the hold was not released: {other:?}"),
        Err(SubmitError::Overloaded) => panic!("the writer refused a release as overloaded"),
        Err(SubmitError::Store(error)) => panic!("the writer failed a release: {error}"),
    }
}

/// Waits (up to 30 s, then fails) until `event_id` has no writer on this node.
async fn until_unloaded(writers: &EventWriters, event_id: &str) {
    for _ in 0..1_500 {
        if !writers.running().iter().any(|running| running == event_id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the idle writer of {event_id} never unloaded");
}

async fn an_idle_writer_hands_its_lease_back_and_the_next_hold_loads_again(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let event = event_of(&app, &event_id).await;
    let cluster = node(&app, "node-a");
    let counted = Arc::new(CountedLoads {
        inner: app.db.store.clone(),
        loads: AtomicUsize::new(0),
    });
    let writers =
        EventWriters::with_engine_store(app.db.store.clone(), counted.clone(), Arc::new(render))
            .with_cluster(cluster.clone())
            .with_idle_unload(Some(Duration::from_millis(200)));
    let first = hold(&writers, &event, seat_request("fan-1", "k1", "A-1-1")).await;
    let first_hold = hold_id_of(&first);
    let lease = app.db.store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!((lease.node_id.as_str(), lease.epoch), ("node-a", 1));
    assert!(lease.live());
    // A HELD hold keeps the writer (its deadline ends it there); released, nothing does.
    release(&writers, &event, "fan-1", &first_hold).await;
    until_unloaded(&writers, &event_id).await;
    assert_eq!(cluster.held(&event_id), None, "the node let the lease go");
    let lease = app.db.store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!(
        (lease.node_id.as_str(), lease.epoch),
        ("node-a", 1),
        "the epoch is kept"
    );
    assert!(!lease.live(), "the lease row was handed back: {lease:?}");
    assert_eq!(counted.loads.load(Ordering::SeqCst), 1);
    // The next hold starts a new writer: it takes the lease again and loads the event.
    let second = hold(&writers, &event, seat_request("fan-2", "k2", "A-1-2")).await;
    hold_id_of(&second);
    let lease = app.db.store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!((lease.node_id.as_str(), lease.epoch), ("node-a", 2));
    assert!(lease.live());
    assert_eq!(cluster.held(&event_id).map(|fence| fence.epoch), Some(2));
    assert_eq!(counted.loads.load(Ordering::SeqCst), 2);
    assert!(writers.running().contains(&event_id));
    // The reloaded engine knows the first request's key: its retry is a replay.
    match hold(&writers, &event, seat_request("fan-1", "k1", "A-1-1")).await {
        Idempotent::Replayed(response) => {
            assert_eq!(response.status, 201);
            assert_eq!(response.body, first_hold.as_bytes());
        }
        other => panic!("a retry after the unload is a replay: {other:?}"),
    }
    app.finish().await;
}

async fn commands_racing_the_unload_are_all_served(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let event = event_of(&app, &event_id).await;
    let cluster = node(&app, "node-a");
    let counted = Arc::new(CountedLoads {
        inner: app.db.store.clone(),
        loads: AtomicUsize::new(0),
    });
    // A millisecond without a command is enough to unload: the fans' next commands keep
    // arriving as the writer closes, leaves the map and hands the lease back.
    let writers =
        EventWriters::with_engine_store(app.db.store.clone(), counted.clone(), Arc::new(render))
            .with_cluster(cluster.clone())
            .with_idle_unload(Some(Duration::from_millis(1)));
    let barrier = Arc::new(tokio::sync::Barrier::new(4));
    let fans = (1..=4u64).map(|fan| {
        let (writers, event, barrier) = (writers.clone(), event.clone(), barrier.clone());
        tokio::spawn(async move {
            let account = format!("fan-{fan}");
            let seat = format!("A-1-{fan}");
            for round in 0..40u64 {
                // All four quiet at once, then back after 0-3 ms (by round) and a fan's
                // quarter milliseconds: before, during and after the unload.
                barrier.wait().await;
                let quiet_us = (round % 4) * 1_000 + fan * 250;
                tokio::time::sleep(Duration::from_micros(quiet_us)).await;
                let answer = hold(
                    &writers,
                    &event,
                    seat_request(&account, &format!("k{round}"), &seat),
                )
                .await;
                let hold_id = hold_id_of(&answer);
                release(&writers, &event, &account, &hold_id).await;
            }
        })
    });
    for fan in futures::future::join_all(fans).await {
        fan.expect("every hold and release answered as decided");
    }
    let loads = counted.loads.load(Ordering::SeqCst);
    assert!(
        loads > 1,
        "the writer unloaded and loaded again ({loads} loads)"
    );
    let lease = app.db.store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!(lease.node_id, "node-a");
    assert!(
        lease.epoch > 1,
        "each load after a hand-back takes the lease again"
    );
    app.finish().await;
}

async fn a_forgotten_key_still_gets_its_first_answer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let event = event_of(&app, &event_id).await;
    let writers = EventWriters::new(app.db.store.clone(), Arc::new(render));
    let first = hold(&writers, &event, seat_request("fan-1", "k1", "A-1-1")).await;
    let first_hold = hold_id_of(&first);
    release(&writers, &event, "fan-1", &first_hold).await;
    // Past the hold TTL and the margin the engine forgets the key, at its next group.
    let kept_s = u64::from(event.rules().hold_ttl_s)
        + u64::from(boxoffice_domain::engine::HOLD_KEYS_KEPT_PAST_TTL_S);
    app.db.advance_clock((kept_s + 1) * 1_000).await;
    hold_id_of(&hold(&writers, &event, seat_request("fan-2", "k2", "A-1-2")).await);
    match hold(&writers, &event, seat_request("fan-1", "k1", "A-1-1")).await {
        Idempotent::Replayed(response) => {
            assert_eq!(response.status, 201);
            assert_eq!(response.body, first_hold.as_bytes());
        }
        other => panic!("a retry of a forgotten key is a replay: {other:?}"),
    }
    // The same key for another request is still refused as such.
    let mut other = seat_request("fan-1", "k1", "A-1-3");
    other.request_digest = "another request".into();
    assert!(matches!(
        hold(&writers, &event, other).await,
        Idempotent::KeyReusedWithOtherRequest
    ));
    app.finish().await;
}

/// node-b gets a command for an event node-a owns while a group of node-a is in flight (it
/// holds the lease row FOR KEY SHARE): node-b's writer stops at once (`Fenced`, the webhook
/// path then settles through the store) and node-b routes requests to node-a, neither
/// waiting for the row's lock nor taking the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_non_owner_learns_the_owner_without_waiting_for_its_group() {
    use boxoffice_store::lease::Taken;

    let app = TestApp::spawn(Backend::Postgres).await;
    let event_id = app.create_event(json!({})).await;
    let event = event_of(&app, &event_id).await;
    let store = app.db.store.clone();
    store
        .register_node("node-a", "http://127.0.0.1:2")
        .await
        .unwrap();
    let Taken::Mine(_) = store.take_lease(&event_id, "node-a", 60_000).await.unwrap() else {
        panic!("a free lease is taken");
    };
    let pool = app.db.pg.as_ref().unwrap().pool().clone();
    let mut group = pool.begin().await.unwrap();
    sqlx::query("SELECT epoch FROM event_lease WHERE event_id = $1 FOR KEY SHARE")
        .bind(&event_id)
        .fetch_one(&mut *group)
        .await
        .unwrap();
    let node_b = node(&app, "node-b");
    let writers = EventWriters::new(store.clone(), Arc::new(render)).with_cluster(node_b.clone());
    let webhook = {
        let (writers, event) = (writers.clone(), event.clone());
        tokio::spawn(async move {
            writers
                .hold(event, seat_request("fan-1", "k1", "A-1-1"))
                .await
        })
    };
    let waited = common::waits_for_a_lock(&pool, "event_lease", || webhook.is_finished()).await;
    assert!(!waited, "node-b's writer never waits for node-a's group");
    match webhook.await.unwrap() {
        Err(SubmitError::Store(StoreError::Fenced(_))) => {}
        other => panic!("node-b's writer stops: {other:?}"),
    }
    let route = {
        let node_b = node_b.clone();
        let event_id = event_id.clone();
        tokio::spawn(async move { node_b.route(&event_id).await })
    };
    let waited = common::waits_for_a_lock(&pool, "event_lease", || route.is_finished()).await;
    assert!(!waited, "node-b's routing never waits for node-a's group");
    match route.await.unwrap().unwrap() {
        Route::Remote { node_id, .. } => assert_eq!(node_id, "node-a"),
        other => panic!("routed to the owner: {other:?}"),
    }
    group.commit().await.unwrap();
    let lease = store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!(
        (lease.node_id.as_str(), lease.epoch),
        ("node-a", 1),
        "untouched"
    );
    app.finish().await;
}

stories!(
    an_idle_writer_hands_its_lease_back_and_the_next_hold_loads_again,
    commands_racing_the_unload_are_all_served,
    a_forgotten_key_still_gets_its_first_answer,
);
