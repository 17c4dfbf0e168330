//! The event writer's side of the SQLite store (see `boxoffice_store::engine`): load an
//! event's live inventory in one read transaction, read changed rows again, persist a
//! decided group in one `BEGIN IMMEDIATE` transaction of conditional, counted writes.
//!
//! The file has one writer at a time, so a group costs no lock waits; each write is a
//! prepared statement on the writer connection (no network round trip), and the whole group
//! commits with one fsync.

use std::collections::BTreeMap;

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{EngineRows, EngineSnapshot};
use boxoffice_domain::hold::HoldStatus;
use boxoffice_store::engine::{
    EngineStore, GroupCommitted, GroupWrite, mismatch, predecessor_failed,
};
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{
    EventRecord, StoreError, StoreResult, held_seats_json, hold_created_payload, hold_ended_payload,
};
use sqlx::{Sqlite, Transaction};

use crate::{
    SqliteStore, begin_write, classify, exchange, insert_outbox, insert_records, json_list, to_ms,
};

#[async_trait]
impl EngineStore for SqliteStore {
    async fn engine_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::seatmap::StoredBatch>> {
        boxoffice_store::ReadStore::seat_map_changes(self, event_id, after, limit).await
    }

    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
        boxoffice_store_sql::engine::load(&self.db, event, endpoint).await
    }

    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows> {
        boxoffice_store_sql::engine::rows(&self.db, event_id, seat_ids, tier_ids, hold_ids).await
    }

    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
        if !group.turn.before_locks().await {
            return Err(predecessor_failed());
        }
        let mut tx = begin_write(&self.writer).await?;
        // A writer's group proves its lease inside its write transaction (serialized with a
        // takeover): a group of a node whose lease was taken over writes nothing.
        if let Some(fence) = &group.fence {
            let epoch: Option<i64> = sqlx::query_scalar(
                "SELECT epoch FROM event_lease WHERE event_id = ?1 AND node_id = ?2",
            )
            .bind(&group.event.event_id)
            .bind(&fence.node_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?;
            if epoch.and_then(|epoch| u64::try_from(epoch).ok()) != Some(fence.epoch) {
                return Err(boxoffice_store::lease::fenced(&group.event.event_id, fence));
            }
        }
        let clock_sent = std::time::Instant::now();
        let store_now = crate::store_now(&mut tx).await?;
        let clock_answered = std::time::Instant::now();
        if group.now > store_now {
            return Err(StoreError::Conflict(format!(
                "group refused: its clock {} is ahead of the store's {store_now}",
                group.now
            )));
        }
        let mut map = MapChanges::default();
        map.by_event
            .insert(group.event.event_id.clone(), group.map_seats());
        // What the group frees is written before what it takes: the engine may give a seat
        // or unit that one command frees to a later command of the same group.
        free_released_seats(&mut tx, group).await?;
        let expired = expire_holds(&mut tx, group, &mut map).await?;
        release_holds(&mut tx, group).await?;
        settle_checkouts(&mut tx, group, &mut map).await?;
        let compensations_refused = compensate_orders(&mut tx, group, &mut map).await?;
        group.unmap_refused(&mut map, &compensations_refused);
        let exchanges_refused = exchange::write_exchanges(&mut tx, group, &mut map).await?;
        group.unmap_refused(&mut map, &exchanges_refused);
        let transfers_refused = boxoffice_store_sql::transfer::write(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            group,
        )
        .await?;
        insert_holds(&mut tx, group).await?;
        boxoffice_store_sql::waitlist::write(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            group,
        )
        .await?;
        take_seats(&mut tx, group).await?;
        move_tier_units(&mut tx, group, &mut map).await?;
        start_checkouts(&mut tx, group).await?;
        insert_records(&mut tx, group.endpoint, &group.records, group.now).await?;
        group.turn.locks_taken();
        if !group.turn.before_record().await {
            return Err(predecessor_failed());
        }
        // The other events an exchange out of them freed seats or units of get their own
        // change rows (their writers catch up from them), every version row locked in
        // event-id order.
        let event_id = group.event.event_id.as_str();
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map.elsewhere(event_id, true),
            group.now,
        )
        .await?;
        let (previous_version, version) = record_group(&mut tx, group, &map).await?;
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map.elsewhere(event_id, false),
            group.now,
        )
        .await?;
        check_limits(&mut tx, group).await?;
        tx.commit().await.map_err(classify)?;
        Ok(GroupCommitted {
            previous_version,
            version,
            store_now,
            clock_answered,
            clock_round_trip: clock_answered - clock_sent,
            expiries_skipped: (group.effects.holds_expired.len() as u64).saturating_sub(expired),
            compensations_refused,
            exchanges_refused,
            transfers_refused,
        })
    }
}

