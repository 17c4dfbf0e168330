//! Moving an event to another shard (issues 17 and 38; `boxoffice shard move`). Two ways:
//!
//! **By logical replication** (the default; [`move_by_replication`] in `replication.rs`,
//! which documents each step): a publication on the source with a row filter on the event,
//! a subscription on the target that copies the event's rows and then streams their changes
//! while the event keeps selling; then a cut-over that stops only this event's writes: its
//! lease fenced, its seat-map row locked (every group and one-shot write of the event
//! updates that row last, so none commits past it), the target caught up to the source's WAL
//! position, the directory flipped, and the event's rows deleted on the source in small
//! batches. The other events of the source shard sell throughout. Needs `wal_level =
//! logical` on the source (refused with a clear error otherwise).
//!
//! **By a locked copy** (`boxoffice shard move --locked-copy`, the way of issue 17, kept as
//! the fallback for a source without `wal_level = logical` and as the benchmark's baseline):
//!
//! 1. [`PgStore::fence_for_move`] on the source: the event's lease goes to `shard-move`
//!    (epoch + 1, for a day) and is committed, so that no writer commits for the event there
//!    any more (every group checks its fence). It locks the lease row `FOR UPDATE` first, as
//!    a takeover does, so it waits for the owner's groups in flight: each holds the row
//!    `FOR KEY SHARE` until it commits (`boxoffice_store_sql::group`), and the upsert alone
//!    takes NO KEY UPDATE, which does not conflict with KEY SHARE.
//! 2. [`PgStore::move_out`] on the source: one transaction that locks the event's tables
//!    against writes (reads go on; every other event of the shard waits for the copy, ~3 s
//!    per 100,000 rows), reads the event's rows, lets [`PgStore::move_in`] write them on the
//!    target (replacing a copy an earlier run left there), then deletes them here and commits.
//! 3. The directory names the target; nodes read it again within [`PLACE_TTL`] and follow.
//!
//! Each step of either way is safe to stop after and to run again: stopped after 2 the event
//! is only on the target and the directory still names the source: requests for it fail
//! until the move is run again (it then only updates the directory). Stopped inside 2 the
//! source keeps everything and the target's copy is replaced next time.
//!
//! Both carry the same rows: every row of [`EVENT_TABLES`] with the event's id, the
//! idempotency records about the event included; the exchanges that are the event's
//! ([`EVENT_EXCHANGES`], re-legged as their two sides now live on one shard or two) and its
//! outbox messages not delivered yet (given new ids on the target) are copied as JSON.
//!
//! [`PLACE_TTL`]: boxoffice_store::shard::PLACE_TTL

mod replication;

use boxoffice_store::{StoreError, StoreResult};
use sqlx::Row;

pub use replication::{
    MOVE_CATCH_UP_TIMEOUT_S, MOVE_COPY_TIMEOUT_S, MOVE_DELETE_BATCH_ROWS, MoveObserver, MoveStep,
    Moved, PrintSteps, ShardRef, clean_after_move, move_by_replication,
};

use crate::{PgStore, classify};

/// The tables an event's rows are in, in the order they are written (parents first): every
/// row with the event's id, the idempotency records included (their key is (account,
/// endpoint, key); their `event_id` column names the event a record is about). `exchange`
/// and `outbox` are handled on their own.
pub const EVENT_TABLES: &[&str] = &[
    "event",
    "event_chart",
    "section",
    "tier",
    "seat",
    "hold",
    "hold_holder",
    "hold_line",
    "hold_promo",
    "promo_code",
    "orders",
    "payment_operation",
    "ticket",
    "transfer",
    "refund",
    "event_cancellation",
    "waitlist",
    "allocation",
    "allocation_comp",
    "box_office_sale",
    "access_code",
    "access_redemption",
    "seatmap",
    "seatmap_change",
    "idempotency",
    "event_lease",
];

