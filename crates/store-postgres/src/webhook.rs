//! Webhook endpoints and deliveries on PostgreSQL (see `boxoffice_store::webhook`). The fan-out
//! is one `INSERT ... SELECT` over the round's events joined with the endpoints, skipping the
//! pairs that have a delivery (`ON CONFLICT DO NOTHING` on the unique (endpoint, event) key);
//! a claim takes due rows `FOR UPDATE SKIP LOCKED`, so two nodes' workers never send one
//! delivery at once.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::webhook::{
    Attempt, DeliveryStatus, DueDelivery, ENDPOINTS_MAX, EndpointCreated, NewEndpoint,
    WebhookDelivery, WebhookEndpoint, WebhookEvent, WebhookStore, bounded_error,
};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::{PgStore, classify};

/// The store's clock, truncated to milliseconds like every stored time.
macro_rules! now {
    () => {
        "date_trunc('milliseconds', boxoffice_now())"
    };
}

const ENDPOINT_COLUMNS: &str = "endpoint_id, url, event_types, secret, enabled, created_at";

/// A delivery's columns, unqualified.
const DELIVERY_COLUMNS: &str = "delivery_id, endpoint_id, event_id, event_type, payload,
     event_created_at, status, n_attempts, next_attempt_at, last_status_code,
     last_error, delivered_at, created_at";

/// A delivery's columns from `webhook_delivery d` (joined with its endpoint).
const DELIVERY_COLUMNS_OF_D: &str = "d.delivery_id, d.endpoint_id, d.event_id, d.event_type,
     d.payload, d.event_created_at, d.status, d.n_attempts, d.next_attempt_at,
     d.last_status_code, d.last_error, d.delivered_at, d.created_at";

fn endpoint_from_row(row: &PgRow) -> WebhookEndpoint {
    WebhookEndpoint {
        endpoint_id: row.get("endpoint_id"),
        url: row.get("url"),
        event_types: row.get("event_types"),
        secret: row.get("secret"),
        enabled: row.get("enabled"),
        created_at: row.get("created_at"),
    }
}

fn delivery_from_row(row: &PgRow) -> StoreResult<WebhookDelivery> {
    let status: String = row.get("status");
    Ok(WebhookDelivery {
        delivery_id: row.get("delivery_id"),
        endpoint_id: row.get("endpoint_id"),
        event_id: row.get("event_id"),
        event_type: row.get("event_type"),
        payload: row.get("payload"),
        event_created_at: row.get("event_created_at"),
        status: DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("webhook delivery status {status:?}")))?,
        n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")).unwrap_or(0),
        next_attempt_at: row.get("next_attempt_at"),
        last_status_code: row
            .get::<Option<i32>, _>("last_status_code")
            .and_then(|code| u16::try_from(code).ok()),
        last_error: row.get("last_error"),
        delivered_at: row.get("delivered_at"),
        created_at: row.get("created_at"),
    })
}

