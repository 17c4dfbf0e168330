//! `boxoffice cluster up` / `down` (issues 17 and 38): two shards, each a pg_auto_failover
//! formation of a primary and a synchronous secondary under one monitor, a Redis, two nodes and HAProxy come up on free ports below 32768; two events are
//! placed one on each shard; holds sent through the balancer are decided by each event's one
//! owner whichever node HAProxy picked, committed on its shard's primary (none on the other)
//! and present on that shard's standby; exchanges between the two events cross the shards in
//! DESIGN §7's recorded steps (sold at once, paid later, refused, and a request that died
//! between the steps, finished by the settler); each event's report is read on its shard;
//! `boxoffice check` over both shards is clean; `cluster down` leaves no process and no port.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::BIN;

const SECRET: &str = "local-cluster-test-secret-0123456789";

fn boxoffice(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .output()
        .expect("running boxoffice")
}

fn line_value(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no `{key}` line in {stdout:?}"))
        .trim()
        .to_owned()
}

/// Holds of `event_id` on the PostgreSQL at `port`.
async fn holds_on(port: u64, event_id: &str) -> i64 {
    let url = format!("postgres://postgres@127.0.0.1:{port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connecting to the shard");
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM hold WHERE event_id = $1")
        .bind(event_id)
        .fetch_one(&mut connection)
        .await
        .expect("counting holds")
}

/// Whether the order has tickets and every one of them has `status` (an order without
/// tickets is not "all voided").
fn all_tickets(order: &Value, status: &str) -> bool {
    order["tickets"]
        .as_array()
        .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["status"] == status))
}

