//! Ticket transfers (see `boxoffice_store::transfer` for the rules): an offer is one
//! transaction that locks the giver's order, then its tickets (on SQLite the writer's
//! `BEGIN IMMEDIATE` holds the file instead); an acceptance is written by the event writer's
//! group ([`write`]), after the group locked the event's seats: then the offers, the orders,
//! the tickets.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::{GroupWrite, LockedTicket, transfer_plans, transfer_rows};
use boxoffice_store::transfer::{
    LockedTransfer, OfferRefused, Offered, TransferFacts, TransferOffer, TransferRole,
    TransferStatus, TransferView, accepted_message, ended_message, offer_conflict,
    offer_expires_at, offered_message, topic, transfers_refused,
};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Dialect, Row, Rows, query};
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

/// The transfers a group accepts, written in its transaction after its exchanges (see
/// `boxoffice_store::transfer::TransferWrite`). The offers, the giver's orders (with their
/// payments) and the tickets are read (locked on PostgreSQL) and judged: any changed since the
/// route read them refuses that transfer alone. Returns the command indexes refused.
pub async fn write(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<Vec<usize>> {
    let taken = group.transfers()?;
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    let d = conn.dialect();
    let (transfer_ids, order_ids, ticket_ids) = transfer_rows(&taken);
    let mut facts = TransferFacts::default();
    let transfers = query(format!(
        "SELECT transfer_id, status, expires_at, order_id, from_account_id, to_account_id
           FROM transfer WHERE transfer_id {} ORDER BY transfer_id {}",
        d.in_list("$1"),
        d.lock("FOR UPDATE")
    ))
    .bind(transfer_ids)
    .fetch_all(conn)
    .await?;
    for row in transfers {
        facts.transfers.insert(
            row.get(0)?,
            LockedTransfer {
                status: row.get(1)?,
                expires_at: row.get(2)?,
                order_id: row.get(3)?,
                from_account_id: row.get(4)?,
                to_account_id: row.get(5)?,
            },
        );
    }
    for (order_id, locked) in crate::checkout::lock_orders(conn, order_ids).await? {
        if locked.payment_status.as_deref() == Some("CAPTURED") {
            facts.captured.insert(order_id.clone());
        }
        facts.orders.insert(order_id, locked.order);
    }
    facts.tickets = crate::checkout::lock_tickets(conn, ticket_ids).await?;
    let refused = transfers_refused(&taken, facts, group.now);
    let plans = transfer_plans(&taken, &refused);
    if plans.is_empty() {
        return Ok(refused);
    }
    let event_id = group.event.event_id.as_str();
    let now = group.now;
    // The offers accepted.
    let offers = Rows::new()
        .texts(
            "id",
            plans.iter().map(|(_, w)| w.transfer.transfer_id.as_str()),
        )
        .texts(
            "new_order_id",
            plans.iter().map(|(_, w)| w.new_order_id.as_str()),
        );
    let expected = offers.len();
    query(format!(
        "UPDATE transfer SET status = 'ACCEPTED', new_order_id = u.new_order_id, updated_at = $1
           FROM {} WHERE transfer.transfer_id = u.id AND transfer.status = 'OFFERED'",
        offers.table(d, 2, "u")
    ))
    .bind(now)
    .bind_rows(d, offers)
    .execute_exactly(conn, expected, "transfers still offered")
    .await?;
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
    let expected = old.len();
    let voided_rows = Rows::new().texts("id", old).texts("transfer_id", by);
    query(format!(
        "UPDATE ticket SET status = 'VOIDED', transfer_id = u.transfer_id
           FROM {} WHERE ticket.ticket_id = u.id AND ticket.status = 'VALID'
            AND ticket.exchange_id IS NULL",
        voided_rows.table(d, 1, "u")
    ))
    .bind_rows(d, voided_rows)
    .execute_exactly(conn, expected, "tickets still valid")
    .await?;
    // The giver's holds count what left.
    let mut left: BTreeMap<&str, i32> = BTreeMap::new();
    for (taken, _) in &plans {
        *left.entry(taken.old_hold_id.as_str()).or_default() +=
            i32::try_from(taken.quantity()).unwrap_or(i32::MAX);
    }
    let expected = left.len();
    let left_rows = Rows::new()
        .texts("id", left.keys().copied())
        .int4s("n", left.values().copied());
    query(format!(
        "UPDATE hold SET exchanged_out = hold.exchanged_out + u.n, updated_at = $1
           FROM {} WHERE hold.hold_id = u.id AND hold.status = 'CONFIRMED'
            AND hold.quantity - hold.exchanged_out >= u.n",
        left_rows.table(d, 2, "u")
    ))
    .bind(now)
    .bind_rows(d, left_rows)
    .execute_exactly(
        conn,
        expected,
        "givers' holds still confirmed with the units",
    )
    .await?;
    // The receivers' holds (confirmed), orders, payments and tickets.
    let mut seats_json = Vec::with_capacity(plans.len());
    for (_, write) in &plans {
        seats_json.push(
            serde_json::to_string(&write.seats).map_err(|e| StoreError::Internal(e.to_string()))?,
        );
    }
    let new_rows = || {
        Rows::new()
            .texts("hold_id", plans.iter().map(|(t, _)| t.new_hold_id.as_str()))
            .texts(
                "account_id",
                plans.iter().map(|(t, _)| t.to_account_id.as_str()),
            )
            .opt_texts("tier_id", plans.iter().map(|(_, w)| w.tier_id.clone()))
            .int4s(
                "quantity",
                plans
                    .iter()
                    .map(|(_, w)| i32::try_from(w.quantity).unwrap_or(i32::MAX)),
            )
            .texts("seats", seats_json.iter().map(String::as_str))
            .ints("total_minor", plans.iter().map(|(_, w)| w.total_minor))
            .texts("currency", plans.iter().map(|(_, w)| w.currency.as_str()))
            .texts(
                "transfer_key",
                plans
                    .iter()
                    .map(|(_, w)| format!("transfer:{}", w.transfer.transfer_id)),
            )
            .texts(
                "order_id",
                plans.iter().map(|(_, w)| w.new_order_id.as_str()),
            )
            .texts(
                "operation_id",
                plans.iter().map(|(_, w)| w.operation_id.as_str()),
            )
    };
    let rows = new_rows();
    query(format!(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats,
                           total_minor, currency, idempotency_key, created_at, expires_at,
                           updated_at, order_id)
         SELECT $1, u.hold_id, u.account_id, 'CONFIRMED', u.tier_id, u.quantity, {seats},
                u.total_minor, u.currency, u.transfer_key, $2, $2, $2, u.order_id
           FROM {rows}",
        seats = d.json("u.seats"),
        rows = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    // The seats: each still sold by the giver's hold moves to the receiver's.
    let moves: Vec<(&str, &str, &str, &str)> = plans
        .iter()
        .flat_map(|(taken, write)| {
            taken.seat_ids.iter().map(move |seat_id| {
                (
                    seat_id.as_str(),
                    taken.old_hold_id.as_str(),
                    taken.new_hold_id.as_str(),
                    write.new_order_id.as_str(),
                )
            })
        })
        .collect();
    if !moves.is_empty() {
        let expected = moves.len();
        let rows = Rows::new()
            .texts("id", moves.iter().map(|m| m.0))
            .texts("old_hold", moves.iter().map(|m| m.1))
            .texts("new_hold", moves.iter().map(|m| m.2))
            .texts("order_id", moves.iter().map(|m| m.3));
        query(format!(
            "UPDATE seat SET hold_id = u.new_hold, order_id = u.order_id, version = seat.version + 1
               FROM {} WHERE seat.event_id = $1 AND seat.seat_id = u.id
                AND seat.status = 'SOLD' AND seat.hold_id = u.old_hold",
            rows.table(d, 2, "u")
        ))
        .bind(event_id)
        .bind_rows(d, rows)
        .execute_exactly(conn, expected, "seats still sold by the giver")
        .await?;
    }
    let rows = new_rows();
    query(format!(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id,
                             quantity, total_minor, currency, created_at, updated_at)
         SELECT $1, u.order_id, u.hold_id, u.account_id, 'CONFIRMED', {seats}, u.tier_id,
                u.quantity, u.total_minor, u.currency, $2, $2
           FROM {rows}",
        seats = d.json("u.seats"),
        rows = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    // Nothing to pay: each new order's payment is settled by the giver's.
    let rows = new_rows();
    query(format!(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider,
                                        payment_method, status, amount_minor, currency,
                                        next_attempt_at, created_at, updated_at)
         SELECT $1, u.operation_id, u.order_id, 'transfer', u.transfer_key, 'CAPTURED', 0,
                u.currency, $2, $2, $2
           FROM {}",
        rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    let tickets: Vec<_> = plans
        .iter()
        .flat_map(|(taken, write)| {
            write
                .new_tickets
                .iter()
                .map(move |ticket| (taken.to_account_id.as_str(), ticket))
        })
        .collect();
    if !tickets.is_empty() {
        let rows = Rows::new()
            .texts(
                "ticket_id",
                tickets.iter().map(|(_, t)| t.draft.ticket_id.as_str()),
            )
            .texts(
                "order_id",
                tickets.iter().map(|(_, t)| t.draft.order_id.as_str()),
            )
            .texts("account_id", tickets.iter().map(|(a, _)| *a))
            .opt_texts(
                "seat_id",
                tickets.iter().map(|(_, t)| t.draft.seat_id.clone()),
            )
            .opt_texts(
                "tier_id",
                tickets.iter().map(|(_, t)| t.draft.tier_id.clone()),
            )
            .int4s(
                "unit",
                tickets
                    .iter()
                    .map(|(_, t)| i32::try_from(t.draft.unit).unwrap_or(i32::MAX)),
            )
            .texts("code", tickets.iter().map(|(_, t)| t.code.as_str()));
        query(format!(
            "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit,
                                 code, status, issued_at)
             SELECT $1, u.ticket_id, u.order_id, u.account_id, u.seat_id, u.tier_id, u.unit,
                    u.code, 'VALID', $2
               FROM {}",
            rows.table(d, 3, "u"),
        ))
        .bind(event_id)
        .bind(now)
        .bind_rows(d, rows)
        .execute(conn)
        .await?;
    }
    let messages: Vec<(&str, &str, serde_json::Value)> = plans
        .iter()
        .map(|(_, write)| (event_id, topic::TRANSFER_ACCEPTED, accepted_message(write)))
        .collect();
    outbox::insert_many(conn, &messages, now).await?;
    Ok(refused)
}
