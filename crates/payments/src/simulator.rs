//! A payment provider simulator: an axum server speaking the same Stripe PaymentIntents
//! subset as [`crate::stripe`], with Stripe's test cards and injectable faults. Tests run it
//! in-process ([`spawn`]); `boxoffice paysim --listen ADDR` runs it standalone ([`serve`]).
//!
//! It owns, in memory: payment intents by id, idempotency keys with their stored answers
//! (same key and parameters replay the answer, other parameters get 400 `idempotency_error`,
//! a key still running gets 409), the log of emitted events, and how many authorizations
//! each `metadata[operation_id]` created, so tests can assert that an order was never
//! authorized twice.
//!
//! Refunds (`POST /v1/refunds` by `payment_intent`, `GET /v1/refunds/{id}`,
//! `GET /v1/refunds?payment_intent=`) behave as Stripe's for what the adapter uses: only a
//! captured (`succeeded`) payment is refunded, in parts that add up to at most its captured
//! amount (400 `payment_intent_unexpected_state` for a payment not captured,
//! `charge_already_refunded` when nothing is left, `amount_too_large` past what is left);
//! the same `Idempotency-Key` and parameters answer the same refund. Faults for refunds:
//! [`SimulatorConfig::refund_fails`] (refunds answer `failed`), the test card
//! `pm_card_refundFail` (authorizes; its refunds answer `succeeded` and read `failed`
//! afterwards, as Stripe's card does), [`SimulatorConfig::refund_lose_share`] (the refund is
//! made, its answer lost) and [`SimulatorConfig::refund_latency_ms`] (a slow provider); the
//! 503s of [`SimulatorConfig::fail_5xx_share`] apply to every API request. Refunds emit no
//! events and no webhooks (`charge.refunded`, `refund.updated`): the webhook parser reads
//! payment intents only.
//!
//! Test cards (`payment_method`): `pm_card_visa` authorizes; `pm_card_chargeDeclined`
//! declines with 402; `pm_card_visa_chargeDeclinedInsufficientFunds` declines with
//! `insufficient_funds`; `pm_card_refundFail` authorizes, its refunds fail (above);
//! `pm_card_threeDSecure2Required` needs the shopper to visit
//! `/sim/3ds/{id}/complete` (or `/fail`); `pm_sim_timeout` authorizes but the answer is lost
//! (held back for [`LOST_RESPONSE_DELAY_MS`]); `pm_sim_slow` authorizes after
//! [`SimulatorConfig::slow_ms`].
//!
//! Every state change of a payment intent emits a Stripe event. When a webhook URL is set,
//! each event is POSTed with a valid `Stripe-Signature`
//! 1..=[`SimulatorConfig::webhook_duplicates_max`] times, each copy after its own random
//! delay, from spawned tasks that retry failed deliveries, so webhooks arrive late, twice and
//! out of order, as they do in production.
//!
//! Random choices (ids, latencies, faults, webhook copies and delays) come from one RNG seeded
//! with [`SimulatorConfig::seed`]: the same requests in the same order give the same run.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use crate::stripe::{SIGNATURE_HEADER, sign_webhook};

/// The API key the simulator accepts by default (`Authorization: Bearer ...`).
pub const DEFAULT_SECRET_KEY: &str = "sk_test_boxoffice_simulator";
/// The webhook signing secret the simulator uses by default.
pub const DEFAULT_WEBHOOK_SECRET: &str = "whsec_boxoffice_simulator";
/// How long a `pm_sim_timeout` answer is held back: longer than any client timeout, so the
/// caller sees a lost response although the authorization exists.
pub const LOST_RESPONSE_DELAY_MS: u64 = 30_000;
/// Default delay of `pm_sim_slow`.
pub const SLOW_DEFAULT_MS: u64 = 2_000;
/// Attempts per webhook copy before the simulator gives up on it.
pub const WEBHOOK_DELIVERY_ATTEMPTS_MAX: u32 = 5;
/// Pause before the first retry of a failed webhook delivery; doubles on each retry.
pub const WEBHOOK_RETRY_BACKOFF_MS: u64 = 100;
/// Timeout of one webhook delivery attempt.
pub const WEBHOOK_DELIVERY_TIMEOUT_MS: u64 = 5_000;
/// Largest request body accepted, in bytes.
pub const REQUEST_BODY_BYTES_MAX: usize = 16 * 1024;
/// Longest `Idempotency-Key` accepted, in bytes (Stripe's limit).
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;
/// Largest amount accepted, in minor units (Stripe's limit for most currencies).
pub const AMOUNT_MINOR_MAX: i64 = 99_999_999;
/// The test card whose payments authorize and capture but whose refunds fail: answered
/// `succeeded`, read `failed` (`expired_or_canceled_card`) afterwards, as Stripe's.
pub const REFUND_FAIL_CARD: &str = "pm_card_refundFail";
/// Largest page of `GET /v1/refunds` (Stripe's), and its default.
pub const REFUND_LIST_LIMIT_MAX: usize = 100;
pub const REFUND_LIST_LIMIT_DEFAULT: usize = 10;

