//! A move by PostgreSQL's logical replication (issue 38): the event's rows are copied and
//! kept up to date on the target while the event and every other event of the source sell
//! on; only the cut-over stops the moved event's writes. [`move_by_replication`] runs the
//! steps, each safe to stop after and to run again (a re-run first removes what an earlier
//! one left: its subscription, slot, publication and the target's copy):
//!
//! 1. Checks: the source has `wal_level = logical`, the target can run a subscription.
//! 2. Leftovers of an earlier run go; the target's stale copy of the event is deleted. The
//!    event is marked moving in on the target (`event_moving_in`, migration 0018): until the
//!    flip, the target's workers leave its rows alone (no expiry, no payment retried, no
//!    cancellation's refunds there), and a `Front` that finds an object on both shards takes
//!    the one the directory names.
//! 3. On the source, a publication of [`EVENT_TABLES`], each `WHERE (event_id = '…')`, then
//!    a logical slot (created apart: a subscription to a database of the same server hangs
//!    when it creates its own slot). On the target, a subscription on that slot that copies
//!    the rows and streams their changes; waits until every table is copied and streaming
//!    ([`MOVE_COPY_TIMEOUT_S`]).
//! 4. The event's lease is fenced ([`PgStore::fence_for_move`]): its writer stops.
//! 5. The cut-over, one source transaction: the `exchange` table locked against writes (a
//!    few rows; only a group that writes an exchange waits), the event's rows of the tables
//!    written beside the seat map (`WRITTEN_BESIDE_THE_SEATMAP`: tickets, payment
//!    operations, refunds, its cancellation) and its undelivered outbox messages locked, then
//!    its seat-map row `FOR UPDATE` (every group and every one-shot write of the event ends by
//!    updating it, an exchange out of the event written by another event's writer too, so
//!    none commits past the lock). The source's WAL position then bounds every change of the
//!    event; the target applies up to it ([`MOVE_CATCH_UP_TIMEOUT_S`]), and shows the
//!    fence's lease row. The event's exchanges and undelivered outbox messages are copied
//!    (JSON, as the locked copy does: they have no `event_id` key, and the outbox's ids are
//!    each shard's own); the subscription and its slot go; the target's lease is expired
//!    (any node takes it, epoch + 1); the directory names the target, and the target's
//!    mark goes (its workers take the event's due work); then the transaction
//!    lets go of the exchanges and outbox messages, deletes the locked rows and the seat-map
//!    row, and commits: a write of the event that waited for a lock finds no row and is
//!    refused (a check-in sent to the source by a node that has not re-read the directory
//!    finds no ticket, as after a locked copy).
//! 6. The publication goes and the event's rows are deleted on the source,
//!    [`MOVE_DELETE_BATCH_ROWS`] per transaction ([`clean_after_move`]).
//!
//! Stopped before the flip in 5, the directory names the source: the event is fenced (its
//! lease is the mover's for a day) until the move runs again, which starts over; a failure
//! the mover sees expires the fence and removes the subscription, slot, publication, the
//! target's copy and its mark at once. Stopped after the flip, the event sells on the target; the next run (or `shard move`
//! to where it is) removes the source's rows and leftovers.
//!
//! The replicated tables have no serial column (the outbox's `bigserial` ids are why it is
//! copied apart) and no trigger: the subscription writes with `session_replication_role =
//! replica`, which skips triggers and foreign-key checks, and loses nothing here.
//!
//! What the cut-over does not carry: tickets the outbox relay inserts on the source after
//! the WAL position (the `order.confirmed` message is copied undelivered, and the target's
//! relay issues them again: issuing is idempotent), and the idempotency purge's deletes
//! (the target purges by age too).
//!
//! Needs on the source: `wal_level = logical`, a free replication slot and WAL sender per
//! move (plus up to `max_sync_workers_per_subscription`, 2 by default, while it copies), a
//! superuser (or REPLICATION) role in the shard's URL, and the target server able to connect
//! to the source's URL. On the target: `max_logical_replication_workers` ≥ 3 and a superuser
//! (PostgreSQL 15 creates subscriptions only as one).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use boxoffice_store::shard::DirectoryStore;
use boxoffice_store::{StoreError, StoreResult};
use sha2::Digest;

