//! Exchanges on PostgreSQL (see `boxoffice_store::exchange` for the rules). Lock order: the
//! order's tickets, then seats in (event, seat) order, then tiers in (event, tier) order, then
//! hold, order and exchange rows; the seat-map version rows last (`seatmap::record`).

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::Idempotent;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::checkout::TicketView;
use boxoffice_store::exchange::{
    BatchFacts, Decided, ExchangeBegun, ExchangeStart, ExchangeStatus, ExchangeView, Granted,
    LockedSeat, OwnedTicket, RenderExchange, Surrender, ToSide, decide_batch, surrender,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{HeldSeat, HoldView, NewRecord, StoreError, StoreResult, held_seats_json};
use sqlx::{Postgres, Row, Transaction};

use crate::checkout::{load_order, load_order_heads, outbox, outbox_many, ticket_from_row};
use crate::{HOLD_COLUMNS, classify, hold_from_row, insert_records_each, seatmap, store_now};

const EXCHANGE_COLUMNS: &str = "exchange_id, account_id, order_id, from_event_id, to_event_id,
     ticket_ids::text AS ticket_ids, from_value_minor, new_hold_id, new_order_id, to_value_minor,
     amount_due_minor, currency, status, created_at, updated_at";

async fn load_exchange(
    conn: &mut sqlx::PgConnection,
    exchange_id: &str,
) -> StoreResult<Option<ExchangeView>> {
    let sql = format!("SELECT {EXCHANGE_COLUMNS} FROM exchange WHERE exchange_id = $1");
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(exchange_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?
    else {
        return Ok(None);
    };
    let new_hold_id: String = row.get("new_hold_id");
    let sql = format!("SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = $1");
    let hold_row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&new_hold_id)
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let status: String = row.get("status");
    let ticket_ids: String = row.get("ticket_ids");
    Ok(Some(ExchangeView {
        exchange_id: row.get("exchange_id"),
        account_id: row.get("account_id"),
        order_id: row.get("order_id"),
        from_event_id: row.get("from_event_id"),
        to_event_id: row.get("to_event_id"),
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?,
        from_value_minor: row.get("from_value_minor"),
        new_hold: hold_from_row(&hold_row)?,
        new_order_id: row.get("new_order_id"),
        to_value_minor: row.get("to_value_minor"),
        amount_due_minor: row.get("amount_due_minor"),
        currency: row.get("currency"),
        status: ExchangeStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?,
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    }))
}

/// Locks seats of one or two events in (event, seat) order; returns
/// `(event, seat, status, hold_expires_at, order_id)` of each.
async fn lock_seats(
    tx: &mut Transaction<'_, Postgres>,
    mut wanted: Vec<(String, String)>,
) -> StoreResult<
    Vec<(
        String,
        String,
        String,
        Option<OffsetDateTime>,
        Option<String>,
    )>,
> {
    wanted.sort();
    wanted.dedup();
    let mut out = Vec::with_capacity(wanted.len());
    let mut i = 0;
    while i < wanted.len() {
        let event_id = wanted[i].0.clone();
        let mut ids = Vec::new();
        while i < wanted.len() && wanted[i].0 == event_id {
            ids.push(wanted[i].1.clone());
            i += 1;
        }
        let rows = sqlx::query_as::<_, (String, String, Option<OffsetDateTime>, Option<String>)>(
            "SELECT seat_id, status, hold_expires_at, order_id FROM seat
              WHERE event_id = $1 AND seat_id = ANY($2) ORDER BY seat_id FOR UPDATE",
        )
        .bind(&event_id)
        .bind(&ids)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        out.extend(
            rows.into_iter()
                .map(|(seat, status, until, order)| (event_id.clone(), seat, status, until, order)),
        );
    }
    Ok(out)
}

/// Gives up the surrendered tickets: voided (keeping the exchange's id), their seats back on
/// sale or their tier units returned, the old hold's count of units that left raised.
async fn swap_out(
    tx: &mut Transaction<'_, Postgres>,
    exchange_id: &str,
    old: &OrderView,
    gone: &Surrender,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let voided = sqlx::query(
        "UPDATE ticket SET status = 'VOIDED', exchange_id = $2
          WHERE ticket_id = ANY($1) AND status = 'VALID' AND (exchange_id IS NULL OR exchange_id = $2)",
    )
    .bind(&gone.ticket_ids)
    .bind(exchange_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if voided != gone.ticket_ids.len() as u64 {
        return Err(StoreError::Internal(format!(
            "exchange {exchange_id} voided {voided} of {} tickets",
            gone.ticket_ids.len()
        )));
    }
    if !gone.seat_ids.is_empty() {
        let freed = sqlx::query_scalar::<_, String>(
            "UPDATE seat SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = version + 1
              WHERE event_id = $1 AND seat_id = ANY($2) AND status = 'SOLD' AND order_id = $3
             RETURNING seat_id",
        )
        .bind(&old.event_id)
        .bind(&gone.seat_ids)
        .bind(&old.order_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if freed.len() != gone.seat_ids.len() {
            return Err(StoreError::Internal(format!(
                "exchange {exchange_id} freed {} of {} seats of order {}",
                freed.len(),
                gone.seat_ids.len(),
                old.order_id
            )));
        }
        for seat_id in &freed {
            map.seat(&old.event_id, seat_id, SeatStatus::Available, None);
        }
    }
    if let Some((tier_id, units)) = &gone.tier {
        let available = sqlx::query_scalar::<_, i64>(
            "UPDATE tier SET sold = sold - $3, available = available + $3 WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&old.event_id)
        .bind(tier_id)
        .bind(i64::from(*units))
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        map.tier(&old.event_id, tier_id, available);
    }
    sqlx::query("UPDATE hold SET exchanged_out = exchanged_out + $2 WHERE hold_id = $1")
        .bind(&old.hold_id)
        .bind(gone.quantity() as i32)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    Ok(())
}

/// The surrender an exchange marked, read back from its tickets (for the final swap).
async fn marked_surrender(
    tx: &mut Transaction<'_, Postgres>,
    exchange_id: &str,
    old: &OrderView,
    from_value_minor: i64,
) -> StoreResult<Surrender> {
    let rows = sqlx::query_as::<_, (String, Option<String>)>(
        "SELECT ticket_id, seat_id FROM ticket WHERE exchange_id = $1 AND status = 'VALID' ORDER BY unit FOR UPDATE",
    )
    .bind(exchange_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(Surrender::marked(
        rows,
        old.tier_id.as_deref(),
        from_value_minor,
    ))
}

/// Called by the confirmation of a hold's order: if the hold is an exchange's, the old side is
/// swapped out in the same transaction and the exchange completes.
pub(crate) async fn complete_exchange_of(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
    new_order_id: &str,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let Some((exchange_id, old_order_id, from_value)) = sqlx::query_as::<_, (String, String, i64)>(
        "SELECT exchange_id, order_id, from_value_minor FROM exchange
              WHERE new_hold_id = $1 AND status = 'PAYMENT_REQUIRED' FOR UPDATE",
    )
    .bind(&hold.hold_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    else {
        return Ok(());
    };
    let old = load_order(tx, &old_order_id).await?.ok_or_else(|| {
        StoreError::Internal(format!("exchange {exchange_id} lost order {old_order_id}"))
    })?;
    let gone = marked_surrender(tx, &exchange_id, &old, from_value).await?;
    lock_seats(
        tx,
        gone.seat_ids
            .iter()
            .map(|s| (old.event_id.clone(), s.clone()))
            .collect(),
    )
    .await?;
    swap_out(tx, &exchange_id, &old, &gone, map).await?;
    sqlx::query(
        "UPDATE exchange SET status = 'COMPLETED', new_order_id = $2, updated_at = $3
          WHERE exchange_id = $1 AND status = 'PAYMENT_REQUIRED'",
    )
    .bind(&exchange_id)
    .bind(new_order_id)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    outbox(
        tx,
        &old.event_id,
        boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
        serde_json::json!({"exchangeId": exchange_id, "orderId": old.order_id, "newOrderId": new_order_id}),
        now,
    )
    .await
}

/// Whether the hold may be sold: it is no exchange's, or its exchange still waits for
/// payment with every ticket it gave up still marked (a compensation that cancelled the old
/// order ends the exchange; a sale then would sell the new seats for the difference only).
pub(crate) async fn still_open(
    tx: &mut Transaction<'_, Postgres>,
    hold_id: &str,
) -> StoreResult<bool> {
    let Some((exchange_id, status, n_tickets)) = sqlx::query_as::<_, (String, String, i32)>(
        "SELECT exchange_id, status, jsonb_array_length(ticket_ids) FROM exchange WHERE new_hold_id = $1",
    )
    .bind(hold_id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?
    else {
        return Ok(true);
    };
    let marked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ticket WHERE exchange_id = $1 AND status = 'VALID'",
    )
    .bind(&exchange_id)
    .fetch_one(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(status == ExchangeStatus::PaymentRequired.as_str() && marked == i64::from(n_tickets))
}

/// Called whenever holds end without a sale (released, expired, payment failed): their
/// exchanges end too and the old tickets lose their mark, valid again. Conditional on the
/// exchange's status: a second call finds nothing to do.
pub(crate) async fn end_exchanges_of(
    tx: &mut Transaction<'_, Postgres>,
    hold_ids: &[&str],
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let ended = sqlx::query_as::<_, (String, String, String)>(
        "UPDATE exchange SET status = $2, updated_at = $3
          WHERE new_hold_id = ANY($1) AND status = 'PAYMENT_REQUIRED'
         RETURNING exchange_id, from_event_id, order_id",
    )
    .bind(hold_ids)
    .bind(status.as_str())
    .bind(now)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    if ended.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = ended.iter().map(|(x, _, _)| x.as_str()).collect();
    sqlx::query(
        "UPDATE ticket SET exchange_id = NULL WHERE exchange_id = ANY($1) AND status = 'VALID'",
    )
    .bind(&ids)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    for (exchange_id, event_id, order_id) in &ended {
        outbox(
            tx,
            event_id,
            boxoffice_store::exchange::topic::EXCHANGE_ENDED,
            serde_json::json!({"exchangeId": exchange_id, "orderId": order_id, "status": status.as_str()}),
            now,
        )
        .await?;
    }
    Ok(())
}

impl crate::PgStore {
    pub(crate) async fn exchange_by_id(
        &self,
        exchange_id: &str,
    ) -> StoreResult<Option<ExchangeView>> {
        let mut conn = self.pool().acquire().await.map_err(classify)?;
        load_exchange(&mut conn, exchange_id).await
    }

    /// Decides a batch of exchanges in one transaction (see `decide_batch`): a handful of
    /// statements whatever the batch's size. Lock order: the orders' tickets in (order, unit)
    /// order, seats in (event, seat) order, tiers in (event, tier) order; the seat-map
    /// version rows last.
    pub(crate) async fn exchange_batch_once(
        &self,
        starts: &[ExchangeStart],
        render: &RenderExchange,
    ) -> StoreResult<Vec<ExchangeBegun>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let mut answers: Vec<Option<ExchangeBegun>> = vec![None; starts.len()];
        // 1. Keys seen before answer as before.
        for (i, prior) in prior_answers(&mut tx, starts)
            .await?
            .into_iter()
            .enumerate()
        {
            answers[i] = match prior {
                Some(Idempotent::Replayed(stored)) => Some(ExchangeBegun::Replayed(stored)),
                Some(_) => Some(ExchangeBegun::KeyReusedWithOtherRequest),
                None => None,
            };
        }
        let open: Vec<usize> = (0..starts.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        if open.is_empty() {
            return Ok(answers.into_iter().flatten().collect());
        }
        // 2. The orders' tickets, locked: a second exchange or a check-in of them waits.
        let mut order_ids: Vec<&str> = open.iter().map(|&i| starts[i].order_id.as_str()).collect();
        order_ids.sort_unstable();
        order_ids.dedup();
        let ticket_rows = sqlx::query(
            "SELECT * FROM ticket WHERE order_id = ANY($1) ORDER BY order_id, unit FOR UPDATE",
        )
        .bind(&order_ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let mut facts = BatchFacts::default();
        let mut ticket_views: BTreeMap<String, Vec<TicketView>> = BTreeMap::new();
        for row in &ticket_rows {
            let view = ticket_from_row(row);
            facts
                .tickets
                .entry(view.order_id.clone())
                .or_default()
                .push(OwnedTicket {
                    ticket_id: view.ticket_id.clone(),
                    seat_id: view.seat_id.clone(),
                    tier_id: view.tier_id.clone(),
                    unit: view.unit,
                    status: row.get("status"),
                    exchange_id: row.get("exchange_id"),
                });
            ticket_views
                .entry(view.order_id.clone())
                .or_default()
                .push(view);
        }
        for order in load_order_heads(&mut tx, &order_ids).await? {
            facts.orders.insert(order.order_id.clone(), order);
        }
        let now = store_now(&mut tx).await?;
        // 3. What each would give up and take, judged alone (for the locks; the decision in
        //    step 5 judges them again in order).
        let mut wanted: Vec<(String, String)> = Vec::new();
        let mut tiers: Vec<(String, String)> = Vec::new();
        let mut accounts: Vec<(String, String)> = Vec::new();
        for &i in &open {
            let start = &starts[i];
            let Some(order) = facts.orders.get(&start.order_id) else {
                continue;
            };
            if order.event_id != start.from_event.event_id {
                return Err(StoreError::Internal(format!(
                    "order {} is of event {}, not {}",
                    order.order_id, order.event_id, start.from_event.event_id
                )));
            }
            let tickets = facts
                .tickets
                .get(&order.order_id)
                .cloned()
                .unwrap_or_default();
            if let Ok(gone) = surrender(order, &tickets, &start.from) {
                wanted.extend(
                    gone.seat_ids
                        .iter()
                        .map(|s| (order.event_id.clone(), s.clone())),
                );
                if let Some((tier_id, _)) = gone.tier {
                    tiers.push((order.event_id.clone(), tier_id));
                }
            }
            let to_event = &start.to_event.event_id;
            match &start.to {
                ToSide::Seats(seats) => {
                    wanted.extend(seats.iter().map(|s| (to_event.clone(), s.seat_id.clone())));
                }
                ToSide::Tier { tier_id, .. } => tiers.push((to_event.clone(), tier_id.clone())),
            }
            accounts.push((to_event.clone(), order.account_id.clone()));
        }
        // 4. Lock the seats and tiers, read the purchase-limit usage.
        for (event_id, seat_id, status, until, order_id) in lock_seats(&mut tx, wanted).await? {
            facts.seats.insert(
                (event_id, seat_id),
                LockedSeat {
                    status,
                    hold_expires_at: until,
                    order_id,
                },
            );
        }
        tiers.sort();
        tiers.dedup();
        if !tiers.is_empty() {
            let (events, ids): (Vec<&str>, Vec<&str>) =
                tiers.iter().map(|(e, t)| (e.as_str(), t.as_str())).unzip();
            let rows = sqlx::query_as::<_, (String, String, i64)>(
                "SELECT t.event_id, t.tier_id, t.available FROM tier t
                   JOIN UNNEST($1::text[], $2::text[]) AS u(e, id) ON t.event_id = u.e AND t.tier_id = u.id
                  ORDER BY t.event_id, t.tier_id FOR UPDATE OF t",
            )
            .bind(&events)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
            for (event_id, tier_id, available) in rows {
                facts.tier_available.insert((event_id, tier_id), available);
            }
        }
        accounts.sort();
        accounts.dedup();
        if !accounts.is_empty() {
            let (events, ids): (Vec<&str>, Vec<&str>) = accounts
                .iter()
                .map(|(e, a)| (e.as_str(), a.as_str()))
                .unzip();
            let rows = sqlx::query_as::<_, (String, String, i64)>(
                "SELECT h.event_id, h.account_id, coalesce(sum(h.quantity - h.exchanged_out), 0)::bigint
                   FROM hold h JOIN UNNEST($1::text[], $2::text[]) AS u(e, a) ON h.event_id = u.e AND h.account_id = u.a
                  WHERE h.status = 'CONFIRMED' OR (h.status IN ('HELD', 'PAYMENT_PENDING') AND h.expires_at > $3)
                  GROUP BY h.event_id, h.account_id",
            )
            .bind(&events)
            .bind(&ids)
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
            for (event_id, account_id, units) in rows {
                facts.usage.insert((event_id, account_id), units);
            }
        }
        // 5. Decide in arrival order.
        let asked: Vec<&ExchangeStart> = open.iter().map(|&i| &starts[i]).collect();
        let decided = decide_batch(now, &asked, &mut facts);
        let mut granted: Vec<(&ExchangeStart, Granted)> = Vec::new();
        for (&i, decision) in open.iter().zip(decided) {
            answers[i] = match decision {
                Decided::Granted(grant) => {
                    granted.push((&starts[i], grant));
                    None
                }
                Decided::Refused(refused) => Some(ExchangeBegun::Refused(refused)),
                Decided::NotFound => Some(ExchangeBegun::OrderNotFound),
            };
        }
        // 6. Write every grant, a statement per kind of row.
        let mut map = MapChanges::default();
        let mut done: Vec<(ExchangeView, OrderView)> = Vec::with_capacity(granted.len());
        if !granted.is_empty() {
            let plans: Vec<Plan> = granted
                .iter()
                .map(|(start, grant)| Plan::new(start, grant, now))
                .collect();
            write_grants(&mut tx, &plans, &facts, now, &mut map).await?;
            let mut records = Vec::with_capacity(plans.len());
            for plan in &plans {
                let order = facts.orders.get(&plan.start.order_id).ok_or_else(|| {
                    StoreError::Internal("a granted exchange lost its order".into())
                })?;
                let exchange = plan.view(order);
                let mut order = order.clone();
                order.tickets = ticket_views
                    .get(&order.order_id)
                    .cloned()
                    .unwrap_or_default();
                // The order as this exchange left it (earlier grants of the batch included).
                for ticket in order.tickets.iter_mut() {
                    if let Some(owned) = facts
                        .tickets
                        .get(&order.order_id)
                        .and_then(|ts| ts.iter().find(|t| t.ticket_id == ticket.ticket_id))
                        && owned.exchange_id.is_some()
                        && (granted_before(&plans, plan, owned.exchange_id.as_deref()))
                    {
                        ticket.exchange_id = owned.exchange_id.clone();
                        ticket.status = crate::checkout::ticket_status(
                            owned.status.clone(),
                            owned.exchange_id.clone(),
                        );
                    }
                }
                records.push((
                    plan.start.scope.endpoint.as_str(),
                    NewRecord {
                        account_id: plan.start.scope.account_id.clone(),
                        key: plan.start.scope.key.clone(),
                        request_digest: plan.start.request_digest.clone(),
                        response: render(&exchange, &order),
                    },
                ));
                done.push((exchange, order));
            }
            let records: Vec<(&str, &NewRecord)> = records.iter().map(|(e, r)| (*e, r)).collect();
            insert_records_each(&mut tx, &records, now).await?;
            seatmap::record(&mut tx, &map, now).await?;
        }
        tx.commit().await.map_err(classify)?;
        let mut done = done.into_iter();
        Ok(answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| {
                    let (exchange, order) = done.next().expect("one grant per open answer");
                    ExchangeBegun::Done {
                        exchange: Box::new(exchange),
                        order: Box::new(order),
                    }
                })
            })
            .collect())
    }
}

/// Whether the exchange `mark` was granted in this batch no later than `plan`.
fn granted_before(plans: &[Plan], plan: &Plan, mark: Option<&str>) -> bool {
    let Some(mark) = mark else {
        return false;
    };
    plans
        .iter()
        .take_while(|p| !std::ptr::eq(*p, plan))
        .chain(std::iter::once(plan))
        .any(|p| p.start.exchange_id == mark)
}

/// One granted exchange, as rows to write.
struct Plan<'a> {
    start: &'a ExchangeStart,
    grant: &'a Granted,
    expires_at: OffsetDateTime,
    seats: Vec<(String, i64)>,
    tier_id: Option<String>,
    quantity: u32,
}

impl<'a> Plan<'a> {
    fn new(start: &'a ExchangeStart, grant: &'a Granted, now: OffsetDateTime) -> Self {
        let (seats, tier_id, quantity) = match &start.to {
            ToSide::Seats(seats) => (
                seats
                    .iter()
                    .map(|s| (s.seat_id.clone(), s.price_minor))
                    .collect(),
                None,
                seats.len() as u32,
            ),
            ToSide::Tier {
                tier_id, quantity, ..
            } => (Vec::new(), Some(tier_id.clone()), *quantity),
        };
        let expires_at = if grant.pays() {
            now + time::Duration::seconds(i64::from(start.to_event.hold_ttl_s))
        } else {
            now
        };
        Self {
            start,
            grant,
            expires_at,
            seats,
            tier_id,
            quantity,
        }
    }

    fn pays(&self) -> bool {
        self.grant.pays()
    }

    fn to_event(&self) -> &str {
        &self.start.to_event.event_id
    }

    /// The exchange as written (its answer is rendered from this, not read back).
    fn view(&self, order: &OrderView) -> ExchangeView {
        let now = if self.pays() {
            self.expires_at - time::Duration::seconds(i64::from(self.start.to_event.hold_ttl_s))
        } else {
            self.expires_at
        };
        ExchangeView {
            exchange_id: self.start.exchange_id.clone(),
            account_id: order.account_id.clone(),
            order_id: order.order_id.clone(),
            from_event_id: order.event_id.clone(),
            to_event_id: self.to_event().to_owned(),
            ticket_ids: self.grant.gone.ticket_ids.clone(),
            from_value_minor: self.grant.gone.value_minor,
            new_hold: HoldView {
                hold_id: self.start.new_hold_id.clone(),
                event_id: self.to_event().to_owned(),
                account_id: order.account_id.clone(),
                status: if self.pays() {
                    HoldStatus::Held
                } else {
                    HoldStatus::Confirmed
                },
                expires_at: self.expires_at,
                seats: self
                    .seats
                    .iter()
                    .map(|(seat_id, price_minor)| HeldSeat {
                        seat_id: seat_id.clone(),
                        price_minor: *price_minor,
                    })
                    .collect(),
                tier_id: self.tier_id.clone(),
                quantity: self.quantity,
                total_minor: self.grant.to_value_minor,
                currency: self.start.to_event.currency.clone(),
                created_at: now,
                updated_at: now,
            },
            new_order_id: (!self.pays()).then(|| self.start.new_order_id.clone()),
            to_value_minor: self.grant.to_value_minor,
            amount_due_minor: self.grant.amount_due_minor,
            currency: self.start.to_event.currency.clone(),
            status: if self.pays() {
                ExchangeStatus::PaymentRequired
            } else {
                ExchangeStatus::Completed
            },
            created_at: now,
            updated_at: now,
        }
    }
}

/// The stored answers of the batch's keys, in order (`None`: never seen).
async fn prior_answers(
    tx: &mut Transaction<'_, Postgres>,
    starts: &[ExchangeStart],
) -> StoreResult<Vec<Option<Idempotent>>> {
    let accounts: Vec<&str> = starts.iter().map(|s| s.scope.account_id.as_str()).collect();
    let endpoints: Vec<&str> = starts.iter().map(|s| s.scope.endpoint.as_str()).collect();
    let keys: Vec<&str> = starts.iter().map(|s| s.scope.key.as_str()).collect();
    let rows = sqlx::query_as::<_, (i64, String, i32, Vec<u8>)>(
        "SELECT u.i, d.request_digest, d.status_code, d.response_body
           FROM UNNEST($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(a, e, k, i)
           JOIN idempotency d ON d.account_id = u.a AND d.endpoint = u.e AND d.idem_key = u.k",
    )
    .bind(&accounts)
    .bind(&endpoints)
    .bind(&keys)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    let mut answers = vec![None; starts.len()];
    for (i, digest, status, body) in rows {
        let Some(start) = usize::try_from(i - 1).ok().and_then(|i| starts.get(i)) else {
            continue;
        };
        answers[(i - 1) as usize] = Some(boxoffice_store::stored_answer_of(
            &digest,
            &start.request_digest,
            i64::from(status),
            body,
        ));
    }
    Ok(answers)
}

/// Writes the granted exchanges: new holds, new seats, tier counts, exchange rows, old
/// tickets (voided or marked), old seats back on sale, old holds' exchanged-out counts, new
/// orders and their (zero) payments, outbox rows. Every update is conditional and counted.
async fn write_grants(
    tx: &mut Transaction<'_, Postgres>,
    plans: &[Plan<'_>],
    facts: &BatchFacts,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    // New holds.
    let mut h = HoldRows::default();
    for plan in plans {
        let order = &facts.orders[&plan.start.order_id];
        h.event.push(plan.to_event());
        h.hold.push(&plan.start.new_hold_id);
        h.account.push(&order.account_id);
        h.status
            .push(if plan.pays() { "HELD" } else { "CONFIRMED" });
        h.tier.push(plan.tier_id.as_deref());
        h.quantity.push(plan.quantity as i32);
        h.seats.push(held_seats_json(&plan.seats));
        h.total.push(plan.grant.to_value_minor);
        h.currency.push(&plan.start.to_event.currency);
        h.key.push(format!("exchange:{}", plan.start.exchange_id));
        h.expires.push(plan.expires_at);
        h.order
            .push((!plan.pays()).then_some(plan.start.new_order_id.as_str()));
    }
    sqlx::query(
        "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                           idempotency_key, created_at, expires_at, updated_at, order_id)
         SELECT e, h, a, s, t, q, j::jsonb, tot, c, k, $13, x, $13, o
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],
                       $8::bigint[], $9::text[], $10::text[], $11::timestamptz[], $12::text[])
                AS u(e, h, a, s, t, q, j, tot, c, k, x, o)",
    )
    .bind(&h.event)
    .bind(&h.hold)
    .bind(&h.account)
    .bind(&h.status)
    .bind(&h.tier)
    .bind(&h.quantity)
    .bind(&h.seats)
    .bind(&h.total)
    .bind(&h.currency)
    .bind(&h.key)
    .bind(&h.expires)
    .bind(&h.order)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;

    // New seats: held until paid, or sold at once.
    let mut seat_event = Vec::new();
    let mut seat_id = Vec::new();
    let mut seat_status = Vec::new();
    let mut seat_hold = Vec::new();
    let mut seat_until: Vec<Option<OffsetDateTime>> = Vec::new();
    let mut seat_order: Vec<Option<&str>> = Vec::new();
    for plan in plans {
        for (id, _) in &plan.seats {
            seat_event.push(plan.to_event());
            seat_id.push(id.as_str());
            seat_status.push(if plan.pays() { "HELD" } else { "SOLD" });
            seat_hold.push(plan.start.new_hold_id.as_str());
            seat_until.push(plan.pays().then_some(plan.expires_at));
            seat_order.push((!plan.pays()).then_some(plan.start.new_order_id.as_str()));
            if plan.pays() {
                map.seat(plan.to_event(), id, SeatStatus::Held, Some(plan.expires_at));
            } else {
                map.seat(plan.to_event(), id, SeatStatus::Sold, None);
            }
        }
    }
    if !seat_id.is_empty() {
        let taken = sqlx::query(
            "UPDATE seat s SET status = u.st, hold_id = u.h, hold_expires_at = u.x, order_id = u.o,
                    version = s.version + 1
               FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[])
                    AS u(e, id, st, h, x, o)
              WHERE s.event_id = u.e AND s.seat_id = u.id",
        )
        .bind(&seat_event)
        .bind(&seat_id)
        .bind(&seat_status)
        .bind(&seat_hold)
        .bind(&seat_until)
        .bind(&seat_order)
        .execute(&mut **tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if taken != seat_id.len() as u64 {
            return Err(StoreError::Internal(format!(
                "exchange batch took {taken} of {} seats",
                seat_id.len()
            )));
        }
    }

    // Tier counts, both sides, summed per tier.
    let mut tier_deltas: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
    for plan in plans {
        if let Some(tier_id) = &plan.tier_id {
            let q = i64::from(plan.quantity);
            let d = tier_deltas.entry((plan.to_event(), tier_id)).or_default();
            d.0 -= q;
            if plan.pays() {
                d.1 += q;
            } else {
                d.2 += q;
            }
        }
        if let (Some((tier_id, units)), false) = (&plan.grant.gone.tier, plan.pays()) {
            let d = tier_deltas
                .entry((plan.start.from_event.event_id.as_str(), tier_id))
                .or_default();
            d.0 += i64::from(*units);
            d.2 -= i64::from(*units);
        }
    }
    if !tier_deltas.is_empty() {
        let (mut te, mut ti, mut ta, mut th, mut ts) = (vec![], vec![], vec![], vec![], vec![]);
        for ((event_id, tier_id), (a, h, s)) in &tier_deltas {
            te.push(*event_id);
            ti.push(*tier_id);
            ta.push(*a);
            th.push(*h);
            ts.push(*s);
        }
        let rows = sqlx::query_as::<_, (String, String, i64)>(
            "UPDATE tier t SET available = t.available + u.a, held = t.held + u.h, sold = t.sold + u.s
               FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(e, id, a, h, s)
              WHERE t.event_id = u.e AND t.tier_id = u.id
             RETURNING t.event_id, t.tier_id, t.available",
        )
        .bind(&te)
        .bind(&ti)
        .bind(&ta)
        .bind(&th)
        .bind(&ts)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        for (event_id, tier_id, available) in rows {
            map.tier(&event_id, &tier_id, available);
        }
    }

    // The exchanges.
    let ids: Vec<&str> = plans.iter().map(|p| p.start.exchange_id.as_str()).collect();
    let accounts: Vec<&str> = plans
        .iter()
        .map(|p| facts.orders[&p.start.order_id].account_id.as_str())
        .collect();
    let orders: Vec<&str> = plans.iter().map(|p| p.start.order_id.as_str()).collect();
    let froms: Vec<&str> = plans
        .iter()
        .map(|p| p.start.from_event.event_id.as_str())
        .collect();
    let tos: Vec<&str> = plans.iter().map(|p| p.to_event()).collect();
    let tickets: Vec<String> = plans
        .iter()
        .map(|p| serde_json::to_string(&p.grant.gone.ticket_ids).unwrap_or_else(|_| "[]".into()))
        .collect();
    let from_values: Vec<i64> = plans.iter().map(|p| p.grant.gone.value_minor).collect();
    let holds: Vec<&str> = plans.iter().map(|p| p.start.new_hold_id.as_str()).collect();
    let new_orders: Vec<Option<&str>> = plans
        .iter()
        .map(|p| (!p.pays()).then_some(p.start.new_order_id.as_str()))
        .collect();
    let to_values: Vec<i64> = plans.iter().map(|p| p.grant.to_value_minor).collect();
    let dues: Vec<i64> = plans.iter().map(|p| p.grant.amount_due_minor).collect();
    let currencies: Vec<&str> = plans
        .iter()
        .map(|p| p.start.to_event.currency.as_str())
        .collect();
    let statuses: Vec<&str> = plans
        .iter()
        .map(|p| {
            if p.pays() {
                ExchangeStatus::PaymentRequired.as_str()
            } else {
                ExchangeStatus::Completed.as_str()
            }
        })
        .collect();
    let keys: Vec<&str> = plans.iter().map(|p| p.start.scope.key.as_str()).collect();
    sqlx::query(
        "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                               from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                               currency, status, idempotency_key, created_at, updated_at)
         SELECT x, a, o, f, t, j::jsonb, fv, h, n, tv, d, c, s, k, $15, $15
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                       $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[])
                AS u(x, a, o, f, t, j, fv, h, n, tv, d, c, s, k)",
    )
    .bind(&ids)
    .bind(&accounts)
    .bind(&orders)
    .bind(&froms)
    .bind(&tos)
    .bind(&tickets)
    .bind(&from_values)
    .bind(&holds)
    .bind(&new_orders)
    .bind(&to_values)
    .bind(&dues)
    .bind(&currencies)
    .bind(&statuses)
    .bind(&keys)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;

    // Old tickets: voided (swapped now) or marked (until paid).
    let mut t_id = Vec::new();
    let mut t_status = Vec::new();
    let mut t_mark = Vec::new();
    for plan in plans {
        for ticket_id in &plan.grant.gone.ticket_ids {
            t_id.push(ticket_id.as_str());
            t_status.push(if plan.pays() { "VALID" } else { "VOIDED" });
            t_mark.push(plan.start.exchange_id.as_str());
        }
    }
    let changed = sqlx::query(
        "UPDATE ticket t SET status = u.s, exchange_id = u.x
           FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(id, s, x)
          WHERE t.ticket_id = u.id AND t.status = 'VALID' AND t.exchange_id IS NULL",
    )
    .bind(&t_id)
    .bind(&t_status)
    .bind(&t_mark)
    .execute(&mut **tx)
    .await
    .map_err(classify)?
    .rows_affected();
    if changed != t_id.len() as u64 {
        return Err(StoreError::Internal(format!(
            "exchange batch changed {changed} of {} tickets",
            t_id.len()
        )));
    }

    // Swapped now: old seats back on sale, old holds count what left, new orders.
    let swapped: Vec<&Plan> = plans.iter().filter(|p| !p.pays()).collect();
    if swapped.is_empty() {
        return Ok(());
    }
    let mut f_event = Vec::new();
    let mut f_seat = Vec::new();
    let mut f_order = Vec::new();
    for plan in &swapped {
        for seat_id in &plan.grant.gone.seat_ids {
            f_event.push(plan.start.from_event.event_id.as_str());
            f_seat.push(seat_id.as_str());
            f_order.push(plan.start.order_id.as_str());
        }
    }
    if !f_seat.is_empty() {
        let freed = sqlx::query_as::<_, (String, String)>(
            "UPDATE seat s SET status = 'AVAILABLE', order_id = NULL, hold_id = NULL, hold_expires_at = NULL,
                    version = s.version + 1
               FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(e, id, o)
              WHERE s.event_id = u.e AND s.seat_id = u.id AND s.status = 'SOLD' AND s.order_id = u.o
             RETURNING s.event_id, s.seat_id",
        )
        .bind(&f_event)
        .bind(&f_seat)
        .bind(&f_order)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        if freed.len() != f_seat.len() {
            return Err(StoreError::Internal(format!(
                "exchange batch freed {} of {} seats",
                freed.len(),
                f_seat.len()
            )));
        }
        for (event_id, seat_id) in &freed {
            map.seat(event_id, seat_id, SeatStatus::Available, None);
        }
    }
    let mut left: BTreeMap<&str, i32> = BTreeMap::new();
    for plan in &swapped {
        *left
            .entry(facts.orders[&plan.start.order_id].hold_id.as_str())
            .or_default() += plan.grant.gone.quantity() as i32;
    }
    let (left_holds, left_units): (Vec<&str>, Vec<i32>) = left.into_iter().unzip();
    sqlx::query(
        "UPDATE hold h SET exchanged_out = h.exchanged_out + u.n
           FROM UNNEST($1::text[], $2::int[]) AS u(id, n) WHERE h.hold_id = u.id",
    )
    .bind(&left_holds)
    .bind(&left_units)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    let mut o = OrderRows::default();
    for plan in &swapped {
        o.event.push(plan.to_event());
        o.order.push(&plan.start.new_order_id);
        o.hold.push(&plan.start.new_hold_id);
        o.account
            .push(&facts.orders[&plan.start.order_id].account_id);
        o.seats.push(held_seats_json(&plan.seats));
        o.tier.push(plan.tier_id.as_deref());
        o.quantity.push(plan.quantity as i32);
        o.total.push(plan.grant.to_value_minor);
        o.currency.push(&plan.start.to_event.currency);
        o.operation.push(&plan.start.operation_id);
        o.method
            .push(format!("exchange:{}", plan.start.exchange_id));
    }
    sqlx::query(
        "INSERT INTO orders (event_id, order_id, hold_id, account_id, status, seats, tier_id, quantity, total_minor,
                             currency, created_at, updated_at)
         SELECT e, o, h, a, 'CONFIRMED', j::jsonb, t, q, tot, c, $10, $10
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[],
                       $8::bigint[], $9::text[]) AS u(e, o, h, a, j, t, q, tot, c)",
    )
    .bind(&o.event)
    .bind(&o.order)
    .bind(&o.hold)
    .bind(&o.account)
    .bind(&o.seats)
    .bind(&o.tier)
    .bind(&o.quantity)
    .bind(&o.total)
    .bind(&o.currency)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // Nothing to pay: each new order's payment is settled by the old one's.
    sqlx::query(
        "INSERT INTO payment_operation (event_id, operation_id, order_id, provider, payment_method, status,
                                        amount_minor, currency, next_attempt_at, created_at, updated_at)
         SELECT e, op, o, 'exchange', m, 'CAPTURED', 0, c, $6, $6, $6
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS u(e, op, o, m, c)",
    )
    .bind(&o.event)
    .bind(&o.operation)
    .bind(&o.order)
    .bind(&o.method)
    .bind(&o.currency)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    // The new orders' tickets, signed by the caller, issued with the swap.
    let mut tk = TicketRows::default();
    for plan in &swapped {
        let account = facts.orders[&plan.start.order_id].account_id.as_str();
        for ticket in &plan.start.new_tickets {
            tk.event.push(ticket.draft.event_id.as_str());
            tk.ticket.push(ticket.draft.ticket_id.as_str());
            tk.order.push(ticket.draft.order_id.as_str());
            tk.account.push(account);
            tk.seat.push(ticket.draft.seat_id.as_deref());
            tk.tier.push(ticket.draft.tier_id.as_deref());
            tk.unit.push(ticket.draft.unit as i32);
            tk.code.push(ticket.code.as_str());
        }
    }
    sqlx::query(
        "INSERT INTO ticket (event_id, ticket_id, order_id, account_id, seat_id, tier_id, unit, code, status, issued_at)
         SELECT e, t, o, a, s, ti, n, c, 'VALID', $9
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
                AS u(e, t, o, a, s, ti, n, c)",
    )
    .bind(&tk.event)
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
    let mut messages = Vec::with_capacity(swapped.len());
    for plan in &swapped {
        let from_event = plan.start.from_event.event_id.as_str();
        let new_order = &plan.start.new_order_id;
        messages.push((
            from_event,
            boxoffice_store::exchange::topic::EXCHANGE_COMPLETED,
            serde_json::json!({"exchangeId": plan.start.exchange_id,
                               "orderId": plan.start.order_id, "newOrderId": new_order}),
        ));
        if plan.grant.amount_due_minor < 0 {
            messages.push((
                from_event,
                boxoffice_store::exchange::topic::REFUND_DUE,
                serde_json::json!({"exchangeId": plan.start.exchange_id,
                                   "orderId": plan.start.order_id,
                                   "amountMinor": -plan.grant.amount_due_minor,
                                   "currency": plan.start.to_event.currency}),
            ));
        }
    }
    outbox_many(tx, &messages, now).await
}

