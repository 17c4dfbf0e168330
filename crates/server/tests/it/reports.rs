//! Organisers' reports over HTTP on both backends: an event with two sections and a tier,
//! seats held, sold, checked in and exchanged to cheaper ones (a refund due); the report's
//! figures must equal counts taken independently — the event's read API, and this test's
//! own queries of the store — and its CSV must parse back (RFC 4180) to the same numbers,
//! a tier name with a comma and quotes included. Then the store's clock passes the holds'
//! deadlines and nothing is held any more. Refunds of payments captured after their holds
//! lapsed count where their seats were; the timeline's buckets hold each sale where its
//! confirmation time puts it (the orders an exchange and a transfer make are not sales); the
//! waiting room's totals are the queue view's; bad requests are refused with problem JSON.

use std::time::Duration;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    the_report_matches_the_store,
    a_late_capture_is_refunded_where_its_seats_were,
    the_timeline_matches_the_orders,
    the_waiting_room_totals_are_the_queue_views,
    bad_report_requests_are_refused,
    formula_names_download_as_text,
);

/// A tier name a CSV must quote.
const TIER_NAME: &str = "Floor, \"standing\"";

async fn two_section_event(app: &TestApp, overrides: Value) -> String {
    let mut body = json!({
        "holdTtlSeconds": 600,
        "sections": [
            {"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 1000},
            {"name": "B", "rows": 1, "seatsPerRow": 4, "priceMinor": 600},
        ],
        "tiers": [{"tierId": "GA", "name": TIER_NAME, "capacity": 10, "priceMinor": 500}],
    });
    for (k, v) in overrides.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.create_event(body).await
}

/// Holds for `account` and returns the hold's id.
async fn hold(app: &TestApp, account: &str, event_id: &str, body: Value) -> String {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    let answer = app.hold(account, event_id, &key, body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.json());
    answer.json()["holdId"].as_str().unwrap().to_owned()
}

/// Buys and waits for the capture and the tickets (an exchange or a transfer needs both):
/// (order id, tickets).
async fn buy(app: &TestApp, account: &str, event_id: &str, body: Value) -> (String, Vec<Value>) {
    let hold_id = hold(app, account, event_id, body).await;
    let paid = app
        .post(
            &token(account),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some(&format!("pay-{hold_id}")),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let mut order = Value::Null;
    for _ in 0..200 {
        order = app
            .get(&token(account), &format!("/v1/orders/{order_id}"))
            .await
            .json();
        let n = order["quantity"]
            .as_u64()
            .or_else(|| order["seats"].as_array().map(|s| s.len() as u64))
            .unwrap_or(0);
        if order["paymentStatus"] == "CAPTURED"
            && order["tickets"]
                .as_array()
                .is_some_and(|t| n > 0 && t.len() as u64 == n)
        {
            return (order_id, order["tickets"].as_array().unwrap().clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("order {order_id} never got its capture and its tickets: {order}");
}

/// One number of this store, asked in each backend's words.
async fn number(app: &TestApp, pg_sql: &str, sqlite_sql: &str, event_id: &str) -> i64 {
    if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(pg_sql.to_owned()))
            .bind(event_id)
            .fetch_one(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sqlite_sql.to_owned()))
            .bind(event_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    }
}

/// The payloads of the event's outbox messages of `topic`.
async fn outbox_payloads(app: &TestApp, event_id: &str, topic: &str) -> Vec<Value> {
    let texts: Vec<String> = if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar(
            "SELECT payload::text FROM outbox WHERE event_id = $1 AND topic = $2 ORDER BY id",
        )
        .bind(event_id)
        .bind(topic)
        .fetch_all(pg.pool())
        .await
        .unwrap()
    } else {
        sqlx::query_scalar(
            "SELECT payload FROM outbox WHERE event_id = ?1 AND topic = ?2 ORDER BY id",
        )
        .bind(event_id)
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

/// RFC 4180: records of fields, quoted fields may hold commas, doubled quotes and line breaks;
/// every record ends with CRLF.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' => {
                assert_eq!(chars.next(), Some('\n'), "a record ends with CRLF");
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            '\n' => panic!("a bare LF ends a record: {text:?}"),
            _ => field.push(c),
        }
    }
    assert!(
        field.is_empty() && record.is_empty(),
        "the last record ends with CRLF: {text:?}"
    );
    records
}

fn line<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no line {id} in {report}"))
}

