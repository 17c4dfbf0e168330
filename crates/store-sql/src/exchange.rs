//! Exchanges (see `boxoffice_store::exchange` for the rules). An exchange is written by its
//! target event's writer group ([`write`]), after the group locked the event's seats and
//! tiers: then the old orders and the tickets given up, then (an exchange out of another
//! event) that event's seats and tiers as the statements reach them; the seat-map version
//! rows last. A writer of that other event locks in the opposite order for its own exchanges
//! out of this one; such a deadlock refuses one of the groups, which is decided again. The
//! final swap after a paid difference ([`complete_exchange_of`]) locks the order's tickets,
//! then seats in (event, seat) order, then tiers. Across shards (PostgreSQL only) the legs
//! are the backend's.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::engine::{
    ExchangeFacts, ExchangePlan, ExchangeWrite, GroupWrite, exchange_plans, exchange_rows,
    exchanges_refused,
};
use boxoffice_store::exchange::topic::{EXCHANGE_COMPLETED, EXCHANGE_ENDED, REFUND_DUE};
use boxoffice_store::exchange::{ExchangeStatus, ExchangeView, Surrender};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, NewRecord, StoreError, StoreResult, held_seats_json};

use crate::db::{Conn, Db, Rows, query};
use crate::hold::{HOLD_COLUMNS, hold_from_row};
use crate::{idempotency, outbox};

/// The exchanges waiting for payment on the new holds `hold_ids` end with `status`, their
/// old tickets lose their mark (valid again) and `exchange.ended` is announced to the old
/// event. Conditional on the exchange's status: a second call finds nothing to do.
pub async fn end_exchanges_of(
    conn: &mut Conn<'_>,
    hold_ids: &[&str],
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    if hold_ids.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let ended = query(format!(
        "UPDATE exchange SET status = $2, updated_at = $3
          WHERE new_hold_id {} AND status = 'PAYMENT_REQUIRED'
         RETURNING exchange_id, from_event_id, order_id",
        d.in_list("$1"),
    ))
    .bind(hold_ids.to_vec())
    .bind(status.as_str())
    .bind(now)
    .fetch_all(conn)
    .await?;
    if ended.is_empty() {
        return Ok(());
    }
    let mut ids: Vec<String> = Vec::with_capacity(ended.len());
    let mut messages: Vec<(String, serde_json::Value)> = Vec::with_capacity(ended.len());
    for row in &ended {
        let (exchange_id, event_id, order_id): (String, String, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?);
        messages.push((
            event_id,
            serde_json::json!({"exchangeId": exchange_id, "orderId": order_id, "status": status.as_str()}),
        ));
        ids.push(exchange_id);
    }
    query(format!(
        "UPDATE ticket SET exchange_id = NULL WHERE exchange_id {} AND status = 'VALID'",
        d.in_list("$1"),
    ))
    .bind(ids)
    .execute(conn)
    .await?;
    let messages: Vec<(&str, &str, serde_json::Value)> = messages
        .iter()
        .map(|(event_id, payload)| (event_id.as_str(), EXCHANGE_ENDED, payload.clone()))
        .collect();
    outbox::insert_many(conn, &messages, now).await
}

/// The exchange columns [`load`] reads.
const EXCHANGE_COLUMNS: &str = "exchange_id, account_id, order_id, from_event_id, to_event_id,
     CAST(ticket_ids AS text) AS ticket_ids, from_value_minor, new_hold_id, new_order_id,
     to_value_minor, amount_due_minor, currency, status, created_at, updated_at";

/// Parses a stored exchange status.
pub fn parse_status(raw: &str) -> StoreResult<ExchangeStatus> {
    ExchangeStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("exchange status {raw:?}")))
}

/// Parses an exchange's stored ticket ids (a JSON array).
pub fn parse_ticket_ids(raw: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(raw).map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))
}

