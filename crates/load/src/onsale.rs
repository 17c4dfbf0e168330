//! The `onsale` scenario (`boxoffice load onsale`, issue 6, first part): an open-loop
//! on-sale simulator driving a running server over HTTP.
//!
//! N accounts arrive over T seconds (default 2,000,000 over 300 s, both multiplied by
//! `--scale`), account `i` at `start + i·T/N`. Each account is its own tokio task, started at
//! its scheduled time whatever the others are doing; at most `--max-in-flight` run at once,
//! and an arrival that finds the cap full waits for a free slot and is counted as
//! `delayed_by_cap` — its latencies still count from its scheduled time, it is never
//! dropped. Per account, as a fan would:
//!
//! 1. join the waiting room (`POST /v1/events/{id}/queue`, `Idempotency-Key`), then poll
//!    `queue/status` with the `Queue-Ticket`, sleeping `Retry-After` between polls, until
//!    `ADMITTED` (at most [`QUEUE_WAIT_MAX`] after arrival, else `gave_up`);
//! 2. pick 1–6 seats (capped at the event's `maxSeatsPerHold`) in a section drawn with a
//!    Zipf-like skew (section k with weight 1/(k+1): the best sections first), held with
//!    `{"bestAvailable": {"quantity", "section"}}` and the `Admission-Token`; a 409 moves to
//!    the next section, [`HOLD_TRIES`] tries in all, the last one in any section (best
//!    available anywhere), then `no_seats`; a 429 (the event's
//!    writer is full) is waited out as `Retry-After` says and asked again, up to
//!    [`HOLD_429_RETRIES_MAX`] times (a checkout's 429 too, with the same key);
//! 3. abandon a share (`--abandon`): half release the hold (`DELETE /v1/holds/{id}`), half
//!    walk away and let it expire;
//! 4. the others check out with a card drawn from `--cards` (`pm_card_visa`,
//!    `pm_card_chargeDeclined`, `pm_card_threeDSecure2Required` — then GET the `nextAction`
//!    URL, the simulator's approval page, as a shopper would —, `pm_sim_slow`,
//!    `pm_sim_timeout`), then poll `GET /v1/orders/{id}` until `CONFIRMED` or `CANCELLED`
//!    (at most [`ORDER_WAIT_MAX`], else `unsettled`).
//!
//! A fan refused seats in every try (`SEATS_UNAVAILABLE`: nothing of its size is free now,
//! but the house is not sold) does what the answer allows: it joins the event's waiting
//! list for its party (any seats; leaving the room first, so its slot goes to the next fan)
//! and looks at its entry every [`WAITLIST_POLL`] until it is offered seats, which it then
//! treats as its hold (abandon or pay as planned); it goes home when the event page shows
//! nothing held and fewer seats free than its party, or after [`WAITLIST_WAIT_MAX`]. A
//! created event's offers last the hold TTL.
//!
//! A fan who ends without a confirmed order (declined, no seats) leaves the room
//! (`DELETE /v1/events/{id}/queue`) as a closed page would, so its active-shopper slot goes
//! to the next fan; a confirmed order ends the admission on the server's side.
//!
//! Unless `--event-id` is given, the event is created: `--sections` sections of 50 rows ×
//! 100 seats (section 0 the best and dearest), `holdTtlSeconds` 30 (abandoned holds recycle
//! during the run), a waiting room with `maxActiveShoppers` = `--max-active` or by default
//! `clamp(100,000 × scale, 200, 10,000)` (200 for a 0.001 run, 1,000 at 0.01, the API's
//! default 10,000 from 0.1 up: enough slots that a quick run is paced by the release
//! controller rather than by fans who walked away holding a slot for the hold TTL).
//!
//! **Two queues at once** (`--presale-share 0.3`, a created event with its waiting room on):
//! the event gets a code phase [`PRESALE_PHASE`] selling the best half of the sections
//! ([`presale_sections`]) with its own waiting-room queue (`maxActiveShoppers` the share of
//! the event's, at least 1), and the general phase [`GENERAL_PHASE`] selling everything, both
//! open at on-sale. Codes are generated (`POST …/phases/fanclub/codes`, each admitting up to
//! [`PRESALE_CODE_USES`] accounts); that share of the fans ([`in_presale`], spread evenly
//! over the arrivals) redeems one, queues in the lane (`?phaseId=fanclub`), holds in the
//! lane's sections and leaves the lane's queue; the others queue in the general room as
//! before. The report adds `lanes`: per lane the fans, `admitted`, `held` (the visit held
//! seats at some point: sold, declined, abandoned, expired or unsettled) and `sold`.
//!
//! Measured: latency histograms per step (join from the scheduled arrival; status, hold,
//! checkout per request; order_final from the checkout request to the final order status;
//! queue_wait from arrival to admission; e2e from the scheduled arrival to the confirmed
//! order), answers by step and status code, outcomes per account, and a per-second time
//! series. Errors are 5xx answers and transport failures, every one counted and the first
//! [`ERRORS_LISTED_MAX`] listed; other unexpected answers are counted as `unexpected` and
//! listed too.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_token::mint_token;
use hdrhistogram::Histogram;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Accounts of the full-size on-sale (`--scale 1`).
pub const FULL_ACCOUNTS: f64 = 2_000_000.0;
/// Arrival window of the full-size on-sale, seconds.
pub const FULL_ARRIVAL_S: f64 = 300.0;
/// Longest an account waits in the room (from its arrival) before giving up.
pub const QUEUE_WAIT_MAX: Duration = Duration::from_secs(600);
/// Longest an account polls its order for a final status.
pub const ORDER_WAIT_MAX: Duration = Duration::from_secs(90);
/// Longest a fan refused seats waits on the event's waiting list for an offer (from its
/// join) before it goes home.
pub const WAITLIST_WAIT_MAX: Duration = Duration::from_secs(600);
/// Between two looks at a waiting-list entry (up to 2 s of jitter is added per look). An
/// entry's read counts the entries before it in the store, so thousands of fans looking
/// every second or two would take the store from the checkouts; an offer lasts the hold TTL,
/// so a look every 10 s costs a fan at most a sixth of a 60 s offer.
pub const WAITLIST_POLL: Duration = Duration::from_secs(10);
/// Sections tried per hold (the drawn one, then the next ones).
pub const HOLD_TRIES: u32 = 3;
/// Times a fan asks again after a 429 (the writer's queue is full), waiting `Retry-After`
/// each time, before giving up: a 429 is not an answer about seats.
pub const HOLD_429_RETRIES_MAX: u32 = 120;
/// The longest `Retry-After` a fan waits as asked (the server asks for more the more it
/// refuses; it caps its own ask at 30 s).
pub const RETRY_AFTER_HONOURED_MAX_S: u64 = 60;
/// Errors and unexpected answers listed in the report (all are counted).
pub const ERRORS_LISTED_MAX: usize = 50;
/// Hold TTL of the created event, unless the scenario says otherwise.
pub const HOLD_TTL_S: u32 = 30;
/// Admission TTL of the created event: a fan that vanished frees its slot after this.
pub const ADMISSION_TTL_S: u32 = 300;
/// The presale lane of `--presale-share` (a code phase with its own queue).
pub const PRESALE_PHASE: &str = "fanclub";
/// The general sale of `--presale-share` (an open phase: the event's general queue).
pub const GENERAL_PHASE: &str = "general";
/// Accounts one generated presale code admits (the API's most).
pub const PRESALE_CODE_USES: u64 = 100_000;
const ROWS: u32 = 50;
const SEATS_PER_ROW: u32 = 100;
const TOKEN_TTL_S: u64 = 6 * 3600;
const ORDER_POLL: Duration = Duration::from_millis(250);
/// Requests on the wire at most where the open-file limit cannot be read.
const SOCKETS_DEFAULT: usize = 4_096;
/// Attempts at joining when answered 429/503/transport error (each still counted).
const JOIN_ATTEMPTS: u32 = 5;
/// Retries of one request after a transport error or a 502/503/504 (same request, same
/// idempotency key); the pauses (0.25 s doubling up to 2 s) add up to ~13 s, longer than a
/// server or database restart takes.
pub const RETRIES_MAX: u32 = 8;
const RETRY_PAUSE_FIRST: Duration = Duration::from_millis(250);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

/// A test card of the payment simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Card {
    Visa,
    Declined,
    ThreeDs,
    Slow,
    Timeout,
}

impl Card {
    pub const ALL: [Card; 5] = [
        Card::Visa,
        Card::Declined,
        Card::ThreeDs,
        Card::Slow,
        Card::Timeout,
    ];

    /// The name used in `--cards`.
    pub fn name(self) -> &'static str {
        match self {
            Card::Visa => "visa",
            Card::Declined => "declined",
            Card::ThreeDs => "3ds",
            Card::Slow => "slow",
            Card::Timeout => "timeout",
        }
    }

    /// The payment method token sent at checkout.
    pub fn token(self) -> &'static str {
        match self {
            Card::Visa => "pm_card_visa",
            Card::Declined => "pm_card_chargeDeclined",
            Card::ThreeDs => "pm_card_threeDSecure2Required",
            Card::Slow => "pm_sim_slow",
            Card::Timeout => "pm_sim_timeout",
        }
    }
}

/// Weighted test cards, `visa=70,declined=10,3ds=10,slow=5,timeout=5`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardMix {
    weights: Vec<(Card, u32)>,
    total: u32,
}

impl Default for CardMix {
    fn default() -> Self {
        "visa=70,declined=10,3ds=10,slow=5,timeout=5"
            .parse()
            .expect("default card mix")
    }
}

impl FromStr for CardMix {
    type Err = anyhow::Error;

    fn from_str(raw: &str) -> anyhow::Result<Self> {
        let mut weights: Vec<(Card, u32)> = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .with_context(|| format!("card mix entry {part:?}: use name=weight"))?;
            let card = Card::ALL
                .into_iter()
                .find(|c| c.name() == name.trim())
                .with_context(|| {
                    format!("unknown card {name:?}: use visa, declined, 3ds, slow or timeout")
                })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .with_context(|| format!("card mix weight {weight:?} is not a whole number"))?;
            if weight > 1_000_000 {
                bail!("card mix weight {weight} is too large");
            }
            if weights.iter().any(|(c, _)| *c == card) {
                bail!("card {name:?} appears twice in the mix");
            }
            weights.push((card, weight));
        }
        let total = weights.iter().map(|(_, w)| w).sum();
        if total == 0 {
            bail!("the card mix needs at least one positive weight");
        }
        Ok(Self { weights, total })
    }
}

