//! Exchanges (rebooking) per second on one hot trip, open loop.
//!
//! Setup: one event ("Hot trip") with one section of equal-priced seats, rows of 100, twice
//! as many seats as owners. Each of N owners (an account each) buys one seat (hold, then
//! checkout with `pm_card_visa`), [`SETUP_CONCURRENCY`] at once, and the scenario waits until
//! every order's ticket is issued and its payment captured: only then can an order be
//! exchanged.
//!
//! Timed phase, the open loop of [`crate::micro`]: request `i` takes a ready ticket (order,
//! seat, owner) and a free seat when it is due and exchanges one for the other with a fresh
//! idempotency key. A ticket goes around ([`Pools`]):
//!
//! - `201 COMPLETED`: the old seat is free again; the new order (`newOrderId`, the target
//!   seat, the same owner) is ready at once (an exchange that completes issues the new
//!   ticket in its own transaction, its payment settled by the old one's). Should an order
//!   answer `409 EXCHANGE_CONFLICT` "not issued yet" or "not captured yet", it is counted as
//!   `not_ready` and waits [`REQUEUE_AFTER`].
//! - Any other `409`: a refusal, counted by its `code`; ticket and seat go back at once.
//! - No answer, `5xx`, `429` or `409 IDEMPOTENCY_IN_PROGRESS`: the exchange may or may not
//!   have happened. Counted as an error, and sent again later as it was (same key, same
//!   target seat): the replay answers what happened, so no ticket or seat is lost.
//! - Anything else: an error; ticket and seat go back at once.
//!
//! A request due when no ticket is ready (or no seat is free) is skipped and counted as
//! `starved`; it is not sent. Each ticket is in flight for its answer's latency, so N must
//! exceed rate x latency for starving to stay rare: the default 8,000 owners carry 5,000
//! exchanges/s at up to 1.6 s of latency.
//! Only the `201` answers are timed, from when each request was due.

use std::cmp::Ordering as Order;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::micro::{
    ERROR_BODIES_KEPT, ERROR_BODY_CHARS_MAX, ORDER_POLL, SETUP_CONCURRENCY, call, call_json,
    check_open_loop, hold_and_pay, http_client, key, max_ms, open_loop, quantile_ms,
    run_concurrently, run_tag, seconds_or, token,
};
use crate::{SEATS_PER_ROW, section_name};

/// Most owners (and tickets in rotation): 40,000 seats.
pub const ORDERS_MAX: usize = 20_000;
/// How long after a `not_ready` or unknown outcome the ticket is tried again.
pub const REQUEUE_AFTER: Duration = Duration::from_secs(1);
/// Setup waits this long at most for one order's ticket and capture.
const TICKET_WAIT_MAX: Duration = Duration::from_secs(60);
const SEAT_PRICE_MINOR: i64 = 5_000;

/// Settings of the exchanges scenario.
#[derive(Debug, Clone)]
pub struct ExchangesScenario {
    pub base_url: String,
    pub jwt_secret: String,
    /// Owners, each with one ticketed order before timing starts: the tickets in rotation.
    pub orders: usize,
    /// Exchanges offered per second.
    pub rate: f64,
    pub duration_s: u64,
    pub max_in_flight: usize,
}

impl ExchangesScenario {
    /// The defaults: 8,000 owners, 1,000 exchanges/s for 10 s, 1,024 in flight.
    pub fn new(base_url: &str, jwt_secret: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            jwt_secret: jwt_secret.to_owned(),
            orders: 8_000,
            rate: 1000.0,
            duration_s: 10,
            max_in_flight: 1024,
        }
    }
}

