//! The seat-map change feed on PostgreSQL (see `boxoffice_store::seatmap`).

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::seatmap::{EventChanges, MapChanges, MapSeat, MapSnapshot, StoredBatch};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::{PgPool, Postgres, Transaction};

use crate::classify;

/// Bumps each changed event's map version and writes its change row. Call it as the last
/// statement before commit: the version row stays locked until then, and nothing after it
/// may wait on another lock.
pub(crate) async fn record(
    tx: &mut Transaction<'_, Postgres>,
    changes: &MapChanges,
    now: OffsetDateTime,
) -> StoreResult<()> {
    for (event_id, event_changes) in changes.non_empty() {
        let written = sqlx::query(
            "WITH bumped AS (
                UPDATE seatmap SET version = version + 1 WHERE event_id = $1 RETURNING version
             )
             INSERT INTO seatmap_change (event_id, version, changes, created_at)
             SELECT $1, version, $2, $3 FROM bumped",
        )
        .bind(event_id)
        .bind(event_changes.encode())
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if written != 1 {
            return Err(StoreError::Internal(format!(
                "event {event_id} has no seat-map version row"
            )));
        }
    }
    Ok(())
}

/// Every seat and tier of the event with the map version, in one REPEATABLE READ snapshot.
pub(crate) async fn snapshot(pool: &PgPool, event_id: &str) -> StoreResult<Option<MapSnapshot>> {
    let mut tx = pool.begin().await.map_err(classify)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
    let Some(version) =
        sqlx::query_scalar::<_, i64>("SELECT version FROM seatmap WHERE event_id = $1")
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
    else {
        return Ok(None);
    };
    let seats = sqlx::query_as::<_, (String, String, Option<OffsetDateTime>)>(
        "SELECT seat_id, status, hold_expires_at FROM seat WHERE event_id = $1",
    )
    .bind(event_id)
    .fetch_all(&mut *tx)
    .await
    .map_err(classify)?
    .into_iter()
    .map(|(seat_id, status, until)| {
        let status = SeatStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {status:?}")))?;
        Ok((seat_id, MapSeat::new(status, until)))
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let tiers = sqlx::query_as::<_, (String, i64)>(
        "SELECT tier_id, available FROM tier WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(&mut *tx)
    .await
    .map_err(classify)?;
    tx.commit().await.map_err(classify)?;
    Ok(Some(MapSnapshot {
        version: u64::try_from(version).unwrap_or(0),
        seats,
        tiers,
    }))
}

pub(crate) async fn changes_after(
    pool: &PgPool,
    event_id: &str,
    after: u64,
    limit: u32,
) -> StoreResult<Vec<StoredBatch>> {
    sqlx::query_as::<_, (i64, String)>(
        "SELECT version, changes FROM seatmap_change
          WHERE event_id = $1 AND version > $2 ORDER BY version LIMIT $3",
    )
    .bind(event_id)
    .bind(i64::try_from(after).unwrap_or(i64::MAX))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
    .map_err(classify)?
    .into_iter()
    .map(|(version, raw)| {
        Ok(StoredBatch {
            version: u64::try_from(version).unwrap_or(0),
            changes: EventChanges::decode(&raw)?,
        })
    })
    .collect()
}

pub(crate) async fn prune(pool: &PgPool, keep: u64) -> StoreResult<u64> {
    let deleted = sqlx::query(
        "DELETE FROM seatmap_change c USING seatmap m
          WHERE c.event_id = m.event_id AND c.version <= m.version - $1",
    )
    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
    .execute(pool)
    .await
    .map_err(classify)?
    .rows_affected();
    Ok(deleted)
}
