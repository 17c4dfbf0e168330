//! Micro-benchmarks: one endpoint each, against an event the scenario creates itself.
//!
//! - [`run_holds_open`]: holds at a fixed offered rate (open loop), each from a fresh account
//!   with its own idempotency key, 1-6 adjacent seats of one row as in [`crate::run_holds`];
//!   a short hold TTL recycles the seats so the venue never sells out.
//! - [`run_sellout`]: sells a small section out (hold 6 adjacent seats, pay with
//!   `pm_card_visa`, follow the order to `CONFIRMED`), checks that nothing is left, then
//!   measures hold attempts that can only fail: every answer must be 409. The `/metrics`
//!   counters it is told to watch are read before and after the attempts.
//! - [`run_order_status`]: makes confirmed orders, then reads them back
//!   (`GET /v1/orders/{orderId}`) at a fixed rate (open loop).
//!
//! Open loop means request `i` is due at start + i/rate and its latency runs from that due
//! time, so a stalled server shows up as latency rather than as fewer requests (no
//! coordinated omission). When `max_in_flight` requests are out, the next one waits for a
//! slot (counted as `delayed`); none is dropped. Latency is recorded only for the answers the
//! scenario expects; everything else, transport failures included, is counted as an error.
//! Tokens are minted before a request is due: signing is not what these measure.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_token::mint_token;
use hdrhistogram::Histogram;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::{ROWS, SEATS_PER_ROW, section_name};

const TOKEN_TTL_S: u64 = 3 * 3600;
/// Latencies are recorded in microseconds up to ten minutes.
const LATENCY_MAX_US: u64 = 600_000_000;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Setup (selling out, making orders) runs this many hold-and-pay sequences at once.
pub(crate) const SETUP_CONCURRENCY: usize = 16;
const ORDER_WAIT_MAX: Duration = Duration::from_secs(30);
pub(crate) const ORDER_POLL: Duration = Duration::from_millis(50);
/// The seat map is a hint that may trail the store; the sold-out check waits this long.
const SEATMAP_SETTLE_MAX: Duration = Duration::from_secs(5);
pub(crate) const ERROR_BODIES_KEPT: usize = 5;
pub(crate) const ERROR_BODY_CHARS_MAX: usize = 300;
const SEATS_PER_HOLD_MAX: u32 = 6;
/// Seats of one order in the order-status scenario; 25 orders fit in a row of 100.
const ORDER_SEATS_MAX: u32 = 4;
const ORDERS_MAX: usize = (ROWS * (SEATS_PER_ROW / ORDER_SEATS_MAX)) as usize;

// ---------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_US, 3).expect("histogram bounds")
}

pub(crate) fn quantile_ms(latencies: &Histogram<u64>, quantile: f64) -> f64 {
    if latencies.is_empty() {
        return 0.0;
    }
    latencies.value_at_quantile(quantile) as f64 / 1000.0
}

pub(crate) fn max_ms(latencies: &Histogram<u64>) -> f64 {
    latencies.max() as f64 / 1000.0
}

fn record(latencies: &Mutex<Histogram<u64>>, since: Instant) {
    let latency_us = since.elapsed().as_micros() as u64;
    let _ = latencies
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(latency_us.clamp(1, LATENCY_MAX_US));
}

pub(crate) fn http_client(idle_per_host: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(idle_per_host)
        .timeout(REQUEST_TIMEOUT)
        .build()?)
}

pub(crate) fn token(secret: &str, account: &str, admin: bool) -> anyhow::Result<String> {
    mint_token(secret, &AccountId::parse(account)?, admin, TOKEN_TTL_S).map_err(anyhow::Error::msg)
}

/// A tag that keeps this run's account ids apart from every earlier run's.
pub(crate) fn run_tag() -> String {
    format!("{:08x}", rand::rng().random::<u32>())
}

pub(crate) fn key() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// `n` adjacent seats of one row, from seat `first`.
fn row_seats(section: &str, row: u32, first: u32, n: u32) -> Vec<String> {
    (first..first + n)
        .map(|number| format!("{section}-{row}-{number}"))
        .collect()
}

/// An answer read to its end: status (0 on a transport failure) and body.
pub(crate) async fn call(request: reqwest::RequestBuilder) -> (u16, Vec<u8>) {
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(body) => (status, body.to_vec()),
                Err(_) => (0, Vec::new()),
            }
        }
        Err(_) => (0, Vec::new()),
    }
}

