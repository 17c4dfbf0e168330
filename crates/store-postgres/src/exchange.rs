//! Exchanges on PostgreSQL (see `boxoffice_store::exchange` for the rules). An exchange is
//! written by its target event's writer group (`write_exchanges`), after the group locked the
//! event's seats and tiers: then the old orders and the tickets given up, then (an exchange
//! out of another event) that event's seats and tiers as the statements reach them; the
//! seat-map version rows last. A writer of that other event locks in the opposite order for
//! its own exchanges out of this one; such a deadlock refuses one of the groups, which is
//! decided again. The final swap after a paid difference locks the order's tickets, then
//! seats in (event, seat) order, then tiers.

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::engine::{
    ExchangeFacts, ExchangePlan, ExchangeWrite, GroupWrite, LockedOrder, LockedTicket,
    exchanges_refused, mismatch,
};
use boxoffice_store::exchange::{
    ExchangeOut, ExchangeRefused, ExchangeStatus, ExchangeView, InFate, LegRow, Surrender,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, NewRecord, StoreError, StoreResult, held_seats_json};
use sqlx::{Postgres, Row, Transaction};

use crate::checkout::{load_order, outbox, outbox_many};
use crate::{HOLD_COLUMNS, classify, hold_from_row, insert_records_each, store_now};

const EXCHANGE_COLUMNS: &str = "exchange_id, account_id, order_id, from_event_id, to_event_id,
     ticket_ids::text AS ticket_ids, from_value_minor, new_hold_id, new_order_id, to_value_minor,
     amount_due_minor, currency, status, created_at, updated_at";

async fn load_exchange(
    conn: &mut sqlx::PgConnection,
    exchange_id: &str,
) -> StoreResult<Option<ExchangeView>> {
    let sql = format!(
        "SELECT {EXCHANGE_COLUMNS} FROM exchange WHERE exchange_id = $1 AND leg IN ('BOTH', 'IN')"
    );
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
    Ok(Surrender::marked(
        rows,
        old.tier_id.as_deref(),
        from_value_minor,
    ))
}

