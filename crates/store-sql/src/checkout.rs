//! Orders, payment operations and tickets (see `boxoffice_store::checkout`): their reading,
//! the reconciler's queue, ticket issuance and check-in. The settlement of a verdict is still
//! per backend.

use std::collections::BTreeMap;

use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_store::checkout::{
    OrderView, PaymentOperation, SignTicket, TicketDraft, TicketView, ticket_drafts,
};
use boxoffice_store::engine::{LockedOrder, LockedTicket};
use boxoffice_store::holder::HolderSlot;
use boxoffice_store::{StoreError, StoreResult, parse_held_seats};

use crate::db::{Conn, Db, Dialect, Row, Rows, query};

/// The columns [`order_from_row`] reads, of `orders o` joined with `payment_operation p`.
pub fn order_columns(d: Dialect) -> String {
    let seats = match d {
        Dialect::Postgres => "o.seats::text AS seats",
        Dialect::Sqlite => "o.seats",
    };
    format!(
        "o.order_id, o.event_id, o.hold_id, o.account_id, o.status, {seats},
         o.tier_id, o.quantity, o.total_minor, o.currency, o.cancel_reason, o.created_at, o.updated_at,
         p.status AS payment_status, p.next_action_url, p.last_error AS payment_last_error"
    )
}

/// The ticket columns [`ticket_from_row_as`] reads with the `t_` prefix, of `ticket t`.
pub const TICKET_COLUMNS_AS_T: &str = "t.ticket_id AS t_ticket_id, t.event_id AS t_event_id,
     t.order_id AS t_order_id, t.account_id AS t_account_id, t.seat_id AS t_seat_id,
     t.tier_id AS t_tier_id, t.unit AS t_unit, t.code AS t_code, t.status AS t_status,
     t.exchange_id AS t_exchange_id, t.refund_id AS t_refund_id, t.void_reason AS t_void_reason,
     t.issued_at AS t_issued_at, t.holder_name AS t_holder_name,
     t.holder_answers AS t_holder_answers";

/// The columns [`operation_from_row`] reads.
pub const OPERATION_COLUMNS: &str =
    "operation_id, order_id, event_id, provider, payment_method, status, provider_ref,
     amount_minor, currency, n_attempts";

pub fn parse_order_status(raw: &str) -> StoreResult<OrderStatus> {
    OrderStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("unknown order status {raw:?}")))
}

pub fn parse_payment_status(raw: &str) -> StoreResult<PaymentStatus> {
    PaymentStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("unknown payment status {raw:?}")))
}

/// The operation's last error is the fan's to read only once the payment failed (before,
/// it says why the reconciler is still asking).
fn failure_code(payment_status: &str, last_error: Option<String>) -> Option<String> {
    last_error.filter(|_| payment_status == PaymentStatus::Failed.as_str())
}

/// An order (without its tickets) from [`order_columns`].
pub fn order_from_row(row: &Row) -> StoreResult<OrderView> {
    let status: String = row.get("status")?;
    let payment_status: String = row.get("payment_status")?;
    let seats: String = row.get("seats")?;
    Ok(OrderView {
        order_id: row.get("order_id")?,
        event_id: row.get("event_id")?,
        hold_id: row.get("hold_id")?,
        account_id: row.get("account_id")?,
        status: parse_order_status(&status)?,
        payment_status: parse_payment_status(&payment_status)?,
        next_action_url: row.get("next_action_url")?,
        seats: parse_held_seats(&seats)?,
        tier_id: row.get("tier_id")?,
        quantity: u32::try_from(row.get::<i32, _>("quantity")?).unwrap_or(0),
        total_minor: row.get("total_minor")?,
        currency: row.get("currency")?,
        cancel_reason: row.get("cancel_reason")?,
        payment_failure_code: failure_code(&payment_status, row.get("payment_last_error")?),
        tickets: Vec::new(),
        refunds: Vec::new(),
        created_at: row.get("created_at")?,
        updated_at: row.get("updated_at")?,
    })
}

/// A valid ticket an exchange has marked shows as `EXCHANGING`.
pub fn ticket_status(stored: String, exchange_id: Option<String>) -> String {
    if stored == "VALID" && exchange_id.is_some() {
        "EXCHANGING".into()
    } else {
        stored
    }
}

/// A ticket from `ticket`'s own columns.
pub fn ticket_from_row(row: &Row) -> StoreResult<TicketView> {
    ticket_from_row_as(row, "")
}

