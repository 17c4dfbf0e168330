//! What the two dialects do differently, in one place: the pools and how a write begins, how
//! a value is bound and a column read, how an error is classified, and the few fragments of
//! SQL that differ (the store's clock, a time `ms` from it, an IN-list, a row lock).
//!
//! A statement is written once, with `$1`-style parameters (SQLite reads `$N` as the N-th
//! parameter too), and bound with values of [`Arg`]: a time binds as `timestamptz` on
//! PostgreSQL and as unix milliseconds on SQLite, a list as an array or as a JSON array read
//! with `json_each`, a JSON document as `jsonb` or as text. A row is read back the same way,
//! column by column, through [`Cell`].

use std::borrow::Cow;

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::mismatch;
use boxoffice_store::{StoreError, StoreResult};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use sqlx::{AssertSqlSafe, PgPool, Postgres, Row as _, Sqlite, SqlitePool, Transaction};

/// Which SQL the store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

/// The store's clock in unix milliseconds on SQLite. `unixepoch('subsec')` has millisecond
/// resolution; rounding (not truncating) undoes the binary floating point error of the
/// multiplication, so the result is the exact millisecond, as PostgreSQL's
/// `date_trunc('milliseconds', boxoffice_now())`. Plus `store_clock.offset_ms` (always 0
/// except in tests that move the store's clock forward).
pub const SQLITE_NOW: &str = "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) \
     + (SELECT offset_ms FROM store_clock WHERE id = 1))";

impl Dialect {
    /// The store's clock, as a value of the dialect's time columns. On PostgreSQL
    /// `boxoffice_now()` (migration 0010), which tests move forward.
    pub fn now(self) -> &'static str {
        match self {
            Self::Postgres => "boxoffice_now()",
            Self::Sqlite => SQLITE_NOW,
        }
    }

    /// The generation of the server a statement runs on: PostgreSQL's postmaster start time
    /// in microseconds (a promoted standby, or a primary restarted after a crash, has another
    /// one); 0 on SQLite (one file). An event lease is good only on the generation it was
    /// taken on (`lease.rs`, `group.rs`).
    pub fn server_generation(self) -> &'static str {
        match self {
            Self::Postgres => "(extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint",
            Self::Sqlite => "0",
        }
    }

    /// The store's clock to the millisecond, as both dialects read it back.
    pub fn now_ms(self) -> &'static str {
        match self {
            Self::Postgres => "date_trunc('milliseconds', boxoffice_now())",
            Self::Sqlite => SQLITE_NOW,
        }
    }

    /// The store's clock plus the milliseconds of the integer parameter `param` (`"$3"`).
    pub fn now_plus_ms(self, param: &str) -> String {
        match self {
            Self::Postgres => {
                format!("boxoffice_now() + make_interval(secs => {param}::bigint / 1000.0)")
            }
            Self::Sqlite => format!("{SQLITE_NOW} + {param}"),
        }
    }

    /// The store's clock plus the seconds of the float parameter `param`, to the millisecond.
    pub fn now_plus_secs(self, param: &str) -> String {
        match self {
            Self::Postgres => format!(
                "date_trunc('milliseconds', boxoffice_now()) + make_interval(secs => {param})"
            ),
            Self::Sqlite => format!("{SQLITE_NOW} + CAST({param} * 1000 AS INTEGER)"),
        }
    }

    /// A condition that leaves out the rows of the events a shard move is copying into this
    /// database (`event_moving_in`, PostgreSQL migration 0018), for the workers' queries of
    /// due work: `column` names a row's event. True on SQLite, which has no shards.
    pub fn not_moving_in(self, column: &str) -> String {
        match self {
            Self::Postgres => format!("{column} NOT IN (SELECT event_id FROM event_moving_in)"),
            Self::Sqlite => "1 = 1".to_owned(),
        }
    }

    /// A row lock (`clause`, e.g. `"FOR UPDATE OF o"`) where the dialect has them
    /// (PostgreSQL); SQLite's write transaction holds the whole file already.
    pub fn lock(self, clause: &'static str) -> &'static str {
        match self {
            Self::Postgres => clause,
            Self::Sqlite => "",
        }
    }

    /// A JSON document from its text (a [`Rows`] cell) as the dialect stores one: `jsonb` on
    /// PostgreSQL, the text itself on SQLite.
    pub fn json(self, text: &str) -> String {
        match self {
            Self::Postgres => format!("{text}::jsonb"),
            Self::Sqlite => text.to_owned(),
        }
    }

    /// Bytes from a [`Rows`] cell: as they are on PostgreSQL, unhexed on SQLite.
    pub fn bytes(self, cell: &str) -> String {
        match self {
            Self::Postgres => cell.to_owned(),
            Self::Sqlite => format!("unhex({cell})"),
        }
    }

    /// The time `time` plus the seconds of the float expression `secs`, to the millisecond.
    pub fn plus_secs(self, time: &str, secs: &str) -> String {
        match self {
            Self::Postgres => format!("{time} + make_interval(secs => {secs})"),
            Self::Sqlite => format!("{time} + CAST(round({secs} * 1000) AS INTEGER)"),
        }
    }

    /// Whether rows are locked one by one (PostgreSQL), rather than the whole store by the
    /// write transaction (SQLite): the statements that only lock are skipped where not.
    pub fn locks_rows(self) -> bool {
        self == Self::Postgres
    }

    /// The length of the JSON array in `column`.
    pub fn json_array_length(self, column: &str) -> String {
        match self {
            Self::Postgres => format!("jsonb_array_length({column})"),
            Self::Sqlite => format!("json_array_length({column})"),
        }
    }

    /// `IN` the list bound as `param` (an [`Arg::Texts`] or [`Arg::Ints`]): `= ANY($1)` on
    /// PostgreSQL, a `json_each` of the JSON array on SQLite.
    pub fn in_list(self, param: &str) -> String {
        match self {
            Self::Postgres => format!("= ANY({param})"),
            Self::Sqlite => format!("IN (SELECT value FROM json_each({param}))"),
        }
    }
}

