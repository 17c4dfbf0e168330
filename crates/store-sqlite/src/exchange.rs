//! Exchanges on SQLite (see `boxoffice_store::exchange` for the rules). Mirrors the PostgreSQL
//! backend statement for statement; where that one locks the order's tickets, the seats and
//! tiers, then the hold, order and exchange rows (`FOR UPDATE`), every write here runs in a
//! `BEGIN IMMEDIATE` transaction on the single writer connection, so what it reads stays as
//! read until commit and only the reads whose answers are used remain. Times are INTEGER unix
//! milliseconds from the store's clock; id lists are bound as one JSON array.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_domain::idempotency::Idempotent;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::exchange::{
    ExchangeBegun, ExchangeRefused, ExchangeStart, ExchangeStatus, ExchangeView, OwnedTicket,
    RenderExchange, Surrender, ToSide, judge_times, surrender, within_limit,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, NewRecord, StoreError, StoreResult, held_seats_json};
use sqlx::{Sqlite, Transaction};

use crate::checkout::{load_order, outbox};
use crate::{
    HOLD_COLUMNS, begin_write, classify, column, from_ms, hold_from_row, insert_records, json_list,
    prior_answer, seatmap, store_now, to_ms, to_u32,
};

const EXCHANGE_COLUMNS: &str = "exchange_id, account_id, order_id, from_event_id, to_event_id,
     ticket_ids, from_value_minor, new_hold_id, new_order_id, to_value_minor,
     amount_due_minor, currency, status, created_at, updated_at";

async fn load_exchange(
    conn: &mut sqlx::SqliteConnection,
    exchange_id: &str,
) -> StoreResult<Option<ExchangeView>> {
    let sql = format!("SELECT {EXCHANGE_COLUMNS} FROM exchange WHERE exchange_id = ?1");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(exchange_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?
    else {
        return Ok(None);
    };
    let new_hold_id: String = column(&row, "new_hold_id")?;
    let sql = format!("SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = ?1");
    let hold_row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&new_hold_id)
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let status: String = column(&row, "status")?;
    let ticket_ids: String = column(&row, "ticket_ids")?;
    Ok(Some(ExchangeView {
        exchange_id: column(&row, "exchange_id")?,
        account_id: column(&row, "account_id")?,
        order_id: column(&row, "order_id")?,
        from_event_id: column(&row, "from_event_id")?,
        to_event_id: column(&row, "to_event_id")?,
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?,
        from_value_minor: column(&row, "from_value_minor")?,
        new_hold: hold_from_row(&hold_row)?,
        new_order_id: column(&row, "new_order_id")?,
        to_value_minor: column(&row, "to_value_minor")?,
        amount_due_minor: column(&row, "amount_due_minor")?,
        currency: column(&row, "currency")?,
        status: ExchangeStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?,
        created_at: from_ms(column(&row, "created_at")?)?,
        updated_at: from_ms(column(&row, "updated_at")?)?,
    }))
}

/// Announces a completed exchange on the outbox of the event it came from.
async fn announce_completed(
    tx: &mut Transaction<'_, Sqlite>,
    exchange_id: &str,
    old: &OrderView,
    new_order_id: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    outbox(
        tx,
        &old.event_id,
        boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
        serde_json::json!({"exchangeId": exchange_id, "orderId": old.order_id, "newOrderId": new_order_id}),
        now,
    )
    .await
}

/// Gives up the surrendered tickets: voided (keeping the exchange's id), their seats back on
/// sale or their tier units returned, the old hold's count of units that left raised.
async fn swap_out(
    tx: &mut Transaction<'_, Sqlite>,
    exchange_id: &str,
    old: &OrderView,
    gone: &Surrender,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let voided = sqlx::query(
        "UPDATE ticket SET status = 'VOIDED', exchange_id = ?2
          WHERE ticket_id IN (SELECT value FROM json_each(?1)) AND status = 'VALID'
            AND (exchange_id IS NULL OR exchange_id = ?2)",
    )
    .bind(json_list(&gone.ticket_ids))
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
              WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2)) AND status = 'SOLD'
                AND order_id = ?3
             RETURNING seat_id",
        )
        .bind(&old.event_id)
        .bind(json_list(&gone.seat_ids))
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
            "UPDATE tier SET sold = sold - ?3, available = available + ?3 WHERE event_id = ?1 AND tier_id = ?2
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
    sqlx::query("UPDATE hold SET exchanged_out = exchanged_out + ?2 WHERE hold_id = ?1")
        .bind(&old.hold_id)
        .bind(i64::from(gone.quantity()))
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    Ok(())
}

