//! The door lists on PostgreSQL (see `boxoffice_store::door`).

use boxoffice_store::StoreResult;
use boxoffice_store::door::{DOOR_LIST_MAX, DoorLists, DoorStore};

use crate::{PgStore, classify};

#[async_trait::async_trait]
impl DoorStore for PgStore {
    async fn door_lists(&self, event_id: &str) -> StoreResult<DoorLists> {
        let rows = sqlx::query_as::<_, (String, String)>(
            "SELECT ticket_id, status FROM ticket
              WHERE event_id = $1 AND status IN ('VOIDED', 'CHECKED_IN')
              ORDER BY ticket_id LIMIT $2",
        )
        .bind(event_id)
        .bind(i64::from(DOOR_LIST_MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let mut lists = DoorLists::default();
        for (ticket_id, status) in rows {
            if status == "VOIDED" {
                lists.revoked.push(ticket_id);
            } else {
                lists.checked_in.push(ticket_id);
            }
        }
        Ok(lists)
    }
}
