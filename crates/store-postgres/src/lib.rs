//! The PostgreSQL backend of the boxoffice [`Store`]: the production store.
//!
//! Each trait method is one short transaction at READ COMMITTED. Writers lock rows in one
//! global order — seats by (event_id, seat_id), then tiers by tier_id, then holds — so that
//! concurrent batches, releases and sweeps cannot deadlock among themselves; a deadlock or
//! unique-key race that happens anyway (another process) is retried whole, up to
//! [`boxoffice_store::BATCH_ATTEMPTS_MAX`] times, and never reaches a client. Bulk writes use `UNNEST` so a
//! batch of any size costs a fixed number of round trips.

mod checkout;
mod directory;
mod engine;
mod exchange;
pub mod hosts;
pub mod moving;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::EventSpec;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::inventory::Inventory;
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{
    EventCounts, EventRecord, HoldView, ReadStore, RenderEvent, Store, StoreError, StoreResult,
    SweepReport, WorkerStore, event_record, hold_ended_payload, parse_held_seats,
    parse_hold_status, retrying, waiting_room_json,
};
use boxoffice_store_sql::db::{Conn, Db};
use boxoffice_store_sql::seatmap;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};

/// Connections in a pool opened by [`PgStore::connect`] (tools, tests).
pub const POOL_CONNECTIONS_MAX: u32 = 16;
/// Connections in the requests' pool of `boxoffice serve` (the writers and the workers have
/// their own). Under a crowd a read holds its connection far longer than its query takes
/// (the task waits its turn between round trips among thousands), so reads get more
/// connections than the database has cores: 16 were all taken in the on-sale while
/// PostgreSQL sat idle. With the two side pools a node opens at most 70 connections.
pub const SERVE_POOL_CONNECTIONS_MAX: u32 = 48;
/// Connections of the background workers' own pool (outbox relay, payment reconciler,
/// sweeper): however busy they get, they never take a connection a request is waiting for.
pub const WORKERS_POOL_CONNECTIONS_MAX: u32 = 16;
/// Connections of the event writers' own pool: two groups in flight per event writer, its
/// loads and catch-up reads; never behind a crowd of reads.
pub const WRITER_POOL_CONNECTIONS_MAX: u32 = 6;
/// How long a request waits for a pooled connection before the store counts as busy.
pub const POOL_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// A pooled connection idle this long is pinged before it is handed out (one busy is not).
pub const POOL_IDLE_PING_AFTER_MS: u64 = 10_000;
/// An event with at least this many seats refreshes the seat table's statistics.
const ANALYZE_SEATS_MIN: usize = 2_000;
/// Seats inserted per statement when creating an event.
const SEAT_INSERT_CHUNK: usize = 10_000;

/// The store's clock, truncated to milliseconds so both backends render the same times.
const NOW_SQL: &str = "SELECT date_trunc('milliseconds', boxoffice_now())";

/// A PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The same pool, for the statements written once in `boxoffice_store_sql`.
    db: Db,
    statistics: Arc<Statistics>,
}

/// Rows the event writers' groups change before the planner's statistics of their tables are
/// taken again ([`Statistics`]).
pub const ANALYZE_AFTER_ROWS: u64 = 2_000;
/// Least time between two of those analyses (each reads a sample of every sale table: at
/// thousands of rows a second, one per 2,000 rows was a tenth of a core).
pub const ANALYZE_INTERVAL_MIN: Duration = Duration::from_secs(5);

/// Keeps the planner's view of the sale's tables current. An on-sale grows the hold, order and
/// payment tables from nothing and fills the partial index of held seats within seconds,
/// while autovacuum analyses a table only after a tenth of it changed and a naptime passed:
/// planned on statistics that still said "no holds", every group statement walked all of the
/// event's held seats and live holds (2,000 rows for a group of 8, 5-15 ms a statement, seen
/// with auto_explain), so each group ran slower the more the sale sold. After every
/// [`ANALYZE_AFTER_ROWS`] rows the groups changed, and at most once per
/// [`ANALYZE_INTERVAL_MIN`], one `ANALYZE` of those tables runs in the background (never two
/// at once; it takes no lock that writes wait for).
#[derive(Debug, Default)]
struct Statistics {
    rows: std::sync::atomic::AtomicU64,
    /// When the last analysis started, and whether one is under way.
    last: std::sync::Mutex<(Option<std::time::Instant>, bool)>,
}

