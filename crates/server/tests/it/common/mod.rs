//! Test harness: a fresh store per test (a new PostgreSQL database, or a new SQLite file),
//! the app served in-process on port 0, and small HTTP helpers.
//!
//! PostgreSQL is reached at `BOXOFFICE_TEST_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432`); each test creates its own database
//! `boxoffice_test_<uuid>` and drops it at the end.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use boxoffice_domain::ids::AccountId;
use boxoffice_payments::counting::CountingProxy;
use boxoffice_payments::localstripe::LocalStripe;
use boxoffice_payments::simulator::{
    DEFAULT_SECRET_KEY, DEFAULT_WEBHOOK_SECRET, SimulatorConfig, SimulatorHandle,
};
use boxoffice_server::auth::mint_token;
use boxoffice_server::runtime::waitroom::WaitingRoomOptions;
use boxoffice_server::{AppState, ServerConfig, front};
use boxoffice_store::Store;
use boxoffice_store_postgres::PgStore;
use boxoffice_store_sqlite::SqliteStore;
use boxoffice_tickets::TicketSigner;
use boxoffice_waitroom_state::RoomStore;
use boxoffice_waitroom_state::memory::MemoryRooms;
use reqwest::StatusCode;
use serde_json::{Value, json};

pub const SECRET: &str = "story-test-secret-0123456789";
/// The one origin the story servers let call the API from a browser (CORS).
pub const CORS_ORIGIN: &str = "http://shop.test";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A fresh, migrated store and how to remove it afterwards.
pub struct TestStore {
    pub backend: Backend,
    pub store: Arc<dyn Store>,
    pub pg: Option<PgStore>,
    pub sqlite: Option<SqliteStore>,
    admin_url: Option<String>,
    db_name: String,
    sqlite_path: Option<std::path::PathBuf>,
}

pub fn pg_base_url() -> String {
    std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

impl TestStore {
    pub async fn new(backend: Backend) -> Self {
        let db_name = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        match backend {
            Backend::Postgres => {
                let base = pg_base_url();
                let url = format!("{base}/{db_name}");
                PgStore::create_database_if_missing(&url)
                    .await
                    .expect("create test database");
                let store = PgStore::connect(&url)
                    .await
                    .expect("connect to test database");
                store.migrate().await.expect("migrate");
                Self {
                    backend,
                    store: Arc::new(store.clone()),
                    pg: Some(store),
                    sqlite: None,
                    admin_url: Some(format!("{base}/postgres")),
                    db_name,
                    sqlite_path: None,
                }
            }
            Backend::Sqlite => {
                let path = std::env::temp_dir().join(format!("{db_name}.db"));
                let url = format!("sqlite://{}", path.display());
                let store = SqliteStore::connect(&url).await.expect("open test sqlite");
                store.migrate().await.expect("migrate");
                Self {
                    backend,
                    store: Arc::new(store.clone()),
                    pg: None,
                    sqlite: Some(store),
                    admin_url: None,
                    db_name,
                    sqlite_path: Some(path),
                }
            }
        }
    }

    /// Runs every invariant on every event and returns the violations.
    pub async fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for event_id in self.store.list_event_ids().await.expect("list events") {
            let inventory = self
                .store
                .load_inventory(&event_id)
                .await
                .expect("load")
                .expect("event exists");
            out.extend(
                inventory
                    .invariants()
                    .into_iter()
                    .map(|v| format!("{event_id}: {v}")),
            );
            let map = boxoffice_store::seatmap::violations(self.store.as_ref(), &event_id)
                .await
                .expect("seat-map check");
            out.extend(map.into_iter().map(|v| format!("{event_id}: {v}")));
            // Comps come only from allocations (issue 40), as `boxoffice check` finds.
            let comps = boxoffice_store::allocation::violations(self.store.as_ref(), &event_id)
                .await
                .expect("comps check");
            out.extend(comps.into_iter().map(|v| format!("{event_id}: {v}")));
        }
        out
    }

    pub async fn assert_invariants(&self) {
        let violations = self.violations().await;
        assert!(
            violations.is_empty(),
            "invariants violated:\n{}",
            violations.join("\n")
        );
    }

    /// Another handle on the same PostgreSQL database, as a second node has (its cleanup
    /// closes the handle and drops nothing).
    pub async fn second_handle(&self) -> Self {
        assert!(self.pg.is_some(), "a second node shares a PostgreSQL store");
        let url = format!("{}/{}", pg_base_url(), self.db_name);
        let store = PgStore::connect(&url).await.expect("connect second node");
        Self {
            backend: self.backend,
            store: Arc::new(store.clone()),
            pg: Some(store),
            sqlite: None,
            admin_url: None,
            db_name: self.db_name.clone(),
            sqlite_path: None,
        }
    }

    /// Moves the store's clock forward by `ms` milliseconds, so a deadline passes without
    /// sleeping; the event writers of this process measure the clock again at once.
    pub async fn advance_clock(&self, ms: u64) {
        let by = std::time::Duration::from_millis(ms);
        match (&self.pg, &self.sqlite) {
            (Some(pg), _) => pg.advance_clock(by).await,
            (None, Some(sqlite)) => sqlite.advance_clock(by).await,
            (None, None) => unreachable!("a test store has a backend"),
        }
        .expect("move the store's clock");
    }

    /// The SQLite database file, for a test that opens a second connection to it.
    pub fn sqlite_file(&self) -> Option<std::path::PathBuf> {
        self.sqlite_path.clone()
    }

    /// Removes the database this test created (and nothing else).
    pub async fn cleanup(self) {
        if let (Some(pg), Some(admin_url)) = (self.pg, self.admin_url) {
            pg.pool().close().await;
            let admin = PgStore::connect(&admin_url)
                .await
                .expect("connect to postgres db");
            let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db_name);
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(admin.pool())
                .await
                .expect("drop test database");
            admin.pool().close().await;
        }
        if let Some(path) = self.sqlite_path {
            if let Some(sqlite) = self.sqlite {
                sqlite.pool().close().await;
                sqlite.reader_pool().close().await;
            }
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
    }
}

