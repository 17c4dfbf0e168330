//! Ticket transfer stories over HTTP on both backends (issue 19, item 1): an offer accepted
//! (no capacity consumed, old code refused at the door, new code good, both parties told),
//! declined and withdrawn offers, the cutoff by the store's clock, the receiver's purchase
//! limit, a transfer racing an exchange and a check-in of the same ticket (one wins),
//! retries and validation, and 404 for anyone but the two parties. Every story ends with
//! every invariant checked (`boxoffice check`'s rules).

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    an_accepted_transfer_moves_the_tickets_without_taking_capacity,
    declined_and_withdrawn_offers_change_nothing,
    the_cutoff_is_judged_by_the_store_clock,
    the_receivers_purchase_limit_applies,
    a_transfer_and_an_exchange_of_one_ticket_at_once_one_wins,
    a_checked_in_ticket_cannot_be_transferred,
    general_admission_tickets_transfer_too,
    bad_transfer_requests_are_refused,
);

async fn offer(
    app: &TestApp,
    giver: &str,
    order_id: &str,
    key: &str,
    tickets: &[&Value],
    to: &str,
) -> common::Answer {
    let ids: Vec<&Value> = tickets.iter().map(|t| &t["ticketId"]).collect();
    app.post(
        &token(giver),
        &format!("/v1/orders/{order_id}/transfers"),
        Some(key),
        &json!({"ticketIds": ids, "toAccountId": to}),
    )
    .await
}

async fn act(app: &TestApp, account: &str, transfer_id: &str, verb: &str) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/transfers/{transfer_id}/{verb}"),
        Some(&format!("{verb}-{}", uuid::Uuid::now_v7())),
        &json!({}),
    )
    .await
}

