//! The expiry sweeper's store side (see `boxoffice_workers::expiry`): the holds past their
//! deadline, and their ending. The event writers end the holds of the events they run in
//! their own groups; the sweeper is the backstop for events no writer runs, and for stored
//! answers past their keeping time.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HoldView, StoreResult, SweepReport, hold_ended_payload};

use crate::db::{Db, query};
use crate::{exchange, hold, outbox, seatmap};

/// Up to `limit` holds past their deadline, the oldest first: `HELD` ones `held_grace_ms`
/// after it (the writer of a running event ends those first), checkouts at once.
pub async fn due_holds(db: &Db, limit: u32, held_grace_ms: u32) -> StoreResult<Vec<String>> {
    let now = db.dialect().now();
    query(format!(
        "SELECT hold_id FROM hold
          WHERE ((status = 'HELD' AND expires_at <= {grace_ago})
                 OR (status = 'PAYMENT_PENDING' AND expires_at <= {now}))
            AND {not_moving_in}
          ORDER BY expires_at LIMIT $1",
        grace_ago = db.dialect().plus_secs(now, "-($2 / 1000.0)"),
        not_moving_in = db.dialect().not_moving_in("event_id"),
    ))
    .bind(limit)
    .bind(f64::from(held_grace_ms))
    .fetch_all(&mut db.read().await?.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// Ends the holds of `hold_ids` still live (`HELD` or in checkout) and past their deadline by
/// the store's clock, in one transaction of a handful of set-based statements whatever their
/// number (so that the seat locks are held for milliseconds: one statement per hold kept them
/// for seconds at a thousand expiries a second, and hold batches queued behind them). A hold
/// another writer ended first is skipped, so an expiry that comes late finds nothing to do.
/// A hold that ran out of grace in checkout takes its order with it; an authorization that
/// arrives later is voided.
pub async fn expire(db: &Db, hold_ids: &[String]) -> StoreResult<SweepReport> {
    let mut report = SweepReport::default();
    if hold_ids.is_empty() {
        return Ok(report);
    }
    let d = db.dialect();
    let holds = hold::many(&mut db.read().await?.conn(), hold_ids).await?;
    let mut tx = db.write().await?;
    // Every seat and tier involved locked in the global order before any hold changes
    // (PostgreSQL; SQLite's write transaction holds the file).
    if d.locks_rows() {
        let mut by_event: BTreeMap<&str, Vec<&HoldView>> = BTreeMap::new();
        for hold in &holds {
            by_event.entry(&hold.event_id).or_default().push(hold);
        }
        for (event_id, event_holds) in &by_event {
            let ids: Vec<&str> = event_holds.iter().map(|h| h.hold_id.as_str()).collect();
            // By the partial index on hold_id (with `event_id = $1` too the planner walked
            // the event's primary key: 38 ms a sweep, holding up hold batches).
            query("SELECT 1 FROM seat WHERE hold_id = ANY($1) ORDER BY seat_id FOR UPDATE")
                .bind(ids)
                .execute(&mut tx.conn())
                .await?;
            let tier_ids: BTreeSet<&str> = event_holds
                .iter()
                .filter_map(|h| h.tier_id.as_deref())
                .collect();
            if !tier_ids.is_empty() {
                query(
                    "SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = ANY($2)
                      ORDER BY tier_id FOR UPDATE",
                )
                .bind(*event_id)
                .bind(tier_ids.into_iter().collect::<Vec<_>>())
                .execute(&mut tx.conn())
                .await?;
            }
        }
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    let ids: Vec<&str> = holds.iter().map(|h| h.hold_id.as_str()).collect();
    let expired: BTreeSet<String> = query(format!(
        "UPDATE hold SET status = 'EXPIRED', updated_at = $2
          WHERE hold_id {} AND status IN ('HELD', 'PAYMENT_PENDING') AND expires_at <= $2
         RETURNING hold_id",
        d.in_list("$1"),
    ))
    .bind(ids)
    .bind(now)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<_>>()?;
    let expired: Vec<&HoldView> = holds
        .iter()
        .filter(|h| expired.contains(&h.hold_id))
        .collect();
    let mut map = MapChanges::default();
    if !expired.is_empty() {
        let ids: Vec<&str> = expired.iter().map(|h| h.hold_id.as_str()).collect();
        exchange::end_exchanges_of(&mut tx.conn(), &ids, ExchangeStatus::Expired, now).await?;
        let cancelled = query(format!(
            "UPDATE orders SET status = 'CANCELLED', cancel_reason = 'HOLD_EXPIRED', updated_at = $2
              WHERE hold_id {} AND status = 'PENDING_PAYMENT'
             RETURNING event_id, order_id",
            d.in_list("$1"),
        ))
        .bind(ids.clone())
        .bind(now)
        .fetch_all(&mut tx.conn())
        .await?;
        let mut messages: Vec<(String, &str, String)> = Vec::new();
        for row in &cancelled {
            let (event_id, order_id): (String, String) = (row.get(0)?, row.get(1)?);
            let payload = serde_json::json!({"orderId": order_id, "reason": "HOLD_EXPIRED"});
            messages.push((
                event_id,
                boxoffice_store::checkout::topic::ORDER_CANCELLED,
                payload.to_string(),
            ));
        }
        // The seats that still point to an expired hold come back (exactly once: the status
        // change above was conditional). Hold ids are unique across events: the partial
        // index on seat.hold_id serves the list (a join was planned as a scan of every seat).
        let freed = query(format!(
            "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL,
                             version = version + 1
              WHERE hold_id {} AND status = 'HELD'
             RETURNING event_id, seat_id",
            d.in_list("$1"),
        ))
        .bind(ids)
        .fetch_all(&mut tx.conn())
        .await?;
        for row in &freed {
            let (event_id, seat_id): (String, String) = (row.get(0)?, row.get(1)?);
            map.seat(&event_id, &seat_id, SeatStatus::Available, None);
        }
        report.seats_freed += freed.len() as u64;
        let mut units: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for hold in &expired {
            if let Some(tier_id) = &hold.tier_id {
                *units.entry((&hold.event_id, tier_id)).or_default() += i64::from(hold.quantity);
                report.tier_units_returned += u64::from(hold.quantity);
            }
        }
        for ((event_id, tier_id), quantity) in units {
            let available: i64 = query(
                "UPDATE tier SET held = held - $3, available = available + $3
                  WHERE event_id = $1 AND tier_id = $2 RETURNING available",
            )
            .bind(event_id)
            .bind(tier_id)
            .bind(quantity)
            .fetch_one(&mut tx.conn())
            .await?
            .get(0)?;
            map.tier(event_id, tier_id, available);
        }
        for hold in &expired {
            let payload = hold_ended_payload(
                &hold.event_id,
                &hold.hold_id,
                &hold.account_id,
                HoldStatus::Expired,
            );
            messages.push((hold.event_id.clone(), "hold.expired", payload));
        }
        let messages: Vec<(&str, &str, String)> = messages
            .iter()
            .map(|(e, t, p)| (e.as_str(), *t, p.clone()))
            .collect();
        outbox::insert_encoded(&mut tx.conn(), &messages, now).await?;
        report.holds_expired += expired.len() as u64;
    }
    seatmap::record(&mut tx.conn(), &map, now).await?;
    tx.commit().await?;
    Ok(report)
}

/// Deletes the stored answers older than `older_than_s`. Returns how many.
pub async fn purge_idempotency(db: &Db, older_than_s: u32) -> StoreResult<u64> {
    let d = db.dialect();
    query(format!(
        "DELETE FROM idempotency WHERE created_at < {}",
        d.plus_secs(d.now(), "-$1"),
    ))
    .bind(f64::from(older_than_s))
    .execute(&mut db.write_one().await?.conn())
    .await
}