impl CardMix {
    /// The card at `roll`, `0 <= roll < total()`.
    pub fn pick(&self, roll: u32) -> Card {
        let mut roll = roll % self.total;
        for (card, weight) in &self.weights {
            if roll < *weight {
                return *card;
            }
            roll -= weight;
        }
        self.weights[0].0
    }

    pub fn total(&self) -> u32 {
        self.total
    }

    /// `name=weight` pairs, as parsed.
    pub fn describe(&self) -> String {
        self.weights
            .iter()
            .map(|(c, w)| format!("{}={w}", c.name()))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Section index (0 = best) for a uniform `u` in `[0, 1)`: Zipf-like, weight 1/(k+1).
pub fn pick_section(u: f64, sections: u32) -> u32 {
    let n = sections.max(1);
    let harmonic: f64 = (1..=n).map(|k| 1.0 / f64::from(k)).sum();
    let mut target = u.clamp(0.0, 1.0) * harmonic;
    for k in 0..n {
        target -= 1.0 / f64::from(k + 1);
        if target < 0.0 {
            return k;
        }
    }
    n - 1
}

/// When account `i` of `n` arrives, after the start: evenly spread over `arrival_s`.
pub fn arrival_offset(i: u64, n: u64, arrival_s: f64) -> Duration {
    if n == 0 || arrival_s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(arrival_s * i as f64 / n as f64)
}

/// Whether fan `i` (0-based arrival index) is a presale fan when `share` of the fans are:
/// exactly `floor(n × share)` of the first `n` fans are, spread evenly over the arrivals.
pub fn in_presale(i: u64, share: f64) -> bool {
    if share <= 0.0 {
        return false;
    }
    ((i + 1) as f64 * share).floor() > (i as f64 * share).floor()
}

/// How many of the best sections the presale lane sells: the best half, at least one.
pub fn presale_sections(sections: u32) -> u32 {
    sections.div_ceil(2).max(1)
}

/// Default active-shopper cap for a scale (see the module docs).
pub fn default_max_active(scale: f64) -> u32 {
    (100_000.0 * scale).round().clamp(200.0, 10_000.0) as u32
}

/// Settings of the `onsale` scenario.
#[derive(Debug, Clone)]
pub struct OnsaleScenario {
    pub base_url: String,
    /// More nodes of the same store: each fan talks to one of `base_url` and these (chosen
    /// by its account), so the requests for the event are spread over every node.
    pub other_base_urls: Vec<String>,
    pub jwt_secret: String,
    pub scale: f64,
    /// Overrides `2,000,000 × scale`.
    pub accounts: Option<u64>,
    /// Overrides `300 × scale`.
    pub arrival_s: Option<f64>,
    /// Share of holds abandoned (half released, half left to expire).
    pub abandon: f64,
    pub cards: CardMix,
    pub sections: u32,
    pub max_in_flight: usize,
    /// Overrides [`default_max_active`] for a created event.
    pub max_active: Option<u32>,
    pub event_id: Option<String>,
    /// Hold TTL of a created event (seconds).
    pub hold_ttl_s: u32,
    /// Create the event with its waiting room on (fans queue first); off, fans go straight
    /// to the seats (the full on-sale benchmark of the write path).
    pub waiting_room: bool,
    /// Fans refused seats wait on the event's waiting list (else they go home at once).
    pub refused_fans_wait: bool,
    /// Where the caller writes the JSON report ([`OnsaleReport::write_files`]).
    pub report: std::path::PathBuf,
    /// The created event's queue policy and release settings.
    pub door: DoorSettings,
    /// Share of fans (0-1) who queue in a presale lane of their own (see the module docs);
    /// 0: one general queue, as before.
    pub presale_share: f64,
}

/// The waiting room of a created event: its policy and the release controller's settings
/// (`None`: the API's defaults).
#[derive(Debug, Clone, Default)]
pub struct DoorSettings {
    /// `random` instead of `fifo`: the event goes on sale when the last fan has arrived, so
    /// every fan joins before on-sale and the queue is shuffled once, at on-sale.
    pub random: bool,
    pub start_release_per_s: Option<u32>,
    pub max_release_per_s: Option<u32>,
    pub target_hold_p99_ms: Option<u32>,
}

impl OnsaleScenario {
    pub fn accounts(&self) -> u64 {
        self.accounts
            .unwrap_or_else(|| (FULL_ACCOUNTS * self.scale).round().max(1.0) as u64)
    }

    pub fn arrival_s(&self) -> f64 {
        self.arrival_s.unwrap_or(FULL_ARRIVAL_S * self.scale)
    }
}

/// Latency measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Join,
    Status,
    Hold,
    Checkout,
    OrderFinal,
    QueueWait,
    EndToEnd,
}

const METRICS: [Metric; 7] = [
    Metric::Join,
    Metric::Status,
    Metric::Hold,
    Metric::Checkout,
    Metric::OrderFinal,
    Metric::QueueWait,
    Metric::EndToEnd,
];

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::Join => "join",
            Metric::Status => "status",
            Metric::Hold => "hold",
            Metric::Checkout => "checkout",
            Metric::OrderFinal => "order_final",
            Metric::QueueWait => "queue_wait",
            Metric::EndToEnd => "e2e_confirmed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How one account's visit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Sold,
    Declined,
    AbandonedReleased,
    AbandonedWalkedAway,
    GaveUp,
    NoSeats,
    HoldExpired,
    Unsettled,
    /// The room answered `SOLD_OUT`: nothing left to sell, the fan goes home.
    SoldOut,
    Failed,
}

impl Outcome {
    /// Whether the visit held seats at some point.
    fn held(self) -> bool {
        matches!(
            self,
            Outcome::Sold
                | Outcome::Declined
                | Outcome::AbandonedReleased
                | Outcome::AbandonedWalkedAway
                | Outcome::HoldExpired
                | Outcome::Unsettled
        )
    }

    fn name(self) -> &'static str {
        match self {
            Outcome::Sold => "sold",
            Outcome::Declined => "declined",
            Outcome::AbandonedReleased => "abandoned_released",
            Outcome::AbandonedWalkedAway => "abandoned_walked_away",
            Outcome::GaveUp => "gave_up",
            Outcome::NoSeats => "no_seats",
            Outcome::HoldExpired => "hold_expired",
            Outcome::Unsettled => "unsettled",
            Outcome::SoldOut => "sold_out",
            Outcome::Failed => "failed",
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("histogram bounds")
}

fn small_histogram() -> Histogram<u32> {
    Histogram::<u32>::new_with_bounds(1, 3_600_000_000, 2).expect("histogram bounds")
}

fn quantile_ms<T: hdrhistogram::Counter>(h: &Histogram<T>, q: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(q) as f64 / 1000.0
}

/// One second of the run.
#[derive(Default)]
struct Second {
    metrics: Vec<Option<Histogram<u32>>>,
    arrivals: u64,
    errors: u64,
    queue_len_max: u64,
    sold_seats: u64,
    /// Fans whose poll answered `ADMITTED` this second.
    admitted: u64,
    gauges: Option<Value>,
    /// The admin queue view read this second (the controller's rate and reason).
    room: Option<Value>,
}

/// Everything measured, behind one lock (a few requests per account: cheap).
struct Metrics {
    histograms: Vec<Histogram<u64>>,
    codes: BTreeMap<(&'static str, u16), u64>,
    outcomes: BTreeMap<&'static str, u64>,
    cards: BTreeMap<&'static str, u64>,
    sold_seats: u64,
    errors: u64,
    unexpected: u64,
    listed: Vec<String>,
    seconds: Vec<Second>,
    queue_len_max: u64,
    /// Per admitted fan: (queue position, arrival index, µs after the start when its poll
    /// answered `ADMITTED`).
    admissions: Vec<(u64, u64, u64)>,
    /// µs after the start of each `SOLD_OUT` answer's first sight by a fan.
    sold_out_answers: Vec<u64>,
    /// µs after the start when the room was first seen sold out (admin view or an answer).
    sold_out_at: Option<u64>,
    /// µs after the start when the last fan's visit ended.
    last_fan_done: u64,
    /// µs after the start when the fans' confirmed seats reached the house.
    all_sold_at: Option<u64>,
    /// Fans refused seats who joined the waiting list, and of them those offered seats.
    waitlist_joined: u64,
    waitlist_offered: u64,
    /// Per lane (`fanclub`, `general`) with `--presale-share`: fans, admitted, held, sold.
    lanes: BTreeMap<&'static str, [u64; 4]>,
}

impl Metrics {
    fn second(&mut self, s: usize) -> &mut Second {
        if self.seconds.len() <= s {
            self.seconds.resize_with(s + 1, Second::default);
        }
        &mut self.seconds[s]
    }

    fn list(&mut self, line: String) {
        if self.listed.len() < ERRORS_LISTED_MAX {
            self.listed.push(line);
        }
    }
}

/// Live counters for the progress line.
#[derive(Default)]
struct Gauges {
    arrived: AtomicU64,
    waiting: AtomicU64,
    shopping: AtomicU64,
    holding: AtomicU64,
    paying: AtomicU64,
    paid: AtomicU64,
    done: AtomicU64,
    errors: AtomicU64,
    delayed_by_cap: AtomicU64,
}

impl Gauges {
    fn snapshot(&self) -> Value {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "arrived": g(&self.arrived), "waiting": g(&self.waiting),
            "shopping": g(&self.shopping), "holding": g(&self.holding),
            "paying": g(&self.paying), "paid": g(&self.paid), "done": g(&self.done),
            "errors": g(&self.errors), "delayedByCap": g(&self.delayed_by_cap),
        })
    }
}

