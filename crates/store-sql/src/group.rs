//! A decided group, persisted (see `boxoffice_store::engine`): one write transaction of
//! conditional, counted, set-based statements, in one order for both dialects.
//!
//! The order is the store's lock order and the engine's: the lease and the clock first, then
//! (on PostgreSQL) the seats by seat id and the tiers by tier id locked, then what the group
//! frees (released seats, expired and released holds with their units, payment verdicts,
//! compensations, refunds), then what it takes (exchanges, transfers, a cancellation, new holds, the waiting list,
//! seats, units, checkouts), the requests' answers, and last the map version, the writer
//! sequence and the purchase limit. What the group frees is written before what it takes: the
//! engine may give a seat or unit that one command frees to a later command of the same
//! group. Every statement carries its condition and its row count is compared with what the
//! engine decided; a difference refuses the whole group.
//!
//! Architecture invariant: the write order of a group exists here only.

use std::collections::BTreeMap;
use std::time::Instant;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_store::engine::{GroupCommitted, GroupWrite, mismatch, predecessor_failed};
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{
    StoreError, StoreResult, held_seats_json, hold_created_payload, hold_ended_payload,
};

use crate::db::{Conn, Db, Dialect, Rows, query};
use crate::{cancellation, exchange, idempotency, outbox, refund, seatmap, transfer, waitlist};

/// Persists `group` in one transaction (see the module's documentation for the order).
pub async fn apply(db: &Db, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
    if !group.turn.before_locks().await {
        return Err(predecessor_failed());
    }
    let mut tx = db.write().await?;
    let clock_sent = Instant::now();
    let store_now = open(&mut tx.conn(), group).await?;
    let clock_answered = Instant::now();
    if group.now > store_now {
        return Err(StoreError::Conflict(format!(
            "group refused: its clock {} is ahead of the store's {store_now}",
            group.now
        )));
    }
    let mut map = MapChanges::default();
    map.by_event
        .insert(group.event.event_id.clone(), group.map_seats());
    lock_rows(&mut tx.conn(), group).await?;
    free_released_seats(&mut tx.conn(), group).await?;
    let expired = expire_holds(&mut tx.conn(), group, &mut map).await?;
    release_holds(&mut tx.conn(), group, &mut map).await?;
    settle_checkouts(&mut tx.conn(), group, &mut map).await?;
    let compensations_refused = compensate_orders(&mut tx.conn(), group, &mut map).await?;
    group.unmap_refused(&mut map, &compensations_refused);
    let refunds_refused = refund::write(&mut tx.conn(), group, &mut map).await?;
    group.unmap_refused(&mut map, &refunds_refused);
    let exchanges_refused = exchange::write(&mut tx.conn(), group, &mut map).await?;
    group.unmap_refused(&mut map, &exchanges_refused);
    let transfers_refused = transfer::write(&mut tx.conn(), group).await?;
    cancellation::write(&mut tx.conn(), group).await?;
    insert_holds(&mut tx.conn(), group).await?;
    waitlist::write(&mut tx.conn(), group).await?;
    crate::phase::write(&mut tx.conn(), group).await?;
    // Each new hold's tickets priced (types, fees, tax: issue 40), the offers' too.
    crate::pricing::insert_lines(&mut tx.conn(), group.event, group.effects).await?;
    take_seats(&mut tx.conn(), group).await?;
    take_tier_units(&mut tx.conn(), group, &mut map).await?;
    start_checkouts(&mut tx.conn(), group).await?;
    idempotency::insert(
        &mut tx.conn(),
        &group.event.event_id,
        group.endpoint,
        &group.records,
        group.now,
    )
    .await?;
    group.turn.locks_taken();
    if !group.turn.before_record().await {
        return Err(predecessor_failed());
    }
    // The other events an exchange out of them freed seats or units of get their own change
    // rows (their writers catch up from them), every version row locked in event-id order.
    let event_id = group.event.event_id.as_str();
    seatmap::record(&mut tx.conn(), &map.elsewhere(event_id, true), group.now).await?;
    let (previous_version, version) = record_group(&mut tx.conn(), group, &map).await?;
    seatmap::record(&mut tx.conn(), &map.elsewhere(event_id, false), group.now).await?;
    tx.commit().await?;
    Ok(GroupCommitted {
        previous_version,
        version,
        store_now,
        clock_answered,
        clock_round_trip: clock_answered - clock_sent,
        expiries_skipped: (group.effects.holds_expired().count() as u64).saturating_sub(expired),
        compensations_refused,
        exchanges_refused,
        transfers_refused,
        refunds_refused,
    })
}

/// The store's clock and the writer's proof of its lease, in one round trip: a group of a
/// node whose lease was taken over writes nothing. On PostgreSQL the lease row is read
/// `FOR KEY SHARE`: the owner's pipelined groups share that lock, and so does its renewal (an
/// update of the expiry alone takes the weaker NO KEY UPDATE lock, so it never waits for the
/// groups); a takeover locks the row `FOR UPDATE`, so it waits for the groups in flight, and
/// every group after it finds another epoch. On SQLite the write transaction already holds
/// the file.
///
/// PostgreSQL's planner settings ride along: every statement of a group finds its rows by
/// key. During an on-sale the hold, order and payment tables grow from nothing to tens of
/// thousands of rows between two autovacuum analyses, and a planner that still takes them
/// for empty scans every live hold of the event once per statement; key lookups are right at
/// any size. Generic plans too: the group's statements take arrays, and a custom plan for
/// every execution cost the database a tenth of its CPU in planning.
async fn open(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<OffsetDateTime> {
    let d = conn.dialect();
    let settings = match d {
        Dialect::Postgres => {
            " FROM (SELECT set_config('enable_seqscan', 'off', true),
                           set_config('enable_bitmapscan', 'off', true),
                           set_config('plan_cache_mode', 'force_generic_plan', true)) AS settings"
        }
        Dialect::Sqlite => "",
    };
    let row = query(format!(
        "SELECT {now} AS now,
                (SELECT epoch FROM event_lease
                  WHERE event_id = $1 AND node_id = $2 AND $2 IS NOT NULL
                    AND server_generation = {generation} {lock}) AS epoch{settings}",
        now = d.now_ms(),
        generation = d.server_generation(),
        lock = d.lock("FOR KEY SHARE"),
    ))
    .bind(&group.event.event_id)
    .bind(group.fence.as_ref().map(|fence| fence.node_id.as_str()))
    .fetch_one(conn)
    .await?;
    if let Some(fence) = &group.fence {
        let epoch: Option<i64> = row.get("epoch")?;
        if epoch.and_then(|epoch| u64::try_from(epoch).ok()) != Some(fence.epoch) {
            return Err(boxoffice_store::lease::fenced(&group.event.event_id, fence));
        }
    }
    row.get("now")
}

