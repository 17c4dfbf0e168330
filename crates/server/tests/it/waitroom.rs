//! Waiting-room stories over HTTP, each on both state backends (in process and Redis):
//! order, one place per account, admission tokens refused in every forged form, the
//! active-shopper cap under 1,000 concurrent pollers, slots returned on release and on
//! confirmation, the release controller backing off and stopping with the store, and a
//! restart that keeps places.
//!
//! Redis is reached at `BOXOFFICE_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`); each
//! test uses its own key prefix and deletes those keys at the end.

use boxoffice_store::OneShot as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::{Answer, Backend, RoomSetup, TestApp, TestStore, WAITROOM_SECRET, token};
use base64::Engine;
use boxoffice_domain::hold_ttl;
use boxoffice_payments::simulator::SimulatorConfig;
use boxoffice_server::runtime::waitroom::{TICKS_PER_DECISION, WaitingRoomOptions};
use boxoffice_waitroom::controller::ControllerConfig;
use boxoffice_waitroom::token::TokenKeys;
use boxoffice_waitroom_state::RoomStore;
use boxoffice_waitroom_state::memory::MemoryRooms;
use boxoffice_waitroom_state::redis::RedisRooms;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy)]
enum State {
    Memory,
    Redis,
}

fn redis_url() -> String {
    std::env::var("BOXOFFICE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// The state a test runs on, and how to remove it afterwards.
struct Rooms {
    setup: RoomSetup,
    prefix: Option<String>,
    dir: Option<std::path::PathBuf>,
}

impl Rooms {
    async fn new(state: State, controller: ControllerConfig) -> Self {
        let options = WaitingRoomOptions {
            controller: Some(controller),
        };
        match state {
            State::Memory => {
                let dir = std::env::temp_dir().join(format!(
                    "boxoffice-waitroom-test-{}",
                    uuid::Uuid::now_v7().simple()
                ));
                Self {
                    setup: RoomSetup {
                        state: Arc::new(MemoryRooms::open(&dir).expect("journal")),
                        options,
                    },
                    prefix: None,
                    dir: Some(dir),
                }
            }
            State::Redis => {
                let prefix = format!("bo:test:{}:", uuid::Uuid::now_v7().simple());
                let rooms = RedisRooms::connect(&redis_url(), &prefix)
                    .await
                    .expect("Redis for the waiting-room tests (BOXOFFICE_TEST_REDIS_URL)");
                Self {
                    setup: RoomSetup {
                        state: Arc::new(rooms),
                        options,
                    },
                    prefix: Some(prefix),
                    dir: None,
                }
            }
        }
    }

    /// A second handle on the same state (another node, or the same node after a restart).
    async fn reopen(&self) -> Arc<dyn RoomStore> {
        match (&self.prefix, &self.dir) {
            (Some(prefix), _) => Arc::new(RedisRooms::connect(&redis_url(), prefix).await.unwrap()),
            (None, Some(dir)) => Arc::new(MemoryRooms::open(dir).unwrap()),
            (None, None) => unreachable!(),
        }
    }

    /// Removes this test's journal or Redis keys (also when the test panics: see `Drop`).
    async fn cleanup(self) {
        drop(self);
    }
}

impl Drop for Rooms {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(prefix) = &self.prefix
            && let Ok(client) = ::redis::Client::open(redis_url())
            && let Ok(mut conn) = client.get_connection()
        {
            let keys: Vec<String> = ::redis::cmd("KEYS")
                .arg(format!("{prefix}*"))
                .query(&mut conn)
                .unwrap_or_default();
            if !keys.is_empty() {
                let _: Result<(), _> = ::redis::cmd("DEL").arg(keys).query(&mut conn);
            }
        }
    }
}

/// Releases fast so stories do not wait for the production ramp.
fn fast() -> ControllerConfig {
    ControllerConfig {
        max_release_per_s: 2_000,
        min_release_per_s: 50,
        increase_per_s: 500,
        start_release_per_s: 1_000,
        ..ControllerConfig::default()
    }
}

async fn spawn(state: State, controller: ControllerConfig) -> (TestApp, Rooms) {
    spawn_on(state, controller, Backend::Sqlite).await
}

/// [`spawn`] on the store `backend`.
async fn spawn_on(
    state: State,
    controller: ControllerConfig,
    backend: Backend,
) -> (TestApp, Rooms) {
    let rooms = Rooms::new(state, controller).await;
    let app = TestApp::spawn_full(
        TestStore::new(backend).await,
        SimulatorConfig::default(),
        rooms.setup.clone(),
        true,
    )
    .await;
    (app, rooms)
}

fn rfc3339_in(ms: i64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::milliseconds(ms);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

async fn room_event(app: &TestApp, policy: &str, max_active: u32, on_sale_in_ms: i64) -> String {
    app.create_event(json!({
        "onSaleAt": rfc3339_in(on_sale_in_ms),
        "waitingRoom": {"enabled": true, "policy": policy, "maxActiveShoppers": max_active,
                        "admissionTtlSeconds": 600},
    }))
    .await
}

async fn join(app: &TestApp, account: &str, event_id: &str) -> Value {
    let answer = app
        .post(
            &token(account),
            &format!("/v1/events/{event_id}/queue"),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.json());
    assert!(answer.headers.contains_key("retry-after"));
    answer.json()
}

async fn status(app: &TestApp, account: &str, event_id: &str, ticket: &str) -> Answer {
    app.send(
        app.http
            .get(format!("{}/v1/events/{event_id}/queue/status", app.base))
            .bearer_auth(token(account))
            .header("queue-ticket", ticket),
    )
    .await
}

/// Polls until the account is admitted; returns its admission token.
async fn admitted(app: &TestApp, account: &str, event_id: &str, ticket: &str) -> String {
    admitted_polling_every(app, account, event_id, ticket, 50).await
}

/// Polls every `interval_ms` (about; jittered) for up to two minutes until admitted.
async fn admitted_polling_every(
    app: &TestApp,
    account: &str,
    event_id: &str,
    ticket: &str,
    interval_ms: u64,
) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while std::time::Instant::now() < deadline {
        let answer = status(app, account, event_id, ticket).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
        let body = answer.json();
        match body["status"].as_str().unwrap() {
            "ADMITTED" => return body["admissionToken"].as_str().unwrap().to_owned(),
            "WAITING" => {
                let jitter = rand::random::<u64>() % (interval_ms / 2 + 1);
                tokio::time::sleep(Duration::from_millis(interval_ms + jitter)).await;
            }
            other => panic!("{account}: {other} {body}"),
        }
    }
    panic!("{account} never admitted");
}

async fn hold_with(
    app: &TestApp,
    account: &str,
    event_id: &str,
    admission: Option<&str>,
    seat: &str,
) -> Answer {
    let mut request = app
        .http
        .post(format!("{}/v1/events/{event_id}/holds", app.base))
        .bearer_auth(token(account))
        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
        .json(&json!({"seatIds": [seat]}));
    if let Some(admission) = admission {
        request = request.header("admission-token", admission);
    }
    app.send(request).await
}

async fn queue_admin(app: &TestApp, event_id: &str) -> Value {
    let answer = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/queue"))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
    answer.json()
}

/// Waits until this node's release has ticked `n` more times and returns the admin view
/// then: what the release did (or did not do) in `n` ticks, whatever time they took.
async fn after_ticks(app: &TestApp, event_id: &str, n: u64) -> Value {
    let start = queue_admin(app, event_id).await["ticks"].as_u64().unwrap();
    queue_until(app, event_id, &format!("{n} more ticks"), |v| {
        v["ticks"].as_u64().unwrap() >= start + n
    })
    .await
}

/// Waits until the admin view satisfies `done`.
async fn queue_until(
    app: &TestApp,
    event_id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..150 {
        last = queue_admin(app, event_id).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("queue never reached {what}: {last}");
}

macro_rules! on_both_states {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() { super::$name(super::State::Memory).await; })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() { super::$name(super::State::Redis).await; })*
        }
    };
}