/// The app served on 127.0.0.1:0 over a fresh store.
pub struct TestApp {
    pub db: TestStore,
    pub sim: SimulatorHandle,
    pub signer: TicketSigner,
    pub addr: SocketAddr,
    pub base: String,
    pub http: reqwest::Client,
    pub admin: String,
    pub state: AppState,
    /// What the server sent its payment provider, when spawned with
    /// [`TestApp::spawn_counted`].
    pub provider_calls: Option<CountingProxy>,
    /// The localstripe the server pays through, if any (stopped when the app is dropped).
    pub localstripe: Option<LocalStripe>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The payment provider a counted test app pays through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payments {
    /// The in-process simulator.
    Simulator,
    /// localstripe, a fake Stripe that others wrote, on a port of its own.
    LocalStripe,
}

/// The waiting-room side of a test app.
#[derive(Clone)]
pub struct RoomSetup {
    pub state: Arc<dyn RoomStore>,
    pub options: WaitingRoomOptions,
}

/// The waiting-room secret of test apps (tests mint and tamper tokens with it).
pub const WAITROOM_SECRET: &str = "waiting-room-test-secret-0123456789";

impl Default for RoomSetup {
    fn default() -> Self {
        Self {
            state: Arc::new(MemoryRooms::ephemeral()),
            options: WaitingRoomOptions::default(),
        }
    }
}

/// One HTTP answer, body kept as bytes (replays must be byte-identical).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    /// The problem's `code`. A body that is not a problem with a code fails the test here,
    /// so that an assertion that a code is *not* something cannot pass on garbage.
    pub fn code(&self) -> String {
        match self.json()["code"].as_str() {
            Some(code) => code.to_owned(),
            None => panic!(
                "no problem code in the {} answer: {}",
                self.status,
                String::from_utf8_lossy(&self.bytes)
            ),
        }
    }
}

pub fn token(account: &str) -> String {
    mint_token(SECRET, &AccountId::parse(account).unwrap(), false, 3600).unwrap()
}

/// A token whose `email` claim is `email`.
pub fn token_with_email(account: &str, email: &str) -> String {
    boxoffice_server::auth::mint_token_with_email(
        SECRET,
        &AccountId::parse(account).unwrap(),
        false,
        3600,
        Some(email),
    )
    .unwrap()
}

