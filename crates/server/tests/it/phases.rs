//! Sale phases and access codes over HTTP on both backends (issue 40): a presale lane sells
//! only to accounts that redeemed a code for it; a single-use code raced by fifty accounts
//! admits exactly one (the event's writer decides every redemption); a lane sells only its
//! sections and tiers and keeps its own purchase limit; the general sale opens after the
//! presale by the store's clock; `check` finds every lane's tickets inside its inventory;
//! a presale lane and the general sale each have their own queue, release and shopper slots
//! (in memory on both store backends, and in Redis).

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

stories!(
    a_presale_lane_admits_only_code_holders,
    a_single_use_code_raced_by_fifty_accounts_admits_one,
    a_lane_refuses_holds_outside_its_inventory_and_keeps_its_limit,
    the_general_sale_follows_the_presale,
    an_admission_names_the_lane_its_fan_queued_for,
    each_lane_has_its_own_queue_release_and_slots,
);

const HOUR_MS: u64 = 3_600_000;

fn at(offset_s: i64) -> String {
    (OffsetDateTime::now_utc() + time::Duration::seconds(offset_s))
        .format(&Rfc3339)
        .unwrap()
}

/// An event with sections A and B and tier GA: a fan-club presale (code, section A only,
/// 2 tickets per account) open now for an hour, then the general sale of everything.
async fn presale_event(app: &TestApp) -> String {
    presale_event_with(app, json!({"enabled": false})).await
}

/// [`presale_event`] with these waiting-room settings.
async fn presale_event_with(app: &TestApp, waiting_room: Value) -> String {
    app.create_event(json!({
        "waitingRoom": waiting_room,
        "onSaleAt": at(-60),
        "maxTicketsPerAccount": 8,
        "sections": [
            {"name": "A", "rows": 5, "seatsPerRow": 10, "priceMinor": 3000},
            {"name": "B", "rows": 5, "seatsPerRow": 10, "priceMinor": 2000}
        ],
        "phases": [
            {
                "phaseId": "fanclub", "name": "Fan club presale", "access": "code",
                "startsAt": at(-60), "endsAt": at(3600),
                "sections": ["A"], "maxTicketsPerAccount": 2
            },
            {
                "phaseId": "general", "name": "General sale", "access": "open",
                "startsAt": at(3600)
            }
        ]
    }))
    .await
}

fn codes_path(event_id: &str) -> String {
    format!("/v1/admin/events/{event_id}/phases/fanclub/codes")
}

async fn generate(app: &TestApp, event_id: &str, count: u32, uses: u32) -> Vec<String> {
    let key = format!("gen-{}", uuid::Uuid::now_v7());
    let made = app
        .post(
            &app.admin,
            &codes_path(event_id),
            Some(&key),
            &json!({"count": count, "uses": uses}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.json());
    made.json()["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap().to_owned())
        .collect()
}

async fn redeem(app: &TestApp, account: &str, event_id: &str, code: &str) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/events/{event_id}/phases/fanclub/access"),
        None,
        &json!({ "code": code }),
    )
    .await
}

async fn hold(app: &TestApp, account: &str, event_id: &str, body: Value) -> common::Answer {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    app.hold(account, event_id, &key, body).await
}

async fn import(app: &TestApp, event_id: &str, key: &str, csv: &str) -> common::Answer {
    app.send(
        app.http
            .post(format!("{}{}/import", app.base, codes_path(event_id)))
            .bearer_auth(&app.admin)
            .header("content-type", "text/csv")
            .header("idempotency-key", key)
            .body(csv.to_owned()),
    )
    .await
}

/// The phase's codes as the CSV download reads them: code -> uses left.
async fn uses_left(app: &TestApp, event_id: &str) -> std::collections::BTreeMap<String, u32> {
    let csv = app.get(&app.admin, &codes_path(event_id)).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert!(
        csv.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = String::from_utf8(csv.bytes).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("code,uses,usesLeft"));
    lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            (cells[0].to_owned(), cells[2].parse().unwrap())
        })
        .collect()
}

