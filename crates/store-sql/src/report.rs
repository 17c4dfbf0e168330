//! Organisers' reports (`boxoffice_store::report`): each read is one read-only snapshot
//! ([`Db::snapshot`]) whose first statement reads the store's clock, so every figure is of the
//! same instant. Every statement starts from the event's rows by their key (`seat`, `tier`,
//! `ticket`, `orders` all lead theirs with `event_id`) and reaches other tables by their
//! indexes (`exchange_by_order`, `exchange_by_hold`, `payment_operation_by_order`,
//! `ticket_by_exchange`): a report costs one pass over one event's rows, whatever else the
//! store holds.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::report::{
    BoxOfficeRow, BucketRow, Place, RefundPart, ReportRows, SectionRow, TierRow, TimelineRows,
    TimelineWindow,
};
use boxoffice_store::{EventRecord, StoreResult};

use crate::db::{Db, Dialect, Row, Tx, query};

/// Per section: seats, held now (`$2`), sold, the sold seats' value.
const SECTIONS_SQL: &str = "SELECT s.section, count(*),
        count(*) FILTER (WHERE s.status = 'HELD' AND s.hold_expires_at > $2),
        count(*) FILTER (WHERE s.status = 'SOLD'),
        CAST(coalesce(sum(s.price_minor) FILTER (WHERE s.status = 'SOLD'), 0) AS bigint)
   FROM seat s WHERE s.event_id = $1 GROUP BY s.section";

/// Per section: tickets checked in.
const SECTIONS_CHECKED_IN_SQL: &str = "SELECT s.section, count(*)
   FROM ticket t JOIN seat s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
  WHERE t.event_id = $1 AND t.status = 'CHECKED_IN' GROUP BY s.section";

/// Per section: `SOLD` seats of comps (payment `comp`, issue 40) and Σ their prices.
const SECTIONS_COMPS_SQL: &str = "SELECT s.section, count(*),
        CAST(coalesce(sum(s.price_minor), 0) AS bigint)
   FROM seat s JOIN payment_operation p ON p.order_id = s.order_id
  WHERE s.event_id = $1 AND s.status = 'SOLD' AND p.provider = 'comp'
  GROUP BY s.section";

/// Per tier: units of confirmed comps.
const TIERS_COMPS_SQL: &str = "SELECT o.tier_id, CAST(coalesce(sum(o.quantity), 0) AS bigint),
        CAST(0 AS bigint)
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND o.tier_id IS NOT NULL
    AND p.provider = 'comp'
  GROUP BY o.tier_id";

/// Per tier: capacity, units held now (live holds at `$2`), sold, tickets checked in.
const TIERS_SQL: &str = "SELECT t.tier_id, t.capacity,
        CAST(coalesce((SELECT sum(h.quantity) FROM hold h
                   WHERE h.event_id = t.event_id AND h.tier_id = t.tier_id
                     AND h.status IN ('HELD', 'PAYMENT_PENDING') AND h.expires_at > $2), 0)
             AS bigint),
        t.sold,
        (SELECT count(*) FROM ticket k
          WHERE k.event_id = t.event_id AND k.tier_id = t.tier_id AND k.status = 'CHECKED_IN')
   FROM tier t WHERE t.event_id = $1";

/// Refunds of exchanges to cheaper seats, per section or tier of the tickets given up (the
/// leg that gave them up: the whole exchange, or its first half across shards).
const EXCHANGE_REFUNDS_SQL: &str =
    "SELECT x.exchange_id, -x.amount_due_minor, s.section, k.tier_id,
        CAST(coalesce(sum(coalesce(s.price_minor, r.price_minor)), 0) AS bigint)
   FROM orders o
   JOIN exchange x ON x.order_id = o.order_id
   JOIN ticket k ON k.exchange_id = x.exchange_id AND k.order_id = o.order_id
   LEFT JOIN seat s ON s.event_id = k.event_id AND s.seat_id = k.seat_id
   LEFT JOIN tier r ON r.event_id = k.event_id AND r.tier_id = k.tier_id
  WHERE o.event_id = $1 AND x.status = 'COMPLETED' AND x.amount_due_minor < 0
    AND x.leg IN ('BOTH', 'OUT')
  GROUP BY x.exchange_id, x.amount_due_minor, s.section, k.tier_id";

