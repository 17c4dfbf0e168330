//! Checkout on PostgreSQL: begin (order + payment operation, hold to `PAYMENT_PENDING`),
//! settle a provider verdict (confirm, cancel, or record), tickets, and the outbox relay's
//! claim/finish/retry. Same lock order as the hold path: seats, then tier, then hold, order
//! and operation rows.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_domain::settlement::{self, Confirmation, Step, Undo};
use boxoffice_store::checkout::{
    OPERATION_RECHECK_S, OrderView, PaymentOperation, ProviderVerdict, RenderOrder, Settled,
    SignTicket, TicketView, payment_undo, ticket_drafts, topic,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, StoreError, StoreResult, parse_held_seats};
use sqlx::{Postgres, Row, Transaction};

use crate::{classify, fetch_holds, free_hold_resources, lock_hold_resources, store_now};

const ORDER_COLUMNS: &str =
    "o.order_id, o.event_id, o.hold_id, o.account_id, o.status, o.seats::text AS seats,
     o.tier_id, o.quantity, o.total_minor, o.currency, o.cancel_reason, o.created_at, o.updated_at,
     p.status AS payment_status, p.next_action_url, p.last_error AS payment_last_error";

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

fn order_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<OrderView> {
    let status: String = row.get("status");
    let payment_status: String = row.get("payment_status");
    let seats: String = row.get("seats");
    Ok(OrderView {
        order_id: row.get("order_id"),
        event_id: row.get("event_id"),
        hold_id: row.get("hold_id"),
        account_id: row.get("account_id"),
        status: parse_order_status(&status)?,
        payment_status: parse_payment_status(&payment_status)?,
        next_action_url: row.get("next_action_url"),
        seats: parse_held_seats(&seats)?,
        tier_id: row.get("tier_id"),
        quantity: u32::try_from(row.get::<i32, _>("quantity")).unwrap_or(0),
        total_minor: row.get("total_minor"),
        currency: row.get("currency"),
        cancel_reason: row.get("cancel_reason"),
        payment_failure_code: failure_code(&payment_status, row.get("payment_last_error")),
        tickets: Vec::new(),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
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

pub(crate) fn ticket_from_row(row: &sqlx::postgres::PgRow) -> TicketView {
    ticket_from_row_as(row, "")
}

/// A ticket from columns named with `prefix` (`t_` when read beside its order).
fn ticket_from_row_as(row: &sqlx::postgres::PgRow, prefix: &str) -> TicketView {
    let column = |name: &str| format!("{prefix}{name}");
    TicketView {
        ticket_id: row.get(column("ticket_id").as_str()),
        event_id: row.get(column("event_id").as_str()),
        order_id: row.get(column("order_id").as_str()),
        account_id: row.get(column("account_id").as_str()),
        seat_id: row.get(column("seat_id").as_str()),
        tier_id: row.get(column("tier_id").as_str()),
        unit: u32::try_from(row.get::<i32, _>(column("unit").as_str())).unwrap_or(0),
        code: row.get(column("code").as_str()),
        status: ticket_status(
            row.get(column("status").as_str()),
            row.get::<Option<String>, _>(column("exchange_id").as_str()),
        ),
        exchange_id: row.get(column("exchange_id").as_str()),
        issued_at: row.get(column("issued_at").as_str()),
    }
}

/// The ticket columns [`ticket_from_row_as`] reads with the `t_` prefix.
const TICKET_COLUMNS_AS_T: &str = "t.ticket_id AS t_ticket_id, t.event_id AS t_event_id,
     t.order_id AS t_order_id, t.account_id AS t_account_id, t.seat_id AS t_seat_id,
     t.tier_id AS t_tier_id, t.unit AS t_unit, t.code AS t_code, t.status AS t_status,
     t.exchange_id AS t_exchange_id, t.issued_at AS t_issued_at";

fn operation_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<PaymentOperation> {
    let status: String = row.get("status");
    Ok(PaymentOperation {
        operation_id: row.get("operation_id"),
        order_id: row.get("order_id"),
        event_id: row.get("event_id"),
        provider: row.get("provider"),
        payment_method: row.get("payment_method"),
        status: parse_payment_status(&status)?,
        provider_ref: row.get("provider_ref"),
        amount_minor: row.get("amount_minor"),
        currency: row.get("currency"),
        n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")).unwrap_or(0),
    })
}

const OPERATION_COLUMNS: &str =
    "operation_id, order_id, event_id, provider, payment_method, status, provider_ref,
     amount_minor, currency, n_attempts";

/// One order with its tickets, read on `conn` (a pooled connection or a transaction).
pub(crate) async fn load_order(
    conn: &mut sqlx::PgConnection,
    order_id: &str,
) -> StoreResult<Option<OrderView>> {
    // One statement: the order beside each of its tickets (one row with no ticket when it
    // has none). An order status read is the most repeated read of a sale.
    let sql = format!(
        "SELECT {ORDER_COLUMNS}, {TICKET_COLUMNS_AS_T}
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
           LEFT JOIN ticket t ON t.order_id = o.order_id
          WHERE o.order_id = $1
          ORDER BY t.unit"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(order_id)
        .fetch_all(&mut *conn)
        .await
        .map_err(classify)?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut order = order_from_row(first)?;
    order.tickets = rows
        .iter()
        .filter(|row| row.get::<Option<String>, _>("t_ticket_id").is_some())
        .map(|row| ticket_from_row_as(row, "t_"))
        .collect();
    Ok(Some(order))
}

/// One order without its tickets.
pub(crate) async fn load_order_head(
    conn: &mut sqlx::PgConnection,
    order_id: &str,
) -> StoreResult<Option<OrderView>> {
    Ok(load_order_heads(conn, &[order_id]).await?.pop())
}

/// The orders (without tickets) of `order_ids`, in one statement.
pub(crate) async fn load_order_heads(
    conn: &mut sqlx::PgConnection,
    order_ids: &[&str],
) -> StoreResult<Vec<OrderView>> {
    let sql = format!(
        "SELECT {ORDER_COLUMNS} FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id = ANY($1)"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(order_ids)
        .fetch_all(&mut *conn)
        .await
        .map_err(classify)?
        .iter()
        .map(order_from_row)
        .collect()
}

/// The order, inside a transaction that already knows it exists.
async fn load_order_tx(
    tx: &mut Transaction<'_, Postgres>,
    order_id: &str,
) -> StoreResult<OrderView> {
    load_order(tx, order_id).await?.ok_or_else(|| {
        StoreError::Internal(format!("order {order_id} vanished inside its transaction"))
    })
}

pub(crate) async fn outbox(
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    topic: &str,
    payload: serde_json::Value,
    now: OffsetDateTime,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at) VALUES ($1, $2, $3::jsonb, $4)",
    )
    .bind(event_id)
    .bind(topic)
    .bind(payload.to_string())
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Several outbox rows `(event id, topic, payload)` in one statement.
pub(crate) async fn outbox_many(
    tx: &mut Transaction<'_, Postgres>,
    rows: &[(&str, &str, serde_json::Value)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let events: Vec<&str> = rows.iter().map(|(e, _, _)| *e).collect();
    let topics: Vec<&str> = rows.iter().map(|(_, t, _)| *t).collect();
    let payloads: Vec<String> = rows.iter().map(|(_, _, p)| p.to_string()).collect();
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at)
         SELECT e, t, p::jsonb, $4 FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(e, t, p)",
    )
    .bind(&events)
    .bind(&topics)
    .bind(&payloads)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Cancels a pending order and, if its hold is still in checkout, ends the hold and frees
/// what it held. Conditional on the order's status: a second call changes nothing.
async fn cancel_pending_order(
    tx: &mut Transaction<'_, Postgres>,
    order: &OrderView,
    hold: &HoldView,
    reason: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<bool> {
    let cancelled = sqlx::query(
        "UPDATE orders SET status = 'CANCELLED', cancel_reason = $2, updated_at = $3
          WHERE order_id = $1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(&order.order_id)
    .bind(reason)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if cancelled == 0 {
        return Ok(false);
    }
    let ended = sqlx::query(
        "UPDATE hold SET status = 'RELEASED', updated_at = $3
          WHERE event_id = $1 AND hold_id = $2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(now)
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
/// hold before it is sold, read under the settlement's locks: the hold itself, whether its
/// exchange (if it is an exchange's) still waits for this payment, and what else the account
/// holds and owns in the event (less what an exchange of this hold gives up there).
async fn confirmation_of(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
    now: OffsetDateTime,
) -> StoreResult<Confirmation> {
    let exchange_open = crate::exchange::still_open(tx, &hold.hold_id).await?;
    let (others, max): (i64, i32) = sqlx::query_as(
        "SELECT (SELECT coalesce(sum(quantity - exchanged_out), 0)::bigint
                   FROM hold
                  WHERE event_id = $1 AND account_id = $2 AND hold_id <> $3
                    AND (status = 'CONFIRMED' OR (status IN ('HELD', 'PAYMENT_PENDING') AND expires_at > $4)))
                - coalesce((SELECT jsonb_array_length(ticket_ids) FROM exchange
                             WHERE new_hold_id = $3 AND from_event_id = $1 AND status = 'PAYMENT_REQUIRED'), 0),
                (SELECT max_tickets_per_account FROM event WHERE event_id = $1)",
    )
    .bind(&hold.event_id)
    .bind(&hold.account_id)
    .bind(&hold.hold_id)
    .bind(now)
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
    tx: &mut Transaction<'_, Postgres>,
    order: &OrderView,
    hold: &HoldView,
    operation_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    if hold.tier_id.is_none() {
        let sold = sqlx::query(
            "UPDATE seat SET status = 'SOLD', order_id = $3, hold_expires_at = NULL, version = version + 1
              WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' AND hold_expires_at > $4",
        )
        .bind(&hold.event_id)
        .bind(&hold.hold_id)
        .bind(&order.order_id)
        .bind(now)
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
            "UPDATE tier SET held = held - $3, sold = sold + $3 WHERE event_id = $1 AND tier_id = $2
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
        "UPDATE hold SET status = 'CONFIRMED', updated_at = $3
          WHERE event_id = $1 AND hold_id = $2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    sqlx::query("UPDATE orders SET status = 'CONFIRMED', updated_at = $2 WHERE order_id = $1 AND status = 'PENDING_PAYMENT'")
        .bind(&order.order_id)
        .bind(now)
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

impl crate::PgStore {
    async fn load_order_pooled(&self, order_id: &str) -> StoreResult<Option<OrderView>> {
        let mut conn = self.pool().acquire().await.map_err(classify)?;
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
        // Without an answer to render, the order's tickets are not read: a webhook, the relay
        // and the reconciler look only at whether the verdict changed anything.
        let order = if answer.is_some() {
            self.load_order_pooled(&operation.order_id).await?
        } else {
            let mut conn = self.pool().acquire().await.map_err(classify)?;
            load_order_head(&mut conn, &operation.order_id).await?
        };
        let Some(order) = order else {
            return Ok(None);
        };
        // A verdict the operation can no longer take changes nothing (payment statuses only
        // move forward), so a repeated webhook or a reconciler's late look costs no
        // transaction (a webhook seen before still answers `None`). With an answer to store,
        // the transaction runs: it renders the order.
        if answer.is_none() && !operation.status.can_become(verdict.payment_status()) {
            if let Some((provider, event_id)) = webhook {
                let seen: Option<i32> = sqlx::query_scalar(
                    "SELECT 1 FROM webhook_event WHERE provider = $1 AND event_id = $2",
                )
                .bind(provider)
                .bind(event_id)
                .fetch_optional(self.pool())
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
        if answer.is_none() {
            match self
                .capture_confirmed(&operation, &order, verdict, webhook)
                .await?
            {
                FastCapture::Applied(settled) => return Ok(Some(*settled)),
                // The statement found the operation moved on: most often the relay's capture
                // and the provider's webhook of it racing, one waiting on the other's row
                // lock. If the verdict can no longer apply, nothing remains to decide (the
                // full settlement would lock the hold's rows only to find that out).
                FastCapture::Missed => {
                    let now = self.payment_operation_by_id(operation_id).await?;
                    if now.is_none_or(|now| !now.status.can_become(verdict.payment_status())) {
                        return Ok(Some(Settled {
                            order,
                            changed: false,
                        }));
                    }
                }
                FastCapture::NotTried => {}
            }
        }
        let Some(hold) = fetch_holds(self.pool(), std::slice::from_ref(&order.hold_id))
            .await?
            .pop()
        else {
            return Ok(None);
        };
        let mut tx = self.pool().begin().await.map_err(classify)?;
        if let Some((provider, event_id)) = webhook {
            let fresh = sqlx::query(
                "INSERT INTO webhook_event (provider, event_id, received_at) VALUES ($1, $2, boxoffice_now())
                 ON CONFLICT DO NOTHING",
            )
            .bind(provider)
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if fresh == 0 {
                return Ok(None);
            }
        }
        lock_hold_resources(&mut tx, &hold).await?;
        let now = store_now(&mut tx).await?;
        // Re-read under the locks: everything below is conditional on these rows.
        let current = fetch_operation_tx(&mut tx, operation_id).await?;
        let order = load_order_tx(&mut tx, &operation.order_id).await?;
        let hold = fetch_holds_tx(&mut tx, &order.hold_id).await?;
        let target = verdict.payment_status();
        let mut map = MapChanges::default();
        let step = settlement::step(current.status, target, order.status);
        let changed = step != Step::Stale;
        if changed {
            let update = verdict.operation_update(current.n_attempts);
            sqlx::query(
                "UPDATE payment_operation
                    SET status = $2, provider_ref = coalesce(provider_ref, $3), next_action_url = $4, last_error = $5,
                        updated_at = $6, next_attempt_at = $6 + make_interval(secs => $7)
                  WHERE operation_id = $1 AND status = $8",
            )
            .bind(operation_id)
            .bind(target.as_str())
            .bind(verdict.provider_ref())
            .bind(update.next_action_url)
            .bind(update.last_error)
            .bind(now)
            .bind(update.recheck_after_s)
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

    /// The capture of a confirmed order's authorization (the relay's capture, or its
    /// webhook): the only change is the operation's status, so it is one conditional statement
    /// ([`Self::capture_authorized`], the relay's batch with one row)
    /// instead of the settlement's locking transaction (a dozen round trips per sold order).
    /// [`FastCapture::Missed`] when the rows are no longer as read — an operation moved on,
    /// an order no longer confirmed. The order row is share-locked, so a cancellation in
    /// progress is waited for and the order seen as it commits.
    async fn capture_confirmed(
        &self,
        operation: &PaymentOperation,
        order: &OrderView,
        verdict: &ProviderVerdict,
        webhook: Option<(&str, &str)>,
    ) -> StoreResult<FastCapture> {
        if verdict.payment_status() != PaymentStatus::Captured
            || operation.status != PaymentStatus::Authorized
            || order.status != OrderStatus::Confirmed
        {
            return Ok(FastCapture::NotTried);
        }
        let (provider, webhook_id) = webhook.unzip();
        let asked = CaptureAsked {
            operation_id: &operation.operation_id,
            provider_ref: verdict.provider_ref(),
            webhook_provider: provider,
            webhook_id,
        };
        let updated = self
            .capture_authorized(&[asked])
            .await?
            .pop()
            .map(|(_, updated_at)| updated_at);
        Ok(match updated {
            Some(updated_at) => {
                let mut order = order.clone();
                order.payment_status = PaymentStatus::Captured;
                order.next_action_url = None;
                order.updated_at = updated_at;
                FastCapture::Applied(Box::new(Settled {
                    order,
                    changed: true,
                }))
            }
            None => FastCapture::Missed,
        })
    }

    pub(crate) async fn payment_operation_by_id(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<PaymentOperation>> {
        let sql =
            format!("SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = $1");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(operation_id)
            .fetch_optional(self.pool())
            .await
            .map_err(classify)?
            .as_ref()
            .map(operation_from_row)
            .transpose()
    }

    pub(crate) async fn payment_operations_by_id(
        &self,
        operation_ids: &[String],
    ) -> StoreResult<Vec<PaymentOperation>> {
        if operation_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = ANY($1)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(operation_ids)
            .fetch_all(self.pool())
            .await
            .map_err(classify)?
            .iter()
            .map(operation_from_row)
            .collect()
    }

    /// [`Self::capture_confirmed`] for many operations in one statement (the relay's round).
    pub(crate) async fn capture_confirmed_of(
        &self,
        captures: &[(String, String)],
    ) -> StoreResult<Vec<String>> {
        let asked: Vec<CaptureAsked<'_>> = captures
            .iter()
            .map(|(operation_id, provider_ref)| CaptureAsked {
                operation_id,
                provider_ref: Some(provider_ref),
                webhook_provider: None,
                webhook_id: None,
            })
            .collect();
        Ok(self
            .capture_authorized(&asked)
            .await?
            .into_iter()
            .map(|(operation_id, _)| operation_id)
            .collect())
    }

    /// The capture of confirmed orders' authorizations, in one statement: each operation
    /// still `AUTHORIZED` whose order is `CONFIRMED` (share-locked before the operation's row
    /// is, so a cancellation in progress is waited for) becomes `CAPTURED`, and the webhook
    /// that brought it, if any, is recorded. Rows are taken in operation id order. Returns
    /// the operations captured, with their new `updated_at`.
    async fn capture_authorized(
        &self,
        asked: &[CaptureAsked<'_>],
    ) -> StoreResult<Vec<(String, OffsetDateTime)>> {
        if asked.is_empty() {
            return Ok(Vec::new());
        }
        let mut sorted: Vec<&CaptureAsked<'_>> = asked.iter().collect();
        sorted.sort_by_key(|asked| asked.operation_id);
        let ids: Vec<&str> = sorted.iter().map(|a| a.operation_id).collect();
        let refs: Vec<Option<&str>> = sorted.iter().map(|a| a.provider_ref).collect();
        let providers: Vec<Option<&str>> = sorted.iter().map(|a| a.webhook_provider).collect();
        let webhook_ids: Vec<Option<&str>> = sorted.iter().map(|a| a.webhook_id).collect();
        sqlx::query_as(
            "WITH asked AS (
                SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[])
                    AS a(operation_id, provider_ref, provider, webhook_id)
             ), captured AS (
                UPDATE payment_operation p
                   SET status = 'CAPTURED', provider_ref = coalesce(p.provider_ref, a.provider_ref),
                       next_action_url = NULL, last_error = NULL,
                       updated_at = date_trunc('milliseconds', boxoffice_now()),
                       next_attempt_at = date_trunc('milliseconds', boxoffice_now()) + make_interval(secs => $5)
                  FROM asked a
                 WHERE p.operation_id = a.operation_id AND p.status = 'AUTHORIZED'
                   AND EXISTS (SELECT 1 FROM orders o WHERE o.order_id = p.order_id AND o.status = 'CONFIRMED' FOR SHARE)
                RETURNING p.operation_id, p.updated_at, a.provider, a.webhook_id
             ), seen AS (
                INSERT INTO webhook_event (provider, event_id, received_at)
                SELECT provider, webhook_id, boxoffice_now() FROM captured WHERE provider IS NOT NULL
                ON CONFLICT DO NOTHING
             )
             SELECT operation_id, updated_at FROM captured",
        )
        .bind(ids)
        .bind(refs)
        .bind(providers)
        .bind(webhook_ids)
        .bind(OPERATION_RECHECK_S)
        .fetch_all(self.pool())
        .await
        .map_err(classify)
    }

    pub(crate) async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<PaymentOperation>> {
        let sql = format!(
            "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE provider = $1 AND provider_ref = $2"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(provider)
            .bind(provider_ref)
            .fetch_optional(self.pool())
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
              WHERE p.next_attempt_at <= boxoffice_now()
                AND (p.status IN ('AUTHORIZING', 'REQUIRES_ACTION', 'UNKNOWN')
                     OR (p.status = 'AUTHORIZED'
                         AND EXISTS (SELECT 1 FROM orders o WHERE o.order_id = p.order_id AND o.status = 'CANCELLED')))
              ORDER BY p.next_attempt_at LIMIT $1"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
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
        sqlx::query(
            "UPDATE payment_operation SET n_attempts = n_attempts + 1, last_error = $3,
                    next_attempt_at = boxoffice_now() + make_interval(secs => $2)
              WHERE operation_id = $1",
        )
        .bind(operation_id)
        .bind(delay_s)
        .bind(error)
        .execute(self.pool())
        .await
        .map_err(classify)?;
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
            "SELECT order_id FROM orders WHERE account_id = $1 AND ($2::text IS NULL OR order_id < $2)
              ORDER BY order_id DESC LIMIT $3",
        )
        .bind(account_id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
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
        self.issue_tickets_of_once(std::slice::from_ref(&order_id.to_owned()), sign)
            .await
    }

    /// The tickets of every confirmed order of `order_ids`, in one transaction of two
    /// statements (the relay hands a round's orders at once; one transaction per order was
    /// the on-sale's last bound). The orders are share-locked while their tickets are
    /// written, so a compensation cancelling one waits and then voids them.
    pub(crate) async fn issue_tickets_of_once(
        &self,
        order_ids: &[String],
        sign: &SignTicket,
    ) -> StoreResult<u32> {
        if order_ids.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let orders = sqlx::query_as::<_, (String, String, String, String, Option<String>, i32)>(
            "SELECT order_id, event_id, account_id, seats::text, tier_id, quantity FROM orders
              WHERE order_id = ANY($1) AND status = 'CONFIRMED' ORDER BY order_id FOR SHARE",
        )
        .bind(order_ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let mut columns = TicketColumns::default();
        for (order_id, event_id, account_id, seats, tier_id, quantity) in &orders {
            let seats = parse_held_seats(seats)?;
            let quantity = u32::try_from(*quantity).unwrap_or(0);
            for draft in ticket_drafts(event_id, order_id, &seats, tier_id.as_deref(), quantity) {
                columns.codes.push(sign(&draft));
                columns
                    .units
                    .push(i32::try_from(draft.unit).unwrap_or(i32::MAX));
                columns.event_ids.push(draft.event_id);
                columns.ticket_ids.push(draft.ticket_id);
                columns.order_ids.push(draft.order_id);
                columns.account_ids.push(account_id.clone());
                columns.seat_ids.push(draft.seat_id);
                columns.tier_ids.push(draft.tier_id);
            }
        }
        if columns.ticket_ids.is_empty() {
            return Ok(0);
        }
        let issued = sqlx::query(
            "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
             SELECT u.e, u.t, u.o, u.a, u.s, u.r, u.n, u.c, 'VALID', date_trunc('milliseconds', boxoffice_now())
               FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
                    AS u(e, t, o, a, s, r, n, c)
             ON CONFLICT (order_id, unit) DO NOTHING",
        )
        .bind(&columns.event_ids)
        .bind(&columns.ticket_ids)
        .bind(&columns.order_ids)
        .bind(&columns.account_ids)
        .bind(&columns.seat_ids)
        .bind(&columns.tier_ids)
        .bind(&columns.units)
        .bind(&columns.codes)
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected();
        tx.commit().await.map_err(classify)?;
        Ok(u32::try_from(issued).unwrap_or(u32::MAX))
    }

    pub(crate) async fn ticket_by_id(&self, ticket_id: &str) -> StoreResult<Option<TicketView>> {
        Ok(sqlx::query("SELECT * FROM ticket WHERE ticket_id = $1")
            .bind(ticket_id)
            .fetch_optional(self.pool())
            .await
            .map_err(classify)?
            .as_ref()
            .map(ticket_from_row))
    }

    /// Checks a ticket in: `VALID` to `CHECKED_IN`, once. Returns the ticket's status after.
    pub(crate) async fn check_in_ticket(
        &self,
        ticket_id: &str,
    ) -> StoreResult<Option<(bool, String)>> {
        let updated = sqlx::query(
            "UPDATE ticket SET status = 'CHECKED_IN', checked_in_at = boxoffice_now()
              WHERE ticket_id = $1 AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(ticket_id)
        .execute(self.pool())
        .await
        .map_err(classify)?
        .rows_affected();
        let status: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT status, exchange_id FROM ticket WHERE ticket_id = $1")
                .bind(ticket_id)
                .fetch_optional(self.pool())
                .await
                .map_err(classify)?;
        Ok(status.map(|(s, x)| (updated == 1, ticket_status(s, x))))
    }
}

/// Queues what gives an order's money back ([`payment_undo`]): a void, or a refund.
async fn undo_later(
    tx: &mut Transaction<'_, Postgres>,
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
    tx: &mut Transaction<'_, Postgres>,
    scope: &IdempotencyScope,
    response: &StoredResponse,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE idempotency SET status_code = $4, response_body = $5
          WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
    )
    .bind(&scope.account_id)
    .bind(&scope.endpoint)
    .bind(&scope.key)
    .bind(i32::from(response.status))
    .bind(&response.body)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

async fn fetch_operation_tx(
    tx: &mut Transaction<'_, Postgres>,
    operation_id: &str,
) -> StoreResult<PaymentOperation> {
    let sql = format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = $1 FOR UPDATE"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(operation_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
    operation_from_row(&row)
}

async fn fetch_holds_tx(
    tx: &mut Transaction<'_, Postgres>,
    hold_id: &str,
) -> StoreResult<HoldView> {
    let sql = format!(
        "SELECT {} FROM hold WHERE hold_id = $1 FOR UPDATE",
        crate::HOLD_COLUMNS
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hold_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
    crate::hold_from_row(&row)
}

/// New tickets as the columns of one `INSERT ... SELECT FROM UNNEST`.
#[derive(Default)]
struct TicketColumns {
    event_ids: Vec<String>,
    ticket_ids: Vec<String>,
    order_ids: Vec<String>,
    account_ids: Vec<String>,
    seat_ids: Vec<Option<String>>,
    tier_ids: Vec<Option<String>>,
    units: Vec<i32>,
    codes: Vec<String>,
}

/// What the one-statement capture of a confirmed order did.
enum FastCapture {
    /// The verdict or the rows as read are not a capture of a confirmed order.
    NotTried,
    Applied(Box<Settled>),
    /// The statement ran and found the rows no longer as read.
    Missed,
}

/// One capture for `PgStore::capture_authorized`.
struct CaptureAsked<'a> {
    operation_id: &'a str,
    provider_ref: Option<&'a str>,
    /// The webhook that brought the capture (provider, event id), recorded with it.
    webhook_provider: Option<&'a str>,
    webhook_id: Option<&'a str>,
}