struct Shared {
    http: reqwest::Client,
    /// The base URL and the other nodes' addresses: a fan talks to one of them.
    bases: Vec<String>,
    event_id: String,
    secret: String,
    run_tag: String,
    sections: Vec<String>,
    max_seats: u32,
    abandon: f64,
    cards: CardMix,
    /// The event's waiting room is on: fans queue for an admission.
    waiting_room: bool,
    refused_fans_wait: bool,
    /// Share of fans in the presale lane, its access codes, and how many of the best
    /// sections it sells.
    presale_share: f64,
    presale_codes: Vec<String>,
    presale_sections: u32,
    /// Seats of the house, and whether the event page last said nothing is free or held
    /// (read once a second by [`watch_house`]): fans on the waiting list go home then.
    venue_seats: u64,
    /// Seats free and held over the house as the event page last said (`u64::MAX` before
    /// the first read), read once a second by [`watch_house`].
    house_free: AtomicU64,
    house_held: AtomicU64,
    started: Instant,
    /// When the event goes on sale (the start, or the end of arrivals for `random`).
    on_sale: Instant,
    metrics: Mutex<Metrics>,
    gauges: Gauges,
    /// One permit per request on the wire: this one process plays every fan, and each
    /// request in flight holds a socket, so past its open-file limit it could only fail
    /// ("Too many open files"). A fan waits for a socket as a browser waits for a
    /// connection; the wait counts in the fan's latency.
    sockets: Semaphore,
}

/// One HTTP answer, body parsed when JSON.
struct Answer {
    status: u16,
    body: Value,
    retry_after_s: Option<u64>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Metrics> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn second_of(&self, at: Instant) -> usize {
        at.saturating_duration_since(self.started).as_secs() as usize
    }

    fn measure(&self, metric: Metric, from: Instant) {
        let now = Instant::now();
        let us = now.saturating_duration_since(from).as_micros().max(1) as u64;
        let s = self.second_of(now);
        let mut m = self.lock();
        let _ = m.histograms[metric.index()].record(us);
        let second = m.second(s);
        if second.metrics.is_empty() {
            second.metrics.resize_with(METRICS.len(), || None);
        }
        let _ = second.metrics[metric.index()]
            .get_or_insert_with(small_histogram)
            .record(us);
    }

    /// Sends a request, counts its status code under `step`, lists errors. A transport
    /// error or a 502/503/504 is retried with the very same request (so the same
    /// `Idempotency-Key`), as a client whose server crashed or restarted would, up to
    /// [`RETRIES_MAX`] times with a doubling pause; every failed attempt is still counted.
    async fn call(&self, step: &'static str, request: reqwest::RequestBuilder) -> Answer {
        let mut pause = RETRY_PAUSE_FIRST;
        for _ in 0..RETRIES_MAX {
            let Some(attempt) = request.try_clone() else {
                break;
            };
            let answer = self.call_once(step, attempt).await;
            if !matches!(answer.status, 0 | 502..=504) {
                return answer;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_PAUSE_MAX);
        }
        self.call_once(step, request).await
    }

    async fn call_once(&self, step: &'static str, request: reqwest::RequestBuilder) -> Answer {
        let _socket = self.sockets.acquire().await;
        let answer = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after_s = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok());
                match response.bytes().await {
                    Ok(bytes) => Answer {
                        status,
                        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                        retry_after_s,
                    },
                    Err(error) => {
                        self.error(
                            step,
                            0,
                            &format!("reading the body: {}", error_chain(&error)),
                        );
                        Answer {
                            status: 0,
                            body: Value::Null,
                            retry_after_s: None,
                        }
                    }
                }
            }
            Err(error) => {
                self.error(step, 0, &error_chain(&error));
                Answer {
                    status: 0,
                    body: Value::Null,
                    retry_after_s: None,
                }
            }
        };
        if answer.status >= 500 {
            self.error(step, answer.status, &answer.body.to_string());
        }
        *self.lock().codes.entry((step, answer.status)).or_default() += 1;
        answer
    }

    /// A fan was answered `SOLD_OUT` (at join or poll).
    fn saw_sold_out(&self) {
        let us = self.started.elapsed().as_micros() as u64;
        let mut m = self.lock();
        m.sold_out_answers.push(us);
        m.sold_out_at = Some(m.sold_out_at.map_or(us, |at| at.min(us)));
    }

    fn error(&self, step: &str, status: u16, detail: &str) {
        self.gauges.errors.fetch_add(1, Ordering::Relaxed);
        let s = self.second_of(Instant::now());
        let t = self.started.elapsed().as_secs_f64();
        let mut m = self.lock();
        m.errors += 1;
        m.second(s).errors += 1;
        let detail: String = detail.chars().take(300).collect();
        m.list(format!("t={t:.1}s {step} status={status} {detail}"));
    }

    fn unexpected(&self, step: &str, answer: &Answer) {
        if answer.status == 0 || answer.status >= 500 {
            return; // already listed as an error
        }
        let t = self.started.elapsed().as_secs_f64();
        let body: String = answer.body.to_string().chars().take(300).collect();
        let mut m = self.lock();
        m.unexpected += 1;
        m.list(format!(
            "t={t:.1}s unexpected {step} status={} {body}",
            answer.status
        ));
    }

    /// `path` on the node the fan with `token` talks to (always the same one).
    fn url(&self, token: &str, path: &str) -> String {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        for byte in token.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
        let base = &self.bases[(hash % self.bases.len() as u64) as usize];
        format!("{base}{path}")
    }
}

/// The random choices of one fan, drawn before any await.
struct Plan {
    quantity: u32,
    section: u32,
    /// How many of the best sections the fan may try (the lane's, for a presale fan).
    sections: u32,
    abandon: Option<bool>,
    card: Card,
}

fn plan(shared: &Shared, presale: bool) -> Plan {
    let mut rng = rand::rng();
    let abandon = rng
        .random_bool(shared.abandon)
        .then(|| rng.random_bool(0.5));
    let sections = if presale {
        shared.presale_sections
    } else {
        shared.sections.len() as u32
    };
    Plan {
        quantity: rng.random_range(1..=shared.max_seats.clamp(1, 6)),
        section: pick_section(rng.random::<f64>(), sections),
        sections,
        abandon,
        card: shared.cards.pick(rng.random_range(0..shared.cards.total())),
    }
}

fn key() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// One fan's visit, from its scheduled arrival `due`.
async fn fan(shared: Arc<Shared>, i: u64, due: Instant) -> Outcome {
    let g = &shared.gauges;
    g.arrived.fetch_add(1, Ordering::Relaxed);
    {
        let s = shared.second_of(due);
        shared.lock().second(s).arrivals += 1;
    }
    let account = format!("os{}-{i}", shared.run_tag);
    let token = match AccountId::parse(&account)
        .map_err(|e| e.to_string())
        .and_then(|a| mint_token(&shared.secret, &a, false, TOKEN_TTL_S))
    {
        Ok(token) => token,
        Err(why) => {
            shared.error("mint", 0, &why);
            return Outcome::Failed;
        }
    };
    let presale = in_presale(i, shared.presale_share);
    let lane = presale.then_some(PRESALE_PHASE);
    let plan = plan(&shared, presale);
    if presale && let Err(outcome) = redeem(&shared, &token, i).await {
        return outcome;
    }
    let admission = if shared.waiting_room {
        g.waiting.fetch_add(1, Ordering::Relaxed);
        let admitted = wait_in_room(&shared, &token, i, due, lane).await;
        g.waiting.fetch_sub(1, Ordering::Relaxed);
        match admitted {
            Ok(admission) => admission,
            Err(outcome) => return outcome,
        }
    } else {
        String::new()
    };
    if shared.presale_share > 0.0 {
        shared
            .lock()
            .lanes
            .entry(lane.unwrap_or(GENERAL_PHASE))
            .or_default()[1] += 1;
    }
    shared.measure(Metric::QueueWait, due);
    g.shopping.fetch_add(1, Ordering::Relaxed);
    let outcome = shop(&shared, &token, &admission, &plan, due).await;
    g.shopping.fetch_sub(1, Ordering::Relaxed);
    if shared.waiting_room
        && matches!(
            outcome,
            Outcome::Declined | Outcome::NoSeats | Outcome::Failed | Outcome::HoldExpired
        )
    {
        // The fan closes the page: the slot goes to the next in line at once.
        let request = shared
            .http
            .delete(shared.url(&token, &queue_path(&shared.event_id, lane)))
            .bearer_auth(&token);
        let answer = shared.call("leave", request).await;
        if answer.status != 200 {
            shared.unexpected("leave", &answer);
        }
    }
    outcome
}

/// The queue of the event, or of its lane `lane`.
fn queue_path(event_id: &str, lane: Option<&str>) -> String {
    match lane {
        Some(lane) => format!("/v1/events/{event_id}/queue?phaseId={lane}"),
        None => format!("/v1/events/{event_id}/queue"),
    }
}

