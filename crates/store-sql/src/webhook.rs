//! Webhook endpoints and deliveries (see `boxoffice_store::webhook`). The fan-out is one
//! `INSERT ... SELECT` over the round's events joined with the endpoints, skipping the pairs
//! that have a delivery (`ON CONFLICT DO NOTHING` on the unique (endpoint, event) key). A
//! claim moves due rows' next attempt past the lease: on PostgreSQL it takes them
//! `FOR UPDATE SKIP LOCKED`, so two nodes' workers never send one delivery at once; on SQLite
//! the one writer does that by itself.

use boxoffice_store::webhook::{
    Attempt, DeliveryStatus, DueDelivery, ENDPOINTS_MAX, EndpointCreated, NewEndpoint,
    WebhookDelivery, WebhookEndpoint, WebhookEvent, bounded_error,
};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Arg, Db, Dialect, Row, query, to_ms};

const ENDPOINT_COLUMNS: &str = "endpoint_id, url, event_types, secret, enabled, created_at";

/// A delivery's columns, unqualified.
const DELIVERY_COLUMNS: &str = "delivery_id, endpoint_id, event_id, event_type, payload,
     event_created_at, status, n_attempts, next_attempt_at, last_status_code,
     last_error, delivered_at, created_at";

/// A delivery's columns from `webhook_delivery d` (joined with its endpoint).
const DELIVERY_COLUMNS_OF_D: &str = "d.delivery_id, d.endpoint_id, d.event_id, d.event_type,
     d.payload, d.event_created_at, d.status, d.n_attempts, d.next_attempt_at,
     d.last_status_code, d.last_error, d.delivered_at, d.created_at";

fn endpoint_from_row(row: &Row) -> StoreResult<WebhookEndpoint> {
    Ok(WebhookEndpoint {
        endpoint_id: row.get("endpoint_id")?,
        url: row.get("url")?,
        event_types: row.get("event_types")?,
        secret: row.get("secret")?,
        enabled: row.get("enabled")?,
        created_at: row.get("created_at")?,
    })
}

fn delivery_from_row(row: &Row) -> StoreResult<WebhookDelivery> {
    let status: String = row.get("status")?;
    Ok(WebhookDelivery {
        delivery_id: row.get("delivery_id")?,
        endpoint_id: row.get("endpoint_id")?,
        event_id: row.get("event_id")?,
        event_type: row.get("event_type")?,
        payload: row.get("payload")?,
        event_created_at: row.get("event_created_at")?,
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("webhook delivery status {status:?}")))?,
        n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")?).unwrap_or(0),
        next_attempt_at: row.get("next_attempt_at")?,
        last_status_code: row
            .get::<Option<i32>, _>("last_status_code")?
            .and_then(|code| u16::try_from(code).ok()),
        last_error: row.get("last_error")?,
        delivered_at: row.get("delivered_at")?,
        created_at: row.get("created_at")?,
    })
}

pub async fn create_endpoint(db: &Db, new: &NewEndpoint) -> StoreResult<EndpointCreated> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    if d == Dialect::Postgres {
        // One creation at a time, so the count below holds until the insert commits.
        query("SELECT pg_advisory_xact_lock(hashtext('webhook_endpoint'))")
            .execute(&mut tx.conn())
            .await?;
    }
    let prior = query(format!(
        "SELECT {ENDPOINT_COLUMNS}, request_digest FROM webhook_endpoint
          WHERE created_by = $1 AND idempotency_key = $2"
    ))
    .bind(&new.created_by)
    .bind(&new.idempotency_key)
    .fetch_optional(&mut tx.conn())
    .await?;
    if let Some(row) = prior {
        if row.get::<String, _>("request_digest")? != new.request_digest {
            return Ok(EndpointCreated::KeyReused);
        }
        return Ok(EndpointCreated::Replayed(endpoint_from_row(&row)?));
    }
    let count: i64 = query("SELECT count(*) FROM webhook_endpoint")
        .fetch_one(&mut tx.conn())
        .await?
        .get(0)?;
    if count >= i64::from(ENDPOINTS_MAX) {
        return Ok(EndpointCreated::TooMany);
    }
    let row = query(format!(
        "INSERT INTO webhook_endpoint (endpoint_id, url, event_types, secret, enabled, created_by,
                                       idempotency_key, request_digest, created_at)
         VALUES ($1, $2, $3, $4, true, $5, $6, $7, {now})
         RETURNING {ENDPOINT_COLUMNS}",
        now = d.now_ms()
    ))
    .bind(&new.endpoint_id)
    .bind(&new.url)
    .bind(new.event_types.clone())
    .bind(&new.secret)
    .bind(&new.created_by)
    .bind(&new.idempotency_key)
    .bind(&new.request_digest)
    .fetch_one(&mut tx.conn())
    .await?;
    let created = endpoint_from_row(&row)?;
    tx.commit().await?;
    Ok(EndpointCreated::Created(created))
}

