//! Prices as stored (see `boxoffice_store::pricing`): a hold's lines written with the hold in
//! its group's transaction ([`insert_lines`], called by `group::apply`), read back for
//! the hold, its order and the report; an event's promo codes and their application to a
//! hold, one transaction that counts the use conditionally and re-prices the hold.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::Effects;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::ids::SeatRef;
use boxoffice_domain::pricing::{OrderPrice, Place, PriceList, price_order};
use boxoffice_store::pricing::{
    LineRow, PlaceSales, PromoApplied, PromoCode, SalesSplit, line_rows, price_of_rows,
};
use boxoffice_store::{EventRecord, NewRecord, StoreResult, held_seats_json};

use crate::db::{Conn, Db, Rows, query};
use crate::{idempotency, outbox};

/// The lines of the group's new holds, in one statement. An event without ticket types, fees
/// or tax writes none: its holds' seats and totals are their prices.
pub async fn insert_lines(
    conn: &mut Conn<'_>,
    event: &EventRecord,
    effects: &Effects,
) -> StoreResult<()> {
    if PriceList::of(&event.sale).is_plain() {
        return Ok(());
    }
    let rows: Vec<(&str, LineRow)> = effects
        .new_holds()
        .flat_map(|hold| {
            let hold_id = hold.hold_id.as_str();
            line_rows(&hold.price)
                .into_iter()
                .map(move |row| (hold_id, row))
        })
        .collect();
    write_lines(conn, &event.event_id, &rows).await
}

/// Inserts `(hold_id, line)` rows of event `event_id`.
async fn write_lines(
    conn: &mut Conn<'_>,
    event_id: &str,
    rows: &[(&str, LineRow)],
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let table = Rows::new()
        .texts("hold_id", rows.iter().map(|(h, _)| *h))
        .int4s("line", rows.iter().map(|(_, r)| r.line))
        .opt_texts("seat_id", rows.iter().map(|(_, r)| r.seat_id.clone()))
        .texts(
            "ticket_type",
            rows.iter().map(|(_, r)| r.ticket_type.as_str()),
        )
        .ints("face", rows.iter().map(|(_, r)| r.face_minor))
        .ints("discount", rows.iter().map(|(_, r)| r.discount_minor))
        .ints("fees", rows.iter().map(|(_, r)| r.fees_minor))
        .ints("tax", rows.iter().map(|(_, r)| r.tax_minor))
        .ints("all_in", rows.iter().map(|(_, r)| r.all_in_minor));
    query(format!(
        "INSERT INTO hold_line (event_id, hold_id, line, seat_id, ticket_type, face_minor,
                                discount_minor, fees_minor, tax_minor, all_in_minor)
         SELECT $1, u.hold_id, u.line, u.seat_id, u.ticket_type, u.face, u.discount, u.fees,
                u.tax, u.all_in
           FROM {u}",
        u = table.table(d, 2, "u"),
    ))
    .bind(event_id)
    .bind_rows(d, table)
    .execute_exactly(conn, rows.len(), "hold lines")
    .await?;
    Ok(())
}

async fn read_lines(
    conn: &mut Conn<'_>,
    event_id: &str,
    hold_id: &str,
) -> StoreResult<Vec<LineRow>> {
    let rows = query(
        "SELECT line, seat_id, ticket_type, face_minor, discount_minor, fees_minor, tax_minor,
                all_in_minor
           FROM hold_line WHERE event_id = $1 AND hold_id = $2 ORDER BY line",
    )
    .bind(event_id)
    .bind(hold_id)
    .fetch_all(conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(LineRow {
                line: row.get(0)?,
                seat_id: row.get(1)?,
                ticket_type: row.get(2)?,
                face_minor: row.get(3)?,
                discount_minor: row.get(4)?,
                fees_minor: row.get(5)?,
                tax_minor: row.get(6)?,
                all_in_minor: row.get(7)?,
            })
        })
        .collect()
}

/// The hold's stored lines as its price (`None`: none stored).
pub async fn hold_price(db: &Db, event_id: &str, hold_id: &str) -> StoreResult<Option<OrderPrice>> {
    let rows = read_lines(&mut db.read().await?.conn(), event_id, hold_id).await?;
    Ok(price_of_rows(&rows))
}

