//! One owner per event across nodes (`boxoffice serve` processes on one PostgreSQL, and two
//! on one SQLite file): requests for one event spread over every node reach its one writer
//! (forwarded to the lease holder), races and shared keys answer as on one node, a paused
//! owner is fenced when it wakes, a killed owner's event is taken over once its lease lapses,
//! a graceful stop hands the lease over without a failed request, and `boxoffice check` is
//! clean after each.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use boxoffice_domain::ids::AccountId;
use serde_json::{Value, json};
use support::{BIN, Paysim, first_line_url};

const SECRET: &str = "cluster-test-secret-0123456789";
const NODE_HEADER: &str = "x-boxoffice-node";

struct Node {
    child: Child,
    base: String,
    id: String,
}

impl Node {
    fn start(
        database_url: &str,
        paysim: &Paysim,
        id: &str,
        ttl_ms: u64,
        dir: &std::path::Path,
    ) -> Self {
        let log = std::fs::File::create(dir.join(format!("{id}.log"))).unwrap();
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--database-url",
                database_url,
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--node-id", id, "--lease-ttl-ms", &ttl_ms.to_string()])
            .args(["--payments", "stripe", "--stripe-api-base", &paysim.base])
            .arg("--ticket-key")
            .arg(dir.join("ticket-key.pem"))
            .arg("--waitroom-state")
            .arg(dir.join(format!("{id}.waitroom")))
            .env("BOXOFFICE_JWT_SECRET", SECRET)
            .env(
                "STRIPE_SECRET_KEY",
                boxoffice_payments::simulator::DEFAULT_SECRET_KEY,
            )
            .env(
                "STRIPE_WEBHOOK_SECRET",
                boxoffice_payments::simulator::DEFAULT_WEBHOOK_SECRET,
            )
            .env("RUST_LOG", "info,sqlx=warn")
            .env_remove("BOXOFFICE_CRASH_AT")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let base = first_line_url(&mut child, "listening on ");
        Self {
            child,
            base,
            id: id.to_owned(),
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.id);
    }

    /// Waits (bounded) for the process to end after a signal.
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} never exited",
                self.id
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token(account: &str, admin: bool) -> String {
    let account = AccountId::parse(account).unwrap();
    boxoffice_server::auth::mint_token(SECRET, &account, admin, 3600).unwrap()
}

/// One answer: status, the node that decided it, `Retry-After`, the body.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    node: Option<String>,
    retry_after: bool,
    body: Value,
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let node = response
        .headers()
        .get(NODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let retry_after = response.headers().contains_key("retry-after");
    let body = response.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        node,
        retry_after,
        body,
    }
}

async fn post(http: &reqwest::Client, url: String, token: &str, key: &str, body: &Value) -> Answer {
    send(
        http.post(url)
            .bearer_auth(token)
            .header("idempotency-key", key)
            .json(body),
    )
    .await
}

async fn hold(
    http: &reqwest::Client,
    base: &str,
    event_id: &str,
    account: &str,
    key: &str,
    seat: &str,
) -> Answer {
    post(
        http,
        format!("{base}/v1/events/{event_id}/holds"),
        &token(account, false),
        key,
        &json!({"seatIds": [seat]}),
    )
    .await
}

