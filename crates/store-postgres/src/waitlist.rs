//! The waiting list on PostgreSQL (see `boxoffice_store::waitlist`): the entries a writer
//! loads with its engine, what a group writes of the list, and an entry's reading.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::{GroupWrite, mismatch};
use boxoffice_store::waitlist::{WAITLIST_OFFERED, offered_message};
use boxoffice_store::{StoreResult, held_seats_json};
use sqlx::{Postgres, Transaction};

use crate::checkout::outbox_many;
use crate::classify;

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
