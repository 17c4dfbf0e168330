//! Checkouts on one event, open loop: the scenario holds one seat for each of N accounts
//! (setup, not timed), then checks the holds out with `pm_card_visa` at a fixed offered rate.
//! A checkout's answer comes after its start (hold to `PAYMENT_PENDING`, order, payment
//! operation) and, with the payment simulator at zero latency, after its settlement
//! (`CONFIRMED`): the latency is that of the whole `POST /v1/holds/{id}/checkout`.
//!
//! Each hold is checked out once, in order, so `rate × duration` holds are made first. Only
//! `201` with `orderStatus` `CONFIRMED` is timed and counted as done; a 429 (the event's
//! writer is full) is counted apart; everything else is an error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;

use crate::micro::{
    ERROR_BODIES_KEPT, ERROR_BODY_CHARS_MAX, SETUP_CONCURRENCY, call_json, check_open_loop,
    http_client, key, max_ms, open_loop, quantile_ms, run_concurrently, run_tag, seconds_or, token,
};
use crate::{ROWS, SEATS_PER_ROW, section_name};

/// Sections of the checkout venue (each `ROWS × SEATS_PER_ROW` seats).
const SECTIONS: u32 = 10;
/// Most holds a run makes: one per seat.
pub const HOLDS_MAX: u64 = (SECTIONS * ROWS * SEATS_PER_ROW) as u64;
/// The holds' TTL: they must outlive the setup and the run.
const HOLD_TTL_S: u32 = 900;

/// Settings of the checkouts scenario.
#[derive(Debug, Clone)]
pub struct CheckoutsScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Checkouts offered per second.
    pub rate: f64,
    pub duration_s: u64,
    pub max_in_flight: usize,
}

impl CheckoutsScenario {
    /// The defaults: 1,000 checkouts/s for 10 s, 4,096 in flight.
    pub fn new(base_url: &str, jwt_secret: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            jwt_secret: jwt_secret.to_owned(),
            rate: 1000.0,
            duration_s: 10,
            max_in_flight: 4096,
        }
    }
}

/// What a checkouts run measured.
#[derive(Debug, Clone)]
pub struct CheckoutsReport {
    pub event_id: String,
    /// Holds made before timing started.
    pub holds: usize,
    pub setup_s: f64,
    pub rate: f64,
    pub sent: u64,
    /// Answered 201 with the order `CONFIRMED`.
    pub confirmed: u64,
    /// Answered 429: refused at once, the event's writer had too much queued.
    pub shed: u64,
    /// Every other answer, transport failures included.
    pub errors: u64,
    pub first_errors: Vec<String>,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub delayed: u64,
    pub elapsed_s: f64,
}

impl CheckoutsReport {
    /// Checkouts confirmed per second.
    pub fn achieved_per_s(&self) -> f64 {
        self.confirmed as f64 / seconds_or(self.elapsed_s)
    }
}

impl std::fmt::Display for CheckoutsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offered/s={:.0} achieved/s={:.0} sent={} confirmed={} shed_429={} errors={} p50_ms={:.1} p90_ms={:.1} p99_ms={:.1} max_ms={:.1} delayed={} elapsed_s={:.1} holds={} setup_s={:.1}",
            self.rate,
            self.achieved_per_s(),
            self.sent,
            self.confirmed,
            self.shed,
            self.errors,
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms,
            self.delayed,
            self.elapsed_s,
            self.holds,
            self.setup_s
        )
    }
}

/// The seat of hold `i`: seat by seat, row by row, section by section.
fn hold_seat(i: u64) -> String {
    let per_section = u64::from(ROWS * SEATS_PER_ROW);
    let section = (i / per_section) as u32;
    let within = i % per_section;
    let row = (within / u64::from(SEATS_PER_ROW)) as u32 + 1;
    let number = (within % u64::from(SEATS_PER_ROW)) as u32 + 1;
    format!("{}-{row}-{number}", section_name(section))
}

