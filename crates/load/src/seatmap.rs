//! The seat-map scenarios (issue 5's benchmark) and the bare baseline they are measured
//! against.
//!
//! - [`run_snapshot`] (`boxoffice load seatmap`): closed-loop clients (or, with a rate, an
//!   open loop that sends on schedule and counts latency from when each request was due)
//!   GET one event's seat map snapshot (`/v1/events/{id}/seatmap`, ~2 MB of JSON for the
//!   50,000-seat stadium), optionally asking for gzip and/or revalidating with the last
//!   `ETag` (`If-None-Match`, so mostly 304s). Every body is read to its end; a request's latency runs from just before
//!   it is sent to its last byte. Optionally holds seats in the background at a fixed rate
//!   so the map keeps changing (and the server keeps re-rendering it). `--url` points the
//!   same client at any other URL (the hello-world or the bare mirror: the baselines).
//! - [`run_sse`] (`boxoffice load sse`): opens N Server-Sent-Events streams of one event's
//!   seat map (`/seatmap/stream?since=V`), waits until every stream answered 200, then
//!   holds distinct seats one by one through the API at a fixed rate (open loop: a slow
//!   answer does not delay the next hold). For each (stream, hold) pair it measures the
//!   delay from the hold's 201 (and from just before its POST was sent) until that stream
//!   delivered a message naming the seat. Streams that end are reopened with
//!   `Last-Event-ID` (counted as reconnects); `event: reset` is counted and the stream
//!   reopened at the version it names. A pair never delivered counts as missed.
//! - [`serve_mirror`] (`boxoffice load seatmap-mirror`): a bare tokio HTTP/1.1 server with
//!   the same surface and no application behind it: it serves a copy of a real snapshot
//!   (identity and gzip bytes, same ETag, from memory), and turns every `POST …/holds` into
//!   one stream message broadcast to every open `…/seatmap/stream` before answering 201.
//!   The same load client against it measures what this machine, its loopback and the load
//!   generator allow; the server's figures are reported as a ratio of it.
//!
//! Everything runs on the caller's one tokio runtime; every failed connection or request is
//! counted and reported, none is retried silently.

use std::collections::HashMap;
use std::io::IoSlice;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Bytes;
use boxoffice_domain::ids::AccountId;
use boxoffice_token::mint_token;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Mutex, Semaphore, broadcast, watch};

/// Sections of the generated stadium: 10 × 50 rows × 100 seats = 50,000 seats.
pub const STADIUM_SECTIONS: [&str; 10] = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"];
pub const STADIUM_ROWS: u32 = 50;
pub const STADIUM_SEATS_PER_ROW: u32 = 100;

const TOKEN_TTL_S: u64 = 3 * 3600;

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("histogram bounds")
}

fn ms(histogram: &Histogram<u64>, quantile: f64) -> f64 {
    if histogram.is_empty() {
        return 0.0;
    }
    histogram.value_at_quantile(quantile) as f64 / 1000.0
}

fn admin_token(secret: &str) -> anyhow::Result<String> {
    mint_token(secret, &AccountId::parse("load-admin")?, true, TOKEN_TTL_S)
        .map_err(anyhow::Error::msg)
}

fn fan_token(secret: &str, account: &str) -> anyhow::Result<String> {
    mint_token(secret, &AccountId::parse(account)?, false, TOKEN_TTL_S).map_err(anyhow::Error::msg)
}

/// Creates the 50,000-seat stadium (sections A–J of 50 rows × 100 seats); returns its id.
pub async fn create_stadium(
    http: &reqwest::Client,
    base: &str,
    jwt_secret: &str,
    hold_ttl_s: u32,
) -> anyhow::Result<String> {
    let admin = admin_token(jwt_secret)?;
    let sections: Vec<Value> = STADIUM_SECTIONS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({"name": name, "rows": STADIUM_ROWS, "seatsPerRow": STADIUM_SEATS_PER_ROW,
                   "priceMinor": 12_000 - i as i64 * 500})
        })
        .collect();
    let created = http
        .post(format!("{base}/v1/admin/events"))
        .bearer_auth(&admin)
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({
            "name": "Seat-map load test stadium",
            "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR",
            "holdTtlSeconds": hold_ttl_s,
            "sections": sections,
        }))
        .send()
        .await
        .context("creating the load-test stadium")?;
    let status = created.status();
    let body: Value = created.json().await.unwrap_or_default();
    if status.as_u16() != 201 {
        bail!("creating the stadium answered {status}: {body}");
    }
    Ok(body["eventId"].as_str().context("eventId")?.to_owned())
}

/// One uncompressed snapshot, read once to learn the version and the free seats.
#[derive(Debug)]
struct Snapshot {
    version: u64,
    seats: usize,
    available: Vec<String>,
    bytes: usize,
}

async fn fetch_snapshot(http: &reqwest::Client, url: &str) -> anyhow::Result<Snapshot> {
    let response = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body = response.bytes().await?;
    if status.as_u16() != 200 {
        bail!(
            "GET {url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let map: Value = serde_json::from_slice(&body).context("the snapshot is not JSON")?;
    let seats = map["seats"].as_array().context("snapshot without seats")?;
    Ok(Snapshot {
        version: map["version"]
            .as_u64()
            .context("snapshot without version")?,
        seats: seats.len(),
        available: seats
            .iter()
            .filter(|seat| seat["status"] == "AVAILABLE")
            .filter_map(|seat| seat["seatId"].as_str().map(str::to_owned))
            .collect(),
        bytes: body.len(),
    })
}

/// `n` of `available`, spread evenly over it (so over every section).
fn spread(available: &[String], n: usize) -> anyhow::Result<Vec<String>> {
    if n > available.len() {
        bail!("{n} seats wanted, only {} are available", available.len());
    }
    Ok((0..n)
        .map(|i| available[i * available.len() / n.max(1)].clone())
        .collect())
}

/// One hold of one seat by a fresh account: (status or 0 on a transport error, sent, answered).
async fn hold_seat(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    seat_id: &str,
) -> (u16, Instant, Instant) {
    let sent = Instant::now();
    let answer = http
        .post(url)
        .bearer_auth(token)
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({ "seatIds": [seat_id] }))
        .send()
        .await;
    let status = match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            // The 201 "came back" when its body is read, as a client would see it.
            let _ = response.bytes().await;
            status
        }
        Err(_) => 0,
    };
    (status, sent, Instant::now())
}

