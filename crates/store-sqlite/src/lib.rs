//! The SQLite backend of the boxoffice [`Store`]: one file, for development, tests and small
//! single-node deployments. It answers exactly as the PostgreSQL backend does (same
//! conditional updates, outbox topics and idempotency behaviour); only the mechanics differ.
//!
//! SQLite allows one writer at a time per database file. Every write transaction therefore
//! goes through a WRITER pool of exactly one connection and starts with `BEGIN IMMEDIATE`,
//! which takes the file's write lock up front: writers of this process queue on the pool,
//! writers of other processes wait on the lock (`busy_timeout`), and no transaction ever has
//! to upgrade a read lock into a write lock (the source of SQLITE_BUSY deadlocks). Holding the
//! write lock is what PostgreSQL's `SELECT ... FOR UPDATE` in seat order achieves there, so
//! there is no row locking here. Plain reads use a READER pool of several connections; in WAL
//! mode they never block the writer nor are blocked by it. A busy lock or unique-key race that
//! happens anyway (another process) is retried whole, up to [`boxoffice_store::BATCH_ATTEMPTS_MAX`] times.
//!
//! Times are INTEGER unix milliseconds. SQLite has no arrays: IN-lists bind one JSON array and
//! read it with `json_each`, and per-row writes reuse one cached prepared statement inside the
//! batch's single transaction.

use std::str::FromStr;
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
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};

/// Connections in the reader pool. Writers have a pool of their own with one connection.
pub const READER_CONNECTIONS_MAX: u32 = 8;
/// How long a read waits for a pooled connection before the store counts as unavailable.
pub const POOL_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// How long a write waits for the single writer connection. Writers queue here as they would
/// on the file lock, so this matches [`BUSY_TIMEOUT_MS`].
pub const WRITER_ACQUIRE_TIMEOUT_MS: u64 = 10_000;
/// How long a connection waits for another process's lock on the file before SQLITE_BUSY.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;
/// Seats inserted per statement when creating an event.
const SEAT_INSERT_CHUNK: usize = 10_000;

/// The store's clock in unix milliseconds, as an SQL expression. `unixepoch('subsec')` has
/// millisecond resolution; rounding (not truncating) undoes the binary floating point error
/// of the multiplication, so the result is the exact millisecond, as with the PostgreSQL
/// backend's `date_trunc('milliseconds', boxoffice_now())`. Plus `store_clock.offset_ms`
/// (migration 0007), always 0 except in tests that move the store's clock forward
/// ([`SqliteStore::advance_clock`]); SQLite reads that one-row table once per statement.
macro_rules! now_ms {
    () => {
        "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) \
          + (SELECT offset_ms FROM store_clock WHERE id = 1))"
    };
}

// Declared after `now_ms!` so the module sees the macro.
mod checkout;
mod engine;
mod exchange;

/// The store's clock, truncated to milliseconds so both backends render the same times.
const NOW_SQL: &str = concat!("SELECT ", now_ms!());

/// A SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The same pools, for the statements written once in `boxoffice_store_sql`.
    db: Db,
    /// One connection: every write transaction, begun with `BEGIN IMMEDIATE`.
    writer: SqlitePool,
    /// Several connections for plain reads.
    reader: SqlitePool,
}

pub(crate) use boxoffice_store_sql::db::{classify_sqlite as classify, from_ms, to_ms};

pub(crate) fn to_u32(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

pub(crate) fn column<'r, T>(row: &'r SqliteRow, name: &str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(name)
        .map_err(|e| StoreError::Internal(format!("column {name}: {e}")))
}

/// A JSON array of strings, for `IN (SELECT value FROM json_each(?))`.
pub(crate) fn json_list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    serde_json::to_string(&items).unwrap_or_else(|_| "[]".into())
}

pub(crate) async fn begin_write(pool: &SqlitePool) -> StoreResult<Transaction<'static, Sqlite>> {
    pool.begin_with("BEGIN IMMEDIATE").await.map_err(classify)
}

pub(crate) async fn store_now(tx: &mut Transaction<'_, Sqlite>) -> StoreResult<OffsetDateTime> {
    let ms: i64 = sqlx::query_scalar(NOW_SQL)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
    from_ms(ms)
}

