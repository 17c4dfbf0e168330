//! Issue 38: how long `boxoffice shard move` stops writes — of the moved event and of another
//! event on its shard — by logical replication and by the locked copy (`--locked-copy`,
//! issue 17's way), in one session on one machine. A benchmark, not a test: it reports and
//! asserts nothing.
//!
//! One PostgreSQL server of its own (`tests/support`, `wal_level = logical`, `fsync = on`, no
//! standby), two databases as shards `main` and `s1`. The moved event has 50,000 seats in 10
//! sections and, written directly in SQL, 10,000 sold seats with their holds, orders,
//! payment operations and tickets and 4,800 seat-map change rows (~95,000 rows, as issue 17's
//! benchmark carried). Each run creates a small event on the moved event's shard and sells
//! it one seat at a time through a `Front` (one-shot holds, 5 ms apart) while the event
//! moves to the other shard; runs alternate the two ways and the direction.
//!
//! Reported per run: the moved event's write pause (logical: fence → directory; locked copy:
//! fence → directory, the whole move), the other event's longest hold latency during the
//! move against its median before it, and the move's phases; and, as a third way, the other
//! event's longest hold in a window of 4 s without a move (the noise of a shared machine).
//! Then the medians per way.
//!
//! cargo run -p boxoffice-store-postgres --example move_pause -- [runs per way, default 3]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::event::{EventSpec, Section, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_store::front::Front;
use boxoffice_store::shard::{DirectoryStore, PlacementRule, Places, ShardRecord};
use boxoffice_store::{EventRecord, OneShot as _, ReadStore as _, Store};
use boxoffice_store_postgres::PgStore;
use boxoffice_store_postgres::moving::{self, MoveObserver, MoveStep, ShardRef};

const MOVED: &str = "ev-big";
/// Seats of the event that sells during each move, one hold each.
const OTHER_SEATS: u32 = 2_000;
const SELL_PACE_MS: u64 = 5;
/// How long the other event sells before a move starts (its baseline latency).
const BEFORE_MOVE_MS: u64 = 1_500;
/// The ways compared, in turn: by logical replication, by the locked copy, and no move at all
/// for as long as a move by replication takes (the longest hold of a loaded machine).
const WAYS: [&str; 3] = ["logical", "locked", "none"];
const IDLE_WINDOW_MS: u64 = 4_000;

/// Silent observer.
struct Quiet;

#[async_trait::async_trait]
impl MoveObserver for Quiet {
    async fn step(&mut self, _step: &MoveStep) {}
}

fn spec(name: &str, sections: u32, rows: u32, seats_per_row: u32) -> EventSpec {
    EventSpec {
        name: name.into(),
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s: 3_600,
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
        sections: (0..sections)
            .map(|n| Section {
                name: format!("S{n}"),
                rows,
                seats_per_row,
                price_minor: 5_000,
                row_lengths: Vec::new(),
            })
            .collect(),
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

async fn create(front: &Front, event_id: &str, spec: &EventSpec) -> EventRecord {
    let scope = IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/admin/events".into(),
        key: format!("create-{event_id}"),
    };
    front
        .create_event(&scope, "digest", event_id, spec, &render_event)
        .await
        .expect("create an event");
    front
        .get_event(event_id)
        .await
        .expect("read the event")
        .expect("the event")
}

/// 10,000 sold seats with their holds, orders, payments and tickets, and 4,800 change rows.
const SOLD_ROWS: &[&str] = &[
    "WITH s AS (SELECT seat_id, row_number() OVER (ORDER BY seat_id) AS n FROM seat
                 WHERE event_id = $1 ORDER BY seat_id LIMIT 10000)
     UPDATE seat SET status = 'SOLD', hold_id = 'h-syn-' || s.n, order_id = 'o-syn-' || s.n,
                     version = version + 1
       FROM s WHERE seat.event_id = $1 AND seat.seat_id = s.seat_id",
    "INSERT INTO hold (event_id, hold_id, account_id, status, quantity, seats, total_minor, currency,
                       idempotency_key, created_at, expires_at, updated_at, order_id)
     SELECT $1, 'h-syn-' || n, 'acct-' || n, 'CONFIRMED', 1, '[]', 5000, 'EUR', 'k-' || n,
            now(), now(), now(), 'o-syn-' || n FROM generate_series(1, 10000) n",
    "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, quantity,
                         total_minor, currency, created_at, updated_at)
     SELECT $1, 'o-syn-' || n, 'h-syn-' || n, 'acct-' || n, 'CONFIRMED', '[]', 1, 5000, 'EUR',
            now(), now() FROM generate_series(1, 10000) n",
    "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method,
                                    status, amount_minor, currency, next_attempt_at, created_at,
                                    updated_at)
     SELECT $1, 'op-syn-' || n, 'o-syn-' || n, 'sim', 'card', 'CAPTURED', 5000, 'EUR', now(),
            now(), now() FROM generate_series(1, 10000) n",
    "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, unit, code, status, issued_at)
     SELECT $1, 't-syn-' || n, 'o-syn-' || n, 'acct-' || n, 1, 'code-' || n, 'VALID', now()
       FROM generate_series(1, 10000) n",
    "INSERT INTO seatmap_change (event_id, version, changes, created_at)
     SELECT $1, 1000000 + n, '[]', now() FROM generate_series(1, 4800) n",
];

