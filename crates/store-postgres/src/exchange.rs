//! Exchanges on PostgreSQL (see `boxoffice_store::exchange` for the rules). Lock order: the
//! order's tickets, then seats in (event, seat) order, then tiers in (event, tier) order, then
//! hold, order and exchange rows; the seat-map version rows last (`seatmap::record`).

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::Idempotent;
use boxoffice_store::checkout::{OrderView, topic};
use boxoffice_store::exchange::{
    ExchangeBegun, ExchangeRefused, ExchangeStart, ExchangeStatus, ExchangeView, OwnedTicket,
    RenderExchange, Surrender, ToSide, judge_times, surrender, within_limit,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HeldSeat, HoldView, NewRecord, StoreError, StoreResult, held_seats_json};
use sqlx::{Postgres, Row, Transaction};

use crate::checkout::{load_order, load_order_head, outbox, outbox_many, ticket_from_row};
use crate::{
    HOLD_COLUMNS, classify, hold_from_row, insert_records, prior_answer, seatmap, store_now,
};

const EXCHANGE_COLUMNS: &str = "exchange_id, account_id, order_id, from_event_id, to_event_id,
     ticket_ids::text AS ticket_ids, from_value_minor, new_hold_id, new_order_id, to_value_minor,
     amount_due_minor, currency, status, created_at, updated_at";

async fn load_exchange(
    conn: &mut sqlx::PgConnection,
    exchange_id: &str,
) -> StoreResult<Option<ExchangeView>> {
    let sql = format!("SELECT {EXCHANGE_COLUMNS} FROM exchange WHERE exchange_id = $1");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(exchange_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?
    else {
        return Ok(None);
    };
    let new_hold_id: String = row.get("new_hold_id");
    let sql = format!("SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = $1");
    let hold_row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&new_hold_id)
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let status: String = row.get("status");
    let ticket_ids: String = row.get("ticket_ids");
    Ok(Some(ExchangeView {
        exchange_id: row.get("exchange_id"),
        account_id: row.get("account_id"),
        order_id: row.get("order_id"),
        from_event_id: row.get("from_event_id"),
        to_event_id: row.get("to_event_id"),
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?,
        from_value_minor: row.get("from_value_minor"),
        new_hold: hold_from_row(&hold_row)?,
        new_order_id: row.get("new_order_id"),
        to_value_minor: row.get("to_value_minor"),
        amount_due_minor: row.get("amount_due_minor"),
        currency: row.get("currency"),
        status: ExchangeStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?,
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    }))
}

/// Locks seats of one or two events in (event, seat) order; returns
/// `(event, seat, status, hold_expires_at, order_id)` of each.
async fn lock_seats(
    tx: &mut Transaction<'_, Postgres>,
    mut wanted: Vec<(String, String)>,
) -> StoreResult<
    Vec<(
        String,
        String,
        String,
        Option<OffsetDateTime>,
        Option<String>,
    )>,
> {
    wanted.sort();
    wanted.dedup();
    let mut out = Vec::with_capacity(wanted.len());
    let mut i = 0;
    while i < wanted.len() {
        let event_id = wanted[i].0.clone();
        let mut ids = Vec::new();
        while i < wanted.len() && wanted[i].0 == event_id {
            ids.push(wanted[i].1.clone());
            i += 1;
        }
        let rows = sqlx::query_as::<_, (String, String, Option<OffsetDateTime>, Option<String>)>(
            "SELECT seat_id, status, hold_expires_at, order_id FROM seat
              WHERE event_id = $1 AND seat_id = ANY($2) ORDER BY seat_id FOR UPDATE",
        )
        .bind(&event_id)
        .bind(&ids)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        out.extend(
            rows.into_iter()
                .map(|(seat, status, until, order)| (event_id.clone(), seat, status, until, order)),
        );
    }
    Ok(out)
}