/// Takes the transaction's lock on each exchange id (sorted, so two takers never wait on each
/// other): the target shard's `IN` row and its `ABORT` row are written only under it.
pub(crate) async fn lock_exchange_ids(
    tx: &mut Transaction<'_, Postgres>,
    exchange_ids: &[&str],
) -> StoreResult<()> {
    let mut ids = exchange_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended('exchange ' || id, 0))
           FROM UNNEST($1::text[]) AS u(id) ORDER BY id",
    )
    .bind(&ids)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
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
    let Some((exchange_id, old_order_id, from_event_id, from_value, leg)) =
        sqlx::query_as::<_, (String, String, String, i64, String)>(
            "SELECT exchange_id, order_id, from_event_id, from_value_minor, leg FROM exchange
              WHERE new_hold_id = $1 AND status = 'PAYMENT_REQUIRED' AND leg IN ('BOTH', 'IN')
                FOR UPDATE",
        )
        .bind(&hold.hold_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?
    else {
        return Ok(());
    };
    // Across shards the old side is on the old event's shard: the settler swaps it out there
    // once it reads this row completed.
    if leg == "BOTH" {
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
    }
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
        &from_event_id,
        boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
        serde_json::json!({"exchangeId": exchange_id, "orderId": old_order_id, "newOrderId": new_order_id}),
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
    let Some((exchange_id, status, n_tickets, leg)) =
        sqlx::query_as::<_, (String, String, i32, String)>(
            "SELECT exchange_id, status, jsonb_array_length(ticket_ids), leg FROM exchange
              WHERE new_hold_id = $1 AND leg IN ('BOTH', 'IN')",
        )
        .bind(hold_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?
    else {
        return Ok(true);
    };
    if leg == "IN" {
        // The marked tickets are on the old event's shard, which keeps them marked while
        // this row waits for payment.
        return Ok(status == ExchangeStatus::PaymentRequired.as_str());
    }
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
}

/// The exchanges a group grants, written in its transaction after what it frees (see
/// [`ExchangeWrite`]). The old orders and the tickets picked are locked (orders, then
/// tickets, as a compensation locks them) and judged: an order no longer `CONFIRMED` or a
/// ticket no longer `VALID` and unmarked refuses its exchange alone. Returns the command
/// indexes refused.
pub(crate) async fn write_exchanges(
    tx: &mut Transaction<'_, Postgres>,
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
          WHERE order_id = ANY($1) ORDER BY order_id FOR UPDATE",
    )
    .bind(&order_ids)
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
          WHERE ticket_id = ANY($1) ORDER BY ticket_id FOR UPDATE",
    )
    .bind(&ticket_ids)
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
    let scopes =
        |f: fn(&ExchangeWrite) -> &str| -> Vec<&str> { group.exchanges.iter().map(f).collect() };
    facts.used_keys = sqlx::query_as(
        "SELECT i.account_id, i.endpoint, i.idem_key FROM idempotency i
           JOIN UNNEST($1::text[], $2::text[], $3::text[]) AS u(a, e, k)
             ON i.account_id = u.a AND i.endpoint = u.e AND i.idem_key = u.k",
    )
    .bind(scopes(|x| x.start.scope.account_id.as_str()))
    .bind(scopes(|x| x.start.scope.endpoint.as_str()))
    .bind(scopes(|x| x.start.scope.key.as_str()))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?
    .into_iter()
    .collect();
    // Exchanges across shards: each one's id, locked as the settler's abort locks it, must
    // not be recorded here yet.
    let across: Vec<&str> = group
        .exchanges
        .iter()
        .filter(|x| !x.old_side_here())
        .map(|x| x.start.exchange_id.as_str())
        .collect();
    if !across.is_empty() {
        lock_exchange_ids(tx, &across).await?;
        facts.recorded =
            sqlx::query_scalar("SELECT exchange_id FROM exchange WHERE exchange_id = ANY($1)")
                .bind(&across)
                .fetch_all(&mut **tx)
                .await
                .map_err(classify)?
                .into_iter()
                .collect();
    }
    let refused = exchanges_refused(&group.exchanges, facts);
    let plans = group.exchange_plans(&refused);
    if !plans.is_empty() {
        write_grants(tx, &plans, group.now, map).await?;
        let records: Vec<(&str, &NewRecord)> = plans
            .iter()
            .map(|plan| (plan.write.start.scope.endpoint.as_str(), &plan.write.record))
            .collect();
        insert_records_each(tx, &records, group.now).await?;
    }
    Ok(refused)
}