/// An event's rows as one shard holds them, as JSON (one array per table).
#[derive(Debug, Clone, Default)]
pub struct EventRows {
    pub tables: Vec<(&'static str, serde_json::Value)>,
    /// The exchange rows that are the event's (see [`EVENT_EXCHANGES`]).
    pub exchanges: serde_json::Value,
    /// Outbox messages not delivered yet.
    pub outbox: serde_json::Value,
}

impl EventRows {
    /// `(table, rows)` for a report.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let n = |v: &serde_json::Value| v.as_array().map_or(0, Vec::len);
        let mut counts: Vec<(&'static str, usize)> =
            self.tables.iter().map(|(t, rows)| (*t, n(rows))).collect();
        counts.push(("exchange", n(&self.exchanges)));
        counts.push(("outbox", n(&self.outbox)));
        counts
    }
}

/// The exchange rows that belong with event `$1`: its own side of an exchange across
/// shards, and the rows of exchanges that have both sides here and touch it.
pub const EVENT_EXCHANGES: &str = "(leg = 'OUT' AND from_event_id = $1)
     OR (leg IN ('IN', 'ABORT') AND to_event_id = $1)
     OR (leg = 'BOTH' AND (from_event_id = $1 OR to_event_id = $1))";

/// What [`PgStore::move_out`] did.
#[derive(Debug, Clone)]
pub struct MovedOut {
    pub rows: Vec<(&'static str, usize)>,
    /// How long the source's tables were locked against writes.
    pub locked_ms: u128,
}

impl PgStore {
    /// Whether this shard has the event's row.
    pub async fn has_event(&self, event_id: &str) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM event WHERE event_id = $1)")
            .bind(event_id)
            .fetch_one(self.pool())
            .await
            .map_err(classify)
    }

    /// Step 1: the event's lease to `shard-move` for a day, epoch + 1; returns the epoch.
    /// Waits for the owner's groups in flight (see the module's documentation), so that
    /// none commits after it. Refused while an exchange of the event waits for payment (its
    /// two sides would be moved apart in the middle of its steps).
    pub async fn fence_for_move(&self, event_id: &str) -> StoreResult<i64> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        sqlx::query("SELECT 1 FROM event_lease WHERE event_id = $1 FOR UPDATE")
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let open: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT count(*) FROM exchange WHERE status = 'PAYMENT_REQUIRED' AND ({EVENT_EXCHANGES})"
        )))
        .bind(event_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(classify)?;
        if open > 0 {
            return Err(StoreError::Internal(format!(
                "{open} exchanges of event {event_id} wait for payment: move it when they have ended"
            )));
        }
        let epoch: i64 = sqlx::query_scalar(
            "INSERT INTO event_lease (event_id, node_id, epoch, since, expires_at)
             VALUES ($1, 'shard-move', 1, boxoffice_now(), boxoffice_now() + interval '1 day')
             ON CONFLICT (event_id) DO UPDATE
                SET node_id = 'shard-move', epoch = event_lease.epoch + 1, since = boxoffice_now(),
                    expires_at = boxoffice_now() + interval '1 day'
             RETURNING epoch",
        )
        .bind(event_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(epoch)
    }

    /// Step 2 (see the module's documentation): copies the event's rows to `target` and
    /// deletes them here, the tables locked against writes from the read to the commit.
    pub async fn move_out(&self, event_id: &str, target: &PgStore) -> StoreResult<MovedOut> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        // The transaction sits idle while the target writes the copy: longer than the 3 s
        // every connection is allowed (`IDLE_IN_TRANSACTION_TIMEOUT_MS`) for ~100,000 rows.
        sqlx::query(
            "SELECT set_config('lock_timeout', '10s', true),
                    set_config('idle_in_transaction_session_timeout', '600s', true)",
        )
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        let started = std::time::Instant::now();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "LOCK TABLE {}, exchange, outbox IN SHARE ROW EXCLUSIVE MODE",
            EVENT_TABLES.join(", ")
        )))
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        let mut rows = EventRows::default();
        for table in EVENT_TABLES {
            let json: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb) FROM {table} t WHERE event_id = $1"
            )))
            .bind(event_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
            rows.tables.push((table, json));
        }
        read_exchanges_and_outbox(&mut tx, event_id, &mut rows).await?;
        if rows.tables[0].1.as_array().is_none_or(Vec::is_empty) {
            return Err(StoreError::Internal(format!(
                "event {event_id} is not on the source shard"
            )));
        }

        target.move_in(event_id, &rows).await?;

        leave_exchanges_and_outbox(&mut tx, event_id).await?;
        for table in EVENT_TABLES.iter().rev() {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE event_id = $1"
            )))
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(MovedOut {
            rows: rows.counts(),
            locked_ms: started.elapsed().as_millis(),
        })
    }

    /// Writes an event's rows read on another shard, in one transaction: a copy an earlier
    /// run left here first goes; the lease is left expired (any node takes it, epoch + 1);
    /// an exchange whose other side is here becomes one `BOTH` row.
    pub async fn move_in(&self, event_id: &str, rows: &EventRows) -> StoreResult<()> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        delete_copy(&mut tx, event_id).await?;
        for (table, json) in &rows.tables {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} SELECT * FROM jsonb_populate_recordset(NULL::{table}, $1)"
            )))
            .bind(json)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        sqlx::query("UPDATE event_lease SET expires_at = boxoffice_now() WHERE event_id = $1")
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        write_exchanges_and_outbox(&mut tx, event_id, rows).await?;
        tx.commit().await.map_err(classify)?;
        Ok(())
    }
}