/// What an exchanges run measured.
#[derive(Debug, Clone)]
pub struct ExchangesReport {
    pub event_id: String,
    pub orders: usize,
    /// Seconds spent buying the orders and waiting for their tickets and captures.
    pub setup_s: f64,
    /// Exchanges offered per second.
    pub rate: f64,
    /// Requests sent (the starved ones were not).
    pub sent: u64,
    /// Answered `201` with status `COMPLETED`.
    pub completed: u64,
    /// `409` refusals by `code` (`not_ready` and `IDEMPOTENCY_IN_PROGRESS` apart).
    pub conflicts: BTreeMap<String, u64>,
    /// `409 EXCHANGE_CONFLICT` because the order's tickets were not issued or its payment
    /// not captured yet.
    pub not_ready: u64,
    /// Every other answer, transport failures included.
    pub errors: u64,
    /// Status and body of the first few errors.
    pub first_errors: Vec<String>,
    /// Requests due when no ticket was ready (or no seat free): skipped.
    pub starved: u64,
    /// Requests that found `max_in_flight` requests out when they were due.
    pub delayed: u64,
    /// Of the `201` answers, from when each request was due.
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub elapsed_s: f64,
}

impl ExchangesReport {
    /// Completed exchanges per second.
    pub fn achieved_per_s(&self) -> f64 {
        self.completed as f64 / seconds_or(self.elapsed_s)
    }

    pub fn conflicts_total(&self) -> u64 {
        self.conflicts.values().sum()
    }

    /// The report as one JSON object (camelCase, as the on-sale report).
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": "exchanges",
            "eventId": self.event_id,
            "orders": self.orders,
            "setupS": self.setup_s,
            "offeredPerS": self.rate,
            "achievedPerS": self.achieved_per_s(),
            "sent": self.sent,
            "completed": self.completed,
            "conflicts": self.conflicts_total(),
            "conflictsByCode": self.conflicts,
            "notReady": self.not_ready,
            "errors": self.errors,
            "firstErrors": self.first_errors,
            "starved": self.starved,
            "delayed": self.delayed,
            "p50Ms": self.p50_ms,
            "p90Ms": self.p90_ms,
            "p99Ms": self.p99_ms,
            "maxMs": self.max_ms,
            "elapsedS": self.elapsed_s,
        })
    }
}

impl std::fmt::Display for ExchangesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let by_code: Vec<String> = self
            .conflicts
            .iter()
            .map(|(code, n)| format!("{code}:{n}"))
            .collect();
        write!(
            f,
            "offered/s={:.0} achieved/s={:.0} sent={} completed={} conflicts={} conflict_codes={} not_ready={} errors={} starved={} delayed={} p50_ms={:.1} p90_ms={:.1} p99_ms={:.1} max_ms={:.1} elapsed_s={:.1} orders={} setup_s={:.1}",
            self.rate,
            self.achieved_per_s(),
            self.sent,
            self.completed,
            self.conflicts_total(),
            if by_code.is_empty() {
                "-".to_owned()
            } else {
                by_code.join(",")
            },
            self.not_ready,
            self.errors,
            self.starved,
            self.delayed,
            self.p50_ms,
            self.p90_ms,
            self.p99_ms,
            self.max_ms,
            self.elapsed_s,
            self.orders,
            self.setup_s
        )?;
        if !self.first_errors.is_empty() {
            write!(f, " first_errors={:?}", self.first_errors.join(" | "))?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Seats
// ---------------------------------------------------------------------------------------

/// Rows of [`SEATS_PER_ROW`] seats holding twice `orders` seats.
fn layout_rows(orders: usize) -> u32 {
    (2 * orders as u32).div_ceil(SEATS_PER_ROW)
}

/// The id of seat `index` (from 0), row by row: `S0-1-1` … `S0-1-100`, `S0-2-1` ….
fn seat_id(index: u32) -> String {
    format!(
        "{}-{}-{}",
        section_name(0),
        index / SEATS_PER_ROW + 1,
        index % SEATS_PER_ROW + 1
    )
}

// ---------------------------------------------------------------------------------------
// Tickets and seats in rotation
// ---------------------------------------------------------------------------------------

/// A ticket in rotation: the order holding it, its seat (an index, see [`seat_id`]), its
/// owner (an index into the tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ticket {
    order_id: String,
    seat: u32,
    owner: usize,
    /// An exchange of it whose outcome is unknown, to send again as it was: key and target.
    retry: Option<(String, u32)>,
}

