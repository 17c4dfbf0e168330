//! Ticket types, fees and tax shown all-in (issue 40) over HTTP on both backends: holds priced
//! per ticket type (named seats, best available, a tier), the worked example's amounts equal
//! to the cent in the hold, the order, the payment, the report and its CSV, `boxoffice
//! check`'s rule that an order costs the sum of its lines, the requests a type refuses, and
//! promo codes: a worked discount to the cent, and a code of one use raced by four checkouts.

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    adult_and_child_seats_are_priced_all_in_to_the_cent_from_hold_to_report,
    best_available_and_tiers_sell_types_and_compare_all_in_prices,
    a_ticket_type_request_that_does_not_fit_is_refused_by_field,
    a_promo_code_reprices_the_checkout_to_the_cent_and_racing_checkouts_use_it_once,
    a_fan_refund_gives_back_each_tickets_all_in_price,
);

/// Section A sells adult and child, section B only the standard type; a VAT of 20 %
/// included; a service fee per ticket of 1.50 + 2.5 % of the face; a booking fee of 3.00
/// per order.
fn priced_event() -> Value {
    json!({
        "sections": [
            {"name": "A", "rows": 1, "seatsPerRow": 10, "priceMinor": 4900},
            {"name": "B", "rows": 1, "seatsPerRow": 10, "priceMinor": 3000}
        ],
        "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 50, "priceMinor": 2000}],
        "ticketTypes": [
            {"typeId": "adult", "name": "Adult", "prices": {"A": 4900, "GA": 2000}},
            {"typeId": "child", "name": "Child", "prices": {"A": 2500, "GA": 1000},
             "maxPerOrder": 2}
        ],
        "fees": [
            {"name": "Service", "per": "ticket", "fixedMinor": 150, "shareBp": 250},
            {"name": "Booking", "per": "order", "fixedMinor": 300}
        ],
        "tax": {"name": "VAT", "rateBp": 2000, "included": true}
    })
}

async fn hold(app: &TestApp, account: &str, event_id: &str, body: Value) -> common::Answer {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    app.hold(account, event_id, &key, body).await
}

fn breakdown(face: i64, fees: i64, tax: i64, order_fees: i64, total: i64) -> Value {
    json!({
        "faceMinor": face,
        "discountMinor": 0,
        "feesMinor": fees,
        "taxMinor": tax,
        "orderFeesMinor": order_fees,
        "totalMinor": total
    })
}