/// One exchange as its target event sees it (its `BOTH` or `IN` row), with its new hold.
pub async fn load(conn: &mut Conn<'_>, exchange_id: &str) -> StoreResult<Option<ExchangeView>> {
    let Some(row) = query(format!(
        "SELECT {EXCHANGE_COLUMNS} FROM exchange WHERE exchange_id = $1 AND leg IN ('BOTH', 'IN')"
    ))
    .bind(exchange_id)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    let new_hold_id: String = row.get("new_hold_id")?;
    let hold_row = query(format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = $1"
    ))
    .bind(&new_hold_id)
    .fetch_one(conn)
    .await?;
    Ok(Some(ExchangeView {
        exchange_id: row.get("exchange_id")?,
        account_id: row.get("account_id")?,
        order_id: row.get("order_id")?,
        from_event_id: row.get("from_event_id")?,
        to_event_id: row.get("to_event_id")?,
        ticket_ids: parse_ticket_ids(&row.get::<String, _>("ticket_ids")?)?,
        from_value_minor: row.get("from_value_minor")?,
        new_hold: hold_from_row(&hold_row)?,
        new_order_id: row.get("new_order_id")?,
        to_value_minor: row.get("to_value_minor")?,
        amount_due_minor: row.get("amount_due_minor")?,
        currency: row.get("currency")?,
        status: parse_status(&row.get::<String, _>("status")?)?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    }))
}

/// One exchange (see [`load`]).
pub async fn get(db: &Db, exchange_id: &str) -> StoreResult<Option<ExchangeView>> {
    load(&mut db.read().await?.conn(), exchange_id).await
}

