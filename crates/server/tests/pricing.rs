//! Ticket types, fees and tax shown all-in (issue 40) over HTTP on both backends: holds priced
//! per ticket type (named seats, best available, a tier), the worked example's amounts equal
//! to the cent in the hold, the order, the payment, the report and its CSV, `boxoffice
//! check`'s rule that an order costs the sum of its lines, and the requests a type refuses.

mod common;

use common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    adult_and_child_seats_are_priced_all_in_to_the_cent_from_hold_to_report,
    best_available_and_tiers_sell_types_and_compare_all_in_prices,
    a_ticket_type_request_that_does_not_fit_is_refused_by_field,
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
