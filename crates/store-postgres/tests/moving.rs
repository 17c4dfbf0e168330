//! `boxoffice shard move` at the store's level (`boxoffice_store_postgres::moving`), the steps
//! `crates/cli/src/shards.rs` runs, over two databases of their own at `BOXOFFICE_TEST_PG_URL`
//! (default `postgres://postgres@127.0.0.1:5432`): the home shard `main`, which holds the
//! directory, and `s1`. Both are dropped afterwards.
//!
//! Requests go through a [`Front`] over both shards, as a node's do. A node that read the
//! event's place before the move follows it within `PLACE_TTL`; here a second `Front`, which
//! reads the directory afresh, stands for a node after that.

use std::sync::Arc;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::event::{EventSpec, Section, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::order::OrderStatus;
use boxoffice_store::checkout::{CheckoutBegun, CheckoutStart, OrderView, ProviderVerdict};
use boxoffice_store::front::Front;
use boxoffice_store::lease::{LeaseStore, Taken};
use boxoffice_store::shard::{DirectoryStore, Places, ShardRecord};
use boxoffice_store::{EventRecord, OneShot as _, ReadStore, ReleaseOutcome, Store, WorkerStore};
use boxoffice_store_postgres::PgStore;

const EVENT_ID: &str = "ev-moved";

fn base_url() -> String {
    std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

/// The test's databases, by name, and their stores (`main` first).
struct Shards {
    names: Vec<String>,
    stores: Vec<Arc<PgStore>>,
}

impl Shards {
    /// `main` with `s1` in its directory, both migrated.
    async fn create() -> Self {
        let run = uuid::Uuid::now_v7().simple().to_string();
        let names = vec![
            format!("boxoffice_moving_main_{run}"),
            format!("boxoffice_moving_s1_{run}"),
        ];
        let mut stores = Vec::new();
        for name in &names {
            let url = format!("{}/{name}", base_url());
            PgStore::create_database_if_missing(&url)
                .await
                .expect("create the test database");
            let store = PgStore::connect(&url).await.expect("connect");
            store.migrate().await.expect("migrate");
            stores.push(Arc::new(store));
        }
        stores[0]
            .add_shard(&ShardRecord {
                name: "s1".into(),
                url: format!("{}/{}", base_url(), names[1]),
            })
            .await
            .expect("add shard s1");
        Self { names, stores }
    }

    fn main(&self) -> &PgStore {
        &self.stores[0]
    }

    fn s1(&self) -> &PgStore {
        &self.stores[1]
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

    /// `boxoffice shard move --event EVENT_ID --to s1`'s steps: fence, copy and delete,
    /// directory.
    async fn move_to_s1(&self) {
        self.main()
            .fence_for_move(EVENT_ID)
            .await
            .expect("fence the event on main");
        self.main()
            .move_out(EVENT_ID, self.s1())
            .await
            .expect("move the event's rows to s1");
        self.main()
            .move_event(EVENT_ID, "s1")
            .await
            .expect("the directory names s1");
    }

    async fn drop_all(self) {
        for store in &self.stores {
            store.pool().close().await;
        }
        let admin = PgStore::connect(&format!("{}/postgres", base_url()))
            .await
            .expect("connect to the postgres database");
        for name in &self.names {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
            )))
            .execute(admin.pool())
            .await
            .expect("drop a test database");
        }
        admin.pool().close().await;
    }
}

/// Runs `test` over fresh shards, then drops their databases, also when `test` panics (its
/// panic goes on afterwards).
async fn with_shards<F, Fut>(test: F)
where
    F: FnOnce(Arc<Shards>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let shards = Arc::new(Shards::create().await);
    let ran = tokio::spawn(test(shards.clone())).await;
    let shards = Arc::into_inner(shards).expect("the test let go of its shards");
    shards.drop_all().await;
    if let Err(failed) = ran {
        std::panic::resume_unwind(failed.into_panic());
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
        waiting_room: WaitingRoomSettings::default(),
        sections: vec![Section {
            name: "A".into(),
            rows: 1,
            seats_per_row: 4,
            price_minor: 5_000,
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

fn hold_endpoint() -> String {
    boxoffice_store::engine::hold_endpoint(EVENT_ID)
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
        .hold_batch(event, &hold_endpoint(), &[request], &render_hold)
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
