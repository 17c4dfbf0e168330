//! The `queue` scenario: fills one event's waiting room with N accounts, for the status-poll
//! benchmark (`bench/waitroom.sh`).
//!
//! Unless an event id is given, it creates an event with a waiting room (`random` policy, one
//! small section) and pauses its release first, so every account stays `WAITING`: polls of
//! waiting accounts are the hot path the benchmark measures. Then C closed-loop clients join
//! the N accounts (`q-0` … `q-{N-1}`), each with its own bearer token, and it writes a sample
//! of them (`<bearer token> <queueTicket>` per line, spread uniformly over the N) for the
//! load tool that polls. A join answered anything but 201 is retried (joining again returns
//! the same place) and, if it keeps failing, counted as an error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_token::mint_token;
use hdrhistogram::Histogram;
use serde_json::json;

/// Lifetime of the minted account tokens: long enough for a join phase and several poll runs.
const TOKEN_TTL_S: u64 = 24 * 3600;
/// Attempts per join before it counts as an error.
const JOIN_ATTEMPTS: u32 = 5;

/// Settings of the `queue` scenario.
#[derive(Debug, Clone)]
pub struct QueueScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Accounts to join.
    pub accounts: u64,
    /// Concurrent closed-loop clients.
    pub clients: usize,
    /// Accounts written to `sample_out`, spread uniformly over the `accounts`.
    pub sample: u64,
    pub sample_out: std::path::PathBuf,
    /// Join this event's queue instead of creating (and pausing) a new event.
    pub event_id: Option<String>,
}

/// What the join phase measured.
#[derive(Debug, Clone)]
pub struct QueueReport {
    pub event_id: String,
    pub elapsed_s: f64,
    pub joined: u64,
    pub retries: u64,
    pub errors: u64,
    pub sampled: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl QueueReport {
    pub fn joins_per_s(&self) -> f64 {
        self.joined as f64 / self.elapsed_s
    }
}

impl std::fmt::Display for QueueReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "event={} joined={} joins/s={:.0} retries={} errors={} sampled={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} elapsed_s={:.1}",
            self.event_id,
            self.joined,
            self.joins_per_s(),
            self.retries,
            self.errors,
            self.sampled,
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.elapsed_s
        )
    }
}