async fn adult_and_child_seats_are_priced_all_in_to_the_cent_from_hold_to_report(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(priced_event()).await;

    // The event shows each place's all-in prices. Adult at A: face 4900, fees 150 + 122.5 →
    // 123 = 273, VAT included round(5173 × 0.2 / 1.2 = 862.17) = 862, all-in 5173.
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    let a = &event["sections"][0];
    assert_eq!(a["allInPriceMinor"], 5173, "{event}");
    let child_at_a = a["ticketPrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["ticketType"] == "child")
        .unwrap()
        .clone();
    assert_eq!(
        child_at_a,
        json!({"ticketType": "child", "faceMinor": 2500, "feesMinor": 213, "taxMinor": 452,
               "allInMinor": 2713})
    );
    let b_types: Vec<&str> = event["sections"][1]["ticketPrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ticketType"].as_str().unwrap())
        .collect();
    assert_eq!(b_types, ["standard"], "B sells only the standard type");

    // Two adults and a child: types go to the seats in the hold's seat order.
    let held = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3"], "ticketTypes": {"child": 1, "adult": 2}}),
    )
    .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let held = held.json();
    let seats = held["seats"].as_array().unwrap();
    let types: Vec<&str> = seats
        .iter()
        .map(|s| s["ticketType"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["adult", "adult", "child"]);
    assert_eq!(
        seats[0],
        json!({"seatId": "A-1-1", "priceMinor": 5173, "ticketType": "adult", "faceMinor": 4900,
               "feesMinor": 273, "taxMinor": 862})
    );
    // Child: face 2500, fees 150 + 62.5 → 63 = 213, VAT round(2713 / 6 = 452.17) = 452.
    assert_eq!(
        seats[2],
        json!({"seatId": "A-1-3", "priceMinor": 2713, "ticketType": "child", "faceMinor": 2500,
               "feesMinor": 213, "taxMinor": 452})
    );
    // The booking fee 300 carries VAT round(300 / 6) = 50. Total 2 × 5173 + 2713 + 300.
    let expected = breakdown(12_300, 759, 2 * 862 + 452 + 50, 300, 13_359);
    assert_eq!(held["totalMinor"], 13_359, "{held}");
    assert_eq!(held["breakdown"], expected, "{held}");
    assert_eq!(held["lines"].as_array().unwrap().len(), 3);
    let hold_id = held["holdId"].as_str().unwrap();

    // Read back, the hold says the same.
    let read = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    assert_eq!(read["breakdown"], expected, "{read}");
    assert_eq!(read["seats"], held["seats"]);

    // The order and its payment cost the all-in total.
    let paid = app
        .post(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some(&format!("pay-{hold_id}")),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order = common::order_until(&app, "ann", &order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == 3)
    })
    .await;
    assert_eq!(order["totalMinor"], 13_359, "{order}");
    assert_eq!(order["breakdown"], expected, "{order}");
    assert_eq!(order["lines"], held["lines"]);
    assert_eq!(order["seats"], held["seats"]);

    // The report splits the sale; the payment charged the total.
    let report = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/report"))
        .await
        .json();
    assert_eq!(report["totals"]["chargedMinor"], 13_359, "{report}");
    let sales = &report["sales"];
    assert_eq!(sales["faceMinor"], 12_300, "{report}");
    assert_eq!(sales["feesMinor"], 759);
    assert_eq!(sales["taxMinor"], 2226);
    assert_eq!(sales["orderFeesMinor"], 300);
    assert_eq!(sales["orderFeesTaxMinor"], 50);
    assert_eq!(sales["totalMinor"], 13_359);
    assert_eq!(
        sales["lines"][0],
        json!({"kind": "section", "id": "A", "faceMinor": 12_300, "discountMinor": 0,
               "feesMinor": 759, "taxMinor": 2176, "allInMinor": 13_059})
    );
    let csv = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/report.csv"),
        )
        .await;
    assert_eq!(csv.status, StatusCode::OK);
    let text = String::from_utf8(csv.bytes.clone()).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|line| line.trim_end_matches('\r').split(',').collect())
        .collect();
    let column = |name: &str| rows[0].iter().position(|h| *h == name).unwrap();
    let row_a = rows.iter().find(|r| r[1] == "A").unwrap();
    assert_eq!(row_a[column("faceMinor")], "12300", "{text}");
    assert_eq!(row_a[column("feesMinor")], "759", "{text}");
    assert_eq!(row_a[column("taxMinor")], "2176", "{text}");
    let total = rows.last().unwrap();
    assert_eq!(total[0], "total");
    assert_eq!(total[column("orderFeesMinor")], "300", "{text}");
    assert_eq!(total[column("totalMinor")], "13359", "{text}");

    // `boxoffice check`: the order's total is the sum of its lines.
    app.db.assert_invariants().await;
    app.finish().await;
}