async fn a_presale_lane_admits_only_code_holders(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = presale_event(&app).await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(event["phases"][0]["phaseId"], "fanclub", "{event}");

    // Without a code: refused in the lane, named or not (the code phase is the one open).
    let refused = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1"], "phaseId": "fanclub"}),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.json());
    assert_eq!(refused.code(), "ACCESS_CODE_REQUIRED");
    let refused = hold(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    assert_eq!(refused.code(), "ACCESS_CODE_REQUIRED");
    let access = app
        .get(
            &token("ann"),
            &format!("/v1/events/{event_id}/phases/fanclub/access"),
        )
        .await;
    assert_eq!(access.json()["redeemed"], false);

    // Codes are the admin's: a fan's request is refused.
    let fan = app
        .post(
            &token("ann"),
            &codes_path(&event_id),
            Some("k1"),
            &json!({"count": 1}),
        )
        .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN);
    // Generate, then the same request again answers the same codes.
    let generate_body = json!({"count": 3, "uses": 1});
    let first = app
        .post(
            &app.admin,
            &codes_path(&event_id),
            Some("gen-1"),
            &generate_body,
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.json());
    let again = app
        .post(
            &app.admin,
            &codes_path(&event_id),
            Some("gen-1"),
            &generate_body,
        )
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(first.json()["codes"], again.json()["codes"]);
    let reused = app
        .post(
            &app.admin,
            &codes_path(&event_id),
            Some("gen-1"),
            &json!({"count": 4}),
        )
        .await;
    assert_eq!(reused.code(), "IDEMPOTENCY_KEY_REUSED");
    let codes: Vec<String> = first.json()["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(codes.len(), 3);
    // As CSV per Accept.
    let csv = app
        .send(
            app.http
                .post(format!("{}{}", app.base, codes_path(&event_id)))
                .bearer_auth(&app.admin)
                .header("content-type", "application/json")
                .header("accept", "text/csv")
                .header("idempotency-key", "gen-csv")
                .body(r#"{"count": 2}"#),
        )
        .await;
    assert_eq!(csv.status, StatusCode::CREATED);
    let text = String::from_utf8(csv.bytes.clone()).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with("code,uses,usesLeft"), "{text}");
    let too_many = app
        .post(
            &app.admin,
            &codes_path(&event_id),
            Some("gen-big"),
            &json!({"count": 100_001}),
        )
        .await;
    assert_eq!(too_many.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Redeem: once per account (again: the same success), once per single-use code.
    let redeemed = redeem(&app, "ann", &event_id, &codes[0].to_lowercase()).await;
    assert_eq!(redeemed.status, StatusCode::OK, "{}", redeemed.json());
    assert_eq!(redeemed.json()["redeemed"], true);
    let again = redeem(&app, "ann", &event_id, &codes[0]).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.json());
    let used_up = redeem(&app, "bob", &event_id, &codes[0]).await;
    assert_eq!(used_up.status, StatusCode::CONFLICT);
    assert_eq!(used_up.code(), "ACCESS_CODE_USED_UP");
    let invalid = redeem(&app, "bob", &event_id, "NOSUCHCODE").await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(invalid.code(), "ACCESS_CODE_INVALID");
    let general = app
        .post(
            &token("bob"),
            &format!("/v1/events/{event_id}/phases/general/access"),
            None,
            &json!({"code": codes[1]}),
        )
        .await;
    assert_eq!(general.code(), "NOT_A_CODE_PHASE");
    let left = uses_left(&app, &event_id).await;
    assert_eq!(left[&codes[0]], 0);
    assert_eq!(left[&codes[1]], 1);

    // The code holder holds in the lane; the one without still cannot.
    let held = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1"], "phaseId": "fanclub"}),
    )
    .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let refused = hold(&app, "bob", &event_id, json!({"seatIds": ["A-1-2"]})).await;
    assert_eq!(refused.code(), "ACCESS_CODE_REQUIRED");

    // Import: an error names its line and nothing is added; then codes with two uses.
    let bad = import(
        &app,
        &event_id,
        "imp-1",
        "code,uses\nFANS0001,2\nFANS0002,zero\n",
    )
    .await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        bad.json()
    );
    assert_eq!(bad.code(), "CSV_INVALID");
    assert_eq!(bad.json()["line"], 3);
    let duplicate = import(&app, &event_id, "imp-2", &format!("{}\n", codes[1])).await;
    assert_eq!(duplicate.code(), "ACCESS_CODE_EXISTS");
    let imported = import(
        &app,
        &event_id,
        "imp-3",
        "code,uses\nfans0001,2\nFANS0002\n",
    )
    .await;
    assert_eq!(imported.status, StatusCode::CREATED, "{}", imported.json());
    assert_eq!(imported.json()["codes"].as_array().unwrap().len(), 2);
    for fan in ["bob", "carl"] {
        let redeemed = redeem(&app, fan, &event_id, "FANS0001").await;
        assert_eq!(redeemed.status, StatusCode::OK, "{}", redeemed.json());
    }
    assert_eq!(
        redeem(&app, "dan", &event_id, "FANS0001").await.code(),
        "ACCESS_CODE_USED_UP"
    );
    assert_eq!(uses_left(&app, &event_id).await["FANS0001"], 0);
    let held = hold(&app, "bob", &event_id, json!({"seatIds": ["A-1-2"]})).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    app.finish().await;
}

