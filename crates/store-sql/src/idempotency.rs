//! Stored answers of idempotent requests: the one a key already has, and the records a
//! transaction writes with the change they answer.
//!
//! Every record written here names the event it is about (`event_id`, migrations 0015 on
//! PostgreSQL and 0013 on SQLite): a hold's, a checkout's, an exchange's, an event's
//! creation. That is how `boxoffice shard move` finds the records to carry with the event:
//! their key (account, endpoint, key) does not lead with the event like the inventory's.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_store::{NewRecord, StoreResult, stored_answer_of};

use crate::db::{Conn, Db, Rows, query};

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

/// The records of one endpoint about event `event_id`, in one statement.
pub async fn insert(
    conn: &mut Conn<'_>,
    event_id: &str,
    endpoint: &str,
    records: &[NewRecord],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let records: Vec<(&str, &NewRecord)> = records.iter().map(|r| (endpoint, r)).collect();
    insert_each(conn, event_id, &records, now).await
}

/// Records `(endpoint, record)` about event `event_id`, in one statement.
pub async fn insert_each(
    conn: &mut Conn<'_>,
    event_id: &str,
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
                                  response_body, created_at, event_id)
         SELECT u.account_id, u.endpoint, u.idem_key, u.request_digest, u.status_code, {body}, $1, $2
           FROM {rows}",
        body = d.bytes("u.body"),
        rows = rows.table(d, 3, "u"),
    ))
    .bind(now)
    .bind(event_id)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    Ok(())
}

/// The answers stored for each `(scope, request digest)` asked, in one statement, judged as
/// [`prior_answer`] judges one.
pub async fn stored_answers(
    db: &Db,
    asked: &[(IdempotencyScope, String)],
) -> StoreResult<Vec<Option<Idempotent>>> {
    let mut answers: Vec<Option<Idempotent>> = vec![None; asked.len()];
    if asked.is_empty() {
        return Ok(answers);
    }
    let d = db.dialect();
    let rows = Rows::new()
        .ints("n", (0..asked.len()).map(|n| n as i64))
        .texts("a", asked.iter().map(|(s, _)| s.account_id.as_str()))
        .texts("e", asked.iter().map(|(s, _)| s.endpoint.as_str()))
        .texts("k", asked.iter().map(|(s, _)| s.key.as_str()));
    let found = query(format!(
        "SELECT u.n, i.request_digest, i.status_code, i.response_body
           FROM {u} JOIN idempotency i ON i.account_id = u.a AND i.endpoint = u.e AND i.idem_key = u.k",
        u = rows.table(d, 1, "u"),
    ))
    .bind_rows(d, rows)
    .fetch_all(&mut db.read().await?.conn())
    .await?;
    for row in &found {
        let Some(n) = usize::try_from(row.get::<i64, _>(0)?).ok() else {
            continue;
        };
        let Some((_, asked_digest)) = asked.get(n) else {
            continue;
        };
        answers[n] = Some(stored_answer_of(
            &row.get::<String, _>(1)?,
            asked_digest,
            i64::from(row.get::<i32, _>(2)?),
            row.get(3)?,
        ));
    }
    Ok(answers)
}

/// Replaces the answer stored for `scope`. Returns whether there was one.
pub async fn replace(
    db: &Db,
    scope: &IdempotencyScope,
    response: &StoredResponse,
) -> StoreResult<bool> {
    let updated = query(
        "UPDATE idempotency SET status_code = $4, response_body = $5
          WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
    )
    .bind(&scope.account_id)
    .bind(&scope.endpoint)
    .bind(&scope.key)
    .bind(i32::from(response.status))
    .bind(response.body.clone())
    .execute(&mut db.write_one().await?.conn())
    .await?;
    Ok(updated == 1)
}