use super::{
    EVENT_TABLES, EventRows, delete_copy, leave_exchanges_and_outbox, read_exchanges_and_outbox,
    write_exchanges_and_outbox,
};
use crate::{PgStore, classify, hosts};

/// How long the subscription's first copy of the event's tables may take.
pub const MOVE_COPY_TIMEOUT_S: u64 = 1_800;
/// How long the target may take to apply the source's WAL up to the cut-over's position,
/// the event's writes stopped meanwhile.
pub const MOVE_CATCH_UP_TIMEOUT_S: u64 = 60;
/// Rows of one table deleted per transaction on the source after the move: each batch locks
/// only its rows, and no other event's write waits on them.
pub const MOVE_DELETE_BATCH_ROWS: i64 = 5_000;
/// The event's tables written by more than its groups and one-shot writes, which all end
/// on the seat-map row: a ticket's check-in and issue, a payment's capture and retry
/// counters, a refund's settlement, the cancellation job's cursor. The cut-over locks their
/// rows before it takes the WAL position (in key order, as the writers do) and deletes them
/// before it commits, so that such a write either is replicated or finds no row; the other
/// tables' rows go after the flip, in batches. (Table, key.)
const WRITTEN_BESIDE_THE_SEATMAP: [(&str, &str); 7] = [
    ("ticket", "ticket_id"),
    ("payment_operation", "operation_id"),
    ("refund", "refund_id"),
    ("event_cancellation", "event_id"),
    // Issue 40: an allocation as given, a comp and a box-office sale as recorded.
    ("allocation", "allocation_id"),
    ("allocation_comp", "order_id"),
    ("box_office_sale", "order_id"),
];
/// How often the copy and the catch-up are looked at.
const MOVE_POLL_INTERVAL_MS: u64 = 20;
/// How often the copy's progress is told.
const MOVE_PROGRESS_EVERY_S: u64 = 5;
/// The cut-over's wait for the seat-map row (the event's group in flight) and the exchanges.
const MOVE_LOCK_TIMEOUT_MS: u64 = 10_000;
/// How long a replication slot may stay in use after its subscription was dropped (its WAL
/// sender ends) before the slot's drop gives up.
const MOVE_SLOT_DROP_TIMEOUT_S: u64 = 10;

/// One shard of a move: its directory name, its URL (the target's subscription connects to
/// the source's) and a store on it.
#[derive(Debug, Clone, Copy)]
pub struct ShardRef<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub store: &'a PgStore,
}

/// What a move is doing, told as it goes ([`MoveObserver`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveStep {
    /// Leftovers of an earlier run were removed (what, in words), or nothing was left.
    Cleaned(String),
    /// The subscription copies the event's tables: `copied` of `tables` are done.
    Copying { copied: usize, tables: usize },
    /// Every table copied; the target streams the event's changes.
    Streaming { copy_ms: u128 },
    /// The event's lease is the mover's.
    Fenced { epoch: i64 },
    /// The cut-over holds the event's seat-map row; the target applies up to `lsn`.
    CatchingUp { lsn: String },
    /// The target has every change of the event.
    CaughtUp { catch_up_ms: u128 },
    /// The directory names the target.
    Flipped { fenced_ms: u128 },
    /// Rows deleted on the source so far, table by table.
    Deleting { table: &'static str, rows: u64 },
}

impl std::fmt::Display for MoveStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MoveStep::Cleaned(what) => write!(f, "cleaned: {what}"),
            MoveStep::Copying { copied, tables } => {
                write!(f, "copying: {copied} of {tables} tables copied")
            }
            MoveStep::Streaming { copy_ms } => write!(
                f,
                "copied in {copy_ms} ms; the target streams the event's changes"
            ),
            MoveStep::Fenced { epoch } => {
                write!(
                    f,
                    "fenced: the event's lease is the mover's (epoch {epoch})"
                )
            }
            MoveStep::CatchingUp { lsn } => write!(
                f,
                "cut-over: the event's writes stopped; the target applies up to {lsn}"
            ),
            MoveStep::CaughtUp { catch_up_ms } => write!(f, "caught up in {catch_up_ms} ms"),
            MoveStep::Flipped { fenced_ms } => write!(
                f,
                "the directory names the target ({fenced_ms} ms after the fence)"
            ),
            MoveStep::Deleting { table, rows } => {
                write!(f, "deleted on the source: {table} {rows}")
            }
        }
    }
}