/// Holds one seat after another of `event` until `stop`: (sent at, latency, granted).
async fn sell(
    front: Arc<Front>,
    event: EventRecord,
    stop: Arc<AtomicBool>,
) -> Vec<(Instant, Duration, bool)> {
    let mut answers = Vec::new();
    for n in 0..OTHER_SEATS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let seat = format!("S0-{}-{}", n / 100 + 1, n % 100 + 1);
        let shape = HoldShape::Seats {
            seat_ids: vec![seat],
        };
        let request = HoldRequest {
            account_id: format!("fan-{n}"),
            idempotency_key: format!("fan-{n}-k"),
            request_digest: format!("{shape:?}"),
            new_hold_id: format!("h-{}-{n}", event.event_id),
            shape,
            phase_id: None,
            ticket_types: Default::default(),
            accessible: false,
        };
        let sent = Instant::now();
        let answer = front
            .hold_batch(
                &event,
                &boxoffice_store::engine::hold_endpoint(&event.event_id),
                &[request],
                &render_hold,
            )
            .await;
        let granted = matches!(answer.as_deref(), Ok([Idempotent::Fresh(s)]) if s.status == 201);
        answers.push((sent, sent.elapsed(), granted));
        tokio::time::sleep(Duration::from_millis(SELL_PACE_MS)).await;
    }
    answers
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return f64::NAN;
    }
    values[values.len() / 2]
}

