//! Checkout on SQLite: begin (order + payment operation, hold to `PAYMENT_PENDING`), settle a
//! provider verdict (confirm, cancel, or record), tickets, and the outbox relay's
//! claim/finish/retry. Mirrors the PostgreSQL backend statement for statement; where that one
//! locks rows (`FOR UPDATE`, `SKIP LOCKED`), every write here runs in a `BEGIN IMMEDIATE`
//! transaction on the single writer connection, whose file write lock serializes it with
//! every other writer. Times are INTEGER unix milliseconds from the store's clock.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_domain::settlement::{self, Confirmation, Step, Undo};
use boxoffice_store::checkout::{
    OrderView, PaymentOperation, ProviderVerdict, RenderOrder, Settled, SignTicket, TicketView,
    payment_undo, ticket_drafts, topic,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, StoreError, StoreResult, parse_held_seats};
use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, Transaction};

use crate::{
    HOLD_COLUMNS, begin_write, classify, column, fetch_holds, free_hold_resources, from_ms,
    hold_from_row, insert_outbox, store_now, to_ms, to_u32,
};

const ORDER_COLUMNS: &str = "o.order_id, o.event_id, o.hold_id, o.account_id, o.status, o.seats,
     o.tier_id, o.quantity, o.total_minor, o.currency, o.cancel_reason, o.created_at, o.updated_at,
     p.status AS payment_status, p.next_action_url, p.last_error AS payment_last_error";

const OPERATION_COLUMNS: &str =
    "operation_id, order_id, event_id, provider, payment_method, status, provider_ref,
     amount_minor, currency, n_attempts";

/// `t + secs` in unix ms (PostgreSQL's `t + make_interval(secs => secs)`, to the millisecond).
fn plus_secs_ms(t: OffsetDateTime, secs: f64) -> i64 {
    to_ms(t).saturating_add((secs * 1000.0).round() as i64)
}

fn parse_order_status(raw: &str) -> StoreResult<OrderStatus> {
    OrderStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("unknown order status {raw:?}")))
}

fn parse_payment_status(raw: &str) -> StoreResult<PaymentStatus> {
    PaymentStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("unknown payment status {raw:?}")))
}

/// The operation's last error is the fan's to read only once the payment failed (before,
/// it says why the reconciler is still asking).
fn failure_code(payment_status: &str, last_error: Option<String>) -> Option<String> {
    last_error.filter(|_| payment_status == PaymentStatus::Failed.as_str())
}

fn order_from_row(row: &SqliteRow) -> StoreResult<OrderView> {
    let status: String = column(row, "status")?;
    let payment_status: String = column(row, "payment_status")?;
    let seats: String = column(row, "seats")?;
    Ok(OrderView {
        order_id: column(row, "order_id")?,
        event_id: column(row, "event_id")?,
        hold_id: column(row, "hold_id")?,
        account_id: column(row, "account_id")?,
        status: parse_order_status(&status)?,
        payment_status: parse_payment_status(&payment_status)?,
        next_action_url: column(row, "next_action_url")?,
        seats: parse_held_seats(&seats)?,
        tier_id: column(row, "tier_id")?,
        quantity: to_u32(column(row, "quantity")?),
        total_minor: column(row, "total_minor")?,
        currency: column(row, "currency")?,
        cancel_reason: column(row, "cancel_reason")?,
        payment_failure_code: failure_code(&payment_status, column(row, "payment_last_error")?),
        tickets: Vec::new(),
        created_at: from_ms(column(row, "created_at")?)?,
        updated_at: from_ms(column(row, "updated_at")?)?,
    })
}

/// A valid ticket an exchange has marked shows as `EXCHANGING`.
pub(crate) fn ticket_status(stored: String, exchange_id: Option<String>) -> String {
    if stored == "VALID" && exchange_id.is_some() {
        "EXCHANGING".into()
    } else {
        stored
    }
}

