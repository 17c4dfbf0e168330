//! A fan's refund over HTTP on both backends (issue 37, item 2): a whole order refunded and
//! its seats sold again, a refund by ticket, replays and key reuse, someone else's order,
//! the policy and its cutoff, a refund the provider refuses (`FAILED`, money still owed), and
//! a refund racing a check-in, a transfer offer and an exchange of the same ticket (exactly
//! one wins, 20 rounds each). Every story ends with every invariant checked.

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    a_whole_order_is_refunded_and_its_seats_sell_again,
    a_refund_by_ticket_keeps_the_rest_of_the_order,
    refunds_outside_the_policy_are_refused,
    a_refund_the_provider_refuses_reads_failed,
    a_refund_and_a_check_in_of_one_ticket_at_once_one_wins,
    a_refund_and_a_transfer_offer_of_one_ticket_at_once_one_wins,
    a_refund_and_an_exchange_of_one_ticket_at_once_one_wins,
    an_organiser_refunds_money_alone_and_chosen_tickets,
    on_localstripe_an_order_is_refunded_in_part_then_in_full,
    a_refund_policy_is_set_and_removed_after_creation,
);

/// A policy fans can use now: refunds until an hour before the start, 100 kept per ticket.
fn policy() -> Value {
    json!({"refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 100}})
}

async fn refund(
    app: &TestApp,
    account: &str,
    order_id: &str,
    key: &str,
    body: Value,
) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/orders/{order_id}/refunds"),
        Some(key),
        &body,
    )
    .await
}

fn ids(tickets: &[&Value]) -> Value {
    json!(
        tickets
            .iter()
            .map(|t| t["ticketId"].clone())
            .collect::<Vec<_>>()
    )
}

/// Polls the order until its refund `refund_id` has settled.
async fn settled(app: &TestApp, account: &str, order_id: &str, refund_id: &str) -> Value {
    common::order_until(app, account, order_id, |o| {
        o["refunds"].as_array().is_some_and(|refunds| {
            refunds
                .iter()
                .any(|r| r["refundId"] == refund_id && r["status"] != "PENDING")
        })
    })
    .await
}

