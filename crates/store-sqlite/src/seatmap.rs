//! The seat-map change feed on SQLite (see `boxoffice_store::seatmap`). One writer at a time,
//! so the version bump is in commit order by construction.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::seatmap::{EventChanges, MapChanges, MapSeat, MapSnapshot, StoredBatch};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::{classify, from_ms, to_ms};

/// Bumps each changed event's map version and writes its change row, last before commit.
pub(crate) async fn record(
    tx: &mut Transaction<'_, Sqlite>,
    changes: &MapChanges,
    now: OffsetDateTime,
) -> StoreResult<()> {
    for (event_id, event_changes) in changes.non_empty() {
        let version = sqlx::query_scalar::<_, i64>(
            "UPDATE seatmap SET version = version + 1 WHERE event_id = ?1 RETURNING version",
        )
        .bind(event_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?
        .ok_or_else(|| {
            StoreError::Internal(format!("event {event_id} has no seat-map version row"))
        })?;
        sqlx::query(
            "INSERT INTO seatmap_change (event_id, version, changes, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(event_id)
        .bind(version)
        .bind(event_changes.encode())
        .bind(to_ms(now))
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    Ok(())
}

/// Every seat and tier of the event with the map version, in one read transaction.
pub(crate) async fn snapshot(
    reader: &SqlitePool,
    event_id: &str,
) -> StoreResult<Option<MapSnapshot>> {
    let mut tx = reader.begin().await.map_err(classify)?;
    let Some(version) =
        sqlx::query_scalar::<_, i64>("SELECT version FROM seatmap WHERE event_id = ?1")
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
    else {
        return Ok(None);
    };
    let seats = sqlx::query_as::<_, (String, String, Option<i64>)>(
        "SELECT seat_id, status, hold_expires_at FROM seat WHERE event_id = ?1",
    )
    .bind(event_id)
    .fetch_all(&mut *tx)
    .await
    .map_err(classify)?
    .into_iter()
    .map(|(seat_id, status, until)| {
        let status = SeatStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {status:?}")))?;
        let until = until.map(from_ms).transpose()?;
        Ok((seat_id, MapSeat::new(status, until)))
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let tiers = sqlx::query_as::<_, (String, i64)>(
        "SELECT tier_id, available FROM tier WHERE event_id = ?1 ORDER BY position",
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
    reader: &SqlitePool,
    event_id: &str,
    after: u64,
    limit: u32,
) -> StoreResult<Vec<StoredBatch>> {
    sqlx::query_as::<_, (i64, String)>(
        "SELECT version, changes FROM seatmap_change
          WHERE event_id = ?1 AND version > ?2 ORDER BY version LIMIT ?3",
    )
    .bind(event_id)
    .bind(i64::try_from(after).unwrap_or(i64::MAX))
    .bind(i64::from(limit))
    .fetch_all(reader)
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

pub(crate) async fn prune(writer: &SqlitePool, keep: u64) -> StoreResult<u64> {
    let mut tx = crate::begin_write(writer).await?;
    let deleted = sqlx::query(
        "DELETE FROM seatmap_change
          WHERE version <= (SELECT m.version FROM seatmap m WHERE m.event_id = seatmap_change.event_id) - ?1",
    )
    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
    .execute(&mut *tx)
    .await
    .map_err(classify)?
    .rows_affected();
    tx.commit().await.map_err(classify)?;
    Ok(deleted)
}