/// Gives up the surrendered tickets: voided (keeping the exchange's id), their seats back on
/// sale or their tier units returned, the old hold's count of units that left raised.
async fn swap_out(
    tx: &mut Transaction<'_, Postgres>,
    exchange_id: &str,
    old: &OrderView,
    gone: &Surrender,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let voided = sqlx::query(
        "UPDATE ticket SET status = 'VOIDED', exchange_id = $2
          WHERE ticket_id = ANY($1) AND status = 'VALID' AND (exchange_id IS NULL OR exchange_id = $2)",
    )
    .bind(&gone.ticket_ids)
    .bind(exchange_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if voided != gone.ticket_ids.len() as u64 {
        return Err(StoreError::Internal(format!(
            "exchange {exchange_id} voided {voided} of {} tickets",
            gone.ticket_ids.len()
        )));
    }
    if !gone.seat_ids.is_empty() {
        let freed = sqlx::query_scalar::<_, String>(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = version + 1
              WHERE event_id = $1 AND seat_id = ANY($2) AND status = 'SOLD' AND order_id = $3
             RETURNING seat_id",
        )
        .bind(&old.event_id)
        .bind(&gone.seat_ids)
        .bind(&old.order_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if freed.len() != gone.seat_ids.len() {
            return Err(StoreError::Internal(format!(
                "exchange {exchange_id} freed {} of {} seats of order {}",
                freed.len(),
                gone.seat_ids.len(),
                old.order_id
            )));
        }
        for seat_id in &freed {
            map.seat(&old.event_id, seat_id, SeatStatus::Available, None);
        }
    }
    if let Some((tier_id, units)) = &gone.tier {
        let available = sqlx::query_scalar::<_, i64>(
            "UPDATE tier SET sold = sold - $3, available = available + $3 WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&old.event_id)
        .bind(tier_id)
        .bind(i64::from(*units))
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        map.tier(&old.event_id, tier_id, available);
    }
    sqlx::query("UPDATE hold SET exchanged_out = exchanged_out + $2 WHERE hold_id = $1")
        .bind(&old.hold_id)
        .bind(gone.quantity() as i32)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    Ok(())
}

/// The surrender an exchange marked, read back from its tickets (for the final swap).
async fn marked_surrender(
    tx: &mut Transaction<'_, Postgres>,
    exchange_id: &str,
    old: &OrderView,
    from_value_minor: i64,
) -> StoreResult<Surrender> {
    let rows = sqlx::query_as::<_, (String, Option<String>)>(
        "SELECT ticket_id, seat_id FROM ticket WHERE exchange_id = $1 AND status = 'VALID' ORDER BY unit FOR UPDATE",
    )
    .bind(exchange_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    let seat_ids: Vec<String> = rows.iter().filter_map(|(_, s)| s.clone()).collect();
    Ok(Surrender {
        tier: old
            .tier_id
            .clone()
            .map(|tier_id| (tier_id, rows.len() as u32)),
        ticket_ids: rows.into_iter().map(|(t, _)| t).collect(),
        seat_ids,
        value_minor: from_value_minor,
    })
}

/// Called by the confirmation of a hold's order: if the hold is an exchange's, the old side is
/// swapped out in the same transaction and the exchange completes.
pub(crate) async fn complete_exchange_of(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
    new_order_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let Some((exchange_id, old_order_id, from_value)) = sqlx::query_as::<_, (String, String, i64)>(
        "SELECT exchange_id, order_id, from_value_minor FROM exchange
              WHERE new_hold_id = $1 AND status = 'PAYMENT_REQUIRED' FOR UPDATE",
    )
    .bind(&hold.hold_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    else {
        return Ok(());
    };
    let old = load_order(tx, &old_order_id).await?.ok_or_else(|| {
        StoreError::Internal(format!("exchange {exchange_id} lost order {old_order_id}"))
    })?;
    let gone = marked_surrender(tx, &exchange_id, &old, from_value).await?;
    lock_seats(
        tx,
        gone.seat_ids
            .iter()
            .map(|s| (old.event_id.clone(), s.clone()))
            .collect(),
    )
    .await?;
    swap_out(tx, &exchange_id, &old, &gone, map).await?;
    sqlx::query(
        "UPDATE exchange SET status = 'COMPLETED', new_order_id = $2, updated_at = $3
          WHERE exchange_id = $1 AND status = 'PAYMENT_REQUIRED'",
    )
    .bind(&exchange_id)
    .bind(new_order_id)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    outbox(
        tx,
        &old.event_id,
        boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
        serde_json::json!({"exchangeId": exchange_id, "orderId": old.order_id, "newOrderId": new_order_id}),
        now,
    )
    .await
}

/// Whether the hold may be sold: it is no exchange's, or its exchange still waits for
/// payment with every ticket it gave up still marked (a compensation that cancelled the old
/// order ends the exchange; a sale then would sell the new seats for the difference only).
pub(crate) async fn still_open(
    tx: &mut Transaction<'_, Postgres>,
    hold_id: &str,
) -> StoreResult<bool> {
    let Some((exchange_id, status, n_tickets)) = sqlx::query_as::<_, (String, String, i32)>(
        "SELECT exchange_id, status, jsonb_array_length(ticket_ids) FROM exchange WHERE new_hold_id = $1",
    )
    .bind(hold_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    else {
        return Ok(true);
    };
    let marked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ticket WHERE exchange_id = $1 AND status = 'VALID'",
    )
    .bind(&exchange_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(status == ExchangeStatus::PaymentRequired.as_str() && marked == i64::from(n_tickets))
}

/// Called whenever holds end without a sale (released, expired, payment failed): their
/// exchanges end too and the old tickets lose their mark, valid again. Conditional on the
/// exchange's status: a second call finds nothing to do.
pub(crate) async fn end_exchanges_of(
    tx: &mut Transaction<'_, Postgres>,
    hold_ids: &[&str],
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let ended = sqlx::query_as::<_, (String, String, String)>(
        "UPDATE exchange SET status = $2, updated_at = $3
          WHERE new_hold_id = ANY($1) AND status = 'PAYMENT_REQUIRED'
         RETURNING exchange_id, from_event_id, order_id",
    )
    .bind(hold_ids)
    .bind(status.as_str())
    .bind(now)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    if ended.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = ended.iter().map(|(x, _, _)| x.as_str()).collect();
    sqlx::query(
        "UPDATE ticket SET exchange_id = NULL WHERE exchange_id = ANY($1) AND status = 'VALID'",
    )
    .bind(&ids)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    for (exchange_id, event_id, order_id) in &ended {
        outbox(
            tx,
            event_id,
            boxoffice_store::exchange::topic::EXCHANGE_ENDED,
            serde_json::json!({"exchangeId": exchange_id, "orderId": order_id, "status": status.as_str()}),
            now,
        )
        .await?;
    }
    Ok(())
}

impl crate::PgStore {
    pub(crate) async fn exchange_by_id(
        &self,
        exchange_id: &str,
    ) -> StoreResult<Option<ExchangeView>> {
        let mut conn = self.pool().acquire().await.map_err(classify)?;
        load_exchange(&mut conn, exchange_id).await
    }

    pub(crate) async fn begin_exchange_once(
        &self,
        start: &ExchangeStart,
        render: &RenderExchange,
    ) -> StoreResult<ExchangeBegun> {
        let (from_event, to_event) = (&start.from_event, &start.to_event);
        let mut tx = self.pool().begin().await.map_err(classify)?;
        if let Some(answer) = prior_answer(&mut tx, &start.scope, &start.request_digest).await? {
            return Ok(match answer {
                Idempotent::Replayed(stored) => ExchangeBegun::Replayed(stored),
                _ => ExchangeBegun::KeyReusedWithOtherRequest,
            });
        }
        // The order's tickets first: a second exchange or a check-in of them waits here.
        let rows = sqlx::query("SELECT * FROM ticket WHERE order_id = $1 ORDER BY unit FOR UPDATE")
            .bind(&start.order_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
        let tickets: Vec<OwnedTicket> = rows
            .iter()
            .map(|row| OwnedTicket {
                ticket_id: row.get("ticket_id"),
                seat_id: row.get("seat_id"),
                tier_id: row.get("tier_id"),
                unit: u32::try_from(row.get::<i32, _>("unit")).unwrap_or(0),
                status: row.get("status"),
                exchange_id: row.get("exchange_id"),
            })
            .collect();
        let Some(mut order) = load_order_head(&mut tx, &start.order_id)
            .await?
            .filter(|o| o.account_id == start.scope.account_id)
        else {
            return Ok(ExchangeBegun::OrderNotFound);
        };
        if order.event_id != from_event.event_id {
            return Err(StoreError::Internal(format!(
                "order {} is of event {}, not {}",
                order.order_id, order.event_id, from_event.event_id
            )));
        }
        order.tickets = rows.iter().map(ticket_from_row).collect();
        let now = store_now(&mut tx).await?;
        let gone = match surrender(&order, &tickets, &start.from).and_then(|gone| {
            judge_times(
                now,
                from_event.starts_at,
                from_event.exchange_cutoff_s,
                to_event.on_sale_at,
                to_event.starts_at,
            )
            .map(|()| gone)
        }) {
            Ok(gone) => gone,
            Err(refused) => return Ok(ExchangeBegun::Refused(refused)),
        };
        let to_event_id = to_event.event_id.as_str();
        let mut wanted: Vec<(String, String)> = gone
            .seat_ids
            .iter()
            .map(|s| (order.event_id.clone(), s.clone()))
            .collect();
        if let ToSide::Seats(seats) = &start.to {
            wanted.extend(
                seats
                    .iter()
                    .map(|s| (to_event.event_id.clone(), s.seat_id.clone())),
            );
        }
        let locked = lock_seats(&mut tx, wanted).await?;
        let mut tiers: Vec<(&str, &str)> = Vec::new();
        if let Some((tier_id, _)) = &gone.tier {
            tiers.push((order.event_id.as_str(), tier_id.as_str()));
        }
        if let ToSide::Tier { tier_id, .. } = &start.to {
            tiers.push((to_event_id, tier_id.as_str()));
        }
        tiers.sort_unstable();
        tiers.dedup();
        let mut to_tier_available = None;
        for (event_id, tier_id) in &tiers {
            let available: Option<i64> = sqlx::query_scalar(
                "SELECT available FROM tier WHERE event_id = $1 AND tier_id = $2 FOR UPDATE",
            )
            .bind(event_id)
            .bind(tier_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?;
            if let ToSide::Tier {
                tier_id: to_tier, ..
            } = &start.to
                && *event_id == to_event_id
                && tier_id == to_tier
            {
                to_tier_available = available;
            }
        }
        // The new seats: free, or held by a hold whose deadline passed (all or nothing).
        match &start.to {
            ToSide::Seats(seats) => {
                let taken: Vec<String> = seats
                    .iter()
                    .filter(|want| {
                        !locked.iter().any(|(e, s, status, until, _)| {
                            e == to_event_id
                                && *s == want.seat_id
                                && (status == "AVAILABLE"
                                    || (status == "HELD" && until.is_some_and(|u| u <= now)))
                        })
                    })
                    .map(|s| s.seat_id.clone())
                    .collect();
                if !taken.is_empty() {
                    return Ok(ExchangeBegun::Refused(ExchangeRefused::SeatsUnavailable(
                        taken,
                    )));
                }
            }
            ToSide::Tier { quantity, .. } => {
                if to_tier_available.unwrap_or(0) < i64::from(*quantity) {
                    return Ok(ExchangeBegun::Refused(ExchangeRefused::SeatsUnavailable(
                        Vec::new(),
                    )));
                }
            }
        }
        let usage: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(quantity - exchanged_out), 0)::bigint FROM hold
              WHERE event_id = $1 AND account_id = $2
                AND (status = 'CONFIRMED' OR (status IN ('HELD', 'PAYMENT_PENDING') AND expires_at > $3))",
        )
        .bind(to_event_id)
        .bind(&order.account_id)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(classify)?;
        let giving_up_here = if order.event_id == to_event.event_id {
            gone.quantity()
        } else {
            0
        };
        if !within_limit(
            usage,
            start.to.quantity(),
            giving_up_here,
            to_event.max_tickets_per_account,
        ) {
            return Ok(ExchangeBegun::Refused(ExchangeRefused::PurchaseLimit));
        }

        let to_value = start.to.value_minor();
        let amount_due = to_value - gone.value_minor;
        let pay = amount_due > 0;
        let expires_at = if pay {
            now + time::Duration::seconds(i64::from(to_event.hold_ttl_s))
        } else {
            now
        };
        let (seats, tier_id, quantity) = match &start.to {
            ToSide::Seats(seats) => (
                seats
                    .iter()
                    .map(|s| (s.seat_id.clone(), s.price_minor))
                    .collect::<Vec<_>>(),
                None,
                seats.len() as i32,
            ),
            ToSide::Tier {
                tier_id, quantity, ..
            } => (Vec::new(), Some(tier_id.clone()), *quantity as i32),
        };
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at, order_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, $12, $11, $13)",
        )
        .bind(to_event_id)
        .bind(&start.new_hold_id)
        .bind(&order.account_id)
        .bind(if pay { "HELD" } else { "CONFIRMED" })
        .bind(&tier_id)
        .bind(quantity)
        .bind(held_seats_json(&seats))
        .bind(to_value)
        .bind(&to_event.currency)
        .bind(format!("exchange:{}", start.exchange_id))
        .bind(now)
        .bind(expires_at)
        .bind(if pay { None } else { Some(&start.new_order_id) })
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        let mut map = MapChanges::default();
        if !seats.is_empty() {
            let ids: Vec<&str> = seats.iter().map(|(s, _)| s.as_str()).collect();
            sqlx::query(
                "UPDATE seat SET status = $3, hold_id = $4, hold_expires_at = $5, order_id = $6, version = version + 1
                  WHERE event_id = $1 AND seat_id = ANY($2)",
            )
            .bind(to_event_id)
            .bind(&ids)
            .bind(if pay { "HELD" } else { "SOLD" })
            .bind(&start.new_hold_id)
            .bind(if pay { Some(expires_at) } else { None })
            .bind(if pay { None } else { Some(&start.new_order_id) })
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            for id in ids {
                if pay {
                    map.seat(to_event_id, id, SeatStatus::Held, Some(expires_at));
                } else {
                    map.seat(to_event_id, id, SeatStatus::Sold, None);
                }
            }
        }
        if let Some(tier_id) = &tier_id {
            let sql = if pay {
                "UPDATE tier SET available = available - $3, held = held + $3 WHERE event_id = $1 AND tier_id = $2 RETURNING available"
            } else {
                "UPDATE tier SET available = available - $3, sold = sold + $3 WHERE event_id = $1 AND tier_id = $2 RETURNING available"
            };
            let available = sqlx::query_scalar::<_, i64>(sql)
                .bind(to_event_id)
                .bind(tier_id)
                .bind(i64::from(quantity))
                .fetch_one(&mut *tx)
                .await
                .map_err(classify)?;
            map.tier(to_event_id, tier_id, available);
        }
        sqlx::query(
            "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                                   from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                                   currency, status, idempotency_key, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)",
        )
        .bind(&start.exchange_id)
        .bind(&order.account_id)
        .bind(&order.order_id)
        .bind(&order.event_id)
        .bind(to_event_id)
        .bind(serde_json::to_string(&gone.ticket_ids).unwrap_or_else(|_| "[]".into()))
        .bind(gone.value_minor)
        .bind(&start.new_hold_id)
        .bind(if pay { None } else { Some(&start.new_order_id) })
        .bind(to_value)
        .bind(amount_due)
        .bind(&to_event.currency)
        .bind(if pay {
            ExchangeStatus::PaymentRequired.as_str()
        } else {
            ExchangeStatus::Completed.as_str()
        })
        .bind(&start.scope.key)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        if pay {
            let marked = sqlx::query(
                "UPDATE ticket SET exchange_id = $2 WHERE ticket_id = ANY($1) AND status = 'VALID' AND exchange_id IS NULL",
            )
            .bind(&gone.ticket_ids)
            .bind(&start.exchange_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if marked != gone.ticket_ids.len() as u64 {
                return Err(StoreError::Internal(format!(
                    "exchange marked {marked} of {} tickets",
                    gone.ticket_ids.len()
                )));
            }
        } else {
            swap_out(&mut tx, &start.exchange_id, &order, &gone, &mut map).await?;
            sqlx::query(
                "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                                     currency, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, 'CONFIRMED', $5::jsonb, $6, $7, $8, $9, $10, $10)",
            )
            .bind(to_event_id)
            .bind(&start.new_order_id)
            .bind(&start.new_hold_id)
            .bind(&order.account_id)
            .bind(held_seats_json(&seats))
            .bind(&tier_id)
            .bind(quantity)
            .bind(to_value)
            .bind(&to_event.currency)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            // Nothing to pay: the new order's payment is settled by the old one's.
            sqlx::query(
                "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                                amount_minor, currency, next_attempt_at, created_at, updated_at)
                 VALUES ($1, $2, $3, 'exchange', $4, 'CAPTURED', 0, $5, $6, $6, $6)",
            )
            .bind(to_event_id)
            .bind(&start.operation_id)
            .bind(&start.new_order_id)
            .bind(format!("exchange:{}", start.exchange_id))
            .bind(&to_event.currency)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            let mut messages = vec![
                (
                    to_event_id,
                    topic::TICKETS_ISSUE,
                    serde_json::json!({"orderId": start.new_order_id}),
                ),
                (
                    to_event_id,
                    topic::ORDER_CONFIRMED,
                    serde_json::json!({"orderId": start.new_order_id}),
                ),
                (
                    order.event_id.as_str(),
                    boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
                    serde_json::json!({"exchangeId": start.exchange_id, "orderId": order.order_id,
                                       "newOrderId": start.new_order_id}),
                ),
            ];
            if amount_due < 0 {
                messages.push((
                    order.event_id.as_str(),
                    boxoffice_store::exchange::topic::REFUND_DUE,
                    serde_json::json!({"exchangeId": start.exchange_id, "orderId": order.order_id,
                                       "amountMinor": -amount_due, "currency": to_event.currency}),
                ));
            }
            outbox_many(&mut tx, &messages, now).await?;
        }
        // The answer, from what this transaction wrote (no read back).
        let status = if pay {
            ExchangeStatus::PaymentRequired
        } else {
            ExchangeStatus::Completed
        };
        for ticket in order
            .tickets
            .iter_mut()
            .filter(|t| gone.ticket_ids.contains(&t.ticket_id))
        {
            ticket.exchange_id = Some(start.exchange_id.clone());
            ticket.status = if pay { "EXCHANGING" } else { "VOIDED" }.to_owned();
        }
        let exchange = ExchangeView {
            exchange_id: start.exchange_id.clone(),
            account_id: order.account_id.clone(),
            order_id: order.order_id.clone(),
            from_event_id: order.event_id.clone(),
            to_event_id: to_event_id.to_owned(),
            ticket_ids: gone.ticket_ids.clone(),
            from_value_minor: gone.value_minor,
            new_hold: HoldView {
                hold_id: start.new_hold_id.clone(),
                event_id: to_event_id.to_owned(),
                account_id: order.account_id.clone(),
                status: if pay {
                    HoldStatus::Held
                } else {
                    HoldStatus::Confirmed
                },
                expires_at,
                seats: seats
                    .iter()
                    .map(|(seat_id, price_minor)| HeldSeat {
                        seat_id: seat_id.clone(),
                        price_minor: *price_minor,
                    })
                    .collect(),
                tier_id: tier_id.clone(),
                quantity: quantity as u32,
                total_minor: to_value,
                currency: to_event.currency.clone(),
                created_at: now,
                updated_at: now,
            },
            new_order_id: (!pay).then(|| start.new_order_id.clone()),
            to_value_minor: to_value,
            amount_due_minor: amount_due,
            currency: to_event.currency.clone(),
            status,
            created_at: now,
            updated_at: now,
        };
        let record = NewRecord {
            account_id: start.scope.account_id.clone(),
            key: start.scope.key.clone(),
            request_digest: start.request_digest.clone(),
            response: render(&exchange, &order),
        };
        insert_records(
            &mut tx,
            &start.scope.endpoint,
            std::slice::from_ref(&record),
            now,
        )
        .await?;
        seatmap::record(&mut tx, &map, now).await?;
        tx.commit().await.map_err(classify)?;
        Ok(ExchangeBegun::Done {
            exchange: Box::new(exchange),
            order: Box::new(order),
        })
    }
}