async fn a_whole_order_is_refunded_and_its_seats_sell_again(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(
        event["refundPolicy"],
        json!({"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 100})
    );
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;

    // Someone else's order is not found, to refund or to read.
    let eve = refund(&app, "eve", &order_id, "r-eve", json!({})).await;
    assert_eq!(eve.status, StatusCode::NOT_FOUND, "{}", eve.json());

    let asked = refund(&app, "ann", &order_id, "r-1", json!({})).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.json());
    let r = asked.json();
    let refund_id = r["refundId"].as_str().unwrap().to_owned();
    assert_eq!(r["orderId"], json!(order_id));
    assert_eq!(r["amountMinor"], 1_800, "two seats of 1,000 less 100 each");
    assert_eq!(r["currency"], "EUR");
    assert_eq!(r["reason"], "REQUESTED_BY_CUSTOMER");
    let mut refunded: Vec<Value> = r["ticketIds"].as_array().unwrap().clone();
    refunded.sort_by_key(|v| v.to_string());
    let mut all: Vec<Value> = tickets.iter().map(|t| t["ticketId"].clone()).collect();
    all.sort_by_key(|v| v.to_string());
    assert_eq!(refunded, all, "no ticketIds: every valid ticket");

    // The same key and body: the same refund, said to be a replay. Another body: refused.
    let again = refund(&app, "ann", &order_id, "r-1", json!({})).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.json()["refundId"], json!(refund_id));
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    let other = refund(
        &app,
        "ann",
        &order_id,
        "r-1",
        json!({"ticketIds": ids(&[&tickets[0]])}),
    )
    .await;
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED", "{}", other.json());
    // Nothing valid is left to refund.
    let twice = refund(&app, "ann", &order_id, "r-2", json!({})).await;
    assert_eq!(
        (twice.status, twice.code().as_str()),
        (StatusCode::CONFLICT, "REFUND_CONFLICT"),
        "{}",
        twice.json()
    );

    // The tickets are void at once; the seats are on sale again.
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    for ticket in order["tickets"].as_array().unwrap() {
        assert_eq!(ticket["status"], "VOIDED", "{order}");
        assert_eq!(ticket["voidReason"], "REFUND", "{order}");
    }
    let at_door = app.check_in(&tickets[0]).await;
    assert_eq!(
        at_door.status,
        StatusCode::BAD_REQUEST,
        "{}",
        at_door.json()
    );
    assert!(app.holdable("bob", &event_id, "A-1-1").await);

    // The relay pays it back: the refund succeeds and the order reads REFUNDED.
    let order = settled(&app, "ann", &order_id, &refund_id).await;
    assert_eq!(order["refunds"][0]["status"], "SUCCEEDED", "{order}");
    assert!(order["refunds"][0]["settledAt"].is_string(), "{order}");
    assert_eq!(order["refundedMinor"], 1_800, "{order}");
    let order =
        common::order_until(&app, "ann", &order_id, |o| o["orderStatus"] == "REFUNDED").await;
    assert_eq!(order["paymentStatus"], "CAPTURED");

    // The owner and an admin read the refund; anyone else gets 404.
    let path = format!("/v1/orders/{order_id}/refunds/{refund_id}");
    let read = app.get(&token("ann"), &path).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.json()["status"], "SUCCEEDED");
    assert_eq!(app.get(&app.admin, &path).await.status, StatusCode::OK);
    assert_eq!(
        app.get(&token("eve"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    let unknown = format!("/v1/orders/{order_id}/refunds/{}", uuid::Uuid::now_v7());
    assert_eq!(
        app.get(&token("ann"), &unknown).await.status,
        StatusCode::NOT_FOUND
    );

    // The freed seat is sold again, to bob.
    let (_, bobs) =
        common::buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    assert_eq!(bobs[0]["seatId"], "A-1-1");
    let settled_events = common::outbox_payloads(&app, "refund.succeeded").await;
    assert_eq!(settled_events.len(), 1, "{settled_events:?}");
    assert_eq!(settled_events[0]["refundId"], json!(refund_id));
    app.finish().await;
}

async fn a_refund_by_ticket_keeps_the_rest_of_the_order(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-2-1", "A-2-2", "A-2-3"]}),
    )
    .await;
    let one = tickets.iter().find(|t| t["seatId"] == "A-2-2").unwrap();
    let asked = refund(
        &app,
        "ann",
        &order_id,
        "one",
        json!({"ticketIds": ids(&[one])}),
    )
    .await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.json());
    assert_eq!(asked.json()["amountMinor"], 900);
    let refund_id = asked.json()["refundId"].as_str().unwrap().to_owned();
    let order = settled(&app, "ann", &order_id, &refund_id).await;
    assert_eq!(
        order["orderStatus"], "CONFIRMED",
        "two tickets stay: {order}"
    );
    assert_eq!(order["refundedMinor"], 900);
    for ticket in order["tickets"].as_array().unwrap() {
        let expected = if ticket["seatId"] == "A-2-2" {
            "VOIDED"
        } else {
            "VALID"
        };
        assert_eq!(ticket["status"], expected, "{order}");
    }
    assert!(app.holdable("bob", &event_id, "A-2-2").await);
    assert!(!app.holdable("bob", &event_id, "A-2-1").await);
    // The same ticket again: it is void.
    let again = refund(
        &app,
        "ann",
        &order_id,
        "one-again",
        json!({"ticketIds": ids(&[one])}),
    )
    .await;
    assert_eq!(again.code(), "REFUND_CONFLICT", "{}", again.json());
    // A ticket that is not the order's, a repeated one, an empty list: refused as invalid.
    for (key, body) in [
        ("bad-1", json!({"ticketIds": ["not-a-ticket"]})),
        (
            "bad-2",
            json!({"ticketIds": [tickets[0]["ticketId"], tickets[0]["ticketId"]]}),
        ),
        ("bad-3", json!({"ticketIds": []})),
        (
            "bad-4",
            json!({"ticketIds": ids(&[&tickets[0]]), "extra": 1}),
        ),
    ] {
        let bad = refund(&app, "ann", &order_id, key, body).await;
        assert_eq!(
            bad.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{key}: {}",
            bad.json()
        );
    }
    // The rest is refunded too: REFUNDED once paid back; the hold counts nothing for the limit.
    let rest = refund(&app, "ann", &order_id, "rest", json!({})).await;
    assert_eq!(rest.json()["ticketIds"].as_array().unwrap().len(), 2);
    assert_eq!(rest.json()["amountMinor"], 1_800);
    let order =
        common::order_until(&app, "ann", &order_id, |o| o["orderStatus"] == "REFUNDED").await;
    assert_eq!(order["refundedMinor"], 2_700);
    // General admission: units go back.
    let (ga_order, ga_tickets) = common::buy_captured(
        &app,
        "cat",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    let ga = refund(
        &app,
        "cat",
        &ga_order,
        "ga",
        json!({"ticketIds": ids(&[&ga_tickets[0]])}),
    )
    .await;
    assert_eq!(ga.status, StatusCode::ACCEPTED, "{}", ga.json());
    assert_eq!(ga.json()["amountMinor"], 400);
    let tiers = app
        .get(&token("cat"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    let floor = tiers["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tierId"] == "GA")
        .unwrap()
        .clone();
    if floor["sold"].is_number() {
        assert_eq!(floor["sold"], 1, "{floor}");
    }
    app.finish().await;
}

async fn refunds_outside_the_policy_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // No policy: fans cannot refund.
    let plain = app.create_event(json!({})).await;
    let (order_id, _) =
        common::buy_captured(&app, "ann", &plain, json!({"seatIds": ["A-1-1"]})).await;
    let none = refund(&app, "ann", &order_id, "n", json!({})).await;
    assert_eq!(
        (none.status, none.code().as_str()),
        (StatusCode::CONFLICT, "REFUND_NOT_ALLOWED"),
        "{}",
        none.json()
    );
    // Past the cutoff by the store's clock: the start is a week away, the cutoff two weeks.
    let starts = time::OffsetDateTime::now_utc() + time::Duration::days(7);
    let late = app
        .create_event(json!({
            "startsAt": starts.format(&time::format_description::well_known::Rfc3339).unwrap(),
            "refundPolicy": {"fanRefundCutoffSeconds": 14 * 86_400},
        }))
        .await;
    let (order_id, _) =
        common::buy_captured(&app, "ann", &late, json!({"seatIds": ["A-1-1"]})).await;
    let closed = refund(&app, "ann", &order_id, "c", json!({})).await;
    assert_eq!(closed.code(), "REFUND_NOT_ALLOWED", "{}", closed.json());
    // A checked-in ticket is not refunded; a bad policy is refused at creation.
    let open = app.create_event(policy()).await;
    let (order_id, tickets) =
        common::buy_captured(&app, "ann", &open, json!({"seatIds": ["A-1-1", "A-1-2"]})).await;
    assert_eq!(app.check_in(&tickets[0]).await.status, StatusCode::OK);
    let used = refund(
        &app,
        "ann",
        &order_id,
        "u",
        json!({"ticketIds": ids(&[&tickets[0]])}),
    )
    .await;
    assert_eq!(used.code(), "REFUND_CONFLICT", "{}", used.json());
    // Without ticketIds only the valid one goes.
    let rest = refund(&app, "ann", &order_id, "v", json!({})).await;
    assert_eq!(rest.status, StatusCode::ACCEPTED, "{}", rest.json());
    assert_eq!(rest.json()["ticketIds"], ids(&[&tickets[1]]));
    let key = uuid::Uuid::now_v7().to_string();
    let bad = app
        .post(
            &app.admin,
            "/v1/admin/events",
            Some(&key),
            &json!({
                "name": "Bad policy", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 1, "priceMinor": 1000}],
                "refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": -1},
            }),
        )
        .await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        bad.json()
    );
    app.finish().await;
}

