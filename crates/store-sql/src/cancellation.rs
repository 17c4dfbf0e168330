//! Cancellations (see `boxoffice_store::cancellation`): the group's write of a cancellation,
//! the refunds' steps, and the reads.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::cancellation::{
    CANCELLATION_ACCOUNT, CancellationStep, CancellationView, REASON_EVENT_CANCELLED, topic,
};
use boxoffice_store::engine::GroupWrite;
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::refund::{RefundStatus, RefundView, requested_message, topic as refund_topic};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Dialect, query};
use crate::outbox;

/// The refund key of an order, in SQL (`o` is the order): see `cancellation::refund_key`.
const REFUND_KEY_SQL: &str = "'event.cancelled:' || o.order_id";

/// The group's cancellation, when it has one: the event row locked (a ticket issuance in
/// flight finishes first, and issues void after), the cancellation recorded once, every
/// ticket of the event voided with the reason, and the `event.cancelled` message.
pub async fn write(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let Some(cancelled) = group.effects.event_cancelled() else {
        return Ok(());
    };
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    if d.locks_rows() {
        query("SELECT 1 FROM event WHERE event_id = $1 FOR UPDATE")
            .bind(event_id)
            .execute(conn)
            .await?;
    }
    let request = &cancelled.request;
    query(
        "INSERT INTO event_cancellation (event_id, reason, account_id, idempotency_key,
                                         request_digest, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(event_id)
    .bind(&request.reason)
    .bind(&request.account_id)
    .bind(&request.idempotency_key)
    .bind(&request.request_digest)
    .bind(now)
    .execute_exactly(conn, 1, "the event not cancelled before")
    .await?;
    // An exchange out of the event waiting for its difference ends first (its marks go, and
    // its new hold's sale is refused as for any ended exchange): the old tickets it would
    // give up are void now, and their money comes back with the order's refund.
    let waiting: Vec<String> = query(
        "SELECT new_hold_id FROM exchange
          WHERE from_event_id = $1 AND status = 'PAYMENT_REQUIRED' AND leg IN ('BOTH', 'OUT')",
    )
    .bind(event_id)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<_>>()?;
    let waiting: Vec<&str> = waiting.iter().map(String::as_str).collect();
    crate::exchange::end_exchanges_of(conn, &waiting, ExchangeStatus::Failed, now).await?;
    query(
        "UPDATE ticket SET status = 'VOIDED', void_reason = $2
          WHERE event_id = $1 AND status IN ('VALID', 'CHECKED_IN')",
    )
    .bind(event_id)
    .bind(REASON_EVENT_CANCELLED)
    .execute(conn)
    .await?;
    let view = view_in(conn, event_id).await?;
    if let Some((view, _, _)) = view {
        outbox::insert(conn, event_id, topic::EVENT_CANCELLED, view.message(), now).await?;
    }
    Ok(())
}

/// Whether the event is cancelled, read in `conn`'s transaction.
pub async fn is_cancelled(conn: &mut Conn<'_>, event_id: &str) -> StoreResult<bool> {
    Ok(
        query("SELECT 1 FROM event_cancellation WHERE event_id = $1")
            .bind(event_id)
            .fetch_optional(conn)
            .await?
            .is_some(),
    )
}

pub async fn cancelled(db: &Db, event_id: &str) -> StoreResult<bool> {
    is_cancelled(&mut db.read().await?.conn(), event_id).await
}

pub async fn get(
    db: &Db,
    event_id: &str,
) -> StoreResult<Option<(CancellationView, String, String)>> {
    view_in(&mut db.read().await?.conn(), event_id).await
}

/// The cancellation and its counts (see [`CancellationView`]), with its key and digest.
async fn view_in(
    conn: &mut Conn<'_>,
    event_id: &str,
) -> StoreResult<Option<(CancellationView, String, String)>> {
    let Some(row) = query(
        "SELECT reason, account_id, idempotency_key, request_digest, created_at, finished_at
           FROM event_cancellation WHERE event_id = $1",
    )
    .bind(event_id)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    let counts = query(
        "WITH r AS (
           SELECT order_id,
                  sum(CASE WHEN status = 'SUCCEEDED' THEN amount_minor ELSE 0 END) AS back,
                  sum(CASE WHEN status = 'PENDING' THEN 1 ELSE 0 END) AS pending,
                  sum(CASE WHEN status = 'FAILED' AND account_id = $2 THEN 1 ELSE 0 END) AS failed
             FROM refund WHERE event_id = $1 GROUP BY order_id)
         SELECT CAST(count(*) AS bigint),
                CAST(coalesce(sum(CASE WHEN p.amount_minor <= coalesce(r.back, 0)
                                        AND coalesce(r.pending, 0) = 0 THEN 1 ELSE 0 END), 0) AS bigint),
                CAST(coalesce(sum(CASE WHEN coalesce(r.failed, 0) > 0 THEN 1 ELSE 0 END), 0) AS bigint)
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
           LEFT JOIN r ON r.order_id = o.order_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED'
            AND p.status IN ('AUTHORIZED', 'CAPTURED', 'VOIDED')",
    )
    .bind(event_id)
    .bind(CANCELLATION_ACCOUNT)
    .fetch_one(conn)
    .await?;
    let ours = query(
        "SELECT CAST(coalesce(sum(CASE WHEN status = 'SUCCEEDED' THEN amount_minor ELSE 0 END), 0) AS bigint),
                CAST(coalesce(sum(CASE WHEN status = 'PENDING' THEN 1 ELSE 0 END), 0) AS bigint)
           FROM refund WHERE event_id = $1 AND account_id = $2",
    )
    .bind(event_id)
    .bind(CANCELLATION_ACCOUNT)
    .fetch_one(conn)
    .await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let view = CancellationView {
        event_id: event_id.to_owned(),
        reason: row.get(0)?,
        account_id: row.get(1)?,
        created_at: row.get(4)?,
        finished_at: row.get(5)?,
        orders: count(counts.get(0)?),
        refunded: count(counts.get(1)?),
        failed: count(counts.get(2)?),
        amount_refunded_minor: ours.get(0)?,
        pending: count(ours.get(1)?),
    };
    Ok(Some((view, row.get(2)?, row.get(3)?)))
}

