//! A provider's verdict on a payment, settled (see `boxoffice_domain::settlement` for the
//! rule): the operation moves, and the order is confirmed, cancelled or given back. The
//! settlement takes the hold's rows in the global lock order (seats, then tier, then hold,
//! order and operation) and re-reads them under the locks; every write is conditional on the
//! rows as read. A capture of a confirmed order's authorization, the commonest verdict of a
//! sale, is one conditional statement instead.

use std::collections::BTreeSet;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::IdempotencyScope;
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_domain::settlement::{self, Confirmation, Step, Undo};
use boxoffice_store::checkout::{
    OPERATION_RECHECK_S, OrderView, PaymentOperation, ProviderVerdict, RenderOrder, Settled,
    payment_undo, topic,
};
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, StoreError, StoreResult, hold_ended_payload};

use crate::db::{Conn, Db, Dialect, Rows, query};
use crate::{checkout, exchange, hold, outbox, seatmap};

/// Locks the seats still pointing to `hold` in seat order, then its tier (PostgreSQL;
/// SQLite's write transaction holds the file).
pub async fn lock_hold_resources(conn: &mut Conn<'_>, hold: &HoldView) -> StoreResult<()> {
    if !conn.dialect().locks_rows() {
        return Ok(());
    }
    // By the hold's own seat ids (primary key look-ups): filtered on `hold_id` alone, the
    // planner walked the event's whole primary key in seat order (7.8 ms a call on a 50,000
    // seat event, with the seats it had locked held meanwhile). A seat that no longer points
    // to the hold is not locked, as before.
    let seat_ids: Vec<&str> = hold.seats.iter().map(|s| s.seat_id.as_str()).collect();
    query(
        "SELECT 1 FROM seat WHERE event_id = $1 AND seat_id = ANY($3) AND hold_id = $2
          ORDER BY seat_id FOR UPDATE",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(seat_ids)
    .execute(conn)
    .await?;
    if let Some(tier_id) = &hold.tier_id {
        query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = $2 FOR UPDATE")
            .bind(&hold.event_id)
            .bind(tier_id)
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// After a hold left `HELD` (in this transaction): frees the seats that still point to it,
/// returns its tier units (exactly once, because the status change was conditional), ends the
/// exchange waiting on it and announces its end. Returns how many seats were freed.
pub async fn free_hold_resources(
    conn: &mut Conn<'_>,
    hold: &HoldView,
    now: OffsetDateTime,
    ended_as: HoldStatus,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let freed = query(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' RETURNING seat_id",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .fetch_all(conn)
    .await?;
    for row in &freed {
        let seat_id: String = row.get(0)?;
        map.seat(&hold.event_id, &seat_id, SeatStatus::Available, None);
    }
    if let Some(tier_id) = &hold.tier_id {
        let available: i64 = query(
            "UPDATE tier SET held = held - $3, available = available + $3
              WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&hold.event_id)
        .bind(tier_id)
        .bind(hold.quantity)
        .fetch_one(conn)
        .await?
        .get(0)?;
        map.tier(&hold.event_id, tier_id, available);
    }
    let (topic, exchange_ends_as) = if ended_as == HoldStatus::Released {
        ("hold.released", ExchangeStatus::Failed)
    } else {
        ("hold.expired", ExchangeStatus::Expired)
    };
    exchange::end_exchanges_of(conn, &[hold.hold_id.as_str()], exchange_ends_as, now).await?;
    let payload = hold_ended_payload(&hold.event_id, &hold.hold_id, &hold.account_id, ended_as);
    outbox::insert_encoded(conn, &[(&hold.event_id, topic, payload)], now).await?;
    Ok(freed.len() as u64)
}

/// The order, inside a transaction that already knows it exists.
async fn order_in(conn: &mut Conn<'_>, order_id: &str) -> StoreResult<OrderView> {
    checkout::load_order(conn, order_id).await?.ok_or_else(|| {
        StoreError::Internal(format!("order {order_id} vanished inside its transaction"))
    })
}

/// Cancels a pending order and, if its hold is still in checkout, ends the hold and frees
/// what it held. Conditional on the order's status: a second call changes nothing.
async fn cancel_pending_order(
    conn: &mut Conn<'_>,
    order: &OrderView,
    hold: &HoldView,
    reason: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<bool> {
    let cancelled = query(
        "UPDATE orders SET status = 'CANCELLED', cancel_reason = $2, updated_at = $3
          WHERE order_id = $1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(&order.order_id)
    .bind(reason)
    .bind(now)
    .execute(conn)
    .await?;
    if cancelled == 0 {
        return Ok(false);
    }
    let ended = query(
        "UPDATE hold SET status = 'RELEASED', updated_at = $3
          WHERE event_id = $1 AND hold_id = $2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(now)
    .execute(conn)
    .await?;
    if ended == 1 {
        free_hold_resources(conn, hold, now, HoldStatus::Released, map).await?;
    }
    let payload = serde_json::json!({"orderId": order.order_id, "reason": reason});
    outbox::insert(conn, &order.event_id, topic::ORDER_CANCELLED, payload, now).await?;
    Ok(true)
}

/// What the settlement's rules (`settlement::refusal`) need to know about a pending order's
/// hold before it is sold, read under the settlement's locks: the hold itself, whether its
/// exchange (if it is an exchange's) still waits for this payment, and what else the account
/// holds and owns in the event (less what an exchange of this hold gives up there).
async fn confirmation_of(
    conn: &mut Conn<'_>,
    hold: &HoldView,
    now: OffsetDateTime,
) -> StoreResult<Confirmation> {
    let exchange_open = exchange::still_open(conn, &hold.hold_id).await?;
    let row = query(format!(
        "SELECT (SELECT coalesce(sum(quantity - exchanged_out), 0)
                   FROM hold
                  WHERE event_id = $1 AND account_id = $2 AND hold_id <> $3
                    AND (status = 'CONFIRMED' OR (status IN ('HELD', 'PAYMENT_PENDING') AND expires_at > $4)))
                - coalesce((SELECT {} FROM exchange
                             WHERE new_hold_id = $3 AND from_event_id = $1 AND status = 'PAYMENT_REQUIRED'), 0),
                (SELECT max_tickets_per_account FROM event WHERE event_id = $1)",
        conn.dialect().json_array_length("ticket_ids"),
    ))
    .bind(&hold.event_id)
    .bind(&hold.account_id)
    .bind(&hold.hold_id)
    .bind(now)
    .fetch_one(conn)
    .await?;
    let (others, max): (i64, i32) = (row.get(0)?, row.get(1)?);
    Ok(Confirmation {
        hold_status: hold.status,
        hold_expires_at: hold.expires_at,
        exchange_open,
        account_total: u64::try_from(others.max(0)).unwrap_or(0) + u64::from(hold.quantity),
        max_tickets_per_account: u64::try_from(max.max(0)).unwrap_or(0),
    })
}

/// Sells a pending order's hold (the settlement's rules found nothing against it): seats
/// `SOLD`, tier units sold, hold `CONFIRMED`, order `CONFIRMED`, an exchange of the hold
/// completed, capture and ticket issuance queued. Every write is conditional on the rows as
/// the rules saw them.
async fn confirm_order(
    conn: &mut Conn<'_>,
    order: &OrderView,
    hold: &HoldView,
    operation_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    if let Some(tier_id) = &hold.tier_id {
        let available: i64 = query(
            "UPDATE tier SET held = held - $3, sold = sold + $3 WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&hold.event_id)
        .bind(tier_id)
        .bind(hold.quantity)
        .fetch_one(conn)
        .await?
        .get(0)?;
        // Named in the change feed although its availability is unchanged: the event's writer
        // reads the tier's holds again from it (this sale was not the writer's).
        map.tier(&hold.event_id, tier_id, available);
    } else {
        let sold = query(
            "UPDATE seat SET status = 'SOLD', order_id = $3, hold_expires_at = NULL, version = version + 1
              WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' AND hold_expires_at > $4",
        )
        .bind(&hold.event_id)
        .bind(&hold.hold_id)
        .bind(&order.order_id)
        .bind(now)
        .execute(conn)
        .await?;
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
    }
    query(
        "UPDATE hold SET status = 'CONFIRMED', updated_at = $3
          WHERE event_id = $1 AND hold_id = $2 AND status = 'PAYMENT_PENDING'",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .bind(now)
    .execute(conn)
    .await?;
    query(
        "UPDATE orders SET status = 'CONFIRMED', updated_at = $2
          WHERE order_id = $1 AND status = 'PENDING_PAYMENT'",
    )
    .bind(&order.order_id)
    .bind(now)
    .execute(conn)
    .await?;
    // An exchange's new seats are sold: its old tickets go in the same transaction.
    exchange::complete_exchange_of(conn, hold, &order.order_id, now, map).await?;
    let event_id = order.event_id.as_str();
    let messages = [
        (
            event_id,
            topic::PAYMENT_CAPTURE,
            serde_json::json!({"operationId": operation_id}),
        ),
        (
            event_id,
            topic::TICKETS_ISSUE,
            serde_json::json!({"orderId": order.order_id}),
        ),
        (
            event_id,
            topic::ORDER_CONFIRMED,
            serde_json::json!({"orderId": order.order_id}),
        ),
    ];
    outbox::insert_many(conn, &messages, now).await
}

/// Queues what gives an order's money back ([`payment_undo`]): a void, or a refund.
async fn undo_later(
    conn: &mut Conn<'_>,
    event_id: &str,
    operation: &PaymentOperation,
    undo: Undo,
    reason: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let (topic, payload) = payment_undo(operation, undo, reason);
    outbox::insert(conn, event_id, topic, payload, now).await
}

/// Settles `verdict` on the operation `operation_id` (`None` when it or its order is unknown,
/// or when `webhook` was seen before), and with `answer` stores the rendered order as the
/// answer of the checkout request it names.
pub async fn settle(
    db: &Db,
    operation_id: &str,
    verdict: &ProviderVerdict,
    webhook: Option<(&str, &str)>,
    answer: Option<(&IdempotencyScope, &RenderOrder)>,
) -> StoreResult<Option<Settled>> {
    let Some(operation) = checkout::operation(db, operation_id).await? else {
        return Ok(None);
    };
    // Without an answer to render, the order's tickets are not read: a webhook, the relay and
    // the reconciler look only at whether the verdict changed anything.
    let order = if answer.is_some() {
        checkout::order(db, &operation.order_id).await?
    } else {
        let order_ids = [operation.order_id.as_str()];
        checkout::load_order_heads(&mut db.read().await?.conn(), &order_ids)
            .await?
            .pop()
    };
    let Some(order) = order else {
        return Ok(None);
    };
    // A verdict the operation can no longer take changes nothing (payment statuses only move
    // forward), so a repeated webhook or a reconciler's late look costs no transaction (a
    // webhook seen before still answers `None`). With an answer to store, the transaction
    // runs: it renders the order.
    if answer.is_none() && !operation.status.can_become(verdict.payment_status()) {
        if let Some((provider, event_id)) = webhook {
            let seen = query("SELECT 1 FROM webhook_event WHERE provider = $1 AND event_id = $2")
                .bind(provider)
                .bind(event_id)
                .fetch_optional(&mut db.read().await?.conn())
                .await?;
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
        match capture_confirmed(db, &operation, &order, verdict, webhook).await? {
            FastCapture::Applied(settled) => return Ok(Some(*settled)),
            // The statement found the operation moved on: most often the relay's capture and
            // the provider's webhook of it racing, one waiting on the other's row lock. If the
            // verdict can no longer apply, nothing remains to decide (the full settlement
            // would lock the hold's rows only to find that out).
            FastCapture::Missed => {
                let now = checkout::operation(db, operation_id).await?;
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
    let hold_ids = [order.hold_id.clone()];
    let Some(hold) = hold::many(&mut db.read().await?.conn(), &hold_ids)
        .await?
        .pop()
    else {
        return Ok(None);
    };
    let d = db.dialect();
    let mut tx = db.write().await?;
    let mut conn = tx.conn();
    if let Some((provider, event_id)) = webhook {
        let fresh = query(format!(
            "INSERT INTO webhook_event (provider, event_id, received_at) VALUES ($1, $2, {})
             ON CONFLICT DO NOTHING",
            d.now(),
        ))
        .bind(provider)
        .bind(event_id)
        .execute(&mut conn)
        .await?;
        if fresh == 0 {
            return Ok(None);
        }
    }
    lock_hold_resources(&mut conn, &hold).await?;
    let now = outbox::store_now(&mut conn).await?;
    // Re-read under the locks: everything below is conditional on these rows.
    let current = checkout::operation_for_update(&mut conn, operation_id).await?;
    let order = order_in(&mut conn, &operation.order_id).await?;
    let hold = hold::for_update(&mut conn, &order.hold_id).await?;
    let target = verdict.payment_status();
    let mut map = MapChanges::default();
    let step = settlement::step(current.status, target, order.status);
    let changed = step != Step::Stale;
    if changed {
        let update = verdict.operation_update(current.n_attempts);
        query(format!(
            "UPDATE payment_operation
                SET status = $2, provider_ref = coalesce(provider_ref, $3), next_action_url = $4,
                    last_error = $5, updated_at = $6, next_attempt_at = {}
              WHERE operation_id = $1 AND status = $8",
            d.plus_secs("$6", "$7"),
        ))
        .bind(operation_id)
        .bind(target.as_str())
        .bind(verdict.provider_ref())
        .bind(update.next_action_url)
        .bind(update.last_error)
        .bind(now)
        .bind(update.recheck_after_s)
        .bind(current.status.as_str())
        .execute(&mut conn)
        .await?;
    }
    match step {
        Step::Stale | Step::Record => {}
        Step::Confirm => {
            let confirmation = confirmation_of(&mut conn, &hold, now).await?;
            let refusal = if crate::cancellation::is_cancelled(&mut conn, &order.event_id).await? {
                Some(settlement::reason::EVENT_CANCELLED)
            } else {
                settlement::refusal(&confirmation, now)
            };
            match refusal {
                None => {
                    confirm_order(&mut conn, &order, &hold, operation_id, now, &mut map).await?;
                }
                Some(reason) => {
                    cancel_pending_order(&mut conn, &order, &hold, reason, now, &mut map).await?;
                    if let Some(undo) = Undo::of(target) {
                        undo_later(&mut conn, &order.event_id, &current, undo, reason, now).await?;
                    }
                }
            }
        }
        Step::Cancel { reason } => {
            cancel_pending_order(&mut conn, &order, &hold, reason, now, &mut map).await?;
        }
        Step::GiveBack(undo) => {
            let reason = order.cancel_reason.as_deref().unwrap_or("CANCELLED");
            undo_later(&mut conn, &order.event_id, &current, undo, reason, now).await?;
        }
    }
    let order = order_in(&mut conn, &operation.order_id).await?;
    if let Some((scope, render)) = answer {
        let response = render(&order);
        query(
            "UPDATE idempotency SET status_code = $4, response_body = $5
              WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
        )
        .bind(&scope.account_id)
        .bind(&scope.endpoint)
        .bind(&scope.key)
        .bind(i32::from(response.status))
        .bind(response.body)
        .execute(&mut conn)
        .await?;
    }
    seatmap::record(&mut conn, &map, now).await?;
    tx.commit().await?;
    Ok(Some(Settled { order, changed }))
}

/// What the one-statement capture of a confirmed order did.
enum FastCapture {
    /// The verdict or the rows as read are not a capture of a confirmed order.
    NotTried,
    Applied(Box<Settled>),
    /// The statement ran and found the rows no longer as read.
    Missed,
}

/// One capture for [`capture_authorized`].
struct CaptureAsked<'a> {
    operation_id: &'a str,
    provider_ref: Option<&'a str>,
    /// The webhook that brought the capture (provider, event id), recorded with it.
    webhook: Option<(&'a str, &'a str)>,
}

/// The capture of a confirmed order's authorization (the relay's capture, or its webhook):
/// the only change is the operation's status, so it is one conditional statement
/// ([`capture_authorized`], the relay's batch with one row) instead of the settlement's
/// locking transaction (a dozen round trips per sold order). [`FastCapture::Missed`] when the
/// rows are no longer as read: an operation moved on, an order no longer confirmed.
async fn capture_confirmed(
    db: &Db,
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
    let asked = CaptureAsked {
        operation_id: &operation.operation_id,
        provider_ref: verdict.provider_ref(),
        webhook,
    };
    let updated = capture_authorized(db, &[asked])
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

/// [`capture_confirmed`] for many `(operation, provider reference)` in one statement (the
/// relay's round). Returns the operations captured.
pub async fn capture_confirmed_of(
    db: &Db,
    captures: &[(String, String)],
) -> StoreResult<Vec<String>> {
    let asked: Vec<CaptureAsked<'_>> = captures
        .iter()
        .map(|(operation_id, provider_ref)| CaptureAsked {
            operation_id,
            provider_ref: Some(provider_ref),
            webhook: None,
        })
        .collect();
    Ok(capture_authorized(db, &asked)
        .await?
        .into_iter()
        .map(|(operation_id, _)| operation_id)
        .collect())
}

/// The capture of confirmed orders' authorizations: each operation still `AUTHORIZED` whose
/// order is `CONFIRMED` becomes `CAPTURED`, and the webhook that brought it, if any, is
/// recorded. Rows are taken in operation id order. On PostgreSQL one statement, the order
/// row share-locked before the operation's (so a cancellation in progress is waited for and
/// the order seen as it commits); on SQLite two in one write transaction. Returns the
/// operations captured, with their new `updated_at`.
async fn capture_authorized(
    db: &Db,
    asked: &[CaptureAsked<'_>],
) -> StoreResult<Vec<(String, OffsetDateTime)>> {
    if asked.is_empty() {
        return Ok(Vec::new());
    }
    let d = db.dialect();
    let mut sorted: Vec<&CaptureAsked<'_>> = asked.iter().collect();
    sorted.sort_by_key(|asked| asked.operation_id);
    let rows = Rows::new()
        .texts("operation_id", sorted.iter().map(|a| a.operation_id))
        .opt_texts(
            "provider_ref",
            sorted.iter().map(|a| a.provider_ref.map(str::to_owned)),
        )
        .opt_texts(
            "provider",
            sorted.iter().map(|a| a.webhook.map(|w| w.0.to_owned())),
        )
        .opt_texts(
            "webhook_id",
            sorted.iter().map(|a| a.webhook.map(|w| w.1.to_owned())),
        );
    let captured = match d {
        Dialect::Postgres => {
            let rows = query(format!(
                "WITH asked AS (SELECT * FROM {u}), captured AS (
                    UPDATE payment_operation p
                       SET status = 'CAPTURED', provider_ref = coalesce(p.provider_ref, a.provider_ref),
                           next_action_url = NULL, last_error = NULL,
                           updated_at = {now}, next_attempt_at = {next}
                      FROM asked a
                     WHERE p.operation_id = a.operation_id AND p.status = 'AUTHORIZED'
                       AND EXISTS (SELECT 1 FROM orders o
                                    WHERE o.order_id = p.order_id AND o.status = 'CONFIRMED' FOR SHARE)
                    RETURNING p.operation_id, p.updated_at, a.provider, a.webhook_id
                 ), seen AS (
                    INSERT INTO webhook_event (provider, event_id, received_at)
                    SELECT provider, webhook_id, boxoffice_now() FROM captured WHERE provider IS NOT NULL
                    ON CONFLICT DO NOTHING
                 )
                 SELECT operation_id, updated_at FROM captured",
                u = rows.table(d, 2, "u"),
                now = d.now_ms(),
                next = d.plus_secs(d.now_ms(), "$1"),
            ))
            .bind(OPERATION_RECHECK_S)
            .bind_rows(d, rows)
            .fetch_all(&mut db.write_one().await?.conn())
            .await?;
            rows.iter()
                .map(|row| Ok((row.get(0)?, row.get(1)?)))
                .collect::<StoreResult<Vec<(String, OffsetDateTime)>>>()?
        }
        Dialect::Sqlite => {
            let mut tx = db.write().await?;
            let captured = query(format!(
                "UPDATE payment_operation AS p
                    SET status = 'CAPTURED', provider_ref = coalesce(p.provider_ref, a.provider_ref),
                        next_action_url = NULL, last_error = NULL,
                        updated_at = {now}, next_attempt_at = {next}
                   FROM {u}
                  WHERE p.operation_id = a.operation_id AND p.status = 'AUTHORIZED'
                    AND EXISTS (SELECT 1 FROM orders o WHERE o.order_id = p.order_id AND o.status = 'CONFIRMED')
                 RETURNING operation_id, updated_at",
                u = rows.table(d, 2, "a"),
                now = d.now_ms(),
                next = d.plus_secs(d.now_ms(), "$1"),
            ))
            .bind(OPERATION_RECHECK_S)
            .bind_rows(d, rows)
            .fetch_all(&mut tx.conn())
            .await?
            .iter()
            .map(|row| Ok((row.get(0)?, row.get(1)?)))
            .collect::<StoreResult<Vec<(String, OffsetDateTime)>>>()?;
            let ids: BTreeSet<&str> = captured.iter().map(|(id, _)| id.as_str()).collect();
            let seen: Vec<(&str, &str)> = sorted
                .iter()
                .filter(|a| ids.contains(a.operation_id))
                .filter_map(|a| a.webhook)
                .collect();
            if !seen.is_empty() {
                let rows = Rows::new()
                    .texts("provider", seen.iter().map(|w| w.0))
                    .texts("webhook_id", seen.iter().map(|w| w.1));
                query(format!(
                    "INSERT INTO webhook_event (provider, event_id, received_at)
                     SELECT u.provider, u.webhook_id, {now} FROM {u} WHERE true
                     ON CONFLICT DO NOTHING",
                    now = d.now(),
                    u = rows.table(d, 1, "u"),
                ))
                .bind_rows(d, rows)
                .execute(&mut tx.conn())
                .await?;
            }
            tx.commit().await?;
            captured
        }
    };
    Ok(captured)
}
