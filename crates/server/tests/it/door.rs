//! Rotating codes and the offline door's server side, over HTTP on both backends (issue 19,
//! item 3): a rotating code accepted inside its window and refused outside it (a replayed old
//! code, judged by the store's clock), forgeries refused, the secret only for the owner; the
//! door bundle (its key reproduces each ticket's secret, revoked and checked-in lists); scans
//! synced from two devices, first scan wins and duplicates reported.

use crate::common;

use crate::common::{Backend, TestApp, token};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    a_rotating_code_is_accepted_inside_its_window_only,
    the_door_bundle_and_offline_scans_synced_from_two_devices,
);

async fn check_in(app: &TestApp, code: &Value) -> common::Answer {
    app.post(
        &app.admin,
        "/v1/admin/checkin",
        None,
        &json!({"code": code}),
    )
    .await
}

async fn rotating(app: &TestApp, account: &str, ticket: &Value) -> common::Answer {
    let id = ticket["ticketId"].as_str().unwrap();
    app.get(&token(account), &format!("/v1/tickets/{id}/rotating"))
        .await
}

async fn a_rotating_code_is_accepted_inside_its_window_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3"]}),
    )
    .await;

    // Only the owner gets the secret.
    let mine = rotating(&app, "ann", &tickets[0]).await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.json());
    assert_eq!(
        rotating(&app, "eve", &tickets[0]).await.status,
        StatusCode::NOT_FOUND
    );
    let r = mine.json();
    assert_eq!(r["periodSeconds"], 15);
    assert_eq!(r["staticCode"], tickets[0]["code"]);
    let code = r["currentCode"].as_str().unwrap().to_owned();
    assert!(code.starts_with("BR1.") && code.ends_with(tickets[0]["code"].as_str().unwrap()));

    // A forged tag, or a code made with another ticket's secret, is refused.
    let parts: Vec<&str> = code.splitn(4, '.').collect();
    let forged = format!("BR1.{}.AAAAAAAAAAAAAAAA.{}", parts[1], parts[3]);
    let refused = check_in(&app, &json!(forged)).await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (StatusCode::BAD_REQUEST, "INVALID_TICKET"),
        "{}",
        refused.json()
    );
    let other = rotating(&app, "ann", &tickets[1]).await.json();
    let other_parts: Vec<&str> = other["currentCode"]
        .as_str()
        .unwrap()
        .splitn(4, '.')
        .collect();
    let swapped = format!("BR1.{}.{}.{}", other_parts[1], other_parts[2], parts[3]);
    assert_eq!(
        check_in(&app, &json!(swapped)).await.status,
        StatusCode::BAD_REQUEST
    );

    // The current code checks in (once).
    let admitted = check_in(&app, &json!(code)).await;
    assert_eq!(admitted.status, StatusCode::OK, "{}", admitted.json());
    assert_eq!(admitted.json()["ticketId"], tickets[0]["ticketId"]);
    assert_eq!(
        check_in(&app, &json!(code)).await.code(),
        "ALREADY_CHECKED_IN"
    );

    // A code shown (or screenshotted) now is worthless 45 s later by the store's clock.
    let old = rotating(&app, "ann", &tickets[1]).await.json()["currentCode"].clone();
    app.db.advance_clock(45_000).await;
    let replayed = check_in(&app, &old).await;
    assert_eq!(
        (replayed.status, replayed.code().as_str()),
        (StatusCode::BAD_REQUEST, "INVALID_TICKET"),
        "{}",
        replayed.json()
    );
    assert!(
        replayed.json()["detail"].as_str().unwrap().contains("off"),
        "{}",
        replayed.json()
    );
    let fresh = rotating(&app, "ann", &tickets[1]).await.json()["currentCode"].clone();
    assert_ne!(fresh, old);
    assert_eq!(check_in(&app, &fresh).await.status, StatusCode::OK);

    // A ticket given away has no rotating code for its old owner.
    let offered = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/transfers"),
            Some("give"),
            &json!({"ticketIds": [tickets[2]["ticketId"]], "toAccountId": "bob"}),
        )
        .await;
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let accepted = app
        .post(
            &token("bob"),
            &format!("/v1/transfers/{transfer_id}/accept"),
            Some("take"),
            &json!({}),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.json());
    let gone = rotating(&app, "ann", &tickets[2]).await;
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (StatusCode::CONFLICT, "TICKET_NOT_VALID")
    );
    app.finish().await;
}

