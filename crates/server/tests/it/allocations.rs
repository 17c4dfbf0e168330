//! Allocations, comps and the box office over HTTP on both backends (issue 40): seats and
//! units kept back are refused to fans until released (by hand, or at `releaseAt` by the
//! store's clock) and then sell like any other; comps issued from an allocation are the
//! account's tickets at price 0, counted in the report, and `check` stays clean; a sale at the
//! box office confirms at once in cash with its tickets; none of it is open to a fan.

use crate::common;

use crate::common::{Backend, TestApp, token};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    kept_seats_are_refused_to_fans_until_released_by_hand_then_sold,
    kept_seats_go_on_sale_at_release_time_by_the_store_clock,
    comps_from_an_allocation_are_the_accounts_tickets_and_counted,
    allocations_are_for_operators_only,
    a_box_office_sale_confirms_with_its_tickets_under_the_sale_rules,
);

fn allocations(event_id: &str) -> String {
    format!("/v1/admin/events/{event_id}/allocations")
}

async fn add(app: &TestApp, event_id: &str, key: &str, body: Value) -> common::Answer {
    app.post(&app.admin, &allocations(event_id), Some(key), &body)
        .await
}

async fn release(app: &TestApp, event_id: &str, id: &str, body: Value) -> common::Answer {
    let key = format!("release-{}", uuid::Uuid::now_v7());
    app.post(
        &app.admin,
        &format!("{}/{id}/release", allocations(event_id)),
        Some(&key),
        &body,
    )
    .await
}

async fn listed(app: &TestApp, event_id: &str, id: &str) -> Value {
    let list = app.get(&app.admin, &allocations(event_id)).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.json());
    list.json()["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["allocationId"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn hold_code(
    app: &TestApp,
    account: &str,
    event_id: &str,
    body: Value,
) -> (StatusCode, Value) {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    let held = app.hold(account, event_id, &key, body).await;
    (held.status, held.json())
}

