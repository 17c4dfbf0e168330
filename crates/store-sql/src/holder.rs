//! Ticket holders (see `boxoffice_store::holder`): a hold's holders before its checkout, a
//! ticket's holder changed by its owner. Issuance copies a hold's holders onto its tickets
//! (`checkout::issue_tickets`).

use boxoffice_domain::holder::HolderDetails;
use boxoffice_store::StoreResult;
use boxoffice_store::holder::{
    HoldHolder, HoldHoldersSet, HolderSlot, TicketHolderSet, answers_json, details_of,
};

use crate::checkout::ticket_from_row;
use crate::db::{Db, Rows, query};
use crate::outbox;

/// The hold's holders, in slot order.
pub async fn hold_holders(db: &Db, event_id: &str, hold_id: &str) -> StoreResult<Vec<HoldHolder>> {
    let rows = query(
        "SELECT slot, name, answers FROM hold_holder
          WHERE event_id = $1 AND hold_id = $2 ORDER BY slot",
    )
    .bind(event_id)
    .bind(hold_id)
    .fetch_all(&mut db.read().await?.conn())
    .await?;
    rows.iter()
        .map(|row| {
            let answers: String = row.get(2)?;
            Ok(HoldHolder {
                slot: HolderSlot::parse(&row.get::<String, _>(0)?),
                details: details_of(row.get(1)?, Some(&answers)).unwrap_or_default(),
            })
        })
        .collect()
}

/// Replaces the hold's holders in one transaction, if the hold is the account's and still
/// `HELD` by the store's clock (the hold row locked on PostgreSQL, so a checkout's group
/// that changes it waits for this, or this for it).
pub async fn set_hold_holders(
    db: &Db,
    event_id: &str,
    hold_id: &str,
    account_id: &str,
    holders: &[HoldHolder],
) -> StoreResult<HoldHoldersSet> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let now = outbox::store_now(&mut tx.conn()).await?;
    let Some(row) = query(format!(
        "SELECT account_id, status, expires_at FROM hold
          WHERE event_id = $1 AND hold_id = $2 {}",
        d.lock("FOR UPDATE")
    ))
    .bind(event_id)
    .bind(hold_id)
    .fetch_optional(&mut tx.conn())
    .await?
    else {
        return Ok(HoldHoldersSet::NotFound);
    };
    if row.get::<String, _>(0)? != account_id {
        return Ok(HoldHoldersSet::NotFound);
    }
    let status: String = row.get(1)?;
    let expires_at: boxoffice_domain::OffsetDateTime = row.get(2)?;
    if status != "HELD" {
        return Ok(HoldHoldersSet::NotOpen(status));
    }
    if expires_at <= now {
        return Ok(HoldHoldersSet::NotOpen("EXPIRED".into()));
    }
    query("DELETE FROM hold_holder WHERE event_id = $1 AND hold_id = $2")
        .bind(event_id)
        .bind(hold_id)
        .execute(&mut tx.conn())
        .await?;
    if !holders.is_empty() {
        let rows = Rows::new()
            .texts("slot", holders.iter().map(|h| h.slot.key()))
            .opt_texts("name", holders.iter().map(|h| h.details.name.clone()))
            .texts("answers", holders.iter().map(|h| answers_json(&h.details)));
        query(format!(
            "INSERT INTO hold_holder (event_id, hold_id, slot, name, answers, updated_at)
             SELECT $1, $2, u.slot, u.name, u.answers, {now} FROM {u}",
            now = d.now_ms(),
            u = rows.table(d, 3, "u"),
        ))
        .bind(event_id)
        .bind(hold_id)
        .bind_rows(d, rows)
        .execute(&mut tx.conn())
        .await?;
    }
    tx.commit().await?;
    let mut stored = holders.to_vec();
    stored.sort_by_key(|h| h.slot.key());
    Ok(HoldHoldersSet::Set(stored))
}

/// Sets a ticket's holder: one conditional update on the ticket row (the account's, `VALID`)
/// in a transaction that read the store's clock against the event's start minus the cutoff.
pub async fn set_ticket_holder(
    db: &Db,
    event_id: &str,
    ticket_id: &str,
    account_id: &str,
    details: &HolderDetails,
    change_cutoff_s: u32,
) -> StoreResult<TicketHolderSet> {
    let mut tx = db.write().await?;
    let now = outbox::store_now(&mut tx.conn()).await?;
    let Some(row) = query(
        "SELECT t.account_id, t.status, e.starts_at FROM ticket t
           JOIN event e ON e.event_id = t.event_id
          WHERE t.event_id = $1 AND t.ticket_id = $2",
    )
    .bind(event_id)
    .bind(ticket_id)
    .fetch_optional(&mut tx.conn())
    .await?
    else {
        return Ok(TicketHolderSet::NotFound);
    };
    if row.get::<String, _>(0)? != account_id {
        return Ok(TicketHolderSet::NotFound);
    }
    if row.get::<String, _>(1)? != "VALID" {
        return Ok(TicketHolderSet::NotValid);
    }
    let starts_at: boxoffice_domain::OffsetDateTime = row.get(2)?;
    if now >= starts_at - time::Duration::seconds(i64::from(change_cutoff_s)) {
        return Ok(TicketHolderSet::Closed);
    }
    let changed = query(
        "UPDATE ticket SET holder_name = $4, holder_answers = $5
          WHERE event_id = $1 AND ticket_id = $2 AND account_id = $3 AND status = 'VALID'",
    )
    .bind(event_id)
    .bind(ticket_id)
    .bind(account_id)
    .bind(details.name.clone())
    .bind(answers_json(details))
    .execute(&mut tx.conn())
    .await?;
    if changed != 1 {
        // Voided or checked in since the read (SQLite cannot get here: its write
        // transaction holds the file).
        return Ok(TicketHolderSet::NotValid);
    }
    let ticket = query("SELECT * FROM ticket WHERE event_id = $1 AND ticket_id = $2")
        .bind(event_id)
        .bind(ticket_id)
        .fetch_one(&mut tx.conn())
        .await?;
    let ticket = ticket_from_row(&ticket)?;
    tx.commit().await?;
    Ok(TicketHolderSet::Set(Box::new(ticket)))
}