/// Locks every seat the group writes in seat order, then every tier in tier order, like every
/// other writer (PostgreSQL; SQLite's write transaction holds the whole file).
async fn lock_rows(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    if !conn.dialect().locks_rows() {
        return Ok(());
    }
    let seat_ids = group.seats_touched();
    if !seat_ids.is_empty() {
        query(
            "SELECT 1 FROM seat WHERE event_id = $1 AND seat_id = ANY($2) ORDER BY seat_id FOR UPDATE",
        )
        .bind(&group.event.event_id)
        .bind(seat_ids)
        .execute(conn)
        .await?;
    }
    let tiers = group.tiers_touched();
    if !tiers.is_empty() {
        query(
            "SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = ANY($2) ORDER BY tier_id FOR UPDATE",
        )
        .bind(&group.event.event_id)
        .bind(tiers)
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// The seats of holds the group releases: exactly those the engine counted, each still
/// `HELD` by its hold.
async fn free_released_seats(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    if group.seats_freed() == 0 {
        return Ok(());
    }
    let d = conn.dialect();
    let released: Vec<_> = group.effects.holds_released().collect();
    let hold_ids: Vec<&str> = released.iter().map(|h| h.hold_id.as_str()).collect();
    let seat_ids: Vec<&str> = released
        .iter()
        .flat_map(|h| h.seat_ids.iter().map(String::as_str))
        .collect();
    query(format!(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE event_id = $1 AND seat_id {} AND hold_id {} AND status = 'HELD'",
        d.in_list("$3"),
        d.in_list("$2"),
    ))
    .bind(&group.event.event_id)
    .bind(hold_ids)
    .bind(seat_ids)
    .execute_exactly(conn, group.seats_freed(), "seats of released holds")
    .await?;
    Ok(())
}

/// Holds the engine found past their deadline: each still `HELD` and past it by the group's
/// clock is ended (one the sweeper ended first is skipped); the seats that still point to the
/// ended ones are freed and the units of the ended ones, as stored, returned, exactly once;
/// the exchanges waiting on them end. Returns how many ended.
async fn expire_holds(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let due: Vec<_> = group.effects.holds_expired().collect();
    if due.is_empty() {
        return Ok(0);
    }
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let ids: Vec<&str> = due.iter().map(|h| h.hold_id.as_str()).collect();
    if d == Dialect::Postgres {
        return expire_holds_in_one(conn, group, ids, map).await;
    }
    let rows = query(format!(
        "UPDATE hold SET status = 'EXPIRED', updated_at = $3
          WHERE event_id = $1 AND hold_id {} AND status = 'HELD' AND expires_at <= $3
         RETURNING hold_id, account_id, tier_id, quantity",
        d.in_list("$2"),
    ))
    .bind(event_id)
    .bind(ids)
    .bind(group.now)
    .fetch_all(conn)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut ended: Vec<String> = Vec::with_capacity(rows.len());
    let mut messages: Vec<(&str, &str, String)> = Vec::with_capacity(rows.len());
    let mut units: BTreeMap<String, i64> = BTreeMap::new();
    for row in &rows {
        let hold_id: String = row.get("hold_id")?;
        let account_id: String = row.get("account_id")?;
        messages.push((
            event_id,
            "hold.expired",
            hold_ended_payload(event_id, &hold_id, &account_id, HoldStatus::Expired),
        ));
        if let Some(tier_id) = row.get::<Option<String>, _>("tier_id")? {
            *units.entry(tier_id).or_default() += i64::from(row.get::<i32, _>("quantity")?);
        }
        ended.push(hold_id);
    }
    outbox::insert_encoded(conn, &messages, group.now).await?;
    // By the partial index on `seat.hold_id` alone (hold ids are unique across events): with
    // `event_id = $1` too, SQLite's planner (and PostgreSQL's, in the sweeper) walked the
    // event's primary key, every seat of the event for every group that expired a hold.
    let freed = query(format!(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE hold_id {} AND status = 'HELD'
         RETURNING seat_id",
        d.in_list("$1"),
    ))
    .bind(ended.clone())
    .fetch_all(conn)
    .await?;
    for row in &freed {
        let seat_id: String = row.get(0)?;
        map.seat_unless_named(event_id, &seat_id, SeatStatus::Available, None);
    }
    move_units(conn, event_id, units, Units::Held, Units::Available, map).await?;
    let ended: Vec<&str> = ended.iter().map(String::as_str).collect();
    exchange::end_exchanges_of(conn, &ended, ExchangeStatus::Expired, group.now).await?;
    Ok(rows.len() as u64)
}

/// [`expire_holds`] on PostgreSQL, in one statement: the holds, their seats, their units,
/// their announcements and the exchanges waiting on them (as `exchange::end_exchanges_of`
/// ends them). Every group of a sale with short holds expires some, and the five statements
/// of the steps cost the holds case an eighth of its rate (measured with `speed.sh`).
async fn expire_holds_in_one(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    ids: Vec<&str>,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let event_id = group.event.event_id.as_str();
    let rows = query(
        "WITH ended AS (
            UPDATE hold SET status = 'EXPIRED', updated_at = $3
             WHERE event_id = $1 AND hold_id = ANY($2) AND status = 'HELD' AND expires_at <= $3
            RETURNING hold_id, account_id, tier_id, quantity
         ), announced AS (
            INSERT INTO outbox (event_id, topic, payload, created_at)
            SELECT $1, 'hold.expired',
                   jsonb_build_object('eventId', $1::text, 'holdId', hold_id,
                                      'accountId', account_id, 'status', 'EXPIRED'), $3
              FROM ended
         ), freed AS (
            UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
             WHERE hold_id IN (SELECT hold_id FROM ended) AND status = 'HELD'
            RETURNING seat_id
         ), units AS (
            UPDATE tier t SET available = t.available + d.n, held = t.held - d.n
              FROM (SELECT tier_id, sum(quantity)::bigint AS n FROM ended
                     WHERE tier_id IS NOT NULL GROUP BY tier_id) d
             WHERE t.event_id = $1 AND t.tier_id = d.tier_id
            RETURNING t.tier_id, t.available
         ), exchanges_ended AS (
            UPDATE exchange SET status = 'EXPIRED', updated_at = $3
             WHERE new_hold_id IN (SELECT hold_id FROM ended) AND status = 'PAYMENT_REQUIRED'
            RETURNING exchange_id, from_event_id, order_id
         ), unmarked AS (
            UPDATE ticket SET exchange_id = NULL
             WHERE exchange_id IN (SELECT exchange_id FROM exchanges_ended) AND status = 'VALID'
         ), exchanges_announced AS (
            INSERT INTO outbox (event_id, topic, payload, created_at)
            SELECT from_event_id, 'exchange.ended',
                   jsonb_build_object('exchangeId', exchange_id, 'orderId', order_id, 'status', 'EXPIRED'), $3
              FROM exchanges_ended
         )
         SELECT 'hold', hold_id, NULL::bigint FROM ended
         UNION ALL SELECT 'seat', seat_id, NULL FROM freed
         UNION ALL SELECT 'tier', tier_id, available FROM units",
    )
    .bind(event_id)
    .bind(ids)
    .bind(group.now)
    .fetch_all(conn)
    .await?;
    let mut ended = 0;
    for row in &rows {
        let (kind, id): (String, String) = (row.get(0)?, row.get(1)?);
        match kind.as_str() {
            "hold" => ended += 1,
            "seat" => map.seat_unless_named(event_id, &id, SeatStatus::Available, None),
            _ => map.tier(event_id, &id, row.get::<Option<i64>, _>(2)?.unwrap_or(0)),
        }
    }
    Ok(ended)
}

/// Holds released by the group: each must still be `HELD` and live by the group's clock;
/// their units go back, their exchanges (a new hold of an exchange) fail.
async fn release_holds(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let released: Vec<_> = group.effects.holds_released().collect();
    if released.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let hold_ids: Vec<&str> = released.iter().map(|h| h.hold_id.as_str()).collect();
    query(format!(
        "UPDATE hold SET status = 'RELEASED', updated_at = $3
          WHERE event_id = $1 AND hold_id {} AND status = 'HELD' AND expires_at > $3",
        d.in_list("$2"),
    ))
    .bind(event_id)
    .bind(hold_ids.clone())
    .bind(group.now)
    .execute_exactly(conn, released.len(), "live holds released")
    .await?;
    let messages: Vec<(&str, &str, String)> = released
        .iter()
        .map(|h| {
            let payload =
                hold_ended_payload(event_id, &h.hold_id, &h.account_id, HoldStatus::Released);
            (event_id, "hold.released", payload)
        })
        .collect();
    outbox::insert_encoded(conn, &messages, group.now).await?;
    let returned = group
        .tier_units_returned()
        .into_iter()
        .map(|(tier_id, n)| (tier_id, i64::from(n)))
        .collect();
    move_units(conn, event_id, returned, Units::Held, Units::Available, map).await?;
    exchange::end_exchanges_of(conn, &hold_ids, ExchangeStatus::Failed, group.now).await
}

/// A count of a tier: units `Available` to take, `Held` by live holds, or `Sold`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Units {
    Available,
    Held,
    Sold,
}