async fn a_refund_the_provider_refuses_reads_failed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    let (order_id, _) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-3-1"]})).await;
    app.sim.sim.set_refund_fails(true);
    let asked = refund(&app, "ann", &order_id, "f", json!({})).await;
    assert_eq!(asked.status, StatusCode::ACCEPTED, "{}", asked.json());
    let refund_id = asked.json()["refundId"].as_str().unwrap().to_owned();
    let order = settled(&app, "ann", &order_id, &refund_id).await;
    let r = &order["refunds"][0];
    assert_eq!(r["status"], "FAILED", "{order}");
    assert!(r["failure"].is_string(), "the operator sees why: {order}");
    // Money still owed is not shown as refunded.
    assert_eq!(order["refundedMinor"], 0, "{order}");
    assert_eq!(order["orderStatus"], "CONFIRMED", "{order}");
    let failed = common::outbox_payloads(&app, "refund.failed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    app.sim.sim.set_refund_fails(false);
    app.finish().await;
}

const ROUNDS: usize = 20;

async fn a_refund_and_a_check_in_of_one_ticket_at_once_one_wins(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    let (mut refunds_won, mut check_ins_won) = (0, 0);
    for round in 0..ROUNDS {
        let seat = format!("A-{}-{}", round / 10 + 4, round % 10 + 1);
        let fan = format!("fan-{round}");
        let (order_id, tickets) =
            common::buy_captured(&app, &fan, &event_id, json!({"seatIds": [seat]})).await;
        let refund_key = format!("c{round}");
        let (refunded, checked) = tokio::join!(
            refund(&app, &fan, &order_id, &refund_key, json!({})),
            app.check_in(&tickets[0]),
        );
        let refund_won = refunded.status == StatusCode::ACCEPTED;
        let check_in_won = checked.status == StatusCode::OK;
        assert!(
            refund_won != check_in_won,
            "exactly one wins: refund {} {}, check-in {} {}",
            refunded.status,
            refunded.json(),
            checked.status,
            checked.json()
        );
        if refund_won {
            refunds_won += 1;
            assert!(app.holdable("cat", &event_id, &seat).await);
        } else {
            check_ins_won += 1;
            assert_eq!(refunded.code(), "REFUND_CONFLICT", "{}", refunded.json());
            assert!(!app.holdable("cat", &event_id, &seat).await);
        }
    }
    eprintln!("refund won {refunds_won}, check-in won {check_ins_won} of {ROUNDS}");
    app.finish().await;
}

