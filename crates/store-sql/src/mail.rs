//! Accounts and mails (see `boxoffice_store::mail`). The fan-out is one `INSERT ... SELECT`
//! over the round's mails, skipping the pairs that have one (`ON CONFLICT DO NOTHING` on the
//! unique (outbox id, account) key). A claim moves due mails to `SENDING` with a lease and
//! commits before the worker talks to any SMTP server; on PostgreSQL it takes them
//! `FOR UPDATE SKIP LOCKED`, so two nodes' workers never claim one mail; on SQLite the one
//! writer does that by itself.

use boxoffice_store::mail::{
    AccountRecord, AccountUpdate, ClaimedMail, EmailSource, MAIL_SUBJECT_LEN_MAX, MailMessage,
    MailOutcome, MailStatus, NewMail, Resent, bounded_error,
};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Db, Dialect, Row, query};

const ACCOUNT_COLUMNS: &str = "account_id, email, email_source, locale, updated_at";

const MAIL_COLUMNS: &str = "mail_id, outbox_id, account_id, kind, payload, status, n_attempts,
     next_attempt_at, last_error, to_address, subject, sent_at, created_at";

/// A mail's columns from `mail_message m`.
const MAIL_COLUMNS_OF_M: &str = "m.mail_id, m.outbox_id, m.account_id, m.kind, m.payload,
     m.status, m.n_attempts, m.next_attempt_at, m.last_error, m.to_address, m.subject,
     m.sent_at, m.created_at";

/// Why a mail that was `SENDING` is `UNCERTAIN`.
const LEASE_ENDED: &str = "the worker's lease ended while it was sending: it may have gone out";

fn account_from_row(row: &Row) -> StoreResult<AccountRecord> {
    let source: Option<String> = row.get("email_source")?;
    Ok(AccountRecord {
        account_id: row.get("account_id")?,
        email: row.get("email")?,
        email_source: source.as_deref().and_then(EmailSource::parse),
        locale: row.get("locale")?,
        updated_at: row.get("updated_at")?,
    })
}

fn mail_from_row(row: &Row) -> StoreResult<MailMessage> {
    let status: String = row.get("status")?;
    Ok(MailMessage {
        mail_id: row.get("mail_id")?,
        outbox_id: row.get("outbox_id")?,
        account_id: row.get("account_id")?,
        kind: row.get("kind")?,
        payload: row.get("payload")?,
        status: MailStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("mail status {status:?}")))?,
        n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")?).unwrap_or(0),
        next_attempt_at: row.get("next_attempt_at")?,
        last_error: row.get("last_error")?,
        to_address: row.get("to_address")?,
        subject: row.get("subject")?,
        sent_at: row.get("sent_at")?,
        created_at: row.get("created_at")?,
    })
}

pub async fn account(db: &Db, account_id: &str) -> StoreResult<Option<AccountRecord>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {ACCOUNT_COLUMNS} FROM account WHERE account_id = $1"
    ))
    .bind(account_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| account_from_row(&row))
    .transpose()
}

/// Sets what the fan gave, creating the row; an address set here is the fan's.
pub async fn update_account(
    db: &Db,
    account_id: &str,
    update: &AccountUpdate,
) -> StoreResult<AccountRecord> {
    let source = update.email.as_ref().map(|_| EmailSource::Fan.as_str());
    let mut pooled = db.write_one().await?;
    let row = query(format!(
        "INSERT INTO account (account_id, email, email_source, locale, updated_at)
         VALUES ($1, $2, $3, $4, {now})
         ON CONFLICT (account_id) DO UPDATE
            SET email = coalesce(excluded.email, account.email),
                email_source = coalesce(excluded.email_source, account.email_source),
                locale = coalesce(excluded.locale, account.locale),
                updated_at = excluded.updated_at
         RETURNING {ACCOUNT_COLUMNS}",
        now = db.dialect().now_ms()
    ))
    .bind(account_id)
    .bind(update.email.as_deref())
    .bind(source)
    .bind(update.locale.as_deref())
    .fetch_one(&mut pooled.conn())
    .await?;
    account_from_row(&row)
}

/// The token's address, unless the fan set one or it is already the one recorded.
pub async fn record_token_email(db: &Db, account_id: &str, email: &str) -> StoreResult<bool> {
    let mut pooled = db.write_one().await?;
    let changed = query(format!(
        "INSERT INTO account (account_id, email, email_source, locale, updated_at)
         VALUES ($1, $2, 'TOKEN', NULL, {now})
         ON CONFLICT (account_id) DO UPDATE
            SET email = excluded.email, email_source = 'TOKEN', updated_at = excluded.updated_at
          WHERE (account.email_source IS NULL OR account.email_source <> 'FAN')
            AND (account.email IS NULL OR account.email <> excluded.email)",
        now = db.dialect().now_ms()
    ))
    .bind(account_id)
    .bind(email)
    .execute(&mut pooled.conn())
    .await?;
    Ok(changed > 0)
}