/// Locks seats of one or more events in (event, seat) order (PostgreSQL; SQLite's write
/// transaction holds the file).
pub async fn lock_seats(conn: &mut Conn<'_>, wanted: &[(&str, &str)]) -> StoreResult<()> {
    if !conn.dialect().locks_rows() {
        return Ok(());
    }
    let mut by_event: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (event_id, seat_id) in wanted {
        by_event.entry(event_id).or_default().push(seat_id);
    }
    for (event_id, seat_ids) in by_event {
        query(
            "SELECT 1 FROM seat WHERE event_id = $1 AND seat_id = ANY($2) ORDER BY seat_id FOR UPDATE",
        )
        .bind(event_id)
        .bind(seat_ids)
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// Takes the transaction's lock on each exchange id (sorted, so two takers never wait on each
/// other): the target shard's `IN` row and its `ABORT` row are written only under it
/// (PostgreSQL's advisory locks; SQLite has one shard and its write transaction holds the
/// file).
pub async fn lock_ids(conn: &mut Conn<'_>, exchange_ids: &[&str]) -> StoreResult<()> {
    if !conn.dialect().locks_rows() {
        return Ok(());
    }
    let ids: BTreeSet<&str> = exchange_ids.iter().copied().collect();
    query(
        "SELECT pg_advisory_xact_lock(hashtextextended('exchange ' || id, 0))
           FROM UNNEST($1::text[]) AS u(id) ORDER BY id",
    )
    .bind(ids.into_iter().collect::<Vec<_>>())
    .execute(conn)
    .await?;
    Ok(())
}

/// Gives up the surrendered tickets: voided (keeping the exchange's id), their seats back on
/// sale or their tier units returned, the old hold's count of units that left raised.
pub async fn swap_out(
    conn: &mut Conn<'_>,
    exchange_id: &str,
    old: &OrderView,
    gone: &Surrender,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let d = conn.dialect();
    let voided = query(format!(
        "UPDATE ticket SET status = 'VOIDED', exchange_id = $2
          WHERE ticket_id {} AND status = 'VALID' AND (exchange_id IS NULL OR exchange_id = $2)",
        d.in_list("$1"),
    ))
    .bind(gone.ticket_ids.clone())
    .bind(exchange_id)
    .execute(conn)
    .await?;
    if voided != gone.ticket_ids.len() as u64 {
        return Err(StoreError::Internal(format!(
            "exchange {exchange_id} voided {voided} of {} tickets",
            gone.ticket_ids.len()
        )));
    }
    if !gone.seat_ids.is_empty() {
        let freed = query(format!(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = version + 1
              WHERE event_id = $1 AND seat_id {} AND status = 'SOLD' AND order_id = $3
             RETURNING seat_id",
            d.in_list("$2"),
        ))
        .bind(&old.event_id)
        .bind(gone.seat_ids.clone())
        .bind(&old.order_id)
        .fetch_all(conn)
        .await?;
        if freed.len() != gone.seat_ids.len() {
            return Err(StoreError::Internal(format!(
                "exchange {exchange_id} freed {} of {} seats of order {}",
                freed.len(),
                gone.seat_ids.len(),
                old.order_id
            )));
        }
        for row in &freed {
            let seat_id: String = row.get(0)?;
            map.seat(&old.event_id, &seat_id, SeatStatus::Available, None);
        }
    }
    if let Some((tier_id, units)) = &gone.tier {
        let available: i64 = query(
            "UPDATE tier SET sold = sold - $3, available = available + $3
              WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&old.event_id)
        .bind(tier_id)
        .bind(*units)
        .fetch_one(conn)
        .await?
        .get(0)?;
        map.tier(&old.event_id, tier_id, available);
    }
    query("UPDATE hold SET exchanged_out = exchanged_out + $2 WHERE hold_id = $1")
        .bind(&old.hold_id)
        .bind(gone.quantity() as i32)
        .execute(conn)
        .await?;
    Ok(())
}

/// The surrender an exchange marked, read back from its tickets (for the final swap).
pub async fn marked_surrender(
    conn: &mut Conn<'_>,
    exchange_id: &str,
    old: &OrderView,
    from_value_minor: i64,
) -> StoreResult<Surrender> {
    let lock = conn.dialect().lock("FOR UPDATE");
    let rows = query(format!(
        "SELECT ticket_id, seat_id FROM ticket
          WHERE exchange_id = $1 AND status = 'VALID' ORDER BY unit {lock}"
    ))
    .bind(exchange_id)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| Ok((row.get(0)?, row.get(1)?)))
    .collect::<StoreResult<Vec<(String, Option<String>)>>>()?;
    Ok(Surrender::marked(
        rows,
        old.tier_id.as_deref(),
        from_value_minor,
    ))
}

/// Called by the confirmation of a hold's order: if the hold is an exchange's, the old side is
/// swapped out in the same transaction and the exchange completes. Across shards the old side
/// is on the old event's shard: the settler swaps it out there once it reads this row
/// completed.
pub async fn complete_exchange_of(
    conn: &mut Conn<'_>,
    hold: &HoldView,
    new_order_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let lock = conn.dialect().lock("FOR UPDATE");
    let Some(row) = query(format!(
        "SELECT exchange_id, order_id, from_event_id, from_value_minor, leg FROM exchange
          WHERE new_hold_id = $1 AND status = 'PAYMENT_REQUIRED' AND leg IN ('BOTH', 'IN') {lock}"
    ))
    .bind(&hold.hold_id)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(());
    };
    let (exchange_id, old_order_id, from_event_id): (String, String, String) =
        (row.get(0)?, row.get(1)?, row.get(2)?);
    let (from_value, leg): (i64, String) = (row.get(3)?, row.get(4)?);
    if leg == "BOTH" {
        let old = crate::checkout::load_order(conn, &old_order_id)
            .await?
            .ok_or_else(|| {
                StoreError::Internal(format!("exchange {exchange_id} lost order {old_order_id}"))
            })?;
        let gone = marked_surrender(conn, &exchange_id, &old, from_value).await?;
        let seats: Vec<(&str, &str)> = gone
            .seat_ids
            .iter()
            .map(|s| (old.event_id.as_str(), s.as_str()))
            .collect();
        lock_seats(conn, &seats).await?;
        swap_out(conn, &exchange_id, &old, &gone, map).await?;
    }
    query(
        "UPDATE exchange SET status = 'COMPLETED', new_order_id = $2, updated_at = $3
          WHERE exchange_id = $1 AND status = 'PAYMENT_REQUIRED'",
    )
    .bind(&exchange_id)
    .bind(new_order_id)
    .bind(now)
    .execute(conn)
    .await?;
    let payload = serde_json::json!({"exchangeId": exchange_id, "orderId": old_order_id, "newOrderId": new_order_id});
    outbox::insert(conn, &from_event_id, EXCHANGE_COMPLETED, payload, now).await
}