/// Refunds of payments captured for orders that kept no seat, per section or tier of the
/// order's seats (`{seats}`: the elements of the order's seat list as `j.value`).
fn cancelled_refunds_sql(d: Dialect) -> String {
    let seats = match d {
        Dialect::Postgres => "LATERAL jsonb_array_elements(o.seats) AS j(value)",
        Dialect::Sqlite => "json_each(o.seats) AS j",
    };
    format!(
        "SELECT p.operation_id, p.amount_minor, s.section, o.tier_id,
            CAST(coalesce(sum(CASE WHEN o.tier_id IS NULL
                                   THEN CAST(j.value->>'priceMinor' AS bigint)
                                   ELSE o.total_minor END), 0) AS bigint)
           FROM orders o
           JOIN payment_operation p ON p.order_id = o.order_id
           LEFT JOIN {seats} ON o.tier_id IS NULL
           LEFT JOIN seat s ON s.event_id = o.event_id AND s.seat_id = j.value->>'seatId'
          WHERE o.event_id = $1 AND o.status = 'CANCELLED' AND p.status = 'CAPTURED'
          GROUP BY p.operation_id, p.amount_minor, s.section, o.tier_id"
    )
}

/// Confirmed box-office sales by payment kind (issue 40): orders, seats and units, charged.
const BOX_OFFICE_SQL: &str = "SELECT b.payment_kind, count(*),
        CAST(coalesce(sum(o.quantity), 0) AS bigint),
        CAST(coalesce(sum(p.amount_minor), 0) AS bigint)
   FROM box_office_sale b
   JOIN orders o ON o.event_id = b.event_id AND o.order_id = b.order_id
   JOIN payment_operation p ON p.order_id = o.order_id
  WHERE b.event_id = $1 AND o.status = 'CONFIRMED'
  GROUP BY b.payment_kind ORDER BY b.payment_kind";

/// The confirmed orders and what their payments charged.
const CHARGED_SQL: &str = "SELECT count(*), CAST(coalesce(sum(p.amount_minor), 0) AS bigint)
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED'";

/// Sales (confirmed orders not made by an exchange or a transfer) per bucket of the window:
/// `$2` the window's start in unix ms, `$3` the bucket (ms), `$4`..`$5` the window.
fn buckets_sql(d: Dialect) -> String {
    // A sale's bucket: whole buckets from the window's start (never negative: the sale is
    // inside the window, so truncating is flooring).
    let bucket = match d {
        Dialect::Postgres => {
            "floor((extract(epoch FROM o.updated_at) * 1000 - $2::bigint) / $3::bigint)::bigint"
        }
        Dialect::Sqlite => "(o.updated_at - $2) / $3",
    };
    format!(
        "SELECT {bucket} AS b, count(*), CAST(coalesce(sum(o.quantity), 0) AS bigint),
                CAST(coalesce(sum(p.amount_minor), 0) AS bigint)
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED'
            AND o.updated_at >= $4 AND o.updated_at < $5
            AND p.provider <> 'transfer'
            AND NOT EXISTS (SELECT 1 FROM exchange x WHERE x.new_hold_id = o.hold_id)
          GROUP BY b ORDER BY b"
    )
}

/// Every sale, inside the window or not.
const SALES_SQL: &str = "SELECT count(*), CAST(coalesce(sum(o.quantity), 0) AS bigint),
        CAST(coalesce(sum(p.amount_minor), 0) AS bigint)
   FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
  WHERE o.event_id = $1 AND o.status = 'CONFIRMED'
    AND p.provider <> 'transfer'
    AND NOT EXISTS (SELECT 1 FROM exchange x WHERE x.new_hold_id = o.hold_id)";

/// A read-only snapshot and the store's clock at its start.
async fn snapshot(db: &Db) -> StoreResult<(Tx, OffsetDateTime)> {
    let mut tx = db.snapshot().await?;
    let now = query(format!("SELECT {}", db.dialect().now_ms()))
        .fetch_one(&mut tx.conn())
        .await?
        .get(0)?;
    Ok((tx, now))
}

fn refund_part(row: &Row) -> StoreResult<Option<RefundPart>> {
    let place = match (row.get(2)?, row.get(3)?) {
        (Some(section), _) => Place::Section(section),
        (None, Some(tier_id)) => Place::Tier(tier_id),
        (None, None) => return Ok(None),
    };
    Ok(Some(RefundPart {
        refund_id: row.get(0)?,
        amount_minor: row.get(1)?,
        place,
        face_value_minor: row.get(4)?,
    }))
}

