//! Allocations, comps and box-office sales as stored (see `boxoffice_store::allocation`):
//! plain rows beside the holds that keep the inventory, each written with the answer of the
//! request that made it, in one transaction.

use boxoffice_domain::allocation::{Allocation, allocation_of};
use boxoffice_store::allocation::{Answer, BoxOfficeSale, CompRecord, KeptRow};
use boxoffice_store::{StoreError, StoreResult, parse_held_seats};

use crate::db::{Conn, Db, query};
use crate::idempotency;

/// Stores `answer` about `event_id` on `conn`.
async fn answer(conn: &mut Conn<'_>, event_id: &str, answer: Option<&Answer>) -> StoreResult<()> {
    let Some(answer) = answer else {
        return Ok(());
    };
    let now = crate::outbox::store_now(conn).await?;
    idempotency::insert(
        conn,
        event_id,
        &answer.endpoint,
        std::slice::from_ref(&answer.record),
        now,
    )
    .await
}

pub async fn add(
    db: &Db,
    event_id: &str,
    allocations: &[Allocation],
    answer_of: Option<&Answer>,
) -> StoreResult<Vec<String>> {
    let mut tx = db.write().await?;
    let d = tx.conn().dialect();
    let mut added = Vec::new();
    for allocation in allocations {
        let definition = serde_json::to_string(allocation)
            .map_err(|e| StoreError::Internal(format!("allocation definition: {e}")))?;
        let written = query(format!(
            "INSERT INTO allocation (event_id, allocation_id, definition, created_at)
             VALUES ($1, $2, $3, {now})
             ON CONFLICT (event_id, allocation_id) DO NOTHING",
            now = d.now_ms(),
        ))
        .bind(event_id)
        .bind(&allocation.allocation_id)
        .bind(definition)
        .execute(&mut tx.conn())
        .await?;
        if written == 1 {
            added.push(allocation.allocation_id.clone());
        }
    }
    answer(&mut tx.conn(), event_id, answer_of).await?;
    tx.commit().await?;
    Ok(added)
}

pub async fn list(db: &Db, event_id: &str) -> StoreResult<Vec<Allocation>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT definition FROM allocation WHERE event_id = $1
          ORDER BY created_at, allocation_id",
    )
    .bind(event_id)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| {
        serde_json::from_str(&row.get::<String, _>(0)?)
            .map_err(|e| StoreError::Internal(format!("allocation definition: {e}")))
    })
    .collect()
}

pub async fn kept(db: &Db, event_id: &str) -> StoreResult<Vec<KeptRow>> {
    let mut pooled = db.read().await?;
    let d = pooled.conn().dialect();
    let rows = query(format!(
        "SELECT account_id, hold_id, CAST(seats AS text), tier_id, quantity, expires_at
           FROM hold
          WHERE event_id = $1 AND account_id LIKE 'allocation:%' AND status = 'HELD'
            AND expires_at > {now}
          ORDER BY account_id, hold_id",
        now = d.now_ms(),
    ))
    .bind(event_id)
    .fetch_all(&mut pooled.conn())
    .await?;
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        let account_id: String = row.get(0)?;
        let Some(allocation_id) = allocation_of(&account_id) else {
            continue;
        };
        let seats = parse_held_seats(&row.get::<String, _>(2)?)?;
        kept.push(KeptRow {
            allocation_id: allocation_id.to_owned(),
            hold_id: row.get(1)?,
            seat_id: seats.into_iter().next().map(|seat| seat.seat_id),
            tier_id: row.get(3)?,
            quantity: u32::try_from(row.get::<i32, _>(4)?).unwrap_or(0),
            expires_at: row.get(5)?,
        });
    }
    Ok(kept)
}

pub async fn record_comp(
    db: &Db,
    comp: &CompRecord,
    answer_of: Option<&Answer>,
) -> StoreResult<()> {
    let mut tx = db.write().await?;
    let d = tx.conn().dialect();
    query(format!(
        "INSERT INTO allocation_comp (event_id, order_id, allocation_id, account_id, issued_by, created_at)
         VALUES ($1, $2, $3, $4, $5, {now})
         ON CONFLICT (event_id, order_id) DO NOTHING",
        now = d.now_ms(),
    ))
    .bind(&comp.event_id)
    .bind(&comp.order_id)
    .bind(&comp.allocation_id)
    .bind(&comp.account_id)
    .bind(&comp.issued_by)
    .execute(&mut tx.conn())
    .await?;
    answer(&mut tx.conn(), &comp.event_id, answer_of).await?;
    tx.commit().await
}

pub async fn comps(db: &Db, event_id: &str) -> StoreResult<Vec<CompRecord>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT order_id, allocation_id, account_id, issued_by FROM allocation_comp
          WHERE event_id = $1 ORDER BY created_at, order_id",
    )
    .bind(event_id)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| {
        Ok(CompRecord {
            event_id: event_id.to_owned(),
            order_id: row.get(0)?,
            allocation_id: row.get(1)?,
            account_id: row.get(2)?,
            issued_by: row.get(3)?,
        })
    })
    .collect()
}

pub async fn record_sale(
    db: &Db,
    sale: &BoxOfficeSale,
    answer_of: Option<&Answer>,
) -> StoreResult<()> {
    let mut tx = db.write().await?;
    let d = tx.conn().dialect();
    query(format!(
        "INSERT INTO box_office_sale (event_id, order_id, payment_kind, sold_by, buyer_email,
                                      buyer_name, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, {now})
         ON CONFLICT (event_id, order_id) DO NOTHING",
        now = d.now_ms(),
    ))
    .bind(&sale.event_id)
    .bind(&sale.order_id)
    .bind(&sale.payment_kind)
    .bind(&sale.sold_by)
    .bind(sale.buyer_email.clone())
    .bind(sale.buyer_name.clone())
    .execute(&mut tx.conn())
    .await?;
    answer(&mut tx.conn(), &sale.event_id, answer_of).await?;
    tx.commit().await
}

pub async fn sale(db: &Db, event_id: &str, order_id: &str) -> StoreResult<Option<BoxOfficeSale>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT payment_kind, sold_by, buyer_email, buyer_name FROM box_office_sale
          WHERE event_id = $1 AND order_id = $2",
    )
    .bind(event_id)
    .bind(order_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .map(|row| {
        Ok(BoxOfficeSale {
            event_id: event_id.to_owned(),
            order_id: order_id.to_owned(),
            payment_kind: row.get(0)?,
            sold_by: row.get(1)?,
            buyer_email: row.get(2)?,
            buyer_name: row.get(3)?,
        })
    })
    .transpose()
}

pub async fn record_answer(db: &Db, event_id: &str, answer_of: &Answer) -> StoreResult<()> {
    let mut tx = db.write().await?;
    answer(&mut tx.conn(), event_id, Some(answer_of)).await?;
    tx.commit().await
}

pub async fn unrecorded_comps(db: &Db, event_id: &str) -> StoreResult<Vec<String>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT o.order_id FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND p.provider = 'comp'
            AND NOT EXISTS (SELECT 1 FROM allocation_comp c
                             WHERE c.event_id = o.event_id AND c.order_id = o.order_id)
          ORDER BY o.order_id",
    )
    .bind(event_id)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(|row| row.get(0))
    .collect()
}