pub(crate) async fn call_json(request: reqwest::RequestBuilder) -> (u16, Value) {
    let (status, body) = call(request).await;
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

pub(crate) fn seconds_or(elapsed_s: f64) -> f64 {
    elapsed_s.max(1e-9)
}

async fn create_event(
    http: &reqwest::Client,
    base: &str,
    jwt_secret: &str,
    name: &str,
    hold_ttl_s: u32,
    sections: Vec<Value>,
) -> anyhow::Result<String> {
    let admin = token(jwt_secret, "load-admin", true)?;
    let (status, body) = call_json(
        http.post(format!("{base}/v1/admin/events"))
            .bearer_auth(&admin)
            .header("idempotency-key", key())
            .json(&json!({
                "name": name,
                "startsAt": "2030-01-01T20:00:00Z",
                "currency": "EUR",
                "holdTtlSeconds": hold_ttl_s,
                "sections": sections,
            })),
    )
    .await;
    if status != 201 {
        bail!("creating the event answered {status}: {body}");
    }
    Ok(body["eventId"].as_str().context("eventId")?.to_owned())
}

/// Holds with `hold_body`, checks out with `pm_card_visa` and polls the order until it is
/// `CONFIRMED`; returns the order id.
pub(crate) async fn hold_and_pay(
    http: reqwest::Client,
    base: Arc<String>,
    event_id: Arc<String>,
    fan_token: String,
    hold_body: Value,
) -> anyhow::Result<String> {
    let (status, hold) = call_json(
        http.post(format!("{base}/v1/events/{event_id}/holds"))
            .bearer_auth(&fan_token)
            .header("idempotency-key", key())
            .json(&hold_body),
    )
    .await;
    if status != 201 {
        bail!("hold {hold_body} answered {status}: {hold}");
    }
    let hold_id = hold["holdId"].as_str().context("hold without holdId")?;
    let (status, mut order) = call_json(
        http.post(format!("{base}/v1/holds/{hold_id}/checkout"))
            .bearer_auth(&fan_token)
            .header("idempotency-key", key())
            .json(&json!({"paymentMethodToken": "pm_card_visa"})),
    )
    .await;
    if status != 201 {
        bail!("checkout of hold {hold_id} answered {status}: {order}");
    }
    let order_id = order["orderId"]
        .as_str()
        .context("checkout without orderId")?
        .to_owned();
    let deadline = Instant::now() + ORDER_WAIT_MAX;
    loop {
        match order["orderStatus"].as_str() {
            Some("CONFIRMED") => return Ok(order_id),
            Some("CANCELLED") => bail!("order {order_id} was cancelled: {order}"),
            _ => {}
        }
        if Instant::now() >= deadline {
            bail!(
                "order {order_id} not confirmed after {}s: {order}",
                ORDER_WAIT_MAX.as_secs()
            );
        }
        tokio::time::sleep(ORDER_POLL).await;
        let (status, body) = call_json(
            http.get(format!("{base}/v1/orders/{order_id}"))
                .bearer_auth(&fan_token),
        )
        .await;
        match status {
            200 => order = body,
            // Overload and transport hiccups: poll again.
            0 | 429 | 503 => {}
            _ => bail!("reading order {order_id} answered {status}: {body}"),
        }
    }
}

/// Runs `work` over `items`, at most `limit` at once; the results in completion order.
pub(crate) async fn run_concurrently<T, R, W, F>(
    items: Vec<T>,
    limit: usize,
    work: W,
) -> anyhow::Result<Vec<R>>
where
    W: Fn(T) -> F,
    F: Future<Output = anyhow::Result<R>> + Send + 'static,
    R: Send + 'static,
{
    let mut running = tokio::task::JoinSet::new();
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        if running.len() >= limit
            && let Some(done) = running.join_next().await
        {
            results.push(done??);
        }
        running.spawn(work(item));
    }
    while let Some(done) = running.join_next().await {
        results.push(done??);
    }
    Ok(results)
}

// ---------------------------------------------------------------------------------------
// The open loop
// ---------------------------------------------------------------------------------------

/// When request `i` of an open loop at `rate_per_s` is due, counted from the start.
fn due_offset(i: u64, rate_per_s: f64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate_per_s)
}

/// How many requests an open loop sends: those due before `duration_s` has passed.
fn scheduled_requests(rate_per_s: f64, duration_s: u64) -> u64 {
    (rate_per_s * duration_s as f64).ceil() as u64
}

pub(crate) fn check_open_loop(
    rate_per_s: f64,
    duration_s: u64,
    max_in_flight: usize,
) -> anyhow::Result<()> {
    if !(rate_per_s > 0.0 && rate_per_s <= 1_000_000.0) {
        bail!("rate must be above 0 and at most 1,000,000 requests/s");
    }
    if duration_s == 0 || duration_s > 86_400 {
        bail!("duration must be between 1 and 86,400 s");
    }
    if max_in_flight == 0 || max_in_flight > 1_000_000 {
        bail!("max-in-flight must be between 1 and 1,000,000");
    }
    Ok(())
}

/// What an open loop measured.
pub(crate) struct OpenLoopRun {
    /// From the due time to the answer, of the answers `send` expected.
    pub(crate) latencies: Histogram<u64>,
    pub(crate) sent: u64,
    /// Requests that found every slot taken when they were due.
    pub(crate) delayed: u64,
    /// From the start until the last answer.
    pub(crate) elapsed_s: f64,
}

