//! The transfers a group accepts, on PostgreSQL (see `boxoffice_store::transfer` for the rules;
//! offers, reads and ends are `boxoffice_store_sql::transfer`'s): written by the event writer's
//! group after it locked the event's seats: then the offers, the orders, the tickets.

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::{GroupWrite, LockedOrder, LockedTicket, mismatch};
use boxoffice_store::transfer::{
    LockedTransfer, TransferFacts, accepted_message, topic, transfers_refused,
};
use boxoffice_store::{StoreError, StoreResult};
use sqlx::{Postgres, Transaction};

use crate::checkout::outbox_many;
use crate::classify;

/// The transfers a group accepts, written in its transaction after its exchanges (see
/// `boxoffice_store::transfer::TransferWrite`). The offers, the giver's orders (with their
/// payments) and the tickets are locked and judged: any changed since the route read them
/// refuses that transfer alone. Returns the command indexes refused.
pub(crate) async fn write_transfers(
    tx: &mut Transaction<'_, Postgres>,
    group: &GroupWrite<'_>,
) -> StoreResult<Vec<usize>> {
    if group.transfers.is_empty() && group.effects.transfers.is_empty() {
        return Ok(Vec::new());
    }
    let (transfer_ids, order_ids, ticket_ids) = group.transfer_rows()?;
    let mut facts = TransferFacts::default();
    let transfers = sqlx::query_as::<_, (String, String, OffsetDateTime, String, String, String)>(
        "SELECT transfer_id, status, expires_at, order_id, from_account_id, to_account_id
           FROM transfer WHERE transfer_id = ANY($1) ORDER BY transfer_id FOR UPDATE",
    )
    .bind(&transfer_ids)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (transfer_id, status, expires_at, order_id, from_account_id, to_account_id) in transfers {
        facts.transfers.insert(
            transfer_id,
            LockedTransfer {
                status,
                expires_at,
                order_id,
                from_account_id,
                to_account_id,
            },
        );
    }
    let orders = sqlx::query_as::<_, (String, String, String, String, String, Option<String>)>(
        "SELECT o.order_id, o.status, o.account_id, o.event_id, o.hold_id, p.status FROM orders o
           LEFT JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id = ANY($1) ORDER BY o.order_id FOR UPDATE OF o",
    )
    .bind(&order_ids)
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
          WHERE ticket_id = ANY($1) ORDER BY ticket_id FOR UPDATE",
    )
    .bind(&ticket_ids)
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
    if plans.is_empty() {
        return Ok(refused);
    }
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    // The offers accepted.
    let (ids, new_orders): (Vec<&str>, Vec<&str>) = plans
        .iter()
        .map(|(_, w)| (w.transfer.transfer_id.as_str(), w.new_order_id.as_str()))
        .unzip();
    let accepted = sqlx::query(
        "UPDATE transfer t SET status = 'ACCEPTED', new_order_id = u.o, updated_at = $3
           FROM UNNEST($1::text[], $2::text[]) AS u(id, o)
          WHERE t.transfer_id = u.id AND t.status = 'OFFERED'",
    )
    .bind(&ids)
    .bind(&new_orders)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if accepted != ids.len() as u64 {
        return Err(mismatch("transfers still offered", ids.len(), accepted));
    }
    // The old tickets void.
    let (old, by): (Vec<&str>, Vec<&str>) = plans
        .iter()
        .flat_map(|(_, w)| {
            w.transfer
                .ticket_ids
                .iter()
                .map(|t| (t.as_str(), w.transfer.transfer_id.as_str()))
        })
        .unzip();
    let voided = sqlx::query(
        "UPDATE ticket t SET status = 'VOIDED', transfer_id = u.x
           FROM UNNEST($1::text[], $2::text[]) AS u(id, x)
          WHERE t.ticket_id = u.id AND t.status = 'VALID' AND t.exchange_id IS NULL",
    )
    .bind(&old)
    .bind(&by)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if voided != old.len() as u64 {
        return Err(mismatch("tickets still valid", old.len(), voided));
    }
    // The giver's holds count what left.
    let mut left: BTreeMap<&str, i32> = BTreeMap::new();
    for (taken, _) in &plans {
        *left.entry(taken.old_hold_id.as_str()).or_default() += taken.quantity() as i32;
    }
    let (left_holds, left_units): (Vec<&str>, Vec<i32>) = left.into_iter().unzip();
    let counted = sqlx::query(
        "UPDATE hold h SET exchanged_out = h.exchanged_out + u.n, updated_at = $3
           FROM UNNEST($1::text[], $2::int[]) AS u(id, n)
          WHERE h.hold_id = u.id AND h.status = 'CONFIRMED' AND h.quantity - h.exchanged_out >= u.n",
    )
    .bind(&left_holds)
    .bind(&left_units)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if counted != left_holds.len() as u64 {
        return Err(mismatch(
            "givers' holds still confirmed with the units",
            left_holds.len(),
            counted,
        ));
    }
    // The receivers' holds (confirmed), orders, payments and tickets.
    let mut h = NewRows::default();
    for (taken, write) in &plans {
        h.hold.push(taken.new_hold_id.as_str());
        h.account.push(taken.to_account_id.as_str());
        h.tier.push(write.tier_id.as_deref());
        h.quantity.push(write.quantity as i32);
        h.seats.push(
            serde_json::to_string(&write.seats).map_err(|e| StoreError::Internal(e.to_string()))?,
        );
        h.total.push(write.total_minor);
        h.currency.push(write.currency.as_str());
        h.key
            .push(format!("transfer:{}", write.transfer.transfer_id));
        h.order.push(write.new_order_id.as_str());
        h.operation.push(write.operation_id.as_str());
        h.method
            .push(format!("transfer:{}", write.transfer.transfer_id));
    }
    sqlx::query(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                           idempotency_key, created_at, expires_at, updated_at, order_id)
         SELECT $1, h, a, 'CONFIRMED', t, q, j::jsonb, tot, c, k, $10, $10, $10, o
           FROM UNNEST($2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::text[],
                       $9::text[], $11::text[]) AS u(h, a, t, q, j, tot, c, k, o)",
    )
    .bind(event_id)
    .bind(&h.hold)
    .bind(&h.account)
    .bind(&h.tier)
    .bind(&h.quantity)
    .bind(&h.seats)
    .bind(&h.total)
    .bind(&h.currency)
    .bind(&h.key)
    .bind(now)
    .bind(&h.order)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // The seats: each still sold by the giver's hold moves to the receiver's.
    let mut s_seat: Vec<&str> = Vec::new();
    let mut s_old: Vec<&str> = Vec::new();
    let mut s_new: Vec<&str> = Vec::new();
    let mut s_order: Vec<&str> = Vec::new();
    for (taken, write) in &plans {
        for seat_id in &taken.seat_ids {
            s_seat.push(seat_id);
            s_old.push(&taken.old_hold_id);
            s_new.push(&taken.new_hold_id);
            s_order.push(&write.new_order_id);
        }
    }
    if !s_seat.is_empty() {
        let moved = sqlx::query(
            "UPDATE seat s SET hold_id = u.n, order_id = u.ord, version = s.version + 1
               FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[]) AS u(id, o, n, ord)
              WHERE s.event_id = $1 AND s.seat_id = u.id AND s.status = 'SOLD' AND s.hold_id = u.o",
        )
        .bind(event_id)
        .bind(&s_seat)
        .bind(&s_old)
        .bind(&s_new)
        .bind(&s_order)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if moved != s_seat.len() as u64 {
            return Err(mismatch(
                "seats still sold by the giver",
                s_seat.len(),
                moved,
            ));
        }
    }
    sqlx::query(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                             currency, created_at, updated_at)
         SELECT $1, o, h, a, 'CONFIRMED', j::jsonb, t, q, tot, c, $9, $9
           FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::bigint[],
                       $10::text[]) AS u(o, h, a, j, t, q, tot, c)",
    )
    .bind(event_id)
    .bind(&h.order)
    .bind(&h.hold)
    .bind(&h.account)
    .bind(&h.seats)
    .bind(&h.tier)
    .bind(&h.quantity)
    .bind(&h.total)
    .bind(now)
    .bind(&h.currency)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // Nothing to pay: each new order's payment is settled by the giver's.
    sqlx::query(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                        amount_minor, currency, next_attempt_at, created_at, updated_at)
         SELECT $1, op, o, 'transfer', m, 'CAPTURED', 0, c, $5, $5, $5
           FROM UNNEST($2::text[], $3::text[], $4::text[], $6::text[]) AS u(op, o, m, c)",
    )
    .bind(event_id)
    .bind(&h.operation)
    .bind(&h.order)
    .bind(&h.method)
    .bind(now)
    .bind(&h.currency)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    let mut tk = TicketRows::default();
    for (taken, write) in &plans {
        for ticket in &write.new_tickets {
            tk.ticket.push(ticket.draft.ticket_id.as_str());
            tk.order.push(ticket.draft.order_id.as_str());
            tk.account.push(taken.to_account_id.as_str());
            tk.seat.push(ticket.draft.seat_id.as_deref());
            tk.tier.push(ticket.draft.tier_id.as_deref());
            tk.unit.push(ticket.draft.unit as i32);
            tk.code.push(ticket.code.as_str());
        }
    }
    sqlx::query(
        "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
         SELECT $1, t, o, a, s, ti, n, c, 'VALID', $9
           FROM UNNEST($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
                AS u(t, o, a, s, ti, n, c)",
    )
    .bind(event_id)
    .bind(&tk.ticket)
    .bind(&tk.order)
    .bind(&tk.account)
    .bind(&tk.seat)
    .bind(&tk.tier)
    .bind(&tk.unit)
    .bind(&tk.code)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    let messages: Vec<(&str, &str, serde_json::Value)> = plans
        .iter()
        .map(|(_, write)| (event_id, topic::TRANSFER_ACCEPTED, accepted_message(write)))
        .collect();
    outbox_many(tx, &messages, now).await?;
    Ok(refused)
}

/// Columns of the receivers' new holds, orders and payments.
#[derive(Default)]
struct NewRows<'a> {
    hold: Vec<&'a str>,
    account: Vec<&'a str>,
    tier: Vec<Option<&'a str>>,
    quantity: Vec<i32>,
    seats: Vec<String>,
    total: Vec<i64>,
    currency: Vec<&'a str>,
    key: Vec<String>,
    order: Vec<&'a str>,
    operation: Vec<&'a str>,
    method: Vec<String>,
}

/// Columns of the receivers' new tickets.
#[derive(Default)]
struct TicketRows<'a> {
    ticket: Vec<&'a str>,
    order: Vec<&'a str>,
    account: Vec<&'a str>,
    seat: Vec<Option<&'a str>>,
    tier: Vec<Option<&'a str>>,
    unit: Vec<i32>,
    code: Vec<&'a str>,
}