/// The pools of a store. PostgreSQL: one pool for reads and writes, rows locked where a
/// statement says so. SQLite: one writer connection, every write transaction begun with
/// `BEGIN IMMEDIATE` (the file's write lock taken up front, so writers queue and never
/// deadlock upgrading a read lock), and a pool of readers that WAL lets run beside it.
#[derive(Debug, Clone)]
pub enum Db {
    Postgres(PgPool),
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
    },
}

impl Db {
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Sqlite { .. } => Dialect::Sqlite,
        }
    }

    /// A connection for statements outside a transaction (reads, and single statements that
    /// are their own transaction on PostgreSQL; on SQLite a write goes through [`Db::write`]).
    pub async fn read(&self) -> StoreResult<Pooled> {
        Ok(match self {
            Self::Postgres(pool) => Pooled::Postgres(pool.acquire().await.map_err(classify_pg)?),
            Self::Sqlite { reader, .. } => {
                Pooled::Sqlite(reader.acquire().await.map_err(classify_sqlite)?)
            }
        })
    }

    /// A connection for a write that is one statement (its own transaction): PostgreSQL's
    /// pool, SQLite's one writer.
    pub async fn write_one(&self) -> StoreResult<Pooled> {
        Ok(match self {
            Self::Postgres(pool) => Pooled::Postgres(pool.acquire().await.map_err(classify_pg)?),
            Self::Sqlite { writer, .. } => {
                Pooled::Sqlite(writer.acquire().await.map_err(classify_sqlite)?)
            }
        })
    }

    /// A write transaction.
    pub async fn write(&self) -> StoreResult<Tx> {
        Ok(match self {
            Self::Postgres(pool) => Tx::Postgres(pool.begin().await.map_err(classify_pg)?),
            Self::Sqlite { writer, .. } => Tx::Sqlite(
                writer
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(classify_sqlite)?,
            ),
        })
    }

    /// A read-only transaction that sees one snapshot for all its statements (PostgreSQL:
    /// REPEATABLE READ; SQLite: a read transaction in WAL mode is one by construction).
    pub async fn snapshot(&self) -> StoreResult<Tx> {
        Ok(match self {
            Self::Postgres(pool) => {
                let mut tx = pool.begin().await.map_err(classify_pg)?;
                // A read-only snapshot holds no lock a takeover waits for: the server's 3 s
                // limit on a session idle inside a transaction (`store-postgres`'s
                // `configure`) is for writers, and ended `boxoffice check`'s read of a
                // 50,000-seat event on a loaded machine between two statements.
                sqlx::raw_sql(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;
                     SET LOCAL idle_in_transaction_session_timeout = '60s'",
                )
                .execute(&mut *tx)
                .await
                .map_err(classify_pg)?;
                Tx::Postgres(tx)
            }
            Self::Sqlite { reader, .. } => {
                Tx::Sqlite(reader.begin().await.map_err(classify_sqlite)?)
            }
        })
    }
}