/// Sends `scheduled_requests(rate_per_s, duration_s)` requests on schedule, at most
/// `max_in_flight` at once. `prepare(i)` builds request `i` before it is due; `send` sends it
/// and says whether the answer was the expected one (only those are timed). Prints one
/// progress line a second to stderr.
pub(crate) async fn open_loop<T, P, S, F>(
    rate_per_s: f64,
    duration_s: u64,
    max_in_flight: usize,
    mut prepare: P,
    send: S,
) -> OpenLoopRun
where
    T: Send + 'static,
    P: FnMut(u64) -> T,
    S: Fn(T) -> F + Send + Sync + 'static,
    F: Future<Output = bool> + Send + 'static,
{
    let send = Arc::new(send);
    let slots = Arc::new(Semaphore::new(max_in_flight));
    let latencies = Arc::new(Mutex::new(histogram()));
    let sent = Arc::new(AtomicU64::new(0));
    let delayed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let ticker = {
        let (slots, sent, delayed) = (slots.clone(), sent.clone(), delayed.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                eprintln!(
                    "t={:.0}s sent={} in_flight={} delayed={}",
                    started.elapsed().as_secs_f64(),
                    sent.load(Ordering::Relaxed),
                    max_in_flight - slots.available_permits(),
                    delayed.load(Ordering::Relaxed)
                );
            }
        })
    };
    for i in 0..scheduled_requests(rate_per_s, duration_s) {
        let due = started + due_offset(i, rate_per_s);
        let request = prepare(i);
        tokio::time::sleep_until(due.into()).await;
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                delayed.fetch_add(1, Ordering::Relaxed);
                slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        sent.fetch_add(1, Ordering::Relaxed);
        let (send, latencies) = (send.clone(), latencies.clone());
        tokio::spawn(async move {
            let _slot = slot;
            if send(request).await {
                record(&latencies, due);
            }
        });
    }
    // Every request has answered once every slot is free again.
    let _all = slots
        .acquire_many(max_in_flight as u32)
        .await
        .expect("the semaphore is never closed");
    let elapsed_s = started.elapsed().as_secs_f64();
    ticker.abort();
    let latencies = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    OpenLoopRun {
        latencies,
        sent: sent.load(Ordering::Relaxed),
        delayed: delayed.load(Ordering::Relaxed),
        elapsed_s,
    }
}

// ---------------------------------------------------------------------------------------
// Holds at a fixed offered rate
// ---------------------------------------------------------------------------------------

/// Settings of the open-loop holds scenario.
#[derive(Debug, Clone)]
pub struct HoldsOpenScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Holds offered per second.
    pub rate: f64,
    pub duration_s: u64,
    pub max_in_flight: usize,
    /// Sections of 50 rows x 100 seats in the generated venue.
    pub sections: u32,
    /// Share of requests aimed at the two best sections; 0 spreads them evenly.
    pub hot_share: f64,
    /// Short, so held seats come back and the venue never sells out.
    pub hold_ttl_s: u32,
    /// Send the holds to this node instead (see `HoldsScenario::holds_via`).
    pub holds_via: Option<String>,
}

impl HoldsOpenScenario {
    /// The defaults: 1,000 holds/s for 10 s, 1,024 in flight, 4 sections, 0.8 hot, 1 s TTL.
    pub fn new(base_url: &str, jwt_secret: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            jwt_secret: jwt_secret.to_owned(),
            rate: 1000.0,
            duration_s: 10,
            max_in_flight: 1024,
            sections: 4,
            hot_share: 0.8,
            hold_ttl_s: 1,
            holds_via: None,
        }
    }
}

/// What an open-loop holds run measured.
#[derive(Debug, Clone)]
pub struct HoldsOpenReport {
    pub event_id: String,
    /// Holds offered per second.
    pub rate: f64,
    pub sent: u64,
    pub granted: u64,
    pub refused: u64,
    /// Anything but 201 or 409, transport failures included.
    pub errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Holds that found `max_in_flight` requests out when they were due.
    pub delayed: u64,
    pub elapsed_s: f64,
    /// Answers by the tenth of a second (from the start) they arrived in, and their status
    /// (0: no answer, a transport failure): what a failover looks like from the clients.
    pub answers: std::collections::BTreeMap<(u64, u16), u64>,
}

impl HoldsOpenReport {
    /// One line per tenth of a second with answers: `t=SECONDS STATUS=COUNT …`.
    pub fn timeline(&self) -> String {
        let mut out = String::new();
        let mut current = None;
        for (&(tenth, status), &count) in &self.answers {
            if current != Some(tenth) {
                if current.is_some() {
                    out.push('\n');
                }
                out.push_str(&format!("t={:.1}", tenth as f64 / 10.0));
                current = Some(tenth);
            }
            out.push_str(&format!(" {status}={count}"));
        }
        out
    }

    /// Holds answered 201 or 409 per second: hold decisions.
    pub fn decided_per_s(&self) -> f64 {
        (self.granted + self.refused) as f64 / seconds_or(self.elapsed_s)
    }

    pub fn granted_per_s(&self) -> f64 {
        self.granted as f64 / seconds_or(self.elapsed_s)
    }
}

impl std::fmt::Display for HoldsOpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offered/s={:.0} decided/s={:.0} granted/s={:.0} sent={} granted={} refused={} errors={} p50_ms={:.1} p90_ms={:.1} p99_ms={:.1} max_ms={:.1} delayed={} elapsed_s={:.1}",
            self.rate,
            self.decided_per_s(),
            self.granted_per_s(),
            self.sent,
            self.granted,
            self.refused,
            self.errors,
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms,
            self.delayed,
            self.elapsed_s
        )
    }
}