/// Takes the seats the engine gave to one new hold, each only if it is still free.
#[cfg(not(feature = "planted-fault-skip-hold-condition"))]
const TAKE_SEATS_SQL: &str = "UPDATE seat SET status = 'HELD', hold_id = ?3, hold_expires_at = ?4,
                             order_id = NULL, version = version + 1
              WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2))
                AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= ?5))";

/// A deliberately broken build (bench/planted-fault.sh): the condition is gone, so a seat
/// the engine wrongly thinks free is taken whatever it is; `boxoffice check` must catch it.
#[cfg(feature = "planted-fault-skip-hold-condition")]
const TAKE_SEATS_SQL: &str = "UPDATE seat SET status = 'HELD', hold_id = ?3, hold_expires_at = ?4,
                             order_id = NULL, version = version + 1
              WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2)) AND ?5 IS NOT NULL";

/// Seats go to new holds only if each is still free by the group's clock: one statement per
/// new hold (each statement is a round trip to SQLite's worker thread, and those handoffs,
/// not SQLite, bounded the embedded store's groups), counted. A statement joining the seats
/// to the whole group's list let SQLite's planner walk every seat of the event.
async fn take_seats(tx: &mut Transaction<'_, Sqlite>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let mut by_hold: BTreeMap<(&str, i64), Vec<&str>> = BTreeMap::new();
    for taken in &group.effects.seats_taken {
        by_hold
            .entry((taken.hold_id.as_str(), to_ms(taken.hold_expires_at)))
            .or_default()
            .push(taken.seat_id.as_str());
    }
    for ((hold_id, expires_at_ms), seat_ids) in by_hold {
        let written = sqlx::query(TAKE_SEATS_SQL)
            .bind(&group.event.event_id)
            .bind(json_list(&seat_ids))
            .bind(hold_id)
            .bind(expires_at_ms)
            .bind(to_ms(group.now))
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
        if written != seat_ids.len() as u64 {
            return Err(mismatch(
                &format!("seats of hold {hold_id} still free"),
                seat_ids.len(),
                written,
            ));
        }
    }
    Ok(())
}