/// A pooled connection of either dialect.
#[derive(Debug)]
pub enum Pooled {
    Postgres(PoolConnection<Postgres>),
    Sqlite(PoolConnection<Sqlite>),
}

impl Pooled {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Self::Postgres(c) => Conn::Postgres(c),
            Self::Sqlite(c) => Conn::Sqlite(c),
        }
    }
}

/// A transaction of either dialect.
#[derive(Debug)]
pub enum Tx {
    Postgres(Transaction<'static, Postgres>),
    Sqlite(Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Self::Postgres(tx) => Conn::Postgres(tx),
            Self::Sqlite(tx) => Conn::Sqlite(tx),
        }
    }

    pub async fn commit(self) -> StoreResult<()> {
        match self {
            Self::Postgres(tx) => tx.commit().await.map_err(classify_pg),
            Self::Sqlite(tx) => tx.commit().await.map_err(classify_sqlite),
        }
    }
}

/// The connection a statement runs on: a transaction's or a pooled one.
#[derive(Debug)]
pub enum Conn<'c> {
    Postgres(&'c mut PgConnection),
    Sqlite(&'c mut SqliteConnection),
}

impl Conn<'_> {
    pub fn dialect(&self) -> Dialect {
        match self {
            Self::Postgres(_) => Dialect::Postgres,
            Self::Sqlite(_) => Dialect::Sqlite,
        }
    }
}

impl<'c> From<&'c mut Transaction<'_, Postgres>> for Conn<'c> {
    fn from(tx: &'c mut Transaction<'_, Postgres>) -> Self {
        Self::Postgres(tx)
    }
}

impl<'c> From<&'c mut Transaction<'_, Sqlite>> for Conn<'c> {
    fn from(tx: &'c mut Transaction<'_, Sqlite>) -> Self {
        Self::Sqlite(tx)
    }
}

/// A value bound to a statement.
#[derive(Debug, Clone)]
pub enum Arg {
    Text(String),
    OptText(Option<String>),
    Int(i64),
    OptInt(Option<i64>),
    Int4(i32),
    OptInt4(Option<i32>),
    Float(f64),
    Bool(bool),
    /// `timestamptz` on PostgreSQL, unix milliseconds on SQLite.
    Time(OffsetDateTime),
    OptTime(Option<OffsetDateTime>),
    /// `jsonb` on PostgreSQL, text on SQLite.
    Json(serde_json::Value),
    /// A `text[]` on PostgreSQL, a JSON array on SQLite (see [`Dialect::in_list`]).
    Texts(Vec<String>),
    /// A `bigint[]` on PostgreSQL, a JSON array on SQLite.
    Ints(Vec<i64>),
    /// A `timestamptz[]` on PostgreSQL, a JSON array of unix milliseconds on SQLite.
    Times(Vec<OffsetDateTime>),
    /// The typed arrays [`Rows`] binds on PostgreSQL (a JSON array on SQLite).
    OptTexts(Vec<Option<String>>),
    OptInts(Vec<Option<i64>>),
    Int4s(Vec<i32>),
    Bools(Vec<bool>),
    Floats(Vec<f64>),
    OptTimes(Vec<Option<OffsetDateTime>>),
    /// `bytea` on PostgreSQL, a BLOB on SQLite.
    Blob(Vec<u8>),
    /// A `bytea[]` on PostgreSQL (only [`Rows`] binds it).
    Bytes(Vec<Vec<u8>>),
}

macro_rules! arg_from {
    ($($t:ty => $v:ident $(via $f:expr)?),* $(,)?) => {$(
        impl From<$t> for Arg {
            fn from(value: $t) -> Self {
                Arg::$v($($f)?(value))
            }
        }
    )*};
}