fn progress_bar(len: u64, template: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

// ---------------------------------------------------------------------------------------
// Snapshot requests
// ---------------------------------------------------------------------------------------

/// Settings of the `seatmap` (snapshot) scenario.
#[derive(Debug, Clone)]
pub struct SnapshotScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Load this event's map; a new stadium is created when `None` (and `url` is `None`).
    pub event_id: Option<String>,
    /// GET this URL instead of a seat map (a baseline: the hello-world, the mirror).
    pub url: Option<String>,
    pub clients: usize,
    pub duration_s: u64,
    /// Send `Accept-Encoding: gzip` (the body is counted as it travels, compressed).
    pub gzip: bool,
    /// Send `If-None-Match` with the last ETag this client saw.
    pub etag: bool,
    /// Seats held per second in the background while the clients read (0: none).
    pub hold_rate: f64,
    /// Open loop: send this many requests per second whatever the answers' pace, at most
    /// `clients` in flight (a request waiting for a slot still counts its latency from when
    /// it was due). 0: closed loop, `clients` each sending its next request on an answer.
    pub rate: f64,
}

/// What a snapshot run measured.
#[derive(Debug, Clone)]
pub struct SnapshotReport {
    pub url: String,
    pub event_id: Option<String>,
    pub elapsed_s: f64,
    pub ok: u64,
    pub not_modified: u64,
    /// Answers other than 200 and 304.
    pub other_status: u64,
    /// Requests that failed without an answer (connection or body errors).
    pub failed: u64,
    /// Body bytes read, as they came over the wire (compressed when gzip).
    pub body_bytes: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Size of one body as served to these clients (identity or gzip), from the warm-up.
    pub body_size: usize,
    /// Seats in the map, its uncompressed size and its version at the warm-up (seat maps
    /// only).
    pub seats: Option<usize>,
    pub identity_size: Option<usize>,
    pub version_before: Option<u64>,
    pub holds_granted: u64,
    pub holds_failed: u64,
    /// The open-loop rate asked for (0: closed loop), and requests that waited for a free
    /// slot because `clients` were already in flight.
    pub rate: f64,
    pub waited_for_slot: u64,
}

impl SnapshotReport {
    pub fn requests(&self) -> u64 {
        self.ok + self.not_modified + self.other_status + self.failed
    }

    /// Requests answered 200 or 304 per second.
    pub fn answered_per_s(&self) -> f64 {
        (self.ok + self.not_modified) as f64 / self.elapsed_s
    }

    pub fn mib_per_s(&self) -> f64 {
        self.body_bytes as f64 / self.elapsed_s / (1024.0 * 1024.0)
    }
}

impl std::fmt::Display for SnapshotReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "req_s={:.0} p50_ms={:.2} p99_ms={:.2} max_ms={:.2} mib_s={:.1} s200={} s304={} other={} failed={} body_size={} identity_size={} seats={} version={} holds_granted={} holds_failed={} rate={} waited_for_slot={} elapsed_s={:.1}",
            self.answered_per_s(),
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.mib_per_s(),
            self.ok,
            self.not_modified,
            self.other_status,
            self.failed,
            self.body_size,
            self.identity_size
                .map_or_else(|| "-".into(), |n| n.to_string()),
            self.seats.map_or_else(|| "-".into(), |n| n.to_string()),
            self.version_before
                .map_or_else(|| "-".into(), |v| v.to_string()),
            self.holds_granted,
            self.holds_failed,
            self.rate,
            self.waited_for_slot,
            self.elapsed_s,
        )
    }
}

#[derive(Debug, Default)]
struct SnapshotCounters {
    ok: AtomicU64,
    not_modified: AtomicU64,
    other_status: AtomicU64,
    failed: AtomicU64,
    body_bytes: AtomicU64,
    waited_for_slot: AtomicU64,
}

