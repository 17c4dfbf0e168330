//! Refunds (see `boxoffice_store::refund`): the group's write of the refunds the engine
//! decided, the reads, and the relay's settlement.

use std::collections::{BTreeMap, BTreeSet};

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::RefundPolicy;
use boxoffice_store::engine::GroupWrite;
use boxoffice_store::refund::{
    RefundFacts, RefundSettled, RefundStatus, RefundView, RefundWrite, refunds_refused,
    requested_message, settled_message, topic,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Conn, Db, Row, Rows, query};
use crate::group::{Units, move_units};
use crate::outbox;

const REFUND_COLUMNS: &str = "refund_id, event_id, order_id, account_id, operation_id,
     CAST(ticket_ids AS text) AS ticket_ids, amount_minor, currency, status, reason,
     provider_ref, last_error, created_at, settled_at";

fn refund_from_row(row: &Row) -> StoreResult<RefundView> {
    let status: String = row.get("status")?;
    let ticket_ids: String = row.get("ticket_ids")?;
    Ok(RefundView {
        refund_id: row.get("refund_id")?,
        event_id: row.get("event_id")?,
        order_id: row.get("order_id")?,
        account_id: row.get("account_id")?,
        operation_id: row.get("operation_id")?,
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("refund ticket_ids: {e}")))?,
        amount_minor: row.get("amount_minor")?,
        currency: row.get("currency")?,
        status: RefundStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("unknown refund status {status:?}")))?,
        reason: row.get("reason")?,
        provider_ref: row.get("provider_ref")?,
        last_error: row.get("last_error")?,
        created_at: row.get("created_at")?,
        settled_at: row.get("settled_at")?,
    })
}

/// The refunds of `order_ids`, oldest first.
pub async fn of_orders(conn: &mut Conn<'_>, order_ids: &[&str]) -> StoreResult<Vec<RefundView>> {
    let d = conn.dialect();
    query(format!(
        "SELECT {REFUND_COLUMNS} FROM refund WHERE order_id {} ORDER BY created_at, refund_id",
        d.in_list("$1"),
    ))
    .bind(order_ids.to_vec())
    .fetch_all(conn)
    .await?
    .iter()
    .map(refund_from_row)
    .collect()
}

pub async fn get(db: &Db, event_id: &str, refund_id: &str) -> StoreResult<Option<RefundView>> {
    query(format!(
        "SELECT {REFUND_COLUMNS} FROM refund WHERE event_id = $1 AND refund_id = $2"
    ))
    .bind(event_id)
    .bind(refund_id)
    .fetch_optional(&mut db.read().await?.conn())
    .await?
    .as_ref()
    .map(refund_from_row)
    .transpose()
}

pub async fn by_key(
    db: &Db,
    event_id: &str,
    account_id: &str,
    key: &str,
) -> StoreResult<Option<(RefundView, String)>> {
    query(format!(
        "SELECT {REFUND_COLUMNS}, request_digest FROM refund
          WHERE account_id = $2 AND idempotency_key = $3 AND event_id = $1"
    ))
    .bind(event_id)
    .bind(account_id)
    .bind(key)
    .fetch_optional(&mut db.read().await?.conn())
    .await?
    .as_ref()
    .map(|row| Ok((refund_from_row(row)?, row.get("request_digest")?)))
    .transpose()
}

/// What the refunds of `order_ids` that did not fail give back, per order.
async fn refunded_of(conn: &mut Conn<'_>, order_ids: &[&str]) -> StoreResult<Vec<(String, i64)>> {
    let d = conn.dialect();
    query(format!(
        "SELECT order_id, CAST(sum(amount_minor) AS bigint) FROM refund
          WHERE order_id {} AND status <> 'FAILED' GROUP BY order_id",
        d.in_list("$1"),
    ))
    .bind(order_ids.to_vec())
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| Ok((row.get(0)?, row.get(1)?)))
    .collect()
}

/// Inserts a refund row `PENDING` and its outbox message, at `now`.
async fn insert_refund(
    conn: &mut Conn<'_>,
    write: &RefundWrite,
    operation_id: &str,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let refund = &write.refund;
    query(
        "INSERT INTO refund (event_id, refund_id, order_id, account_id, idempotency_key,
                             request_digest, operation_id, ticket_ids, amount_minor, currency,
                             status, reason, created_at, seats_released)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'PENDING', $11, $12, $13)",
    )
    .bind(&refund.event_id)
    .bind(&refund.refund_id)
    .bind(&refund.order_id)
    .bind(&refund.account_id)
    .bind(&write.idempotency_key)
    .bind(&write.request_digest)
    .bind(operation_id)
    .bind(serde_json::json!(refund.ticket_ids))
    .bind(refund.amount_minor)
    .bind(&refund.currency)
    .bind(&refund.reason)
    .bind(now)
    .bind(write.release_seats)
    .execute(conn)
    .await?;
    Ok(())
}

