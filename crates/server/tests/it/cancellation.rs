//! Cancelling an event over HTTP on both backends (issue 37, item 4): the sale stops at
//! once (holds refused `EVENT_CANCELLED`, live holds ended, every ticket void and revoked at
//! the door), every paid order is refunded exactly once by the job, a fan's earlier partial
//! refund is not paid twice, a refund the provider refuses is counted `failed`, and the
//! requests' idempotency. Every story ends with every invariant checked.

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    a_cancelled_event_stops_selling_and_refunds_every_buyer_once,
    a_cancellation_refunds_what_is_left_and_shows_what_failed,
    an_exchange_out_of_a_cancelled_event_ends_and_one_into_it_is_refused,
    a_cancellation_after_a_transfer_refunds_the_giver_who_paid,
);

async fn cancel(
    app: &TestApp,
    who: &str,
    event_id: &str,
    key: &str,
    body: Value,
) -> common::Answer {
    app.post(
        who,
        &format!("/v1/admin/events/{event_id}/cancel"),
        Some(key),
        &body,
    )
    .await
}

/// Polls the cancellation until `done` holds (bounded: 30 s).
async fn cancellation_until(app: &TestApp, event_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        let read = app
            .get(
                &app.admin,
                &format!("/v1/admin/events/{event_id}/cancellation"),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.json());
        last = read.json();
        if done(&last) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the cancellation of {event_id} never got there: {last}");
}

async fn a_cancelled_event_stops_selling_and_refunds_every_buyer_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let other = app.create_event(json!({})).await;
    let (ann_order, ann_tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    let (bob_order, _) =
        common::buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-2-1"]})).await;
    let (dan_order, _) = common::buy_captured(
        &app,
        "dan",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    let (other_order, _) =
        common::buy_captured(&app, "eve", &other, json!({"seatIds": ["A-1-1"]})).await;
    let live = app
        .hold("cat", &event_id, "cat-live", json!({"seatIds": ["A-3-1"]}))
        .await;
    assert_eq!(live.status, StatusCode::CREATED, "{}", live.json());
    let live_hold = live.json()["holdId"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get(&token("ann"), &format!("/v1/events/{event_id}"))
            .await
            .json()["status"],
        "ACTIVE"
    );

    // Only an admin cancels, an event that exists, with a reason.
    let fan = cancel(
        &app,
        &token("ann"),
        &event_id,
        "c-fan",
        json!({"reason": "x"}),
    )
    .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN, "{}", fan.json());
    let unknown = cancel(
        &app,
        &app.admin,
        "no-such-event",
        "c-0",
        json!({"reason": "x"}),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.json());
    for (key, body) in [
        ("c-bad-1", json!({"reason": "  "})),
        ("c-bad-2", json!({})),
        ("c-bad-3", json!({"reason": "a\u{7}b"})),
        ("c-bad-4", json!({"reason": "x".repeat(501)})),
        ("c-bad-5", json!({"reason": "x", "extra": 1})),
    ] {
        let bad = cancel(&app, &app.admin, &event_id, key, body).await;
        assert_eq!(
            bad.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{key}: {}",
            bad.json()
        );
    }
    let not_yet = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/cancellation"),
        )
        .await;
    assert_eq!(not_yet.status, StatusCode::NOT_FOUND, "{}", not_yet.json());

    let body = json!({"reason": "The venue flooded"});
    let first = cancel(&app, &app.admin, &event_id, "c-1", body.clone()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json());
    let c = first.json();
    assert_eq!(c["eventId"], json!(event_id));
    assert_eq!(c["reason"], "The venue flooded");
    assert_eq!(c["orders"], 3, "{c}");
    assert!(
        c["status"] == "CANCELLING" || c["status"] == "CANCELLED",
        "{c}"
    );

    // From the first answer on: the event reads CANCELLED, nothing sells, the live hold has
    // ended, every ticket is void and revoked at the door.
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(event["status"], "CANCELLED", "{event}");
    let refused = app
        .hold("zed", &event_id, "zed-1", json!({"seatIds": ["A-9-9"]}))
        .await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (StatusCode::CONFLICT, "EVENT_CANCELLED"),
        "{}",
        refused.json()
    );
    let ended = app
        .get(&token("cat"), &format!("/v1/holds/{live_hold}"))
        .await
        .json();
    assert_eq!(ended["status"], "RELEASED", "{ended}");
    let pay = app
        .post(
            &token("cat"),
            &format!("/v1/holds/{live_hold}/checkout"),
            Some("cat-pay"),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(pay.status, StatusCode::CONFLICT, "{}", pay.json());
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{ann_order}"))
        .await
        .json();
    for ticket in order["tickets"].as_array().unwrap() {
        assert_eq!(ticket["status"], "VOIDED", "{order}");
        assert_eq!(ticket["voidReason"], "EVENT_CANCELLED", "{order}");
    }
    let door = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/door"))
        .await
        .json();
    let revoked = door["revokedTicketIds"].as_array().unwrap();
    for ticket in &ann_tickets {
        assert!(revoked.contains(&ticket["ticketId"]), "{door}");
    }
    let at_door = app.check_in(&ann_tickets[0]).await;
    assert_eq!(
        at_door.status,
        StatusCode::BAD_REQUEST,
        "{}",
        at_door.json()
    );

    // A retry is a replay; the key with another body is refused; another key answers the
    // cancellation as it stands.
    let again = cancel(&app, &app.admin, &event_id, "c-1", body.clone()).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    let reused = cancel(
        &app,
        &app.admin,
        &event_id,
        "c-1",
        json!({"reason": "other"}),
    )
    .await;
    assert_eq!(reused.code(), "IDEMPOTENCY_KEY_REUSED", "{}", reused.json());
    let twice = cancel(
        &app,
        &app.admin,
        &event_id,
        "c-2",
        json!({"reason": "again"}),
    )
    .await;
    assert_eq!(twice.status, StatusCode::ACCEPTED, "{}", twice.json());
    assert_eq!(twice.json()["reason"], "The venue flooded");

    // The job refunds every paid order, in full, once; the other event is untouched.
    let done = cancellation_until(&app, &event_id, |c| c["status"] == "CANCELLED").await;
    assert_eq!(done["orders"], 3, "{done}");
    assert_eq!(done["refunded"], 3, "{done}");
    assert_eq!(done["failed"], 0, "{done}");
    assert_eq!(done["amountRefundedMinor"], 2_000 + 1_000 + 1_000, "{done}");
    assert!(done["finishedAt"].is_string(), "{done}");
    for (account, order_id, amount) in [
        ("ann", &ann_order, 2_000),
        ("bob", &bob_order, 1_000),
        ("dan", &dan_order, 1_000),
    ] {
        let order =
            common::order_until(&app, account, order_id, |o| o["orderStatus"] == "REFUNDED").await;
        let refunds = order["refunds"].as_array().unwrap();
        assert_eq!(refunds.len(), 1, "{order}");
        assert_eq!(refunds[0]["reason"], "EVENT_CANCELLED", "{order}");
        assert_eq!(refunds[0]["status"], "SUCCEEDED", "{order}");
        assert_eq!(refunds[0]["amountMinor"], amount, "{order}");
        assert_eq!(order["refundedMinor"], amount, "{order}");
    }
    let untouched = app
        .get(&token("eve"), &format!("/v1/orders/{other_order}"))
        .await
        .json();
    assert_eq!(untouched["orderStatus"], "CONFIRMED", "{untouched}");
    assert!(app.holdable("zed", &other, "A-5-5").await);
    let cancelled = common::outbox_payloads(&app, "event.cancelled").await;
    let statuses: Vec<&Value> = cancelled.iter().map(|c| &c["status"]).collect();
    assert_eq!(
        statuses,
        [&json!("CANCELLING"), &json!("CANCELLED")],
        "{cancelled:?}"
    );
    assert_eq!(cancelled[1]["refunded"], 3);
    let succeeded = common::outbox_payloads(&app, "refund.succeeded").await;
    assert_eq!(succeeded.len(), 3, "{succeeded:?}");
    app.finish().await;
}

