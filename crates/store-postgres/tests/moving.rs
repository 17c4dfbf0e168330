//! `boxoffice shard move` at the store's level (`boxoffice_store_postgres::moving`), the steps
//! `crates/cli/src/shards.rs` runs, over a PostgreSQL server of the test's own with
//! `wal_level = logical` (`support`: the machine's shared server has `replica`, and a move by
//! logical replication needs `logical`): its databases are the home shard `main`, which holds
//! the directory, and `s1`. The server goes when the test ends, also when it fails.
//!
//! Requests go through a [`Front`] over both shards, as a node's do. A node that read the
//! event's place before the move follows it within `PLACE_TTL`; here a second `Front`, which
//! reads the directory afresh, stands for a node after that.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::event::{EventSpec, Section, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::order::OrderStatus;
use boxoffice_store::checkout::{CheckoutBegun, CheckoutStart, OrderView, ProviderVerdict};
use boxoffice_store::front::Front;
use boxoffice_store::lease::{LeaseStore, Taken};
use boxoffice_store::shard::{DirectoryStore, PlacementRule, Places, ShardRecord};
use boxoffice_store::{
    EventRecord, OneShot as _, ReadStore, ReleaseOutcome, Store, StoreResult, WorkerStore,
};
use boxoffice_store_postgres::PgStore;
use boxoffice_store_postgres::moving::{self, MoveObserver, MoveStep, Moved, ShardRef};
use support::TestServer;

const EVENT_ID: &str = "ev-moved";
/// An event that stays on `main` while [`EVENT_ID`] moves.
const OTHER_EVENT_ID: &str = "ev-stays";
/// How long a write may wait in a test before it is taken for blocked (a failure, not a
/// measurement: a write blocked by the move would wait for the move, which waits for it).
const WRITE_BLOCKED_AFTER_S: u64 = 30;

/// The test's server, its databases by shard name and their stores (`main` first).
struct Shards {
    server: TestServer,
    names: Vec<&'static str>,
    urls: Vec<String>,
    stores: Vec<Arc<PgStore>>,
}

impl Shards {
    /// A server with `settings`; `main` with `s1` in its directory, both migrated.
    async fn create(settings: &str) -> Self {
        let server = TestServer::start(settings);
        let names = vec!["main", "s1"];
        let urls: Vec<String> = names.iter().map(|name| server.url(name)).collect();
        let mut stores = Vec::new();
        for url in &urls {
            PgStore::create_database_if_missing(url)
                .await
                .expect("create the test database");
            let store = PgStore::connect(url).await.expect("connect");
            store.migrate().await.expect("migrate");
            stores.push(Arc::new(store));
        }
        stores[0]
            .add_shard(&ShardRecord {
                name: "s1".into(),
                url: urls[1].clone(),
            })
            .await
            .expect("add shard s1");
        Self {
            server,
            names,
            urls,
            stores,
        }
    }

    fn main(&self) -> &PgStore {
        &self.stores[0]
    }

    fn s1(&self) -> &PgStore {
        &self.stores[1]
    }

    fn shard(&self, name: &str) -> ShardRef<'_> {
        let at = self
            .names
            .iter()
            .position(|n| *n == name)
            .expect("a shard of the test");
        ShardRef {
            name: self.names[at],
            url: &self.urls[at],
            store: &self.stores[at],
        }
    }

    /// A store over both shards that has read nothing of the directory yet.
    fn front(&self) -> Front {
        let places = Arc::new(Places::new(
            vec!["main".into(), "s1".into()],
            self.stores[0].clone(),
        ));
        let stores: Vec<Arc<dyn Store>> = self
            .stores
            .iter()
            .map(|s| s.clone() as Arc<dyn Store>)
            .collect();
        Front::sharded(stores, places)
    }

    /// `boxoffice shard move --event EVENT_ID --to TO`: by logical replication.
    async fn move_event(
        &self,
        from: &str,
        to: &str,
        observer: &mut dyn MoveObserver,
    ) -> StoreResult<Moved> {
        moving::move_by_replication(
            self.main(),
            EVENT_ID,
            self.shard(from),
            self.shard(to),
            observer,
        )
        .await
    }

    async fn move_to_s1(&self) -> Moved {
        self.move_event("main", "s1", &mut Steps::default())
            .await
            .expect("move the event to s1")
    }

    async fn close(self) {
        for store in &self.stores {
            store.pool().close().await;
        }
        // The server stops and its directory goes with it.
        drop(self.server);
    }
}

