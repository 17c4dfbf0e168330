//! The `boxoffice` binary end to end: `token`, `serve` (killed with SIGKILL and restarted on
//! the same database), and `check` passing on a sound database and failing on a planted
//! double hold, on both backends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

const SECRET: &str = "cli-test-secret-0123456789";
const BIN: &str = env!("CARGO_BIN_EXE_boxoffice");

fn boxoffice(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn token(account: &str, admin: bool) -> String {
    let mut args = vec!["token", "--account", account, "--ttl", "10m"];
    if admin {
        args.push("--admin");
    }
    let out = boxoffice(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A running `boxoffice serve` on port 0.
struct Server {
    child: Child,
    base: String,
    /// A waiting-room directory this server owns, removed when it is killed.
    own_rooms: Option<std::path::PathBuf>,
}

impl Server {
    fn start(database_url: &str) -> Self {
        let rooms = std::env::temp_dir().join(format!(
            "boxoffice-cli-rooms-{}",
            uuid::Uuid::now_v7().simple()
        ));
        let mut server = Self::start_with_rooms(database_url, &rooms);
        server.own_rooms = Some(rooms);
        server
    }

    /// `serve` with its waiting-room journal in `rooms`.
    fn start_with_rooms(database_url: &str, rooms: &std::path::Path) -> Self {
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--database-url",
                database_url,
                "--listen",
                "127.0.0.1:0",
            ])
            // Keep the ticket key out of the source tree (it would default to ./data): beside
            // the rooms, so it goes with them and a restart on the same rooms keeps it.
            .arg("--ticket-key")
            .arg(rooms.with_extension("key.pem"))
            .arg("--waitroom-state")
            .arg(rooms)
            .env("BOXOFFICE_JWT_SECRET", SECRET)
            .env("RUST_LOG", "warn")
            .stderr(Stdio::null());
        let (child, base) = listening(command);
        Self {
            child,
            base,
            own_rooms: None,
        }
    }

    fn kill(mut self) {
        // SIGKILL: no shutdown hook runs.
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(rooms) = &self.own_rooms {
            let _ = std::fs::remove_dir_all(rooms);
            let _ = std::fs::remove_file(rooms.with_extension("key.pem"));
        }
    }
}

/// Spawns a `serve` command and reads its address from its first line.
fn listening(mut command: Command) -> (Child, String) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, base)
}

/// `boxoffice serve` on port 0 with everything it keeps (SQLite database, ticket key,
/// waiting rooms) in `dir`.
fn serve_in(dir: &std::path::Path) -> Command {
    serve_in_with_key(dir, &dir.join("ticket-key.pem"))
}

/// [`serve_in`] with the ticket key at `key`.
fn serve_in_with_key(dir: &std::path::Path, key: &std::path::Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(format!("sqlite://{}", dir.join("b.db").display()))
        .arg("--ticket-key")
        .arg(key)
        .arg("--waitroom-state")
        .arg(dir.join("rooms"));
    command
}

/// [`serve_in`] with the public development secret (`POST /v1/dev/token` works) and `args`.
fn dev_serve_in(dir: &std::path::Path, args: &[&str]) -> Command {
    let mut command = serve_in(dir);
    command
        .arg("--dev-auth")
        .args(args)
        .env_remove("BOXOFFICE_JWT_SECRET")
        .env("RUST_LOG", "warn");
    command
}

