//! Crash points: the server process is killed with SIGKILL right after each named step of a
//! purchase (and of an exchange with a price increase, of a fan's refund, and of an event's
//! cancellation with its refunds' job), is restarted on the same database with
//! the same payment simulator (a separate `boxoffice paysim` process), and must converge
//! without an operator: the order confirmed, captured and ticketed exactly once, and
//! `boxoffice check` clean (a refund paid back exactly once). Each point runs on PostgreSQL and SQLite, and the purchase points
//! once more on PostgreSQL with a second node beside the one that dies (it forwards the
//! checkout to the owner, then takes the event over).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{BIN, Paysim, first_line_url};

const SECRET: &str = "crash-test-secret-0123456789";
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
        ticket_key: &str,
        crash_at: Option<&str>,
    ) -> Self {
        Self::start_node(database_url, paysim, ticket_key, crash_at, "crash-node")
    }

    /// A server named `node_id` (a restarted node keeps its id, so it takes the event's
    /// lease back at once; a new id would wait for the dead process's lease to lapse).
    fn start_node(
        database_url: &str,
        paysim: &Paysim,
        ticket_key: &str,
        crash_at: Option<&str>,
        node_id: &str,
    ) -> Self {
        Self::start_with(database_url, paysim, ticket_key, crash_at, node_id, &[])
    }

    /// A server named `node_id` with `extra` arguments.
    fn start_with(
        database_url: &str,
        paysim: &Paysim,
        ticket_key: &str,
        crash_at: Option<&str>,
        node_id: &str,
        extra: &[&str],
    ) -> Self {
        let mut command = Command::new(BIN);
        command
            .args([
                "serve",
                "--database-url",
                database_url,
                "--listen",
                "127.0.0.1:0",
                "--payments",
                "stripe",
                "--node-id",
                node_id,
                "--lease-ttl-ms",
                "1000",
            ])
            .args([
                "--stripe-api-base",
                &paysim.base,
                "--ticket-key",
                ticket_key,
                "--waitroom-state",
                &format!("{ticket_key}.{node_id}.waitroom"),
            ])
            .args(extra)
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
                assert_eq!(
                    status.signal(),
                    Some(9),
                    "the server must die by SIGKILL at its crash point: {status:?}"
                );
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

fn token(account: &str, admin: bool) -> String {
    let mut args = vec!["token", "--account", account, "--ttl", "10m"];
    if admin {
        args.push("--admin");
    }
    let out = Command::new(BIN)
        .args(&args)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Sends a POST; a connection that dies with the server is `None`.
async fn post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    key: &str,
    body: &Value,
) -> Option<(u16, Value)> {
    let response = http
        .post(url)
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.unwrap_or(Value::Null)))
}