/// A presale fan redeems its code (fan `i` takes code `i / PRESALE_CODE_USES`).
async fn redeem(shared: &Shared, token: &str, i: u64) -> Result<(), Outcome> {
    let index = usize::try_from(i / PRESALE_CODE_USES).unwrap_or(usize::MAX);
    let Some(code) = shared
        .presale_codes
        .get(index)
        .or(shared.presale_codes.last())
    else {
        shared.error("redeem", 0, "no presale code was generated");
        return Err(Outcome::Failed);
    };
    let url = shared.url(
        token,
        &format!(
            "/v1/events/{}/phases/{PRESALE_PHASE}/access",
            shared.event_id
        ),
    );
    for _ in 0..JOIN_ATTEMPTS {
        let request = shared
            .http
            .post(&url)
            .bearer_auth(token)
            .json(&json!({ "code": code }));
        let answer = shared.call("redeem", request).await;
        match answer.status {
            200 => return Ok(()),
            0 | 429 | 503 => {
                let wait = answer.retry_after_s.unwrap_or(1).clamp(1, 30);
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
            _ => {
                shared.unexpected("redeem", &answer);
                return Err(Outcome::Failed);
            }
        }
    }
    Err(Outcome::GaveUp)
}

/// Joins (the lane's queue with `lane`) and polls until admitted; the admission token, or
/// how the wait ended.
async fn wait_in_room(
    shared: &Shared,
    token: &str,
    i: u64,
    due: Instant,
    lane: Option<&str>,
) -> Result<String, Outcome> {
    let deadline = due + QUEUE_WAIT_MAX;
    let status_url = shared.url(
        token,
        &format!("/v1/events/{}/queue/status", shared.event_id),
    );
    let queue = shared.url(token, &queue_path(&shared.event_id, lane));
    let join_key = key();
    let mut joined = None;
    for attempt in 0..JOIN_ATTEMPTS {
        let request = shared
            .http
            .post(&queue)
            .bearer_auth(token)
            .header("idempotency-key", &join_key);
        let answer = shared.call("join", request).await;
        if attempt == 0 {
            shared.measure(Metric::Join, due);
        }
        match answer.status {
            201 => {
                joined = Some(answer);
                break;
            }
            0 | 429 | 503 => {
                let wait = Duration::from_secs(answer.retry_after_s.unwrap_or(1).clamp(1, 30));
                if Instant::now() + wait > deadline {
                    return Err(Outcome::GaveUp);
                }
                tokio::time::sleep(wait).await;
            }
            _ => {
                shared.unexpected("join", &answer);
                return Err(Outcome::Failed);
            }
        }
    }
    let Some(joined) = joined else {
        return Err(Outcome::Failed);
    };
    let Some(ticket) = joined.body["queueTicket"].as_str().map(str::to_owned) else {
        shared.unexpected("join", &joined);
        return Err(Outcome::Failed);
    };
    let mut position = joined.body["position"].as_u64().unwrap_or(0);
    if joined.body["status"] == "SOLD_OUT" {
        shared.saw_sold_out();
        return Err(Outcome::SoldOut);
    }
    let mut retry_after_s = joined.retry_after_s.unwrap_or(1);
    loop {
        let wait = Duration::from_secs(retry_after_s.clamp(1, 60));
        if Instant::now() + wait > deadline {
            return Err(Outcome::GaveUp);
        }
        tokio::time::sleep(wait).await;
        let sent = Instant::now();
        let request = shared
            .http
            .get(&status_url)
            .bearer_auth(token)
            .header("queue-ticket", &ticket);
        let answer = shared.call("status", request).await;
        shared.measure(Metric::Status, sent);
        retry_after_s = answer.retry_after_s.unwrap_or(1);
        match (answer.status, answer.body["status"].as_str()) {
            (200, Some("ADMITTED")) => {
                return match answer.body["admissionToken"].as_str() {
                    Some(token) => {
                        let at = Instant::now();
                        let us = at.saturating_duration_since(shared.started).as_micros() as u64;
                        let s = shared.second_of(at);
                        let mut m = shared.lock();
                        m.admissions.push((position, i, us));
                        m.second(s).admitted += 1;
                        Ok(token.to_owned())
                    }
                    None => {
                        shared.unexpected("status", &answer);
                        Err(Outcome::Failed)
                    }
                };
            }
            (200, Some("SOLD_OUT")) => {
                shared.saw_sold_out();
                return Err(Outcome::SoldOut);
            }
            (200, Some("WAITING")) => {
                let ahead = answer.body["aheadOfYou"].as_u64().unwrap_or(0);
                // Under `random` the place changes once, at on-sale.
                position = answer.body["position"].as_u64().unwrap_or(position);
                let s = shared.second_of(Instant::now());
                let mut m = shared.lock();
                m.queue_len_max = m.queue_len_max.max(ahead + 1);
                let second = m.second(s);
                second.queue_len_max = second.queue_len_max.max(ahead + 1);
            }
            (200, _) => {
                // EXPIRED: the place lapsed.
                shared.unexpected("status", &answer);
                return Err(Outcome::GaveUp);
            }
            (0 | 429 | 503, _) => {}
            _ => {
                shared.unexpected("status", &answer);
                return Err(Outcome::Failed);
            }
        }
    }
}

/// Holds, abandons or pays; the visit's outcome.
async fn shop(shared: &Shared, token: &str, admission: &str, plan: &Plan, due: Instant) -> Outcome {
    let g = &shared.gauges;
    let holds = shared.url(token, &format!("/v1/events/{}/holds", shared.event_id));
    let n = plan.sections.min(shared.sections.len() as u32).max(1);
    let mut hold = None;
    let mut t = 0;
    let mut refusals_429 = 0;
    let mut refused = Value::Null;
    while t < HOLD_TRIES.min(n) {
        let section = &shared.sections[((plan.section + t) % n) as usize];
        // The last try takes the best seats anywhere, as a storefront offers once a fan's
        // sections are gone: no fan leaves empty-handed while seats remain.
        let ask = if t + 1 == HOLD_TRIES.min(n) {
            json!({"bestAvailable": {"quantity": plan.quantity}})
        } else {
            json!({"bestAvailable": {"quantity": plan.quantity, "section": section}})
        };
        let sent = Instant::now();
        let request = shared
            .http
            .post(&holds)
            .bearer_auth(token)
            .header("idempotency-key", key())
            .header("admission-token", admission)
            .json(&ask);
        let answer = shared.call("hold", request).await;
        shared.measure(Metric::Hold, sent);
        match answer.status {
            201 => {
                hold = Some(answer.body);
                break;
            }
            409 => {
                t += 1;
                refused = answer.body;
            }
            // The event's writer has more queued than it takes soon: it says nothing about
            // seats, so the fan waits as asked and asks again for the same section.
            429 if refusals_429 < HOLD_429_RETRIES_MAX => {
                refusals_429 += 1;
                let wait = answer
                    .retry_after_s
                    .unwrap_or(1)
                    .clamp(1, RETRY_AFTER_HONOURED_MAX_S);
                tokio::time::sleep(Duration::from_secs(wait)).await;
            }
            _ => {
                shared.unexpected("hold", &answer);
                return Outcome::Failed;
            }
        }
    }
    let hold = match hold {
        Some(hold) => hold,
        // Nothing of the party's size is free now, but the house is not sold: the fan stays
        // in line for what comes back, as the answers say it can.
        None if shared.refused_fans_wait && refused["code"] == "SEATS_UNAVAILABLE" => {
            match wait_on_list(shared, token, plan).await {
                Ok(hold) => hold,
                Err(outcome) => return outcome,
            }
        }
        None => return Outcome::NoSeats,
    };
    let Some(hold_id) = hold["holdId"].as_str() else {
        return Outcome::Failed;
    };
    let seats = hold["seats"].as_array().map_or_else(
        || hold["quantity"].as_u64().unwrap_or(0),
        |s| s.len() as u64,
    );
    g.holding.fetch_add(1, Ordering::Relaxed);
    match plan.abandon {
        Some(true) => {
            let request = shared
                .http
                .delete(shared.url(token, &format!("/v1/holds/{hold_id}")))
                .bearer_auth(token);
            // Busy (the store's call bound): the fan's page asks again, as a 429 says.
            let mut answer = shared
                .call("release", request.try_clone().expect("no body"))
                .await;
            let mut refusals = 0;
            while answer.status == 429 && refusals < HOLD_429_RETRIES_MAX {
                tokio::time::sleep(backoff(refusals, answer.retry_after_s)).await;
                refusals += 1;
                answer = shared
                    .call("release", request.try_clone().expect("no body"))
                    .await;
            }
            g.holding.fetch_sub(1, Ordering::Relaxed);
            if answer.status != 200 {
                shared.unexpected("release", &answer);
                return Outcome::Failed;
            }
            return Outcome::AbandonedReleased;
        }
        Some(false) => {
            g.holding.fetch_sub(1, Ordering::Relaxed);
            return Outcome::AbandonedWalkedAway;
        }
        None => {}
    }
    *shared.lock().cards.entry(plan.card.name()).or_default() += 1;
    g.holding.fetch_sub(1, Ordering::Relaxed);
    g.paying.fetch_add(1, Ordering::Relaxed);
    let outcome = pay(shared, token, admission, hold_id, plan.card).await;
    g.paying.fetch_sub(1, Ordering::Relaxed);
    if outcome == Outcome::Sold {
        g.paid.fetch_add(1, Ordering::Relaxed);
        shared.measure(Metric::EndToEnd, due);
        let now = Instant::now();
        let s = shared.second_of(now);
        let mut m = shared.lock();
        m.sold_seats += seats;
        m.second(s).sold_seats += seats;
        if m.sold_seats >= shared.venue_seats && m.all_sold_at.is_none() {
            m.all_sold_at = Some(now.saturating_duration_since(shared.started).as_micros() as u64);
        }
    }
    outcome
}

/// A fan refused seats joins the event's waiting list for its party (any seats) and looks at
/// its entry every [`WAITLIST_POLL`] until it is offered seats: the offer's hold, read as a
/// hold answer. With a waiting room the fan first leaves the room (its slot goes to the next
/// fan: an offer is paid without an admission). It goes home when nothing can come back for
/// it ([`nothing_can_come`]), or after [`WAITLIST_WAIT_MAX`].
async fn wait_on_list(shared: &Shared, token: &str, plan: &Plan) -> Result<Value, Outcome> {
    if let Some(outcome) = nothing_can_come(shared, plan) {
        return Err(outcome);
    }
    if shared.waiting_room {
        let request = shared
            .http
            .delete(shared.url(token, &format!("/v1/events/{}/queue", shared.event_id)))
            .bearer_auth(token);
        let answer = shared.call("leave", request).await;
        if answer.status != 200 {
            shared.unexpected("leave", &answer);
        }
    }
    let deadline = Instant::now() + WAITLIST_WAIT_MAX;
    let list = shared.url(token, &format!("/v1/events/{}/waitlist", shared.event_id));
    let join = shared
        .http
        .post(&list)
        .bearer_auth(token)
        .header("idempotency-key", key())
        .json(&json!({"quantity": plan.quantity, "together": false}));
    let mut refusals = 0;
    let answer = loop {
        let answer = shared
            .call("waitlist_join", join.try_clone().expect("a JSON body"))
            .await;
        if !matches!(answer.status, 0 | 429 | 503) {
            break answer;
        }
        let wait = backoff(refusals, answer.retry_after_s);
        refusals += 1;
        if Instant::now() + wait > deadline {
            return Err(Outcome::GaveUp);
        }
        tokio::time::sleep(wait).await;
    };
    if answer.status != 201 {
        shared.unexpected("waitlist_join", &answer);
        return Err(Outcome::Failed);
    }
    let Some(waitlist_id) = answer.body["waitlistId"].as_str().map(str::to_owned) else {
        shared.unexpected("waitlist_join", &answer);
        return Err(Outcome::Failed);
    };
    shared.lock().waitlist_joined += 1;
    let entry_url = format!("{list}/{waitlist_id}");
    let mut entry = answer.body;
    let mut refusals = 0;
    // Why the fan is leaving, once a leave was sent: a leave answered 0, 429 or 503 may still
    // have been decided, so the entry read next can say LEFT (the fan's own doing, not a fault).
    let mut leaving: Option<Outcome> = None;
    loop {
        match (entry["status"].as_str(), leaving) {
            (Some("OFFERED"), _) => break,
            (Some("WAITING"), _) => {}
            (Some("LEFT"), Some(outcome)) => return Err(outcome),
            _ => {
                shared.unexpected(
                    "waitlist",
                    &Answer {
                        status: 200,
                        body: entry,
                        retry_after_s: None,
                    },
                );
                return Err(Outcome::Failed);
            }
        }
        let hopeless = nothing_can_come(shared, plan);
        if hopeless.is_some() || Instant::now() + WAITLIST_POLL > deadline {
            let request = shared.http.delete(&entry_url).bearer_auth(token);
            let left = shared.call("waitlist_leave", request).await;
            leaving = Some(hopeless.unwrap_or(Outcome::NoSeats));
            match left.status {
                200 => return Err(hopeless.unwrap_or(Outcome::NoSeats)),
                // Offered meanwhile (the fan takes it after all), or busy: look again.
                409 | 429 | 503 | 0 => {}
                _ => {
                    shared.unexpected("waitlist_leave", &left);
                    return Err(Outcome::Failed);
                }
            }
        } else {
            let jitter = Duration::from_millis(rand::random::<u64>() % 2_000);
            tokio::time::sleep(WAITLIST_POLL + jitter).await;
        }
        let answer = shared
            .call("waitlist", shared.http.get(&entry_url).bearer_auth(token))
            .await;
        match answer.status {
            200 => {
                entry = answer.body;
                refusals = 0;
            }
            0 | 429 | 503 => {
                tokio::time::sleep(backoff(refusals, answer.retry_after_s)).await;
                refusals += 1;
            }
            _ => {
                shared.unexpected("waitlist", &answer);
                return Err(Outcome::Failed);
            }
        }
    }
    shared.lock().waitlist_offered += 1;
    let Some(hold_id) = entry["holdId"].as_str() else {
        return Err(Outcome::Failed);
    };
    // Never a partial offer: the hold is the party's seats.
    Ok(json!({"holdId": hold_id, "quantity": plan.quantity}))
}

/// How long to wait after the `refusals`-th refusal in a row (429, 503, no answer): what
/// `Retry-After` asks, at least doubling from 1 s up to 32 s, with up to half again of
/// jitter, so that thousands of fans refused in one second do not all come back in the next.
fn backoff(refusals: u32, retry_after_s: Option<u64>) -> Duration {
    let doubling = 1u64 << refusals.min(5);
    let base = retry_after_s
        .unwrap_or(1)
        .clamp(1, RETRY_AFTER_HONOURED_MAX_S)
        .max(doubling);
    let base_ms = base * 1_000;
    Duration::from_millis(base_ms + rand::random::<u64>() % (base_ms / 2 + 1))
}

/// Whether the event page says nothing can come back for the party: no seat held (that could
/// lapse or be declined) and fewer free than it needs. `SoldOut` when nothing is free.
fn nothing_can_come(shared: &Shared, plan: &Plan) -> Option<Outcome> {
    let free = shared.house_free.load(Ordering::Relaxed);
    let held = shared.house_held.load(Ordering::Relaxed);
    if held > 0 || free >= u64::from(plan.quantity) {
        return None;
    }
    Some(if free == 0 {
        Outcome::SoldOut
    } else {
        Outcome::NoSeats
    })
}

/// Reads the event page once a second: the seats free and held, from which a fan on the
/// waiting list knows when nothing can come back for it.
async fn watch_house(shared: Arc<Shared>) {
    let url = format!("{}/v1/events/{}", shared.bases[0], shared.event_id);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Ok(response) = shared.http.get(&url).send().await else {
            continue;
        };
        let Ok(event) = response.json::<Value>().await else {
            continue;
        };
        let Some(sections) = event["sections"].as_array() else {
            continue;
        };
        let sum = |field: &str| -> Option<u64> { sections.iter().map(|s| s[field].as_u64()).sum() };
        if let (Some(free), Some(held)) = (sum("available"), sum("held")) {
            shared.house_free.store(free, Ordering::Relaxed);
            shared.house_held.store(held, Ordering::Relaxed);
        }
    }
}

