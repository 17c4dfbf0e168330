//! The waiting list on SQLite (see `boxoffice_store::waitlist`); mirrors the PostgreSQL
//! backend statement for statement. Times are INTEGER unix milliseconds of the store's clock.

use boxoffice_store::engine::{GroupWrite, mismatch};
use boxoffice_store::waitlist::{WAITLIST_OFFERED, offered_message};
use boxoffice_store::{StoreResult, held_seats_json};
use sqlx::{Sqlite, Transaction};

use crate::checkout::outbox;
use crate::{classify, json_list, to_ms};

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
