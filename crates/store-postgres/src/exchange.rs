//! Exchanges across shards on PostgreSQL (DESIGN §7): the legs an exchange out of an event
//! on another shard writes on each side. An exchange within one shard, and the parts the legs
//! share with it, are `boxoffice_store_sql::exchange`'s.

use boxoffice_domain::OffsetDateTime;
use boxoffice_store::engine::mismatch;
use boxoffice_store::exchange::{
    ExchangeOut, ExchangeRefused, ExchangeStatus, InFate, LegRow, not_captured,
};
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{StoreError, StoreResult};
use sqlx::{Postgres, Row, Transaction};

use boxoffice_store_sql::db::Conn;
use boxoffice_store_sql::exchange;

use crate::classify;

/// The columns of an `OUT` row, read back as an [`ExchangeOut`].
const OUT_COLUMNS: &str =
    "x.exchange_id, x.account_id, x.order_id, o.hold_id, x.from_event_id, x.to_event_id,
     x.ticket_ids::text AS ticket_ids, x.from_value_minor, x.new_hold_id, x.to_value_minor,
     x.amount_due_minor, x.currency, x.idempotency_key, x.status, x.created_at, x.updated_at";

fn out_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<ExchangeOut> {
    let status: String = row.get("status");
    let ticket_ids: String = row.get("ticket_ids");
    Ok(ExchangeOut {
        exchange_id: row.get("exchange_id"),
        account_id: row.get("account_id"),
        order_id: row.get("order_id"),
        old_hold_id: row.get("hold_id"),
        from_event_id: row.get("from_event_id"),
        to_event_id: row.get("to_event_id"),
        ticket_ids: serde_json::from_str(&ticket_ids)
            .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?,
        from_value_minor: row.get("from_value_minor"),
        new_hold_id: row.get("new_hold_id"),
        to_value_minor: row.get("to_value_minor"),
        amount_due_minor: row.get("amount_due_minor"),
        currency: row.get("currency"),
        idempotency_key: row.get("idempotency_key"),
        status: ExchangeStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?,
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    })
}