arg_from! {
    String => Text,
    &str => Text via str::to_owned,
    &String => Text via String::clone,
    Option<String> => OptText,
    Option<&str> => OptText via |v: Option<&str>| v.map(str::to_owned),
    i64 => Int,
    Option<i64> => OptInt,
    i32 => Int4,
    Option<i32> => OptInt4,
    f64 => Float,
    bool => Bool,
    OffsetDateTime => Time,
    Option<OffsetDateTime> => OptTime,
    serde_json::Value => Json,
    Vec<String> => Texts,
    Vec<i64> => Ints,
    Vec<u8> => Blob,
}

impl From<Vec<&str>> for Arg {
    fn from(value: Vec<&str>) -> Self {
        Self::Texts(value.into_iter().map(str::to_owned).collect())
    }
}

impl From<u32> for Arg {
    fn from(value: u32) -> Self {
        Self::Int(i64::from(value))
    }
}

impl From<u64> for Arg {
    fn from(value: u64) -> Self {
        Self::Int(i64::try_from(value).unwrap_or(i64::MAX))
    }
}

/// Unix milliseconds to a time.
pub fn from_ms(ms: i64) -> StoreResult<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| StoreError::Internal(format!("time {ms} ms out of range: {e}")))
}

/// A time to unix milliseconds, truncated.
pub fn to_ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn json_array<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// A statement and its values, run on a [`Conn`] of either dialect.
#[derive(Debug)]
#[must_use = "a statement does nothing until it is run"]
pub struct Query {
    sql: Cow<'static, str>,
    args: Vec<Arg>,
}

/// A statement with `$N` parameters.
pub fn query(sql: impl Into<Cow<'static, str>>) -> Query {
    Query {
        sql: sql.into(),
        args: Vec::new(),
    }
}

type PgQuery = sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments>;
type SqliteQuery = sqlx::query::Query<'static, Sqlite, sqlx::sqlite::SqliteArguments>;

impl Query {
    /// Binds the next parameter.
    pub fn bind(mut self, value: impl Into<Arg>) -> Self {
        self.args.push(value.into());
        self
    }

    fn postgres(self) -> PgQuery {
        let mut q = sqlx::query(AssertSqlSafe(self.sql));
        for arg in self.args {
            q = match arg {
                Arg::Text(v) => q.bind(v),
                Arg::OptText(v) => q.bind(v),
                Arg::Int(v) => q.bind(v),
                Arg::OptInt(v) => q.bind(v),
                Arg::Int4(v) => q.bind(v),
                Arg::OptInt4(v) => q.bind(v),
                Arg::Float(v) => q.bind(v),
                Arg::Bool(v) => q.bind(v),
                Arg::Time(v) => q.bind(v),
                Arg::OptTime(v) => q.bind(v),
                Arg::Json(v) => q.bind(sqlx::types::Json(v)),
                Arg::Texts(v) => q.bind(v),
                Arg::Ints(v) => q.bind(v),
                Arg::Times(v) => q.bind(v),
                Arg::OptTexts(v) => q.bind(v),
                Arg::OptInts(v) => q.bind(v),
                Arg::Int4s(v) => q.bind(v),
                Arg::Bools(v) => q.bind(v),
                Arg::Floats(v) => q.bind(v),
                Arg::OptTimes(v) => q.bind(v),
                Arg::Bytes(v) => q.bind(v),
                Arg::Blob(v) => q.bind(v),
            };
        }
        q
    }