/// Runs the checkouts scenario to completion.
pub async fn run_checkouts(scenario: &CheckoutsScenario) -> anyhow::Result<CheckoutsReport> {
    check_open_loop(scenario.rate, scenario.duration_s, scenario.max_in_flight)?;
    let needed = (scenario.rate * scenario.duration_s as f64).ceil() as u64;
    if needed > HOLDS_MAX {
        bail!(
            "rate × duration is {needed} checkouts; one event holds at most {HOLDS_MAX} (lower the rate or the duration)"
        );
    }
    let http = http_client(scenario.max_in_flight.min(4096))?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let admin = token(&scenario.jwt_secret, "load-admin", true)?;
    let sections: Vec<_> = (0..SECTIONS)
        .map(|i| json!({"name": section_name(i), "rows": ROWS, "seatsPerRow": SEATS_PER_ROW, "priceMinor": 5_000}))
        .collect();
    let (status, body) = call_json(
        http.post(format!("{base}/v1/admin/events"))
            .bearer_auth(&admin)
            .header("idempotency-key", key())
            .json(&json!({
                "name": "Checkout venue",
                "startsAt": "2030-01-01T20:00:00Z",
                "currency": "EUR",
                "holdTtlSeconds": HOLD_TTL_S,
                "maxTicketsPerAccount": 1,
                "sections": sections,
            })),
    )
    .await;
    if status != 201 {
        bail!("creating the event answered {status}: {body}");
    }
    let event_id = body["eventId"].as_str().context("eventId")?.to_owned();

    let tag = run_tag();
    let setup_started = Instant::now();
    let made = Arc::new(AtomicU64::new(0));
    let progress = {
        let made = made.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                eprintln!("setup: {}/{needed} holds", made.load(Ordering::Relaxed));
            }
        })
    };
    let fans: Vec<(u64, String)> = (0..needed)
        .map(|i| {
            Ok((
                i,
                token(&scenario.jwt_secret, &format!("co-{tag}-{i}"), false)?,
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    let holds_url = format!("{base}/v1/events/{event_id}/holds");
    let held = run_concurrently(fans, SETUP_CONCURRENCY * 4, |(i, fan)| {
        let request = http
            .post(holds_url.as_str())
            .bearer_auth(&fan)
            .header("idempotency-key", key())
            .json(&json!({"seatIds": [hold_seat(i)]}));
        let made = made.clone();
        async move {
            // A full writer queue answers 429: ask again.
            for _ in 0..100 {
                let (status, hold) = call_json(request.try_clone().context("request")?).await;
                match status {
                    201 => {
                        made.fetch_add(1, Ordering::Relaxed);
                        let hold_id = hold["holdId"].as_str().context("holdId")?.to_owned();
                        return Ok((i, hold_id, fan));
                    }
                    0 | 429 | 503 => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    _ => bail!("hold {i} answered {status}: {hold}"),
                }
            }
            bail!("hold {i} was refused 100 times")
        }
    })
    .await;
    progress.abort();
    let mut held = held.context("making the holds")?;
    held.sort_by_key(|(i, _, _)| *i);
    let setup_s = setup_started.elapsed().as_secs_f64();
    let holds: Arc<Vec<(String, String)>> = Arc::new(
        held.into_iter()
            .map(|(_, hold_id, fan)| (format!("{base}/v1/holds/{hold_id}/checkout"), fan))
            .collect(),
    );

    let confirmed = Arc::new(AtomicU64::new(0));
    let shed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let prepare = |i: u64| i as usize;
    let send = {
        let (confirmed, shed, errors, first_errors) = (
            confirmed.clone(),
            shed.clone(),
            errors.clone(),
            first_errors.clone(),
        );
        let holds = holds.clone();
        move |i: usize| {
            let (url, fan) = &holds[i];
            let request = http
                .post(url.as_str())
                .bearer_auth(fan)
                .header("idempotency-key", key())
                .json(&json!({"paymentMethodToken": "pm_card_visa"}));
            let (confirmed, shed, errors, first_errors) = (
                confirmed.clone(),
                shed.clone(),
                errors.clone(),
                first_errors.clone(),
            );
            async move {
                let (status, body) = call_json(request).await;
                if status == 201 && body["orderStatus"] == "CONFIRMED" {
                    confirmed.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                if status == 429 {
                    shed.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                errors.fetch_add(1, Ordering::Relaxed);
                let mut kept = first_errors.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() < ERROR_BODIES_KEPT {
                    let mut text = format!("{status} {body}");
                    text.truncate(ERROR_BODY_CHARS_MAX);
                    kept.push(text);
                }
                false
            }
        }
    };
    let run = open_loop(
        scenario.rate,
        scenario.duration_s,
        scenario.max_in_flight,
        prepare,
        send,
    )
    .await;
    let first_errors = first_errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(CheckoutsReport {
        event_id,
        holds: holds.len(),
        setup_s,
        rate: scenario.rate,
        sent: run.sent,
        confirmed: confirmed.load(Ordering::Relaxed),
        shed: shed.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        first_errors,
        p50_ms: quantile_ms(&run.latencies, 0.50),
        p90_ms: quantile_ms(&run.latencies, 0.90),
        p99_ms: quantile_ms(&run.latencies, 0.99),
        max_ms: max_ms(&run.latencies),
        delayed: run.delayed,
        elapsed_s: run.elapsed_s,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_hold_has_its_own_seat() {
        let seats: HashSet<String> = (0..HOLDS_MAX).map(hold_seat).collect();
        assert_eq!(seats.len() as u64, HOLDS_MAX);
        assert_eq!(hold_seat(0), "S0-1-1");
        assert_eq!(hold_seat(100), "S0-2-1");
        assert_eq!(hold_seat(5_000), "S1-1-1");
        assert_eq!(hold_seat(HOLDS_MAX - 1), "S9-50-100");
    }
}