pub fn admin_token() -> String {
    mint_token(SECRET, &AccountId::parse("ops").unwrap(), true, 3600).unwrap()
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, SimulatorConfig::default()).await
    }

    /// The app over a fresh store, with the payment simulator in process (webhooks to this
    /// app), the outbox relay, the payment reconciler and the cancellations' refunds job
    /// running. The expiry sweeper does
    /// not run: tests drive expiry themselves.
    pub async fn spawn_with(backend: Backend, sim_config: SimulatorConfig) -> Self {
        Self::spawn_full(
            TestStore::new(backend).await,
            sim_config,
            RoomSetup::default(),
            false,
        )
        .await
    }

    /// [`TestApp::spawn_with`] over a given store and waiting-room state; with
    /// `waitroom_running`, the rooms' release ticker runs too.
    pub async fn spawn_full(
        db: TestStore,
        sim_config: SimulatorConfig,
        rooms: RoomSetup,
        waitroom_running: bool,
    ) -> Self {
        Self::spawn_limited(
            db,
            sim_config,
            rooms,
            waitroom_running,
            boxoffice_server::limits::LimitsConfig::default(),
        )
        .await
    }

    /// [`TestApp::spawn`] without abuse limits: for races of one account's requests (the
    /// race is the engine's, not the limits').
    pub async fn spawn_unlimited(backend: Backend) -> Self {
        Self::spawn_limited(
            TestStore::new(backend).await,
            SimulatorConfig::default(),
            RoomSetup::default(),
            false,
            boxoffice_server::limits::LimitsConfig::OFF,
        )
        .await
    }

    /// [`TestApp::spawn_full`] with its own abuse limits (the others run with the defaults).
    pub async fn spawn_limited(
        db: TestStore,
        sim_config: SimulatorConfig,
        rooms: RoomSetup,
        waitroom_running: bool,
        limits: boxoffice_server::limits::LimitsConfig,
    ) -> Self {
        Self::spawn_paying(
            db,
            sim_config,
            rooms,
            waitroom_running,
            limits,
            None,
            boxoffice_server::WalletConfig::default(),
        )
        .await
    }

    /// [`TestApp::spawn`] signing wallet passes with `wallet`.
    pub async fn spawn_with_wallet(
        backend: Backend,
        wallet: boxoffice_server::WalletConfig,
    ) -> Self {
        Self::spawn_paying(
            TestStore::new(backend).await,
            SimulatorConfig::default(),
            RoomSetup::default(),
            false,
            boxoffice_server::limits::LimitsConfig::default(),
            None,
            wallet,
        )
        .await
    }

    /// [`TestApp::spawn`] paying through `payments` behind a [`CountingProxy`]
    /// (`provider_calls`), as `serve --payments stripe --stripe-api-base URL` does; the
    /// provider's webhooks come to this app. localstripe is started for it (the test fails
    /// when it is not installed).
    pub async fn spawn_counted(backend: Backend, payments: Payments) -> Self {
        Self::spawn_paying(
            TestStore::new(backend).await,
            SimulatorConfig::default(),
            RoomSetup::default(),
            false,
            boxoffice_server::limits::LimitsConfig::default(),
            Some(payments),
            boxoffice_server::WalletConfig::default(),
        )
        .await
    }

    async fn spawn_paying(
        db: TestStore,
        sim_config: SimulatorConfig,
        rooms: RoomSetup,
        waitroom_running: bool,
        limits: boxoffice_server::limits::LimitsConfig,
        counted: Option<Payments>,
        wallet: boxoffice_server::WalletConfig,
    ) -> Self {
        Self::spawn_mailing(
            db,
            sim_config,
            rooms,
            waitroom_running,
            limits,
            counted,
            wallet,
            None,
        )
        .await
    }

    /// [`TestApp::spawn`] with fans' mail going where `mail` says: the relay fans mails out;
    /// the mail sender does not run (tests call `state.mail`'s `run_once`).
    pub async fn spawn_with_mail(
        backend: Backend,
        mail: boxoffice_workers::mail::MailConfig,
    ) -> Self {
        Self::spawn_mailing(
            TestStore::new(backend).await,
            SimulatorConfig::default(),
            RoomSetup::default(),
            false,
            boxoffice_server::limits::LimitsConfig::default(),
            None,
            boxoffice_server::WalletConfig::default(),
            Some(mail),
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn spawn_mailing(
        db: TestStore,
        sim_config: SimulatorConfig,
        rooms: RoomSetup,
        waitroom_running: bool,
        limits: boxoffice_server::limits::LimitsConfig,
        counted: Option<Payments>,
        wallet: boxoffice_server::WalletConfig,
        mail: Option<boxoffice_workers::mail::MailConfig>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let webhook_url = format!("http://{addr}/v1/payments/webhooks/stripe");
        let sim = boxoffice_payments::simulator::spawn(SimulatorConfig {
            webhook_url: Some(webhook_url.clone()),
            ..sim_config
        })
        .await
        .expect("simulator");
        let mut localstripe = None;
        let (api_base, secret_key, webhook_secret) = match counted {
            None | Some(Payments::Simulator) => (
                sim.base_url.clone(),
                DEFAULT_SECRET_KEY,
                DEFAULT_WEBHOOK_SECRET,
            ),
            Some(Payments::LocalStripe) => {
                let started = LocalStripe::start()
                    .await
                    .unwrap_or_else(|why| panic!("{why}"));
                started
                    .send_webhooks_to(
                        &webhook_url,
                        boxoffice_payments::localstripe::WEBHOOK_SECRET,
                    )
                    .await
                    .expect("localstripe's webhooks");
                let base_url = started.base_url.clone();
                localstripe = Some(started);
                (
                    base_url,
                    boxoffice_payments::localstripe::SECRET_KEY,
                    boxoffice_payments::localstripe::WEBHOOK_SECRET,
                )
            }
        };
        let provider_calls = match counted {
            Some(_) => Some(CountingProxy::start(&api_base).await.expect("proxy")),
            None => None,
        };
        let provider = boxoffice_payments::StripeProvider::new(
            provider_calls
                .as_ref()
                .map_or(api_base, |proxy| proxy.base_url.clone()),
            secret_key.to_owned(),
            webhook_secret.to_owned(),
        )
        .with_timeout_ms(1_500);
        let signer = TicketSigner::generate().expect("ticket key");
        let config = ServerConfig {
            jwt_secret: SECRET.to_owned(),
            jwt_previous_secrets: Vec::new(),
            provider: Arc::new(provider),
            ticket_signer: signer.clone(),
            waitroom_state: rooms.state,
            waitroom_secret: Some(WAITROOM_SECRET.to_owned()),
            waitroom_previous_secrets: Vec::new(),
            waitroom_options: rooms.options,
            workers_store: None,
            writer_store: None,
            lease_store: None,
            writer_limits: Default::default(),
            max_connections: 0,
            cluster: None,
            web: boxoffice_server::policy::WebPolicy {
                cors_origins: vec![CORS_ORIGIN.to_owned()],
                connect_origins: vec![
                    boxoffice_server::policy::origin_of_url(&sim.base_url).expect("origin"),
                ],
            },
            limits,
            trusted_proxies: Vec::new(),
            mail,
            wallet,
        };
        let state = AppState::new(db.store.clone(), &config).expect("state");
        let mut tasks = vec![
            tokio::spawn(state.relay.clone().run()),
            tokio::spawn(state.reconciler.clone().run()),
            tokio::spawn(state.seatmaps.clone().run()),
            tokio::spawn(state.cancellations.clone().run()),
        ];
        if let Some(emails) = state.token_emails.lock().unwrap().take() {
            tasks.push(tokio::spawn(boxoffice_server::auth::record_token_emails(
                state.workers_store.clone(),
                emails,
            )));
        }
        if waitroom_running {
            tasks.push(tokio::spawn(
                state
                    .waitroom
                    .clone()
                    .run(db.store.clone(), state.seatmaps.clone()),
            ));
        }
        let served = state.clone();
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(listener, front(served)).await;
        }));
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(512)
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap();
        Self {
            db,
            sim,
            signer,
            addr,
            base: format!("http://{addr}"),
            http,
            admin: admin_token(),
            state,
            provider_calls,
            localstripe,
            tasks,
        }
    }

    /// Stops this app's server and workers (a process that died), keeping its store.
    pub fn stop(mut self) -> TestStore {
        for task in self.tasks.drain(..) {
            task.abort();
        }
        let TestApp { db, .. } = self;
        db
    }

    pub async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("request reaches the server");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("body").to_vec();
        assert!(
            !status.is_server_error(),
            "the server answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        Answer {
            status,
            headers,
            bytes,
        }
    }

    pub async fn get(&self, token: &str, path: &str) -> Answer {
        self.send(
            self.http
                .get(format!("{}{path}", self.base))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn delete(&self, token: &str, path: &str) -> Answer {
        self.send(
            self.http
                .delete(format!("{}{path}", self.base))
                .bearer_auth(token),
        )
        .await
    }

    pub async fn post(&self, token: &str, path: &str, key: Option<&str>, body: &Value) -> Answer {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap());
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        self.send(request).await
    }

    pub async fn put(&self, token: &str, path: &str, body: &Value) -> Answer {
        self.send(
            self.http
                .put(format!("{}{path}", self.base))
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(body).unwrap()),
        )
        .await
    }

    /// Creates an event from `overrides` merged over a small default and returns its id.
    pub async fn create_event(&self, overrides: Value) -> String {
        let mut body = json!({
            "name": "Story Night",
            "startsAt": "2027-01-01T20:00:00Z",
            "currency": "EUR",
            "sections": [{"name": "A", "rows": 20, "seatsPerRow": 30, "priceMinor": 1000}],
            "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 100, "priceMinor": 500}],
        });
        for (k, v) in overrides.as_object().unwrap() {
            body[k] = v.clone();
        }
        let key = uuid::Uuid::now_v7().to_string();
        let answer = self
            .post(&self.admin, "/v1/admin/events", Some(&key), &body)
            .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{}",
            String::from_utf8_lossy(&answer.bytes)
        );
        answer.json()["eventId"].as_str().unwrap().to_owned()
    }

    pub async fn hold(&self, account: &str, event_id: &str, key: &str, body: Value) -> Answer {
        self.post(
            &token(account),
            &format!("/v1/events/{event_id}/holds"),
            Some(key),
            &body,
        )
        .await
    }

    /// Checks `ticket` in at the door with its static code, as an admin.
    pub async fn check_in(&self, ticket: &Value) -> Answer {
        self.post(
            &self.admin,
            "/v1/admin/checkin",
            None,
            &json!({"code": ticket["code"]}),
        )
        .await
    }

    /// Whether `account` can hold `seat` now (and releases it at once).
    pub async fn holdable(&self, account: &str, event_id: &str, seat: &str) -> bool {
        // A busy answer (429, 503: the writer's queue full on a loaded machine) says nothing
        // about the seat: ask again, with a fresh key, for up to 10 s.
        let mut hold = None;
        for attempt in 0..50 {
            let key = format!("probe-{}", uuid::Uuid::now_v7());
            let answer = self
                .hold(account, event_id, &key, json!({"seatIds": [seat]}))
                .await;
            let busy = matches!(
                answer.status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            );
            hold = Some(answer);
            if !busy || attempt == 49 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let hold = hold.expect("at least one try");
        if hold.status != StatusCode::CREATED {
            return false;
        }
        let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
        self.delete(&token(account), &format!("/v1/holds/{hold_id}"))
            .await;
        true
    }

    pub async fn finish(self) {
        self.db.assert_invariants().await;
        self.db.cleanup().await;
    }
}

