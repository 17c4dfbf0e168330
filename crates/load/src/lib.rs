//! `boxoffice load`: drives a running server over HTTP and reports what it measured.
//!
//! The first scenario is `holds`: closed-loop clients send hold requests for 1-6 adjacent
//! seats of one row, skewed towards the best sections as fans are, each client cycling over
//! [`ACCOUNTS_PER_CLIENT`] accounts of its own, each request with its own idempotency key: at
//! the rates one machine serves, an account asks about once in a 20 s run, as a fan does, so
//! neither the purchase limit nor the abuse limits on live and lapsed holds interfere (the
//! holds all lapse: that is how the seats recycle). The event is
//! created with a short hold TTL so seats recycle and the venue never sells out. Every
//! answer must be 201 or 409; anything else is counted as an error and reported.
//!
//! Closed loop means a slow server slows the offered load; [`onsale`] is the open-loop
//! on-sale simulator (arrivals on a schedule, latency from the scheduled time).
//!
//! The `queue` scenario ([`queue`]) fills an event's waiting room for the status-poll
//! benchmark, and [`hello`] is the plain axum hello-world that benchmark compares against.
//!
//! The [`seatmap`] scenarios measure the seat map: snapshot requests per second, and how long
//! a hold takes to reach every open Server-Sent-Events stream; with a bare mirror as baseline.

/// Accounts each client of the `holds` scenario cycles over (fewer when there are more than
/// 256 clients: at most [`ACCOUNTS_MAX`] tokens are minted).
pub const ACCOUNTS_PER_CLIENT: usize = 1_024;
/// Most accounts the `holds` scenario mints tokens for.
pub const ACCOUNTS_MAX: usize = 262_144;

pub mod checkouts;
pub mod exchanges;
pub mod fairness;
pub mod hello;
pub mod micro;
pub mod onsale;
pub mod queue;
pub mod report;
pub mod seatmap;

pub use checkouts::{CheckoutsReport, CheckoutsScenario, run_checkouts};
pub use exchanges::{ExchangesReport, ExchangesScenario, run_exchanges};
pub use micro::{
    HoldsOpenReport, HoldsOpenScenario, OrderStatusReport, OrderStatusScenario, SelloutReport,
    SelloutScenario, run_holds_open, run_order_status, run_sellout,
};
pub use onsale::{CardMix, DoorSettings, OnsaleReport, OnsaleScenario, run_onsale};
pub use queue::{QueueReport, QueueScenario, run_queue};
pub use seatmap::{
    MirrorSource, SnapshotReport, SnapshotScenario, SseReport, SseScenario, run_snapshot, run_sse,
    serve_mirror,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_token::mint_token;
use hdrhistogram::Histogram;
use rand::Rng;
use serde_json::json;

/// Settings of the `holds` scenario.
#[derive(Debug, Clone)]
pub struct HoldsScenario {
    pub base_url: String,
    pub jwt_secret: String,
    pub clients: usize,
    pub duration_s: u64,
    /// Sections of 50 rows x 100 seats in the generated venue.
    pub sections: u32,
    /// Share of requests aimed at the two best sections.
    pub hot_share: f64,
    pub hold_ttl_s: u32,
    /// Send the holds to this node instead (a node of the same store that does not own the
    /// event: it forwards them to the owner). The event is created, and its first hold
    /// taken, through `base_url`, so that node owns it.
    pub holds_via: Option<String>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct HoldsReport {
    pub elapsed_s: f64,
    pub granted: u64,
    pub refused: u64,
    pub errors: u64,
    /// The errors by status (0: no answer), e.g. `429:12,503:3`.
    pub error_statuses: String,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl HoldsReport {
    /// Requests answered 201 or 409 per second: hold decisions.
    pub fn decided_per_s(&self) -> f64 {
        (self.granted + self.refused) as f64 / self.elapsed_s
    }

    pub fn granted_per_s(&self) -> f64 {
        self.granted as f64 / self.elapsed_s
    }
}

impl std::fmt::Display for HoldsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "decided/s={:.0} granted/s={:.0} granted={} refused={} errors={}{} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} elapsed_s={:.1}",
            self.decided_per_s(),
            self.granted_per_s(),
            self.granted,
            self.refused,
            self.errors,
            if self.error_statuses.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.error_statuses)
            },
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.elapsed_s
        )
    }
}

/// Where a run sends its holds for the event at `holds_url` (on its `base_url` node): there,
/// or through `via` (another node of the store, which forwards them to the owner), after one
/// hold of `seat_id` through `holds_url` so that the base node takes the event's lease.
pub(crate) async fn holds_url_via(
    http: &reqwest::Client,
    jwt_secret: &str,
    holds_url: &str,
    via: Option<&str>,
    seat_id: &str,
) -> anyhow::Result<String> {
    let Some(via) = via else {
        return Ok(holds_url.to_owned());
    };
    let owner = mint_token(jwt_secret, &AccountId::parse("load-owner")?, false, 3600)
        .map_err(anyhow::Error::msg)?;
    let answer = http
        .post(holds_url)
        .bearer_auth(&owner)
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({ "seatIds": [seat_id] }))
        .send()
        .await
        .context("the owner's first hold")?;
    if answer.status().as_u16() != 201 {
        bail!("the owner's first hold answered {}", answer.status());
    }
    let path = holds_url
        .find("/v1/")
        .map_or(holds_url, |at| &holds_url[at..]);
    Ok(format!("{}{path}", via.trim_end_matches('/')))
}

const ROWS: u32 = 50;
const SEATS_PER_ROW: u32 = 100;

fn section_name(i: u32) -> String {
    format!("S{i}")
}