/// A new, empty folder under the system's temporary folder.
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "boxoffice-cli-{name}-{}",
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn post(
    http: &reqwest::Client,
    url: String,
    token: &str,
    key: &str,
    body: Value,
) -> (u16, Value) {
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

async fn story(database_url: &str, plant: impl AsyncFnOnce(&str)) {
    let http = reqwest::Client::new();
    let admin = token("ops", true);
    let fan = token("ann", false);
    let server = Server::start(database_url);
    let health = http
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let ready = http
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let openapi: Value = http
        .get(format!("{}/openapi.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(openapi["paths"]["/v1/events/{eventId}/holds"]["post"].is_object());

    let (status, event) = post(
        &http,
        format!("{}/v1/admin/events", server.base),
        &admin,
        "ev",
        json!({"name": "CLI Night", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
               "sections": [{"name": "A", "rows": 2, "seatsPerRow": 5, "priceMinor": 100}]}),
    )
    .await;
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    let holds_url = format!("{}/v1/events/{event_id}/holds", server.base);
    let (status, hold) = post(
        &http,
        holds_url.clone(),
        &fan,
        "h1",
        json!({"seatIds": ["A-1-1"]}),
    )
    .await;
    assert_eq!(status, 201, "{hold}");
    server.kill();

    // After SIGKILL right after the hold committed, a restart on the same database knows it.
    let server = Server::start(database_url);
    let holds_url = holds_url.replace(holds_url.split("/v1").next().unwrap(), &server.base);
    let (status, replay) = post(
        &http,
        holds_url.clone(),
        &fan,
        "h1",
        json!({"seatIds": ["A-1-1"]}),
    )
    .await;
    assert_eq!(
        (status, &replay),
        (201, &hold),
        "the committed hold survived the kill"
    );
    let (status, taken) = post(
        &http,
        holds_url,
        &token("bob", false),
        "h1",
        json!({"seatIds": ["A-1-1"]}),
    )
    .await;
    assert_eq!(
        (status, taken["code"].as_str()),
        (409, Some("SEATS_UNAVAILABLE"))
    );
    server.kill();

    let clean = boxoffice(&["check", "--database-url", database_url]);
    let report = String::from_utf8_lossy(&clean.stdout);
    assert!(
        clean.status.success(),
        "check fails on a sound database: {report}"
    );
    assert!(report.contains("all invariants hold"), "{report}");

    plant(&event_id).await;
    let dirty = boxoffice(&["check", "--database-url", database_url]);
    let report = String::from_utf8_lossy(&dirty.stdout);
    assert_eq!(
        dirty.status.code(),
        Some(1),
        "check must fail on a planted double hold: {report}"
    );
    assert!(
        report.contains("VIOLATION") && report.contains("planted"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_serve_kill_restart_and_check() {
    let path = std::env::temp_dir().join(format!(
        "boxoffice-cli-{}.db",
        uuid::Uuid::now_v7().simple()
    ));
    let url = format!("sqlite://{}", path.display());
    story(&url, async |event_id| {
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at)
             VALUES (?1, 'planted', 'mallory', 'HELD', 1, '[{\"seatId\":\"A-1-1\",\"priceMinor\":100}]', 100, 'EUR',
                     'x', 0, 4000000000000, 0)",
        )
        .bind(event_id)
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    })
    .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serve_kill_restart_and_check() {
    let base = std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
    let url = format!("{base}/{db}");
    story(&url, async |event_id| {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO hold (event_id, hold_id, account_id, status, quantity, seats, total_minor, currency,
                               idempotency_key, created_at, expires_at, updated_at)
             VALUES ($1, 'planted', 'mallory', 'HELD', 1, '[{\"seatId\":\"A-1-1\",\"priceMinor\":100}]', 100, 'EUR',
                     'x', now(), now() + interval '1 hour', now())",
        )
        .bind(event_id)
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    })
    .await;
    // Drop the database this test created (serve created it).
    let admin = sqlx::PgPool::connect(&format!("{base}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
    )))
    .execute(&admin)
    .await
    .unwrap();
}

#[test]
fn token_command_signs_with_the_configured_secret() {
    let token = token("ann.smith", true);
    let verifier = boxoffice_server::auth::TokenVerifier::hs256(SECRET).unwrap();
    let account = verifier.verify(&token).unwrap();
    assert_eq!(account.account_id.as_str(), "ann.smith");
    assert!(account.admin);
    let other = boxoffice_server::auth::TokenVerifier::hs256("some-other-secret-123456").unwrap();
    assert!(
        other.verify(&token).is_err(),
        "a token only verifies with its own secret"
    );
    let bad = boxoffice(&["token", "--account", "not valid"]);
    assert!(!bad.status.success());
}

#[test]
fn serve_refuses_to_start_without_a_secret() {
    let out = Command::new(BIN)
        .args(["serve", "--database-url", "sqlite://unused.db"])
        .env_remove("BOXOFFICE_JWT_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("BOXOFFICE_JWT_SECRET"));
}

/// The waiting room of a single node survives SIGKILL: places, the serving counter and a
/// live admission come back from the journal, and old queue tickets and admission tokens
/// still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_room_survives_sigkill() {
    let work = std::env::temp_dir().join(format!(
        "boxoffice-cli-wr-{}",
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&work).unwrap();
    let url = format!("sqlite://{}", work.join("store.db").display());
    let rooms = work.join("rooms");
    let http = reqwest::Client::new();
    let admin = token("ops", true);
    let server = Server::start_with_rooms(&url, &rooms);
    let (status, event) = post(
        &http,
        format!("{}/v1/admin/events", server.base),
        &admin,
        "event-1",
        json!({"name": "Door", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
               "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 1},
               "sections": [{"name": "A", "rows": 2, "seatsPerRow": 5, "priceMinor": 100}]}),
    )
    .await;
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    let mut places = Vec::new();
    for account in ["ann", "bob", "cat"] {
        let fan = token(account, false);
        let (status, place) = post(
            &http,
            format!("{}/v1/events/{event_id}/queue", server.base),
            &fan,
            "",
            json!({}),
        )
        .await;
        assert_eq!(status, 201, "{place}");
        places.push((
            fan,
            place["queueTicket"].as_str().unwrap().to_owned(),
            place["position"].clone(),
        ));
    }
    let poll = async |base: &str, fan: &str, ticket: &str| -> Value {
        http.get(format!("{base}/v1/events/{event_id}/queue/status"))
            .bearer_auth(fan)
            .header("queue-ticket", ticket)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    };
    let mut admitted = Value::Null;
    for _ in 0..100 {
        admitted = poll(&server.base, &places[0].0, &places[0].1).await;
        if admitted["status"] == "ADMITTED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(admitted["status"], "ADMITTED", "{admitted}");
    server.kill();

    let server = Server::start_with_rooms(&url, &rooms);
    let again = poll(&server.base, &places[0].0, &places[0].1).await;
    assert_eq!(again["status"], "ADMITTED", "{again}");
    assert_eq!(
        again["admissionToken"], admitted["admissionToken"],
        "the same session"
    );
    for (fan, ticket, position) in &places[1..] {
        let status = poll(&server.base, fan, ticket).await;
        assert_eq!(
            status["status"], "WAITING",
            "the cap of 1 is still taken: {status}"
        );
        assert_eq!(&status["position"], position);
    }
    let hold = http
        .post(format!("{}/v1/events/{event_id}/holds", server.base))
        .bearer_auth(&places[0].0)
        .header("idempotency-key", "h1")
        .header(
            "admission-token",
            admitted["admissionToken"].as_str().unwrap(),
        )
        .json(&json!({"seatIds": ["A-1-1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(hold.status(), 201);
    server.kill();
    let _ = std::fs::remove_dir_all(&work);
}

/// Secrets and tokens never reach the logs (issue 18, item 5): a sale from event to check-in
/// on a server logging at `debug`, then its whole log is searched for the JWT secret, the
/// tokens sent, the payment provider's keys and the ticket codes issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_or_token_reaches_the_logs() {
    use boxoffice_payments::simulator::{DEFAULT_SECRET_KEY, DEFAULT_WEBHOOK_SECRET};
    let dir = std::env::temp_dir().join(format!(
        "boxoffice-cli-logs-{}",
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let log_path = dir.join("serve.log");
    let mut command = serve_in(&dir);
    command
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .env("RUST_LOG", "debug")
        .stderr(std::fs::File::create(&log_path).unwrap());
    let (mut child, base) = listening(command);

    let http = reqwest::Client::new();
    let admin = token("ops", true);
    let fan = token("ann", false);
    let (status, event) = post(
        &http,
        format!("{base}/v1/admin/events"),
        &admin,
        "ev",
        json!({"name": "Log Night", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
               "sections": [{"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 100}]}),
    )
    .await;
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap();
    let (status, hold) = post(
        &http,
        format!("{base}/v1/events/{event_id}/holds"),
        &fan,
        "h1",
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    assert_eq!(status, 201, "{hold}");
    let hold_id = hold["holdId"].as_str().unwrap();
    let (status, checkout) = post(
        &http,
        format!("{base}/v1/holds/{hold_id}/checkout"),
        &fan,
        "c1",
        json!({"paymentMethodToken": "pm_card_visa"}),
    )
    .await;
    assert!((200..=202).contains(&status), "{checkout}");
    let order_id = checkout["orderId"].as_str().unwrap().to_owned();
    let mut codes = Vec::new();
    for _ in 0..100 {
        let order: Value = http
            .get(format!("{base}/v1/orders/{order_id}"))
            .bearer_auth(&fan)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let tickets = order["tickets"].as_array().cloned().unwrap_or_default();
        if order["orderStatus"] == "CONFIRMED" && tickets.len() == 2 {
            for ticket in tickets {
                let id = ticket["ticketId"].as_str().unwrap();
                let qr = http
                    .get(format!("{base}/v1/tickets/{id}/qr.svg"))
                    .bearer_auth(&fan)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(qr.status(), 200);
                codes.push(ticket["code"].as_str().unwrap().to_owned());
            }
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(codes.len(), 2, "the order was ticketed");
    let checked_in = http
        .post(format!("{base}/v1/admin/checkin"))
        .bearer_auth(&admin)
        .json(&json!({"code": codes[0]}))
        .send()
        .await
        .unwrap();
    assert_eq!(checked_in.status(), 200);
    // A token that does not verify is refused, and not written down either.
    let forged = format!("{}x", &fan[..fan.len() - 1]);
    let refused = http
        .get(format!("{base}/v1/orders"))
        .bearer_auth(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    child.kill().unwrap();
    child.wait().unwrap();

    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.lines().count() > 20,
        "the server logged the sale at debug: {log}"
    );
    let mut secrets = vec![
        ("the JWT secret", SECRET.to_owned()),
        ("the admin token", admin.clone()),
        ("the fan token", fan.clone()),
        ("a forged token", forged),
        ("the provider's secret key", DEFAULT_SECRET_KEY.to_owned()),
        ("the webhook secret", DEFAULT_WEBHOOK_SECRET.to_owned()),
    ];
    // A token's signature alone is enough to find it.
    for (what, jwt) in [
        ("the admin token's signature", &admin),
        ("the fan token's signature", &fan),
    ] {
        secrets.push((what, jwt.rsplit('.').next().unwrap().to_owned()));
    }
    for code in &codes {
        secrets.push(("a ticket code", code.clone()));
    }
    for (what, secret) in secrets {
        assert!(
            !log.contains(&secret),
            "{what} is in the log:\n{}",
            log.lines()
                .filter(|l| l.contains(&secret))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `serve --limit` sets an abuse limit by name: sign-ins per client address here (the third
/// dev token within the burst is refused 429 naming the limit); a limit it does not know
/// stops the server before it listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_limits_by_name() {
    let dir = scratch_dir("limits");
    let serve = |limit: &str| dev_serve_in(&dir, &["--limit", limit]);
    let refused = serve("signins=1/s:2").output().unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no limit named"), "{stderr}");

    let mut command = serve("signins-per-address=1/s:2");
    command.stderr(Stdio::null());
    let (mut child, base) = listening(command);
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    let mut last = Value::Null;
    for account in ["ann", "bob", "cid"] {
        let answer = http
            .post(format!("{base}/v1/dev/token"))
            .json(&json!({"accountId": account}))
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
        if answer.status() == 429 {
            assert!(answer.headers().contains_key("retry-after"));
        }
        last = answer.json().await.unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(statuses, [201, 201, 429]);
    assert_eq!(last["limit"], "signins-per-address");
}

/// A key rollover, end to end: `serve` with a new account-token secret and ticket key, the
/// old ones given as previous, accepts the old tokens and queue tickets and lists both ticket
/// keys; once the previous ones are removed, the old tokens and tickets are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_roll_over_old_tokens_verify_during_the_overlap_and_not_after() {
    const OLD: &str = "the-old-jwt-secret-0123456789";
    const NEW: &str = "the-new-jwt-secret-0123456789";
    let dir = scratch_dir("rollover");
    let (old_key, new_key) = (dir.join("old-key.pem"), dir.join("new-key.pem"));
    let serve =
        |secret: &str, key: &std::path::Path, previous: Option<(&str, &std::path::Path)>| {
            let mut command = serve_in_with_key(&dir, key);
            command
                .env("BOXOFFICE_JWT_SECRET", secret)
                .env("RUST_LOG", "warn")
                .stderr(Stdio::null());
            if let Some((secret, key)) = previous {
                command
                    .env("BOXOFFICE_JWT_PREVIOUS_SECRETS", secret)
                    .arg("--ticket-previous-keys")
                    .arg(key);
            }
            listening(command)
        };
    let mint = |secret: &str, account: &str, admin: bool| {
        boxoffice_server::auth::mint_token(
            secret,
            &boxoffice_domain::ids::AccountId::parse(account).unwrap(),
            admin,
            600,
        )
        .unwrap()
    };
    let http = reqwest::Client::new();
    let authorized = async |base: &str, token: &str| {
        let answer = http
            .get(format!(
                "{base}/v1/holds/0193a4f2-8d00-7000-8000-000000000001"
            ))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        // 404: the token was accepted (and the hold is nobody's); 401: refused.
        answer.status().as_u16()
    };
    let queue_status = async |base: &str, event_id: &str, token: &str, ticket: &str| {
        http.get(format!("{base}/v1/events/{event_id}/queue/status"))
            .bearer_auth(token)
            .header("queue-ticket", ticket)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let ticket_kids = async |base: &str| -> Vec<(String, bool)> {
        let body: Value = http
            .get(format!("{base}/v1/tickets/public-keys"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                let pem = k["pem"].as_str().unwrap();
                let verifier = boxoffice_tickets::TicketVerifier::from_pem(pem).unwrap();
                assert_eq!(verifier.public_keys()[0].0, k["kid"], "kid is the key's");
                (k["kid"].as_str().unwrap().to_owned(), k["signing"] == true)
            })
            .collect()
    };

    // Before: the old secret and key.
    let (mut child, base) = serve(OLD, &old_key, None);
    let (status, event) = post(
        &http,
        format!("{base}/v1/admin/events"),
        &mint(OLD, "ops", true),
        "rollover-event",
        json!({"name": "Rollover", "startsAt": "2030-01-01T20:00:00Z", "currency": "EUR",
               "sections": [{"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 1000}],
               "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 1,
                               "admissionTtlSeconds": 600}}),
    )
    .await;
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    let old_fan = mint(OLD, "ann", false);
    let (status, joined) = post(
        &http,
        format!("{base}/v1/events/{event_id}/queue"),
        &old_fan,
        "rollover-join",
        json!({}),
    )
    .await;
    assert_eq!(status, 201, "{joined}");
    let old_ticket = joined["queueTicket"].as_str().unwrap().to_owned();
    let before = ticket_kids(&base).await;
    assert_eq!(before.len(), 1);
    child.kill().unwrap();
    child.wait().unwrap();

    // During: the new secret and key sign, the old ones still verify.
    let (mut child, base) = serve(NEW, &new_key, Some((OLD, &old_key)));
    let new_fan = mint(NEW, "ann", false);
    assert_eq!(
        authorized(&base, &old_fan).await,
        404,
        "an old token, during"
    );
    assert_eq!(authorized(&base, &new_fan).await, 404, "a new token");
    assert_eq!(
        queue_status(&base, &event_id, &new_fan, &old_ticket).await,
        200,
        "a queue ticket of the old key, during"
    );
    let during = ticket_kids(&base).await;
    assert_eq!(during.len(), 2, "{during:?}");
    assert!(during[0].1 && !during[1].1, "the new key signs: {during:?}");
    assert_eq!(during[1].0, before[0].0, "the old key still verifies");
    assert_ne!(during[0].0, before[0].0);
    child.kill().unwrap();
    child.wait().unwrap();

    // After: the previous secret and key are gone, and so is what they signed.
    let (mut child, base) = serve(NEW, &new_key, None);
    assert_eq!(
        authorized(&base, &old_fan).await,
        401,
        "an old token, after"
    );
    assert_eq!(authorized(&base, &new_fan).await, 404);
    assert_eq!(
        queue_status(&base, &event_id, &new_fan, &old_ticket).await,
        400,
        "a queue ticket of the old key, after"
    );
    let after = ticket_kids(&base).await;
    assert_eq!(after, vec![(during[0].0.clone(), true)]);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Behind a balancer (`--trusted-proxy`), per-address limits count the client that
/// `X-Forwarded-For` names; without it, the header is ignored and the peer is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_address_limits_believe_x_forwarded_for_from_trusted_proxies_only() {
    let dir = scratch_dir("forwarded");
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for trusted in [true, false] {
        let mut command = dev_serve_in(&dir, &["--limit", "signins-per-address=0.01/s:1"]);
        command.stderr(Stdio::null());
        if trusted {
            command.args(["--trusted-proxy", "127.0.0.1,::1"]);
        }
        let (mut child, base) = listening(command);
        let mut answered = Vec::new();
        for client in ["203.0.113.1", "203.0.113.2", "203.0.113.1"] {
            let answer = http
                .post(format!("{base}/v1/dev/token"))
                .header("x-forwarded-for", client)
                .json(&json!({"accountId": "ann"}))
                .send()
                .await
                .unwrap();
            answered.push(answer.status().as_u16());
        }
        child.kill().unwrap();
        child.wait().unwrap();
        statuses.push(answered);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        statuses[0],
        [201, 201, 429],
        "trusted: one bucket per forwarded client"
    );
    assert_eq!(
        statuses[1],
        [201, 429, 429],
        "untrusted: the header is ignored, the peer is counted"
    );
}

/// A venue chart's body is far over a fan's 64 KiB: the served binary (a node of a cluster,
/// whose forwarding reads writers' bodies) takes the 50,000-seat demo stadium, about 3 MB,
/// under the chart routes' own limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_a_whole_stadium_chart() {
    let dir = scratch_dir("chart");
    let mut command = dev_serve_in(&dir, &[]);
    command.stderr(Stdio::null());
    let (mut child, base) = listening(command);
    let http = reqwest::Client::new();
    let admin: Value = http
        .post(format!("{base}/v1/dev/token"))
        .json(&json!({"accountId": "ops", "admin": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let stadium = serde_json::to_vec(&boxoffice_domain::venue::demo_stadium()).unwrap();
    assert!(stadium.len() > 1_000_000, "{} bytes", stadium.len());
    let answer = http
        .post(format!("{base}/v1/admin/venue-charts"))
        .bearer_auth(admin["token"].as_str().unwrap())
        .header("Idempotency-Key", "stadium")
        .header("Content-Type", "application/json")
        .body(stadium)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["seatCount"], 50_000, "{body}");
}