/// Polls the seat map (a read model, advanced from the change feed) until `seat` shows
/// `status` (bounded: 10 s).
async fn seat_shows(app: &TestApp, event_id: &str, seat: &str, status: &str) {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = app
            .get(&token("ann"), &format!("/v1/events/{event_id}/seatmap"))
            .await
            .json();
        let shown = last["seats"]
            .as_array()
            .and_then(|seats| seats.iter().find(|s| s["seatId"] == seat))
            .map(|s| s["status"].clone());
        if shown == Some(json!(status)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("seat {seat} never showed {status}: {last}");
}

async fn kept_seats_are_refused_to_fans_until_released_by_hand_then_sold(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // Given at creation: the artist's two seats, kept before the sale opens.
    let event_id = app
        .create_event(json!({
            "allocations": [{"allocationId": "artist", "name": "Artist guests",
                             "seatIds": ["A-1-1", "A-1-2"]}]
        }))
        .await;
    let (status, refused) = hold_code(&app, "ann", &event_id, json!({"seatIds": ["A-1-2"]})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["code"], "SEATS_UNAVAILABLE", "{refused}");
    seat_shows(&app, &event_id, "A-1-1", "HELD").await;
    // Best available skips kept seats.
    let (status, best) = hold_code(
        &app,
        "bob",
        &event_id,
        json!({"bestAvailable": {"quantity": 2}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{best}");
    let seats: Vec<&str> = best["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seatId"].as_str().unwrap())
        .collect();
    assert!(
        !seats.contains(&"A-1-1") && !seats.contains(&"A-1-2"),
        "{best}"
    );

    // Added later: a sponsor's seat and every unit of the floor.
    let body = json!({"allocationId": "sponsor", "name": "Sponsor",
                      "seatIds": ["A-2-5"], "tierUnits": {"GA": 100}});
    let added = add(&app, &event_id, "add-sponsor", body.clone()).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.json());
    assert_eq!(
        added.json()["kept"]["tierUnits"]["GA"],
        100,
        "{}",
        added.json()
    );
    let again = add(&app, &event_id, "add-sponsor", body.clone()).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.bytes, added.bytes, "a replay answers the same bytes");
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let taken = add(&app, &event_id, "add-sponsor-again", body).await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(taken.code(), "ALLOCATION_EXISTS");
    // A seat already held is not kept, and nothing of that allocation is.
    let clash = add(
        &app,
        &event_id,
        "add-clash",
        json!({"allocationId": "press", "name": "Press",
               "seatIds": ["A-3-1", seats[0]]}),
    )
    .await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.json());
    assert_eq!(clash.code(), "SEATS_UNAVAILABLE");
    assert_eq!(clash.json()["unavailableSeatIds"], json!([seats[0]]));
    assert!(
        app.holdable("cy", &event_id, "A-3-1").await,
        "all or nothing"
    );

    let (status, sold_out) = hold_code(
        &app,
        "ann",
        &event_id,
        json!({"tierId": "GA", "quantity": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{sold_out}");
    assert_eq!(sold_out["code"], "SOLD_OUT");

    // Released by hand, a part: then sold like any seat.
    let released = release(&app, &event_id, "artist", json!({"seatIds": ["A-1-1"]})).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    assert_eq!(released.json()["kept"]["seatIds"], json!(["A-1-2"]));
    let again = release(&app, &event_id, "artist", json!({"seatIds": ["A-1-1"]})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.code(), "NOT_KEPT");
    let (order_id, _) =
        common::buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    assert!(!order_id.is_empty());
    assert!(!app.holdable("cy", &event_id, "A-1-2").await, "still kept");
    let released = release(&app, &event_id, "sponsor", json!({"tierUnits": {"GA": 2}})).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    assert_eq!(released.json()["kept"]["tierUnits"]["GA"], 98);
    let (status, held) = hold_code(
        &app,
        "dan",
        &event_id,
        json!({"tierId": "GA", "quantity": 2}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{held}");

    // Everything left of the artist's.
    let released = release(&app, &event_id, "artist", json!({})).await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.json());
    assert_eq!(released.json()["kept"]["seatIds"], json!([]));
    assert!(app.holdable("cy", &event_id, "A-1-2").await);
    let artist = listed(&app, &event_id, "artist").await;
    assert_eq!(artist["seatIds"], json!(["A-1-1", "A-1-2"]), "{artist}");
    assert_eq!(artist["kept"]["seatIds"], json!([]), "{artist}");
    app.finish().await;
}

async fn kept_seats_go_on_sale_at_release_time_by_the_store_clock(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({})).await;
    let now = app.db.store.now().await.unwrap();
    let release_at = now + time::Duration::seconds(60);
    let release_at = release_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let added = add(
        &app,
        &event_id,
        "add-kill",
        json!({"allocationId": "kill", "name": "Production kill",
               "seatIds": ["A-5-1"], "releaseAt": release_at}),
    )
    .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.json());
    assert!(!app.holdable("ann", &event_id, "A-5-1").await);
    app.db.advance_clock(61_000).await;
    let (status, held) = hold_code(&app, "ann", &event_id, json!({"seatIds": ["A-5-1"]})).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let kill = listed(&app, &event_id, "kill").await;
    assert_eq!(kill["kept"]["seatIds"], json!([]), "{kill}");
    // A late release finds nothing kept.
    let late = release(&app, &event_id, "kill", json!({"seatIds": ["A-5-1"]})).await;
    assert_eq!(late.status, StatusCode::CONFLICT);
    assert_eq!(late.code(), "NOT_KEPT");
    app.finish().await;
}

async fn comps_from_an_allocation_are_the_accounts_tickets_and_counted(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "onSaleAt": "2099-01-01T00:00:00Z",
            "maxTicketsPerAccount": 2,
            "allocations": [{"allocationId": "guests", "name": "Guest list",
                             "seatIds": ["A-3-1", "A-3-2", "A-3-3"], "tierUnits": {"GA": 2}}]
        }))
        .await;
    let comps = format!("{}/guests/comps", allocations(&event_id));
    let comp = app
        .post(
            &app.admin,
            &comps,
            Some("comp-1"),
            &json!({"accountId": "guest", "seatIds": ["A-3-1", "A-3-2"]}),
        )
        .await;
    assert_eq!(comp.status, StatusCode::CREATED, "{}", comp.json());
    let view = comp.json();
    assert_eq!(view["status"], "CONFIRMED", "{view}");
    assert_eq!(view["totalMinor"], 0, "{view}");
    assert_eq!(view["ticketIds"].as_array().unwrap().len(), 2, "{view}");
    let replay = app
        .post(
            &app.admin,
            &comps,
            Some("comp-1"),
            &json!({"accountId": "guest", "seatIds": ["A-3-1", "A-3-2"]}),
        )
        .await;
    assert_eq!(replay.bytes, comp.bytes, "a replay issues nothing more");
    let order_id = view["orderId"].as_str().unwrap();
    // The account sees its order and tickets, and prints them; nobody else does.
    let order = common::order_until(&app, "guest", order_id, |o| {
        o["orderStatus"] == "CONFIRMED" && o["tickets"].as_array().is_some_and(|t| t.len() == 2)
    })
    .await;
    assert_eq!(order["totalMinor"], 0, "{order}");
    let pdf = app
        .get(
            &token("guest"),
            &format!("/v1/orders/{order_id}/tickets.pdf"),
        )
        .await;
    assert_eq!(pdf.status, StatusCode::OK);
    assert!(pdf.bytes.starts_with(b"%PDF"));
    let other = app
        .get(&token("eve"), &format!("/v1/orders/{order_id}"))
        .await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);

    let units = app
        .post(
            &app.admin,
            &comps,
            Some("comp-2"),
            &json!({"accountId": "crew", "quantity": 1}),
        )
        .await;
    assert_eq!(units.status, StatusCode::CREATED, "{}", units.json());
    let gone = app
        .post(
            &app.admin,
            &comps,
            Some("comp-3"),
            &json!({"accountId": "guest", "seatIds": ["A-3-1"]}),
        )
        .await;
    assert_eq!(gone.status, StatusCode::CONFLICT);
    assert_eq!(gone.code(), "NOT_KEPT");
    // The purchase limit holds for comps too: guest owns 2 of 2.
    let over = app
        .post(
            &app.admin,
            &comps,
            Some("comp-4"),
            &json!({"accountId": "guest", "quantity": 1, "tierId": "GA"}),
        )
        .await;
    assert_eq!(over.status, StatusCode::CONFLICT, "{}", over.json());
    assert_eq!(over.code(), "PURCHASE_LIMIT");
    let bad = app
        .post(
            &app.admin,
            &comps,
            Some("comp-5"),
            &json!({"accountId": "not an account", "seatIds": ["A-3-3"]}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    let report = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/report"))
        .await
        .json();
    assert_eq!(report["totals"]["comps"], 3, "{report}");
    assert_eq!(report["totals"]["revenueMinor"], 0, "{report}");
    let section = &report["lines"][0];
    assert_eq!(
        (section["sold"].clone(), section["comps"].clone()),
        (json!(2), json!(2))
    );
    let guests = listed(&app, &event_id, "guests").await;
    assert_eq!(guests["comps"], 2, "{guests}");
    assert_eq!(guests["kept"]["seatIds"], json!(["A-3-3"]), "{guests}");
    assert_eq!(guests["kept"]["tierUnits"]["GA"], 1, "{guests}");
    assert!(app.db.violations().await.is_empty());
    // The check can fail: a comp order whose record is gone is no allocation's comp.
    let sql = format!("DELETE FROM allocation_comp WHERE order_id = '{order_id}'");
    let sql = sqlx::AssertSqlSafe(sql);
    match (&app.db.pg, &app.db.sqlite) {
        (Some(pg), _) => sqlx::query(sql).execute(pg.pool()).await.map(|_| ()),
        (None, Some(sqlite)) => sqlx::query(sql).execute(sqlite.pool()).await.map(|_| ()),
        (None, None) => unreachable!("a test store has a backend"),
    }
    .unwrap();
    let violations = app.db.violations().await;
    assert!(
        violations
            .iter()
            .any(|v| v.contains(order_id) && v.contains("no allocation's comp")),
        "{violations:?}"
    );
    app.db
        .store
        .record_comp(
            &boxoffice_store::allocation::CompRecord {
                event_id: event_id.clone(),
                order_id: order_id.to_owned(),
                allocation_id: "guests".into(),
                account_id: "guest".into(),
                issued_by: "ops".into(),
            },
            None,
        )
        .await
        .unwrap();
    app.finish().await;
}

async fn allocations_are_for_operators_only(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "allocations": [{"allocationId": "artist", "name": "Artist", "seatIds": ["A-1-1"]}]
        }))
        .await;
    let fan = token("ann");
    let list = app.get(&fan, &allocations(&event_id)).await;
    assert_eq!(list.status, StatusCode::FORBIDDEN);
    let added = app
        .post(
            &fan,
            &allocations(&event_id),
            Some("k1"),
            &json!({"allocationId": "mine", "name": "Mine", "seatIds": ["A-1-2"]}),
        )
        .await;
    assert_eq!(added.status, StatusCode::FORBIDDEN);
    let released = app
        .post(
            &fan,
            &format!("{}/artist/release", allocations(&event_id)),
            Some("k2"),
            &json!({}),
        )
        .await;
    assert_eq!(released.status, StatusCode::FORBIDDEN);
    let comp = app
        .post(
            &fan,
            &format!("{}/artist/comps", allocations(&event_id)),
            Some("k3"),
            &json!({"accountId": "ann", "seatIds": ["A-1-1"]}),
        )
        .await;
    assert_eq!(comp.status, StatusCode::FORBIDDEN);
    // A fan cannot release the allocation's hold either: it is no hold of theirs.
    assert!(!app.holdable("ann", &event_id, "A-1-1").await);
    // Unknown things are 404; bad bodies 422.
    let unknown = release(&app, &event_id, "nobody", json!({})).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let no_event = app
        .get(
            &app.admin,
            &allocations("00000000-0000-7000-8000-000000000000"),
        )
        .await;
    assert_eq!(no_event.status, StatusCode::NOT_FOUND);
    for bad in [
        json!({"allocationId": "x y", "name": "X", "seatIds": ["A-1-3"]}),
        json!({"allocationId": "x", "name": "", "seatIds": ["A-1-3"]}),
        json!({"allocationId": "x", "name": "X"}),
        json!({"allocationId": "x", "name": "X", "seatIds": ["Z-1-1"]}),
        json!({"allocationId": "x", "name": "X", "tierUnits": {"GA": 101}}),
        json!({"allocationId": "x", "name": "X", "seatIds": ["A-1-3"], "extra": 1}),
        json!({"allocationId": "x", "name": "X", "seatIds": ["A-1-3"],
               "releaseAt": "2000-01-01T00:00:00Z"}),
    ] {
        let refused = add(
            &app,
            &event_id,
            &format!("bad-{}", uuid::Uuid::now_v7()),
            bad.clone(),
        )
        .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            refused.json()
        );
    }
    app.finish().await;
}