/// Reads the order through the balancer until `done` holds (at most 30 s).
async fn order_when(
    http: &reqwest::Client,
    balancer: &str,
    token: &str,
    order_id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let order: Value = http
            .get(format!("{balancer}/v1/orders/{order_id}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if done(&order) {
            return order;
        }
        assert!(Instant::now() < deadline, "order never got there: {order}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The statuses of these seats of `event_id` on the PostgreSQL at `port`, in order.
async fn seat_statuses(port: u64, event_id: &str, seat_ids: &[String]) -> Vec<String> {
    let url = format!("postgres://postgres@127.0.0.1:{port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connecting to the shard");
    let mut statuses = Vec::new();
    for seat_id in seat_ids {
        statuses.push(
            sqlx::query_scalar::<_, String>(
                "SELECT status FROM seat WHERE event_id = $1 AND seat_id = $2",
            )
            .bind(event_id)
            .bind(seat_id)
            .fetch_one(&mut connection)
            .await
            .expect("a seat"),
        );
    }
    statuses
}

/// Exchange rows of this leg on the PostgreSQL at `port`.
async fn legs(port: u64, leg: &str) -> i64 {
    let url = format!("postgres://postgres@127.0.0.1:{port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connecting to the shard");
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM exchange WHERE leg = $1")
        .bind(leg)
        .fetch_one(&mut connection)
        .await
        .expect("counting exchange rows")
}

/// Each shard's members as the monitor sees them (`boxoffice cluster status`).
fn shard_states(dir: &str) -> Value {
    let status = boxoffice(&["cluster", "status", "--dir", dir]);
    assert!(
        status.status.success(),
        "cluster status: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    serde_json::from_slice(&status.stdout).expect("cluster status prints JSON")
}

/// The port of shard `index`'s member that is (`primary`) or is not its primary now.
fn port_of(states: &Value, index: usize, primary: bool) -> u64 {
    states[index]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["primary"] == json!(primary))
        .unwrap_or_else(|| panic!("shard {index} has no such member: {states}"))["port"]
        .as_u64()
        .unwrap()
}

/// Every test that starts a cluster needs HAProxy and pg_auto_failover.
fn ensure_cluster_tools() {
    support::ensure_debian_package("/usr/sbin/haproxy", "haproxy");
    support::ensure_debian_package("/usr/bin/pg_autoctl", "pg-auto-failover-cli");
    support::ensure_debian_package(
        "/usr/share/postgresql/15/extension/pgautofailover.control",
        "postgresql-15-auto-failover",
    );
}

/// Every process whose command line names `dir` (a keeper, a PostgreSQL, a node).
fn processes_under(dir: &std::path::Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| alive(u64::from(*pid)))
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline
                .contains(&needle)
                .then(|| format!("{pid} {cmdline}"))
        })
        .collect()
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_comes_up_sells_through_the_balancer_and_goes_down_clean() {
    let _heavy = support::heavy();
    ensure_cluster_tools();
    let dir = std::env::temp_dir().join(format!("boxoffice-cluster-{}", uuid::Uuid::now_v7()));
    let dir_arg = dir.display().to_string();
    let _down = Down(dir.clone());
    let up = boxoffice(&[
        "cluster", "up", "--dir", &dir_arg, "--nodes", "2", "--shards", "2",
    ]);
    let stdout = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(
        up.status.success(),
        "cluster up failed: {stdout}{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let balancer = line_value(&stdout, "balancer");
    let admin = line_value(&stdout, "admin-token");
    let database_url = line_value(&stdout, "database-url");
    assert!(balancer.starts_with("http://127.0.0.1:"));
    let state: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).expect("cluster.json"))
            .expect("cluster state");

    let states = shard_states(&dir_arg);

    // Every part on a port below the client range.
    let mut ports = vec![state["balancer"]["port"].as_u64().unwrap()];
    ports.push(state["redis"]["port"].as_u64().unwrap());
    ports.push(state["monitor"]["port"].as_u64().unwrap());
    for shard in 0..2 {
        ports.push(port_of(&states, shard, true));
        ports.push(port_of(&states, shard, false));
    }
    for node in state["nodes"].as_array().unwrap() {
        ports.push(node["port"].as_u64().unwrap());
    }
    assert_eq!(ports.len(), 9);
    assert!(ports.iter().all(|p| *p < 32_768), "{ports:?}");

    let http = reqwest::Client::new();
    // Two events: the directory places them by the fewest events, one on each shard.
    let mut events = Vec::new();
    for n in 0..2 {
        let created: Value = http
            .post(format!("{balancer}/v1/admin/events"))
            .bearer_auth(&admin)
            .header("idempotency-key", format!("cluster-event-{n}"))
            .json(&json!({
                "name": format!("Cluster night {n}"), "startsAt": "2030-01-01T20:00:00Z",
                "currency": "EUR", "holdTtlSeconds": 120, "maxSeatsPerHold": 6,
                "maxTicketsPerAccount": 6,
                "sections": [{"name": "A", "rows": 5, "seatsPerRow": 20, "priceMinor": 5000}],
                "tiers": [{"tierId": "FLOOR", "name": "Floor", "capacity": 20, "priceMinor": 8000}],
            }))
            .send()
            .await
            .expect("creating the event")
            .json()
            .await
            .expect("event body");
        events.push(created["eventId"].as_str().expect("eventId").to_owned());
    }
    // The same request again answers the same event (its shard has the stored answer).
    let replay: Value = http
        .post(format!("{balancer}/v1/admin/events"))
        .bearer_auth(&admin)
        .header("idempotency-key", "cluster-event-1")
        .json(&json!({
            "name": "Cluster night 1", "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR", "holdTtlSeconds": 120, "maxSeatsPerHold": 6,
            "maxTicketsPerAccount": 6,
            "sections": [{"name": "A", "rows": 5, "seatsPerRow": 20, "priceMinor": 5000}],
            "tiers": [{"tierId": "FLOOR", "name": "Floor", "capacity": 20, "priceMinor": 8000}],
        }))
        .send()
        .await
        .expect("creating the event again")
        .json()
        .await
        .expect("event body");
    assert_eq!(
        replay["eventId"],
        json!(events[1]),
        "a replay answers as before"
    );

    // Ten holds per event through the balancer (round robin: both nodes receive some); one
    // node decides each event's holds, its owner.
    let mut first_hold = None;
    for (n, event_id) in events.iter().enumerate() {
        let mut deciders = std::collections::BTreeSet::new();
        let mut hold_ids = Vec::new();
        for i in 0..10 {
            let token = boxoffice_server::auth::mint_token(
                SECRET,
                &boxoffice_domain::ids::AccountId::parse(&format!("cluster-fan-{i}")).unwrap(),
                false,
                3600,
            )
            .unwrap();
            let answer = http
                .post(format!("{balancer}/v1/events/{event_id}/holds"))
                .bearer_auth(&token)
                .header("idempotency-key", format!("cluster-hold-{n}-{i}"))
                .json(&json!({"bestAvailable": {"quantity": 2}}))
                .send()
                .await
                .expect("a hold through the balancer");
            assert_eq!(answer.status().as_u16(), 201, "event {n} hold {i}");
            deciders.insert(
                answer
                    .headers()
                    .get("x-boxoffice-node")
                    .and_then(|v| v.to_str().ok())
                    .expect("x-boxoffice-node")
                    .to_owned(),
            );
            let body: Value = answer.json().await.expect("hold body");
            hold_ids.push((token, body["holdId"].as_str().expect("holdId").to_owned()));
        }
        assert_eq!(deciders.len(), 1, "one owner decides: {deciders:?}");
        if n == 0 {
            first_hold = hold_ids.first().cloned();
        }
        // A hold is found by its id through any node, whichever shard it is on.
        for (token, hold_id) in hold_ids.iter().take(4) {
            let answer = http
                .get(format!("{balancer}/v1/holds/{hold_id}"))
                .bearer_auth(token)
                .send()
                .await
                .expect("reading a hold");
            assert_eq!(answer.status().as_u16(), 200, "hold {hold_id}");
        }
    }

    // Each event's holds are on its own shard's primary, none on the other.
    let primaries: Vec<u64> = (0..2).map(|shard| port_of(&states, shard, true)).collect();
    for (n, event_id) in events.iter().enumerate() {
        assert_eq!(holds_on(primaries[n], event_id).await, 10, "event {n}");
        assert_eq!(holds_on(primaries[1 - n], event_id).await, 0, "event {n}");
        // Its report, through any node, is read on its shard: every held seat counted.
        let report: Value = http
            .get(format!("{balancer}/v1/admin/events/{event_id}/report"))
            .bearer_auth(&admin)
            .send()
            .await
            .expect("the event's report")
            .json()
            .await
            .expect("report body");
        assert_eq!(report["totals"]["heldNow"], 20, "event {n}: {report}");
        assert_eq!(report["totals"]["capacity"], 120, "event {n}: {report}");
    }
    let listed = boxoffice(&["shard", "list", "--database-url", &database_url]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("placement least-events"), "{listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("main ") && l.ends_with("events placed 1")),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("s1 ") && l.ends_with("events placed 1")),
        "{listed}"
    );

    // Committed on the primaries, streamed synchronously to the standbys.
    for (n, event_id) in events.iter().enumerate() {
        let standby = port_of(&states, n, false);
        let url = format!("postgres://postgres@127.0.0.1:{}/postgres", primaries[n]);
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        let sync: String = sqlx::query_scalar("SELECT sync_state FROM pg_stat_replication")
            .fetch_one(&mut connection)
            .await
            .expect("a standby streams");
        // pg_auto_failover names its standbys `ANY 1 (…)`: a quorum of one, synchronous.
        assert!(matches!(sync.as_str(), "sync" | "quorum"), "{sync}");
        // The standby has flushed every commit before it was acknowledged; replaying it for
        // reads may take a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut on_standby = holds_on(standby, event_id).await;
        while on_standby != 10 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            on_standby = holds_on(standby, event_id).await;
        }
        assert_eq!(on_standby, 10, "shard {n}'s standby has every hold");
    }

    // Exchanges across the two shards (DESIGN §7's two steps). A fan pays for a hold of the
    // first event (shard main) ...
    let (fan_token, fan_hold) = first_hold.expect("a hold on the first event");
    let paid: Value = http
        .post(format!("{balancer}/v1/holds/{fan_hold}/checkout"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-pay-0")
        .json(&json!({"paymentMethodToken": "pm_card_visa"}))
        .send()
        .await
        .expect("a checkout through the balancer")
        .json()
        .await
        .expect("checkout body");
    let order_id = paid["orderId"].as_str().expect("orderId").to_owned();
    // An exchange needs the order's payment captured, not only the order confirmed.
    let order = order_when(&http, &balancer, &fan_token, &order_id, |o| {
        o["orderStatus"] == "CONFIRMED"
            && o["paymentStatus"] == "CAPTURED"
            && o["tickets"].as_array().is_some_and(|t| !t.is_empty())
    })
    .await;
    let from: Vec<Value> = order["tickets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seatId"].clone())
        .collect();
    let old_seats: Vec<String> = from
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    // ... and exchanges both seats for two of the second event (shard s1) at the same price:
    // sold there at once, the old tickets voided and their seats back on sale on main.
    let to = &["A-5-19", "A-5-20"][..from.len()];
    let ask = json!({"fromSeatIds": from, "toEventId": events[1], "toSeatIds": to});
    let answer = http
        .post(format!("{balancer}/v1/orders/{order_id}/exchanges"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-exchange-0")
        .json(&ask)
        .send()
        .await
        .expect("an exchange through the balancer");
    let status = answer.status().as_u16();
    let exchanged: Value = answer.json().await.unwrap();
    assert_eq!(status, 201, "{exchanged}");
    assert_eq!(exchanged["status"], json!("COMPLETED"), "{exchanged}");
    assert_eq!(exchanged["amountDueMinor"], json!(0), "{exchanged}");
    let exchange_id = exchanged["exchangeId"].as_str().unwrap().to_owned();
    let new_order_id = exchanged["newOrderId"]
        .as_str()
        .expect("newOrderId")
        .to_owned();
    let old = order_when(&http, &balancer, &fan_token, &order_id, |o| {
        all_tickets(o, "VOIDED")
    })
    .await;
    assert_eq!(old["orderStatus"], json!("CONFIRMED"), "{old}");
    let new = order_when(&http, &balancer, &fan_token, &new_order_id, |o| {
        o["orderStatus"] == "CONFIRMED"
    })
    .await;
    assert_eq!(new["eventId"], json!(events[1]));
    let new_tickets = new["tickets"].as_array().unwrap();
    assert_eq!(new_tickets.len(), to.len(), "{new}");
    assert!(all_tickets(&new, "VALID"), "{new}");
    assert_eq!(
        seat_statuses(primaries[0], &events[0], &old_seats).await,
        vec!["AVAILABLE"; old_seats.len()],
        "the old seats are back on sale on main"
    );
    let to_owned: Vec<String> = to.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        seat_statuses(primaries[1], &events[1], &to_owned).await,
        vec!["SOLD"; to.len()],
        "the new seats are sold on s1"
    );
    // The same request again answers as before; the exchange reads as completed.
    let replay: Value = http
        .post(format!("{balancer}/v1/orders/{order_id}/exchanges"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-exchange-0")
        .json(&ask)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(replay["exchangeId"], json!(exchange_id), "{replay}");
    let read: Value = http
        .get(format!("{balancer}/v1/exchanges/{exchange_id}"))
        .bearer_auth(&fan_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["status"], json!("COMPLETED"), "{read}");
    assert_eq!(read["toEventId"], json!(events[1]), "{read}");

    // Back to the first event's floor at a higher price: the new units are held on main, the
    // tickets on s1 marked until the difference is paid; once it is, the settler swaps the
    // old side out on s1.
    let ask = json!({"fromSeatIds": to, "toEventId": events[0], "toTierId": "FLOOR",
                     "quantity": to.len()});
    let answer = http
        .post(format!("{balancer}/v1/orders/{new_order_id}/exchanges"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-exchange-1")
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 201);
    let upgrade: Value = answer.json().await.unwrap();
    assert_eq!(upgrade["status"], json!("PAYMENT_REQUIRED"), "{upgrade}");
    assert_eq!(
        upgrade["amountDueMinor"],
        json!((8000 - 5000) * to.len() as i64),
        "{upgrade}"
    );
    let upgrade_id = upgrade["exchangeId"].as_str().unwrap().to_owned();
    let marked = order_when(&http, &balancer, &fan_token, &new_order_id, |_| true).await;
    assert!(all_tickets(&marked, "EXCHANGING"), "{marked}");
    let answer = http
        .post(format!("{balancer}/v1/exchanges/{upgrade_id}/checkout"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-exchange-1-pay")
        .json(&json!({"paymentMethodToken": "pm_card_visa"}))
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap()
    );
    order_when(&http, &balancer, &fan_token, &new_order_id, |o| {
        all_tickets(o, "VOIDED")
    })
    .await;
    assert_eq!(
        seat_statuses(primaries[1], &events[1], &to_owned).await,
        vec!["AVAILABLE"; to.len()],
        "the seats given up are back on sale on s1"
    );
    let read: Value = http
        .get(format!("{balancer}/v1/exchanges/{upgrade_id}"))
        .bearer_auth(&fan_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["status"], json!("COMPLETED"), "{read}");
    let floor_order_id = read["newOrderId"].as_str().expect("newOrderId").to_owned();
    // Its difference captured too, before it is exchanged again.
    order_when(&http, &balancer, &fan_token, &floor_order_id, |o| {
        o["orderStatus"] == "CONFIRMED"
            && o["paymentStatus"] == "CAPTURED"
            && o["tickets"].as_array().is_some_and(|t| t.len() == to.len())
    })
    .await;

    // Refused on the target's shard (a seat another fan holds): nothing is sold there, its
    // side is aborted, and the marks on the floor tickets are taken back.
    let other = boxoffice_server::auth::mint_token(
        SECRET,
        &boxoffice_domain::ids::AccountId::parse("cluster-other-fan").unwrap(),
        false,
        3600,
    )
    .unwrap();
    let held = http
        .post(format!("{balancer}/v1/events/{}/holds", events[1]))
        .bearer_auth(&other)
        .header("idempotency-key", "cluster-other-hold")
        .json(&json!({"seatIds": ["A-4-1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status().as_u16(), 201);
    let answer = http
        .post(format!("{balancer}/v1/orders/{floor_order_id}/exchanges"))
        .bearer_auth(&fan_token)
        .header("idempotency-key", "cluster-exchange-2")
        .json(
            &json!({"fromTierId": "FLOOR", "quantity": 1, "toEventId": events[1],
                      "toSeatIds": ["A-4-1"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 409);
    let problem: Value = answer.json().await.unwrap();
    assert_eq!(problem["code"], json!("SEATS_UNAVAILABLE"), "{problem}");
    let floor = order_when(&http, &balancer, &fan_token, &floor_order_id, |_| true).await;
    assert!(all_tickets(&floor, "VALID"), "{floor}");
    assert_eq!(
        legs(primaries[1], "ABORT").await,
        1,
        "the target's side is aborted"
    );

    // A request that died between the two steps (its tickets marked on main an hour ago, its
    // side never written on s1): the settler aborts it on s1 and takes the marks back.
    let main = boxoffice_store_postgres::PgStore::connect_with(
        &format!("postgres://postgres@127.0.0.1:{}/boxoffice", primaries[0]),
        2,
    )
    .await
    .unwrap();
    let floor_hold = floor["holdId"].as_str().unwrap().to_owned();
    let ticket_id = floor["tickets"][0]["ticketId"].as_str().unwrap().to_owned();
    let dead_id = uuid::Uuid::now_v7().to_string();
    let out = boxoffice_store::exchange::ExchangeOut {
        exchange_id: dead_id.clone(),
        account_id: "cluster-fan-0".into(),
        order_id: floor_order_id.clone(),
        old_hold_id: floor_hold,
        from_event_id: events[0].clone(),
        to_event_id: events[1].clone(),
        ticket_ids: vec![ticket_id],
        from_value_minor: 8000,
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        to_value_minor: 5000,
        amount_due_minor: -3000,
        currency: "EUR".into(),
        idempotency_key: "cluster-exchange-dead".into(),
        status: boxoffice_store::exchange::ExchangeStatus::PaymentRequired,
        created_at: time::OffsetDateTime::UNIX_EPOCH,
        updated_at: time::OffsetDateTime::UNIX_EPOCH,
    };
    use boxoffice_store::Store as _;
    main.mark_exchange_out(
        &out,
        time::OffsetDateTime::now_utc() + time::Duration::days(1),
    )
    .await
    .unwrap()
    .expect("marked");
    sqlx::query(
        "UPDATE exchange SET created_at = created_at - interval '1 hour' WHERE exchange_id = $1",
    )
    .bind(&dead_id)
    .execute(main.pool())
    .await
    .unwrap();
    let floor = order_when(&http, &balancer, &fan_token, &floor_order_id, |o| {
        all_tickets(o, "VALID")
    })
    .await;
    assert_eq!(floor["orderStatus"], json!("CONFIRMED"));
    assert_eq!(
        legs(primaries[1], "ABORT").await,
        2,
        "the dead request's side is aborted"
    );
    let status: String = sqlx::query_scalar("SELECT status FROM exchange WHERE exchange_id = $1")
        .bind(&dead_id)
        .fetch_one(main.pool())
        .await
        .unwrap();
    assert_eq!(status, "FAILED");
    main.pool().close().await;

    // The first event moves to s1 (`boxoffice shard move`): its rows leave main, the nodes
    // follow the directory within seconds, its holds, orders and exchanges are found there,
    // and it sells on.
    let moved = boxoffice(&[
        "shard",
        "move",
        "--database-url",
        &database_url,
        "--event",
        &events[0],
        "--to",
        "s1",
    ]);
    let said = String::from_utf8_lossy(&moved.stdout).into_owned();
    assert!(
        moved.status.success(),
        "shard move: {said}{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    assert!(said.contains("moved from main to s1"), "{said}");
    assert_eq!(
        holds_on(primaries[0], &events[0]).await,
        0,
        "nothing left on main"
    );
    // The ten holds and the floor exchange's.
    assert_eq!(
        holds_on(primaries[1], &events[0]).await,
        11,
        "every hold on s1"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let sold_on = loop {
        let answer = http
            .post(format!("{balancer}/v1/events/{}/holds", events[0]))
            .bearer_auth(&other)
            .header("idempotency-key", "cluster-after-move")
            .json(&json!({"seatIds": ["A-3-3"]}))
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        if status == 201 {
            break status;
        }
        // Until the nodes read the directory again: the old shard has no such event, or its
        // lease is the mover's.
        assert!(
            Instant::now() < deadline,
            "no hold after the move: {status} {}",
            answer.text().await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(sold_on, 201);
    assert_eq!(holds_on(primaries[1], &events[0]).await, 12);
    assert_eq!(holds_on(primaries[0], &events[0]).await, 0);
    let floor = order_when(&http, &balancer, &fan_token, &floor_order_id, |_| true).await;
    assert_eq!(floor["orderStatus"], json!("CONFIRMED"), "{floor}");
    let read: Value = http
        .get(format!("{balancer}/v1/exchanges/{upgrade_id}"))
        .bearer_auth(&fan_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["status"], json!("COMPLETED"), "{read}");
    // Moving it again is a no-op that says so.
    let again = boxoffice(&[
        "shard",
        "move",
        "--database-url",
        &database_url,
        "--event",
        &events[0],
        "--to",
        "s1",
    ]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("on shard s1 already"));
    // A move that stopped after the rows and before the directory: run again, it only
    // names the new shard.
    let home = <sqlx::PgConnection as sqlx::Connection>::connect(&format!(
        "postgres://postgres@127.0.0.1:{}/boxoffice",
        primaries[0]
    ))
    .await;
    sqlx::query("UPDATE event_shard SET shard = 'main' WHERE event_id = $1")
        .bind(&events[0])
        .execute(&mut home.unwrap())
        .await
        .unwrap();
    let resumed = boxoffice(&[
        "shard",
        "move",
        "--database-url",
        &database_url,
        "--event",
        &events[0],
        "--to",
        "s1",
    ]);
    let said = String::from_utf8_lossy(&resumed.stdout).into_owned();
    assert!(said.contains("the directory now says so"), "{said}");

    // The invariants hold on both shards, and each event is where the directory says.
    let check = boxoffice(&["check", "--database-url", &database_url]);
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "check: {said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        said.contains("shard main:") && said.contains("shard s1:"),
        "{said}"
    );
    assert!(
        said.contains("checked 0 events") && said.contains("checked 2 events"),
        "{said}"
    );
    // Both events on s1 now: each of the four exchanges between them is one row there again
    // (its two sides merged, an aborted one with its ended OUT row), none left on main.
    assert!(
        said.contains("checked 0 exchanges across shards (0 open): both sides agree"),
        "{said}"
    );
    assert_eq!(legs(primaries[1], "BOTH").await, 4);
    for leg in ["OUT", "IN", "ABORT"] {
        assert_eq!(legs(primaries[1], leg).await, 0, "{leg} on s1");
        assert_eq!(legs(primaries[0], leg).await, 0, "{leg} on main");
    }

    // Back to main: each exchange between the two events spans the shards again, as an OUT
    // and an IN (or ABORT) row, and check finds the two sides of each agreeing.
    let back = boxoffice(&[
        "shard",
        "move",
        "--database-url",
        &database_url,
        "--event",
        &events[0],
        "--to",
        "main",
    ]);
    assert!(
        String::from_utf8_lossy(&back.stdout).contains("moved from s1 to main"),
        "{}{}",
        String::from_utf8_lossy(&back.stdout),
        String::from_utf8_lossy(&back.stderr)
    );
    let check = boxoffice(&["check", "--database-url", &database_url]);
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check.status.success(), "check: {said}");
    assert_eq!(said.matches("checked 1 events").count(), 2, "{said}");
    assert!(
        said.contains("checked 4 exchanges across shards (0 open): both sides agree"),
        "{said}"
    );
    assert_eq!(
        legs(primaries[0], "BOTH").await + legs(primaries[1], "BOTH").await,
        0
    );

    // A second `up` into the same directory is refused.
    let again = boxoffice(&["cluster", "up", "--dir", &dir_arg]);
    assert!(!again.status.success());

    let down = boxoffice(&["cluster", "down", "--dir", &dir_arg]);
    assert!(
        down.status.success(),
        "cluster down failed: {}{}",
        String::from_utf8_lossy(&down.stdout),
        String::from_utf8_lossy(&down.stderr)
    );
    for port in &ports {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", *port as u16)).is_ok(),
            "port {port} still bound"
        );
    }
    for node in state["nodes"].as_array().unwrap() {
        assert!(!alive(node["pid"].as_u64().unwrap()), "a node still runs");
    }
    for file in [
        state["redis"]["pidFile"].as_str().unwrap(),
        state["balancer"]["pidFile"].as_str().unwrap(),
    ] {
        if let Ok(pid) = std::fs::read_to_string(file) {
            assert!(!alive(pid.trim().parse().unwrap()), "{file}: still runs");
        }
    }
    for data in [
        "shard-0/a",
        "shard-0/b",
        "shard-1/a",
        "shard-1/b",
        "monitor",
    ] {
        assert!(
            !dir.join(format!("{data}/postmaster.pid")).exists(),
            "{data} still runs"
        );
    }
    assert_eq!(
        processes_under(&dir),
        Vec::<String>::new(),
        "no process left"
    );
    // Down twice: nothing to stop, said plainly.
    assert!(
        !boxoffice(&["cluster", "down", "--dir", &dir_arg])
            .status
            .success()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends a POST until it is answered with something other than 503 or 429 (same key: safe to
/// send again), or `patience` passes; every status seen, the last answer's status and body,
/// or what the last try got (status 0: no answer, with the client's error) when patience ran
/// out.
async fn post_until_answered(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    key: &str,
    body: &Value,
    seen: &std::sync::Mutex<Vec<(Instant, u16)>>,
    patience: Duration,
) -> Result<(u16, Value), String> {
    let deadline = Instant::now() + patience;
    loop {
        let answer = http
            .post(url)
            .bearer_auth(token)
            .header("idempotency-key", key)
            .json(body)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let status = answer.as_ref().map_or(0, |a| a.status().as_u16());
        seen.lock().unwrap().push((Instant::now(), status));
        let last = match answer {
            Ok(answer) if !matches!(status, 503 | 429 | 502 | 504) => {
                let body = answer.json().await.unwrap_or(Value::Null);
                // A try that timed out here may still be running on a node (a commit waiting
                // for a synchronous standby that died): the key's answer is not known yet,
                // and the contract's 409 IDEMPOTENCY_IN_PROGRESS says to ask again later.
                if !(status == 409 && body["code"] == "IDEMPOTENCY_IN_PROGRESS") {
                    return Ok((status, body));
                }
                body.to_string()
            }
            Ok(answer) => answer.text().await.unwrap_or_default(),
            Err(error) => format!("{error:?}"),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "{url}: still {status} after {} s; the last try: {last}",
                patience.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the cluster in its directory if a test ends (or fails) with it still up.
struct Down(std::path::PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if self.0.join("cluster.json").exists() {
            let _ = boxoffice(&["cluster", "down", "--dir", &self.0.display().to_string()]);
        }
    }
}

fn postmaster_pid(data: &str) -> u32 {
    std::fs::read_to_string(std::path::Path::new(data).join("postmaster.pid"))
        .expect("postmaster.pid")
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_primary_dies_mid_sale_and_its_standby_takes_over_without_losing_a_sale() {
    let _heavy = support::heavy();
    ensure_cluster_tools();
    let dir = std::env::temp_dir().join(format!("boxoffice-failover-{}", uuid::Uuid::now_v7()));
    let dir_arg = dir.display().to_string();
    let _down = Down(dir.clone());
    let up = boxoffice(&[
        "cluster", "up", "--dir", &dir_arg, "--nodes", "2", "--shards", "2",
    ]);
    let stdout = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(
        up.status.success(),
        "cluster up failed: {stdout}{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let balancer = line_value(&stdout, "balancer");
    let admin = line_value(&stdout, "admin-token");
    let database_url = line_value(&stdout, "database-url");
    let state: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).unwrap()).unwrap();
    let states = shard_states(&dir_arg);
    let old_primary_port = port_of(&states, 0, true);
    let standby_port = port_of(&states, 0, false);
    let old_primary = state["shards"][0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["port"] == json!(old_primary_port))
        .expect("the primary in cluster.json")
        .clone();
    let http = reqwest::Client::new();

    // The event lands on the home shard (the first placed), the one that fails.
    let created: Value = http
        .post(format!("{balancer}/v1/admin/events"))
        .bearer_auth(&admin)
        .header("idempotency-key", "failover-event")
        .json(&json!({
            "name": "Failover night", "startsAt": "2030-01-01T20:00:00Z", "currency": "EUR",
            "holdTtlSeconds": 300, "maxSeatsPerHold": 2, "maxTicketsPerAccount": 2,
            "sections": [{"name": "A", "rows": 4, "seatsPerRow": 25, "priceMinor": 5000}],
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let event_id = created["eventId"].as_str().expect("eventId").to_owned();

    // 40 fans each hold a seat and pay for it, four at a time, through the balancer; each
    // request is sent again with its key while the answer is 503 or 429. The primary is
    // killed once 10 fans are done.
    const FANS: usize = 40;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for lane in 0..4 {
        let (http, balancer, event_id, seen, done) = (
            http.clone(),
            balancer.clone(),
            event_id.clone(),
            seen.clone(),
            done.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut sold = Vec::new();
            for fan in (lane..FANS).step_by(4) {
                let token = boxoffice_server::auth::mint_token(
                    SECRET,
                    &boxoffice_domain::ids::AccountId::parse(&format!("fo-fan-{fan}")).unwrap(),
                    false,
                    3600,
                )
                .unwrap();
                let (status, hold) = post_until_answered(
                    &http,
                    &format!("{balancer}/v1/events/{event_id}/holds"),
                    &token,
                    &format!("fo-hold-{fan}"),
                    &json!({"bestAvailable": {"quantity": 1}}),
                    &seen,
                    Duration::from_secs(60),
                )
                .await
                .unwrap_or_else(|e| panic!("fan {fan}'s hold: {e}"));
                assert_eq!(status, 201, "fan {fan}'s hold: {hold}");
                let hold_id = hold["holdId"].as_str().unwrap().to_owned();
                let (status, order) = post_until_answered(
                    &http,
                    &format!("{balancer}/v1/holds/{hold_id}/checkout"),
                    &token,
                    &format!("fo-pay-{fan}"),
                    &json!({"paymentMethodToken": "pm_card_visa"}),
                    &seen,
                    Duration::from_secs(60),
                )
                .await
                .unwrap_or_else(|e| panic!("fan {fan}'s checkout: {e}"));
                assert!(matches!(status, 201 | 202), "fan {fan}'s checkout: {order}");
                sold.push((
                    token,
                    hold_id,
                    order["orderId"].as_str().unwrap().to_owned(),
                ));
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            sold
        }));
    }
    while done.load(std::sync::atomic::Ordering::SeqCst) < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The lease the event's writer holds now, on the primary that is about to die.
    let old_url = format!("postgres://postgres@127.0.0.1:{old_primary_port}/boxoffice");
    let epoch_before: i64 = {
        let mut old = <sqlx::PgConnection as sqlx::Connection>::connect(&old_url)
            .await
            .unwrap();
        sqlx::query_scalar("SELECT epoch FROM event_lease WHERE event_id = $1")
            .bind(&event_id)
            .fetch_one(&mut old)
            .await
            .expect("the event's lease")
    };
    // The primary's machine dies: its keeper, the postmaster and every backend at once
    // (they are one process group).
    let postmaster = postmaster_pid(old_primary["data"].as_str().unwrap());
    let group = old_primary["pid"].as_u64().unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status();
    let killed_at = Instant::now();
    // The monitor's view, every 200 ms: when it marks the old primary unhealthy, and when
    // the secondary is the primary.
    let watch = {
        let (dir_arg, old_port) = (dir_arg.clone(), old_primary_port);
        tokio::task::spawn_blocking(move || {
            let (mut unhealthy, mut promoted) = (None, None);
            while promoted.is_none() && killed_at.elapsed() < Duration::from_secs(90) {
                let states = shard_states(&dir_arg);
                for member in states[0]["members"].as_array().unwrap() {
                    if member["port"] == json!(old_port) && member["healthy"] == json!(false) {
                        unhealthy.get_or_insert(killed_at.elapsed());
                    }
                    if member["port"] != json!(old_port) && member["primary"] == json!(true) {
                        promoted = Some(killed_at.elapsed());
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            (unhealthy, promoted)
        })
    };

    let mut sold = Vec::new();
    for task in tasks {
        sold.extend(task.await.expect("a fan's lane"));
    }
    let finished_in = killed_at.elapsed();
    assert_eq!(sold.len(), FANS);

    // The monitor failed the shard over: the secondary is the primary now, the old one dead.
    let deadline = Instant::now() + Duration::from_secs(60);
    while port_of(&shard_states(&dir_arg), 0, true) != standby_port {
        assert!(
            Instant::now() < deadline,
            "no failover: {}",
            shard_states(&dir_arg)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!alive(u64::from(postmaster)), "the old primary still runs");

    // Every sale answered is confirmed, once, on the new primary.
    for (token, _, order_id) in &sold {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let order: Value = http
                .get(format!("{balancer}/v1/orders/{order_id}"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap_or(Value::Null);
            if order["orderStatus"] == "CONFIRMED" {
                break;
            }
            assert!(Instant::now() < deadline, "never confirmed: {order}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let url = format!("postgres://postgres@127.0.0.1:{standby_port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let (holds, confirmed, sold_seats): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM hold WHERE event_id = $1),
                (SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'CONFIRMED'),
                (SELECT count(*) FROM seat WHERE event_id = $1 AND status = 'SOLD')",
    )
    .bind(&event_id)
    .fetch_one(&mut connection)
    .await
    .unwrap();
    assert_eq!(
        holds, FANS as i64,
        "one hold per fan, none lost, none twice"
    );
    assert_eq!(confirmed, FANS as i64);
    assert_eq!(sold_seats, FANS as i64);
    // The writer's lease from the old primary was stale on the new one: it took it again.
    let epoch_after: i64 = sqlx::query_scalar("SELECT epoch FROM event_lease WHERE event_id = $1")
        .bind(&event_id)
        .fetch_one(&mut connection)
        .await
        .unwrap();
    assert!(
        epoch_after > epoch_before,
        "the lease was taken again on the new primary ({epoch_before} -> {epoch_after})"
    );
    let (unhealthy, promoted) = watch.await.unwrap();
    let seen_all = seen.lock().unwrap().clone();
    let since_kill = |at: &Instant| at.saturating_duration_since(killed_at);
    // The first write the new primary accepted, and the last answer that asked to retry.
    let first_write = seen_all
        .iter()
        .filter(|(at, status)| {
            matches!(status, 201 | 202) && promoted.is_some_and(|p| since_kill(at) >= p)
        })
        .map(|(at, _)| since_kill(at))
        .min();
    let last_refused = seen_all
        .iter()
        .filter(|(at, status)| *at > killed_at && !matches!(status, 201 | 202))
        .map(|(at, _)| since_kill(at))
        .max();
    let statuses: Vec<u16> = seen_all
        .iter()
        .filter(|(at, _)| *at > killed_at)
        .map(|(_, status)| *status)
        .collect();
    let refused = statuses.iter().filter(|s| **s != 201 && **s != 202).count();
    println!(
        "failover timeline (s after the kill): unhealthy {:.1}, promoted {:.1}, first write accepted after it {:.1}, last 503/429 {:.1}",
        unhealthy.map_or(f64::NAN, |d| d.as_secs_f64()),
        promoted.map_or(f64::NAN, |d| d.as_secs_f64()),
        first_write.map_or(f64::NAN, |d| d.as_secs_f64()),
        last_refused.map_or(f64::NAN, |d| d.as_secs_f64()),
    );
    println!(
        "failover: all {FANS} sales answered {:.1} s after the kill; {refused} answers meanwhile were not 201/202: {:?}",
        finished_in.as_secs_f64(),
        statuses.iter().filter(|s| **s != 201 && **s != 202).fold(
            std::collections::BTreeMap::<u16, u32>::new(),
            |mut m, s| {
                *m.entry(*s).or_default() += 1;
                m
            }
        )
    );
    assert!(
        seen_all
            .iter()
            .all(|(_, s)| matches!(s, 201 | 202 | 503 | 429)),
        "only 201/202, or 503/429 to send again: {seen_all:?}"
    );

    // The old primary's machine comes back: its keeper rejoins it as the secondary
    // (pg_rewind), so that the shard can fail over again; it takes no write.
    let old_name = old_primary["name"].as_str().unwrap();
    let rejoined = boxoffice(&["cluster", "rejoin", "--dir", &dir_arg, "--member", old_name]);
    assert!(
        rejoined.status.success(),
        "cluster rejoin: {}",
        String::from_utf8_lossy(&rejoined.stderr)
    );
    // Wait until the shard commits synchronously again: the rejoined member streams as the
    // secondary *and* the primary has reached `primary`. A standby that dies while its
    // primary is still on its way from `wait_primary` to `primary` leaves pg_auto_failover's
    // primary retrying that step with synchronous_standby_names already set, so every commit
    // waits for the dead standby until it comes back (docs/DEPLOY.md, "Failover").
    let deadline = Instant::now() + Duration::from_secs(90);
    let synchronous_again = |states: &Value| {
        let members = states[0]["members"].as_array().unwrap();
        members
            .iter()
            .any(|m| m["currentState"] == "primary" && m["assignedState"] == "primary")
            && members
                .iter()
                .any(|m| m["currentState"] == "secondary" && m["assignedState"] == "secondary")
    };
    while port_of(&shard_states(&dir_arg), 0, false) != old_primary_port
        || !synchronous_again(&shard_states(&dir_arg))
    {
        assert!(
            Instant::now() < deadline,
            "the old primary never rejoined: {}",
            shard_states(&dir_arg)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut old = <sqlx::PgConnection as sqlx::Connection>::connect(&old_url)
        .await
        .unwrap();
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut old)
        .await
        .unwrap();
    assert!(in_recovery, "the old primary's address takes writes again");
    let write = sqlx::query("UPDATE event_lease SET epoch = epoch + 1")
        .execute(&mut old)
        .await;
    assert!(write.is_err(), "a write at the old address was accepted");
    drop(old);

    // Its secondary dies: the primary commits alone (wait_primary), holds go on.
    let rejoined_group =
        serde_json::from_slice::<Value>(&std::fs::read(dir.join("cluster.json")).unwrap()).unwrap()
            ["shards"][0]["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == json!(old_name))
            .unwrap()["pid"]
            .as_u64()
            .unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{rejoined_group}")])
        .status();
    let secondary_killed_at = Instant::now();
    for fan in 0..5 {
        let token = boxoffice_server::auth::mint_token(
            SECRET,
            &boxoffice_domain::ids::AccountId::parse(&format!("fo-late-{fan}")).unwrap(),
            false,
            3600,
        )
        .unwrap();
        let (status, hold) = post_until_answered(
            &http,
            &format!("{balancer}/v1/events/{event_id}/holds"),
            &token,
            &format!("fo-late-{fan}"),
            &json!({"bestAvailable": {"quantity": 1}}),
            &seen,
            // Until the monitor lets the primary commit alone, its commits wait for the dead
            // standby; on a machine busy with the other cluster tests that has taken longer
            // than a minute.
            Duration::from_secs(150),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "a hold with the secondary dead, {:.1} s after its kill: {e}; the shard: {}",
                secondary_killed_at.elapsed().as_secs_f64(),
                shard_states(&dir_arg)
            )
        });
        assert_eq!(status, 201, "a hold with the secondary dead: {hold}");
    }
    println!(
        "secondary dead: 5 holds answered {:.1} s after its kill",
        secondary_killed_at.elapsed().as_secs_f64()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let states = shard_states(&dir_arg);
        let primary = states[0]["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["primary"] == json!(true))
            .cloned();
        if primary
            .as_ref()
            .is_some_and(|p| p["currentState"] == "wait_primary")
        {
            break;
        }
        assert!(Instant::now() < deadline, "never wait_primary: {states}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    let check = boxoffice(&["check", "--database-url", &database_url]);
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "check: {said}{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let down = boxoffice(&["cluster", "down", "--dir", &dir_arg]);
    assert!(
        down.status.success(),
        "cluster down failed: {}{}",
        String::from_utf8_lossy(&down.stdout),
        String::from_utf8_lossy(&down.stderr)
    );
    assert_eq!(
        processes_under(&dir),
        Vec::<String>::new(),
        "no process left after a failover"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `boxoffice load onsale --cluster DIR --chaos`: two events on two shards sold through the
/// balancer while a node is SIGKILLed, a shard's primary is killed with its keeper (the
/// monitor fails it over), a node is frozen past its lease, the other shard's secondary is
/// killed, the monitor is frozen, a primary is frozen past the health checks and the
/// provider is slow; both converge, every shard heals, and `boxoffice check` is clean on
/// every shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chaos_on_sale_on_the_cluster_passes_check() {
    let _heavy = support::heavy();
    ensure_cluster_tools();
    let dir = std::env::temp_dir().join(format!("boxoffice-cchaos-{}", uuid::Uuid::now_v7()));
    let dir_arg = dir.display().to_string();
    let _down = Down(dir.clone());
    let up = boxoffice(&[
        "cluster", "up", "--dir", &dir_arg, "--nodes", "2", "--shards", "2",
    ]);
    assert!(
        up.status.success(),
        "cluster up failed: {}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let json = dir.join("report.json");
    let html = dir.join("report.html");
    let run = Command::new(BIN)
        .args(["load", "onsale", "--cluster", &dir_arg, "--chaos"])
        .args(["--scale", "0.01", "--accounts", "300", "--hold-ttl-s", "10"])
        .args(["--chaos-interval-s", "3"])
        .arg("--report")
        .arg(&json)
        .arg("--html-report")
        .arg(&html)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .env("RUST_LOG", "warn")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("running the chaos on-sale");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        run.status.success(),
        "cluster chaos failed\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        stdout.lines().rev().take(40).collect::<Vec<_>>().join("\n"),
        stderr.lines().rev().take(40).collect::<Vec<_>>().join("\n")
    );
    assert!(stdout.contains("cluster chaos run passed"), "{stdout}");

    let mut shards = std::collections::BTreeSet::new();
    for path in [json.clone(), dir.join("report-2.json")] {
        let report: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("a report")).expect("JSON");
        let actions: Vec<&str> = report["chaos"]
            .as_array()
            .expect("chaos marks")
            .iter()
            .filter_map(|m| m["action"].as_str())
            .collect();
        assert_eq!(actions.len(), 8, "{actions:?}");
        assert!(actions[1].contains("SIGKILLed"), "{actions:?}");
        assert!(
            actions[2].contains("primary") && actions[2].contains("SIGKILLed with its keeper"),
            "{actions:?}"
        );
        assert!(actions[3].contains("SIGSTOP"), "{actions:?}");
        assert!(actions[4].contains("secondary"), "{actions:?}");
        assert!(actions[5].contains("monitor frozen"), "{actions:?}");
        assert!(actions[6].contains("primary"), "{actions:?}");
        let chaos = &report["scenario"]["chaos"];
        assert_eq!(chaos["converged"], json!(true), "{chaos}");
        assert!(
            chaos["failover"]["promotedMs"].is_u64(),
            "no failover: {chaos}"
        );
        assert!(
            chaos["nodeCounters"]["takeovers_total"].as_f64().unwrap() >= 1.0,
            "a killed and a frozen owner: their events were taken over: {chaos}"
        );
        assert_eq!(report["check"]["ok"], json!(true));
        shards.insert(chaos["shard"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        shards.len(),
        2,
        "the two events are on two shards: {shards:?}"
    );
}