/// A ticket from columns named with `prefix` (`t_` when read beside its order).
pub fn ticket_from_row_as(row: &Row, prefix: &str) -> StoreResult<TicketView> {
    let column = |name: &str| format!("{prefix}{name}");
    let exchange_id: Option<String> = row.get(column("exchange_id").as_str())?;
    Ok(TicketView {
        ticket_id: row.get(column("ticket_id").as_str())?,
        event_id: row.get(column("event_id").as_str())?,
        order_id: row.get(column("order_id").as_str())?,
        account_id: row.get(column("account_id").as_str())?,
        seat_id: row.get(column("seat_id").as_str())?,
        tier_id: row.get(column("tier_id").as_str())?,
        unit: u32::try_from(row.get::<i32, _>(column("unit").as_str())?).unwrap_or(0),
        code: row.get(column("code").as_str())?,
        status: ticket_status(row.get(column("status").as_str())?, exchange_id.clone()),
        exchange_id,
        refund_id: row.get(column("refund_id").as_str())?,
        void_reason: row.get(column("void_reason").as_str())?,
        holder: boxoffice_store::holder::details_of(
            row.get(column("holder_name").as_str())?,
            row.get::<Option<String>, _>(column("holder_answers").as_str())?
                .as_deref(),
        ),
        issued_at: row.get(column("issued_at").as_str())?,
    })
}

/// A payment operation from [`OPERATION_COLUMNS`].
pub fn operation_from_row(row: &Row) -> StoreResult<PaymentOperation> {
    let status: String = row.get("status")?;
    Ok(PaymentOperation {
        operation_id: row.get("operation_id")?,
        order_id: row.get("order_id")?,
        event_id: row.get("event_id")?,
        provider: row.get("provider")?,
        payment_method: row.get("payment_method")?,
        status: parse_payment_status(&status)?,
        provider_ref: row.get("provider_ref")?,
        amount_minor: row.get("amount_minor")?,
        currency: row.get("currency")?,
        n_attempts: u32::try_from(row.get::<i32, _>("n_attempts")?).unwrap_or(0),
    })
}

/// One order with its tickets, read on `conn` (a pooled connection or a transaction), in
/// one statement: the order beside each of its tickets (one row with no ticket when it has
/// none). An order status read is the most repeated read of a sale.
pub async fn load_order(conn: &mut Conn<'_>, order_id: &str) -> StoreResult<Option<OrderView>> {
    let rows = query(format!(
        "SELECT {}, {TICKET_COLUMNS_AS_T},
                (SELECT count(*) FROM refund r WHERE r.order_id = o.order_id) AS n_refunds
           FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
           LEFT JOIN ticket t ON t.order_id = o.order_id
          WHERE o.order_id = $1
          ORDER BY t.unit",
        order_columns(conn.dialect()),
    ))
    .bind(order_id)
    .fetch_all(conn)
    .await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut order = order_from_row(first)?;
    for row in &rows {
        if row.get::<Option<String>, _>("t_ticket_id")?.is_some() {
            order.tickets.push(ticket_from_row_as(row, "t_")?);
        }
    }
    // The refunds are counted in the same statement: an order with none (nearly every one
    // during a sale, the most repeated read) pays no second statement.
    if first.get::<i64, _>("n_refunds")? > 0 {
        order.refunds = crate::refund::of_orders(conn, &[order_id]).await?;
    }
    Ok(Some(order))
}

/// The orders (without tickets) of `order_ids`, in one statement.
pub async fn load_order_heads(
    conn: &mut Conn<'_>,
    order_ids: &[&str],
) -> StoreResult<Vec<OrderView>> {
    let d = conn.dialect();
    query(format!(
        "SELECT {} FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id {}",
        order_columns(d),
        d.in_list("$1"),
    ))
    .bind(order_ids.to_vec())
    .fetch_all(conn)
    .await?
    .iter()
    .map(order_from_row)
    .collect()
}

/// One order with its tickets.
pub async fn order(db: &Db, order_id: &str) -> StoreResult<Option<OrderView>> {
    load_order(&mut db.read().await?.conn(), order_id).await
}

/// The order without its tickets.
pub async fn order_head(db: &Db, order_id: &str) -> StoreResult<Option<OrderView>> {
    let mut pooled = db.read().await?;
    Ok(load_order_heads(&mut pooled.conn(), &[order_id])
        .await?
        .pop())
}

