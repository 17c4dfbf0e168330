//! Webhook endpoints and deliveries on SQLite (see `boxoffice_store::webhook`). Mirrors the
//! PostgreSQL backend statement for statement: every write runs on the single writer
//! connection (`BEGIN IMMEDIATE` where it takes more than one statement), so a claim needs no
//! `SKIP LOCKED`. Event types are a JSON array, read with `json_each`.

use boxoffice_store::webhook::{
    Attempt, DeliveryStatus, DueDelivery, ENDPOINTS_MAX, EndpointCreated, NewEndpoint,
    WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookStore, bounded_error,
};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::sqlite::SqliteRow;

use crate::{SqliteStore, begin_write, classify, column, from_ms, json_list, to_ms, to_u32};

const ENDPOINT_COLUMNS: &str = "endpoint_id, url, event_types, secret, enabled, created_at";

/// A delivery's columns, unqualified (for `RETURNING`).
const DELIVERY_COLUMNS: &str = "delivery_id, endpoint_id, event_id, event_type, payload,
     event_created_at, status, n_attempts, next_attempt_at, last_status_code,
     last_error, delivered_at, created_at";

/// A delivery's columns from `webhook_delivery d` (joined with its endpoint).
const DELIVERY_COLUMNS_OF_D: &str =
    "d.delivery_id, d.endpoint_id, d.event_id, d.event_type, d.payload,
     d.event_created_at, d.status, d.n_attempts, d.next_attempt_at, d.last_status_code,
     d.last_error, d.delivered_at, d.created_at";

fn endpoint_from_row(row: &SqliteRow) -> StoreResult<WebhookEndpoint> {
    let event_types: String = column(row, "event_types")?;
    Ok(WebhookEndpoint {
        endpoint_id: column(row, "endpoint_id")?,
        url: column(row, "url")?,
        event_types: serde_json::from_str(&event_types)
            .map_err(|e| StoreError::Internal(format!("webhook event_types: {e}")))?,
        secret: column(row, "secret")?,
        enabled: column::<i64>(row, "enabled")? != 0,
        created_at: from_ms(column(row, "created_at")?)?,
    })
}

fn delivery_from_row(row: &SqliteRow) -> StoreResult<WebhookDelivery> {
    let status: String = column(row, "status")?;
    Ok(WebhookDelivery {
        delivery_id: column(row, "delivery_id")?,
        endpoint_id: column(row, "endpoint_id")?,
        event_id: column(row, "event_id")?,
        event_type: column(row, "event_type")?,
        payload: column(row, "payload")?,
        event_created_at: from_ms(column(row, "event_created_at")?)?,
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("webhook delivery status {status:?}")))?,
        n_attempts: to_u32(column(row, "n_attempts")?),
        next_attempt_at: from_ms(column(row, "next_attempt_at")?)?,
        last_status_code: column::<Option<i64>>(row, "last_status_code")?
            .and_then(|code| u16::try_from(code).ok()),
        last_error: column(row, "last_error")?,
        delivered_at: column::<Option<i64>>(row, "delivered_at")?
            .map(from_ms)
            .transpose()?,
        created_at: from_ms(column(row, "created_at")?)?,
    })
}