type Tx<'t> = sqlx::Transaction<'t, sqlx::Postgres>;

/// Reads the event's exchanges ([`EVENT_EXCHANGES`]) and its outbox messages not delivered
/// yet, into `rows`.
async fn read_exchanges_and_outbox(
    tx: &mut Tx<'_>,
    event_id: &str,
    rows: &mut EventRows,
) -> StoreResult<()> {
    rows.exchanges = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT coalesce(jsonb_agg(to_jsonb(x)), '[]'::jsonb) FROM exchange x WHERE {EVENT_EXCHANGES}"
    )))
    .bind(event_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    rows.outbox = sqlx::query_scalar(
        "SELECT coalesce(jsonb_agg(to_jsonb(o)), '[]'::jsonb) FROM outbox o
          WHERE event_id = $1 AND published_at IS NULL",
    )
    .bind(event_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// On the source, once the target has them: the event's exchange rows go (an exchange with
/// one side here and the other in the moved event keeps this side's role), and so do its
/// outbox messages not delivered yet. A second run finds nothing to do.
async fn leave_exchanges_and_outbox(tx: &mut Tx<'_>, event_id: &str) -> StoreResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM exchange WHERE ({EVENT_EXCHANGES}) AND NOT (leg = 'BOTH' AND (from_event_id = $1) <> (to_event_id = $1))"
    )))
    .bind(event_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    sqlx::query(
        "UPDATE exchange SET leg = CASE WHEN from_event_id = $1 THEN 'IN' ELSE 'OUT' END
          WHERE leg = 'BOTH' AND (from_event_id = $1) <> (to_event_id = $1)",
    )
    .bind(event_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    sqlx::query("DELETE FROM outbox WHERE event_id = $1 AND published_at IS NULL")
        .bind(event_id)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    Ok(())
}

/// On the target, before a copy: what an earlier run left here of the event (the directory
/// still names the source, so nothing here is the event's but that copy).
async fn delete_copy(tx: &mut Tx<'_>, event_id: &str) -> StoreResult<()> {
    sqlx::query("DELETE FROM outbox WHERE event_id = $1 AND published_at IS NULL")
        .bind(event_id)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM exchange WHERE leg <> 'BOTH' AND ({EVENT_EXCHANGES})"
    )))
    .bind(event_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    for table in EVENT_TABLES.iter().rev() {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE event_id = $1"
        )))
        .bind(event_id)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    Ok(())
}

/// On the target: the event's exchanges, each merged with the other side's row when it is
/// here (same status), else written with the moved event's role; then its outbox messages
/// not delivered yet, with this shard's ids. An exchange already merged by an earlier run
/// that stopped before the source let go of it is left as it is.
async fn write_exchanges_and_outbox(
    tx: &mut Tx<'_>,
    event_id: &str,
    rows: &EventRows,
) -> StoreResult<()> {
    let merged = sqlx::query(
        "UPDATE exchange x SET leg = 'BOTH'
           FROM jsonb_populate_recordset(NULL::exchange, $1) AS s
          WHERE x.exchange_id = s.exchange_id AND x.status = s.status AND x.leg <> 'BOTH'
         RETURNING x.exchange_id",
    )
    .bind(&rows.exchanges)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    let merged: Vec<String> = merged.iter().map(|r| r.get(0)).collect();
    sqlx::query(
        "INSERT INTO exchange
         SELECT s.exchange_id, s.account_id, s.order_id, s.from_event_id, s.to_event_id, s.ticket_ids,
                s.from_value_minor, s.new_hold_id, s.new_order_id, s.to_value_minor, s.amount_due_minor,
                s.currency, s.status, s.idempotency_key, s.created_at, s.updated_at,
                CASE WHEN s.from_event_id = $2 AND s.to_event_id = $2 THEN 'BOTH'
                     WHEN s.leg <> 'BOTH' THEN s.leg
                     WHEN s.from_event_id = $2 THEN 'OUT'
                     ELSE 'IN' END
           FROM jsonb_populate_recordset(NULL::exchange, $1) AS s
          WHERE s.exchange_id <> ALL($3)
         ON CONFLICT (exchange_id) DO NOTHING",
    )
    .bind(&rows.exchanges)
    .bind(event_id)
    .bind(&merged)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at)
         SELECT event_id, topic, payload, created_at
           FROM jsonb_populate_recordset(NULL::outbox, $1) ORDER BY id",
    )
    .bind(&rows.outbox)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}