/// How the simulator behaves. [`Default`] is a well-behaved provider: no latency, no
/// faults, each webhook delivered once, at once.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatorConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// The API key clients must present as `Authorization: Bearer <secret_key>`.
    pub secret_key: String,
    /// The secret webhooks are signed with.
    pub webhook_secret: String,
    /// Where webhooks are POSTed; none are sent while `None`.
    pub webhook_url: Option<String>,
    /// Delay of a `pm_sim_slow` authorization.
    pub slow_ms: u64,
    /// Uniform latency, min..=max, added to every authorization.
    pub auth_latency_ms: (u64, u64),
    /// Each webhook is delivered 1..=n times (0 counts as 1).
    pub webhook_duplicates_max: u32,
    /// Uniform delay, min..=max, before each webhook copy is sent.
    pub webhook_delay_ms: (u64, u64),
    /// Share of API requests answered 503 before doing anything (0.0..=1.0).
    pub fail_5xx_share: f64,
    /// Share of authorizations done but whose answer is lost (held back for
    /// [`LOST_RESPONSE_DELAY_MS`], as for `pm_sim_timeout`) (0.0..=1.0).
    pub lose_share: f64,
    /// Capture answers a 402 card error and the payment stays authorized.
    pub capture_fails: bool,
    /// Refunds are made with status `failed` (`failure_reason: declined`): no money goes
    /// back.
    pub refund_fails: bool,
    /// Share of refunds made whose answer is lost (held back for
    /// [`LOST_RESPONSE_DELAY_MS`]) (0.0..=1.0).
    pub refund_lose_share: f64,
    /// Uniform latency, min..=max, added to every refund.
    pub refund_latency_ms: (u64, u64),
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            secret_key: DEFAULT_SECRET_KEY.to_owned(),
            webhook_secret: DEFAULT_WEBHOOK_SECRET.to_owned(),
            webhook_url: None,
            slow_ms: SLOW_DEFAULT_MS,
            auth_latency_ms: (0, 0),
            webhook_duplicates_max: 1,
            webhook_delay_ms: (0, 0),
            fail_5xx_share: 0.0,
            lose_share: 0.0,
            capture_fails: false,
            refund_fails: false,
            refund_lose_share: 0.0,
            refund_latency_ms: (0, 0),
        }
    }
}

/// A running in-process simulator.
#[derive(Debug, Clone)]
pub struct SimulatorHandle {
    /// `http://127.0.0.1:<port>`, to give to [`crate::StripeProvider::new`].
    pub base_url: String,
    pub sim: Arc<Simulator>,
}

/// Binds `127.0.0.1:0` and serves the simulator from a task of the current tokio runtime.
pub async fn spawn(config: SimulatorConfig) -> std::io::Result<SimulatorHandle> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let base_url = base_url_of(listener.local_addr()?);
    let sim = Arc::new(Simulator::new(config, base_url.clone()));
    let app = router(sim.clone());
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "payment simulator stopped");
        }
    });
    Ok(SimulatorHandle { base_url, sim })
}

/// Serves the simulator on `listener` until the process ends (`boxoffice paysim`).
pub async fn serve(
    config: SimulatorConfig,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let base_url = base_url_of(listener.local_addr()?);
    tracing::info!(%base_url, "payment simulator listening");
    let sim = Arc::new(Simulator::new(config, base_url));
    axum::serve(listener, router(sim)).await
}

/// The simulator's routes, for embedding it in another axum server.
pub fn router(sim: Arc<Simulator>) -> Router {
    Router::new()
        .route("/v1/payment_intents", post(create_intent))
        .route("/v1/payment_intents/{id}", get(retrieve_intent))
        .route("/v1/payment_intents/{id}/capture", post(capture_intent))
        .route("/v1/payment_intents/{id}/cancel", post(cancel_intent))
        .route("/v1/refunds", post(create_refund).get(list_refunds))
        .route("/v1/refunds/{id}", get(retrieve_refund))
        .route(
            "/sim/3ds/{id}/complete",
            get(complete_3ds).post(complete_3ds),
        )
        .route("/sim/3ds/{id}/fail", get(fail_3ds).post(fail_3ds))
        .route("/sim/conditions", post(set_conditions))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async {
            stripe_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("resource_missing"),
                "Unrecognized request URL.",
            )
            .into_response()
        })
        .layer(DefaultBodyLimit::max(REQUEST_BODY_BYTES_MAX))
        .with_state(sim)
}

fn base_url_of(address: SocketAddr) -> String {
    // A wildcard bind is reachable on loopback; a redirect URL must name a real address.
    let host = match address.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}", address.port())
}