/// Whether the hold may be sold: it is no exchange's, or its exchange still waits for payment
/// with every ticket it gave up still marked (a compensation that cancelled the old order ends
/// the exchange; a sale then would sell the new seats for the difference only).
pub async fn still_open(conn: &mut Conn<'_>, hold_id: &str) -> StoreResult<bool> {
    let Some(row) = query(
        "SELECT exchange_id, status, CAST(ticket_ids AS text), leg FROM exchange
          WHERE new_hold_id = $1 AND leg IN ('BOTH', 'IN')",
    )
    .bind(hold_id)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(true);
    };
    let (exchange_id, status, leg): (String, String, String) =
        (row.get(0)?, row.get(1)?, row.get(3)?);
    let waiting = status == ExchangeStatus::PaymentRequired.as_str();
    if leg == "IN" {
        // The marked tickets are on the old event's shard, which keeps them marked while this
        // row waits for payment.
        return Ok(waiting);
    }
    let n_tickets = parse_ticket_ids(&row.get::<String, _>(2)?)?.len();
    let marked: i64 =
        query("SELECT count(*) FROM ticket WHERE exchange_id = $1 AND status = 'VALID'")
            .bind(&exchange_id)
            .fetch_one(conn)
            .await?
            .get(0)?;
    Ok(waiting && usize::try_from(marked).ok() == Some(n_tickets))
}