#[async_trait::async_trait]
impl WebhookStore for PgStore {
    async fn create_webhook_endpoint(&self, new: &NewEndpoint) -> StoreResult<EndpointCreated> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        // One creation at a time, so the count below holds until the insert commits.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('webhook_endpoint'))")
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS}, request_digest FROM webhook_endpoint
              WHERE created_by = $1 AND idempotency_key = $2"
        );
        if let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&new.created_by)
            .bind(&new.idempotency_key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
        {
            let digest: String = row.get("request_digest");
            if digest != new.request_digest {
                return Ok(EndpointCreated::KeyReused);
            }
            return Ok(EndpointCreated::Replayed(endpoint_from_row(&row)));
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
             VALUES ($1, $2, $3, $4, true, $5, $6, $7, {})
             RETURNING {ENDPOINT_COLUMNS}",
            now!()
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&new.endpoint_id)
            .bind(&new.url)
            .bind(&new.event_types)
            .bind(&new.secret)
            .bind(&new.created_by)
            .bind(&new.idempotency_key)
            .bind(&new.request_digest)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        let created = endpoint_from_row(&row);
        tx.commit().await.map_err(classify)?;
        Ok(EndpointCreated::Created(created))
    }

    async fn get_webhook_endpoint(
        &self,
        endpoint_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint WHERE endpoint_id = $1");
        Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .fetch_optional(self.pool())
            .await
            .map_err(classify)?
            .map(|row| endpoint_from_row(&row)))
    }

    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<WebhookEndpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoint
              ORDER BY created_at, endpoint_id LIMIT $1"
        );
        Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(ENDPOINTS_MAX))
            .fetch_all(self.pool())
            .await
            .map_err(classify)?
            .iter()
            .map(endpoint_from_row)
            .collect())
    }

    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        let sql = format!(
            "UPDATE webhook_endpoint SET enabled = $2 WHERE endpoint_id = $1
             RETURNING {ENDPOINT_COLUMNS}"
        );
        Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(enabled)
            .fetch_optional(self.pool())
            .await
            .map_err(classify)?
            .map(|row| endpoint_from_row(&row)))
    }

    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool> {
        // The endpoint first: its row lock keeps a fan-out (whose foreign key check
        // share-locks it) from adding a delivery between the two deletes.
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let found: Option<String> = sqlx::query_scalar(
            "SELECT endpoint_id FROM webhook_endpoint WHERE endpoint_id = $1 FOR UPDATE",
        )
        .bind(endpoint_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        if found.is_none() {
            return Ok(false);
        }
        sqlx::query("DELETE FROM webhook_delivery WHERE endpoint_id = $1")
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        sqlx::query("DELETE FROM webhook_endpoint WHERE endpoint_id = $1")
            .bind(endpoint_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(true)
    }

    async fn fan_out_webhooks(&self, events: &[WebhookEvent]) -> StoreResult<u64> {
        if events.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = events.iter().map(|event| event.event_id).collect();
        let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        let payloads: Vec<&str> = events.iter().map(|e| e.payload.as_str()).collect();
        let created: Vec<OffsetDateTime> = events.iter().map(|e| e.created_at).collect();
        let sql = format!(
            "INSERT INTO webhook_delivery (endpoint_id, event_id, event_type, payload, event_created_at,
                                           status, n_attempts, next_attempt_at, created_at)
             SELECT e.endpoint_id, m.event_id, m.event_type, m.payload, m.created_at,
                    'PENDING', 0, {now}, {now}
               FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[])
                    AS m(event_id, event_type, payload, created_at)
               JOIN webhook_endpoint e ON e.enabled AND m.event_type = ANY (e.event_types)
              ORDER BY m.event_id, e.endpoint_id
             ON CONFLICT (endpoint_id, event_id) DO NOTHING",
            now = now!()
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&ids)
            .bind(&types)
            .bind(&payloads)
            .bind(&created)
            .execute(self.pool())
            .await
            .map_err(classify)?;
        Ok(done.rows_affected())
    }

    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<DueDelivery>> {
        let sql = format!(
            "WITH claimed AS (
                SELECT x.delivery_id FROM webhook_delivery x
                  JOIN webhook_endpoint e ON e.endpoint_id = x.endpoint_id
                 WHERE x.status = 'PENDING' AND x.next_attempt_at <= {now} AND e.enabled
                 ORDER BY x.next_attempt_at, x.delivery_id LIMIT $1
                 FOR UPDATE OF x SKIP LOCKED
             )
             UPDATE webhook_delivery d SET next_attempt_at = {now} + make_interval(secs => $2)
               FROM claimed, webhook_endpoint e
              WHERE d.delivery_id = claimed.delivery_id AND e.endpoint_id = d.endpoint_id
             RETURNING {DELIVERY_COLUMNS_OF_D}, e.url, e.secret",
            now = now!()
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .bind(lease_s)
            .fetch_all(self.pool())
            .await
            .map_err(classify)?;
        let mut due = rows
            .iter()
            .map(|row| {
                Ok(DueDelivery {
                    delivery: delivery_from_row(row)?,
                    url: row.get("url"),
                    secret: row.get("secret"),
                })
            })
            .collect::<StoreResult<Vec<DueDelivery>>>()?;
        due.sort_by_key(|due| due.delivery.delivery_id);
        Ok(due)
    }

    async fn record_webhook_attempt(&self, delivery_id: i64, attempt: &Attempt) -> StoreResult<()> {
        let query = match attempt {
            Attempt::Delivered { status_code } => sqlx::query(concat!(
                "UPDATE webhook_delivery
                    SET status = 'DELIVERED', n_attempts = n_attempts + 1, last_status_code = $2,
                        last_error = NULL, delivered_at = ",
                now!(),
                " WHERE delivery_id = $1 AND status = 'PENDING'"
            ))
            .bind(delivery_id)
            .bind(i32::from(*status_code)),
            Attempt::Failed {
                status_code,
                error,
                retry_in_s: Some(delay_s),
            } => sqlx::query(concat!(
                "UPDATE webhook_delivery
                    SET n_attempts = n_attempts + 1, last_status_code = $2, last_error = $3,
                        next_attempt_at = ",
                now!(),
                " + make_interval(secs => $4)
                  WHERE delivery_id = $1 AND status = 'PENDING'"
            ))
            .bind(delivery_id)
            .bind(status_code.map(i32::from))
            .bind(bounded_error(error))
            .bind(*delay_s),
            Attempt::Failed {
                status_code,
                error,
                retry_in_s: None,
            } => sqlx::query(
                "UPDATE webhook_delivery
                    SET status = 'FAILED', n_attempts = n_attempts + 1, last_status_code = $2,
                        last_error = $3
                  WHERE delivery_id = $1 AND status = 'PENDING'",
            )
            .bind(delivery_id)
            .bind(status_code.map(i32::from))
            .bind(bounded_error(error)),
        };
        query.execute(self.pool()).await.map_err(classify)?;
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
              WHERE endpoint_id = $1 AND ($2::bigint IS NULL OR delivery_id < $2)
              ORDER BY delivery_id DESC LIMIT $3"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
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
              WHERE delivery_id = $1 AND endpoint_id = $2
             RETURNING {DELIVERY_COLUMNS}",
            now!()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(delivery_id)
            .bind(endpoint_id)
            .fetch_optional(self.pool())
            .await
            .map_err(classify)?
            .map(|row| delivery_from_row(&row))
            .transpose()
    }
}