/// Runs `test` over fresh shards on a server with `settings`, then stops the server, also
/// when `test` panics (its panic goes on afterwards).
async fn with_shards_on<F, Fut>(settings: &str, test: F)
where
    F: FnOnce(Arc<Shards>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let shards = Arc::new(Shards::create(settings).await);
    let ran = tokio::spawn(test(shards.clone())).await;
    let shards = Arc::into_inner(shards).expect("the test let go of its shards");
    shards.close().await;
    if let Err(failed) = ran {
        std::panic::resume_unwind(failed.into_panic());
    }
}

async fn with_shards<F, Fut>(test: F)
where
    F: FnOnce(Arc<Shards>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    with_shards_on(support::LOGICAL, test).await;
}

/// Keeps the steps a move told.
#[derive(Default)]
struct Steps {
    told: Vec<MoveStep>,
}

#[async_trait::async_trait]
impl MoveObserver for Steps {
    async fn step(&mut self, step: &MoveStep) {
        self.told.push(step.clone());
    }
}

fn spec() -> EventSpec {
    EventSpec {
        name: "Moved".into(),
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s: 600,
        payment_grace_s: 60,
        max_seats_per_hold: 4,
        max_tickets_per_account: 6,
        exchange_cutoff_s: 0,
        transfer_cutoff_s: 0,
        waitlist_offer_ttl_s: 600,
        refund_policy: None,
        holder_policy: None,
        sale: Default::default(),
        chart: None,
        waiting_room: WaitingRoomSettings::default(),
        sections: vec![Section {
            name: "A".into(),
            rows: 1,
            seats_per_row: 4,
            price_minor: 5_000,
            row_lengths: Vec::new(),
        }],
        tiers: Vec::new(),
    }
}

fn render_event(record: &EventRecord) -> StoredResponse {
    StoredResponse {
        status: 201,
        body: record.event_id.clone().into_bytes(),
    }
}

fn render_hold(outcome: &HoldOutcome) -> StoredResponse {
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

fn render_order(order: &OrderView) -> StoredResponse {
    StoredResponse {
        status: 201,
        body: format!("{} {:?}", order.order_id, order.status).into_bytes(),
    }
}

fn create_scope() -> IdempotencyScope {
    IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/admin/events".into(),
        key: "create-moved".into(),
    }
}

fn seat_request(account: &str, key: &str, hold_id: &str, seat_id: &str) -> HoldRequest {
    let shape = HoldShape::Seats {
        seat_ids: vec![seat_id.into()],
    };
    HoldRequest {
        account_id: account.into(),
        idempotency_key: key.into(),
        request_digest: format!("{shape:?}"),
        new_hold_id: hold_id.into(),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    }
}

fn checkout_scope() -> IdempotencyScope {
    IdempotencyScope {
        account_id: "carol".into(),
        endpoint: "POST /v1/holds/h-carol/checkout".into(),
        key: "carol-pays".into(),
    }
}

/// One hold request through `store`; its answer.
async fn hold(store: &Front, event: &EventRecord, request: HoldRequest) -> Idempotent {
    let answers = store
        .hold_batch(
            event,
            &boxoffice_store::engine::hold_endpoint(&event.event_id),
            &[request],
            &render_hold,
        )
        .await
        .expect("hold batch");
    let [answer] = <[Idempotent; 1]>::try_from(answers).expect("one answer");
    answer
}

async fn idempotency_rows(store: &PgStore) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM idempotency")
        .fetch_one(store.pool())
        .await
        .expect("count idempotency records")
}