/// The report and the event as its read API shows it (counts by the store's clock).
async fn report_and_event(app: &TestApp, event_id: &str) -> (Value, Value) {
    let report = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/report"))
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.json());
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await;
    (report.json(), event.json())
}

/// Every figure of the report against the event's read API and this test's own queries.
async fn check_against_the_store(app: &TestApp, event_id: &str, report: &Value, event: &Value) {
    let as_of = report["asOf"].as_str().unwrap();
    for section in event["sections"].as_array().unwrap() {
        let name = section["name"].as_str().unwrap();
        let line = line(report, name);
        assert_eq!(line["kind"], "section");
        let capacity = section["rows"].as_i64().unwrap() * section["seatsPerRow"].as_i64().unwrap();
        assert_eq!(line["capacity"], capacity, "{name}");
        assert_eq!(line["heldNow"], section["held"], "{name}");
        assert_eq!(line["sold"], section["sold"], "{name}");
        assert_eq!(line["comps"], 0);
        let sold_value = number(
            app,
            &format!(
                "SELECT coalesce(sum(price_minor), 0)::bigint FROM seat
                  WHERE event_id = $1 AND section = '{name}' AND status = 'SOLD'"
            ),
            &format!(
                "SELECT coalesce(sum(price_minor), 0) FROM seat
                  WHERE event_id = ?1 AND section = '{name}' AND status = 'SOLD'"
            ),
            event_id,
        )
        .await;
        assert_eq!(line["revenueMinor"], sold_value, "{name}");
        let checked_in = number(
            app,
            &format!(
                "SELECT count(*) FROM ticket t JOIN seat s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
                  WHERE t.event_id = $1 AND s.section = '{name}' AND t.status = 'CHECKED_IN'"
            ),
            &format!(
                "SELECT count(*) FROM ticket t JOIN seat s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
                  WHERE t.event_id = ?1 AND s.section = '{name}' AND t.status = 'CHECKED_IN'"
            ),
            event_id,
        )
        .await;
        assert_eq!(line["checkedIn"], checked_in, "{name}");
        let held_now = number(
            app,
            &format!(
                "SELECT count(*) FROM seat WHERE event_id = $1 AND section = '{name}'
                    AND status = 'HELD' AND hold_expires_at > '{as_of}'::timestamptz"
            ),
            &format!(
                "SELECT count(*) FROM seat WHERE event_id = ?1 AND section = '{name}'
                    AND status = 'HELD' AND hold_expires_at > unixepoch('{as_of}', 'subsec') * 1000"
            ),
            event_id,
        )
        .await;
        assert_eq!(line["heldNow"], held_now, "{name}");
    }
    for tier in event["tiers"].as_array().unwrap() {
        let tier_id = tier["tierId"].as_str().unwrap();
        let line = line(report, tier_id);
        assert_eq!(line["kind"], "tier");
        assert_eq!(line["name"], tier["name"]);
        assert_eq!(line["capacity"], tier["capacity"]);
        assert_eq!(line["heldNow"], tier["held"]);
        assert_eq!(line["sold"], tier["sold"]);
        assert_eq!(
            line["revenueMinor"],
            tier["sold"].as_i64().unwrap() * tier["priceMinor"].as_i64().unwrap()
        );
        let checked_in = number(
            app,
            &format!(
                "SELECT count(*) FROM ticket WHERE event_id = $1 AND tier_id = '{tier_id}' AND status = 'CHECKED_IN'"
            ),
            &format!(
                "SELECT count(*) FROM ticket WHERE event_id = ?1 AND tier_id = '{tier_id}' AND status = 'CHECKED_IN'"
            ),
            event_id,
        )
        .await;
        assert_eq!(line["checkedIn"], checked_in);
    }
    // The totals add the lines up; the refunds due are the outbox's `refund.due` messages.
    let lines = report["lines"].as_array().unwrap();
    for figure in [
        "capacity",
        "heldNow",
        "sold",
        "comps",
        "checkedIn",
        "revenueMinor",
        "refundsDueMinor",
    ] {
        let sum: i64 = lines.iter().map(|l| l[figure].as_i64().unwrap()).sum();
        assert_eq!(report["totals"][figure], sum, "{figure}");
    }
    let refunds: i64 = outbox_payloads(app, event_id, "refund.due")
        .await
        .iter()
        .map(|p| p["amountMinor"].as_i64().unwrap())
        .sum();
    assert_eq!(report["totals"]["refundsDueMinor"], refunds);
    let charged = number(
        app,
        "SELECT coalesce(sum(p.amount_minor), 0)::bigint FROM orders o
           JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.event_id = $1 AND o.status = 'CONFIRMED'",
        "SELECT coalesce(sum(p.amount_minor), 0) FROM orders o
           JOIN payment_operation p ON p.order_id = o.order_id
          WHERE o.event_id = ?1 AND o.status = 'CONFIRMED'",
        event_id,
    )
    .await;
    assert_eq!(report["totals"]["chargedMinor"], charged);
    let confirmed = number(
        app,
        "SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'CONFIRMED'",
        "SELECT count(*) FROM orders WHERE event_id = ?1 AND status = 'CONFIRMED'",
        event_id,
    )
    .await;
    assert_eq!(report["totals"]["ordersConfirmed"], confirmed);
}