/// Declares each story once per backend: `postgres::name` and `sqlite::name`.
#[macro_export]
macro_rules! stories {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::common::Backend::Postgres).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name($crate::common::Backend::Sqlite).await
                }
            )*
        }
    };
}

/// Polls (for at most 5 s) until a statement of this PostgreSQL database whose text names
/// `table` waits for a lock. `false` if none did, or if `finished()` says the task that runs
/// it ended first (it never waited).
pub async fn waits_for_a_lock(
    pool: &sqlx::PgPool,
    table: &str,
    finished: impl Fn() -> bool,
) -> bool {
    for _ in 0..500 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'
                AND query ILIKE '%' || $1 || '%'",
        )
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting > 0 {
            return true;
        }
        if finished() {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

/// The payloads of the outbox messages of `topic`, oldest first (delivered ones stay, marked).
pub async fn outbox_payloads(app: &TestApp, topic: &str) -> Vec<Value> {
    let texts: Vec<String> = if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar("SELECT payload::text FROM outbox WHERE topic = $1 ORDER BY id")
            .bind(topic)
            .fetch_all(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_scalar("SELECT payload FROM outbox WHERE topic = ?1 ORDER BY id")
            .bind(topic)
            .fetch_all(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    };
    texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

/// Polls the account's order until `done` holds (bounded: 20 s).
pub async fn order_until(
    app: &TestApp,
    account: &str,
    order_id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = app
            .get(&token(account), &format!("/v1/orders/{order_id}"))
            .await
            .json();
        if done(&last) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("order {order_id} never reached the expected state: {last}");
}

/// Holds `body` for `account`, pays with `pm_card_visa`, and waits until the payment is
/// captured and every ticket issued: (order id, tickets).
pub async fn buy_captured(
    app: &TestApp,
    account: &str,
    event_id: &str,
    body: Value,
) -> (String, Vec<Value>) {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    let hold = app.hold(account, event_id, &key, body).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.json());
    let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
    let n = hold.json()["quantity"]
        .as_u64()
        .unwrap_or_else(|| hold.json()["seats"].as_array().unwrap().len() as u64);
    let paid = app
        .post(
            &token(account),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some(&format!("pay-{key}")),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order = order_until(app, account, &order_id, |o| {
        o["paymentStatus"] == "CAPTURED"
            && o["tickets"].as_array().is_some_and(|t| t.len() as u64 == n)
    })
    .await;
    (order_id, order["tickets"].as_array().unwrap().clone())
}
