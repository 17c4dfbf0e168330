//! Organisers' reports on PostgreSQL (`boxoffice_store::report`): each read is one
//! `REPEATABLE READ READ ONLY` transaction whose first statement reads the store's clock
//! (`boxoffice_now()`), so every figure is of the same instant. Every statement starts from
//! the event's rows by their key (`seat`, `tier`, `ticket`, `orders` all lead theirs with
//! `event_id`) and reaches other tables by their indexes (`exchange_by_order`,
//! `exchange_by_hold`, `payment_operation_by_order`, `ticket_by_exchange`): a report costs
//! one pass over one event's rows, whatever else the store holds.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_store::report::{
    BucketRow, Place, RefundPart, ReportRows, ReportStore, SectionRow, TierRow, TimelineRows,
    TimelineWindow,
};
use boxoffice_store::{EventRecord, StoreResult};
use sqlx::{Postgres, Transaction};

use crate::{PgStore, classify, store_now};

/// Per section: seats, held now, sold, the sold seats' value.
const SECTIONS_SQL: &str = "SELECT s.section, count(*)::bigint,
        count(*) FILTER (WHERE s.status = 'HELD' AND s.hold_expires_at > $2),
        count(*) FILTER (WHERE s.status = 'SOLD'),
        coalesce(sum(s.price_minor) FILTER (WHERE s.status = 'SOLD'), 0)::bigint
   FROM seat s WHERE s.event_id = $1 GROUP BY s.section";

/// Per section: tickets checked in.
const SECTIONS_CHECKED_IN_SQL: &str = "SELECT s.section, count(*)::bigint
   FROM ticket t JOIN seat s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
  WHERE t.event_id = $1 AND t.status = 'CHECKED_IN' GROUP BY s.section";

/// Per tier: capacity, units held now (live holds), sold, tickets checked in.
const TIERS_SQL: &str = "SELECT t.tier_id, t.capacity,
        coalesce((SELECT sum(h.quantity) FROM hold h
                   WHERE h.event_id = t.event_id AND h.tier_id = t.tier_id
                     AND h.status IN ('HELD', 'PAYMENT_PENDING') AND h.expires_at > $2), 0)::bigint,
        t.sold,
        (SELECT count(*) FROM ticket k
          WHERE k.event_id = t.event_id AND k.tier_id = t.tier_id AND k.status = 'CHECKED_IN')::bigint
   FROM tier t WHERE t.event_id = $1";

/// Refunds of exchanges to cheaper seats, per section or tier of the tickets given up.
const EXCHANGE_REFUNDS_SQL: &str =
    "SELECT x.exchange_id, -x.amount_due_minor, s.section, k.tier_id,
        coalesce(sum(coalesce(s.price_minor, r.price_minor)), 0)::bigint
   FROM orders o
   JOIN exchange x ON x.order_id = o.order_id
   JOIN ticket k ON k.exchange_id = x.exchange_id AND k.order_id = o.order_id
   LEFT JOIN seat s ON s.event_id = k.event_id AND s.seat_id = k.seat_id
   LEFT JOIN tier r ON r.event_id = k.event_id AND r.tier_id = k.tier_id
  WHERE o.event_id = $1 AND x.status = 'COMPLETED' AND x.amount_due_minor < 0
    AND x.leg IN ('BOTH', 'OUT')
  GROUP BY x.exchange_id, x.amount_due_minor, s.section, k.tier_id";

/// Refunds of payments captured for orders that kept no seat, per section or tier of the
/// order's seats.
const CANCELLED_REFUNDS_SQL: &str = "SELECT p.operation_id, p.amount_minor, s.section, o.tier_id,
        coalesce(sum(CASE WHEN o.tier_id IS NULL THEN (j.seat->>'priceMinor')::bigint
                          ELSE o.total_minor END), 0)::bigint
   FROM orders o
   JOIN payment_operation p ON p.order_id = o.order_id
   LEFT JOIN LATERAL jsonb_array_elements(o.seats) AS j(seat) ON o.tier_id IS NULL
   LEFT JOIN seat s ON s.event_id = o.event_id AND s.seat_id = j.seat->>'seatId'
  WHERE o.event_id = $1 AND o.status = 'CANCELLED' AND p.status = 'CAPTURED'
  GROUP BY p.operation_id, p.amount_minor, s.section, o.tier_id";

/// The confirmed orders and what their payments charged.
const CHARGED_SQL: &str = "SELECT count(*)::bigint, coalesce(sum(p.amount_minor), 0)::bigint
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED'";

