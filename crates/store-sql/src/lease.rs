//! The event lease and the node registry (`boxoffice_store::lease`). Times are the store's
//! clock. A takeover waits for the groups in flight: on PostgreSQL it locks the lease row
//! `FOR UPDATE` first (each group reads the row `FOR KEY SHARE`, see `engine.rs`; an upsert's
//! own lock would not wait, as it changes no key and takes NO KEY UPDATE, which does not
//! conflict with KEY SHARE), and a renewal changes the expiry alone, so it never waits for
//! them; on SQLite write transactions are serialized (`BEGIN IMMEDIATE` on one writer
//! connection per process, the file's lock between processes), so a takeover and a group
//! never interleave.

use boxoffice_store::lease::{Fence, Lease, NodeRecord, Taken};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Dialect, Row, query};

fn lease_sql(d: Dialect) -> String {
    format!(
        "SELECT l.event_id, l.node_id, l.epoch, l.since, l.expires_at, {} AS read_at,
                n.advertise_url
           FROM event_lease l LEFT JOIN cluster_node n ON n.node_id = l.node_id
          WHERE l.event_id = $1",
        d.now_ms()
    )
}

fn lease_row(row: &Row) -> StoreResult<Lease> {
    Ok(Lease {
        event_id: row.get("event_id")?,
        node_id: row.get("node_id")?,
        epoch: u64::try_from(row.get::<i64, _>("epoch")?).unwrap_or(0),
        since: row.get("since")?,
        expires_at: row.get("expires_at")?,
        read_at: row.get("read_at")?,
        owner_url: row.get("advertise_url")?,
    })
}

async fn read_lease(conn: &mut Conn<'_>, event_id: &str) -> StoreResult<Option<Lease>> {
    let row = query(lease_sql(conn.dialect()))
        .bind(event_id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(lease_row).transpose()
}

pub async fn register_node(db: &Db, node_id: &str, advertise_url: &str) -> StoreResult<()> {
    let now = db.dialect().now();
    let mut tx = db.write().await?;
    query(format!(
        "INSERT INTO cluster_node (node_id, advertise_url, started_at, heartbeat_at)
         VALUES ($1, $2, {now}, {now})
         ON CONFLICT (node_id) DO UPDATE
            SET advertise_url = excluded.advertise_url, heartbeat_at = excluded.heartbeat_at"
    ))
    .bind(node_id)
    .bind(advertise_url)
    .execute(&mut tx.conn())
    .await?;
    tx.commit().await
}

pub async fn nodes(db: &Db) -> StoreResult<Vec<NodeRecord>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT node_id, advertise_url, heartbeat_at FROM cluster_node
          ORDER BY heartbeat_at DESC, node_id LIMIT 1000",
    )
    .fetch_all(&mut pooled.conn())
    .await?
    .into_iter()
    .map(|row| {
        Ok(NodeRecord {
            node_id: row.get(0)?,
            advertise_url: row.get(1)?,
            heartbeat_at: row.get(2)?,
        })
    })
    .collect()
}

/// Takes the lease when it is free, expired, or this node's own (a restarted node fences its
/// former self).
pub async fn take(db: &Db, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    if d == Dialect::Postgres {
        query("SELECT 1 FROM event_lease WHERE event_id = $1 FOR UPDATE")
            .bind(event_id)
            .execute(&mut tx.conn())
            .await?;
    }
    let taken = query(format!(
        "INSERT INTO event_lease (event_id, node_id, epoch, since, expires_at, server_generation)
         VALUES ($1, $2, 1, {now}, {until}, {generation})
         ON CONFLICT (event_id) DO UPDATE
            SET node_id = excluded.node_id, epoch = event_lease.epoch + 1,
                since = excluded.since, expires_at = excluded.expires_at,
                server_generation = excluded.server_generation
          WHERE event_lease.expires_at <= excluded.since
             OR event_lease.node_id = excluded.node_id",
        now = d.now(),
        until = d.now_plus_ms("$3"),
        generation = d.server_generation(),
    ))
    .bind(event_id)
    .bind(node_id)
    .bind(ttl_ms)
    .execute(&mut tx.conn())
    .await?
        == 1;
    let lease = read_lease(&mut tx.conn(), event_id)
        .await?
        .ok_or_else(|| StoreError::Internal(format!("the lease of {event_id} vanished")))?;
    tx.commit().await?;
    Ok(if taken && lease.node_id == node_id {
        Taken::Mine(lease)
    } else {
        Taken::Elsewhere(lease)
    })
}

/// Extends the leases this node holds at the epochs it holds them; the events renewed. A
/// lease taken over since (another epoch or node), or taken on another server generation
/// (before a failover), is left alone: its writer stops and the next one takes it again.
pub async fn renew(
    db: &Db,
    node_id: &str,
    held: &[(String, u64)],
    ttl_ms: u64,
) -> StoreResult<Vec<String>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let d = db.dialect();
    let held_pairs = match d {
        Dialect::Postgres => "SELECT * FROM unnest($2::text[], $3::bigint[])",
        Dialect::Sqlite => {
            "SELECT e.value, p.value FROM json_each($2) e JOIN json_each($3) p ON p.key = e.key"
        }
    };
    let (event_ids, epochs): (Vec<String>, Vec<i64>) = held
        .iter()
        .map(|(event_id, epoch)| (event_id.clone(), i64::try_from(*epoch).unwrap_or(i64::MAX)))
        .unzip();
    let mut tx = db.write().await?;
    let renewed = query(format!(
        "UPDATE event_lease SET expires_at = {until}
          WHERE node_id = $1 AND (event_id, epoch) IN ({held_pairs})
            AND server_generation = {generation}
         RETURNING event_id",
        until = d.now_plus_ms("$4"),
        generation = d.server_generation(),
    ))
    .bind(node_id)
    .bind(event_ids)
    .bind(epochs)
    .bind(ttl_ms)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<Vec<String>>>()?;
    tx.commit().await?;
    Ok(renewed)
}

pub async fn release(db: &Db, event_id: &str, fence: &Fence) -> StoreResult<bool> {
    let mut tx = db.write().await?;
    let released = query(format!(
        "UPDATE event_lease SET expires_at = {}
          WHERE event_id = $1 AND node_id = $2 AND epoch = $3",
        db.dialect().now()
    ))
    .bind(event_id)
    .bind(&fence.node_id)
    .bind(fence.epoch)
    .execute(&mut tx.conn())
    .await?;
    tx.commit().await?;
    Ok(released == 1)
}

pub async fn lease(db: &Db, event_id: &str) -> StoreResult<Option<Lease>> {
    let mut pooled = db.read().await?;
    read_lease(&mut pooled.conn(), event_id).await
}
