//! An event's whole stored inventory in one snapshot, for `boxoffice check`'s invariants
//! (`boxoffice_domain::inventory`).

use boxoffice_domain::hold::SeatStatus;
use boxoffice_domain::inventory::{HoldRecord, Inventory, RefundRecord, SeatRecord};
use boxoffice_store::{
    EXCHANGE_RECORDS_SQL, ORDER_RECORDS_SQL, StoreError, StoreResult, TICKET_RECORDS_SQL,
    WAITLIST_RECORDS_SQL, exchange_record, order_record, ticket_record, waitlist_record,
};

use crate::db::{Db, query};
use crate::hold::{HOLD_COLUMNS, hold_from_row};
use crate::{engine, event, outbox};

/// Every seat, tier, hold, order, ticket, exchange and waiting-list entry of the event, read
/// at one instant (the snapshot starts with the read of the store's clock).
pub async fn load(db: &Db, event_id: &str) -> StoreResult<Option<Inventory>> {
    let Some(event) = event::load(db, event_id).await? else {
        return Ok(None);
    };
    let mut tx = db.snapshot().await?;
    let mut conn = tx.conn();
    let now = outbox::store_now(&mut conn).await?;
    let seats = query(
        "SELECT seat_id, status, hold_id, hold_expires_at, order_id FROM seat
          WHERE event_id = $1 ORDER BY seat_id",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        let (seat_id, status): (String, String) = (row.get(0)?, row.get(1)?);
        let status = SeatStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {status:?}")))?;
        Ok(SeatRecord {
            seat_id,
            status,
            hold_id: row.get(2)?,
            hold_expires_at: row.get(3)?,
            order_id: row.get(4)?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let tiers = query(
        "SELECT tier_id, capacity, available, held, sold, price_minor FROM tier
          WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(engine::tier_row)
    .collect::<StoreResult<Vec<_>>>()?;
    let holds = query(format!(
        "SELECT {HOLD_COLUMNS}, idempotency_key, exchanged_out, phase_id FROM hold
          WHERE event_id = $1 ORDER BY hold_id"
    ))
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        let view = hold_from_row(row)?;
        Ok(HoldRecord {
            hold_id: view.hold_id,
            event_id: view.event_id,
            account_id: view.account_id,
            status: view.status,
            expires_at: view.expires_at,
            seat_ids: view.seats.into_iter().map(|s| s.seat_id).collect(),
            tier_id: view.tier_id,
            quantity: view.quantity,
            idempotency_key: row.get("idempotency_key")?,
            exchanged_out: u32::try_from(row.get::<i32, _>("exchanged_out")?).unwrap_or(0),
            phase_id: row.get("phase_id")?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let orders = query(
        ORDER_RECORDS_SQL
            .replace("{p}", "$1")
            .replace("o.seats,", "CAST(o.seats AS text),"),
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        order_record((
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
            row.get(6)?,
            row.get(7)?,
            row.get(8)?,
            row.get(9)?,
            row.get(10)?,
        ))
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let tickets = query(TICKET_RECORDS_SQL.replace("{p}", "$1"))
        .bind(event_id)
        .fetch_all(&mut conn)
        .await?
        .iter()
        .map(|row| {
            Ok(ticket_record((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
                row.get(5)?,
                row.get(6)?,
                row.get(7)?,
            )))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let exchanges = query(
        EXCHANGE_RECORDS_SQL
            .replace("{p}", "$1")
            .replace("x.ticket_ids,", "CAST(x.ticket_ids AS text),"),
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| exchange_record((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
    .collect::<StoreResult<Vec<_>>>()?;
    let waitlist = query(WAITLIST_RECORDS_SQL.replace("{p}", "$1"))
        .bind(event_id)
        .fetch_all(&mut conn)
        .await?
        .iter()
        .map(|row| {
            Ok(waitlist_record((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
            )))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let refunds = query(
        "SELECT r.refund_id, r.order_id, CAST(r.ticket_ids AS text), r.amount_minor, r.status,
                p.amount_minor, r.seats_released
           FROM refund r JOIN payment_operation p ON p.order_id = r.order_id
          WHERE r.event_id = $1 ORDER BY r.refund_id",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        let ticket_ids: String = row.get(2)?;
        Ok(RefundRecord {
            refund_id: row.get(0)?,
            order_id: row.get(1)?,
            ticket_ids: serde_json::from_str(&ticket_ids)
                .map_err(|e| StoreError::Internal(format!("refund ticket_ids: {e}")))?,
            amount_minor: row.get(3)?,
            status: row.get(4)?,
            paid_minor: row.get(5)?,
            seats_released: row.get(6)?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let cancellation = query("SELECT finished_at FROM event_cancellation WHERE event_id = $1")
        .bind(event_id)
        .fetch_optional(&mut conn)
        .await?
        .map(|row| {
            Ok::<_, StoreError>(boxoffice_domain::inventory::CancellationRecord {
                finished: row
                    .get::<Option<boxoffice_domain::OffsetDateTime>, _>(0)?
                    .is_some(),
            })
        })
        .transpose()?;
    // The orders of priced holds, each with its lines' sum (line 0, the order's fees, included).
    let order_prices = query(
        "SELECT o.order_id, o.total_minor, CAST(sum(l.all_in_minor) AS bigint)
           FROM orders o JOIN hold_line l ON l.event_id = o.event_id AND l.hold_id = o.hold_id
          WHERE o.event_id = $1 GROUP BY o.order_id, o.total_minor ORDER BY o.order_id",
    )
    .bind(event_id)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| {
        Ok(boxoffice_domain::inventory::OrderPriceRecord {
            order_id: row.get(0)?,
            total_minor: row.get(1)?,
            lines_minor: row.get(2)?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    tx.commit().await?;
    Ok(Some(Inventory {
        order_prices,
        cancellation,
        event_id: event_id.to_owned(),
        now,
        max_tickets_per_account: event.max_tickets_per_account,
        seats,
        tiers,
        holds,
        orders,
        tickets,
        exchanges,
        waitlist,
        refunds,
        phases: event.sale.phases.clone(),
        accessibility: event
            .chart
            .as_deref()
            .map(boxoffice_domain::accessibility::Accessibility::of)
            .unwrap_or_default(),
    }))
}