    fn sqlite(self) -> SqliteQuery {
        let mut q = sqlx::query(AssertSqlSafe(self.sql));
        for arg in self.args {
            q = match arg {
                Arg::Text(v) => q.bind(v),
                Arg::OptText(v) => q.bind(v),
                Arg::Int(v) => q.bind(v),
                Arg::OptInt(v) => q.bind(v),
                Arg::Int4(v) => q.bind(v),
                Arg::OptInt4(v) => q.bind(v),
                Arg::Float(v) => q.bind(v),
                Arg::Bool(v) => q.bind(v),
                Arg::Time(v) => q.bind(to_ms(v)),
                Arg::OptTime(v) => q.bind(v.map(to_ms)),
                Arg::Json(v) => q.bind(v.to_string()),
                Arg::Texts(v) => q.bind(json_array(&v)),
                Arg::Ints(v) => q.bind(json_array(&v)),
                Arg::Times(v) => q.bind(json_array(&v.into_iter().map(to_ms).collect::<Vec<_>>())),
                Arg::OptTexts(v) => q.bind(json_array(&v)),
                Arg::OptInts(v) => q.bind(json_array(&v)),
                Arg::Int4s(v) => q.bind(json_array(&v)),
                Arg::Bools(v) => q.bind(json_array(&v)),
                Arg::Floats(v) => q.bind(json_array(&v)),
                Arg::OptTimes(v) => {
                    let ms: Vec<Option<i64>> = v.into_iter().map(|t| t.map(to_ms)).collect();
                    q.bind(json_array(&ms))
                }
                Arg::Bytes(v) => q.bind(json_array(&v.iter().map(hex::encode).collect::<Vec<_>>())),
                Arg::Blob(v) => q.bind(v),
            };
        }
        q
    }

    /// Runs the statement; the rows it changed.
    pub async fn execute(self, conn: &mut Conn<'_>) -> StoreResult<u64> {
        Ok(match conn {
            Conn::Postgres(c) => self
                .postgres()
                .execute(&mut **c)
                .await
                .map_err(classify_pg)?
                .rows_affected(),
            Conn::Sqlite(c) => self
                .sqlite()
                .execute(&mut **c)
                .await
                .map_err(classify_sqlite)?
                .rows_affected(),
        })
    }

    /// Runs a counted write of a group: it must change exactly `expected` rows, or the whole
    /// group is refused as a conflict ([`mismatch`]: `what` names the rows it needed).
    pub async fn execute_exactly(
        self,
        conn: &mut Conn<'_>,
        expected: usize,
        what: &str,
    ) -> StoreResult<()> {
        let written = self.execute(conn).await?;
        if written != expected as u64 {
            return Err(mismatch(what, expected, written));
        }
        Ok(())
    }

    /// [`Query::execute_exactly`] for a statement that returns the rows it changed.
    pub async fn fetch_exactly(
        self,
        conn: &mut Conn<'_>,
        expected: usize,
        what: &str,
    ) -> StoreResult<Vec<Row>> {
        let rows = self.fetch_all(conn).await?;
        if rows.len() != expected {
            return Err(mismatch(what, expected, rows.len() as u64));
        }
        Ok(rows)
    }

    pub async fn fetch_all(self, conn: &mut Conn<'_>) -> StoreResult<Vec<Row>> {
        Ok(match conn {
            Conn::Postgres(c) => self
                .postgres()
                .fetch_all(&mut **c)
                .await
                .map_err(classify_pg)?
                .into_iter()
                .map(Row::Postgres)
                .collect(),
            Conn::Sqlite(c) => self
                .sqlite()
                .fetch_all(&mut **c)
                .await
                .map_err(classify_sqlite)?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
        })
    }

    pub async fn fetch_optional(self, conn: &mut Conn<'_>) -> StoreResult<Option<Row>> {
        Ok(match conn {
            Conn::Postgres(c) => self
                .postgres()
                .fetch_optional(&mut **c)
                .await
                .map_err(classify_pg)?
                .map(Row::Postgres),
            Conn::Sqlite(c) => self
                .sqlite()
                .fetch_optional(&mut **c)
                .await
                .map_err(classify_sqlite)?
                .map(Row::Sqlite),
        })
    }

    /// Exactly one row; none is an internal error (sqlx's `RowNotFound`).
    pub async fn fetch_one(self, conn: &mut Conn<'_>) -> StoreResult<Row> {
        Ok(match conn {
            Conn::Postgres(c) => Row::Postgres(
                self.postgres()
                    .fetch_one(&mut **c)
                    .await
                    .map_err(classify_pg)?,
            ),
            Conn::Sqlite(c) => Row::Sqlite(
                self.sqlite()
                    .fetch_one(&mut **c)
                    .await
                    .map_err(classify_sqlite)?,
            ),
        })
    }
}

/// A row of either dialect.
#[derive(Debug)]
pub enum Row {
    Postgres(PgRow),
    Sqlite(SqliteRow),
}