/// An account's orders, newest first, before the order id `before` when given.
pub async fn orders_of(
    db: &Db,
    account_id: &str,
    before: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<OrderView>> {
    let mut pooled = db.read().await?;
    let ids: Vec<String> = query(
        "SELECT order_id FROM orders WHERE account_id = $1 AND ($2 IS NULL OR order_id < $2)
          ORDER BY order_id DESC LIMIT $3",
    )
    .bind(account_id)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect::<StoreResult<_>>()?;
    let mut orders = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(order) = load_order(&mut pooled.conn(), &id).await? {
            orders.push(order);
        }
    }
    Ok(orders)
}

/// One payment operation.
pub async fn operation(db: &Db, operation_id: &str) -> StoreResult<Option<PaymentOperation>> {
    query(format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = $1"
    ))
    .bind(operation_id)
    .fetch_optional(&mut db.read().await?.conn())
    .await?
    .as_ref()
    .map(operation_from_row)
    .transpose()
}

/// One payment operation that a write transaction knows exists, its row locked where rows
/// are (PostgreSQL; SQLite's write transaction holds the file).
pub async fn operation_for_update(
    conn: &mut Conn<'_>,
    operation_id: &str,
) -> StoreResult<PaymentOperation> {
    let lock = conn.dialect().lock("FOR UPDATE");
    let row = query(format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id = $1 {lock}"
    ))
    .bind(operation_id)
    .fetch_one(conn)
    .await?;
    operation_from_row(&row)
}

/// The payment operations of `operation_ids`, in one statement.
pub async fn operations(db: &Db, operation_ids: &[String]) -> StoreResult<Vec<PaymentOperation>> {
    if operation_ids.is_empty() {
        return Ok(Vec::new());
    }
    let d = db.dialect();
    query(format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE operation_id {}",
        d.in_list("$1"),
    ))
    .bind(operation_ids.to_vec())
    .fetch_all(&mut db.read().await?.conn())
    .await?
    .iter()
    .map(operation_from_row)
    .collect()
}

/// The payment operation a provider knows by `provider_ref`.
pub async fn operation_by_ref(
    db: &Db,
    provider: &str,
    provider_ref: &str,
) -> StoreResult<Option<PaymentOperation>> {
    query(format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation WHERE provider = $1 AND provider_ref = $2"
    ))
    .bind(provider)
    .bind(provider_ref)
    .fetch_optional(&mut db.read().await?.conn())
    .await?
    .as_ref()
    .map(operation_from_row)
    .transpose()
}

/// Operations the reconciler should look at now: unsettled authorizations past their next
/// attempt time, and authorizations left open on cancelled orders.
pub async fn due_operations(db: &Db, limit: u32) -> StoreResult<Vec<PaymentOperation>> {
    query(format!(
        "SELECT {OPERATION_COLUMNS} FROM payment_operation p
          WHERE p.next_attempt_at <= {now}
            AND (p.status IN ('AUTHORIZING', 'REQUIRES_ACTION', 'UNKNOWN')
                 OR (p.status = 'AUTHORIZED'
                     AND EXISTS (SELECT 1 FROM orders o WHERE o.order_id = p.order_id AND o.status = 'CANCELLED')))
            AND {not_moving_in}
          ORDER BY p.next_attempt_at LIMIT $1",
        now = db.dialect().now(),
        not_moving_in = db.dialect().not_moving_in("p.event_id"),
    ))
    .bind(limit)
    .fetch_all(&mut db.read().await?.conn())
    .await?
    .iter()
    .map(operation_from_row)
    .collect()
}

/// Pushes an operation's next reconciler look `delay_s` out and counts the attempt.
pub async fn postpone_operation(
    db: &Db,
    operation_id: &str,
    delay_s: f64,
    error: &str,
) -> StoreResult<()> {
    query(format!(
        "UPDATE payment_operation SET n_attempts = n_attempts + 1, last_error = $3,
                next_attempt_at = {}
          WHERE operation_id = $1",
        db.dialect().now_plus_secs("$2"),
    ))
    .bind(operation_id)
    .bind(delay_s)
    .bind(error)
    .execute(&mut db.write_one().await?.conn())
    .await?;
    Ok(())
}