impl Ticket {
    fn new(order_id: String, seat: u32, owner: usize) -> Self {
        Self {
            order_id,
            seat,
            owner,
            retry: None,
        }
    }
}

/// One exchange to send: `ticket`'s seat for `to_seat`, with idempotency key `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Attempt {
    ticket: Ticket,
    to_seat: u32,
    key: String,
}

/// A ticket waiting until `at`; `seq` keeps equal times first in, first out.
#[derive(Debug)]
struct Waiting {
    at: Instant,
    seq: u64,
    ticket: Ticket,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Waiting {}

impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<Order> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiting {
    /// Reversed, so that the max-heap yields the earliest first.
    fn cmp(&self, other: &Self) -> Order {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The tickets ready to exchange (oldest first), those waiting for a time, and the free
/// seats (longest free first). A ticket or seat out in an attempt is in none of them.
#[derive(Debug, Default)]
struct Pools {
    ready: VecDeque<Ticket>,
    waiting: BinaryHeap<Waiting>,
    free: VecDeque<u32>,
    seq: u64,
}

impl Pools {
    fn new(tickets: Vec<Ticket>, free: impl IntoIterator<Item = u32>) -> Self {
        Self {
            ready: tickets.into(),
            free: free.into_iter().collect(),
            ..Self::default()
        }
    }

    /// The next exchange, or `None` when no ticket is ready at `now` or no seat is free.
    fn take(&mut self, now: Instant) -> Option<Attempt> {
        while self.waiting.peek().is_some_and(|w| w.at <= now) {
            let due = self.waiting.pop().expect("peeked");
            self.ready.push_back(due.ticket);
        }
        let mut ticket = self.ready.pop_front()?;
        let (key, to_seat) = match ticket.retry.take() {
            Some(retry) => retry,
            None => match self.free.pop_front() {
                Some(seat) => (key(), seat),
                None => {
                    self.ready.push_front(ticket);
                    return None;
                }
            },
        };
        Some(Attempt {
            ticket,
            to_seat,
            key,
        })
    }

    fn wait(&mut self, ticket: Ticket, at: Instant) {
        self.seq += 1;
        self.waiting.push(Waiting {
            at,
            seq: self.seq,
            ticket,
        });
    }

    /// Completed: the old seat is free; the new order's ticket is tried from `ready_at`.
    fn completed(&mut self, attempt: Attempt, new_order_id: String, ready_at: Instant) {
        self.free.push_back(attempt.ticket.seat);
        let ticket = Ticket::new(new_order_id, attempt.to_seat, attempt.ticket.owner);
        self.wait(ticket, ready_at);
    }

    /// Nothing changed: the target seat is free, the ticket is tried again from `ready_at`.
    fn refused(&mut self, attempt: Attempt, ready_at: Instant) {
        self.free.push_back(attempt.to_seat);
        self.wait(attempt.ticket, ready_at);
    }

    /// Maybe done, maybe not: the same request is sent again from `ready_at`; its target
    /// stays reserved for it.
    fn unknown(&mut self, attempt: Attempt, ready_at: Instant) {
        let mut ticket = attempt.ticket;
        ticket.retry = Some((attempt.key, attempt.to_seat));
        self.wait(ticket, ready_at);
    }

    /// Tickets in rotation (ready or waiting) and free seats, attempts out excluded.
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        (self.ready.len() + self.waiting.len(), self.free.len())
    }
}

/// What an answer to an exchange means for its ticket and seat.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// `201 COMPLETED`: the new order's id.
    Completed(String),
    /// `409 EXCHANGE_CONFLICT`: the order's tickets are not issued or its payment not
    /// captured yet.
    NotReady,
    /// Any other `409` with this `code`: nothing changed.
    Refused(String),
    /// No answer, `5xx`, `429`, `409 IDEMPOTENCY_IN_PROGRESS`: it may have happened.
    Unknown,
    /// `201` but not completed (a price difference to pay): ticket and seat leave rotation.
    Stuck,
    /// Anything else (`4xx`): nothing changed.
    Failed,
}

fn classify(status: u16, body: &Value) -> Outcome {
    let code = body["code"].as_str().unwrap_or_default();
    match status {
        201 => match (body["status"].as_str(), body["newOrderId"].as_str()) {
            (Some("COMPLETED"), Some(new_order_id)) => Outcome::Completed(new_order_id.to_owned()),
            _ => Outcome::Stuck,
        },
        409 if code == "IDEMPOTENCY_IN_PROGRESS" => Outcome::Unknown,
        409 if code == "EXCHANGE_CONFLICT"
            && body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("not issued") || d.contains("not captured")) =>
        {
            Outcome::NotReady
        }
        409 if !code.is_empty() => Outcome::Refused(code.to_owned()),
        0 | 429 | 500..=599 => Outcome::Unknown,
        _ => Outcome::Failed,
    }
}

