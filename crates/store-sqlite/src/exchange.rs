//! Exchanges on SQLite (see `boxoffice_store::exchange` for the rules). Mirrors the PostgreSQL
//! backend statement for statement; where that one locks the order's tickets, the seats and
//! tiers, then the hold, order and exchange rows (`FOR UPDATE`), every write here runs in a
//! `BEGIN IMMEDIATE` transaction on the single writer connection, so what it reads stays as
//! read until commit and only the reads whose answers are used remain. Times are INTEGER unix
//! milliseconds from the store's clock; id lists are bound as one JSON array.
//!
//! An exchange is granted by its target event's writer and written with that writer's group
//! ([`write_exchanges`], called by `apply_group`); the rest of this file is the exchange's
//! later life: the swap when the difference is paid, its end when the new hold ends.

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::engine::{
    ExchangeFacts, ExchangePlan, GroupWrite, LockedOrder, LockedTicket, exchanges_refused, mismatch,
};
use boxoffice_store::exchange::{ExchangeStatus, ExchangeView, Surrender};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, StoreError, StoreResult, held_seats_json};
use sqlx::{Sqlite, Transaction};

use crate::checkout::{load_order, outbox};
use crate::{
    HOLD_COLUMNS, classify, column, from_ms, hold_from_row, insert_records, json_list, to_ms,
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
}

/// The exchanges a group grants, written in its transaction after what it frees (see
/// [`ExchangeWrite`]). The old orders and the tickets picked are read (the group holds
/// SQLite's only write lock, so they stay as read until commit, as PostgreSQL's row locks
/// keep them) and judged: an order no longer `CONFIRMED`, of another account or event, or a
/// ticket no longer the order's, `VALID` and unmarked (or taken by an earlier exchange of
/// the group) refuses its exchange alone. Returns the command indexes refused.
pub(crate) async fn write_exchanges(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<Vec<usize>> {
    if group.exchanges.is_empty() && group.effects.exchanges.is_empty() {
        return Ok(Vec::new());
    }
    let (order_ids, ticket_ids) = group.exchange_rows()?;
    let mut facts = ExchangeFacts::default();
    let orders = sqlx::query_as::<_, (String, String, String, String, String)>(
        "SELECT order_id, status, account_id, event_id, hold_id FROM orders
          WHERE order_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_list(&order_ids))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (order_id, status, account_id, event_id, hold_id) in orders {
        let order = LockedOrder {
            status,
            account_id,
            event_id,
            hold_id,
        };
        facts.orders.insert(order_id, order);
    }
    let tickets = sqlx::query_as::<_, (String, String, String, Option<String>)>(
        "SELECT ticket_id, order_id, status, exchange_id FROM ticket
          WHERE ticket_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_list(&ticket_ids))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (ticket_id, order_id, status, exchange_id) in tickets {
        let ticket = LockedTicket {
            order_id,
            status,
            exchange_id,
        };
        facts.tickets.insert(ticket_id, ticket);
    }
    // A key already used (by a request that committed since the route looked).
    for write in &group.exchanges {
        let scope = &write.start.scope;
        let used: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM idempotency WHERE account_id = ?1 AND endpoint = ?2 AND idem_key = ?3",
        )
        .bind(&scope.account_id)
        .bind(&scope.endpoint)
        .bind(&scope.key)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?;
        if used.is_some() {
            facts.used_keys.insert(write.key());
        }
    }
    let refused = exchanges_refused(&group.exchanges, facts);
    let plans = group.exchange_plans(&refused);
    if !plans.is_empty() {
        write_grants(tx, &plans, group.now, map).await?;
        for plan in &plans {
            insert_records(
                tx,
                &plan.start.scope.endpoint,
                std::slice::from_ref(&plan.write.record),
                group.now,
            )
            .await?;
        }
    }
    Ok(refused)
}