/// The CSV download parses back to the JSON report's numbers.
async fn check_the_csv(app: &TestApp, event_id: &str, report: &Value) {
    let csv = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report.csv"),
        )
        .await;
    assert_eq!(csv.status, StatusCode::OK);
    assert!(
        csv.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv"),
        "{:?}",
        csv.headers
    );
    let disposition = csv.headers["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"report-")
            && disposition.ends_with(".csv\""),
        "{disposition}"
    );
    let records = parse_csv(std::str::from_utf8(&csv.bytes).unwrap());
    let header = &records[0];
    assert_eq!(
        header,
        &[
            "kind",
            "id",
            "name",
            "capacity",
            "heldNow",
            "sold",
            "comps",
            "checkedIn",
            "revenueMinor",
            "refundsDueMinor",
            "currency"
        ]
    );
    let lines = report["lines"].as_array().unwrap();
    assert_eq!(records.len(), 1 + lines.len() + 1, "header, lines, total");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (record, line) in records[1..].iter().zip(lines) {
        assert_eq!(record[column("kind")], line["kind"].as_str().unwrap());
        assert_eq!(record[column("id")], line["id"].as_str().unwrap());
        assert_eq!(record[column("name")], line["name"].as_str().unwrap());
        for figure in &header[3..10] {
            let parsed: i64 = record[column(figure)].parse().unwrap();
            assert_eq!(line[figure.as_str()], parsed, "{figure} of {}", line["id"]);
        }
        assert_eq!(record[column("currency")], "EUR");
    }
    let total = records.last().unwrap();
    assert_eq!(total[column("kind")], "total");
    for figure in &header[3..10] {
        let parsed: i64 = total[column(figure)].parse().unwrap();
        assert_eq!(report["totals"][figure.as_str()], parsed, "total {figure}");
    }
    // The tier's name came back whole, comma and quotes included.
    assert!(
        records
            .iter()
            .any(|r| r[column("name")] == TIER_NAME && r[column("id")] == "GA")
    );
}