/// One step of the event's refunds (see `CancellationStore::cancellation_step`).
pub async fn step(db: &Db, event_id: &str, limit: u32) -> StoreResult<CancellationStep> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let row = query(format!(
        "SELECT cursor_order_id, finished_at FROM event_cancellation WHERE event_id = $1 {}",
        d.lock("FOR UPDATE")
    ))
    .bind(event_id)
    .fetch_optional(&mut tx.conn())
    .await?;
    let Some(row) = row else {
        return Err(StoreError::Conflict(format!(
            "event {event_id} is not cancelled"
        )));
    };
    let cursor: String = row.get(0)?;
    if row.get::<Option<OffsetDateTime>, _>(1)?.is_some() {
        return Ok(CancellationStep {
            recorded: 0,
            finished: true,
        });
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    // Read before the orders: a payment that settles after this read is seen by the next
    // step's pass (see the module of `boxoffice_store::cancellation`).
    let out = query(
        "SELECT CAST(count(*) AS bigint) FROM orders
          WHERE event_id = $1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(event_id)
    .fetch_one(&mut tx.conn())
    .await?
    .get::<i64, _>(0)?;
    let limit = limit.clamp(1, boxoffice_store::cancellation::CANCELLATION_STEP_MAX);
    let orders = owed_orders(&mut tx.conn(), event_id, &cursor, limit).await?;
    let mut messages = Vec::with_capacity(orders.len());
    for owed in &orders {
        let refund = RefundView {
            refund_id: uuid::Uuid::now_v7().to_string(),
            event_id: event_id.to_owned(),
            order_id: owed.order_id.clone(),
            account_id: CANCELLATION_ACCOUNT.to_owned(),
            operation_id: owed.operation_id.clone(),
            ticket_ids: Vec::new(),
            amount_minor: owed.amount_minor,
            currency: owed.currency.clone(),
            status: RefundStatus::Pending,
            reason: REASON_EVENT_CANCELLED.to_owned(),
            provider_ref: None,
            last_error: None,
            created_at: now,
            settled_at: None,
        };
        query(
            "INSERT INTO refund (event_id, refund_id, order_id, account_id, idempotency_key,
                                 request_digest, operation_id, ticket_ids, amount_minor, currency,
                                 status, reason, created_at)
             VALUES ($1, $2, $3, $4, $5, '', $6, $7, $8, $9, 'PENDING', $10, $11)",
        )
        .bind(event_id)
        .bind(&refund.refund_id)
        .bind(&refund.order_id)
        .bind(CANCELLATION_ACCOUNT)
        .bind(boxoffice_store::cancellation::refund_key(&refund.order_id))
        .bind(&refund.operation_id)
        .bind(serde_json::json!([]))
        .bind(refund.amount_minor)
        .bind(&refund.currency)
        .bind(REASON_EVENT_CANCELLED)
        .bind(now)
        .execute(&mut tx.conn())
        .await?;
        messages.push((
            event_id,
            refund_topic::REFUND_REQUESTED,
            requested_message(&refund).to_string(),
        ));
    }
    outbox::insert_encoded(&mut tx.conn(), &messages, now).await?;
    let recorded = u32::try_from(orders.len()).unwrap_or(u32::MAX);
    let pass_done = orders.len() < limit as usize;
    let mut finished = false;
    if !pass_done {
        let last = orders
            .last()
            .map(|o| o.order_id.clone())
            .unwrap_or_default();
        set_cursor(&mut tx.conn(), event_id, &last).await?;
    } else if !cursor.is_empty() || recorded > 0 {
        // The pass ended: the next step starts from the beginning.
        set_cursor(&mut tx.conn(), event_id, "").await?;
    } else if out == 0 && pending_refunds(&mut tx.conn(), event_id).await? == 0 {
        // A whole pass from the beginning found nothing owed, no payment is out and every
        // refund settled: done.
        query("UPDATE event_cancellation SET finished_at = $2 WHERE event_id = $1 AND finished_at IS NULL")
            .bind(event_id)
            .bind(now)
            .execute_exactly(&mut tx.conn(), 1, "the cancellation not finished")
            .await?;
        if let Some((view, _, _)) = view_in(&mut tx.conn(), event_id).await? {
            outbox::insert(
                &mut tx.conn(),
                event_id,
                topic::EVENT_CANCELLED,
                view.message(),
                now,
            )
            .await?;
        }
        finished = true;
    }
    tx.commit().await?;
    Ok(CancellationStep { recorded, finished })
}