/// The confirmed orders' lines summed per section (a seat's) or tier (the order's), and
/// their order fees, in one snapshot.
pub async fn sales_split(db: &Db, event_id: &str) -> StoreResult<SalesSplit> {
    let mut tx = db.snapshot().await?;
    let places = query(
        "SELECT coalesce(s.section, o.tier_id),
                CAST(sum(l.face_minor) AS bigint), CAST(sum(l.discount_minor) AS bigint),
                CAST(sum(l.fees_minor) AS bigint), CAST(sum(l.tax_minor) AS bigint),
                CAST(sum(l.all_in_minor) AS bigint)
           FROM orders o
           JOIN hold_line l ON l.event_id = o.event_id AND l.hold_id = o.hold_id
           LEFT JOIN seat s ON s.event_id = l.event_id AND s.seat_id = l.seat_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND l.line > 0
          GROUP BY coalesce(s.section, o.tier_id)",
    )
    .bind(event_id)
    .fetch_all(&mut tx.conn())
    .await?
    .iter()
    .map(|row| {
        Ok(PlaceSales {
            place: row.get::<Option<String>, _>(0)?.unwrap_or_default(),
            face_minor: row.get(1)?,
            discount_minor: row.get(2)?,
            fees_minor: row.get(3)?,
            tax_minor: row.get(4)?,
            all_in_minor: row.get(5)?,
        })
    })
    .collect::<StoreResult<Vec<_>>>()?;
    let fees = query(
        "SELECT CAST(coalesce(sum(l.fees_minor), 0) AS bigint),
                CAST(coalesce(sum(l.tax_minor), 0) AS bigint),
                CAST(coalesce(sum(l.all_in_minor), 0) AS bigint)
           FROM orders o
           JOIN hold_line l ON l.event_id = o.event_id AND l.hold_id = o.hold_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND l.line = 0",
    )
    .bind(event_id)
    .fetch_one(&mut tx.conn())
    .await?;
    tx.commit().await?;
    let order_fees_all_in: i64 = fees.get(2)?;
    Ok(SalesSplit {
        total_minor: places.iter().map(|p| p.all_in_minor).sum::<i64>() + order_fees_all_in,
        places,
        order_fees_minor: fees.get(0)?,
        order_fees_tax_minor: fees.get(1)?,
    })
}

const PROMO_COLUMNS: &str = "event_id, code, percent_off_bp, amount_off_minor, ticket_types,
     max_uses, uses, valid_from, valid_until, created_at";

fn promo_from_row(row: &crate::db::Row) -> StoreResult<PromoCode> {
    let types: String = row.get(4)?;
    Ok(PromoCode {
        event_id: row.get(0)?,
        code: row.get(1)?,
        percent_off_bp: u32::try_from(row.get::<i32, _>(2)?).unwrap_or(0),
        amount_off_minor: row.get(3)?,
        ticket_types: serde_json::from_str(&types).unwrap_or_default(),
        max_uses: u32::try_from(row.get::<i32, _>(5)?).unwrap_or(0),
        uses: u32::try_from(row.get::<i32, _>(6)?).unwrap_or(0),
        valid_from: row.get(7)?,
        valid_until: row.get(8)?,
        created_at: row.get(9)?,
    })
}

/// Creates the code and stores the answer under `scope`, in one transaction; a retry of the
/// scope gets the stored answer, an existing code `None`.
pub async fn create_promo_code(
    db: &Db,
    code: &PromoCode,
    scope: &IdempotencyScope,
    request_digest: &str,
    response: &StoredResponse,
) -> StoreResult<Option<Idempotent>> {
    let mut tx = db.write().await?;
    if let Some(prior) = idempotency::prior_answer(&mut tx.conn(), scope, request_digest).await? {
        return Ok(Some(prior));
    }
    let now = outbox::store_now(&mut tx.conn()).await?;
    let inserted = query(
        "INSERT INTO promo_code (event_id, code, percent_off_bp, amount_off_minor, ticket_types,
                                 max_uses, uses, valid_from, valid_until, created_at)
         SELECT $1, $2, $3, $4, $5, $6, 0, $7, $8, $9
          WHERE NOT EXISTS (SELECT 1 FROM promo_code WHERE event_id = $1 AND code = $2)",
    )
    .bind(&code.event_id)
    .bind(&code.code)
    .bind(i32::try_from(code.percent_off_bp).unwrap_or(i32::MAX))
    .bind(code.amount_off_minor)
    .bind(serde_json::to_string(&code.ticket_types).unwrap_or_else(|_| "[]".into()))
    .bind(i32::try_from(code.max_uses).unwrap_or(i32::MAX))
    .bind(code.valid_from)
    .bind(code.valid_until)
    .bind(now)
    .execute(&mut tx.conn())
    .await?;
    if inserted == 0 {
        return Ok(None);
    }
    let record = NewRecord {
        account_id: scope.account_id.clone(),
        key: scope.key.clone(),
        request_digest: request_digest.to_owned(),
        response: response.clone(),
    };
    idempotency::insert_each(
        &mut tx.conn(),
        &code.event_id,
        &[(scope.endpoint.as_str(), &record)],
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(Some(Idempotent::Fresh(response.clone())))
}

