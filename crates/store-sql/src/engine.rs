//! The event writer's reads (see `boxoffice_store::engine`): an event's live inventory in one
//! snapshot, and the rows a refused group names read again. A group's writes
//! (`apply_group`) are still each backend's own.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{SeatRow, TierRow};
use boxoffice_domain::engine::{EngineHold, EngineRows, EngineSnapshot};
use boxoffice_store::engine::parse_seat_status;
use boxoffice_store::{EventRecord, StoreError, StoreResult, parse_held_seats, parse_hold_status};

use crate::db::{Conn, Db, Row, query};
use crate::{outbox, waitlist};

/// Hold columns as [`engine_hold`] reads them.
const HOLD_SELECT: &str = "SELECT hold_id, account_id, status, tier_id, quantity, exchanged_out,
        CAST(seats AS text), expires_at,
        EXISTS (SELECT 1 FROM exchange x WHERE x.new_hold_id = hold.hold_id), phase_id FROM hold";

const SEAT_SELECT: &str =
    "SELECT seat_id, status, hold_id, hold_expires_at, price_minor FROM seat WHERE event_id = $1";

const TIER_SELECT: &str =
    "SELECT tier_id, capacity, available, held, sold, price_minor FROM tier WHERE event_id = $1";

fn seat_row(row: &Row) -> StoreResult<SeatRow> {
    let seat_id: String = row.get(0)?;
    let status = parse_seat_status(&seat_id, &row.get::<String, _>(1)?)?;
    Ok(SeatRow {
        seat_id,
        status,
        hold_id: row.get(2)?,
        hold_expires_at: row.get(3)?,
        price_minor: row.get(4)?,
    })
}

/// A tier's row as the engine and `boxoffice check` read it (the columns of [`TIER_SELECT`]).
pub(crate) fn tier_row(row: &Row) -> StoreResult<TierRow> {
    Ok(TierRow {
        tier_id: row.get(0)?,
        capacity: row.get(1)?,
        available: row.get(2)?,
        held: row.get(3)?,
        sold: row.get(4)?,
        price_minor: row.get(5)?,
    })
}

fn engine_hold(row: &Row) -> StoreResult<EngineHold> {
    let (quantity, exchanged_out): (i32, i32) = (row.get(4)?, row.get(5)?);
    Ok(EngineHold {
        hold_id: row.get(0)?,
        account_id: row.get(1)?,
        status: parse_hold_status(&row.get::<String, _>(2)?)?,
        tier_id: row.get(3)?,
        quantity: u32::try_from(quantity - exchanged_out).unwrap_or(0),
        seat_ids: parse_held_seats(&row.get::<String, _>(6)?)?
            .into_iter()
            .map(|seat| seat.seat_id)
            .collect(),
        expires_at: row.get(7)?,
        exchange: row.get(8)?,
        phase_id: row.get(9)?,
    })
}

async fn read<T>(
    conn: &mut Conn<'_>,
    statement: crate::db::Query,
    each: fn(&Row) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    statement.fetch_all(conn).await?.iter().map(each).collect()
}

/// The event's live inventory in one snapshot (every table at the same instant) and the
/// store's clock at that instant.
pub async fn load(
    db: &Db,
    event: &EventRecord,
    endpoint: &str,
) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
    let event_id = event.event_id.as_str();
    let mut tx = db.snapshot().await?;
    let mut conn = tx.conn();
    let now = outbox::store_now(&mut conn).await?;
    let head = query("SELECT version, writer_seq FROM seatmap WHERE event_id = $1")
        .bind(event_id)
        .fetch_optional(&mut conn)
        .await?
        .ok_or_else(|| StoreError::Internal(format!("event {event_id} has no seat map row")))?;
    let (version, writer_seq): (i64, i64) = (head.get(0)?, head.get(1)?);
    let seats = read(&mut conn, query(SEAT_SELECT).bind(event_id), seat_row).await?;
    let tiers = read(&mut conn, query(TIER_SELECT).bind(event_id), tier_row).await?;
    let holds = read(
        &mut conn,
        query(format!(
            "{HOLD_SELECT} WHERE event_id = $1
               AND status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED')"
        ))
        .bind(event_id),
        engine_hold,
    )
    .await?;
    // The keys used at the event's hold endpoint, and the keys of holds whose records were
    // purged (an empty digest: the key stays taken).
    let keys = query(
        "SELECT account_id, idem_key, request_digest FROM idempotency WHERE endpoint = $2
         UNION ALL
         SELECT h.account_id, h.idempotency_key, '' FROM hold h
          WHERE h.event_id = $1
            AND NOT EXISTS (SELECT 1 FROM idempotency i
                             WHERE i.account_id = h.account_id AND i.endpoint = $2
                               AND i.idem_key = h.idempotency_key)",
    )
    .bind(event_id)
    .bind(endpoint)
    .fetch_all(&mut conn)
    .await?
    .iter()
    .map(|row| Ok(((row.get(0)?, row.get(1)?), row.get(2)?)))
    .collect::<StoreResult<_>>()?;
    let waitlist = waitlist::load_entries(&mut conn, event_id).await?;
    let cancelled = crate::cancellation::is_cancelled(&mut conn, event_id).await?;
    let redemptions = if event.sale.phases.is_empty() {
        Vec::new()
    } else {
        crate::phase::load_redemptions(&mut conn, event_id).await?
    };
    tx.commit().await?;
    let snapshot = EngineSnapshot {
        version: u64::try_from(version).unwrap_or(0),
        writer_seq: u64::try_from(writer_seq).unwrap_or(0),
        seats,
        tiers,
        holds,
        keys,
        waitlist,
        waitlist_offer_ttl_s: event.waitlist_offer_ttl_s,
        cancelled,
        lanes: boxoffice_domain::phase::Lanes::new(event.sale.phases.clone(), redemptions),
    };
    Ok((snapshot, now))
}

/// The named seats, tiers and holds read again in one snapshot, with the holds of the seats
/// read and the live holds of the tiers.
pub async fn rows(
    db: &Db,
    event_id: &str,
    seat_ids: &[String],
    tier_ids: &[String],
    hold_ids: &[String],
) -> StoreResult<EngineRows> {
    let d = db.dialect();
    let mut tx = db.snapshot().await?;
    let mut conn = tx.conn();
    let seats = read(
        &mut conn,
        query(format!("{SEAT_SELECT} AND seat_id {}", d.in_list("$2")))
            .bind(event_id)
            .bind(seat_ids.to_vec()),
        seat_row,
    )
    .await?;
    let tiers = read(
        &mut conn,
        query(format!("{TIER_SELECT} AND tier_id {}", d.in_list("$2")))
            .bind(event_id)
            .bind(tier_ids.to_vec()),
        tier_row,
    )
    .await?;
    let mut named: Vec<String> = hold_ids.to_vec();
    named.extend(seats.iter().filter_map(|seat| seat.hold_id.clone()));
    named.sort_unstable();
    named.dedup();
    let holds = read(
        &mut conn,
        query(format!(
            "{HOLD_SELECT} WHERE event_id = $1
               AND (hold_id {named}
                    OR (tier_id {tiers} AND status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED')))",
            named = d.in_list("$2"),
            tiers = d.in_list("$3"),
        ))
        .bind(event_id)
        .bind(named)
        .bind(tier_ids.to_vec()),
        engine_hold,
    )
    .await?;
    tx.commit().await?;
    Ok(EngineRows {
        seats,
        tiers,
        holds,
    })
}
