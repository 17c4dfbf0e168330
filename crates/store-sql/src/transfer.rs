//! Ticket transfers (see `boxoffice_store::transfer` for the rules): an offer is one
//! transaction that locks the giver's order, then its tickets (on SQLite the writer's
//! `BEGIN IMMEDIATE` holds the file instead); an acceptance is written by the event writer's
//! group (each backend's `write_transfers`, until the group's writes move here).

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::LockedTicket;
use boxoffice_store::transfer::{
    OfferRefused, Offered, TransferOffer, TransferRole, TransferStatus, TransferView,
    ended_message, offer_conflict, offer_expires_at, offered_message, topic,
};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Dialect, Row, query};
use crate::outbox;

/// A transfer's columns, its status read by the store's clock.
fn transfer_columns(d: Dialect) -> String {
    format!(
        "transfer_id, event_id, order_id, from_account_id, to_account_id,
         CAST(ticket_ids AS text) AS ticket_ids,
         CASE WHEN status = 'OFFERED' AND expires_at <= {now} THEN 'EXPIRED' ELSE status END
           AS status,
         expires_at, new_order_id, created_at, updated_at",
        now = d.now()
    )
}

fn ticket_ids(raw: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(raw).map_err(|e| StoreError::Internal(format!("transfer ticket_ids: {e}")))
}

fn transfer_from_row(row: &Row) -> StoreResult<TransferView> {
    let status: String = row.get("status")?;
    Ok(TransferView {
        transfer_id: row.get("transfer_id")?,
        event_id: row.get("event_id")?,
        order_id: row.get("order_id")?,
        from_account_id: row.get("from_account_id")?,
        to_account_id: row.get("to_account_id")?,
        ticket_ids: ticket_ids(&row.get::<String, _>("ticket_ids")?)?,
        status: TransferStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("transfer status {status:?}")))?,
        expires_at: row.get("expires_at")?,
        new_order_id: row.get("new_order_id")?,
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

async fn load(conn: &mut Conn<'_>, transfer_id: &str) -> StoreResult<Option<TransferView>> {
    query(format!(
        "SELECT {} FROM transfer WHERE transfer_id = $1",
        transfer_columns(conn.dialect())
    ))
    .bind(transfer_id)
    .fetch_optional(conn)
    .await?
    .map(|row| transfer_from_row(&row))
    .transpose()
}

/// Offers tickets of a confirmed, captured order to another account, or says why not.
pub async fn offer(
    db: &Db,
    offer: &TransferOffer,
    closes_at: OffsetDateTime,
) -> StoreResult<Result<Offered, OfferRefused>> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let giver = offer.scope.account_id.as_str();
    // The key's earlier offer, whatever became of it since.
    let prior = query(format!(
        "SELECT {}, request_digest FROM transfer
          WHERE from_account_id = $1 AND idempotency_key = $2",
        transfer_columns(d)
    ))
    .bind(giver)
    .bind(&offer.scope.key)
    .fetch_optional(&mut tx.conn())
    .await?;
    if let Some(row) = prior {
        if row.get::<String, _>("request_digest")? != offer.request_digest {
            return Ok(Err(OfferRefused::KeyReused));
        }
        return Ok(Ok(Offered::Replayed(transfer_from_row(&row)?)));
    }
    // The order, locked: offers of one order are made one at a time.
    let order = query(format!(
        "SELECT o.status, o.account_id, p.status FROM orders o
           LEFT JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id = $1 AND o.event_id = $2 {}",
        d.lock("FOR UPDATE OF o")
    ))
    .bind(&offer.order_id)
    .bind(&offer.event_id)
    .fetch_optional(&mut tx.conn())
    .await?;
    let Some(order) = order else {
        return Ok(Err(OfferRefused::OrderNotFound));
    };
    let (status, account_id, payment): (String, String, Option<String>) =
        (order.get(0)?, order.get(1)?, order.get(2)?);
    if account_id != giver {
        return Ok(Err(OfferRefused::OrderNotFound));
    }
    if status != "CONFIRMED" {
        return Ok(Err(OfferRefused::Conflict(format!(
            "order {} is not confirmed",
            offer.order_id
        ))));
    }
    if payment.as_deref() != Some("CAPTURED") {
        return Ok(Err(OfferRefused::Conflict(
            "the order's payment is not captured yet; try again in a moment".into(),
        )));
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    if now >= closes_at {
        return Ok(Err(OfferRefused::Closed));
    }
    let tickets = query(format!(
        "SELECT ticket_id, order_id, status, exchange_id FROM ticket
          WHERE order_id = $1 ORDER BY ticket_id {}",
        d.lock("FOR SHARE")
    ))
    .bind(&offer.order_id)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| {
        Ok((
            row.get(0)?,
            LockedTicket {
                order_id: row.get(1)?,
                status: row.get(2)?,
                exchange_id: row.get(3)?,
            },
        ))
    })
    .collect::<StoreResult<BTreeMap<String, LockedTicket>>>()?;
    let mut offered = BTreeSet::new();
    let open = query(
        "SELECT CAST(ticket_ids AS text) FROM transfer
          WHERE order_id = $1 AND status = 'OFFERED' AND expires_at > $2",
    )
    .bind(&offer.order_id)
    .bind(now)
    .fetch_all(&mut tx.conn())
    .await?;
    for row in open {
        offered.extend(ticket_ids(&row.get::<String, _>(0)?)?);
    }
    if let Some(why) = offer_conflict(&offer.ticket_ids, &tickets, &offered) {
        return Ok(Err(OfferRefused::Conflict(why)));
    }
    let expires_at = offer_expires_at(now, closes_at);
    query(
        "INSERT INTO transfer (event_id, transfer_id, order_id, from_account_id, to_account_id,
                               ticket_ids, status, expires_at, idempotency_key, request_digest,
                               created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'OFFERED', $7, $8, $9, $10, $10)",
    )
    .bind(&offer.event_id)
    .bind(&offer.transfer_id)
    .bind(&offer.order_id)
    .bind(giver)
    .bind(&offer.to_account_id)
    .bind(serde_json::json!(offer.ticket_ids))
    .bind(expires_at)
    .bind(&offer.scope.key)
    .bind(&offer.request_digest)
    .bind(now)
    .execute(&mut tx.conn())
    .await?;
    let view = TransferView {
        transfer_id: offer.transfer_id.clone(),
        event_id: offer.event_id.clone(),
        order_id: offer.order_id.clone(),
        from_account_id: giver.to_owned(),
        to_account_id: offer.to_account_id.clone(),
        ticket_ids: offer.ticket_ids.clone(),
        status: TransferStatus::Offered,
        expires_at,
        new_order_id: None,
        created_at: now,
        updated_at: now,
    };
    outbox::insert(
        &mut tx.conn(),
        &offer.event_id,
        topic::TRANSFER_OFFERED,
        offered_message(&view),
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(Ok(Offered::Created(view)))
}

