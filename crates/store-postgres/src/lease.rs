//! The event lease and the node registry on PostgreSQL (`boxoffice_store::lease`). A takeover
//! locks the lease row `FOR UPDATE`, so it waits for the groups in flight (each reads the row
//! `FOR KEY SHARE`, see `engine.rs`); a renewal changes the expiry alone (a NO KEY UPDATE
//! lock), so it never waits for them. Times are the store's clock (`boxoffice_now()`).

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_store::StoreResult;
use boxoffice_store::lease::{Fence, Lease, LeaseStore, NodeRecord, Taken};
use sqlx::Row;

use crate::{PgStore, classify};

const LEASE_SQL: &str = "SELECT l.event_id, l.node_id, l.epoch, l.since, l.expires_at,
            date_trunc('milliseconds', boxoffice_now()) AS read_at, n.advertise_url
       FROM event_lease l LEFT JOIN cluster_node n ON n.node_id = l.node_id
      WHERE l.event_id = $1";

fn lease_row(row: &sqlx::postgres::PgRow) -> StoreResult<Lease> {
    Ok(Lease {
        event_id: row.try_get("event_id").map_err(classify)?,
        node_id: row.try_get("node_id").map_err(classify)?,
        epoch: u64::try_from(row.try_get::<i64, _>("epoch").map_err(classify)?).unwrap_or(0),
        since: row.try_get("since").map_err(classify)?,
        expires_at: row.try_get("expires_at").map_err(classify)?,
        read_at: row.try_get("read_at").map_err(classify)?,
        owner_url: row.try_get("advertise_url").map_err(classify)?,
    })
}

fn ttl(ttl_ms: u64) -> i64 {
    i64::try_from(ttl_ms).unwrap_or(i64::MAX)
}

#[async_trait]
impl LeaseStore for PgStore {
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO cluster_node (node_id, advertise_url, started_at, heartbeat_at)
             VALUES ($1, $2, boxoffice_now(), boxoffice_now())
             ON CONFLICT (node_id) DO UPDATE
                SET advertise_url = EXCLUDED.advertise_url, heartbeat_at = EXCLUDED.heartbeat_at",
        )
        .bind(node_id)
        .bind(advertise_url)
        .execute(&self.pool)
        .await
        .map_err(classify)?;
        Ok(())
    }

    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>> {
        let rows: Vec<(String, String, OffsetDateTime)> = sqlx::query_as(
            "SELECT node_id, advertise_url, heartbeat_at FROM cluster_node
              ORDER BY heartbeat_at DESC, node_id LIMIT 1000",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        Ok(rows
            .into_iter()
            .map(|(node_id, advertise_url, heartbeat_at)| NodeRecord {
                node_id,
                advertise_url,
                heartbeat_at,
            })
            .collect())
    }

    async fn take_lease(&self, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken> {
        // Taken when free, expired, or this node's own (a restarted node fences its former
        // self). The row is locked `FOR UPDATE` first: that waits for the groups in flight
        // (each holds it `FOR KEY SHARE`), which an upsert's own lock would not (it changes no
        // key, so it takes NO KEY UPDATE, which does not conflict with KEY SHARE).
        let mut tx = self.pool.begin().await.map_err(classify)?;
        sqlx::query("SELECT 1 FROM event_lease WHERE event_id = $1 FOR UPDATE")
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let taken = sqlx::query(
            "INSERT INTO event_lease (event_id, node_id, epoch, since, expires_at)
             VALUES ($1, $2, 1, boxoffice_now(),
                     boxoffice_now() + make_interval(secs => $3::bigint / 1000.0))
             ON CONFLICT (event_id) DO UPDATE
                SET node_id = EXCLUDED.node_id, epoch = event_lease.epoch + 1,
                    since = boxoffice_now(),
                    expires_at = boxoffice_now() + make_interval(secs => $3::bigint / 1000.0)
              WHERE event_lease.expires_at <= boxoffice_now()
                 OR event_lease.node_id = EXCLUDED.node_id
             RETURNING event_id",
        )
        .bind(event_id)
        .bind(node_id)
        .bind(ttl(ttl_ms))
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        let lease = self.lease(event_id).await?.ok_or_else(|| {
            boxoffice_store::StoreError::Internal(format!("the lease of {event_id} vanished"))
        })?;
        Ok(if taken.is_some() && lease.node_id == node_id {
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
        let event_ids: Vec<&str> = held.iter().map(|(event_id, _)| event_id.as_str()).collect();
        let epochs: Vec<i64> = held
            .iter()
            .map(|(_, epoch)| i64::try_from(*epoch).unwrap_or(i64::MAX))
            .collect();
        sqlx::query_scalar(
            "UPDATE event_lease l
                SET expires_at = boxoffice_now() + make_interval(secs => $4::bigint / 1000.0)
               FROM unnest($2::text[], $3::bigint[]) AS h(event_id, epoch)
              WHERE l.event_id = h.event_id AND l.epoch = h.epoch AND l.node_id = $1
             RETURNING l.event_id",
        )
        .bind(node_id)
        .bind(&event_ids)
        .bind(&epochs)
        .bind(ttl(ttl_ms))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)
    }

    async fn release_lease(&self, event_id: &str, fence: &Fence) -> StoreResult<bool> {
        let released = sqlx::query(
            "UPDATE event_lease SET expires_at = boxoffice_now()
              WHERE event_id = $1 AND node_id = $2 AND epoch = $3",
        )
        .bind(event_id)
        .bind(&fence.node_id)
        .bind(i64::try_from(fence.epoch).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(classify)?;
        Ok(released.rows_affected() == 1)
    }

    async fn lease(&self, event_id: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(LEASE_SQL)
            .bind(event_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(classify)?;
        row.as_ref().map(lease_row).transpose()
    }
}