impl Row {
    /// The column at `index` (a position or a name).
    pub fn get<T: Cell, I: Index>(&self, index: I) -> StoreResult<T> {
        let read = match self {
            Self::Postgres(row) => T::postgres(row, index.clone()),
            Self::Sqlite(row) => T::sqlite(row, index.clone()),
        };
        read.map_err(|e| StoreError::Internal(format!("column {index:?}: {e}")))
    }
}

/// A column position or name, in either dialect's rows.
pub trait Index:
    sqlx::ColumnIndex<PgRow> + sqlx::ColumnIndex<SqliteRow> + Clone + std::fmt::Debug
{
}

impl Index for usize {}
impl Index for &str {}

/// A type a column of either dialect reads as.
pub trait Cell: Sized {
    fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self>;
    fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self>;
}

fn decode(e: sqlx::Error) -> StoreError {
    StoreError::Internal(e.to_string())
}

/// Types both drivers decode alike.
macro_rules! cell_alike {
    ($($t:ty),* $(,)?) => {$(
        impl Cell for $t {
            fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self> {
                row.try_get(index).map_err(decode)
            }
            fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self> {
                row.try_get(index).map_err(decode)
            }
        }
    )*};
}

cell_alike!(
    Vec<u8>,
    String,
    Option<String>,
    i64,
    Option<i64>,
    i32,
    Option<i32>,
    f64,
    bool,
);

impl Cell for OffsetDateTime {
    fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self> {
        row.try_get(index).map_err(decode)
    }
    fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self> {
        from_ms(row.try_get(index).map_err(decode)?)
    }
}

impl Cell for Option<OffsetDateTime> {
    fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self> {
        row.try_get(index).map_err(decode)
    }
    fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self> {
        row.try_get::<Option<i64>, _>(index)
            .map_err(decode)?
            .map(from_ms)
            .transpose()
    }
}

impl Cell for serde_json::Value {
    fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self> {
        Ok(row
            .try_get::<sqlx::types::Json<Self>, _>(index)
            .map_err(decode)?
            .0)
    }
    fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self> {
        let text: String = row.try_get(index).map_err(decode)?;
        serde_json::from_str(&text).map_err(|e| StoreError::Internal(e.to_string()))
    }
}

impl Cell for Vec<String> {
    fn postgres<I: Index>(row: &PgRow, index: I) -> StoreResult<Self> {
        row.try_get(index).map_err(decode)
    }
    fn sqlite<I: Index>(row: &SqliteRow, index: I) -> StoreResult<Self> {
        let text: String = row.try_get(index).map_err(decode)?;
        serde_json::from_str(&text).map_err(|e| StoreError::Internal(e.to_string()))
    }
}

/// A PostgreSQL error as the store's: what a retry of the whole batch may fix (a
/// serialization failure, a deadlock, a unique race), what means the database is away, what is
/// a bug.
pub fn classify_pg(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // 40001 serialization failure, 40P01 deadlock, 23505 unique violation (a
            // concurrent insert of the same key): transient, the batch is retried.
            if matches!(code.as_ref(), "40001" | "40P01" | "23505") {
                StoreError::Conflict(error.to_string())
            } else if code.starts_with("08")
                || code.starts_with("57")
                || code.starts_with("53")
                // 25P03: the server ended a session left idle inside a transaction (a node
                // paused mid-group); nothing of the transaction was written.
                || code == "25P03"
                // 25006: a server that takes no write now (a secondary, or a primary that
                // pg_auto_failover holds read-only while it promotes or demotes it): the
                // nodes' pools move to the writable host; the request is sent again.
                || code == "25006"
            {
                StoreError::Unavailable(error.to_string())
            } else {
                StoreError::Internal(error.to_string())
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => StoreError::Unavailable(error.to_string()),
        sqlx::Error::PoolTimedOut => StoreError::Busy(error.to_string()),
        _ => StoreError::Internal(error.to_string()),
    }
}

// SQLite primary result codes (the low byte of an extended code).
const SQLITE_IOERR: i64 = 10;
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;
const SQLITE_FULL: i64 = 13;
const SQLITE_CANTOPEN: i64 = 14;

