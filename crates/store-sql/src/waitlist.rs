//! The waiting list (see `boxoffice_store::waitlist`): the entries a writer loads with its
//! engine, what a group writes of the list, and an entry's reading.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::WaitEntry;
use boxoffice_store::engine::GroupWrite;
use boxoffice_store::waitlist::{WAITLIST_OFFERED, WaitlistStatus, WaitlistView, offered_message};
use boxoffice_store::{StoreError, StoreResult, held_seats_json};

use crate::db::{Conn, Db, Rows, query};
use crate::outbox;

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

/// What a group writes of the list: new entries, entries left, offers (the hold rows — their
/// seats are taken with the group's other new holds — and the entries `OFFERED`), and offered
/// entries whose holds the group ended or sold. Every change of an entry is conditional on
/// its status and counted, except the last, which may find an entry moved on already.
pub async fn write(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let d = conn.dialect();
    let effects = group.effects;
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    let joined: Vec<_> = effects.waitlist_joined().collect();
    if !joined.is_empty() {
        let rows = Rows::new()
            .texts("waitlist_id", joined.iter().map(|e| e.waitlist_id.as_str()))
            .texts("account_id", joined.iter().map(|e| e.account_id.as_str()))
            .ints(
                "seq",
                joined
                    .iter()
                    .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX)),
            )
            .int4s(
                "quantity",
                joined
                    .iter()
                    .map(|e| i32::try_from(e.quantity).unwrap_or(i32::MAX)),
            )
            .opt_texts("section", joined.iter().map(|e| e.section.clone()))
            .opt_ints("max_price_minor", joined.iter().map(|e| e.max_price_minor))
            .bools("together", joined.iter().map(|e| e.together))
            .texts(
                "offer_hold_id",
                joined.iter().map(|e| e.offer_hold_id.as_str()),
            )
            .texts(
                "idempotency_key",
                joined.iter().map(|e| e.idempotency_key.as_str()),
            )
            .texts(
                "request_digest",
                joined.iter().map(|e| e.request_digest.as_str()),
            );
        query(format!(
            "INSERT INTO waitlist (event_id, waitlist_id, account_id, seq, quantity, section,
                                   max_price_minor, together, offer_hold_id, idempotency_key,
                                   request_digest, status, created_at, updated_at)
             SELECT $1, u.waitlist_id, u.account_id, u.seq, u.quantity, u.section,
                    u.max_price_minor, u.together, u.offer_hold_id, u.idempotency_key,
                    u.request_digest, 'WAITING', $2, $2
               FROM {}",
            rows.table(d, 3, "u")
        ))
        .bind(event_id)
        .bind(now)
        .bind_rows(d, rows)
        .execute(conn)
        .await?;
    }
    let left_ids: Vec<&str> = effects.waitlist_left().collect();
    if !left_ids.is_empty() {
        query(format!(
            "UPDATE waitlist SET status = 'LEFT', updated_at = $3
              WHERE event_id = $1 AND waitlist_id {} AND status = 'WAITING'",
            d.in_list("$2")
        ))
        .bind(event_id)
        .bind(left_ids.clone())
        .bind(now)
        .execute_exactly(conn, left_ids.len(), "waiting entries left")
        .await?;
    }
    let offers: Vec<_> = effects.waitlist_offers().collect();
    if !offers.is_empty() {
        let rows = Rows::new()
            .texts("hold_id", offers.iter().map(|o| o.hold.hold_id.as_str()))
            .texts(
                "account_id",
                offers.iter().map(|o| o.hold.account_id.as_str()),
            )
            .int4s(
                "quantity",
                offers
                    .iter()
                    .map(|o| i32::try_from(o.hold.quantity).unwrap_or(i32::MAX)),
            )
            .texts(
                "seats",
                offers.iter().map(|o| held_seats_json(&o.hold.seats)),
            )
            .ints("total_minor", offers.iter().map(|o| o.hold.total_minor))
            .texts(
                "idempotency_key",
                offers.iter().map(|o| format!("waitlist:{}", o.waitlist_id)),
            )
            .times("expires_at", offers.iter().map(|o| o.hold.expires_at));
        query(format!(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats,
                               total_minor, currency, idempotency_key, created_at, expires_at,
                               updated_at)
             SELECT $1, u.hold_id, u.account_id, 'HELD', NULL, u.quantity, {seats},
                    u.total_minor, $2, u.idempotency_key, $3, u.expires_at, $3
               FROM {rows}",
            seats = d.json("u.seats"),
            rows = rows.table(d, 4, "u"),
        ))
        .bind(event_id)
        .bind(&group.event.currency)
        .bind(now)
        .bind_rows(d, rows)
        .execute_exactly(conn, offers.len(), "offer holds")
        .await?;
        query(format!(
            "UPDATE waitlist SET status = 'OFFERED', updated_at = $3
              WHERE event_id = $1 AND waitlist_id {} AND status = 'WAITING'",
            d.in_list("$2")
        ))
        .bind(event_id)
        .bind(
            offers
                .iter()
                .map(|o| o.waitlist_id.clone())
                .collect::<Vec<_>>(),
        )
        .bind(now)
        .execute_exactly(conn, offers.len(), "waiting entries offered")
        .await?;
        let messages: Vec<(&str, &str, serde_json::Value)> = offers
            .iter()
            .map(|o| (event_id, WAITLIST_OFFERED, offered_message(event_id, o)))
            .collect();
        outbox::insert_many(conn, &messages, now).await?;
    }
    let lapsed: Vec<&str> = effects.waitlist_lapsed().collect();
    let purchased: Vec<&str> = effects.waitlist_purchased().collect();
    for (holds, status) in [(lapsed, "LAPSED"), (purchased, "PURCHASED")] {
        if holds.is_empty() {
            continue;
        }
        query(format!(
            "UPDATE waitlist SET status = $3, updated_at = $4
              WHERE offer_hold_id {} AND event_id = $1 AND status = 'OFFERED'",
            d.in_list("$2")
        ))
        .bind(event_id)
        .bind(holds)
        .bind(status)
        .bind(now)
        .execute(conn)
        .await?;
    }
    Ok(())
}