async fn the_report_matches_the_store(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = two_section_event(&app, json!({})).await;

    // Nothing sold yet: capacity only.
    let (report, event) = report_and_event(&app, &event_id).await;
    assert_eq!(report["totals"]["capacity"], 18);
    assert_eq!(report["totals"]["sold"], 0);
    assert_eq!(report["currency"], "EUR");
    check_against_the_store(&app, &event_id, &report, &event).await;

    // Sold: two seats of A, one of B, two units of the tier; held: one seat, one unit; one
    // hold released (not held any more).
    let (ann_order, ann_tickets) = buy(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    buy(&app, "bob", &event_id, json!({"seatIds": ["B-1-1"]})).await;
    buy(
        &app,
        "cat",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    hold(&app, "dan", &event_id, json!({"seatIds": ["A-1-3"]})).await;
    hold(
        &app,
        "eve",
        &event_id,
        json!({"tierId": "GA", "quantity": 1}),
    )
    .await;
    let released = hold(&app, "fay", &event_id, json!({"seatIds": ["B-1-3"]})).await;
    let gone = app
        .delete(&token("fay"), &format!("/v1/holds/{released}"))
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.json());

    // One ticket checked in; the other exchanged to a cheaper seat of B (400 due back).
    let kept = ann_tickets.iter().find(|t| t["seatId"] == "A-1-2").unwrap();
    let door = app
        .post(
            &app.admin,
            "/v1/admin/checkin",
            None,
            &json!({"code": kept["code"]}),
        )
        .await;
    assert_eq!(door.status, StatusCode::OK, "{}", door.json());
    let exchanged = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{ann_order}/exchanges"),
            Some("x1"),
            &json!({"fromSeatIds": ["A-1-1"], "toSeatIds": ["B-1-2"]}),
        )
        .await;
    assert_eq!(
        exchanged.status,
        StatusCode::CREATED,
        "{}",
        exchanged.json()
    );
    assert_eq!(exchanged.json()["status"], "COMPLETED");
    assert_eq!(exchanged.json()["amountDueMinor"], -400);

    let (report, event) = report_and_event(&app, &event_id).await;
    check_against_the_store(&app, &event_id, &report, &event).await;
    check_the_csv(&app, &event_id, &report).await;
    // What the story did, figure by figure.
    let a = line(&report, "A");
    assert_eq!(
        (
            a["heldNow"].as_i64(),
            a["sold"].as_i64(),
            a["checkedIn"].as_i64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(a["revenueMinor"], 1000);
    assert_eq!(
        a["refundsDueMinor"], 400,
        "the refund is where its ticket was"
    );
    let b = line(&report, "B");
    assert_eq!(
        (
            b["heldNow"].as_i64(),
            b["sold"].as_i64(),
            b["revenueMinor"].as_i64()
        ),
        (Some(0), Some(2), Some(1200))
    );
    assert_eq!(b["refundsDueMinor"], 0);
    let ga = line(&report, "GA");
    assert_eq!(
        (
            ga["heldNow"].as_i64(),
            ga["sold"].as_i64(),
            ga["revenueMinor"].as_i64()
        ),
        (Some(1), Some(2), Some(1000))
    );
    // Charged: 2000 + 600 + 1000, the exchange's order nothing; less the refund due, the
    // revenue.
    assert_eq!(report["totals"]["chargedMinor"], 3600);
    assert_eq!(report["totals"]["revenueMinor"], 3200);
    assert_eq!(report["totals"]["ordersConfirmed"], 4);

    // Past the holds' deadlines by the store's clock, nothing is held, though no sweeper
    // has ended the holds.
    app.db.advance_clock(601_000).await;
    let (report, event) = report_and_event(&app, &event_id).await;
    assert_eq!(report["totals"]["heldNow"], 0);
    check_against_the_store(&app, &event_id, &report, &event).await;
    check_the_csv(&app, &event_id, &report).await;
    app.finish().await;
}

/// Starts the checkout of a hold with the 3-D Secure card (left waiting for the fan) and
/// returns its payment operation.
async fn checkout_waiting(
    app: &TestApp,
    account: &str,
    event_id: &str,
    body: Value,
) -> boxoffice_store::checkout::PaymentOperation {
    let hold_id = hold(app, account, event_id, body).await;
    let started = app
        .post(
            &token(account),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some(&format!("pay-{hold_id}")),
            &json!({"paymentMethodToken": "pm_card_threeDSecure2Required"}),
        )
        .await
        .json();
    assert_eq!(started["paymentStatus"], "REQUIRES_ACTION", "{started}");
    let order_id = started["orderId"].as_str().unwrap();
    let operation_id: String = if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar("SELECT operation_id FROM payment_operation WHERE order_id = $1")
            .bind(order_id)
            .fetch_one(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_scalar("SELECT operation_id FROM payment_operation WHERE order_id = ?1")
            .bind(order_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    };
    app.db
        .store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .expect("the order's payment")
}

/// Payments captured after their holds lapsed (orders cancelled, nothing sold): each refund
/// due counts in the sections or the tier of the order's seats, one spanning two sections
/// split by their prices, and the totals are the outbox's `refund.due` messages.
async fn a_late_capture_is_refunded_where_its_seats_were(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id =
        two_section_event(&app, json!({"holdTtlSeconds": 1, "paymentGraceSeconds": 1})).await;
    let seats = checkout_waiting(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "B-1-1"]}),
    )
    .await;
    let units = checkout_waiting(
        &app,
        "bob",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    // Past the holds' deadlines and their grace by the store's clock, then the captures.
    app.db.advance_clock(2_500).await;
    for operation in [&seats, &units] {
        let verdict = boxoffice_store::checkout::ProviderVerdict::Captured {
            provider_ref: operation.provider_ref.clone().unwrap_or_default(),
        };
        let settled = app
            .db
            .store
            .settle_payment(&operation.operation_id, &verdict, None, None)
            .await
            .unwrap()
            .expect("the operation exists");
        assert!(settled.changed);
    }
    let refunds = outbox_payloads(&app, &event_id, "refund.due").await;
    assert_eq!(refunds.len(), 2, "{refunds:?}");

    let (report, event) = report_and_event(&app, &event_id).await;
    check_against_the_store(&app, &event_id, &report, &event).await;
    check_the_csv(&app, &event_id, &report).await;
    assert_eq!(report["totals"]["sold"], 0);
    assert_eq!(report["totals"]["chargedMinor"], 0, "no order is confirmed");
    assert_eq!(seats.amount_minor, 1600);
    assert_eq!(line(&report, "A")["refundsDueMinor"], 1000);
    assert_eq!(line(&report, "B")["refundsDueMinor"], 600);
    assert_eq!(line(&report, "GA")["refundsDueMinor"], units.amount_minor);
    assert_eq!(
        report["totals"]["refundsDueMinor"],
        1600 + units.amount_minor
    );
    app.finish().await;
}

async fn the_timeline_matches_the_orders(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = two_section_event(&app, json!({})).await;
    let (ann_order, _) = buy(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    // A minute and a bit later by the store's clock: the next sales fall in a later bucket.
    app.db.advance_clock(61_000).await;
    let (bob_order, bob_tickets) = buy(
        &app,
        "bob",
        &event_id,
        json!({"seatIds": ["B-1-1", "B-1-2"]}),
    )
    .await;
    buy(
        &app,
        "cat",
        &event_id,
        json!({"tierId": "GA", "quantity": 3}),
    )
    .await;
    // A transfer's order is not a sale.
    let offered = app
        .post(
            &token("bob"),
            &format!("/v1/orders/{bob_order}/transfers"),
            Some("give-1"),
            &json!({"ticketIds": [bob_tickets[0]["ticketId"]], "toAccountId": "dee"}),
        )
        .await;
    assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let accepted = app
        .post(
            &token("dee"),
            &format!("/v1/transfers/{transfer_id}/accept"),
            Some("take-1"),
            &json!({}),
        )
        .await;
    assert_eq!(accepted.json()["status"], "ACCEPTED", "{}", accepted.json());
    // An exchange's order is not a sale.
    let exchanged = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{ann_order}/exchanges"),
            Some("x1"),
            &json!({"fromSeatIds": ["A-1-1"], "toSeatIds": ["A-1-2"]}),
        )
        .await;
    assert_eq!(
        exchanged.json()["status"],
        "COMPLETED",
        "{}",
        exchanged.json()
    );

    let answer = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report/timeline?bucketSeconds=60"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    let timeline = answer.json();
    assert_eq!(timeline["bucketSeconds"], 60);
    assert_eq!(timeline["truncated"], false);
    assert!(timeline["queue"].is_null(), "no waiting room");
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(timeline["from"], event["onSaleAt"]);

    // Each sale in the bucket its confirmation time puts it in, by this test's own reading
    // of the orders.
    let from = time::OffsetDateTime::parse(
        timeline["from"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let from_ms = (from.unix_timestamp_nanos() / 1_000_000) as i64;
    let sales: Vec<(i64, i64, i64)> = if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_as(
            "SELECT floor(extract(epoch FROM o.updated_at) * 1000)::bigint, o.quantity::bigint, p.amount_minor
               FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
              WHERE o.event_id = $1 AND o.status = 'CONFIRMED' AND p.provider NOT IN ('exchange', 'transfer')",
        )
        .bind(&event_id)
        .fetch_all(pg.pool())
        .await
        .unwrap()
    } else {
        sqlx::query_as(
            "SELECT o.updated_at, o.quantity, p.amount_minor
               FROM orders o JOIN payment_operation p ON p.order_id = o.order_id
              WHERE o.event_id = ?1 AND o.status = 'CONFIRMED' AND p.provider NOT IN ('exchange', 'transfer')",
        )
        .bind(&event_id)
        .fetch_all(app.db.sqlite.as_ref().unwrap().pool())
        .await
        .unwrap()
    };
    assert_eq!(sales.len(), 3, "{sales:?}");
    let buckets = timeline["buckets"].as_array().unwrap();
    assert!(buckets.len() >= 2, "{timeline}");
    let mut expected = vec![(0i64, 0i64, 0i64); buckets.len()];
    for (at_ms, quantity, amount) in &sales {
        let index = usize::try_from((at_ms - from_ms) / 60_000).unwrap();
        expected[index].0 += 1;
        expected[index].1 += quantity;
        expected[index].2 += amount;
    }
    let got: Vec<(i64, i64, i64)> = buckets
        .iter()
        .map(|b| {
            (
                b["orders"].as_i64().unwrap(),
                b["seats"].as_i64().unwrap(),
                b["chargedMinor"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got[0], (1, 1, 1000), "ann's sale, in the first minute");
    assert_eq!(
        timeline["totals"],
        json!({"orders": 3, "seats": 6, "chargedMinor": 1000 + 1200 + 1500})
    );

    // The CSV: one row per bucket and the totals.
    let csv = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report/timeline.csv?bucketSeconds=60"),
        )
        .await;
    assert_eq!(csv.status, StatusCode::OK);
    assert!(
        csv.headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"timeline-")
    );
    let records = parse_csv(std::str::from_utf8(&csv.bytes).unwrap());
    assert_eq!(
        records[0],
        ["start", "orders", "seats", "chargedMinor", "currency"]
    );
    assert_eq!(records.len(), 1 + buckets.len() + 1);
    for (record, bucket) in records[1..].iter().zip(buckets) {
        assert_eq!(record[0], bucket["start"].as_str().unwrap());
        let numbers: Vec<i64> = record[1..4].iter().map(|n| n.parse().unwrap()).collect();
        assert_eq!(
            numbers,
            [
                bucket["orders"].as_i64().unwrap(),
                bucket["seats"].as_i64().unwrap(),
                bucket["chargedMinor"].as_i64().unwrap()
            ]
        );
    }
    assert_eq!(records.last().unwrap(), &["total", "3", "6", "3700", "EUR"]);

    // One bucket of a day holds every sale; one-second buckets stop at 1,440 and say so.
    let daily = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report/timeline?bucketSeconds=86400"),
        )
        .await
        .json();
    assert_eq!(daily["buckets"].as_array().unwrap().len(), 1);
    assert_eq!(daily["buckets"][0]["orders"], 3);
    app.db.advance_clock(3_600_000).await;
    let fine = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report/timeline?bucketSeconds=1"),
        )
        .await
        .json();
    assert_eq!(fine["buckets"].as_array().unwrap().len(), 1_440);
    assert_eq!(fine["truncated"], true);
    assert_eq!(fine["totals"]["orders"], 3, "the totals count every sale");
    app.finish().await;
}

async fn the_waiting_room_totals_are_the_queue_views(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = two_section_event(&app, json!({"waitingRoom": {"enabled": true}})).await;
    for account in ["ann", "bob"] {
        let joined = app
            .post(
                &token(account),
                &format!("/v1/events/{event_id}/queue"),
                None,
                &json!({}),
            )
            .await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.json());
    }
    let timeline = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report/timeline"),
        )
        .await;
    assert_eq!(timeline.status, StatusCode::OK, "{}", timeline.json());
    let timeline = timeline.json();
    assert_eq!(timeline["bucketSeconds"], 60, "the default bucket");
    let queue = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/queue"))
        .await
        .json();
    let figures = &timeline["queue"];
    assert_eq!(figures["joined"], queue["joined"]);
    assert_eq!(figures["joined"], 2);
    assert_eq!(figures["waiting"], queue["waiting"]);
    assert_eq!(figures["admitted"], queue["admitted"]);
    assert_eq!(figures["activeShoppers"], queue["activeShoppers"]);
    // Nobody admitted (the release does not run here): no conversion to speak of.
    assert_eq!(figures["admitted"], 0);
    assert!(figures["conversion"].is_null(), "{figures}");
    app.finish().await;
}