/// The simulated provider: its state and its webhook sender.
pub struct Simulator {
    /// Used in 3-D Secure redirect URLs.
    base_url: String,
    /// One lock for everything: the simulator favours determinism and simplicity over
    /// throughput, and no lock is held across an await.
    state: Mutex<SimState>,
    /// Sends webhooks.
    http: reqwest::Client,
    /// Webhook copies planned so far; with `webhooks_delivered`, tells tests when every
    /// webhook has landed.
    webhooks_planned: AtomicU64,
    webhooks_delivered: AtomicU64,
    /// Webhook attempts the receiver answered with a 5xx (each is retried).
    webhooks_answered_5xx: AtomicU64,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct SimState {
    config: SimulatorConfig,
    rng: StdRng,
    intents: HashMap<String, Value>,
    idempotency: HashMap<String, IdempotencyEntry>,
    events: Vec<Value>,
    authorizations_by_operation: HashMap<String, u32>,
    refunds: HashMap<String, Value>,
    /// Refund ids, oldest first (lists answer newest first, as Stripe's).
    refund_order: Vec<String>,
    refunds_by_refund_id: HashMap<String, u32>,
}

#[derive(Debug)]
enum IdempotencyEntry {
    /// A request with this key is running; a concurrent one gets 409.
    InFlight {
        fingerprint: String,
    },
    Done {
        fingerprint: String,
        answer: Answer,
    },
}

/// An HTTP answer of the API.
#[derive(Debug, Clone)]
struct Answer {
    status: StatusCode,
    body: Value,
}

/// A webhook to send: one event, several copies, each after its own delay.
#[derive(Debug)]
struct Delivery {
    url: String,
    body: Vec<u8>,
    delays: Vec<Duration>,
}

impl Simulator {
    /// A simulator whose 3-D Secure URLs point at `base_url`. Use [`spawn`] or [`serve`] to
    /// run it; this is for embedding its [`router`] elsewhere.
    pub fn new(config: SimulatorConfig, base_url: String) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(WEBHOOK_DELIVERY_TIMEOUT_MS))
            .build()
            .unwrap_or_default();
        Self {
            base_url,
            state: Mutex::new(SimState {
                rng: StdRng::seed_from_u64(config.seed),
                config,
                intents: HashMap::new(),
                idempotency: HashMap::new(),
                events: Vec::new(),
                authorizations_by_operation: HashMap::new(),
                refunds: HashMap::new(),
                refund_order: Vec::new(),
                refunds_by_refund_id: HashMap::new(),
            }),
            http,
            webhooks_planned: AtomicU64::new(0),
            webhooks_delivered: AtomicU64::new(0),
            webhooks_answered_5xx: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panic while holding the lock leaves plain data behind; keep serving.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Where webhooks go from now on (`None` stops them). Events already emitted are not
    /// resent.
    pub fn set_webhook_url(&self, url: impl Into<Option<String>>) {
        self.lock().config.webhook_url = url.into();
    }

    /// Changes the share of API requests answered 503.
    pub fn set_fail_5xx_share(&self, share: f64) {
        self.lock().config.fail_5xx_share = share;
    }

    /// Changes the latency added to every authorization (uniform, min..=max ms).
    pub fn set_auth_latency_ms(&self, min_ms: u64, max_ms: u64) {
        self.lock().config.auth_latency_ms = (min_ms, max_ms.max(min_ms));
    }

    /// Changes the share of authorizations whose answer is lost.
    pub fn set_lose_share(&self, share: f64) {
        self.lock().config.lose_share = share;
    }

    /// Makes captures fail (402) or succeed.
    pub fn set_capture_fails(&self, capture_fails: bool) {
        self.lock().config.capture_fails = capture_fails;
    }

    /// Makes refunds fail (status `failed`) or succeed.
    pub fn set_refund_fails(&self, refund_fails: bool) {
        self.lock().config.refund_fails = refund_fails;
    }

    /// Changes the share of refunds whose answer is lost.
    pub fn set_refund_lose_share(&self, share: f64) {
        self.lock().config.refund_lose_share = share;
    }

    /// Changes the latency added to every refund (uniform, min..=max ms).
    pub fn set_refund_latency_ms(&self, min_ms: u64, max_ms: u64) {
        self.lock().config.refund_latency_ms = (min_ms, max_ms.max(min_ms));
    }

    /// A refund as the API would return it now.
    pub fn refund(&self, id: &str) -> Option<Value> {
        self.lock().refunds.get(id).cloned()
    }

    /// How many refunds were made with `metadata[refund_id] = refund_id` (idempotent replays
    /// and refusals make none).
    pub fn refunds_made(&self, refund_id: &str) -> u32 {
        self.lock()
            .refunds_by_refund_id
            .get(refund_id)
            .copied()
            .unwrap_or(0)
    }

    /// Every event emitted so far, oldest first (whether or not it was delivered).
    pub fn events(&self) -> Vec<Value> {
        self.lock().events.clone()
    }

    /// A payment intent as the API would return it.
    pub fn intent(&self, id: &str) -> Option<Value> {
        self.lock().intents.get(id).cloned()
    }

    /// How many payment intents were created with `metadata[operation_id] = operation_id`
    /// (idempotent replays create none).
    pub fn authorizations(&self, operation_id: &str) -> u32 {
        self.lock()
            .authorizations_by_operation
            .get(operation_id)
            .copied()
            .unwrap_or(0)
    }

    /// Authorizations created per operation id.
    pub fn authorizations_by_operation(&self) -> HashMap<String, u32> {
        self.lock().authorizations_by_operation.clone()
    }

    /// Webhook copies planned so far (each event 1..=`webhook_duplicates_max` copies).
    pub fn webhooks_planned(&self) -> u64 {
        self.webhooks_planned.load(Ordering::Relaxed)
    }

    /// Webhook copies the receiver acknowledged with a 2xx.
    pub fn webhooks_delivered(&self) -> u64 {
        self.webhooks_delivered.load(Ordering::Relaxed)
    }

    /// Webhook delivery attempts the receiver answered with a 5xx.
    pub fn webhooks_answered_5xx(&self) -> u64 {
        self.webhooks_answered_5xx.load(Ordering::Relaxed)
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let expected = format!("Bearer {}", self.lock().config.secret_key);
        headers
            .get(header::AUTHORIZATION)
            .is_some_and(|value| value.as_bytes() == expected.as_bytes())
    }

    /// The 401 or injected 503 an API request gets before anything else, if any.
    fn gate(&self, headers: &HeaderMap) -> Option<Response> {
        let outage = {
            let mut state = self.lock();
            let share = state.config.fail_5xx_share;
            share > 0.0 && state.rng.random::<f64>() < share
        };
        if outage {
            return Some(
                stripe_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "api_error",
                    None,
                    "The payment simulator is failing on purpose (fail_5xx_share).",
                )
                .into_response(),
            );
        }
        if !self.authorized(headers) {
            return Some(
                stripe_error(
                    StatusCode::UNAUTHORIZED,
                    "invalid_request_error",
                    None,
                    "Invalid API Key provided.",
                )
                .into_response(),
            );
        }
        None
    }