#[async_trait::async_trait]
impl WebhookStore for SqliteStore {
    async fn create_webhook_endpoint(&self, new: &NewEndpoint) -> StoreResult<EndpointCreated> {
        let mut tx = begin_write(&self.writer).await?;
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS}, request_digest FROM webhook_endpoint
              WHERE created_by = ?1 AND idempotency_key = ?2"
        );
        if let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&new.created_by)
            .bind(&new.idempotency_key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
        {
            let digest: String = column(&row, "request_digest")?;
            if digest != new.request_digest {
                return Ok(EndpointCreated::KeyReused);
            }
            return Ok(EndpointCreated::Replayed(endpoint_from_row(&row)?));
        }
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_endpoint")
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        if count >= i64::from(ENDPOINTS_MAX) {
            return Ok(EndpointCreated::TooMany);
        }
        let sql = format!(
            "INSERT INTO webhook_endpoint (endpoint_id, url, event_types, secret, enabled, created_by,
                                           idempotency_key, request_digest, created_at)
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, {})
             RETURNING {ENDPOINT_COLUMNS}",
            now_ms!()
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&new.endpoint_id)
            .bind(&new.url)
            .bind(json_list(&new.event_types))
            .bind(&new.secret)
            .bind(&new.created_by)
            .bind(&new.idempotency_key)
            .bind(&new.request_digest)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        let created = endpoint_from_row(&row)?;
        tx.commit().await.map_err(classify)?;
        Ok(EndpointCreated::Created(created))
    }

    async fn get_webhook_endpoint(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint WHERE endpoint_id = ?1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .fetch_optional(&self.reader)
            .await
            .map_err(classify)?
            .map(|row| endpoint_from_row(&row))
            .transpose()
    }

    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<WebhookEndpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint
              ORDER BY created_at, endpoint_id LIMIT ?1"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(ENDPOINTS_MAX))
            .fetch_all(&self.reader)
            .await
            .map_err(classify)?
            .iter()
            .map(endpoint_from_row)
            .collect()
    }

    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        let sql = format!(
            "UPDATE webhook_endpoint SET enabled = ?2 WHERE endpoint_id = ?1
             RETURNING {ENDPOINT_COLUMNS}"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(i64::from(enabled))
            .fetch_optional(&self.writer)
            .await
            .map_err(classify)?
            .map(|row| endpoint_from_row(&row))
            .transpose()
    }

    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool> {
        let mut tx = begin_write(&self.writer).await?;
        sqlx::query("DELETE FROM webhook_delivery WHERE endpoint_id = ?1")
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let deleted = sqlx::query("DELETE FROM webhook_endpoint WHERE endpoint_id = ?1")
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
        tx.commit().await.map_err(classify)?;
        Ok(deleted > 0)
    }

    async fn fan_out_webhooks(&self, events: &[WebhookEvent]) -> StoreResult<u64> {
        if events.is_empty() {
            return Ok(0);
        }
        // One statement: the events as a JSON array of [id, type, payload, created_at] joined
        // with the endpoints that chose the type; the unique (endpoint, event) key skips the
        // pairs fanned out before.
        let rows: Vec<serde_json::Value> = events
            .iter()
            .map(|event| {
                serde_json::json!([
                    event.event_id,
                    event.event_type,
                    event.payload,
                    to_ms(event.created_at),
                ])
            })
            .collect();
        let sql = format!(
            "INSERT INTO webhook_delivery (endpoint_id, event_id, event_type, payload, event_created_at,
                                           status, n_attempts, next_attempt_at, created_at)
             SELECT e.endpoint_id, json_extract(m.value, '$[0]'), json_extract(m.value, '$[1]'),
                    json_extract(m.value, '$[2]'), json_extract(m.value, '$[3]'),
                    'PENDING', 0, {now}, {now}
               FROM json_each(?1) AS m, webhook_endpoint e
              WHERE e.enabled = 1
                AND EXISTS (SELECT 1 FROM json_each(e.event_types) AS t
                             WHERE t.value = json_extract(m.value, '$[1]'))
              ORDER BY m.key, e.endpoint_id
             ON CONFLICT (endpoint_id, event_id) DO NOTHING",
            now = now_ms!()
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(serde_json::Value::Array(rows).to_string())
            .execute(&self.writer)
            .await
            .map_err(classify)?;
        Ok(done.rows_affected())
    }

    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<DueDelivery>> {
        let mut tx = begin_write(&self.writer).await?;
        let sql = format!(
            "UPDATE webhook_delivery
                SET next_attempt_at = {now} + CAST(?2 * 1000 AS INTEGER)
              WHERE delivery_id IN (
                    SELECT x.delivery_id FROM webhook_delivery x
                      JOIN webhook_endpoint e ON e.endpoint_id = x.endpoint_id
                     WHERE x.status = 'PENDING' AND x.next_attempt_at <= {now} AND e.enabled = 1
                     ORDER BY x.next_attempt_at, x.delivery_id LIMIT ?1)
             RETURNING delivery_id",
            now = now_ms!()
        );
        let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .bind(lease_s)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS_OF_D}, e.url, e.secret
               FROM webhook_delivery d JOIN webhook_endpoint e ON e.endpoint_id = d.endpoint_id
              WHERE d.delivery_id IN (SELECT value FROM json_each(?1))
              ORDER BY d.delivery_id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into()))
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
        let due = rows
            .iter()
            .map(|row| {
                Ok(DueDelivery {
                    delivery: delivery_from_row(row)?,
                    url: column(row, "url")?,
                    secret: column(row, "secret")?,
                })
            })
            .collect::<StoreResult<Vec<DueDelivery>>>()?;
        tx.commit().await.map_err(classify)?;
        Ok(due)
    }

    async fn record_webhook_attempt(&self, delivery_id: i64, attempt: &Attempt) -> StoreResult<()> {
        let query = match attempt {
            Attempt::Delivered { status_code } => sqlx::query(concat!(
                "UPDATE webhook_delivery
                    SET status = 'DELIVERED', n_attempts = n_attempts + 1, last_status_code = ?2,
                        last_error = NULL, delivered_at = ",
                now_ms!(),
                " WHERE delivery_id = ?1 AND status = 'PENDING'"
            ))
            .bind(delivery_id)
            .bind(i64::from(*status_code)),
            Attempt::Failed {
                status_code,
                error,
                retry_in_s: Some(delay_s),
            } => sqlx::query(concat!(
                "UPDATE webhook_delivery
                    SET n_attempts = n_attempts + 1, last_status_code = ?2, last_error = ?3,
                        next_attempt_at = ",
                now_ms!(),
                " + CAST(?4 * 1000 AS INTEGER)
                  WHERE delivery_id = ?1 AND status = 'PENDING'"
            ))
            .bind(delivery_id)
            .bind(status_code.map(i64::from))
            .bind(bounded_error(error))
            .bind(*delay_s),
            Attempt::Failed {
                status_code,
                error,
                retry_in_s: None,
            } => sqlx::query(
                "UPDATE webhook_delivery
                    SET status = 'FAILED', n_attempts = n_attempts + 1, last_status_code = ?2,
                        last_error = ?3
                  WHERE delivery_id = ?1 AND status = 'PENDING'",
            )
            .bind(delivery_id)
            .bind(status_code.map(i64::from))
            .bind(bounded_error(error)),
        };
        query.execute(&self.writer).await.map_err(classify)?;
        Ok(())
    }

    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_delivery
              WHERE endpoint_id = ?1 AND (?2 IS NULL OR delivery_id < ?2)
              ORDER BY delivery_id DESC LIMIT ?3"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await
            .map_err(classify)?
            .iter()
            .map(delivery_from_row)
            .collect()
    }

    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: i64,
    ) -> StoreResult<Option<WebhookDelivery>> {
        let sql = format!(
            "UPDATE webhook_delivery
                SET status = 'PENDING', n_attempts = 0, next_attempt_at = {}
              WHERE delivery_id = ?1 AND endpoint_id = ?2
             RETURNING {DELIVERY_COLUMNS}",
            now_ms!()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(delivery_id)
            .bind(endpoint_id)
            .fetch_optional(&self.writer)
            .await
            .map_err(classify)?
            .map(|row| delivery_from_row(&row))
            .transpose()
    }
}