/// After a move the event's requests are answered on the new shard as they were on the old:
/// a granted hold's key replays its hold (before, 422: the hold's key without its record),
/// a recorded refusal replays the refusal (before, decided again), a checkout settled after
/// the move replays the settled order (before, the PENDING answer left on the old shard),
/// and the event's creation replays (before, the creation ran again and failed).
#[tokio::test]
async fn a_moved_event_keeps_its_idempotency_records() {
    with_shards(|shards| async move {
        let before = shards.front();
        let created = before
            .create_event(
                &create_scope(),
                "create-digest",
                EVENT_ID,
                &spec(),
                &render_event,
            )
            .await
            .expect("create the event");
        let Idempotent::Fresh(created) = created else {
            panic!("creation: {created:?}");
        };
        assert!(
            shards.main().has_event(EVENT_ID).await.expect("main"),
            "placed on main (the fewest events, first by name)"
        );
        let event = before
            .get_event(EVENT_ID)
            .await
            .expect("get the event")
            .expect("the event");

        // Alice holds A-1-1; Bob's request for it is refused and recorded; Carol holds A-1-2 and
        // starts its checkout.
        let alice = seat_request("alice", "alice-k", "h-alice", "A-1-1");
        let Idempotent::Fresh(alice_held) = hold(&before, &event, alice.clone()).await else {
            panic!("alice's hold was not granted");
        };
        assert_eq!(alice_held.status, 201);
        let bob = seat_request("bob", "bob-k", "h-bob", "A-1-1");
        let Idempotent::Fresh(bob_refused) = hold(&before, &event, bob.clone()).await else {
            panic!("bob's hold was not decided");
        };
        assert_eq!(bob_refused.status, 409, "{bob_refused:?}");
        let carol = seat_request("carol", "carol-k", "h-carol", "A-1-2");
        let Idempotent::Fresh(carol_held) = hold(&before, &event, carol).await else {
            panic!("carol's hold was not granted");
        };
        assert_eq!(carol_held.status, 201);
        let start = CheckoutStart {
            scope: checkout_scope(),
            request_digest: "carol-pays-digest".into(),
            hold_id: "h-carol".into(),
            order_id: "o-carol".into(),
            operation_id: "op-carol".into(),
            provider: "fake".into(),
            payment_method: "card".into(),
        };
        let begun = before
            .begin_checkout(&start, &render_order)
            .await
            .expect("begin checkout");
        assert!(matches!(begun, CheckoutBegun::Started { .. }), "{begun:?}");
        let records_on_main = idempotency_rows(shards.main()).await;
        assert_eq!(records_on_main, 5, "creation, 3 holds, 1 checkout");

        shards.move_to_s1().await;
        let after = shards.front();
        assert_eq!(
            hold(&after, &event, alice).await,
            Idempotent::Replayed(alice_held),
            "a granted hold's key replays its hold"
        );
        // A-1-1 free again: a refusal decided again would now be granted.
        let released = after
            .release_hold("alice", "h-alice")
            .await
            .expect("release alice's hold");
        assert!(
            matches!(released, ReleaseOutcome::Released(_)),
            "{released:?}"
        );
        assert_eq!(
            hold(&after, &event, bob).await,
            Idempotent::Replayed(bob_refused),
            "a recorded refusal replays the refusal"
        );
        assert!(
            after
                .get_hold("h-bob")
                .await
                .expect("get bob's hold")
                .is_none(),
            "no hold for bob's replay"
        );

        // Carol's payment is settled on s1; her checkout's replay is the settled order.
        let settled = after
            .settle_payment(
                "op-carol",
                &ProviderVerdict::Authorized {
                    provider_ref: "ref-carol".into(),
                },
                None,
                Some((&checkout_scope(), &render_order)),
            )
            .await
            .expect("settle carol's payment")
            .expect("carol's operation");
        assert_eq!(settled.order.status, OrderStatus::Confirmed);
        let replay = after
            .begin_checkout(&start, &render_order)
            .await
            .expect("replay carol's checkout");
        assert_eq!(
            replay,
            CheckoutBegun::Replayed(render_order(&settled.order)),
            "the checkout's replay is the settled order"
        );

        let created_again = after
            .create_event(
                &create_scope(),
                "create-digest",
                EVENT_ID,
                &spec(),
                &render_event,
            )
            .await
            .expect("replay the creation");
        assert_eq!(created_again, Idempotent::Replayed(created));

        assert_eq!(
            idempotency_rows(shards.main()).await,
            0,
            "the event's records left main"
        );
        assert_eq!(
            idempotency_rows(shards.s1()).await,
            records_on_main,
            "the event's records are on s1, none added by the replays"
        );
    })
    .await;
}

/// The move's fence waits for the owner's group in flight: a group holds the lease row
/// `FOR KEY SHARE` from its first statement to its commit (`boxoffice_store_sql::group`'s
/// `open`, the statement below), and no group may commit on the old shard after the fence.
/// The fence is seen waiting for that lock, and returns once the group commits.
#[tokio::test]
async fn the_move_fence_waits_for_the_owners_group_in_flight() {
    with_shards(|shards| async move {
        let store = shards.main();
        store
            .create_event(
                &create_scope(),
                "create-digest",
                EVENT_ID,
                &spec(),
                &render_event,
            )
            .await
            .expect("create the event");
        let Taken::Mine(lease) = store
            .take_lease(EVENT_ID, "node-a", 60_000)
            .await
            .expect("take the lease")
        else {
            panic!("node-a did not get the lease");
        };

        let mut group = store.pool().begin().await.expect("begin the group");
        let group_epoch: i64 = sqlx::query_scalar(
            "SELECT epoch FROM event_lease WHERE event_id = $1 AND node_id = $2 FOR KEY SHARE",
        )
        .bind(EVENT_ID)
        .bind("node-a")
        .fetch_one(&mut *group)
        .await
        .expect("the group reads its lease");
        assert_eq!(u64::try_from(group_epoch).ok(), Some(lease.epoch));

        let fence = tokio::spawn({
            let store = shards.stores[0].clone();
            async move { store.fence_for_move(EVENT_ID).await }
        });
        // The fence's connection waits for a row lock on event_lease; a fence that committed
        // instead did not wait for the group.
        let mut waiting = false;
        while !fence.is_finished() {
            waiting = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                                 WHERE datname = current_database() AND wait_event_type = 'Lock'
                                   AND query LIKE '%event_lease%')",
            )
            .fetch_one(store.pool())
            .await
            .expect("read pg_stat_activity");
            if waiting {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            waiting,
            "the fence committed while a group held the lease: {:?}",
            fence.await
        );
        group.commit().await.expect("the group commits");
        let fence_epoch = fence
            .await
            .expect("the fence task")
            .expect("the fence, once the group committed");
        assert_eq!(u64::try_from(fence_epoch).ok(), Some(lease.epoch + 1));
    })
    .await;
}