async fn best_available_and_tiers_sell_types_and_compare_all_in_prices(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(priced_event()).await;

    // The cap is the standard ticket's all-in price: at 5172, one under A's 5173, section A
    // has nothing to offer.
    let capped = hold(
        &app,
        "ann",
        &event_id,
        json!({"bestAvailable": {"quantity": 2, "section": "A", "maxPriceMinor": 5172}}),
    )
    .await;
    assert_eq!(capped.status, StatusCode::CONFLICT, "{}", capped.json());
    assert_eq!(capped.code(), "SEATS_UNAVAILABLE");
    let seated = hold(
        &app,
        "ann",
        &event_id,
        json!({"bestAvailable": {"quantity": 2, "section": "A", "maxPriceMinor": 5173},
               "ticketTypes": {"child": 2}}),
    )
    .await;
    assert_eq!(seated.status, StatusCode::CREATED, "{}", seated.json());
    let seated = seated.json();
    assert!(
        seated["seats"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["ticketType"] == "child" && s["priceMinor"] == 2713),
        "{seated}"
    );
    assert_eq!(seated["totalMinor"], 2 * 2713 + 300);

    // A tier: units have lines but no seats. Adult 2000 at GA: fees 150 + 50 = 200, VAT
    // round(2200 / 6 = 366.67) = 367; child 1000: fees 175, VAT round(1175 / 6) = 196.
    let floor = hold(
        &app,
        "bob",
        &event_id,
        json!({"tierId": "GA", "quantity": 2, "ticketTypes": {"adult": 1, "child": 1}}),
    )
    .await;
    assert_eq!(floor.status, StatusCode::CREATED, "{}", floor.json());
    let floor = floor.json();
    assert_eq!(floor["seats"], json!([]));
    let lines = floor["lines"].as_array().unwrap();
    assert_eq!(
        lines[0],
        json!({"ticketType": "adult", "faceMinor": 2000, "discountMinor": 0, "feesMinor": 200,
               "taxMinor": 367, "allInMinor": 2200})
    );
    assert_eq!(lines[1]["allInMinor"], 1175);
    assert_eq!(lines[1]["taxMinor"], 196);
    assert_eq!(
        floor["breakdown"],
        breakdown(3000, 375, 367 + 196 + 50, 300, 3675)
    );

    // Added tax on an event without types: GA 2000, a 10 % fee, 8.88 % added per line:
    // 2200 → tax round(195.36) = 195, all-in 2395.
    let added = app
        .create_event(json!({
            "sections": [],
            "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 10, "priceMinor": 2000}],
            "fees": [{"name": "Service", "per": "ticket", "shareBp": 1000}],
            "tax": {"name": "Sales tax", "rateBp": 888, "included": false}
        }))
        .await;
    let (order_id, _) =
        common::buy_captured(&app, "cat", &added, json!({"tierId": "GA", "quantity": 2})).await;
    let order = app
        .get(&token("cat"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(
        order["breakdown"],
        breakdown(4000, 400, 390, 0, 4790),
        "{order}"
    );
    app.db.assert_invariants().await;
    app.finish().await;
}

async fn a_ticket_type_request_that_does_not_fit_is_refused_by_field(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(priced_event()).await;
    let refused = |body: Value| {
        let app = &app;
        let event_id = event_id.clone();
        async move {
            let answer = hold(app, "ann", &event_id, body).await;
            assert_eq!(
                answer.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{}",
                answer.json()
            );
            assert_eq!(answer.code(), "VALIDATION");
            assert_eq!(answer.json()["field"], "ticketTypes", "{}", answer.json());
            answer.json()["detail"].as_str().unwrap().to_owned()
        }
    };
    let seats = json!(["A-1-1", "A-1-2", "A-1-3"]);
    // Over the child type's maxPerOrder (2).
    let detail = refused(json!({"seatIds": seats, "ticketTypes": {"child": 3}})).await;
    assert!(detail.contains("at most 2"), "{detail}");
    // Counts that do not sum to the hold's seats.
    refused(json!({"seatIds": seats, "ticketTypes": {"adult": 2}})).await;
    // A type the event does not sell.
    refused(json!({"seatIds": seats, "ticketTypes": {"senior": 3}})).await;
    // A section that does not sell the type.
    let detail = refused(json!({"seatIds": ["B-1-1"], "ticketTypes": {"child": 1}})).await;
    assert!(detail.contains("not sold in B"), "{detail}");
    // Nothing was held: the seats are all still free.
    assert!(app.holdable("bob", &event_id, "A-1-1").await);
    assert!(app.holdable("bob", &event_id, "B-1-1").await);

    // A bad setup is refused on creation, by field.
    let bad = app
        .post(
            &app.admin,
            "/v1/admin/events",
            Some("bad-setup"),
            &json!({
                "name": "Bad", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 1, "priceMinor": 100}],
                "ticketTypes": [{"typeId": "standard", "name": "Again", "prices": {"A": 1}}]
            }),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        bad.json()["field"],
        "ticketTypes[0].typeId",
        "{}",
        bad.json()
    );
    app.finish().await;
}

async fn create_code(app: &TestApp, event_id: &str, key: &str, body: Value) -> common::Answer {
    app.post(
        &app.admin,
        &format!("/v1/admin/events/{event_id}/promo-codes"),
        Some(key),
        &body,
    )
    .await
}

async fn checkout_with(app: &TestApp, account: &str, hold_id: &str, code: &str) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/holds/{hold_id}/checkout"),
        Some(&format!("pay-{hold_id}")),
        &json!({"paymentMethodToken": "pm_card_visa", "promoCode": code}),
    )
    .await
}