impl Units {
    fn column(self) -> &'static str {
        match self {
            Self::Available => "available",
            Self::Held => "held",
            Self::Sold => "sold",
        }
    }
}

/// Units moved between two counts of their tiers in one statement, per tier only where
/// `from` has that many, counted; the map gets each tier's available count.
pub(crate) async fn move_units(
    conn: &mut Conn<'_>,
    event_id: &str,
    per_tier: BTreeMap<String, i64>,
    from: Units,
    to: Units,
    map: &mut MapChanges,
) -> StoreResult<()> {
    if per_tier.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let (from_column, to_column) = (from.column(), to.column());
    let expected = per_tier.len();
    // (SQLite's `RETURNING` names the updated table's columns unqualified; the rows' own
    // columns are named apart, so that PostgreSQL finds the names unambiguous too.)
    let rows = Rows::new()
        .texts("tier", per_tier.keys().map(String::as_str))
        .ints("n", per_tier.values().copied());
    let moved = query(format!(
        "UPDATE tier AS t SET {to_column} = t.{to_column} + u.n, {from_column} = t.{from_column} - u.n
           FROM {u}
          WHERE t.event_id = $1 AND t.tier_id = u.tier AND t.{from_column} >= u.n
         RETURNING tier_id, available",
        u = rows.table(d, 2, "u"),
    ))
    .bind(event_id)
    .bind_rows(d, rows)
    .fetch_exactly(conn, expected, &format!("tiers with the {from:?} units to move to {to:?}"))
    .await?;
    for row in &moved {
        let tier_id: String = row.get(0)?;
        map.tier(event_id, &tier_id, row.get(1)?);
    }
    Ok(())
}