/// The event's codes, by code.
pub async fn promo_codes(db: &Db, event_id: &str) -> StoreResult<Vec<PromoCode>> {
    let rows = query(format!(
        "SELECT {PROMO_COLUMNS} FROM promo_code WHERE event_id = $1 ORDER BY code"
    ))
    .bind(event_id)
    .fetch_all(&mut db.read().await?.conn())
    .await?;
    rows.iter().map(promo_from_row).collect()
}

/// Applies `code` to the hold: see `PricingStore::apply_promo_code`. The hold row is locked
/// first (PostgreSQL), so a checkout's group that would move it waits, or this finds it no
/// longer held.
pub async fn apply_promo_code(
    db: &Db,
    event: &EventRecord,
    hold_id: &str,
    account_id: &str,
    code: &str,
) -> StoreResult<PromoApplied> {
    let d = db.dialect();
    let event_id = event.event_id.as_str();
    let mut tx = db.write().await?;
    let now = outbox::store_now(&mut tx.conn()).await?;
    let Some(hold) = query(format!(
        "SELECT account_id, status, expires_at, CAST(seats AS text), tier_id, quantity FROM hold
          WHERE event_id = $1 AND hold_id = $2 {}",
        d.lock("FOR UPDATE")
    ))
    .bind(event_id)
    .bind(hold_id)
    .fetch_optional(&mut tx.conn())
    .await?
    else {
        return Ok(PromoApplied::HoldNotOpen);
    };
    let expires_at: OffsetDateTime = hold.get(2)?;
    if hold.get::<String, _>(0)? != account_id
        || hold.get::<String, _>(1)? != "HELD"
        || expires_at <= now
    {
        return Ok(PromoApplied::HoldNotOpen);
    }
    let applied: Option<String> =
        query("SELECT code FROM hold_promo WHERE event_id = $1 AND hold_id = $2")
            .bind(event_id)
            .bind(hold_id)
            .fetch_optional(&mut tx.conn())
            .await?
            .map(|row| row.get(0))
            .transpose()?;
    if let Some(applied) = applied {
        if applied != code {
            return Ok(PromoApplied::Invalid(format!(
                "the hold already has code {applied}"
            )));
        }
        let rows = read_lines(&mut tx.conn(), event_id, hold_id).await?;
        return Ok(price_of_rows(&rows).map_or_else(
            || PromoApplied::Invalid("the hold has no price lines".into()),
            PromoApplied::Applied,
        ));
    }
    let Some(promo) = query(format!(
        "SELECT {PROMO_COLUMNS} FROM promo_code WHERE event_id = $1 AND code = $2"
    ))
    .bind(event_id)
    .bind(code)
    .fetch_optional(&mut tx.conn())
    .await?
    .map(|row| promo_from_row(&row))
    .transpose()?
    else {
        return Ok(PromoApplied::Invalid("no such code for this event".into()));
    };
    if let Some(refusal) = promo.refusal(now) {
        return Ok(PromoApplied::Invalid(refusal.into()));
    }
    // The use is counted only while one is left: of racing checkouts with the last use, one
    // updates the row and the others find `uses = max_uses`.
    let counted = query(
        "UPDATE promo_code SET uses = uses + 1
          WHERE event_id = $1 AND code = $2 AND uses < max_uses",
    )
    .bind(event_id)
    .bind(code)
    .execute(&mut tx.conn())
    .await?;
    if counted != 1 {
        return Ok(PromoApplied::Invalid("the code has been used up".into()));
    }
    // The tickets keep their types; their faces are read again from the layout.
    let lines = read_lines(&mut tx.conn(), event_id, hold_id).await?;
    let seats = boxoffice_store::parse_held_seats(&hold.get::<String, _>(3)?)?;
    let tier_id: Option<String> = hold.get(4)?;
    let quantity = u32::try_from(hold.get::<i32, _>(5)?).unwrap_or(0);
    let places = places_of(&mut tx.conn(), event, &seats, tier_id.as_deref(), quantity).await?;
    let types: Vec<String> = if lines.is_empty() {
        vec![boxoffice_domain::pricing::STANDARD_TYPE.to_owned(); places.len()]
    } else {
        lines
            .iter()
            .filter(|l| l.line != boxoffice_store::pricing::ORDER_FEES_LINE)
            .map(|l| l.ticket_type.clone())
            .collect()
    };
    let price = price_order(
        &PriceList::of(&event.sale),
        &places,
        &types,
        Some(&promo.discount()),
    )
    .map_err(|e| {
        boxoffice_store::StoreError::Internal(format!("re-pricing a hold: {}", e.reason))
    })?;
    query("DELETE FROM hold_line WHERE event_id = $1 AND hold_id = $2")
        .bind(event_id)
        .bind(hold_id)
        .execute(&mut tx.conn())
        .await?;
    let rows: Vec<(&str, LineRow)> = line_rows(&price)
        .into_iter()
        .map(|r| (hold_id, r))
        .collect();
    write_lines(&mut tx.conn(), event_id, &rows).await?;
    let seat_prices: Vec<(String, i64)> = price
        .lines
        .iter()
        .filter_map(|l| l.seat_id.clone().map(|s| (s, l.all_in_minor)))
        .collect();
    query(format!(
        "UPDATE hold SET seats = {}, total_minor = $4, updated_at = $5
          WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD'",
        d.json("$3")
    ))
    .bind(event_id)
    .bind(hold_id)
    .bind(held_seats_json(&seat_prices))
    .bind(price.total_minor)
    .bind(now)
    .execute_exactly(&mut tx.conn(), 1, "the held hold re-priced")
    .await?;
    query("INSERT INTO hold_promo (event_id, hold_id, code, applied_at) VALUES ($1, $2, $3, $4)")
        .bind(event_id)
        .bind(hold_id)
        .bind(code)
        .bind(now)
        .execute(&mut tx.conn())
        .await?;
    tx.commit().await?;
    Ok(PromoApplied::Applied(price))
}

