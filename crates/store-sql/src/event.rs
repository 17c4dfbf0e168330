//! Events as stored: one event with its sections and tiers, the list of events, and the
//! counts of an event's seats and units by the store's clock.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::{Section, Tier};
use boxoffice_store::{EventCounts, EventRecord, StoreResult, parse_waiting_room};

use crate::db::{Db, query};

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// The event, its sections and its tiers in their order.
pub async fn load(db: &Db, event_id: &str) -> StoreResult<Option<EventRecord>> {
    let mut pooled = db.read().await?;
    let mut conn = pooled.conn();
    let Some(row) = query(
        "SELECT event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s,
                transfer_cutoff_s, waitlist_offer_ttl_s,
                CAST(waiting_room AS text) AS waiting_room, created_at
           FROM event WHERE event_id = $1",
    )
    .bind(event_id)
    .fetch_optional(&mut conn)
    .await?
    else {
        return Ok(None);
    };
    let sections = query(
        "SELECT name, rows, seats_per_row, price_minor FROM section
          WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        Ok(Section {
            name: row.get(0)?,
            rows: to_u32(row.get(1)?),
            seats_per_row: to_u32(row.get(2)?),
            price_minor: row.get(3)?,
        })
    })
    .collect::<StoreResult<_>>()?;
    let tiers = query(
        "SELECT tier_id, name, capacity, price_minor FROM tier WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        Ok(Tier {
            tier_id: row.get(0)?,
            name: row.get(1)?,
            capacity: u32::try_from(row.get::<i64, _>(2)?).unwrap_or(0),
            price_minor: row.get(3)?,
        })
    })
    .collect::<StoreResult<_>>()?;
    Ok(Some(EventRecord {
        event_id: row.get("event_id")?,
        name: row.get("name")?,
        starts_at: row.get("starts_at")?,
        on_sale_at: row.get("on_sale_at")?,
        currency: row.get("currency")?,
        hold_ttl_s: to_u32(row.get("hold_ttl_s")?),
        payment_grace_s: to_u32(row.get("payment_grace_s")?),
        max_seats_per_hold: to_u32(row.get("max_seats_per_hold")?),
        max_tickets_per_account: to_u32(row.get("max_tickets_per_account")?),
        exchange_cutoff_s: to_u32(row.get("exchange_cutoff_s")?),
        transfer_cutoff_s: to_u32(row.get("transfer_cutoff_s")?),
        waitlist_offer_ttl_s: to_u32(row.get("waitlist_offer_ttl_s")?),
        waiting_room: parse_waiting_room(&row.get::<String, _>("waiting_room")?),
        sections,
        tiers,
        created_at: row.get("created_at")?,
    }))
}

/// Events after `after_event_id` in id order, at most `limit`.
pub async fn list(
    db: &Db,
    after_event_id: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<EventRecord>> {
    let ids = {
        let mut pooled = db.read().await?;
        query(
            "SELECT event_id FROM event WHERE ($1 IS NULL OR event_id > $1)
              ORDER BY event_id LIMIT $2",
        )
        .bind(after_event_id)
        .bind(limit)
        .fetch_all(&mut pooled.conn())
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect::<StoreResult<Vec<String>>>()?
    };
    let mut events = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(event) = load(db, &id).await? {
            events.push(event);
        }
    }
    Ok(events)
}

/// Every event id, in order.
pub async fn ids(db: &Db) -> StoreResult<Vec<String>> {
    let mut pooled = db.read().await?;
    query("SELECT event_id FROM event ORDER BY event_id")
        .fetch_all(&mut pooled.conn())
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// The event's seats free, held and sold per section, and its tiers' units, by `now`.
pub async fn counts(db: &Db, event: &EventRecord, now: OffsetDateTime) -> StoreResult<EventCounts> {
    let mut pooled = db.read().await?;
    let mut conn = pooled.conn();
    let four = |row: &crate::db::Row| -> StoreResult<(String, i64, i64, i64)> {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    };
    let section_rows = query(
        "SELECT section,
                count(*) FILTER (WHERE status = 'AVAILABLE'
                                    OR (status = 'HELD' AND hold_expires_at <= $2)),
                count(*) FILTER (WHERE status = 'HELD' AND hold_expires_at > $2),
                count(*) FILTER (WHERE status = 'SOLD')
           FROM seat WHERE event_id = $1 GROUP BY section",
    )
    .bind(&event.event_id)
    .bind(now)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(four)
    .collect::<StoreResult<_>>()?;
    let tier_rows = query(
        "SELECT t.tier_id, t.capacity, t.sold,
                CAST(coalesce((SELECT sum(h.quantity) FROM hold h
                                WHERE h.event_id = t.event_id AND h.tier_id = t.tier_id
                                  AND h.status IN ('HELD', 'PAYMENT_PENDING')
                                  AND h.expires_at > $2), 0) AS bigint)
           FROM tier t WHERE t.event_id = $1",
    )
    .bind(&event.event_id)
    .bind(now)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(four)
    .collect::<StoreResult<_>>()?;
    Ok(EventCounts::assemble(event, section_rows, tier_rows))
}