/// [`hold`], sent again while the key's first request is still in flight.
async fn hold_until_done(
    http: &reqwest::Client,
    base: &str,
    event_id: &str,
    account: &str,
    key: &str,
    seat: &str,
) -> Answer {
    loop {
        let answer = hold(http, base, event_id, account, key, seat).await;
        if answer.body["code"] != "IDEMPOTENCY_IN_PROGRESS" {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_event(
    http: &reqwest::Client,
    node: &Node,
    rows: u32,
    seats_per_row: u32,
) -> String {
    let answer = post(
        http,
        format!("{}/v1/admin/events", node.base),
        &token("ops", true),
        &uuid::Uuid::now_v7().to_string(),
        &json!({"name": "Cluster Night", "startsAt": "2027-06-01T20:00:00Z", "currency": "EUR",
                "paymentGraceSeconds": 600,
                "sections": [{"name": "A", "rows": rows, "seatsPerRow": seats_per_row, "priceMinor": 100}]}),
    )
    .await;
    assert_eq!(answer.status, 201, "{:?}", answer.body);
    answer.body["eventId"].as_str().unwrap().to_owned()
}

async fn owner_view(http: &reqwest::Client, node: &Node, event_id: &str) -> Value {
    send(
        http.get(format!("{}/v1/admin/events/{event_id}/owner", node.base))
            .bearer_auth(token("ops", true)),
    )
    .await
    .body
}

/// A metric's value on a node (0 when not yet recorded).
async fn metric(http: &reqwest::Client, node: &Node, name: &str) -> f64 {
    let page = http
        .get(format!("{}/metrics", node.base))
        .bearer_auth(token("ops", true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    page.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

fn check(database_url: &str) {
    let check = Command::new(BIN)
        .args(["check", "--database-url", database_url])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "boxoffice check: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// A private PostgreSQL database (created by the first node's migration) and a directory,
/// both removed at the end.
struct Setup {
    database_url: String,
    db: Option<String>,
    dir: std::path::PathBuf,
    paysim: Paysim,
}

impl Setup {
    fn postgres() -> Self {
        let base = std::env::var("BOXOFFICE_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        Self::new(format!("{base}/{db}"), Some(db))
    }

    fn sqlite() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "boxoffice-cluster-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("store.db").display());
        let mut setup = Self::new(url, None);
        let _ = std::fs::remove_dir_all(&setup.dir);
        setup.dir = dir;
        setup
    }

    fn new(database_url: String, db: Option<String>) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "boxoffice-cluster-{}",
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            database_url,
            db,
            dir,
            paysim: Paysim::start(),
        }
    }

    fn node(&self, id: &str, ttl_ms: u64) -> Node {
        Node::start(&self.database_url, &self.paysim, id, ttl_ms, &self.dir)
    }

    async fn finish(self) {
        check(&self.database_url);
        if let Some(db) = &self.db {
            let base = self.database_url.trim_end_matches(db.as_str()).to_owned();
            let admin = sqlx::PgPool::connect(&format!("{base}postgres"))
                .await
                .unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
            )))
            .execute(&admin)
            .await
            .unwrap();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three nodes, requests for one event spread over all of them: each round of 256 clients
/// racing one seat grants it once and refuses the rest 409, none 429 (the first round on a
/// cold event included); one key sent to two nodes at once makes one hold and two
/// identical answers; a hold taken on one node is paid on another; every write was decided
/// by the one owner, and every node names the same owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_one_owner() {
    let _heavy = support::heavy();
    const RACERS: usize = 256;
    const ROUNDS: usize = 3;
    let setup = Setup::postgres();
    let nodes: Vec<Node> = ["node-1", "node-2", "node-3"]
        .into_iter()
        .map(|id| setup.node(id, 2_000))
        .collect();
    let http = http();
    let event_id = create_event(&http, &nodes[0], 2, 10).await;
    let mut deciders = BTreeSet::new();
    for round in 0..ROUNDS {
        let seat = format!("A-1-{}", round + 1);
        let racers = (0..RACERS).map(|i| {
            let (http, base) = (http.clone(), nodes[i % nodes.len()].base.clone());
            let (event_id, seat) = (event_id.clone(), seat.clone());
            async move {
                hold(
                    &http,
                    &base,
                    &event_id,
                    &format!("fan-{round}-{i}"),
                    &format!("race-{round}-{i}"),
                    &seat,
                )
                .await
            }
        });
        let answers = futures_join_all(racers).await;
        // The first round is the opening burst on an event no node has loaded: the requests
        // that arrive while the owner reads the event, takes the lease and loads the engine
        // wait for that one load instead of each spending store calls, so none of them is
        // refused as busy.
        let busy: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
        assert!(
            busy.is_empty(),
            "round {round}: {} got 429: {:?}",
            busy.len(),
            busy.first()
        );
        let won = answers.iter().filter(|a| a.status == 201).count();
        let lost = answers.iter().filter(|a| a.status == 409).count();
        assert_eq!(
            (won, lost),
            (1, RACERS - 1),
            "round {round}: one 201, the rest 409: {:?}",
            answers
                .iter()
                .filter(|a| a.status != 409)
                .collect::<Vec<_>>()
        );
        deciders.extend(answers.iter().filter_map(|a| a.node.clone()));
    }
    assert_eq!(
        deciders.len(),
        1,
        "one node decided every write: {deciders:?}"
    );
    let owner_id = deciders.into_iter().next().unwrap();

    // One key on two nodes at once: one hold, two identical answers (the one that finds the
    // other in flight is told 409 IDEMPOTENCY_IN_PROGRESS, as on one node, and retries).
    let (first, second) = tokio::join!(
        hold_until_done(
            &http,
            &nodes[1].base,
            &event_id,
            "twin",
            "twin-key",
            "A-2-1"
        ),
        hold_until_done(
            &http,
            &nodes[2].base,
            &event_id,
            "twin",
            "twin-key",
            "A-2-1"
        ),
    );
    assert_eq!(
        (first.status, second.status),
        (201, 201),
        "{first:?} {second:?}"
    );
    assert_eq!(first.body, second.body, "the same answer from both nodes");

    // A hold taken on one node, paid on another, read on a third.
    let held = hold(
        &http,
        &nodes[0].base,
        &event_id,
        "payer",
        "payer-hold",
        "A-2-2",
    )
    .await;
    assert_eq!(held.status, 201, "{:?}", held.body);
    let hold_id = held.body["holdId"].as_str().unwrap();
    let paid = post(
        &http,
        format!("{}/v1/holds/{hold_id}/checkout", nodes[2].base),
        &token("payer", false),
        "payer-pay",
        &json!({"paymentMethodToken": "pm_card_visa"}),
    )
    .await;
    assert!(matches!(paid.status, 201 | 202), "{:?}", paid.body);
    assert_eq!(
        paid.node.as_deref(),
        Some(owner_id.as_str()),
        "decided by the owner"
    );
    let order_id = paid.body["orderId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    loop {
        let order = send(
            http.get(format!("{}/v1/orders/{order_id}", nodes[1].base))
                .bearer_auth(token("payer", false)),
        )
        .await;
        if order.body["orderStatus"] == "CONFIRMED" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never confirmed: {:?}",
            order.body
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for node in &nodes {
        let view = owner_view(&http, node, &event_id).await;
        assert_eq!(view["nodeId"], owner_id.as_str(), "{view}");
        assert_eq!(view["epoch"], 1, "the lease never changed hands: {view}");
        assert_eq!(view["live"], true, "{view}");
    }
    let forwarded: f64 = {
        let mut total = 0.0;
        for node in &nodes {
            total += metric(&http, node, "boxoffice_cluster_forwarded_total").await;
        }
        total
    };
    assert!(forwarded >= 1.0, "the non-owners forwarded their requests");
    drop(nodes);
    setup.finish().await;
}

/// `futures::future::join_all` without the dependency: every future on the runtime at once.
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// The owner is paused (SIGSTOP) with requests in flight, past its lease; the other node
/// takes the lease over and sells; the owner wakes up (SIGCONT) and is fenced: no seat is
/// granted twice, every client gets an answer the contract allows, the lease stays with the
/// new owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_owner_is_fenced() {
    let _heavy = support::heavy();
    const TTL_MS: u64 = 1_000;
    let setup = Setup::postgres();
    let (a, b) = (setup.node("node-a", TTL_MS), setup.node("node-b", TTL_MS));
    let http = http();
    let event_id = create_event(&http, &a, 3, 20).await;
    let first = hold(&http, &a.base, &event_id, "first", "first", "A-1-1").await;
    assert_eq!(first.status, 201);
    let (owner, other) = if first.node.as_deref() == Some("node-a") {
        (&a, &b)
    } else {
        (&b, &a)
    };

    // Requests in flight at the owner when it stops.
    let in_flight: Vec<_> = (1..=20)
        .map(|i| {
            let (http, url, event_id) = (http.clone(), owner.base.clone(), event_id.clone());
            tokio::spawn(async move {
                let answer = hold(
                    &http,
                    &url,
                    &event_id,
                    &format!("early-{i}"),
                    &format!("early-{i}"),
                    &format!("A-2-{i}"),
                )
                .await;
                (format!("A-2-{i}"), answer)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(5)).await;
    owner.signal("STOP");
    tokio::time::sleep(Duration::from_millis(TTL_MS + 500)).await;

    // The other node takes the lease over and sells the same seats.
    let mut answers: Vec<(String, Answer)> = Vec::new();
    for i in 1..=20 {
        let seat = format!("A-2-{i}");
        let answer = hold(
            &http,
            &other.base,
            &event_id,
            &format!("late-{i}"),
            &format!("late-{i}"),
            &seat,
        )
        .await;
        assert!(matches!(answer.status, 201 | 409), "{seat}: {answer:?}");
        assert_eq!(
            answer.node.as_deref(),
            Some(other.id.as_str()),
            "served by the new owner"
        );
        answers.push((seat, answer));
    }
    let view = owner_view(&http, other, &event_id).await;
    assert_eq!(view["nodeId"], other.id.as_str(), "{view}");
    assert_eq!(view["epoch"], 2, "{view}");

    owner.signal("CONT");
    for request in in_flight {
        let (seat, answer) = request.await.unwrap();
        assert!(
            matches!(answer.status, 201 | 409) || (answer.status == 503 && answer.retry_after),
            "{seat}: the paused owner's client gets an answer the contract allows: {answer:?}"
        );
        answers.push((seat, answer));
    }
    let mut granted: BTreeMap<String, usize> = BTreeMap::new();
    for (seat, answer) in &answers {
        if answer.status == 201 {
            *granted.entry(seat.clone()).or_default() += 1;
        }
    }
    assert!(
        granted.values().all(|n| *n == 1),
        "no seat granted twice: {granted:?}"
    );
    assert!(!granted.is_empty(), "the new owner sold");

    // The woken node learns it lost the lease, and forwards from now on.
    let started = Instant::now();
    while metric(&http, owner, "boxoffice_cluster_leases_lost_total").await < 1.0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the paused owner never noticed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = hold(&http, &owner.base, &event_id, "after", "after", "A-3-1").await;
    assert!(
        (after.status == 201 && after.node.as_deref() == Some(other.id.as_str()))
            || (after.status == 503 && after.retry_after),
        "{after:?}"
    );
    let view = owner_view(&http, owner, &event_id).await;
    assert_eq!(
        view["nodeId"],
        other.id.as_str(),
        "the lease stays with the new owner: {view}"
    );
    drop((a, b));
    setup.finish().await;
}

/// The owner is killed (SIGKILL): the other node takes the event over once the lease lapses
/// and serves it; the requests it got meanwhile are served after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_owner_is_taken_over() {
    let _heavy = support::heavy();
    const TTL_MS: u64 = 1_500;
    let setup = Setup::postgres();
    let (a, b) = (setup.node("node-a", TTL_MS), setup.node("node-b", TTL_MS));
    let http = http();
    let event_id = create_event(&http, &a, 1, 10).await;
    let first = hold(&http, &b.base, &event_id, "first", "first", "A-1-1").await;
    assert_eq!(first.status, 201);
    let (mut owner, other) = if first.node.as_deref() == Some("node-a") {
        (a, b)
    } else {
        (b, a)
    };
    owner.signal("KILL");
    owner.wait_exit();
    let killed = Instant::now();
    let next = hold(&http, &other.base, &event_id, "next", "next", "A-1-2").await;
    let served_after = killed.elapsed();
    assert_eq!(next.status, 201, "{next:?}");
    assert_eq!(next.node.as_deref(), Some(other.id.as_str()));
    eprintln!(
        "served by {} {} ms after the kill (lease TTL {TTL_MS} ms)",
        other.id,
        served_after.as_millis()
    );
    let view = owner_view(&http, &other, &event_id).await;
    assert_eq!(
        (view["nodeId"].clone(), view["epoch"].clone()),
        (json!(other.id), json!(2)),
        "{view}"
    );
    // The hold the dead owner granted is still there, and still its seat's only hold.
    let again = hold(&http, &other.base, &event_id, "first", "first", "A-1-1").await;
    assert_eq!(
        (again.status, again.body.clone()),
        (201, first.body.clone()),
        "replayed"
    );
    let taken = hold(&http, &other.base, &event_id, "thief", "thief", "A-1-1").await;
    assert_eq!(taken.status, 409, "{taken:?}");
    drop((owner, other));
    setup.finish().await;
}

/// A graceful stop (SIGTERM) of the owner while a client keeps buying through the other
/// node: the lease is handed back at once, the other node takes it, and no request fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_stop_hands_the_lease_over() {
    let _heavy = support::heavy();
    // A long TTL: the handover must not wait for it.
    const TTL_MS: u64 = 10_000;
    let setup = Setup::postgres();
    let (a, b) = (setup.node("node-a", TTL_MS), setup.node("node-b", TTL_MS));
    let http = http();
    let event_id = create_event(&http, &a, 4, 25).await;
    let first = hold(&http, &b.base, &event_id, "first", "first", "A-1-1").await;
    assert_eq!(first.status, 201);
    let (mut owner, other) = if first.node.as_deref() == Some("node-a") {
        (a, b)
    } else {
        (b, a)
    };
    let buyer = {
        let (http, other_base, event_id) = (http.clone(), other.base.clone(), event_id.clone());
        tokio::spawn(async move {
            let mut answers = Vec::new();
            let mut longest = Duration::ZERO;
            for i in 2..=80 {
                let seat = format!("A-{}-{}", (i - 1) / 25 + 1, (i - 1) % 25 + 1);
                let sent = Instant::now();
                let answer = hold(
                    &http,
                    &other_base,
                    &event_id,
                    &format!("fan-{i}"),
                    &format!("k-{i}"),
                    &seat,
                )
                .await;
                longest = longest.max(sent.elapsed());
                answers.push((seat, answer));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (answers, longest)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    owner.signal("TERM");
    let status = owner.wait_exit();
    assert!(
        status.success(),
        "a graceful stop exits cleanly: {status:?}"
    );
    let (answers, longest) = buyer.await.unwrap();
    for (seat, answer) in &answers {
        assert_eq!(
            answer.status, 201,
            "{seat}: no request fails across the handover: {answer:?}"
        );
    }
    eprintln!(
        "longest answer across the handover: {} ms (lease TTL {TTL_MS} ms)",
        longest.as_millis()
    );
    let view = owner_view(&http, &other, &event_id).await;
    assert_eq!(
        (view["nodeId"].clone(), view["epoch"].clone()),
        (json!(other.id), json!(2)),
        "{view}"
    );
    assert!(
        answers
            .iter()
            .any(|(_, a)| a.node.as_deref() == Some(other.id.as_str())),
        "the other node took over"
    );
    drop((owner, other));
    setup.finish().await;
}

/// SQLite is the embedded one-node store, but a second process on the same file takes part
/// the same way: one owner, the other forwards, one key on both answers once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_one_sqlite_file_share_one_owner() {
    let _heavy = support::heavy();
    let setup = Setup::sqlite();
    let a = setup.node("node-a", 2_000);
    let b = setup.node("node-b", 2_000);
    let http = http();
    let event_id = create_event(&http, &a, 1, 10).await;
    let (first, second) = tokio::join!(
        hold_until_done(&http, &a.base, &event_id, "twin", "twin-key", "A-1-1"),
        hold_until_done(&http, &b.base, &event_id, "twin", "twin-key", "A-1-1"),
    );
    assert_eq!(
        (first.status, second.status),
        (201, 201),
        "{first:?} {second:?}"
    );
    assert_eq!(first.body, second.body);
    assert_eq!(first.node, second.node, "one node decided both");
    let other = hold(&http, &b.base, &event_id, "other", "other", "A-1-1").await;
    assert_eq!(other.status, 409, "{other:?}");
    let view = owner_view(&http, &b, &event_id).await;
    assert_eq!(view["nodeId"].as_str(), first.node.as_deref(), "{view}");
    drop((a, b));
    setup.finish().await;
}
