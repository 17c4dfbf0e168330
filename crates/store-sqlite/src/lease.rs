//! The event lease and the node registry on SQLite (`boxoffice_store::lease`): the same rows
//! as on PostgreSQL. Write transactions are serialized (`BEGIN IMMEDIATE` on one writer
//! connection per process, the file's lock between processes), so a takeover and a group
//! never interleave; times are the store's clock in milliseconds.

use async_trait::async_trait;
use boxoffice_store::StoreResult;
use boxoffice_store::lease::{Fence, Lease, LeaseStore, NodeRecord, Taken};
use sqlx::Row;

use crate::{SqliteStore, begin_write, classify, from_ms};

const LEASE_SQL: &str = concat!(
    "SELECT l.event_id, l.node_id, l.epoch, l.since, l.expires_at, ",
    now_ms!(),
    " AS read_at, n.advertise_url
       FROM event_lease l LEFT JOIN cluster_node n ON n.node_id = l.node_id
      WHERE l.event_id = ?1"
);

fn lease_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<Lease> {
    Ok(Lease {
        event_id: row.try_get("event_id").map_err(classify)?,
        node_id: row.try_get("node_id").map_err(classify)?,
        epoch: u64::try_from(row.try_get::<i64, _>("epoch").map_err(classify)?).unwrap_or(0),
        since: from_ms(row.try_get("since").map_err(classify)?)?,
        expires_at: from_ms(row.try_get("expires_at").map_err(classify)?)?,
        read_at: from_ms(row.try_get("read_at").map_err(classify)?)?,
        owner_url: row.try_get("advertise_url").map_err(classify)?,
    })
}

fn ttl(ttl_ms: u64) -> i64 {
    i64::try_from(ttl_ms).unwrap_or(i64::MAX)
}

#[async_trait]
impl LeaseStore for SqliteStore {
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()> {
        let mut tx = begin_write(&self.writer).await?;
        sqlx::query(concat!(
            "INSERT INTO cluster_node (node_id, advertise_url, started_at, heartbeat_at)
             VALUES (?1, ?2, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ") ON CONFLICT (node_id) DO UPDATE
                SET advertise_url = excluded.advertise_url, heartbeat_at = excluded.heartbeat_at"
        ))
        .bind(node_id)
        .bind(advertise_url)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)
    }

    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT node_id, advertise_url, heartbeat_at FROM cluster_node
              ORDER BY heartbeat_at DESC, node_id LIMIT 1000",
        )
        .fetch_all(&self.reader)
        .await
        .map_err(classify)?;
        rows.into_iter()
            .map(|(node_id, advertise_url, heartbeat_at)| {
                Ok(NodeRecord {
                    node_id,
                    advertise_url,
                    heartbeat_at: from_ms(heartbeat_at)?,
                })
            })
            .collect()
    }

    async fn take_lease(&self, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken> {
        let mut tx = begin_write(&self.writer).await?;
        let taken = sqlx::query(concat!(
            "INSERT INTO event_lease (event_id, node_id, epoch, since, expires_at)
             VALUES (?1, ?2, 1, ",
            now_ms!(),
            ", ",
            now_ms!(),
            " + ?3)
             ON CONFLICT (event_id) DO UPDATE
                SET node_id = excluded.node_id, epoch = event_lease.epoch + 1,
                    since = excluded.since, expires_at = excluded.expires_at
              WHERE event_lease.expires_at <= excluded.since
                 OR event_lease.node_id = excluded.node_id"
        ))
        .bind(event_id)
        .bind(node_id)
        .bind(ttl(ttl_ms))
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected()
            == 1;
        let row = sqlx::query(LEASE_SQL)
            .bind(event_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        let lease = lease_row(&row)?;
        tx.commit().await.map_err(classify)?;
        Ok(if taken && lease.node_id == node_id {
            Taken::Mine(lease)
        } else {
            Taken::Elsewhere(lease)
        })
    }

    async fn renew_leases(
        &self,
        node_id: &str,
        held: &[(String, u64)],
        ttl_ms: u64,
    ) -> StoreResult<Vec<String>> {
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = begin_write(&self.writer).await?;
        let mut renewed = Vec::with_capacity(held.len());
        for (event_id, epoch) in held {
            let done = sqlx::query(concat!(
                "UPDATE event_lease SET expires_at = ",
                now_ms!(),
                " + ?4 WHERE event_id = ?1 AND node_id = ?2 AND epoch = ?3"
            ))
            .bind(event_id)
            .bind(node_id)
            .bind(i64::try_from(*epoch).unwrap_or(i64::MAX))
            .bind(ttl(ttl_ms))
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            if done.rows_affected() == 1 {
                renewed.push(event_id.clone());
            }
        }
        tx.commit().await.map_err(classify)?;
        Ok(renewed)
    }

    async fn release_lease(&self, event_id: &str, fence: &Fence) -> StoreResult<bool> {
        let mut tx = begin_write(&self.writer).await?;
        let released = sqlx::query(concat!(
            "UPDATE event_lease SET expires_at = ",
            now_ms!(),
            " WHERE event_id = ?1 AND node_id = ?2 AND epoch = ?3"
        ))
        .bind(event_id)
        .bind(&fence.node_id)
        .bind(i64::try_from(fence.epoch).unwrap_or(i64::MAX))
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(released.rows_affected() == 1)
    }

    async fn lease(&self, event_id: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(LEASE_SQL)
            .bind(event_id)
            .fetch_optional(&self.reader)
            .await
            .map_err(classify)?;
        row.as_ref().map(lease_row).transpose()
    }
}