async fn a_refund_and_a_transfer_offer_of_one_ticket_at_once_one_wins(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    for round in 0..ROUNDS {
        let seat = format!("A-{}-{}", round / 10 + 7, round % 10 + 1);
        let fan = format!("fan-{round}");
        let (order_id, tickets) =
            common::buy_captured(&app, &fan, &event_id, json!({"seatIds": [seat]})).await;
        let ann = token(&fan);
        let offer_path = format!("/v1/orders/{order_id}/transfers");
        let offer_body = json!({"ticketIds": ids(&[&tickets[0]]), "toAccountId": "bob"});
        let offer_key = format!("o{round}");
        let refund_key = format!("t{round}");
        let (refunded, offered) = tokio::join!(
            refund(&app, &fan, &order_id, &refund_key, json!({})),
            app.post(&ann, &offer_path, Some(&offer_key), &offer_body),
        );
        let refund_won = refunded.status == StatusCode::ACCEPTED;
        let offer_won = offered.status == StatusCode::CREATED;
        assert!(
            refund_won != offer_won,
            "exactly one wins: refund {} {}, offer {} {}",
            refunded.status,
            refunded.json(),
            offered.status,
            offered.json()
        );
        if refund_won {
            assert_eq!(offered.code(), "TRANSFER_CONFLICT", "{}", offered.json());
        } else {
            assert_eq!(refunded.code(), "REFUND_CONFLICT", "{}", refunded.json());
        }
    }
    app.finish().await;
}