/// An event of `rows` rows of `seats_per_row` seats.
fn spec_of(name: &str, rows: u32, seats_per_row: u32) -> EventSpec {
    let mut spec = spec();
    spec.name = name.into();
    spec.sections[0].rows = rows;
    spec.sections[0].seats_per_row = seats_per_row;
    spec
}

fn create_scope_of(event_id: &str) -> IdempotencyScope {
    IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/admin/events".into(),
        key: format!("create-{event_id}"),
    }
}

/// Creates `event_id` through `front`; the event as stored.
async fn create(front: &Front, event_id: &str, spec: &EventSpec) -> EventRecord {
    let created = front
        .create_event(
            &create_scope_of(event_id),
            "create-digest",
            event_id,
            spec,
            &render_event,
        )
        .await
        .expect("create the event");
    assert!(matches!(created, Idempotent::Fresh(_)), "{created:?}");
    front
        .get_event(event_id)
        .await
        .expect("get the event")
        .expect("the event")
}

/// The `n`-th seat of a section of 50 seats a row.
fn seat_number(n: u32) -> String {
    format!("A-{}-{}", n / 50 + 1, n % 50 + 1)
}

/// Rows of `event_id` in every table a move carries.
async fn event_rows(store: &PgStore, event_id: &str) -> i64 {
    let mut n = 0;
    for table in moving::EVENT_TABLES {
        let rows: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM {table} WHERE event_id = $1"
        )))
        .bind(event_id)
        .fetch_one(store.pool())
        .await
        .expect("count an event's rows");
        n += rows;
    }
    n
}

/// Publications of `store`'s database, and the server's replication slots and subscriptions
/// (the test's server: nothing else makes them).
async fn replication_left(store: &PgStore) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM pg_publication), (SELECT count(*) FROM pg_replication_slots),
                (SELECT count(*) FROM pg_subscription)",
    )
    .fetch_one(store.pool())
    .await
    .expect("count publications, slots and subscriptions")
}

async fn lease_node(store: &PgStore, event_id: &str) -> Option<String> {
    sqlx::query_scalar("SELECT node_id FROM event_lease WHERE event_id = $1")
        .bind(event_id)
        .fetch_optional(store.pool())
        .await
        .expect("read the lease")
}

/// Sells `event` one seat at a time through `front` until `stop` (or out of seats), each hold
/// a new account's, `pace` apart: each answer's latency and whether the hold was granted.
async fn sell_until(
    front: Arc<Front>,
    event: EventRecord,
    stop: Arc<AtomicBool>,
    seats: u32,
    pace: Duration,
) -> Vec<(Duration, Result<u16, String>)> {
    let mut answers = Vec::new();
    for n in 0..seats {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let account = format!("fan-{n}");
        let request = seat_request(
            &account,
            &format!("{account}-k"),
            &format!("h-{account}"),
            &seat_number(n),
        );
        let started = Instant::now();
        let answer = front
            .hold_batch(
                &event,
                &boxoffice_store::engine::hold_endpoint(&event.event_id),
                &[request],
                &render_hold,
            )
            .await;
        let latency = started.elapsed();
        answers.push((
            latency,
            match answer.as_deref() {
                Ok([Idempotent::Fresh(stored)]) => Ok(stored.status),
                other => Err(format!("{other:?}")),
            },
        ));
        tokio::time::sleep(pace).await;
    }
    answers
}

