//! Checkout stories over HTTP with the payment simulator in process, on both backends:
//! happy path to tickets and check-in, decline, 3-D Secure completed by webhook, a lost
//! authorization response settled by the reconciler, replays, and webhook signatures. A few
//! run through the Stripe adapter against localstripe too (a fake Stripe others wrote).

use crate::common;

use boxoffice_store::OneShot as _;
use std::time::Duration;

use crate::common::{Backend, Payments, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    pay_confirm_capture_ticket_checkin,
    decline_frees_the_seats,
    an_unknown_payment_method_cancels_at_once,
    an_unknown_payment_method_cancels_at_once_on_localstripe,
    on_localstripe_a_card_pays_and_a_decline_cancels,
    three_d_secure_completes_by_webhook,
    lost_authorization_response_converges,
    checkout_replay_and_second_key,
    checkout_of_expired_or_foreign_hold,
    webhook_signatures_are_checked,
    grace_protects_then_late_authorization_is_voided,
    duplicated_late_webhooks_apply_once,
    capture_failing_for_good_is_compensated,
    purchase_limit_is_rechecked_at_confirmation,
    late_capture_of_a_cancelled_order_is_refunded,
    check_in_racing_a_compensation,
    captures_racing_on_a_confirmed_order_apply_once,
    tickets_of_several_orders_are_issued_once,
    captures_of_a_round_apply_only_to_confirmed_orders,
    later_verdicts_are_decided_by_the_writer,
    a_verdict_read_before_the_operation_moved_is_the_writers,
    tools_start_checkouts_and_release_on_an_engine,
    a_used_ticket_refuses_its_compensation_alone,
    a_compensation_decided_before_an_exchange_is_refused,
    a_compensation_read_before_its_operation_moved_is_refused_alone,
);

/// The payment operation of an order, read from the store.
async fn operation_of(app: &TestApp, order_id: &str) -> String {
    if let Some(pg) = app.db.pg.as_ref() {
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
    }
}

/// A payment operation's status and last error, read from the store.
async fn operation_state(app: &TestApp, operation_id: &str) -> (String, Option<String>) {
    let sql = "SELECT status, last_error FROM payment_operation WHERE operation_id = ";
    if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_as(sqlx::AssertSqlSafe(format!("{sql}$1")))
            .bind(operation_id)
            .fetch_one(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_as(sqlx::AssertSqlSafe(format!("{sql}?1")))
            .bind(operation_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    }
}

async fn outbox_payloads(app: &TestApp, topic: &str) -> Vec<Value> {
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

async fn hold_seats(app: &TestApp, account: &str, event_id: &str, seats: &[&str]) -> String {
    let hold = app
        .hold(
            account,
            event_id,
            &format!("hold-{}", seats.join(",")),
            json!({"seatIds": seats}),
        )
        .await;
    assert_eq!(
        hold.status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&hold.bytes)
    );
    hold.json()["holdId"].as_str().unwrap().to_owned()
}

async fn checkout(
    app: &TestApp,
    account: &str,
    hold_id: &str,
    key: &str,
    card: &str,
) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/holds/{hold_id}/checkout"),
        Some(key),
        &json!({"paymentMethodToken": card}),
    )
    .await
}

/// Polls the order until `done` holds (bounded: 20 s).
async fn order_until(
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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("order {order_id} never reached the expected state: {last}");
}

