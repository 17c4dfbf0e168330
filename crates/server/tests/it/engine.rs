//! The event writer under faults and with two nodes (issue 14).
//!
//! - A group's commit fails while the next group is already decided and sent: nothing of
//!   the next group is answered before its own commit, the writer loads the event again and
//!   decides every uncommitted request anew, and the invariants hold (both backends).
//! - Two `serve` nodes on one PostgreSQL, each with its own writer for the same event:
//!   256 clients racing one seat across both get exactly one 201 per round, best-available
//!   groups overlap without a seat sold twice, and one Idempotency-Key sent to both nodes at
//!   once makes one hold with two identical answers. The store's checks are what keep them
//!   correct until events have one owner (issue 15).
//! - Checkout starts go through the writer too: many checkouts of one hold at once (other
//!   keys, the same key) start exactly one order (both backends), and across two nodes one
//!   key makes one order with the same order id in both answers.
//! - Requests that arrive while the engine loads wait for that one load; a load past the
//!   writer's deadline answers them unavailable (503), and the next request loads again.

use crate::common;

use boxoffice_store::OneShot as _;
use std::sync::{Arc, Mutex};

use crate::common::{Backend, RoomSetup, TestApp, TestStore, token};
use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::idempotency::{Idempotent, StoredResponse};
use boxoffice_server::runtime::writer::EventWriters;
use boxoffice_store::engine::{EngineStore, GroupCommitted, GroupWrite};
use boxoffice_store::{EventRecord, StoreError, StoreResult};
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::Notify;

/// What happened, in order: commits as the store saw them, answers as clients got them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A group committed, with the ids of the holds it created.
    Committed(Vec<String>),
    /// A group was refused (by the fault, or by the store).
    Refused,
    /// A request got a 201 for this hold.
    Granted(String),
}

/// The real store, except that the `fail_call`-th group waits until the next group has been
/// sent, then fails without writing anything — or, with `commit_found_wrong`, commits and
/// reports what the store says when it found the engine wrong (an expiry it skipped, as it
/// says for a command it refused alone).
struct FailingGroup {
    inner: Arc<dyn boxoffice_store::Store>,
    fail_call: usize,
    commit_found_wrong: bool,
    calls: Mutex<usize>,
    loads: Mutex<usize>,
    /// Signalled when the failing group is waiting (the test then sends the next wave).
    failing_started: Notify,
    /// Signalled when the group after the failing one has been sent.
    next_sent: Notify,
    log: Arc<Mutex<Vec<Seen>>>,
}

#[async_trait]
impl EngineStore for FailingGroup {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        *self.loads.lock().unwrap() += 1;
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
        let call = {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            *calls
        };
        if call == self.fail_call {
            self.failing_started.notify_one();
            self.next_sent.notified().await;
            if self.commit_found_wrong {
                let mut committed = self.inner.apply_group(group).await?;
                committed.expiries_skipped = 1;
                self.log.lock().unwrap().push(Seen::Committed(
                    group
                        .effects
                        .holds_created()
                        .map(|created| created.hold.hold_id.clone())
                        .collect(),
                ));
                return Ok(committed);
            }
            self.log.lock().unwrap().push(Seen::Refused);
            return Err(StoreError::Conflict("injected: the commit failed".into()));
        }
        if call == self.fail_call + 1 {
            self.next_sent.notify_one();
        }
        let result = self.inner.apply_group(group).await;
        let seen = match &result {
            Ok(_) => Seen::Committed(
                group
                    .effects
                    .holds_created()
                    .map(|created| created.hold.hold_id.clone())
                    .collect(),
            ),
            Err(_) => Seen::Refused,
        };
        self.log.lock().unwrap().push(seen);
        result
    }
}

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

async fn a_failed_commit_holds_back_the_next_group(backend: Backend) {
    the_next_group_waits_for(backend, false).await;
}

/// A group that commits but shows the engine wrong (the store refused one of its commands
/// alone, or skipped an expiry) fails the group decided on top of it: that group could give
/// back seats the refused command never freed. It is decided again after the reload.
async fn a_group_after_one_that_found_the_engine_wrong_is_decided_again(backend: Backend) {
    the_next_group_waits_for(backend, true).await;
}