    /// Runs `apply` under the idempotency key of `headers`, if any: replays a stored answer,
    /// refuses a reused or running key, else waits `delay`, applies, stores the answer and
    /// sends the webhooks, all state changes in one critical section.
    async fn idempotent(
        self: &Arc<Self>,
        headers: &HeaderMap,
        fingerprint: String,
        delay: Duration,
        apply: impl FnOnce(&Self, &mut SimState) -> (Answer, Vec<Delivery>),
    ) -> (Answer, bool) {
        let key = match headers.get("idempotency-key") {
            None => None,
            Some(value) => match value.to_str() {
                Ok(key) if !key.is_empty() && key.len() <= IDEMPOTENCY_KEY_LEN_MAX => {
                    Some(key.to_owned())
                }
                _ => {
                    let message = format!(
                        "Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_LEN_MAX} visible characters."
                    );
                    let answer = stripe_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request_error",
                        None,
                        &message,
                    );
                    return (answer, false);
                }
            },
        };
        let mut guard = None;
        if let Some(key) = &key {
            let mut state = self.lock();
            let (stored, in_flight) = match state.idempotency.get(key) {
                Some(IdempotencyEntry::Done {
                    fingerprint: stored,
                    answer,
                }) if *stored == fingerprint => return (answer.clone(), true),
                Some(IdempotencyEntry::Done { fingerprint, .. }) => (Some(fingerprint), false),
                Some(IdempotencyEntry::InFlight { fingerprint }) => (Some(fingerprint), true),
                None => (None, false),
            };
            match stored {
                Some(stored) if *stored != fingerprint => {
                    let message = format!(
                        "Keys for idempotent requests can only be used with the same \
                         parameters they were first used with. Try using a key other than \
                         '{key}' if you meant to execute a different request."
                    );
                    let answer =
                        stripe_error(StatusCode::BAD_REQUEST, "idempotency_error", None, &message);
                    return (answer, false);
                }
                Some(_) => {
                    debug_assert!(in_flight, "a finished same-request key was replayed above");
                    let answer = stripe_error(
                        StatusCode::CONFLICT,
                        "idempotency_error",
                        None,
                        "There is currently another in-progress request using this \
                         Idempotent Key. Please try again later.",
                    );
                    return (answer, false);
                }
                None => {
                    state.idempotency.insert(
                        key.clone(),
                        IdempotencyEntry::InFlight {
                            fingerprint: fingerprint.clone(),
                        },
                    );
                    guard = Some(InFlightGuard {
                        sim: self.clone(),
                        key: key.clone(),
                    });
                }
            }
        }
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let (answer, deliveries) = {
            let mut state = self.lock();
            let (answer, deliveries) = apply(self, &mut state);
            if let Some(key) = key {
                state.idempotency.insert(
                    key,
                    IdempotencyEntry::Done {
                        fingerprint,
                        answer: answer.clone(),
                    },
                );
            }
            (answer, deliveries)
        };
        drop(guard);
        self.dispatch(deliveries);
        (answer, false)
    }

    /// Records an event for a state change of `intent` and plans its webhook copies.
    fn emit(&self, state: &mut SimState, kind: &str, intent: &Value) -> Option<Delivery> {
        let event_id = format!("evt_{}", random_id(&mut state.rng));
        let event = json!({
            "id": event_id,
            "object": "event",
            "api_version": "2024-06-20",
            "type": kind,
            "created": now_unix_s(),
            "livemode": false,
            "data": {"object": intent},
        });
        state.events.push(event.clone());
        let url = state.config.webhook_url.clone()?;
        let copies = state.config.webhook_duplicates_max.max(1);
        let copies = state.rng.random_range(1..=copies);
        self.webhooks_planned
            .fetch_add(u64::from(copies), Ordering::Relaxed);
        let (delay_min_ms, delay_max_ms) = state.config.webhook_delay_ms;
        let delays = (0..copies)
            .map(|_| Duration::from_millis(uniform(&mut state.rng, delay_min_ms, delay_max_ms)))
            .collect();
        Some(Delivery {
            url,
            body: serde_json::to_vec(&event).unwrap_or_default(),
            delays,
        })
    }

    /// Sends each planned webhook copy from its own task.
    fn dispatch(self: &Arc<Self>, deliveries: Vec<Delivery>) {
        for delivery in deliveries {
            let body = Bytes::from(delivery.body);
            for delay in delivery.delays {
                let sim = self.clone();
                let url = delivery.url.clone();
                let body = body.clone();
                tokio::spawn(async move { sim.deliver(url, body, delay).await });
            }
        }
    }

    async fn deliver(&self, url: String, body: Bytes, delay: Duration) {
        tokio::time::sleep(delay).await;
        let webhook_secret = self.lock().config.webhook_secret.clone();
        let mut backoff = Duration::from_millis(WEBHOOK_RETRY_BACKOFF_MS);
        for attempt in 1..=WEBHOOK_DELIVERY_ATTEMPTS_MAX {
            let signature = sign_webhook(&webhook_secret, now_unix_s(), &body);
            let sent = self
                .http
                .post(&url)
                .header(header::CONTENT_TYPE, "application/json")
                .header(SIGNATURE_HEADER, signature)
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    self.webhooks_delivered.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Ok(response) => {
                    if response.status().is_server_error() {
                        self.webhooks_answered_5xx.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::debug!(%url, attempt, status = %response.status(), "webhook refused");
                }
                Err(error) => tracing::debug!(%url, attempt, %error, "webhook not delivered"),
            }
            if attempt < WEBHOOK_DELIVERY_ATTEMPTS_MAX {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        tracing::warn!(%url, "webhook dropped after {WEBHOOK_DELIVERY_ATTEMPTS_MAX} attempts");
    }
}

/// Releases an idempotency key whose request never finished (its client went away while
/// it waited), so a retry is not refused forever.
struct InFlightGuard {
    sim: Arc<Simulator>,
    key: String,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut state = self.sim.lock();
        if matches!(
            state.idempotency.get(&self.key),
            Some(IdempotencyEntry::InFlight { .. })
        ) {
            state.idempotency.remove(&self.key);
        }
    }
}

fn now_unix_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

fn uniform(rng: &mut StdRng, min: u64, max: u64) -> u64 {
    if max <= min {
        min
    } else {
        rng.random_range(min..=max)
    }
}

fn random_id(rng: &mut StdRng) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..24)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

fn stripe_error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Answer {
    let mut error = json!({"type": kind, "message": message});
    if let Some(code) = code {
        error["code"] = json!(code);
    }
    Answer {
        status,
        body: json!({ "error": error }),
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        respond(self, false)
    }
}

fn respond(answer: Answer, replayed: bool) -> Response {
    let mut response = (answer.status, axum::Json(answer.body)).into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// What identifies a request for idempotency: method, path and the sorted parameters.
fn fingerprint(method: &Method, path: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<_> = params.iter().collect();
    sorted.sort();
    let mut text = format!("{method} {path}");
    for (name, value) in sorted {
        text.push('\n');
        text.push_str(name);
        text.push('=');
        text.push_str(value);
    }
    text
}

fn parse_form(body: &[u8]) -> Result<Vec<(String, String)>, Answer> {
    serde_urlencoded::from_bytes(body).map_err(|error| {
        stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            &format!("Invalid form body: {error}"),
        )
    })
}

fn invalid(message: &str) -> Answer {
    stripe_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        Some("parameter_invalid"),
        message,
    )
}

/// How a test card behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Card {
    Authorizes,
    Declines(&'static str),
    RequiresAction,
    LosesResponse,
    Slow,
}