/// Sales (confirmed orders not made by an exchange or a transfer) per bucket of the window: `$2` the
/// window's start (unix ms), `$3` the bucket (ms), `$4`..`$5` the window.
const BUCKETS_SQL: &str = "SELECT floor((extract(epoch FROM o.updated_at) * 1000 - $2::bigint) / $3::bigint)::bigint AS b,
        count(*)::bigint, coalesce(sum(o.quantity), 0)::bigint, coalesce(sum(p.amount_minor), 0)::bigint
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND o.updated_at >= $4 AND o.updated_at < $5
    AND p.provider <> 'transfer'
    AND NOT EXISTS (SELECT 1 FROM exchange x WHERE x.new_hold_id = o.hold_id)
  GROUP BY b ORDER BY b";

/// Every sale, inside the window or not.
const SALES_SQL: &str = "SELECT count(*)::bigint, coalesce(sum(o.quantity), 0)::bigint,
        coalesce(sum(p.amount_minor), 0)::bigint
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED'
    AND p.provider <> 'transfer'
    AND NOT EXISTS (SELECT 1 FROM exchange x WHERE x.new_hold_id = o.hold_id)";

/// A read-only snapshot and the store's clock at its start.
async fn snapshot(
    store: &PgStore,
) -> StoreResult<(Transaction<'static, Postgres>, OffsetDateTime)> {
    let mut tx = store.pool().begin().await.map_err(classify)?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
    let now = store_now(&mut tx).await?;
    Ok((tx, now))
}

type RefundColumns = (String, i64, Option<String>, Option<String>, i64);

fn refund_part(columns: RefundColumns) -> Option<RefundPart> {
    let (refund_id, amount_minor, section, tier_id, face_value_minor) = columns;
    let place = match (section, tier_id) {
        (Some(section), _) => Place::Section(section),
        (None, Some(tier_id)) => Place::Tier(tier_id),
        (None, None) => return None,
    };
    Some(RefundPart {
        refund_id,
        amount_minor,
        place,
        face_value_minor,
    })
}

#[async_trait]
impl ReportStore for PgStore {
    async fn report_rows(&self, event: &EventRecord) -> StoreResult<ReportRows> {
        let (mut tx, now) = snapshot(self).await?;
        let event_id = &event.event_id;
        let checked_in: Vec<(String, i64)> = sqlx::query_as(SECTIONS_CHECKED_IN_SQL)
            .bind(event_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
        let sections = sqlx::query_as::<_, (String, i64, i64, i64, i64)>(SECTIONS_SQL)
            .bind(event_id)
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(
                |(section, seats, held_now, sold, sold_value_minor)| SectionRow {
                    checked_in: checked_in
                        .iter()
                        .find(|(name, _)| *name == section)
                        .map_or(0, |(_, n)| *n),
                    section,
                    seats,
                    held_now,
                    sold,
                    sold_value_minor,
                },
            )
            .collect();
        let tiers = sqlx::query_as::<_, (String, i64, i64, i64, i64)>(TIERS_SQL)
            .bind(event_id)
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(|(tier_id, capacity, held_now, sold, checked_in)| TierRow {
                tier_id,
                capacity,
                held_now,
                sold,
                checked_in,
            })
            .collect();
        let mut refunds = Vec::new();
        for sql in [EXCHANGE_REFUNDS_SQL, CANCELLED_REFUNDS_SQL] {
            let rows: Vec<RefundColumns> = sqlx::query_as(sql)
                .bind(event_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(classify)?;
            refunds.extend(rows.into_iter().filter_map(refund_part));
        }
        let (orders_confirmed, charged_minor): (i64, i64) = sqlx::query_as(CHARGED_SQL)
            .bind(event_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(ReportRows {
            now,
            sections,
            tiers,
            refunds,
            charged_minor,
            orders_confirmed,
        })
    }

    async fn timeline_rows(&self, event: &EventRecord, bucket_s: u32) -> StoreResult<TimelineRows> {
        let (mut tx, now) = snapshot(self).await?;
        let window = TimelineWindow::new(event.on_sale_at, bucket_s, now);
        let from_ms = (window.from.unix_timestamp_nanos() / 1_000_000) as i64;
        let buckets = sqlx::query_as::<_, (i64, i64, i64, i64)>(BUCKETS_SQL)
            .bind(&event.event_id)
            .bind(from_ms)
            .bind(window.bucket_ms())
            .bind(window.from)
            .bind(window.to())
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(|(index, orders, seats, charged_minor)| BucketRow {
                index,
                orders,
                seats,
                charged_minor,
            })
            .collect();
        let (orders_total, seats_total, charged_total_minor): (i64, i64, i64) =
            sqlx::query_as(SALES_SQL)
                .bind(&event.event_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(TimelineRows {
            now,
            window,
            buckets,
            orders_total,
            seats_total,
            charged_total_minor,
        })
    }
}