/// Runs the scenario to completion.
pub async fn run_holds(scenario: &HoldsScenario) -> anyhow::Result<HoldsReport> {
    if scenario.clients == 0 || scenario.clients > 4096 {
        bail!("clients must be between 1 and 4096");
    }
    if scenario.sections == 0 || scenario.sections > 40 {
        bail!("sections must be between 1 and 40");
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(scenario.clients)
        .timeout(Duration::from_secs(30))
        .build()?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let admin = mint_token(
        &scenario.jwt_secret,
        &AccountId::parse("load-admin")?,
        true,
        3600,
    )
    .map_err(anyhow::Error::msg)?;
    let sections: Vec<_> = (0..scenario.sections)
        .map(|i| json!({"name": section_name(i), "rows": ROWS, "seatsPerRow": SEATS_PER_ROW, "priceMinor": 10_000 - i64::from(i) * 100}))
        .collect();
    let created = http
        .post(format!("{base}/v1/admin/events"))
        .bearer_auth(&admin)
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({
            "name": "Load test venue",
            "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR",
            "holdTtlSeconds": scenario.hold_ttl_s,
            "sections": sections,
        }))
        .send()
        .await
        .context("creating the load-test event")?;
    let status = created.status();
    let body: serde_json::Value = created.json().await.unwrap_or_default();
    if status.as_u16() != 201 {
        bail!("creating the event answered {status}: {body}");
    }
    let event_id = body["eventId"].as_str().context("eventId")?.to_owned();
    let url = Arc::new(format!("{base}/v1/events/{event_id}/holds"));
    let last_seat = format!(
        "{}-{ROWS}-{SEATS_PER_ROW}",
        section_name(scenario.sections - 1)
    );
    let url = Arc::new(
        holds_url_via(
            &http,
            &scenario.jwt_secret,
            &url,
            scenario.holds_via.as_deref(),
            &last_seat,
        )
        .await?,
    );
    // Tokens are minted up front: signing is not what this measures.
    let per_client = ACCOUNTS_PER_CLIENT.min(ACCOUNTS_MAX / scenario.clients);
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..scenario.clients * per_client)
            .map(|i| {
                mint_token(
                    &scenario.jwt_secret,
                    &AccountId::parse(&format!("fan-{i}")).unwrap(),
                    false,
                    3600,
                )
            })
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?,
    );

    let granted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let error_statuses: Arc<std::sync::Mutex<std::collections::BTreeMap<u16, u64>>> =
        Arc::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(scenario.duration_s);
    let bar = indicatif::ProgressBar::new(scenario.duration_s);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut workers = Vec::new();
    for client in 0..scenario.clients {
        let (http, url, tokens) = (http.clone(), url.clone(), tokens.clone());
        let (granted, refused, errors) = (granted.clone(), refused.clone(), errors.clone());
        let error_statuses = error_statuses.clone();
        let (n_sections, hot_share) = (scenario.sections, scenario.hot_share);
        workers.push(tokio::spawn(async move {
            let mut latencies =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            let mut n = 0usize;
            while Instant::now() < deadline {
                let (section, row, first, quantity) = {
                    let mut rng = rand::rng();
                    let hot = n_sections.min(2);
                    let section = if rng.random_bool(hot_share) {
                        rng.random_range(0..hot)
                    } else {
                        rng.random_range(0..n_sections)
                    };
                    let quantity = rng.random_range(1..=6u32);
                    (
                        section,
                        rng.random_range(1..=ROWS),
                        rng.random_range(1..=SEATS_PER_ROW - quantity + 1),
                        quantity,
                    )
                };
                let seat_ids: Vec<String> = (first..first + quantity)
                    .map(|number| format!("{}-{row}-{number}", section_name(section)))
                    .collect();
                let token = &tokens[(client * per_client + n % per_client) % tokens.len()];
                n += 1;
                let sent = Instant::now();
                let answer = http
                    .post(url.as_str())
                    .bearer_auth(token)
                    .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                    .json(&json!({ "seatIds": seat_ids }))
                    .send()
                    .await;
                let status = match answer {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.bytes().await;
                        status
                    }
                    Err(_) => 0,
                };
                let _ = latencies.record(sent.elapsed().as_micros() as u64);
                match status {
                    201 => granted.fetch_add(1, Ordering::Relaxed),
                    409 => refused.fetch_add(1, Ordering::Relaxed),
                    other => {
                        *error_statuses
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .entry(other)
                            .or_default() += 1;
                        errors.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            latencies
        }));
    }
    let ticker = {
        let (bar, granted, refused, errors) = (
            bar.clone(),
            granted.clone(),
            refused.clone(),
            errors.clone(),
        );
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let elapsed = started.elapsed().as_secs_f64();
                let decided = granted.load(Ordering::Relaxed) + refused.load(Ordering::Relaxed);
                bar.set_position(elapsed as u64);
                bar.set_message(format!(
                    "decided/s {:.0} errors {}",
                    decided as f64 / elapsed,
                    errors.load(Ordering::Relaxed)
                ));
            }
        })
    };
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for worker in workers {
        latencies.add(worker.await?)?;
    }
    ticker.abort();
    bar.finish_and_clear();
    let elapsed_s = started.elapsed().as_secs_f64();
    Ok(HoldsReport {
        elapsed_s,
        granted: granted.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        error_statuses: error_statuses
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|(status, n)| format!("{status}:{n}"))
            .collect::<Vec<_>>()
            .join(","),
        p50_ms: latencies.value_at_quantile(0.50) as f64 / 1000.0,
        p99_ms: latencies.value_at_quantile(0.99) as f64 / 1000.0,
        max_ms: latencies.max() as f64 / 1000.0,
    })
}