fn card(payment_method: &str) -> Option<Card> {
    Some(match payment_method {
        // pm_card_refundFail authorizes; its refunds fail (see `refund_in`).
        "pm_card_visa" | "pm_card_mastercard" | REFUND_FAIL_CARD => Card::Authorizes,
        "pm_card_chargeDeclined" => Card::Declines("generic_decline"),
        "pm_card_visa_chargeDeclinedInsufficientFunds" => Card::Declines("insufficient_funds"),
        "pm_card_threeDSecure2Required" => Card::RequiresAction,
        "pm_sim_timeout" => Card::LosesResponse,
        "pm_sim_slow" => Card::Slow,
        _ => return None,
    })
}

/// The validated parameters of `POST /v1/payment_intents`.
#[derive(Debug)]
struct CreateParams {
    amount_minor: i64,
    currency: String,
    payment_method: String,
    card: Card,
    metadata: Map<String, Value>,
}

fn create_params(params: &[(String, String)]) -> Result<CreateParams, Answer> {
    let mut amount_minor = None;
    let mut currency = None;
    let mut payment_method = None;
    let mut capture_method = None;
    let mut confirm = None;
    let mut metadata = Map::new();
    for (name, value) in params {
        match name.as_str() {
            "amount" => amount_minor = value.parse::<i64>().ok().or(Some(-1)),
            "currency" => currency = Some(value.to_ascii_lowercase()),
            "payment_method" => payment_method = Some(value.clone()),
            "capture_method" => capture_method = Some(value.as_str()),
            "confirm" => confirm = Some(value.as_str()),
            _ => {
                let key = name
                    .strip_prefix("metadata[")
                    .and_then(|rest| rest.strip_suffix(']'))
                    .ok_or_else(|| invalid(&format!("Received unknown parameter: {name}")))?;
                metadata.insert(key.to_owned(), Value::String(value.clone()));
            }
        }
    }
    let amount_minor = amount_minor.ok_or_else(|| invalid("Missing required param: amount."))?;
    if !(1..=AMOUNT_MINOR_MAX).contains(&amount_minor) {
        return Err(invalid(&format!(
            "amount must be an integer from 1 to {AMOUNT_MINOR_MAX}."
        )));
    }
    let currency = currency.ok_or_else(|| invalid("Missing required param: currency."))?;
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(invalid(&format!("Invalid currency: {currency}.")));
    }
    if capture_method != Some("manual") || confirm != Some("true") {
        return Err(invalid(
            "The simulator only supports capture_method=manual with confirm=true.",
        ));
    }
    let payment_method =
        payment_method.ok_or_else(|| invalid("Missing required param: payment_method."))?;
    let card = card(&payment_method).ok_or_else(|| {
        stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such PaymentMethod: '{payment_method}'"),
        )
    })?;
    Ok(CreateParams {
        amount_minor,
        currency,
        payment_method,
        card,
        metadata,
    })
}

async fn create_intent(
    State(sim): State<Arc<Simulator>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let params = match parse_form(&body) {
        Ok(params) => params,
        Err(answer) => return respond(answer, false),
    };
    let create = match create_params(&params) {
        Ok(create) => create,
        Err(answer) => return respond(answer, false),
    };
    let (delay_ms, lose) = {
        let mut state = sim.lock();
        let lose_share = state.config.lose_share;
        let lose = lose_share > 0.0 && state.rng.random::<f64>() < lose_share;
        let (latency_min_ms, latency_max_ms) = state.config.auth_latency_ms;
        let latency_ms = uniform(&mut state.rng, latency_min_ms, latency_max_ms);
        let slow_ms = if create.card == Card::Slow {
            state.config.slow_ms
        } else {
            0
        };
        (latency_ms.saturating_add(slow_ms), lose)
    };
    let card = create.card;
    let fingerprint = fingerprint(&method, "/v1/payment_intents", &params);
    let (answer, replayed) = sim
        .idempotent(
            &headers,
            fingerprint,
            Duration::from_millis(delay_ms),
            |sim, state| create_in(sim, state, create),
        )
        .await;
    if (card == Card::LosesResponse || lose) && !replayed {
        // The authorization exists and its answer is stored for replay; this copy is lost.
        tokio::time::sleep(Duration::from_millis(LOST_RESPONSE_DELAY_MS)).await;
    }
    respond(answer, replayed)
}

fn create_in(
    sim: &Simulator,
    state: &mut SimState,
    create: CreateParams,
) -> (Answer, Vec<Delivery>) {
    let id = format!("pi_{}", random_id(&mut state.rng));
    if let Some(Value::String(operation_id)) = create.metadata.get("operation_id") {
        *state
            .authorizations_by_operation
            .entry(operation_id.clone())
            .or_insert(0) += 1;
    }
    let mut intent = json!({
        "id": id,
        "object": "payment_intent",
        "amount": create.amount_minor,
        "amount_capturable": 0,
        "amount_received": 0,
        "capture_method": "manual",
        "confirmation_method": "automatic",
        "created": now_unix_s(),
        "currency": create.currency,
        "livemode": false,
        "metadata": create.metadata,
        "payment_method": create.payment_method,
        "status": "requires_capture",
        "next_action": null,
        "last_payment_error": null,
        "canceled_at": null,
        "cancellation_reason": null,
    });
    let (answer, kind) = match create.card {
        Card::Authorizes | Card::LosesResponse | Card::Slow => {
            intent["amount_capturable"] = json!(create.amount_minor);
            (
                Answer {
                    status: StatusCode::OK,
                    body: intent.clone(),
                },
                "payment_intent.amount_capturable_updated",
            )
        }
        Card::RequiresAction => {
            intent["status"] = json!("requires_action");
            intent["next_action"] = json!({
                "type": "redirect_to_url",
                "redirect_to_url": {
                    "url": format!("{}/sim/3ds/{id}/complete", sim.base_url),
                    "return_url": null,
                },
            });
            (
                Answer {
                    status: StatusCode::OK,
                    body: intent.clone(),
                },
                "payment_intent.requires_action",
            )
        }
        Card::Declines(decline_code) => {
            let error = json!({
                "type": "card_error",
                "code": "card_declined",
                "decline_code": decline_code,
                "message": "Your card was declined.",
            });
            intent["status"] = json!("requires_payment_method");
            intent["last_payment_error"] = error.clone();
            let mut body = json!({ "error": error });
            body["error"]["payment_intent"] = intent.clone();
            (
                Answer {
                    status: StatusCode::PAYMENT_REQUIRED,
                    body,
                },
                "payment_intent.payment_failed",
            )
        }
    };
    let delivery = sim.emit(state, kind, &intent);
    state.intents.insert(id, intent);
    (answer, delivery.into_iter().collect())
}