/// A SQLite error as the store's (see [`classify_pg`]).
pub fn classify_sqlite(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) => {
            let code: i64 = db.code().and_then(|c| c.parse().ok()).unwrap_or_default();
            let primary = code & 0xff;
            // SQLITE_BUSY / SQLITE_LOCKED (another process held the file past busy_timeout,
            // or a stale WAL snapshot) and a unique violation (a concurrent insert of the
            // same key by another process): transient, the batch is retried.
            if primary == SQLITE_BUSY || primary == SQLITE_LOCKED || db.is_unique_violation() {
                StoreError::Conflict(error.to_string())
            } else if matches!(primary, SQLITE_IOERR | SQLITE_FULL | SQLITE_CANTOPEN) {
                StoreError::Unavailable(error.to_string())
            } else {
                StoreError::Internal(error.to_string())
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => StoreError::Unavailable(error.to_string()),
        sqlx::Error::PoolTimedOut => StoreError::Busy(error.to_string()),
        _ => StoreError::Internal(error.to_string()),
    }
}

/// Rows bound to one statement as a table, for the bulk writes of a group: on PostgreSQL
/// `UNNEST` of one typed array a column (one parameter each), on SQLite one JSON array of
/// rows read with `json_each` (one parameter; a row's cells read with `->>`, in one pass).
/// Built column by column; bound last, after the statement's other parameters.
#[derive(Debug, Default)]
#[must_use]
pub struct Rows {
    columns: Vec<(&'static str, Column)>,
}

/// One column of [`Rows`].
#[derive(Debug)]
enum Column {
    Texts(Vec<String>),
    OptTexts(Vec<Option<String>>),
    Ints(Vec<i64>),
    OptInts(Vec<Option<i64>>),
    Int4s(Vec<i32>),
    Bools(Vec<bool>),
    Floats(Vec<f64>),
    Times(Vec<OffsetDateTime>),
    OptTimes(Vec<Option<OffsetDateTime>>),
    /// `bytea` on PostgreSQL, hex text on SQLite (read back with [`Dialect::bytes`]).
    Bytes(Vec<Vec<u8>>),
}

impl Column {
    fn pg_type(&self) -> &'static str {
        match self {
            Self::Texts(_) | Self::OptTexts(_) => "text[]",
            Self::Ints(_) | Self::OptInts(_) => "bigint[]",
            Self::Int4s(_) => "int[]",
            Self::Bools(_) => "boolean[]",
            Self::Floats(_) => "float8[]",
            Self::Times(_) | Self::OptTimes(_) => "timestamptz[]",
            Self::Bytes(_) => "bytea[]",
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Texts(v) => v.len(),
            Self::OptTexts(v) => v.len(),
            Self::Ints(v) => v.len(),
            Self::OptInts(v) => v.len(),
            Self::Int4s(v) => v.len(),
            Self::Bools(v) => v.len(),
            Self::Floats(v) => v.len(),
            Self::Times(v) => v.len(),
            Self::OptTimes(v) => v.len(),
            Self::Bytes(v) => v.len(),
        }
    }

    fn json(&self, row: usize) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Self::Texts(v) => Value::from(v[row].as_str()),
            Self::OptTexts(v) => v[row].as_deref().map_or(Value::Null, Value::from),
            Self::Ints(v) => Value::from(v[row]),
            Self::OptInts(v) => v[row].map_or(Value::Null, Value::from),
            Self::Int4s(v) => Value::from(v[row]),
            Self::Bools(v) => Value::from(i64::from(v[row])),
            Self::Floats(v) => Value::from(v[row]),
            Self::Times(v) => Value::from(to_ms(v[row])),
            Self::OptTimes(v) => v[row].map_or(Value::Null, |t| Value::from(to_ms(t))),
            Self::Bytes(v) => Value::from(hex::encode(&v[row])),
        }
    }
}

impl Rows {
    pub fn new() -> Self {
        Self::default()
    }

    fn with(mut self, name: &'static str, column: Column) -> Self {
        self.columns.push((name, column));
        self
    }

    pub fn texts<S: Into<String>>(
        self,
        name: &'static str,
        v: impl IntoIterator<Item = S>,
    ) -> Self {
        self.with(name, Column::Texts(v.into_iter().map(Into::into).collect()))
    }