/// The event's refund policy as stored (see `RefundStore::event_refund_policy`).
pub async fn policy(db: &Db, event_id: &str) -> StoreResult<Option<Option<RefundPolicy>>> {
    let Some(row) =
        query("SELECT refund_cutoff_s, refund_keep_fee_minor FROM event WHERE event_id = $1")
            .bind(event_id)
            .fetch_optional(&mut db.read().await?.conn())
            .await?
    else {
        return Ok(None);
    };
    let cutoff: Option<i32> = row.get(0)?;
    Ok(Some(cutoff.map(|cutoff_s| RefundPolicy {
        fan_refund_cutoff_s: u32::try_from(cutoff_s).unwrap_or(0),
        keep_fee_minor: row.get(1).unwrap_or(0),
    })))
}

/// Sets or removes the event's refund policy (see `RefundStore::set_refund_policy`).
pub async fn set_policy(
    db: &Db,
    event_id: &str,
    policy: Option<RefundPolicy>,
) -> StoreResult<bool> {
    let mut tx = db.write().await?;
    let updated = query(
        "UPDATE event SET refund_cutoff_s = $2, refund_keep_fee_minor = $3 WHERE event_id = $1",
    )
    .bind(event_id)
    .bind(policy.map(|p| i32::try_from(p.fan_refund_cutoff_s).unwrap_or(i32::MAX)))
    .bind(policy.map_or(0, |p| p.keep_fee_minor))
    .execute(&mut tx.conn())
    .await?;
    tx.commit().await?;
    Ok(updated == 1)
}

/// An organiser's refund of money alone (see `RefundStore::refund_money`).
pub async fn money(db: &Db, write: &RefundWrite) -> StoreResult<Result<RefundView, String>> {
    record_alone(db, write, false).await
}

/// Money owed back recorded as a refund (see `RefundStore::record_refund_due`).
pub async fn due(db: &Db, write: &RefundWrite) -> StoreResult<Result<RefundView, String>> {
    record_alone(db, write, true).await
}