impl Statistics {
    fn wrote(self: &Arc<Self>, rows: u64, pool: &PgPool) {
        use std::sync::atomic::Ordering;
        if self.rows.fetch_add(rows, Ordering::AcqRel) + rows < ANALYZE_AFTER_ROWS {
            return;
        }
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            let (started, running) = &mut *last;
            if *running || started.is_some_and(|at| at.elapsed() < ANALYZE_INTERVAL_MIN) {
                return;
            }
            *last = (Some(std::time::Instant::now()), true);
        }
        self.rows.store(0, Ordering::Release);
        let (statistics, pool) = (self.clone(), pool.clone());
        tokio::spawn(async move {
            let analysed = sqlx::query("ANALYZE hold, seat, orders, payment_operation, tier")
                .execute(&pool)
                .await;
            if let Err(error) = analysed {
                tracing::warn!(%error, "analysing the sale's tables failed");
            }
            metrics::counter!("boxoffice_store_analyses_total").increment(1);
            statistics.last.lock().unwrap_or_else(|p| p.into_inner()).1 = false;
        });
    }
}

pub(crate) use boxoffice_store_sql::db::classify_pg as classify;

pub(crate) async fn store_now(tx: &mut Transaction<'_, Postgres>) -> StoreResult<OffsetDateTime> {
    sqlx::query_scalar::<_, OffsetDateTime>(NOW_SQL)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)
}

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// How long the server lets a session sit idle inside a transaction before ending it (ms).
pub const IDLE_IN_TRANSACTION_TIMEOUT_MS: &str = "3000";

/// The session settings of every connection.
///
/// Generic plans for every prepared statement: each statement here finds its rows by key,
/// and most take arrays (`= ANY($1)`), whose custom plans PostgreSQL keeps making (it
/// judges a generic plan by an array of unknown length): at 2,000 checkouts/s offered,
/// planning the reads of an order and of holds cost 3.0 s and 1.5 s of the database's
/// time against 0.4 s and 0.5 s of executing them (pg_stat_statements).
///
/// A transaction left open by a client that stopped (a node paused with SIGSTOP mid-group)
/// is ended by the server after IDLE_IN_TRANSACTION_TIMEOUT_MS, so its locks (the event
/// lease's shared lock among them) never keep a takeover waiting longer than that.
pub(crate) fn configure(options: PgConnectOptions) -> PgConnectOptions {
    options.options([
        ("plan_cache_mode", "force_generic_plan"),
        (
            "idle_in_transaction_session_timeout",
            IDLE_IN_TRANSACTION_TIMEOUT_MS,
        ),
    ])
}

/// The connect options `url` names and the pool every `PgStore` uses; with several hosts in
/// the URL, the hosts the pool follows ([`hosts`]).
fn pool_options(
    url: &str,
    max_connections: u32,
) -> StoreResult<(PgConnectOptions, PgPoolOptions, Option<Arc<hosts::Hosts>>)> {
    let hosts = hosts::Hosts::of(url)?;
    let options = match &hosts {
        Some(hosts) => hosts.current_options(),
        None => configure(
            url.parse()
                .map_err(|e: sqlx::Error| StoreError::Internal(format!("bad database url: {e}")))?,
        ),
    };
    let follow = hosts.clone();
    let primary_only = hosts.is_some();
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_millis(POOL_ACQUIRE_TIMEOUT_MS))
        // sqlx's default pings every connection it hands out: a round trip per store call,
        // and a caller whose acquire timeout strikes during that ping drops the connection
        // (the on-sale saw thousands of sessions abandoned this way, each reopened). A
        // connection is tested only after idling; a dead one fails its query, which is
        // answered 503 and retried, and sqlx opens a fresh one.
        .test_before_acquire(false)
        // With several hosts: never a session on a standby.
        .after_connect(move |connection, _meta| {
            Box::pin(async move {
                if primary_only && !hosts::writable(connection).await {
                    return Err(sqlx::Error::Io(std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        "this host is not the shard's primary (in recovery or not answering)",
                    )));
                }
                Ok(())
            })
        })
        .before_acquire(move |connection, meta| {
            let follow = follow.clone();
            Box::pin(async move {
                // A connection to the former primary is closed, never used.
                if follow.is_some_and(|hosts| hosts.stale(meta.age)) {
                    return Ok(false);
                }
                if meta.idle_for >= Duration::from_millis(POOL_IDLE_PING_AFTER_MS) {
                    sqlx::Connection::ping(connection).await?;
                }
                Ok(true)
            })
        });
    Ok((options, pool, hosts))
}