/// Writes an exchange row of one side only (`OUT` on the old event's shard, `ABORT` on the
/// target's), from what the `OUT` row holds.
async fn insert_leg(
    tx: &mut Transaction<'_, Postgres>,
    out: &ExchangeOut,
    leg: &str,
    status: ExchangeStatus,
    now: OffsetDateTime,
) -> StoreResult<()> {
    let ticket_ids = serde_json::to_string(&out.ticket_ids)
        .map_err(|e| StoreError::Internal(format!("exchange ticket ids: {e}")))?;
    sqlx::query(
        "INSERT INTO exchange (exchange_id, account_id, order_id, from_event_id, to_event_id, ticket_ids,
                               from_value_minor, new_hold_id, new_order_id, to_value_minor, amount_due_minor,
                               currency, status, idempotency_key, created_at, updated_at, leg)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, NULL, $9, $10, $11, $12, $13, $14, $14, $15)",
    )
    .bind(&out.exchange_id)
    .bind(&out.account_id)
    .bind(&out.order_id)
    .bind(&out.from_event_id)
    .bind(&out.to_event_id)
    .bind(&ticket_ids)
    .bind(out.from_value_minor)
    .bind(&out.new_hold_id)
    .bind(out.to_value_minor)
    .bind(out.amount_due_minor)
    .bind(&out.currency)
    .bind(status.as_str())
    .bind(&out.idempotency_key)
    .bind(now)
    .bind(leg)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Exchanges across shards (DESIGN §7; see [`boxoffice_store::exchange::settle_out`] for the
/// steps and [`boxoffice_store::Store::mark_exchange_out`] for each one's rule).
impl crate::PgStore {
    pub(crate) async fn mark_out(
        &self,
        out: &ExchangeOut,
        closes_at: OffsetDateTime,
    ) -> StoreResult<Result<(), ExchangeRefused>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let now = boxoffice_store_sql::outbox::store_now(&mut Conn::from(&mut tx)).await?;
        if now >= closes_at {
            return Ok(Err(ExchangeRefused::Closed(format!(
                "exchanges of this event closed at {closes_at} (its start minus the exchange cutoff)"
            ))));
        }
        // Orders, then tickets: the order a compensation locks them in. The payment's status
        // too: an order not captured yet can still be compensated, so it is not exchanged.
        let order = sqlx::query_as::<_, (String, String, String, String, Option<String>)>(
            "SELECT o.status, o.account_id, o.event_id, o.hold_id, p.status FROM orders o
               LEFT JOIN payment_operation p ON p.order_id = o.order_id
              WHERE o.order_id = $1 FOR UPDATE OF o",
        )
        .bind(&out.order_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        let as_read = order
            .as_ref()
            .is_some_and(|(status, account, event, hold, _)| {
                status == "CONFIRMED"
                    && *account == out.account_id
                    && *event == out.from_event_id
                    && *hold == out.old_hold_id
            });
        if !as_read {
            return Ok(Err(ExchangeRefused::Conflict(format!(
                "order {} is no longer CONFIRMED",
                out.order_id
            ))));
        }
        let captured = order
            .as_ref()
            .is_some_and(|(.., payment)| payment.as_deref() == Some("CAPTURED"));
        if !captured {
            return Ok(Err(not_captured(&out.order_id)));
        }
        let mut ids = out.ticket_ids.clone();
        ids.sort_unstable();
        let tickets = sqlx::query_as::<_, (String, String, String, Option<String>)>(
            "SELECT ticket_id, order_id, status, exchange_id FROM ticket
              WHERE ticket_id = ANY($1) ORDER BY ticket_id FOR UPDATE",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let usable = tickets
            .iter()
            .filter(|(_, order_id, status, mark)| {
                *order_id == out.order_id && status == "VALID" && mark.is_none()
            })
            .count();
        if usable != ids.len() {
            return Ok(Err(ExchangeRefused::Conflict(
                "a ticket given up is no longer valid, or is already being exchanged".into(),
            )));
        }
        insert_leg(&mut tx, out, "OUT", ExchangeStatus::PaymentRequired, now).await?;
        let marked = sqlx::query(
            "UPDATE ticket SET exchange_id = $2
              WHERE ticket_id = ANY($1) AND status = 'VALID' AND exchange_id IS NULL",
        )
        .bind(&ids)
        .bind(&out.exchange_id)
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if marked != ids.len() as u64 {
            return Err(mismatch("tickets still valid", ids.len(), marked));
        }
        tx.commit().await.map_err(classify)?;
        Ok(Ok(()))
    }

    pub(crate) async fn in_fate(
        &self,
        out: &ExchangeOut,
        abort_if_missing: bool,
    ) -> StoreResult<Option<InFate>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        exchange::lock_ids(&mut Conn::from(&mut tx), &[out.exchange_id.as_str()]).await?;
        let row = sqlx::query_as::<_, (String, String, Option<String>)>(
            "SELECT leg, status, new_order_id FROM exchange WHERE exchange_id = $1",
        )
        .bind(&out.exchange_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(classify)?;
        let fate = match row {
            None if !abort_if_missing => None,
            None => {
                let now = boxoffice_store_sql::outbox::store_now(&mut Conn::from(&mut tx)).await?;
                insert_leg(&mut tx, out, "ABORT", ExchangeStatus::Failed, now).await?;
                Some(InFate::Ended(ExchangeStatus::Failed))
            }
            Some((leg, status, new_order_id)) => {
                if leg != "IN" && leg != "ABORT" {
                    return Err(StoreError::Internal(format!(
                        "exchange {} is a {leg} row on the target's shard",
                        out.exchange_id
                    )));
                }
                let status = ExchangeStatus::parse(&status)
                    .ok_or_else(|| StoreError::Internal(format!("exchange status {status:?}")))?;
                Some(match status {
                    ExchangeStatus::PaymentRequired => InFate::Open,
                    ExchangeStatus::Completed => InFate::Completed {
                        new_order_id: new_order_id.unwrap_or_default(),
                    },
                    ended => InFate::Ended(ended),
                })
            }
        };
        tx.commit().await.map_err(classify)?;
        Ok(fate)
    }

    pub(crate) async fn finish_out(
        &self,
        exchange_id: &str,
        fate: &InFate,
    ) -> StoreResult<Option<ExchangeStatus>> {
        let mut tx = self.pool().begin().await.map_err(classify)?;
        let sql = format!(
            "SELECT {OUT_COLUMNS} FROM exchange x JOIN orders o ON o.order_id = x.order_id
              WHERE x.exchange_id = $1 AND x.leg = 'OUT' FOR UPDATE OF x"
        );
        let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(exchange_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(classify)?
        else {
            return Ok(None);
        };
        let out = out_from_row(&row)?;
        if out.status != ExchangeStatus::PaymentRequired {
            return Ok(Some(out.status));
        }
        let now = boxoffice_store_sql::outbox::store_now(&mut Conn::from(&mut tx)).await?;
        let mut map = MapChanges::default();
        let status = match fate {
            InFate::Open => {
                // Still waiting for the difference: looked at again later.
                sqlx::query(
                    "UPDATE exchange SET updated_at = $2
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                ExchangeStatus::PaymentRequired
            }
            InFate::Completed { new_order_id } => {
                let old = boxoffice_store_sql::checkout::load_order(
                    &mut Conn::from(&mut tx),
                    &out.order_id,
                )
                .await?
                .ok_or_else(|| {
                    StoreError::Internal(format!("exchange {exchange_id} lost its order"))
                })?;
                let mut conn = Conn::from(&mut tx);
                let gone =
                    exchange::marked_surrender(&mut conn, exchange_id, &old, out.from_value_minor)
                        .await?;
                let seats: Vec<(&str, &str)> = gone
                    .seat_ids
                    .iter()
                    .map(|s| (old.event_id.as_str(), s.as_str()))
                    .collect();
                exchange::lock_seats(&mut conn, &seats).await?;
                exchange::swap_out(&mut conn, exchange_id, &old, &gone, &mut map).await?;
                sqlx::query(
                    "UPDATE exchange SET status = 'COMPLETED', new_order_id = $2, updated_at = $3
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(new_order_id)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                ExchangeStatus::Completed
            }
            InFate::Ended(status) => {
                sqlx::query(
                    "UPDATE exchange SET status = $2, updated_at = $3
                      WHERE exchange_id = $1 AND leg = 'OUT' AND status = 'PAYMENT_REQUIRED'",
                )
                .bind(exchange_id)
                .bind(status.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                sqlx::query(
                    "UPDATE ticket SET exchange_id = NULL WHERE exchange_id = $1 AND status = 'VALID'",
                )
                .bind(exchange_id)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
                *status
            }
        };
        boxoffice_store_sql::seatmap::record(
            &mut boxoffice_store_sql::db::Conn::from(&mut tx),
            &map,
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Some(status))
    }

    /// Every row of exchanges across shards in this database (`OUT`, `IN`, `ABORT`), for
    /// `boxoffice check` ([`boxoffice_store::exchange::leg_violations`]).
    pub async fn exchange_legs(&self) -> StoreResult<Vec<LegRow>> {
        let rows = sqlx::query_as::<_, (String, String, String, OffsetDateTime)>(
            "SELECT exchange_id, leg, status, updated_at FROM exchange
              WHERE leg <> 'BOTH' ORDER BY exchange_id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(classify)?;
        rows.into_iter()
            .map(|(exchange_id, leg, status, updated_at)| {
                Ok(LegRow {
                    exchange_id,
                    leg,
                    status: ExchangeStatus::parse(&status).ok_or_else(|| {
                        StoreError::Internal(format!("exchange status {status:?}"))
                    })?,
                    updated_at,
                })
            })
            .collect()
    }

    pub(crate) async fn open_out(
        &self,
        older_than_s: f64,
        limit: u32,
    ) -> StoreResult<Vec<ExchangeOut>> {
        let sql = format!(
            "SELECT {OUT_COLUMNS} FROM exchange x JOIN orders o ON o.order_id = x.order_id
              WHERE x.leg = 'OUT' AND x.status = 'PAYMENT_REQUIRED'
                AND x.updated_at <= boxoffice_now() - make_interval(secs => $1)
              ORDER BY x.updated_at LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(older_than_s)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await
            .map_err(classify)?;
        rows.iter().map(out_from_row).collect()
    }
}