/// One `PENDING` mail per new (outbox message, account); the mails made.
pub async fn fan_out(db: &Db, mails: &[NewMail]) -> StoreResult<u64> {
    if mails.is_empty() {
        return Ok(0);
    }
    let d = db.dialect();
    let mails_sql = match d {
        Dialect::Postgres => {
            "unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
                AS n(outbox_id, account_id, kind, payload)"
        }
        Dialect::Sqlite => {
            "(SELECT j.value->>0 AS outbox_id, j.value->>1 AS account_id,
                     j.value->>2 AS kind, j.value->>3 AS payload
                FROM json_each($1) AS j) AS n"
        }
    };
    let statement = query(format!(
        "INSERT INTO mail_message (outbox_id, account_id, kind, payload, status, n_attempts,
                                   next_attempt_at, created_at)
         SELECT n.outbox_id, n.account_id, n.kind, n.payload, 'PENDING', 0, {now}, {now}
           FROM {mails_sql}
          WHERE true -- (an upsert after a SELECT with no WHERE reads as a join's ON to SQLite)
          ORDER BY n.outbox_id, n.account_id
         ON CONFLICT (outbox_id, account_id) DO NOTHING",
        now = d.now_ms(),
    ));
    let statement = match d {
        Dialect::Postgres => statement
            .bind(mails.iter().map(|m| m.outbox_id).collect::<Vec<_>>())
            .bind(
                mails
                    .iter()
                    .map(|m| m.account_id.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(mails.iter().map(|m| m.kind.clone()).collect::<Vec<_>>())
            .bind(mails.iter().map(|m| m.payload.clone()).collect::<Vec<_>>()),
        Dialect::Sqlite => statement.bind(serde_json::Value::Array(
            mails
                .iter()
                .map(|m| serde_json::json!([m.outbox_id, m.account_id, m.kind, m.payload]))
                .collect(),
        )),
    };
    let mut pooled = db.write_one().await?;
    statement.execute(&mut pooled.conn()).await
}

/// The accounts whose tickets of the event its cancellation voided.
pub async fn cancelled_ticket_accounts(
    db: &Db,
    event_id: &str,
    limit: u32,
) -> StoreResult<Vec<String>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT DISTINCT account_id FROM ticket
          WHERE event_id = $1 AND void_reason = $2
          ORDER BY account_id LIMIT $3",
    )
    .bind(event_id)
    .bind(boxoffice_store::cancellation::REASON_EVENT_CANCELLED)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// `SENDING` mails past their lease become `UNCERTAIN`.
pub async fn expire_leases(db: &Db) -> StoreResult<u64> {
    let mut pooled = db.write_one().await?;
    query(format!(
        "UPDATE mail_message SET status = 'UNCERTAIN', lease_until = NULL, last_error = $1
          WHERE status = 'SENDING' AND lease_until <= {now}",
        now = db.dialect().now_ms()
    ))
    .bind(LEASE_ENDED)
    .execute(&mut pooled.conn())
    .await
}

