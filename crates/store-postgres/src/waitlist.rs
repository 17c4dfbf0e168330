//! The waiting list on PostgreSQL (see `boxoffice_store::waitlist`): the entries a writer
//! loads with its engine, what a group writes of the list, and an entry's reading.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::WaitEntry;
use boxoffice_store::engine::{GroupWrite, mismatch};
use boxoffice_store::waitlist::{
    WAITLIST_OFFERED, WaitlistStatus, WaitlistStore, WaitlistView, offered_message,
};
use boxoffice_store::{StoreError, StoreResult, held_seats_json};
use sqlx::{Postgres, Row, Transaction};

use crate::checkout::outbox_many;
use crate::{PgStore, classify};

/// The event's live entries (waiting, and offered: the engine judges whether the offer's hold
/// is still live), in order.
pub(crate) async fn load_entries(
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
) -> StoreResult<Vec<WaitEntry>> {
    let rows = sqlx::query_as::<
        _,
        (
            String,
            String,
            i64,
            i32,
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
           FROM waitlist WHERE event_id = $1 AND status IN ('WAITING', 'OFFERED') ORDER BY seq",
    )
    .bind(event_id)
    .fetch_all(&mut **tx)
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

/// What a group writes of the list: new entries, entries left, offers (the hold rows — their
/// seats are taken with the group's other new holds — and the entries `OFFERED`), and offered
/// entries whose holds the group ended or sold. Every change of an entry is conditional on
/// its status and counted, except the last, which may find an entry moved on already.
pub(crate) async fn write_waitlist(
    tx: &mut Transaction<'_, Postgres>,
    group: &GroupWrite<'_>,
) -> StoreResult<()> {
    let effects = group.effects;
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    if !effects.waitlist_joined.is_empty() {
        let joined = &effects.waitlist_joined;
        let ids: Vec<&str> = joined.iter().map(|e| e.waitlist_id.as_str()).collect();
        let accounts: Vec<&str> = joined.iter().map(|e| e.account_id.as_str()).collect();
        let seqs: Vec<i64> = joined
            .iter()
            .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX))
            .collect();
        let quantities: Vec<i32> = joined
            .iter()
            .map(|e| i32::try_from(e.quantity).unwrap_or(i32::MAX))
            .collect();
        let sections: Vec<Option<&str>> = joined.iter().map(|e| e.section.as_deref()).collect();
        let caps: Vec<Option<i64>> = joined.iter().map(|e| e.max_price_minor).collect();
        let together: Vec<bool> = joined.iter().map(|e| e.together).collect();
        let holds: Vec<&str> = joined.iter().map(|e| e.offer_hold_id.as_str()).collect();
        let keys: Vec<&str> = joined.iter().map(|e| e.idempotency_key.as_str()).collect();
        let digests: Vec<&str> = joined.iter().map(|e| e.request_digest.as_str()).collect();
        sqlx::query(
            "INSERT INTO waitlist (event_id, waitlist_id, account_id, seq, quantity, section, max_price_minor,
                                   together, offer_hold_id, idempotency_key, request_digest, status,
                                   created_at, updated_at)
             SELECT $1, w, a, s, q, sec, cap, tog, h, k, d, 'WAITING', $10, $10
               FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::int[], $6::text[], $7::bigint[],
                           $8::boolean[], $9::text[], $11::text[], $12::text[])
                    AS u(w, a, s, q, sec, cap, tog, h, k, d)",
        )
        .bind(event_id)
        .bind(&ids)
        .bind(&accounts)
        .bind(&seqs)
        .bind(&quantities)
        .bind(&sections)
        .bind(&caps)
        .bind(&together)
        .bind(&holds)
        .bind(now)
        .bind(&keys)
        .bind(&digests)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    if !effects.waitlist_left.is_empty() {
        let left = sqlx::query(
            "UPDATE waitlist SET status = 'LEFT', updated_at = $3
              WHERE event_id = $1 AND waitlist_id = ANY($2) AND status = 'WAITING'",
        )
        .bind(event_id)
        .bind(&effects.waitlist_left)
        .bind(now)
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
    if !effects.waitlist_offers.is_empty() {
        let offers = &effects.waitlist_offers;
        let hold_ids: Vec<&str> = offers.iter().map(|o| o.hold.hold_id.as_str()).collect();
        let accounts: Vec<&str> = offers.iter().map(|o| o.hold.account_id.as_str()).collect();
        let quantities: Vec<i32> = offers
            .iter()
            .map(|o| i32::try_from(o.hold.quantity).unwrap_or(i32::MAX))
            .collect();
        let seats: Vec<String> = offers
            .iter()
            .map(|o| held_seats_json(&o.hold.seats))
            .collect();
        let totals: Vec<i64> = offers.iter().map(|o| o.hold.total_minor).collect();
        let keys: Vec<String> = offers
            .iter()
            .map(|o| format!("waitlist:{}", o.waitlist_id))
            .collect();
        let deadlines: Vec<OffsetDateTime> = offers.iter().map(|o| o.hold.expires_at).collect();
        let written = sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor,
                               currency, idempotency_key, created_at, expires_at, updated_at)
             SELECT $1, h, a, 'HELD', NULL, q, j::jsonb, tot, $9, k, $10, x, $10
               FROM UNNEST($2::text[], $3::text[], $4::int[], $5::text[], $6::bigint[], $7::text[],
                           $8::timestamptz[]) AS u(h, a, q, j, tot, k, x)",
        )
        .bind(event_id)
        .bind(&hold_ids)
        .bind(&accounts)
        .bind(&quantities)
        .bind(&seats)
        .bind(&totals)
        .bind(&keys)
        .bind(&deadlines)
        .bind(&group.event.currency)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if written != offers.len() as u64 {
            return Err(mismatch("offer holds", offers.len(), written));
        }
        let ids: Vec<&str> = offers.iter().map(|o| o.waitlist_id.as_str()).collect();
        let offered = sqlx::query(
            "UPDATE waitlist SET status = 'OFFERED', updated_at = $3
              WHERE event_id = $1 AND waitlist_id = ANY($2) AND status = 'WAITING'",
        )
        .bind(event_id)
        .bind(&ids)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if offered != offers.len() as u64 {
            return Err(mismatch("waiting entries offered", offers.len(), offered));
        }
        let messages: Vec<(&str, &str, serde_json::Value)> = offers
            .iter()
            .map(|o| (event_id, WAITLIST_OFFERED, offered_message(event_id, o)))
            .collect();
        outbox_many(tx, &messages, now).await?;
    }
    for (holds, status) in [
        (&effects.waitlist_lapsed, "LAPSED"),
        (&effects.waitlist_purchased, "PURCHASED"),
    ] {
        if holds.is_empty() {
            continue;
        }
        sqlx::query(
            "UPDATE waitlist SET status = $3, updated_at = $4
              WHERE offer_hold_id = ANY($2) AND event_id = $1 AND status = 'OFFERED'",
        )
        .bind(event_id)
        .bind(holds)
        .bind(status)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl WaitlistStore for PgStore {
    async fn get_waitlist_entry(&self, waitlist_id: &str) -> StoreResult<Option<WaitlistView>> {
        let row = sqlx::query(
            "SELECT w.waitlist_id, w.event_id, w.account_id, w.quantity, w.section, w.max_price_minor,
                    w.together, w.status, w.offer_hold_id, w.created_at, w.updated_at,
                    w.idempotency_key, w.request_digest,
                    h.status AS hold_status, h.expires_at AS hold_expires_at,
                    date_trunc('milliseconds', boxoffice_now()) AS now,
                    CASE WHEN w.status = 'WAITING'
                         THEN (SELECT count(*) FROM waitlist o
                                WHERE o.event_id = w.event_id AND o.status = 'WAITING' AND o.seq <= w.seq)
                    END AS position
               FROM waitlist w LEFT JOIN hold h ON h.hold_id = w.offer_hold_id
              WHERE w.waitlist_id = $1",
        )
        .bind(waitlist_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        let Some(row) = row else { return Ok(None) };
        let stored: String = row.get("status");
        let status = WaitlistStatus::parse(&stored)
            .ok_or_else(|| StoreError::Internal(format!("waitlist status {stored:?}")))?;
        let hold_status: Option<String> = row.get("hold_status");
        let hold_expires_at: Option<OffsetDateTime> = row.get("hold_expires_at");
        let now: OffsetDateTime = row.get("now");
        let status = match (status, &hold_status, hold_expires_at) {
            (WaitlistStatus::Offered, Some(hold), Some(at)) => {
                WaitlistStatus::of_offer(hold, at, now)
            }
            (status, _, _) => status,
        };
        let offered = hold_status.is_some();
        let position: Option<i64> = row.get("position");
        Ok(Some(WaitlistView {
            waitlist_id: row.get("waitlist_id"),
            event_id: row.get("event_id"),
            account_id: row.get("account_id"),
            quantity: u32::try_from(row.get::<i32, _>("quantity")).unwrap_or(0),
            section: row.get("section"),
            max_price_minor: row.get("max_price_minor"),
            together: row.get("together"),
            idempotency_key: row.get("idempotency_key"),
            request_digest: row.get("request_digest"),
            status,
            position: position.and_then(|p| u32::try_from(p).ok()),
            hold_id: offered.then(|| row.get("offer_hold_id")),
            offer_expires_at: hold_expires_at,
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
        }))
    }
}
