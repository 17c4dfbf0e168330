//! Mail crash points (issue 39): the server process sends fans' mail through a real SMTP
//! server (aiosmtpd, started here, storing what it accepts) and is killed with SIGKILL at
//! each point of the mail sender (`boxoffice_workers::crash::MAIL_POINTS`): right after the
//! claim committed (`SENDING`, nothing sent yet) and right after the server accepted the mail
//! (before `SENT` is recorded). After a restart on the same database, once the claim's lease
//! has passed (the store's clock moved, not slept), the mail is `UNCERTAIN` — never sent again
//! by a worker — and the SMTP server holds at most one copy; an operator's resend of a mail
//! that never arrived delivers it once. Each point runs on PostgreSQL and SQLite.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use boxoffice_delivery::readback::SmtpServer;
use serde_json::{Value, json};
use support::{BIN, Paysim, first_line_url};

const SECRET: &str = "mail-crash-test-secret-0123456789";
/// How long a case may take to converge after the restart.
const CONVERGE_S: u64 = 60;

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(
        database_url: &str,
        paysim: &Paysim,
        smtp: &SmtpServer,
        ticket_key: &str,
        crash_at: Option<&str>,
    ) -> Self {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--database-url", database_url])
            .args(["--listen", "127.0.0.1:0", "--payments", "stripe"])
            .args(["--node-id", "mail-crash-node", "--lease-ttl-ms", "1000"])
            .args([
                "--stripe-api-base",
                &paysim.base,
                "--ticket-key",
                ticket_key,
            ])
            .args(["--waitroom-state", &format!("{ticket_key}.waitroom")])
            .args([
                "--smtp-url",
                smtp.url(),
                "--mail-from",
                "tickets@example.org",
            ])
            .env("BOXOFFICE_JWT_SECRET", SECRET)
            .env(
                "STRIPE_SECRET_KEY",
                boxoffice_payments::simulator::DEFAULT_SECRET_KEY,
            )
            .env(
                "STRIPE_WEBHOOK_SECRET",
                boxoffice_payments::simulator::DEFAULT_WEBHOOK_SECRET,
            )
            .env("RUST_LOG", "warn")
            .env_remove("BOXOFFICE_CRASH_AT")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(point) = crash_at {
            command.env("BOXOFFICE_CRASH_AT", point);
        }
        let mut child = command.spawn().unwrap();
        let base = first_line_url(&mut child, "listening on ");
        Self { child, base }
    }

    /// Waits (bounded) for the process to die at its crash point.
    fn wait_for_crash(&mut self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(CONVERGE_S) {
            if let Some(status) = self.child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(status.signal(), Some(9), "died by SIGKILL: {status:?}");
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server never reached its crash point");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn token(account: &str, admin: bool, email: Option<&str>) -> String {
    let mut args = vec!["token", "--account", account, "--ttl", "10m"];
    if admin {
        args.push("--admin");
    }
    if let Some(email) = email {
        args.extend(["--email", email]);
    }
    let out = Command::new(BIN)
        .args(&args)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "boxoffice token");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn post(http: &reqwest::Client, url: &str, token: &str, key: &str, body: &Value) -> Value {
    http.post(url)
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn get(http: &reqwest::Client, url: &str, token: &str) -> Value {
    http.get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Moves the store's clock past the mail sender's lease, as a test store does.
async fn past_the_lease(database_url: &str) {
    let by = Duration::from_secs_f64(boxoffice_workers::mail::MAIL_LEASE_S + 10.0);
    if database_url.starts_with("postgres") {
        let store = boxoffice_store_postgres::PgStore::connect(database_url)
            .await
            .unwrap();
        store.advance_clock(by).await.unwrap();
    } else {
        let store = boxoffice_store_sqlite::SqliteStore::connect(database_url)
            .await
            .unwrap();
        store.advance_clock(by).await.unwrap();
    }
}

/// The admin's mail list, polled (bounded) until `done` holds.
async fn mails_until(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let mails = get(http, &format!("{base}/v1/admin/mail"), admin).await["mails"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if done(&mails) {
            return mails;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{what}: never converged: {mails:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One purchase whose server dies at the mail point `point`.
async fn mail_crash_case(database_url: &str, point: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let paysim = Paysim::start();
    let smtp = SmtpServer::start("accept");
    let key_path = std::env::temp_dir().join(format!(
        "boxoffice-mail-crash-key-{}.pem",
        uuid::Uuid::now_v7().simple()
    ));
    let key_path = key_path.to_str().unwrap().to_owned();
    let admin = token("ops", true, None);
    let fan = token("ann", false, Some("ann@example.org"));

    let mut server = Server::start(database_url, &paysim, &smtp, &key_path, Some(point));
    let event = post(
        &http,
        &format!("{}/v1/admin/events", server.base),
        &admin,
        "ev",
        &json!({"name": "Mail Night", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                "sections": [{"name": "A", "rows": 2, "seatsPerRow": 5, "priceMinor": 100}]}),
    )
    .await;
    let event_id = event["eventId"].as_str().expect("the event").to_owned();
    // The token's address is recorded off the request path: wait until it is there.
    let started = Instant::now();
    while get(&http, &format!("{}/v1/me", server.base), &fan).await["email"] != "ann@example.org" {
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: no email"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hold = post(
        &http,
        &format!("{}/v1/events/{event_id}/holds", server.base),
        &fan,
        "hold",
        &json!({"seatIds": ["A-1-1"]}),
    )
    .await;
    let hold_id = hold["holdId"].as_str().expect("the hold").to_owned();
    let paid = post(
        &http,
        &format!("{}/v1/holds/{hold_id}/checkout", server.base),
        &fan,
        "pay",
        &json!({"paymentMethodToken": "pm_card_visa"}),
    )
    .await;
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{point}: {paid}");
    // The relay issues the tickets and fans the mail out; the sender claims it and dies.
    server.wait_for_crash();
    let sent_before_restart = smtp.received().len();
    match point {
        "mail_claimed" => assert_eq!(sent_before_restart, 0, "{point}: nothing sent yet"),
        "mail_accepted" => assert_eq!(sent_before_restart, 1, "{point}: the server has it"),
        other => panic!("not a mail point: {other}"),
    }

    // Restarted: the mail is SENDING under a lease of the dead process; once the lease has
    // passed it is UNCERTAIN, and no worker sends it again.
    let server = Server::start(database_url, &paysim, &smtp, &key_path, None);
    past_the_lease(database_url).await;
    let mails = mails_until(&http, &server.base, &admin, point, |mails| {
        mails.len() == 1 && mails[0]["status"] == "UNCERTAIN"
    })
    .await;
    let mail_id = mails[0]["mailId"].clone();
    assert_eq!(mails[0]["to"], "ann@example.org");
    // Rounds go by (the sender runs every second); the SMTP server still has what it had.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        smtp.received().len(),
        sent_before_restart,
        "{point}: never sent twice by a worker"
    );

    if sent_before_restart == 0 {
        // The fan says it never came: the operator resends it, and it arrives once.
        let resent = http
            .post(format!("{}/v1/admin/mail/{mail_id}/resend", server.base))
            .bearer_auth(&admin)
            .send()
            .await
            .unwrap();
        assert_eq!(resent.status().as_u16(), 200, "{point}: resend");
        mails_until(&http, &server.base, &admin, point, |mails| {
            mails[0]["status"] == "SENT"
        })
        .await;
        assert_eq!(smtp.received().len(), 1, "{point}: the resend arrived once");
    }
    drop(server);
    let _ = std::fs::remove_file(&key_path);
    let _ = std::fs::remove_dir_all(format!("{key_path}.waitroom"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_mail_is_sent_at_most_once_across_crashes() {
    for point in boxoffice_workers::crash::MAIL_POINTS {
        let path = std::env::temp_dir().join(format!(
            "boxoffice-mail-crash-{}.db",
            uuid::Uuid::now_v7().simple()
        ));
        mail_crash_case(&format!("sqlite://{}", path.display()), point).await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_mail_is_sent_at_most_once_across_crashes() {
    let base = std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let mut created = Vec::new();
    for point in boxoffice_workers::crash::MAIL_POINTS {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        mail_crash_case(&format!("{base}/{db}"), point).await;
        created.push(db);
    }
    let admin = sqlx::PgPool::connect(&format!("{base}/postgres"))
        .await
        .unwrap();
    for db in created {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {db} WITH (FORCE)"
        )))
        .execute(&admin)
        .await
        .unwrap();
    }
}