/// Takes up to `limit` due mails: `SENDING` until the lease ends, the account's address
/// read into the row, committed.
pub async fn claim(db: &Db, limit: u32, lease_s: f64) -> StoreResult<Vec<ClaimedMail>> {
    let d = db.dialect();
    let skip_locked = match d {
        Dialect::Postgres => "FOR UPDATE SKIP LOCKED",
        Dialect::Sqlite => "",
    };
    let mut tx = db.write().await?;
    let ids = query(format!(
        "UPDATE mail_message
            SET status = 'SENDING', n_attempts = n_attempts + 1, lease_until = {until},
                to_address = (SELECT a.email FROM account a
                               WHERE a.account_id = mail_message.account_id)
          WHERE mail_id IN (
                SELECT x.mail_id FROM mail_message x
                 WHERE x.status = 'PENDING' AND x.next_attempt_at <= {now}
                 ORDER BY x.next_attempt_at, x.mail_id LIMIT $1 {skip_locked})
         RETURNING mail_id",
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
    let claimed = query(format!(
        "SELECT {MAIL_COLUMNS_OF_M}, a.locale
           FROM mail_message m LEFT JOIN account a ON a.account_id = m.account_id
          WHERE m.mail_id {ids}
          ORDER BY m.mail_id",
        ids = d.in_list("$1"),
    ))
    .bind(ids)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| {
        Ok(ClaimedMail {
            mail: mail_from_row(row)?,
            locale: row.get("locale")?,
        })
    })
    .collect::<StoreResult<Vec<ClaimedMail>>>()?;
    tx.commit().await?;
    Ok(claimed)
}

/// Records what became of a `SENDING` mail. `SENT` is recorded on an `UNCERTAIN` one too:
/// the server did accept it, whatever the lease said meanwhile.
pub async fn record(db: &Db, mail_id: i64, outcome: &MailOutcome) -> StoreResult<bool> {
    let d = db.dialect();
    let statement = match outcome {
        MailOutcome::Sent { subject } => query(format!(
            "UPDATE mail_message
                SET status = 'SENT', subject = $2, sent_at = {now}, lease_until = NULL,
                    last_error = NULL
              WHERE mail_id = $1 AND status IN ('SENDING', 'UNCERTAIN')",
            now = d.now_ms()
        ))
        .bind(mail_id)
        .bind(
            subject
                .chars()
                .take(MAIL_SUBJECT_LEN_MAX)
                .collect::<String>(),
        ),
        MailOutcome::Retry {
            error,
            retry_in_s: Some(delay_s),
        } => query(format!(
            "UPDATE mail_message
                SET status = 'PENDING', last_error = $2, lease_until = NULL,
                    next_attempt_at = {until}
              WHERE mail_id = $1 AND status = 'SENDING'",
            until = d.now_plus_secs("$3")
        ))
        .bind(mail_id)
        .bind(bounded_error(error))
        .bind(*delay_s),
        MailOutcome::Retry {
            error,
            retry_in_s: None,
        }
        | MailOutcome::Failed { error } => query(
            "UPDATE mail_message SET status = 'FAILED', last_error = $2, lease_until = NULL
              WHERE mail_id = $1 AND status = 'SENDING'",
        )
        .bind(mail_id)
        .bind(bounded_error(error)),
        MailOutcome::Uncertain { error } => query(
            "UPDATE mail_message SET status = 'UNCERTAIN', last_error = $2, lease_until = NULL
              WHERE mail_id = $1 AND status = 'SENDING'",
        )
        .bind(mail_id)
        .bind(bounded_error(error)),
        MailOutcome::NoAddress => query(
            "UPDATE mail_message SET status = 'NO_ADDRESS', lease_until = NULL
              WHERE mail_id = $1 AND status = 'SENDING'",
        )
        .bind(mail_id),
    };
    let mut pooled = db.write_one().await?;
    Ok(statement.execute(&mut pooled.conn()).await? == 1)
}

pub async fn get(db: &Db, mail_id: i64) -> StoreResult<Option<MailMessage>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {MAIL_COLUMNS} FROM mail_message WHERE mail_id = $1"
    ))
    .bind(mail_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| mail_from_row(&row))
    .transpose()
}

/// Mails newest first.
pub async fn list(
    db: &Db,
    status: Option<MailStatus>,
    before: Option<i64>,
    limit: u32,
) -> StoreResult<Vec<MailMessage>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {MAIL_COLUMNS} FROM mail_message
          WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR mail_id < $2)
          ORDER BY mail_id DESC LIMIT $3"
    ))
    .bind(status.map(MailStatus::as_str))
    .bind(before)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(mail_from_row)
    .collect()
}

/// Queues a mail that cannot be going out again, from its first attempt.
pub async fn resend(db: &Db, mail_id: i64) -> StoreResult<Option<Resent>> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let Some(row) = query(format!(
        "SELECT {MAIL_COLUMNS} FROM mail_message WHERE mail_id = $1 {}",
        d.lock("FOR UPDATE")
    ))
    .bind(mail_id)
    .fetch_optional(&mut tx.conn())
    .await?
    else {
        return Ok(None);
    };
    let mail = mail_from_row(&row)?;
    if !mail.status.resendable() {
        return Ok(Some(Resent::NotResendable(mail)));
    }
    let row = query(format!(
        "UPDATE mail_message
            SET status = 'PENDING', n_attempts = 0, next_attempt_at = {now}, lease_until = NULL
          WHERE mail_id = $1
         RETURNING {MAIL_COLUMNS}",
        now = d.now_ms()
    ))
    .bind(mail_id)
    .fetch_one(&mut tx.conn())
    .await?;
    let queued = mail_from_row(&row)?;
    tx.commit().await?;
    Ok(Some(Resent::Queued(queued)))
}