fn missing_intent(id: &str) -> Answer {
    stripe_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("resource_missing"),
        &format!("No such payment_intent: '{id}'"),
    )
}

fn unexpected_state(intent: &Value, action: &str) -> Answer {
    let status = intent["status"].as_str().unwrap_or_default();
    let mut answer = stripe_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        Some("payment_intent_unexpected_state"),
        &format!("This PaymentIntent could not be {action} because it has a status of {status}."),
    );
    answer.body["error"]["payment_intent"] = intent.clone();
    answer
}

async fn retrieve_intent(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let intent = sim.intent(&id);
    match intent {
        Some(intent) => respond(
            Answer {
                status: StatusCode::OK,
                body: intent,
            },
            false,
        ),
        None => respond(missing_intent(&id), false),
    }
}

async fn capture_intent(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let params = match parse_form(&body) {
        Ok(params) => params,
        Err(answer) => return respond(answer, false),
    };
    let path = format!("/v1/payment_intents/{id}/capture");
    let (answer, replayed) = sim
        .idempotent(
            &headers,
            fingerprint(&method, &path, &params),
            Duration::ZERO,
            |sim, state| {
                let capture_fails = state.config.capture_fails;
                let Some(intent) = state.intents.get(&id).cloned() else {
                    return (missing_intent(&id), Vec::new());
                };
                match intent["status"].as_str() {
                    Some("succeeded") => (ok(intent), Vec::new()),
                    Some("requires_capture") if capture_fails => {
                        let mut answer = stripe_error(
                            StatusCode::PAYMENT_REQUIRED,
                            "card_error",
                            Some("card_declined"),
                            "The capture was declined (capture_fails).",
                        );
                        answer.body["error"]["decline_code"] = json!("capture_declined");
                        answer.body["error"]["payment_intent"] = intent;
                        (answer, Vec::new())
                    }
                    Some("requires_capture") => {
                        let mut intent = intent;
                        intent["status"] = json!("succeeded");
                        intent["amount_received"] = intent["amount"].clone();
                        intent["amount_capturable"] = json!(0);
                        let delivery = sim.emit(state, "payment_intent.succeeded", &intent);
                        state.intents.insert(id.clone(), intent.clone());
                        (ok(intent), delivery.into_iter().collect())
                    }
                    _ => (unexpected_state(&intent, "captured"), Vec::new()),
                }
            },
        )
        .await;
    respond(answer, replayed)
}

async fn cancel_intent(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let params = match parse_form(&body) {
        Ok(params) => params,
        Err(answer) => return respond(answer, false),
    };
    let path = format!("/v1/payment_intents/{id}/cancel");
    let (answer, replayed) = sim
        .idempotent(
            &headers,
            fingerprint(&method, &path, &params),
            Duration::ZERO,
            |sim, state| {
                let Some(intent) = state.intents.get(&id).cloned() else {
                    return (missing_intent(&id), Vec::new());
                };
                match intent["status"].as_str() {
                    Some("canceled") => (ok(intent), Vec::new()),
                    Some("requires_capture" | "requires_action" | "requires_payment_method") => {
                        let mut intent = intent;
                        intent["status"] = json!("canceled");
                        intent["amount_capturable"] = json!(0);
                        intent["next_action"] = Value::Null;
                        intent["canceled_at"] = json!(now_unix_s());
                        intent["cancellation_reason"] = json!("requested_by_customer");
                        let delivery = sim.emit(state, "payment_intent.canceled", &intent);
                        state.intents.insert(id.clone(), intent.clone());
                        (ok(intent), delivery.into_iter().collect())
                    }
                    _ => (unexpected_state(&intent, "canceled"), Vec::new()),
                }
            },
        )
        .await;
    respond(answer, replayed)
}

fn ok(intent: Value) -> Answer {
    Answer {
        status: StatusCode::OK,
        body: intent,
    }
}

/// The validated parameters of `POST /v1/refunds`.
#[derive(Debug)]
struct RefundParams {
    payment_intent: String,
    /// `None`: everything left.
    amount_minor: Option<i64>,
    reason: Option<String>,
    metadata: Map<String, Value>,
}

fn refund_params(params: &[(String, String)]) -> Result<RefundParams, Answer> {
    let mut payment_intent = None;
    let mut amount_minor = None;
    let mut reason = None;
    let mut metadata = Map::new();
    for (name, value) in params {
        match name.as_str() {
            "payment_intent" => payment_intent = Some(value.clone()),
            "amount" => amount_minor = Some(value.parse::<i64>().unwrap_or(-1)),
            "reason" => reason = Some(value.clone()),
            "charge" => {
                return Err(invalid(
                    "The simulator refunds by payment_intent only (it has no charges).",
                ));
            }
            _ => {
                let key = name
                    .strip_prefix("metadata[")
                    .and_then(|rest| rest.strip_suffix(']'))
                    .ok_or_else(|| invalid(&format!("Received unknown parameter: {name}")))?;
                metadata.insert(key.to_owned(), Value::String(value.clone()));
            }
        }
    }
    let payment_intent =
        payment_intent.ok_or_else(|| invalid("Missing required param: payment_intent."))?;
    if let Some(amount_minor) = amount_minor
        && !(1..=AMOUNT_MINOR_MAX).contains(&amount_minor)
    {
        return Err(invalid(&format!(
            "amount must be an integer from 1 to {AMOUNT_MINOR_MAX}."
        )));
    }
    if let Some(reason) = &reason
        && !matches!(
            reason.as_str(),
            "duplicate" | "fraudulent" | "requested_by_customer"
        )
    {
        return Err(invalid(&format!("Invalid reason: {reason}.")));
    }
    Ok(RefundParams {
        payment_intent,
        amount_minor,
        reason,
        metadata,
    })
}