pub async fn endpoint(db: &Db, endpoint_id: &str) -> StoreResult<Option<WebhookEndpoint>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint WHERE endpoint_id = $1"
    ))
    .bind(endpoint_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| endpoint_from_row(&row))
    .transpose()
}

pub async fn endpoints(db: &Db) -> StoreResult<Vec<WebhookEndpoint>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint ORDER BY created_at, endpoint_id LIMIT $1"
    ))
    .bind(ENDPOINTS_MAX)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(endpoint_from_row)
    .collect()
}

pub async fn set_enabled(
    db: &Db,
    endpoint_id: &str,
    enabled: bool,
) -> StoreResult<Option<WebhookEndpoint>> {
    let mut pooled = db.write_one().await?;
    query(format!(
        "UPDATE webhook_endpoint SET enabled = $2 WHERE endpoint_id = $1
         RETURNING {ENDPOINT_COLUMNS}"
    ))
    .bind(endpoint_id)
    .bind(enabled)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| endpoint_from_row(&row))
    .transpose()
}

/// Deletes the endpoint and its deliveries; `false` if there was none.
pub async fn delete_endpoint(db: &Db, endpoint_id: &str) -> StoreResult<bool> {
    // The endpoint first: its row lock keeps a fan-out (whose foreign key check share-locks
    // it) from adding a delivery between the two deletes.
    let mut tx = db.write().await?;
    let found = query(format!(
        "SELECT endpoint_id FROM webhook_endpoint WHERE endpoint_id = $1 {}",
        db.dialect().lock("FOR UPDATE")
    ))
    .bind(endpoint_id)
    .fetch_optional(&mut tx.conn())
    .await?;
    if found.is_none() {
        return Ok(false);
    }
    for sql in [
        "DELETE FROM webhook_delivery WHERE endpoint_id = $1",
        "DELETE FROM webhook_endpoint WHERE endpoint_id = $1",
    ] {
        query(sql).bind(endpoint_id).execute(&mut tx.conn()).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// One delivery per event and enabled endpoint that chose its type; the deliveries made.
pub async fn fan_out(db: &Db, events: &[WebhookEvent]) -> StoreResult<u64> {
    if events.is_empty() {
        return Ok(0);
    }
    let d = db.dialect();
    // The round's events as rows `m(event_id, event_type, payload, created_at)`, and whether
    // an endpoint `e` chose the type: arrays on PostgreSQL, one JSON array of rows on SQLite.
    let (events_sql, chosen) = match d {
        Dialect::Postgres => (
            "unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[])
                AS m(event_id, event_type, payload, created_at)",
            "m.event_type = ANY (e.event_types)",
        ),
        Dialect::Sqlite => (
            "(SELECT j.value->>0 AS event_id, j.value->>1 AS event_type,
                     j.value->>2 AS payload, j.value->>3 AS created_at
                FROM json_each($1) AS j) AS m",
            "EXISTS (SELECT 1 FROM json_each(e.event_types) AS t WHERE t.value = m.event_type)",
        ),
    };
    let statement = query(format!(
        "INSERT INTO webhook_delivery (endpoint_id, event_id, event_type, payload,
                                       event_created_at, status, n_attempts,
                                       next_attempt_at, created_at)
         SELECT e.endpoint_id, m.event_id, m.event_type, m.payload, m.created_at,
                'PENDING', 0, {now}, {now}
           FROM {events_sql} JOIN webhook_endpoint e ON e.enabled AND {chosen}
          WHERE true -- (an upsert after a SELECT with no WHERE reads as a join's ON to SQLite)
          ORDER BY m.event_id, e.endpoint_id
         ON CONFLICT (endpoint_id, event_id) DO NOTHING",
        now = d.now_ms(),
    ));
    let statement = match d {
        Dialect::Postgres => statement
            .bind(events.iter().map(|e| e.event_id).collect::<Vec<_>>())
            .bind(
                events
                    .iter()
                    .map(|e| e.event_type.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>())
            .bind(Arg::Times(events.iter().map(|e| e.created_at).collect())),
        Dialect::Sqlite => statement.bind(serde_json::Value::Array(
            events
                .iter()
                .map(|e| {
                    serde_json::json!([e.event_id, e.event_type, e.payload, to_ms(e.created_at)])
                })
                .collect(),
        )),
    };
    let mut pooled = db.write_one().await?;
    statement.execute(&mut pooled.conn()).await
}

/// Takes up to `limit` due deliveries of enabled endpoints for `lease_s` seconds (their next
/// attempt moved past it), oldest first.
pub async fn claim(db: &Db, limit: u32, lease_s: f64) -> StoreResult<Vec<DueDelivery>> {
    let d = db.dialect();
    let skip_locked = match d {
        Dialect::Postgres => "FOR UPDATE OF x SKIP LOCKED",
        Dialect::Sqlite => "",
    };
    let mut tx = db.write().await?;
    let ids = query(format!(
        "UPDATE webhook_delivery SET next_attempt_at = {until}
          WHERE delivery_id IN (
                SELECT x.delivery_id FROM webhook_delivery x
                  JOIN webhook_endpoint e ON e.endpoint_id = x.endpoint_id
                 WHERE x.status = 'PENDING' AND x.next_attempt_at <= {now} AND e.enabled
                 ORDER BY x.next_attempt_at, x.delivery_id LIMIT $1 {skip_locked})
         RETURNING delivery_id",
        until = d.now_plus_secs("$2"),
        now = d.now_ms(),
    ))
    .bind(limit)
    .bind(lease_s)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<Vec<i64>>>()?;
    if ids.is_empty() {
        tx.commit().await?;
        return Ok(Vec::new());
    }
    let due = query(format!(
        "SELECT {DELIVERY_COLUMNS_OF_D}, e.url, e.secret
           FROM webhook_delivery d JOIN webhook_endpoint e ON e.endpoint_id = d.endpoint_id
          WHERE d.delivery_id {ids}
          ORDER BY d.delivery_id",
        ids = d.in_list("$1"),
    ))
    .bind(ids)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| {
        Ok(DueDelivery {
            delivery: delivery_from_row(row)?,
            url: row.get("url")?,
            secret: row.get("secret")?,
        })
    })
    .collect::<StoreResult<Vec<DueDelivery>>>()?;
    tx.commit().await?;
    Ok(due)
}

/// Records an attempt of a pending delivery (a delivery no longer pending is left alone).
pub async fn record_attempt(db: &Db, delivery_id: i64, attempt: &Attempt) -> StoreResult<()> {
    let d = db.dialect();
    let statement = match attempt {
        Attempt::Delivered { status_code } => query(format!(
            "UPDATE webhook_delivery
                SET status = 'DELIVERED', n_attempts = n_attempts + 1, last_status_code = $2,
                    last_error = NULL, delivered_at = {now}
              WHERE delivery_id = $1 AND status = 'PENDING'",
            now = d.now_ms()
        ))
        .bind(delivery_id)
        .bind(i32::from(*status_code)),
        Attempt::Failed {
            status_code,
            error,
            retry_in_s: Some(delay_s),
        } => query(format!(
            "UPDATE webhook_delivery
                SET n_attempts = n_attempts + 1, last_status_code = $2, last_error = $3,
                    next_attempt_at = {until}
              WHERE delivery_id = $1 AND status = 'PENDING'",
            until = d.now_plus_secs("$4")
        ))
        .bind(delivery_id)
        .bind(Arg::OptInt4(status_code.map(i32::from)))
        .bind(bounded_error(error))
        .bind(*delay_s),
        Attempt::Failed {
            status_code,
            error,
            retry_in_s: None,
        } => query(
            "UPDATE webhook_delivery
                SET status = 'FAILED', n_attempts = n_attempts + 1, last_status_code = $2,
                    last_error = $3
              WHERE delivery_id = $1 AND status = 'PENDING'",
        )
        .bind(delivery_id)
        .bind(Arg::OptInt4(status_code.map(i32::from)))
        .bind(bounded_error(error)),
    };
    let mut pooled = db.write_one().await?;
    statement.execute(&mut pooled.conn()).await?;
    Ok(())
}

/// An endpoint's deliveries, newest first, before `before` when given.
pub async fn deliveries(
    db: &Db,
    endpoint_id: &str,
    before: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<WebhookDelivery>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {DELIVERY_COLUMNS} FROM webhook_delivery
          WHERE endpoint_id = $1 AND ($2 IS NULL OR delivery_id < $2)
          ORDER BY delivery_id DESC LIMIT $3"
    ))
    .bind(endpoint_id)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(delivery_from_row)
    .collect()
}

/// Sends a delivery again from its first attempt.
pub async fn replay(
    db: &Db,
    endpoint_id: &str,
    delivery_id: i64,
) -> StoreResult<Option<WebhookDelivery>> {
    let mut pooled = db.write_one().await?;
    query(format!(
        "UPDATE webhook_delivery
            SET status = 'PENDING', n_attempts = 0, next_attempt_at = {now}
          WHERE delivery_id = $1 AND endpoint_id = $2
         RETURNING {DELIVERY_COLUMNS}",
        now = db.dialect().now_ms()
    ))
    .bind(delivery_id)
    .bind(endpoint_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| delivery_from_row(&row))
    .transpose()
}