async fn a_promo_code_reprices_the_checkout_to_the_cent_and_racing_checkouts_use_it_once(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(priced_event()).await;

    // 10 % off adult tickets, once; a retry of the creation answers the same.
    let body = json!({"code": "Save10", "percentOffBp": 1000, "ticketTypes": ["adult"],
                      "maxUses": 1});
    let created = create_code(&app, &event_id, "code-1", body.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    assert_eq!(created.json()["code"], "SAVE10");
    let again = create_code(&app, &event_id, "code-1", body.clone()).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let twice = create_code(&app, &event_id, "code-2", body).await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    assert_eq!(twice.code(), "PROMO_CODE_EXISTS");
    let both = create_code(
        &app,
        &event_id,
        "code-3",
        json!({"code": "X", "percentOffBp": 10, "amountOffMinor": 10, "maxUses": 1}),
    )
    .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
    let no_uses = create_code(
        &app,
        &event_id,
        "code-5",
        json!({"code": "ZERO", "amountOffMinor": 10, "maxUses": 0}),
    )
    .await;
    assert_eq!(no_uses.json()["field"], "maxUses", "{}", no_uses.json());
    // A fan is not an organiser; an unknown event is not found.
    let fan = app
        .post(
            &token("ann"),
            &format!("/v1/admin/events/{event_id}/promo-codes"),
            Some("code-fan"),
            &json!({"code": "MINE", "amountOffMinor": 10, "maxUses": 1}),
        )
        .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN);
    let unknown = app
        .get(&app.admin, "/v1/admin/events/no-such-event/promo-codes")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let once = create_code(
        &app,
        &event_id,
        "code-4",
        json!({"code": "ONCE", "amountOffMinor": 1000, "maxUses": 1}),
    )
    .await;
    assert_eq!(once.status, StatusCode::CREATED, "{}", once.json());

    // An adult and a child; the code comes off the adult's face only. Adult: 4900 - 490 =
    // 4410, fees 150 + 110.25 → 110 = 260, VAT round(4670 / 6 = 778.33) = 778, all-in 4670.
    // Child as before: 2713 (VAT 452). Booking fee 300 (VAT 50). Total 7683.
    let held = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-4", "A-1-5"], "ticketTypes": {"adult": 1, "child": 1}}),
    )
    .await;
    assert_eq!(
        held.json()["totalMinor"],
        5173 + 2713 + 300,
        "{}",
        held.json()
    );
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
    let unknown = checkout_with(&app, "ann", &hold_id, "NOPE").await;
    assert_eq!(unknown.status, StatusCode::CONFLICT, "{}", unknown.json());
    assert_eq!(unknown.code(), "PROMO_CODE_INVALID");
    let paid = checkout_with(&app, "ann", &hold_id, "save10").await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order =
        common::order_until(&app, "ann", &order_id, |o| o["paymentStatus"] == "CAPTURED").await;
    assert_eq!(order["totalMinor"], 7683, "{order}");
    assert_eq!(
        order["breakdown"],
        json!({"faceMinor": 6910, "discountMinor": 490, "feesMinor": 473,
               "taxMinor": 778 + 452 + 50, "orderFeesMinor": 300, "totalMinor": 7683})
    );
    assert_eq!(
        order["lines"][0],
        json!({"seatId": "A-1-4", "ticketType": "adult", "faceMinor": 4410,
               "discountMinor": 490, "feesMinor": 260, "taxMinor": 778, "allInMinor": 4670})
    );
    assert_eq!(order["seats"][0]["priceMinor"], 4670);
    // A retry of the checkout is a replay; the code is not counted again.
    let replay = checkout_with(&app, "ann", &hold_id, "save10").await;
    assert_eq!(replay.json()["orderId"], order_id.as_str());
    // The code is used up now.
    let other = hold(&app, "bob", &event_id, json!({"seatIds": ["A-1-6"]})).await;
    let other_id = other.json()["holdId"].as_str().unwrap().to_owned();
    let used_up = checkout_with(&app, "bob", &other_id, "SAVE10").await;
    assert_eq!(used_up.code(), "PROMO_CODE_INVALID");
    assert!(
        used_up.json()["detail"]
            .as_str()
            .unwrap()
            .contains("used up")
    );
    // Codes outside their validity, by the store's clock.
    for (code, window, why) in [
        (
            "LATE",
            json!({"validUntil": "2020-01-01T00:00:00Z"}),
            "expired",
        ),
        (
            "SOON",
            json!({"validFrom": "2099-01-01T00:00:00Z"}),
            "not valid yet",
        ),
    ] {
        let mut body = json!({"code": code, "amountOffMinor": 100, "maxUses": 5});
        for (k, v) in window.as_object().unwrap() {
            body[k] = v.clone();
        }
        let made = create_code(&app, &event_id, &format!("code-{code}"), body).await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.json());
        let refused = checkout_with(&app, "bob", &other_id, code).await;
        assert_eq!(refused.code(), "PROMO_CODE_INVALID");
        let detail = refused.json()["detail"].as_str().unwrap().to_owned();
        assert!(detail.contains(why), "{detail}");
    }

    // Four fans race for the one use of ONCE: one order is discounted (face 3900, fees 150
    // + 97.5 → 98, all-in 4148, + 300), the others are refused and can pay full price.
    let fans = ["f1", "f2", "f3", "f4"];
    let mut holds = Vec::new();
    for (i, fan) in fans.iter().enumerate() {
        let seat = format!("A-1-{}", 7 + i);
        let held = hold(&app, fan, &event_id, json!({"seatIds": [seat]})).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
        holds.push(held.json()["holdId"].as_str().unwrap().to_owned());
    }
    let answers = futures_util::future::join_all(
        fans.iter()
            .zip(&holds)
            .map(|(fan, hold_id)| checkout_with(&app, fan, hold_id, "once")),
    )
    .await;
    let won: Vec<&common::Answer> = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .collect();
    assert_eq!(won.len(), 1, "one discounted checkout");
    for answer in answers.iter().filter(|a| a.status != StatusCode::CREATED) {
        assert_eq!(answer.code(), "PROMO_CODE_INVALID");
    }
    let winner = won[0].json()["orderId"].as_str().unwrap().to_owned();
    let (fan, _) = fans
        .iter()
        .zip(&answers)
        .find(|(_, a)| a.status == StatusCode::CREATED)
        .unwrap();
    let order = common::order_until(&app, fan, &winner, |o| o["paymentStatus"] == "CAPTURED").await;
    assert_eq!(order["totalMinor"], 4448, "{order}");
    let codes = app
        .get(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/promo-codes"),
        )
        .await
        .json();
    let uses: Vec<(String, u64)> = codes["promoCodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["code"].as_str().unwrap().to_owned(),
                c["uses"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        uses,
        [
            ("LATE".to_owned(), 0),
            ("ONCE".to_owned(), 1),
            ("SAVE10".to_owned(), 1),
            ("SOON".to_owned(), 0)
        ]
    );
    app.db.assert_invariants().await;
    app.finish().await;
}