/// The pools and the counts, shared by every request of the timed phase.
#[derive(Debug, Default)]
struct Rotation {
    pools: Mutex<Pools>,
    completed: AtomicU64,
    not_ready: AtomicU64,
    conflicts: Mutex<BTreeMap<String, u64>>,
    errors: AtomicU64,
    first_errors: Mutex<Vec<String>>,
    starved: AtomicU64,
}

impl Rotation {
    fn pools(&self) -> std::sync::MutexGuard<'_, Pools> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next exchange, or `None` (counted as starved).
    fn take(&self, now: Instant) -> Option<Attempt> {
        let attempt = self.pools().take(now);
        if attempt.is_none() {
            self.starved.fetch_add(1, Ordering::Relaxed);
        }
        attempt
    }

    /// Counts the answer, puts the ticket and seats back; whether it completed.
    fn settle(&self, attempt: Attempt, status: u16, body: &[u8], now: Instant) -> bool {
        let answer: Value = serde_json::from_slice(body).unwrap_or_default();
        let later = now + REQUEUE_AFTER;
        match classify(status, &answer) {
            Outcome::Completed(new_order_id) => {
                self.completed.fetch_add(1, Ordering::Relaxed);
                // The new ticket is issued in the exchange's own transaction: ready now.
                self.pools().completed(attempt, new_order_id, now);
                return true;
            }
            Outcome::NotReady => {
                self.not_ready.fetch_add(1, Ordering::Relaxed);
                self.pools().refused(attempt, later);
            }
            Outcome::Refused(code) => {
                let mut conflicts = self.conflicts.lock().unwrap_or_else(|e| e.into_inner());
                *conflicts.entry(code).or_default() += 1;
                drop(conflicts);
                self.pools().refused(attempt, now);
            }
            outcome => {
                self.error(status, body);
                match outcome {
                    Outcome::Unknown => self.pools().unknown(attempt, later),
                    Outcome::Failed => self.pools().refused(attempt, now),
                    _ => {}
                }
            }
        }
        false
    }