/// Told each step of a move, awaited before the move goes on (the locks of the step held).
#[async_trait]
pub trait MoveObserver: Send {
    async fn step(&mut self, step: &MoveStep);
}

/// Prints each step on its own line (the CLI).
#[derive(Debug)]
pub struct PrintSteps;

#[async_trait]
impl MoveObserver for PrintSteps {
    async fn step(&mut self, step: &MoveStep) {
        println!("{step}");
    }
}

/// What [`move_by_replication`] did and how long the event's writes stopped.
#[derive(Debug, Clone)]
pub struct Moved {
    /// Rows deleted on the source, by table (exchanges and outbox messages: copied).
    pub rows: Vec<(&'static str, u64)>,
    /// The subscription's first copy, the event selling throughout.
    pub copy_ms: u128,
    /// From the fence to the directory's flip: the event's writes stopped everywhere.
    pub fenced_ms: u128,
    /// The cut-over transaction: the event's seat-map row and the `exchange` table locked.
    pub cut_over_ms: u128,
    /// The target's catch-up inside the cut-over.
    pub catch_up_ms: u128,
    /// Deleting the event's rows on the source, after the flip.
    pub delete_ms: u128,
}

/// The publication's, slot's and subscription's name for `event_id`: a valid identifier
/// whatever the event's id holds (`-`, capitals), 31 characters, the same on every run.
pub fn replication_name(event_id: &str) -> String {
    let digest = sha2::Sha256::digest(event_id.as_bytes());
    format!("boxoffice_move_{}", &hex::encode(digest)[..16])
}

/// The connection string the target's subscription uses to reach the source: the shard's
/// URL (libpq reads it as sqlx does); with several hosts libpq is asked for the writable
/// primary, so the subscription follows a failover as the nodes' pools do.
fn source_conninfo(url: &str) -> String {
    if hosts::split(url).is_none() {
        return url.to_owned();
    }
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}target_session_attrs=read-write")
}

fn elapsed_ms(since: Instant) -> u128 {
    since.elapsed().as_millis()
}