/// The surrender an exchange marked, read back from its tickets (for the final swap).
async fn marked_surrender(
    tx: &mut Transaction<'_, Sqlite>,
    exchange_id: &str,
    old: &OrderView,
    from_value_minor: i64,
) -> StoreResult<Surrender> {
    let rows = sqlx::query_as::<_, (String, Option<String>)>(
        "SELECT ticket_id, seat_id FROM ticket WHERE exchange_id = ?1 AND status = 'VALID' ORDER BY unit",
    )
    .bind(exchange_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(Surrender::marked(
        rows,
        old.tier_id.as_deref(),
        from_value_minor,
    ))
}

/// Called by the confirmation of a hold's order: if the hold is an exchange's, the old side is
/// swapped out in the same transaction and the exchange completes.
pub(crate) async fn complete_exchange_of(
    tx: &mut Transaction<'_, Sqlite>,
    hold: &HoldView,
    new_order_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let Some((exchange_id, old_order_id, from_value)) = sqlx::query_as::<_, (String, String, i64)>(
        "SELECT exchange_id, order_id, from_value_minor FROM exchange
              WHERE new_hold_id = ?1 AND status = 'PAYMENT_REQUIRED'",
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
    swap_out(tx, &exchange_id, &old, &gone, map).await?;
    sqlx::query(
        "UPDATE exchange SET status = 'COMPLETED', new_order_id = ?2, updated_at = ?3
          WHERE exchange_id = ?1 AND status = 'PAYMENT_REQUIRED'",
    )
    .bind(&exchange_id)
    .bind(new_order_id)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    announce_completed(tx, &exchange_id, &old, new_order_id, now).await
}

/// Whether the hold may be sold: it is no exchange's, or its exchange still waits for
/// payment with every ticket it gave up still marked (see the PostgreSQL backend).
pub(crate) async fn still_open(
    tx: &mut Transaction<'_, Sqlite>,
    hold_id: &str,
) -> StoreResult<bool> {
    let Some((exchange_id, status, n_tickets)) = sqlx::query_as::<_, (String, String, i64)>(
        "SELECT exchange_id, status, json_array_length(ticket_ids) FROM exchange WHERE new_hold_id = ?1",
    )
    .bind(hold_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    else {
        return Ok(true);
    };
    let marked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ticket WHERE exchange_id = ?1 AND status = 'VALID'",
    )
    .bind(&exchange_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(status == ExchangeStatus::PaymentRequired.as_str() && marked == n_tickets)
}

/// Called whenever holds end without a sale (released, expired, payment failed): their
/// exchanges end too and the old tickets lose their mark, valid again. Conditional on the
/// exchange's status: a second call finds nothing to do.
pub(crate) async fn end_exchanges_of(
    tx: &mut Transaction<'_, Sqlite>,
    hold_ids: &[&str],
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let ended = sqlx::query_as::<_, (String, String, String)>(
        "UPDATE exchange SET status = ?2, updated_at = ?3
          WHERE new_hold_id IN (SELECT value FROM json_each(?1)) AND status = 'PAYMENT_REQUIRED'
         RETURNING exchange_id, from_event_id, order_id",
    )
    .bind(json_list(hold_ids))
    .bind(status.as_str())
    .bind(to_ms(now))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    if ended.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = ended.iter().map(|(x, _, _)| x.as_str()).collect();
    sqlx::query(
        "UPDATE ticket SET exchange_id = NULL
          WHERE exchange_id IN (SELECT value FROM json_each(?1)) AND status = 'VALID'",
    )
    .bind(json_list(&ids))
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

impl crate::SqliteStore {
    pub(crate) async fn exchange_by_id(
        &self,
        exchange_id: &str,
    ) -> StoreResult<Option<ExchangeView>> {
        let mut conn = self.reader_pool().acquire().await.map_err(classify)?;
        load_exchange(&mut conn, exchange_id).await
    }

    pub(crate) async fn begin_exchange_once(
        &self,
        start: &ExchangeStart,
        render: &RenderExchange,
    ) -> StoreResult<ExchangeBegun> {
        let Some(order) = self
            .order_by_id(&start.order_id)
            .await?
            .filter(|o| o.account_id == start.scope.account_id)
        else {
            return Ok(ExchangeBegun::OrderNotFound);
        };
        let (from_event, to_event) = (&start.from_event, &start.to_event);
        if order.event_id != from_event.event_id {
            return Err(StoreError::Internal(format!(
                "order {} is of event {}, not {}",
                order.order_id, order.event_id, from_event.event_id
            )));
        }
        // The write lock, taken up front, stands for PostgreSQL's row locks on the order's
        // tickets, the seats and tiers of both sides, and the hold, order and exchange rows.
        let mut tx = begin_write(self.pool()).await?;
        if let Some(answer) = prior_answer(&mut tx, &start.scope, &start.request_digest).await? {
            return Ok(match answer {
                Idempotent::Replayed(stored) => ExchangeBegun::Replayed(stored),
                _ => ExchangeBegun::KeyReusedWithOtherRequest,
            });
        }
        let tickets: Vec<OwnedTicket> = sqlx::query(
            "SELECT ticket_id, seat_id, tier_id, unit, status, exchange_id FROM ticket
              WHERE order_id = ?1 ORDER BY unit",
        )
        .bind(&order.order_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .iter()
        .map(|row| {
            Ok(OwnedTicket {
                ticket_id: column(row, "ticket_id")?,
                seat_id: column(row, "seat_id")?,
                tier_id: column(row, "tier_id")?,
                unit: to_u32(column(row, "unit")?),
                status: column(row, "status")?,
                exchange_id: column(row, "exchange_id")?,
            })
        })
        .collect::<StoreResult<_>>()?;
        let order = load_order(&mut tx, &order.order_id)
            .await?
            .ok_or_else(|| StoreError::Internal("order vanished".into()))?;
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
        // The new seats: free, or held by a hold whose deadline passed (all or nothing).
        match &start.to {
            ToSide::Seats(seats) => {
                let wanted: Vec<&str> = seats.iter().map(|s| s.seat_id.as_str()).collect();
                let found = sqlx::query_as::<_, (String, String, Option<i64>)>(
                    "SELECT seat_id, status, hold_expires_at FROM seat
                      WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2))
                      ORDER BY seat_id",
                )
                .bind(to_event_id)
                .bind(json_list(&wanted))
                .fetch_all(&mut *tx)
                .await
                .map_err(classify)?;
                let now_ms = to_ms(now);
                let taken: Vec<String> = seats
                    .iter()
                    .filter(|want| {
                        !found.iter().any(|(s, status, until)| {
                            *s == want.seat_id
                                && (status == "AVAILABLE"
                                    || (status == "HELD" && until.is_some_and(|u| u <= now_ms)))
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
            ToSide::Tier {
                tier_id, quantity, ..
            } => {
                let available: Option<i64> = sqlx::query_scalar(
                    "SELECT available FROM tier WHERE event_id = ?1 AND tier_id = ?2",
                )
                .bind(to_event_id)
                .bind(tier_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(classify)?;
                if available.unwrap_or(0) < i64::from(*quantity) {
                    return Ok(ExchangeBegun::Refused(ExchangeRefused::SeatsUnavailable(
                        Vec::new(),
                    )));
                }
            }
        }
        let usage: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(quantity - exchanged_out), 0) FROM hold
              WHERE event_id = ?1 AND account_id = ?2
                AND (status = 'CONFIRMED' OR (status IN ('HELD', 'PAYMENT_PENDING') AND expires_at > ?3))",
        )
        .bind(to_event_id)
        .bind(&order.account_id)
        .bind(to_ms(now))
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
        let new_order_id = if pay { None } else { Some(&start.new_order_id) };
        let (seats, tier_id, quantity) = match &start.to {
            ToSide::Seats(seats) => (
                seats
                    .iter()
                    .map(|s| (s.seat_id.clone(), s.price_minor))
                    .collect::<Vec<_>>(),
                None,
                seats.len() as i64,
            ),
            ToSide::Tier {
                tier_id, quantity, ..
            } => (Vec::new(), Some(tier_id.clone()), i64::from(*quantity)),
        };
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at, order_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?11, ?13)",
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
        .bind(to_ms(now))
        .bind(to_ms(expires_at))
        .bind(new_order_id)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        let mut map = MapChanges::default();
        if !seats.is_empty() {
            let ids: Vec<&str> = seats.iter().map(|(s, _)| s.as_str()).collect();
            sqlx::query(
                "UPDATE seat SET status = ?3, hold_id = ?4, hold_expires_at = ?5, order_id = ?6, version = version + 1
                  WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2))",
            )
            .bind(to_event_id)
            .bind(json_list(&ids))
            .bind(if pay { "HELD" } else { "SOLD" })
            .bind(&start.new_hold_id)
            .bind(if pay { Some(to_ms(expires_at)) } else { None })
            .bind(new_order_id)
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
                "UPDATE tier SET available = available - ?3, held = held + ?3 WHERE event_id = ?1 AND tier_id = ?2 RETURNING available"
            } else {
                "UPDATE tier SET available = available - ?3, sold = sold + ?3 WHERE event_id = ?1 AND tier_id = ?2 RETURNING available"
            };
            let available = sqlx::query_scalar::<_, i64>(sql)
                .bind(to_event_id)
                .bind(tier_id)
                .bind(quantity)
                .fetch_one(&mut *tx)
                .await
                .map_err(classify)?;
            map.tier(to_event_id, tier_id, available);
        }
        let status = if pay {
            ExchangeStatus::PaymentRequired
        } else {
            ExchangeStatus::Completed
        };
        sqlx::query(
            "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                                   from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                                   currency, status, idempotency_key, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)",
        )
        .bind(&start.exchange_id)
        .bind(&order.account_id)
        .bind(&order.order_id)
        .bind(&order.event_id)
        .bind(to_event_id)
        .bind(json_list(&gone.ticket_ids))
        .bind(gone.value_minor)
        .bind(&start.new_hold_id)
        .bind(new_order_id)
        .bind(to_value)
        .bind(amount_due)
        .bind(&to_event.currency)
        .bind(status.as_str())
        .bind(&start.scope.key)
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        if pay {
            let marked = sqlx::query(
                "UPDATE ticket SET exchange_id = ?2
                  WHERE ticket_id IN (SELECT value FROM json_each(?1)) AND status = 'VALID' AND exchange_id IS NULL",
            )
            .bind(json_list(&gone.ticket_ids))
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
                 VALUES (?1, ?2, ?3, ?4, 'CONFIRMED', ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
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
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            // Nothing to pay: the new order's payment is settled by the old one's.
            sqlx::query(
                "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                                amount_minor, currency, next_attempt_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'exchange', ?4, 'CAPTURED', 0, ?5, ?6, ?6, ?6)",
            )
            .bind(to_event_id)
            .bind(&start.operation_id)
            .bind(&start.new_order_id)
            .bind(format!("exchange:{}", start.exchange_id))
            .bind(&to_event.currency)
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            // The new order's tickets, signed by the caller, issued with the swap.
            for ticket in &start.new_tickets {
                sqlx::query(
                    "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'VALID', ?9)",
                )
                .bind(&ticket.draft.event_id)
                .bind(&ticket.draft.ticket_id)
                .bind(&ticket.draft.order_id)
                .bind(&order.account_id)
                .bind(&ticket.draft.seat_id)
                .bind(&ticket.draft.tier_id)
                .bind(i64::from(ticket.draft.unit))
                .bind(&ticket.code)
                .bind(to_ms(now))
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
            }
            announce_completed(
                &mut tx,
                &start.exchange_id,
                &order,
                &start.new_order_id,
                now,
            )
            .await?;
            if amount_due < 0 {
                outbox(
                    &mut tx,
                    &order.event_id,
                    boxoffice_store::exchange::topic::REFUND_DUE,
                    serde_json::json!({"exchangeId": start.exchange_id, "orderId": order.order_id,
                                       "amountMinor": -amount_due, "currency": to_event.currency}),
                    now,
                )
                .await?;
            }
        }
        let exchange = load_exchange(&mut tx, &start.exchange_id)
            .await?
            .ok_or_else(|| StoreError::Internal("exchange vanished".into()))?;
        let order = load_order(&mut tx, &order.order_id)
            .await?
            .ok_or_else(|| StoreError::Internal("order vanished".into()))?;
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
