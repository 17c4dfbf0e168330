//! The PostgreSQL backend of the boxoffice [`Store`]: the production store.
//!
//! Each trait method is one short transaction at READ COMMITTED. Writers lock rows in one
//! global order — seats by (event_id, seat_id), then tiers by tier_id, then holds — so that
//! concurrent batches, releases and sweeps cannot deadlock among themselves; a deadlock or
//! unique-key race that happens anyway (another process) is retried whole, up to
//! [`boxoffice_store::BATCH_ATTEMPTS_MAX`] times, and never reaches a client. Bulk writes use `UNNEST` so a
//! batch of any size costs a fixed number of round trips.

mod checkout;
mod engine;
mod exchange;
mod seatmap;

pub use checkout::unknown_backoff_s;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{
    BatchState, HoldOutcome, HoldRequest, HoldShape, SeatRow, TierRow, decide_holds,
};
use boxoffice_domain::event::{EventSpec, Section, Tier};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::inventory::{HoldRecord, Inventory, SeatRecord};
use boxoffice_store::exchange::ExchangeStatus;
use boxoffice_store::seatmap::MapChanges;
use boxoffice_store::{
    EventCounts, EventRecord, HoldView, ReleaseOutcome, RenderEvent, RenderHold, Store, StoreError,
    StoreResult, SweepReport, answer_batch, event_record, held_seats_json, hold_created_payload,
    hold_ended_payload, parse_held_seats, parse_hold_status, parse_waiting_room, retrying,
    waiting_room_json,
};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};

/// Connections in the pool. Batching keeps the write path to about one connection per hot
/// event; the rest serve reads.
pub const POOL_CONNECTIONS_MAX: u32 = 16;
/// How long a request waits for a pooled connection before the store counts as unavailable.
pub const POOL_ACQUIRE_TIMEOUT_MS: u64 = 3_000;
/// An event with at least this many seats refreshes the seat table's statistics.
const ANALYZE_SEATS_MIN: usize = 2_000;
/// Seats inserted per statement when creating an event.
const SEAT_INSERT_CHUNK: usize = 10_000;

/// The store's clock, truncated to milliseconds so both backends render the same times.
const NOW_SQL: &str = "SELECT date_trunc('milliseconds', clock_timestamp())";

/// A PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

pub(crate) fn classify(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // 40001 serialization failure, 40P01 deadlock, 23505 unique violation (a
            // concurrent insert of the same key): transient, the batch is retried.
            if matches!(code.as_ref(), "40001" | "40P01" | "23505") {
                StoreError::Conflict(error.to_string())
            } else if code.starts_with("08") || code.starts_with("57") || code.starts_with("53") {
                StoreError::Unavailable(error.to_string())
            } else {
                StoreError::Internal(error.to_string())
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => StoreError::Unavailable(error.to_string()),
        _ => StoreError::Internal(error.to_string()),
    }
}

pub(crate) async fn store_now(tx: &mut Transaction<'_, Postgres>) -> StoreResult<OffsetDateTime> {
    sqlx::query_scalar::<_, OffsetDateTime>(NOW_SQL)
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)
}