/// Moves `event_id` from `source` to `target` (see the module's documentation) and names the
/// target in `home`'s directory.
pub async fn move_by_replication(
    home: &PgStore,
    event_id: &str,
    source: ShardRef<'_>,
    target: ShardRef<'_>,
    observer: &mut dyn MoveObserver,
) -> StoreResult<Moved> {
    source.store.require_logical(source.name).await?;
    target.store.require_subscriptions(target.name).await?;
    let name = replication_name(event_id);

    let cleaned = drop_replication(source.store, target.store, &name).await?;
    delete_target_copy(target.store, event_id).await?;
    // Before any row arrives: the target's workers leave the copy alone until the flip.
    sqlx::query("INSERT INTO event_moving_in (event_id) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(event_id)
        .execute(target.store.pool())
        .await
        .map_err(classify)?;
    observer
        .step(&MoveStep::Cleaned(if cleaned.is_empty() {
            "nothing left by an earlier run".to_owned()
        } else {
            cleaned.join(", ")
        }))
        .await;

    let mut reached = Reached::default();
    let moved = copy_and_cut_over(
        home,
        event_id,
        source,
        target,
        &name,
        observer,
        &mut reached,
    )
    .await;
    let Err(error) = moved else {
        return moved;
    };
    if reached.flipped {
        return Err(StoreError::Internal(format!(
            "moving event {event_id} from {} to {}: the directory names {}, then: {error}; run the move again to clean {}",
            source.name, target.name, target.name, source.name
        )));
    }
    // Before the flip the event still lives on the source: its writers may take it again
    // (the fence's epoch stays, the next owner's is one more), and no WAL is kept on the
    // source for a subscription that no run will finish.
    let mut undone = Vec::new();
    if reached.fenced && source.store.unfence_after_move(event_id).await.is_ok() {
        undone.push("the event's lease expired on the source (its writers take it again)");
    }
    if drop_replication(source.store, target.store, &name)
        .await
        .is_ok()
    {
        undone.push("the subscription, slot and publication dropped");
        // Only once nothing streams into it: the copy, its outbox messages among them,
        // which the target's relay would otherwise deliver a second time.
        if delete_target_copy(target.store, event_id).await.is_ok() {
            undone.push("the target's copy deleted");
        }
    }
    Err(StoreError::Internal(format!(
        "moving event {event_id} from {} to {}: {error}; {}",
        source.name,
        target.name,
        if undone.is_empty() {
            "run the move again to finish or undo it".to_owned()
        } else {
            format!("{}; the event stays on {}", undone.join(", "), source.name)
        }
    )))
}

/// How far [`copy_and_cut_over`] got, for the undo of a failure.
#[derive(Debug, Default)]
struct Reached {
    /// The fence committed: the event's writers stopped.
    fenced: bool,
    /// The directory names the target: nothing is undone any more.
    flipped: bool,
}

/// Steps 3 to 6 of the module's documentation; `reached` says how far it got.
async fn copy_and_cut_over(
    home: &PgStore,
    event_id: &str,
    source: ShardRef<'_>,
    target: ShardRef<'_>,
    name: &str,
    observer: &mut dyn MoveObserver,
    reached: &mut Reached,
) -> StoreResult<Moved> {
    let copy_started = Instant::now();
    source.store.publish_event(event_id, name).await?;
    target
        .store
        .subscribe(name, &source_conninfo(source.url))
        .await?;
    wait_for_copy(target.store, name, observer).await?;
    let copy_ms = elapsed_ms(copy_started);
    observer.step(&MoveStep::Streaming { copy_ms }).await;

    let epoch = source.store.fence_for_move(event_id).await?;
    reached.fenced = true;
    let fenced_at = Instant::now();
    observer.step(&MoveStep::Fenced { epoch }).await;

    // The cut-over: the idle-in-transaction limit every connection has is raised for it, as
    // it waits on the target between its statements.
    let mut cut = source.store.pool().begin().await.map_err(classify)?;
    let idle_ms = (MOVE_CATCH_UP_TIMEOUT_S + 60) * 1_000;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT set_config('lock_timeout', '{MOVE_LOCK_TIMEOUT_MS}', true),
                set_config('idle_in_transaction_session_timeout', '{idle_ms}', true)"
    )))
    .execute(&mut *cut)
    .await
    .map_err(classify)?;
    let cut_started = Instant::now();
    sqlx::query("LOCK TABLE exchange IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut *cut)
        .await
        .map_err(classify)?;
    for (table, key) in WRITTEN_BESIDE_THE_SEATMAP {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT 1 FROM {table} WHERE event_id = $1 ORDER BY {key} FOR UPDATE"
        )))
        .bind(event_id)
        .execute(&mut *cut)
        .await
        .map_err(classify)?;
    }
    sqlx::query(
        "SELECT 1 FROM outbox WHERE event_id = $1 AND published_at IS NULL ORDER BY id FOR UPDATE",
    )
    .bind(event_id)
    .execute(&mut *cut)
    .await
    .map_err(classify)?;
    let locked = sqlx::query("SELECT 1 FROM seatmap WHERE event_id = $1 FOR UPDATE")
        .bind(event_id)
        .execute(&mut *cut)
        .await
        .map_err(classify)?
        .rows_affected();
    if locked != 1 {
        return Err(StoreError::Internal(format!(
            "event {event_id} has no seat-map row on {}",
            source.name
        )));
    }
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut *cut)
        .await
        .map_err(classify)?;
    observer
        .step(&MoveStep::CatchingUp { lsn: lsn.clone() })
        .await;
    let catch_up_started = Instant::now();
    wait_for_catch_up(source.store, target.store, name, event_id, &lsn, epoch).await?;
    let catch_up_ms = elapsed_ms(catch_up_started);
    observer.step(&MoveStep::CaughtUp { catch_up_ms }).await;

    let mut rows = EventRows::default();
    read_exchanges_and_outbox(&mut cut, event_id, &mut rows).await?;
    let mut tx = target.store.pool().begin().await.map_err(classify)?;
    write_exchanges_and_outbox(&mut tx, event_id, &rows).await?;
    tx.commit().await.map_err(classify)?;
    drop_replication_keeping_publication(source.store, target.store, name).await?;
    target.store.unfence_after_move(event_id).await?;
    home.move_event(event_id, target.name).await?;
    reached.flipped = true;
    target.store.moved_in(event_id).await?;
    let fenced_ms = elapsed_ms(fenced_at);
    observer.step(&MoveStep::Flipped { fenced_ms }).await;

    leave_exchanges_and_outbox(&mut cut, event_id).await?;
    let mut deleted_in_cut_over: Vec<(&str, u64)> = Vec::new();
    for table in WRITTEN_BESIDE_THE_SEATMAP
        .iter()
        .map(|(table, _)| *table)
        .chain(["seatmap"])
    {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE event_id = $1"
        )))
        .bind(event_id)
        .execute(&mut *cut)
        .await
        .map_err(classify)?
        .rows_affected();
        deleted_in_cut_over.push((table, rows));
    }
    cut.commit().await.map_err(classify)?;
    let cut_over_ms = elapsed_ms(cut_started);

    let delete_started = Instant::now();
    let mut moved_rows = clean_after_move(source.store, target.store, event_id, observer).await?;
    for (table, rows) in &mut moved_rows {
        for (deleted_table, deleted) in &deleted_in_cut_over {
            if table == deleted_table {
                *rows += deleted;
            }
        }
    }
    let n = |v: &serde_json::Value| v.as_array().map_or(0, |a| a.len() as u64);
    moved_rows.push(("exchange", n(&rows.exchanges)));
    moved_rows.push(("outbox", n(&rows.outbox)));
    Ok(Moved {
        rows: moved_rows,
        copy_ms,
        fenced_ms,
        cut_over_ms,
        catch_up_ms,
        delete_ms: elapsed_ms(delete_started),
    })
}