/// Runs the open-loop holds scenario to completion.
pub async fn run_holds_open(scenario: &HoldsOpenScenario) -> anyhow::Result<HoldsOpenReport> {
    check_open_loop(scenario.rate, scenario.duration_s, scenario.max_in_flight)?;
    if scenario.sections == 0 || scenario.sections > 40 {
        bail!("sections must be between 1 and 40");
    }
    if !(0.0..=1.0).contains(&scenario.hot_share) {
        bail!("hot-share must be between 0 and 1");
    }
    if scenario.hold_ttl_s == 0 {
        bail!("hold-ttl must be at least 1 s");
    }
    let http = http_client(scenario.max_in_flight.min(4096))?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let sections: Vec<Value> = (0..scenario.sections)
        .map(|i| json!({"name": section_name(i), "rows": ROWS, "seatsPerRow": SEATS_PER_ROW, "priceMinor": 10_000 - i64::from(i) * 100}))
        .collect();
    let event_id = create_event(
        &http,
        &base,
        &scenario.jwt_secret,
        "Open-loop holds venue",
        scenario.hold_ttl_s,
        sections,
    )
    .await?;
    let last_seat = format!(
        "{}-{ROWS}-{SEATS_PER_ROW}",
        section_name(scenario.sections - 1)
    );
    let url = Arc::new(
        crate::holds_url_via(
            &http,
            &scenario.jwt_secret,
            &format!("{base}/v1/events/{event_id}/holds"),
            scenario.holds_via.as_deref(),
            &last_seat,
        )
        .await?,
    );
    let (n_sections, hot_share) = (scenario.sections, scenario.hot_share);
    let secret = scenario.jwt_secret.clone();
    let tag = run_tag();
    let granted = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mint_failures = AtomicU64::new(0);
    let prepare = |i: u64| {
        let mut rng = rand::rng();
        let section = if rng.random_bool(hot_share) {
            rng.random_range(0..n_sections.min(2))
        } else {
            rng.random_range(0..n_sections)
        };
        let quantity = rng.random_range(1..=SEATS_PER_HOLD_MAX);
        let row = rng.random_range(1..=ROWS);
        let first = rng.random_range(1..=SEATS_PER_ROW - quantity + 1);
        let seat_ids = row_seats(&section_name(section), row, first, quantity);
        // A fresh account per hold, so the purchase limit never interferes.
        let fan = token(&secret, &format!("ho-{tag}-{i}"), false).unwrap_or_else(|_| {
            mint_failures.fetch_add(1, Ordering::Relaxed);
            String::new()
        });
        (fan, seat_ids)
    };
    let answers = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
    let started = std::time::Instant::now();
    let send = {
        let (granted, refused, errors) = (granted.clone(), refused.clone(), errors.clone());
        let answers = answers.clone();
        move |(fan, seat_ids): (String, Vec<String>)| {
            let request = http
                .post(url.as_str())
                .bearer_auth(fan)
                .header("idempotency-key", key())
                .json(&json!({ "seatIds": seat_ids }));
            let (granted, refused, errors) = (granted.clone(), refused.clone(), errors.clone());
            let answers = answers.clone();
            async move {
                let (status, _) = call(request).await;
                let tenth = (started.elapsed().as_millis() / 100) as u64;
                *answers
                    .lock()
                    .expect("answers")
                    .entry((tenth, status))
                    .or_insert(0) += 1;
                let counter = match status {
                    201 => &granted,
                    409 => &refused,
                    _ => &errors,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                matches!(status, 201 | 409)
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
    if mint_failures.load(Ordering::Relaxed) > 0 {
        bail!("minting account tokens failed");
    }
    Ok(HoldsOpenReport {
        event_id,
        rate: scenario.rate,
        sent: run.sent,
        granted: granted.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        p50_ms: quantile_ms(&run.latencies, 0.50),
        p90_ms: quantile_ms(&run.latencies, 0.90),
        p99_ms: quantile_ms(&run.latencies, 0.99),
        max_ms: max_ms(&run.latencies),
        delayed: run.delayed,
        elapsed_s: run.elapsed_s,
        answers: std::mem::take(&mut *answers.lock().expect("answers")),
    })
}

// ---------------------------------------------------------------------------------------
// Attempts after a sell-out
// ---------------------------------------------------------------------------------------

/// Settings of the sold-out scenario.
#[derive(Debug, Clone)]
pub struct SelloutScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Seats of the one section "S0": up to 100 (one row) or a multiple of 100 (rows of 100).
    pub seats: u32,
    /// Closed-loop clients sending the attempts.
    pub clients: usize,
    pub duration_s: u64,
    /// Share of attempts that ask for best available seats instead of naming seats.
    pub best_available_share: f64,
    /// Account tokens minted before timing starts; attempts take them in turn, so each
    /// attempt has a fresh account while the pool lasts.
    pub accounts: usize,
    /// Prometheus metrics whose change over the attempts is reported (summed over labels).
    pub count_metrics: Vec<String>,
}

impl SelloutScenario {
    /// The defaults: 600 seats, 64 clients for 10 s, half best available, 2,000 accounts,
    /// counting `boxoffice_holds_rejected_early_total` and `boxoffice_hold_batch_requests_count`.
    pub fn new(base_url: &str, jwt_secret: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            jwt_secret: jwt_secret.to_owned(),
            seats: 600,
            clients: 64,
            duration_s: 10,
            best_available_share: 0.5,
            accounts: 2000,
            count_metrics: vec![
                "boxoffice_holds_rejected_early_total".to_owned(),
                "boxoffice_hold_batch_requests_count".to_owned(),
            ],
        }
    }
}

/// What a sold-out run measured.
#[derive(Debug, Clone)]
pub struct SelloutReport {
    pub event_id: String,
    pub seats: u32,
    /// Paid holds that sold the section out.
    pub orders: usize,
    pub sellout_s: f64,
    pub attempts: u64,
    /// Attempts answered 409.
    pub rejects: u64,
    /// Attempts answered anything but 409, transport failures included.
    pub errors: u64,
    /// Status and body of the first few errors.
    pub first_errors: Vec<String>,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Each watched metric's change over the attempts; `None` when `/metrics` lacks it.
    pub metric_deltas: Vec<(String, Option<f64>)>,
    pub elapsed_s: f64,
}

impl SelloutReport {
    pub fn rejects_per_s(&self) -> f64 {
        self.rejects as f64 / seconds_or(self.elapsed_s)
    }
}

impl std::fmt::Display for SelloutReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "attempts={} rejects/s={:.0} rejects={} errors={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} elapsed_s={:.1} seats={} orders={} sellout_s={:.1}",
            self.attempts,
            self.rejects_per_s(),
            self.rejects,
            self.errors,
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.elapsed_s,
            self.seats,
            self.orders,
            self.sellout_s
        )?;
        for (name, delta) in &self.metric_deltas {
            match delta {
                Some(delta) => write!(f, " {name}={delta}")?,
                None => write!(f, " {name}=missing")?,
            }
        }
        if !self.first_errors.is_empty() {
            write!(f, " first_errors={:?}", self.first_errors.join(" | "))?;
        }
        Ok(())
    }
}