/// Group 2 fails (or commits but finds the engine wrong) only after group 3, decided on top
/// of it, has been sent: nothing of group 3 commits or is answered on that engine.
async fn the_next_group_waits_for(backend: Backend, commit_found_wrong: bool) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let event = Arc::new(
        app.db
            .store
            .get_event(&event_id)
            .await
            .unwrap()
            .expect("event"),
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let faulty = Arc::new(FailingGroup {
        inner: app.db.store.clone(),
        fail_call: 2,
        commit_found_wrong,
        calls: Mutex::new(0),
        loads: Mutex::new(0),
        failing_started: Notify::new(),
        next_sent: Notify::new(),
        log: log.clone(),
    });
    let writers =
        EventWriters::with_engine_store(app.db.store.clone(), faulty.clone(), Arc::new(render));
    let submit = |account: String, seat: String| {
        let writers = writers.clone();
        let event = event.clone();
        let log = log.clone();
        tokio::spawn(async move {
            let request = seat_request(&account, "k", &seat);
            let answer = writers.hold(event, request).await;
            if let Ok(Idempotent::Fresh(response)) = &answer
                && response.status == 201
            {
                let hold_id = String::from_utf8(response.body.clone()).unwrap();
                log.lock().unwrap().push(Seen::Granted(hold_id));
            }
            answer
        })
    };
    // Group 1 commits. Group 2 (wave A) fails, but only after group 3 (wave B, decided on
    // top of group 2) has been sent.
    let first = submit("fan-0".into(), "A-1-1".into()).await.unwrap();
    assert!(matches!(first, Ok(Idempotent::Fresh(ref r)) if r.status == 201));
    let wave_a: Vec<_> = (1..=20)
        .map(|i| submit(format!("fan-{i}"), format!("A-2-{i}")))
        .collect();
    faulty.failing_started.notified().await;
    let wave_b: Vec<_> = (1..=20)
        .map(|i| submit(format!("fan-b{i}"), format!("A-3-{i}")))
        .collect();
    let mut granted = 1;
    for task in wave_a.into_iter().chain(wave_b) {
        match task.await.unwrap() {
            Ok(Idempotent::Fresh(response)) if response.status == 201 => granted += 1,
            other => panic!("every request holds a free seat in the end: {other:?}"),
        }
    }
    assert_eq!(granted, 41);
    let log = log.lock().unwrap().clone();
    let refused = log.iter().filter(|s| **s == Seen::Refused).count();
    if commit_found_wrong {
        // Group 2 committed; the next group the store saw (group 3, decided on top of it)
        // was refused as the successor of a wrong engine.
        let outcomes: Vec<&Seen> = log
            .iter()
            .filter(|s| !matches!(s, Seen::Granted(_)))
            .collect();
        assert!(
            matches!(outcomes[1], Seen::Committed(ids) if !ids.is_empty()),
            "{log:?}"
        );
        assert_eq!(outcomes[2], &Seen::Refused, "{log:?}");
        assert!(refused >= 1, "the group after it was refused: {log:?}");
    } else {
        assert!(
            refused >= 2,
            "the injected failure and the group after it were both refused: {log:?}"
        );
    }
    // Every 201 comes after the commit that created its hold.
    for (at, seen) in log.iter().enumerate() {
        let Seen::Granted(hold_id) = seen else {
            continue;
        };
        let committed_before = log[..at]
            .iter()
            .any(|s| matches!(s, Seen::Committed(ids) if ids.contains(hold_id)));
        assert!(
            committed_before,
            "hold {hold_id} was answered before its commit: {log:?}"
        );
    }
    assert!(
        *faulty.loads.lock().unwrap() >= 2,
        "the writer loaded the event again after the failure"
    );
    let holds: i64 = match backend {
        Backend::Postgres => sqlx::query_scalar("SELECT count(*) FROM hold WHERE event_id = $1")
            .bind(&event_id)
            .fetch_one(app.db.pg.as_ref().unwrap().pool())
            .await
            .unwrap(),
        Backend::Sqlite => sqlx::query_scalar("SELECT count(*) FROM hold WHERE event_id = ?1")
            .bind(&event_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap(),
    };
    assert_eq!(holds, 41, "each request made exactly one hold");
    app.finish().await;
}

/// The store refuses a group whose seat write no longer finds the seat free: the group was
/// decided, then another path took one of its seats before it was written. The whole group
/// is refused (its other hold is not written either) and the refusal names the seats.
async fn a_group_on_a_seat_taken_since_is_refused(backend: Backend) {
    use boxoffice_domain::engine::{Command, EventEngine};
    use boxoffice_store::engine::FirstInLine;
    use std::collections::BTreeMap;

    const ENDPOINT: &str = "POST /test/holds";
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let store = app.db.store.clone();
    let event = store.get_event(&event_id).await.unwrap().expect("event");
    let (snapshot, now) = store.engine_load(&event, ENDPOINT).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let requests = [
        seat_request("fan-1", "k1", "A-4-1"),
        seat_request("fan-2", "k2", "A-4-2"),
    ];
    let commands: Vec<Command> = requests.iter().cloned().map(Command::Hold).collect();
    let (_, effects) = engine.decide(now, &commands);
    assert_eq!(
        effects.seats_taken().count(),
        2,
        "both seats decided as free"
    );
    // Meanwhile another path holds A-4-2.
    let shown = event.clone();
    let render_hold = move |outcome: &HoldOutcome| render(&shown, outcome);
    let taken = store
        .hold_batch(
            &event,
            ENDPOINT,
            &[seat_request("fan-3", "k3", "A-4-2")],
            &render_hold,
        )
        .await
        .unwrap();
    assert!(
        matches!(&taken[0], Idempotent::Fresh(r) if r.status == 201),
        "{taken:?}"
    );
    let group = GroupWrite {
        event: &event,
        endpoint: ENDPOINT,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    match store.apply_group(&group).await {
        Err(StoreError::Conflict(why)) => assert!(why.contains("still free"), "{why}"),
        other => panic!("the group must be refused: {other:?}"),
    }
    for account in ["fan-1", "fan-2"] {
        let holds: i64 = match backend {
            Backend::Postgres => {
                sqlx::query_scalar("SELECT count(*) FROM hold WHERE account_id = $1")
                    .bind(account)
                    .fetch_one(app.db.pg.as_ref().unwrap().pool())
                    .await
                    .unwrap()
            }
            Backend::Sqlite => {
                sqlx::query_scalar("SELECT count(*) FROM hold WHERE account_id = ?1")
                    .bind(account)
                    .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
                    .await
                    .unwrap()
            }
        };
        assert_eq!(
            holds, 0,
            "nothing of the refused group was written ({account})"
        );
    }
    app.finish().await;
}

/// A seat one command of a group frees (a release) and a later command of the same group
/// takes again (a new hold): the engine decides both on its own state, and the store must
/// write them in that order, not refuse the group because the seat was not free yet when
/// the new hold's write came first.
async fn a_seat_freed_and_taken_in_one_group(backend: Backend) {
    use boxoffice_domain::engine::{Command, Decision, EventEngine, ReleaseDecision};
    use boxoffice_store::engine::FirstInLine;
    use std::collections::BTreeMap;

    const ENDPOINT: &str = "POST /test/holds";
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let store = app.db.store.clone();
    let event = store.get_event(&event_id).await.unwrap().expect("event");
    let shown = event.clone();
    let render_hold = move |outcome: &HoldOutcome| render(&shown, outcome);
    let first = store
        .hold_batch(
            &event,
            ENDPOINT,
            &[seat_request("fan-1", "k1", "A-5-1")],
            &render_hold,
        )
        .await
        .unwrap();
    let Idempotent::Fresh(response) = &first[0] else {
        panic!("{first:?}");
    };
    let first_hold = String::from_utf8(response.body.clone()).unwrap();
    let (snapshot, now) = store.engine_load(&event, ENDPOINT).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let second = seat_request("fan-2", "k2", "A-5-1");
    let commands = vec![
        Command::Release {
            account_id: "fan-1".into(),
            hold_id: first_hold.clone(),
        },
        Command::Hold(second.clone()),
    ];
    let (decisions, effects) = engine.decide(now, &commands);
    assert!(
        matches!(
            decisions[0],
            Decision::Release(ReleaseDecision::Released { .. })
        ),
        "{decisions:?}"
    );
    assert!(
        matches!(&decisions[1], Decision::Hold(HoldOutcome::Held(_))),
        "the engine gives the freed seat to the next hold: {decisions:?}"
    );
    let group = GroupWrite {
        event: &event,
        endpoint: ENDPOINT,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    store
        .apply_group(&group)
        .await
        .expect("the store writes the release before the new hold");
    let (_, seat) = store
        .seat_map(&event_id)
        .await
        .unwrap()
        .expect("map")
        .seats
        .into_iter()
        .find(|(seat_id, _)| seat_id == "A-5-1")
        .expect("seat");
    assert_eq!(seat.status, boxoffice_domain::hold::SeatStatus::Held);
    let released = store.get_hold(&first_hold).await.unwrap().expect("hold");
    assert_eq!(
        released.status,
        boxoffice_domain::hold::HoldStatus::Released
    );
    app.finish().await;
}

/// A hold past its deadline that a group ends (the engine's timer) while a command of the
/// same group takes its seat: the store frees the seat before it takes it again, and the
/// seat-map change row must show the seat held by the new hold, as the table does, not
/// freed (the store's record of what the expiry freed must not cover the engine's).
async fn a_seat_expired_and_taken_in_one_group(backend: Backend) {
    use boxoffice_domain::engine::{Command, Decision, EventEngine};
    use boxoffice_store::engine::FirstInLine;
    use std::collections::BTreeMap;

    const ENDPOINT: &str = "POST /test/holds";
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"holdTtlSeconds": 1})).await;
    let store = app.db.store.clone();
    let event = store.get_event(&event_id).await.unwrap().expect("event");
    let shown = event.clone();
    let render_hold = move |outcome: &HoldOutcome| render(&shown, outcome);
    let first = store
        .hold_batch(
            &event,
            ENDPOINT,
            &[seat_request("fan-1", "k1", "A-5-2")],
            &render_hold,
        )
        .await
        .unwrap();
    assert!(
        matches!(&first[0], Idempotent::Fresh(r) if r.status == 201),
        "{first:?}"
    );
    // Past the hold's deadline by the store's clock, moved forward.
    app.db.advance_clock(1_300).await;
    let (snapshot, now) = store.engine_load(&event, ENDPOINT).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let second = seat_request("fan-2", "k2", "A-5-2");
    let (decisions, effects) = engine.decide(now, &[Command::Hold(second.clone())]);
    assert!(
        matches!(&decisions[0], Decision::Hold(HoldOutcome::Held(_))),
        "{decisions:?}"
    );
    assert_eq!(
        effects.holds_expired().count(),
        1,
        "the lapsed hold ends in the group"
    );
    let group = GroupWrite {
        event: &event,
        endpoint: ENDPOINT,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    store.apply_group(&group).await.expect("the group commits");
    let (_, seat) = store
        .seat_map(&event_id)
        .await
        .unwrap()
        .expect("map")
        .seats
        .into_iter()
        .find(|(seat_id, _)| seat_id == "A-5-2")
        .expect("seat");
    assert_eq!(seat.status, boxoffice_domain::hold::SeatStatus::Held);
    // The change rows agree with the table (the seat map's invariant).
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A group decided on `store`'s fresh engine for one seat hold, written under `fence`.
async fn fenced_hold(
    store: &std::sync::Arc<dyn boxoffice_store::Store>,
    event: &EventRecord,
    account: &str,
    seat_id: &str,
    fence: Option<boxoffice_store::lease::Fence>,
) -> StoreResult<GroupCommitted> {
    use boxoffice_domain::engine::{Command, EventEngine};
    use boxoffice_store::engine::FirstInLine;
    use std::collections::BTreeMap;

    const ENDPOINT: &str = "POST /test/holds";
    let (snapshot, now) = store.engine_load(event, ENDPOINT).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let request = seat_request(account, &format!("key-{account}-{seat_id}"), seat_id);
    let (_, effects) = engine.decide(now, &[Command::Hold(request.clone())]);
    assert_eq!(
        effects.seats_taken().count(),
        1,
        "the seat is decided as free"
    );
    let group = GroupWrite {
        event,
        endpoint: ENDPOINT,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::new(),
        turn: &FirstInLine,
    };
    store.apply_group(&group).await
}

/// The event lease fences a former owner: once another node took the lease over (it had
/// expired), every group of the former owner is refused by the store and writes nothing,
/// its renewal and hand-back find nothing, and the new owner's groups commit. A node that
/// takes its own lease again (a restart) fences its former self the same way.
async fn a_former_owners_group_is_fenced(backend: Backend) {
    use boxoffice_store::lease::Taken;

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let store = app.db.store.clone();
    let event = store.get_event(&event_id).await.unwrap().expect("event");
    assert_eq!(store.lease(&event_id).await.unwrap(), None, "no owner yet");

    let Taken::Mine(first) = store.take_lease(&event_id, "node-a", 300).await.unwrap() else {
        panic!("a free lease is taken");
    };
    assert_eq!((first.node_id.as_str(), first.epoch), ("node-a", 1));
    fenced_hold(&store, &event, "fan-1", "A-1-1", Some(first.fence()))
        .await
        .expect("the owner's group commits");
    match store.take_lease(&event_id, "node-b", 300).await.unwrap() {
        Taken::Elsewhere(lease) => assert_eq!((lease.node_id.as_str(), lease.epoch), ("node-a", 1)),
        Taken::Mine(lease) => panic!("a live lease is not taken over: {lease:?}"),
    }
    // node-a stops renewing; once its lease has lapsed (by the store's clock, moved past
    // it), node-b takes it over.
    app.db.advance_clock(400).await;
    let Taken::Mine(second) = store.take_lease(&event_id, "node-b", 60_000).await.unwrap() else {
        panic!("a lapsed lease is taken over");
    };
    assert_eq!((second.node_id.as_str(), second.epoch), ("node-b", 2));
    match fenced_hold(&store, &event, "fan-2", "A-1-2", Some(first.fence())).await {
        Err(StoreError::Fenced(why)) => assert!(why.contains("node-a"), "{why}"),
        other => panic!("the former owner's group must be fenced: {other:?}"),
    }
    let (_, seat) = store
        .seat_map(&event_id)
        .await
        .unwrap()
        .expect("map")
        .seats
        .into_iter()
        .find(|(seat_id, _)| seat_id == "A-1-2")
        .expect("seat");
    assert_eq!(
        seat.status,
        boxoffice_domain::hold::SeatStatus::Available,
        "a fenced group writes nothing"
    );
    assert_eq!(
        store
            .renew_leases("node-a", &[(event_id.clone(), 1)], 300)
            .await
            .unwrap(),
        Vec::<String>::new(),
        "the former owner's renewal finds nothing"
    );
    assert!(
        !store
            .release_lease(&event_id, &first.fence())
            .await
            .unwrap()
    );
    fenced_hold(&store, &event, "fan-3", "A-1-3", Some(second.fence()))
        .await
        .expect("the new owner's group commits");
    // node-b restarts: taking its own lease again bumps the epoch and fences its former self.
    let Taken::Mine(third) = store.take_lease(&event_id, "node-b", 60_000).await.unwrap() else {
        panic!("a node takes its own lease again");
    };
    assert_eq!(third.epoch, 3);
    assert!(matches!(
        fenced_hold(&store, &event, "fan-4", "A-1-4", Some(second.fence())).await,
        Err(StoreError::Fenced(_))
    ));
    // A graceful hand-back: expired at once, the epoch kept, the next taker gets epoch + 1.
    assert!(
        store
            .release_lease(&event_id, &third.fence())
            .await
            .unwrap()
    );
    let Taken::Mine(fourth) = store.take_lease(&event_id, "node-c", 60_000).await.unwrap() else {
        panic!("a lease handed back is taken at once");
    };
    assert_eq!((fourth.node_id.as_str(), fourth.epoch), ("node-c", 4));
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A node's requests that arrive at once for an event nobody owns take its lease once: the
/// others wait for that take and find the node's lease (each take of a node's own lease bumps
/// the epoch, which would fence the node's own writer).
async fn a_crowd_on_one_node_takes_the_lease_once(backend: Backend) {
    use boxoffice_server::runtime::cluster::{Cluster, ClusterConfig, Route};

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let cluster = Cluster::new(
        ClusterConfig {
            node_id: "node-a".into(),
            advertise_url: "http://127.0.0.1:1".into(),
            lease_ttl_ms: 60_000,
        },
        app.db.store.clone(),
    )
    .unwrap();
    let routes = futures::future::join_all((0..64).map(|_| cluster.route(&event_id))).await;
    for route in routes {
        match route.unwrap() {
            Route::Local(fence) => assert_eq!((fence.node_id.as_str(), fence.epoch), ("node-a", 1)),
            other => panic!("the node's own lease: {other:?}"),
        }
    }
    let lease = app.db.store.lease(&event_id).await.unwrap().expect("lease");
    assert_eq!(
        (lease.node_id.as_str(), lease.epoch),
        ("node-a", 1),
        "taken once"
    );
    app.finish().await;
}

/// The real store, except that each engine load waits until the test lets it go.
struct GatedLoad {
    inner: Arc<dyn boxoffice_store::Store>,
    loads: Mutex<usize>,
    go: tokio::sync::watch::Receiver<bool>,
}

#[async_trait]
impl EngineStore for GatedLoad {
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        *self.loads.lock().unwrap() += 1;
        let mut go = self.go.clone();
        let _ = go.wait_for(|go| *go).await;
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

/// A crowd racing one seat while the engine loads: one load, one 201, the rest refused by
/// the engine (409), none busy. A load that outlasts the writer's deadline answers the
/// requests waiting for it unavailable; once the store answers, the next request loads again.
async fn requests_during_a_load_wait_for_it_within_a_deadline(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let event = Arc::new(
        app.db
            .store
            .get_event(&event_id)
            .await
            .unwrap()
            .expect("event"),
    );
    let (go, gate) = tokio::sync::watch::channel(false);
    let gated = Arc::new(GatedLoad {
        inner: app.db.store.clone(),
        loads: Mutex::new(0),
        go: gate,
    });
    let writers =
        EventWriters::with_engine_store(app.db.store.clone(), gated.clone(), Arc::new(render))
            .with_load_wait(std::time::Duration::from_secs(1));
    let race = |round: usize, from: usize, n: usize| {
        (from..from + n)
            .map(|i| {
                let (writers, event) = (writers.clone(), event.clone());
                tokio::spawn(async move {
                    let request = seat_request(&format!("fan-{round}-{i}"), "k", "A-1-1");
                    writers.hold(event, request).await
                })
            })
            .collect::<Vec<_>>()
    };
    // The store does not answer the load: every request waiting for it (the first started
    // it, the others arrive while it runs) is told to retry.
    let mut crowd = race(0, 0, 1);
    for _ in 0..5_000 {
        if *gated.loads.lock().unwrap() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    crowd.extend(race(0, 1, 31));
    for task in crowd {
        match task.await.unwrap() {
            Err(boxoffice_server::runtime::writer::SubmitError::Store(
                StoreError::Unavailable(why),
            )) => {
                assert!(why.contains("loading the engine"), "{why}");
            }
            other => panic!("unavailable past the load's deadline: {other:?}"),
        }
    }
    assert_eq!(*gated.loads.lock().unwrap(), 1, "one load for the crowd");
    // The store answers again: the next crowd waits for one new load.
    go.send(true).unwrap();
    let answers: Vec<_> = futures::future::join_all(race(1, 0, 64)).await;
    let statuses: Vec<u16> = answers
        .into_iter()
        .map(|answer| match answer.unwrap() {
            Ok(Idempotent::Fresh(response)) => response.status,
            other => panic!("decided by the engine: {other:?}"),
        })
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        63,
        "{statuses:?}"
    );
    assert_eq!(*gated.loads.lock().unwrap(), 2, "one more load");
    app.finish().await;
}

stories!(
    requests_during_a_load_wait_for_it_within_a_deadline,
    a_crowd_on_one_node_takes_the_lease_once,
    a_former_owners_group_is_fenced,
    a_failed_commit_holds_back_the_next_group,
    a_group_after_one_that_found_the_engine_wrong_is_decided_again,
    a_group_on_a_seat_taken_since_is_refused,
    a_seat_freed_and_taken_in_one_group,
    a_seat_expired_and_taken_in_one_group,
);

/// A second node: its own app (and its own event writers) on the same database.
async fn second_node(first: &TestApp) -> TestApp {
    TestApp::spawn_full(
        first.db.second_handle().await,
        Default::default(),
        RoomSetup::default(),
        false,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_race_one_seat_and_share_keys() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = second_node(&a).await;
    let event_id = a.create_event(json!({"maxTicketsPerAccount": 8})).await;

    // 256 clients race one seat, half through each node: exactly one 201 per round.
    for round in 1..=4 {
        let seat = format!("A-1-{round}");
        let tasks: Vec<_> = (0..256)
            .map(|i| {
                let node = if i % 2 == 0 { &a } else { &b };
                let http = node.http.clone();
                let url = format!("{}/v1/events/{event_id}/holds", node.base);
                let body = json!({"seatIds": [seat]});
                tokio::spawn(async move {
                    http.post(url)
                        .bearer_auth(token(&format!("racer-{round}-{i}")))
                        .header("idempotency-key", "race")
                        .json(&body)
                        .send()
                        .await
                        .unwrap()
                        .status()
                })
            })
            .collect();
        let mut created = 0;
        for task in tasks {
            match task.await.unwrap() {
                StatusCode::CREATED => created += 1,
                StatusCode::CONFLICT => {}
                other => panic!("round {round}: a racer got {other}"),
            }
        }
        assert_eq!(
            created, 1,
            "round {round}: exactly one winner across both nodes"
        );
    }

    // Overlapping groups: best available on both nodes at once, two seats each. Both
    // engines pick the same best seats; the store lets one group through and the other
    // node's writer reloads and decides again. No seat is in two holds.
    let tasks: Vec<_> = (0..80)
        .map(|i| {
            let node = if i % 2 == 0 { &a } else { &b };
            let http = node.http.clone();
            let url = format!("{}/v1/events/{event_id}/holds", node.base);
            tokio::spawn(async move {
                let response = http
                    .post(url)
                    .bearer_auth(token(&format!("best-{i}")))
                    .header("idempotency-key", "best")
                    .json(&json!({"bestAvailable": {"quantity": 2}}))
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                let body: serde_json::Value = response.json().await.unwrap();
                (status, body)
            })
        })
        .collect();
    let mut seats = std::collections::BTreeSet::new();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
        for seat in body["seats"].as_array().unwrap() {
            let seat_id = seat["seatId"].as_str().unwrap().to_owned();
            assert!(seats.insert(seat_id.clone()), "seat {seat_id} held twice");
        }
    }
    assert_eq!(seats.len(), 160);

    // One key, sent to both nodes at once: one hold, the same answer twice.
    for attempt in 0..5 {
        let key = format!("shared-{attempt}");
        let body = json!({"seatIds": [format!("A-20-{}", attempt + 1)]});
        let send = |node: &TestApp| {
            let request = node
                .http
                .post(format!("{}/v1/events/{event_id}/holds", node.base))
                .bearer_auth(token("twin"))
                .header("idempotency-key", key.clone())
                .json(&body);
            async move {
                let response = request.send().await.unwrap();
                (response.status(), response.bytes().await.unwrap())
            }
        };
        let ((status_a, body_a), (status_b, body_b)) = tokio::join!(send(&a), send(&b));
        // A node that sees the key in flight on itself answers 409 IDEMPOTENCY_IN_PROGRESS;
        // across nodes both decide, the store keeps one, and the loser replays it.
        assert_eq!(
            status_a,
            StatusCode::CREATED,
            "{} / {}",
            String::from_utf8_lossy(&body_a),
            String::from_utf8_lossy(&body_b)
        );
        assert_eq!(
            status_b,
            StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&body_b)
        );
        assert_eq!(body_a, body_b, "both nodes answer with the same hold");
    }
    let holds: i64 =
        sqlx::query_scalar("SELECT count(*) FROM hold WHERE event_id = $1 AND account_id = 'twin'")
            .bind(&event_id)
            .fetch_one(a.db.pg.as_ref().unwrap().pool())
            .await
            .unwrap();
    assert_eq!(holds, 5, "one hold per shared key");

    let b_store: TestStore = b.stop();
    b_store.cleanup().await;
    a.finish().await;
}

async fn checkout_racers(
    node: &TestApp,
    account: &str,
    hold_id: &str,
    key: String,
) -> tokio::task::JoinHandle<(StatusCode, serde_json::Value)> {
    let request = node
        .http
        .post(format!("{}/v1/holds/{hold_id}/checkout", node.base))
        .bearer_auth(token(account))
        .header("idempotency-key", key)
        .json(&json!({"paymentMethodToken": "pm_card_visa"}));
    tokio::spawn(async move {
        let response = request.send().await.unwrap();
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        (status, body)
    })
}

/// Orders of the event, per hold.
async fn orders_per_hold(db: &TestStore, event_id: &str) -> Vec<(String, i64)> {
    match (&db.pg, db.sqlite_file()) {
        (Some(pg), _) => sqlx::query_as(
            "SELECT hold_id, count(*) FROM orders WHERE event_id = $1 GROUP BY hold_id ORDER BY hold_id",
        )
        .bind(event_id)
        .fetch_all(pg.pool())
        .await
        .unwrap(),
        (None, Some(file)) => {
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display()))
                .await
                .unwrap();
            let rows = sqlx::query_as(
                "SELECT hold_id, count(*) FROM orders WHERE event_id = ?1 GROUP BY hold_id ORDER BY hold_id",
            )
            .bind(event_id)
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            rows
        }
        (None, None) => panic!("no store"),
    }
}

async fn checkouts_race_through_the_writer(backend: Backend) {
    // 144 checkouts of one account at once: far past its abuse limit, which is off here
    // (the race is the writer's, not the limit's).
    let app = TestApp::spawn_unlimited(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 8})).await;
    let mut holds = Vec::new();
    for i in 0..6 {
        let hold = app
            .hold(
                "buyer",
                &event_id,
                &format!("h{i}"),
                json!({"seatIds": [format!("A-5-{}", i + 1)]}),
            )
            .await;
        assert_eq!(hold.status, StatusCode::CREATED);
        holds.push(hold.json()["holdId"].as_str().unwrap().to_owned());
    }
    // Per hold, 24 checkouts at once: 16 with their own key, 8 with a shared one.
    let mut tasks = Vec::new();
    for hold_id in &holds {
        for i in 0..24 {
            let key = if i < 16 {
                format!("own-{i}")
            } else {
                "shared".to_owned()
            };
            tasks.push((
                hold_id.clone(),
                i >= 16,
                checkout_racers(&app, "buyer", hold_id, key).await,
            ));
        }
    }
    let mut winners: std::collections::BTreeMap<String, Vec<(bool, String)>> = Default::default();
    for (hold_id, shared, task) in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            StatusCode::CREATED => winners
                .entry(hold_id)
                .or_default()
                .push((shared, body["orderId"].as_str().unwrap().to_owned())),
            StatusCode::CONFLICT => {
                let code = body["code"].as_str().unwrap_or_default();
                assert!(
                    code == "HOLD_IN_CHECKOUT" || code == "IDEMPOTENCY_IN_PROGRESS",
                    "{body}"
                );
            }
            other => panic!("a checkout racer got {other}: {body}"),
        }
    }
    for hold_id in &holds {
        let won = &winners[hold_id];
        let orders: std::collections::BTreeSet<&String> = won.iter().map(|(_, o)| o).collect();
        assert_eq!(orders.len(), 1, "hold {hold_id}: one order, got {won:?}");
        if won.len() > 1 {
            assert!(
                won.iter().all(|(shared, _)| *shared),
                "only the shared key may answer twice: {won:?}"
            );
        }
    }
    let counted = orders_per_hold(&app.db, &event_id).await;
    assert_eq!(counted.len(), holds.len());
    assert!(counted.iter().all(|(_, n)| *n == 1), "{counted:?}");
    // The starts and the payments were the engine's, in the writer's groups.
    let metrics = app.get(&app.admin, "/metrics").await;
    let text = String::from_utf8_lossy(&metrics.bytes);
    for kind in ["checkout", "payment"] {
        let decided = text.lines().any(|line| {
            line.starts_with("boxoffice_writer_commands_total")
                && line.contains(&format!("kind=\"{kind}\""))
                && line.contains("path=\"engine\"")
        });
        assert!(decided, "no {kind} decided by the engine:\n{text}");
    }
    // Every order is sold, its seat too.
    for hold_id in &holds {
        let hold = app
            .get(&token("buyer"), &format!("/v1/holds/{hold_id}"))
            .await
            .json();
        assert_eq!(hold["status"], "CONFIRMED", "{hold}");
    }
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_checkouts_race_through_the_writer() {
    checkouts_race_through_the_writer(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_checkouts_race_through_the_writer() {
    checkouts_race_through_the_writer(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nodes_start_one_checkout() {
    let a = TestApp::spawn(Backend::Postgres).await;
    let b = second_node(&a).await;
    let event_id = a.create_event(json!({"maxTicketsPerAccount": 8})).await;
    for attempt in 0..5 {
        let hold = a
            .hold(
                "pair",
                &event_id,
                &format!("h{attempt}"),
                json!({"seatIds": [format!("A-6-{}", attempt + 1)]}),
            )
            .await;
        assert_eq!(hold.status, StatusCode::CREATED);
        let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
        // Node b has not heard of the hold yet, or just has: either way one key gives one
        // order, and another key at the same time gets 409.
        let same_a = checkout_racers(&a, "pair", &hold_id, "pay".into()).await;
        let same_b = checkout_racers(&b, "pair", &hold_id, "pay".into()).await;
        let other = checkout_racers(&b, "pair", &hold_id, "other".into()).await;
        let (status_a, body_a) = same_a.await.unwrap();
        let (status_b, body_b) = same_b.await.unwrap();
        let (status_o, body_o) = other.await.unwrap();
        let created: Vec<&serde_json::Value> = [
            (status_a, &body_a),
            (status_b, &body_b),
            (status_o, &body_o),
        ]
        .into_iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .map(|(_, body)| body)
        .collect();
        assert!(!created.is_empty(), "{body_a} / {body_b} / {body_o}");
        let orders: std::collections::BTreeSet<&str> = created
            .iter()
            .map(|b| b["orderId"].as_str().unwrap())
            .collect();
        assert_eq!(orders.len(), 1, "{body_a} / {body_b} / {body_o}");
        if status_o == StatusCode::CREATED {
            assert_eq!(status_a, StatusCode::CONFLICT, "{body_a}");
            assert_eq!(status_b, StatusCode::CONFLICT, "{body_b}");
        } else {
            assert_eq!(status_o, StatusCode::CONFLICT, "{body_o}");
            assert_eq!(status_a, StatusCode::CREATED, "{body_a}");
            assert_eq!(status_b, StatusCode::CREATED, "{body_b}");
        }
    }
    let counted = orders_per_hold(&a.db, &event_id).await;
    assert_eq!(counted.len(), 5);
    assert!(counted.iter().all(|(_, n)| *n == 1), "{counted:?}");
    let b_store: TestStore = b.stop();
    b_store.cleanup().await;
    a.finish().await;
}

/// On PostgreSQL a group in flight holds the lease row `FOR KEY SHARE`: the owner's renewal
/// does not wait for it, a takeover does (and then bumps the epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_takeover_waits_for_the_group_in_flight_and_a_renewal_does_not() {
    use boxoffice_store::lease::Taken;
    use std::time::Duration;

    let app = TestApp::spawn(Backend::Postgres).await;
    let event_id = app.create_event(json!({})).await;
    let store = app.db.store.clone();
    let Taken::Mine(first) = store.take_lease(&event_id, "node-a", 300).await.unwrap() else {
        panic!("a free lease is taken");
    };
    // A group of node-a in flight: the lease row read as the group's first statement does.
    let pool = app.db.pg.as_ref().unwrap().pool().clone();
    let mut group = pool.begin().await.unwrap();
    let epoch: i64 = sqlx::query_scalar(
        "SELECT epoch FROM event_lease WHERE event_id = $1 AND node_id = 'node-a' FOR KEY SHARE",
    )
    .bind(&event_id)
    .fetch_one(&mut *group)
    .await
    .unwrap();
    assert_eq!(epoch, 1);
    let renewed = tokio::time::timeout(
        Duration::from_secs(30),
        store.renew_leases("node-a", &[(event_id.clone(), 1)], 300),
    )
    .await
    .expect("a renewal never waits for a group")
    .unwrap();
    assert_eq!(renewed, vec![event_id.clone()]);
    // The lease lapses (the store's clock moved past it); node-b's takeover waits for the
    // group in flight: its statement is seen waiting for a lock, and has not finished.
    app.db.advance_clock(400).await;
    let takeover = {
        let (store, event_id) = (store.clone(), event_id.clone());
        tokio::spawn(async move { store.take_lease(&event_id, "node-b", 60_000).await })
    };
    let waiting = common::waits_for_a_lock(&pool, "event_lease", || takeover.is_finished()).await;
    assert!(waiting, "the takeover's statement waits for a lock");
    assert!(
        !takeover.is_finished(),
        "the takeover waits for the group in flight"
    );
    group.commit().await.unwrap();
    match takeover.await.unwrap().unwrap() {
        Taken::Mine(lease) => assert_eq!((lease.node_id.as_str(), lease.epoch), ("node-b", 2)),
        other => panic!("the lapsed lease is taken over: {other:?}"),
    }
    assert!(
        !store
            .release_lease(&event_id, &first.fence())
            .await
            .unwrap()
    );
    app.finish().await;
}

/// A lease is good only on the server it was taken on (issue 38). After a failover the
/// shard's rows are on another server (the promoted standby), whose generation differs: the
/// owner's groups are fenced, its renewal finds nothing, and its next take bumps the epoch,
/// after which its groups commit again. The promotion is stood in for by the lease row
/// naming another generation, which is what the promoted standby reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_taken_before_a_failover_is_stale_on_the_new_primary() {
    use boxoffice_store::lease::Taken;

    let app = TestApp::spawn(Backend::Postgres).await;
    let event_id = app.create_event(json!({})).await;
    let store = app.db.store.clone();
    let event = store.get_event(&event_id).await.unwrap().expect("event");
    let Taken::Mine(first) = store.take_lease(&event_id, "node-a", 60_000).await.unwrap() else {
        panic!("a free lease is taken");
    };
    fenced_hold(&store, &event, "fan-1", "A-1-1", Some(first.fence()))
        .await
        .expect("the owner's group commits on the server it took the lease on");
    let pool = app.db.pg.as_ref().unwrap().pool().clone();
    let generation: i64 =
        sqlx::query_scalar("SELECT server_generation FROM event_lease WHERE event_id = $1")
            .bind(&event_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    let postmaster: i64 = sqlx::query_scalar(
        "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(generation, postmaster, "the lease names its server");
    sqlx::query(
        "UPDATE event_lease SET server_generation = server_generation - 1 WHERE event_id = $1",
    )
    .bind(&event_id)
    .execute(&pool)
    .await
    .unwrap();

    match fenced_hold(&store, &event, "fan-2", "A-1-2", Some(first.fence())).await {
        Err(StoreError::Fenced(why)) => assert!(why.contains("node-a"), "{why}"),
        other => panic!("a group under a lease of another server must be fenced: {other:?}"),
    }
    assert_eq!(
        store
            .renew_leases("node-a", &[(event_id.clone(), first.epoch)], 60_000)
            .await
            .unwrap(),
        Vec::<String>::new(),
        "a lease of another server is not renewed"
    );
    let Taken::Mine(again) = store.take_lease(&event_id, "node-a", 60_000).await.unwrap() else {
        panic!("the owner takes its lease again");
    };
    assert_eq!(again.epoch, first.epoch + 1);
    fenced_hold(&store, &event, "fan-3", "A-1-3", Some(again.fence()))
        .await
        .expect("under the lease taken again, the group commits");
    assert!(matches!(
        fenced_hold(&store, &event, "fan-4", "A-1-4", Some(first.fence())).await,
        Err(StoreError::Fenced(_))
    ));
    app.db.assert_invariants().await;
    app.finish().await;
}