/// The target's copy of the event, from an earlier run or a failed one (the directory still
/// names the source), in one transaction.
async fn delete_target_copy(target: &PgStore, event_id: &str) -> StoreResult<()> {
    let mut tx = target.pool().begin().await.map_err(classify)?;
    delete_copy(&mut tx, event_id).await?;
    sqlx::query("DELETE FROM event_moving_in WHERE event_id = $1")
        .bind(event_id)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
    tx.commit().await.map_err(classify)
}

/// After the directory names another shard: removes what a move left of `event_id` on
/// `source` — its replication (the subscription on `target`, the slot and the publication),
/// its exchanges and outbox messages (as the cut-over would have), its seat-map row, then
/// every row, [`MOVE_DELETE_BATCH_ROWS`] per transaction, children first, the event's row
/// last. Returns the rows deleted by table. Safe to run again; on a shard without the
/// event's row it only drops the replication.
pub async fn clean_after_move(
    source: &PgStore,
    target: &PgStore,
    event_id: &str,
    observer: &mut dyn MoveObserver,
) -> StoreResult<Vec<(&'static str, u64)>> {
    drop_replication(source, target, &replication_name(event_id)).await?;
    target.moved_in(event_id).await?;
    // The event's row goes last: without it nothing of the event is left here, and the
    // exchange and outbox rows that name it belong to the other sides of its exchanges.
    if !source.has_event(event_id).await? {
        return Ok(EVENT_TABLES.iter().map(|table| (*table, 0)).collect());
    }
    let mut tx = source.pool().begin().await.map_err(classify)?;
    leave_exchanges_and_outbox(&mut tx, event_id).await?;
    tx.commit().await.map_err(classify)?;
    let mut deleted = Vec::new();
    for table in EVENT_TABLES.iter().rev() {
        let mut rows: u64 = 0;
        let mut told = Instant::now();
        loop {
            let batch = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE ctid = ANY(ARRAY(
                     SELECT ctid FROM {table} WHERE event_id = $1 LIMIT $2))"
            )))
            .bind(event_id)
            .bind(MOVE_DELETE_BATCH_ROWS)
            .execute(source.pool())
            .await
            .map_err(classify)?
            .rows_affected();
            rows += batch;
            if batch < MOVE_DELETE_BATCH_ROWS as u64 {
                break;
            }
            if told.elapsed() >= Duration::from_secs(MOVE_PROGRESS_EVERY_S) {
                observer.step(&MoveStep::Deleting { table, rows }).await;
                told = Instant::now();
            }
        }
        if rows > 0 {
            observer.step(&MoveStep::Deleting { table, rows }).await;
        }
        deleted.push((*table, rows));
    }
    deleted.reverse();
    Ok(deleted)
}