/// Writes while a move runs, at its steps: the moved event's hold while the target streams,
/// the other event's hold while the cut-over holds its locks, and the moved event's hold
/// through a node that still sends it to the source.
struct SellDuring {
    shards: Arc<Shards>,
    before: Arc<Front>,
    moved: EventRecord,
    other: EventRecord,
    during_copy: Option<Idempotent>,
    other_during_cut_over: Option<(Duration, Idempotent)>,
    stale_during_cut_over: Option<tokio::task::JoinHandle<StoreResult<Vec<Idempotent>>>>,
}

#[async_trait::async_trait]
impl MoveObserver for SellDuring {
    async fn step(&mut self, step: &MoveStep) {
        match step {
            MoveStep::Streaming { .. } => {
                let request = seat_request("dora", "dora-k", "h-dora", "A-1-2");
                self.during_copy = Some(hold(&self.before, &self.moved, request).await);
                // A stored answer rewritten and a record purged, of another event, while the
                // publication filters the idempotency table on event_id: refused for every
                // event without its replica identity FULL (migration 0018).
                for statement in [
                    "UPDATE idempotency SET created_at = created_at WHERE event_id = $1",
                    "DELETE FROM idempotency WHERE event_id = $1 AND created_at < 'epoch'",
                ] {
                    sqlx::query(statement)
                        .bind(OTHER_EVENT_ID)
                        .execute(self.shards.main().pool())
                        .await
                        .expect("another event's idempotency records change during a move");
                }
            }
            MoveStep::CatchingUp { .. } => {
                // A node that reads the directory afresh; the write must not wait for the move,
                // which waits here for it.
                let front = self.shards.front();
                let request = seat_request("olga", "olga-k", "h-olga", "B-olga");
                let request = HoldRequest {
                    shape: HoldShape::Seats {
                        seat_ids: vec![seat_number(999)],
                    },
                    ..request
                };
                let started = Instant::now();
                let answer = tokio::time::timeout(
                    Duration::from_secs(WRITE_BLOCKED_AFTER_S),
                    hold(&front, &self.other, request),
                )
                .await
                .expect("the other event's write waited for the move's cut-over");
                self.other_during_cut_over = Some((started.elapsed(), answer));
                // The moved event's write on the source waits for the cut-over's lock.
                let (before, moved) = (self.before.clone(), self.moved.clone());
                self.stale_during_cut_over = Some(tokio::spawn(async move {
                    let request = seat_request("eve", "eve-k", "h-eve", "A-1-3");
                    before
                        .hold_batch(
                            &moved,
                            &boxoffice_store::engine::hold_endpoint(&moved.event_id),
                            &[request],
                            &render_hold,
                        )
                        .await
                }));
                // Let it reach the lock (it is not required to: either way it must not be lost).
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ => {}
        }
    }
}

/// Issue 38's move: an event moves while it and another event of its shard sell. The other
/// event's writes all succeed, one of them while the cut-over holds its locks (a write that
/// waited for the move would wait forever: the move waits for it); the moved event's holds
/// made before the move and while it was copied replay from the target with their stored
/// answers; a write sent to the source during the cut-over is refused or lands on the target,
/// never lost; the moved event sells on the target; nothing of it, nor of the replication,
/// is left on the source. The other event's latencies are printed (a measurement).
#[tokio::test]
async fn the_other_events_of_the_shard_sell_throughout_a_move() {
    with_shards(|shards| async move {
        let before = Arc::new(shards.front());
        shards
            .main()
            .set_placement_rule(&PlacementRule::Pinned("main".into()))
            .await
            .expect("pin new events to main");
        let moved = create(&before, EVENT_ID, &spec_of("Moved", 4, 50)).await;
        let other = create(&before, OTHER_EVENT_ID, &spec_of("Stays", 20, 50)).await;
        let alice = seat_request("alice", "alice-k", "h-alice", "A-1-1");
        let Idempotent::Fresh(alice_held) = hold(&before, &moved, alice.clone()).await else {
            panic!("alice's hold was not granted");
        };

        let stop = Arc::new(AtomicBool::new(false));
        let seller = tokio::spawn(sell_until(
            before.clone(),
            other.clone(),
            stop.clone(),
            900,
            Duration::from_millis(10),
        ));
        let mut during = SellDuring {
            shards: shards.clone(),
            before: before.clone(),
            moved: moved.clone(),
            other: other.clone(),
            during_copy: None,
            other_during_cut_over: None,
            stale_during_cut_over: None,
        };
        let started = Instant::now();
        let report = shards
            .move_event("main", "s1", &mut during)
            .await
            .expect("move the event to s1");
        let move_ms = started.elapsed().as_millis();
        // The other event sells on a little after the move.
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let sold = seller.await.expect("the seller");

        let refused: Vec<_> = sold.iter().filter(|(_, answer)| answer != &Ok(201)).collect();
        assert!(refused.is_empty(), "the other event's holds refused: {refused:?}");
        let (cut_over_latency, answer) = during
            .other_during_cut_over
            .expect("the cut-over was reached");
        assert!(
            matches!(&answer, Idempotent::Fresh(stored) if stored.status == 201),
            "{answer:?}"
        );
        let other_holds: i64 =
            sqlx::query_scalar("SELECT count(*) FROM hold WHERE event_id = $1")
                .bind(OTHER_EVENT_ID)
                .fetch_one(shards.main().pool())
                .await
                .expect("count the other event's holds");
        assert_eq!(other_holds, sold.len() as i64 + 1, "every granted hold on main");
        let mut latencies: Vec<Duration> = sold.iter().map(|(latency, _)| *latency).collect();
        latencies.sort();
        println!(
            "move {move_ms} ms ({report:?}); other event: {} holds, median {:?}, max {:?}, during the cut-over {:?}",
            latencies.len(),
            latencies[latencies.len() / 2],
            latencies.last(),
            cut_over_latency
        );

        let after = shards.front();
        assert_eq!(
            hold(&after, &moved, alice).await,
            Idempotent::Replayed(alice_held),
            "a hold made before the move replays"
        );
        let Some(Idempotent::Fresh(dora_held)) = during.during_copy else {
            panic!("the hold during the copy: {:?}", during.during_copy);
        };
        assert_eq!(
            hold(
                &after,
                &moved,
                seat_request("dora", "dora-k", "h-dora", "A-1-2")
            )
            .await,
            Idempotent::Replayed(dora_held),
            "a hold made while the target streamed replays"
        );
        let stale = during
            .stale_during_cut_over
            .expect("the stale write was sent")
            .await
            .expect("the stale write's task");
        let eve_on_s1 = after.get_hold("h-eve").await.expect("read eve's hold");
        match stale.as_deref() {
            Ok([Idempotent::Fresh(stored)]) if stored.status == 201 => {
                assert!(eve_on_s1.is_some(), "a granted hold is on the target")
            }
            _ => assert!(eve_on_s1.is_none(), "{stale:?} left a hold: {eve_on_s1:?}"),
        }
        let frank = seat_request("frank", "frank-k", "h-frank", "A-2-1");
        let Idempotent::Fresh(frank_held) = hold(&after, &moved, frank).await else {
            panic!("no hold after the move");
        };
        assert_eq!(frank_held.status, 201);
        assert!(shards.s1().has_event(EVENT_ID).await.expect("s1"));

        assert_eq!(event_rows(shards.main(), EVENT_ID).await, 0, "nothing left on main");
        assert!(event_rows(shards.main(), OTHER_EVENT_ID).await > 0);
        assert_eq!(event_rows(shards.s1(), OTHER_EVENT_ID).await, 0);
        assert_eq!(replication_left(shards.main()).await, (0, 0, 0));
        assert_eq!(replication_left(shards.s1()).await, (0, 0, 0));
    })
    .await;
}

/// Without `wal_level = logical` on the source the move is refused at once, with the reason,
/// and changes nothing: no fence, no publication, the directory as it was. The locked copy
/// still moves it.
#[tokio::test]
async fn a_move_needs_wal_level_logical() {
    with_shards_on(support::REPLICA, |shards| async move {
        let front = shards.front();
        create(&front, EVENT_ID, &spec()).await;
        let refused = shards
            .move_event("main", "s1", &mut Steps::default())
            .await
            .expect_err("a move without wal_level = logical");
        assert!(
            refused.to_string().contains("wal_level = replica")
                && refused.to_string().contains("--locked-copy"),
            "{refused}"
        );
        assert!(shards.main().has_event(EVENT_ID).await.expect("main"));
        assert_ne!(
            lease_node(shards.main(), EVENT_ID).await.as_deref(),
            Some("shard-move")
        );
        assert_eq!(
            shards
                .main()
                .event_shard(EVENT_ID)
                .await
                .expect("directory"),
            Some("main".into())
        );
        assert_eq!(replication_left(shards.main()).await.0, 0);

        shards.main().fence_for_move(EVENT_ID).await.expect("fence");
        shards
            .main()
            .move_out(EVENT_ID, shards.s1())
            .await
            .expect("the locked copy");
        assert!(shards.s1().has_event(EVENT_ID).await.expect("s1"));
        assert_eq!(event_rows(shards.main(), EVENT_ID).await, 0);
    })
    .await;
}

/// Stops a move at the first step `at` accepts: tells `reached`, then never returns (the
/// caller drops the move, as a mover killed there would stop).
struct StopAt {
    at: fn(&MoveStep) -> bool,
    reached: Option<tokio::sync::oneshot::Sender<()>>,
}

#[async_trait::async_trait]
impl MoveObserver for StopAt {
    async fn step(&mut self, step: &MoveStep) {
        if (self.at)(step) {
            if let Some(reached) = self.reached.take() {
                let _ = reached.send(());
            }
            std::future::pending::<()>().await;
        }
    }
}

async fn move_stopped_at(shards: &Shards, from: &str, to: &str, at: fn(&MoveStep) -> bool) {
    let (reached, stopped) = tokio::sync::oneshot::channel();
    let mut stop = StopAt {
        at,
        reached: Some(reached),
    };
    tokio::select! {
        moved = shards.move_event(from, to, &mut stop) => panic!("the move did not stop: {moved:?}"),
        _ = stopped => {}
    }
}

/// A move stopped in its cut-over (fenced, the target caught up, the directory not flipped)
/// leaves its subscription, slot and publication; run again, it starts over and converges.
/// A move stopped right after the flip leaves the event's rows and publication on the
/// source; `clean_after_move` (what `shard move` to where the event is runs) removes them.
/// Each time the event's records replay and it sells where the directory says.
#[tokio::test]
async fn a_stopped_move_converges_when_run_again() {
    with_shards(|shards| async move {
        let before = shards.front();
        let moved = create(&before, EVENT_ID, &spec_of("Moved", 2, 50)).await;
        let alice = seat_request("alice", "alice-k", "h-alice", "A-1-1");
        let Idempotent::Fresh(alice_held) = hold(&before, &moved, alice.clone()).await else {
            panic!("alice's hold was not granted");
        };

        move_stopped_at(&shards, "main", "s1", |s| {
            matches!(s, MoveStep::CaughtUp { .. })
        })
        .await;
        assert_eq!(replication_left(shards.main()).await, (1, 1, 1));
        assert_eq!(
            lease_node(shards.main(), EVENT_ID).await.as_deref(),
            Some("shard-move")
        );
        assert_eq!(
            shards
                .main()
                .event_shard(EVENT_ID)
                .await
                .expect("directory"),
            Some("main".into())
        );
        let rerun = shards.move_to_s1().await;
        println!("run again: {rerun:?}");
        assert_eq!(replication_left(shards.main()).await, (0, 0, 0));
        assert_eq!(replication_left(shards.s1()).await, (0, 0, 0));
        assert_eq!(event_rows(shards.main(), EVENT_ID).await, 0);
        let on_s1 = shards.front();
        assert_eq!(
            hold(&on_s1, &moved, alice.clone()).await,
            Idempotent::Replayed(alice_held.clone())
        );
        let bob = seat_request("bob", "bob-k", "h-bob", "A-1-2");
        assert!(matches!(
            hold(&on_s1, &moved, bob).await,
            Idempotent::Fresh(_)
        ));

        move_stopped_at(&shards, "s1", "main", |s| {
            matches!(s, MoveStep::Flipped { .. })
        })
        .await;
        assert_eq!(
            shards
                .main()
                .event_shard(EVENT_ID)
                .await
                .expect("directory"),
            Some("main".into())
        );
        assert!(event_rows(shards.s1(), EVENT_ID).await > 0, "left on s1");
        assert_eq!(
            replication_left(shards.s1()).await.0,
            1,
            "s1's publication left"
        );
        moving::clean_after_move(shards.s1(), shards.main(), EVENT_ID, &mut Steps::default())
            .await
            .expect("clean s1");
        assert_eq!(event_rows(shards.s1(), EVENT_ID).await, 0);
        assert_eq!(replication_left(shards.s1()).await, (0, 0, 0));
        let on_main = shards.front();
        assert_eq!(
            hold(&on_main, &moved, alice).await,
            Idempotent::Replayed(alice_held)
        );
        let carol = seat_request("carol", "carol-k", "h-carol", "A-1-3");
        assert!(matches!(
            hold(&on_main, &moved, carol).await,
            Idempotent::Fresh(_)
        ));
        assert!(
            on_main
                .get_hold("h-bob")
                .await
                .expect("bob's hold")
                .is_some()
        );
    })
    .await;
}

/// A copy the target refuses (here a hold id taken there by another event) stops the
/// subscription (`disable_on_error`) instead of retrying forever: the move fails with the
/// reason, drops its subscription, slot and publication and the target's partial copy, and
/// the event sells on where it was.
#[tokio::test]
async fn a_failed_copy_is_undone() {
    with_shards(|shards| async move {
        let before = shards.front();
        let moved = create(&before, EVENT_ID, &spec()).await;
        let alice = seat_request("alice", "alice-k", "h-alice", "A-1-1");
        let Idempotent::Fresh(alice_held) = hold(&before, &moved, alice.clone()).await else {
            panic!("alice's hold was not granted");
        };
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, quantity, seats, total_minor,
                               currency, idempotency_key, created_at, expires_at, updated_at)
             VALUES ('ev-elsewhere', 'h-alice', 'zed', 'RELEASED', 1, '[]', 0, 'EUR', 'zed-k',
                     now(), now(), now())",
        )
        .execute(shards.s1().pool())
        .await
        .expect("plant a hold id on s1");

        let failed = shards
            .move_event("main", "s1", &mut Steps::default())
            .await
            .expect_err("a copy that breaks a unique index on the target");
        assert!(
            failed.to_string().contains("stopped on an error"),
            "{failed}"
        );
        assert_eq!(replication_left(shards.main()).await, (0, 0, 0));
        assert_eq!(event_rows(shards.s1(), EVENT_ID).await, 0, "{failed}");
        assert_eq!(
            shards
                .main()
                .event_shard(EVENT_ID)
                .await
                .expect("directory"),
            Some("main".into())
        );
        assert_ne!(
            lease_node(shards.main(), EVENT_ID).await.as_deref(),
            Some("shard-move")
        );
        assert_eq!(
            hold(&before, &moved, alice).await,
            Idempotent::Replayed(alice_held)
        );
        let bob = seat_request("bob", "bob-k", "h-bob", "A-1-2");
        assert!(matches!(
            hold(&before, &moved, bob).await,
            Idempotent::Fresh(_)
        ));
    })
    .await;
}