async fn create_refund(
    State(sim): State<Arc<Simulator>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let params = match parse_form(&body) {
        Ok(params) => params,
        Err(answer) => return respond(answer, false),
    };
    let refund = match refund_params(&params) {
        Ok(refund) => refund,
        Err(answer) => return respond(answer, false),
    };
    let (delay_ms, lose) = {
        let mut state = sim.lock();
        let share = state.config.refund_lose_share;
        let lose = share > 0.0 && state.rng.random::<f64>() < share;
        let (min_ms, max_ms) = state.config.refund_latency_ms;
        (uniform(&mut state.rng, min_ms, max_ms), lose)
    };
    let (answer, replayed) = sim
        .idempotent(
            &headers,
            fingerprint(&method, "/v1/refunds", &params),
            Duration::from_millis(delay_ms),
            |_, state| (refund_in(state, refund), Vec::new()),
        )
        .await;
    if lose && !replayed && answer.status.is_success() {
        // The refund exists and its answer is stored for replay; this copy is lost.
        tokio::time::sleep(Duration::from_millis(LOST_RESPONSE_DELAY_MS)).await;
    }
    respond(answer, replayed)
}

/// What is left to refund of a captured intent: captured minus what refunds not failed nor
/// cancelled gave back.
fn refundable_minor(state: &SimState, intent: &Value) -> i64 {
    let id = intent["id"].as_str().unwrap_or_default();
    let refunded: i64 = state
        .refunds
        .values()
        .filter(|refund| refund["payment_intent"].as_str() == Some(id))
        .filter(|refund| matches!(refund["status"].as_str(), Some("succeeded" | "pending")))
        .filter_map(|refund| refund["amount"].as_i64())
        .sum();
    intent["amount_received"].as_i64().unwrap_or(0) - refunded
}

fn refund_in(state: &mut SimState, params: RefundParams) -> Answer {
    let Some(intent) = state.intents.get(&params.payment_intent).cloned() else {
        let mut answer = stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such payment_intent: '{}'", params.payment_intent),
        );
        answer.body["error"]["param"] = json!("payment_intent");
        return answer;
    };
    if intent["status"].as_str() != Some("succeeded") {
        let status = intent["status"].as_str().unwrap_or_default();
        let mut answer = stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("payment_intent_unexpected_state"),
            &format!(
                "This PaymentIntent ({}) does not have a successful charge to refund: it has \
                 a status of {status}. Cancel an uncaptured PaymentIntent instead.",
                params.payment_intent
            ),
        );
        answer.body["error"]["payment_intent"] = intent;
        return answer;
    }
    let left = refundable_minor(state, &intent);
    if left <= 0 {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("charge_already_refunded"),
            &format!(
                "The charge of {} has already been refunded.",
                params.payment_intent
            ),
        );
    }
    let amount_minor = params.amount_minor.unwrap_or(left);
    if amount_minor > left {
        let mut answer = stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("amount_too_large"),
            &format!(
                "Refund amount ({amount_minor}) is greater than unrefunded amount on charge \
                 ({left})."
            ),
        );
        answer.body["error"]["param"] = json!("amount");
        return answer;
    }
    let id = format!("re_{}", random_id(&mut state.rng));
    if let Some(Value::String(refund_id)) = params.metadata.get("refund_id") {
        *state
            .refunds_by_refund_id
            .entry(refund_id.clone())
            .or_insert(0) += 1;
    }
    let mut refund = json!({
        "id": id,
        "object": "refund",
        "amount": amount_minor,
        "charge": null,
        "created": now_unix_s(),
        "currency": intent["currency"],
        "failure_reason": null,
        "metadata": params.metadata,
        "payment_intent": params.payment_intent,
        "reason": params.reason,
        "status": "succeeded",
    });
    let answered = if state.config.refund_fails {
        refund["status"] = json!("failed");
        refund["failure_reason"] = json!("declined");
        refund.clone()
    } else if intent["payment_method"].as_str() == Some(REFUND_FAIL_CARD) {
        // Stripe's card: the refund first reads succeeded, then fails.
        let answered = refund.clone();
        refund["status"] = json!("failed");
        refund["failure_reason"] = json!("expired_or_canceled_card");
        answered
    } else {
        refund.clone()
    };
    state.refunds.insert(id.clone(), refund);
    state.refund_order.push(id);
    ok(answered)
}

fn missing_refund(id: &str) -> Answer {
    stripe_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("resource_missing"),
        &format!("No such refund: '{id}'"),
    )
}

async fn retrieve_refund(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let refund = sim.refund(&id);
    match refund {
        Some(refund) => respond(ok(refund), false),
        None => respond(missing_refund(&id), false),
    }
}

/// `GET /v1/refunds?payment_intent=&limit=&starting_after=`: newest first, as Stripe's.
async fn list_refunds(
    State(sim): State<Arc<Simulator>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = sim.gate(&headers) {
        return refusal;
    }
    let params = match parse_form(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(answer) => return respond(answer, false),
    };
    let mut payment_intent = None;
    let mut limit = REFUND_LIST_LIMIT_DEFAULT;
    let mut starting_after = None;
    for (name, value) in params {
        match name.as_str() {
            "payment_intent" => payment_intent = Some(value),
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=REFUND_LIST_LIMIT_MAX).contains(&n) => limit = n,
                _ => {
                    let message = format!("limit must be from 1 to {REFUND_LIST_LIMIT_MAX}.");
                    return respond(invalid(&message), false);
                }
            },
            "starting_after" => starting_after = Some(value),
            _ => {
                let message = format!("Received unknown parameter: {name}");
                return respond(invalid(&message), false);
            }
        }
    }
    let answer = {
        let state = sim.lock();
        if let Some(id) = &payment_intent
            && !state.intents.contains_key(id)
        {
            missing_intent(id)
        } else {
            let newest_first = state.refund_order.iter().rev().filter_map(|id| {
                let refund = state.refunds.get(id)?;
                let wanted = payment_intent
                    .as_deref()
                    .is_none_or(|pi| refund["payment_intent"].as_str() == Some(pi));
                wanted.then_some((id, refund))
            });
            let mut after: Vec<_> = match &starting_after {
                None => newest_first.collect(),
                Some(start) => newest_first
                    .skip_while(|(id, _)| *id != start)
                    .skip(1)
                    .collect(),
            };
            let has_more = after.len() > limit;
            after.truncate(limit);
            let data: Vec<Value> = after
                .into_iter()
                .map(|(_, refund)| refund.clone())
                .collect();
            ok(json!({
                "object": "list",
                "url": "/v1/refunds",
                "has_more": has_more,
                "data": data,
            }))
        }
    };
    respond(answer, false)
}