/// Writes the granted exchanges: new holds, new seats, tier counts, exchange rows, old
/// tickets (voided or marked), old seats back on sale, old holds' exchanged-out counts, new
/// orders and their (zero) payments, outbox rows. Every update is conditional and counted.
async fn write_grants(
    tx: &mut Transaction<'_, Postgres>,
    plans: &[ExchangePlan<'_>],
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    // New holds.
    let mut h = HoldRows::default();
    for plan in plans {
        h.event.push(plan.to_event());
        h.hold.push(&plan.start.new_hold_id);
        h.account.push(&plan.write.account_id);
        h.status
            .push(if plan.pays() { "HELD" } else { "CONFIRMED" });
        h.tier.push(plan.tier_id.as_deref());
        h.quantity.push(plan.quantity as i32);
        h.seats.push(held_seats_json(&plan.seats));
        h.total.push(plan.to_value_minor());
        h.currency.push(&plan.start.to_event.currency);
        h.key.push(format!("exchange:{}", plan.start.exchange_id));
        h.expires.push(plan.expires_at);
        h.order
            .push((!plan.pays()).then_some(plan.start.new_order_id.as_str()));
    }
    sqlx::query(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                           idempotency_key, created_at, expires_at, updated_at, order_id)
         SELECT e, h, a, s, t, q, j::jsonb, tot, c, k, $13, x, $13, o
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],
                       $8::bigint[], $9::text[], $10::text[], $11::timestamptz[], $12::text[])
                AS u(e, h, a, s, t, q, j, tot, c, k, x, o)",
    )
    .bind(&h.event)
    .bind(&h.hold)
    .bind(&h.account)
    .bind(&h.status)
    .bind(&h.tier)
    .bind(&h.quantity)
    .bind(&h.seats)
    .bind(&h.total)
    .bind(&h.currency)
    .bind(&h.key)
    .bind(&h.expires)
    .bind(&h.order)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;

    // Swapped now: old seats back on sale first (the engine may give one to a later
    // exchange of the group), each still sold to its order.
    let swapped: Vec<&ExchangePlan> = plans.iter().filter(|p| !p.pays()).collect();
    let mut f_event = Vec::new();
    let mut f_seat = Vec::new();
    let mut f_order = Vec::new();
    for plan in swapped.iter().filter(|p| p.old_side_here()) {
        for seat_id in &plan.gone().seat_ids {
            f_event.push(plan.start.from_event.event_id.as_str());
            f_seat.push(seat_id.as_str());
            f_order.push(plan.start.order_id.as_str());
        }
    }
    if !f_seat.is_empty() {
        let freed = sqlx::query_as::<_, (String, String)>(
            "UPDATE seat s SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = s.version + 1
               FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(e, id, o)
              WHERE s.event_id = u.e AND s.seat_id = u.id AND s.status = 'SOLD' AND s.order_id = u.o
             RETURNING s.event_id, s.seat_id",
        )
        .bind(&f_event)
        .bind(&f_seat)
        .bind(&f_order)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if freed.len() != f_seat.len() {
            return Err(mismatch(
                "old seats still sold to their orders",
                f_seat.len(),
                freed.len() as u64,
            ));
        }
        for (event_id, seat_id) in &freed {
            map.seat_unless_named(event_id, seat_id, SeatStatus::Available, None);
        }
    }

    // New seats: held until paid, or sold at once.
    let mut seat_event = Vec::new();
    let mut seat_id = Vec::new();
    let mut seat_status = Vec::new();
    let mut seat_hold = Vec::new();
    let mut seat_until: Vec<Option<OffsetDateTime>> = Vec::new();
    let mut seat_order: Vec<Option<&str>> = Vec::new();
    for plan in plans {
        for (id, _) in &plan.seats {
            seat_event.push(plan.to_event());
            seat_id.push(id.as_str());
            seat_status.push(if plan.pays() { "HELD" } else { "SOLD" });
            seat_hold.push(plan.start.new_hold_id.as_str());
            seat_until.push(plan.pays().then_some(plan.expires_at));
            seat_order.push((!plan.pays()).then_some(plan.start.new_order_id.as_str()));
            if plan.pays() {
                map.seat_unless_named(plan.to_event(), id, SeatStatus::Held, Some(plan.expires_at));
            } else {
                map.seat_unless_named(plan.to_event(), id, SeatStatus::Sold, None);
            }
        }
    }
    if !seat_id.is_empty() {
        let taken = sqlx::query(
            "UPDATE seat s SET status = u.st, hold_id = u.h, hold_expires_at = u.x, order_id = u.o,
                    version = s.version + 1
               FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
                    AS u(e, id, st, h, x, o)
              WHERE s.event_id = u.e AND s.seat_id = u.id
                AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= $7))",
        )
        .bind(&seat_event)
        .bind(&seat_id)
        .bind(&seat_status)
        .bind(&seat_hold)
        .bind(&seat_until)
        .bind(&seat_order)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if taken != seat_id.len() as u64 {
            return Err(mismatch(
                "seats still free for exchanges",
                seat_id.len(),
                taken,
            ));
        }
    }

    // Tier counts, both sides, summed per tier.
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
        if let (Some((tier_id, units)), false, true) =
            (&plan.gone().tier, plan.pays(), plan.old_side_here())
        {
            let d = tier_deltas
                .entry((plan.start.from_event.event_id.as_str(), tier_id))
                .or_default();
            d.0 += i64::from(*units);
            d.2 -= i64::from(*units);
        }
    }
    if !tier_deltas.is_empty() {
        let (mut te, mut ti, mut ta, mut th, mut ts) = (vec![], vec![], vec![], vec![], vec![]);
        for ((event_id, tier_id), (a, h, s)) in &tier_deltas {
            te.push(*event_id);
            ti.push(*tier_id);
            ta.push(*a);
            th.push(*h);
            ts.push(*s);
        }
        let rows = sqlx::query_as::<_, (String, String, i64)>(
            "UPDATE tier t SET available = t.available + u.a, held = t.held + u.h, sold = t.sold + u.s
               FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(e, id, a, h, s)
              WHERE t.event_id = u.e AND t.tier_id = u.id
                AND t.available + u.a >= 0 AND t.held + u.h >= 0 AND t.sold + u.s >= 0
             RETURNING t.event_id, t.tier_id, t.available",
        )
        .bind(&te)
        .bind(&ti)
        .bind(&ta)
        .bind(&th)
        .bind(&ts)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if rows.len() != tier_deltas.len() {
            return Err(mismatch(
                "tiers with the units for exchanges",
                tier_deltas.len(),
                rows.len() as u64,
            ));
        }
        for (event_id, tier_id, available) in rows {
            map.tier(&event_id, &tier_id, available);
        }
    }

    // The exchanges.
    let ids: Vec<&str> = plans.iter().map(|p| p.start.exchange_id.as_str()).collect();
    let accounts: Vec<&str> = plans.iter().map(|p| p.write.account_id.as_str()).collect();
    let orders: Vec<&str> = plans.iter().map(|p| p.start.order_id.as_str()).collect();
    let froms: Vec<&str> = plans
        .iter()
        .map(|p| p.start.from_event.event_id.as_str())
        .collect();
    let tos: Vec<&str> = plans.iter().map(|p| p.to_event()).collect();
    let tickets: Vec<String> = plans
        .iter()
        .map(|p| serde_json::to_string(&p.gone().ticket_ids).unwrap_or_else(|_| "[]".into()))
        .collect();
    let from_values: Vec<i64> = plans.iter().map(|p| p.gone().value_minor).collect();
    let holds: Vec<&str> = plans.iter().map(|p| p.start.new_hold_id.as_str()).collect();
    let new_orders: Vec<Option<&str>> = plans
        .iter()
        .map(|p| (!p.pays()).then_some(p.start.new_order_id.as_str()))
        .collect();
    let to_values: Vec<i64> = plans.iter().map(|p| p.to_value_minor()).collect();
    let dues: Vec<i64> = plans.iter().map(|p| p.write.amount_due_minor()).collect();
    let currencies: Vec<&str> = plans
        .iter()
        .map(|p| p.start.to_event.currency.as_str())
        .collect();
    let statuses: Vec<&str> = plans
        .iter()
        .map(|p| {
            if p.pays() {
                ExchangeStatus::PaymentRequired.as_str()
            } else {
                ExchangeStatus::Completed.as_str()
            }
        })
        .collect();
    let keys: Vec<&str> = plans.iter().map(|p| p.start.scope.key.as_str()).collect();
    let legs: Vec<&str> = plans.iter().map(|p| p.leg()).collect();
    sqlx::query(
        "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                               from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                               currency, status, idempotency_key, created_at, updated_at, leg)
         SELECT x, a, o, f, t, j::jsonb, fv, h, n, tv, d, c, s, k, $15, $15, l
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                       $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[],
                       $16::text[])
                AS u(x, a, o, f, t, j, fv, h, n, tv, d, c, s, k, l)",
    )
    .bind(&ids)
    .bind(&accounts)
    .bind(&orders)
    .bind(&froms)
    .bind(&tos)
    .bind(&tickets)
    .bind(&from_values)
    .bind(&holds)
    .bind(&new_orders)
    .bind(&to_values)
    .bind(&dues)
    .bind(&currencies)
    .bind(&statuses)
    .bind(&keys)
    .bind(now)
    .bind(&legs)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;

    // Old tickets: voided (swapped now) or marked (until paid), where they are here.
    let mut t_id = Vec::new();
    let mut t_status = Vec::new();
    let mut t_mark = Vec::new();
    for plan in plans.iter().filter(|p| p.old_side_here()) {
        for ticket_id in &plan.gone().ticket_ids {
            t_id.push(ticket_id.as_str());
            t_status.push(if plan.pays() { "VALID" } else { "VOIDED" });
            t_mark.push(plan.start.exchange_id.as_str());
        }
    }
    let changed = sqlx::query(
        "UPDATE ticket t SET status = u.s, exchange_id = u.x
           FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(id, s, x)
          WHERE t.ticket_id = u.id AND t.status = 'VALID' AND t.exchange_id IS NULL",
    )
    .bind(&t_id)
    .bind(&t_status)
    .bind(&t_mark)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if changed != t_id.len() as u64 {
        return Err(mismatch("tickets still valid", t_id.len(), changed));
    }

    // Swapped now: old holds count what left, new orders.
    let swapped: Vec<&ExchangePlan> = plans.iter().filter(|p| !p.pays()).collect();
    if swapped.is_empty() {
        return Ok(());
    }
    let mut left: BTreeMap<&str, i32> = BTreeMap::new();
    for plan in swapped.iter().filter(|p| p.old_side_here()) {
        *left.entry(plan.write.old_hold_id.as_str()).or_default() += plan.gone().quantity() as i32;
    }
    let (left_holds, left_units): (Vec<&str>, Vec<i32>) = left.into_iter().unzip();
    let counted = sqlx::query(
        "UPDATE hold h SET exchanged_out = h.exchanged_out + u.n
           FROM UNNEST($1::text[], $2::int[]) AS u(id, n)
          WHERE h.hold_id = u.id AND h.status = 'CONFIRMED' AND h.quantity - h.exchanged_out >= u.n",
    )
    .bind(&left_holds)
    .bind(&left_units)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if counted != left_holds.len() as u64 {
        return Err(mismatch(
            "old holds still confirmed with the units",
            left_holds.len(),
            counted,
        ));
    }
    let mut o = OrderRows::default();
    for plan in &swapped {
        o.event.push(plan.to_event());
        o.order.push(&plan.start.new_order_id);
        o.hold.push(&plan.start.new_hold_id);
        o.account.push(&plan.write.account_id);
        o.seats.push(held_seats_json(&plan.seats));
        o.tier.push(plan.tier_id.as_deref());
        o.quantity.push(plan.quantity as i32);
        o.total.push(plan.to_value_minor());
        o.currency.push(&plan.start.to_event.currency);
        o.operation.push(&plan.start.operation_id);
        o.method
            .push(format!("exchange:{}", plan.start.exchange_id));
    }
    sqlx::query(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                             currency, created_at, updated_at)
         SELECT e, o, h, a, 'CONFIRMED', j::jsonb, t, q, tot, c, $10, $10
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
                       $8::bigint[], $9::text[]) AS u(e, o, h, a, j, t, q, tot, c)",
    )
    .bind(&o.event)
    .bind(&o.order)
    .bind(&o.hold)
    .bind(&o.account)
    .bind(&o.seats)
    .bind(&o.tier)
    .bind(&o.quantity)
    .bind(&o.total)
    .bind(&o.currency)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // Nothing to pay: each new order's payment is settled by the old one's.
    sqlx::query(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                        amount_minor, currency, next_attempt_at, created_at, updated_at)
         SELECT e, op, o, 'exchange', m, 'CAPTURED', 0, c, $6, $6, $6
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(e, op, o, m, c)",
    )
    .bind(&o.event)
    .bind(&o.operation)
    .bind(&o.order)
    .bind(&o.method)
    .bind(&o.currency)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // The new orders' tickets, signed by the caller, issued with the swap.
    let mut tk = TicketRows::default();
    for plan in &swapped {
        let account = plan.write.account_id.as_str();
        for ticket in &plan.start.new_tickets {
            tk.event.push(ticket.draft.event_id.as_str());
            tk.ticket.push(ticket.draft.ticket_id.as_str());
            tk.order.push(ticket.draft.order_id.as_str());
            tk.account.push(account);
            tk.seat.push(ticket.draft.seat_id.as_deref());
            tk.tier.push(ticket.draft.tier_id.as_deref());
            tk.unit.push(ticket.draft.unit as i32);
            tk.code.push(ticket.code.as_str());
        }
    }
    sqlx::query(
        "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
         SELECT e, t, o, a, s, ti, n, c, 'VALID', $9
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
                AS u(e, t, o, a, s, ti, n, c)",
    )
    .bind(&tk.event)
    .bind(&tk.ticket)
    .bind(&tk.order)
    .bind(&tk.account)
    .bind(&tk.seat)
    .bind(&tk.tier)
    .bind(&tk.unit)
    .bind(&tk.code)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    let mut messages = Vec::with_capacity(swapped.len());
    for plan in &swapped {
        let from_event = plan.start.from_event.event_id.as_str();
        let new_order = &plan.start.new_order_id;
        messages.push((
            from_event,
            boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
            serde_json::json!({"exchangeId": plan.start.exchange_id,
                               "orderId": plan.start.order_id, "newOrderId": new_order}),
        ));
        if plan.write.amount_due_minor() < 0 {
            messages.push((
                from_event,
                boxoffice_store::exchange::topic::REFUND_DUE,
                serde_json::json!({"exchangeId": plan.start.exchange_id,
                                   "orderId": plan.start.order_id,
                                   "amountMinor": -plan.write.amount_due_minor(),
                                   "currency": plan.start.to_event.currency}),
            ));
        }
    }
    outbox_many(tx, &messages, now).await
}