pub async fn get(db: &Db, transfer_id: &str) -> StoreResult<Option<TransferView>> {
    let mut pooled = db.read().await?;
    load(&mut pooled.conn(), transfer_id).await
}

/// An account's transfers given or received, newest first.
pub async fn list(
    db: &Db,
    account_id: &str,
    role: TransferRole,
    limit: u32,
) -> StoreResult<Vec<TransferView>> {
    let column = match role {
        TransferRole::Given => "from_account_id",
        TransferRole::Received => "to_account_id",
    };
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {} FROM transfer WHERE {column} = $1 ORDER BY transfer_id DESC LIMIT $2",
        transfer_columns(db.dialect())
    ))
    .bind(account_id)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(transfer_from_row)
    .collect()
}

/// Declines (the receiver) or withdraws (the giver) an open offer; `None` when the transfer
/// is not this account's to end.
pub async fn end(
    db: &Db,
    transfer_id: &str,
    account_id: &str,
    to: TransferStatus,
) -> StoreResult<Option<TransferView>> {
    let (party, message) = match to {
        TransferStatus::Declined => ("to_account_id", topic::TRANSFER_DECLINED),
        TransferStatus::Withdrawn => ("from_account_id", topic::TRANSFER_WITHDRAWN),
        other => {
            return Err(StoreError::Internal(format!(
                "a transfer does not end as {}",
                other.as_str()
            )));
        }
    };
    let mut tx = db.write().await?;
    let now = outbox::store_now(&mut tx.conn()).await?;
    let ended = query(format!(
        "UPDATE transfer SET status = $3, updated_at = $4
          WHERE transfer_id = $1 AND {party} = $2 AND status = 'OFFERED' AND expires_at > $4"
    ))
    .bind(transfer_id)
    .bind(account_id)
    .bind(to.as_str())
    .bind(now)
    .execute(&mut tx.conn())
    .await?;
    let Some(view) = load(&mut tx.conn(), transfer_id).await? else {
        return Ok(None);
    };
    let own = match to {
        TransferStatus::Declined => view.to_account_id == account_id,
        _ => view.from_account_id == account_id,
    };
    if !own {
        return Ok(None);
    }
    if ended == 1 {
        outbox::insert(
            &mut tx.conn(),
            &view.event_id,
            message,
            ended_message(&view),
            now,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Some(view))
}
