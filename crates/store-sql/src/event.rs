//! Events as stored: one event with its sections and tiers, the list of events, and the
//! counts of an event's seats and units by the store's clock.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::{EventSpec, RefundPolicy};
use boxoffice_domain::event::{Section, Tier};
use boxoffice_domain::event_chart::EventChart;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
use boxoffice_store::{
    EventCounts, EventRecord, NewRecord, RenderEvent, StoreError, StoreResult, event_record,
    parse_waiting_room, waiting_room_json,
};

use std::sync::Arc;

use crate::db::{Db, Rows, query};
use crate::{idempotency, outbox};

/// Seats inserted per statement when creating an event.
const SEAT_INSERT_CHUNK: usize = 10_000;

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
                transfer_cutoff_s, waitlist_offer_ttl_s, refund_cutoff_s, refund_keep_fee_minor,
                CAST(waiting_room AS text) AS waiting_room, created_at, holder_policy,
                sale_setup
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
            row_lengths: Vec::new(),
        })
    })
    .collect::<StoreResult<Vec<Section>>>()?;
    let chart = load_chart(&mut conn, event_id).await?;
    let mut sections = sections;
    if let Some(chart) = &chart {
        // The rows' lengths are the copy's: one truth for the seats' shape.
        let shaped = chart.sections();
        for section in &mut sections {
            if let Some(from_chart) = shaped.iter().find(|s| s.name == section.name) {
                section.row_lengths = from_chart.row_lengths.clone();
            }
        }
    }
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
        refund_policy: row
            .get::<Option<i32>, _>("refund_cutoff_s")?
            .map(|cutoff_s| -> StoreResult<RefundPolicy> {
                Ok(RefundPolicy {
                    fan_refund_cutoff_s: to_u32(cutoff_s),
                    keep_fee_minor: row.get("refund_keep_fee_minor")?,
                })
            })
            .transpose()?,
        holder_policy: row
            .get::<Option<String>, _>("holder_policy")?
            .map(|json| {
                serde_json::from_str(&json)
                    .map_err(|e| StoreError::Internal(format!("event holder_policy: {e}")))
            })
            .transpose()?,
        sale: serde_json::from_str(&row.get::<String, _>("sale_setup")?)
            .map_err(|e| StoreError::Internal(format!("event sale_setup: {e}")))?,
        chart,
        waiting_room: parse_waiting_room(&row.get::<String, _>("waiting_room")?),
        sections,
        tiers,
        created_at: row.get("created_at")?,
    }))
}

/// The chart the event was created on, as it copied it (`None`: no chart).
async fn load_chart(
    conn: &mut crate::db::Conn<'_>,
    event_id: &str,
) -> StoreResult<Option<Arc<EventChart>>> {
    let Some(row) = query(
        "SELECT chart_id, chart, category_prices, accessible_release_at FROM event_chart
              WHERE event_id = $1",
    )
    .bind(event_id)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    let damaged = |e: serde_json::Error| StoreError::Internal(format!("event_chart: {e}"));
    Ok(Some(Arc::new(EventChart {
        chart_id: row.get(0)?,
        chart: serde_json::from_str(&row.get::<String, _>(1)?).map_err(damaged)?,
        category_prices: serde_json::from_str(&row.get::<String, _>(2)?).map_err(damaged)?,
        accessible_release_at: row.get(3)?,
    })))
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
    let mut counts = EventCounts::assemble(event, section_rows, tier_rows);
    counts.cancelled = crate::cancellation::is_cancelled(&mut conn, &event.event_id).await?;
    Ok(counts)
}