on_both_states!(
    fifo_queue_admits_in_order_and_guards_holds,
    admission_tokens_are_refused_in_every_forged_form,
    random_policy_shuffles_the_pre_queue_once,
    thousand_pollers_never_exceed_the_cap,
    slot_returns_on_confirmation,
    controller_backs_off_when_the_store_slows_and_stops_when_it_is_down,
    restart_keeps_places,
    sold_out_reaches_every_queued_fan_and_release_resumes_when_seats_come_back,
    per_event_release_settings_round_trip,
    a_poll_from_memory_answers_as_the_route_does,
    slots_follow_the_shopper_and_release_follows_the_seats,
    the_hold_ttl_follows_the_sale_while_fans_wait,
    a_waiting_list_offer_is_paid_without_an_admission,
    a_cancelled_event_tells_every_queued_fan,
);

/// FIFO order for sequential joins; one place per account; holds need the account's own live
/// admission; a released hold gives its slot to the next in line at once.
async fn fifo_queue_admits_in_order_and_guards_holds(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "fifo", 2, 1_500).await;
    let mut tickets = Vec::new();
    for (i, account) in ["ann", "bob", "cat", "dan"].iter().enumerate() {
        let place = join(&app, account, &event_id).await;
        assert_eq!(place["status"], "WAITING");
        assert_eq!(place["position"], i as u64 + 1, "{place}");
        tickets.push(place["queueTicket"].as_str().unwrap().to_owned());
    }
    let again = join(&app, "bob", &event_id).await;
    assert_eq!(again["position"], 2, "joining again keeps the place");
    let before = status(&app, "cat", &event_id, &tickets[2]).await;
    assert_eq!(before.json()["status"], "WAITING");
    assert_eq!(before.json()["aheadOfYou"], 2);
    assert!(before.headers.contains_key("retry-after"));

    // Holds need an admission on this event.
    let no_token = hold_with(&app, "ann", &event_id, None, "A-1-1").await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    assert_eq!(no_token.code(), "ADMISSION_REQUIRED");

    let ann = admitted(&app, "ann", &event_id, &tickets[0]).await;
    let bob = admitted(&app, "bob", &event_id, &tickets[1]).await;
    // The cap is 2: cat is released but waits at the head for a free slot (however many
    // ticks pass).
    after_ticks(&app, &event_id, 4).await;
    let cat_waits = status(&app, "cat", &event_id, &tickets[2]).await.json();
    assert_eq!(cat_waits["status"], "WAITING", "{cat_waits}");
    assert_eq!(queue_admin(&app, &event_id).await["activeShoppers"], 2);

    let other = hold_with(&app, "ann", &event_id, Some(&bob), "A-1-1").await;
    assert_eq!(
        other.status,
        StatusCode::FORBIDDEN,
        "bob's admission on ann's hold"
    );
    assert_eq!(other.code(), "ADMISSION_INVALID");
    let held = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-1").await;
    assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();

    // Releasing the hold gives ann's slot back at once (issue 35: a slot follows the shopper,
    // not the admission); her admission stays for a second try, which takes a free slot.
    let released = app
        .delete(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await;
    assert_eq!(released.status, StatusCode::OK);
    let view = queue_admin(&app, &event_id).await;
    assert_eq!(view["activeShoppers"], 1, "{view}");
    assert_eq!(
        view["slots"],
        json!({"idle": 1, "holding": 0, "paying": 0}),
        "{view}"
    );
    let again = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-2").await;
    assert_eq!(again.status, StatusCode::CREATED, "{:?}", again.json());
    assert_eq!(queue_admin(&app, &event_id).await["activeShoppers"], 2);
    // A checkout of the hold she released (a retry that outlived its hold) is told about the
    // hold.
    let late_checkout = app
        .send(
            app.http
                .post(format!("{}/v1/holds/{hold_id}/checkout", app.base))
                .bearer_auth(token("ann"))
                .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                .header("admission-token", &ann)
                .json(&json!({"paymentMethodToken": "pm_card_visa"})),
        )
        .await;
    assert_eq!(late_checkout.status, StatusCode::CONFLICT);
    assert_eq!(late_checkout.code(), "HOLD_EXPIRED");
    // Leaving ends the trip: the slot goes to cat, ann's token is spent.
    let left = app
        .delete(&token("ann"), &format!("/v1/events/{event_id}/queue"))
        .await;
    assert_eq!(left.status, StatusCode::OK);
    assert_eq!(left.json()["admissionEnded"], true);
    let spent = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-3").await;
    assert_eq!(spent.code(), "ADMISSION_INVALID");
    admitted(&app, "cat", &event_id, &tickets[2]).await;
    let view = queue_admin(&app, &event_id).await;
    assert!(view["activeShoppers"].as_u64().unwrap() <= 2, "{view}");
    assert_eq!(view["policy"], "fifo");
    assert_eq!(view["joined"], 4);

    let metrics = app.get(&app.admin, "/metrics").await;
    let text = String::from_utf8_lossy(&metrics.bytes);
    for name in [
        "boxoffice_waitroom_waiting",
        "boxoffice_waitroom_active_shoppers",
        "boxoffice_waitroom_admitted_total",
        "boxoffice_waitroom_release_rate_per_second",
        "boxoffice_waitroom_polls_total",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics");
    }
    app.finish().await;
    rooms.cleanup().await;
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

/// A token for event A on event B, for account X by Y, tampered, expired, unsigned
/// (`alg: none`), signed with another key, or a queue ticket offered as admission: all 403
/// `ADMISSION_INVALID`. Queue tickets: another account's or event's is a 404, a forged one
/// a 400; a room-less event refuses joining.
async fn admission_tokens_are_refused_in_every_forged_form(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_a = room_event(&app, "fifo", 10, 0).await;
    let event_b = room_event(&app, "fifo", 10, 0).await;
    let ticket = join(&app, "ann", &event_a).await["queueTicket"]
        .as_str()
        .unwrap()
        .to_owned();
    let good = admitted(&app, "ann", &event_a, &ticket).await;
    let ticket_b = join(&app, "ann", &event_b).await["queueTicket"]
        .as_str()
        .unwrap()
        .to_owned();
    admitted(&app, "ann", &event_b, &ticket_b).await;

    let keys = TokenKeys::new(WAITROOM_SECRET.as_bytes()).unwrap();
    let other_keys = TokenKeys::new(b"another-secret-entirely-0123").unwrap();
    let now_s = time::OffsetDateTime::now_utc().unix_timestamp() as u64;
    let claims: Value = {
        let payload = good.split('.').nth(1).unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap(),
        )
        .unwrap()
    };
    let sid = claims["sid"].as_str().unwrap();
    let parts: Vec<&str> = good.split('.').collect();
    let mut tampered_claims = claims.clone();
    tampered_claims["sub"] = json!("eve");
    let cases = [
        (
            "another event's token",
            event_b.clone(),
            "ann",
            good.clone(),
        ),
        (
            "another account's token",
            event_a.clone(),
            "eve",
            good.clone(),
        ),
        (
            "tampered payload",
            event_a.clone(),
            "eve",
            format!(
                "{}.{}.{}",
                parts[0],
                b64(&tampered_claims.to_string()),
                parts[2]
            ),
        ),
        (
            "alg none",
            event_a.clone(),
            "ann",
            format!("{}.{}.", b64(r#"{"alg":"none","typ":"JWT"}"#), parts[1]),
        ),
        (
            "expired",
            event_a.clone(),
            "ann",
            keys.issue_admission(&event_a, "ann", sid, now_s - 60)
                .unwrap(),
        ),
        (
            "wrong key",
            event_a.clone(),
            "ann",
            other_keys
                .issue_admission(&event_a, "ann", sid, now_s + 600)
                .unwrap(),
        ),
        ("a queue ticket", event_a.clone(), "ann", ticket.clone()),
        (
            "another session",
            event_a.clone(),
            "ann",
            keys.issue_admission(&event_a, "ann", "not-the-session", now_s + 600)
                .unwrap(),
        ),
        ("garbage", event_a.clone(), "ann", "not.a.token".to_owned()),
    ];
    for (what, event_id, account, admission) in cases {
        let answer = hold_with(&app, account, &event_id, Some(&admission), "A-2-2").await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{what}: {:?}",
            answer.json()
        );
        assert_eq!(answer.code(), "ADMISSION_INVALID", "{what}");
    }
    let ok = hold_with(&app, "ann", &event_a, Some(&good), "A-2-2").await;
    assert_eq!(ok.status, StatusCode::CREATED, "the genuine token works");

    let others = status(&app, "eve", &event_a, &ticket).await;
    assert_eq!(
        others.status,
        StatusCode::NOT_FOUND,
        "another account's ticket"
    );
    let other_event = status(&app, "ann", &event_b, &ticket).await;
    assert_eq!(
        other_event.status,
        StatusCode::NOT_FOUND,
        "another event's ticket"
    );
    let forged = status(
        &app,
        "ann",
        &event_a,
        &format!("{}.{}.{}", parts[0], parts[1], b64("sig")),
    )
    .await;
    assert_eq!(forged.status, StatusCode::BAD_REQUEST);
    assert_eq!(forged.code(), "QUEUE_TICKET_INVALID");
    let missing = app
        .get(&token("ann"), &format!("/v1/events/{event_a}/queue/status"))
        .await;
    assert_eq!(missing.status, StatusCode::UNPROCESSABLE_ENTITY);
    let plain = app.create_event(json!({})).await;
    let refused = app
        .post(
            &token("ann"),
            &format!("/v1/events/{plain}/queue"),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.code(), "WAITING_ROOM_DISABLED");
    let unknown = app
        .post(&token("ann"), "/v1/events/nope/queue", None, &json!({}))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    app.finish().await;
    rooms.cleanup().await;
}

/// Under `random`, positions before on-sale are provisional join order; at on-sale the
/// pre-queue is shuffled once (a permutation, logged with its seed); later joiners append.
async fn random_policy_shuffles_the_pre_queue_once(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "random", 1_000, 1_500).await;
    // Pause release so positions can be read after on-sale without anyone leaving.
    let paused = app
        .send(
            app.http
                .put(format!("{}/v1/admin/events/{event_id}/queue", app.base))
                .bearer_auth(&app.admin)
                .json(&json!({"paused": true})),
        )
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{:?}", paused.json());
    assert_eq!(paused.json()["paused"], true);
    let accounts: Vec<String> = (0..40).map(|i| format!("fan-{i}")).collect();
    let mut tickets = Vec::new();
    for (i, account) in accounts.iter().enumerate() {
        let place = join(&app, account, &event_id).await;
        assert_eq!(place["position"], i as u64 + 1);
        assert_eq!(place["provisional"], true);
        tickets.push(place["queueTicket"].as_str().unwrap().to_owned());
    }
    let opened = queue_until(&app, &event_id, "opened", |v| v["openedAt"].is_string()).await;
    assert_eq!(opened["preQueueLength"], 40);
    assert!(opened["permutationSeed"].is_string());
    // Every node's view has refreshed since the shuffle.
    after_ticks(&app, &event_id, 2).await;
    let mut positions = Vec::new();
    for (account, ticket) in accounts.iter().zip(&tickets) {
        let body = status(&app, account, &event_id, ticket).await.json();
        assert_eq!(body["status"], "WAITING", "{body}");
        positions.push(body["position"].as_u64().unwrap());
    }
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=40).collect::<Vec<u64>>(),
        "nobody lost or duplicated"
    );
    assert_ne!(positions, (1..=40).collect::<Vec<u64>>(), "shuffled");
    let late = join(&app, "late", &event_id).await;
    assert_eq!(late["position"], 41);
    assert_eq!(late["provisional"], false);
    app.finish().await;
    rooms.cleanup().await;
}