/// Creates the event with an enabled waiting room and pauses its release; returns its id.
async fn create_paused_event(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
) -> anyhow::Result<String> {
    let created = http
        .post(format!("{base}/v1/admin/events"))
        .bearer_auth(admin)
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({
            "name": "Waiting-room load test",
            "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR",
            "waitingRoom": {"enabled": true, "policy": "random", "maxActiveShoppers": 10000},
            "sections": [{"name": "A", "rows": 10, "seatsPerRow": 20, "priceMinor": 5000}],
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
    let paused = http
        .put(format!("{base}/v1/admin/events/{event_id}/queue"))
        .bearer_auth(admin)
        .json(&json!({"paused": true}))
        .send()
        .await
        .context("pausing the queue")?;
    let status = paused.status();
    let body: serde_json::Value = paused.json().await.unwrap_or_default();
    if status.as_u16() != 200 || body["paused"] != json!(true) {
        bail!("pausing the queue answered {status}: {body}");
    }
    Ok(event_id)
}

/// Joins one account; `Ok(Some(ticket))` on 201, `Ok(None)` on any other answer.
async fn join(http: &reqwest::Client, url: &str, token: &str) -> Option<String> {
    let response = http.post(url).bearer_auth(token).send().await.ok()?;
    if response.status().as_u16() != 201 {
        let _ = response.bytes().await;
        return None;
    }
    let body: serde_json::Value = response.json().await.ok()?;
    body["queueTicket"].as_str().map(str::to_owned)
}

/// Runs the scenario to completion; the sample file is written before it returns.
pub async fn run_queue(scenario: &QueueScenario) -> anyhow::Result<QueueReport> {
    if scenario.clients == 0 || scenario.clients > 4096 {
        bail!("clients must be between 1 and 4096");
    }
    if scenario.accounts == 0 {
        bail!("accounts must be at least 1");
    }
    let sample = scenario.sample.min(scenario.accounts);
    // Every `stride`-th account is sampled, the first `sample` of them.
    let stride = (scenario.accounts / sample.max(1)).max(1);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(scenario.clients)
        .timeout(Duration::from_secs(30))
        .build()?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let event_id = match &scenario.event_id {
        Some(id) => id.clone(),
        None => {
            let admin = mint_token(
                &scenario.jwt_secret,
                &AccountId::parse("load-admin")?,
                true,
                3600,
            )
            .map_err(anyhow::Error::msg)?;
            create_paused_event(&http, &base, &admin).await?
        }
    };
    let url = Arc::new(format!("{base}/v1/events/{event_id}/queue"));
    let secret = Arc::new(scenario.jwt_secret.clone());

    let next = Arc::new(AtomicU64::new(0));
    let joined = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let sampled: Arc<Mutex<Vec<(u64, String, String)>>> = Arc::default();
    let bar = indicatif::ProgressBar::new(scenario.accounts);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} joins {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..scenario.clients {
        let (http, url, secret, next) = (http.clone(), url.clone(), secret.clone(), next.clone());
        let (joined, retries, errors, sampled) = (
            joined.clone(),
            retries.clone(),
            errors.clone(),
            sampled.clone(),
        );
        let accounts = scenario.accounts;
        workers.push(tokio::spawn(async move {
            let mut latencies =
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= accounts {
                    break;
                }
                let account = AccountId::parse(&format!("q-{i}"))?;
                // Signing is not what this measures, but it is cheap next to a request.
                let token = mint_token(&secret, &account, false, TOKEN_TTL_S)
                    .map_err(anyhow::Error::msg)?;
                let mut ticket = None;
                for attempt in 0..JOIN_ATTEMPTS {
                    if attempt > 0 {
                        retries.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                    }
                    let sent = Instant::now();
                    ticket = join(&http, &url, &token).await;
                    let _ = latencies.record(sent.elapsed().as_micros() as u64);
                    if ticket.is_some() {
                        break;
                    }
                }
                match ticket {
                    Some(ticket) => {
                        joined.fetch_add(1, Ordering::Relaxed);
                        if i % stride == 0 && i / stride < sample {
                            sampled
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push((i, token, ticket));
                        }
                    }
                    None => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            anyhow::Ok(latencies)
        }));
    }
    let ticker = {
        let (bar, joined, errors) = (bar.clone(), joined.clone(), errors.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let done = joined.load(Ordering::Relaxed);
                bar.set_position(done + errors.load(Ordering::Relaxed));
                bar.set_message(format!(
                    "joins/s {:.0} errors {}",
                    done as f64 / started.elapsed().as_secs_f64(),
                    errors.load(Ordering::Relaxed)
                ));
            }
        })
    };
    let mut latencies = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for worker in workers {
        latencies.add(worker.await??)?;
    }
    ticker.abort();
    bar.finish_and_clear();
    let elapsed_s = started.elapsed().as_secs_f64();

    let mut sampled = std::mem::take(&mut *sampled.lock().unwrap_or_else(|e| e.into_inner()));
    sampled.sort_unstable_by_key(|(i, _, _)| *i);
    let mut out = String::with_capacity(sampled.len() * 400);
    for (_, token, ticket) in &sampled {
        out.push_str(token);
        out.push(' ');
        out.push_str(ticket);
        out.push('\n');
    }
    std::fs::write(&scenario.sample_out, out)
        .with_context(|| format!("writing {}", scenario.sample_out.display()))?;

    Ok(QueueReport {
        event_id,
        elapsed_s,
        joined: joined.load(Ordering::Relaxed),
        retries: retries.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        sampled: sampled.len() as u64,
        p50_ms: latencies.value_at_quantile(0.50) as f64 / 1000.0,
        p99_ms: latencies.value_at_quantile(0.99) as f64 / 1000.0,
        max_ms: latencies.max() as f64 / 1000.0,
    })
}