/// Payment verdicts the group applies. Sold: each seat must still be `HELD` by its hold and
/// live, each hold still `PAYMENT_PENDING` and live; units move from held to sold. Cancelled:
/// each hold must still be `PAYMENT_PENDING`; exactly the seats the engine counted are freed
/// and the units returned. Then every operation moves only from the status its caller read,
/// every order only from `PENDING_PAYMENT`, the outbox gets its messages and the checkout
/// requests their settled answers.
async fn settle_checkouts(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let settled = group.settlements()?;
    if settled.is_empty() {
        return Ok(());
    }
    let confirmed = group.sales()?;
    let cancelled: Vec<_> = group
        .effects
        .checkouts_cancelled()
        .map(|cancelled| &cancelled.hold)
        .collect();
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    // Sold seats and holds.
    let mut sold_seats: Vec<(&str, &str, &str)> = Vec::new();
    let mut units: BTreeMap<&str, i64> = BTreeMap::new();
    for (hold, settlement) in &confirmed {
        let order_id = settlement.order_id.as_str();
        for seat_id in &hold.seat_ids {
            sold_seats.push((seat_id, &hold.hold_id, order_id));
        }
        if let Some((tier_id, n)) = &hold.tier {
            *units.entry(tier_id).or_default() += i64::from(*n);
        }
    }
    if !sold_seats.is_empty() {
        let expected = sold_seats.len();
        let rows = Rows::new()
            .texts("seat_id", sold_seats.iter().map(|s| s.0))
            .texts("hold_id", sold_seats.iter().map(|s| s.1))
            .texts("order_id", sold_seats.iter().map(|s| s.2));
        let sold = query(format!(
            "UPDATE seat AS s SET status = 'SOLD', order_id = u.order_id, hold_expires_at = NULL,
                                  version = s.version + 1
               FROM {u}
              WHERE s.event_id = $1 AND s.seat_id = u.seat_id AND s.status = 'HELD'
                AND s.hold_id = u.hold_id AND s.hold_expires_at > $2",
            u = rows.table(d, 3, "u"),
        ))
        .bind(event_id)
        .bind(group.now)
        .bind_rows(d, rows)
        .execute(conn)
        .await?;
        if sold != expected as u64 {
            let unsold = unsold_seats(conn, event_id, &sold_seats, group.now).await;
            return Err(StoreError::Conflict(format!(
                "{}; first seats not sold: {unsold}",
                mismatch("seats sold", expected, sold)
            )));
        }
    }
    if !units.is_empty() {
        let expected = units.len();
        let rows = Rows::new()
            .texts("tier_id", units.keys().copied())
            .ints("n", units.values().copied());
        query(format!(
            "UPDATE tier AS t SET held = t.held - u.n, sold = t.sold + u.n
               FROM {u}
              WHERE t.event_id = $1 AND t.tier_id = u.tier_id AND t.held >= u.n",
            u = rows.table(d, 2, "u"),
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "tiers with the units sold")
        .await?;
    }
    if !confirmed.is_empty() {
        let hold_ids: Vec<&str> = confirmed.iter().map(|(h, _)| h.hold_id.as_str()).collect();
        query(format!(
            "UPDATE hold SET status = 'CONFIRMED', updated_at = $3
              WHERE event_id = $1 AND hold_id {} AND status = 'PAYMENT_PENDING' AND expires_at > $3",
            d.in_list("$2"),
        ))
        .bind(event_id)
        .bind(hold_ids)
        .bind(group.now)
        .execute_exactly(conn, confirmed.len(), "holds in checkout sold")
        .await?;
    }
    // Cancelled holds: their seats and units back on sale.
    if !cancelled.is_empty() {
        let hold_ids: Vec<&str> = cancelled.iter().map(|h| h.hold_id.as_str()).collect();
        query(format!(
            "UPDATE hold SET status = 'RELEASED', updated_at = $3
              WHERE event_id = $1 AND hold_id {} AND status = 'PAYMENT_PENDING'",
            d.in_list("$2"),
        ))
        .bind(event_id)
        .bind(hold_ids.clone())
        .bind(group.now)
        .execute_exactly(conn, cancelled.len(), "holds in checkout ended")
        .await?;
        let seat_ids: Vec<&str> = cancelled
            .iter()
            .flat_map(|h| h.seat_ids.iter().map(String::as_str))
            .collect();
        if !seat_ids.is_empty() {
            let expected = seat_ids.len();
            query(format!(
                "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
                  WHERE event_id = $1 AND seat_id {} AND hold_id {} AND status = 'HELD'",
                d.in_list("$3"),
                d.in_list("$2"),
            ))
            .bind(event_id)
            .bind(hold_ids)
            .bind(seat_ids)
            .execute_exactly(conn, expected, "seats of cancelled holds")
            .await?;
        }
        let mut returned: BTreeMap<String, i64> = BTreeMap::new();
        for (tier_id, n) in cancelled.iter().filter_map(|hold| hold.tier.as_ref()) {
            *returned.entry(tier_id.clone()).or_default() += i64::from(*n);
        }
        move_units(conn, event_id, returned, Units::Held, Units::Available, map).await?;
    }
    // Operations, orders, messages, answers.
    let expected = settled.len();
    let rows = Rows::new()
        .texts(
            "operation_id",
            settled.iter().map(|s| s.operation_id.as_str()),
        )
        .texts("to_status", settled.iter().map(|s| s.to_status.as_str()))
        .opt_texts(
            "provider_ref",
            settled.iter().map(|s| s.provider_ref.clone()),
        )
        .opt_texts("last_error", settled.iter().map(|s| s.last_error.clone()))
        .floats("recheck_s", settled.iter().map(|s| s.recheck_after_s));
    query(format!(
        "UPDATE payment_operation AS p
            SET status = u.to_status, provider_ref = coalesce(p.provider_ref, u.provider_ref),
                next_action_url = NULL, last_error = u.last_error, updated_at = $1,
                next_attempt_at = {next}
           FROM {u}
          WHERE p.operation_id = u.operation_id
            AND p.status IN ('AUTHORIZING', 'UNKNOWN', 'REQUIRES_ACTION')",
        next = d.plus_secs("$1", "u.recheck_s"),
        u = rows.table(d, 2, "u"),
    ))
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, expected, "payment operations not settled yet")
    .await?;
    let rows = Rows::new()
        .texts("order_id", settled.iter().map(|s| s.order_id.as_str()))
        .texts("status", settled.iter().map(|s| s.order_status.as_str()))
        .opt_texts("reason", settled.iter().map(|s| s.cancel_reason.clone()));
    query(format!(
        "UPDATE orders AS o SET status = u.status, cancel_reason = u.reason, updated_at = $1
           FROM {u}
          WHERE o.order_id = u.order_id AND o.status = 'PENDING_PAYMENT'",
        u = rows.table(d, 2, "u"),
    ))
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, expected, "orders pending payment")
    .await?;
    let mut messages: Vec<(&str, &str, String)> = Vec::new();
    for hold in &cancelled {
        let payload = hold_ended_payload(
            event_id,
            &hold.hold_id,
            &hold.account_id,
            HoldStatus::Released,
        );
        messages.push((event_id, "hold.released", payload));
    }
    for settlement in &settled {
        for (topic, payload) in &settlement.messages {
            messages.push((event_id, *topic, payload.to_string()));
        }
    }
    outbox::insert_encoded(conn, &messages, group.now).await?;
    let answered: Vec<_> = settled.iter().filter_map(|s| s.record.as_ref()).collect();
    if !answered.is_empty() {
        let rows = Rows::new()
            .texts("a", answered.iter().map(|(s, _)| s.account_id.as_str()))
            .texts("e", answered.iter().map(|(s, _)| s.endpoint.as_str()))
            .texts("k", answered.iter().map(|(s, _)| s.key.as_str()))
            .int4s("s", answered.iter().map(|(_, r)| i32::from(r.status)))
            .bytes("b", answered.iter().map(|(_, r)| r.body.clone()));
        query(format!(
            "UPDATE idempotency AS i SET status_code = u.s, response_body = {body}
               FROM {u}
              WHERE i.account_id = u.a AND i.endpoint = u.e AND i.idem_key = u.k",
            body = d.bytes("u.b"),
            u = rows.table(d, 1, "u"),
        ))
        .bind_rows(d, rows)
        .execute(conn)
        .await?;
    }
    Ok(())
}