/// The seats of released holds: exactly those the engine counted, each `HELD` by its hold.
async fn free_released_seats(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
) -> StoreResult<()> {
    for hold in &group.effects.holds_released {
        for seat_id in &hold.seat_ids {
            let written = sqlx::query(
                "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
                  WHERE event_id = ?1 AND seat_id = ?2 AND hold_id = ?3 AND status = 'HELD'",
            )
            .bind(&group.event.event_id)
            .bind(seat_id)
            .bind(&hold.hold_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if written != 1 {
                return Err(mismatch(
                    &format!("seat {seat_id} of released hold {}", hold.hold_id),
                    1,
                    written,
                ));
            }
        }
    }
    Ok(())
}

/// Holds the engine found past their deadline: each still `HELD` and past it by the group's
/// clock is ended (one the sweeper ended first is skipped); the seats that still point to
/// the ended ones are freed and their units returned, exactly once.
async fn expire_holds(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let event_id = group.event.event_id.as_str();
    let mut ended: Vec<&str> = Vec::new();
    for hold in &group.effects.holds_expired {
        let written = sqlx::query(
            "UPDATE hold SET status = 'EXPIRED', updated_at = ?3
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'HELD' AND expires_at <= ?3",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .bind(to_ms(group.now))
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if written == 0 {
            continue;
        }
        ended.push(&hold.hold_id);
        insert_outbox(
            tx,
            event_id,
            "hold.expired",
            &hold_ended_payload(
                event_id,
                &hold.hold_id,
                &hold.account_id,
                HoldStatus::Expired,
            ),
            group.now,
        )
        .await?;
        let freed = sqlx::query_scalar::<_, String>(
            "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'HELD' RETURNING seat_id",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        for seat_id in &freed {
            map.seat_unless_named(
                event_id,
                seat_id,
                boxoffice_domain::hold::SeatStatus::Available,
                None,
            );
        }
        if let Some((tier_id, units)) = &hold.tier {
            let available = sqlx::query_scalar::<_, i64>(
                "UPDATE tier SET available = available + ?3, held = held - ?3
                  WHERE event_id = ?1 AND tier_id = ?2 RETURNING available",
            )
            .bind(event_id)
            .bind(tier_id)
            .bind(i64::from(*units))
            .fetch_one(&mut **tx)
            .await
            .map_err(classify)?;
            map.tier(event_id, tier_id, available);
        }
    }
    if !ended.is_empty() {
        exchange::end_exchanges_of(tx, &ended, ExchangeStatus::Expired, group.now).await?;
    }
    Ok(ended.len() as u64)
}

/// The group's new holds and their `hold.created` outbox rows, one statement each.
async fn insert_holds(tx: &mut Transaction<'_, Sqlite>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let created = &group.effects.holds_created;
    if created.is_empty() {
        return Ok(());
    }
    let event_id = group.event.event_id.as_str();
    let rows: Vec<serde_json::Value> = created
        .iter()
        .zip(&group.hold_keys)
        .map(|((_, hold), key)| {
            serde_json::json!([
                hold.hold_id,
                hold.account_id,
                hold.tier_id,
                hold.quantity,
                held_seats_json(&hold.seats),
                hold.total_minor,
                key,
                to_ms(hold.expires_at),
            ])
        })
        .collect();
    let written = sqlx::query(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor,
                           currency, idempotency_key, created_at, expires_at, updated_at)
         SELECT ?1, json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'HELD',
                json_extract(value, '$[2]'), json_extract(value, '$[3]'), json_extract(value, '$[4]'),
                json_extract(value, '$[5]'), ?2, json_extract(value, '$[6]'), ?3,
                json_extract(value, '$[7]'), ?3
           FROM json_each(?4) ORDER BY key",
    )
    .bind(event_id)
    .bind(&group.event.currency)
    .bind(to_ms(group.now))
    .bind(serde_json::Value::Array(rows).to_string())
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if written != created.len() as u64 {
        return Err(mismatch("holds created", created.len(), written));
    }
    let payloads: Vec<String> = created
        .iter()
        .map(|(_, hold)| hold_created_payload(event_id, hold))
        .collect();
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at)
         SELECT ?1, 'hold.created', value, ?2 FROM json_each(?3) ORDER BY key",
    )
    .bind(event_id)
    .bind(to_ms(group.now))
    .bind(json_list(&payloads))
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Tier units given back by released holds (only where that many are held) and taken by new
/// holds (only where that many are available).
async fn move_tier_units(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let taken = group
        .effects
        .tier_units_taken
        .iter()
        .map(|(t, n)| (t, i64::from(*n)));
    let returned: BTreeMap<String, u32> = group.tier_units_returned();
    let returned = returned.iter().map(|(t, n)| (t, -i64::from(*n)));
    // Units given back first: a later command of the group may take them.
    for (tier_id, n) in returned.chain(taken) {
        let available = sqlx::query_scalar::<_, i64>(
            "UPDATE tier SET available = available - ?3, held = held + ?3
              WHERE event_id = ?1 AND tier_id = ?2 AND available >= ?3 AND held + ?3 >= 0
             RETURNING available",
        )
        .bind(&group.event.event_id)
        .bind(tier_id)
        .bind(n)
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?
        .ok_or_else(|| mismatch(&format!("tier {tier_id} with {n} units to move"), 1, 0))?;
        map.tier(&group.event.event_id, tier_id, available);
    }
    Ok(())
}

/// Holds released by the group: each still `HELD` and live by the group's clock.
async fn release_holds(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
) -> StoreResult<()> {
    let event_id = group.event.event_id.as_str();
    let mut hold_ids: Vec<&str> = Vec::new();
    for hold in &group.effects.holds_released {
        let written = sqlx::query(
            "UPDATE hold SET status = 'RELEASED', updated_at = ?3
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'HELD' AND expires_at > ?3",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .bind(to_ms(group.now))
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if written != 1 {
            return Err(mismatch(&format!("live hold {}", hold.hold_id), 1, written));
        }
        insert_outbox(
            tx,
            event_id,
            "hold.released",
            &hold_ended_payload(
                event_id,
                &hold.hold_id,
                &hold.account_id,
                HoldStatus::Released,
            ),
            group.now,
        )
        .await?;
        hold_ids.push(&hold.hold_id);
    }
    if !hold_ids.is_empty() {
        exchange::end_exchanges_of(tx, &hold_ids, ExchangeStatus::Failed, group.now).await?;
    }
    Ok(())
}

/// Checkouts the group starts: each seat of a hold gets its new deadline (it must still be
/// `HELD` by it), the hold moves to `PAYMENT_PENDING` only if it is still the account's,
/// `HELD` and live by the group's clock, and its order and payment operation are copied from
/// it (an exchange's hold costs the difference); then the request's idempotency record under
/// its endpoint.
async fn start_checkouts(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
) -> StoreResult<()> {
    let started = &group.effects.checkouts_started;
    if group.checkouts.len() != started.len() {
        return Err(StoreError::Internal(format!(
            "{} checkouts decided, {} described",
            started.len(),
            group.checkouts.len()
        )));
    }
    let event_id = group.event.event_id.as_str();
    let now_ms = to_ms(group.now);
    let recheck_ms = (boxoffice_store::checkout::OPERATION_RECHECK_S * 1_000.0) as i64;
    for (checkout, write) in started.iter().zip(&group.checkouts) {
        let deadline = to_ms(checkout.expires_at);
        for seat_id in &checkout.seat_ids {
            let extended = sqlx::query(
                "UPDATE seat SET hold_expires_at = ?4, version = version + 1
                  WHERE event_id = ?1 AND seat_id = ?2 AND status = 'HELD' AND hold_id = ?3",
            )
            .bind(event_id)
            .bind(seat_id)
            .bind(&checkout.hold_id)
            .bind(deadline)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if extended != 1 {
                return Err(mismatch(
                    &format!("seat {seat_id} held by {}", checkout.hold_id),
                    1,
                    extended,
                ));
            }
        }
        let moved = sqlx::query(
            "UPDATE hold SET status = 'PAYMENT_PENDING', expires_at = ?4, order_id = ?5, updated_at = ?6
              WHERE event_id = ?1 AND hold_id = ?2 AND account_id = ?3 AND status = 'HELD' AND expires_at > ?6",
        )
        .bind(event_id)
        .bind(&checkout.hold_id)
        .bind(&checkout.account_id)
        .bind(deadline)
        .bind(&checkout.order_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if moved != 1 {
            return Err(mismatch(
                &format!("hold {} still held for checkout", checkout.hold_id),
                1,
                moved,
            ));
        }
        sqlx::query(
            "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity,
                                 total_minor, currency, created_at, updated_at)
             SELECT event_id, ?3, hold_id, account_id, 'PENDING_PAYMENT', seats, tier_id, quantity, total_minor,
                    currency, ?4, ?4
               FROM hold WHERE event_id = ?1 AND hold_id = ?2",
        )
        .bind(event_id)
        .bind(&checkout.hold_id)
        .bind(&checkout.order_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        sqlx::query(
            "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                            amount_minor, currency, next_attempt_at, created_at, updated_at)
             SELECT event_id, ?3, ?4, ?5, ?6, 'AUTHORIZING',
                    coalesce((SELECT amount_due_minor FROM exchange WHERE new_hold_id = hold.hold_id), total_minor),
                    currency, ?7, ?8, ?8
               FROM hold WHERE event_id = ?1 AND hold_id = ?2",
        )
        .bind(event_id)
        .bind(&checkout.hold_id)
        .bind(&write.operation_id)
        .bind(&checkout.order_id)
        .bind(&write.provider)
        .bind(&write.payment_method)
        .bind(now_ms + recheck_ms)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        insert_records(
            tx,
            &write.endpoint,
            std::slice::from_ref(&write.record),
            group.now,
        )
        .await?;
    }
    Ok(())
}

/// Payment verdicts the group applies, each write conditional and counted: sold seats must
/// still be `HELD` by their hold and live, a sold hold still `PAYMENT_PENDING` and live, a
/// cancelled one still `PAYMENT_PENDING` (exactly the seats the engine counted are freed,
/// its units returned); every operation moves only from the status its caller read, every
/// order only from `PENDING_PAYMENT`; then the outbox messages and the settled answers.
async fn settle_checkouts(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let confirmed = &group.effects.holds_confirmed;
    let cancelled = &group.effects.checkouts_cancelled;
    if group.settlements.len() != confirmed.len() + cancelled.len() {
        return Err(StoreError::Internal(format!(
            "{} payment verdicts decided, {} described",
            confirmed.len() + cancelled.len(),
            group.settlements.len()
        )));
    }
    let event_id = group.event.event_id.as_str();
    let now_ms = to_ms(group.now);
    let order_of: BTreeMap<usize, &str> = group
        .settlements
        .iter()
        .map(|s| (s.index, s.order_id.as_str()))
        .collect();
    for hold in confirmed {
        let order_id = order_of.get(&hold.index).copied().unwrap_or_default();
        for seat_id in &hold.seat_ids {
            let sold = sqlx::query(
                "UPDATE seat SET status = 'SOLD', order_id = ?4, hold_expires_at = NULL, version = version + 1
                  WHERE event_id = ?1 AND seat_id = ?2 AND status = 'HELD' AND hold_id = ?3 AND hold_expires_at > ?5",
            )
            .bind(event_id)
            .bind(seat_id)
            .bind(&hold.hold_id)
            .bind(order_id)
            .bind(now_ms)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if sold != 1 {
                return Err(mismatch(&format!("seat {seat_id} sold"), 1, sold));
            }
        }
        if let Some((tier_id, n)) = &hold.tier {
            let moved = sqlx::query(
                "UPDATE tier SET held = held - ?3, sold = sold + ?3
                  WHERE event_id = ?1 AND tier_id = ?2 AND held >= ?3",
            )
            .bind(event_id)
            .bind(tier_id)
            .bind(i64::from(*n))
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if moved != 1 {
                return Err(mismatch(&format!("tier {tier_id} units sold"), 1, moved));
            }
        }
        let sold = sqlx::query(
            "UPDATE hold SET status = 'CONFIRMED', updated_at = ?3
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'PAYMENT_PENDING' AND expires_at > ?3",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if sold != 1 {
            return Err(mismatch(&format!("hold {} sold", hold.hold_id), 1, sold));
        }
    }
    for (_, hold) in cancelled {
        let ended = sqlx::query(
            "UPDATE hold SET status = 'RELEASED', updated_at = ?3
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'PAYMENT_PENDING'",
        )
        .bind(event_id)
        .bind(&hold.hold_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if ended != 1 {
            return Err(mismatch(
                &format!("hold {} in checkout", hold.hold_id),
                1,
                ended,
            ));
        }
        for seat_id in &hold.seat_ids {
            let freed = sqlx::query(
                "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
                  WHERE event_id = ?1 AND seat_id = ?2 AND hold_id = ?3 AND status = 'HELD'",
            )
            .bind(event_id)
            .bind(seat_id)
            .bind(&hold.hold_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if freed != 1 {
                return Err(mismatch(&format!("seat {seat_id} freed"), 1, freed));
            }
        }
        if let Some((tier_id, n)) = &hold.tier {
            return_units(tx, event_id, tier_id, *n, UnitsFrom::Held, map).await?;
        }
        insert_outbox(
            tx,
            event_id,
            "hold.released",
            &hold_ended_payload(
                event_id,
                &hold.hold_id,
                &hold.account_id,
                HoldStatus::Released,
            ),
            group.now,
        )
        .await?;
    }
    for settlement in &group.settlements {
        let moved = sqlx::query(
            "UPDATE payment_operation
                SET status = ?2, provider_ref = coalesce(provider_ref, ?3), next_action_url = NULL,
                    last_error = ?4, updated_at = ?5, next_attempt_at = ?6
              WHERE operation_id = ?1 AND status IN ('AUTHORIZING', 'UNKNOWN', 'REQUIRES_ACTION')",
        )
        .bind(&settlement.operation_id)
        .bind(settlement.to_status.as_str())
        .bind(&settlement.provider_ref)
        .bind(&settlement.last_error)
        .bind(now_ms)
        .bind(now_ms + (settlement.recheck_after_s * 1_000.0) as i64)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if moved != 1 {
            return Err(mismatch(
                &format!("operation {} not settled yet", settlement.operation_id),
                1,
                moved,
            ));
        }
        let ended = sqlx::query(
            "UPDATE orders SET status = ?2, cancel_reason = ?3, updated_at = ?4
              WHERE order_id = ?1 AND status = 'PENDING_PAYMENT'",
        )
        .bind(&settlement.order_id)
        .bind(settlement.order_status.as_str())
        .bind(&settlement.cancel_reason)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if ended != 1 {
            return Err(mismatch(
                &format!("order {} pending payment", settlement.order_id),
                1,
                ended,
            ));
        }
        for (topic, payload) in &settlement.messages {
            insert_outbox(tx, event_id, topic, &payload.to_string(), group.now).await?;
        }
        if let Some((scope, response)) = &settlement.record {
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
        }
    }
    Ok(())
}

/// The count of a tier that units go back from: held by live holds, or sold.
#[derive(Debug, Clone, Copy)]
enum UnitsFrom {
    Held,
    Sold,
}

/// `n` units given back to a tier, only where that many are held (or sold), counted; the map
/// gets the tier's available count.
async fn return_units(
    tx: &mut Transaction<'_, Sqlite>,
    event_id: &str,
    tier_id: &str,
    n: u32,
    from: UnitsFrom,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let sql = match from {
        UnitsFrom::Held => {
            "UPDATE tier SET available = available + ?3, held = held - ?3
              WHERE event_id = ?1 AND tier_id = ?2 AND held >= ?3 RETURNING available"
        }
        UnitsFrom::Sold => {
            "UPDATE tier SET available = available + ?3, sold = sold - ?3
              WHERE event_id = ?1 AND tier_id = ?2 AND sold >= ?3 RETURNING available"
        }
    };
    let available: Option<i64> = sqlx::query_scalar(sql)
        .bind(event_id)
        .bind(tier_id)
        .bind(i64::from(n))
        .fetch_optional(&mut **tx)
        .await
        .map_err(classify)?;
    let Some(available) = available else {
        return Err(mismatch(&format!("tier {tier_id} {from:?} units"), 1, 0));
    };
    map.tier(event_id, tier_id, available);
    Ok(())
}

/// Confirmed orders the group gives back (captures refused for good). An order with a
/// checked-in ticket, or whose operation moved since it was read, is left alone (its
/// command index is returned; the group holds SQLite's
/// only write lock, so no check-in comes between the count and the void); the rest are
/// cancelled, their operations must still be in the status read, their holds `CONFIRMED`,
/// exactly the engine's seats still `SOLD` by them; units back, tickets voided, waiting
/// exchanges failed, messages queued.
async fn compensate_orders(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<Vec<usize>> {
    let given = &group.effects.orders_compensated;
    if group.compensations.len() != given.len() {
        return Err(StoreError::Internal(format!(
            "{} compensations decided, {} described",
            given.len(),
            group.compensations.len()
        )));
    }
    let event_id = group.event.event_id.as_str();
    let now_ms = to_ms(group.now);
    let mut refused = Vec::new();
    for (compensated, write) in given.iter().zip(&group.compensations) {
        let order_id = compensated.order_id.as_str();
        let used: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM ticket WHERE order_id = ?1 AND status = 'CHECKED_IN'",
        )
        .bind(order_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        // An operation that moved since it was read (a webhook's capture) refuses its
        // compensation alone: its undo was chosen from the status read.
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM payment_operation WHERE operation_id = ?1")
                .bind(&write.operation_id)
                .fetch_optional(&mut **tx)
                .await
                .map_err(classify)?;
        if used > 0 || status.as_deref() != Some(write.operation_status.as_str()) {
            refused.push(compensated.index);
            continue;
        }
        let cancelled = sqlx::query(
            "UPDATE orders SET status = 'CANCELLED', cancel_reason = ?2, updated_at = ?3
              WHERE order_id = ?1 AND status = 'CONFIRMED'",
        )
        .bind(order_id)
        .bind(&write.reason)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if cancelled != 1 {
            return Err(mismatch(
                &format!("confirmed order {order_id}"),
                1,
                cancelled,
            ));
        }
        let as_read = sqlx::query(
            "UPDATE payment_operation SET updated_at = ?3 WHERE operation_id = ?1 AND status = ?2",
        )
        .bind(&write.operation_id)
        .bind(write.operation_status.as_str())
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if as_read != 1 {
            return Err(mismatch(
                &format!("operation {} as read", write.operation_id),
                1,
                as_read,
            ));
        }
        let hold_id = compensated.hold.hold_id.as_str();
        // A tier hold gives back the units the engine counted only if no exchange took some
        // out since (an exchange returns its own units): else the group is refused.
        let units = compensated
            .hold
            .tier
            .as_ref()
            .map_or(0, |(_, n)| i64::from(*n));
        let ended = sqlx::query(
            "UPDATE hold SET status = 'RELEASED', updated_at = ?3
              WHERE event_id = ?1 AND hold_id = ?2 AND status = 'CONFIRMED'
                AND (tier_id IS NULL OR quantity - exchanged_out = ?4)",
        )
        .bind(event_id)
        .bind(hold_id)
        .bind(now_ms)
        .bind(units)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if ended != 1 {
            return Err(mismatch(&format!("confirmed hold {hold_id}"), 1, ended));
        }
        for seat_id in &compensated.hold.seat_ids {
            let freed = sqlx::query(
                "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                        version = version + 1
                  WHERE event_id = ?1 AND seat_id = ?2 AND hold_id = ?3 AND status = 'SOLD'",
            )
            .bind(event_id)
            .bind(seat_id)
            .bind(hold_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if freed != 1 {
                return Err(mismatch(
                    &format!("seat {seat_id} sold by {hold_id}"),
                    1,
                    freed,
                ));
            }
        }
        if let Some((tier_id, n)) = &compensated.hold.tier {
            return_units(tx, event_id, tier_id, *n, UnitsFrom::Sold, map).await?;
        }
        // An exchange of these tickets waiting for payment ends (its marks go).
        let waiting: Vec<String> = sqlx::query_scalar(
            "SELECT new_hold_id FROM exchange WHERE order_id = ?1 AND status = 'PAYMENT_REQUIRED'",
        )
        .bind(order_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        let waiting: Vec<&str> = waiting.iter().map(String::as_str).collect();
        exchange::end_exchanges_of(tx, &waiting, ExchangeStatus::Failed, group.now).await?;
        sqlx::query("UPDATE ticket SET status = 'VOIDED' WHERE order_id = ?1 AND status = 'VALID'")
            .bind(order_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?;
        for (topic, payload) in &write.messages {
            insert_outbox(tx, event_id, topic, &payload.to_string(), group.now).await?;
        }
    }
    Ok(refused)
}

/// The group's last write: its writer sequence follows the stored one, and the map version
/// moves on with one change row when the group changed the map.
async fn record_group(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
    map: &MapChanges,
) -> StoreResult<(u64, u64)> {
    let changes = map
        .by_event
        .get(&group.event.event_id)
        .filter(|changes| !changes.is_empty());
    let bump = i64::from(changes.is_some());
    let seq = i64::try_from(group.writer_seq)
        .map_err(|_| StoreError::Internal("writer sequence out of range".into()))?;
    let version = sqlx::query_scalar::<_, i64>(
        "UPDATE seatmap SET version = version + ?3, writer_seq = ?2
          WHERE event_id = ?1 AND writer_seq = ?2 - 1
         RETURNING version",
    )
    .bind(&group.event.event_id)
    .bind(seq)
    .bind(bump)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    .ok_or_else(boxoffice_store::engine::sequence_moved)?;
    if let Some(changes) = changes {
        sqlx::query(
            "INSERT INTO seatmap_change (event_id, version, changes, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(&group.event.event_id)
        .bind(version)
        .bind(changes.encode())
        .bind(to_ms(group.now))
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    let version = u64::try_from(version).unwrap_or(0);
    Ok((version - u64::try_from(bump).unwrap_or(0), version))
}

/// After the writes: the accounts that got holds are within the limit.
async fn check_limits(tx: &mut Transaction<'_, Sqlite>, group: &GroupWrite<'_>) -> StoreResult<()> {
    if group.effects.accounts_checked.is_empty() {
        return Ok(());
    }
    let accounts: Vec<&str> = group
        .effects
        .accounts_checked
        .iter()
        .map(String::as_str)
        .collect();
    let over = sqlx::query_scalar::<_, String>(
        "SELECT account_id FROM hold
          WHERE event_id = ?1 AND account_id IN (SELECT value FROM json_each(?2))
            AND status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED')
          GROUP BY account_id
         HAVING sum(CASE WHEN status = 'CONFIRMED' OR expires_at > ?3 THEN quantity - exchanged_out ELSE 0 END) > ?4
          LIMIT 1",
    )
    .bind(&group.event.event_id)
    .bind(json_list(&accounts))
    .bind(to_ms(group.now))
    .bind(i64::from(group.event.max_tickets_per_account))
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?;
    match over {
        Some(account) => Err(StoreError::Conflict(format!(
            "group refused: account {account} would be over the purchase limit"
        ))),
        None => Ok(()),
    }
}