/// Rows and seats per row of the sold-out section.
fn sellout_layout(seats: u32) -> anyhow::Result<(u32, u32)> {
    match seats {
        1..=100 => Ok((1, seats)),
        101..=10_000 if seats.is_multiple_of(100) => Ok((seats / 100, 100)),
        _ => bail!("seats must be 1-100, or a multiple of 100 up to 10,000"),
    }
}

/// The holds that sell the section out: up to 6 adjacent seats each, every seat once.
fn sellout_holds(rows: u32, seats_per_row: u32) -> Vec<Vec<String>> {
    let section = section_name(0);
    let mut holds = Vec::new();
    for row in 1..=rows {
        let mut first = 1;
        while first <= seats_per_row {
            let n = SEATS_PER_HOLD_MAX.min(seats_per_row - first + 1);
            holds.push(row_seats(&section, row, first, n));
            first += n;
        }
    }
    holds
}

/// The sum over every sample (every label set) of metric `name` in Prometheus text; `None`
/// when no sample has that exact name.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .unwrap_or(line.len());
        if &line[..name_end] != name {
            continue;
        }
        let rest = &line[name_end..];
        let rest = if rest.starts_with('{') {
            match labels_end(rest) {
                Some(end) => &rest[end..],
                None => continue,
            }
        } else {
            rest
        };
        if let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            *total.get_or_insert(0.0) += value;
        }
    }
    total
}

/// The index just past the `}` closing the label set `text` starts with; quoted label
/// values may hold `}` and escaped quotes.
fn labels_end(text: &str) -> Option<usize> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i + 1),
            _ => {}
        }
    }
    None
}