/// For a refused settlement's message: the first seats `(seat, hold, order)` the engine took
/// for its holds but the store does not, with what the store has (a refusal aborts the
/// group, so this read is only on that path).
async fn unsold_seats(
    conn: &mut Conn<'_>,
    event_id: &str,
    seats: &[(&str, &str, &str)],
    now: OffsetDateTime,
) -> String {
    let d = conn.dialect();
    let rows = Rows::new()
        .texts("seat_id", seats.iter().map(|s| s.0))
        .texts("hold_id", seats.iter().map(|s| s.1));
    let found = query(format!(
        "SELECT u.seat_id, u.hold_id, s.status, s.hold_id, s.hold_expires_at, h.status, h.expires_at
           FROM {u}
           JOIN seat s ON s.event_id = $1 AND s.seat_id = u.seat_id
           LEFT JOIN hold h ON h.hold_id = u.hold_id
          WHERE NOT (s.status = 'HELD' AND s.hold_id = u.hold_id AND s.hold_expires_at > $2)
          LIMIT 3",
        u = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(now)
    .bind_rows(d, rows)
    .fetch_all(conn)
    .await;
    let describe = |row: &crate::db::Row| -> StoreResult<String> {
        let (seat, hold, status): (String, String, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?);
        let holder: Option<String> = row.get(3)?;
        let until: Option<OffsetDateTime> = row.get(4)?;
        let hold_status: Option<String> = row.get(5)?;
        let hold_until: Option<OffsetDateTime> = row.get(6)?;
        Ok(format!(
            "{seat} of {hold} is {status} by {holder:?} until {until:?} \
             (the hold {hold_status:?} until {hold_until:?}, now {now})"
        ))
    };
    match found.and_then(|rows| rows.iter().map(describe).collect::<StoreResult<Vec<_>>>()) {
        Ok(found) => found.join("; "),
        Err(error) => format!("(not read: {error})"),
    }
}

/// Confirmed orders the group gives back (captures refused for good). On PostgreSQL each
/// order is locked before its tickets are counted: ticket issuance share-locks the confirmed
/// order it issues for, so tickets issued while this waits are committed (and counted) by
/// then and none after; the tickets are locked too, so a check-in that commits first is
/// counted and one that comes later finds its ticket voided (on SQLite the group holds the
/// only write lock, so nothing comes between the count and the void). An order with a
/// checked-in ticket, or whose operation moved since it was read, is left alone (its command
/// index is returned); the rest are cancelled, their operations still in the status read,
/// their holds `CONFIRMED`, exactly the engine's seats still `SOLD` by them; units back,
/// tickets voided, waiting exchanges failed, messages queued.
async fn compensate_orders(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<Vec<usize>> {
    let given = group.compensations()?;
    if given.is_empty() {
        return Ok(Vec::new());
    }
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let order_ids: Vec<&str> = given.iter().map(|(c, _)| c.order_id.as_str()).collect();
    if d.locks_rows() {
        query("SELECT 1 FROM orders WHERE order_id = ANY($1) ORDER BY order_id FOR UPDATE")
            .bind(order_ids.clone())
            .execute(conn)
            .await?;
    }
    // Every ticket of the orders is locked and then judged: a filter on the status outside
    // the locking subquery would be pushed below its lock (PostgreSQL's planner does), and a
    // ticket checked in concurrently would then be neither locked nor counted. A ticket
    // checked in, or one an exchange has (waiting for its difference) or replaced, refuses
    // the compensation: the sale was used, or its seats moved to the exchange's new order,
    // on this shard or another, which a compensation here would leave paid by nothing. (An
    // exchange needs the old payment captured, and only a capture refused for good is
    // compensated, so this stays a guard: neither meets the other.)
    let used: Vec<String> = query(format!(
        "SELECT order_id
           FROM (SELECT order_id, status, exchange_id FROM ticket
                  WHERE order_id {} ORDER BY ticket_id {}) AS locked
          GROUP BY order_id
         HAVING sum(CASE WHEN status = 'CHECKED_IN' OR exchange_id IS NOT NULL THEN 1 ELSE 0 END) > 0",
        d.in_list("$1"),
        d.lock("FOR UPDATE"),
    ))
    .bind(order_ids)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<_>>()?;
    // The operations are locked (all of them: a filter beside the lock would skip one being
    // moved) and compared with the status each compensation chose its undo from. One that
    // moved since (a webhook's capture) refuses its compensation alone; the relay's next
    // delivery reads it again.
    let operation_ids: Vec<&str> = given.iter().map(|(_, w)| w.operation_id.as_str()).collect();
    let current: BTreeMap<String, String> = query(format!(
        "SELECT operation_id, status FROM payment_operation
          WHERE operation_id {} ORDER BY operation_id {}",
        d.in_list("$1"),
        d.lock("FOR UPDATE"),
    ))
    .bind(operation_ids)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| Ok((row.get(0)?, row.get(1)?)))
    .collect::<StoreResult<_>>()?;
    let refused: Vec<usize> = given
        .iter()
        .filter(|(c, w)| {
            used.contains(&c.order_id)
                || current.get(&w.operation_id).map(String::as_str)
                    != Some(w.operation_status.as_str())
        })
        .map(|(c, _)| c.index)
        .collect();
    let accepted: Vec<_> = given
        .iter()
        .filter(|(c, _)| !refused.contains(&c.index))
        .collect();
    if accepted.is_empty() {
        return Ok(refused);
    }
    let expected = accepted.len();
    let orders: Vec<&str> = accepted.iter().map(|(c, _)| c.order_id.as_str()).collect();
    let rows = Rows::new()
        .texts("order_id", orders.iter().copied())
        .texts("reason", accepted.iter().map(|(_, w)| w.reason.as_str()));
    query(format!(
        "UPDATE orders AS o SET status = 'CANCELLED', cancel_reason = u.reason, updated_at = $1
           FROM {u}
          WHERE o.order_id = u.order_id AND o.status = 'CONFIRMED'",
        u = rows.table(d, 2, "u"),
    ))
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, expected, "confirmed orders given back")
    .await?;
    let rows = Rows::new()
        .texts(
            "operation_id",
            accepted.iter().map(|(_, w)| w.operation_id.as_str()),
        )
        .texts(
            "status",
            accepted.iter().map(|(_, w)| w.operation_status.as_str()),
        );
    query(format!(
        "UPDATE payment_operation AS p SET updated_at = $1
           FROM {u}
          WHERE p.operation_id = u.operation_id AND p.status = u.status",
        u = rows.table(d, 2, "u"),
    ))
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(
        conn,
        expected,
        "payment operations as read for a compensation",
    )
    .await?;
    let hold_ids: Vec<&str> = accepted
        .iter()
        .map(|(c, _)| c.hold.hold_id.as_str())
        .collect();
    // A tier hold gives back the units the engine counted only if no exchange took some out
    // since (an exchange returns its own units): else the group is refused and decided again.
    let rows = Rows::new().texts("hold_id", hold_ids.iter().copied()).ints(
        "n",
        accepted
            .iter()
            .map(|(c, _)| c.hold.tier.as_ref().map_or(0, |(_, n)| i64::from(*n))),
    );
    query(format!(
        "UPDATE hold AS h SET status = 'RELEASED', updated_at = $2
           FROM {u}
          WHERE h.event_id = $1 AND h.hold_id = u.hold_id AND h.status = 'CONFIRMED'
            AND (h.tier_id IS NULL OR h.quantity - h.exchanged_out = u.n)",
        u = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, expected, "confirmed holds given back")
    .await?;
    let seat_ids: Vec<&str> = accepted
        .iter()
        .flat_map(|(c, _)| c.hold.seat_ids.iter().map(String::as_str))
        .collect();
    if !seat_ids.is_empty() {
        let expected = seat_ids.len();
        query(format!(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = version + 1
              WHERE event_id = $1 AND seat_id {} AND hold_id {} AND status = 'SOLD'",
            d.in_list("$3"),
            d.in_list("$2"),
        ))
        .bind(event_id)
        .bind(hold_ids)
        .bind(seat_ids)
        .execute_exactly(conn, expected, "seats sold by the orders given back")
        .await?;
    }
    let mut returned: BTreeMap<String, i64> = BTreeMap::new();
    for (tier_id, n) in accepted.iter().filter_map(|(c, _)| c.hold.tier.as_ref()) {
        *returned.entry(tier_id.clone()).or_default() += i64::from(*n);
    }
    move_units(conn, event_id, returned, Units::Sold, Units::Available, map).await?;
    // An exchange of these tickets waiting for payment ends (its marks go).
    let waiting: Vec<String> = query(format!(
        "SELECT new_hold_id FROM exchange WHERE order_id {} AND status = 'PAYMENT_REQUIRED'",
        d.in_list("$1"),
    ))
    .bind(orders.clone())
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<_>>()?;
    let waiting: Vec<&str> = waiting.iter().map(String::as_str).collect();
    exchange::end_exchanges_of(conn, &waiting, ExchangeStatus::Failed, group.now).await?;
    query(format!(
        "UPDATE ticket SET status = 'VOIDED' WHERE order_id {} AND status = 'VALID'",
        d.in_list("$1"),
    ))
    .bind(orders)
    .execute(conn)
    .await?;
    let messages: Vec<(&str, &str, String)> = accepted
        .iter()
        .flat_map(|(_, w)| {
            w.messages
                .iter()
                .map(|(topic, payload)| (event_id, *topic, payload.to_string()))
        })
        .collect();
    outbox::insert_encoded(conn, &messages, group.now).await?;
    Ok(refused)
}

/// The group's new holds and their `hold.created` outbox rows. A key another writer used
/// meanwhile violates `hold_by_key`: the group is refused.
async fn insert_holds(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let created: Vec<_> = group.effects.holds_created().collect();
    if created.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let holds: Vec<_> = created.iter().map(|c| &c.hold).collect();
    let rows = Rows::new()
        .texts("hold_id", holds.iter().map(|h| h.hold_id.as_str()))
        .texts("account_id", holds.iter().map(|h| h.account_id.as_str()))
        .opt_texts("tier_id", holds.iter().map(|h| h.tier_id.clone()))
        .int4s(
            "quantity",
            holds
                .iter()
                .map(|h| i32::try_from(h.quantity).unwrap_or(i32::MAX)),
        )
        .texts("seats", holds.iter().map(|h| held_seats_json(&h.seats)))
        .ints("total", holds.iter().map(|h| h.total_minor))
        .texts("idem_key", created.iter().map(|c| c.key.as_str()))
        .times("expires_at", holds.iter().map(|h| h.expires_at))
        .opt_texts("phase_id", holds.iter().map(|h| h.phase_id.clone()));
    let payloads: Vec<String> = holds
        .iter()
        .map(|h| hold_created_payload(event_id, h))
        .collect();
    let insert = format!(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor,
                           currency, idempotency_key, created_at, expires_at, updated_at, phase_id)
         SELECT $1, u.hold_id, u.account_id, 'HELD', u.tier_id, u.quantity, {seats}, u.total,
                $2, u.idem_key, $3, u.expires_at, $3, u.phase_id
           FROM {u}",
        seats = d.json("u.seats"),
        u = rows.table(d, 4, "u"),
    );
    let written = match d {
        // One statement: the holds and their announcements (a group of a sale creates some
        // in most groups, and every round trip of a group is paid by the groups behind it).
        Dialect::Postgres => {
            let rows = rows.texts("payload", payloads);
            let statement = format!(
                "WITH new_hold AS ({insert} RETURNING 1), announced AS (
                    INSERT INTO outbox (event_id, topic, payload, created_at)
                    SELECT $1, 'hold.created', u.payload::jsonb, $3 FROM {u})
                 SELECT count(*) FROM new_hold",
                u = rows.table(d, 4, "u"),
            );
            let count: i64 = query(statement)
                .bind(event_id)
                .bind(&group.event.currency)
                .bind(group.now)
                .bind_rows(d, rows)
                .fetch_one(conn)
                .await?
                .get(0)?;
            u64::try_from(count).unwrap_or(0)
        }
        Dialect::Sqlite => {
            let written = query(insert)
                .bind(event_id)
                .bind(&group.event.currency)
                .bind(group.now)
                .bind_rows(d, rows)
                .execute(conn)
                .await?;
            let messages: Vec<(&str, &str, String)> = payloads
                .into_iter()
                .map(|payload| (event_id, "hold.created", payload))
                .collect();
            outbox::insert_encoded(conn, &messages, group.now).await?;
            written
        }
    };
    if written != created.len() as u64 {
        return Err(mismatch("new holds", created.len(), written));
    }
    Ok(())
}