/// The status of one ticket, read as `account`.
async fn ticket_status(app: &TestApp, account: &str, ticket_id: &str) -> String {
    app.get(&token(account), &format!("/v1/tickets/{ticket_id}"))
        .await
        .json()["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn ticket_of<'a>(tickets: &'a [Value], seat: &str) -> &'a Value {
    tickets
        .iter()
        .find(|t| t["seatId"] == seat)
        .unwrap_or_else(|| panic!("no ticket for {seat} in {tickets:?}"))
}

async fn an_accepted_transfer_moves_the_tickets_without_taking_capacity(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    let given = ticket_of(&tickets, "A-1-1").clone();
    let kept = ticket_of(&tickets, "A-1-2").clone();

    let offered = offer(&app, "ann", &order_id, "give-1", &[&given], "bob").await;
    assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
    let t = offered.json();
    assert_eq!(t["status"], "OFFERED");
    assert_eq!(t["toAccountId"], "bob");
    assert_eq!(t["fromAccountId"], "ann");
    assert_eq!(t["ticketIds"], json!([given["ticketId"]]));
    let transfer_id = t["transferId"].as_str().unwrap().to_owned();
    // The same key and body: the same offer. Another body: refused.
    let again = offer(&app, "ann", &order_id, "give-1", &[&given], "bob").await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json()["transferId"], json!(transfer_id));
    let other = offer(&app, "ann", &order_id, "give-1", &[&kept], "bob").await;
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED");
    // An offered ticket cannot be offered twice.
    let twice = offer(&app, "ann", &order_id, "give-2", &[&given], "cat").await;
    assert_eq!(
        (twice.status, twice.code().as_str()),
        (StatusCode::CONFLICT, "TRANSFER_CONFLICT"),
        "{}",
        twice.json()
    );

    // Bob sees it among his offers; ann among hers; eve nowhere.
    let received = app.get(&token("bob"), "/v1/transfers?role=received").await;
    assert_eq!(
        received.json()["transfers"][0]["transferId"],
        json!(transfer_id)
    );
    let given_list = app.get(&token("ann"), "/v1/transfers?role=given").await;
    assert_eq!(
        given_list.json()["transfers"][0]["transferId"],
        json!(transfer_id)
    );
    let none = app.get(&token("eve"), "/v1/transfers").await;
    assert_eq!(none.json()["transfers"], json!([]));
    let path = format!("/v1/transfers/{transfer_id}");
    assert_eq!(
        app.get(&token("eve"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        act(&app, "eve", &transfer_id, "accept").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        act(&app, "eve", &transfer_id, "decline").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&token("eve"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    // The giver cannot accept her own offer for the receiver.
    assert_eq!(
        act(&app, "ann", &transfer_id, "accept").await.status,
        StatusCode::NOT_FOUND
    );

    let accepted = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.json());
    assert_eq!(accepted.json()["status"], "ACCEPTED");
    let new_order_id = accepted.json()["newOrderId"].as_str().unwrap().to_owned();
    // A retry answers the same.
    let retry = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.json()["newOrderId"], json!(new_order_id));
    // Declining or withdrawing an accepted offer is refused.
    assert_eq!(
        act(&app, "bob", &transfer_id, "decline").await.code(),
        "TRANSFER_CONFLICT"
    );
    assert_eq!(
        app.delete(&token("ann"), &path).await.code(),
        "TRANSFER_CONFLICT"
    );

    // The old ticket is void at the door; bob's new one is good, in his new order.
    let given_id = given["ticketId"].as_str().unwrap();
    assert_eq!(ticket_status(&app, "ann", given_id).await, "VOIDED");
    let at_door = app.check_in(&given).await;
    assert_eq!(
        (at_door.status, at_door.code().as_str()),
        (StatusCode::BAD_REQUEST, "INVALID_TICKET"),
        "{}",
        at_door.json()
    );
    let bobs = app
        .get(&token("bob"), &format!("/v1/orders/{new_order_id}"))
        .await
        .json();
    assert_eq!(bobs["orderStatus"], "CONFIRMED");
    assert_eq!(bobs["seats"][0]["seatId"], "A-1-1");
    assert_eq!(bobs["tickets"].as_array().unwrap().len(), 1);
    let new_ticket = bobs["tickets"][0].clone();
    assert_ne!(new_ticket["code"], given["code"], "a new code");
    assert_eq!(
        app.get(&token("ann"), &format!("/v1/orders/{new_order_id}"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.check_in(&new_ticket).await.status, StatusCode::OK);
    // No capacity moved: the seat is still sold, the kept ticket still ann's.
    assert!(!app.holdable("cat", &event_id, "A-1-1").await);
    assert_eq!(
        ticket_status(&app, "ann", kept["ticketId"].as_str().unwrap()).await,
        "VALID"
    );
    // Ann can offer the other ticket to someone else; bob can pass his on.
    let next = offer(&app, "ann", &order_id, "give-3", &[&kept], "cat").await;
    assert_eq!(next.status, StatusCode::CREATED, "{}", next.json());

    // Both parties are told through the outbox.
    let told = common::outbox_payloads(&app, "transfer.accepted").await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["fromAccountId"], "ann");
    assert_eq!(told[0]["toAccountId"], "bob");
    assert_eq!(told[0]["newOrderId"], json!(new_order_id));
    let offered_told = common::outbox_payloads(&app, "transfer.offered").await;
    assert_eq!(offered_told.len(), 2, "{offered_told:?}");
    app.finish().await;
}

async fn declined_and_withdrawn_offers_change_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    let ticket = &tickets[0];
    let ticket_id = ticket["ticketId"].as_str().unwrap();

    let first = offer(&app, "ann", &order_id, "o1", &[ticket], "bob").await;
    let first_id = first.json()["transferId"].as_str().unwrap().to_owned();
    let declined = act(&app, "bob", &first_id, "decline").await;
    assert_eq!(declined.status, StatusCode::OK, "{}", declined.json());
    assert_eq!(declined.json()["status"], "DECLINED");
    assert_eq!(
        act(&app, "bob", &first_id, "decline").await.status,
        StatusCode::OK
    );
    let late = act(&app, "bob", &first_id, "accept").await;
    assert_eq!(late.code(), "TRANSFER_CONFLICT", "{}", late.json());
    assert_eq!(ticket_status(&app, "ann", ticket_id).await, "VALID");

    // Offered again (the declined offer holds it no more), then withdrawn by ann.
    let second = offer(&app, "ann", &order_id, "o2", &[ticket], "bob").await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.json());
    let second_id = second.json()["transferId"].as_str().unwrap().to_owned();
    let path = format!("/v1/transfers/{second_id}");
    // Only the giver withdraws; only the receiver declines.
    assert_eq!(
        app.delete(&token("bob"), &path).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        act(&app, "ann", &second_id, "decline").await.status,
        StatusCode::NOT_FOUND
    );
    let withdrawn = app.delete(&token("ann"), &path).await;
    assert_eq!(withdrawn.status, StatusCode::OK, "{}", withdrawn.json());
    assert_eq!(withdrawn.json()["status"], "WITHDRAWN");
    assert_eq!(
        act(&app, "bob", &second_id, "accept").await.code(),
        "TRANSFER_CONFLICT"
    );
    assert_eq!(
        app.get(&token("bob"), &path).await.json()["status"],
        "WITHDRAWN"
    );
    assert_eq!(ticket_status(&app, "ann", ticket_id).await, "VALID");
    assert_eq!(app.check_in(ticket).await.status, StatusCode::OK);
    assert_eq!(
        common::outbox_payloads(&app, "transfer.declined")
            .await
            .len(),
        1
    );
    assert_eq!(
        common::outbox_payloads(&app, "transfer.withdrawn")
            .await
            .len(),
        1
    );
    app.finish().await;
}

async fn the_cutoff_is_judged_by_the_store_clock(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let now = app.state.store.now().await.unwrap();
    // Transfers close 10 s from now: the event starts in 15 s, cutoff 5 s.
    let starts_at = (now + time::Duration::seconds(15))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let event_id = app
        .create_event(json!({"startsAt": starts_at, "transferCutoffSeconds": 5}))
        .await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await;
    assert_eq!(event.json()["transferCutoffSeconds"], 5);
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    let open = offer(&app, "ann", &order_id, "early", &[&tickets[0]], "bob").await;
    assert_eq!(open.status, StatusCode::CREATED, "{}", open.json());
    let transfer_id = open.json()["transferId"].as_str().unwrap().to_owned();
    // The offer lapses with the cutoff.
    let expires_at = time::OffsetDateTime::parse(
        open.json()["expiresAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert!(expires_at <= now + time::Duration::seconds(11));

    app.db.advance_clock(10_000).await;
    let late = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(
        (late.status, late.code().as_str()),
        (StatusCode::CONFLICT, "TRANSFER_CLOSED"),
        "{}",
        late.json()
    );
    assert_eq!(
        app.get(&token("bob"), &format!("/v1/transfers/{transfer_id}"))
            .await
            .json()["status"],
        "EXPIRED"
    );
    let new_offer = offer(&app, "ann", &order_id, "late", &[&tickets[1]], "bob").await;
    assert_eq!(
        (new_offer.status, new_offer.code().as_str()),
        (StatusCode::CONFLICT, "TRANSFER_CLOSED"),
        "{}",
        new_offer.json()
    );
    for ticket in &tickets {
        let id = ticket["ticketId"].as_str().unwrap();
        assert_eq!(ticket_status(&app, "ann", id).await, "VALID");
    }
    app.finish().await;
}

async fn the_receivers_purchase_limit_applies(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 2})).await;
    let (order_id, tickets) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    common::buy_captured(
        &app,
        "bob",
        &event_id,
        json!({"seatIds": ["A-2-1", "A-2-2"]}),
    )
    .await;
    let offered = offer(&app, "ann", &order_id, "o", &[&tickets[0]], "bob").await;
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let over = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(
        (over.status, over.code().as_str()),
        (StatusCode::CONFLICT, "PURCHASE_LIMIT"),
        "{}",
        over.json()
    );
    // Nothing moved: the offer is still open and ann's ticket good; cat, under the limit,
    // can take the same ticket once ann withdraws and offers it to her.
    assert_eq!(
        app.get(&token("bob"), &format!("/v1/transfers/{transfer_id}"))
            .await
            .json()["status"],
        "OFFERED"
    );
    let id = tickets[0]["ticketId"].as_str().unwrap();
    assert_eq!(ticket_status(&app, "ann", id).await, "VALID");
    let path = format!("/v1/transfers/{transfer_id}");
    assert_eq!(
        app.delete(&token("ann"), &path).await.status,
        StatusCode::OK
    );
    let to_cat = offer(&app, "ann", &order_id, "o2", &[&tickets[0]], "cat").await;
    let cat_id = to_cat.json()["transferId"].as_str().unwrap().to_owned();
    let taken = act(&app, "cat", &cat_id, "accept").await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.json());
    app.finish().await;
}

