//! A hold as the API shows it ([`HoldView`]), read by id.

use boxoffice_store::{HoldView, StoreResult, parse_held_seats, parse_hold_status};

use crate::db::{Conn, Db, Row, query};

/// The hold columns [`hold_from_row`] reads.
pub const HOLD_COLUMNS: &str = "hold_id, event_id, account_id, status, expires_at,
     CAST(seats AS text) AS seats, tier_id, quantity, total_minor, currency, created_at,
     updated_at";

pub fn hold_from_row(row: &Row) -> StoreResult<HoldView> {
    Ok(HoldView {
        hold_id: row.get("hold_id")?,
        event_id: row.get("event_id")?,
        account_id: row.get("account_id")?,
        status: parse_hold_status(&row.get::<String, _>("status")?)?,
        expires_at: row.get("expires_at")?,
        seats: parse_held_seats(&row.get::<String, _>("seats")?)?,
        tier_id: row.get("tier_id")?,
        quantity: u32::try_from(row.get::<i32, _>("quantity")?).unwrap_or(0),
        total_minor: row.get("total_minor")?,
        currency: row.get("currency")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

/// One hold.
pub async fn get(db: &Db, hold_id: &str) -> StoreResult<Option<HoldView>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = $1"
    ))
    .bind(hold_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| hold_from_row(&row))
    .transpose()
}

/// One hold that a write transaction knows exists, its row locked where rows are
/// (PostgreSQL; SQLite's write transaction holds the file).
pub async fn for_update(conn: &mut Conn<'_>, hold_id: &str) -> StoreResult<HoldView> {
    let lock = conn.dialect().lock("FOR UPDATE");
    let row = query(format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = $1 {lock}"
    ))
    .bind(hold_id)
    .fetch_one(conn)
    .await?;
    hold_from_row(&row)
}

/// The holds of `hold_ids`, ordered by event and hold id.
pub async fn many(conn: &mut Conn<'_>, hold_ids: &[String]) -> StoreResult<Vec<HoldView>> {
    let d = conn.dialect();
    query(format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id {} ORDER BY event_id, hold_id",
        d.in_list("$1"),
    ))
    .bind(hold_ids.to_vec())
    .fetch_all(conn)
    .await?
    .iter()
    .map(hold_from_row)
    .collect()
}
