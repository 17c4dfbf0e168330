//! Access codes of presale lanes (see `boxoffice_store::phase`): the organiser's batches of
//! codes, the reads of codes and redemptions, the redemptions a writer loads with its
//! engine, and what a group writes of a redemption.

use std::collections::BTreeMap;

use boxoffice_domain::phase::Redemption;
use boxoffice_store::StoreResult;
use boxoffice_store::engine::{GroupWrite, mismatch};
use boxoffice_store::phase::{AccessCodeRow, CodeBatch, CodesInserted};

use crate::db::{Conn, Db, Row, Rows, query};

fn code_row(row: &Row) -> StoreResult<AccessCodeRow> {
    let (max_uses, uses): (i32, i32) = (row.get(1)?, row.get(2)?);
    Ok(AccessCodeRow {
        code: row.get(0)?,
        max_uses: u32::try_from(max_uses).unwrap_or(0),
        uses: u32::try_from(uses).unwrap_or(0),
    })
}

/// Inserts a batch of codes in one transaction, all or none (see [`CodesInserted`]).
pub async fn insert(db: &Db, batch: &CodeBatch) -> StoreResult<CodesInserted> {
    let d = db.dialect();
    let mut tx = db.write().await?;
    let mut conn = tx.conn();
    let earlier = query(
        "SELECT batch_digest FROM access_code
          WHERE event_id = $1 AND phase_id = $2 AND batch_key = $3 LIMIT 1",
    )
    .bind(batch.event_id.as_str())
    .bind(batch.phase_id.as_str())
    .bind(batch.batch_key.as_str())
    .fetch_optional(&mut conn)
    .await?;
    if let Some(row) = earlier {
        let digest: String = row.get(0)?;
        if digest != batch.batch_digest {
            return Ok(CodesInserted::KeyReused);
        }
        let codes = query(
            "SELECT code, max_uses, uses FROM access_code
              WHERE event_id = $1 AND phase_id = $2 AND batch_key = $3 ORDER BY code",
        )
        .bind(batch.event_id.as_str())
        .bind(batch.phase_id.as_str())
        .bind(batch.batch_key.as_str())
        .fetch_all(&mut conn)
        .await?
        .iter()
        .map(code_row)
        .collect::<StoreResult<Vec<_>>>()?;
        return Ok(CodesInserted::Replayed(codes));
    }
    let held: i64 = query("SELECT count(*) FROM access_code WHERE event_id = $1 AND phase_id = $2")
        .bind(batch.event_id.as_str())
        .bind(batch.phase_id.as_str())
        .fetch_one(&mut conn)
        .await?
        .get(0)?;
    let held = u64::try_from(held).unwrap_or(0);
    if held + batch.codes.len() as u64 > batch.phase_codes_max {
        return Ok(CodesInserted::TooMany { held });
    }
    let codes: Vec<String> = batch.codes.iter().map(|(code, _)| code.clone()).collect();
    let duplicate = query(format!(
        "SELECT code FROM access_code
          WHERE event_id = $1 AND phase_id = $2 AND code {} ORDER BY code LIMIT 1",
        d.in_list("$3"),
    ))
    .bind(batch.event_id.as_str())
    .bind(batch.phase_id.as_str())
    .bind(codes.clone())
    .fetch_optional(&mut conn)
    .await?;
    if let Some(row) = duplicate {
        return Ok(CodesInserted::Duplicate(row.get(0)?));
    }
    let rows = Rows::new().texts("code", codes).int4s(
        "max_uses",
        batch
            .codes
            .iter()
            .map(|(_, uses)| i32::try_from(*uses).unwrap_or(i32::MAX)),
    );
    query(format!(
        "INSERT INTO access_code (event_id, phase_id, code, max_uses, uses, batch_key,
                                  batch_digest, created_at)
         SELECT $1, $2, u.code, u.max_uses, 0, $3, $4, {now} FROM {u}",
        now = d.now(),
        u = rows.table(d, 5, "u"),
    ))
    .bind(batch.event_id.as_str())
    .bind(batch.phase_id.as_str())
    .bind(batch.batch_key.as_str())
    .bind(batch.batch_digest.as_str())
    .bind_rows(d, rows)
    .execute_exactly(&mut conn, batch.codes.len(), "access codes inserted")
    .await?;
    tx.commit().await?;
    Ok(CodesInserted::Inserted(
        batch
            .codes
            .iter()
            .map(|(code, max_uses)| AccessCodeRow {
                code: code.clone(),
                max_uses: *max_uses,
                uses: 0,
            })
            .collect(),
    ))
}