/// Looks at the target's copy while the target streams it (the move goes from s1 to main,
/// whose index comes first in a `Front`).
struct LookAtTheCopy {
    shards: Arc<Shards>,
    account_read: Option<String>,
    expired_on_target: Option<u64>,
}

#[async_trait::async_trait]
impl MoveObserver for LookAtTheCopy {
    async fn step(&mut self, step: &MoveStep) {
        if !matches!(step, MoveStep::Streaming { .. }) {
            return;
        }
        let target = self.shards.main();
        // The copy made different for a moment, to see which shard a read by id takes.
        for account in ["the-copy", "alice"] {
            sqlx::query("UPDATE hold SET account_id = $1 WHERE hold_id = 'h-alice'")
                .bind(account)
                .execute(target.pool())
                .await
                .expect("mark the copy");
            if account == "the-copy" {
                let read = self
                    .shards
                    .front()
                    .get_hold("h-alice")
                    .await
                    .expect("read alice's hold")
                    .expect("alice's hold");
                self.account_read = Some(read.account_id);
            }
        }
        // Alice's hold is due by the target's clock: its sweeper leaves it alone.
        target
            .advance_clock(Duration::from_secs(700))
            .await
            .expect("move the target's clock");
        let swept = target
            .expire_due_holds(100, 0)
            .await
            .expect("the target's sweep");
        self.expired_on_target = Some(swept.holds_expired);
    }
}