impl PgStore {
    /// Connects to `url` (`postgres://...`). Does not migrate.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        Self::connect_with(url, POOL_CONNECTIONS_MAX).await
    }

    /// [`PgStore::connect`] with a pool of `max_connections` (the workers' own small pool:
    /// [`WORKERS_POOL_CONNECTIONS_MAX`]).
    pub async fn connect_with(url: &str, max_connections: u32) -> StoreResult<Self> {
        let (options, pool, hosts) = pool_options(url, max_connections)?;
        let options = match &hosts {
            Some(hosts) => hosts.settle().await,
            None => options,
        };
        let pool = pool.connect_with(options).await.map_err(classify)?;
        if let Some(hosts) = hosts {
            hosts.register(&pool);
        }
        Ok(Self {
            db: Db::Postgres(pool.clone()),
            pool,
            statistics: Arc::default(),
        })
    }

    /// [`PgStore::connect_with`] without connecting yet: each connection opens on the first
    /// use that needs it, on the runtime of that use (the event writers' own thread).
    pub fn connect_lazy_with(url: &str, max_connections: u32) -> StoreResult<Self> {
        let (options, pool, hosts) = pool_options(url, max_connections)?;
        let pool = pool.connect_lazy_with(options);
        if let Some(hosts) = hosts {
            hosts.register(&pool);
        }
        Ok(Self {
            db: Db::Postgres(pool.clone()),
            pool,
            statistics: Arc::default(),
        })
    }

    /// Creates the database `url` names when it does not exist yet (a fresh machine, a test),
    /// with the "C" collation: every key here is an id compared byte for byte, and a
    /// language collation (e.g. `C.UTF-8` or `en_US.UTF-8`) made each index comparison a
    /// locale call (~10 % of the hold path's throughput, measured).
    pub async fn create_database_if_missing(url: &str) -> StoreResult<()> {
        use sqlx::migrate::MigrateDatabase;
        use sqlx::{Connection, Executor};
        // Several hosts: on the primary (the standbys follow it).
        let primary;
        let url = match hosts::Hosts::of(url)? {
            Some(hosts) => {
                let (index, connection) = hosts.find_primary().await.ok_or_else(|| {
                    StoreError::Unavailable("no host of the URL is a writable primary".into())
                })?;
                let _ = connection.close().await;
                primary = hosts::split(url).unwrap_or_default().swap_remove(index);
                primary.as_str()
            }
            None => url,
        };
        if Postgres::database_exists(url).await.map_err(classify)? {
            return Ok(());
        }
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("bad database url: {e}")))?;
        let name = options
            .get_database()
            .ok_or_else(|| StoreError::Internal("the database url names no database".into()))?
            .to_owned();
        let mut admin = sqlx::PgConnection::connect_with(&options.clone().database("postgres"))
            .await
            .map_err(classify)?;
        let create = format!(
            "CREATE DATABASE \"{}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
            name.replace('"', "\"\"")
        );
        // Two processes may race to create it; the loser's error is harmless.
        if let Err(error) = admin.execute(sqlx::AssertSqlSafe(create)).await
            && !Postgres::database_exists(url).await.map_err(classify)?
        {
            return Err(classify(error));
        }
        let _ = admin.close().await;
        Ok(())
    }

    /// The pool, for tests that plant rows directly.
    /// Moves the store's clock forward by `by`, for tests that need a deadline to pass
    /// without sleeping (migration 0010: the offset is kept in `store_clock`, and
    /// `boxoffice_now()` is redefined as `clock_timestamp()` plus it). Never used in
    /// production; the clock only moves forward.
    pub async fn advance_clock(&self, by: Duration) -> StoreResult<()> {
        let by_ms = i64::try_from(by.as_millis())
            .map_err(|_| StoreError::Internal("clock step too large".into()))?;
        let mut tx = self.pool.begin().await.map_err(classify)?;
        let offset_ms: i64 = sqlx::query_scalar(
            "UPDATE store_clock SET offset_ms = offset_ms + $1 WHERE id = 1 RETURNING offset_ms",
        )
        .bind(by_ms)
        .fetch_one(&mut *tx)
        .await
        .map_err(classify)?;
        let define = format!(
            "CREATE OR REPLACE FUNCTION boxoffice_now() RETURNS timestamptz LANGUAGE sql VOLATILE
             AS $$ SELECT clock_timestamp() + interval '{offset_ms} milliseconds' $$"
        );
        sqlx::query(sqlx::AssertSqlSafe(define))
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        boxoffice_store::clock::moved();
        Ok(())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn create_event_once(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let mut tx = self.pool.begin().await.map_err(classify)?;
        if let Some(answer) = prior_answer(&mut tx, scope, request_digest).await? {
            return Ok(answer);
        }
        let now = store_now(&mut tx).await?;
        let record = event_record(event_id, spec, now);
        sqlx::query(
            "INSERT INTO event (event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                                max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s, transfer_cutoff_s, waitlist_offer_ttl_s, waiting_room, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14)",
        )
        .bind(&record.event_id)
        .bind(&record.name)
        .bind(record.starts_at)
        .bind(record.on_sale_at)
        .bind(&record.currency)
        .bind(record.hold_ttl_s as i32)
        .bind(record.payment_grace_s as i32)
        .bind(record.max_seats_per_hold as i32)
        .bind(record.max_tickets_per_account as i32)
        .bind(record.exchange_cutoff_s as i32)
        .bind(record.transfer_cutoff_s as i32)
        .bind(record.waitlist_offer_ttl_s as i32)
        .bind(waiting_room_json(&record.waiting_room))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        for (position, section) in spec.sections.iter().enumerate() {
            sqlx::query(
                "INSERT INTO section (event_id, name, position, rows, seats_per_row, price_minor)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(event_id)
            .bind(&section.name)
            .bind(position as i32)
            .bind(section.rows as i32)
            .bind(section.seats_per_row as i32)
            .bind(section.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        for (position, tier) in spec.tiers.iter().enumerate() {
            sqlx::query(
                "INSERT INTO tier (event_id, tier_id, position, name, capacity, price_minor, available, held, sold)
                 VALUES ($1, $2, $3, $4, $5, $6, $5, 0, 0)",
            )
            .bind(event_id)
            .bind(&tier.tier_id)
            .bind(position as i32)
            .bind(&tier.name)
            .bind(i64::from(tier.capacity))
            .bind(tier.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        let seats: Vec<_> = spec.seats().collect();
        for chunk in seats.chunks(SEAT_INSERT_CHUNK) {
            let ids: Vec<String> = chunk.iter().map(|(s, _)| s.to_string()).collect();
            let sections: Vec<&str> = chunk.iter().map(|(s, _)| s.section.as_str()).collect();
            let rows: Vec<i32> = chunk.iter().map(|(s, _)| s.row as i32).collect();
            let numbers: Vec<i32> = chunk.iter().map(|(s, _)| s.number as i32).collect();
            let prices: Vec<i64> = chunk.iter().map(|(_, p)| *p).collect();
            sqlx::query(
                "INSERT INTO seat (event_id, seat_id, section, row_no, seat_no, price_minor, status)
                 SELECT $1, u.seat_id, u.section, u.row_no, u.seat_no, u.price_minor, 'AVAILABLE'
                   FROM UNNEST($2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[])
                        AS u(seat_id, section, row_no, seat_no, price_minor)",
            )
            .bind(event_id)
            .bind(&ids)
            .bind(&sections)
            .bind(&rows)
            .bind(&numbers)
            .bind(&prices)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        sqlx::query("INSERT INTO seatmap (event_id, version) VALUES ($1, 0)")
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let response = render(&record);
        insert_records(
            &mut tx,
            &scope.endpoint,
            &[boxoffice_store::NewRecord {
                account_id: scope.account_id.clone(),
                key: scope.key.clone(),
                request_digest: request_digest.to_owned(),
                response: response.clone(),
            }],
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Idempotent::Fresh(response))
    }

    async fn expire_once(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        let mut report = SweepReport::default();
        if hold_ids.is_empty() {
            return Ok(report);
        }
        let holds = fetch_holds(&self.pool, hold_ids).await?;
        let mut tx = self.pool.begin().await.map_err(classify)?;
        // Lock every seat and tier involved in the global order before any hold changes.
        let mut by_event: BTreeMap<&str, Vec<&HoldView>> = BTreeMap::new();
        for hold in &holds {
            by_event
                .entry(hold.event_id.as_str())
                .or_default()
                .push(hold);
        }
        for (event_id, event_holds) in &by_event {
            let ids: Vec<&str> = event_holds.iter().map(|h| h.hold_id.as_str()).collect();
            // By the partial index on hold_id (with `event_id = $1` too the planner walked
            // the event's primary key: 38 ms a sweep, holding up hold batches).
            sqlx::query("SELECT 1 FROM seat WHERE hold_id = ANY($1) ORDER BY seat_id FOR UPDATE")
                .bind(&ids)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
            let mut tier_ids: Vec<&str> = event_holds
                .iter()
                .filter_map(|h| h.tier_id.as_deref())
                .collect();
            tier_ids.sort_unstable();
            tier_ids.dedup();
            if !tier_ids.is_empty() {
                sqlx::query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = ANY($2) ORDER BY tier_id FOR UPDATE")
                    .bind(*event_id)
                    .bind(&tier_ids)
                    .execute(&mut *tx)
                    .await
                    .map_err(classify)?;
            }
        }
        let now = store_now(&mut tx).await?;
        let mut map = MapChanges::default();
        // Set-based: a handful of statements whatever the number of holds, so the seat locks
        // taken above are held for milliseconds (one statement per hold kept them for
        // seconds at a thousand expiries a second, and hold batches queued behind them).
        let ids: Vec<&str> = holds.iter().map(|h| h.hold_id.as_str()).collect();
        let expired: BTreeSet<String> = sqlx::query_scalar::<_, String>(
            "UPDATE hold SET status = 'EXPIRED', updated_at = $2
              WHERE hold_id = ANY($1) AND status IN ('HELD', 'PAYMENT_PENDING') AND expires_at <= $2
             RETURNING hold_id",
        )
        .bind(&ids)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .into_iter()
        .collect();
        let expired: Vec<&HoldView> = holds
            .iter()
            .filter(|h| expired.contains(&h.hold_id))
            .collect();
        if !expired.is_empty() {
            let events: Vec<&str> = expired.iter().map(|h| h.event_id.as_str()).collect();
            let ids: Vec<&str> = expired.iter().map(|h| h.hold_id.as_str()).collect();
            exchange::end_exchanges_of(&mut tx, &ids, ExchangeStatus::Expired, now).await?;
            // A hold that ran out of grace in checkout takes its order with it; an
            // authorization that arrives later is voided (see settle_payment).
            sqlx::query(
                "WITH cancelled AS (
                    UPDATE orders SET status = 'CANCELLED', cancel_reason = 'HOLD_EXPIRED', updated_at = $2
                     WHERE hold_id = ANY($1) AND status = 'PENDING_PAYMENT' RETURNING event_id, order_id)
                 INSERT INTO outbox (event_id, topic, payload, created_at)
                 SELECT event_id, 'order.cancelled',
                        jsonb_build_object('orderId', order_id, 'reason', 'HOLD_EXPIRED'), $2
                   FROM cancelled",
            )
            .bind(&ids)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            // The seats that still point to an expired hold come back (exactly once: the
            // status change above was conditional).
            // Hold ids are unique across events: the partial index on seat.hold_id serves
            // `= ANY` (a join with UNNEST was planned as a scan of every seat).
            let freed = sqlx::query_as::<_, (String, String)>(
                "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL,
                                 version = version + 1
                  WHERE hold_id = ANY($1) AND status = 'HELD'
                 RETURNING event_id, seat_id",
            )
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
            for (event_id, seat_id) in &freed {
                map.seat(event_id, seat_id, SeatStatus::Available, None);
            }
            report.seats_freed += freed.len() as u64;
            let mut units: BTreeMap<(&str, &str), i64> = BTreeMap::new();
            for hold in &expired {
                if let Some(tier_id) = &hold.tier_id {
                    *units
                        .entry((hold.event_id.as_str(), tier_id.as_str()))
                        .or_default() += i64::from(hold.quantity);
                    report.tier_units_returned += u64::from(hold.quantity);
                }
            }
            for ((event_id, tier_id), quantity) in units {
                let available = sqlx::query_scalar::<_, i64>(
                    "UPDATE tier SET held = held - $3, available = available + $3
                      WHERE event_id = $1 AND tier_id = $2 RETURNING available",
                )
                .bind(event_id)
                .bind(tier_id)
                .bind(quantity)
                .fetch_one(&mut *tx)
                .await
                .map_err(classify)?;
                map.tier(event_id, tier_id, available);
            }
            let payloads: Vec<String> = expired
                .iter()
                .map(|h| {
                    hold_ended_payload(&h.event_id, &h.hold_id, &h.account_id, HoldStatus::Expired)
                })
                .collect();
            sqlx::query(
                "INSERT INTO outbox (event_id, topic, payload, created_at)
                 SELECT e, 'hold.expired', p::jsonb, $3 FROM UNNEST($1::text[], $2::text[]) AS u(e, p)",
            )
            .bind(&events)
            .bind(&payloads)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            report.holds_expired += expired.len() as u64;
        }
        seatmap::record(&mut Conn::from(&mut tx), &map, now).await?;
        tx.commit().await.map_err(classify)?;
        Ok(report)
    }
}

/// The stored answer for `scope`, if any: a replay or a key reuse.
pub(crate) async fn prior_answer(
    tx: &mut Transaction<'_, Postgres>,
    scope: &IdempotencyScope,
    request_digest: &str,
) -> StoreResult<Option<Idempotent>> {
    boxoffice_store_sql::idempotency::prior_answer(&mut Conn::from(tx), scope, request_digest).await
}

pub(crate) async fn insert_records(
    tx: &mut Transaction<'_, Postgres>,
    endpoint: &str,
    records: &[boxoffice_store::NewRecord],
    now: OffsetDateTime,
) -> StoreResult<()> {
    boxoffice_store_sql::idempotency::insert(&mut Conn::from(tx), endpoint, records, now).await
}

pub(crate) async fn insert_records_each(
    tx: &mut Transaction<'_, Postgres>,
    records: &[(&str, &boxoffice_store::NewRecord)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    boxoffice_store_sql::idempotency::insert_each(&mut Conn::from(tx), records, now).await
}

/// Locks the seats (in seat order) and the tier of a hold, before its status changes.
pub(crate) async fn lock_hold_resources(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
) -> StoreResult<()> {
    // By the hold's own seat ids (primary key look-ups): filtered on `hold_id` alone, the
    // planner walked the event's whole primary key in seat order (7.8 ms a call on a 50,000
    // seat event, with the seats it had locked held meanwhile). A seat that no longer points
    // to the hold is not locked, as before.
    let seat_ids: Vec<&str> = hold.seats.iter().map(|s| s.seat_id.as_str()).collect();
    sqlx::query(
        "SELECT 1 FROM seat WHERE event_id = $1 AND seat_id = ANY($3) AND hold_id = $2
          ORDER BY seat_id FOR UPDATE",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(&seat_ids)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    if let Some(tier_id) = &hold.tier_id {
        sqlx::query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = $2 FOR UPDATE")
            .bind(&hold.event_id)
            .bind(tier_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?;
    }
    Ok(())
}

/// After a hold left `HELD` (in this transaction): frees the seats that still point to it and
/// returns its tier units, exactly once because the status change was conditional.
pub(crate) async fn free_hold_resources(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
    now: OffsetDateTime,
    ended_as: HoldStatus,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let freed = sqlx::query_scalar::<_, String>(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' RETURNING seat_id",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for seat_id in &freed {
        map.seat(&hold.event_id, seat_id, SeatStatus::Available, None);
    }
    let freed = freed.len() as u64;
    if let Some(tier_id) = &hold.tier_id {
        let available = sqlx::query_scalar::<_, i64>(
            "UPDATE tier SET held = held - $3, available = available + $3 WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&hold.event_id)
        .bind(tier_id)
        .bind(i64::from(hold.quantity))
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        map.tier(&hold.event_id, tier_id, available);
    }
    let topic = if ended_as == HoldStatus::Released {
        "hold.released"
    } else {
        "hold.expired"
    };
    let exchange_ends_as = if ended_as == HoldStatus::Released {
        ExchangeStatus::Failed
    } else {
        ExchangeStatus::Expired
    };
    exchange::end_exchanges_of(tx, &[hold.hold_id.as_str()], exchange_ends_as, now).await?;
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at) VALUES ($1, $2, $3::jsonb, $4)",
    )
    .bind(&hold.event_id)
    .bind(topic)
    .bind(hold_ended_payload(
        &hold.event_id,
        &hold.hold_id,
        &hold.account_id,
        ended_as,
    ))
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(freed)
}

pub(crate) const HOLD_COLUMNS: &str =
    "hold_id, event_id, account_id, status, expires_at, seats::text AS seats, tier_id, quantity,
                            total_minor, currency, created_at, updated_at";

pub(crate) fn hold_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<HoldView> {
    let status: String = row.get("status");
    let seats: String = row.get("seats");
    Ok(HoldView {
        hold_id: row.get("hold_id"),
        event_id: row.get("event_id"),
        account_id: row.get("account_id"),
        status: parse_hold_status(&status)?,
        expires_at: row.get("expires_at"),
        seats: parse_held_seats(&seats)?,
        tier_id: row.get("tier_id"),
        quantity: to_u32(row.get("quantity")),
        total_minor: row.get("total_minor"),
        currency: row.get("currency"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    })
}

pub(crate) async fn fetch_holds(pool: &PgPool, hold_ids: &[String]) -> StoreResult<Vec<HoldView>> {
    let sql = format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = ANY($1) ORDER BY event_id, hold_id"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hold_ids)
        .fetch_all(pool)
        .await
        .map_err(classify)?
        .iter()
        .map(hold_from_row)
        .collect()
}

boxoffice_store_sql::impl_shared_traits!(PgStore);

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        sqlx::query_scalar::<_, OffsetDateTime>(NOW_SQL)
            .fetch_one(&self.pool)
            .await
            .map_err(classify)
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let created =
            retrying(|| self.create_event_once(scope, request_digest, event_id, spec, render))
                .await?;
        if matches!(created, Idempotent::Fresh(_)) && spec.seats().count() >= ANALYZE_SEATS_MIN {
            // A large event changes the seat table's statistics at once: without a fresh
            // ANALYZE the planner took the new event for a few hundred rows and scanned all
            // of its seats for every group's seat lock (~50 ms instead of ~1 ms).
            if let Err(error) = sqlx::query("ANALYZE seat").execute(&self.pool).await {
                tracing::warn!(%error, "ANALYZE seat after a large event failed");
            }
        }
        Ok(created)
    }

    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool> {
        let updated = sqlx::query(
            "UPDATE idempotency SET status_code = $4, response_body = $5
              WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
        )
        .bind(&scope.account_id)
        .bind(&scope.endpoint)
        .bind(&scope.key)
        .bind(i32::from(response.status))
        .bind(&response.body)
        .execute(&self.pool)
        .await
        .map_err(classify)?
        .rows_affected();
        Ok(updated == 1)
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        self.check_in_ticket(ticket_id).await
    }

    async fn mark_exchange_out(
        &self,
        out: &boxoffice_store::exchange::ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), boxoffice_store::exchange::ExchangeRefused>> {
        self.mark_out(out, closes_at).await
    }

    async fn exchange_in_fate(
        &self,
        out: &boxoffice_store::exchange::ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<boxoffice_store::exchange::InFate>> {
        self.in_fate(out, abort_if_missing).await
    }

    async fn finish_exchange_out(
        &self,
        from_event_id: &str,
        exchange_id: &str,
        fate: &boxoffice_store::exchange::InFate,
    ) -> StoreResult<Option<ExchangeStatus>> {
        let _ = from_event_id;
        self.finish_out(exchange_id, fate).await
    }

    async fn open_exchanges_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::exchange::ExchangeOut>> {
        self.open_out(older_than_s, limit).await
    }
}

#[async_trait]
impl ReadStore for PgStore {
    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        boxoffice_store_sql::event::load(&self.db, event_id).await
    }

    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>> {
        boxoffice_store_sql::event::list(&self.db, after_event_id, limit).await
    }

    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
        boxoffice_store_sql::event::counts(&self.db, event, self.now().await?).await
    }

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
        boxoffice_store_sql::hold::get(&self.db, hold_id).await
    }

    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>> {
        let accounts: Vec<&str> = asked.iter().map(|(s, _)| s.account_id.as_str()).collect();
        let endpoints: Vec<&str> = asked.iter().map(|(s, _)| s.endpoint.as_str()).collect();
        let keys: Vec<&str> = asked.iter().map(|(s, _)| s.key.as_str()).collect();
        let rows = sqlx::query_as::<_, (i64, String, i32, Vec<u8>)>(
            "SELECT k.n, i.request_digest, i.status_code, i.response_body
               FROM UNNEST($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
                    AS k(account_id, endpoint, idem_key, n)
               JOIN idempotency i ON i.account_id = k.account_id AND i.endpoint = k.endpoint
                                 AND i.idem_key = k.idem_key",
        )
        .bind(&accounts)
        .bind(&endpoints)
        .bind(&keys)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let mut answers: Vec<Option<Idempotent>> = vec![None; asked.len()];
        for (n, digest, status, body) in rows {
            let Some(i) = usize::try_from(n).ok().and_then(|n| n.checked_sub(1)) else {
                continue;
            };
            let Some((_, asked_digest)) = asked.get(i) else {
                continue;
            };
            answers[i] = Some(boxoffice_store::stored_answer_of(
                &digest,
                asked_digest,
                i64::from(status),
                body,
            ));
        }
        Ok(answers)
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
        boxoffice_store_sql::event::ids(&self.db).await
    }

    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
        boxoffice_store_sql::inventory::load(&self.db, event_id).await
    }

    async fn get_order(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::OrderView>> {
        self.order_by_id(order_id).await
    }

    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::checkout::OrderView>> {
        self.orders_of(account_id, before_order_id, limit).await
    }

    async fn get_ticket(
        &self,
        ticket_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::TicketView>> {
        self.ticket_by_id(ticket_id).await
    }

    async fn order_head(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::OrderView>> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        checkout::load_order_head(&mut conn, order_id).await
    }

    async fn get_exchange(
        &self,
        exchange_id: &str,
    ) -> StoreResult<Option<boxoffice_store::exchange::ExchangeView>> {
        self.exchange_by_id(exchange_id).await
    }

    async fn seat_map(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<boxoffice_store::seatmap::MapSnapshot>> {
        seatmap::snapshot(&self.db, event_id).await
    }

    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::seatmap::StoredBatch>> {
        seatmap::changes_after(&self.db, event_id, after, limit).await
    }
}

#[async_trait]
impl WorkerStore for PgStore {
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        let due: Vec<String> = sqlx::query_scalar(
            "SELECT hold_id FROM hold
              WHERE (status = 'HELD' AND expires_at <= boxoffice_now() - make_interval(secs => $2 / 1000.0))
                 OR (status = 'PAYMENT_PENDING' AND expires_at <= boxoffice_now())
              ORDER BY expires_at LIMIT $1",
        )
        .bind(i64::from(limit))
        .bind(f64::from(held_grace_ms))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        self.expire_holds(&due).await
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        retrying(|| self.expire_once(hold_ids)).await
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        let deleted = sqlx::query(
            "DELETE FROM idempotency WHERE created_at < boxoffice_now() - make_interval(secs => $1)",
        )
        .bind(f64::from(older_than_s))
        .execute(&self.pool)
        .await
        .map_err(classify)?
        .rows_affected();
        Ok(deleted)
    }

    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &boxoffice_store::checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &boxoffice_store::checkout::RenderOrder)>,
    ) -> StoreResult<Option<boxoffice_store::checkout::Settled>> {
        retrying(|| self.settle_once(operation_id, verdict, webhook, answer)).await
    }

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::PaymentOperation>> {
        self.payment_operation_by_id(operation_id).await
    }

    async fn payment_operations(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<boxoffice_store::checkout::PaymentOperation>> {
        self.payment_operations_by_id(operation_ids).await
    }

    async fn capture_confirmed(&self, captures: &[(String, String)]) -> StoreResult<Vec<String>> {
        retrying(|| self.capture_confirmed_of(captures)).await
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::PaymentOperation>> {
        PgStore::payment_operation_by_ref(self, provider, provider_ref).await
    }

    async fn due_payment_operations(
        &self,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::checkout::PaymentOperation>> {
        self.due_operations(limit).await
    }

    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        self.postpone_operation(operation_id, delay_s, error).await
    }

    async fn issue_tickets(
        &self,
        order_id: &str,
        sign: &boxoffice_store::checkout::SignTicket,
    ) -> StoreResult<u32> {
        retrying(|| self.issue_tickets_once(order_id, sign)).await
    }

    async fn issue_tickets_of(
        &self,
        order_ids: &[String],
        sign: &boxoffice_store::checkout::SignTicket,
    ) -> StoreResult<u32> {
        retrying(|| self.issue_tickets_of_once(order_ids, sign)).await
    }

    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<boxoffice_store::checkout::OutboxMessage>> {
        boxoffice_store_sql::outbox::claim(&self.db, limit, lease_s).await
    }

    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
        boxoffice_store_sql::outbox::finish(&self.db, ids).await
    }

    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
        boxoffice_store_sql::outbox::retry(&self.db, id, delay_s, error).await
    }

    async fn outbox_lag_s(&self) -> StoreResult<f64> {
        boxoffice_store_sql::outbox::lag_s(&self.db).await
    }

    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
        seatmap::prune(&self.db, keep).await
    }
}