async fn scrape_metrics(http: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let (status, body) = call(http.get(format!("{base}/metrics"))).await;
    if status != 200 {
        bail!("GET /metrics answered {status}");
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Checks the event has no seat left: its counts, then the seat map (which may trail).
async fn check_sold_out(
    http: &reqwest::Client,
    base: &str,
    event_id: &str,
    seats: u32,
) -> anyhow::Result<()> {
    let (status, event) = call_json(http.get(format!("{base}/v1/events/{event_id}"))).await;
    if status != 200 {
        bail!("reading the event answered {status}: {event}");
    }
    let available: i64 = event["sections"]
        .as_array()
        .context("event without sections")?
        .iter()
        .map(|section| section["available"].as_i64().unwrap_or(0))
        .sum();
    let sold: i64 = event["sections"]
        .as_array()
        .context("event without sections")?
        .iter()
        .map(|section| section["sold"].as_i64().unwrap_or(0))
        .sum();
    if available != 0 || sold != i64::from(seats) {
        bail!(
            "after the sell-out the event counts {available} available and {sold} sold seats of {seats}: {event}"
        );
    }
    let deadline = Instant::now() + SEATMAP_SETTLE_MAX;
    loop {
        let (status, map) =
            call_json(http.get(format!("{base}/v1/events/{event_id}/seatmap"))).await;
        if status != 200 {
            bail!("reading the seat map answered {status}: {map}");
        }
        let statuses = map["seats"].as_array().context("seat map without seats")?;
        let sold = statuses.iter().filter(|s| s["status"] == "SOLD").count();
        if sold == seats as usize && statuses.len() == seats as usize {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the seat map shows {sold} SOLD of {} seats after the sell-out",
                statuses.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the sold-out scenario to completion.
pub async fn run_sellout(scenario: &SelloutScenario) -> anyhow::Result<SelloutReport> {
    let (rows, seats_per_row) = sellout_layout(scenario.seats)?;
    if scenario.clients == 0 || scenario.clients > 4096 {
        bail!("clients must be between 1 and 4096");
    }
    if scenario.duration_s == 0 || scenario.duration_s > 86_400 {
        bail!("duration must be between 1 and 86,400 s");
    }
    if !(0.0..=1.0).contains(&scenario.best_available_share) {
        bail!("best-available-share must be between 0 and 1");
    }
    if scenario.accounts == 0 || scenario.accounts > 1_000_000 {
        bail!("accounts must be between 1 and 1,000,000");
    }
    let http = http_client(scenario.clients.max(SETUP_CONCURRENCY))?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let section = section_name(0);
    let event_id = create_event(
        &http,
        &base,
        &scenario.jwt_secret,
        "Sold-out venue",
        600,
        vec![json!({"name": section, "rows": rows, "seatsPerRow": seats_per_row, "priceMinor": 5_000})],
    )
    .await?;
    let tag = run_tag();

    // Sell out: every hold by its own account, paid and confirmed.
    let sellout_started = Instant::now();
    let holds = sellout_holds(rows, seats_per_row);
    let buyers = holds
        .into_iter()
        .enumerate()
        .map(|(i, seat_ids)| {
            Ok((
                token(&scenario.jwt_secret, &format!("so-{tag}-buyer-{i}"), false)?,
                seat_ids,
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (shared_base, shared_event) = (Arc::new(base.clone()), Arc::new(event_id.clone()));
    let orders = run_concurrently(buyers, SETUP_CONCURRENCY, |(fan, seat_ids)| {
        hold_and_pay(
            http.clone(),
            shared_base.clone(),
            shared_event.clone(),
            fan,
            json!({ "seatIds": seat_ids }),
        )
    })
    .await
    .context("selling the section out")?
    .len();
    let sellout_s = sellout_started.elapsed().as_secs_f64();
    check_sold_out(&http, &base, &event_id, scenario.seats).await?;

    // Attempts: tokens first, then the timed part.
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..scenario.accounts)
            .map(|i| token(&scenario.jwt_secret, &format!("so-{tag}-{i}"), false))
            .collect::<anyhow::Result<_>>()?,
    );
    let metrics_before = scrape_metrics(&http, &base).await?;
    let url = Arc::new(format!("{base}/v1/events/{event_id}/holds"));
    let next_account = Arc::new(AtomicUsize::new(0));
    let rejects = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let latencies = Arc::new(Mutex::new(histogram()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(scenario.duration_s);
    let mut workers = Vec::new();
    for _ in 0..scenario.clients {
        let (http, url, tokens, next_account) = (
            http.clone(),
            url.clone(),
            tokens.clone(),
            next_account.clone(),
        );
        let (rejects, errors, first_errors, latencies) = (
            rejects.clone(),
            errors.clone(),
            first_errors.clone(),
            latencies.clone(),
        );
        let (section, share) = (section.clone(), scenario.best_available_share);
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let body = {
                    let mut rng = rand::rng();
                    let quantity = rng.random_range(1..=SEATS_PER_HOLD_MAX.min(seats_per_row));
                    if rng.random_bool(share) {
                        json!({"bestAvailable": {"quantity": quantity, "section": section}})
                    } else {
                        let row = rng.random_range(1..=rows);
                        let first = rng.random_range(1..=seats_per_row - quantity + 1);
                        json!({ "seatIds": row_seats(&section, row, first, quantity) })
                    }
                };
                let fan = &tokens[next_account.fetch_add(1, Ordering::Relaxed) % tokens.len()];
                let sent = Instant::now();
                let (status, answer) = call(
                    http.post(url.as_str())
                        .bearer_auth(fan)
                        .header("idempotency-key", key())
                        .json(&body),
                )
                .await;
                if status == 409 {
                    record(&latencies, sent);
                    rejects.fetch_add(1, Ordering::Relaxed);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                    let mut kept = first_errors.lock().unwrap_or_else(|e| e.into_inner());
                    if kept.len() < ERROR_BODIES_KEPT {
                        let answer: String = String::from_utf8_lossy(&answer)
                            .chars()
                            .take(ERROR_BODY_CHARS_MAX)
                            .collect();
                        kept.push(format!("{status} {answer}"));
                    }
                }
            }
        }));
    }
    let ticker = {
        let (rejects, errors) = (rejects.clone(), errors.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let elapsed_s = started.elapsed().as_secs_f64();
                eprintln!(
                    "t={elapsed_s:.0}s rejects/s={:.0} errors={}",
                    rejects.load(Ordering::Relaxed) as f64 / elapsed_s,
                    errors.load(Ordering::Relaxed)
                );
            }
        })
    };
    for worker in workers {
        worker.await?;
    }
    ticker.abort();
    let elapsed_s = started.elapsed().as_secs_f64();
    let metrics_after = scrape_metrics(&http, &base).await?;
    let metric_deltas = scenario
        .count_metrics
        .iter()
        .map(|name| {
            // A counter first incremented during the attempts was absent before: it was 0.
            let delta = metric_value(&metrics_after, name)
                .map(|after| after - metric_value(&metrics_before, name).unwrap_or(0.0));
            (name.clone(), delta)
        })
        .collect();
    let latencies = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let rejects = rejects.load(Ordering::Relaxed);
    let errors = errors.load(Ordering::Relaxed);
    let first_errors = first_errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(SelloutReport {
        event_id,
        seats: scenario.seats,
        orders,
        sellout_s,
        attempts: rejects + errors,
        rejects,
        errors,
        first_errors,
        p50_ms: quantile_ms(&latencies, 0.50),
        p99_ms: quantile_ms(&latencies, 0.99),
        max_ms: max_ms(&latencies),
        metric_deltas,
        elapsed_s,
    })
}

// ---------------------------------------------------------------------------------------
// Order status reads
// ---------------------------------------------------------------------------------------

/// Settings of the order-status scenario.
#[derive(Debug, Clone)]
pub struct OrderStatusScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Confirmed orders made before timing starts, each by its own account.
    pub orders: usize,
    /// Order reads offered per second.
    pub rate: f64,
    pub duration_s: u64,
    pub max_in_flight: usize,
}

impl OrderStatusScenario {
    /// The defaults: 200 orders, 1,000 reads/s for 10 s, 1,024 in flight.
    pub fn new(base_url: &str, jwt_secret: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            jwt_secret: jwt_secret.to_owned(),
            orders: 200,
            rate: 1000.0,
            duration_s: 10,
            max_in_flight: 1024,
        }
    }
}

/// What an order-status run measured.
#[derive(Debug, Clone)]
pub struct OrderStatusReport {
    pub event_id: String,
    pub orders: usize,
    /// Seconds spent making the orders.
    pub setup_s: f64,
    /// Reads offered per second.
    pub rate: f64,
    pub sent: u64,
    /// Reads answered 200 with `orderStatus` `CONFIRMED`.
    pub ok: u64,
    /// Reads refused as overload (429).
    pub shed: u64,
    /// Every other answer, transport failures included.
    pub errors: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Reads that found `max_in_flight` requests out when they were due.
    pub delayed: u64,
    pub elapsed_s: f64,
}

impl OrderStatusReport {
    /// Reads answered as expected per second.
    pub fn achieved_per_s(&self) -> f64 {
        self.ok as f64 / seconds_or(self.elapsed_s)
    }
}

impl std::fmt::Display for OrderStatusReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offered/s={:.0} achieved/s={:.0} sent={} ok={} shed_429={} errors={} p50_ms={:.1} p90_ms={:.1} p99_ms={:.1} max_ms={:.1} delayed={} elapsed_s={:.1} orders={} setup_s={:.1}",
            self.rate,
            self.achieved_per_s(),
            self.sent,
            self.ok,
            self.shed,
            self.errors,
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms,
            self.delayed,
            self.elapsed_s,
            self.orders,
            self.setup_s
        )
    }
}

