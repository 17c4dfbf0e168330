//! Ticket transfers on SQLite (see `boxoffice_store::transfer` for the rules). Mirrors the
//! PostgreSQL backend statement for statement; where that one locks rows `FOR UPDATE`, every
//! write here runs in a `BEGIN IMMEDIATE` transaction on the single writer connection. Times
//! are INTEGER unix milliseconds from the store's clock; id lists are bound as JSON arrays.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::{GroupWrite, LockedOrder, LockedTicket, mismatch};
use boxoffice_store::transfer::{
    LockedTransfer, OfferRefused, Offered, TransferFacts, TransferOffer, TransferRole,
    TransferStatus, TransferStore, TransferView, accepted_message, ended_message, offer_conflict,
    offer_expires_at, offered_message, topic, transfers_refused,
};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, Transaction};

use crate::checkout::outbox;
use crate::{SqliteStore, begin_write, classify, column, from_ms, json_list, store_now, to_ms};

/// A transfer's columns, its status read by the store's clock.
const TRANSFER_COLUMNS: &str = concat!(
    "transfer_id, event_id, order_id, from_account_id, to_account_id, ticket_ids,
     CASE WHEN status = 'OFFERED' AND expires_at <= ",
    now_ms!(),
    " THEN 'EXPIRED' ELSE status END AS status,
     expires_at, new_order_id, created_at, updated_at"
);

fn transfer_from_row(row: &SqliteRow) -> StoreResult<TransferView> {
    let status: String = column(row, "status")?;
    let ticket_ids: String = column(row, "ticket_ids")?;
    Ok(TransferView {
        transfer_id: column(row, "transfer_id")?,
        event_id: column(row, "event_id")?,
        order_id: column(row, "order_id")?,
        from_account_id: column(row, "from_account_id")?,
        to_account_id: column(row, "to_account_id")?,
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("transfer ticket_ids: {e}")))?,
        status: TransferStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("transfer status {status:?}")))?,
        expires_at: from_ms(column(row, "expires_at")?)?,
        new_order_id: column(row, "new_order_id")?,
        created_at: from_ms(column(row, "created_at")?)?,
        updated_at: from_ms(column(row, "updated_at")?)?,
    })
}

async fn load_transfer(
    conn: &mut sqlx::SqliteConnection,
    transfer_id: &str,
) -> StoreResult<Option<TransferView>> {
    let sql = format!("SELECT {TRANSFER_COLUMNS} FROM transfer WHERE transfer_id = ?1");
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(transfer_id)
        .fetch_optional(conn)
        .await
        .map_err(classify)?
        .map(|row| transfer_from_row(&row))
        .transpose()
}

