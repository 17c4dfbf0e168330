//! The seat-map change feed (see `boxoffice_store::seatmap`).

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::seatmap::{EventChanges, MapChanges, MapSeat, MapSnapshot, StoredBatch};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Dialect, query};

/// Bumps each changed event's map version and writes its change row. Call it as the last
/// statement before commit: on PostgreSQL the version row stays locked until then, and
/// nothing after it may wait on another lock; on SQLite one writer at a time puts the bumps
/// in commit order by construction.
pub async fn record(
    conn: &mut Conn<'_>,
    changes: &MapChanges,
    now: OffsetDateTime,
) -> StoreResult<()> {
    for (event_id, event_changes) in changes.non_empty() {
        let written =
            match conn.dialect() {
                // One round trip inside the group's transaction.
                Dialect::Postgres => {
                    query(
                        "WITH bumped AS (
                        UPDATE seatmap SET version = version + 1 WHERE event_id = $1
                        RETURNING version
                     )
                     INSERT INTO seatmap_change (event_id, version, changes, created_at)
                     SELECT $1, version, $2, $3 FROM bumped",
                    )
                    .bind(event_id)
                    .bind(event_changes.encode())
                    .bind(now)
                    .execute(conn)
                    .await?
                }
                // No data-modifying WITH: the bump, then the row.
                Dialect::Sqlite => {
                    let bumped = query(
                        "UPDATE seatmap SET version = version + 1 WHERE event_id = $1
                     RETURNING version",
                    )
                    .bind(event_id)
                    .fetch_optional(conn)
                    .await?;
                    match bumped {
                        None => 0,
                        Some(row) => query(
                            "INSERT INTO seatmap_change (event_id, version, changes, created_at)
                             VALUES ($1, $2, $3, $4)",
                        )
                        .bind(event_id)
                        .bind(row.get::<i64, _>(0)?)
                        .bind(event_changes.encode())
                        .bind(now)
                        .execute(conn)
                        .await?,
                    }
                }
            };
        if written != 1 {
            return Err(StoreError::Internal(format!(
                "event {event_id} has no seat-map version row"
            )));
        }
    }
    Ok(())
}

/// Every seat and tier of the event with the map version, in one snapshot.
pub async fn snapshot(db: &Db, event_id: &str) -> StoreResult<Option<MapSnapshot>> {
    let mut tx = db.snapshot().await?;
    let Some(version) = query("SELECT version FROM seatmap WHERE event_id = $1")
        .bind(event_id)
        .fetch_optional(&mut tx.conn())
        .await?
    else {
        return Ok(None);
    };
    let version: i64 = version.get(0)?;
    let seats = query("SELECT seat_id, status, hold_expires_at FROM seat WHERE event_id = $1")
        .bind(event_id)
        .fetch_all(&mut tx.conn())
        .await?
        .into_iter()
        .map(|row| {
            let (seat_id, status): (String, String) = (row.get(0)?, row.get(1)?);
            let status = SeatStatus::parse(&status).ok_or_else(|| {
                StoreError::Internal(format!("seat {seat_id} has status {status:?}"))
            })?;
            Ok((seat_id, MapSeat::new(status, row.get(2)?)))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let tiers = query("SELECT tier_id, available FROM tier WHERE event_id = $1 ORDER BY position")
        .bind(event_id)
        .fetch_all(&mut tx.conn())
        .await?
        .into_iter()
        .map(|row| Ok((row.get(0)?, row.get(1)?)))
        .collect::<StoreResult<Vec<_>>>()?;
    tx.commit().await?;
    Ok(Some(MapSnapshot {
        version: u64::try_from(version).unwrap_or(0),
        seats,
        tiers,
    }))
}

/// The event's change batches after version `after`, oldest first, at most `limit`.
pub async fn changes_after(
    db: &Db,
    event_id: &str,
    after: u64,
    limit: u32,
) -> StoreResult<Vec<StoredBatch>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT version, changes FROM seatmap_change
          WHERE event_id = $1 AND version > $2 ORDER BY version LIMIT $3",
    )
    .bind(event_id)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .into_iter()
    .map(|row| {
        Ok(StoredBatch {
            version: u64::try_from(row.get::<i64, _>(0)?).unwrap_or(0),
            changes: EventChanges::decode(&row.get::<String, _>(1)?)?,
        })
    })
    .collect()
}

/// Deletes the change rows more than `keep` versions behind each event's map.
pub async fn prune(db: &Db, keep: u64) -> StoreResult<u64> {
    let mut tx = db.write().await?;
    let deleted = query(
        "DELETE FROM seatmap_change
          WHERE version <= (SELECT m.version FROM seatmap m
                             WHERE m.event_id = seatmap_change.event_id) - $1",
    )
    .bind(keep)
    .execute(&mut tx.conn())
    .await?;
    tx.commit().await?;
    Ok(deleted)
}
