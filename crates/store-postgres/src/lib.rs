//! The PostgreSQL backend of the boxoffice [`Store`]: the production store.
//!
//! Each trait method is one short transaction at READ COMMITTED. Writers lock rows in one
//! global order — seats by (event_id, seat_id), then tiers by tier_id, then holds — so that
//! concurrent batches, releases and sweeps cannot deadlock among themselves; a deadlock or
//! unique-key race that happens anyway (another process) is retried whole, up to
//! [`boxoffice_store::BATCH_ATTEMPTS_MAX`] times, and never reaches a client. Bulk writes use `UNNEST` so a
//! batch of any size costs a fixed number of round trips.

mod directory;
mod engine;
mod exchange;
pub mod hosts;
pub mod moving;

use std::sync::Arc;
use std::time::Duration;

use boxoffice_domain::event::EventSpec;
use boxoffice_domain::idempotency::Idempotent;
use boxoffice_store::{StoreError, StoreResult};
use boxoffice_store_sql::db::Db;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};

/// Connections in a pool opened by [`PgStore::connect`] (tools, tests).
pub const POOL_CONNECTIONS_MAX: u32 = 16;
/// Connections in the requests' pool of `boxoffice serve` (the writers and the workers have
/// their own). Under a crowd a read holds its connection far longer than its query takes
/// (the task waits its turn between round trips among thousands), so reads get more
/// connections than the database has cores: 16 were all taken in the on-sale while
/// PostgreSQL sat idle. With the three side pools a node opens at most 72 connections.
pub const SERVE_POOL_CONNECTIONS_MAX: u32 = 48;
/// Connections of the background workers' own pool (outbox relay, payment reconciler,
/// sweeper): however busy they get, they never take a connection a request is waiting for.
pub const WORKERS_POOL_CONNECTIONS_MAX: u32 = 16;
/// Connections of the event writers' own pool: two groups in flight per event writer, its
/// loads and catch-up reads; never behind a crowd of reads.
pub const WRITER_POOL_CONNECTIONS_MAX: u32 = 6;
/// Connections of a node's lease pool: its lease renewals (one statement for every lease
/// it holds, every third of the TTL), its registration and its hand-backs. A crowd that
/// holds every connection of the requests' pool must not make a node miss a renewal and
/// lose an event mid-sale.
pub const LEASE_POOL_CONNECTIONS_MAX: u32 = 2;
/// How long a request waits for a pooled connection before the store counts as busy.
pub const POOL_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// A pooled connection idle this long is pinged before it is handed out (one busy is not).
pub const POOL_IDLE_PING_AFTER_MS: u64 = 10_000;
/// An event with at least this many seats refreshes the seat table's statistics.
const ANALYZE_SEATS_MIN: usize = 2_000;
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

/// How long the server lets a session sit idle inside a transaction before ending it (ms).
pub const IDLE_IN_TRANSACTION_TIMEOUT_MS: &str = "3000";

/// The longest a statement may run on any connection of the service before the server
/// cancels it (ms). The longest the service sends (a report over a 50,000-seat event, a
/// cancellation's step) take well under a second; a statement stuck behind a lock that a
/// vanished client holds, or on a server that is being demoted, fails instead of holding a
/// request and its connection for ever. It never cuts a COMMIT short: PostgreSQL disarms it
/// before the commit (a commit waiting for a synchronous standby that is gone waits until
/// pg_auto_failover demotes the server, which ends the session; `docs/DEPLOY.md`).
/// Migrations run without it.
pub const STATEMENT_TIMEOUT_MS: &str = "30000";

/// How long opening a store whose URL names several hosts waits for one of them to be a
/// writable primary (a node started during its shard's failover) before it gives up.
pub const PRIMARY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

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
/// No statement runs longer than [`STATEMENT_TIMEOUT_MS`].
pub(crate) fn configure(options: PgConnectOptions) -> PgConnectOptions {
    options.options([
        ("plan_cache_mode", "force_generic_plan"),
        ("statement_timeout", STATEMENT_TIMEOUT_MS),
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
        // Several hosts: on the primary (the standbys follow it). A node that starts while
        // its shard fails over waits for the promotion (at most PRIMARY_WAIT).
        let primary;
        let url = match hosts::Hosts::of(url)? {
            Some(hosts) => {
                let deadline = std::time::Instant::now() + PRIMARY_WAIT;
                let (index, connection) = loop {
                    if let Some(found) = hosts.find_primary().await {
                        break found;
                    }
                    if std::time::Instant::now() >= deadline {
                        return Err(StoreError::Unavailable(format!(
                            "no host of the URL was a writable primary for {} s",
                            PRIMARY_WAIT.as_secs()
                        )));
                    }
                    tracing::warn!(
                        "no host of the URL is a writable primary yet (a failover?): waiting"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                };
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
}

boxoffice_store_sql::impl_store!(PgStore, "postgres");

impl PgStore {
    async fn run_migrations(&self) -> StoreResult<()> {
        // A migration may rewrite a large table: no statement timeout for it.
        let mut connection = self.pool.acquire().await.map_err(classify)?;
        sqlx::query("SET statement_timeout = 0")
            .execute(&mut *connection)
            .await
            .map_err(classify)?;
        let migrated = sqlx::migrate!("./migrations")
            .run_direct(None, &mut *connection, false)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")));
        // The connection goes back to the pool with the service's timeout.
        let _ = sqlx::query("RESET statement_timeout")
            .execute(&mut *connection)
            .await;
        migrated
    }

    /// A large event changes the seat table's statistics at once: without a fresh `ANALYZE`
    /// the planner took the new event for a few hundred rows and scanned all of its seats for
    /// every group's seat lock (~50 ms instead of ~1 ms).
    async fn event_created(&self, spec: &EventSpec, created: &Idempotent) {
        if matches!(created, Idempotent::Fresh(_))
            && spec.seats().count() >= ANALYZE_SEATS_MIN
            && let Err(error) = sqlx::query("ANALYZE seat").execute(&self.pool).await
        {
            tracing::warn!(%error, "ANALYZE seat after a large event failed");
        }
    }
}