async fn the_door_bundle_and_offline_scans_synced_from_two_devices(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2", "A-1-3"]}),
    )
    .await;
    // One ticket is given away (its old code is revoked), one is checked in online.
    let offered = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/transfers"),
            Some("give"),
            &json!({"ticketIds": [tickets[2]["ticketId"]], "toAccountId": "bob"}),
        )
        .await;
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    let accepted = app
        .post(
            &token("bob"),
            &format!("/v1/transfers/{transfer_id}/accept"),
            Some("take"),
            &json!({}),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::OK);
    assert_eq!(
        check_in(&app, &tickets[0]["code"]).await.status,
        StatusCode::OK
    );

    let path = format!("/v1/admin/events/{event_id}/door");
    assert_eq!(
        app.get(&token("ann"), &path).await.status,
        StatusCode::FORBIDDEN
    );
    let bundle = app.get(&app.admin, &path).await;
    assert_eq!(bundle.status, StatusCode::OK, "{}", bundle.json());
    let bundle = bundle.json();
    assert_eq!(bundle["revokedTicketIds"], json!([tickets[2]["ticketId"]]));
    assert_eq!(
        bundle["checkedInTicketIds"],
        json!([tickets[0]["ticketId"]])
    );
    assert_eq!(bundle["periodSeconds"], 15);
    assert!(
        bundle["publicKeys"][0]["pem"]
            .as_str()
            .unwrap()
            .contains("PUBLIC KEY")
    );
    // The event's key gives each ticket's secret: what the owner's phone was given.
    let key: [u8; 32] = URL_SAFE_NO_PAD
        .decode(bundle["rotatingKey"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let owner = rotating(&app, "ann", &tickets[1]).await.json();
    let derived =
        boxoffice_tickets::rotating::ticket_secret(&key, tickets[1]["ticketId"].as_str().unwrap());
    assert_eq!(owner["secret"], json!(URL_SAFE_NO_PAD.encode(derived)));

    // Two devices scanned offline: both let ticket 1 in; device A also the revoked one and
    // a ticket of nothing. Synced, the first scan wins and the other is a duplicate.
    let sync = format!("/v1/admin/events/{event_id}/door/checkins");
    let t = |i: usize| tickets[i]["ticketId"].clone();
    let a = app
        .post(
            &app.admin,
            &sync,
            None,
            &json!({"scans": [
                {"ticketId": t(1), "deviceId": "gate-a", "scannedAt": "2026-12-04T18:00:00Z"},
                {"ticketId": t(2), "deviceId": "gate-a"},
                {"ticketId": t(0), "deviceId": "gate-a"},
                {"ticketId": "no-such-ticket"},
            ]}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json());
    let results: Vec<String> = a.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results, ["CHECKED_IN", "REVOKED", "DUPLICATE", "UNKNOWN"]);
    let b = app
        .post(
            &app.admin,
            &sync,
            None,
            &json!({"scans": [{"ticketId": t(1), "deviceId": "gate-b"}]}),
        )
        .await;
    assert_eq!(b.json()["results"][0]["result"], "DUPLICATE");
    // The next bundle has ticket 1 checked in.
    let again = app.get(&app.admin, &path).await.json();
    assert_eq!(again["checkedInTicketIds"].as_array().unwrap().len(), 2);

    // Bad syncs.
    for body in [
        json!({"scans": []}),
        json!({"scans": [{"ticketId": ""}]}),
        json!({}),
    ] {
        let refused = app.post(&app.admin, &sync, None, &body).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let nowhere = app
        .post(
            &app.admin,
            "/v1/admin/events/no-such/door/checkins",
            None,
            &json!({"scans": [{"ticketId": t(1)}]}),
        )
        .await;
    assert_eq!(nowhere.status, StatusCode::NOT_FOUND);
    app.finish().await;
}