/// The tickets of every confirmed order of `order_ids`, once (a unit already issued is
/// skipped), in one transaction of two statements (the relay hands a round's orders at once;
/// one transaction per order was the on-sale's last bound). On PostgreSQL the orders are
/// share-locked while their tickets are written, so a compensation cancelling one waits and
/// then voids them. Returns how many were issued.
pub async fn issue_tickets(db: &Db, order_ids: &[String], sign: &SignTicket) -> StoreResult<u32> {
    if order_ids.is_empty() {
        return Ok(0);
    }
    let d = db.dialect();
    let mut tx = db.write().await?;
    let orders = query(format!(
        "SELECT order_id, event_id, account_id, {seats}, tier_id, quantity FROM orders
          WHERE order_id {ids} AND status = 'CONFIRMED' ORDER BY order_id {lock}",
        seats = match d {
            Dialect::Postgres => "seats::text",
            Dialect::Sqlite => "seats",
        },
        ids = d.in_list("$1"),
        lock = d.lock("FOR SHARE"),
    ))
    .bind(order_ids.to_vec())
    .fetch_all(&mut tx.conn())
    .await?;
    // An event's cancellation voids its tickets under the event row's lock: one committing
    // now is waited for, and the tickets below are issued void after it.
    if d.locks_rows() && !orders.is_empty() {
        let event_ids: std::collections::BTreeSet<String> = orders
            .iter()
            .map(|row| row.get::<String, _>(1))
            .collect::<StoreResult<_>>()?;
        query("SELECT 1 FROM event WHERE event_id = ANY($1) ORDER BY event_id FOR SHARE")
            .bind(event_ids.into_iter().collect::<Vec<_>>())
            .execute(&mut tx.conn())
            .await?;
    }
    // The holders given before the checkout, by (order, slot): copied onto the tickets.
    let holders: std::collections::HashMap<(String, String), (Option<String>, String)> =
        query(format!(
            "SELECT o.order_id, h.slot, h.name, h.answers
               FROM orders o JOIN hold_holder h ON h.event_id = o.event_id AND h.hold_id = o.hold_id
              WHERE o.order_id {ids}",
            ids = d.in_list("$1"),
        ))
        .bind(order_ids.to_vec())
        .fetch_all(&mut tx.conn())
        .await?
        .iter()
        .map(|row| Ok(((row.get(0)?, row.get(1)?), (row.get(2)?, row.get(3)?))))
        .collect::<StoreResult<_>>()?;
    let mut drafts = Vec::new();
    for row in &orders {
        let (order_id, event_id, account_id): (String, String, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?);
        let seats = parse_held_seats(&row.get::<String, _>(3)?)?;
        let tier_id: Option<String> = row.get(4)?;
        let quantity = u32::try_from(row.get::<i32, _>(5)?).unwrap_or(0);
        for draft in ticket_drafts(&event_id, &order_id, &seats, tier_id.as_deref(), quantity) {
            let code = sign(&draft);
            drafts.push((draft, account_id.clone(), code));
        }
    }
    if drafts.is_empty() {
        return Ok(0);
    }
    let rows = Rows::new()
        .texts("e", drafts.iter().map(|(t, _, _)| t.event_id.as_str()))
        .texts("t", drafts.iter().map(|(t, _, _)| t.ticket_id.as_str()))
        .texts("o", drafts.iter().map(|(t, _, _)| t.order_id.as_str()))
        .texts("a", drafts.iter().map(|(_, a, _)| a.as_str()))
        .opt_texts("s", drafts.iter().map(|(t, _, _)| t.seat_id.clone()))
        .opt_texts("r", drafts.iter().map(|(t, _, _)| t.tier_id.clone()))
        .int4s(
            "n",
            drafts
                .iter()
                .map(|(t, _, _)| i32::try_from(t.unit).unwrap_or(i32::MAX)),
        )
        .texts("c", drafts.iter().map(|(_, _, c)| c.as_str()));
    let holder_of = |draft: &TicketDraft| {
        let slot = HolderSlot::of_ticket(draft.seat_id.as_deref(), draft.unit).key();
        holders.get(&(draft.order_id.clone(), slot))
    };
    let rows = rows
        .opt_texts(
            "hn",
            drafts
                .iter()
                .map(|(t, _, _)| holder_of(t).and_then(|(name, _)| name.clone())),
        )
        .opt_texts(
            "ha",
            drafts
                .iter()
                .map(|(t, _, _)| holder_of(t).map(|(_, answers)| answers.clone())),
        );
    // (`WHERE true`: SQLite would read `ON CONFLICT` as the join's `ON`.)
    let issued = query(format!(
        "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code,
                             status, void_reason, issued_at, holder_name, holder_answers)
         SELECT u.e, u.t, u.o, u.a, u.s, u.r, u.n, u.c,
                CASE WHEN c.event_id IS NULL THEN 'VALID' ELSE 'VOIDED' END,
                CASE WHEN c.event_id IS NULL THEN NULL ELSE '{cancelled}' END, {now},
                u.hn, u.ha
           FROM {u} LEFT JOIN event_cancellation c ON c.event_id = u.e WHERE true
         ON CONFLICT (order_id, unit) DO NOTHING",
        now = d.now_ms(),
        u = rows.table(d, 1, "u"),
        cancelled = boxoffice_store::cancellation::REASON_EVENT_CANCELLED,
    ))
    .bind_rows(d, rows)
    .execute(&mut tx.conn())
    .await?;
    tx.commit().await?;
    Ok(u32::try_from(issued).unwrap_or(u32::MAX))
}