/// Drops the subscription named `name` on `target` (when there is one), its slots on
/// `source` and the publication; says what it found.
async fn drop_replication(
    source: &PgStore,
    target: &PgStore,
    name: &str,
) -> StoreResult<Vec<String>> {
    let mut dropped = drop_replication_keeping_publication(source, target, name).await?;
    let publication: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)")
            .bind(name)
            .fetch_one(source.pool())
            .await
            .map_err(classify)?;
    if publication {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP PUBLICATION IF EXISTS {name}"
        )))
        .execute(source.pool())
        .await
        .map_err(classify)?;
        dropped.push(format!("publication {name}"));
    }
    Ok(dropped)
}

/// The subscription and the slots, not the publication: the cut-over drops them while its
/// transaction holds the `exchange` table, and dropping a publication of a table waits for
/// that table's locks.
async fn drop_replication_keeping_publication(
    source: &PgStore,
    target: &PgStore,
    name: &str,
) -> StoreResult<Vec<String>> {
    let mut dropped = Vec::new();
    let subscription: Option<i64> =
        sqlx::query_scalar("SELECT oid::bigint FROM pg_subscription WHERE subname = $1")
            .bind(name)
            .fetch_optional(target.pool())
            .await
            .map_err(classify)?;
    // Its slot is dropped here on the source, not by DROP SUBSCRIPTION: that one would
    // connect to the source from inside the target, which hangs when both are one server.
    let mut slots = vec![name.to_owned()];
    if let Some(oid) = subscription {
        for statement in [
            format!("ALTER SUBSCRIPTION {name} DISABLE"),
            format!("ALTER SUBSCRIPTION {name} SET (slot_name = NONE)"),
            format!("DROP SUBSCRIPTION {name}"),
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(target.pool())
                .await
                .map_err(classify)?;
        }
        dropped.push(format!("subscription {name}"));
        // The table copies' own slots, when it stopped in the middle of its copy.
        slots.extend(
            sqlx::query_scalar::<_, String>(
                "SELECT slot_name::text FROM pg_replication_slots WHERE slot_name LIKE $1",
            )
            .bind(format!("pg\\_{oid}\\_sync\\_%"))
            .fetch_all(source.pool())
            .await
            .map_err(classify)?,
        );
    }
    for slot in slots {
        if drop_slot(source, &slot).await? {
            dropped.push(format!("slot {slot}"));
        }
    }
    Ok(dropped)
}

/// Drops the replication slot `slot` on `source` when it exists; its WAL sender, which ends
/// once the subscription is gone, is ended at once. Whether there was one.
async fn drop_slot(source: &PgStore, slot: &str) -> StoreResult<bool> {
    let deadline = Instant::now() + Duration::from_secs(MOVE_SLOT_DROP_TIMEOUT_S);
    loop {
        let active: Option<Option<i32>> =
            sqlx::query_scalar("SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1")
                .bind(slot)
                .fetch_optional(source.pool())
                .await
                .map_err(classify)?;
        match active {
            None => return Ok(false),
            Some(None) => {
                let dropped = sqlx::query("SELECT pg_drop_replication_slot($1)")
                    .bind(slot)
                    .execute(source.pool())
                    .await;
                match dropped {
                    Ok(_) => return Ok(true),
                    // Taken again between the look and the drop: look again.
                    Err(_) if Instant::now() < deadline => {}
                    Err(error) => return Err(classify(error)),
                }
            }
            Some(Some(pid)) => {
                if Instant::now() >= deadline {
                    return Err(StoreError::Internal(format!(
                        "replication slot {slot} is still in use by process {pid} after {MOVE_SLOT_DROP_TIMEOUT_S} s"
                    )));
                }
                sqlx::query("SELECT pg_terminate_backend($1)")
                    .bind(pid)
                    .execute(source.pool())
                    .await
                    .map_err(classify)?;
            }
        }
        tokio::time::sleep(Duration::from_millis(MOVE_POLL_INTERVAL_MS)).await;
    }
}

