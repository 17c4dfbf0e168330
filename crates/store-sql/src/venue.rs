//! Venue charts (see `boxoffice_store::venue`): a chart written once with the key that made
//! it, read back by its id, listed by id. The chart is kept as the text of its JSON (the
//! API's spelling), on both backends: nothing queries inside it, and text costs no parse on
//! the way in.

use boxoffice_domain::venue::VenueChart;
use boxoffice_store::venue::{ChartCreated, ChartSummary, NewChart};
use boxoffice_store::{StoreError, StoreResult};

use crate::db::{Db, Row, query};

const SUMMARY_COLUMNS: &str =
    "chart_id, name, seat_count, standing_capacity, section_count, created_at";

fn summary_of(row: &Row) -> StoreResult<ChartSummary> {
    let (seat_count, standing_capacity): (i64, i64) = (row.get(2)?, row.get(3)?);
    let section_count: i32 = row.get(4)?;
    Ok(ChartSummary {
        chart_id: row.get(0)?,
        name: row.get(1)?,
        seat_count: u64::try_from(seat_count).unwrap_or(0),
        standing_capacity: u64::try_from(standing_capacity).unwrap_or(0),
        section_count: u32::try_from(section_count).unwrap_or(0),
        created_at: row.get(5)?,
    })
}

/// The answer a key has already: the chart it made, or a refusal when it was made for
/// another request.
fn earlier(row: &Row, new: &NewChart) -> StoreResult<ChartCreated> {
    if row.get::<String, _>(6)? != new.request_digest {
        return Ok(ChartCreated::KeyReused);
    }
    Ok(ChartCreated::Replayed(summary_of(row)?))
}

/// Stores the chart in one transaction, or answers what its creator's key made before. Two
/// requests with one key racing: the unique (creator, key) lets one insert; the other
/// inserts nothing and reads the winner's row (committed by then: PostgreSQL waits for it,
/// SQLite's writes are one at a time).
pub async fn create(db: &Db, new: &NewChart) -> StoreResult<ChartCreated> {
    let d = db.dialect();
    let chart = serde_json::to_string(&new.chart)
        .map_err(|e| StoreError::Internal(format!("venue chart: {e}")))?;
    let by_key = format!(
        "SELECT {SUMMARY_COLUMNS}, request_digest FROM venue_chart
          WHERE created_by = $1 AND idempotency_key = $2"
    );
    let mut tx = db.write().await?;
    let prior = query(by_key.clone())
        .bind(&new.created_by)
        .bind(&new.idempotency_key)
        .fetch_optional(&mut tx.conn())
        .await?;
    if let Some(row) = prior {
        return earlier(&row, new);
    }
    let inserted = query(format!(
        "INSERT INTO venue_chart (chart_id, name, chart, seat_count, standing_capacity,
                                  section_count, created_by, idempotency_key, request_digest,
                                  created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, {now})
         ON CONFLICT (created_by, idempotency_key) DO NOTHING
         RETURNING {SUMMARY_COLUMNS}",
        now = d.now_ms(),
    ))
    .bind(&new.chart_id)
    .bind(&new.chart.name)
    .bind(chart)
    .bind(new.chart.seat_count() as u64)
    .bind(new.chart.standing_capacity())
    .bind(i32::try_from(new.chart.sections.len()).unwrap_or(i32::MAX))
    .bind(&new.created_by)
    .bind(&new.idempotency_key)
    .bind(&new.request_digest)
    .fetch_optional(&mut tx.conn())
    .await?;
    let answer = match inserted {
        Some(row) => ChartCreated::Created(summary_of(&row)?),
        None => {
            let row = query(by_key)
                .bind(&new.created_by)
                .bind(&new.idempotency_key)
                .fetch_optional(&mut tx.conn())
                .await?
                .ok_or_else(|| {
                    StoreError::Conflict("a venue chart's key was taken and is gone".into())
                })?;
            earlier(&row, new)?
        }
    };
    tx.commit().await?;
    Ok(answer)
}

/// A chart with its summary.
pub async fn get(db: &Db, chart_id: &str) -> StoreResult<Option<(ChartSummary, VenueChart)>> {
    let mut pooled = db.read().await?;
    let row = query(format!(
        "SELECT {SUMMARY_COLUMNS}, chart FROM venue_chart WHERE chart_id = $1"
    ))
    .bind(chart_id)
    .fetch_optional(&mut pooled.conn())
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: String = row.get(6)?;
    let chart: VenueChart = serde_json::from_str(&text)
        .map_err(|e| StoreError::Internal(format!("venue chart {chart_id}: {e}")))?;
    Ok(Some((summary_of(&row)?, chart)))
}

/// Charts by id after `after_chart_id`, at most `limit`.
pub async fn list(
    db: &Db,
    after_chart_id: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<ChartSummary>> {
    let mut pooled = db.read().await?;
    query(format!(
        "SELECT {SUMMARY_COLUMNS} FROM venue_chart WHERE ($1 IS NULL OR chart_id > $1)
          ORDER BY chart_id LIMIT $2"
    ))
    .bind(after_chart_id)
    .bind(limit)
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(summary_of)
    .collect()
}