/// One purchase whose server dies at `point`. With `two_nodes`, a second node runs beside it
/// the whole time and the checkout goes through it: it forwards it to the owner (the server
/// that dies), gets no answer, takes the event over once the dead owner's lease lapses, and
/// serves the checkout itself; the restarted server forwards to it from then on.
async fn crash_case(database_url: &str, point: &str, two_nodes: bool) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let paysim = Paysim::start();
    let key_path = std::env::temp_dir().join(format!(
        "boxoffice-crash-key-{}.pem",
        uuid::Uuid::now_v7().simple()
    ));
    let key_path = key_path.to_str().unwrap().to_owned();
    let (admin, fan) = (token("ops", true), token("ann", false));

    // The event is created by a server without a crash point.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let (status, event) = post(
        &http,
        &format!("{}/v1/admin/events", server.base),
        &admin,
        "ev",
        &json!({"name": "Crash Night", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR", "paymentGraceSeconds": 600,
                "sections": [{"name": "A", "rows": 2, "seatsPerRow": 5, "priceMinor": 100}]}),
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    drop(server);

    // The purchase, against a server that dies at `point`.
    let peer =
        two_nodes.then(|| Server::start_node(database_url, &paysim, &key_path, None, "crash-peer"));
    let mut server = Server::start(database_url, &paysim, &key_path, Some(point));
    // Where the checkout goes: the peer (which forwards to the owner), or the owner itself.
    let pay_base = |server: &Server| {
        peer.as_ref()
            .map_or_else(|| server.base.clone(), |p| p.base.clone())
    };
    let hold_body = json!({"seatIds": ["A-1-1", "A-1-2"]});
    let pay_body = json!({"paymentMethodToken": "pm_card_visa"});
    let holds_url = |base: &str| format!("{base}/v1/events/{event_id}/holds");
    let mut hold_id = None;
    if let Some((201, hold)) = post(&http, &holds_url(&server.base), &fan, "hold", &hold_body).await
    {
        hold_id = hold["holdId"].as_str().map(str::to_owned);
    }
    if let Some(hold_id) = &hold_id {
        let _ = post(
            &http,
            &format!("{}/v1/holds/{hold_id}/checkout", pay_base(&server)),
            &fan,
            "pay",
            &pay_body,
        )
        .await;
    }
    server.wait_for_crash();

    // Restart without the crash point; the client retries with the same keys.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let (status, hold) = post(&http, &holds_url(&server.base), &fan, "hold", &hold_body)
        .await
        .unwrap();
    assert_eq!(
        status, 201,
        "{point}: the hold is replayed after the crash: {hold}"
    );
    let hold_id = hold["holdId"].as_str().unwrap().to_owned();
    let (status, paid) = post(
        &http,
        &format!("{}/v1/holds/{hold_id}/checkout", pay_base(&server)),
        &fan,
        "pay",
        &pay_body,
    )
    .await
    .unwrap();
    assert_eq!(
        status, 201,
        "{point}: checkout answers (fresh or replayed): {paid}"
    );
    let order_id = paid["orderId"].as_str().unwrap().to_owned();

    let started = Instant::now();
    let order = loop {
        let order: Value = http
            .get(format!("{}/v1/orders/{order_id}", server.base))
            .bearer_auth(&fan)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let done = order["orderStatus"] == "CONFIRMED"
            && order["paymentStatus"] == "CAPTURED"
            && order["tickets"].as_array().is_some_and(|t| t.len() == 2);
        if done {
            break order;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: never converged: {order}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut seats: Vec<&str> = order["tickets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seatId"].as_str().unwrap())
        .collect();
    seats.sort_unstable();
    assert_eq!(seats, ["A-1-1", "A-1-2"], "{point}: one ticket per seat");
    let orders: Value = http
        .get(format!("{}/v1/orders", server.base))
        .bearer_auth(&fan)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        orders["orders"].as_array().unwrap().len(),
        1,
        "{point}: exactly one order"
    );
    drop(server);
    drop(peer);

    let check = Command::new(BIN)
        .args(["check", "--database-url", database_url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{point}: check fails after convergence: {report}"
    );
    let _ = std::fs::remove_file(&key_path);
    for node in ["crash-node", "crash-peer"] {
        let _ = std::fs::remove_dir_all(format!("{key_path}.{node}.waitroom"));
    }
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

/// An exchange with a price increase (A-1-1 at 100 for B-1-1 at 300) whose server dies at
/// `point`: after a restart and the client's retries with the same keys, the exchange ends
/// either completed (old ticket void, new seat sold and ticketed) or not (old ticket valid,
/// new seat free), never both and never neither, and `boxoffice check` is clean.
async fn exchange_crash_case(database_url: &str, point: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let paysim = Paysim::start();
    let key_path = std::env::temp_dir().join(format!(
        "boxoffice-crash-key-{}.pem",
        uuid::Uuid::now_v7().simple()
    ));
    let key_path = key_path.to_str().unwrap().to_owned();
    let (admin, fan) = (token("ops", true), token("ann", false));

    // The event and the first purchase, on a server without a crash point.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let base = server.base.clone();
    let (_, order_id, old_ticket) = bought_and_captured(
        &http,
        &base,
        (&admin, &fan),
        &json!({"name": "Crash Trip", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR", "paymentGraceSeconds": 600,
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 5, "priceMinor": 100},
                             {"name": "B", "rows": 1, "seatsPerRow": 5, "priceMinor": 300}]}),
    )
    .await;
    drop(server);

    // The exchange and its payment, against a server that dies at `point`.
    let exchange_body = json!({"fromSeatIds": ["A-1-1"], "toSeatIds": ["B-1-1"]});
    let pay_body = json!({"paymentMethodToken": "pm_card_visa"});
    let mut server = Server::start(database_url, &paysim, &key_path, Some(point));
    let exchanges_url = |base: &str| format!("{base}/v1/orders/{order_id}/exchanges");
    if let Some((201, x)) = post(
        &http,
        &exchanges_url(&server.base),
        &fan,
        "x",
        &exchange_body,
    )
    .await
        && let Some(exchange_id) = x["exchangeId"].as_str()
    {
        let _ = post(
            &http,
            &format!("{}/v1/exchanges/{exchange_id}/checkout", server.base),
            &fan,
            "xpay",
            &pay_body,
        )
        .await;
    }
    server.wait_for_crash();

    // Restart; the client retries both steps with the same keys.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let base = server.base.clone();
    let (status, x) = post(&http, &exchanges_url(&base), &fan, "x", &exchange_body)
        .await
        .unwrap();
    assert_eq!(
        status, 201,
        "{point}: the exchange answers after the crash: {x}"
    );
    let exchange_id = x["exchangeId"].as_str().unwrap().to_owned();
    let (status, paid) = post(
        &http,
        &format!("{base}/v1/exchanges/{exchange_id}/checkout"),
        &fan,
        "xpay",
        &pay_body,
    )
    .await
    .unwrap();
    assert_eq!(
        status, 201,
        "{point}: the exchange's checkout answers: {paid}"
    );

    let started = Instant::now();
    let exchange = loop {
        let exchange = get(&http, &format!("{base}/v1/exchanges/{exchange_id}"), &fan).await;
        if exchange["status"] != "PAYMENT_REQUIRED" {
            break exchange;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: the exchange never ended: {exchange}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let old_id = old_ticket["ticketId"].as_str().unwrap();
    let old = get(&http, &format!("{base}/v1/tickets/{old_id}"), &fan).await;
    assert_eq!(
        exchange["status"], "COMPLETED",
        "{point}: a paid exchange completes: {exchange}"
    );
    assert_eq!(old["status"], "VOIDED", "{point}: the old ticket is void");
    let new_order_id = exchange["newOrderId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    loop {
        let order = get(&http, &format!("{base}/v1/orders/{new_order_id}"), &fan).await;
        let tickets = order["tickets"].as_array().cloned().unwrap_or_default();
        if order["paymentStatus"] == "CAPTURED" && tickets.len() == 1 {
            assert_eq!(tickets[0]["seatId"], "B-1-1", "{point}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: the new order never settled: {order}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(server);

    let check = Command::new(BIN)
        .args(["check", "--database-url", database_url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{point}: check fails after convergence: {report}"
    );
    let _ = std::fs::remove_file(&key_path);
    let _ = std::fs::remove_dir_all(format!("{key_path}.crash-node.waitroom"));
}

/// On a server without a crash point: creates the event `event_body` and buys A-1-1 for
/// `fan` with `pm_card_visa`, waiting (bounded) for its ticket and its capture. Returns the
/// event id, the order id and the ticket.
async fn bought_and_captured(
    http: &reqwest::Client,
    base: &str,
    (admin, fan): (&str, &str),
    event_body: &Value,
) -> (String, String, Value) {
    let (status, event) = post(
        http,
        &format!("{base}/v1/admin/events"),
        admin,
        "ev",
        event_body,
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    let (_, hold) = post(
        http,
        &format!("{base}/v1/events/{event_id}/holds"),
        fan,
        "hold",
        &json!({"seatIds": ["A-1-1"]}),
    )
    .await
    .unwrap();
    let hold_id = hold["holdId"].as_str().unwrap().to_owned();
    let (_, paid) = post(
        http,
        &format!("{base}/v1/holds/{hold_id}/checkout"),
        fan,
        "pay",
        &json!({"paymentMethodToken": "pm_card_visa"}),
    )
    .await
    .unwrap();
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    // The ticket, and the payment captured: an exchange and a refund need both.
    let started = Instant::now();
    loop {
        let order = get(http, &format!("{base}/v1/orders/{order_id}"), fan).await;
        if let Some(ticket) = order["tickets"].get(0)
            && order["paymentStatus"] == "CAPTURED"
        {
            return (event_id, order_id, ticket.clone());
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "the order never got its ticket and its capture: {order}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fan's refund whose server dies at `point`: after a restart and the client's retry with
/// the same key, the refund has settled `SUCCEEDED`, the provider made exactly one refund of
/// the right amount, the seat is free again, and `boxoffice check` is clean.
async fn refund_crash_case(database_url: &str, point: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let paysim = Paysim::start();
    let key_path = std::env::temp_dir().join(format!(
        "boxoffice-crash-key-{}.pem",
        uuid::Uuid::now_v7().simple()
    ));
    let key_path = key_path.to_str().unwrap().to_owned();
    let (admin, fan) = (token("ops", true), token("ann", false));

    // The event and the purchase, on a server without a crash point.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let base = server.base.clone();
    let (event_id, order_id, _) = bought_and_captured(
        &http,
        &base,
        (&admin, &fan),
        &json!({"name": "Crash Refund", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                "refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 100},
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 5, "priceMinor": 1000}]}),
    )
    .await;
    drop(server);

    // The refund, against a server that dies at `point`.
    let refunds_url = |base: &str| format!("{base}/v1/orders/{order_id}/refunds");
    let mut server = Server::start(database_url, &paysim, &key_path, Some(point));
    let _ = post(&http, &refunds_url(&server.base), &fan, "rf", &json!({})).await;
    server.wait_for_crash();

    // Restart; the client retries with the same key.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let base = server.base.clone();
    let (status, refund) = post(&http, &refunds_url(&base), &fan, "rf", &json!({}))
        .await
        .unwrap();
    assert_eq!(
        status, 202,
        "{point}: the refund answers after the crash: {refund}"
    );
    assert_eq!(refund["amountMinor"], 900, "{point}: {refund}");
    let started = Instant::now();
    let order = loop {
        let order = get(&http, &format!("{base}/v1/orders/{order_id}"), &fan).await;
        if order["orderStatus"] == "REFUNDED" {
            break order;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: the refund never settled: {order}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        order["refunds"].as_array().unwrap().len(),
        1,
        "{point}: {order}"
    );
    assert_eq!(
        order["refunds"][0]["status"], "SUCCEEDED",
        "{point}: {order}"
    );
    // The provider made one refund, of what the policy gives back.
    let listed: Value = http
        .get(format!("{}/v1/refunds?limit=100", paysim.base))
        .bearer_auth(boxoffice_payments::simulator::DEFAULT_SECRET_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let made = listed["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        made.len(),
        1,
        "{point}: exactly one provider refund: {listed}"
    );
    assert_eq!(made[0]["amount"], 900, "{point}: {listed}");
    // The seat is on sale again.
    let (status, again) = post(
        &http,
        &format!("{base}/v1/events/{event_id}/holds"),
        &token("bob", false),
        "bob-hold",
        &json!({"seatIds": ["A-1-1"]}),
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{point}: the refunded seat is free: {again}");
    drop(server);

    let check = Command::new(BIN)
        .args(["check", "--database-url", database_url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{point}: check fails after convergence: {report}"
    );
    let _ = std::fs::remove_file(&key_path);
    let _ = std::fs::remove_dir_all(format!("{key_path}.crash-node.waitroom"));
}

/// Orders bought before an event's cancellation whose server dies at `point`.
const CANCELLED_ORDERS: usize = 5;

/// An event's cancellation whose server dies at `point` (its refunds' job recording two a
/// second, so that a step leaves orders for later): after a restart and the client's retry
/// with the same key, every paid order has exactly one cancellation refund, `SUCCEEDED`, the
/// provider made exactly one refund per order, and `boxoffice check` is clean.
async fn cancellation_crash_case(database_url: &str, point: &str) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let paysim = Paysim::start();
    let key_path = std::env::temp_dir().join(format!(
        "boxoffice-crash-key-{}.pem",
        uuid::Uuid::now_v7().simple()
    ));
    let key_path = key_path.to_str().unwrap().to_owned();
    let admin = token("ops", true);
    let slow = ["--limit", "cancellation-refunds-per-second=2"];

    // The event and its orders, on a server without a crash point.
    let server = Server::start(database_url, &paysim, &key_path, None);
    let base = server.base.clone();
    let (status, event) = post(
        &http,
        &format!("{base}/v1/admin/events"),
        &admin,
        "ev",
        &json!({"name": "Crash Cancel", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 10, "priceMinor": 1000}]}),
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{event}");
    let event_id = event["eventId"].as_str().unwrap().to_owned();
    let mut orders = Vec::new();
    for n in 1..=CANCELLED_ORDERS {
        let fan = token(&format!("fan-{n}"), false);
        let (_, hold) = post(
            &http,
            &format!("{base}/v1/events/{event_id}/holds"),
            &fan,
            "hold",
            &json!({"seatIds": [format!("A-1-{n}")]}),
        )
        .await
        .unwrap();
        let hold_id = hold["holdId"].as_str().unwrap().to_owned();
        let (_, paid) = post(
            &http,
            &format!("{base}/v1/holds/{hold_id}/checkout"),
            &fan,
            "pay",
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await
        .unwrap();
        orders.push((fan, paid["orderId"].as_str().unwrap().to_owned()));
    }
    for (fan, order_id) in &orders {
        let started = Instant::now();
        while get(&http, &format!("{base}/v1/orders/{order_id}"), fan).await["paymentStatus"]
            != "CAPTURED"
        {
            assert!(started.elapsed() < Duration::from_secs(CONVERGE_S));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(server);

    // The cancellation, against a server that dies at `point`.
    let cancel_url = |base: &str| format!("{base}/v1/admin/events/{event_id}/cancel");
    let body = json!({"reason": "crash test"});
    let mut server = Server::start_with(
        database_url,
        &paysim,
        &key_path,
        Some(point),
        "crash-node",
        &slow,
    );
    let _ = post(&http, &cancel_url(&server.base), &admin, "cancel", &body).await;
    server.wait_for_crash();

    // Restart; the client retries with the same key.
    let server = Server::start_with(database_url, &paysim, &key_path, None, "crash-node", &slow);
    let base = server.base.clone();
    let (status, answered) = post(&http, &cancel_url(&base), &admin, "cancel", &body)
        .await
        .unwrap();
    assert_eq!(status, 202, "{point}: the cancellation answers: {answered}");
    assert_eq!(answered["orders"], CANCELLED_ORDERS, "{point}: {answered}");
    let started = Instant::now();
    let done = loop {
        let done = get(
            &http,
            &format!("{base}/v1/admin/events/{event_id}/cancellation"),
            &admin,
        )
        .await;
        if done["status"] == "CANCELLED" {
            break done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(CONVERGE_S),
            "{point}: the cancellation never finished: {done}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(done["refunded"], CANCELLED_ORDERS, "{point}: {done}");
    assert_eq!(
        done["amountRefundedMinor"],
        1000 * CANCELLED_ORDERS,
        "{point}: {done}"
    );
    for (fan, order_id) in &orders {
        let order = get(&http, &format!("{base}/v1/orders/{order_id}"), fan).await;
        assert_eq!(order["orderStatus"], "REFUNDED", "{point}: {order}");
        assert_eq!(
            order["refunds"].as_array().unwrap().len(),
            1,
            "{point}: one refund per order: {order}"
        );
    }
    // The provider made one refund per order, each of the whole payment.
    let listed: Value = http
        .get(format!("{}/v1/refunds?limit=100", paysim.base))
        .bearer_auth(boxoffice_payments::simulator::DEFAULT_SECRET_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let made = listed["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        made.len(),
        CANCELLED_ORDERS,
        "{point}: exactly one provider refund per order: {listed}"
    );
    assert!(
        made.iter().all(|r| r["amount"] == 1000),
        "{point}: {listed}"
    );
    drop(server);

    let check = Command::new(BIN)
        .args(["check", "--database-url", database_url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{point}: check fails after convergence: {report}"
    );
    let _ = std::fs::remove_file(&key_path);
    let _ = std::fs::remove_dir_all(format!("{key_path}.crash-node.waitroom"));
}

async fn every_point(database_url: impl Fn() -> (String, Box<dyn FnOnce()>)) {
    for point in boxoffice_workers::crash::POINTS {
        let (url, cleanup) = database_url();
        crash_case(&url, point, false).await;
        cleanup();
    }
    for point in boxoffice_workers::crash::EXCHANGE_POINTS {
        let (url, cleanup) = database_url();
        exchange_crash_case(&url, point).await;
        cleanup();
    }
    for point in boxoffice_workers::crash::REFUND_POINTS {
        let (url, cleanup) = database_url();
        refund_crash_case(&url, point).await;
        cleanup();
    }
    for point in boxoffice_workers::crash::CANCELLATION_POINTS {
        let (url, cleanup) = database_url();
        cancellation_crash_case(&url, point).await;
        cleanup();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_converges_after_every_crash_point() {
    let _heavy = support::heavy();
    every_point(|| {
        let path = std::env::temp_dir().join(format!(
            "boxoffice-crash-{}.db",
            uuid::Uuid::now_v7().simple()
        ));
        let url = format!("sqlite://{}", path.display());
        let cleanup = move || {
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        };
        (url, Box::new(cleanup) as Box<dyn FnOnce()>)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_converges_after_every_crash_point() {
    let _heavy = support::heavy();
    let base = std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let mut created = Vec::new();
    for point in boxoffice_workers::crash::POINTS {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{base}/{db}");
        crash_case(&url, point, false).await;
        created.push(db);
    }
    for point in boxoffice_workers::crash::EXCHANGE_POINTS {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{base}/{db}");
        exchange_crash_case(&url, point).await;
        created.push(db);
    }
    for point in boxoffice_workers::crash::REFUND_POINTS {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{base}/{db}");
        refund_crash_case(&url, point).await;
        created.push(db);
    }
    for point in boxoffice_workers::crash::CANCELLATION_POINTS {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{base}/{db}");
        cancellation_crash_case(&url, point).await;
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

/// The purchase's points on the owner's path, with a second node beside the one that dies
/// (the relay's points, capture and delivery, are passed on whichever node claims the
/// message first, so they are not the owner's to die at).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_nodes_converge_after_the_owners_crash_points() {
    let _heavy = support::heavy();
    let base = std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let mut created = Vec::new();
    let owner_points = boxoffice_workers::crash::POINTS
        .into_iter()
        .filter(|point| !matches!(*point, "capture_sent" | "outbox_delivered"));
    for point in owner_points {
        let db = format!("boxoffice_test_{}", uuid::Uuid::now_v7().simple());
        let url = format!("{base}/{db}");
        crash_case(&url, point, true).await;
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