/// 1,000 accounts poll at once; each admitted one either holds a seat and releases it or
/// leaves the room. A monitor reading the admin view never sees more active shoppers than
/// the cap, and everyone gets in.
async fn thousand_pollers_never_exceed_the_cap(state: State) {
    const POLLERS: usize = 1_000;
    const CAP: u64 = 25;
    let (app, rooms) = spawn(state, fast()).await;
    let app = Arc::new(app);
    let event_id = room_event(&app, "fifo", CAP as u32, 0).await;
    let mut tickets = Vec::new();
    for i in 0..POLLERS {
        let account = format!("fan-{i}");
        let ticket = join(&app, &account, &event_id).await["queueTicket"]
            .as_str()
            .unwrap()
            .to_owned();
        tickets.push((account, ticket));
    }
    let done = Arc::new(AtomicU64::new(0));
    let monitor = {
        let (app, event_id, done) = (app.clone(), event_id.clone(), done.clone());
        tokio::spawn(async move {
            let mut samples = 0;
            while done.load(Ordering::Relaxed) < POLLERS as u64 {
                let view = queue_admin(&app, &event_id).await;
                let active = view["activeShoppers"].as_u64().unwrap();
                assert!(
                    active <= CAP,
                    "{active} active shoppers over the cap {CAP}: {view}"
                );
                samples += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            samples
        })
    };
    let mut pollers = Vec::new();
    for (i, (account, ticket)) in tickets.into_iter().enumerate() {
        let (app, event_id, done) = (app.clone(), event_id.clone(), done.clone());
        pollers.push(tokio::spawn(async move {
            let admission = admitted_polling_every(&app, &account, &event_id, &ticket, 200).await;
            if i % 10 == 0 {
                // Every tenth shopper holds a seat with the admission and releases it (the
                // slot returns with the hold); the others leave the room.
                let seat = format!("A-{}-{}", i / 10 % 20 + 1, i / 200 + 1);
                let held = hold_with(&app, &account, &event_id, Some(&admission), &seat).await;
                assert_eq!(
                    held.status,
                    StatusCode::CREATED,
                    "{account}: {:?}",
                    held.json()
                );
                let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
                let released = app
                    .delete(&token(&account), &format!("/v1/holds/{hold_id}"))
                    .await;
                assert_eq!(released.status, StatusCode::OK);
            } else {
                let left = app
                    .delete(&token(&account), &format!("/v1/events/{event_id}/queue"))
                    .await;
                assert_eq!(left.status, StatusCode::OK);
                assert_eq!(left.json()["admissionEnded"], true, "{account}");
            }
            done.fetch_add(1, Ordering::Relaxed);
        }));
    }
    for poller in pollers {
        poller.await.unwrap();
    }
    let samples = monitor.await.unwrap();
    assert!(samples > 0);
    let view = queue_admin(&app, &event_id).await;
    assert_eq!(view["admitted"], POLLERS as u64, "{view}");
    assert_eq!(view["activeShoppers"], 0, "every slot came back: {view}");
    let app = Arc::into_inner(app).unwrap();
    app.finish().await;
    rooms.cleanup().await;
}

/// An admitted shopper who pays gives the slot back when the order is confirmed.
async fn slot_returns_on_confirmation(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "fifo", 5, 0).await;
    let ticket = join(&app, "ann", &event_id).await["queueTicket"]
        .as_str()
        .unwrap()
        .to_owned();
    let admission = admitted(&app, "ann", &event_id, &ticket).await;
    let hold = |key: &'static str, seat: &'static str| {
        app.http
            .post(format!("{}/v1/events/{event_id}/holds", app.base))
            .bearer_auth(token("ann"))
            .header("idempotency-key", key)
            .header("admission-token", &admission)
            .json(&json!({"seatIds": [seat]}))
    };
    let held = app.send(hold("hold-1", "A-3-3")).await;
    assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
    assert_eq!(queue_admin(&app, &event_id).await["activeShoppers"], 1);
    let without = app
        .post(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some("pay-0"),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(
        without.status,
        StatusCode::FORBIDDEN,
        "checkout needs the admission too"
    );
    let paid = app
        .send(
            app.http
                .post(format!("{}/v1/holds/{hold_id}/checkout", app.base))
                .bearer_auth(token("ann"))
                .header("idempotency-key", "pay-1")
                .header("admission-token", &admission)
                .json(&json!({"paymentMethodToken": "pm_card_visa"})),
        )
        .await;
    assert_eq!(paid.status, StatusCode::CREATED, "{:?}", paid.json());
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED");
    queue_until(&app, &event_id, "the slot back", |v| {
        v["activeShoppers"] == 0
    })
    .await;
    // The admission has ended; a retry of the checkout (its answer lost, the server
    // restarted) still replays its first answer rather than a 403, and so does a retry of
    // the hold. A new request with the spent admission is refused.
    let retried = app
        .send(
            app.http
                .post(format!("{}/v1/holds/{hold_id}/checkout", app.base))
                .bearer_auth(token("ann"))
                .header("idempotency-key", "pay-1")
                .header("admission-token", &admission)
                .json(&json!({"paymentMethodToken": "pm_card_visa"})),
        )
        .await;
    assert_eq!(retried.status, StatusCode::CREATED, "{:?}", retried.json());
    assert_eq!(retried.json()["orderId"], paid.json()["orderId"]);
    let replayed = app.send(hold("hold-1", "A-3-3")).await;
    assert_eq!(
        replayed.status,
        StatusCode::CREATED,
        "{:?}",
        replayed.json()
    );
    assert_eq!(replayed.json()["holdId"], hold_id.as_str());
    let fresh = app.send(hold("hold-2", "A-3-4")).await;
    assert_eq!(fresh.status, StatusCode::FORBIDDEN, "{:?}", fresh.json());
    assert_eq!(fresh.json()["code"], "ADMISSION_INVALID");
    app.finish().await;
    rooms.cleanup().await;
}

/// Block the store's writers: holds slow down, the controller halves the rate; close the
/// store: release stops and the serving counter stays put.
async fn controller_backs_off_when_the_store_slows_and_stops_when_it_is_down(state: State) {
    let controller = ControllerConfig {
        max_release_per_s: 400,
        min_release_per_s: 1,
        increase_per_s: 100,
        start_release_per_s: 400,
        ..ControllerConfig::default()
    };
    let (app, rooms) = spawn(state, controller).await;
    let app = Arc::new(app);
    let event_id = room_event(&app, "fifo", 10, 0).await;
    for i in 0..200 {
        join(&app, &format!("fan-{i}"), &event_id).await;
    }
    // Healthy: the rate stays at its cap (held there, as ten slots limit release).
    let healthy = queue_until(&app, &event_id, "a healthy decision", |v| {
        let reason = v["reason"].as_str().unwrap_or_default();
        reason.starts_with("increase") || reason.starts_with("hold")
    })
    .await;
    assert_eq!(healthy["releaseRatePerSecond"], 400, "{healthy}");

    // Slow: another connection holds the SQLite write lock for 2.5 s while holds arrive.
    let plain = app.create_event(json!({})).await;
    let path = app.db.sqlite_file().unwrap();
    let blocker = tokio::spawn(async move {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        sqlx::query("ROLLBACK").execute(&mut conn).await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let load = {
        let app = app.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                let url = format!("{}/v1/events/{plain}/holds", app.base);
                let _ = app
                    .http
                    .post(url)
                    .bearer_auth(token(&format!("load-{i}")))
                    .header("idempotency-key", format!("slow-{i}"))
                    .json(&json!({"seatIds": [format!("A-9-{}", i + 1)]}))
                    .send()
                    .await;
            }
        })
    };
    let backed_off = queue_until(&app, &event_id, "a decrease", |v| {
        v["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("decrease")
    })
    .await;
    assert!(
        backed_off["releaseRatePerSecond"].as_u64().unwrap() < 400,
        "{backed_off}"
    );
    blocker.await.unwrap();
    load.await.unwrap();

    // Down: the store's pools are closed; the controller stops release.
    let sqlite = app.db.sqlite.as_ref().unwrap();
    sqlite.pool().close().await;
    sqlite.reader_pool().close().await;
    let stopped = queue_until(&app, &event_id, "stopped", |v| {
        v["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("stopped")
    })
    .await;
    assert_eq!(stopped["releaseRatePerSecond"], 0);
    let serving = stopped["serving"].as_u64().unwrap();
    // Two more decisions' worth of ticks.
    let later = after_ticks(&app, &event_id, 2 * u64::from(TICKS_PER_DECISION)).await;
    assert_eq!(
        later["serving"].as_u64().unwrap(),
        serving,
        "nothing released while down: {later}"
    );
    assert!(later["waiting"].as_u64().unwrap() > 0, "{later}");
    let app = Arc::into_inner(app).unwrap();
    app.stop().cleanup().await;
    rooms.cleanup().await;
}

/// A node restarts: places, the serving counter and admissions survive (the journal in
/// process; Redis keeps them for every node).
async fn restart_keeps_places(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "fifo", 2, 0).await;
    let mut tickets = Vec::new();
    for account in ["ann", "bob", "cat", "dan"] {
        tickets.push(
            join(&app, account, &event_id).await["queueTicket"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let ann = admitted(&app, "ann", &event_id, &tickets[0]).await;
    let before = queue_admin(&app, &event_id).await;
    let db = app.stop();

    let setup = RoomSetup {
        state: rooms.reopen().await,
        options: rooms.setup.options,
    };
    let app = TestApp::spawn_full(db, SimulatorConfig::default(), setup, true).await;
    let after = queue_admin(&app, &event_id).await;
    assert_eq!(after["joined"], before["joined"]);
    assert!(
        after["serving"].as_u64() >= before["serving"].as_u64(),
        "{before} {after}"
    );
    assert_eq!(after["activeShoppers"], before["activeShoppers"]);
    let dan = status(&app, "dan", &event_id, &tickets[3]).await.json();
    assert_eq!(dan["position"], 4, "{dan}");
    let again = join(&app, "cat", &event_id).await;
    assert_eq!(again["position"], 3);
    let held = hold_with(&app, "ann", &event_id, Some(&ann), "A-4-4").await;
    assert_eq!(
        held.status,
        StatusCode::CREATED,
        "the admission survived: {:?}",
        held.json()
    );
    app.finish().await;
    rooms.cleanup().await;
}

/// Buys with the admission: a hold of `body`, then its checkout with a good card.
async fn buy(app: &TestApp, account: &str, event_id: &str, admission: &str, body: Value) -> String {
    let held = app
        .send(
            app.http
                .post(format!("{}/v1/events/{event_id}/holds", app.base))
                .bearer_auth(token(account))
                .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                .header("admission-token", admission)
                .json(&body),
        )
        .await;
    assert_eq!(
        held.status,
        StatusCode::CREATED,
        "{account}: {:?}",
        held.json()
    );
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
    let paid = app
        .send(
            app.http
                .post(format!("{}/v1/holds/{hold_id}/checkout", app.base))
                .bearer_auth(token(account))
                .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                .header("admission-token", admission)
                .json(&json!({"paymentMethodToken": "pm_card_visa"})),
        )
        .await;
    assert_eq!(
        paid.status,
        StatusCode::CREATED,
        "{account}: {:?}",
        paid.json()
    );
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED");
    paid.json()["orderId"].as_str().unwrap().to_owned()
}

/// Polls until the status is `want`; returns the answer.
async fn status_until(
    app: &TestApp,
    account: &str,
    event_id: &str,
    ticket: &str,
    want: &str,
) -> Answer {
    for _ in 0..200 {
        let answer = status(app, account, event_id, ticket).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
        if answer.json()["status"] == want {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{account} never {want}");
}

/// A house of one seat and one standing unit, one shopper at a time. A live hold on the last
/// unit is not a sell-out (it may lapse): fans keep waiting, and when it lapses release
/// resumes. Once both are sold, every queued fan's next poll (after the `Retry-After` it was
/// given) answers `SOLD_OUT`, a new joiner is told at once, and release stops. A sale given
/// back (a capture refused for good) brings the seat back: fans wait again and the next one
/// is admitted and holds it.
async fn sold_out_reaches_every_queued_fan_and_release_resumes_when_seats_come_back(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = app
        .create_event(json!({
            "holdTtlSeconds": 2,
            "paymentGraceSeconds": 0,
            "sections": [{"name": "A", "rows": 1, "seatsPerRow": 1, "priceMinor": 1000}],
            "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 1, "priceMinor": 500}],
            "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 1,
                            "admissionTtlSeconds": 600},
        }))
        .await;
    let fans: Vec<String> = (0..6).map(|i| format!("fan-{i}")).collect();
    let mut tickets = Vec::new();
    for fan in &fans[..5] {
        let joined = join(&app, fan, &event_id).await;
        assert_eq!(joined["status"], "WAITING");
        tickets.push(joined["queueTicket"].as_str().unwrap().to_owned());
    }
    // fan-0 holds the whole house and lets it lapse: nobody is told it is sold out.
    let first = admitted(&app, &fans[0], &event_id, &tickets[0]).await;
    for body in [
        json!({"seatIds": ["A-1-1"]}),
        json!({"tierId": "GA", "quantity": 1}),
    ] {
        let held = app
            .send(
                app.http
                    .post(format!("{}/v1/events/{event_id}/holds", app.base))
                    .bearer_auth(token(&fans[0]))
                    .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                    .header("admission-token", &first)
                    .json(&body),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
    }
    // Ticks pass (each one asks the seat map whether anything is left to sell).
    after_ticks(&app, &event_id, 3).await;
    for (fan, ticket) in fans[2..5].iter().zip(&tickets[2..5]) {
        let answer = status(&app, fan, &event_id, ticket).await;
        assert_eq!(
            answer.json()["status"],
            "WAITING",
            "held is not sold: {:?}",
            answer.json()
        );
    }
    assert_eq!(queue_admin(&app, &event_id).await["soldOut"], false);
    // The holds lapse (the store's clock moves past them), fan-0's slot comes back, release
    // resumes: fan-1 buys the unit, then fan-2 the seat, the last of the house.
    app.db.advance_clock(2_100).await;
    let second = admitted(&app, &fans[1], &event_id, &tickets[1]).await;
    buy(
        &app,
        &fans[1],
        &event_id,
        &second,
        json!({"tierId": "GA", "quantity": 1}),
    )
    .await;
    let third = admitted(&app, &fans[2], &event_id, &tickets[2]).await;
    let mut hints = Vec::new();
    for (fan, ticket) in fans[3..5].iter().zip(&tickets[3..5]) {
        let answer = status(&app, fan, &event_id, ticket).await;
        assert_eq!(answer.json()["status"], "WAITING");
        hints.push(
            answer.headers["retry-after"]
                .to_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    let order_id = buy(
        &app,
        &fans[2],
        &event_id,
        &third,
        json!({"seatIds": ["A-1-1"]}),
    )
    .await;
    // Each fan polls again (when its Retry-After says; here once the room knows): the answer
    // is SOLD_OUT.
    assert!(hints.iter().all(|hint| *hint >= 1), "{hints:?}");
    queue_until(&app, &event_id, "sold out", |v| v["soldOut"] == true).await;
    for (fan, ticket) in fans[3..5].iter().zip(&tickets[3..5]) {
        let answer = status(&app, fan, &event_id, ticket).await;
        assert_eq!(answer.status, StatusCode::OK);
        let body = answer.json();
        assert_eq!(body["status"], "SOLD_OUT", "{fan}: {body}");
        assert!(body.get("admissionToken").is_none());
        // The answer offers the group waiting list.
        assert_eq!(
            body["waitlist"],
            json!(format!("/v1/events/{event_id}/waitlist")),
            "{body}"
        );
        assert!(answer.headers.contains_key("retry-after"));
    }
    let late = join(&app, &fans[5], &event_id).await;
    assert_eq!(late["status"], "SOLD_OUT", "{late}");
    assert_eq!(
        late["waitlist"],
        json!(format!("/v1/events/{event_id}/waitlist"))
    );
    let late_ticket = late["queueTicket"].as_str().unwrap().to_owned();
    let stopped = queue_until(&app, &event_id, "a sold-out decision", |v| {
        v["decisions"]
            .as_array()
            .and_then(|d| d.last())
            .is_some_and(|d| d["kind"] == "sold_out")
    })
    .await;
    assert_eq!(stopped["soldOut"], true);
    let serving = stopped["serving"].as_u64().unwrap();
    assert_eq!(
        after_ticks(&app, &event_id, 2 * u64::from(TICKS_PER_DECISION)).await["serving"]
            .as_u64()
            .unwrap(),
        serving,
        "nobody is released into a sold-out sale"
    );
    // The seat's sale is given back: the seat is on sale again, fans wait again, and the next
    // in line is admitted and holds it.
    let operation_id: String =
        sqlx::query_scalar("SELECT operation_id FROM payment_operation WHERE order_id = ?1")
            .bind(&order_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap();
    assert!(
        app.db
            .store
            .compensate_failed_capture(&operation_id, "CAPTURE_FAILED")
            .await
            .unwrap()
    );
    app.state.seatmaps.poke();
    status_until(&app, &fans[5], &event_id, &late_ticket, "WAITING").await;
    let fourth = admitted(&app, &fans[3], &event_id, &tickets[3]).await;
    let held = hold_with(&app, &fans[3], &event_id, Some(&fourth), "A-1-1").await;
    assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
    app.finish().await;
    rooms.cleanup().await;
}

/// The release settings of the event body are the room's: the event shows them, and so
/// does the admin queue view; a bad one is refused with its field named.
async fn per_event_release_settings_round_trip(state: State) {
    let rooms = Rooms::new(state, ControllerConfig::default()).await;
    let mut setup = rooms.setup.clone();
    setup.options = WaitingRoomOptions { controller: None };
    let app = TestApp::spawn_full(
        TestStore::new(Backend::Sqlite).await,
        SimulatorConfig::default(),
        setup,
        true,
    )
    .await;
    let settings = json!({"enabled": true, "policy": "fifo", "maxActiveShoppers": 50,
        "admissionTtlSeconds": 120, "startReleasePerSecond": 40, "maxReleasePerSecond": 4000,
        "targetHoldP99Ms": 150, "claimWindowSeconds": 90, "holdWindowSeconds": 45});
    let event_id = app.create_event(json!({"waitingRoom": settings})).await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    for (field, value) in settings.as_object().unwrap() {
        assert_eq!(&event["waitingRoom"][field], value, "{field}");
    }
    join(&app, "ann", &event_id).await;
    let view = queue_admin(&app, &event_id).await;
    assert_eq!(
        view["settings"],
        json!({"startReleasePerSecond": 40, "maxReleasePerSecond": 4000,
               "targetHoldP99Ms": 150, "claimWindowSeconds": 90, "holdWindowSeconds": 45,
               "admissionTtlSeconds": 120})
    );
    // The first decision starts from the event's start rate and doubles it.
    let decided = queue_until(&app, &event_id, "a decision", |v| {
        v["decisions"].as_array().is_some_and(|d| !d.is_empty())
    })
    .await;
    let first = &decided["decisions"][0];
    assert_eq!(first["kind"], "slow_start", "{first}");
    assert_eq!(first["releaseRatePerSecond"], 80, "{first}");
    // Defaults, and a refusal that names the field.
    let plain = app
        .create_event(json!({"waitingRoom": {"enabled": true}}))
        .await;
    let plain = app
        .get(&token("ann"), &format!("/v1/events/{plain}"))
        .await
        .json();
    assert_eq!(plain["waitingRoom"]["startReleasePerSecond"], 10);
    assert_eq!(plain["waitingRoom"]["maxReleasePerSecond"], 500);
    assert_eq!(plain["waitingRoom"]["targetHoldP99Ms"], 300);
    assert_eq!(plain["waitingRoom"]["claimWindowSeconds"], 600);
    for (bad, field) in [
        (
            json!({"startReleasePerSecond": 600}),
            "waitingRoom.startReleasePerSecond",
        ),
        (
            json!({"maxReleasePerSecond": 0}),
            "waitingRoom.maxReleasePerSecond",
        ),
        (json!({"targetHoldP99Ms": 0}), "waitingRoom.targetHoldP99Ms"),
        (
            json!({"claimWindowSeconds": 5}),
            "waitingRoom.claimWindowSeconds",
        ),
    ] {
        let answer = app
            .post(
                &app.admin,
                "/v1/admin/events",
                Some(&uuid::Uuid::now_v7().to_string()),
                &json!({"name": "Bad", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                        "tiers": [{"tierId": "GA", "name": "GA", "capacity": 5, "priceMinor": 5}],
                        "waitingRoom": bad}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        assert!(
            answer.json().to_string().contains(field),
            "{bad}: {:?}",
            answer.json()
        );
    }
    app.finish().await;
    rooms.cleanup().await;
}

/// The status poll's hot path (tokens verified before, answered before the router) gives
/// the route's answer byte for byte; whatever it does not know — another account's ticket,
/// a token never seen, a forged ticket — the route answers as before.
async fn a_poll_from_memory_answers_as_the_route_does(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "fifo", 1, 0).await;
    let paused = app
        .send(
            app.http
                .put(format!("{}/v1/admin/events/{event_id}/queue", app.base))
                .bearer_auth(&app.admin)
                .json(&json!({"paused": true})),
        )
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{:?}", paused.json());
    let ann = join(&app, "ann", &event_id).await["queueTicket"]
        .as_str()
        .unwrap()
        .to_owned();
    let bob = join(&app, "bob", &event_id).await["queueTicket"]
        .as_str()
        .unwrap()
        .to_owned();
    // Ann's poll loads the room; its next ticks read what is left of the seats (the
    // answers' largestBlock), so that both of bob's answers below see the same room.
    status(&app, "ann", &event_id, &ann).await;
    after_ticks(&app, &event_id, 2).await;
    let first = status(&app, "bob", &event_id, &bob).await; // the route: verifies, caches
    let polls_before = queue_admin(&app, &event_id).await["polls"]
        .as_u64()
        .unwrap();
    let second = status(&app, "bob", &event_id, &bob).await; // from memory
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(first.bytes, second.bytes);
    assert_eq!(second.json()["status"], "WAITING");
    for name in ["content-type", "retry-after"] {
        assert_eq!(first.headers[name], second.headers[name], "{name}");
    }
    assert_eq!(
        queue_admin(&app, &event_id).await["polls"]
            .as_u64()
            .unwrap(),
        polls_before + 1,
        "a poll from memory is counted"
    );
    // Ann's ticket with Bob's token (both verified before): the route's 404.
    status(&app, "ann", &event_id, &ann).await;
    let crossed = status(&app, "bob", &event_id, &ann).await;
    assert_eq!(
        crossed.status,
        StatusCode::NOT_FOUND,
        "{:?}",
        crossed.json()
    );
    // A forged ticket: the route's 400.
    let forged = status(&app, "bob", &event_id, &format!("{bob}x")).await;
    assert_eq!(
        forged.status,
        StatusCode::BAD_REQUEST,
        "{:?}",
        forged.json()
    );
    assert_eq!(forged.json()["code"], "QUEUE_TICKET_INVALID");
    // The same ticket at another event's path: the route's answer too.
    let other = room_event(&app, "fifo", 1, 0).await;
    let elsewhere = status(&app, "bob", &other, &bob).await;
    assert_eq!(
        elsewhere.status,
        StatusCode::NOT_FOUND,
        "{:?}",
        elsewhere.json()
    );
    app.finish().await;
    rooms.cleanup().await;
}

/// Issue 35, on both store backends: a slot follows the shopper, not the admission. A fan
/// refused seats who walks away gives the slot back after a short grace; a fan idle past the
/// hold window gives it back
/// (the room's clock moved, no sleeping); a second try within the admission takes a free
/// slot, or waits at the head of the queue when none is. When everything left is held,
/// release stops and waiting fans hear `ALL_HELD`; it resumes as the holds lapse.
async fn slots_follow_the_shopper_and_release_follows_the_seats(state: State) {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (app, rooms) = spawn_on(state, fast(), backend).await;
        let event_id = app
            .create_event(json!({
                "holdTtlSeconds": 60,
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 3, "priceMinor": 1000}],
                "tiers": [],
                "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 2,
                                "admissionTtlSeconds": 600, "holdWindowSeconds": 30},
            }))
            .await;
        let fans = ["ann", "bob", "cat", "dan"];
        let mut tickets = Vec::new();
        for fan in fans {
            tickets.push(
                join(&app, fan, &event_id).await["queueTicket"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        let ann = admitted(&app, "ann", &event_id, &tickets[0]).await;
        let bob = admitted(&app, "bob", &event_id, &tickets[1]).await;
        let slots = |v: &Value| v["slots"].clone();
        assert_eq!(
            slots(&queue_admin(&app, &event_id).await),
            json!({"idle": 2, "holding": 0, "paying": 0})
        );
        let held = hold_with(&app, "bob", &event_id, Some(&bob), "A-1-1").await;
        assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
        // ann is refused bob's seat: her slot stays only the grace to try again; she walks
        // away (the room's clock passes the grace, no sleeping), and cat gets the slot.
        let refused = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-1").await;
        assert_eq!(refused.code(), "SEATS_UNAVAILABLE");
        app.state.waitroom.advance_clock(11_000);
        after_ticks(&app, &event_id, 2).await;
        let view = queue_admin(&app, &event_id).await;
        assert_eq!(view["activeShoppers"], 1, "{view}");
        assert_eq!(slots(&view), json!({"idle": 0, "holding": 1, "paying": 0}));
        admitted(&app, "cat", &event_id, &tickets[2]).await;
        // ann's second try: every slot is taken, she is first in line.
        let full = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-2").await;
        assert_eq!(full.status, StatusCode::FORBIDDEN, "{:?}", full.json());
        assert_eq!(full.code(), "ADMISSION_INVALID");
        // cat stays idle past the 30 s hold window: the slot comes back, ann takes it.
        app.state.waitroom.advance_clock(31_000);
        after_ticks(&app, &event_id, 2).await;
        let view = queue_admin(&app, &event_id).await;
        assert_eq!(
            slots(&view),
            json!({"idle": 0, "holding": 1, "paying": 0}),
            "{view}"
        );
        let again = hold_with(&app, "ann", &event_id, Some(&ann), "A-1-2").await;
        assert_eq!(again.status, StatusCode::CREATED, "{:?}", again.json());
        // The last seat: bob holds it too. Everything left is held: dan waits, told why.
        let last = hold_with(&app, "bob", &event_id, Some(&bob), "A-1-3").await;
        assert_eq!(last.status, StatusCode::CREATED, "{:?}", last.json());
        after_ticks(&app, &event_id, 12).await;
        let view = queue_admin(&app, &event_id).await;
        assert_eq!(
            view["decisions"].as_array().unwrap().last().unwrap()["kind"],
            "all_held",
            "{view}"
        );
        let dan = status(&app, "dan", &event_id, &tickets[3]).await.json();
        assert_eq!(dan["status"], "WAITING", "{dan}");
        assert_eq!(dan["reason"], "ALL_HELD", "{dan}");
        assert_eq!(dan["largestBlock"], 0, "{dan}");
        assert_eq!(
            dan["waitlist"],
            json!(format!("/v1/events/{event_id}/waitlist")),
            "{dan}"
        );
        // The holds lapse by the store's clock: release follows the seats back, dan gets in.
        app.db.advance_clock(61_000).await;
        admitted(&app, "dan", &event_id, &tickets[3]).await;
        queue_until(&app, &event_id, "a decision past all held", |v| {
            v["decisions"]
                .as_array()
                .and_then(|d| d.last())
                .is_some_and(|d| d["kind"] != "all_held")
        })
        .await;
        app.finish().await;
        rooms.cleanup().await;
    }
}

/// Issue 35, item 7, on both store backends: with `holdTtlFollowsSale`, once 50 fans have
/// started paying (here at once: a p99 of about 0 s, so the 60 s floor), a hold granted while
/// fans wait in the queue lasts 60 s instead of the event's 300 s; when nobody waits, 300 s
/// again. The deadline is the store's, read from the answers (`expiresAt` against the hold's
/// own grant, which the test brackets with the store's clock).
async fn the_hold_ttl_follows_the_sale_while_fans_wait(state: State) {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (app, rooms) = spawn_on(state, fast(), backend).await;
        let event_id = app
            .create_event(json!({
                "holdTtlSeconds": 300,
                "maxTicketsPerAccount": 2,
                "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 1000,
                                "admissionTtlSeconds": 600, "holdTtlFollowsSale": true},
            }))
            .await;
        let event = app
            .get(&token("ann"), &format!("/v1/events/{event_id}"))
            .await
            .json();
        assert_eq!(event["waitingRoom"]["holdTtlFollowsSale"], true);
        let ttl_of = |hold: &Value| {
            let parse = |at: &Value| {
                time::OffsetDateTime::parse(
                    at.as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap()
            };
            parse(&hold["expiresAt"])
        };
        // 50 fans hold a seat each and start paying at once.
        let payers: Vec<String> = (0..hold_ttl::SAMPLES_MIN)
            .map(|i| format!("payer-{i}"))
            .collect();
        let mut admissions = Vec::new();
        for payer in &payers {
            let ticket = join(&app, payer, &event_id).await["queueTicket"]
                .as_str()
                .unwrap()
                .to_owned();
            admissions.push(admitted(&app, payer, &event_id, &ticket).await);
        }
        for (i, (payer, admission)) in payers.iter().zip(&admissions).enumerate() {
            let seat = format!("A-{}-{}", 1 + i / 30, 1 + i % 30);
            let held = hold_with(&app, payer, &event_id, Some(admission), &seat).await;
            assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
            let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
            let paid = app
                .send(
                    app.http
                        .post(format!("{}/v1/holds/{hold_id}/checkout", app.base))
                        .bearer_auth(token(payer))
                        .header("idempotency-key", uuid::Uuid::now_v7().to_string())
                        .header("admission-token", admission)
                        .json(&json!({"paymentMethodToken": "pm_card_visa"})),
                )
                .await;
            assert_eq!(paid.status, StatusCode::CREATED, "{:?}", paid.json());
        }
        // ann is admitted; then release pauses and bob waits in the queue.
        let ann_ticket = join(&app, "ann", &event_id).await["queueTicket"]
            .as_str()
            .unwrap()
            .to_owned();
        let ann = admitted(&app, "ann", &event_id, &ann_ticket).await;
        let paused = app
            .send(
                app.http
                    .put(format!("{}/v1/admin/events/{event_id}/queue", app.base))
                    .bearer_auth(&app.admin)
                    .json(&json!({"paused": true})),
            )
            .await;
        assert_eq!(paused.status, StatusCode::OK, "{:?}", paused.json());
        after_ticks(&app, &event_id, 2).await;
        join(&app, "bob", &event_id).await;
        let waiting = after_ticks(&app, &event_id, 2).await;
        assert_eq!(waiting["waiting"], 1, "{waiting}");
        let short = hold_with(&app, "ann", &event_id, Some(&ann), "A-10-1").await;
        assert_eq!(short.status, StatusCode::CREATED, "{:?}", short.json());
        // A hold's TTL is its deadline less its grant time, both by the engine's clock (which
        // runs behind the store's by the latency of its last measurement: a bound read with
        // `store.now()` around the request would flake on a busy machine).
        assert_eq!(
            granted_ttl(&app, &short.json()).await,
            time::Duration::seconds(i64::from(hold_ttl::FLOOR_S)),
            "a hold while bob waits lasts the floor"
        );
        // Release resumes, bob is let in: nobody waits, the event's own 300 s again.
        let resumed = app
            .send(
                app.http
                    .put(format!("{}/v1/admin/events/{event_id}/queue", app.base))
                    .bearer_auth(&app.admin)
                    .json(&json!({"paused": false})),
            )
            .await;
        assert_eq!(resumed.status, StatusCode::OK, "{:?}", resumed.json());
        queue_until(&app, &event_id, "nobody waiting", |v| v["waiting"] == 0).await;
        after_ticks(&app, &event_id, 2).await;
        let long = hold_with(&app, "ann", &event_id, Some(&ann), "A-10-2").await;
        assert_eq!(long.status, StatusCode::CREATED, "{:?}", long.json());
        assert_eq!(
            granted_ttl(&app, &long.json()).await,
            time::Duration::seconds(300),
            "no demand waits: the event's TTL"
        );
        assert_eq!(
            ttl_of(&short.json()),
            expires_of(&app, short.json()["holdId"].as_str().unwrap()).await,
            "a granted deadline never moves"
        );
        app.finish().await;
        rooms.cleanup().await;
    }
}

/// How long a granted hold lasts: its deadline less the time the engine granted it (the
/// stored row's `created_at`, the group's clock), and the answer's deadline is the stored one.
async fn granted_ttl(app: &TestApp, hold: &Value) -> time::Duration {
    let stored = app
        .state
        .store
        .get_hold(hold["holdId"].as_str().unwrap())
        .await
        .unwrap()
        .expect("the granted hold is stored");
    let answered = time::OffsetDateTime::parse(
        hold["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(
        answered, stored.expires_at,
        "the answer's deadline is the stored one"
    );
    stored.expires_at - stored.created_at
}

async fn expires_of(app: &TestApp, hold_id: &str) -> time::OffsetDateTime {
    let hold = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    time::OffsetDateTime::parse(
        hold["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
}

/// Issue 35, item 3, on both store backends: a fan refused seats while everything is held
/// stays in line for what comes back on the group waiting list, leaves the room (its slot
/// goes to the next fan), and pays the offer it gets without an admission: the list is a line
/// of its own. A hold of the fan's own still needs one.
async fn a_waiting_list_offer_is_paid_without_an_admission(state: State) {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (app, rooms) = spawn_on(state, fast(), backend).await;
        let event_id = app
            .create_event(json!({
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 3, "priceMinor": 1000}],
                "tiers": [],
                "waitlistOfferTtlSeconds": 60,
                "onSaleAt": rfc3339_in(1_500),
                "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 2,
                                "admissionTtlSeconds": 600},
            }))
            .await;
        let ann_ticket = join(&app, "ann", &event_id).await["queueTicket"]
            .as_str()
            .unwrap()
            .to_owned();
        let bob_ticket = join(&app, "bob", &event_id).await["queueTicket"]
            .as_str()
            .unwrap()
            .to_owned();
        let ann = admitted(&app, "ann", &event_id, &ann_ticket).await;
        let bob = admitted(&app, "bob", &event_id, &bob_ticket).await;
        let all = app
            .send(
                app.http
                    .post(format!("{}/v1/events/{event_id}/holds", app.base))
                    .bearer_auth(token("ann"))
                    .header("idempotency-key", "all")
                    .header("admission-token", &ann)
                    .json(&json!({"seatIds": ["A-1-1", "A-1-2"]})),
            )
            .await;
        assert_eq!(all.status, StatusCode::CREATED, "{:?}", all.json());
        let ann_hold = all.json()["holdId"].as_str().unwrap().to_owned();

        // Bob's party of two finds one seat left. He joins the list and closes the page.
        let refused = app
            .send(
                app.http
                    .post(format!("{}/v1/events/{event_id}/holds", app.base))
                    .bearer_auth(token("bob"))
                    .header("idempotency-key", "two")
                    .header("admission-token", &bob)
                    .json(&json!({"bestAvailable": {"quantity": 2}})),
            )
            .await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.json());
        assert_eq!(refused.json()["largestBlock"], 1, "{:?}", refused.json());
        let listed = app
            .post(
                &token("bob"),
                &format!("/v1/events/{event_id}/waitlist"),
                Some("w"),
                &json!({"quantity": 2}),
            )
            .await;
        assert_eq!(listed.status, StatusCode::CREATED, "{:?}", listed.json());
        assert_eq!(listed.json()["status"], "WAITING");
        let waitlist_id = listed.json()["waitlistId"].as_str().unwrap().to_owned();
        let left = app
            .delete(&token("bob"), &format!("/v1/events/{event_id}/queue"))
            .await;
        assert_eq!(left.status, StatusCode::OK, "{:?}", left.json());

        // Ann lets the seats go: they are bob's offer, not back on sale.
        let released = app
            .delete(&token("ann"), &format!("/v1/holds/{ann_hold}"))
            .await;
        assert_eq!(released.status, StatusCode::OK, "{:?}", released.json());
        let mut offer = Value::Null;
        for _ in 0..200 {
            offer = app
                .get(
                    &token("bob"),
                    &format!("/v1/events/{event_id}/waitlist/{waitlist_id}"),
                )
                .await
                .json();
            if offer["status"] == "OFFERED" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(offer["status"], "OFFERED", "{offer}");
        let offer_hold = offer["holdId"].as_str().unwrap().to_owned();
        let held = app
            .get(&token("bob"), &format!("/v1/holds/{offer_hold}"))
            .await
            .json();
        assert_eq!(held["status"], "HELD", "{held}");
        let seats = held["seats"].as_array().unwrap();
        assert_eq!(seats.len(), 2, "{held}");
        let seat = seats[0]["seatId"].as_str().unwrap();
        let again = hold_with(&app, "ann", &event_id, Some(&ann), seat).await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{:?}", again.json());

        // Bob pays the offer with no admission token.
        let paid = app
            .post(
                &token("bob"),
                &format!("/v1/holds/{offer_hold}/checkout"),
                Some("pay"),
                &json!({"paymentMethodToken": "pm_card_visa"}),
            )
            .await;
        assert_eq!(paid.status, StatusCode::CREATED, "{:?}", paid.json());
        assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{:?}", paid.json());

        // A fan's own hold still needs an admission: bob has none.
        let own = hold_with(&app, "bob", &event_id, None, "A-1-1").await;
        assert_eq!(own.status, StatusCode::FORBIDDEN, "{:?}", own.json());
        app.finish().await;
        rooms.cleanup().await;
    }
}

/// Issue 37: once the event is cancelled, every queued fan's poll (from memory or through the
/// router) and every new join answers `CANCELLED`, and an admitted fan's hold is refused.
async fn a_cancelled_event_tells_every_queued_fan(state: State) {
    let (app, rooms) = spawn(state, fast()).await;
    let event_id = room_event(&app, "fifo", 1, 0).await;
    let ann = join(&app, "ann", &event_id).await;
    let ann_ticket = ann["queueTicket"].as_str().unwrap().to_owned();
    let admission = admitted(&app, "ann", &event_id, &ann_ticket).await;
    let bob = join(&app, "bob", &event_id).await;
    let bob_ticket = bob["queueTicket"].as_str().unwrap().to_owned();
    assert_eq!(
        status(&app, "bob", &event_id, &bob_ticket).await.json()["status"],
        "WAITING"
    );
    let cancelled = app
        .post(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/cancel"),
            Some("c"),
            &json!({"reason": "Snow"}),
        )
        .await;
    assert_eq!(
        cancelled.status,
        StatusCode::ACCEPTED,
        "{}",
        cancelled.json()
    );
    // At once on this node: the waiting fan, the admitted one and a new joiner.
    let bob_now = status(&app, "bob", &event_id, &bob_ticket).await;
    assert_eq!(bob_now.json()["status"], "CANCELLED", "{}", bob_now.json());
    assert!(bob_now.headers.contains_key("retry-after"));
    assert_eq!(
        status(&app, "ann", &event_id, &ann_ticket).await.json()["status"],
        "CANCELLED"
    );
    let cat = join(&app, "cat", &event_id).await;
    assert_eq!(cat["status"], "CANCELLED", "{cat}");
    let held = hold_with(&app, "ann", &event_id, Some(&admission), "A-1-1").await;
    assert_eq!(
        (held.status, held.code().as_str()),
        (StatusCode::CONFLICT, "EVENT_CANCELLED"),
        "{}",
        held.json()
    );
    app.finish().await;
    rooms.cleanup().await;
}