async fn bad_report_requests_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = two_section_event(&app, json!({})).await;
    let report = format!("/v1/admin/events/{event_id}/report");
    let paths = [
        report.clone(),
        format!("{report}.csv"),
        format!("{report}/timeline"),
        format!("{report}/timeline.csv"),
    ];
    for path in &paths {
        // A fan is not an organiser; nobody is nobody.
        let fan = app.get(&token("ann"), path).await;
        assert_eq!(
            (fan.status, fan.code().as_str()),
            (StatusCode::FORBIDDEN, "FORBIDDEN"),
            "{path}"
        );
        let anonymous = app.send(app.http.get(format!("{}{path}", app.base))).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
        // An unknown event: 404 as problem JSON.
        let unknown = path.replace(&event_id, "no-such-event");
        let missing = app.get(&app.admin, &unknown).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{unknown}");
        assert_eq!(missing.code(), "NOT_FOUND");
        assert_eq!(missing.headers["content-type"], "application/problem+json");
    }
    for path in &paths[2..] {
        for bad in ["0", "86401", "-1", "x", "1.5", ""] {
            let asked = format!("{path}?bucketSeconds={bad}");
            let refused = app.get(&app.admin, &asked).await;
            assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{asked}");
            assert_eq!(refused.code(), "VALIDATION");
        }
        let unknown = app.get(&app.admin, &format!("{path}?from=0")).await;
        assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    }
    app.finish().await;
}