/// Checks out and follows the order to its final status.
async fn pay(shared: &Shared, token: &str, admission: &str, hold_id: &str, card: Card) -> Outcome {
    let sent = Instant::now();
    let request = shared
        .http
        .post(shared.url(token, &format!("/v1/holds/{hold_id}/checkout")))
        .bearer_auth(token)
        .header("idempotency-key", key())
        .header("admission-token", admission)
        .json(&json!({"paymentMethodToken": card.token()}));
    // A 429 (the event's writer is full) is waited out as `Retry-After` says and the very
    // same request (same key) sent again: it is not an answer about the hold.
    let mut answer = shared
        .call("checkout", request.try_clone().expect("a JSON body"))
        .await;
    let mut refusals_429 = 0;
    while answer.status == 429 && refusals_429 < HOLD_429_RETRIES_MAX {
        refusals_429 += 1;
        let wait = answer
            .retry_after_s
            .unwrap_or(1)
            .clamp(1, RETRY_AFTER_HONOURED_MAX_S);
        tokio::time::sleep(Duration::from_secs(wait)).await;
        answer = shared
            .call("checkout", request.try_clone().expect("a JSON body"))
            .await;
    }
    shared.measure(Metric::Checkout, sent);
    if answer.status == 409 && answer.body["code"] == "HOLD_EXPIRED" {
        return Outcome::HoldExpired;
    }
    if answer.status != 201 {
        shared.unexpected("checkout", &answer);
        return Outcome::Failed;
    }
    let Some(order_id) = answer.body["orderId"].as_str().map(str::to_owned) else {
        shared.unexpected("checkout", &answer);
        return Outcome::Failed;
    };
    let mut order = answer.body;
    let mut approved = false;
    let deadline = Instant::now() + ORDER_WAIT_MAX;
    loop {
        match order["orderStatus"].as_str() {
            Some("CONFIRMED") => {
                shared.measure(Metric::OrderFinal, sent);
                return Outcome::Sold;
            }
            Some("CANCELLED") => {
                shared.measure(Metric::OrderFinal, sent);
                return Outcome::Declined;
            }
            _ => {}
        }
        if !approved && let Some(url) = order["nextAction"]["url"].as_str() {
            // The shopper passes the bank's challenge.
            approved = true;
            let answer = shared.call("3ds", shared.http.get(url)).await;
            if answer.status != 200 {
                shared.unexpected("3ds", &answer);
            }
        }
        if Instant::now() + ORDER_POLL > deadline {
            let t = shared.started.elapsed().as_secs_f64();
            shared.lock().list(format!(
                "t={t:.1}s unsettled order {order_id} after {}s: {}",
                ORDER_WAIT_MAX.as_secs(),
                order.to_string().chars().take(300).collect::<String>()
            ));
            return Outcome::Unsettled;
        }
        tokio::time::sleep(ORDER_POLL).await;
        let request = shared
            .http
            .get(shared.url(token, &format!("/v1/orders/{order_id}")))
            .bearer_auth(token);
        let answer = shared.call("order", request).await;
        match answer.status {
            200 => order = answer.body,
            // Busy: the next look waits as long as the server asks (a poll is no retry of a
            // request, so it is not repeated at once).
            429 | 503 => {
                let wait = answer
                    .retry_after_s
                    .unwrap_or(1)
                    .clamp(1, RETRY_AFTER_HONOURED_MAX_S);
                tokio::time::sleep(Duration::from_secs(wait).saturating_sub(ORDER_POLL)).await;
            }
            0 => {}
            _ => {
                shared.unexpected("order", &answer);
                return Outcome::Failed;
            }
        }
    }
}