/// The exchanges a group grants, written in its transaction after what it frees (see
/// [`ExchangeWrite`]). The old orders and the tickets picked are locked (orders, then
/// tickets, as a compensation locks them) and judged: an order no longer `CONFIRMED` or a
/// ticket no longer `VALID` and unmarked refuses its exchange alone. Returns the command
/// indexes refused.
pub async fn write(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<Vec<usize>> {
    let exchanges = group.exchanges()?;
    if exchanges.is_empty() {
        return Ok(Vec::new());
    }
    let d = conn.dialect();
    let (order_ids, ticket_ids) = exchange_rows(&exchanges);
    let mut facts = ExchangeFacts::default();
    // The old orders with their payment's status: an order not captured yet is refused.
    for (order_id, locked) in crate::checkout::lock_orders(conn, order_ids).await? {
        if locked.payment_status.as_deref() == Some("CAPTURED") {
            facts.captured.insert(order_id.clone());
        }
        facts.orders.insert(order_id, locked.order);
    }
    facts.tickets = crate::checkout::lock_tickets(conn, ticket_ids).await?;
    // A key already used (by a request that committed since the route looked).
    let scopes = |f: fn(&ExchangeWrite) -> &str| exchanges.iter().map(move |(_, x)| f(x));
    let rows = Rows::new()
        .texts("a", scopes(|x| x.start.scope.account_id.as_str()))
        .texts("e", scopes(|x| x.start.scope.endpoint.as_str()))
        .texts("k", scopes(|x| x.start.scope.key.as_str()));
    for row in query(format!(
        "SELECT i.account_id, i.endpoint, i.idem_key FROM {u}
           JOIN idempotency i ON i.account_id = u.a AND i.endpoint = u.e AND i.idem_key = u.k",
        u = rows.table(d, 1, "u"),
    ))
    .bind_rows(d, rows)
    .fetch_all(conn)
    .await?
    {
        facts
            .used_keys
            .insert((row.get(0)?, row.get(1)?, row.get(2)?));
    }
    // Exchanges across shards: each one's id, locked as the settler's abort locks it, must
    // not be recorded here yet.
    let across: Vec<&str> = exchanges
        .iter()
        .map(|(_, x)| *x)
        .filter(|x| !x.old_side_here())
        .map(|x| x.start.exchange_id.as_str())
        .collect();
    if !across.is_empty() {
        lock_ids(conn, &across).await?;
        for row in query(format!(
            "SELECT exchange_id FROM exchange WHERE exchange_id {}",
            d.in_list("$1"),
        ))
        .bind(across)
        .fetch_all(conn)
        .await?
        {
            facts.recorded.insert(row.get(0)?);
        }
    }
    let refused = exchanges_refused(&exchanges, facts);
    let plans = exchange_plans(&exchanges, &refused);
    if !plans.is_empty() {
        write_grants(conn, &plans, group.now, map).await?;
        let records: Vec<(&str, &NewRecord)> = plans
            .iter()
            .map(|plan| (plan.write.start.scope.endpoint.as_str(), &plan.write.record))
            .collect();
        idempotency::insert_each(conn, &group.event.event_id, &records, group.now).await?;
    }
    Ok(refused)
}

/// Writes the granted exchanges: new holds, old seats back on sale, new seats, tier counts,
/// exchange rows, old tickets (voided or marked), old holds' exchanged-out counts, new orders
/// with their (zero) payments and tickets, outbox rows. Every update is conditional and
/// counted: a difference refuses the whole group.
async fn write_grants(
    conn: &mut Conn<'_>,
    plans: &[ExchangePlan<'_>],
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let d = conn.dialect();
    // New holds.
    let rows = Rows::new()
        .texts("e", plans.iter().map(|p| p.to_event()))
        .texts("h", plans.iter().map(|p| p.start.new_hold_id.as_str()))
        .texts("a", plans.iter().map(|p| p.write.account_id.as_str()))
        .texts(
            "s",
            plans
                .iter()
                .map(|p| if p.pays() { "HELD" } else { "CONFIRMED" }),
        )
        .opt_texts("t", plans.iter().map(|p| p.tier_id.clone()))
        .int4s("q", plans.iter().map(|p| p.quantity as i32))
        .texts("j", plans.iter().map(|p| held_seats_json(&p.seats)))
        .ints("tot", plans.iter().map(|p| p.to_value_minor()))
        .texts(
            "c",
            plans.iter().map(|p| p.start.to_event.currency.as_str()),
        )
        .texts(
            "k",
            plans
                .iter()
                .map(|p| format!("exchange:{}", p.start.exchange_id)),
        )
        .times("x", plans.iter().map(|p| p.expires_at))
        .opt_texts(
            "o",
            plans
                .iter()
                .map(|p| (!p.pays()).then(|| p.start.new_order_id.clone())),
        );
    query(format!(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                           idempotency_key, created_at, expires_at, updated_at, order_id)
         SELECT u.e, u.h, u.a, u.s, u.t, u.q, {seats}, u.tot, u.c, u.k, $1, u.x, $1, u.o FROM {u}",
        seats = d.json("u.j"),
        u = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;

    // Swapped now: old seats back on sale first (the engine may give one to a later exchange
    // of the group), each still sold to its order.
    let swapped: Vec<&ExchangePlan> = plans.iter().filter(|p| !p.pays()).collect();
    let freed_seats: Vec<(&str, &str, &str)> = swapped
        .iter()
        .filter(|p| p.old_side_here())
        .flat_map(|p| {
            p.gone().seat_ids.iter().map(|seat_id| {
                (
                    p.start.from_event.event_id.as_str(),
                    seat_id.as_str(),
                    p.start.order_id.as_str(),
                )
            })
        })
        .collect();
    if !freed_seats.is_empty() {
        let expected = freed_seats.len();
        let rows = Rows::new()
            .texts("e", freed_seats.iter().map(|s| s.0))
            .texts("id", freed_seats.iter().map(|s| s.1))
            .texts("o", freed_seats.iter().map(|s| s.2));
        let freed = query(format!(
            "UPDATE seat AS s SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL,
                                  hold_expires_at = NULL, version = s.version + 1
               FROM {u}
              WHERE s.event_id = u.e AND s.seat_id = u.id AND s.status = 'SOLD' AND s.order_id = u.o
             RETURNING event_id, seat_id",
            u = rows.table(d, 1, "u"),
        ))
        .bind_rows(d, rows)
        .fetch_exactly(conn, expected, "old seats still sold to their orders")
        .await?;
        for row in &freed {
            let (event_id, seat_id): (String, String) = (row.get(0)?, row.get(1)?);
            map.seat_unless_named(&event_id, &seat_id, SeatStatus::Available, None);
        }
    }

    // New seats: held until paid, or sold at once, each only if still free by the group's
    // clock.
    let mut taken: Vec<(&ExchangePlan, &str)> = Vec::new();
    for plan in plans {
        for (id, _) in &plan.seats {
            taken.push((plan, id));
            if plan.pays() {
                map.seat_unless_named(plan.to_event(), id, SeatStatus::Held, Some(plan.expires_at));
            } else {
                map.seat_unless_named(plan.to_event(), id, SeatStatus::Sold, None);
            }
        }
    }
    if !taken.is_empty() {
        let expected = taken.len();
        let rows = Rows::new()
            .texts("e", taken.iter().map(|(p, _)| p.to_event()))
            .texts("id", taken.iter().map(|(_, id)| *id))
            .texts(
                "st",
                taken
                    .iter()
                    .map(|(p, _)| if p.pays() { "HELD" } else { "SOLD" }),
            )
            .texts("h", taken.iter().map(|(p, _)| p.start.new_hold_id.as_str()))
            .opt_times(
                "x",
                taken.iter().map(|(p, _)| p.pays().then_some(p.expires_at)),
            )
            .opt_texts(
                "o",
                taken
                    .iter()
                    .map(|(p, _)| (!p.pays()).then(|| p.start.new_order_id.clone())),
            );
        query(format!(
            "UPDATE seat AS s SET status = u.st, hold_id = u.h, hold_expires_at = u.x, order_id = u.o,
                                  version = s.version + 1
               FROM {u}
              WHERE s.event_id = u.e AND s.seat_id = u.id
                AND (s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= $1))",
            u = rows.table(d, 2, "u"),
        ))
        .bind(now)
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "seats still free for exchanges")
        .await?;
    }

    // Tier counts, both sides, summed per tier: (available, held, sold).
    let mut tier_deltas: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    for plan in plans {
        if let Some(tier_id) = &plan.tier_id {
            let q = i64::from(plan.quantity);
            let delta = tier_deltas.entry((plan.to_event(), tier_id)).or_default();
            delta.0 -= q;
            if plan.pays() {
                delta.1 += q;
            } else {
                delta.2 += q;
            }
        }
        if let (Some((tier_id, units)), false, true) =
            (&plan.gone().tier, plan.pays(), plan.old_side_here())
        {
            let delta = tier_deltas
                .entry((plan.start.from_event.event_id.as_str(), tier_id))
                .or_default();
            delta.0 += i64::from(*units);
            delta.2 -= i64::from(*units);
        }
    }
    if !tier_deltas.is_empty() {
        let expected = tier_deltas.len();
        let rows = Rows::new()
            .texts("e", tier_deltas.keys().map(|k| k.0))
            .texts("tier", tier_deltas.keys().map(|k| k.1))
            .ints("a", tier_deltas.values().map(|v| v.0))
            .ints("h", tier_deltas.values().map(|v| v.1))
            .ints("s", tier_deltas.values().map(|v| v.2));
        let moved = query(format!(
            "UPDATE tier AS t SET available = t.available + u.a, held = t.held + u.h, sold = t.sold + u.s
               FROM {u}
              WHERE t.event_id = u.e AND t.tier_id = u.tier
                AND t.available + u.a >= 0 AND t.held + u.h >= 0 AND t.sold + u.s >= 0
             RETURNING event_id, tier_id, available",
            u = rows.table(d, 1, "u"),
        ))
        .bind_rows(d, rows)
        .fetch_exactly(conn, expected, "tiers with the units for exchanges")
        .await?;
        for row in &moved {
            let (event_id, tier_id): (String, String) = (row.get(0)?, row.get(1)?);
            map.tier(&event_id, &tier_id, row.get(2)?);
        }
    }

    // The exchanges.
    let rows = Rows::new()
        .texts("x", plans.iter().map(|p| p.start.exchange_id.as_str()))
        .texts("a", plans.iter().map(|p| p.write.account_id.as_str()))
        .texts("o", plans.iter().map(|p| p.start.order_id.as_str()))
        .texts(
            "f",
            plans.iter().map(|p| p.start.from_event.event_id.as_str()),
        )
        .texts("t", plans.iter().map(|p| p.to_event()))
        .texts(
            "j",
            plans.iter().map(|p| {
                serde_json::to_string(&p.gone().ticket_ids).unwrap_or_else(|_| "[]".into())
            }),
        )
        .ints("fv", plans.iter().map(|p| p.gone().value_minor))
        .texts("h", plans.iter().map(|p| p.start.new_hold_id.as_str()))
        .opt_texts(
            "n",
            plans
                .iter()
                .map(|p| (!p.pays()).then(|| p.start.new_order_id.clone())),
        )
        .ints("tv", plans.iter().map(|p| p.to_value_minor()))
        .ints("due", plans.iter().map(|p| p.write.amount_due_minor()))
        .texts(
            "c",
            plans.iter().map(|p| p.start.to_event.currency.as_str()),
        )
        .texts(
            "s",
            plans.iter().map(|p| {
                if p.pays() {
                    ExchangeStatus::PaymentRequired.as_str()
                } else {
                    ExchangeStatus::Completed.as_str()
                }
            }),
        )
        .texts("k", plans.iter().map(|p| p.start.scope.key.as_str()))
        .texts("l", plans.iter().map(|p| p.leg()));
    query(format!(
        "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                               from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                               currency, status, idempotency_key, created_at, updated_at, leg)
         SELECT u.x, u.a, u.o, u.f, u.t, {tickets}, u.fv, u.h, u.n, u.tv, u.due, u.c, u.s, u.k, $1, $1, u.l
           FROM {u}",
        tickets = d.json("u.j"),
        u = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;

    // Old tickets: voided (swapped now) or marked (until paid), where they are here, each
    // only if still valid and unmarked.
    let old_tickets: Vec<(&str, &str, &str)> = plans
        .iter()
        .filter(|p| p.old_side_here())
        .flat_map(|p| {
            let status = if p.pays() { "VALID" } else { "VOIDED" };
            p.gone()
                .ticket_ids
                .iter()
                .map(move |t| (t.as_str(), status, p.start.exchange_id.as_str()))
        })
        .collect();
    if !old_tickets.is_empty() {
        let expected = old_tickets.len();
        let rows = Rows::new()
            .texts("id", old_tickets.iter().map(|t| t.0))
            .texts("s", old_tickets.iter().map(|t| t.1))
            .texts("x", old_tickets.iter().map(|t| t.2));
        query(format!(
            "UPDATE ticket AS t SET status = u.s, exchange_id = u.x
               FROM {u}
              WHERE t.ticket_id = u.id AND t.status = 'VALID' AND t.exchange_id IS NULL",
            u = rows.table(d, 1, "u"),
        ))
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "tickets still valid")
        .await?;
    }

    // Swapped now: old holds count what left, new orders, their payments and tickets.
    if swapped.is_empty() {
        return Ok(());
    }
    let mut left: BTreeMap<&str, i64> = BTreeMap::new();
    for plan in swapped.iter().filter(|p| p.old_side_here()) {
        *left.entry(plan.write.old_hold_id.as_str()).or_default() +=
            i64::from(plan.gone().quantity());
    }
    if !left.is_empty() {
        let expected = left.len();
        let rows = Rows::new()
            .texts("id", left.keys().copied())
            .ints("n", left.values().copied());
        query(format!(
            "UPDATE hold AS h SET exchanged_out = h.exchanged_out + u.n
               FROM {u}
              WHERE h.hold_id = u.id AND h.status = 'CONFIRMED' AND h.quantity - h.exchanged_out >= u.n",
            u = rows.table(d, 1, "u"),
        ))
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "old holds still confirmed with the units")
        .await?;
    }
    let rows = Rows::new()
        .texts("e", swapped.iter().map(|p| p.to_event()))
        .texts("o", swapped.iter().map(|p| p.start.new_order_id.as_str()))
        .texts("h", swapped.iter().map(|p| p.start.new_hold_id.as_str()))
        .texts("a", swapped.iter().map(|p| p.write.account_id.as_str()))
        .texts("j", swapped.iter().map(|p| held_seats_json(&p.seats)))
        .opt_texts("t", swapped.iter().map(|p| p.tier_id.clone()))
        .int4s("q", swapped.iter().map(|p| p.quantity as i32))
        .ints("tot", swapped.iter().map(|p| p.to_value_minor()))
        .texts(
            "c",
            swapped.iter().map(|p| p.start.to_event.currency.as_str()),
        );
    query(format!(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                             currency, created_at, updated_at)
         SELECT u.e, u.o, u.h, u.a, 'CONFIRMED', {seats}, u.t, u.q, u.tot, u.c, $1, $1 FROM {u}",
        seats = d.json("u.j"),
        u = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    // Nothing to pay: each new order's payment is settled by the old one's.
    let rows = Rows::new()
        .texts("e", swapped.iter().map(|p| p.to_event()))
        .texts("op", swapped.iter().map(|p| p.start.operation_id.as_str()))
        .texts("o", swapped.iter().map(|p| p.start.new_order_id.as_str()))
        .texts(
            "m",
            swapped
                .iter()
                .map(|p| format!("exchange:{}", p.start.exchange_id)),
        )
        .texts(
            "c",
            swapped.iter().map(|p| p.start.to_event.currency.as_str()),
        );
    query(format!(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                        amount_minor, currency, next_attempt_at, created_at, updated_at)
         SELECT u.e, u.op, u.o, 'exchange', u.m, 'CAPTURED', 0, u.c, $1, $1, $1 FROM {u}",
        u = rows.table(d, 2, "u"),
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    // The new orders' tickets, signed by the caller, issued with the swap.
    let tickets: Vec<(&str, &boxoffice_store::exchange::SignedTicket)> = swapped
        .iter()
        .flat_map(|p| {
            let account = p.write.account_id.as_str();
            p.start.new_tickets.iter().map(move |t| (account, t))
        })
        .collect();
    if !tickets.is_empty() {
        let rows = Rows::new()
            .texts("e", tickets.iter().map(|(_, t)| t.draft.event_id.as_str()))
            .texts("t", tickets.iter().map(|(_, t)| t.draft.ticket_id.as_str()))
            .texts("o", tickets.iter().map(|(_, t)| t.draft.order_id.as_str()))
            .texts("a", tickets.iter().map(|(a, _)| *a))
            .opt_texts("s", tickets.iter().map(|(_, t)| t.draft.seat_id.clone()))
            .opt_texts("r", tickets.iter().map(|(_, t)| t.draft.tier_id.clone()))
            .int4s("n", tickets.iter().map(|(_, t)| t.draft.unit as i32))
            .texts("c", tickets.iter().map(|(_, t)| t.code.as_str()));
        query(format!(
            "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code,
                                 status, issued_at)
             SELECT u.e, u.t, u.o, u.a, u.s, u.r, u.n, u.c, 'VALID', $1 FROM {u}",
            u = rows.table(d, 2, "u"),
        ))
        .bind(now)
        .bind_rows(d, rows)
        .execute(conn)
        .await?;
    }
    let mut messages = Vec::with_capacity(swapped.len());
    for plan in &swapped {
        let from_event = plan.start.from_event.event_id.as_str();
        messages.push((
            from_event,
            EXCHANGE_COMPLETED,
            serde_json::json!({"exchangeId": plan.start.exchange_id,
                               "orderId": plan.start.order_id,
                               "newOrderId": plan.start.new_order_id}),
        ));
        if plan.write.amount_due_minor() < 0 {
            messages.push((
                from_event,
                REFUND_DUE,
                serde_json::json!({"exchangeId": plan.start.exchange_id,
                                   "orderId": plan.start.order_id,
                                   "amountMinor": -plan.write.amount_due_minor(),
                                   "currency": plan.start.to_event.currency}),
            ));
        }
    }
    outbox::insert_many(conn, &messages, now).await
}
