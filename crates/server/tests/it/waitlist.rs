//! Waiting-list stories over HTTP on both backends (issue 19, item 2): offers in order,
//! whole or nothing, a lapsed offer going to the next entry, never two offers of one seat
//! (every story ends with `boxoffice check`'s rules, which cover the list), an offer paid
//! through the ordinary checkout, leaving, retries, conflicts and validation; entries nothing
//! satisfies never keep a later one from its offer (issue 35, item 5).

use crate::common;

use std::time::Duration;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    freed_seats_are_offered_in_order_whole_or_nothing,
    joining_leaving_and_bad_requests,
    the_300th_entry_is_offered_when_the_first_299_cannot_be_satisfied,
);

async fn join(
    app: &TestApp,
    account: &str,
    event_id: &str,
    key: &str,
    body: Value,
) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/events/{event_id}/waitlist"),
        Some(key),
        &body,
    )
    .await
}

async fn entry(app: &TestApp, account: &str, event_id: &str, waitlist_id: &str) -> Value {
    app.get(
        &token(account),
        &format!("/v1/events/{event_id}/waitlist/{waitlist_id}"),
    )
    .await
    .json()
}

/// Polls the entry until its status is `status` (bounded: 20 s).
async fn entry_until(
    app: &TestApp,
    account: &str,
    event_id: &str,
    waitlist_id: &str,
    status: &str,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..200 {
        last = entry(app, account, event_id, waitlist_id).await;
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("entry {waitlist_id} never reached {status}: {last}");
}

fn id(answer: &common::Answer) -> String {
    answer.json()["waitlistId"].as_str().unwrap().to_owned()
}

async fn freed_seats_are_offered_in_order_whole_or_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 1000}],
            "tiers": [],
            "waitlistOfferTtlSeconds": 60,
        }))
        .await;
    // Sold out: ann holds the whole house.
    let all = json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3", "A-1-4"]});
    let held = app.hold("ann", &event_id, "all", all).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let ann_hold = held.json()["holdId"].as_str().unwrap().to_owned();

    // Three parties wait: 3 together, 2 anywhere, 1.
    let bob = join(&app, "bob", &event_id, "w", json!({"quantity": 3})).await;
    assert_eq!(bob.status, StatusCode::CREATED, "{}", bob.json());
    assert_eq!(bob.json()["status"], "WAITING");
    assert_eq!(bob.json()["position"], 1);
    let cat = join(
        &app,
        "cat",
        &event_id,
        "w",
        json!({"quantity": 2, "together": false}),
    )
    .await;
    assert_eq!(cat.json()["position"], 2);
    let dan = join(&app, "dan", &event_id, "w", json!({"quantity": 1})).await;
    assert_eq!(dan.json()["position"], 3);
    let (bob, cat, dan) = (id(&bob), id(&cat), id(&dan));

    // Ann lets the seats go: bob gets three together, cat (two) cannot be satisfied by the
    // one left and keeps her place, dan gets the last.
    let released = app
        .delete(&token("ann"), &format!("/v1/holds/{ann_hold}"))
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    let bob_offer = entry_until(&app, "bob", &event_id, &bob, "OFFERED").await;
    let dan_offer = entry_until(&app, "dan", &event_id, &dan, "OFFERED").await;
    let cat_entry = entry(&app, "cat", &event_id, &cat).await;
    assert_eq!(cat_entry["status"], "WAITING", "{cat_entry}");
    assert_eq!(cat_entry["position"], 1);
    let bob_hold = bob_offer["holdId"].as_str().unwrap().to_owned();
    let hold = app
        .get(&token("bob"), &format!("/v1/holds/{bob_hold}"))
        .await
        .json();
    assert_eq!(hold["status"], "HELD");
    let seats: Vec<&str> = hold["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seatId"].as_str().unwrap())
        .collect();
    assert_eq!(seats.len(), 3, "{hold}");
    assert!(
        !seats.contains(&"A-1-4") || !seats.contains(&"A-1-1"),
        "adjacent: {seats:?}"
    );
    // Another account cannot see or pay the offer.
    assert_eq!(
        app.get(
            &token("eve"),
            &format!("/v1/events/{event_id}/waitlist/{bob}")
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    // Nobody else can hold an offered seat.
    let grab = app
        .hold("eve", &event_id, "grab", json!({"seatIds": [seats[0]]}))
        .await;
    assert_eq!(grab.status, StatusCode::CONFLICT, "{}", grab.json());

    // Bob pays through the ordinary checkout.
    let paid = app
        .post(
            &token("bob"),
            &format!("/v1/holds/{bob_hold}/checkout"),
            Some("pay-bob"),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    entry_until(&app, "bob", &event_id, &bob, "PURCHASED").await;

    // Eve waits for one seat behind cat; dan's offer lapses: cat (two) still cannot be
    // satisfied, eve gets dan's seat.
    let eve = join(&app, "eve", &event_id, "w", json!({"quantity": 1})).await;
    assert_eq!(eve.json()["position"], 2, "{}", eve.json());
    let eve = id(&eve);
    assert!(dan_offer["expiresAt"].is_string(), "{dan_offer}");
    app.db.advance_clock(61_000).await;
    entry_until(&app, "dan", &event_id, &dan, "LAPSED").await;
    let eve_offer = entry_until(&app, "eve", &event_id, &eve, "OFFERED").await;
    let eve_hold = eve_offer["holdId"].as_str().unwrap();
    let hold = app
        .get(&token("eve"), &format!("/v1/holds/{eve_hold}"))
        .await
        .json();
    assert_eq!(
        hold["seats"][0]["seatId"],
        dan_offer_seat(&app, &dan_offer).await
    );
    assert_eq!(
        entry(&app, "cat", &event_id, &cat).await["status"],
        "WAITING"
    );

    // Told through the outbox: three offers, each of its own hold.
    let offers = common::outbox_payloads(&app, "waitlist.offered").await;
    assert_eq!(offers.len(), 3, "{offers:?}");
    app.finish().await;
}

/// The seat of dan's (lapsed) offer, read from its hold.
async fn dan_offer_seat(app: &TestApp, offer: &Value) -> Value {
    let hold_id = offer["holdId"].as_str().unwrap();
    app.get(&token("dan"), &format!("/v1/holds/{hold_id}"))
        .await
        .json()["seats"][0]["seatId"]
        .clone()
}

async fn joining_leaving_and_bad_requests(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({"sections": [
            {"name": "A", "rows": 20, "seatsPerRow": 30, "priceMinor": 1000},
            {"name": "B", "rows": 1, "seatsPerRow": 2, "priceMinor": 5000},
        ]}))
        .await;
    // Seats are free: a join is offered at once.
    let at_once = join(&app, "ann", &event_id, "k1", json!({"quantity": 2})).await;
    assert_eq!(at_once.status, StatusCode::CREATED, "{}", at_once.json());
    assert_eq!(at_once.json()["status"], "OFFERED", "{}", at_once.json());
    assert!(at_once.json()["holdId"].is_string());
    // The same key and body: the same entry; another body: refused; another key: the live
    // entry is named.
    let again = join(&app, "ann", &event_id, "k1", json!({"quantity": 2})).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json()["waitlistId"], at_once.json()["waitlistId"]);
    let reused = join(&app, "ann", &event_id, "k1", json!({"quantity": 1})).await;
    assert_eq!(reused.code(), "IDEMPOTENCY_KEY_REUSED", "{}", reused.json());
    let second = join(&app, "ann", &event_id, "k2", json!({"quantity": 1})).await;
    assert_eq!(
        (second.status, second.code().as_str()),
        (StatusCode::CONFLICT, "WAITLIST_CONFLICT"),
        "{}",
        second.json()
    );
    assert_eq!(second.json()["waitlistId"], at_once.json()["waitlistId"]);
    // An offered entry is left by releasing its hold.
    let offered = id(&at_once);
    let path = format!("/v1/events/{event_id}/waitlist/{offered}");
    assert_eq!(
        app.delete(&token("ann"), &path).await.code(),
        "WAITLIST_CONFLICT"
    );

    // A waiting entry (three seats of a section of two keep it waiting) leaves, once or
    // twice.
    let waiting = join(
        &app,
        "bob",
        &event_id,
        "k1",
        json!({"quantity": 3, "section": "B"}),
    )
    .await;
    assert_eq!(waiting.json()["status"], "WAITING", "{}", waiting.json());
    let waiting = id(&waiting);
    let path = format!("/v1/events/{event_id}/waitlist/{waiting}");
    assert_eq!(
        app.get(&token("eve"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&token("eve"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    let left = app.delete(&token("bob"), &path).await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.json());
    assert_eq!(left.json()["status"], "LEFT");
    assert_eq!(
        app.delete(&token("bob"), &path).await.status,
        StatusCode::OK
    );
    // Having left, bob may join again.
    let back = join(
        &app,
        "bob",
        &event_id,
        "k2",
        json!({"quantity": 3, "section": "B", "maxPriceMinor": 5000}),
    )
    .await;
    assert_eq!(back.status, StatusCode::CREATED, "{}", back.json());
    assert_eq!(back.json()["status"], "WAITING", "{}", back.json());

    for (body, field) in [
        (json!({"quantity": 0}), "quantity"),
        (json!({"quantity": 7}), "quantity"),
        (json!({"quantity": 1, "section": "Z"}), "section"),
        (json!({"quantity": 1, "maxPriceMinor": -1}), "maxPriceMinor"),
        // Under the event's cheapest seat, or under the named section's.
        (
            json!({"quantity": 1, "maxPriceMinor": 999}),
            "maxPriceMinor",
        ),
        (
            json!({"quantity": 1, "section": "B", "maxPriceMinor": 4999}),
            "maxPriceMinor",
        ),
        (json!({"quantity": 1, "extra": true}), "extra"),
    ] {
        let refused = join(
            &app,
            "cat",
            &event_id,
            &uuid::Uuid::now_v7().to_string(),
            body.clone(),
        )
        .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            refused.json()
        );
        assert!(
            refused.json().to_string().contains(field),
            "{body}: {}",
            refused.json()
        );
    }
    let no_key = app
        .post(
            &token("cat"),
            &format!("/v1/events/{event_id}/waitlist"),
            None,
            &json!({"quantity": 1}),
        )
        .await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    let nowhere = join(&app, "cat", "no-such-event", "k", json!({"quantity": 1})).await;
    assert_eq!(nowhere.status, StatusCode::NOT_FOUND);
    let ga = app
        .create_event(json!({"sections": [], "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 10, "priceMinor": 500}]}))
        .await;
    let no_seats = join(&app, "cat", &ga, "k", json!({"quantity": 1})).await;
    assert_eq!(
        no_seats.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        no_seats.json()
    );
    app.finish().await;
}

/// 299 entries that the seats coming back cannot satisfy — more seats than come back, a
/// section nothing comes back in, a party together larger than a row — stand before one that
/// they can: that one is offered (in the group that freed the seats), the 299 keep their
/// places, and nothing is split.
async fn the_300th_entry_is_offered_when_the_first_299_cannot_be_satisfied(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [
                {"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 1000},
                {"name": "B", "rows": 1, "seatsPerRow": 4, "priceMinor": 2000},
            ],
            "tiers": [],
        }))
        .await;
    let ann = app
        .hold(
            "ann",
            &event_id,
            "all-a",
            json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3", "A-1-4"]}),
        )
        .await;
    assert_eq!(ann.status, StatusCode::CREATED, "{}", ann.json());
    let bea = app
        .hold(
            "bea",
            &event_id,
            "all-b",
            json!({"seatIds": ["B-1-1", "B-1-2", "B-1-3", "B-1-4"]}),
        )
        .await;
    assert_eq!(bea.status, StatusCode::CREATED, "{}", bea.json());
    // A cap under section B's cheapest seat is refused rather than kept waiting for ever.
    let refused = join(
        &app,
        "fan-cap",
        &event_id,
        "k",
        json!({"quantity": 1, "section": "B", "maxPriceMinor": 1000}),
    )
    .await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION"),
        "{}",
        refused.json()
    );

    let mut first = String::new();
    for n in 0..299 {
        let body = match n % 3 {
            0 => json!({"quantity": 5, "together": false}),
            1 => json!({"quantity": 1, "section": "B"}),
            _ => json!({"quantity": 5}),
        };
        let joined = join(&app, &format!("fan-{n:03}"), &event_id, "k", body).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.json());
        assert_eq!(joined.json()["status"], "WAITING", "{}", joined.json());
        assert_eq!(joined.json()["position"], n + 1);
        if n == 0 {
            first = id(&joined);
        }
    }
    let last = join(
        &app,
        "fan-299",
        &event_id,
        "k",
        json!({"quantity": 2, "maxPriceMinor": 1000}),
    )
    .await;
    assert_eq!(last.json()["position"], 300, "{}", last.json());
    let last = id(&last);

    // Ann's four seats of A come back: only the 300th entry can be satisfied whole.
    let ann_hold = ann.json()["holdId"].as_str().unwrap().to_owned();
    let released = app
        .delete(&token("ann"), &format!("/v1/holds/{ann_hold}"))
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    let offer = entry_until(&app, "fan-299", &event_id, &last, "OFFERED").await;
    let hold_id = offer["holdId"].as_str().unwrap();
    let hold = app
        .get(&token("fan-299"), &format!("/v1/holds/{hold_id}"))
        .await
        .json();
    let seats: Vec<&str> = hold["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seatId"].as_str().unwrap())
        .collect();
    assert_eq!(seats.len(), 2, "{hold}");
    assert!(seats.iter().all(|s| s.starts_with("A-")), "{hold}");
    let front = entry(&app, "fan-000", &event_id, &first).await;
    assert_eq!(
        (front["status"].as_str(), front["position"].as_u64()),
        (Some("WAITING"), Some(1)),
        "{front}"
    );
    let offers = common::outbox_payloads(&app, "waitlist.offered").await;
    assert_eq!(offers.len(), 1, "{offers:?}");
    app.finish().await;
}