fn ticket_from_row(row: &SqliteRow) -> StoreResult<TicketView> {
    let exchange_id: Option<String> = column(row, "exchange_id")?;
    Ok(TicketView {
        ticket_id: column(row, "ticket_id")?,
        event_id: column(row, "event_id")?,
        order_id: column(row, "order_id")?,
        account_id: column(row, "account_id")?,
        seat_id: column(row, "seat_id")?,
        tier_id: column(row, "tier_id")?,
        unit: to_u32(column(row, "unit")?),
        code: column(row, "code")?,
        status: ticket_status(column(row, "status")?, exchange_id.clone()),
        exchange_id,
        issued_at: from_ms(column(row, "issued_at")?)?,
    })
}

fn operation_from_row(row: &SqliteRow) -> StoreResult<PaymentOperation> {
    let status: String = column(row, "status")?;
    Ok(PaymentOperation {
        operation_id: column(row, "operation_id")?,
        order_id: column(row, "order_id")?,
        event_id: column(row, "event_id")?,
        provider: column(row, "provider")?,
        payment_method: column(row, "payment_method")?,
        status: parse_payment_status(&status)?,
        provider_ref: column(row, "provider_ref")?,
        amount_minor: column(row, "amount_minor")?,
        currency: column(row, "currency")?,
        n_attempts: to_u32(column(row, "n_attempts")?),
    })
}