pub async fn report_rows(db: &Db, event: &EventRecord) -> StoreResult<ReportRows> {
    let (mut tx, now) = snapshot(db).await?;
    let event_id = &event.event_id;
    let checked_in = query(SECTIONS_CHECKED_IN_SQL)
        .bind(event_id)
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| Ok((row.get::<String, _>(0)?, row.get::<i64, _>(1)?)))
        .collect::<StoreResult<Vec<_>>>()?;
    let comps_of = |rows: Vec<Row>| -> StoreResult<Vec<(String, i64, i64)>> {
        rows.iter()
            .map(|row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .collect()
    };
    let section_comps = comps_of(
        query(SECTIONS_COMPS_SQL)
            .bind(event_id)
            .fetch_all(&mut tx.conn())
            .await?,
    )?;
    let tier_comps = comps_of(
        query(TIERS_COMPS_SQL)
            .bind(event_id)
            .fetch_all(&mut tx.conn())
            .await?,
    )?;
    let comps_in = |comps: &[(String, i64, i64)], place: &str| {
        comps
            .iter()
            .find(|(p, _, _)| p == place)
            .map_or((0, 0), |(_, n, value)| (*n, *value))
    };
    let sections = query(SECTIONS_SQL)
        .bind(event_id)
        .bind(now)
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| {
            let section: String = row.get(0)?;
            let (comps, comps_value_minor) = comps_in(&section_comps, &section);
            Ok(SectionRow {
                comps,
                comps_value_minor,
                checked_in: checked_in
                    .iter()
                    .find(|(name, _)| *name == section)
                    .map_or(0, |(_, n)| *n),
                section,
                seats: row.get(1)?,
                held_now: row.get(2)?,
                sold: row.get(3)?,
                sold_value_minor: row.get(4)?,
            })
        })
        .collect::<StoreResult<_>>()?;
    let tiers = query(TIERS_SQL)
        .bind(event_id)
        .bind(now)
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| {
            let tier_id: String = row.get(0)?;
            Ok(TierRow {
                comps: comps_in(&tier_comps, &tier_id).0,
                tier_id,
                capacity: row.get(1)?,
                held_now: row.get(2)?,
                sold: row.get(3)?,
                checked_in: row.get(4)?,
            })
        })
        .collect::<StoreResult<_>>()?;
    let mut refunds = Vec::new();
    for sql in [
        EXCHANGE_REFUNDS_SQL.to_owned(),
        cancelled_refunds_sql(db.dialect()),
    ] {
        for row in query(sql).bind(event_id).fetch_all(&mut tx.conn()).await? {
            refunds.extend(refund_part(&row)?);
        }
    }
    let charged = query(CHARGED_SQL)
        .bind(event_id)
        .fetch_one(&mut tx.conn())
        .await?;
    let (orders_confirmed, charged_minor) = (charged.get(0)?, charged.get(1)?);
    let box_office = query(BOX_OFFICE_SQL)
        .bind(event_id)
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| {
            Ok(BoxOfficeRow {
                payment_kind: row.get(0)?,
                orders: row.get(1)?,
                seats: row.get(2)?,
                charged_minor: row.get(3)?,
            })
        })
        .collect::<StoreResult<_>>()?;
    tx.commit().await?;
    Ok(ReportRows {
        now,
        sections,
        tiers,
        refunds,
        charged_minor,
        orders_confirmed,
        box_office,
    })
}

pub async fn timeline_rows(
    db: &Db,
    event: &EventRecord,
    bucket_s: u32,
) -> StoreResult<TimelineRows> {
    let (mut tx, now) = snapshot(db).await?;
    let window = TimelineWindow::new(event.on_sale_at, bucket_s, now);
    let buckets = query(buckets_sql(db.dialect()))
        .bind(&event.event_id)
        .bind(crate::db::to_ms(window.from))
        .bind(window.bucket_ms())
        .bind(window.from)
        .bind(window.to())
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| {
            Ok(BucketRow {
                index: row.get(0)?,
                orders: row.get(1)?,
                seats: row.get(2)?,
                charged_minor: row.get(3)?,
            })
        })
        .collect::<StoreResult<_>>()?;
    let sales = query(SALES_SQL)
        .bind(&event.event_id)
        .fetch_one(&mut tx.conn())
        .await?;
    tx.commit().await?;
    Ok(TimelineRows {
        now,
        window,
        buckets,
        orders_total: sales.get(0)?,
        seats_total: sales.get(1)?,
        charged_total_minor: sales.get(2)?,
    })
}