/// Creates an event with its sections, tiers, seats and seat map, and stores the answer
/// `render` gives under `scope`, in one transaction; a key already answered is answered again
/// (or refused when its request differs), and nothing is written.
pub async fn create(
    db: &Db,
    scope: &IdempotencyScope,
    request_digest: &str,
    event_id: &str,
    spec: &EventSpec,
    render: &RenderEvent,
) -> StoreResult<Idempotent> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    if let Some(answer) = idempotency::prior_answer(&mut tx.conn(), scope, request_digest).await? {
        return Ok(answer);
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    let record = event_record(event_id, spec, now);
    query(format!(
        "INSERT INTO event (event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                            max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s,
                            transfer_cutoff_s, waitlist_offer_ttl_s, waiting_room, created_at,
                            refund_cutoff_s, refund_keep_fee_minor, holder_policy, sale_setup)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, {}, $14, $15, $16, $17, $18)",
        d.json("$13"),
    ))
    .bind(&record.event_id)
    .bind(&record.name)
    .bind(record.starts_at)
    .bind(record.on_sale_at)
    .bind(&record.currency)
    .bind(record.hold_ttl_s as i32)
    .bind(record.payment_grace_s as i32)
    .bind(record.max_seats_per_hold as i32)
    .bind(record.max_tickets_per_account as i32)
    .bind(record.exchange_cutoff_s as i32)
    .bind(record.transfer_cutoff_s as i32)
    .bind(record.waitlist_offer_ttl_s as i32)
    .bind(waiting_room_json(&record.waiting_room))
    .bind(now)
    .bind(
        record
            .refund_policy
            .map(|p| i32::try_from(p.fan_refund_cutoff_s).unwrap_or(i32::MAX)),
    )
    .bind(record.refund_policy.map_or(0, |p| p.keep_fee_minor))
    .bind(
        record
            .holder_policy
            .as_ref()
            .map(|p| serde_json::to_string(p).unwrap_or_default()),
    )
    .bind(serde_json::to_string(&record.sale).unwrap_or_else(|_| "{}".into()))
    .execute(&mut tx.conn())
    .await?;
    if let Some(chart) = &spec.chart {
        let text = |value: Result<String, serde_json::Error>| {
            value.map_err(|e| StoreError::Internal(format!("event_chart: {e}")))
        };
        query(
            "INSERT INTO event_chart (event_id, chart_id, chart, category_prices,
                                      accessible_release_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(event_id)
        .bind(&chart.chart_id)
        .bind(text(serde_json::to_string(&chart.chart))?)
        .bind(text(serde_json::to_string(&chart.category_prices))?)
        .bind(chart.accessible_release_at)
        .execute(&mut tx.conn())
        .await?;
    }
    if !spec.sections.is_empty() {
        let sections = &spec.sections;
        let rows = Rows::new()
            .texts("name", sections.iter().map(|s| s.name.as_str()))
            .int4s("position", (0..sections.len()).map(|i| i as i32))
            .int4s("n_rows", sections.iter().map(|s| s.rows as i32))
            .int4s("per_row", sections.iter().map(|s| s.seats_per_row as i32))
            .ints("price", sections.iter().map(|s| s.price_minor));
        query(format!(
            "INSERT INTO section (event_id, name, position, rows, seats_per_row, price_minor)
             SELECT $1, u.name, u.position, u.n_rows, u.per_row, u.price FROM {}",
            rows.table(d, 2, "u"),
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute(&mut tx.conn())
        .await?;
    }
    if !spec.tiers.is_empty() {
        let tiers = &spec.tiers;
        let rows = Rows::new()
            .texts("tier_id", tiers.iter().map(|t| t.tier_id.as_str()))
            .int4s("position", (0..tiers.len()).map(|i| i as i32))
            .texts("name", tiers.iter().map(|t| t.name.as_str()))
            .ints("capacity", tiers.iter().map(|t| i64::from(t.capacity)))
            .ints("price", tiers.iter().map(|t| t.price_minor));
        query(format!(
            "INSERT INTO tier (event_id, tier_id, position, name, capacity, price_minor, available, held, sold)
             SELECT $1, u.tier_id, u.position, u.name, u.capacity, u.price, u.capacity, 0, 0 FROM {}",
            rows.table(d, 2, "u"),
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute(&mut tx.conn())
        .await?;
    }
    // Seats in chunks of one statement each, in key order, so that the primary key's b-tree
    // only ever appends.
    let mut seats: Vec<(String, _, i64)> = spec
        .seats()
        .map(|(seat, price)| (seat.to_string(), seat, price))
        .collect();
    seats.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for chunk in seats.chunks(SEAT_INSERT_CHUNK) {
        let rows = Rows::new()
            .texts("seat_id", chunk.iter().map(|(id, _, _)| id.as_str()))
            .texts("section", chunk.iter().map(|(_, s, _)| s.section.as_str()))
            .int4s("row_no", chunk.iter().map(|(_, s, _)| s.row as i32))
            .int4s("seat_no", chunk.iter().map(|(_, s, _)| s.number as i32))
            .ints("price", chunk.iter().map(|(_, _, p)| *p));
        query(format!(
            "INSERT INTO seat (event_id, seat_id, section, row_no, seat_no, price_minor, status)
             SELECT $1, u.seat_id, u.section, u.row_no, u.seat_no, u.price, 'AVAILABLE' FROM {}",
            rows.table(d, 2, "u"),
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute(&mut tx.conn())
        .await?;
    }
    query("INSERT INTO seatmap (event_id, version) VALUES ($1, 0)")
        .bind(event_id)
        .execute(&mut tx.conn())
        .await?;
    let response = render(&record);
    let answer = NewRecord {
        account_id: scope.account_id.clone(),
        key: scope.key.clone(),
        request_digest: request_digest.to_owned(),
        response: response.clone(),
    };
    idempotency::insert(&mut tx.conn(), event_id, &scope.endpoint, &[answer], now).await?;
    tx.commit().await?;
    Ok(Idempotent::Fresh(response))
}
