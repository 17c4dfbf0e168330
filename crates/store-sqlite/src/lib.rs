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

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::EventSpec;
use boxoffice_domain::idempotency::Idempotent;
use boxoffice_store::exchange::{ExchangeOut, ExchangeRefused, ExchangeStatus, InFate};
use boxoffice_store::{StoreError, StoreResult};
use boxoffice_store_sql::db::Db;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// Connections in the reader pool. Writers have a pool of their own with one connection.
pub const READER_CONNECTIONS_MAX: u32 = 8;
/// How long a read waits for a pooled connection before the store counts as unavailable.
pub const POOL_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// How long a write waits for the single writer connection. Writers queue here as they would
/// on the file lock, so this matches [`BUSY_TIMEOUT_MS`].
pub const WRITER_ACQUIRE_TIMEOUT_MS: u64 = 10_000;
/// How long a connection waits for another process's lock on the file before SQLITE_BUSY.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;

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

pub(crate) use boxoffice_store_sql::db::classify_sqlite as classify;

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
    /// without sleeping (migration 0007: `boxoffice_store_sql::db::SQLITE_NOW` adds `store_clock.offset_ms`). Never used
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
}

boxoffice_store_sql::impl_store!(SqliteStore, "sqlite");

/// What only a backend knows (see `boxoffice_store_sql::impl_store`). One SQLite file
/// is one store: there are no shards, so no exchange crosses them (`same_shard` is always
/// true and the legs are never asked).
impl SqliteStore {
    async fn run_migrations(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations")
            .run(&self.writer)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    async fn event_created(&self, _spec: &EventSpec, _created: &Idempotent) {}

    fn group_committed(&self, _group: &boxoffice_store::engine::GroupWrite<'_>) {}

    async fn mark_out(
        &self,
        _: &ExchangeOut,
        _: OffsetDateTime,
    ) -> StoreResult<Result<(), ExchangeRefused>> {
        Err(no_shards())
    }

    async fn in_fate(&self, _: &ExchangeOut, _: bool) -> StoreResult<Option<InFate>> {
        Err(no_shards())
    }

    async fn finish_out(&self, _: &str, _: &InFate) -> StoreResult<Option<ExchangeStatus>> {
        Err(no_shards())
    }

    async fn open_out(&self, _: f64, _: u32) -> StoreResult<Vec<ExchangeOut>> {
        Ok(Vec::new())
    }
}

fn no_shards() -> StoreError {
    StoreError::Internal("the SQLite store has no shards to exchange across".into())
}