/// One ticket.
pub async fn ticket(db: &Db, ticket_id: &str) -> StoreResult<Option<TicketView>> {
    query("SELECT * FROM ticket WHERE ticket_id = $1")
        .bind(ticket_id)
        .fetch_optional(&mut db.read().await?.conn())
        .await?
        .as_ref()
        .map(ticket_from_row)
        .transpose()
}

/// Checks a ticket in: `VALID` (and not in an exchange) to `CHECKED_IN`, once. Returns
/// whether this call checked it in, and the ticket's status after.
pub async fn check_in(db: &Db, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let updated = query(format!(
        "UPDATE ticket SET status = 'CHECKED_IN', checked_in_at = {}
          WHERE ticket_id = $1 AND status = 'VALID' AND exchange_id IS NULL",
        d.now_ms(),
    ))
    .bind(ticket_id)
    .execute(&mut tx.conn())
    .await?;
    let status = query("SELECT status, exchange_id FROM ticket WHERE ticket_id = $1")
        .bind(ticket_id)
        .fetch_optional(&mut tx.conn())
        .await?;
    tx.commit().await?;
    status
        .map(|row| Ok((updated == 1, ticket_status(row.get(0)?, row.get(1)?))))
        .transpose()
}

/// An order a group's command reads under its lock, with its payment operation.
#[derive(Debug, Clone)]
pub struct LockedPaidOrder {
    pub order: LockedOrder,
    /// The payment operation's status, id and amount (none without an operation).
    pub payment_status: Option<String>,
    pub operation_id: Option<String>,
    pub paid_minor: Option<i64>,
}

/// The orders of `order_ids` with their payments, locked in order-id order (PostgreSQL `FOR
/// UPDATE OF o`, as a transfer offer locks them; SQLite's write transaction holds the file):
/// what an exchange, a transfer or a refund of their tickets is judged on.
pub async fn lock_orders(
    conn: &mut Conn<'_>,
    order_ids: Vec<&str>,
) -> StoreResult<BTreeMap<String, LockedPaidOrder>> {
    let d = conn.dialect();
    query(format!(
        "SELECT o.order_id, o.status, o.account_id, o.event_id, o.hold_id, p.status,
                p.operation_id, p.amount_minor
           FROM orders o LEFT JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.order_id {} ORDER BY o.order_id {}",
        d.in_list("$1"),
        d.lock("FOR UPDATE OF o"),
    ))
    .bind(order_ids)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| {
        let order = LockedOrder {
            status: row.get(1)?,
            account_id: row.get(2)?,
            event_id: row.get(3)?,
            hold_id: row.get(4)?,
        };
        let locked = LockedPaidOrder {
            order,
            payment_status: row.get(5)?,
            operation_id: row.get(6)?,
            paid_minor: row.get(7)?,
        };
        Ok((row.get(0)?, locked))
    })
    .collect()
}

/// The tickets of `ticket_ids`, locked in ticket-id order (each is then judged: a filter
/// beside the lock would skip one changed concurrently).
pub async fn lock_tickets(
    conn: &mut Conn<'_>,
    ticket_ids: Vec<&str>,
) -> StoreResult<BTreeMap<String, LockedTicket>> {
    let d = conn.dialect();
    query(format!(
        "SELECT ticket_id, order_id, status, exchange_id FROM ticket
          WHERE ticket_id {} ORDER BY ticket_id {}",
        d.in_list("$1"),
        d.lock("FOR UPDATE"),
    ))
    .bind(ticket_ids)
    .fetch_all(conn)
    .await?
    .iter()
    .map(|row| {
        let ticket = LockedTicket {
            order_id: row.get(1)?,
            status: row.get(2)?,
            exchange_id: row.get(3)?,
        };
        Ok((row.get(0)?, ticket))
    })
    .collect()
}