/// One order with its tickets, read on `conn` (a pooled connection or a transaction).
pub(crate) async fn load_order(
    conn: &mut sqlx::SqliteConnection,
    order_id: &str,
) -> StoreResult<Option<OrderView>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN payment_operation p ON p.order_id = o.order_id WHERE o.order_id = ?1"
    );
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(order_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?
    else {
        return Ok(None);
    };
    let mut order = order_from_row(&row)?;
    order.tickets = sqlx::query("SELECT * FROM ticket WHERE order_id = ?1 ORDER BY unit")
        .bind(order_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(classify)?
        .iter()
        .map(ticket_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some(order))
}

/// The order, inside a transaction that already knows it exists.
async fn load_order_tx(tx: &mut Transaction<'_, Sqlite>, order_id: &str) -> StoreResult<OrderView> {
    load_order(tx, order_id).await?.ok_or_else(|| {
        StoreError::Internal(format!("order {order_id} vanished inside its transaction"))
    })
}

pub(crate) async fn outbox(
    tx: &mut Transaction<'_, Sqlite>,
    event_id: &str,
    topic: &str,
    payload: serde_json::Value,
    now: OffsetDateTime,
) -> StoreResult<()> {
    insert_outbox(tx, event_id, topic, &payload.to_string(), now).await
}

/// Cancels a pending order and, if its hold is still in checkout, ends the hold and frees
/// what it held. Conditional on the order's status: a second call changes nothing.
async fn cancel_pending_order(
    tx: &mut Transaction<'_, Sqlite>,
    order: &OrderView,
    hold: &HoldView,
    reason: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<bool> {
    let cancelled = sqlx::query(
        "UPDATE orders SET status = 'CANCELLED', cancel_reason = ?2, updated_at = ?3
          WHERE order_id = ?1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(&order.order_id)
    .bind(reason)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if cancelled == 0 {
        return Ok(false);
    }
    let ended = sqlx::query(
        "UPDATE hold SET status = 'RELEASED', updated_at = ?3
          WHERE event_id = ?1 AND hold_id = ?2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if ended == 1 {
        free_hold_resources(tx, hold, now, HoldStatus::Released, map).await?;
    }
    outbox(
        tx,
        &order.event_id,
        topic::ORDER_CANCELLED,
        serde_json::json!({"orderId": order.order_id, "reason": reason}),
        now,
    )
    .await?;
    Ok(true)
}

/// What the settlement's rules (`settlement::refusal`) need to know about a pending order's
/// hold before it is sold, read under the write lock: the hold itself, whether its exchange
/// (if it is an exchange's) still waits for this payment, and what else the account holds and
/// owns in the event (less what an exchange of this hold gives up there).
async fn confirmation_of(
    tx: &mut Transaction<'_, Sqlite>,
    hold: &HoldView,
    now: OffsetDateTime,
) -> StoreResult<Confirmation> {
    let exchange_open = crate::exchange::still_open(tx, &hold.hold_id).await?;
    let (others, max): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT coalesce(sum(quantity - exchanged_out), 0)
                   FROM hold
                  WHERE event_id = ?1 AND account_id = ?2 AND hold_id <> ?3
                    AND (status = 'CONFIRMED' OR (status IN ('HELD', 'PAYMENT_PENDING') AND expires_at > ?4)))
                - coalesce((SELECT json_array_length(ticket_ids) FROM exchange
                             WHERE new_hold_id = ?3 AND from_event_id = ?1 AND status = 'PAYMENT_REQUIRED'), 0),
                (SELECT max_tickets_per_account FROM event WHERE event_id = ?1)",
    )
    .bind(&hold.event_id)
    .bind(&hold.account_id)
    .bind(&hold.hold_id)
    .bind(to_ms(now))
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(Confirmation {
        hold_status: hold.status,
        hold_expires_at: hold.expires_at,
        exchange_open,
        account_total: u64::try_from(others.max(0)).unwrap_or(0) + u64::from(hold.quantity),
        max_tickets_per_account: u64::try_from(max.max(0)).unwrap_or(0),
    })
}

/// Sells a pending order's hold (the settlement's rules found nothing against it): seats
/// `SOLD`, tier units sold, hold `CONFIRMED`, order `CONFIRMED`, capture and ticket issuance
/// queued. Every write is conditional on the rows as the rules saw them.
async fn confirm_order(
    tx: &mut Transaction<'_, Sqlite>,
    order: &OrderView,
    hold: &HoldView,
    operation_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    if hold.tier_id.is_none() {
        let sold = sqlx::query(
            "UPDATE seat SET status = 'SOLD', order_id = ?3, hold_expires_at = NULL, version = version + 1
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'HELD' AND hold_expires_at > ?4",
        )
        .bind(&hold.event_id)
        .bind(&hold.hold_id)
        .bind(&order.order_id)
        .bind(to_ms(now))
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if sold != hold.seats.len() as u64 {
            // Cannot happen while the hold is live (its seats point to it); refuse to sell
            // part of a hold rather than trust it. The transaction is rolled back.
            return Err(StoreError::Internal(format!(
                "hold {} had {} of {} seats at confirmation",
                hold.hold_id,
                sold,
                hold.seats.len()
            )));
        }
        for seat in &hold.seats {
            map.seat(&hold.event_id, &seat.seat_id, SeatStatus::Sold, None);
        }
    } else if let Some(tier_id) = &hold.tier_id {
        let available: i64 = sqlx::query_scalar(
            "UPDATE tier SET held = held - ?3, sold = sold + ?3 WHERE event_id = ?1 AND tier_id = ?2
             RETURNING available",
        )
        .bind(&hold.event_id)
        .bind(tier_id)
        .bind(i64::from(hold.quantity))
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        // Named in the change feed although its availability is unchanged: the event's writer
        // reads the tier's holds again from it (this sale was not the writer's).
        map.tier(&hold.event_id, tier_id, available);
    }
    sqlx::query(
        "UPDATE hold SET status = 'CONFIRMED', updated_at = ?3
          WHERE event_id = ?1 AND hold_id = ?2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    sqlx::query(
        "UPDATE orders SET status = 'CONFIRMED', updated_at = ?2 WHERE order_id = ?1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(&order.order_id)
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // An exchange's new seats are sold: its old tickets go in the same transaction.
    crate::exchange::complete_exchange_of(tx, hold, &order.order_id, now, map).await?;
    let event_id = order.event_id.as_str();
    outbox(
        tx,
        event_id,
        topic::PAYMENT_CAPTURE,
        serde_json::json!({"operationId": operation_id}),
        now,
    )
    .await?;
    outbox(
        tx,
        event_id,
        topic::TICKETS_ISSUE,
        serde_json::json!({"orderId": order.order_id}),
        now,
    )
    .await?;
    outbox(
        tx,
        event_id,
        topic::ORDER_CONFIRMED,
        serde_json::json!({"orderId": order.order_id}),
        now,
    )
    .await?;
    Ok(())
}

impl crate::SqliteStore {
    async fn load_order_pooled(&self, order_id: &str) -> StoreResult<Option<OrderView>> {
        let mut conn = self.reader_pool().acquire().await.map_err(classify)?;
        load_order(&mut conn, order_id).await
    }

    pub(crate) async fn settle_once(
        &self,
        operation_id: &str,
        verdict: &ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &RenderOrder)>,
    ) -> StoreResult<Option<Settled>> {
        let Some(operation) = self.payment_operation_by_id(operation_id).await? else {
            return Ok(None);
        };
        let Some(order) = self.load_order_pooled(&operation.order_id).await? else {
            return Ok(None);
        };
        // A verdict the operation can no longer take changes nothing (payment statuses only
        // move forward), so a repeated webhook or a reconciler's late look costs no
        // transaction (a webhook seen before still answers `None`). With an answer to store,
        // the transaction runs: it renders the order.
        if answer.is_none() && !operation.status.can_become(verdict.payment_status()) {
            if let Some((provider, event_id)) = webhook {
                let seen: Option<i64> = sqlx::query_scalar(
                    "SELECT 1 FROM webhook_event WHERE provider = ?1 AND event_id = ?2",
                )
                .bind(provider)
                .bind(event_id)
                .fetch_optional(self.reader_pool())
                .await
                .map_err(classify)?;
                if seen.is_some() {
                    return Ok(None);
                }
            }
            return Ok(Some(Settled {
                order,
                changed: false,
            }));
        }
        if fetch_holds(self.reader_pool(), std::slice::from_ref(&order.hold_id))
            .await?
            .is_empty()
        {
            return Ok(None);
        }
        // The write lock, taken up front, stands for PostgreSQL's row locks on the seats,
        // tier, hold and operation.
        let mut tx = begin_write(self.pool()).await?;
        let now = store_now(&mut tx).await?;
        if let Some((provider, event_id)) = webhook {
            let fresh = sqlx::query(
                "INSERT INTO webhook_event (provider, event_id, received_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
            )
            .bind(provider)
            .bind(event_id)
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if fresh == 0 {
                return Ok(None);
            }
        }
        // Re-read under the lock: everything below is conditional on these rows.
        let current = fetch_operation_tx(&mut tx, operation_id).await?;
        let order = load_order_tx(&mut tx, &operation.order_id).await?;
        let hold = fetch_hold_tx(&mut tx, &order.hold_id).await?;
        let target = verdict.payment_status();
        let mut map = MapChanges::default();
        let step = settlement::step(current.status, target, order.status);
        let changed = step != Step::Stale;
        if changed {
            let update = verdict.operation_update(current.n_attempts);
            sqlx::query(
                "UPDATE payment_operation
                    SET status = ?2, provider_ref = coalesce(provider_ref, ?3), next_action_url = ?4, last_error = ?5,
                        updated_at = ?6, next_attempt_at = ?7
                  WHERE operation_id = ?1 AND status = ?8",
            )
            .bind(operation_id)
            .bind(target.as_str())
            .bind(verdict.provider_ref())
            .bind(update.next_action_url)
            .bind(update.last_error)
            .bind(to_ms(now))
            .bind(plus_secs_ms(now, update.recheck_after_s))
            .bind(current.status.as_str())
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        match step {
            Step::Stale | Step::Record => {}
            Step::Confirm => {
                let confirmation = confirmation_of(&mut tx, &hold, now).await?;
                match settlement::refusal(&confirmation, now) {
                    None => {
                        confirm_order(&mut tx, &order, &hold, operation_id, now, &mut map).await?;
                    }
                    Some(reason) => {
                        cancel_pending_order(&mut tx, &order, &hold, reason, now, &mut map).await?;
                        if let Some(undo) = Undo::of(target) {
                            undo_later(&mut tx, &order.event_id, &current, undo, reason, now)
                                .await?;
                        }
                    }
                }
            }
            Step::Cancel { reason } => {
                cancel_pending_order(&mut tx, &order, &hold, reason, now, &mut map).await?;
            }
            Step::GiveBack(undo) => {
                let reason = order.cancel_reason.as_deref().unwrap_or("CANCELLED");
                undo_later(&mut tx, &order.event_id, &current, undo, reason, now).await?;
            }
        }
        let order = load_order_tx(&mut tx, &operation.order_id).await?;
        if let Some((scope, render)) = answer {
            let response = render(&order);
            update_record(&mut tx, scope, &response).await?;
        }
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map,
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Some(Settled { order, changed }))
    }

    pub(crate) async fn payment_operation_by_id(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<PaymentOperation>> {
        let sql =
            format!("SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = ?1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(operation_id)
            .fetch_optional(self.reader_pool())
            .await
            .map_err(classify)?
            .as_ref()
            .map(operation_from_row)
            .transpose()
    }

    pub(crate) async fn payment_operation_with_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<PaymentOperation>> {
        let sql = format!(
            "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE provider = ?1 AND provider_ref = ?2"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(provider)
            .bind(provider_ref)
            .fetch_optional(self.reader_pool())
            .await
            .map_err(classify)?
            .as_ref()
            .map(operation_from_row)
            .transpose()
    }

    /// Operations the reconciler should look at now: unsettled authorizations past their
    /// next attempt time, and authorizations left open on cancelled orders.
    pub(crate) async fn due_operations(&self, limit: u32) -> StoreResult<Vec<PaymentOperation>> {
        let sql = format!(
            "SELECT {OPERATION_COLUMNS} FROM payment_operation p
              WHERE p.next_attempt_at <= {now}
                AND (p.status IN ('AUTHORIZING', 'REQUIRES_ACTION', 'UNKNOWN')
                     OR (p.status = 'AUTHORIZED'
                         AND EXISTS (SELECT 1 FROM orders o WHERE o.order_id = p.order_id AND o.status = 'CANCELLED')))
              ORDER BY p.next_attempt_at LIMIT ?1",
            now = now_ms!()
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(self.reader_pool())
            .await
            .map_err(classify)?
            .iter()
            .map(operation_from_row)
            .collect()
    }

    /// Pushes an operation's next reconciler look further out and counts the attempt.
    pub(crate) async fn postpone_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        let mut tx = begin_write(self.pool()).await?;
        let now = store_now(&mut tx).await?;
        sqlx::query(
            "UPDATE payment_operation SET n_attempts = n_attempts + 1, last_error = ?3, next_attempt_at = ?2
              WHERE operation_id = ?1",
        )
        .bind(operation_id)
        .bind(plus_secs_ms(now, delay_s))
        .bind(error)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(())
    }

    pub(crate) async fn order_by_id(&self, order_id: &str) -> StoreResult<Option<OrderView>> {
        self.load_order_pooled(order_id).await
    }

    pub(crate) async fn orders_of(
        &self,
        account_id: &str,
        before: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<OrderView>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT order_id FROM orders WHERE account_id = ?1 AND (?2 IS NULL OR order_id < ?2)
              ORDER BY order_id DESC LIMIT ?3",
        )
        .bind(account_id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.reader_pool())
        .await
        .map_err(classify)?;
        let mut orders = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(order) = self.load_order_pooled(&id).await? {
                orders.push(order);
            }
        }
        Ok(orders)
    }

    /// Issues the tickets of a confirmed order, once: a unit already issued is skipped.
    pub(crate) async fn issue_tickets_once(
        &self,
        order_id: &str,
        sign: &SignTicket,
    ) -> StoreResult<u32> {
        let mut tx = begin_write(self.pool()).await?;
        let order = load_order_tx(&mut tx, order_id).await?;
        if order.status != OrderStatus::Confirmed {
            return Ok(0);
        }
        let now = store_now(&mut tx).await?;
        let drafts = ticket_drafts(
            &order.event_id,
            &order.order_id,
            &order.seats,
            order.tier_id.as_deref(),
            order.quantity,
        );
        let mut issued = 0;
        for draft in &drafts {
            let code = sign(draft);
            issued += sqlx::query(
                "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'VALID', ?9)
                 ON CONFLICT (order_id, unit) DO NOTHING",
            )
            .bind(&draft.event_id)
            .bind(&draft.ticket_id)
            .bind(&draft.order_id)
            .bind(&order.account_id)
            .bind(&draft.seat_id)
            .bind(&draft.tier_id)
            .bind(i64::from(draft.unit))
            .bind(code)
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected() as u32;
        }
        tx.commit().await.map_err(classify)?;
        Ok(issued)
    }

    pub(crate) async fn ticket_by_id(&self, ticket_id: &str) -> StoreResult<Option<TicketView>> {
        sqlx::query("SELECT * FROM ticket WHERE ticket_id = ?1")
            .bind(ticket_id)
            .fetch_optional(self.reader_pool())
            .await
            .map_err(classify)?
            .as_ref()
            .map(ticket_from_row)
            .transpose()
    }

    /// Checks a ticket in: `VALID` to `CHECKED_IN`, once. Returns the ticket's status after.
    pub(crate) async fn check_in_ticket(
        &self,
        ticket_id: &str,
    ) -> StoreResult<Option<(bool, String)>> {
        let mut tx = begin_write(self.pool()).await?;
        let now = store_now(&mut tx).await?;
        let updated = sqlx::query(
            "UPDATE ticket SET status = 'CHECKED_IN', checked_in_at = ?2
              WHERE ticket_id = ?1 AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(ticket_id)
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected();
        let status: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT status, exchange_id FROM ticket WHERE ticket_id = ?1")
                .bind(ticket_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(status.map(|(s, x)| (updated == 1, ticket_status(s, x))))
    }
}

/// Queues what gives an order's money back ([`payment_undo`]): a void, or a refund.
async fn undo_later(
    tx: &mut Transaction<'_, Sqlite>,
    event_id: &str,
    operation: &PaymentOperation,
    undo: Undo,
    reason: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let (topic, payload) = payment_undo(operation, undo, reason);
    outbox(tx, event_id, topic, payload, now).await
}

async fn update_record(
    tx: &mut Transaction<'_, Sqlite>,
    scope: &IdempotencyScope,
    response: &StoredResponse,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE idempotency SET status_code = ?4, response_body = ?5
          WHERE account_id = ?1 AND endpoint = ?2 AND idem_key = ?3",
    )
    .bind(&scope.account_id)
    .bind(&scope.endpoint)
    .bind(&scope.key)
    .bind(i64::from(response.status))
    .bind(&response.body)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

async fn fetch_operation_tx(
    tx: &mut Transaction<'_, Sqlite>,
    operation_id: &str,
) -> StoreResult<PaymentOperation> {
    let sql = format!("SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = ?1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(operation_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
    operation_from_row(&row)
}

async fn fetch_hold_tx(tx: &mut Transaction<'_, Sqlite>, hold_id: &str) -> StoreResult<HoldView> {
    let sql = format!("SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = ?1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hold_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
    hold_from_row(&row)
}