/// Each ticket's place and standard face: a seat's section and price, or the tier's.
async fn places_of(
    conn: &mut Conn<'_>,
    event: &EventRecord,
    seats: &[boxoffice_store::HeldSeat],
    tier_id: Option<&str>,
    quantity: u32,
) -> StoreResult<Vec<Place>> {
    if let Some(tier_id) = tier_id {
        let face = event
            .tiers
            .iter()
            .find(|t| t.tier_id == tier_id)
            .map_or(0, |t| t.price_minor);
        let place = Place {
            seat_id: None,
            place: tier_id.to_owned(),
            standard_face_minor: face,
        };
        return Ok(vec![place; quantity as usize]);
    }
    let d = conn.dialect();
    let seat_ids: Vec<&str> = seats.iter().map(|s| s.seat_id.as_str()).collect();
    let rows = query(format!(
        "SELECT seat_id, price_minor FROM seat WHERE event_id = $1 AND seat_id {}",
        d.in_list("$2")
    ))
    .bind(&event.event_id)
    .bind(seat_ids)
    .fetch_all(conn)
    .await?;
    let mut faces = std::collections::BTreeMap::new();
    for row in &rows {
        faces.insert(row.get::<String, _>(0)?, row.get::<i64, _>(1)?);
    }
    Ok(seats
        .iter()
        .map(|s| Place {
            seat_id: Some(s.seat_id.clone()),
            place: SeatRef::parse(&s.seat_id)
                .map(|seat| seat.section)
                .unwrap_or_default(),
            standard_face_minor: faces.get(&s.seat_id).copied().unwrap_or(0),
        })
        .collect())
}