async fn a_box_office_sale_confirms_with_its_tickets_under_the_sale_rules(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "maxSeatsPerHold": 4,
            "allocations": [{"allocationId": "artist", "name": "Artist", "seatIds": ["A-4-3"]}]
        }))
        .await;
    let sales = format!("/v1/admin/events/{event_id}/box-office/sales");
    let body = json!({"seatIds": ["A-4-1", "A-4-2"], "payment": "cash",
                      "buyer": {"name": "Walk-in", "email": "walk@example.com"}});
    let sold = app.post(&app.admin, &sales, Some("bo-1"), &body).await;
    assert_eq!(sold.status, StatusCode::CREATED, "{}", sold.json());
    let view = sold.json();
    assert_eq!(view["status"], "CONFIRMED", "{view}");
    assert_eq!(view["payment"], "cash");
    assert_eq!(view["totalMinor"], 2000, "{view}");
    let tickets = view["tickets"].as_array().unwrap();
    assert_eq!(tickets.len(), 2, "{view}");
    assert!(tickets[0]["qrSvg"].as_str().unwrap().contains("<svg"));
    assert!(!tickets[0]["code"].as_str().unwrap().is_empty());
    let replay = app.post(&app.admin, &sales, Some("bo-1"), &body).await;
    assert_eq!(replay.bytes, sold.bytes, "a replay sells nothing more");
    // The sale's account has the buyer's address: its tickets are mailed as any order's.
    let sql = "SELECT account_id FROM account WHERE email = 'walk@example.com'";
    let accounts: Vec<String> = match (&app.db.pg, &app.db.sqlite) {
        (Some(pg), _) => sqlx::query_scalar(sql).fetch_all(pg.pool()).await.unwrap(),
        (None, Some(sqlite)) => sqlx::query_scalar(sql)
            .fetch_all(sqlite.pool())
            .await
            .unwrap(),
        (None, None) => unreachable!("a test store has a backend"),
    };
    assert_eq!(accounts.len(), 1, "{accounts:?}");
    assert!(accounts[0].starts_with("box-office:"), "{accounts:?}");
    let pdf_url = view["pdfUrl"].as_str().unwrap();
    let pdf = app.get(&app.admin, pdf_url).await;
    assert_eq!(pdf.status, StatusCode::OK);
    assert!(pdf.bytes.starts_with(b"%PDF"));
    assert_eq!(
        app.get(&token("ann"), pdf_url).await.status,
        StatusCode::FORBIDDEN
    );
    // Sold like any sale: a fan cannot have the seats, nor the box office a kept one.
    let (status, refused) = hold_code(&app, "ann", &event_id, json!({"seatIds": ["A-4-1"]})).await;
    assert_eq!(
        (status, refused["code"].clone()),
        (StatusCode::CONFLICT, json!("SEATS_UNAVAILABLE"))
    );
    let kept = app
        .post(
            &app.admin,
            &sales,
            Some("bo-2"),
            &json!({"seatIds": ["A-4-3"], "payment": "cash"}),
        )
        .await;
    assert_eq!(kept.status, StatusCode::CONFLICT, "{}", kept.json());
    assert_eq!(kept.code(), "SEATS_UNAVAILABLE");
    let card = app
        .post(
            &app.admin,
            &sales,
            Some("bo-3"),
            &json!({"tierId": "GA", "quantity": 2, "payment": "card_present"}),
        )
        .await;
    assert_eq!(card.status, StatusCode::CREATED, "{}", card.json());
    assert_eq!(card.json()["status"], "CONFIRMED");
    assert_eq!(card.json()["tickets"].as_array().unwrap().len(), 2);
    for (bad, field) in [
        (json!({"seatIds": ["A-4-5"], "payment": "cheque"}), None),
        (
            json!({"tierId": "GA", "quantity": 5, "payment": "cash"}),
            Some("quantity"),
        ),
        (json!({"payment": "cash"}), Some("body")),
        (
            json!({"seatIds": ["A-4-5"], "payment": "cash", "buyer": {"email": "nope"}}),
            Some("buyer.email"),
        ),
    ] {
        let refused = app
            .post(
                &app.admin,
                &sales,
                Some(&format!("bad-{}", uuid::Uuid::now_v7())),
                &bad,
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            refused.json()
        );
        if let Some(field) = field {
            assert_eq!(refused.json()["field"], field, "{}", refused.json());
        }
    }
    let fan = app
        .post(
            &token("ann"),
            &sales,
            Some("bo-fan"),
            &json!({"seatIds": ["A-4-5"], "payment": "cash"}),
        )
        .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN);
    let report = app
        .get(&app.admin, &format!("/v1/admin/events/{event_id}/report"))
        .await
        .json();
    assert_eq!(report["totals"]["sold"], 4, "{report}");
    assert_eq!(report["totals"]["comps"], 0, "{report}");
    assert_eq!(
        report["boxOffice"],
        json!([
            {"payment": "card_present", "orders": 1, "seats": 2, "chargedMinor": 1000},
            {"payment": "cash", "orders": 1, "seats": 2, "chargedMinor": 2000},
        ]),
        "{report}"
    );

    // The event is cancelled: the card sale's money goes back through the provider; the cash
    // sale's cannot (the provider never took it), so its refund is FAILED, the operator's to
    // pay at the desk, and says why; `check` (in `finish`) holds every paid order refunded or
    // FAILED.
    let cancelled = app
        .post(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/cancel"),
            Some("bo-cancel"),
            &json!({"reason": "Box office story over"}),
        )
        .await;
    assert_eq!(
        cancelled.status,
        StatusCode::ACCEPTED,
        "{}",
        cancelled.json()
    );
    let mut done = Value::Null;
    for _ in 0..300 {
        done = app
            .get(
                &app.admin,
                &format!("/v1/admin/events/{event_id}/cancellation"),
            )
            .await
            .json();
        if done["status"] == "CANCELLED" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(done["status"], "CANCELLED", "{done}");
    assert_eq!(done["orders"], 2, "{done}");
    assert_eq!(done["refunded"], 1, "{done}");
    assert_eq!(done["failed"], 1, "{done}");
    assert_eq!(done["amountRefundedMinor"], 1000, "{done}");
    app.finish().await;
}