    fn error(&self, status: u16, body: &[u8]) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.first_errors.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() < ERROR_BODIES_KEPT {
            let body: String = String::from_utf8_lossy(body)
                .chars()
                .take(ERROR_BODY_CHARS_MAX)
                .collect();
            kept.push(format!("{status} {body}"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------------------

/// Creates the hot trip: one section of `rows` rows of equal-priced seats, exchangeable
/// until it starts (far ahead).
async fn create_trip(
    http: &reqwest::Client,
    base: &str,
    jwt_secret: &str,
    rows: u32,
) -> anyhow::Result<String> {
    let spec = json!({
        "name": "Hot trip",
        "startsAt": "2035-01-01T08:00:00Z",
        "currency": "EUR",
        "holdTtlSeconds": 600,
        "exchangeCutoffSeconds": 0,
        "maxTicketsPerAccount": 6,
        "sections": [{"name": section_name(0), "rows": rows, "seatsPerRow": SEATS_PER_ROW, "priceMinor": SEAT_PRICE_MINOR}],
    });
    let admin = token(jwt_secret, "load-admin", true)?;
    let request = http.post(format!("{base}/v1/admin/events"));
    let request = request.bearer_auth(admin).header("idempotency-key", key());
    match call_json(request.json(&spec)).await {
        (201, trip) => Ok(trip["eventId"].as_str().context("eventId")?.to_owned()),
        (status, answer) => bail!("creating the hot trip answered {status}: {answer}"),
    }
}

/// Polls the order until its ticket is issued and its payment captured (an exchange needs
/// both).
async fn wait_until_exchangeable(
    http: &reqwest::Client,
    base: &str,
    order_id: &str,
    fan_token: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + TICKET_WAIT_MAX;
    loop {
        let url = format!("{base}/v1/orders/{order_id}");
        let (status, order) = call_json(http.get(url).bearer_auth(fan_token)).await;
        match status {
            200 if order["paymentStatus"] == "CAPTURED"
                && order["tickets"].as_array().is_some_and(|t| !t.is_empty()) =>
            {
                return Ok(());
            }
            // Not yet, overload or a transport hiccup: poll again.
            200 | 0 | 429 | 503 => {}
            _ => bail!("reading order {order_id} answered {status}: {order}"),
        }
        if Instant::now() >= deadline {
            bail!(
                "order {order_id} has no ticket or no capture after {}s: {order}",
                TICKET_WAIT_MAX.as_secs()
            );
        }
        tokio::time::sleep(ORDER_POLL).await;
    }
}

/// Owner `i` buys seat `i` and waits for its ticket and capture, [`SETUP_CONCURRENCY`]
/// owners at once; prints progress to stderr every second (`ticketed`: both done).
async fn buy_tickets(
    http: &reqwest::Client,
    base: &str,
    event_id: &str,
    tokens: &Arc<Vec<String>>,
) -> anyhow::Result<Vec<Ticket>> {
    let n = tokens.len();
    let paid = Arc::new(AtomicUsize::new(0));
    let ticketed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let ticker = {
        let (paid, ticketed) = (paid.clone(), ticketed.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                eprintln!(
                    "setup t={:.0}s paid={}/{n} ticketed={}/{n}",
                    started.elapsed().as_secs_f64(),
                    paid.load(Ordering::Relaxed),
                    ticketed.load(Ordering::Relaxed)
                );
            }
        })
    };
    let (base, event_id) = (Arc::new(base.to_owned()), Arc::new(event_id.to_owned()));
    let bought = run_concurrently((0..n).collect(), SETUP_CONCURRENCY, |owner: usize| {
        let seat = owner as u32;
        let fan = tokens[owner].clone();
        let body = json!({ "seatIds": [seat_id(seat)] });
        let paying = hold_and_pay(
            http.clone(),
            base.clone(),
            event_id.clone(),
            fan.clone(),
            body,
        );
        let (http, base, paid, ticketed) =
            (http.clone(), base.clone(), paid.clone(), ticketed.clone());
        async move {
            let order_id = paying.await?;
            paid.fetch_add(1, Ordering::Relaxed);
            wait_until_exchangeable(&http, &base, &order_id, &fan).await?;
            ticketed.fetch_add(1, Ordering::Relaxed);
            Ok(Ticket::new(order_id, seat, owner))
        }
    })
    .await;
    ticker.abort();
    bought
}

// ---------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------

/// Runs the exchanges scenario to completion.
pub async fn run_exchanges(scenario: &ExchangesScenario) -> anyhow::Result<ExchangesReport> {
    check_open_loop(scenario.rate, scenario.duration_s, scenario.max_in_flight)?;
    if scenario.orders == 0 || scenario.orders > ORDERS_MAX {
        bail!("orders must be between 1 and {ORDERS_MAX}");
    }
    let http = http_client(scenario.max_in_flight.clamp(SETUP_CONCURRENCY, 4096))?;
    let base = scenario.base_url.trim_end_matches('/').to_owned();
    let rows = layout_rows(scenario.orders);
    let event_id = create_trip(&http, &base, &scenario.jwt_secret, rows).await?;
    let tag = run_tag();
    let tokens: Arc<Vec<String>> = Arc::new(
        (0..scenario.orders)
            .map(|i| token(&scenario.jwt_secret, &format!("xc-{tag}-{i}"), false))
            .collect::<anyhow::Result<_>>()?,
    );
    let setup_started = Instant::now();
    let tickets = buy_tickets(&http, &base, &event_id, &tokens)
        .await
        .context("buying the tickets")?;
    let setup_s = setup_started.elapsed().as_secs_f64();
    eprintln!(
        "setup done: {} ticketed orders in {setup_s:.1}s",
        tickets.len()
    );

    let free = scenario.orders as u32..rows * SEATS_PER_ROW;
    let rotation = Arc::new(Rotation {
        pools: Mutex::new(Pools::new(tickets, free)),
        ..Rotation::default()
    });
    let send = {
        let rotation = rotation.clone();
        move |_: ()| {
            let attempt = rotation.take(Instant::now());
            let request = attempt.as_ref().map(|a| {
                let from = seat_id(a.ticket.seat);
                http.post(format!("{base}/v1/orders/{}/exchanges", a.ticket.order_id))
                    .bearer_auth(&tokens[a.ticket.owner])
                    .header("idempotency-key", &a.key)
                    .json(&json!({"fromSeatIds": [from], "toSeatIds": [seat_id(a.to_seat)]}))
            });
            let rotation = rotation.clone();
            async move {
                let (Some(attempt), Some(request)) = (attempt, request) else {
                    return false;
                };
                let (status, body) = call(request).await;
                rotation.settle(attempt, status, &body, Instant::now())
            }
        }
    };
    let run = open_loop(
        scenario.rate,
        scenario.duration_s,
        scenario.max_in_flight,
        |_| (),
        send,
    )
    .await;
    let starved = rotation.starved.load(Ordering::Relaxed);
    let conflicts = rotation
        .conflicts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let first_errors = rotation
        .first_errors
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(ExchangesReport {
        event_id,
        orders: scenario.orders,
        setup_s,
        rate: scenario.rate,
        sent: run.sent - starved,
        completed: rotation.completed.load(Ordering::Relaxed),
        conflicts,
        not_ready: rotation.not_ready.load(Ordering::Relaxed),
        errors: rotation.errors.load(Ordering::Relaxed),
        first_errors,
        starved,
        delayed: run.delayed,
        p50_ms: quantile_ms(&run.latencies, 0.50),
        p90_ms: quantile_ms(&run.latencies, 0.90),
        p99_ms: quantile_ms(&run.latencies, 0.99),
        max_ms: max_ms(&run.latencies),
        elapsed_s: run.elapsed_s,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn ticket(order: &str, seat: u32, owner: usize) -> Ticket {
        Ticket::new(order.to_owned(), seat, owner)
    }

    #[test]
    fn the_trip_has_two_seats_per_owner_in_rows_of_100() {
        assert_eq!(layout_rows(1), 1);
        assert_eq!(layout_rows(50), 1);
        assert_eq!(layout_rows(51), 2);
        assert_eq!(layout_rows(2_000), 40);
        assert_eq!(layout_rows(ORDERS_MAX), 400);
        assert_eq!(seat_id(0), "S0-1-1");
        assert_eq!(seat_id(99), "S0-1-100");
        assert_eq!(seat_id(100), "S0-2-1");
        let rows = layout_rows(ORDERS_MAX);
        let ids: HashSet<String> = (0..rows * SEATS_PER_ROW).map(seat_id).collect();
        assert_eq!(ids.len(), 2 * ORDERS_MAX);
        assert!(ids.contains("S0-400-100"));
    }

    #[test]
    fn a_completed_exchange_frees_the_old_seat_and_rests_the_new_ticket() {
        let now = Instant::now();
        let mut pools = Pools::new(vec![ticket("o1", 0, 7), ticket("o2", 1, 8)], [2, 3]);
        let first = pools.take(now).unwrap();
        assert_eq!((first.ticket.order_id.as_str(), first.to_seat), ("o1", 2));
        assert!(!first.key.is_empty());
        pools.completed(first, "o1b".to_owned(), now + REQUEUE_AFTER);
        assert_eq!(pools.sizes(), (2, 2));
        // o2 is next, then the free seats in the order they came back.
        let second = pools.take(now).unwrap();
        assert_eq!((second.ticket.order_id.as_str(), second.to_seat), ("o2", 3));
        // The new order is not tried before its time; seat 0 is free again.
        assert_eq!(pools.take(now), None);
        let third = pools.take(now + REQUEUE_AFTER).unwrap();
        assert_eq!(third.ticket, ticket("o1b", 2, 7));
        assert_eq!(third.to_seat, 0);
    }

    #[test]
    fn a_refusal_puts_both_back_and_not_ready_waits() {
        let now = Instant::now();
        let mut pools = Pools::new(vec![ticket("o1", 0, 0), ticket("o2", 1, 1)], [2, 3]);
        let a = pools.take(now).unwrap();
        let key = a.key.clone();
        pools.refused(a, now);
        assert_eq!(pools.sizes(), (2, 2));
        let b = pools.take(now).unwrap();
        assert_eq!(b.ticket.order_id, "o2");
        let again = pools.take(now).unwrap();
        assert_eq!(again.ticket, ticket("o1", 0, 0));
        assert_ne!(again.key, key, "a refused exchange is tried anew");
        pools.refused(again, now + REQUEUE_AFTER);
        assert_eq!(pools.take(now), None);
        assert_eq!(
            pools.take(now + REQUEUE_AFTER).unwrap().ticket.order_id,
            "o1"
        );
    }

    #[test]
    fn an_unknown_outcome_is_sent_again_as_it_was() {
        let now = Instant::now();
        let mut pools = Pools::new(vec![ticket("o1", 0, 0)], [1, 2]);
        let a = pools.take(now).unwrap();
        let (key, to_seat) = (a.key.clone(), a.to_seat);
        pools.unknown(a, now);
        // The target stays reserved: only seat 2 is free.
        assert_eq!(pools.sizes(), (1, 1));
        let again = pools.take(now).unwrap();
        assert_eq!((again.key.as_str(), again.to_seat), (key.as_str(), to_seat));
        assert_eq!(again.ticket, ticket("o1", 0, 0));
        // Replayed as completed: all back in rotation.
        pools.completed(again, "o1b".to_owned(), now);
        assert_eq!(pools.sizes(), (1, 2));
    }

    #[test]
    fn no_seat_free_starves_without_losing_the_ticket() {
        let now = Instant::now();
        let mut pools = Pools::new(vec![ticket("o1", 0, 0), ticket("o2", 1, 1)], [2]);
        let a = pools.take(now).unwrap();
        assert_eq!(pools.take(now), None);
        assert_eq!(pools.sizes(), (1, 0));
        pools.refused(a, now);
        assert_eq!(pools.take(now).unwrap().ticket.order_id, "o2");
    }

    #[test]
    fn waiting_tickets_come_back_earliest_first() {
        let now = Instant::now();
        let mut pools = Pools::new(Vec::new(), [9]);
        pools.wait(ticket("late", 0, 0), now + Duration::from_secs(2));
        pools.wait(ticket("early", 1, 1), now + Duration::from_secs(1));
        pools.wait(ticket("early-too", 2, 2), now + Duration::from_secs(1));
        let order: Vec<String> = (0..3)
            .map(|_| {
                let a = pools.take(now + Duration::from_secs(3)).unwrap();
                let id = a.ticket.order_id.clone();
                pools.refused(a, now + Duration::from_secs(10));
                id
            })
            .collect();
        assert_eq!(order, ["early", "early-too", "late"]);
    }

    #[test]
    fn answers_are_classified() {
        let done = json!({"exchangeId": "x", "status": "COMPLETED", "newOrderId": "n"});
        assert_eq!(classify(201, &done), Outcome::Completed("n".to_owned()));
        let unpaid = json!({"status": "PAYMENT_REQUIRED"});
        assert_eq!(classify(201, &unpaid), Outcome::Stuck);
        let not_issued = json!({"code": "EXCHANGE_CONFLICT",
            "detail": "the order's tickets are not issued yet; try again in a moment"});
        assert_eq!(classify(409, &not_issued), Outcome::NotReady);
        let not_captured = json!({"code": "EXCHANGE_CONFLICT",
            "detail": "the payment of order o is not captured yet; try again in a moment"});
        assert_eq!(classify(409, &not_captured), Outcome::NotReady);
        let void = json!({"code": "EXCHANGE_CONFLICT", "detail": "the ticket for S0-1-1 is void"});
        assert_eq!(
            classify(409, &void),
            Outcome::Refused("EXCHANGE_CONFLICT".to_owned())
        );
        let taken = json!({"code": "SEATS_UNAVAILABLE"});
        assert_eq!(
            classify(409, &taken),
            Outcome::Refused("SEATS_UNAVAILABLE".to_owned())
        );
        let busy = json!({"code": "IDEMPOTENCY_IN_PROGRESS"});
        assert_eq!(classify(409, &busy), Outcome::Unknown);
        for status in [0, 429, 500, 503] {
            assert_eq!(classify(status, &Value::Null), Outcome::Unknown, "{status}");
        }
        for status in [400, 404, 409, 422] {
            assert_eq!(classify(status, &Value::Null), Outcome::Failed, "{status}");
        }
    }

    #[test]
    fn settling_counts_each_answer_once() {
        let now = Instant::now();
        let rotation = Rotation {
            pools: Mutex::new(Pools::new(
                vec![ticket("o1", 0, 0), ticket("o2", 1, 1), ticket("o3", 2, 2)],
                [3, 4, 5],
            )),
            ..Rotation::default()
        };
        let done = br#"{"status":"COMPLETED","newOrderId":"o1b"}"#;
        let a = rotation.take(now).unwrap();
        assert!(rotation.settle(a, 201, done, now));
        let b = rotation.take(now).unwrap();
        assert!(!rotation.settle(b, 409, br#"{"code":"SEATS_UNAVAILABLE"}"#, now));
        let c = rotation.take(now).unwrap();
        assert!(!rotation.settle(c, 0, b"", now));
        assert_eq!(rotation.completed.load(Ordering::Relaxed), 1);
        assert_eq!(rotation.errors.load(Ordering::Relaxed), 1);
        assert_eq!(rotation.first_errors.lock().unwrap().as_slice(), ["0 "]);
        assert_eq!(
            *rotation.conflicts.lock().unwrap(),
            BTreeMap::from([("SEATS_UNAVAILABLE".to_owned(), 1)])
        );
        // o1b (ticketed with its exchange) and o2 (refused) are ready at once; the retry
        // of o3, whose outcome is unknown, waits.
        let mut ready = [
            rotation.take(now).unwrap().ticket.order_id,
            rotation.take(now).unwrap().ticket.order_id,
        ];
        ready.sort();
        assert_eq!(ready, ["o1b", "o2"]);
        assert!(rotation.take(now).is_none());
        assert_eq!(rotation.starved.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn report_is_one_line_and_json() {
        let report = ExchangesReport {
            event_id: "e".to_owned(),
            orders: 500,
            setup_s: 3.0,
            rate: 500.0,
            sent: 2400,
            completed: 2000,
            conflicts: BTreeMap::from([
                ("SEATS_UNAVAILABLE".to_owned(), 3),
                ("EXCHANGE_CONFLICT".to_owned(), 2),
            ]),
            not_ready: 10,
            errors: 0,
            first_errors: Vec::new(),
            starved: 100,
            delayed: 0,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            max_ms: 4.0,
            elapsed_s: 5.0,
        };
        let line = report.to_string();
        assert!(line.starts_with("offered/s=500 achieved/s=400 "), "{line}");
        assert!(
            line.contains(" conflicts=5 conflict_codes=EXCHANGE_CONFLICT:2,SEATS_UNAVAILABLE:3 "),
            "{line}"
        );
        assert!(!line.contains('\n'));
        let json = report.to_json();
        assert_eq!(json["achievedPerS"], 400.0);
        assert_eq!(json["conflictsByCode"]["SEATS_UNAVAILABLE"], 3);
        assert_eq!(json["starved"], 100);
    }
}
