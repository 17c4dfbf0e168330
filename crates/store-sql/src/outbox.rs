//! The outbox rows a transaction writes beside its state change (the relay publishes them
//! after the commit), the relay's claims of them, and the store's clock read inside a
//! transaction.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::StoreResult;
use boxoffice_store::checkout::OutboxMessage;

use crate::db::{Conn, Db, Dialect, Rows, SQLITE_NOW, query};

/// One outbox row.
pub async fn insert(
    conn: &mut Conn<'_>,
    event_id: &str,
    topic: &str,
    payload: serde_json::Value,
    now: OffsetDateTime,
) -> StoreResult<()> {
    query("INSERT INTO outbox (event_id, topic, payload, created_at) VALUES ($1, $2, $3, $4)")
        .bind(event_id)
        .bind(topic)
        .bind(payload)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// Several outbox rows `(event id, topic, payload)` in one statement.
pub async fn insert_many(
    conn: &mut Conn<'_>,
    messages: &[(&str, &str, serde_json::Value)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let encoded: Vec<(&str, &str, String)> = messages
        .iter()
        .map(|(e, t, p)| (*e, *t, p.to_string()))
        .collect();
    insert_encoded(conn, &encoded, now).await
}

/// Several outbox rows `(event id, topic, payload as JSON text)` in one statement.
pub async fn insert_encoded(
    conn: &mut Conn<'_>,
    messages: &[(&str, &str, String)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    if messages.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let rows = Rows::new()
        .texts("event_id", messages.iter().map(|(e, _, _)| *e))
        .texts("topic", messages.iter().map(|(_, t, _)| *t))
        .texts("payload", messages.iter().map(|(_, _, p)| p.as_str()));
    query(format!(
        "INSERT INTO outbox (event_id, topic, payload, created_at)
         SELECT u.event_id, u.topic, {payload}, $1 FROM {rows}",
        payload = d.json("u.payload"),
        rows = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    Ok(())
}

/// The store's clock, to the millisecond.
pub async fn store_now(conn: &mut Conn<'_>) -> StoreResult<OffsetDateTime> {
    query(format!("SELECT {}", conn.dialect().now_ms()))
        .fetch_one(conn)
        .await?
        .get(0)
}

/// Claims up to `limit` undelivered outbox rows for `lease_s` seconds, oldest first. On
/// PostgreSQL rows another relay holds are skipped (`FOR UPDATE SKIP LOCKED`); on SQLite the
/// one writer makes the claim atomic (the second relay then finds the rows leased). A claim
/// never finished comes back when its lease ends, so delivery is at least once.
pub async fn claim(db: &Db, limit: u32, lease_s: f64) -> StoreResult<Vec<OutboxMessage>> {
    let d = db.dialect();
    let mut pooled = db.write_one().await?;
    let mut messages = query(format!(
        "UPDATE outbox SET n_attempts = n_attempts + 1, next_attempt_at = {until}
          WHERE id IN (SELECT id FROM outbox
                        WHERE published_at IS NULL
                          AND (next_attempt_at IS NULL OR next_attempt_at <= {now})
                        ORDER BY id LIMIT $1 {skip_locked})
         RETURNING id, event_id, topic, CAST(payload AS text) AS payload, n_attempts, created_at",
        until = d.now_plus_secs("$2"),
        now = d.now(),
        skip_locked = d.lock("FOR UPDATE SKIP LOCKED"),
    ))
    .bind(limit)
    .bind(lease_s)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| {
        Ok(OutboxMessage {
            id: row.get("id")?,
            event_id: row.get("event_id")?,
            topic: row.get("topic")?,
            payload: row.get("payload")?,
            n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")?).unwrap_or(0),
            created_at: row.get("created_at")?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    // RETURNING yields rows in no particular order.
    messages.sort_by_key(|m| m.id);
    Ok(messages)
}

/// Marks rows delivered.
pub async fn finish(db: &Db, ids: &[i64]) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let d = db.dialect();
    let mut pooled = db.write_one().await?;
    query(format!(
        "UPDATE outbox SET published_at = {now}, last_error = NULL WHERE id {ids}",
        now = d.now_ms(),
        ids = d.in_list("$1"),
    ))
    .bind(ids.to_vec())
    .execute(&mut pooled.conn())
    .await?;
    Ok(())
}

/// Puts an undelivered row off by `delay_s` seconds, noting why.
pub async fn retry(db: &Db, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
    let mut pooled = db.write_one().await?;
    query(format!(
        "UPDATE outbox SET next_attempt_at = {until}, last_error = $3
          WHERE id = $1 AND published_at IS NULL",
        until = db.dialect().now_plus_secs("$2"),
    ))
    .bind(id)
    .bind(delay_s)
    .bind(error)
    .execute(&mut pooled.conn())
    .await?;
    Ok(())
}

/// Age in seconds of the oldest undelivered row (0 when none): the relay's lag. The oldest
/// is the first by id (the partial index of undelivered rows); `min(created_at)` read every
/// undelivered row, 14 ms a call with a sale's backlog.
pub async fn lag_s(db: &Db) -> StoreResult<f64> {
    let age = match db.dialect() {
        Dialect::Postgres => "extract(epoch FROM boxoffice_now() - created_at)::float8".to_owned(),
        Dialect::Sqlite => format!("CAST({SQLITE_NOW} - created_at AS REAL) / 1000.0"),
    };
    let mut pooled = db.read().await?;
    let row = query(format!(
        "SELECT {age} FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT 1"
    ))
    .fetch_optional(&mut pooled.conn())
    .await?;
    row.map_or(Ok(0.0), |row| row.get(0))
}

/// The store's clock, to the millisecond, read on a pooled connection.
pub async fn now(db: &Db) -> StoreResult<OffsetDateTime> {
    store_now(&mut db.read().await?.conn()).await
}

/// Whether the store answers (readiness).
pub async fn ping(db: &Db) -> StoreResult<()> {
    query("SELECT 1")
        .execute(&mut db.read().await?.conn())
        .await?;
    Ok(())
}
