//! Ticket holders over HTTP on both backends (issue 39, item 4): the event's questions asked
//! before payment (the checkout refused until every ticket has what the policy requires),
//! the holders carried onto the issued tickets, shown to the door, changed by the owner until
//! the cutoff by the store's clock; a transfer's receiver holds the new tickets; anyone
//! else's request is a 404.

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    holders_asked_before_payment_ride_on_the_tickets_to_the_door,
    a_holder_changes_until_the_cutoff_and_a_transfer_leaves_the_receiver_holding,
);

fn policy() -> Value {
    json!({
        "nameRequired": true,
        "questions": [
            {"questionId": "dob", "label": "Date of birth", "kind": "DATE", "required": true},
            {"questionId": "club", "label": "Supporters' club", "kind": "TEXT", "required": false}
        ],
        "changeCutoffSeconds": 3600
    })
}

async fn hold(app: &TestApp, account: &str, event_id: &str, body: Value) -> String {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    let held = app.hold(account, event_id, &key, body).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    held.json()["holdId"].as_str().unwrap().to_owned()
}

async fn checkout(app: &TestApp, account: &str, hold_id: &str) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/holds/{hold_id}/checkout"),
        Some(&format!("pay-{hold_id}")),
        &json!({"paymentMethodToken": "pm_card_visa"}),
    )
    .await
}

async fn put_holders(
    app: &TestApp,
    account: &str,
    hold_id: &str,
    holders: Value,
) -> common::Answer {
    app.put(
        &token(account),
        &format!("/v1/holds/{hold_id}/holders"),
        &json!({ "holders": holders }),
    )
    .await
}

async fn tickets_of(app: &TestApp, account: &str, order_id: &str, n: usize) -> Vec<Value> {
    let order = common::order_until(app, account, order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == n)
    })
    .await;
    order["tickets"].as_array().unwrap().clone()
}

fn by_seat<'a>(tickets: &'a [Value], seat: &str) -> &'a Value {
    tickets.iter().find(|t| t["seatId"] == seat).unwrap()
}

