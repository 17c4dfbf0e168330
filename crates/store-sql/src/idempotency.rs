//! Stored answers of idempotent requests: the one a key already has, and the records a
//! transaction writes with the change they answer.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
use boxoffice_store::{NewRecord, StoreResult, stored_answer_of};

use crate::db::{Conn, Rows, query};

/// The answer stored for `scope`, judged against this request's digest.
pub async fn prior_answer(
    conn: &mut Conn<'_>,
    scope: &IdempotencyScope,
    request_digest: &str,
) -> StoreResult<Option<Idempotent>> {
    let row = query(
        "SELECT request_digest, status_code, response_body FROM idempotency
          WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
    )
    .bind(&scope.account_id)
    .bind(&scope.endpoint)
    .bind(&scope.key)
    .fetch_optional(conn)
    .await?;
    row.map(|row| {
        Ok(stored_answer_of(
            &row.get::<String, _>(0)?,
            request_digest,
            i64::from(row.get::<i32, _>(1)?),
            row.get(2)?,
        ))
    })
    .transpose()
}

/// The records of one endpoint, in one statement.
pub async fn insert(
    conn: &mut Conn<'_>,
    endpoint: &str,
    records: &[NewRecord],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let records: Vec<(&str, &NewRecord)> = records.iter().map(|r| (endpoint, r)).collect();
    insert_each(conn, &records, now).await
}

/// Records `(endpoint, record)`, in one statement.
pub async fn insert_each(
    conn: &mut Conn<'_>,
    records: &[(&str, &NewRecord)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    if records.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let rows = Rows::new()
        .texts(
            "account_id",
            records.iter().map(|(_, r)| r.account_id.as_str()),
        )
        .texts("endpoint", records.iter().map(|(e, _)| *e))
        .texts("idem_key", records.iter().map(|(_, r)| r.key.as_str()))
        .texts(
            "request_digest",
            records.iter().map(|(_, r)| r.request_digest.as_str()),
        )
        .int4s(
            "status_code",
            records.iter().map(|(_, r)| i32::from(r.response.status)),
        )
        .bytes("body", records.iter().map(|(_, r)| r.response.body.clone()));
    query(format!(
        "INSERT INTO idempotency (account_id, endpoint, idem_key, request_digest, status_code,
                                  response_body, created_at)
         SELECT u.account_id, u.endpoint, u.idem_key, u.request_digest, u.status_code, {body}, $1
           FROM {rows}",
        body = d.bytes("u.body"),
        rows = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    Ok(())
}