async fn a_refund_and_an_exchange_of_one_ticket_at_once_one_wins(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(policy()).await;
    for round in 0..ROUNDS {
        let seat = format!("A-{}-{}", round / 10 + 10, round % 10 + 1);
        let to_seat = format!("A-{}-{}", round / 10 + 13, round % 10 + 1);
        let fan = format!("fan-{round}");
        let (order_id, _) =
            common::buy_captured(&app, &fan, &event_id, json!({"seatIds": [seat]})).await;
        let ann = token(&fan);
        let exchange_path = format!("/v1/orders/{order_id}/exchanges");
        let exchange_body = json!({"fromSeatIds": [seat], "toSeatIds": [to_seat]});
        let exchange_key = format!("x{round}");
        let refund_key = format!("x{round}");
        let (refunded, exchanged) = tokio::join!(
            refund(&app, &fan, &order_id, &refund_key, json!({})),
            app.post(&ann, &exchange_path, Some(&exchange_key), &exchange_body),
        );
        let refund_won = refunded.status == StatusCode::ACCEPTED;
        let exchange_won = exchanged.status == StatusCode::CREATED;
        assert!(
            refund_won != exchange_won,
            "exactly one wins: refund {} {}, exchange {} {}",
            refunded.status,
            refunded.json(),
            exchanged.status,
            exchanged.json()
        );
        if refund_won {
            assert_eq!(
                exchanged.code(),
                "EXCHANGE_CONFLICT",
                "{}",
                exchanged.json()
            );
            // The old seat is free again, the exchange's target never taken.
            assert!(app.holdable("cat", &event_id, &seat).await);
            assert!(app.holdable("cat", &event_id, &to_seat).await);
        } else {
            assert_eq!(refunded.code(), "REFUND_CONFLICT", "{}", refunded.json());
            assert!(!app.holdable("cat", &event_id, &to_seat).await);
        }
    }
    app.finish().await;
}