async fn a_cancellation_refunds_what_is_left_and_shows_what_failed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({"refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 0}}))
        .await;
    let (ann_order, ann_tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3"]}),
    )
    .await;
    // ann gave one ticket back before the cancellation: 1,000 of her 3,000 went back already.
    let one = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{ann_order}/refunds"),
            Some("ann-one"),
            &json!({"ticketIds": [ann_tickets[0]["ticketId"]]}),
        )
        .await;
    assert_eq!(one.status, StatusCode::ACCEPTED, "{}", one.json());
    common::order_until(&app, "ann", &ann_order, |o| o["refundedMinor"] == 1_000).await;
    let (bob_order, _) =
        common::buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-2-1"]})).await;

    // The provider refuses refunds for a while: bob's is refused for good (FAILED).
    app.sim.sim.set_refund_fails(true);
    let first = cancel(
        &app,
        &app.admin,
        &event_id,
        "c-1",
        json!({"reason": "Storm"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json());
    let done = cancellation_until(&app, &event_id, |c| c["status"] == "CANCELLED").await;
    app.sim.sim.set_refund_fails(false);
    assert_eq!(done["orders"], 2, "{done}");
    assert_eq!(done["failed"], 2, "{done}");
    assert_eq!(done["refunded"], 0, "{done}");
    assert_eq!(done["amountRefundedMinor"], 0, "{done}");
    let ann = app
        .get(&token("ann"), &format!("/v1/orders/{ann_order}"))
        .await
        .json();
    let by_cancel: Vec<&Value> = ann["refunds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "EVENT_CANCELLED")
        .collect();
    assert_eq!(by_cancel.len(), 1, "{ann}");
    assert_eq!(by_cancel[0]["amountMinor"], 2_000, "what was left: {ann}");
    assert_eq!(by_cancel[0]["status"], "FAILED", "{ann}");
    assert!(by_cancel[0]["failure"].is_string(), "{ann}");
    let bob = app
        .get(&token("bob"), &format!("/v1/orders/{bob_order}"))
        .await
        .json();
    assert_eq!(bob["refunds"][0]["status"], "FAILED", "{bob}");
    assert_eq!(
        common::outbox_payloads(&app, "refund.failed").await.len(),
        2
    );
    app.finish().await;
}

async fn an_exchange_out_of_a_cancelled_event_ends_and_one_into_it_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let target = app
        .create_event(json!({
            "sections": [{"name": "B", "rows": 2, "seatsPerRow": 5, "priceMinor": 3000}],
        }))
        .await;
    let (order_id, _) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    // ann starts an exchange to a dearer seat of the other event, then the event is cancelled
    // before she pays the difference.
    let up = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/exchanges"),
            Some("up"),
            &json!({"fromSeatIds": ["A-1-1"], "toEventId": target, "toSeatIds": ["B-1-1"]}),
        )
        .await;
    assert_eq!(up.json()["status"], "PAYMENT_REQUIRED", "{}", up.json());
    let exchange_id = up.json()["exchangeId"].as_str().unwrap().to_owned();
    let (bob_order, _) =
        common::buy_captured(&app, "bob", &target, json!({"seatIds": ["B-2-1"]})).await;
    let cancelled = cancel(&app, &app.admin, &event_id, "c", json!({"reason": "Rain"})).await;
    assert_eq!(
        cancelled.status,
        StatusCode::ACCEPTED,
        "{}",
        cancelled.json()
    );
    let ended = app
        .get(&token("ann"), &format!("/v1/exchanges/{exchange_id}"))
        .await
        .json();
    assert_eq!(ended["status"], "FAILED", "{ended}");
    // Paying the difference now sells nothing: the new seat stays on sale.
    let paid = app
        .post(
            &token("ann"),
            &format!("/v1/exchanges/{exchange_id}/checkout"),
            Some("pay"),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_ne!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    // ann's order is refunded in full; the seat she wanted is free.
    let done = cancellation_until(&app, &event_id, |c| c["status"] == "CANCELLED").await;
    assert_eq!(done["refunded"], 1, "{done}");
    common::order_until(&app, "ann", &order_id, |o| o["orderStatus"] == "REFUNDED").await;
    assert!(app.holdable("zed", &target, "B-1-1").await);
    // An exchange from the other event into the cancelled one is refused.
    let into = app
        .post(
            &token("bob"),
            &format!("/v1/orders/{bob_order}/exchanges"),
            Some("into"),
            &json!({"fromSeatIds": ["B-2-1"], "toEventId": event_id, "toSeatIds": ["A-3-3"]}),
        )
        .await;
    assert_eq!(
        (into.status, into.code().as_str()),
        (StatusCode::CONFLICT, "EVENT_CANCELLED"),
        "{}",
        into.json()
    );
    app.finish().await;
}

/// A ticket given away, then the event cancelled: the giver, who paid, gets all of it back;
/// the receiver's order took nothing and gets nothing (its ticket is void like the rest).
/// (The invariant check used to count the receiver's order as unpaid money.)
async fn a_cancellation_after_a_transfer_refunds_the_giver_who_paid(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (ann_order, ann_tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-3-1", "A-3-2"]}),
    )
    .await;
    let offered = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{ann_order}/transfers"),
            Some("give"),
            &json!({"ticketIds": [ann_tickets[0]["ticketId"]], "toAccountId": "bob"}),
        )
        .await;
    assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let accepted = app
        .post(
            &token("bob"),
            &format!("/v1/transfers/{transfer_id}/accept"),
            Some("take"),
            &json!({}),
        )
        .await;
    assert_eq!(accepted.json()["status"], "ACCEPTED", "{}", accepted.json());
    let bob_order = accepted.json()["newOrderId"].as_str().unwrap().to_owned();

    let first = cancel(
        &app,
        &app.admin,
        &event_id,
        "c-t",
        json!({"reason": "Flood"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json());
    let done = cancellation_until(&app, &event_id, |c| c["status"] == "CANCELLED").await;
    assert_eq!(done["failed"], 0, "{done}");
    assert_eq!(
        done["amountRefundedMinor"], 2_000,
        "ann paid for both seats: {done}"
    );
    let ann = common::order_until(&app, "ann", &ann_order, |o| o["refundedMinor"] == 2_000).await;
    assert_eq!(ann["refunds"][0]["status"], "SUCCEEDED", "{ann}");
    let bob = app
        .get(&token("bob"), &format!("/v1/orders/{bob_order}"))
        .await
        .json();
    assert_eq!(bob["refunds"], json!([]), "{bob}");
    assert!(
        bob["tickets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "VOIDED"),
        "{bob}"
    );
    app.finish().await;
}
