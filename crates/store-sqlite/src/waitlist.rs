//! The waiting list on SQLite (see `boxoffice_store::waitlist`); mirrors the PostgreSQL
//! backend statement for statement. Times are INTEGER unix milliseconds of the store's clock.

use boxoffice_domain::engine::WaitEntry;
use boxoffice_store::engine::{GroupWrite, mismatch};
use boxoffice_store::waitlist::{
    WAITLIST_OFFERED, WaitlistStatus, WaitlistStore, WaitlistView, offered_message,
};
use boxoffice_store::{StoreError, StoreResult, held_seats_json};
use sqlx::{Sqlite, Transaction};

use crate::checkout::outbox;
use crate::{SqliteStore, classify, column, from_ms, json_list, to_ms};

/// The event's live entries (waiting, and offered), in order.
pub(crate) async fn load_entries(
    conn: &mut sqlx::SqliteConnection,
    event_id: &str,
) -> StoreResult<Vec<WaitEntry>> {
    let rows = sqlx::query_as::<
        _,
        (
            String,
            String,
            i64,
            i64,
            Option<String>,
            Option<i64>,
            bool,
            String,
            String,
            String,
            String,
        ),
    >(
        "SELECT waitlist_id, account_id, seq, quantity, section, max_price_minor, together,
                offer_hold_id, status, idempotency_key, request_digest
           FROM waitlist WHERE event_id = ?1 AND status IN ('WAITING', 'OFFERED') ORDER BY seq",
    )
    .bind(event_id)
    .fetch_all(conn)
    .await
    .map_err(classify)?;
    Ok(rows
        .into_iter()
        .map(
            |(
                waitlist_id,
                account_id,
                seq,
                quantity,
                section,
                max_price_minor,
                together,
                offer_hold_id,
                status,
                idempotency_key,
                request_digest,
            )| {
                WaitEntry {
                    waitlist_id,
                    account_id,
                    seq: u64::try_from(seq).unwrap_or(0),
                    quantity: u32::try_from(quantity).unwrap_or(0),
                    section,
                    max_price_minor,
                    together,
                    offer_hold_id,
                    offered: status == "OFFERED",
                    idempotency_key,
                    request_digest,
                }
            },
        )
        .collect())
}