/// The seats of order `i`: `quantity` (at most 4) adjacent seats in a block of 4 no other
/// order touches, 25 blocks a row.
fn order_seats(i: usize, quantity: u32) -> Vec<String> {
    let blocks_per_row = (SEATS_PER_ROW / ORDER_SEATS_MAX) as usize;
    let row = (i / blocks_per_row) as u32 + 1;
    let first = (i % blocks_per_row) as u32 * ORDER_SEATS_MAX + 1;
    row_seats(&section_name(0), row, first, quantity.min(ORDER_SEATS_MAX))
}

/// Runs the order-status scenario to completion.
pub async fn run_order_status(scenario: &OrderStatusScenario) -> anyhow::Result<OrderStatusReport> {
    check_open_loop(scenario.rate, scenario.duration_s, scenario.max_in_flight)?;
    if scenario.orders == 0 || scenario.orders > ORDERS_MAX {
        bail!("orders must be between 1 and {ORDERS_MAX}");
    }
    let http = http_client(scenario.max_in_flight.min(4096))?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let event_id = create_event(
        &http,
        &base,
        &scenario.jwt_secret,
        "Order-status venue",
        600,
        vec![json!({"name": section_name(0), "rows": ROWS, "seatsPerRow": SEATS_PER_ROW, "priceMinor": 5_000})],
    )
    .await?;
    let tag = run_tag();
    let setup_started = Instant::now();
    let buyers = (0..scenario.orders)
        .map(|i| {
            let quantity = rand::rng().random_range(1..=ORDER_SEATS_MAX);
            Ok((
                token(&scenario.jwt_secret, &format!("os-{tag}-{i}"), false)?,
                order_seats(i, quantity),
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (shared_base, shared_event) = (Arc::new(base.clone()), Arc::new(event_id.clone()));
    // (order URL, owner's token) of every confirmed order.
    let orders: Arc<Vec<(String, String)>> = Arc::new(
        run_concurrently(buyers, SETUP_CONCURRENCY, |(fan, seat_ids)| {
            let paid = hold_and_pay(
                http.clone(),
                shared_base.clone(),
                shared_event.clone(),
                fan.clone(),
                json!({ "seatIds": seat_ids }),
            );
            let base = shared_base.clone();
            async move {
                let order_id = paid.await?;
                Ok((format!("{base}/v1/orders/{order_id}"), fan))
            }
        })
        .await
        .context("making the orders")?,
    );
    let setup_s = setup_started.elapsed().as_secs_f64();

    let ok = Arc::new(AtomicU64::new(0));
    let shed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let n_orders = orders.len();
    let prepare = |_: u64| rand::rng().random_range(0..n_orders);
    let send = {
        let (ok, shed, errors) = (ok.clone(), shed.clone(), errors.clone());
        move |order: usize| {
            let (url, fan) = &orders[order];
            let request = http.get(url.as_str()).bearer_auth(fan);
            let (ok, shed, errors) = (ok.clone(), shed.clone(), errors.clone());
            async move {
                let (status, body) = call_json(request).await;
                let confirmed = status == 200 && body["orderStatus"] == "CONFIRMED";
                let counter = match (confirmed, status) {
                    (true, _) => &ok,
                    (false, 429) => &shed,
                    (false, _) => &errors,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                confirmed
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
    Ok(OrderStatusReport {
        event_id,
        orders: n_orders,
        setup_s,
        rate: scenario.rate,
        sent: run.sent,
        ok: ok.load(Ordering::Relaxed),
        shed: shed.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
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

    const METRICS: &str = r#"# HELP boxoffice_hold_batches_total Hold batches decided.
# TYPE boxoffice_hold_batches_total counter
boxoffice_hold_batches_total 12
boxoffice_holds_rejected_early_total{reason="sold_out"} 3
boxoffice_holds_rejected_early_total{reason="odd } \" label"} 4.5
boxoffice_holds_rejected_early_total_other 100
boxoffice_hold_batch_seconds_bucket{le="+Inf"} 7
boxoffice_hold_batch_seconds_count 7
"#;

    #[test]
    fn metric_values_are_read_and_summed_over_labels() {
        assert_eq!(
            metric_value(METRICS, "boxoffice_hold_batches_total"),
            Some(12.0)
        );
        assert_eq!(
            metric_value(METRICS, "boxoffice_holds_rejected_early_total"),
            Some(7.5)
        );
        assert_eq!(
            metric_value(METRICS, "boxoffice_hold_batch_seconds_count"),
            Some(7.0)
        );
    }

    #[test]
    fn missing_metrics_and_prefixes_are_none() {
        assert_eq!(metric_value(METRICS, "boxoffice_not_there_total"), None);
        assert_eq!(metric_value(METRICS, "boxoffice_hold_batches"), None);
        assert_eq!(metric_value(METRICS, "boxoffice_hold_batch_seconds"), None);
        assert_eq!(metric_value("", "boxoffice_hold_batches_total"), None);
    }

    #[test]
    fn schedule_spreads_requests_evenly_over_the_duration() {
        assert_eq!(scheduled_requests(200.0, 5), 1000);
        assert_eq!(scheduled_requests(2.5, 3), 8);
        assert_eq!(due_offset(0, 200.0), Duration::ZERO);
        assert_eq!(due_offset(200, 200.0), Duration::from_secs(1));
        let last = due_offset(scheduled_requests(2.5, 3) - 1, 2.5);
        assert!(last < Duration::from_secs(3), "{last:?}");
        assert_eq!(last, Duration::from_millis(2800));
    }

    #[tokio::test]
    async fn a_slow_server_shows_as_latency_not_as_fewer_requests() {
        // Two slots of 20 ms each serve 100 requests/s; 200/s are offered for a second.
        let send = |i: u64| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            i.is_multiple_of(2)
        };
        let run = open_loop(200.0, 1, 2, |i| i, send).await;
        assert_eq!(run.sent, 200);
        assert!(run.delayed >= 100, "delayed={}", run.delayed);
        // Only the expected answers (even i) are timed.
        assert_eq!(run.latencies.len(), 100);
        // The last requests are due at 1 s and answered near 2 s: the backlog is measured.
        assert!(
            run.latencies.max() >= 700_000,
            "max_us={}",
            run.latencies.max()
        );
        assert!(run.elapsed_s >= 1.9, "elapsed_s={}", run.elapsed_s);
    }

    #[test]
    fn open_loop_knobs_are_checked() {
        assert!(check_open_loop(200.0, 5, 64).is_ok());
        assert!(check_open_loop(0.0, 5, 64).is_err());
        assert!(check_open_loop(f64::NAN, 5, 64).is_err());
        assert!(check_open_loop(200.0, 0, 64).is_err());
        assert!(check_open_loop(200.0, 5, 0).is_err());
    }

    #[test]
    fn sellout_holds_cover_every_seat_once() {
        assert_eq!(sellout_layout(600).unwrap(), (6, 100));
        assert_eq!(sellout_layout(40).unwrap(), (1, 40));
        assert!(sellout_layout(0).is_err());
        assert!(sellout_layout(150).is_err());
        let holds = sellout_holds(6, 100);
        // 16 holds of 6 and one of 4 in each row.
        assert_eq!(holds.len(), 6 * 17);
        assert!(holds.iter().all(|seats| (1..=6).contains(&seats.len())));
        let seats: HashSet<&String> = holds.iter().flatten().collect();
        assert_eq!(seats.len(), 600);
        assert!(seats.contains(&"S0-6-100".to_owned()));
        assert_eq!(holds[16], vec!["S0-1-97", "S0-1-98", "S0-1-99", "S0-1-100"]);
    }

    #[test]
    fn orders_never_share_a_seat() {
        let seats: Vec<String> = (0..ORDERS_MAX).flat_map(|i| order_seats(i, 4)).collect();
        let distinct: HashSet<&String> = seats.iter().collect();
        assert_eq!(distinct.len(), ORDERS_MAX * 4);
        assert_eq!(order_seats(0, 2), vec!["S0-1-1", "S0-1-2"]);
        assert_eq!(order_seats(25, 1), vec!["S0-2-1"]);
        assert_eq!(order_seats(ORDERS_MAX - 1, 4).last().unwrap(), "S0-50-100");
    }

    #[test]
    fn sellout_report_names_missing_metrics() {
        let report = SelloutReport {
            event_id: "e".to_owned(),
            seats: 600,
            orders: 102,
            sellout_s: 1.0,
            attempts: 10,
            rejects: 10,
            errors: 0,
            first_errors: Vec::new(),
            p50_ms: 1.0,
            p99_ms: 2.0,
            max_ms: 3.0,
            metric_deltas: vec![
                ("a_total".to_owned(), Some(4.0)),
                ("b_total".to_owned(), None),
            ],
            elapsed_s: 2.0,
        };
        let line = report.to_string();
        assert!(line.contains("rejects/s=5 "), "{line}");
        assert!(line.ends_with(" a_total=4 b_total=missing"), "{line}");
        assert!(!line.contains('\n'));
    }
}
