//! The waiting list's reads (see `boxoffice_store::waitlist`): the entries a writer loads
//! with its engine, and an entry's reading. What a group writes of the list is the group's
//! (each backend's `engine.rs` until it moves here).

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::WaitEntry;
use boxoffice_store::waitlist::{WaitlistStatus, WaitlistView};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, query};

/// The event's live entries (waiting, and offered: the engine judges whether the offer's hold
/// is still live), in order.
pub async fn load_entries(conn: &mut Conn<'_>, event_id: &str) -> StoreResult<Vec<WaitEntry>> {
    query(
        "SELECT waitlist_id, account_id, seq, quantity, section, max_price_minor, together,
                offer_hold_id, status, idempotency_key, request_digest
           FROM waitlist WHERE event_id = $1 AND status IN ('WAITING', 'OFFERED') ORDER BY seq",
    )
    .bind(event_id)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| {
        Ok(WaitEntry {
            waitlist_id: row.get(0)?,
            account_id: row.get(1)?,
            seq: u64::try_from(row.get::<i64, _>(2)?).unwrap_or(0),
            quantity: u32::try_from(row.get::<i32, _>(3)?).unwrap_or(0),
            section: row.get(4)?,
            max_price_minor: row.get(5)?,
            together: row.get(6)?,
            offer_hold_id: row.get(7)?,
            offered: row.get::<String, _>(8)? == "OFFERED",
            idempotency_key: row.get(9)?,
            request_digest: row.get(10)?,
        })
    })
    .collect()
}

/// An entry with its place among the waiting entries and, once offered, its offer's status
/// as the hold says.
pub async fn entry(db: &Db, waitlist_id: &str) -> StoreResult<Option<WaitlistView>> {
    let mut pooled = db.read().await?;
    let row = query(format!(
        "SELECT w.waitlist_id, w.event_id, w.account_id, w.quantity, w.section, w.max_price_minor,
                w.together, w.status, w.offer_hold_id, w.created_at, w.updated_at,
                w.idempotency_key, w.request_digest,
                h.status AS hold_status, h.expires_at AS hold_expires_at, {now} AS now,
                CASE WHEN w.status = 'WAITING'
                     THEN (SELECT count(*) FROM waitlist o
                            WHERE o.event_id = w.event_id AND o.status = 'WAITING' AND o.seq <= w.seq)
                END AS position
           FROM waitlist w LEFT JOIN hold h ON h.hold_id = w.offer_hold_id
          WHERE w.waitlist_id = $1",
        now = db.dialect().now_ms(),
    ))
    .bind(waitlist_id)
    .fetch_optional(&mut pooled.conn())
    .await?;
    let Some(row) = row else { return Ok(None) };
    let stored: String = row.get("status")?;
    let status = WaitlistStatus::parse(&stored)
        .ok_or_else(|| StoreError::Internal(format!("waitlist status {stored:?}")))?;
    let hold_status: Option<String> = row.get("hold_status")?;
    let hold_expires_at: Option<OffsetDateTime> = row.get("hold_expires_at")?;
    let now: OffsetDateTime = row.get("now")?;
    let status = match (status, &hold_status, hold_expires_at) {
        (WaitlistStatus::Offered, Some(hold), Some(at)) => WaitlistStatus::of_offer(hold, at, now),
        (status, _, _) => status,
    };
    let position: Option<i64> = row.get("position")?;
    Ok(Some(WaitlistView {
        waitlist_id: row.get("waitlist_id")?,
        event_id: row.get("event_id")?,
        account_id: row.get("account_id")?,
        quantity: u32::try_from(row.get::<i32, _>("quantity")?).unwrap_or(0),
        section: row.get("section")?,
        max_price_minor: row.get("max_price_minor")?,
        together: row.get("together")?,
        idempotency_key: row.get("idempotency_key")?,
        request_digest: row.get("request_digest")?,
        status,
        position: position.and_then(|p| u32::try_from(p).ok()),
        hold_id: match hold_status {
            Some(_) => Some(row.get("offer_hold_id")?),
            None => None,
        },
        offer_expires_at: hold_expires_at,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    }))
}