/// The shopper's bank page: no API key, as it is the shopper's browser that calls it.
async fn complete_3ds(State(sim): State<Arc<Simulator>>, Path(id): Path<String>) -> Response {
    finish_3ds(&sim, &id, true)
}

/// `POST /sim/conditions` (a test double's control, as `/sim/3ds/…`): how the provider
/// behaves from now on, for a chaos run against a simulator in its own process. JSON
/// `{"authLatencyMs": [MIN, MAX], "fail5xxShare": 0.15, "loseShare": 0.1}`; each field
/// optional, shares within 0..=1, latencies at most 60,000 ms.
async fn set_conditions(State(sim): State<Arc<Simulator>>, body: axum::body::Bytes) -> Response {
    let Ok(conditions) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "a JSON object").into_response();
    };
    let share = |name: &str| match conditions.get(name) {
        None => Ok(None),
        Some(value) => match value.as_f64() {
            Some(share) if (0.0..=1.0).contains(&share) => Ok(Some(share)),
            _ => Err(format!("{name}: a number within 0..=1")),
        },
    };
    let latency = match conditions.get("authLatencyMs") {
        None => Ok(None),
        Some(value) => match value
            .as_array()
            .map(|a| a.iter().map(Value::as_u64).collect::<Vec<_>>())
        {
            Some(pair) if pair.len() == 2 => match (pair[0], pair[1]) {
                (Some(min), Some(max)) if min <= max && max <= 60_000 => Ok(Some((min, max))),
                _ => Err("authLatencyMs: [MIN, MAX] ms, MIN <= MAX <= 60000".to_owned()),
            },
            _ => Err("authLatencyMs: [MIN, MAX] ms, MIN <= MAX <= 60000".to_owned()),
        },
    };
    match (latency, share("fail5xxShare"), share("loseShare")) {
        (Ok(latency), Ok(fail), Ok(lose)) => {
            if let Some((min, max)) = latency {
                sim.set_auth_latency_ms(min, max);
            }
            if let Some(fail) = fail {
                sim.set_fail_5xx_share(fail);
            }
            if let Some(lose) = lose {
                sim.set_lose_share(lose);
            }
            (StatusCode::OK, "ok").into_response()
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            (StatusCode::BAD_REQUEST, e).into_response()
        }
    }
}

async fn fail_3ds(State(sim): State<Arc<Simulator>>, Path(id): Path<String>) -> Response {
    finish_3ds(&sim, &id, false)
}

fn finish_3ds(sim: &Arc<Simulator>, id: &str, passed: bool) -> Response {
    let target = if passed {
        "requires_capture"
    } else {
        "requires_payment_method"
    };
    let (answer, deliveries) = {
        let mut state = sim.lock();
        let Some(mut intent) = state.intents.get(id).cloned() else {
            return respond(missing_intent(id), false);
        };
        match intent["status"].as_str() {
            // A second click finds the work done.
            Some(status) if status == target => (ok(intent), Vec::new()),
            Some("requires_action") => {
                intent["status"] = json!(target);
                intent["next_action"] = Value::Null;
                let kind = if passed {
                    intent["amount_capturable"] = intent["amount"].clone();
                    "payment_intent.amount_capturable_updated"
                } else {
                    intent["last_payment_error"] = json!({
                        "type": "card_error",
                        "code": "payment_intent_authentication_failure",
                        "message": "The shopper failed 3-D Secure authentication.",
                    });
                    "payment_intent.payment_failed"
                };
                let delivery = sim.emit(&mut state, kind, &intent);
                state.intents.insert(id.to_owned(), intent.clone());
                (ok(intent), delivery.into_iter().collect())
            }
            _ => (unexpected_state(&intent, "authenticated"), Vec::new()),
        }
    };
    sim.dispatch(deliveries);
    respond(answer, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_ignores_parameter_order() {
        let a = vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ];
        let b = vec![
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "1".to_owned()),
        ];
        assert_eq!(
            fingerprint(&Method::POST, "/x", &a),
            fingerprint(&Method::POST, "/x", &b)
        );
        assert_ne!(
            fingerprint(&Method::POST, "/x", &a),
            fingerprint(&Method::POST, "/y", &a)
        );
    }

    #[test]
    fn create_params_refuse_unknown_cards_and_parameters() {
        let params = |pm: &str, extra: Option<(&str, &str)>| {
            let mut params: Vec<(String, String)> = [
                ("amount", "1000"),
                ("currency", "EUR"),
                ("payment_method", pm),
                ("capture_method", "manual"),
                ("confirm", "true"),
                ("metadata[operation_id]", "op_1"),
            ]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
            if let Some((k, v)) = extra {
                params.push((k.to_owned(), v.to_owned()));
            }
            params
        };
        let create = create_params(&params("pm_card_visa", None)).expect("valid");
        assert_eq!(create.currency, "eur");
        assert_eq!(create.metadata["operation_id"], "op_1");
        let unknown_card = create_params(&params("pm_nope", None)).expect_err("unknown card");
        assert_eq!(unknown_card.status, StatusCode::BAD_REQUEST);
        let unknown_param =
            create_params(&params("pm_card_visa", Some(("x", "1")))).expect_err("unknown param");
        assert_eq!(unknown_param.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn same_seed_same_ids() {
        let mut a = StdRng::seed_from_u64(7);
        let mut b = StdRng::seed_from_u64(7);
        assert_eq!(random_id(&mut a), random_id(&mut b));
    }
}