/// A refund gives back what a ticket cost the fan: its all-in price (the order's own fee
/// stays with the organiser, as the refund policy's kept fee does); an exchange compares the
/// old and the new tickets' all-in prices.
async fn a_fan_refund_gives_back_each_tickets_all_in_price(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let mut event = priced_event();
    event["refundPolicy"] = json!({"fanRefundCutoffSeconds": 0, "keepFeeMinor": 0});
    let event_id = app.create_event(event).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"], "ticketTypes": {"adult": 1, "child": 1}}),
    )
    .await;
    let child = tickets.iter().find(|t| t["seatId"] == "A-1-2").unwrap();
    let path = format!("/v1/orders/{order_id}/refunds");
    let body = json!({"ticketIds": [child["ticketId"]]});
    let first = app.post(&token("ann"), &path, Some("r-child"), &body).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.json());
    assert_eq!(first.json()["amountMinor"], 2713);
    let rest = app
        .post(&token("ann"), &path, Some("r-rest"), &json!({}))
        .await;
    assert_eq!(rest.status, StatusCode::ACCEPTED, "{}", rest.json());
    assert_eq!(rest.json()["amountMinor"], 5173);

    // An exchange values both sides all-in: an adult at A (5173) for a standard seat at B
    // (3000 + 150 + 75 = 3225) gives 1948 back.
    let (adult_order, _) = common::buy_captured(
        &app,
        "bob",
        &event_id,
        json!({"seatIds": ["A-1-5"], "ticketTypes": {"adult": 1}}),
    )
    .await;
    let moved = app
        .post(
            &token("bob"),
            &format!("/v1/orders/{adult_order}/exchanges"),
            Some("x-bob"),
            &json!({"fromSeatIds": ["A-1-5"], "toSeatIds": ["B-1-1"]}),
        )
        .await;
    assert_eq!(
        moved.json()["amountDueMinor"],
        3225 - 5173,
        "{}",
        moved.json()
    );
    app.db.assert_invariants().await;
    app.finish().await;
}