async fn a_single_use_code_raced_by_fifty_accounts_admits_one(backend: Backend) {
    let app = std::sync::Arc::new(TestApp::spawn(backend).await);
    let event_id = presale_event(&app).await;
    let code = generate(&app, &event_id, 1, 1).await.remove(0);
    let racers: Vec<_> = (0..50)
        .map(|i| {
            let app = app.clone();
            let event_id = event_id.clone();
            let code = code.clone();
            tokio::spawn(async move {
                let answer = redeem(&app, &format!("racer{i}"), &event_id, &code).await;
                let code = if answer.status == StatusCode::OK {
                    String::new()
                } else {
                    answer.code()
                };
                (format!("racer{i}"), answer.status, code)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut used_up = 0;
    for racer in futures::future::join_all(racers).await {
        let (account, status, code) = racer.expect("racer task");
        match status {
            StatusCode::OK => winners.push(account),
            StatusCode::CONFLICT if code == "ACCESS_CODE_USED_UP" => used_up += 1,
            other => panic!("{account} got {other} {code}"),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    assert_eq!(used_up, 49);
    assert_eq!(uses_left(&app, &event_id).await[&code], 0);
    // The winner may buy in the lane; a loser may not.
    let held = hold(&app, &winners[0], &event_id, json!({"seatIds": ["A-2-1"]})).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let loser = if winners[0] == "racer0" {
        "racer1"
    } else {
        "racer0"
    };
    let refused = hold(&app, loser, &event_id, json!({"seatIds": ["A-2-2"]})).await;
    assert_eq!(refused.code(), "ACCESS_CODE_REQUIRED");
    let app = std::sync::Arc::into_inner(app).expect("every racer is done");
    app.finish().await;
}

async fn a_lane_refuses_holds_outside_its_inventory_and_keeps_its_limit(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = presale_event(&app).await;
    let codes = generate(&app, &event_id, 2, 1).await;
    assert_eq!(
        redeem(&app, "ann", &event_id, &codes[0]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        redeem(&app, "bob", &event_id, &codes[1]).await.status,
        StatusCode::OK
    );
    for body in [
        json!({"seatIds": ["B-1-1"]}),
        json!({"seatIds": ["A-1-1", "B-1-1"]}),
        json!({"tierId": "GA", "quantity": 1}),
        json!({"bestAvailable": {"quantity": 2, "section": "B"}}),
    ] {
        let refused = hold(&app, "ann", &event_id, body.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::CONFLICT,
            "{body}: {}",
            refused.json()
        );
        assert_eq!(refused.code(), "OUTSIDE_PHASE", "{body}");
        assert_eq!(refused.json()["phaseId"], "fanclub");
    }
    // Best available without a section stays in the lane's sections.
    let best = hold(
        &app,
        "ann",
        &event_id,
        json!({"bestAvailable": {"quantity": 2}}),
    )
    .await;
    assert_eq!(best.status, StatusCode::CREATED, "{}", best.json());
    for seat in best.json()["seats"].as_array().unwrap() {
        assert!(seat["seatId"].as_str().unwrap().starts_with("A-"), "{seat}");
    }
    // The lane's limit (2) binds before the event's (8).
    let over = hold(&app, "ann", &event_id, json!({"seatIds": ["A-5-1"]})).await;
    assert_eq!(over.status, StatusCode::CONFLICT, "{}", over.json());
    assert_eq!(over.code(), "PURCHASE_LIMIT");
    assert_eq!(over.json()["limit"], 2);
    let unknown = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-5-1"], "phaseId": "nope"}),
    )
    .await;
    // A phase the event does not have: a conflict with the stored event, not a bad request.
    assert_eq!(unknown.status, StatusCode::CONFLICT, "{}", unknown.json());
    assert_eq!(unknown.code(), "OUTSIDE_PHASE");
    // Bought in the lane: the lane's tickets are inside its inventory.
    let (_, tickets) =
        common::buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-3-3"]})).await;
    assert_eq!(tickets.len(), 1);
    app.finish().await;
}

async fn the_general_sale_follows_the_presale(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = presale_event(&app).await;
    let code = generate(&app, &event_id, 1, 1).await.remove(0);
    assert_eq!(
        redeem(&app, "ann", &event_id, &code).await.status,
        StatusCode::OK
    );
    let early = hold(
        &app,
        "bob",
        &event_id,
        json!({"seatIds": ["B-1-1"], "phaseId": "general"}),
    )
    .await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.json());
    assert_eq!(early.code(), "SALE_NOT_OPEN");
    let presale = hold(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    assert_eq!(presale.status, StatusCode::CREATED, "{}", presale.json());

    // An hour and a minute later by the store's clock: the presale has ended, the general
    // sale sells everything to anyone, with the event's limit.
    app.db.advance_clock(HOUR_MS + 60_000).await;
    let ended = hold(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-2"], "phaseId": "fanclub"}),
    )
    .await;
    assert_eq!(ended.status, StatusCode::CONFLICT, "{}", ended.json());
    assert_eq!(ended.code(), "PHASE_ENDED");
    let late = redeem(&app, "carl", &event_id, &code).await;
    assert_eq!(late.code(), "PHASE_ENDED");
    for (fan, body) in [
        ("bob", json!({"seatIds": ["B-1-1", "B-1-2", "B-1-3"]})),
        ("dan", json!({"seatIds": ["A-2-1"], "phaseId": "general"})),
        ("eve", json!({"tierId": "GA", "quantity": 3})),
    ] {
        let held = hold(&app, fan, &event_id, body).await;
        assert_eq!(held.status, StatusCode::CREATED, "{fan}: {}", held.json());
    }
    let (_, tickets) =
        common::buy_captured(&app, "fay", &event_id, json!({"seatIds": ["B-4-4"]})).await;
    assert_eq!(tickets.len(), 1);
    app.finish().await;
}

async fn an_admission_names_the_lane_its_fan_queued_for(backend: Backend) {
    let app = TestApp::spawn_full(
        common::TestStore::new(backend).await,
        boxoffice_payments::simulator::SimulatorConfig::default(),
        common::RoomSetup::default(),
        true,
    )
    .await;
    let event_id = presale_event_with(
        &app,
        json!({"enabled": true, "policy": "fifo", "maxActiveShoppers": 10,
               "admissionTtlSeconds": 600}),
    )
    .await;
    let code = generate(&app, &event_id, 1, 1).await.remove(0);
    assert_eq!(
        redeem(&app, "ann", &event_id, &code).await.status,
        StatusCode::OK
    );
    let unknown = app
        .post(
            &token("ann"),
            &format!("/v1/events/{event_id}/queue?phaseId=nope"),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let joined = app
        .post(
            &token("ann"),
            &format!("/v1/events/{event_id}/queue?phaseId=fanclub"),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.json());
    let ticket = joined.json()["queueTicket"].as_str().unwrap().to_owned();
    let admission = admitted(&app, "ann", &event_id, &ticket).await;
    // The token's claims name the lane.
    use base64::Engine as _;
    let claims = admission.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["lane"], "fanclub", "{claims}");
    let with_token = |body: Value| {
        app.http
            .post(format!("{}/v1/events/{event_id}/holds", app.base))
            .bearer_auth(token("ann"))
            .header("idempotency-key", uuid::Uuid::now_v7().to_string())
            .header("admission-token", admission.clone())
            .json(&body)
    };
    let outside = app.send(with_token(json!({"seatIds": ["B-1-1"]}))).await;
    assert_eq!(outside.status, StatusCode::CONFLICT, "{}", outside.json());
    assert_eq!(outside.code(), "OUTSIDE_PHASE");
    let other_lane = app
        .send(with_token(
            json!({"seatIds": ["A-1-1"], "phaseId": "general"}),
        ))
        .await;
    assert_eq!(other_lane.code(), "OUTSIDE_PHASE");
    assert_eq!(other_lane.json()["phaseId"], "fanclub");
    let held = app.send(with_token(json!({"seatIds": ["A-1-1"]}))).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    app.finish().await;
}

/// Polls the queue status until admitted; the admission token.
async fn admitted(app: &TestApp, account: &str, event_id: &str, ticket: &str) -> String {
    for _ in 0..600 {
        let answer = app
            .send(
                app.http
                    .get(format!("{}/v1/events/{event_id}/queue/status", app.base))
                    .bearer_auth(token(account))
                    .header("queue-ticket", ticket),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
        match answer.json()["status"].as_str().unwrap() {
            "ADMITTED" => return answer.json()["admissionToken"].as_str().unwrap().to_owned(),
            "WAITING" => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            other => panic!("{account}: {other}"),
        }
    }
    panic!("{account} never admitted");
}

/// An event with a waiting room whose general queue admits one shopper at a time, a fan-club
/// lane (code, section A) with its own queue of two shopper slots, and the general sale (open
/// to all, everything), both open now.
async fn two_queue_event(app: &TestApp) -> String {
    app.create_event(json!({
        "waitingRoom": {"enabled": true, "policy": "fifo", "maxActiveShoppers": 1,
                        "admissionTtlSeconds": 600},
        "onSaleAt": at(-60),
        "sections": [
            {"name": "A", "rows": 5, "seatsPerRow": 10, "priceMinor": 3000},
            {"name": "B", "rows": 5, "seatsPerRow": 10, "priceMinor": 2000}
        ],
        "phases": [
            {
                "phaseId": "fanclub", "name": "Fan club presale", "access": "code",
                "startsAt": at(-60), "sections": ["A"],
                "waitingRoom": {"maxActiveShoppers": 2, "policy": "fifo",
                                "admissionTtlSeconds": 600}
            },
            {
                "phaseId": "general", "name": "General sale", "access": "open",
                "startsAt": at(-60)
            }
        ]
    }))
    .await
}

fn queue_path(event_id: &str, lane: Option<&str>) -> String {
    match lane {
        Some(lane) => format!("/v1/events/{event_id}/queue?phaseId={lane}"),
        None => format!("/v1/events/{event_id}/queue"),
    }
}

fn admin_queue_path(event_id: &str, lane: Option<&str>) -> String {
    queue_path(event_id, lane).replacen("/v1/", "/v1/admin/", 1)
}

/// Joins the lane's queue (or the general one); the queue ticket.
async fn join_queue(app: &TestApp, account: &str, event_id: &str, lane: Option<&str>) -> String {
    let joined = app
        .post(
            &token(account),
            &queue_path(event_id, lane),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.json());
    joined.json()["queueTicket"].as_str().unwrap().to_owned()
}

async fn queue_admin(app: &TestApp, event_id: &str, lane: Option<&str>) -> Value {
    let view = app.get(&app.admin, &admin_queue_path(event_id, lane)).await;
    assert_eq!(view.status, StatusCode::OK, "{}", view.json());
    view.json()
}

/// The admin view of the room once its release has ticked `n` more times on this node:
/// what the release did (or did not do) in those ticks, whatever time they took.
async fn after_ticks(app: &TestApp, event_id: &str, lane: Option<&str>, n: u64) -> Value {
    let start = queue_admin(app, event_id, lane).await["ticks"]
        .as_u64()
        .unwrap();
    for _ in 0..600 {
        let view = queue_admin(app, event_id, lane).await;
        if view["ticks"].as_u64().unwrap() >= start + n {
            return view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the room of {lane:?} never ticked {n} times");
}

async fn queue_status(app: &TestApp, account: &str, event_id: &str, ticket: &str) -> Value {
    let answer = app
        .send(
            app.http
                .get(format!("{}/v1/events/{event_id}/queue/status", app.base))
                .bearer_auth(token(account))
                .header("queue-ticket", ticket),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    answer.json()
}

async fn hold_admitted(
    app: &TestApp,
    account: &str,
    event_id: &str,
    admission: &str,
    seat: &str,
) -> common::Answer {
    app.send(
        app.http
            .post(format!("{}/v1/events/{event_id}/holds", app.base))
            .bearer_auth(token(account))
            .header("idempotency-key", uuid::Uuid::now_v7().to_string())
            .header("admission-token", admission)
            .json(&json!({ "seatIds": [seat] })),
    )
    .await
}

async fn each_lane_has_its_own_queue_release_and_slots(backend: Backend) {
    let app = TestApp::spawn_full(
        common::TestStore::new(backend).await,
        boxoffice_payments::simulator::SimulatorConfig::default(),
        common::RoomSetup::default(),
        true,
    )
    .await;
    two_queues(&app).await;
    app.finish().await;
}

/// The two-queue story, on whatever room state `app` runs.
async fn two_queues(app: &TestApp) {
    // A phase's own queue settings are checked as the event's.
    let bad = app
        .post(
            &app.admin,
            "/v1/admin/events",
            Some("bad-phase-room"),
            &json!({
                "name": "bad", "startsAt": at(86_400), "onSaleAt": at(-60),
                "currency": "EUR",
                "sections": [{"name": "A", "rows": 1, "seatsPerRow": 1, "priceMinor": 1}],
                "phases": [{"phaseId": "fanclub", "name": "Fan club", "access": "code",
                            "startsAt": at(-60), "waitingRoom": {"maxActiveShoppers": 0}}]
            }),
        )
        .await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        bad.json()
    );
    assert!(
        bad.json()
            .to_string()
            .contains("phases[0].waitingRoom.maxActiveShoppers"),
        "{}",
        bad.json()
    );

    let event_id = two_queue_event(app).await;
    let event = app
        .get(&token("ann"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(
        event["phases"][0]["waitingRoom"]["maxActiveShoppers"], 2,
        "{event}"
    );
    assert!(event["phases"][1].get("waitingRoom").is_none(), "{event}");

    // The operator pauses the general queue before anyone queues.
    let paused = app
        .put(
            &app.admin,
            &admin_queue_path(&event_id, None),
            &json!({"paused": true}),
        )
        .await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.json());
    assert_eq!(paused.json()["paused"], true);
    assert!(paused.json().get("phaseId").is_none());
    let lane = queue_admin(app, &event_id, Some("fanclub")).await;
    assert_eq!(lane["phaseId"], "fanclub", "{lane}");
    assert_eq!(lane["paused"], false, "{lane}");
    assert_eq!(lane["maxActiveShoppers"], 2, "{lane}");
    assert_eq!(
        queue_admin(app, &event_id, None).await["maxActiveShoppers"],
        1
    );
    let unknown = app
        .get(&app.admin, &admin_queue_path(&event_id, Some("nope")))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let unknown = app
        .delete(&token("ann"), &queue_path(&event_id, Some("nope")))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    // Three fan-club members queue in the lane, one fan in the general queue.
    let codes = generate(app, &event_id, 3, 1).await;
    let members = ["ann", "bob", "cat"];
    let mut tickets = std::collections::BTreeMap::new();
    for (member, code) in members.iter().zip(&codes) {
        assert_eq!(
            redeem(app, member, &event_id, code).await.status,
            StatusCode::OK
        );
        tickets.insert(
            *member,
            join_queue(app, member, &event_id, Some("fanclub")).await,
        );
    }
    let dan = join_queue(app, "dan", &event_id, None).await;
    // Joining again keeps the place: one per account per queue.
    assert_eq!(
        queue_admin(app, &event_id, Some("fanclub")).await["joined"],
        3
    );
    assert_eq!(queue_admin(app, &event_id, None).await["joined"], 1);

    // The paused general queue does not stop the lane: its first two are admitted.
    let ann = admitted(app, "ann", &event_id, &tickets["ann"]).await;
    let _bob = admitted(app, "bob", &event_id, &tickets["bob"]).await;
    // ... and the lane's own cap holds the third back, tick after tick.
    let lane = after_ticks(app, &event_id, Some("fanclub"), 20).await;
    assert_eq!(lane["activeShoppers"], 2, "{lane}");
    assert_eq!(lane["admitted"], 2, "{lane}");
    assert_eq!(
        queue_status(app, "cat", &event_id, &tickets["cat"]).await["status"],
        "WAITING"
    );
    let general = after_ticks(app, &event_id, None, 20).await;
    assert_eq!(general["admitted"], 0, "{general}");
    assert_eq!(general["serving"], 0, "{general}");
    assert_eq!(
        queue_status(app, "dan", &event_id, &dan).await["status"],
        "WAITING"
    );

    // A lane admission holds in its lane only, and its slot is the lane's.
    let outside = hold_admitted(app, "ann", &event_id, &ann, "B-1-1").await;
    assert_eq!(outside.code(), "OUTSIDE_PHASE", "{}", outside.json());
    let held = hold_admitted(app, "ann", &event_id, &ann, "A-1-1").await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let lane = queue_admin(app, &event_id, Some("fanclub")).await;
    assert_eq!(lane["slots"]["holding"], 1, "{lane}");
    assert_eq!(queue_admin(app, &event_id, None).await["activeShoppers"], 0);

    // A member leaving the lane frees a lane slot: the third member is admitted, while
    // the general queue is still paused.
    let left = app
        .delete(&token("bob"), &queue_path(&event_id, Some("fanclub")))
        .await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.json());
    assert_eq!(left.json()["admissionEnded"], true);
    let cat = admitted(app, "cat", &event_id, &tickets["cat"]).await;
    // Leaving the general queue touches nothing of the lane.
    let left = app
        .delete(&token("cat"), &queue_path(&event_id, None))
        .await;
    assert_eq!(left.json()["admissionEnded"], false);
    let held = hold_admitted(app, "cat", &event_id, &cat, "A-1-2").await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());

    // A released hold gives its slot back in the lane's room.
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
    let released = app
        .delete(&token("cat"), &format!("/v1/holds/{hold_id}"))
        .await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    let lane = queue_admin(app, &event_id, Some("fanclub")).await;
    assert_eq!(lane["slots"]["holding"], 1, "{lane}");

    // Resumed, the general queue admits its fan, whose slot is the general room's.
    let resumed = app
        .put(
            &app.admin,
            &admin_queue_path(&event_id, None),
            &json!({"paused": false}),
        )
        .await;
    assert_eq!(resumed.json()["paused"], false);
    let dan = admitted(app, "dan", &event_id, &dan).await;
    let held = hold_admitted(app, "dan", &event_id, &dan, "B-1-1").await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.json());
    let general = queue_admin(app, &event_id, None).await;
    assert_eq!(general["slots"]["holding"], 1, "{general}");
    assert_eq!(general["admitted"], 1, "{general}");
    // A general admission is no lane admission: its fan's ticket polls the general room.
    assert_eq!(
        queue_admin(app, &event_id, Some("fanclub")).await["admitted"],
        3
    );
}

/// The two-queue story with the rooms in Redis (`BOXOFFICE_TEST_REDIS_URL`, default
/// `redis://127.0.0.1:6379`): a lane's room keys (`{event~phase}`) live beside the event's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_lane_has_its_own_queue_in_redis() {
    let url = std::env::var("BOXOFFICE_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("bo:test:{}:", uuid::Uuid::now_v7().simple());
    let rooms = boxoffice_waitroom_state::redis::RedisRooms::connect(&url, &prefix)
        .await
        .expect("Redis for the waiting-room tests (BOXOFFICE_TEST_REDIS_URL)");
    let app = TestApp::spawn_full(
        common::TestStore::new(Backend::Sqlite).await,
        boxoffice_payments::simulator::SimulatorConfig::default(),
        common::RoomSetup {
            state: std::sync::Arc::new(rooms),
            options: Default::default(),
        },
        true,
    )
    .await;
    two_queues(&app).await;
    app.finish().await;
    let client = ::redis::Client::open(url).unwrap();
    let mut conn = client.get_connection().unwrap();
    let keys: Vec<String> = ::redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut conn)
        .unwrap();
    assert!(
        keys.iter().any(|key| key.contains("~fanclub}")),
        "the lane's room is in Redis: {keys:?}"
    );
    let _: () = ::redis::cmd("DEL").arg(keys).query(&mut conn).unwrap();
}
