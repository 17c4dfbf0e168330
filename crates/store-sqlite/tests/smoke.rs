//! Smoke test of the SQLite backend against a temporary database file.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::event::{EventSpec, Section, Tier, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_store::OneShot as _;
use boxoffice_store::{EventRecord, ReadStore, ReleaseOutcome, Store, WorkerStore};
use boxoffice_store_sqlite::SqliteStore;

fn temp_url() -> (String, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("boxoffice-smoke-{}.db", uuid::Uuid::now_v7()));
    (format!("sqlite://{}", path.display()), path)
}

fn remove(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn spec(hold_ttl_s: u32) -> EventSpec {
    EventSpec {
        name: "Smoke".into(),
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s,
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
            rows: 2,
            seats_per_row: 3,
            price_minor: 5_000,
            row_lengths: Vec::new(),
        }],
        tiers: vec![Tier {
            tier_id: "GA".into(),
            name: "General admission".into(),
            capacity: 10,
            price_minor: 2_000,
        }],
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

fn request(account: &str, key: &str, hold_id: &str, shape: HoldShape) -> HoldRequest {
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

async fn create(store: &SqliteStore, event_id: &str, hold_ttl_s: u32) -> EventRecord {
    let scope = IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/events".into(),
        key: format!("create-{event_id}"),
    };
    let created = store
        .create_event(&scope, "digest", event_id, &spec(hold_ttl_s), &render_event)
        .await
        .unwrap();
    assert!(matches!(created, Idempotent::Fresh(_)), "{created:?}");
    let replay = store
        .create_event(&scope, "digest", event_id, &spec(hold_ttl_s), &render_event)
        .await
        .unwrap();
    assert!(matches!(replay, Idempotent::Replayed(_)), "{replay:?}");
    store.get_event(event_id).await.unwrap().unwrap()
}

async fn assert_sound(store: &SqliteStore, event_id: &str) {
    let inventory = store.load_inventory(event_id).await.unwrap().unwrap();
    let violations = inventory.invariants();
    assert!(violations.is_empty(), "{violations:?}");
}

#[tokio::test]
async fn hold_release_and_expire() {
    let (url, path) = temp_url();
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    store.ping().await.unwrap();
    assert_eq!(store.backend(), "sqlite");

    let event = create(&store, "ev1", 600).await;
    assert_eq!(event.sections.len(), 1);
    assert_eq!(event.tiers.len(), 1);
    assert_eq!(
        store.list_event_ids().await.unwrap(),
        vec!["ev1".to_owned()]
    );
    let counts = store.event_counts(&event).await.unwrap();
    assert_eq!(counts.sections[0].1.available, 6);
    assert_eq!(counts.tiers[0].1.available, 10);

    let endpoint = "POST /v1/events/ev1/holds";
    let seat = HoldShape::Seats {
        seat_ids: vec!["A-1-1".into()],
    };
    let answers = store
        .hold_batch(
            &event,
            endpoint,
            &[
                request("alice", "k1", "h1", seat.clone()),
                request("bob", "k1", "h2", seat.clone()),
                request("alice", "k1", "h3", seat.clone()),
                request(
                    "carol",
                    "k1",
                    "h4",
                    HoldShape::Tier {
                        tier_id: "GA".into(),
                        quantity: 3,
                    },
                ),
            ],
            &render_hold,
        )
        .await
        .unwrap();
    assert!(
        matches!(&answers[0], Idempotent::Fresh(r) if r.status == 201),
        "{answers:?}"
    );
    assert!(
        matches!(&answers[1], Idempotent::Fresh(r) if r.status == 409),
        "{answers:?}"
    );
    assert!(
        matches!(&answers[2], Idempotent::Replayed(r) if r.status == 201),
        "{answers:?}"
    );
    assert!(
        matches!(&answers[3], Idempotent::Fresh(r) if r.status == 201),
        "{answers:?}"
    );
    assert_sound(&store, "ev1").await;

    // A later replay answers from the stored record; a reuse with another request is refused.
    let again = store
        .hold_batch(
            &event,
            endpoint,
            &[
                request("alice", "k1", "h5", seat.clone()),
                request(
                    "alice",
                    "k1",
                    "h6",
                    HoldShape::Seats {
                        seat_ids: vec!["A-1-2".into()],
                    },
                ),
            ],
            &render_hold,
        )
        .await
        .unwrap();
    assert_eq!(again[0], answers[0].clone().replayed());
    assert_eq!(again[1], Idempotent::KeyReusedWithOtherRequest);

    let counts = store.event_counts(&event).await.unwrap();
    assert_eq!(counts.sections[0].1.held, 1);
    assert_eq!(counts.tiers[0].1.held, 3);
    assert_eq!(counts.tiers[0].1.available, 7);

    let hold = store.get_hold("h1").await.unwrap().unwrap();
    assert_eq!(hold.seats.len(), 1);
    assert_eq!(hold.total_minor, 5_000);
    assert_eq!(
        store.release_hold("bob", "h1").await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert!(matches!(
        store.release_hold("alice", "h1").await.unwrap(),
        ReleaseOutcome::Released(_)
    ));
    assert!(matches!(
        store.release_hold("alice", "h1").await.unwrap(),
        ReleaseOutcome::AlreadyEnded(_)
    ));
    assert!(matches!(
        store.release_hold("carol", "h4").await.unwrap(),
        ReleaseOutcome::Released(_)
    ));
    assert_sound(&store, "ev1").await;
    let counts = store.event_counts(&event).await.unwrap();
    assert_eq!(counts.sections[0].1.available, 6);
    assert_eq!(counts.tiers[0].1.available, 10);

    // Nothing is due yet.
    assert_eq!(
        store.expire_due_holds(100, 0).await.unwrap().holds_expired,
        0
    );

    // Short holds expire: the sweeper frees them exactly once.
    let short = create(&store, "ev2", 1).await;
    let answers = store
        .hold_batch(
            &short,
            "POST /v1/events/ev2/holds",
            &[
                request("dave", "k", "h10", seat.clone()),
                request(
                    "erin",
                    "k",
                    "h11",
                    HoldShape::Tier {
                        tier_id: "GA".into(),
                        quantity: 2,
                    },
                ),
            ],
            &render_hold,
        )
        .await
        .unwrap();
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, Idempotent::Fresh(r) if r.status == 201)),
        "{answers:?}"
    );
    // Past the holds' deadline by the store's clock, moved forward.
    store
        .advance_clock(std::time::Duration::from_millis(1_100))
        .await
        .unwrap();
    let counts = store.event_counts(&short).await.unwrap();
    assert_eq!(
        counts.sections[0].1.available, 6,
        "an expired hold counts as available"
    );
    assert_eq!(counts.tiers[0].1.available, 10);
    assert_sound(&store, "ev2").await;
    let report = store.expire_due_holds(100, 0).await.unwrap();
    assert_eq!(report.holds_expired, 2);
    assert_eq!(report.seats_freed, 1);
    assert_eq!(report.tier_units_returned, 2);
    let report = store
        .expire_holds(&["h10".into(), "h11".into()])
        .await
        .unwrap();
    assert_eq!(report.holds_expired, 0);
    assert_sound(&store, "ev2").await;

    let topics: Vec<String> = sqlx::query_scalar("SELECT topic FROM outbox ORDER BY id")
        .fetch_all(store.pool())
        .await
        .unwrap();
    assert_eq!(
        topics,
        [
            "hold.created",
            "hold.created",
            "hold.released",
            "hold.released",
            "hold.created",
            "hold.created",
            "hold.expired",
            "hold.expired"
        ]
    );
    assert_eq!(store.purge_idempotency(3_600).await.unwrap(), 0);
    assert!(store.purge_idempotency(0).await.unwrap() >= 1);

    drop(store);
    remove(&path);
}