    pub fn opt_texts(
        self,
        name: &'static str,
        v: impl IntoIterator<Item = Option<String>>,
    ) -> Self {
        self.with(name, Column::OptTexts(v.into_iter().collect()))
    }

    pub fn ints(self, name: &'static str, v: impl IntoIterator<Item = i64>) -> Self {
        self.with(name, Column::Ints(v.into_iter().collect()))
    }

    pub fn opt_ints(self, name: &'static str, v: impl IntoIterator<Item = Option<i64>>) -> Self {
        self.with(name, Column::OptInts(v.into_iter().collect()))
    }

    pub fn int4s(self, name: &'static str, v: impl IntoIterator<Item = i32>) -> Self {
        self.with(name, Column::Int4s(v.into_iter().collect()))
    }

    pub fn bools(self, name: &'static str, v: impl IntoIterator<Item = bool>) -> Self {
        self.with(name, Column::Bools(v.into_iter().collect()))
    }

    pub fn floats(self, name: &'static str, v: impl IntoIterator<Item = f64>) -> Self {
        self.with(name, Column::Floats(v.into_iter().collect()))
    }

    pub fn times(self, name: &'static str, v: impl IntoIterator<Item = OffsetDateTime>) -> Self {
        self.with(name, Column::Times(v.into_iter().collect()))
    }

    pub fn opt_times(
        self,
        name: &'static str,
        v: impl IntoIterator<Item = Option<OffsetDateTime>>,
    ) -> Self {
        self.with(name, Column::OptTimes(v.into_iter().collect()))
    }

    pub fn bytes(self, name: &'static str, v: impl IntoIterator<Item = Vec<u8>>) -> Self {
        self.with(name, Column::Bytes(v.into_iter().collect()))
    }

    /// How many rows (every column has as many).
    pub fn len(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table expression `alias(columns...)`, its parameters numbered from `first`.
    pub fn table(&self, d: Dialect, first: usize, alias: &str) -> String {
        let names: Vec<&str> = self.columns.iter().map(|(name, _)| *name).collect();
        match d {
            Dialect::Postgres => {
                let arrays: Vec<String> = self
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, (_, column))| format!("${}::{}", first + i, column.pg_type()))
                    .collect();
                format!(
                    "UNNEST({}) AS {alias}({})",
                    arrays.join(", "),
                    names.join(", ")
                )
            }
            Dialect::Sqlite => {
                let cells: Vec<String> = names
                    .iter()
                    .enumerate()
                    .map(|(i, name)| format!("j.value->>{i} AS {name}"))
                    .collect();
                // `LIMIT -1` makes SQLite materialize the rows first: a statement that joins
                // them to a table keyed by (event, id) then walks the rows and looks each up
                // by its key, where a subquery it flattens let the planner walk every row of
                // the event and scan the JSON once per row.
                format!(
                    "(SELECT {} FROM json_each(${first}) AS j LIMIT -1) AS {alias}",
                    cells.join(", ")
                )
            }
        }
    }
}

impl Query {
    /// Binds `rows` (see [`Rows::table`]) after the parameters bound so far.
    pub fn bind_rows(mut self, d: Dialect, rows: Rows) -> Self {
        match d {
            Dialect::Postgres => {
                for (_, column) in rows.columns {
                    self.args.push(match column {
                        Column::Texts(v) => Arg::Texts(v),
                        Column::OptTexts(v) => Arg::OptTexts(v),
                        Column::Ints(v) => Arg::Ints(v),
                        Column::OptInts(v) => Arg::OptInts(v),
                        Column::Int4s(v) => Arg::Int4s(v),
                        Column::Bools(v) => Arg::Bools(v),
                        Column::Floats(v) => Arg::Floats(v),
                        Column::Times(v) => Arg::Times(v),
                        Column::OptTimes(v) => Arg::OptTimes(v),
                        Column::Bytes(v) => Arg::Bytes(v),
                    });
                }
            }
            Dialect::Sqlite => {
                let n = rows.len();
                let table: Vec<serde_json::Value> = (0..n)
                    .map(|row| {
                        serde_json::Value::Array(
                            rows.columns.iter().map(|(_, c)| c.json(row)).collect(),
                        )
                    })
                    .collect();
                self.args
                    .push(Arg::Text(serde_json::Value::Array(table).to_string()));
            }
        }
        self
    }
}