/// A refund with no ticket, in one transaction: the key's refund when it has one (`owed`:
/// money taken for an order that kept nothing, in any status), else the order locked,
/// confirmed unless `owed`, its payment authorized or captured (captured when `owed`), the
/// amount within what it took less its refunds; written `PENDING` with its outbox message.
async fn record_alone(
    db: &Db,
    write: &RefundWrite,
    owed: bool,
) -> StoreResult<Result<RefundView, String>> {
    let d = db.dialect();
    let refund = &write.refund;
    let mut tx = db.write().await?;
    if owed {
        let earlier = query(format!(
            "SELECT {REFUND_COLUMNS} FROM refund WHERE account_id = $1 AND idempotency_key = $2"
        ))
        .bind(&refund.account_id)
        .bind(&write.idempotency_key)
        .fetch_optional(&mut tx.conn())
        .await?;
        if let Some(row) = earlier {
            return Ok(Ok(refund_from_row(&row)?));
        }
    }
    let row = query(format!(
        "SELECT o.status, o.account_id, p.status, p.operation_id, p.amount_minor
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id = $1 AND o.event_id = $2 {}",
        d.lock("FOR UPDATE OF o")
    ))
    .bind(&refund.order_id)
    .bind(&refund.event_id)
    .fetch_optional(&mut tx.conn())
    .await?;
    let Some(row) = row else {
        return Ok(Err("no such order".into()));
    };
    let (status, owner, payment, operation_id, paid): (String, String, String, String, i64) = (
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    );
    if owner != write.owner_account_id || (!owed && status != "CONFIRMED") {
        return Ok(Err(format!("the order is {status}")));
    }
    if owed && payment != "CAPTURED" {
        return Ok(Err(format!(
            "the order's payment is {payment}: nothing was taken"
        )));
    }
    if !matches!(payment.as_str(), "AUTHORIZED" | "CAPTURED") {
        return Ok(Err(format!("the order's payment is {payment}")));
    }
    let refunded: i64 = refunded_of(&mut tx.conn(), &[refund.order_id.as_str()])
        .await?
        .first()
        .map_or(0, |(_, n)| *n);
    if refund.amount_minor > paid - refunded {
        return Ok(Err(format!(
            "at most {} can still go back (paid {paid}, refunded {refunded})",
            paid - refunded
        )));
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    insert_refund(&mut tx.conn(), write, &operation_id, now).await?;
    outbox::insert(
        &mut tx.conn(),
        &refund.event_id,
        topic::REFUND_REQUESTED,
        requested_message(refund),
        now,
    )
    .await?;
    let view = query(format!(
        "SELECT {REFUND_COLUMNS} FROM refund WHERE event_id = $1 AND refund_id = $2"
    ))
    .bind(&refund.event_id)
    .bind(&refund.refund_id)
    .fetch_one(&mut tx.conn())
    .await?;
    let view = refund_from_row(&view)?;
    tx.commit().await?;
    Ok(Ok(view))
}

/// A `PENDING` refund settles once, with its webhook message, by the store's clock.
pub async fn settle(
    db: &Db,
    event_id: &str,
    refund_id: &str,
    settled: &RefundSettled,
) -> StoreResult<Option<RefundView>> {
    let mut tx = db.write().await?;
    let now = outbox::store_now(&mut tx.conn()).await?;
    let (status, provider_ref, error) = match settled {
        RefundSettled::Succeeded { provider_ref } => (RefundStatus::Succeeded, provider_ref, None),
        RefundSettled::Failed {
            provider_ref,
            reason,
        } => (RefundStatus::Failed, provider_ref, Some(reason.as_str())),
    };
    let updated = query(
        "UPDATE refund SET status = $3, provider_ref = coalesce($4, provider_ref),
                last_error = $5, settled_at = $6
          WHERE event_id = $1 AND refund_id = $2 AND status = 'PENDING'",
    )
    .bind(event_id)
    .bind(refund_id)
    .bind(status.as_str())
    .bind(provider_ref.as_deref())
    .bind(error)
    .bind(now)
    .execute(&mut tx.conn())
    .await?;
    let refund = query(format!(
        "SELECT {REFUND_COLUMNS} FROM refund WHERE event_id = $1 AND refund_id = $2"
    ))
    .bind(event_id)
    .bind(refund_id)
    .fetch_optional(&mut tx.conn())
    .await?
    .as_ref()
    .map(refund_from_row)
    .transpose()?;
    if updated == 1
        && let Some(refund) = &refund
    {
        let topic = match status {
            RefundStatus::Failed => topic::REFUND_FAILED,
            RefundStatus::Pending | RefundStatus::Succeeded => topic::REFUND_SUCCEEDED,
        };
        outbox::insert(
            &mut tx.conn(),
            event_id,
            topic,
            settled_message(refund),
            now,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(refund)
}

/// The group's refunds: the orders, their payments, the tickets and the open offers of these
/// orders read under lock (the orders first, as an offer locks them), and the keys used; the
/// refunds [`refunds_refused`] leaves are written: the tickets `VOIDED` with the refund's id,
/// each hold counting what left, the seats (each still `SOLD` by the hold) and units back on
/// sale, the refund rows `PENDING` and their outbox messages. Returns the refused commands.
pub async fn write(
    conn: &mut Conn<'_>,
    group: &GroupWrite<'_>,
    map: &mut MapChanges,
) -> StoreResult<Vec<usize>> {
    let taken = group.refunds()?;
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    let d = conn.dialect();
    let now = group.now;
    let event_id = group.event.event_id.as_str();
    let order_ids: Vec<&str> = taken
        .iter()
        .map(|(_, w)| w.refund.order_id.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let ticket_ids: Vec<&str> = taken
        .iter()
        .flat_map(|(_, w)| w.refund.ticket_ids.iter().map(String::as_str))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut facts = RefundFacts::default();
    let mut operations: BTreeMap<String, String> = BTreeMap::new();
    for (order_id, locked) in crate::checkout::lock_orders(conn, order_ids.clone()).await? {
        if matches!(
            locked.payment_status.as_deref(),
            Some("AUTHORIZED" | "CAPTURED")
        ) {
            facts.paid.insert(order_id.clone());
        }
        if let Some(operation_id) = locked.operation_id {
            operations.insert(order_id.clone(), operation_id);
        }
        if let Some(amount) = locked.paid_minor {
            facts.refundable.insert(order_id.clone(), amount);
        }
        facts.orders.insert(order_id, locked.order);
    }
    facts.tickets = crate::checkout::lock_tickets(conn, ticket_ids).await?;
    let open = query(format!(
        "SELECT CAST(ticket_ids AS text) FROM transfer
          WHERE order_id {} AND status = 'OFFERED' AND expires_at > $2",
        d.in_list("$1"),
    ))
    .bind(order_ids.clone())
    .bind(now)
    .fetch_all(conn)
    .await?;
    for row in open {
        let ids: Vec<String> = serde_json::from_str(&row.get::<String, _>(0)?)
            .map_err(|e| StoreError::Internal(format!("transfer ticket_ids: {e}")))?;
        facts.offered.extend(ids);
    }
    for (order_id, refunded) in refunded_of(conn, &order_ids).await? {
        if let Some(left) = facts.refundable.get_mut(&order_id) {
            *left -= refunded;
        }
    }
    let keys: Vec<&str> = taken
        .iter()
        .map(|(_, w)| w.idempotency_key.as_str())
        .collect();
    let used = query(format!(
        "SELECT account_id, idempotency_key FROM refund WHERE idempotency_key {}",
        d.in_list("$1"),
    ))
    .bind(keys)
    .fetch_all(conn)
    .await?;
    for row in used {
        facts.used_keys.insert((row.get(0)?, row.get(1)?));
    }
    let refused = refunds_refused(&taken, facts);
    let accepted: Vec<_> = taken
        .iter()
        .filter(|(t, _)| !refused.contains(&t.index))
        .collect();
    if accepted.is_empty() {
        return Ok(refused);
    }
    // The tickets void, each still valid and unmarked.
    let (voided, by): (Vec<&str>, Vec<&str>) = accepted
        .iter()
        .flat_map(|(_, w)| {
            w.refund
                .ticket_ids
                .iter()
                .map(|t| (t.as_str(), w.refund.refund_id.as_str()))
        })
        .unzip();
    let expected = voided.len();
    let rows = Rows::new().texts("id", voided).texts("refund_id", by);
    query(format!(
        "UPDATE ticket SET status = 'VOIDED', refund_id = u.refund_id
           FROM {} WHERE ticket.ticket_id = u.id AND ticket.status = 'VALID'
            AND ticket.exchange_id IS NULL",
        rows.table(d, 1, "u")
    ))
    .bind_rows(d, rows)
    .execute_exactly(conn, expected, "refunded tickets still valid")
    .await?;
    // The holds count what left.
    let mut left: BTreeMap<&str, i32> = BTreeMap::new();
    for (taken, _) in &accepted {
        let n = match &taken.given.tier {
            Some((_, units)) => *units,
            None => taken.given.seat_ids.len() as u32,
        };
        *left.entry(taken.given.hold_id.as_str()).or_default() +=
            i32::try_from(n).unwrap_or(i32::MAX);
    }
    let expected = left.len();
    let hold_ids: Vec<&str> = left.keys().copied().collect();
    let rows = Rows::new()
        .texts("id", left.keys().copied())
        .int4s("n", left.values().copied());
    query(format!(
        "UPDATE hold SET exchanged_out = hold.exchanged_out + u.n, updated_at = $1
           FROM {} WHERE hold.hold_id = u.id AND hold.status = 'CONFIRMED'
            AND hold.quantity - hold.exchanged_out >= u.n",
        rows.table(d, 2, "u")
    ))
    .bind(now)
    .bind_rows(d, rows)
    .execute_exactly(
        conn,
        expected,
        "refunded holds still confirmed with the units",
    )
    .await?;
    // Their seats and units back on sale.
    let seat_ids: Vec<&str> = accepted
        .iter()
        .flat_map(|(t, _)| t.given.seat_ids.iter().map(String::as_str))
        .collect();
    if !seat_ids.is_empty() {
        let expected = seat_ids.len();
        query(format!(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL,
                    hold_expires_at = NULL, version = version + 1
              WHERE event_id = $1 AND seat_id {} AND hold_id {} AND status = 'SOLD'",
            d.in_list("$3"),
            d.in_list("$2"),
        ))
        .bind(event_id)
        .bind(hold_ids)
        .bind(seat_ids)
        .execute_exactly(conn, expected, "refunded seats still sold by their holds")
        .await?;
    }
    let mut returned: BTreeMap<String, i64> = BTreeMap::new();
    for (tier_id, n) in accepted.iter().filter_map(|(t, _)| t.given.tier.as_ref()) {
        *returned.entry(tier_id.clone()).or_default() += i64::from(*n);
    }
    move_units(conn, event_id, returned, Units::Sold, Units::Available, map).await?;
    // The refunds, and the relay's messages.
    let mut messages = Vec::with_capacity(accepted.len());
    for (_, write) in &accepted {
        let refund = &write.refund;
        let operation_id = operations
            .get(&refund.order_id)
            .cloned()
            .unwrap_or_default();
        insert_refund(conn, write, &operation_id, now).await?;
        messages.push((
            event_id,
            topic::REFUND_REQUESTED,
            requested_message(refund).to_string(),
        ));
    }
    outbox::insert_encoded(conn, &messages, now).await?;
    Ok(refused)
}