async fn holders_asked_before_payment_ride_on_the_tickets_to_the_door(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({ "holderPolicy": policy() })).await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(event["holderPolicy"], policy(), "{event}");

    let hold_id = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    // Nothing given yet: the checkout names what is missing, and writes nothing.
    let refused = checkout(&app, "ann", &hold_id).await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "HOLDERS_REQUIRED"),
        "{}",
        refused.json()
    );

    // Bad input is refused with the field that is wrong.
    for (holders, field) in [
        (
            json!([{"seatId": "A-1-1", "name": "Ada", "answers": {"dob": "1990-02-30"}}]),
            "holders[0].answers.dob",
        ),
        (
            json!([{"seatId": "A-1-1", "answers": {"shoe": "42"}}]),
            "holders[0].answers.shoe",
        ),
        (json!([{"seatId": "B-9-9", "name": "Ada"}]), "holders[0]"),
        (json!([{"unit": 1, "name": "Ada"}]), "holders[0]"),
        (
            json!([{"seatId": "A-1-1", "name": "Ada"}, {"seatId": "A-1-1", "name": "Bob"}]),
            "holders[1]",
        ),
        (
            json!([{"seatId": "A-1-1", "unit": 1, "name": "Ada"}]),
            "holders[0]",
        ),
        (json!([{"seatId": "A-1-1", "name": " "}]), "holders[0].name"),
    ] {
        let answer = put_holders(&app, "ann", &hold_id, holders.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{holders}: {}",
            answer.json()
        );
        assert!(
            answer.json().to_string().contains(field),
            "{holders}: {} should name {field}",
            answer.json()
        );
    }
    // Someone else's hold does not exist for them.
    let theirs = put_holders(&app, "eve", &hold_id, json!([])).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&token("eve"), &format!("/v1/holds/{hold_id}/holders"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // One ticket named: the other still lacks its holder.
    let ada = json!({"seatId": "A-1-1", "name": "Ada Lovelace", "answers": {"dob": "1990-01-31", "club": "North"}});
    let given = put_holders(&app, "ann", &hold_id, json!([ada])).await;
    assert_eq!(given.status, StatusCode::OK, "{}", given.json());
    let refused = checkout(&app, "ann", &hold_id).await;
    assert_eq!(refused.code(), "HOLDERS_REQUIRED");
    assert!(
        refused.json()["detail"].as_str().unwrap().contains("A-1-2"),
        "{}",
        refused.json()
    );

    // Both named (the PUT replaces the whole list, and says so on a read).
    let wei = json!({"seatId": "A-1-2", "name": "张伟", "answers": {"dob": "1985-06-15"}});
    let given = put_holders(&app, "ann", &hold_id, json!([wei, ada])).await;
    assert_eq!(given.status, StatusCode::OK, "{}", given.json());
    let read = app
        .get(&token("ann"), &format!("/v1/holds/{hold_id}/holders"))
        .await
        .json();
    assert_eq!(read["holders"].as_array().unwrap().len(), 2, "{read}");
    assert_eq!(read["holders"][0]["seatId"], "A-1-1");

    let paid = checkout(&app, "ann", &hold_id).await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let tickets = tickets_of(&app, "ann", &order_id, 2).await;
    assert_eq!(by_seat(&tickets, "A-1-1")["holder"]["name"], "Ada Lovelace");
    assert_eq!(
        by_seat(&tickets, "A-1-1")["holder"]["answers"]["club"],
        "North"
    );
    assert_eq!(by_seat(&tickets, "A-1-2")["holder"]["name"], "张伟");
    let ticket_id = by_seat(&tickets, "A-1-2")["ticketId"]
        .as_str()
        .unwrap()
        .to_owned();
    let one = app
        .get(&token("ann"), &format!("/v1/tickets/{ticket_id}"))
        .await
        .json();
    assert_eq!(one["holder"]["answers"]["dob"], "1985-06-15");

    // The PDF tickets print each holder (in the Latin and the Chinese font).
    let pdf = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}/tickets.pdf"))
        .await;
    assert_eq!(pdf.status, StatusCode::OK);
    let text = boxoffice_delivery::readback::pdf_text(&pdf.bytes);
    assert!(
        text.contains("Ada Lovelace") && text.contains("张伟"),
        "{text}"
    );

    // Checked out: the hold's holders are closed; the ticket's holder is where to change.
    let late = put_holders(&app, "ann", &hold_id, json!([ada])).await;
    assert_eq!(late.code(), "HOLD_IN_CHECKOUT", "{}", late.json());

    // The door sees whom each ticket is for.
    let door = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/door"))
        .await
        .json();
    let names: Vec<&str> = door["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{door}");
    assert!(
        names.contains(&"张伟") && names.contains(&"Ada Lovelace"),
        "{door}"
    );

    // A tier hold names its units 1..quantity.
    let ga = hold(
        &app,
        "bob",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    let units = json!([
        {"unit": 1, "name": "Bob", "answers": {"dob": "2000-01-01"}},
        {"unit": 2, "name": "Bea", "answers": {"dob": "2001-01-01"}}
    ]);
    assert_eq!(
        put_holders(&app, "bob", &ga, json!([{"unit": 3, "name": "X"}]))
            .await
            .status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        put_holders(&app, "bob", &ga, units).await.status,
        StatusCode::OK
    );
    let paid = checkout(&app, "bob", &ga).await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let mut names: Vec<String> = tickets_of(&app, "bob", &order_id, 2)
        .await
        .iter()
        .map(|t| t["holder"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["Bea", "Bob"]);
    app.finish().await;
}

async fn a_holder_changes_until_the_cutoff_and_a_transfer_leaves_the_receiver_holding(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    // Names optional here; the cutoff is an hour before the start.
    let event_id = app
        .create_event(json!({"holderPolicy": {"changeCutoffSeconds": 3600}}))
        .await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-2-1", "A-2-2"]}),
    )
    .await;
    assert!(
        tickets.iter().all(|t| t.get("holder").is_none()),
        "{tickets:?}"
    );
    let first = tickets[0]["ticketId"].as_str().unwrap().to_owned();
    let second = tickets[1]["ticketId"].as_str().unwrap().to_owned();

    let path = format!("/v1/tickets/{first}/holder");
    let changed = app
        .put(&token("ann"), &path, &json!({"name": "Grace Hopper"}))
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.json());
    assert_eq!(changed.json()["holder"]["name"], "Grace Hopper");
    // Questions the event does not ask, someone else's ticket, a bad body.
    let unknown = app
        .put(
            &token("ann"),
            &path,
            &json!({"name": "G", "answers": {"dob": "2000-01-01"}}),
        )
        .await;
    assert_eq!(
        unknown.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        unknown.json()
    );
    assert_eq!(
        app.put(&token("eve"), &path, &json!({"name": "Eve"}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.put(&token("ann"), &path, &json!({"nom": "x"}))
            .await
            .status,
        StatusCode::UNPROCESSABLE_ENTITY
    );

    // The second ticket goes to bob: his new ticket is held by him (no name), and ann's old
    // one, void now, no longer changes.
    let offered = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/transfers"),
            Some("give"),
            &json!({"ticketIds": [second], "toAccountId": "bob"}),
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
    let new_order = accepted.json()["newOrderId"].as_str().unwrap().to_owned();
    let bobs = tickets_of(&app, "bob", &new_order, 1).await;
    assert!(bobs[0].get("holder").is_none(), "{bobs:?}");
    let voided = app
        .put(
            &token("ann"),
            &format!("/v1/tickets/{second}/holder"),
            &json!({"name": "X"}),
        )
        .await;
    assert_eq!(voided.code(), "TICKET_NOT_VALID", "{}", voided.json());
    let bobs_id = bobs[0]["ticketId"].as_str().unwrap();
    let named = app
        .put(
            &token("bob"),
            &format!("/v1/tickets/{bobs_id}/holder"),
            &json!({"name": "Bob"}),
        )
        .await;
    assert_eq!(named.json()["holder"]["name"], "Bob", "{}", named.json());

    // Past the start minus the cutoff by the store's clock: closed.
    let starts_at = time::OffsetDateTime::parse(
        "2027-01-01T20:00:00Z",
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let until_closed = starts_at - time::Duration::seconds(3600) - time::OffsetDateTime::now_utc();
    app.db
        .advance_clock(u64::try_from(until_closed.whole_milliseconds()).unwrap() + 60_000)
        .await;
    let closed = app
        .put(&token("ann"), &path, &json!({"name": "Too Late"}))
        .await;
    assert_eq!(
        (closed.status, closed.code().as_str()),
        (StatusCode::CONFLICT, "HOLDER_CHANGE_CLOSED"),
        "{}",
        closed.json()
    );
    let unchanged = app
        .get(&token("ann"), &format!("/v1/tickets/{first}"))
        .await
        .json();
    assert_eq!(unchanged["holder"]["name"], "Grace Hopper");
    app.finish().await;
}