/// Columns of the new holds, one vector each (for `UNNEST`).
#[derive(Default)]
struct HoldRows<'a> {
    event: Vec<&'a str>,
    hold: Vec<&'a str>,
    account: Vec<&'a str>,
    status: Vec<&'a str>,
    tier: Vec<Option<&'a str>>,
    quantity: Vec<i32>,
    seats: Vec<String>,
    total: Vec<i64>,
    currency: Vec<&'a str>,
    key: Vec<String>,
    expires: Vec<OffsetDateTime>,
    order: Vec<Option<&'a str>>,
}

/// Columns of the new orders' tickets.
#[derive(Default)]
struct TicketRows<'a> {
    event: Vec<&'a str>,
    ticket: Vec<&'a str>,
    order: Vec<&'a str>,
    account: Vec<&'a str>,
    seat: Vec<Option<&'a str>>,
    tier: Vec<Option<&'a str>>,
    unit: Vec<i32>,
    code: Vec<&'a str>,
}

/// Columns of the new orders and their payments.
#[derive(Default)]
struct OrderRows<'a> {
    event: Vec<&'a str>,
    order: Vec<&'a str>,
    hold: Vec<&'a str>,
    account: Vec<&'a str>,
    seats: Vec<String>,
    tier: Vec<Option<&'a str>>,
    quantity: Vec<i32>,
    total: Vec<i64>,
    currency: Vec<&'a str>,
    operation: Vec<&'a str>,
    method: Vec<String>,
}