/// Takes the seats the engine gave to new holds, each only if it is still free.
#[cfg(not(feature = "planted-fault-skip-hold-condition"))]
const SEAT_STILL_FREE: &str =
    "(s.status = 'AVAILABLE' OR (s.status = 'HELD' AND s.hold_expires_at <= $2))";

/// A deliberately broken build (bench/planted-fault.sh): the condition is gone, so a seat
/// the engine wrongly thinks free is taken whatever it is; `boxoffice check` must catch it.
#[cfg(feature = "planted-fault-skip-hold-condition")]
const SEAT_STILL_FREE: &str = "$2 IS NOT NULL";

/// Seats go to new holds only if each is still free by the group's clock; all of them or
/// the group is refused.
async fn take_seats(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let taken: Vec<_> = group.effects.seats_taken().collect();
    if taken.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let rows = Rows::new()
        .texts("seat_id", taken.iter().map(|t| t.seat_id))
        .texts("hold_id", taken.iter().map(|t| t.hold_id))
        .times("expires_at", taken.iter().map(|t| t.hold_expires_at));
    query(format!(
        "UPDATE seat AS s SET status = 'HELD', hold_id = u.hold_id, hold_expires_at = u.expires_at,
                              order_id = NULL, version = s.version + 1
           FROM {u}
          WHERE s.event_id = $1 AND s.seat_id = u.seat_id AND {SEAT_STILL_FREE}",
        u = rows.table(d, 3, "u"),
    ))
    .bind(&group.event.event_id)
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, taken.len(), "seats still free")
    .await?;
    Ok(())
}