/// While a move's target streams the event's rows, the copy is nobody's but the mover's: a
/// read by id through a `Front` takes the shard the directory names (not the first shard
/// that has the id), and the target's sweeper does not expire a due hold of the copy. Once
/// the directory names the target, its sweeper does.
#[tokio::test]
async fn the_targets_copy_is_left_alone_until_the_cut_over() {
    with_shards(|shards| async move {
        shards
            .main()
            .set_placement_rule(&PlacementRule::Pinned("s1".into()))
            .await
            .expect("pin new events to s1");
        let before = shards.front();
        let moved = create(&before, EVENT_ID, &spec()).await;
        assert!(shards.s1().has_event(EVENT_ID).await.expect("s1"));
        let alice = seat_request("alice", "alice-k", "h-alice", "A-1-1");
        assert!(matches!(
            hold(&before, &moved, alice).await,
            Idempotent::Fresh(_)
        ));

        let mut look = LookAtTheCopy {
            shards: shards.clone(),
            account_read: None,
            expired_on_target: None,
        };
        shards
            .move_event("s1", "main", &mut look)
            .await
            .expect("move the event to main");
        assert_eq!(look.account_read.as_deref(), Some("alice"), "read from s1");
        assert_eq!(look.expired_on_target, Some(0), "the copy was swept");

        let swept = shards
            .main()
            .expire_due_holds(100, 0)
            .await
            .expect("main's sweep after the move");
        assert_eq!(swept.holds_expired, 1, "the event is main's now");
    })
    .await;
}