impl SnapshotCounters {
    fn count(&self, status: u16, bytes: u64) {
        self.body_bytes.fetch_add(bytes, Ordering::Relaxed);
        let counter = match status {
            200 => &self.ok,
            304 => &self.not_modified,
            0 => &self.failed,
            _ => &self.other_status,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Settings shared by the request loops.
#[derive(Debug, Clone)]
struct Requests {
    http: reqwest::Client,
    url: Arc<String>,
    counters: Arc<SnapshotCounters>,
    gzip: bool,
    etag: bool,
    deadline: Instant,
}

/// One closed-loop client: the next request when the previous answer is read.
async fn closed_loop(requests: Requests) -> Histogram<u64> {
    let mut latencies = histogram();
    let mut last_etag: Option<String> = None;
    while Instant::now() < requests.deadline {
        let sent = Instant::now();
        let if_none_match = last_etag.as_deref().filter(|_| requests.etag);
        let (status, bytes, answered_etag) =
            get_to_end(&requests.http, &requests.url, requests.gzip, if_none_match).await;
        let _ = latencies.record(sent.elapsed().as_micros() as u64);
        requests.counters.count(status, bytes);
        if answered_etag.is_some() {
            last_etag = answered_etag;
        }
    }
    latencies
}

/// Requests at a fixed rate from `started`, at most `in_flight` at once; each latency runs
/// from when the request was due (so a stalled server is not hidden by fewer requests).
async fn open_loop(
    requests: Requests,
    rate: f64,
    in_flight: usize,
    started: Instant,
) -> Histogram<u64> {
    let latencies = Arc::new(std::sync::Mutex::new(histogram()));
    let last_etag: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let slots = Arc::new(Semaphore::new(in_flight));
    let mut tasks = Vec::new();
    for i in 0u64.. {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        if due >= requests.deadline {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        if slots.available_permits() == 0 {
            requests
                .counters
                .waited_for_slot
                .fetch_add(1, Ordering::Relaxed);
        }
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (requests, latencies, last_etag) =
            (requests.clone(), latencies.clone(), last_etag.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            let if_none_match = if requests.etag {
                last_etag.lock().unwrap_or_else(|e| e.into_inner()).clone()
            } else {
                None
            };
            let (status, bytes, answered_etag) = get_to_end(
                &requests.http,
                &requests.url,
                requests.gzip,
                if_none_match.as_deref(),
            )
            .await;
            let latency = due.elapsed().as_micros() as u64;
            let _ = latencies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(latency);
            requests.counters.count(status, bytes);
            if answered_etag.is_some() {
                *last_etag.lock().unwrap_or_else(|e| e.into_inner()) = answered_etag;
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    latencies.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One GET read to its end: (status or 0, body bytes, the ETag answered).
async fn get_to_end(
    http: &reqwest::Client,
    url: &str,
    gzip: bool,
    if_none_match: Option<&str>,
) -> (u16, u64, Option<String>) {
    let mut request = http.get(url);
    if gzip {
        request = request.header(reqwest::header::ACCEPT_ENCODING, "gzip");
    }
    if let Some(etag) = if_none_match {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(_) => return (0, 0, None),
    };
    let status = response.status().as_u16();
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut bytes = 0u64;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes += chunk.len() as u64,
            Ok(None) => break,
            Err(_) => return (0, bytes, None),
        }
    }
    (status, bytes, etag)
}

/// Runs the snapshot scenario to completion.
pub async fn run_snapshot(scenario: &SnapshotScenario) -> anyhow::Result<SnapshotReport> {
    if scenario.clients == 0 || scenario.clients > 4096 {
        bail!("clients must be between 1 and 4096");
    }
    if !(0.0..=1000.0).contains(&scenario.hold_rate) {
        bail!("hold rate must be between 0 and 1000 per second");
    }
    if !(0.0..=100_000.0).contains(&scenario.rate) {
        bail!("rate must be between 0 (closed loop) and 100000 per second");
    }
    if scenario.url.is_some() && scenario.hold_rate > 0.0 {
        bail!("background holds need the seat map, not --url");
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(scenario.clients)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let (url, event_id) = match (&scenario.url, &scenario.event_id) {
        (Some(url), _) => (url.clone(), None),
        (None, Some(id)) => (format!("{base}/v1/events/{id}/seatmap"), Some(id.clone())),
        (None, None) => {
            let id = create_stadium(&http, &base, &scenario.jwt_secret, 60).await?;
            (format!("{base}/v1/events/{id}/seatmap"), Some(id))
        }
    };
    // Warm-up: the first GET loads the map (one read of every seat) and renders it.
    let snapshot = match &event_id {
        Some(_) => Some(fetch_snapshot(&http, &url).await?),
        None => None,
    };
    let (status, body_size, _) = get_to_end(&http, &url, scenario.gzip, None).await;
    if !(200..300).contains(&status) {
        bail!("warm-up GET {url} answered {status}");
    }

    let counters = Arc::new(SnapshotCounters::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(scenario.duration_s);
    let bar = progress_bar(
        scenario.duration_s,
        "{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}",
    );

    // Background holds, open loop at the given rate, on distinct free seats.
    let holds = match (&snapshot, &event_id) {
        (Some(snapshot), Some(event_id)) if scenario.hold_rate > 0.0 => {
            let n = (scenario.hold_rate * scenario.duration_s as f64).ceil() as usize + 1;
            let seats = spread(&snapshot.available, n)?;
            let hold_url = format!("{base}/v1/events/{event_id}/holds");
            let (http, secret, rate) = (
                http.clone(),
                scenario.jwt_secret.clone(),
                scenario.hold_rate,
            );
            Some(tokio::spawn(async move {
                let mut answers = Vec::new();
                for (i, seat) in seats.into_iter().enumerate() {
                    let at = started + Duration::from_secs_f64(i as f64 / rate);
                    if at >= deadline {
                        break;
                    }
                    tokio::time::sleep_until(at.into()).await;
                    let token = fan_token(&secret, &format!("map-fan-{}-{i}", std::process::id()));
                    let (http, hold_url) = (http.clone(), hold_url.clone());
                    answers.push(tokio::spawn(async move {
                        match token {
                            Ok(token) => hold_seat(&http, &hold_url, &token, &seat).await.0,
                            Err(_) => 0,
                        }
                    }));
                }
                let (mut granted, mut failed) = (0u64, 0u64);
                for answer in answers {
                    match answer.await {
                        Ok(201) => granted += 1,
                        _ => failed += 1,
                    }
                }
                (granted, failed)
            }))
        }
        _ => None,
    };

    let requests = Requests {
        http: http.clone(),
        url: Arc::new(url.clone()),
        counters: counters.clone(),
        gzip: scenario.gzip,
        etag: scenario.etag,
        deadline,
    };
    let workers: Vec<_> = if scenario.rate > 0.0 {
        vec![tokio::spawn(open_loop(
            requests,
            scenario.rate,
            scenario.clients,
            started,
        ))]
    } else {
        (0..scenario.clients)
            .map(|_| tokio::spawn(closed_loop(requests.clone())))
            .collect()
    };
    let ticker = {
        let (bar, counters) = (bar.clone(), counters.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let elapsed = started.elapsed().as_secs_f64();
                let answered = counters.ok.load(Ordering::Relaxed)
                    + counters.not_modified.load(Ordering::Relaxed);
                bar.set_position(elapsed as u64);
                bar.set_message(format!(
                    "req/s {:.0} MiB/s {:.0} failed {}",
                    answered as f64 / elapsed,
                    counters.body_bytes.load(Ordering::Relaxed) as f64
                        / elapsed
                        / (1024.0 * 1024.0),
                    counters.failed.load(Ordering::Relaxed)
                        + counters.other_status.load(Ordering::Relaxed)
                ));
            }
        })
    };
    let mut latencies = histogram();
    for worker in workers {
        latencies.add(worker.await?)?;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    ticker.abort();
    bar.finish_and_clear();
    let (holds_granted, holds_failed) = match holds {
        Some(holds) => holds.await?,
        None => (0, 0),
    };
    Ok(SnapshotReport {
        url,
        event_id,
        elapsed_s,
        ok: counters.ok.load(Ordering::Relaxed),
        not_modified: counters.not_modified.load(Ordering::Relaxed),
        other_status: counters.other_status.load(Ordering::Relaxed),
        failed: counters.failed.load(Ordering::Relaxed),
        body_bytes: counters.body_bytes.load(Ordering::Relaxed),
        p50_ms: ms(&latencies, 0.50),
        p99_ms: ms(&latencies, 0.99),
        max_ms: latencies.max() as f64 / 1000.0,
        body_size: body_size as usize,
        seats: snapshot.as_ref().map(|s| s.seats),
        identity_size: snapshot.as_ref().map(|s| s.bytes),
        version_before: snapshot.as_ref().map(|s| s.version),
        holds_granted,
        holds_failed,
        rate: scenario.rate,
        waited_for_slot: counters.waited_for_slot.load(Ordering::Relaxed),
    })
}

// ---------------------------------------------------------------------------------------
// Change propagation over Server-Sent Events
// ---------------------------------------------------------------------------------------

/// Settings of the `sse` scenario.
#[derive(Debug, Clone)]
pub struct SseScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Watch this event; a new stadium (hold TTL 1 h) is created when `None`.
    pub event_id: Option<String>,
    pub clients: usize,
    /// Holds made (one distinct seat each).
    pub changes: usize,
    /// Holds per second.
    pub rate: f64,
    /// After the last hold's answer, how long to wait for the streams to deliver.
    pub settle_s: u64,
    /// Streams being opened at once.
    pub connect_concurrency: usize,
    /// Give up when not every stream answered 200 within this.
    pub connect_timeout_s: u64,
}

/// What an SSE run measured.
#[derive(Debug, Clone)]
pub struct SseReport {
    pub event_id: String,
    pub clients: usize,
    /// Streams that answered 200 on their first open.
    pub connected: usize,
    /// Stream opens that failed (no answer, or not 200), first opens and reopens.
    pub connect_failures: u64,
    pub connect_s: f64,
    pub changes: usize,
    /// Holds answered 201; only these are expected on the streams.
    pub granted: usize,
    pub hold_errors: usize,
    pub hold_p50_ms: f64,
    pub hold_p99_ms: f64,
    /// (stream, granted hold) pairs expected and delivered.
    pub pairs: u64,
    pub delivered: u64,
    /// Versions skipped between two consecutive messages of a stream.
    pub gaps: u64,
    pub resets: u64,
    pub reconnects: u64,
    pub messages: u64,
    /// Delay from the hold's 201 to delivery, over every delivered pair (a delivery before
    /// the 201 counts 0 and in `before_ack`).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub before_ack: u64,
    /// Delay from just before the hold was sent to delivery.
    pub send_p50_ms: f64,
    pub send_p99_ms: f64,
    pub send_max_ms: f64,
    /// Per hold: 201 to its first delivery on any stream (the server's pipeline), and from
    /// the first delivery to the last (the fan-out).
    pub first_p50_ms: f64,
    pub first_p99_ms: f64,
    pub spread_p50_ms: f64,
    pub spread_p99_ms: f64,
    pub elapsed_s: f64,
}

impl SseReport {
    pub fn missed(&self) -> u64 {
        self.pairs - self.delivered
    }
}

impl std::fmt::Display for SseReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "clients={} connected={} connect_failures={} connect_s={:.1} changes={} granted={} hold_errors={} hold_p50_ms={:.1} hold_p99_ms={:.1} pairs={} delivered={} missed={} gaps={} resets={} reconnects={} messages={} p50_ms={:.1} p99_ms={:.1} max_ms={:.1} before_ack={} send_p50_ms={:.1} send_p99_ms={:.1} send_max_ms={:.1} first_p50_ms={:.1} first_p99_ms={:.1} spread_p50_ms={:.1} spread_p99_ms={:.1} elapsed_s={:.1}",
            self.clients,
            self.connected,
            self.connect_failures,
            self.connect_s,
            self.changes,
            self.granted,
            self.hold_errors,
            self.hold_p50_ms,
            self.hold_p99_ms,
            self.pairs,
            self.delivered,
            self.missed(),
            self.gaps,
            self.resets,
            self.reconnects,
            self.messages,
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.before_ack,
            self.send_p50_ms,
            self.send_p99_ms,
            self.send_max_ms,
            self.first_p50_ms,
            self.first_p99_ms,
            self.spread_p50_ms,
            self.spread_p99_ms,
            self.elapsed_s,
        )
    }
}

/// One complete Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseMessage {
    /// `message` unless an `event:` field said otherwise.
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// Splits a byte stream into Server-Sent Events (the `text/event-stream` grammar: fields
/// `event`, `data`, `id`; comments start with `:`; a blank line ends an event; lines end
/// with LF, CRLF or CR followed by LF).
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
    /// Comment lines seen (keep-alives).
    pub comments: u64,
}

impl SseParser {
    /// Feeds bytes; completed events are appended to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseMessage>) {
        for &byte in bytes {
            if byte == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.line_done(&line, out);
                line.clear();
                self.line = line;
            } else {
                self.line.push(byte);
            }
        }
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseMessage>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(SseMessage {
                    event: self.event.take().unwrap_or_else(|| "message".into()),
                    id: self.id.take(),
                    data,
                });
            } else {
                self.event = None;
                self.id = None;
            }
            return;
        }
        if line[0] == b':' {
            self.comments += 1;
            return;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "id" => self.id = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

/// What one stream client saw.
#[derive(Debug)]
struct ClientOutcome {
    /// When each tracked change (by index) first arrived.
    arrivals: Vec<Option<Instant>>,
    connected: bool,
    connect_failures: u64,
    gaps: u64,
    resets: u64,
    reconnects: u64,
    messages: u64,
}

#[derive(Debug)]
struct StreamShared {
    url: String,
    /// Tracked seat id → change index.
    tracked: HashMap<String, usize>,
    delivered: AtomicU64,
    connected: AtomicUsize,
    gave_up: AtomicUsize,
    connect_failures: AtomicU64,
}

/// Opens the stream at `since` (and `Last-Event-ID` on reopen); `None` when it failed.
async fn open_stream(
    http: &reqwest::Client,
    url: &str,
    since: u64,
    last_event_id: Option<u64>,
) -> Option<reqwest::Response> {
    let mut request = http
        .get(format!("{url}?since={since}"))
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id.to_string());
    }
    match request.send().await {
        Ok(response) if response.status().as_u16() == 200 => Some(response),
        _ => None,
    }
}