/// A phase's codes in code order, at most `limit`.
pub async fn list(
    db: &Db,
    event_id: &str,
    phase_id: &str,
    limit: u32,
) -> StoreResult<Vec<AccessCodeRow>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT code, max_uses, uses FROM access_code
          WHERE event_id = $1 AND phase_id = $2 ORDER BY code LIMIT $3",
    )
    .bind(event_id)
    .bind(phase_id)
    .bind(i64::from(limit))
    .fetch_all(&mut pooled.conn())
    .await?
    .iter()
    .map(code_row)
    .collect()
}

/// One code of a phase.
pub async fn get(
    db: &Db,
    event_id: &str,
    phase_id: &str,
    code: &str,
) -> StoreResult<Option<AccessCodeRow>> {
    let mut pooled = db.read().await?;
    query(
        "SELECT code, max_uses, uses FROM access_code
          WHERE event_id = $1 AND phase_id = $2 AND code = $3",
    )
    .bind(event_id)
    .bind(phase_id)
    .bind(code)
    .fetch_optional(&mut pooled.conn())
    .await?
    .as_ref()
    .map(code_row)
    .transpose()
}

/// Whether the account redeemed a code for the phase.
pub async fn redeemed(
    db: &Db,
    event_id: &str,
    phase_id: &str,
    account_id: &str,
) -> StoreResult<bool> {
    let mut pooled = db.read().await?;
    Ok(query(
        "SELECT 1 FROM access_redemption WHERE event_id = $1 AND phase_id = $2 AND account_id = $3",
    )
    .bind(event_id)
    .bind(phase_id)
    .bind(account_id)
    .fetch_optional(&mut pooled.conn())
    .await?
    .is_some())
}

/// Every redemption of the event's codes, for the writer's engine.
pub async fn load_redemptions(conn: &mut Conn<'_>, event_id: &str) -> StoreResult<Vec<Redemption>> {
    query("SELECT phase_id, account_id, code FROM access_redemption WHERE event_id = $1")
        .bind(event_id)
        .fetch_all(conn)
        .await?
        .iter()
        .map(|row| {
            Ok(Redemption {
                phase_id: row.get(0)?,
                account_id: row.get(1)?,
                code: row.get(2)?,
            })
        })
        .collect()
}

/// The group's redemptions: each code's uses raised by its redemptions only while they stay
/// within its maximum (one row per code, counted), and one redemption row per account and
/// phase (the primary key refuses a second: the group is refused).
pub async fn write(conn: &mut Conn<'_>, group: &GroupWrite<'_>) -> StoreResult<()> {
    let redeemed: Vec<&Redemption> = group
        .effects
        .access_redeemed()
        .map(|r| &r.redemption)
        .collect();
    if redeemed.is_empty() {
        return Ok(());
    }
    let d = conn.dialect();
    let event_id = group.event.event_id.as_str();
    let mut per_code: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for r in &redeemed {
        *per_code
            .entry((r.phase_id.as_str(), r.code.as_str()))
            .or_default() += 1;
    }
    let codes = per_code.len();
    let rows = Rows::new()
        .texts("phase", per_code.keys().map(|(phase, _)| *phase))
        .texts("code", per_code.keys().map(|(_, code)| *code))
        .ints("n", per_code.values().copied());
    query(format!(
        "UPDATE access_code AS a SET uses = a.uses + u.n
           FROM {u}
          WHERE a.event_id = $1 AND a.phase_id = u.phase AND a.code = u.code
            AND a.uses + u.n <= a.max_uses",
        u = rows.table(d, 2, "u"),
    ))
    .bind(event_id)
    .bind_rows(d, rows)
    .execute_exactly(conn, codes, "access codes with uses left")
    .await?;
    let rows = Rows::new()
        .texts("phase", redeemed.iter().map(|r| r.phase_id.as_str()))
        .texts("account", redeemed.iter().map(|r| r.account_id.as_str()))
        .texts("code", redeemed.iter().map(|r| r.code.as_str()));
    let inserted = query(format!(
        "INSERT INTO access_redemption (event_id, phase_id, account_id, code, redeemed_at)
         SELECT $1, u.phase, u.account, u.code, $2 FROM {u}",
        u = rows.table(d, 3, "u"),
    ))
    .bind(event_id)
    .bind(group.now)
    .bind_rows(d, rows)
    .execute(conn)
    .await?;
    if inserted != redeemed.len() as u64 {
        return Err(mismatch("access redemptions", redeemed.len(), inserted));
    }
    Ok(())
}
