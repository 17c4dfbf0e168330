//! The transfers a group accepts, on SQLite (see `boxoffice_store::transfer` for the rules;
//! offers, reads and ends are `boxoffice_store_sql::transfer`'s). The group's `BEGIN IMMEDIATE`
//! transaction holds the file where PostgreSQL locks rows. Times are INTEGER unix
//! milliseconds from the store's clock; id lists are bound as JSON arrays.

use boxoffice_store::engine::{GroupWrite, LockedOrder, LockedTicket, mismatch};
use boxoffice_store::transfer::{
    LockedTransfer, TransferFacts, accepted_message, topic, transfers_refused,
};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::{Sqlite, Transaction};

use crate::checkout::outbox;
use crate::{classify, from_ms, json_list, to_ms};

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