/// Writes the granted exchanges: new holds, new seats, tier counts, exchange rows, old
/// tickets (voided or marked), old seats back on sale, old holds' exchanged-out counts, new
/// orders and their (zero) payments and tickets, outbox rows. Every update is conditional and
/// counted: a difference refuses the whole group.
async fn write_grants(
    tx: &mut Transaction<'_, Sqlite>,
    plans: &[ExchangePlan<'_>],
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let now_ms = to_ms(now);
    // New holds.
    for plan in plans {
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at, order_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?11, ?13)",
        )
        .bind(plan.to_event())
        .bind(&plan.start.new_hold_id)
        .bind(&plan.write.account_id)
        .bind(if plan.pays() { "HELD" } else { "CONFIRMED" })
        .bind(&plan.tier_id)
        .bind(i64::from(plan.quantity))
        .bind(held_seats_json(&plan.seats))
        .bind(plan.to_value_minor())
        .bind(&plan.start.to_event.currency)
        .bind(format!("exchange:{}", plan.start.exchange_id))
        .bind(now_ms)
        .bind(to_ms(plan.expires_at))
        .bind(plan.new_order_id())
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }

    // Swapped now: old seats back on sale first (the engine may give one to a later
    // exchange of the group), each still sold to its order.
    let swapped: Vec<&ExchangePlan> = plans.iter().filter(|p| !p.pays()).collect();
    for plan in swapped
        .iter()
        .filter(|plan| !plan.gone().seat_ids.is_empty())
    {
        let seat_ids = &plan.gone().seat_ids;
        let freed = sqlx::query_scalar::<_, String>(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = version + 1
              WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2)) AND status = 'SOLD'
                AND order_id = ?3
             RETURNING seat_id",
        )
        .bind(plan.old_event())
        .bind(json_list(seat_ids))
        .bind(&plan.start.order_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if freed.len() != seat_ids.len() {
            return Err(mismatch(
                &format!("old seats still sold to order {}", plan.start.order_id),
                seat_ids.len(),
                freed.len() as u64,
            ));
        }
        for seat_id in &freed {
            map.seat_unless_named(plan.old_event(), seat_id, SeatStatus::Available, None);
        }
    }

    // New seats: held until paid, or sold at once; each only if still free by the group's
    // clock.
    for plan in plans.iter().filter(|plan| !plan.seats.is_empty()) {
        let ids: Vec<&str> = plan.seats.iter().map(|(s, _)| s.as_str()).collect();
        let until = plan.pays().then_some(plan.expires_at);
        let taken = sqlx::query(
            "UPDATE seat SET status = ?3, hold_id = ?4, hold_expires_at = ?5, order_id = ?6, version = version + 1
              WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2))
                AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= ?7))",
        )
        .bind(plan.to_event())
        .bind(json_list(&ids))
        .bind(if plan.pays() { "HELD" } else { "SOLD" })
        .bind(&plan.start.new_hold_id)
        .bind(until.map(to_ms))
        .bind(plan.new_order_id())
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if taken != ids.len() as u64 {
            return Err(mismatch(
                &format!("seats of exchange {} still free", plan.start.exchange_id),
                ids.len(),
                taken,
            ));
        }
        let status = if plan.pays() {
            SeatStatus::Held
        } else {
            SeatStatus::Sold
        };
        for id in ids {
            map.seat_unless_named(plan.to_event(), id, status, until);
        }
    }

    // Tier counts, both sides, summed per tier: (available, held, sold).
    let mut tier_deltas: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    for plan in plans {
        if let Some(tier_id) = &plan.tier_id {
            let q = i64::from(plan.quantity);
            let d = tier_deltas.entry((plan.to_event(), tier_id)).or_default();
            d.0 -= q;
            if plan.pays() {
                d.1 += q;
            } else {
                d.2 += q;
            }
        }
        if let (Some((tier_id, units)), false) = (&plan.gone().tier, plan.pays()) {
            let d = tier_deltas.entry((plan.old_event(), tier_id)).or_default();
            d.0 += i64::from(*units);
            d.2 -= i64::from(*units);
        }
    }
    for ((event_id, tier_id), (a, h, s)) in &tier_deltas {
        let available: Option<i64> = sqlx::query_scalar(
            "UPDATE tier SET available = available + ?3, held = held + ?4, sold = sold + ?5
              WHERE event_id = ?1 AND tier_id = ?2
                AND available + ?3 >= 0 AND held + ?4 >= 0 AND sold + ?5 >= 0
             RETURNING available",
        )
        .bind(event_id)
        .bind(tier_id)
        .bind(a)
        .bind(h)
        .bind(s)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?;
        let Some(available) = available else {
            return Err(mismatch(
                &format!("tier {tier_id} of event {event_id} with the units for exchanges"),
                1,
                0,
            ));
        };
        map.tier(event_id, tier_id, available);
    }

    // The exchanges.
    for plan in plans {
        let status = if plan.pays() {
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
        .bind(&plan.start.exchange_id)
        .bind(&plan.write.account_id)
        .bind(&plan.start.order_id)
        .bind(plan.old_event())
        .bind(plan.to_event())
        .bind(json_list(&plan.gone().ticket_ids))
        .bind(plan.gone().value_minor)
        .bind(&plan.start.new_hold_id)
        .bind(plan.new_order_id())
        .bind(plan.to_value_minor())
        .bind(plan.write.amount_due_minor())
        .bind(&plan.start.to_event.currency)
        .bind(status.as_str())
        .bind(&plan.start.scope.key)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }

    // Old tickets: voided (swapped now) or marked (until paid), each only if still valid and
    // unmarked.
    for plan in plans {
        let ticket_ids = &plan.gone().ticket_ids;
        let changed = sqlx::query(
            "UPDATE ticket SET status = ?3, exchange_id = ?2
              WHERE ticket_id IN (SELECT value FROM json_each(?1)) AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(json_list(ticket_ids))
        .bind(&plan.start.exchange_id)
        .bind(if plan.pays() { "VALID" } else { "VOIDED" })
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if changed != ticket_ids.len() as u64 {
            return Err(mismatch(
                &format!("tickets of exchange {} still valid", plan.start.exchange_id),
                ticket_ids.len(),
                changed,
            ));
        }
    }

    // Swapped now: old holds count what left, new orders.
    let swapped: Vec<&ExchangePlan> = plans.iter().filter(|p| !p.pays()).collect();
    if swapped.is_empty() {
        return Ok(());
    }
    let mut left: BTreeMap<&str, i64> = BTreeMap::new();
    for plan in &swapped {
        *left.entry(plan.write.old_hold_id.as_str()).or_default() +=
            i64::from(plan.gone().quantity());
    }
    for (hold_id, units) in left {
        let counted = sqlx::query(
            "UPDATE hold SET exchanged_out = exchanged_out + ?2
              WHERE hold_id = ?1 AND status = 'CONFIRMED' AND quantity - exchanged_out >= ?2",
        )
        .bind(hold_id)
        .bind(units)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if counted != 1 {
            return Err(mismatch(
                &format!("old hold {hold_id} still confirmed with the units"),
                1,
                counted,
            ));
        }
    }
    for plan in &swapped {
        sqlx::query(
            "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                                 currency, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'CONFIRMED', ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        )
        .bind(plan.to_event())
        .bind(&plan.start.new_order_id)
        .bind(&plan.start.new_hold_id)
        .bind(&plan.write.account_id)
        .bind(held_seats_json(&plan.seats))
        .bind(&plan.tier_id)
        .bind(i64::from(plan.quantity))
        .bind(plan.to_value_minor())
        .bind(&plan.start.to_event.currency)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    // Nothing to pay: each new order's payment is settled by the old one's.
    for plan in &swapped {
        sqlx::query(
            "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                            amount_minor, currency, next_attempt_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, 'exchange', ?4, 'CAPTURED', 0, ?5, ?6, ?6, ?6)",
        )
        .bind(plan.to_event())
        .bind(&plan.start.operation_id)
        .bind(&plan.start.new_order_id)
        .bind(format!("exchange:{}", plan.start.exchange_id))
        .bind(&plan.start.to_event.currency)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    // The new orders' tickets, signed by the caller, issued with the swap.
    for plan in &swapped {
        for ticket in &plan.start.new_tickets {
            sqlx::query(
                "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'VALID', ?9)",
            )
            .bind(&ticket.draft.event_id)
            .bind(&ticket.draft.ticket_id)
            .bind(&ticket.draft.order_id)
            .bind(&plan.write.account_id)
            .bind(&ticket.draft.seat_id)
            .bind(&ticket.draft.tier_id)
            .bind(i64::from(ticket.draft.unit))
            .bind(&ticket.code)
            .bind(now_ms)
            .execute(&mut **tx)
            .await
            .map_err(classify)?;
        }
    }
    for plan in &swapped {
        let amount_due = plan.write.amount_due_minor();
        outbox(
            tx,
            plan.old_event(),
            boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
            serde_json::json!({"exchangeId": plan.start.exchange_id,
                               "orderId": plan.start.order_id,
                               "newOrderId": plan.start.new_order_id}),
            now,
        )
        .await?;
        if amount_due < 0 {
            outbox(
                tx,
                plan.old_event(),
                boxoffice_store::exchange::topic::REFUND_DUE,
                serde_json::json!({"exchangeId": plan.start.exchange_id,
                                   "orderId": plan.start.order_id,
                                   "amountMinor": -amount_due,
                                   "currency": plan.start.to_event.currency}),
                now,
            )
            .await?;
        }
    }
    Ok(())
}