#[async_trait::async_trait]
impl TransferStore for SqliteStore {
    async fn offer_transfer(
        &self,
        offer: &TransferOffer,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<Offered, OfferRefused>> {
        let mut tx = begin_write(&self.writer).await?;
        let giver = offer.scope.account_id.as_str();
        let sql = format!(
            "SELECT {TRANSFER_COLUMNS}, request_digest FROM transfer
              WHERE from_account_id = ?1 AND idempotency_key = ?2"
        );
        if let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(giver)
            .bind(&offer.scope.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
        {
            let digest: String = column(&row, "request_digest")?;
            if digest != offer.request_digest {
                return Ok(Err(OfferRefused::KeyReused));
            }
            return Ok(Ok(Offered::Replayed(transfer_from_row(&row)?)));
        }
        let order = sqlx::query_as::<_, (String, String, Option<String>)>(
            "SELECT o.status, o.account_id, p.status FROM orders o
               LEFT JOIN payment_operation p ON p.order_id = o.order_id
              WHERE o.order_id = ?1 AND o.event_id = ?2",
        )
        .bind(&offer.order_id)
        .bind(&offer.event_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        let Some((status, account_id, payment)) = order else {
            return Ok(Err(OfferRefused::OrderNotFound));
        };
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
        let now = store_now(&mut tx).await?;
        if now >= closes_at {
            return Ok(Err(OfferRefused::Closed));
        }
        let tickets: BTreeMap<String, LockedTicket> =
            sqlx::query_as::<_, (String, String, String, Option<String>)>(
                "SELECT ticket_id, order_id, status, exchange_id FROM ticket WHERE order_id = ?1",
            )
            .bind(&offer.order_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(|(ticket_id, order_id, status, exchange_id)| {
                (
                    ticket_id,
                    LockedTicket {
                        order_id,
                        status,
                        exchange_id,
                    },
                )
            })
            .collect();
        let open: Vec<String> = sqlx::query_scalar(
            "SELECT ticket_ids FROM transfer
              WHERE order_id = ?1 AND status = 'OFFERED' AND expires_at > ?2",
        )
        .bind(&offer.order_id)
        .bind(to_ms(now))
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let mut offered = BTreeSet::new();
        for ids in open {
            let ids: Vec<String> = serde_json::from_str(&ids)
                .map_err(|e| StoreError::Internal(format!("transfer ticket_ids: {e}")))?;
            offered.extend(ids);
        }
        if let Some(why) = offer_conflict(&offer.ticket_ids, &tickets, &offered) {
            return Ok(Err(OfferRefused::Conflict(why)));
        }
        let expires_at = offer_expires_at(now, closes_at);
        sqlx::query(
            "INSERT INTO transfer (event_id, transfer_id, order_id, from_account_id, to_account_id, ticket_ids,
                                   status, expires_at, idempotency_key, request_digest, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'OFFERED', ?7, ?8, ?9, ?10, ?10)",
        )
        .bind(&offer.event_id)
        .bind(&offer.transfer_id)
        .bind(&offer.order_id)
        .bind(giver)
        .bind(&offer.to_account_id)
        .bind(json_list(&offer.ticket_ids))
        .bind(to_ms(expires_at))
        .bind(&offer.scope.key)
        .bind(&offer.request_digest)
        .bind(to_ms(now))
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
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
        outbox(
            &mut tx,
            &offer.event_id,
            topic::TRANSFER_OFFERED,
            offered_message(&view),
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Ok(Offered::Created(view)))
    }

    async fn get_transfer(&self, transfer_id: &str) -> StoreResult<Option<TransferView>> {
        let mut conn = self.reader.acquire().await.map_err(classify)?;
        load_transfer(&mut conn, transfer_id).await
    }

    async fn list_transfers(
        &self,
        account_id: &str,
        role: TransferRole,
        limit: u32,
    ) -> StoreResult<Vec<TransferView>> {
        let column_name = match role {
            TransferRole::Given => "from_account_id",
            TransferRole::Received => "to_account_id",
        };
        let sql = format!(
            "SELECT {TRANSFER_COLUMNS} FROM transfer WHERE {column_name} = ?1
              ORDER BY transfer_id DESC LIMIT ?2"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(account_id)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await
            .map_err(classify)?
            .iter()
            .map(transfer_from_row)
            .collect()
    }

    async fn end_transfer(
        &self,
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
        let mut tx = begin_write(&self.writer).await?;
        let now = store_now(&mut tx).await?;
        let sql = format!(
            "UPDATE transfer SET status = ?3, updated_at = ?4
              WHERE transfer_id = ?1 AND {party} = ?2 AND status = 'OFFERED' AND expires_at > ?4"
        );
        let ended = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(transfer_id)
            .bind(account_id)
            .bind(to.as_str())
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await
            .map_err(classify)?
            .rows_affected();
        let Some(view) = load_transfer(&mut tx, transfer_id).await? else {
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
            outbox(&mut tx, &view.event_id, message, ended_message(&view), now).await?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(Some(view))
    }
}

/// The transfers a group accepts, written in its transaction after its exchanges (see
/// `boxoffice_store::transfer::TransferWrite`): judged on the offers, the giver's orders with
/// their payments, and the tickets as read now; any changed since the route read them refuses
/// that transfer alone. Returns the command indexes refused.
pub(crate) async fn write_transfers(
    tx: &mut Transaction<'_, Sqlite>,
    group: &GroupWrite<'_>,
) -> StoreResult<Vec<usize>> {
    if group.transfers.is_empty() && group.effects.transfers.is_empty() {
        return Ok(Vec::new());
    }
    let (transfer_ids, order_ids, ticket_ids) = group.transfer_rows()?;
    let mut facts = TransferFacts::default();
    let transfers = sqlx::query_as::<_, (String, String, i64, String, String, String)>(
        "SELECT transfer_id, status, expires_at, order_id, from_account_id, to_account_id
           FROM transfer WHERE transfer_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_list(&transfer_ids))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (transfer_id, status, expires_at, order_id, from_account_id, to_account_id) in transfers {
        facts.transfers.insert(
            transfer_id,
            LockedTransfer {
                status,
                expires_at: from_ms(expires_at)?,
                order_id,
                from_account_id,
                to_account_id,
            },
        );
    }
    let orders = sqlx::query_as::<_, (String, String, String, String, String, Option<String>)>(
        "SELECT o.order_id, o.status, o.account_id, o.event_id, o.hold_id, p.status FROM orders o
           LEFT JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_list(&order_ids))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (order_id, status, account_id, event_id, hold_id, payment) in orders {
        if payment.as_deref() == Some("CAPTURED") {
            facts.captured.insert(order_id.clone());
        }
        facts.orders.insert(
            order_id,
            LockedOrder {
                status,
                account_id,
                event_id,
                hold_id,
            },
        );
    }
    let tickets = sqlx::query_as::<_, (String, String, String, Option<String>)>(
        "SELECT ticket_id, order_id, status, exchange_id FROM ticket
          WHERE ticket_id IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_list(&ticket_ids))
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (ticket_id, order_id, status, exchange_id) in tickets {
        facts.tickets.insert(
            ticket_id,
            LockedTicket {
                order_id,
                status,
                exchange_id,
            },
        );
    }
    let refused = transfers_refused(&group.transfers, facts, group.now);
    let plans = group.transfer_plans(&refused);
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    let now_ms = to_ms(now);
    for (taken, write) in &plans {
        let offer = &write.transfer;
        let accepted = sqlx::query(
            "UPDATE transfer SET status = 'ACCEPTED', new_order_id = ?2, updated_at = ?3
              WHERE transfer_id = ?1 AND status = 'OFFERED'",
        )
        .bind(&offer.transfer_id)
        .bind(&write.new_order_id)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if accepted != 1 {
            return Err(mismatch("transfer still offered", 1, accepted));
        }
        let voided = sqlx::query(
            "UPDATE ticket SET status = 'VOIDED', transfer_id = ?2
              WHERE ticket_id IN (SELECT value FROM json_each(?1))
                AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(json_list(&offer.ticket_ids))
        .bind(&offer.transfer_id)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if voided != offer.ticket_ids.len() as u64 {
            return Err(mismatch(
                "tickets still valid",
                offer.ticket_ids.len(),
                voided,
            ));
        }
        let counted = sqlx::query(
            "UPDATE hold SET exchanged_out = exchanged_out + ?2, updated_at = ?3
              WHERE hold_id = ?1 AND status = 'CONFIRMED' AND quantity - exchanged_out >= ?2",
        )
        .bind(&taken.old_hold_id)
        .bind(i64::from(taken.quantity()))
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if counted != 1 {
            return Err(mismatch(
                "giver's hold still confirmed with the units",
                1,
                counted,
            ));
        }
        let seats =
            serde_json::to_string(&write.seats).map_err(|e| StoreError::Internal(e.to_string()))?;
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at, order_id)
             VALUES (?1, ?2, ?3, 'CONFIRMED', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?10, ?11)",
        )
        .bind(event_id)
        .bind(&taken.new_hold_id)
        .bind(&taken.to_account_id)
        .bind(&write.tier_id)
        .bind(i64::from(write.quantity))
        .bind(&seats)
        .bind(write.total_minor)
        .bind(&write.currency)
        .bind(format!("transfer:{}", offer.transfer_id))
        .bind(now_ms)
        .bind(&write.new_order_id)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        if !taken.seat_ids.is_empty() {
            let moved = sqlx::query(
                "UPDATE seat SET hold_id = ?3, order_id = ?5, version = version + 1
                  WHERE event_id = ?1 AND seat_id IN (SELECT value FROM json_each(?2))
                    AND status = 'SOLD' AND hold_id = ?4",
            )
            .bind(event_id)
            .bind(json_list(&taken.seat_ids))
            .bind(&taken.new_hold_id)
            .bind(&taken.old_hold_id)
            .bind(&write.new_order_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?
            .rows_affected();
            if moved != taken.seat_ids.len() as u64 {
                return Err(mismatch(
                    "seats still sold by the giver",
                    taken.seat_ids.len(),
                    moved,
                ));
            }
        }
        sqlx::query(
            "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                                 currency, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'CONFIRMED', ?5, ?6, ?7, ?8, ?9, ?10, ?10)",
        )
        .bind(event_id)
        .bind(&write.new_order_id)
        .bind(&taken.new_hold_id)
        .bind(&taken.to_account_id)
        .bind(&seats)
        .bind(&write.tier_id)
        .bind(i64::from(write.quantity))
        .bind(write.total_minor)
        .bind(&write.currency)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        sqlx::query(
            "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                            amount_minor, currency, next_attempt_at, created_at, updated_at)
             VALUES (?1, ?2, ?3, 'transfer', ?4, 'CAPTURED', 0, ?5, ?6, ?6, ?6)",
        )
        .bind(event_id)
        .bind(&write.operation_id)
        .bind(&write.new_order_id)
        .bind(format!("transfer:{}", offer.transfer_id))
        .bind(&write.currency)
        .bind(now_ms)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        for ticket in &write.new_tickets {
            sqlx::query(
                "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'VALID', ?9)",
            )
            .bind(event_id)
            .bind(&ticket.draft.ticket_id)
            .bind(&ticket.draft.order_id)
            .bind(&taken.to_account_id)
            .bind(&ticket.draft.seat_id)
            .bind(&ticket.draft.tier_id)
            .bind(i64::from(ticket.draft.unit))
            .bind(&ticket.code)
            .bind(now_ms)
            .execute(&mut **tx)
            .await
            .map_err(classify)?;
        }
        outbox(
            tx,
            event_id,
            topic::TRANSFER_ACCEPTED,
            accepted_message(write),
            now,
        )
        .await?;
    }
    Ok(refused)
}