async fn a_transfer_and_an_exchange_of_one_ticket_at_once_one_wins(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    for round in 0..4 {
        let seat = format!("A-{}-1", round + 1);
        let (order_id, tickets) =
            common::buy_captured(&app, "ann", &event_id, json!({"seatIds": [seat]})).await;
        let ticket = tickets[0].clone();
        let offered = offer(
            &app,
            "ann",
            &order_id,
            &format!("o{round}"),
            &[&ticket],
            "bob",
        )
        .await;
        assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
        let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
        let to_seat = format!("A-10-{}", round + 1);
        let ann = token("ann");
        let exchange_path = format!("/v1/orders/{order_id}/exchanges");
        let exchange_key = format!("x{round}");
        let exchange_body = json!({"fromSeatIds": [seat], "toSeatIds": [to_seat]});
        let (accepted, exchanged) = tokio::join!(
            act(&app, "bob", &transfer_id, "accept"),
            app.post(&ann, &exchange_path, Some(&exchange_key), &exchange_body),
        );
        let transfer_won = accepted.status == StatusCode::OK;
        let exchange_won = exchanged.status == StatusCode::CREATED;
        assert!(
            transfer_won != exchange_won,
            "exactly one wins: accept {} {}, exchange {} {}",
            accepted.status,
            accepted.json(),
            exchanged.status,
            exchanged.json()
        );
        if transfer_won {
            assert_eq!(
                exchanged.code(),
                "EXCHANGE_CONFLICT",
                "{}",
                exchanged.json()
            );
            // The seat is bob's; the exchange's target is free.
            assert!(app.holdable("cat", &event_id, &to_seat).await);
        } else {
            assert_eq!(accepted.code(), "TRANSFER_CONFLICT", "{}", accepted.json());
            assert_eq!(exchanged.json()["status"], "COMPLETED");
            // The old seat went back on sale; bob got nothing.
            assert!(app.holdable("cat", &event_id, &seat).await);
        }
        let id = ticket["ticketId"].as_str().unwrap();
        assert_eq!(ticket_status(&app, "ann", id).await, "VOIDED");
        app.db.assert_invariants().await;
    }
    app.finish().await;
}