/// Two stores on one file stand for two processes: the file lock serializes them and each
/// seat goes to exactly one hold.
#[tokio::test]
async fn two_processes_share_one_file() {
    let (url, path) = temp_url();
    let first = SqliteStore::connect(&url).await.unwrap();
    first.migrate().await.unwrap();
    let second = SqliteStore::connect(&url).await.unwrap();
    second.migrate().await.unwrap();
    let event = create(&first, "ev", 600).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = if i % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        let event = event.clone();
        tasks.push(tokio::spawn(async move {
            let seat = format!("A-{}-{}", 1 + i % 2, 1 + i % 3);
            let req = request(
                &format!("acct{i}"),
                "k",
                &format!("h{i}"),
                HoldShape::Seats {
                    seat_ids: vec![seat],
                },
            );
            store
                .hold_batch(&event, "POST /v1/events/ev/holds", &[req], &render_hold)
                .await
                .unwrap()
        }));
    }
    let mut granted = 0;
    for task in tasks {
        if let [Idempotent::Fresh(r)] = task.await.unwrap().as_slice()
            && r.status == 201
        {
            granted += 1;
        }
    }
    assert_eq!(granted, 6);
    assert_sound(&second, "ev").await;
    drop((first, second));
    remove(&path);
}

/// The largest event the API allows is created in one transaction.
#[tokio::test]
async fn creates_a_large_event() {
    let (url, path) = temp_url();
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let mut large = spec(600);
    large.sections = (0..200)
        .map(|i| Section {
            name: format!("S{i}"),
            rows: 10,
            seats_per_row: 100,
            price_minor: 1_000,
            row_lengths: Vec::new(),
        })
        .collect();
    let scope = IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/events".into(),
        key: "large".into(),
    };
    let started = std::time::Instant::now();
    let created = store
        .create_event(&scope, "d", "big", &large, &render_event)
        .await
        .unwrap();
    eprintln!("created 200000 seats in {:?}", started.elapsed());
    assert!(matches!(created, Idempotent::Fresh(_)));
    let inventory = store.load_inventory("big").await.unwrap().unwrap();
    assert_eq!(inventory.seats.len(), 200_000);
    assert!(inventory.invariants().is_empty());
    drop(store);
    remove(&path);
}