impl SqliteStore {
    /// Opens `url` (`sqlite://path/to/file.db` or `sqlite:path`), creating the file if it is
    /// missing. Does not migrate.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Internal(format!("bad database url: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // Durable commits: a committed transaction survives a crash or power loss.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
            .foreign_keys(true);
        // The writer connects first: it creates the file and switches it to WAL.
        // Connections are not pinged on every hand-out (sqlx's default): the file cannot
        // go away under an open connection, and a caller whose acquire timed out during
        // the ping dropped the connection with it.
        let writer = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(1)
            .acquire_timeout(Duration::from_millis(WRITER_ACQUIRE_TIMEOUT_MS))
            .connect_with(options.clone())
            .await
            .map_err(classify)?;
        let reader = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(READER_CONNECTIONS_MAX)
            .acquire_timeout(Duration::from_millis(POOL_ACQUIRE_TIMEOUT_MS))
            .connect_with(options)
            .await
            .map_err(classify)?;
        Ok(Self {
            db: Db::Sqlite {
                writer: writer.clone(),
                reader: reader.clone(),
            },
            writer,
            reader,
        })
    }

    /// The writer pool, for tests that plant rows directly.
    /// Moves the store's clock forward by `by`, for tests that need a deadline to pass
    /// without sleeping (migration 0007: `now_ms!` adds `store_clock.offset_ms`). Never used
    /// in production; the clock only moves forward.
    pub async fn advance_clock(&self, by: Duration) -> StoreResult<()> {
        let by_ms = i64::try_from(by.as_millis())
            .map_err(|_| StoreError::Internal("clock step too large".into()))?;
        sqlx::query("UPDATE store_clock SET offset_ms = offset_ms + ? WHERE id = 1")
            .bind(by_ms)
            .execute(&self.writer)
            .await
            .map_err(classify)?;
        boxoffice_store::clock::moved();
        Ok(())
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// The reader pool.
    pub fn reader_pool(&self) -> &SqlitePool {
        &self.reader
    }

    async fn create_event_once(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let mut tx = begin_write(&self.writer).await?;
        if let Some(answer) = prior_answer(&mut tx, scope, request_digest).await? {
            return Ok(answer);
        }
        let now = store_now(&mut tx).await?;
        let record = event_record(event_id, spec, now);
        sqlx::query(
            "INSERT INTO event (event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                                max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s, transfer_cutoff_s, waitlist_offer_ttl_s, waiting_room, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .bind(&record.event_id)
        .bind(&record.name)
        .bind(to_ms(record.starts_at))
        .bind(to_ms(record.on_sale_at))
        .bind(&record.currency)
        .bind(i64::from(record.hold_ttl_s))
        .bind(i64::from(record.payment_grace_s))
        .bind(i64::from(record.max_seats_per_hold))
        .bind(i64::from(record.max_tickets_per_account))
        .bind(i64::from(record.exchange_cutoff_s))
        .bind(i64::from(record.transfer_cutoff_s))
        .bind(i64::from(record.waitlist_offer_ttl_s))
        .bind(waiting_room_json(&record.waiting_room))
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        for (position, section) in spec.sections.iter().enumerate() {
            sqlx::query(
                "INSERT INTO section (event_id, name, position, rows, seats_per_row, price_minor)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(event_id)
            .bind(&section.name)
            .bind(position as i64)
            .bind(i64::from(section.rows))
            .bind(i64::from(section.seats_per_row))
            .bind(section.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        for (position, tier) in spec.tiers.iter().enumerate() {
            sqlx::query(
                "INSERT INTO tier (event_id, tier_id, position, name, capacity, price_minor, available, held, sold)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?5, 0, 0)",
            )
            .bind(event_id)
            .bind(&tier.tier_id)
            .bind(position as i64)
            .bind(&tier.name)
            .bind(i64::from(tier.capacity))
            .bind(tier.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        // Seats in chunks, each one statement reading a JSON array of
        // [seat_id, section, row_no, seat_no, price_minor] rows (SQLite's UNNEST).
        // Inserted in key order, so the primary key's b-tree only ever appends.
        let mut seats: Vec<(String, _, i64)> = spec
            .seats()
            .map(|(seat, price)| (seat.to_string(), seat, price))
            .collect();
        seats.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for chunk in seats.chunks(SEAT_INSERT_CHUNK) {
            let rows: Vec<serde_json::Value> = chunk
                .iter()
                .map(|(id, seat, price)| {
                    serde_json::json!([id, seat.section, seat.row, seat.number, price])
                })
                .collect();
            let rows = serde_json::Value::Array(rows).to_string();
            sqlx::query(
                "INSERT INTO seat (event_id, seat_id, section, row_no, seat_no, price_minor, status)
                 SELECT ?1, u.value ->> 0, u.value ->> 1, u.value ->> 2, u.value ->> 3, u.value ->> 4, 'AVAILABLE'
                   FROM json_each(?2) AS u",
            )
            .bind(event_id)
            .bind(rows)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        sqlx::query("INSERT INTO seatmap (event_id, version) VALUES (?1, 0)")
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
        let holds = fetch_holds(&self.reader, hold_ids).await?;
        let mut tx = begin_write(&self.writer).await?;
        let now = store_now(&mut tx).await?;
        let mut map = MapChanges::default();
        for hold in &holds {
            let expired = sqlx::query(
                "UPDATE hold SET status = 'EXPIRED', updated_at = ?3
                  WHERE event_id = ?1 AND hold_id = ?2 AND status IN ('HELD', 'PAYMENT_PENDING')
                    AND expires_at <= ?3",
            )
            .bind(&hold.event_id)
            .bind(&hold.hold_id)
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if expired == 1 {
                // A hold that ran out of grace in checkout takes its order with it; an
                // authorization that arrives later is voided (see settle_payment). Two
                // statements: SQLite has no UPDATE ... RETURNING inside a WITH.
                let cancelled = sqlx::query_as::<_, (String, String)>(
                    "UPDATE orders SET status = 'CANCELLED', cancel_reason = 'HOLD_EXPIRED', updated_at = ?2
                      WHERE hold_id = ?1 AND status = 'PENDING_PAYMENT'
                     RETURNING event_id, order_id",
                )
                .bind(&hold.hold_id)
                .bind(to_ms(now))
                .fetch_all(&mut *tx)
                .await
                .map_err(classify)?;
                for (event_id, order_id) in &cancelled {
                    let payload =
                        serde_json::json!({"orderId": order_id, "reason": "HOLD_EXPIRED"});
                    insert_outbox(
                        &mut tx,
                        event_id,
                        boxoffice_store::checkout::topic::ORDER_CANCELLED,
                        &payload.to_string(),
                        now,
                    )
                    .await?;
                }
                let freed =
                    free_hold_resources(&mut tx, hold, now, HoldStatus::Expired, &mut map).await?;
                report.holds_expired += 1;
                report.seats_freed += freed;
                if hold.tier_id.is_some() {
                    report.tier_units_returned += u64::from(hold.quantity);
                }
            }
        }
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map,
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(report)
    }

    async fn purge_once(&self, older_than_s: u32) -> StoreResult<u64> {
        let mut tx = begin_write(&self.writer).await?;
        let now = store_now(&mut tx).await?;
        let deleted = sqlx::query("DELETE FROM idempotency WHERE created_at < ?1")
            .bind(to_ms(now) - i64::from(older_than_s) * 1_000)
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
        tx.commit().await.map_err(classify)?;
        Ok(deleted)
    }
}

/// The stored answer for `scope`, if any: a replay or a key reuse.
pub(crate) async fn prior_answer(
    tx: &mut Transaction<'_, Sqlite>,
    scope: &IdempotencyScope,
    request_digest: &str,
) -> StoreResult<Option<Idempotent>> {
    boxoffice_store_sql::idempotency::prior_answer(&mut Conn::from(tx), scope, request_digest).await
}

pub(crate) async fn insert_records(
    tx: &mut Transaction<'_, Sqlite>,
    endpoint: &str,
    records: &[boxoffice_store::NewRecord],
    now: OffsetDateTime,
) -> StoreResult<()> {
    boxoffice_store_sql::idempotency::insert(&mut Conn::from(tx), endpoint, records, now).await
}

pub(crate) async fn insert_outbox(
    tx: &mut Transaction<'_, Sqlite>,
    event_id: &str,
    topic: &str,
    payload: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .bind(event_id)
    .bind(topic)
    .bind(payload)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// After a hold left `HELD` (in this transaction): frees the seats that still point to it and
/// returns its tier units, exactly once because the status change was conditional.
pub(crate) async fn free_hold_resources(
    tx: &mut Transaction<'_, Sqlite>,
    hold: &HoldView,
    now: OffsetDateTime,
    ended_as: HoldStatus,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let freed = sqlx::query_scalar::<_, String>(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE event_id = ?1 AND hold_id = ?2 AND status = 'HELD' RETURNING seat_id",
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
            "UPDATE tier SET held = held - ?3, available = available + ?3 WHERE event_id = ?1 AND tier_id = ?2
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
    insert_outbox(
        tx,
        &hold.event_id,
        topic,
        &hold_ended_payload(&hold.event_id, &hold.hold_id, &hold.account_id, ended_as),
        now,
    )
    .await?;
    Ok(freed)
}

pub(crate) const HOLD_COLUMNS: &str =
    "hold_id, event_id, account_id, status, expires_at, seats, tier_id, quantity,
                            total_minor, currency, created_at, updated_at";

pub(crate) fn hold_from_row(row: &SqliteRow) -> StoreResult<HoldView> {
    let status: String = column(row, "status")?;
    let seats: String = column(row, "seats")?;
    Ok(HoldView {
        hold_id: column(row, "hold_id")?,
        event_id: column(row, "event_id")?,
        account_id: column(row, "account_id")?,
        status: parse_hold_status(&status)?,
        expires_at: from_ms(column(row, "expires_at")?)?,
        seats: parse_held_seats(&seats)?,
        tier_id: column(row, "tier_id")?,
        quantity: to_u32(column(row, "quantity")?),
        total_minor: column(row, "total_minor")?,
        currency: column(row, "currency")?,
        created_at: from_ms(column(row, "created_at")?)?,
        updated_at: from_ms(column(row, "updated_at")?)?,
    })
}

pub(crate) async fn fetch_holds(
    pool: &SqlitePool,
    hold_ids: &[String],
) -> StoreResult<Vec<HoldView>> {
    let sql = format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id IN (SELECT value FROM json_each(?1)) ORDER BY event_id, hold_id"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(json_list(hold_ids))
        .fetch_all(pool)
        .await
        .map_err(classify)?
        .iter()
        .map(hold_from_row)
        .collect()
}

boxoffice_store_sql::impl_shared_traits!(SqliteStore);

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations")
            .run(&self.writer)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        let ms: i64 = sqlx::query_scalar(NOW_SQL)
            .fetch_one(&self.reader)
            .await
            .map_err(classify)?;
        from_ms(ms)
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        retrying(|| self.create_event_once(scope, request_digest, event_id, spec, render)).await
    }

    async fn replace_answer(
        &self,
        scope: &IdempotencyScope,
        response: &StoredResponse,
    ) -> StoreResult<bool> {
        retrying(|| async {
            let mut tx = begin_write(&self.writer).await?;
            let updated = sqlx::query(
                "UPDATE idempotency SET status_code = ?4, response_body = ?5
                  WHERE account_id = ?1 AND endpoint = ?2 AND idem_key = ?3",
            )
            .bind(&scope.account_id)
            .bind(&scope.endpoint)
            .bind(&scope.key)
            .bind(i64::from(response.status))
            .bind(&response.body)
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
            tx.commit().await.map_err(classify)?;
            Ok(updated == 1)
        })
        .await
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        self.check_in_ticket(ticket_id).await
    }

    // One SQLite file is one store: there are no shards, so no exchange crosses them
    // (`same_shard` is always true and these are never asked).

    async fn mark_exchange_out(
        &self,
        _out: &boxoffice_store::exchange::ExchangeOut,
        _closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), boxoffice_store::exchange::ExchangeRefused>> {
        Err(no_shards())
    }

    async fn exchange_in_fate(
        &self,
        _out: &boxoffice_store::exchange::ExchangeOut,
        _abort_if_missing: bool,
    ) -> StoreResult<Option<boxoffice_store::exchange::InFate>> {
        Err(no_shards())
    }

    async fn finish_exchange_out(
        &self,
        _from_event_id: &str,
        _exchange_id: &str,
        _fate: &boxoffice_store::exchange::InFate,
    ) -> StoreResult<Option<boxoffice_store::exchange::ExchangeStatus>> {
        Err(no_shards())
    }

    async fn open_exchanges_out(
        &self,
        _older_than_s: f64,
        _limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::exchange::ExchangeOut>> {
        Ok(Vec::new())
    }
}

fn no_shards() -> StoreError {
    StoreError::Internal("the SQLite store has no shards to exchange across".into())
}

#[async_trait]
impl ReadStore for SqliteStore {
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
        let mut answers = Vec::with_capacity(asked.len());
        let mut reader = self.reader.acquire().await.map_err(classify)?;
        for (scope, request_digest) in asked {
            let row = sqlx::query_as::<_, (String, i64, Vec<u8>)>(
                "SELECT request_digest, status_code, response_body FROM idempotency
                  WHERE account_id = ?1 AND endpoint = ?2 AND idem_key = ?3",
            )
            .bind(&scope.account_id)
            .bind(&scope.endpoint)
            .bind(&scope.key)
            .fetch_optional(&mut *reader)
            .await
            .map_err(classify)?;
            answers.push(row.map(|(digest, status, body)| {
                boxoffice_store::stored_answer_of(&digest, request_digest, status, body)
            }));
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
impl WorkerStore for SqliteStore {
    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        let due: Vec<String> = sqlx::query_scalar(concat!(
            "SELECT hold_id FROM hold WHERE (status = 'HELD' AND expires_at <= ",
            now_ms!(),
            " - ?2) OR (status = 'PAYMENT_PENDING' AND expires_at <= ",
            now_ms!(),
            ") ORDER BY expires_at LIMIT ?1"
        ))
        .bind(i64::from(limit))
        .bind(i64::from(held_grace_ms))
        .fetch_all(&self.reader)
        .await
        .map_err(classify)?;
        self.expire_holds(&due).await
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        retrying(|| self.expire_once(hold_ids)).await
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        retrying(|| self.purge_once(older_than_s)).await
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

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::PaymentOperation>> {
        self.payment_operation_with_ref(provider, provider_ref)
            .await
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
        retrying(|| seatmap::prune(&self.db, keep)).await
    }
}