async fn a_checked_in_ticket_cannot_be_transferred(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    // Checked in before the offer: refused at once.
    assert_eq!(app.check_in(&tickets[0]).await.status, StatusCode::OK);
    let used = offer(&app, "ann", &order_id, "o1", &[&tickets[0]], "bob").await;
    assert_eq!(used.code(), "TRANSFER_CONFLICT", "{}", used.json());
    // Checked in after the offer, before the acceptance: the acceptance is refused and the
    // ticket stays the one that went in.
    let offered = offer(&app, "ann", &order_id, "o2", &[&tickets[1]], "bob").await;
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    assert_eq!(app.check_in(&tickets[1]).await.status, StatusCode::OK);
    let late = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(late.code(), "TRANSFER_CONFLICT", "{}", late.json());
    let id = tickets[1]["ticketId"].as_str().unwrap();
    assert_eq!(ticket_status(&app, "ann", id).await, "CHECKED_IN");
    app.finish().await;
}

async fn general_admission_tickets_transfer_too(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"tierId": "GA", "quantity": 3}),
    )
    .await;
    let offered = offer(
        &app,
        "ann",
        &order_id,
        "o",
        &[&tickets[0], &tickets[2]],
        "bob",
    )
    .await;
    assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let accepted = act(&app, "bob", &transfer_id, "accept").await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.json());
    let new_order_id = accepted.json()["newOrderId"].as_str().unwrap().to_owned();
    let bobs = app
        .get(&token("bob"), &format!("/v1/orders/{new_order_id}"))
        .await
        .json();
    assert_eq!(bobs["tierId"], "GA");
    assert_eq!(bobs["quantity"], 2);
    assert_eq!(bobs["tickets"].as_array().unwrap().len(), 2);
    assert_eq!(
        ticket_status(&app, "ann", tickets[1]["ticketId"].as_str().unwrap()).await,
        "VALID"
    );
    app.finish().await;
}

async fn bad_transfer_requests_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    let path = format!("/v1/orders/{order_id}/transfers");
    let id = tickets[0]["ticketId"].clone();
    for (body, field) in [
        (json!({"ticketIds": [], "toAccountId": "bob"}), "ticketIds"),
        (
            json!({"ticketIds": [id, id], "toAccountId": "bob"}),
            "ticketIds",
        ),
        (json!({"ticketIds": [id], "toAccountId": ""}), "toAccountId"),
        (
            json!({"ticketIds": [id], "toAccountId": "ann"}),
            "toAccountId",
        ),
        (json!({"ticketIds": [id]}), "toAccountId"),
        (
            json!({"ticketIds": [id], "toAccountId": "bob", "extra": 1}),
            "extra",
        ),
    ] {
        let refused = app
            .post(
                &token("ann"),
                &path,
                Some(&uuid::Uuid::now_v7().to_string()),
                &body,
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            refused.json()
        );
        assert_eq!(refused.code(), "VALIDATION", "{body}");
        assert!(
            refused.json().to_string().contains(field),
            "{body}: {}",
            refused.json()
        );
    }
    let no_key = app
        .post(
            &token("ann"),
            &path,
            None,
            &json!({"ticketIds": [id], "toAccountId": "bob"}),
        )
        .await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    let unknown = offer(
        &app,
        "ann",
        &order_id,
        "u",
        &[&json!({"ticketId": "nope"})],
        "bob",
    )
    .await;
    assert_eq!(unknown.code(), "TRANSFER_CONFLICT", "{}", unknown.json());
    // Another account's order, or none: 404.
    let foreign = offer(&app, "eve", &order_id, "f", &[&tickets[0]], "bob").await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
    let missing = offer(&app, "ann", "no-such-order", "m", &[&tickets[0]], "bob").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let bad_role = app.get(&token("ann"), "/v1/transfers?role=all").await;
    assert_eq!(bad_role.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        app.get(&token("ann"), "/v1/transfers/no-such").await.status,
        StatusCode::NOT_FOUND
    );
    let accept_no_key = app
        .send(
            app.http
                .post(format!("{}/v1/transfers/no-such/accept", app.base))
                .bearer_auth(token("bob")),
        )
        .await;
    assert_eq!(accept_no_key.status, StatusCode::BAD_REQUEST);
    app.finish().await;
}