/// OWASP's CSV injection: an organiser names tiers so that a spreadsheet opening the download
/// would run them as formulas. Each such name comes back with a `'` in front (text in a
/// spreadsheet), the JSON report keeps it as given, and the numbers stay numbers.
async fn formula_names_download_as_text(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let names = [
        ("EQ", "=HYPERLINK(\"http://evil.example\",\"Refund\")"),
        ("PLUS", "+1+cmd|' /C calc'!A0"),
        ("MINUS", "-2+3"),
        ("AT", "@SUM(A1:A9)"),
        ("TAB", "\tFloor"),
        ("CR", "\rFloor"),
        ("PLAIN", "Floor = standing"),
    ];
    let tiers: Vec<Value> = names
        .iter()
        .map(|(id, name)| json!({"tierId": id, "name": name, "capacity": 5, "priceMinor": 500}))
        .collect();
    let event_id = app
        .create_event(json!({"sections": [], "tiers": tiers}))
        .await;
    let report = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/report"))
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.json());
    let csv = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report.csv"),
        )
        .await;
    assert_eq!(csv.status, StatusCode::OK);
    let records = parse_csv(std::str::from_utf8(&csv.bytes).unwrap());
    for (id, name) in names {
        assert_eq!(
            line(&report.json(), id)["name"],
            name,
            "the JSON keeps {id}"
        );
        let record = records
            .iter()
            .find(|r| r[1] == id)
            .unwrap_or_else(|| panic!("no row {id} in {records:?}"));
        let expected = if id == "PLAIN" {
            name.to_owned()
        } else {
            format!("'{name}")
        };
        assert_eq!(record[2], expected, "{id}");
        assert_eq!(record[3], "5", "{id}: the capacity is a number");
    }
    app.finish().await;
}