fn to_u32(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl PgStore {
    /// Connects to `url` (`postgres://...`). Does not migrate.
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e: sqlx::Error| StoreError::Internal(format!("bad database url: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS_MAX)
            .acquire_timeout(Duration::from_millis(POOL_ACQUIRE_TIMEOUT_MS))
            .connect_with(options)
            .await
            .map_err(classify)?;
        Ok(Self { pool })
    }

    /// Creates the database `url` names when it does not exist yet (a fresh machine, a test),
    /// with the "C" collation: every key here is an id compared byte for byte, and a
    /// language collation (e.g. `C.UTF-8` or `en_US.UTF-8`) made each index comparison a
    /// locale call (~10 % of the hold path's throughput, measured).
    pub async fn create_database_if_missing(url: &str) -> StoreResult<()> {
        use sqlx::migrate::MigrateDatabase;
        use sqlx::{Connection, Executor};
        if Postgres::database_exists(url).await.map_err(classify)? {
            return Ok(());
        }
        let options: PgConnectOptions = url
            .parse()
            .map_err(|e| StoreError::Internal(format!("bad database url: {e}")))?;
        let name = options
            .get_database()
            .ok_or_else(|| StoreError::Internal("the database url names no database".into()))?
            .to_owned();
        let mut admin = sqlx::PgConnection::connect_with(&options.clone().database("postgres"))
            .await
            .map_err(classify)?;
        let create = format!(
            "CREATE DATABASE \"{}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
            name.replace('"', "\"\"")
        );
        // Two processes may race to create it; the loser's error is harmless.
        if let Err(error) = admin.execute(sqlx::AssertSqlSafe(create)).await
            && !Postgres::database_exists(url).await.map_err(classify)?
        {
            return Err(classify(error));
        }
        let _ = admin.close().await;
        Ok(())
    }

    /// The pool, for tests that plant rows directly.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn load_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        let row = sqlx::query(
            "SELECT event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                    max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s,
                    waiting_room::text AS waiting_room, created_at
               FROM event WHERE event_id = $1",
        )
        .bind(event_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        let Some(row) = row else { return Ok(None) };
        let sections = sqlx::query_as::<_, (String, i32, i32, i64)>(
            "SELECT name, rows, seats_per_row, price_minor FROM section WHERE event_id = $1 ORDER BY position",
        )
        .bind(event_id)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?
        .into_iter()
        .map(|(name, rows, seats_per_row, price_minor)| Section {
            name,
            rows: to_u32(rows),
            seats_per_row: to_u32(seats_per_row),
            price_minor,
        })
        .collect();
        let tiers = sqlx::query_as::<_, (String, String, i64, i64)>(
            "SELECT tier_id, name, capacity, price_minor FROM tier WHERE event_id = $1 ORDER BY position",
        )
        .bind(event_id)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?
        .into_iter()
        .map(|(tier_id, name, capacity, price_minor)| Tier {
            tier_id,
            name,
            capacity: u32::try_from(capacity).unwrap_or(0),
            price_minor,
        })
        .collect();
        let waiting_room: String = row.get("waiting_room");
        Ok(Some(EventRecord {
            event_id: row.get("event_id"),
            name: row.get("name"),
            starts_at: row.get("starts_at"),
            on_sale_at: row.get("on_sale_at"),
            currency: row.get("currency"),
            hold_ttl_s: to_u32(row.get("hold_ttl_s")),
            payment_grace_s: to_u32(row.get("payment_grace_s")),
            max_seats_per_hold: to_u32(row.get("max_seats_per_hold")),
            max_tickets_per_account: to_u32(row.get("max_tickets_per_account")),
            exchange_cutoff_s: to_u32(row.get("exchange_cutoff_s")),
            waiting_room: parse_waiting_room(&waiting_room),
            sections,
            tiers,
            created_at: row.get("created_at"),
        }))
    }

    async fn create_event_once(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let mut tx = self.pool.begin().await.map_err(classify)?;
        if let Some(answer) = prior_answer(&mut tx, scope, request_digest).await? {
            return Ok(answer);
        }
        let now = store_now(&mut tx).await?;
        let record = event_record(event_id, spec, now);
        sqlx::query(
            "INSERT INTO event (event_id, name, starts_at, on_sale_at, currency, hold_ttl_s, payment_grace_s,
                                max_seats_per_hold, max_tickets_per_account, exchange_cutoff_s, waiting_room, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12)",
        )
        .bind(&record.event_id)
        .bind(&record.name)
        .bind(record.starts_at)
        .bind(record.on_sale_at)
        .bind(&record.currency)
        .bind(record.hold_ttl_s as i32)
        .bind(record.payment_grace_s as i32)
        .bind(record.max_seats_per_hold as i32)
        .bind(record.max_tickets_per_account as i32)
        .bind(record.exchange_cutoff_s as i32)
        .bind(waiting_room_json(&record.waiting_room))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        for (position, section) in spec.sections.iter().enumerate() {
            sqlx::query(
                "INSERT INTO section (event_id, name, position, rows, seats_per_row, price_minor)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(event_id)
            .bind(&section.name)
            .bind(position as i32)
            .bind(section.rows as i32)
            .bind(section.seats_per_row as i32)
            .bind(section.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        for (position, tier) in spec.tiers.iter().enumerate() {
            sqlx::query(
                "INSERT INTO tier (event_id, tier_id, position, name, capacity, price_minor, available, held, sold)
                 VALUES ($1, $2, $3, $4, $5, $6, $5, 0, 0)",
            )
            .bind(event_id)
            .bind(&tier.tier_id)
            .bind(position as i32)
            .bind(&tier.name)
            .bind(i64::from(tier.capacity))
            .bind(tier.price_minor)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        let seats: Vec<_> = spec.seats().collect();
        for chunk in seats.chunks(SEAT_INSERT_CHUNK) {
            let ids: Vec<String> = chunk.iter().map(|(s, _)| s.to_string()).collect();
            let sections: Vec<&str> = chunk.iter().map(|(s, _)| s.section.as_str()).collect();
            let rows: Vec<i32> = chunk.iter().map(|(s, _)| s.row as i32).collect();
            let numbers: Vec<i32> = chunk.iter().map(|(s, _)| s.number as i32).collect();
            let prices: Vec<i64> = chunk.iter().map(|(_, p)| *p).collect();
            sqlx::query(
                "INSERT INTO seat (event_id, seat_id, section, row_no, seat_no, price_minor, status)
                 SELECT $1, u.seat_id, u.section, u.row_no, u.seat_no, u.price_minor, 'AVAILABLE'
                   FROM UNNEST($2::text[], $3::text[], $4::int[], $5::int[], $6::bigint[])
                        AS u(seat_id, section, row_no, seat_no, price_minor)",
            )
            .bind(event_id)
            .bind(&ids)
            .bind(&sections)
            .bind(&rows)
            .bind(&numbers)
            .bind(&prices)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        sqlx::query("INSERT INTO seatmap (event_id, version) VALUES ($1, 0)")
            .bind(event_id)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let response = render(&record);
        insert_records(
            &mut tx,
            &scope.endpoint,
            &[boxoffice_store::NewRecord {
                account_id: scope.account_id.clone(),
                key: scope.key.clone(),
                request_digest: request_digest.to_owned(),
                response: response.clone(),
            }],
            now,
        )
        .await?;
        tx.commit().await.map_err(classify)?;
        Ok(Idempotent::Fresh(response))
    }

    async fn hold_batch_once(
        &self,
        event: &EventRecord,
        endpoint: &str,
        requests: &[HoldRequest],
        render: &RenderHold,
    ) -> StoreResult<Vec<Idempotent>> {
        let event_id = event.event_id.as_str();
        let mut tx = self.pool.begin().await.map_err(classify)?;

        // 1. Idempotency records already stored for the batch's keys. A hold whose record
        //    was purged (older than the retention) still owns its key: it comes back with an
        //    empty digest, which matches no request, so the key counts as reused.
        let accounts: Vec<&str> = requests.iter().map(|r| r.account_id.as_str()).collect();
        let keys: Vec<&str> = requests
            .iter()
            .map(|r| r.idempotency_key.as_str())
            .collect();
        let prior_rows = sqlx::query_as::<_, (String, String, String, i32, Vec<u8>)>(
            "SELECT i.account_id, i.idem_key, i.request_digest, i.status_code, i.response_body
               FROM idempotency i
               JOIN UNNEST($2::text[], $3::text[]) AS k(account_id, idem_key)
                 ON i.account_id = k.account_id AND i.idem_key = k.idem_key
              WHERE i.endpoint = $1
             UNION ALL
             SELECT h.account_id, h.idempotency_key, '', 0, ''::bytea
               FROM hold h
               JOIN UNNEST($2::text[], $3::text[]) AS k(account_id, idem_key)
                 ON h.account_id = k.account_id AND h.idempotency_key = k.idem_key
              WHERE h.event_id = $4
                AND NOT EXISTS (SELECT 1 FROM idempotency i
                                 WHERE i.account_id = h.account_id AND i.endpoint = $1
                                   AND i.idem_key = h.idempotency_key)",
        )
        .bind(endpoint)
        .bind(&accounts)
        .bind(&keys)
        .bind(event_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        let mut prior_digests = BTreeMap::new();
        let mut prior_responses = BTreeMap::new();
        for (account_id, key, digest, status, body) in prior_rows {
            let purged = digest.is_empty();
            prior_digests.insert((account_id.clone(), key.clone()), digest);
            if purged {
                continue;
            }
            let response = StoredResponse {
                status: u16::try_from(status).unwrap_or(500),
                body,
            };
            prior_responses.insert((account_id, key), response);
        }

        // 2. Lock the seats involved, in seat order.
        let mut seat_ids = BTreeSet::new();
        let mut tier_ids = BTreeSet::new();
        let mut best_sections = BTreeSet::new();
        let mut best_everywhere = false;
        for request in requests {
            match &request.shape {
                HoldShape::Seats { seat_ids: ids } => seat_ids.extend(ids.iter().cloned()),
                HoldShape::Tier { tier_id, .. } => {
                    tier_ids.insert(tier_id.clone());
                }
                // Best available decides among every seat of its candidate sections, so
                // all of them are locked (in the same seat order as everything else).
                HoldShape::BestAvailable { section, .. } => match section {
                    Some(section) => {
                        best_sections.insert(section.clone());
                    }
                    None => best_everywhere = true,
                },
            }
        }
        let seat_ids: Vec<String> = seat_ids.into_iter().collect();
        let best_sections: Vec<String> = best_sections.into_iter().collect();
        let seat_rows = if seat_ids.is_empty() {
            Vec::new()
        } else {
            sqlx::query_as::<_, (String, String, Option<String>, Option<OffsetDateTime>, i64)>(
                "SELECT seat_id, status, hold_id, hold_expires_at, price_minor
                   FROM seat WHERE event_id = $1 AND seat_id = ANY($2)
                  ORDER BY seat_id FOR UPDATE",
            )
            .bind(event_id)
            .bind(&seat_ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
        };
        let now = store_now(&mut tx).await?;
        // Best available decides among the free seats of its sections, read WITHOUT a lock
        // (locking a whole section wrote a row lock into every seat of it, per batch); the
        // seats it picks are locked after the decision and checked to be still free. In one
        // process batches of an event never overlap, so the check fails only when another
        // node took a seat in between: the batch is then retried (StoreError::Conflict).
        //    A named section reads only its first free seats in (row, seat) order — enough
        //    for the batch's requests several times over ([`BEST_READ_FACTOR`]); should a
        //    request then find nothing in a section whose read was cut short, the batch is
        //    decided again on every free seat of its sections (step 5).
        let best_limits: Vec<i64> = best_sections
            .iter()
            .map(|section| {
                let wanted: i64 = requests
                    .iter()
                    .filter_map(|r| match &r.shape {
                        HoldShape::BestAvailable {
                            section: Some(s),
                            quantity,
                            ..
                        } if s == section => Some(i64::from(*quantity)),
                        _ => None,
                    })
                    .sum();
                wanted * BEST_READ_FACTOR + BEST_READ_SLACK
            })
            .collect();
        let (free_rows, truncated) = read_free_seats(
            &mut tx,
            event_id,
            &best_sections,
            Some(&best_limits),
            best_everywhere,
            now,
        )
        .await?;
        // 3. Lock the tiers involved, then give back units of their expired, unswept holds
        //    (an expired hold never blocks a new one).
        let tier_ids: Vec<String> = tier_ids.into_iter().collect();
        let mut tiers = BTreeMap::new();
        let mut map = MapChanges::default();
        if !tier_ids.is_empty() {
            sqlx::query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = ANY($2) ORDER BY tier_id FOR UPDATE")
                .bind(event_id)
                .bind(&tier_ids)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
            reclaim_expired_tier_holds(&mut tx, event_id, &tier_ids, now, &mut map).await?;
            let rows = sqlx::query_as::<_, (String, i64, i64, i64, i64, i64)>(
                "SELECT tier_id, capacity, available, held, sold, price_minor
                   FROM tier WHERE event_id = $1 AND tier_id = ANY($2)",
            )
            .bind(event_id)
            .bind(&tier_ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
            for (tier_id, capacity, available, held, sold, price_minor) in rows {
                let row = TierRow {
                    tier_id: tier_id.clone(),
                    capacity,
                    available,
                    held,
                    sold,
                    price_minor,
                };
                tiers.insert(tier_id, row);
            }
        }

        // 4. What each account already holds or owns for this event.
        let mut distinct_accounts: Vec<&str> = accounts.clone();
        distinct_accounts.sort_unstable();
        distinct_accounts.dedup();
        let usage_by_account: BTreeMap<String, u32> = sqlx::query_as::<_, (String, i64)>(
            // The status list is the partial index's own predicate (one index scan; the OR
            // form was planned as two).
            "SELECT account_id,
                    COALESCE(sum(quantity - exchanged_out) FILTER (WHERE status = 'CONFIRMED' OR expires_at > $3), 0)::bigint
               FROM hold
              WHERE event_id = $1 AND account_id = ANY($2)
                AND status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED')
              GROUP BY account_id",
        )
        .bind(event_id)
        .bind(&distinct_accounts)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .into_iter()
        .map(|(account, n)| (account, u32::try_from(n).unwrap_or(u32::MAX)))
        .collect();

        // 5. Decide, in memory, in arrival order.
        let rules = event.rules();
        let decide_on =
            |free_rows: &[SeatRowTuple]| -> StoreResult<(BatchState, Vec<HoldOutcome>)> {
                let mut state = BatchState {
                    now,
                    seats: seat_map_of(&seat_rows, free_rows)?,
                    tiers: tiers.clone(),
                    usage_by_account: usage_by_account.clone(),
                    prior_digests: prior_digests.clone(),
                };
                let outcomes = decide_holds(&rules, &mut state, requests);
                Ok((state, outcomes))
            };
        let (mut state, mut outcomes) = decide_on(&free_rows)?;
        let mut read_unlocked: BTreeSet<String> =
            free_rows.iter().map(|row| row.0.clone()).collect();
        let cut_short_refused = requests.iter().zip(&outcomes).any(|(request, outcome)| {
            matches!(outcome, HoldOutcome::SeatsUnavailable { .. })
                && matches!(&request.shape, HoldShape::BestAvailable { section: Some(s), .. }
                            if truncated.contains(s))
        });
        if cut_short_refused {
            let (all_free, _) = read_free_seats(
                &mut tx,
                event_id,
                &best_sections,
                None,
                best_everywhere,
                now,
            )
            .await?;
            (state, outcomes) = decide_on(&all_free)?;
            read_unlocked = all_free.iter().map(|row| row.0.clone()).collect();
        }
        let locked: BTreeSet<&str> = seat_rows.iter().map(|row| row.0.as_str()).collect();
        read_unlocked.retain(|seat_id| !locked.contains(seat_id.as_str()));
        let (answers, records) = answer_batch(requests, &outcomes, &prior_responses, render);

        // 6. Write the winners, every record, the outbox; then commit.
        let winners: Vec<(&HoldRequest, &boxoffice_domain::decide::NewHold)> = requests
            .iter()
            .zip(&outcomes)
            .filter_map(|(request, outcome)| match outcome {
                HoldOutcome::Held(hold) => Some((request, hold)),
                _ => None,
            })
            .collect();
        let picked: Vec<&str> = winners
            .iter()
            .flat_map(|(_, hold)| hold.seats.iter().map(|(seat_id, _)| seat_id.as_str()))
            .filter(|seat_id| read_unlocked.contains(*seat_id))
            .collect();
        if !picked.is_empty() {
            lock_still_free(&mut tx, event_id, &picked, now).await?;
        }
        if !winners.is_empty() {
            write_winners(&mut tx, event, &winners, &state, now, &mut map).await?;
        }
        insert_records(&mut tx, endpoint, &records, now).await?;
        seatmap::record(&mut tx, &map, now).await?;
        tx.commit().await.map_err(classify)?;
        Ok(answers)
    }

    async fn release_once(&self, account_id: &str, hold_id: &str) -> StoreResult<ReleaseOutcome> {
        let Some(hold) = self.get_hold(hold_id).await? else {
            return Ok(ReleaseOutcome::NotFound);
        };
        if hold.account_id != account_id {
            return Ok(ReleaseOutcome::NotFound);
        }
        let mut tx = self.pool.begin().await.map_err(classify)?;
        lock_hold_resources(&mut tx, &hold).await?;
        let now = store_now(&mut tx).await?;
        let released = sqlx::query(
            "UPDATE hold SET status = 'RELEASED', updated_at = $3
              WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' AND expires_at > $3",
        )
        .bind(&hold.event_id)
        .bind(hold_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(classify)?
        .rows_affected();
        if released == 1 {
            let mut map = MapChanges::default();
            free_hold_resources(&mut tx, &hold, now, HoldStatus::Released, &mut map).await?;
            seatmap::record(&mut tx, &map, now).await?;
        }
        tx.commit().await.map_err(classify)?;
        if released == 0 {
            // Already ended (or past its deadline, which the sweeper will write): harmless.
            let current = self.get_hold(hold_id).await?.unwrap_or(hold);
            return Ok(match current.status {
                HoldStatus::PaymentPending => ReleaseOutcome::InCheckout(current),
                _ => ReleaseOutcome::AlreadyEnded(current),
            });
        }
        let current = self.get_hold(hold_id).await?.unwrap_or(hold);
        Ok(ReleaseOutcome::Released(current))
    }

    async fn expire_once(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        let mut report = SweepReport::default();
        if hold_ids.is_empty() {
            return Ok(report);
        }
        let holds = fetch_holds(&self.pool, hold_ids).await?;
        let mut tx = self.pool.begin().await.map_err(classify)?;
        // Lock every seat and tier involved in the global order before any hold changes.
        let mut by_event: BTreeMap<&str, Vec<&HoldView>> = BTreeMap::new();
        for hold in &holds {
            by_event
                .entry(hold.event_id.as_str())
                .or_default()
                .push(hold);
        }
        for (event_id, event_holds) in &by_event {
            let ids: Vec<&str> = event_holds.iter().map(|h| h.hold_id.as_str()).collect();
            // By the partial index on hold_id (with `event_id = $1` too the planner walked
            // the event's primary key: 38 ms a sweep, holding up hold batches).
            sqlx::query("SELECT 1 FROM seat WHERE hold_id = ANY($1) ORDER BY seat_id FOR UPDATE")
                .bind(&ids)
                .execute(&mut *tx)
                .await
                .map_err(classify)?;
            let mut tier_ids: Vec<&str> = event_holds
                .iter()
                .filter_map(|h| h.tier_id.as_deref())
                .collect();
            tier_ids.sort_unstable();
            tier_ids.dedup();
            if !tier_ids.is_empty() {
                sqlx::query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = ANY($2) ORDER BY tier_id FOR UPDATE")
                    .bind(*event_id)
                    .bind(&tier_ids)
                    .execute(&mut *tx)
                    .await
                    .map_err(classify)?;
            }
        }
        let now = store_now(&mut tx).await?;
        let mut map = MapChanges::default();
        // Set-based: a handful of statements whatever the number of holds, so the seat locks
        // taken above are held for milliseconds (one statement per hold kept them for
        // seconds at a thousand expiries a second, and hold batches queued behind them).
        let ids: Vec<&str> = holds.iter().map(|h| h.hold_id.as_str()).collect();
        let expired: BTreeSet<String> = sqlx::query_scalar::<_, String>(
            "UPDATE hold SET status = 'EXPIRED', updated_at = $2
              WHERE hold_id = ANY($1) AND status IN ('HELD', 'PAYMENT_PENDING') AND expires_at <= $2
             RETURNING hold_id",
        )
        .bind(&ids)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .into_iter()
        .collect();
        let expired: Vec<&HoldView> = holds
            .iter()
            .filter(|h| expired.contains(&h.hold_id))
            .collect();
        if !expired.is_empty() {
            let events: Vec<&str> = expired.iter().map(|h| h.event_id.as_str()).collect();
            let ids: Vec<&str> = expired.iter().map(|h| h.hold_id.as_str()).collect();
            exchange::end_exchanges_of(&mut tx, &ids, ExchangeStatus::Expired, now).await?;
            // A hold that ran out of grace in checkout takes its order with it; an
            // authorization that arrives later is voided (see settle_payment).
            sqlx::query(
                "WITH cancelled AS (
                    UPDATE orders SET status = 'CANCELLED', cancel_reason = 'HOLD_EXPIRED', updated_at = $2
                     WHERE hold_id = ANY($1) AND status = 'PENDING_PAYMENT' RETURNING event_id, order_id)
                 INSERT INTO outbox (event_id, topic, payload, created_at)
                 SELECT event_id, 'order.cancelled',
                        jsonb_build_object('orderId', order_id, 'reason', 'HOLD_EXPIRED'), $2
                   FROM cancelled",
            )
            .bind(&ids)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            // The seats that still point to an expired hold come back (exactly once: the
            // status change above was conditional).
            // Hold ids are unique across events: the partial index on seat.hold_id serves
            // `= ANY` (a join with UNNEST was planned as a scan of every seat).
            let freed = sqlx::query_as::<_, (String, String)>(
                "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL,
                                 version = version + 1
                  WHERE hold_id = ANY($1) AND status = 'HELD'
                 RETURNING event_id, seat_id",
            )
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?;
            for (event_id, seat_id) in &freed {
                map.seat(event_id, seat_id, SeatStatus::Available, None);
            }
            report.seats_freed += freed.len() as u64;
            let mut units: BTreeMap<(&str, &str), i64> = BTreeMap::new();
            for hold in &expired {
                if let Some(tier_id) = &hold.tier_id {
                    *units
                        .entry((hold.event_id.as_str(), tier_id.as_str()))
                        .or_default() += i64::from(hold.quantity);
                    report.tier_units_returned += u64::from(hold.quantity);
                }
            }
            for ((event_id, tier_id), quantity) in units {
                let available = sqlx::query_scalar::<_, i64>(
                    "UPDATE tier SET held = held - $3, available = available + $3
                      WHERE event_id = $1 AND tier_id = $2 RETURNING available",
                )
                .bind(event_id)
                .bind(tier_id)
                .bind(quantity)
                .fetch_one(&mut *tx)
                .await
                .map_err(classify)?;
                map.tier(event_id, tier_id, available);
            }
            let payloads: Vec<String> = expired
                .iter()
                .map(|h| hold_ended_payload(&h.event_id, &h.hold_id, HoldStatus::Expired))
                .collect();
            sqlx::query(
                "INSERT INTO outbox (event_id, topic, payload, created_at)
                 SELECT e, 'hold.expired', p::jsonb, $3 FROM UNNEST($1::text[], $2::text[]) AS u(e, p)",
            )
            .bind(&events)
            .bind(&payloads)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
            report.holds_expired += expired.len() as u64;
        }
        seatmap::record(&mut tx, &map, now).await?;
        tx.commit().await.map_err(classify)?;
        Ok(report)
    }
}

/// The stored answer for `scope`, if any: a replay or a key reuse.
pub(crate) async fn prior_answer(
    tx: &mut Transaction<'_, Postgres>,
    scope: &IdempotencyScope,
    request_digest: &str,
) -> StoreResult<Option<Idempotent>> {
    let row = sqlx::query_as::<_, (String, i32, Vec<u8>)>(
        "SELECT request_digest, status_code, response_body FROM idempotency
          WHERE account_id = $1 AND endpoint = $2 AND idem_key = $3",
    )
    .bind(&scope.account_id)
    .bind(&scope.endpoint)
    .bind(&scope.key)
    .fetch_optional(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(row.map(|(digest, status, body)| {
        boxoffice_store::stored_answer_of(&digest, request_digest, i64::from(status), body)
    }))
}

pub(crate) async fn insert_records(
    tx: &mut Transaction<'_, Postgres>,
    endpoint: &str,
    records: &[boxoffice_store::NewRecord],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let records: Vec<(&str, &boxoffice_store::NewRecord)> =
        records.iter().map(|r| (endpoint, r)).collect();
    insert_records_each(tx, &records, now).await
}

/// Idempotency records, each under its own endpoint, in one statement.
pub(crate) async fn insert_records_each(
    tx: &mut Transaction<'_, Postgres>,
    records: &[(&str, &boxoffice_store::NewRecord)],
    now: OffsetDateTime,
) -> StoreResult<()> {
    if records.is_empty() {
        return Ok(());
    }
    let endpoints: Vec<&str> = records.iter().map(|(e, _)| *e).collect();
    let accounts: Vec<&str> = records.iter().map(|(_, r)| r.account_id.as_str()).collect();
    let keys: Vec<&str> = records.iter().map(|(_, r)| r.key.as_str()).collect();
    let digests: Vec<&str> = records
        .iter()
        .map(|(_, r)| r.request_digest.as_str())
        .collect();
    let statuses: Vec<i32> = records
        .iter()
        .map(|(_, r)| i32::from(r.response.status))
        .collect();
    let bodies: Vec<&[u8]> = records
        .iter()
        .map(|(_, r)| r.response.body.as_slice())
        .collect();
    sqlx::query(
        "INSERT INTO idempotency (account_id, endpoint, idem_key, request_digest, status_code, response_body, created_at)
         SELECT u.a, u.e, u.k, u.d, u.s, u.b, $7
           FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bytea[]) AS u(a, e, k, d, s, b)",
    )
    .bind(&accounts)
    .bind(&endpoints)
    .bind(&keys)
    .bind(&digests)
    .bind(&statuses)
    .bind(&bodies)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(())
}

pub(crate) async fn reclaim_expired_tier_holds(
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    tier_ids: &[String],
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let returned = sqlx::query_as::<_, (String, i64)>(
        "WITH due AS (
            UPDATE hold SET status = 'EXPIRED', updated_at = $3
             WHERE event_id = $1 AND tier_id = ANY($2) AND status = 'HELD' AND expires_at <= $3
            RETURNING hold_id, tier_id, quantity
         ), announced AS (
            INSERT INTO outbox (event_id, topic, payload, created_at)
            SELECT $1, 'hold.expired',
                   jsonb_build_object('eventId', $1::text, 'holdId', hold_id, 'status', 'EXPIRED'), $3
              FROM due
         ), ended AS (
            -- An exchange whose new hold lapsed ends with it (see exchange::end_exchanges_of).
            UPDATE exchange SET status = 'EXPIRED', updated_at = $3
             WHERE new_hold_id IN (SELECT hold_id FROM due) AND status = 'PAYMENT_REQUIRED'
            RETURNING exchange_id, from_event_id, order_id
         ), unmarked AS (
            UPDATE ticket SET exchange_id = NULL
             WHERE exchange_id IN (SELECT exchange_id FROM ended) AND status = 'VALID'
         ), exchange_announced AS (
            INSERT INTO outbox (event_id, topic, payload, created_at)
            SELECT from_event_id, 'exchange.ended',
                   jsonb_build_object('exchangeId', exchange_id, 'orderId', order_id, 'status', 'EXPIRED'), $3
              FROM ended
         )
         UPDATE tier t SET held = t.held - d.n, available = t.available + d.n
           FROM (SELECT tier_id, sum(quantity)::bigint AS n FROM due GROUP BY tier_id) d
          WHERE t.event_id = $1 AND t.tier_id = d.tier_id
         RETURNING t.tier_id, t.available",
    )
    .bind(event_id)
    .bind(tier_ids)
    .bind(now)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for (tier_id, available) in returned {
        map.tier(event_id, &tier_id, available);
    }
    Ok(())
}

/// A seat row as the batch reads it: id, status, hold id, hold deadline, price.
type SeatRowTuple = (String, String, Option<String>, Option<OffsetDateTime>, i64);

/// A named section's best-available read takes this many free seats per seat requested...
const BEST_READ_FACTOR: i64 = 4;
/// ...plus this many (a few rows), so that adjacency is rarely what runs out.
const BEST_READ_SLACK: i64 = 400;

/// The free seats (available, or held past their deadline) of `sections` — the first
/// `limits[i]` of section i in (row, seat) order when limits are given — and of every section
/// when `everywhere`, read without locks; and the sections whose read hit its limit.
async fn read_free_seats(
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    sections: &[String],
    limits: Option<&[i64]>,
    everywhere: bool,
    now: OffsetDateTime,
) -> StoreResult<(Vec<SeatRowTuple>, BTreeSet<String>)> {
    let mut truncated = BTreeSet::new();
    if everywhere {
        let rows = sqlx::query_as::<_, SeatRowTuple>(
            "SELECT seat_id, status, hold_id, hold_expires_at, price_minor FROM seat
              WHERE event_id = $1
                AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= $2))",
        )
        .bind(event_id)
        .bind(now)
        .fetch_all(&mut **tx)
        .await
        .map_err(classify)?;
        return Ok((rows, truncated));
    }
    if sections.is_empty() {
        return Ok((Vec::new(), truncated));
    }
    let unlimited: Vec<i64> = vec![i64::MAX; sections.len()];
    let limits = limits.unwrap_or(&unlimited);
    let rows = sqlx::query_as::<
        _,
        (
            String,
            String,
            String,
            Option<String>,
            Option<OffsetDateTime>,
            i64,
        ),
    >(
        "SELECT w.section, s.seat_id, s.status, s.hold_id, s.hold_expires_at, s.price_minor
           FROM UNNEST($2::text[], $3::bigint[]) AS w(section, lim)
           CROSS JOIN LATERAL (
                SELECT seat_id, status, hold_id, hold_expires_at, price_minor FROM seat
                 WHERE event_id = $1 AND section = w.section
                   AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= $4))
                 ORDER BY row_no, seat_no
                 LIMIT w.lim) s",
    )
    .bind(event_id)
    .bind(sections)
    .bind(limits)
    .bind(now)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    let mut per_section: BTreeMap<&str, i64> = BTreeMap::new();
    for row in &rows {
        *per_section.entry(row.0.as_str()).or_default() += 1;
    }
    for (section, limit) in sections.iter().zip(limits) {
        if per_section.get(section.as_str()).copied().unwrap_or(0) >= *limit {
            truncated.insert(section.clone());
        }
    }
    let rows = rows
        .into_iter()
        .map(|(_, seat_id, status, hold_id, expires_at, price)| {
            (seat_id, status, hold_id, expires_at, price)
        })
        .collect();
    Ok((rows, truncated))
}

/// The batch's seats: the locked (named) rows, then the free rows read without a lock.
fn seat_map_of(
    locked: &[SeatRowTuple],
    free: &[SeatRowTuple],
) -> StoreResult<BTreeMap<String, SeatRow>> {
    let mut seats = BTreeMap::new();
    for (seat_id, status, hold_id, hold_expires_at, price_minor) in free.iter().chain(locked) {
        let status = SeatStatus::parse(status)
            .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {status:?}")))?;
        // A locked row comes last and wins over an unlocked read of the same seat.
        seats.insert(
            seat_id.clone(),
            SeatRow {
                seat_id: seat_id.clone(),
                status,
                hold_id: hold_id.clone(),
                hold_expires_at: *hold_expires_at,
                price_minor: *price_minor,
            },
        );
    }
    Ok(seats)
}

/// Locks the seats best available picked from an unlocked read, in seat order, and checks
/// that each is still free; a seat taken meanwhile (by another node) is a conflict and the
/// batch is retried.
async fn lock_still_free(
    tx: &mut Transaction<'_, Postgres>,
    event_id: &str,
    picked: &[&str],
    now: OffsetDateTime,
) -> StoreResult<()> {
    let mut picked = picked.to_vec();
    picked.sort_unstable();
    let rows = sqlx::query_as::<_, (String, String, Option<OffsetDateTime>)>(
        "SELECT seat_id, status, hold_expires_at FROM seat
          WHERE event_id = $1 AND seat_id = ANY($2) ORDER BY seat_id FOR UPDATE",
    )
    .bind(event_id)
    .bind(&picked)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    let all_free = rows.len() == picked.len()
        && rows.iter().all(|(_, status, expires_at)| {
            SeatStatus::parse(status).is_some_and(|status| {
                boxoffice_domain::hold::seat_is_free(status, *expires_at, now)
            })
        });
    if all_free {
        Ok(())
    } else {
        Err(StoreError::Conflict(
            "a seat best available picked was taken by another transaction".into(),
        ))
    }
}

async fn write_winners(
    tx: &mut Transaction<'_, Postgres>,
    event: &EventRecord,
    winners: &[(&HoldRequest, &boxoffice_domain::decide::NewHold)],
    state: &BatchState,
    now: OffsetDateTime,
    map: &mut MapChanges,
) -> StoreResult<()> {
    let event_id = event.event_id.as_str();
    let mut seat_ids = Vec::new();
    let mut seat_holds = Vec::new();
    let mut seat_deadlines = Vec::new();
    for (_, hold) in winners {
        for (seat_id, _) in &hold.seats {
            seat_ids.push(seat_id.as_str());
            seat_holds.push(hold.hold_id.as_str());
            seat_deadlines.push(hold.expires_at);
            map.seat(event_id, seat_id, SeatStatus::Held, Some(hold.expires_at));
        }
    }
    if !seat_ids.is_empty() {
        sqlx::query(
            "UPDATE seat s SET status = 'HELD', hold_id = u.hold_id, hold_expires_at = u.expires_at,
                               order_id = NULL, version = s.version + 1
               FROM UNNEST($2::text[], $3::text[], $4::timestamptz[]) AS u(seat_id, hold_id, expires_at)
              WHERE s.event_id = $1 AND s.seat_id = u.seat_id",
        )
        .bind(event_id)
        .bind(&seat_ids)
        .bind(&seat_holds)
        .bind(&seat_deadlines)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
    }
    let hold_ids: Vec<&str> = winners.iter().map(|(_, h)| h.hold_id.as_str()).collect();
    let accounts: Vec<&str> = winners.iter().map(|(_, h)| h.account_id.as_str()).collect();
    let tiers: Vec<Option<&str>> = winners.iter().map(|(_, h)| h.tier_id.as_deref()).collect();
    let quantities: Vec<i32> = winners.iter().map(|(_, h)| h.quantity as i32).collect();
    let seats_json: Vec<String> = winners
        .iter()
        .map(|(_, h)| held_seats_json(&h.seats))
        .collect();
    let totals: Vec<i64> = winners.iter().map(|(_, h)| h.total_minor).collect();
    let keys: Vec<&str> = winners
        .iter()
        .map(|(r, _)| r.idempotency_key.as_str())
        .collect();
    let deadlines: Vec<OffsetDateTime> = winners.iter().map(|(_, h)| h.expires_at).collect();
    let payloads: Vec<String> = winners
        .iter()
        .map(|(_, h)| hold_created_payload(event_id, h))
        .collect();
    sqlx::query(
        "WITH new_hold AS (
            INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor,
                              currency, idempotency_key, created_at, expires_at, updated_at)
            SELECT $1, u.hold_id, u.account_id, 'HELD', u.tier_id, u.quantity, u.seats::jsonb, u.total,
                   $10, u.idem_key, $11, u.expires_at, $11
              FROM UNNEST($2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::text[],
                          $9::timestamptz[])
                   AS u(hold_id, account_id, tier_id, quantity, seats, total, idem_key, expires_at)
         )
         INSERT INTO outbox (event_id, topic, payload, created_at)
         SELECT $1, 'hold.created', p::jsonb, $11 FROM UNNEST($12::text[]) AS p",
    )
    .bind(event_id)
    .bind(&hold_ids)
    .bind(&accounts)
    .bind(&tiers)
    .bind(&quantities)
    .bind(&seats_json)
    .bind(&totals)
    .bind(&keys)
    .bind(&deadlines)
    .bind(&event.currency)
    .bind(now)
    .bind(&payloads)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    let touched_tiers: BTreeSet<&str> = winners
        .iter()
        .filter_map(|(_, h)| h.tier_id.as_deref())
        .collect();
    for tier_id in touched_tiers {
        let tier = &state.tiers[tier_id];
        sqlx::query(
            "UPDATE tier SET available = $3, held = $4 WHERE event_id = $1 AND tier_id = $2",
        )
        .bind(event_id)
        .bind(tier_id)
        .bind(tier.available)
        .bind(tier.held)
        .execute(&mut **tx)
        .await
        .map_err(classify)?;
        map.tier(event_id, tier_id, tier.available);
    }
    Ok(())
}

/// Locks the seats (in seat order) and the tier of a hold, before its status changes.
pub(crate) async fn lock_hold_resources(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
) -> StoreResult<()> {
    sqlx::query(
        "SELECT 1 FROM seat WHERE event_id = $1 AND hold_id = $2 ORDER BY seat_id FOR UPDATE",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    if let Some(tier_id) = &hold.tier_id {
        sqlx::query("SELECT 1 FROM tier WHERE event_id = $1 AND tier_id = $2 FOR UPDATE")
            .bind(&hold.event_id)
            .bind(tier_id)
            .execute(&mut **tx)
            .await
            .map_err(classify)?;
    }
    Ok(())
}

/// After a hold left `HELD` (in this transaction): frees the seats that still point to it and
/// returns its tier units, exactly once because the status change was conditional.
pub(crate) async fn free_hold_resources(
    tx: &mut Transaction<'_, Postgres>,
    hold: &HoldView,
    now: OffsetDateTime,
    ended_as: HoldStatus,
    map: &mut MapChanges,
) -> StoreResult<u64> {
    let freed = sqlx::query_scalar::<_, String>(
        "UPDATE seat SET status = 'AVAILABLE', hold_id = NULL, hold_expires_at = NULL, version = version + 1
          WHERE event_id = $1 AND hold_id = $2 AND status = 'HELD' RETURNING seat_id",
    )
    .bind(&hold.event_id)
    .bind(&hold.hold_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(classify)?;
    for seat_id in &freed {
        map.seat(&hold.event_id, seat_id, SeatStatus::Available, None);
    }
    let freed = freed.len() as u64;
    if let Some(tier_id) = &hold.tier_id {
        let available = sqlx::query_scalar::<_, i64>(
            "UPDATE tier SET held = held - $3, available = available + $3 WHERE event_id = $1 AND tier_id = $2
             RETURNING available",
        )
        .bind(&hold.event_id)
        .bind(tier_id)
        .bind(i64::from(hold.quantity))
        .fetch_one(&mut **tx)
        .await
        .map_err(classify)?;
        map.tier(&hold.event_id, tier_id, available);
    }
    let topic = if ended_as == HoldStatus::Released {
        "hold.released"
    } else {
        "hold.expired"
    };
    let exchange_ends_as = if ended_as == HoldStatus::Released {
        ExchangeStatus::Failed
    } else {
        ExchangeStatus::Expired
    };
    exchange::end_exchanges_of(tx, &[hold.hold_id.as_str()], exchange_ends_as, now).await?;
    sqlx::query(
        "INSERT INTO outbox (event_id, topic, payload, created_at) VALUES ($1, $2, $3::jsonb, $4)",
    )
    .bind(&hold.event_id)
    .bind(topic)
    .bind(hold_ended_payload(&hold.event_id, &hold.hold_id, ended_as))
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(classify)?;
    Ok(freed)
}

pub(crate) const HOLD_COLUMNS: &str =
    "hold_id, event_id, account_id, status, expires_at, seats::text AS seats, tier_id, quantity,
                            total_minor, currency, created_at, updated_at";

pub(crate) fn hold_from_row(row: &sqlx::postgres::PgRow) -> StoreResult<HoldView> {
    let status: String = row.get("status");
    let seats: String = row.get("seats");
    Ok(HoldView {
        hold_id: row.get("hold_id"),
        event_id: row.get("event_id"),
        account_id: row.get("account_id"),
        status: parse_hold_status(&status)?,
        expires_at: row.get("expires_at"),
        seats: parse_held_seats(&seats)?,
        tier_id: row.get("tier_id"),
        quantity: to_u32(row.get("quantity")),
        total_minor: row.get("total_minor"),
        currency: row.get("currency"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    })
}

pub(crate) async fn fetch_holds(pool: &PgPool, hold_ids: &[String]) -> StoreResult<Vec<HoldView>> {
    let sql = format!(
        "SELECT {HOLD_COLUMNS} FROM hold WHERE hold_id = ANY($1) ORDER BY event_id, hold_id"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(hold_ids)
        .fetch_all(pool)
        .await
        .map_err(classify)?
        .iter()
        .map(hold_from_row)
        .collect()
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Internal(format!("migration failed: {e}")))
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<OffsetDateTime> {
        sqlx::query_scalar::<_, OffsetDateTime>(NOW_SQL)
            .fetch_one(&self.pool)
            .await
            .map_err(classify)
    }

    async fn create_event(
        &self,
        scope: &IdempotencyScope,
        request_digest: &str,
        event_id: &str,
        spec: &EventSpec,
        render: &RenderEvent,
    ) -> StoreResult<Idempotent> {
        let created =
            retrying(|| self.create_event_once(scope, request_digest, event_id, spec, render))
                .await?;
        if matches!(created, Idempotent::Fresh(_)) && spec.seats().count() >= ANALYZE_SEATS_MIN {
            // A large event changes the seat table's statistics at once: without a fresh
            // ANALYZE the planner took the new event for a few hundred rows and scanned all
            // of its seats for every group's seat lock (~50 ms instead of ~1 ms).
            if let Err(error) = sqlx::query("ANALYZE seat").execute(&self.pool).await {
                tracing::warn!(%error, "ANALYZE seat after a large event failed");
            }
        }
        Ok(created)
    }

    async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
        self.load_event(event_id).await
    }

    async fn list_events(
        &self,
        after_event_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<EventRecord>> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT event_id FROM event WHERE ($1::text IS NULL OR event_id > $1) ORDER BY event_id LIMIT $2",
        )
        .bind(after_event_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let mut events = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(event) = self.load_event(&id).await? {
                events.push(event);
            }
        }
        Ok(events)
    }

    async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
        let now = self.now().await?;
        let section_rows = sqlx::query_as::<_, (String, i64, i64, i64)>(
            "SELECT section,
                    count(*) FILTER (WHERE status = 'AVAILABLE' OR (status = 'HELD' AND hold_expires_at <= $2)),
                    count(*) FILTER (WHERE status = 'HELD' AND hold_expires_at > $2),
                    count(*) FILTER (WHERE status = 'SOLD')
               FROM seat WHERE event_id = $1 GROUP BY section",
        )
        .bind(&event.event_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let tier_rows = sqlx::query_as::<_, (String, i64, i64, i64)>(
            "SELECT t.tier_id, t.capacity, t.sold,
                    coalesce((SELECT sum(h.quantity) FROM hold h
                               WHERE h.event_id = t.event_id AND h.tier_id = t.tier_id
                                 AND h.status IN ('HELD', 'PAYMENT_PENDING') AND h.expires_at > $2), 0)::bigint
               FROM tier t WHERE t.event_id = $1",
        )
        .bind(&event.event_id)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        Ok(EventCounts::assemble(event, section_rows, tier_rows))
    }

    async fn hold_batch(
        &self,
        event: &EventRecord,
        endpoint: &str,
        requests: &[HoldRequest],
        render: &RenderHold,
    ) -> StoreResult<Vec<Idempotent>> {
        retrying(|| self.hold_batch_once(event, endpoint, requests, render)).await
    }

    async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
        Ok(fetch_holds(&self.pool, &[hold_id.to_owned()]).await?.pop())
    }

    async fn stored_answers(
        &self,
        asked: &[(IdempotencyScope, String)],
    ) -> StoreResult<Vec<Option<Idempotent>>> {
        let accounts: Vec<&str> = asked.iter().map(|(s, _)| s.account_id.as_str()).collect();
        let endpoints: Vec<&str> = asked.iter().map(|(s, _)| s.endpoint.as_str()).collect();
        let keys: Vec<&str> = asked.iter().map(|(s, _)| s.key.as_str()).collect();
        let rows = sqlx::query_as::<_, (i64, String, i32, Vec<u8>)>(
            "SELECT k.n, i.request_digest, i.status_code, i.response_body
               FROM UNNEST($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
                    AS k(account_id, endpoint, idem_key, n)
               JOIN idempotency i ON i.account_id = k.account_id AND i.endpoint = k.endpoint
                                 AND i.idem_key = k.idem_key",
        )
        .bind(&accounts)
        .bind(&endpoints)
        .bind(&keys)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let mut answers: Vec<Option<Idempotent>> = vec![None; asked.len()];
        for (n, digest, status, body) in rows {
            let Some(i) = usize::try_from(n).ok().and_then(|n| n.checked_sub(1)) else {
                continue;
            };
            let Some((_, asked_digest)) = asked.get(i) else {
                continue;
            };
            answers[i] = Some(boxoffice_store::stored_answer_of(
                &digest,
                asked_digest,
                i64::from(status),
                body,
            ));
        }
        Ok(answers)
    }

    async fn release_hold(&self, account_id: &str, hold_id: &str) -> StoreResult<ReleaseOutcome> {
        retrying(|| self.release_once(account_id, hold_id)).await
    }

    async fn expire_due_holds(&self, limit: u32, held_grace_ms: u32) -> StoreResult<SweepReport> {
        let due: Vec<String> = sqlx::query_scalar(
            "SELECT hold_id FROM hold
              WHERE (status = 'HELD' AND expires_at <= clock_timestamp() - make_interval(secs => $2 / 1000.0))
                 OR (status = 'PAYMENT_PENDING' AND expires_at <= clock_timestamp())
              ORDER BY expires_at LIMIT $1",
        )
        .bind(i64::from(limit))
        .bind(f64::from(held_grace_ms))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        self.expire_holds(&due).await
    }

    async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
        retrying(|| self.expire_once(hold_ids)).await
    }

    async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
        let deleted = sqlx::query(
            "DELETE FROM idempotency WHERE created_at < clock_timestamp() - make_interval(secs => $1)",
        )
        .bind(f64::from(older_than_s))
        .execute(&self.pool)
        .await
        .map_err(classify)?
        .rows_affected();
        Ok(deleted)
    }

    async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
        sqlx::query_scalar("SELECT event_id FROM event ORDER BY event_id")
            .fetch_all(&self.pool)
            .await
            .map_err(classify)
    }

    async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
        let Some(event) = self.load_event(event_id).await? else {
            return Ok(None);
        };
        // One REPEATABLE READ transaction: every table read at the same instant.
        let mut tx = self.pool.begin().await.map_err(classify)?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        let now = store_now(&mut tx).await?;
        let seats = sqlx::query_as::<_, (String, String, Option<String>, Option<OffsetDateTime>, Option<String>)>(
            "SELECT seat_id, status, hold_id, hold_expires_at, order_id FROM seat WHERE event_id = $1 ORDER BY seat_id",
        )
        .bind(event_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .into_iter()
        .map(|(seat_id, status, hold_id, hold_expires_at, order_id)| {
            let status = SeatStatus::parse(&status)
                .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {status:?}")))?;
            Ok(SeatRecord {
                seat_id,
                status,
                hold_id,
                hold_expires_at,
                order_id,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
        let tiers = sqlx::query_as::<_, (String, i64, i64, i64, i64, i64)>(
            "SELECT tier_id, capacity, available, held, sold, price_minor FROM tier WHERE event_id = $1 ORDER BY position",
        )
        .bind(event_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .into_iter()
        .map(|(tier_id, capacity, available, held, sold, price_minor)| TierRow {
            tier_id,
            capacity,
            available,
            held,
            sold,
            price_minor,
        })
        .collect();
        let sql = format!(
            "SELECT {HOLD_COLUMNS}, idempotency_key, exchanged_out FROM hold WHERE event_id = $1 ORDER BY hold_id"
        );
        let holds = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(event_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .iter()
            .map(|row| {
                let view = hold_from_row(row)?;
                Ok(HoldRecord {
                    hold_id: view.hold_id,
                    event_id: view.event_id,
                    account_id: view.account_id,
                    status: view.status,
                    expires_at: view.expires_at,
                    seat_ids: view.seats.into_iter().map(|s| s.seat_id).collect(),
                    tier_id: view.tier_id,
                    quantity: view.quantity,
                    idempotency_key: row.get("idempotency_key"),
                    exchanged_out: u32::try_from(row.get::<i32, _>("exchanged_out")).unwrap_or(0),
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let sql = boxoffice_store::ORDER_RECORDS_SQL
            .replace("{p}", "$1")
            .replace("o.seats,", "o.seats::text,");
        let orders = sqlx::query_as::<_, boxoffice_store::OrderColumns>(sqlx::AssertSqlSafe(sql))
            .bind(event_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(boxoffice_store::order_record)
            .collect::<StoreResult<Vec<_>>>()?;
        let sql = boxoffice_store::TICKET_RECORDS_SQL.replace("{p}", "$1");
        let tickets = sqlx::query_as::<_, boxoffice_store::TicketColumns>(sqlx::AssertSqlSafe(sql))
            .bind(event_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
            .into_iter()
            .map(boxoffice_store::ticket_record)
            .collect();
        let sql = boxoffice_store::EXCHANGE_RECORDS_SQL
            .replace("{p}", "$1")
            .replace("x.ticket_ids,", "x.ticket_ids::text,");
        let exchanges =
            sqlx::query_as::<_, boxoffice_store::ExchangeColumns>(sqlx::AssertSqlSafe(sql))
                .bind(event_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(classify)?
                .into_iter()
                .map(boxoffice_store::exchange_record)
                .collect::<StoreResult<Vec<_>>>()?;
        tx.commit().await.map_err(classify)?;
        Ok(Some(Inventory {
            event_id: event_id.to_owned(),
            now,
            max_tickets_per_account: event.max_tickets_per_account,
            seats,
            tiers,
            holds,
            orders,
            tickets,
            exchanges,
        }))
    }

    async fn begin_checkout(
        &self,
        start: &boxoffice_store::checkout::CheckoutStart,
        render: &boxoffice_store::checkout::RenderOrder,
    ) -> StoreResult<boxoffice_store::checkout::CheckoutBegun> {
        retrying(|| self.begin_checkout_once(start, render)).await
    }

    async fn settle_payment(
        &self,
        operation_id: &str,
        verdict: &boxoffice_store::checkout::ProviderVerdict,
        webhook: Option<(&str, &str)>,
        answer: Option<(&IdempotencyScope, &boxoffice_store::checkout::RenderOrder)>,
    ) -> StoreResult<Option<boxoffice_store::checkout::Settled>> {
        retrying(|| self.settle_once(operation_id, verdict, webhook, answer)).await
    }

    async fn payment_operation(
        &self,
        operation_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::PaymentOperation>> {
        self.payment_operation_by_id(operation_id).await
    }

    async fn payment_operation_by_ref(
        &self,
        provider: &str,
        provider_ref: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::PaymentOperation>> {
        PgStore::payment_operation_by_ref(self, provider, provider_ref).await
    }

    async fn due_payment_operations(
        &self,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::checkout::PaymentOperation>> {
        self.due_operations(limit).await
    }

    async fn postpone_payment_operation(
        &self,
        operation_id: &str,
        delay_s: f64,
        error: &str,
    ) -> StoreResult<()> {
        self.postpone_operation(operation_id, delay_s, error).await
    }

    async fn get_order(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::OrderView>> {
        self.order_by_id(order_id).await
    }

    async fn list_orders(
        &self,
        account_id: &str,
        before_order_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::checkout::OrderView>> {
        self.orders_of(account_id, before_order_id, limit).await
    }

    async fn issue_tickets(
        &self,
        order_id: &str,
        sign: &boxoffice_store::checkout::SignTicket,
    ) -> StoreResult<u32> {
        retrying(|| self.issue_tickets_once(order_id, sign)).await
    }

    async fn get_ticket(
        &self,
        ticket_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::TicketView>> {
        self.ticket_by_id(ticket_id).await
    }

    async fn order_head(
        &self,
        order_id: &str,
    ) -> StoreResult<Option<boxoffice_store::checkout::OrderView>> {
        let mut conn = self.pool.acquire().await.map_err(classify)?;
        checkout::load_order_head(&mut conn, order_id).await
    }

    async fn begin_exchange(
        &self,
        start: &boxoffice_store::exchange::ExchangeStart,
        render: &boxoffice_store::exchange::RenderExchange,
    ) -> StoreResult<boxoffice_store::exchange::ExchangeBegun> {
        let mut answers = self
            .exchange_batch(std::slice::from_ref(start), render)
            .await?;
        answers
            .pop()
            .ok_or_else(|| StoreError::Internal("an exchange batch of one answered nothing".into()))
    }

    async fn exchange_batch(
        &self,
        starts: &[boxoffice_store::exchange::ExchangeStart],
        render: &boxoffice_store::exchange::RenderExchange,
    ) -> StoreResult<Vec<boxoffice_store::exchange::ExchangeBegun>> {
        retrying(|| self.exchange_batch_once(starts, render)).await
    }

    async fn get_exchange(
        &self,
        exchange_id: &str,
    ) -> StoreResult<Option<boxoffice_store::exchange::ExchangeView>> {
        self.exchange_by_id(exchange_id).await
    }

    async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
        self.check_in_ticket(ticket_id).await
    }

    async fn compensate_failed_capture(
        &self,
        operation_id: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        retrying(|| self.compensate_once(operation_id, reason)).await
    }

    async fn claim_outbox(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<boxoffice_store::checkout::OutboxMessage>> {
        self.claim_outbox_rows(limit, lease_s).await
    }

    async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
        self.finish_outbox_rows(ids).await
    }

    async fn retry_outbox(&self, id: i64, delay_s: f64, error: &str) -> StoreResult<()> {
        self.retry_outbox_row(id, delay_s, error).await
    }

    async fn outbox_lag_s(&self) -> StoreResult<f64> {
        self.outbox_lag().await
    }
    async fn seat_map(
        &self,
        event_id: &str,
    ) -> StoreResult<Option<boxoffice_store::seatmap::MapSnapshot>> {
        seatmap::snapshot(&self.pool, event_id).await
    }

    async fn seat_map_changes(
        &self,
        event_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<boxoffice_store::seatmap::StoredBatch>> {
        seatmap::changes_after(&self.pool, event_id, after, limit).await
    }

    async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
        seatmap::prune(&self.pool, keep).await
    }
}