#[derive(Debug)]
struct Run {
    way: &'static str,
    moved_pause_ms: f64,
    other_max_ms: f64,
    other_before_median_ms: f64,
    other_refused: usize,
    total_ms: f64,
    phases: String,
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let server = support::TestServer::start(&format!(
        "{}fsync = on\nfull_page_writes = on\nshared_buffers = 256MB\n",
        support::LOGICAL
    ));
    let names = ["main", "s1"];
    let urls: Vec<String> = names.iter().map(|n| server.url(n)).collect();
    let mut stores = Vec::new();
    for url in &urls {
        PgStore::create_database_if_missing(url)
            .await
            .expect("create a database");
        let store = PgStore::connect(url).await.expect("connect");
        store.migrate().await.expect("migrate");
        stores.push(Arc::new(store));
    }
    let home = stores[0].clone();
    home.add_shard(&ShardRecord {
        name: "s1".into(),
        url: urls[1].clone(),
    })
    .await
    .expect("add s1");
    let front = || {
        let places = Arc::new(Places::new(
            names.iter().map(|n| (*n).to_owned()).collect(),
            home.clone(),
        ));
        Front::sharded(
            stores.iter().map(|s| s.clone() as Arc<dyn Store>).collect(),
            places,
        )
    };
    home.set_placement_rule(&PlacementRule::Pinned("main".into()))
        .await
        .expect("pin to main");
    create(&front(), MOVED, &spec("Big", 10, 50, 100)).await;
    for statement in SOLD_ROWS {
        sqlx::query(sqlx::AssertSqlSafe(*statement))
            .bind(MOVED)
            .execute(home.pool())
            .await
            .expect("write the sold rows");
    }
    sqlx::query("ANALYZE")
        .execute(home.pool())
        .await
        .expect("analyze");
    let rows: i64 = {
        let mut n = 0;
        for table in moving::EVENT_TABLES {
            let c: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table} WHERE event_id = $1"
            )))
            .bind(MOVED)
            .fetch_one(home.pool())
            .await
            .expect("count");
            n += c;
        }
        n
    };
    println!(
        "# {} cores, load {}, event {MOVED}: {rows} rows",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    let mut results: Vec<Run> = Vec::new();
    let mut at = 0usize; // the shard the moved event is on
    for run in 0..runs * WAYS.len() {
        let way = WAYS[run % WAYS.len()];
        let (from, to) = if way == "none" {
            (at, at)
        } else {
            (at, 1 - at)
        };
        home.set_placement_rule(&PlacementRule::Pinned(names[from].into()))
            .await
            .expect("pin to the source");
        let sellers_front = Arc::new(front());
        let other = create(
            &sellers_front,
            &format!("ev-other-{run}"),
            &spec("Other", 1, 20, 100),
        )
        .await;
        let stop = Arc::new(AtomicBool::new(false));
        let seller = tokio::spawn(sell(sellers_front.clone(), other, stop.clone()));
        tokio::time::sleep(Duration::from_millis(BEFORE_MOVE_MS)).await;

        let started = Instant::now();
        let (moved_pause_ms, phases) = if way == "logical" {
            let moved = moving::move_by_replication(
                &home,
                MOVED,
                ShardRef {
                    name: names[from],
                    url: &urls[from],
                    store: &stores[from],
                },
                ShardRef {
                    name: names[to],
                    url: &urls[to],
                    store: &stores[to],
                },
                &mut Quiet,
            )
            .await
            .expect("move by replication");
            (
                moved.fenced_ms as f64,
                format!(
                    "copy {} ms, catch-up {} ms, cut-over {} ms, delete {} ms",
                    moved.copy_ms, moved.catch_up_ms, moved.cut_over_ms, moved.delete_ms
                ),
            )
        } else if way == "none" {
            tokio::time::sleep(Duration::from_millis(IDLE_WINDOW_MS)).await;
            (0.0, "no move: the machine's own noise".to_owned())
        } else {
            stores[from].fence_for_move(MOVED).await.expect("fence");
            let moved = stores[from]
                .move_out(MOVED, &stores[to])
                .await
                .expect("locked copy");
            home.move_event(MOVED, names[to]).await.expect("directory");
            (
                started.elapsed().as_millis() as f64,
                format!("tables locked {} ms", moved.locked_ms),
            )
        };
        let ended = Instant::now();
        let total_ms = (ended - started).as_millis() as f64;
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let sold = seller.await.expect("the seller");
        let before: Vec<f64> = sold
            .iter()
            .filter(|(sent, _, _)| *sent < started)
            .map(|(_, latency, _)| latency.as_secs_f64() * 1e3)
            .collect();
        // A request overlaps the move if it was answered after the start and sent before
        // the end.
        let during: Vec<f64> = sold
            .iter()
            .filter(|(sent, latency, _)| *sent + *latency >= started && *sent <= ended)
            .map(|(_, latency, _)| latency.as_secs_f64() * 1e3)
            .collect();
        let result = Run {
            way,
            moved_pause_ms,
            other_max_ms: during.iter().copied().fold(0.0, f64::max),
            other_before_median_ms: median(before),
            other_refused: sold.iter().filter(|(_, _, granted)| !granted).count(),
            total_ms,
            phases,
        };
        println!(
            "run {} {way} {} -> {}: moved event's writes stopped {:.0} ms; other event: longest hold {:.0} ms during the move ({} holds, {} refused; median before {:.1} ms); move {:.0} ms ({})",
            run / WAYS.len() + 1,
            names[from],
            names[to],
            result.moved_pause_ms,
            result.other_max_ms,
            during.len(),
            result.other_refused,
            result.other_before_median_ms,
            result.total_ms,
            result.phases
        );
        results.push(result);
        at = to;
    }
    for way in WAYS {
        let of: Vec<&Run> = results.iter().filter(|r| r.way == way).collect();
        println!(
            "median {way} ({} runs): moved event's writes stopped {:.0} ms; other event's longest hold {:.0} ms (median hold before {:.1} ms); move {:.0} ms",
            of.len(),
            median(of.iter().map(|r| r.moved_pause_ms).collect()),
            median(of.iter().map(|r| r.other_max_ms).collect()),
            median(of.iter().map(|r| r.other_before_median_ms).collect()),
            median(of.iter().map(|r| r.total_ms).collect()),
        );
    }
    for store in &stores {
        store.pool().close().await;
    }
    drop(server);
}