/// Waits until the subscription `name` copied every table and streams, telling the progress.
async fn wait_for_copy(
    target: &PgStore,
    name: &str,
    observer: &mut dyn MoveObserver,
) -> StoreResult<()> {
    let started = Instant::now();
    let mut told: Option<Instant> = None;
    loop {
        let (enabled, tables, ready): (bool, i64, i64) = sqlx::query_as(
            "SELECT s.subenabled, count(r.srrelid), count(r.srrelid) FILTER (WHERE r.srsubstate = 'r')
               FROM pg_subscription s LEFT JOIN pg_subscription_rel r ON r.srsubid = s.oid
              WHERE s.subname = $1 GROUP BY s.subenabled",
        )
        .bind(name)
        .fetch_one(target.pool())
        .await
        .map_err(classify)?;
        if !enabled {
            return Err(StoreError::Internal(format!(
                "the target's subscription {name} stopped on an error (see the target's log)"
            )));
        }
        if tables > 0 && ready == tables {
            return Ok(());
        }
        if started.elapsed() >= Duration::from_secs(MOVE_COPY_TIMEOUT_S) {
            return Err(StoreError::Internal(format!(
                "the copy did not finish within {MOVE_COPY_TIMEOUT_S} s ({ready} of {tables} tables): are max_logical_replication_workers free on the target and max_wal_senders and max_replication_slots on the source?"
            )));
        }
        if told.is_none_or(|at| at.elapsed() >= Duration::from_secs(MOVE_PROGRESS_EVERY_S)) {
            observer
                .step(&MoveStep::Copying {
                    copied: usize::try_from(ready).unwrap_or(0),
                    tables: usize::try_from(tables).unwrap_or(0),
                })
                .await;
            told = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(MOVE_POLL_INTERVAL_MS)).await;
    }
}