/// Tier units taken by new holds: moved to held only where that many are available.
async fn take_tier_units(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let taken = group
        .effects
        .tier_units_taken()
        .into_iter()
        .map(|(tier_id, n)| (tier_id.to_owned(), i64::from(n)))
        .collect();
    let event_id = group.event.event_id.as_str();
    move_units(conn, event_id, taken, Units::Available, Units::Held, map).await
}

/// Checkouts the group starts: the seats of each hold get its new deadline (each must still
/// be `HELD` by it), each hold moves to `PAYMENT_PENDING` only if it is still the account's,
/// `HELD` and live by the group's clock, and the moved holds' orders and payment operations
/// are copied from them (an exchange's hold costs the difference); then the requests'
/// idempotency records, each under its endpoint.
async fn start_checkouts(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let checkouts = group.checkouts()?;
    if checkouts.is_empty() {
        return Ok(());
    }
    let started: Vec<_> = checkouts.iter().map(|(started, _)| *started).collect();
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let seats: Vec<(&str, &str, OffsetDateTime)> = started
        .iter()
        .flat_map(|c| {
            c.seat_ids
                .iter()
                .map(|seat_id| (seat_id.as_str(), c.hold_id.as_str(), c.expires_at))
        })
        .collect();
    if !seats.is_empty() {
        let expected = seats.len();
        let rows = Rows::new()
            .texts("seat_id", seats.iter().map(|s| s.0))
            .texts("hold_id", seats.iter().map(|s| s.1))
            .times("expires_at", seats.iter().map(|s| s.2));
        query(format!(
            "UPDATE seat AS s SET hold_expires_at = u.expires_at, version = s.version + 1
               FROM {u}
              WHERE s.event_id = $1 AND s.seat_id = u.seat_id AND s.status = 'HELD'
                AND s.hold_id = u.hold_id",
            u = rows.table(d, 2, "u"),
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "seats held by the checked-out holds")
        .await?;
    }
    let rows = Rows::new()
        .texts("hold_id", started.iter().map(|c| c.hold_id.as_str()))
        .texts("account_id", started.iter().map(|c| c.account_id.as_str()))
        .texts("order_id", started.iter().map(|c| c.order_id.as_str()))
        .times("expires_at", started.iter().map(|c| c.expires_at));
    query(format!(
        "UPDATE hold AS h SET status = 'PAYMENT_PENDING', expires_at = u.expires_at,
                              order_id = u.order_id, updated_at = $2
           FROM {u}
          WHERE h.event_id = $1 AND h.hold_id = u.hold_id AND h.account_id = u.account_id
            AND h.status = 'HELD' AND h.expires_at > $2",
        u = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(group.now)
    .bind_rows(d, rows)
    .execute_exactly(conn, started.len(), "holds still held for checkout")
    .await?;
    let hold_ids: Vec<&str> = started.iter().map(|c| c.hold_id.as_str()).collect();
    query(format!(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity,
                             total_minor, currency, created_at, updated_at)
         SELECT event_id, order_id, hold_id, account_id, 'PENDING_PAYMENT', seats, tier_id, quantity,
                total_minor, currency, $3, $3
           FROM hold WHERE event_id = $1 AND hold_id {}",
        d.in_list("$2"),
    ))
    .bind(event_id)
    .bind(hold_ids)
    .bind(group.now)
    .execute(conn)
    .await?;
    let rows = Rows::new()
        .texts("hold_id", started.iter().map(|c| c.hold_id.as_str()))
        .texts(
            "operation_id",
            checkouts.iter().map(|(_, c)| c.operation_id.as_str()),
        )
        .texts(
            "provider",
            checkouts.iter().map(|(_, c)| c.provider.as_str()),
        )
        .texts(
            "method",
            checkouts.iter().map(|(_, c)| c.payment_method.as_str()),
        );
    query(format!(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                        amount_minor, currency, next_attempt_at, created_at, updated_at)
         SELECT h.event_id, u.operation_id, h.order_id, u.provider, u.method, 'AUTHORIZING',
                coalesce((SELECT x.amount_due_minor FROM exchange x WHERE x.new_hold_id = h.hold_id),
                         h.total_minor),
                h.currency, {next}, $2, $2
           FROM {u} JOIN hold h ON h.event_id = $1 AND h.hold_id = u.hold_id",
        next = d.plus_secs("$2", "$3"),
        u = rows.table(d, 4, "u"),
    ))
    .bind(event_id)
    .bind(group.now)
    .bind(boxoffice_store::checkout::OPERATION_RECHECK_S)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    let records: Vec<(&str, &boxoffice_store::NewRecord)> = checkouts
        .iter()
        .map(|(_, c)| (c.endpoint.as_str(), &c.record))
        .collect();
    idempotency::insert_each(conn, event_id, &records, group.now).await
}

/// The first account of `accounts` (bound as `accounts`) over the event's purchase limit
/// (`max`) by the group's clock (`now`), as a subquery.
fn over_limit(d: Dialect, accounts: &str, now: &str, max: &str) -> String {
    format!(
        "SELECT account_id FROM hold
          WHERE event_id = $1 AND account_id {}
            AND status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED')
          GROUP BY account_id
         HAVING sum(CASE WHEN status = 'CONFIRMED' OR expires_at > {now}
                         THEN quantity - exchanged_out ELSE 0 END) > {max}
          LIMIT 1",
        d.in_list(accounts),
    )
}

fn over_limit_refused(account: String) -> StoreError {
    StoreError::Conflict(format!(
        "group refused: account {account} would be over the purchase limit"
    ))
}

/// The group's last write: its writer sequence follows the stored one (else another writer
/// or a failed predecessor came between: refused), the map version moves on with one change
/// row when the group changed the map, and no account that got a hold is over the purchase
/// limit (a writer on another node that committed holds meanwhile moved the sequence, so the
/// limit read cannot miss them). Everything from the group's turn to take its locks on is a
/// queue for the groups pipelined behind it, so PostgreSQL does it all in one statement.
async fn record_group(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &MapChanges,
) -> StoreResult<(u64, u64)> {
    let changes = map
        .by_event
        .get(&group.event.event_id)
        .filter(|changes| !changes.is_empty());
    let bump = i64::from(changes.is_some());
    let encoded = changes.map(|changes| changes.encode()).unwrap_or_default();
    let seq = i64::try_from(group.writer_seq)
        .map_err(|_| StoreError::Internal("writer sequence out of range".into()))?;
    let d = conn.dialect();
    let accounts: Vec<&str> = group.effects.accounts_checked().into_iter().collect();
    let max = i64::from(group.event.max_tickets_per_account);
    let version: Option<i64> = match d {
        Dialect::Postgres => {
            let row = query(format!(
                "WITH bumped AS (
                    UPDATE seatmap SET version = version + $3, writer_seq = $2
                     WHERE event_id = $1 AND writer_seq = $2 - 1
                    RETURNING version
                 ), change AS (
                    INSERT INTO seatmap_change (event_id, version, changes, created_at)
                    SELECT $1, version, $4, $5 FROM bumped WHERE $3 = 1
                 )
                 SELECT (SELECT version FROM bumped), ({})",
                over_limit(d, "$6", "$5", "$7"),
            ))
            .bind(&group.event.event_id)
            .bind(seq)
            .bind(bump)
            .bind(encoded)
            .bind(group.now)
            .bind(accounts)
            .bind(max)
            .fetch_one(conn)
            .await?;
            if let Some(account) = row.get::<Option<String>, _>(1)? {
                return Err(over_limit_refused(account));
            }
            row.get(0)?
        }
        Dialect::Sqlite => {
            let version = query(
                "UPDATE seatmap SET version = version + $3, writer_seq = $2
                  WHERE event_id = $1 AND writer_seq = $2 - 1
                 RETURNING version",
            )
            .bind(&group.event.event_id)
            .bind(seq)
            .bind(bump)
            .fetch_optional(conn)
            .await?
            .map(|row| row.get::<i64, _>(0))
            .transpose()?;
            if let (Some(version), true) = (version, bump == 1) {
                query(
                    "INSERT INTO seatmap_change (event_id, version, changes, created_at)
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(&group.event.event_id)
                .bind(version)
                .bind(encoded)
                .bind(group.now)
                .execute(conn)
                .await?;
            }
            if version.is_some() && !accounts.is_empty() {
                let over = query(over_limit(d, "$2", "$3", "$4"))
                    .bind(&group.event.event_id)
                    .bind(accounts)
                    .bind(group.now)
                    .bind(max)
                    .fetch_optional(conn)
                    .await?;
                if let Some(row) = over {
                    return Err(over_limit_refused(row.get(0)?));
                }
            }
            version
        }
    };
    let version = version.ok_or_else(boxoffice_store::engine::sequence_moved)?;
    let version = u64::try_from(version).unwrap_or(0);
    Ok((version - u64::try_from(bump).unwrap_or(0), version))
}