async fn pay_confirm_capture_ticket_checkin(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-1-1", "A-1-2"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay-1", "pm_card_visa").await;
    assert_eq!(paid.status, StatusCode::CREATED);
    let body = paid.json();
    assert_eq!(body["orderStatus"], "CONFIRMED");
    assert_eq!(body["paymentStatus"], "AUTHORIZED");
    let order_id = body["orderId"].as_str().unwrap().to_owned();

    let order = order_until(&app, "ann", &order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == 2)
    })
    .await;
    assert_eq!(order["orderStatus"], "CONFIRMED");
    assert_eq!(order["totalMinor"], 2000);
    let hold = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    assert_eq!(hold["status"], "CONFIRMED");

    // Codes verify offline with the public key alone.
    let public_pem = app
        .send(app.http.get(format!("{}/v1/tickets/public-key", app.base)))
        .await;
    let verifier = boxoffice_tickets::TicketVerifier::from_public_key_pem(
        &String::from_utf8(public_pem.bytes.clone()).unwrap(),
    )
    .unwrap();
    let mut seats = Vec::new();
    for ticket in order["tickets"].as_array().unwrap() {
        let claims = verifier
            .verify(ticket["code"].as_str().unwrap())
            .expect("code verifies offline");
        assert_eq!(claims.order_id, order_id);
        seats.push(claims.seat_id.unwrap());
    }
    seats.sort();
    assert_eq!(seats, ["A-1-1", "A-1-2"]);

    let ticket_id = order["tickets"][0]["ticketId"].as_str().unwrap();
    let ticket = app
        .get(&token("ann"), &format!("/v1/tickets/{ticket_id}"))
        .await;
    assert_eq!(ticket.json()["status"], "VALID");
    let qr = app
        .get(&token("ann"), &format!("/v1/tickets/{ticket_id}/qr.svg"))
        .await;
    assert_eq!(qr.headers["content-type"], "image/svg+xml");
    assert!(String::from_utf8_lossy(&qr.bytes).contains("<svg"));
    // A client generated from the document maps text and bytes only: it may ask for them,
    // and gets the same bytes.
    let qr_bytes = app
        .send(
            app.http
                .get(format!("{}/v1/tickets/{ticket_id}/qr.svg", app.base))
                .bearer_auth(token("ann"))
                .header("accept", "application/octet-stream"),
        )
        .await;
    assert_eq!(qr_bytes.headers["content-type"], "application/octet-stream");
    assert_eq!(qr_bytes.bytes, qr.bytes);
    assert_eq!(public_pem.headers["content-type"], "application/x-pem-file");
    let public_text = app
        .send(
            app.http
                .get(format!("{}/v1/tickets/public-key", app.base))
                .header("accept", "text/plain"),
        )
        .await;
    assert_eq!(public_text.headers["content-type"], "text/plain");
    assert_eq!(public_text.bytes, public_pem.bytes);
    assert_eq!(
        app.get(&token("eve"), &format!("/v1/tickets/{ticket_id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let code = ticket.json()["code"].clone();
    let first = app
        .post(
            &app.admin,
            "/v1/admin/checkin",
            None,
            &json!({"code": code}),
        )
        .await;
    assert_eq!(first.status, StatusCode::OK);
    let second = app
        .post(
            &app.admin,
            "/v1/admin/checkin",
            None,
            &json!({"code": code}),
        )
        .await;
    assert_eq!(
        (second.status, second.code().as_str()),
        (StatusCode::CONFLICT, "ALREADY_CHECKED_IN")
    );
    let forged = app
        .post(
            &app.admin,
            "/v1/admin/checkin",
            None,
            &json!({"code": format!("{}x", code.as_str().unwrap())}),
        )
        .await;
    assert_eq!(
        (forged.status, forged.code().as_str()),
        (StatusCode::BAD_REQUEST, "INVALID_TICKET")
    );

    let taken = app
        .hold("bob", &event_id, "k", json!({"seatIds": ["A-1-1"]}))
        .await;
    assert_eq!(
        taken.code(),
        "SEATS_UNAVAILABLE",
        "a sold seat is never held again"
    );
    let orders = app.get(&token("ann"), "/v1/orders").await.json();
    assert_eq!(orders["orders"][0]["orderId"], json!(order_id));
    assert_eq!(
        app.get(&token("eve"), &format!("/v1/orders/{order_id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}

async fn decline_frees_the_seats(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-2-1"]).await;
    let declined = checkout(&app, "ann", &hold_id, "pay", "pm_card_chargeDeclined").await;
    assert_eq!(declined.status, StatusCode::CREATED);
    assert_eq!(declined.json()["orderStatus"], "CANCELLED");
    assert_eq!(declined.json()["paymentStatus"], "FAILED");
    assert_eq!(declined.json()["paymentFailureCode"], "generic_decline");
    let retake = app
        .hold("bob", &event_id, "k", json!({"seatIds": ["A-2-1"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CREATED,
        "a declined order gives its seats back"
    );
    let again = checkout(&app, "ann", &hold_id, "pay-2", "pm_card_visa").await;
    assert_eq!(again.code(), "HOLD_EXPIRED", "the declined hold is over");
    app.finish().await;
}

/// A payment method the provider does not know is a 4xx the provider repeats for the same
/// idempotency key forever (Stripe and the simulator: 400 `resource_missing`; localstripe:
/// 404): the order is cancelled in the checkout's own answer (`PAYMENT_FAILED`, the
/// provider's code kept on the operation), its seats are back at once, and nothing is sent
/// again: the provider saw exactly one request, and a reconciler round finds nothing to do.
async fn unknown_payment_method_story(backend: Backend, payments: Payments) {
    let app = TestApp::spawn_counted(backend, payments).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-2-2"]).await;
    let refused = checkout(&app, "ann", &hold_id, "pay", "pm_does_not_exist").await;
    assert_eq!(refused.status, StatusCode::CREATED, "{}", refused.json());
    let order = refused.json();
    assert_eq!(order["orderStatus"], "CANCELLED", "{order}");
    assert_eq!(order["paymentStatus"], "FAILED", "{order}");
    assert_eq!(order["paymentFailureCode"], "resource_missing", "{order}");
    let order_id = order["orderId"].as_str().unwrap();
    let read = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(read["orderStatus"], "CANCELLED", "{read}");
    assert_eq!(read["cancelReason"], "PAYMENT_FAILED", "{read}");
    assert_eq!(read["paymentFailureCode"], "resource_missing", "{read}");
    let retake = app
        .hold("bob", &event_id, "k", json!({"seatIds": ["A-2-2"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CREATED,
        "the seat is back on sale"
    );
    let operation = operation_of(&app, order_id).await;
    let (status, last_error) = operation_state(&app, &operation).await;
    // FAILED is final: the reconciler looks only at operations whose outcome is open.
    assert_eq!(status, "FAILED");
    assert_eq!(
        last_error.as_deref(),
        Some("resource_missing"),
        "the provider's code is kept"
    );
    let calls = app.provider_calls.clone().expect("counted");
    assert_eq!(calls.authorizations_sent(&operation), 1);
    let round = app.state.reconciler.run_once().await.expect("a round");
    assert_eq!(round.looked_at, 0, "nothing left for the reconciler");
    assert_eq!(
        calls.requests().len(),
        1,
        "one authorization, nothing sent since: {:?}",
        calls.requests()
    );
    app.finish().await;
}

async fn an_unknown_payment_method_cancels_at_once(backend: Backend) {
    unknown_payment_method_story(backend, Payments::Simulator).await;
}

async fn an_unknown_payment_method_cancels_at_once_on_localstripe(backend: Backend) {
    unknown_payment_method_story(backend, Payments::LocalStripe).await;
}

/// `serve --payments stripe` against localstripe: `pm_card_visa` authorizes, confirms and is
/// captured by the relay (localstripe's signed webhooks come to the server too); its
/// declining card (a 402 without the PaymentIntent) cancels at once with `card_declined`
/// and gives the seat back.
async fn on_localstripe_a_card_pays_and_a_decline_cancels(backend: Backend) {
    let app = TestApp::spawn_counted(backend, Payments::LocalStripe).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-3-1"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa").await;
    assert_eq!(paid.status, StatusCode::CREATED, "{}", paid.json());
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED");
    assert_eq!(paid.json()["paymentStatus"], "AUTHORIZED");
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order = order_until(&app, "ann", &order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    assert_eq!(order["orderStatus"], "CONFIRMED");
    assert_eq!(order.get("paymentFailureCode"), None, "{order}");

    let hold_id = hold_seats(&app, "bob", &event_id, &["A-3-2"]).await;
    let declined = checkout(&app, "bob", &hold_id, "pay", "pm_card_chargeCustomerFail").await;
    assert_eq!(declined.status, StatusCode::CREATED, "{}", declined.json());
    assert_eq!(declined.json()["orderStatus"], "CANCELLED");
    assert_eq!(declined.json()["paymentStatus"], "FAILED");
    assert_eq!(declined.json()["paymentFailureCode"], "card_declined");
    let order_id = declined.json()["orderId"].as_str().unwrap().to_owned();
    let operation = operation_of(&app, &order_id).await;
    let (status, last_error) = operation_state(&app, &operation).await;
    assert_eq!(status, "FAILED");
    assert_eq!(last_error.as_deref(), Some("card_declined"));
    let retake = app
        .hold("cat", &event_id, "k", json!({"seatIds": ["A-3-2"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CREATED,
        "the declined seat is back"
    );
    app.finish().await;
}

async fn three_d_secure_completes_by_webhook(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold = app
        .hold(
            "ann",
            &event_id,
            "k",
            json!({"tierId": "GA", "quantity": 2}),
        )
        .await
        .json();
    let hold_id = hold["holdId"].as_str().unwrap();
    let started = checkout(&app, "ann", hold_id, "pay", "pm_card_threeDSecure2Required")
        .await
        .json();
    assert_eq!(started["orderStatus"], "PENDING_PAYMENT");
    assert_eq!(started["paymentStatus"], "REQUIRES_ACTION");
    let url = started["nextAction"]["url"]
        .as_str()
        .expect("a 3-D Secure URL")
        .to_owned();
    let completed = app.http.post(&url).send().await.unwrap();
    assert!(completed.status().is_success());
    let order_id = started["orderId"].as_str().unwrap();
    let order = order_until(&app, "ann", order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == 2)
    })
    .await;
    assert_eq!(order["orderStatus"], "CONFIRMED");
    assert_eq!(order["tierId"], "GA");
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(event["tiers"][0]["sold"], 2);
    assert_eq!(event["tiers"][0]["held"], 0);
    app.finish().await;
}

async fn lost_authorization_response_converges(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // No webhooks: only the reconciler can learn what happened.
    app.sim.sim.set_webhook_url(None);
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-3-1"]).await;
    let started = checkout(&app, "ann", &hold_id, "pay", "pm_sim_timeout")
        .await
        .json();
    assert_eq!(started["orderStatus"], "PENDING_PAYMENT");
    assert_eq!(
        started["paymentStatus"], "UNKNOWN",
        "a lost response is unknown, never a failure"
    );
    let order_id = started["orderId"].as_str().unwrap();
    let order = order_until(&app, "ann", order_id, |o| o["orderStatus"] == "CONFIRMED").await;
    assert_ne!(order["paymentStatus"], "FAILED");
    let authorizations = app.sim.sim.authorizations_by_operation();
    assert!(
        authorizations.values().all(|n| *n == 1),
        "one authorization per order: {authorizations:?}"
    );
    app.finish().await;
}

async fn checkout_replay_and_second_key(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-4-1"]).await;
    let first = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa").await;
    let replay = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa").await;
    assert_eq!((replay.status, &replay.bytes), (first.status, &first.bytes));
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    let other_key = checkout(&app, "ann", &hold_id, "pay-2", "pm_card_visa").await;
    assert_eq!(
        (other_key.status, other_key.code().as_str()),
        (StatusCode::CONFLICT, "HOLD_IN_CHECKOUT")
    );
    let reused = checkout(&app, "ann", &hold_id, "pay", "pm_card_mastercard").await;
    assert_eq!(reused.code(), "IDEMPOTENCY_KEY_REUSED");
    let authorizations = app.sim.sim.authorizations_by_operation();
    assert_eq!(authorizations.len(), 1);
    assert!(
        authorizations.values().all(|n| *n == 1),
        "never a second authorization: {authorizations:?}"
    );
    app.finish().await;
}

async fn checkout_of_expired_or_foreign_hold(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"holdTtlSeconds": 1})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-5-1"]).await;
    let foreign = checkout(&app, "eve", &hold_id, "pay", "pm_card_visa").await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    // Past the hold's deadline by the store's clock: expired at once, without a sweep.
    app.db.advance_clock(1_100).await;
    let hold = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    assert_eq!(hold["status"], "EXPIRED", "{hold}");
    let expired = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa").await;
    assert_eq!(
        (expired.status, expired.code().as_str()),
        (StatusCode::CONFLICT, "HOLD_EXPIRED")
    );
    let bad = app
        .post(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some("k"),
            &json!({"paymentMethodToken": ""}),
        )
        .await;
    assert_eq!(bad.code(), "VALIDATION");
    assert_eq!(
        app.sim.sim.authorizations_by_operation().len(),
        0,
        "nothing was authorized"
    );
    app.finish().await;
}

async fn webhook_signatures_are_checked(backend: Backend) {
    use boxoffice_payments::simulator::DEFAULT_WEBHOOK_SECRET;
    use boxoffice_payments::stripe::sign_webhook;
    let app = TestApp::spawn(backend).await;
    let url = format!("{}/v1/payments/webhooks/stripe", app.base);
    let body = json!({"id": "evt_test", "type": "payment_intent.succeeded", "created": 0,
                      "data": {"object": {"id": "pi_unknown", "object": "payment_intent", "status": "succeeded",
                                          "amount": 100, "currency": "eur", "metadata": {}}}})
    .to_string();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let cases = [
        ("no signature", None, body.clone(), StatusCode::BAD_REQUEST),
        (
            "wrong secret",
            Some(sign_webhook("whsec_other", now, body.as_bytes())),
            body.clone(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "stale",
            Some(sign_webhook(
                DEFAULT_WEBHOOK_SECRET,
                now - 301,
                body.as_bytes(),
            )),
            body.clone(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "tampered",
            Some(sign_webhook(DEFAULT_WEBHOOK_SECRET, now, body.as_bytes())),
            body.replace("100", "1"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "good, unknown payment",
            Some(sign_webhook(DEFAULT_WEBHOOK_SECRET, now, body.as_bytes())),
            body.clone(),
            StatusCode::OK,
        ),
    ];
    for (name, signature, payload, expected) in cases {
        let mut request = app.http.post(&url).body(payload);
        if let Some(signature) = signature {
            request = request.header("stripe-signature", signature);
        }
        let answer = app.send(request).await;
        assert_eq!(
            answer.status,
            expected,
            "{name}: {}",
            String::from_utf8_lossy(&answer.bytes)
        );
    }
    let other_provider = app
        .send(
            app.http
                .post(format!("{}/v1/payments/webhooks/paypal", app.base))
                .body("{}"),
        )
        .await;
    assert_eq!(other_provider.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

/// A hold in checkout keeps its seats through the grace extension, not beyond; an
/// authorization that arrives after the grace is voided, never confirmed.
async fn grace_protects_then_late_authorization_is_voided(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({"holdTtlSeconds": 1, "paymentGraceSeconds": 4}))
        .await;
    let hold = app
        .hold("ann", &event_id, "k", json!({"seatIds": ["A-6-1"]}))
        .await
        .json();
    let hold_id = hold["holdId"].as_str().unwrap().to_owned();
    let started = checkout(
        &app,
        "ann",
        &hold_id,
        "pay",
        "pm_card_threeDSecure2Required",
    )
    .await
    .json();
    assert_eq!(started["paymentStatus"], "REQUIRES_ACTION");
    let order_id = started["orderId"].as_str().unwrap().to_owned();
    let in_checkout = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    assert_eq!(in_checkout["status"], "PAYMENT_PENDING");
    assert_ne!(
        in_checkout["expiresAt"], hold["expiresAt"],
        "the deadline moved by the grace"
    );

    // Past the hold's own deadline, within the grace (by the store's clock, moved forward):
    // the seat is still protected.
    app.db.advance_clock(1_500).await;
    let early = app
        .hold("bob", &event_id, "k1", json!({"seatIds": ["A-6-1"]}))
        .await;
    assert_eq!(
        early.code(),
        "SEATS_UNAVAILABLE",
        "not resold during the grace"
    );

    // After the grace, the seat is for sale again at once (nobody had to sweep).
    app.db.advance_clock(4_000).await;
    let answer = app
        .hold("bob", &event_id, "k2", json!({"seatIds": ["A-6-1"]}))
        .await;
    assert_eq!(
        answer.status,
        StatusCode::CREATED,
        "the seat is sold again after the grace: {}",
        answer.json()
    );
    let bob_hold = answer.json()["holdId"].as_str().unwrap().to_owned();

    // The shopper finishes 3-D Secure too late: the authorization is voided.
    let url = started["nextAction"]["url"].as_str().unwrap().to_owned();
    assert!(
        app.http
            .post(&url)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let order = order_until(&app, "ann", &order_id, |o| o["paymentStatus"] == "VOIDED").await;
    assert_eq!(order["orderStatus"], "CANCELLED");
    assert!(order["tickets"].as_array().unwrap().is_empty());
    let bob = app
        .get(&token("bob"), &format!("/v1/holds/{bob_hold}"))
        .await
        .json();
    assert_eq!(
        bob["status"], "HELD",
        "the late authorization never touches the newer hold"
    );
    app.finish().await;
}

/// Webhooks delivered up to 5 times each, late and out of order, are applied once and never
/// move a payment backwards.
async fn duplicated_late_webhooks_apply_once(backend: Backend) {
    let config = boxoffice_payments::SimulatorConfig {
        webhook_duplicates_max: 5,
        webhook_delay_ms: (0, 400),
        seed: 7,
        ..Default::default()
    };
    let app = TestApp::spawn_with(backend, config).await;
    let event_id = app.create_event(json!({})).await;
    let mut order_ids = Vec::new();
    for (i, account) in ["ann", "bob", "cat"].iter().enumerate() {
        let seat = format!("A-7-{}", i + 1);
        let hold_id = hold_seats(&app, account, &event_id, &[seat.as_str()]).await;
        let card = if i == 0 {
            "pm_card_visa"
        } else {
            "pm_card_threeDSecure2Required"
        };
        let started = checkout(&app, account, &hold_id, "pay", card).await.json();
        if let Some(url) = started["nextAction"]["url"].as_str() {
            assert!(
                app.http
                    .post(url)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .is_success()
            );
        }
        order_ids.push((
            account.to_string(),
            started["orderId"].as_str().unwrap().to_owned(),
        ));
    }
    for (account, order_id) in &order_ids {
        order_until(&app, account, order_id, |o| {
            o["paymentStatus"] == "CAPTURED"
                && o["tickets"].as_array().is_some_and(|t| t.len() == 1)
        })
        .await;
    }
    // Every copy of every webhook has landed; nothing moved back.
    for _ in 0..100 {
        if app.sim.sim.webhooks_delivered() >= app.sim.sim.webhooks_planned() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        app.sim.sim.webhooks_planned() > order_ids.len() as u64,
        "duplicates were sent"
    );
    // A copy of a webhook already applied is acknowledged, never a server error (on
    // PostgreSQL its "seen before" read once failed to decode and answered 500).
    assert_eq!(
        app.sim.sim.webhooks_answered_5xx(),
        0,
        "webhook copies answered with a 5xx"
    );
    for (account, order_id) in &order_ids {
        let order = app
            .get(&token(account), &format!("/v1/orders/{order_id}"))
            .await
            .json();
        assert_eq!(order["paymentStatus"], "CAPTURED", "{order}");
        assert_eq!(order["tickets"].as_array().unwrap().len(), 1);
    }
    app.finish().await;
}

/// A capture the provider keeps refusing is compensated: the order is cancelled, its seats go
/// back on sale, its tickets are voided, and the authorization is voided.
async fn capture_failing_for_good_is_compensated(backend: Backend) {
    let config = boxoffice_payments::SimulatorConfig {
        capture_fails: true,
        ..Default::default()
    };
    let app = TestApp::spawn_with(backend, config).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-8-1"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED");
    let order_id = paid["orderId"].as_str().unwrap();
    let order = order_until(&app, "ann", order_id, |o| {
        o["orderStatus"] == "CANCELLED" && o["paymentStatus"] == "VOIDED"
    })
    .await;
    assert_eq!(order["cancelReason"], "CAPTURE_FAILED");
    assert!(
        order["tickets"].as_array().unwrap().is_empty(),
        "a cancelled order shows no tickets"
    );
    let retake = app
        .hold("bob", &event_id, "k", json!({"seatIds": ["A-8-1"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CREATED,
        "the seat is on sale again"
    );
    let inventory = app
        .db
        .store
        .load_inventory(&event_id)
        .await
        .unwrap()
        .unwrap();
    let voided = inventory
        .orders
        .iter()
        .find(|o| o.order_id == order_id)
        .unwrap();
    assert_eq!(voided.live_tickets, 0, "its tickets were voided");
    // The relay gave the sale back through the event's writer.
    let metrics = app.get(&app.admin, "/metrics").await;
    let text = String::from_utf8_lossy(&metrics.bytes);
    let decided = text.lines().any(|line| {
        line.starts_with("boxoffice_writer_commands_total")
            && line.contains("kind=\"compensate\"")
            && line.contains("path=\"engine\"")
    });
    assert!(decided, "no compensation decided by the engine:\n{text}");
    app.db.assert_invariants().await;
    app.finish().await;
}

/// The purchase limit is checked again when the payment is authorized: a sale that another
/// process confirmed meanwhile (planted here) makes this one cancel and void, not oversell.
async fn purchase_limit_is_rechecked_at_confirmation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 6})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-9-1"]).await;
    let plant = "INSERT INTO hold (event_id, hold_id, account_id, status, tier_id, quantity, seats, total_minor, currency,
                                   idempotency_key, created_at, expires_at, updated_at)";
    match backend {
        Backend::Postgres => {
            let sql = format!(
                "{plant} VALUES ($1, 'elsewhere', 'ann', 'CONFIRMED', 'GA', 6, '[]', 3000, 'EUR', 'x', now(), now(), now())"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&event_id)
                .execute(app.db.pg.as_ref().unwrap().pool())
                .await
                .unwrap();
        }
        Backend::Sqlite => {
            let sql = format!(
                "{plant} VALUES (?1, 'elsewhere', 'ann', 'CONFIRMED', 'GA', 6, '[]', 3000, 'EUR', 'x', 0, 0, 0)"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(&event_id)
                .execute(app.db.sqlite.as_ref().unwrap().pool())
                .await
                .unwrap();
        }
    }
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CANCELLED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap();
    let order = order_until(&app, "ann", order_id, |o| o["paymentStatus"] == "VOIDED").await;
    assert_eq!(order["cancelReason"], "PURCHASE_LIMIT");
    let retake = app
        .hold("bob", &event_id, "k", json!({"seatIds": ["A-9-1"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CREATED,
        "the seat went back on sale"
    );
    // The planted row breaks I7 on purpose; drop the store without the invariant check.
    app.db.cleanup().await;
}

/// A `Captured` verdict that arrives after the order was cancelled (its hold lapsed during
/// 3-D Secure) keeps no seat and cannot be voided: a `refund.due` is queued with the
/// cancellation, never a void.
async fn late_capture_of_a_cancelled_order_is_refunded(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({"holdTtlSeconds": 1, "paymentGraceSeconds": 1}))
        .await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-7-1"]).await;
    let started = checkout(
        &app,
        "ann",
        &hold_id,
        "pay",
        "pm_card_threeDSecure2Required",
    )
    .await
    .json();
    assert_eq!(started["paymentStatus"], "REQUIRES_ACTION");
    let order_id = started["orderId"].as_str().unwrap().to_owned();
    let operation_id = operation_of(&app, &order_id).await;
    let operation = app
        .db
        .store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    // Past the hold's deadline and its grace, by the store's clock.
    app.db.advance_clock(2_500).await;
    let verdict = boxoffice_store::checkout::ProviderVerdict::Captured {
        provider_ref: operation.provider_ref.clone().unwrap_or_default(),
    };
    let settled = app
        .db
        .store
        .settle_payment(&operation_id, &verdict, None, None)
        .await
        .unwrap()
        .expect("the operation exists");
    assert!(settled.changed);
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CANCELLED", "{order}");
    assert_eq!(order["cancelReason"], "HOLD_EXPIRED", "{order}");
    assert!(order["tickets"].as_array().unwrap().is_empty());
    let refunds = outbox_payloads(&app, "refund.due").await;
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(refunds[0]["orderId"], json!(order_id));
    assert_eq!(refunds[0]["operationId"], json!(operation_id));
    assert_eq!(refunds[0]["amountMinor"], json!(operation.amount_minor));
    assert_eq!(refunds[0]["currency"], "EUR");
    let voids = outbox_payloads(&app, "payment.void").await;
    assert!(
        voids
            .iter()
            .all(|v| v["operationId"] != json!(operation_id)),
        "a capture is refunded, not voided: {voids:?}"
    );
    // The same verdict again changes nothing and queues nothing more.
    let again = app
        .db
        .store
        .settle_payment(&operation_id, &verdict, None, None)
        .await
        .unwrap()
        .unwrap();
    assert!(!again.changed);
    assert_eq!(outbox_payloads(&app, "refund.due").await.len(), 1);
    app.finish().await;
}

/// A check-in at the door racing the compensation of a capture that failed for good: either
/// the check-in wins (the compensation gives up, the order stays confirmed) or the
/// compensation wins (the ticket is void and refused at the door) — never a checked-in
/// ticket on a cancelled order whose seat is back on sale. (The simulator's capture went
/// through here, so a compensation that wins records a refund rather than a void.) Half the
/// compensations go through the event's writer (as the relay's do in `serve`), half through
/// the store's one-shot path.
async fn check_in_racing_a_compensation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 20})).await;
    let mut orders = Vec::new();
    for i in 1..=12 {
        let seat = format!("A-9-{i}");
        let hold_id = hold_seats(&app, "ann", &event_id, &[seat.as_str()]).await;
        let paid = checkout(&app, "ann", &hold_id, &format!("pay-{i}"), "pm_card_visa")
            .await
            .json();
        assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
        let order_id = paid["orderId"].as_str().unwrap().to_owned();
        let order = order_until(&app, "ann", &order_id, |o| {
            o["tickets"].as_array().is_some_and(|t| t.len() == 1)
        })
        .await;
        let ticket_id = order["tickets"][0]["ticketId"].as_str().unwrap().to_owned();
        let operation_id = operation_of(&app, &order_id).await;
        orders.push((order_id, ticket_id, operation_id));
    }
    let event = app.state.event(&event_id).await.unwrap();
    let mut races = Vec::new();
    for (n, (order_id, ticket_id, operation_id)) in orders.iter().enumerate() {
        let door = app.db.store.clone();
        let office = app.db.store.clone();
        let writers = app.state.writers.clone();
        let event = event.clone();
        let ticket_id = ticket_id.clone();
        let operation_id = operation_id.clone();
        let check_in = tokio::spawn(async move { door.check_in(&ticket_id).await.unwrap() });
        let compensate = tokio::spawn(async move {
            if n % 2 == 0 {
                return office
                    .compensate_failed_capture(&operation_id, "CAPTURE_FAILED")
                    .await
                    .unwrap();
            }
            let operation = office
                .payment_operation(&operation_id)
                .await
                .unwrap()
                .expect("the operation");
            let order = office
                .order_head(&operation.order_id)
                .await
                .unwrap()
                .expect("the order");
            writers
                .compensate(event, &order, operation, "CAPTURE_FAILED")
                .await
                .unwrap()
        });
        races.push((order_id.clone(), check_in, compensate));
    }
    let mut outcomes = (0, 0);
    for (order_id, check_in, compensate) in races {
        let (checked_in, status) = check_in.await.unwrap().expect("the ticket exists");
        let compensated = compensate.await.unwrap();
        assert_ne!(
            checked_in, compensated,
            "order {order_id}: exactly one of check-in ({status}) and compensation wins"
        );
        let order = app
            .get(&token("ann"), &format!("/v1/orders/{order_id}"))
            .await
            .json();
        if compensated {
            outcomes.1 += 1;
            assert_eq!(order["orderStatus"], "CANCELLED", "{order}");
            assert_eq!(status, "VOIDED", "{order}");
        } else {
            outcomes.0 += 1;
            assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
            assert_eq!(status, "CHECKED_IN", "{order}");
        }
    }
    assert_eq!(outcomes.0 + outcomes.1, orders.len());
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A compensation whose order has a ticket already used at the door is refused alone: the
/// store writes the rest of its group (here a hold on another seat) and leaves the order
/// confirmed and its seat sold, and the seat map records no change of that seat. Through
/// the writer, the refusal is answered `false` and the writer loads the event again (its
/// engine had given the seat back), so the seat is not offered to the next fan.
async fn a_used_ticket_refuses_its_compensation_alone(backend: Backend) {
    use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
    use boxoffice_domain::engine::{
        Command, CompensationDecision, CompensationRequest, Decision, EventEngine,
    };
    use boxoffice_store::engine::{
        CommandWrite, CompensationWrite, FirstInLine, GroupWrite, hold_endpoint,
    };
    use std::collections::BTreeMap;

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-6-1"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    let order = order_until(&app, "ann", &order_id, |o| {
        o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let ticket_id = order["tickets"][0]["ticketId"].as_str().unwrap();
    let (checked_in, _) = app.db.store.check_in(ticket_id).await.unwrap().unwrap();
    assert!(checked_in);
    let store = app.db.store.clone();
    let operation_id = operation_of(&app, &order_id).await;
    let operation = store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    let event = store.get_event(&event_id).await.unwrap().unwrap();
    let endpoint = hold_endpoint(&event_id);
    let (snapshot, now) = store.engine_load(&event, &endpoint).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let shape = HoldShape::Seats {
        seat_ids: vec!["A-6-2".into()],
    };
    let bob = HoldRequest {
        account_id: "bob".into(),
        idempotency_key: "k".into(),
        request_digest: format!("{shape:?}"),
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    };
    let commands = vec![
        Command::Compensate(CompensationRequest {
            order_id: order_id.clone(),
            hold_id: hold_id.clone(),
        }),
        Command::Hold(bob.clone()),
    ];
    let (decisions, effects) = engine.decide(now, &commands);
    assert_eq!(
        decisions[0],
        Decision::Compensate(CompensationDecision::Compensated),
        "the engine does not know the ticket was used"
    );
    assert!(matches!(
        &decisions[1],
        Decision::Hold(HoldOutcome::Held(_))
    ));
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::from([(
            0,
            CommandWrite::Compensation(CompensationWrite::new(&operation, "CAPTURE_FAILED")),
        )]),
        turn: &FirstInLine,
    };
    let committed = store.apply_group(&group).await.expect("the group commits");
    assert_eq!(committed.compensations_refused, vec![0]);
    let bob_hold = store.get_hold(&bob.new_hold_id).await.unwrap();
    assert!(bob_hold.is_some(), "the rest of the group was written");
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    let seat_of = |map: &boxoffice_store::seatmap::MapSnapshot| {
        map.seats
            .iter()
            .find(|(id, _)| id == "A-6-1")
            .map(|(_, seat)| seat.status)
    };
    let map = store.seat_map(&event_id).await.unwrap().unwrap();
    assert_eq!(
        seat_of(&map),
        Some(boxoffice_domain::hold::SeatStatus::Sold)
    );
    app.db.assert_invariants().await;
    // Through the writer: refused, and the seat is not offered to the next fan.
    let writers = app.state.writers.clone();
    let event = app.state.event(&event_id).await.unwrap();
    let order = store.order_head(&order_id).await.unwrap().unwrap();
    let operation = store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    let given_back = writers
        .compensate(event, &order, operation, "CAPTURE_FAILED")
        .await
        .unwrap();
    assert!(!given_back, "a compensation with a used ticket is refused");
    let retake = app
        .hold("carl", &event_id, "k", json!({"seatIds": ["A-6-1"]}))
        .await;
    assert_eq!(
        retake.status,
        StatusCode::CONFLICT,
        "the seat is still sold"
    );
    app.db.assert_invariants().await;
    app.finish().await;
}

/// The capture of a confirmed order's authorization, sent many times at once (the relay's
/// capture and the provider's webhook and its copies): it is applied exactly once, the
/// operation ends `CAPTURED` with its provider reference, the order stays confirmed with its
/// ticket, and nothing else changes (on PostgreSQL this is a single conditional statement
/// rather than the settlement's locking transaction). The simulator declines the relay's own
/// captures, so the operation is still `AUTHORIZED` when the racers start.
async fn captures_racing_on_a_confirmed_order_apply_once(backend: Backend) {
    let config = boxoffice_payments::SimulatorConfig {
        capture_fails: true,
        ..Default::default()
    };
    let app = TestApp::spawn_with(backend, config).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-5-1"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    let operation_id = operation_of(&app, &order_id).await;
    let operation = app
        .db
        .store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(operation.status.as_str(), "AUTHORIZED");
    let provider_ref = operation.provider_ref.clone().expect("authorized");
    let verdict = boxoffice_store::checkout::ProviderVerdict::Captured {
        provider_ref: provider_ref.clone(),
    };
    let mut racers = Vec::new();
    for i in 0..8 {
        let store = app.db.store.clone();
        let (operation_id, verdict) = (operation_id.clone(), verdict.clone());
        racers.push(tokio::spawn(async move {
            let webhook = (i % 2 == 0).then_some(("stripe", "evt_capture_race"));
            store
                .settle_payment(&operation_id, &verdict, webhook, None)
                .await
        }));
    }
    let mut changed = 0;
    for racer in racers {
        // `None`: a copy of the webhook, seen before.
        if let Some(settled) = racer.await.unwrap().expect("no store error") {
            assert_eq!(settled.order.status.as_str(), "CONFIRMED");
            changed += usize::from(settled.changed);
        }
    }
    assert_eq!(changed, 1, "the capture applied {changed} times");
    let operation = app
        .db
        .store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(operation.status.as_str(), "CAPTURED");
    assert_eq!(
        operation.provider_ref.as_deref(),
        Some(provider_ref.as_str())
    );
    let order = order_until(&app, "ann", &order_id, |o| {
        o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    assert_eq!(order["paymentStatus"], "CAPTURED", "{order}");
    assert!(outbox_payloads(&app, "refund.due").await.is_empty());
    assert!(outbox_payloads(&app, "payment.void").await.is_empty());
    app.finish().await;
}

/// Tickets for several orders in one call (the relay's round): each confirmed order gets one
/// ticket per seat, units 1..n in its seat order, a cancelled order gets none, and a second
/// call issues nothing (the relay delivers at least once, and races these calls here).
async fn tickets_of_several_orders_are_issued_once(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 10})).await;
    let mut confirmed = Vec::new();
    for (i, seats) in [vec!["A-3-1", "A-3-2", "A-3-3"], vec!["A-4-1"]]
        .iter()
        .enumerate()
    {
        let hold_id = hold_seats(&app, "ann", &event_id, seats).await;
        let paid = checkout(&app, "ann", &hold_id, &format!("pay-{i}"), "pm_card_visa")
            .await
            .json();
        assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
        confirmed.push((paid["orderId"].as_str().unwrap().to_owned(), seats.clone()));
    }
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-5-1"]).await;
    let declined = checkout(&app, "ann", &hold_id, "pay-x", "pm_card_chargeDeclined")
        .await
        .json();
    assert_eq!(declined["orderStatus"], "CANCELLED", "{declined}");
    let cancelled = declined["orderId"].as_str().unwrap().to_owned();
    let mut order_ids: Vec<String> = confirmed.iter().map(|(id, _)| id.clone()).collect();
    order_ids.push(cancelled.clone());
    let signer = app.signer.clone();
    let sign = move |draft: &boxoffice_store::checkout::TicketDraft| {
        boxoffice_workers::relay::sign_draft(&signer, draft, 1_800_000_000)
    };
    let first = app
        .db
        .store
        .issue_tickets_of(&order_ids, &sign)
        .await
        .expect("issued");
    assert!(
        first <= 4,
        "at most the four seats' tickets are new: {first}"
    );
    let again = app
        .db
        .store
        .issue_tickets_of(&order_ids, &sign)
        .await
        .expect("issued again");
    assert_eq!(again, 0, "every ticket exists already");
    for (order_id, seats) in &confirmed {
        let order = app
            .get(&token("ann"), &format!("/v1/orders/{order_id}"))
            .await
            .json();
        let tickets = order["tickets"].as_array().unwrap();
        let seats_ticketed: Vec<&str> = tickets
            .iter()
            .map(|t| t["seatId"].as_str().unwrap())
            .collect();
        let mut sorted = seats_ticketed.clone();
        sorted.sort_unstable();
        let mut expected = seats.clone();
        expected.sort_unstable();
        assert_eq!(sorted, expected, "one ticket per seat: {order}");
    }
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{cancelled}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CANCELLED");
    assert!(order["tickets"].as_array().unwrap().is_empty(), "{order}");
    let stored = app
        .db
        .store
        .get_order(&cancelled)
        .await
        .unwrap()
        .expect("the cancelled order");
    assert!(
        stored.tickets.is_empty(),
        "no ticket stored for a cancelled order"
    );
    app.finish().await;
}

/// A relay round's captures written in one call (`Store::capture_confirmed`): only an
/// operation still `AUTHORIZED` on a `CONFIRMED` order is captured, with its provider
/// reference kept; an authorization left on a cancelled order (to be voided), a failed
/// payment and an unknown id change nothing, and a second call applies nothing. PostgreSQL
/// applies the whole batch in one statement; SQLite applies none there (the relay then
/// settles each alone). The simulator declines the relay's own captures, so the operations
/// are still `AUTHORIZED` when the batch runs.
async fn captures_of_a_round_apply_only_to_confirmed_orders(backend: Backend) {
    let config = boxoffice_payments::SimulatorConfig {
        capture_fails: true,
        ..Default::default()
    };
    let app = TestApp::spawn_with(backend, config).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 10})).await;
    let mut operations = Vec::new();
    let mut order_ids = Vec::new();
    for (i, card) in [
        "pm_card_visa",
        "pm_card_visa",
        "pm_card_visa",
        "pm_card_chargeDeclined",
    ]
    .iter()
    .enumerate()
    {
        let seat = format!("A-2-{}", i + 1);
        let hold_id = hold_seats(&app, "ann", &event_id, &[seat.as_str()]).await;
        let paid = checkout(&app, "ann", &hold_id, &format!("pay-{i}"), card)
            .await
            .json();
        let order_id = paid["orderId"].as_str().unwrap().to_owned();
        let operation_id = operation_of(&app, &order_id).await;
        let operation = app
            .db
            .store
            .payment_operation(&operation_id)
            .await
            .unwrap()
            .unwrap();
        operations.push(operation);
        order_ids.push(order_id);
    }
    for operation in &operations[..3] {
        assert_eq!(operation.status.as_str(), "AUTHORIZED");
    }
    assert_eq!(operations[3].status.as_str(), "FAILED");
    // The third sale is given back: its authorization stays open until the relay voids it.
    assert!(
        app.db
            .store
            .compensate_failed_capture(&operations[2].operation_id, "CAPTURE_FAILED")
            .await
            .unwrap()
    );
    let mut batch: Vec<(String, String)> = operations
        .iter()
        .map(|operation| {
            let provider_ref = operation.provider_ref.clone().unwrap_or_default();
            (operation.operation_id.clone(), provider_ref)
        })
        .collect();
    batch.push(("op_unknown".into(), "pi_unknown".into()));
    let mut applied = app.db.store.capture_confirmed(&batch).await.unwrap();
    applied.sort();
    let mut confirmed: Vec<String> = operations[..2]
        .iter()
        .map(|operation| operation.operation_id.clone())
        .collect();
    confirmed.sort();
    assert_eq!(
        applied, confirmed,
        "both confirmed orders' captures applied"
    );
    for (operation, order_id) in operations.iter().zip(&order_ids) {
        let now = app
            .db
            .store
            .payment_operation(&operation.operation_id)
            .await
            .unwrap()
            .unwrap();
        if applied.contains(&operation.operation_id) {
            assert_eq!(now.status.as_str(), "CAPTURED");
            assert_eq!(now.provider_ref, operation.provider_ref);
        } else {
            assert_ne!(now.status.as_str(), "CAPTURED", "{order_id}: {now:?}");
        }
    }
    let cancelled = app
        .get(&token("ann"), &format!("/v1/orders/{}", order_ids[2]))
        .await
        .json();
    assert_eq!(cancelled["orderStatus"], "CANCELLED", "{cancelled}");
    assert!(
        app.db
            .store
            .capture_confirmed(&batch)
            .await
            .unwrap()
            .is_empty(),
        "a second call applies nothing"
    );
    // The relay voids the cancelled order's authorization.
    let mut voided = false;
    for _ in 0..200 {
        let now = app
            .db
            .store
            .payment_operation(&operations[2].operation_id)
            .await
            .unwrap()
            .unwrap();
        if now.status.as_str() == "VOIDED" {
            voided = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(voided, "the cancelled order's authorization was voided");
    app.finish().await;
}

/// A check-in that commits while a compensation waits for its ticket's lock is counted by
/// the compensation (PostgreSQL): the check-in's transaction holds the ticket, the
/// compensation must wait for it on the lock of the query that counts used tickets, and
/// then give up. A count whose status filter the planner pushed below the lock saw the
/// ticket still valid without locking it, cancelled the order, and left the ticket
/// `CHECKED_IN` on it (the race `check_in_racing_a_compensation` caught now and then).
#[tokio::test]
async fn postgres_check_in_committing_during_a_compensation_is_counted() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let pool = app.db.pg.as_ref().expect("postgres").pool().clone();
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-6-2"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    let order = order_until(&app, "ann", &order_id, |o| {
        o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let ticket_id = order["tickets"][0]["ticketId"].as_str().unwrap().to_owned();
    let operation_id = operation_of(&app, &order_id).await;
    let mut door = pool.begin().await.unwrap();
    sqlx::query(
        "UPDATE ticket SET status = 'CHECKED_IN', checked_in_at = clock_timestamp()
          WHERE ticket_id = $1 AND status = 'VALID'",
    )
    .bind(&ticket_id)
    .execute(&mut *door)
    .await
    .unwrap();
    let office = app.db.store.clone();
    let compensation = tokio::spawn({
        let operation_id = operation_id.clone();
        async move {
            office
                .compensate_failed_capture(&operation_id, "CAPTURE_FAILED")
                .await
                .unwrap()
        }
    });
    let waiting = common::waits_for_a_lock(&pool, "ticket", || compensation.is_finished()).await;
    assert!(
        waiting,
        "the compensation never waited on the ticket's lock"
    );
    door.commit().await.unwrap();
    let compensated = compensation.await.unwrap();
    assert!(
        !compensated,
        "a compensation cancelled an order with a checked-in ticket"
    );
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    assert_eq!(order["tickets"][0]["status"], "CHECKED_IN", "{order}");
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A ticket issued while a compensation waits for its order, then checked in, is counted
/// by that compensation (PostgreSQL, where the two run side by side; SQLite runs one writer
/// at a time). The test's own transaction plays the relay's issuance: it share-locks the
/// confirmed order, writes the order's ticket and checks it in, and commits only once the
/// compensation is waiting on a lock. Counting the tickets before taking the order's lock
/// missed this ticket and cancelled the order under a checked-in ticket.
#[tokio::test]
async fn postgres_ticket_issued_during_a_compensation_is_counted() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let pool = app.db.pg.as_ref().expect("postgres").pool().clone();
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-6-1"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    let order = order_until(&app, "ann", &order_id, |o| {
        o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let ticket_id = order["tickets"][0]["ticketId"].as_str().unwrap().to_owned();
    let operation_id = operation_of(&app, &order_id).await;
    // The ticket is taken out (kept aside) so that the issuance below writes it anew.
    sqlx::query("CREATE TABLE ticket_aside AS SELECT * FROM ticket WHERE order_id = $1")
        .bind(&order_id)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM ticket WHERE order_id = $1")
        .bind(&order_id)
        .execute(&pool)
        .await
        .unwrap();
    let mut issuance = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM orders WHERE order_id = $1 AND status = 'CONFIRMED' FOR SHARE")
        .bind(&order_id)
        .fetch_one(&mut *issuance)
        .await
        .unwrap();
    sqlx::query("INSERT INTO ticket SELECT * FROM ticket_aside")
        .execute(&mut *issuance)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE ticket SET status = 'CHECKED_IN', checked_in_at = clock_timestamp()
          WHERE ticket_id = $1 AND status = 'VALID'",
    )
    .bind(&ticket_id)
    .execute(&mut *issuance)
    .await
    .unwrap();
    let office = app.db.store.clone();
    let compensation = tokio::spawn({
        let operation_id = operation_id.clone();
        async move {
            office
                .compensate_failed_capture(&operation_id, "CAPTURE_FAILED")
                .await
                .unwrap()
        }
    });
    // Commit once the compensation waits on a lock (the order's, which the issuance holds).
    let waiting = common::waits_for_a_lock(&pool, "orders", || compensation.is_finished()).await;
    assert!(
        waiting,
        "the compensation never waited on the issuance's lock"
    );
    issuance.commit().await.unwrap();
    let compensated = compensation.await.unwrap();
    assert!(
        !compensated,
        "a compensation cancelled an order with a checked-in ticket"
    );
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    assert_eq!(order["tickets"][0]["status"], "CHECKED_IN", "{order}");
    assert!(outbox_payloads(&app, "refund.due").await.is_empty());
    sqlx::query("DROP TABLE ticket_aside")
        .execute(&pool)
        .await
        .unwrap();
    app.finish().await;
}

/// The event's writer sequence: one more for every group an event writer committed (the
/// store's own settlement leaves it as it is).
async fn writer_seq(app: &TestApp, event_id: &str) -> i64 {
    if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar("SELECT writer_seq FROM seatmap WHERE event_id = $1")
            .bind(event_id)
            .fetch_one(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_scalar("SELECT writer_seq FROM seatmap WHERE event_id = ?1")
            .bind(event_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    }
}

/// A verdict that sells a pending order after its first answer — the webhook after 3-D
/// Secure, the reconciler's after a lost answer — is decided by the event's writer, in a
/// group of its own (the writer sequence moves by one), not by the store's settlement
/// beside it; the sale is complete and the seat sold.
async fn later_verdicts_are_decided_by_the_writer(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    for (seat, card) in [
        ("A-4-1", "pm_card_threeDSecure2Required"),
        ("A-4-2", "pm_sim_timeout"),
    ] {
        let lost = card == "pm_sim_timeout";
        // Without webhooks, only the reconciler can learn a lost answer.
        app.sim
            .sim
            .set_webhook_url((!lost).then(|| format!("{}/v1/payments/webhooks/stripe", app.base)));
        let hold_id = hold_seats(&app, "ann", &event_id, &[seat]).await;
        let started = checkout(&app, "ann", &hold_id, seat, card).await.json();
        assert_eq!(started["orderStatus"], "PENDING_PAYMENT", "{started}");
        let before = writer_seq(&app, &event_id).await;
        if lost {
            assert_eq!(started["paymentStatus"], "UNKNOWN", "{started}");
        } else {
            assert_eq!(started["paymentStatus"], "REQUIRES_ACTION", "{started}");
            let url = started["nextAction"]["url"]
                .as_str()
                .expect("a 3-D Secure URL");
            let completed = app.http.post(url).send().await.unwrap();
            assert!(completed.status().is_success());
        }
        let order_id = started["orderId"].as_str().unwrap();
        let order = order_until(&app, "ann", order_id, |o| o["orderStatus"] == "CONFIRMED").await;
        assert_eq!(order["seats"][0]["seatId"], seat, "{order}");
        assert_eq!(
            writer_seq(&app, &event_id).await,
            before + 1,
            "{card}: the sale was not the writer's group"
        );
        let hold = app
            .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
            .await
            .json();
        assert_eq!(hold["status"], "CONFIRMED", "{hold}");
    }
    app.db.assert_invariants().await;
    app.finish().await;
}

/// The reconciler reads an operation, then asks the provider (seconds, at worst); meanwhile
/// the operation may move on (here: 3-D Secure asked for). Its verdict, carrying the status
/// it read, is still the writer's to apply: the group moves any operation whose order is not
/// settled yet, so the stale read refuses no group and the sale is the writer's.
async fn a_verdict_read_before_the_operation_moved_is_the_writers(backend: Backend) {
    use boxoffice_domain::order::PaymentStatus;
    use boxoffice_server::routes::checkout::render_checkout;
    use boxoffice_server::runtime::writer::SettleContext;
    use boxoffice_store::checkout::ProviderVerdict;

    let app = TestApp::spawn(backend).await;
    app.sim.sim.set_webhook_url(None);
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-7-1"]).await;
    let started = checkout(
        &app,
        "ann",
        &hold_id,
        "pay",
        "pm_card_threeDSecure2Required",
    )
    .await
    .json();
    assert_eq!(started["paymentStatus"], "REQUIRES_ACTION", "{started}");
    let order_id = started["orderId"].as_str().unwrap();
    let operation_id = operation_of(&app, order_id).await;
    let mut read_before = app
        .state
        .store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .expect("the operation");
    assert_eq!(read_before.status, PaymentStatus::RequiresAction);
    read_before.status = PaymentStatus::Authorizing;
    let provider_ref = read_before
        .provider_ref
        .clone()
        .expect("a provider reference");
    let order = app
        .state
        .store
        .order_head(order_id)
        .await
        .unwrap()
        .expect("the order");
    let event = app.state.event(&event_id).await.unwrap();
    let before = writer_seq(&app, &event_id).await;
    let settled = app
        .state
        .writers
        .settle(
            event,
            SettleContext {
                operation: read_before,
                verdict: ProviderVerdict::Authorized { provider_ref },
                order,
                scope: None,
                render: &render_checkout,
            },
        )
        .await
        .expect("the writer applies it")
        .expect("the order");
    assert!(settled.changed);
    assert_eq!(settled.order.status.as_str(), "CONFIRMED");
    assert_eq!(writer_seq(&app, &event_id).await, before + 1);
    let order = order_until(&app, "ann", order_id, |o| o["orderStatus"] == "CONFIRMED").await;
    assert!(
        order["paymentStatus"] == "AUTHORIZED" || order["paymentStatus"] == "CAPTURED",
        "{order}"
    );
    app.db.assert_invariants().await;
    app.finish().await;
}

/// Outside `serve` (tools, store tests), `Store::begin_checkout` and `Store::release_hold`
/// decide on a freshly loaded engine and write one group: the rules the writer applies, with
/// the key's answer replayed and every refusal the writer's.
async fn tools_start_checkouts_and_release_on_an_engine(backend: Backend) {
    use boxoffice_domain::hold::HoldStatus;
    use boxoffice_domain::idempotency::IdempotencyScope;
    use boxoffice_server::routes::checkout::render_checkout;
    use boxoffice_store::ReleaseOutcome;
    use boxoffice_store::checkout::{CheckoutBegun, CheckoutStart};

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let paid = hold_seats(&app, "ann", &event_id, &["A-8-1", "A-8-2"]).await;
    let kept = hold_seats(&app, "ann", &event_id, &["A-8-3"]).await;
    let start = |hold_id: &str, key: &str, digest: &str| CheckoutStart {
        scope: IdempotencyScope {
            account_id: "ann".into(),
            endpoint: format!("POST /v1/holds/{hold_id}/checkout"),
            key: key.into(),
        },
        request_digest: digest.into(),
        hold_id: hold_id.into(),
        order_id: format!("order-{key}"),
        operation_id: format!("operation-{key}"),
        provider: "stripe".into(),
        payment_method: "pm_card_visa".into(),
    };
    let store = app.db.store.clone();
    let begun = store
        .begin_checkout(&start(&paid, "k1", "d1"), &render_checkout)
        .await
        .unwrap();
    let CheckoutBegun::Started { order, operation } = begun else {
        panic!("not started: {begun:?}");
    };
    assert_eq!(order.seats.len(), 2);
    assert_eq!(operation.amount_minor, order.total_minor);
    let hold = store.get_hold(&paid).await.unwrap().unwrap();
    assert_eq!(hold.status, HoldStatus::PaymentPending);
    // The same key again: its stored answer; another key, or the same with another body.
    let again = store
        .begin_checkout(&start(&paid, "k1", "d1"), &render_checkout)
        .await
        .unwrap();
    assert!(matches!(again, CheckoutBegun::Replayed(_)), "{again:?}");
    let other = store
        .begin_checkout(&start(&paid, "k2", "d2"), &render_checkout)
        .await
        .unwrap();
    assert_eq!(other, CheckoutBegun::HoldInCheckout);
    let reused = store
        .begin_checkout(&start(&paid, "k1", "d-other"), &render_checkout)
        .await
        .unwrap();
    assert_eq!(reused, CheckoutBegun::KeyReusedWithOtherRequest);
    let mut foreign = start(&kept, "k3", "d3");
    foreign.scope.account_id = "eve".into();
    assert_eq!(
        store
            .begin_checkout(&foreign, &render_checkout)
            .await
            .unwrap(),
        CheckoutBegun::HoldNotFound
    );
    // Releases: a hold in checkout stays; a held one goes, once; another account's is none.
    assert!(matches!(
        store.release_hold("ann", &paid).await.unwrap(),
        ReleaseOutcome::InCheckout(_)
    ));
    assert_eq!(
        store.release_hold("eve", &kept).await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert!(matches!(
        store.release_hold("ann", &kept).await.unwrap(),
        ReleaseOutcome::Released(_)
    ));
    assert!(matches!(
        store.release_hold("ann", &kept).await.unwrap(),
        ReleaseOutcome::AlreadyEnded(_)
    ));
    // Its seat is on sale again: another account holds it through the writer.
    let taken = hold_seats(&app, "bob", &event_id, &["A-8-3"]).await;
    assert_ne!(taken, kept);
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A tier order's compensation decided on an engine that has not seen an exchange take some
/// of its units out (the exchange gave those units back itself): the store refuses the
/// group instead of giving the units back twice, and a compensation decided afresh gives
/// back only the units still sold.
async fn a_compensation_decided_before_an_exchange_is_refused(backend: Backend) {
    use boxoffice_domain::engine::{
        Command, CompensationDecision, CompensationRequest, Decision, EventEngine,
    };
    use boxoffice_store::StoreError;
    use boxoffice_store::engine::{
        CommandWrite, CompensationWrite, FirstInLine, GroupWrite, hold_endpoint,
    };
    use std::collections::BTreeMap;

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    // Another fan's units sold in the same tier: the tier's own count cannot tell.
    let other = app
        .hold(
            "bob",
            &event_id,
            "k",
            json!({"tierId": "GA", "quantity": 4}),
        )
        .await;
    assert_eq!(other.status, StatusCode::CREATED);
    let other_id = other.json()["holdId"].as_str().unwrap().to_owned();
    let bought = checkout(&app, "bob", &other_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(bought["orderStatus"], "CONFIRMED", "{bought}");
    let hold = app
        .hold(
            "ann",
            &event_id,
            "k",
            json!({"tierId": "GA", "quantity": 4}),
        )
        .await;
    assert_eq!(hold.status, StatusCode::CREATED);
    let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    // The relay's capture first, so that the operation read below stays as read.
    order_until(&app, "ann", &order_id, |o| o["paymentStatus"] == "CAPTURED").await;
    let store = app.db.store.clone();
    let operation_id = operation_of(&app, &order_id).await;
    let operation = store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    let event = store.get_event(&event_id).await.unwrap().unwrap();
    let endpoint = hold_endpoint(&event_id);
    let (snapshot, now) = store.engine_load(&event, &endpoint).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let available_before = engine.tier("GA").unwrap().available;
    let command = Command::Compensate(CompensationRequest {
        order_id: order_id.clone(),
        hold_id: hold_id.clone(),
    });
    let (decisions, effects) = engine.decide(now, std::slice::from_ref(&command));
    assert_eq!(
        decisions[0],
        Decision::Compensate(CompensationDecision::Compensated)
    );
    // Meanwhile an exchange takes 2 of the 4 units out and gives them back to the tier (as
    // the exchange's own transaction does).
    let exchanged = match backend {
        Backend::Postgres => {
            let pool = app.db.pg.as_ref().unwrap().pool();
            sqlx::query("UPDATE hold SET exchanged_out = 2 WHERE hold_id = $1")
                .bind(&hold_id)
                .execute(pool)
                .await
                .unwrap();
            sqlx::query(
                "UPDATE tier SET sold = sold - 2, available = available + 2
                  WHERE event_id = $1 AND tier_id = 'GA'",
            )
            .bind(&event_id)
            .execute(pool)
            .await
            .unwrap()
            .rows_affected()
        }
        Backend::Sqlite => {
            let pool = app.db.sqlite.as_ref().unwrap().pool();
            sqlx::query("UPDATE hold SET exchanged_out = 2 WHERE hold_id = ?1")
                .bind(&hold_id)
                .execute(pool)
                .await
                .unwrap();
            sqlx::query(
                "UPDATE tier SET sold = sold - 2, available = available + 2
                  WHERE event_id = ?1 AND tier_id = 'GA'",
            )
            .bind(&event_id)
            .execute(pool)
            .await
            .unwrap()
            .rows_affected()
        }
    };
    assert_eq!(exchanged, 1);
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::from([(
            0,
            CommandWrite::Compensation(CompensationWrite::new(&operation, "CAPTURE_FAILED")),
        )]),
        turn: &FirstInLine,
    };
    match store.apply_group(&group).await {
        Err(StoreError::Conflict(why)) => assert!(why.contains("confirmed hold"), "{why}"),
        other => panic!("a compensation decided on stale units must be refused: {other:?}"),
    }
    // Decided afresh: only the 2 units still sold come back.
    assert!(
        store
            .compensate_failed_capture(&operation_id, "CAPTURE_FAILED")
            .await
            .unwrap()
    );
    let (snapshot, now) = store.engine_load(&event, &endpoint).await.unwrap();
    let engine = EventEngine::load(event.rules(), snapshot, now);
    assert_eq!(
        engine.tier("GA").unwrap().available,
        available_before + 4,
        "2 units by the exchange and 2 by the compensation"
    );
    // The simulated exchange left no exchange of its own: its mark goes, so that the
    // invariants `finish` checks judge the compensation alone.
    let sql = match backend {
        Backend::Postgres => "UPDATE hold SET exchanged_out = 0 WHERE hold_id = $1",
        Backend::Sqlite => "UPDATE hold SET exchanged_out = 0 WHERE hold_id = ?1",
    };
    match backend {
        Backend::Postgres => {
            sqlx::query(sql)
                .bind(&hold_id)
                .execute(app.db.pg.as_ref().unwrap().pool())
                .await
                .unwrap();
        }
        Backend::Sqlite => {
            sqlx::query(sql)
                .bind(&hold_id)
                .execute(app.db.sqlite.as_ref().unwrap().pool())
                .await
                .unwrap();
        }
    }
    app.finish().await;
}

/// A compensation whose payment operation moved after it was read (here: read as
/// `AUTHORIZED`, captured since) chose its undo from a stale status (a void of a captured
/// payment): the store refuses it alone — the rest of its group commits — and the order stays
/// confirmed; the relay's next delivery reads the operation again.
async fn a_compensation_read_before_its_operation_moved_is_refused_alone(backend: Backend) {
    use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
    use boxoffice_domain::engine::{Command, CompensationRequest, Decision, EventEngine};
    use boxoffice_domain::order::PaymentStatus;
    use boxoffice_store::engine::{
        CommandWrite, CompensationWrite, FirstInLine, GroupWrite, hold_endpoint,
    };
    use std::collections::BTreeMap;

    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let hold_id = hold_seats(&app, "ann", &event_id, &["A-7-5"]).await;
    let paid = checkout(&app, "ann", &hold_id, "pay", "pm_card_visa")
        .await
        .json();
    assert_eq!(paid["orderStatus"], "CONFIRMED", "{paid}");
    let order_id = paid["orderId"].as_str().unwrap().to_owned();
    order_until(&app, "ann", &order_id, |o| o["paymentStatus"] == "CAPTURED").await;
    let store = app.db.store.clone();
    let operation_id = operation_of(&app, &order_id).await;
    let mut read_before = store
        .payment_operation(&operation_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read_before.status, PaymentStatus::Captured);
    read_before.status = PaymentStatus::Authorized;
    let event = store.get_event(&event_id).await.unwrap().unwrap();
    let endpoint = hold_endpoint(&event_id);
    let (snapshot, now) = store.engine_load(&event, &endpoint).await.unwrap();
    let mut engine = EventEngine::load(event.rules(), snapshot, now);
    let shape = HoldShape::Seats {
        seat_ids: vec!["A-7-6".into()],
    };
    let bob = HoldRequest {
        account_id: "bob".into(),
        idempotency_key: "k".into(),
        request_digest: format!("{shape:?}"),
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    };
    let commands = vec![
        Command::Compensate(CompensationRequest {
            order_id: order_id.clone(),
            hold_id: hold_id.clone(),
        }),
        Command::Hold(bob.clone()),
    ];
    let (decisions, effects) = engine.decide(now, &commands);
    assert!(matches!(
        &decisions[1],
        Decision::Hold(HoldOutcome::Held(_))
    ));
    let group = GroupWrite {
        event: &event,
        endpoint: &endpoint,
        now,
        writer_seq: engine.writer_seq() + 1,
        fence: None,
        effects: &effects,
        records: Vec::new(),
        commands: BTreeMap::from([(
            0,
            CommandWrite::Compensation(CompensationWrite::new(&read_before, "CAPTURE_FAILED")),
        )]),
        turn: &FirstInLine,
    };
    let committed = store.apply_group(&group).await.expect("the group commits");
    assert_eq!(committed.compensations_refused, vec![0]);
    assert!(store.get_hold(&bob.new_hold_id).await.unwrap().is_some());
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    assert!(outbox_payloads(&app, "payment.void").await.is_empty());
    app.db.assert_invariants().await;
    app.finish().await;
}