/// Waits until the target confirmed every change of the source up to `lsn` (the slot's
/// `confirmed_flush_lsn`: the target reports what it applied and flushed) and shows the
/// fence's lease row, `epoch` (a check on the data itself: the fence committed before `lsn`).
async fn wait_for_catch_up(
    source: &PgStore,
    target: &PgStore,
    name: &str,
    event_id: &str,
    lsn: &str,
    epoch: i64,
) -> StoreResult<()> {
    let deadline = Instant::now() + Duration::from_secs(MOVE_CATCH_UP_TIMEOUT_S);
    loop {
        let confirmed: Option<bool> = sqlx::query_scalar(
            "SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1",
        )
        .bind(name)
        .bind(lsn)
        .fetch_optional(source.pool())
        .await
        .map_err(classify)?
        .flatten();
        if confirmed == Some(true) {
            let applied: Option<i64> = sqlx::query_scalar(
                "SELECT epoch FROM event_lease WHERE event_id = $1 AND node_id = 'shard-move'",
            )
            .bind(event_id)
            .fetch_optional(target.pool())
            .await
            .map_err(classify)?;
            if applied == Some(epoch) {
                return Ok(());
            }
            return Err(StoreError::Internal(format!(
                "the target confirmed the source's WAL up to {lsn} but its lease of the event is {applied:?}, not the fence's epoch {epoch}"
            )));
        }
        let enabled: Option<bool> =
            sqlx::query_scalar("SELECT subenabled FROM pg_subscription WHERE subname = $1")
                .bind(name)
                .fetch_optional(target.pool())
                .await
                .map_err(classify)?;
        if enabled != Some(true) {
            return Err(StoreError::Internal(format!(
                "the target's subscription {name} stopped on an error (see the target's log)"
            )));
        }
        if Instant::now() >= deadline {
            return Err(StoreError::Internal(format!(
                "the target did not apply the source's WAL up to {lsn} within {MOVE_CATCH_UP_TIMEOUT_S} s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(MOVE_POLL_INTERVAL_MS)).await;
    }
}

impl PgStore {
    /// Refuses a move by replication from a server without `wal_level = logical`.
    pub async fn require_logical(&self, shard: &str) -> StoreResult<()> {
        let wal_level: String = sqlx::query_scalar("SELECT current_setting('wal_level')")
            .fetch_one(self.pool())
            .await
            .map_err(classify)?;
        if wal_level != "logical" {
            return Err(StoreError::Internal(format!(
                "shard {shard} has wal_level = {wal_level}: a move copies the event with logical replication and needs wal_level = logical there (a restart), or `--locked-copy` to stop the shard's writes for the copy instead"
            )));
        }
        Ok(())
    }

    /// Refuses a move to a server that runs no subscription worker.
    async fn require_subscriptions(&self, shard: &str) -> StoreResult<()> {
        let workers: String =
            sqlx::query_scalar("SELECT current_setting('max_logical_replication_workers')")
                .fetch_one(self.pool())
                .await
                .map_err(classify)?;
        if workers.parse::<u32>().unwrap_or(0) == 0 {
            return Err(StoreError::Internal(format!(
                "shard {shard} has max_logical_replication_workers = {workers}: a move to it needs at least 3"
            )));
        }
        Ok(())
    }

    /// Step 3 on the source: the publication of the event's rows, then its slot (after it:
    /// a slot decodes with the catalog as of its creation and would not see a later
    /// publication).
    async fn publish_event(&self, event_id: &str, name: &str) -> StoreResult<()> {
        // Built by the server: each table and the event's id quoted by format().
        let create: String = sqlx::query_scalar(
            "SELECT format('CREATE PUBLICATION %I FOR TABLE %s', $1::text,
                           string_agg(format('%I WHERE (event_id = %L)', t, $2::text), ', ' ORDER BY n))
               FROM unnest($3::text[]) WITH ORDINALITY AS u(t, n)",
        )
        .bind(name)
        .bind(event_id)
        .bind(EVENT_TABLES)
        .fetch_one(self.pool())
        .await
        .map_err(classify)?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(self.pool())
            .await
            .map_err(classify)?;
        sqlx::query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')")
            .bind(name)
            .execute(self.pool())
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// Step 3 on the target: the subscription on the slot made for it. It copies the rows
    /// first (the row filters apply to the copy too); its writes commit with
    /// `synchronous_commit = on`, so what it confirms to the source is on the target's
    /// standby too; an error stops it (`disable_on_error`) rather than retrying forever.
    async fn subscribe(&self, name: &str, conninfo: &str) -> StoreResult<()> {
        let create: String = sqlx::query_scalar(
            "SELECT format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I
                            WITH (create_slot = false, slot_name = %L, copy_data = true,
                                  synchronous_commit = ''on'', disable_on_error = true)',
                           $1::text, $2::text, $1::text, $1::text)",
        )
        .bind(name)
        .bind(conninfo)
        .fetch_one(self.pool())
        .await
        .map_err(classify)?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(self.pool())
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// The event is this shard's: its workers take its due work from now on.
    async fn moved_in(&self, event_id: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM event_moving_in WHERE event_id = $1")
            .bind(event_id)
            .execute(self.pool())
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// The mover's lease of the event, expired: any node takes it (epoch + 1). On the target
    /// after the copy; on the source when a move gives up before the flip.
    async fn unfence_after_move(&self, event_id: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE event_lease SET expires_at = boxoffice_now()
              WHERE event_id = $1 AND node_id = 'shard-move'",
        )
        .bind(event_id)
        .execute(self.pool())
        .await
        .map_err(classify)?;
        Ok(())
    }
}