/// What a group writes of the list (see the PostgreSQL backend's `write_waitlist`).
pub(crate) async fn write_waitlist(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
) -> StoreResult<()> {
    let effects = group.effects;
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    let now_ms = to_ms(now);
    for entry in &effects.waitlist_joined {
        sqlx::query(
            "INSERT INTO waitlist (event_id, waitlist_id, account_id, seq, quantity, section, max_price_minor,
                                   together, offer_hold_id, idempotency_key, request_digest, status,
                                   created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?11, ?12, 'WAITING', ?10, ?10)",
        )
        .bind(event_id)
        .bind(&entry.waitlist_id)
        .bind(&entry.account_id)
        .bind(i64::try_from(entry.seq).unwrap_or(i64::MAX))
        .bind(i64::from(entry.quantity))
        .bind(&entry.section)
        .bind(entry.max_price_minor)
        .bind(entry.together)
        .bind(&entry.offer_hold_id)
        .bind(now_ms)
        .bind(&entry.idempotency_key)
        .bind(&entry.request_digest)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    if !effects.waitlist_left.is_empty() {
        let left = sqlx::query(
            "UPDATE waitlist SET status = 'LEFT', updated_at = ?3
              WHERE event_id = ?1 AND waitlist_id IN (SELECT value FROM json_each(?2))
                AND status = 'WAITING'",
        )
        .bind(event_id)
        .bind(json_list(&effects.waitlist_left))
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if left != effects.waitlist_left.len() as u64 {
            return Err(mismatch(
                "waiting entries left",
                effects.waitlist_left.len(),
                left,
            ));
        }
    }
    for offer in &effects.waitlist_offers {
        let hold = &offer.hold;
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor,
                               currency, idempotency_key, created_at, expires_at, updated_at)
             VALUES (?1, ?2, ?3, 'HELD', NULL, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?9)",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .bind(&hold.account_id)
        .bind(i64::from(hold.quantity))
        .bind(held_seats_json(&hold.seats))
        .bind(hold.total_minor)
        .bind(&group.event.currency)
        .bind(format!("waitlist:{}", offer.waitlist_id))
        .bind(now_ms)
        .bind(to_ms(hold.expires_at))
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        let offered = sqlx::query(
            "UPDATE waitlist SET status = 'OFFERED', updated_at = ?3
              WHERE event_id = ?1 AND waitlist_id = ?2 AND status = 'WAITING'",
        )
        .bind(event_id)
        .bind(&offer.waitlist_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if offered != 1 {
            return Err(mismatch("waiting entry offered", 1, offered));
        }
        outbox(
            tx,
            event_id,
            WAITLIST_OFFERED,
            offered_message(event_id, offer),
            now,
        )
        .await?;
    }
    for (holds, status) in [
        (&effects.waitlist_lapsed, "LAPSED"),
        (&effects.waitlist_purchased, "PURCHASED"),
    ] {
        if holds.is_empty() {
            continue;
        }
        sqlx::query(
            "UPDATE waitlist SET status = ?3, updated_at = ?4
              WHERE offer_hold_id IN (SELECT value FROM json_each(?2)) AND event_id = ?1
                AND status = 'OFFERED'",
        )
        .bind(event_id)
        .bind(json_list(holds))
        .bind(status)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl WaitlistStore for SqliteStore {
    async fn get_waitlist_entry(&self, waitlist_id: &str) -> StoreResult<Option<WaitlistView>> {
        let sql = concat!(
            "SELECT w.waitlist_id, w.event_id, w.account_id, w.quantity, w.section, w.max_price_minor,
                    w.together, w.status, w.offer_hold_id, w.created_at, w.updated_at,
                    w.idempotency_key, w.request_digest,
                    h.status AS hold_status, h.expires_at AS hold_expires_at, ",
            now_ms!(),
            " AS now,
                    CASE WHEN w.status = 'WAITING'
                         THEN (SELECT count(*) FROM waitlist o
                                WHERE o.event_id = w.event_id AND o.status = 'WAITING' AND o.seq <= w.seq)
                    END AS position
               FROM waitlist w LEFT JOIN hold h ON h.hold_id = w.offer_hold_id
              WHERE w.waitlist_id = ?1"
        );
        let row = sqlx::query(sql)
            .bind(waitlist_id)
            .fetch_optional(&self.reader)
            .await
            .map_err(classify)?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = column(&row, "status")?;
        let status = WaitlistStatus::parse(&stored)
            .ok_or_else(|| StoreError::Internal(format!("waitlist status {stored:?}")))?;
        let hold_status: Option<String> = column(&row, "hold_status")?;
        let hold_expires_at: Option<i64> = column(&row, "hold_expires_at")?;
        let hold_expires_at = hold_expires_at.map(from_ms).transpose()?;
        let now = from_ms(column(&row, "now")?)?;
        let status = match (status, &hold_status, hold_expires_at) {
            (WaitlistStatus::Offered, Some(hold), Some(at)) => {
                WaitlistStatus::of_offer(hold, at, now)
            }
            (status, _, _) => status,
        };
        let offered = hold_status.is_some();
        let position: Option<i64> = column(&row, "position")?;
        Ok(Some(WaitlistView {
            waitlist_id: column(&row, "waitlist_id")?,
            event_id: column(&row, "event_id")?,
            account_id: column(&row, "account_id")?,
            quantity: u32::try_from(column::<i64>(&row, "quantity")?).unwrap_or(0),
            section: column(&row, "section")?,
            max_price_minor: column(&row, "max_price_minor")?,
            together: column(&row, "together")?,
            idempotency_key: column(&row, "idempotency_key")?,
            request_digest: column(&row, "request_digest")?,
            status,
            position: position.and_then(|p| u32::try_from(p).ok()),
            hold_id: if offered {
                Some(column(&row, "offer_hold_id")?)
            } else {
                None
            },
            offer_expires_at: hold_expires_at,
            created_at: from_ms(column(&row, "created_at")?)?,
            updated_at: from_ms(column(&row, "updated_at")?)?,
        }))
    }
}