/// Columns of the new holds, one vector each (for `UNNEST`).
#[derive(Default)]
struct HoldRows<'a> {
    event: Vec<&'a str>,
    hold: Vec<&'a str>,
    account: Vec<&'a str>,
    status: Vec<&'a str>,
    tier: Vec<Option<&'a str>>,
    quantity: Vec<i32>,
    seats: Vec<String>,
    total: Vec<i64>,
    currency: Vec<&'a str>,
    key: Vec<String>,
    expires: Vec<OffsetDateTime>,
    order: Vec<Option<&'a str>>,
}

/// Columns of the new orders' tickets.
#[derive(Default)]
struct TicketRows<'a> {
    event: Vec<&'a str>,
    ticket: Vec<&'a str>,
    order: Vec<&'a str>,
    account: Vec<&'a str>,
    seat: Vec<Option<&'a str>>,
    tier: Vec<Option<&'a str>>,
    unit: Vec<i32>,
    code: Vec<&'a str>,
}

/// Columns of the new orders and their payments.
#[derive(Default)]
struct OrderRows<'a> {
    event: Vec<&'a str>,
    order: Vec<&'a str>,
    hold: Vec<&'a str>,
    account: Vec<&'a str>,
    seats: Vec<String>,
    tier: Vec<Option<&'a str>>,
    quantity: Vec<i32>,
    total: Vec<i64>,
    currency: Vec<&'a str>,
    operation: Vec<&'a str>,
    method: Vec<String>,
}