/// Creates the stadium with its waiting room; returns its id.
async fn create_event(
    http: &reqwest::Client,
    base: &str,
    scenario: &OnsaleScenario,
    max_active: u32,
    on_sale_in: Duration,
) -> anyhow::Result<String> {
    let (sections, hold_ttl_s, waiting_room, door) = (
        scenario.sections,
        scenario.hold_ttl_s,
        scenario.waiting_room,
        &scenario.door,
    );
    let admin = admin_token(&scenario.jwt_secret)?;
    let sections: Vec<Value> = (0..sections)
        .map(|i| {
            json!({"name": format!("S{i}"), "rows": ROWS, "seatsPerRow": SEATS_PER_ROW,
                   "priceMinor": 15_000 - i64::from(i) * 250})
        })
        .collect();
    let mut room = json!({"enabled": waiting_room,
                          "policy": if door.random { "random" } else { "fifo" },
                          "maxActiveShoppers": max_active,
                          "admissionTtlSeconds": ADMISSION_TTL_S});
    for (name, value) in [
        ("startReleasePerSecond", door.start_release_per_s),
        ("maxReleasePerSecond", door.max_release_per_s),
        ("targetHoldP99Ms", door.target_hold_p99_ms),
    ] {
        if let Some(value) = value {
            room[name] = json!(value);
        }
    }
    let on_sale_at = rfc3339(std::time::SystemTime::now() + on_sale_in)?;
    let mut request = json!({
        "name": "On-sale simulation stadium",
        "startsAt": "2030-01-01T20:00:00Z",
        "currency": "EUR",
        "holdTtlSeconds": hold_ttl_s,
        // An offer from the waiting list lasts as long as a hold: one to a fan who walked
        // away comes back as soon.
        "waitlistOfferTtlSeconds": hold_ttl_s,
        "maxSeatsPerHold": 6,
        "maxTicketsPerAccount": 6,
        "onSaleAt": on_sale_at,
        "waitingRoom": room.clone(),
        "sections": sections,
    });
    if scenario.presale_share > 0.0 {
        // The lane's own queue: the share of the shopper slots, the event's release.
        let mut lane_room = room;
        if let Some(room) = lane_room.as_object_mut() {
            room.remove("enabled");
        }
        lane_room["maxActiveShoppers"] =
            json!(((f64::from(max_active) * scenario.presale_share).round() as u32).max(1));
        let best: Vec<String> = (0..presale_sections(scenario.sections))
            .map(|i| format!("S{i}"))
            .collect();
        request["phases"] = json!([
            {"phaseId": PRESALE_PHASE, "name": "Fan club presale", "access": "code",
             "startsAt": on_sale_at, "sections": best, "waitingRoom": lane_room},
            {"phaseId": GENERAL_PHASE, "name": "General sale", "access": "open",
             "startsAt": on_sale_at},
        ]);
    }
    // The same key each time: a request whose node died before answering (a chaos run on a
    // cluster, 502 from the balancer) is sent again and answered as the first was.
    let key = key();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let created = http
            .post(format!("{base}/v1/admin/events"))
            .bearer_auth(&admin)
            .header("idempotency-key", &key)
            .json(&request)
            .send()
            .await;
        let created = match created {
            Ok(created) => created,
            Err(error) if attempts < 10 => {
                eprintln!("creating the event: {error}; sending it again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            Err(error) => return Err(error).context("creating the on-sale event"),
        };
        let status = created.status();
        let body: Value = created.json().await.unwrap_or_default();
        if matches!(status.as_u16(), 429 | 502 | 503 | 504) && attempts < 10 {
            eprintln!("creating the event answered {status}; sending it again");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        if status.as_u16() != 201 {
            bail!("creating the event answered {status}: {body}");
        }
        return Ok(body["eventId"].as_str().context("eventId")?.to_owned());
    }
}

/// Generates the presale codes for `fans` presale fans: one code per
/// [`PRESALE_CODE_USES`] of them.
async fn presale_codes(
    http: &reqwest::Client,
    base: &str,
    secret: &str,
    event_id: &str,
    fans: u64,
) -> anyhow::Result<Vec<String>> {
    let count = fans.div_ceil(PRESALE_CODE_USES).max(1);
    let made = http
        .post(format!(
            "{base}/v1/admin/events/{event_id}/phases/{PRESALE_PHASE}/codes"
        ))
        .bearer_auth(admin_token(secret)?)
        .header("idempotency-key", key())
        .json(&json!({"count": count, "uses": fans.clamp(1, PRESALE_CODE_USES)}))
        .send()
        .await
        .context("generating the presale codes")?;
    let status = made.status();
    let body: Value = made.json().await.unwrap_or_default();
    if status.as_u16() != 201 {
        bail!("generating the presale codes answered {status}: {body}");
    }
    Ok(body["codes"]
        .as_array()
        .map(|codes| {
            codes
                .iter()
                .filter_map(|c| c["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

fn admin_token(secret: &str) -> anyhow::Result<String> {
    mint_token(secret, &AccountId::parse("load-admin")?, true, TOKEN_TTL_S)
        .map_err(anyhow::Error::msg)
}

/// `at` as RFC 3339 in UTC, to the millisecond.
fn rfc3339(at: std::time::SystemTime) -> anyhow::Result<String> {
    let at = time::OffsetDateTime::from(at);
    let at = at.replace_nanosecond(at.millisecond() as u32 * 1_000_000)?;
    Ok(at.format(&time::format_description::well_known::Rfc3339)?)
}

/// Reads the admin queue view once a second: the controller's rate and reason, admissions,
/// and when the room first says sold out.
async fn watch_room(shared: Arc<Shared>, admin: String) {
    let url = format!(
        "{}/v1/admin/events/{}/queue",
        shared.bases[0], shared.event_id
    );
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Ok(response) = shared.http.get(&url).bearer_auth(&admin).send().await else {
            continue;
        };
        if !response.status().is_success() {
            continue;
        }
        let Ok(view) = response.json::<Value>().await else {
            continue;
        };
        let at = Instant::now();
        let us = at.saturating_duration_since(shared.started).as_micros() as u64;
        let room = json!({
            "releaseRatePerSecond": view["releaseRatePerSecond"],
            "reason": view["reason"],
            "soldOut": view["soldOut"],
            "admitted": view["admitted"],
            "activeShoppers": view["activeShoppers"],
            "waiting": view["waiting"],
            "serving": view["serving"],
        });
        let s = shared.second_of(at);
        let mut m = shared.lock();
        if view["soldOut"] == true {
            m.sold_out_at = Some(m.sold_out_at.map_or(us, |first| first.min(us)));
        }
        m.second(s).room = Some(room);
    }
}

/// What a run measured: the summary figures and the full JSON report.
#[derive(Debug, Clone)]
pub struct OnsaleReport {
    pub event_id: String,
    /// 5xx answers and transport failures.
    pub errors: u64,
    /// Other answers the scenario did not expect (listed in the report).
    pub unexpected: u64,
    pub unsettled: u64,
    pub json: Value,
    pub table: String,
}

impl OnsaleReport {
    /// Writes the JSON report and, when asked, the HTML report with its plots.
    pub fn write_files(
        &self,
        json_path: &std::path::Path,
        html_path: Option<&std::path::Path>,
    ) -> anyhow::Result<()> {
        std::fs::write(
            json_path,
            serde_json::to_vec_pretty(&self.json).unwrap_or_default(),
        )
        .with_context(|| format!("writing {}", json_path.display()))?;
        if let Some(html_path) = html_path {
            std::fs::write(html_path, crate::report::render_html(&self.json))
                .with_context(|| format!("writing {}", html_path.display()))?;
        }
        Ok(())
    }
}

impl std::fmt::Display for OnsaleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.table)
    }
}

/// Runs the scenario to completion and writes the JSON report.
pub async fn run_onsale(scenario: &OnsaleScenario) -> anyhow::Result<OnsaleReport> {
    if !(scenario.scale > 0.0 && scenario.scale <= 10.0) {
        bail!("scale must be above 0 and at most 10");
    }
    if !(0.0..=1.0).contains(&scenario.abandon) {
        bail!("abandon must be between 0 and 1");
    }
    if scenario.sections == 0 || scenario.sections > 40 {
        bail!("sections must be between 1 and 40");
    }
    if !(5..=3600).contains(&scenario.hold_ttl_s) {
        bail!("hold-ttl-s must be between 5 and 3,600");
    }
    if scenario.max_in_flight == 0 || scenario.max_in_flight > 1_000_000 {
        bail!("max-in-flight must be between 1 and 1,000,000");
    }
    if !(0.0..1.0).contains(&scenario.presale_share) {
        bail!("presale-share must be at least 0 and below 1");
    }
    if scenario.presale_share > 0.0 && (scenario.event_id.is_some() || !scenario.waiting_room) {
        bail!("presale-share needs a created event (no --event-id) with its waiting room on");
    }
    let accounts = scenario.accounts();
    let arrival_s = scenario.arrival_s();
    if accounts == 0 || accounts > 100_000_000 {
        bail!("accounts must be between 1 and 100,000,000");
    }
    if !(0.0..=86_400.0).contains(&arrival_s) {
        bail!("arrival window must be between 0 and 86,400 s");
    }
    let http = reqwest::Client::builder()
        // Keep-alive for most requests on the wire: a fresh TCP connection per request
        // (accept, handshake, close, on both sides of one small machine) costs more CPU than
        // the request. Idle and busy together stay under the open-file limit.
        .pool_max_idle_per_host(scenario.max_in_flight.min(sockets_max() / 2))
        .timeout(Duration::from_secs(60))
        .build()?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let max_active = scenario
        .max_active
        .unwrap_or_else(|| default_max_active(scenario.scale));
    let event_id = match &scenario.event_id {
        Some(id) => id.clone(),
        None => {
            create_event(
                &http,
                &base,
                scenario,
                max_active,
                if scenario.door.random {
                    Duration::from_secs_f64(arrival_s) + Duration::from_secs(1)
                } else {
                    Duration::ZERO
                },
            )
            .await?
        }
    };
    // Sent again while the answer is lost or a 5xx (a node killed by a chaos run on a
    // cluster while it answered).
    let mut attempts = 0;
    let event: Value = loop {
        attempts += 1;
        let read = async {
            http.get(format!("{base}/v1/events/{event_id}"))
                .send()
                .await?
                .error_for_status()?
                .json::<Value>()
                .await
        }
        .await;
        match read {
            Ok(event) => break event,
            Err(error) if attempts < 10 && error.status().is_none_or(|s| s.is_server_error()) => {
                eprintln!("reading the event: {error}; sending it again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(error) => return Err(error).context("reading the event"),
        }
    };
    let sections: Vec<String> = event["sections"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if sections.is_empty() {
        bail!("event {event_id} has no sections: this scenario holds reserved seats");
    }
    let max_seats = event["maxSeatsPerHold"].as_u64().unwrap_or(6) as u32;
    let waiting_room = event["waitingRoom"]["enabled"].as_bool().unwrap_or(false);
    let venue_seats: u64 = event["sections"]
        .as_array()
        .map(|s| {
            s.iter()
                .map(|s| s["rows"].as_u64().unwrap_or(0) * s["seatsPerRow"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0);

    let started = Instant::now();
    let on_sale = match event["onSaleAt"]
        .as_str()
        .map(|at| time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339))
    {
        Some(Ok(at)) => {
            let ahead = at - time::OffsetDateTime::now_utc();
            started + Duration::try_from(ahead).unwrap_or(Duration::ZERO)
        }
        _ => started,
    };
    let presale_fans = (accounts as f64 * scenario.presale_share).floor() as u64;
    let presale_codes = if scenario.presale_share > 0.0 {
        presale_codes(&http, &base, &scenario.jwt_secret, &event_id, presale_fans).await?
    } else {
        Vec::new()
    };
    let presale_sections = presale_sections(sections.len() as u32);
    let mut bases = vec![base];
    bases.extend(
        scenario
            .other_base_urls
            .iter()
            .map(|url| url.trim_end_matches('/').to_owned()),
    );
    let shared = Arc::new(Shared {
        http,
        bases,
        event_id: event_id.clone(),
        secret: scenario.jwt_secret.clone(),
        run_tag: format!("{:06x}", rand::random::<u32>() & 0xff_ffff),
        sections,
        max_seats,
        waiting_room,
        refused_fans_wait: scenario.refused_fans_wait,
        presale_share: scenario.presale_share,
        presale_codes,
        presale_sections,
        venue_seats,
        house_free: AtomicU64::new(u64::MAX),
        house_held: AtomicU64::new(u64::MAX),
        abandon: scenario.abandon,
        cards: scenario.cards.clone(),
        started,
        on_sale,
        metrics: Mutex::new(Metrics {
            histograms: METRICS.iter().map(|_| histogram()).collect(),
            codes: BTreeMap::new(),
            outcomes: BTreeMap::new(),
            cards: BTreeMap::new(),
            sold_seats: 0,
            errors: 0,
            unexpected: 0,
            listed: Vec::new(),
            seconds: Vec::new(),
            queue_len_max: 0,
            admissions: Vec::new(),
            sold_out_answers: Vec::new(),
            sold_out_at: None,
            all_sold_at: None,
            waitlist_joined: 0,
            waitlist_offered: 0,
            lanes: BTreeMap::new(),
            last_fan_done: 0,
        }),
        gauges: Gauges::default(),
        sockets: Semaphore::new(sockets_max()),
    });
    eprintln!(
        "onsale: event {event_id}, {accounts} accounts over {arrival_s:.1} s, {} sections ({venue_seats} seats), max in flight {}, cards {}, abandon {}",
        shared.sections.len(),
        scenario.max_in_flight,
        scenario.cards.describe(),
        scenario.abandon
    );

    let ticker = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(
                (started + Duration::from_secs(1)).into(),
                Duration::from_secs(1),
            );
            loop {
                tick.tick().await;
                let gauges = shared.gauges.snapshot();
                let s = shared.second_of(Instant::now()).saturating_sub(1);
                let sold = {
                    let mut m = shared.lock();
                    let sold = m.sold_seats;
                    m.second(s).gauges = Some(gauges.clone());
                    sold
                };
                eprintln!(
                    "t={:>4}s arrived={}/{accounts} waiting={} shopping={} holding={} paying={} paid={} sold_seats={sold} done={} errors={} delayed_by_cap={}",
                    s + 1,
                    gauges["arrived"],
                    gauges["waiting"],
                    gauges["shopping"],
                    gauges["holding"],
                    gauges["paying"],
                    gauges["paid"],
                    gauges["done"],
                    gauges["errors"],
                    gauges["delayedByCap"],
                );
            }
        })
    };

    let watcher = match admin_token(&scenario.jwt_secret) {
        Ok(admin) if waiting_room => Some(tokio::spawn(watch_room(shared.clone(), admin))),
        _ => None,
    };
    let house = tokio::spawn(watch_house(shared.clone()));

    // The open loop: arrivals on schedule, each its own task.
    let slots = Arc::new(Semaphore::new(scenario.max_in_flight));
    for i in 0..accounts {
        let due = started + arrival_offset(i, accounts, arrival_s);
        tokio::time::sleep_until(due.into()).await;
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                shared.gauges.delayed_by_cap.fetch_add(1, Ordering::Relaxed);
                slots.clone().acquire_owned().await?
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let outcome = fan(shared.clone(), i, due).await;
            let done = shared.started.elapsed().as_micros() as u64;
            let mut m = shared.lock();
            *m.outcomes.entry(outcome.name()).or_default() += 1;
            if shared.presale_share > 0.0 {
                let lane = if in_presale(i, shared.presale_share) {
                    PRESALE_PHASE
                } else {
                    GENERAL_PHASE
                };
                let counts = m.lanes.entry(lane).or_default();
                counts[0] += 1;
                counts[2] += u64::from(outcome.held());
                counts[3] += u64::from(outcome == Outcome::Sold);
            }
            m.last_fan_done = m.last_fan_done.max(done);
            drop(m);
            shared.gauges.done.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    // Every task holds a permit until it ends.
    let _all = slots
        .acquire_many(scenario.max_in_flight as u32)
        .await
        .context("waiting for the last accounts")?;
    ticker.abort();
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    house.abort();
    let elapsed_s = started.elapsed().as_secs_f64();

    let report = build_report(
        &shared,
        scenario,
        accounts,
        arrival_s,
        max_active,
        venue_seats,
        elapsed_s,
    );
    Ok(report)
}

fn build_report(
    shared: &Shared,
    scenario: &OnsaleScenario,
    accounts: u64,
    arrival_s: f64,
    max_active: u32,
    venue_seats: u64,
    elapsed_s: f64,
) -> OnsaleReport {
    use std::fmt::Write;
    let m = shared.lock();
    let delayed_by_cap = shared.gauges.delayed_by_cap.load(Ordering::Relaxed);
    let mut table = String::new();
    let _ = writeln!(
        table,
        "onsale event={} accounts={accounts} arrival_s={arrival_s:.1} elapsed_s={elapsed_s:.1} sections={} venue_seats={venue_seats} max_active={} max_in_flight={} delayed_by_cap={delayed_by_cap}",
        shared.event_id,
        shared.sections.len(),
        if scenario.event_id.is_some() {
            "(event's own)".to_owned()
        } else {
            max_active.to_string()
        },
        scenario.max_in_flight,
    );
    let _ = writeln!(
        table,
        "{:<14} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "step", "count", "p50_ms", "p90_ms", "p99_ms", "max_ms"
    );
    let mut steps = serde_json::Map::new();
    for metric in METRICS {
        let h = &m.histograms[metric.index()];
        let _ = writeln!(
            table,
            "{:<14} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            metric.name(),
            h.len(),
            quantile_ms(h, 0.5),
            quantile_ms(h, 0.9),
            quantile_ms(h, 0.99),
            if h.is_empty() {
                0.0
            } else {
                h.max() as f64 / 1000.0
            },
        );
        steps.insert(
            metric.name().into(),
            json!({"count": h.len(), "p50Ms": quantile_ms(h, 0.5), "p90Ms": quantile_ms(h, 0.9),
                   "p99Ms": quantile_ms(h, 0.99), "p999Ms": quantile_ms(h, 0.999),
                   "maxMs": if h.is_empty() { 0.0 } else { h.max() as f64 / 1000.0 },
                   "histogram": crate::report::histogram_buckets(h)}),
        );
    }
    let outcome = |name: &str| m.outcomes.get(name).copied().unwrap_or(0);
    let _ = writeln!(
        table,
        "outcomes: {}",
        m.outcomes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (lane, [fans, admitted, held, sold]) in &m.lanes {
        let _ = writeln!(
            table,
            "lane {lane}: fans={fans} admitted={admitted} held={held} sold={sold}"
        );
    }
    let _ = writeln!(
        table,
        "sold_seats={} ({:.1}% of the venue) orders_confirmed={} queue_len_max={}",
        m.sold_seats,
        100.0 * m.sold_seats as f64 / venue_seats.max(1) as f64,
        outcome("sold"),
        m.queue_len_max
    );
    let on_sale_us = shared
        .on_sale
        .saturating_duration_since(shared.started)
        .as_micros() as u64;
    let all_sold_after_on_sale_s = m
        .all_sold_at
        .map(|at| at.saturating_sub(on_sale_us) as f64 / 1e6);
    let _ = writeln!(
        table,
        "every seat sold: {} after the on-sale; waiting list: {} fans refused seats joined, {} offered seats",
        all_sold_after_on_sale_s.map_or("not".to_owned(), |s| format!("{s:.1} s")),
        m.waitlist_joined,
        m.waitlist_offered,
    );
    let _ = writeln!(
        table,
        "cards at checkout: {}",
        m.cards
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let door = door_summary(shared, &m);
    if shared.waiting_room {
        let _ = writeln!(table, "{}", door_lines(&door));
    }
    let mut by_step: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut codes_json = serde_json::Map::new();
    for ((step, code), n) in &m.codes {
        by_step.entry(step).or_default().push(format!("{code}={n}"));
        let entry = codes_json
            .entry(step.to_string())
            .or_insert_with(|| json!({}));
        entry[code.to_string()] = json!(n);
    }
    let _ = writeln!(
        table,
        "status codes (0 = transport error): {}",
        by_step
            .iter()
            .map(|(k, v)| format!("{k}[{}]", v.join(" ")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(
        table,
        "errors (5xx/transport)={} unexpected={}",
        m.errors, m.unexpected
    );
    for line in &m.listed {
        let _ = writeln!(table, "  {line}");
    }

    let mut sold_total = 0u64;
    let series: Vec<Value> = m
        .seconds
        .iter()
        .enumerate()
        .map(|(s, second)| {
            sold_total += second.sold_seats;
            let mut steps = serde_json::Map::new();
            for metric in METRICS {
                if let Some(Some(h)) = second.metrics.get(metric.index()) {
                    steps.insert(
                        metric.name().into(),
                        json!({"count": h.len(), "p50Ms": quantile_ms(h, 0.5),
                               "p99Ms": quantile_ms(h, 0.99)}),
                    );
                }
            }
            json!({"second": s, "arrivals": second.arrivals, "errors": second.errors,
                   "queueLengthMax": second.queue_len_max, "soldSeats": second.sold_seats,
                   "soldSeatsTotal": sold_total, "admitted": second.admitted, "steps": steps,
                   "gauges": second.gauges.clone().unwrap_or(Value::Null),
                   "room": second.room.clone().unwrap_or(Value::Null)})
        })
        .collect();
    let json = json!({
        "scenario": {
            "baseUrl": scenario.base_url, "eventId": shared.event_id, "scale": scenario.scale,
            "accounts": accounts, "arrivalSeconds": arrival_s, "abandon": scenario.abandon,
            "cards": scenario.cards.describe(), "sections": shared.sections.len(),
            "venueSeats": venue_seats, "maxInFlight": scenario.max_in_flight,
            "maxActiveShoppers": if scenario.event_id.is_some() { Value::Null } else { json!(max_active) },
            "holdTtlSeconds": if scenario.event_id.is_some() { Value::Null } else { json!(scenario.hold_ttl_s) },
            "waitingRoom": shared.waiting_room,
            "refusedFansWait": shared.refused_fans_wait,
            "queuePolicy": if scenario.event_id.is_some() { Value::Null }
                           else if scenario.door.random { json!("random") } else { json!("fifo") },
            "startReleasePerSecond": scenario.door.start_release_per_s,
            "maxReleasePerSecond": scenario.door.max_release_per_s,
            "targetHoldP99Ms": scenario.door.target_hold_p99_ms,
            "queueWaitMaxSeconds": QUEUE_WAIT_MAX.as_secs(),
            "orderWaitMaxSeconds": ORDER_WAIT_MAX.as_secs(),
        },
        "elapsedSeconds": elapsed_s,
        "delayedByCap": delayed_by_cap,
        "steps": steps,
        "outcomes": m.outcomes,
        "lanes": m.lanes.iter().map(|(lane, [fans, admitted, held, sold])| {
            (lane.to_string(), json!({"fans": fans, "admitted": admitted, "held": held,
                                      "sold": sold}))
        }).collect::<serde_json::Map<String, Value>>(),
        "soldSeats": m.sold_seats,
        "everySeatSoldAfterOnSaleSeconds": all_sold_after_on_sale_s,
        "waitlistJoined": m.waitlist_joined,
        "waitlistOffered": m.waitlist_offered,
        "queueLengthMax": m.queue_len_max,
        "door": door,
        "cards": m.cards,
        "statusCodes": codes_json,
        "errors": m.errors,
        "unexpected": m.unexpected,
        "listed": m.listed,
        "perSecond": series,
    });
    OnsaleReport {
        event_id: shared.event_id.clone(),
        errors: m.errors,
        unexpected: m.unexpected,
        unsettled: outcome("unsettled"),
        json,
        table,
    }
}

/// The door's figures: when the house sold out and how fast every fan heard it, the
/// fairness of admissions, the controller's decisions over time.
fn door_summary(shared: &Shared, m: &Metrics) -> Value {
    let seconds = |us: u64| us as f64 / 1e6;
    let on_sale_us = shared
        .on_sale
        .saturating_duration_since(shared.started)
        .as_micros() as u64;
    let sold_out = m
        .sold_out_at
        .map(|at| seconds(at.saturating_sub(on_sale_us)));
    let last_answer = m.sold_out_answers.iter().max().copied();
    let lag = m
        .sold_out_at
        .zip(last_answer)
        .map(|(at, last)| seconds(last.saturating_sub(at)));
    let last_fan_after = m
        .sold_out_at
        .map(|at| seconds(m.last_fan_done.saturating_sub(at)));
    let mut by_position: Vec<(u64, u64)> = m.admissions.iter().map(|a| (a.0, a.2)).collect();
    let mut by_arrival: Vec<(u64, u64)> = m.admissions.iter().map(|a| (a.1, a.2)).collect();
    let n = m.admissions.len() as u64;
    let tau_position = crate::fairness::kendall_tau_b(&mut by_position);
    let tau_arrival = crate::fairness::kendall_tau_b(&mut by_arrival);
    // The controller's decisions: every second whose rate or reason differs from the last.
    let mut decisions = Vec::new();
    let mut last: Option<(Value, Value)> = None;
    for (s, second) in m.seconds.iter().enumerate() {
        let Some(room) = &second.room else { continue };
        let now = (room["releaseRatePerSecond"].clone(), room["reason"].clone());
        if last.as_ref() != Some(&now) {
            decisions.push(json!({"second": s, "releaseRatePerSecond": now.0, "reason": now.1}));
            last = Some(now);
        }
    }
    json!({
        "onSaleAfterStartSeconds": seconds(on_sale_us),
        "soldOutAfterOnSaleSeconds": sold_out,
        "soldOutAnswers": m.sold_out_answers.len(),
        "lastSoldOutAnswerAfterSoldOutSeconds": lag,
        "lastFanDoneAfterSoldOutSeconds": last_fan_after,
        "admitted": n,
        "tauQueuePositionAdmission": tau_position,
        "tauArrivalAdmission": tau_arrival,
        "arrivalAdmissionIndependenceZ": tau_arrival.map(|tau| crate::fairness::independence_z(tau, n)),
        "controller": decisions,
    })
}

fn door_lines(door: &Value) -> String {
    let f = |key: &str| {
        door[key]
            .as_f64()
            .map_or("-".to_owned(), |v| format!("{v:.1}"))
    };
    let tau = |key: &str| {
        door[key]
            .as_f64()
            .map_or("-".to_owned(), |v| format!("{v:.4}"))
    };
    let mut out = format!(
        "door: sold out {} s after on-sale; sold_out_answers={} last {} s after the sell-out; last fan done {} s after it; admitted={}\n",
        f("soldOutAfterOnSaleSeconds"),
        door["soldOutAnswers"],
        f("lastSoldOutAnswerAfterSoldOutSeconds"),
        f("lastFanDoneAfterSoldOutSeconds"),
        door["admitted"],
    );
    out.push_str(&format!(
        "fairness: tau(queue position, admission order)={} tau(arrival, admission order)={} (independence z={})\n",
        tau("tauQueuePositionAdmission"),
        tau("tauArrivalAdmission"),
        f("arrivalAdmissionIndependenceZ"),
    ));
    out.push_str("controller (rate/s, reason, when either changed):");
    let decisions = door["controller"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for decision in decisions.iter().take(40) {
        out.push_str(&format!(
            "\n  t={:>4}s {:>6} {}",
            decision["second"],
            decision["releaseRatePerSecond"],
            decision["reason"].as_str().unwrap_or("")
        ));
    }
    if decisions.len() > 40 {
        out.push_str(&format!(
            "\n  ... {} more in the JSON report",
            decisions.len() - 40
        ));
    }
    out
}

/// Requests this process has on the wire at most: half its open-file limit (read from
/// `/proc/self/limits`), or [`SOCKETS_DEFAULT`] where that cannot be read. Half, not more:
/// the client also holds its idle keep-alive connections and the connects it starts while
/// a request waits for one, and a server with the same limit accepts three quarters of it
/// (`serve --max-connections`); at three quarters the on-sale still ran out of descriptors.
fn sockets_max() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line["Max open files".len()..]
                .split_whitespace()
                .next()?
                .parse::<usize>()
                .ok()
        });
    soft.map_or(SOCKETS_DEFAULT, |n| (n / 2).max(64))
}

/// An error with its causes ("error sending request: connection refused"): reqwest's own
/// message names only the request.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presale_share_is_exact_and_spread_over_the_arrivals() {
        assert!((0..1_000).all(|i| !in_presale(i, 0.0)));
        let presale: Vec<u64> = (0..1_000).filter(|&i| in_presale(i, 0.3)).collect();
        assert_eq!(presale.len(), 300);
        // Spread evenly: every ten arrivals hold three presale fans.
        for tens in 0..100 {
            let n = presale.iter().filter(|&&i| i / 10 == tens).count();
            assert_eq!(n, 3, "arrivals {}-{}", tens * 10, tens * 10 + 9);
        }
        assert_eq!((0..7).filter(|&i| in_presale(i, 0.5)).count(), 3);
        assert_eq!(presale_sections(1), 1);
        assert_eq!(presale_sections(5), 3);
        assert_eq!(presale_sections(10), 5);
        assert_eq!(
            queue_path("e1", Some(PRESALE_PHASE)),
            "/v1/events/e1/queue?phaseId=fanclub"
        );
        assert_eq!(queue_path("e1", None), "/v1/events/e1/queue");
    }

    #[test]
    fn card_mix_parses_and_picks_by_weight() {
        let mix: CardMix = "visa=70,declined=10,3ds=10,slow=5,timeout=5"
            .parse()
            .unwrap();
        assert_eq!(mix, CardMix::default());
        assert_eq!(mix.total(), 100);
        assert_eq!(mix.pick(0), Card::Visa);
        assert_eq!(mix.pick(69), Card::Visa);
        assert_eq!(mix.pick(70), Card::Declined);
        assert_eq!(mix.pick(80), Card::ThreeDs);
        assert_eq!(mix.pick(90), Card::Slow);
        assert_eq!(mix.pick(99), Card::Timeout);
        let mut counts = BTreeMap::new();
        for roll in 0..mix.total() {
            *counts.entry(mix.pick(roll)).or_insert(0) += 1;
        }
        assert_eq!(counts[&Card::Visa], 70);
        assert_eq!(counts[&Card::Timeout], 5);
        let only: CardMix = " 3ds = 1 , visa=0".parse().unwrap();
        assert_eq!(only.pick(0), Card::ThreeDs);
        assert_eq!(only.describe(), "3ds=1,visa=0");
        assert_eq!(Card::ThreeDs.token(), "pm_card_threeDSecure2Required");
        for bad in [
            "",
            "visa",
            "visa=x",
            "amex=5",
            "visa=0",
            "visa=1,visa=2",
            "visa=-1",
        ] {
            assert!(bad.parse::<CardMix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sections_stay_in_range_and_prefer_the_best() {
        for n in [1u32, 2, 10, 40] {
            let mut counts = vec![0u32; n as usize];
            for k in 0..10_000 {
                let u = f64::from(k) / 10_000.0;
                let s = pick_section(u, n);
                assert!(s < n, "{s} of {n}");
                counts[s as usize] += 1;
            }
            assert_eq!(pick_section(0.0, n), 0);
            assert_eq!(pick_section(0.999_999, n), n - 1);
            assert_eq!(pick_section(1.0, n), n - 1);
            // Non-increasing: the better the section, the more fans want it.
            assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
        }
        // Ten sections: the best gets about a third (1/H10), twice the second's share.
        let mut counts = [0u32; 10];
        for k in 0..100_000 {
            counts[pick_section(f64::from(k) / 100_000.0, 10) as usize] += 1;
        }
        assert!((33_000..35_000).contains(&counts[0]), "{counts:?}");
        assert!((counts[0] as f64 / counts[1] as f64 - 2.0).abs() < 0.02);
        assert_eq!(pick_section(0.5, 0), 0);
    }

    #[test]
    fn schedule_spreads_arrivals_evenly() {
        assert_eq!(arrival_offset(0, 20_000, 3.0), Duration::ZERO);
        assert_eq!(
            arrival_offset(10_000, 20_000, 3.0),
            Duration::from_secs_f64(1.5)
        );
        let last = arrival_offset(19_999, 20_000, 3.0);
        assert!(last < Duration::from_secs(3) && last > Duration::from_secs_f64(2.999));
        let mut previous = Duration::ZERO;
        for i in 0..1000 {
            let at = arrival_offset(i, 1000, 300.0);
            assert!(at >= previous);
            previous = at;
        }
        assert_eq!(arrival_offset(5, 10, 0.0), Duration::ZERO);
        let scenario = OnsaleScenario {
            base_url: String::new(),
            other_base_urls: Vec::new(),
            jwt_secret: String::new(),
            scale: 0.01,
            accounts: None,
            arrival_s: None,
            abandon: 0.2,
            cards: CardMix::default(),
            sections: 10,
            max_in_flight: 2000,
            max_active: None,
            event_id: None,
            hold_ttl_s: HOLD_TTL_S,
            waiting_room: true,
            refused_fans_wait: true,
            report: "r.json".into(),
            door: DoorSettings::default(),
            presale_share: 0.0,
        };
        assert_eq!(scenario.accounts(), 20_000);
        assert!((scenario.arrival_s() - 3.0).abs() < 1e-9);
        assert_eq!(default_max_active(0.001), 200);
        assert_eq!(default_max_active(0.01), 1_000);
        assert_eq!(default_max_active(1.0), 10_000);
    }
}