async fn set_cursor(conn: &mut Conn<'_>, event_id: &str, cursor: &str) -> StoreResult<()> {
    query("UPDATE event_cancellation SET cursor_order_id = $2 WHERE event_id = $1")
        .bind(event_id)
        .bind(cursor)
        .execute_exactly(conn, 1, "the cancellation's cursor")
        .await
}

async fn pending_refunds(conn: &mut Conn<'_>, event_id: &str) -> StoreResult<i64> {
    query("SELECT CAST(count(*) AS bigint) FROM refund WHERE event_id = $1 AND status = 'PENDING'")
        .bind(event_id)
        .fetch_one(conn)
        .await?
        .get(0)
}

/// An order the cancellation still owes money.
struct Owed {
    order_id: String,
    operation_id: String,
    amount_minor: i64,
    currency: String,
}

/// The next `limit` paid orders of the event after `cursor`, locked, that still owe money
/// (their payment less the refunds that did not fail) and have no cancellation refund.
async fn owed_orders(
    conn: &mut Conn<'_>,
    event_id: &str,
    cursor: &str,
    limit: u32,
) -> StoreResult<Vec<Owed>> {
    let d = conn.dialect();
    let refunded = "coalesce((SELECT sum(r.amount_minor) FROM refund r
                               WHERE r.order_id = o.order_id AND r.status <> 'FAILED'), 0)";
    let rows = query(format!(
        "SELECT o.order_id, p.operation_id, p.currency,
                CAST(p.amount_minor - {refunded} AS bigint)
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.event_id = $1 AND o.order_id > $2 AND o.status = 'CONFIRMED'
            AND p.status IN ('AUTHORIZED', 'CAPTURED')
            AND p.amount_minor > {refunded}
            AND NOT EXISTS (SELECT 1 FROM refund k
                             WHERE k.account_id = $3 AND k.idempotency_key = {REFUND_KEY_SQL})
          ORDER BY o.order_id LIMIT $4 {lock}",
        lock = match d {
            Dialect::Postgres => "FOR UPDATE OF o",
            Dialect::Sqlite => "",
        },
    ))
    .bind(event_id)
    .bind(cursor)
    .bind(CANCELLATION_ACCOUNT)
    .bind(i64::from(limit))
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Owed {
                order_id: row.get(0)?,
                operation_id: row.get(1)?,
                currency: row.get(2)?,
                amount_minor: row.get(3)?,
            })
        })
        .collect()
}

/// The events whose cancellation is not finished.
pub async fn open(db: &Db) -> StoreResult<Vec<String>> {
    query(format!(
        "SELECT event_id FROM event_cancellation WHERE finished_at IS NULL AND {}
          ORDER BY created_at",
        db.dialect().not_moving_in("event_id")
    ))
    .fetch_all(&mut db.read().await?.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect()
}