async fn an_organiser_refunds_money_alone_and_chosen_tickets(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // No refund policy: an organiser refunds all the same.
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-5-1", "A-5-2"]}),
    )
    .await;
    let path = format!("/v1/admin/orders/{order_id}/refunds");
    // A fan's token is not enough.
    let fan = app
        .post(
            &token("ann"),
            &path,
            Some("g0"),
            &json!({"amountMinor": 100, "reason": "late"}),
        )
        .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN, "{}", fan.json());
    // Goodwill: money alone, the tickets stay valid.
    let goodwill = app
        .post(
            &app.admin,
            &path,
            Some("g1"),
            &json!({"amountMinor": 500, "reason": "the show started late"}),
        )
        .await;
    assert_eq!(goodwill.status, StatusCode::ACCEPTED, "{}", goodwill.json());
    let g = goodwill.json();
    assert_eq!(g["amountMinor"], 500);
    assert_eq!(g["ticketIds"], json!([]));
    assert_eq!(g["reason"], "the show started late");
    let goodwill_id = g["refundId"].as_str().unwrap().to_owned();
    let replay = app
        .post(
            &app.admin,
            &path,
            Some("g1"),
            &json!({"amountMinor": 500, "reason": "the show started late"}),
        )
        .await;
    assert_eq!(replay.json()["refundId"], json!(goodwill_id));
    // Never more than paid less refunded: 2,000 paid, 500 back, 1,501 is too much.
    let too_much = app
        .post(
            &app.admin,
            &path,
            Some("g2"),
            &json!({"amountMinor": 1_501, "reason": "x"}),
        )
        .await;
    assert_eq!(
        (too_much.status, too_much.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION"),
        "{}",
        too_much.json()
    );
    for (key, body) in [
        ("b1", json!({"reason": "nothing to refund"})),
        ("b2", json!({"amountMinor": 100})),
        ("b3", json!({"amountMinor": 100, "reason": "  "})),
        ("b5", json!({"amountMinor": 0, "reason": "zero"})),
    ] {
        let bad = app.post(&app.admin, &path, Some(key), &body).await;
        assert_eq!(
            bad.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{key}: {}",
            bad.json()
        );
    }
    let order = settled(&app, "ann", &order_id, &goodwill_id).await;
    assert_eq!(order["refunds"][0]["status"], "SUCCEEDED", "{order}");
    assert_eq!(order["orderStatus"], "CONFIRMED");
    assert!(
        order["tickets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "VALID")
    );
    // One chosen ticket, its seat back on sale, for its price by default.
    let one = tickets.iter().find(|t| t["seatId"] == "A-5-2").unwrap();
    let chosen = app
        .post(
            &app.admin,
            &path,
            Some("t1"),
            &json!({"ticketIds": ids(&[one]), "reason": "seat broken"}),
        )
        .await;
    assert_eq!(chosen.status, StatusCode::ACCEPTED, "{}", chosen.json());
    assert_eq!(chosen.json()["amountMinor"], 1_000);
    let chosen_id = chosen.json()["refundId"].as_str().unwrap().to_owned();
    assert!(app.holdable("bob", &event_id, "A-5-2").await);
    let order = settled(&app, "ann", &order_id, &chosen_id).await;
    assert_eq!(order["refundedMinor"], 1_500, "{order}");
    // What is left to give back is 500: the last ticket for its full price is too much.
    let last = tickets.iter().find(|t| t["seatId"] == "A-5-1").unwrap();
    let over = app
        .post(
            &app.admin,
            &path,
            Some("t2"),
            &json!({"ticketIds": ids(&[last]), "reason": "x"}),
        )
        .await;
    assert_eq!(over.code(), "VALIDATION", "{}", over.json());
    let rest = app
        .post(
            &app.admin,
            &path,
            Some("t3"),
            &json!({"ticketIds": ids(&[last]), "amountMinor": 500, "reason": "the rest"}),
        )
        .await;
    assert_eq!(rest.status, StatusCode::ACCEPTED, "{}", rest.json());
    let order =
        common::order_until(&app, "ann", &order_id, |o| o["orderStatus"] == "REFUNDED").await;
    assert_eq!(order["refundedMinor"], 2_000, "{order}");
    // A ticket refunded with its seat kept off sale (a broken seat): the ticket is void and
    // the money goes back, but the seat stays sold to the order, so nobody can hold it.
    let (kept_order, kept_tickets) = common::buy_captured(
        &app,
        "cat",
        &event_id,
        json!({"seatIds": ["A-6-1", "A-6-2"]}),
    )
    .await;
    let broken = kept_tickets
        .iter()
        .find(|t| t["seatId"] == "A-6-1")
        .unwrap();
    let kept = app
        .post(
            &app.admin,
            &format!("/v1/admin/orders/{kept_order}/refunds"),
            Some("k1"),
            &json!({"ticketIds": ids(&[broken]), "releaseSeats": false, "reason": "seat broken"}),
        )
        .await;
    assert_eq!(kept.status, StatusCode::ACCEPTED, "{}", kept.json());
    assert_eq!(kept.json()["amountMinor"], 1_000);
    let kept_id = kept.json()["refundId"].as_str().unwrap().to_owned();
    let kept_now = settled(&app, "cat", &kept_order, &kept_id).await;
    let void: Vec<&Value> = kept_now["tickets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] == "VOIDED")
        .collect();
    assert_eq!(void.len(), 1, "{kept_now}");
    assert_eq!(void[0]["seatId"], "A-6-1", "{kept_now}");
    assert_eq!(void[0]["voidReason"], "REFUND", "{kept_now}");
    assert!(
        !app.holdable("bob", &event_id, "A-6-1").await,
        "kept off sale"
    );
    // The other ticket refunded with its seat released: that seat sells again.
    let other = kept_tickets
        .iter()
        .find(|t| t["seatId"] == "A-6-2")
        .unwrap();
    let released = app
        .post(
            &app.admin,
            &format!("/v1/admin/orders/{kept_order}/refunds"),
            Some("k2"),
            &json!({"ticketIds": ids(&[other]), "releaseSeats": true, "reason": "moved"}),
        )
        .await;
    assert_eq!(released.status, StatusCode::ACCEPTED, "{}", released.json());
    assert!(app.holdable("bob", &event_id, "A-6-2").await);
    assert!(!app.holdable("bob", &event_id, "A-6-1").await);
    // The admin reads any order's refund.
    let read = app
        .get(
            &app.admin,
            &format!("/v1/orders/{order_id}/refunds/{chosen_id}"),
        )
        .await;
    assert_eq!(read.json()["reason"], "seat broken");
    app.finish().await;
}

/// The provider reference of an order's payment, as stored.
async fn provider_ref_of(app: &TestApp, order_id: &str) -> String {
    let sql = "SELECT provider_ref FROM payment_operation WHERE order_id = ";
    if let Some(pg) = app.db.pg.as_ref() {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{sql}$1")))
            .bind(order_id)
            .fetch_one(pg.pool())
            .await
            .unwrap()
    } else {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{sql}?1")))
            .bind(order_id)
            .fetch_one(app.db.sqlite.as_ref().unwrap().pool())
            .await
            .unwrap()
    }
}

/// `serve --payments stripe` against localstripe: a captured order refunded one ticket, then
/// the rest; both refunds are in localstripe, of the amounts the policy gives back.
async fn on_localstripe_an_order_is_refunded_in_part_then_in_full(backend: Backend) {
    let app = TestApp::spawn_counted(backend, common::Payments::LocalStripe).await;
    let event_id = app.create_event(policy()).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-6-1", "A-6-2"]}),
    )
    .await;
    let part = refund(
        &app,
        "ann",
        &order_id,
        "part",
        json!({"ticketIds": ids(&[&tickets[0]])}),
    )
    .await;
    assert_eq!(part.status, StatusCode::ACCEPTED, "{}", part.json());
    let part_id = part.json()["refundId"].as_str().unwrap().to_owned();
    let order = settled(&app, "ann", &order_id, &part_id).await;
    assert_eq!(order["refunds"][0]["status"], "SUCCEEDED", "{order}");
    let full = refund(&app, "ann", &order_id, "rest", json!({})).await;
    assert_eq!(full.status, StatusCode::ACCEPTED, "{}", full.json());
    let order =
        common::order_until(&app, "ann", &order_id, |o| o["orderStatus"] == "REFUNDED").await;
    assert_eq!(order["refundedMinor"], 1_800, "{order}");
    let stripe = app.localstripe.as_ref().expect("localstripe");
    let pi = provider_ref_of(&app, &order_id).await;
    let listed: Value = app
        .http
        .get(format!(
            "{}/v1/refunds?payment_intent={pi}",
            stripe.base_url
        ))
        .bearer_auth(boxoffice_payments::localstripe::SECRET_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut amounts: Vec<i64> = listed["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|r| r["amount"].as_i64().unwrap())
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, [900, 900], "{listed}");
    app.finish().await;
}

/// `PATCH /v1/admin/events/{eventId}` sets the refund policy of an event created without one
/// (fans may then refund), and `null` removes it again; only an admin, only that field.
async fn a_refund_policy_is_set_and_removed_after_creation(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-7-1", "A-7-2"]}),
    )
    .await;
    let none = refund(&app, "ann", &order_id, "p0", json!({})).await;
    assert_eq!(none.code(), "REFUND_NOT_ALLOWED", "{}", none.json());
    let path = format!("/v1/admin/events/{event_id}");
    let patch = |who: String, body: Value| {
        let app = &app;
        let path = path.clone();
        async move {
            app.send(
                app.http
                    .patch(format!("{}{path}", app.base))
                    .bearer_auth(who)
                    .json(&body),
            )
            .await
        }
    };
    let policy = json!({"refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 50}});
    let fan = patch(token("ann"), policy.clone()).await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN, "{}", fan.json());
    for bad in [
        json!({}),
        json!({"name": "renamed"}),
        json!({"refundPolicy": {"fanRefundCutoffSeconds": 31_536_001}}),
        json!({"refundPolicy": {"fanRefundCutoffSeconds": 60, "keepFeeMinor": -1}}),
    ] {
        let refused = patch(app.admin.clone(), bad.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            refused.json()
        );
    }
    let unknown = app
        .send(
            app.http
                .patch(format!("{}/v1/admin/events/no-such-event", app.base))
                .bearer_auth(&app.admin)
                .json(&policy),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.json());
    let set = patch(app.admin.clone(), policy).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.json());
    assert_eq!(
        set.json()["refundPolicy"],
        json!({"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 50})
    );
    let read = app
        .get(&token("ann"), &path.replace("/admin", ""))
        .await
        .json();
    assert_eq!(read["refundPolicy"]["keepFeeMinor"], 50, "{read}");
    // A fan refunds within the new policy, less its fee.
    let one = refund(
        &app,
        "ann",
        &order_id,
        "p1",
        json!({"ticketIds": ids(&[&tickets[0]])}),
    )
    .await;
    assert_eq!(one.status, StatusCode::ACCEPTED, "{}", one.json());
    assert_eq!(one.json()["amountMinor"], 950);
    // Removed: fans cannot refund on their own again.
    let removed = patch(app.admin.clone(), json!({"refundPolicy": null})).await;
    assert_eq!(removed.status, StatusCode::OK, "{}", removed.json());
    assert!(
        removed.json().get("refundPolicy").is_none(),
        "{}",
        removed.json()
    );
    let closed = refund(&app, "ann", &order_id, "p2", json!({})).await;
    assert_eq!(closed.code(), "REFUND_NOT_ALLOWED", "{}", closed.json());
    app.finish().await;
}