/// The columns of an `OUT` row, read back as an [`ExchangeOut`].
const OUT_COLUMNS: &str =
    "x.exchange_id, x.account_id, x.order_id, o.hold_id, x.from_event_id, x.to_event_id,
     x.ticket_ids::text AS ticket_ids, x.from_value_minor, x.new_hold_id, x.to_value_minor,
     x.amount_due_minor, x.currency, x.idempotency_key, x.status, x.created_at, x.updated_at";

fn out_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<ExchangeOut> {
    let status: String = row.get("status");
    let ticket_ids: String = row.get("ticket_ids");
    Ok(ExchangeOut {
        exchange_id: row.get("exchange_id"),
        account_id: row.get("account_id"),
        order_id: row.get("order_id"),
        old_hold_id: row.get("hold_id"),
        from_event_id: row.get("from_event_id"),
        to_event_id: row.get("to_event_id"),
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?,
        from_value_minor: row.get("from_value_minor"),
        new_hold_id: row.get("new_hold_id"),
        to_value_minor: row.get("to_value_minor"),
        amount_due_minor: row.get("amount_due_minor"),
        currency: row.get("currency"),
        idempotency_key: row.get("idempotency_key"),
        status: ExchangeStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?,
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    })
}

/// Writes an exchange row of one side only (`OUT` on the old event's shard, `ABORT` on the
/// target's), from what the `OUT` row holds.
async fn insert_leg(
    tx: &mut Transaction<'_, Postgres>,
    out: &ExchangeOut,
    leg: &str,
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let ticket_ids = serde_json::to_string(&out.ticket_ids)
        .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?;
    sqlx::query(
        "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                               from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                               currency, status, idempotency_key, created_at, updated_at, leg)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, NULL, $9, $10, $11, $12, $13, $14, $14, $15)",
    )
    .bind(&out.exchange_id)
    .bind(&out.account_id)
    .bind(&out.order_id)
    .bind(&out.from_event_id)
    .bind(&out.to_event_id)
    .bind(&ticket_ids)
    .bind(out.from_value_minor)
    .bind(&out.new_hold_id)
    .bind(out.to_value_minor)
    .bind(out.amount_due_minor)
    .bind(&out.currency)
    .bind(status.as_str())
    .bind(&out.idempotency_key)
    .bind(now)
    .bind(leg)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Exchanges across shards (DESIGN §7; see [`boxoffice_store::exchange::settle_out`] for the
/// steps and [`boxoffice_store::Store::mark_exchange_out`] for each one's rule).
impl crate::PgStore {
    pub(crate) async fn mark_out(
        &self,
        out: &ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), ExchangeRefused>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let now = store_now(&mut tx).await?;
        if now >= closes_at {
            return Ok(Err(ExchangeRefused::Closed(format!(
                "exchanges of this event closed at {closes_at} (its start minus the exchange cutoff)"
            ))));
        }
        // Orders, then tickets: the order a compensation locks them in.
        let order = sqlx::query_as::<_, (String, String, String, String)>(
            "SELECT status, account_id, event_id, hold_id FROM orders WHERE order_id = $1 FOR UPDATE",
        )
        .bind(&out.order_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        let as_read = order
            .as_ref()
            .is_some_and(|(status, account, event, hold)| {
                status == "CONFIRMED"
                    && *account == out.account_id
                    && *event == out.from_event_id
                    && *hold == out.old_hold_id
            });
        if !as_read {
            return Ok(Err(ExchangeRefused::Conflict(format!(
                "order {} is no longer CONFIRMED",
                out.order_id
            ))));
        }
        let mut ids = out.ticket_ids.clone();
        ids.sort_unstable();
        let tickets = sqlx::query_as::<_, (String, String, String, Option<String>)>(
            "SELECT ticket_id, order_id, status, exchange_id FROM ticket
              WHERE ticket_id = ANY($1) ORDER BY ticket_id FOR UPDATE",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let usable = tickets
            .iter()
            .filter(|(_, order_id, status, mark)| {
                *order_id == out.order_id && status == "VALID" && mark.is_none()
            })
            .count();
        if usable != ids.len() {
            return Ok(Err(ExchangeRefused::Conflict(
                "a ticket given up is no longer valid, or is already being exchanged".into(),
            )));
        }
        insert_leg(&mut tx, out, "OUT", ExchangeStatus::PaymentRequired, now).await?;
        let marked = sqlx::query(
            "UPDATE ticket SET exchange_id = $2
              WHERE ticket_id = ANY($1) AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(&ids)
        .bind(&out.exchange_id)
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if marked != ids.len() as u64 {
            return Err(mismatch("tickets still valid", ids.len(), marked));
        }
        tx.commit().await.map_err(classify)?;
        Ok(Ok(()))
    }

    pub(crate) async fn in_fate(
        &self,
        out: &ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<InFate>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        lock_exchange_ids(&mut tx, &[out.exchange_id.as_str()]).await?;
        let row = sqlx::query_as::<_, (String, String, Option<String>)>(
            "SELECT leg, status, new_order_id FROM exchange WHERE exchange_id = $1",
        )
        .bind(&out.exchange_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        let fate = match row {
            None if !abort_if_missing => None,
            None => {
                let now = store_now(&mut tx).await?;
                insert_leg(&mut tx, out, "ABORT", ExchangeStatus::Failed, now).await?;
                Some(InFate::Ended(ExchangeStatus::Failed))
            }
            Some((leg, status, new_order_id)) => {
                if leg != "IN" && leg != "ABORT" {
                    return Err(StoreError::Internal(format!(
                        "exchange {} is a {leg} row on the target's shard",
                        out.exchange_id
                    )));
                }
                let status = ExchangeStatus::parse(&status)
                    .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?;
                Some(match status {
                    ExchangeStatus::PaymentRequired => InFate::Open,
                    ExchangeStatus::Completed => InFate::Completed {
                        new_order_id: new_order_id.unwrap_or_default(),
                    },
                    ended => InFate::Ended(ended),
                })
            }
        };
        tx.commit().await.map_err(classify)?;
        Ok(fate)
    }

    pub(crate) async fn finish_out(
        &self,
        exchange_id: &str,
        fate: &InFate,
    ) -> StoreResult<Option<ExchangeStatus>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let sql = format!(
            "SELECT {OUT_COLUMNS} FROM exchange x JOIN orders o ON o.order_id = x.order_id
              WHERE x.exchange_id = $1 AND x.leg = 'OUT' FOR UPDATE OF x"
        );
        let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(exchange_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
        else {
            return Ok(None);
        };
        let out = out_from_row(&row)?;
        if out.status != ExchangeStatus::PaymentRequired {
            return Ok(Some(out.status));
        }
        let now = store_now(&mut tx).await?;
        let mut map = MapChanges::default();
        let status = match fate {
            InFate::Open => {
                // Still waiting for the difference: looked at again later.
                sqlx::query(
                    "UPDATE exchange SET updated_at = $2
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                ExchangeStatus::PaymentRequired
            }
            InFate::Completed { new_order_id } => {
                let old = load_order(&mut tx, &out.order_id).await?.ok_or_else(|| {
                    StoreError::Internal(format!("exchange {exchange_id} lost its order"))
                })?;
                let gone =
                    marked_surrender(&mut tx, exchange_id, &old, out.from_value_minor).await?;
                lock_seats(
                    &mut tx,
                    gone.seat_ids
                        .iter()
                        .map(|s| (old.event_id.clone(), s.clone()))
                        .collect(),
                )
                .await?;
                swap_out(&mut tx, exchange_id, &old, &gone, &mut map).await?;
                sqlx::query(
                    "UPDATE exchange SET status = 'COMPLETED', new_order_id = $2, updated_at = $3
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(new_order_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                ExchangeStatus::Completed
            }
            InFate::Ended(status) => {
                sqlx::query(
                    "UPDATE exchange SET status = $2, updated_at = $3
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(status.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                sqlx::query(
                    "UPDATE ticket SET exchange_id = NULL WHERE exchange_id = $1 AND status = 'VALID'",
                )
                .bind(exchange_id)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                *status
            }
        };
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map,
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Some(status))
    }

    /// Every row of exchanges across shards in this database (`OUT`, `IN`, `ABORT`), for
    /// `boxoffice check` ([`boxoffice_store::exchange::leg_violations`]).
    pub async fn exchange_legs(&self) -> StoreResult<Vec<LegRow>> {
        let rows = sqlx::query_as::<_, (String, String, String, OffsetDateTime)>(
            "SELECT exchange_id, leg, status, updated_at FROM exchange
              WHERE leg <> 'BOTH' ORDER BY exchange_id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(classify)?;
        rows.into_iter()
            .map(|(exchange_id, leg, status, updated_at)| {
                Ok(LegRow {
                    exchange_id,
                    leg,
                    status: ExchangeStatus::parse(&status).ok_or_else(|| {
                        StoreError::Internal(format!("exchange status {status:?}"))
                    })?,
                    updated_at,
                })
            })
            .collect()
    }

    pub(crate) async fn open_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<ExchangeOut>> {
        let sql = format!(
            "SELECT {OUT_COLUMNS} FROM exchange x JOIN orders o ON o.order_id = x.order_id
              WHERE x.leg = 'OUT' AND x.status = 'PAYMENT_REQUIRED'
                AND x.updated_at <= boxoffice_now() - make_interval(secs => $1)
              ORDER BY x.updated_at LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(older_than_s)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .map_err(classify)?;
        rows.iter().map(out_from_row).collect()
    }
}