trait Replayed {
    fn replayed(self) -> Idempotent;
}

impl Replayed for Idempotent {
    fn replayed(self) -> Idempotent {
        match self {
            Idempotent::Fresh(r) => Idempotent::Replayed(r),
            other => other,
        }
    }
}

/// The store's one wrapper over one database: a start or a look past the bound is refused
/// at once as busy, looks already at half of it; a call that finishes work passes whatever
/// the bound; every answer is the database's own.
#[tokio::test]
async fn the_front_bounds_starts_and_looks_and_passes_the_rest() {
    use boxoffice_store::StoreError;
    use boxoffice_store::front::Front;
    use boxoffice_store::gate::{CALLS_BUSY, Call};
    use std::sync::Arc;

    let (url, path) = temp_url();
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let event = create(&store, "ev1", 600).await;
    let front = Front::new(Arc::new(store)).bounded(2);
    assert_eq!(front.backend(), "sqlite");
    assert_eq!(
        front.get_event("ev1").await.unwrap().map(|e| e.event_id),
        Some(event.event_id.clone())
    );
    assert_eq!(front.list_event_ids().await.unwrap(), ["ev1"]);

    let bound = front.bound().expect("bounded");
    let taken = bound.enter(Call::Start).unwrap();
    match front.list_events(None, 10).await {
        Err(StoreError::Busy(why)) => assert!(why.contains(CALLS_BUSY), "{why}"),
        other => panic!("a look past half the bound must be busy, got {other:?}"),
    }
    let _second = bound.enter(Call::Start).unwrap();
    assert!(matches!(
        front.get_event("ev1").await,
        Err(StoreError::Busy(_))
    ));
    assert_eq!(front.payment_operation("op-none").await.unwrap(), None);
    assert!(front.now().await.is_ok(), "a pass call is never refused");
    assert_eq!(bound.in_flight(), 2, "a refused call holds no place");
    drop(taken);
    assert!(front.get_event("ev1").await.unwrap().is_some());
    remove(&path);
}