/// One stream client: opens (under `permit` the first time), reads until `stop`.
async fn stream_client(
    http: reqwest::Client,
    shared: Arc<StreamShared>,
    since: u64,
    changes: usize,
    connect_permits: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) -> ClientOutcome {
    let mut outcome = ClientOutcome {
        arrivals: vec![None; changes],
        connected: false,
        connect_failures: 0,
        gaps: 0,
        resets: 0,
        reconnects: 0,
        messages: 0,
    };
    let mut last = since;
    let mut response = {
        let Ok(_permit) = connect_permits.acquire().await else {
            return outcome;
        };
        let mut opened = None;
        // Three tries: each failure is counted.
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            opened = open_stream(&http, &shared.url, last, None).await;
            if opened.is_some() {
                break;
            }
            outcome.connect_failures += 1;
            shared.connect_failures.fetch_add(1, Ordering::Relaxed);
        }
        match opened {
            Some(response) => response,
            None => {
                shared.gave_up.fetch_add(1, Ordering::Relaxed);
                return outcome;
            }
        }
    };
    outcome.connected = true;
    shared.connected.fetch_add(1, Ordering::Relaxed);
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            _ = stop.changed() => return outcome,
            chunk = response.chunk() => chunk,
        };
        let arrived = Instant::now();
        let mut reopen_at = None;
        match chunk {
            Ok(Some(bytes)) => parser.feed(&bytes, &mut events),
            // The stream ended or broke: reopen where it was (as a browser's EventSource).
            Ok(None) | Err(_) => reopen_at = Some(last),
        }
        for event in events.drain(..) {
            if event.event == "reset" {
                outcome.resets += 1;
                let version = serde_json::from_str::<Value>(&event.data)
                    .ok()
                    .and_then(|v| v["version"].as_u64())
                    .unwrap_or(last);
                last = version;
                reopen_at = Some(version);
                continue;
            }
            outcome.messages += 1;
            if let Some(version) = event.id.as_deref().and_then(|id| id.parse::<u64>().ok()) {
                if version > last + 1 {
                    outcome.gaps += version - last - 1;
                }
                last = last.max(version);
            }
            let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            for change in data["changes"].as_array().into_iter().flatten() {
                let index = change["seatId"]
                    .as_str()
                    .and_then(|seat| shared.tracked.get(seat));
                if let Some(&index) = index
                    && outcome.arrivals[index].is_none()
                {
                    outcome.arrivals[index] = Some(arrived);
                    shared.delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if let Some(since) = reopen_at {
            outcome.reconnects += 1;
            loop {
                if *stop.borrow() {
                    return outcome;
                }
                match open_stream(&http, &shared.url, since, Some(since)).await {
                    Some(reopened) => {
                        response = reopened;
                        parser = SseParser::default();
                        break;
                    }
                    None => {
                        outcome.connect_failures += 1;
                        shared.connect_failures.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        }
    }
}

/// Runs the SSE propagation scenario to completion.
pub async fn run_sse(scenario: &SseScenario) -> anyhow::Result<SseReport> {
    if scenario.clients == 0 || scenario.clients > 18_000 {
        bail!("clients must be between 1 and 18000");
    }
    if scenario.changes == 0 || scenario.changes > 50_000 {
        bail!("changes must be between 1 and 50000");
    }
    if !(0.1..=1000.0).contains(&scenario.rate) {
        bail!("rate must be between 0.1 and 1000 per second");
    }
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let api = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(30))
        .build()?;
    // Streams: no overall timeout (they are meant to stay open).
    let streams = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(0)
        .build()?;
    let event_id = match &scenario.event_id {
        Some(id) => id.clone(),
        None => create_stadium(&api, &base, &scenario.jwt_secret, 3600).await?,
    };
    let snapshot = fetch_snapshot(&api, &format!("{base}/v1/events/{event_id}/seatmap")).await?;
    let seats = spread(&snapshot.available, scenario.changes)?;
    let tokens: Vec<String> = (0..scenario.changes)
        .map(|i| {
            fan_token(
                &scenario.jwt_secret,
                &format!("sse-fan-{}-{i}", std::process::id()),
            )
        })
        .collect::<anyhow::Result<_>>()?;
    let shared = Arc::new(StreamShared {
        url: format!("{base}/v1/events/{event_id}/seatmap/stream"),
        tracked: seats
            .iter()
            .enumerate()
            .map(|(i, seat)| (seat.clone(), i))
            .collect(),
        delivered: AtomicU64::new(0),
        connected: AtomicUsize::new(0),
        gave_up: AtomicUsize::new(0),
        connect_failures: AtomicU64::new(0),
    });

    // Open every stream, then wait until each answered (or gave up).
    let started = Instant::now();
    let (stop_tx, stop_rx) = watch::channel(false);
    let permits = Arc::new(Semaphore::new(scenario.connect_concurrency.max(1)));
    let clients: Vec<_> = (0..scenario.clients)
        .map(|_| {
            tokio::spawn(stream_client(
                streams.clone(),
                shared.clone(),
                snapshot.version,
                scenario.changes,
                permits.clone(),
                stop_rx.clone(),
            ))
        })
        .collect();
    let bar = progress_bar(
        scenario.clients as u64,
        "{elapsed_precise} [{bar:30}] {pos}/{len} streams open {msg}",
    );
    let connect_deadline = started + Duration::from_secs(scenario.connect_timeout_s);
    loop {
        let connected = shared.connected.load(Ordering::Relaxed);
        let gave_up = shared.gave_up.load(Ordering::Relaxed);
        bar.set_position(connected as u64);
        bar.set_message(format!(
            "failures {}",
            shared.connect_failures.load(Ordering::Relaxed)
        ));
        if connected + gave_up >= scenario.clients {
            break;
        }
        if Instant::now() >= connect_deadline {
            let _ = stop_tx.send(true);
            bail!(
                "only {connected} of {} streams open after {} s ({gave_up} gave up)",
                scenario.clients,
                scenario.connect_timeout_s
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    let connect_s = started.elapsed().as_secs_f64();
    let connected = shared.connected.load(Ordering::Relaxed);
    // The server subscribes each stream right after answering; `since` covers any race.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The holds, open loop at the rate.
    let hold_url = Arc::new(format!("{base}/v1/events/{event_id}/holds"));
    let holds_started = Instant::now();
    let bar = progress_bar(
        scenario.changes as u64,
        "{elapsed_precise} [{bar:30}] {pos}/{len} holds {msg}",
    );
    let mut holds = Vec::with_capacity(scenario.changes);
    for (i, (seat, token)) in seats.iter().zip(&tokens).enumerate() {
        let at = holds_started + Duration::from_secs_f64(i as f64 / scenario.rate);
        tokio::time::sleep_until(at.into()).await;
        let (api, hold_url, seat, token) =
            (api.clone(), hold_url.clone(), seat.clone(), token.clone());
        holds.push(tokio::spawn(async move {
            hold_seat(&api, &hold_url, &token, &seat).await
        }));
        bar.set_position(i as u64 + 1);
        bar.set_message(format!(
            "delivered {} of {}",
            shared.delivered.load(Ordering::Relaxed),
            connected * (i + 1)
        ));
    }
    let mut answers = Vec::with_capacity(holds.len());
    for hold in holds {
        answers.push(hold.await?);
    }
    bar.finish_and_clear();
    let granted: Vec<bool> = answers
        .iter()
        .map(|(status, _, _)| *status == 201)
        .collect();
    let granted_n = granted.iter().filter(|g| **g).count();
    let mut hold_latency = histogram();
    for (_, sent, answered) in &answers {
        let _ = hold_latency.record(answered.duration_since(*sent).as_micros() as u64);
    }

    // Wait until every open stream delivered every granted hold, or the settle time.
    let expected = (connected * granted_n) as u64;
    let settle_deadline = Instant::now() + Duration::from_secs(scenario.settle_s);
    while shared.delivered.load(Ordering::Relaxed) < expected && Instant::now() < settle_deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop_tx.send(true);
    let mut outcomes = Vec::with_capacity(clients.len());
    for client in clients {
        outcomes.push(client.await?);
    }
    let elapsed_s = started.elapsed().as_secs_f64();

    let (mut from_ack, mut from_send) = (histogram(), histogram());
    let (mut first, mut spread_ms) = (histogram(), histogram());
    let mut before_ack = 0u64;
    let mut delivered = 0u64;
    let mut firsts: Vec<Option<Instant>> = vec![None; scenario.changes];
    let mut lasts: Vec<Option<Instant>> = vec![None; scenario.changes];
    for outcome in &outcomes {
        for (i, arrival) in outcome.arrivals.iter().enumerate() {
            let (Some(arrival), true) = (arrival, granted[i]) else {
                continue;
            };
            delivered += 1;
            let (_, sent, acked) = answers[i];
            match arrival.checked_duration_since(acked) {
                Some(delay) => {
                    let _ = from_ack.record(delay.as_micros() as u64);
                }
                None => {
                    before_ack += 1;
                    let _ = from_ack.record(0);
                }
            }
            let _ = from_send.record(arrival.saturating_duration_since(sent).as_micros() as u64);
            firsts[i] = Some(firsts[i].map_or(*arrival, |f: Instant| f.min(*arrival)));
            lasts[i] = Some(lasts[i].map_or(*arrival, |l: Instant| l.max(*arrival)));
        }
    }
    for i in 0..scenario.changes {
        if let (Some(f), Some(l)) = (firsts[i], lasts[i]) {
            let (_, _, acked) = answers[i];
            let _ = first.record(f.saturating_duration_since(acked).as_micros() as u64);
            let _ = spread_ms.record(l.duration_since(f).as_micros() as u64);
        }
    }
    let sum = |f: fn(&ClientOutcome) -> u64| outcomes.iter().map(f).sum::<u64>();
    Ok(SseReport {
        event_id,
        clients: scenario.clients,
        connected,
        connect_failures: sum(|o| o.connect_failures),
        connect_s,
        changes: scenario.changes,
        granted: granted_n,
        hold_errors: scenario.changes - granted_n,
        hold_p50_ms: ms(&hold_latency, 0.50),
        hold_p99_ms: ms(&hold_latency, 0.99),
        // Every stream, open or not, was owed every granted hold.
        pairs: (scenario.clients * granted_n) as u64,
        delivered,
        gaps: sum(|o| o.gaps),
        resets: sum(|o| o.resets),
        reconnects: sum(|o| o.reconnects),
        messages: sum(|o| o.messages),
        p50_ms: ms(&from_ack, 0.50),
        p99_ms: ms(&from_ack, 0.99),
        max_ms: from_ack.max() as f64 / 1000.0,
        before_ack,
        send_p50_ms: ms(&from_send, 0.50),
        send_p99_ms: ms(&from_send, 0.99),
        send_max_ms: from_send.max() as f64 / 1000.0,
        first_p50_ms: ms(&first, 0.50),
        first_p99_ms: ms(&first, 0.99),
        spread_p50_ms: ms(&spread_ms, 0.50),
        spread_p99_ms: ms(&spread_ms, 0.99),
        elapsed_s,
    })
}

// ---------------------------------------------------------------------------------------
// The bare mirror (baseline)
// ---------------------------------------------------------------------------------------

/// The snapshot bytes the mirror serves: one real answer, copied.
#[derive(Debug, Clone)]
pub struct MirrorSource {
    pub identity: Bytes,
    pub gzip: Bytes,
    pub etag: String,
}

impl MirrorSource {
    /// Copies the snapshot at `url` (a real server's `/v1/events/{id}/seatmap`), both
    /// encodings as they come over the wire.
    pub async fn fetch(url: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?;
        let identity = http.get(url).send().await?.error_for_status()?;
        let etag = identity
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("\"0\"")
            .to_owned();
        let identity = identity.bytes().await?;
        let gzip = http
            .get(url)
            .header(reqwest::header::ACCEPT_ENCODING, "gzip")
            .header(reqwest::header::IF_NONE_MATCH, "\"never\"")
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        Ok(Self {
            identity,
            gzip,
            etag,
        })
    }
}

#[derive(Debug)]
struct MirrorState {
    source: MirrorSource,
    /// Version of the last broadcast; the lock also orders the broadcasts.
    version: Mutex<u64>,
    frames: broadcast::Sender<Bytes>,
    nodelay: bool,
}

/// Serves the mirror on `listener` until the process ends (see the module docs). `nodelay`
/// sets TCP_NODELAY on accepted sockets (axum::serve, like `boxoffice serve`, does not).
pub async fn serve_mirror(
    listener: tokio::net::TcpListener,
    source: MirrorSource,
    nodelay: bool,
) -> std::io::Result<()> {
    let state = Arc::new(MirrorState {
        source,
        version: Mutex::new(0),
        frames: broadcast::channel(1024).0,
        nodelay,
    });
    loop {
        let (socket, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors and the like: wait, as axum::serve does.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = mirror_connection(socket, state).await;
        });
    }
}

/// One parsed request head.
#[derive(Debug, PartialEq, Eq)]
struct RequestHead {
    method: String,
    path: String,
    /// The `since` query parameter, if any.
    since: Option<u64>,
    content_length: usize,
    if_none_match: Option<String>,
    gzip: bool,
    close: bool,
}

fn parse_head(head: &str) -> Option<RequestHead> {
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let target = request_line.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let since = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("since="))
        .and_then(|v| v.parse().ok());
    let mut parsed = RequestHead {
        method,
        path: path.to_owned(),
        since,
        content_length: 0,
        if_none_match: None,
        gzip: false,
        close: false,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => parsed.content_length = value.parse().ok()?,
            "if-none-match" => parsed.if_none_match = Some(value.to_owned()),
            "accept-encoding" => {
                parsed.gzip = value
                    .split(',')
                    .any(|coding| coding.trim().eq_ignore_ascii_case("gzip"))
            }
            "connection" => parsed.close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    Some(parsed)
}

async fn respond(
    socket: &mut tokio::net::TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    // Head and body in one gathered write, as hyper does: two writes would let Nagle hold
    // the body's last segment back until the head is acknowledged.
    let mut slices = [IoSlice::new(head.as_bytes()), IoSlice::new(body)];
    let mut remaining = &mut slices[..];
    while !remaining.is_empty() {
        let written = socket.write_vectored(remaining).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut remaining, written);
    }
    Ok(())
}

async fn mirror_connection(
    mut socket: tokio::net::TcpStream,
    state: Arc<MirrorState>,
) -> std::io::Result<()> {
    if state.nodelay {
        socket.set_nodelay(true)?;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut read = [0u8; 8192];
    loop {
        let head_end = loop {
            if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break pos + 4;
            }
            if buf.len() > 64 * 1024 {
                return Ok(());
            }
            let n = socket.read(&mut read).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&read[..n]);
        };
        let Some(head) = std::str::from_utf8(&buf[..head_end])
            .ok()
            .and_then(parse_head)
        else {
            return respond(&mut socket, "400 Bad Request", &[], b"").await;
        };
        while buf.len() < head_end + head.content_length {
            let n = socket.read(&mut read).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&read[..n]);
        }
        let body: Vec<u8> = buf
            .drain(..head_end + head.content_length)
            .skip(head_end)
            .collect();
        let source = &state.source;
        match (head.method.as_str(), head.path.as_str()) {
            ("GET", path) if path.ends_with("/seatmap/stream") => {
                return mirror_stream(socket, &state, head.since).await;
            }
            ("GET", path) if path.ends_with("/seatmap") => {
                let common = [
                    ("content-type", "application/json"),
                    ("etag", source.etag.as_str()),
                    ("cache-control", "no-cache"),
                    ("vary", "accept-encoding"),
                ];
                if head.if_none_match.as_deref() == Some(source.etag.as_str()) {
                    respond(&mut socket, "304 Not Modified", &common[1..3], b"").await?;
                } else if head.gzip {
                    let mut headers = common.to_vec();
                    headers.push(("content-encoding", "gzip"));
                    respond(&mut socket, "200 OK", &headers, &source.gzip).await?;
                } else {
                    respond(&mut socket, "200 OK", &common, &source.identity).await?;
                }
            }
            ("POST", path) if path.ends_with("/holds") => {
                let seats: Vec<String> = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| {
                        v["seatIds"].as_array().map(|ids| {
                            ids.iter()
                                .filter_map(|id| id.as_str().map(str::to_owned))
                                .collect()
                        })
                    })
                    .unwrap_or_default();
                let event_id = path
                    .trim_start_matches("/v1/events/")
                    .trim_end_matches("/holds");
                let version = {
                    let mut version = state.version.lock().await;
                    *version += 1;
                    let v = *version;
                    let changes: Vec<Value> = seats
                        .iter()
                        .map(|seat| json!({"seatId": seat, "status": "HELD", "version": v}))
                        .collect();
                    let data = json!({"eventId": event_id, "fromVersion": v - 1,
                                      "toVersion": v, "changes": changes, "tiers": []});
                    let _ = state
                        .frames
                        .send(Bytes::from(format!("id: {v}\ndata: {data}\n\n")));
                    v
                };
                let answer = json!({"holdId": format!("mirror-{version}"), "seatIds": seats});
                respond(
                    &mut socket,
                    "201 Created",
                    &[("content-type", "application/json")],
                    answer.to_string().as_bytes(),
                )
                .await?;
            }
            _ => respond(&mut socket, "404 Not Found", &[], b"").await?,
        }
        if head.close {
            return Ok(());
        }
    }
}

/// A `text/event-stream` answer (chunked) fed by the broadcast until the client goes away.
/// The mirror keeps no log: a stream that opens while no other is open sets the version
/// to its `since` (the version of the copied snapshot), so that a new run's streams see
/// versions following their snapshot, as they would from a server. Each stream watches its
/// socket so that it closes (and stops counting as open) as soon as its client is gone.
async fn mirror_stream(
    mut socket: tokio::net::TcpStream,
    state: &MirrorState,
    since: Option<u64>,
) -> std::io::Result<()> {
    let mut frames = {
        let mut version = state.version.lock().await;
        if let Some(since) = since
            && state.frames.receiver_count() == 0
        {
            *version = since;
        }
        state.frames.subscribe()
    };
    let (mut reader, mut socket) = socket.split();
    let mut ignored = [0u8; 512];
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await?;
    let mut keep_alive = tokio::time::interval(Duration::from_secs(15));
    keep_alive.tick().await;
    loop {
        let frame = tokio::select! {
            frame = frames.recv() => match frame {
                Ok(frame) => frame,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            _ = keep_alive.tick() => Bytes::from_static(b":\n\n"),
            read = reader.read(&mut ignored) => match read {
                Ok(0) | Err(_) => return Ok(()),
                Ok(_) => continue,
            },
        };
        let mut chunk = format!("{:x}\r\n", frame.len()).into_bytes();
        chunk.extend_from_slice(&frame);
        chunk.extend_from_slice(b"\r\n");
        socket.write_all(&chunk).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks_and_line_endings() {
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        parser.feed(b": keep-alive\n\nid: 7\nda", &mut out);
        assert!(out.is_empty());
        parser.feed(
            b"ta: {\"a\":1}\r\n\r\nevent: reset\ndata: {\"version\":9}\n",
            &mut out,
        );
        assert_eq!(
            out,
            vec![SseMessage {
                event: "message".into(),
                id: Some("7".into()),
                data: "{\"a\":1}".into()
            }]
        );
        parser.feed(b"\ndata: a\ndata:b\n\n", &mut out);
        assert_eq!(out[1].event, "reset");
        assert_eq!(out[1].data, "{\"version\":9}");
        assert_eq!(out[1].id, None);
        assert_eq!(out[2].data, "a\nb");
        assert_eq!(parser.comments, 1);
    }

    #[test]
    fn request_heads() {
        let head = parse_head(
            "POST /v1/events/e1/holds?x=1 HTTP/1.1\r\nContent-Length: 12\r\nAccept-Encoding: br, gzip\r\nIf-None-Match: \"3\"\r\n\r\n",
        )
        .unwrap();
        assert_eq!(head.method, "POST");
        assert_eq!(head.path, "/v1/events/e1/holds");
        assert_eq!(head.since, None);
        let stream = parse_head("GET /v1/events/e/seatmap/stream?x=&since=42 HTTP/1.1\r\n\r\n");
        assert_eq!(stream.unwrap().since, Some(42));
        assert_eq!(head.content_length, 12);
        assert!(head.gzip);
        assert_eq!(head.if_none_match.as_deref(), Some("\"3\""));
        assert!(parse_head("GET / HTTP/1.1\r\ncontent-length: x\r\n\r\n").is_none());
    }

    #[test]
    fn spread_takes_every_section() {
        let seats: Vec<String> = (0..100)
            .map(|i| format!("S{}-{}", i / 10, i % 10))
            .collect();
        let picked = spread(&seats, 10).unwrap();
        assert_eq!(picked.len(), 10);
        assert_eq!(picked[0], "S0-0");
        assert_eq!(picked[9], "S9-0");
        assert!(spread(&seats, 101).is_err());
    }

    /// Both scenarios against the mirror, end to end on loopback.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn scenarios_against_the_mirror() {
        let map = json!({"eventId": "m", "version": 4, "tiers": [],
            "seats": (0..50).map(|i| json!({"seatId": format!("A-1-{i}"), "status": "AVAILABLE"})).collect::<Vec<_>>()});
        let source = MirrorSource {
            identity: Bytes::from(map.to_string()),
            gzip: Bytes::from_static(b"not really gzip"),
            etag: "\"4\"".into(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(serve_mirror(listener, source, false));

        // Twice: the second run's streams must see versions right after their snapshot's.
        for _ in 0..2 {
            let report = run_sse(&SseScenario {
                base_url: base.clone(),
                jwt_secret: "test-secret-0123456789".into(),
                event_id: Some("m".into()),
                clients: 20,
                changes: 10,
                rate: 200.0,
                settle_s: 5,
                connect_concurrency: 8,
                connect_timeout_s: 10,
            })
            .await
            .unwrap();
            assert_eq!(report.connected, 20, "{report}");
            assert_eq!(report.granted, 10, "{report}");
            assert_eq!(report.pairs, 200, "{report}");
            assert_eq!(report.missed(), 0, "{report}");
            assert_eq!(
                report.gaps + report.resets + report.reconnects,
                0,
                "{report}"
            );
            assert_eq!(report.messages, 200, "{report}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }

        for (gzip, etag) in [(false, false), (true, false), (false, true)] {
            let report = run_snapshot(&SnapshotScenario {
                base_url: base.clone(),
                jwt_secret: "test-secret-0123456789".into(),
                event_id: Some("m".into()),
                url: None,
                clients: 4,
                duration_s: 1,
                gzip,
                etag,
                hold_rate: if etag { 0.0 } else { 5.0 },
                rate: if gzip { 200.0 } else { 0.0 },
            })
            .await
            .unwrap();
            assert!(report.ok + report.not_modified > 0, "{report}");
            assert_eq!(report.failed + report.other_status, 0, "{report}");
            assert_eq!(report.seats, Some(50));
            if etag {
                assert!(report.not_modified > report.ok, "{report}");
            } else {
                assert_eq!(report.holds_failed, 0, "{report}");
                assert!(report.holds_granted >= 4, "{report}");
            }
            if gzip {
                assert_eq!(report.body_size, 15);
            }
        }
    }
}
