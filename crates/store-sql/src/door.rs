//! The door lists (see `boxoffice_store::door`).

use boxoffice_store::StoreResult;
use boxoffice_store::door::{DOOR_LIST_MAX, DoorLists};

use crate::db::{Db, query};

/// The event's voided and checked-in tickets, at most [`DOOR_LIST_MAX`].
pub async fn lists(db: &Db, event_id: &str) -> StoreResult<DoorLists> {
    let mut pooled = db.read().await?;
    let rows = query(
        "SELECT ticket_id, status FROM ticket
          WHERE event_id = $1 AND status IN ('VOIDED', 'CHECKED_IN')
          ORDER BY ticket_id LIMIT $2",
    )
    .bind(event_id)
    .bind(DOOR_LIST_MAX)
    .fetch_all(&mut pooled.conn())
    .await?;
    let mut lists = DoorLists::default();
    for row in rows {
        let ticket_id: String = row.get(0)?;
        if row.get::<String, _>(1)? == "VOIDED" {
            lists.revoked.push(ticket_id);
        } else {
            lists.checked_in.push(ticket_id);
        }
    }
    lists.holders = query(
        "SELECT ticket_id, holder_name FROM ticket
          WHERE event_id = $1 AND status = 'VALID' AND holder_name IS NOT NULL
          ORDER BY ticket_id LIMIT $2",
    )
    .bind(event_id)
    .bind(DOOR_LIST_MAX)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| Ok((row.get(0)?, row.get(1)?)))
    .collect::<StoreResult<_>>()?;
    Ok(lists)
}
